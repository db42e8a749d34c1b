//! Fork-join for rayon users: [`join`], [`scope`], [`Runtime::install`], and a wait that helps.
//!
//! These keep rayon's contracts (rayon-core's `join`, `scope`, `ThreadPool::install`) on the
//! nearflow scheduler:
//!
//! - the closures may borrow from the caller's stack (no `'static`): the caller does not return
//!   before every closure it handed out has run;
//! - **both sides of a `join`, and every spawn of a `scope`, run exactly once**, even when the
//!   request they belong to was cancelled or another of its tasks panicked: a task of theirs
//!   that the runtime drops unrun is run by the waiter itself;
//! - a panic on either side, or in any spawn, is propagated to the caller once everything has
//!   finished (the body's or `a`'s first, then the first spawn's or `b`'s);
//! - **a waiting task runs other tasks while it waits** (the tasks its worker's policy lets it
//!   take), so nested waits never block a worker: a task that waits for an inner request, or a
//!   `join` whose other side was stolen, keeps its worker busy with queued work, and parks only
//!   when there is none, until the work it waits for is done.
//!
//! A `join`'s second side counts as a task (spawned and run, in the worker's and the request's
//! counters) only when another worker runs it; popped back by its spawner it was a call, as in
//! rayon, and costs no more than the deque's push and pop.
//!
//! In LAS terms (`las-scheduler-and-numa-allocator.txt` §4) the second side of a `join` and a
//! `scope`'s [`spawn`](Scope::spawn) are **immediate** tasks: they share the spawner's hot data
//! and run near it. [`Scope::spawn_deferred`] is the deferred kind (the start of a large part of
//! the work, free to run far away) and [`Scope::spawn_at`] a task whose data lives at a
//! [`Home`] (SplittableData's dispatch).
//!
//! ## Stack room
//!
//! A waiting worker runs other tasks on top of the waiting one, so its stack holds a chain of
//! them. Under a policy whose queues hand out the oldest task first (`central`, `fifo-rr`), each
//! of those is a large subtree that waits in turn, and the chain grows with the work instead of
//! with the recursion's depth. So a `join` or `scope` spawn on a worker whose stack is used
//! past half of its size ([`Builder::stack_size`](crate::Builder::stack_size), 8 MiB by
//! default) runs its closures inline, one after the other: what runs on top of the chain is
//! then sequential and its depth the recursion's own. A waiter always helps (waiters that did
//! not could all wait for tasks that nobody takes), and it waits only below that mark.
//!
//! ## The latch
//!
//! A waiter watches a [`Latch`]: `PENDING` until the work is done, then `SET`. With no task to
//! run it first yields, then announces that it parks (`PENDING → SLEEPY`) and parks for at most
//! a millisecond before it looks for work again. The setter swaps in `SET` and unparks the
//! waiter if the old state was `SLEEPY`. The swap is the setter's last access to the latch
//! (the waiter may free it at once): the waiter's thread handle is read before it, and lives in
//! the waiter's worker, which outlives the wait. A wake-up cannot be lost: a waiter that
//! announced itself before the swap is unparked (a `park` after an `unpark` returns at once),
//! and one that comes after it sees `SET` and does not park. The loom model below checks it.

use std::any::Any;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Duration;

use nearflow_policy::{Home, TaskKind};

use crate::registry::Registry;
use crate::request::RequestRef;
use crate::runtime::Runtime;
use crate::sync::{lock, park_for, AtomicUsize, Mutex, Ordering, Thread, UnsafeCell};
use crate::task::{StackRun, StackTask, Task, NO_HOME};
use crate::worker::{with_current, TaskCx, WorkerLocal};

const PENDING: usize = 0;
const SLEEPY: usize = 1;
const SET: usize = 2;

