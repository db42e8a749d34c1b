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

/// The temporary folder of a load, removed with everything in it when dropped (on success, on
/// an error, and on an interruption that returns: the CLI turns Ctrl-C into one).
pub struct TempDir {
    path: PathBuf,
    /// Bytes its files hold now, and the most they held.
    bytes: AtomicU64,
    peak: AtomicU64,
}

impl TempDir {
    /// A new folder `.NAME.load-PID` beside `target`.
    pub fn beside(target: &Path) -> Result<TempDir, LoadError> {
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let name = target
            .file_name()
            .map_or_else(|| "store".into(), |n| n.to_string_lossy().into_owned());
        let path = dir.join(format!(".{name}.load-{}", std::process::id()));
        std::fs::create_dir(&path).map_err(|error| LoadError::Spill {
            path: path.clone(),
            error,
        })?;
        Ok(TempDir {
            path,
            bytes: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        })
    }

    /// Removes the temporary folders that loads into `target` killed before they could clean
    /// up (`kill -9`, a power cut) left beside it; how many. Only for a caller that holds the
    /// store's lock (`Db::replace_by`), so that no load of `target` is running.
    pub fn remove_stale(target: &Path) -> usize {
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let Some(name) = target.file_name() else {
            return 0;
        };
        let prefix = format!(".{}.load-", name.to_string_lossy());
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.strip_prefix(&prefix)
                    .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
                    && e.file_type().is_ok_and(|t| t.is_dir())
            })
            .filter(|e| std::fs::remove_dir_all(e.path()).is_ok())
            .count()
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file(&self, name: &str, run: usize) -> PathBuf {
        self.path.join(format!("{name}-{run}"))
    }

    fn added(&self, n: u64) {
        let now = self.bytes.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// Removes a run file it no longer needs.
    fn remove(&self, path: &Path) {
        if let Ok(m) = std::fs::metadata(path) {
            self.bytes.fetch_sub(m.len(), Ordering::Relaxed);
        }
        let _ = std::fs::remove_file(path);
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn spill_err(path: &Path) -> impl Fn(std::io::Error) -> LoadError + '_ {
    move |error| LoadError::Spill {
        path: path.to_owned(),
        error,
    }
}

fn damaged(why: impl Into<String>) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("a temporary run file is damaged: {}", why.into()),
    )
}

/// The first bytes of every run file.
const RUN_MAGIC: &[u8; 8] = b"NFRUN\0\0\x01";

/// Writes a run file: the magic, the count of entries, the entries (LEB128 integers and raw
/// bytes), and the CRC-32 of the entries.
struct RunWriter {
    out: BufWriter<Hashing<File>>,
}

impl RunWriter {
    fn create(path: &Path, count: u64) -> std::io::Result<RunWriter> {
        let mut f = File::create(path)?;
        f.write_all(RUN_MAGIC)?;
        f.write_all(&count.to_le_bytes())?;
        Ok(RunWriter {
            out: BufWriter::with_capacity(
                1 << 18,
                Hashing {
                    inner: f,
                    crc: crc32fast::Hasher::new(),
                },
            ),
        })
    }

    #[inline]
    fn varint(&mut self, mut v: u64) -> std::io::Result<()> {
        let mut buf = [0u8; 10];
        let mut n = 0;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                buf[n] = b;
                n += 1;
                break;
            }
            buf[n] = b | 0x80;
            n += 1;
        }
        self.out.write_all(&buf[..n])
    }

    fn bytes(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.out.write_all(b)
    }

    /// Writes the checksum; the file's size.
    fn finish(self) -> std::io::Result<u64> {
        let h = self.out.into_inner().map_err(|e| e.into_error())?;
        let mut f = h.inner;
        f.write_all(&h.crc.finalize().to_le_bytes())?;
        f.flush()?;
        f.metadata().map(|m| m.len())
    }
}

/// Reads a run file that [`RunWriter`] wrote, checking its magic, its length and, at
/// [`end`](Self::end), its checksum.
struct RunReader {
    file: std::io::Take<File>,
    buf: Vec<u8>,
    at: usize,
    crc: crc32fast::Hasher,
    /// Entries the file says it holds.
    count: u64,
}

