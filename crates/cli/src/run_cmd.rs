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

pub fn vwap(cmd: &VwapCmd) -> Result<()> {
    let c = &cmd.common;
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
    let report = vwap::Report::new(
        &run,
        (rt.machine().label(), c.policy.name().into()),
        (cmd.branches, cmd.window),
        input,
        cmd.top,
    );
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
    match c.json {
        true => println!("{}", serde_json::to_string_pretty(&report)?),
        false => print!("{report}"),
    }
    if report.matches_reference == Some(false) {
        bail!("the plan's bargains differ from the sequential reference");
    }
    Ok(())
}

pub fn plan(cmd: &PlanCmd) -> Result<()> {
    let c = &cmd.common;
    let (rt, b) = runtime_and_builder(c)?;
    let names = (
        rt.machine().label(),
        c.policy.name().to_owned(),
        c.allocator.name().to_owned(),
    );
    let report = genplan::run(&rt, b, cmd.rows, names).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(path) = &c.trace {
        let mut nm = trace::Names::new();
        nm.add(report.request, report.names.clone());
        let title = format!(
            "generated plan ({} operators), {}",
            report.operators, report.policy
        );
        write_trace(&rt, path, &nm, &title)?;
    }
    match c.json {
        true => println!("{}", serde_json::to_string_pretty(&report)?),
        false => print!("{report}"),
    }
    if !report.matches_reference {
        bail!("the plan's result differs from the sequential reference");
    }
    Ok(())
}
