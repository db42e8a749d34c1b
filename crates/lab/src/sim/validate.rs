//! `nearflow sim --validate`: the simulated work on the real runtime of this host.
//!
//! A task graph runs task by task: each task spins for its work (a counted loop, calibrated
//! once), touches one byte per cache line of each block it reads, writes its blocks, frees what
//! it frees, then spawns what the graph says — the simulator's assumptions. Plans run as
//! `bench plans` runs them, every result checked. Every policy runs every grid entry in
//! interleaved rounds after a warm-up; the median is compared with the simulated makespan.

use anyhow::{Context, Result};
use nearflow_policy::PolicyKind;
use nearflow_sim::workload;
use nearflow_sim::{Graph, Report};
use serde::Serialize;

use super::config::Config;
use crate::harness::progress;

/// One entry and policy: the median of the real runs beside the simulated makespan.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub grid: String,
    pub policy: String,
    pub workload: String,
    pub measured_ms: f64,
    pub simulated_ms: f64,
}

/// A graph and its blocks for real runs. Leaked (`&'static`) for the command's life, so that
/// tasks share it without a reference count: two cores bumping one `Arc` per task would add a
/// cache-line transfer per task that the simulator rightly does not charge.
struct RealRun {
    graph: Graph,
    /// Input blocks are made up front and kept; written ones live from their write to their
    /// free.
    blocks: Vec<std::sync::Mutex<Option<Box<[u8]>>>>,
}

fn touch(b: &[u8]) -> u64 {
    b.iter().step_by(64).map(|&x| u64::from(x)).sum()
}

/// Busy loop iterations per ns on this host, measured once: a task's work is a counted loop,
/// not a clock-polling one (two clock reads cost ≈ 60 ns here, more than some tasks' work).
fn iters_per_ns() -> f64 {
    static RATE: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *RATE.get_or_init(|| {
        let n = 20_000_000u64;
        let t = std::time::Instant::now();
        busy(n);
        n as f64 / t.elapsed().as_nanos().max(1) as f64
    })
}

fn busy(iters: u64) {
    let mut x = 0u64;
    for i in 0..iters {
        x = std::hint::black_box(x.wrapping_add(i));
    }
    std::hint::black_box(x);
}

fn run_real_task(cx: &nearflow_rt::TaskCx<'_>, run: &'static RealRun, t: workload::TaskId) {
    let g = &run.graph;
    let task = &g.tasks[t as usize];
    busy((task.work_ns * iters_per_ns()) as u64);
    let lock = |b: workload::BlockId| {
        run.blocks[b as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    };
    let mut sum = 0;
    for &b in &task.reads {
        if let Some(d) = lock(b).as_deref() {
            sum += touch(d);
        }
    }
    for &b in &task.writes {
        let bytes = g.blocks[b as usize].bytes as usize;
        *lock(b) = Some(vec![sum as u8; bytes].into_boxed_slice());
    }
    for &b in &task.frees {
        lock(b).take();
    }
    std::hint::black_box(sum);
    for s in &task.spawns {
        let child = s.task;
        let f = move |cx: &nearflow_rt::TaskCx<'_>| run_real_task(cx, run, child);
        match (s.kind, s.home.and_then(|h| cx.home_on_node(h).ok())) {
            (nearflow_policy::TaskKind::Deferred, Some(home)) => cx.spawn_deferred_at(home, f),
            (kind, _) => cx.spawn(kind, f),
        }
    }
}

fn real_run(g: &Graph) -> &'static RealRun {
    Box::leak(Box::new(RealRun {
        graph: g.clone(),
        blocks: g
            .blocks
            .iter()
            .map(|b| {
                std::sync::Mutex::new(
                    b.home
                        .map(|_| vec![1u8; b.bytes as usize].into_boxed_slice()),
                )
            })
            .collect(),
    }))
}

