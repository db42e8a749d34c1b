//! `nearflow load` in bounded memory, as a user runs it on a file of a few million triples:
//! under a budget small enough to spill many runs it writes the same store, quad for quad, as
//! the load in memory; Ctrl-C, and a disk that fills up, stop it with its temporary files
//! removed and the previous store whole.

mod common;

use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::{fails_with, nearflow, BIN};

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("load-cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Triples in the generated document.
const TRIPLES: u64 = 2_000_000;

/// The document: SP²Bench's shape from the project's generator (blank nodes, literals of
/// several kinds), generated once per test process.
fn document() -> &'static Path {
    static DOC: OnceLock<PathBuf> = OnceLock::new();
    DOC.get_or_init(|| {
        let f = scratch(&format!("sp2b-{TRIPLES}.ttl"));
        let w = std::io::BufWriter::new(std::fs::File::create(&f).unwrap());
        nearflow_apps::sp2bench::generate(TRIPLES, 1, w).unwrap();
        f
    })
}

/// Each quad of a store as a 128-bit hash of its four terms, sorted: equal lists are equal
/// stores (up to a collision of 128-bit hashes), at 16 bytes a quad.
fn fingerprints(s: &nearflow_rdf::Store) -> Vec<u128> {
    let d = s.dict();
    let seeds = [
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default(),
        std::hash::BuildHasherDefault::default(),
    ];
    let mut out: Vec<u128> = s
        .quads()
        .iter()
        .map(|q| {
            let text = format!(
                "{}\t{}\t{}\t{}",
                d.term(q[0]),
                d.term(q[1]),
                d.term(q[2]),
                if q[3] == 0 {
                    String::new()
                } else {
                    d.term(q[3]).to_string()
                }
            );
            let mut h = seeds[0].build_hasher();
            h.write(text.as_bytes());
            let mut g = seeds[1].build_hasher();
            g.write_u8(1);
            g.write(text.as_bytes());
            (u128::from(h.finish()) << 64) | u128::from(g.finish())
        })
        .collect();
    out.sort_unstable();
    out
}

/// `nearflow load DOC --save TARGET FLAGS…`.
fn load_document(target: &Path, flags: &[&str]) -> std::process::Output {
    let mut args = vec!["load", document().to_str().unwrap(), "--save"];
    args.push(target.to_str().unwrap());
    args.extend_from_slice(flags);
    nearflow(&args)
}

/// The document loaded in memory, the store a load to disk is compared with.
fn in_memory(machine: &nearflow_topo::Machine) -> nearflow_rdf::Store {
    nearflow_rdf::load::load_files(&[document().to_owned()], &Arc::default())
        .unwrap()
        .into_store(machine)
        .unwrap()
}

#[test]
fn a_load_under_a_small_budget_is_the_load_in_memory_quad_for_quad() {
    let target = scratch("bounded.nfs");
    let out = load_document(&target, &["--memory-budget", "64MiB"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let runs: usize = err
        .split(" runs spilled")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of runs: {err}"));
    assert!(runs >= 3, "a budget of 64 MiB spilled {runs} runs: {err}");
    let machine = nearflow_topo::from_synthetic("pack:2 [numa] core:1 pu:1").unwrap();
    let want = in_memory(&machine);
    let got = nearflow_rdf::snapshot::open(&target, &machine).unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got.len() as f64 > TRIPLES as f64 * 0.9);
    assert_eq!(got.dict().len(), want.dict().len());
    assert_eq!(got.graphs(), want.graphs());
    assert_eq!(fingerprints(&got), fingerprints(&want));
    assert!(got.health().unwrap().check_all().is_none());
}

/// `nearflow load DOC --save TARGET` under a budget that spills several runs.
fn bounded_load(doc: &Path, target: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "load",
        doc.to_str().unwrap(),
        "--save",
        target.to_str().unwrap(),
    ])
    .args(["--memory-budget", "64MiB", "--quiet"]);
    cmd
}

