//! `nearflow bench numa-factor`: the NUMA factors of this host (Bobox paper §6, Table 1).
//!
//! For every pair of nodes (i, j), a thread pinned to a CPU of node i reverses, in place, an
//! array whose pages are bound to node j (`nearflow_split::NodeBuffer`, i.e. `mbind`); each
//! cell is the median of `--reps` passes, and each row is divided by its diagonal (local = 1).
//! On a one-node host the matrix is 1×1. In a virtual machine (the `hypervisor` CPU flag) the
//! nodes are emulated and the timings say nothing about real NUMA hardware: the output says so.
//! `--preset NAME` prints a paper machine's stored factors instead (not measured).

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use nearflow_alloc::placement;
use nearflow_split::NodeBuffer;
use serde::Serialize;

use crate::bench::{host_cpu, in_a_vm, median};

#[derive(Args, Debug, Clone)]
pub struct NumaFactorCmd {
    /// Array size in MiB (larger than the last-level cache, so the reversal goes to memory).
    /// Range: 1..=65536 (64 GiB).
    #[arg(value_parser = crate::args::int_in(1usize, 65_536), long, default_value_t = 256)]
    pub mib: usize,
    /// Passes per cell (median reported).
    /// Range: 1..=1000.
    #[arg(value_parser = crate::args::int_in(1usize, 1000), long, default_value_t = 5)]
    pub reps: usize,
    /// Print this paper machine's stored NUMA factors instead of measuring (`nearflow topo --list`).
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report {
    source: String,
    host: String,
    emulated: bool,
    nodes: Vec<usize>,
    /// Seconds per pass, `[accessing node][memory node]`.
    seconds: Vec<Vec<f64>>,
    /// Each row divided by its diagonal.
    factors: Vec<Vec<f64>>,
}

fn reverse_pass(buf: &mut [u64]) -> Duration {
    let t = Instant::now();
    buf.reverse();
    std::hint::black_box(&buf[0]);
    t.elapsed()
}

pub fn run(cmd: &NumaFactorCmd) -> Result<()> {
    if let Some(name) = &cmd.preset {
        let m = nearflow_topo::presets::build(name)?;
        let Some(raw) = m.numa_raw() else {
            bail!("preset {name} has no NUMA distance matrix (one node)");
        };
        println!("{name}: NUMA factors as stored from its paper (NOT measured here)");
        for row in raw {
            let line: Vec<String> = row
                .iter()
                .map(|d| format!("{:.1}", *d as f64 / 10.0))
                .collect();
            println!("  {}", line.join("  "));
        }
        return Ok(());
    }
    if cmd.mib == 0 || cmd.reps == 0 {
        bail!("--mib and --reps must be positive");
    }
    let nodes = placement::nodes();
    let len = cmd.mib * (1 << 20) / 8;
    let mut seconds = vec![vec![0.0; nodes.len()]; nodes.len()];
    for (i, (ni, cpus)) in nodes.iter().enumerate() {
        let Some(&cpu) = cpus.first() else {
            bail!("node {ni} has no CPU to run on");
        };
        for (j, (nj, _)) in nodes.iter().enumerate() {
            let row = std::thread::scope(|s| {
                s.spawn(|| -> Result<f64> {
                    placement::pin_to_cpu(cpu)
                        .with_context(|| format!("cannot pin to CPU {cpu}"))?;
                    let mut buf = NodeBuffer::<u64>::zeroed(*nj, len)
                        .with_context(|| format!("cannot allocate {} MiB on node {nj}", cmd.mib))?;
                    buf.iter_mut().enumerate().for_each(|(k, x)| *x = k as u64);
                    reverse_pass(&mut buf); // warm-up: TLB and page tables
                    let times: Vec<Duration> =
                        (0..cmd.reps).map(|_| reverse_pass(&mut buf)).collect();
                    Ok(median(times).as_secs_f64())
                })
                .join()
                .map_err(|_| anyhow::anyhow!("the measuring thread panicked"))?
            })?;
            seconds[i][j] = row;
        }
    }
    let factors: Vec<Vec<f64>> = seconds
        .iter()
        .enumerate()
        .map(|(i, r)| r.iter().map(|t| t / r[i].max(f64::MIN_POSITIVE)).collect())
        .collect();
    let emulated = in_a_vm() && nodes.len() > 1;
    let report = Report {
        source: "measured on this host".into(),
        host: host_cpu(),
        emulated,
        nodes: nodes.iter().map(|n| n.0).collect(),
        seconds,
        factors,
    };
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "NUMA factors of this host ({}), {} MiB reversed in place, median of {}",
        report.host, cmd.mib, cmd.reps
    );
    if emulated {
        println!("EMULATED NUMA (virtual machine): the timings say nothing about real hardware");
    }
    println!("rows: node of the thread; columns: node of the memory; 1.0 = local");
    for (i, r) in report.factors.iter().enumerate() {
        let line: Vec<String> = r.iter().map(|f| format!("{f:.2}")).collect();
        println!(
            "  node {}: {}   ({:.1} ms local)",
            report.nodes[i],
            line.join("  "),
            report.seconds[i][i] * 1e3
        );
    }
    Ok(())
}
