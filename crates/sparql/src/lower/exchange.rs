//! Repartitioning ([`Op::Exchange`](crate::physical::Op::Exchange)): the only place rows move
//! between streams. To one stream: a union of the input streams. To `n` streams by hash: each
//! input stream routed by its rows' key hash (so the hashing runs in parallel over the input
//! streams), and the `n` parts of every input united per target. To `n` streams in any order:
//! the input streams grouped, or one stream dealt round robin.

use nearflow_flow::{PlanBuilder, Stream};

use super::{ExecCx, KeyFn, Row};
use crate::physical::Partitioning;

pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    input: Vec<Stream<Row<N>>>,
    to: &Partitioning,
) -> Vec<Stream<Row<N>>> {
    match to {
        Partitioning::Single => vec![unite(b, input)],
        Partitioning::Any(n) => {
            let n = *n;
            if input.len() >= n {
                // Group the streams: stream i goes to target i mod n.
                let mut groups: Vec<Vec<Stream<Row<N>>>> = (0..n).map(|_| Vec::new()).collect();
                for (i, s) in input.into_iter().enumerate() {
                    groups[i % n].push(s);
                }
                groups.into_iter().map(|g| unite(b, g)).collect()
            } else {
                let one = unite(b, input);
                b.partition_round_robin(one, n)
            }
        }
        Partitioning::Hash { keys, value, n } => {
            let n = *n;
            let key = KeyFn {
                store: cx.store.clone(),
                minted: cx.minted.clone(),
                keys: std::sync::Arc::new(keys.clone()),
                value_col: *value,
            };
            let mut targets: Vec<Vec<Stream<Row<N>>>> = (0..n).map(|_| Vec::new()).collect();
            for s in input {
                let k = key.clone();
                let parts = b.partition_by(s, n, move |r: &Row<N>| (k.key(r) % n as u64) as usize);
                for (t, part) in targets.iter_mut().zip(parts) {
                    t.push(part);
                }
            }
            targets.into_iter().map(|t| unite(b, t)).collect()
        }
    }
}

/// One stream of several (a union when there are more than one).
pub(super) fn unite<const N: usize>(
    b: &mut PlanBuilder,
    mut streams: Vec<Stream<Row<N>>>,
) -> Stream<Row<N>> {
    match streams.len() {
        0 => b.source(Vec::<Row<N>>::new()),
        1 => streams.pop().expect("one"),
        _ => b.union(streams),
    }
}
