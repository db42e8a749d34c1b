//! `nearflow sparql` and `nearflow load` as a user runs them: answers in every format, a
//! snapshot round trip, and a one-line error with a non-zero exit for every kind of bad input.

mod common;

use std::path::PathBuf;

use common::{fails_on_first_line as fails_with, nearflow, ok, sparql};

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sparql-cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

const DATA: &str = "@prefix ex: <http://ex/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:alice ex:name \"Alice\" ; ex:age \"30\"^^xsd:integer ; ex:knows ex:bob .
ex:bob ex:name \"Bob\"@en ; ex:age \"025\"^^xsd:integer .
ex:carol ex:name \"Carol\" .
";

/// `DATA` in a file of the calling test's own: the tests run in parallel, and one rewriting a
/// shared file while another's query read it made that query see part of the data (a flaky
/// empty answer in CI).
fn data_file(test: &str) -> String {
    let f = scratch(&format!("people-{test}.ttl"));
    std::fs::write(&f, DATA).unwrap();
    f.to_str().unwrap().to_owned()
}

#[test]
fn a_query_answers_in_every_format() {
    let d = data_file("a_query_answers_in_every_format");
    let q =
        "PREFIX ex: <http://ex/> SELECT ?p ?a WHERE { ?p ex:age ?a FILTER(?a > 26) } ORDER BY ?a";
    let table = ok(&sparql("--data", &d, q, &[]));
    assert!(
        table.contains("| ?p ") && table.contains("<http://ex/alice>"),
        "{table}"
    );
    assert!(table.contains("1 row"), "{table}");
    let csv = ok(&sparql("--data", &d, q, &["--format", "csv"]));
    assert_eq!(csv.replace('\r', ""), "p,a\nhttp://ex/alice,30\n");
    let json = ok(&sparql("--data", &d, q, &["--format", "json"]));
    assert!(
        json.contains("\"bindings\"") && json.contains("http://ex/alice"),
        "{json}"
    );
    let xml = ok(&sparql("--data", &d, q, &["--format", "xml"]));
    assert!(xml.contains("<sparql"), "{xml}");
    // The lexical form "025" is kept; it compares as 25.
    let tsv = ok(&sparql(
        "--data",
        &d,
        "PREFIX ex: <http://ex/> SELECT ?a WHERE { ex:bob ex:age ?a FILTER(?a < 26) }",
        &["--format", "tsv"],
    ));
    assert_eq!(tsv.lines().nth(1).map(str::trim), Some("025"), "{tsv:?}");
    let n = ok(&sparql(
        "--data",
        &d,
        "SELECT * WHERE { ?s ?p ?o }",
        &["--count"],
    ));
    assert_eq!(n.trim(), "6");
    let ask = ok(&sparql(
        "--data",
        &d,
        "PREFIX ex: <http://ex/> ASK { ex:alice ex:knows ex:bob }",
        &[],
    ));
    assert_eq!(ask.trim(), "yes");
    let graph = ok(&sparql(
        "--data",
        &d,
        "PREFIX ex: <http://ex/> CONSTRUCT { ?b ex:knownBy ?a } WHERE { ?a ex:knows ?b }",
        &[],
    ));
    assert_eq!(
        graph.trim(),
        "<http://ex/bob> <http://ex/knownBy> <http://ex/alice> ."
    );
    // Values the store does not hold, from BIND and SELECT expressions, in every writer.
    let q = "PREFIX ex: <http://ex/> SELECT ?p (?a + 1 AS ?next) (UCASE(?n) AS ?u) \
             WHERE { ?p ex:age ?a ; ex:name ?n } ORDER BY ?next";
    let csv = ok(&sparql("--data", &d, q, &["--format", "csv"]));
    assert_eq!(
        csv.replace('\r', ""),
        "p,next,u\nhttp://ex/bob,26,BOB\nhttp://ex/alice,31,ALICE\n"
    );
    let json = ok(&sparql("--data", &d, q, &["--format", "json"]));
    assert!(
        json.contains("\"xml:lang\":\"en\"") && json.contains("\"31\""),
        "{json}"
    );
    let graph = ok(&sparql(
        "--data",
        &d,
        "PREFIX ex: <http://ex/> CONSTRUCT { ?p ex:shout ?u } \
         WHERE { ?p ex:name ?n BIND(UCASE(?n) AS ?u) }",
        &[],
    ));
    let mut lines: Vec<&str> = graph.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "<http://ex/alice> <http://ex/shout> \"ALICE\" .",
            "<http://ex/bob> <http://ex/shout> \"BOB\"@en .",
            "<http://ex/carol> <http://ex/shout> \"CAROL\" ."
        ]
    );
}

