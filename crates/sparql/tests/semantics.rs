//! SPARQL semantics on small graphs, each query compared with Oxigraph, and the cases where
//! Oxigraph departs from the specification decided by the specification.

mod common;

use std::fmt::Write as _;
use std::sync::Arc;

use common::{compare, ours_of, ours_on, oxigraph_from_turtle, reference, Answer, Expected};
use nearflow_sparql as sparql;

const DATA: &str = r#"
@prefix ex: <http://ex/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:a ex:p ex:b , ex:c ; ex:n "1"^^xsd:integer ; ex:name "Ann" ; ex:tag "chat"@fr .
ex:b ex:p ex:c ; ex:n "2.5"^^xsd:decimal ; ex:name "Bob"@en .
ex:c ex:n "1"^^xsd:double ; ex:name "Cy" ; ex:q _:x .
_:x ex:n "abc"^^xsd:integer ; ex:name "" .
ex:d ex:n "-3"^^xsd:integer ; ex:flag "true"^^xsd:boolean ; ex:p ex:d .
ex:e ex:name "Ann" ; ex:when "2020-01-01T00:00:00Z"^^xsd:dateTime .
"#;

fn stores() -> (
    Arc<nearflow_rdf::Store>,
    oxigraph::store::Store,
    nearflow_rt::Runtime,
) {
    let (store, rt) = ours_of(DATA);
    (store, oxigraph_from_turtle(DATA), rt)
}

const PRE: &str = "PREFIX ex: <http://ex/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> ";

/// Queries whose answers must equal Oxigraph's (the data uses the lexical forms Oxigraph keeps; see
/// the next test for the others).
const SAME: &[&str] = &[
    "SELECT ?s ?o WHERE { ?s ex:p ?o }",
    "SELECT ?s ?o ?n WHERE { ?s ex:p ?o OPTIONAL { ?o ex:n ?n } }",
    "SELECT ?s ?n WHERE { ?s ex:n ?n FILTER(?n > 0) }",
    "SELECT ?s ?n WHERE { ?s ex:n ?n FILTER(?n = 1) }",
    "SELECT ?s ?n WHERE { ?s ex:n ?n FILTER(!(?n = 1)) }",
    "SELECT ?s ?n WHERE { ?s ex:n ?n FILTER(?n) }",
    "SELECT ?s ?n WHERE { ?s ex:n ?n FILTER(?n + 1 > 2) }",
    "SELECT ?s ?n WHERE { ?s ex:n ?n FILTER(isNumeric(?n)) }",
    "SELECT ?s ?x WHERE { ?s ex:name ?x FILTER(lang(?x) = \"en\") }",
    "SELECT ?s ?x WHERE { ?s ex:name ?x FILTER(langMatches(lang(?x), \"*\")) }",
    "SELECT ?s ?x WHERE { ?s ex:name ?x FILTER(regex(?x, \"^a\", \"i\")) }",
    "SELECT ?s ?x WHERE { ?s ex:name ?x FILTER(str(?x) = \"Bob\") }",
    "SELECT ?s ?x WHERE { ?s ex:name ?x FILTER(datatype(?x) = xsd:string) }",
    "SELECT ?s WHERE { ?s ex:name ?x FILTER(isBlank(?s)) }",
    "SELECT ?s WHERE { ?s ?p ?o FILTER(isLiteral(?o) && !isIRI(?o)) }",
    "SELECT ?a ?b WHERE { ?a ex:name ?x . ?b ex:name ?y FILTER(?x = ?y && ?a != ?b) }",
    "SELECT ?a ?b WHERE { ?a ex:n ?x . ?b ex:n ?y FILTER(?x = ?y) }",
    "SELECT ?a ?b WHERE { ?a ex:n ?x . ?b ex:n ?y FILTER(?x < ?y) }",
    "SELECT ?s WHERE { { ?s ex:p ex:c } UNION { ?s ex:flag ?f } }",
    "SELECT ?s ?o WHERE { { ?s ex:p ?o } UNION { ?s ex:q ?o } OPTIONAL { ?o ex:name ?nm } }",
    "SELECT ?s WHERE { ?s ex:n ?n MINUS { ?s ex:p ?o } }",
    "SELECT ?s WHERE { ?s ex:n ?n MINUS { ?x ex:p ?o } }",
    "SELECT DISTINCT ?s WHERE { ?s ex:p ?o }",
    "SELECT ?s ?o WHERE { ?s ex:p ?o OPTIONAL { ?o ex:p ?z FILTER(?s != ?z) } }",
    "SELECT ?s WHERE { ?s ex:n ?n OPTIONAL { ?s ex:p ?o } FILTER(!bound(?o)) }",
    "SELECT ?s ?o WHERE { ?s ex:p ?o } ORDER BY DESC(?o) ?s",
    "SELECT ?n WHERE { ?s ex:n ?n } ORDER BY ?n",
    "SELECT ?x WHERE { ?s ex:name ?x } ORDER BY ?x LIMIT 3 OFFSET 1",
    "SELECT ?s WHERE { ?s ex:p ?s }",
    "SELECT * WHERE { ?s ex:p ex:b . ?s ex:p ex:c }",
    "SELECT ?s WHERE { ?s ex:nothing ?o }",
    "SELECT ?s WHERE { ?s ex:p ?o FILTER(?o IN (ex:b, ex:d)) }",
    "SELECT ?s WHERE { ?s ex:when ?t FILTER(?t > \"2019-12-31T00:00:00Z\"^^xsd:dateTime) }",
    "SELECT ?a ?b WHERE { ?a ex:p ?x . ?b ex:name ?y }",
    "ASK { ex:a ex:p ex:b }",
    "ASK { ex:a ex:p ex:zzz }",
    "CONSTRUCT { ?o ex:inv ?s . _:n ex:of ?s } WHERE { ?s ex:p ?o }",
    // BIND and SELECT expressions: values the store holds and values it does not.
    "SELECT ?s ?y WHERE { ?s ex:n ?n BIND(?n + 1 AS ?y) }",
    "SELECT ?s (STR(?x) AS ?t) (LCASE(?x) AS ?l) WHERE { ?s ex:name ?x }",
    "SELECT ?s ?z WHERE { ?s ex:n ?n BIND(?n * 2 AS ?z) FILTER(?z > 1) }",
    "SELECT ?s ?o ?n WHERE { ?s ex:p ?x BIND(?x AS ?o) ?o ex:n ?n }",
    "SELECT ?a ?b ?k WHERE { { ?a ex:n ?x BIND(STR(?x) AS ?k) } { ?b ex:name ?y BIND(STR(?y) AS ?k) } }",
    "SELECT ?a ?b WHERE { { ?a ex:n ?x BIND(?x + 0 AS ?k) } { ?b ex:n ?y BIND(?y * 1 AS ?k) } }",
    "SELECT DISTINCT (UCASE(STR(?x)) AS ?u) WHERE { ?s ex:name ?x }",
    "SELECT ?s ?d WHERE { ?s ex:n ?n BIND(-?n AS ?d) } ORDER BY ?d ?s",
    "SELECT ?s ?v WHERE { ?s ex:p ?o OPTIONAL { ?o ex:n ?n BIND(?n + 10 AS ?v) } }",
    "SELECT ?s (COALESCE(?f, \"none\") AS ?g) WHERE { ?s ex:n ?n OPTIONAL { ?s ex:flag ?f } }",
    "SELECT ?s (IF(?n > 0, \"pos\", \"neg\") AS ?sign) WHERE { ?s ex:n ?n }",
    "SELECT ?s (ex:made AS ?c) (\"x\"@en AS ?l) WHERE { ?s ex:flag ?f }",
    "SELECT ?s ?t WHERE { { ?s ex:p ?o BIND(\"p\" AS ?t) } UNION { ?s ex:q ?o BIND(\"q\" AS ?t) } }",
    "SELECT ?s ?t WHERE { ?s ex:name ?x BIND(STRLEN(?x) AS ?t) } ORDER BY DESC(?t) ?s LIMIT 3",
    "CONSTRUCT { ?s ex:double ?d } WHERE { ?s ex:n ?n BIND(?n * 2 AS ?d) }",
    // String and numeric functions.
    "SELECT ?s (SUBSTR(?x, 2) AS ?a) (SUBSTR(?x, 1, 2) AS ?b) (SUBSTR(?x, 0, 2) AS ?c) \
     (SUBSTR(?x, -1, 3) AS ?d) WHERE { ?s ex:name ?x }",
    "SELECT ?s (CONCAT(?x, \"!\") AS ?a) (CONCAT(?x, ?x) AS ?b) (CONCAT() AS ?c) \
     WHERE { ?s ex:name ?x }",
    "SELECT ?s (CONCAT(?x, \"-\", STR(?n)) AS ?a) WHERE { ?s ex:name ?x ; ex:n ?n }",
    "SELECT ?s (STRBEFORE(?x, \"n\") AS ?a) (STRAFTER(?x, \"n\") AS ?b) \
     (STRBEFORE(?x, \"\") AS ?c) (STRAFTER(?x, \"zz\") AS ?d) WHERE { ?s ex:name ?x }",
    "SELECT ?s (STRBEFORE(?x, \"o\"@en) AS ?a) (STRAFTER(?x, \"o\"@fr) AS ?b) \
     WHERE { ?s ex:name ?x }",
    "SELECT ?s (ABS(?n) AS ?a) (CEIL(?n) AS ?b) (FLOOR(?n) AS ?c) (ROUND(?n) AS ?d) \
     WHERE { ?s ex:n ?n }",
    "SELECT ?s (ROUND(?n / 2) AS ?r) (ABS(-?n) AS ?a) WHERE { ?s ex:n ?n }",
    "SELECT ?s (STRLANG(?x, \"de\") AS ?a) (STRDT(?x, ex:myType) AS ?b) WHERE { ?s ex:name ?x }",
    "SELECT ?s ?x WHERE { ?s ex:name ?x FILTER(STRLEN(CONCAT(?x, ?x)) > 4) }",
    // Aggregates, VALUES, EXISTS, property paths.
    "SELECT ?s (COUNT(?o) AS ?c) WHERE { ?s ex:p ?o } GROUP BY ?s",
    "SELECT (COUNT(*) AS ?c) (COUNT(DISTINCT ?s) AS ?d) WHERE { ?s ?p ?o }",
    "SELECT (SUM(?n) AS ?s) (AVG(?n) AS ?a) (MIN(?n) AS ?lo) (MAX(?n) AS ?hi) \
     WHERE { ?x ex:n ?n FILTER(isNumeric(?n)) }",
    "SELECT (SUM(?n) AS ?s) WHERE { ?x ex:n ?n }",
    "SELECT ?s (COUNT(*) AS ?c) WHERE { ?s ?p ?o } GROUP BY ?s HAVING (COUNT(*) > 2)",
    "SELECT (COUNT(*) AS ?c) WHERE { ?s ex:nothing ?o }",
    "SELECT ?s WHERE { ?s ex:nothing ?o } GROUP BY ?s",
    "SELECT ?k (MAX(?x) AS ?m) WHERE { ?s ex:name ?x BIND(STRLEN(?x) AS ?k) } GROUP BY ?k",
    "SELECT ?s ?o WHERE { ?s ex:p ?o VALUES ?o { ex:c ex:zzz } }",
    "SELECT ?s ?o WHERE { VALUES (?s ?o) { (ex:a UNDEF) (ex:b ex:c) (ex:zzz ex:c) } ?s ex:p ?o }",
    "SELECT ?s WHERE { ?s ex:n ?n FILTER EXISTS { ?s ex:p ?o } }",
    "SELECT ?s WHERE { ?s ex:n ?n FILTER NOT EXISTS { ?s ex:p ?o } }",
    "SELECT ?s WHERE { ?s ex:n ?n FILTER NOT EXISTS { ?x ex:zzz ?o } }",
    "SELECT ?s WHERE { ?s ex:n ?n OPTIONAL { ?s ex:p ?o } FILTER EXISTS { ?o ex:n ?m } }",
    // EXISTS inside expressions (mark joins), and correlated EXISTS (the outer values joined
    // into the pattern under its filter).
    "SELECT ?s ?b WHERE { ?s ex:n ?n BIND(EXISTS { ?s ex:p ?o } AS ?b) }",
    "SELECT ?s WHERE { ?s ex:n ?n FILTER(?n > 1 || EXISTS { ?s ex:p ex:c }) }",
    "SELECT ?s WHERE { ?s ex:name ?x FILTER(!EXISTS { ?s ex:p ?o } && STRLEN(?x) > 1) }",
    "SELECT ?s (IF(NOT EXISTS { ?s ex:name ?x }, \"none\", \"some\") AS ?t) WHERE { ?s ex:n ?n }",
    "SELECT ?s WHERE { ?s ex:n ?n } ORDER BY DESC(EXISTS { ?s ex:p ?o }) ?s",
    "SELECT (SUM(IF(EXISTS { ?s ex:p ?o }, 1, 0)) AS ?c) WHERE { ?s ex:n ?n }",
    "SELECT ?s ?o WHERE { ?s ex:p ?o OPTIONAL { ?o ex:n ?m FILTER EXISTS { ?o ex:p ?z } } }",
    "SELECT ?s ?n WHERE { ?s ex:n ?n FILTER(isNumeric(?n)) \
     FILTER NOT EXISTS { ?t ex:n ?m FILTER(isNumeric(?m) && ?m > ?n) } }",
    "SELECT ?s ?x WHERE { ?s ex:name ?x \
     FILTER EXISTS { ?t ex:name ?y FILTER(?t != ?s && ?y = ?x) } }",
    "SELECT ?s WHERE { ?s ex:n ?n FILTER NOT EXISTS { ?s ex:p ?o OPTIONAL { ?o ex:n ?m } \
     FILTER(?m = ?n) } }",
    "SELECT ?s (EXISTS { ?t ex:n ?m FILTER(?m < ?n) } AS ?e) WHERE { ?s ex:n ?n }",
    "SELECT ?s WHERE { ?s ex:n ?n FILTER EXISTS { SELECT ?s WHERE { ?s ex:p ?o } } }",
    // Correlated through a subquery: its projected variables take the outer values (the LIMIT,
    // OFFSET and GROUP count per outer solution), its other variables are its own.
    "SELECT ?s ?n WHERE { ?s ex:n ?n FILTER EXISTS { SELECT ?s ?n WHERE { ?s ex:p ?o . \
     ?o ex:n ?m FILTER(?m > ?n) } LIMIT 1 } }",
    "SELECT ?s WHERE { ?s ex:p ?x FILTER EXISTS { SELECT ?s WHERE { ?s ex:p ?o } OFFSET 1 } }",
    "SELECT ?s WHERE { ?s ex:n ?n FILTER EXISTS { SELECT ?o WHERE { ?s ex:p ?o . \
     ?o ex:n ?m FILTER(?m > ?n) } LIMIT 1 } }",
    "SELECT ?s ?c WHERE { ?s ex:n ?n FILTER EXISTS { SELECT ?s (COUNT(*) AS ?c) \
     WHERE { ?s ex:p ?o } GROUP BY ?s HAVING (COUNT(*) > 1) } }",
    "SELECT ?s WHERE { ?s ex:n ?n FILTER EXISTS { ?s ex:p ?o MINUS { ?o ex:p ?z } } }",
    "SELECT ?s ?n WHERE { ?s ex:n ?n FILTER(isNumeric(?n)) FILTER NOT EXISTS { ?s ex:p ?o \
     MINUS { ?o ex:n ?m FILTER(isNumeric(?m) && ?m < ?n + 2) } } }",
    "SELECT ?s ?n WHERE { ?s ex:n ?n FILTER EXISTS { ?t ex:n ?k \
     MINUS { ?t ex:n ?m FILTER(?m = ?n) } } }",
    // An EXISTS in an OPTIONAL's filter that reads the left side's variables.
    "SELECT ?s ?o WHERE { ?s ex:n ?n OPTIONAL { ?s ex:p ?o \
     FILTER(EXISTS { ?o ex:n ?m FILTER(?m > ?n) }) } }",
    "SELECT ?s ?o WHERE { ?s ex:n ?n OPTIONAL { ?s ex:p ?o \
     FILTER(NOT EXISTS { ?x ex:name ?y FILTER(?x != ?s && ?n = 1) }) } }",
    "DESCRIBE ex:c",
    "DESCRIBE ?s WHERE { ?s ex:flag ?f }",
    "SELECT ?x WHERE { ex:a ex:p+ ?x }",
    "SELECT ?x WHERE { ex:a ex:p* ?x }",
    "SELECT ?x ?y WHERE { ?x ex:p+ ?y }",
    "SELECT ?x ?y WHERE { ?x ex:p* ?y }",
    "SELECT ?x WHERE { ?x ^ex:p/ex:n ?n }",
    "SELECT ?x ?y WHERE { ?x (ex:p/ex:p|ex:q)/ex:n ?y }",
    "SELECT ?x ?y WHERE { ?x !(ex:p|ex:name|ex:n) ?y }",
    "SELECT ?x WHERE { ?x ex:p? ex:c }",
    "SELECT ?x WHERE { ?x ex:p ?x . ?x ex:p+ ?x }",
    // More functions.
    "SELECT ?s (YEAR(?t) AS ?y) (MONTH(?t) AS ?m) (TZ(?t) AS ?z) (TIMEZONE(?t) AS ?tz) \
     WHERE { ?s ex:when ?t }",
    "SELECT ?s (MD5(?x) AS ?a) (SHA256(?x) AS ?b) (ENCODE_FOR_URI(?x) AS ?c) \
     WHERE { ?s ex:name ?x FILTER(datatype(?x) = xsd:string) }",
    "SELECT ?s (REPLACE(?x, \"n\", \"N\") AS ?r) WHERE { ?s ex:name ?x }",
    "SELECT ?s (xsd:integer(?n) AS ?i) (xsd:string(?n) AS ?t) (xsd:boolean(?n) AS ?b) \
     WHERE { ?s ex:n ?n }",
];

