//! `nearflow run …`: the applications on the dataflow engine.
//!
//! - `run vwap`: VWAP bargain detection (StreamMap §V.A) over the real day of trades and quotes
//!   (`--input`) or a built-in generator shaped like it; the result is compared with a sequential
//!   pass unless `--no-check`;
//! - `run plan`: one instance of the generated ~170-operator plan of the concurrent-plans
//!   experiment, compared with its sequential reference.
//!
//! Both take `--trace FILE.svg` to write a per-PU timeline of the run.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nearflow_apps::{genplan, vwap};
use nearflow_flow::{trace, PlanBuilder};
use nearflow_policy::PolicyKind;
use nearflow_rt::{AllocatorKind, Pinning, Runtime};
use serde::Serialize;

use crate::args::{build_runtime, TopoArgs};

#[derive(Subcommand, Debug)]
pub enum RunCmd {
    /// VWAP bargain detection over trades and quotes.
    Vwap(VwapCmd),
    /// One instance of the generated ~170-operator plan.
    Plan(PlanCmd),
}

/// Flags every `run` takes.
#[derive(Args, Debug, Clone)]
pub struct Common {
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Scheduling policy.
    #[arg(long, default_value = "las")]
    pub policy: PolicyKind,
    /// Thread binding (only applied on the host).
    #[arg(long, default_value = "group")]
    pub pinning: Pinning,
    /// Packet size in bytes (default: half the L2 cache of the topology).
    /// Range: 64..=1 GiB.
    #[arg(value_parser = crate::args::int_in(64usize, 1 << 30), long, value_name = "BYTES")]
    pub packet_bytes: Option<usize>,
    /// Write a per-PU timeline of the run as SVG to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub trace: Option<PathBuf>,
    /// AllocatorKind of the packet buffers (and every 8–512 KiB block): nearflow (LAS paper §5)
    /// or system (glibc).
    #[arg(long, default_value = "nearflow")]
    pub allocator: AllocatorKind,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct VwapCmd {
    #[command(flatten)]
    pub common: Common,
    /// The TradesAndQuotes CSV (gzip or plain); default: generated data.
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Replay the input this many times (sequence numbers continue).
    /// Range: 1..=1000.
    #[arg(value_parser = crate::args::int_in(1u32, 1000), long, default_value_t = 1)]
    pub repeat: u32,
    /// Ticks to generate when there is no `--input`.
    /// Range: 1..=1e10.
    #[arg(value_parser = crate::args::int_in(1u64, 10_000_000_000), long, default_value_t = 300_000)]
    pub ticks: u64,
    /// Branches the stream is split into by hash(ticker).
    /// Range: 1..=64.
    #[arg(value_parser = crate::args::int_in(1usize, 64), long, default_value_t = 4)]
    pub branches: usize,
    /// Sliding window, in trades per ticker.
    /// Range: 1..=1e6.
    #[arg(value_parser = crate::args::int_in(1usize, 1_000_000), long, default_value_t = 5)]
    pub window: usize,
    /// Bargains to list.
    /// Range: 1..=1e6.
    #[arg(value_parser = crate::args::int_in(1usize, 1_000_000), long, default_value_t = 10)]
    pub top: usize,
    /// Skip the comparison with the sequential reference.
    #[arg(long)]
    pub no_check: bool,
}

#[derive(Args, Debug, Clone)]
pub struct PlanCmd {
    #[command(flatten)]
    pub common: Common,
    /// Rows per source of the generated plan.
    /// Range: 1..=1e10.
    #[arg(value_parser = crate::args::int_in(1u64, 10_000_000_000), long, default_value_t = 200_000)]
    pub rows: u64,
}

/// The runtime and a plan builder as the common flags say (allocator, machine, policy,
/// pinning, trace, packet size).
fn runtime_and_builder(c: &Common) -> Result<(Runtime, PlanBuilder)> {
    if c.allocator == AllocatorKind::System {
        nearflow_alloc::set_default_choice(nearflow_alloc::AllocatorKind::System);
    }
    let rt = build_runtime(
        c.topo.load()?,
        c.policy,
        c.pinning,
        c.trace.is_some(),
        c.allocator,
    )?;
    let mut b = PlanBuilder::for_runtime(&rt);
    if let Some(p) = c.packet_bytes {
        b.packet_bytes(p);
    }
    Ok((rt, b))
}

fn write_trace(rt: &Runtime, path: &Path, names: &trace::Names, title: &str) -> Result<()> {
    let events = rt.take_trace();
    let svg = trace::svg(&events, rt.workers(), names, title);
    std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("wrote {} ({} tasks)", path.display(), events.len());
    Ok(())
}

#[derive(Serialize)]
struct BargainOut {
    seq: u64,
    ticker: String,
    vwap: f64,
    ask: f64,
    index: f64,
}

#[derive(Serialize)]
struct VwapReport {
    machine: String,
    policy: String,
    branches: usize,
    window: usize,
    packet_bytes: usize,
    input: String,
    tuples_in: u64,
    bargains: usize,
    checksum: String,
    seconds: f64,
    tuples_per_s: f64,
    matches_reference: Option<bool>,
    top: Vec<BargainOut>,
}

pub fn vwap(cmd: &VwapCmd) -> Result<()> {
    let c = &cmd.common;
    if cmd.branches == 0 {
        bail!("--branches must be at least 1");
    }
    if cmd.window == 0 {
        bail!("--window must be at least 1");
    }
    if cmd.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    let (ticks, input) = match &cmd.input {
        Some(p) => (
            vwap::read_file(p, cmd.repeat).map_err(anyhow::Error::msg)?,
            p.display().to_string(),
        ),
        None => (
            vwap::generate(cmd.ticks, 0x5eed),
            format!("generated ({} ticks)", cmd.ticks),
        ),
    };
    let (rt, b) = runtime_and_builder(c)?;
    let run = vwap::run(&rt, b, ticks, cmd.branches, cmd.window, !cmd.no_check)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (n, secs, matches) = (run.tuples, run.seconds, run.matches_reference);
    let report = VwapReport {
        machine: rt.machine().label(),
        policy: c.policy.name().into(),
        branches: cmd.branches,
        window: cmd.window,
        packet_bytes: run.packet_bytes,
        input,
        tuples_in: n,
        bargains: run.bargains.len(),
        checksum: format!("{:016x}", run.checksum),
        seconds: secs,
        tuples_per_s: n as f64 / secs,
        matches_reference: matches,
        top: run
            .bargains
            .iter()
            .take(cmd.top)
            .map(|b| BargainOut {
                seq: b.seq,
                ticker: b.ticker.as_str().into(),
                vwap: b.vwap,
                ask: b.ask,
                index: b.index,
            })
            .collect(),
    };
    if let Some(path) = &c.trace {
        let mut nm = trace::Names::new();
        nm.add(run.request, run.operators.clone());
        write_trace(
            &rt,
            path,
            &nm,
            &format!("vwap, {} branches, {}", cmd.branches, c.policy.name()),
        )?;
    }
    if c.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "vwap on {} · policy {} · {} branches · window {} · packets {} B",
            report.machine, report.policy, report.branches, report.window, report.packet_bytes
        );
        println!("input: {}", report.input);
        println!(
            "{} tuples in {:.3} s = {:.0} tuples/s; {} bargains, checksum {}",
            n, secs, report.tuples_per_s, report.bargains, report.checksum
        );
        match matches {
            Some(true) => println!("result equals the sequential reference"),
            Some(false) => println!("RESULT DIFFERS from the sequential reference"),
            None => println!("(not compared with the sequential reference)"),
        }
        println!("top bargains:");
        println!(
            "  {:>8} {:<6} {:>10} {:>10} {:>14}",
            "seq", "ticker", "vwap", "ask", "index"
        );
        for b in &report.top {
            println!(
                "  {:>8} {:<6} {:>10.4} {:>10.4} {:>14.2}",
                b.seq, b.ticker, b.vwap, b.ask, b.index
            );
        }
    }
    if matches == Some(false) {
        bail!("the plan's bargains differ from the sequential reference");
    }
    Ok(())
}