/// Looks (each after a `yield`) a waiter with nothing to run makes before it parks.
const LOOKS: u32 = 32;
/// The longest park before a waiter looks for work again: a task queued meanwhile wakes a
/// sleeping worker by the sleep protocol, not this one (which counts as busy), so the waiter
/// comes back to help at this interval.
const PARK: Duration = Duration::from_millis(1);

/// Work a waiter waits for (see the module docs).
pub(crate) struct Latch {
    state: AtomicUsize,
    /// The waiter's thread (null: nobody parks on this latch).
    waiter: *const Thread,
}

// SAFETY: `waiter` points to a `Thread` (Sync) that outlives the latch's use (module docs).
unsafe impl Sync for Latch {}
// SAFETY: as above.
unsafe impl Send for Latch {}

impl Latch {
    pub(crate) fn new(waiter: *const Thread) -> Latch {
        Latch {
            state: AtomicUsize::new(PENDING),
            waiter,
        }
    }

    /// Whether it is set; what the setter wrote before setting it is then visible.
    pub(crate) fn is_set(&self) -> bool {
        // Acquire: pairs with the swap in `set`.
        self.state.load(Ordering::Acquire) == SET
    }

    /// Sets it and wakes the waiter if it parks.
    ///
    /// # Safety
    /// `this` is a live latch; it may be freed by its waiter as soon as the swap is done.
    pub(crate) unsafe fn set(this: *const Latch) {
        // SAFETY: live until the swap; the waiter's handle outlives the wait.
        unsafe {
            let waiter = (*this).waiter;
            // AcqRel: Release publishes the setter's writes (a result) to the waiter's Acquire.
            if (*this).state.swap(SET, Ordering::AcqRel) == SLEEPY && !waiter.is_null() {
                (*waiter).unpark();
            }
        }
    }

    /// Parks the waiter until set (or, outside loom, at most [`PARK`]), unless already set.
    pub(crate) fn park(&self) {
        if self
            .state
            .compare_exchange(PENDING, SLEEPY, Ordering::Acquire, Ordering::Acquire)
            .is_ok()
        {
            park_for(PARK);
            // Back to PENDING unless set meanwhile (then it stays SET).
            let _ =
                self.state
                    .compare_exchange(SLEEPY, PENDING, Ordering::Acquire, Ordering::Acquire);
        }
    }
}

