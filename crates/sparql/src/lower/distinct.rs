//! DISTINCT: passes each row the first time it comes, holding every row seen (its table charged
//! against the plan's memory limit). One operator per input stream: the plan hash-partitions a large
//! input by its whole row, so equal rows meet in one operator and the streams deduplicate in
//! parallel.
//!
//! A set that would pass the memory limit, where the run may spill
//! ([`Options::spill`](crate::Options::spill)) and the input is in no ORDER BY's order (which
//! DISTINCT keeps), is written to disk as it is: the rows it passed. The rows after it gather in
//! a buffer of half the set's size, written as a sorted run without duplicates each time it is
//! full ([`spill`](super::spill)). Once the input has ended the passed rows are sorted into runs too,
//! and all runs are merged: each row comes out once, unless a run of passed rows holds it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

// hashbrown's default hasher (foldhash): DISTINCT hashes whole rows.
use hashbrown::HashSet;
use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::spill::{RowFile, SpillTo, WRITE_BUFFER};
use super::{per_stream, row_ports, table_bytes, ExecCx, Held, Row, Timer};
use crate::physical::{is_ordered, OpStat, Phys};

/// Bytes of a run read back at a time during the merge: at most, and at least (with more runs
/// than the room has chunks of the most, fewer bytes each; with more than it has of the least,
/// groups of runs merged into one first).
const MERGE_CHUNK: usize = 64 << 10;
const MIN_CHUNK: usize = 4 << 10;

/// Rows a run buffer holds at least.
const MIN_RUN: usize = 1 << 9;

struct DistinctOp<const N: usize> {
    seen: HashSet<Row<N>>,
    held: Held,
    /// Where rows go past the memory limit (`None`: the limit stops the plan).
    spill: Option<SpillTo>,
    /// The runs on disk, once the set would have passed the limit.
    runs: Option<Box<Runs<N>>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

/// A DISTINCT past the memory limit.
struct Runs<const N: usize> {
    dir: SpillTo,
    /// The rows passed before the limit, as the set held them (unsorted).
    passed: RowFile<N>,
    /// Rows since, not yet in a run.
    buffer: Vec<Row<N>>,
    /// Sorted runs without duplicates, each with whether its rows were passed.
    runs: Vec<(RowFile<N>, bool)>,
    /// The merge of the runs, once the input has ended.
    merge: Option<Merge<N>>,
    /// `buffer`, the write buffers and the merge's chunks, as charged.
    held: Held,
}

/// A k-way merge of sorted runs.
struct Merge<const N: usize> {
    /// Each run's file, its rows read and not yet merged (a chunk, reversed: the next is last),
    /// and whether its rows were passed.
    sources: Vec<(RowFile<N>, Vec<Row<N>>, bool)>,
    heap: BinaryHeap<Reverse<(Row<N>, usize)>>,
    /// Rows read from a run at a time.
    chunk: usize,
}

/// Sorts `rows`, drops repeated ones, writes them to `runs` as a run (of passed rows, or not)
/// and clears them.
fn write_run<const N: usize>(
    rows: &mut Vec<Row<N>>,
    passed: bool,
    to: &SpillTo,
    runs: &mut Vec<(RowFile<N>, bool)>,
    stat: &OpStat,
) -> Result<(), FlowError> {
    rows.sort_unstable();
    rows.dedup();
    let mut f = RowFile::create(to)?;
    f.write(rows)?;
    stat.spilled.fetch_add(rows.len() as u64, Ordering::Relaxed);
    runs.push((f, passed));
    rows.clear();
    Ok(())
}

impl<const N: usize> Runs<N> {
    /// Writes the buffer as a sorted run without duplicates.
    fn flush(&mut self, stat: &OpStat) -> Result<(), FlowError> {
        if !self.buffer.is_empty() {
            write_run(&mut self.buffer, false, &self.dir, &mut self.runs, stat)?;
        }
        Ok(())
    }

    /// Takes rows `p` into the buffer, writing it as a run when full; a packet larger than
    /// the buffer is a run of its own.
    fn take(&mut self, mut p: Vec<Row<N>>, stat: &OpStat) -> Result<(), FlowError> {
        if self.buffer.len() + p.len() > self.buffer.capacity() {
            self.flush(stat)?;
            if p.len() > self.buffer.capacity() {
                return write_run(&mut p, false, &self.dir, &mut self.runs, stat);
            }
        }
        self.buffer.extend_from_slice(&p);
        Ok(())
    }