impl RunReader {
    fn open(path: &Path) -> std::io::Result<RunReader> {
        let mut f = File::open(path)?;
        let len = f.metadata()?.len();
        let mut head = [0u8; 16];
        if len < 20 || f.read_exact(&mut head).is_err() {
            return Err(damaged("cut short before its header ends"));
        }
        if &head[..8] != RUN_MAGIC {
            return Err(damaged("not a run file (bad magic number)"));
        }
        let count = u64::from_le_bytes(head[8..].try_into().expect("8 bytes"));
        Ok(RunReader {
            file: f.take(len - 20),
            buf: Vec::with_capacity(1 << 18),
            at: 0,
            crc: crc32fast::Hasher::new(),
            count,
        })
    }

    /// Makes at least one byte ready; false at the end of the entries.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.at < self.buf.len() {
            return Ok(true);
        }
        self.buf.clear();
        self.at = 0;
        (&mut self.file).take(1 << 18).read_to_end(&mut self.buf)?;
        self.crc.update(&self.buf);
        Ok(!self.buf.is_empty())
    }

    #[inline]
    fn byte(&mut self) -> std::io::Result<u8> {
        if self.at == self.buf.len() && !self.fill()? {
            return Err(damaged("cut short inside an entry"));
        }
        let b = self.buf[self.at];
        self.at += 1;
        Ok(b)
    }

    #[inline]
    fn varint(&mut self) -> std::io::Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(damaged("an integer longer than 64 bits"))
    }

    /// A varint that must be an id (at most [`Id::MAX`]).
    #[inline]
    fn id(&mut self) -> std::io::Result<Id> {
        Id::try_from(self.varint()?).map_err(|_| damaged("an id past 32 bits"))
    }

    fn bytes(&mut self, n: usize, out: &mut Vec<u8>) -> std::io::Result<()> {
        out.clear();
        while out.len() < n {
            if !self.fill()? {
                return Err(damaged("cut short inside a term"));
            }
            let take = (n - out.len()).min(self.buf.len() - self.at);
            out.extend_from_slice(&self.buf[self.at..self.at + take]);
            self.at += take;
        }
        Ok(())
    }

    /// After the last entry: nothing may be left, and the checksum must match.
    fn end(mut self) -> std::io::Result<()> {
        if self.at < self.buf.len() || self.fill()? {
            return Err(damaged("bytes after its last entry"));
        }
        let mut want = [0u8; 4];
        self.file
            .into_inner()
            .read_exact(&mut want)
            .map_err(|_| damaged("cut short before its checksum"))?;
        if self.crc.finalize() != u32::from_le_bytes(want) {
            return Err(damaged("checksum mismatch"));
        }
        Ok(())
    }
}

/// A run as spilled: its terms and quads.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    terms: u64,
    quads: u64,
}

/// Bytes a run holds in memory: its dictionary and its quads' vector, as allocated.
fn run_bytes(run: &Loaded) -> u64 {
    (run.dict.heap_bytes() + run.quads.capacity() * std::mem::size_of::<Quad>()) as u64
}

