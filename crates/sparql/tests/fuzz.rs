//! Property-based fuzzing of what reads untrusted input: the snapshot reader, the RDF
//! loaders' error paths (plain and gzip) and the SPARQL front end. Inputs are valid ones
//! damaged (bytes flipped, inserted, cut off) and query shapes drawn at random, wide and deep
//! (named graphs and dataset clauses, EXISTS anywhere, correlated EXISTS and DESCRIBE among
//! them), over a store of a default graph and a named graph.
//! The property everywhere: an answer or an error, never a panic, an abort or a hang; an error
//! is short and, for a syntax error, names its line and column. And one differential property:
//! a query cut into a sharded store's fragments and planned over their rows answers as the
//! query run directly.
//!
//! `./test.sh` runs a brief pass (64 cases a target, a fixed seed); run longer with
//! `NEARFLOW_FUZZ_CASES=20000 cargo test --release -p nearflow-sparql --test fuzz` (and another
//! `PROPTEST_RNG_SEED` to explore elsewhere).

use std::io::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nearflow_rdf::load::{self, Format, LoadError, Loaded};
use nearflow_rdf::{snapshot, Store};
use nearflow_sparql::fragment::{self, Given, GivenRows, Split};
use nearflow_sparql::{self as sparql, Options, Plan};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases() -> u32 {
    std::env::var("NEARFLOW_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn config() -> Config {
    Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    }
}

const TURTLE: &str = r#"@prefix ex: <http://ex/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:a ex:name "Alice"@en ; ex:age "30"^^xsd:integer ; ex:knows ex:b , _:c .
ex:b ex:name """two
lines""" ; ex:score 1.5e3 ; ex:when "2020-01-01T00:00:00Z"^^xsd:dateTime .
_:c ex:p ( 1 2 3 ) ; ex:q [ ex:r "nested" ] .
"#;

const NTRIPLES: &str = "<http://a> <http://p> \"x\\u0041\" .\n_:b <http://p> <http://c> .\n<http://a> <http://q> \"1\"^^<http://www.w3.org/2001/XMLSchema#integer> .\n";

const NQUADS: &str = "<http://a> <http://p> <http://o> .\n<http://a> <http://p> \"v\"@en .\n<http://a> <http://p> <http://o> <http://g> .\n";

const TRIG: &str = "@prefix ex: <http://ex/> .\nex:a ex:p \"v\"@en , 1.5 .\n{ ex:b ex:q ex:a }\nex:g { ex:c ex:p ex:d }\n";

const RDFXML: &str = r#"<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://ex/">
  <rdf:Description rdf:about="http://ex/a">
    <ex:name xml:lang="en">Alice</ex:name>
    <ex:knows rdf:resource="http://ex/b"/>
    <ex:age rdf:datatype="http://www.w3.org/2001/XMLSchema#integer">30</ex:age>
    <ex:q rdf:parseType="Resource"><ex:r>nested</ex:r></ex:q>
  </rdf:Description>
</rdf:RDF>
"#;

/// Damage: flip bytes, insert bytes, cut the end.
#[derive(Clone, Debug)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Cut(usize),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    proptest::collection::vec(
        prop_oneof![
            (any::<usize>(), 1u8..=255).prop_map(|(i, b)| Edit::Flip(i, b)),
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
            any::<usize>().prop_map(Edit::Cut),
        ],
        1..6,
    )
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let n = bytes.len().max(1);
        match *e {
            Edit::Flip(i, b) if !bytes.is_empty() => bytes[i % n] ^= b,
            Edit::Insert(i, b) => bytes.insert(i % (bytes.len() + 1), b),
            Edit::Cut(i) => bytes.truncate(i % (bytes.len() + 1)),
            _ => {}
        }
    }
    bytes
}

fn machine() -> nearflow_topo::Machine {
    nearflow_topo::presets::build("nehalem-2x4").unwrap()
}

/// The folder the cases write their files to: cargo's own for integration tests, inside the
/// target folder (the same for every run, so nothing piles up in the system's temporary
/// folder).
fn scratch() -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("nearflow-fuzz");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An error's text: one line, short, and a syntax error with its position.
fn check_error(e: &LoadError) {
    let s = e.to_string();
    assert!(s.len() < 2000, "an error of {} bytes", s.len());
    if let LoadError::Syntax { line, column, .. } = e {
        assert!(*line >= 1 && *column >= 1, "{s}");
    }
}

