//! # nearflow-policy — pure scheduling decisions
//!
//! Every scheduling policy of nearflow as plain data and pure functions, with no threads and no
//! `unsafe`, so that the threaded runtime (`nearflow-rt`), the unit tests below and a later
//! discrete-event simulator run the very same rules. A [`Policy`] is built from a
//! [`Machine`] and answers three questions:
//!
//! 1. **Where does a new task go?** [`Policy::place`] and [`Policy::place_root`] name a
//!    [`QueueRef`].
//! 2. **Which queues does an idle worker probe, in which order?** [`Policy::search`] gives the
//!    worker's [`Step`]s; [`walk`] runs them (with round-robin and random cursors).
//! 3. **Whom do we wake?** [`Policy::wake_order`] lists sleep domains, nearest first, and
//!    [`Policy::sleep`] says how workers are grouped to sleep.
//!
//! The policies and their sources:
//!
//! | name | source |
//! |---|---|
//! | `las` | `../shared/papers/las-scheduler-and-numa-allocator.txt` §4.1–4.3 |
//! | `nls` | the same paper, §6.1 (TBB-like baseline) |
//! | `bobox2011` | `task-scheduling-in-data-stream-processing.txt` §5 |
//! | `fifo-rr` | the same paper, §6 (its baseline) |
//! | `central`, `per-thread`, `random-steal` | `load-balancing-queues.txt` §II |
//! | `pinned` | `streammap-cache-topology-mapping.txt` §IV.A: threads bound to cores, no stealing |
//!
//! Worker `w` is the thread of PU `w`: the runtime creates one thread per PU, grouped into one
//! pool per core group (§4.1).
//!
//! ## Files
//!
//! - `lib.rs` — [`Policy`], [`PolicyKind`], placement and sleep layouts, [`Services`].
//! - `search.rs` — search orders ([`Step`], [`Probe`]), [`walk`] and [`resolve_deferred`].
//! - `las.rs` — LAS (§4.2's five rules, §4.3's sleep domains).
//! - `home.rs` — data homes ([`Home`]) and where each policy puts a homed task ([`Policy::place_at`]).
//! - `bobox.rs` — Bobox-2011: per-node request lists, node choice and the load balancer (§5).
//! - `dataflow.rs` — the dataflow engine's rules both the engine and the simulator apply: the
//!   operator states and the kind of a consumer's task.
//! - `view.rs` — [`QueueView`]: decisions over a runtime's queues that the threaded runtime
//!   and the simulator share (the wake chain's test, the balancer's node loads).
//! - `simple.rs` — NLS, FIFO+RR, the three queue designs of load-balancing-queues.txt, and
//!   the `pinned` policy StreamMap runs under.

mod bobox;
pub mod dataflow;
mod home;
mod las;
mod search;
mod simple;
mod view;

use std::fmt;
use std::str::FromStr;

use nearflow_topo::Machine;
use serde::Serialize;

pub use bobox::{
    balance, balance_round, choose_node, Balance, BalanceSite, NodeLoad, RequestNodes,
};
pub use home::{Home, HomeError};
pub use search::{
    pop_of, resolve_deferred, walk, Cursors, End, Pop, Probe, QueueRef, RequestId, Rng, Step, Take,
    WorkerId,
};
pub use view::{wake_walk, QueueView, WakeSite};

/// The kind of a spawned task (§4 of the LAS paper, §3.1 of the Bobox paper).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TaskKind {
    /// Run as soon as possible, near the spawning task (shares its hot data).
    Immediate,
    /// Run when resources are free, possibly far away (detached work, request roots).
    Deferred,
}

/// The scheduling policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    Las,
    Nls,
    Bobox2011,
    FifoRr,
    Central,
    PerThread,
    RandomSteal,
    Pinned,
}

