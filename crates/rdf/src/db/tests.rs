//! The durable store's tests: updates, recovery, merges, checkpoints, segments, locks and salvage.

use super::*;
use crate::dict::Dict;
use crate::log::HEADER;
use crate::term::TermRef;

fn machine() -> Machine {
    nearflow_topo::from_synthetic("pack:2 [numa] core:1 pu:1").unwrap()
}

fn store_with(n: usize) -> Store {
    let mut d = Dict::new();
    let p = d.intern(TermRef::Iri("http://p")).unwrap();
    let quads = (0..n)
        .map(|i| {
            let s = d.intern(TermRef::Iri(&format!("http://s{i}"))).unwrap();
            [s, p, s, DEFAULT_GRAPH]
        })
        .collect();
    Store::build(&machine(), d, quads).unwrap()
}

/// Inserts `<http://new{i}> <http://p> "i"` in graph `g` (or the default graph).
fn insert(db: &Db, i: usize, g: Option<&str>) -> Committed {
    db.update(|s| {
        let mut e = s.edit();
        let q = [
            e.intern(TermRef::Iri(&format!("http://new{i}")))?,
            e.intern(TermRef::Iri("http://p"))?,
            e.intern(TermRef::string(&i.to_string()))?,
            match g {
                Some(g) => e.intern(TermRef::Iri(g))?,
                None => DEFAULT_GRAPH,
            },
        ];
        e.insert(q);
        let changes = e.changes();
        Ok::<_, crate::dict::DictFull>((e.finish(), changes))
    })
    .unwrap()
}

#[test]
fn acknowledged_updates_survive_a_reopen_and_a_checkpoint() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    snapshot::save(&store_with(10), &path).unwrap();
    {
        let db = Db::open(&path, &machine(), true).unwrap();
        assert!(matches!(
            Db::open(&path, &machine(), true),
            Err(DbError::Busy { .. })
        ));
        for i in 0..5 {
            assert_eq!(insert(&db, i, None).seq, i as u64 + 1);
        }
        insert(&db, 5, Some("http://g"));
        // Nothing changed: no record.
        assert_eq!(insert(&db, 5, Some("http://g")).changed, 0);
        assert_eq!(db.current().len(), 16);
    }
    let db = Db::open(&path, &machine(), true).unwrap();
    assert_eq!(db.stats().replayed, 6);
    assert_eq!(db.current().len(), 16);
    assert_eq!(db.seq(), 6);
    assert!(db.merge(true).unwrap());
    assert!(db.current().is_flat());
    assert_eq!(db.stats().checkpoints, 1);
    insert(&db, 6, None);
    drop(db);
    let read = Db::open(&path, &machine(), false).unwrap();
    assert_eq!(read.stats().replayed, 1, "the checkpoint cut the log");
    assert_eq!(read.current().len(), 17);
    assert_eq!(read.seq(), 7);
    assert!(matches!(
        read.update(|_| Ok::<_, DbError>((store_with(1), vec![]))),
        Err(UpdateError::Store(DbError::ReadOnly))
    ));
}

#[test]
fn a_torn_last_record_is_dropped_and_damage_elsewhere_refused() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    snapshot::save(&store_with(3), &path).unwrap();
    {
        let db = Db::open(&path, &machine(), true).unwrap();
        for i in 0..3 {
            insert(&db, i, None);
        }
    }
    let lp = log_path(&path);
    let whole = std::fs::read(&lp).unwrap();
    // Cut at every byte of the last record: the first two updates always come back. The
    // third was acknowledged, so its loss is refused; a crash while its record was being
    // written (before it was acknowledged) leaves the record of the second as the last.
    let rec = (whole.len() - HEADER) / 3;
    let acked = std::fs::read(acked_path(&path)).unwrap();
    for cut in [
        whole.len() - 1,
        whole.len() - rec + 3,
        whole.len() - rec + 9,
    ] {
        std::fs::write(&lp, &whole[..cut]).unwrap();
        std::fs::write(acked_path(&path), &acked).unwrap();
        let e = Db::open(&path, &machine(), false).unwrap_err().to_string();
        assert!(e.contains("1 acknowledged update is missing"), "{e}");
        record_acked(
            &path,
            Acked {
                seq: 2,
                ..Acked::default()
            },
        )
        .unwrap();
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(db.current().len(), 5, "cut at {cut}");
        assert!(db.stats().dropped_bytes > 0);
        drop(db);
        assert_eq!(
            std::fs::metadata(&lp).unwrap().len() as usize,
            whole.len() - rec,
            "the torn record is cut off"
        );
    }
    // A flipped byte in the first record, with records after it: refused, naming where.
    let mut bad = whole.clone();
    bad[HEADER + 12] ^= 1;
    std::fs::write(&lp, &bad).unwrap();
    let e = Db::open(&path, &machine(), false).unwrap_err().to_string();
    assert!(e.contains("damaged at byte 36 (record 1)"), "{e}");
    // A bad header.
    std::fs::write(&lp, b"hello").unwrap();
    let e = Db::open(&path, &machine(), false).unwrap_err().to_string();
    assert!(e.contains("header"), "{e}");
}

