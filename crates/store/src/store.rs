//! The store: one version of it ([`Store`]) — the dictionary, the sorted indexes it shares with
//! its other versions (`base.rs`, in the layout of `layout.rs`: three permutations per graph,
//! column-wise in `SplittableData` partitions, one per NUMA node), its delta (`delta.rs`) and its
//! statistics; building one, counting and matching in it, its per-node copies.
//!
//! A quad is a triple and its graph: the default graph is [`DEFAULT_GRAPH`], a named graph is
//! its IRI's id. Each permutation is sorted by graph first, then by its own key, so a graph's
//! quads are one contiguous run of rows in every permutation, and the runs are the same in all
//! three (each graph holds the same quads whatever the order). The graph column is therefore not
//! stored: one table of runs ([`Store::graphs`]) gives each graph's rows, and a store with only
//! a default graph costs what a triple store did (three permutations of three 32-bit columns).
//!
//! A permutation is sorted as a whole and cut into equal contiguous slices, one per partition,
//! each slice copied on a thread bound to its node (first touch, or `nearflow-alloc`'s node
//! pools: see `nearflow-split`). A scan of a key range in one graph intersects the graph's run
//! with each partition's slice and binary-searches the key there (a few comparisons each),
//! reading only the partitions that hold part of it; the query engine runs each partition's scan
//! as a source operator homed on the partition's node (`PlanBuilder::home`).

use std::ops::Range;
use std::sync::Arc;

use nearflow_split::{PartInfo, SplitBy, SplittableData};
use nearflow_topo::Machine;

use crate::base::Base;
use crate::delta::Delta;
use crate::dict::Dict;
use crate::health::Health;
use crate::layout::{graph_of_rows, runs, slice_of, split, StatsBuilder};
pub use crate::layout::{
    key_prefix, Columns, Permutation, PredStats, Quad, Stats, StoreError, DEFAULT_GRAPH,
};
use crate::replica::{PartView, ReplicaPlace, Replicas, Replication};
use crate::term::{Id, TermRef};

/// The in-memory store: one version of it. Cloning is cheap (the sorted indexes and the
/// dictionary are shared); a version made by an update ([`Store::edit`], `delta.rs`) shares
/// its predecessor's indexes and differs from them by a small delta.
#[derive(Clone)]
pub struct Store {
    pub(crate) dict: Arc<Dict>,
    pub(crate) base: Arc<Base>,
    /// What this version holds beyond the base and lacks of it.
    pub(crate) delta: Arc<Delta>,
    /// The statistics of this version (the base's, counts adjusted by the delta).
    pub(crate) stats: Stats,
    /// The graphs that hold a quad in this version, in id order.
    pub(crate) live: Vec<Id>,
    /// For indexes read in place from a mapped snapshot: the background check of its
    /// sections (`snapshot/mapped.rs`), shared by the versions over those indexes.
    pub(crate) health: Option<Arc<Health>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("quads", &self.stats.triples)
            .field("graphs", &self.live.len())
            .field("terms", &self.dict.len())
            .field("partitions", &self.base.perms[0].len())
            .field("delta", &self.delta)
            .finish()
    }
}

impl Store {
    /// Builds the store from a dictionary and id quads (any order, duplicates allowed: a graph
    /// is a set) for `machine`: one partition per NUMA node.
    pub fn build(machine: &Machine, dict: Dict, mut quads: Vec<Quad>) -> Result<Self, StoreError> {
        // Graph first, then the permutation's key.
        let key = |order: Permutation| {
            let p = order.positions();
            move |q: &Quad| [q[3], q[p[0]], q[p[1]], q[p[2]]]
        };
        quads.sort_unstable_by_key(key(Permutation::Spo));
        quads.dedup();
        let graphs = runs(quads.len(), |i| quads[i][3]);
        let mut stats = StatsBuilder::default();
        let spo = {
            let k = key(Permutation::Spo);
            stats.spo(quads.len(), |i| k(&quads[i]));
            split(machine, &quads, Permutation::Spo)?
        };
        let pos = {
            let k = key(Permutation::Pos);
            quads.sort_unstable_by_key(k);
            stats.pos(quads.len(), |i| k(&quads[i]));
            split(machine, &quads, Permutation::Pos)?
        };
        let osp = {
            let k = key(Permutation::Osp);
            quads.sort_unstable_by_key(k);
            stats.osp(quads.len(), |i| k(&quads[i]));
            split(machine, &quads, Permutation::Osp)?
        };
        Ok(Store::of_base(
            dict,
            Base {
                perms: [spo, pos, osp],
                graphs,
                stats: stats.finish(),
                machine: machine.clone(),
                replicas: Default::default(),
            },
        ))
    }

