//! Sleeping and waking of workers. The protocol, and why no wake-up is lost, is described in
//! `README.md` beside this file; read it before changing anything here.

use crossbeam_utils::CachePadded;

use crate::sync::{fence, lock, wait, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};

/// The two barriers of the protocol (`README.md`, "Why no wake-up is lost"): a *light* one on
/// every spawn and a *heavy* one when a worker registers to sleep.
///
/// **Asymmetric** (Linux ≥ 4.14, [`SleepBarriers::Membarrier`](crate::SleepBarriers), the
/// default, when the kernel allows it): the light barrier is a
/// compiler fence, the heavy one `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which makes
/// every running thread of the process execute a full memory barrier before it returns (a thread
/// that is not running passed one when it was switched out). A spawn then costs no fence
/// instruction at all; going to sleep costs one system call more, next to the futex it is about
/// to make. **Symmetric** ([`SleepBarriers::Fence`](crate::SleepBarriers), chosen or with
/// `NEARFLOW_MEMBARRIER=0`; also other systems, a kernel or seccomp filter that refuses
/// `membarrier`, loom and Miri): a `SeqCst` fence on both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Barriers {
    Symmetric,
    Asymmetric,
}

impl Barriers {
    /// The barriers for `choice`: asymmetric only when membarrier was asked for and this
    /// process can use it (registered here, once per process).
    pub(crate) fn resolve(choice: crate::SleepBarriers) -> Barriers {
        #[cfg(all(target_os = "linux", not(loom), not(miri)))]
        if choice == crate::SleepBarriers::Membarrier {
            if membarrier::register() {
                return Barriers::Asymmetric;
            }
            tracing::warn!("membarrier(2) is refused here: the sleep protocol uses fences");
        }
        let _ = choice;
        Barriers::Symmetric
    }

    /// The spawner's barrier, between its push and its loads of the domains' counts.
    #[inline]
    pub(crate) fn light(self) {
        match self {
            // SeqCst compiler fence: keeps the push and the loads in program order; the heavy
            // barrier orders them in the processor.
            Barriers::Asymmetric => std::sync::atomic::compiler_fence(Ordering::SeqCst),
            Barriers::Symmetric => fence(Ordering::SeqCst),
        }
    }

    /// The sleeper's barrier, between its registration and its re-check.
    pub(crate) fn heavy(self) {
        match self {
            #[cfg(all(target_os = "linux", not(loom), not(miri)))]
            Barriers::Asymmetric => membarrier::private_expedited(),
            _ => fence(Ordering::SeqCst),
        }
    }
}

