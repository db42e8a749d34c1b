//! Per-node replicas of the sorted indexes: a placement of the store under which one request can
//! stay on one NUMA node.
//!
//! The store's permutations are split by row range over the nodes ([`Store::build`]: one
//! [`SplittableData`] partition per node), so a scan's rows lie on the node of the partition
//! they fall in and an index join's lookups search every partition: a request whose patterns
//! cover several key ranges reads every node, whichever node its tasks run on. The LAS paper
//! (§4) keeps a request's tasks on one node; the SplittableData paper places the data a task
//! reads beside it. [`Store::replicate`] does the second for read-mostly indexes: each node gets
//! a whole copy of the three permutations, built by a thread bound to that node (the
//! SplittableData build's `newAtProcessor`, so first touch and `nearflow-alloc`'s per-node
//! superblocks put its pages there), and a reader asks [`Store::part`] for a partition's rows
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

use nearflow_split::{PartInfo, SplitBy, SplittableData};

use crate::store::{Columns, Permutation, Store, StoreError};
use crate::term::Id;

/// The replicas of a store's three permutations: partition `n` of each is node `n`'s whole copy.
pub(crate) struct Replicas {
    pub(crate) perms: [SplittableData<Columns>; 3],
}

impl Replicas {
    /// Heap bytes of all the copies.
    fn heap_bytes(&self) -> usize {
        self.perms
            .iter()
            .flat_map(|p| p.partitions().iter())
            .map(|p| p.data.cols.iter().map(|c| c.heap_bytes()).sum::<usize>())
            .sum()
    }
}

/// The rows of one partition of a permutation as a reader on some node sees them: the
/// partition's own columns, or the same rows of the reader's node's replica. Row numbers are
/// the partition's (as [`Store::ranges`] gives them) either way.
#[derive(Clone, Copy, Debug)]
pub struct PartView<'a> {
    cols: &'a Columns,
    /// The row of `cols` that is the partition's row 0.
    at: usize,
    /// The partition's rows.
    len: usize,
    /// The whole permutation's row that is the partition's row 0.
    first: usize,
    /// The NUMA node the rows' memory was built on (nominal on a synthetic machine).
    node: usize,
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

/// What [`Store::replicate`] did.
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

impl Store {
    /// Gives every NUMA node of the store's machine its own copy of the three permutations,
    /// each built by a thread bound to its node, and makes [`Store::part`] read a reader's
    /// node's copy. The memory cost is the columns once more per extra node. Idempotent; the
    /// store's versions share the replicas.
    pub fn replicate(&self) -> Result<Replication, StoreError> {
        if self.base.replicas.get().is_some() {
            return Ok(Replication::Already);
        }
        let machine = &self.base.machine;
        if machine.node_count() <= 1 {
            return Ok(Replication::OneNode);
        }
        let copy = |order: Permutation| {
            let parts = self.perm(order).partitions();
            SplittableData::build(machine, SplitBy::Node, |_: &PartInfo| {
                let n: usize = parts.iter().map(|p| p.data.len()).sum();
                let cols: [Vec<Id>; 3] = std::array::from_fn(|c| {
                    let mut v = Vec::with_capacity(n);
                    for p in parts {
                        v.extend_from_slice(&p.data.cols[c]);
                    }
                    v
                });
                Columns {
                    first: 0,
                    cols: cols.map(Into::into),
                }
            })
        };
        let perms = [
            copy(Permutation::Spo)?,
            copy(Permutation::Pos)?,
            copy(Permutation::Osp)?,
        ];
        let replicas = Replicas { perms };
        let (nodes, bytes) = (replicas.perms[0].len(), replicas.heap_bytes());
        // A concurrent call may have won: its replicas are as good as these.
        Ok(match self.base.replicas.set(replicas) {
            Ok(()) => Replication::Built { nodes, bytes },
            Err(_) => Replication::Already,
        })
    }

    /// Whether the store reads per-node replicas ([`Store::replicate`]).
    pub fn is_replicated(&self) -> bool {
        self.base.replicas.get().is_some()
    }

