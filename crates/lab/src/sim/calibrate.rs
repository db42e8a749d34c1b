//! Calibrating the simulator's plan model from a traced run of the real engine on this host
//! (`nearflow sim --workload plans` and `--workload sp2bench`).
//!
//! The generated plan of `bench plans` runs untimed, then `CONCURRENT` copies at once with the
//! runtime's trace on (one plan alone on an otherwise idle pool pays cold caches and idle
//! wake-ups that a loaded engine does not: calibrated that way, the model over-estimated 16
//! concurrent plans by 1.6×). From each copy's run: the plan's shape (`Plan::shape`), each operator's tasks and busy time
//! (trace events, labelled by operator), its tuples in and out (the input buffers' counters),
//! and whether it sent anything before its inputs ended (`PlanStats::sends`: an operator that
//! did not is blocking). Costs are per tuple, so the model can run at another packet size: the
//! simulated machine's own (half its L2, as the engine's default) unless `--packet-bytes` says.
//!
//! A SPARQL query ([`sparql`]) is calibrated on a runtime of the **simulated** machine, over a
//! store built for it, so that its plan is the one the engine makes there: one scan per
//! partition of each node, homed on it, and as many parallel branches as that machine has PUs.
//! On this 2-core host such a runtime is oversubscribed (64 workers for `e7-4820`), so a task's
//! wall time includes the time its thread waited for a CPU; its cost is taken from its thread's
//! CPU time instead (`TraceEvent::cpu_ns`). Scans read their partition: 12 bytes (three ids)
//! per triple produced, from the partition's node.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use nearflow_apps::genplan;
use nearflow_flow::{PlanBuilder, PlanShape, PlanStats};
use nearflow_rdf::Store;
use nearflow_rt::TraceEvent;
use nearflow_sim::{OpKind, OpModel, PlanModel};
use nearflow_sparql::{self as sparql, Options};

/// What was measured, besides the model.
pub(crate) struct Calibration {
    pub(crate) model: PlanModel,
    /// Wall time of the traced run, ms.
    pub(crate) traced_ms: f64,
    pub(crate) host_packet_bytes: usize,
    /// Result rows of one run (SPARQL), or 0.
    pub(crate) rows: u64,
    /// The share of the measured cost that the model charges as memory time on this host's
    /// topology, taken out of the operators' costs ([`net_of_modelled_memory`]).
    pub(crate) memory_share: f64,
}

/// Takes out of each operator's measured cost the memory time the simulator charges for the
/// same run on this host's topology, so that a simulation does not charge memory twice.
///
/// A calibrated cost is a task's wall or CPU time on this host, stalls on this host's caches
/// and memory included (no hardware counters here to tell them apart); the simulator then
/// charges each task's reads and writes through the simulated machine's caches and memory on
/// top. Simulating the calibrated run (its copies, under LAS) on this host's topology gives,
/// per operator, the work and the memory time the model charges; each operator keeps the
/// share of its cost that is not memory (none, when the model charges more memory than was
/// measured). A simulation of this host then charges memory as the model says, once; of
/// another machine, that machine's memory instead of this host's. Charged twice (the
/// calibrated cost as measured, and the model's memory time on top), VWAP simulates 1.28–1.42×
/// its measured time under `--validate`, and 0.96–1.05× with memory made free (EPYC guest).
/// Returns the share taken out, over all operators.
pub(crate) fn net_of_modelled_memory(model: &mut PlanModel, copies: usize) -> Result<f64> {
    let host = nearflow_topo::detect_host()?;
    // Here everything lies on this host's memory: no homes, the store local.
    let mut here = model.clone();
    here.store.nodes.clear();
    for o in &mut here.operators {
        o.home = None;
        o.pu = None;
    }
    let (r, _) = nearflow_sim::simulate_plan(
        &host,
        nearflow_policy::PolicyKind::Las,
        &nearflow_sim::Model::default(),
        &here,
        copies,
        nearflow_sim::RunOptions {
            alloc: nearflow_sim::AllocatorKind::Nearflow,
            seed: 1,
            traced: false,
        },
    )
    .with_context(|| format!("{}: simulating the calibrated run on this host", model.name))?;
    let (mut work, mut memory) = (0.0, 0.0);
    for (op, &(w, m)) in model.operators.iter_mut().zip(&r.operator_charges) {
        work += w;
        memory += m.min(w);
        if w > 0.0 {
            op.ns_per_tuple *= ((w - m) / w).max(0.0);
        }
    }
    Ok(if work > 0.0 { memory / work } else { 0.0 })
}

