//! Every synchronisation primitive of the engine comes through this module (as in `nearflow-rt`
//! and `nearflow-alloc`), so that the protocols are model-checked by loom
//! (`RUSTFLAGS="--cfg loom" cargo test -p nearflow-flow --lib loom`, as `test.sh` runs it) with
//! the very code that runs on std otherwise:
//!
//! - the four operator states (`state.rs`, atomics);
//! - backpressure (`channel.rs`, the buffer's mutex): refuse, hold, wake the producer.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, ignoring poisoning: an operator's panic is caught before it can poison an
/// engine lock, and the data behind them stays consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Primitives of the engine's bookkeeping that no model runs (the running plan's operator
/// mutexes, error slot and statistics, sink cells: `exec.rs`, `handle.rs`, `plan.rs`): std's under loom too, named
/// here so that every primitive the crate uses is in this file.
pub(crate) mod os {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use std::sync::{Arc, Mutex, TryLockError};
}
