//! The ferret case: LSH against brute force, plain against split, the access accounting, and
//! the pipeline plan.

use std::sync::{Arc, Mutex};

use nearflow_apps::ferret::{
    self, check, lsh, AccessLog, DataSpec, Hashes, Hit, LshIndex, LshParams, PlainDb, SplitDb,
};
use nearflow_flow::PlanBuilder;
use nearflow_policy::PolicyKind;
use nearflow_rt::Runtime;
use nearflow_split::SplitBy;
use nearflow_topo::presets;

fn small() -> DataSpec {
    DataSpec {
        points: 6000,
        dim: 16,
        clusters: 60,
        spread: 1.0,
        seed: 3,
    }
}

#[test]
fn lsh_equals_brute_force_wherever_its_candidates_cover_the_neighbours() {
    let spec = small();
    let db = ferret::generate(&spec);
    let m = presets::build("i7-2600").unwrap();
    let plain = PlainDb::build(&m, &db, spec.dim, spec.lsh_params());
    let qs = ferret::queries(&spec, &db, 200, 0.3, 9);
    let c = check(&plain, &qs, 10);
    assert!(c.covered >= 20, "{c:?}: too few covered queries to test");
    assert_eq!(c.exact, c.covered, "{c:?}");
    assert!(c.recall > 0.0 && c.recall <= 1.0, "{c:?}");
    // Fewer tables and no neighbouring probes: the first two tables are the same hash functions
    // (drawn in order from one seed), so the candidates are a subset and recall can only drop;
    // where they still cover the neighbours, the answer is still exact.
    let narrow = PlainDb::build(
        &m,
        &db,
        spec.dim,
        LshParams {
            tables: 2,
            probes: 1,
            ..spec.lsh_params()
        },
    );
    let cw = check(&narrow, &qs, 10);
    assert!(cw.recall <= c.recall, "{cw:?} against {c:?}");
    assert_eq!(cw.exact, cw.covered, "{cw:?}");
}

fn split_answers(
    rt: &Runtime,
    db: &SplitDb,
    qs: &[Vec<f32>],
    k: usize,
    log: Option<Arc<AccessLog>>,
) -> Vec<Vec<Hit>> {
    let out: Arc<Mutex<Vec<Option<Vec<Hit>>>>> = Arc::new(Mutex::new(vec![None; qs.len()]));
    let handles: Vec<_> = qs
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let (db, q, out, log) = (db.clone(), Arc::new(q.clone()), out.clone(), log.clone());
            rt.submit(move |cx| {
                db.query_in(cx, q, k, log, move |_, hits| {
                    out.lock().unwrap()[i] = Some(hits);
                })
                .unwrap();
            })
        })
        .collect();
    for h in handles {
        h.wait().unwrap();
    }
    let v = std::mem::take(&mut *out.lock().unwrap());
    v.into_iter()
        .map(|h| h.expect("every query answered"))
        .collect()
}

#[test]
fn split_and_plain_answer_alike_under_each_policy() {
    let spec = small();
    let db = ferret::generate(&spec);
    let qs = ferret::queries(&spec, &db, 60, 0.3, 5);
    for preset in ["nehalem-2x4", "e7-4820"] {
        let m = presets::build(preset).unwrap();
        let plain = PlainDb::build(&m, &db, spec.dim, spec.lsh_params());
        let want: Vec<Vec<Hit>> = qs.iter().map(|q| plain.query(q, 10, None)).collect();
        for by in [SplitBy::Node, SplitBy::Group] {
            let split = SplitDb::build(&m, by, &db, spec.dim, spec.lsh_params()).unwrap();
            assert_eq!(split.len(), spec.points);
            for kind in [PolicyKind::Las, PolicyKind::Nls, PolicyKind::Bobox2011] {
                let rt = Runtime::builder(m.clone()).policy(kind).build().unwrap();
                let log = Arc::new(AccessLog::new(m.node_count()));
                let got = split_answers(&rt, &split, &qs, 10, Some(log.clone()));
                assert_eq!(got, want, "{preset} {by:?} {kind:?}");
                // Every partition task is homed and counted; the access log saw the reads.
                let (l, r) = rt.counters().homed();
                assert_eq!(l + r, (qs.len() * split.data.len()) as u64);
                let s = log.summary();
                assert!(s.accesses > 0);
                assert_eq!(s.remote == 0, r == 0, "{s:?}, {r} remote tasks");
            }
        }
    }
}

#[test]
fn the_access_log_categorises_pages_as_fig_3_does() {
    let hashes = Hashes::new(LshParams::default(), 1024);
    let mut index = LshIndex::new(&hashes);
    // 1024 floats = one 4 KiB page per vector (give or take alignment: count pages seen).
    for i in 0..8 {
        index.insert(&hashes, i, &vec![i as f32; 1024]);
    }
    let log = AccessLog::new(2);
    // Vector 0 read 10 times from node 0 only; vector 4 read 7 times from node 0, 3 from node 1.
    log.record(&index, 0, 0, &[0; 10]);
    log.record(&index, 0, 0, &[4; 7]);
    log.record(&index, 0, 1, &[4; 3]);
    let s = log.summary();
    assert_eq!(s.accesses, 20);
    assert_eq!(s.remote, 3);
    let page = |p: usize| index.address(p) / 4096;
    if page(0) != page(4) {
        assert_eq!(s.by_dominance[0], 10, "{s:?}");
        assert_eq!(s.by_dominance[3], 10, "70 % dominant: {s:?}");
        assert!((s.shared_share() - 0.5).abs() < 1e-9);
    }
    assert!((s.remote_share() - 0.15).abs() < 1e-9);
}

#[test]
fn the_pipeline_plan_answers_as_the_database_does() {
    let spec = small();
    let mut db = ferret::generate(&spec);
    let scale = 10.0;
    for v in db.chunks_exact_mut(spec.dim) {
        ferret::normalise(v, scale);
    }
    let m = presets::build("i7-2600").unwrap();
    let plain = PlainDb::build(&m, &db, spec.dim, spec.lsh_params());
    let qs = Arc::new(ferret::queries(&spec, &db, 100, 0.01, 4));
    let rt = Runtime::builder(m).build().unwrap();
    let mut b = PlanBuilder::for_runtime(&rt);
    let sink = ferret::pipeline::plan(&mut b, plain.clone(), qs.clone(), 5, scale);
    let out = b.build().unwrap().run(&rt).unwrap();
    let mut got = out.take(&sink);
    got.sort_by_key(|x| x.0);
    assert_eq!(got.len(), qs.len());
    for (i, hits) in got {
        let mut q = qs[i as usize].clone();
        ferret::normalise(&mut q, scale);
        let want = lsh::top_k(
            plain.query(&q, 5 * ferret::pipeline::CANDIDATES_PER_RESULT, None),
            5,
        );
        assert_eq!(hits, want, "query {i}");
    }
}
