//! Making versions of a store: an [`Edit`] collects inserted and removed quads and makes a new
//! version that shares the indexes ([`Store::edit`]); [`Store::merged`] folds a version's delta
//! into new sorted indexes (a linear merge per permutation, the statistics recounted), and
//! [`Store::rebased_onto`] carries the versions committed meanwhile onto them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::delta::*;
use crate::dict::{Dict, DictFull};
use crate::store::{Permutation, PredStats, Stats, Store, StoreError};
use crate::term::{Id, TermRef};

/// Changes to a version, to be made a new one ([`Edit::finish`]): quads inserted and removed,
/// and the terms they need.
pub struct Edit<'s> {
    store: &'s Store,
    dict: Dict,
    /// Each changed quad: whether the new version holds it.
    changes: HashMap<[Id; 4], bool>,
}

impl Store {
    /// The delta between this version and its sorted indexes.
    pub fn delta(&self) -> &Delta {
        &self.delta
    }

    /// Whether this version is its sorted indexes (no delta: nothing to merge).
    pub fn is_flat(&self) -> bool {
        self.delta.is_empty()
    }

    /// Whether the sorted indexes hold quad `q`.
    fn base_holds(&self, q: &[Id; 4]) -> bool {
        self.ranges(Permutation::Spo, q[3], &q[..3])
            .next()
            .is_some()
    }

    /// Whether the delta agrees with the indexes: every added quad absent from them, every
    /// removed one present (a lookup in the indexes per quad of the delta: `nearflow check
    /// store` runs it on a delta read from a segment).
    pub fn delta_agrees(&self) -> bool {
        let d = &self.delta;
        d.added[0].iter().all(|r| !self.base_holds(&quad_of(r)))
            && d.removed[0].iter().all(|r| self.base_holds(&quad_of(r)))
    }

    /// Whether this version holds quad `q` (`[s, p, o, g]`).
    pub fn contains(&self, q: &[Id; 4]) -> bool {
        let row = [q[3], q[0], q[1], q[2]];
        let d = &self.delta;
        if d.added[0].binary_search(&row).is_ok() {
            return true;
        }
        self.base_holds(q) && d.removed[0].binary_search(&row).is_err()
    }

