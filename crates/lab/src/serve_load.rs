//! `nearflow bench serve`: the LAS paper's multi-query setting (§6.4: many queries at once,
//! competing for cores and caches) on a real endpoint. `nearflow serve`'s endpoint is started
//! in this process on a loopback port, once per policy, and N clients replay a query mix over
//! HTTP for a fixed time; the policies take turns in interleaved rounds. Another endpoint
//! (Oxigraph's server, started by `scripts/oxigraph-server.sh`) can be named with `--peer` and
//! is driven by the same clients in the same rounds.
//!
//! Every answer is checked: status 200 and the number of rows (or the boolean) the query gives
//! in this process before the clients start; a difference counts as a failure and is named.
//! Throughput counts right answers over the time driven (until the last request in flight at
//! the end of a turn returns); latency percentiles count every request, a failed one at the
//! time it failed.
//! The clients run on the same machine as the server and take part of its PUs: the figures
//! are those of a loaded host, not of the server alone.
//!
//! Bounded: each engine's turn lasts `seconds`, a request at most `request_timeout`, and the
//! clients stop at the end of the turn (a request in flight is waited for). Our endpoint stops
//! a query whose client left; a peer may not (Oxigraph's server went on computing requests
//! whose clients had timed out, and the turns after it ran slower: LAS 15.5 answers/s beside
//! it, 21.1 without it, on the same store), so the limit should leave the peer room to finish.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nearflow_policy::PolicyKind;
use nearflow_rt::{AllocatorKind, Pinning};
use nearflow_sparql::{self as sparql, Options, QueryResults};
use nearflow_topo::host::{cpu_label as host_cpu, in_a_vm};
use nearflow_topo::TopologySpec;
use serde::Serialize;

use crate::harness::{build_runtime, load_machine, parse_list, Csv};
use crate::Report;
use nearflow_rdf::open::Source;

/// The SPARQL 1.1 workloads over SP²Bench data (aggregates, paths, negation), by name.
pub const SPARQL11: &[(&str, &str)] = &[
    ("a1", include_str!("../queries/sp2bench-sparql11/a1.sparql")),
    ("a2", include_str!("../queries/sp2bench-sparql11/a2.sparql")),
    ("a3", include_str!("../queries/sp2bench-sparql11/a3.sparql")),
    ("p1", include_str!("../queries/sp2bench-sparql11/p1.sparql")),
    ("n1", include_str!("../queries/sp2bench-sparql11/n1.sparql")),
];

/// The default mix: SP²Bench's 17 queries and the SPARQL 1.1 workloads.
pub const DEFAULT_MIX: &str =
    "q1,q2,q3a,q3b,q3c,q4,q5a,q5b,q6,q7,q8,q9,q10,q11,q12a,q12b,q12c,a1,a2,a3,p1,n1";

#[derive(Debug, Clone)]
pub struct Config {
    /// The store: RDF files or a snapshot.
    pub source: Source,
    /// The query mix (comma-separated): SP²Bench's names (from `queries_dir`) and the SPARQL
    /// 1.1 workloads a1, a2, a3, p1, n1.
    pub queries: String,
    /// Where SP²Bench's query files are (as `bench sp2bench`).
    pub queries_dir: Option<PathBuf>,
    /// Concurrent clients.
    pub clients: usize,
    /// Seconds each engine is driven per round.
    pub seconds: f64,
    /// Instead of a time per turn: each client sends each query of the mix this many times
    /// per turn, in the mix's order from its own start, so every query is measured on every
    /// engine however slow the others are (`seconds` is then not used).
    pub each: Option<usize>,
    /// Interleaved rounds.
    pub rounds: usize,
    /// Policies of nearflow's runtime (comma-separated), one endpoint each.
    pub policies: String,
    /// Another endpoint's query URL (e.g. Oxigraph's server), driven alike.
    pub peer: Option<String>,
    /// The longest a request may take before it counts as failed.
    pub request_timeout: Duration,
    /// Queries each of our endpoints runs at once (default: `nearflow serve`'s).
    pub max_running: Option<usize>,
    /// Updates per second sent beside the mix (0: none). Each policy then has a second engine,
    /// `POLICY+updates`, over a durable copy of the store (a snapshot and log in a temporary
    /// directory, merged in the background as `nearflow serve` does), driven in the same
    /// rounds: the same mix, and an update stream of INSERT DATA and DELETE DATA in a named
    /// graph of its own (so that every query's expected answer stays right).
    pub updates_per_s: f64,
    /// The machine (default: this host).
    pub topology: TopologySpec,
    /// Thread binding (only applied on the host).
    pub pinning: Pinning,
    /// Also write the per-query table as CSV to this file.
    pub csv: Option<PathBuf>,
    /// No progress output.
    pub quiet: bool,
}