impl PolicyKind {
    /// Every policy, in the order benchmarks print them.
    pub const ALL: [PolicyKind; 8] = [
        PolicyKind::Las,
        PolicyKind::Nls,
        PolicyKind::Bobox2011,
        PolicyKind::FifoRr,
        PolicyKind::Central,
        PolicyKind::PerThread,
        PolicyKind::RandomSteal,
        PolicyKind::Pinned,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Las => "las",
            PolicyKind::Nls => "nls",
            PolicyKind::Bobox2011 => "bobox2011",
            PolicyKind::FifoRr => "fifo-rr",
            PolicyKind::Central => "central",
            PolicyKind::PerThread => "per-thread",
            PolicyKind::RandomSteal => "random-steal",
            PolicyKind::Pinned => "pinned",
        }
    }

    /// Names of the rules, index `r - 1` for rule `r` (used by counters).
    pub fn rule_names(self) -> &'static [&'static str] {
        match self {
            PolicyKind::Las => &[
                "1 own immediate (youngest)",
                "2 group immediate (oldest)",
                "3 group deferred (oldest request, youngest task)",
                "4 other group deferred (2nd oldest request, oldest task)",
                "5 same-node immediate (round robin, oldest)",
            ],
            PolicyKind::Nls => &[
                "1 own immediate (latest)",
                "2 shared deferred (oldest)",
                "3 other thread immediate (oldest)",
            ],
            PolicyKind::Bobox2011 => &[
                "1 own immediate (newest)",
                "2 deferred of last request (oldest)",
                "3 oldest request of node (oldest)",
                "4 same-node thread immediate (oldest)",
            ],
            PolicyKind::FifoRr => &["1 own list (FIFO)", "2 steal round robin"],
            PolicyKind::Central => &["1 central queue"],
            PolicyKind::PerThread => &["1 own queue"],
            PolicyKind::RandomSteal => &["1 own deque (youngest)", "2 random steal (oldest)"],
            PolicyKind::Pinned => &["1 own queue (oldest)"],
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name that is not one of [`PolicyKind::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown policy `{0}`; known policies: las, nls, bobox2011, fifo-rr, central, per-thread, random-steal, pinned")]
pub struct UnknownPolicy(pub String);

impl FromStr for PolicyKind {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, UnknownPolicy> {
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownPolicy(s.to_string()))
    }
}

/// Where a spawned task goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Place {
    /// This queue.
    Queue(QueueRef),
    /// `Shared(ticket % count)` for a ticket the runtime draws from a counter (per-thread queues
    /// fed in round robin, load-balancing-queues.txt §II.B).
    RoundRobinShared { count: usize },
    /// The deferred queue of the node responsible for the request's next deferred task (Bobox
    /// §5.2: round robin among the nodes sharing the request). See [`RequestNodes`].
    RequestNode,
}

/// Where the first task of a new request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RootPlace {
    /// This queue.
    Queue(QueueRef),
    /// `Deferred(request % groups)`: independent requests start on different core groups, so on
    /// different NUMA nodes when there are several (LAS §2.2: "completely independent tasks should
    /// be scheduled on different NUMA nodes"); idle groups take them over through rule 4.
    DeferredByRequest { groups: usize },
    /// As [`Place::RoundRobinShared`].
    RoundRobinShared { count: usize },
    /// Bobox §5.1: the node with the most free resources, see [`choose_node`].
    LeastLoadedNode,
}

/// How workers sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SleepScheme {
    /// Workers sleep per domain; a spawner wakes one sleeper of the domains of
    /// [`Policy::wake_order`], nearest first.
    Domains,
    /// One global counting semaphore whose value is the number of queued tasks (FIFO+RR): every
    /// spawn posts, every worker waits before it looks for a task.
    CountingSemaphore,
}

/// How workers are grouped to sleep.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SleepLayout {
    pub scheme: SleepScheme,
    /// Workers of each domain.
    pub domains: Vec<Vec<WorkerId>>,
    /// Domain of each worker.
    pub domain_of: Vec<usize>,
}

impl SleepLayout {
    fn from_domains(scheme: SleepScheme, domains: Vec<Vec<WorkerId>>, workers: usize) -> Self {
        let mut domain_of = vec![0; workers];
        for (d, ws) in domains.iter().enumerate() {
            for &w in ws {
                domain_of[w] = d;
            }
        }
        SleepLayout {
            scheme,
            domains,
            domain_of,
        }
    }
}

/// A scheduling policy instantiated for one machine.
#[derive(Clone, Debug, Serialize)]
pub struct Policy {
    kind: PolicyKind,
    workers: usize,
    /// Number of `Local` queues (0 or one per worker).
    pub local_queues: usize,
    /// Number of `Shared` queues.
    pub shared_queues: usize,
    /// Number of `Deferred` queues.
    pub deferred_queues: usize,
    searches: Vec<Vec<Step>>,
    /// Placement of immediate / deferred spawns, per spawning worker.
    place_immediate: Vec<Place>,
    place_deferred: Vec<Place>,
    root: RootPlace,
    sleep: SleepLayout,
    wake_local: Vec<Vec<usize>>,
    wake_shared: Vec<Vec<usize>>,
    wake_deferred: Vec<Vec<usize>>,
    /// Group of each worker, and the node of each deferred queue (Bobox), kept for the runtime.
    node_of_worker: Vec<usize>,
    services: Services,
    /// Where tasks with a data home go (`home.rs`), derived from the rest in [`Policy::new`].
    homes: home::HomeQueues,
}

/// What a policy needs from the runtime beyond its queues, searches and sleep layout: data the
/// runtime acts on, so that a new policy needs no edit of the runtime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Services {
    /// Keep a registry of the requests in flight and the nodes each one runs on
    /// ([`RequestNodes`]): needed by [`RootPlace::LeastLoadedNode`], [`Place::RequestNode`] and
    /// the load balancer (Bobox §5.1–5.2).
    pub request_registry: bool,
    /// Run the load balancer of Bobox §5.2 ([`balance`]) every [`BALANCER_PERIOD`].
    pub balancer: bool,
}

/// The period of the Bobox load balancer (§5.2: "every 100 ms").
pub const BALANCER_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

impl Policy {
    /// Instantiates a policy for a machine.
    pub fn new(kind: PolicyKind, machine: &Machine) -> Policy {
        let mut p = match kind {
            PolicyKind::Las => las::build(machine),
            PolicyKind::Nls => simple::nls(machine),
            PolicyKind::Bobox2011 => bobox::build(machine),
            PolicyKind::FifoRr => simple::fifo_rr(machine),
            PolicyKind::Central => simple::central(machine),
            PolicyKind::PerThread => simple::per_thread(machine),
            PolicyKind::RandomSteal => simple::random_steal(machine),
            PolicyKind::Pinned => simple::pinned(machine),
        };
        p.homes = home::HomeQueues::derive(&p, machine);
        p
    }

    /// Which policy.
    #[inline]
    pub fn kind(&self) -> PolicyKind {
        self.kind
    }
    /// Number of workers (one per PU).
    #[inline]
    pub fn workers(&self) -> usize {
        self.workers
    }
    /// The search order of a worker: the queues it probes for a task, in which order.
    #[inline]
    pub fn search(&self, w: WorkerId) -> &[Step] {
        &self.searches[w]
    }
    /// Where a task spawned by worker `w` goes.
    #[inline]
    pub fn place(&self, kind: TaskKind, w: WorkerId) -> Place {
        match kind {
            TaskKind::Immediate => self.place_immediate[w],
            TaskKind::Deferred => self.place_deferred[w],
        }
    }
    /// Where the first task of a request submitted from outside the pool goes.
    pub fn place_root(&self) -> RootPlace {
        self.root
    }
    /// How workers sleep.
    #[inline]
    pub fn sleep(&self) -> &SleepLayout {
        &self.sleep
    }
    /// Sleep domains to try, in order, after a task was pushed to `q`. Every worker of each
    /// listed domain can reach `q` through its search order.
    #[inline]
    pub fn wake_order(&self, q: QueueRef) -> &[usize] {
        match q {
            QueueRef::Local(w) => &self.wake_local[w],
            QueueRef::Shared(i) => &self.wake_shared[i],
            QueueRef::Deferred(i) => &self.wake_deferred[i],
        }
    }
    /// NUMA node of a worker.
    #[inline]
    pub fn node_of_worker(&self, w: WorkerId) -> usize {
        self.node_of_worker[w]
    }
    /// What the policy needs from the runtime besides queues and sleep.
    pub fn services(&self) -> Services {
        self.services
    }
    /// Whether worker `w` taking a task from `q` counts as a steal: another worker's deque, or
    /// another worker's list where there is one shared list per worker (per-thread, FIFO+RR).
    #[inline]
    pub fn is_steal(&self, w: WorkerId, q: QueueRef) -> bool {
        match q {
            QueueRef::Local(v) => v != w,
            QueueRef::Shared(i) => self.shared_queues == self.workers && i != w,
            QueueRef::Deferred(_) => false,
        }
    }
}

/// Does search order `search` reach `q` at all? Used by tests to check the wake-order invariant.
pub fn search_reaches(search: &[Step], q: QueueRef) -> bool {
    search
        .iter()
        .any(|s| s.probes().iter().any(|p| p.queue == q))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nearflow_topo::presets;

    /// For every policy and preset: every worker of every domain a push to `q` may wake can reach
    /// `q` — the precondition of the no-lost-wake-up argument (rt/src/sleep/README.md) — and every
    /// queue that can receive a task is reached by at least one worker.
    #[test]
    fn woken_workers_can_reach_the_queue() {
        for name in ["e5310-smp", "e7-4820", "e7540", "nehalem-2x4", "i7-2600"] {
            let m = presets::build(name).unwrap();
            for kind in PolicyKind::ALL {
                let p = Policy::new(kind, &m);
                let mut queues: Vec<QueueRef> = (0..p.local_queues).map(QueueRef::Local).collect();
                queues.extend((0..p.shared_queues).map(QueueRef::Shared));
                queues.extend((0..p.deferred_queues).map(QueueRef::Deferred));
                for q in queues {
                    assert!(
                        (0..p.workers()).any(|w| search_reaches(p.search(w), q)),
                        "{kind} on {name}: nobody probes {q:?}"
                    );
                    if p.sleep().scheme == SleepScheme::Domains {
                        assert!(
                            !p.wake_order(q).is_empty(),
                            "{kind} on {name}: {q:?} wakes nobody"
                        );
                        for &d in p.wake_order(q) {
                            for &w in &p.sleep().domains[d] {
                                assert!(
                                    search_reaches(p.search(w), q),
                                    "{kind} on {name}: worker {w} woken for {q:?} cannot reach it"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// Only Bobox-2011 asks for the request registry, and for the balancer only where there is
    /// more than one node to balance between.
    #[test]
    fn services_are_data() {
        for (name, nodes) in [("e5310-smp", 1), ("e7540", 4)] {
            let m = presets::build(name).unwrap();
            assert_eq!(m.node_count(), nodes, "{name}");
            for kind in PolicyKind::ALL {
                let s = Policy::new(kind, &m).services();
                let bobox = kind == PolicyKind::Bobox2011;
                assert_eq!(s.request_registry, bobox, "{kind} on {name}");
                assert_eq!(s.balancer, bobox && nodes > 1, "{kind} on {name}");
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for k in PolicyKind::ALL {
            assert_eq!(k.name().parse::<PolicyKind>().unwrap(), k);
        }
        assert!("lass"
            .parse::<PolicyKind>()
            .unwrap_err()
            .to_string()
            .contains("las, nls"));
    }
}
