//! The task-parallel set of `nearflow bench rayon` (fib, quicksort, mergesort, n-body,
//! n-queens, UTS, a sum, blocked matrix multiply) as task graphs, with their data homed: every
//! input array is split in contiguous partitions, one per NUMA node, each partition's blocks
//! on its node (a `SplittableData` layout), and where a split first cuts out a range that lies
//! within one partition, that half is spawned deferred at the partition's home (what
//! `par_iter()` over a `SplittableData` does); every other split spawns its halves immediate
//! (a `join`'s second side).
//!
//! The graphs' shapes are the programs' own: quicksort's split sizes come from partitioning
//! the real input ([`Shapes::quicksort_pivot`]), n-queens' leaf sizes from counting each
//! placement's nodes, UTS's tree from the same hash. Work per unit comes from [`Costs`],
//! measured by the caller on a real machine (the lab times the sequential kernels on its
//! host). Parallel loops are cut into `pieces` leaves, a stand-in for rayon's adaptive
//! splitting (which starts from one piece per worker and splits further where a piece is
//! stolen): the graph is static, so how finely it is cut is a parameter, stated with each
//! result. Results combined after a `join` (sums, counts) cost nothing here; the merges of
//! mergesort and the barrier between n-body steps are join nodes ([`Task::joins`]).

use nearflow_policy::TaskKind;

use crate::workload::{BlockId, Graph, Task, TaskId, WorkloadError};

/// Bytes of one data block.
const BLOCK: u64 = 64 << 10;

/// Work per unit, in ns, measured on a real machine (see the module docs).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Costs {
    /// One call of fib.
    pub fib: f64,
    /// One element through quicksort's partition.
    pub partition: f64,
    /// One element × log₂ of the piece, in a sequential sort of a piece.
    pub sort: f64,
    /// One element through a merge.
    pub merge: f64,
    /// One body–body interaction.
    pub interaction: f64,
    /// One node of the n-queens backtracking.
    pub queen: f64,
    /// One node of the UTS tree.
    pub uts: f64,
    /// One number through `map` and `sum`.
    pub sum: f64,
    /// One multiply-add of the matrix product.
    pub madd: f64,
    /// Not work: what a `join`'s side taken back by its spawner costs the runtime (the
    /// measurement behind [`crate::Model::call_ns`] for these graphs).
    pub call: f64,
}

/// What a graph needs of the real program: its sizes and the data-dependent shapes.
pub struct Shapes<'a> {
    pub fib: u32,
    /// The numbers the sorts sort (the same as the real run's).
    pub numbers: &'a [u32],
    /// Quicksort's partition: reorders the slice, returns the pivot's final position.
    pub quicksort_pivot: &'a dyn Fn(&mut [u32]) -> usize,
    pub bodies: u64,
    pub steps: u32,
    pub queens: u32,
    /// Nodes of the n-queens search below each of the n² placements of the first two rows.
    pub queen_nodes: &'a dyn Fn(u32) -> u64,
    pub uts_roots: u64,
    /// Whether a UTS node has children (from its hash), and its two children.
    pub uts_children: &'a dyn Fn(u64) -> Option<[u64; 2]>,
    /// The roots' nodes.
    pub uts_root: &'a dyn Fn(u64) -> u64,
    pub sum: u64,
    pub matmul: u64,
    pub block: u64,
}

/// How data is split over the nodes: items `0..len`, contiguous, one partition per node.
#[derive(Clone, Copy)]
struct Parts {
    len: u64,
    nodes: usize,
}

impl Parts {
    fn node_of(self, i: u64) -> usize {
        ((i as u128 * self.nodes as u128) / self.len.max(1) as u128) as usize
    }

    /// The node holding all of `lo..hi`, if one does.
    fn within(self, lo: u64, hi: u64) -> Option<usize> {
        (hi > lo && self.node_of(lo) == self.node_of(hi - 1)).then(|| self.node_of(lo))
    }
}

/// An array of `len` items of `size` bytes, in blocks homed per node.
struct Array {
    blocks: Vec<BlockId>,
    per_block: u64,
}

impl Array {
    fn new(g: &mut Graph, len: u64, size: u64, parts: Parts) -> Array {
        let per_block = (BLOCK / size).max(1);
        let n = len.div_ceil(per_block);
        let blocks = (0..n)
            .map(|b| {
                g.block(
                    BLOCK.min((len - b * per_block) * size),
                    Some(parts.node_of(b * per_block)),
                )
            })
            .collect();
        Array { blocks, per_block }
    }

    /// The blocks of items `lo..hi`.
    fn range(&self, lo: u64, hi: u64) -> Vec<BlockId> {
        if hi <= lo {
            return Vec::new();
        }
        self.blocks[(lo / self.per_block) as usize..=((hi - 1) / self.per_block) as usize].to_vec()
    }
}

/// A builder of one request's graph.
struct B<'g> {
    g: &'g mut Graph,
    parts: Parts,
    /// Work of a task that only splits its range (a `join` or a split of `par_iter`).
    split_ns: f64,
}

