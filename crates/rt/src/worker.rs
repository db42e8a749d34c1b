//! Worker threads: the find-task loop, running tasks, and spawning from inside a task.
//!
//! ## Single-owner immediate queues
//!
//! LAS §4.1 keeps one immediate queue per *core* and binds each thread to its *core group*, so
//! the OS may move a thread between the cores of its group, and two threads may even run on the
//! same core one after the other. A queue keyed by "the core I run on right now" would then have
//! several pushers. nearflow instead gives each worker a **home PU** (worker `w` ↔ PU `w`) and
//! makes the immediate queue of PU `w` the private deque of worker `w`: only worker `w` ever
//! pushes to it (spawns always go to the spawner's own queue), so it stays single-owner and
//! lock-free. Other workers only steal from it. Within a group the OS may still migrate a
//! thread, but only among cores that share the group's cache, so the cache argument of the rules
//! holds at group granularity; with [`Pinning::Pu`](crate::Pinning::Pu) home PU and actual PU
//! coincide exactly.
//!
//! ## Held credits
//!
//! A worker holds a share of the pending count of the request whose task it ran last
//! (`request.rs`, "Credits"): spawns spend it, ending tasks add to it, and the worker gives it
//! back, with the spawn statistics it gathered, in one decrement when it is about to run a task of
//! another request and when a walk of its search finds nothing, before it searches or sleeps
//! ([`WorkerLocal::give_back`]), or, for the counting-semaphore scheme, before it would block on
//! the semaphore. A worker never holds credits while it searches, sleeps or blocks, so a request
//! completes as soon as the worker that ran its last task next fails to find work or picks up
//! another request's task.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crossbeam_deque::{Steal, Stealer, Worker as Deque};
use nearflow_policy::{
    pop_of, walk, Cursors, End, Home, Place, Pop, Probe, QueueRef, RequestId, Rng, SleepScheme,
    Step, Take, TaskKind,
};

use crate::counters::{bump_owned, WorkerCells};
use crate::queue::Pusher;
use crate::registry::Registry;
use crate::request::{RequestRef, TaskStats, MAX_CREDITS};
use crate::sleep::Slept;
use crate::sync::{current_thread, Thread};
use crate::sync::{lock, Ordering};
use crate::task::{Head, Task, TaskCache, NO_HOME};

/// Probe rounds an idle worker makes, yielding between them, before it registers to sleep
/// (rayon-core makes 32 before it gets sleepy). With 16, on the KVM guests of `docs/results.md`,
/// a worker between two requests submitted back to back went to sleep before the next one came,
/// and each sleep's `membarrier` interrupted the running threads. `bench overhead` (LAS /
/// rayon, chain, fan-out and request measured together, two runs each)
/// read the one-task request at 1.91–2.01× and the chain at 1.02–1.08× with 16 rounds, and
/// 1.27–1.32× and 0.85–0.87× with 64; with all five workloads, 32 rounds read 1.27–1.39× and
/// 0.87–0.88×, 48 and 64 no better.
const SEARCH_ROUNDS: usize = 32;

/// The state a worker keeps to itself.
pub(crate) struct WorkerLocal<'a> {
    pub(crate) shared: &'a Registry,
    pub(crate) w: usize,
    pub(crate) local: Deque<Task>,
    search: &'a [Step],
    /// The rule of the search's first probe when that probe is this worker's own queue, youngest
    /// end (every policy with local queues): `find` takes it before walking the search.
    local_first: Option<u8>,
    cursors: RefCell<Cursors>,
    rng: RefCell<Rng>,
    last_request: Cell<Option<RequestId>>,
    cells: &'a WorkerCells,
    label: Cell<u32>,
    /// The request whose credits this worker holds (see "Held credits").
    credited: Cell<Option<RequestRef>>,
    /// Credits held: at least one whenever `credited` is set and no task runs.
    credits: Cell<usize>,
    /// Size of the next batch of credits.
    batch: Cell<usize>,
    /// Statistics gathered for `credited`.
    stats: Cell<TaskStats>,
    /// This worker's NUMA node.
    node: u32,
    /// The deferred queue this worker is a member of, and its ring there (see
    /// `queue::DeferredQueue`, "Rings and inbox").
    own_deferred: Option<(usize, RefCell<Pusher>)>,
    /// The blocks of the tasks this worker spawns and runs (`task.rs`, "Recycling").
    cache: TaskCache<'a>,
    /// Where its immediate and deferred spawns go (`Policy::place`), read here rather than
    /// through the policy's tables on every spawn.
    places: [Place; 2],
    /// The sleep domains to wake after a push to its own local queue, when workers sleep by
    /// domain (`Policy::wake_order`); likewise cached.
    wake_local: Option<&'a [usize]>,
    /// This worker's thread, which a latch it waits on unparks (`join.rs`).
    pub(crate) thread: Thread,
    /// Half way down this worker's stack from a local of `main_loop` (`join.rs`'s room check:
    /// below this address, `join` and `scope` run their closures inline).
    stack_mark: Cell<usize>,
}