/// Plans run at once for the calibration; their per-tuple costs are averaged.
const CONCURRENT: usize = 4;

/// Runs the generated plan (`rows` per source) on this host under LAS and derives its model at
/// `packet_bytes`.
pub(crate) fn genplan(rows: u64, packet_bytes: u64) -> Result<Calibration> {
    if rows == 0 {
        bail!("--rows must be at least 1");
    }
    let expect = genplan::reference(rows);
    flow_app(
        "generated plan",
        packet_bytes,
        false,
        |b| genplan::build(b, rows),
        |out, sinks| genplan::result(out, sinks) == expect,
    )
}

/// The seed of the ticks `--workload vwap` generates.
pub(crate) const VWAP_SEED: u64 = 0x5eed;
/// The VWAP window `--workload vwap` runs, in trades.
pub(crate) const VWAP_WINDOW: usize = 5;

/// Runs the VWAP plan (`ticks` generated ticks, `branches` branches, a window of 5 trades) on
/// this host under LAS and derives its model at `packet_bytes`.
pub(crate) fn vwap(ticks: u64, branches: usize, packet_bytes: u64) -> Result<Calibration> {
    use nearflow_apps::vwap;
    if ticks == 0 || branches == 0 {
        bail!("--ticks and --branches must be at least 1");
    }
    let data = vwap::generate(ticks, VWAP_SEED);
    let expect = vwap::checksum(&vwap::reference(&data, VWAP_WINDOW));
    flow_app(
        "vwap",
        packet_bytes,
        false,
        |b| {
            let src = b.source(data.clone());
            vwap::build(b, src, branches, VWAP_WINDOW)
        },
        |out, sink| vwap::checksum(&out.take(sink)) == expect,
    )
}

/// Runs a flow plan of this host (`build` makes one copy, `check` its result) untimed, then
/// `CONCURRENT` copies at once, traced, under LAS, and derives its model; with `profile`, the
/// operators' state sizes too (`PlanBuilder::profile_threads`, for mapped simulations).
pub(crate) fn flow_app<S>(
    name: &str,
    packet_bytes: u64,
    profile: bool,
    build: impl Fn(&mut PlanBuilder) -> S,
    check: impl Fn(&nearflow_flow::PlanOutput, &S) -> bool,
) -> Result<Calibration> {
    let host = nearflow_topo::detect_host()?;
    let rt = crate::harness::build_runtime(
        host,
        nearflow_policy::PolicyKind::Las,
        nearflow_rt::Pinning::Group,
        true,
        nearflow_rt::AllocatorKind::Nearflow,
    )?;
    let run = |rt: &nearflow_rt::Runtime| -> Result<Vec<(PlanShape, PlanStats, u64)>> {
        let mut handles = Vec::new();
        for _ in 0..CONCURRENT {
            let mut b = PlanBuilder::for_runtime(rt);
            b.profile_threads(profile);
            let sinks = build(&mut b);
            let plan = b.build()?;
            let shape = plan.shape();
            handles.push((shape, plan.submit(rt), sinks));
        }
        let mut runs = Vec::new();
        for (shape, handle, sinks) in handles {
            let req = handle.request_id();
            let out = handle.wait()?;
            if !check(&out, &sinks) {
                bail!("the {name}'s result differs from its reference");
            }
            runs.push((shape, out.stats, req));
        }
        Ok(runs)
    };
    run(&rt)?; // warm-up
    rt.take_trace();
    let runs = run(&rt)?;
    let events = rt.take_trace();
    let how = Derive {
        packet_bytes,
        clock: Clock::Wall,
        source_input_bytes: 0.0,
        state_bytes_per_tuple: 0.0,
    };
    let mut model = average(&runs, &events, &how, name)?;
    let memory_share = net_of_modelled_memory(&mut model, CONCURRENT)?;
    let (_, stats, _) = &runs[0];
    Ok(Calibration {
        model,
        memory_share,
        traced_ms: runs
            .iter()
            .map(|r| r.1.elapsed.as_secs_f64() * 1e3)
            .fold(0.0, f64::max),
        host_packet_bytes: stats.packet_bytes,
        rows: 0,
    })
}

