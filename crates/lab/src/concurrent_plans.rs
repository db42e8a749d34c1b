//! `nearflow bench plans`: the concurrent-plans experiment (001 §6, Fig. 3). For each grid
//! entry `NxM`, N·M instances of the generated ~170-operator plan are submitted at once and the
//! time until all have completed is measured, for every policy, in one run. Each cell is the
//! median of `--reps` interleaved rounds (every column runs once per round, in a rotating
//! order); every plan's result is checked against the sequential reference. The comparisons the
//! papers make (LAS against each other policy, LAS §6.3; nearflow against the system allocator,
//! §6.4) are reported as the median of their per-round ratios with the 10th–90th percentiles:
//! each such ratio compares two runs made moments apart, which two medians alone do not.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nearflow_apps::genplan;
use nearflow_flow::PlanBuilder;
use nearflow_policy::PolicyKind;
use nearflow_rt::{AllocatorKind, Pinning};
use nearflow_topo::TopologySpec;
use serde::Serialize;

use crate::harness::{build_runtime, load_machine, median, parse_list, progress, summary, Csv};
use crate::phase::Probe;
use crate::Report;

#[derive(Debug, Clone)]
pub struct Config {
    /// The machine (default: this host).
    pub topology: TopologySpec,
    /// Grid of NxM entries: N·M plans run concurrently.
    pub grid: String,
    /// Policies (comma-separated).
    pub policies: String,
    /// Allocators of the packet buffers (comma-separated: nearflow, system); both give the
    /// allocator experiment of LAS §6.4, side by side in one run.
    pub allocators: String,
    /// Rows per source of each plan.
    pub rows: u64,
    /// Packet size in bytes (default: half the L2 cache of the topology).
    pub packet_bytes: Option<usize>,
    /// Thread binding (only applied on the host).
    pub pinning: Pinning,
    /// Timed repetitions per cell (median reported).
    pub reps: usize,
    /// Untimed runs of a cell right before each timed one. The bench pauses between cells so
    /// that the previous column's workers fall asleep; on a virtual machine whose vCPUs idle
    /// in that pause, the next run can start with caches the host has taken away (a 10 ms
    /// plan then takes 50 % longer, at random); a warm-up run absorbs that.
    pub warmup: usize,
    /// Also write the table as CSV to this file.
    pub csv: Option<PathBuf>,
    /// No progress bars on stderr.
    pub quiet: bool,
}

/// One cell of the table. Every plan's result is compared with the sequential reference; a
/// wrong one fails the command, so a cell exists only for correct runs.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub grid: String,
    pub plans: usize,
    pub policy: String,
    pub allocator: String,
    pub ms: f64,
    /// Every round's time, in round order (the median above is of these).
    pub rounds_ms: Vec<f64>,
}

/// One comparison of two columns on one grid entry, from per-round ratios.
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    pub grid: String,
    /// `policy (allocator)` of the numerator and denominator.
    pub num: String,
    pub den: String,
    /// Median over the rounds of (numerator's time / denominator's time in the same round).
    pub median: f64,
    /// 10th and 90th percentile of those per-round ratios.
    pub spread: [f64; 2],
}

/// The whole result.
#[derive(Clone, Debug, Serialize)]
pub struct Plans {
    pub machine: String,
    pub operators: usize,
    pub rows: u64,
    pub rounds: usize,
    pub cells: Vec<Cell>,
    pub ratios: Vec<Ratio>,
    /// The host's CPU-to-CPU round trip over the rounds, min and max ([`Probe`]).
    pub host_round_trip_ns: Option<[f64; 2]>,
}

fn parse_grid(s: &str) -> Result<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    for g in s.split(',').map(str::trim).filter(|g| !g.is_empty()) {
        let (n, m) = g
            .split_once(['x', 'X'])
            .with_context(|| format!("grid entry `{g}` is not NxM"))?;
        let n: usize = n
            .trim()
            .parse()
            .with_context(|| format!("grid entry `{g}`"))?;
        let m: usize = m
            .trim()
            .parse()
            .with_context(|| format!("grid entry `{g}`"))?;
        if n == 0 || m == 0 || n.saturating_mul(m) > 4096 {
            bail!("grid entry `{g}`: N and M must be at least 1, and N·M at most 4096 plans");
        }
        out.push((n, m));
    }
    if out.is_empty() {
        bail!("--grid is empty");
    }
    Ok(out)
}