/// Writes `run` to `terms-R` (its keys sorted, each with its id) and `quads-R`.
fn spill(tmp: &TempDir, r: usize, run: Loaded) -> Result<Run, LoadError> {
    let Loaded { dict, quads } = run;
    let n = dict.len();
    let mut ids: Vec<Id> = (1..=n as Id).collect();
    ids.sort_unstable_by(|&a, &b| dict.key_of(a).cmp(&dict.key_of(b)));
    let path = tmp.file("terms", r);
    let mut w = RunWriter::create(&path, n as u64).map_err(spill_err(&path))?;
    for &id in &ids {
        let k = dict.key_of(id);
        w.varint(k.len() as u64)
            .and_then(|()| w.bytes(k.as_bytes()))
            .and_then(|()| w.varint(u64::from(id)))
            .map_err(spill_err(&path))?;
    }
    tmp.added(w.finish().map_err(spill_err(&path))?);
    drop((ids, dict));
    let path = tmp.file("quads", r);
    let mut w = RunWriter::create(&path, quads.len() as u64).map_err(spill_err(&path))?;
    for q in &quads {
        for &x in q {
            w.varint(u64::from(x)).map_err(spill_err(&path))?;
        }
    }
    tmp.added(w.finish().map_err(spill_err(&path))?);
    Ok(Run {
        terms: n as u64,
        quads: quads.len() as u64,
    })
}

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
    let mut report = crate::snapshot::write_atomically(target, |file, tmp_path| {
        let io = spill_err(tmp_path);
        let mut w = crate::snapshot::packed::Writer::new(file).map_err(&io)?;
        let terms = merge_terms(&tmp, &runs, &mut w, tmp_path, stage, &cancelled)?;
        w.term_index(&[]).map_err(&io)?;
        laps.lap(1);
        between(2, tmp.path());
        sort_runs(&tmp, &runs, terms, stage, &cancelled)?;
        laps.lap(2);
        between(3, tmp.path());
        let (graphs, stats) = merge_quads(&tmp, &runs, &mut w, tmp_path, stage, &cancelled)?;
        w.graphs_and_stats(&graphs, &stats).map_err(&io)?;
        let file = w.finish().map_err(&io)?;
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

/// Pass 2: the k-way merge of the runs' terms into the snapshot (written at `out`), in key
/// order, each distinct key one id; each run's map from its ids to those written to `map-R`.
/// The terms written. A failed write of the keys or their ends is an error of `out`.
fn merge_terms<W: Write + std::io::Seek>(
    tmp: &TempDir,
    runs: &[Run],
    w: &mut crate::snapshot::packed::Writer<W>,
    out: &Path,
    stage: &Stage,
    cancelled: &dyn Fn() -> Result<(), LoadError>,
) -> Result<u64, LoadError> {
    stage.enter(1, runs.iter().map(|r| r.terms).sum());
    let mut readers = Vec::with_capacity(runs.len());
    let mut maps = Vec::with_capacity(runs.len());
    for (r, run) in runs.iter().enumerate() {
        let path = tmp.file("terms", r);
        let rd = RunReader::open(&path).map_err(spill_err(&path))?;
        if rd.count != run.terms {
            return Err(spill_err(&path)(damaged("its count of terms is wrong")));
        }
        readers.push((rd, path, 0u64));
        let path = tmp.file("map", r);
        maps.push((
            RunWriter::create(&path, run.terms).map_err(spill_err(&path))?,
            path,
        ));
    }
    // The next key of run `r` and its id in the run, or `None` when it has no more.
    let next =
        |rd: &mut (RunReader, PathBuf, u64), key: &mut Vec<u8>| -> Result<Option<Id>, LoadError> {
            let (reader, path, read) = rd;
            if *read == reader.count {
                return Ok(None);
            }
            *read += 1;
            let n = reader.varint().map_err(spill_err(path))?;
            if n == 0 || n > 1 << 30 {
                return Err(spill_err(path)(damaged("a term's length out of range")));
            }
            reader.bytes(n as usize, key).map_err(spill_err(path))?;
            reader.id().map(Some).map_err(spill_err(path))
        };
    let mut heap = BinaryHeap::with_capacity(runs.len());
    for (r, rd) in readers.iter_mut().enumerate() {
        let mut key = Vec::new();
        if let Some(id) = next(rd, &mut key)? {
            heap.push(Reverse((key, r, id)));
        }
    }
    let spool_path = tmp.path().join("term-ends");
    let spool = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&spool_path)
        .map_err(spill_err(&spool_path))?;
    let mut global: Id = 0;
    let mut last: Vec<u8> = Vec::new();
    let done = &stage.done;
    w.terms(spool, spill_err(out), |push| {
        let mut n = 0u64;
        while let Some(Reverse((mut key, r, id))) = heap.pop() {
            if global == 0 || key != last {
                if global >= Id::MAX - 1 {
                    return Err(LoadError::Full(DictFull));
                }
                global += 1;
                let text = std::str::from_utf8(&key)
                    .map_err(|_| spill_err(&readers[r].1)(damaged("a term that is not UTF-8")))?;
                if text.as_bytes()[0] > crate::term::TAG_TYPED {
                    return Err(spill_err(&readers[r].1)(damaged("a term with a bad tag")));
                }
                push(text).map_err(spill_err(out))?;
                std::mem::swap(&mut last, &mut key);
            }
            let (m, path) = &mut maps[r];
            m.varint(u64::from(id))
                .and_then(|()| m.varint(u64::from(global)))
                .map_err(spill_err(path))?;
            if let Some(id) = next(&mut readers[r], &mut key)? {
                if key < last {
                    return Err(spill_err(&readers[r].1)(damaged("its terms out of order")));
                }
                heap.push(Reverse((key, r, id)));
            }
            n += 1;
            if n % 65536 == 0 {
                done.store(n, Ordering::Relaxed);
                cancelled()?;
            }
        }
        Ok(())
    })?;
    // The spool of term offsets is counted once whole, as it is now, then removed.
    if let Ok(m) = std::fs::metadata(&spool_path) {
        tmp.added(m.len());
    }
    tmp.remove(&spool_path);
    for ((reader, path, _), (map, map_path)) in readers.into_iter().zip(maps) {
        reader.end().map_err(spill_err(&path))?;
        tmp.remove(&path);
        tmp.added(map.finish().map_err(spill_err(&map_path))?);
    }
    if w.ordered() != global as usize {
        return Err(spill_err(tmp.path())(damaged(
            "the merged terms are out of order",
        )));
    }
    Ok(u64::from(global))
}

/// A permutation's sort key of a quad: graph first.
fn key_of(order: Permutation, q: &Quad) -> [Id; 4] {
    let p = order.positions();
    [q[3], q[p[0]], q[p[1]], q[p[2]]]
}

/// The name of a permutation's sorted run files.
fn sorted_name(order: Permutation) -> &'static str {
    match order {
        Permutation::Spo => "spo",
        Permutation::Pos => "pos",
        Permutation::Osp => "osp",
    }
}

