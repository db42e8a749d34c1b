//! Opening a store: RDF files loaded with a progress bar, or a snapshot, with the time it took
//! on stderr (as `nearflow sparql`, `bench sp2bench` and `sim --workload sp2bench` do).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use nearflow_rdf::db::{Db, Tuning};
use nearflow_rdf::{load, Store};

/// Where a store's indexes lie over the NUMA nodes (issue 37, item 6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StorePlacement {
    /// Each permutation split by key range over the nodes, one partition per node, each scan
    /// homed on its partition's node (one predicate's rows lie on one node): no memory beyond
    /// the indexes themselves.
    #[default]
    Partitioned,
    /// Besides the partitions, every node holds a copy of every permutation, built on it
    /// ([`Store::replicate`]); scans and joins read the copy of the node whose worker runs them
    /// and have no home, so a request's work can stay on one node. Memory: the permutations'
    /// columns once more per extra node (36 bytes a quad each). On a one-node machine nothing
    /// is copied.
    Replicated,
}

/// Gives `store` the placement `placement` (the replicas of [`StorePlacement::Replicated`]),
/// saying on stderr, unless `quiet`, what it cost.
pub fn place(store: &Store, placement: StorePlacement, quiet: bool) -> Result<()> {
    if placement == StorePlacement::Partitioned {
        return Ok(());
    }
    let t = Instant::now();
    let what = store.replicate()?;
    if !quiet {
        match what {
            nearflow_rdf::replica::Replication::Built { nodes, bytes } => eprintln!(
                "replicated the indexes on {nodes} NUMA nodes in {:.2} s: {:.1} MiB ({:.1} MiB per node)",
                t.elapsed().as_secs_f64(),
                bytes as f64 / (1 << 20) as f64,
                bytes as f64 / (1 << 20) as f64 / nodes as f64
            ),
            nearflow_rdf::replica::Replication::OneNode => eprintln!(
                "--store-placement replicated: the machine has one NUMA node, whose partitions \
                 are the whole indexes already; nothing copied"
            ),
            nearflow_rdf::replica::Replication::Already => {}
        }
    }
    Ok(())
}

/// Loads files (`-` is standard input) with a progress bar on stderr; prints triples/s at the
/// end.
pub fn load_files(
    machine: &nearflow_topo::Machine,
    files: &[PathBuf],
    options: &load::LoadOptions,
    quiet: bool,
) -> Result<Store> {
    load_onto(machine, load::Loaded::default(), files, options, quiet)
}

/// `store` with `files` added (as [`load_files`] reads them); the files' blank nodes stay
/// apart from the store's.
pub fn add_files(
    machine: &nearflow_topo::Machine,
    store: Store,
    files: &[PathBuf],
    options: &load::LoadOptions,
    quiet: bool,
) -> Result<Store> {
    let before = store.len();
    let onto = load::Loaded::of_store(store);
    let store = load_onto(machine, onto, files, options, quiet)?;
    if !quiet {
        eprintln!(
            "the store held {before} triples and holds {} now",
            store.len()
        );
    }
    Ok(store)
}

