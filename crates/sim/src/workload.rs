//! What the simulated machine runs: requests made of tasks that read and write data blocks and
//! spawn more tasks, as the runtime's requests do.
//!
//! A [`Graph`] lists every task up front, but not when or where it runs: a task becomes ready
//! when its parent spawns it (at the parent's end, into the queue the policy names for the
//! spawning worker and the task's kind), so a different policy gives a different schedule. A
//! written block gets its home node when it is written (first touch), so where a producer ran
//! decides whether its consumer reads locally.
//!
//! The generators here are the synthetic workloads of the runtime's own benchmarks:
//! - [`fib`] and [`fanout`]: `nearflow bench overhead`'s fork-join and fan-out;
//! - [`matmul`]: the queue study's element tasks (`load-balancing-queues.txt` §III);
//! - [`pipeline`]: requests whose packets flow through a chain of operators, each packet's next
//!   step an immediate task of the task that produced it, the packets of a source spawned as
//!   deferred tasks (the Bobox paper's §3.1 task kinds), with a packet size;
//! - [`stress`]: random spawn trees of both kinds, as `nearflow stress`;
//! - [`similarity`]: `bench split`'s similarity search, plain (one database built on node 0)
//!   or split (a partition per node, one homed task per partition a query reads).

use nearflow_policy::TaskKind;
use serde::Serialize;

/// Index of a task in [`Graph::tasks`].
pub type TaskId = u32;
/// Index of a block in [`Graph::blocks`].
pub type BlockId = u32;

/// One data block.
#[derive(Clone, Debug, Serialize)]
pub struct Block {
    pub bytes: u64,
    /// The node it lives on before the run (input data); `None` for a block some task writes.
    pub home: Option<usize>,
}

/// A spawn a task makes when it ends.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spawn {
    pub task: TaskId,
    pub kind: TaskKind,
    /// The NUMA node of the child's data (`spawn_deferred_at`), if it has one.
    pub home: Option<usize>,
    /// The PU the child is mapped to (`TaskCx::spawn_at` with a PU home: StreamMap's mapped
    /// threads), if any; it takes precedence over `home`.
    #[serde(default)]
    pub pu: Option<usize>,
}

/// One task.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Task {
    /// The request it belongs to (`0..Graph::requests`).
    pub request: u32,
    /// Its own work, in ns on an otherwise idle core, with its data in L1.
    pub work_ns: f64,
    pub reads: Vec<BlockId>,
    pub writes: Vec<BlockId>,
    /// Blocks no task reads after this one (their memory is freed: dropped from every cache).
    pub frees: Vec<BlockId>,
    pub spawns: Vec<Spawn>,
    /// How many tasks spawn it: more than one makes it a join node (the continuation after a
    /// `join` or a `scope`), ready when the last of them ends, in the kind and home that one
    /// gives. 0 and 1 both mean one.
    #[serde(default)]
    pub joins: u32,
    /// A `join`'s side (or the code after a join): when the worker that spawned it takes it
    /// back from its own queue, the runtime runs it as a call ([`crate::Model::call_ns`]
    /// instead of `task_ns`); taken by another worker it is a task like any other.
    #[serde(default)]
    pub call: bool,
}

/// Requests, their tasks and their data.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Graph {
    /// What it is, for tables.
    pub name: String,
    pub tasks: Vec<Task>,
    pub blocks: Vec<Block>,
    /// The root task of each request, and its data home if it has one; all are submitted at
    /// time 0, in this order (request `r` has id `r`).
    pub roots: Vec<(TaskId, Option<usize>)>,
}

/// A workload that cannot be built as asked.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("{0}")]
    Invalid(String),
}

impl Graph {
    fn new(name: impl Into<String>) -> Self {
        Graph {
            name: name.into(),
            ..Graph::default()
        }
    }

    pub(crate) fn task(&mut self, t: Task) -> TaskId {
        self.tasks.push(t);
        (self.tasks.len() - 1) as TaskId
    }

    /// A task of request `r` that only works.
    fn plain(&mut self, r: u32, work_ns: f64) -> TaskId {
        self.task(Task {
            request: r,
            work_ns,
            ..Task::default()
        })
    }

