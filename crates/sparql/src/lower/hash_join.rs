//! The hash join, in every mode the algebra needs (inner, OPTIONAL, anti, MINUS, semi and
//! mark): input 1 is built into a table, input 0 probes it. One operator per stream pair of
//! its inputs, which the plan hash-partitioned alike on the join's keys (or left whole). When
//! the build rows bind nothing but the one key (`?x rdf:type bench:Article` joined on `?x`:
//! [`Phys::counts_build_keys`]) the table is only how many build rows hold each key, in an
//! array indexed by id where the keys lie close together.
//!
//! A table that would pass the plan's memory limit, where the run may spill
//! ([`Options::spill`](crate::Options::spill)), makes the join a grace hash join: the build rows
//! so far and every row after them, of both inputs, are written to [`PARTS`] files each by their
//! key's hash ([`spill`](super::spill)), and once both inputs have ended the join runs one
//! partition at a time, its build rows in the table and its probe rows read back in chunks. A
//! probe row meets every build row of its key in its partition, so every mode's answer is the
//! one table's; the rows come out in another order, which no plan relies on.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

// hashbrown's default hasher (foldhash), not std's SipHash: the join tables are keyed by an
// already mixed u64; SipHash took 7 % of Q4's samples.
use hashbrown::HashMap;
use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::spill::{RowFile, SpillTo, WRITE_BUFFER};
use super::{grown, pump, row_ports, table_bytes, ExecCx, Held, KeyFn, Row, Timer};
use crate::expr::{EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{JoinMode, Op, OpStat, Phys};
use nearflow_rdf::index::Store;
use nearflow_rdf::term::{Id, TermRef, UNBOUND};

/// A hash join's build side: the rows end to end, and per key hash the last row with it, each
/// row linking to the one before it with the same hash. Three vectors in all, where a vector
/// per key cost one allocation per distinct key to build and as many frees to drop (23 % of
/// Q6's time).
struct Table<const N: usize> {
    heads: HashMap<u64, usize>,
    next: Vec<usize>,
    rows: Vec<Row<N>>,
}

/// Bytes of probe rows a join takes in while its table is built: at most this, and at most a
/// sixteenth of the plan's memory limit (the rest is for tables).
const PROBE_AHEAD: usize = 16 << 20;

/// The end of a chain.
const NONE: usize = usize::MAX;

/// Partitions of a grace hash join, and of each partition split again when its build rows
/// still do not fit (the memory taken by the plan's other operators meanwhile): 64, six bits
/// of the key's hash a level.
const PARTS: usize = 64;

/// Levels of splitting: 64⁴ partitions at the most.
const LEVELS: u32 = 4;

/// Bytes of rows a grace hash join reads back from a file at a time, at the most.
const READ_CHUNK: usize = 256 << 10;

/// The least write buffer of a partition's file and chunk read back: a grace join whose
/// buffers would not fit beside what the plan holds takes these (96 KiB in all).
const MIN_WRITE_BUFFER: usize = 512;
const MIN_READ_CHUNK: usize = 16 << 10;

/// The partition at `level` of a row whose key hashes to `key` (bits of the key mixed again:
/// the table hashes the key itself).
fn part_of(key: u64, level: u32) -> usize {
    let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> (58 - 6 * level)) & (PARTS as u64 - 1)) as usize
}

/// A join past the memory limit: both inputs written to [`PARTS`] files each, then joined a
/// partition at a time.
struct Grace<const N: usize> {
    /// Each partition's build rows while the build side runs.
    build: Vec<RowFile<N>>,
    /// Each partition's probe rows while the probe side runs.
    probe: Vec<RowFile<N>>,
    /// Once both inputs have ended: the partitions still to join, each its build rows, its
    /// probe rows and the level of hash bits that made it.
    todo: Vec<(RowFile<N>, RowFile<N>, u32)>,
    /// Whether both inputs have ended (`todo` is filled).
    ended: bool,
    /// The probe rows of the partition being joined, whose build rows are in the table.
    current: Option<RowFile<N>>,
    /// Rows read back.
    chunk: Vec<Row<N>>,
    /// Bytes of each file's write buffer.
    write_buffer: usize,
    /// Rows read back at a time.
    chunk_rows: usize,
    /// The files' write buffers, `chunk` and the probe rows read back, as charged.
    buffers: Held,
}

