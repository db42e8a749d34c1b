//! FILTER: keeps the rows whose expression's effective boolean value is true (an error drops
//! the row, §17.2). One operator per input stream; the rows kept are packed into full packets.
//!
//! An expression of one variable whose value depends on nothing else (no `RAND`, `NOW`,
//! `BNODE`, `UUID`, `STRUUID`, `EXISTS`) is a function of that variable's id: each operator
//! keeps the last verdicts in a direct-mapped table of [`MEMO`] entries by id, so a value
//! that repeats (`?pages > 100` over 94 k rows of a few thousand numbers) is decoded and
//! compared once, not once per row. The table's size is fixed, whatever the input.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, Status, Stream};

use super::{per_packet, per_stream, ExecCx, Row, Timer};
use crate::expr::{EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{OpStat, Phys};
use nearflow_rdf::index::Store;
use nearflow_rdf::term::Id;

/// Entries of a filter's table of verdicts by id (8 bytes each).
const MEMO: usize = 4096;

/// An empty entry (no id is `u32::MAX << 1 | 1` past 32 bits).
const EMPTY: u64 = u64::MAX;

/// The verdicts of an expression of one column, by id (see the module's documentation).
struct Memo {
    col: usize,
    slots: Box<[u64]>,
}

impl Memo {
    #[inline]
    fn holds(&mut self, cx: EvalCx<'_>, expr: &Expr, row: &[Id]) -> bool {
        let id = row[self.col];
        let slot = (id.wrapping_mul(0x9E37_79B9) >> 20) as usize % MEMO;
        let e = self.slots[slot];
        if e != EMPTY && (e >> 1) as Id == id {
            return e & 1 == 1;
        }
        let v = expr.holds(cx, row);
        self.slots[slot] = (u64::from(id) << 1) | u64::from(v);
        v
    }
}

struct FilterOp<const N: usize> {
    expr: Arc<Expr>,
    memo: Option<Memo>,
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
        let (expr, out, memo) = (&self.expr, &mut self.out, &mut self.memo);
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
                let keep = match memo {
                    Some(m) => m.holds(cx, expr, &r),
                    None => expr.holds(cx, &r),
                };
                if keep {
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
    let col = expr.of_one_value();
    per_stream(b, input, "filter", || FilterOp::<N> {
        expr: expr.clone(),
        memo: col.map(|col| Memo {
            col,
            slots: vec![EMPTY; MEMO].into_boxed_slice(),
        }),
        store: cx.store.clone(),
        minted: cx.minted.clone(),
        out: Emitter::new(0),
        stat: p.stat.clone(),
        timing: cx.timing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::CmpOp;
    use crate::functions::builtin;
    use nearflow_rdf::term::Term;

    /// Only an expression of one column whose value depends on that column's id alone is kept
    /// by id.
    #[test]
    fn only_an_expression_of_one_value_is_kept_by_id() {
        let lit = || Box::new(Expr::Const(Term::Iri("http://ex/a".into())));
        let gt = Expr::Cmp(Box::new(Expr::Var(3)), lit(), CmpOp::Gt);
        assert_eq!(gt.of_one_value(), Some(3));
        let two = Expr::Cmp(Box::new(Expr::Var(3)), Box::new(Expr::Var(4)), CmpOp::Gt);
        assert_eq!(two.of_one_value(), None);
        let rand = Expr::Cmp(
            Box::new(Expr::Var(3)),
            Box::new(Expr::Call(builtin("RAND"), vec![])),
            CmpOp::Gt,
        );
        assert_eq!(rand.of_one_value(), None);
        assert_eq!(
            Expr::Const(Term::Iri("http://ex/a".into())).of_one_value(),
            None
        );
    }
}