impl B<'_> {
    fn task(&mut self, work_ns: f64, reads: Vec<BlockId>) -> TaskId {
        self.g.task(Task {
            request: 0,
            work_ns,
            reads,
            ..Task::default()
        })
    }

    /// `parent` spawns `child`, which works on items `lo..hi`: deferred at the node that holds
    /// them when the parent's range `plo..phi` spanned several, else immediate.
    fn fork(
        &mut self,
        parent: TaskId,
        child: TaskId,
        (plo, phi): (u64, u64),
        (lo, hi): (u64, u64),
    ) {
        let home = match (self.parts.within(plo, phi), self.parts.within(lo, hi)) {
            (None, Some(n)) => Some(n),
            _ => None,
        };
        let kind = if home.is_some() {
            TaskKind::Deferred
        } else {
            TaskKind::Immediate
        };
        self.g.spawn(parent, child, kind, home);
    }

    /// A parallel loop over items `lo..hi` cut into leaves of about `leaf` items, each built by
    /// `leaf_task`; its root, and its leaves in order.
    fn par_loop(
        &mut self,
        lo: u64,
        hi: u64,
        leaf: u64,
        leaf_task: &mut dyn FnMut(&mut Self, u64, u64) -> TaskId,
        leaves: &mut Vec<TaskId>,
    ) -> TaskId {
        if hi - lo <= leaf.max(1) {
            let t = leaf_task(self, lo, hi);
            leaves.push(t);
            return t;
        }
        let mid = lo + (hi - lo) / 2;
        let s = self.task(self.split_ns, Vec::new());
        let l = self.par_loop(lo, mid, leaf, leaf_task, leaves);
        let r = self.par_loop(mid, hi, leaf, leaf_task, leaves);
        self.fork(s, l, (lo, hi), (lo, mid));
        self.fork(s, r, (lo, hi), (mid, hi));
        s
    }

    /// A join node after `preds` (each spawns it), of `work_ns` reading `reads`.
    fn join_node(&mut self, preds: &[TaskId], work_ns: f64, reads: Vec<BlockId>) -> TaskId {
        let t = self.task(work_ns, reads);
        self.g.tasks[t as usize].joins = preds.len() as u32;
        for &p in preds {
            self.g.spawn(p, t, TaskKind::Immediate, None);
        }
        t
    }
}

fn log2(n: u64) -> f64 {
    (n.max(2) as f64).log2()
}

/// Quicksort of `v` (items `base..`): a partition task per range over 1024 items, a sort task
/// per smaller one; returns the root.
fn quicksort(
    b: &mut B<'_>,
    arr: &Array,
    c: &Costs,
    s: &Shapes<'_>,
    v: &mut [u32],
    base: u64,
) -> TaskId {
    let (lo, hi) = (base, base + v.len() as u64);
    if v.len() <= 1024 {
        return b.task(
            c.sort * v.len() as f64 * log2(v.len() as u64),
            arr.range(lo, hi),
        );
    }
    let t = b.task(c.partition * v.len() as f64, arr.range(lo, hi));
    let mid = (s.quicksort_pivot)(v);
    let (left, right) = v.split_at_mut(mid);
    let l = quicksort(b, arr, c, s, left, lo);
    let r = quicksort(b, arr, c, s, &mut right[1..], lo + mid as u64 + 1);
    b.fork(t, l, (lo, hi), (lo, lo + mid as u64));
    b.fork(t, r, (lo, hi), (lo + mid as u64 + 1, hi));
    t
}

/// Mergesort of items `lo..hi`: (entry, exit) tasks; the exit is the merge after both halves.
fn mergesort(b: &mut B<'_>, arr: &Array, c: &Costs, lo: u64, hi: u64) -> (TaskId, TaskId) {
    let n = hi - lo;
    if n <= 4096 {
        let t = b.task(c.sort * n as f64 * log2(n), arr.range(lo, hi));
        return (t, t);
    }
    let mid = lo + n / 2;
    let s = b.task(b.split_ns, Vec::new());
    let (le, lx) = mergesort(b, arr, c, lo, mid);
    let (re, rx) = mergesort(b, arr, c, mid, hi);
    b.fork(s, le, (lo, hi), (lo, mid));
    b.fork(s, re, (lo, hi), (mid, hi));
    let m = b.join_node(&[lx, rx], c.merge * n as f64, arr.range(lo, hi));
    (s, m)
}

/// The UTS subtree of `node`: a task per node, its two children spawned immediate.
fn uts(b: &mut B<'_>, c: &Costs, s: &Shapes<'_>, root: TaskId, node: u64) {
    let mut stack = vec![(root, node)];
    while let Some((t, n)) = stack.pop() {
        if let Some(kids) = (s.uts_children)(n) {
            for k in kids {
                let child = b.task(c.uts, Vec::new());
                b.g.spawn(t, child, TaskKind::Immediate, None);
                stack.push((child, k));
            }
        }
    }
}