#[test]
fn explain_prints_the_plan_with_rows() {
    let d = data_file("explain_prints_the_plan_with_rows");
    let out = nearflow(&sparql(
        "--data",
        &d,
        "PREFIX ex: <http://ex/> SELECT ?n WHERE { ?p ex:knows ?q . ?q ex:name ?n }",
        &["--explain", "--count"],
    ));
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("scan ") && err.contains("rows 1") && err.contains("ms"),
        "{err}"
    );
}

/// A constant the store lacks empties the plan: answered at once, without a request, and the
/// plan says so; an OPTIONAL's empty side does not empty its plan.
#[test]
fn a_query_over_an_absent_constant_is_answered_without_a_request() {
    let d = data_file("a_query_over_an_absent_constant_is_answered_without_a_request");
    let run = |q: &str| {
        let out = nearflow(&sparql("--data", &d, q, &["--explain"]));
        assert!(out.status.success());
        (
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (out, err) = run("PREFIX ex: <http://ex/> ASK { ex:alice ex:knows ex:nobody }");
    assert_eq!(out, "no");
    assert!(err.contains("answered without a request"), "{err}");
    let (out, err) = run(
        "PREFIX ex: <http://ex/> SELECT ?p ?x WHERE { ?p ex:knows ?q OPTIONAL { ?q ex:nope ?x } }",
    );
    assert!(
        out.contains("<http://ex/alice>") && out.contains("1 row"),
        "{out}"
    );
    assert!(!err.contains("answered without a request"), "{err}");
}

#[test]
fn a_snapshot_answers_as_the_files_do() {
    let d = data_file("a_snapshot_answers_as_the_files_do");
    let snap = scratch("people.store");
    let snap = snap.to_str().unwrap();
    ok(&["load", "--quiet", &d, "--save", snap]);
    let q = "SELECT ?s ?o WHERE { ?s <http://ex/name> ?o } ORDER BY ?o";
    assert_eq!(
        ok(&sparql("--store", snap, q, &["--format", "tsv"])),
        ok(&sparql("--data", &d, q, &["--format", "tsv"]))
    );
    // Truncated, then damaged.
    let bytes = std::fs::read(snap).unwrap();
    let cut = scratch("cut.store");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    fails_with(
        &sparql("--store", cut.to_str().unwrap(), q, &[]),
        "truncated",
    );
    // A byte of the index the query reads changed (format 5: the header's section table says
    // where the POS bits lie): the query's read checks that chunk, names it, and fails.
    let mut bad = bytes.clone();
    let pos = u64::from_le_bytes(bytes[56 + 24 * 10..64 + 24 * 10].try_into().unwrap()) as usize;
    bad[pos + 1] ^= 0x55;
    let bad_f = scratch("bad.store");
    std::fs::write(&bad_f, &bad).unwrap();
    fails_with(
        &sparql("--store", bad_f.to_str().unwrap(), q, &[]),
        "the POS index is damaged in its rows 0..",
    );
    // The header damaged: refused at open.
    let mut bad = bytes.clone();
    bad[20] ^= 0x55;
    std::fs::write(&bad_f, &bad).unwrap();
    fails_with(
        &sparql("--store", bad_f.to_str().unwrap(), q, &[]),
        "not a valid nearflow store snapshot",
    );
}

#[test]
fn bad_input_is_one_line_and_a_failure() {
    let d = data_file("bad_input_is_one_line_and_a_failure");
    let broken = scratch("broken.ttl");
    std::fs::write(
        &broken,
        "<http://a> <http://b> <http://c> .\n<http://a> <http://b> oops .\n",
    )
    .unwrap();
    let broken = broken.to_str().unwrap();
    fails_with(
        &sparql("--data", broken, "SELECT * { ?s ?p ?o }", &[]),
        "broken.ttl:2:",
    );
    fails_with(
        &sparql("--data", &d, "SELECT * WHERE { ?s ?p }", &[]),
        "SPARQL syntax error",
    );
    fails_with(
        &sparql("--data", &d, "SELECT * WHERE { ?s nope:p ?o }", &[]),
        "undeclared prefix 'nope:'",
    );
    fails_with(
        &sparql("--data", "/no/such/file.ttl", "SELECT * { ?s ?p ?o }", &[]),
        "no such file",
    );
    fails_with(
        &sparql("--data", "/etc/hostname", "SELECT * { ?s ?p ?o }", &[]),
        "cannot tell the format",
    );
    fails_with(
        &sparql(
            "--data",
            &d,
            "SELECT * WHERE { ?s ?p ?o SERVICE <http://example.org/sparql> { ?s ?p ?o } }",
            &[],
        ),
        "not supported: SERVICE (federation)",
    );
    // A function nearflow does not know: an error where it is called (§17.6), and a warning.
    let out = nearflow(&sparql(
        "--data",
        &d,
        "SELECT * WHERE { ?s ?p ?o FILTER(<http://example.org/f>(?o)) }",
        &["--count"],
    ));
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0\n");
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("warning: nearflow does not know the function <http://example.org/f>"));
    fails_with(
        &sparql("--data", &d, "SELEC * WHERE { ?s ?p ?o }", &[]),
        "at 1:1: expected SELECT, CONSTRUCT, ASK or DESCRIBE",
    );
    fails_with(
        &sparql(
            "--data",
            &d,
            "SELECT * { ?s ?p ?o }",
            &["--base", "not absolute"],
        ),
        "not an absolute IRI",
    );
    fails_with(
        &sparql(
            "--data",
            &d,
            "SELECT * { ?s ?p ?o }",
            &["--data-format", "yaml"],
        ),
        "unknown RDF format 'yaml'",
    );
    fails_with(
        &sparql(
            "--data",
            &d,
            "SELECT * WHERE { ?s ?p ?o FILTER regex(?o, \"(\") }",
            &[],
        ),
        "bad regular expression",
    );
    fails_with(
        &["sparql", "--quiet", "--data", &d, "--query", "/no/such.rq"],
        "/no/such.rq",
    );
    fails_with(
        &sparql("--data", &d, "SELECT * { ?s ?p ?o }", &["--format", "yaml"]),
        "unknown format",
    );
}

/// As a user meets them: a snapshot saved with one partition per NUMA node
/// opens and answers; `load x --save x` and a save over a file that is not a snapshot are
/// refused before loading, leaving the file as it was; `--quiet` prints nothing.
#[test]
fn snapshots_from_numa_machines_open_and_inputs_are_never_overwritten() {
    let d = data_file("snapshots_from_numa_machines");
    let q = "SELECT ?s ?o WHERE { ?s <http://ex/name> ?o } ORDER BY ?o";
    let want = ok(&sparql("--data", &d, q, &["--format", "tsv"]));
    for shape in ["pack:2 [numa] core:1 pu:1", "pack:4 [numa] core:1 pu:1"] {
        let snap = scratch(&format!("numa-{}.store", shape.len()));
        let snap = snap.to_str().unwrap();
        let out = nearflow(&["load", "--quiet", "--synthetic", shape, &d, "--save", snap]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "--quiet: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            ok(&sparql("--store", snap, q, &["--format", "tsv"])),
            want,
            "{shape}"
        );
    }
    let before = std::fs::read(&d).unwrap();
    fails_with(&["load", "--quiet", &d, "--save", &d], "is the input");
    let other = scratch("not-a-snapshot.txt");
    std::fs::write(&other, "precious").unwrap();
    fails_with(
        &["load", "--quiet", &d, "--save", other.to_str().unwrap()],
        "is not a nearflow store snapshot",
    );
    assert_eq!(std::fs::read(&d).unwrap(), before);
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "precious");
}