    /// Rebuilds a store from its permutations' columns (the snapshot), which must be sorted by
    /// graph and key: `perms[o]` holds permutation `Permutation::ALL[o]`'s key columns, whole;
    /// `graphs` each graph's run start, as [`Store::graphs`] gives them.
    pub(crate) fn from_sorted(
        machine: &Machine,
        dict: Dict,
        perms: [[Vec<Id>; 3]; 3],
        graphs: Vec<(Id, usize)>,
    ) -> Result<Self, StoreError> {
        let [spo, pos, osp] = perms;
        let n = spo[0].len();
        let graph_at = graph_of_rows(&graphs, n);
        let mut stats = StatsBuilder::default();
        stats.spo(n, |i| [graph_at[i], spo[0][i], spo[1][i], spo[2][i]]);
        stats.pos(n, |i| [graph_at[i], pos[0][i], pos[1][i], pos[2][i]]);
        stats.osp(n, |i| [graph_at[i], osp[0][i], osp[1][i], osp[2][i]]);
        drop(graph_at);
        let stats = stats.finish();
        let cut = |cols: &[Vec<Id>; 3]| {
            SplittableData::build(machine, SplitBy::Node, |info: &PartInfo| {
                let parts = nearflow_split::layout(machine, SplitBy::Node).len();
                let r = slice_of(cols[0].len(), info.index, parts);
                Columns::plain(
                    [
                        cols[0][r.clone()].to_vec().into(),
                        cols[1][r.clone()].to_vec().into(),
                        cols[2][r.clone()].to_vec().into(),
                    ],
                    r.start,
                )
            })
        };
        Ok(Store::of_base(
            dict,
            Base {
                perms: [cut(&spo)?, cut(&pos)?, cut(&osp)?],
                graphs,
                stats,
                machine: machine.clone(),
                replicas: Default::default(),
            },
        ))
    }

