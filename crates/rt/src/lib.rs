//! # nearflow-rt — the threaded runtime
//!
//! Runs **requests** (independent units of work, such as queries) made of **tasks** on a thread
//! pool shaped by the machine, under one of the scheduling policies of `nearflow-policy`. After
//! `../shared/papers/las-scheduler-and-numa-allocator.txt` §4:
//!
//! - one thread pool per core group, one thread per PU of the group, bound to the group's cpuset
//!   (§4.1; per-PU binding and no binding are offered too, see [`Pinning`]);
//! - a task spawns **immediate** tasks (run soon, nearby: they share its hot data) and
//!   **deferred** tasks (run when resources are free, possibly far away) of its own request;
//! - the policy decides where each task is queued, which queues an idle worker probes in which
//!   order, and whom a spawn wakes; this crate only executes those decisions ([`worker`]
//!   calls [`nearflow_policy::walk`]).
//!
//! ```
//! use nearflow_rt::{Runtime, Pinning};
//! use nearflow_policy::PolicyKind;
//! use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
//!
//! let machine = nearflow_topo::presets::build("e5310-smp").unwrap(); // 8 PUs, 4 core groups
//! let rt = Runtime::builder(machine).policy(PolicyKind::Las).build().unwrap();
//! let sum = Arc::new(AtomicU64::new(0));
//! let s = sum.clone();
//! let handle = rt.submit(move |cx| {
//!     for i in 0..100u64 {
//!         let s = s.clone();
//!         cx.spawn_deferred(move |cx| {
//!             let s2 = s.clone();
//!             cx.spawn_immediate(move |_| { s2.fetch_add(i, Ordering::Relaxed); });
//!         });
//!     }
//!     "root done"
//! });
//! assert_eq!(handle.wait().unwrap(), "root done"); // waits for every task of the request
//! assert_eq!(sum.load(Ordering::Relaxed), 4950);
//! ```
//!
//! Invariants: every spawned task runs exactly once (or is skipped, and counted, when its request
//! has failed); a request completes exactly once, after its last task; a worker sleeps only after
//! a re-check of every queue it can reach (see `sleep/README.md`); dropping the runtime waits for
//! every submitted request, then stops the workers.

mod balancer;
mod counters;
mod queue;
mod request;
mod sleep;
pub mod stress;
mod sync;
mod trace;
mod worker;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::thread::JoinHandle;

use crossbeam_deque::{Stealer, Worker as Deque};
use crossbeam_utils::CachePadded;
use nearflow_policy::{
    choose_node, NodeLoad, Policy, PolicyKind, QueueRef, RequestId, RequestNodes, RootPlace,
    SleepScheme,
};
use nearflow_topo::Machine;

pub use counters::{RequestCounters, RuntimeCounters, WorkerCounters, MAX_RULES};
pub use request::{live_requests, RequestError, RequestHandle};
pub use trace::{TraceEvent, NO_LABEL};
pub use worker::TaskCx;

use counters::WorkerCells;
use queue::{DeferredQueue, SharedQueue};
use request::{RequestInner, RequestRef};
use sleep::Sleep;
use sync::{lock, wait, Arc, AtomicU64, Condvar, Mutex, Ordering};
use worker::{Task, WorkerLocal};

/// How worker threads are bound to PUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pinning {
    /// Each thread to the cpuset of its core group (LAS §4.1).
    #[default]
    Group,
    /// Each thread to its home PU.
    Pu,
    /// No binding.
    None,
}

impl FromStr for Pinning {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "group" => Ok(Pinning::Group),
            "pu" => Ok(Pinning::Pu),
            "none" => Ok(Pinning::None),
            _ => Err(format!("unknown pinning `{s}`; expected group, pu or none")),
        }
    }
}

impl fmt::Display for Pinning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pinning::Group => "group",
            Pinning::Pu => "pu",
            Pinning::None => "none",
        })
    }
}