    /// Once the input has ended: the last run written, the passed rows sorted into runs in
    /// the buffer's room, and the merge started in that room (runs merged a group at a time
    /// first while there are more than it has chunks for).
    fn start_merge(&mut self, io: &mut Io<'_>, stat: &OpStat) -> Result<(), FlowError> {
        self.flush(stat)?;
        let room = self.buffer.capacity().max(MIN_RUN);
        self.held.grow(io, &mut self.buffer, room, WRITE_BUFFER)?;
        while self.passed.read(&mut self.buffer, room)? {
            write_run(&mut self.buffer, true, &self.dir, &mut self.runs, stat)?;
        }
        // The buffer's room, still charged, holds the merge's chunks.
        let budget = self.buffer.capacity() * std::mem::size_of::<Row<N>>();
        self.buffer = Vec::new();
        let row = std::mem::size_of::<Row<N>>();
        loop {
            let runs = self.runs.len().max(1);
            let chunk = (budget / runs).clamp(MIN_CHUNK, MERGE_CHUNK);
            let fan_in = (budget / chunk).max(2);
            let rows = (chunk / row).max(1);
            if runs <= fan_in {
                self.merge = Some(Merge::new(std::mem::take(&mut self.runs), rows)?);
                return Ok(());
            }
            // Runs of passed rows merged among themselves stay passed; the others likewise.
            let mut runs = std::mem::take(&mut self.runs);
            runs.sort_by_key(|r| r.1);
            let mut left = runs.into_iter().peekable();
            while let Some(first) = left.next() {
                let passed = first.1;
                let mut group = vec![first];
                while group.len() < fan_in && left.peek().is_some_and(|r| r.1 == passed) {
                    group.push(left.next().expect("peeked"));
                }
                if group.len() == 1 {
                    self.runs.extend(group);
                    continue;
                }
                io.check()?;
                let mut merge = Merge::new(group, rows)?;
                let mut f = RowFile::create(&self.dir)?;
                let mut out = Vec::with_capacity(rows);
                while let Some((r, _)) = merge.next()? {
                    out.push(r);
                    if out.len() == rows {
                        f.write(&out)?;
                        out.clear();
                    }
                }
                f.write(&out)?;
                self.runs.push((f, passed));
            }
        }
    }
}

impl<const N: usize> Merge<N> {
    /// The merge of `runs`, reading `chunk` rows of each at a time.
    fn new(runs: Vec<(RowFile<N>, bool)>, chunk: usize) -> Result<Self, FlowError> {
        let mut merge = Merge {
            sources: Vec::with_capacity(runs.len()),
            heap: BinaryHeap::with_capacity(runs.len()),
            chunk,
        };
        for (i, (mut f, passed)) in runs.into_iter().enumerate() {
            let mut rows = Vec::with_capacity(chunk);
            f.read(&mut rows, chunk)?;
            rows.reverse();
            if let Some(&r) = rows.last() {
                merge.heap.push(Reverse((r, i)));
            }
            merge.sources.push((f, rows, passed));
        }
        Ok(merge)
    }

    /// The next row of run `i`, into the heap.
    fn advance(&mut self, i: usize) -> Result<(), FlowError> {
        let (file, rows, _) = &mut self.sources[i];
        rows.pop();
        if rows.is_empty() && file.read(rows, self.chunk)? {
            rows.reverse();
        }
        if let Some(&next) = rows.last() {
            self.heap.push(Reverse((next, i)));
        }
        Ok(())
    }