    /// A store over a format's own rows (`rows[o]` permutation `Permutation::ALL[o]`'s, whole,
    /// sorted by graph and key; `graphs` each graph's first row, as [`Store::graphs`] gives
    /// them), read through [`PermutationRows`](crate::layout::PermutationRows): each
    /// permutation cut into one partition per NUMA node, as every store is. `stats` are the
    /// format's when it keeps them, else counted in one pass over each permutation.
    ///
    /// # Errors
    /// When the permutations' counts of rows differ, the graph table does not fit them, or
    /// the partitions cannot be built.
    pub fn of_rows(
        machine: &Machine,
        dict: Dict,
        rows: [Arc<dyn crate::layout::PermutationRows>; 3],
        graphs: Vec<(Id, usize)>,
        stats: Option<Stats>,
    ) -> Result<Self, StoreError> {
        let n = rows[0].len();
        if rows.iter().any(|r| r.len() != n) {
            let counts: Vec<usize> = rows.iter().map(|r| r.len()).collect();
            return Err(StoreError::Rows(format!(
                "the permutations hold {counts:?} rows"
            )));
        }
        let table_fits = graphs.first().is_none_or(|&(_, at)| at == 0)
            && graphs
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1)
            && graphs.last().is_none_or(|&(_, at)| at < n)
            && graphs.iter().all(|&(g, _)| g as usize <= dict.len())
            && (n == 0 || !graphs.is_empty());
        if !table_fits {
            return Err(StoreError::Rows(format!(
                "a graph table of {} graphs does not cut {n} rows",
                graphs.len()
            )));
        }
        let stats = match stats {
            Some(stats) => stats,
            None => {
                let graph_at = graph_of_rows(&graphs, n);
                let key = |r: &Arc<dyn crate::layout::PermutationRows>, i: usize| {
                    let k = r.row(i);
                    [graph_at[i], k[0], k[1], k[2]]
                };
                let mut stats = StatsBuilder::default();
                stats.spo(n, |i| key(&rows[0], i));
                stats.pos(n, |i| key(&rows[1], i));
                stats.osp(n, |i| key(&rows[2], i));
                stats.finish()
            }
        };
        let parts = nearflow_split::layout(machine, SplitBy::Node).len().max(1);
        let cut = |rows: &Arc<dyn crate::layout::PermutationRows>| {
            SplittableData::build(machine, SplitBy::Node, |info: &PartInfo| {
                let r = slice_of(n, info.index, parts);
                Columns::of_format(rows.clone(), r)
            })
        };
        let [spo, pos, osp] = &rows;
        Ok(Store::of_base(
            dict,
            Base {
                perms: [cut(spo)?, cut(pos)?, cut(osp)?],
                graphs,
                stats,
                machine: machine.clone(),
                replicas: Default::default(),
            },
        ))
    }

    /// A store of indexes read in place from a mapped snapshot, and their dictionary.
    pub(crate) fn of_mapped_base(dict: Dict, base: Base, health: Arc<Health>) -> Store {
        Store {
            health: Some(health),
            ..Store::of_base(dict, base)
        }
    }

    /// What the check of a mapped snapshot's sections found damaged, naming the section
    /// (`None` for a store built in memory, or one whose check found nothing so far).
    pub fn damage(&self) -> Option<&str> {
        self.health.as_ref().and_then(|h| h.damage())
    }

    /// [`damage`](Self::damage), once every read so far is known checked: for a snapshot
    /// checked in the background (format 3), after that check has ended.
    pub fn settled_damage(&self) -> Option<&str> {
        self.health.as_ref().and_then(|h| h.settled())
    }

    /// The check of a mapped snapshot's sections, when the store was opened from one.
    pub fn health(&self) -> Option<&Arc<Health>> {
        self.health.as_ref()
    }

    /// For indexes packed in a format-4 snapshot, checked chunk by chunk as they are read: how
    /// many chunks of the three permutations have been read (and checked) so far, of how many.
    pub fn chunks_read(&self) -> Option<(usize, usize)> {
        let mut seen = std::collections::HashSet::new();
        let mut out: Option<(usize, usize)> = None;
        for p in self.base.perms.iter().flat_map(|p| p.partitions().iter()) {
            if let crate::layout::PartRows::Packed { rows, .. } = &p.data.rows {
                if seen.insert(Arc::as_ptr(rows)) {
                    let (c, t) = rows.checked();
                    let o = out.get_or_insert((0, 0));
                    *o = (o.0 + c, o.1 + t);
                }
            }
        }
        out
    }

    /// Bytes of a mapped snapshot the store reads in place (its columns and terms).
    pub fn mapped_bytes(&self) -> usize {
        let idx: usize = self
            .base
            .perms
            .iter()
            .flat_map(|p| p.partitions().iter())
            .map(|p| p.data.mapped_bytes())
            .sum();
        idx + self.dict.mapped_bytes()
    }

    /// A store of one base and no delta.
    fn of_base(dict: Dict, base: Base) -> Store {
        Store {
            dict: Arc::new(dict),
            stats: base.stats.clone(),
            live: base.graphs.iter().map(|&(g, _)| g).collect(),
            base: Arc::new(base),
            delta: Arc::default(),
            health: None,
        }
    }

    /// The dictionary.
    pub fn dict(&self) -> &Dict {
        &self.dict
    }

    /// The sorted indexes and the dictionary this version shares with the versions made from
    /// it (whether two versions lie over the same files is whether these are the same).
    pub fn shared(&self) -> (&Arc<Base>, &Arc<Dict>) {
        (&self.base, &self.dict)
    }

    /// The statistics.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The machine the partitions were built for.
    pub fn machine(&self) -> &Machine {
        &self.base.machine
    }

    /// Number of quads (triples of the default graph and of every named graph).
    pub fn len(&self) -> u64 {
        self.stats.triples
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.stats.triples == 0
    }

    /// Each graph that holds a quad in the sorted indexes ([`DEFAULT_GRAPH`] first when it
    /// does) and the row its run starts at in every permutation. A version with a delta
    /// ([`Store::delta`]) may hold other graphs: [`Store::graph_ids`] lists those.
    pub fn graphs(&self) -> &[(Id, usize)] {
        &self.base.graphs
    }

    /// The graphs that hold a quad in this version, in id order.
    pub fn graph_ids(&self) -> &[Id] {
        &self.live
    }

    /// The named graphs that hold a quad, in id order.
    pub fn named_graphs(&self) -> impl Iterator<Item = Id> + '_ {
        self.live.iter().copied().filter(|&g| g != DEFAULT_GRAPH)
    }

    /// The rows of graph `g` in every permutation of the sorted indexes (empty when they hold
    /// nothing of it; the delta's quads are apart).
    pub(crate) fn graph_rows(&self, g: Id) -> Range<usize> {
        self.base.graph_rows(g)
    }

    /// Quads of graph `g`.
    pub fn graph_len(&self, g: Id) -> u64 {
        let (added, removed) = self.delta.graph_counts(g);
        self.graph_rows(g).len() as u64 + added - removed
    }

    /// A permutation's partitions.
    pub(crate) fn perm(&self, order: Permutation) -> &SplittableData<Columns> {
        &self.base.perms[order.index()]
    }

    /// The id of a term, if the store has it.
    pub fn id_of(&self, term: TermRef<'_>) -> Option<Id> {
        self.dict.lookup(term)
    }

    /// For each partition of `order` that holds some: the rows of graph `g` whose key starts
    /// with `prefix`, as `(partition, rows)`, in the sorted indexes (the delta's are apart:
    /// [`Delta::added`](crate::delta::Delta::added), [`Delta::removed`](crate::delta::Delta::removed)).
    pub(crate) fn ranges(
        &self,
        order: Permutation,
        g: Id,
        prefix: &[Id],
    ) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
        let rows = self.graph_rows(g);
        let prefix = prefix.to_vec();
        self.perm(order)
            .partitions()
            .iter()
            .enumerate()
            .filter_map(move |(i, p)| {
                let local = p.data.local(&rows);
                if local.is_empty() {
                    return None;
                }
                let r = p.data.range_in(local, &prefix);
                (!r.is_empty()).then_some((i, r))
            })
    }

    /// Triples of graph `g` matching a pattern (`None` = any), exactly, by binary search.
    pub fn count_in(&self, g: Id, pattern: [Option<Id>; 3]) -> u64 {
        let (order, k) = Permutation::for_bound(pattern.map(|x| x.is_some()));
        let prefix = key_prefix(order, pattern, k);
        let base: u64 = self
            .ranges(order, g, &prefix)
            .map(|(_, r)| r.len() as u64)
            .sum();
        base + self.delta.added(order, g, &prefix).len() as u64
            - self.delta.removed(order, g, &prefix).len() as u64
    }

    /// [`count_in`](Self::count_in) the default graph.
    pub fn count(&self, pattern: [Option<Id>; 3]) -> u64 {
        self.count_in(DEFAULT_GRAPH, pattern)
    }

    /// Every triple of graph `g` matching a pattern, in the chosen permutation's order (for
    /// tests and small lookups; the engine scans partition by partition).
    pub fn matches_in(&self, g: Id, pattern: [Option<Id>; 3]) -> Vec<[Id; 3]> {
        let mut out = Vec::new();
        self.for_each_match(g, pattern, |t| out.push(t));
        out
    }

    /// [`matches_in`](Self::matches_in) the default graph.
    pub fn matches(&self, pattern: [Option<Id>; 3]) -> Vec<[Id; 3]> {
        self.matches_in(DEFAULT_GRAPH, pattern)
    }

    /// Calls `f` with every triple of graph `g` matching a pattern, in the chosen permutation's
    /// order, without collecting them (nothing is allocated: a property path's walk calls it
    /// once per step).
    pub fn for_each_match(&self, g: Id, pattern: [Option<Id>; 3], mut f: impl FnMut([Id; 3])) {
        let (order, k) = Permutation::for_bound(pattern.map(|x| x.is_some()));
        let mut prefix = [0; 3];
        for (i, &pos) in order.positions()[..k].iter().enumerate() {
            prefix[i] = pattern[pos].expect("bound by for_bound");
        }
        let rows = self.graph_rows(g);
        let prefix = &prefix[..k];
        let (added, removed) = (
            self.delta.added(order, g, prefix),
            self.delta.removed(order, g, prefix),
        );
        let mut merge = crate::delta::Merge::new(added, removed);
        for p in self.perm(order).partitions() {
            let local = p.data.local(&rows);
            if local.is_empty() {
                continue;
            }
            for i in p.data.range_in(local, prefix) {
                merge.base(p.data.row(i), |key| f(order.triple(key)));
            }
        }
        merge.rest(|key| f(order.triple(key)));
    }

    /// Every quad, graph by graph (for tests and exports).
    pub fn quads(&self) -> Vec<Quad> {
        let mut out = Vec::with_capacity(self.len() as usize);
        for &g in &self.live {
            self.for_each_match(g, [None; 3], |t| out.push([t[0], t[1], t[2], g]));
        }
        out
    }

    /// Its dictionary (one level: see [`Dict::flattened`]) and its quads (graph by graph),
    /// e.g. to build a larger store.
    pub fn into_parts(self) -> (Dict, Vec<Quad>) {
        let quads = self.quads();
        let dict = match Arc::try_unwrap(self.dict) {
            Ok(d) if d.under().is_none() => d,
            Ok(d) => d.flattened(),
            Err(shared) => shared.flattened(),
        };
        (dict, quads)
    }

    /// Resident bytes of the dictionary, the indexes and the delta (capacity, not length).
    pub fn heap_bytes(&self) -> usize {
        let idx: usize = self
            .base
            .perms
            .iter()
            .flat_map(|p| p.partitions().iter())
            .map(|p| p.data.heap_bytes())
            .sum();
        idx + self.replica_bytes()
            + self.dict.heap_bytes()
            + self.base.graphs.capacity() * 16
            + self.delta.heap_bytes()
    }
}

