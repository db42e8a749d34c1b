//! FILTER: keeps the rows whose expression's effective boolean value is true (an error drops
//! the row, §17.2). One operator per input stream; the rows kept are packed into full packets.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, Status, Stream};

use super::{per_packet, per_stream, ExecCx, Row, Timer};
use crate::expr::{EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{OpStat, Phys};
use nearflow_rdf::index::Store;

struct FilterOp<const N: usize> {
    expr: Arc<Expr>,
    store: Arc<Store>,
    minted: Arc<Minted>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> Operator for FilterOp<N> {
    super::one_row_stream_in_and_out!();

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let cx = EvalCx::new(&self.store, &self.minted);
        let (expr, out) = (&self.expr, &mut self.out);
        let mut kept = 0;
        let mut stop = Ok(());
        let status = per_packet::<N>(io, |io, rows| {
            for (i, r) in rows.into_iter().enumerate() {
                // One row's test can be long (an IN list of thousands): the limits hold
                // within a packet.
                if i % 64 == 0 && stop.is_ok() {
                    stop = io.check();
                }
                if stop.is_err() {
                    return;
                }
                if expr.holds(cx, &r) {
                    out.push(io, r);
                    kept += 1;
                }
            }
        });
        stop?;
        if status == Status::Done {
            self.out.flush(io);
        } else {
            self.out.idle(io);
        }
        self.stat.rows.fetch_add(kept, Ordering::Relaxed);
        Ok(status)
    }
}

pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    expr: &Arc<Expr>,
    input: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    per_stream(b, input, "filter", || FilterOp::<N> {
        expr: expr.clone(),
        store: cx.store.clone(),
        minted: cx.minted.clone(),
        out: Emitter::new(0),
        stat: p.stat.clone(),
        timing: cx.timing,
    })
}
