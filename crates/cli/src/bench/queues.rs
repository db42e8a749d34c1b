//! `nearflow bench queues`: the queue study of `load-balancing-queues.txt` §III.
//!
//! Square matrix multiplication with one task per element of the product, as in the paper. The
//! request's root task spawns the n² element tasks (deferred by default: each reads its own row
//! of A and column of B, sharing little with the spawner; `--spawn immediate` puts them in the
//! root's immediate queue instead). Each cell is the median of `--reps` interleaved rounds (every
//! policy runs once per round, in a rotating order), beside the median of its per-round ratios to
//! the size's fastest policy (with their 10th–90th percentiles); each timed run follows
//! `--warmup` untimed runs of the same cell, and every product
//! is compared element by element with a sequential multiply that uses the same dot product, so
//! the check is exact. `--orders` adds contenders that compute the product on plain threads in
//! the orders the policies produce, with no runtime ([`orders`]), and then a table of each
//! policy's time over its own order's, round by round: what the runtime's queues add, apart from
//! the order they impose (each policy's order is read from its placement and search,
//! [`Order::of_policy`]).

mod orders;

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use nearflow_policy::{PolicyKind, Rng, TaskKind};
use nearflow_rt::{Pinning, Runtime};
use serde::Serialize;

use crate::args::{build_runtime, machine_label, parse_list, TopoArgs};
use crate::bench::overhead::summary;
use crate::bench::phase::Probe;
use crate::bench::{median, progress, Csv};
use orders::Order;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SpawnKind {
    Immediate,
    Deferred,
}

#[derive(Args, Debug, Clone)]
pub struct QueuesCmd {
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Matrix sizes (comma-separated).
    #[arg(long, default_value = "128,256,512,1024,2048")]
    pub sizes: String,
    /// Also run 4096 (16.8 M tasks, about 1.5 GB of queued tasks).
    #[arg(long)]
    pub with_4096: bool,
    /// Policies (comma-separated), in table order.
    #[arg(long, default_value = "central,per-thread,random-steal,nls,las")]
    pub policies: String,
    /// How the root spawns the element tasks.
    #[arg(long, value_enum, default_value = "deferred")]
    pub spawn: SpawnKind,
    /// Timed repetitions per cell (median reported).
    /// Range: 1..=1000.
    #[arg(value_parser = crate::args::int_in(1usize, 1000), long, default_value_t = 3)]
    pub reps: usize,
    /// Untimed runs of a cell right before each timed one (every product still verified):
    /// they meet the cold start after the pause between cells (see `bench plans --warmup`).
    /// Range: 0..=100.
    #[arg(value_parser = crate::args::int_in(0usize, 100), long, default_value_t = 1)]
    pub warmup: usize,
    /// Also time the product on plain threads (one per PU of the machine), without the runtime,
    /// in the orders in which the policies hand out the elements: `youngest-first` (LAS rule 3
    /// with one request), `oldest-first` (central, NLS, FIFO+RR), `both-ends` (random
    /// stealing), `blocks` (a static partition). They run in the same rounds as the policies,
    /// and a last table divides each policy's time by its own order's, round by round. Without
    /// a list, all four.
    #[arg(
        long,
        value_name = "ORDERS",
        num_args = 0..=1,
        default_missing_value = "youngest-first,oldest-first,both-ends,blocks"
    )]
    pub orders: Option<String>,
    /// Thread binding (only applied on the host).
    #[arg(long, default_value = "group")]
    pub pinning: Pinning,
    /// Also write the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// One cell of the table (a policy, or with `--orders` an order on plain threads, named
/// `order:…`). Every product is compared with the sequential multiply; a wrong one
/// fails the command, so a cell exists only for correct runs.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub size: usize,
    pub policy: String,
    pub ms: f64,
    pub tasks: u64,
    /// Median over the rounds of (this contender's time / the time of the size's fastest policy by
    /// median, in the same round); 1.0 for that policy.
    pub ratio_to_best: f64,
    /// 10th and 90th percentile of those per-round ratios.
    pub ratio_spread: [f64; 2],
    /// A policy's own order (`order:…`, [`Order::of_policy`]) when that order ran too.
    pub own_order: Option<String>,
    /// Median over the rounds of (this policy's time / its own order's time, in the same round):
    /// what the runtime adds to the cost of the order alone.
    pub ratio_to_own_order: Option<f64>,
    /// 10th and 90th percentile of those per-round ratios.
    pub own_order_spread: Option<[f64; 2]>,
}

