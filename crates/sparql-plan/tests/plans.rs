//! Plan-shape tests of the planner's choices: a store whose statistics make one choice right,
//! a query, and the physical plan as `--explain` prints it (operators and their order; the
//! estimates are left out, so the tests read the choice, not the arithmetic).

use std::fmt::Write as _;
use std::sync::Arc;

use nearflow_rdf::index::Store;
use nearflow_rdf::load;

/// A store of Turtle `ttl` on a 2-node preset machine.
fn store(ttl: &str) -> Arc<Store> {
    let machine = nearflow_topo::presets::build("nehalem-2x4").expect("a preset");
    let mut l = load::Loaded::default();
    load::load_reader(
        &mut l,
        "t.ttl".as_ref(),
        load::Format::Turtle,
        ttl.as_bytes(),
        "",
    )
    .expect("valid Turtle");
    Arc::new(l.into_store(&machine).expect("a store"))
}

/// `n` subjects `:s0 …` each with `p` → `:o{i % objects}`.
fn many(n: usize, p: &str, objects: usize) -> String {
    let mut s = String::from("@prefix : <http://ex/> .\n");
    for i in 0..n {
        let _ = writeln!(s, ":s{i} :{p} :o{} .", i % objects);
    }
    s
}

/// The physical plan of `query` over `store` with `dop` streams, each line without its
/// estimate and row count.
fn plan(store: &Arc<Store>, query: &str, dop: usize) -> String {
    let options = nearflow_sparql::Options {
        dop: Some(dop),
        ..Default::default()
    };
    explained(store, query, &options)
}

/// [`plan`] under a memory limit of `limit` bytes, at one stream.
fn plan_limited(store: &Arc<Store>, query: &str, limit: usize) -> String {
    let options = nearflow_sparql::Options {
        dop: Some(1),
        memory_limit: Some(limit),
        ..Default::default()
    };
    explained(store, query, &options)
}