    /// Starts a change of this version.
    pub fn edit(&self) -> Edit<'_> {
        let dict = match self.dict.under() {
            Some(_) => (*self.dict).clone(),
            None => Dict::over(self.dict.clone()),
        };
        Edit {
            store: self,
            dict,
            changes: HashMap::new(),
        }
    }

    /// A version with `dict` and the indexes' difference `added`/`removed`, with its statistics
    /// and graph list.
    pub(crate) fn with_delta(&self, dict: Arc<Dict>, delta: Delta) -> Store {
        let base = &self.base;
        let mut stats: Stats = base.stats.clone();
        let (added, removed) = (&delta.added[0], &delta.removed[0]);
        stats.triples = stats.triples + added.len() as u64 - removed.len() as u64;
        // Per predicate: quads counted exactly; distinct subjects and objects are the
        // indexes' plus the added quads (an upper bound: the planner's estimates only). Rows
        // in POS order come in runs of one predicate: one lookup a run.
        let pos = Permutation::Pos.index();
        for (p, n) in row_runs(&delta.added[pos], |r| r[1]) {
            let e = stats.per_predicate.entry(p).or_default();
            e.triples += n;
            e.subjects += n;
            e.objects += n;
        }
        for (p, n) in row_runs(&delta.removed[pos], |r| r[1]) {
            if let Some(e) = stats.per_predicate.get_mut(&p) {
                e.triples -= n;
            }
        }
        stats
            .per_predicate
            .retain(|_, e: &mut PredStats| e.triples > 0);
        stats.predicates = stats.per_predicate.len() as u64;
        let mut counts: BTreeMap<Id, i64> = base
            .graphs
            .iter()
            .map(|&(g, _)| (g, base.graph_rows(g).len() as i64))
            .collect();
        for (g, n) in row_runs(added, |r| r[0]) {
            *counts.entry(g).or_default() += n as i64;
        }
        for (g, n) in row_runs(removed, |r| r[0]) {
            *counts.entry(g).or_default() -= n as i64;
        }
        Store {
            dict,
            base: base.clone(),
            delta: Arc::new(delta),
            stats,
            live: counts
                .into_iter()
                .filter(|&(_, n)| n > 0)
                .map(|(g, _)| g)
                .collect(),
            health: self.health.clone(),
        }
    }

    /// This version's quads in new sorted indexes, with the same dictionary (ids unchanged):
    /// the background merge. A linear merge per permutation; the statistics are recounted.
    pub fn merged(&self) -> Result<Store, StoreError> {
        if self.is_flat() {
            return Ok(self.clone());
        }
        let dict = (*self.dict).clone();
        let graph_at = crate::layout::graph_of_rows(&self.base.graphs, self.base.len());
        let n = self.len() as usize;
        let mut graphs: Vec<(Id, usize)> = Vec::new();
        let perms = Permutation::ALL.map(|order| {
            let mut cols: [Vec<Id>; 3] = std::array::from_fn(|_| Vec::with_capacity(n));
            let (added, removed) = (self.delta.added_rows(order), self.delta.removed_rows(order));
            let (mut a, mut r) = (0, 0);
            let mut push = |row: &Row, cols: &mut [Vec<Id>; 3]| {
                if order == Permutation::Spo && graphs.last().is_none_or(|&(g, _)| g != row[0]) {
                    graphs.push((row[0], cols[0].len()));
                }
                for c in 0..3 {
                    cols[c].push(row[c + 1]);
                }
            };
            for part in self.perm(order).partitions() {
                let data = &part.data;
                for i in 0..data.len() {
                    let k = data.row(i);
                    let row = [graph_at[data.first + i], k[0], k[1], k[2]];
                    while a < added.len() && added[a] < row {
                        push(&added[a], &mut cols);
                        a += 1;
                    }
                    if r < removed.len() && removed[r] == row {
                        r += 1;
                        continue;
                    }
                    push(&row, &mut cols);
                }
            }
            for row in &added[a..] {
                push(row, &mut cols);
            }
            debug_assert_eq!(r, removed.len(), "every removed quad is in the indexes");
            cols
        });
        drop(graph_at);
        let merged = Store::from_sorted(self.machine(), dict, perms, graphs)?;
        // The new indexes keep the old ones' placement.
        if self.is_replicated() {
            merged.replicate()?;
        }
        Ok(merged)
    }

    /// This version as a version over `merged`'s indexes, where `merged` is
    /// `merged_from.merged()` and `merged_from` an earlier version on the same indexes as this
    /// one: the same quads and the same ids (the dictionary's later terms laid over `merged`'s).
    /// The background merge's last step, for the versions committed while it ran.
    ///
    /// # Panics
    /// If `merged_from` does not share this version's indexes.
    pub fn rebased_onto(&self, merged_from: &Store, merged: &Store) -> Result<Store, DictFull> {
        assert!(
            Arc::ptr_eq(&self.base, &merged_from.base),
            "a version is rebased from the indexes it shares"
        );
        // The dictionary: this version's, when it extends `merged`'s in place (the merge keeps
        // the dictionary it merged from); else `merged`'s with this version's later terms over
        // it (a merged store that was written and mapped again), ids kept either way.
        let extends = Arc::ptr_eq(&self.dict, &merged.dict)
            || match (self.dict.under(), merged.dict.under()) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (Some(a), None) => Arc::ptr_eq(a, &merged.dict),
                _ => false,
            };
        let dict = if extends {
            self.dict.clone()
        } else {
            let under = if merged.dict.under().is_none() {
                merged.dict.clone()
            } else {
                Arc::new(merged.dict.flattened())
            };
            let mut d = Dict::over(under);
            for id in merged.dict.len() + 1..=self.dict.len() {
                let got = d.intern(self.dict.term(id as Id).as_ref())?;
                debug_assert_eq!(got as usize, id, "ids are kept");
            }
            Arc::new(d)
        };
        // The merged indexes differ from these by `merged_from`'s delta, and this version
        // from these by its own: only the quads the two list can differ.
        let mut touched: Vec<[Id; 4]> = Vec::new();
        for d in [&self.delta, &merged_from.delta] {
            for rows in [&d.added[0], &d.removed[0]] {
                touched.extend(rows.iter().map(quad_of));
            }
        }
        touched.sort_unstable();
        touched.dedup();
        let (mut added, mut removed) = (Vec::new(), Vec::new());
        for q in touched {
            match (self.contains(&q), merged.base_holds(&q)) {
                (true, false) => added.push(q),
                (false, true) => removed.push(q),
                _ => {}
            }
        }
        Ok(merged.with_delta(dict, Delta::of(added, removed)))
    }
}

/// Bytes an edit counts for each change: its entry in the map of changes (at the map's lowest
/// load), its place in the sorted list [`Edit::finish`] makes, and its rows in the six orders
/// twice there (the changes' own delta and the merged one). An over-count, so that a bound on
/// [`Edit::held_bytes`] holds.
pub const CHANGE_BYTES: usize = 384;