#[test]
fn small_queries_match_oxigraph() {
    let (store, oxi, rt) = stores();
    for q in SAME {
        let text = format!("{PRE}{q}");
        let want = reference(&oxi, &text);
        let got = ours_on(&store, &rt, &text);
        match (&got, &want) {
            // Blank nodes made by a CONSTRUCT template are fresh in each engine: compare the
            // triples with their labels erased.
            (Answer::Graph(g), Answer::Graph(w)) => {
                let erase = |v: &Vec<String>| {
                    let mut v: Vec<String> = v
                        .iter()
                        .map(|t| {
                            t.split(' ')
                                .map(|x| if x.starts_with("_:") { "_:" } else { x })
                                .collect::<Vec<_>>()
                                .join(" ")
                        })
                        .collect();
                    v.sort();
                    v
                };
                assert_eq!(erase(g), erase(w), "{q}");
            }
            _ => compare(&got, &want, q, Expected::from_query(&text)),
        }
    }
}

const GRAPHS: &str = r#"
@prefix ex: <http://ex/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:a ex:p ex:b ; ex:n 1 .
ex:g1 { ex:a ex:p ex:c . ex:c ex:p ex:d ; ex:n 2 . ex:b ex:name "Bob" }
ex:g2 { ex:a ex:p ex:b . ex:b ex:p ex:a ; ex:n 3 . _:x ex:p ex:a }
ex:g3 { ex:a ex:p ex:b }
"#;