/// One engine's figures, over all rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Engine {
    /// `las`, `nls`, … or `peer`.
    pub engine: String,
    /// Answers checked and right.
    pub answered: u64,
    /// Failed requests (an error status, a wrong count, a timeout).
    pub failed: u64,
    /// Answers per second, over the time driven.
    pub throughput: f64,
    /// Answers per second in each round (the rounds interleave the engines).
    pub per_round: Vec<f64>,
    /// Median latency over all requests (a failed one at the time it failed), in seconds.
    pub p50: f64,
    /// 99th percentile latency over all queries, in seconds.
    pub p99: f64,
    /// Per query: name, right answers, median and 99th percentile seconds of all its requests.
    pub queries: Vec<(String, u64, f64, f64)>,
    /// The first failures, in words.
    pub failures: Vec<String>,
    /// With an update stream: updates acknowledged, failed, and their median and 99th
    /// percentile latency in seconds.
    pub updates: Option<(u64, u64, f64, f64)>,
}

/// What a query gives: rows, or a boolean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expected {
    Rows(u64),
    Boolean(bool),
    /// One row holding this count (a query wrapped in a count).
    Count(u64),
}

struct Sample {
    query: usize,
    seconds: f64,
    ok: Result<(), String>,
}

/// The suffix of a query name that asks for the query wrapped in a count (`q2:count`).
pub const COUNT_SUFFIX: &str = ":count";

fn texts(cfg: &Config, names: &[String]) -> Result<Vec<String>> {
    let base = |n: &String| n.strip_suffix(COUNT_SUFFIX).unwrap_or(n).to_owned();
    let mut sp2: Vec<String> = Vec::new();
    for n in names.iter().map(base) {
        if !SPARQL11.iter().any(|(k, _)| *k == n) {
            sp2.push(n);
        }
    }
    let mut sp2_texts = crate::sp2bench::query_texts(cfg.queries_dir.as_deref(), &sp2)?.into_iter();
    names
        .iter()
        .map(|n| {
            let text = match SPARQL11.iter().find(|(k, _)| *k == base(n)) {
                Some((_, t)) => t.to_string(),
                None => sp2_texts.next().expect("one text per SP²Bench name"),
            };
            if n.ends_with(COUNT_SUFFIX) {
                wrapped_in_count(&text).with_context(|| format!("query {n}"))
            } else {
                Ok(text)
            }
        })
        .collect()
}

/// `text`, a SELECT query, as the subquery of `SELECT (COUNT(*) AS ?count)`: its prologue
/// (`PREFIX`, `BASE`) kept in front, the rest inside. The answer is one row, the number of
/// rows the query gives, which every engine must compute without serialising them.
fn wrapped_in_count(text: &str) -> Result<String> {
    // The first `SELECT` outside an IRI and a comment starts the query after the prologue.
    let b = text.as_bytes();
    // Keyword `kw` at `i`, a whole word (not part of a name such as `ask:` or `?task`).
    let word = |i: usize, kw: &str| {
        let end = i + kw.len();
        let part = |j: usize| b[j].is_ascii_alphanumeric() || b[j] == b':' || b[j] == b'_';
        text.get(i..end).is_some_and(|w| w.eq_ignore_ascii_case(kw))
            && (i == 0 || !part(i - 1))
            && (end == b.len() || !part(end))
    };
    let mut i = 0;
    let mut start = None;
    while i < b.len() {
        match b[i] {
            b'<' => i += text[i..].find('>').map_or(b.len(), |e| e + 1),
            b'#' => i += text[i..].find('\n').map_or(b.len(), |e| e + 1),
            b'"' | b'\'' => bail!("a string before the query's form"),
            _ if word(i, "select") => {
                start = Some(i);
                break;
            }
            _ if ["ask", "construct", "describe"].iter().any(|k| word(i, k)) => {
                bail!("only a SELECT query can be wrapped in a count")
            }
            _ => i += 1,
        }
    }
    let Some(start) = start else {
        bail!("only a SELECT query can be wrapped in a count")
    };
    Ok(format!(
        "{}SELECT (COUNT(*) AS ?count) WHERE {{\n{}\n}}\n",
        &text[..start],
        &text[start..]
    ))
}