/// Waits until `latch` is set, running other tasks meanwhile (`extra` first: work of the
/// waiter's own to do inline), parking when there are none.
fn wait_helping(
    me: &WorkerLocal<'_>,
    req: RequestRef,
    latch: &Latch,
    mut extra: impl FnMut() -> bool,
) {
    let mut idle = 0u32;
    while !latch.is_set() {
        if extra() || me.help(req) {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < LOOKS {
            std::thread::yield_now();
        } else {
            latch.park();
        }
    }
}

/// Waits until `done()` on a worker, helping meanwhile (a [`RequestHandle`]'s `wait` called
/// from inside a task); `false` on a thread that is no worker (the caller then blocks).
///
/// [`RequestHandle`]: crate::RequestHandle
pub(crate) fn help_until(done: impl Fn() -> bool) -> bool {
    with_current(|cur| {
        let Some((me, req)) = cur else {
            return false;
        };
        let mut idle = 0u32;
        let mut park = Duration::from_micros(20);
        while !done() {
            if me.help(req) {
                idle = 0;
                park = Duration::from_micros(20);
                continue;
            }
            idle += 1;
            if idle < LOOKS {
                std::thread::yield_now();
            } else {
                // Nothing wakes this waiter when the request completes: park briefly, longer
                // while nothing comes (at most `PARK`).
                park_for(park);
                park = (park * 2).min(PARK);
            }
        }
        true
    })
}

/// A closure on its caller's stack, its result, and the latch set when it has run.
struct StackJob<F, R> {
    latch: Latch,
    func: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<std::thread::Result<R>>>,
}

impl<F: FnOnce() -> R + Send, R: Send> StackJob<F, R> {
    fn new(f: F, waiter: *const Thread) -> Self {
        StackJob {
            latch: Latch::new(waiter),
            func: UnsafeCell::new(Some(f)),
            result: UnsafeCell::new(None),
        }
    }

    /// Runs the closure (catching its panic), stores the result, sets the latch.
    ///
    /// # Safety
    /// `p` is a live `StackJob<F, R>` whose task has not run.
    unsafe fn execute(p: *const ()) {
        // SAFETY: the caller's promise; the waiter reads `func` and `result` only after the
        // latch is set (Acquire), and this task is the only other user.
        unsafe {
            let job = &*p.cast::<Self>();
            if let Some(f) = job.func.with_mut(|f| (*f).take()) {
                let r = catch_unwind(AssertUnwindSafe(f));
                job.result.with_mut(|s| *s = Some(r));
            }
            Latch::set(&job.latch);
        }
    }

    /// Its task was dropped unrun: sets the latch with the closure still in place.
    ///
    /// # Safety
    /// As [`execute`](Self::execute).
    unsafe fn abandon(p: *const ()) {
        // SAFETY: the caller's promise.
        unsafe { Latch::set(&(*p.cast::<Self>()).latch) }
    }

    /// A task that runs this job (or abandons it if dropped).
    fn task_fn(&self) -> JobTask {
        JobTask {
            job: std::ptr::from_ref(self).cast(),
            execute: Self::execute,
            abandon: Self::abandon,
        }
    }

    /// After the latch is set: the result, running the closure here if its task never ran.
    fn into_result(self) -> std::thread::Result<R> {
        debug_assert!(self.latch.is_set());
        // SAFETY: the latch is set: the task is done with the job, which is this thread's.
        let result = self.result.with_mut(|r| unsafe { (*r).take() });
        // SAFETY: as above.
        let func = self.func.with_mut(|f| unsafe { (*f).take() });
        match (result, func) {
            (Some(r), _) => r,
            (None, Some(f)) => catch_unwind(AssertUnwindSafe(f)),
            (None, None) => unreachable!("a job whose closure was taken stores its result"),
        }
    }
}

// SAFETY: shared with its task only through the latch protocol (module docs): the task takes
// `func` and writes `result` before setting the latch, the waiter reads both after seeing it.
unsafe impl<F: Send, R: Send> Sync for StackJob<F, R> {}

/// The task of a [`StackJob`]: runs it, or abandons it when dropped unrun (its request failed).
struct JobTask {
    job: *const (),
    execute: unsafe fn(*const ()),
    abandon: unsafe fn(*const ()),
}

// SAFETY: the job is `Send` data (`F: Send`, `R: Send`) that its waiter hands over whole.
unsafe impl Send for JobTask {}

impl JobTask {
    fn run(self) {
        let this = ManuallyDrop::new(self);
        // SAFETY: the job is alive until its latch is set, which this does, once.
        unsafe { (this.execute)(this.job) }
    }
}

impl Drop for JobTask {
    fn drop(&mut self) {
        // SAFETY: as in `run`; a dropped task did not run.
        unsafe { (self.abandon)(self.job) }
    }
}

/// The result of a side of a join: its value, or its panic propagated.
fn unwrap<R>(r: std::thread::Result<R>) -> R {
    match r {
        Ok(v) => v,
        Err(p) => resume_unwind(p),
    }
}

impl<F: FnOnce() -> R + Send, R: Send> StackRun for StackJob<F, R> {
    unsafe fn run(job: *const Self) {
        // SAFETY: the caller's promise (`StackTask`).
        unsafe { Self::execute(job.cast()) }
    }
    unsafe fn abandon(job: *const Self) {
        // SAFETY: as above.
        unsafe { Self::abandon(job.cast()) }
    }
}

/// `join` on the worker `me`, inside a task of `req`.
fn join_on<A, B, RA, RB>(me: &WorkerLocal<'_>, req: RequestRef, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    // `b`'s task lives in this frame (no allocation); this function returns only after the
    // task ran, was dropped, or was popped back here, so it outlives its every use.
    let st = StackTask::new(req, StackJob::new(b, &me.thread));
    // SAFETY: `st` stays in this frame until then, and its task is made once.
    me.spawn_built(req, TaskKind::Immediate, unsafe { st.task() });
    let ra = catch_unwind(AssertUnwindSafe(a));
    // The fast path: nobody took `b`'s task, which is the youngest on this worker's own
    // queue (what `a` spawned there it waited for): `b` runs here, inline, with no latch.
    // Under policies whose immediate tasks go elsewhere, or when it was stolen, this worker
    // helps until it is done.
    let rb = match me.pop_local() {
        Some(t) if st.is(&t) => {
            me.ran_inline(t);
            // SAFETY: the task is gone unrun, so the closure is this thread's alone.
            let f = st.job.func.with_mut(|f| unsafe { (*f).take() });
            catch_unwind(AssertUnwindSafe(f.expect("an unrun job keeps its closure")))
        }
        other => {
            if let Some(t) = other {
                me.run_helping(t, req);
            }
            wait_helping(me, req, &st.job.latch, || false);
            let StackTask { job, .. } = st;
            job.into_result()
        }
    };
    let ra = unwrap(ra);
    (ra, unwrap(rb))
}

/// Runs `a` and `b`, potentially in parallel, and returns both results (rayon's `join`).
///
/// Inside a task of a runtime, `b` becomes an immediate task of the same request (on a LAS
/// worker's own queue, where another worker may steal it) while this worker runs `a`, then `b`
/// if nobody took it, or other work while `b` runs elsewhere. Outside any runtime, both run in
/// the [`global`] runtime. A panic on either side propagates after both have finished.
///
/// ```
/// fn fib(n: u64) -> u64 {
///     if n < 2 { return n; }
///     let (a, b) = nearflow_rt::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// assert_eq!(fib(20), 6765);
/// ```
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let mut ab = Some((a, b));
    let here = with_current(|cur| {
        cur.map(|(me, req)| {
            let (a, b) = ab.take().expect("taken once");
            if me.deep() {
                // No room to wait on this stack: one side after the other (module docs).
                let ra = catch_unwind(AssertUnwindSafe(a));
                let rb = catch_unwind(AssertUnwindSafe(b));
                let ra = unwrap(ra);
                return (ra, unwrap(rb));
            }
            join_on(me, req, a, b)
        })
    });
    match here {
        Some(r) => r,
        None => {
            let (a, b) = ab.take().expect("taken once");
            global().install(|| join(a, b))
        }
    }
}