    pub(crate) fn block(&mut self, bytes: u64, home: Option<usize>) -> BlockId {
        self.blocks.push(Block { bytes, home });
        (self.blocks.len() - 1) as BlockId
    }

    pub(crate) fn spawn(
        &mut self,
        parent: TaskId,
        child: TaskId,
        kind: TaskKind,
        home: Option<usize>,
    ) {
        self.tasks[parent as usize].spawns.push(Spawn {
            task: child,
            kind,
            home,
            pu: None,
        });
    }

    /// Number of requests.
    pub fn requests(&self) -> usize {
        self.roots.len()
    }

    /// Σ of the tasks' own work.
    pub fn total_work_ns(&self) -> f64 {
        self.tasks.iter().map(|t| t.work_ns).sum()
    }

    /// Checks that every task is the root of one request or spawned exactly once, by a task of
    /// its own request, and that every block index is in range.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Invalid(m));
        let mut parents = vec![0u32; self.tasks.len()];
        for (r, &(t, _)) in self.roots.iter().enumerate() {
            let Some(task) = self.tasks.get(t as usize) else {
                return bad(format!("root {t} of request {r} is not a task"));
            };
            if task.request as usize != r {
                return bad(format!(
                    "root {t} belongs to request {}, not {r}",
                    task.request
                ));
            }
            parents[t as usize] += 1;
        }
        for (i, t) in self.tasks.iter().enumerate() {
            for s in &t.spawns {
                let Some(c) = self.tasks.get(s.task as usize) else {
                    return bad(format!("task {i} spawns {}, which is not a task", s.task));
                };
                if c.request != t.request {
                    return bad(format!("task {i} spawns {} of another request", s.task));
                }
                parents[s.task as usize] += 1;
            }
            for &b in t.reads.iter().chain(&t.writes).chain(&t.frees) {
                if b as usize >= self.blocks.len() {
                    return bad(format!("task {i} names block {b}, which does not exist"));
                }
            }
            if !t.work_ns.is_finite() || t.work_ns < 0.0 {
                return bad(format!("task {i} has work {} ns", t.work_ns));
            }
        }
        if let Some(i) = parents
            .iter()
            .zip(&self.tasks)
            .position(|(&p, t)| p != t.joins.max(1))
        {
            return bad(format!(
                "task {i} is spawned by {} tasks, not {}",
                parents[i],
                self.tasks[i].joins.max(1)
            ));
        }
        Ok(())
    }
}

/// Fork-join Fibonacci: each call a task that spawns two immediate children (`bench overhead`'s
/// fib); `requests` copies.
pub fn fib(n: u32, work_ns: f64, requests: u32) -> Result<Graph, WorkloadError> {
    if n > 30 {
        return Err(WorkloadError::Invalid(format!(
            "fib({n}) has too many tasks; use at most 30"
        )));
    }
    let mut g = Graph::new(format!("fib({n}) x{requests}"));
    for r in 0..requests {
        let root = g.plain(r, work_ns);
        g.roots.push((root, None));
        let mut stack = vec![(root, n)];
        while let Some((t, k)) = stack.pop() {
            if k >= 2 {
                for c in [k - 1, k - 2] {
                    let child = g.plain(r, work_ns);
                    g.spawn(t, child, TaskKind::Immediate, None);
                    stack.push((child, c));
                }
            }
        }
    }
    Ok(g)
}

/// One task spawning `n - 1` deferred tasks (`bench overhead`'s fan-out); `requests` copies.
pub fn fanout(n: u32, work_ns: f64, requests: u32) -> Result<Graph, WorkloadError> {
    if n == 0 {
        return Err(WorkloadError::Invalid("fan-out of 0 tasks".into()));
    }
    let mut g = Graph::new(format!("fanout({n}) x{requests}"));
    for r in 0..requests {
        let root = g.plain(r, work_ns);
        g.roots.push((root, None));
        for _ in 1..n {
            let c = g.plain(r, work_ns);
            g.spawn(root, c, TaskKind::Deferred, None);
        }
    }
    Ok(g)
}

