//! The store: id quads in three sorted permutations (SPO, POS, OSP) per graph, each held
//! column-wise in [`SplittableData`] partitions, one per NUMA node, and the planner's statistics.
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

use crate::dict::Dict;
use crate::shared::Shared;
use crate::term::{Id, TermRef};

/// The graph id of the default graph (no term has id 0).
pub const DEFAULT_GRAPH: Id = 0;

/// A quad: subject, predicate, object and graph ([`DEFAULT_GRAPH`] or a named graph's IRI).
pub type Quad = [Id; 4];

/// A permutation: the order of the three positions in its sort key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Permutation {
    /// subject, predicate, object.
    Spo,
    /// predicate, object, subject.
    Pos,
    /// object, subject, predicate.
    Osp,
}

impl Permutation {
    /// All three, in the order the store holds them.
    pub const ALL: [Permutation; 3] = [Permutation::Spo, Permutation::Pos, Permutation::Osp];

    /// For each key column, the triple position (0 = s, 1 = p, 2 = o) it holds.
    pub fn positions(self) -> [usize; 3] {
        match self {
            Permutation::Spo => [0, 1, 2],
            Permutation::Pos => [1, 2, 0],
            Permutation::Osp => [2, 0, 1],
        }
    }

    /// The permutation whose key starts with exactly the bound positions (`bound[i]`: position
    /// `i` of s, p, o is bound), and how many key columns that prefix is.
    pub fn for_bound(bound: [bool; 3]) -> (Permutation, usize) {
        match bound {
            [false, false, false] => (Permutation::Spo, 0),
            [true, false, false] => (Permutation::Spo, 1),
            [false, true, false] => (Permutation::Pos, 1),
            [false, false, true] => (Permutation::Osp, 1),
            [true, true, false] => (Permutation::Spo, 2),
            [false, true, true] => (Permutation::Pos, 2),
            [true, false, true] => (Permutation::Osp, 2),
            [true, true, true] => (Permutation::Spo, 3),
        }
    }

