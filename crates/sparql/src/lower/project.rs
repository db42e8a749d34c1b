//! Projection: the columns not projected are cleared (a subquery's inner variables are not
//! visible outside it). Rows are changed in their packet; one operator per input stream. Also
//! the row counter that other builders put on a stream, and the slice per key (OFFSET and
//! LIMIT applied to each key's rows on their own, in the order they come).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{FlowError, Io, Operator, PlanBuilder, Status, Stream};

use super::{per_packet, per_stream, ExecCx, Row};
use crate::physical::{OpStat, Phys};
use nearflow_rdf::term::UNBOUND;

/// Clears the columns not kept (`None`: keeps every column), counting the rows.
struct ProjectOp<const N: usize> {
    keep: Option<Vec<bool>>,
    stat: Arc<OpStat>,
}

impl<const N: usize> Operator for ProjectOp<N> {
    super::one_row_stream_in_and_out!();

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let keep = &self.keep;
        let mut n = 0;
        let status = per_packet::<N>(io, |io, mut rows| {
            if let Some(keep) = keep {
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
        });
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
    per_stream(b, input, "project", || ProjectOp::<N> {
        keep: Some(keep.clone()),
        stat: p.stat.clone(),
    })
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

/// OFFSET/LIMIT per key: a row is kept when it is, among the rows with its key columns'
/// values, at a position in `start..start + len`.
struct SlicePerKeyOp<const N: usize> {
    keys: Vec<usize>,
    start: u64,
    len: Option<u64>,
    seen: hashbrown::HashMap<Vec<nearflow_rdf::term::Id>, u64>,
    out: nearflow_flow::Emitter<Row<N>>,
    stat: Arc<OpStat>,
}

impl<const N: usize> Operator for SlicePerKeyOp<N> {
    super::one_row_stream_in_and_out!();

    fn state_bytes(&self) -> usize {
        self.seen.len() * (self.keys.len() * 4 + 32)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let mut n = 0;
        let mut charged = Ok(());
        let status = per_packet::<N>(io, |io, rows| {
            let before = self.seen.len();
            for r in rows {
                let key: Vec<_> = self.keys.iter().map(|&c| r[c]).collect();
                let at = self.seen.entry(key).or_insert(0);
                let i = *at;
                *at += 1;
                if i >= self.start && self.len.is_none_or(|l| i - self.start < l) {
                    self.out.push(io, r);
                    n += 1;
                }
            }
            if charged.is_ok() {
                charged = io.charge((self.seen.len() - before) * (self.keys.len() * 4 + 32));
            }
        });
        charged?;
        if status == Status::Done {
            self.out.flush(io);
        } else {
            self.out.idle(io);
        }
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        Ok(status)
    }
}

/// The slice of each key's rows (`per`: the key columns) of one stream.
pub(super) fn slice_per_key<const N: usize>(
    b: &mut PlanBuilder,
    s: Stream<Row<N>>,
    p: &Phys,
    start: usize,
    len: Option<usize>,
    per: &[usize],
) -> Vec<Stream<Row<N>>> {
    let op = b.add(
        "slice per key",
        SlicePerKeyOp::<N> {
            keys: per.to_vec(),
            start: start as u64,
            len: len.map(|l| l as u64),
            seen: hashbrown::HashMap::new(),
            out: nearflow_flow::Emitter::new(0),
            stat: p.stat.clone(),
        },
    );
    b.feed(s, op, 0);
    vec![b.stream::<Row<N>>(op, 0).expect("a slice outputs rows")]
}
