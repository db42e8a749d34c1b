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
    /// Refuse updates (`/update` and Graph Store writes answer 403) even over a store
    /// snapshot. A server over RDF files (`--data`) is always read-only.
    #[arg(long)]
    pub read_only: bool,
    /// Let an update's LOAD read files under this directory (by default LOAD reads nothing:
    /// a client must not make the server read its host's files).
    #[arg(long, value_name = "DIR")]
    pub load_dir: Option<std::path::PathBuf>,
    /// Fold the updates' delta into the sorted indexes once no update has come for this long
    /// (e.g. 2s, 100ms); it is folded at once past 65,536 changed quads.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::args::duration)]
    pub merge_idle: std::time::Duration,
    /// Write a new snapshot (and start the log afresh) once the log of updates is this long
    /// (e.g. 64MiB); a clean stop writes one too.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = crate::args::bytes)]
    pub checkpoint_size: usize,
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
    /// Where the store's indexes lie: `partitioned` (split by key range over the NUMA nodes,
    /// scans homed on their partition's node) or `replicated` (every node also holds a copy,
    /// built on it, and a worker reads its node's: memory ×nodes; nothing is copied on a
    /// one-node machine).
    #[arg(long, value_enum, default_value = "partitioned")]
    pub store_placement: crate::args::StorePlacementArg,
}

pub fn run(cmd: &ServeCmd) -> Result<()> {
    let machine = cmd.topo.load()?;
    if let Some(d) = &cmd.load_dir {
        if !d.is_dir() {
            anyhow::bail!("--load-dir {}: not a directory", d.display());
        }
    }
    let db = Arc::new(cmd.source.source(&cmd.read).open_db(
        &machine,
        !cmd.read_only,
        cmd.quiet,
        nearflow_rdf::db::Tuning {
            merge_idle: cmd.merge_idle,
            checkpoint_bytes: cmd.checkpoint_size as u64,
            ..Default::default()
        },
    )?);
    // The replicas live in the indexes every later version shares, and the background
    // merge's new indexes are replicated again.
    nearflow_lab::store::place(&db.current(), cmd.store_placement.into(), cmd.quiet)?;
    let merger = db.is_durable().then(|| db.start_merger());
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
        load: match &cmd.load_dir {
            Some(d) => nearflow_sparql::update::LoadFrom::Under(d.clone()),
            None => nearflow_sparql::update::LoadFrom::Nowhere,
        },
    };
    let limit = config.memory_limit;
    let endpoint = Endpoint::new(db.clone(), Arc::new(rt), config);
    let policy = cmd.policy;
    let quiet = cmd.quiet;
    let writes = match (db.is_writable(), db.is_durable()) {
        (true, true) => "updates at /update, each on disk before it is acknowledged",
        _ => "read-only",
    };
    let served = nearflow_serve::run(endpoint, cmd.bind, |addr| {
        eprintln!(
            "serving {} triples at http://{addr}/query (policy {policy}; {writes}); Ctrl-C stops",
            db.current().len()
        );
        if let Some(l) = limit.filter(|_| !quiet) {
            eprintln!("a query may hold {} MiB", l >> 20);
        }
    })
    .context("the server stopped");
    if let Some(m) = merger {
        db.stop_merger();
        let _ = m.join();
        if db.stats().commits + db.stats().replayed > 0 {
            // A clean stop folds the log into the snapshot: the next start replays nothing.
            db.merge(true)
                .context("writing the store's snapshot at stop")?;
            if !quiet {
                eprintln!("the store's updates are in its snapshot now");
            }
        }
    }
    served
}
