//! Durability under SIGKILL: `nearflow serve` over a store snapshot takes a stream
//! of updates and is killed with SIGKILL at a random moment, again and again (200 times by
//! default; `NEARFLOW_KILL_ROUNDS` sets it). After every restart:
//! - the store opens (the server starts and answers);
//! - every update the server acknowledged (204) is there, with its later ones applied;
//! - no update is half applied: each update writes two triples of one subject (or removes
//!   both), and every subject has both or neither;
//! - an update in flight at the kill (sent, not acknowledged) is all there or not at all.
//!
//! The server merges after 20 ms without an update and writes a new snapshot whenever its log
//! passes 4 KiB, so kills also land inside merges, snapshot writes and log cuts. Every other
//! round it treats the store as large (`--segment-min-quads 1`, a checkpoint past 1 KiB of
//! log): the delta stays beside the snapshot, checkpoints write it as a segment (or the
//! snapshot again, streamed, once the delta outgrows an eighth of it), so kills land inside
//! those too, and each restart opens what the other mode left.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the test knows of update subject `k`'s two triples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    Present,
    Absent,
    /// Sent, not acknowledged: either, but whole.
    Unknown,
}

fn start(store: &Path, segments: bool) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nearflow"))
        .args([
            "serve",
            "--quiet",
            "--bind",
            "127.0.0.1:0",
            "--merge-idle",
            "20ms",
            "--synthetic",
            "pack:1 core:2 pu:1",
            "--store",
        ])
        .arg(store)
        .args(if segments {
            // A checkpoint every few updates: a small delta, written as a segment.
            &["--segment-min-quads", "1", "--checkpoint-size", "1KiB"][..]
        } else {
            &["--checkpoint-size", "4KiB"][..]
        })
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    // Its first line with an address (a warning about the topology may come before it).
    let mut seen = String::new();
    let addr = loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("the server did not start: {seen}");
        }
        if let Some(a) = line
            .strip_prefix("serving ")
            .and_then(|l| l.split("http://").nth(1))
            .and_then(|r| r.split('/').next())
        {
            break a.to_owned();
        }
        seen.push_str(&line);
    };
    // Keep draining its stderr so that it never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = err.read_to_string(&mut sink);
    });
    (child, addr)
}

/// Sends one request; the status, or `None` when the connection failed or broke.
fn http(addr: &str, request: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.get(9..12)?.parse().ok()?;
    Some((status, out))
}

