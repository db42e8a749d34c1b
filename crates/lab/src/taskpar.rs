//! `nearflow bench rayon`: rayon's demo workloads and the classic task-parallel set, written
//! once and compiled twice — against `nearflow::{join, prelude}` and against
//! `rayon::{join, prelude}` (the `workloads!` macro: porting is a change of `use` lines) —
//! and timed side by side on this machine.
//!
//! The set: `fib` (fork-join, no work per task), `quicksort` and `mergesort` (divide and
//! conquer over a slice), `nbody` (an O(n²) step, `par_iter().map().collect()`), `nqueens`
//! (backtracking, a parallel top), `uts` (the unbalanced tree search's binomial tree: a
//! node has two children with probability q < ½, so subtrees are a handful of nodes or
//! thousands), `sum` (10⁸ numbers through `map` and `sum`), `matmul` (blocked, one task per
//! block row, `par_chunks_mut().enumerate()`).
//!
//! Interleaved rounds, as every timing bench here: each round runs every workload on each
//! contender, the contenders' order alternating from round to round, with a 5 ms pause before
//! each run so that the other pool's workers have gone to sleep; inputs are built before the
//! clock starts. A workload's time is the median over the rounds, and its ratio the median of
//! the per-round ratios nearflow / rayon. Every run's answer is checked against rayon's.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nearflow_policy::PolicyKind;
use nearflow_rt::Runtime;
use serde::Serialize;

use crate::harness::{load_machine, parse_list, progress, start_runtime, summary};
use crate::phase::Probe;
use crate::Report;

