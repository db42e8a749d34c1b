//! Projection: the columns not projected are cleared (a subquery's inner variables are not
//! visible outside it). Rows are changed in their packet; one operator per input stream. Also
//! the row counter that other builders put on a stream.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{row_ports, ExecCx, Row};
use crate::physical::{OpStat, Phys};
use nearflow_rdf::term::UNBOUND;

/// Clears the columns not kept (`None`: keeps every column), counting the rows.
struct ProjectOp<const N: usize> {
    keep: Option<Vec<bool>>,
    stat: Arc<OpStat>,
}

impl<const N: usize> Operator for ProjectOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let mut n = 0;
        let status = loop {
            if io.blocked() {
                break Status::Idle;
            }
            match io.recv::<Row<N>>(0) {
                Some(p) => {
                    let mut rows = p.into_vec();
                    if let Some(keep) = &self.keep {
                        for r in rows.iter_mut() {
                            for (v, k) in r.iter_mut().zip(keep) {
                                if !k {
                                    *v = UNBOUND;
                                }
                            }
                        }
                    }
                    n += rows.len() as u64;
                    io.send(0, rows);
                }
                None if io.finished::<Row<N>>(0) => break Status::Done,
                None => break Status::Idle,
            }
        };
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        Ok(status)
    }
}

pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    cols: &[usize],
    input: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    let mut keep = vec![false; N];
    for &c in cols {
        keep[c] = true;
    }
    // Columns past the query's width are always unbound.
    keep.iter_mut().skip(cx.width).for_each(|k| *k = true);
    input
        .into_iter()
        .map(|s| {
            let op = b.add(
                "project",
                ProjectOp::<N> {
                    keep: Some(keep.clone()),
                    stat: p.stat.clone(),
                },
            );
            b.feed(s, op, 0);
            b.stream::<Row<N>>(op, 0)
                .expect("a projection outputs rows")
        })
        .collect()
}

/// `s`, its rows counted into `stat`.
pub(super) fn count_rows<const N: usize>(
    b: &mut PlanBuilder,
    s: Stream<Row<N>>,
    stat: Arc<OpStat>,
) -> Stream<Row<N>> {
    let op = b.add("count", ProjectOp::<N> { keep: None, stat });
    b.feed(s, op, 0);
    b.stream::<Row<N>>(op, 0).expect("a counter outputs rows")
}
