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
    if !cmd.store.join(nearflow_rdf::shard::MANIFEST).is_file() {
        return store_one(cmd).map(|_| ());
    }
    let manifest = nearflow_rdf::shard::Manifest::read(&cmd.store)?;
    let mut terms = Vec::new();
    for i in 0..manifest.sharding.shards {
        let shard = StoreCheckCmd {
            store: nearflow_rdf::shard::Manifest::shard_path(&cmd.store, i),
            salvage: cmd.salvage,
        };
        let (quads, n) = store_one(&shard)?;
        if quads != manifest.quads[i] {
            println!(
                "{}: {quads} quads, {} when it was loaded",
                shard.store.display(),
                manifest.quads[i]
            );
        }
        terms.push(n);
    }
    if let Some(i) = terms.iter().position(|&n| n != terms[0]) {
        bail!(
            "{}: the shards' dictionaries differ ({} terms in shard 0, {} in shard {i}): ids no \
             longer mean the same terms on every shard",
            cmd.store.display(),
            terms[0],
            terms[i]
        );
    }
    println!(
        "{}: {} shards by {}, {} quads; every shard whole, with as many terms as the others ({})",
        cmd.store.display(),
        manifest.sharding.shards,
        manifest.sharding.by.name(),
        manifest.total(),
        terms[0]
    );
    Ok(())
}

/// [`store`] of one store: its quads and terms.
fn store_one(cmd: &StoreCheckCmd) -> Result<(u64, usize)> {
    if cmd.salvage {
        let s = nearflow_rdf::db::salvage(&cmd.store)?;
        match (&s.copy, &s.why) {
            (Some(copy), Some(why)) => eprintln!(
                "{}: the update log was damaged {why}; kept the {} record{} before it, dropped {} \
                 acknowledged update{} (the damaged log is kept as {})",
                cmd.store.display(),
                s.kept,
                if s.kept == 1 { "" } else { "s" },
                s.dropped,
                if s.dropped == 1 { "" } else { "s" },
                copy.display()
            ),
            (Some(copy), None) if s.foreign.is_some() => eprintln!(
                "{}: the update log follows another snapshot; gave up its {} record{} and started \
                 it afresh: the store opens as its snapshot is (the log is kept as {})",
                cmd.store.display(),
                s.foreign.unwrap_or(0),
                if s.foreign == Some(1) { "" } else { "s" },
                copy.display()
            ),
            _ if s.unlogged > 0 || s.segment_lost.is_some() => {}
            _ => eprintln!(
                "{}: the update log is whole ({} record{}); nothing to salvage",
                cmd.store.display(),
                s.kept,
                if s.kept == 1 { "" } else { "s" }
            ),
        }
        if let Some(upto) = s.segment_lost {
            eprintln!(
                "{}: gave up the delta segment the store needed (missing, or written beside \
                 another snapshot; it held updates up to update {upto}); the store opens from its \
                 snapshot and its update log",
                cmd.store.display()
            );
        }
        if s.unlogged > 0 {
            eprintln!(
                "{}: gave up {} acknowledged update{} past the end of the update log (it was cut, \
                 zeroed, damaged at its end, removed or replaced by an older copy); the store \
                 opens with the {} record{} it holds",
                cmd.store.display(),
                s.unlogged,
                if s.unlogged == 1 { "" } else { "s" },
                s.kept,
                if s.kept == 1 { "" } else { "s" }
            );
        }
    }
    let t = std::time::Instant::now();
    let machine = nearflow_topo::detect_host().context("cannot detect this machine")?;
    let db = nearflow_rdf::db::Db::open(&cmd.store, &machine, false)?;
    let opened = t.elapsed();
    let s = db.current();
    let mut verdict = match s.health() {
        Some(h) => h.check_all().map(str::to_owned),
        None => None,
    };
    if verdict.is_none() && db.stats().segment.is_some() && !s.delta_agrees() {
        verdict = Some(format!(
            "its delta segment ({}) adds a quad the snapshot holds or removes one it lacks",
            nearflow_rdf::snapshot::segment::segment_path(&cmd.store).display()
        ));
    }
    let st = db.stats();
    println!(
        "{}: {} quads, {} terms; opened in {:.3} s{}; {}{} logged update{} replayed",
        cmd.store.display(),
        s.len(),
        s.dict().len(),
        opened.as_secs_f64(),
        if let Some(h) = s.health() {
            format!(
                " by mapping {:.1} MiB, every {}'s checksum checked in {:.3} s",
                s.mapped_bytes() as f64 / (1 << 20) as f64,
                if h.checked_as_read() {
                    "chunk"
                } else {
                    "section"
                },
                t.elapsed().as_secs_f64()
            )
        } else {
            " (format 2: read and checked whole)".to_owned()
        },
        match st.segment {
            Some((a, r)) => format!("its delta segment (+{a} −{r} quads) checked; "),
            None => String::new(),
        },
        st.replayed,
        if st.replayed == 1 { "" } else { "s" }
    );
    match verdict {
        Some(d) => bail!("{}: {d}", cmd.store.display()),
        None => Ok((s.len(), s.dict().len())),
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
