//! A nearflow cluster on loopback, as `scripts/local-cluster.sh` starts one: a sharded store
//! served by two workers (`nearflow worker`), queried through `nearflow sparql --cluster`.
//! Every SP²Bench query answers as one process does, by subject and by whole triple; a worker
//! killed in the middle of a query fails it with the engine's error, never a wrong answer.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::{fails_with, nearflow, ok, BIN};

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cluster-cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Triples of the generated document: every query's answer is non-trivial at this size (q4
/// has tens of thousands of rows) and a run of all 17 takes seconds.
const TRIPLES: u64 = 100_000;

/// The generated SP²Bench document loaded three ways, once per test process: one store, two
/// shards by subject, three shards by whole triple.
struct Stores {
    one: PathBuf,
    by_subject: PathBuf,
    by_triple: PathBuf,
}

fn stores() -> &'static Stores {
    static S: OnceLock<Stores> = OnceLock::new();
    S.get_or_init(|| {
        let doc = scratch(&format!("sp2b-{TRIPLES}.ttl"));
        let w = std::io::BufWriter::new(std::fs::File::create(&doc).unwrap());
        nearflow_apps::sp2bench::generate(TRIPLES, 1, w).unwrap();
        let s = Stores {
            one: scratch("one.store"),
            by_subject: scratch("by-subject"),
            by_triple: scratch("by-triple"),
        };
        for p in [&s.one, &s.by_subject, &s.by_triple] {
            let _ = std::fs::remove_dir_all(p);
            let _ = std::fs::remove_file(p);
        }
        let doc = doc.to_str().unwrap();
        let save = |p: &Path, extra: &[&str]| {
            let mut a = vec!["load", doc, "--quiet", "--save", p.to_str().unwrap()];
            a.extend_from_slice(extra);
            ok(&a);
        };
        save(&s.one, &[]);
        save(&s.by_subject, &["--shards", "2"]);
        save(&s.by_triple, &["--shards", "3", "--shard-by", "hash"]);
        s
    })
}