impl<'s> Edit<'s> {
    /// About the bytes the edit holds, and those [`finish`](Self::finish) will make, beyond the
    /// version it changes: each change ([`CHANGE_BYTES`]), the terms it added, and the copy of
    /// the version's delta the new version gets.
    pub fn held_bytes(&self) -> usize {
        self.changes
            .capacity()
            .max(self.changes.len())
            .saturating_mul(CHANGE_BYTES)
            .saturating_add(self.dict.own_heap_bytes())
            .saturating_add(self.store.delta.heap_bytes())
    }

    /// The id of `term`, adding it to the new version's dictionary when new.
    pub fn intern(&mut self, term: TermRef<'_>) -> Result<Id, DictFull> {
        self.dict.intern(term)
    }

    /// The new version's dictionary so far.
    pub fn dict(&self) -> &Dict {
        &self.dict
    }

    /// The version being changed.
    pub fn store(&self) -> &'s Store {
        self.store
    }

    /// Whether the new version will hold `q` (`[s, p, o, g]`).
    pub fn contains(&self, q: &[Id; 4]) -> bool {
        match self.changes.get(q) {
            Some(&present) => present,
            None => self.store.contains(q),
        }
    }

    /// Adds quad `q` (`[s, p, o, g]`, ids of [`intern`](Self::intern)).
    pub fn insert(&mut self, q: [Id; 4]) {
        debug_assert!(q[..3].iter().all(|&x| x != 0), "a quad of terms");
        self.changes.insert(q, true);
    }

    /// Removes quad `q`.
    pub fn remove(&mut self, q: [Id; 4]) {
        self.changes.insert(q, false);
    }

    /// The changes that differ from the version being changed: each quad and whether the new
    /// version holds it.
    pub fn changes(&self) -> Vec<([Id; 4], bool)> {
        let mut v: Vec<([Id; 4], bool)> = self
            .changes
            .iter()
            .filter(|(q, &present)| present != self.store.contains(q))
            .map(|(q, &p)| (*q, p))
            .collect();
        v.sort_unstable();
        v
    }

    /// The new version (the one changed is untouched: queries running on it go on). Its
    /// delta is the old one with the changes merged in, one linear pass per order: the cost of
    /// an update is a copy of the delta, not a sort of it.
    pub fn finish(self) -> Store {
        let s = self.store;
        let changes = self.changes();
        if changes.is_empty() && self.dict.own_len() == s.dict.own_len() {
            return s.clone();
        }
        // Each change moves a quad into or out of the delta's added or its removed quads.
        let (mut add_in, mut add_out, mut rem_in, mut rem_out) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (q, present) in changes {
            match (present, s.base_holds(&q)) {
                (true, true) => rem_out.push(q),
                (true, false) => add_in.push(q),
                (false, true) => rem_in.push(q),
                (false, false) => add_out.push(q),
            }
        }
        // Each pair sorted in every order: `.added` the rows that come in, `.removed` those
        // that go.
        let to_added = Delta::of(add_in, add_out);
        let to_removed = Delta::of(rem_in, rem_out);
        let d = &s.delta;
        let delta = Delta {
            added: std::array::from_fn(|o| {
                merged_rows(&d.added[o], &to_added.added[o], &to_added.removed[o])
            }),
            removed: std::array::from_fn(|o| {
                merged_rows(&d.removed[o], &to_removed.added[o], &to_removed.removed[o])
            }),
        };
        s.with_delta(Arc::new(self.dict), delta)
    }
}

/// `old` (sorted) with `ins` (sorted, none in `old`) merged in and `outs` (sorted, all in
/// `old`) left out.
fn merged_rows(old: &[Row], ins: &[Row], outs: &[Row]) -> Vec<Row> {
    if ins.is_empty() && outs.is_empty() {
        return old.to_vec();
    }
    let mut v = Vec::with_capacity(old.len() + ins.len());
    let (mut i, mut o) = (0, 0);
    for r in old {
        while i < ins.len() && ins[i] < *r {
            v.push(ins[i]);
            i += 1;
        }
        while o < outs.len() && outs[o] < *r {
            o += 1;
        }
        if o < outs.len() && outs[o] == *r {
            o += 1;
            continue;
        }
        v.push(*r);
    }
    v.extend_from_slice(&ins[i..]);
    v
}