/// A store `NAME.nfs` of one triple, which a failed load must leave as it was: its path, the
/// file it was loaded from, and its bytes.
fn previous_store(name: &str) -> (PathBuf, PathBuf, Vec<u8>) {
    let target = scratch(&format!("{name}.nfs"));
    let small = scratch(&format!("{name}-small.nt"));
    std::fs::write(&small, "<http://a> <http://b> <http://c> .\n").unwrap();
    let out = nearflow(&[
        "load",
        small.to_str().unwrap(),
        "--save",
        target.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(out.status.success());
    let before = std::fs::read(&target).unwrap();
    (target, small, before)
}

#[test]
fn ctrl_c_stops_a_load_with_nothing_left_behind() {
    let doc = document();
    let (target, small, before) = previous_store("interrupted");
    let child = bounded_load(doc, &target)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupted once it has started spilling (its temporary folder exists).
    let dir = target.parent().unwrap();
    let started = Instant::now();
    let spilling = || {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".interrupted.nfs.load-")
            })
    };
    while !spilling() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the load never made its temporary folder"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: a signal to the child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the load was not interrupted: {err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!spilling(), "the temporary folder was left behind");
    assert_eq!(std::fs::read(&target).unwrap(), before);
    // The folder a load killed outright (no chance to clean up) leaves is removed by the next
    // load of the same store.
    let stale = dir.join(".interrupted.nfs.load-4000000");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("terms-0"), b"left").unwrap();
    let out = nearflow(&[
        "load",
        small.to_str().unwrap(),
        "--save",
        target.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("removed 1 temporary folder"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stale.exists());
}

/// A disk that fills up during the load, stood for by a limit on the size of any file the
/// process writes (`RLIMIT_FSIZE`, with `SIGXFSZ` ignored, so a write past it fails with
/// `EFBIG` as one on a full disk fails with `ENOSPC`): once while the runs spill, once while
/// the snapshot is written. Each time the load fails with the system's error and the file it
/// was writing, never a panic, with its temporary files removed and the previous store whole.
#[test]
fn a_full_disk_is_a_clear_error_and_leaves_the_previous_store() {
    use std::os::unix::process::CommandExt;
    let doc = document();
    let (target, _, before) = previous_store("full");
    let dir = target.parent().unwrap();
    let leftovers = || -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".full.nfs"))
            .collect()
    };
    // 1 MiB: a run file in the temporary folder passes it; 24 MiB: every run file fits (a run
    // holds 14 MiB at most under this budget) and the snapshot, about 35 MB, written to a
    // temporary name beside the store, does not.
    for (limit, failing) in [(1u64 << 20, ".full.nfs.load-"), (24 << 20, ".tmp: ")] {
        let mut cmd = bounded_load(doc, &target);
        // SAFETY: between fork and exec the child only calls `setrlimit` and `signal`, both
        // async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let l = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &l) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            })
        };
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "the load passed a {limit}-byte limit"
        );
        assert!(err.starts_with("error: "), "{err}");
        assert!(err.contains("os error 27"), "{err}");
        assert!(
            err.contains(failing) && err.contains("/.full.nfs."),
            "{err}"
        );
        assert_eq!(err.contains(".load-"), failing.contains(".load-"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(
            leftovers(),
            Vec::<String>::new(),
            "after a {limit}-byte limit"
        );
        assert_eq!(std::fs::read(&target).unwrap(), before);
    }
}

