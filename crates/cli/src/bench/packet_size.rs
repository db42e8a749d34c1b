//! `nearflow bench packet-size`: one plan run with packet sizes from 1 KB to 4 MB (001 §4.1,
//! Fig. 1). The plan is the generated join/sort/aggregate plan; throughput counts its source
//! tuples per second; each size is the median of `--reps` interleaved rounds (every size runs
//! once per round, in a rotating order), and every run's result is checked against the
//! sequential reference.

use anyhow::{bail, Result};
use clap::Args;
use nearflow_apps::genplan;
use nearflow_flow::PlanBuilder;
use nearflow_policy::PolicyKind;
use nearflow_rt::Pinning;
use serde::Serialize;

use crate::args::{build_runtime, machine_label, parse_list, TopoArgs};
use crate::bench::phase::Probe;
use crate::bench::{median, progress};

#[derive(Args, Debug, Clone)]
pub struct PacketSizeCmd {
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Packet sizes in KiB (comma-separated); the default size is added if missing.
    #[arg(long, default_value = "1,2,4,8,16,32,64,128,256,512,1024,2048,4096")]
    pub sizes_kib: String,
    /// Rows per source of the generated plan.
    /// Range: 1..=1e9.
    #[arg(value_parser = crate::args::int_in(1u64, 1_000_000_000), long, default_value_t = 200_000)]
    pub rows: u64,
    /// Scheduling policy.
    #[arg(long, default_value = "las")]
    pub policy: PolicyKind,
    /// Thread binding (only applied on the host).
    #[arg(long, default_value = "group")]
    pub pinning: Pinning,
    /// Timed repetitions per size (median reported).
    /// Range: 1..=1000.
    #[arg(value_parser = crate::args::int_in(1usize, 1000), long, default_value_t = 3)]
    pub reps: usize,
    /// Print JSON: a list of {packet_bytes, tuples_per_s, default}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Point {
    packet_bytes: usize,
    tuples_per_s: f64,
    ms: f64,
    default: bool,
}

pub fn run(cmd: &PacketSizeCmd) -> Result<()> {
    if cmd.reps == 0 || cmd.rows == 0 {
        bail!("--reps and --rows must be at least 1");
    }
    let rt = build_runtime(
        cmd.topo.load()?,
        cmd.policy,
        cmd.pinning,
        false,
        nearflow_rt::Allocator::Nearflow,
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
    let bar = progress((sizes.len() * cmd.reps) as u64, "packet-size", cmd.json);
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
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&points)?);
        eprintln!("{}", probe.line());
        return Ok(());
    }
    let best = points.iter().map(|p| p.tuples_per_s).fold(0.0, f64::max);
    println!(
        "packet size sweep: generated plan, {} rows per source, {} on {}, median of {}",
        cmd.rows,
        cmd.policy.name(),
        machine_label(rt.machine()),
        cmd.reps
    );
    println!(
        "{:>12} {:>10} {:>14} {:>8}",
        "packet", "ms", "tuples/s", "vs best"
    );
    for p in &points {
        println!(
            "{:>10} B {:>10.1} {:>14.0} {:>7.0}%{}",
            p.packet_bytes,
            p.ms,
            p.tuples_per_s,
            100.0 * p.tuples_per_s / best,
            if p.default { "  <- default (L2/2)" } else { "" }
        );
    }
    println!("{}", probe.line());
    Ok(())
}
