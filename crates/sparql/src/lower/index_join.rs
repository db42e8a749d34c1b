//! An index join: each input row looked up in the store's indexes, its matches pushed straight
//! into the output packet (a flat-map that returned a vector per row spent 15 % of Q7's time
//! allocating and copying them). One operator per input stream.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, Status, Stream};

use super::{bind, per_stream, pump, ExecCx, Reads, Row, Timer};
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
struct RowLookup<const N: usize> {
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
    fn new(pat: &Pat, row: Row<N>, named: &[Id]) -> Self {
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

    /// Pushes the row extended by each match of `pat` until the matches end (true) or the
    /// output blocks between two of them (false: call again to go on). `n` counts the rows.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        store: &Store,
        named: &[Id],
        pat: &Pat,
        io: &mut Io<'_>,
        out: &mut Emitter<Row<N>>,
        n: &mut u64,
        reads: &mut Reads<'_>,
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
                    out.push(io, r);
                    *n += 1;
                    return !io.blocked();
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

struct IndexJoinOp<const N: usize> {
    store: Arc<Store>,
    named: Arc<Vec<Id>>,
    pat: Pat,
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
        if let Some(mut l) = self.looking.take() {
            if !l.run(store, named, pat, io, out, &mut n, &mut reads) {
                self.looking = Some(l);
            }
        }
        let looking = &mut self.looking;
        let done = looking.is_none()
            && pump(io, &mut self.queue, 0, true, |io, row| {
                let mut l = RowLookup::new(pat, row, named);
                if !l.run(store, named, pat, io, out, &mut n, &mut reads) {
                    *looking = Some(l);
                }
            });
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        if done {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        Ok(Status::Idle)
    }
}

/// One index join per input stream.
pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    pat: Pat,
    input: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    per_stream(b, input, super::INDEX_JOIN_OPERATOR, || IndexJoinOp::<N> {
        store: cx.store.clone(),
        named: cx.named.clone(),
        pat,
        queue: VecDeque::new(),
        looking: None,
        out: Emitter::new(0),
        stat: p.stat.clone(),
        timing: cx.timing,
    })
}
