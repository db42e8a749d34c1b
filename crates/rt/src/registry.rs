//! The pool's shared state (rayon-core's `registry.rs`), split as tokio's multi-thread
//! scheduler splits its own: [`Registry`] holds what every worker and submitter reads without a
//! lock (queues, sleep, counters: each synchronises itself, and its type says how), and
//! [`Synced`] is the little that lives behind the one mutex `Registry::synced`.

use std::collections::BTreeMap;

use crossbeam_deque::Stealer;
use crossbeam_utils::CachePadded;
use nearflow_policy::{
    NodeLoad, Place, Policy, QueueRef, QueueView, RequestId, SleepScheme, TaskKind,
};
use nearflow_topo::Machine;

use crate::config::Pinning;
use crate::counters::WorkerCells;
use crate::queue::{DeferredQueue, SharedQueue};
use crate::request::RequestInner;
use crate::sleep::Sleep;
use crate::sync::{lock, Arc, AtomicU64, Condvar, Mutex, Ordering};
use crate::task::{Returns, Task};
use crate::trace;
use nearflow_alloc::AllocatorKind;

/// State shared by all workers and the submitting threads. Every field is immutable after
/// construction or synchronises itself, except `synced`.
pub(crate) struct Registry {
    pub(crate) machine: Machine,
    pub(crate) policy: Policy,
    /// Thieves' ends of the workers' local deques (owners hold the other end).
    pub(crate) stealers: Vec<Stealer<Task>>,
    /// Locked deques (`queue::SharedQueue`).
    pub(crate) shared_queues: Vec<SharedQueue<Task>>,
    /// Per-group or per-node deferred queues (`queue::DeferredQueue`).
    pub(crate) deferred: Vec<DeferredQueue<Task>>,
    /// Per worker: the deferred queue its deferred spawns always go to, if the policy names one
    /// (LAS: its group's), and its member index there (it pushes through its own ring).
    pub(crate) deferred_member: Vec<Option<(usize, usize)>>,
    /// Per worker: the blocks of its tasks that other workers gave back (`task.rs`).
    pub(crate) task_returns: Box<[CachePadded<Returns>]>,
    /// Sleeping and waking (`sleep/README.md`).
    pub(crate) sleep: Sleep,
    /// Per-worker counters, written by their owner only.
    pub(crate) cells: Vec<CachePadded<WorkerCells>>,
    /// Round-robin tickets (Relaxed: only their spread matters).
    pub(crate) tickets: CachePadded<AtomicU64>,
    /// Request ids (Relaxed: unique and increasing per submitter).
    pub(crate) next_request: AtomicU64,
    /// Bobox balancer actions so far (Relaxed counters).
    pub(crate) balancer_moves: AtomicU64,
    pub(crate) balancer_shares: AtomicU64,
    pub(crate) pinning: Pinning,
    /// Task timeline, when enabled (its own lock).
    pub(crate) trace: Option<trace::Trace>,
    pub(crate) allocator: AllocatorKind,
    /// Each worker thread's stack, in bytes (`Builder::stack_size`).
    pub(crate) stack_size: usize,
    /// What is behind the lock.
    pub(crate) synced: Mutex<Synced>,
    /// Signalled when `Synced::active` drops to zero.
    pub(crate) idle: Condvar,
}

/// The part of the shared state behind `Registry::synced`.
pub(crate) struct Synced {
    /// Requests submitted and not yet completed.
    pub(crate) active: usize,
    /// Requests in flight, when the policy asks for a request registry
    /// ([`nearflow_policy::Services::request_registry`]): for node choice and the balancer.
    pub(crate) in_flight: BTreeMap<RequestId, Arc<RequestInner>>,
}

/// The settings of a runtime's threads that the registry keeps (from the `Builder`).
pub(crate) struct ThreadSettings {
    pub(crate) pinning: Pinning,
    pub(crate) trace: bool,
    pub(crate) allocator: AllocatorKind,
    pub(crate) barriers: crate::sleep::Barriers,
    pub(crate) stack_size: usize,
}

impl Registry {
    pub(crate) fn new(
        machine: Machine,
        policy: Policy,
        stealers: Vec<Stealer<Task>>,
        settings: ThreadSettings,
    ) -> Registry {
        let ThreadSettings {
            pinning,
            trace,
            allocator,
            barriers,
            stack_size,
        } = settings;
        let workers = policy.workers();
        let mut members = vec![0; policy.deferred_queues];
        let deferred_member = (0..workers)
            .map(|w| match policy.place(TaskKind::Deferred, w) {
                Place::Queue(QueueRef::Deferred(i)) if i < members.len() => {
                    members[i] += 1;
                    Some((i, members[i] - 1))
                }
                _ => None,
            })
            .collect();
        Registry {
            stealers,
            shared_queues: (0..policy.shared_queues)
                .map(|_| SharedQueue::new())
                .collect(),
            deferred: members
                .iter()
                .map(|&m| DeferredQueue::with_members(m, crate::queue::RING_SLOTS))
                .collect(),
            deferred_member,
            task_returns: (0..workers)
                .map(|_| CachePadded::new(Returns::new()))
                .collect(),
            sleep: Sleep::with_barriers(workers, policy.sleep().domains.len(), barriers),
            cells: (0..workers).map(|_| WorkerCells::new()).collect(),
            tickets: CachePadded::new(AtomicU64::new(0)),
            next_request: AtomicU64::new(0),
            balancer_moves: AtomicU64::new(0),
            balancer_shares: AtomicU64::new(0),
            pinning,
            trace: trace.then(|| trace::Trace::new(workers)),
            allocator,
            stack_size,
            synced: Mutex::new(Synced {
                active: 0,
                in_flight: BTreeMap::new(),
            }),
            idle: Condvar::new(),
            machine,
            policy,
        }
    }