/// `nearflow load --shards 3` under a budget that spills: the shards together hold the
/// bounded load's quads, each once; every shard has the whole dictionary (a term has one id
/// everywhere); by subject, every subject's quads are on one shard.
#[test]
fn a_sharded_load_splits_the_store_by_subject() {
    let target = scratch("sharded");
    let _ = std::fs::remove_dir_all(&target);
    let out = load_document(&target, &["--memory-budget", "64MiB", "--shards", "3"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("saved 3 shards by subject"), "{err}");
    let machine = nearflow_topo::from_synthetic("core:2 pu:1").unwrap();
    let want = in_memory(&machine);
    let manifest = nearflow_rdf::shard::Manifest::read(&target).unwrap();
    assert_eq!(manifest.total(), want.len());
    let mut union = Vec::new();
    let mut owner = std::collections::HashMap::new();
    for i in 0..3 {
        let path = nearflow_rdf::shard::Manifest::shard_path(&target, i);
        let shard = nearflow_rdf::snapshot::open(&path, &machine).unwrap();
        assert_eq!(shard.len(), manifest.quads[i]);
        assert!(shard.len() > want.len() / 4, "shard {i}: {}", shard.len());
        assert_eq!(shard.dict().len(), want.dict().len());
        for q in shard.quads() {
            let subject = shard.dict().term(q[0]).to_string();
            assert_eq!(
                *owner.entry(subject).or_insert(i),
                i,
                "a subject on two shards"
            );
        }
        union.extend(fingerprints(&shard));
    }
    union.sort_unstable();
    assert_eq!(union, fingerprints(&want));
    // Nothing of the load is left beside the folder.
    let left: Vec<_> = std::fs::read_dir(target.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(".sharded"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A second load into the same folder is refused, and leaves it as it was.
    let out = load_document(&target, &["--shards", "2"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    assert_eq!(
        nearflow_rdf::shard::Manifest::read(&target).unwrap(),
        manifest
    );
    // The folder is not one store: a query over it says what it is.
    let out = nearflow(&[
        "sparql",
        "--store",
        target.to_str().unwrap(),
        "-e",
        "ASK {}",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a folder of 3 shards"), "{err}");
    // `check store` checks every shard.
    let out = nearflow(&["check", "store", target.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("3 shards by subject"), "{said}");
    assert_eq!(said.matches("logged updates replayed").count(), 3, "{said}");
    // A shard is not changed on its own.
    let shard = nearflow_rdf::shard::Manifest::shard_path(&target, 1);
    let update = "INSERT DATA { <http://x/new> <http://x/p> 1 }";
    let out = nearflow(&["update", "--store", shard.to_str().unwrap(), "-e", update]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a shard of a cluster"), "{err}");
    // Changed outside its folder, then put back: `check store` finds that the ids disagree.
    let alone = scratch("shard-alone.store");
    let log = |p: &Path| nearflow_rdf::db::log_path(p);
    // (The scratch folder outlives a run: the files of the last one's copy go first.)
    let _ = std::fs::remove_file(log(&alone));
    let _ = std::fs::remove_file(nearflow_rdf::db::acked_path(&alone));
    std::fs::copy(&shard, &alone).unwrap();
    let out = nearflow(&["update", "--store", alone.to_str().unwrap(), "-e", update]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::copy(log(&alone), log(&shard)).unwrap();
    let out = nearflow(&["check", "store", target.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the shards' dictionaries differ"), "{err}");
}

/// A sharded load killed outright (`kill -9`) leaves its temporary store beside the folder and
/// no folder; the next load into it removes what was left, says so, and writes the shards.
#[test]
fn a_killed_sharded_load_is_cleaned_up_by_the_next() {
    let target = scratch("killed-shards");
    let _ = std::fs::remove_dir_all(&target);
    let dir = target.parent().unwrap();
    let leftovers = || -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.trim_start_matches('.').starts_with("killed-shards."))
            .collect()
    };
    let mut child = Command::new(BIN)
        .args(["load", document().to_str().unwrap(), "--save"])
        .arg(&target)
        .args(["--memory-budget", "64MiB", "--shards", "2", "--quiet"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once its temporary store's spill folder exists.
    let started = Instant::now();
    while !leftovers().iter().any(|n| n.contains(".load-")) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the load never started spilling: {:?}",
            leftovers()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!leftovers().is_empty());
    assert!(!target.exists(), "a killed load left a folder of shards");
    let out = load_document(&target, &["--shards", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("of an earlier load that was killed"), "{err}");
    assert_eq!(leftovers(), Vec::<String>::new());
    assert_eq!(
        nearflow_rdf::shard::Manifest::read(&target)
            .unwrap()
            .quads
            .len(),
        2
    );
}

/// The sharding flags' bad values are refused before anything is read, naming the flag.
#[test]
fn bad_sharding_flags_are_refused() {
    let target = scratch("flags").to_str().unwrap().to_owned();
    let load = |flags: &[&str]| {
        let mut args = vec!["load", "x.ttl", "--save", &target];
        args.extend_from_slice(flags);
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    fails_with(&load(&["--shards", "0"]), "--shards");
    fails_with(&load(&["--shards", "1025"]), "--shards");
    fails_with(&load(&["--shards", "two"]), "--shards");
    fails_with(
        &load(&["--shards", "2", "--shard-by", "object"]),
        "a shard rule is",
    );
    fails_with(&load(&["--shard-by", "hash"]), "--shards");
    fails_with(&load(&["--shards", "2", "--add"]), "--add");
    assert!(!Path::new(&target).exists());
}
