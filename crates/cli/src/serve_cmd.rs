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
    /// Answer over a cluster: the workers (`nearflow worker`) serving the sharded store that
    /// --store names, as host:port,host:port… (read-only; the Graph Store Protocol serves the
    /// default graph only).
    #[arg(long, value_name = "HOST:PORT[,…]", requires = "store")]
    pub cluster: Option<String>,
    /// A query's time limit, and the most a request's `timeout` parameter may ask (e.g. 30s,
    /// 250ms, 2m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::args::duration)]
    pub timeout: std::time::Duration,
    /// The most a query's operators (sorts, hash tables, DISTINCT) may hold, e.g. 512MiB, 2G;
    /// past it the query fails with 503 and a message. Default: this host's memory over twice
    /// --max-running (at least 256 MiB).
    #[arg(long, value_name = "SIZE", value_parser = crate::args::bytes)]
    pub memory_limit: Option<usize>,
    /// Where a query's hash join or DISTINCT that would pass --memory-limit writes its rows
    /// and goes on (unnamed files, gone when the query ends); the queries that may run at once
    /// share half of what the folder's disk has free. Default: the system's temporary folder
    /// ($TMPDIR, else /tmp).
    #[arg(long, value_name = "DIR", conflicts_with = "no_spill")]
    pub spill_dir: Option<std::path::PathBuf>,
    /// Stop a query at --memory-limit rather than write rows to disk.
    #[arg(long)]
    pub no_spill: bool,
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
    /// How long a request's body may take to arrive whole (e.g. 30s); past it the request
    /// gets 408 and its connection is closed.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::args::duration)]
    pub body_timeout: std::time::Duration,
    /// Connections open at once; at the cap the oldest idle one is closed to make room.
    #[arg(long, default_value = "512", value_parser = crate::args::int_in(1usize, 1 << 20))]
    pub max_connections: usize,
    /// Refuse updates (`/update` and Graph Store writes answer 403) even over a store
    /// snapshot. A server over RDF files (`--data`) is always read-only.
    #[arg(long)]
    pub read_only: bool,
    /// Let pages of these origins (scheme://host[:port]) read answers and, with the token
    /// where one is needed, write; `*` lets every page read (never write). By default no page
    /// of another origin may read an answer or write.
    #[arg(long, value_name = "ORIGIN", num_args = 1.., value_parser = cors_origin)]
    pub cors: Vec<String>,
    /// A file holding the token every write (update, Graph Store write) must carry as
    /// `Authorization: Bearer TOKEN` (at least 16 characters). Without it a server bound
    /// beyond loopback takes no writes.
    #[arg(long, value_name = "FILE")]
    pub write_token_file: Option<std::path::PathBuf>,
    /// A host name, besides localhost and the loopback addresses, that a server bound to
    /// loopback answers to (the `Host` header of other names is refused: DNS rebinding).
    #[arg(long, value_name = "NAME")]
    pub allow_host: Vec<String>,
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
    /// A store whose snapshot holds at least this many quads is not merged in memory: the
    /// updates' delta stays beside its mapped indexes, and a checkpoint writes the delta as a
    /// segment beside the snapshot (`STORE.delta`), until it reaches 4,194,304 quads or an
    /// eighth of the snapshot, when the snapshot is written again.
    #[arg(long, value_name = "N", default_value_t = nearflow_rdf::db::Tuning::default().segment_min_quads)]
    pub segment_min_quads: u64,
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

fn cors_origin(s: &str) -> Result<String, String> {
    nearflow_serve::Access::check_origin(s)
}

