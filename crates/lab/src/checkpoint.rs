//! `nearflow bench checkpoint`: what a checkpoint writes after N updates on a store.
//!
//! The store is linked (or copied, across file systems) into a fresh working folder, so the
//! original is never written: a snapshot is only ever replaced by renaming a new file over it,
//! and the log and a delta segment are files beside it. N updates, each an `INSERT DATA` of
//! new triples (`dc:title` of a new subject: a range that SP²Bench's queries read), run one
//! at a time as `nearflow update` and the endpoint run them: parsed, applied, logged and synced,
//! published. Then one checkpoint is forced, as a server's shutdown forces it, and the store is
//! opened again from its files and its quads counted.
//!
//! It reports the updates' rate, what the checkpoint wrote (a delta segment beside the
//! snapshot, or the snapshot again) as bytes and as a share of the snapshot, its time, and
//! the reopened store's count against the one expected.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use nearflow_rdf::db::{log_path, Db, Tuning};
use nearflow_rdf::snapshot::segment::segment_path;
use nearflow_sparql::update::{Update, UpdateOptions};
use serde::Serialize;

use crate::harness::{build_runtime, median, progress};
use crate::Report;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The store (a snapshot written by `nearflow load --save`); never written.
    pub store: PathBuf,
    /// A folder that does not exist yet, or is empty, on the same file system as the store (a
    /// link, else a copy).
    pub work: PathBuf,
    /// Updates to run.
    pub updates: u64,
    /// Triples each update inserts.
    pub triples: u64,
    /// The store's [`Tuning::segment_min_quads`]: below it the delta is merged in memory and
    /// a checkpoint writes the snapshot (the store's default, or a size above the store to
    /// measure that path).
    pub segment_min_quads: u64,
    /// No progress bar.
    pub quiet: bool,
}

/// The measured figures.
#[derive(Clone, Debug, Serialize)]
pub struct Checkpoint {
    pub host: String,
    pub store_quads: u64,
    pub snapshot_bytes: u64,
    pub updates: u64,
    pub quads_inserted: u64,
    /// Seconds for all updates, and the median and largest of one.
    pub update_seconds: f64,
    pub update_median_ms: f64,
    pub update_max_ms: f64,
    pub log_bytes: u64,
    /// `segment` or `snapshot`.
    pub wrote: String,
    pub checkpoint_bytes: u64,
    pub checkpoint_share: f64,
    pub checkpoint_seconds: f64,
    /// Whether the snapshot file is the one linked in (not written again).
    pub snapshot_untouched: bool,
    pub reopen_seconds: f64,
    pub reopened_quads: u64,
}

/// Links `from` to `to`, or copies it when a link cannot be made.
fn link_or_copy(from: &Path, to: &Path) -> Result<&'static str> {
    if std::fs::hard_link(from, to).is_ok() {
        return Ok("linked");
    }
    std::fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    Ok("copied")
}

