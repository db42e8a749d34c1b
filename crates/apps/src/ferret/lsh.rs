//! Multi-probe LSH for L2 distance (Lv et al., VLDB '07), as ferret's image database uses it.
//!
//! `tables` hash tables, each keyed by `hashes` random projections
//! `h(v) = ⌊(a·v + b) / width⌋` (`a` Gaussian, `b` uniform in `[0, width)`). A query probes in each
//! table its own bucket and then the neighbouring buckets most likely to hold its neighbours:
//! *query-directed probing* — a perturbation of coordinate `i` by −1 or +1 has score `x²`, `x`
//! the query's distance (in units of `width`) to that side of its slot, and the probes are the
//! perturbation sets of lowest total score. Sets of one or two coordinates are enumerated and
//! sorted (the paper generates sets of any size with a heap; with `probes` ≤ a few dozen, the
//! lowest-scored sets are almost always of size ≤ 2). Candidates from every probed bucket are
//! ranked by exact distance, ties by id.

use std::collections::HashMap;

use super::Rng;

/// A perturbation set of one or two coordinates: its score, the (coordinate, delta) pairs, and
/// how many of them are used.
type Perturbation = (f32, [(usize, i32); 2], usize);

/// The parameters of an index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LshParams {
    /// Number of hash tables (L).
    pub tables: usize,
    /// Projections per table (M).
    pub hashes: usize,
    /// Slot width of a projection.
    pub width: f32,
    /// Buckets probed per table, the query's own included (T).
    pub probes: usize,
    /// Seed of the projections (every partition of a split database uses the same).
    pub seed: u64,
}

impl Default for LshParams {
    fn default() -> Self {
        LshParams {
            tables: 8,
            hashes: 8,
            width: 4.0,
            probes: 16,
            seed: 7,
        }
    }
}

/// The hash functions of an index: `tables × hashes` projections of `dim` dimensions.
#[derive(Clone, Debug)]
pub struct Hashes {
    params: LshParams,
    dim: usize,
    a: Vec<f32>,
    b: Vec<f32>,
}

impl Hashes {
    /// Draws the projections from `params.seed`.
    pub fn new(params: LshParams, dim: usize) -> Self {
        let mut rng = Rng::new(params.seed);
        let n = params.tables * params.hashes;
        let a = (0..n * dim).map(|_| rng.normal()).collect();
        let b = (0..n).map(|_| rng.unit() * params.width).collect();
        Hashes { params, dim, a, b }
    }

    pub fn params(&self) -> &LshParams {
        &self.params
    }

    /// The projections of `v` in table `t`, in slot units.
    fn project(&self, t: usize, v: &[f32], out: &mut Vec<f32>) {
        out.clear();
        let m = self.params.hashes;
        for i in 0..m {
            let k = t * m + i;
            let a = &self.a[k * self.dim..(k + 1) * self.dim];
            let dot: f32 = a.iter().zip(v).map(|(x, y)| x * y).sum();
            out.push((dot + self.b[k]) / self.params.width);
        }
    }

    /// The bucket key of slots `s`.
    fn key(s: impl Iterator<Item = i32>) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for x in s {
            h ^= x as u32 as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
            h ^= h >> 29;
        }
        h
    }

    /// The keys to probe for query `q`: one list per table, best first (its own bucket first).
    pub fn probes(&self, q: &[f32]) -> Vec<Vec<u64>> {
        let mut scratch = Vec::new();
        (0..self.params.tables)
            .map(|t| self.probe_keys(t, q, &mut scratch))
            .collect()
    }

    /// The keys to probe in table `t` for query `q`, best first (its own bucket first).
    fn probe_keys(&self, t: usize, q: &[f32], scratch: &mut Vec<f32>) -> Vec<u64> {
        self.project(t, q, scratch);
        let slots: Vec<i32> = scratch.iter().map(|f| f.floor() as i32).collect();
        let mut keys = vec![Self::key(slots.iter().copied())];
        let want = self.params.probes.max(1);
        if want == 1 {
            return keys;
        }
        // (score, coordinate, delta) of every single perturbation.
        let mut singles: Vec<(f32, usize, i32)> = Vec::with_capacity(2 * slots.len());
        for (i, f) in scratch.iter().enumerate() {
            let lo = f - f.floor();
            singles.push((lo * lo, i, -1));
            singles.push(((1.0 - lo) * (1.0 - lo), i, 1));
        }
        let mut sets: Vec<Perturbation> = Vec::new();
        for (x, s) in singles.iter().enumerate() {
            sets.push((s.0, [(s.1, s.2), (0, 0)], 1));
            for o in &singles[x + 1..] {
                if o.1 != s.1 {
                    sets.push((s.0 + o.0, [(s.1, s.2), (o.1, o.2)], 2));
                }
            }
        }
        sets.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, deltas, n) in sets.into_iter().take(want - 1) {
            let mut s = slots.clone();
            for &(i, d) in &deltas[..n] {
                s[i] += d;
            }
            keys.push(Self::key(s.into_iter()));
        }
        keys
    }

    /// The bucket key of `v` in table `t`.
    fn bucket(&self, t: usize, v: &[f32], scratch: &mut Vec<f32>) -> u64 {
        self.project(t, v, scratch);
        Self::key(scratch.iter().map(|f| f.floor() as i32))
    }
}

