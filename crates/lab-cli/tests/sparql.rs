//! The `nearflow-lab` commands around the SPARQL engine as a user runs them: `gen sp2bench`,
//! `bench sp2bench` and `bench serve`.

#[path = "../../cli/tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

use common::{fails_on_first_line as fails_with, nearflow, ok, sparql};

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lab-sparql");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// `nearflow gen sp2bench`: the same seed gives the same file (plain and gzip), another seed
/// another; the output loads and answers the benchmark's first query; bad flags fail cleanly
/// and leave no partial file.
#[test]
fn gen_sp2bench_is_deterministic_and_loads() {
    let a = scratch("gen-a.n3");
    let b = scratch("gen-b.n3");
    let c = scratch("gen-c.n3");
    let gz = scratch("gen-a.n3.gz");
    for (path, seed) in [(&a, "5"), (&b, "5"), (&c, "6"), (&gz, "5")] {
        ok(&[
            "gen",
            "sp2bench",
            "--triples",
            "5000",
            "--seed",
            seed,
            "--quiet",
            "--out",
            path.to_str().unwrap(),
        ]);
    }
    let read = |p: &PathBuf| std::fs::read(p).unwrap();
    assert_eq!(read(&a), read(&b));
    assert_ne!(read(&a), read(&c));
    let mut unzipped = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&read(&gz)[..]),
        &mut unzipped,
    )
    .unwrap();
    assert_eq!(unzipped, read(&a), "gzip holds the same document");
    let out = ok(&sparql(
        "--data",
        gz.to_str().unwrap(),
        "PREFIX dc: <http://purl.org/dc/elements/1.1/>
         PREFIX dcterms: <http://purl.org/dc/terms/>
         SELECT ?yr WHERE { ?j dc:title \"Journal 1 (1940)\" ; dcterms:issued ?yr }",
        &["--format", "csv"],
    ));
    assert_eq!(out.trim_end(), "yr\r\n1940", "{out}");
    fails_with(
        &[
            "gen",
            "sp2bench",
            "--triples",
            "0",
            "--out",
            a.to_str().unwrap(),
        ],
        "--triples",
    );
    fails_with(
        &[
            "gen",
            "sp2bench",
            "--triples",
            "x",
            "--out",
            a.to_str().unwrap(),
        ],
        "--triples",
    );
    let blocked = scratch("gen-a.n3").join("sub").join("x.n3");
    let out = nearflow(&[
        "gen",
        "sp2bench",
        "--triples",
        "10",
        "--out",
        blocked.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

/// `nearflow bench sp2bench` on generated data: every engine (policy × packet size) and
/// concurrency is a cell of the CSV with the same row count per query; bad sizes fail.
#[test]
fn bench_sp2bench_runs_every_cell_at_every_packet_size() {
    let data = scratch("bench-gen.n3");
    let csv = scratch("bench.csv");
    ok(&[
        "gen",
        "sp2bench",
        "--triples",
        "3000",
        "--quiet",
        "--out",
        data.to_str().unwrap(),
    ]);
    let table = ok(&[
        "bench",
        "sp2bench",
        "--data",
        data.to_str().unwrap(),
        "--queries",
        "q1,q3c,q9",
        "--policies",
        "las,nls",
        "--packet-bytes",
        "4096,65536",
        "--concurrent",
        "1,2",
        "--reps",
        "1",
        "--quiet",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    // One unit per column: milliseconds, named in the header.
    assert!(table.contains("las/4 KiB ×1 (ms)"), "{table}");
    let cells: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| q") && !l.starts_with("| query"))
        .flat_map(|l| l.split('|').skip(3))
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert!(!cells.is_empty(), "{table}");
    for c in cells {
        assert!(
            c.parse::<f64>().is_ok(),
            "a cell without its unit: {c:?} in {table}"
        );
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 3 * 4 * 2, "{text}");
    for engine in ["las/4 KiB", "nls/4 KiB", "las/64 KiB", "nls/64 KiB"] {
        assert_eq!(rows.iter().filter(|r| r[1] == engine).count(), 6, "{text}");
    }
    for q in ["q1", "q3c", "q9"] {
        let counts: std::collections::BTreeSet<&str> =
            rows.iter().filter(|r| r[0] == q).map(|r| r[4]).collect();
        assert_eq!(counts.len(), 1, "{q}: {text}");
    }
    fails_with(
        &[
            "bench",
            "sp2bench",
            "--data",
            data.to_str().unwrap(),
            "--packet-bytes",
            "4096,0",
        ],
        "--packet-bytes",
    );
}

#[test]
fn bench_serve_checks_every_answer() {
    let dir = std::env::temp_dir().join(format!("nearflow-bench-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("s.n3");
    let gen = common::nearflow(&[
        "gen",
        "sp2bench",
        "--triples",
        "5000",
        "--out",
        data.to_str().unwrap(),
    ]);
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let out = common::nearflow(&[
        "bench",
        "serve",
        "--quiet",
        "--data",
        data.to_str().unwrap(),
        "--queries",
        "a1,a2,p1",
        "--clients",
        "3",
        "--seconds",
        "0.5",
        "--rounds",
        "1",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let engines = v.as_array().unwrap();
    assert_eq!(engines.len(), 2, "{v}");
    for e in engines {
        assert_eq!(e["failed"], 0, "{e}");
        assert!(e["answered"].as_u64().unwrap() > 0, "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
