//! The ferret case (`numa-template-library-splittable-data.txt` §2.3, §3, Figs. 4 and 6): an
//! image-feature database searched by multi-probe LSH, in two versions on nearflow.
//!
//! - **plain** ([`PlainDb`]): one shared index, built by one thread (on node 0, as ferret's main
//!   thread loads its database), queried by tasks that run wherever the scheduler puts them
//!   (Fig. 4);
//! - **split** ([`SplitDb`]): a [`SplittableData`] of one index per node (or group), each built
//!   on its node; a query's probe keys are computed once and the search is dispatched to every
//!   partition, which ranks only its own vectors, and the partial top-k lists are merged (Fig. 6).
//!
//! Both use the same hash functions, so a split query's candidates are exactly the plain
//! query's, split by partition: the two return identical results (tested), and both equal a
//! brute-force k-NN wherever the candidates cover the true neighbours ([`check`]).
//!
//! Accesses: with an [`AccessLog`], every vector a query computes a distance to is counted per
//! page of the database and per node of the worker that read it — the paper's data-address
//! profile (§2.2), taken exactly for the database instead of sampled by hardware counters, which
//! this project's machines do not have. [`AccessLog::summary`] gives the remote share and the
//! categorisation of Fig. 3.
//!
//! Data: [`generate`] draws clustered feature vectors (Gaussian clusters around uniform centres,
//! seeded), and [`queries`] perturbs database vectors, so each query has true near neighbours.
//! No real set is used: we found no package on the registries that ships image feature vectors.

pub mod lsh;
pub mod pipeline;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use nearflow_rt::TaskCx;
use nearflow_split::{Route, SplitBy, SplitError, SplittableData};
use nearflow_topo::Machine;

pub use crate::rng::Rng;
pub use lsh::{Hashes, Hit, LshIndex, LshParams};

/// The generated database.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DataSpec {
    /// Feature vectors.
    pub points: usize,
    /// Dimensions of each.
    pub dim: usize,
    /// Gaussian clusters they are drawn around.
    pub clusters: usize,
    /// Standard deviation within a cluster (centres are uniform in [0, 10)^dim).
    pub spread: f32,
    pub seed: u64,
}

impl Default for DataSpec {
    fn default() -> Self {
        DataSpec {
            points: 200_000,
            dim: 64,
            clusters: 1000,
            spread: 0.5,
            seed: 1,
        }
    }
}

impl DataSpec {
    /// LSH parameters suited to this data: the slot width is four times the typical distance
    /// between two vectors of a cluster (`spread·√(2·dim)`), so that one projection keeps such
    /// a pair in one slot about 80 % of the time and separates vectors of different clusters.
    pub fn lsh_params(&self) -> LshParams {
        LshParams {
            width: 4.0 * self.spread * (2.0 * self.dim as f32).sqrt(),
            ..LshParams::default()
        }
    }
}

/// `spec.points` vectors, row-major.
pub fn generate(spec: &DataSpec) -> Vec<f32> {
    let mut rng = Rng::new(spec.seed);
    let centres: Vec<f32> = (0..spec.clusters.max(1) * spec.dim)
        .map(|_| rng.unit() * 10.0)
        .collect();
    let mut out = Vec::with_capacity(spec.points * spec.dim);
    for _ in 0..spec.points {
        let c = (rng.next_u64() % spec.clusters.max(1) as u64) as usize;
        for d in 0..spec.dim {
            out.push(centres[c * spec.dim + d] + rng.normal() * spec.spread);
        }
    }
    out
}

/// `n` queries: database vectors picked at random, each coordinate moved by `noise`·N(0,1).
pub fn queries(spec: &DataSpec, db: &[f32], n: usize, noise: f32, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let p = (rng.next_u64() % spec.points.max(1) as u64) as usize;
            db[p * spec.dim..(p + 1) * spec.dim]
                .iter()
                .map(|x| x + rng.normal() * noise)
                .collect()
        })
        .collect()
}

/// Ferret's feature normalisation (the "extract" stage): unit L2 norm scaled back to the data's
/// mean norm `scale`, so normalising a database vector's copy changes nothing but rounding.
pub fn normalise(v: &mut [f32], scale: f32) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x *= scale / n);
    }
}

