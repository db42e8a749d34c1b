//! What a simulated run reports. Every report says `simulated: true` and names its machine
//! model; tables printed from it say SIMULATED.

use nearflow_policy::PolicyKind;
use nearflow_topo::Machine;
use serde::Serialize;

use crate::model::Model;
use crate::AllocatorKind;

/// One PU's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PuStats {
    /// Time spent running tasks (their work, memory and the runtime's per-task steps).
    pub busy_ns: u64,
    pub tasks: u64,
    /// Of `busy_ns`: the tasks' own work (with the hyper-thread slowdown) and their memory.
    pub work_ns: f64,
    pub memory_ns: f64,
    /// Tasks found by each rule of the policy (index `rule - 1`).
    pub by_rule: Vec<u64>,
    pub steals: u64,
    /// Times it was woken from sleep.
    pub sleeps: u64,
    /// `busy_ns / makespan`.
    pub utilisation: f64,
    /// Bytes its tasks read from memory: what missed every cache, its last level's included
    /// (StreamMap's Holistic weighs threads by their LLC misses).
    pub dram_bytes: u64,
}

/// Reads served by one cache level.
#[derive(Clone, Debug, Serialize)]
pub struct LevelStats {
    pub level: u8,
    pub hit_bytes: u64,
    /// Hits over the bytes that reached this level (missed every level above).
    pub hit_rate: f64,
}

/// The figures of one simulated run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always true: nothing here was measured on the machine it names.
    pub simulated: bool,
    pub machine: String,
    pub pus: usize,
    pub nodes: usize,
    pub policy: String,
    pub allocator: String,
    pub workload: String,
    pub model: Model,
    /// Tasks run.
    pub tasks: usize,
    pub requests: usize,
    /// Time from submitting every request to the end of the last task.
    pub makespan_ns: u64,
    /// Σ of the tasks' own work (no memory, no runtime cost, no slowdown), over the tasks run.
    pub total_work_ns: f64,
    /// Completion time of each request.
    pub request_done_ns: Vec<u64>,
    /// For a plan: when each operator of each request finished (request by request); empty
    /// for a task graph.
    pub operator_done_ns: Vec<Vec<u64>>,
    /// For a plan: per operator, the work and the memory time its tasks were charged, summed
    /// over requests; empty for a task graph.
    pub operator_charges: Vec<(f64, f64)>,
    pub per_pu: Vec<PuStats>,
    /// The policy's rule names and how many tasks each found (all PUs).
    pub rules: Vec<(String, u64)>,
    pub steals: u64,
    pub wakes: u64,
    pub failed_probes: u64,
    pub levels: Vec<LevelStats>,
    pub dram_local_bytes: u64,
    pub dram_remote_bytes: u64,
    /// Remote bytes over the bytes read from DRAM (the reads that missed every cache): what
    /// share of the memory traffic crossed a link. A policy that keeps data in its node's
    /// caches reads less from DRAM, so this share can rise while remote bytes fall.
    pub dram_remote_share: f64,
    /// Remote bytes over all bytes read (cache hits included): how much of what the tasks read
    /// came from another node's memory.
    pub read_remote_share: f64,
    pub balancer_moves: u64,
    pub balancer_shares: u64,
    /// Events processed.
    pub events: u64,
}

impl Report {
    pub(crate) fn new(
        machine: &Machine,
        kind: PolicyKind,
        workload: String,
        requests: usize,
        model: &Model,
        alloc: AllocatorKind,
        levels: &[u8],
    ) -> Self {
        Report {
            simulated: true,
            machine: machine_name(machine),
            pus: machine.pu_count(),
            nodes: machine.node_count(),
            policy: kind.name().into(),
            allocator: alloc.name().into(),
            workload,
            model: model.clone(),
            tasks: 0,
            requests,
            makespan_ns: 0,
            total_work_ns: 0.0,
            request_done_ns: Vec::new(),
            operator_done_ns: Vec::new(),
            operator_charges: Vec::new(),
            per_pu: Vec::new(),
            rules: kind
                .rule_names()
                .iter()
                .map(|n| (n.to_string(), 0))
                .collect(),
            steals: 0,
            wakes: 0,
            failed_probes: 0,
            levels: levels
                .iter()
                .map(|&level| LevelStats {
                    level,
                    hit_bytes: 0,
                    hit_rate: 0.0,
                })
                .collect(),
            dram_local_bytes: 0,
            dram_remote_bytes: 0,
            dram_remote_share: 0.0,
            read_remote_share: 0.0,
            balancer_moves: 0,
            balancer_shares: 0,
            events: 0,
        }
    }

    pub(crate) fn hit(&mut self, level: u8, bytes: u64) {
        if let Some(l) = self.levels.iter_mut().find(|l| l.level == level) {
            l.hit_bytes += bytes;
        }
    }

    pub(crate) fn finish(&mut self, per_pu: Vec<PuStats>, done: Vec<u64>) {
        self.makespan_ns = done.iter().copied().max().unwrap_or(0);
        self.request_done_ns = done;
        let mut per_pu = per_pu;
        for p in &mut per_pu {
            p.utilisation = p.busy_ns as f64 / self.makespan_ns.max(1) as f64;
            for (i, &n) in p.by_rule.iter().enumerate() {
                if let Some(r) = self.rules.get_mut(i) {
                    r.1 += n;
                }
            }
            self.steals += p.steals;
        }
        self.tasks = per_pu.iter().map(|p| p.tasks as usize).sum();
        self.per_pu = per_pu;
        let dram = self.dram_local_bytes + self.dram_remote_bytes;
        self.dram_remote_share = self.dram_remote_bytes as f64 / dram.max(1) as f64;
        let mut reaching: u64 = self.levels.iter().map(|l| l.hit_bytes).sum::<u64>() + dram;
        self.read_remote_share = self.dram_remote_bytes as f64 / reaching.max(1) as f64;
        for l in &mut self.levels {
            l.hit_rate = l.hit_bytes as f64 / reaching.max(1) as f64;
            reaching -= l.hit_bytes;
        }
    }

    /// Mean utilisation of the PUs.
    pub fn utilisation(&self) -> f64 {
        self.per_pu.iter().map(|p| p.utilisation).sum::<f64>() / self.per_pu.len().max(1) as f64
    }

    /// Tasks run, over all PUs (equals `tasks` after a complete run).
    pub fn tasks_run(&self) -> u64 {
        self.per_pu.iter().map(|p| p.tasks).sum()
    }
}

/// "preset e7-4820 (64 PUs, 4 nodes)" and the like.
pub fn machine_name(m: &Machine) -> String {
    let src = match m.source() {
        nearflow_topo::Source::Host => "this host's topology".to_string(),
        nearflow_topo::Source::Synthetic(s) => format!("synthetic `{s}`"),
        nearflow_topo::Source::Xml(p) => format!("xml {p}"),
        nearflow_topo::Source::Preset(p) => format!("preset {p}"),
    };
    format!("{src} ({} PUs, {} nodes)", m.pu_count(), m.node_count())
}
