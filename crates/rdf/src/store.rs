//! The store: id triples in three sorted permutations (SPO, POS, OSP), each held column-wise in
//! [`SplittableData`] partitions, one per NUMA node, and the planner's statistics.
//!
//! A permutation is sorted as a whole and cut into equal contiguous slices, one per partition,
//! each slice copied on a thread bound to its node (first touch, or `nearflow-alloc`'s node
//! pools: see `nearflow-split`). A scan of a key range binary-searches every partition (a few
//! comparisons each) and reads only those that hold part of the range; the query engine runs each
//! partition's scan as a source operator homed on the partition's node (`PlanBuilder::home`).
//!
//! Length: the last 50 lines are unit tests; the rest is the store's one concept (permutations,
//! scans, statistics).

use std::sync::Arc;

use nearflow_split::{PartInfo, SplitBy, SplittableData};
use nearflow_topo::Machine;

use crate::dict::Dict;
use crate::term::{Id, TermRef};

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

    fn index(self) -> usize {
        self as usize
    }
}

/// One partition of one permutation: three key columns, sorted together.
#[derive(Debug, Default)]
pub struct Columns {
    /// Key columns, in the permutation's order.
    pub cols: [Vec<Id>; 3],
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

    /// The rows whose key starts with `prefix` (0 to 3 ids): a range, by binary search.
    pub fn range(&self, prefix: &[Id]) -> std::ops::Range<usize> {
        let k = prefix.len();
        let cmp = |i: usize| -> std::cmp::Ordering {
            for (c, &p) in prefix.iter().enumerate().take(k) {
                match self.cols[c][i].cmp(&p) {
                    std::cmp::Ordering::Equal => {}
                    o => return o,
                }
            }
            std::cmp::Ordering::Equal
        };
        let n = self.len();
        let lo = partition_point(n, |i| cmp(i) == std::cmp::Ordering::Less);
        let hi = lo + partition_point(n - lo, |i| cmp(lo + i) != std::cmp::Ordering::Greater);
        lo..hi
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

/// Per-predicate statistics (the planner's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PredStats {
    /// Triples with this predicate.
    pub triples: u64,
    /// Distinct subjects among them.
    pub subjects: u64,
    /// Distinct objects among them.
    pub objects: u64,
}

/// Whole-store statistics.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Triples.
    pub triples: u64,
    /// Distinct subjects, predicates and objects.
    pub subjects: u64,
    /// Distinct predicates.
    pub predicates: u64,
    /// Distinct objects.
    pub objects: u64,
    /// Per predicate, by id.
    pub per_predicate: hashbrown::HashMap<Id, PredStats>,
}

/// The in-memory store.
pub struct Store {
    dict: Dict,
    perms: [SplittableData<Columns>; 3],
    stats: Stats,
    machine: Machine,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("triples", &self.stats.triples)
            .field("terms", &self.dict.len())
            .field("partitions", &self.perms[0].len())
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
    /// Builds the store from a dictionary and id triples (any order, duplicates allowed: an RDF
    /// graph is a set) for `machine`: one partition per NUMA node.
    pub fn build(
        machine: &Machine,
        dict: Dict,
        mut triples: Vec<[Id; 3]>,
    ) -> Result<Self, StoreError> {
        triples.sort_unstable();
        triples.dedup();
        let mut stats = StatsBuilder::default();
        stats.spo(triples.len(), |i| triples[i]);
        let spo = split(machine, &triples, Permutation::Spo)?;
        let mut t = triples;
        let pos = {
            t.sort_unstable_by_key(|x| [x[1], x[2], x[0]]);
            stats.pos(t.len(), |i| [t[i][1], t[i][2], t[i][0]]);
            split(machine, &t, Permutation::Pos)?
        };
        let osp = {
            t.sort_unstable_by_key(|x| [x[2], x[0], x[1]]);
            stats.osp(t.len(), |i| [t[i][2], t[i][0], t[i][1]]);
            split(machine, &t, Permutation::Osp)?
        };
        Ok(Store {
            dict,
            perms: [spo, pos, osp],
            stats: stats.finish(),
            machine: machine.clone(),
        })
    }