/// The runs of rows (sorted) that agree on `key`: each key and its count.
fn row_runs(rows: &[Row], key: fn(&Row) -> Id) -> impl Iterator<Item = (Id, u64)> + '_ {
    rows.chunk_by(move |a, b| key(a) == key(b))
        .map(move |c| (key(&c[0]), c.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::DEFAULT_GRAPH;
    use std::collections::BTreeSet;

    fn machine() -> nearflow_topo::Machine {
        nearflow_topo::from_synthetic("pack:3 [numa] core:1 pu:1").unwrap()
    }

    /// Pseudo-random quads over a few terms and graphs.
    fn quads(seed: u64, n: usize, ids: &[Id]) -> Vec<[Id; 4]> {
        let mut x = seed;
        let mut next = |m: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as usize % m
        };
        let graphs = [DEFAULT_GRAPH, ids[0], ids[1]];
        (0..n)
            .map(|_| {
                [
                    ids[next(ids.len())],
                    ids[next(4)],
                    ids[next(ids.len())],
                    graphs[next(3)],
                ]
            })
            .collect()
    }

    /// Every way of reading a version (counts, matches, graph lists, the merged indexes and a
    /// rebase) agrees with a plain set of quads, through a chain of edits.
    #[test]
    fn versions_read_as_the_set_of_quads_they_hold() {
        let mut d = Dict::new();
        let ids: Vec<Id> = (0..10)
            .map(|i| d.intern(TermRef::Iri(&format!("t{i}"))).unwrap())
            .collect();
        let m = machine();
        let start = quads(1, 300, &ids);
        let mut truth: BTreeSet<[Id; 4]> = start.iter().copied().collect();
        let mut store = Store::build(&m, d, start).unwrap();
        let first = store.clone();
        for round in 0..6u64 {
            let mut e = store.edit();
            let fresh = e.intern(TermRef::Iri(&format!("new{round}"))).unwrap();
            let mut all = ids.clone();
            all.push(fresh);
            for (i, q) in quads(round + 7, 80, &all).into_iter().enumerate() {
                if i % 3 == 0 {
                    e.remove(q);
                    truth.remove(&q);
                } else {
                    e.insert(q);
                    truth.insert(q);
                }
            }
            // Removing what the store holds.
            for q in truth.iter().take(5).copied().collect::<Vec<_>>() {
                e.remove(q);
                truth.remove(&q);
            }
            store = e.finish();
            check(&store, &truth);
            if round == 2 {
                let merged = store.merged().unwrap();
                assert!(merged.is_flat());
                check(&merged, &truth);
                // A version made after the merge began, rebased onto it.
                let mut e = store.edit();
                let q = [ids[3], ids[2], fresh, ids[1]];
                e.insert(q);
                truth.insert(q);
                let later = e.finish();
                let rebased = later.rebased_onto(&store, &merged).unwrap();
                check(&rebased, &truth);
                assert_eq!(rebased.delta().counts(), (1, 0));
                store = rebased;
            }
        }
        // The first version is untouched.
        assert_eq!(first.len(), first.quads().len() as u64);
        assert!(first.delta().is_empty());
    }

    fn check(s: &Store, truth: &BTreeSet<[Id; 4]>) {
        assert_eq!(s.len(), truth.len() as u64);
        let graphs: BTreeSet<Id> = truth.iter().map(|q| q[3]).collect();
        assert_eq!(s.graph_ids(), graphs.iter().copied().collect::<Vec<_>>());
        let mut got: Vec<[Id; 4]> = s.quads();
        got.sort();
        assert_eq!(got, truth.iter().copied().collect::<Vec<_>>());
        for &g in &graphs {
            assert_eq!(
                s.graph_len(g),
                truth.iter().filter(|q| q[3] == g).count() as u64
            );
            for q in truth.iter().filter(|q| q[3] == g).take(20) {
                assert!(s.contains(q));
                for mask in 0..8u8 {
                    let pat: [Option<Id>; 3] =
                        std::array::from_fn(|i| (mask >> i & 1 == 1).then_some(q[i]));
                    let want: Vec<[Id; 3]> = truth
                        .iter()
                        .filter(|x| x[3] == g && (0..3).all(|i| pat[i].is_none_or(|v| x[i] == v)))
                        .map(|x| [x[0], x[1], x[2]])
                        .collect();
                    assert_eq!(s.count_in(g, pat), want.len() as u64);
                    let got = s.matches_in(g, pat);
                    // In the chosen permutation's order: sorted by its key.
                    let (order, _) = Permutation::for_bound(pat.map(|x| x.is_some()));
                    let p = order.positions();
                    let keys: Vec<[Id; 3]> =
                        got.iter().map(|t| [t[p[0]], t[p[1]], t[p[2]]]).collect();
                    assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
                    let mut got = got;
                    got.sort();
                    assert_eq!(got, want);
                }
            }
        }
    }
}