/// Counts, per page of the database, the accesses from each node.
#[derive(Debug)]
pub struct AccessLog {
    nodes: usize,
    /// page → (node the page lives on, accesses per accessor node).
    pages: Mutex<HashMap<usize, (usize, Vec<u64>)>>,
}

/// The shares of Fig. 3 and the remote share, from an [`AccessLog`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AccessSummary {
    /// Accesses counted.
    pub accesses: u64,
    /// Pages accessed.
    pub pages: usize,
    /// Accesses from a node other than the page's.
    pub remote: u64,
    /// Accesses by the dominant node's share of its page's accesses: `[100 %, 90–100 %,
    /// 80–90 %, 70–80 %, 60–70 %, 50–60 %, < 50 %]` (the first is Fig. 3's single-processor
    /// category, the rest its shared pages; < 50 % needs three or more nodes).
    pub by_dominance: [u64; 7],
}

impl AccessSummary {
    /// Share of accesses from a node other than the page's.
    pub fn remote_share(&self) -> f64 {
        self.remote as f64 / self.accesses.max(1) as f64
    }
    /// Share of accesses to pages read from more than one node (Fig. 3's "shared pages").
    pub fn shared_share(&self) -> f64 {
        (self.accesses - self.by_dominance[0]) as f64 / self.accesses.max(1) as f64
    }
}

const PAGE: usize = 4096;

impl AccessLog {
    pub fn new(nodes: usize) -> Self {
        AccessLog {
            nodes,
            pages: Mutex::new(HashMap::new()),
        }
    }

    /// Counts the vectors of `index` at positions `touched`, which live on `home`, as read from
    /// node `from`.
    pub fn record(&self, index: &LshIndex, home: usize, from: usize, touched: &[u32]) {
        let mut local: HashMap<usize, u64> = HashMap::new();
        for &p in touched {
            *local.entry(index.address(p as usize) / PAGE).or_default() += 1;
        }
        let mut g = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        for (page, n) in local {
            let e = g.entry(page).or_insert_with(|| (home, vec![0; self.nodes]));
            e.1[from] += n;
        }
    }

    pub fn summary(&self) -> AccessSummary {
        let g = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        let mut s = AccessSummary {
            accesses: 0,
            pages: g.len(),
            remote: 0,
            by_dominance: [0; 7],
        };
        for (home, by_node) in g.values() {
            let total: u64 = by_node.iter().sum();
            let top = by_node.iter().copied().max().unwrap_or(0);
            s.accesses += total;
            s.remote += total - by_node[*home];
            let cat = if top == total {
                0
            } else {
                // Dominant share in tenths: 9 → 90–100 %, …, 5 → 50–60 %, below → < 50 %.
                let tenths = (top * 10 / total.max(1)) as usize;
                if tenths >= 5 {
                    10 - tenths
                } else {
                    6
                }
            };
            s.by_dominance[cat] += total;
        }
        s
    }
}

/// The plain database: one index, shared by every query task.
#[derive(Clone, Debug)]
pub struct PlainDb {
    pub hashes: Arc<Hashes>,
    pub index: Arc<LshIndex>,
    /// The node its memory is on (node 0: built by one thread there, or labelled so on a
    /// synthetic machine).
    pub node: usize,
}

impl PlainDb {
    /// Indexes `vecs` (row-major, `dim` wide) on one thread, bound to node 0 on this host.
    pub fn build(machine: &Machine, vecs: &[f32], dim: usize, params: LshParams) -> Self {
        let hashes = Arc::new(Hashes::new(params, dim));
        let build = || {
            let mut index = LshIndex::new(&hashes);
            for (i, v) in vecs.chunks_exact(dim).enumerate() {
                index.insert(&hashes, i as u32, v);
            }
            index
        };
        let index = std::thread::scope(|s| {
            s.spawn(|| {
                if machine.source().is_host() {
                    let pus: Vec<usize> = (0..machine.pu_count())
                        .filter(|&p| machine.node_of(p) == 0)
                        .collect();
                    // Best effort: unbound, the pages still come from this one thread.
                    let _ = nearflow_topo::bind_current_thread(machine, &pus);
                }
                build()
            })
            .join()
            .expect("indexing does not panic")
        });
        PlainDb {
            hashes,
            index: Arc::new(index),
            node: 0,
        }
    }