#[cfg(all(target_os = "linux", not(loom), not(miri)))]
mod membarrier {
    //! The two `membarrier(2)` commands used (values from `linux/membarrier.h`).
    const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    fn call(cmd: libc::c_int) -> bool {
        // SAFETY: membarrier takes three integers and touches no user memory.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_uint,
                0 as libc::c_int,
            ) == 0
        }
    }

    /// Registers the process for private expedited barriers and issues one, to be sure the
    /// command works before any spawn relies on it.
    pub(super) fn register() -> bool {
        call(CMD_REGISTER_PRIVATE_EXPEDITED) && call(CMD_PRIVATE_EXPEDITED)
    }

    /// A memory barrier on every running thread of the process.
    pub(super) fn private_expedited() {
        // After a successful `register` the kernel only refuses this command for a process that
        // is not registered; spawns already rely on it, so there is no safe fallback.
        if !call(CMD_PRIVATE_EXPEDITED) {
            panic!(
                "membarrier(PRIVATE_EXPEDITED) failed after registration: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// A binary semaphore: one worker waits on its own.
struct BinarySemaphore {
    posted: Mutex<bool>,
    cv: Condvar,
}

impl BinarySemaphore {
    fn new() -> Self {
        BinarySemaphore {
            posted: Mutex::new(false),
            cv: Condvar::new(),
        }
    }
    fn post(&self) {
        let mut p = lock(&self.posted);
        *p = true;
        self.cv.notify_one();
    }
    fn wait(&self) {
        let mut p = lock(&self.posted);
        while !*p {
            p = wait(&self.cv, p);
        }
        *p = false;
    }
}

/// A sleep domain: a group of workers that sleep together (a core group for LAS, a NUMA node for
/// Bobox-2011, everyone for the baselines, one worker for per-thread queues).
struct Domain {
    /// Workers of the domain that are awake, idle and probing (between a failed find and
    /// registering to sleep). While one searches, a spawn need not wake anybody here. On a
    /// cache line of its own: searchers write it often, and spawns read `sleepers` first.
    searching: CachePadded<AtomicUsize>,
    /// Number of workers in `waiting`; read without the lock by wakers (the fast path: while it is
    /// 0, a spawn does no lock and no semaphore operation).
    sleepers: CachePadded<AtomicUsize>,
    /// Workers registered as sleeping, most recent last.
    waiting: Mutex<Vec<usize>>,
}

/// The counting semaphore of FIFO+RR (Bobox paper §6): its value is the number of tasks that
/// are queued and not yet claimed by a worker.
struct CountingSemaphore {
    count: Mutex<usize>,
    cv: Condvar,
}

/// What [`Sleep::sleep`] ended with.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Slept<T> {
    /// The re-check after registering found work: the worker never blocked. `searching`: a
    /// waker had chosen it meanwhile, so it counts as searching (see [`Sleep::stop_search`]).
    Found { task: T, searching: bool },
    /// The worker blocked and was woken.
    Woken,
    /// The runtime is shutting down.
    Shutdown,
}

/// Sleep state of one runtime.
pub(crate) struct Sleep {
    barriers: Barriers,
    domains: Vec<Domain>,
    sems: Vec<BinarySemaphore>,
    counting: CountingSemaphore,
    shutdown: AtomicBool,
    asleep: AtomicUsize,
}

impl Sleep {
    /// Sleep state for `workers` workers in `domains` domains.
    #[cfg(all(test, loom))]
    pub(crate) fn new(workers: usize, domains: usize) -> Self {
        Self::with_barriers(workers, domains, Barriers::Symmetric)
    }

    /// As [`Sleep::new`], with the given barriers.
    pub(crate) fn with_barriers(workers: usize, domains: usize, barriers: Barriers) -> Self {
        Sleep {
            barriers,
            domains: (0..domains)
                .map(|_| Domain {
                    searching: CachePadded::new(AtomicUsize::new(0)),
                    sleepers: CachePadded::new(AtomicUsize::new(0)),
                    waiting: Mutex::new(Vec::new()),
                })
                .collect(),
            sems: (0..workers).map(|_| BinarySemaphore::new()).collect(),
            counting: CountingSemaphore {
                count: Mutex::new(0),
                cv: Condvar::new(),
            },
            shutdown: AtomicBool::new(false),
            asleep: AtomicUsize::new(0),
        }
    }

    /// A worker of domain `d` found no task and starts searching.
    pub(crate) fn start_search(&self, d: usize) {
        // Relaxed: read by wakers after their fence; see `wake` and the README.
        self.domains[d].searching.fetch_add(1, Ordering::Relaxed);
    }

    /// The worker stops searching because it found a task. Returns whether it was the domain's
    /// last searcher: a spawn may then have skipped its wake-up because of it (README, "The wake
    /// chain"); [`Sleep::found_while_searching`] is what the worker loop calls.
    #[must_use]
    fn stop_search(&self, d: usize) -> bool {
        // Acquire: pairs with the Release decrement of a worker registering to sleep, so
        // the wake that may follow sees its registration in `sleepers`.
        self.domains[d].searching.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// A worker of domain `d`, counted as searching, found a task. If it was the domain's last
    /// searcher, spawns may have skipped their wake-ups because of it; it wakes as they would
    /// have, unless no other task is queued within its reach (README, "The wake chain"). `more`
    /// looks: it returns the wake order of a queue of the worker's search that holds a task, or
    /// `None`. Returns whether a worker was woken.
    pub(crate) fn found_while_searching<'o>(
        &self,
        d: usize,
        more: impl Fn() -> Option<&'o [usize]>,
    ) -> bool {
        self.stop_search(d) && self.pass_on(more, true)
    }

    /// A worker whose re-check after registering ([`Sleep::sleep`]) found a task: `searching` is
    /// the flag [`Slept::Found`] came with, `more` as in [`Sleep::found_while_searching`]. It
    /// searched until it registered, so spawns may have skipped their wake-ups because of it; it
    /// wakes as they would have (a searcher that is still there stops the walk), unless nothing
    /// else is queued within its reach. The heavy barrier before its re-check covers the spawns
    /// that counted it until it registered; a new barrier is needed only if a waker made it a
    /// searcher again and it was the last.
    pub(crate) fn found_after_recheck<'o>(
        &self,
        d: usize,
        searching: bool,
        more: impl Fn() -> Option<&'o [usize]>,
    ) -> bool {
        let again = searching && self.stop_search(d);
        self.pass_on(more, again)
    }

    /// The end of a link of the wake chain: if any domain has a sleeper and `more` finds a task
    /// still queued, wakes for that task's queue. With `barrier`, a `SeqCst` fence comes first:
    /// it pairs with the light barrier (symmetric) or the fence of `searcher_stays`
    /// (asymmetric) of every spawn that stopped at this worker, so that the loads below see
    /// that spawn's push and the sleeper it saw (README, "The wake chain").
    fn pass_on<'o>(&self, more: impl Fn() -> Option<&'o [usize]>, barrier: bool) -> bool {
        if barrier {
            fence(Ordering::SeqCst);
        }
        // Relaxed: ordered by the fence above, or by the heavy barrier before a re-check.
        if self
            .domains
            .iter()
            .all(|dom| dom.sleepers.load(Ordering::Relaxed) == 0)
        {
            return false;
        }
        more().is_some_and(|order| self.wake(order))
    }

    /// A spawn found a searcher in `dom` after its light barrier: whether it may leave its task
    /// to that searcher. With symmetric barriers, yes (the light barrier was a `SeqCst` fence).
    /// With asymmetric ones, if no domain of `order` has a sleeper, yes too: a worker that
    /// registers later re-checks after its heavy barrier. Otherwise the searcher, when it finds
    /// a task, decides by what it sees still queued whether to wake a sleeper; for it to see our
    /// push, this spawn makes a `SeqCst` fence (pairing with the one in `pass_on`) and looks at
    /// the searchers again: if the last has left meanwhile, nobody will pass the wake on, and
    /// the caller wakes as if there had been no searcher.
    fn searcher_stays(&self, order: &[usize], dom: &Domain) -> bool {
        if self.barriers == Barriers::Symmetric
            || order
                .iter()
                .all(|&e| self.domains[e].sleepers.load(Ordering::Relaxed) == 0)
        {
            return true;
        }
        fence(Ordering::SeqCst);
        dom.searching.load(Ordering::Relaxed) > 0
    }

    /// Called after a task was pushed: walks the domains of `order`, nearest first, and stops at
    /// the first one with a searching worker (it will find the task, or wake another when it
    /// finds one and sees a task left; see [`Sleep::searcher_stays`]) or with a sleeper, whom it
    /// wakes; the woken worker counts as searching until it finds a task or sleeps again.
    /// Returns whether a worker was woken.
    #[inline]
    pub(crate) fn wake(&self, order: &[usize]) -> bool {
        // Light barrier: pairs with the heavy one in `sleep` (step 2 of the README). Either these
        // loads see the searcher's registration (its `searching` decrement and `sleepers`
        // increment), or its re-check sees our push.
        self.barriers.light();
        // With no sleeper in the whole order, the walk below wakes nobody whatever `searching`
        // holds (a searcher stays, or a domain without sleepers is passed over): decide that
        // from the `sleepers` lines alone, which a busy domain's searchers do not write.
        // Relaxed: ordered by the barrier above, as the walk's loads are.
        if order
            .iter()
            .all(|&d| self.domains[d].sleepers.load(Ordering::Relaxed) == 0)
        {
            return false;
        }
        self.wake_walk(order)
    }

    /// The walk of [`wake`](Self::wake) when some domain of `order` had a sleeper: the
    /// policy's [`wake_walk`](nearflow_policy::wake_walk), which the simulator drives too,
    /// over these domains ([`Walk`]).
    #[inline(never)]
    fn wake_walk(&self, order: &[usize]) -> bool {
        match nearflow_policy::wake_walk(&mut Walk(self), order) {
            Some(w) => {
                self.sems[w].post();
                true
            }
            None => false,
        }
    }

    /// Puts worker `w` of domain `d`, which is searching (see [`Sleep::start_search`]), to sleep,
    /// unless `recheck`, run after registering, finds work. A worker that returns
    /// [`Slept::Woken`], or [`Slept::Found`] with `searching`, counts as searching (a waker
    /// chose it); otherwise it no longer does.
    pub(crate) fn sleep<T>(
        &self,
        w: usize,
        d: usize,
        recheck: impl FnOnce() -> Option<T>,
    ) -> Slept<T> {
        let dom = &self.domains[d];
        // Step 1: register, and stop searching, both before the fence.
        {
            let mut list = lock(&dom.waiting);
            list.push(w);
            // Relaxed: ordered by the fence below; changes only under the lock.
            dom.sleepers.fetch_add(1, Ordering::Relaxed);
            // Release: a searcher that decrements after us (`stop_search`) sees `sleepers`.
            dom.searching.fetch_sub(1, Ordering::Release);
        }
        // Step 2: heavy barrier, pairs with the light one in `wake`.
        self.barriers.heavy();
        // Step 3: re-check every queue this worker can reach.
        if let Some(task) = recheck() {
            let searching = self.cancel(w, dom);
            return Slept::Found { task, searching };
        }
        // SeqCst: pairs with the store in `shutdown`.
        if self.shutdown.load(Ordering::SeqCst) {
            let _ = self.cancel(w, dom);
            return Slept::Shutdown;
        }
        // Step 4: block until a waker pops us from `waiting` and posts our semaphore.
        self.asleep.fetch_add(1, Ordering::Relaxed);
        self.sems[w].wait();
        self.asleep.fetch_sub(1, Ordering::Relaxed);
        if self.shutdown.load(Ordering::SeqCst) {
            Slept::Shutdown
        } else {
            Slept::Woken
        }
    }

    /// Leaves the waiting list after a successful re-check. If a waker popped us already, it has
    /// posted (or is about to post) our semaphore: consume that post, so it cannot wake us later
    /// for nothing. The waker's task is not lost: we are awake and will probe again. Returns
    /// whether a waker popped us (we then count as searching).
    fn cancel(&self, w: usize, dom: &Domain) -> bool {
        let mut list = lock(&dom.waiting);
        if let Some(pos) = list.iter().position(|&x| x == w) {
            list.remove(pos);
            dom.sleepers.fetch_sub(1, Ordering::Relaxed);
            false
        } else {
            drop(list);
            self.sems[w].wait();
            true
        }
    }

    /// FIFO+RR: one more task is queued.
    pub(crate) fn post_task(&self) {
        let mut c = lock(&self.counting.count);
        *c += 1;
        self.counting.cv.notify_one();
    }

    /// FIFO+RR: claims one queued task, blocking while there is none (after calling
    /// `before_blocking`, outside the lock). Returns `None` at shutdown, else whether the worker
    /// blocked. The claimed task is in some queue the worker can reach (every FIFO+RR worker
    /// reaches every list), and no other worker can claim it.
    pub(crate) fn claim_task(&self, before_blocking: impl FnOnce()) -> Option<bool> {
        let mut c = lock(&self.counting.count);
        if *c == 0 {
            drop(c);
            before_blocking();
            c = lock(&self.counting.count);
        }
        let mut blocked = false;
        while *c == 0 {
            if self.shutdown.load(Ordering::SeqCst) {
                return None;
            }
            blocked = true;
            self.asleep.fetch_add(1, Ordering::Relaxed);
            c = wait(&self.counting.cv, c);
            self.asleep.fetch_sub(1, Ordering::Relaxed);
        }
        *c -= 1;
        Some(blocked)
    }

    /// FIFO+RR: claims one queued task if there is one, without blocking (a waiting task that
    /// helps, `WorkerLocal::help`); whether it claimed.
    pub(crate) fn try_claim_task(&self) -> bool {
        let mut c = lock(&self.counting.count);
        if *c == 0 {
            return false;
        }
        *c -= 1;
        true
    }

    /// Wakes every worker for good.
    pub(crate) fn shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        for d in &self.domains {
            let ws: Vec<usize> = {
                let mut list = lock(&d.waiting);
                d.sleepers.store(0, Ordering::Relaxed);
                std::mem::take(&mut *list)
            };
            for w in ws {
                self.sems[w].post();
            }
        }
        // Taking the lock orders the flag before any worker's next check under it.
        let _c = lock(&self.counting.count);
        self.counting.cv.notify_all();
    }

    /// The barriers in use.
    pub(crate) fn barriers(&self) -> Barriers {
        self.barriers
    }

    /// Workers blocked right now (a monitoring figure, racy by nature).
    pub(crate) fn asleep(&self) -> usize {
        self.asleep.load(Ordering::Relaxed)
    }

    /// Workers registered as sleeping in each domain (racy snapshot).
    pub(crate) fn waiting(&self, d: usize) -> Vec<usize> {
        lock(&self.domains[d].waiting).clone()
    }
}