/// Runs the updates and the checkpoint.
pub fn run(cmd: &Config) -> Result<Report<Checkpoint>> {
    if cmd.updates == 0 || cmd.triples == 0 {
        bail!("--updates and --triples must be at least 1");
    }
    let machine = nearflow_topo::detect_host().context("cannot detect this machine")?;
    {
        let original = Db::open(&cmd.store, &machine, false)?;
        let st = original.stats();
        if st.replayed > 0 || st.segment.is_some() {
            bail!(
                "{}: the store has updates beside its snapshot (in {} or {}); measure a store \
                 without them",
                cmd.store.display(),
                log_path(&cmd.store).display(),
                segment_path(&cmd.store).display()
            );
        }
    }
    if cmd.work.exists()
        && std::fs::read_dir(&cmd.work)
            .with_context(|| format!("{}: not a folder", cmd.work.display()))?
            .next()
            .is_some()
    {
        bail!(
            "{}: not empty; give a new folder (the store is linked there and changed)",
            cmd.work.display()
        );
    }
    std::fs::create_dir_all(&cmd.work)
        .with_context(|| format!("cannot make {}", cmd.work.display()))?;
    let path = cmd.work.join("store.nfs");
    let how = link_or_copy(&cmd.store, &path)?;
    let inode = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).map(|m| (m.ino(), m.len())).ok()
    };
    let before = inode(&path);
    let snapshot_bytes = before.map_or(0, |b| b.1);
    let tuning = Tuning {
        segment_min_quads: cmd.segment_min_quads,
        ..Tuning::default()
    };
    let db = Db::open_tuned(&path, &machine, true, tuning)?;
    let store_quads = db.current().len();
    let rt = build_runtime(
        machine.clone(),
        nearflow_policy::PolicyKind::Las,
        nearflow_rt::Pinning::Group,
        false,
        nearflow_rt::AllocatorKind::System,
    )?;
    let options = UpdateOptions::default();
    let bar = progress(cmd.updates, "updates", cmd.quiet);
    let mut times = Vec::with_capacity(cmd.updates as usize);
    let mut inserted = 0u64;
    let all = Instant::now();
    for i in 0..cmd.updates {
        let mut text = String::from("INSERT DATA {\n");
        for j in 0..cmd.triples {
            writeln!(
                text,
                "<http://nearflow.example/bench/u{i}> <http://purl.org/dc/elements/1.1/title> \"update {i} triple {j}\" ."
            )?;
        }
        text.push('}');
        let t = Instant::now();
        let update = Update::parse(&text, None)?;
        let done = db
            .update(|s: &Arc<nearflow_rdf::Store>| {
                let a = update.apply(s, &rt, &options)?;
                Ok::<_, nearflow_sparql::QueryError>((a.store, a.changes))
            })
            .map_err(|e| anyhow::anyhow!("update {i}: {e}"))?;
        times.push(t.elapsed());
        inserted += done.changed as u64;
        bar.inc(1);
    }
    let update_seconds = all.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let log_bytes = std::fs::metadata(log_path(&path)).map_or(0, |m| m.len());
    let t = Instant::now();
    db.merge(true).context("the checkpoint")?;
    let checkpoint_seconds = t.elapsed().as_secs_f64();
    let st = db.stats();
    let wrote = if st.checkpoints > 0 {
        "snapshot"
    } else if st.segments > 0 {
        "segment"
    } else {
        "nothing"
    };
    drop(db);
    let snapshot_untouched = inode(&path) == before;
    let t = Instant::now();
    let reopened = Db::open(&path, &machine, false)?;
    let reopen_seconds = t.elapsed().as_secs_f64();
    let reopened_quads = reopened.current().len();
    drop(reopened);
    let expected = store_quads + inserted;
    if reopened_quads != expected {
        bail!("the store reopened with {reopened_quads} quads, {expected} expected");
    }
    let max = times.iter().max().copied().unwrap_or_default();
    let data = Checkpoint {
        host: nearflow_topo::host::cpu_label(),
        store_quads,
        snapshot_bytes,
        updates: cmd.updates,
        quads_inserted: inserted,
        update_seconds,
        update_median_ms: median(times).as_secs_f64() * 1e3,
        update_max_ms: max.as_secs_f64() * 1e3,
        log_bytes,
        wrote: wrote.to_owned(),
        checkpoint_bytes: st.last_checkpoint_bytes,
        checkpoint_share: st.last_checkpoint_bytes as f64 / snapshot_bytes.max(1) as f64,
        checkpoint_seconds,
        snapshot_untouched,
        reopen_seconds,
        reopened_quads,
    };
    let mut out = String::new();
    let d = &data;
    writeln!(out, "host: {}", d.host)?;
    writeln!(
        out,
        "store: {} quads, snapshot {:.1} MB ({how} into {})",
        d.store_quads,
        d.snapshot_bytes as f64 / 1e6,
        cmd.work.display()
    )?;
    writeln!(
        out,
        "{} updates of {} triple{}: {} quads inserted in {:.1} s ({:.0} updates/s; one: median {:.2} ms, largest {:.1} ms); log {:.1} MB",
        d.updates,
        cmd.triples,
        if cmd.triples == 1 { "" } else { "s" },
        d.quads_inserted,
        d.update_seconds,
        d.updates as f64 / d.update_seconds,
        d.update_median_ms,
        d.update_max_ms,
        d.log_bytes as f64 / 1e6
    )?;
    writeln!(
        out,
        "checkpoint: wrote the {} ({:.2} MB, {:.2} % of the snapshot) in {:.2} s; snapshot file {}",
        d.wrote,
        d.checkpoint_bytes as f64 / 1e6,
        d.checkpoint_share * 100.0,
        d.checkpoint_seconds,
        if d.snapshot_untouched {
            "untouched"
        } else {
            "written again"
        }
    )?;
    writeln!(
        out,
        "reopened in {:.2} s: {} quads, as expected",
        d.reopen_seconds, d.reopened_quads
    )?;
    Ok(Report::new(data, out))
}
