//! `nearflow bench alloc`: the nearflow allocator (LAS paper §5) beside glibc, mimalloc and
//! jemalloc. Each allocator is the global allocator of its own build of one program
//! (`crates/allocbench`), so all run the same code; this command runs them side by side, one
//! process per (allocator, pattern), interleaving the allocators, and prints time ratios and
//! peak RSS.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
pub use nearflow_allocbench::Measurement;
use nearflow_allocbench::MT_PATTERNS;
use serde::Serialize;

use crate::harness::{progress, size_label};
use crate::Report;

/// The allocators, in table order.
pub const ALLOCATORS: [&str; 4] = ["glibc", "mimalloc", "jemalloc", "nearflow"];

#[derive(Debug, Clone)]
pub struct Config {
    /// Allocators (comma-separated): glibc, mimalloc, jemalloc, nearflow.
    pub allocators: String,
    /// Patterns (comma-separated): latency, larson, xmalloc, cache-scratch, pipeline,
    /// large-churn, producer-consumer.
    pub patterns: String,
    /// Threads of the multi-thread patterns (more than the machine's CPUs is allowed).
    pub threads: usize,
    /// Multiplies the operation counts (1.0 takes about a minute on a 2-CPU machine).
    pub scale: f64,
    /// Directory of the allocbench-* programs (default: next to this executable).
    pub bin_dir: Option<PathBuf>,
    /// No progress bars on stderr.
    pub quiet: bool,
}

fn list<'a>(s: &'a str, allowed: &[&str], what: &str) -> Result<Vec<&'a str>> {
    let v: Vec<&str> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .collect();
    if v.is_empty() {
        bail!("--{what} is empty");
    }
    for x in &v {
        if !allowed.contains(x) {
            bail!(
                "unknown {what} entry {x:?} (expected one of {})",
                allowed.join(", ")
            );
        }
    }
    Ok(v)
}

fn program(dir: &std::path::Path, allocator: &str) -> Result<PathBuf> {
    let p = dir.join(format!("allocbench-{allocator}"));
    if !p.is_file() {
        bail!(
            "{} not found; build the benchmark programs with \
             `cargo build --release -p nearflow-allocbench` (or pass --bin-dir)",
            p.display()
        );
    }
    Ok(p)
}

/// The CPU model, L2 and count of this machine and its NUMA nodes, for the tables.
pub fn host_label() -> String {
    let nodes = nearflow_alloc::checks::nodes().len();
    format!("{}, {nodes} NUMA node(s)", nearflow_topo::host::cpu_label())
}

/// The whole result.
#[derive(Clone, Debug, Serialize)]
pub struct Alloc {
    pub machine: String,
    pub threads: usize,
    pub scale: f64,
    pub measurements: Vec<Measurement>,
}

