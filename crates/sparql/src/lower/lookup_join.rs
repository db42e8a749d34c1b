//! A join from the small side ([`Op::LookupJoin`]): each input row looks the other side's
//! patterns up in the store's indexes, one after another, each bound by the row and the
//! matches before it; no table of the other side is built. One operator per input stream.
//!
//! - **Left** (OPTIONAL, one pattern): the row extended by each match the condition holds on,
//!   or the row alone when none does. The matches come out as the index join's do, resumably
//!   when the output blocks between two of them.
//! - **Semi** (EXISTS), **Anti** (NOT EXISTS), **Minus**, **Mark**: the chain is walked depth
//!   first until one merged row passes the condition; the row is then passed on or not (or
//!   marked `true` or `false`). A MINUS row always shares a variable with its match: the first
//!   pattern is looked up by a column the row binds.
//!
//! A variable the row may leave unbound is matched when the row binds it and free when not, so
//! each match is compatible with the row, as the hash join's check makes it.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, Status, Stream};

use super::index_join::RowLookup;
use super::{per_stream, pump, ExecCx, Reads, Row, Timer};
use crate::expr::{EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{JoinMode, Op, OpStat, Pat, Phys};
use nearflow_rdf::index::Store;
use nearflow_rdf::term::Id;

/// Index rows read between two checks of the plan's time limit and cancellation.
const CHECK_READS: u64 = 1 << 16;

/// A left join's row part way through its matches.
struct Looking<const N: usize> {
    lookup: RowLookup<N>,
    row: Row<N>,
    /// Whether a match was passed on.
    matched: bool,
}

struct LookupJoinOp<const N: usize> {
    mode: JoinMode,
    store: Arc<Store>,
    minted: Arc<Minted>,
    named: Arc<Vec<Id>>,
    pats: Arc<Vec<Pat>>,
    residual: Option<Arc<Expr>>,
    /// The ids of `true` and `false`.
    marks: [Id; 2],
    queue: VecDeque<Row<N>>,
    looking: Option<Looking<N>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

/// Index reads since the plan's limits were last checked, and the check that failed. Every
/// level of a chain adds its reads, so a row whose chain reads much is stopped within it.
struct Checks {
    since: u64,
    failed: Option<FlowError>,
}

impl Checks {
    /// Adds `reads`, checking the limits each [`CHECK_READS`]; false once a check failed.
    fn add(&mut self, io: &mut Io<'_>, reads: u64) -> bool {
        self.since += reads;
        if self.since >= CHECK_READS && self.failed.is_none() {
            self.since = 0;
            self.failed = io.check().err();
        }
        self.failed.is_none()
    }
}

/// Whether `row` has a match of the chain `pats` on which `residual` holds: depth first,
/// stopping at the first (or when a check of the limits fails). Each level below the first
/// counts its reads on its own tally and adds them to `checks`.
#[allow(clippy::too_many_arguments)]
fn any_match<const N: usize>(
    store: &Store,
    named: &[Id],
    pats: &[Pat],
    row: Row<N>,
    residual: Option<&Expr>,
    cx: EvalCx<'_>,
    reads: &mut Reads<'_>,
    stat: &OpStat,
    io: &mut Io<'_>,
    checks: &mut Checks,
) -> bool {
    let Some((first, rest)) = pats.split_first() else {
        return residual.is_none_or(|e| e.holds(cx, &row));
    };
    let node = io.numa_node();
    let mut found = false;
    RowLookup::new(first, row, named).run(store, named, first, reads, |r| {
        let mut deeper = Reads::new(node, stat);
        found = any_match(
            store,
            named,
            rest,
            r,
            residual,
            cx,
            &mut deeper,
            stat,
            io,
            checks,
        );
        let go = checks.add(io, deeper.tally().all);
        !found && go
    });
    found
}

impl<const N: usize> Operator for LookupJoinOp<N> {
    super::one_row_stream_in_and_out!();

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let node = io.numa_node();
        let mut reads = Reads::new(node, &stat);
        let mut n = 0u64;
        let (store, named, pats, out) = (&self.store, &self.named, &self.pats, &mut self.out);
        let (mode, marks) = (self.mode, self.marks);
        let residual = self.residual.as_deref();
        let cx = EvalCx::new(store, &self.minted);
        let holds = |r: &Row<N>| residual.is_none_or(|e| e.holds(cx, r));
        // A left join's row: its matches, until they end (the row alone if none held) or the
        // output blocks (then it waits in `looking`).
        let left = |io: &mut Io<'_>,
                    out: &mut Emitter<Row<N>>,
                    mut l: Looking<N>,
                    reads: &mut Reads<'_>,
                    n: &mut u64| {
            let done = l.lookup.run(store, named, &pats[0], reads, |r| {
                if holds(&r) {
                    out.push(io, r);
                    *n += 1;
                    l.matched = true;
                }
                !io.blocked()
            });
            if !done {
                return Some(l);
            }
            if !l.matched {
                out.push(io, l.row);
                *n += 1;
            }
            None
        };
        if let Some(l) = self.looking.take() {
            self.looking = left(io, out, l, &mut reads, &mut n);
        }
        let looking = &mut self.looking;
        let mut checks = Checks {
            since: 0,
            failed: None,
        };
        let mut counted = reads.tally().all;
        let done = looking.is_none()
            && pump(io, &mut self.queue, 0, true, |io, row| {
                if checks.failed.is_some() {
                    return;
                }
                if let JoinMode::Left = mode {
                    let l = Looking {
                        lookup: RowLookup::new(&pats[0], row, named),
                        row,
                        matched: false,
                    };
                    *looking = left(io, out, l, &mut reads, &mut n);
                } else {
                    let found = any_match(
                        store,
                        named,
                        pats,
                        row,
                        residual,
                        cx,
                        &mut reads,
                        &stat,
                        io,
                        &mut checks,
                    );
                    let pass = match mode {
                        JoinMode::Semi => found.then_some(row),
                        JoinMode::Anti | JoinMode::Minus => (!found).then_some(row),
                        JoinMode::Mark(col) => {
                            let mut r = row;
                            r[col] = marks[usize::from(!found)];
                            Some(r)
                        }
                        JoinMode::Inner | JoinMode::Left => unreachable!("planned as such"),
                    };
                    if let (Some(r), None) = (pass, &checks.failed) {
                        out.push(io, r);
                        n += 1;
                    }
                }
                let all = reads.tally().all;
                checks.add(io, all - counted);
                counted = all;
            });
        if let Some(err) = checks.failed {
            return Err(err);
        }
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        if done {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        self.out.idle(io);
        Ok(Status::Idle)
    }
}

/// One lookup join per input stream.
pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    input: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    let Op::LookupJoin {
        mode,
        pats,
        residual,
    } = &p.op
    else {
        unreachable!("a lookup join node")
    };
    let pats = Arc::new(pats.clone());
    let marks = super::hash_join::mark_ids(cx);
    per_stream(
        b,
        input,
        &format!("{mode:?} index join"),
        || LookupJoinOp::<N> {
            mode: *mode,
            store: cx.store.clone(),
            minted: cx.minted.clone(),
            named: cx.named.clone(),
            pats: pats.clone(),
            residual: residual.clone(),
            marks,
            queue: VecDeque::new(),
            looking: None,
            out: Emitter::new(0),
            stat: p.stat.clone(),
            timing: cx.timing,
        },
    )
}