pub fn plan(cmd: &PlanCmd) -> Result<()> {
    let c = &cmd.common;
    if cmd.rows == 0 {
        bail!("--rows must be at least 1");
    }
    let (rt, mut b) = runtime_and_builder(c)?;
    let sinks = genplan::build(&mut b, cmd.rows);
    let plan = b.build()?;
    let ops = plan.len();
    let handle = plan.submit(&rt);
    let (names, req) = (handle.names(), handle.request_id());
    let out = handle.wait()?;
    let got = genplan::result(&out, &sinks);
    let expect = genplan::reference(cmd.rows);
    if let Some(path) = &c.trace {
        let mut nm = trace::Names::new();
        nm.add(req, names);
        write_trace(
            &rt,
            path,
            &nm,
            &format!("generated plan ({ops} operators), {}", c.policy.name()),
        )?;
    }
    let report = serde_json::json!({
        "machine": rt.machine().label(),
        "policy": c.policy.name(),
        "operators": ops,
        "rows": cmd.rows,
        "packet_bytes": out.stats.packet_bytes,
        "allocator": c.allocator.name(),
        "seconds": out.stats.elapsed.as_secs_f64(),
        "packets": out.stats.packets(),
        "checksum": format!("{:016x}", got.checksum()),
        "matches_reference": got == expect,
    });
    if c.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "generated plan: {ops} operators, {} rows per source, on {} with {}",
            cmd.rows,
            rt.machine().label(),
            c.policy.name()
        );
        println!(
            "{:.3} s, {} packets; checksum {:016x}; {}",
            out.stats.elapsed.as_secs_f64(),
            out.stats.packets(),
            got.checksum(),
            if got == expect {
                "equals the sequential reference"
            } else {
                "DIFFERS from the sequential reference"
            }
        );
    }
    if got != expect {
        bail!("the plan's result differs from the sequential reference");
    }
    Ok(())
}
