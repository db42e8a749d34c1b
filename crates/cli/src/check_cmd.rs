//! `nearflow check placement`: is memory and are threads where the LAS paper (§4.1, §5.2) says
//! they are, on this machine? Asks the kernel (`move_pages`, `getcpu`); fails (exit 1) when a
//! check fails. Runs in CI on the host and inside a two-node QEMU guest
//! (`scripts/numa-vm-test.sh`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use nearflow_alloc::placement::{self, Check};
use nearflow_rt::{Pinning, Runtime};
use serde::Serialize;

#[derive(Args, Debug)]
pub struct PlacementCmd {
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct CheckOut {
    name: String,
    ok: bool,
    detail: String,
}

pub fn placement(cmd: &PlacementCmd) -> Result<()> {
    let mut checks = placement::run_all(&nearflow_alloc::GLOBAL);
    checks.push(runtime_threads()?);
    let nodes = placement::nodes();
    let failed = checks.iter().filter(|c| !c.ok).count();
    if cmd.json {
        let out: Vec<CheckOut> = checks
            .iter()
            .map(|c| CheckOut {
                name: c.name.clone(),
                ok: c.ok,
                detail: c.detail.clone(),
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "nodes": nodes.iter().map(|(n, cpus)| serde_json::json!({"node": n, "cpus": cpus})).collect::<Vec<_>>(),
                "checks": out,
                "failed": failed,
            }))?
        );
    } else {
        println!(
            "placement checks on {} NUMA node(s): {}",
            nodes.len(),
            nodes
                .iter()
                .map(|(n, c)| format!("node {n}: cpus {c:?}"))
                .collect::<Vec<_>>()
                .join("; ")
        );
        for c in &checks {
            println!("{c}");
        }
    }
    if failed > 0 {
        bail!("{failed} placement check(s) failed");
    }
    Ok(())
}

/// The runtime on the detected host, threads bound to their core group: every worker must run
/// on a CPU of its group's NUMA node.
fn runtime_threads() -> Result<Check> {
    let machine = nearflow_topo::detect_host().context("cannot detect this machine")?;
    let expected: Vec<usize> = (0..machine.pu_count())
        .map(|w| machine.node_of(w))
        .collect();
    let rt = Runtime::builder(machine).pinning(Pinning::Group).build()?;
    let workers = rt.workers();
    let seen: Arc<Mutex<BTreeMap<usize, BTreeMap<usize, usize>>>> = Arc::default();
    let s = seen.clone();
    let h = rt.submit(move |cx| {
        for _ in 0..(workers * 64) {
            let s = s.clone();
            cx.spawn_deferred(move |cx| {
                // Busy for a while so that every worker takes some of these tasks.
                let t = Instant::now();
                while t.elapsed() < Duration::from_micros(300) {
                    std::hint::spin_loop();
                }
                let node = nearflow_alloc::current_node();
                let mut m = s.lock().unwrap_or_else(|p| p.into_inner());
                *m.entry(cx.worker()).or_default().entry(node).or_default() += 1;
            });
        }
    });
    h.wait()
        .map_err(|e| anyhow::anyhow!("the probe request failed: {e}"))?;
    let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut ok = seen.len() == workers;
    let mut detail = Vec::new();
    for (w, nodes) in &seen {
        let want = expected.get(*w).copied().unwrap_or(usize::MAX);
        let right = nodes.keys().all(|&n| n == want);
        ok &= right;
        detail.push(format!(
            "worker {w} (node {want}): tasks on nodes {nodes:?}"
        ));
    }
    if seen.len() != workers {
        detail.push(format!(
            "only {} of {workers} workers ran a task",
            seen.len()
        ));
    }
    Ok(Check {
        name: "runtime workers run on their core group's node".into(),
        ok,
        detail: detail.join("; "),
    })
}
