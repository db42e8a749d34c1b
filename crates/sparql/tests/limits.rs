//! Queries that must stop, stay small or be refused (and the time and
//! memory limits): a plan that has its answer stops; ORDER BY … LIMIT keeps only the best rows;
//! a query nested too deep for the stacks is refused with an error, not a stack overflow;
//! a query past its time or memory limit is stopped inside the runtime.
//!
//! Each query runs on a thread of 2 MiB stack, the size of the runtime's workers and of the
//! test harness's threads, so that a pass that recursed too deep would abort the test.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use nearflow_sparql::{self as sparql, Options, QueryError};

/// A store of `n` subjects, each with one `ex:v` value, on a two-node preset, and a runtime.
fn store(n: usize) -> (Arc<nearflow_rdf::Store>, nearflow_rt::Runtime) {
    let text: String = (0..n)
        .map(|i| format!("<http://ex/s{i}> <http://ex/v> {i} .\n"))
        .collect();
    common::ours_of(&text)
}

/// Runs `text` on a 2 MiB thread: its rows, or the error.
fn run(
    store: &Arc<nearflow_rdf::Store>,
    rt: &nearflow_rt::Runtime,
    text: &str,
    options: Options,
) -> Result<usize, QueryError> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn_scoped(s, || {
                let q = sparql::prepare(store, text, &options)?;
                let _ = q.explain();
                Ok(q.run_collect(rt)?.rows.len())
            })
            .unwrap()
            .join()
            .unwrap()
    })
}

/// A cross product under LIMIT 1 (and the same as ASK) returns at once in
/// every run; it ran on past 15 s in 3 runs of 10.
#[test]
fn a_plan_that_has_its_answer_stops() {
    let (store, rt) = store(3000);
    for _ in 0..10 {
        for q in [
            "SELECT * { ?a ?b ?c . ?d ?e ?f } LIMIT 1",
            "ASK { ?a ?b ?c . ?d ?e ?f }",
            "SELECT * { ?a ?b ?c OPTIONAL { ?d ?e ?f } } LIMIT 3",
        ] {
            let t = Instant::now();
            let options = Options {
                timeout: Some(Duration::from_secs(60)),
                ..Options::default()
            };
            let n = run(&store, &rt, q, options).unwrap();
            assert!(n >= 1, "{q}");
            // 9 million rows if it did not stop; the limit makes a hang a failure, not a wait.
            assert!(t.elapsed() < Duration::from_secs(60), "{q}");
        }
    }
}

/// ORDER BY … LIMIT k keeps the best k rows, the same as a whole sort cut
/// afterwards, with OFFSET, DESC and projections between.
#[test]
fn order_by_limit_is_a_top_k_with_the_same_answer() {
    let (store, rt) = store(20_000);
    let values = |q: &str| {
        let p = sparql::prepare(&store, q, &Options::default()).unwrap();
        let out = p.run_collect(&rt).unwrap();
        let rows: Vec<String> = out
            .rows
            .iter()
            .map(|r| out.term(r, 0).unwrap().to_string())
            .collect();
        (rows, p.explain())
    };
    for (order, offset, limit) in [("?v", 0, 1), ("DESC(?v)", 7, 5), ("?v", 19_990, 50)] {
        let base = format!("SELECT ?v {{ ?s <http://ex/v> ?v }} ORDER BY {order}");
        let (all, _) = values(&base);
        let (top, plan) = values(&format!("{base} OFFSET {offset} LIMIT {limit}"));
        assert!(plan.contains(&format!("top {}", offset + limit)), "{plan}");
        let want: Vec<String> = all.into_iter().skip(offset).take(limit).collect();
        assert_eq!(top, want, "{order} {offset} {limit}");
    }
}