/// An acknowledged update the log no longer holds (cut at a record's end, zeroed from the
/// middle, the last record damaged, removed, an older copy put back) is refused, saying how
/// many; `salvage` gives them up, saying so, and the store opens; bytes after the last
/// acknowledged record (a torn write) are dropped as before.
#[test]
fn acknowledged_updates_past_the_log_are_refused_until_salvaged() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    snapshot::save(&store_with(3), &path).unwrap();
    let lp = log_path(&path);
    let older = {
        let db = Db::open(&path, &machine(), true).unwrap();
        for i in 0..3 {
            insert(&db, i, None);
        }
        let older = std::fs::read(&lp).unwrap();
        for i in 3..5 {
            insert(&db, i, None);
        }
        older
    };
    let whole = std::fs::read(&lp).unwrap();
    let starts = record_starts(&whole);
    let mut flipped = whole.clone();
    *flipped.last_mut().unwrap() ^= 0x10;
    let mut zeroed = whole.clone();
    zeroed[starts[2]..].fill(0);
    let cases: [(&str, Option<Vec<u8>>, u64); 5] = [
        (
            "cut after the third record",
            Some(whole[..starts[3]].to_vec()),
            2,
        ),
        ("zeroed from the third record", Some(zeroed), 3),
        ("the last record damaged", Some(flipped), 1),
        ("an older copy", Some(older), 2),
        ("removed", None, 5),
    ];
    let acked = std::fs::read(acked_path(&path)).unwrap();
    for (case, log, missing) in cases {
        match &log {
            Some(b) => std::fs::write(&lp, b).unwrap(),
            None => std::fs::remove_file(&lp).unwrap(),
        }
        std::fs::write(acked_path(&path), &acked).unwrap();
        for writable in [false, true] {
            let e = Db::open(&path, &machine(), writable)
                .unwrap_err()
                .to_string();
            let s = if missing == 1 { " is" } else { "s are" };
            assert!(
                e.contains(&format!("{missing} acknowledged update{s} missing")),
                "{case}: {e}"
            );
            assert!(e.contains("--salvage"), "{case}: {e}");
        }
        let s = salvage(&path).unwrap();
        assert_eq!(s.unlogged, missing, "{case}");
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(db.current().len(), 3 + 5 - missing, "{case}");
        drop(db);
        std::fs::write(&lp, &whole).unwrap();
    }
    // A write cut short after the last acknowledged record: dropped, nothing refused.
    std::fs::write(acked_path(&path), &acked).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(&whole[starts[4]..starts[4] + 10]);
    std::fs::write(&lp, &torn).unwrap();
    let db = Db::open(&path, &machine(), true).unwrap();
    assert_eq!(db.current().len(), 8);
    assert!(db.stats().dropped_bytes > 0);
}

/// The byte offsets of the records of a log of format 2.
fn record_starts(log: &[u8]) -> Vec<usize> {
    let mut at = HEADER;
    let mut out = Vec::new();
    while at < log.len() {
        out.push(at);
        at += 12 + u32::from_le_bytes(log[at..at + 4].try_into().unwrap()) as usize;
    }
    out
}

