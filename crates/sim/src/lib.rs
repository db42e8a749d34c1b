//! # nearflow-sim — a discrete-event simulator of the papers' machines
//!
//! The papers' central results are about machines this project does not have: LAS against NLS
//! on a 4-node E7-4820 (`las-scheduler-and-numa-allocator.txt` §6.3) and a 2×E5310 SMP (§6.2),
//! Bobox-2011 on a 4-node E7540 (`task-scheduling-in-data-stream-processing.txt` §6). This crate
//! runs a workload on a *model* of such a machine, under the **same policy code** as the
//! threaded runtime: every placement, probe order, wake-up order and balancer decision is a
//! call into `nearflow-policy` (see `engine.rs`), so a policy change shows in both at once.
//! Every figure it produces is SIMULATED and says so ([`Report::simulated`]).
//!
//! ## The model
//!
//! - **Machine**: any [`Machine`] (preset, synthetic, XML): one virtual worker per PU, grouped
//!   and put to sleep as the policy says; hyper-threads of one core slow each other; every cache
//!   of the topology with its size and its PUs, an LRU of whole data blocks; one memory per NUMA
//!   node with a bandwidth shared by its readers, a link bandwidth per node pair, and the NUMA
//!   factor of the machine's distance matrix (e7540: the Bobox paper's Table 1). The constants
//!   and their sources are in `model.rs`, each settable from the command line.
//! - **Workload**: requests of tasks that read and write blocks and spawn immediate or deferred
//!   tasks ([`workload`]); a written block lives where it was written (nearflow's allocator) or
//!   anywhere (the system allocator).
//! - **Execution**: events — a task ends, a woken worker runs, a searcher looks again, a search
//!   gives up and sleeps, the Bobox balancer runs — processed in time order; ties in submission
//!   order, so a run is deterministic for a seed (the seed feeds random stealing).
//!
//! ## Approximations (each one a choice, stated)
//!
//! - Blocks, not cache lines: a block is in a cache or not; no prefetching, no write-back.
//! - A task's memory bandwidth share is fixed when it starts (readers that start later do not
//!   slow it down); the hyper-thread slowdown too.
//! - A task's spawns are pushed when it ends (one after another), not while it runs.
//! - The runtime's held credits, its allocator's own costs and the OS scheduler are not modelled.
//!
//! ## Invariants (tested in `tests/sim.rs`)
//!
//! - Every task of a workload runs exactly once, under every policy, on every machine.
//! - With one PU and [`Model::free`], the makespan equals the sum of the tasks' work.
//! - A run that stops with tasks left is reported as [`SimError::Stalled`] (a lost wake-up).
//!
//! ## Files
//!
//! - `lib.rs` — this overview, [`simulate`], [`simulate_traced`], [`AllocatorKind`], [`SimError`].
//! - `model.rs` — [`Model`]: every cost constant with its source.
//! - `cache.rs` — one cache: an LRU of blocks bounded by bytes.
//! - `workload.rs` — [`Graph`] and the generators.
//! - `suite.rs` — the task-parallel set of `bench rayon` as graphs, with homed data.
//! - `driver.rs` — what the event loop asks of a workload (a graph's tables, or a plan).
//! - `plan.rs` — [`PlanModel`]: dataflow plans as the engine runs them, calibrated costs.
//! - `engine.rs` — the event loop: queues, sleep protocol, costs.
//! - `report.rs` — [`Report`].

mod cache;
mod driver;
mod engine;
mod model;
mod plan;
mod report;
pub mod suite;
pub mod workload;

use nearflow_policy::PolicyKind;
use nearflow_topo::Machine;

pub use model::{Model, ModelError};
pub use plan::{OpKind, OpModel, PlanModel, StoreModel, STATE_PAGE};

pub use report::{machine_name, LevelStats, PuStats, Report};
pub use workload::{Graph, WorkloadError};

/// Whose memory a written block is, by the allocator that gives it: nearflow's NUMA allocator
/// (LAS §5) puts it on the writer's node; the system allocator on any node (a recycled block
/// keeps no node). The project's one choice of allocator, from `nearflow-alloc`.
pub use nearflow_alloc::AllocatorKind;

