//! Opening a store as a program does: RDF files loaded, or a snapshot with its log, then placed
//! over the NUMA nodes; how far a long step is and what it took are told to the caller's
//! [`Report`] (the command line draws a progress bar and prints the lines; [`Silent`] shows
//! nothing). The command line, the endpoint's command and the benchmarks all open stores here.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::{Db, DbError, Tuning};
use crate::load::{self, LoadError};
use crate::replica::Replication;
use crate::store::StoreError;
use crate::Store;

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A file named does not exist.
    #[error("{0}: no such file")]
    NoSuchFile(PathBuf),
    /// Standard input named twice.
    #[error("standard input (`-`) can be read once")]
    StdinTwice,
    /// Loading RDF files failed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Opening a snapshot and its log failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// Building or replicating the indexes failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A cluster's folder named where one store is opened.
    #[error(
        "{0}: a folder of {1} shards, not one store: query the shards as one through a cluster's workers, or a shard alone as a store ({0}/shard-0.store…)"
    )]
    Cluster(PathBuf, usize),
    /// A dataset IRI that names no local file.
    #[error("{0}")]
    NoData(String),
    /// A shard of a cluster opened for writing.
    #[error(
        "{0}: a shard of a cluster; changed on its own it would give new terms ids the other shards do not share, so it opens read-only, and a cluster does not yet take updates"
    )]
    ShardWrite(PathBuf),
    /// Writing a cluster's shards failed.
    #[error(transparent)]
    Shard(#[from] crate::shard::ShardError),
}

type Result<T, E = OpenError> = std::result::Result<T, E>;

/// What opening or loading a store tells its caller as it goes, for a program to show.
pub trait Report: Sync {
    /// How far a long step is: told about ten times a second while it runs.
    fn progress(&self, _step: &Step<'_>) {}
    /// The long step ended (a progress bar goes).
    fn finished(&self) {}
    /// A line for the user: what was opened, loaded or removed, in what time.
    fn say(&self, _line: &str) {}
}

/// A long step's progress, as [`Report::progress`] gets it.
#[derive(Debug)]
pub struct Step<'a> {
    /// What it is doing: `loading`, a pass of the bounded-memory load
    /// ([`STAGES`](crate::bulk::STAGES)), `writing shards`.
    pub name: &'a str,
    /// Whether `done` and `total` count bytes (else items: rows, terms, shards).
    pub bytes: bool,
    /// How far it is.
    pub done: u64,
    /// Of how much (0 while not known).
    pub total: u64,
    /// What else there is to say (the triples read so far).
    pub message: Option<String>,
}

/// A [`Report`] that shows nothing.
pub struct Silent;

impl Report for Silent {}

/// Where a store's indexes lie over the NUMA nodes.
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
/// telling `report` what it cost.
pub fn place(store: &Store, placement: StorePlacement, report: &dyn Report) -> Result<()> {
    if placement == StorePlacement::Partitioned {
        return Ok(());
    }
    let t = Instant::now();
    let what = store.replicate()?;
    match what {
        Replication::Built { nodes, bytes } => report.say(&format!(
            "replicated the indexes on {nodes} NUMA nodes in {:.2} s: {:.1} MiB ({:.1} MiB per node)",
            t.elapsed().as_secs_f64(),
            bytes as f64 / (1 << 20) as f64,
            bytes as f64 / (1 << 20) as f64 / nodes as f64
        )),
        Replication::OneNode => report.say(
            "replicated placement: the machine has one NUMA node, whose partitions are the \
             whole indexes already; nothing copied",
        ),
        Replication::Already => {}
    }
    Ok(())
}

/// Loads files (`-` is standard input), telling `report` how far it is and, at the end, the
/// triples a second.
pub fn load_files(
    machine: &nearflow_topo::Machine,
    files: &[PathBuf],
    options: &load::LoadOptions,
    report: &dyn Report,
) -> Result<Store> {
    load_onto(machine, load::Loaded::default(), files, options, report)
}

/// `store` with `files` added (as [`load_files`] reads them); the files' blank nodes stay
/// apart from the store's.
pub fn add_files(
    machine: &nearflow_topo::Machine,
    store: Store,
    files: &[PathBuf],
    options: &load::LoadOptions,
    report: &dyn Report,
) -> Result<Store> {
    let before = store.len();
    let onto = load::Loaded::of_store(store);
    let store = load_onto(machine, onto, files, options, report)?;
    report.say(&format!(
        "the store held {before} triples and holds {} now",
        store.len()
    ));
    Ok(store)
}