    /// The `k` nearest to `q`; accesses are logged as made from `from` when `log` is given.
    pub fn query(&self, q: &[f32], k: usize, log: Option<(&AccessLog, usize)>) -> Vec<Hit> {
        let probes = self.hashes.probes(q);
        let mut touched = Vec::new();
        let hits = self
            .index
            .search(q, &probes, k, log.is_some().then_some(&mut touched));
        if let Some((log, from)) = log {
            log.record(&self.index, self.node, from, &touched);
        }
        hits
    }
}

/// The split database: one index per partition, on the partition's node.
#[derive(Clone, Debug)]
pub struct SplitDb {
    pub hashes: Arc<Hashes>,
    pub data: SplittableData<LshIndex>,
}

impl SplitDb {
    /// Routes vector `i` to a partition by a hash of `i`, and indexes each partition on its node.
    pub fn build(
        machine: &Machine,
        by: SplitBy,
        vecs: &[f32],
        dim: usize,
        params: LshParams,
    ) -> Result<Self, SplitError> {
        let hashes = Arc::new(Hashes::new(params, dim));
        let items: Vec<(u32, &[f32])> = vecs
            .chunks_exact(dim)
            .enumerate()
            .map(|(i, v)| (i as u32, v))
            .collect();
        let h = hashes.clone();
        let data = SplittableData::build_by_key(
            machine,
            by,
            items,
            |e| u64::from(e.0),
            Route::Hash,
            |_| LshIndex::new(&h),
            |index, (id, v)| index.insert(&h, id, v),
        )?;
        Ok(SplitDb { hashes, data })
    }

    /// From inside a task: dispatches the search for `q` to every partition and calls `then`
    /// with the merged `k` nearest (Fig. 6's `query`, as a continuation).
    pub fn query_in<C>(
        &self,
        cx: &TaskCx<'_>,
        q: Arc<Vec<f32>>,
        k: usize,
        log: Option<Arc<AccessLog>>,
        then: C,
    ) -> Result<(), SplitError>
    where
        C: FnOnce(&TaskCx<'_>, Vec<Hit>) + Send + 'static,
    {
        // The probe keys depend on the query only: computed once, read by every partition.
        let probes = Arc::new(self.hashes.probes(&q));
        self.data.dispatch_in(
            cx,
            move |cx, index, info| {
                let mut touched = Vec::new();
                let hits = index.search(&q, &probes, k, log.is_some().then_some(&mut touched));
                if let Some(log) = &log {
                    log.record(index, info.node, cx.node(), &touched);
                }
                hits
            },
            move |mut a, b| {
                a.extend(b);
                lsh::top_k(a, k)
            },
            then,
        )
    }

    /// Vectors held, over all partitions.
    pub fn len(&self) -> usize {
        self.data.partitions().iter().map(|p| p.data.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The quality of LSH on a sample of queries, against brute force.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Check {
    pub queries: usize,
    /// Queries whose candidates held every true neighbour (LSH is exact there).
    pub covered: usize,
    /// Of those, how many returned exactly the brute-force list (must be all).
    pub exact: usize,
    /// Mean recall@k over all queries.
    pub recall: f64,
}

/// Compares `db`'s answers for `qs` with a brute-force k-NN of the same index.
pub fn check(db: &PlainDb, qs: &[Vec<f32>], k: usize) -> Check {
    let mut c = Check {
        queries: qs.len(),
        covered: 0,
        exact: 0,
        recall: 0.0,
    };
    for q in qs {
        let truth = db.index.brute_force(q, k);
        let got = db.query(q, k, None);
        let ids: Vec<u32> = truth.iter().map(|h| h.id).collect();
        let probes = db.hashes.probes(q);
        if db.index.candidates_cover(&probes, &ids) {
            c.covered += 1;
            c.exact += usize::from(got == truth);
        }
        let found = got.iter().filter(|h| ids.contains(&h.id)).count();
        c.recall += found as f64 / ids.len().max(1) as f64;
    }
    c.recall /= qs.len().max(1) as f64;
    c
}
