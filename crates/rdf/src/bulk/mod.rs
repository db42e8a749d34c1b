//! Loading RDF files into a snapshot in bounded memory: the store is never held whole, so a
//! machine loads a store many times larger than its memory.
//!
//! Four passes, each of which holds at most one run in memory:
//!
//! 1. **Parse into runs.** The files are parsed and encoded as `load.rs` does, into a
//!    dictionary and quads of their own (a *run*). When the run's memory reaches its share of
//!    the budget, it is spilled to the temporary folder: its terms sorted by key, each with its
//!    id in the run (`terms-R`), and its quads in those ids (`quads-R`); the next run starts
//!    empty.
//! 2. **Merge the terms.** A k-way merge of the runs' sorted terms gives every distinct term
//!    its final id, in key order (so the snapshot needs no term index, and a lookup is one
//!    binary search); the keys go straight into the snapshot, and each run gets its map from
//!    its ids to the final ones (`map-R`).
//! 3. **Sort the runs' quads.** Each run's quads are translated through its map and sorted
//!    three times, once per permutation, each order written delta-encoded (`spo-R`, `pos-R`,
//!    `osp-R`).
//! 4. **Merge the quads.** For each permutation a k-way merge of the runs drops duplicates and
//!    streams the rows into the snapshot's packed blocks, counting the statistics and the
//!    graph table as it goes.
//!
//! The snapshot is written to a temporary file beside the target and renamed over it at the
//! end (`snapshot::write_atomically`), so a failure, a full disk or an interruption leaves the
//! previous store whole. The runs live in a temporary folder beside the target, removed when
//! the load ends, whatever way it ends ([`TempDir`]); each run file is removed as soon as the
//! merge that reads it is done. Every run file starts with a magic number and its count of
//! entries and ends with a CRC-32 of its entries, and every id read back is checked against
//! its range: a run cut short or damaged on disk is a clear error, never a panic.
//!
//! Memory: a run's dictionary and quads are allocated at their full size when it starts, and
//! the run is spilled before any of them would grow, so no reallocation ever doubles one of
//! them; their sizes follow the runs before (terms a statement, bytes a term). A full run is
//! spilled on a thread of its own while the next one is parsed into, so two runs are alive at
//! once: each gets half of the budget less [`RESERVE`] (the program, the parser's batches, the
//! reader's buffers). The
//! later passes hold one run's quads and map, a buffer per run and the block headers of the
//! permutation being written (24 bytes per 256 rows).
//!
//! Here: pass 1 and the budget. `runs.rs`: the temporary folder and the runs' files;
//! `merge.rs`: passes 2 to 4.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::dict::DictFull;
use crate::layout::{Permutation, Quad, StatsBuilder};
use crate::load::{LoadError, LoadOptions, Loaded, Progress};
use crate::snapshot::common::Hashing;
use crate::term::Id;

mod merge;
mod runs;
#[cfg(test)]
pub(crate) mod tests;

use merge::*;
pub use runs::TempDir;
use runs::*;

/// The passes of a load in bounded memory, as [`Stage`] reports them.
pub const STAGES: [&str; 4] = ["parsing", "merging terms", "sorting runs", "merging quads"];

/// Which pass a load in bounded memory is in ([`STAGES`]), and how far it is through it
/// (`done` of `total`: terms, runs or rows), readable from another thread for a progress bar.
#[derive(Debug, Default)]
pub struct Stage {
    /// The index in [`STAGES`].
    pub index: AtomicUsize,
    /// Work done in this pass.
    pub done: AtomicU64,
    /// Work in this pass.
    pub total: AtomicU64,
}

impl Stage {
    fn enter(&self, index: usize, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        self.index.store(index, Ordering::Relaxed);
    }
}

/// What a load in bounded memory did.
#[derive(Clone, Debug, Default)]
pub struct BulkReport {
    /// Statements parsed (duplicates included).
    pub statements: u64,
    /// Distinct quads in the store.
    pub quads: u64,
    /// Distinct terms.
    pub terms: u64,
    /// Graphs holding a quad (the default graph included when it holds one).
    pub graphs: usize,
    /// Runs spilled.
    pub runs: usize,
    /// The most bytes the temporary files held at once.
    pub temp_peak: u64,
    /// Seconds each pass of [`STAGES`] took.
    pub pass_secs: [f64; 4],
}