/// Errors building a runtime.
#[derive(Debug, thiserror::Error)]
pub enum RtError {
    /// The OS refused a thread.
    #[error("cannot start worker thread {worker}: {source}")]
    Spawn {
        worker: usize,
        source: std::io::Error,
    },
}

/// State shared by all workers and the submitting threads.
pub(crate) struct Shared {
    machine: Machine,
    policy: Policy,
    stealers: Vec<Stealer<Task>>,
    shared_queues: Vec<SharedQueue<Task>>,
    deferred: Vec<DeferredQueue<Task>>,
    sleep: Sleep,
    cells: Vec<CachePadded<WorkerCells>>,
    tickets: CachePadded<AtomicU64>,
    next_request: AtomicU64,
    active: Mutex<usize>,
    active_cv: Condvar,
    /// Bobox-2011: requests in flight, for the load balancer and node choice.
    in_flight: Mutex<BTreeMap<RequestId, Arc<RequestInner>>>,
    balancer_moves: AtomicU64,
    balancer_shares: AtomicU64,
    pinning: Pinning,
    /// Task timeline, when enabled.
    pub(crate) trace: Option<trace::Trace>,
    pub(crate) allocator: Allocator,
}

impl Shared {
    fn next_ticket(&self) -> usize {
        // Relaxed: only the distribution of tickets matters.
        self.tickets.fetch_add(1, Ordering::Relaxed) as usize
    }

    /// Pushes to a queue any thread may push to.
    fn push_shared(&self, q: QueueRef, task: Task) {
        match q {
            QueueRef::Shared(i) => self.shared_queues[i].push(task),
            QueueRef::Deferred(i) => self.deferred[i].push(task.req.get().id, task),
            QueueRef::Local(_) => unreachable!("local queues are pushed by their owner"),
        }
    }

    /// Wakes a worker for a task just pushed to `q`; whether one was woken.
    fn notify(&self, q: QueueRef) -> bool {
        match self.policy.sleep().scheme {
            SleepScheme::Domains => self.sleep.wake(self.policy.wake_order(q)),
            SleepScheme::CountingSemaphore => {
                self.sleep.post_task();
                false
            }
        }
    }

    /// Whether taking from `q` is a steal for worker `w`.
    fn is_steal(&self, w: usize, q: QueueRef) -> bool {
        match q {
            QueueRef::Local(v) => v != w,
            QueueRef::Shared(i) => self.shared_queues.len() == self.policy.workers() && i != w,
            QueueRef::Deferred(_) => false,
        }
    }

    fn finish_request(&self, req: &RequestInner) {
        if self.policy.kind() == PolicyKind::Bobox2011 {
            lock(&self.in_flight).remove(&req.id);
        }
        req.complete();
        let mut a = lock(&self.active);
        *a -= 1;
        if *a == 0 {
            self.active_cv.notify_all();
        }
    }

    fn queue_len(&self, q: QueueRef) -> usize {
        match q {
            QueueRef::Local(v) => self.stealers[v].len(),
            QueueRef::Shared(i) => self.shared_queues[i].len(),
            QueueRef::Deferred(i) => self.deferred[i].len(),
        }
    }

    /// Bobox-2011 node loads (racy snapshot, as the balancer of §5.2 needs no more).
    fn node_loads(&self) -> Vec<NodeLoad> {
        let nodes = self.policy.deferred_queues;
        let mut loads: Vec<NodeLoad> = (0..nodes)
            .map(|n| NodeLoad {
                node: n,
                idle_threads: self.sleep.waiting(n).len(),
                queued: self.deferred[n].len(),
                requests: Vec::new(),
                free_memory: None,
            })
            .collect();
        for w in 0..self.policy.workers() {
            loads[self.policy.node_of_worker(w)].queued += self.stealers[w].len();
        }
        for (id, req) in lock(&self.in_flight).iter() {
            let nodes = lock(&req.nodes);
            let shared = nodes.nodes().len() > 1;
            for &n in nodes.nodes() {
                loads[n].requests.push((*id, shared));
            }
        }
        loads
    }
}