/// A scope of tasks that may borrow from outside it ([`scope`], rayon's `Scope`): the scope
/// returns when every task spawned in it has run.
pub struct Scope<'scope> {
    /// The body and the spawns that have not finished.
    pending: AtomicUsize,
    latch: Latch,
    /// The first panic of a spawn.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Spawns whose tasks were dropped unrun (their request failed): the waiter runs them.
    orphans: Mutex<Vec<Orphan<'scope>>>,
    registry: *const Registry,
    req: RequestRef,
    /// Invariant in `'scope`, as rayon's.
    _marker: PhantomData<fn(&'scope ()) -> &'scope ()>,
}

type Orphan<'scope> = Box<dyn FnOnce(&Scope<'scope>) + Send + 'scope>;

// SAFETY: shared between the tasks of the scope: its fields are atomics, mutexes, and pointers
// to the runtime and request, which outlive it (the scope's body runs in a task of that request).
unsafe impl Sync for Scope<'_> {}
// SAFETY: as above.
unsafe impl Send for Scope<'_> {}

/// A spawn's closure and its scope, as a task carries it.
struct ScopeJob<'scope, F: FnOnce(&Scope<'scope>) + Send + 'scope> {
    scope: *const Scope<'scope>,
    f: Option<F>,
}

// SAFETY: `F: Send`, and the scope is `Sync`.
unsafe impl<'scope, F: FnOnce(&Scope<'scope>) + Send + 'scope> Send for ScopeJob<'scope, F> {}