fn update(addr: &str, text: &str) -> Option<u16> {
    http(
        addr,
        &format!(
            "POST /update HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sparql-update\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        ),
    )
    .map(|(s, _)| s)
}

const P: &str = "http://kill/p";
const Q: &str = "http://kill/q";

fn insert(k: u64) -> String {
    format!(
        "INSERT DATA {{ <http://kill/s{k}> <{P}> \"a{k}\" . <http://kill/s{k}> <{Q}> \"b{k}\" }}"
    )
}

fn delete(k: u64) -> String {
    format!(
        "DELETE DATA {{ <http://kill/s{k}> <{P}> \"a{k}\" . <http://kill/s{k}> <{Q}> \"b{k}\" }}"
    )
}

/// The update subjects the server holds, with how many of their two triples.
fn held(addr: &str) -> BTreeMap<u64, usize> {
    let q = format!("SELECT ?s WHERE {{ ?s ?p ?o FILTER(?p = <{P}> || ?p = <{Q}>) }}");
    let enc: String = q
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (status, body) = http(
        addr,
        &format!("GET /query?query={enc} HTTP/1.1\r\nHost: localhost\r\nAccept: text/csv\r\nConnection: close\r\n\r\n"),
    )
    .expect("the restarted server answers");
    assert_eq!(status, 200, "{body}");
    let mut out = BTreeMap::new();
    for line in body.lines().filter(|l| l.starts_with("http://kill/s")) {
        let k: u64 = line["http://kill/s".len()..].trim().parse().unwrap();
        *out.entry(k).or_insert(0) += 1;
    }
    out
}

/// Checks the restarted server against what is known, and settles the unknown.
fn check(addr: &str, known: &mut BTreeMap<u64, Known>, round: usize) {
    let got = held(addr);
    for (k, n) in &got {
        assert_eq!(*n, 2, "round {round}: update {k} is half applied");
        assert!(known.contains_key(k), "round {round}: {k} was never sent");
    }
    for (k, state) in known.iter_mut() {
        let present = got.contains_key(k);
        match state {
            Known::Present => assert!(present, "round {round}: acknowledged insert {k} lost"),
            Known::Absent => assert!(!present, "round {round}: acknowledged delete of {k} lost"),
            Known::Unknown => {
                *state = if present {
                    Known::Present
                } else {
                    Known::Absent
                }
            }
        }
    }
}

#[test]
fn acknowledged_updates_survive_sigkill_at_random_moments() {
    let rounds: usize = std::env::var("NEARFLOW_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = std::env::temp_dir().join(format!("nearflow-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("d.ttl");
    std::fs::write(&data, "<http://ex/a> <http://ex/b> <http://ex/c> .\n").unwrap();
    let store = dir.join("s.nfs");
    let out = Command::new(env!("CARGO_BIN_EXE_nearflow"))
        .args(["load", "--quiet", "--save"])
        .arg(&store)
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first_size = std::fs::metadata(&store).unwrap().len();
    let known = Arc::new(Mutex::new(BTreeMap::<u64, Known>::new()));
    let mut next = 0u64;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let (mut acked, mut in_flight) = (0usize, 0usize);
    let segment = {
        let mut p = store.as_os_str().to_owned();
        p.push(".delta");
        std::path::PathBuf::from(p)
    };
    // Restarts that found a delta segment beside the snapshot.
    let mut segments = 0usize;
    let started = Instant::now();
    for round in 0..rounds {
        segments += usize::from(segment.exists());
        let (mut child, addr) = start(&store, round % 2 == 1);
        check(&addr, &mut known.lock().unwrap(), round);
        // The stream: inserts of new subjects, and deletes of held ones.
        let kill_after = Duration::from_millis(5 + rand(120));
        let seeds: Vec<u64> = (0..10_000).map(|_| rand(1 << 20)).collect();
        let first = next;
        let client = {
            let known = known.clone();
            let addr = addr.clone();
            std::thread::spawn(move || {
                let (mut ok, mut lost, mut n) = (0, 0, first);
                for seed in seeds {
                    let held: Vec<u64> = {
                        let k = known.lock().unwrap();
                        k.iter()
                            .filter(|(_, s)| **s == Known::Present)
                            .map(|(k, _)| *k)
                            .collect()
                    };
                    let (k, text, after) = if seed % 10 < 3 && !held.is_empty() {
                        let k = held[(seed as usize / 10) % held.len()];
                        (k, delete(k), Known::Absent)
                    } else {
                        n += 1;
                        (n, insert(n), Known::Present)
                    };
                    known.lock().unwrap().insert(k, Known::Unknown);
                    match update(&addr, &text) {
                        Some(204) => {
                            known.lock().unwrap().insert(k, after);
                            ok += 1;
                        }
                        Some(s) => panic!("update refused with {s}"),
                        None => {
                            lost += 1;
                            break;
                        }
                    }
                }
                (ok, lost, n)
            })
        };
        std::thread::sleep(kill_after);
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
        let _ = child.wait();
        let (ok, lost, n) = client.join().unwrap();
        next = n;
        acked += ok;
        in_flight += lost;
    }
    let (mut child, addr) = start(&store, false);
    check(&addr, &mut known.lock().unwrap(), rounds);
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    println!(
        "{rounds} kills in {:.1} s: {acked} acknowledged updates, all there; {in_flight} in flight at a kill, each whole or absent; {segments} restarts opened a delta segment",
        started.elapsed().as_secs_f64()
    );
    assert!(
        rounds < 40 || segments > 0,
        "no restart opened a delta segment: the segments went untested"
    );
    assert!(
        acked >= rounds,
        "the stream made too few updates to test: {acked}"
    );
    assert!(
        std::fs::metadata(&store).unwrap().len() > first_size,
        "checkpoints wrote the snapshot again"
    );
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".tmp"))
        .collect();
    assert!(
        left.len() <= 1,
        "a start removes what a killed writer left: {left:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
