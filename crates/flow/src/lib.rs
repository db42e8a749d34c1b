//! # nearflow-flow — the dataflow engine
//!
//! A **plan** is a directed acyclic graph of **operators** connected by **streams**; operators
//! talk only through **packets** (batches of tuples of one type, sized in bytes). Each plan runs
//! as one request of the [`nearflow_rt`] runtime. After
//! `../shared/papers/task-scheduling-in-data-stream-processing.txt` (001):
//!
//! - §3: operators have any number of typed input and output ports; a packet arriving at an
//!   input schedules its operator as an **immediate** task on the sender's core; an operator
//!   with more to produce (a source) reschedules itself as a **deferred** task; see `exec.rs` and
//!   `state.rs` for the four operator states that keep an operator on one thread at a time;
//! - §5.1: input buffers are bounded; a packet sent to a full one is refused and the producer
//!   retries when the consumer makes room (see [`channel`]);
//! - §5.2 ("CPU cache support"): the default packet size is half the L2 cache of the runtime's
//!   topology ([`default_packet_bytes`]), overridable per plan;
//! - §2: parallel operators are built from serial ones by partitioning ([`parallel`]).
//!
//! End of stream flows through the graph; a plan ends when every operator has finished, which
//! happens after every sink has seen end of stream. [`PlanHandle::cancel`] stops a plan; an
//! operator that returns an error or panics stops it and [`PlanHandle::wait`] reports which
//! operator and why.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::for_runtime(&rt);
//! let orders = b.generate(10_000, |i| (i % 100, i));           // (customer, amount)
//! let big = b.filter(orders, |o: &(u64, u64)| o.1 % 3 == 0);
//! let totals = b.par_group_by(big, None, |o: &(u64, u64)| o.0, 0u64, |acc: &mut u64, o| *acc += o.1);
//! let sorted = b.sort_by_key(totals, |t: &(u64, u64)| t.0);
//! let sink = b.collect(sorted);
//! let out = b.build().unwrap().submit(&rt).wait().unwrap();
//! let totals = out.take(&sink);
//! assert_eq!(totals.len(), 100);
//! assert_eq!(totals[0].1, (0..10_000u64).filter(|i| i % 100 == 0 && i % 3 == 0).sum::<u64>());
//! assert!(out.stats.conserved() && out.stats.bounded());
//! ```

//! ## Files
//!
//! - `plan.rs` — [`PlanBuilder`], [`Plan`], [`Operator`], streams, sinks and validation.
//! - `handle.rs` — [`Plan::submit`], [`PlanHandle`] and [`PlanOutput`].
//! - `exec.rs` — a running plan: operator tasks, end of stream, failure.
//! - `state.rs` — the four scheduling states of an operator (loom-checked).
//! - `io.rs` — [`Io`], an operator's view of its inputs and outputs.
//! - `channel.rs` — bounded input buffers, refused and held packets (backpressure).
//! - `packet.rs` — [`Packet`] and packet sizes ([`default_packet_bytes`]).
//! - `stats.rs` — [`PlanStats`].
//! - `error.rs` — [`FlowError`] and [`PlanError`].
//! - `parallel.rs` — parallel operators from serial ones by partitioning.
//! - `trace.rs` — operator timelines from a runtime trace.
//! - `sync.rs` — the loom shim every synchronisation primitive comes through.
//! - `ops/` — the operator library. (The applications, VWAP and the generated plan, are in
//!   `nearflow-apps`, with the examples.)

mod account;
pub mod channel;
pub mod error;
mod exec;
mod handle;
mod io;
pub mod ops;
mod packet;
pub mod parallel;
pub mod plan;
mod state;
mod stats;
mod sync;
pub mod trace;

pub use account::Account;
pub use channel::ChanStats;
pub use error::{FlowError, PlanError};
pub use handle::{PlanHandle, PlanOutput};
pub use io::Io;
pub use ops::Emitter;
pub use packet::{
    default_packet_bytes, packet_capacity, Packet, FALLBACK_PACKET_BYTES, MAX_DEFAULT_PACKET_BYTES,
};
pub use plan::{
    Limits, Operator, OperatorId, OperatorShape, Plan, PlanBuilder, PlanShape, PortType, Sink,
    Status, Stream, DEFAULT_BUFFER_PACKETS,
};
pub use stats::{OperatorSends, PlanStats, ThreadStats};