/// Runs every (pattern, allocator) program once, the allocators in a rotating order.
pub fn run(cmd: &Config) -> Result<Report<Alloc>> {
    let allocators = list(&cmd.allocators, &ALLOCATORS, "allocators")?;
    let known: Vec<&str> = std::iter::once("latency").chain(MT_PATTERNS).collect();
    let patterns = list(&cmd.patterns, &known, "patterns")?;
    if cmd.threads < 2 || !(cmd.scale > 0.0 && cmd.scale <= 1000.0) {
        bail!("--threads must be at least 2 and --scale in (0, 1000]");
    }
    let dir = match &cmd.bin_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()
            .context("cannot locate this executable")?
            .parent()
            .context("the executable has no directory")?
            .to_path_buf(),
    };
    let programs: Vec<(String, PathBuf)> = allocators
        .iter()
        .map(|a| Ok((a.to_string(), program(&dir, a)?)))
        .collect::<Result<_>>()?;
    let bar = progress((patterns.len() * programs.len()) as u64, "alloc", cmd.quiet);
    let mut all = Vec::new();
    for (pi, pattern) in patterns.iter().enumerate() {
        // Rotate the order per pattern so no allocator always runs first (or last).
        for k in 0..programs.len() {
            let (name, path) = &programs[(k + pi) % programs.len()];
            bar.set_message(format!("{pattern} on {name}"));
            let out = Command::new(path)
                .args(["--pattern", pattern])
                .args(["--threads", &cmd.threads.to_string()])
                .args(["--scale", &cmd.scale.to_string()])
                .output()
                .with_context(|| format!("cannot run {}", path.display()))?;
            if !out.status.success() {
                bail!(
                    "{} --pattern {pattern} failed ({}): {}",
                    path.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            for line in String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| !l.is_empty())
            {
                let m: Measurement = serde_json::from_str(line)
                    .with_context(|| format!("bad output from {}: {line}", path.display()))?;
                all.push(m);
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let label = host_label();
    let text = tables(&all, &allocators, &label, cmd.threads)?;
    let data = Alloc {
        machine: label,
        threads: cmd.threads,
        scale: cmd.scale,
        measurements: all,
    };
    Ok(Report::new(data, text))
}

fn tables(
    all: &[Measurement],
    allocators: &[&str],
    label: &str,
    threads: usize,
) -> Result<String, std::fmt::Error> {
    use std::fmt::Write;
    let mut out = String::new();
    // (pattern, size) → allocator → measurement, in first-seen order of rows.
    let mut rows: Vec<(String, usize)> = Vec::new();
    let mut by: BTreeMap<(String, usize), BTreeMap<String, &Measurement>> = BTreeMap::new();
    for m in all {
        let key = (m.pattern.clone(), m.size_min);
        if !by.contains_key(&key) {
            rows.push(key.clone());
        }
        by.entry(key).or_default().insert(m.allocator.clone(), m);
    }
    let ratios = |r: &BTreeMap<String, &Measurement>| -> (String, String) {
        let nf = r.get("nearflow").map(|m| m.ns_per_op);
        let f = |other: &str| match (nf, r.get(other)) {
            (Some(n), Some(o)) => format!("{:.2}", n / o.ns_per_op),
            _ => "-".into(),
        };
        (f("glibc"), f("mimalloc"))
    };
    let best = |r: &BTreeMap<String, &Measurement>| -> String {
        r.values()
            .min_by(|a, b| a.ns_per_op.total_cmp(&b.ns_per_op))
            .map_or("-".into(), |m| m.allocator.clone())
    };
    let single: Vec<_> = rows
        .iter()
        .filter(|(p, _)| p == "pair" || p == "batch64")
        .collect();
    if !single.is_empty() {
        writeln!(
            out,
            "allocation latency on {label}: ns per malloc+free, one thread, median of 3"
        )?;
        write!(out, "{:>9} {:>8}", "size", "pattern")?;
        for a in allocators {
            write!(out, " {a:>9}")?;
        }
        writeln!(
            out,
            " {:>9} {:>12} {:>9}",
            "nf/glibc", "nf/mimalloc", "fastest"
        )?;
        for key in &single {
            let r = &by[*key];
            write!(out, "{:>9} {:>8}", size_label(key.1), key.0)?;
            for a in allocators {
                match r.get(*a) {
                    Some(m) => write!(out, " {:>9.1}", m.ns_per_op)?,
                    None => write!(out, " {:>9}", "-")?,
                }
            }
            let (g, mi) = ratios(r);
            writeln!(out, " {g:>9} {mi:>12} {:>9}", best(r))?;
        }
    }
    let multi: Vec<_> = rows
        .iter()
        .filter(|(p, _)| p != "pair" && p != "batch64")
        .collect();
    if !multi.is_empty() {
        if !single.is_empty() {
            writeln!(out)?;
        }
        writeln!(
            out,
            "multi-thread patterns on {label}: {threads} threads; wall-clock ns per operation \
             (pipeline: per packet) and peak RSS (MiB)"
        )?;
        write!(out, "{:>17} {:>13}", "pattern", "blocks")?;
        for a in allocators {
            write!(out, " {a:>9}")?;
        }
        write!(
            out,
            " {:>9} {:>12} {:>9} |",
            "nf/glibc", "nf/mimalloc", "fastest"
        )?;
        for a in allocators {
            write!(out, " {:>9}", format!("{a} MiB"))?;
        }
        writeln!(out)?;
        for key in &multi {
            let r = &by[*key];
            let blocks = r.values().next().map_or(String::new(), |m| {
                if m.size_min == m.size {
                    size_label(m.size)
                } else {
                    format!("{}–{}", size_label(m.size_min), size_label(m.size))
                }
            });
            write!(out, "{:>17} {blocks:>13}", key.0)?;
            for a in allocators {
                match r.get(*a) {
                    Some(m) => write!(out, " {:>9.1}", m.ns_per_op)?,
                    None => write!(out, " {:>9}", "-")?,
                }
            }
            let (g, mi) = ratios(r);
            write!(out, " {g:>9} {mi:>12} {:>9} |", best(r))?;
            for a in allocators {
                match r.get(*a).and_then(|m| m.peak_rss_bytes) {
                    Some(b) => write!(out, " {:>9.1}", b as f64 / (1 << 20) as f64)?,
                    None => write!(out, " {:>9}", "-")?,
                }
            }
            writeln!(out)?;
        }
    }
    Ok(out)
}