/// Named graphs, against Oxigraph on the same TriG data: GRAPH with a variable and a constant,
/// FROM and FROM NAMED, paths, OPTIONAL, MINUS, aggregates, subqueries and EXISTS inside GRAPH
/// (pushed into the patterns, or evaluated per named graph).
#[test]
fn named_graphs_match_oxigraph() {
    let (store, rt) = common::ours_of_trig(GRAPHS);
    let oxi = common::oxigraph_from_trig(GRAPHS);
    for q in [
        "SELECT ?g ?s ?o WHERE { GRAPH ?g { ?s ex:p ?o } }",
        "SELECT ?s ?o WHERE { GRAPH ex:g1 { ?s ex:p ?o } }",
        "SELECT ?s ?o WHERE { GRAPH ex:nothing { ?s ex:p ?o } }",
        "SELECT ?g WHERE { GRAPH ?g { } }",
        "SELECT ?g WHERE { GRAPH ex:g2 { } }",
        "SELECT ?g ?s WHERE { GRAPH ?g { ?s ex:p ?o . ?o ex:n ?n } }",
        "SELECT ?g ?s ?n WHERE { GRAPH ?g { ?s ex:p ?o OPTIONAL { ?o ex:n ?n } } }",
        "SELECT ?g ?s WHERE { GRAPH ?g { ?s ex:p ?o MINUS { ?o ex:p ?z } } }",
        "SELECT ?g (COUNT(*) AS ?c) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g",
        "SELECT ?g ?x WHERE { GRAPH ?g { ex:a ex:p+ ?x } }",
        "SELECT ?g ?x WHERE { GRAPH ?g { ?x ex:p/ex:p ex:a } }",
        "SELECT ?s ?o WHERE { ?s ex:p ?o GRAPH ?g { ?o ex:p ?z } }",
        "SELECT ?g ?s WHERE { GRAPH ?g { ?s ex:p ?o FILTER EXISTS { ?o ex:p ?z } } }",
        "SELECT ?s WHERE { ?s ex:n ?n FILTER EXISTS { GRAPH ?g { ?s ex:p ex:c } } }",
        "SELECT ?g ?x WHERE { GRAPH ?g { ?x ex:p ?g } }",
        "SELECT ?g ?s WHERE { GRAPH ?g { ?s ex:p ?o } FILTER(?g = ex:g2) }",
        "SELECT ?s ?o FROM ex:g1 WHERE { ?s ex:p ?o }",
        "SELECT ?s ?n FROM ex:g1 FROM ex:g2 WHERE { ?s ex:p ?o . ?o ex:n ?n }",
        "SELECT ?x FROM ex:g1 FROM ex:g2 WHERE { ex:a ex:p+ ?x }",
        "SELECT ?g ?s FROM NAMED ex:g1 FROM NAMED ex:g3 WHERE { GRAPH ?g { ?s ex:p ?o } }",
        "SELECT ?s FROM NAMED ex:g1 WHERE { ?s ?p ?o }",
        "SELECT ?s ?o FROM ex:g1 FROM NAMED ex:g2 WHERE { ?s ex:p ?o GRAPH ex:g2 { ?o ex:p ?z } }",
        "ASK { GRAPH ?g { ex:b ex:name \"Bob\" } }",
        "CONSTRUCT { ?s ex:in ?g } WHERE { GRAPH ?g { ?s ex:n ?n } }",
    ] {
        let text = format!("{PRE}{q}");
        let want = reference(&oxi, &text);
        compare(
            &ours_on(&store, &rt, &text),
            &want,
            &text,
            Expected::from_query(&text),
        );
    }
}

/// A subquery inside `GRAPH ?g`: §18.6 evaluates the block in each named graph and binds `?g`
/// to it, so an aggregate without keys is one row per graph (0 where nothing matches), as the
/// W3C test `agg-empty-group-count-graph` expects, a plain subquery's rows carry their graph,
/// and a VALUES row with `?g` UNDEF is one row per graph (the W3C test `bindings/graph`);
/// Oxigraph 0.5 evaluates them once over all the named graphs and leaves `?g` unbound. The
/// specification decides.
#[test]
fn a_subquery_inside_graph_is_evaluated_per_named_graph() {
    let (store, rt) = common::ours_of_trig(GRAPHS);
    let oxi = common::oxigraph_from_trig(GRAPHS);
    let text = format!(
        "{PRE}SELECT ?g ?c WHERE {{ GRAPH ?g {{ SELECT (COUNT(*) AS ?c) WHERE {{ ?s ex:n ?n }} }} }} ORDER BY ?g"
    );
    let Answer::Rows(_, rows) = ours_on(&store, &rt, &text) else {
        panic!("rows")
    };
    let count = |n: u32| {
        Some(format!(
            "\"{n}\"^^<http://www.w3.org/2001/XMLSchema#integer>"
        ))
    };
    let graph = |g: &str| Some(format!("<http://ex/{g}>"));
    assert_eq!(
        rows,
        vec![
            vec![graph("g1"), count(1)],
            vec![graph("g2"), count(1)],
            vec![graph("g3"), count(0)]
        ]
    );
    let Answer::Rows(_, theirs) = reference(&oxi, &text) else {
        panic!("rows")
    };
    assert_eq!(theirs, vec![vec![None, count(2)]], "Oxigraph changed");
    let text = format!(
        "{PRE}SELECT ?g ?x WHERE {{ GRAPH ?g {{ {{ SELECT ?x WHERE {{ ?x ex:p ?o }} }} }} }}"
    );
    let Answer::Rows(_, rows) = ours_on(&store, &rt, &text) else {
        panic!("rows")
    };
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|r| r[0].is_some()), "{rows:?}");
    let Answer::Rows(_, theirs) = reference(&oxi, &text) else {
        panic!("rows")
    };
    assert!(theirs.iter().all(|r| r[0].is_none()), "Oxigraph changed");
    let text = format!(
        "{PRE}SELECT ?g ?t WHERE {{ GRAPH ?g {{ VALUES (?g ?t) {{ (UNDEF \"a\") (ex:g1 \"b\") }} }} }} ORDER BY ?t ?g"
    );
    let Answer::Rows(_, rows) = ours_on(&store, &rt, &text) else {
        panic!("rows")
    };
    let text_of = |t: &str| Some(format!("\"{t}\""));
    assert_eq!(
        rows,
        vec![
            vec![graph("g1"), text_of("a")],
            vec![graph("g2"), text_of("a")],
            vec![graph("g3"), text_of("a")],
            vec![graph("g1"), text_of("b")],
        ]
    );
    assert_eq!(reference(&oxi, &text).count(), 2, "Oxigraph changed");
}

/// A closure is a set of nodes per start (§18.4's ALP): `(P?)+` from `ex:s0` reaches `"2"`
/// once. Inside `GRAPH ?g`, with both ends bound, Oxigraph 0.5 gives the pair twice (in the
/// default graph, once). The specification decides.
#[test]
fn a_closure_in_a_named_graph_is_a_set() {
    let data = "@prefix ex: <http://ex/> . ex:g0 { ex:s0 ex:p0 \"2\" }";
    let (store, rt) = common::ours_of_trig(data);
    let oxi = common::oxigraph_from_trig(data);
    let text = format!(
        "{PRE}SELECT ?b ?c WHERE {{ VALUES (?b ?c) {{ (ex:s0 \"2\") }} GRAPH ?g {{ ?b ((!(ex:p1))?)+ ?c }} }}"
    );
    assert_eq!(ours_on(&store, &rt, &text).count(), 1);
    assert_eq!(reference(&oxi, &text).count(), 2, "Oxigraph changed");
}

/// MINUS removes a solution only when some solution of its right side shares a variable with
/// it (§18.5): inside a correlated EXISTS, a right side whose variables are all others' removes
/// nothing, whatever its filter reads of the outer solution. Oxigraph 0.5 removes every
/// solution there. The specification decides.
#[test]
fn a_correlated_minus_without_shared_variables_removes_nothing() {
    let (store, oxi, rt) = stores();
    let text = format!(
        "{PRE}SELECT ?s ?n WHERE {{ ?s ex:n ?n FILTER EXISTS {{ ?t ex:n ?k \
         MINUS {{ ?x ex:n ?m FILTER(?m = ?n) }} }} }}"
    );
    let all = format!("{PRE}SELECT ?s ?n WHERE {{ ?s ex:n ?n }}");
    assert_eq!(
        ours_on(&store, &rt, &text).count(),
        ours_on(&store, &rt, &all).count()
    );
    assert_eq!(reference(&oxi, &text).count(), 0, "Oxigraph changed");
}

/// `FROM a FROM b`: the default graph is the RDF merge of the two (§13.2), a set, so a triple
/// both hold matches once; Oxigraph 0.5 matches it once per graph. The specification decides.
#[test]
fn the_default_graph_of_from_clauses_is_a_merge() {
    let (store, rt) = common::ours_of_trig(GRAPHS);
    let oxi = common::oxigraph_from_trig(GRAPHS);
    let text = format!("{PRE}SELECT ?s ?o FROM ex:g2 FROM ex:g3 WHERE {{ ?s ex:p ?o }}");
    let Answer::Rows(_, rows) = ours_on(&store, &rt, &text) else {
        panic!("rows")
    };
    let ab = vec![
        Some("<http://ex/a>".to_string()),
        Some("<http://ex/b>".to_string()),
    ];
    assert_eq!(rows.iter().filter(|r| **r == ab).count(), 1, "{rows:?}");
    assert_eq!(rows.len(), 3, "{rows:?}");
    let Answer::Rows(_, theirs) = reference(&oxi, &text) else {
        panic!("rows")
    };
    assert_eq!(
        theirs.iter().filter(|r| **r == ab).count(),
        2,
        "Oxigraph changed"
    );
}

/// The same path pattern twice in a group: a basic graph pattern is a set of triple patterns,
/// so a repeated *triple* pattern counts once, but a path pattern is not a triple pattern —
/// §18.2.2 translates each into a `Path` joined with the rest, so a repeated one is a join of
/// the path with itself, and a pair the path reaches twice (two triples, two predicates of a
/// negated property set) counts 2 × 2 times. Oxigraph keeps one of the two patterns. The
/// specification decides.
#[test]
fn a_repeated_path_pattern_is_a_join_with_itself() {
    let data = "@prefix ex: <http://ex/> . ex:s ex:p1 \"b\" ; ex:p2 \"b\" .";
    let (store, rt) = ours_of(data);
    let oxi = oxigraph_from_turtle(data);
    let once = format!("{PRE}SELECT ?x ?y WHERE {{ ?x !ex:p0 ?y }}");
    let twice = format!("{PRE}SELECT ?x ?y WHERE {{ ?x !ex:p0 ?y . ?x !ex:p0 ?y }}");
    assert_eq!(ours_on(&store, &rt, &once).count(), 2);
    assert_eq!(reference(&oxi, &once).count(), 2);
    assert_eq!(ours_on(&store, &rt, &twice).count(), 4);
    assert_eq!(reference(&oxi, &twice).count(), 2, "Oxigraph changed");
    // A repeated triple pattern is one pattern, in both.
    let triple = format!("{PRE}SELECT ?x ?y WHERE {{ ?x ex:p1 ?y . ?x ex:p1 ?y }}");
    assert_eq!(ours_on(&store, &rt, &triple).count(), 1);
    assert_eq!(reference(&oxi, &triple).count(), 1);
}

/// A FILTER applies to its own group (§18.2.2.6), so an EXISTS in it sees the group's
/// solutions: a variable bound only by another group joined with it is free inside the EXISTS
/// (here `EXISTS { ?a ex:p ?a }` holds for any `?a`). Oxigraph substitutes the other group's
/// `?a`. The specification decides.
#[test]
fn exists_in_a_filter_sees_only_its_own_group() {
    let data = "@prefix ex: <http://ex/> . ex:s0 ex:p ex:s0 . ex:s1 ex:q ex:s0 . \
                ex:s1 ex:r ex:s0 . ex:s0 ex:r ex:s0 .";
    let (store, rt) = ours_of(data);
    let oxi = oxigraph_from_turtle(data);
    let text = format!(
        "{PRE}SELECT ?a ?b WHERE {{ {{ ?a ex:r ?b }} {{ ?b ex:p ?c FILTER(EXISTS {{ ?a ex:p ?a }}) }} }}"
    );
    assert_eq!(ours_on(&store, &rt, &text).count(), 2, "both ?a");
    assert_eq!(reference(&oxi, &text).count(), 1, "Oxigraph changed");
}