#[test]
fn a_damaged_length_in_the_middle_is_refused_and_salvage_keeps_the_prefix() {
    let (dir, whole) = logged();
    let path = dir.path().join("s.nfs");
    let lp = log_path(&path);
    let starts = record_starts(&whole);
    assert_eq!(starts.len(), 8);
    // Every bit of the fourth record's length: damage, named, never a silent prefix.
    for bit in 0..32 {
        let mut bad = whole.clone();
        bad[starts[3] + bit / 8] ^= 1 << (bit % 8);
        std::fs::write(&lp, &bad).unwrap();
        let e = Db::open(&path, &machine(), false).unwrap_err().to_string();
        assert!(
            e.contains(&format!("damaged at byte {} (record 4)", starts[3])),
            "bit {bit}: {e}"
        );
        assert!(
            e.contains("3 good records before it, 4 readable after it"),
            "{e}"
        );
    }
    // The user's choice: keep the three records before it, and be told five are dropped.
    let s = salvage(&path).unwrap();
    assert_eq!((s.kept, s.dropped), (3, 5));
    let copy = s.copy.unwrap();
    assert_eq!(std::fs::read(&copy).unwrap().len(), whole.len());
    let db = Db::open(&path, &machine(), true).unwrap();
    assert_eq!(db.stats().replayed, 3);
    assert_eq!(db.current().len(), 6);
    drop(db);
    // A whole log is left alone.
    let s = salvage(&path).unwrap();
    assert_eq!((s.kept, s.dropped, s.copy), (3, 0, None));
}

#[test]
fn a_zero_filled_tail_is_torn_and_an_old_format_log_still_opens() {
    let (dir, whole) = logged();
    let path = dir.path().join("s.nfs");
    let lp = log_path(&path);
    let mut zeros = whole.clone();
    zeros.extend(std::iter::repeat_n(0u8, 4096));
    std::fs::write(&lp, &zeros).unwrap();
    let db = Db::open(&path, &machine(), true).unwrap();
    assert_eq!(db.stats().replayed, 8);
    assert_eq!(db.stats().dropped_bytes, 4096);
    drop(db);
    assert_eq!(std::fs::read(&lp).unwrap(), whole, "the zeros are cut off");
    // The same records framed as format 1 ([length][CRC of the payload][payload]).
    // A 20-byte header: no fingerprint of the snapshot it follows.
    let mut old = logfmt::header(0, Fingerprint::NONE)[..20].to_vec();
    old[6..8].copy_from_slice(&1u16.to_le_bytes());
    let crc = crc32fast::hash(&old[..16]);
    old[16..20].copy_from_slice(&crc.to_le_bytes());
    let starts = record_starts(&whole);
    for &at in &starts {
        let len = u32::from_le_bytes(whole[at..at + 4].try_into().unwrap()) as usize;
        old.extend_from_slice(&whole[at..at + 4]);
        old.extend_from_slice(&whole[at + 8..at + 12 + len]);
    }
    // Format 1's weakness stays covered: a damaged length with records after it.
    let mut bad = old.clone();
    bad[20 + 3] ^= 0x10;
    std::fs::write(&lp, &bad).unwrap();
    let e = Db::open(&path, &machine(), false).unwrap_err().to_string();
    assert!(e.contains("damaged at byte 20 (record 1)"), "{e}");
    std::fs::write(&lp, &old).unwrap();
    let db = Db::open(&path, &machine(), true).unwrap();
    assert_eq!(db.stats().replayed, 8);
    insert(&db, 100, None);
    drop(db);
    let log = std::fs::read(&lp).unwrap();
    assert_eq!(
        &log[6..8],
        &logfmt::VERSION.to_le_bytes(),
        "rewritten in the format written"
    );
    assert_eq!(record_starts(&log).len(), 9);
    let db = Db::open(&path, &machine(), false).unwrap();
    assert_eq!(db.current().len(), 3 + 9);
}