    /// Its name, for plans.
    pub fn name(self) -> &'static str {
        match self {
            Permutation::Spo => "SPO",
            Permutation::Pos => "POS",
            Permutation::Osp => "OSP",
        }
    }

    /// A key of this permutation (its columns in its order) as a triple (s, p, o).
    #[inline]
    pub fn triple(self, key: [Id; 3]) -> [Id; 3] {
        let pos = self.positions();
        let mut t = [0; 3];
        for c in 0..3 {
            t[pos[c]] = key[c];
        }
        t
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// One partition of one permutation: three key columns, sorted within each graph's run (owned,
/// or slices of a mapped snapshot: [`Shared`]).
#[derive(Debug, Default)]
pub struct Columns {
    /// Key columns, in the permutation's order.
    pub cols: [Shared<Id>; 3],
    /// The row of the whole permutation this partition's first row is.
    pub first: usize,
}

impl Columns {
    /// Rows held.
    pub fn len(&self) -> usize {
        self.cols[0].len()
    }

    /// Whether it holds no row.
    pub fn is_empty(&self) -> bool {
        self.cols[0].is_empty()
    }

    /// Row `i`'s key.
    #[inline]
    pub fn row(&self, i: usize) -> [Id; 3] {
        [self.cols[0][i], self.cols[1][i], self.cols[2][i]]
    }

    /// The part of `rows` (the whole permutation's row numbers, one graph's run) this partition
    /// holds, as its own row numbers.
    pub fn local(&self, rows: &Range<usize>) -> Range<usize> {
        let lo = rows.start.max(self.first);
        let hi = rows.end.min(self.first + self.len());
        if lo >= hi {
            return 0..0;
        }
        lo - self.first..hi - self.first
    }

    /// The rows in `within` (this partition's row numbers, sorted by key: one graph's run)
    /// whose key starts with `prefix` (0 to 3 ids): a range, by binary search.
    pub fn range_in(&self, within: Range<usize>, prefix: &[Id]) -> Range<usize> {
        let cmp = |i: usize| -> std::cmp::Ordering {
            for (c, &p) in prefix.iter().enumerate() {
                match self.cols[c][i].cmp(&p) {
                    std::cmp::Ordering::Equal => {}
                    o => return o,
                }
            }
            std::cmp::Ordering::Equal
        };
        let n = within.len();
        let base = within.start;
        let lo = partition_point(n, |i| cmp(base + i) == std::cmp::Ordering::Less);
        let hi = lo
            + partition_point(n - lo, |i| {
                cmp(base + lo + i) != std::cmp::Ordering::Greater
            });
        base + lo..base + hi
    }
}

fn partition_point(n: usize, mut pred: impl FnMut(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Per-predicate statistics (the planner's), summed over the graphs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PredStats {
    /// Quads with this predicate.
    pub triples: u64,
    /// Distinct subjects among them (per graph, summed).
    pub subjects: u64,
    /// Distinct objects among them (per graph, summed).
    pub objects: u64,
}

/// Whole-store statistics: counts of distinct terms are per graph, summed over the graphs (for
/// a store of one graph, the plain counts).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Quads.
    pub triples: u64,
    /// Distinct subjects.
    pub subjects: u64,
    /// Distinct predicates (over all graphs).
    pub predicates: u64,
    /// Distinct objects.
    pub objects: u64,
    /// Per predicate, by id.
    pub per_predicate: hashbrown::HashMap<Id, PredStats>,
}

/// The in-memory store: one version of it. Cloning is cheap (the sorted indexes and the
/// dictionary are shared); a version made by an update ([`Store::edit`], `delta.rs`) shares
/// its predecessor's indexes and differs from them by a small delta.
#[derive(Clone)]
pub struct Store {
    pub(crate) dict: Arc<Dict>,
    pub(crate) base: Arc<Base>,
    /// What this version holds beyond the base and lacks of it.
    pub(crate) delta: Arc<crate::delta::Delta>,
    /// The statistics of this version (the base's, counts adjusted by the delta).
    pub(crate) stats: Stats,
    /// The graphs that hold a quad in this version, in id order.
    pub(crate) live: Vec<Id>,
}

/// The sorted indexes a store's versions share.
pub(crate) struct Base {
    pub(crate) perms: [SplittableData<Columns>; 3],
    /// Each graph that holds a quad and the row its run starts at, in graph id order; a run
    /// ends where the next starts (the last at the base's length).
    pub(crate) graphs: Vec<(Id, usize)>,
    pub(crate) stats: Stats,
    pub(crate) machine: Machine,
    /// For indexes read in place from a mapped snapshot: the background check of its
    /// sections (`mapped.rs`).
    pub(crate) health: Option<Arc<crate::mapped::Health>>,
    /// Per-node copies of the permutations, once [`Store::replicate`] has built them
    /// (`replica.rs`).
    pub(crate) replicas: std::sync::OnceLock<crate::replica::Replicas>,
}

impl Base {
    pub(crate) fn len(&self) -> usize {
        self.stats.triples as usize
    }

    /// The rows of graph `g` in every permutation.
    pub(crate) fn graph_rows(&self, g: Id) -> Range<usize> {
        match self.graphs.binary_search_by_key(&g, |&(id, _)| id) {
            Ok(i) => {
                let end = self.graphs.get(i + 1).map_or(self.len(), |&(_, s)| s);
                self.graphs[i].1..end
            }
            Err(_) => 0..0,
        }
    }
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

/// A store could not be built.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Building the partitions failed.
    #[error("building the store's partitions: {0}")]
    Split(#[from] nearflow_split::SplitError),
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
                health: None,
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
                Columns {
                    first: r.start,
                    cols: [
                        cols[0][r.clone()].to_vec().into(),
                        cols[1][r.clone()].to_vec().into(),
                        cols[2][r].to_vec().into(),
                    ],
                }
            })
        };
        Ok(Store::of_base(
            dict,
            Base {
                perms: [cut(&spo)?, cut(&pos)?, cut(&osp)?],
                graphs,
                stats,
                machine: machine.clone(),
                health: None,
                replicas: Default::default(),
            },
        ))
    }

    /// A store of indexes read in place from a mapped snapshot, and their dictionary.
    pub(crate) fn of_mapped_base(dict: Dict, base: Base) -> Store {
        Store::of_base(dict, base)
    }

    /// What the check of a mapped snapshot's sections found damaged, naming the section
    /// (`None` for a store built in memory, or one whose check found nothing so far).
    pub fn damage(&self) -> Option<&str> {
        self.base.health.as_ref().and_then(|h| h.damage())
    }

    /// The check of a mapped snapshot's sections, when the store was opened from one.
    pub fn health(&self) -> Option<&Arc<crate::mapped::Health>> {
        self.base.health.as_ref()
    }

    /// Bytes of a mapped snapshot the store reads in place (its columns and terms).
    pub fn mapped_bytes(&self) -> usize {
        let idx: usize = self
            .base
            .perms
            .iter()
            .flat_map(|p| p.partitions().iter())
            .map(|p| p.data.cols.iter().map(|c| c.mapped_bytes()).sum::<usize>())
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
        }
    }

    /// The dictionary.
    pub fn dict(&self) -> &Dict {
        &self.dict
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
    pub fn graph_rows(&self, g: Id) -> Range<usize> {
        self.base.graph_rows(g)
    }

    /// Quads of graph `g`.
    pub fn graph_len(&self, g: Id) -> u64 {
        let (added, removed) = self.delta.graph_counts(g);
        self.graph_rows(g).len() as u64 + added - removed
    }

    /// A permutation's partitions.
    pub fn perm(&self, order: Permutation) -> &SplittableData<Columns> {
        &self.base.perms[order.index()]
    }

    /// The id of a term, if the store has it.
    pub fn id_of(&self, term: TermRef<'_>) -> Option<Id> {
        self.dict.lookup(term)
    }

    /// For each partition of `order` that holds some: the rows of graph `g` whose key starts
    /// with `prefix`, as `(partition, rows)`, in the sorted indexes (the delta's are apart:
    /// [`Delta::added`](crate::delta::Delta::added), [`Delta::removed`](crate::delta::Delta::removed)).
    pub fn ranges(
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
            .map(|p| p.data.cols.iter().map(|c| c.heap_bytes()).sum::<usize>())
            .sum();
        idx + self.replica_bytes()
            + self.dict.heap_bytes()
            + self.base.graphs.capacity() * 16
            + self.delta.heap_bytes()
    }
}