/// `SELECT *` lists the variables in the order they first appear in the pattern (it listed
/// them alphabetically).
#[test]
fn select_star_keeps_the_order_of_the_pattern() {
    let (store, _, rt) = stores();
    let q = format!("{PRE}SELECT * WHERE {{ ?z ex:p ?y OPTIONAL {{ ?y ex:n ?a }} BIND(1 AS ?b) }}");
    let Answer::Rows(vars, _) = ours_on(&store, &rt, &q) else {
        panic!("rows");
    };
    assert_eq!(vars, ["z", "y", "a", "b"]);
}

/// A zero-length path from a constant the graph does not hold: §18.4 evaluates
/// `ZeroLengthPath` with a term end to that term, graph or not (and `p?` is
/// `ZeroLengthPath ∪ p`); Oxigraph answers nothing. The specification decides.
#[test]
fn zero_length_paths_match_a_constant_the_graph_lacks() {
    let (store, oxi, rt) = stores();
    for q in [
        "SELECT ?x WHERE { ex:zzz ex:p* ?x }",
        "SELECT ?x WHERE { ex:zzz ex:p? ?x }",
    ] {
        let text = format!("{PRE}{q}");
        let Answer::Rows(_, rows) = ours_on(&store, &rt, &text) else {
            panic!("rows");
        };
        assert_eq!(rows, vec![vec![Some("<http://ex/zzz>".to_string())]], "{q}");
        assert_eq!(reference(&oxi, &text).count(), 0, "Oxigraph changed: {q}");
    }
}

/// An alternative path: §18.4 evaluates `Path(X, alt(P, Q), Y)` as the multiset union of the
/// two paths, so a pair linked by both predicates is two solutions; Oxigraph removes the
/// duplicate (its pull request 351). The specification decides.
#[test]
fn alternative_paths_keep_duplicates_as_a_union_does() {
    let data = "@prefix ex: <http://ex/> . ex:a ex:p ex:b ; ex:q ex:b , ex:c .";
    let (store, rt) = ours_of(data);
    let oxi = oxigraph_from_turtle(data);
    let q = format!("{PRE}SELECT ?x WHERE {{ ex:a (ex:p|ex:q) ?x }}");
    let Answer::Rows(_, mut rows) = ours_on(&store, &rt, &q) else {
        panic!("rows");
    };
    rows.sort();
    let b = Some("<http://ex/b>".to_string());
    let c = Some("<http://ex/c>".to_string());
    assert_eq!(rows, vec![vec![b.clone()], vec![b], vec![c]]);
    assert_eq!(reference(&oxi, &q).count(), 2, "Oxigraph changed");
}

/// A closed path `?a P ?a`: §18.4 evaluates it as the path between two variables restricted
/// to equal ends, so a node that reaches itself two ways is two solutions, as with `?a P ?b`.
/// Oxigraph counts it once for the closed form and twice for the open one. The specification
/// decides.
#[test]
fn a_closed_path_counts_as_the_open_one_does() {
    let data = "@prefix ex: <http://ex/> . ex:s1 ex:q ex:s0 ; ex:r ex:s0 . ex:s0 ex:p ex:s1 .";
    let (store, rt) = ours_of(data);
    let oxi = oxigraph_from_turtle(data);
    let closed = format!("{PRE}SELECT ?a WHERE {{ ?a (!ex:z/ex:p) ?a }}");
    let open = format!("{PRE}SELECT ?a WHERE {{ ?a (!ex:z/ex:p) ?b FILTER(?a = ?b) }}");
    assert_eq!(ours_on(&store, &rt, &closed).count(), 2);
    assert_eq!(ours_on(&store, &rt, &open).count(), 2);
    assert_eq!(reference(&oxi, &open).count(), 2, "Oxigraph changed");
    assert_eq!(reference(&oxi, &closed).count(), 1, "Oxigraph changed");
}

/// Rows are arrays of the query's width rounded up to a power of two: widths 5 to 40 run at
/// classes 8 to 64 and agree with Oxigraph; past 128 variables a query is refused, not run.
#[test]
fn wide_queries_match_oxigraph_and_too_wide_is_refused() {
    let (store, oxi, rt) = stores();
    for width in [5, 9, 17, 40, 150] {
        let mut q = format!("{PRE}SELECT * WHERE {{ ?s ex:p ?o ");
        for i in 2..width {
            // Some optional columns bind (ex:n, ex:name), most stay unbound.
            let p = ["ex:n", "ex:name", "ex:none"][i % 3];
            write!(q, "OPTIONAL {{ ?s {p} ?v{i} }} ").unwrap();
        }
        q.push('}');
        // Oxigraph's optimiser recurses once per OPTIONAL, past a test thread's 2 MiB in an
        // unoptimised build: the reference runs on a stack of its own.
        let want = std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn_scoped(s, || reference(&oxi, &q))
                .unwrap()
                .join()
                .unwrap()
        });
        compare(
            &ours_on(&store, &rt, &q),
            &want,
            &q,
            Expected::from_query(&q),
        );
    }
    let triples: String = (0..172)
        .map(|i| format!("?v{} ?v{} ?v{} . ", 3 * i, 3 * i + 1, 3 * i + 2))
        .collect();
    let q = format!("SELECT * WHERE {{ {triples} }}");
    let prepared = sparql::prepare(&store, &q, &sparql::Options::default());
    let err = prepared
        .err()
        .expect("516 variables are refused")
        .to_string();
    assert!(
        err.contains("not supported: a query of 516 variables"),
        "{err}"
    );
}

/// Merge joins: two scans sorted on the same variable (object–object here, both POS) are
/// merge-joined, split by ranges of the join values when a side passes the parallel threshold
/// (30,000 triples a side); answers equal Oxigraph's, with a repeated variable and a filter.
#[test]
fn merge_joins_match_oxigraph() {
    let mut data = String::from("@prefix ex: <http://ex/> .\n");
    for i in 0..30_000 {
        writeln!(data, "ex:s{i} ex:p ex:o{} .", i % 6_000).unwrap();
        writeln!(data, "ex:t{i} ex:q ex:o{} .", (i * 7) % 9_000).unwrap();
    }
    data.push_str("ex:o1 ex:p ex:o1 . ex:o1 ex:q ex:o1 .\n");
    let (store, rt) = ours_of(&data);
    let oxi = oxigraph_from_turtle(&data);
    for q in [
        "SELECT ?a ?b ?o WHERE { ?a ex:p ?o . ?b ex:q ?o }",
        "SELECT ?o WHERE { ?o ex:p ?o . ?b ex:q ?o }",
        "SELECT ?a ?o WHERE { ?a ex:p ?o . ?a ex:q ?o }",
        "SELECT ?a ?b WHERE { ?a ex:p ?o . ?b ex:q ?o FILTER(?a != ?b) }",
    ] {
        let text = format!("{PRE}{q}");
        let prepared = sparql::prepare(&store, &text, &sparql::Options::default()).unwrap();
        prepared.run_collect(&rt).unwrap();
        assert!(
            prepared.explain().contains("merge join on [?o]"),
            "{}",
            prepared.explain()
        );
        let want = reference(&oxi, &text);
        compare(
            &ours_on(&store, &rt, &text),
            &want,
            q,
            Expected::from_query(&text),
        );
    }
}

/// Oxigraph rewrites numeric literals to a canonical form when it stores them
/// (`"01"^^xsd:integer` comes back as `"1"`); RDF 1.1 (§3.3) and SPARQL's simple entailment keep
/// the lexical form, so we do: the term is returned as written, and compares by value.
#[test]
fn lexical_forms_are_kept_where_oxigraph_canonicalises() {
    let data = "<http://ex/s> <http://ex/n> \"01\"^^<http://www.w3.org/2001/XMLSchema#integer> .";
    let (store, rt) = ours_of(data);
    let q = "SELECT ?n WHERE { ?s <http://ex/n> ?n FILTER(?n = 1) }";
    let ours = ours_on(&store, &rt, q);
    let int = "\"01\"^^<http://www.w3.org/2001/XMLSchema#integer>";
    assert_eq!(
        ours,
        Answer::Rows(vec!["n".into()], vec![vec![Some(int.into())]])
    );
    let theirs = reference(&oxigraph_from_turtle(data), q);
    let canon = "\"1\"^^<http://www.w3.org/2001/XMLSchema#integer>";
    if theirs != Answer::Rows(vec!["n".into()], vec![vec![Some(canon.into())]]) {
        panic!("Oxigraph no longer canonicalises (update this test): {theirs:?}");
    }
    // sameTerm tells the two forms apart; `=` does not.
    let same = "SELECT ?n WHERE { ?s <http://ex/n> ?n FILTER(sameTerm(?n, 1)) }";
    assert_eq!(
        ours_on(&store, &rt, same),
        Answer::Rows(vec!["n".into()], vec![])
    );
}

/// The effective boolean value of a language-tagged literal: SPARQL 1.1 §17.2.2 says a *plain
/// literal* (RDF 1.0's term, which includes language-tagged strings) is true when non-empty.
/// Oxigraph makes it an error (so FILTER drops it); the 1.1 specification decides.
#[test]
fn ebv_of_a_language_tagged_string_follows_sparql_1_1() {
    let (store, oxi, rt) = stores();
    let q = format!("{PRE}SELECT ?x WHERE {{ ?s ex:name ?x FILTER(?x) }}");
    let Answer::Rows(_, ours) = ours_on(&store, &rt, &q) else {
        panic!()
    };
    let mut ours: Vec<String> = ours.into_iter().map(|r| r[0].clone().unwrap()).collect();
    ours.sort();
    assert_eq!(
        ours,
        ["\"Ann\"", "\"Ann\"", "\"Bob\"@en", "\"Cy\""],
        "the empty name is false"
    );
    let Answer::Rows(_, theirs) = reference(&oxi, &q) else {
        panic!()
    };
    if theirs.len() != 3 {
        panic!("Oxigraph now agrees with SPARQL 1.1 here (update this test): {theirs:?}");
    }
}