/// An `ASK`'s answer in the SPARQL JSON results format: its `boolean`; or, from Virtuoso 7,
/// which answers an `ASK` as a one-column table (`__ASK_RETVAL`: a row holding `1` for true, no
/// row or `0` for false), that table's value. `None` when the body is neither.
fn boolean_of(body: &str) -> Option<bool> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    if let Some(b) = v.get("boolean").and_then(serde_json::Value::as_bool) {
        return Some(b);
    }
    let vars = v.pointer("/head/vars")?.as_array()?;
    if vars.len() != 1 || vars[0].as_str() != Some("__ASK_RETVAL") {
        return None;
    }
    let rows = v.pointer("/results/bindings")?.as_array()?;
    Some(rows.iter().any(|r| {
        r.pointer("/__ASK_RETVAL/value")
            .and_then(serde_json::Value::as_str)
            == Some("1")
    }))
}

/// The count in a one-row, one-column TSV answer: `123`, or the literal
/// `"123"^^<…#integer>`. `None` when the body is not that.
pub(crate) fn count_of(body: &str) -> Option<u64> {
    let mut lines = body.lines().filter(|l| !l.is_empty());
    let (_, value, rest) = (lines.next()?, lines.next()?, lines.next());
    if rest.is_some() {
        return None;
    }
    count_of_term(value)
}

/// A count written as a term: `123`, or the literal `"123"^^<…#integer>`.
fn count_of_term(value: &str) -> Option<u64> {
    let v = value.trim();
    let v = match v.strip_prefix('"') {
        Some(q) => {
            let (lex, dt) = q.split_once('"')?;
            if !dt.is_empty() && !dt.starts_with("^^") {
                return None;
            }
            lex
        }
        None => v,
    };
    v.parse().ok()
}

/// One request: its latency and whether its answer is the expected one. The query goes as an
/// HTML form (`query=…` in a POST body), the form of the SPARQL 1.1 Protocol every endpoint
/// here takes (Virtuoso 7 does not read a body of type `application/sparql-query`).
fn ask(agent: &ureq::Agent, url: &str, text: &str, expected: Expected) -> Result<(), String> {
    let accept = match expected {
        Expected::Rows(_) | Expected::Count(_) => "text/tab-separated-values",
        Expected::Boolean(_) => "application/sparql-results+json",
    };
    let mut r = agent
        .post(url)
        .header("Accept", accept)
        .send_form([("query", text)])
        .map_err(|e| e.to_string())?;
    let status = r.status();
    let body = r
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()
        .map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("status {status}: {}", body.trim()));
    }
    let got = match expected {
        Expected::Rows(_) => Expected::Rows(body.lines().count().saturating_sub(1) as u64),
        Expected::Count(_) => match count_of(&body) {
            Some(n) => Expected::Count(n),
            None => return Err(format!("not a count: {}", body.trim())),
        },
        Expected::Boolean(_) => match boolean_of(&body) {
            Some(b) => Expected::Boolean(b),
            None => return Err(format!("not an ASK's answer: {}", body.trim())),
        },
    };
    if got != expected {
        return Err(format!("answer {got:?}, expected {expected:?}"));
    }
    Ok(())
}

/// How long a turn lasts: a time, or each query a number of times.
#[derive(Clone, Copy)]
enum Turn {
    Seconds(f64),
    Each(usize),
}

