//! `nearflow serve`: the SPARQL endpoint (`nearflow-serve`) over RDF files or a snapshot.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use nearflow_policy::PolicyKind;
use nearflow_rt::Pinning;
use nearflow_serve::{Config, Endpoint};

use crate::args::{build_runtime, SourceArgs, TopoArgs};

#[derive(Args, Debug, Clone)]
pub struct ServeCmd {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub read: crate::args::ReadArgs,
    /// The address to listen on (port 0: any free port, printed).
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub bind: SocketAddr,
    /// A query's time limit, and the most a request's `timeout` parameter may ask (e.g. 30s,
    /// 250ms, 2m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::args::duration)]
    pub timeout: std::time::Duration,
    /// The most a query's operators (sorts, hash tables, DISTINCT) may hold, e.g. 512MiB, 2G;
    /// past it the query fails with 503 and a message. Default: this host's memory over twice
    /// --max-running (at least 256 MiB).
    #[arg(long, value_name = "SIZE", value_parser = crate::args::bytes)]
    pub memory_limit: Option<usize>,
    /// Queries run at once (default: four per PU, at least 8); more wait their turn.
    #[arg(long, value_parser = crate::args::int_in(1usize, 4096))]
    pub max_running: Option<usize>,
    /// Queries that may wait for a turn; more are refused with 503.
    #[arg(long, default_value = "64", value_parser = crate::args::int_in(0usize, 1 << 20))]
    pub max_waiting: usize,
    /// The largest request body accepted (e.g. 1MiB); larger ones get 413.
    #[arg(long, value_name = "SIZE", default_value = "1MiB", value_parser = crate::args::bytes)]
    pub max_request: usize,
    /// How long a client may take to send a request's headers, or idle between requests,
    /// before its connection is closed (e.g. 10s).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::args::duration)]
    pub header_timeout: std::time::Duration,
    /// Threads doing HTTP I/O (queries run on the nearflow runtime, never on these).
    #[arg(long, default_value = "1", value_parser = crate::args::int_in(1usize, 64))]
    pub io_threads: usize,
    /// Scheduling policy of the runtime.
    #[arg(long, default_value = "las")]
    pub policy: PolicyKind,
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Thread binding (only applied on the host).
    #[arg(long, default_value = "group")]
    pub pinning: Pinning,
    /// Do not show load progress.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(cmd: &ServeCmd) -> Result<()> {
    let machine = cmd.topo.load()?;
    let store = Arc::new(cmd.source.source(&cmd.read).open(&machine, cmd.quiet)?);
    let pus = machine.pu_count();
    let rt = build_runtime(
        machine,
        cmd.policy,
        cmd.pinning,
        false,
        nearflow_rt::AllocatorKind::Nearflow,
    )?;
    let max_running = cmd.max_running.unwrap_or(Config::for_pus(pus).max_running);
    let config = Config {
        timeout: cmd.timeout,
        memory_limit: cmd
            .memory_limit
            .or_else(|| Config::memory_limit_for(max_running)),
        max_running,
        max_waiting: cmd.max_waiting,
        max_request_bytes: cmd.max_request,
        io_threads: cmd.io_threads,
        header_timeout: cmd.header_timeout,
    };
    let limit = config.memory_limit;
    let endpoint = Endpoint::new(store.clone(), Arc::new(rt), config);
    let policy = cmd.policy;
    let quiet = cmd.quiet;
    nearflow_serve::run(endpoint, cmd.bind, |addr| {
        eprintln!(
            "serving {} triples at http://{addr}/query (policy {policy}); Ctrl-C stops",
            store.len()
        );
        if let Some(l) = limit.filter(|_| !quiet) {
            eprintln!("a query may hold {} MiB", l >> 20);
        }
    })
    .context("the server stopped")
}