pub fn run(cmd: &ServeCmd) -> Result<()> {
    let machine = cmd.topo.load()?;
    let access = nearflow_serve::Access {
        cors: cmd.cors.clone(),
        write_token: cmd
            .write_token_file
            .as_deref()
            .map(nearflow_serve::Access::read_token)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--write-token-file {e}"))?,
        bind: Some(cmd.bind),
        hosts: cmd.allow_host.clone(),
    };
    if let Some(d) = &cmd.load_dir {
        if !d.is_dir() {
            anyhow::bail!("--load-dir {}: not a directory", d.display());
        }
    }
    if let Some(d) = &cmd.spill_dir {
        if !d.is_dir() {
            anyhow::bail!("--spill-dir {}: not a directory", d.display());
        }
    }
    let tuning = nearflow_rdf::db::Tuning {
        merge_idle: cmd.merge_idle,
        checkpoint_bytes: cmd.checkpoint_size as u64,
        segment_min_quads: cmd.segment_min_quads,
        ..Default::default()
    };
    // Over a cluster the endpoint's store is one shard, opened read-only for its dictionary;
    // the coordinator plans every query.
    let cluster = match (&cmd.cluster, &cmd.source.store) {
        (Some(workers), Some(dir)) => Some(crate::cluster::connect(dir, workers, &machine)?),
        _ => None,
    };
    let db = Arc::new(match &cluster {
        Some(c) => nearflow_rdf::open::open_db_tuned(
            &machine,
            &nearflow_rdf::shard::Manifest::shard_path(&c.dir, 0),
            false,
            &nearflow_rdf::open::Silent,
            tuning,
        )?,
        None => cmd.source.source(&cmd.read)?.open_db(
            &machine,
            !cmd.read_only,
            &crate::Terminal::new(cmd.quiet),
            tuning,
        )?,
    });
    // The replicas live in the indexes every later version shares, and the background
    // merge's new indexes are replicated again.
    nearflow_rdf::open::place(
        &db.current(),
        cmd.store_placement.into(),
        &crate::Terminal::new(cmd.quiet),
    )?;
    // The background merge runs from here on, the updates replayed at open folded while the
    // server starts; a clean stop checkpoints the log.
    let (served, checkpointed) = db
        .serving(|| serve(cmd, machine, access, &db, cluster))
        .context("writing the store's snapshot at stop")?;
    if checkpointed && !cmd.quiet {
        eprintln!("the store's updates are in its snapshot now");
    }
    served
}

/// Builds the runtime and the endpoint over `db` (or over a cluster's workers) and serves
/// until stopped.
fn serve(
    cmd: &ServeCmd,
    machine: nearflow_topo::Machine,
    access: nearflow_serve::Access,
    db: &Arc<nearflow_rdf::db::Db>,
    cluster: Option<crate::cluster::Cluster>,
) -> Result<()> {
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
        spill: match cmd.no_spill {
            true => None,
            false => cmd.spill_dir.clone().or_else(|| Config::for_pus(pus).spill),
        },
        max_running,
        max_waiting: cmd.max_waiting,
        max_request_bytes: cmd.max_request,
        io_threads: cmd.io_threads,
        header_timeout: cmd.header_timeout,
        body_timeout: cmd.body_timeout,
        max_connections: cmd.max_connections,
        load: match &cmd.load_dir {
            Some(d) => nearflow_sparql::update::LoadFrom::Under(d.clone()),
            None => nearflow_sparql::update::LoadFrom::Nowhere,
        },
        access,
    };
    let limit = config.memory_limit;
    let triples = match &cluster {
        Some(c) => c.triples,
        None => db.current().len(),
    };
    let endpoint = match cluster {
        Some(c) => Endpoint::with_planner(db.clone(), Arc::new(rt), config, c.planner),
        None => Endpoint::new(db.clone(), Arc::new(rt), config),
    };
    let policy = cmd.policy;
    let quiet = cmd.quiet;
    let writes = match (db.is_writable(), db.is_durable()) {
        (true, true) => "updates at /update, each on disk before it is acknowledged",
        _ => "read-only",
    };
    for line in endpoint
        .config()
        .access
        .said(db.is_writable() && db.is_durable())
    {
        eprintln!("{line}");
    }
    nearflow_serve::run(endpoint, cmd.bind, |addr| {
        eprintln!(
            "serving {triples} triples at http://{addr}/query (policy {policy}; {writes}); Ctrl-C stops"
        );
        if let Some(l) = limit.filter(|_| !quiet) {
            eprintln!("a query may hold {} MiB", l >> 20);
        }
    })
    .context("the server stopped")
}
