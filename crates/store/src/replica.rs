//! Per-node replicas of the sorted indexes: a placement of the store under which one request can
//! stay on one NUMA node.
//!
//! The store's permutations are split by row range over the nodes (`Store::build`: one
//! [`SplittableData`] partition per node), so a scan's rows lie on the node of the partition
//! they fall in and an index join's lookups search every partition: a request whose patterns
//! cover several key ranges reads every node, whichever node its tasks run on. The LAS paper
//! (§4) keeps a request's tasks on one node; the SplittableData paper places the data a task
//! reads beside it. `Store::replicate` does the second for read-mostly indexes: each node gets
//! a whole copy of the three permutations, built by a thread bound to that node (the
//! SplittableData build's `newAtProcessor`, so first touch and `nearflow-alloc`'s per-node
//! superblocks put its pages there), and a reader asks `Store::part` for a partition's rows
//! *as read on its node*: the same row numbers, served from its node's replica.
//!
//! The cost is memory: the columns once more per extra node (12 bytes a quad per permutation,
//! 36 a quad for the three). The simulator chose it (`nearflow sim --store-placement
//! replicated`); the placement check (`nearflow check placement`, and so the two-node QEMU
//! guest) checks that each replica's pages are on its node and that a query's reads stay on
//! the node that runs them.
//!
//! A version made by an update shares its base's replicas (the delta is read apart, as
//! before); the background merge's new indexes are replicated again when the old ones were.

use std::ops::Range;

use nearflow_split::{PartInfo, SplittableData};

use crate::layout::Columns;
use crate::term::Id;

/// The replicas of a store's three permutations: partition `n` of each is node `n`'s whole copy.
pub(crate) struct Replicas {
    pub(crate) perms: [SplittableData<Columns>; 3],
}

impl Replicas {
    /// Heap bytes of all the copies.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.perms
            .iter()
            .flat_map(|p| p.partitions().iter())
            .map(|p| p.data.heap_bytes())
            .sum()
    }
}

/// The rows of one partition of a permutation as a reader on some node sees them: the
/// partition's own columns, or the same rows of the reader's node's replica. Row numbers are
/// the partition's (as `Store::ranges` gives them) either way.
#[derive(Clone, Copy, Debug)]
pub struct PartView<'a> {
    pub(crate) cols: &'a Columns,
    /// The row of `cols` that is the partition's row 0.
    pub(crate) at: usize,
    /// The partition's rows.
    pub(crate) len: usize,
    /// The whole permutation's row that is the partition's row 0.
    pub(crate) first: usize,
    /// The NUMA node the rows' memory was built on (nominal on a synthetic machine).
    pub(crate) node: usize,
}

impl<'a> PartView<'a> {
    /// Rows of the partition.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the partition holds no row.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The node whose memory the rows are read from.
    pub fn node(&self) -> usize {
        self.node
    }

    /// Row `i`'s key (a partition row number).
    #[inline]
    pub fn row(&self, i: usize) -> [Id; 3] {
        debug_assert!(i < self.len, "row {i} of a partition of {}", self.len);
        self.cols.row(self.at + i)
    }

    /// Key column `c` of rows `range` (partition row numbers), in order, to `f` until it
    /// returns false (then false), as [`Columns::for_each_value`].
    #[inline]
    pub fn for_each_value(&self, c: usize, range: Range<usize>, f: impl FnMut(Id) -> bool) -> bool {
        debug_assert!(
            range.end <= self.len,
            "rows {range:?} of a partition of {}",
            self.len
        );
        self.cols
            .for_each_value(c, range.start + self.at..range.end + self.at, f)
    }

    /// The part of `rows` (whole-permutation row numbers) the partition holds, as its own row
    /// numbers (as [`Columns::local`]).
    pub fn local(&self, rows: &Range<usize>) -> Range<usize> {
        let lo = rows.start.max(self.first);
        let hi = rows.end.min(self.first + self.len);
        if lo >= hi {
            return 0..0;
        }
        lo - self.first..hi - self.first
    }

    /// The rows in `within` (partition row numbers, one graph's run) whose key starts with
    /// `prefix`, by binary search (as [`Columns::range_in`]).
    pub fn range_in(&self, within: Range<usize>, prefix: &[Id]) -> Range<usize> {
        let r = self
            .cols
            .range_in(within.start + self.at..within.end + self.at, prefix);
        r.start - self.at..r.end - self.at
    }
}

/// One replica of one permutation as the placement check sees it: where it was meant to be,
/// whether its building thread was bound there, and its three columns.
pub type ReplicaPlace<'a> = (PartInfo, nearflow_split::Placed, [&'a [Id]; 3]);

/// What `Store::replicate` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replication {
    /// Each node now holds a copy of every permutation: this many bytes in all.
    Built { nodes: usize, bytes: usize },
    /// The store already had its replicas.
    Already,
    /// The machine has one NUMA node: its one partition per permutation is already the whole
    /// index on the only node, and nothing was copied.
    OneNode,
}
