//! BIND and SELECT expressions (§18.5 Extend): each row's column gets the expression's value,
//! or stays unbound when the expression is an error. Rows are changed in their packet, which
//! goes on as it came. One operator per input stream.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{FlowError, Io, Operator, PlanBuilder, Status, Stream};

use super::{per_packet, per_stream, ExecCx, Row, Timer};
use crate::expr::{EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{OpStat, Phys};
use nearflow_rdf::index::Store;
use nearflow_rdf::term::UNBOUND;

struct ExtendOp<const N: usize> {
    col: usize,
    expr: Arc<Expr>,
    store: Arc<Store>,
    minted: Arc<Minted>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> Operator for ExtendOp<N> {
    super::one_row_stream_in_and_out!();

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let cx = EvalCx::new(&self.store, &self.minted);
        let (col, expr) = (self.col, &self.expr);
        let mut n = 0;
        let status = per_packet::<N>(io, |io, mut rows| {
            for r in rows.iter_mut() {
                r[col] = expr
                    .eval(cx, &r[..])
                    .ok()
                    .and_then(|v| cx.id_of(&v))
                    .unwrap_or(UNBOUND);
            }
            n += rows.len() as u64;
            io.send(0, rows);
        });
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        Ok(status)
    }
}

pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    col: usize,
    expr: &Arc<Expr>,
    input: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    per_stream(b, input, "bind", || ExtendOp::<N> {
        col,
        expr: expr.clone(),
        store: cx.store.clone(),
        minted: cx.minted.clone(),
        stat: p.stat.clone(),
        timing: cx.timing,
    })
}