/// Runs `name` (SPARQL `text`) on a runtime of the store's machine under LAS: once to warm up
/// and count its rows, then `CONCURRENT` copies at once, traced; its model at `packet_bytes`
/// (default: the plan's own).
pub(crate) fn sparql(
    store: &Arc<Store>,
    name: &str,
    text: &str,
    packet_bytes: Option<u64>,
) -> Result<Calibration> {
    let machine = store.machine().clone();
    let pinning = if machine.source().is_host() {
        nearflow_rt::Pinning::Group
    } else {
        nearflow_rt::Pinning::None
    };
    let rt = crate::harness::build_runtime(
        machine,
        nearflow_policy::PolicyKind::Las,
        pinning,
        true,
        nearflow_rt::AllocatorKind::Nearflow,
    )?;
    let q = sparql::prepare(store, text, &Options::default())
        .with_context(|| format!("query {name}"))?;
    let rows = q.run_collect(&rt)?.rows.len();
    // Operator state sizes from one profiled copy (profiling costs time per task, so the
    // traced copies below run without it).
    let profiled = sparql::prepare(
        store,
        text,
        &Options {
            profile: true,
            ..Options::default()
        },
    )?;
    let mut run = profiled.start(&rt)?;
    while run.next_batch().is_some() {}
    let state = run
        .finish()?
        .threads
        .map(|t| t.state_bytes)
        .unwrap_or_default();
    // One untraced batch of the traced batches' shape first: four copies at once hold more
    // memory than the warm-up run, and a traced batch that got it fresh from the kernel (page
    // faults, in the threads' CPU time) made q2's model 1.14–1.62× its measured time in five
    // calibrations (`sim --validate`, ×1), whose runs get their memory from the allocator's
    // caches. Then `BATCHES` traced batches; each operator's cost is the median of theirs.
    // Both together: q2 ×1 0.96–1.11× in two calibrations, LAS and NLS.
    sparql_batch(&q, &rt, rows, name)?;
    rt.take_trace();
    let mut models = Vec::with_capacity(BATCHES);
    let mut times = Vec::with_capacity(BATCHES);
    let how_at = |host_packet_bytes: usize| Derive {
        packet_bytes: packet_bytes.unwrap_or(host_packet_bytes as u64),
        clock: Clock::ThreadCpu,
        source_input_bytes: 3.0 * std::mem::size_of::<nearflow_rdf::Id>() as f64,
        state_bytes_per_tuple: SPARQL_STATE_BYTES_PER_TUPLE,
    };
    let mut host_packet_bytes = 0;
    for _ in 0..BATCHES {
        let started = std::time::Instant::now();
        let runs = sparql_batch(&q, &rt, rows, name)?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
        let events = rt.take_trace();
        host_packet_bytes = runs[0].1.packet_bytes;
        models.push(average(&runs, &events, &how_at(host_packet_bytes), name)?);
    }
    times.sort_by(f64::total_cmp);
    let traced_ms = times[times.len() / 2];
    let how = how_at(host_packet_bytes);
    let mut model = median_costs(models);
    if state.len() != model.operators.len() {
        bail!(
            "{name}: the profiled run planned {} operators, the traced ones {}",
            state.len(),
            model.operators.len()
        );
    }
    for (op, &bytes) in model.operators.iter_mut().zip(&state) {
        op.state_bytes = bytes as u64;
        op.state_bytes_per_tuple = if bytes > 0 {
            how.state_bytes_per_tuple
        } else {
            0.0
        };
    }
    // An index join reads the store once per input row: the last line of its binary search
    // and its matching rows (a row of a permutation is three ids).
    let row = 3.0 * std::mem::size_of::<nearflow_rdf::Id>() as f64;
    for op in &mut model.operators {
        if op.name == nearflow_sparql::lower::INDEX_JOIN_OPERATOR {
            op.lookup_bytes_per_tuple =
                LOOKUP_SEARCH_BYTES + row * op.out_per_in.first().copied().unwrap_or(0.0);
        }
    }
    // The three permutations, each split by key range over the store's nodes.
    model.store = nearflow_sim::StoreModel {
        bytes: (store.len() as f64 * 3.0 * row) as u64,
        nodes: (0..store.machine().node_count()).collect(),
    };
    let memory_share = net_of_modelled_memory(&mut model, CONCURRENT)?;
    Ok(Calibration {
        model,
        memory_share,
        traced_ms,
        host_packet_bytes,
        rows: rows as u64,
    })
}

/// Which clock measures a task's cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    /// Its wall time (a pool with a CPU per worker).
    Wall,
    /// Its thread's CPU time (an oversubscribed pool).
    ThreadCpu,
}

/// How a model is derived from a run.
pub(crate) struct Derive {
    /// The packet size of the model.
    pub(crate) packet_bytes: u64,
    pub(crate) clock: Clock,
    /// Bytes of stored data a homed source reads per tuple it produces (0: none).
    pub(crate) source_input_bytes: f64,
    /// Bytes of an operator's state a tuple touches (`OpModel::state_bytes_per_tuple`; 0:
    /// the whole state every run).
    pub(crate) state_bytes_per_tuple: f64,
}