/// Builds a [`Runtime`].
#[derive(Debug)]
pub struct Builder {
    machine: Machine,
    policy: PolicyKind,
    pinning: Pinning,
    trace: bool,
    allocator: Allocator,
}

/// Which allocator the workers' requests of 8–512 KiB (the dataflow engine's packet buffers,
/// LAS paper §5, §6.4) go to.
///
/// The choice acts through the process's global allocator: it takes effect when the program
/// installs `nearflow_alloc::Nearflow` (`#[global_allocator]`), as the `nearflow` binary does.
/// Otherwise every block comes from the program's own global allocator and
/// [`Runtime::allocator_in_effect`] says so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Allocator {
    /// The NUMA-aware allocator of `nearflow-alloc`; workers drain their recollection bins after
    /// each task (§5.1).
    #[default]
    Nearflow,
    /// The system allocator (glibc malloc) for everything.
    System,
}

impl Allocator {
    /// Both, for experiments.
    pub const ALL: [Allocator; 2] = [Allocator::Nearflow, Allocator::System];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Allocator::Nearflow => "nearflow",
            Allocator::System => "system",
        }
    }

    /// Makes the calling thread allocate through this allocator.
    pub fn apply_to_thread(self) {
        #[cfg(not(loom))]
        nearflow_alloc::set_thread_choice(match self {
            Allocator::Nearflow => nearflow_alloc::Choice::Nearflow,
            Allocator::System => nearflow_alloc::Choice::System,
        });
    }
}

impl fmt::Display for Allocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Allocator {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "nearflow" => Ok(Allocator::Nearflow),
            "system" => Ok(Allocator::System),
            _ => Err(format!(
                "unknown allocator {s:?} (expected nearflow or system)"
            )),
        }
    }
}

impl Builder {
    /// The scheduling policy (default: `las`).
    pub fn policy(mut self, policy: PolicyKind) -> Self {
        self.policy = policy;
        self
    }

    /// How threads are bound (default: to their core group). Binding applies only when the
    /// machine is the detected host; on a synthetic, XML or preset machine the threads run
    /// unbound (oversubscribed when it has more PUs than the host).
    pub fn pinning(mut self, pinning: Pinning) -> Self {
        self.pinning = pinning;
        self
    }

    /// Records a timeline of every task run (default: off); see [`Runtime::take_trace`].
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// The allocator of the workers' 8–512 KiB blocks (default: nearflow); see [`Allocator`].
    pub fn allocator(mut self, allocator: Allocator) -> Self {
        self.allocator = allocator;
        self
    }

    /// Starts the worker threads.
    pub fn build(self) -> Result<Runtime, RtError> {
        let policy = Policy::new(self.policy, &self.machine);
        let workers = policy.workers();
        let pinning = if self.machine.source().is_host() {
            self.pinning
        } else {
            if self.pinning != Pinning::None {
                tracing::info!(
                    "topology {:?} is not this host: threads are not bound ({} workers on {} CPUs)",
                    self.machine.source(),
                    workers,
                    std::thread::available_parallelism().map_or(1, |n| n.get())
                );
            }
            Pinning::None
        };
        let deques: Vec<Deque<Task>> = (0..workers).map(|_| Deque::new_lifo()).collect();
        let shared = Arc::new(Shared {
            stealers: deques.iter().map(Deque::stealer).collect(),
            shared_queues: (0..policy.shared_queues)
                .map(|_| SharedQueue::new())
                .collect(),
            deferred: (0..policy.deferred_queues)
                .map(|_| DeferredQueue::new())
                .collect(),
            sleep: Sleep::new(workers, policy.sleep().domains.len()),
            cells: (0..workers).map(|_| WorkerCells::new()).collect(),
            tickets: CachePadded::new(AtomicU64::new(0)),
            next_request: AtomicU64::new(0),
            active: Mutex::new(0),
            active_cv: Condvar::new(),
            in_flight: Mutex::new(BTreeMap::new()),
            balancer_moves: AtomicU64::new(0),
            balancer_shares: AtomicU64::new(0),
            pinning,
            trace: self.trace.then(|| trace::Trace::new(workers)),
            allocator: self.allocator,
            machine: self.machine,
            policy,
        });
        let mut threads = Vec::with_capacity(workers);
        for (w, deque) in deques.into_iter().enumerate() {
            let s = shared.clone();
            let group = s.machine.group_of(w);
            let h = std::thread::Builder::new()
                .name(format!("nearflow-g{group}-w{w}"))
                .spawn(move || {
                    bind(&s, w);
                    s.allocator.apply_to_thread();
                    WorkerLocal::new(&s, w, deque).main_loop();
                })
                .map_err(|source| RtError::Spawn { worker: w, source });
            match h {
                Ok(h) => threads.push(h),
                Err(e) => {
                    shared.sleep.shutdown();
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(e);
                }
            }
        }
        let balancer = (shared.policy.kind() == PolicyKind::Bobox2011
            && shared.policy.deferred_queues > 1)
            .then(|| balancer::start(shared.clone()));
        Ok(Runtime {
            shared,
            threads,
            balancer,
        })
    }
}

