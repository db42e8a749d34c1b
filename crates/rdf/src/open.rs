//! Opening a store as a program does: RDF files loaded with a progress bar, or a snapshot with
//! its log, then placed over the NUMA nodes; unless `quiet`, what it took is said on stderr
//! (`nearflow sparql`, `serve`, `update`, and the benchmarks that open stores, all open them
//! here).

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
        "{0}: a folder of {1} shards (`nearflow load --shards`), not one store; query the shards as one through their workers (`nearflow worker {0}`, then `nearflow sparql --store {0} --cluster HOST:PORT,…`), or a shard alone as a store ({0}/shard-0.store…)"
    )]
    Cluster(PathBuf, usize),
    /// A shard of a cluster opened for writing.
    #[error(
        "{0}: a shard of a cluster (`nearflow load --shards`); changed on its own it would give new terms ids the other shards do not share, so it opens read-only (--read-only), and a cluster does not yet take updates"
    )]
    ShardWrite(PathBuf),
    /// Writing a cluster's shards failed.
    #[error(transparent)]
    Shard(#[from] crate::shard::ShardError),
}

type Result<T, E = OpenError> = std::result::Result<T, E>;

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
/// saying on stderr, unless `quiet`, what it cost.
pub fn place(store: &Store, placement: StorePlacement, quiet: bool) -> Result<()> {
    if placement == StorePlacement::Partitioned {
        return Ok(());
    }
    let t = Instant::now();
    let what = store.replicate()?;
    if !quiet {
        match what {
            Replication::Built { nodes, bytes } => eprintln!(
                "replicated the indexes on {nodes} NUMA nodes in {:.2} s: {:.1} MiB ({:.1} MiB per node)",
                t.elapsed().as_secs_f64(),
                bytes as f64 / (1 << 20) as f64,
                bytes as f64 / (1 << 20) as f64 / nodes as f64
            ),
            Replication::OneNode => eprintln!(
                "--store-placement replicated: the machine has one NUMA node, whose partitions \
                 are the whole indexes already; nothing copied"
            ),
            Replication::Already => {}
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
    check_inputs(files, options)?;
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

/// Loads `files` straight into a snapshot at `target` in about `budget` bytes of memory
/// (`bulk.rs`), the store's log started afresh, with a progress bar on stderr unless `quiet`
/// (bytes while parsing, then each pass's work with its rate and time left); `cancel`, once
/// set (by a Ctrl-C handler), stops the load with [`LoadError::Interrupted`], its temporary
/// files removed and the previous store whole.
pub fn load_to_snapshot(
    files: &[PathBuf],
    options: &load::LoadOptions,
    budget: u64,
    target: &Path,
    quiet: bool,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<crate::bulk::BulkReport> {
    check_inputs(files, options)?;
    let progress = Arc::new(load::Progress::default());
    let stage = crate::bulk::Stage::default();
    let bar = (!quiet).then(|| indicatif::ProgressBar::new(0));
    let style = |template: &str| {
        indicatif::ProgressStyle::with_template(template).expect("a valid template")
    };
    let mut shown = usize::MAX;
    std::thread::scope(|s| {
        let main = std::thread::current();
        let (progress, stage) = (&progress, &stage);
        let worker = s.spawn(move || {
            let r = Db::replace_by(target, || {
                let stale = crate::bulk::TempDir::remove_stale(target);
                if stale > 0 && !quiet {
                    eprintln!(
                        "removed {stale} temporary folder(s) of an earlier load that was killed"
                    );
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
            if let Some(b) = &bar {
                let i = stage.index.load(Ordering::Relaxed);
                if i != shown {
                    shown = i;
                    b.set_style(style(if i == 0 {
                        "parsing {bar:30} {bytes}/{total_bytes} {msg} ({elapsed}, {eta} left)"
                    } else {
                        "{prefix} {bar:30} {human_pos}/{human_len} ({per_sec}, {eta} left)"
                    }));
                    b.set_prefix(crate::bulk::STAGES[i]);
                    b.reset_eta();
                }
                if i == 0 {
                    b.set_length(progress.bytes_total.load(Ordering::Relaxed));
                    b.set_position(progress.bytes_read.load(Ordering::Relaxed));
                    b.set_message(format!(
                        "{} triples",
                        progress.triples.load(Ordering::Relaxed)
                    ));
                } else {
                    b.set_length(stage.total.load(Ordering::Relaxed));
                    b.set_position(stage.done.load(Ordering::Relaxed));
                }
            }
            std::thread::park_timeout(Duration::from_millis(100));
        }
        if let Some(b) = &bar {
            b.finish_and_clear();
        }
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
    quiet: bool,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<(crate::bulk::BulkReport, crate::shard::Manifest)> {
    crate::shard::check_target(dir)?;
    let stale = crate::shard::remove_stale(dir);
    if stale > 0 && !quiet {
        eprintln!("removed {stale} temporary file(s) of an earlier load that was killed");
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
    let report = load_to_snapshot(files, options, budget, &whole, quiet, cancel)?;
    if cancel.load(Ordering::Relaxed) {
        return Err(LoadError::Interrupted.into());
    }
    let store = crate::snapshot::open(&whole, machine).map_err(DbError::from)?;
    let bar = (!quiet).then(|| {
        let b = indicatif::ProgressBar::new(sharding.shards as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "writing shards {bar:30} {pos}/{len} ({elapsed})",
            )
            .expect("a valid template"),
        );
        b
    });
    let manifest = crate::shard::write_shards(&store, dir, sharding, |_| {
        if let Some(b) = &bar {
            b.inc(1);
        }
        !cancel.load(Ordering::Relaxed)
    })
    .map_err(|e| match e {
        crate::shard::ShardError::Interrupted => OpenError::Load(LoadError::Interrupted),
        e => e.into(),
    })?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    Ok((report, manifest))
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
    if path.join(crate::shard::MANIFEST).is_file() {
        let shards = crate::shard::Manifest::read(path)?.sharding.shards;
        return Err(OpenError::Cluster(path.to_owned(), shards));
    }
    if writable && crate::shard::is_shard(path) {
        return Err(OpenError::ShardWrite(path.to_owned()));
    }
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