/// Runs the interleaved rounds; every result is checked against the sequential reference.
pub fn run(cmd: &Config) -> Result<Report<Plans>> {
    use std::fmt::Write;
    let grid = parse_grid(&cmd.grid)?;
    let policies: Vec<PolicyKind> = parse_list(&cmd.policies)?;
    let allocators: Vec<AllocatorKind> = parse_list(&cmd.allocators)?;
    if policies.is_empty() || allocators.is_empty() || cmd.reps == 0 || cmd.rows == 0 {
        bail!("need at least one policy and allocator, --reps >= 1 and --rows >= 1");
    }
    // (allocator, policy) columns, allocator-major.
    let columns: Vec<(AllocatorKind, PolicyKind)> = allocators
        .iter()
        .flat_map(|&a| policies.iter().map(move |&p| (a, p)))
        .collect();
    let expect = genplan::reference(cmd.rows);
    let total = (grid.len() * columns.len() * cmd.reps) as u64;
    let bar = progress(total, "plans", cmd.quiet);
    let mut ops = 0;
    // Every runtime first, then interleaved rounds: each round runs every (grid, column) cell
    // once, the columns in an order that rotates from round to round, so that the columns of a
    // ratio are measured seconds apart, not minutes (see `bench overhead`).
    let machine = load_machine(&cmd.topology)?;
    let runtimes = columns
        .iter()
        .map(|&(allocator, policy)| {
            build_runtime(machine.clone(), policy, cmd.pinning, false, allocator)
        })
        .collect::<Result<Vec<_>>>()?;
    let label = runtimes[0].machine().label();
    let mut times: Vec<Vec<Vec<Duration>>> = vec![vec![Vec::new(); grid.len()]; columns.len()];
    let mut probe = Probe::new();
    for round in 0..cmd.reps {
        probe.sample();
        for (gi, &(n, m)) in grid.iter().enumerate() {
            for k in 0..columns.len() {
                let ci = (k + round) % columns.len();
                let (allocator, policy) = columns[ci];
                let rt = &runtimes[ci];
                let count = n * m;
                // Every run's plans are built first, so that nothing but plans runs between
                // the warm-up runs and the timed one.
                let mut runs = Vec::with_capacity(cmd.warmup + 1);
                for _ in 0..=cmd.warmup {
                    let mut plans = Vec::with_capacity(count);
                    for _ in 0..count {
                        let mut b = PlanBuilder::for_runtime(rt);
                        if let Some(p) = cmd.packet_bytes {
                            b.packet_bytes(p);
                        }
                        let sinks = genplan::build(&mut b, cmd.rows);
                        let plan = b.build()?;
                        ops = plan.len();
                        plans.push((plan, sinks));
                    }
                    runs.push(plans);
                }
                // Let the previous column's idle workers fall asleep first.
                std::thread::sleep(Duration::from_millis(5));
                let mut outs = Vec::with_capacity(runs.len() * count);
                let mut last = Duration::ZERO;
                for plans in runs {
                    let t = Instant::now();
                    let handles: Vec<_> =
                        plans.into_iter().map(|(p, s)| (p.submit(rt), s)).collect();
                    for (h, s) in handles {
                        outs.push((h.wait()?, s));
                    }
                    last = t.elapsed();
                }
                times[ci][gi].push(last);
                for (o, s) in &outs {
                    if genplan::result(o, s) != expect {
                        bail!("wrong result: {} ({allocator}) with {n}x{m}", policy.name());
                    }
                }
                bar.inc(1);
            }
        }
    }
    let mut cells = Vec::new();
    for (ci, &(allocator, policy)) in columns.iter().enumerate() {
        for (gi, &(n, m)) in grid.iter().enumerate() {
            cells.push(Cell {
                grid: format!("{n}x{m}"),
                plans: n * m,
                policy: policy.name().into(),
                allocator: allocator.name().into(),
                ms: median(times[ci][gi].clone()).as_secs_f64() * 1e3,
                rounds_ms: times[ci][gi]
                    .iter()
                    .map(|d| d.as_secs_f64() * 1e3)
                    .collect(),
            });
        }
    }
    // The papers' comparisons: LAS against every other policy under the same allocator, and
    // nearflow against the system allocator under the same policy.
    let col = |a: AllocatorKind, p: PolicyKind| columns.iter().position(|&c| c == (a, p));
    let mut pairs = Vec::new();
    for &a in &allocators {
        if let Some(l) = col(a, PolicyKind::Las) {
            for &p in policies.iter().filter(|&&p| p != PolicyKind::Las) {
                pairs.extend(col(a, p).map(|o| (l, o)));
            }
        }
    }
    for &p in &policies {
        if let (Some(nf), Some(s)) = (
            col(AllocatorKind::Nearflow, p),
            col(AllocatorKind::System, p),
        ) {
            pairs.push((nf, s));
        }
    }
    let name = |ci: usize| format!("{} ({})", columns[ci].1.name(), columns[ci].0.name());
    let mut ratios = Vec::new();
    for &(a, b) in &pairs {
        for (gi, &(n, m)) in grid.iter().enumerate() {
            let per_round = times[a][gi]
                .iter()
                .zip(&times[b][gi])
                .map(|(x, y)| x.as_secs_f64() / y.as_secs_f64())
                .collect();
            let (median, spread) = summary(per_round);
            ratios.push(Ratio {
                grid: format!("{n}x{m}"),
                num: name(a),
                den: name(b),
                median,
                spread,
            });
        }
    }
    bar.finish_and_clear();
    if let Some(path) = &cmd.csv {
        let mut csv = Csv::new(&["grid", "plans", "policy", "allocator", "ms"]);
        for c in &cells {
            csv.row(&[
                c.grid.clone(),
                c.plans.to_string(),
                c.policy.clone(),
                c.allocator.clone(),
                format!("{:.3}", c.ms),
            ]);
        }
        csv.write(path)?;
    }
    let mut out = String::new();
    writeln!(
out,
        "concurrent plans: {ops}-operator generated plan, {} rows per source, on {label}, median of {} (ms until all plans end)",
        cmd.rows, cmd.reps
    )?;
    let np = policies.len();
    for (ai, a) in allocators.iter().enumerate() {
        if allocators.len() > 1 {
            writeln!(out, "allocator {a}:")?;
        }
        write!(out, "{:>8}", "grid")?;
        for p in &policies {
            write!(out, " {:>11}", p.name())?;
        }
        writeln!(out)?;
        for (gi, &(n, m)) in grid.iter().enumerate() {
            write!(out, "{:>8}", format!("{n}x{m}"))?;
            for pi in 0..np {
                write!(out, " {:>11.1}", cells[(ai * np + pi) * grid.len() + gi].ms)?;
            }
            writeln!(out)?;
        }
    }
    if !ratios.is_empty() {
        writeln!(
out,
            "per-round ratios, median [10th–90th percentile] of {} rounds (below 1: the first is faster):",
            cmd.reps
        )?;
        for r in &ratios {
            writeln!(
                out,
                "{:>8}  {:>20} / {:<20} {:>6.3} [{:.3}–{:.3}]",
                r.grid, r.num, r.den, r.median, r.spread[0], r.spread[1]
            )?;
        }
    }
    writeln!(out, "all results equal the sequential reference")?;
    writeln!(out, "{}", probe.line())?;
    let notes = probe.line();
    let data = Plans {
        machine: label,
        operators: ops,
        rows: cmd.rows,
        rounds: cmd.reps,
        cells,
        ratios,
        host_round_trip_ns: probe.range(),
    };
    Ok(Report::new(data, out).with_notes(notes))
}
