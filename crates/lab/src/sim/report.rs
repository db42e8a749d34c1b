//! The tables and timelines of `nearflow sim`: every one says SIMULATED and names the machine
//! model.

use anyhow::{Context, Result};
use nearflow_policy::PolicyKind;
use nearflow_sim::{AllocatorKind, Model, Report, TaskSpan};
use std::path::PathBuf;

pub(crate) fn trace_file(
    path: &std::path::Path,
    runs: usize,
    grid: &str,
    p: PolicyKind,
    alloc: AllocatorKind,
    allocators: usize,
) -> PathBuf {
    if runs == 1 {
        return path.to_path_buf();
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("sim");
    let alloc = if allocators > 1 {
        format!("-{alloc}")
    } else {
        String::new()
    };
    path.with_file_name(format!("{stem}-{grid}-{p}{alloc}.svg"))
}

/// The timeline of one simulated run, drawn as the runtime's `--trace` draws a real one.
pub(crate) fn write_trace(
    path: &std::path::Path,
    spans: &[TaskSpan],
    r: &Report,
    grid: &str,
) -> Result<()> {
    let events: Vec<nearflow_rt::TraceEvent> = spans
        .iter()
        .map(|s| nearflow_rt::TraceEvent {
            worker: s.pu,
            request: u64::from(s.request),
            label: s.task,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            cpu_ns: s.end_ns - s.start_ns,
        })
        .collect();
    let title = format!(
        "SIMULATED — model of {}: {} {}, {}, {}",
        r.machine, grid, r.workload, r.policy, r.allocator
    );
    let svg =
        nearflow_flow::trace::svg(&events, r.pus, &nearflow_flow::trace::Names::new(), &title);
    std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("timeline written to {}", path.display());
    Ok(())
}

/// The table of every run, its workloads and the rules that found tasks.
pub(crate) fn table(reports: &[(String, Report)]) -> Result<String, std::fmt::Error> {
    use std::fmt::Write;
    let mut out = String::new();
    let Some((_, first)) = reports.first() else {
        return Ok(out);
    };
    writeln!(
        out,
        "SIMULATED on a model of {} — not measured; model constants: crates/sim/src/model.rs{}",
        first.machine,
        if first.model == Model::default() {
            ""
        } else {
            " (changed with --model)"
        }
    )?;
    let levels: Vec<u8> = first.levels.iter().map(|l| l.level).collect();
    writeln!(
        out,
        "remote/DRAM: remote bytes over the bytes read from memory (cache misses); remote/read: \
         remote bytes over all bytes read (cache hits included)"
    )?;
    let mut seen: Vec<&str> = Vec::new();
    for (grid, r) in reports {
        if !seen.contains(&grid.as_str()) {
            seen.push(grid);
            writeln!(out, "{grid}: {} ({} tasks)", r.workload, r.tasks)?;
        }
    }
    write!(
        out,
        "{:<6} {:<10} {:<9} {:>12} {:>8} {:>7} {:>11} {:>11}",
        "grid", "policy", "alloc", "makespan ms", "vs 1st", "util", "remote/DRAM", "remote/read"
    )?;
    for l in &levels {
        write!(out, " {:>7}", format!("L{l} hit"))?;
    }
    writeln!(out, " {:>8} {:>8}", "steals", "wakes")?;
    for (grid, r) in reports {
        let base = reports
            .iter()
            .find(|(g, x)| g == grid && x.allocator == r.allocator)
            .map_or(r.makespan_ns, |(_, x)| x.makespan_ns);
        write!(
            out,
            "{:<6} {:<10} {:<9} {:>12.3} {:>7.2}x {:>6.1}% {:>10.1}% {:>10.1}%",
            grid,
            r.policy,
            r.allocator,
            r.makespan_ns as f64 / 1e6,
            r.makespan_ns as f64 / base.max(1) as f64,
            100.0 * r.utilisation(),
            100.0 * r.dram_remote_share,
            100.0 * r.read_remote_share
        )?;
        for l in &r.levels {
            write!(out, " {:>6.1}%", 100.0 * l.hit_rate)?;
        }
        writeln!(out, " {:>8} {:>8}", r.steals, r.wakes)?;
    }
    writeln!(out, "tasks found per rule (all PUs):")?;
    for (grid, r) in reports {
        let rules: Vec<String> = r
            .rules
            .iter()
            .map(|(n, c)| format!("{}: {c}", n.split(' ').next().unwrap_or(n)))
            .collect();
        writeln!(
            out,
            "  {grid} {} {}: {}",
            r.policy,
            r.allocator,
            rules.join(", ")
        )?;
    }
    Ok(out)
}
