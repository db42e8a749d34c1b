//! The runtime against the simulator, decision by decision.
//!
//! One seeded workload — random spawn trees of several requests, immediate and deferred
//! spawns — runs on the real runtime with **one worker**, where a single thread makes every
//! decision, so the run is deterministic: which queue each spawn goes to, which probe finds
//! the next task, which end of which queue it is popped from, which request's deferred task
//! comes first. The same graph runs in the simulator on the same one-PU machine. Their decision
//! logs — the order in which the tasks ran — must be equal, under every policy. A queue that
//! pops the wrong end, a rule probed out of order, a deferred queue that orders requests
//! differently, in either copy, changes the log.
//!
//! What one worker cannot show (steals, wake-ups, node loads and the balancer's moves need
//! several workers, whose real interleavings are not reproducible) is shared by calling the same
//! `nearflow-policy` code (`walk`, `resolve_deferred`, the wake orders, the wake chain's
//! `first_queued`, `node_loads` over each side's `QueueView`, `choose_node`, `balance`, the
//! operator states and `consumer_kind`); this check covers the queue mechanics each side
//! implements on its own (which end a queue is pushed and popped at).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use nearflow_policy::{PolicyKind, TaskKind};
use nearflow_sim::workload::TaskId;
use nearflow_sim::{AllocatorKind, Graph, Model};
use nearflow_topo::Machine;

/// The one-PU machine both sides run on.
pub fn machine() -> Result<Machine> {
    Ok(nearflow_topo::from_synthetic("core:1 pu:1")?)
}

/// The tasks of `g` in the order the real runtime with one worker ran them under `policy`.
pub fn runtime_order(machine: &Machine, policy: PolicyKind, g: &Graph) -> Result<Vec<TaskId>> {
    if machine.pu_count() != 1 {
        bail!("the decision log is deterministic with one worker only");
    }
    let rt = crate::harness::build_runtime(
        machine.clone(),
        policy,
        nearflow_rt::Pinning::None,
        false,
        nearflow_rt::AllocatorKind::Nearflow,
    )?;
    let graph = Arc::new(g.clone());
    let log = Arc::new(Mutex::new(Vec::with_capacity(g.tasks.len())));
    // A gate holds the worker until every root is queued, as the simulator queues them all at
    // time 0 before the PU's first search.
    let (started, open) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let gate = {
        let (started, open) = (started.clone(), open.clone());
        rt.submit(move |_| {
            started.store(true, Ordering::Release);
            while !open.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
        })
    };
    while !started.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let handles: Vec<_> = g
        .roots
        .iter()
        .map(|&(root, _)| {
            let (graph, log) = (graph.clone(), log.clone());
            rt.submit(move |cx| run(cx, &graph, &log, root))
        })
        .collect();
    open.store(true, Ordering::Release);
    gate.wait()?;
    for h in handles {
        h.wait()?;
    }
    let order = std::mem::take(&mut *log.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(order)
}

fn run(cx: &nearflow_rt::TaskCx<'_>, g: &Arc<Graph>, log: &Arc<Mutex<Vec<TaskId>>>, t: TaskId) {
    log.lock().unwrap_or_else(|p| p.into_inner()).push(t);
    for s in &g.tasks[t as usize].spawns {
        let (g2, log2, child) = (g.clone(), log.clone(), s.task);
        let f = move |cx: &nearflow_rt::TaskCx<'_>| run(cx, &g2, &log2, child);
        match (s.kind, s.home.and_then(|h| cx.home_on_node(h).ok())) {
            (TaskKind::Deferred, Some(home)) => cx.spawn_deferred_at(home, f),
            (kind, _) => cx.spawn(kind, f),
        }
    }
}

/// The tasks of `g` in the order the simulator ran them under `policy` on `machine`.
pub fn simulated_order(machine: &Machine, policy: PolicyKind, g: &Graph) -> Result<Vec<TaskId>> {
    let (_, mut spans) = nearflow_sim::simulate_traced(
        machine,
        policy,
        &Model::default(),
        g,
        AllocatorKind::Nearflow,
        1,
    )
    .with_context(|| format!("simulating under {policy}"))?;
    spans.sort_by_key(|s| (s.start_ns, s.end_ns));
    Ok(spans.into_iter().map(|s| s.task).collect())
}

/// The first place two logs differ, described, if they do.
pub fn first_difference(real: &[TaskId], simulated: &[TaskId]) -> Option<String> {
    let at = real
        .iter()
        .zip(simulated)
        .position(|(a, b)| a != b)
        .or_else(|| (real.len() != simulated.len()).then(|| real.len().min(simulated.len())))?;
    let window = |v: &[TaskId]| v[at.saturating_sub(3)..(at + 4).min(v.len())].to_vec();
    Some(format!(
        "decision {at} of {}: the runtime ran {:?}, the simulator {:?} (around it: runtime {:?}, simulator {:?})",
        real.len(),
        real.get(at),
        simulated.get(at),
        window(real),
        window(simulated)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every policy that runs on one PU decides alike in the runtime and in the simulator.
    #[test]
    fn runtime_and_simulator_decide_alike_on_one_worker() {
        let m = machine().unwrap();
        // Work per task so that the simulated starts are distinct; the runtime's tasks do none.
        let g = nearflow_sim::workload::stress(4, 300, 200.0, 7).unwrap();
        let kinds: std::collections::BTreeSet<_> = g
            .tasks
            .iter()
            .flat_map(|t| t.spawns.iter().map(|s| s.kind == TaskKind::Deferred))
            .collect();
        assert_eq!(kinds.len(), 2, "the workload spawns both kinds");
        let mut failures = Vec::new();
        for p in PolicyKind::ALL {
            if p == PolicyKind::Pinned {
                continue; // it runs only mapped plans (a PU home per task)
            }
            let real = runtime_order(&m, p, &g).unwrap();
            let sim = simulated_order(&m, p, &g).unwrap();
            assert_eq!(real.len(), g.tasks.len(), "{p}: every task ran once");
            if let Some(d) = first_difference(&real, &sim) {
                failures.push(format!("{p}: {d}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn a_difference_is_found_and_named() {
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 3]), None);
        let d = first_difference(&[1, 2, 3], &[1, 3, 2]).unwrap();
        assert!(d.starts_with("decision 1 of 3"), "{d}");
        assert!(first_difference(&[1, 2], &[1, 2, 3])
            .unwrap()
            .starts_with("decision 2"));
    }
}
