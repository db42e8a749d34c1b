//! # nearflow-apps — applications on the dataflow engine
//!
//! The workloads of the papers' experiments, built on `nearflow-flow` as any user's plan would
//! be, each with a sequential reference it is checked against:
//!
//! - `vwap.rs` — VWAP bargain detection over stock ticks (StreamMap §V.A), from a generated or a
//!   real CSV(.gz) feed ([`vwap`]);
//! - `genplan.rs` — the generated plan of the concurrent-plans experiment (Bobox paper §6,
//!   Fig. 3; LAS §6.4) ([`genplan`]);
//! - `ferret/` — ferret's image-similarity search by multi-probe LSH, plain and on
//!   `SplittableData` (SplittableData paper §2.3, §3), with its pipeline as a plan ([`ferret`]);
//! - `sp2bench/` — documents of SP²Bench's shape from the data README's distributions, the
//!   input of the LAS paper's experiments (§6.1.1), and our wording of its 17 queries
//!   (`queries.rs`) ([`sp2bench`]);
//! - `matmul.rs` — the matrix product with one task per element of the queue study
//!   (`load-balancing-queues.txt` §III) ([`matmul`]);
//! - `rng.rs` — the seeded generator shared by the generated workloads ([`rng`]).
//!
//! The `examples/` directory shows the four entry points of nearflow, one small program each
//! (`cargo run --release -p nearflow-apps --example NAME`):
//!
//! - `runtime` — submitting a request, immediate and deferred tasks, counters;
//! - `custom_operator` — an operator written by hand against [`nearflow_flow::Operator`];
//! - `join` — a plan with a hash join and a two-input operator of one's own;
//! - `allocator` — the NUMA-aware allocator as the program's global allocator.
//!
//! Each takes the same command-line convention: an optional first argument, the size of its
//! input (a count of tasks, rows or blocks).

pub mod ferret;
pub mod genplan;
pub mod lois;
pub mod matmul;
pub mod rng;
pub mod sp2bench;
pub mod vwap;
