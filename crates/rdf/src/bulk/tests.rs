//! The bounded-memory load's tests: answers equal to the in-memory load's, budgets, damaged runs.

use super::*;
use crate::store::Store;
use proptest::prelude::*;

fn machine() -> nearflow_topo::Machine {
    nearflow_topo::from_synthetic("pack:2 [numa] core:1 pu:1").unwrap()
}

/// A folder of the test's own, removed when dropped.
fn dir(test: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("nearflow-bulk-{test}-"))
        .tempdir()
        .unwrap()
}

/// Two documents: TriG with the default graph, two named graphs, blank nodes, literals of
/// every kind and duplicates; N-Triples whose blank node labels are the TriG's (kept
/// apart: each document scopes its own).
fn documents(d: &Path, n: usize) -> Vec<PathBuf> {
    let mut trig = String::from("@prefix ex: <http://ex/> .\n");
    for i in 0..n {
        let g = ["", "ex:g1 ", "ex:g2 "][i % 3];
        let open = if g.is_empty() { "" } else { "{ " };
        let close = if g.is_empty() { "" } else { " }" };
        trig.push_str(&format!(
            "{g}{open}ex:s{} ex:p{} \"v{}\"@en , {} , _:b{} , \"{}\"^^<http://ex/t{}> , ex:s{} .{close}\n",
            i % 97,
            i % 5,
            i % 13,
            i % 41,
            i % 7,
            i % 19,
            i % 3,
            (i * 7) % 101
        ));
    }
    let mut nt = String::new();
    for i in 0..n / 2 {
        nt.push_str(&format!(
            "_:b{} <http://ex/p{}> <http://ex/s{}> .\n<http://ex/s{}> <http://ex/q> \"w{}\" .\n",
            i % 11,
            i % 3,
            i % 89,
            i % 83,
            i % 29
        ));
    }
    let (a, b) = (d.join("a.trig"), d.join("b.nt"));
    std::fs::write(&a, trig).unwrap();
    std::fs::write(&b, nt).unwrap();
    vec![a, b]
}

/// Every quad as terms, sorted.
pub(crate) fn terms_of(s: &Store) -> Vec<String> {
    let d = s.dict();
    let mut v: Vec<String> = s
        .quads()
        .iter()
        .map(|q| {
            let g = if q[3] == 0 {
                String::new()
            } else {
                d.term(q[3]).to_string()
            };
            format!("{} {} {} {g}", d.term(q[0]), d.term(q[1]), d.term(q[2]))
        })
        .collect();
    v.sort();
    v
}

/// Each predicate's term and its quads, subjects and objects.
pub(crate) type PerPredicate = Vec<(String, u64, u64, u64)>;

/// The statistics with predicates named by their terms (the ids differ between loads).
pub(crate) fn stats_of(s: &Store) -> (u64, u64, u64, u64, PerPredicate) {
    let st = s.stats();
    let mut per: Vec<_> = st
        .per_predicate
        .iter()
        .map(|(&p, c)| {
            (
                s.dict().term(p).to_string(),
                c.triples,
                c.subjects,
                c.objects,
            )
        })
        .collect();
    per.sort();
    (st.triples, st.subjects, st.objects, st.predicates, per)
}

fn bulk(paths: &[PathBuf], room: u64, target: &Path) -> Result<BulkReport, LoadError> {
    load_spilling_at(
        paths,
        &LoadOptions::default(),
        room,
        target,
        &Arc::default(),
        &Stage::default(),
        &mut |_, _| {},
    )
}