/// Drives `url` with `clients` clients for a turn, each replaying the mix from its own
/// starting point.
fn drive(
    url: &str,
    mix: &[(String, String, Expected)],
    clients: usize,
    turn: Turn,
    timeout: Duration,
) -> (Vec<Sample>, f64) {
    let seconds = match turn {
        Turn::Seconds(s) => s,
        Turn::Each(_) => f64::INFINITY,
    };
    let until = Instant::now() + Duration::from_secs_f64(seconds.min(1e9));
    let requests = match turn {
        Turn::Seconds(_) => usize::MAX,
        Turn::Each(n) => n * mix.len(),
    };
    let started = Instant::now();
    let samples = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                s.spawn(move || {
                    let agent: ureq::Agent = ureq::Agent::config_builder()
                        .http_status_as_error(false)
                        .timeout_global(Some(timeout))
                        .build()
                        .into();
                    let mut out = Vec::new();
                    let mut k = c;
                    // With `Each`, query `i` is sent `n` times in a row (its samples beside
                    // each other in time), then the next.
                    let per = requests / mix.len().max(1);
                    let mut sent = 0;
                    while Instant::now() < until && sent < requests {
                        let i = match turn {
                            Turn::Seconds(_) => k % mix.len(),
                            Turn::Each(_) => (c + sent / per) % mix.len(),
                        };
                        k += 1;
                        sent += 1;
                        let t = Instant::now();
                        let ok = ask(&agent, url, &mix[i].1, mix[i].2);
                        out.push(Sample {
                            query: i,
                            seconds: t.elapsed().as_secs_f64(),
                            ok,
                        });
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect::<Vec<_>>()
    });
    (samples, started.elapsed().as_secs_f64())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// What an update stream did to a policy's throughput, from the per-round throughputs without
/// (`a`) and with (`b`) it, each round's pair measured side by side: the median of the rounds'
/// ratios and their range, or, with fewer than 3 rounds, that no ratio is given (a ratio of two
/// short turns is mostly the host's noise).
fn update_cost(policy: &str, cfg: &Config, a: &[f64], b: &[f64]) -> String {
    let rounds = a.len().min(b.len());
    if rounds < 3 {
        return format!(
            "{policy}: with {} updates/s: not compared — {rounds} round(s) of {} s cannot tell \
             the update stream's cost from the host's noise (give --rounds 3 or more)",
            cfg.updates_per_s, cfg.seconds
        );
    }
    let mut ratios: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(x, _)| **x > 0.0)
        .map(|(x, y)| y / x)
        .collect();
    ratios.sort_by(f64::total_cmp);
    if ratios.is_empty() {
        return format!("{policy}: no answer without updates to compare with");
    }
    format!(
        "{policy}: with {} updates/s the throughput is {:.0} % of without (median of {} rounds' \
         ratios; rounds {:.0}–{:.0} %)",
        cfg.updates_per_s,
        100.0 * percentile(&ratios, 0.5),
        ratios.len(),
        100.0 * ratios[0],
        100.0 * ratios[ratios.len() - 1]
    )
}

fn summarize(
    engine: &str,
    mix: &[(String, String, Expected)],
    samples: &[Sample],
    time: f64,
) -> Engine {
    // Latency counts every request, a failed one at the time it failed (a timeout at the
    // limit): leaving failures out would flatter an engine whose slow queries time out.
    let mut all: Vec<f64> = samples.iter().map(|s| s.seconds).collect();
    all.sort_by(f64::total_cmp);
    let answered = samples.iter().filter(|s| s.ok.is_ok()).count() as u64;
    let queries = mix
        .iter()
        .enumerate()
        .map(|(i, (name, _, _))| {
            let mine = || samples.iter().filter(move |s| s.query == i);
            let mut v: Vec<f64> = mine().map(|s| s.seconds).collect();
            v.sort_by(f64::total_cmp);
            let ok = mine().filter(|s| s.ok.is_ok()).count() as u64;
            (name.clone(), ok, percentile(&v, 0.5), percentile(&v, 0.99))
        })
        .collect();
    let failures: Vec<String> = samples
        .iter()
        .filter_map(|s| {
            s.ok.as_ref()
                .err()
                .map(|e| format!("{}: {e}", mix[s.query].0))
        })
        .take(5)
        .collect();
    Engine {
        engine: engine.to_owned(),
        answered,
        failed: samples.iter().filter(|s| s.ok.is_err()).count() as u64,
        throughput: answered as f64 / time.max(1e-9),
        per_round: Vec::new(),
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
        queries,
        failures,
        updates: None,
    }
}

/// The graph and predicate the update stream writes: the mix reads the default graph only
/// (and a1 counts the default graph's predicates), so every expected answer stays right.
const UPDATE_G: &str = "http://nearflow.invalid/bench";
const UPDATE_P: &str = "http://nearflow.invalid/bench#touched";

/// Sends `rate` updates a second to `url` (its `/update`) until `stop`: each inserts ten
/// triples on a subject of its own (in a graph of the stream's own), and every other one
/// deletes those of an earlier one.
/// Returns each update's latency and whether it was acknowledged (204).
fn update_stream(
    url: &str,
    rate: f64,
    timeout: Duration,
    stop: &std::sync::atomic::AtomicBool,
    first: u64,
) -> Vec<(f64, bool)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into();
    let url = url.replace("/query", "/update");
    let period = Duration::from_secs_f64(1.0 / rate);
    let mut out = Vec::new();
    let mut next = Instant::now();
    let mut k = first;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
            continue;
        }
        next += period;
        let triples = |k: u64| -> String {
            let t: String = (0..10)
                .map(|i| format!("<http://nearflow.invalid/u{k}> <{UPDATE_P}> {i} . "))
                .collect();
            format!("GRAPH <{UPDATE_G}> {{ {t} }}")
        };
        let text = if k % 2 == 1 && k > first + 2 {
            format!(
                "DELETE DATA {{ {} }} ; INSERT DATA {{ {} }}",
                triples(k - 3),
                triples(k)
            )
        } else {
            format!("INSERT DATA {{ {} }}", triples(k))
        };
        k += 1;
        let t = Instant::now();
        let ok = agent
            .post(&url)
            .content_type("application/sparql-update")
            .send(&text)
            .is_ok_and(|r| r.status() == 204);
        out.push((t.elapsed().as_secs_f64(), ok));
    }
    out
}