fn load_bytes(name: &str, format: Format, bytes: &[u8]) -> Result<Loaded, LoadError> {
    let mut l = Loaded::default();
    load::load_reader(&mut l, name.as_ref(), format, bytes, "")?;
    Ok(l)
}

/// Every quad of a store as terms, sorted.
fn terms_of(s: &Store) -> Vec<String> {
    let d = s.dict();
    let mut v: Vec<String> = s
        .quads()
        .iter()
        .map(|q| {
            format!(
                "{} {} {} {}",
                d.term(q[0]),
                d.term(q[1]),
                d.term(q[2]),
                if q[3] == 0 {
                    String::new()
                } else {
                    d.term(q[3]).to_string()
                }
            )
        })
        .collect();
    v.sort();
    v
}

/// The valid snapshot's file.
fn valid_snapshot() -> std::path::PathBuf {
    let _ = snapshot_bytes();
    scratch().join("valid.nfs")
}

/// The valid snapshot every snapshot case damages: two partitions (two NUMA nodes).
fn snapshot_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        // The Turtle document in the default graph and in a named graph.
        let trig = format!(
            "{}\n<http://ex/g> {{ <http://ex/a> <http://ex/knows> <http://ex/b> , _:c }}",
            TURTLE
        );
        let l = load_bytes("t.trig", Format::TriG, trig.as_bytes()).unwrap();
        let store = l.into_store(&machine()).unwrap();
        let f = scratch().join("valid.nfs");
        snapshot::save(&store, &f).unwrap();
        std::fs::read(&f).unwrap()
    })
}

/// The files of a store: the snapshot, its delta segment, the log and the record of the last
/// acknowledged update.
const FILES: [&str; 4] = ["s.nfs", "s.nfs.delta", "s.nfs.log", "s.nfs.acked"];

/// A store's files, three times over: `now` (the store to damage), `older` (the same store
/// before its last checkpoint and updates) and `other` (another store, with a log of its
/// own); and the quads the store holds now. A file a store lacks is empty.
struct StoreFiles {
    now: Vec<Vec<u8>>,
    older: Vec<Vec<u8>>,
    other: Vec<Vec<u8>>,
    quads: Vec<String>,
}

/// Runs `text` (SPARQL Update) on `db`.
fn update_db(db: &nearflow_rdf::db::Db, text: &str) {
    let (_, rt) = env();
    let u = sparql::update::Update::parse(text, None).unwrap();
    db.update(|s| {
        let a = u.apply(s, rt, &Default::default())?;
        Ok::<_, sparql::QueryError>((a.store, a.changes))
    })
    .unwrap();
}

/// A store with updates in its log, copied after a first round of updates and again after a
/// checkpoint and a second round, and another store beside it. `large`: treated as large, its
/// delta kept beside the snapshot as a segment (the checkpoint writes the segment); else the
/// checkpoint writes the snapshot again.
fn store_files(large: bool) -> &'static StoreFiles {
    static MADE: [OnceLock<StoreFiles>; 2] = [OnceLock::new(), OnceLock::new()];
    MADE[large as usize].get_or_init(|| {
        let dir = scratch().join(format!("store-files-{large}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Large from one quad, and its delta kept until it is as large as the snapshot.
        let tuning = if large {
            nearflow_rdf::db::Tuning {
                segment_min_quads: 1,
                rewrite_fraction: 1,
                ..Default::default()
            }
        } else {
            Default::default()
        };
        let read = |d: &std::path::Path| -> Vec<Vec<u8>> {
            FILES
                .iter()
                .map(|f| std::fs::read(d.join(f)).unwrap_or_default())
                .collect()
        };
        let make = |name: &str, text: &str| {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).unwrap();
            let l = load_bytes("t.ttl", Format::Turtle, text.as_bytes()).unwrap();
            snapshot::save(&l.into_store(&machine()).unwrap(), &d.join(FILES[0])).unwrap();
            d
        };
        let d = make("now", TURTLE);
        let db =
            nearflow_rdf::db::Db::open_tuned(&d.join(FILES[0]), &machine(), true, tuning).unwrap();
        for i in 0..4 {
            update_db(
                &db,
                &format!("INSERT DATA {{ <http://ex/u{i}> <http://ex/p> \"{i}\" }}"),
            );
        }
        let older = read(&d);
        db.merge(true).unwrap();
        update_db(&db, "DELETE DATA { <http://ex/u0> <http://ex/p> \"0\" }");
        update_db(
            &db,
            "INSERT DATA { <http://ex/u9> <http://ex/p> <http://ex/a> }",
        );
        let quads = terms_of(&db.current());
        drop(db);
        let now = read(&d);
        for (f, bytes) in FILES.iter().zip(&now) {
            assert_eq!(bytes.is_empty(), !large && f.ends_with(".delta"), "{f}");
        }
        assert_ne!(
            now[0] == older[0],
            !large,
            "the checkpoint wrote the snapshot or a segment"
        );
        let o = make("other", NTRIPLES);
        let db =
            nearflow_rdf::db::Db::open_tuned(&o.join(FILES[0]), &machine(), true, tuning).unwrap();
        update_db(&db, "INSERT DATA { <http://ex/o> <http://ex/p> 1 }");
        drop(db);
        StoreFiles {
            now,
            older,
            other: read(&o),
            quads,
        }
    })
}

