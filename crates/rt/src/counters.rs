//! Counters per worker and per request: relaxed atomics on cache-padded, per-worker lines,
//! readable at any time through [`Runtime::counters`](crate::Runtime::counters) and
//! [`RequestHandle::counters`](crate::RequestHandle::counters).

use crossbeam_utils::CachePadded;
use serde::Serialize;

use crate::sync::{AtomicU64, Ordering};

/// Largest rule number a policy may have (rules are 1-based).
pub const MAX_RULES: usize = 8;

pub(crate) struct WorkerCells {
    pub(crate) executed: AtomicU64,
    pub(crate) by_rule: [AtomicU64; MAX_RULES],
    pub(crate) steals: AtomicU64,
    pub(crate) sleeps: AtomicU64,
    pub(crate) wakes: AtomicU64,
    pub(crate) spawned: AtomicU64,
    pub(crate) home_local: AtomicU64,
    pub(crate) home_remote: AtomicU64,
    /// The request whose task the worker runs now, plus one; 0 when it runs none.
    pub(crate) running: AtomicU64,
}

impl WorkerCells {
    pub(crate) fn new() -> CachePadded<Self> {
        CachePadded::new(WorkerCells {
            executed: AtomicU64::new(0),
            by_rule: std::array::from_fn(|_| AtomicU64::new(0)),
            steals: AtomicU64::new(0),
            sleeps: AtomicU64::new(0),
            wakes: AtomicU64::new(0),
            spawned: AtomicU64::new(0),
            home_local: AtomicU64::new(0),
            home_remote: AtomicU64::new(0),
            running: AtomicU64::new(0),
        })
    }

    pub(crate) fn snapshot(&self, worker: usize) -> WorkerCounters {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WorkerCounters {
            worker,
            executed: r(&self.executed),
            by_rule: self.by_rule.iter().map(r).collect(),
            steals: r(&self.steals),
            sleeps: r(&self.sleeps),
            wakes: r(&self.wakes),
            spawned: r(&self.spawned),
            home_local: r(&self.home_local),
            home_remote: r(&self.home_remote),
            running: r(&self.running).checked_sub(1),
        }
    }
}

/// Bumps a counter that only its owner thread writes: a plain load and store, no locked
/// read-modify-write. Other threads read it with a Relaxed load and may see a slightly old value.
#[inline]
pub(crate) fn bump_owned(a: &AtomicU64) {
    a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// What one worker did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WorkerCounters {
    /// Worker (= PU) index.
    pub worker: usize,
    /// Tasks run.
    pub executed: u64,
    /// Tasks found by each rule of the policy: `by_rule[r - 1]` for rule `r`.
    pub by_rule: Vec<u64>,
    /// Tasks taken from a queue the worker does not own.
    pub steals: u64,
    /// Times the worker blocked.
    pub sleeps: u64,
    /// Times the worker woke another one.
    pub wakes: u64,
    /// Tasks it spawned.
    pub spawned: u64,
    /// Tasks with a data home it ran on their home node (its own node).
    pub home_local: u64,
    /// Tasks with a data home it ran although their home is another node.
    pub home_remote: u64,
    /// The request whose task it is running at the moment of the snapshot, if any.
    pub running: Option<u64>,
}

/// What one request did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RequestCounters {
    /// Tasks run.
    pub executed: u64,
    /// Immediate tasks spawned.
    pub spawned_immediate: u64,
    /// Deferred tasks spawned (the root task included).
    pub spawned_deferred: u64,
    /// Tasks dropped without running because the request had failed.
    pub skipped: u64,
    /// Tasks with a data home that ran on their home node.
    pub home_local: u64,
    /// Tasks with a data home that ran on another node (remote accesses to their data).
    pub home_remote: u64,
}

/// A snapshot of the whole runtime.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RuntimeCounters {
    /// Per worker.
    pub workers: Vec<WorkerCounters>,
    /// Rule names of the policy, `rule_names[r - 1]` for rule `r`.
    pub rule_names: Vec<String>,
}

/// The share of homed tasks that ran away from their home node, `remote / (local + remote)`;
/// None when no task had a home.
///
/// This is our counter-free stand-in for the sampled data addresses of
/// `numa-template-library-splittable-data.txt` §2.2: exact for the data a program places (a
/// task with a home reads its home's partition), blind to every other access (stacks, shared
/// structures, the runtime's own queues).
pub fn remote_share(local: u64, remote: u64) -> Option<f64> {
    let all = local + remote;
    (all > 0).then(|| remote as f64 / all as f64)
}

impl RequestCounters {
    /// [`remote_share`] of the request's homed tasks.
    pub fn remote_share(&self) -> Option<f64> {
        remote_share(self.home_local, self.home_remote)
    }
}

impl RuntimeCounters {
    /// Homed tasks run at home and away, summed over workers.
    pub fn homed(&self) -> (u64, u64) {
        self.workers
            .iter()
            .fold((0, 0), |(l, r), w| (l + w.home_local, r + w.home_remote))
    }

    /// [`remote_share`] over all workers.
    pub fn remote_share(&self) -> Option<f64> {
        let (l, r) = self.homed();
        remote_share(l, r)
    }

    /// Homed tasks run at home and away per core group of `machine` (the runtime's machine).
    pub fn homed_by_group(&self, machine: &nearflow_topo::Machine) -> Vec<(u64, u64)> {
        let mut v = vec![(0, 0); machine.groups().len()];
        for w in &self.workers {
            if let Some(g) = v.get_mut(machine.group_of(w.worker)) {
                g.0 += w.home_local;
                g.1 += w.home_remote;
            }
        }
        v
    }

    /// Per core group of `machine`, the distinct requests whose tasks its workers were running
    /// at the moment of the snapshot.
    pub fn running_by_group(&self, machine: &nearflow_topo::Machine) -> Vec<usize> {
        let mut v: Vec<Vec<u64>> = vec![Vec::new(); machine.groups().len()];
        for w in &self.workers {
            if let (Some(r), Some(g)) = (w.running, v.get_mut(machine.group_of(w.worker))) {
                if !g.contains(&r) {
                    g.push(r);
                }
            }
        }
        v.iter().map(Vec::len).collect()
    }

    /// Tasks run by all workers.
    pub fn executed(&self) -> u64 {
        self.workers.iter().map(|w| w.executed).sum()
    }
    /// Tasks found by each rule, summed over workers.
    pub fn by_rule(&self) -> Vec<u64> {
        let mut v = vec![0; self.rule_names.len()];
        for w in &self.workers {
            for (i, x) in w.by_rule.iter().enumerate().take(v.len()) {
                v[i] += x;
            }
        }
        v
    }
    /// Sum of a field over workers.
    pub fn total(&self, f: impl Fn(&WorkerCounters) -> u64) -> u64 {
        self.workers.iter().map(f).sum()
    }
}
