//! The 17 SP²Bench queries against Oxigraph (the reference, in memory) on the original
//! benchmark's 10k and 50k files, under every scheduling policy; the data README's expected
//! result counts. The files are read from `../shared/data/sp2bench` (not part of the
//! repository): the tests are `#[ignore]`d, `./test.sh` runs them with `--ignored`, and they
//! fail when the data is missing rather than pass having checked nothing.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use nearflow_policy::PolicyKind;

fn data_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/sp2bench");
    assert!(
        d.join("README.md").exists(),
        "{} is missing: this test needs the SP²Bench files",
        d.display()
    );
    d
}

const QUERIES: [&str; 17] = [
    "q1", "q2", "q3a", "q3b", "q3c", "q4", "q5a", "q5b", "q6", "q7", "q8", "q9", "q10", "q11",
    "q12a", "q12b", "q12c",
];

/// The data README's table: rows (or ASK answers as 1/0) per query at 10k, 50k, 250k, 1M.
fn readme_counts(q: &str) -> [u64; 4] {
    match q {
        "q1" => [1, 1, 1, 1],
        "q2" => [147, 965, 6197, 32770],
        "q3a" => [846, 3647, 15853, 52676],
        "q3b" => [9, 25, 127, 379],
        "q3c" => [0, 0, 0, 0],
        "q4" => [23226, 104746, 542801, 2586733],
        "q5a" | "q5b" => [155, 1085, 6904, 35241],
        "q6" => [229, 1769, 12093, 62795],
        "q7" => [0, 2, 62, 292],
        "q8" => [184, 264, 332, 400],
        "q9" => [4, 4, 4, 4],
        "q10" => [166, 307, 452, 572],
        "q11" => [10, 10, 10, 10],
        "q12a" | "q12b" => [1, 1, 1, 1],
        "q12c" => [0, 0, 0, 0],
        _ => unreachable!("{q}"),
    }
}

fn differential(size: &str, col: usize, policies: &[PolicyKind]) {
    let dir = data_dir();
    let file = dir.join(format!("sp2b-{size}.n3.gz"));
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let store = Arc::new(common::load_store(&file, &machine));
    let oxi = common::load_oxigraph(&file);
    for q in QUERIES {
        let text =
            std::fs::read_to_string(dir.join("queries").join(format!("{q}.sparql"))).unwrap();
        let what = format!("{q} at {size}");
        let want = common::matches_oxigraph(&store, &oxi, &machine, policies, &text, &what);
        assert_eq!(
            want.count(),
            readme_counts(q)[col],
            "Oxigraph's {q} at {size} disagrees with the README"
        );
    }
}

#[test]
#[ignore = "needs ../shared/data: ./test.sh runs it, and CI fails without the data"]
fn sp2bench_10k_matches_oxigraph_under_every_policy() {
    differential("10000", 0, &PolicyKind::ALL);
}

#[test]
#[ignore = "needs ../shared/data: ./test.sh runs it, and CI fails without the data"]
fn sp2bench_50k_matches_oxigraph_under_las_and_nls() {
    differential("50000", 1, &[PolicyKind::Las, PolicyKind::Nls]);
}

/// The data README's counts at 250k and 1M triples, under LAS (Oxigraph is too slow there for a
/// test: Q5a and Q6 take minutes).
#[test]
#[ignore = "needs ../shared/data: ./test.sh runs it, and CI fails without the data"]
fn sp2bench_250k_and_1m_counts_match_the_readme() {
    let dir = data_dir();
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let rt = nearflow_rt::Runtime::builder(machine.clone())
        .build()
        .unwrap();
    for (size, col, triples) in [("250000", 2, 250_128), ("1000000", 3, 1_000_009)] {
        let store = Arc::new(common::load_store(
            &dir.join(format!("sp2b-{size}.n3.gz")),
            &machine,
        ));
        assert_eq!(store.len(), triples, "triples loaded at {size}");
        for q in QUERIES {
            let text =
                std::fs::read_to_string(dir.join("queries").join(format!("{q}.sparql"))).unwrap();
            let got = common::ours_on(&store, &rt, &text);
            assert_eq!(got.count(), readme_counts(q)[col], "{q} at {size}");
        }
    }
}