/// The worker loop of `worker.rs` over one queue, for the models and tests below: probe, search,
/// sleep, and pass the wake on (the wake chain). `task` runs each task taken and says whether
/// the consumer goes on.
/// The runtime's sleep domains as the policy's wake walk sees them
/// ([`nearflow_policy::WakeSite`]); the loads are Relaxed, ordered by the light barrier that
/// [`Sleep::wake`] issues first.
struct Walk<'a>(&'a Sleep);

impl nearflow_policy::WakeSite for Walk<'_> {
    fn searcher_stays(&mut self, order: &[usize], d: usize) -> bool {
        let dom = &self.0.domains[d];
        // Relaxed: ordered by the fence in `wake`.
        dom.searching.load(Ordering::Relaxed) > 0 && self.0.searcher_stays(order, dom)
    }

    fn has_sleeper(&self, d: usize) -> bool {
        // Relaxed: ordered by the fence in `wake`.
        self.0.domains[d].sleepers.load(Ordering::Relaxed) > 0
    }

    fn take_sleeper(&mut self, d: usize) -> Option<usize> {
        let dom = &self.0.domains[d];
        let mut list = lock(&dom.waiting);
        let w = list.pop()?;
        // Relaxed: `sleepers` changes only under `waiting`'s lock.
        dom.sleepers.fetch_sub(1, Ordering::Relaxed);
        // The woken worker searches: spawns until it finds a task need not wake anybody else
        // here, and it passes the wake on when it finds one.
        dom.searching.fetch_add(1, Ordering::Relaxed);
        Some(w)
    }
}