/// ORDER BY over variables (each column's distinct terms ranked once) orders as ORDER BY over
/// expressions of the same values (each row's values kept beside it): terms of every kind, a
/// number in several lexical forms and datatypes (equal values, told apart by their terms),
/// unbound keys, two keys in both directions, whole and under a LIMIT.
#[test]
fn ordering_by_variables_is_ordering_by_their_values() {
    let objects = [
        "1",
        "\"01\"^^xsd:integer",
        "1.0",
        "1e0",
        "2",
        "-3.5",
        "\"b\"",
        "\"a\"@en",
        "\"a\"",
        "<http://ex/a>",
        "<http://ex/b>",
        "_:x",
        "_:y",
        "\"2020-01-01\"^^xsd:date",
        "true",
        "\"z\"^^<http://ex/t>",
    ];
    let mut text = String::from("@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n");
    for i in 0..600 {
        let x = objects[(i * 7) % objects.len()];
        text += &format!("<http://ex/s{i}> <http://ex/x> {x} .\n");
        if i % 5 != 0 {
            let y = objects[(i * 11 + i / 3) % objects.len()];
            text += &format!("<http://ex/s{i}> <http://ex/y> {y} .\n");
        }
    }
    let (store, rt) = common::ours_of(&text);
    let keys = |q: &str| {
        let p = sparql::prepare(&store, q, &Options::default()).unwrap();
        let out = p.run_collect(&rt).unwrap();
        let width = match &out.form {
            sparql::Form::Select(v) => v.len(),
            _ => unreachable!(),
        };
        out.rows
            .iter()
            .map(|r| {
                (0..width)
                    .map(|c| out.term(r, c).map(|t| t.to_string()))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    let pattern = "{ ?s <http://ex/x> ?x OPTIONAL { ?s <http://ex/y> ?y } }";
    // Rows equal in every key may come in any order under a LIMIT: an answer of one key shows
    // only that key, so that the two orderings compare where they must agree.
    for (vars, exprs) in [
        ("?x", "(COALESCE(?x))"),
        ("DESC(?x)", "DESC(COALESCE(?x))"),
        ("?y", "(COALESCE(?y))"),
        ("DESC(?y)", "DESC(COALESCE(?y))"),
        ("?x ?y", "(COALESCE(?x)) (COALESCE(?y))"),
        ("DESC(?x) ?y", "DESC(COALESCE(?x)) (COALESCE(?y))"),
        ("?y DESC(?x)", "(COALESCE(?y)) DESC(COALESCE(?x))"),
    ] {
        for slice in [
            "",
            " LIMIT 1",
            " LIMIT 3",
            " LIMIT 37",
            " OFFSET 100 LIMIT 250",
        ] {
            let shown = match vars.matches('?').count() {
                1 => vars.trim_start_matches("DESC(").trim_end_matches(')'),
                _ => "?x ?y",
            };
            let by_vars = keys(&format!("SELECT {shown} {pattern} ORDER BY {vars}{slice}"));
            let by_exprs = keys(&format!("SELECT {shown} {pattern} ORDER BY {exprs}{slice}"));
            assert!(!by_vars.is_empty());
            assert_eq!(by_vars, by_exprs, "ORDER BY {vars}{slice}");
        }
    }
}

/// Shapes that overflowed a stack (exit 134) are refused with a clear error,
/// or, where they are flat (UNION branches, FILTERs, `&&`), answered.
#[test]
fn deep_queries_are_refused_or_answered_never_aborted() {
    let (store, rt) = store(10);
    let refused = |q: &str, why: &str| {
        let e = run(&store, &rt, q, Options::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{}…: {e}", &q[..q.len().min(80)]);
    };
    let n = 3500;
    refused(
        &format!(
            "SELECT * {{ ?s ?p ?o FILTER({}?o{}) }}",
            "(".repeat(n),
            ")".repeat(n)
        ),
        "brackets nested more than 256 deep",
    );
    refused(
        &format!("SELECT * {}?s ?p ?o{}", "{".repeat(n), "}".repeat(n)),
        "brackets nested more than 256 deep",
    );
    refused(
        &format!("SELECT * {{ ?s ?p ?o FILTER({}?o > 0) }}", "- ".repeat(n)),
        "unary operators chained more than 256 deep",
    );
    refused(
        &format!(
            "SELECT * {{ ?s ?p ?o {} }}",
            (0..100_000)
                .map(|i| format!("BIND(1 AS ?b{i})"))
                .collect::<String>()
        ),
        "a group of more than 512 OPTIONAL, MINUS and BIND elements",
    );
    refused(
        &format!(
            "SELECT * {{ ?s ?p ?o {} }}",
            (0..100_000)
                .map(|_| "OPTIONAL { ?s ?p ?o }")
                .collect::<String>()
        ),
        "a group of more than 512 OPTIONAL, MINUS and BIND elements",
    );
    // Spread over groups, the elements still nest: the translator counts the levels.
    refused(
        &format!(
            "SELECT * {{ ?s ?p ?o {} }}",
            (0..300)
                .map(|i| format!("{{ BIND(1 AS ?b{i}) BIND(2 AS ?c{i}) }} OPTIONAL {{ ?s ?p ?o }}"))
                .collect::<String>()
        ),
        "graph patterns nested more than 512 levels deep",
    );
    // A variable or a prefix spelled like a keyword is not one.
    assert_eq!(
        run(
            &store,
            &rt,
            &format!(
                "PREFIX optional: <http://ex/> SELECT * {{ ?s ?p ?optional {} }}",
                (0..600)
                    .map(|i| format!("FILTER(?optional != optional:x{i}) "))
                    .collect::<String>()
            ),
            Options::default()
        )
        .unwrap(),
        10
    );
    // So many triple patterns that planning them would take minutes.
    refused(
        &format!("SELECT * {{ {} }}", "{ ?s ?p ?o } ".repeat(100_000)),
        "a query of more than 4096 triple patterns",
    );
    refused(
        &format!(
            "SELECT * {{ ?s ?p ?o FILTER({}) }}",
            vec!["?o"; n].join(" + ")
        ),
        "expressions nested more than 512 levels deep",
    );
    // Flat shapes: answered, whatever their length.
    let union = (0..2300)
        .map(|i| format!("{{ ?s <http://ex/v> {} }}", i % 10))
        .collect::<Vec<_>>()
        .join(" UNION ");
    assert_eq!(
        run(
            &store,
            &rt,
            &format!("SELECT ?s {{ {union} }}"),
            Options::default()
        )
        .unwrap(),
        2300
    );
    let filters: String = (0..10_000).map(|_| "FILTER(?o >= 0) ").collect();
    assert_eq!(
        run(
            &store,
            &rt,
            &format!("SELECT * {{ ?s ?p ?o {filters} }}"),
            Options::default()
        )
        .unwrap(),
        10
    );
    let or = vec!["?o = 3"; n].join(" || ");
    assert_eq!(
        run(
            &store,
            &rt,
            &format!("SELECT * {{ ?s ?p ?o FILTER({or}) }}"),
            Options::default()
        )
        .unwrap(),
        1
    );
    // Just inside the bounds: answered on a 2 MiB stack, in every pass (translation,
    // planning, building, evaluation on a worker, the plan's text).
    let optionals: String = (0..500).map(|_| "OPTIONAL { ?s ?p ?o } ").collect();
    assert_eq!(
        run(
            &store,
            &rt,
            &format!("SELECT * {{ ?s ?p ?o {optionals} }}"),
            Options::default()
        )
        .unwrap(),
        10
    );
    let sum = vec!["?o"; 500].join(" + ");
    assert_eq!(
        run(
            &store,
            &rt,
            &format!("SELECT * {{ ?s ?p ?o FILTER({sum} >= 0) }}"),
            Options::default()
        )
        .unwrap(),
        10
    );
    let deep = 250;
    assert_eq!(
        run(
            &store,
            &rt,
            &format!(
                "SELECT * {{ ?s ?p ?o FILTER({}?o{} >= 0) }}",
                "(".repeat(deep),
                ")".repeat(deep)
            ),
            Options::default()
        )
        .unwrap(),
        10
    );
}

/// Long chains of binary operators (a property path of 5,000 steps, `|` alternatives, `+`
/// chains, `&&` and `||` chains of 60,000 terms, the same inside an update's WHERE) are
/// parsed, refused or answered on a small stack (256 KiB, an eighth of a worker's), never
/// overflow it: `spargebra` folds a chain into a tree one level deeper per operator, and the
/// parser reserves the room for it. Past `MAX_OPERATORS` a text is refused before parsing.
#[test]
fn operator_chains_never_overflow_a_small_stack() {
    let (store, _rt) = store(10);
    let small = |f: &(dyn Fn() -> Result<(), String> + Sync)| {
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn_scoped(s, f)
                .unwrap()
                .join()
                .unwrap()
        })
    };
    let prepare = |q: &str| {
        sparql::prepare(&store, q, &Options::default())
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let path = |op: &str, n: usize| vec!["<http://ex/v>"; n].join(op);
    let cases = [
        (
            format!("ASK {{ ?s {} ?o }}", path("/", 5000)),
            "a query of more than 4096 triple patterns",
        ),
        (
            format!("ASK {{ ?s {} ?o }}", path("|", 60_000)),
            "property path nested more than 512",
        ),
        (
            format!("ASK {{ ?s ({})+ ?o }}", path("/", 35_000)),
            "property path nested more than 512",
        ),
        (
            format!(
                "ASK {{ ?s ?p ?o FILTER({}) }}",
                vec!["?o"; 35_000].join(" + ")
            ),
            "expressions nested more than 512",
        ),
        (
            format!(
                "ASK {{ ?s ?p ?o FILTER({}) }}",
                vec!["?o"; 70_000].join("+")
            ),
            "more than 65536 operators",
        ),
    ];
    for (q, why) in &cases {
        let e = small(&|| prepare(q)).unwrap_err();
        assert!(e.contains(why), "{}…: {e}", &q[..60]);
    }
    for op in [" && ", " || "] {
        let q = format!(
            "ASK {{ ?s ?p ?o FILTER({}) }}",
            vec!["?o = 3"; 60_000].join(op)
        );
        small(&|| prepare(&q)).unwrap();
    }
    let u = format!(
        "INSERT {{ ?s ?p 1 }} WHERE {{ ?s ?p ?o FILTER({}) }}",
        vec!["?o"; 35_000].join(" + ")
    );
    let e = small(&|| {
        sparql::update::Update::parse(&u, None)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .unwrap_err();
    assert!(e.contains("expressions nested more than 512"), "{e}");
}

/// `Options::timeout` and `Options::memory_limit` stop a run inside the runtime, with errors
/// that say so; the runtime then runs the next query as usual.
#[test]
fn time_and_memory_limits_stop_a_query() {
    let (store, rt) = store(3000);
    let t = Instant::now();
    let e = run(
        &store,
        &rt,
        "SELECT * { ?a ?b ?c . ?d ?e ?f } ORDER BY ?c ?f",
        Options {
            timeout: Some(Duration::from_millis(300)),
            ..Options::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, QueryError::Timeout(_)), "{e}");
    assert!(e.to_string().contains("time limit"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    for q in [
        "SELECT * { ?a ?b ?c . ?d ?e ?f } ORDER BY ?c ?f",
        "SELECT DISTINCT ?a ?d { ?a ?b ?c . ?d ?e ?f }",
    ] {
        let e = run(
            &store,
            &rt,
            q,
            Options {
                memory_limit: Some(1 << 20),
                timeout: Some(Duration::from_secs(60)),
                ..Options::default()
            },
        )
        .unwrap_err();
        assert!(matches!(e, QueryError::MemoryLimit { .. }), "{q}: {e}");
        assert!(
            e.to_string().contains("memory limit of 1048576 bytes"),
            "{e}"
        );
    }
    assert_eq!(
        run(&store, &rt, "SELECT * { ?s ?p ?o }", Options::default()).unwrap(),
        3000
    );
}

/// With `Options::profile`, the operators that hold rows report how many bytes they held: the
/// hash join's table, the sort's rows, DISTINCT's set (the simulator's
/// calibration needs them; 0 before, so such state cost only compute there).
#[test]
fn holding_operators_report_their_state() {
    let (store, rt) = store(3000);
    let text = "SELECT DISTINCT ?a ?x { ?a <http://ex/v> ?x . ?b <http://ex/v> ?x } ORDER BY ?x";
    let profiled = Options {
        profile: true,
        ..Options::default()
    };
    let q = sparql::prepare(&store, text, &profiled).unwrap();
    let mut running = q.start(&rt).unwrap();
    let mut rows = 0;
    while let Some(b) = running.next_batch() {
        rows += b.len();
    }
    assert_eq!(rows, 3000);
    let stats = running.finish().unwrap();
    let held: usize = stats.threads.as_ref().unwrap().state_bytes.iter().sum();
    // At least the 3,000 rows in one of them, at two ids (8 bytes) a row.
    assert!(held >= 3000 * 8, "{held}");
    let q = sparql::prepare(&store, text, &Options::default()).unwrap();
    let mut running = q.start(&rt).unwrap();
    while running.next_batch().is_some() {}
    assert!(running.finish().unwrap().threads.is_none());
}

/// Solutions: each projected variable's term, `None` when unbound.
type Solutions = Vec<Vec<Option<String>>>;

/// A query's solutions as terms, sorted, and whether some operator wrote rows to disk.
fn solutions(
    store: &Arc<nearflow_rdf::Store>,
    rt: &nearflow_rt::Runtime,
    text: &str,
    options: &Options,
) -> Result<(Solutions, bool), QueryError> {
    let q = sparql::prepare(store, text, options)?;
    let sparql::Form::Select(vars) = &q.form else {
        panic!("a SELECT");
    };
    // Streamed: a held answer would count against the limit.
    let mut running = q.start(rt)?;
    let minted = running.minted();
    let cx = sparql::expr::EvalCx::new(store, &minted);
    let mut rows = Vec::new();
    while let Some(batch) = running.next_batch() {
        for r in &batch {
            rows.push(
                vars.iter()
                    .map(|&(_, c)| {
                        (r[c] != nearflow_rdf::term::UNBOUND).then(|| cx.term(r[c]).to_string())
                    })
                    .collect::<Vec<_>>(),
            );
        }
    }
    assert!(
        running.finish()?.conserved(),
        "the plan lost or duplicated packets"
    );
    rows.sort();
    Ok((rows, q.explain().contains("spilled to disk")))
}

/// Under a memory limit with a spill folder, every mode of the hash join (inner, OPTIONAL,
/// anti, MINUS, semi, mark) and DISTINCT give the answer they give unbounded, whether their
/// rows went to disk or not. The folder is left empty.
#[test]
fn spilled_joins_and_distinct_answer_as_in_memory() {
    let n = 150_000;
    let mut text = String::new();
    for i in 0..n {
        text += &format!(
            "<http://ex/s{i}> <http://ex/g> <http://ex/g{}> .\n",
            i % (n / 2)
        );
        text += &format!("<http://ex/s{i}> <http://ex/v> {} .\n", (i * 7919) % n);
        if i % 3 == 0 {
            text += &format!("<http://ex/s{i}> <http://ex/w> \"w{}\" .\n", i % 7);
        }
    }
    let (store, rt) = common::ours_of(&text);
    let p = "PREFIX ex: <http://ex/> ";
    // Build sides behind a DISTINCT, so that the planner joins them by hash, not by index
    // lookups; each as large as the data.
    let all = "{ SELECT DISTINCT ?t ?g ?b { ?t ex:g ?g ; ex:v ?b } }";
    let queries = [
        // Inner.
        format!("{p}SELECT ?s ?t {{ ?s ex:g ?g ; ex:v ?a . {all} }}"),
        // OPTIONAL.
        format!("{p}SELECT ?s ?t {{ ?s ex:g ?g ; ex:v ?a OPTIONAL {{ {all} FILTER (?b < ?a) }} }}"),
        // Anti (SP²Bench's Q6 in shape).
        format!("{p}SELECT ?s ?a {{ ?s ex:g ?g ; ex:v ?a OPTIONAL {{ ?t ex:g ?g2 ; ex:v ?b FILTER (?g = ?g2 && ?b < ?a) }} FILTER (!bound(?b)) }}"),
        // MINUS.
        format!("{p}SELECT ?s ?a {{ ?s ex:g ?g ; ex:v ?a MINUS {{ {all} FILTER (?b > 20000) }} }}"),
        // Semi and anti through EXISTS, and a mark: EXISTS inside an expression (a filter
        // inside EXISTS over an outer variable would be a cross product).
        format!("{p}SELECT ?s {{ ?s ex:g ?g ; ex:v ?a FILTER EXISTS {{ {all} FILTER (?b > 20000) }} }}"),
        format!("{p}SELECT ?s {{ ?s ex:g ?g ; ex:v ?a FILTER NOT EXISTS {{ {all} FILTER (?b > 20000) }} }}"),
        format!("{p}SELECT ?s {{ ?s ex:g ?g ; ex:v ?a FILTER (?a < 100 || EXISTS {{ {all} FILTER (?b > 20000) }}) }}"),
        // DISTINCT over unordered rows.
        format!("{p}SELECT DISTINCT ?a ?w {{ ?s ex:g ?g ; ex:v ?a . ?t ex:g ?g ; ex:w ?w }}"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut spilled = 0;
    for q in &queries {
        // One stream: one join per join node, so that small limits leave room for its
        // buffers (1.5 MiB).
        let unbounded = Options {
            dop: Some(1),
            ..Options::default()
        };
        let (want, _) = solutions(&store, &rt, q, &unbounded).unwrap();
        for limit in [6 << 20, 4 << 20] {
            let options = Options {
                memory_limit: Some(limit),
                spill: Some(dir.path().to_owned()),
                ..unbounded.clone()
            };
            match solutions(&store, &rt, q, &options) {
                Ok((got, wrote)) => {
                    println!(
                        "{q} under {limit} bytes: {} rows, spilled {wrote}",
                        got.len()
                    );
                    assert!(got == want, "{q} under {limit} bytes: another answer");
                    spilled += usize::from(wrote);
                }
                Err(e) => panic!("{q} under {limit} bytes: {e}"),
            }
        }
    }
    assert!(
        spilled >= 14,
        "only {spilled} runs of 16 wrote rows to disk"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A run's spilled rows stop at its spill limit, all its files together, with an error that
/// names the limit; the same query with room on disk answers.
#[test]
fn a_run_writes_no_more_than_its_spill_limit() {
    let n = 150_000;
    let text: String = (0..n)
        .map(|i| {
            format!(
                "<http://ex/s{i}> <http://ex/g> <http://ex/g{}> .\n<http://ex/s{i}> <http://ex/v> {} .\n",
                i % (n / 2),
                (i * 7919) % n
            )
        })
        .collect();
    let (store, rt) = common::ours_of(&text);
    let q = "PREFIX ex: <http://ex/> SELECT DISTINCT ?a ?h { ?s ex:g ?g ; ex:v ?a . ?t ex:g ?g ; ex:v ?h }";
    let dir = tempfile::tempdir().unwrap();
    let options = |spill_limit| Options {
        dop: Some(1),
        memory_limit: Some(4 << 20),
        spill: Some(dir.path().to_owned()),
        spill_limit,
        ..Options::default()
    };
    let (rows, wrote) = solutions(&store, &rt, q, &options(None)).unwrap();
    assert!(wrote, "the DISTINCT spilled under 4 MiB");
    let free = nearflow_topo::host::disk_available(dir.path()).unwrap();
    let half = options(None).spill_bytes(dir.path());
    assert!(half > 0 && half <= free / 2 + (1 << 20), "{half} of {free}");
    let e = solutions(&store, &rt, q, &options(Some(64 << 10))).unwrap_err();
    assert!(e.to_string().contains("spill limit of 65536 bytes"), "{e}");
    assert!(!rows.is_empty());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