/// The workloads' source, once; `$join` and `$prelude` are the library's.
macro_rules! workloads {
    ($join:path, $prelude:path) => {
        use $join as join;
        #[allow(unused_imports)]
        use $prelude::*;

        pub fn fib(n: u32) -> u64 {
            if n < 2 {
                return u64::from(n);
            }
            let (a, b) = join(|| fib(n - 1), || fib(n - 2));
            a + b
        }

        /// Hoare-style partition around the middle element; its final position.
        pub fn partition(v: &mut [u32]) -> usize {
            let last = v.len() - 1;
            v.swap(v.len() / 2, last);
            let pivot = v[last];
            let mut store = 0;
            for i in 0..last {
                if v[i] < pivot {
                    v.swap(i, store);
                    store += 1;
                }
            }
            v.swap(store, last);
            store
        }

        pub fn quicksort(v: &mut [u32]) {
            if v.len() <= 1024 {
                v.sort_unstable();
                return;
            }
            let mid = partition(v);
            let (lo, hi) = v.split_at_mut(mid);
            join(|| quicksort(lo), || quicksort(&mut hi[1..]));
        }

        pub fn mergesort(v: &mut [u32], buf: &mut [u32]) {
            if v.len() <= 4096 {
                v.sort();
                return;
            }
            let mid = v.len() / 2;
            {
                let (vl, vr) = v.split_at_mut(mid);
                let (bl, br) = buf.split_at_mut(mid);
                join(|| mergesort(vl, bl), || mergesort(vr, br));
            }
            let (l, r) = v.split_at(mid);
            merge(l, r, buf);
            v.copy_from_slice(buf);
        }

        /// Merges the sorted `l` and `r` into `out` (their lengths' sum).
        pub fn merge(l: &[u32], r: &[u32], out: &mut [u32]) {
            let (mut i, mut j, mut k) = (0, 0, 0);
            while i < l.len() && j < r.len() {
                if r[j] < l[i] {
                    out[k] = r[j];
                    j += 1;
                } else {
                    out[k] = l[i];
                    i += 1;
                }
                k += 1;
            }
            out[k..k + l.len() - i].copy_from_slice(&l[i..]);
            let k = k + l.len() - i;
            out[k..].copy_from_slice(&r[j..]);
        }

        /// One step of the O(n²) n-body simulation: new positions and velocities.
        pub fn nbody_step(bodies: &[super::Body], dt: f64) -> Vec<super::Body> {
            bodies
                .par_iter()
                .map(|b| {
                    let mut acc = [0.0f64; 3];
                    for o in bodies {
                        let d = [
                            o.pos[0] - b.pos[0],
                            o.pos[1] - b.pos[1],
                            o.pos[2] - b.pos[2],
                        ];
                        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + 1e-3;
                        let f = o.mass / (r2 * r2.sqrt());
                        for k in 0..3 {
                            acc[k] += d[k] * f;
                        }
                    }
                    let mut nb = *b;
                    for k in 0..3 {
                        nb.vel[k] += acc[k] * dt;
                        nb.pos[k] += nb.vel[k] * dt;
                    }
                    nb
                })
                .collect()
        }

        /// Solutions below a placement (the sequential search both libraries run).
        pub fn queens_from(n: u32, cols: u32, d1: u32, d2: u32) -> u64 {
            super::queens(n, cols, d1, d2, 0)
        }

        /// The search below placement `k` of the first two rows (`k / n` in the first, `k % n`
        /// in the second), with `count` the search: `None` where the two clash.
        pub fn queens_at<R>(n: u32, k: u32, count: impl Fn(u32, u32, u32, u32) -> R) -> Option<R> {
            let full = (1u32 << n) - 1;
            let (a, b) = (1u32 << (k / n), 1u32 << (k % n));
            let (cols, d1, d2) = (a, (a << 1) & full, a >> 1);
            if (cols | d1 | d2) & b != 0 {
                return None;
            }
            Some(count(n, cols | b, ((d1 | b) << 1) & full, (d2 | b) >> 1))
        }

        /// Solutions of n queens; the first two rows' placements in parallel.
        pub fn nqueens(n: u32) -> u64 {
            (0..n * n)
                .into_par_iter()
                .map(|k| queens_at(n, k, queens_from).unwrap_or(0))
                .sum()
        }

        /// The nodes of the unbalanced (binomial) tree below `node`.
        fn uts_node(node: u64, q_millionths: u64) -> u64 {
            match super::uts_children(node, q_millionths) {
                None => 1,
                Some([l, r]) => {
                    let (a, b) = join(|| uts_node(l, q_millionths), || uts_node(r, q_millionths));
                    1 + a + b
                }
            }
        }

        /// The unbalanced tree search: a root with `roots` children, each a binomial tree.
        pub fn uts(roots: u64, q_millionths: u64) -> u64 {
            1 + (0..roots)
                .into_par_iter()
                .map(|i| uts_node(super::uts_root(i), q_millionths))
                .sum::<u64>()
        }

        pub fn sum(n: u64) -> u64 {
            (0..n).into_par_iter().map(|x| x ^ (x >> 7)).sum()
        }

        /// C = A·B for n×n row-major matrices, in `bs`-row blocks of C, one task each.
        pub fn matmul(a: &[f64], b: &[f64], c: &mut [f64], n: usize, bs: usize) {
            c.par_chunks_mut(n * bs).enumerate().for_each(|(bi, rows)| {
                for kb in (0..n).step_by(bs) {
                    for (ri, crow) in rows.chunks_mut(n).enumerate() {
                        let i = bi * bs + ri;
                        for k in kb..(kb + bs).min(n) {
                            let aik = a[i * n + k];
                            let brow = &b[k * n..(k + 1) * n];
                            for (cv, bv) in crow.iter_mut().zip(brow) {
                                *cv += aik * bv;
                            }
                        }
                    }
                }
            });
        }
    };
}

/// A body of the n-body workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Body {
    pos: [f64; 3],
    vel: [f64; 3],
    mass: f64,
}

/// UTS: the `i`th child of the root.
fn uts_root(i: u64) -> u64 {
    mix(i + 1)
}

/// UTS: a node's two children, or none (with probability 1 − q).
fn uts_children(node: u64, q_millionths: u64) -> Option<[u64; 2]> {
    (mix(node) % 1_000_000 < q_millionths).then(|| [mix(node ^ 0x51), mix(node ^ 0xA3)])
}

