//! # nearflow-lab — the experiments
//!
//! Every experiment of the five papers and every product benchmark, as library calls: each
//! takes a plain configuration struct, runs, and returns a [`Report`] — its results as data
//! (serializable; what `--json` prints) and the same results as the text tables the CLI
//! prints. Nothing here parses command lines or writes to stdout; progress bars go to stderr
//! and are hidden when a configuration says `quiet`. The `nearflow-lab` binary
//! (`crates/lab-cli`) is a thin layer over this crate (clap → config → call → print), beside
//! the product's `nearflow` binary, as DataFusion's `benchmarks/` crate sits beside
//! `datafusion-cli`; nothing of the product depends on this crate.
//!
//! - [`harness`] — interleaved rounds' statistics (median, percentiles), CSV tables, progress,
//!   the runtimes every experiment starts; [`phase`] — the host-phase probe sampled between
//!   rounds; [`chart`] — SVG bar charts.
//! - Benchmarks (`nearflow bench …`): [`overhead`], [`queues`], [`packet_size`], [`concurrent_plans`],
//!   [`alloc`], [`split`], [`sp2bench`], [`serve_load`] (`bench serve`), [`shapes`] (`bench
//!   shapes`: generated query shapes against the peers' servers), [`streammap`],
//!   [`numa_factor`], [`taskpar`] (`bench rayon`: the task-parallel set against rayon),
//!   [`checkpoint`] (what a store's checkpoint writes after N updates).
//! - [`sim`] — workloads in the discrete-event simulator (SIMULATED figures), the calibration of
//!   plan models from traced runs ([`sim::calibrate`]) and the validation of simulated graphs
//!   against real runs ([`sim::validate`]).
//! - [`map`] — StreamMap's thread mappers measured on VWAP and LOIS, the profiling run
//!   ([`map::apps`]), the simulated mapping ([`map::sim`]) and online re-mapping
//!   ([`map::online`]).

pub mod alloc;
pub mod chart;
pub mod checkpoint;
pub mod concurrent_plans;
pub mod harness;
pub mod map;
pub mod numa_factor;
pub mod overhead;
pub mod packet_size;
pub mod phase;
pub mod queues;
pub mod serve_load;
pub mod shapes;
pub mod sim;
pub mod sp2bench;
pub mod split;
pub mod streammap;
pub mod taskpar;

pub use harness::Report;

/// The unit tests allocate through the nearflow allocator, as the `nearflow` binary does: the
/// experiments' runtimes check that the allocator they name is the one in effect.
#[cfg(test)]
#[global_allocator]
static GLOBAL_ALLOCATOR: nearflow_alloc::Nearflow = nearflow_alloc::Nearflow;