/// Row-major square matrices, B stored transposed so every dot product reads contiguously.
struct Problem {
    n: usize,
    a: Vec<f64>,
    bt: Vec<f64>,
}

/// Dot product with four accumulators (vectorizes); the sequential reference uses it too.
fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for k in 0..4 {
            acc[k] += a[k] * b[k];
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (a, b) in xr.iter().zip(yr) {
        s += a * b;
    }
    s
}

impl Problem {
    fn new(n: usize, seed: u64) -> Problem {
        let mut rng = Rng::new(seed);
        let mut gen = || (rng.below(2001) as f64 - 1000.0) / 1000.0;
        let a = (0..n * n).map(|_| gen()).collect();
        let bt = (0..n * n).map(|_| gen()).collect();
        Problem { n, a, bt }
    }
    fn element(&self, i: usize, j: usize) -> f64 {
        let n = self.n;
        dot(&self.a[i * n..(i + 1) * n], &self.bt[j * n..(j + 1) * n])
    }
    fn sequential(&self) -> Vec<f64> {
        let n = self.n;
        (0..n * n).map(|k| self.element(k / n, k % n)).collect()
    }
}

/// Where an element task finds the problem and its element of the product: raw pointers, not
/// `Arc` clones, so that the n² tasks do not all increment and decrement the same two reference
/// counts from both workers. That cost a cache-line transfer between the cores at every spawn and
/// every task end, a cost of this benchmark rather than of any queue (the paper's Java tasks
/// hold plain references, and the `--orders` contenders pay nothing of the kind); without it
/// every policy ran 512 15–21 % faster here (issue 9, eleventh session).
#[derive(Clone, Copy)]
struct Operands {
    problem: *const Problem,
    product: *const AtomicU64,
}

// SAFETY: both point into data that `multiply` borrows or owns until `wait` has returned, and
// `wait` returns only once every task of the request has ended (run or skipped; a skipped task's
// closure is only dropped, which reads nothing). `Problem` is only read, the product's elements
// are atomics.
unsafe impl Send for Operands {}

impl Operands {
    /// The problem and element `k` of the product.
    ///
    /// # Safety
    /// `k` < n², from a task of the request `multiply` waits for.
    unsafe fn get<'a>(self, k: usize) -> (&'a Problem, &'a AtomicU64) {
        // SAFETY: see `Operands` and the contract above.
        unsafe { (&*self.problem, &*self.product.add(k)) }
    }
}

/// One parallel multiply; returns the time and the product.
fn multiply(rt: &Runtime, p: &Problem, kind: TaskKind) -> Result<(Duration, Vec<f64>)> {
    let n = p.n;
    let c: Vec<AtomicU64> = (0..n * n).map(|_| AtomicU64::new(0)).collect();
    let ops = Operands {
        problem: p,
        product: c.as_ptr(),
    };
    let t = Instant::now();
    rt.submit(move |cx| {
        for i in 0..n {
            for j in 0..n {
                cx.spawn(kind, move |_| {
                    // SAFETY: i, j < n, and `multiply` waits for this task.
                    let (p, c) = unsafe { ops.get(i * n + j) };
                    // Relaxed: each element is written by one task; the request's completion
                    // orders all writes before `wait` returns.
                    c.store(p.element(i, j).to_bits(), Ordering::Relaxed);
                });
            }
        }
    })
    .wait()?;
    let d = t.elapsed();
    let out = c
        .into_iter()
        .map(|x| f64::from_bits(x.into_inner()))
        .collect();
    Ok((d, out))
}