/// n-queens' backtracking from a placement: the complete placements below it, plus
/// `per_node` for every node it visits on the way (0: the solutions; 1: the nodes, itself
/// included).
fn queens(n: u32, cols: u32, d1: u32, d2: u32, per_node: u64) -> u64 {
    let full = (1u32 << n) - 1;
    if cols == full {
        return 1;
    }
    let mut free = full & !(cols | d1 | d2);
    let mut count = per_node;
    while free != 0 {
        let bit = free & free.wrapping_neg();
        free ^= bit;
        count += queens(
            n,
            cols | bit,
            ((d1 | bit) << 1) & full,
            (d2 | bit) >> 1,
            per_node,
        );
    }
    count
}

/// n-queens: the nodes the backtracking visits from a placement (itself included).
fn queen_nodes(n: u32, cols: u32, d1: u32, d2: u32) -> u64 {
    queens(n, cols, d1, d2, 1)
}

/// splitmix64's finaliser: the inputs' and the tree's pseudo-random numbers.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The workloads on nearflow.
mod on_nearflow {
    workloads!(nearflow_rt::join, nearflow_par::prelude);
}

/// The same source on rayon.
mod on_rayon {
    workloads!(rayon::join, rayon::prelude);
}

/// The problem sizes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sizes {
    pub fib: u32,
    pub sort: usize,
    pub bodies: usize,
    pub steps: usize,
    pub queens: u32,
    pub uts_roots: u64,
    /// The UTS branching probability, in millionths.
    pub uts_q: u64,
    pub sum: u64,
    pub matmul: usize,
    pub block: usize,
}

impl Sizes {
    /// Tens to hundreds of milliseconds per run on two cores.
    pub const FULL: Sizes = Sizes {
        fib: 32,
        sort: 4_000_000,
        bodies: 3_000,
        steps: 3,
        queens: 13,
        uts_roots: 20_000,
        uts_q: 490_000,
        sum: 100_000_000,
        matmul: 512,
        block: 64,
    };

    /// Milliseconds: the correctness checks.
    pub const TINY: Sizes = Sizes {
        fib: 16,
        sort: 20_000,
        bodies: 64,
        steps: 2,
        queens: 8,
        uts_roots: 100,
        uts_q: 450_000,
        sum: 100_000,
        matmul: 64,
        block: 16,
    };
}

/// The workloads, by name.
pub const WORKLOADS: [&str; 8] = [
    "fib",
    "quicksort",
    "mergesort",
    "nbody",
    "nqueens",
    "uts",
    "sum",
    "matmul",
];

/// The workloads a comma-separated list names, in its order.
fn workloads_of(list: &str) -> Result<Vec<&'static str>> {
    list.split(',')
        .map(|w| {
            WORKLOADS
                .iter()
                .copied()
                .find(|k| *k == w.trim())
                .with_context(|| format!("unknown workload `{w}`; known: {}", WORKLOADS.join(", ")))
        })
        .collect()
}

/// A workload's inputs, built before the clock starts.
enum Input {
    None,
    Numbers(Vec<u32>),
    Bodies(Vec<Body>),
    Matrices(Vec<f64>, Vec<f64>),
}

fn input(workload: &str, s: &Sizes) -> Input {
    match workload {
        "quicksort" | "mergesort" => {
            Input::Numbers((0..s.sort as u64).map(|i| mix(i) as u32).collect())
        }
        "nbody" => Input::Bodies(
            (0..s.bodies as u64)
                .map(|i| {
                    let r = |k: u64| (mix(i * 8 + k) % 10_000) as f64 / 100.0;
                    Body {
                        pos: [r(0), r(1), r(2)],
                        vel: [0.0; 3],
                        mass: 1.0 + r(3) / 100.0,
                    }
                })
                .collect(),
        ),
        "matmul" => {
            let n = s.matmul;
            let m = |seed: u64| {
                (0..(n * n) as u64)
                    .map(|i| (mix(i ^ seed) % 100) as f64 / 10.0)
                    .collect()
            };
            Input::Matrices(m(1), m(2))
        }
        _ => Input::None,
    }
}

