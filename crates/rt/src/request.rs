//! Requests: independent units of work (a query, a dataflow plan), numbered sequentially from 0.
//!
//! ## Completion
//!
//! `pending` counts tasks spawned and not yet finished, the root included. A spawning task holds
//! one count itself, so its increments happen before its own decrement and the counter reaches
//! zero exactly once: the finisher whose decrement returns 1 completes the request. The decrement
//! is a finisher's **last** access to the request unless it is that finisher. (An earlier design
//! compared monotonic `finished` and `spawned` counters, loading `spawned` after the `finished`
//! increment; Miri caught that load racing with the request's deallocation by the completing
//! finisher.) `spawned` is a separate relaxed count for the per-request counters.
//!
//! **Credits.** A worker does not touch `pending` for every task it spawns or finishes. It
//! holds a share of the pending count of the request whose task it ran last, its *credits*
//! (`worker.rs`, "Held credits"):
//!
//! - a spawn spends one credit; with none left the worker takes a batch (1, 2, 4, … up to
//!   [`MAX_CREDITS`]) with one increment ([`RequestInner::take_credits`]);
//! - a task that ends turns its own count into one more credit of its worker;
//! - the worker gives every credit back in one decrement ([`RequestInner::give_back`]), after
//!   adding the spawn statistics it gathered, when it is about to run a task of another request
//!   and when it finds no task (before it searches or sleeps).
//!
//! So `pending` = unfinished tasks + credits held by workers. A running task is unfinished until
//! it ends, and held credits are given back only after the task that earned them ended, so
//! `pending` reaches zero exactly once, at the give-back after the request's last task, and every
//! increment happens before that decrement. A chain or a fork-join tree on one worker touches the
//! request a few times in all instead of two or three read-modify-writes per task (rayon's scope
//! pays two: one increment per spawn, one decrement per end). The cost: the request completes
//! when the worker that ran its last task next looks for work, one walk of its search order later.
//!
//! ## Lifetime
//!
//! Tasks refer to their request through a [`RequestRef`], a raw pointer, instead of an `Arc`
//! (two fewer atomic read-modify-writes per task). At submission one strong count of the
//! request's `Arc` is handed to its tasks collectively ([`RequestRef::leak`]); the finisher that
//! completes the request takes it back ([`RequestRef::release`]) after its last use. A task never
//! touches its request after its own finish increment, unless it is that finisher.

use std::any::Any;
use std::fmt;

use nearflow_policy::{RequestId, RequestNodes};

use crate::counters::RequestCounters;
use std::ptr::NonNull;

use crate::sync::{
    lock, os, wait, Arc, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering,
};

/// Request states alive in this process: a leak check for the `RequestRef` protocol (a plain std
/// atomic: it is a counter for tests, not part of any protocol).
static LIVE: os::AtomicUsize = os::AtomicUsize::new(0);

/// Number of request states not yet freed in this process. Tests use it to check that the
/// strong count handed to a request's tasks is always given back.
#[doc(hidden)]
pub fn live_requests() -> usize {
    LIVE.load(os::Ordering::SeqCst)
}

impl Drop for RequestInner {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, os::Ordering::SeqCst);
    }
}

/// How long a waiter watches for completion before it blocks ([`RequestInner::watch`]).
#[cfg(not(loom))]
const WATCH: std::time::Duration = std::time::Duration::from_micros(50);
/// Looks with a spin hint before the watch yields between looks.
#[cfg(not(loom))]
const SPINS: u32 = 64;

/// Most credits a running task takes at once (see the module docs).
pub(crate) const MAX_CREDITS: usize = 256;

pub(crate) struct RequestInner {
    pub(crate) id: RequestId,
    /// Tasks spawned and not finished (see the module docs).
    pending: AtomicUsize,
    /// Tasks spawned, the root included (a counter only).
    spawned: AtomicU64,
    pub(crate) failed: AtomicBool,
    cancelled: AtomicBool,
    failure: Mutex<Option<String>>,
    /// Whether every task has ended: set once, under `done`'s lock (so that a waiter that
    /// checked it under the lock cannot miss the notification), read without it by `watch`.
    finished: AtomicBool,
    done: Mutex<()>,
    done_cv: Condvar,
    pub(crate) spawned_deferred: AtomicU64,
    pub(crate) skipped: AtomicU64,
    /// Tasks with a data home that ran on their home node / elsewhere.
    pub(crate) home_local: AtomicU64,
    pub(crate) home_remote: AtomicU64,
    /// Bobox-2011: the nodes evaluating this request.
    pub(crate) nodes: Mutex<RequestNodes>,
}