/// The first `k` ids of a pattern's key in `order`.
pub fn key_prefix(order: Permutation, pattern: [Option<Id>; 3], k: usize) -> Vec<Id> {
    order.positions()[..k]
        .iter()
        .map(|&p| pattern[p].expect("bound by for_bound"))
        .collect()
}

/// The runs of equal values among `n` values sorted by them: each value and its first index.
fn runs(n: usize, value: impl Fn(usize) -> Id) -> Vec<(Id, usize)> {
    let mut out: Vec<(Id, usize)> = Vec::new();
    for i in 0..n {
        let v = value(i);
        if out.last().is_none_or(|&(last, _)| last != v) {
            out.push((v, i));
        }
    }
    out
}

/// Each row's graph, from the runs (for the statistics of a snapshot being opened).
pub(crate) fn graph_of_rows(graphs: &[(Id, usize)], n: usize) -> Vec<Id> {
    let mut out = Vec::with_capacity(n);
    for (i, &(g, start)) in graphs.iter().enumerate() {
        let end = graphs.get(i + 1).map_or(n, |&(_, s)| s);
        out.resize(out.len() + (end - start), g);
    }
    out
}

fn slice_of(n: usize, index: usize, parts: usize) -> Range<usize> {
    (n * index / parts)..(n * (index + 1) / parts)
}

fn split(
    machine: &Machine,
    sorted: &[Quad],
    order: Permutation,
) -> Result<SplittableData<Columns>, StoreError> {
    let pos = order.positions();
    let parts = nearflow_split::layout(machine, SplitBy::Node).len();
    let sorted = Arc::new(sorted);
    Ok(SplittableData::build(
        machine,
        SplitBy::Node,
        |info: &PartInfo| {
            let r = slice_of(sorted.len(), info.index, parts);
            let first = r.start;
            let rows = &sorted[r];
            let mut cols: [Vec<Id>; 3] = [
                Vec::with_capacity(rows.len()),
                Vec::with_capacity(rows.len()),
                Vec::with_capacity(rows.len()),
            ];
            for q in rows {
                for c in 0..3 {
                    cols[c].push(q[pos[c]]);
                }
            }
            Columns {
                cols: cols.map(Shared::from),
                first,
            }
        },
    )?)
}

/// Statistics by linear passes over the permutations, each read in its own order through
/// `key(i)` = `[graph, key columns…]` (no sorting: the permutations already are). A change of
/// graph starts every count afresh, so distinct counts are per graph, summed.
#[derive(Default)]
struct StatsBuilder(Stats);

impl StatsBuilder {
    /// SPO keys `[g, s, p, o]`: distinct subjects, and each predicate's distinct subjects (the
    /// distinct `(g, s, p)`).
    fn spo(&mut self, n: usize, key: impl Fn(usize) -> [Id; 4]) {
        let st = &mut self.0;
        st.triples = n as u64;
        let mut prev: Option<[Id; 4]> = None;
        for i in 0..n {
            let k = key(i);
            if prev.is_none_or(|q| q[..2] != k[..2]) {
                st.subjects += 1;
            }
            if prev.is_none_or(|q| q[..3] != k[..3]) {
                st.per_predicate.entry(k[2]).or_default().subjects += 1;
            }
            prev = Some(k);
        }
    }

    /// POS keys `[g, p, o, s]`: each predicate's quads and distinct objects.
    fn pos(&mut self, n: usize, key: impl Fn(usize) -> [Id; 4]) {
        let mut i = 0;
        while i < n {
            let gp = [key(i)[0], key(i)[1]];
            let (mut triples, mut objects) = (0u64, 0u64);
            let mut last_o = None;
            while i < n {
                let k = key(i);
                if k[..2] != gp {
                    break;
                }
                triples += 1;
                if last_o != Some(k[2]) {
                    objects += 1;
                    last_o = Some(k[2]);
                }
                i += 1;
            }
            let e = self.0.per_predicate.entry(gp[1]).or_default();
            e.triples += triples;
            e.objects += objects;
        }
    }

    /// OSP keys `[g, o, s, p]`: distinct objects.
    fn osp(&mut self, n: usize, key: impl Fn(usize) -> [Id; 4]) {
        self.0.objects = (0..n)
            .filter(|&i| i == 0 || key(i)[..2] != key(i - 1)[..2])
            .count() as u64;
    }

    fn finish(mut self) -> Stats {
        self.0.predicates = self.0.per_predicate.len() as u64;
        self.0
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
