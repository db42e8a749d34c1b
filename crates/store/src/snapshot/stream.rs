//! A store as sorted streams, into a format's [`Sink`]: its terms in id order, each
//! permutation's rows with the delta merged in (the added rows in their places, the removed
//! ones left out), the graph table and statistics recounted when the rows are not the
//! indexes' own. What a checkpoint writes, and (keeping some quads) a cluster's shard.

use super::format::Sink;
use crate::layout::{Permutation, StatsBuilder};
use crate::store::Store;
use crate::term::Id;

/// Which quads a filtered write keeps: asked of each quad as `[graph, subject, predicate,
/// object]`.
pub(crate) type Keep<'a> = &'a dyn Fn([Id; 4]) -> bool;

/// Streams `store` into `sink`: every term of its dictionary (so ids stay those of `store`),
/// and of its quads those `keep` keeps when it is set (given each in `[g, s, p, o]` order).
/// Nothing of the indexes is copied; the terms not in key order are sorted by key when the
/// format asks.
pub(crate) fn write(
    store: &Store,
    mut sink: Box<dyn Sink + '_>,
    keep: Option<Keep<'_>>,
) -> std::io::Result<()> {
    let dict = store.dict();
    let mut spool = std::io::Cursor::new(Vec::new());
    sink.terms(
        &mut spool,
        &mut |push| dict.keys().try_for_each(|k| push(&k)),
        &mut |ordered| {
            let mut rest: Vec<Id> = ((ordered + 1) as Id..=dict.len() as Id).collect();
            rest.sort_unstable_by(|&a, &b| dict.key_of(a).cmp(&dict.key_of(b)));
            rest
        },
    )?;
    drop(spool);
    let flat = store.is_flat() && keep.is_none();
    let mut stats = StatsBuilder::default();
    let mut graphs: Vec<(Id, usize)> = Vec::new();
    for order in Permutation::ALL {
        let at = order.positions();
        sink.rows(order, &mut |push| {
            let (mut last, mut rows) = (None::<[Id; 4]>, 0usize);
            merged_rows(store, order, |k| {
                if let Some(keep) = keep {
                    let mut q = [k[0], 0, 0, 0];
                    for i in 0..3 {
                        q[1 + at[i]] = k[1 + i];
                    }
                    if !keep(q) {
                        return Ok(());
                    }
                }
                if !flat {
                    stats.row(order, last, k, &mut graphs, rows);
                    last = Some(k);
                    rows += 1;
                }
                push([k[1], k[2], k[3]])
            })
        })?;
    }
    if flat {
        sink.finish(store.graphs(), store.stats())
    } else {
        sink.finish(&graphs, &stats.finish())
    }
}

/// Each row of `store` in `order` — its indexes with its delta merged in: the added rows in
/// their places, the removed ones left out — as `[graph, key]`, in order, to `f`. One pass
/// over the indexes, nothing of them copied.
pub(crate) fn merged_rows<E>(
    store: &Store,
    order: Permutation,
    mut f: impl FnMut([Id; 4]) -> Result<(), E>,
) -> Result<(), E> {
    let graphs = store.graphs();
    let delta = store.delta();
    let (added, removed) = (delta.added_rows(order), delta.removed_rows(order));
    let (mut a, mut r, mut g) = (0, 0, 0);
    for part in store.perm(order).partitions() {
        let data = &part.data;
        for i in 0..data.len() {
            let at = data.first + i;
            while g + 1 < graphs.len() && graphs[g + 1].1 <= at {
                g += 1;
            }
            let k = data.row(i);
            let row = [graphs[g].0, k[0], k[1], k[2]];
            while a < added.len() && added[a] < row {
                f(added[a])?;
                a += 1;
            }
            if r < removed.len() && removed[r] == row {
                r += 1;
                continue;
            }
            f(row)?;
        }
    }
    debug_assert_eq!(r, removed.len(), "every removed quad is in the indexes");
    added[a..].iter().try_for_each(|&row| f(row))
}