/// `<`, `>`, `<=`, `>=` between IRIs or between language-tagged strings: SPARQL 1.1's operator
/// mapping (§17.3) defines them for numbers, simple literals and `xsd:string`, booleans and
/// dates only, so these comparisons are type errors and FILTER drops the row. Oxigraph answers
/// `ex:s >= ex:s` and `"b"@en >= "b"@en` with true (both found by `properties.rs`); the
/// specification decides. `=` and `!=` are defined for every term (RDFterm-equal) and both
/// engines agree there.
#[test]
fn ordering_iris_and_tagged_strings_is_an_error_where_oxigraph_answers() {
    error_where_oxigraph_answers(
        "<http://ex/s> <http://ex/p> \"b\"@en-GB .",
        "?o >= \"b\"@en-GB",
        "?o = \"b\"@en-gb", // tags are case-insensitive
    );
    error_where_oxigraph_answers(
        "<http://ex/s> <http://ex/p> <http://ex/s> .",
        "?o >= <http://ex/s>",
        "?o = <http://ex/s>",
    );
}

/// On one triple `?s <http://ex/p> ?o`: `FILTER(error)` is a type error in SPARQL 1.1, so we
/// drop the row, where Oxigraph keeps it (the test fails once Oxigraph agrees, to be updated);
/// `FILTER(defined)` keeps the row in both.
fn error_where_oxigraph_answers(data: &str, error: &str, defined: &str) {
    let (store, rt) = ours_of(data);
    let oxi = oxigraph_from_turtle(data);
    let q = |f: &str| format!("SELECT ?o WHERE {{ ?s <http://ex/p> ?o FILTER({f}) }}");
    assert_eq!(
        ours_on(&store, &rt, &q(error)),
        Answer::Rows(vec!["o".into()], vec![]),
        "{error}"
    );
    let theirs = reference(&oxi, &q(error));
    if theirs.count() != 1 {
        panic!("Oxigraph now agrees with SPARQL 1.1 on {error} (update this test): {theirs:?}");
    }
    assert_eq!(ours_on(&store, &rt, &q(defined)).count(), 1, "{defined}");
    assert_eq!(reference(&oxi, &q(defined)).count(), 1, "{defined}");
}

/// `=` and `!=` between a simple literal and a language-tagged string: both datatypes are known
/// (xsd:string, rdf:langString), so two such literals that are not the same term are known to
/// differ, and `=` is false rather than an error (§17.4.1.7 lets an implementation say so; the
/// SPARQL 1.0 open-eq tests expect it). nearflow and Oxigraph agree; a number beside a string
/// is still an error (the last test below).
#[test]
fn not_equal_between_a_string_and_a_tagged_string_is_true_as_in_oxigraph() {
    let data = "<http://ex/s> <http://ex/p> \"a\" .";
    let (store, rt) = ours_of(data);
    let oxi = oxigraph_from_turtle(data);
    for f in ["?o != \"a\"@en", "!(?o = \"a\"@en)", "?o != <http://ex/s>"] {
        let q = format!("SELECT ?o WHERE {{ ?s <http://ex/p> ?o FILTER({f}) }}");
        assert_eq!(ours_on(&store, &rt, &q).count(), 1, "{f}");
        assert_eq!(reference(&oxi, &q).count(), 1, "{f}");
    }
}

