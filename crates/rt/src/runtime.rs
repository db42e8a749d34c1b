//! The public face of the pool: [`Builder`] starts the workers, [`Runtime`] submits requests,
//! reports counters and, when dropped, waits for every request and joins the workers.

use std::fmt;
use std::thread::JoinHandle;

use crossbeam_deque::{Stealer, Worker as Deque};
use nearflow_policy::{
    choose_node, Home, HomeError, Policy, PolicyKind, QueueRef, RequestNodes, RootPlace,
    SleepScheme,
};
use nearflow_topo::Machine;

use crate::balancer;
use crate::config::{Pinning, SleepBarriers};
use crate::counters::RuntimeCounters;
use crate::queue::{DeferredQueue, SharedQueue};
use crate::registry::{bind, Registry, ThreadSettings};
use crate::request::{RequestHandle, RequestInner, RequestRef};
use crate::sleep;
use crate::sync::{lock, wait, Arc, Mutex, Ordering};
use crate::task::{Task, NO_HOME};
use crate::trace::{self, TraceEvent};
use crate::worker::{TaskCx, WorkerLocal};
use nearflow_alloc::AllocatorKind;

/// Errors building a runtime.
#[derive(Debug, thiserror::Error)]
pub enum RtError {
    /// [`Builder::build_checked`]: the allocator asked for is not the one the workers get (the
    /// nearflow allocator needs `nearflow_alloc::Nearflow` as the program's global allocator).
    #[error("allocator {requested} requested but {in_effect} is in effect")]
    AllocatorNotInEffect {
        requested: AllocatorKind,
        in_effect: AllocatorKind,
    },
    /// The OS refused a thread.
    #[error("cannot start worker thread {worker}: {error}")]
    Spawn {
        worker: usize,
        error: std::io::Error,
    },
}

/// Builds a [`Runtime`].
#[derive(Debug)]
pub struct Builder {
    machine: Machine,
    policy: PolicyKind,
    pinning: Pinning,
    trace: bool,
    allocator: AllocatorKind,
    barriers: Option<SleepBarriers>,
    stack_size: usize,
}

/// The default stack of a worker thread: 8 MiB, as a Linux main thread's (address space only
/// until touched). `join` and `scope` run their closures inline past half of it
/// (`join.rs`, "Stack room").
pub const DEFAULT_STACK_SIZE: usize = 8 << 20;

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

    /// The allocator of the workers' 8–512 KiB blocks (default: nearflow); see [`AllocatorKind`].
    pub fn allocator(mut self, allocator: AllocatorKind) -> Self {
        self.allocator = allocator;
        self
    }

    /// The barriers of the sleep protocol (default: [`SleepBarriers::from_env`], which is
    /// `membarrier` unless `NEARFLOW_MEMBARRIER=0`).
    pub fn sleep_barriers(mut self, barriers: SleepBarriers) -> Self {
        self.barriers = Some(barriers);
        self
    }

    /// The stack of each worker thread, in bytes (default [`DEFAULT_STACK_SIZE`]; at least
    /// 64 KiB). Deep recursion in tasks needs more; a `join` or `scope` past half of it runs its
    /// closures inline instead of spawning (see [`crate::join`]).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes.max(64 << 10);
        self
    }

    /// [`build`](Self::build), then checks that the allocator asked for is in effect
    /// ([`Runtime::allocator_in_effect`]): a program that reports figures per allocator uses this,
    /// so that no column is labelled with an allocator that was not running.
    pub fn build_checked(self) -> Result<Runtime, RtError> {
        let requested = self.allocator;
        let rt = self.build()?;
        let in_effect = rt.allocator_in_effect();
        if in_effect != requested {
            return Err(RtError::AllocatorNotInEffect {
                requested,
                in_effect,
            });
        }
        Ok(rt)
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
        let shared = Arc::new(Registry::new(
            self.machine,
            policy,
            deques.iter().map(Deque::stealer).collect(),
            ThreadSettings {
                pinning,
                trace: self.trace,
                allocator: self.allocator,
                barriers: sleep::Barriers::resolve(
                    self.barriers.unwrap_or_else(SleepBarriers::from_env),
                ),
                stack_size: self.stack_size,
            },
        ));
        let mut threads = Vec::with_capacity(workers);
        let thread_ids: std::sync::Arc<[std::sync::OnceLock<i32>]> =
            (0..workers).map(|_| std::sync::OnceLock::new()).collect();
        for (w, deque) in deques.into_iter().enumerate() {
            let s = shared.clone();
            let ids = thread_ids.clone();
            let group = s.machine.group_of(w);
            let h = std::thread::Builder::new()
                .name(format!("nearflow-g{group}-w{w}"))
                .stack_size(s.stack_size)
                .spawn(move || {
                    // SAFETY: gettid has no preconditions.
                    let _ = ids[w].set(unsafe { libc::gettid() });
                    bind(&s, w);
                    #[cfg(not(loom))]
                    nearflow_alloc::set_thread_choice(s.allocator);
                    WorkerLocal::new(&s, w, deque).main_loop();
                })
                .map_err(|source| RtError::Spawn {
                    worker: w,
                    error: source,
                });
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
        let balancer = shared
            .policy
            .services()
            .balancer
            .then(|| balancer::start(shared.clone()));
        Ok(Runtime {
            shared,
            threads,
            thread_ids,
            balancer,
        })
    }
}

