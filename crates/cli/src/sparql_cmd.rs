//! `nearflow sparql` (run a query) and `nearflow load` (build a store snapshot).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use nearflow_policy::PolicyKind;
use nearflow_rdf::snapshot;
use nearflow_rt::Pinning;
use nearflow_sparql::{self as sparql, results, Options, Plan};

use crate::args::{build_runtime, SourceArgs, TopoArgs};
use nearflow_rdf::open;

#[derive(Args, Debug, Clone)]
pub struct SparqlCmd {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub read: crate::args::ReadArgs,
    /// The query, from a file.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "expr",
        required_unless_present = "expr"
    )]
    pub query: Option<PathBuf>,
    /// The query, as text.
    #[arg(short = 'e', value_name = "TEXT")]
    pub expr: Option<String>,
    /// Output format: table, json, xml, csv, tsv (CONSTRUCT: table or csv/tsv/json/xml give
    /// N-Triples, `--turtle` Turtle).
    #[arg(long, default_value = "table")]
    pub format: results::Format,
    /// CONSTRUCT output as Turtle instead of N-Triples.
    #[arg(long)]
    pub turtle: bool,
    /// Scheduling policy of the runtime.
    #[arg(long, default_value = "las")]
    pub policy: PolicyKind,
    /// Print the plan to stderr after the run, at its three levels: the algebra as translated,
    /// after the rewrite passes, and the physical plan (operators, join methods, partitioning
    /// and exchanges, estimated and actual rows, time per operator).
    #[arg(long)]
    pub explain: bool,
    /// Print only the number of results.
    #[arg(long)]
    pub count: bool,
    /// Degree of parallelism of the parallel operators, 1..=4096 (default: the machine's PUs).
    #[arg(long, value_parser = crate::args::int_in(1usize, 4096))]
    pub dop: Option<usize>,
    /// Stop the query after this long (e.g. 30s, 250ms, 2m): its tasks stop inside the
    /// runtime and it fails with a clear message. No limit by default.
    #[arg(long, value_name = "DURATION", value_parser = crate::args::duration)]
    pub timeout: Option<std::time::Duration>,
    /// Stop the query when its operators (sorts, hash tables, DISTINCT) would hold more than
    /// this (e.g. 512MiB, 2G); the planner plans its joins to fit. Default: three quarters of
    /// this host's memory.
    #[arg(long, value_name = "SIZE", value_parser = crate::args::bytes)]
    pub memory_limit: Option<usize>,
    /// Where a hash join or a DISTINCT that would pass --memory-limit writes its rows and
    /// goes on (in unnamed files, gone when the query ends or is killed) instead of stopping
    /// the query, at most half of what the folder's disk has free when the query starts.
    /// Default: the system's temporary folder ($TMPDIR, else /tmp).
    #[arg(long, value_name = "DIR", conflicts_with = "no_spill")]
    pub spill_dir: Option<std::path::PathBuf>,
    /// Stop the query at --memory-limit rather than write rows to disk.
    #[arg(long)]
    pub no_spill: bool,
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Thread binding (only applied on the host).
    #[arg(long, default_value = "group")]
    pub pinning: Pinning,
    /// Where the store's indexes lie: `partitioned` (split by key range over the NUMA nodes,
    /// scans homed on their partition's node) or `replicated` (every node also holds a copy,
    /// built on it, and a worker reads its node's: memory ×nodes; nothing is copied on a
    /// one-node machine).
    #[arg(long, value_enum, default_value = "partitioned")]
    pub store_placement: crate::args::StorePlacementArg,
    /// Do not show load progress.
    #[arg(long)]
    pub quiet: bool,
    /// Run the query on a cluster: the workers (`nearflow worker`) serving the sharded store
    /// that --store names, as host:port,host:port… Each shard answers the query's star
    /// patterns on the worker its task is routed to; the rest of the query runs here.
    #[arg(long, value_name = "HOST:PORT[,…]", requires = "store")]
    pub cluster: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct LoadCmd {
    /// RDF files (Turtle/.n3, N-Triples, N-Quads, TriG, RDF/XML; gzip recognised; `-` is
    /// standard input): triples into the default graph, quads into their graphs.
    #[arg(required_unless_present = "named")]
    pub files: Vec<PathBuf>,
    /// Where to write the snapshot.
    #[arg(long, value_name = "STORE")]
    pub save: PathBuf,
    /// Add the files to the store already saved at --save: it is read, the files are added
    /// (their blank nodes kept apart from the store's), and the new snapshot replaces the old
    /// one atomically (the old one stays whole until then).
    #[arg(long)]
    pub add: bool,
    /// Memory the load may hold (e.g. 4GiB): a new store is loaded in sorted runs spilled to
    /// a temporary folder beside --save and merged, so a store many times larger than the
    /// budget loads in it [default: a quarter of the machine's memory]. Not with --add, which
    /// loads in memory.
    #[arg(long, value_name = "SIZE", value_parser = crate::args::bytes, conflicts_with = "add")]
    pub memory_budget: Option<usize>,
    /// Split the store into this many shards for a cluster: --save then names a new folder
    /// that gets one store per shard (each with the whole dictionary, so ids agree across
    /// shards) and a manifest.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=nearflow_rdf::shard::MAX_SHARDS as i64), conflicts_with = "add")]
    pub shards: Option<u32>,
    /// Which shard a quad goes to: `subject` (the subject's hash: every quad of a subject on
    /// one shard, so star patterns join inside a shard) or `hash` (the hash of the whole
    /// triple: even shards whatever the subjects' sizes).
    #[arg(long, value_name = "RULE", default_value = "subject", requires = "shards", value_parser = parse_shard_by)]
    pub shard_by: nearflow_rdf::shard::ShardBy,
    #[command(flatten)]
    pub read: crate::args::ReadArgs,
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Do not show progress.
    #[arg(long)]
    pub quiet: bool,
}