/// The physical plan of `query` over `store` under `options`, as [`plan`] gives it.
fn explained(store: &Arc<Store>, query: &str, options: &nearflow_sparql::Options) -> String {
    let p = nearflow_sparql::prepare(store, query, options).expect("a valid query");
    nearflow_sparql::explain::physical(&p)
        .lines()
        .map(|l| match l.find("; est ") {
            Some(at) => format!("{})", &l[..at]),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `want` with the indentation it has in the test's source removed.
fn lines(want: &str) -> String {
    let ls: Vec<&str> = want.lines().filter(|l| !l.trim().is_empty()).collect();
    let indent = ls
        .iter()
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    ls.iter()
        .map(|l| &l[indent..])
        .collect::<Vec<_>>()
        .join("\n")
}

/// 30,000 `:common` triples (one per subject and object) and 3 `:rare` ones, on 2 nodes.
fn skewed() -> Arc<Store> {
    let mut ttl = many(30_000, "common", 30_000);
    for line in many(3, "rare", 3).lines().skip(1) {
        ttl.push_str(line);
        ttl.push('\n');
    }
    store(&ttl)
}

const PRE: &str = "PREFIX : <http://ex/> SELECT * WHERE ";

/// The pattern with the fewest matches is scanned first; the large one joins it by an index
/// lookup per row, not by a scan of its 30,000 rows.
#[test]
fn the_rarest_pattern_goes_first_and_the_large_one_is_an_index_join() {
    let s = skewed();
    for q in [
        "{ ?x :common ?y . ?x :rare ?z }",
        "{ ?x :rare ?z . ?x :common ?y }",
    ] {
        assert_eq!(
            plan(&s, &format!("{PRE}{q}"), 4),
            lines(
                "
                project ?x ?y ?z  (1 stream)
                  index join ?x <http://ex/common> ?y  (1 stream)
                    scan POS ?x <http://ex/rare> ?z  (1 stream)
                "
            ),
            "{q}"
        );
    }
}

/// Each filter runs where its variables are first bound: `?z`'s after the scan, `?y`'s after
/// the join.
#[test]
fn filters_go_where_their_variables_are_first_bound() {
    let q = format!(
        "{PRE}{{ ?x :common ?y . ?x :rare ?z FILTER(STR(?z) != \"a\") FILTER(STR(?y) != \"b\") }}"
    );
    assert_eq!(
        plan(&skewed(), &q, 4),
        lines(
            r#"
            project ?x ?y ?z  (1 stream)
              filter !(STR(?y) = "b")  (1 stream)
                index join ?x <http://ex/common> ?y  (1 stream)
                  filter !(STR(?z) = "a")  (1 stream)
                    scan POS ?x <http://ex/rare> ?z  (1 stream)
            "#
        )
    );
}

/// Two scans of one graph both sorted on the shared variable (POS of one predicate, on the
/// object) are merge-joined; at 30,000 rows and 4 streams the join runs as 4 streams, each a
/// range of the keys, with no exchange.
#[test]
fn scans_sorted_on_the_shared_variable_are_merge_joined() {
    assert_eq!(
        plan(
            &skewed(),
            &format!("{PRE}{{ ?x :common ?y . ?w :common ?y }}"),
            4
        ),
        lines(
            "
            project ?w ?x ?y  (4 streams)
              merge join on [?y]  (4 streams)
                scan POS ?x <http://ex/common> ?y  (2 streams)
                scan POS ?w <http://ex/common> ?y  (2 streams)
            "
        )
    );
}

/// Two large sides sorted on another variable are hash-joined; at 4 streams both are routed by
/// the hash of the key (an exchange each), and the join runs as 4 streams; at 1 stream each
/// side is united into one.
#[test]
fn large_unsorted_sides_are_hash_joined_and_hash_partitioned() {
    let s = skewed();
    let q = format!("{PRE}{{ ?x :common ?y . ?x :common ?z }}");
    assert_eq!(
        plan(&s, &q, 4),
        lines(
            "
            project ?x ?y ?z  (4 streams by hash)
              Inner hash join on [?x]  (4 streams by hash)
                exchange: route into 4 streams by hash of [?x]  (4 streams by hash)
                  scan POS ?x <http://ex/common> ?z  (2 streams)
                exchange: route into 4 streams by hash of [?x]  (4 streams by hash)
                  scan POS ?x <http://ex/common> ?y  (2 streams)
            "
        )
    );
    assert_eq!(
        plan(&s, &q, 1),
        lines(
            "
            project ?x ?y ?z  (1 stream)
              Inner hash join on [?x]  (1 stream)
                exchange: unite into one stream  (1 stream)
                  scan POS ?x <http://ex/common> ?z  (2 streams)
                exchange: unite into one stream  (1 stream)
                  scan POS ?x <http://ex/common> ?y  (2 streams)
            "
        )
    );
}

/// The same two sides under a memory limit that the hash join's table would pass (by the
/// estimates, a quarter of the limit for the tables) are an index join, whose memory is a packet; under
/// a limit it fits, the plan is the hash join still.
#[test]
fn a_join_whose_table_would_pass_the_memory_limit_is_an_index_join() {
    let s = skewed();
    let q = format!("{PRE}{{ ?x :common ?y . ?x :common ?z }}");
    assert_eq!(
        plan_limited(&s, &q, 1 << 30),
        plan(&s, &q, 1),
        "a limit the table fits"
    );
    assert_eq!(
        plan_limited(&s, &q, 1 << 20),
        lines(
            "
            project ?x ?y ?z  (2 streams)
              index join ?x <http://ex/common> ?z  (2 streams)
                scan POS ?x <http://ex/common> ?y  (2 streams)
            "
        )
    );
}

/// `?y = ?z` across two unconnected patterns is a hash join on a value key, the `=` kept as a
/// residual check (so `1` and `1.0` meet, and a non-matching pair is dropped exactly).
#[test]
fn an_equality_across_unconnected_patterns_is_a_value_key_hash_join() {
    assert_eq!(
        plan(
            &skewed(),
            &format!("{PRE}{{ ?x :rare ?y . ?w :rare ?z FILTER(?y = ?z) }}"),
            4
        ),
        lines(
            "
            project ?w ?x ?y ?z  (1 stream)
              Inner hash join on [] value key ?y = ?z if (?y = ?z)  (1 stream)
                scan POS ?x <http://ex/rare> ?y  (1 stream)
                scan POS ?w <http://ex/rare> ?z  (1 stream)
            "
        )
    );
}

/// Under `LIMIT 5` the join reads a few rows of its input, not all of them: the second pattern
/// is an index join (a lookup per row read) where without the limit both sides are read whole
/// into a hash join; the plan passes rows on as they come, so it runs with small first packets
/// (`Phys::first_rows`).
#[test]
fn under_a_small_limit_a_join_is_an_index_join() {
    let s = skewed();
    let q = format!("{PRE}{{ ?x :common ?y . ?x :common ?z }}");
    assert!(plan(&s, &q, 1).contains("Inner hash join on [?x]"));
    let limited = format!("{q} LIMIT 5");
    assert_eq!(
        plan(&s, &limited, 1),
        lines(
            "
            slice offset 0 limit 5  (1 stream)
              exchange: unite into one stream  (1 stream)
                project ?x ?y ?z  (2 streams)
                  index join ?x <http://ex/common> ?z  (2 streams)
                    scan POS ?x <http://ex/common> ?y  (2 streams)
            "
        )
    );
    let options = nearflow_sparql::Options {
        dop: Some(1),
        ..Default::default()
    };
    let first = |q: &str| {
        nearflow_sparql::prepare(&s, q, &options)
            .unwrap()
            .phys
            .first_rows()
    };
    assert_eq!(first(&limited), Some(5));
    assert_eq!(first(&format!("{q} OFFSET 10 LIMIT 5")), Some(15));
    assert_eq!(first(&q), None);
    // ASK takes one row.
    assert_eq!(
        first("PREFIX : <http://ex/> ASK { ?x :common ?y . ?x :common ?z }"),
        Some(1)
    );
    // A sort waits for every row: no first rows, and the join below it is planned as without
    // the limit.
    let sorted = format!("{PRE}{{ ?x :common ?y . ?x :common ?z }} ORDER BY ?y LIMIT 5");
    assert_eq!(first(&sorted), None);
    assert!(plan(&s, &sorted, 1).contains("Inner hash join on [?x]"));
}

/// Under a limit an `=` between two unconnected patterns is an index join on the `=` (a lookup
/// per row of the term `=` to it), where without one it is a hash join on a value key.
#[test]
fn under_a_small_limit_an_equality_is_an_index_join() {
    let s = skewed();
    let q = format!("{PRE}{{ ?x :common ?y . ?w :common ?z FILTER(?y = ?z) }}");
    assert!(plan(&s, &q, 1).contains("value key ?y = ?z"));
    assert_eq!(
        plan(&s, &format!("{q} LIMIT 1"), 1),
        lines(
            "
            slice offset 0 limit 1  (1 stream)
              exchange: unite into one stream  (1 stream)
                project ?w ?x ?y ?z  (2 streams)
                  index join ?w <http://ex/common> ?z on ?y = ?z  (2 streams)
                    scan POS ?x <http://ex/common> ?y  (2 streams)
            "
        )
    );
}

/// A join that waits for a whole side anyway (the cross product of two unconnected patterns
/// builds one of them) gains nothing from a limit: the pattern is planned as without it, and
/// the plan has no first rows.
#[test]
fn a_limit_over_a_cross_product_changes_nothing() {
    let s = skewed();
    let q = format!("{PRE}{{ ?x :common ?y . ?w :rare ?z }}");
    let limited = format!("{q} LIMIT 1");
    let joins = |p: String| {
        p.lines()
            .filter(|l| l.contains("join") || l.contains("scan"))
            .map(str::trim)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let unlimited = joins(plan(&s, &q, 1));
    assert!(unlimited[0].contains("hash join on []"), "{unlimited:?}");
    assert_eq!(joins(plan(&s, &limited, 1)), unlimited);
    let options = nearflow_sparql::Options {
        dop: Some(1),
        ..Default::default()
    };
    assert_eq!(
        nearflow_sparql::prepare(&s, &limited, &options)
            .unwrap()
            .phys
            .first_rows(),
        None
    );
}

/// OPTIONAL, EXISTS, NOT EXISTS (through a chain of two patterns), MINUS and EXISTS inside an
/// expression from the 3-row side are index joins: 3 lookups, never a table of 30,000 rows.
#[test]
fn every_join_kind_from_the_small_side_is_an_index_join() {
    let s = skewed();
    let rare = "scan POS ?x <http://ex/rare> ?z  (1 stream)";
    for (q, want) in [
        (
            "{ ?x :rare ?z OPTIONAL { ?x :common ?y } }",
            "project ?x ?y ?z  (1 stream)\n  Left index join ?x <http://ex/common> ?y  (1 stream)",
        ),
        (
            "{ ?x :rare ?z FILTER EXISTS { ?x :common ?y } }",
            "project ?x ?z  (1 stream)\n  Semi index join ?x <http://ex/common> ?y  (1 stream)",
        ),
        (
            "{ ?x :rare ?z FILTER NOT EXISTS { ?x :common ?y . ?y :common ?w } }",
            "project ?x ?z  (1 stream)\n  Anti index join ?x <http://ex/common> ?y, \
             then ?y <http://ex/common> ?w  (1 stream)",
        ),
        (
            "{ ?x :rare ?z MINUS { ?x :common ?y } }",
            "project ?x ?z  (1 stream)\n  Minus index join ?x <http://ex/common> ?y  (1 stream)",
        ),
    ] {
        assert_eq!(
            plan(&s, &format!("{PRE}{q}"), 2),
            format!("{want}\n    {rare}"),
            "{q}"
        );
    }
    assert_eq!(
        plan(
            &s,
            &format!("{PRE}{{ ?x :rare ?z FILTER(EXISTS {{ ?x :common ?y }} || ?z = :o1) }}"),
            2
        ),
        lines(
            "
            project ?x ?z  (1 stream)
              filter (?(exists 3) || (?z = <http://ex/o1>))  (1 stream)
                Mark(?(exists 3)) index join ?x <http://ex/common> ?y  (1 stream)
                  scan POS ?x <http://ex/rare> ?z  (1 stream)
            "
        )
    );
}

/// The same joins from the 30,000-row side are hash joins on `?x` with the 3 rows as the table:
/// a lookup per row of the large side would read more than the table costs. (EXISTS is the
/// exception: see the next test.)
#[test]
fn every_join_kind_from_the_large_side_is_a_hash_join() {
    let s = skewed();
    for (q, mode) in [
        ("{ ?x :common ?y OPTIONAL { ?x :rare ?z } }", "Left"),
        (
            "{ ?x :common ?y . ?y :common ?w FILTER EXISTS { ?x :rare ?z } }",
            "Semi",
        ),
        (
            "{ ?x :common ?y FILTER NOT EXISTS { ?x :rare ?z } }",
            "Anti",
        ),
        ("{ ?x :common ?y MINUS { ?x :rare ?z } }", "Minus"),
        (
            "{ ?x :common ?y FILTER(EXISTS { ?x :rare ?z } || ?y = :o1) }",
            "Mark(?(exists 3))",
        ),
    ] {
        let got = plan(&s, &format!("{PRE}{q}"), 2);
        let join = format!("{mode} hash join on [?x]  (2 streams by hash)");
        assert!(got.contains(&join), "{q}\n{got}");
        assert!(!got.contains("index join"), "{q}\n{got}");
        assert!(
            got.contains("exchange: route into 2 streams by hash of [?x]  (2 streams by hash)\n")
                && got.ends_with("scan POS ?x <http://ex/rare> ?z  (1 stream)"),
            "{q}\n{got}"
        );
    }
}

/// EXISTS from the 30,000-row side of one pattern: the 3 rows' values of `?x`, each once, are
/// looked up in it — an inner index join from the small side, the large side never read whole.
/// Where a right row may leave `?x` unbound (it is then compatible with every row), the hash
/// join stays.
#[test]
fn exists_from_the_large_side_looks_the_small_sides_values_up() {
    let s = skewed();
    assert_eq!(
        plan(
            &s,
            &format!("{PRE}{{ ?x :common ?y FILTER EXISTS {{ ?x :rare ?z }} }}"),
            2
        ),
        lines(
            "
            project ?x ?y  (1 stream)
              index join ?x <http://ex/common> ?y  (1 stream)
                distinct  (1 stream)
                  project ?x  (1 stream)
                    scan POS ?x <http://ex/rare> ?z  (1 stream)
            "
        )
    );
    let maybe = plan(
        &s,
        &format!(
            "{PRE}{{ ?x :common ?y FILTER EXISTS {{ {{ ?w :rare ?z }} UNION {{ ?x :rare ?z }} }} }}"
        ),
        2,
    );
    assert!(maybe.contains("Semi hash join"), "{maybe}");
}

/// Counted, every join kind on one variable is summed from the indexes, no row joined: from
/// the 30,000-row side the 3 rows' values of `?x` are grouped and each counted in the large
/// side's index; from the 3-row side each row's `?x` is looked up.
#[test]
fn counts_of_every_join_kind_are_summed_from_the_indexes_in_both_directions() {
    let s = skewed();
    let count = |q: &str| {
        plan(
            &s,
            &format!("PREFIX : <http://ex/> SELECT (COUNT(*) AS ?n) WHERE {q}"),
            2,
        )
    };
    let (common, rare) = ("?x <http://ex/common> ?y", "?x <http://ex/rare> ?z");
    for (q, of) in [
        (
            "{ ?x :common ?y OPTIONAL { ?x :rare ?z } }",
            "with or without a match in",
        ),
        (
            "{ ?x :common ?y FILTER EXISTS { ?x :rare ?z } }",
            "with a match in",
        ),
        (
            "{ ?x :common ?y FILTER NOT EXISTS { ?x :rare ?z } }",
            "with no match in",
        ),
        (
            "{ ?x :common ?y MINUS { ?x :rare ?z } }",
            "with no match in",
        ),
    ] {
        let got = count(q);
        let want = format!(
            " := count of {common} {of} {rare} on ?x, the latter's values grouped, each \
             counted in the former  (1 stream)"
        );
        assert!(
            got.ends_with(&want) && got.lines().count() == 3,
            "{q}\n{got}"
        );
        let flipped = q
            .replace(":common ?y", ":tmp ?z")
            .replace(":rare ?z", ":common ?y");
        let got = count(&flipped.replace(":tmp ?z", ":rare ?z"));
        let want = format!(" := count of {rare} {of} {common} on ?x, each looked up  (1 stream)");
        assert!(got.ends_with(&want), "{flipped}\n{got}");
    }
    // A condition on the OPTIONAL: rows are joined and counted.
    let got = count("{ ?x :common ?y OPTIONAL { ?x :rare ?z FILTER(?z != :o1) } }");
    assert!(got.contains("Left hash join"), "{got}");
}

/// A pattern's values with their matches — `GROUP BY`, `DISTINCT`, `COUNT(DISTINCT …)`, a count
/// under a filter of the value — are read a run at a time from the index sorted on them; under
/// a filter, only where each value has many matches (3 objects of 30,000 rows, not 30,000).
#[test]
fn values_with_many_matches_are_read_a_run_at_a_time() {
    let s = store(&many(30_000, "p", 3));
    let one = store(&many(30_000, "p", 30_000));
    let query = |w: &str| format!("PREFIX : <http://ex/> {w}");
    // The plan's last line (the aggregates' columns have generated names).
    for (q, want) in [
        (
            "SELECT DISTINCT ?o WHERE { ?s :p ?o }",
            "values of ?o in ?s <http://ex/p> ?o, a run each  (1 stream)",
        ),
        (
            "SELECT ?o (COUNT(*) AS ?n) WHERE { ?s :p ?o } GROUP BY ?o",
            " := its matches  (1 stream)",
        ),
        (
            "SELECT (COUNT(DISTINCT ?o) AS ?n) WHERE { ?s :p ?o }",
            " := values of ?o in ?s <http://ex/p> ?o, a run each  (1 stream)",
        ),
        (
            "SELECT (COUNT(*) AS ?n) WHERE { ?s :p ?o FILTER(?o != :o1) }",
            " := matches of the values of ?o holding !(?o = <http://ex/o1>) in ?s \
             <http://ex/p> ?o, a run each  (1 stream)",
        ),
    ] {
        let got = plan(&s, &query(q), 2);
        let last = got.lines().last().unwrap_or_default().trim_start();
        assert!(
            last.ends_with(want) && (last.starts_with("values of ?o in") || last.starts_with('?')),
            "{q}\n{got}"
        );
        let rows = plan(&one, &query(q), 2);
        let filtered = q.contains("FILTER");
        assert_eq!(rows.contains("a run each"), !filtered, "{q}\n{rows}");
        assert_eq!(
            rows.contains("scan POS ?s <http://ex/p> ?o"),
            filtered,
            "{q}\n{rows}"
        );
    }
}