/// The queue study (`load-balancing-queues.txt` §III): C = A·B for n×n matrices of f64, one
/// deferred task per element of C reading row i of A and column j of B (both on node 0, where
/// one thread built them), `ns_per_madd` per multiply-add.
pub fn matmul(n: u32, ns_per_madd: f64) -> Result<Graph, WorkloadError> {
    if n == 0 || n > 2048 {
        return Err(WorkloadError::Invalid(format!(
            "matrix size {n}: use 1 to 2048"
        )));
    }
    let mut g = Graph::new(format!("matmul {n}x{n}"));
    let row_bytes = u64::from(n) * 8;
    let rows: Vec<BlockId> = (0..n).map(|_| g.block(row_bytes, Some(0))).collect();
    let cols: Vec<BlockId> = (0..n).map(|_| g.block(row_bytes, Some(0))).collect();
    let root = g.task(Task::default());
    g.roots.push((root, None));
    for &row in &rows {
        for &col in &cols {
            let t = g.task(Task {
                request: 0,
                work_ns: f64::from(n) * ns_per_madd,
                reads: vec![row, col],
                ..Task::default()
            });
            g.spawn(root, t, TaskKind::Deferred, None);
        }
    }
    Ok(g)
}

/// Shape of [`pipeline`] requests.
#[derive(Clone, Debug, Serialize)]
pub struct PipelineSpec {
    /// Concurrent requests.
    pub requests: u32,
    /// Packets each request's source produces.
    pub packets: u32,
    /// Operators after the source, each one step of every packet.
    pub operators: u32,
    pub packet_bytes: u64,
    /// Work per byte of a packet in one operator (ns/B).
    pub ns_per_byte: f64,
    /// Whether a request's input lives on one node (node `r % nodes`, then its packets are
    /// spawned homed there) or was built by one thread on node 0.
    pub homed_input: bool,
    pub nodes: usize,
}

/// Requests of `packets` packets, each read from the request's input, then passed through
/// `operators` steps; a step reads the packet its predecessor wrote, writes its own, frees the
/// one it read, and spawns the next step as an immediate task (the consumer runs near the
/// producer's data). The source spawns the packets' first steps as deferred tasks.
pub fn pipeline(spec: &PipelineSpec) -> Result<Graph, WorkloadError> {
    if spec.packets == 0 || spec.packet_bytes == 0 || spec.nodes == 0 {
        return Err(WorkloadError::Invalid(
            "a pipeline needs packets, a packet size and a node".into(),
        ));
    }
    let mut g = Graph::new(format!(
        "pipeline {} req x {} packets x {} ops, {} B packets",
        spec.requests, spec.packets, spec.operators, spec.packet_bytes
    ));
    let work = spec.packet_bytes as f64 * spec.ns_per_byte;
    for r in 0..spec.requests {
        let node = if spec.homed_input {
            r as usize % spec.nodes
        } else {
            0
        };
        let root = g.task(Task {
            request: r,
            ..Task::default()
        });
        g.roots.push((root, spec.homed_input.then_some(node)));
        for _ in 0..spec.packets {
            let input = g.block(spec.packet_bytes, Some(node));
            let mut prev = g.block(spec.packet_bytes, None);
            let first = g.task(Task {
                request: r,
                work_ns: work,
                reads: vec![input],
                writes: vec![prev],
                ..Task::default()
            });
            g.spawn(
                root,
                first,
                TaskKind::Deferred,
                spec.homed_input.then_some(node),
            );
            let mut parent = first;
            for _ in 0..spec.operators {
                let out = g.block(spec.packet_bytes, None);
                let t = g.task(Task {
                    request: r,
                    work_ns: work,
                    reads: vec![prev],
                    writes: vec![out],
                    frees: vec![prev],
                    ..Task::default()
                });
                g.spawn(parent, t, TaskKind::Immediate, None);
                parent = t;
                prev = out;
            }
            g.tasks[parent as usize].frees.push(prev);
        }
    }
    Ok(g)
}

/// Shape of [`similarity`] requests.
#[derive(Clone, Debug, Serialize)]
pub struct SimilaritySpec {
    /// Concurrent requests, each a batch of queries.
    pub requests: u32,
    pub queries: u32,
    pub nodes: usize,
    /// The database's size, in `chunks` equal blocks (LSH buckets' vectors).
    pub db_bytes: u64,
    pub chunks: u32,
    /// Chunks a query ranks (its candidates), drawn at random per query.
    pub probes: u32,
    /// Ranking work per candidate byte (ns/B); a query's probe keys cost `key_ns`.
    pub ns_per_byte: f64,
    pub key_ns: f64,
    /// Split (Fig. 6) or plain (Fig. 4).
    pub split: bool,
    pub seed: u64,
}

