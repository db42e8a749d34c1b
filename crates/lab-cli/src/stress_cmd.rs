//! `nearflow stress`: the random-DAG workload with every task counted.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use nearflow_policy::PolicyKind;
use nearflow_rt::stress::{self, StressConfig};
use nearflow_rt::{AllocatorKind, Pinning};

use nearflow_cli::args::{build_runtime, TopoArgs};

#[derive(Args, Debug)]
pub struct StressCmd {
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Scheduling policy: las, nls, bobox2011, fifo-rr, central, per-thread, random-steal.
    #[arg(long, default_value = "las")]
    pub policy: PolicyKind,
    /// Thread binding: group, pu or none (only applied on the host).
    #[arg(long, default_value = "group")]
    pub pinning: Pinning,
    /// Total tasks.
    /// Range: 1..=1e10.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 10_000_000_000), long, default_value_t = 200_000)]
    pub tasks: u64,
    /// Concurrent requests.
    /// Range: 1..=1e7.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 10_000_000), long, default_value_t = 64)]
    pub requests: u64,
    /// Most children of one task.
    /// Range: 1..=1024.
    #[arg(value_parser = nearflow_cli::args::int_in(1u32, 1024), long, default_value_t = 8)]
    pub fanout: u32,
    /// Seed of the DAG shapes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds without progress while tasks are queued that count as a stall.
    /// Range: 1..=86400.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 86_400), long, default_value_t = 10)]
    pub stall_secs: u64,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: &StressCmd) -> Result<()> {
    let machine = cmd.topo.load()?;
    let label = machine.label();
    let rt = build_runtime(
        machine,
        cmd.policy,
        cmd.pinning,
        false,
        AllocatorKind::Nearflow,
    )?;
    let cfg = StressConfig {
        tasks: cmd.tasks,
        requests: cmd.requests,
        max_fanout: cmd.fanout,
        seed: cmd.seed,
        stall_timeout: Duration::from_secs(cmd.stall_secs),
        ..StressConfig::default()
    };
    let report = match stress::run(&rt, &cfg) {
        Ok(r) => r,
        Err(e) => {
            if matches!(e, stress::StressError::Config(_)) {
                bail!(e);
            }
            // Requests are stuck inside the runtime; dropping it would wait for them forever.
            std::mem::forget(rt);
            bail!("{e}");
        }
    };
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "stress: policy {} on {label}, {} workers, pinning {}",
            cmd.policy,
            report.workers,
            rt.pinning()
        );
        println!("  spawned            {:>10}", report.spawned);
        println!("  executed           {:>10}", report.executed);
        println!(
            "  duplicated/missing {:>10}",
            format!("{}/{}", report.duplicated, report.missing)
        );
        println!(
            "  requests           {:>10}",
            format!(
                "{}/{}",
                report.requests_completed, report.requests_submitted
            )
        );
        println!("  time               {:>10.1} ms", report.elapsed_ms);
        println!(
            "  tasks per request  {:>10}   (sum over requests {})",
            format!(
                "{}..{}",
                report.request_executed_min, report.request_executed_max
            ),
            report.request_executed_sum
        );
        let c = &report.counters;
        println!(
            "  steals {}  sleeps {}  wakes {}",
            c.total(|w| w.steals),
            c.total(|w| w.sleeps),
            c.total(|w| w.wakes)
        );
        if cmd.policy == PolicyKind::Bobox2011 {
            println!(
                "  balancer: {} moves, {} shares",
                report.balancer_moves, report.balancer_shares
            );
        }
        println!("  tasks found by rule:");
        for (name, n) in c.rule_names.iter().zip(c.by_rule()) {
            println!("    {n:>10}  {name}");
        }
        println!(
            "  {}",
            if report.is_exact() {
                "OK: every task ran exactly once, every request completed"
            } else {
                "MISMATCH"
            }
        );
    }
    if !report.is_exact() {
        bail!("stress run lost or duplicated work");
    }
    Ok(())
}