/// The time and memory limits, as a user meets them.
#[test]
fn answers_that_stop_blank_nodes_big_integers_and_xml() {
    let f = scratch("issue40.ttl");
    std::fs::write(
        &f,
        "@prefix ex: <http://ex/> . @prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
         ex:a ex:v 99999999999999999999999 . ex:b ex:v 5 . ex:c ex:v \"NaN\"^^xsd:double .
         ex:e ex:v 0 . _:c0_x ex:w \"data\" . ex:z ex:t \"bell\\u0007\" .",
    )
    .unwrap();
    let f = f.to_str().unwrap();
    let tsv = |q: &str| ok(&sparql("--data", f, q, &["--format", "tsv"]));
    // A valid integer beyond 64 bits is a number: true, and ordered by value.
    assert_eq!(
        tsv("SELECT ?s { ?s <http://ex/v> ?v FILTER(!?v) } ORDER BY ?s"),
        "?s\n<http://ex/c>\n<http://ex/e>\n"
    );
    assert_eq!(
        tsv("SELECT ?s { ?s <http://ex/v> ?v } ORDER BY ?v"),
        "?s\n<http://ex/e>\n<http://ex/b>\n<http://ex/a>\n<http://ex/c>\n"
    );
    // A fresh blank node never takes a label of the data.
    let g = ok(&sparql(
        "--data",
        f,
        "CONSTRUCT { _:x <http://q> ?o . ?s <http://r> ?o } WHERE { ?s <http://ex/w> ?o }",
        &[],
    ));
    let labels: std::collections::BTreeSet<&str> = g
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(labels.len(), 2, "two different nodes: {g}");
    assert!(labels.contains("_:c0_x"), "{g}");
    // XML cannot hold U+0007: a clear error, and the other formats write it.
    fails_with(
        &sparql(
            "--data",
            f,
            "SELECT ?o { ?s <http://ex/t> ?o }",
            &["--format", "xml"],
        ),
        "U+0007, which XML 1.0 cannot represent",
    );
    assert!(tsv("SELECT ?o { ?s <http://ex/t> ?o }").contains("bell"));
    // The limits: a cross product stops at its LIMIT; past --timeout or
    // --memory-limit a query fails, saying so, and prints no partial count.
    assert_eq!(
        ok(&sparql(
            "--data",
            f,
            "SELECT * { ?a ?b ?c . ?d ?e ?f } LIMIT 1",
            &["--count"]
        )),
        "1\n"
    );
    let big = scratch("issue40-big.nt");
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&format!("<http://ex/s{i}> <http://ex/v> \"{i}\" .\n"));
    }
    std::fs::write(&big, text).unwrap();
    let big = big.to_str().unwrap();
    let cross = "SELECT * { ?a ?b ?c . ?d ?e ?f } ORDER BY ?c ?f";
    let err = fails_with(
        &sparql("--data", big, cross, &["--count", "--timeout", "300ms"]),
        "time limit",
    );
    assert!(!err.contains("panicked"));
    let out = nearflow(&sparql(
        "--data",
        big,
        cross,
        &["--count", "--memory-limit", "1MiB"],
    ));
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no partial count");
    assert!(String::from_utf8_lossy(&out.stderr).contains("memory limit of 1048576 bytes"));
    fails_with(
        &sparql("--data", big, cross, &["--timeout", "0"]),
        "--timeout",
    );
    fails_with(
        &sparql("--data", big, cross, &["--memory-limit", "lots"]),
        "--memory-limit",
    );
    // Past --memory-limit a DISTINCT writes its rows to --spill-dir (the system's temporary
    // folder by default) and answers; with --no-spill it stops.
    let pairs = "SELECT DISTINCT ?c ?f { ?a ?b ?c . ?d ?e ?f FILTER (STRLEN(?c) = 3) }";
    let spill = scratch("spill-dir");
    std::fs::create_dir_all(&spill).unwrap();
    let spill = spill.to_str().unwrap();
    let limit = ["--count", "--memory-limit", "8MiB"];
    assert_eq!(
        ok(&sparql(
            "--data",
            big,
            pairs,
            &[&limit[..], &["--spill-dir", spill]].concat()
        )),
        "2700000\n"
    );
    assert_eq!(ok(&sparql("--data", big, pairs, &limit)), "2700000\n");
    fails_with(
        &sparql(
            "--data",
            big,
            pairs,
            &[&limit[..], &["--no-spill"]].concat(),
        ),
        "memory limit of 8388608 bytes",
    );
    fails_with(
        &sparql(
            "--data",
            big,
            pairs,
            &["--spill-dir", "/nonexistent/nearflow"],
        ),
        "--spill-dir /nonexistent/nearflow: not a directory",
    );
    fails_with(
        &sparql("--data", big, pairs, &["--spill-dir", spill, "--no-spill"]),
        "--no-spill",
    );
}