impl RequestInner {
    pub(crate) fn new(id: RequestId) -> Self {
        LIVE.fetch_add(1, os::Ordering::SeqCst);
        RequestInner {
            id,
            pending: AtomicUsize::new(1),
            spawned: AtomicU64::new(1),
            failed: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            failure: Mutex::new(None),
            finished: AtomicBool::new(false),
            done: Mutex::new(()),
            done_cv: Condvar::new(),
            spawned_deferred: AtomicU64::new(1),
            skipped: AtomicU64::new(0),
            home_local: AtomicU64::new(0),
            home_remote: AtomicU64::new(0),
            nodes: Mutex::new(RequestNodes::new(0)),
        }
    }

    /// Records the first panic of the request; later tasks of it are skipped.
    pub(crate) fn fail(&self, payload: Box<dyn Any + Send>) {
        let msg = crate::panic_message(&*payload);
        let mut f = lock(&self.failure);
        if f.is_none() {
            *f = Some(msg);
        }
        // Release: pairs with the Acquire load in `Worker::run`; the message is under its lock.
        self.failed.store(true, Ordering::Release);
    }

    /// Cancels the request: tasks not yet started are skipped (and counted as skipped).
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
        // Release: as in `fail`.
        self.failed.store(true, Ordering::Release);
    }

    pub(crate) fn complete(&self) {
        let _d = lock(&self.done);
        // Release: a waiter that sees it (Acquire) sees every effect of the request.
        self.finished.store(true, Ordering::Release);
        self.done_cv.notify_all();
    }

    /// Whether every task has ended.
    fn is_finished(&self) -> bool {
        // Acquire: pairs with the Release store in `complete`.
        self.finished.load(Ordering::Acquire)
    }

    /// Watches for completion for at most [`WATCH`] before a waiter blocks: first a few spins,
    /// then yielding the CPU between looks (so that a worker waiting for a CPU gets it). A
    /// request that ends meanwhile costs its waiter no sleep and its finisher no wake-up through
    /// the kernel, which on a virtual machine whose idle vCPU has halted is most of a small
    /// request's round trip.
    #[cfg(not(loom))]
    fn watch(&self) {
        let start = std::time::Instant::now();
        let mut looks = 0u32;
        while !self.is_finished() {
            looks += 1;
            if looks <= SPINS {
                std::hint::spin_loop();
            } else if start.elapsed() < WATCH {
                std::thread::yield_now();
            } else {
                return;
            }
        }
    }

    pub(crate) fn counters(&self) -> RequestCounters {
        // Racy while the request runs, exact once it is done.
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (spawned, deferred, skipped) = (
            r(&self.spawned),
            r(&self.spawned_deferred),
            r(&self.skipped),
        );
        // Read last: a task counted in `spawned` and not finished is pending.
        let pending = self.pending.load(Ordering::Acquire) as u64;
        RequestCounters {
            executed: spawned.saturating_sub(skipped + pending),
            spawned_immediate: spawned.saturating_sub(deferred),
            spawned_deferred: deferred,
            skipped,
            home_local: r(&self.home_local),
            home_remote: r(&self.home_remote),
        }
    }

    /// Takes `n` credits for spawns by a running task of the request (see the module docs).
    #[inline]
    pub(crate) fn take_credits(&self, n: usize) {
        // Relaxed: the running task holds a pending count itself, so `pending` cannot reach zero
        // before this increment; the completing decrement is AcqRel (see `give_back`).
        self.pending.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds a worker's gathered statistics (see the module docs). Called before its give-back.
    pub(crate) fn add_stats(&self, s: TaskStats) {
        // Relaxed: statistics, read after completion, which the give-backs order.
        for (counter, n) in [
            (&self.spawned, s.spawned),
            (&self.spawned_deferred, s.deferred),
            (&self.skipped, s.skipped),
            (&self.home_local, s.home_local),
            (&self.home_remote, s.home_remote),
        ] {
            if n > 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Gives back `credits` (at least one) held by a worker; returns whether that completed the
    /// request. After a `false`, the caller must not touch the request again.
    #[inline]
    pub(crate) fn give_back(&self, credits: usize) -> bool {
        debug_assert!(credits > 0);
        // AcqRel: every give-back's Release half happens before the final one's Acquire, so the
        // completing worker (and the waiter it wakes) sees all effects of the request's tasks.
        self.pending.fetch_sub(credits, Ordering::AcqRel) == credits
    }
}

/// A task's reference to its request: a pointer kept valid by the strong count leaked at
/// submission (see the module docs).
#[derive(Clone, Copy)]
pub(crate) struct RequestRef(NonNull<RequestInner>);

// SAFETY: a RequestRef is a shared reference to a `RequestInner`, which is Sync (atomics and
// mutexes only); sending it to another thread is sending a `&RequestInner`.
unsafe impl Send for RequestRef {}

impl RequestRef {
    /// Hands one strong count of `req` to the request's tasks.
    pub(crate) fn leak(req: &Arc<RequestInner>) -> RequestRef {
        let ptr = Arc::into_raw(req.clone()).cast_mut();
        // SAFETY: `Arc::into_raw` never returns null.
        RequestRef(unsafe { NonNull::new_unchecked(ptr) })
    }

    /// Whether both refer to the same request.
    #[inline]
    pub(crate) fn same(self, other: RequestRef) -> bool {
        self.0 == other.0
    }

    /// The request.
    #[inline]
    pub(crate) fn get(&self) -> &RequestInner {
        // SAFETY: the leaked strong count keeps the allocation alive until `release`, which only
        // the completing finisher calls after every task has finished; callers are tasks (or the
        // submitter, before the root is queued) that have not finished yet.
        unsafe { self.0.as_ref() }
    }

    /// Gives back the strong count leaked at submission. Called once, by the finisher that
    /// completed the request, after its last use of `self`.
    pub(crate) fn release(self) {
        // SAFETY: the pointer came from `Arc::into_raw` in `leak`, and this is the only place
        // that turns it back; `give_back` returns true to exactly one caller.
        drop(unsafe { Arc::from_raw(self.0.as_ptr().cast_const()) });
    }
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A task of the request panicked; the message of the first panic.
    #[error("request {id} failed: a task panicked: {message}")]
    Panicked { id: RequestId, message: String },
    /// The request was cancelled through its handle before it completed.
    #[error("request {id} was cancelled")]
    Cancelled { id: RequestId },
}

/// A handle to a submitted request: wait for it and get the value its root task returned.
pub struct RequestHandle<T> {
    pub(crate) inner: Arc<RequestInner>,
    pub(crate) slot: Arc<Mutex<Option<T>>>,
}

impl<T> fmt::Debug for RequestHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestHandle")
            .field("id", &self.inner.id)
            .field("done", &self.is_done())
            .finish()
    }
}