/// `bench split`'s similarity search (`numa-template-library-splittable-data.txt` §2.3, §3):
/// each request's root spawns its queries as deferred tasks. **Plain**: the database was built
/// by one thread, so every chunk is on node 0, and a query task computes its keys and ranks its
/// candidate chunks wherever it runs. **Split**: chunk `c` is on node `c · nodes / chunks`
/// (one partition per node); a query task computes its keys and spawns one deferred task per
/// node holding some of its candidates, homed there, which ranks those. The candidates are the
/// same in both (same seed), so the work is too; only where the data is differs. The final
/// merge of the partial top-k lists is left out (a few hundred bytes per query).
pub fn similarity(spec: &SimilaritySpec) -> Result<Graph, WorkloadError> {
    if spec.chunks == 0 || spec.nodes == 0 || spec.probes == 0 || spec.probes > spec.chunks {
        return Err(WorkloadError::Invalid(
            "a similarity search needs chunks, a node, and 1 to `chunks` probes".into(),
        ));
    }
    let ok = |x: f64| x.is_finite() && x >= 0.0;
    if !ok(spec.ns_per_byte) || !ok(spec.key_ns) {
        return Err(WorkloadError::Invalid("costs must be numbers ≥ 0".into()));
    }
    let mut g = Graph::new(format!(
        "similarity ({}) {} req x {} queries, {} B database",
        if spec.split { "split" } else { "plain" },
        spec.requests,
        spec.queries,
        spec.db_bytes
    ));
    let chunk_bytes = (spec.db_bytes / u64::from(spec.chunks)).max(1);
    let node_of = |c: u32| (c as usize * spec.nodes) / spec.chunks as usize;
    let chunks: Vec<BlockId> = (0..spec.chunks)
        .map(|c| g.block(chunk_bytes, Some(if spec.split { node_of(c) } else { 0 })))
        .collect();
    let rank = chunk_bytes as f64 * spec.ns_per_byte;
    let mut rng = nearflow_policy::Rng::new(spec.seed);
    for r in 0..spec.requests {
        let root = g.plain(r, 0.0);
        g.roots.push((root, None));
        for _ in 0..spec.queries {
            let mut picked: Vec<u32> = Vec::with_capacity(spec.probes as usize);
            while picked.len() < spec.probes as usize {
                let c = (rng.next_u64() % u64::from(spec.chunks)) as u32;
                if !picked.contains(&c) {
                    picked.push(c);
                }
            }
            picked.sort_unstable();
            if !spec.split {
                let q = g.task(Task {
                    request: r,
                    work_ns: spec.key_ns + rank * picked.len() as f64,
                    reads: picked.iter().map(|&c| chunks[c as usize]).collect(),
                    ..Task::default()
                });
                g.spawn(root, q, TaskKind::Deferred, None);
                continue;
            }
            let q = g.plain(r, spec.key_ns);
            g.spawn(root, q, TaskKind::Deferred, None);
            for node in 0..spec.nodes {
                let mine: Vec<BlockId> = picked
                    .iter()
                    .filter(|&&c| node_of(c) == node)
                    .map(|&c| chunks[c as usize])
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let t = g.task(Task {
                    request: r,
                    work_ns: rank * mine.len() as f64,
                    reads: mine,
                    ..Task::default()
                });
                g.spawn(q, t, TaskKind::Deferred, Some(node));
            }
        }
    }
    Ok(g)
}

