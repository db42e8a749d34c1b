//! `nearflow bench shapes`: query shapes one at a time, generated from a store's own statistics
//! as a user would point it at their own data, sent to our endpoint and to the peers' servers
//! in interleaved rounds, every answer compared.
//!
//! The predicates are picked by size from the store's per-predicate counts: the largest
//! (`large`), the next largest that shares subjects with it (`large2`), a small one that shares
//! subjects with it (`small`: the smallest with at least [`SMALL_MIN`] triples and at most a
//! fiftieth of `large`), a pair whose first predicate's objects are the second's subjects
//! (`path`), and the largest predicates whose objects are numbers, plain strings and
//! language-tagged strings. Each shape tests one feature: joins of a small and a large
//! predicate (both orders), of two large ones and along a path; a star of three; OPTIONAL,
//! EXISTS, NOT EXISTS and MINUS from either side; UNION; GROUP BY; DISTINCT; numeric, string and
//! language filters; a large result. Each is asked counted (`SELECT (COUNT(*) AS ?count)`, the
//! engine computes the rows and sends one) and in full (every row sent); a shape whose
//! predicates the store lacks is left out and named.
//!
//! Our endpoint (`nearflow serve`'s, in this process on a loopback port, with its default
//! limits) and each peer (`NAME=URL`: Virtuoso and Oxigraph started by
//! `scripts/virtuoso-server.sh` and `scripts/oxigraph-server.sh` over the same file) get every
//! query once to warm up, then once per round, the engines' order rotating each round. The
//! answer of a counted query is its count, of one in full its number of rows; the majority's
//! answer is the right one, and an engine whose answer differs has its time left out of the
//! comparison (and named). A query an engine refuses or times out is named too.//!
//! Here: the run and its report; `pick.rs`: the predicates picked and the queries made of them.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nearflow_policy::PolicyKind;
use nearflow_rdf::open::Source;
use nearflow_rdf::term::TermRef;
use nearflow_rt::{AllocatorKind, Pinning, Runtime};
use nearflow_sparql::{self as sparql, Options, QueryResults};
use nearflow_topo::host::{cpu_label as host_cpu, in_a_vm};
use nearflow_topo::TopologySpec;
use serde::Serialize;

use crate::harness::{build_runtime, load_machine};
use crate::serve_load::{count_of, Server};
use crate::Report;

mod pick;

use pick::*;
pub use pick::{generate, pick};

/// The fewest triples of the `small` predicate.
pub const SMALL_MIN: u64 = 100;

/// Predicates tried for a pair (the largest ones).
const PAIR_CANDIDATES: usize = 12;

#[derive(Debug, Clone)]
pub struct Config {
    /// The store: RDF files or a snapshot.
    pub source: Source,
    /// The peers' endpoints, `(name, query URL)`.
    pub peers: Vec<(String, String)>,
    /// Timed rounds (after one warm-up).
    pub rounds: usize,
    /// Only these shapes (by name, comma-separated); all when `None`.
    pub only: Option<String>,
    /// Ask each shape counted (`SELECT (COUNT(*) AS ?count) { … }`).
    pub counted: bool,
    /// Ask each shape in full (every row sent).
    pub full: bool,
    /// The longest a request may take before it counts as failed.
    pub request_timeout: Duration,
    /// Write the generated queries to this directory (one `.sparql` file each) and stop.
    pub write_queries: Option<PathBuf>,
    /// The machine our endpoint runs on.
    pub topology: TopologySpec,
    pub pinning: Pinning,
    /// No progress output.
    pub quiet: bool,
}

/// One generated query.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ShapeQuery {
    /// `shape` and the form: `optional-small-large:count`, `optional-small-large:full`.
    pub name: String,
    /// The shape, as `--only` names it.
    pub shape: String,
    /// Counted (one row, the count) or in full.
    pub counted: bool,
    pub text: String,
}

/// The predicates a store's shapes are built on (full IRIs) and their triples.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Picked {
    pub large: Option<(String, u64)>,
    pub large2: Option<(String, u64)>,
    pub small: Option<(String, u64)>,
    pub path: Option<(String, String)>,
    pub numeric: Option<(String, String)>,
    pub string: Option<(String, String)>,
    pub lang: Option<(String, String)>,
}