/// A directory removed when dropped (the durable copies of the store the update stream writes).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running endpoint of ours on a loopback port; stopped when dropped.
pub(crate) struct Server {
    pub(crate) url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    io: Option<tokio::runtime::Runtime>,
}

impl Server {
    pub(crate) fn start(endpoint: Arc<nearflow_serve::Endpoint>) -> Result<Server> {
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let listener = io.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let url = format!("http://{}/query", listener.local_addr()?);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        io.spawn(nearflow_serve::serve(listener, endpoint, async move {
            let _ = rx.await;
        }));
        Ok(Server {
            url,
            stop: Some(tx),
            io: Some(io),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(io) = self.io.take() {
            io.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

pub fn run(cfg: &Config) -> Result<Report<Vec<Engine>>> {
    let policies: Vec<PolicyKind> = parse_list(&cfg.policies)?;
    let names: Vec<String> = parse_list(&cfg.queries)?;
    if names.is_empty() || (policies.is_empty() && cfg.peer.is_none()) {
        bail!("give at least one query and one policy (or a peer)");
    }
    if !(1..=1024).contains(&cfg.clients) {
        bail!("--clients must be 1..=1024");
    }
    if !(cfg.seconds > 0.0 && cfg.seconds <= 3600.0) {
        bail!("--seconds must be more than 0 and at most 3600");
    }
    let turn = match cfg.each {
        Some(n) if (1..=10_000).contains(&n) => Turn::Each(n),
        Some(_) => bail!("--each must be 1..=10000"),
        None => Turn::Seconds(cfg.seconds),
    };
    if !(1..=100).contains(&cfg.rounds) {
        bail!("--rounds must be 1..=100");
    }
    let texts = texts(cfg, &names)?;
    let machine = load_machine(&cfg.topology)?;
    let store = Arc::new(
        cfg.source
            .open(&machine, &crate::harness::Said(cfg.quiet))?,
    );
    // The expected answers, from this process.
    let mut mix = Vec::new();
    {
        let rt = build_runtime(
            machine.clone(),
            PolicyKind::Las,
            cfg.pinning,
            false,
            AllocatorKind::Nearflow,
        )?;
        for (name, text) in names.iter().zip(&texts) {
            let p = sparql::prepare(&store, text, &Options::default())
                .with_context(|| format!("query {name}"))?;
            let answer = p
                .execute(&rt, None)
                .with_context(|| format!("query {name}"))?;
            let expected = match answer {
                QueryResults::Boolean(a) => Expected::Boolean(a.value),
                QueryResults::Solutions(s) => {
                    let out = s.collect().with_context(|| format!("query {name}"))?;
                    if name.ends_with(COUNT_SUFFIX) {
                        let n = out
                            .rows
                            .get(0)
                            .and_then(|r| out.term(r, 0))
                            .map(|t| t.to_string());
                        match n.as_deref().and_then(count_of_term) {
                            Some(n) if out.rows.len() == 1 => Expected::Count(n),
                            _ => bail!("query {name}: not one count ({n:?})"),
                        }
                    } else {
                        Expected::Rows(out.rows.len() as u64)
                    }
                }
                QueryResults::Graph(_) => {
                    bail!("query {name} is a CONSTRUCT or DESCRIBE; the mix takes SELECT and ASK")
                }
            };
            mix.push((name.clone(), text.clone(), expected));
        }
    }
    let mut out = String::new();
    writeln!(
        out,
        "serve: {} triples; machine {}; host CPU {}{}; {} clients on the same host, {} per engine per round, {} rounds interleaved; mix {}",
        store.len(),
        machine.label(),
        host_cpu(),
        if in_a_vm() { " (a VM)" } else { "" },
        cfg.clients,
        match turn {
            Turn::Seconds(s) => format!("{s} s"),
            Turn::Each(n) => format!("each query {n} times"),
        },
        cfg.rounds,
        names.join(",")
    )?;
    // Each engine: a policy's endpoint, or the peer; the rounds go round them in turn. With an
    // update stream, each policy also serves a durable copy of the store that takes it.
    let with_updates = cfg.updates_per_s > 0.0;
    if !(0.0..=10_000.0).contains(&cfg.updates_per_s) {
        bail!("--updates must be 0..=10000 a second");
    }
    let copy = if with_updates {
        let dir = std::env::temp_dir().join(format!("nearflow-bench-serve-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Some(TempDir(dir))
    } else {
        None
    };
    let mut engines: Vec<(String, Option<Arc<nearflow_serve::Endpoint>>, bool)> = Vec::new();
    let mut mergers = Vec::new();
    for &p in &policies {
        let rt = build_runtime(
            machine.clone(),
            p,
            cfg.pinning,
            false,
            AllocatorKind::Nearflow,
        )?;
        let mut c = nearflow_serve::Config::for_pus(machine.pu_count());
        c.timeout = cfg.request_timeout;
        if let Some(m) = cfg.max_running {
            c.max_running = m;
            c.memory_limit = nearflow_serve::Config::memory_limit_for(m);
        }
        c.max_waiting = cfg.clients.max(64);
        let rt = Arc::new(rt);
        engines.push((
            p.to_string(),
            Some(nearflow_serve::Endpoint::new(
                Arc::new(nearflow_rdf::db::Db::read_only((*store).clone())),
                rt.clone(),
                c.clone(),
            )),
            false,
        ));
        if let Some(TempDir(dir)) = &copy {
            let path = dir.join(format!("{p}.nfs"));
            nearflow_rdf::snapshot::save(&store, &path)?;
            let db = Arc::new(nearflow_rdf::db::Db::open(&path, &machine, true)?);
            mergers.push((db.clone(), db.start_merger()));
            engines.push((
                format!("{p}+updates"),
                Some(nearflow_serve::Endpoint::new(db, rt, c)),
                true,
            ));
        }
    }
    if cfg.peer.is_some() {
        engines.push(("peer".to_owned(), None, false));
    }
    let mut update_samples: Vec<Vec<(f64, bool)>> = engines.iter().map(|_| Vec::new()).collect();
    let mut next_update = 0u64;
    let mut samples: Vec<(Vec<Sample>, f64)> = engines.iter().map(|_| (Vec::new(), 0.0)).collect();
    let mut per_round: Vec<Vec<f64>> = engines.iter().map(|_| Vec::new()).collect();
    for round in 0..cfg.rounds {
        for (e, (name, endpoint, updates)) in engines.iter().enumerate() {
            if !cfg.quiet {
                eprintln!("round {}/{}: {name}", round + 1, cfg.rounds);
            }
            let (s, t) = match endpoint {
                Some(ep) => {
                    let server = Server::start(ep.clone())?;
                    let stop = std::sync::atomic::AtomicBool::new(false);
                    let r = std::thread::scope(|s| {
                        let stream = updates.then(|| {
                            let (url, stop) = (&server.url, &stop);
                            let first = next_update;
                            s.spawn(move || {
                                update_stream(
                                    url,
                                    cfg.updates_per_s,
                                    cfg.request_timeout,
                                    stop,
                                    first,
                                )
                            })
                        });
                        let r = drive(&server.url, &mix, cfg.clients, turn, cfg.request_timeout);
                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                        if let Some(h) = stream {
                            let u = h.join().unwrap_or_default();
                            next_update += u.len() as u64 + 4;
                            update_samples[e].extend(u);
                        }
                        r
                    });
                    drop(server);
                    r
                }
                None => drive(
                    cfg.peer.as_deref().expect("the peer engine has a URL"),
                    &mix,
                    cfg.clients,
                    turn,
                    cfg.request_timeout,
                ),
            };
            let answered = s.iter().filter(|x| x.ok.is_ok()).count();
            per_round[e].push(answered as f64 / t.max(1e-9));
            samples[e].0.extend(s);
            samples[e].1 += t;
        }
    }
    for (db, merger) in mergers {
        db.stop_merger();
        let _ = merger.join();
    }
    let results: Vec<Engine> = engines
        .iter()
        .zip(&samples)
        .zip(&update_samples)
        .zip(per_round)
        .map(|((((name, _, updates), (s, t)), u), rounds)| {
            let mut e = summarize(name, &mix, s, *t);
            e.per_round = rounds;
            if *updates {
                let mut lat: Vec<f64> = u.iter().map(|(l, _)| *l).collect();
                lat.sort_by(f64::total_cmp);
                let ok = u.iter().filter(|(_, ok)| *ok).count() as u64;
                e.updates = Some((
                    ok,
                    u.len() as u64 - ok,
                    percentile(&lat, 0.5),
                    percentile(&lat, 0.99),
                ));
            }
            e
        })
        .collect();
    writeln!(
        out,
        "\n| engine | answered | failed | answers/s | p50 | p99 |{}",
        if with_updates {
            " updates acked / failed | update p50 / p99 |"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|{}",
        if with_updates { "---:|---:|" } else { "" }
    )?;
    for r in &results {
        let upd = match (with_updates, r.updates) {
            (false, _) => String::new(),
            (true, None) => " (no updates) | |".to_owned(),
            (true, Some((ok, failed, p50, p99))) => format!(
                " {ok} / {failed} | {:.2} / {:.2} ms |",
                p50 * 1e3,
                p99 * 1e3
            ),
        };
        writeln!(
            out,
            "| {} | {} | {} | {:.1} | {:.2} ms | {:.2} ms |{upd}",
            r.engine,
            r.answered,
            r.failed,
            r.throughput,
            r.p50 * 1e3,
            r.p99 * 1e3
        )?;
    }
    if with_updates {
        for p in &policies {
            let of = |n: &str| results.iter().find(|r| r.engine == n).map(|r| &r.per_round);
            if let (Some(a), Some(b)) = (of(&p.to_string()), of(&format!("{p}+updates"))) {
                writeln!(out, "{}", update_cost(&p.to_string(), cfg, a, b))?;
            }
        }
    }
    writeln!(out, "\nper query, p50 / p99 (ms):\n")?;
    // With one endpoint of ours and the peer: ours over the peer's, per query (medians).
    let ratio = (results.len() == 2 && results[1].engine == "peer").then_some((0, 1));
    let header: Vec<String> = std::iter::once("query".to_owned())
        .chain(results.iter().map(|r| r.engine.clone()))
        .chain(ratio.map(|_| format!("{} / peer", results[0].engine)))
        .collect();
    writeln!(out, "| {} |", header.join(" | "))?;
    writeln!(
        out,
        "|---|{}",
        "---:|".repeat(results.len() + usize::from(ratio.is_some()))
    )?;
    let mut csv = Csv::new(&["query", "engine", "answers", "p50_s", "p99_s"]);
    for (i, (name, _, _)) in mix.iter().enumerate() {
        let mut cells: Vec<String> = results
            .iter()
            .map(|r| {
                let (_, n, p50, p99) = &r.queries[i];
                csv.row(&[
                    name.clone(),
                    r.engine.clone(),
                    n.to_string(),
                    format!("{p50:.6}"),
                    format!("{p99:.6}"),
                ]);
                if p50.is_nan() {
                    "not reached".to_owned()
                } else {
                    format!("{:.2} / {:.2}", p50 * 1e3, p99 * 1e3)
                }
            })
            .collect();
        if let Some((a, b)) = ratio {
            let (x, y) = (results[a].queries[i].2, results[b].queries[i].2);
            cells.push(if x.is_nan() || y.is_nan() {
                String::new()
            } else {
                format!("{:.2}", x / y)
            });
        }
        writeln!(out, "| {name} | {} |", cells.join(" | "))?;
    }
    if results
        .iter()
        .any(|r| r.queries.iter().any(|(_, _, p50, _)| p50.is_nan()))
    {
        writeln!(
            out,
            "\nnot reached: no client came to that query before the turn ended (each client \
             replays the mix in order from its own start; a longer --seconds reaches them all)"
        )?;
    }
    for r in &results {
        for f in &r.failures {
            writeln!(out, "FAILED ({}): {f}", r.engine)?;
        }
    }
    if results.iter().any(|r| {
        r.engine == "peer"
            && r.failures
                .iter()
                .any(|f| f.to_lowercase().contains("timeout"))
    }) {
        writeln!(
            out,
            "note: a peer request that failed by timeout may still be running in the peer, taking \
             CPU from the turns after it; give --request-timeout room for the peer's slowest query"
        )?;
    }
    if let Some(path) = &cfg.csv {
        csv.write(path)?;
    }
    Ok(Report::new(results, out))
}

#[cfg(test)]
mod tests {
    use super::{boolean_of, count_of, wrapped_in_count};

    /// The prologue stays in front, the query goes inside; a `SELECT` inside an IRI or a
    /// comment is not the query's; only a SELECT is wrapped.
    #[test]
    fn a_select_is_wrapped_in_a_count() {
        let q = "PREFIX s: <http://x/select#>\n# select nothing\nBASE <http://y/>\nSELECT ?a WHERE { ?a s:p ?b } ORDER BY ?a LIMIT 3";
        let w = wrapped_in_count(q).unwrap();
        assert_eq!(
            w,
            "PREFIX s: <http://x/select#>\n# select nothing\nBASE <http://y/>\nSELECT (COUNT(*) AS ?count) WHERE {\nSELECT ?a WHERE { ?a s:p ?b } ORDER BY ?a LIMIT 3\n}\n"
        );
        spargebra::SparqlParser::new().parse_query(&w).unwrap();
        assert!(wrapped_in_count("PREFIX a: <http://a/> ASK { ?s ?p ?o }").is_err());
        // A prefix named like a form is a name, not the form.
        let w = wrapped_in_count(
            "PREFIX ask: <http://a/> PREFIX askme: <http://b/> SELECT ?x { ?x ask:p askme:o }",
        )
        .unwrap();
        assert!(
            w.starts_with("PREFIX ask: <http://a/> PREFIX askme: <http://b/> SELECT (COUNT(*)"),
            "{w}"
        );
        assert!(wrapped_in_count("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }").is_err());
        assert!(wrapped_in_count("nothing").is_err());
    }

    /// A count in TSV, bare or as a typed literal; anything else is not one.
    #[test]
    fn counts_are_read_from_tsv() {
        assert_eq!(count_of("?count\n42\n"), Some(42));
        assert_eq!(
            count_of("?count\n\"42\"^^<http://www.w3.org/2001/XMLSchema#integer>\n"),
            Some(42)
        );
        assert_eq!(count_of("?count\n42\n43\n"), None);
        assert_eq!(count_of("?count\n"), None);
        assert_eq!(count_of("?count\n\"42\"@en\n"), None);
        assert_eq!(count_of("?count\nx\n"), None);
    }

    /// The SPARQL JSON form, and Virtuoso 7's one-column table: a row holding `1` is true, no
    /// row or a `0` false; anything else is not an answer.
    #[test]
    fn ask_answers_are_read_in_both_forms() {
        assert_eq!(boolean_of(r#"{"head":{},"boolean":true}"#), Some(true));
        assert_eq!(boolean_of(r#"{"head":{},"boolean":false}"#), Some(false));
        let virtuoso = |rows: &str| {
            format!(
                r#"{{ "head": {{ "link": [], "vars": ["__ASK_RETVAL"] }},
                  "results": {{ "distinct": false, "ordered": true, "bindings": [{rows}] }} }}"#
            )
        };
        let row = |v: &str| {
            format!(
                r#"{{ "__ASK_RETVAL": {{ "type": "typed-literal", "datatype": "http://www.w3.org/2001/XMLSchema#integer", "value": "{v}" }} }}"#
            )
        };
        assert_eq!(boolean_of(&virtuoso(&row("1"))), Some(true));
        assert_eq!(boolean_of(&virtuoso(&row("0"))), Some(false));
        assert_eq!(boolean_of(&virtuoso("")), Some(false));
        let other = r#"{"head":{"vars":["x"]},"results":{"bindings":[{"x":{"type":"literal","value":"1"}}]}}"#;
        assert_eq!(boolean_of(other), None);
        assert_eq!(boolean_of("true"), None);
        assert_eq!(boolean_of("<html>error</html>"), None);
    }
}
