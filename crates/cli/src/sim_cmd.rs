//! `nearflow sim`: a workload on a model of a machine, under several policies, in the
//! discrete-event simulator (`nearflow-sim`). Every figure it prints is SIMULATED.
//!
//! `--validate` (on this host's topology only) also runs the very same work on the real runtime
//! — a task graph task by task, or the generated plans on the engine — and prints measured
//! against simulated makespans, per policy and grid entry (median of `--reps` interleaved
//! rounds).
//!
//! Length: the command's flags, the workloads it builds, its table, CSV and timelines; the real
//! runs of `--validate` and the calibration of plans are in `sim_validate.rs` and
//! `sim_calibrate.rs`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use nearflow_policy::PolicyKind;
use nearflow_sim::workload::{self, PipelineSpec};
use nearflow_sim::{
    simulate_plan, simulate_traced, Allocator, Graph, Model, Report, RunOptions, TaskSpan,
};

use crate::args::{parse_list, TopoArgs};
use crate::bench::{progress, Csv};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SimWorkload {
    /// Requests of packets through a chain of operators (`--grid NxM`: N·M requests).
    Pipeline,
    /// Fork-join Fibonacci, `--size` = n (bench overhead's fib), one request per grid cell.
    Fib,
    /// One task spawning `--size` deferred tasks (bench overhead's fan-out), per request.
    Fanout,
    /// The queue study's matrix product, `--size` = n (load-balancing-queues.txt §III).
    Matmul,
    /// Random spawn trees of `--size` tasks (nearflow stress), per request.
    Stress,
    /// The generated plan of `bench plans` (`--rows` per source), its operators' costs
    /// calibrated from a traced run on this host; `--grid NxM`: N·M plans at once.
    Plans,
    /// SP²Bench query plans (not modelled yet: refused).
    Sp2bench,
}

#[derive(Args, Debug)]
pub struct SimCmd {
    #[command(flatten)]
    pub topo: TopoArgs,
    /// What runs.
    #[arg(long, value_enum, default_value = "pipeline")]
    pub workload: SimWorkload,
    /// Grid of NxM entries: N·M requests at once (matmul ignores it: one request).
    #[arg(long, default_value = "1x1,4x4")]
    pub grid: String,
    /// Policies (comma-separated).
    #[arg(long, default_value = "las,nls,bobox2011,fifo-rr")]
    pub policies: String,
    /// Allocators of written blocks (comma-separated: nearflow, system).
    #[arg(long, default_value = "nearflow")]
    pub allocators: String,
    /// Size of the workload (see --workload); default per workload.
    #[arg(long)]
    pub size: Option<u32>,
    /// Pipeline: packets per request.
    #[arg(long, default_value_t = 64)]
    pub packets: u32,
    /// Pipeline: operators after the source.
    #[arg(long, default_value_t = 6)]
    pub operators: u32,
    /// Pipeline: packet size (default: half the L2 of the machine, as the engine's).
    #[arg(long, value_name = "BYTES")]
    pub packet_bytes: Option<u64>,
    /// Pipeline: work per packet byte per operator, in ns.
    #[arg(long, default_value_t = 0.5)]
    pub ns_per_byte: f64,
    /// Pipeline: each request's input on its own node (spawned homed) instead of on node 0.
    #[arg(long)]
    pub homed_input: bool,
    /// Plans: rows per source of the generated plan.
    #[arg(long, default_value_t = 20_000)]
    pub rows: u64,
    /// Task work in ns (fib, fanout, stress).
    #[arg(long, default_value_t = 200.0)]
    pub work_ns: f64,
    /// Seed (random stealing, stress trees).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Change a model constant: KEY=VALUE (repeatable; keys in crates/sim/src/model.rs).
    #[arg(long, value_name = "KEY=VALUE")]
    pub model: Vec<String>,
    /// Also write the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write a per-PU timeline (SVG, as `run --trace`) of each simulated run: FILE itself for
    /// one run, else FILE's stem followed by -GRID-POLICY[-ALLOCATOR].svg.
    #[arg(long, value_name = "FILE.svg")]
    pub trace: Option<PathBuf>,
    /// Print every report as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// Also run each graph on the real runtime of this host and compare (host topology only).
    #[arg(long)]
    pub validate: bool,
    /// Rounds of the real runs of --validate (median reported).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
}

fn parse_grid(s: &str) -> Result<Vec<(u32, u32)>> {
    s.split(',')
        .map(|e| {
            let (a, b) = e
                .trim()
                .split_once('x')
                .with_context(|| format!("grid entry `{e}` is not NxM"))?;
            let (a, b): (u32, u32) = (
                a.parse().with_context(|| format!("grid entry `{e}`"))?,
                b.parse().with_context(|| format!("grid entry `{e}`"))?,
            );
            if a == 0 || b == 0 || a * b > 4096 {
                bail!("grid entry `{e}`: N and M must be positive, N·M at most 4096");
            }
            Ok((a, b))
        })
        .collect()
}