/// One query's results: per engine (ours first, then the peers in order), the median time over
/// the rounds and the answer.
#[derive(Debug, Clone, Serialize)]
pub struct QueryRow {
    pub name: String,
    pub shape: String,
    /// Median milliseconds per engine; `None` when it failed.
    pub median_ms: Vec<Option<f64>>,
    /// Each engine's answer (count or rows), or its error.
    pub answers: Vec<Result<u64, String>>,
    /// Whether each engine's answer is the majority's.
    pub right: Vec<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Shapes {
    pub triples: u64,
    pub engines: Vec<String>,
    pub picked: Picked,
    /// Shapes left out, with why.
    pub left_out: Vec<(String, String)>,
    pub rows: Vec<QueryRow>,
}

/// One request: its time and its answer (the count, or the rows), or why it failed.
fn ask(agent: &ureq::Agent, url: &str, q: &ShapeQuery) -> (f64, Result<u64, String>) {
    let t = Instant::now();
    let answer = (|| {
        let mut r = agent
            .post(url)
            .header("Accept", "text/tab-separated-values")
            .send_form([("query", q.text.as_str())])
            .map_err(|e| e.to_string())?;
        let status = r.status();
        let body = r
            .body_mut()
            .with_config()
            .limit(1 << 34)
            .read_to_string()
            .map_err(|e| e.to_string())?;
        if status != 200 {
            return Err(format!("status {status}: {}", body.trim()));
        }
        if q.counted {
            count_of(&body).ok_or_else(|| format!("not a count: {}", body.trim()))
        } else {
            Ok(body.lines().count().saturating_sub(1) as u64)
        }
    })();
    (t.elapsed().as_secs_f64(), answer)
}

/// The value more engines gave than any other; `None` when none answered or two values tie
/// (two engines that differ: neither is taken as right).
fn majority(answers: &[Result<u64, String>]) -> Option<u64> {
    let ok: Vec<u64> = answers
        .iter()
        .filter_map(|a| a.as_ref().ok().copied())
        .collect();
    let given = |v: u64| ok.iter().filter(|&&w| w == v).count();
    let most = ok.iter().map(|&v| given(v)).max()?;
    let mut top: Vec<u64> = ok.iter().copied().filter(|&v| given(v) == most).collect();
    top.sort_unstable();
    top.dedup();
    match top.as_slice() {
        [v] => Some(*v),
        _ => None,
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn geomean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

pub fn run(cfg: &Config) -> Result<Report<Shapes>> {
    if !(1..=100).contains(&cfg.rounds) {
        bail!("--rounds must be 1..=100");
    }
    if !cfg.counted && !cfg.full {
        bail!("give at least one form (counted or full)");
    }
    for (name, url) in &cfg.peers {
        if name.is_empty()
            || name == "nearflow"
            || cfg.peers.iter().filter(|p| &p.0 == name).count() > 1
        {
            bail!("each peer needs its own name, other than nearflow: {name}={url}");
        }
    }
    let machine = load_machine(&cfg.topology)?;
    let store = Arc::new(
        cfg.source
            .open(&machine, &crate::harness::Said(cfg.quiet))?,
    );
    let rt = Arc::new(build_runtime(
        machine.clone(),
        PolicyKind::Las,
        cfg.pinning,
        false,
        AllocatorKind::Nearflow,
    )?);
    if !cfg.quiet {
        eprintln!("shapes: picking predicates from the store's statistics");
    }
    let picked = pick(&store, &rt)?;
    let (mut shapes, left_out) = generate(&picked);
    if let Some(only) = &cfg.only {
        let want: Vec<&str> = only
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        for w in &want {
            if !shapes.iter().any(|(s, _)| s == w) && !left_out.iter().any(|(s, _)| s == w) {
                bail!(
                    "no shape {w}; the shapes: {}",
                    shape_names(&shapes, &left_out)
                );
            }
        }
        shapes.retain(|(s, _)| want.contains(&s.as_str()));
    }
    let queries = forms(&shapes, cfg.counted, cfg.full);
    if let Some(dir) = &cfg.write_queries {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
        for q in &queries {
            let path = dir.join(format!("{}.sparql", q.name.replace(':', "-")));
            std::fs::write(&path, format!("{}\n", q.text))
                .with_context(|| format!("{}", path.display()))?;
        }
        let text = format!(
            "shapes: {} queries written to {}\n",
            queries.len(),
            dir.display()
        );
        return Ok(Report::new(
            Shapes {
                triples: store.len(),
                engines: Vec::new(),
                picked,
                left_out,
                rows: Vec::new(),
            },
            text,
        ));
    }
    let mut c = nearflow_serve::Config::for_pus(machine.pu_count());
    c.timeout = cfg.request_timeout;
    let ours = Server::start(nearflow_serve::Endpoint::new(
        Arc::new(nearflow_rdf::db::Db::read_only((*store).clone())),
        rt.clone(),
        c,
    ))?;
    let mut engines: Vec<(String, String)> = vec![("nearflow".to_owned(), ours.url.clone())];
    engines.extend(cfg.peers.iter().cloned());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(cfg.request_timeout))
        .build()
        .into();
    let e = engines.len();
    // Warm-up: each engine's answer to each query.
    let mut answers: Vec<Vec<Result<u64, String>>> = Vec::new();
    let bar = crate::harness::progress(
        (queries.len() * e * (cfg.rounds + 1)) as u64,
        "shapes",
        cfg.quiet,
    );
    for q in &queries {
        let mut a = Vec::new();
        for (_, url) in &engines {
            a.push(ask(&agent, url, q).1);
            bar.inc(1);
        }
        answers.push(a);
    }
    let mut times: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); e]; queries.len()];
    for round in 0..cfg.rounds {
        for (i, q) in queries.iter().enumerate() {
            for k in 0..e {
                let j = (k + round) % e;
                if answers[i][j].is_err() {
                    bar.inc(1);
                    continue;
                }
                let (t, a) = ask(&agent, &engines[j].1, q);
                match a {
                    Ok(v) if answers[i][j] == Ok(v) => times[i][j].push(t * 1e3),
                    Ok(v) => {
                        answers[i][j] = Err(format!(
                            "answers changed between rounds: {:?} then {v}",
                            answers[i][j]
                        ))
                    }
                    Err(m) => answers[i][j] = Err(m),
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    drop(ours);
    let rows: Vec<QueryRow> = queries
        .iter()
        .zip(answers)
        .zip(times)
        .map(|((q, answers), times)| {
            let m = majority(&answers);
            let right: Vec<bool> = answers
                .iter()
                .map(|a| a.as_ref().ok() == m.as_ref())
                .collect();
            QueryRow {
                name: q.name.clone(),
                shape: q.shape.clone(),
                median_ms: times
                    .into_iter()
                    .zip(&answers)
                    .map(|(t, a)| if a.is_ok() { median(t) } else { None })
                    .collect(),
                answers,
                right,
            }
        })
        .collect();
    let data = Shapes {
        triples: store.len(),
        engines: engines.iter().map(|(n, _)| n.clone()).collect(),
        picked,
        left_out,
        rows,
    };
    let text = render(cfg, &data)?;
    Ok(Report::new(data, text))
}

fn shape_names(shapes: &[(String, String)], left_out: &[(String, String)]) -> String {
    shapes
        .iter()
        .chain(left_out)
        .map(|(s, _)| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report's tables.
fn render(cfg: &Config, d: &Shapes) -> Result<String> {
    let mut out = String::new();
    writeln!(
        out,
        "shapes: {} triples; host CPU {}{}; {} queries, one warm-up then {} interleaved rounds; engines: {}",
        d.triples,
        host_cpu(),
        if in_a_vm() { " (a VM)" } else { "" },
        d.rows.len(),
        cfg.rounds,
        d.engines
            .iter()
            .zip(std::iter::once("in this process").chain(cfg.peers.iter().map(|p| p.1.as_str())))
            .map(|(n, u)| format!("{n} ({u})"))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    let show = |x: &Option<(String, u64)>| {
        x.as_ref()
            .map_or("none".to_owned(), |(p, n)| format!("<{p}> ({n} triples)"))
    };
    writeln!(
        out,
        "predicates: large {}, large2 {}, small {}; path {}; numeric {}; string {}; lang {}",
        show(&d.picked.large),
        show(&d.picked.large2),
        show(&d.picked.small),
        d.picked
            .path
            .as_ref()
            .map_or("none".into(), |(a, b)| format!("<{a}> then <{b}>")),
        d.picked
            .numeric
            .as_ref()
            .map_or("none".into(), |(p, v)| format!("<{p}> > {v}")),
        d.picked
            .string
            .as_ref()
            .map_or("none".into(), |(p, w)| format!("<{p}> \"{w}\"")),
        d.picked
            .lang
            .as_ref()
            .map_or("none".into(), |(p, t)| format!("<{p}> @{t}")),
    )?;
    for (s, why) in &d.left_out {
        writeln!(out, "left out: {s} ({why})")?;
    }
    writeln!(out)?;
    let peers = d.engines.len() > 1;
    write!(out, "| query | answer |")?;
    for n in &d.engines {
        write!(out, " {n} (ms) |")?;
    }
    writeln!(
        out,
        "{}",
        if peers {
            " nearflow ÷ best right peer |"
        } else {
            ""
        }
    )?;
    write!(out, "|---|---:|")?;
    for _ in &d.engines {
        write!(out, "---:|")?;
    }
    writeln!(out, "{}", if peers { "---:|" } else { "" })?;
    let mut notes = Vec::new();
    for r in &d.rows {
        let m = majority(&r.answers);
        write!(
            out,
            "| {} | {} |",
            r.name,
            m.map_or("none".to_owned(), |v| v.to_string())
        )?;
        for (k, t) in r.median_ms.iter().enumerate() {
            match (&r.answers[k], t) {
                (Ok(_), Some(t)) if r.right[k] => write!(out, " {t:.1} |")?,
                (Ok(v), _) => {
                    write!(out, " wrong |")?;
                    notes.push(format!("{}: {} answered {v}", r.name, d.engines[k]));
                }
                (Err(e), _) => {
                    write!(out, " failed |")?;
                    notes.push(format!("{}: {} failed: {}", r.name, d.engines[k], cut(e)));
                }
            }
        }
        if peers {
            match ratio(r) {
                Some(x) => write!(out, " {x:.2} |")?,
                None => write!(out, " |")?,
            }
        }
        writeln!(out)?;
    }
    for n in &notes {
        writeln!(out, "{n}")?;
    }
    if peers {
        writeln!(out)?;
        // Over the queries every engine answered alike.
        let alike: Vec<&QueryRow> = d
            .rows
            .iter()
            .filter(|r| r.right.iter().all(|&x| x) && r.median_ms.iter().all(Option::is_some))
            .collect();
        writeln!(
            out,
            "over the {} queries every engine answered alike (of {}):",
            alike.len(),
            d.rows.len()
        )?;
        writeln!(out, "| | {} |", d.engines.join(" | "))?;
        writeln!(out, "|---|{}", "---:|".repeat(d.engines.len()))?;
        let col = |k: usize| -> Vec<f64> { alike.iter().filter_map(|r| r.median_ms[k]).collect() };
        write!(out, "| geometric mean (ms) |")?;
        for k in 0..d.engines.len() {
            write!(
                out,
                " {} |",
                geomean(&col(k)).map_or("".into(), |g| format!("{g:.1}"))
            )?;
        }
        writeln!(out)?;
        write!(out, "| median (ms) |")?;
        for k in 0..d.engines.len() {
            write!(
                out,
                " {} |",
                median(col(k)).map_or("".into(), |g| format!("{g:.1}"))
            )?;
        }
        writeln!(out)?;
        write!(out, "| fastest on |")?;
        for k in 0..d.engines.len() {
            let n = alike
                .iter()
                .filter(|r| {
                    let t: Vec<f64> = r.median_ms.iter().flatten().copied().collect();
                    r.median_ms[k].is_some_and(|x| t.iter().all(|&y| x <= y))
                })
                .count();
            write!(out, " {n} |")?;
        }
        writeln!(out)?;
        let slower = d
            .rows
            .iter()
            .filter(|r| ratio(r).is_some_and(|x| x > 1.0))
            .count();
        writeln!(
            out,
            "nearflow slower than the best right peer on {slower} of {} queries",
            d.rows.len()
        )?;
    }
    Ok(out)
}

/// nearflow's median over the fastest peer's whose answer was right; `None` when ours or
/// every peer's was not.
fn ratio(r: &QueryRow) -> Option<f64> {
    let ours = r.median_ms[0].filter(|_| r.right[0])?;
    let best = (1..r.median_ms.len())
        .filter(|&k| r.right[k])
        .filter_map(|k| r.median_ms[k])
        .min_by(f64::total_cmp)?;
    Some(ours / best)
}

fn cut(s: &str) -> String {
    let s = s.replace('\n', " ");
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph with every kind of predicate the generator looks for.
    fn data() -> String {
        let mut t = String::from("@prefix : <http://ex/> .\n");
        for i in 0..6_000 {
            writeln!(t, ":s{i} :big :o{} .", i % 300).unwrap();
            if i % 2 == 0 {
                writeln!(t, ":s{i} :mid {} .", i % 97).unwrap();
            }
            if i % 50 == 0 {
                writeln!(t, ":s{i} :few :o{i} .").unwrap();
            }
            if i % 40 == 0 {
                writeln!(t, ":s{i} :label \"Label number {i}\"@en .").unwrap();
            }
            if i % 3 == 0 {
                writeln!(t, ":s{i} :title \"title {i} of something\" .").unwrap();
            }
        }
        for i in 0..300 {
            writeln!(t, ":o{i} :name \"o{i}\" .").unwrap();
        }
        t
    }

    /// Every shape is generated from the statistics of a small graph and answered by our
    /// endpoint and by a second endpoint of ours named as a peer: each answer equals the one this
    /// process gives, both engines agree, and the report has a ratio for every query.
    #[test]
    fn every_shape_is_generated_and_answered_alike() {
        let dir = std::env::temp_dir().join(format!("nearflow-shapes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("g.ttl");
        std::fs::write(&file, data()).unwrap();
        let source = Source::Files(vec![file], Default::default());
        let machine = load_machine(&TopologySpec::Host).unwrap();
        let store = Arc::new(source.open(&machine, &nearflow_rdf::open::Silent).unwrap());
        let rt = Arc::new(
            build_runtime(
                machine.clone(),
                PolicyKind::Las,
                Pinning::None,
                false,
                AllocatorKind::Nearflow,
            )
            .unwrap(),
        );
        let picked = pick(&store, &rt).unwrap();
        fn p(x: &Option<(String, u64)>) -> Option<(&str, u64)> {
            x.as_ref().map(|(p, n)| (p.as_str(), *n))
        }
        assert_eq!(p(&picked.large), Some(("http://ex/big", 6_000)));
        assert_eq!(p(&picked.large2), Some(("http://ex/mid", 3_000)));
        assert_eq!(p(&picked.small), Some(("http://ex/few", 120)));
        assert_eq!(
            picked.path,
            Some(("http://ex/big".to_owned(), "http://ex/name".to_owned()))
        );
        assert_eq!(
            picked.numeric.as_ref().map(|x| x.0.as_str()),
            Some("http://ex/mid")
        );
        assert_eq!(
            picked.string.as_ref().map(|x| x.0.as_str()),
            Some("http://ex/title")
        );
        assert_eq!(
            picked.lang,
            Some(("http://ex/label".to_owned(), "en".to_owned()))
        );
        let (shapes, left_out) = generate(&picked);
        assert!(left_out.is_empty(), "{left_out:?}");
        assert_eq!(shapes.len(), 22);
        let peer = Server::start(nearflow_serve::Endpoint::new(
            Arc::new(nearflow_rdf::db::Db::read_only((*store).clone())),
            rt.clone(),
            nearflow_serve::Config::for_pus(machine.pu_count()),
        ))
        .unwrap();
        let cfg = Config {
            source,
            peers: vec![("again".to_owned(), peer.url.clone())],
            rounds: 1,
            only: None,
            counted: true,
            full: true,
            request_timeout: Duration::from_secs(60),
            write_queries: None,
            topology: TopologySpec::Host,
            pinning: Pinning::None,
            quiet: true,
        };
        let report = run(&cfg).unwrap();
        let d = &report.data;
        assert_eq!(d.rows.len(), 44);
        for (r, q) in d.rows.iter().zip(forms(&shapes, true, true)) {
            assert_eq!(r.name, q.name);
            let out = rows_of(&store, &rt, &q.text).unwrap();
            let want = if q.counted {
                count_in(&store, &rt, &q.text).unwrap()
            } else {
                out.rows.len() as u64
            };
            assert_eq!(r.answers, vec![Ok(want), Ok(want)], "{}", q.name);
            assert_eq!(r.right, vec![true, true]);
            assert!(ratio(r).is_some(), "{}", q.name);
        }
        assert!(report
            .text
            .contains("over the 44 queries every engine answered alike (of 44)"));
        // Some answers are not empty: the shapes test something.
        assert!(d.rows.iter().filter(|r| r.answers[0] != Ok(0)).count() >= 40);
        let bad = Config {
            only: Some("no-such-shape".into()),
            ..cfg
        };
        let e = run(&bad).unwrap_err().to_string();
        assert!(e.contains("no shape no-such-shape"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn needles_are_words_of_letters() {
        assert_eq!(needle("12 ab Pertinently, x").as_deref(), Some("Pertin"));
        assert_eq!(needle("abc").as_deref(), Some("abc"));
        assert_eq!(needle("12 ab"), None);
    }

    #[test]
    fn the_majority_is_the_most_given_answer() {
        assert_eq!(majority(&[Ok(3), Ok(4), Ok(4)]), Some(4));
        assert_eq!(majority(&[Ok(3), Err("x".into()), Ok(4)]), None);
        assert_eq!(majority(&[Ok(3), Err("x".into())]), Some(3));
        assert_eq!(majority(&[Err("x".into())]), None);
    }

    #[test]
    fn a_ratio_leaves_out_wrong_answers() {
        let r = QueryRow {
            name: "q".into(),
            shape: "q".into(),
            median_ms: vec![Some(2.0), Some(1.0), Some(4.0)],
            answers: vec![Ok(1), Ok(2), Ok(1)],
            right: vec![true, false, true],
        };
        assert_eq!(ratio(&r), Some(0.5));
    }
}