/// What a tuple touches in a SPARQL operator's state (a hash join's table, DISTINCT's set, a
/// sort's rows): one cache line, the least a random access into a table moves (a probe or an
/// insert finds its bucket's line; a sort's row of a few ids fits one).
pub(crate) const SPARQL_STATE_BYTES_PER_TUPLE: f64 = 64.0;

/// What an index join's binary search reads from memory per lookup besides the rows it
/// finds: its last step's cache line (the upper levels of a search over the same permutation
/// stay cached between lookups).
pub(crate) const LOOKUP_SEARCH_BYTES: f64 = 64.0;

/// Traced batches of a SPARQL calibration; each operator's cost is their median.
const BATCHES: usize = 3;

/// `CONCURRENT` copies of `q` at once, each checked to return `rows` rows: their shapes,
/// statistics and request ids.
fn sparql_batch(
    q: &sparql::Prepared,
    rt: &nearflow_rt::Runtime,
    rows: usize,
    name: &str,
) -> Result<Vec<(PlanShape, PlanStats, u64)>> {
    let running = (0..CONCURRENT)
        .map(|_| q.start(rt))
        .collect::<Result<Vec<_>, _>>()?;
    let mut runs = Vec::new();
    for mut r in running {
        let (Some(shape), Some(req)) = (r.shape().cloned(), r.request_id()) else {
            bail!("{name}: answered without running a plan (a constant the store lacks): nothing to model");
        };
        let mut n = 0;
        while let Some(b) = r.next_batch() {
            n += b.len();
        }
        let stats = r.finish()?;
        if n != rows {
            bail!("{name}: a traced copy returned {n} rows, the first run {rows}");
        }
        runs.push((shape, stats, req));
    }
    Ok(runs)
}

/// The first model, each operator's cost per tuple the median of the models' (one plan, so
/// the same operators in the same order).
fn median_costs(mut models: Vec<PlanModel>) -> PlanModel {
    let costs: Vec<Vec<f64>> = (0..models[0].operators.len())
        .map(|i| {
            let mut c: Vec<f64> = models.iter().map(|m| m.operators[i].ns_per_tuple).collect();
            c.sort_by(f64::total_cmp);
            c
        })
        .collect();
    let mut model = models.swap_remove(0);
    for (op, c) in model.operators.iter_mut().zip(costs) {
        op.ns_per_tuple = c[c.len() / 2];
    }
    model
}

/// The model of copies of one plan run at once: the first copy's, with each operator's cost
/// per tuple averaged over the copies.
fn average(
    runs: &[(PlanShape, PlanStats, u64)],
    events: &[TraceEvent],
    how: &Derive,
    name: &str,
) -> Result<PlanModel> {
    let mut models = Vec::new();
    for (shape, stats, req) in runs {
        let mine: Vec<TraceEvent> = events
            .iter()
            .filter(|e| e.request == *req)
            .copied()
            .collect();
        models.push(derive(shape, stats, &mine, how, name)?);
    }
    let n = models.len() as f64;
    let mut model = models.swap_remove(0);
    for (i, op) in model.operators.iter_mut().enumerate() {
        let sum: f64 = models.iter().map(|m| m.operators[i].ns_per_tuple).sum();
        op.ns_per_tuple = (op.ns_per_tuple + sum) / n;
    }
    Ok(model)
}