impl<const N: usize> Grace<N> {
    /// The bytes a grace join holds beside its table with files written through `write`
    /// bytes each and chunks of `read` bytes read back: the write buffers of both inputs'
    /// files, a chunk read back and the probe rows taken from it.
    const fn buffers(write: usize, read: usize) -> usize {
        2 * PARTS * write + 2 * read
    }

    /// The sizes of the write buffers and of the chunk read back, for buffers of at most
    /// `budget` bytes in all: [`WRITE_BUFFER`] and [`READ_CHUNK`] scaled down alike, to no
    /// less than the least ones.
    fn sizes(budget: usize) -> (usize, usize) {
        let full = Self::buffers(WRITE_BUFFER, READ_CHUNK);
        let scaled = |max: usize, min: usize| {
            (max as u128 * budget as u128 / full as u128).clamp(min as u128, max as u128) as usize
        };
        (
            scaled(WRITE_BUFFER, MIN_WRITE_BUFFER),
            scaled(READ_CHUNK, MIN_READ_CHUNK),
        )
    }

    /// Files for every partition of one input, in `dir`, written through `buffer` bytes each.
    fn files(dir: &SpillTo, buffer: usize) -> Result<Vec<RowFile<N>>, FlowError> {
        (0..PARTS).map(|_| RowFile::buffered(dir, buffer)).collect()
    }