#[test]
fn the_background_merge_keeps_every_update_made_while_it_runs() {
    let db = Arc::new(Db::in_memory(store_with(200)));
    let t = {
        let db = db.clone();
        std::thread::spawn(move || {
            for _ in 0..20 {
                db.merge(false).unwrap();
            }
        })
    };
    for i in 0..200 {
        insert(&db, i, if i % 2 == 0 { None } else { Some("http://g") });
    }
    t.join().unwrap();
    let s = db.current();
    assert_eq!(s.len(), 400);
    db.merge(false).unwrap();
    let s2 = db.current();
    assert!(s2.is_flat());
    let mut a = s.quads();
    let mut b = s2.quads();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[test]
fn a_segment_that_disagrees_with_its_snapshot_is_found_by_the_full_check() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    let db = segmented(&path);
    insert(&db, 1, None);
    db.merge(true).unwrap();
    drop(db);
    assert!(Db::open(&path, &machine(), false)
        .unwrap()
        .current()
        .delta_agrees());
    // The one added quad made `<http://s0> <http://p> <http://s0>`, which the snapshot
    // holds (ids: `http://p` 1, `http://s0` 2), under a checksum that matches.
    let seg = segment::segment_path(&path);
    let mut b = std::fs::read(&seg).unwrap();
    let body = b.len() - 4;
    for (j, id) in [0u32, 2, 1, 2].iter().enumerate() {
        b[body - 16 + 4 * j..body - 12 + 4 * j].copy_from_slice(&id.to_le_bytes());
    }
    let crc = crc32fast::hash(&b[..body]);
    b[body..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&seg, &b).unwrap();
    let read = Db::open(&path, &machine(), false).unwrap();
    assert!(!read.current().delta_agrees());
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config {
        cases: std::env::var("NEARFLOW_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(128),
        failure_persistence: None,
        ..Default::default()
    })]

    /// The log reader on damaged logs: a log cut anywhere opens with a prefix of its
    /// updates; bytes flipped or inserted open or give an error, never a panic.
    #[test]
    fn a_damaged_log_opens_a_prefix_or_is_refused(
        cut in 0usize..2000,
        flips in proptest::collection::vec((0usize..2000, proptest::prelude::any::<u8>()), 0..3),
        insert in proptest::option::of((0usize..2000, proptest::prelude::any::<u8>())),
    ) {
        let (dir, whole) = logged();
        let path = dir.path().join("s.nfs");
        let lp = log_path(&path);
        let cut = cut.min(whole.len());
        std::fs::write(&lp, &whole[..cut.max(HEADER)]).unwrap();
        let db = Db::open(&path, &machine(), false).unwrap();
        let n = db.stats().replayed;
        proptest::prop_assert!(n <= 8);
        proptest::prop_assert_eq!(db.current().len(), 3 + n);
        let mut bad = whole.clone();
        for (i, b) in flips {
            let n = bad.len();
            bad[i % n] = b;
        }
        if let Some((i, b)) = insert {
            let n = bad.len();
            bad.insert(i % n, b);
        }
        std::fs::write(&lp, &bad).unwrap();
        if let Ok(db) = Db::open(&path, &machine(), false) {
            proptest::prop_assert!(db.current().len() >= 3);
        }
    }
}

/// A store of 3 triples and a log of 8 inserts, made once, written into a folder of the
/// caller's own (`s.nfs` and its log); the log's bytes.
fn logged() -> (tempfile::TempDir, Vec<u8>) {
    static MADE: std::sync::OnceLock<(Vec<u8>, Vec<u8>)> = std::sync::OnceLock::new();
    let (snap, log) = MADE.get_or_init(|| {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        snapshot::save(&store_with(3), &path).unwrap();
        let db = Db::open(&path, &machine(), true).unwrap();
        for i in 0..8 {
            insert(&db, i, None);
        }
        drop(db);
        let log = std::fs::read(log_path(&path)).unwrap();
        (std::fs::read(&path).unwrap(), log)
    });
    let own = tempdir();
    let path = own.path().join("s.nfs");
    std::fs::write(&path, snap).unwrap();
    std::fs::write(log_path(&path), log).unwrap();
    (own, log.clone())
}

