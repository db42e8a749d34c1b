//! The property path operator: on its first step it computes every solution of `subject path
//! object` from the store (`crate::path::Walker`), in one graph, in the merge of the default
//! graph's graphs, or in each named graph with the graph's column bound; then emits them.

use std::collections::VecDeque;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{emit_queued, row_ports, ExecCx, Row, Timer};
use crate::expr::EvalCx;
use crate::minted::Minted;
use crate::path::{End, PathExpr, Walker};
use crate::physical::{Op, OpStat, PathGraphs, Phys};
use nearflow_rdf::index::Store;
use nearflow_rdf::term::{Id, Term, UNBOUND};

struct PathOp<const N: usize> {
    store: Arc<Store>,
    minted: Arc<Minted>,
    subject: End,
    path: Arc<PathExpr>,
    object: End,
    graphs: PathGraphs,
    rows: Option<VecDeque<Row<N>>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> PathOp<N> {
    /// The id of a constant end: the store's, else one minted for the run (a zero-length path
    /// still matches it).
    fn id(&self, t: &Term) -> Id {
        EvalCx::new(&self.store, &self.minted)
            .id_of_term(t.as_ref())
            .unwrap_or(UNBOUND)
    }

    /// Every solution; `false` when `stop` ended a closure early (the rows are then partial).
    fn solve(&self, stop: &dyn Fn() -> bool) -> (Vec<Row<N>>, bool) {
        let mut out = Vec::new();
        let mut whole = true;
        match self.graphs.bind {
            None => whole = self.solve_in(self.graphs.graphs.clone(), None, &mut out, stop),
            Some(c) => {
                for &g in &self.graphs.graphs {
                    whole = whole && self.solve_in(vec![g], Some((c, g)), &mut out, stop);
                }
            }
        }
        (out, whole)
    }

    /// The solutions in the graphs `graphs` (merged), each row with `bind`'s column set;
    /// `false` when `stop` ended a closure early.
    fn solve_in(
        &self,
        graphs: Vec<Id>,
        bind: Option<(usize, Id)>,
        out: &mut Vec<Row<N>>,
        stop: &dyn Fn() -> bool,
    ) -> bool {
        let w = Walker::new(&self.store, graphs).stopping_on(stop);
        let p = self.path.resolve(&self.store);
        let row = |x: Id, y: Id| -> Option<Row<N>> {
            let mut r = [UNBOUND; N];
            let ends = [(&self.subject, x), (&self.object, y)];
            for (end, v) in ends {
                if let End::Var(c) = end {
                    if r[*c] != UNBOUND && r[*c] != v {
                        return None;
                    }
                    r[*c] = v;
                }
            }
            if let Some((c, g)) = bind {
                if r[c] != UNBOUND && r[c] != g {
                    return None;
                }
                r[c] = g;
            }
            Some(r)
        };
        let mut ys = Vec::new();
        match (&self.subject, &self.object) {
            (End::Term(s), End::Term(o)) => {
                let (s, o) = (self.id(s), self.id(o));
                w.from(&p, s, &mut ys);
                out.extend(ys.iter().filter(|&&y| y == o).filter_map(|_| row(s, o)));
            }
            (End::Term(s), End::Var(_)) => {
                let s = self.id(s);
                w.from(&p, s, &mut ys);
                out.extend(ys.iter().filter_map(|&y| row(s, y)));
            }
            (End::Var(_), End::Term(o)) => {
                let o = self.id(o);
                w.to(&p, o, &mut ys);
                out.extend(ys.iter().filter_map(|&x| row(x, o)));
            }
            (End::Var(_), End::Var(_)) => {
                out.extend(w.pairs(&p).into_iter().filter_map(|(x, y)| row(x, y)));
            }
        }
        !w.stopped()
    }
}

impl<const N: usize> Operator for PathOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(0)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn state_bytes(&self) -> usize {
        self.rows.as_ref().map_or(0, |r| r.len()) * std::mem::size_of::<Row<N>>()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        if self.rows.is_none() {
            let (rows, whole) = self.solve(&|| io.check().is_err());
            if !whole {
                io.check()?;
            }
            io.charge(rows.len() * std::mem::size_of::<Row<N>>())?;
            self.rows = Some(rows.into());
        }
        let q = self.rows.as_mut().expect("made above");
        Ok(emit_queued(io, q, &mut self.out, &self.stat, Status::More))
    }
}

pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
) -> Vec<Stream<Row<N>>> {
    let Op::Path(s, path, o, graphs) = &p.op else {
        unreachable!("a path node")
    };
    let op = b.add(
        format!("path {path}"),
        PathOp::<N> {
            store: cx.store.clone(),
            minted: cx.minted.clone(),
            subject: s.clone(),
            path: path.clone(),
            object: o.clone(),
            graphs: graphs.clone(),
            rows: None,
            out: Emitter::new(0),
            stat: p.stat.clone(),
            timing: cx.timing,
        },
    );
    vec![b.stream::<Row<N>>(op, 0).expect("a path outputs rows")]
}