/// Random spawn trees (`nearflow stress`): `requests` trees of `tasks` tasks each, every task
/// spawning up to 3 children, immediate or deferred at random, work uniform in
/// `[0, 2 · work_ns]`; deterministic for a seed.
pub fn stress(requests: u32, tasks: u32, work_ns: f64, seed: u64) -> Result<Graph, WorkloadError> {
    if tasks == 0 {
        return Err(WorkloadError::Invalid("a stress tree needs a task".into()));
    }
    let mut rng = nearflow_policy::Rng::new(seed);
    let mut g = Graph::new(format!("stress {requests} x {tasks} tasks"));
    for r in 0..requests {
        let work = |rng: &mut nearflow_policy::Rng| {
            work_ns * 2.0 * (rng.next_u64() % 1024) as f64 / 1023.0
        };
        let root = g.task(Task {
            request: r,
            work_ns: work(&mut rng),
            ..Task::default()
        });
        g.roots.push((root, None));
        let mut open = std::collections::VecDeque::from([root]);
        let mut made = 1;
        while made < tasks {
            let Some(parent) = open.pop_front() else {
                break;
            };
            let kids = 1 + rng.below(3);
            for _ in 0..kids {
                if made == tasks {
                    break;
                }
                let kind = if rng.below(2) == 0 {
                    TaskKind::Immediate
                } else {
                    TaskKind::Deferred
                };
                let c = g.task(Task {
                    request: r,
                    work_ns: work(&mut rng),
                    ..Task::default()
                });
                g.spawn(parent, c, kind, None);
                open.push_back(c);
                made += 1;
            }
        }
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_make_valid_graphs() {
        let fib = fib(10, 10.0, 2).unwrap();
        fib.validate().unwrap();
        assert_eq!(fib.tasks.len(), 2 * 177);
        let f = fanout(100, 10.0, 3).unwrap();
        f.validate().unwrap();
        assert_eq!(f.tasks.len(), 300);
        let m = matmul(16, 1.0).unwrap();
        m.validate().unwrap();
        assert_eq!(m.tasks.len(), 1 + 256);
        let p = pipeline(&PipelineSpec {
            requests: 4,
            packets: 8,
            operators: 5,
            packet_bytes: 1 << 16,
            ns_per_byte: 0.5,
            homed_input: true,
            nodes: 2,
        })
        .unwrap();
        p.validate().unwrap();
        assert_eq!(p.tasks.len(), 4 * (1 + 8 * 6));
        let s = stress(3, 500, 100.0, 7).unwrap();
        s.validate().unwrap();
        assert_eq!(s.tasks.len(), 1500);
    }

    /// Plain and split similarity searches read the same candidates (same work, same bytes),
    /// but only the split one spreads the database over the nodes and homes its pieces there.
    #[test]
    fn similarity_versions_differ_only_in_where_data_is() {
        let spec = |split| SimilaritySpec {
            requests: 2,
            queries: 50,
            nodes: 4,
            db_bytes: 64 << 20,
            chunks: 64,
            probes: 8,
            ns_per_byte: 0.25,
            key_ns: 500.0,
            split,
            seed: 3,
        };
        let plain = similarity(&spec(false)).unwrap();
        let split = similarity(&spec(true)).unwrap();
        plain.validate().unwrap();
        split.validate().unwrap();
        assert!((plain.total_work_ns() - split.total_work_ns()).abs() < 1e-3);
        let read = |g: &Graph| -> u64 {
            g.tasks
                .iter()
                .flat_map(|t| &t.reads)
                .map(|&b| g.blocks[b as usize].bytes)
                .sum()
        };
        assert_eq!(read(&plain), read(&split));
        assert_eq!(read(&plain), 2 * 50 * 8 * (1 << 20));
        assert!(plain.blocks.iter().all(|b| b.home == Some(0)));
        let homes: std::collections::BTreeSet<_> =
            split.blocks.iter().filter_map(|b| b.home).collect();
        assert_eq!(homes.len(), 4);
        for t in &split.tasks {
            for sp in &t.spawns {
                let child = &split.tasks[sp.task as usize];
                if let Some(h) = sp.home {
                    assert!(child
                        .reads
                        .iter()
                        .all(|&b| split.blocks[b as usize].home == Some(h)));
                }
            }
        }
        assert!(similarity(&SimilaritySpec {
            probes: 65,
            ..spec(true)
        })
        .is_err());
    }

    #[test]
    fn validate_refuses_a_task_started_twice() {
        let mut g = fanout(3, 1.0, 1).unwrap();
        let s = g.tasks[0].spawns[0];
        g.tasks[0].spawns.push(s);
        assert!(g
            .validate()
            .unwrap_err()
            .to_string()
            .contains("spawned by 2 tasks, not 1"));
        assert!(matmul(0, 1.0).is_err() && fib(31, 1.0, 1).is_err());
    }
}