impl BulkReport {
    /// The load in two lines, as `nearflow load` prints it: what it read and made in `secs`,
    /// the runs it spilled, and this process's peak resident memory against the `budget`;
    /// then the passes' times.
    pub fn summary(&self, secs: f64, budget: u64) -> String {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let graphs = match self.graphs {
            0 | 1 => String::new(),
            n => format!(" in {n} graphs"),
        };
        let [parse, terms, sort, quads] = self.pass_secs;
        format!(
            "loaded {} statements ({} distinct quads{graphs}, {} terms) in {secs:.2} s: {:.0} \
             statements/s, {} run{} spilled (temporary files {:.1} MiB at most), peak resident \
             {:.1} MiB of a {:.1} MiB budget\npasses: parsing {parse:.1} s, merging terms \
             {terms:.1} s, sorting runs {sort:.1} s, merging quads {quads:.1} s",
            self.statements,
            self.quads,
            self.terms,
            self.statements as f64 / secs,
            self.runs,
            if self.runs == 1 { "" } else { "s" },
            mib(self.temp_peak),
            mib(nearflow_topo::host::peak_resident()),
            mib(budget)
        )
    }
}

/// The budget a load takes when none is given: a quarter of the machine's memory, at least
/// 256 MiB (1 GiB when the machine does not say).
pub fn default_budget() -> u64 {
    nearflow_topo::host::memory().map_or(1 << 30, |t| (t / 4).max(256 << 20))
}

/// The part of the budget kept for what is not the run: the program, the parser's batches in
/// flight, the reader's buffers.
pub const RESERVE: u64 = 32 << 20;

/// The smallest budget taken: the reserve and as much again for the runs.
pub const MIN_BUDGET: u64 = 2 * RESERVE;

/// Loads `paths` (as `load::load_files_with` reads them) into a format-5 snapshot at `target`,
/// holding about `budget` bytes at most (see the module's text); `progress` and `stage` are
/// updated as it goes, and `progress.cancel` stops it. The previous file at `target` stays
/// whole until the new one is renamed over it.
pub fn load_to_snapshot(
    paths: &[PathBuf],
    options: &LoadOptions,
    budget: u64,
    target: &Path,
    progress: &Arc<Progress>,
    stage: &Stage,
) -> Result<BulkReport, LoadError> {
    let room = (budget.max(MIN_BUDGET) - RESERVE) / 20 * 17;
    load_spilling_at(
        paths,
        options,
        room,
        target,
        progress,
        stage,
        &mut |_, _| {},
    )
}

/// The time of each pass.
struct Laps {
    clock: std::time::Instant,
    secs: [f64; 4],
}

impl Laps {
    /// Pass `i` has ended.
    fn lap(&mut self, i: usize) {
        self.secs[i] = self.clock.elapsed().as_secs_f64();
        self.clock = std::time::Instant::now();
    }
}

/// How the runs so far were made up, to size the next one.
#[derive(Clone, Copy, Debug)]
struct Shape {
    terms_per_statement: f64,
    bytes_per_term: f64,
}

impl Default for Shape {
    /// SP²Bench's, as a start.
    fn default() -> Self {
        Shape {
            terms_per_statement: 0.6,
            bytes_per_term: 60.0,
        }
    }
}

impl Shape {
    /// The shape of a run just made, with a fifth more of each for the next one's spread.
    fn of(run: &Loaded) -> Shape {
        let (n, q) = (run.dict.len() as f64, run.quads.len().max(1) as f64);
        let bytes = run.dict.own_key_bytes();
        Shape {
            terms_per_statement: (n / q * 1.2).clamp(0.01, 4.0),
            bytes_per_term: (bytes as f64 / n.max(1.0) * 1.2).clamp(8.0, 4096.0),
        }
    }

    /// An empty run with room for as many statements as `room` bytes hold in this shape.
    fn run(self, room: u64) -> Loaded {
        // A quad, and per term its end offset, its slot in the table (power-of-two rounding
        // included) and its key.
        let per = 16.0 + self.terms_per_statement * (8.0 + 10.0 + self.bytes_per_term);
        let mut q = (room as f64 / per) as usize;
        loop {
            let t = (q as f64 * self.terms_per_statement) as usize;
            let k = (t as f64 * self.bytes_per_term) as usize;
            let run = Loaded {
                dict: crate::dict::Dict::with_capacity(t, k),
                quads: Vec::with_capacity(q),
            };
            let bytes = run_bytes(&run);
            if bytes <= room || q < 2 * crate::load::BATCH {
                return run;
            }
            q = (q as f64 * room as f64 / bytes as f64 * 0.95) as usize;
        }
    }
}