/// Why a simulation did not produce a report.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("bad workload: {0}")]
    Workload(WorkloadError),
    #[error("the workload names NUMA node {node}, but the machine has {nodes}")]
    NoSuchNode { node: usize, nodes: usize },
    #[error("the simulation stalled at {at_ns} ns with {left} requests unfinished: no worker will look for their tasks (a lost wake-up)")]
    Stalled { left: usize, at_ns: u64 },
    #[error("{0}")]
    Model(String),
}

// The message holds the workload's error, so it is not also the source: a chain printed with
// `{:#}` would say it twice.
impl From<WorkloadError> for SimError {
    fn from(e: WorkloadError) -> Self {
        SimError::Workload(e)
    }
}

/// One task as the simulated machine ran it (for a timeline).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TaskSpan {
    pub pu: usize,
    pub request: u32,
    pub task: workload::TaskId,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Runs `graph` on a model of `machine` under `policy`; deterministic for a `seed`.
pub fn simulate(
    machine: &Machine,
    policy: PolicyKind,
    model: &Model,
    graph: &Graph,
    alloc: AllocatorKind,
    seed: u64,
) -> Result<Report, SimError> {
    run_graph(machine, policy, model, graph, alloc, seed, false).map(|r| r.0)
}

/// As [`simulate`], and every task run, in start order per PU.
pub fn simulate_traced(
    machine: &Machine,
    policy: PolicyKind,
    model: &Model,
    graph: &Graph,
    alloc: AllocatorKind,
    seed: u64,
) -> Result<(Report, Vec<TaskSpan>), SimError> {
    run_graph(machine, policy, model, graph, alloc, seed, true)
}

fn run_graph(
    machine: &Machine,
    policy: PolicyKind,
    model: &Model,
    graph: &Graph,
    alloc: AllocatorKind,
    seed: u64,
    traced: bool,
) -> Result<(Report, Vec<TaskSpan>), SimError> {
    check(machine, graph)?;
    engine::Sim::new(
        machine,
        policy,
        model,
        driver::GraphDriver::new(graph),
        alloc,
        seed,
    )
    .traced(traced)
    .run()
}

/// How to run: the allocator rule, the seed, and whether to record every task.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    pub alloc: AllocatorKind,
    pub seed: u64,
    pub traced: bool,
}

/// Runs `requests` instances of a dataflow plan at once on a model of `machine` (see
/// [`PlanModel`]).
pub fn simulate_plan(
    machine: &Machine,
    policy: PolicyKind,
    model: &Model,
    plan: &PlanModel,
    requests: usize,
    opts: RunOptions,
) -> Result<(Report, Vec<TaskSpan>), SimError> {
    let RunOptions {
        alloc,
        seed,
        traced,
    } = opts;
    plan.validate()?;
    if let Some(node) = plan
        .operators
        .iter()
        .filter_map(|o| o.home)
        .chain(plan.store.nodes.iter().copied())
        .find(|&n| n >= machine.node_count())
    {
        return Err(SimError::NoSuchNode {
            node,
            nodes: machine.node_count(),
        });
    }
    let sim = engine::Sim::new(
        machine,
        policy,
        model,
        plan::PlanDriver::new(plan, requests),
        alloc,
        seed,
    );
    sim.traced(traced).run()
}

fn check(machine: &Machine, graph: &Graph) -> Result<(), SimError> {
    graph.validate()?;
    let nodes = machine.node_count();
    let homes = graph
        .blocks
        .iter()
        .filter_map(|b| b.home)
        .chain(graph.roots.iter().filter_map(|r| r.1))
        .chain(
            graph
                .tasks
                .iter()
                .flat_map(|t| t.spawns.iter().filter_map(|s| s.home)),
        );
    for node in homes {
        if node >= nodes {
            return Err(SimError::NoSuchNode { node, nodes });
        }
    }
    Ok(())
}