/// A running `nearflow worker`, killed when dropped.
struct Worker {
    child: Child,
    addr: String,
    /// The last lines of its stderr, for a test that finds it gone.
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Worker {
    fn start(dir: &Path) -> Worker {
        let mut child = Command::new(BIN)
            .args(["worker", dir.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().expect("a line from the worker").unwrap();
        let addr = first
            .split(" listening on ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_owned();
        // The rest of its stderr is drained, so that it never blocks on a full pipe, and its
        // last lines kept.
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut kept = kept.lock().unwrap();
                if kept.len() == 64 {
                    kept.remove(0);
                }
                kept.push(line);
            }
        });
        Worker {
            child,
            addr,
            stderr,
        }
    }

    /// Panics, with how it ended and its last words, if the worker has exited.
    fn assert_alive(&mut self, after: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            // Its last lines reach the drain.
            std::thread::sleep(Duration::from_millis(200));
            panic!(
                "the worker on {} ended ({status}) after {after}; its stderr:\n{}",
                self.addr,
                self.stderr.lock().unwrap().join("\n")
            );
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cluster_of(workers: &[Worker]) -> String {
    workers
        .iter()
        .map(|w| w.addr.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// `sparql --count` of `query` over the store `store`: the count's line.
fn count_in(store: &str, query: &str) -> String {
    ok(&[
        "sparql", "--quiet", "--count", "--store", store, "-e", query,
    ])
}

/// A query's solutions as TSV lines, sorted (the order of an answer without ORDER BY is
/// free), or an ASK's answer.
fn answer(args: &[&str]) -> Vec<String> {
    let mut lines: Vec<String> = ok(args).lines().map(str::to_owned).collect();
    lines.sort_unstable();
    lines
}

#[test]
fn every_sp2bench_query_through_two_workers_answers_as_one_process() {
    let s = stores();
    let one = s.one.to_str().unwrap();
    for dir in [&s.by_subject, &s.by_triple] {
        let workers = [Worker::start(dir), Worker::start(dir)];
        let list = cluster_of(&workers);
        let dir = dir.to_str().unwrap();
        let mut rows = 0;
        for (name, _) in nearflow_apps::sp2bench::queries::QUERIES {
            let q = nearflow_apps::sp2bench::queries::text(name).unwrap();
            let base = ["sparql", "--quiet", "--format", "tsv", "-e", &q];
            let mut single = base.to_vec();
            single.extend(["--store", one]);
            let mut through = base.to_vec();
            through.extend(["--store", dir, "--cluster", &list]);
            let (a, b) = (answer(&single), answer(&through));
            assert_eq!(a.len(), b.len(), "{name} through {dir}: row counts");
            assert!(a == b, "{name} through {dir}: the answers differ");
            rows += a.len();
        }
        assert!(
            rows > 10_000,
            "the 17 answers hold {rows} rows: too few to test"
        );
    }
}

#[test]
fn what_a_cluster_cannot_run_is_refused_with_a_reason() {
    let s = stores();
    let dir = s.by_subject.to_str().unwrap();
    let mut workers = [Worker::start(&s.by_subject)];
    assert!(
        common::ignores_sigpipe(workers[0].child.id()),
        "a worker must ignore SIGPIPE"
    );
    let list = cluster_of(&workers);
    let q = |text: &str| {
        vec![
            "sparql".to_owned(),
            "--quiet".into(),
            "--store".into(),
            dir.into(),
            "--cluster".into(),
            list.clone(),
            "-e".into(),
            text.into(),
        ]
    };
    fails_with(
        &q("SELECT * WHERE { ?a <http://p>+ ?b }"),
        "property paths on a sharded store",
    );
    fails_with(&q("DESCRIBE <http://a>"), "DESCRIBE on a sharded store");
    fails_with(
        &q("SELECT * WHERE { GRAPH ?g { ?a ?b ?c } }"),
        "GRAPH on a sharded store",
    );
    // The fragments' rows count against the memory limit, their fetching against the time
    // limit.
    let mut big = q("SELECT * WHERE { ?s ?p ?o }");
    big.extend(["--memory-limit".into(), "1MiB".into()]);
    let mut slow = q("SELECT * WHERE { ?s ?p ?o . ?s ?q ?v . ?s ?r ?w }");
    slow.extend(["--timeout".into(), "5ms".into()]);
    // A coordinator that stops part-way through a fragment's rows leaves its workers serving.
    // Whether a worker's write meets the closed stream depends on timing, so the test asks
    // several times.
    for round in 0..8 {
        fails_with(&big, "memory limit");
        workers[0].assert_alive(&format!(
            "a coordinator stopped on its memory limit (round {round})"
        ));
        fails_with(&slow, "time limit");
        workers[0].assert_alive(&format!(
            "a coordinator stopped on its time limit (round {round})"
        ));
    }
    // A one-shard folder, an address that is not one, a folder that is not a cluster.
    let single = scratch("single-shard");
    let _ = std::fs::remove_dir_all(&single);
    let doc = scratch(&format!("sp2b-{TRIPLES}.ttl"));
    ok(&[
        "load",
        doc.to_str().unwrap(),
        "--quiet",
        "--save",
        single.to_str().unwrap(),
        "--shards",
        "1",
    ]);
    let select = "SELECT * WHERE { ?s ?p ?o } LIMIT 1";
    fails_with(
        &[
            "sparql",
            "--store",
            single.to_str().unwrap(),
            "--cluster",
            &list,
            "-e",
            select,
        ],
        "holds one shard",
    );
    fails_with(
        &[
            "sparql",
            "--store",
            dir,
            "--cluster",
            "127.0.0.1",
            "-e",
            select,
        ],
        "give host:port",
    );
    fails_with(
        &[
            "sparql",
            "--store",
            s.one.to_str().unwrap(),
            "--cluster",
            &list,
            "-e",
            select,
        ],
        "cluster.manifest",
    );
    // Workers of another store: refused, not answered from the wrong shards.
    let other = [Worker::start(&s.by_triple)];
    fails_with(
        &[
            "sparql",
            "--store",
            dir,
            "--cluster",
            &cluster_of(&other),
            "-e",
            select,
        ],
        "another sharded store",
    );
    // A worker that is not there.
    drop(other);
    fails_with(
        &[
            "sparql",
            "--store",
            dir,
            "--cluster",
            "127.0.0.1:1",
            "-e",
            select,
        ],
        "the cluster failed",
    );
    // `--cluster` names the folder with --store.
    let out = nearflow(&["sparql", "--cluster", &list, "-e", select]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--store"));
}

/// Every triple of a subject with every two others: millions of rows from the workers, so that
/// most of the query's time is their fetching.
const TRIPLES_OF_A_SUBJECT: &str = "SELECT * WHERE { ?s ?p ?o . ?s ?q ?v . ?s ?r ?w }";

/// `sparql --count` of the query through the workers `list` of the cluster in `dir`.
fn counted_through<'a>(dir: &'a str, list: &'a str) -> [&'a str; 9] {
    let q = TRIPLES_OF_A_SUBJECT;
    [
        "sparql",
        "--quiet",
        "--count",
        "--store",
        dir,
        "--cluster",
        list,
        "-e",
        q,
    ]
}

/// Runs the query through the cluster, killing the second worker `kill_after` in: the output,
/// and whether the query was still running when the worker died.
fn killed_after(dir: &str, kill_after: Duration) -> (std::process::Output, bool) {
    let mut workers = vec![Worker::start(Path::new(dir)), Worker::start(Path::new(dir))];
    let list = cluster_of(&workers);
    let started = Instant::now();
    let mut query = Command::new(BIN)
        .args(counted_through(dir, &list))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(kill_after);
    let running = query.try_wait().unwrap().is_none();
    drop(workers.remove(1));
    while query.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the query hung after its worker died"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (query.wait_with_output().unwrap(), running)
}

#[test]
fn a_worker_killed_in_the_middle_of_a_query_fails_it_and_never_gives_a_wrong_answer() {
    let s = stores();
    let dir = s.by_subject.to_str().unwrap();
    let one = s.one.to_str().unwrap();
    let right = count_in(one, TRIPLES_OF_A_SUBJECT);
    // How long the query takes whole, to kill a worker a third of the way in.
    let whole = {
        let workers = [Worker::start(&s.by_subject), Worker::start(&s.by_subject)];
        let list = cluster_of(&workers);
        let t = Instant::now();
        assert_eq!(
            ok(&counted_through(dir, &list)),
            right,
            "through the cluster, whole"
        );
        t.elapsed()
    };
    let mut failed = 0;
    for _ in 0..4 {
        let (out, running) = killed_after(dir, whole / 3);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
        if out.status.success() {
            // Every row had come from the workers before the kill: the answer, whole.
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                right,
                "a wrong answer"
            );
        } else {
            assert!(running, "failed though it had ended before the kill: {err}");
            assert!(err.contains("the cluster failed"), "{err}");
            assert!(err.contains("stopped answering"), "{err}");
            assert!(out.stdout.is_empty(), "a partial answer: {:?}", out.stdout);
            failed += 1;
            break;
        }
    }
    assert!(
        failed > 0,
        "in 4 runs the kill, {whole:?} / 3 in, never came while rows were being fetched"
    );
}

/// One HTTP/1.1 exchange with `addr`: the whole response.
fn http(addr: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_answers_the_protocol_over_the_cluster_as_over_one_store() {
    let s = stores();
    let mut workers = [Worker::start(&s.by_subject), Worker::start(&s.by_subject)];
    let list = cluster_of(&workers);
    let (server, addr, first) = serve_cluster(&s.by_subject, &list, &[]);
    // The triples of every shard, as the manifest counts them: one store's.
    let one = s.one.to_str().unwrap();
    let all = count_in(one, "SELECT * { ?s ?p ?o }");
    let serving = format!("serving {} triples", all.trim());
    assert!(first.starts_with(&serving), "{first}");
    assert!(first.contains("read-only"), "{first}");
    let get = |path: &str| {
        http(
            &addr,
            &format!("GET {path} HTTP/1.0\r\nHost: localhost\r\nAccept: text/csv\r\n\r\n"),
        )
    };
    // q5a, the join of two stars on an `=`: the same rows through the endpoint as from one
    // process.
    let q5a = nearflow_apps::sp2bench::queries::text("q5a").unwrap();
    let r = get(&format!(
        "/query?query={}",
        nearflow_serve::protocol::encode(&q5a)
    ));
    assert_eq!(status(&r), "200", "{}", &r[..r.len().min(400)]);
    let mut body: Vec<&str> = r
        .split("\r\n\r\n")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .collect();
    body.sort_unstable();
    let csv = ok(&[
        "sparql", "--quiet", "--format", "csv", "--store", one, "-e", &q5a,
    ]);
    let mut expected: Vec<&str> = csv.lines().skip(1).collect();
    expected.sort_unstable();
    assert!(!expected.is_empty());
    assert!(
        body == expected,
        "q5a through the endpoint differs from one process"
    );
    // What a cluster does not run: a 4xx or 501 with the reason, never a wrong answer.
    let path = get(&format!(
        "/query?query={}",
        nearflow_serve::protocol::encode("SELECT * { ?a <http://p>+ ?b }")
    ));
    assert!(status(&path).starts_with('4'), "{path}");
    assert!(path.contains("sharded store"), "{path}");
    let named = get("/store?graph=http%3A%2F%2Fg");
    assert_eq!(status(&named), "501", "{named}");
    let update = http(
        &addr,
        "POST /update HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sparql-update\r\nContent-Length: 39\r\nConnection: close\r\n\r\nINSERT DATA { <http://a> <http://b> 1 }",
    );
    assert_eq!(status(&update), "403", "{update}");
    assert!(update.contains("a cluster takes no update"), "{update}");
    drop(server);

    // The server's limits hold over the cluster: a 503 that says which, and the workers and
    // the server serve on.
    let (server, addr, _) = serve_cluster(&s.by_subject, &list, &["--memory-limit", "1MiB"]);
    let get = |query: &str, extra: &str| {
        http(
            &addr,
            &format!(
                "GET /query?query={}{extra} HTTP/1.0\r\nHost: localhost\r\nAccept: text/csv\r\n\r\n",
                nearflow_serve::protocol::encode(query)
            ),
        )
    };
    for round in 0..4 {
        let big = get("SELECT * { ?s ?p ?o }", "");
        assert_eq!(status(&big), "503", "{}", &big[..big.len().min(400)]);
        assert!(big.contains("memory limit"), "{big}");
        let slow = get(
            "SELECT * { ?s ?p ?o . ?s ?q ?v . ?s ?r ?w }",
            "&timeout=5ms",
        );
        assert_eq!(status(&slow), "503", "{}", &slow[..slow.len().min(400)]);
        assert!(slow.contains("time limit"), "{slow}");
        for line in big.lines().chain(slow.lines()) {
            assert_eq!(common::repeated_tail(line), None, "{line}");
        }
        for w in &mut workers {
            w.assert_alive(&format!(
                "a server stopped a query on its limits (round {round})"
            ));
        }
    }
    // A query that is one fragment under a LIMIT takes from each shard only the rows it keeps,
    // so it is answered within the limit that the whole star passes.
    let ask = get("ASK { ?s ?p ?o }", "");
    assert_eq!(status(&ask), "200", "{ask}");
    assert!(ask.contains("true"), "{ask}");
    let first = get("SELECT * { ?s ?p ?o } OFFSET 3 LIMIT 5", "");
    assert_eq!(status(&first), "200", "{first}");
    let body = first.split("\r\n\r\n").nth(1).unwrap();
    assert_eq!(body.lines().count(), 1 + 5, "{first}");
    drop(server);
}

/// Starts `nearflow serve --store DIR --cluster LIST EXTRA…` on a free loopback port: the
/// server (killed when dropped), its address, and the line it said first.
fn serve_cluster(dir: &Path, list: &str, extra: &[&str]) -> (Server, String, String) {
    let mut child = Command::new(BIN)
        .args(["serve", "--quiet", "--bind", "127.0.0.1:0", "--store"])
        .arg(dir)
        .args(["--cluster", list])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().expect("a line from serve").unwrap();
    std::thread::spawn(move || lines.for_each(drop));
    let addr = common::served_at(&first).unwrap_or_else(|| panic!("no address in {first:?}"));
    (Server(child), addr, first)
}

/// A server process, killed when the test is done with it or fails (a server left running
/// would hold the test's output open).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A response's status code.
fn status(response: &str) -> &str {
    response.split_whitespace().nth(1).unwrap_or("")
}