    /// Rebuilds a store from its permutations' columns (the snapshot), which must be sorted:
    /// `parts[o]` holds permutation `Permutation::ALL[o]`'s key columns, whole.
    pub(crate) fn from_sorted(
        machine: &Machine,
        dict: Dict,
        perms: [[Vec<Id>; 3]; 3],
    ) -> Result<Self, StoreError> {
        let [spo, pos, osp] = perms;
        let mut stats = StatsBuilder::default();
        stats.spo(spo[0].len(), |i| [spo[0][i], spo[1][i], spo[2][i]]);
        stats.pos(pos[0].len(), |i| [pos[0][i], pos[1][i], pos[2][i]]);
        stats.osp(osp[0].len(), |i| [osp[0][i], osp[1][i], osp[2][i]]);
        let stats = stats.finish();
        let cut = |cols: &[Vec<Id>; 3]| {
            SplittableData::build(machine, SplitBy::Node, |info: &PartInfo| {
                let parts = nearflow_split::layout(machine, SplitBy::Node).len();
                let r = slice_of(cols[0].len(), info.index, parts);
                Columns {
                    cols: [
                        cols[0][r.clone()].to_vec(),
                        cols[1][r.clone()].to_vec(),
                        cols[2][r].to_vec(),
                    ],
                }
            })
        };
        Ok(Store {
            perms: [cut(&spo)?, cut(&pos)?, cut(&osp)?],
            dict,
            stats,
            machine: machine.clone(),
        })
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
        &self.machine
    }

    /// Number of triples.
    pub fn len(&self) -> u64 {
        self.stats.triples
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.stats.triples == 0
    }

    /// A permutation's partitions.
    pub fn perm(&self, order: Permutation) -> &SplittableData<Columns> {
        &self.perms[order.index()]
    }

    /// The id of a term, if the store has it.
    pub fn id_of(&self, term: TermRef<'_>) -> Option<Id> {
        self.dict.lookup(term)
    }

    /// Triples matching a pattern (`None` = any), exactly, by binary search.
    pub fn count(&self, pattern: [Option<Id>; 3]) -> u64 {
        let (order, k) = Permutation::for_bound(pattern.map(|x| x.is_some()));
        let prefix = key_prefix(order, pattern, k);
        self.perm(order)
            .partitions()
            .iter()
            .map(|p| p.data.range(&prefix).len() as u64)
            .sum()
    }

    /// Every triple matching a pattern, in the chosen permutation's order (for tests and small
    /// lookups; the engine scans partition by partition).
    pub fn matches(&self, pattern: [Option<Id>; 3]) -> Vec<[Id; 3]> {
        let (order, k) = Permutation::for_bound(pattern.map(|x| x.is_some()));
        let prefix = key_prefix(order, pattern, k);
        let pos = order.positions();
        let mut out = Vec::new();
        for p in self.perm(order).partitions() {
            for i in p.data.range(&prefix) {
                let key = p.data.row(i);
                let mut t = [0; 3];
                for c in 0..3 {
                    t[pos[c]] = key[c];
                }
                out.push(t);
            }
        }
        out
    }

    /// Resident bytes of the dictionary and the indexes (capacity, not length).
    pub fn heap_bytes(&self) -> usize {
        let idx: usize = self
            .perms
            .iter()
            .flat_map(|p| p.partitions().iter())
            .map(|p| p.data.cols.iter().map(|c| c.capacity() * 4).sum::<usize>())
            .sum();
        idx + self.dict.heap_bytes()
    }
}

/// The first `k` ids of a pattern's key in `order`.
pub fn key_prefix(order: Permutation, pattern: [Option<Id>; 3], k: usize) -> Vec<Id> {
    order.positions()[..k]
        .iter()
        .map(|&p| pattern[p].expect("bound by for_bound"))
        .collect()
}

fn slice_of(n: usize, index: usize, parts: usize) -> std::ops::Range<usize> {
    (n * index / parts)..(n * (index + 1) / parts)
}

fn split(
    machine: &Machine,
    sorted: &[[Id; 3]],
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
            let rows = &sorted[r];
            let mut cols: [Vec<Id>; 3] = [
                Vec::with_capacity(rows.len()),
                Vec::with_capacity(rows.len()),
                Vec::with_capacity(rows.len()),
            ];
            for t in rows {
                for c in 0..3 {
                    cols[c].push(t[pos[c]]);
                }
            }
            Columns { cols }
        },
    )?)
}

/// Statistics by linear passes over the permutations, each read in its own key order through
/// `key(i)` (no sorting: the permutations already are).
#[derive(Default)]
struct StatsBuilder(Stats);

impl StatsBuilder {
    /// SPO keys `[s, p, o]`: distinct subjects, and each predicate's distinct subjects (the
    /// distinct `(s, p)` pairs).
    fn spo(&mut self, n: usize, key: impl Fn(usize) -> [Id; 3]) {
        let st = &mut self.0;
        st.triples = n as u64;
        let mut prev: Option<[Id; 3]> = None;
        for i in 0..n {
            let k = key(i);
            if prev.is_none_or(|q| q[0] != k[0]) {
                st.subjects += 1;
            }
            if prev.is_none_or(|q| q[..2] != k[..2]) {
                st.per_predicate.entry(k[1]).or_default().subjects += 1;
            }
            prev = Some(k);
        }
    }

