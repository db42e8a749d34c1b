//! Versions of a store made by updates read the same as a store built from scratch: the same
//! update requests run in nearflow (a new version: the sorted indexes shared, a delta beside
//! them) and in Oxigraph, then a set of queries that cover every access path — scans cut into
//! chunks across partitions, index joins, merge joins (on ranges the delta holds nothing of)
//! and the hash joins that stand for them where it does, graph variables, a graph only the delta holds, paths, counts — must answer alike in
//! three places: our version with its delta, that version merged (`Store::merged`), and
//! Oxigraph.

mod common;

use std::sync::Arc;

use common::{compare, ours_on, reference, Expected};
use nearflow_sparql::update::{Update, UpdateOptions};

/// About 66,000 triples over 2 partitions: scans of a predicate are cut into chunks.
fn data() -> String {
    let mut t = String::from("@prefix ex: <http://ex/> .\n");
    for i in 0..22_000 {
        t.push_str(&format!(
            "ex:s{i} ex:p{} ex:o{} ; ex:name \"n{}\" ; ex:p0 ex:o{} .\n",
            i % 5,
            i % 97,
            i % 50,
            i % 13
        ));
    }
    t.push_str("ex:g1 { ex:a ex:p3 ex:b . ex:b ex:p3 ex:c . ex:a ex:p1 ex:o3 }\n");
    t.push_str("ex:g2 { ex:s1 ex:p0 ex:o1 }\n");
    t
}

const UPDATES: &[&str] = &[
    "PREFIX ex: <http://ex/> DELETE { ?s ex:name ?n } WHERE { ?s ex:name ?n FILTER(?n IN (\"n3\", \"n5\", \"n9\")) }",
    "PREFIX ex: <http://ex/> DELETE { ?s ex:p1 ?o } WHERE { ?s ex:p1 ?o FILTER(?o IN (ex:o3, ex:o5)) }",
    "PREFIX ex: <http://ex/> INSERT { ?s ex:p9 ?o } WHERE { ?s ex:p2 ?o FILTER(?o != ex:o4) }",
    "PREFIX ex: <http://ex/> INSERT DATA { ex:s1 ex:p0 ex:new . ex:new ex:p0 ex:s7 . GRAPH ex:g9 { ex:a ex:p0 ex:b } }",
    "PREFIX ex: <http://ex/> DELETE DATA { ex:s10 ex:p0 ex:o10 . ex:s0 ex:name \"n0\" }",
    "PREFIX ex: <http://ex/> DELETE WHERE { GRAPH ex:g1 { ?s ex:p3 ?o } }",
    "PREFIX ex: <http://ex/> INSERT DATA { ex:s3 ex:name \"extra\" . ex:zz ex:p1 ex:o7 }",
];