/// Messages: an I/O error says its cause once; a huge bad token is not echoed
/// whole; a term past the parser's 16 MiB names its line; a named-graph refusal names its line.
#[test]
fn load_errors_are_one_short_line_with_a_position() {
    let q = "SELECT * { ?s ?p ?o }";
    let dir = scratch("a-directory.ttl");
    std::fs::create_dir_all(&dir).unwrap();
    let err = fails_with(
        &sparql("--data", dir.to_str().unwrap(), q, &[]),
        "Is a directory",
    );
    assert_eq!(err.matches("Is a directory").count(), 1, "{err}");
    let tok = scratch("big-token.ttl");
    std::fs::write(
        &tok,
        format!("<http://a> <http://p> {} .\n", "x".repeat(2_000_000)),
    )
    .unwrap();
    let err = fails_with(
        &sparql("--data", tok.to_str().unwrap(), q, &[]),
        "big-token.ttl:1:",
    );
    assert!(err.len() < 1000, "{} bytes of error", err.len());
    let term = scratch("big-term.nt");
    std::fs::write(
        &term,
        format!(
            "<http://a> <http://p> <http://o> .\n<http://a> <http://p> \"{}\" .\n",
            "x".repeat(17 << 20)
        ),
    )
    .unwrap();
    fails_with(
        &sparql("--data", term.to_str().unwrap(), q, &[]),
        "big-term.nt:2: a term longer than 16 MiB",
    );
}