/// A folder of the test's own, removed when dropped.
/// Removes `<http://s{i}> <http://p> <http://s{i}>` (a quad of [`store_with`]).
fn remove(db: &Db, i: usize) {
    db.update(|s| {
        let mut e = s.edit();
        let t = e.intern(TermRef::Iri(&format!("http://s{i}")))?;
        let p = e.intern(TermRef::Iri("http://p"))?;
        e.remove([t, p, t, DEFAULT_GRAPH]);
        let changes = e.changes();
        Ok::<_, crate::dict::DictFull>((e.finish(), changes))
    })
    .unwrap();
}

/// A store of 100 quads that counts as large: its delta is kept below 50 quads.
fn segmented(path: &Path) -> Db {
    snapshot::save(&store_with(100), path).unwrap();
    let tuning = Tuning {
        segment_min_quads: 50,
        delta_max_quads: 1000,
        rewrite_fraction: 2,
        ..Tuning::default()
    };
    Db::open_tuned(path, &machine(), true, tuning).unwrap()
}

use crate::bulk::tests::{stats_of, terms_of};

#[test]
fn a_large_store_checkpoints_its_delta_beside_the_snapshot() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    let db = segmented(&path);
    let snap = std::fs::read(&path).unwrap();
    for i in 0..10 {
        insert(&db, i, if i % 3 == 0 { Some("http://g") } else { None });
    }
    for i in 0..5 {
        remove(&db, i);
    }
    // The delta is kept: no merge, and the checkpoint writes it as a segment.
    assert!(!db.merge(true).unwrap());
    let st = db.stats();
    assert_eq!((st.segments, st.checkpoints, st.merges), (1, 0, 0));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        snap,
        "the snapshot is not written"
    );
    let seg = segment::segment_path(&path);
    let seg_len = std::fs::metadata(&seg).unwrap().len();
    assert_eq!(st.last_checkpoint_bytes, seg_len);
    assert!(seg_len < snap.len() as u64 / 4, "{seg_len} bytes");
    assert_eq!(db.current().delta().counts(), (10, 5));
    insert(&db, 10, None);
    let want = db.current();
    drop(db);
    // Reopened: the snapshot, its segment, then the one record after it.
    let read = Db::open(&path, &machine(), false).unwrap();
    assert_eq!(read.stats().segment, Some((10, 5)));
    assert_eq!(
        read.stats().replayed,
        1,
        "the segment's checkpoint cut the log"
    );
    assert_eq!(read.seq(), 16);
    let got = read.current();
    assert_eq!(got.len(), 106);
    assert_eq!(terms_of(&got), terms_of(&want));
    assert_eq!(stats_of(&got), stats_of(&want));
    assert_eq!(got.graph_ids().len(), 2);
    drop(read);
    // The segment removed: its 15 updates would be lost, so the store is not opened;
    // salvage gives them up, saying so.
    let kept = std::fs::read(&seg).unwrap();
    std::fs::remove_file(&seg).unwrap();
    for writable in [false, true] {
        let e = Db::open(&path, &machine(), writable)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("s.nfs.delta is missing") && e.contains("up to update 15"),
            "{e}"
        );
    }
    // Put back, it opens again.
    std::fs::write(&seg, &kept).unwrap();
    assert_eq!(
        Db::open(&path, &machine(), true).unwrap().current().len(),
        106
    );
    // A segment written beside another snapshot (its header names it) is not this one's.
    let mut other = kept.clone();
    other[8] ^= 1;
    let n = other.len() - 4;
    let crc = crc32fast::hash(&other[..n]);
    other[n..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&seg, &other).unwrap();
    for writable in [false, true] {
        let e = refusal(&path, writable, "another snapshot's segment");
        assert!(e.contains("belongs to another snapshot"), "{e}");
    }
    assert_eq!(std::fs::read(&seg).unwrap(), other, "nothing removed");
    std::fs::remove_file(&seg).unwrap();
    let s = salvage(&path).unwrap();
    assert_eq!(s.segment_lost, Some(15));
    let db = Db::open(&path, &machine(), true).unwrap();
    assert_eq!(
        db.current().len(),
        100 + 1,
        "the snapshot and the record after"
    );
}