/// The per-node copies of the permutations (`replica.rs`) as a version reads them.
impl Store {
    /// Gives every NUMA node of the store's machine its own copy of the three permutations,
    /// each built by a thread bound to its node, and makes `Store::part` read a reader's
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
                        v.extend_from_slice(&p.data.column(c));
                    }
                    v
                });
                Columns::plain(cols.map(Into::into), 0)
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
    pub(crate) fn part(&self, order: Permutation, part: usize, node: usize) -> PartView<'_> {
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

    /// Whether every replica's pages lie on the node it was built for (its thread was bound
    /// there, and the kernel says where each page is): the verdict, and a line per replica
    /// that is not. Vacuously true without replicas.
    pub fn replicas_on_their_nodes(&self) -> std::io::Result<(bool, Vec<String>)> {
        let (mut ok, mut detail) = (true, Vec::new());
        for (info, placed, cols) in self.replica_map().unwrap_or_default() {
            // Pages per node, column by column.
            let mut census: Vec<(i32, usize)> = Vec::new();
            for c in cols {
                census.extend(nearflow_alloc::checks::page_census(
                    c.as_ptr().cast(),
                    std::mem::size_of_val(c),
                )?);
            }
            let right = placed == nearflow_split::Placed::Bound
                && census.iter().all(|&(n, _)| n == info.node as i32);
            ok &= right;
            if !right {
                detail.push(format!(
                    "replica of node {}: {placed:?}, pages per node {census:?}",
                    info.node
                ));
            }
        }
        Ok((ok, detail))
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
                    let cols = p.data.plain_columns().expect("replicas are plain columns");
                    (
                        p.info,
                        p.placed.clone(),
                        [&cols[0][..], &cols[1][..], &cols[2][..]],
                    )
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quads of the default graph and of two named graphs, one duplicate.
    fn tiny() -> (Store, [Id; 7]) {
        let mut d = Dict::new();
        let mut id = |s: &str| d.intern(TermRef::Iri(s)).unwrap();
        let ids = [
            id("a"),
            id("b"),
            id("c"),
            id("p"),
            id("q"),
            id("g1"),
            id("g2"),
        ];
        let [a, b, c, p, q, g1, g2] = ids;
        let quads = vec![
            [a, p, b, DEFAULT_GRAPH],
            [a, p, c, DEFAULT_GRAPH],
            [b, p, c, DEFAULT_GRAPH],
            [a, q, a, DEFAULT_GRAPH],
            [a, p, b, DEFAULT_GRAPH],
            [a, p, b, g1],
            [c, q, a, g1],
            [b, p, a, g2],
        ];
        let m = nearflow_topo::presets::build("nehalem-2x4").unwrap();
        (Store::build(&m, d, quads).unwrap(), ids)
    }

    #[test]
    fn counts_and_matches_agree_with_a_scan_in_every_graph() {
        let (s, [a, b, c, p, q, g1, g2]) = tiny();
        assert_eq!(s.len(), 7, "the duplicate is dropped");
        assert_eq!(s.perm(Permutation::Spo).len(), 2, "one partition per node");
        assert_eq!(s.named_graphs().collect::<Vec<_>>(), [g1, g2]);
        assert_eq!(
            s.graphs().iter().map(|&(g, _)| g).collect::<Vec<_>>(),
            [DEFAULT_GRAPH, g1, g2]
        );
        assert_eq!(s.graph_len(DEFAULT_GRAPH), 4);
        assert_eq!(s.graph_len(g1), 2);
        assert_eq!(s.graph_len(a), 0, "not a graph");
        let all = s.quads();
        assert_eq!(all.len(), 7);
        for g in [DEFAULT_GRAPH, g1, g2, a] {
            for sb in [None, Some(a), Some(b), Some(c)] {
                for pb in [None, Some(p), Some(q)] {
                    for ob in [None, Some(a), Some(b), Some(c)] {
                        let pat = [sb, pb, ob];
                        let mut want: Vec<[Id; 3]> = all
                            .iter()
                            .filter(|x| {
                                x[3] == g && (0..3).all(|i| pat[i].is_none_or(|v| x[i] == v))
                            })
                            .map(|x| [x[0], x[1], x[2]])
                            .collect();
                        want.sort();
                        assert_eq!(s.count_in(g, pat), want.len() as u64, "{g} {pat:?}");
                        let mut got = s.matches_in(g, pat);
                        got.sort();
                        assert_eq!(got, want, "{g} {pat:?}");
                    }
                }
            }
        }
        assert_eq!(s.matches([None; 3]), s.matches_in(DEFAULT_GRAPH, [None; 3]));
        let ps = s.stats().per_predicate[&p];
        // p: default graph (a p b), (a p c), (b p c); g1 (a p b); g2 (b p a).
        assert_eq!(
            ps,
            PredStats {
                triples: 5,
                subjects: 2 + 1 + 1,
                objects: 2 + 1 + 1
            }
        );
    }

    /// A graph's run may be cut by a partition boundary: every partition answers for its part.
    #[test]
    fn a_graph_cut_by_partitions_reads_whole() {
        let mut d = Dict::new();
        let ids: Vec<Id> = (0..40)
            .map(|i| d.intern(TermRef::Iri(&format!("t{i}"))).unwrap())
            .collect();
        let m = nearflow_topo::from_synthetic("pack:4 [numa] core:1 pu:1").unwrap();
        let mut quads = Vec::new();
        for i in 0..60usize {
            // Graphs of 1, 5 and 54 quads, and the default graph.
            let g = match i {
                0 => ids[30],
                1..=5 => ids[31],
                6..=20 => DEFAULT_GRAPH,
                _ => ids[32],
            };
            quads.push([ids[i % 7], ids[7 + i % 3], ids[10 + i % 11], g]);
        }
        let s = Store::build(&m, d, quads.clone()).unwrap();
        quads.sort();
        quads.dedup();
        for g in [DEFAULT_GRAPH, ids[30], ids[31], ids[32]] {
            for order in Permutation::ALL {
                let n: usize = s.ranges(order, g, &[]).map(|(_, r)| r.len()).sum();
                assert_eq!(
                    n,
                    quads.iter().filter(|q| q[3] == g).count(),
                    "{g} {order:?}"
                );
            }
            let mut got = s.matches_in(g, [None, Some(ids[8]), None]);
            got.sort();
            let want: Vec<[Id; 3]> = quads
                .iter()
                .filter(|q| q[3] == g && q[1] == ids[8])
                .map(|q| [q[0], q[1], q[2]])
                .collect();
            assert_eq!(got, want, "graph {g}");
        }
    }

    /// The statistics of linear passes equal brute-force counts per graph, summed, built from
    /// quads and from sorted columns (the snapshot's path).
    #[test]
    fn statistics_equal_brute_force_counts() {
        use std::collections::{BTreeMap, BTreeSet};
        let dict = || {
            let mut d = Dict::new();
            let ids: Vec<Id> = (0..12)
                .map(|i| d.intern(TermRef::Iri(&format!("t{i}"))).unwrap())
                .collect();
            (d, ids)
        };
        let (d, ids) = dict();
        let mut x = 7u64;
        let mut next = |n: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ids[(x >> 33) as usize % n]
        };
        let graphs = [DEFAULT_GRAPH, ids[10], ids[11]];
        let quads: Vec<Quad> = (0..400)
            .map(|i| [next(12), next(4), next(12), graphs[i % 3]])
            .collect();
        let set: BTreeSet<Quad> = quads.iter().copied().collect();
        let m = nearflow_topo::presets::build("nehalem-2x4").unwrap();
        type Per = (BTreeSet<(Id, Id)>, BTreeSet<(Id, Id)>, u64);
        let mut per: BTreeMap<Id, Per> = BTreeMap::new();
        for t in &set {
            let e = per.entry(t[1]).or_default();
            e.0.insert((t[3], t[0]));
            e.1.insert((t[3], t[2]));
            e.2 += 1;
        }
        let check = |st: &Stats| {
            assert_eq!(st.triples, set.len() as u64);
            let distinct = |c: usize| {
                set.iter()
                    .map(|t| (t[3], t[c]))
                    .collect::<BTreeSet<_>>()
                    .len() as u64
            };
            assert_eq!(st.subjects, distinct(0));
            assert_eq!(
                st.predicates,
                set.iter().map(|t| t[1]).collect::<BTreeSet<_>>().len() as u64
            );
            assert_eq!(st.objects, distinct(2));
            for (p, (subjects, objects, n)) in &per {
                let want = PredStats {
                    triples: *n,
                    subjects: subjects.len() as u64,
                    objects: objects.len() as u64,
                };
                assert_eq!(st.per_predicate[p], want, "predicate {p}");
            }
        };
        let built = Store::build(&m, d, quads).unwrap();
        check(built.stats());
        let mut sorted: Vec<Quad> = set.iter().copied().collect();
        let mut cols = |key: fn(&Quad) -> [Id; 3]| {
            sorted.sort_unstable_by_key(|q| (q[3], key(q)));
            let k: Vec<[Id; 3]> = sorted.iter().map(key).collect();
            [0, 1, 2].map(|c| k.iter().map(|r| r[c]).collect::<Vec<Id>>())
        };
        let perms = [
            cols(|t| [t[0], t[1], t[2]]),
            cols(|t| [t[1], t[2], t[0]]),
            cols(|t| [t[2], t[0], t[1]]),
        ];
        let runs = built.graphs().to_vec();
        check(
            Store::from_sorted(&m, dict().0, perms, runs)
                .unwrap()
                .stats(),
        );
    }
}

#[cfg(test)]
mod replica_tests {
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