/// The graph of workload `name` (one request), its data homed over `nodes` nodes, its parallel
/// loops cut into `pieces` leaves.
pub fn graph(
    name: &str,
    s: &Shapes<'_>,
    c: &Costs,
    nodes: usize,
    pieces: u64,
) -> Result<Graph, WorkloadError> {
    if name == "fib" {
        let mut g = crate::workload::fib(s.fib, c.fib, 1)?;
        g.name = format!("fib({})", s.fib);
        mark_calls(&mut g);
        return Ok(g);
    }
    let mut g = Graph {
        name: name.to_string(),
        ..Graph::default()
    };
    let split_ns = c.fib; // a split does what a fib call does: a test and two spawns
    let pieces = pieces.max(1);
    let root = match name {
        "quicksort" | "mergesort" => {
            let n = s.numbers.len() as u64;
            let parts = Parts { len: n, nodes };
            let mut b = B { g: &mut g, parts, split_ns };
            let arr = Array::new(b.g, n, 4, parts);
            if name == "quicksort" {
                let mut v = s.numbers.to_vec();
                quicksort(&mut b, &arr, c, s, &mut v, 0)
            } else {
                mergesort(&mut b, &arr, c, 0, n).0
            }
        }
        "nbody" => {
            let n = s.bodies;
            let parts = Parts { len: n, nodes };
            let mut b = B { g: &mut g, parts, split_ns };
            // Each step reads every body of the step before (56 bytes each) and writes its own.
            let mut prev = Array::new(b.g, n, 56, parts);
            let mut start: Option<TaskId> = None;
            let mut barrier: Option<TaskId> = None;
            for _ in 0..s.steps.max(1) {
                let all = prev.range(0, n);
                let mut leaves = Vec::new();
                let root = b.par_loop(
                    0,
                    n,
                    n.div_ceil(pieces),
                    &mut |b, lo, hi| b.task(c.interaction * ((hi - lo) * n) as f64, all.clone()),
                    &mut leaves,
                );
                match barrier {
                    Some(bar) => b.g.spawn(bar, root, TaskKind::Immediate, None),
                    None => start = Some(root),
                }
                barrier = Some(b.join_node(&leaves, split_ns, Vec::new()));
                prev = Array::new(b.g, n, 56, parts);
            }
            start.expect("at least one step")
        }
        "nqueens" => {
            let n = u64::from(s.queens) * u64::from(s.queens);
            let mut b = B {
                g: &mut g,
                parts: Parts { len: n, nodes },
                split_ns,
            };
            b.par_loop(
                0,
                n,
                1,
                &mut |b, lo, _| b.task(c.queen * (s.queen_nodes)(lo as u32) as f64, Vec::new()),
                &mut Vec::new(),
            )
        }
        "uts" => {
            let n = s.uts_roots;
            let mut b = B {
                g: &mut g,
                parts: Parts { len: n, nodes },
                split_ns,
            };
            let mut roots = Vec::new();
            let r = b.par_loop(
                0,
                n,
                1,
                &mut |b, _, _| b.task(c.uts, Vec::new()),
                &mut roots,
            );
            for (i, &t) in roots.iter().enumerate() {
                uts(&mut b, c, s, t, (s.uts_root)(i as u64));
            }
            r
        }
        "sum" => {
            let n = s.sum;
            let mut b = B {
                g: &mut g,
                parts: Parts { len: n, nodes },
                split_ns,
            };
            b.par_loop(
                0,
                n,
                n.div_ceil(pieces),
                &mut |b, lo, hi| b.task(c.sum * (hi - lo) as f64, Vec::new()),
                &mut Vec::new(),
            )
        }
        "matmul" => {
            let (n, bs) = (s.matmul, s.block.max(1));
            let rows = n.div_ceil(bs);
            let parts = Parts { len: rows, nodes };
            let mut b = B { g: &mut g, parts, split_ns };
            // A and C by block row (homed per node), B whole (read by every task), f64s.
            let a = Array::new(b.g, n * n, 8, Parts { len: n * n, nodes });
            let bm = Array::new(b.g, n * n, 8, Parts { len: n * n, nodes });
            let all_b = bm.range(0, n * n);
            b.par_loop(
                0,
                rows,
                1,
                &mut |b, lo, hi| {
                    let mut reads = a.range(lo * bs * n, (hi * bs).min(n) * n);
                    reads.extend(&all_b);
                    b.task(c.madd * (bs * n * n) as f64, reads)
                },
                &mut Vec::new(),
            )
        }
        other => {
            return Err(WorkloadError::Invalid(format!(
                "unknown workload {other}; known: fib, quicksort, mergesort, nbody, nqueens, uts, sum, matmul"
            )))
        }
    };
    g.roots.push((root, None));
    mark_calls(&mut g);
    Ok(g)
}

/// Every task spawned immediate is a `join`'s side or the code after a join, which the
/// programs write as `join` ([`Task::call`]); those spawned deferred at a home are tasks.
fn mark_calls(g: &mut Graph) {
    let calls: Vec<TaskId> = g
        .tasks
        .iter()
        .flat_map(|t| &t.spawns)
        .filter(|s| s.kind == TaskKind::Immediate)
        .map(|s| s.task)
        .collect();
    for t in calls {
        g.tasks[t as usize].call = true;
    }
}
