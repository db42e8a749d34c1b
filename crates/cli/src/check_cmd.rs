//! `nearflow check placement`: is memory and are threads where the LAS paper (§4.1, §5.2) says
//! they are, on this machine? Asks the kernel (`move_pages`, `getcpu`); fails (exit 1) when a
//! check fails. Runs in CI on the host and inside a two-node QEMU guest
//! (`scripts/numa-vm-test.sh`).

use anyhow::{bail, Context, Result};
use clap::Args;
use nearflow_alloc::checks as alloc_checks;
use serde::Serialize;

#[derive(Args, Debug)]
pub struct PlacementCmd {
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct StoreCheckCmd {
    /// The store snapshot to check (written by `nearflow load … --save`), or a cluster's folder
    /// (`--shards`): each shard is checked, and that the shards hold as many terms each.
    pub store: std::path::PathBuf,
    /// When the update log is damaged, keep the records before the damage and drop the rest
    /// (the damaged log is kept beside it as `STORE.log.damaged`); says how many acknowledged
    /// updates that drops. Without it a damaged log is only reported.
    #[arg(long)]
    pub salvage: bool,
}

/// `nearflow check store FILE`: opens the store (its header and small sections are checked
/// then), waits for the check of every other section's checksum, and replays its log; exit 1
/// naming the section or the log's byte when one is damaged.
pub fn store(cmd: &StoreCheckCmd) -> Result<()> {
    let machine = nearflow_topo::detect_host().context("cannot detect this machine")?;
    let shown = crate::Terminal::new(false);
    let checked = nearflow_rdf::check::check(&cmd.store, &machine, cmd.salvage, &shown)?;
    checked.lines.iter().for_each(|l| println!("{l}"));
    match checked.damage {
        Some(d) => bail!("{d}"),
        None => Ok(()),
    }
}

#[derive(Serialize)]
struct CheckOut {
    name: String,
    ok: bool,
    detail: String,
}

pub fn placement(cmd: &PlacementCmd) -> Result<()> {
    let mut checks = alloc_checks::run_all(&nearflow_alloc::GLOBAL);
    let host = nearflow_topo::detect_host().context("cannot detect this machine")?;
    checks.push(
        nearflow_rt::checks::worker_nodes(host.clone())
            .context("cannot check the runtime's workers")?,
    );
    checks.push(nearflow_split::checks::partitions_on_their_nodes(&host));
    checks.push(nearflow_split::checks::dispatched_tasks_run_where_counted(
        &host,
    ));
    checks.push(nearflow_split::checks::homed_tasks_run_at_home_when_no_worker_is_idle(&host));
    // The replica check's store: a generated SP²Bench document of 60,000 triples; its query
    // q2 has scans, hash joins and an index join.
    let mut doc = Vec::new();
    nearflow_apps::sp2bench::generate(60_000, 1, &mut doc)?;
    let q2 = nearflow_apps::sp2bench::queries::text("q2").context("SP²Bench has a q2")?;
    checks.push(nearflow_sparql::replica_check::replicas_on_their_nodes(
        &host, &doc, &q2,
    ));
    let nodes = alloc_checks::nodes();
    // On one node every page and thread is on node 0: the checks then show that the kernel
    // answers and the counts agree, but cannot tell a right node from a wrong one.
    let across_nodes = nodes.len() > 1;
    let one_node_note =
        "one NUMA node here: the checks cannot tell a right node from a wrong one; \
                         scripts/numa-vm-test.sh runs them on two nodes in a QEMU guest";
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
                "across_nodes": across_nodes,
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
        if !across_nodes {
            println!("{one_node_note}");
        }
    }
    if failed > 0 {
        bail!("{failed} placement check(s) failed");
    }
    Ok(())
}