std::thread_local! {
    /// The worker this thread is, while it runs its loop (`join.rs` finds it here).
    static CURRENT: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
}

/// Calls `f` with the worker the calling thread is and the request of the task it is running,
/// or with `None` on a thread that is no worker.
pub(crate) fn with_current<R>(f: impl FnOnce(Option<(&WorkerLocal<'_>, RequestRef)>) -> R) -> R {
    let p = CURRENT.with(Cell::get).cast::<WorkerLocal<'_>>();
    if p.is_null() {
        return f(None);
    }
    // SAFETY: `CURRENT` is set only while the worker's `main_loop` runs on this thread, so the
    // worker outlives this call; only shared references to it are ever made.
    let me = unsafe { &*p };
    // A worker runs user code only inside a task, and holds that task's request's credits
    // while it runs (`run`, and `run_helping`, which restores them).
    match me.credited.get() {
        Some(req) => f(Some((me, req))),
        None => f(None),
    }
}

/// Clears `CURRENT` when a worker's loop ends, however it ends.
struct CurrentGuard;

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(std::ptr::null()));
    }
}

/// What a running task sees: spawn more tasks of its request.
pub struct TaskCx<'a> {
    me: &'a WorkerLocal<'a>,
    req: RequestRef,
}

impl TaskCx<'_> {
    /// Spawns an immediate task of the same request: it runs as soon as possible, near this one
    /// (it shares this task's hot data).
    pub fn spawn_immediate<F>(&self, f: F)
    where
        F: FnOnce(&TaskCx<'_>) + Send + 'static,
    {
        self.spawn(TaskKind::Immediate, f);
    }

    /// Spawns a deferred task of the same request: it runs when resources are free, possibly on
    /// a distant core (detached work, the start of a large portion of work).
    pub fn spawn_deferred<F>(&self, f: F)
    where
        F: FnOnce(&TaskCx<'_>) + Send + 'static,
    {
        self.spawn(TaskKind::Deferred, f);
    }

    /// Spawns a deferred task whose data lives at `home` (SplittableData's locality-aware
    /// dispatch, `numa-template-library-splittable-data.txt` §3): it is queued where the
    /// policy puts work for that node or group ([`nearflow_policy::Policy::place_at`]), may
    /// still be stolen from there, and is counted as run at home or away
    /// ([`WorkerCounters::home_local`](crate::WorkerCounters::home_local)).
    pub fn spawn_deferred_at<F>(&self, home: Home, f: F)
    where
        F: FnOnce(&TaskCx<'_>) + Send + 'static,
    {
        self.spawn_task(TaskKind::Deferred, Some(home), f);
    }

    /// Spawns a task of the given kind whose data lives at `home`: as
    /// [`spawn_deferred_at`](Self::spawn_deferred_at), for either kind. With a PU home under
    /// the `pinned` policy the task runs on that PU's worker and nowhere else, which is how a
    /// mapped plan keeps each thread's operators on its core.
    pub fn spawn_at<F>(&self, kind: TaskKind, home: Home, f: F)
    where
        F: FnOnce(&TaskCx<'_>) + Send + 'static,
    {
        self.spawn_task(kind, Some(home), f);
    }

    /// Spawns a task of the given kind.
    pub fn spawn<F>(&self, kind: TaskKind, f: F)
    where
        F: FnOnce(&TaskCx<'_>) + Send + 'static,
    {
        self.spawn_task(kind, None, f);
    }

    /// The one spawn path (inlined into `spawn`, whose immediate case it must not slow).
    #[inline]
    fn spawn_task<F>(&self, kind: TaskKind, home: Option<Home>, f: F)
    where
        F: FnOnce(&TaskCx<'_>) + Send + 'static,
    {
        // SAFETY: `f` is `'static`.
        unsafe { self.me.spawn_raw(self.req, kind, home, f) }
    }

    /// NUMA node `node` of the runtime's machine as a [`Home`], for
    /// [`spawn_deferred_at`](Self::spawn_deferred_at).
    pub fn home_on_node(&self, node: usize) -> Result<Home, nearflow_policy::HomeError> {
        Home::node(&self.me.shared.machine, node)
    }

    /// PU `pu` of the runtime's machine as a [`Home`], for [`spawn_at`](Self::spawn_at).
    pub fn home_on_pu(&self, pu: usize) -> Result<Home, nearflow_policy::HomeError> {
        Home::pu(&self.me.shared.machine, pu)
    }

    /// The NUMA node of the worker running this task.
    pub fn node(&self) -> usize {
        self.me.node as usize
    }

    /// The machine the runtime runs on.
    pub fn machine(&self) -> &nearflow_topo::Machine {
        &self.me.shared.machine
    }

    /// The id of the request this task belongs to.
    pub fn request_id(&self) -> RequestId {
        self.req.get().id
    }

    /// The worker running this task (equal to its home PU).
    pub fn worker(&self) -> usize {
        self.me.w
    }

    /// Names what this task does in the timeline (see [`Builder::trace`](crate::Builder::trace));
    /// free for the caller to interpret. Costs one store.
    pub fn set_label(&self, label: u32) {
        self.me.label.set(label);
    }

    /// Cancels this task's request: its tasks that have not started are skipped, and its
    /// handle's `wait` returns [`RequestError::Cancelled`](crate::RequestError::Cancelled). A
    /// layer above uses it to stop a request on an error it reports itself.
    pub fn cancel_request(&self) {
        self.req.get().cancel();
    }

    /// Whether the request has already failed (a task panicked) or was cancelled; long tasks may
    /// stop early.
    pub fn request_failed(&self) -> bool {
        self.req.get().failed.load(Ordering::Relaxed)
    }
}

fn steal(s: &Stealer<Task>) -> Option<Task> {
    // `is_empty` is two loads; `steal` also issues a SeqCst fence. Idle workers probe many empty
    // queues, so look first. (A task pushed just after this look is found by the next probe, or
    // by the re-check after registering to sleep, which runs after the heavy barrier.)
    if s.is_empty() {
        return None;
    }
    loop {
        match s.steal() {
            Steal::Success(t) => return Some(t),
            Steal::Empty => return None,
            Steal::Retry => std::hint::spin_loop(),
        }
    }
}

impl<'a> WorkerLocal<'a> {
    pub(crate) fn new(shared: &'a Registry, w: usize, local: Deque<Task>) -> Self {
        let search = shared.policy.search(w);
        let own = Probe {
            queue: QueueRef::Local(w),
            take: Take::Plain(End::Youngest),
            rule: 0,
        };
        let local_first = match search.first() {
            Some(Step::Scan(p)) => p
                .first()
                .filter(|p| Probe { rule: 0, ..**p } == own)
                .map(|p| p.rule),
            _ => None,
        };
        let places = [
            shared.policy.place(TaskKind::Immediate, w),
            shared.policy.place(TaskKind::Deferred, w),
        ];
        // Only a policy whose spawns go to local queues has wake orders for them.
        let has_local = places.contains(&Place::Queue(QueueRef::Local(w)));
        WorkerLocal {
            shared,
            w,
            local,
            search,
            local_first,
            cursors: RefCell::new(Cursors::new(search)),
            rng: RefCell::new(Rng::new(
                0x5DEE_CE66 ^ (w as u64 + 1).wrapping_mul(0x9E37_79B9),
            )),
            last_request: Cell::new(None),
            cells: &shared.cells[w],
            label: Cell::new(crate::trace::NO_LABEL),
            credited: Cell::new(None),
            credits: Cell::new(0),
            batch: Cell::new(1),
            stats: Cell::new(TaskStats::default()),
            node: shared.machine.node_of(w) as u32,
            own_deferred: shared.deferred_member[w].map(|(q, member)| {
                let pusher = shared.deferred[q]
                    .pusher(member)
                    .expect("each member's ring is claimed once, by its worker");
                (q, RefCell::new(pusher))
            }),
            cache: TaskCache::new(w, &shared.task_returns),
            places,
            wake_local: (has_local && shared.policy.sleep().scheme == SleepScheme::Domains)
                .then(|| shared.policy.wake_order(QueueRef::Local(w))),
            thread: current_thread(),
            stack_mark: Cell::new(0),
        }
    }

    /// Gives back the credits this worker holds, with its gathered statistics, and completes
    /// the request if that was its last count (see "Held credits").
    pub(crate) fn give_back(&self) {
        let Some(handle) = self.credited.take() else {
            return;
        };
        // Held credits keep the request alive until the decrement below; with none held, a
        // task of the request is running on this worker (a waiting task that helps, whose
        // credits `run_helping` reset), which keeps it alive.
        let req = handle.get();
        req.add_stats(self.stats.replace(TaskStats::default()));
        self.batch.set(1);
        let credits = self.credits.replace(0);
        if credits == 0 {
            return;
        }
        // After a `false` the request may already be gone: no access past this point.
        if req.give_back(credits) {
            self.shared.finish_request(req);
            handle.release();
        }
    }

    /// Spawns a task of `req`, the request of the task this worker is running: credits, the
    /// policy's queue, and a wake-up (see "Held credits").
    ///
    /// # Safety
    /// Whatever `f` borrows outlives the task (see [`Task::new_unchecked`]).
    #[inline]
    pub(crate) unsafe fn spawn_raw<F>(
        &self,
        req: RequestRef,
        kind: TaskKind,
        home: Option<Home>,
        f: F,
    ) where
        F: FnOnce(&TaskCx<'_>) + Send,
    {
        let q = self.count_spawn(req, kind, home);
        // SAFETY: the caller's promise.
        let task = unsafe {
            Task::new_unchecked(
                req,
                home.map_or(NO_HOME, |h| h.node_index() as u32),
                f,
                Some(&self.cache),
            )
        };
        self.push_and_wake(q, req, task);
    }

    /// Queues a `join`'s `StackTask` of `req`: a credit spent, as for any spawn, but counted
    /// as spawned (and run) only if another worker runs it (`run`); popped back by this
    /// worker it is a call (`ran_inline`), as in rayon.
    #[inline(always)]
    pub(crate) fn spawn_built(&self, req: RequestRef, kind: TaskKind, task: Task) {
        self.spend_credit(req);
        let q = self.queue_for(kind, req);
        self.push_and_wake(q, req, task);
    }

    /// One credit of `req` spent on a spawn (see "Held credits").
    #[inline]
    fn spend_credit(&self, req: RequestRef) {
        // The running task has not finished, so its request is alive and not complete, and
        // this worker holds the request's credits (`run` made sure).
        debug_assert!(self.credited.get().is_some_and(|h| h.same(req)));
        if self.credits.get() == 0 {
            let n = self.batch.get();
            req.get().take_credits(n);
            self.credits.set(n);
            self.batch.set((2 * n).min(MAX_CREDITS));
        }
        self.credits.set(self.credits.get() - 1);
    }

    /// A spawn's accounting (a credit spent, the statistics) and its queue.
    #[inline]
    fn count_spawn(&self, req: RequestRef, kind: TaskKind, home: Option<Home>) -> QueueRef {
        self.spend_credit(req);
        let mut st = self.stats.get();
        st.spawned += 1;
        st.deferred += u64::from(kind == TaskKind::Deferred);
        self.stats.set(st);
        bump_owned(&self.cells.spawned);
        match home.and_then(|h| self.shared.place_at(h)) {
            Some(q) => q,
            None => self.queue_for(kind, req),
        }
    }

    /// The youngest task of this worker's own queue, if any (`join`'s pop: the queue is
    /// rarely empty there, so no look first).
    #[inline]
    pub(crate) fn pop_local(&self) -> Option<Task> {
        self.local.pop()
    }

    /// A task this worker spawned and popped back, whose work it then did inline without
    /// running the task (`join`'s fast path): its count becomes a credit, as a run's does.
    #[inline]
    pub(crate) fn ran_inline(&self, task: Task) {
        std::mem::forget(task);
        self.credits.set(self.credits.get() + 1);
    }

    /// Runs one task this worker may take, as its policy's search finds it, while a task of
    /// `req` waits (`join.rs`: a wait that helps); whether there was one. Under the counting
    /// semaphore a task is taken only with a claim on the semaphore, as the loop takes it.
    pub(crate) fn help(&self, req: RequestRef) -> bool {
        let task = match self.shared.policy.sleep().scheme {
            SleepScheme::Domains => self.find(),
            SleepScheme::CountingSemaphore => {
                if !self.shared.sleep.try_claim_task() {
                    return false;
                }
                // The claimed task is queued where this worker reaches (`claim_task`).
                loop {
                    if let Some(t) = self.find() {
                        break Some(t);
                    }
                    std::thread::yield_now();
                }
            }
        };
        match task {
            Some(task) => {
                self.run_helping(task, req);
                true
            }
            None => false,
        }
    }

    /// Runs `task` on top of a waiting task of `req`, then holds `req`'s credits again.
    pub(crate) fn run_helping(&self, task: Task, req: RequestRef) {
        let label = self.label.get();
        self.run(task);
        // `run` may have moved this worker's credits to the task's request: the waiting task
        // runs on, so its request's credits are held again (none yet; a spawn takes some).
        if !self.credited.get().is_some_and(|h| h.same(req)) {
            self.give_back();
            self.credited.set(Some(req));
        }
        self.last_request.set(Some(req.get().id));
        self.label.set(label);
        self.cells
            .running
            .store(req.get().id.wrapping_add(1), Ordering::Relaxed);
    }

    /// Whether this worker's stack is used past half of its size (`join.rs`, "Stack room").
    #[inline]
    pub(crate) fn deep(&self) -> bool {
        let probe = 0u8;
        (std::hint::black_box(std::ptr::addr_of!(probe)) as usize) < self.stack_mark.get()
    }

    /// The queue of a task spawned by this worker, as the policy says. Decided before the task
    /// is built, so that the task goes from registers to its queue in one move (passing a built
    /// task by reference to here cost a store-forwarding stall on every spawn, `perf annotate`).
    /// The common case, a fixed queue, is inlined into the spawn; the others are not.
    #[inline]
    fn queue_for(&self, kind: TaskKind, req: RequestRef) -> QueueRef {
        let place = match kind {
            TaskKind::Immediate => self.places[0],
            TaskKind::Deferred => self.places[1],
        };
        match place {
            Place::Queue(q) => q,
            other => self.queue_drawn(other, req),
        }
    }

    /// The queue of a place that is drawn per task.
    #[cold]
    #[inline(never)]
    fn queue_drawn(&self, place: Place, req: RequestRef) -> QueueRef {
        match place {
            Place::Queue(q) => q,
            Place::RoundRobinShared { count } => {
                QueueRef::Shared(self.shared.next_ticket() % count)
            }
            Place::RequestNode => QueueRef::Deferred(lock(&req.get().nodes).next_node()),
        }
    }

    /// Pushes a task of `req` spawned by this worker to `q` and wakes a sleeper for it. The
    /// common case, the worker's own queue under the sleep domains (every `join`, LAS's
    /// immediate spawns), is inlined into the spawn; the others are a call (inlined, the
    /// general push cost fib 8 % of its samples in register saves).
    #[inline(always)]
    fn push_and_wake(&self, q: QueueRef, req: RequestRef, task: Task) {
        if let (QueueRef::Local(v), Some(order)) = (q, self.wake_local) {
            debug_assert_eq!(v, self.w, "a local queue is pushed by its owner only");
            self.local.push(task);
            if self.shared.sleep.wake(order) {
                bump_owned(&self.cells.wakes);
            }
        } else {
            self.push_and_notify(q, req, task);
        }
    }

    /// [`push_and_wake`](Self::push_and_wake) to any other queue, or without sleep domains.
    fn push_and_notify(&self, q: QueueRef, req: RequestRef, task: Task) {
        let shared = self.shared;
        match (q, &self.own_deferred) {
            (QueueRef::Local(v), _) => {
                debug_assert_eq!(v, self.w, "a local queue is pushed by its owner only");
                self.local.push(task);
            }
            (QueueRef::Deferred(i), Some((own, pusher))) if i == *own => {
                shared.deferred[i].push_own(&mut pusher.borrow_mut(), req.get().id, task);
            }
            (other, _) => shared.push_shared(other, task),
        }
        if shared.notify(q) {
            bump_owned(&self.cells.wakes);
        }
    }

    /// Counts a task found by rule `rule` (1-based).
    #[inline]
    fn count_rule(&self, rule: u8) {
        if let Some(c) = self.cells.by_rule.get(usize::from(rule).saturating_sub(1)) {
            bump_owned(c);
        }
    }

    /// Pops from one queue as a probe prescribes.
    fn try_take(&self, p: &Probe, last: Option<RequestId>) -> Option<Task> {
        let shared = self.shared;
        match pop_of(self.w, p) {
            Pop::OwnYoungest => {
                // As in `steal`: `pop` on an empty deque still pays a fence.
                if self.local.is_empty() {
                    None
                } else {
                    self.local.pop()
                }
            }
            Pop::LocalOldest(v) => steal(&shared.stealers[v]),
            Pop::Shared(i, end) => shared.shared_queues[i].pop(end),
            Pop::Deferred(i, take) => shared.deferred[i].take(take, last),
        }
    }

    /// Walks the policy's search once; the first task found wins.
    pub(crate) fn find(&self) -> Option<Task> {
        // The search's first probe, inline: what `walk` would do first, without its generic loop
        // (a fifth of a chained task's samples). If it finds nothing, `walk` probes it again.
        // As in `try_take`, look first: `pop` on an empty deque still pays a fence, and idle
        // workers call `find` in a loop.
        if let Some(rule) = self.local_first.filter(|_| !self.local.is_empty()) {
            if let Some(t) = self.local.pop() {
                self.count_rule(rule);
                return Some(t);
            }
        }
        let mut cursors = self.cursors.borrow_mut();
        let mut rng = self.rng.borrow_mut();
        let last = self.last_request.get();
        let (task, probe) = walk(self.search, &mut cursors, &mut rng, |p| {
            self.try_take(p, last)
        })?;
        self.count_rule(probe.rule);
        if self.shared.is_steal(self.w, probe.queue) {
            bump_owned(&self.cells.steals);
        }
        Some(task)
    }

    /// Runs a task (unless its request failed); its count then becomes a credit of this worker.
    pub(crate) fn run(&self, task: Task) {
        let Head {
            req: handle,
            home,
            stack,
        } = task.head();
        if !self.credited.get().is_some_and(|h| h.same(handle)) {
            self.give_back();
            self.credited.set(Some(handle));
        }
        // This task has not finished, so its request is alive.
        let req = handle.get();
        // The request of the task found last (Bobox's rule 2 prefers it), set here rather than
        // in `find` so that the task is read once.
        self.last_request.set(Some(req.id));
        // Acquire: pairs with the Release store in `RequestInner::fail`.
        if req.failed.load(Ordering::Acquire) {
            let mut st = self.stats.get();
            st.skipped += 1;
            st.spawned += u64::from(stack);
            self.stats.set(st);
            drop(task);
        } else {
            let cx = TaskCx {
                me: self,
                req: handle,
            };
            let trace = self.shared.trace.as_ref();
            let start = trace.map(|t| {
                self.label.set(crate::trace::NO_LABEL);
                (t.now_ns(), crate::trace::thread_cpu_ns())
            });
            self.cells
                .running
                .store(req.id.wrapping_add(1), Ordering::Relaxed);
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| task.run(&cx, &self.cache))) {
                req.fail(payload);
            }
            self.cells.running.store(0, Ordering::Relaxed);
            if let (Some(t), Some((start_ns, cpu_start))) = (trace, start) {
                let cpu_end = crate::trace::thread_cpu_ns();
                let end_ns = t.now_ns();
                let cpu_ns = match (cpu_start, cpu_end) {
                    (Some(a), Some(b)) => b.saturating_sub(a),
                    _ => end_ns.saturating_sub(start_ns),
                };
                t.record(crate::TraceEvent {
                    worker: self.w,
                    request: req.id,
                    label: self.label.get(),
                    start_ns,
                    end_ns,
                    cpu_ns,
                });
            }
            bump_owned(&self.cells.executed);
            if stack {
                // A `join`'s second side run here, not by its spawner: counted as a spawn now
                // (`spawn_built` did not).
                let mut st = self.stats.get();
                st.spawned += 1;
                self.stats.set(st);
                bump_owned(&self.cells.spawned);
            }
            if home != NO_HOME {
                let mut st = self.stats.get();
                if home == self.node {
                    st.home_local += 1;
                    bump_owned(&self.cells.home_local);
                } else {
                    st.home_remote += 1;
                    bump_owned(&self.cells.home_remote);
                }
                self.stats.set(st);
            }
            #[cfg(not(loom))]
            if self.shared.allocator == crate::AllocatorKind::Nearflow {
                // §5.1: a worker scans its recollection bins when it finishes a task.
                nearflow_alloc::GLOBAL.collect();
            }
        }
        self.credits.set(self.credits.get() + 1);
    }

    /// This worker, counted as searching, found a task: if it was its domain's last searcher, a
    /// spawn may have skipped its wake-up because of it, so it wakes for the queue it took from
    /// as that spawn would have, unless nothing else is queued within its reach (the sleep
    /// README's wake chain: a burst of spawns then wakes one worker after another instead of
    /// leaving tasks queued beside sleeping workers, and a lone task wakes nobody else).
    fn end_search(&self, domain: usize) {
        if self
            .shared
            .sleep
            .found_while_searching(domain, || self.queued_within_reach())
        {
            bump_owned(&self.cells.wakes);
        }
    }

    /// The wake order of the first queue of this worker's search that holds a task, if any
    /// (the queues' length hints; exact after a barrier of the sleep protocol, as in its
    /// re-check).
    fn queued_within_reach(&self) -> Option<&'a [usize]> {
        let shared = self.shared;
        shared
            .policy
            .first_queued(self.w, shared)
            .map(|q| shared.policy.wake_order(q))
    }

    /// The worker's main loop.
    pub(crate) fn main_loop(&self) {
        let shared = self.shared;
        CURRENT.with(|c| c.set(std::ptr::from_ref(self).cast()));
        let _current = CurrentGuard;
        let base = 0u8;
        let base = std::hint::black_box(std::ptr::addr_of!(base)) as usize;
        self.stack_mark
            .set(base.saturating_sub(self.shared.stack_size / 2));
        match shared.policy.sleep().scheme {
            SleepScheme::Domains => {
                let domain = shared.policy.sleep().domain_of[self.w];
                'work: loop {
                    if let Some(t) = self.find() {
                        self.run(t);
                        continue;
                    }
                    self.give_back();
                    // Search a few more rounds, yielding the CPU between them, before sleeping:
                    // while this worker searches, spawns need not wake anybody in its domain.
                    shared.sleep.start_search(domain);
                    let mut yield_first = true;
                    loop {
                        for _ in 0..SEARCH_ROUNDS {
                            if yield_first {
                                std::thread::yield_now();
                            }
                            yield_first = true;
                            if let Some(t) = self.find() {
                                self.end_search(domain);
                                self.run(t);
                                continue 'work;
                            }
                        }
                        #[cfg(not(loom))]
                        if shared.allocator == crate::AllocatorKind::Nearflow {
                            // Idle: what this worker's local allocator keeps goes back to its node.
                            nearflow_alloc::GLOBAL.release_cached();
                        }
                        match shared.sleep.sleep(self.w, domain, || self.find()) {
                            Slept::Found { task, searching } => {
                                if shared.sleep.found_after_recheck(domain, searching, || {
                                    self.queued_within_reach()
                                }) {
                                    bump_owned(&self.cells.wakes);
                                }
                                self.run(task);
                                continue 'work;
                            }
                            // Woken, this worker counts as searching: probe at once.
                            Slept::Woken => {
                                bump_owned(&self.cells.sleeps);
                                yield_first = false;
                            }
                            Slept::Shutdown => break 'work,
                        }
                    }
                }
            }
            SleepScheme::CountingSemaphore => {
                while let Some(blocked) = shared.sleep.claim_task(|| self.give_back()) {
                    if blocked {
                        bump_owned(&self.cells.sleeps);
                    }
                    // A claimed task is queued in some list this worker reaches.
                    loop {
                        if let Some(t) = self.find() {
                            self.run(t);
                            break;
                        }
                        std::thread::yield_now();
                    }
                }
            }
        }
        // Shutdown begins only when every request has completed, so nothing is left; drain
        // anyway so that a bug here shows as a counted task rather than a leak.
        while let Some(t) = self.find() {
            self.run(t);
        }
        self.give_back();
    }
}
