//! Every synchronisation primitive of the runtime comes through this module, so that the same
//! code is model-checked by loom (`RUSTFLAGS="--cfg loom" cargo test -p nearflow-rt --lib loom`, as `test.sh` runs it)
//! and runs on std otherwise (the approach of tokio's `loom` shim).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

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