/// Runs `workload` on `input` (a copy of it where the workload writes) with nearflow's or
/// rayon's source; its answer as a number (a count, a sum, a checksum).
fn run_once(workload: &str, s: &Sizes, input: &Input, nearflow: bool) -> (Duration, u64) {
    macro_rules! pick {
        ($f:ident ( $($a:expr),* )) => {
            if nearflow { on_nearflow::$f($($a),*) } else { on_rayon::$f($($a),*) }
        };
    }
    let checksum = |v: &[u32]| -> u64 {
        assert!(v.windows(2).all(|w| w[0] <= w[1]), "{workload}: not sorted");
        v.iter().enumerate().fold(0u64, |h, (i, &x)| {
            h.wrapping_mul(31).wrapping_add(u64::from(x) ^ i as u64)
        })
    };
    match (workload, input) {
        ("quicksort", Input::Numbers(v)) => {
            let mut v = v.clone();
            let t = Instant::now();
            pick!(quicksort(&mut v));
            (t.elapsed(), checksum(&v))
        }
        ("mergesort", Input::Numbers(v)) => {
            let mut v = v.clone();
            let mut buf = vec![0u32; v.len()];
            let t = Instant::now();
            pick!(mergesort(&mut v, &mut buf));
            (t.elapsed(), checksum(&v))
        }
        ("nbody", Input::Bodies(b)) => {
            let t = Instant::now();
            let mut bodies = b.clone();
            for _ in 0..s.steps {
                bodies = pick!(nbody_step(&bodies, 0.01));
            }
            let d = t.elapsed();
            let e: f64 = bodies
                .iter()
                .map(|b| b.vel.iter().map(|v| v * v).sum::<f64>() * b.mass)
                .sum();
            (d, (e * 1e3) as u64)
        }
        ("matmul", Input::Matrices(a, b)) => {
            let mut c = vec![0.0f64; a.len()];
            let t = Instant::now();
            pick!(matmul(a, b, &mut c, s.matmul, s.block));
            (t.elapsed(), c.iter().sum::<f64>() as u64)
        }
        (w, _) => {
            let t = Instant::now();
            let v = match w {
                "fib" => pick!(fib(s.fib)),
                "nqueens" => pick!(nqueens(s.queens)),
                "uts" => pick!(uts(s.uts_roots, s.uts_q)),
                "sum" => pick!(sum(s.sum)),
                other => unreachable!("workload {other} has its input"),
            };
            (t.elapsed(), v)
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Workloads (comma-separated), default all.
    pub workloads: String,
    /// nearflow's policies to run (comma-separated; the goal is LAS's).
    pub policies: String,
    /// Interleaved rounds.
    pub rounds: usize,
    /// The problem sizes.
    pub sizes: Sizes,
    /// No progress bar.
    pub quiet: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub workload: String,
    /// `rayon`, or the nearflow policy.
    pub contender: String,
    /// Median ms over the rounds, and the 10th/90th percentiles.
    pub ms: f64,
    pub ms_spread: [f64; 2],
    /// Median over the rounds of (this run / rayon's in the same round); 1 for rayon.
    pub ratio_to_rayon: f64,
    pub ratio_spread: [f64; 2],
    /// The answer, the same for every contender (checked).
    pub answer: u64,
}

/// Runs the suite.
pub fn run(cmd: &Config) -> Result<Report<Vec<Row>>> {
    use std::fmt::Write;
    let machine = load_machine(&nearflow_topo::TopologySpec::Host)?;
    let threads = machine.pu_count();
    let policies: Vec<PolicyKind> = parse_list(&cmd.policies)?;
    let workloads = workloads_of(&cmd.workloads)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("rayon pool")?;
    let runtimes: Vec<Runtime> = policies
        .iter()
        .map(|&p| {
            start_runtime(
                Runtime::builder(machine.clone()).policy(p),
                nearflow_rt::AllocatorKind::Nearflow,
            )
        })
        .collect::<Result<_>>()?;
    let rounds = cmd.rounds.max(1);
    let contenders = 1 + runtimes.len();
    let bar = progress(
        (rounds * workloads.len() * contenders) as u64,
        "rayon suite",
        cmd.quiet,
    );
    // times[workload][contender][round] in ms; answers[workload][contender].
    let mut times = vec![vec![Vec::with_capacity(rounds); contenders]; workloads.len()];
    let mut answers = vec![vec![None::<u64>; contenders]; workloads.len()];
    let mut probe = Probe::new();
    for round in 0..rounds {
        probe.sample();
        for (wi, w) in workloads.iter().enumerate() {
            let inp = input(w, &cmd.sizes);
            for k in 0..contenders {
                // Alternate who goes first.
                let c = if round % 2 == 0 {
                    k
                } else {
                    contenders - 1 - k
                };
                std::thread::sleep(Duration::from_millis(5));
                let (d, answer) = if c == 0 {
                    pool.install(|| run_once(w, &cmd.sizes, &inp, false))
                } else {
                    runtimes[c - 1].install(|| run_once(w, &cmd.sizes, &inp, true))
                };
                match answers[wi][c] {
                    Some(a) if a != answer => {
                        anyhow::bail!("{w}: contender {c} answered {answer}, earlier {a}")
                    }
                    _ => answers[wi][c] = Some(answer),
                }
                times[wi][c].push(d.as_secs_f64() * 1e3);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let mut rows = Vec::new();
    for (wi, w) in workloads.iter().enumerate() {
        let reference = answers[wi][0];
        for c in 0..contenders {
            if answers[wi][c] != reference {
                anyhow::bail!(
                    "{w}: nearflow answered {:?}, rayon {:?}",
                    answers[wi][c],
                    reference
                );
            }
            let (ms, ms_spread) = summary(times[wi][c].clone());
            let (ratio, ratio_spread) = summary(
                times[wi][c]
                    .iter()
                    .zip(&times[wi][0])
                    .map(|(a, b)| a / b)
                    .collect(),
            );
            rows.push(Row {
                workload: (*w).into(),
                contender: if c == 0 {
                    "rayon".into()
                } else {
                    format!("nearflow {}", policies[c - 1].name())
                },
                ms,
                ms_spread,
                ratio_to_rayon: ratio,
                ratio_spread,
                answer: reference.unwrap_or_default(),
            });
        }
    }
    let mut out = String::new();
    writeln!(
        out,
        "bench rayon on {} ({}): {threads} threads each, {rounds} interleaved rounds; ms median \
         [10th–90th percentile], and the median of per-round ratios to rayon [10th–90th]",
        machine.label(),
        nearflow_topo::host::cpu_label()
    )?;
    writeln!(
        out,
        "{:<11} {:<16} {:>28} {:>26}",
        "workload", "contender", "ms", "/ rayon"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<11} {:<16} {:>10.1} [{:>7.1}–{:<7.1}] {:>7.2}x [{:.2}–{:.2}]",
            r.workload,
            r.contender,
            r.ms,
            r.ms_spread[0],
            r.ms_spread[1],
            r.ratio_to_rayon,
            r.ratio_spread[0],
            r.ratio_spread[1]
        )?;
    }
    let s = &cmd.sizes;
    writeln!(
        out,
        "sizes: fib({}), sorts of {} u32, nbody {} bodies × {} steps, {}-queens, uts {} roots q={:.6}, \
         sum of {}, matmul {}² in {}-row blocks",
        s.fib,
        s.sort,
        s.bodies,
        s.steps,
        s.queens,
        s.uts_roots,
        s.uts_q as f64 / 1e6,
        s.sum,
        s.matmul,
        s.block
    )?;
    writeln!(out, "{}", probe.line())?;
    Ok(Report::new(rows, out).with_notes(probe.line()))
}

// ---- The same graphs in the simulator (SIMULATED) ----

/// Times `f` (its best of three runs), in ns.
fn best_ns(mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e9
        })
        .fold(f64::INFINITY, f64::min)
}

/// The work per unit of each workload, timed on one worker of this host (the simulator's
/// [`nearflow_sim::suite::Costs`]).
pub fn calibrate() -> Result<nearflow_sim::suite::Costs> {
    let one = Runtime::builder(nearflow_topo::from_synthetic("core:1 pu:1")?)
        .build()
        .context("a one-worker runtime")?;
    fn fib_seq(n: u32) -> u64 {
        if n < 2 {
            u64::from(n)
        } else {
            fib_seq(n - 1) + fib_seq(n - 2)
        }
    }
    let calls = |n: u32| -> f64 {
        let (mut a, mut b) = (1u64, 1u64);
        for _ in 1..n {
            (a, b) = (b, a + b + 1);
        }
        b as f64
    };
    let n = 1 << 20;
    let data: Vec<u32> = (0..n as u64).map(|i| mix(i) as u32).collect();
    let fib = best_ns(|| {
        std::hint::black_box(fib_seq(std::hint::black_box(25)));
    }) / calls(25);
    // The same calls through `join` on one worker: every second side is popped back and run
    // inline, so the difference per call is the fast path's cost (`Model::call_ns`).
    let fib_joined = best_ns(|| {
        std::hint::black_box(one.install(|| on_nearflow::fib(std::hint::black_box(25))));
    }) / calls(25);
    let call = (fib_joined - fib).max(0.0);
    let partition = best_ns(|| {
        let mut v = data.clone();
        std::hint::black_box(on_nearflow::partition(&mut v));
    }) / n as f64;
    let sort = best_ns(|| {
        let mut v = data.clone();
        v.chunks_mut(1024).for_each(|c| c.sort_unstable());
        std::hint::black_box(&v);
    }) / (n as f64 * 10.0);
    let (mut l, mut r) = (data[..n / 2].to_vec(), data[n / 2..].to_vec());
    l.sort_unstable();
    r.sort_unstable();
    let mut out = vec![0u32; n];
    let merge = best_ns(|| on_nearflow::merge(&l, &r, &mut out)) / n as f64;
    let bodies = match input(
        "nbody",
        &Sizes {
            bodies: 500,
            ..Sizes::TINY
        },
    ) {
        Input::Bodies(b) => b,
        _ => unreachable!("nbody's input is bodies"),
    };
    let interaction = best_ns(|| {
        std::hint::black_box(one.install(|| on_nearflow::nbody_step(&bodies, 0.01)));
    }) / (500.0 * 500.0);
    let queens = 11u32;
    let nodes: u64 = (0..queens * queens)
        .filter_map(|k| on_nearflow::queens_at(queens, k, queen_nodes))
        .sum();
    // Sequential, with no task in between: the simulator charges each task's own cost
    // (`Model::task_ns`) on top of its work.
    let queen = best_ns(|| {
        let found: u64 = (0..queens * queens)
            .filter_map(|k| on_nearflow::queens_at(queens, k, on_nearflow::queens_from))
            .sum();
        std::hint::black_box(found);
    }) / nodes as f64;
    fn uts_seq(node: u64, q: u64) -> u64 {
        match uts_children(node, q) {
            None => 1,
            Some([l, r]) => 1 + uts_seq(l, q) + uts_seq(r, q),
        }
    }
    let mut uts_nodes = 0;
    let uts = best_ns(|| {
        uts_nodes = (0..2_000)
            .map(|i| uts_seq(uts_root(i), Sizes::FULL.uts_q))
            .sum::<u64>();
    }) / uts_nodes.max(1) as f64;
    let sum = best_ns(|| {
        std::hint::black_box(one.install(|| on_nearflow::sum(10_000_000)));
    }) / 1e7;
    let (m, bs) = (256usize, 64usize);
    let (a, b) = match input(
        "matmul",
        &Sizes {
            matmul: m,
            ..Sizes::TINY
        },
    ) {
        Input::Matrices(a, b) => (a, b),
        _ => unreachable!("matmul's input is two matrices"),
    };
    let mut c = vec![0.0f64; m * m];
    let madd =
        best_ns(|| one.install(|| on_nearflow::matmul(&a, &b, &mut c, m, bs))) / (m * m * m) as f64;
    Ok(nearflow_sim::suite::Costs {
        fib,
        partition,
        sort,
        merge,
        interaction,
        queen,
        uts,
        sum,
        madd,
        call,
    })
}

/// `bench rayon --simulate`: what to simulate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub workloads: String,
    /// The simulated machine: a preset, `host`, `synthetic:STR` or `xml:PATH`.
    pub preset: String,
    pub sizes: Sizes,
    /// Parallel loops cut into this many leaves per PU of the simulated machine.
    pub pieces_per_pu: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SimRow {
    pub workload: String,
    pub tasks: usize,
    pub policy: String,
    pub makespan_ms: f64,
    /// NLS's makespan over LAS's (LAS's row: 1).
    pub nls_over_las: f64,
    /// Remote bytes over all bytes read.
    pub read_remote_share: f64,
    pub simulated: bool,
}

/// The suite's graphs on a model of `preset` (SIMULATED), LAS against NLS, with the work per
/// unit timed on this host.
pub fn simulate(cmd: &SimConfig) -> Result<Report<Vec<SimRow>>> {
    use std::fmt::Write;
    let machine = load_machine(&cmd.preset.parse::<nearflow_topo::TopologySpec>()?)?;
    let workloads = workloads_of(&cmd.workloads)?;
    let costs = calibrate()?;
    let model = nearflow_sim::Model {
        call_ns: costs.call,
        ..nearflow_sim::Model::default()
    };
    let sz = cmd.sizes;
    // fib's graph has a task per call: at most fib(25) (242,785 tasks) in the simulator.
    let fib = sz.fib.min(25);
    let numbers: Vec<u32> = (0..sz.sort as u64).map(|i| mix(i) as u32).collect();
    let q = sz.uts_q;
    let shapes = nearflow_sim::suite::Shapes {
        fib,
        numbers: &numbers,
        quicksort_pivot: &|v| on_nearflow::partition(v),
        bodies: sz.bodies as u64,
        steps: sz.steps as u32,
        queens: sz.queens,
        queen_nodes: &|k| on_nearflow::queens_at(sz.queens, k, queen_nodes).unwrap_or(0),
        uts_roots: sz.uts_roots,
        uts_children: &|n| uts_children(n, q),
        uts_root: &uts_root,
        sum: sz.sum,
        matmul: sz.matmul as u64,
        block: sz.block as u64,
    };
    let pieces = cmd.pieces_per_pu.max(1) * machine.pu_count() as u64;
    let mut rows = Vec::new();
    for w in &workloads {
        let g = nearflow_sim::suite::graph(w, &shapes, &costs, machine.node_count(), pieces)
            .map_err(|e| anyhow::anyhow!("{w}: {e}"))?;
        let mut las_ms = 0.0;
        for policy in [PolicyKind::Las, PolicyKind::Nls] {
            let r = nearflow_sim::simulate(
                &machine,
                policy,
                &model,
                &g,
                nearflow_sim::AllocatorKind::Nearflow,
                1,
            )
            .map_err(|e| anyhow::anyhow!("{w} under {policy}: {e}"))?;
            let ms = r.makespan_ns as f64 / 1e6;
            if policy == PolicyKind::Las {
                las_ms = ms;
            }
            rows.push(SimRow {
                workload: (*w).into(),
                tasks: g.tasks.len(),
                policy: policy.name().into(),
                makespan_ms: ms,
                nls_over_las: ms / las_ms,
                read_remote_share: r.read_remote_share,
                simulated: true,
            });
        }
    }
    let mut out = String::new();
    writeln!(
        out,
        "bench rayon --simulate {} (SIMULATED: {} PUs, {} nodes; work per unit timed on this host, {}); data split per node, parallel loops in {pieces} leaves",
        cmd.preset,
        machine.pu_count(),
        machine.node_count(),
        nearflow_topo::host::cpu_label()
    )?;
    writeln!(
        out,
        "{:<11} {:>9} {:<6} {:>12} {:>9} {:>14}",
        "workload", "tasks", "policy", "makespan ms", "NLS/LAS", "remote/read"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<11} {:>9} {:<6} {:>12.3} {:>9.2} {:>13.1}%",
            r.workload,
            r.tasks,
            r.policy,
            r.makespan_ms,
            r.nls_over_las,
            r.read_remote_share * 100.0
        )?;
    }
    let c = &costs;
    writeln!(
        out,
        "work per unit (ns, this host): fib call {:.2}, partition {:.2}/item, sort {:.2}/item·log2, merge {:.2}/item, interaction {:.2}, queen node {:.2}, uts node {:.2}, sum {:.3}/item, multiply-add {:.3}; a join's side taken back {:.2} (call_ns; a task {:.0})",
        c.fib, c.partition, c.sort, c.merge, c.interaction, c.queen, c.uts, c.sum, c.madd, c.call, model.task_ns
    )?;
    writeln!(
        out,
        "fib({fib}) in the simulator (a task per call); the other sizes as the timed suite's"
    )?;
    Ok(Report::new(rows, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every workload gives the same answer on both libraries (and a known one where there is
    /// one), at the tiny sizes, under every nearflow policy.
    #[test]
    fn both_libraries_compute_the_same_answers() {
        let s = Sizes::TINY;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        for policy in PolicyKind::ALL {
            let rt = Runtime::builder(nearflow_topo::presets::build("e5310-smp").unwrap())
                .policy(policy)
                .build()
                .unwrap();
            for w in WORKLOADS {
                let inp = input(w, &s);
                let (_, a) = rt.install(|| run_once(w, &s, &inp, true));
                let (_, b) = pool.install(|| run_once(w, &s, &inp, false));
                assert_eq!(a, b, "{w} under {policy}");
            }
        }
        assert_eq!(on_nearflow::fib(16), 987);
        assert_eq!(on_nearflow::nqueens(8), 92);
        assert_eq!(on_nearflow::nqueens(6), 4);
        assert_eq!(
            on_nearflow::sum(1000),
            (0..1000u64).map(|x| x ^ (x >> 7)).sum::<u64>()
        );
        // Matrix product against a plain triple loop.
        let n = 32;
        let a: Vec<f64> = (0..n * n).map(|i| (i % 7) as f64).collect();
        let b: Vec<f64> = (0..n * n).map(|i| (i % 5) as f64).collect();
        let mut c = vec![0.0; n * n];
        rt_install_matmul(&a, &b, &mut c, n);
        for i in 0..n {
            for j in 0..n {
                let want: f64 = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum();
                assert_eq!(c[i * n + j], want);
            }
        }
    }

    /// Every graph of the suite is valid and runs whole in the simulator, under LAS and NLS,
    /// on a 4-node preset and on a one-node synthetic machine.
    #[test]
    fn the_suite_runs_in_the_simulator() {
        for preset in ["e7-4820", "synthetic:core:2 pu:1"] {
            let r = simulate(&SimConfig {
                workloads: WORKLOADS.join(","),
                preset: preset.into(),
                sizes: Sizes::TINY,
                pieces_per_pu: 4,
            })
            .unwrap();
            assert_eq!(r.data.len(), 2 * WORKLOADS.len(), "{preset}");
            assert!(r
                .data
                .iter()
                .all(|row| row.simulated && row.makespan_ms > 0.0 && row.tasks > 0));
            assert!(r.text.contains("SIMULATED"));
        }
    }

    fn rt_install_matmul(a: &[f64], b: &[f64], c: &mut [f64], n: usize) {
        on_nearflow::matmul(a, b, c, n, 8);
    }
}