    /// POS keys `[p, o, s]`: each predicate's triples and distinct objects.
    fn pos(&mut self, n: usize, key: impl Fn(usize) -> [Id; 3]) {
        let mut i = 0;
        while i < n {
            let p = key(i)[0];
            let (mut triples, mut objects) = (0u64, 0u64);
            let mut last_o = None;
            while i < n {
                let k = key(i);
                if k[0] != p {
                    break;
                }
                triples += 1;
                if last_o != Some(k[1]) {
                    objects += 1;
                    last_o = Some(k[1]);
                }
                i += 1;
            }
            let e = self.0.per_predicate.entry(p).or_default();
            e.triples += triples;
            e.objects += objects;
        }
    }

    /// OSP keys `[o, s, p]`: distinct objects.
    fn osp(&mut self, n: usize, key: impl Fn(usize) -> [Id; 3]) {
        self.0.objects = (0..n)
            .filter(|&i| i == 0 || key(i)[0] != key(i - 1)[0])
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

    fn tiny() -> Store {
        let mut d = Dict::new();
        let mut id = |s: &str| d.intern(TermRef::Iri(s)).unwrap();
        let (a, b, c, p, q) = (id("a"), id("b"), id("c"), id("p"), id("q"));
        let triples = vec![[a, p, b], [a, p, c], [b, p, c], [a, q, a], [a, p, b]];
        let m = nearflow_topo::presets::build("nehalem-2x4").unwrap();
        Store::build(&m, d, triples).unwrap()
    }

    #[test]
    fn counts_and_matches_agree_with_a_scan() {
        let s = tiny();
        assert_eq!(s.len(), 4, "the duplicate is dropped");
        assert_eq!(s.perm(Permutation::Spo).len(), 2, "one partition per node");
        let all = s.matches([None; 3]);
        for sb in [None, Some(1), Some(2)] {
            for pb in [None, Some(4), Some(5)] {
                for ob in [None, Some(1), Some(2), Some(3)] {
                    let pat = [sb, pb, ob];
                    let want: Vec<_> = all
                        .iter()
                        .filter(|t| (0..3).all(|i| pat[i].is_none_or(|v| t[i] == v)))
                        .collect();
                    assert_eq!(s.count(pat), want.len() as u64, "{pat:?}");
                    let mut got = s.matches(pat);
                    got.sort();
                    let mut want: Vec<_> = want.into_iter().copied().collect();
                    want.sort();
                    assert_eq!(got, want, "{pat:?}");
                }
            }
        }
        let p = s.stats().per_predicate[&4];
        assert_eq!(
            p,
            PredStats {
                triples: 3,
                subjects: 2,
                objects: 2
            }
        );
        assert_eq!(s.stats().subjects, 2);
    }

    /// The statistics of linear passes equal brute-force counts, built from triples and from
    /// sorted columns (the snapshot's path).
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
        let triples: Vec<[Id; 3]> = (0..400).map(|_| [next(12), next(4), next(12)]).collect();
        let set: BTreeSet<[Id; 3]> = triples.iter().copied().collect();
        let m = nearflow_topo::presets::build("nehalem-2x4").unwrap();
        let mut per: BTreeMap<Id, (BTreeSet<Id>, BTreeSet<Id>, u64)> = BTreeMap::new();
        for t in &set {
            let e = per.entry(t[1]).or_default();
            e.0.insert(t[0]);
            e.1.insert(t[2]);
            e.2 += 1;
        }
        let check = |st: &Stats| {
            assert_eq!(st.triples, set.len() as u64);
            let distinct =
                |c: usize| set.iter().map(|t| t[c]).collect::<BTreeSet<_>>().len() as u64;
            assert_eq!(st.subjects, distinct(0));
            assert_eq!(st.predicates, distinct(1));
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
        let built = Store::build(&m, d, triples).unwrap();
        check(built.stats());
        let mut sorted: Vec<[Id; 3]> = set.iter().copied().collect();
        let mut cols = |key: fn(&[Id; 3]) -> [Id; 3]| {
            sorted.sort_unstable_by_key(key);
            let k: Vec<[Id; 3]> = sorted.iter().map(key).collect();
            [0, 1, 2].map(|c| k.iter().map(|r| r[c]).collect::<Vec<Id>>())
        };
        let perms = [
            cols(|t| *t),
            cols(|t| [t[1], t[2], t[0]]),
            cols(|t| [t[2], t[0], t[1]]),
        ];
        check(Store::from_sorted(&m, dict().0, perms).unwrap().stats());
    }
}
