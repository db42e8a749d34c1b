//! `nearflow map --simulate`: the mappings measured in the simulator (SIMULATED) on a machine
//! this project does not have — x5355, e5320-uma, nehalem-2x4 of StreamMap's Fig. 2, or any
//! preset, synthetic or XML machine.
//!
//! The application is calibrated on this host (`sim::calibrate::flow_app`: per-tuple costs of
//! each operator, and the state it keeps), then every mapping runs as one request under the
//! `pinned` policy: each operator's tasks on its thread's PU, each operator's state a block
//! that is read and written back by every run (so it stays in the caches of its PU, and moves
//! when a shared operator runs elsewhere), packets written where they are made and read
//! where they are consumed — the communication and contention of §III, by the simulator's
//! caches and memory bandwidth.
//!
//! Not modelled: the OS default (the simulator has no OS scheduler), and the instruction
//! and lock costs of a queue shared by cores (only its data moves).

use anyhow::{bail, Result};
use nearflow_apps::{lois, vwap};
use nearflow_flow::{PlanBuilder, PlanShape};
use nearflow_policy::PolicyKind;
use nearflow_sim::{simulate_plan, AllocatorKind, Model, PlanModel, RunOptions};
use nearflow_topo::Machine;

use super::apps::App;

/// An application calibrated for the simulator with `threads` threads.
pub struct SimApp {
    pub model: PlanModel,
    pub shape: PlanShape,
    pub tuples_in: u64,
}

impl App {
    /// Calibrates the app with `threads` threads on this host at `packet_bytes`.
    pub fn calibrate(&self, threads: usize, packet_bytes: u64) -> Result<SimApp> {
        let (model, shape) = match self {
            App::Vwap { ticks, window } => {
                let expect = vwap::checksum(&vwap::reference(ticks, *window));
                calibrate_plan(
                    "vwap",
                    packet_bytes,
                    |b| {
                        b.on_thread(Some(0));
                        let src = b.source(ticks.clone());
                        vwap::build_threads(b, src, threads, *window)
                    },
                    |out, s| vwap::checksum(&out.take(s)) == expect,
                )?
            }
            App::Lois { samples, cfg } => {
                let expect = lois::reference(samples, *cfg);
                calibrate_plan(
                    "lois",
                    packet_bytes,
                    |b| {
                        b.on_thread(Some(0));
                        let src = b.source(samples.clone());
                        lois::build(b, src, threads, *cfg)
                    },
                    |out, s| {
                        let mut got = out.take(s);
                        got.sort_unstable();
                        got == expect
                    },
                )?
            }
        };
        Ok(SimApp {
            model,
            shape,
            tuples_in: self.len() as u64,
        })
    }

    /// Input tuples.
    pub(crate) fn len(&self) -> usize {
        match self {
            App::Vwap { ticks, .. } => ticks.len(),
            App::Lois { samples, .. } => samples.len(),
        }
    }
}

fn shape_of<S>(build: &impl Fn(&mut PlanBuilder) -> S) -> Result<PlanShape> {
    let mut b = PlanBuilder::new();
    let _ = build(&mut b);
    Ok(b.build()?.shape())
}

impl SimApp {
    /// Simulated input tuples per second with thread `t` on PU `pus[t]` (SIMULATED).
    pub fn throughput(&self, machine: &Machine, pus: &[usize]) -> Result<f64> {
        let report = self.simulate(machine, pus)?;
        Ok(self.tuples_in as f64 / (report.makespan_ns.max(1) as f64 * 1e-9))
    }

    /// Bytes the tasks of each PU read from memory in that run (SIMULATED).
    pub fn dram_bytes(&self, machine: &Machine, pus: &[usize]) -> Result<Vec<u64>> {
        let report = self.simulate(machine, pus)?;
        Ok(report.per_pu.iter().map(|p| p.dram_bytes).collect())
    }

    fn simulate(&self, machine: &Machine, pus: &[usize]) -> Result<nearflow_sim::Report> {
        simulate_mapped(machine, &self.model, &self.shape, pus)
    }
}

/// Runs one request of `model` (whose shape is `shape`) on a model of `machine` under the
/// `pinned` policy, thread `t` on PU `pus[t]` (SIMULATED).
pub fn simulate_mapped(
    machine: &Machine,
    model: &PlanModel,
    shape: &PlanShape,
    pus: &[usize],
) -> Result<nearflow_sim::Report> {
    if let Some(&p) = pus.iter().find(|&&p| p >= machine.pu_count()) {
        bail!("PU {p} does not exist on the simulated machine");
    }
    let mut plan = model.clone();
    for (op, t) in plan.operators.iter_mut().zip(shape.effective_threads()) {
        op.pu = t.map(|t| pus[t]);
    }
    let (report, _) = simulate_plan(
        machine,
        PolicyKind::Pinned,
        &Model::default(),
        &plan,
        1,
        RunOptions {
            alloc: AllocatorKind::Nearflow,
            seed: 1,
            traced: false,
        },
    )?;
    Ok(report)
}

/// Calibrates a plan (`build` one copy, `check` its result) on this host at `packet_bytes`,
/// with its operators' state sizes; its model and shape.
pub fn calibrate_plan<S>(
    name: &str,
    packet_bytes: u64,
    build: impl Fn(&mut PlanBuilder) -> S,
    check: impl Fn(&nearflow_flow::PlanOutput, &S) -> bool,
) -> Result<(PlanModel, PlanShape)> {
    let shape = shape_of(&build)?;
    let cal = crate::sim::calibrate::flow_app(name, packet_bytes, true, build, check)?;
    Ok((cal.model, shape))
}
