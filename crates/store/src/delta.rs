//! Versions of a store: the sorted indexes shared, and a small delta beside them.
//!
//! An update never touches the sorted permutations a running query reads. It makes a new
//! `Store` value that shares them (and the dictionary, which it lies over: `Dict::over`)
//! and differs from them by a [`Delta`]: the quads it holds that they lack, and the quads of
//! theirs it lacks, each kept sorted in all three permutations' orders, so a scan merges a
//! range of the delta into the same range of the indexes in one pass and stays sorted. A query
//! holds the version it started on (an `Arc`) to its end: snapshot isolation, with no lock
//! on the read path.
//!
//! `Store::merged` folds a version's delta into new sorted indexes (a linear merge per
//! permutation, the statistics recounted); the store's owner runs it in the background and
//! rebases the versions committed meanwhile onto it (`Store::rebased_onto`). A large store's
//! versions keep their delta instead, written beside the snapshot at a checkpoint (`db.rs`).
//!
//! Invariants: `added` and the indexes are disjoint; `removed` is a subset of the indexes;
//! the three orders of each hold the same quads.

use std::ops::Range;

use crate::layout::Permutation;
use crate::term::Id;

/// A row of the delta in one permutation's order: its graph, then its key.
pub type Row = [Id; 4];

/// The difference between a version and the sorted indexes it shares.
#[derive(Clone, Default)]
pub struct Delta {
    /// Quads the indexes lack, per permutation ([`Permutation::ALL`] order), sorted.
    pub(crate) added: [Vec<Row>; 3],
    /// Quads of the indexes this version lacks, likewise.
    pub(crate) removed: [Vec<Row>; 3],
}

impl std::fmt::Debug for Delta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "+{} −{}", self.added[0].len(), self.removed[0].len())
    }
}

/// The range of `rows` (sorted) whose graph is `g` and whose key starts with `prefix`.
pub(crate) fn prefix_range(rows: &[Row], g: Id, prefix: &[Id]) -> Range<usize> {
    let head = |r: &Row| -> std::cmp::Ordering {
        r[0].cmp(&g)
            .then_with(|| r[1..1 + prefix.len()].cmp(prefix))
    };
    let lo = rows.partition_point(|r| head(r) == std::cmp::Ordering::Less);
    let hi = lo + rows[lo..].partition_point(|r| head(r) != std::cmp::Ordering::Greater);
    lo..hi
}

/// A row as a quad (`[s, p, o, g]`), for a row of the SPO order.
pub(crate) fn quad_of(r: &Row) -> [Id; 4] {
    [r[1], r[2], r[3], r[0]]
}

/// A row's key (without its graph).
#[inline]
pub fn key_of(r: &Row) -> [Id; 3] {
    [r[1], r[2], r[3]]
}

impl Delta {
    /// Whether the version equals its indexes.
    pub fn is_empty(&self) -> bool {
        self.added[0].is_empty() && self.removed[0].is_empty()
    }

    /// Quads added and removed.
    pub fn counts(&self) -> (usize, usize) {
        (self.added[0].len(), self.removed[0].len())
    }

    /// Every added row in `order`, sorted.
    pub fn added_rows(&self, order: Permutation) -> &[Row] {
        &self.added[order.index()]
    }

    /// Every removed row in `order`, sorted.
    pub fn removed_rows(&self, order: Permutation) -> &[Row] {
        &self.removed[order.index()]
    }

    /// The positions in [`added_rows`](Self::added_rows) of graph `g`'s rows whose key starts
    /// with `prefix`.
    pub fn added_range(&self, order: Permutation, g: Id, prefix: &[Id]) -> Range<usize> {
        prefix_range(self.added_rows(order), g, prefix)
    }

    /// Likewise in [`removed_rows`](Self::removed_rows).
    pub fn removed_range(&self, order: Permutation, g: Id, prefix: &[Id]) -> Range<usize> {
        prefix_range(self.removed_rows(order), g, prefix)
    }

    /// Graph `g`'s added rows whose key starts with `prefix`, in `order`.
    pub fn added(&self, order: Permutation, g: Id, prefix: &[Id]) -> &[Row] {
        &self.added_rows(order)[self.added_range(order, g, prefix)]
    }

    /// Graph `g`'s removed rows whose key starts with `prefix`, in `order`.
    pub fn removed(&self, order: Permutation, g: Id, prefix: &[Id]) -> &[Row] {
        &self.removed_rows(order)[self.removed_range(order, g, prefix)]
    }

    /// Quads of graph `g` added and removed.
    pub fn graph_counts(&self, g: Id) -> (u64, u64) {
        (
            self.added(Permutation::Spo, g, &[]).len() as u64,
            self.removed(Permutation::Spo, g, &[]).len() as u64,
        )
    }

    /// Bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.added
            .iter()
            .chain(self.removed.iter())
            .map(|v| v.capacity() * 16)
            .sum()
    }

    /// The delta holding `added` and `removed` (quads, any order).
    pub(crate) fn of(added: Vec<[Id; 4]>, removed: Vec<[Id; 4]>) -> Delta {
        let sorted = |quads: &[[Id; 4]]| {
            Permutation::ALL.map(|order| {
                let p = order.positions();
                let mut v: Vec<Row> = quads
                    .iter()
                    .map(|q| [q[3], q[p[0]], q[p[1]], q[p[2]]])
                    .collect();
                v.sort_unstable();
                v
            })
        };
        Delta {
            added: sorted(&added),
            removed: sorted(&removed),
        }
    }
}

/// One sorted stream of a graph's rows in one order: the indexes' rows fed in order, the
/// delta's added rows of the same range merged in, its removed rows left out.
pub struct Merge<'a> {
    added: &'a [Row],
    removed: &'a [Row],
}

impl<'a> Merge<'a> {
    /// A merge of the delta rows `added` and `removed` (one graph's, one order's, sorted).
    pub fn new(added: &'a [Row], removed: &'a [Row]) -> Self {
        Merge { added, removed }
    }

    /// The next row of the indexes (in order): the added rows before it, then it unless removed.
    #[inline]
    pub fn base(&mut self, key: [Id; 3], mut f: impl FnMut([Id; 3])) {
        while let Some((a, rest)) = self.added.split_first() {
            if key_of(a) >= key {
                break;
            }
            f(key_of(a));
            self.added = rest;
        }
        while let Some((r, rest)) = self.removed.split_first() {
            match key_of(r).cmp(&key) {
                std::cmp::Ordering::Less => self.removed = rest,
                std::cmp::Ordering::Equal => {
                    self.removed = rest;
                    return;
                }
                std::cmp::Ordering::Greater => break,
            }
        }
        f(key);
    }

    /// The added rows after the last row of the indexes.
    pub fn rest(&mut self, mut f: impl FnMut([Id; 3])) {
        for a in std::mem::take(&mut self.added) {
            f(key_of(a));
        }
    }
}
