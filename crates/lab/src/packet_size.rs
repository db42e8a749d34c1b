//! `nearflow bench packet-size`: one plan run with packet sizes from 1 KB to 4 MB (001 §4.1,
//! Fig. 1). The plan is the generated join/sort/aggregate plan; throughput counts its source
//! tuples per second; each size is the median of `--reps` interleaved rounds (every size runs
//! once per round, in a rotating order), and every run's result is checked against the
//! sequential reference.

use anyhow::{bail, Result};
use nearflow_apps::genplan;
use nearflow_flow::PlanBuilder;
use nearflow_policy::PolicyKind;
use nearflow_rt::Pinning;
use nearflow_topo::TopologySpec;
use serde::Serialize;

use crate::harness::{build_runtime, load_machine, median, parse_list, progress};
use crate::phase::Probe;
use crate::Report;

#[derive(Debug, Clone)]
pub struct Config {
    /// The machine (default: this host).
    pub topology: TopologySpec,
    /// Packet sizes in KiB (comma-separated); the default size is added if missing.
    pub sizes_kib: String,
    /// Rows per source of the generated plan.
    pub rows: u64,
    /// Scheduling policy.
    pub policy: PolicyKind,
    /// Thread binding (only applied on the host).
    pub pinning: Pinning,
    /// Timed repetitions per size (median reported).
    pub reps: usize,
    /// No progress bars on stderr.
    pub quiet: bool,
}

/// One packet size's result.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub packet_bytes: usize,
    pub tuples_per_s: f64,
    pub ms: f64,
    /// Whether this is the engine's default size (L2 / 2).
    pub default: bool,
}

/// Runs the sweep; one point per size.
pub fn run(cmd: &Config) -> Result<Report<Vec<Point>>> {
    use std::fmt::Write;
    if cmd.reps == 0 || cmd.rows == 0 {
        bail!("--reps and --rows must be at least 1");
    }
    let rt = build_runtime(
        load_machine(&cmd.topology)?,
        cmd.policy,
        cmd.pinning,
        false,
        nearflow_rt::AllocatorKind::Nearflow,
    )?;
    let default = nearflow_flow::default_packet_bytes(rt.machine());
    let mut sizes: Vec<usize> = parse_list::<usize>(&cmd.sizes_kib)?
        .into_iter()
        .map(|k| k.saturating_mul(1024))
        .collect();
    if sizes.is_empty() || sizes.iter().any(|&b| b == 0 || b > 1 << 30) {
        bail!("--sizes-kib needs sizes of 1..=1048576 KiB (1 GiB)");
    }
    if !sizes.contains(&default) {
        sizes.push(default);
    }
    sizes.sort_unstable();
    let expect = genplan::reference(cmd.rows);
    // Source tuples per run: every block reads `rows` + `rows / 2` rows.
    let tuples = 6 * (cmd.rows + cmd.rows / 2);
    let bar = progress((sizes.len() * cmd.reps) as u64, "packet-size", cmd.quiet);
    // Interleaved rounds: each round runs every size once, in an order that rotates from round
    // to round, so that a size's share of the best is measured side by side with the best.
    let mut times = vec![Vec::new(); sizes.len()];
    let mut probe = Probe::new();
    for round in 0..cmd.reps {
        probe.sample();
        for k in 0..sizes.len() {
            let i = (k + round) % sizes.len();
            let bytes = sizes[i];
            let mut b = PlanBuilder::for_runtime(&rt);
            b.packet_bytes(bytes);
            let sinks = genplan::build(&mut b, cmd.rows);
            let out = b.build()?.run(&rt)?;
            if genplan::result(&out, &sinks) != expect {
                bail!("wrong result at {bytes} B packets");
            }
            times[i].push(out.stats.elapsed);
            bar.inc(1);
        }
    }
    let points: Vec<Point> = sizes
        .iter()
        .zip(times)
        .map(|(&bytes, times)| {
            let t = median(times);
            Point {
                packet_bytes: bytes,
                tuples_per_s: tuples as f64 / t.as_secs_f64(),
                ms: t.as_secs_f64() * 1e3,
                default: bytes == default,
            }
        })
        .collect();
    bar.finish_and_clear();
    let mut out = String::new();
    let best = points.iter().map(|p| p.tuples_per_s).fold(0.0, f64::max);
    writeln!(
        out,
        "packet size sweep: generated plan, {} rows per source, {} on {}, median of {}",
        cmd.rows,
        cmd.policy.name(),
        rt.machine().label(),
        cmd.reps
    )?;
    writeln!(
        out,
        "{:>12} {:>10} {:>14} {:>8}",
        "packet", "ms", "tuples/s", "vs best"
    )?;
    for p in &points {
        writeln!(
            out,
            "{:>10} B {:>10.1} {:>14.0} {:>7.0}%{}",
            p.packet_bytes,
            p.ms,
            p.tuples_per_s,
            100.0 * p.tuples_per_s / best,
            if p.default { "  <- default (L2/2)" } else { "" }
        )?;
    }
    writeln!(out, "{}", probe.line())?;
    Ok(Report::new(points, out).with_notes(probe.line()))
}
