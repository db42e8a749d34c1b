//! `nearflow update` as a user runs it: updates a saved store, durably; `nearflow sparql`
//! and `load --add` see every update; bad requests and a store another process writes are
//! refused with a message.

mod common;

use std::path::{Path, PathBuf};

use common::{fails_with, nearflow, ok};

fn store(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let data = dir.join("d.ttl");
    std::fs::write(
        &data,
        "@prefix ex: <http://ex/> .\nex:a ex:name \"Alice\" .\nex:b ex:name \"Bob\" .\n",
    )
    .unwrap();
    let s = dir.join("s.nfs");
    ok(&[
        "load".as_ref(),
        data.as_os_str(),
        "--quiet".as_ref(),
        "--save".as_ref(),
        s.as_os_str(),
    ]);
    s
}

fn names(s: &Path) -> String {
    ok(&[
        "sparql".as_ref(),
        "--quiet".as_ref(),
        "--store".as_ref(),
        s.as_os_str(),
        "--format".as_ref(),
        "csv".as_ref(),
        "-e".as_ref(),
        "SELECT ?n WHERE { ?s <http://ex/name> ?n } ORDER BY ?n".as_ref(),
    ])
}

#[test]
fn update_changes_a_saved_store_and_every_reader_sees_it() {
    let dir = std::env::temp_dir().join(format!("nearflow-update-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = store(&dir);
    let st = s.to_str().unwrap();
    let out = nearflow(&[
        "update",
        "--store",
        st,
        "-e",
        "PREFIX ex: <http://ex/> INSERT DATA { ex:c ex:name \"Carol\" }",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("update 1 changed 1 quad"), "{err}");
    assert!(err.contains("synced to"), "{err}");
    assert_eq!(names(&s), "n\r\nAlice\r\nBob\r\nCarol\r\n");
    // A request in a file, with its own IRI as the base.
    let ru = dir.join("rename.ru");
    std::fs::write(
        &ru,
        "PREFIX ex: <http://ex/> DELETE { ?s ex:name \"Bob\" } INSERT { ?s ex:name \"Robert\" } WHERE { ?s ex:name \"Bob\" }",
    )
    .unwrap();
    ok(&[
        "update",
        "--quiet",
        "--store",
        st,
        "--update",
        ru.to_str().unwrap(),
    ]);
    assert_eq!(names(&s), "n\r\nAlice\r\nCarol\r\nRobert\r\n");
    // Nothing to change: said so, nothing logged.
    let out = nearflow(&[
        "update",
        "--store",
        st,
        "-e",
        "DELETE DATA { <http://x> <http://y> <http://z> }",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("changed nothing"));
    // load --add keeps the updates (and starts the log afresh).
    let more = dir.join("more.ttl");
    std::fs::write(&more, "<http://ex/d> <http://ex/name> \"Dan\" .\n").unwrap();
    ok(&[
        "load",
        "--quiet",
        "--add",
        "--save",
        st,
        more.to_str().unwrap(),
    ]);
    assert_eq!(names(&s), "n\r\nAlice\r\nCarol\r\nDan\r\nRobert\r\n");
    assert_eq!(
        std::fs::metadata(nearflow_log(&s)).unwrap().len(),
        36,
        "the log holds its header only"
    );
    // A new store over the old name starts without the old one's log.
    ok(&["update", "--quiet", "--store", st, "-e", "CLEAR DEFAULT"]);
    let fresh = dir.join("d.ttl");
    ok(&["load", "--quiet", "--save", st, fresh.to_str().unwrap()]);
    assert_eq!(names(&s), "n\r\nAlice\r\nBob\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `nearflow serve` over store `st`, once it says it is serving (the caller stops it and waits
/// for it).
#[allow(clippy::zombie_processes)]
fn serving(st: &str) -> std::process::Child {
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_nearflow"))
        .args(["serve", "--quiet", "--bind", "127.0.0.1:0", "--store", st])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("serving") {
        line.clear();
        if std::io::BufRead::read_line(&mut err, &mut line).unwrap_or(0) == 0 {
            let _ = server.kill();
            let _ = server.wait();
            panic!("the server ended before it served");
        }
    }
    server
}

/// What `check store STORE --salvage` said (it must succeed).
fn salvaged(st: &str) -> String {
    let out = nearflow(&["check", "store", st, "--salvage"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

fn nearflow_log(s: &Path) -> PathBuf {
    let mut p = s.as_os_str().to_owned();
    p.push(".log");
    PathBuf::from(p)
}

#[test]
fn update_refuses_bad_requests_and_a_store_in_use() {
    let dir = std::env::temp_dir().join(format!("nearflow-update-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = store(&dir);
    let st = s.to_str().unwrap();
    fails_with(
        &["update", "--store", st, "-e", "INSERT DATA { <a> <b> }"],
        "syntax error",
    );
    fails_with(
        &["update", "--store", st, "-e", "SELECT * { ?s ?p ?o }"],
        "not an update request",
    );
    fails_with(
        &["update", "--store", st, "-e", "DROP GRAPH <http://none>"],
        "holds no graph",
    );
    fails_with(
        &["update", "--store", "/nonexistent/s.nfs", "-e", "CLEAR ALL"],
        "no such store",
    );
    fails_with(&["update", "--store", st], "--update");
    // A server holds the store for writing: a second writer is refused, not queued.
    let mut server = serving(st);
    fails_with(
        &["update", "--store", st, "-e", "CLEAR ALL"],
        "another process is writing this store",
    );
    // Readers are not refused.
    assert_eq!(names(&s), "n\r\nAlice\r\nBob\r\n");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    assert!(server.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A damaged record in the middle of the log: every reader refuses the store, naming the
/// byte, until the user chooses `check store --salvage`, which keeps the records before it and
/// says how many acknowledged updates it drops.
#[test]
fn a_damaged_log_is_refused_until_salvaged() {
    let dir = std::env::temp_dir().join(format!("nearflow-salvage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = store(&dir);
    let st = s.to_str().unwrap();
    for i in 0..4 {
        ok(&[
            "update",
            "--store",
            st,
            "-e",
            &format!("INSERT DATA {{ <http://ex/u{i}> <http://ex/name> \"U{i}\" }}"),
        ]);
    }
    let log = nearflow_log(&s);
    let mut bytes = std::fs::read(&log).unwrap();
    // The second record's length: one bit flipped (after the 36-byte header and the first
    // record's 12-byte frame and payload).
    let first = 36 + 12 + u32::from_le_bytes(bytes[36..40].try_into().unwrap()) as usize;
    bytes[first + 1] ^= 0x04;
    std::fs::write(&log, &bytes).unwrap();
    let read = ["sparql", "--quiet", "--store", st, "-e", "ASK {}"];
    fails_with(&read, &format!("damaged at byte {first} (record 2)"));
    fails_with(&["check", "store", st], "--salvage");
    let err = salvaged(st);
    assert!(
        err.contains("kept the 1 record before it, dropped 3 acknowledged updates"),
        "{err}"
    );
    assert_eq!(names(&s), "n\r\nAlice\r\nBob\r\nU0\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Another store's snapshot put beside this store's log: nothing reads it with the log's
/// updates replayed onto it, `check store` says why, and `--salvage` opens it as it is.
#[test]
fn another_stores_snapshot_beside_the_log_is_refused_until_salvaged() {
    let dir = std::env::temp_dir().join(format!("nearflow-foreign-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = store(&dir);
    let st = s.to_str().unwrap();
    ok(&[
        "update",
        "--store",
        st,
        "-e",
        "INSERT DATA { <http://ex/c> <http://ex/name> \"Carol\" }",
    ]);
    // Another store, of other data.
    let data = dir.join("other.ttl");
    std::fs::write(&data, "<http://ex/d> <http://ex/name> \"Dan\" .\n").unwrap();
    let other = dir.join("other.nfs");
    ok(&[
        "load".as_ref(),
        data.as_os_str(),
        "--quiet".as_ref(),
        "--save".as_ref(),
        other.as_os_str(),
    ]);
    std::fs::copy(&other, &s).unwrap();
    let read = ["sparql", "--quiet", "--store", st, "-e", "ASK {}"];
    fails_with(&read, "is not the snapshot");
    fails_with(&["check", "store", st], "1 update record");
    let err = salvaged(st);
    assert!(
        err.contains("follows another snapshot; gave up its 1 record"),
        "{err}"
    );
    // The other store's snapshot as it is, this store's update not applied to it.
    assert_eq!(names(&s), "n\r\nDan\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The write lock is the kernel's: deleting `STORE.lock` by hand while a server writes the
/// store does not let a second writer in.
#[test]
fn a_deleted_lock_file_lets_no_second_writer_in() {
    let dir = std::env::temp_dir().join(format!("nearflow-lock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = store(&dir);
    let st = s.to_str().unwrap();
    let mut server = serving(st);
    let mut lock = s.as_os_str().to_owned();
    lock.push(".lock");
    std::fs::remove_file(&lock).unwrap();
    fails_with(
        &["update", "--store", st, "-e", "CLEAR ALL"],
        "another process is writing this store",
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    assert!(server.wait().unwrap().success());
    ok(&["update", "--store", st, "-e", "CLEAR ALL"]);
    let _ = std::fs::remove_dir_all(&dir);
}