    /// Writes `rows` to the partitions of `files` by their key at `level`.
    fn write(
        files: &mut [RowFile<N>],
        key: &KeyFn,
        level: u32,
        rows: &[Row<N>],
        stat: &OpStat,
    ) -> Result<(), FlowError> {
        for r in rows {
            files[part_of(key.key(r), level)].write(std::slice::from_ref(r))?;
        }
        stat.spilled.fetch_add(rows.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}
impl<const N: usize> Table<N> {
    fn new() -> Self {
        Table {
            heads: HashMap::new(),
            next: Vec::new(),
            rows: Vec::new(),
        }
    }

    fn insert(&mut self, key: u64, row: Row<N>) {
        let head = self.heads.entry(key).or_insert(NONE);
        self.next.push(*head);
        *head = self.rows.len();
        self.rows.push(row);
    }

    /// The bytes the table holds.
    fn bytes(&self) -> usize {
        self.rows.capacity() * std::mem::size_of::<Row<N>>()
            + self.next.capacity() * std::mem::size_of::<usize>()
            + self.heads.allocation_size()
    }

    /// Makes room for `extra` more rows, the growth charged to `held` before it is allocated
    /// (the key table as if every row had a new key).
    fn reserve(&mut self, io: &mut Io<'_>, held: &mut Held, extra: usize) -> Result<(), FlowError> {
        let (rows, next) = (grown(&self.rows, extra), grown(&self.next, extra));
        let heads = table_bytes(self.heads.len() + extra, 16).max(self.heads.allocation_size());
        held.set(
            io,
            rows * std::mem::size_of::<Row<N>>() + next * std::mem::size_of::<usize>() + heads,
        )?;
        self.rows.reserve_exact(rows - self.rows.len());
        self.next.reserve_exact(next - self.next.len());
        self.heads.reserve(extra);
        Ok(())
    }

    /// The first entry of the chain of rows whose key hash is `key` (last inserted first);
    /// [`NONE`] when there is none.
    fn head(&self, key: u64) -> usize {
        self.heads.get(&key).copied().unwrap_or(NONE)
    }

    /// Chain entry `at`: its row and the next entry; `None` past the end.
    fn entry(&self, at: usize) -> Option<(&Row<N>, usize)> {
        Some((self.rows.get(at)?, self.next[at]))
    }
}

/// The build side of a join whose build rows bind nothing but the one key column (a pattern
/// like `?x rdf:type bench:Article` joined on `?x`): each build row is its key, so the table is
/// how many rows hold each key, and a probe row's matches are that many copies of itself. The
/// keys are gathered while the build side runs; once it has ended they are counted into an
/// array indexed by id when their ids lie close together (a few bytes a row: `DENSE` ids of
/// range per key at most), else into a hash map.
enum Counts {
    Gathering(Vec<Id>),
    Dense { low: Id, counts: Vec<u32> },
    Sparse(HashMap<Id, u32>),
}

impl Counts {
    /// At most this many ids of range per key for the array.
    const DENSE: usize = 16;

    /// Counts the gathered keys; the bytes the table then takes. `charge` is called with
    /// those bytes before they are allocated, beside the gathered keys; when it fails the keys
    /// stay gathered.
    fn count(
        &mut self,
        charge: impl FnOnce(usize) -> Result<(), FlowError>,
    ) -> Result<usize, FlowError> {
        let Counts::Gathering(keys) = self else {
            return Ok(0);
        };
        let keys = std::mem::take(keys);
        let (low, high) = keys
            .iter()
            .fold((Id::MAX, 0), |(l, h), &k| (l.min(k), h.max(k)));
        let range = if keys.is_empty() {
            0
        } else {
            (high - low) as usize + 1
        };
        if range <= Self::DENSE * keys.len() + 1024 {
            if let Err(e) = charge(range * 4) {
                *self = Counts::Gathering(keys);
                return Err(e);
            }
            let mut counts = vec![0u32; range];
            for k in keys {
                counts[(k - low) as usize] += 1;
            }
            let bytes = counts.len() * 4;
            *self = Counts::Dense { low, counts };
            Ok(bytes)
        } else {
            if let Err(e) = charge(table_bytes(keys.len(), 8)) {
                *self = Counts::Gathering(keys);
                return Err(e);
            }
            let mut m: HashMap<Id, u32> = HashMap::with_capacity(keys.len());
            for k in keys {
                *m.entry(k).or_insert(0) += 1;
            }
            let bytes = m.allocation_size();
            *self = Counts::Sparse(m);
            Ok(bytes)
        }
    }

    /// Build rows holding `key`.
    #[inline]
    fn of(&self, key: Id) -> u32 {
        match self {
            Counts::Gathering(_) => 0,
            Counts::Dense { low, counts } => key
                .checked_sub(*low)
                .and_then(|i| counts.get(i as usize))
                .copied()
                .unwrap_or(0),
            Counts::Sparse(m) => m.get(&key).copied().unwrap_or(0),
        }
    }
}

struct JoinOp<const N: usize> {
    mode: JoinMode,
    keys: Arc<Vec<usize>>,
    /// Whether a key that is not a pairing column exists (MINUS counts only those as shared).
    shares_key: bool,
    check: Vec<usize>,
    residual: Option<Arc<Expr>>,
    store: Arc<Store>,
    minted: Arc<Minted>,
    probe_key: KeyFn,
    build_key: KeyFn,
    /// The ids of `true` and `false` (a mark join's answers).
    marks: [Id; 2],
    table: Table<N>,
    /// With a build side that binds only the one key column: its keys' counts, used instead of
    /// `table`.
    counts: Option<Counts>,
    built: bool,
    /// What the table (or the counts) holds, as charged.
    held: Held,
    /// Probe rows waiting for the table, or for the output.
    queue: VecDeque<Row<N>>,
    /// What `queue` held ahead of the table, as charged.
    ahead: Held,
    /// A probe row whose matches were interrupted.
    probing: Option<Probing<N>>,
    /// Where rows go past the memory limit (`None`: the limit stops the plan).
    spill: Option<SpillTo>,
    /// Both inputs partitioned on disk, once the table would have passed the limit.
    grace: Option<Box<Grace<N>>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

/// A probe row part way through its matches: the output blocked (or its consumer finished)
/// between two of them.
struct Probing<const N: usize> {
    row: Row<N>,
    /// The next entry of the row's chain in the table.
    at: usize,
    /// Whether some match was found so far (OPTIONAL, anti-join, MINUS and mark need it).
    matched: bool,
}

impl<const N: usize> JoinOp<N> {
    /// Probes one row from chain entry `at` (a fresh row starts at its key's head), pushing
    /// merged rows until the chain ends or the output blocks between two matches; then the
    /// rest waits in `self.probing`. Returns the rows pushed.
    fn probe(&mut self, io: &mut Io<'_>, mut st: Probing<N>) -> u64 {
        if self.counts.is_some() {
            return self.probe_counted(io, st);
        }
        let cx = EvalCx::new(&self.store, &self.minted);
        let p = st.row;
        let mut emitted = 0;
        while let Some((b, next)) = self.table.entry(st.at) {
            if io.blocked() {
                self.probing = Some(st);
                return emitted;
            }
            st.at = next;
            if self.keys.iter().any(|&c| p[c] != b[c]) {
                continue;
            }
            let mut overlap = self.shares_key;
            let mut ok = true;
            for &c in &self.check {
                let (x, y) = (p[c], b[c]);
                if x != UNBOUND && y != UNBOUND {
                    if x != y {
                        ok = false;
                        break;
                    }
                    overlap = true;
                }
            }
            if !ok {
                continue;
            }
            if self.mode == JoinMode::Minus {
                if overlap {
                    st.matched = true;
                    break;
                }
                continue;
            }
            let mut merged = p;
            for (m, &y) in merged.iter_mut().zip(b.iter()) {
                if *m == UNBOUND {
                    *m = y;
                }
            }
            if let Some(e) = &self.residual {
                if !e.holds(cx, &merged) {
                    continue;
                }
            }
            st.matched = true;
            match self.mode {
                JoinMode::Anti | JoinMode::Mark(_) => break,
                JoinMode::Semi => {
                    self.out.push(io, p);
                    emitted += 1;
                    break;
                }
                _ => {
                    self.out.push(io, merged);
                    emitted += 1;
                }
            }
        }
        match self.mode {
            JoinMode::Inner | JoinMode::Semi => {}
            JoinMode::Mark(col) => {
                let mut r = p;
                r[col] = self.marks[usize::from(!st.matched)];
                self.out.push(io, r);
                emitted += 1;
            }
            JoinMode::Left | JoinMode::Anti | JoinMode::Minus if !st.matched => {
                self.out.push(io, p);
                emitted += 1;
            }
            _ => {}
        }
        emitted
    }

    /// [`probe`](Self::probe) against key counts: each match is the probe row itself (the
    /// build row adds no column), so the row is pushed once per match, `st.at` counting the
    /// matches still to push; every mode's answer as the table's would give it.
    fn probe_counted(&mut self, io: &mut Io<'_>, mut st: Probing<N>) -> u64 {
        let p = st.row;
        if st.matched {
            // Resumed between two copies of an inner or left join's match.
            return self.push_copies(io, st);
        }
        let n = self.counts.as_ref().map_or(0, |c| c.of(p[self.keys[0]])) as usize;
        let holds = n > 0
            && self.residual.as_ref().is_none_or(|e| {
                let cx = EvalCx::new(&self.store, &self.minted);
                e.holds(cx, &p)
            });
        let copies = match self.mode {
            JoinMode::Inner => usize::from(holds) * n,
            JoinMode::Left => {
                if holds {
                    n
                } else {
                    1
                }
            }
            JoinMode::Semi => usize::from(holds),
            JoinMode::Anti => usize::from(!holds),
            // A shared variable (the key) and a match: the row is removed.
            JoinMode::Minus => usize::from(!(holds && self.shares_key)),
            JoinMode::Mark(col) => {
                let mut r = p;
                r[col] = self.marks[usize::from(!holds)];
                self.out.push(io, r);
                return 1;
            }
        };
        st.at = copies;
        st.matched = true;
        self.push_copies(io, st)
    }

    /// Pushes `st.at` more copies of the probe row, until the output blocks (then the rest
    /// waits in `self.probing`). Returns the rows pushed.
    fn push_copies(&mut self, io: &mut Io<'_>, mut st: Probing<N>) -> u64 {
        let mut emitted = 0;
        while st.at > 0 {
            if io.blocked() {
                self.probing = Some(st);
                return emitted;
            }
            st.at -= 1;
            self.out.push(io, st.row);
            emitted += 1;
        }
        emitted
    }

    /// Takes build rows `p` into the table, or into the partitions on disk once the table
    /// would pass the memory limit and the run may spill.
    fn take_build(&mut self, io: &mut Io<'_>, p: &[Row<N>]) -> Result<(), FlowError> {
        if let Some(g) = &mut self.grace {
            return Grace::write(&mut g.build, &self.build_key, 0, p, &self.stat);
        }
        let e = match self.table.reserve(io, &mut self.held, p.len()) {
            Ok(()) => {
                for &b in p {
                    self.table.insert(self.build_key.key(&b), b);
                }
                match self.held.set(io, self.table.bytes()) {
                    Err(e @ FlowError::MemoryLimit { .. }) => e,
                    r => return r,
                }
            }
            Err(e @ FlowError::MemoryLimit { .. }) => {
                // The rows of `p` go after the table's.
                let Some(dir) = self.spill.clone() else {
                    return Err(e);
                };
                self.start_grace(io, &dir)?;
                return self.take_build(io, p);
            }
            Err(e) => return Err(e),
        };
        // The table took `p` but holds more than was charged for it.
        let Some(dir) = self.spill.clone() else {
            return Err(e);
        };
        self.start_grace(io, &dir)
    }

    /// The build keys gathered for counting would pass the memory limit (error `e`): where the
    /// run may spill, they go to the partitions on disk as the rows they were (each binds its
    /// key alone), and the join goes on as a grace hash join of rows.
    fn counts_past_limit(&mut self, io: &mut Io<'_>, e: FlowError) -> Result<(), FlowError> {
        let (Some(dir), FlowError::MemoryLimit { .. }) = (self.spill.clone(), &e) else {
            return Err(e);
        };
        let Some(Counts::Gathering(keys)) = self.counts.take() else {
            return Err(e);
        };
        self.start_grace(io, &dir)?;
        let k = self.keys[0];
        let g = self.grace.as_mut().expect("a grace hash join");
        let mut rows = Vec::with_capacity(1024);
        for part in keys.chunks(1024) {
            rows.clear();
            rows.extend(part.iter().map(|&id| {
                let mut r = [UNBOUND; N];
                r[k] = id;
                r
            }));
            Grace::write(&mut g.build, &self.build_key, 0, &rows, &self.stat)?;
        }
        drop(keys);
        self.held.set(io, 0)
    }

    /// Writes the table's rows and the probe rows taken in ahead to their partitions, and
    /// goes on as a grace hash join.
    ///
    /// Its buffers take at most a sixteenth of the plan's memory limit, as the probe rows
    /// taken in ahead do; the least ones where even that does not fit beside what the plan's
    /// other operators hold (their tables, other joins' buffers), since several joins of a
    /// plan may spill at once.
    fn start_grace(&mut self, io: &mut Io<'_>, dir: &SpillTo) -> Result<(), FlowError> {
        let full = Grace::<N>::buffers(WRITE_BUFFER, READ_CHUNK);
        let (mut write, mut read) = Grace::<N>::sizes(io.memory_limit().map_or(full, |l| l / 16));
        let mut build = Grace::files(dir, write)?;
        let table = std::mem::replace(&mut self.table, Table::new());
        Grace::write(&mut build, &self.build_key, 0, &table.rows, &self.stat)?;
        drop(table);
        self.held.set(io, 0)?;
        let mut probe = Grace::files(dir, write)?;
        let queued: Vec<Row<N>> = std::mem::take(&mut self.queue).into();
        Grace::write(&mut probe, &self.probe_key, 0, &queued, &self.stat)?;
        drop(queued);
        self.ahead.set(io, 0)?;
        let mut buffers = Held::default();
        if let Err(e) = buffers.set(io, Grace::<N>::buffers(write, read)) {
            let FlowError::MemoryLimit { .. } = e else {
                return Err(e);
            };
            (write, read) = (MIN_WRITE_BUFFER, MIN_READ_CHUNK);
            buffers.set(io, Grace::<N>::buffers(write, read))?;
            for f in build.iter_mut().chain(&mut probe) {
                f.rebuffer(write)?;
            }
        }
        self.grace = Some(Box::new(Grace {
            build,
            probe,
            todo: Vec::new(),
            ended: false,
            current: None,
            chunk: Vec::new(),
            write_buffer: write,
            chunk_rows: (read / std::mem::size_of::<Row<N>>()).max(1),
            buffers,
        }));
        Ok(())
    }

    /// One run of a grace hash join: [`run_grace`](Self::run_grace).
    fn grace_step(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let (n, done) = self.run_grace(io)?;
        Ok(self.end_step(io, n, done))
    }

    /// The end of a run that pushed `n` rows: the output flushed and the join done when
    /// `done`, else the join idle until more input or room for its output.
    fn end_step(&mut self, io: &mut Io<'_>, n: u64, done: bool) -> Status {
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        if done {
            self.out.flush(io);
            return Status::Done;
        }
        self.out.idle(io);
        Status::Idle
    }

    /// A grace hash join's steps: the probe rows written to their partitions until both inputs
    /// have ended, then each partition joined in turn.
    /// Returns the rows pushed and whether the join is done.
    fn run_grace(&mut self, io: &mut Io<'_>) -> Result<(u64, bool), FlowError> {
        let g = self.grace.as_mut().expect("a grace hash join");
        if !g.ended {
            while let Some(p) = io.recv::<Row<N>>(0) {
                Grace::write(&mut g.probe, &self.probe_key, 0, &p, &self.stat)?;
            }
            if !self.built || !io.finished::<Row<N>>(0) {
                return Ok((0, false));
            }
            let (build, probe) = (std::mem::take(&mut g.build), std::mem::take(&mut g.probe));
            for (mut b, mut p) in build.into_iter().zip(probe) {
                b.finish()?;
                p.finish()?;
                g.todo.push((b, p, 0));
            }
            g.todo.reverse();
            g.ended = true;
        }
        let rows = g.chunk_rows;
        let mut n = 0;
        loop {
            if let Some(st) = self.probing.take() {
                n += self.probe(io, st);
                if self.probing.is_some() {
                    return Ok((n, false));
                }
            }
            if io.blocked() {
                return Ok((n, false));
            }
            if let Some(p) = self.queue.pop_front() {
                let st = self.start(p);
                n += self.probe(io, st);
                continue;
            }
            let g = self.grace.as_mut().expect("a grace hash join");
            let mut chunk = std::mem::take(&mut g.chunk);
            if let Some(file) = &mut g.current {
                let more = file.read(&mut chunk, rows)?;
                self.queue.extend(chunk.drain(..));
                g.chunk = chunk;
                if !more {
                    // The partition is joined.
                    g.current = None;
                    self.table = Table::new();
                    self.held.set(io, 0)?;
                }
                continue;
            }
            let Some((mut build, probe, level)) = g.todo.pop() else {
                return Ok((n, true));
            };
            if probe.rows() == 0 {
                // No probe row: no answer in any mode.
                continue;
            }
            io.check()?;
            let mut fits = true;
            while build.read(&mut chunk, rows)? {
                match self.table.reserve(io, &mut self.held, chunk.len()) {
                    Ok(()) => {}
                    Err(e @ FlowError::MemoryLimit { .. }) if level + 1 < LEVELS => {
                        drop(e);
                        fits = false;
                        break;
                    }
                    Err(e) => return Err(e),
                }
                for &b in &chunk {
                    self.table.insert(self.build_key.key(&b), b);
                }
                self.held.set(io, self.table.bytes())?;
            }
            let g = self.grace.as_mut().expect("a grace hash join");
            if fits {
                g.chunk = chunk;
                g.current = Some(probe);
                continue;
            }
            // The partition's build rows do not fit beside what the plan holds now: split
            // it and its probe rows by the next bits of their keys.
            self.table = Table::new();
            self.held.set(io, 0)?;
            build.rewind()?;
            let dir = self.spill.as_ref().expect("a spill folder");
            let mut parts = Vec::with_capacity(2);
            for (mut file, key) in [(build, &self.build_key), (probe, &self.probe_key)] {
                let mut split = Grace::files(dir, g.write_buffer)?;
                while file.read(&mut chunk, rows)? {
                    Grace::write(&mut split, key, level + 1, &chunk, &self.stat)?;
                }
                for f in &mut split {
                    f.finish()?;
                }
                parts.push(split);
            }
            g.chunk = chunk;
            let probe = parts.pop().expect("the probe side's parts");
            let build = parts.pop().expect("the build side's parts");
            g.todo
                .extend(build.into_iter().zip(probe).map(|(b, p)| (b, p, level + 1)));
        }
    }

    /// A fresh probe of row `p`.
    fn start(&self, p: Row<N>) -> Probing<N> {
        Probing {
            row: p,
            at: if self.counts.is_some() {
                0
            } else {
                self.table.head(self.probe_key.key(&p))
            },
            matched: false,
        }
    }
}

impl<const N: usize> Operator for JoinOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(2)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn state_bytes(&self) -> usize {
        self.held.bytes()
            + self.queue.len() * std::mem::size_of::<Row<N>>()
            + self.grace.as_ref().map_or(0, |g| g.buffers.bytes())
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        if !self.built {
            while let Some(p) = io.recv::<Row<N>>(1) {
                if let Some(Counts::Gathering(keys)) = &mut self.counts {
                    match self.held.grow(io, keys, p.len(), 0) {
                        Ok(()) => {
                            let k = self.keys[0];
                            keys.extend(p.iter().map(|b| b[k]));
                            continue;
                        }
                        Err(e) => self.counts_past_limit(io, e)?,
                    }
                }
                self.take_build(io, &p)?;
            }
            self.built = io.finished::<Row<N>>(1);
            if self.built {
                if let Some(c) = &mut self.counts {
                    let gathered = self.held.bytes();
                    let held = &mut self.held;
                    match c.count(|b| held.set(io, gathered + b)) {
                        Ok(bytes) => self.held.set(io, bytes)?,
                        Err(e) => self.counts_past_limit(io, e)?,
                    }
                }
            }
        }
        if self.grace.is_some() {
            return self.grace_step(io);
        }
        let row = std::mem::size_of::<Row<N>>();
        if !self.built {
            // Probe rows are taken in ahead while the table is built, so that both sides'
            // producers run at once, up to `PROBE_AHEAD` bytes (charged); past that they wait
            // in their stream, whose bounded buffer holds back their producer. Taken in
            // without a bound, they would be held by every join of a chain at once (a star
            // of hash joins: most of SP²Bench q2's memory).
            // Room for a full packet is charged before one is taken in. Past the memory limit
            // a join that may spill goes on as a grace hash join, its probe rows to disk; one
            // that may not stops, as the table would.
            let packet = io.capacity_of::<Row<N>>();
            let ahead = io
                .memory_limit()
                .map_or(PROBE_AHEAD, |l| PROBE_AHEAD.min(l / 16));
            while self.queue.len() * row < ahead {
                let need = self.queue.len() + packet;
                if need > self.queue.capacity() {
                    let cap = need.max(self.queue.capacity() * 2);
                    if let Err(e) = self.ahead.set(io, cap * row) {
                        let Some(dir) = self.spill.clone() else {
                            return Err(e);
                        };
                        self.start_grace(io, &dir)?;
                        return self.grace_step(io);
                    }
                    self.queue.reserve_exact(cap - self.queue.len());
                }
                let Some(p) = io.recv::<Row<N>>(0) else {
                    break;
                };
                if self.queue.len() + p.len() > self.queue.capacity() {
                    let cap = (self.queue.len() + p.len()).max(self.queue.capacity() * 2);
                    self.ahead.set(io, cap * row)?;
                    self.queue.reserve_exact(cap - self.queue.len());
                }
                self.queue.extend(p);
                self.ahead.set(io, self.queue.capacity() * row)?;
            }
            return Ok(Status::Idle);
        }
        let mut n = 0;
        if let Some(st) = self.probing.take() {
            n += self.probe(io, st);
        }
        let mut queue = std::mem::take(&mut self.queue);
        let done = self.probing.is_none()
            && pump(io, &mut queue, 0, self.built, |io, p| {
                let st = self.start(p);
                n += self.probe(io, st)
            });
        self.queue = queue;
        if self.queue.is_empty() && self.ahead.bytes() > 0 {
            self.queue = VecDeque::new();
            self.ahead.set(io, 0)?;
        }
        Ok(self.end_step(io, n, done))
    }
}

/// The ids of `true` and `false`, a mark join's answers.
pub(super) fn mark_ids(cx: &ExecCx) -> [Id; 2] {
    let ecx = cx.eval();
    let boolean = |v: &str| {
        ecx.id_of_term(TermRef::Literal {
            value: v,
            datatype: "http://www.w3.org/2001/XMLSchema#boolean",
            lang: None,
        })
        .unwrap_or(UNBOUND)
    };
    [boolean("true"), boolean("false")]
}

/// One join per pair of streams (the plan partitioned both inputs alike).
pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    probe: Vec<Stream<Row<N>>>,
    bld: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    let Op::HashJoin {
        mode,
        keys,
        value_key,
        check,
        residual,
        pairs,
    } = &p.op
    else {
        unreachable!("a hash join node")
    };
    debug_assert_eq!(probe.len(), bld.len(), "both inputs partitioned alike");
    let keys = Arc::new(keys.clone());
    let key_fn = |value_col: Option<usize>| KeyFn {
        store: cx.store.clone(),
        minted: cx.minted.clone(),
        keys: keys.clone(),
        value_col,
    };
    let (probe_key, build_key) = (
        key_fn(value_key.map(|v| v.0)),
        key_fn(value_key.map(|v| v.1)),
    );
    let marks = mark_ids(cx);
    let counted = p.counts_build_keys();
    probe
        .into_iter()
        .zip(bld)
        .map(|(ps, bs)| {
            let op = b.add(
                format!("{mode:?} hash join"),
                JoinOp::<N> {
                    mode: *mode,
                    keys: keys.clone(),
                    shares_key: keys.iter().any(|k| !pairs.contains(k)),
                    check: check.clone(),
                    residual: residual.clone(),
                    store: cx.store.clone(),
                    minted: cx.minted.clone(),
                    probe_key: probe_key.clone(),
                    build_key: build_key.clone(),
                    marks,
                    table: Table::new(),
                    counts: counted.then(|| Counts::Gathering(Vec::new())),
                    built: false,
                    held: Held::default(),
                    ahead: Held::default(),
                    queue: VecDeque::new(),
                    probing: None,
                    spill: cx.spill.clone().map(|spill| SpillTo {
                        spill,
                        width: cx.width,
                    }),
                    grace: None,
                    out: Emitter::new(0),
                    stat: p.stat.clone(),
                    timing: cx.timing,
                },
            );
            b.feed(ps, op, 0);
            b.feed(bs, op, 1);
            b.stream::<Row<N>>(op, 0).expect("a join outputs rows")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_buffers_scale_down_to_the_least() {
        type G = Grace<4>;
        let full = G::buffers(WRITE_BUFFER, READ_CHUNK);
        assert_eq!(G::sizes(full), (WRITE_BUFFER, READ_CHUNK));
        assert_eq!(G::sizes(usize::MAX), (WRITE_BUFFER, READ_CHUNK));
        let (w, r) = G::sizes(full / 4);
        assert_eq!((w, r), (WRITE_BUFFER / 4, READ_CHUNK / 4));
        assert!(G::buffers(w, r) <= full / 4);
        assert_eq!(G::sizes(0), (MIN_WRITE_BUFFER, MIN_READ_CHUNK));
        assert_eq!(G::buffers(MIN_WRITE_BUFFER, MIN_READ_CHUNK), 96 << 10);
    }
}
