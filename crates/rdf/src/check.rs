//! Checking a store on disk: every checksum of its snapshot, its delta segment against the
//! snapshot, its update log replayed; for a cluster's folder, every shard and whether their
//! dictionaries still agree. With salvage, what an open refuses is first cut away
//! ([`db::salvage`](crate::db::salvage)) and what was given up is said.

use std::path::Path;

use nearflow_topo::Machine;

use crate::db::{Db, DbError, Salvaged};
use crate::open::Report;
use crate::shard::{Manifest, ShardError, MANIFEST};

/// Why a store could not be checked (a damaged one is checked: [`Checked::damage`]).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The store (or a shard) could not be opened, or its log could not be salvaged.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A cluster's manifest could not be read.
    #[error(transparent)]
    Shard(#[from] ShardError),
}

/// What a check found.
#[derive(Debug, Default)]
pub struct Checked {
    /// What was checked and how long it took, a line per store (and one for a cluster).
    pub lines: Vec<String>,
    /// The damage found, if any: the store must not be trusted.
    pub damage: Option<String>,
}

/// Checks the store at `path` (a snapshot, or a cluster's folder of shards) on `machine`;
/// with `salvage`, first cuts away what an open refuses, saying what it gave up to `report`.
///
/// # Errors
/// When the store cannot be opened at all (a missing file, a lock held, a log damaged and not
/// salvaged).
pub fn check(
    path: &Path,
    machine: &Machine,
    salvage: bool,
    report: &dyn Report,
) -> Result<Checked, CheckError> {
    if !path.join(MANIFEST).is_file() {
        return check_one(path, machine, salvage, report).map(|(c, _)| c);
    }
    let manifest = Manifest::read(path)?;
    let mut out = Checked::default();
    let mut terms = Vec::new();
    for i in 0..manifest.sharding.shards {
        let shard = Manifest::shard_path(path, i);
        let (one, (quads, n)) = check_one(&shard, machine, salvage, report)?;
        out.lines.extend(one.lines);
        if one.damage.is_some() {
            out.damage = one.damage;
            return Ok(out);
        }
        if quads != manifest.quads[i] {
            out.lines.push(format!(
                "{}: {quads} quads, {} when it was loaded",
                shard.display(),
                manifest.quads[i]
            ));
        }
        terms.push(n);
    }
    if let Some(i) = terms.iter().position(|&n| n != terms[0]) {
        out.damage = Some(format!(
            "{}: the shards' dictionaries differ ({} terms in shard 0, {} in shard {i}): ids no \
             longer mean the same terms on every shard",
            path.display(),
            terms[0],
            terms[i]
        ));
        return Ok(out);
    }
    out.lines.push(format!(
        "{}: {} shards by {}, {} quads; every shard whole, with as many terms as the others ({})",
        path.display(),
        manifest.sharding.shards,
        manifest.sharding.by.name(),
        manifest.total(),
        terms[0]
    ));
    Ok(out)
}

/// `n` and the noun, plural unless `n` is 1.
fn counted(n: u64, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// What a salvage gave up, a line each.
fn salvaged(path: &Path, s: &Salvaged) -> Vec<String> {
    let p = path.display();
    let mut lines = Vec::new();
    match (&s.copy, &s.why) {
        (Some(copy), Some(why)) => lines.push(format!(
            "{p}: the update log was damaged {why}; kept the {} before it, dropped {} (the \
             damaged log is kept as {})",
            counted(s.kept as u64, "record"),
            counted(s.dropped as u64, "acknowledged update"),
            copy.display()
        )),
        (Some(copy), None) if s.foreign.is_some() => lines.push(format!(
            "{p}: the update log follows another snapshot; gave up its {} and started it \
             afresh: the store opens as its snapshot is (the log is kept as {})",
            counted(s.foreign.unwrap_or(0) as u64, "record"),
            copy.display()
        )),
        _ if s.unlogged > 0 || s.segment_lost.is_some() => {}
        _ => lines.push(format!(
            "{p}: the update log is whole ({}); nothing to salvage",
            counted(s.kept as u64, "record")
        )),
    }
    if let Some(upto) = s.segment_lost {
        lines.push(format!(
            "{p}: gave up the delta segment the store needed (missing, or written beside \
             another snapshot; it held updates up to update {upto}); the store opens from its \
             snapshot and its update log"
        ));
    }
    if s.unlogged > 0 {
        lines.push(format!(
            "{p}: gave up {} past the end of the update log (it was cut, zeroed, damaged at its \
             end, removed or replaced by an older copy); the store opens with the {} it holds",
            counted(s.unlogged, "acknowledged update"),
            counted(s.kept as u64, "record")
        ));
    }
    lines
}

/// Checks one store: what was found, and its quads and terms.
fn check_one(
    path: &Path,
    machine: &Machine,
    salvage: bool,
    report: &dyn Report,
) -> Result<(Checked, (u64, usize)), CheckError> {
    if salvage {
        let s = crate::db::salvage(path)?;
        salvaged(path, &s).iter().for_each(|l| report.say(l));
    }
    let t = std::time::Instant::now();
    let db = Db::open(path, machine, false)?;
    let opened = t.elapsed();
    let s = db.current();
    let mut damage = s.health().and_then(|h| h.check_all().map(str::to_owned));
    if damage.is_none() && db.stats().segment.is_some() && !s.delta_agrees() {
        damage = Some(format!(
            "its delta segment ({}) adds a quad the snapshot holds or removes one it lacks",
            crate::snapshot::segment::segment_path(path).display()
        ));
    }
    let st = db.stats();
    let read = match s.health() {
        Some(h) => format!(
            " by mapping {:.1} MiB, every {}'s checksum checked in {:.3} s",
            s.mapped_bytes() as f64 / (1 << 20) as f64,
            if h.checked_as_read() {
                "chunk"
            } else {
                "section"
            },
            t.elapsed().as_secs_f64()
        ),
        None => " (format 2: read and checked whole)".to_owned(),
    };
    let segment = match st.segment {
        Some((a, r)) => format!("its delta segment (+{a} −{r} quads) checked; "),
        None => String::new(),
    };
    let line = format!(
        "{}: {} quads, {} terms; opened in {:.3} s{read}; {segment}{} replayed",
        path.display(),
        s.len(),
        s.dict().len(),
        opened.as_secs_f64(),
        counted(st.replayed, "logged update"),
    );
    let damage = damage.map(|d| format!("{}: {d}", path.display()));
    let checked = Checked {
        lines: vec![line],
        damage,
    };
    Ok((checked, (s.len(), s.dict().len())))
}