#[test]
fn updates_that_cancel_out_still_let_a_checkpoint_cut_the_log() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    let db = segmented(&path);
    for round in 0..20 {
        insert(&db, 7, None);
        db.update(|s| {
            let mut e = s.edit();
            let q = [
                e.intern(TermRef::Iri("http://new7"))?,
                e.intern(TermRef::Iri("http://p"))?,
                e.intern(TermRef::string("7"))?,
                DEFAULT_GRAPH,
            ];
            e.remove(q);
            let changes = e.changes();
            Ok::<_, crate::dict::DictFull>((e.finish(), changes))
        })
        .unwrap();
        assert!(db.current().delta().is_empty(), "round {round}");
    }
    assert!(std::fs::metadata(log_path(&path)).unwrap().len() > HEADER as u64 * 10);
    db.merge(true).unwrap();
    assert_eq!(db.stats().segments, 1);
    assert_eq!(
        std::fs::metadata(log_path(&path)).unwrap().len(),
        HEADER as u64,
        "the log is cut"
    );
    drop(db);
    let read = Db::open(&path, &machine(), false).unwrap();
    assert_eq!(read.stats().segment, Some((0, 0)));
    assert_eq!(read.current().len(), 100);
    assert_eq!(read.seq(), 40);
}

#[test]
fn a_segment_and_the_log_it_did_not_cut_replay_to_the_same_store() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    let db = segmented(&path);
    for i in 0..8 {
        insert(&db, i, None);
    }
    remove(&db, 3);
    let log = std::fs::read(log_path(&path)).unwrap();
    db.merge(true).unwrap();
    let want = terms_of(&db.current());
    drop(db);
    // Killed after the segment was renamed into place, before the log was cut: every
    // record is replayed over the segment that holds it.
    std::fs::write(log_path(&path), &log).unwrap();
    let read = Db::open(&path, &machine(), false).unwrap();
    assert_eq!(read.stats().replayed, 9);
    assert_eq!(terms_of(&read.current()), want);
}

#[test]
fn the_snapshot_is_written_again_once_the_delta_is_large() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    let db = segmented(&path);
    for i in 0..20 {
        insert(&db, i, None);
    }
    db.merge(true).unwrap();
    let seg = segment::segment_path(&path);
    let stale = std::fs::read(&seg).unwrap();
    for i in 20..40 {
        insert(&db, i, Some("http://g"));
    }
    for i in 0..12 {
        remove(&db, i);
    }
    // 52 quads of delta: the snapshot is written with it merged in as it streams out.
    let from = db.current();
    assert!(db.merge(false).unwrap());
    let st = db.stats();
    assert_eq!((st.segments, st.checkpoints), (1, 1));
    assert!(!seg.exists(), "the segment is removed");
    assert!(db.current().is_flat());
    let merged = from.merged().unwrap();
    drop(db);
    let read = Db::open(&path, &machine(), false).unwrap();
    assert_eq!(read.stats().replayed, 0);
    assert_eq!(read.stats().segment, None);
    assert_eq!(terms_of(&read.current()), terms_of(&merged));
    assert_eq!(stats_of(&read.current()), stats_of(&merged));
    assert_eq!(read.current().graphs(), merged.graphs());
    drop(read);
    // Killed after the new snapshot was renamed into place, before the old segment was
    // removed: the segment is stale, ignored, and removed by the next writer.
    std::fs::write(&seg, &stale).unwrap();
    let read = Db::open(&path, &machine(), false).unwrap();
    assert_eq!(read.stats().segment, None);
    assert_eq!(terms_of(&read.current()), terms_of(&merged));
    drop(read);
    let db = Db::open(&path, &machine(), true).unwrap();
    assert!(!seg.exists());
    assert_eq!(terms_of(&db.current()), terms_of(&merged));
}