fn load_onto(
    machine: &nearflow_topo::Machine,
    onto: load::Loaded,
    files: &[PathBuf],
    options: &load::LoadOptions,
    report: &dyn Report,
) -> Result<Store> {
    check_inputs(files, options)?;
    let progress = Arc::new(load::Progress::default());
    let started = Instant::now();
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
            report.progress(&parsing("loading", &progress));
            std::thread::park_timeout(Duration::from_millis(100));
        }
        worker.join().expect("the loader does not panic")
    });
    report.finished();
    let loaded = loaded?;
    let parsed = started.elapsed();
    let store = loaded.into_store(machine)?;
    let total = started.elapsed();
    {
        report.say(&format!(
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
        ));
    }
    Ok(store)
}

/// Loads `files` straight into a snapshot at `target` in about `budget` bytes of memory
/// (`bulk.rs`), the store's log started afresh, telling `report` how far it is (bytes while
/// parsing, then each pass's work); `cancel`, once
/// set (by a Ctrl-C handler), stops the load with [`LoadError::Interrupted`], its temporary
/// files removed and the previous store whole.
pub fn load_to_snapshot(
    files: &[PathBuf],
    options: &load::LoadOptions,
    budget: u64,
    target: &Path,
    report: &dyn Report,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<crate::bulk::BulkReport> {
    check_inputs(files, options)?;
    let progress = Arc::new(load::Progress::default());
    let stage = crate::bulk::Stage::default();
    std::thread::scope(|s| {
        let main = std::thread::current();
        let (progress, stage) = (&progress, &stage);
        let worker = s.spawn(move || {
            let r = Db::replace_by(target, || {
                let stale = crate::bulk::TempDir::remove_stale(target);
                if stale > 0 {
                    report.say(&format!(
                        "removed {stale} temporary folder(s) of an earlier load that was killed"
                    ));
                }
                crate::bulk::load_to_snapshot(files, options, budget, target, progress, stage)
                    .map_err(OpenError::from)
            });
            main.unpark();
            r
        });
        while !worker.is_finished() {
            if cancel.load(Ordering::Relaxed) {
                progress.cancel.store(true, Ordering::Relaxed);
            }
            let i = stage.index.load(Ordering::Relaxed);
            report.progress(&if i == 0 {
                parsing(crate::bulk::STAGES[0], progress)
            } else {
                Step {
                    name: crate::bulk::STAGES[i],
                    bytes: false,
                    done: stage.done.load(Ordering::Relaxed),
                    total: stage.total.load(Ordering::Relaxed),
                    message: None,
                }
            });
            std::thread::park_timeout(Duration::from_millis(100));
        }
        report.finished();
        worker.join().expect("the loader does not panic")
    })
}

/// [`load_to_snapshot`] of a store split by `sharding` into shards in the folder `dir`
/// (`shard.rs`): the files are loaded into one snapshot in a temporary file beside `dir`, in
/// bounded memory, which is then cut into the shards and removed. The disk holds the whole
/// store twice at the end of the load, once whole and once in shards.
pub fn load_to_cluster(
    machine: &nearflow_topo::Machine,
    files: &[PathBuf],
    options: &load::LoadOptions,
    budget: u64,
    (dir, sharding): (&Path, crate::shard::Sharding),
    report: &dyn Report,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<(crate::bulk::BulkReport, crate::shard::Manifest)> {
    crate::shard::check_target(dir)?;
    let stale = crate::shard::remove_stale(dir);
    if stale > 0 {
        report.say(&format!(
            "removed {stale} temporary file(s) of an earlier load that was killed"
        ));
    }
    let mut name = std::ffi::OsString::from(".");
    name.push(dir.file_name().unwrap_or_default());
    name.push(format!(".whole.{}.tmp", std::process::id()));
    let whole = dir.with_file_name(name);
    struct Remove<'a>(&'a Path);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            for f in [
                self.0.to_owned(),
                crate::db::log_path(self.0),
                crate::db::lock_path(self.0),
                crate::db::acked_path(self.0),
            ] {
                let _ = std::fs::remove_file(f);
            }
        }
    }
    let _remove = Remove(&whole);
    let bulk = load_to_snapshot(files, options, budget, &whole, report, cancel)?;
    if cancel.load(Ordering::Relaxed) {
        return Err(LoadError::Interrupted.into());
    }
    let store = crate::snapshot::open(&whole, machine).map_err(DbError::from)?;
    let mut written = 0;
    let manifest = crate::shard::write_shards(&store, dir, sharding, |_| {
        written += 1;
        report.progress(&Step {
            name: "writing shards",
            bytes: false,
            done: written,
            total: sharding.shards as u64,
            message: None,
        });
        !cancel.load(Ordering::Relaxed)
    })
    .map_err(|e| match e {
        crate::shard::ShardError::Interrupted => OpenError::Load(LoadError::Interrupted),
        e => e.into(),
    })?;
    report.finished();
    Ok((bulk, manifest))
}