/// Named graphs: N-Quads and TriG load into their graphs, `--named IRI=FILE` loads a triples
/// file into one; GRAPH, FROM and FROM NAMED read them, from the files and from a snapshot;
/// a quads file for one named graph, and a graph name that is not an IRI, are refused.
#[test]
fn named_graphs_load_and_answer() {
    let nq = scratch("graphs.nq");
    std::fs::write(
        &nq,
        "<http://a> <http://p> <http://o> .\n<http://a> <http://p> <http://o2> <http://g> .\n\
         <http://b> <http://p> <http://o> <http://h> .\n",
    )
    .unwrap();
    let nq = nq.to_str().unwrap();
    let d = data_file("named_graphs_load_and_answer");
    let people = format!("http://ex/people={d}");
    let csv = |source_flag: &str, source: &str, q: &str, extra: &[&str]| {
        let mut extra = extra.to_vec();
        extra.extend(["--format", "csv"]);
        ok(&sparql(source_flag, source, q, &extra)).replace('\r', "")
    };
    let per_graph = "SELECT ?g (COUNT(*) AS ?n) { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g ORDER BY ?g";
    assert_eq!(
        csv("--data", nq, per_graph, &["--named", &people]),
        "g,n\nhttp://ex/people,6\nhttp://g,1\nhttp://h,1\n"
    );
    // The default graph holds the one triple without a graph.
    assert_eq!(
        csv("--data", nq, "SELECT ?o { ?s ?p ?o }", &[]),
        "o\nhttp://o\n"
    );
    let from = "SELECT ?s ?o FROM <http://g> FROM <http://h> { ?s ?p ?o } ORDER BY ?s";
    assert_eq!(
        csv("--data", nq, from, &[]),
        "s,o\nhttp://a,http://o2\nhttp://b,http://o\n"
    );
    let named = "SELECT ?g FROM NAMED <http://h> { GRAPH ?g { ?s ?p ?o } }";
    assert_eq!(csv("--data", nq, named, &[]), "g\nhttp://h\n");
    let store = scratch("graphs.nfs");
    let _ = std::fs::remove_file(&store);
    ok(&[
        "load",
        "--quiet",
        nq,
        "--named",
        &people,
        "--save",
        store.to_str().unwrap(),
    ]);
    assert_eq!(
        csv("--store", store.to_str().unwrap(), per_graph, &[]),
        "g,n\nhttp://ex/people,6\nhttp://g,1\nhttp://h,1\n"
    );
    // DESCRIBE: the resource's triples, and those of its blank node objects.
    let bnode = scratch("bnode.ttl");
    std::fs::write(
        &bnode,
        "<http://ex/a> <http://ex/addr> [ <http://ex/city> \"Oslo\" ] ; <http://ex/n> 1 .\n\
         <http://ex/b> <http://ex/n> 2 .\n",
    )
    .unwrap();
    let described = ok(&sparql(
        "--data",
        bnode.to_str().unwrap(),
        "DESCRIBE ?x WHERE { ?x <http://ex/n> 1 }",
        &[],
    ));
    assert_eq!(described.lines().count(), 3, "{described}");
    assert!(described.contains("\"Oslo\""), "{described}");
    assert!(!described.contains("<http://ex/b>"), "{described}");
    fails_with(
        &sparql(
            "--data",
            &d,
            "SELECT * {}",
            &["--named", &format!("http://ex/g={nq}")],
        ),
        "names its own graphs",
    );
    fails_with(
        &sparql(
            "--data",
            &d,
            "SELECT * {}",
            &["--named", &format!("not-an-iri={d}")],
        ),
        "is not an absolute IRI",
    );
    fails_with(
        &sparql("--data", &d, "SELECT * {}", &["--named", "nothing"]),
        "is not IRI=FILE",
    );
}