fn graph(cmd: &SimCmd, machine: &nearflow_topo::Machine, requests: u32) -> Result<Graph> {
    let size = cmd.size;
    Ok(match cmd.workload {
        SimWorkload::Pipeline => {
            let packet_bytes = match cmd.packet_bytes {
                Some(0) => bail!("--packet-bytes must be positive"),
                Some(b) => b,
                None => machine
                    .cache_size(0, 2)
                    .map_or(256 << 10, |l2| (l2 / 2).max(4096)),
            };
            if !(cmd.ns_per_byte.is_finite() && cmd.ns_per_byte >= 0.0) {
                bail!("--ns-per-byte must be a number ≥ 0");
            }
            workload::pipeline(&PipelineSpec {
                requests,
                packets: size.unwrap_or(cmd.packets),
                operators: cmd.operators,
                packet_bytes,
                ns_per_byte: cmd.ns_per_byte,
                homed_input: cmd.homed_input,
                nodes: machine.node_count(),
            })?
        }
        SimWorkload::Fib => workload::fib(size.unwrap_or(20), cmd.work_ns, requests)?,
        SimWorkload::Fanout => workload::fanout(size.unwrap_or(20_000), cmd.work_ns, requests)?,
        SimWorkload::Matmul => workload::matmul(size.unwrap_or(256), 1.0)?,
        SimWorkload::Stress => {
            workload::stress(requests, size.unwrap_or(20_000), cmd.work_ns, cmd.seed)?
        }
        SimWorkload::Plans => unreachable!("plans are not a task graph"),
        SimWorkload::Sp2bench => bail!(
            "not supported yet: the `sp2bench` workload needs the SPARQL engine's plans exported \
             with their calibrated costs (issue 13); available: plans, pipeline, fib, fanout, \
             matmul, stress"
        ),
    })
}

pub fn run(cmd: &SimCmd) -> Result<()> {
    let machine = cmd.topo.load()?;
    let policies: Vec<PolicyKind> = parse_list(&cmd.policies)?;
    let allocators: Vec<Allocator> = parse_list(&cmd.allocators)?;
    if policies.is_empty() || allocators.is_empty() {
        bail!("no policy or no allocator given");
    }
    if !(cmd.work_ns.is_finite() && cmd.work_ns >= 0.0) {
        bail!("--work-ns must be a number ≥ 0");
    }
    let mut model = Model::default();
    for kv in &cmd.model {
        model.set(kv)?;
    }
    let grid = if cmd.workload == SimWorkload::Matmul {
        vec![(1, 1)]
    } else {
        parse_grid(&cmd.grid)?
    };
    let bar = progress(
        (grid.len() * policies.len() * allocators.len()) as u64,
        "sim",
        cmd.json,
    );
    if cmd.validate && !machine.source().is_host() {
        bail!("--validate compares with real runs, so it needs this host's topology (no --preset, --synthetic or --xml)");
    }
    let mut reports: Vec<(String, Report)> = Vec::new();
    let mut graphs = Vec::new();
    let plan = if cmd.workload == SimWorkload::Plans {
        let packet_bytes = match cmd.packet_bytes {
            Some(0) => bail!("--packet-bytes must be positive"),
            Some(b) => b,
            None => nearflow_flow::default_packet_bytes(&machine) as u64,
        };
        bar.set_message("calibrating: the generated plan, traced, on this host");
        let c = crate::sim_calibrate::genplan(cmd.rows, packet_bytes)?;
        if !cmd.json {
            bar.suspend(|| {
                println!(
                    "calibrated on this host ({}): the generated plan, {} operators, {} rows per \
                     source, 4 copies at once, traced, {:.1} ms at {} B packets (LAS); simulated \
                     at {} B packets",
                    crate::bench::host_cpu(),
                    c.model.operators.len(),
                    cmd.rows,
                    c.traced_ms,
                    c.host_packet_bytes,
                    packet_bytes
                )
            });
        }
        Some(c.model)
    } else {
        None
    };
    for &(n, m) in &grid {
        let g = match &plan {
            Some(_) => Graph::default(),
            None => graph(cmd, &machine, n * m)?,
        };
        for &alloc in &allocators {
            for &p in &policies {
                bar.set_message(format!("{n}x{m} {p} {alloc}"));
                let (r, spans) = match &plan {
                    Some(plan) => simulate_plan(
                        &machine,
                        p,
                        &model,
                        plan,
                        (n * m) as usize,
                        RunOptions {
                            alloc,
                            seed: cmd.seed,
                            traced: cmd.trace.is_some(),
                        },
                    )?,
                    None => simulate_traced(&machine, p, &model, &g, alloc, cmd.seed)?,
                };
                if let Some(path) = &cmd.trace {
                    let runs = grid.len() * policies.len() * allocators.len();
                    let file =
                        trace_file(path, runs, &format!("{n}x{m}"), p, alloc, allocators.len());
                    write_trace(&file, &spans, &r, &format!("{n}x{m}"))?;
                }
                reports.push((format!("{n}x{m}"), r));
                bar.inc(1);
            }
        }
        graphs.push((format!("{n}x{m}"), std::sync::Arc::new(g)));
    }
    bar.finish_and_clear();
    if cmd.validate {
        if plan.is_some() {
            return crate::sim_validate::validate_plans(cmd, &machine, &policies, &grid, &reports);
        }
        return crate::sim_validate::validate(cmd, &machine, &policies, &graphs, &reports);
    }
    if cmd.json {
        let all: Vec<&Report> = reports.iter().map(|(_, r)| r).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        print_table(&reports);
    }
    if let Some(path) = &cmd.csv {
        let mut csv = Csv::new(&[
            "simulated",
            "machine",
            "grid",
            "workload",
            "policy",
            "allocator",
            "makespan_ms",
            "utilisation",
            "remote_share",
            "steals",
            "wakes",
        ]);
        for (grid, r) in &reports {
            csv.row(&[
                "true".into(),
                r.machine.clone(),
                grid.clone(),
                r.workload.clone(),
                r.policy.clone(),
                r.allocator.clone(),
                format!("{:.4}", r.makespan_ns as f64 / 1e6),
                format!("{:.4}", r.utilisation()),
                format!("{:.4}", r.remote_share),
                r.steals.to_string(),
                r.wakes.to_string(),
            ]);
        }
        csv.write(path)?;
    }
    Ok(())
}

