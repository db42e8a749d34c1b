//! An index join: each input row looked up in the store's indexes, its matches pushed straight
//! into the output packet (a flat-map that returned a vector per row spent 15 % of Q7's time
//! allocating and copying them). One operator per input stream.
//!
//! An index join on an `=` edge (`?a = ?b`, `?a` bound by the input, `?b` a variable of the
//! pattern that shares no other variable with it) looks the pattern up with `?b` bound to the
//! row's `?a` when that term is `=` only to itself (an IRI, a blank node, a string: its value key
//! is its id, [`value_key`]); for a number, a boolean or a date, whose `=` terms are others too
//! (`1`, `01`, `1.0`), it reads the pattern's matches once, keeps those whose `?b` is such a
//! value by value key, and joins the row with those of its key. Either way the `=` is checked on
//! every joined row, so the answer is the hash join's on a value key.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, Status, Stream};

use super::{bind, per_stream, pump, ExecCx, Reads, Row, Timer};
use crate::expr::{value_key, EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{bound_of, OpStat, Pat, Phys, Slot};
use nearflow_rdf::index::{Lookup, Permutation, QuadIndex, Store};
use nearflow_rdf::term::{Id, UNBOUND};

/// The graphs one row's lookup reads.
#[derive(Clone, Copy)]
enum Graphs {
    /// One graph.
    One(Id),
    /// Every named graph of the dataset.
    Named,
    /// None (a graph variable bound to a graph the dataset does not name).
    None,
}

/// One input row's lookup of a pattern, resumable: the row, the graphs it reads, and the
/// store's lookup in the current one ([`nearflow_rdf::index::Lookup`]: the permutation and key
/// prefix the row's bound positions give, and where the next match is). Nothing is allocated
/// per row.
pub(super) struct RowLookup<const N: usize> {
    row: Row<N>,
    order: Permutation,
    prefix: [Id; 3],
    k: usize,
    graphs: Graphs,
    /// The graph being read (an index into the named graphs for [`Graphs::Named`]).
    graph: usize,
    /// The lookup in that graph; `None` before it starts.
    at: Option<Lookup>,
}

impl<const N: usize> RowLookup<N> {
    pub(super) fn new(pat: &Pat, row: Row<N>, named: &[Id]) -> Self {
        let mut bound = bound_of(pat);
        for i in 0..3 {
            if let Slot::Var(c) = pat[i] {
                if row[c] != UNBOUND {
                    bound[i] = Some(row[c]);
                }
            }
        }
        let graphs = match pat[3] {
            Slot::Const(Some(g)) | Slot::Fixed(_, g) => Graphs::One(g),
            Slot::Const(None) => Graphs::None,
            // A graph variable the input bound: that graph, if the dataset names it.
            Slot::Var(c) if row[c] != UNBOUND => {
                if named.binary_search(&row[c]).is_ok() {
                    Graphs::One(row[c])
                } else {
                    Graphs::None
                }
            }
            Slot::Var(_) => Graphs::Named,
        };
        let (order, k) = Permutation::for_bound(bound.map(|x| x.is_some()));
        let mut prefix = [0; 3];
        for (i, &pos) in order.positions()[..k].iter().enumerate() {
            prefix[i] = bound[pos].expect("bound by for_bound");
        }
        RowLookup {
            row,
            order,
            prefix,
            k,
            graphs,
            graph: 0,
            at: None,
        }
    }

    fn graph_at(&self, named: &[Id]) -> Option<Id> {
        match self.graphs {
            Graphs::One(g) => (self.graph == 0).then_some(g),
            Graphs::Named => named.get(self.graph).copied(),
            Graphs::None => None,
        }
    }

    /// Hands the row extended by each match of `pat` to `emit` until the matches end (true)
    /// or `emit` says stop between two of them (false: call again to go on).
    pub(super) fn run(
        &mut self,
        store: &Store,
        named: &[Id],
        pat: &Pat,
        reads: &mut Reads<'_>,
        mut emit: impl FnMut(Row<N>) -> bool,
    ) -> bool {
        while let Some(g) = self.graph_at(named) {
            let (order, prefix, k) = (self.order, self.prefix, self.k);
            let at = self
                .at
                .get_or_insert_with(|| Lookup::new(order, prefix, k, g));
            let row = self.row;
            let done = store.lookup(at, reads.tally(), |triple| {
                let mut r = row;
                if bind(pat, triple, g, &mut r) {
                    return emit(r);
                }
                true
            });
            if !done {
                return false;
            }
            self.graph += 1;
            self.at = None;
        }
        true
    }
}

/// The `=` an index join joins by: the input's column `a`, the pattern's column `b`, the `=`
/// itself (checked on every joined row), and the pattern's matches whose `b` is `=` to terms
/// other than itself, by value key (read once, at the first row that needs them).
struct EqEdge<const N: usize> {
    a: usize,
    b: usize,
    eq: Expr,
    minted: Arc<Minted>,
    by_value: Option<HashMap<u64, Vec<Row<N>>>>,
}

/// A term `=` only to itself: its value key is its id.
fn only_itself(cx: EvalCx<'_>, id: Id) -> bool {
    value_key(cx, id) == u64::from(id)
}

struct IndexJoinOp<const N: usize> {
    store: Arc<Store>,
    named: Arc<Vec<Id>>,
    pat: Pat,
    edge: Option<EqEdge<N>>,
    queue: VecDeque<Row<N>>,
    /// An input row whose matches were interrupted.
    looking: Option<RowLookup<N>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> Operator for IndexJoinOp<N> {
    super::one_row_stream_in_and_out!();

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let mut n = 0;
        let (store, pat, out, named) = (&self.store, &self.pat, &mut self.out, &self.named);
        let mut reads = Reads::new(io.numa_node(), &stat);
        let edge = &mut self.edge;
        // The row a match extends, pushed when the `=` (if any) holds.
        let mut push = |io: &mut Io<'_>, r: Row<N>, edge: Option<&EqEdge<N>>| {
            let holds = edge.is_none_or(|e| e.eq.holds(EvalCx::new(store, &e.minted), &r));
            if holds {
                out.push(io, r);
                n += 1;
            }
            !io.blocked()
        };
        if let Some(mut l) = self.looking.take() {
            if !l.run(store, named, pat, &mut reads, |r| {
                push(io, r, edge.as_ref())
            }) {
                self.looking = Some(l);
            }
        }
        let looking = &mut self.looking;
        let mut failed = None;
        let done = looking.is_none()
            && pump(io, &mut self.queue, 0, true, |io, mut row| {
                if failed.is_some() {
                    return;
                }
                if let Some(e) = edge.as_mut() {
                    let v = row[e.a];
                    let cx = EvalCx::new(store, &e.minted);
                    if !only_itself(cx, v) {
                        // Joined with the matches of its value key, all at once.
                        if e.by_value.is_none() {
                            match by_value(store, named, pat, e.b, cx, &mut reads, io) {
                                Ok(m) => e.by_value = Some(m),
                                Err(err) => {
                                    failed = Some(err);
                                    return;
                                }
                            }
                        }
                        let e: &EqEdge<N> = e;
                        let key = value_key(cx, v);
                        let matches = e.by_value.as_ref().and_then(|m| m.get(&key));
                        for m in matches.into_iter().flatten() {
                            let mut r = row;
                            for (x, &y) in r.iter_mut().zip(m.iter()) {
                                if y != UNBOUND {
                                    *x = y;
                                }
                            }
                            push(io, r, Some(e));
                        }
                        return;
                    }
                    row[e.b] = v;
                }
                let mut l = RowLookup::new(pat, row, named);
                if !l.run(store, named, pat, &mut reads, |r| {
                    push(io, r, edge.as_ref())
                }) {
                    *looking = Some(l);
                }
            });
        if let Some(err) = failed {
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

/// The matches of `pat` whose column `b` is `=` to terms other than itself (numbers, booleans,
/// dates), by value key; their bytes charged to the plan's memory limit.
fn by_value<const N: usize>(
    store: &Store,
    named: &[Id],
    pat: &Pat,
    b: usize,
    cx: EvalCx<'_>,
    reads: &mut Reads<'_>,
    io: &mut Io<'_>,
) -> Result<HashMap<u64, Vec<Row<N>>>, FlowError> {
    // Charged, and the plan's limits of time and memory checked, every `STEP` rows read: the
    // read is one step of the operator however long the pattern is.
    const STEP: usize = 1 << 16;
    let entry = std::mem::size_of::<Row<N>>() + 8;
    let mut m: HashMap<u64, Vec<Row<N>>> = HashMap::new();
    let (mut read, mut kept, mut stopped) = (0usize, 0usize, None);
    RowLookup::new(pat, [UNBOUND; N], named).run(store, named, pat, reads, |r| {
        let v = r[b];
        if v != UNBOUND && !only_itself(cx, v) {
            m.entry(value_key(cx, v)).or_default().push(r);
            kept += 1;
        }
        read += 1;
        if read % STEP == 0 {
            stopped = io.check().and_then(|()| io.charge(kept * entry)).err();
            kept = 0;
        }
        stopped.is_none()
    });
    if let Some(e) = stopped {
        return Err(e);
    }
    io.charge(kept * entry)?;
    Ok(m)
}

/// One index join per input stream; on an `=` edge (`eq`: the input's column, the
/// pattern's), the join described at the top of this file.
pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    pat: Pat,
    eq: Option<(usize, usize)>,
    input: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    per_stream(b, input, super::INDEX_JOIN_OPERATOR, || IndexJoinOp::<N> {
        store: cx.store.clone(),
        named: cx.named.clone(),
        pat,
        edge: eq.map(|(a, b)| EqEdge {
            a,
            b,
            eq: Expr::Eq(Box::new(Expr::Var(a)), Box::new(Expr::Var(b))),
            minted: cx.minted.clone(),
            by_value: None,
        }),
        queue: VecDeque::new(),
        looking: None,
        out: Emitter::new(0),
        stat: p.stat.clone(),
        timing: cx.timing,
    })
}