fn real_once(rt: &nearflow_rt::Runtime, run: &'static RealRun) -> Result<f64> {
    let start = std::time::Instant::now();
    let handles: Vec<_> = run
        .graph
        .roots
        .iter()
        .map(|&(root, _)| rt.submit(move |cx| run_real_task(cx, run, root)))
        .collect();
    for h in handles {
        h.wait()?;
    }
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// Runs `once(runtime, entry)` for every entry and policy in interleaved rounds (round 0 a
/// warm-up) and prints the medians against the simulated makespans of `reports`.
fn compare(
    cmd: &Config,
    machine: &nearflow_topo::Machine,
    policies: &[PolicyKind],
    entries: &[(String, String)],
    reports: &[(String, Report)],
    what: &str,
    once: impl Fn(&nearflow_rt::Runtime, usize) -> Result<f64>,
) -> Result<(Vec<Row>, String)> {
    use std::fmt::Write;
    let runtimes = policies
        .iter()
        .map(|&p| {
            crate::harness::build_runtime(
                machine.clone(),
                p,
                nearflow_rt::Pinning::Group,
                false,
                nearflow_rt::AllocatorKind::Nearflow,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let rounds = cmd.reps.max(1);
    let bar = progress(
        (entries.len() * policies.len() * (rounds + 1)) as u64,
        "validate",
        cmd.quiet,
    );
    // measured[entry][policy] over rounds.
    let mut measured = vec![vec![Vec::new(); policies.len()]; entries.len()];
    for round in 0..=rounds {
        for (ei, row) in measured.iter_mut().enumerate() {
            for k in 0..policies.len() {
                let pi = (k + round) % policies.len();
                // Let the previous pool's idle workers fall asleep first.
                std::thread::sleep(std::time::Duration::from_millis(5));
                let ms = once(&runtimes[pi], ei)?;
                if round > 0 {
                    row[pi].push(ms);
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let mut out = String::new();
    let mut rows = Vec::new();
    writeln!(
        out,
        "validation on this host ({}): {what}, measured (median of {rounds} interleaved rounds) \
         against SIMULATED (model of this host's topology)",
        nearflow_topo::host::cpu_label()
    )?;
    writeln!(
        out,
        "{:<6} {:<10} {:>12} {:>14} {:>10}   workload",
        "grid", "policy", "measured ms", "simulated ms", "sim/meas"
    )?;
    for (ei, (grid, name)) in entries.iter().enumerate() {
        for (pi, p) in policies.iter().enumerate() {
            let mut v = measured[ei][pi].clone();
            v.sort_by(f64::total_cmp);
            let meas = v[v.len() / 2];
            let Some(sim) = reports
                .iter()
                .find(|(gr, r)| gr == grid && r.policy == p.name() && r.allocator == "nearflow")
                .map(|(_, r)| r.makespan_ns as f64 / 1e6)
            else {
                continue;
            };
            writeln!(
                out,
                "{:<6} {:<10} {:>12.3} {:>14.3} {:>9.2}x   {}",
                grid,
                p.name(),
                meas,
                sim,
                sim / meas,
                name
            )?;
            rows.push(Row {
                grid: grid.clone(),
                policy: p.name().into(),
                workload: name.clone(),
                measured_ms: meas,
                simulated_ms: sim,
            });
        }
    }
    Ok((rows, out))
}

/// Task graphs, task by task on the real runtime.
pub(crate) fn validate(
    cmd: &Config,
    machine: &nearflow_topo::Machine,
    policies: &[PolicyKind],
    graphs: &[(String, std::sync::Arc<Graph>)],
    reports: &[(String, Report)],
) -> Result<(Vec<Row>, String)> {
    iters_per_ns();
    let runs: Vec<&'static RealRun> = graphs.iter().map(|(_, g)| real_run(g)).collect();
    let entries: Vec<(String, String)> = graphs
        .iter()
        .map(|(grid, g)| (grid.clone(), g.name.clone()))
        .collect();
    compare(
        cmd,
        machine,
        policies,
        &entries,
        reports,
        "task graphs on the real runtime",
        |rt, ei| real_once(rt, runs[ei]),
    )
}

/// The generated plan, N·M copies at once, on the real engine per policy (as `bench plans`),
/// every result checked.
pub(crate) fn validate_plans(
    cmd: &Config,
    machine: &nearflow_topo::Machine,
    policies: &[PolicyKind],
    grid: &[(u32, u32)],
    reports: &[(String, Report)],
) -> Result<(Vec<Row>, String)> {
    use nearflow_apps::genplan;
    let expect = genplan::reference(cmd.rows);
    let plans = FlowPlans {
        name: "generated plan",
        what: "the generated plan on the real engine",
        build: &|b| genplan::build(b, cmd.rows),
        check: &|out, sinks| genplan::result(out, sinks) == expect,
    };
    validate_flow(cmd, machine, policies, grid, reports, &plans)
}

/// The VWAP plan (`run vwap`'s, as `--workload vwap` calibrates it), N·M copies at once, on the
/// real engine per policy, every result checked.
pub(crate) fn validate_vwap(
    cmd: &Config,
    machine: &nearflow_topo::Machine,
    policies: &[PolicyKind],
    grid: &[(u32, u32)],
    reports: &[(String, Report)],
) -> Result<(Vec<Row>, String)> {
    use nearflow_apps::vwap;
    let data = vwap::generate(cmd.ticks, super::calibrate::VWAP_SEED);
    let expect = vwap::checksum(&vwap::reference(&data, super::calibrate::VWAP_WINDOW));
    let plans = FlowPlans {
        name: "vwap",
        what: "the VWAP plan on the real engine",
        build: &|b| {
            let src = b.source(data.clone());
            vwap::build(b, src, cmd.branches, super::calibrate::VWAP_WINDOW)
        },
        check: &|out, sink| vwap::checksum(&out.take(sink)) == expect,
    };
    validate_flow(cmd, machine, policies, grid, reports, &plans)
}

/// A flow plan to validate: how to build one copy (its sinks) and check its result.
struct FlowPlans<'a, S> {
    /// Its name in the table (`NAME xN`).
    name: &'a str,
    /// What the validation ran, for its heading.
    what: &'a str,
    build: &'a dyn Fn(&mut nearflow_flow::PlanBuilder) -> S,
    check: &'a dyn Fn(&nearflow_flow::PlanOutput, &S) -> bool,
}

/// N·M copies of a flow plan at once on the real engine per policy, every result checked.
fn validate_flow<S>(
    cmd: &Config,
    machine: &nearflow_topo::Machine,
    policies: &[PolicyKind],
    grid: &[(u32, u32)],
    reports: &[(String, Report)],
    plans: &FlowPlans<'_, S>,
) -> Result<(Vec<Row>, String)> {
    let once = |rt: &nearflow_rt::Runtime, ei: usize| -> Result<f64> {
        let (n, m) = grid[ei];
        let mut built = Vec::new();
        for _ in 0..n * m {
            let mut b = nearflow_flow::PlanBuilder::for_runtime(rt);
            if let Some(bytes) = cmd.packet_bytes {
                b.packet_bytes(bytes as usize);
            }
            let sinks = (plans.build)(&mut b);
            built.push((b.build()?, sinks));
        }
        let start = std::time::Instant::now();
        let handles: Vec<_> = built
            .into_iter()
            .map(|(plan, sinks)| (plan.submit(rt), sinks))
            .collect();
        for (h, sinks) in handles {
            let out = h.wait()?;
            anyhow::ensure!(
                (plans.check)(&out, &sinks),
                "a copy of the {}'s result differs from its reference",
                plans.name
            );
        }
        Ok(start.elapsed().as_secs_f64() * 1e3)
    };
    let entries: Vec<(String, String)> = grid
        .iter()
        .map(|&(n, m)| (format!("{n}x{m}"), format!("{} x{}", plans.name, n * m)))
        .collect();
    compare(cmd, machine, policies, &entries, reports, plans.what, once)
}

/// SP²Bench queries, `copies` at once, on the real SPARQL engine of this host per policy, over
/// the store the calibration used (built for this host); every copy's row count checked.
pub(crate) fn validate_sparql(
    cmd: &Config,
    machine: &nearflow_topo::Machine,
    policies: &[PolicyKind],
    grid: &[(String, usize)],
    reports: &[(String, Report)],
) -> Result<(Vec<Row>, String)> {
    use std::sync::Arc;
    let names: Vec<String> = crate::harness::parse_list(&cmd.queries)?;
    let texts = crate::sp2bench::query_texts(cmd.queries_dir.as_deref(), &names)?;
    let (store, data) = super::calibrate::sp2bench_store(cmd, machine)?;
    let store = Arc::new(store);
    let options = nearflow_sparql::Options {
        packet_bytes: cmd.packet_bytes.map(|b| b as usize),
        ..nearflow_sparql::Options::default()
    };
    let queries = names
        .iter()
        .zip(&texts)
        .map(|(n, t)| {
            nearflow_sparql::prepare(&store, t, &options).with_context(|| format!("query {n}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let reference = crate::harness::build_runtime(
        machine.clone(),
        PolicyKind::Las,
        nearflow_rt::Pinning::Group,
        false,
        nearflow_rt::AllocatorKind::Nearflow,
    )?;
    let rows = queries
        .iter()
        .map(|q| Ok(q.run_collect(&reference)?.rows.len()))
        .collect::<Result<Vec<_>>>()?;
    drop(reference);
    let mut entries = Vec::new();
    let mut which = Vec::new();
    for (qi, name) in names.iter().enumerate() {
        for (label, copies) in grid {
            entries.push((
                format!("{name} {label}"),
                format!("{name} x{copies} on {data}"),
            ));
            which.push((qi, *copies));
        }
    }
    let once = |rt: &nearflow_rt::Runtime, ei: usize| -> Result<f64> {
        let (qi, copies) = which[ei];
        let start = std::time::Instant::now();
        let running = (0..copies)
            .map(|_| queries[qi].start(rt))
            .collect::<Result<Vec<_>, _>>()?;
        for mut r in running {
            let mut n = 0;
            while let Some(b) = r.next_batch() {
                n += b.len();
            }
            r.finish()?;
            anyhow::ensure!(
                n == rows[qi],
                "{}: a copy returned {n} rows, the reference run {}",
                names[qi],
                rows[qi]
            );
        }
        Ok(start.elapsed().as_secs_f64() * 1e3)
    };
    compare(
        cmd,
        machine,
        policies,
        &entries,
        reports,
        "SP²Bench queries on the real SPARQL engine",
        once,
    )
}