/// The runtime: worker threads, queues and the policy that drives them.
pub struct Runtime {
    shared: Arc<Registry>,
    threads: Vec<JoinHandle<()>>,
    /// Each worker's Linux thread id, set by the worker as it starts.
    thread_ids: std::sync::Arc<[std::sync::OnceLock<i32>]>,
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
    pub fn allocator(&self) -> AllocatorKind {
        self.shared.allocator
    }

    /// Whether the workers' 8–512 KiB blocks really come from the nearflow allocator: the
    /// setting is [`AllocatorKind::Nearflow`] and the process's global allocator is
    /// `nearflow_alloc::Nearflow`.
    pub fn allocator_in_effect(&self) -> AllocatorKind {
        #[cfg(not(loom))]
        if self.shared.allocator == AllocatorKind::Nearflow {
            let probe = self.submit(|_| {
                let v = vec![0u8; 16 << 10];
                nearflow_alloc::GLOBAL.owns(v.as_ptr())
            });
            if probe.wait().unwrap_or(false) {
                return AllocatorKind::Nearflow;
            }
        }
        AllocatorKind::System
    }

    /// The Linux thread id of each worker, in worker order (for per-thread tools such as
    /// `perf_event_open` counters). Waits for workers that have not started yet.
    pub fn worker_thread_ids(&self) -> Vec<i32> {
        self.thread_ids
            .iter()
            .map(|id| loop {
                if let Some(&tid) = id.get() {
                    break tid;
                }
                std::thread::yield_now();
            })
            .collect()
    }

    /// A builder for a runtime on `machine`.
    pub fn builder(machine: Machine) -> Builder {
        Builder {
            machine,
            policy: PolicyKind::Las,
            pinning: Pinning::Group,
            trace: false,
            allocator: AllocatorKind::Nearflow,
            barriers: None,
            stack_size: DEFAULT_STACK_SIZE,
        }
    }