fn parse_shard_by(s: &str) -> Result<nearflow_rdf::shard::ShardBy, String> {
    nearflow_rdf::shard::ShardBy::from_name(s)
        .ok_or_else(|| format!("`{s}`: a shard rule is `subject` or `hash`"))
}

pub fn load(cmd: &LoadCmd) -> Result<()> {
    let inputs: Vec<PathBuf> = cmd
        .files
        .iter()
        .cloned()
        .chain(cmd.read.named.iter().map(|(_, f)| f.clone()))
        .collect();
    if cmd.shards.is_some() {
        return load_new(cmd);
    }
    snapshot::check_target(&cmd.save, &inputs)?;
    let machine = cmd.topo.load()?;
    let store = if cmd.add {
        if !cmd.save.exists() {
            bail!(
                "{}: no store to add to (without --add, `load` writes a new one)",
                cmd.save.display()
            );
        }
        // Held for writing from the read to the write: no update is lost between them.
        let db = open::open_db(&machine, &cmd.save, true, &crate::Terminal::new(cmd.quiet))?;
        let old = (*db.current()).clone();
        let store = open::add_files(
            &machine,
            old,
            &cmd.files,
            &cmd.read.options(),
            &crate::Terminal::new(cmd.quiet),
        )?;
        let t = Instant::now();
        db.rewrite(store)?;
        (db, t)
    } else {
        return load_new(cmd);
    };
    let (_db, t) = store;
    if !cmd.quiet {
        let size = std::fs::metadata(&cmd.save).map(|m| m.len()).unwrap_or(0);
        eprintln!(
            "saved {} ({:.1} MiB) in {:.2} s",
            cmd.save.display(),
            size as f64 / (1 << 20) as f64,
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// Set by the first Ctrl-C during a load (which then restores the default action, so a second
/// one ends the process at once).
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: `signal` is async-signal-safe.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
}

/// `load` of a new store: in bounded memory, straight into the snapshot; Ctrl-C stops it with
/// its temporary files removed and the previous store whole.
fn load_new(cmd: &LoadCmd) -> Result<()> {
    let budget = cmd
        .memory_budget
        .map_or_else(nearflow_rdf::bulk::default_budget, |b| b as u64);
    if budget < nearflow_rdf::bulk::MIN_BUDGET {
        bail!(
            "--memory-budget {budget}: give at least {} MiB",
            nearflow_rdf::bulk::MIN_BUDGET >> 20
        );
    }
    // SAFETY: installs a handler that only stores to an atomic and calls `signal`.
    let handler: extern "C" fn(libc::c_int) = on_interrupt;
    unsafe { libc::signal(libc::SIGINT, handler as libc::sighandler_t) };
    let t = Instant::now();
    let r = match cmd.shards {
        None => open::load_to_snapshot(
            &cmd.files,
            &cmd.read.options(),
            budget,
            &cmd.save,
            &crate::Terminal::new(cmd.quiet),
            &INTERRUPTED,
        )
        .map(|r| (r, None)),
        Some(n) => open::load_to_cluster(
            &cmd.topo.load()?,
            &cmd.files,
            &cmd.read.options(),
            budget,
            (
                &cmd.save,
                nearflow_rdf::shard::Sharding {
                    shards: n as usize,
                    by: cmd.shard_by,
                },
            ),
            &crate::Terminal::new(cmd.quiet),
            &INTERRUPTED,
        )
        .map(|(r, m)| (r, Some(m))),
    };
    // SAFETY: restores the default action.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
    let report = match r {
        Err(open::OpenError::Load(nearflow_rdf::load::LoadError::Interrupted)) => {
            bail!(
                "interrupted: nothing saved, {} as it was",
                cmd.save.display()
            )
        }
        r => r?,
    };
    let (report, manifest) = report;
    if !cmd.quiet {
        eprintln!("{}", report.summary(t.elapsed().as_secs_f64(), budget));
        match manifest {
            None => {
                let size = std::fs::metadata(&cmd.save).map_or(0, |m| m.len());
                eprintln!(
                    "saved {} ({:.1} MiB, {:.1} bytes/quad)",
                    cmd.save.display(),
                    size as f64 / (1 << 20) as f64,
                    size as f64 / report.quads.max(1) as f64
                );
            }
            Some(m) => eprintln!("{}", m.summary(&cmd.save)),
        }
    }
    Ok(())
}

pub fn run(cmd: &SparqlCmd) -> Result<()> {
    let text = match (&cmd.query, &cmd.expr) {
        (Some(f), _) => std::fs::read_to_string(f).with_context(|| format!("{}", f.display()))?,
        (None, Some(e)) => e.clone(),
        (None, None) => bail!("give a query with --query FILE or -e TEXT"),
    };
    if let Some(d) = &cmd.spill_dir {
        if !d.is_dir() {
            bail!("--spill-dir {}: not a directory", d.display());
        }
    }
    let machine = cmd.topo.load()?;
    let standard = Options::standard();
    let options = Options {
        dop: cmd.dop,
        timing: cmd.explain,
        timeout: cmd.timeout,
        memory_limit: cmd.memory_limit.or(standard.memory_limit),
        spill: match cmd.no_spill {
            true => None,
            false => cmd.spill_dir.clone().or_else(|| standard.spill.clone()),
        },
        // Relative IRIs in the query resolve against --base, else the query file's own IRI.
        base: (cmd.read.base.clone())
            .or_else(|| cmd.query.as_deref().map(nearflow_rdf::load::file_iri)),
        ..standard
    };
    // Parsed once, before the data: a syntax error does not wait for a load.
    let query = Arc::new(sparql::Query::parse(&text, &options)?);
    let cluster = match (&cmd.cluster, &cmd.source.store) {
        (Some(workers), Some(dir)) => Some(crate::cluster::connect(dir, workers, &machine)?),
        _ => None,
    };
    let store = match &cluster {
        Some(c) => c.store.clone(),
        None => {
            let source = match cmd.source.is_empty(&cmd.read) {
                false => cmd.source.source(&cmd.read)?,
                true if query.dataset_iris().is_empty() => bail!(
                    "give the data: --data FILE[,FILE…] or --store STORE (or name files in the \
                     query's FROM)"
                ),
                true => open::Source::of_dataset(query.dataset_iris(), cmd.read.options())?,
            };
            let shown = crate::Terminal::new(cmd.quiet);
            let store = Arc::new(source.open(&machine, &shown)?);
            open::place(&store, cmd.store_placement.into(), &shown)?;
            store
        }
    };
    let rt = build_runtime(
        machine,
        cmd.policy,
        cmd.pinning,
        false,
        nearflow_rt::AllocatorKind::Nearflow,
    )?;
    let started = Instant::now();
    let q = match &cluster {
        Some(c) => c.planner.plan(query, &options)?,
        None => query.plan(&store, &options),
    };
    for f in &q.query().unknown_functions {
        eprintln!(
            "warning: nearflow does not know the function <{f}>: every call of it is an error \
             (SPARQL 1.1 §17.6), so a FILTER over it is false and a BIND leaves its variable unbound"
        );
    }
    let how = sparql::Printing {
        format: cmd.format,
        count: cmd.count,
        turtle: cmd.turtle,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let (n, stats) = q.execute(&rt, None)?.print(&mut out, how)?;
    out.flush()?;
    drop(out);
    if cmd.explain {
        let policy = cmd.policy.to_string();
        eprint!("{}", q.explain_run(n, started.elapsed(), &stats, &policy));
    }
    // A mapped snapshot is checked as it is read (formats 5 and 4: each chunk before its
    // first read) or in the background (format 3); the answer is printed first, and the exit
    // waits for the background check, so that a damaged store never gives a success (a query
    // the check has already failed is refused outright).
    if let Some(d) = store.health().and_then(|h| h.settled()) {
        bail!("the store's snapshot file is damaged: {d}; the answer above may be wrong");
    }
    Ok(())
}
