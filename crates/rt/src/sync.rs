//! Every synchronisation primitive of the runtime comes through this module, so that the same
//! code is model-checked by loom (`RUSTFLAGS="--cfg loom" cargo test -p nearflow-rt --lib loom`, as `test.sh` runs it)
//! and runs on std otherwise (the approach of tokio's `loom` shim).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering,
};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Parking a waiter (`join.rs`'s latches): loom's under loom, which has no timed park (a model
/// parks until unparked, which is what it checks: no lost wake-up); std's otherwise, where a
/// waiter parks for a bounded time and then looks for work again.
#[cfg(loom)]
pub(crate) use loom::thread::{current as current_thread, Thread};
#[cfg(not(loom))]
pub(crate) use std::thread::{current as current_thread, Thread};

/// Parks the calling thread until unparked, or (outside loom) at most `max`.
#[cfg(loom)]
pub(crate) fn park_for(_max: std::time::Duration) {
    loom::thread::park();
}

/// Parks the calling thread until unparked, or (outside loom) at most `max`.
#[cfg(not(loom))]
pub(crate) fn park_for(max: std::time::Duration) {
    std::thread::park_timeout(max);
}

/// `loom::cell::UnsafeCell` under loom (which checks every access for races); otherwise a thin
/// wrapper of std's with loom's closure-based API, so that one code path serves both.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(t: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(t))
    }
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// The lock of a deferred queue (`queue.rs`): `parking_lot`'s, whose contended path spins with
/// backoff and yields before it parks, and whose unlock makes a system call only if a thread
/// parked. Two workers taking the youngest task of one request meet on this lock once per task;
/// with it, the LAS fan-out of `bench overhead` went from 0.95–1.01× to 0.93–0.94× rayon, three
/// runs each, binaries alternated. loom's mutex under
/// loom.
pub(crate) struct QueueLock<T>(
    #[cfg(not(loom))] parking_lot::Mutex<T>,
    #[cfg(loom)] Mutex<T>,
);

impl<T> QueueLock<T> {
    pub(crate) fn new(t: T) -> Self {
        #[cfg(not(loom))]
        return QueueLock(parking_lot::Mutex::new(t));
        #[cfg(loom)]
        return QueueLock(Mutex::new(t));
    }

    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
        self.0.lock()
    }

    #[cfg(loom)]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        lock(&self.0)
    }
}

/// Primitives loom never models: the balancer's timer thread (`balancer.rs`), the trace buffer
/// (`trace.rs`, off in every model) and the process-wide count of live requests (`request.rs`,
/// a `static`, which loom's atomics cannot be). They are std's under loom too, and come through
/// here so that every primitive the crate uses is named in this file.
pub(crate) mod os {
    pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
    pub(crate) use std::sync::{Arc, Condvar, Mutex};
}

/// Locks a mutex, ignoring poisoning: no lock of the runtime is held while user code runs, so a
/// poisoned lock can only come from a bug in the runtime itself, and the data stays consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Waits on a condition variable, ignoring poisoning (see [`lock`]).
pub(crate) fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    match cv.wait(g) {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}