#[cfg(test)]
mod harness {
    use super::{Sleep, Slept};
    use crate::queue::SharedQueue;
    use nearflow_policy::End;

    pub(super) fn consume(
        sleep: &Sleep,
        queue: &SharedQueue<u32>,
        w: usize,
        d: usize,
        order: &[usize],
        mut task: impl FnMut(u32),
    ) {
        // Whether this worker counts as searching (it started to, or a waker chose it).
        let mut searching = false;
        loop {
            if let Some(t) = queue.pop(End::Oldest) {
                if std::mem::take(&mut searching) {
                    sleep.found_while_searching(d, || (queue.len() > 0).then_some(order));
                }
                task(t);
                continue;
            }
            if !searching {
                sleep.start_search(d);
                searching = true;
                // One search round; the runtime makes `SEARCH_ROUNDS` of them.
                continue;
            }
            searching = false;
            match sleep.sleep(w, d, || queue.pop(End::Oldest)) {
                Slept::Found { task: t, searching } => {
                    sleep.found_after_recheck(d, searching, || (queue.len() > 0).then_some(order));
                    task(t);
                }
                Slept::Woken => searching = true,
                Slept::Shutdown => return,
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of the protocol (run with `RUSTFLAGS="--cfg loom"`). A lost wake-up leaves a
    //! task queued with every worker blocked, which loom reports as a deadlock. Each scenario
    //! shuts down only after every task was consumed, so shutdown cannot mask a lost wake-up.
    //! With `rendezvous`, each task blocks until every task has started: a task left queued
    //! while a worker that could run it sleeps then leaves every thread blocked, which loom
    //! reports as a deadlock too.
    use super::*;
    use crate::queue::SharedQueue;
    use crate::sync::Arc;
    use loom::thread;
    use nearflow_policy::End;

    struct World {
        sleep: Sleep,
        queue: SharedQueue<u32>,
        started: AtomicUsize,
        tasks: usize,
        /// Tasks started, and a condition variable, when each task waits for all to start.
        rendezvous: Option<(Mutex<usize>, Condvar)>,
    }

    impl World {
        fn task(&self) {
            if let Some((m, cv)) = &self.rendezvous {
                let mut n = lock(m);
                *n += 1;
                cv.notify_all();
                while *n < self.tasks {
                    n = wait(cv, n);
                }
            }
            if self.started.fetch_add(1, Ordering::SeqCst) + 1 == self.tasks {
                self.sleep.shutdown();
            }
        }
    }

    fn run(
        workers: &'static [(usize, usize)],
        domains: usize,
        tasks: usize,
        order: &'static [usize],
        rendezvous: bool,
    ) {
        loom::model(move || {
            let world = Arc::new(World {
                sleep: Sleep::new(workers.len(), domains),
                queue: SharedQueue::new(),
                started: AtomicUsize::new(0),
                tasks,
                rendezvous: rendezvous.then(|| (Mutex::new(0), Condvar::new())),
            });
            let handles: Vec<_> = workers
                .iter()
                .map(|&(w, d)| {
                    let world = world.clone();
                    thread::spawn(move || {
                        harness::consume(&world.sleep, &world.queue, w, d, order, |_| world.task())
                    })
                })
                .collect();
            for i in 0..tasks {
                world.queue.push(i as u32);
                world.sleep.wake(order);
            }
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(world.started.load(Ordering::SeqCst), tasks);
        });
    }

    #[test]
    fn one_worker_two_pushes() {
        run(&[(0, 0)], 1, 2, &[0], false);
    }

    #[test]
    fn two_workers_one_domain() {
        run(&[(0, 0), (1, 0)], 1, 2, &[0], false);
    }

    #[test]
    fn two_domains_wake_in_order() {
        run(&[(0, 0), (1, 1)], 2, 2, &[1, 0], false);
    }

    /// Two pushes while one worker searches skip their wake-ups; the searcher that takes the
    /// first must wake the other worker for the second, or the rendezvous never completes.
    #[test]
    fn a_burst_wakes_every_worker_it_needs() {
        run(&[(0, 0), (1, 0)], 1, 2, &[0], true);
    }

    #[test]
    fn counting_semaphore_claims() {
        loom::model(|| {
            let world = Arc::new(World {
                sleep: Sleep::new(1, 1),
                queue: SharedQueue::new(),
                started: AtomicUsize::new(0),
                tasks: 2,
                rendezvous: None,
            });
            let w = world.clone();
            let h = thread::spawn(move || {
                while w.sleep.claim_task(|| ()).is_some() {
                    // A claimed task is queued (or about to be visible): retry until found.
                    while w.queue.pop(End::Oldest).is_none() {
                        thread::yield_now();
                    }
                    if w.started.fetch_add(1, Ordering::SeqCst) + 1 == w.tasks {
                        w.sleep.shutdown();
                    }
                }
            });
            for i in 0..2 {
                world.queue.push(i);
                world.sleep.post_task();
            }
            h.join().unwrap();
            assert_eq!(world.started.load(Ordering::SeqCst), 2);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! The protocol under real threads, with both kinds of barriers: producers that are not
    //! workers push in bursts with pauses, so the consumers go to sleep again and again; a lost
    //! wake-up leaves tasks queued and the count short when the deadline passes.
    use super::*;
    use crate::queue::SharedQueue;
    use crate::sync::Arc;
    use nearflow_policy::End;
    use std::time::{Duration, Instant};

    fn bursts(barriers: Barriers) {
        const WORKERS: usize = 2;
        const TASKS: usize = 4000;
        let sleep = Arc::new(Sleep::with_barriers(WORKERS, 1, barriers));
        let queue = Arc::new(SharedQueue::new());
        let consumed = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (sleep, queue, consumed) = (sleep.clone(), queue.clone(), consumed.clone());
                std::thread::spawn(move || {
                    harness::consume(&sleep, &queue, w, 0, &[0], |_| {
                        consumed.fetch_add(1, Ordering::Relaxed);
                    })
                })
            })
            .collect();
        for i in 0..TASKS {
            queue.push(i as u32);
            sleep.wake(&[0]);
            if i % 8 == 7 {
                // Long enough for a consumer to empty the queue and register to sleep.
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while consumed.load(Ordering::Relaxed) < TASKS && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let got = consumed.load(Ordering::Relaxed);
        sleep.shutdown();
        for h in workers {
            h.join().unwrap();
        }
        assert_eq!(
            got, TASKS,
            "{barriers:?}: tasks left queued with workers asleep"
        );
    }

    #[test]
    fn no_lost_wake_up_with_symmetric_barriers() {
        bursts(Barriers::Symmetric);
    }

    #[test]
    fn no_lost_wake_up_with_asymmetric_barriers() {
        let detected = Barriers::resolve(crate::SleepBarriers::Membarrier);
        if detected != Barriers::Asymmetric {
            eprintln!("membarrier is not usable here: only the symmetric barriers were tested");
        }
        bursts(detected);
    }

    /// Symmetric, and asymmetric where the kernel allows it.
    fn both_barriers() -> [Barriers; 2] {
        [
            Barriers::Symmetric,
            Barriers::resolve(crate::SleepBarriers::Membarrier),
        ]
    }

    /// Worker 1 registers and blocks; worker 0 searches. Returns worker 1's thread, which
    /// reports what it found after it was woken.
    fn one_sleeper_one_searcher(
        barriers: Barriers,
    ) -> (
        Arc<Sleep>,
        Arc<SharedQueue<u32>>,
        std::thread::JoinHandle<Option<u32>>,
    ) {
        let sleep = Arc::new(Sleep::with_barriers(2, 1, barriers));
        let queue = Arc::new(SharedQueue::<u32>::new());
        let (s, q) = (sleep.clone(), queue.clone());
        let sleeper = std::thread::spawn(move || {
            s.start_search(0);
            match s.sleep(1, 0, || q.pop(End::Oldest)) {
                Slept::Woken => q.pop(End::Oldest),
                Slept::Shutdown => None,
                other => panic!("worker 1 should have blocked and been woken, got {other:?}"),
            }
        });
        let t = Instant::now();
        while (sleep.waiting(0).is_empty() || sleep.asleep() == 0)
            && t.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(sleep.waiting(0), vec![1]);
        sleep.start_search(0); // worker 0
        (sleep, queue, sleeper)
    }

    /// The wake chain, step by step: with worker 0 searching, two pushes wake nobody; worker 0
    /// takes the first task and, as the last searcher with a task still queued, wakes worker 1
    /// for the second, while worker 0 still runs its task (before the chain, the second task
    /// waited for it).
    #[test]
    fn a_searcher_that_finds_a_task_wakes_a_sleeper_for_the_next() {
        for barriers in both_barriers() {
            let (sleep, queue, sleeper) = one_sleeper_one_searcher(barriers);
            for i in 0..2 {
                queue.push(i);
                assert!(
                    !sleep.wake(&[0]),
                    "{barriers:?}: a push woke a worker while another searched"
                );
            }
            assert_eq!(queue.pop(End::Oldest), Some(0));
            assert!(
                sleep.found_while_searching(0, || (queue.len() > 0).then_some(&[0][..])),
                "{barriers:?}: the last searcher woke nobody for the task left"
            );
            assert_eq!(sleeper.join().unwrap(), Some(1));
            sleep.shutdown();
        }
    }

    /// The other half: a searcher that takes the only task queued wakes nobody (a woken worker
    /// would find nothing and go back to sleep: on a virtual machine that cost a small
    /// request 45 µs).
    #[test]
    fn a_searcher_that_takes_the_last_task_wakes_nobody() {
        for barriers in both_barriers() {
            let (sleep, queue, sleeper) = one_sleeper_one_searcher(barriers);
            queue.push(7);
            assert!(!sleep.wake(&[0]), "{barriers:?}: the push woke a worker");
            assert_eq!(queue.pop(End::Oldest), Some(7));
            assert!(
                !sleep.found_while_searching(0, || (queue.len() > 0).then_some(&[0][..])),
                "{barriers:?}: the last searcher woke a worker with nothing queued"
            );
            assert_eq!(
                sleep.waiting(0),
                vec![1],
                "{barriers:?}: worker 1 was woken"
            );
            sleep.shutdown();
            assert_eq!(sleeper.join().unwrap(), None);
        }
    }
}