impl<'scope, F: FnOnce(&Scope<'scope>) + Send + 'scope> ScopeJob<'scope, F> {
    fn run(mut self) {
        let f = self.f.take().expect("a spawn runs once");
        // SAFETY: the scope waits for this spawn (its pending count) before it ends.
        let scope = unsafe { &*self.scope };
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(scope))) {
            scope.record_panic(p);
        }
        // SAFETY: `scope` is live until this, this spawn's count, is taken off.
        unsafe { Scope::complete_one(self.scope) };
    }
}

impl<'scope, F: FnOnce(&Scope<'scope>) + Send + 'scope> Drop for ScopeJob<'scope, F> {
    fn drop(&mut self) {
        if let Some(f) = self.f.take() {
            // Dropped unrun: the scope's waiter runs it (its count stays until then).
            // SAFETY: the scope is live while this spawn's count is pending.
            let scope = unsafe { &*self.scope };
            lock(&scope.orphans).push(Box::new(f));
        }
    }
}

impl<'scope> Scope<'scope> {
    fn new(me: &WorkerLocal<'_>, req: RequestRef) -> Self {
        Scope {
            pending: AtomicUsize::new(1),
            latch: Latch::new(&me.thread),
            panic: Mutex::new(None),
            orphans: Mutex::new(Vec::new()),
            registry: me.shared,
            req,
            _marker: PhantomData,
        }
    }

    /// Spawns an immediate task (LAS §4: it shares this task's data and runs near it) into the
    /// scope. It may borrow anything that outlives the scope; the scope's end waits for it.
    pub fn spawn<F>(&self, f: F)
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        self.spawn_kind(TaskKind::Immediate, None, f);
    }

    /// Spawns a deferred task into the scope: the start of a large part of the work, run when
    /// a worker is free, possibly on another node (LAS §4).
    pub fn spawn_deferred<F>(&self, f: F)
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        self.spawn_kind(TaskKind::Deferred, None, f);
    }

    /// Spawns a deferred task whose data lives at `home` (a NUMA node or PU of the runtime's
    /// machine, e.g. a `SplittableData` partition's): it is queued where the policy puts work
    /// for that place.
    pub fn spawn_at<F>(&self, home: Home, f: F)
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        self.spawn_kind(TaskKind::Deferred, Some(home), f);
    }

    fn spawn_kind<F>(&self, kind: TaskKind, home: Option<Home>, f: F)
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        if with_current(|cur| cur.is_some_and(|(me, _)| me.deep())) {
            // No room to wait on this stack: the spawn runs here and now (module docs).
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(self))) {
                self.record_panic(p);
            }
            return;
        }
        // Relaxed: the spawner holds a count (the body's or its own spawn's), so this cannot
        // race with the count reaching zero.
        self.pending.fetch_add(1, Ordering::Relaxed);
        let job = ScopeJob {
            scope: self,
            f: Some(f),
        };
        let task_fn = move |_: &TaskCx<'_>| job.run();
        let mut task_fn = Some(task_fn);
        let spawned = with_current(|cur| match cur {
            Some((me, req)) if std::ptr::eq(me.shared, self.registry) && req.same(self.req) => {
                let f = task_fn.take().expect("taken once");
                // SAFETY: the scope ends only after this spawn's count is taken off, which the
                // task does when it ran, or the waiter when it was dropped unrun.
                unsafe { me.spawn_raw(req, kind, home, f) };
                true
            }
            _ => false,
        });
        if !spawned {
            // From another thread (or a task of another request): injected into the request.
            let f = task_fn.take().expect("taken once");
            // SAFETY: as above; the registry outlives the scope's request.
            unsafe {
                let registry = &*self.registry;
                let home_id = home.map_or(NO_HOME, |h| h.node_index() as u32);
                self.req.get().take_credits(1);
                let task = Task::new_unchecked(self.req, home_id, f, None);
                registry.inject(self.req, home, task);
            }
        }
    }

    fn record_panic(&self, p: Box<dyn Any + Send>) {
        let mut slot = lock(&self.panic);
        if slot.is_none() {
            *slot = Some(p);
        }
    }

    /// Takes one count off; the last sets the latch.
    ///
    /// # Safety
    /// `this` is live and the caller holds one of its counts.
    unsafe fn complete_one(this: *const Scope<'scope>) {
        // SAFETY: live while the caller's count is held; after the decrement to zero only the
        // latch is touched, which `Latch::set` handles.
        unsafe {
            // AcqRel: every spawn's writes happen before the waiter's return.
            if (*this).pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                Latch::set(&(*this).latch);
            }
        }
    }

    /// Runs one orphaned spawn here, if there is one.
    fn run_orphan(&self) -> bool {
        let Some(f) = lock(&self.orphans).pop() else {
            return false;
        };
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(self))) {
            self.record_panic(p);
        }
        // SAFETY: `self` is live; the orphan's count was held for it.
        unsafe { Scope::complete_one(self) };
        true
    }
}