/// Pass 3: each run's quads in final ids (its map read back), sorted once per permutation,
/// without duplicates, delta-encoded (`spo-R`, `pos-R`, `osp-R`): each row as the first of its
/// four key columns that differs from the row before, that column's increase, and the columns
/// after it whole.
fn sort_runs(
    tmp: &TempDir,
    runs: &[Run],
    terms: u64,
    stage: &Stage,
    cancelled: &dyn Fn() -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    stage.enter(2, runs.len() as u64);
    for (r, run) in runs.iter().enumerate() {
        cancelled()?;
        let path = tmp.file("map", r);
        let mut rd = RunReader::open(&path).map_err(spill_err(&path))?;
        if rd.count != run.terms {
            return Err(spill_err(&path)(damaged("its count of terms is wrong")));
        }
        let mut map = vec![0 as Id; run.terms as usize + 1];
        for _ in 0..run.terms {
            let (local, global) = (
                rd.id().map_err(spill_err(&path))?,
                rd.id().map_err(spill_err(&path))?,
            );
            if local == 0 || local as u64 > run.terms || global == 0 || u64::from(global) > terms {
                return Err(spill_err(&path)(damaged("an id out of range")));
            }
            map[local as usize] = global;
        }
        rd.end().map_err(spill_err(&path))?;
        tmp.remove(&path);
        let path = tmp.file("quads", r);
        let mut rd = RunReader::open(&path).map_err(spill_err(&path))?;
        if rd.count != run.quads {
            return Err(spill_err(&path)(damaged("its count of quads is wrong")));
        }
        let mut quads: Vec<Quad> = Vec::with_capacity(run.quads as usize);
        for _ in 0..run.quads {
            let mut q = [0 as Id; 4];
            for (c, x) in q.iter_mut().enumerate() {
                let local = rd.id().map_err(spill_err(&path))?;
                *x = match map.get(local as usize) {
                    // Only the graph may be 0 (the default graph).
                    Some(&g) if g != 0 => g,
                    Some(_) if c == 3 && local == 0 => 0,
                    _ => return Err(spill_err(&path)(damaged("an id out of range"))),
                };
            }
            quads.push(q);
        }
        rd.end().map_err(spill_err(&path))?;
        tmp.remove(&path);
        drop(map);
        for order in Permutation::ALL {
            quads.sort_unstable_by_key(|q| key_of(order, q));
            quads.dedup();
            let path = tmp.file(sorted_name(order), r);
            let mut w = RunWriter::create(&path, quads.len() as u64).map_err(spill_err(&path))?;
            let mut prev = [0 as Id; 4];
            for q in &quads {
                let k = key_of(order, q);
                let d = (0..4).find(|&c| k[c] != prev[c]).unwrap_or(3);
                w.bytes(&[d as u8])
                    .and_then(|()| w.varint(u64::from(k[d] - prev[d])))
                    .and_then(|()| k[d + 1..].iter().try_for_each(|&x| w.varint(u64::from(x))))
                    .map_err(spill_err(&path))?;
                prev = k;
            }
            tmp.added(w.finish().map_err(spill_err(&path))?);
        }
        stage.done.store(r as u64 + 1, Ordering::Relaxed);
    }
    Ok(())
}

/// Reads back a sorted run of [`sort_runs`].
struct SortedRun {
    rd: RunReader,
    path: PathBuf,
    left: u64,
    prev: [Id; 4],
}