/// Every input route: RDF/XML by its extension, Turtle from standard input with
/// `--data-format`, relative IRIs against `--base` (and against the file's own IRI without
/// one), and a relative IRI in the query against `--base`.
#[test]
fn rdfxml_stdin_and_base_iris() {
    let xml = scratch("people.rdf");
    std::fs::write(
        &xml,
        r#"<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://ex/">
  <rdf:Description rdf:about="ann"><ex:age>31</ex:age></rdf:Description>
</rdf:RDF>"#,
    )
    .unwrap();
    let xml = xml.to_str().unwrap();
    let q = "SELECT ?s WHERE { ?s <http://ex/age> ?a }";
    let own = ok(&sparql("--data", xml, q, &["--format", "tsv"]));
    assert!(own.contains("<file://") && own.contains("/ann>"), "{own}");
    let based = ok(&sparql(
        "--data",
        xml,
        "SELECT ?a WHERE { <ann> <http://ex/age> ?a }",
        &["--format", "tsv", "--base", "http://people/"],
    ));
    assert!(based.contains("31"), "{based}");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_nearflow"))
        .args([
            "sparql",
            "--quiet",
            "--data",
            "-",
            "--data-format",
            "text/turtle",
            "--base",
            "http://people/",
            "-e",
            "SELECT ?s WHERE { ?s <age> 40 }",
            "--format",
            "tsv",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"<bob> <age> 40 .\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("<http://people/bob>"), "{text}");
}

#[test]
fn load_add_grows_a_store_and_keeps_blank_nodes_apart() {
    let dir = scratch("load-add");
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let f = dir.join(name);
        std::fs::write(&f, text).unwrap();
        f.to_str().unwrap().to_owned()
    };
    let one = file(
        "one.nt",
        "<http://ex/a> <http://ex/p> _:x .\n_:x <http://ex/q> \"one\" .\n",
    );
    let two = file(
        "two.nt",
        "<http://ex/b> <http://ex/p> _:x .\n_:x <http://ex/q> \"two\" .\n",
    );
    let bad = file("bad.nt", "<http://ex/c> <http://ex/p> .\n");
    let store = dir.join("s.nfs").to_str().unwrap().to_owned();
    let run = |q: &str, extra: &[&str]| -> Vec<String> {
        ok(&sparql("--store", &store, q, extra))
            .lines()
            .map(str::to_owned)
            .collect()
    };
    ok(&["load", "--quiet", &one, "--save", &store]);
    ok(&["load", "--quiet", "--add", &two, "--save", &store]);
    // Two documents' `_:x` are two nodes: each subject reaches only its own value.
    let q = "SELECT ?s ?v { ?s <http://ex/p> ?b . ?b <http://ex/q> ?v } ORDER BY ?s";
    assert_eq!(
        run(q, &["--format", "csv"]),
        vec!["s,v", "http://ex/a,one", "http://ex/b,two"]
    );
    // The same document added again is a new document: its blank node is a third node, and
    // its triples without one are there already (a graph is a set).
    ok(&["load", "--quiet", "--add", &two, "--save", &store]);
    assert_eq!(run("SELECT * { ?s ?p ?o }", &["--count"]), vec!["6"]);
    // A failed add leaves the store whole.
    fails_with(
        &["load", "--quiet", "--add", &bad, "--save", &store],
        "bad.nt",
    );
    assert_eq!(run("SELECT * { ?s ?p ?o }", &["--count"]), vec!["6"]);
    let none = dir.join("none.nfs").to_str().unwrap().to_owned();
    fails_with(
        &["load", "--add", &one, "--save", &none],
        "no store to add to",
    );
}

/// `--store-placement replicated` on a two-node machine (the `nehalem-2x4` preset): the same
/// answer as the partitioned store, `--explain` saying where the index reads came from (none
/// from the other node), the copies' cost on stderr; on a one-node machine nothing is copied,
/// and a placement that is not one is refused.
#[test]
fn a_replicated_store_answers_alike_and_says_what_it_read() {
    let d = data_file("a_replicated_store_answers_alike_and_says_what_it_read");
    let q = "PREFIX ex: <http://ex/> SELECT ?p ?n ?k WHERE { ?p ex:name ?n OPTIONAL { ?p ex:knows ?k } } ORDER BY ?n";
    let run = |placement: &str, preset: &str| {
        let out = nearflow(&[
            "sparql",
            "--data",
            &d,
            "-e",
            q,
            "--preset",
            preset,
            "--store-placement",
            placement,
            "--explain",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (plain, plain_err) = run("partitioned", "nehalem-2x4");
    let (copied, copied_err) = run("replicated", "nehalem-2x4");
    assert_eq!(plain, copied);
    assert!(
        plain.contains("Alice") && plain.contains("ex/bob"),
        "{plain}"
    );
    assert!(
        copied_err.contains("replicated the indexes on 2 NUMA nodes"),
        "{copied_err}"
    );
    assert!(
        copied_err.contains("0.0 % of them from another NUMA node's memory")
            && copied_err.contains("(store replicated)"),
        "{copied_err}"
    );
    assert!(plain_err.contains("(store partitioned)"), "{plain_err}");
    let (one, one_err) = run("replicated", "e5310-smp");
    assert_eq!(one, plain);
    assert!(one_err.contains("one NUMA node"), "{one_err}");
    fails_with(
        &sparql("--data", &d, q, &["--store-placement", "striped"]),
        "invalid value 'striped'",
    );
}

/// Over no store, the files a query names in `FROM` and `FROM NAMED` are its dataset (relative
/// to the query file), as Jena's command line reads them; a FROM that is not a local file, or
/// no data at all, is a clear error.
#[test]
fn a_query_over_no_store_loads_the_files_its_from_clauses_name() {
    let dir = scratch("from");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.ttl"), "<http://ex/a> <http://ex/p> \"A\" .\n").unwrap();
    std::fs::write(dir.join("b.ttl"), "<http://ex/b> <http://ex/p> \"B\" .\n").unwrap();
    let q = dir.join("q.rq");
    std::fs::write(
        &q,
        "SELECT ?g ?o FROM <a.ttl> FROM NAMED <b.ttl> \
         WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } } ORDER BY ?o",
    )
    .unwrap();
    let out = ok(&[
        "sparql",
        "--quiet",
        "--format",
        "csv",
        "--query",
        q.to_str().unwrap(),
    ]);
    let b = nearflow_rdf::load::file_iri(&dir.join("b.ttl"));
    assert_eq!(out, format!("g,o\r\n,A\r\n{b},B\r\n"));
    fails_with(
        &["sparql", "-e", "SELECT * FROM <http://ex/x> { ?s ?p ?o }"],
        "fetches nothing from the network",
    );
    fails_with(&["sparql", "-e", "SELECT * { ?s ?p ?o }"], "give the data");
    fails_with(&["serve"], "give the data");
}