#[test]
fn a_damaged_segment_is_refused() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    let db = segmented(&path);
    for i in 0..6 {
        insert(&db, i, None);
    }
    remove(&db, 1);
    db.merge(true).unwrap();
    drop(db);
    let seg = segment::segment_path(&path);
    let good = std::fs::read(&seg).unwrap();
    let damaged = |bytes: &[u8]| {
        std::fs::write(&seg, bytes).unwrap();
        match Db::open(&path, &machine(), false) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a damaged segment opened"),
        }
    };
    for at in [0, 30, 70, good.len() / 2, good.len() - 20, good.len() - 1] {
        let mut b = good.clone();
        b[at] ^= 0x40;
        let e = damaged(&b);
        assert!(e.contains("delta segment is damaged"), "byte {at}: {e}");
    }
    for len in [0, 10, good.len() - 4, good.len() - 1] {
        let e = damaged(&good[..len]);
        assert!(e.contains("delta segment is damaged"), "cut at {len}: {e}");
    }
    std::fs::write(&seg, &good).unwrap();
    assert_eq!(
        Db::open(&path, &machine(), false).unwrap().current().len(),
        105
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// A segment changed anywhere, its checksum made to match: opening it is an error or
    /// a store, never a panic.
    #[test]
    fn a_segment_changed_under_a_matching_checksum_never_panics(
        edits in proptest::collection::vec((0usize..4096, proptest::prelude::any::<u8>()), 1..6),
    ) {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        let db = segmented(&path);
        for i in 0..6 {
            insert(&db, i, if i % 2 == 0 { Some("http://g") } else { None });
        }
        remove(&db, 2);
        db.merge(true).unwrap();
        drop(db);
        let seg = segment::segment_path(&path);
        let mut b = std::fs::read(&seg).unwrap();
        let body = b.len() - 4;
        for (at, x) in &edits {
            b[at % body] = *x;
        }
        let crc = crc32fast::hash(&b[..body]);
        b[body..].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&seg, &b).unwrap();
        if let Err(e) = Db::open(&path, &machine(), false) {
            let e = e.to_string();
            proptest::prop_assert!(e.contains("delta segment") || e.contains("s.nfs"), "{}", e);
        }
    }
}

/// Why the store at `path` is not opened (`why`: what should refuse it).
fn refusal(path: &Path, writable: bool, why: &str) -> String {
    match Db::open(path, &machine(), writable) {
        Ok(_) => panic!("opened: {why}"),
        Err(e) => e.to_string(),
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("nearflow-db-")
        .tempdir()
        .unwrap()
}

#[test]
fn the_snapshot_or_log_of_another_store_is_refused_until_salvaged() {
    // Store A: 3 quads and 8 logged updates; store B: 5 quads.
    let (dir, _) = logged();
    let path = dir.path().join("s.nfs");
    let other = dir.path().join("other.nfs");
    snapshot::save(&store_with(5), &other).unwrap();
    let mine = std::fs::read(&path).unwrap();
    // B's snapshot beside A's log: its records are not replayed onto it.
    std::fs::copy(&other, &path).unwrap();
    for writable in [false, true] {
        let e = refusal(&path, writable, "another snapshot beside the log");
        assert!(
            e.contains("is not the snapshot") && e.contains("8 update records"),
            "{e}"
        );
    }
    // A's own snapshot back: every update is there.
    std::fs::write(&path, &mine).unwrap();
    assert_eq!(
        Db::open(&path, &machine(), false).unwrap().current().len(),
        3 + 8
    );
    // B's log beside A's snapshot.
    let db = Db::open(&other, &machine(), true).unwrap();
    insert(&db, 50, None);
    drop(db);
    std::fs::copy(log_path(&other), log_path(&path)).unwrap();
    let e = refusal(&path, false, "another store's log");
    assert!(e.contains("1 update record "), "{e}");
    // Salvaged: the log's record is given up (the log kept aside), the snapshot opens
    // as it is and takes updates.
    let s = salvage(&path).unwrap();
    assert_eq!(s.foreign, Some(1));
    let copy = s.copy.expect("the log kept");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(log_path(&other)).unwrap()
    );
    let db = Db::open(&path, &machine(), true).unwrap();
    assert_eq!(db.current().len(), 3);
    insert(&db, 60, None);
    drop(db);
    assert_eq!(
        Db::open(&path, &machine(), false).unwrap().current().len(),
        4
    );
}