pub fn run(cmd: &QueuesCmd) -> Result<()> {
    let machine = cmd.topo.load()?;
    let label = machine_label(&machine);
    let mut sizes: Vec<usize> = parse_list(&cmd.sizes)?;
    if cmd.with_4096 && !sizes.contains(&4096) {
        sizes.push(4096);
    }
    if sizes.is_empty() || sizes.iter().any(|&s| s == 0 || s > 8192) {
        bail!("sizes must be between 1 and 8192 (got {sizes:?})");
    }
    let policies: Vec<PolicyKind> = parse_list(&cmd.policies)?;
    if policies.is_empty() {
        bail!("no policy given");
    }
    let kind = match cmd.spawn {
        SpawnKind::Immediate => TaskKind::Immediate,
        SpawnKind::Deferred => TaskKind::Deferred,
    };
    let runtimes: Vec<Runtime> = policies
        .iter()
        .map(|&p| {
            build_runtime(
                machine.clone(),
                p,
                cmd.pinning,
                false,
                nearflow_rt::Allocator::Nearflow,
            )
        })
        .collect::<Result<_, _>>()?;
    let orders: Vec<Order> = match &cmd.orders {
        Some(list) => parse_list(list)?,
        None => Vec::new(),
    };
    if cmd.orders.is_some() && orders.is_empty() {
        bail!("--orders: no order given");
    }
    // The contenders, in table order: the policies, then the orders.
    let names: Vec<&str> = policies
        .iter()
        .map(|p| p.name())
        .chain(orders.iter().map(|o| o.name()))
        .collect();
    // Each policy's own order, read from the runtime that runs it, if that order is among the
    // contenders: where in `names` it is.
    let own_order: Vec<Option<usize>> = runtimes
        .iter()
        .map(|rt| {
            let o = Order::of_policy(rt.policy(), kind)?;
            orders
                .iter()
                .position(|&x| x == o)
                .map(|i| policies.len() + i)
        })
        .collect();
    let threads = machine.pu_count();
    let bar = progress((sizes.len() * names.len()) as u64, "queues", cmd.json);
    let mut cells = Vec::new();
    let mut probe = Probe::new();
    for &n in &sizes {
        let p = Problem::new(n, n as u64);
        bar.set_message(format!("n = {n}: sequential reference"));
        let reference = p.sequential();
        // Interleaved rounds: each round runs every contender once, in an order that rotates from
        // round to round, so that the contenders of a size are measured side by side.
        let mut times = vec![Vec::new(); names.len()];
        for round in 0..cmd.reps.max(1) {
            probe.sample();
            for k in 0..names.len() {
                let i = (k + round) % names.len();
                let name = names[i];
                bar.set_message(format!("n = {n}: {name}, round {}", round + 1));
                // Let the previous policy's idle workers fall asleep first, then run the cell
                // untimed `--warmup` times (see `bench plans`), then timed.
                std::thread::sleep(std::time::Duration::from_millis(5));
                for run in 0..=cmd.warmup {
                    let (d, c) = match runtimes.get(i) {
                        Some(rt) => multiply(rt, &p, kind)?,
                        None => orders::multiply(&p, orders[i - runtimes.len()], threads)?,
                    };
                    if c != reference {
                        bail!("{name}, n = {n}: the product differs from the sequential multiply");
                    }
                    if run == cmd.warmup {
                        times[i].push(d);
                    }
                }
            }
        }
        // Per-round ratios to the policy fastest by median (orders included, so an order below
        // 1.0 is that much faster than every policy): each compares two runs made seconds apart,
        // which two medians alone do not (see `bench overhead`).
        let medians: Vec<Duration> = times.iter().map(|t| median(t.clone())).collect();
        let fastest = (0..policies.len())
            .min_by_key(|&i| medians[i])
            .context("no policy")?;
        let best: Vec<f64> = times[fastest].iter().map(Duration::as_secs_f64).collect();
        // Per-round ratios of each policy to its own order, before `times` is emptied below.
        let to_order: Vec<Option<(usize, f64, [f64; 2])>> = (0..names.len())
            .map(|i| {
                let o = own_order.get(i).copied().flatten()?;
                let (ratio, spread) = summary(
                    times[i]
                        .iter()
                        .zip(&times[o])
                        .map(|(t, b)| t.as_secs_f64() / b.as_secs_f64())
                        .collect(),
                );
                Some((o, ratio, spread))
            })
            .collect();
        for (i, &name) in names.iter().enumerate() {
            let (ratio_to_best, ratio_spread) = summary(
                times[i]
                    .iter()
                    .zip(&best)
                    .map(|(t, b)| t.as_secs_f64() / b)
                    .collect(),
            );
            cells.push(Cell {
                own_order: to_order[i].map(|(o, ..)| names[o].to_string()),
                ratio_to_own_order: to_order[i].map(|(_, r, _)| r),
                own_order_spread: to_order[i].map(|(.., spread)| spread),
                size: n,
                policy: name.into(),
                ms: median(std::mem::take(&mut times[i])).as_secs_f64() * 1e3,
                tasks: (n * n) as u64,
                ratio_to_best,
                ratio_spread,
            });
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let mut header = vec!["size"];
    header.extend(names.iter().copied());
    let mut csv = Csv::new(&header);
    for &n in &sizes {
        let mut row = vec![n.to_string()];
        for &name in &names {
            let c = cells
                .iter()
                .find(|c| c.size == n && c.policy == name)
                .context("missing cell")?;
            row.push(format!("{:.2}", c.ms));
        }
        csv.row(&row);
    }
    if let Some(path) = &cmd.csv {
        csv.write(path)?;
    }
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&cells)?);
        eprintln!("{}", probe.line());
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "bench queues on {label}: {} threads, one {:?} task per element, median of {} runs, every product verified",
        machine.pu_count(),
        cmd.spawn,
        cmd.reps
    )?;
    writeln!(
        out,
        "Execution time in milliseconds (cf. Table I of load-balancing-queues.txt)"
    )?;
    let widest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    table(&mut out, &sizes, &names, &cells, widest.max(13), |c| {
        format!("{:.1}", c.ms)
    })?;
    writeln!(
        out,
        "\nRatio to the fastest policy (by median) of the size, per round: median [10th–90th percentile]"
    )?;
    table(&mut out, &sizes, &names, &cells, widest.max(18), |c| {
        format!(
            "{:.2} [{:.2}–{:.2}]",
            c.ratio_to_best, c.ratio_spread[0], c.ratio_spread[1]
        )
    })?;
    if !orders.is_empty() {
        writeln!(
            out,
            "\norder:… = the product on {threads} plain threads, no runtime, each claiming its next element \
             in that order (row-major index: a higher one is a younger task): youngest-first is LAS rule 3 \
             with one request; oldest-first central, nls and fifo-rr; both-ends random-steal (owner young, \
             thieves old); blocks a static partition. A policy as far behind another as its order is \
             behind the other's order loses nothing in its queues."
        )?;
        if cells.iter().any(|c| c.ratio_to_own_order.is_some()) {
            writeln!(
                out,
                "\nWhat the runtime adds to its policy's own order: time / the time of that order on plain \
                 threads, per round: median [10th–90th percentile] (the order read from the policy's \
                 placement and search; – where it is none of the orders, or was not run)"
            )?;
            let policy_names = &names[..policies.len()];
            table(
                &mut out,
                &sizes,
                policy_names,
                &cells,
                widest.max(18),
                |c| match (&c.own_order, c.ratio_to_own_order, c.own_order_spread) {
                    (Some(_), Some(r), Some([lo, hi])) => format!("{r:.2} [{lo:.2}–{hi:.2}]"),
                    _ => "–".into(),
                },
            )?;
            let owns: Vec<String> = policy_names
                .iter()
                .filter_map(|&p| {
                    let c = cells.iter().find(|c| c.policy == p)?;
                    Some(format!("{p} → {}", c.own_order.as_deref()?))
                })
                .collect();
            writeln!(out, "(own orders: {})", owns.join(", "))?;
        }
    }
    writeln!(out, "{}", probe.line())?;
    writeln!(out, "\nCSV:\n{}", csv.text())?;
    if let Some(path) = &cmd.csv {
        writeln!(out, "(written to {})", path.display())?;
    }
    Ok(())
}

