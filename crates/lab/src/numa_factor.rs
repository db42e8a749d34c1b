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
use nearflow_alloc::checks;
use nearflow_split::NodeBuffer;
use nearflow_topo::host::{cpu_label as host_cpu, in_a_vm};
use serde::Serialize;

use crate::harness::median;
use crate::Report;

#[derive(Debug, Clone)]
pub struct Config {
    /// Array size in MiB (larger than the last-level cache, so the reversal goes to memory).
    pub mib: usize,
    /// Passes per cell (median reported).
    pub reps: usize,
    /// Print this paper machine's stored NUMA factors instead of measuring (`nearflow topo --list`).
    pub preset: Option<String>,
    /// No progress bars on stderr.
    pub quiet: bool,
}

/// The factors, measured or stored.
#[derive(Clone, Debug, Serialize)]
pub struct Factors {
    /// `measured on this host`, or the preset whose paper gives them.
    pub source: String,
    pub host: String,
    pub emulated: bool,
    pub nodes: Vec<usize>,
    /// Seconds per pass, `[accessing node][memory node]` (empty for a preset).
    pub seconds: Vec<Vec<f64>>,
    /// Each row divided by its diagonal.
    pub factors: Vec<Vec<f64>>,
}

fn reverse_pass(buf: &mut [u64]) -> Duration {
    let t = Instant::now();
    buf.reverse();
    std::hint::black_box(&buf[0]);
    t.elapsed()
}

/// Measures the factors of this host, or reads a preset's.
pub fn run(cmd: &Config) -> Result<Report<Factors>> {
    use std::fmt::Write;
    let mut out = String::new();
    if let Some(name) = &cmd.preset {
        let m = nearflow_topo::presets::build(name)?;
        let Some(raw) = m.numa_raw() else {
            bail!("preset {name} has no NUMA distance matrix (one node)");
        };
        writeln!(
            out,
            "{name}: NUMA factors as stored from its paper (NOT measured here)"
        )?;
        let factors: Vec<Vec<f64>> = raw
            .iter()
            .map(|row| row.iter().map(|&d| d as f64 / 10.0).collect())
            .collect();
        for row in &factors {
            let line: Vec<String> = row.iter().map(|d| format!("{d:.1}")).collect();
            writeln!(out, "  {}", line.join("  "))?;
        }
        let data = Factors {
            source: format!("stored from the paper of preset {name} (not measured)"),
            host: host_cpu(),
            emulated: false,
            nodes: (0..factors.len()).collect(),
            seconds: Vec::new(),
            factors,
        };
        return Ok(Report::new(data, out));
    }
    if cmd.mib == 0 || cmd.reps == 0 {
        bail!("--mib and --reps must be positive");
    }
    let nodes = checks::nodes();
    let len = cmd.mib * (1 << 20) / 8;
    let mut seconds = vec![vec![0.0; nodes.len()]; nodes.len()];
    for (i, (ni, cpus)) in nodes.iter().enumerate() {
        let Some(&cpu) = cpus.first() else {
            bail!("node {ni} has no CPU to run on");
        };
        for (j, (nj, _)) in nodes.iter().enumerate() {
            let row = std::thread::scope(|s| {
                s.spawn(|| -> Result<f64> {
                    checks::pin_to_cpu(cpu).with_context(|| format!("cannot pin to CPU {cpu}"))?;
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
    let report = Factors {
        source: "measured on this host".into(),
        host: host_cpu(),
        emulated,
        nodes: nodes.iter().map(|n| n.0).collect(),
        seconds,
        factors,
    };
    writeln!(
        out,
        "NUMA factors of this host ({}), {} MiB reversed in place, median of {}",
        report.host, cmd.mib, cmd.reps
    )?;
    if emulated {
        writeln!(
            out,
            "EMULATED NUMA (virtual machine): the timings say nothing about real hardware"
        )?;
    }
    writeln!(
        out,
        "rows: node of the thread; columns: node of the memory; 1.0 = local"
    )?;
    for (i, r) in report.factors.iter().enumerate() {
        let line: Vec<String> = r.iter().map(|f| format!("{f:.2}")).collect();
        writeln!(
            out,
            "  node {}: {}   ({:.1} ms local)",
            report.nodes[i],
            line.join("  "),
            report.seconds[i][i] * 1e3
        )?;
    }
    Ok(Report::new(report, out))
}