fn trace_file(
    path: &std::path::Path,
    runs: usize,
    grid: &str,
    p: PolicyKind,
    alloc: Allocator,
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
fn write_trace(path: &std::path::Path, spans: &[TaskSpan], r: &Report, grid: &str) -> Result<()> {
    let events: Vec<nearflow_rt::TraceEvent> = spans
        .iter()
        .map(|s| nearflow_rt::TraceEvent {
            worker: s.pu,
            request: u64::from(s.request),
            label: s.task,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
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

fn print_table(reports: &[(String, Report)]) {
    let Some((_, first)) = reports.first() else {
        return;
    };
    println!(
        "SIMULATED on a model of {} — not measured; model constants: crates/sim/src/model.rs{}",
        first.machine,
        if first.model == Model::default() {
            ""
        } else {
            " (changed with --model)"
        }
    );
    let levels: Vec<u8> = first.levels.iter().map(|l| l.level).collect();
    let mut seen: Vec<&str> = Vec::new();
    for (grid, r) in reports {
        if !seen.contains(&grid.as_str()) {
            seen.push(grid);
            println!("{grid}: {} ({} tasks)", r.workload, r.tasks);
        }
    }
    print!(
        "{:<6} {:<10} {:<9} {:>12} {:>8} {:>7} {:>8}",
        "grid", "policy", "alloc", "makespan ms", "vs 1st", "util", "remote"
    );
    for l in &levels {
        print!(" {:>7}", format!("L{l} hit"));
    }
    println!(" {:>8} {:>8}", "steals", "wakes");
    for (grid, r) in reports {
        let base = reports
            .iter()
            .find(|(g, x)| g == grid && x.allocator == r.allocator)
            .map_or(r.makespan_ns, |(_, x)| x.makespan_ns);
        print!(
            "{:<6} {:<10} {:<9} {:>12.3} {:>7.2}x {:>6.1}% {:>7.1}%",
            grid,
            r.policy,
            r.allocator,
            r.makespan_ns as f64 / 1e6,
            r.makespan_ns as f64 / base.max(1) as f64,
            100.0 * r.utilisation(),
            100.0 * r.remote_share
        );
        for l in &r.levels {
            print!(" {:>6.1}%", 100.0 * l.hit_rate);
        }
        println!(" {:>8} {:>8}", r.steals, r.wakes);
    }
    println!("tasks found per rule (all PUs):");
    for (grid, r) in reports {
        let rules: Vec<String> = r
            .rules
            .iter()
            .map(|(n, c)| format!("{}: {c}", n.split(' ').next().unwrap_or(n)))
            .collect();
        println!(
            "  {grid} {} {}: {}",
            r.policy,
            r.allocator,
            rules.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_parse_and_bad_ones_are_errors() {
        assert_eq!(parse_grid("1x1, 4x4").unwrap(), vec![(1, 1), (4, 4)]);
        for bad in ["4", "0x1", "ax2", "100x100"] {
            assert!(parse_grid(bad).is_err(), "{bad}");
        }
    }
}