/// One row per size, one column of `width` per policy, each cell as `show` writes it.
fn table(
    out: &mut impl Write,
    sizes: &[usize],
    names: &[&str],
    cells: &[Cell],
    width: usize,
    show: impl Fn(&Cell) -> String,
) -> Result<()> {
    write!(out, "{:>8}", "size")?;
    for name in names {
        write!(out, " {name:>width$}")?;
    }
    writeln!(out)?;
    for &n in sizes {
        write!(out, "{n:>8}")?;
        for &name in names {
            let c = cells
                .iter()
                .find(|c| c.size == n && c.policy == name)
                .context("missing cell")?;
            write!(out, " {:>width$}", show(c))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_product_equals_sequential_for_every_policy() {
        let m = nearflow_topo::presets::build("e5310-smp").unwrap();
        let p = Problem::new(37, 5);
        let reference = p.sequential();
        // A naive triple loop agrees with the reference up to rounding.
        for i in 0..37 {
            for j in 0..37 {
                let naive: f64 = (0..37).map(|k| p.a[i * 37 + k] * p.bt[j * 37 + k]).sum();
                assert!((naive - reference[i * 37 + j]).abs() < 1e-9);
            }
        }
        for policy in PolicyKind::ALL {
            let rt = Runtime::builder(m.clone()).policy(policy).build().unwrap();
            for kind in [TaskKind::Immediate, TaskKind::Deferred] {
                let (_, c) = multiply(&rt, &p, kind).unwrap();
                assert_eq!(c, reference, "{policy} {kind:?}");
            }
        }
    }
}