/// The model of one traced run.
fn derive(
    shape: &PlanShape,
    stats: &PlanStats,
    events: &[TraceEvent],
    how: &Derive,
    name: &str,
) -> Result<PlanModel> {
    let packet_bytes = how.packet_bytes;
    let ops = &shape.operators;
    // Input buffers are listed operator by operator, port by port.
    let mut first_chan = Vec::with_capacity(ops.len());
    let mut n = 0;
    for o in ops {
        first_chan.push(n);
        n += o.fed_by.len();
    }
    if stats.channels.len() != n || stats.sends.len() != ops.len() {
        bail!("the run's counters do not match the plan's shape");
    }
    let chan = |op: usize, port: usize| &stats.channels[first_chan[op] + port];
    let mut busy = vec![0f64; ops.len()];
    let mut runs = vec![0u64; ops.len()];
    for e in events {
        if let Some(b) = busy.get_mut(e.label as usize) {
            *b += match how.clock {
                Clock::Wall => (e.end_ns - e.start_ns) as f64,
                Clock::ThreadCpu => e.cpu_ns as f64,
            };
            runs[e.label as usize] += 1;
        }
    }
    let operators = ops
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let tuples_in: u64 = (0..o.fed_by.len()).map(|p| chan(i, p).tuples_popped).sum();
            let out: Vec<u64> = o
                .feeds
                .iter()
                .map(|&(c, cp)| chan(c, cp).tuples_pushed)
                .collect();
            let tuple_bytes_out: Vec<u64> = o
                .output_tuple_bytes
                .iter()
                .map(|&b| b.max(1) as u64)
                .collect();
            let (kind, ns_per_tuple, out_per_in) = if o.fed_by.is_empty() {
                // Packets at the simulated size; tuples per packet from the run.
                let packets = out
                    .iter()
                    .zip(&tuple_bytes_out)
                    .map(|(&t, &b)| t.div_ceil((packet_bytes / b).max(1)))
                    .max()
                    .unwrap_or(0)
                    .max(1);
                let host_packets: u64 = o
                    .feeds
                    .iter()
                    .map(|&(c, cp)| chan(c, cp).pushed)
                    .max()
                    .unwrap_or(0);
                let per_run = host_packets.div_ceil(runs[i].max(1)).max(1);
                let total: u64 = out.iter().sum();
                (
                    OpKind::Source { packets, per_run },
                    busy[i] / total.max(1) as f64,
                    out.iter().map(|&t| t as f64 / packets as f64).collect(),
                )
            } else {
                let s = stats.sends[i];
                let kind = if s.while_inputs_open == 0 && s.after_inputs_closed > 0 {
                    OpKind::Blocking
                } else {
                    OpKind::Stream
                };
                (
                    kind,
                    busy[i] / tuples_in.max(1) as f64,
                    out.iter()
                        .map(|&t| t as f64 / tuples_in.max(1) as f64)
                        .collect(),
                )
            };
            OpModel {
                name: o.name.clone(),
                fed_by: o.fed_by.clone(),
                feeds: o.feeds.clone(),
                input_bytes_per_tuple: if o.fed_by.is_empty() && o.home_node.is_some() {
                    how.source_input_bytes
                } else {
                    0.0
                },
                kind,
                ns_per_tuple,
                out_per_in,
                tuple_bytes_out,
                home: o.home_node,
                pu: None,
                state_bytes_per_tuple: how.state_bytes_per_tuple,
                lookup_bytes_per_tuple: 0.0,
                state_bytes: stats
                    .threads
                    .as_ref()
                    .and_then(|t| t.state_bytes.get(i))
                    .map_or(0, |&b| b as u64),
            }
        })
        .collect();
    Ok(PlanModel {
        name: name.into(),
        operators,
        buffer_packets: shape.buffer_packets,
        packet_bytes,
        store: nearflow_sim::StoreModel::default(),
    })
}

/// Plan models by name (the generated plan, `vwap`, or a query).
pub(crate) type NamedPlans = Vec<(String, nearflow_sim::PlanModel)>;

/// The plans of `--workload plans` (the generated plan) and `--workload sp2bench` (one per
/// query), calibrated on this host; none for the task-graph workloads.
///
/// Also returns what was calibrated, a line per plan, for the report.
pub(crate) fn calibrated_plans(
    cmd: &super::config::Config,
    machine: &nearflow_topo::Machine,
) -> Result<(NamedPlans, Vec<String>)> {
    let is_plan = matches!(
        cmd.workload,
        super::config::Workload::Plans
            | super::config::Workload::Vwap
            | super::config::Workload::Sp2bench
    );
    if !is_plan && (cmd.models.is_some() || cmd.save_models.is_some()) {
        bail!("--models and --save-models are for the plan workloads (plans, vwap, sp2bench)");
    }
    if let Some(path) = &cmd.models {
        let saved = load_models(path)?;
        for (name, m) in &saved.plans {
            let beyond = m.store.nodes.iter().any(|&n| n >= machine.node_count())
                || m.operators.iter().any(|o| {
                    o.home.is_some_and(|h| h >= machine.node_count())
                        || o.pu.is_some_and(|p| p >= machine.pu_count())
                });
            if beyond {
                bail!(
                    "{}: the model of {name} places work on nodes or PUs this machine lacks \
                     (calibrated for another machine)",
                    path.display()
                );
            }
        }
        let line = format!(
            "plan models from {} ({} plan(s): {}), not calibrated again",
            path.display(),
            saved.plans.len(),
            saved.calibrated
        );
        return Ok((saved.plans, vec![line]));
    }
    let (plans, said) = calibrate_plans(cmd, machine)?;
    if let Some(path) = &cmd.save_models {
        let saved = SavedModels {
            calibrated: said.join("; "),
            plans: plans.clone(),
        };
        let text = serde_json::to_string_pretty(&saved)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok((plans, said))
}

/// Plan models saved by `--save-models`: what was calibrated, and the models.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedModels {
    /// The calibration's own account (host, plan, packet sizes).
    calibrated: String,
    plans: NamedPlans,
}