#[test]
fn an_older_copy_of_the_snapshot_is_refused() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    snapshot::save(&store_with(3), &path).unwrap();
    let old = std::fs::read(&path).unwrap();
    let db = Db::open(&path, &machine(), true).unwrap();
    for i in 0..4 {
        insert(&db, i, None);
    }
    db.merge(true).unwrap();
    insert(&db, 4, None);
    insert(&db, 5, None);
    drop(db);
    assert_ne!(
        std::fs::read(&path).unwrap(),
        old,
        "a checkpoint wrote the snapshot"
    );
    let new = std::fs::read(&path).unwrap();
    // The snapshot from before the checkpoint put back: the 4 updates it lacks are in no
    // file, and the log's 2 records are not replayed onto it.
    std::fs::write(&path, &old).unwrap();
    let e = refusal(&path, false, "an older snapshot");
    assert!(
        e.contains("is not the snapshot") && e.contains("2 update records"),
        "{e}"
    );
    std::fs::write(&path, &new).unwrap();
    assert_eq!(
        Db::open(&path, &machine(), false).unwrap().current().len(),
        3 + 6
    );
}

#[test]
fn a_checkpoint_cut_short_between_its_renames_opens_with_every_update() {
    let dir = tempdir();
    let path = dir.path().join("s.nfs");
    snapshot::save(&store_with(3), &path).unwrap();
    let db = Db::open(&path, &machine(), true).unwrap();
    for i in 0..4 {
        insert(&db, i, None);
    }
    let before = std::fs::read(log_path(&path)).unwrap();
    db.merge(true).unwrap();
    drop(db);
    let print = segment::fingerprint(&path).unwrap();
    // What a crash after the new snapshot's rename and before the log's leaves: the old
    // log, and the record naming the new snapshot as the one being written.
    std::fs::write(log_path(&path), &before).unwrap();
    let crashed = |next| {
        record_acked(
            &path,
            Acked {
                seq: 4,
                segment: 0,
                next,
            },
        )
        .unwrap()
    };
    crashed(Some(print));
    assert_eq!(
        Db::open(&path, &machine(), false).unwrap().current().len(),
        7
    );
    // Without that record, the same files are refused.
    crashed(None);
    assert!(Db::open(&path, &machine(), false).is_err());
    // A writable open makes the log follow the new snapshot and clears the record.
    crashed(Some(print));
    let db = Db::open(&path, &machine(), true).unwrap();
    assert_eq!(db.current().len(), 7);
    insert(&db, 9, None);
    drop(db);
    assert_eq!(read_acked(&acked_path(&path)).unwrap().unwrap().next, None);
    assert_eq!(
        Db::open(&path, &machine(), false).unwrap().current().len(),
        8
    );
}

#[test]
fn a_replacement_cut_short_opens_as_the_old_store_or_the_new_one_never_a_mix() {
    let replacing = |path: &Path| {
        record_acked(
            path,
            Acked {
                seq: 8,
                segment: 0,
                next: Some(Fingerprint::REPLACING),
            },
        )
        .unwrap()
    };
    // Killed before the replacement's rename: the old snapshot and its log, whole.
    let (dir, _) = logged();
    let path = dir.path().join("s.nfs");
    replacing(&path);
    assert_eq!(
        Db::open(&path, &machine(), false).unwrap().current().len(),
        11
    );
    // Killed after it, before the new log: the replacement, the old log's records not
    // replayed onto it.
    snapshot::save(&store_with(5), &path).unwrap();
    assert_eq!(
        Db::open(&path, &machine(), false).unwrap().current().len(),
        5
    );
    let db = Db::open(&path, &machine(), true).unwrap();
    assert_eq!(db.current().len(), 5);
    insert(&db, 70, None);
    drop(db);
    assert_eq!(
        Db::open(&path, &machine(), false).unwrap().current().len(),
        6
    );
    // `Db::replace` itself leaves the new store and a log that follows it.
    Db::replace(&path, &store_with(2)).unwrap();
    assert_eq!(
        Db::open(&path, &machine(), false).unwrap().current().len(),
        2
    );
    assert_eq!(read_acked(&acked_path(&path)).unwrap().unwrap().next, None);
}
