//! The SP²Bench queries on documents of our own generator (`nearflow_apps::sp2bench`), so that
//! the differential tests run on every machine, with or without the original files in
//! `../shared`: the same answers as Oxigraph under every policy, answers of the original's order
//! of magnitude at 1M triples, and our wording of the queries equal to the original's.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{compare, ours, reference, Answer, Expected};
use nearflow_apps::sp2bench::{self, queries};
use nearflow_policy::PolicyKind;

/// A generated document in the test's scratch directory, removed when dropped. Written afresh
/// by every run (1M triples take about 3 s), so a change to the generator is always tested.
struct Generated(PathBuf);

impl Drop for Generated {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn generated(triples: u64, seed: u64) -> Generated {
    let name = format!("sp2b-gen-{triples}-{seed}-{}.n3", std::process::id());
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let s = sp2bench::generate(triples, seed, f).unwrap();
    assert!(s.triples >= triples);
    Generated(path)
}

fn differential(triples: u64, policies: &[PolicyKind]) {
    let file = generated(triples, 1);
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let store = Arc::new(common::load_store(&file.0, &machine));
    let oxi = common::load_oxigraph(&file.0);
    for (q, _) in queries::QUERIES {
        let text = queries::text(q).unwrap();
        let what = format!("{q} on generated {triples}");
        common::matches_oxigraph(&store, &oxi, &machine, policies, &text, &what);
    }
}

#[test]
fn generated_10k_matches_oxigraph_under_every_policy() {
    differential(10_000, &PolicyKind::ALL);
}

#[test]
fn generated_50k_matches_oxigraph_under_las_and_nls() {
    differential(50_000, &[PolicyKind::Las, PolicyKind::Nls]);
}

/// The bar for the generator: at 1M triples, every query's answer within a factor of 3
/// of the original's (the data README's table), and exactly equal where the answer does not
/// grow with the data (Q1, Q3c, Q9, Q11, Q12).
#[test]
fn generated_1m_answers_are_of_the_originals_order() {
    let readme: [(&str, u64); 17] = [
        ("q1", 1),
        ("q2", 32770),
        ("q3a", 52676),
        ("q3b", 379),
        ("q3c", 0),
        ("q4", 2586733),
        ("q5a", 35241),
        ("q5b", 35241),
        ("q6", 62795),
        ("q7", 292),
        ("q8", 400),
        ("q9", 4),
        ("q10", 572),
        ("q11", 10),
        ("q12a", 1),
        ("q12b", 1),
        ("q12c", 0),
    ];
    let file = generated(1_000_000, 1);
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let store = Arc::new(common::load_store(&file.0, &machine));
    let rt = nearflow_rt::Runtime::builder(machine.clone())
        .build()
        .unwrap();
    let mut report = Vec::new();
    for (q, want) in readme {
        let got = common::ours_on(&store, &rt, &queries::text(q).unwrap()).count();
        report.push(format!("{q} {got} (original {want})"));
        let exact = ["q1", "q3c", "q9", "q11", "q12a", "q12b", "q12c"].contains(&q);
        let ok = if exact {
            got == want
        } else {
            got * 3 >= want && got <= want * 3
        };
        assert!(
            ok,
            "{q}: {got} rows against the original's {want}\n{}",
            report.join("\n")
        );
    }
    eprintln!("{}", report.join("\n"));
}

/// Our wording of the 17 queries gives the original files' answers on the original 10k
/// document (variables renamed position by position).
#[test]
#[ignore = "needs ../shared/data: ./test.sh runs it, and CI fails without the data"]
fn our_wording_answers_as_the_original_queries() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/sp2bench");
    assert!(
        dir.join("README.md").exists(),
        "{} is missing: this test needs the SP²Bench files",
        dir.display()
    );
    let file = dir.join("sp2b-10000.n3.gz");
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let store = Arc::new(common::load_store(&file, &machine));
    let oxi = common::load_oxigraph(&file);
    for (q, _) in queries::QUERIES {
        let original =
            std::fs::read_to_string(dir.join("queries").join(format!("{q}.sparql"))).unwrap();
        let want = reference(&oxi, &original);
        let got = ours(
            &store,
            &machine,
            PolicyKind::Las,
            &queries::text(q).unwrap(),
        );
        let got = match (got, &want) {
            (Answer::Rows(gv, rows), Answer::Rows(wv, _)) => {
                assert_eq!(gv.len(), wv.len(), "{q}: projected variables");
                Answer::Rows(wv.clone(), rows)
            }
            (g, _) => g,
        };
        compare(
            &got,
            &want,
            &format!("{q} in our wording"),
            Expected::from_query(&original),
        );
    }
}

/// Over per-node replicas of the indexes (`Store::replicate`), every query
/// answers as over the partitioned store, and every index read of every scan and join reads
/// the replica of the node whose worker runs it (on a two-node preset the runtime's workers
/// have nodes 0 and 1); over the partitioned store, the same queries read the other node's
/// partition, which is what replicas are for.
#[test]
fn a_replicated_store_answers_alike_and_reads_only_its_workers_node() {
    let file = generated(10_000, 3);
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let plain = Arc::new(common::load_store(&file.0, &machine));
    let replicated = Arc::new(common::load_store(&file.0, &machine));
    assert!(matches!(
        replicated.replicate().unwrap(),
        nearflow_rdf::replica::Replication::Built { nodes: 2, .. }
    ));
    assert!(!plain.is_replicated());
    let rt = nearflow_rt::Runtime::builder(machine.clone())
        .policy(PolicyKind::Las)
        .build()
        .unwrap();
    let reads_of = |store: &Arc<nearflow_rdf::Store>, text: &str| {
        let q = nearflow_sparql::prepare(store, text, &Default::default()).unwrap();
        q.run_collect(&rt).unwrap();
        q.index_reads()
    };
    let (mut plain_remote, mut plain_all) = (0, 0);
    for (q, _) in queries::QUERIES {
        let text = queries::text(q).unwrap();
        let what = format!("{q} on a replicated store");
        compare(
            &common::ours_on(&replicated, &rt, &text),
            &common::ours_on(&plain, &rt, &text),
            &what,
            Expected::from_query(&text),
        );
        let (all, remote) = reads_of(&replicated, &text);
        assert_eq!(
            remote, 0,
            "{what}: {remote} of {all} index reads on another node"
        );
        let (all, remote) = reads_of(&plain, &text);
        plain_all += all;
        plain_remote += remote;
    }
    eprintln!("partitioned store: {plain_remote} of {plain_all} index reads on the other node");
    assert!(plain_all > 0, "the queries read the indexes");
    assert!(
        plain_remote > 0,
        "over the partitioned store some of {plain_all} reads are on the other node"
    );
}
