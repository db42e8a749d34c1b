//! The distinct values of one variable of one pattern, each with its matches ([`Op::Runs`]).
//!
//! The pattern's constants are a key prefix of one permutation and the variable its next key
//! column (`?s rdf:type ?o`: POS, prefix `rdf:type`, then the object), so the matches come
//! sorted by the variable and each value's matches are one run of rows. A run is measured by a
//! galloping search from its first row — rows 1, 2, 4, 8, … ahead until the value changes, then
//! a binary search in the last step — so a run of `L` rows costs about `2 log2 L` row reads
//! (each a constant-time read of a packed block, `nearflow_store`'s `blocks.rs`), not `L`: the 940 k
//! `rdf:type` rows of SP²Bench 5M are 12 runs. Where the store's delta holds rows of the range
//! (an update not yet merged), the matches are read through the lookup that merges it, and
//! counted per value in a map.
//!
//! A value failing the filter (an expression of the variable alone) is dropped, its run
//! skipped all the same. The plan's limits are checked every [`STEP`] values.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use hashbrown::HashMap;
use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::index_join::RowLookup;
use super::{count_id, row_ports, ExecCx, Reads, Row, Timer};
use crate::expr::{EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{bound_of, Op, OpStat, Pat, Phys, RunsOut};
use nearflow_rdf::index::{key_prefix, KeyRun, Permutation, QuadIndex, Store, Tally};
use nearflow_rdf::term::{Id, UNBOUND};

/// Values between two checks of the plan's limits.
const STEP: usize = 1 << 10;

/// The first position past `at` in `run` whose key column `col` is not `v` (the row at `at`
/// holds `v`; the run is sorted on `col`): a galloping search, always past `at`.
pub(crate) fn run_end(
    store: &Store,
    run: &KeyRun,
    at: usize,
    col: usize,
    v: Id,
    tally: &mut Tally,
) -> usize {
    let len = run.len();
    // `lo` holds `v`; `hi` does not (or is the end).
    let (mut lo, mut step) = (at, 1usize);
    let mut hi = loop {
        let probe = at.saturating_add(step);
        if probe >= len {
            break len;
        }
        if store.run_key(run, probe, tally)[col] != v {
            break probe;
        }
        lo = probe;
        step = step.saturating_mul(2);
    };
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if store.run_key(run, mid, tally)[col] == v {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Where the values come from.
enum Source {
    /// The key run, read by position: the next run starts at `at`.
    Run { run: KeyRun, col: usize, at: usize },
    /// Each value's matches, counted through the lookup that merges the delta, in id order.
    Counted { values: Vec<(Id, u64)>, at: usize },
}

struct RunsOp<const N: usize> {
    store: Arc<Store>,
    minted: Arc<Minted>,
    named: Arc<Vec<Id>>,
    pat: Pat,
    v: usize,
    filter: Option<Arc<Expr>>,
    out_kind: RunsOut,
    source: Option<Source>,
    /// Values kept and their matches, so far (for [`RunsOut::Count`]).
    kept: (u64, u64),
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> RunsOp<N> {
    /// The source, opened on the first run: the key run where the delta holds none of it.
    fn open(&self, reads: &mut Reads<'_>, io: &mut Io<'_>) -> Result<Source, FlowError> {
        let bound = bound_of(&self.pat);
        let (order, k) = Permutation::for_bound(bound.map(|x| x.is_some()));
        let prefix = key_prefix(order, bound, k);
        let graph = self.pat[3].id().expect("runs read one graph");
        if self.store.is_flat_at(order, graph, &prefix) {
            let run = self.store.key_run(order, graph, &prefix);
            return Ok(Source::Run { run, col: k, at: 0 });
        }
        let mut counts: HashMap<Id, u64> = HashMap::new();
        let mut stopped = None;
        let mut read = 0usize;
        RowLookup::new(&self.pat, [UNBOUND; N], &self.named).run(
            &self.store,
            &self.named,
            &self.pat,
            reads,
            |r: Row<N>| {
                *counts.entry(r[self.v]).or_insert(0) += 1;
                read += 1;
                if read % (STEP * 64) == 0 {
                    stopped = io.check().err();
                }
                stopped.is_none()
            },
        );
        if let Some(e) = stopped {
            return Err(e);
        }
        // A value and its count, 16 bytes, held until the operator ends.
        io.charge(counts.len() * 16)?;
        let mut values: Vec<(Id, u64)> = counts.into_iter().collect();
        values.sort_unstable();
        Ok(Source::Counted { values, at: 0 })
    }

    /// The next value and its matches, or `None` at the end.
    fn next(&mut self, tally: &mut Tally) -> Option<(Id, u64)> {
        match self.source.as_mut().expect("opened") {
            Source::Run { run, col, at } => {
                if *at >= run.len() {
                    return None;
                }
                let v = self.store.run_key(run, *at, tally)[*col];
                let end = run_end(&self.store, run, *at, *col, v, tally);
                let n = (end - *at) as u64;
                *at = end;
                Some((v, n))
            }
            Source::Counted { values, at } => {
                let x = values.get(*at).copied();
                *at += 1;
                x
            }
        }
    }
}

impl<const N: usize> Operator for RunsOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(0)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let mut reads = Reads::new(io.numa_node(), &stat);
        if self.source.is_none() {
            self.source = Some(self.open(&mut reads, io)?);
        }
        let store = self.store.clone();
        let minted = self.minted.clone();
        let cx = EvalCx::new(&store, &minted);
        // As a scan: about two packets of rows per task, then the worker may take another.
        let budget = self.out.capacity(io) * 2;
        let (mut given, mut seen) = (0usize, 0usize);
        loop {
            if matches!(self.out_kind, RunsOut::Rows { .. }) && (io.blocked() || given >= budget) {
                self.stat.rows.fetch_add(given as u64, Ordering::Relaxed);
                return Ok(Status::More);
            }
            seen += 1;
            if seen % STEP == 0 {
                io.check()?;
            }
            let Some((v, n)) = self.next(reads.tally()) else {
                break;
            };
            let mut row = [UNBOUND; N];
            row[self.v] = v;
            if let Some(f) = &self.filter {
                if !f.holds(cx, &row) {
                    continue;
                }
            }
            match self.out_kind {
                RunsOut::Rows { n: col } => {
                    if let Some(c) = col {
                        row[c] = count_id(cx, n);
                    }
                    self.out.push(io, row);
                    given += 1;
                }
                RunsOut::Count { .. } => {
                    self.kept.0 += 1;
                    self.kept.1 += n;
                }
            }
        }
        if let RunsOut::Count { col, matches } = self.out_kind {
            let mut row = [UNBOUND; N];
            row[col] = count_id(cx, if matches { self.kept.1 } else { self.kept.0 });
            self.out.push(io, row);
            given += 1;
        }
        self.out.flush(io);
        self.stat.rows.fetch_add(given as u64, Ordering::Relaxed);
        Ok(Status::Done)
    }
}

/// The runs' one operator.
pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
) -> Vec<Stream<Row<N>>> {
    let Op::Runs {
        pat,
        v,
        filter,
        out,
    } = &p.op
    else {
        unreachable!("a runs node")
    };
    let op = b.add(
        "runs",
        RunsOp::<N> {
            store: cx.store.clone(),
            minted: cx.minted.clone(),
            named: cx.named.clone(),
            pat: *pat,
            v: *v,
            filter: filter.clone(),
            out_kind: *out,
            source: None,
            kept: (0, 0),
            out: Emitter::new(0),
            stat: p.stat.clone(),
            timing: cx.timing,
        },
    );
    vec![b.stream::<Row<N>>(op, 0).expect("the runs output rows")]
}
