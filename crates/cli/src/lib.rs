//! The product commands of `nearflow`, as a library that two binaries share: `nearflow` (this
//! crate: the product alone) and `nearflow-lab` (`crates/lab-cli`: the product commands and the
//! experiments of the papers).
//!
//! - `nearflow topo` — a machine's tree, core groups and distance matrices;
//! - `nearflow run vwap|plan` — applications on the dataflow engine (`--trace FILE.svg`);
//! - `nearflow sparql`, `nearflow load` — SPARQL queries over RDF files or a store;
//! - `nearflow update` — SPARQL 1.1 Update against a store, durable when it returns;
//! - `nearflow worker` — serves a sharded store's shards to a cluster's coordinator
//!   (`nearflow-cluster`), which `nearflow sparql --cluster` is (with the `cluster` feature);
//! - `nearflow serve` — a SPARQL 1.1 Protocol endpoint over a store (`nearflow-serve`);
//! - `nearflow check placement|store` — are pages and threads on the NUMA nodes they should be?
//!   Is a store whole?
//!
//! The commands parse flags, call the library crates and print; nothing here depends on the
//! experiments (`nearflow-lab`), so installing the product builds no benchmark harness.
//!
//! ## Files
//!
//! - `args.rs` — flags several commands share (machine, store source), number parsers, the
//!   runtime a command starts.
//! - `topo_cmd.rs` — `topo`; `run_cmd.rs` — `run vwap`, `run plan`; `check_cmd.rs` —
//!   `check placement`, `check store`; `sparql_cmd.rs` — `sparql`, `load`; `serve_cmd.rs` —
//!   `serve`; `update_cmd.rs` — `update`; `cluster_cmd.rs` — `worker`. No file imports another command's file.
//! - `cluster.rs` — a coordinator connected to workers (its planner and its store) and a
//!   worker served, through `nearflow-cluster` with the `cluster` feature, else an error that
//!   says how to build it in.

// The doc comments of the argument structs are clap's `--help` text, printed verbatim, where
// hwloc's `[numa]` syntax is not a rustdoc link.
#![allow(rustdoc::broken_intra_doc_links)]

pub mod args;
mod check_cmd;
mod cluster;
mod cluster_cmd;
mod run_cmd;
mod serve_cmd;
mod sparql_cmd;
mod terminal;
mod topo_cmd;
mod update_cmd;

pub use terminal::Terminal;

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

/// The product's commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print a machine's topology: tree, core groups, cache and NUMA distances.
    Topo(topo_cmd::TopoCmd),
    /// Run an application on the dataflow engine.
    #[command(subcommand)]
    Run(run_cmd::RunCmd),
    /// Checks of this machine's behaviour (exit status 1 when one fails).
    #[command(subcommand)]
    Check(CheckCmd),
    /// Run a SPARQL query over RDF files or a store snapshot.
    Sparql(sparql_cmd::SparqlCmd),
    /// Load RDF files and save a store snapshot (`--store` of `sparql` opens it).
    Load(sparql_cmd::LoadCmd),
    /// Serve SPARQL over HTTP (the SPARQL 1.1 Protocol) from RDF files or a store snapshot.
    Serve(serve_cmd::ServeCmd),
    /// Run a SPARQL 1.1 Update request against a store snapshot (durable when it returns).
    Update(update_cmd::UpdateCmd),
    /// Serve a sharded store's shards to a cluster's coordinator (`sparql --cluster`).
    Worker(cluster_cmd::WorkerCmd),
}

/// `nearflow check …`.
#[derive(Subcommand, Debug)]
pub enum CheckCmd {
    /// Pages of the allocator and the runtime's threads are on the right NUMA nodes.
    Placement(check_cmd::PlacementCmd),
    /// A store snapshot and its log are whole: every section's checksum, every logged update.
    Store(check_cmd::StoreCheckCmd),
}

/// Runs one product command.
pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Topo(c) => topo_cmd::run(&c),
        Command::Check(CheckCmd::Placement(c)) => check_cmd::placement(&c),
        Command::Check(CheckCmd::Store(c)) => check_cmd::store(&c),
        Command::Run(run_cmd::RunCmd::Vwap(c)) => run_cmd::vwap(&c),
        Command::Run(run_cmd::RunCmd::Plan(c)) => run_cmd::plan(&c),
        Command::Sparql(c) => sparql_cmd::run(&c),
        Command::Load(c) => sparql_cmd::load(&c),
        Command::Serve(c) => {
            as_a_server();
            serve_cmd::run(&c)
        }
        Command::Update(c) => update_cmd::run(&c),
        Command::Worker(c) => {
            as_a_server();
            cluster_cmd::worker(&c)
        }
    }
}

/// A server outlives its peers: a write to a connection whose peer went away (a coordinator
/// that stopped on its memory limit, a client that closed mid-answer) fails with EPIPE, which
/// that connection handles, instead of SIGPIPE ending the process. (Writes with `writev`, as
/// HTTP/2 and gRPC make them, raise SIGPIPE where a `send` would not.)
fn as_a_server() {
    // SAFETY: sets one signal's action to "ignore"; no handler is involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// What both binaries do before parsing: output to a pipe that closed (`nearflow topo --json |
/// head`) ends the program quietly, as it ends any Unix filter, instead of a panic in
/// `println!` (Rust ignores SIGPIPE by default, so every write would fail with EPIPE); and
/// `NEARFLOW_LOG` sets what `tracing` prints on stderr (default `warn`).
pub fn init_process() {
    // SAFETY: restores the default action of one signal before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NEARFLOW_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// A command's result as the process's exit status, the error (with its causes) on stderr.
pub fn exit_status(result: Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