/// One result: a database vector and its squared distance to the query.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub id: u32,
    pub dist: f32,
}

/// Orders hits by distance, then id (a total order: results are reproducible).
pub fn hit_order(a: &Hit, b: &Hit) -> std::cmp::Ordering {
    a.dist.total_cmp(&b.dist).then(a.id.cmp(&b.id))
}

/// Keeps the `k` best of `hits` in order.
pub fn top_k(mut hits: Vec<Hit>, k: usize) -> Vec<Hit> {
    hits.sort_by(hit_order);
    hits.truncate(k);
    hits
}

/// Squared L2 distance.
pub fn dist2(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// A set of vectors (with their global ids) and its hash tables.
#[derive(Debug)]
pub struct LshIndex {
    dim: usize,
    ids: Vec<u32>,
    vecs: Vec<f32>,
    tables: Vec<HashMap<u64, Vec<u32>>>,
    /// Projections of the vector being inserted.
    scratch: Vec<f32>,
}

/// What one query touched: the vectors it computed a distance to (by position), for access
/// accounting.
pub type Touched = Vec<u32>;

impl LshIndex {
    /// An index of no vectors.
    pub fn new(hashes: &Hashes) -> Self {
        LshIndex {
            dim: hashes.dim,
            ids: Vec::new(),
            vecs: Vec::new(),
            tables: (0..hashes.params.tables).map(|_| HashMap::new()).collect(),
            scratch: Vec::new(),
        }
    }

    /// Adds vector `v` with global id `id`.
    pub fn insert(&mut self, hashes: &Hashes, id: u32, v: &[f32]) {
        assert_eq!(v.len(), self.dim, "vector of the wrong dimension");
        let pos = self.ids.len() as u32;
        self.ids.push(id);
        self.vecs.extend_from_slice(v);
        for (t, table) in self.tables.iter_mut().enumerate() {
            table
                .entry(hashes.bucket(t, v, &mut self.scratch))
                .or_default()
                .push(pos);
        }
    }

    /// Vectors in the index.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether it holds no vector.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Vector at position `pos`.
    pub fn vector(&self, pos: usize) -> &[f32] {
        &self.vecs[pos * self.dim..(pos + 1) * self.dim]
    }

    /// The address of vector `pos` (for access accounting by page).
    pub fn address(&self, pos: usize) -> usize {
        self.vector(pos).as_ptr() as usize
    }

    /// The `k` nearest of this index's vectors among the candidates of `probes` (one key list
    /// per table, from [`Hashes::probes`]); the positions it computed a distance to go to
    /// `touched` when given.
    pub fn search(
        &self,
        q: &[f32],
        probes: &[Vec<u64>],
        k: usize,
        touched: Option<&mut Touched>,
    ) -> Vec<Hit> {
        let cand = self.candidates(probes);
        if let Some(t) = touched {
            t.extend_from_slice(&cand);
        }
        let hits = cand
            .iter()
            .map(|&p| Hit {
                id: self.ids[p as usize],
                dist: dist2(q, self.vector(p as usize)),
            })
            .collect();
        top_k(hits, k)
    }

    /// The exact `k` nearest by scanning every vector (the brute-force reference).
    pub fn brute_force(&self, q: &[f32], k: usize) -> Vec<Hit> {
        let hits = (0..self.len())
            .map(|p| Hit {
                id: self.ids[p],
                dist: dist2(q, self.vector(p)),
            })
            .collect();
        top_k(hits, k)
    }

    /// The positions in the buckets of `probes`, ascending, each once.
    fn candidates(&self, probes: &[Vec<u64>]) -> Vec<u32> {
        let mut cand: Vec<u32> = Vec::new();
        for (t, keys) in probes.iter().enumerate() {
            for key in keys {
                if let Some(b) = self.tables[t].get(key) {
                    cand.extend_from_slice(b);
                }
            }
        }
        cand.sort_unstable();
        cand.dedup();
        cand
    }

    /// Whether the candidate set of `probes` holds every vector of `ids` (then the search is
    /// exact for them).
    pub fn candidates_cover(&self, probes: &[Vec<u64>], ids: &[u32]) -> bool {
        let mut cand: Vec<u32> = self
            .candidates(probes)
            .iter()
            .map(|&p| self.ids[p as usize])
            .collect();
        cand.sort_unstable();
        ids.iter().all(|id| cand.binary_search(id).is_ok())
    }
}