/// Key bytes kept free in a run's dictionary for the next batch: a batch that adds more (a
/// few terms of megabytes) grows the arena once, beyond the run's room.
const KEY_MARGIN: usize = 2 << 20;

/// Whether the next batch might not fit the room `run` has left.
fn is_full(run: &Loaded) -> bool {
    let (terms, bytes) = run.dict.room();
    let batch = crate::load::BATCH;
    run.quads.capacity() - run.quads.len() < batch || terms < 4 * batch || bytes < KEY_MARGIN
}

/// [`load_to_snapshot`] with the runs given `room` bytes each, and `between`
/// called with the temporary folder after each of the first three passes (1, 2, 3: the tests
/// damage the runs there).
fn load_spilling_at(
    paths: &[PathBuf],
    options: &LoadOptions,
    room: u64,
    target: &Path,
    progress: &Arc<Progress>,
    stage: &Stage,
    between: &mut dyn FnMut(usize, &Path),
) -> Result<BulkReport, LoadError> {
    let tmp = TempDir::beside(target)?;
    let mut laps = Laps {
        clock: std::time::Instant::now(),
        secs: [0.0; 4],
    };
    // Two runs are alive at once, one parsed into while the one before is spilled on a thread
    // of its own: each has half the room.
    let room = room / 2;
    let mut runs: Vec<Run> = Vec::new();
    let mut shape = Shape::default();
    let mut run = shape.run(room);
    stage.enter(0, 0);
    std::thread::scope(|scope| -> Result<(), LoadError> {
        let tmp = &tmp;
        let mut pending: Option<std::thread::ScopedJoinHandle<'_, Result<Run, LoadError>>> = None;
        let spilled = |runs: &mut Vec<Run>,
                       pending: &mut Option<std::thread::ScopedJoinHandle<'_, _>>|
         -> Result<(), LoadError> {
            if let Some(h) = pending.take() {
                runs.push(h.join().expect("a spill does not panic")?);
            }
            Ok(())
        };
        let parsed = crate::load::load_files_into(&mut run, paths, options, progress, &mut |run| {
            if is_full(run) {
                shape = Shape::of(run);
                let full = std::mem::take(run);
                spilled(&mut runs, &mut pending)?;
                let r = runs.len();
                pending = Some(
                    std::thread::Builder::new()
                        .name("nearflow-spill".into())
                        .spawn_scoped(scope, move || spill(tmp, r, full))
                        .map_err(spill_err(tmp.path()))?,
                );
                *run = shape.run(room);
            }
            Ok(())
        });
        // The spill in flight ends (and its error, if any, is kept) whatever the parse did.
        let flushed = spilled(&mut runs, &mut pending);
        parsed?;
        flushed
    })?;
    if !run.quads.is_empty() || !run.dict.is_empty() || runs.is_empty() {
        runs.push(spill(&tmp, runs.len(), run)?);
    } else {
        drop(run);
    }
    laps.lap(0);
    between(1, tmp.path());
    let statements = progress.triples.load(Ordering::Relaxed);
    let cancelled = || {
        if progress.cancel.load(Ordering::Relaxed) {
            Err(LoadError::Interrupted)
        } else {
            Ok(())
        }
    };
    let mut report = crate::snapshot::write_atomically(target, |mut file, tmp_path| {
        let io = spill_err(tmp_path);
        let mut sink = crate::snapshot::WRITTEN.sink(&mut file).map_err(&io)?;
        let terms = merge_terms(&tmp, &runs, &mut *sink, tmp_path, stage, &cancelled)?;
        laps.lap(1);
        between(2, tmp.path());
        sort_runs(&tmp, &runs, terms, stage, &cancelled)?;
        laps.lap(2);
        between(3, tmp.path());
        let (graphs, stats) = merge_quads(&tmp, &runs, &mut *sink, tmp_path, stage, &cancelled)?;
        sink.finish(&graphs, &stats).map_err(&io)?;
        file.sync_all().map_err(&io)?;
        laps.lap(3);
        Ok::<_, LoadError>(BulkReport {
            statements,
            quads: stats.triples,
            terms,
            graphs: graphs.len(),
            runs: runs.len(),
            temp_peak: 0,
            pass_secs: laps.secs,
        })
    })?;
    report.temp_peak = tmp.peak.load(Ordering::Relaxed);
    Ok(report)
}
