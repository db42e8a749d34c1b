//! `nearflow serve` and `nearflow bench serve` as a user runs them: the endpoint answers over
//! loopback, stops on SIGTERM, and refuses bad flags; the load generator checks every answer.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::fails_with;

fn data_file(dir: &std::path::Path) -> std::path::PathBuf {
    let f = dir.join("d.ttl");
    std::fs::write(
        &f,
        "<http://ex/a> <http://ex/name> \"Alice\" .\n<http://ex/b> <http://ex/name> \"Bob\" .\n",
    )
    .unwrap();
    f
}

fn http(addr: &str, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_answers_over_loopback_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("nearflow-serve-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = data_file(&dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_nearflow"))
        .args(["serve", "--quiet", "--bind", "127.0.0.1:0", "--data"])
        .arg(&data)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    // "serving 2 triples at http://127.0.0.1:PORT/query (policy las); Ctrl-C stops"
    let addr = common::served_at(&line).unwrap_or_else(|| panic!("no address in {line:?}"));
    assert!(line.starts_with("serving 2 triples"), "{line}");
    let r = http(
        &addr,
        "GET /query?query=SELECT%20%3Fn%20%7B%3Fs%20%3Chttp%3A%2F%2Fex%2Fname%3E%20%3Fn%7D%20ORDER%20BY%20%3Fn HTTP/1.1\r\nHost: localhost\r\nAccept: text/csv\r\nConnection: close\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains("n\r\nAlice\r\nBob\r\n"), "{r}");
    let bad = http(
        &addr,
        "GET /query?query=SELECT HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
    // SIGTERM: a clean stop, status 0.
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_refuses_bad_flags_and_a_taken_port() {
    fails_with(
        &["serve", "--data", "x.ttl", "--bind", "nowhere"],
        "invalid socket address",
    );
    fails_with(&["serve", "--data", "x.ttl", "--timeout", "0"], "--timeout");
    fails_with(
        &["serve", "--data", "x.ttl", "--max-running", "0"],
        "--max-running",
    );
    let dir = std::env::temp_dir().join(format!("nearflow-serve-port-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = data_file(&dir);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    fails_with(
        &[
            "serve",
            "--quiet",
            "--bind",
            &addr,
            "--data",
            data.to_str().unwrap(),
        ],
        "cannot listen on",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `nearflow serve ARGS…`; its child and the port it listens on, read from stderr once
/// it says "serving" (the lines before, warnings included, returned too).
fn serving(args: &[&str]) -> (std::process::Child, u16, String) {
    serving_or_refused(args)
        .unwrap_or_else(|said| panic!("the server ended before it served: {said}"))
}

fn stop(mut child: std::process::Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

fn update_request(extra: &str) -> String {
    let body = "INSERT DATA { <http://ex/c> <http://ex/name> \"Carol\" }";
    format!(
        "POST /update HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sparql-update\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Safe by default on the web: beyond loopback a server warns, and takes writes only with
/// the token of `--write-token-file`; `--cors` names the origins whose pages may read.
#[test]
fn serve_beyond_loopback_needs_a_token_to_write_and_cors_names_origins() {
    let dir = std::env::temp_dir().join(format!("nearflow-serve-token-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = data_file(&dir);
    let store = dir.join("s.nfs");
    common::ok(&[
        "load".as_ref(),
        data.as_os_str(),
        "--quiet".as_ref(),
        "--save".as_ref(),
        store.as_os_str(),
    ]);
    let st = store.to_str().unwrap();
    // The unspecified address listens on every interface; the test speaks over loopback.
    let (child, port, said) = serving(&["serve", "--quiet", "--bind", "0.0.0.0:0", "--store", st]);
    assert!(
        said.contains("warning: listening beyond loopback"),
        "{said}"
    );
    assert!(said.contains("writes are refused"), "{said}");
    let at = format!("127.0.0.1:{port}");
    let r = http(&at, &update_request(""));
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    assert!(r.contains("--write-token-file"), "{r}");
    stop(child);

    let token = dir.join("token");
    std::fs::write(&token, "a-long-enough-token-123\n").unwrap();
    let tk = token.to_str().unwrap();
    let (child, port, said) = serving(&[
        "serve",
        "--quiet",
        "--bind",
        "0.0.0.0:0",
        "--store",
        st,
        "--write-token-file",
        tk,
        "--cors",
        "http://app.example",
    ]);
    assert!(said.contains("writes need the token"), "{said}");
    let at = format!("127.0.0.1:{port}");
    let r = http(&at, &update_request(""));
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    let r = http(&at, &update_request("Authorization: Bearer wrong\r\n"));
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    let r = http(
        &at,
        &update_request("Authorization: Bearer a-long-enough-token-123\r\n"),
    );
    assert!(r.starts_with("HTTP/1.1 204"), "{r}");
    let read = "GET /query?query=ASK%7B%7D HTTP/1.1\r\nHost: localhost\r\nOrigin: http://app.example\r\nConnection: close\r\n\r\n";
    let r = http(&at, read);
    assert!(
        r.to_ascii_lowercase()
            .contains("access-control-allow-origin: http://app.example"),
        "{r}"
    );
    let r = http(&at, &read.replace("app.example", "evil.example"));
    assert!(
        !r.to_ascii_lowercase()
            .contains("access-control-allow-origin"),
        "{r}"
    );
    stop(child);

    std::fs::write(&token, "short\n").unwrap();
    fails_with(
        &["serve", "--store", st, "--write-token-file", tk],
        "at least 16 characters",
    );
    fails_with(
        &["serve", "--store", st, "--cors", "app.example"],
        "is not an origin",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client that leaves in the middle of a long answer costs the server that answer only: the
/// server stays up and answers the next client. (Here the server learns of the reset from a
/// read, so no write of its own fails; the cluster test's workers are the servers whose writes
/// meet a closed peer.)
#[test]
fn serve_outlives_clients_that_leave_mid_answer() {
    let dir = std::env::temp_dir().join(format!("nearflow-serve-leave-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("d.nt");
    let triples: String = (0..2000)
        .map(|i| format!("<http://ex/s{i}> <http://ex/p> \"value number {i}\" .\n"))
        .collect();
    std::fs::write(&data, triples).unwrap();
    let (mut child, port, _) = serving(&[
        "serve",
        "--quiet",
        "--bind",
        "127.0.0.1:0",
        "--data",
        data.to_str().unwrap(),
    ]);
    assert!(
        common::ignores_sigpipe(child.id()),
        "a server must ignore SIGPIPE"
    );
    let at = format!("127.0.0.1:{port}");
    // 4·10⁶ rows, some 200 MB of TSV: far more than the socket buffers hold.
    let long = "GET /query?query=SELECT%20*%20%7B%3Fa%20%3Fb%20%3Fc%20.%20%3Fd%20%3Fe%20%3Ff%7D HTTP/1.1\r\nHost: localhost\r\nAccept: text/tab-separated-values\r\nConnection: close\r\n\r\n";
    for round in 0..4 {
        let mut s = std::net::TcpStream::connect(&at).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(long.as_bytes()).unwrap();
        let mut head = vec![0u8; 64 * 1024];
        s.read_exact(&mut head).unwrap();
        assert!(head.starts_with(b"HTTP/1.1 200"), "round {round}");
        // Leave with a reset (linger 0), so that the server sees it at once rather than after
        // the socket buffers fill.
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt(2) on the socket `s` owns, with a `linger` of the size given.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        drop(s);
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the server ended after a client left in round {round}: {:?}",
            child.try_wait()
        );
    }
    let r = http(
        &at,
        "GET /query?query=ASK%7B%3Fs%20%3Fp%20%3Fo%7D HTTP/1.1\r\nHost: localhost\r\nAccept: text/csv\r\nConnection: close\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains("true"), "{r}");
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `nearflow serve ARGS…`: its child, the port it listens on and the lines it said
/// before (warnings included), read from stderr once it says "serving"; `Err` with what it
/// said when it ends before it serves (a store refused at open).
// The child is handed to the caller, who stops it and waits for it.
#[allow(clippy::zombie_processes)]
fn serving_or_refused(args: &[&str]) -> Result<(std::process::Child, u16, String), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nearflow"))
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            let status = child.wait().unwrap();
            assert!(!status.success(), "a refusal exits non-zero: {said}");
            return Err(said);
        }
        said.push_str(&line);
        if line.starts_with("serving") {
            let port = common::served_at(&line)
                .and_then(|a| a.rsplit(':').next().map(str::to_owned))
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("no port in {line:?}"));
            // The rest of what it says is read, so that it never blocks on a full pipe.
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
            return Ok((child, port, said));
        }
    }
}

/// The status and the body's lines, sorted, of a GET of `query` asking for `accept`.
fn answer(at: &str, query: &str, accept: &str) -> (String, Vec<String>) {
    let r = http(
        at,
        &format!(
            "GET /query?query={} HTTP/1.1\r\nHost: localhost\r\nAccept: {accept}\r\nConnection: close\r\n\r\n",
            nearflow_serve::protocol::encode(query)
        ),
    );
    let status = r.get(9..12).unwrap_or("").to_owned();
    let (head, body) = r.split_once("\r\n\r\n").unwrap_or((&r, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        // The chunks joined; a transfer that broke off (no last chunk) is no answer.
        let (mut out, mut rest, mut ended) = (String::new(), body, false);
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(usize::MAX);
            if n == 0 {
                ended = true;
                break;
            }
            if after.len() < n {
                break;
            }
            out.push_str(&after[..n]);
            rest = after[n..].trim_start_matches("\r\n");
        }
        if !ended {
            return ("broken".into(), Vec::new());
        }
        out
    } else {
        body.to_owned()
    };
    let mut lines: Vec<String> = body.lines().map(str::to_owned).collect();
    lines.sort();
    (status, lines)
}

/// A snapshot damaged anywhere (one bit flipped at points through the file) is refused at
/// open, or every answer from it is an error (500, or a transfer that breaks off) or exactly
/// the undamaged answer — never a made-up term; a clean stop after an update writes nothing
/// from it; and `check store` still finds the damage after.
#[test]
fn damage_in_a_snapshot_is_an_error_never_an_answer() {
    let dir = std::env::temp_dir().join(format!("nearflow-serve-damage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("d.nt");
    let triples: String = (0..4000)
        .map(|i| {
            format!(
                "<http://ex/s{i}> <http://ex/name> \"name {i}\" .\n<http://ex/s{i}> <http://ex/knows> <http://ex/s{}> .\n",
                (i * 7 + 1) % 4000
            )
        })
        .collect();
    std::fs::write(&data, triples).unwrap();
    let good = dir.join("good.nfs");
    common::ok(&[
        "load",
        "--quiet",
        "--save",
        good.to_str().unwrap(),
        data.to_str().unwrap(),
    ]);
    let queries = [
        ("CONSTRUCT WHERE { ?s ?p ?o }", "application/n-triples"),
        ("SELECT * { ?s ?p ?o }", "text/csv"),
        ("DESCRIBE <http://ex/s3999>", "application/n-triples"),
        ("SELECT (COUNT(*) AS ?n) { ?s ?p ?o }", "text/csv"),
    ];
    let serve = |store: &std::path::Path| {
        serving_or_refused(&[
            "serve",
            "--quiet",
            "--bind",
            "127.0.0.1:0",
            "--merge-idle",
            "1h",
            "--store",
            store.to_str().unwrap(),
        ])
    };
    let (child, port, _) = serve(&good).expect("the good store serves");
    let at = format!("127.0.0.1:{port}");
    let expected: Vec<Vec<String>> = queries
        .iter()
        .map(|(q, a)| {
            let (status, lines) = answer(&at, q, a);
            assert_eq!(status, "200", "{q}");
            lines
        })
        .collect();
    stop(child);
    let bytes = std::fs::read(&good).unwrap();
    let store = dir.join("s.nfs");
    let (mut refused, mut errors) = (0, 0);
    for pct in [3, 10, 20, 30, 45, 60, 75, 90, 99] {
        for f in std::fs::read_dir(&dir).unwrap().flatten() {
            if f.file_name().to_string_lossy().starts_with("s.nfs") {
                std::fs::remove_file(f.path()).unwrap();
            }
        }
        let mut b = bytes.clone();
        b[bytes.len() * pct / 100] ^= 0x04;
        std::fs::write(&store, &b).unwrap();
        let (mut child, port, _) = match serve(&store) {
            Ok(c) => c,
            Err(said) => {
                assert!(said.contains("damaged"), "at {pct} %: {said}");
                refused += 1;
                continue;
            }
        };
        let at = format!("127.0.0.1:{port}");
        for ((q, a), want) in queries.iter().zip(&expected) {
            let (status, lines) = answer(&at, q, a);
            match status.as_str() {
                "500" | "broken" => errors += 1,
                "200" => {
                    let wrong: Vec<&String> = lines.iter().filter(|l| !want.contains(l)).collect();
                    assert!(
                        &lines == want,
                        "at {pct} %: {q} answered 200 from damage: {} lines of {} (want {}) not in \
                         the answer, such as {:?}",
                        wrong.len(),
                        lines.len(),
                        want.len(),
                        &wrong[..wrong.len().min(3)]
                    );
                }
                s => panic!("at {pct} %: {q}: status {s}"),
            }
        }
        let r = http(&at, &update_request(""));
        assert!(
            r.starts_with("HTTP/1.1 204") || r.starts_with("HTTP/1.1 500"),
            "at {pct} %: {r}"
        );
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().unwrap();
        // Nothing read from the damage was written over it: the check finds the damage still,
        // or the stop wrote the store anew from undamaged reads (a section a write makes
        // again, such as the term index), and it holds exactly the data and the update.
        let check = common::nearflow(&["check", "store", store.to_str().unwrap()]);
        let said = String::from_utf8_lossy(&check.stderr).into_owned()
            + &String::from_utf8_lossy(&check.stdout);
        if check.status.success() {
            let (child, port, _) = serve(&store).expect("a store found whole serves");
            let (status, lines) = answer(&format!("127.0.0.1:{port}"), queries[0].0, queries[0].1);
            stop(child);
            let mut want = expected[0].clone();
            want.push("<http://ex/c> <http://ex/name> \"Carol\" .".into());
            want.sort();
            assert_eq!(
                (status.as_str(), &lines),
                ("200", &want),
                "at {pct} %: {said}"
            );
        } else {
            assert!(said.contains("damaged"), "at {pct} %: {said}");
        }
    }
    assert!(
        refused + errors > 0,
        "no damage was found at any of the points"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