#[test]
fn a_load_in_many_runs_is_the_load_in_memory_quad_for_quad() {
    let tmp = dir("equal");
    let d = tmp.path();
    let paths = documents(d, 3000);
    let want = crate::load::load_files(&paths, &Arc::default())
        .unwrap()
        .into_store(&machine())
        .unwrap();
    for (room, name) in [(1 << 16, "small"), (1 << 30, "one")] {
        let target = d.join(format!("{name}.nfs"));
        let r = bulk(&paths, room, &target).unwrap();
        if room < 1 << 30 {
            assert!(r.runs > 3, "{} runs", r.runs);
        } else {
            assert_eq!(r.runs, 1);
        }
        assert_eq!(r.quads, want.len());
        assert_eq!(r.terms as usize, want.dict().len());
        assert_eq!(r.statements, 3000 * 5 + 1500 * 2);
        let got = crate::snapshot::open(&target, &machine()).unwrap();
        assert_eq!(terms_of(&got), terms_of(&want));
        assert_eq!(stats_of(&got), stats_of(&want));
        assert_eq!(
            got.graphs()
                .iter()
                .map(|&(_, start)| start)
                .collect::<Vec<_>>(),
            want.graphs()
                .iter()
                .map(|&(_, start)| start)
                .collect::<Vec<_>>()
        );
        assert!(got.health().unwrap().check_all().is_none());
        // Every term is found by a lookup (ids in key order: no term index).
        for id in 1..=got.dict().len() as Id {
            assert_eq!(got.dict().lookup(got.dict().term(id).as_ref()), Some(id));
        }
        // Nothing left beside the target but the snapshot itself.
        let left: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
    // The same store whatever the runs.
    assert_eq!(
        std::fs::read(d.join("small.nfs")).unwrap(),
        std::fs::read(d.join("one.nfs")).unwrap()
    );
}

#[test]
fn an_empty_load_is_an_empty_store_and_a_bad_one_leaves_the_old_store() {
    let tmp = dir("empty");
    let d = tmp.path();
    let empty = d.join("e.nt");
    std::fs::write(&empty, "").unwrap();
    let target = d.join("s.nfs");
    let r = bulk(std::slice::from_ref(&empty), 1 << 16, &target).unwrap();
    assert_eq!((r.quads, r.terms), (0, 0));
    let s = crate::snapshot::open(&target, &machine()).unwrap();
    assert_eq!(s.len(), 0);
    let before = std::fs::read(&target).unwrap();
    // A syntax error after several runs were spilled: the previous store stays.
    let bad = d.join("bad.nt");
    let mut text = String::new();
    for i in 0..2000 {
        text.push_str(&format!("<http://s{i}> <http://p> \"{i}\" .\n"));
    }
    text.push_str("<http://s> <http://p> .\n");
    std::fs::write(&bad, text).unwrap();
    let e = bulk(&[bad], 1 << 12, &target).unwrap_err();
    assert!(matches!(e, LoadError::Syntax { line: 2001, .. }), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), before);
    // An interrupted load too.
    let paths = documents(d, 500);
    let progress = Arc::new(Progress::default());
    progress.cancel.store(true, Ordering::Relaxed);
    let e = load_spilling_at(
        &paths,
        &LoadOptions::default(),
        1 << 12,
        &target,
        &progress,
        &Stage::default(),
        &mut |_, _| {},
    )
    .unwrap_err();
    assert!(matches!(e, LoadError::Interrupted), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), before);
    let names: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

#[test]
fn run_files_round_trip_their_integers_and_bytes() {
    let tmp = dir("runfile");
    let d = tmp.path();
    let f = d.join("r");
    let vals = [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
    let mut w = RunWriter::create(&f, vals.len() as u64).unwrap();
    for &v in &vals {
        w.varint(v).unwrap();
        w.bytes(b"ab").unwrap();
    }
    w.finish().unwrap();
    let mut r = RunReader::open(&f).unwrap();
    assert_eq!(r.count, vals.len() as u64);
    let mut b = Vec::new();
    for &v in &vals {
        assert_eq!(r.varint().unwrap(), v);
        r.bytes(2, &mut b).unwrap();
        assert_eq!(b, b"ab");
    }
    r.end().unwrap();
}

/// Damage: a byte flipped, one inserted, the end cut.
#[derive(Clone, Debug)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Cut(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Cut),
    ]
}

fn cases() -> u32 {
    std::env::var("NEARFLOW_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// A run file damaged or cut short between two passes (the terms or quads of a run
    /// after the parse, its map after the terms' merge, a sorted run after the sort) makes
    /// the load fail with a clear error, never a panic, and leaves the previous store.
    #[test]
    fn damaged_runs_are_a_clear_error(pass in 1usize..=3, which in any::<usize>(), e in edit()) {
        let tmp = dir("fuzz");
        let d = tmp.path();
        let paths = documents(d, 200);
        let target = d.join("s.nfs");
        std::fs::write(&target, b"previous").unwrap();
        let mut damaged_one = None;
        let r = load_spilling_at(
            &paths,
            &LoadOptions::default(),
            1 << 13,
            &target,
            &Arc::default(),
            &Stage::default(),
            &mut |p, tmp| {
                if p != pass {
                    return;
                }
                let mut files: Vec<PathBuf> = std::fs::read_dir(tmp)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .filter(|f| !f.ends_with("term-ends"))
                    .collect();
                files.sort();
                let f = &files[which % files.len()];
                let mut bytes = std::fs::read(f).unwrap();
                let n = bytes.len();
                match e {
                    Edit::Flip(i, b) => bytes[i % n] ^= b,
                    Edit::Insert(i, b) => bytes.insert(i % (n + 1), b),
                    Edit::Cut(i) => bytes.truncate(i % n),
                }
                std::fs::write(f, bytes).unwrap();
                damaged_one = Some(f.clone());
            },
        );
        prop_assert!(damaged_one.is_some());
        let err = r.expect_err("a damaged run is found");
        let text = err.to_string();
        prop_assert!(
            text.contains("temporary run file is damaged") && text.len() < 500,
            "{}", text
        );
        prop_assert_eq!(std::fs::read(&target).unwrap(), b"previous".to_vec());
    }
}