fn load_models(path: &std::path::Path) -> Result<SavedModels> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let saved: SavedModels = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a file of saved plan models", path.display()))?;
    if saved.plans.is_empty() {
        bail!("{}: holds no plan model", path.display());
    }
    Ok(saved)
}

/// Calibrates the plans of `cmd`'s workload on this host.
fn calibrate_plans(
    cmd: &super::config::Config,
    machine: &nearflow_topo::Machine,
) -> Result<(NamedPlans, Vec<String>)> {
    let mut said = Vec::new();
    let mut say = |line: String| said.push(line);
    match cmd.workload {
        super::config::Workload::Plans | super::config::Workload::Vwap => {
            let packet_bytes = cmd
                .packet_bytes
                .unwrap_or_else(|| nearflow_flow::default_packet_bytes(machine) as u64);
            let plans = cmd.workload == super::config::Workload::Plans;
            let (name, what) = if plans {
                (
                    "plan",
                    format!("the generated plan, {} rows per source", cmd.rows),
                )
            } else {
                (
                    "vwap",
                    format!("VWAP, {} ticks, {} branches", cmd.ticks, cmd.branches),
                )
            };
            eprintln!("calibrating: {what}, traced, on this host");
            let c = if plans {
                genplan(cmd.rows, packet_bytes)?
            } else {
                vwap(cmd.ticks, cmd.branches, packet_bytes)?
            };
            say(format!(
                "calibrated on this host ({}): {what}, {} operators, 4 copies at once, traced, \
                 {:.1} ms at {} B packets (LAS); simulated at {} B packets; {:.0} % of the \
                 measured cost is the model's memory time on this host, taken out",
                nearflow_topo::host::cpu_label(),
                c.model.operators.len(),
                c.traced_ms,
                c.host_packet_bytes,
                packet_bytes,
                c.memory_share * 100.0
            ));
            Ok((vec![(name.into(), c.model)], said))
        }
        super::config::Workload::Sp2bench => {
            let names: Vec<String> = crate::harness::parse_list(&cmd.queries)?;
            if names.is_empty() {
                bail!("--queries: no query given");
            }
            let texts = crate::sp2bench::query_texts(cmd.queries_dir.as_deref(), &names)?;
            let (store, data) = sp2bench_store(cmd, machine)?;
            let store = std::sync::Arc::new(store);
            let mut out = Vec::new();
            for (name, text) in names.iter().zip(&texts) {
                eprintln!(
                    "calibrating: {name}, traced, on a runtime of {} on this host",
                    machine.label()
                );
                let c = sparql(&store, name, text, cmd.packet_bytes)?;
                say(format!(
                    "calibrated on this host ({}): {name} on {data} ({} rows), {} operators, 4 \
                     copies at once on {} workers, traced (thread CPU time), {:.1} ms at {} B \
                     packets (LAS); simulated at {} B packets; {:.0} % of the measured cost is \
                     the model's memory time on this host, taken out",
                    nearflow_topo::host::cpu_label(),
                    c.rows,
                    c.model.operators.len(),
                    machine.pu_count(),
                    c.traced_ms,
                    c.host_packet_bytes,
                    c.model.packet_bytes,
                    c.memory_share * 100.0
                ));
                out.push((name.clone(), c.model));
            }
            Ok((out, said))
        }
        _ => Ok((Vec::new(), said)),
    }
}

/// `triples` SP²Bench triples from our generator (seed 1), in a store built for `machine`.
fn generated_store(machine: &nearflow_topo::Machine, triples: u64) -> Result<Store> {
    if triples == 0 {
        bail!("--triples must be at least 1");
    }
    let mut doc = Vec::new();
    nearflow_apps::sp2bench::generate(triples, 1, &mut doc)?;
    let mut loaded = nearflow_rdf::load::Loaded::default();
    nearflow_rdf::load::load_reader(
        &mut loaded,
        std::path::Path::new("generated.n3"),
        nearflow_rdf::load::Format::Turtle,
        doc.as_slice(),
        "",
    )?;
    Ok(loaded.into_store(machine)?)
}