fn scope_on<'scope, OP, R>(me: &WorkerLocal<'_>, req: RequestRef, op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    let scope = Scope::new(me, req);
    let r = catch_unwind(AssertUnwindSafe(|| op(&scope)));
    // SAFETY: `scope` is live; this is the body's count.
    unsafe { Scope::complete_one(&scope) };
    wait_helping(me, req, &scope.latch, || scope.run_orphan());
    let spawn_panic = lock(&scope.panic).take();
    match (r, spawn_panic) {
        (Err(p), _) | (Ok(_), Some(p)) => resume_unwind(p),
        (Ok(v), None) => v,
    }
}

/// Runs `op` with a [`Scope`] whose spawns may borrow from outside it, and returns once every
/// spawn has run (rayon's `scope`). Inside a task the scope's tasks belong to the task's
/// request; outside any runtime it runs in the [`global`] one.
///
/// ```
/// let mut counts = vec![0u64; 4];
/// let words = ["a", "bb", "ccc", "dddd"];
/// nearflow_rt::scope(|s| {
///     for (c, w) in counts.iter_mut().zip(&words) {
///         s.spawn(move |_| *c = w.len() as u64);
///     }
/// });
/// assert_eq!(counts, [1, 2, 3, 4]);
/// ```
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    let mut op = Some(op);
    let here =
        with_current(|cur| cur.map(|(me, req)| scope_on(me, req, op.take().expect("taken once"))));
    match here {
        Some(r) => r,
        None => {
            let op = op.take().expect("taken once");
            global().install(|| scope(op))
        }
    }
}

/// Whether the calling thread is a worker of the runtime whose registry is `registry`.
fn on_runtime(registry: &Registry) -> bool {
    with_current(|cur| cur.is_some_and(|(me, _)| std::ptr::eq(me.shared, registry)))
}

impl Runtime {
    /// Runs `op` on one of this runtime's workers and returns its result (rayon's
    /// `ThreadPool::install`): [`join`], [`scope`] and the parallel iterators called inside it
    /// use this runtime. On one of its own workers `op` just runs. `op` may borrow from the
    /// caller; its panic propagates.
    ///
    /// ```
    /// use nearflow_rt::Runtime;
    /// let rt = Runtime::builder(nearflow_topo::presets::build("e5310-smp").unwrap()).build().unwrap();
    /// let v: Vec<u64> = (1..=1000).collect();
    /// let total = rt.install(|| {
    ///     let (a, b) = v.split_at(500);
    ///     let (x, y) = nearflow_rt::join(|| a.iter().sum::<u64>(), || b.iter().sum::<u64>());
    ///     x + y
    /// });
    /// assert_eq!(total, 500_500);
    /// ```
    pub fn install<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        if on_runtime(self.registry()) {
            return op();
        }
        let job = StackJob::new(op, std::ptr::null());
        let t = job.task_fn();
        // SAFETY: `wait` returns after the request's every task has run or been dropped, so
        // the job outlives its task.
        let handle = unsafe { self.submit_unchecked(move |_: &TaskCx<'_>| t.run()) };
        // The root ran (its result is in the job) or was dropped (the job runs here).
        let _ = handle.wait();
        unwrap(job.into_result())
    }

    /// [`join`] on this runtime.
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        self.install(|| join(a, b))
    }