fn load_onto(
    machine: &nearflow_topo::Machine,
    onto: load::Loaded,
    files: &[PathBuf],
    options: &load::LoadOptions,
    quiet: bool,
) -> Result<Store> {
    let all = || files.iter().chain(options.named.iter().map(|(_, f)| f));
    for f in all() {
        if f.as_os_str() != "-" && !f.exists() {
            bail!("{}: no such file", f.display());
        }
    }
    if all().filter(|f| f.as_os_str() == "-").count() > 1 {
        bail!("standard input (`-`) can be read once");
    }
    let progress = Arc::new(load::Progress::default());
    let started = Instant::now();
    let bar = (!quiet).then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template("loading {bar:30} {bytes}/{total_bytes} {msg}")
                .expect("a valid template"),
        );
        b
    });
    let loaded = std::thread::scope(|s| {
        let p = progress.clone();
        let main = std::thread::current();
        let worker = s.spawn(move || {
            let r = load::load_files_onto(onto, files, options, &p);
            // Wakes the progress loop at once: a small file is not kept waiting for its tick.
            main.unpark();
            r
        });
        while !worker.is_finished() {
            if let Some(b) = &bar {
                b.set_length(progress.bytes_total.load(Ordering::Relaxed));
                b.set_position(progress.bytes_read.load(Ordering::Relaxed));
                b.set_message(format!(
                    "{} triples",
                    progress.triples.load(Ordering::Relaxed)
                ));
            }
            std::thread::park_timeout(Duration::from_millis(100));
        }
        worker.join().expect("the loader does not panic")
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let loaded = loaded?;
    let parsed = started.elapsed();
    let store = loaded.into_store(machine)?;
    let total = started.elapsed();
    if !quiet {
        eprintln!(
            "loaded {} triples{} ({} terms) in {:.2} s (parse+encode {:.2} s, indexes {:.2} s): {:.0} triples/s, {:.1} bytes/triple resident",
            store.len(),
            match store.named_graphs().count() {
                0 => String::new(),
                n => format!(" in the default graph and {n} named graph{}", if n == 1 { "" } else { "s" }),
            },
            store.dict().len(),
            total.as_secs_f64(),
            parsed.as_secs_f64(),
            (total - parsed).as_secs_f64(),
            store.len() as f64 / total.as_secs_f64(),
            store.heap_bytes() as f64 / (store.len().max(1)) as f64
        );
    }
    Ok(store)
}

/// Opens a snapshot with the updates of its log, reporting the time.
pub fn open_store(machine: &nearflow_topo::Machine, path: &Path, quiet: bool) -> Result<Store> {
    Ok((*open_db(machine, path, false, quiet)?.current()).clone())
}

/// Opens a store (its snapshot and its log of updates: `nearflow_rdf::db`), for writing when
/// `writable`, reporting the time and what the log held.
pub fn open_db(
    machine: &nearflow_topo::Machine,
    path: &Path,
    writable: bool,
    quiet: bool,
) -> Result<Db> {
    open_db_tuned(machine, path, writable, quiet, Tuning::default())
}

/// [`open_db`] with the background merge and checkpoints set by `tuning`.
pub fn open_db_tuned(
    machine: &nearflow_topo::Machine,
    path: &Path,
    writable: bool,
    quiet: bool,
    tuning: Tuning,
) -> Result<Db> {
    let t = Instant::now();
    let db = Db::open_tuned(path, machine, writable, tuning)?;
    if !quiet {
        let st = db.stats();
        let log = match (st.replayed, st.dropped_bytes) {
            (0, 0) => String::new(),
            (n, 0) => format!(", {n} logged update{} replayed", if n == 1 { "" } else { "s" }),
            (n, d) => format!(
                ", {n} logged update{} replayed, a last record cut short by a crash ({d} bytes, never acknowledged) dropped",
                if n == 1 { "" } else { "s" }
            ),
        };
        eprintln!(
            "opened {} ({} triples{log}) in {:.2} s",
            path.display(),
            db.current().len(),
            t.elapsed().as_secs_f64()
        );
    }
    Ok(db)
}

/// Where a store comes from: RDF files to load, or a snapshot.
#[derive(Debug, Clone)]
pub enum Source {
    /// RDF files (Turtle/.n3, N-Triples, N-Quads, TriG, RDF/XML; gzip recognised; `-` is
    /// standard input), with the base IRI and format to read them with.
    Files(Vec<PathBuf>, load::LoadOptions),
    /// A snapshot written by `nearflow load … --save`.
    Snapshot(PathBuf),
}

impl Source {
    /// The store this source names as a [`Db`]: a snapshot opened with its log (for writing
    /// when `writable`), or RDF files loaded into memory, read-only.
    pub fn open_db(
        &self,
        machine: &nearflow_topo::Machine,
        writable: bool,
        quiet: bool,
        tuning: Tuning,
    ) -> Result<Db> {
        match self {
            Source::Snapshot(p) => open_db_tuned(machine, p, writable, quiet, tuning),
            Source::Files(files, options) => {
                Ok(Db::read_only(load_files(machine, files, options, quiet)?))
            }
        }
    }

    /// The store this source names, on `machine`, reporting progress and time on stderr
    /// unless `quiet`.
    pub fn open(&self, machine: &nearflow_topo::Machine, quiet: bool) -> Result<Store> {
        match self {
            Source::Snapshot(p) => open_store(machine, p, quiet),
            Source::Files(files, options) => load_files(machine, files, options, quiet),
        }
    }
}

/// Triples of the generated SP²Bench document the replica check builds its store from.
const CHECK_TRIPLES: u64 = 60_000;

/// The placement check of a replicated store (issue 37, item 6), for `nearflow check placement`
/// and so for the two-node QEMU guest: a store of a generated SP²Bench document built for this
/// host and replicated; every replica's pages must lie on the node it was built for, and
/// SP²Bench q2 (its scans, hash joins and an index join) on a LAS runtime bound by core group must read no index row
/// from another node's memory (the runtime's check says each worker runs on the node it
/// counts). On one node nothing is copied, which the check says.
pub fn replicas_on_their_nodes(host: &nearflow_topo::Machine) -> nearflow_alloc::placement::Check {
    let name = "store replicas are on their nodes and a query reads its workers' own".to_string();
    match check_replicas(host) {
        Ok((ok, detail)) => nearflow_alloc::placement::Check { name, ok, detail },
        Err(e) => nearflow_alloc::placement::Check {
            name,
            ok: false,
            detail: format!("{e:#}"),
        },
    }
}

fn check_replicas(host: &nearflow_topo::Machine) -> Result<(bool, String)> {
    use nearflow_rdf::replica::Replication;
    let mut doc = Vec::new();
    nearflow_apps::sp2bench::generate(CHECK_TRIPLES, 1, &mut doc)?;
    let mut loaded = load::Loaded::default();
    load::load_reader(
        &mut loaded,
        Path::new("generated.n3"),
        load::Format::Turtle,
        &doc[..],
        "",
    )?;
    let store = Arc::new(loaded.into_store(host)?);
    let (nodes, bytes) = match store.replicate()? {
        Replication::Built { nodes, bytes } => (nodes, bytes),
        Replication::OneNode => {
            return Ok((
                true,
                "one NUMA node: its partitions are the whole indexes, nothing to replicate".into(),
            ))
        }
        Replication::Already => bail!("a fresh store was already replicated"),
    };
    let mut ok = true;
    let mut detail = vec![format!(
        "{} quads, {nodes} replicas of 3 permutations, {:.1} MiB",
        store.len(),
        bytes as f64 / (1 << 20) as f64
    )];
    for (info, placed, cols) in store.replica_map().expect("replicated above") {
        // Pages per node, column by column.
        let mut census: Vec<(i32, usize)> = Vec::new();
        for c in cols {
            census.extend(nearflow_alloc::placement::page_census(
                c.as_ptr().cast(),
                std::mem::size_of_val(c),
            )?);
        }
        let right = placed == nearflow_split::Placed::Bound
            && census.iter().all(|&(n, _)| n == info.node as i32);
        ok &= right;
        if !right {
            detail.push(format!(
                "replica of node {}: {placed:?}, pages per node {census:?}",
                info.node
            ));
        }
    }
    let rt = nearflow_rt::Runtime::builder(host.clone())
        .policy(nearflow_policy::PolicyKind::Las)
        .pinning(nearflow_rt::Pinning::Group)
        .build()?;
    let text = nearflow_apps::sp2bench::queries::text("q2")
        .ok_or_else(|| anyhow::anyhow!("q2 is one of the SP²Bench queries"))?;
    let q = nearflow_sparql::prepare(&store, &text, &Default::default())?;
    let rows = q.run_collect(&rt)?.rows.len();
    let (reads, remote) = q.index_reads();
    ok &= reads > 0 && remote == 0;
    detail.push(format!(
        "q2: {rows} rows, {reads} index reads, {remote} from another node's memory"
    ));
    Ok((ok, detail.join("; ")))
}