fn bind(s: &Shared, w: usize) {
    let pus: Vec<usize> = match s.pinning {
        Pinning::None => return,
        Pinning::Pu => vec![w],
        Pinning::Group => s.machine.groups()[s.machine.group_of(w)].pus.clone(),
    };
    if let Err(e) = nearflow_topo::bind_current_thread(&s.machine, &pus) {
        tracing::warn!("worker {w}: {e}; running unbound");
    }
}

/// The runtime: worker threads, queues and the policy that drives them.
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    balancer: Option<balancer::Balancer>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("policy", &self.shared.policy.kind())
            .field("workers", &self.shared.policy.workers())
            .field("pinning", &self.shared.pinning)
            .finish()
    }
}

impl Runtime {
    /// The allocator setting of the workers ([`Builder::allocator`]).
    pub fn allocator(&self) -> Allocator {
        self.shared.allocator
    }

    /// Whether the workers' 8–512 KiB blocks really come from the nearflow allocator: the
    /// setting is [`Allocator::Nearflow`] and the process's global allocator is
    /// `nearflow_alloc::Nearflow`.
    pub fn allocator_in_effect(&self) -> Allocator {
        #[cfg(not(loom))]
        if self.shared.allocator == Allocator::Nearflow {
            let probe = self.submit(|_| {
                let v = vec![0u8; 16 << 10];
                nearflow_alloc::GLOBAL.owns(v.as_ptr())
            });
            if probe.wait().unwrap_or(false) {
                return Allocator::Nearflow;
            }
        }
        Allocator::System
    }

    /// A builder for a runtime on `machine`.
    pub fn builder(machine: Machine) -> Builder {
        Builder {
            machine,
            policy: PolicyKind::Las,
            pinning: Pinning::Group,
            trace: false,
            allocator: Allocator::Nearflow,
        }
    }

    /// Submits a request whose first (deferred) task is `root`. The handle's `wait` returns
    /// `root`'s value once every task of the request has ended.
    pub fn submit<T, F>(&self, root: F) -> RequestHandle<T>
    where
        T: Send + 'static,
        F: FnOnce(&TaskCx<'_>) -> T + Send + 'static,
    {
        let s = &*self.shared;
        // Relaxed: ids need only be unique and increasing per submitting thread.
        let id = s.next_request.fetch_add(1, Ordering::Relaxed);
        let inner = Arc::new(RequestInner::new(id));
        let slot = Arc::new(Mutex::new(None));
        *lock(&s.active) += 1;
        let q = match s.policy.place_root() {
            RootPlace::Queue(q) => q,
            RootPlace::DeferredByRequest { groups } => {
                QueueRef::Deferred((id % groups as u64) as usize)
            }
            RootPlace::RoundRobinShared { count } => QueueRef::Shared(s.next_ticket() % count),
            RootPlace::LeastLoadedNode => {
                let node = choose_node(&s.node_loads());
                *lock(&inner.nodes) = RequestNodes::new(node);
                lock(&s.in_flight).insert(id, inner.clone());
                QueueRef::Deferred(node)
            }
        };
        let out = slot.clone();
        let task = Task {
            req: RequestRef::leak(&inner),
            f: Box::new(move |cx: &TaskCx<'_>| {
                let v = root(cx);
                *lock(&out) = Some(v);
            }),
        };
        s.push_shared(q, task);
        s.notify(q);
        RequestHandle { inner, slot }
    }

