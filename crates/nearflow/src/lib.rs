//! # nearflow
//!
//! A task runtime for multicore and NUMA machines whose scheduler keeps tasks near their data
//! (the LAS scheduler), with rayon's API on top and dataflow plans beside it.
//!
//! ```
//! use nearflow::prelude::*;
//!
//! // Fork-join, borrowing from the stack, as with rayon.
//! fn fib(n: u64) -> u64 {
//!     if n < 2 { return n; }
//!     let (a, b) = nearflow::join(|| fib(n - 1), || fib(n - 2));
//!     a + b
//! }
//! assert_eq!(fib(20), 6765);
//!
//! // Parallel iterators.
//! let words = vec!["near", "flow", "keeps", "tasks", "near", "data"];
//! let letters: usize = words.par_iter().map(|w| w.len()).sum();
//! assert_eq!(letters, 26);
//!
//! // A scope whose tasks write into the caller's buffers.
//! let mut lens = vec![0; words.len()];
//! nearflow::scope(|s| {
//!     for (l, w) in lens.iter_mut().zip(&words) {
//!         s.spawn(move |_| *l = w.len());
//!     }
//! });
//! assert_eq!(lens, [4, 4, 5, 5, 4, 4]);
//! ```
//!
//! ## Where to start
//!
//! | you want | use |
//! |---|---|
//! | rayon's `join`, `scope`, `par_iter` | [`join`], [`scope`], [`prelude`] — the same names and contracts; porting is a change of `use` lines |
//! | your own pool: a machine, a policy, bound threads | [`Runtime::builder`] with a [`Machine`] ([`detect_host`], [`presets`], [`from_synthetic`]) and a [`PolicyKind`]; then [`Runtime::install`] |
//! | data split per NUMA node, work dispatched to it | [`SplittableData`]; `par_iter()` over it runs each partition's work on its node |
//! | requests (queries) competing for the machine | [`Runtime::submit`], [`TaskCx`]'s immediate and deferred spawns |
//! | streaming operators with back-pressure | [`flow`] (the Bobox model: operators, envelopes, plans) |
//!
//! Runnable examples, one per entry point (`cargo run --release -p nearflow --example NAME`):
//! `quicksort` ([`join`]), `scope` ([`scope`] with immediate, deferred and homed spawns),
//! `par_iter` (the iterators, and a [`SplittableData`] homed per node), `nested` (a wait
//! inside a task that helps).
//!
//! Without a runtime of your own, [`join`], [`scope`] and the iterators use [`global`]: this
//! machine's topology under LAS. Inside [`Runtime::install`] (or any task) they use that
//! runtime.
//!
//! ## The scheduler, in one paragraph
//!
//! Workers are grouped by the caches they share (core groups) and by NUMA node. A task spawns
//! **immediate** tasks (they share its hot data: the second half of a `join`, a scope's
//! `spawn`), kept on its worker's queue, and **deferred** ones (the start of a large part of
//! the work: `spawn_deferred`, `spawn_at` a home), queued per core group and taken first by
//! nearby workers. Idle workers search nearby queues before far ones. The policy — LAS, or the
//! papers' others (NLS, Bobox 2011, FIFO+RR, central, per-thread, random stealing, mapped) —
//! is pure decision code in `nearflow-policy` that the runtime and the simulator both run.
//! A task that waits (`join`, `scope`, a request's `wait`) runs other tasks meanwhile, so
//! nested waits never leave a worker blocked.
//!
//! ## The crates
//!
//! This crate re-exports: `nearflow-rt` (the runtime), `nearflow-par` (parallel iterators),
//! `nearflow-split` (SplittableData), `nearflow-topo` (machines), `nearflow-policy` (the
//! policies) and `nearflow-flow` (dataflow plans). The SPARQL engine, the NUMA allocator, the
//! simulator and the experiments are crates of their own in the same workspace.

pub use nearflow_par as par;
pub use nearflow_policy as policy;
pub use nearflow_rt as rt;
pub use nearflow_split as split;
pub use nearflow_topo as topo;

/// Dataflow plans (the Bobox model): `nearflow-flow`.
pub use nearflow_flow as flow;

pub use nearflow_policy::{Home, PolicyKind, TaskKind};
pub use nearflow_rt::{
    current_num_threads, current_thread_index, global, join, scope, Builder, RequestError,
    RequestHandle, Runtime, Scope, TaskCx,
};
pub use nearflow_split::{SplitBy, SplittableData};
pub use nearflow_topo::{detect_host, from_synthetic, presets, Machine};

/// The parallel-iterator traits (rayon's `prelude`).
pub mod prelude {
    pub use nearflow_par::prelude::*;
}