/// The progress of a step that reads input files: their bytes, and the triples so far.
fn parsing<'a>(name: &'a str, progress: &load::Progress) -> Step<'a> {
    Step {
        name,
        bytes: true,
        done: progress.bytes_read.load(Ordering::Relaxed),
        total: progress.bytes_total.load(Ordering::Relaxed),
        message: Some(format!(
            "{} triples",
            progress.triples.load(Ordering::Relaxed)
        )),
    }
}

/// Refuses a missing file, or standard input named twice, before anything is read.
fn check_inputs(files: &[PathBuf], options: &load::LoadOptions) -> Result<()> {
    let all = || files.iter().chain(options.named.iter().map(|(_, f)| f));
    for f in all() {
        if f.as_os_str() != "-" && !f.exists() {
            return Err(OpenError::NoSuchFile(f.clone()));
        }
    }
    if all().filter(|f| f.as_os_str() == "-").count() > 1 {
        return Err(OpenError::StdinTwice);
    }
    Ok(())
}

/// Opens a snapshot with the updates of its log, reporting the time.
pub fn open_store(
    machine: &nearflow_topo::Machine,
    path: &Path,
    report: &dyn Report,
) -> Result<Store> {
    Ok((*open_db(machine, path, false, report)?.current()).clone())
}

/// Opens a store (its snapshot and its log of updates: `nearflow_rdf::db`), for writing when
/// `writable`, reporting the time and what the log held.
pub fn open_db(
    machine: &nearflow_topo::Machine,
    path: &Path,
    writable: bool,
    report: &dyn Report,
) -> Result<Db> {
    open_db_tuned(machine, path, writable, report, Tuning::default())
}

/// [`open_db`] with the background merge and checkpoints set by `tuning`.
pub fn open_db_tuned(
    machine: &nearflow_topo::Machine,
    path: &Path,
    writable: bool,
    report: &dyn Report,
    tuning: Tuning,
) -> Result<Db> {
    if path.join(crate::shard::MANIFEST).is_file() {
        let shards = crate::shard::Manifest::read(path)?.sharding.shards;
        return Err(OpenError::Cluster(path.to_owned(), shards));
    }
    if writable && crate::shard::is_shard(path) {
        return Err(OpenError::ShardWrite(path.to_owned()));
    }
    let t = Instant::now();
    let db = Db::open_tuned(path, machine, writable, tuning)?;
    {
        let st = db.stats();
        let log = match (st.replayed, st.dropped_bytes) {
            (0, 0) => String::new(),
            (n, 0) => format!(", {n} logged update{} replayed", if n == 1 { "" } else { "s" }),
            (n, d) => format!(
                ", {n} logged update{} replayed, a last record cut short by a crash ({d} bytes, never acknowledged) dropped",
                if n == 1 { "" } else { "s" }
            ),
        };
        report.say(&format!(
            "opened {} ({} triples{log}) in {:.2} s",
            path.display(),
            db.current().len(),
            t.elapsed().as_secs_f64()
        ));
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
    /// The files a query over no store names in its `FROM` and `FROM NAMED` clauses (`iris`),
    /// each loaded as the graph its IRI names, so the query's dataset picks them as it says
    /// (as Jena's command line does); `options` reads them.
    ///
    /// # Errors
    /// [`OpenError::NoData`] when an IRI is not a `file:` IRI: nothing is fetched from the
    /// network.
    pub fn of_dataset(
        iris: impl IntoIterator<Item = String>,
        mut options: load::LoadOptions,
    ) -> Result<Source, OpenError> {
        for iri in iris {
            let path = load::file_path(&iri).ok_or_else(|| {
                OpenError::NoData(format!(
                    "FROM <{iri}>: over no store, a query's FROM names a local file (a file: \
                     IRI, or a path relative to the query); nearflow fetches nothing from the \
                     network"
                ))
            })?;
            options.named.push((iri, path));
        }
        Ok(Source::Files(Vec::new(), options))
    }

    /// The store this source names as a [`Db`]: a snapshot opened with its log (for writing
    /// when `writable`), or RDF files loaded into memory, read-only.
    pub fn open_db(
        &self,
        machine: &nearflow_topo::Machine,
        writable: bool,
        report: &dyn Report,
        tuning: Tuning,
    ) -> Result<Db> {
        match self {
            Source::Snapshot(p) => open_db_tuned(machine, p, writable, report, tuning),
            Source::Files(files, options) => {
                Ok(Db::read_only(load_files(machine, files, options, report)?))
            }
        }
    }

    /// The store this source names, on `machine`, telling `report` how far it is and what it
    /// took.
    pub fn open(&self, machine: &nearflow_topo::Machine, report: &dyn Report) -> Result<Store> {
        match self {
            Source::Snapshot(p) => open_store(machine, p, report),
            Source::Files(files, options) => load_files(machine, files, options, report),
        }
    }
}