    /// The machine the runtime was built for.
    pub fn machine(&self) -> &Machine {
        &self.shared.machine
    }

    /// The policy it runs.
    pub fn policy(&self) -> &Policy {
        &self.shared.policy
    }

    /// The binding actually applied (`None` on a machine that is not this host).
    pub fn pinning(&self) -> Pinning {
        self.shared.pinning
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.shared.policy.workers()
    }

    /// Counters of every worker.
    pub fn counters(&self) -> RuntimeCounters {
        let kind = self.shared.policy.kind();
        RuntimeCounters {
            workers: self
                .shared
                .cells
                .iter()
                .enumerate()
                .map(|(w, c)| c.snapshot(w))
                .collect(),
            rule_names: kind.rule_names().iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Tasks queued right now, over all queues (racy snapshot).
    pub fn queued(&self) -> usize {
        let s = &*self.shared;
        s.stealers.iter().map(Stealer::len).sum::<usize>()
            + s.shared_queues.iter().map(SharedQueue::len).sum::<usize>()
            + s.deferred.iter().map(DeferredQueue::len).sum::<usize>()
    }

    /// Whether a spawn pays no fence instruction because going to sleep issues a
    /// `membarrier(2)` instead (see `sleep/README.md`): true on Linux unless the kernel refuses it
    /// or `NEARFLOW_MEMBARRIER=0` is set.
    pub fn asymmetric_barriers(&self) -> bool {
        self.shared.sleep.barriers() == sleep::Barriers::Asymmetric
    }

    /// Workers blocked right now (racy snapshot).
    pub fn asleep(&self) -> usize {
        self.shared.sleep.asleep()
    }

    /// Sleeping workers whose plan reaches a non-empty queue right now (racy snapshot: a wake-up
    /// may be on its way). A worker listed here in every sample of a long window, while no task
    /// runs, would be a lost wake-up; the stress tests check exactly that.
    pub fn sleepers_with_work(&self) -> Vec<usize> {
        let s = &*self.shared;
        let layout = s.policy.sleep();
        if layout.scheme != SleepScheme::Domains {
            return Vec::new();
        }
        let mut out = Vec::new();
        for d in 0..layout.domains.len() {
            for w in s.sleep.waiting(d) {
                let reach = s
                    .policy
                    .plan(w)
                    .iter()
                    .any(|step| step.probes().iter().any(|p| s.queue_len(p.queue) > 0));
                if reach {
                    out.push(w);
                }
            }
        }
        out
    }

    /// Bobox-2011 load balancer actions so far: (requests moved, requests shared).
    pub fn balancer_actions(&self) -> (u64, u64) {
        (
            self.shared.balancer_moves.load(Ordering::Relaxed),
            self.shared.balancer_shares.load(Ordering::Relaxed),
        )
    }

    /// Takes the task timeline recorded so far (empty unless built with
    /// [`Builder::trace`]), ordered by start time.
    pub fn take_trace(&self) -> Vec<TraceEvent> {
        self.shared
            .trace
            .as_ref()
            .map_or_else(Vec::new, trace::Trace::take)
    }

    /// Requests submitted and not yet completed.
    pub fn active_requests(&self) -> usize {
        *lock(&self.shared.active)
    }
}

impl Drop for Runtime {
    /// Waits for every submitted request to complete, then stops and joins the workers.
    fn drop(&mut self) {
        {
            let mut a = lock(&self.shared.active);
            while *a > 0 {
                a = wait(&self.shared.active_cv, a);
            }
        }
        if let Some(b) = self.balancer.take() {
            b.stop();
        }
        self.shared.sleep.shutdown();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