/// What a case does to one file of the store.
#[derive(Clone, Debug)]
enum FileDamage {
    Edits(Vec<Edit>),
    Removed,
    Older,
    Others,
}

fn file_damage() -> impl Strategy<Value = FileDamage> {
    prop_oneof![
        6 => edits().prop_map(FileDamage::Edits),
        1 => Just(FileDamage::Removed),
        1 => Just(FileDamage::Older),
        1 => Just(FileDamage::Others),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// One file of a store damaged (bytes flipped, inserted, cut), removed, replaced by an
    /// older copy of its own or by another store's: the store is refused with an error that
    /// names a file, or opens with exactly its quads (or with damage its check finds, which
    /// every query is then refused for) — never with other quads said nothing of.
    #[test]
    fn store_files_damaged_swapped_or_removed(large in any::<bool>(), which in 0usize..4, damage in file_damage()) {
        let files = store_files(large);
        let d = scratch().join(format!("store-{:?}", std::thread::current().id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for (i, f) in FILES.iter().enumerate() {
            let bytes = match (&damage, i == which) {
                (_, false) => Some(files.now[i].clone()),
                (FileDamage::Edits(e), true) => Some(apply(files.now[i].clone(), e)),
                (FileDamage::Removed, true) => None,
                (FileDamage::Older, true) => Some(files.older[i].clone()),
                (FileDamage::Others, true) => Some(files.other[i].clone()),
            };
            // An empty copy is a file the other state did not have.
            if let Some(b) = bytes.filter(|b| !b.is_empty() || matches!(damage, FileDamage::Edits(_))) {
                std::fs::write(d.join(f), b).unwrap();
            }
        }
        match nearflow_rdf::db::Db::open(&d.join(FILES[0]), &machine(), false) {
            Ok(db) => {
                let s = db.current();
                let found = s.health().and_then(|h| h.check_all().map(str::to_owned));
                match found {
                    Some(why) => prop_assert!(why.contains("damaged"), "{}", why),
                    None => prop_assert_eq!(&terms_of(&s), &files.quads, "{:?} of {}", damage, FILES[which]),
                }
            }
            Err(e) => {
                let e = e.to_string();
                prop_assert!(e.contains("s.nfs"), "an error that names no file: {}", e);
                prop_assert!(e.len() < 2000, "an error of {} bytes", e.len());
            }
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// A damaged snapshot (format 5, mapped, checked chunk by chunk) is refused at open with a
    /// reason, or opens; then reading it and querying it never panic, and either the check of
    /// every chunk names damaged rows or terms (and a query says so) or the damage was in no
    /// chunk (the padding between sections) and the store holds exactly the valid one's quads.
    #[test]
    fn snapshot_reader(e in edits()) {
        let bytes = apply(snapshot_bytes().to_vec(), &e);
        let f = scratch().join(format!("damaged-{:?}.nfs", std::thread::current().id()));
        std::fs::write(&f, &bytes).unwrap();
        match snapshot::open(&f, &machine()) {
            Ok(s) => {
                let quads = terms_of(&s);
                let s = Arc::new(s);
                let (_, rt) = env();
                let q = sparql::prepare(&s, "SELECT * WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } } ORDER BY ?o", &Options::default());
                let ran = q.map(|q| q.run_collect(rt).map(|c| c.rows.len()));
                match s.health().expect("a snapshot is mapped").check_all() {
                    Some(d) => {
                        prop_assert!(d.contains("damaged"), "{}", d);
                        let again = sparql::prepare(&s, "ASK { ?s ?p ?o }", &Options::default()).unwrap();
                        prop_assert!(again.run_collect(rt).is_err(), "a query on a store known damaged fails");
                    }
                    None => {
                        prop_assert_eq!(&quads, &terms_of(&snapshot::open(&valid_snapshot(), &machine()).unwrap()));
                        prop_assert!(matches!(ran, Ok(Ok(_))));
                    }
                }
            }
            Err(err) => prop_assert!(err.to_string().contains("damaged") || err.to_string().contains("valid")
                || err.to_string().contains("truncated") || err.to_string().contains("trailing"), "{}", err),
        }
    }

    /// Damaged Turtle, N-Triples, N-Quads, TriG and RDF/XML: loaded, or one short error (with
    /// a position where the parser gives one).
    #[test]
    fn rdf_loaders(which in 0usize..5, e in edits()) {
        let (name, format, text) = [
            ("t.ttl", Format::Turtle, TURTLE),
            ("t.nt", Format::NTriples, NTRIPLES),
            ("t.nq", Format::NQuads, NQUADS),
            ("t.trig", Format::TriG, TRIG),
            ("t.rdf", Format::RdfXml, RDFXML),
        ][which];
        let bytes = apply(text.as_bytes().to_vec(), &e);
        if let Err(err) = load_bytes(name, format, &bytes) {
            check_error(&err);
        }
    }

    /// Damaged gzip files go through the decoder's error path: an error, never a panic.
    #[test]
    fn gzip_loader(e in edits()) {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(TURTLE.as_bytes()).unwrap();
        let bytes = apply(gz.finish().unwrap(), &e);
        let f = scratch().join("damaged.ttl.gz");
        std::fs::write(&f, &bytes).unwrap();
        if let Err(err) = load::load_files(&[f], &Arc::default()) {
            check_error(&err);
        }
    }

    /// Random query shapes, wide and deep, and damaged queries: prepared and run (with a time
    /// and memory limit), or refused with an error; never a panic or a stack overflow.
    #[test]
    fn sparql_front_end(q in query(), e in proptest::collection::vec(any::<(usize, u8)>(), 0..3)) {
        let text = damaged(q, &e);
        let (store, rt) = env();
        on_a_worker_stack(|| {
            if let Ok(p) = sparql::prepare(store, &text, &limited()) {
                let _ = p.explain();
                let _ = p.run_collect(rt);
            }
        });
    }
}

proptest! {
    #![proptest_config(config())]

    /// Random query shapes cut into fragments as a sharded store's coordinator cuts them (by
    /// subject and by triple), each fragment answered by the whole store (one shard holding
    /// everything, so a fragment's rows are its whole answer), and the rest planned over those
    /// rows: the same answer as the query run directly, or a refusal of what a fragment cannot
    /// express; never a panic. Queries whose answer depends on the rows' order (LIMIT, OFFSET,
    /// SAMPLE, GROUP_CONCAT) only run, except a query that is one fragment under a LIMIT (which
    /// the fragment carries): its count of rows is compared.
    #[test]
    fn fragments_answer_as_the_query(q in cut_query(), by_subject in any::<bool>()) {
        let (store, rt) = env();
        let split = if by_subject { Split::Subject } else { Split::Triple };
        let mut failure = None;
        on_a_worker_stack(|| failure = through_fragments(store, rt, &q, split).err());
        prop_assert!(failure.is_none(), "{}", failure.unwrap_or_default());
    }
}

/// The fixed shapes the property above must compare (not refuse or skip): stars, chains,
/// OPTIONAL, MINUS, UNION, EXISTS, subqueries with aggregates, VALUES, BIND, DISTINCT, ASK and
/// CONSTRUCT.
#[test]
fn fragments_answer_as_the_query_on_fixed_shapes() {
    let (store, rt) = env();
    for q in [
        "SELECT * WHERE { ?x <http://ex/name> ?n . ?x <http://ex/knows> ?y . ?y ?p ?o }",
        "SELECT * WHERE { ?x ?p ?y OPTIONAL { ?y <http://ex/name> ?n } }",
        "SELECT * WHERE { ?x ?p ?y MINUS { ?x <http://ex/age> ?a } }",
        "SELECT * WHERE { { ?x <http://ex/name> ?n } UNION { ?x <http://ex/score> ?n } }",
        "SELECT * WHERE { ?x ?p ?y FILTER NOT EXISTS { ?y ?q ?z } }",
        "SELECT ?x (COUNT(*) AS ?c) WHERE { ?x ?p ?y . ?y ?q ?z } GROUP BY ?x",
        "SELECT * WHERE { ?x ?p ?y VALUES ?p { <http://ex/knows> <http://ex/name> } }",
        "SELECT DISTINCT ?p WHERE { ?x ?p ?y BIND(STR(?y) AS ?s) FILTER(?s != \"x\") }",
        "ASK { ?x <http://ex/knows> ?y . ?y <http://ex/name> ?n }",
        "CONSTRUCT { ?y <http://q> ?x } WHERE { ?x <http://ex/knows> ?y }",
        // One fragment under a LIMIT, which the shards are given.
        "SELECT * WHERE { ?x ?p ?y } LIMIT 3",
        "SELECT ?y WHERE { ?x ?p ?y } OFFSET 2 LIMIT 4",
        "ASK { ?x <http://ex/knows> ?y }",
    ] {
        for split in [Split::Subject, Split::Triple] {
            on_a_worker_stack(|| {
                assert_eq!(
                    through_fragments(store, rt, q, split),
                    Ok(true),
                    "{q} by {split:?}"
                );
            });
        }
    }
}

/// `Ok(true)`: the answer through fragments equals the direct one; `Ok(false)`: not compared
/// (refused for a sharded store, unparsable, over a limit, or order-dependent); `Err`: a
/// difference, or an error only the path through fragments met.
fn through_fragments(
    store: &Arc<Store>,
    rt: &nearflow_rt::Runtime,
    text: &str,
    split: Split,
) -> Result<bool, String> {
    let options = limited();
    let Ok(query) = sparql::Query::parse(text, &options) else {
        return Ok(false);
    };
    let query = Arc::new(query);
    let fragments = match fragment::fragments(&query, split) {
        Ok(f) => f,
        Err(sparql::QueryError::Unsupported(m)) if m.contains("sharded store") => return Ok(false),
        Err(e) => return Err(format!("{text}: the cut failed: {e}")),
    };
    let mut given = Given {
        split,
        rows: Default::default(),
    };
    for f in &fragments {
        let prepared = sparql::prepare(store, &f.shard_text(), &options)
            .map_err(|e| format!("{text}: fragment {} does not prepare: {e}", f.text))?;
        let rows = match prepared.run_collect(rt) {
            Ok(c) => c,
            Err(e) if over_a_limit(&e) => return Ok(false),
            Err(e) => return Err(format!("{text}: fragment {} failed: {e}", f.text)),
        };
        let sparql::Form::Select(cols) = &rows.form else {
            return Err(format!("{text}: fragment {} is not a SELECT", f.text));
        };
        let cols: Vec<usize> = cols.iter().map(|(_, c)| *c).collect();
        let mut out = GivenRows {
            cols: f.cols.clone(),
            rows: rows.rows.len(),
            ids: Vec::new(),
        };
        for r in rows.rows.iter() {
            out.ids.extend(cols.iter().map(|&c| r[c]));
        }
        given.rows.insert(f.text.clone(), Arc::new(out));
    }
    let direct = match sparql::prepare(store, text, &options).and_then(|p| p.run_collect(rt)) {
        Ok(c) => c,
        Err(_) => return Ok(false),
    };
    let cut = match query.plan_given(store, &options, &given).run_collect(rt) {
        Ok(c) => c,
        Err(e) if over_a_limit(&e) => return Ok(false),
        Err(e) => return Err(format!("{text}: through fragments: {e}")),
    };
    // One fragment that carried its LIMIT to the shards: which rows come is free, how many
    // is not.
    if let [f] = &fragments[..] {
        if f.limit.is_some() {
            let size = |c: &sparql::Collected| match c.form {
                sparql::Form::Ask => c.boolean().to_string(),
                _ => c.rows.len().to_string(),
            };
            let (a, b) = (size(&direct), size(&cut));
            if a != b {
                return Err(format!(
                    "{text}: by {split:?}, directly {a} rows, through {} {b}",
                    f.shard_text()
                ));
            }
            return Ok(true);
        }
    }
    if ["LIMIT", "OFFSET", "SAMPLE", "GROUP_CONCAT"]
        .iter()
        .any(|w| text.contains(w))
    {
        return Ok(false);
    }
    let (a, b) = (answer(&direct), answer(&cut));
    if a != b {
        return Err(format!(
            "{text}: by {split:?}, directly {a:?}, through fragments {b:?} ({:?})",
            fragments.iter().map(|f| &f.text).collect::<Vec<_>>()
        ));
    }
    Ok(true)
}

fn over_a_limit(e: &sparql::QueryError) -> bool {
    matches!(
        e,
        sparql::QueryError::Timeout(_) | sparql::QueryError::MemoryLimit { .. }
    )
}

/// A collected answer, comparable: SELECT's rows as text, sorted; ASK's boolean; CONSTRUCT's
/// count of solutions.
fn answer(c: &sparql::Collected) -> Vec<String> {
    match &c.form {
        sparql::Form::Select(cols) => {
            let mut rows: Vec<String> = c
                .rows
                .iter()
                .map(|r| {
                    (0..cols.len())
                        .map(|i| c.term(r, i).map(|t| t.to_string()).unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join("\t")
                })
                .collect();
            rows.sort();
            rows
        }
        sparql::Form::Ask => vec![c.boolean().to_string()],
        _ => vec![c.rows.len().to_string()],
    }
}

/// `text` with the bytes `edits` name replaced, read back as UTF-8 (lossily).
fn damaged(text: String, edits: &[(usize, u8)]) -> String {
    let mut bytes = text.into_bytes();
    for &(i, b) in edits {
        if !bytes.is_empty() {
            let n = bytes.len();
            bytes[i % n] = b;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Runs `f` on a 2 MiB stack, as the runtime's workers and the harness's threads have.
fn on_a_worker_stack(f: impl FnOnce() + Send) {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn_scoped(s, f)
            .unwrap()
            .join()
            .unwrap()
    });
}

/// A time and a memory limit for the fuzzed queries.
fn limited() -> Options {
    Options {
        timeout: Some(Duration::from_secs(10)),
        memory_limit: Some(64 << 20),
        ..Options::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Random update requests (every operation, over the same random group patterns, damaged
    /// now and then): applied to a version of the store or refused with an error; never a
    /// panic. The version applied reads back whole: its count equals its quads.
    #[test]
    fn sparql_update_front_end(u in update(), e in proptest::collection::vec(any::<(usize, u8)>(), 0..2)) {
        let text = damaged(u, &e);
        let (store, rt) = env();
        on_a_worker_stack(|| {
            let options = sparql::update::UpdateOptions {
                query: limited(),
                ..Default::default()
            };
            if let Ok(u) = sparql::update::Update::parse(&text, None) {
                if let Ok(a) = u.apply(store, rt, &options) {
                    assert_eq!(a.store.len(), a.store.quads().len() as u64);
                }
            }
        });
    }
}

/// An update request: one to three operations of every kind.
fn update() -> impl Strategy<Value = String> {
    // Templates: a subject and predicate that may be one, an object of any kind (no blank node
    // where a deletion cannot have one).
    let node = || {
        prop_oneof![
            var(),
            Just("<http://ex/a>".to_string()),
            Just("<http://ex/b>".to_string())
        ]
    };
    let pred = || {
        prop_oneof![
            var(),
            Just("<http://ex/knows>".to_string()),
            Just("<http://ex/name>".to_string())
        ]
    };
    let object = || {
        prop_oneof![
            node(),
            Just("\"Alice\"@en".to_string()),
            Just("30".to_string())
        ]
    };
    let ground = || {
        (0usize..2, 0usize..2, 0usize..3).prop_map(|(s, p, o)| {
            format!(
                "{} {} {} .",
                ["<http://ex/a>", "<http://ex/c>"][s],
                ["<http://ex/knows>", "<http://ex/p>"][p],
                ["<http://ex/b>", "\"x\"", "1.5"][o]
            )
        })
    };
    let template =
        move || (node(), pred(), object()).prop_map(|(s, p, o)| format!("{s} {p} {o} ."));
    let op = prop_oneof![
        (proptest::collection::vec(ground(), 1..3), any::<bool>()).prop_map(|(t, named)| {
            let t = t.join(" ");
            if named {
                format!("INSERT DATA {{ GRAPH <http://ex/g> {{ {t} }} _:n <http://ex/p> 1 }}")
            } else {
                format!("INSERT DATA {{ {t} }}")
            }
        }),
        proptest::collection::vec(ground(), 1..3)
            .prop_map(|t| format!("DELETE DATA {{ {} }}", t.join(" "))),
        (template(), template(), group())
            .prop_map(|(d, i, g)| format!("DELETE {{ {d} }} INSERT {{ {i} }} WHERE {g}")),
        (template(), group()).prop_map(|(i, g)| format!(
            "WITH <http://ex/g> INSERT {{ {i} }} USING NAMED <http://ex/g> WHERE {g}"
        )),
        (template(), group()).prop_map(|(i, g)| format!(
            "INSERT {{ GRAPH ?w {{ {i} }} }} WHERE {{ {g} BIND(<http://ex/h> AS ?w) }}"
        )),
        template().prop_map(|t| format!("DELETE WHERE {{ {t} }}")),
        Just("CLEAR SILENT GRAPH <http://ex/g>".to_string()),
        Just("DROP ALL".to_string()),
        Just("CREATE GRAPH <http://ex/new>".to_string()),
        Just("COPY DEFAULT TO <http://ex/g>".to_string()),
        Just("MOVE SILENT <http://ex/g> TO DEFAULT".to_string()),
        Just("ADD <http://ex/g> TO <http://ex/h>".to_string()),
        Just("LOAD SILENT <file:///nonexistent.ttl>".to_string()),
    ];
    proptest::collection::vec(op, 1..4).prop_map(|ops| ops.join(" ;\n"))
}

fn env() -> &'static (Arc<Store>, nearflow_rt::Runtime) {
    static ENV: OnceLock<(Arc<Store>, nearflow_rt::Runtime)> = OnceLock::new();
    ENV.get_or_init(|| {
        // The Turtle document in the default graph and in a named graph.
        let trig = format!(
            "{}\n<http://ex/g> {{ <http://ex/a> <http://ex/knows> <http://ex/b> , _:c }}",
            TURTLE
        );
        let l = load_bytes("t.trig", Format::TriG, trig.as_bytes()).unwrap();
        let m = machine();
        let store = Arc::new(l.into_store(&m).unwrap());
        (store, nearflow_rt::Runtime::builder(m).build().unwrap())
    })
}

/// A query: `SELECT *`, `ASK`, `CONSTRUCT` or `DESCRIBE` over a random group pattern, with
/// modifiers and now and then dataset clauses.
fn query() -> impl Strategy<Value = String> {
    (0usize..4, group(), any::<bool>(), 0usize..4, 0usize..4).prop_map(
        |(form, g, distinct, limit, dataset)| {
            let modifiers = match limit {
                0 => String::new(),
                1 => " LIMIT 2".into(),
                2 => " ORDER BY ?x LIMIT 3".into(),
                _ => " ORDER BY DESC(?y) OFFSET 1".into(),
            };
            let from = match dataset {
                0 => " FROM <http://ex/g>",
                1 => " FROM NAMED <http://ex/g>",
                2 => " FROM <http://ex/g> FROM <http://ex/none> FROM NAMED <http://ex/g>",
                _ => "",
            };
            match form {
                0 => format!(
                    "SELECT {}*{from} WHERE {g}{modifiers}",
                    if distinct { "DISTINCT " } else { "" }
                ),
                1 => format!("ASK{from} {g}"),
                2 => format!("DESCRIBE ?x ?w <http://ex/a>{from} WHERE {g}{modifiers}"),
                _ => format!("CONSTRUCT {{ ?x <http://q> _:b }}{from} WHERE {g}{modifiers}"),
            }
        },
    )
}

/// A query the fragments can answer in whole: `SELECT *`, `ASK` or `CONSTRUCT` over a random
/// group pattern, without dataset clauses or an order-dependent slice at its top.
fn cut_query() -> impl Strategy<Value = String> {
    (0usize..3, group(), any::<bool>()).prop_map(|(form, g, distinct)| match form {
        0 => format!(
            "SELECT {}* WHERE {g}",
            if distinct { "DISTINCT " } else { "" }
        ),
        1 => format!("ASK {g}"),
        _ => format!("CONSTRUCT {{ ?x <http://q> ?y }} WHERE {g}"),
    })
}

fn var() -> impl Strategy<Value = String> {
    prop_oneof![Just("?x"), Just("?y"), Just("?z"), Just("?w")].prop_map(String::from)
}

fn term() -> impl Strategy<Value = String> {
    prop_oneof![
        var(),
        Just("<http://ex/a>".to_string()),
        Just("<http://ex/name>".to_string()),
        Just("\"Alice\"@en".to_string()),
        Just("30".to_string()),
        Just("99999999999999999999999".to_string()),
        Just("_:b".to_string()),
    ]
}

fn triple() -> impl Strategy<Value = String> {
    (term(), term(), term()).prop_map(|(s, p, o)| format!("{s} {p} {o} ."))
}

/// Expressions: leaves, then operators nested up to a few levels, and now and then a long
/// chain or a deep nest (the shapes that overflowed a stack).
fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![var(), Just("1".to_string()), Just("\"a\"".to_string())];
    let nested = leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone(), 0usize..8).prop_map(|(a, b, op)| {
                let op = ["+", "-", "*", "/", "=", "<", "&&", "||"][op];
                format!("({a} {op} {b})")
            }),
            inner.clone().prop_map(|a| format!("!{a}")),
            inner.clone().prop_map(|a| format!("STR({a})")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("IF(BOUND(?x), {a}, {b})")),
        ]
    });
    prop_oneof![
        8 => nested,
        1 => (1usize..2000, 0usize..3).prop_map(|(n, op)| {
            vec!["?x"; n].join([" + ", " && ", " || "][op])
        }),
        1 => (1usize..400).prop_map(|n| format!("{}?x{}", "(".repeat(n), ")".repeat(n))),
        1 => (1usize..400).prop_map(|n| format!("{}?x", "-".repeat(n))),
    ]
}

/// Group patterns: triples, FILTER, BIND, OPTIONAL, UNION, MINUS, subqueries, nested a few
/// levels; and now and then thousands of UNION branches or OPTIONALs in a row.
fn group() -> impl Strategy<Value = String> {
    let base =
        proptest::collection::vec(triple(), 0..3).prop_map(|ts| format!("{{ {} }}", ts.join(" ")));
    let nested = base.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{{ {a} UNION {b} }}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{{ {a} OPTIONAL {b} }}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{{ {a} MINUS {b} }}")),
            (inner.clone(), expr()).prop_map(|(a, e)| format!("{{ {a} FILTER({e}) }}")),
            (inner.clone(), expr()).prop_map(|(a, e)| format!("{{ {a} BIND({e} AS ?v) }}")),
            inner
                .clone()
                .prop_map(|a| format!("{{ SELECT * WHERE {a} LIMIT 5 }}")),
            (inner.clone(), 0usize..6).prop_map(|(a, f)| {
                let f = [
                    "COUNT(*)",
                    "SUM(?x)",
                    "AVG(?y)",
                    "MIN(?z)",
                    "GROUP_CONCAT(?x)",
                    "SAMPLE(?y)",
                ][f];
                format!("{{ SELECT ?x ({f} AS ?g) WHERE {a} GROUP BY ?x HAVING(COUNT(*) > 0) }}")
            }),
            (inner.clone(), inner.clone(), any::<bool>()).prop_map(|(a, b, not)| {
                format!(
                    "{{ {a} FILTER({}EXISTS {b}) }}",
                    if not { "NOT " } else { "" }
                )
            }),
            inner.clone().prop_map(|a| format!(
                "{{ {a} VALUES (?x ?y) {{ (<http://ex/a> UNDEF) (UNDEF 30) }} }}"
            )),
            // Named graphs, EXISTS inside expressions, correlated EXISTS.
            (inner.clone(), 0usize..3).prop_map(|(a, g)| {
                let g = ["?g", "<http://ex/g>", "?x"][g];
                format!("{{ GRAPH {g} {a} }}")
            }),
            (inner.clone(), inner.clone(), expr()).prop_map(|(a, b, e)| {
                format!("{{ {a} FILTER({e} || EXISTS {b}) BIND(NOT EXISTS {b} AS ?m) }}")
            }),
            (inner.clone(), inner.clone(), expr()).prop_map(|(a, b, e)| {
                format!("{{ {a} FILTER NOT EXISTS {{ {b} FILTER({e} = ?x) }} }}")
            }),
            (inner, 0usize..6).prop_map(|(a, p)| {
                let p = [
                    "<http://ex/knows>*",
                    "<http://ex/knows>+",
                    "(<http://ex/knows>|^<http://ex/name>)/<http://ex/p>",
                    "!(<http://ex/name>|^<http://ex/knows>)",
                    "(<http://ex/knows>?)*",
                    "^<http://ex/knows>?",
                ][p];
                format!("{{ {a} ?x {p} ?w }}")
            }),
        ]
    });
    prop_oneof![
        8 => nested,
        1 => (1usize..3000).prop_map(|n| format!("{{ {} }}", vec!["{ ?x ?y ?z }"; n].join(" UNION "))),
        1 => (1usize..3000).prop_map(|n| format!("{{ ?x ?y ?z {} }}", "OPTIONAL { ?x ?y ?w } ".repeat(n))),
        1 => (1usize..400).prop_map(|n| format!("{}?x ?y ?z{}", "{".repeat(n), "}".repeat(n))),
    ]
}
