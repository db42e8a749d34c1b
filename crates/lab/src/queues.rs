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
//! the orders the policies produce, with no runtime (`orders.rs`), and then a table of each
//! policy's time over its own order's, round by round: what the runtime's queues add, apart from
//! the order they impose (each policy's order is read from its placement and search,
//! [`ClaimOrder::of_policy`]).

mod orders;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nearflow_apps::matmul::{multiply, Problem};
use nearflow_policy::{PolicyKind, TaskKind};
use nearflow_rt::{Pinning, Runtime};
use nearflow_topo::TopologySpec;
use serde::Serialize;

use crate::harness::{build_runtime, load_machine, median, parse_list, progress, summary, Csv};
use crate::phase::Probe;
use crate::Report;
pub use orders::ClaimOrder;

#[derive(Debug, Clone)]
pub struct Config {
    /// The machine (default: this host).
    pub topology: TopologySpec,
    /// Matrix sizes (comma-separated).
    pub sizes: String,
    /// Also run 4096 (16.8 M tasks, about 1.5 GB of queued tasks).
    pub with_4096: bool,
    /// Policies (comma-separated), in table order.
    pub policies: String,
    /// How the root spawns the element tasks.
    pub spawn: TaskKind,
    /// Timed repetitions per cell (median reported).
    pub reps: usize,
    /// Untimed runs of a cell right before each timed one (every product still verified):
    /// they meet the cold start after the pause between cells (see `bench plans --warmup`).
    pub warmup: usize,
    /// Also time the product on plain threads (one per PU of the machine), without the runtime,
    /// in the orders in which the policies hand out the elements: `youngest-first` (LAS rule 3
    /// with one request), `oldest-first` (central, NLS, FIFO+RR), `both-ends` (random
    /// stealing), `blocks` (a static partition). They run in the same rounds as the policies,
    /// and a last table divides each policy's time by its own order's, round by round. Without
    /// a list, all four.
    pub orders: Option<String>,
    /// Thread binding (only applied on the host).
    pub pinning: Pinning,
    /// Also write the table as CSV to this file.
    pub csv: Option<PathBuf>,
    /// No progress bars on stderr.
    pub quiet: bool,
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
    /// A policy's own order (`order:…`, [`ClaimOrder::of_policy`]) when that order ran too.
    pub own_order: Option<String>,
    /// Median over the rounds of (this policy's time / its own order's time, in the same round):
    /// what the runtime adds to the cost of the order alone.
    pub ratio_to_own_order: Option<f64>,
    /// 10th and 90th percentile of those per-round ratios.
    pub own_order_spread: Option<[f64; 2]>,
}

/// Runs the study; one cell per (size, contender). Every product is checked.
pub fn run(cmd: &Config) -> Result<Report<Vec<Cell>>> {
    let machine = load_machine(&cmd.topology)?;
    let label = machine.label();
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
    let kind = cmd.spawn;
    let runtimes: Vec<Runtime> = policies
        .iter()
        .map(|&p| {
            build_runtime(
                machine.clone(),
                p,
                cmd.pinning,
                false,
                nearflow_rt::AllocatorKind::Nearflow,
            )
        })
        .collect::<Result<_, _>>()?;
    let orders: Vec<ClaimOrder> = match &cmd.orders {
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
            let o = ClaimOrder::of_policy(rt.policy(), kind)?;
            orders
                .iter()
                .position(|&x| x == o)
                .map(|i| policies.len() + i)
        })
        .collect();
    let threads = machine.pu_count();
    let bar = progress((sizes.len() * names.len()) as u64, "queues", cmd.quiet);
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
    let mut out = Vec::new();
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
    let text = String::from_utf8(out).context("the tables are UTF-8")?;
    Ok(Report::new(cells, text).with_notes(probe.line()))
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
        // The sequential reference is checked against a naive product in `nearflow-apps`.
        let reference = p.sequential();
        for policy in PolicyKind::ALL {
            let rt = Runtime::builder(m.clone()).policy(policy).build().unwrap();
            for kind in [TaskKind::Immediate, TaskKind::Deferred] {
                let (_, c) = multiply(&rt, &p, kind).unwrap();
                assert_eq!(c, reference, "{policy} {kind:?}");
            }
        }
    }
}