impl<T> RequestHandle<T> {
    /// The request's id (sequential from 0 per runtime).
    pub fn id(&self) -> RequestId {
        self.inner.id
    }

    /// Whether every task of the request has ended.
    pub fn is_done(&self) -> bool {
        self.inner.is_finished()
    }

    /// Blocks until every task of the request has ended, at most `timeout`. Returns whether it
    /// completed.
    #[cfg(not(loom))]
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut d = lock(&self.inner.done);
        while !self.inner.is_finished() {
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            d = match self.inner.done_cv.wait_timeout(d, deadline - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        true
    }

    /// Blocks until every task of the request has ended; returns the root task's value, or the
    /// message of the first panic. Before it blocks, the calling thread watches for completion
    /// for up to 50 µs, yielding its CPU between looks, so that a small request costs no sleep
    /// and wake-up through the kernel.
    ///
    /// Called from inside a task (a task waiting for another request), the worker runs other
    /// tasks while it waits, as a `join` does, instead of blocking: nested waits never leave
    /// the runtime without a worker.
    pub fn wait(self) -> Result<T, RequestError> {
        #[cfg(not(loom))]
        if !crate::join::help_until(|| self.inner.is_finished()) {
            self.inner.watch();
        }
        let mut d = lock(&self.inner.done);
        while !self.inner.is_finished() {
            d = wait(&self.inner.done_cv, d);
        }
        drop(d);
        if let Some(message) = lock(&self.inner.failure).clone() {
            return Err(RequestError::Panicked {
                id: self.inner.id,
                message,
            });
        }
        if self.inner.cancelled.load(Ordering::Relaxed) {
            return Err(RequestError::Cancelled { id: self.inner.id });
        }
        match lock(&self.slot).take() {
            Some(v) => Ok(v),
            None => Err(RequestError::Panicked {
                id: self.inner.id,
                message: "the root task did not run".into(),
            }),
        }
    }

    /// Cancels the request: its tasks that have not started yet are skipped, running ones may
    /// stop early (see [`TaskCx::request_failed`](crate::TaskCx::request_failed)); `wait` then
    /// returns [`RequestError::Cancelled`] (or the panic, if a task panicked first). Cancelling
    /// a completed request changes nothing.
    pub fn cancel(&self) {
        // Under the `done` lock, so a request that completed stays completed.
        let _d = lock(&self.inner.done);
        if !self.inner.is_finished() {
            self.inner.cancel();
        }
    }

    /// The request's counters so far.
    pub fn counters(&self) -> RequestCounters {
        self.inner.counters()
    }
}

/// What a worker gathers for the request whose credits it holds, added at its give-back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TaskStats {
    /// Tasks spawned.
    pub(crate) spawned: u64,
    /// Of them, deferred.
    pub(crate) deferred: u64,
    /// Tasks skipped because the request had failed.
    pub(crate) skipped: u64,
    /// Tasks with a data home run on their home node.
    pub(crate) home_local: u64,
    /// Tasks with a data home run on another node.
    pub(crate) home_remote: u64,
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of completion with credits (module docs, "Credits"; run with
    //! `RUSTFLAGS="--cfg loom"`). Each thread is a worker: it runs a task, records the task's
    //! effect (a Relaxed store), and gives back what it holds (the task's own count plus unspent
    //! credits); the give-back that completes the request must see every effect, and exactly one
    //! completes it. The models fail if `give_back` loses its Acquire/Release or a worker gives
    //! back more credits than it holds.
    use super::*;
    use loom::thread;

    struct World {
        req: RequestInner,
        /// Each task's effect.
        effects: [AtomicUsize; 3],
        completions: AtomicUsize,
    }

    impl World {
        fn new() -> Arc<World> {
            Arc::new(World {
                req: RequestInner::new(0),
                effects: std::array::from_fn(|_| AtomicUsize::new(0)),
                completions: AtomicUsize::new(0),
            })
        }

        /// Task `i` ends on a worker that then gives back the task's count and `credits`
        /// unspent ones.
        fn finish(&self, i: usize, credits: usize, tasks: usize) {
            // Relaxed: ordered by the AcqRel decrement that follows.
            self.effects[i].store(1, Ordering::Relaxed);
            if self.req.give_back(1 + credits) {
                for e in &self.effects[..tasks] {
                    // Relaxed: the completer's Acquire half orders these after every effect.
                    assert_eq!(
                        e.load(Ordering::Relaxed),
                        1,
                        "completed before a task ended"
                    );
                }
                self.completions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The root takes a batch of 2 credits, spawns one child (run on another thread) and gives
    /// the unspent credit back when it ends.
    #[test]
    fn root_and_child_with_an_unspent_credit() {
        loom::model(|| {
            let w = World::new();
            w.req.take_credits(2);
            let child = {
                let w = w.clone();
                thread::spawn(move || w.finish(1, 0, 2))
            };
            w.finish(0, 1, 2);
            child.join().unwrap();
            assert_eq!(w.completions.load(Ordering::Relaxed), 1);
        });
    }

    /// Held credits across tasks: worker A runs the root, which takes 2 credits and spawns two
    /// children; A runs the first itself and gives back both tasks' counts at once, while
    /// worker B runs the second.
    #[test]
    fn one_give_back_for_two_tasks() {
        loom::model(|| {
            let w = World::new();
            w.req.take_credits(2);
            let b = {
                let w = w.clone();
                thread::spawn(move || w.finish(2, 0, 3))
            };
            // Relaxed: ordered by the give-back below.
            w.effects[0].store(1, Ordering::Relaxed);
            w.finish(1, 1, 3);
            b.join().unwrap();
            assert_eq!(w.completions.load(Ordering::Relaxed), 1);
        });
    }

    /// A chain over three threads: the root spends its one credit on a child, which takes its
    /// own batch of 2, spends one on a grandchild and gives one back.
    #[test]
    fn chain_over_three_threads() {
        loom::model(|| {
            let w = World::new();
            w.req.take_credits(1);
            let child = {
                let w = w.clone();
                thread::spawn(move || {
                    w.req.take_credits(2);
                    let grandchild = {
                        let w = w.clone();
                        thread::spawn(move || w.finish(2, 0, 3))
                    };
                    w.finish(1, 1, 3);
                    grandchild.join().unwrap();
                })
            };
            w.finish(0, 0, 3);
            child.join().unwrap();
            assert_eq!(w.completions.load(Ordering::Relaxed), 1);
        });
    }
}