    /// The next row in order, once, and whether some run of passed rows holds it; `None` at
    /// the end.
    fn next(&mut self) -> Result<Option<(Row<N>, bool)>, FlowError> {
        let Some(Reverse((row, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let mut passed = self.sources[i].2;
        self.advance(i)?;
        while let Some(&Reverse((r, j))) = self.heap.peek() {
            if r != row {
                break;
            }
            self.heap.pop();
            passed |= self.sources[j].2;
            self.advance(j)?;
        }
        Ok(Some((row, passed)))
    }

    /// Pushes the rows no run of passed rows holds, until the output blocks (false) or the
    /// runs are done (true); counts them in `n`.
    fn run(
        &mut self,
        io: &mut Io<'_>,
        out: &mut Emitter<Row<N>>,
        n: &mut u64,
    ) -> Result<bool, FlowError> {
        loop {
            if io.blocked() {
                return Ok(false);
            }
            match self.next()? {
                None => return Ok(true),
                Some((r, false)) => {
                    out.push(io, r);
                    *n += 1;
                }
                Some((_, true)) => {}
            }
        }
    }
}

impl<const N: usize> DistinctOp<N> {
    /// Writes the set to disk and goes on in runs, where the run may spill; else `e`.
    fn start_runs(&mut self, io: &mut Io<'_>, e: FlowError) -> Result<(), FlowError> {
        let Some(dir) = self.spill.clone() else {
            return Err(e);
        };
        // The buffer takes half the room the set leaves.
        let row = std::mem::size_of::<Row<N>>();
        let room = (self.seen.allocation_size() / 2 / row).max(MIN_RUN);
        let mut passed = RowFile::create(&dir)?;
        for r in self.seen.drain() {
            passed.write(std::slice::from_ref(&r))?;
        }
        self.stat
            .spilled
            .fetch_add(passed.rows(), Ordering::Relaxed);
        self.seen = HashSet::new();
        self.held.set(io, 0)?;
        // Less where the plan's other operators took the room meanwhile.
        let mut held = Held::default();
        let mut room = room;
        while let Err(e) = held.set(io, WRITE_BUFFER + room * row) {
            if room == MIN_RUN {
                return Err(e);
            }
            room = (room / 2).max(MIN_RUN);
        }
        self.runs = Some(Box::new(Runs {
            dir,
            passed,
            buffer: Vec::with_capacity(room),
            runs: Vec::new(),
            merge: None,
            held,
        }));
        Ok(())
    }
}

impl<const N: usize> Operator for DistinctOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn state_bytes(&self) -> usize {
        self.held.bytes() + self.runs.as_ref().map_or(0, |r| r.held.bytes())
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let entry = std::mem::size_of::<Row<N>>();
        let mut n = 0;
        while !io.blocked() {
            if let Some(runs) = &mut self.runs {
                if runs.merge.is_some() {
                    break;
                }
            }
            let Some(p) = io.recv::<Row<N>>(0) else {
                break;
            };
            if let Some(runs) = &mut self.runs {
                runs.take(p.into_vec(), &stat)?;
                continue;
            }
            // Charged before the table grows: as if every row were new.
            let grown = table_bytes(self.seen.len() + p.len(), entry);
            if let Err(e) = self.held.set(io, grown.max(self.seen.allocation_size())) {
                self.start_runs(io, e)?;
                let runs = self.runs.as_mut().expect("runs started");
                runs.take(p.into_vec(), &stat)?;
                continue;
            }
            self.seen.reserve(p.len());
            for r in p {
                if self.seen.insert(r) {
                    self.out.push(io, r);
                    n += 1;
                }
            }
            // The set may have allocated more than was charged for it.
            if let Err(e) = self.held.set(io, self.seen.allocation_size()) {
                self.start_runs(io, e)?;
            }
        }
        let finished = io.finished::<Row<N>>(0);
        if let Some(runs) = &mut self.runs {
            if finished && runs.merge.is_none() {
                runs.start_merge(io, &stat)?;
            }
            if let Some(m) = &mut runs.merge {
                let done = m.run(io, &mut self.out, &mut n)?;
                self.stat.rows.fetch_add(n, Ordering::Relaxed);
                if done {
                    self.runs = None;
                    self.out.flush(io);
                    return Ok(Status::Done);
                }
                self.out.idle(io);
                return Ok(Status::Idle);
            }
        }
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        if finished && !io.blocked() {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        self.out.idle(io);
        Ok(Status::Idle)
    }
}

pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    input: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    // A sorted input's order is kept, which runs would not.
    let spill = cx
        .spill
        .clone()
        .filter(|_| !is_ordered(&p.inputs[0]))
        .map(|spill| SpillTo {
            spill,
            width: cx.width,
        });
    per_stream(b, input, "distinct", || DistinctOp::<N> {
        seen: HashSet::new(),
        held: Held::default(),
        spill: spill.clone(),
        runs: None,
        out: Emitter::new(0),
        stat: p.stat.clone(),
        timing: cx.timing,
    })
}