/// The store of `--workload sp2bench`, built for `machine`, and what it holds.
pub(crate) fn sp2bench_store(
    cmd: &super::config::Config,
    machine: &nearflow_topo::Machine,
) -> Result<(nearflow_rdf::Store, String)> {
    if let Some(src) = &cmd.source {
        let store = src.open(machine, &crate::harness::Said(cmd.quiet))?;
        let n = store.len();
        return Ok((store, format!("{n} triples")));
    }
    eprintln!("generating {} SP²Bench triples", cmd.triples);
    let store = generated_store(machine, cmd.triples)?;
    let n = store.len();
    Ok((store, format!("{n} generated triples")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After netting, simulating the calibrated run on this host charges each operator its
    /// measured cost once: work (what is left) plus memory (what the model adds back) is the
    /// cost it had, for an operator whose state the model charges as memory; an operator
    /// whose modelled memory exceeds its cost keeps no work.
    #[test]
    fn netting_leaves_work_plus_modelled_memory_equal_to_the_measured_cost() {
        use nearflow_sim::{OpKind, OpModel};
        let op = |name: &str, fed_by, feeds, kind, ns, out: Vec<f64>, state| OpModel {
            name: String::from(name),
            tuple_bytes_out: vec![16; out.len()],
            fed_by,
            feeds,
            kind,
            ns_per_tuple: ns,
            out_per_in: out,
            input_bytes_per_tuple: 0.0,
            home: None,
            pu: None,
            state_bytes: state,
            state_bytes_per_tuple: if state > 0 { 64.0 } else { 0.0 },
            lookup_bytes_per_tuple: 0.0,
        };
        let source = OpKind::Source {
            packets: 40,
            per_run: 2,
        };
        let plan = PlanModel {
            name: "net".into(),
            operators: vec![
                op("source", vec![], vec![(1, 0)], source, 2.0, vec![4096.0], 0),
                // A hash table of 64 MiB, 64 B of it touched per tuple: memory-heavy.
                op(
                    "join",
                    vec![(0, 0)],
                    vec![(2, 0)],
                    OpKind::Stream,
                    20.0,
                    vec![1.0],
                    64 << 20,
                ),
                // Cheap per tuple against the same kind of state: memory exceeds its cost.
                op(
                    "distinct",
                    vec![(1, 0)],
                    vec![(3, 0)],
                    OpKind::Stream,
                    0.01,
                    vec![1.0],
                    64 << 20,
                ),
                op("sink", vec![(2, 0)], vec![], OpKind::Stream, 1.0, vec![], 0),
            ],
            buffer_packets: 4,
            packet_bytes: 64 << 10,
            store: nearflow_sim::StoreModel::default(),
        };
        let charges = |m: &PlanModel| {
            let host = nearflow_topo::detect_host().unwrap();
            let (r, _) = nearflow_sim::simulate_plan(
                &host,
                nearflow_policy::PolicyKind::Las,
                &nearflow_sim::Model::default(),
                m,
                CONCURRENT,
                nearflow_sim::RunOptions {
                    alloc: nearflow_sim::AllocatorKind::Nearflow,
                    seed: 1,
                    traced: false,
                },
            )
            .unwrap();
            r.operator_charges
        };
        let before = charges(&plan);
        let mut netted = plan.clone();
        let share = net_of_modelled_memory(&mut netted, CONCURRENT).unwrap();
        assert!(share > 0.0 && share < 1.0, "{share}");
        let after = charges(&netted);
        let (work, mem) = before[1];
        assert!(
            mem > 0.0 && mem < work,
            "the join's state is memory: {mem} of {work}"
        );
        let (w, m) = after[1];
        assert!(
            ((w + m) / work - 1.0).abs() < 0.05,
            "join: {w} + {m} against {work}"
        );
        assert!(
            before[2].1 > before[2].0,
            "the distinct's memory exceeds its cost"
        );
        assert_eq!(netted.operators[2].ns_per_tuple, 0.0);
        assert_eq!(
            netted.operators[0].ns_per_tuple,
            plan.operators[0].ns_per_tuple * {
                let (w, m) = before[0];
                ((w - m) / w).max(0.0)
            }
        );
    }

    /// The generated plan's model: one operator per operator of the plan, the simulated packet
    /// size asked for, sources producing every row, the sinks taking the reference's result
    /// sizes, finite costs; and it simulates to the end.
    #[test]
    fn the_generated_plan_model_carries_its_rows_from_sources_to_sinks() {
        let rows = 3000;
        let c = genplan(rows, 32 << 10).unwrap();
        let m = &c.model;
        let mut b = PlanBuilder::new();
        let _ = genplan::build(&mut b, rows);
        assert_eq!(m.operators.len(), b.len());
        assert_eq!(m.packet_bytes, 32 << 10);
        assert!(c.traced_ms > 0.0);
        let t = m.tuples_in();
        let produced: f64 = m
            .operators
            .iter()
            .zip(&t)
            .filter(|(o, _)| matches!(o.kind, OpKind::Source { .. }))
            .map(|(_, &n)| n)
            .sum();
        let want = (6 * (rows + rows / 2)) as f64;
        assert!(
            (produced - want).abs() <= 0.01 * want,
            "{produced} vs {want}"
        );
        let reference = genplan::reference(rows);
        let mut sinks: Vec<u64> = m
            .operators
            .iter()
            .zip(&t)
            .filter(|(o, _)| o.feeds.is_empty())
            .map(|(_, &n)| n.round() as u64)
            .collect();
        sinks.sort_unstable();
        let mut want = vec![
            reference.groups.len() as u64,
            reference.distinct_keys as u64,
        ];
        want.sort_unstable();
        assert_eq!(sinks, want);
        for o in &m.operators {
            assert!(o.ns_per_tuple.is_finite() && o.ns_per_tuple >= 0.0, "{o:?}");
        }
        let machine = nearflow_topo::from_synthetic("pack:2 [numa] core:2 pu:1").unwrap();
        let (r, _) = nearflow_sim::simulate_plan(
            &machine,
            nearflow_policy::PolicyKind::Las,
            &nearflow_sim::Model::default(),
            m,
            3,
            nearflow_sim::RunOptions {
                alloc: nearflow_sim::AllocatorKind::Nearflow,
                seed: 1,
                traced: false,
            },
        )
        .unwrap();
        assert_eq!(r.request_done_ns.len(), 3);
        assert!(r.request_done_ns.iter().all(|&t| t > 0));
    }

    /// A calibrated SPARQL plan, on a runtime of a 2-node synthetic machine: its model's ratios
    /// carry the scans' tuples to the query's result size at the sink, its reading scans are
    /// homed on both nodes, and it simulates to the end.
    #[test]
    fn sparql_models_reproduce_the_result_size() {
        let machine = nearflow_topo::TopologySpec::Synthetic(
            "pack:2 [numa] l3:1(size=4MiB) core:2 pu:1".into(),
        )
        .load()
        .unwrap();
        let store = Arc::new(generated_store(&machine, 5000).unwrap());
        for q in ["q2", "q4"] {
            let text = nearflow_apps::sp2bench::queries::text(q).unwrap();
            let c = sparql(&store, q, &text, None).unwrap();
            assert!(c.rows > 0, "{q}");
            let m = &c.model;
            let sink = m.operators.iter().position(|o| o.feeds.is_empty()).unwrap();
            let got = m.tuples_in()[sink];
            let want = c.rows as f64;
            assert!(
                (got - want).abs() <= 0.01 * want + 1.0,
                "{q}: {got} vs {want}"
            );
            let homes: std::collections::BTreeSet<_> = m
                .operators
                .iter()
                .filter(|o| o.input_bytes_per_tuple > 0.0)
                .filter_map(|o| o.home)
                .collect();
            assert_eq!(homes.len(), 2, "{q}: scans on both nodes");
            // Index joins look up the store, which lies on both nodes.
            assert_eq!(m.store.nodes, vec![0, 1], "{q}");
            assert_eq!(m.store.bytes, store.len() * 36, "{q}");
            for o in &m.operators {
                let is_lookup = o.name == nearflow_sparql::lower::INDEX_JOIN_OPERATOR;
                assert_eq!(o.lookup_bytes_per_tuple > 0.0, is_lookup, "{q}: {}", o.name);
            }
            if q == "q4" {
                // Its DISTINCT holds a set: the model has it as state.
                let stateful: Vec<_> = m
                    .operators
                    .iter()
                    .filter(|o| o.state_bytes > 0)
                    .map(|o| (o.name.as_str(), o.state_bytes))
                    .collect();
                assert!(!stateful.is_empty(), "{q}: no operator state in the model");
                assert!(m
                    .operators
                    .iter()
                    .filter(|o| o.state_bytes > 0)
                    .all(|o| o.state_bytes_per_tuple == SPARQL_STATE_BYTES_PER_TUPLE));
            }
            let (r, _) = nearflow_sim::simulate_plan(
                &machine,
                nearflow_policy::PolicyKind::Las,
                &nearflow_sim::Model::default(),
                m,
                2,
                nearflow_sim::RunOptions {
                    alloc: nearflow_sim::AllocatorKind::Nearflow,
                    seed: 1,
                    traced: false,
                },
            )
            .unwrap();
            assert!(r.request_done_ns.iter().all(|&t| t > 0), "{q}");
        }
    }
}
