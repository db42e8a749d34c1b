//! Checks that the runtime's threads run where LAS §4.1 puts them, asking the kernel.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nearflow_alloc::checks::Check;
use nearflow_topo::Machine;

use crate::{Pinning, RequestError, RtError, Runtime};

/// Why a placement check could not run (a failed check is a [`Check`] with `ok` false).
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// The runtime did not start.
    #[error(transparent)]
    Start(#[from] RtError),
    /// The probe request failed.
    #[error("the probe request failed: {0}")]
    Probe(RequestError),
}

// The message holds the request's error, so it is not also the source: a chain printed with
// `{:#}` would say it twice.
impl From<RequestError> for PlacementError {
    fn from(e: RequestError) -> Self {
        PlacementError::Probe(e)
    }
}

/// Builds a runtime on `machine` (the detected host) with threads bound to their core group,
/// runs busy tasks on every worker, and checks with `getcpu` that each worker ran only on its
/// group's NUMA node (LAS §4.1). The runtime's half of `nearflow check placement`; the
/// allocator's is [`nearflow_alloc::checks`].
pub fn worker_nodes(machine: Machine) -> Result<Check, PlacementError> {
    let expected: Vec<usize> = (0..machine.pu_count())
        .map(|w| machine.node_of(w))
        .collect();
    let rt = Runtime::builder(machine).pinning(Pinning::Group).build()?;
    let workers = rt.workers();
    let seen: Arc<Mutex<BTreeMap<usize, BTreeMap<usize, usize>>>> = Arc::default();
    let s = seen.clone();
    let h = rt.submit(move |cx| {
        for _ in 0..(workers * 64) {
            let s = s.clone();
            cx.spawn_deferred(move |cx| {
                // Busy for a while so that every worker takes some of these tasks.
                let t = Instant::now();
                while t.elapsed() < Duration::from_micros(300) {
                    std::hint::spin_loop();
                }
                let node = nearflow_alloc::current_node();
                let mut m = s.lock().unwrap_or_else(|p| p.into_inner());
                *m.entry(cx.worker()).or_default().entry(node).or_default() += 1;
            });
        }
    });
    h.wait()?;
    let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut ok = seen.len() == workers;
    let mut detail = Vec::new();
    for (w, nodes) in &seen {
        let want = expected.get(*w).copied().unwrap_or(usize::MAX);
        let right = nodes.keys().all(|&n| n == want);
        ok &= right;
        detail.push(format!(
            "worker {w} (node {want}): tasks on nodes {nodes:?}"
        ));
    }
    if seen.len() != workers {
        detail.push(format!(
            "only {} of {workers} workers ran a task",
            seen.len()
        ));
    }
    Ok(Check {
        name: "runtime workers run on their core group's node".into(),
        ok,
        detail: detail.join("; "),
    })
}