    /// [`scope`] on this runtime.
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R + Send,
        R: Send,
    {
        self.install(|| scope(op))
    }
}

/// The runtime [`join`], [`scope`] and the parallel iterators use when called outside any
/// runtime: started on first use, on this machine's topology (hwloc; one core group and
/// `available_parallelism` PUs if detection fails) under LAS, and never stopped. Its workers
/// are bound to their core groups.
///
/// # Panics
/// If the OS refuses its worker threads (as rayon's global pool does).
pub fn global() -> &'static Runtime {
    static GLOBAL: std::sync::OnceLock<Runtime> = std::sync::OnceLock::new();
    GLOBAL.get_or_init(|| {
        let machine = nearflow_topo::detect_host().unwrap_or_else(|e| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            tracing::warn!("topology detection failed ({e}); the global runtime assumes {n} PUs");
            nearflow_topo::from_synthetic(&format!("core:{n} pu:1"))
                .expect("a flat synthetic machine")
        });
        Runtime::builder(machine)
            .build()
            .unwrap_or_else(|e| panic!("the global nearflow runtime could not start: {e}"))
    })
}

/// The number of workers of the runtime the calling thread is a worker of, or of the
/// [`global`] one (rayon's `current_num_threads`).
pub fn current_num_threads() -> usize {
    with_current(|cur| cur.map(|(me, _)| me.shared.policy.workers()))
        .unwrap_or_else(|| global().workers())
}

/// The index of the worker the calling thread is, if it is one (rayon's
/// `current_thread_index`).
pub fn current_thread_index() -> Option<usize> {
    with_current(|cur| cur.map(|(me, _)| me.w))
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model check of the latch (run with `RUSTFLAGS="--cfg loom"`): a waiter that looks,
    //! announces and parks, against a setter that publishes a result and sets: the waiter
    //! always wakes, and sees the result.
    use super::*;
    use crate::sync::Arc;
    use loom::thread;

    #[test]
    fn loom_latch_wakes_its_waiter_and_publishes() {
        loom::model(|| {
            let me = Arc::new(thread::current());
            let job = Arc::new(StackJob::new(|| 7u32, &*me as *const Thread));
            let j = job.clone();
            let setter = thread::spawn(move || {
                let t = j.task_fn();
                t.run();
            });
            // The waiter: look, then park until set (the real loop looks for work between).
            while !job.latch.is_set() {
                job.latch.park();
            }
            setter.join().unwrap();
            let job = Arc::try_unwrap(job).ok().expect("the setter is done");
            assert_eq!(job.into_result().ok(), Some(7));
        });
    }

    #[test]
    fn loom_abandoned_job_runs_at_its_waiter() {
        loom::model(|| {
            let me = Arc::new(thread::current());
            let job = Arc::new(StackJob::new(|| 9u32, &*me as *const Thread));
            let j = job.clone();
            let dropper = thread::spawn(move || {
                // The runtime drops the task unrun (its request failed).
                drop(j.task_fn());
            });
            while !job.latch.is_set() {
                job.latch.park();
            }
            dropper.join().unwrap();
            let job = Arc::try_unwrap(job).ok().expect("the dropper is done");
            assert_eq!(job.into_result().ok(), Some(9));
        });
    }
}
