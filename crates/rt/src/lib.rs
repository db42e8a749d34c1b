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
//!   order, and whom a spawn wakes; this crate only executes those decisions (`worker.rs`
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
//!
//! ## Files
//!
//! - `lib.rs` — this overview, the re-exports and [`panic_message`].
//! - `config.rs` — [`Pinning`] and [`SleepBarriers`], the plain settings ([`AllocatorKind`] is
//!   `nearflow-alloc`'s).
//! - `runtime.rs` — [`Builder`] and [`Runtime`]: starting, submitting, counters, shutdown.
//! - `registry.rs` — the pool's shared state: lock-free `Registry`, and `Synced` behind one mutex.
//! - `worker.rs` — a worker's loop, task finding by the policy's search order, [`TaskCx`].
//! - `join.rs` — [`join`], [`scope`], [`Runtime::install`] and the wait that helps, for rayon
//!   users: closures that borrow from the caller's stack.
//! - `request.rs` — requests: completion counts (held credits), failure, [`RequestHandle`].
//! - `queue.rs` — the locked shared deque and the LAS/Bobox deferred queue.
//! - `sleep/` — sleeping and waking without lost wake-ups (its `README.md` has the argument).
//! - `balancer.rs` — the Bobox-2011 load balancer thread (§5.2).
//! - `counters.rs` — per-worker and per-request counters.
//! - `trace.rs` — the optional task timeline.
//! - `checks.rs` — checks that workers run on their group's node (`nearflow check placement`).
//! - `sync.rs` — the loom shim every synchronisation primitive comes through.
//! - `stress.rs` — the random-DAG stress workload (feature `stress`: tests and `nearflow stress`).

mod balancer;
#[cfg(all(not(loom), not(miri)))]
pub mod checks;
mod config;
mod counters;
mod join;
mod queue;
mod registry;
mod request;
mod ring;
mod runtime;
mod sleep;
#[cfg(feature = "stress")]
pub mod stress;
mod sync;
mod task;
mod trace;
mod worker;

pub use config::{Pinning, SleepBarriers};
pub use counters::{remote_share, RequestCounters, RuntimeCounters, WorkerCounters, MAX_RULES};
pub use join::{current_num_threads, current_thread_index, global, join, scope, Scope};
pub use nearflow_alloc::AllocatorKind;
pub use nearflow_policy::{Home, HomeError};
pub use request::{live_requests, RequestError, RequestHandle};
pub use runtime::{Builder, RtError, Runtime, DEFAULT_STACK_SIZE};
pub use trace::{TraceEvent, NO_LABEL};
pub use worker::TaskCx;

/// The message of a panic payload: the `&str` or `String` that `panic!` was given, or a
/// placeholder for any other payload (one place for the runtime and the dataflow engine).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}