/// What the W3C SPARQL 1.0 query tests expect where nearflow differed: booleans in capitals
/// are the keywords (§19.1: keywords are matched without regard to case); strings and
/// language-tagged strings that are not the same term are known to differ (`!=` true, `=`
/// false: §17.4.1.7 lets an implementation say so of literals it knows); a function nearflow
/// does not know is an error where it is called (§17.6), not a refusal of the query; `<…>` is
/// an IRI wherever it is the longest token.
#[test]
fn booleans_in_capitals_string_inequality_and_unknown_functions() {
    let data = "@prefix ex: <http://ex/> . ex:a ex:p \"x\" , \"x\"@en , \"x\"@de , 1 .";
    let (store, rt) = ours_of(data);
    let count = |q: &str| ours_on(&store, &rt, &format!("{PRE}{q}")).count();
    assert_eq!(count("ASK { FILTER(TRUE && !FALSE && True) }"), 1);
    // The two tagged strings differ from "x"; the number is not comparable with it.
    assert_eq!(count("SELECT ?o { ?s ex:p ?o FILTER(?o != \"x\") }"), 2);
    assert_eq!(count("SELECT ?o { ?s ex:p ?o FILTER(?o = \"x\"@en) }"), 1);
    assert_eq!(count("SELECT ?o { ?s ex:p ?o FILTER(?o != \"x\"@en) }"), 2);
    // A number beside a string is still an error: neither side of `=` nor of `!=` holds.
    assert_eq!(
        count("SELECT ?o { ?s ex:p ?o FILTER(?o = 1 || ?o != 1) }"),
        1
    );
    assert_eq!(
        count("SELECT ?o { ?s ex:p ?o FILTER(<http://ex/f>(?o)) }"),
        0
    );
    assert_eq!(
        count("SELECT ?o { ?s ex:p ?o FILTER(!BOUND(?x)) BIND(<http://ex/f>(?o) AS ?x) }"),
        4
    );
    // The longest-token rule (§19.8): `<?a&&?b>` is an IRI, and an IRI cannot follow an
    // operand in an expression (W3C syn-bad-26); with a space it is a comparison.
    let refused = sparql::prepare(
        &store,
        "SELECT * WHERE { FILTER (?x<?a&&?b>?y) }",
        &sparql::Options::default(),
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(refused.contains("`<?a&&?b>` is an IRI"), "{refused}");
    assert_eq!(count("SELECT ?o { ?s ex:p ?o FILTER(?o< 2&&?o>0) }"), 1);
    assert_eq!(count("SELECT ?o { ?s ex:p ?o FILTER(?o<2||?o>0) }"), 1);
    // A prefix named like a boolean is a prefix.
    assert_eq!(
        count("PREFIX TRUE: <http://ex/> SELECT ?o { ?s TRUE:p ?o }"),
        4
    );
}

/// Strings of many shapes: empty, prefixes of one another, accents and astral code points
/// (byte order is code point order in UTF-8), equal values, and literals of other kinds that
/// must not take the simple literals' fast comparison.
const STRINGS: &str = r#"
@prefix ex: <http://ex/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:a ex:v "" . ex:b ex:v "a" . ex:c ex:v "ab" . ex:d ex:v "B" . ex:e ex:v "é" .
ex:f ex:v "e\u0301" . ex:g ex:v "z" . ex:h ex:v "\U0001F600" . ex:i ex:v "\uFFFD" .
ex:j ex:v "ab" . ex:k ex:v "ab"@en . ex:l ex:v "ab"^^xsd:string . ex:m ex:v 10 .
ex:n ex:v 9 . ex:o ex:v ex:iri . ex:p ex:v "a\u0000b" . ex:q ex:v "a b" .
ex:r ex:v ex:b . ex:s ex:v ex:a . ex:t ex:v _:x . ex:u ex:v _:x . ex:w ex:v _:y .
ex:a ex:w "z" . ex:b ex:w ex:g . ex:c ex:w "é" . ex:x ex:v "010"^^xsd:integer .
"#;

/// A store loaded by `nearflow load` holds its ids in key order, so the engine compares two
/// simple literals by their ids, tests `=` between nodes or simple literals by their ids, and
/// orders IRIs and simple literals by their ids; the answers must be those of the in-memory
/// store (whose ids are in load order, compared by their terms) and of Oxigraph.
#[test]
fn string_order_on_a_store_loaded_in_key_order_matches_an_in_memory_store() {
    use nearflow_rdf::{load::LoadOptions, open};
    let dir = std::env::temp_dir().join(format!("nearflow-key-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (file, target) = (dir.join("strings.ttl"), dir.join("strings.store"));
    std::fs::write(&file, STRINGS).unwrap();
    let never = std::sync::atomic::AtomicBool::new(false);
    let options = LoadOptions::default();
    open::load_to_snapshot(&[file], &options, 64 << 20, &target, &open::Silent, &never).unwrap();
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let bulk = Arc::new(open::open_store(&machine, &target, &open::Silent).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
    // The fast path is taken: the store's simple literals are one run of ids.
    assert!(bulk.dict().ordered_strings().len() >= 10);
    assert!(bulk.dict().ordered_iris().len() >= 20);
    assert_eq!(bulk.dict().ordered_blanks().len(), 2);
    let (memory, rt) = ours_of(STRINGS);
    assert!(memory.dict().ordered_strings().is_empty());
    let oxi = oxigraph_from_turtle(STRINGS);
    for op in ["<", "<=", ">", ">=", "=", "!="] {
        let text = format!(
            "PREFIX ex: <http://ex/> SELECT ?s ?t WHERE {{ ?s ex:v ?a . ?t ex:v ?b \
             FILTER(?a {op} ?b) }}"
        );
        let want = ours_on(&memory, &rt, &text);
        let got = ours_on(&bulk, &rt, &text);
        compare(&got, &want, &text, Expected::from_query(&text));
        if matches!(op, "<" | ">") {
            // (Oxigraph answers `<=` between two equal IRIs or tagged strings, where SPARQL
            // has an error: `ordering_iris_and_tagged_strings_is_an_error_where_oxigraph_answers`.)
            compare(
                &got,
                &reference(&oxi, &text),
                &text,
                Expected::from_query(&text),
            );
        }
        assert!(got.count() > 0, "{text}");
    }
    // ORDER BY over IRIs and simple literals only (ordered by id), unbound values among them,
    // both directions, whole and cut (a top-k); then over every kind (ordered by value).
    let nodes_and_strings = "FILTER(isIRI(?a) || datatype(?a) = xsd:string)";
    for (filter, order, cut) in [
        (nodes_and_strings, "?a", ""),
        (nodes_and_strings, "DESC(?a)", ""),
        (nodes_and_strings, "?a", "LIMIT 4 OFFSET 3"),
        (nodes_and_strings, "DESC(?b) ?a", ""),
        (nodes_and_strings, "?b DESC(?a)", "LIMIT 5"),
        ("", "?a", ""),
        ("", "DESC(?b) ?a", "LIMIT 6"),
    ] {
        let text = format!(
            "PREFIX ex: <http://ex/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> \
             SELECT DISTINCT ?a ?b WHERE {{ ?s ex:v ?a OPTIONAL {{ ?s ex:w ?b }} {filter} }} \
             ORDER BY {order} {cut}"
        );
        let want = ours_on(&memory, &rt, &text);
        let got = ours_on(&bulk, &rt, &text);
        compare(&got, &want, &text, Expected::from_query(&text));
        assert!(got.count() >= 4, "{text}");
    }
}

/// Terms of every kind `=` treats apart: numbers in several lexical forms and types, booleans,
/// dates with and without a time zone, strings, tagged strings, IRIs, blank nodes, ill-typed
/// and unknown-datatype literals.
const EQUAL_KINDS: [&str; 26] = [
    "1",
    "\"01\"^^xsd:integer",
    "1.0",
    "\"1\"^^xsd:double",
    "\"1\"^^xsd:float",
    "2",
    "\"-0\"^^xsd:integer",
    "\"0.0e0\"^^xsd:double",
    "\"NaN\"^^xsd:double",
    "true",
    "\"1\"^^xsd:boolean",
    "false",
    "\"2020-01-01T00:00:00Z\"^^xsd:dateTime",
    "\"2020-01-01T01:00:00+01:00\"^^xsd:dateTime",
    "\"2020-01-01T00:00:00\"^^xsd:dateTime",
    "\"2020-01-01\"^^xsd:date",
    "\"1\"",
    "\"1\"^^xsd:string",
    "\"1\"@en",
    "\"one\"@en",
    "ex:iri",
    "_:b",
    "\"abc\"^^xsd:integer",
    "\"x\"^^ex:unknown",
    "\"1\"^^ex:unknown",
    "\"\"",
];

/// `?a = ?b` between two patterns that share no variable, the second much larger than the
/// first, is an index join on the `=`: a lookup per row of the term `=` to `?a` when that term is
/// `=` only to itself, the matches with its value key otherwise. Its answers are those of the
/// same `=` over the cross product, and Oxigraph's (where it keeps the terms as written).
#[test]
fn an_index_join_on_an_equality_matches_the_cross_product_and_oxigraph() {
    let mut data = String::from(
        "@prefix ex: <http://ex/> .\n@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n",
    );
    for (i, v) in EQUAL_KINDS.iter().enumerate() {
        writeln!(data, "ex:s{i} ex:v {v} . ex:t{i} ex:w {v} .").unwrap();
    }
    for i in 0..2_000 {
        writeln!(data, "ex:f{i} ex:w \"filler {i}\" .").unwrap();
    }
    let (store, rt) = ours_of(&data);
    let oxi = oxigraph_from_turtle(&data);
    for (select, cond) in [
        ("?s ?t", "?a = ?b"),
        ("?s ?t ?a ?b", "?b = ?a"),
        ("?s ?t", "?a = ?b && STR(?a) != STR(?b)"),
        ("?s", "?a = ?b && isNumeric(?a)"),
    ] {
        let text =
            format!("{PRE}SELECT {select} WHERE {{ ?s ex:v ?a . ?t ex:w ?b FILTER({cond}) }}");
        let prepared = sparql::prepare(&store, &text, &sparql::Options::default()).unwrap();
        prepared.run_collect(&rt).unwrap();
        let plan = prepared.explain();
        assert!(
            plan.contains("index join ?t <http://ex/w> ?b on ?a = ?b"),
            "{text}\n{plan}"
        );
        let got = ours_on(&store, &rt, &text);
        let crossed = format!(
            "{PRE}SELECT {select} WHERE {{ {{ ?s ex:v ?a }} {{ SELECT ?t ?b WHERE {{ ?t ex:w ?b }} }} \
             FILTER({cond}) }}"
        );
        let expected = Expected::from_query(&text);
        compare(
            &got,
            &ours_on(&store, &rt, &crossed),
            &text,
            expected.clone(),
        );
        if !select.contains("?a") && !cond.contains("STR") {
            // (Oxigraph keeps numbers and booleans in canonical form, so their lexical forms
            // differ: `lexical_forms_are_kept_where_oxigraph_canonicalises`.)
            compare(&got, &reference(&oxi, &text), &text, expected);
        }
        assert!(got.count() > 0, "{text}");
    }
}

/// `COUNT(*)` of one pattern, or of a UNION of patterns, is counted by the indexes, with no row
/// read; where a count of
/// matches is not the count of solutions (a variable twice, a filter, a default graph merged
/// from several graphs, DISTINCT, a subquery's LIMIT) the rows are counted. Both agree with Oxigraph, in the
/// default graph, in one named graph and over the named graphs.
#[test]
fn counts_from_the_indexes_match_oxigraph() {
    let (store, rt) = common::ours_of_trig(GRAPHS);
    let oxi = common::oxigraph_from_trig(GRAPHS);
    for (q, indexed) in [
        ("SELECT (COUNT(*) AS ?c) WHERE { ?s ?p ?o }", true),
        ("SELECT (COUNT(*) AS ?c) WHERE { ?s ex:p ?o }", true),
        ("SELECT (COUNT(?o) AS ?c) WHERE { ?s ex:p ?o }", true),
        ("SELECT (COUNT(*) AS ?c) WHERE { ex:a ?p ?o }", true),
        ("SELECT (COUNT(*) AS ?c) WHERE { ?s ex:missing ?o }", true),
        (
            "SELECT (COUNT(*) AS ?c) WHERE { GRAPH ?g { ?s ?p ?o } }",
            true,
        ),
        // (A constant GRAPH is a join with the test that the graph exists: its rows counted.)
        (
            "SELECT (COUNT(*) AS ?c) WHERE { GRAPH ex:g1 { ?s ex:p ?o } }",
            false,
        ),
        (
            "SELECT (COUNT(*) AS ?c) FROM ex:g1 WHERE { ?s ?p ?o }",
            true,
        ),
        ("SELECT (COUNT(*) AS ?c) WHERE { ?x ex:p ?x }", false),
        // A UNION keeps each branch's rows: the sum of their counts.
        (
            "SELECT (COUNT(*) AS ?c) WHERE { { ?s ex:p ?o } UNION { ?s ?p ?o } UNION { ex:a ?p ?o } }",
            true,
        ),
        (
            "SELECT (COUNT(*) AS ?c) WHERE { { ?s ex:p ?o } UNION { ?x ex:p ?x } }",
            false,
        ),
        (
            "SELECT (COUNT(?o) AS ?c) WHERE { { ?s ex:p ?o } UNION { ?s ex:q ?z } }",
            false,
        ),
        (
            "SELECT (COUNT(*) AS ?c) WHERE { GRAPH ?g { ?s ?p ?g } }",
            false,
        ),
        (
            "SELECT (COUNT(*) AS ?c) WHERE { ?s ex:p ?o FILTER(?o != ex:a) }",
            false,
        ),
        (
            "SELECT (COUNT(*) AS ?c) FROM ex:g1 FROM ex:g2 WHERE { ?s ?p ?o }",
            false,
        ),
        (
            "SELECT (COUNT(DISTINCT ?s) AS ?c) WHERE { ?s ?p ?o }",
            false,
        ),
        ("SELECT (COUNT(?z) AS ?c) WHERE { ?s ?p ?o }", false),
        // A subquery's projection keeps every row; DISTINCT and LIMIT do not.
        (
            "SELECT (COUNT(*) AS ?c) WHERE { SELECT ?s WHERE { ?s ex:p ?o } }",
            true,
        ),
        (
            "SELECT (COUNT(*) AS ?c) WHERE { SELECT DISTINCT ?s WHERE { ?s ?p ?o } }",
            false,
        ),
        (
            "SELECT (COUNT(*) AS ?c) WHERE { SELECT ?s WHERE { ?s ?p ?o } LIMIT 2 }",
            false,
        ),
        (
            "SELECT (COUNT(?o) AS ?c) WHERE { SELECT ?s WHERE { ?s ex:p ?o } }",
            false,
        ),
    ] {
        let text = format!("{PRE}{q}");
        let prepared = sparql::prepare(&store, &text, &sparql::Options::default()).unwrap();
        prepared.run_collect(&rt).unwrap();
        assert_eq!(
            prepared.explain().contains("from the indexes"),
            indexed,
            "{q}\n{}",
            prepared.explain()
        );
        compare(
            &ours_on(&store, &rt, &text),
            &reference(&oxi, &text),
            &text,
            Expected::from_query(&text),
        );
    }
}

/// The index join on `=` reads the pattern's numbers once into a table by value key: the table
/// is charged to the plan's memory limit, so a limit below it stops the query with the memory
/// error, and the same query without the limit answers.
#[test]
fn an_index_join_on_an_equality_keeps_the_memory_limit() {
    let mut data = String::from("@prefix ex: <http://ex/> .\n");
    for i in 0..5 {
        writeln!(data, "ex:s{i} ex:v {i} .").unwrap();
    }
    for i in 0..40_000 {
        writeln!(data, "ex:t{i} ex:w {} .", i % 1000).unwrap();
    }
    let (store, rt) = ours_of(&data);
    let text = format!("{PRE}SELECT ?s ?t WHERE {{ ?s ex:v ?a . ?t ex:w ?b FILTER(?a = ?b) }}");
    let limited = sparql::Options {
        memory_limit: Some(64 << 10),
        ..Default::default()
    };
    let prepared = sparql::prepare(&store, &text, &limited).unwrap();
    assert!(
        prepared.explain().contains("on ?a = ?b"),
        "{}",
        prepared.explain()
    );
    let e = prepared
        .run_collect(&rt)
        .err()
        .expect("over the memory limit");
    assert!(matches!(e, sparql::QueryError::MemoryLimit { .. }), "{e}");
    assert_eq!(ours_on(&store, &rt, &text).count(), 5 * 40);
}

/// A hash join whose build side binds only the join key counts that side's keys instead of
/// keeping its rows: in every mode (inner, OPTIONAL, MINUS, NOT EXISTS, EXISTS, EXISTS as a
/// value), with a key held by several build rows (a subquery's projection, a key in two
/// graphs), with keys close together (counted in an array) and far apart (in a hash map), the
/// answers equal Oxigraph's.
#[test]
fn a_join_counting_its_build_keys_matches_oxigraph() {
    let mut data = String::from("@prefix ex: <http://ex/> .\n");
    for i in 0..3000 {
        writeln!(data, "ex:s{i} ex:v {} .", i % 7).unwrap();
        if i % 3 == 0 {
            writeln!(data, "ex:s{i} a ex:C , ex:E .").unwrap();
        }
        if i % 5 == 0 {
            writeln!(data, "ex:s{i} ex:w {} , {} .", i, i + 1).unwrap();
        }
    }
    // Keys whose ids lie far from the others' (interned last, among many other terms).
    for i in 0..20_000 {
        writeln!(data, "ex:o{i} ex:z {i} .").unwrap();
    }
    for i in 0..30 {
        writeln!(data, "ex:far{i} ex:v {i} . ex:far{i} a ex:D , ex:E .").unwrap();
    }
    let trig =
        format!("{data}\nex:g1 {{ ex:s3 a ex:C . ex:s4 a ex:C . }}\nex:g2 {{ ex:s3 a ex:C . }}\n");
    let (store, rt) = common::ours_of_trig(&trig);
    let oxi = common::oxigraph_from_trig(&trig);
    let mut counted = 0;
    for q in [
        "SELECT ?x ?v WHERE { ?x ex:v ?v . ?x a ex:C }",
        "SELECT ?x ?v WHERE { ?x ex:v ?v . ?x a ex:D }",
        "SELECT ?x ?v WHERE { ?x ex:v ?v . ?x a ex:E }",
        "SELECT ?x ?v WHERE { ?x ex:v ?v FILTER NOT EXISTS { ?x a ex:E } }",
        "SELECT ?x ?v WHERE { ?x ex:v ?v OPTIONAL { ?x a ex:C } }",
        "SELECT ?x ?v WHERE { ?x ex:v ?v MINUS { ?x a ex:C } }",
        "SELECT ?x ?v WHERE { ?x ex:v ?v FILTER NOT EXISTS { ?x a ex:C } }",
        "SELECT ?x ?v WHERE { ?x ex:v ?v FILTER EXISTS { ?x a ex:C } }",
        "SELECT ?x ?v ?c WHERE { ?x ex:v ?v BIND(EXISTS { ?x a ex:C } AS ?c) }",
        "SELECT ?x ?v WHERE { ?x ex:v ?v { SELECT ?x WHERE { ?x ex:w ?w } } }",
        "SELECT ?x ?v WHERE { ?x ex:v ?v OPTIONAL { SELECT ?x WHERE { ?x ex:w ?w } } }",
        "SELECT (COUNT(*) AS ?n) WHERE { ?x ex:v ?v . ?x a ex:C }",
        "SELECT ?x ?v ?g WHERE { ?x ex:v ?v . GRAPH ?g { ?x a ex:C } }",
        "SELECT ?x ?v WHERE { ?x ex:v ?v . GRAPH ?g { ?x a ex:C } }",
    ] {
        let text = format!("{PRE}{q}");
        let prepared = sparql::prepare(&store, &text, &sparql::Options::default()).unwrap();
        counted += usize::from(
            prepared
                .explain()
                .contains("counting the build side's keys"),
        );
        compare(
            &ours_on(&store, &rt, &text),
            &reference(&oxi, &text),
            &text,
            Expected::from_query(&text),
        );
    }
    assert!(counted >= 10, "{counted} of the joins count their keys");
}

/// `COUNT(*)` of two patterns joined on one variable, one of them a check of that variable
/// alone, is counted from the indexes without forming a joined row — the check's values read
/// into a set when the other pattern has many matches, looked up per match when it has few —
/// and equals Oxigraph's count; where that is not the count of solutions (a second shared
/// variable, DISTINCT, a graph variable, a filter) the rows are counted.
#[test]
fn counts_of_a_join_on_one_variable_match_oxigraph() {
    let mut data = String::from("@prefix ex: <http://ex/> .\n");
    for i in 0..4000 {
        writeln!(data, "ex:s{i} ex:v {} .", i % 11).unwrap();
        if i % 3 == 0 {
            writeln!(data, "ex:s{i} a ex:C .").unwrap();
        }
        if i % 199 == 0 {
            writeln!(data, "ex:s{i} ex:rare {i} , {} .", i + 1).unwrap();
        }
    }
    // A type whose members' ids lie far apart (a hash set, not a bitmap).
    for i in 0..30_000 {
        writeln!(data, "ex:o{i} ex:z {i} .").unwrap();
    }
    for i in 0..40 {
        writeln!(data, "ex:far{i} a ex:C , ex:F . ex:far{i} ex:v {i} .").unwrap();
    }
    writeln!(data, "ex:s0 a ex:F .").unwrap();
    let trig = format!(
        "{data}\nex:g1 {{ ex:s3 a ex:C . ex:s3 ex:v 1 . }}\nex:g2 {{ ex:s3 a ex:C . ex:s6 ex:v 2 . }}\n"
    );
    let (store, rt) = common::ours_of_trig(&trig);
    let oxi = common::oxigraph_from_trig(&trig);
    for (q, how) in [
        // Many matches: the check's values into a set.
        (
            "SELECT (COUNT(*) AS ?n) WHERE { ?x a ex:C . ?x ex:v ?v }",
            Some("a set"),
        ),
        (
            "SELECT (COUNT(*) AS ?n) WHERE { ?x ex:v ?v . ?x a ex:F }",
            Some("a set"),
        ),
        (
            "SELECT (COUNT(*) AS ?n) WHERE { SELECT ?x WHERE { ?x a ex:C . ?x ex:v ?v } }",
            Some("a set"),
        ),
        // Few matches: each looked up.
        (
            "SELECT (COUNT(*) AS ?n) WHERE { ?x a ex:C . ?x ex:rare ?v }",
            Some("looked up"),
        ),
        (
            "SELECT (COUNT(*) AS ?n) WHERE { ?x ex:rare ?v . ?x a ex:C }",
            Some("looked up"),
        ),
        // Not counted from the indexes.
        (
            "SELECT (COUNT(*) AS ?n) WHERE { ?x a ?t . ?x ex:v ?t }",
            None,
        ),
        (
            "SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE { ?x a ex:C . ?x ex:v ?v }",
            None,
        ),
        (
            "SELECT (COUNT(*) AS ?n) WHERE { ?x a ex:C . ?x ex:v ?v FILTER(?v > 3) }",
            None,
        ),
        (
            "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?x a ex:C . ?x ex:v ?v } }",
            None,
        ),
        // (Two graphs merged as the default graph: counted as rows; Oxigraph counts a triple
        // both hold twice: `the_default_graph_of_from_clauses_is_a_merge`.)
        // One named graph as the default graph: counted.
        (
            "SELECT (COUNT(*) AS ?n) FROM ex:g1 WHERE { ?x a ex:C . ?x ex:v ?v }",
            Some("a set"),
        ),
        (
            "SELECT (COUNT(?v) AS ?n) WHERE { ?x a ex:C . ?x ex:v ?v }",
            None,
        ),
        (
            "SELECT (COUNT(*) AS ?n) WHERE { ?x a ex:Missing . ?x ex:v ?v }",
            None,
        ),
    ] {
        let text = format!("{PRE}{q}");
        let prepared = sparql::prepare(&store, &text, &sparql::Options::default()).unwrap();
        let explain = prepared.explain();
        match how {
            Some(how) => assert!(
                explain.contains("whose ?x is one of") && explain.contains(how),
                "{q}\n{explain}"
            ),
            None => assert!(!explain.contains("whose ?x is one of"), "{q}\n{explain}"),
        }
        compare(
            &ours_on(&store, &rt, &text),
            &reference(&oxi, &text),
            &text,
            Expected::from_query(&text),
        );
    }
}

/// OPTIONAL, EXISTS, NOT EXISTS, MINUS and EXISTS inside an expression whose left side is small
/// and whose right side is large are index joins from the left: a lookup per left row, never a
/// scan of the right; EXISTS from a large side of one pattern looks the small side's values up
/// in it. Answers equal Oxigraph's, with a maybe-bound variable, a condition, a chain of two
/// patterns and a named graph.
#[test]
fn index_joins_from_a_small_side_match_oxigraph() {
    let mut data = String::from("@prefix ex: <http://ex/> .\n");
    for i in 0..30_000 {
        writeln!(data, "ex:s{i} ex:p ex:o{} .", i % 6_000).unwrap();
        writeln!(data, "ex:o{i} ex:q {} .", i % 7).unwrap();
    }
    for i in 0..12 {
        writeln!(data, "ex:s{} ex:rare ex:r{i} .", i * 997).unwrap();
    }
    data.push_str("ex:x ex:rare ex:r0 . ex:s0 ex:p ex:s0 . ex:s0 ex:rare ex:r99 .\n");
    let (store, rt) = ours_of(&data);
    let oxi = oxigraph_from_turtle(&data);
    for q in [
        "SELECT ?s ?o WHERE { ?s ex:rare ?r OPTIONAL { ?s ex:p ?o } }",
        "SELECT ?s ?o ?n WHERE { ?s ex:rare ?r OPTIONAL { ?s ex:p ?o FILTER(?o != ex:o0) } }",
        "SELECT ?s WHERE { ?s ex:rare ?r FILTER EXISTS { ?s ex:p ?o } }",
        "SELECT ?s WHERE { ?s ex:rare ?r FILTER EXISTS { ?s ex:p ?o . ?o ex:q 3 } }",
        "SELECT ?s WHERE { ?s ex:rare ?r FILTER NOT EXISTS { ?s ex:p ?o . ?o ex:q 3 } }",
        "SELECT ?s WHERE { ?s ex:rare ?r FILTER NOT EXISTS { ?s ex:p ?s } }",
        "SELECT ?s WHERE { ?s ex:rare ?r MINUS { ?s ex:p ?o } }",
        "SELECT ?s ?e WHERE { ?s ex:rare ?r BIND(EXISTS { ?s ex:p ?o . ?o ex:q 2 } AS ?e) }",
        "SELECT ?s WHERE { ?s ex:rare ?r FILTER(EXISTS { ?s ex:p ?o } || ?r = ex:r1) }",
        // EXISTS from the large side: the small side's values looked up, each once (ex:s0 has
        // two ex:rare triples).
        "SELECT ?s ?o WHERE { ?s ex:p ?o FILTER EXISTS { ?s ex:rare ?r } }",
        "SELECT ?s ?o WHERE { ?s ex:p ?o FILTER(?o != ex:o0) FILTER EXISTS { ?s ex:rare ?r } }",
        "SELECT ?s WHERE { ?s ex:p ?o FILTER EXISTS { ?s ex:rare ?r . ?s ex:p ex:s0 } }",
    ] {
        let text = format!("{PRE}{q}");
        let prepared = sparql::prepare(&store, &text, &sparql::Options::default()).unwrap();
        prepared.run_collect(&rt).unwrap();
        assert!(
            prepared.explain().contains(" index join "),
            "{q}\n{}",
            prepared.explain()
        );
        compare(
            &ours_on(&store, &rt, &text),
            &reference(&oxi, &text),
            q,
            Expected::from_query(&text),
        );
    }
    // MINUS from the large side, EXISTS from a large side of two patterns and a lookup on a
    // maybe-bound variable are hash joins, their answers the same as Oxigraph's.
    for q in [
        "SELECT ?s WHERE { ?s ex:p ?o . ?o ex:q ?n FILTER EXISTS { ?s ex:rare ?r } }",
        "SELECT ?s WHERE { ?s ex:p ?o MINUS { ?s ex:rare ?r } }",
        "SELECT ?s ?o WHERE { ?s ex:rare ?r OPTIONAL { ?s ex:rare ?m } OPTIONAL { ?m ex:p ?o } }",
    ] {
        let text = format!("{PRE}{q}");
        let prepared = sparql::prepare(&store, &text, &sparql::Options::default()).unwrap();
        assert!(
            !prepared.explain().contains(" index join "),
            "{q}\n{}",
            prepared.explain()
        );
        compare(
            &ours_on(&store, &rt, &text),
            &reference(&oxi, &text),
            q,
            Expected::from_query(&text),
        );
    }
    // In a named graph.
    let mut trig = String::from("@prefix ex: <http://ex/> .\nex:g {\n");
    for i in 0..30_000 {
        writeln!(trig, "ex:s{i} ex:p ex:o{} .", i % 6_000).unwrap();
    }
    trig.push_str("ex:s5 ex:rare ex:r . ex:y ex:rare ex:r .\n}\nex:s6 ex:rare ex:r .\n");
    let (store, rt) = common::ours_of_trig(&trig);
    let oxi = common::oxigraph_from_trig(&trig);
    for q in [
        "SELECT ?s ?o WHERE { GRAPH ex:g { ?s ex:rare ?r OPTIONAL { ?s ex:p ?o } } }",
        "SELECT ?s WHERE { GRAPH ex:g { ?s ex:rare ?r FILTER NOT EXISTS { ?s ex:p ?o } } }",
        "SELECT ?s ?g WHERE { GRAPH ?g { ?s ex:rare ?r FILTER EXISTS { ?s ex:p ?o } } }",
    ] {
        let text = format!("{PRE}{q}");
        compare(
            &ours_on(&store, &rt, &text),
            &reference(&oxi, &text),
            q,
            Expected::from_query(&text),
        );
    }
}

/// `COUNT(*)` of a join of two patterns on one variable, each with another variable, is summed
/// from a count per value of the smaller pattern (or a lookup per match of a far smaller one),
/// no joined row formed; it equals Oxigraph's count, on subjects and on an object joined to a
/// subject, and where a filter, a repeated variable or two shared variables need the rows.
#[test]
fn counts_of_joins_without_rows_match_oxigraph() {
    let mut data = String::from("@prefix ex: <http://ex/> .\n");
    for i in 0..20_000 {
        writeln!(data, "ex:s{} ex:p ex:o{} .", i % 7_000, i % 11).unwrap();
        writeln!(data, "ex:s{} ex:q ex:s{} .", (i * 7) % 9_000, i % 5).unwrap();
    }
    for i in 0..9 {
        writeln!(
            data,
            "ex:s{} ex:r {i} . ex:s{} ex:r {} .",
            i * 13,
            i * 13,
            i + 1
        )
        .unwrap();
    }
    let (store, rt) = ours_of(&data);
    let oxi = oxigraph_from_turtle(&data);
    for (q, summed) in [
        ("{ ?s ex:p ?o . ?s ex:q ?v }", true),
        ("{ ?s ex:q ?v . ?s ex:p ?o }", true),
        ("{ ?s ex:r ?x . ?s ex:p ?o }", true),
        ("{ ?a ex:q ?s . ?s ex:p ?o }", true),
        // (A predicate the store lacks makes the plan empty.)
        ("{ ?s ex:p ?o . ?s ex:missing ?v }", false),
        ("{ ?s ex:p ?o . ?s ex:q ?o }", false),
        ("{ ?s ex:p ?o . ?s ex:q ?v FILTER(?v != ex:s1) }", false),
        ("{ ?s ex:q ?s . ?s ex:p ?o }", false),
    ] {
        let text = format!("{PRE}SELECT (COUNT(*) AS ?c) WHERE {q}");
        let prepared = sparql::prepare(&store, &text, &sparql::Options::default()).unwrap();
        prepared.run_collect(&rt).unwrap();
        assert_eq!(
            prepared.explain().contains(" whose ?s is one of "),
            summed,
            "{q}\n{}",
            prepared.explain()
        );
        compare(
            &ours_on(&store, &rt, &text),
            &reference(&oxi, &text),
            q,
            Expected::from_query(&text),
        );
    }
}

/// `COUNT(*)` of OPTIONAL, EXISTS, NOT EXISTS and MINUS on one shared variable is summed from
/// the indexes in either direction, and a pattern's values with their counts are read a run at
/// a time (DISTINCT, GROUP BY, `COUNT(DISTINCT …)`, a count under a filter of the value):
/// each answer as Oxigraph's, each plan as chosen.
#[test]
fn counts_of_optional_exists_minus_and_value_runs_match_oxigraph() {
    let mut data = String::from("@prefix ex: <http://ex/> .\n");
    for i in 0..20_000 {
        writeln!(data, "ex:s{} ex:p ex:o{} .", i % 7_000, i % 11).unwrap();
    }
    for i in 0..5_000 {
        writeln!(data, "ex:s{i} ex:n {} .", i % 50).unwrap();
    }
    for i in 0..40 {
        writeln!(data, "ex:s{} ex:t ex:x{i} .", i * 13).unwrap();
    }
    for i in 0..10 {
        writeln!(data, "ex:s{} ex:t ex:y{i} .", i * 13).unwrap();
    }
    let (store, rt) = ours_of(&data);
    let oxi = oxigraph_from_turtle(&data);
    let count = |w: &str| format!("{PRE}SELECT (COUNT(*) AS ?c) WHERE {w}");
    let cases: Vec<(String, Option<&str>)> = vec![
        (count("{ ?s ex:p ?o OPTIONAL { ?s ex:t ?x } }"), Some("with or without a match in ?s <http://ex/t> ?x on ?s, the latter's values grouped")),
        (count("{ ?s ex:p ?o FILTER NOT EXISTS { ?s ex:t ?x } }"), Some("with no match in ?s <http://ex/t> ?x on ?s, the latter's values grouped")),
        (count("{ ?s ex:p ?o FILTER EXISTS { ?s ex:t ?x } }"), Some("with a match in ?s <http://ex/t> ?x on ?s, the latter's values grouped")),
        (count("{ ?s ex:p ?o MINUS { ?s ex:t ?x } }"), Some("with no match in ?s <http://ex/t> ?x on ?s, the latter's values grouped")),
        (count("{ ?s ex:t ?x OPTIONAL { ?s ex:p ?o } }"), Some("with or without a match in ?s <http://ex/p> ?o on ?s, each looked up")),
        (count("{ ?s ex:t ?x FILTER NOT EXISTS { ?s ex:p ?o } }"), Some("with no match in ?s <http://ex/p> ?o on ?s, each looked up")),
        (count("{ ?s ex:p ?o OPTIONAL { ?s ex:n ?v } }"), Some("with or without a match in")),
        (count("{ ?s ex:p ?o FILTER NOT EXISTS { ?s ex:n ?v } }"), Some("with no match in")),
        // A condition, or a second shared variable: rows are joined.
        (count("{ ?s ex:p ?o OPTIONAL { ?s ex:t ?x FILTER(?x != ex:x1) } }"), None),
        (count("{ ?s ex:p ?o OPTIONAL { ?s ex:t ?o } }"), None),
        (count("{ ?s ex:n ?v FILTER(?v > 20) }"), Some("matches of the values of ?v holding")),
        (count("{ ?s ex:n ?v FILTER(?v > 20 && ?v != 33) }"), Some("matches of the values of ?v holding")),
        (format!("{PRE}SELECT ?o (COUNT(*) AS ?n) WHERE {{ ?s ex:p ?o }} GROUP BY ?o"), Some("values of ?o in ?s <http://ex/p> ?o, a run each, ")),
        (format!("{PRE}SELECT ?o (COUNT(?s) AS ?n) WHERE {{ ?s ex:p ?o }} GROUP BY ?o"), Some("a run each, ")),
        (format!("{PRE}SELECT ?o WHERE {{ ?s ex:p ?o }} GROUP BY ?o"), Some("values of ?o in ?s <http://ex/p> ?o, a run each")),
        (format!("{PRE}SELECT ?o (COUNT(*) AS ?n) WHERE {{ ?s ex:p ?o }} GROUP BY ?o HAVING (COUNT(*) > 1818)"), Some("a run each, ")),
        (format!("{PRE}SELECT DISTINCT ?o WHERE {{ ?s ex:p ?o }}"), Some("values of ?o in ?s <http://ex/p> ?o, a run each")),
        (format!("{PRE}SELECT DISTINCT ?v WHERE {{ ?s ex:n ?v FILTER(?v < 10) }}"), Some("values of ?v holding")),
        (format!("{PRE}SELECT (COUNT(DISTINCT ?o) AS ?c) WHERE {{ ?s ex:p ?o }}"), Some(":= values of ?o in")),
        (count("{ SELECT DISTINCT ?o WHERE { ?s ex:p ?o } }"), Some(":= values of ?o in")),
        (count("{ SELECT ?o (COUNT(*) AS ?n) WHERE { ?s ex:p ?o } GROUP BY ?o }"), Some(":= values of ?o in")),
        // A value per match: runs of one row, unless a filter is evaluated per value.
        (format!("{PRE}SELECT ?x (COUNT(*) AS ?n) WHERE {{ ?s ex:t ?x }} GROUP BY ?x"), Some("a run each, ")),
        (count("{ SELECT DISTINCT ?x WHERE { ?s ex:t ?x } }"), Some(":= values of ?x in")),
        (count("{ ?s ex:t ?x FILTER(?x != ex:x1) }"), None),
        // Values not sorted in any index, or a filter of another variable: rows are read.
        (format!("{PRE}SELECT DISTINCT ?s WHERE {{ ?s ex:p ?o }}"), None),
        (format!("{PRE}SELECT ?s (COUNT(*) AS ?n) WHERE {{ ?s ex:t ?x }} GROUP BY ?s"), None),
        (count("{ ?s ex:n ?v FILTER(?v > 20 && ?s != ex:s1) }"), None),
    ];
    for (text, how) in &cases {
        let prepared = sparql::prepare(&store, text, &sparql::Options::default()).unwrap();
        prepared.run_collect(&rt).unwrap();
        let explain = prepared.explain();
        match how {
            Some(how) => assert!(explain.contains(how), "{text}\n{explain}"),
            None => assert!(
                !explain.contains("a run each") && !explain.contains(" match in "),
                "{text}\n{explain}"
            ),
        }
        compare(
            &ours_on(&store, &rt, text),
            &reference(&oxi, text),
            text,
            Expected::from_query(text),
        );
    }
}
