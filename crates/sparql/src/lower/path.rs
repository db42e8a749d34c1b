//! The property path operator: on its first step it computes every solution of `subject path
//! object` from the store (`crate::path::Walker`), in one graph, in the merge of the default
//! graph's graphs, or in each named graph with the graph's column bound; then emits them.

use std::collections::VecDeque;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{emit_queued, row_ports, ExecCx, Row, Timer};
use crate::expr::EvalCx;
use crate::minted::Minted;
use crate::path::{End, PathExpr, Walker, ID_BYTES};
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

    /// Every solution, the walks holding at most `room` bytes between them and the rows;
    /// `Err` when `stop` ended a closure early (the rows are then partial) or the walks would
    /// have held more: `Some` of the bytes then.
    fn solve(&self, stop: &dyn Fn() -> bool, room: usize) -> Result<Vec<Row<N>>, Option<usize>> {
        let mut out = Vec::new();
        match self.graphs.bind {
            None => self.solve_in(self.graphs.graphs.clone(), None, &mut out, stop, room)?,
            Some(c) => {
                for &g in &self.graphs.graphs {
                    self.solve_in(vec![g], Some((c, g)), &mut out, stop, room)?;
                }
            }
        }
        Ok(out)
    }

    /// The solutions in the graphs `graphs` (merged), each row with `bind`'s column set;
    /// `false` when `stop` ended a closure early.
    fn solve_in(
        &self,
        graphs: Vec<Id>,
        bind: Option<(usize, Id)>,
        out: &mut Vec<Row<N>>,
        stop: &dyn Fn() -> bool,
        room: usize,
    ) -> Result<(), Option<usize>> {
        // The rows made so far hold part of the room: a row counts as twice its bytes (a
        // vector that may have doubled), in the walk's units.
        let row_ids = (2 * std::mem::size_of::<Row<N>>())
            .div_ceil(ID_BYTES)
            .max(1);
        let held = out.capacity().saturating_mul(row_ids * ID_BYTES);
        let w = Walker::new(&self.store, graphs)
            .stopping_on(stop)
            .within(room.saturating_sub(held));
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
        // The rows of `n` ends, counted before they are made.
        let rows = |n: usize| w.grow(n.saturating_mul(row_ids));
        match (&self.subject, &self.object) {
            (End::Term(s), End::Term(o)) => {
                let (s, o) = (self.id(s), self.id(o));
                w.from(&p, s, &mut ys);
                if rows(ys.len()) {
                    out.extend(ys.iter().filter(|&&y| y == o).filter_map(|_| row(s, o)));
                }
            }
            (End::Term(s), End::Var(_)) => {
                let s = self.id(s);
                w.from(&p, s, &mut ys);
                if rows(ys.len()) {
                    out.extend(ys.iter().filter_map(|&y| row(s, y)));
                }
            }
            (End::Var(_), End::Term(o)) => {
                let o = self.id(o);
                w.to(&p, o, &mut ys);
                if rows(ys.len()) {
                    out.extend(ys.iter().filter_map(|&x| row(x, o)));
                }
            }
            (End::Var(_), End::Var(_)) => {
                let pairs = w.pairs(&p);
                if rows(pairs.len()) {
                    out.extend(pairs.into_iter().filter_map(|(x, y)| row(x, y)));
                }
            }
        }
        match (w.over_budget(), w.stopped()) {
            (Some(bytes), _) => Err(Some(bytes.saturating_add(held))),
            (None, true) => Err(None),
            (None, false) => Ok(()),
        }
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
            let room = io.memory_room();
            let rows = match self.solve(&|| io.check().is_err(), room) {
                Ok(rows) => rows,
                Err(over) => {
                    io.check()?;
                    let Some(over) = over else {
                        return Err(FlowError::Cancelled);
                    };
                    // Past the room: the walks stopped before holding more than it.
                    let limit = io.memory_limit().unwrap_or(usize::MAX);
                    return Err(FlowError::MemoryLimit {
                        operator: "property path".into(),
                        limit,
                        wanted: limit.saturating_sub(room).saturating_add(over),
                    });
                }
            };
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