const QUERIES: &[&str] = &[
    "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
    "PREFIX ex: <http://ex/> SELECT ?o (COUNT(*) AS ?n) WHERE { ?s ex:p1 ?o } GROUP BY ?o",
    "PREFIX ex: <http://ex/> SELECT DISTINCT ?o WHERE { ?s ex:p0 ?o }",
    "PREFIX ex: <http://ex/> SELECT (COUNT(*) AS ?n) WHERE { ?s ex:p1 ?o FILTER(?o != ex:o8) }",
    "PREFIX ex: <http://ex/> SELECT (COUNT(*) AS ?n) WHERE { ?s ex:p0 ?o FILTER NOT EXISTS { ?s ex:p1 ?x } }",
    "PREFIX ex: <http://ex/> SELECT (COUNT(*) AS ?n) WHERE { ?s ex:name ?o OPTIONAL { ?s ex:p9 ?x } }",
    "PREFIX ex: <http://ex/> SELECT ?s ?o WHERE { ?s ex:p1 ?o }",
    "PREFIX ex: <http://ex/> SELECT ?s ?o ?n WHERE { ?s ex:p9 ?o . ?s ex:name ?n }",
    "PREFIX ex: <http://ex/> SELECT ?s ?x ?y WHERE { ?s ex:p0 ?x . ?s ex:p2 ?y }",
    "PREFIX ex: <http://ex/> SELECT ?s ?n WHERE { ?s ex:p1 ?o . ?s ex:name ?n }",
    "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g",
    "PREFIX ex: <http://ex/> SELECT ?s ?n WHERE { ?s ex:p0 ex:new . OPTIONAL { ?s ex:name ?n } }",
    "PREFIX ex: <http://ex/> SELECT ?s ?p ?x WHERE { ?s ex:p1 ex:o7 . ?s ?p ?x }",
    "PREFIX ex: <http://ex/> SELECT ?x WHERE { ex:s1 ex:p0/ex:p0* ?x }",
    "PREFIX ex: <http://ex/> ASK { ex:s10 ex:p0 ex:o10 }",
    "PREFIX ex: <http://ex/> SELECT ?s ?o WHERE { GRAPH ex:g9 { ?s ex:p0 ?o } }",
    "PREFIX ex: <http://ex/> SELECT DISTINCT ?n WHERE { ?s ex:name ?n } ORDER BY ?n LIMIT 20",
    "PREFIX ex: <http://ex/> SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p",
    "PREFIX ex: <http://ex/> CONSTRUCT { ?s ex:q ?o } WHERE { GRAPH ?g { ?s ?p ?o } }",
    "PREFIX ex: <http://ex/> SELECT ?s WHERE { ?s ex:p0 ex:o7 . ?s ex:name \"n7\" }",
    "PREFIX ex: <http://ex/> SELECT ?s WHERE { ?s ex:p0 ex:o10 . ?s ex:name \"n10\" }",
];

#[test]
fn a_version_with_a_delta_answers_as_its_merged_store_and_oxigraph() {
    let text = data();
    let oxi = common::oxigraph_from_trig(&text);
    let (store, rt) = common::ours_of_trig(&text);
    let before = store.len();
    let mut version = store.clone();
    for u in UPDATES {
        oxi.update(*u).unwrap();
        let applied = Update::parse(u, None)
            .unwrap()
            .apply(&version, &rt, &UpdateOptions::default())
            .unwrap();
        assert!(!applied.changes.is_empty(), "{u} changed something");
        version = Arc::new(applied.store);
    }
    let (added, removed) = version.delta().counts();
    assert!(
        added > 1000 && removed > 1000,
        "a delta of +{added} −{removed}"
    );
    assert_eq!(store.len(), before, "the first version is untouched");
    assert!(store.delta().is_empty());
    let merged = Arc::new(version.merged().unwrap());
    assert!(merged.is_flat());
    for q in QUERIES {
        let want = reference(&oxi, q);
        for (s, what) in [(&version, "the version"), (&merged, "merged")] {
            compare(
                &ours_on(s, &rt, q),
                &want,
                &format!("{what}: {q}"),
                Expected::from_query(q),
            );
        }
    }
    // A merge join reads the indexes by position: the version has one where its delta holds
    // nothing of either side's range (`ex:p0 ex:o7`, `ex:name "n7"`), and a hash join where
    // it does (the delta removes `ex:s10 ex:p0 ex:o10`).
    let plan = |s: &Arc<nearflow_rdf::Store>, q: &str| {
        let q = nearflow_sparql::prepare(s, q, &Default::default()).unwrap();
        nearflow_sparql::explain::physical(&q).to_lowercase()
    };
    // A pattern's values read a run at a time on the merged store, and counted through the
    // delta on the version (it removes and adds `ex:p1` rows): the same answer above.
    for s in [&version, &merged] {
        assert!(
            plan(s, QUERIES[1]).contains("a run each"),
            "{}",
            plan(s, QUERIES[1])
        );
    }
    let [untouched, touched] = [QUERIES[QUERIES.len() - 2], QUERIES[QUERIES.len() - 1]];
    for q in [untouched, touched] {
        assert!(
            plan(&merged, q).contains("merge join"),
            "{}",
            plan(&merged, q)
        );
    }
    assert!(
        plan(&version, untouched).contains("merge join"),
        "{}",
        plan(&version, untouched)
    );
    assert!(
        !plan(&version, touched).contains("merge join"),
        "{}",
        plan(&version, touched)
    );
}