impl SortedRun {
    fn next(&mut self) -> Result<Option<[Id; 4]>, LoadError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let err = spill_err(&self.path);
        let d = self.rd.byte().map_err(&err)? as usize;
        if d > 3 {
            return Err(err(damaged("a bad row header")));
        }
        let mut k = self.prev;
        let step = self.rd.id().map_err(&err)?;
        k[d] = k[d]
            .checked_add(step)
            .ok_or_else(|| err(damaged("an id past 32 bits")))?;
        for x in &mut k[d + 1..] {
            *x = self.rd.id().map_err(&err)?;
        }
        if k <= self.prev && self.left + 1 < self.rd.count {
            return Err(err(damaged("its rows out of order")));
        }
        self.prev = k;
        Ok(Some(k))
    }
}

/// Pass 4: for each permutation, the k-way merge of the runs' sorted rows into the snapshot
/// (written at `out`), duplicates dropped; the graph table (from SPO) and the statistics.
fn merge_quads<W: Write + std::io::Seek>(
    tmp: &TempDir,
    runs: &[Run],
    w: &mut crate::snapshot::packed::Writer<W>,
    out: &Path,
    stage: &Stage,
    cancelled: &dyn Fn() -> Result<(), LoadError>,
) -> Result<(Vec<(Id, usize)>, crate::store::Stats), LoadError> {
    let mut stats = StatsBuilder::default();
    let mut graphs: Vec<(Id, usize)> = Vec::new();
    for order in Permutation::ALL {
        let mut sorted = Vec::with_capacity(runs.len());
        let mut total = 0;
        for r in 0..runs.len() {
            let path = tmp.file(sorted_name(order), r);
            let rd = RunReader::open(&path).map_err(spill_err(&path))?;
            total += rd.count;
            sorted.push(SortedRun {
                left: rd.count,
                rd,
                path,
                prev: [0; 4],
            });
        }
        stage.enter(3, total);
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for (r, s) in sorted.iter_mut().enumerate() {
            if let Some(k) = s.next()? {
                heap.push(Reverse((k, r)));
            }
        }
        let mut rows = 0usize;
        w.permutation(order, spill_err(out), |push| {
            let mut last: Option<[Id; 4]> = None;
            let mut n = 0u64;
            while let Some(Reverse((k, r))) = heap.pop() {
                if last != Some(k) {
                    stats.row(order, last, k, &mut graphs, rows);
                    push([k[1], k[2], k[3]]).map_err(spill_err(out))?;
                    rows += 1;
                    last = Some(k);
                }
                if let Some(k) = sorted[r].next()? {
                    heap.push(Reverse((k, r)));
                }
                n += 1;
                if n % 65536 == 0 {
                    stage.done.store(n, Ordering::Relaxed);
                    cancelled()?;
                }
            }
            Ok::<_, LoadError>(())
        })?;
        for s in sorted {
            s.rd.end().map_err(spill_err(&s.path))?;
            tmp.remove(&s.path);
        }
    }
    Ok((graphs, stats.finish()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::Store;
    use proptest::prelude::*;

    fn machine() -> nearflow_topo::Machine {
        nearflow_topo::from_synthetic("pack:2 [numa] core:1 pu:1").unwrap()
    }

    /// A folder of the test's own, removed when dropped.
    fn dir(test: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("nearflow-bulk-{test}-"))
            .tempdir()
            .unwrap()
    }

    /// Two documents: TriG with the default graph, two named graphs, blank nodes, literals of
    /// every kind and duplicates; N-Triples whose blank node labels are the TriG's (kept
    /// apart: each document scopes its own).
    fn documents(d: &Path, n: usize) -> Vec<PathBuf> {
        let mut trig = String::from("@prefix ex: <http://ex/> .\n");
        for i in 0..n {
            let g = ["", "ex:g1 ", "ex:g2 "][i % 3];
            let open = if g.is_empty() { "" } else { "{ " };
            let close = if g.is_empty() { "" } else { " }" };
            trig.push_str(&format!(
                "{g}{open}ex:s{} ex:p{} \"v{}\"@en , {} , _:b{} , \"{}\"^^<http://ex/t{}> , ex:s{} .{close}\n",
                i % 97,
                i % 5,
                i % 13,
                i % 41,
                i % 7,
                i % 19,
                i % 3,
                (i * 7) % 101
            ));
        }
        let mut nt = String::new();
        for i in 0..n / 2 {
            nt.push_str(&format!(
                "_:b{} <http://ex/p{}> <http://ex/s{}> .\n<http://ex/s{}> <http://ex/q> \"w{}\" .\n",
                i % 11,
                i % 3,
                i % 89,
                i % 83,
                i % 29
            ));
        }
        let (a, b) = (d.join("a.trig"), d.join("b.nt"));
        std::fs::write(&a, trig).unwrap();
        std::fs::write(&b, nt).unwrap();
        vec![a, b]
    }

    /// Every quad as terms, sorted.
    pub(crate) fn terms_of(s: &Store) -> Vec<String> {
        let d = s.dict();
        let mut v: Vec<String> = s
            .quads()
            .iter()
            .map(|q| {
                let g = if q[3] == 0 {
                    String::new()
                } else {
                    d.term(q[3]).to_string()
                };
                format!("{} {} {} {g}", d.term(q[0]), d.term(q[1]), d.term(q[2]))
            })
            .collect();
        v.sort();
        v
    }

    /// Each predicate's term and its quads, subjects and objects.
    pub(crate) type PerPredicate = Vec<(String, u64, u64, u64)>;

    /// The statistics with predicates named by their terms (the ids differ between loads).
    pub(crate) fn stats_of(s: &Store) -> (u64, u64, u64, u64, PerPredicate) {
        let st = s.stats();
        let mut per: Vec<_> = st
            .per_predicate
            .iter()
            .map(|(&p, c)| {
                (
                    s.dict().term(p).to_string(),
                    c.triples,
                    c.subjects,
                    c.objects,
                )
            })
            .collect();
        per.sort();
        (st.triples, st.subjects, st.objects, st.predicates, per)
    }

    fn bulk(paths: &[PathBuf], room: u64, target: &Path) -> Result<BulkReport, LoadError> {
        load_spilling_at(
            paths,
            &LoadOptions::default(),
            room,
            target,
            &Arc::default(),
            &Stage::default(),
            &mut |_, _| {},
        )
    }

    #[test]
    fn a_load_in_many_runs_is_the_load_in_memory_quad_for_quad() {
        let tmp = dir("equal");
        let d = tmp.path();
        let paths = documents(d, 3000);
        let want = crate::load::load_files(&paths, &Arc::default())
            .unwrap()
            .into_store(&machine())
            .unwrap();
        for (room, name) in [(1 << 16, "small"), (1 << 30, "one")] {
            let target = d.join(format!("{name}.nfs"));
            let r = bulk(&paths, room, &target).unwrap();
            if room < 1 << 30 {
                assert!(r.runs > 3, "{} runs", r.runs);
            } else {
                assert_eq!(r.runs, 1);
            }
            assert_eq!(r.quads, want.len());
            assert_eq!(r.terms as usize, want.dict().len());
            assert_eq!(r.statements, 3000 * 5 + 1500 * 2);
            let got = crate::snapshot::open(&target, &machine()).unwrap();
            assert_eq!(terms_of(&got), terms_of(&want));
            assert_eq!(stats_of(&got), stats_of(&want));
            assert_eq!(
                got.graphs()
                    .iter()
                    .map(|&(_, start)| start)
                    .collect::<Vec<_>>(),
                want.graphs()
                    .iter()
                    .map(|&(_, start)| start)
                    .collect::<Vec<_>>()
            );
            assert!(got.health().unwrap().check_all().is_none());
            // Every term is found by a lookup (ids in key order: no term index).
            for id in 1..=got.dict().len() as Id {
                assert_eq!(got.dict().lookup(got.dict().term(id).as_ref()), Some(id));
            }
            // Nothing left beside the target but the snapshot itself.
            let left: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.'))
                .collect();
            assert!(left.is_empty(), "{left:?}");
        }
        // The same store whatever the runs.
        assert_eq!(
            std::fs::read(d.join("small.nfs")).unwrap(),
            std::fs::read(d.join("one.nfs")).unwrap()
        );
    }

    #[test]
    fn an_empty_load_is_an_empty_store_and_a_bad_one_leaves_the_old_store() {
        let tmp = dir("empty");
        let d = tmp.path();
        let empty = d.join("e.nt");
        std::fs::write(&empty, "").unwrap();
        let target = d.join("s.nfs");
        let r = bulk(std::slice::from_ref(&empty), 1 << 16, &target).unwrap();
        assert_eq!((r.quads, r.terms), (0, 0));
        let s = crate::snapshot::open(&target, &machine()).unwrap();
        assert_eq!(s.len(), 0);
        let before = std::fs::read(&target).unwrap();
        // A syntax error after several runs were spilled: the previous store stays.
        let bad = d.join("bad.nt");
        let mut text = String::new();
        for i in 0..2000 {
            text.push_str(&format!("<http://s{i}> <http://p> \"{i}\" .\n"));
        }
        text.push_str("<http://s> <http://p> .\n");
        std::fs::write(&bad, text).unwrap();
        let e = bulk(&[bad], 1 << 12, &target).unwrap_err();
        assert!(matches!(e, LoadError::Syntax { line: 2001, .. }), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), before);
        // An interrupted load too.
        let paths = documents(d, 500);
        let progress = Arc::new(Progress::default());
        progress.cancel.store(true, Ordering::Relaxed);
        let e = load_spilling_at(
            &paths,
            &LoadOptions::default(),
            1 << 12,
            &target,
            &progress,
            &Stage::default(),
            &mut |_, _| {},
        )
        .unwrap_err();
        assert!(matches!(e, LoadError::Interrupted), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), before);
        let names: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    }

    #[test]
    fn run_files_round_trip_their_integers_and_bytes() {
        let tmp = dir("runfile");
        let d = tmp.path();
        let f = d.join("r");
        let vals = [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
        let mut w = RunWriter::create(&f, vals.len() as u64).unwrap();
        for &v in &vals {
            w.varint(v).unwrap();
            w.bytes(b"ab").unwrap();
        }
        w.finish().unwrap();
        let mut r = RunReader::open(&f).unwrap();
        assert_eq!(r.count, vals.len() as u64);
        let mut b = Vec::new();
        for &v in &vals {
            assert_eq!(r.varint().unwrap(), v);
            r.bytes(2, &mut b).unwrap();
            assert_eq!(b, b"ab");
        }
        r.end().unwrap();
    }

    /// Damage: a byte flipped, one inserted, the end cut.
    #[derive(Clone, Debug)]
    enum Edit {
        Flip(usize, u8),
        Insert(usize, u8),
        Cut(usize),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            (any::<usize>(), 1u8..=255).prop_map(|(i, b)| Edit::Flip(i, b)),
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
            any::<usize>().prop_map(Edit::Cut),
        ]
    }

    fn cases() -> u32 {
        std::env::var("NEARFLOW_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

        /// A run file damaged or cut short between two passes (the terms or quads of a run
        /// after the parse, its map after the terms' merge, a sorted run after the sort) makes
        /// the load fail with a clear error, never a panic, and leaves the previous store.
        #[test]
        fn damaged_runs_are_a_clear_error(pass in 1usize..=3, which in any::<usize>(), e in edit()) {
            let tmp = dir("fuzz");
            let d = tmp.path();
            let paths = documents(d, 200);
            let target = d.join("s.nfs");
            std::fs::write(&target, b"previous").unwrap();
            let mut damaged_one = None;
            let r = load_spilling_at(
                &paths,
                &LoadOptions::default(),
                1 << 13,
                &target,
                &Arc::default(),
                &Stage::default(),
                &mut |p, tmp| {
                    if p != pass {
                        return;
                    }
                    let mut files: Vec<PathBuf> = std::fs::read_dir(tmp)
                        .unwrap()
                        .map(|e| e.unwrap().path())
                        .filter(|f| !f.ends_with("term-ends"))
                        .collect();
                    files.sort();
                    let f = &files[which % files.len()];
                    let mut bytes = std::fs::read(f).unwrap();
                    let n = bytes.len();
                    match e {
                        Edit::Flip(i, b) => bytes[i % n] ^= b,
                        Edit::Insert(i, b) => bytes.insert(i % (n + 1), b),
                        Edit::Cut(i) => bytes.truncate(i % n),
                    }
                    std::fs::write(f, bytes).unwrap();
                    damaged_one = Some(f.clone());
                },
            );
            prop_assert!(damaged_one.is_some());
            let err = r.expect_err("a damaged run is found");
            let text = err.to_string();
            prop_assert!(
                text.contains("temporary run file is damaged") && text.len() < 500,
                "{}", text
            );
            prop_assert_eq!(std::fs::read(&target).unwrap(), b"previous".to_vec());
        }
    }
}