    pub(crate) fn next_ticket(&self) -> usize {
        // Relaxed: only the distribution of tickets matters.
        self.tickets.fetch_add(1, Ordering::Relaxed) as usize
    }

    /// The queue for a deferred task whose data lives at `home` (see `nearflow_policy::home`).
    pub(crate) fn place_at(&self, home: nearflow_policy::Home) -> Option<QueueRef> {
        self.policy.place_at(home, self.next_ticket())
    }

    /// Queues a task of a running request from a thread that is not one of its workers (a
    /// `scope`'s spawn from another thread, `join.rs`), where the policy puts work for `home`
    /// or else a request's root, and wakes a worker for it. The caller has counted it in the
    /// request's pending count.
    pub(crate) fn inject(
        &self,
        req: crate::request::RequestRef,
        home: Option<nearflow_policy::Home>,
        task: Task,
    ) {
        use nearflow_policy::RootPlace;
        let q = match home.and_then(|h| self.place_at(h)) {
            Some(q @ (QueueRef::Shared(_) | QueueRef::Deferred(_))) => q,
            _ => match self.policy.place_root() {
                RootPlace::Queue(q) => q,
                RootPlace::DeferredByRequest { groups } => {
                    QueueRef::Deferred((req.get().id % groups as u64) as usize)
                }
                RootPlace::RoundRobinShared { count } => {
                    QueueRef::Shared(self.next_ticket() % count)
                }
                RootPlace::LeastLoadedNode => {
                    QueueRef::Deferred(crate::sync::lock(&req.get().nodes).next_node())
                }
            },
        };
        self.push_shared(q, task);
        self.notify(q);
    }

    /// Pushes to a queue any thread may push to (a deferred queue through its inbox).
    pub(crate) fn push_shared(&self, q: QueueRef, task: Task) {
        match q {
            QueueRef::Shared(i) => self.shared_queues[i].push(task),
            QueueRef::Deferred(i) => self.deferred[i].push(task.head().req.get().id, task),
            QueueRef::Local(_) => unreachable!("local queues are pushed by their owner"),
        }
    }

    /// Wakes a worker for a task just pushed to `q`; whether one was woken.
    pub(crate) fn notify(&self, q: QueueRef) -> bool {
        match self.policy.sleep().scheme {
            SleepScheme::Domains => self.sleep.wake(self.policy.wake_order(q)),
            SleepScheme::CountingSemaphore => {
                self.sleep.post_task();
                false
            }
        }
    }

    /// Whether taking from `q` is a steal for worker `w`.
    pub(crate) fn is_steal(&self, w: usize, q: QueueRef) -> bool {
        self.policy.is_steal(w, q)
    }

    /// Ends a request whose last task has ended: out of the registry, its handle released, then
    /// one fewer active request (so dropping the runtime waits for the handle's release).
    pub(crate) fn finish_request(&self, req: &RequestInner) {
        if self.policy.services().request_registry {
            lock(&self.synced).in_flight.remove(&req.id);
        }
        req.complete();
        let mut g = lock(&self.synced);
        g.active -= 1;
        if g.active == 0 {
            self.idle.notify_all();
        }
    }

    pub(crate) fn queue_len(&self, q: QueueRef) -> usize {
        match q {
            QueueRef::Local(v) => self.stealers[v].len(),
            QueueRef::Shared(i) => self.shared_queues[i].len(),
            QueueRef::Deferred(i) => self.deferred[i].len(),
        }
    }

    /// Bobox-2011 node loads (racy snapshot, as the balancer of §5.2 needs no more): the
    /// policy's own count over this runtime's queues (shared with the simulator).
    pub(crate) fn node_loads(&self) -> Vec<NodeLoad> {
        self.policy.node_loads(self)
    }
}

impl QueueView for Registry {
    fn queue_len(&self, q: QueueRef) -> usize {
        Registry::queue_len(self, q)
    }
    fn sleeping(&self, d: usize) -> usize {
        self.sleep.waiting(d).len()
    }
    fn requests(&self, f: &mut dyn FnMut(RequestId, &[usize])) {
        for (id, req) in lock(&self.synced).in_flight.iter() {
            f(*id, lock(&req.nodes).nodes());
        }
    }
}

/// Binds the calling worker thread `w` as `s.pinning` says.
pub(crate) fn bind(s: &Registry, w: usize) {
    let pus: Vec<usize> = match s.pinning {
        Pinning::None => return,
        Pinning::Pu => vec![w],
        Pinning::Group => s.machine.groups()[s.machine.group_of(w)].pus.clone(),
    };
    if let Err(e) = nearflow_topo::bind_current_thread(&s.machine, &pus) {
        tracing::warn!("worker {w}: {e}; running unbound");
    }
}
