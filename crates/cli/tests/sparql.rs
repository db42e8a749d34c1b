//! `nearflow sparql` and `nearflow load` as a user runs them: answers in every format, a
//! snapshot round trip, and a one-line error with a non-zero exit for every kind of bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

fn nearflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nearflow"))
        .args(args)
        .output()
        .expect("run nearflow")
}

fn ok(args: &[&str]) -> String {
    let out = nearflow(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails_with(args: &[&str], needle: &str) {
    let out = nearflow(args);
    assert!(!out.status.success(), "{args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(needle),
        "{args:?}: stderr lacks {needle:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    // One line says it (clap adds a "try --help" line to usage errors).
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.contains(needle),
        "{args:?}: the first line lacks {needle:?}: {err}"
    );
}

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

fn data_file() -> String {
    let f = scratch("people.ttl");
    std::fs::write(&f, DATA).unwrap();
    f.to_str().unwrap().to_owned()
}

#[test]
fn a_query_answers_in_every_format() {
    let d = data_file();
    let q =
        "PREFIX ex: <http://ex/> SELECT ?p ?a WHERE { ?p ex:age ?a FILTER(?a > 26) } ORDER BY ?a";
    let table = ok(&["sparql", "--quiet", "--data", &d, "-e", q]);
    assert!(
        table.contains("| ?p ") && table.contains("<http://ex/alice>"),
        "{table}"
    );
    assert!(table.contains("1 row"), "{table}");
    let csv = ok(&[
        "sparql", "--quiet", "--data", &d, "-e", q, "--format", "csv",
    ]);
    assert_eq!(csv.replace('\r', ""), "p,a\nhttp://ex/alice,30\n");
    let json = ok(&[
        "sparql", "--quiet", "--data", &d, "-e", q, "--format", "json",
    ]);
    assert!(
        json.contains("\"bindings\"") && json.contains("http://ex/alice"),
        "{json}"
    );
    let xml = ok(&[
        "sparql", "--quiet", "--data", &d, "-e", q, "--format", "xml",
    ]);
    assert!(xml.contains("<sparql"), "{xml}");
    // The lexical form "025" is kept; it compares as 25.
    let tsv = ok(&[
        "sparql",
        "--quiet",
        "--data",
        &d,
        "-e",
        "PREFIX ex: <http://ex/> SELECT ?a WHERE { ex:bob ex:age ?a FILTER(?a < 26) }",
        "--format",
        "tsv",
    ]);
    assert_eq!(tsv.lines().nth(1).map(str::trim), Some("025"), "{tsv:?}");
    let n = ok(&[
        "sparql",
        "--quiet",
        "--data",
        &d,
        "-e",
        "SELECT * WHERE { ?s ?p ?o }",
        "--count",
    ]);
    assert_eq!(n.trim(), "6");
    let ask = ok(&[
        "sparql",
        "--quiet",
        "--data",
        &d,
        "-e",
        "PREFIX ex: <http://ex/> ASK { ex:alice ex:knows ex:bob }",
    ]);
    assert_eq!(ask.trim(), "yes");
    let graph = ok(&[
        "sparql",
        "--quiet",
        "--data",
        &d,
        "-e",
        "PREFIX ex: <http://ex/> CONSTRUCT { ?b ex:knownBy ?a } WHERE { ?a ex:knows ?b }",
    ]);
    assert_eq!(
        graph.trim(),
        "<http://ex/bob> <http://ex/knownBy> <http://ex/alice> ."
    );
}

#[test]
fn explain_prints_the_plan_with_rows() {
    let d = data_file();
    let out = nearflow(&[
        "sparql",
        "--quiet",
        "--data",
        &d,
        "--explain",
        "--count",
        "-e",
        "PREFIX ex: <http://ex/> SELECT ?n WHERE { ?p ex:knows ?q . ?q ex:name ?n }",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("scan ") && err.contains("rows 1") && err.contains("ms"),
        "{err}"
    );
}

#[test]
fn a_snapshot_answers_as_the_files_do() {
    let d = data_file();
    let snap = scratch("people.store");
    let snap = snap.to_str().unwrap();
    ok(&["load", "--quiet", &d, "--save", snap]);
    let q = "SELECT ?s ?o WHERE { ?s <http://ex/name> ?o } ORDER BY ?o";
    assert_eq!(
        ok(&["sparql", "--quiet", "--store", snap, "-e", q, "--format", "tsv"]),
        ok(&["sparql", "--quiet", "--data", &d, "-e", q, "--format", "tsv"])
    );
    // Truncated, then damaged.
    let bytes = std::fs::read(snap).unwrap();
    let cut = scratch("cut.store");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--store",
            cut.to_str().unwrap(),
            "-e",
            q,
        ],
        "truncated",
    );
    let mut bad = bytes.clone();
    let mid = bytes.len() / 2;
    bad[mid] ^= 0x55;
    let bad_f = scratch("bad.store");
    std::fs::write(&bad_f, &bad).unwrap();
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--store",
            bad_f.to_str().unwrap(),
            "-e",
            q,
        ],
        "not a valid nearflow store snapshot",
    );
}

#[test]
fn bad_input_is_one_line_and_a_failure() {
    let d = data_file();
    let broken = scratch("broken.ttl");
    std::fs::write(
        &broken,
        "<http://a> <http://b> <http://c> .\n<http://a> <http://b> oops .\n",
    )
    .unwrap();
    let broken = broken.to_str().unwrap();
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--data",
            broken,
            "-e",
            "SELECT * { ?s ?p ?o }",
        ],
        "broken.ttl:2:",
    );
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--data",
            &d,
            "-e",
            "SELECT * WHERE { ?s ?p }",
        ],
        "SPARQL syntax error",
    );
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--data",
            &d,
            "-e",
            "SELECT * WHERE { ?s nope:p ?o }",
        ],
        "undeclared prefix 'nope:'",
    );
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--data",
            "/no/such/file.ttl",
            "-e",
            "SELECT * { ?s ?p ?o }",
        ],
        "no such file",
    );
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--data",
            "/etc/hostname",
            "-e",
            "SELECT * { ?s ?p ?o }",
        ],
        "cannot tell the format",
    );
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--data",
            &d,
            "-e",
            "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
        ],
        "not supported: GROUP BY and aggregates",
    );
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--data",
            &d,
            "-e",
            "SELECT * WHERE { ?s <http://ex/knows>+ ?o }",
        ],
        "not supported: property paths",
    );
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--data",
            &d,
            "-e",
            "SELECT * WHERE { ?s ?p ?o FILTER regex(?o, \"(\") }",
        ],
        "bad regular expression",
    );
    fails_with(
        &["sparql", "--quiet", "--data", &d, "--query", "/no/such.rq"],
        "/no/such.rq",
    );
    fails_with(
        &[
            "sparql",
            "--quiet",
            "--data",
            &d,
            "-e",
            "SELECT * { ?s ?p ?o }",
            "--format",
            "yaml",
        ],
        "unknown format",
    );
}