    /// Partition `part` of `order`, as read by a task on NUMA node `node`: its node's replica's
    /// rows where the store is replicated and the node has one, else the partition itself.
    ///
    /// # Panics
    /// If `part` is not a partition of the permutation.
    #[inline]
    pub fn part(&self, order: Permutation, part: usize, node: usize) -> PartView<'_> {
        let own = &self.perm(order).partitions()[part];
        if let Some(r) = self.base.replicas.get() {
            if let Some(copy) = r.perms[order.index()].partitions().get(node) {
                return PartView {
                    cols: &copy.data,
                    at: own.data.first,
                    len: own.data.len(),
                    first: own.data.first,
                    node: copy.info.node,
                };
            }
        }
        PartView {
            cols: &own.data,
            at: 0,
            len: own.data.len(),
            first: own.data.first,
            node: own.info.node,
        }
    }

    /// Heap bytes of the replicas (0 without them).
    pub fn replica_bytes(&self) -> usize {
        self.base.replicas.get().map_or(0, Replicas::heap_bytes)
    }

    /// Where each replica was built, per permutation (`None` without replicas): the
    /// placement check reads this.
    pub fn replica_map(&self) -> Option<Vec<ReplicaPlace<'_>>> {
        self.base.replicas.get().map(|r| {
            r.perms
                .iter()
                .flat_map(|p| p.partitions().iter())
                .map(|p| {
                    (
                        p.info,
                        p.placed.clone(),
                        [
                            &p.data.cols[0][..],
                            &p.data.cols[1][..],
                            &p.data.cols[2][..],
                        ],
                    )
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict::Dict;
    use crate::term::TermRef;
    use nearflow_topo::{from_synthetic, Machine};

    fn store(machine: &Machine, n: u32) -> Store {
        let mut d = Dict::new();
        let mut id = |s: &str| d.intern(TermRef::Iri(s)).unwrap();
        let (p, q) = (id("http://p"), id("http://q"));
        let quads = (0..n)
            .map(|i| {
                let s = id(&format!("http://s{}", i % 97));
                let o = id(&format!("http://o{i}"));
                [s, if i % 3 == 0 { p } else { q }, o, crate::DEFAULT_GRAPH]
            })
            .collect();
        Store::build(machine, d, quads).unwrap()
    }

    #[test]
    fn every_node_reads_the_same_rows_from_its_own_copy() {
        let m = from_synthetic("pack:4 [numa] core:2 pu:1").unwrap();
        let s = store(&m, 5000);
        assert!(!s.is_replicated());
        let plain: Vec<Vec<[Id; 3]>> = Permutation::ALL
            .iter()
            .flat_map(|&o| (0..s.perm(o).len()).map(move |p| (o, p)))
            .map(|(o, p)| {
                let v = s.part(o, p, 0);
                (0..v.len()).map(|i| v.row(i)).collect()
            })
            .collect();
        let Replication::Built { nodes, bytes } = s.replicate().unwrap() else {
            panic!("a 4-node machine gets replicas")
        };
        assert_eq!(nodes, 4);
        assert_eq!(
            bytes,
            4 * 3 * 3 * 4 * s.len() as usize,
            "every column once per node"
        );
        assert_eq!(s.replica_bytes(), bytes);
        assert_eq!(s.replicate().unwrap(), Replication::Already);
        assert!(s.is_replicated());
        let v = s.clone();
        assert!(v.is_replicated(), "versions share the replicas");
        for node in 0..4 {
            let mut k = 0;
            for &o in &Permutation::ALL {
                for p in 0..s.perm(o).len() {
                    let view = s.part(o, p, node);
                    assert_eq!(view.node(), node, "read from the reader's node");
                    let rows: Vec<[Id; 3]> = (0..view.len()).map(|i| view.row(i)).collect();
                    assert_eq!(rows, plain[k], "{} partition {p} on node {node}", o.name());
                    // Searches give the partition's row numbers, as the partition's own do.
                    let own = &s.perm(o).partitions()[p].data;
                    let all = 0..s.len() as usize;
                    assert_eq!(view.local(&all), own.local(&all));
                    if let Some(first) = rows.first() {
                        let lo = view.local(&all);
                        assert_eq!(
                            view.range_in(lo.clone(), &first[..1]),
                            own.range_in(lo, &first[..1])
                        );
                    }
                    k += 1;
                }
            }
        }
    }

    #[test]
    fn one_node_copies_nothing_and_reads_its_partitions() {
        let m = from_synthetic("pack:1 core:2 pu:1").unwrap();
        let s = store(&m, 300);
        assert_eq!(s.replicate().unwrap(), Replication::OneNode);
        assert!(!s.is_replicated());
        assert_eq!(s.replica_bytes(), 0);
        assert_eq!(s.part(Permutation::Spo, 0, 0).len(), 300);
    }

    #[test]
    fn without_replicas_a_reader_reads_the_partition_where_it_lies() {
        let m = from_synthetic("pack:2 [numa] core:2 pu:1").unwrap();
        let s = store(&m, 1000);
        for p in 0..2 {
            for node in 0..2 {
                assert_eq!(s.part(Permutation::Pos, p, node).node(), p);
            }
        }
        s.replicate().unwrap();
        for p in 0..2 {
            for node in 0..2 {
                assert_eq!(s.part(Permutation::Pos, p, node).node(), node);
            }
        }
    }

    #[test]
    fn an_edit_shares_the_replicas_and_the_merge_builds_its_own() {
        let m = from_synthetic("pack:2 [numa] core:1 pu:1").unwrap();
        let s = store(&m, 400);
        s.replicate().unwrap();
        let mut e = s.edit();
        let x = e.intern(TermRef::Iri("http://x")).unwrap();
        e.insert([x, x, x, crate::DEFAULT_GRAPH]);
        let v = e.finish();
        assert!(v.is_replicated());
        let merged = v.merged().unwrap();
        assert!(merged.is_flat() && merged.is_replicated());
        assert_eq!(merged.replica_bytes(), 2 * 3 * 3 * 4 * 401);
        let view = merged.part(Permutation::Spo, 1, 1);
        let own = &merged.perm(Permutation::Spo).partitions()[1].data;
        assert_eq!(view.node(), 1);
        assert_eq!(
            (0..view.len()).map(|i| view.row(i)).collect::<Vec<_>>(),
            (0..own.len()).map(|i| own.row(i)).collect::<Vec<_>>()
        );
    }
}