    /// Submits a request whose first (deferred) task is `root`. The handle's `wait` returns
    /// `root`'s value once every task of the request has ended.
    pub fn submit<T, F>(&self, root: F) -> RequestHandle<T>
    where
        T: Send + 'static,
        F: FnOnce(&TaskCx<'_>) -> T + Send + 'static,
    {
        self.submit_inner(None, root)
    }

    /// Submits a request whose first task reads data that lives at `home`: the root is queued
    /// as a homed deferred task ([`TaskCx::spawn_deferred_at`]); under `bobox2011` the request
    /// starts on the home node instead of the least loaded one.
    pub fn submit_at<T, F>(&self, home: Home, root: F) -> RequestHandle<T>
    where
        T: Send + 'static,
        F: FnOnce(&TaskCx<'_>) -> T + Send + 'static,
    {
        self.submit_inner(Some(home), root)
    }

    /// `home` as a [`Home`] of this runtime's machine: NUMA node `node`.
    pub fn home_on_node(&self, node: usize) -> Result<Home, HomeError> {
        Home::node(&self.shared.machine, node)
    }

    /// PU `pu` of this runtime's machine as a [`Home`]: under the `pinned` policy a task
    /// homed there runs on that PU's worker only (StreamMap's thread-to-core mapping).
    pub fn home_on_pu(&self, pu: usize) -> Result<Home, HomeError> {
        Home::pu(&self.shared.machine, pu)
    }

    fn submit_inner<T, F>(&self, home: Option<Home>, root: F) -> RequestHandle<T>
    where
        T: Send + 'static,
        F: FnOnce(&TaskCx<'_>) -> T + Send + 'static,
    {
        // SAFETY: `root` is `'static`.
        unsafe { self.submit_raw(home, root) }
    }

    /// Submits a root that may borrow from the caller (`install`, `join.rs`).
    ///
    /// # Safety
    /// The caller waits for the request before anything `root` borrows ends.
    pub(crate) unsafe fn submit_unchecked<F>(&self, root: F) -> RequestHandle<()>
    where
        F: FnOnce(&TaskCx<'_>) + Send,
    {
        // SAFETY: the caller's promise.
        unsafe { self.submit_raw(None, root) }
    }

    /// The registry, for `join.rs`.
    pub(crate) fn registry(&self) -> &Registry {
        &self.shared
    }

    /// # Safety
    /// Whatever `root` borrows outlives the request (see [`Task::new_unchecked`]).
    unsafe fn submit_raw<T, F>(&self, home: Option<Home>, root: F) -> RequestHandle<T>
    where
        T: Send + 'static,
        F: FnOnce(&TaskCx<'_>) -> T + Send,
    {
        let s = &*self.shared;
        // Relaxed: ids need only be unique and increasing per submitting thread.
        let id = s.next_request.fetch_add(1, Ordering::Relaxed);
        let inner = Arc::new(RequestInner::new(id));
        let slot = Arc::new(Mutex::new(None));
        lock(&s.synced).active += 1;
        let homed = home.and_then(|h| s.place_at(h).map(|q| (h, q)));
        let q = match (s.policy.place_root(), homed) {
            (RootPlace::LeastLoadedNode, Some((h, q))) => {
                *lock(&inner.nodes) = RequestNodes::new(h.node_index());
                lock(&s.synced).in_flight.insert(id, inner.clone());
                q
            }
            (_, Some((_, q))) => q,
            (RootPlace::Queue(q), None) => q,
            (RootPlace::DeferredByRequest { groups }, None) => {
                QueueRef::Deferred((id % groups as u64) as usize)
            }
            (RootPlace::RoundRobinShared { count }, None) => {
                QueueRef::Shared(s.next_ticket() % count)
            }
            (RootPlace::LeastLoadedNode, None) => {
                let node = choose_node(&s.node_loads());
                *lock(&inner.nodes) = RequestNodes::new(node);
                lock(&s.synced).in_flight.insert(id, inner.clone());
                QueueRef::Deferred(node)
            }
        };
        let out = slot.clone();
        // SAFETY: the caller's promise.
        let task = unsafe {
            Task::new_unchecked(
                RequestRef::leak(&inner),
                home.map_or(NO_HOME, |h| h.node_index() as u32),
                move |cx: &TaskCx<'_>| {
                    let v = root(cx);
                    *lock(&out) = Some(v);
                },
                None,
            )
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
    /// `membarrier(2)` instead (see `sleep/README.md`): true when
    /// [`SleepBarriers::Membarrier`] was chosen and the kernel allows it.
    pub fn asymmetric_barriers(&self) -> bool {
        self.shared.sleep.barriers() == sleep::Barriers::Asymmetric
    }

    /// Workers blocked right now (racy snapshot).
    pub fn asleep(&self) -> usize {
        self.shared.sleep.asleep()
    }

    /// Sleeping workers whose search order reaches a non-empty queue right now (racy snapshot: a wake-up
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
                    .search(w)
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
}

impl Drop for Runtime {
    /// Waits for every submitted request to complete, then stops and joins the workers.
    fn drop(&mut self) {
        {
            let mut g = lock(&self.shared.synced);
            while g.active > 0 {
                g = wait(&self.shared.idle, g);
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
