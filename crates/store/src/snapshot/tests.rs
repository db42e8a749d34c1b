//! Saving and opening snapshots of every format: round trips, damage, refusals, a full disk.

use super::whole::Sum;
use super::*;
use crate::dict::Dict;
use crate::store::{Permutation, DEFAULT_GRAPH};
use crate::term::Id;
use crate::term::TermRef;
use proptest::prelude::*;

/// A folder of the test's own, removed when dropped.
fn dir(test: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("nearflow-snapshot-{test}-"))
        .tempdir()
        .unwrap()
}

/// A store of `n` distinct quads over seven terms of a dictionary of nine, every third in
/// one of two named graphs.
fn store(machine: &Machine, n: usize) -> Store {
    let mut d = Dict::new();
    let ids: Vec<Id> = (0..9)
        .map(|i| d.intern(TermRef::Iri(&format!("http://t/{i}"))).unwrap())
        .collect();
    let graphs = [DEFAULT_GRAPH, ids[7], ids[8]];
    let quads = (0..n).map(|i| {
        [
            ids[i % 7],
            ids[(i / 7) % 3],
            ids[(i / 21) % 7],
            graphs[(i / 147) % 3],
        ]
    });
    Store::build(machine, d, quads.collect()).unwrap()
}

/// Writes format 2 (the format of earlier builds, still read).
fn save2(s: &Store, f: &Path) {
    save_capped(s, f, u64::MAX, &whole::Whole).unwrap();
}

fn all(s: &Store) -> Vec<crate::store::Quad> {
    let mut v = s.quads();
    v.sort();
    v
}

/// A snapshot written with one partition per NUMA node, with odd and
/// even row counts per partition, opens on machines of one, two and four nodes.
#[test]
fn a_snapshot_from_several_nodes_opens_anywhere() {
    let tmp = dir("nodes");
    let d = tmp.path();
    let machines = [
        nearflow_topo::from_synthetic("pack:2 [numa] core:1 pu:1").unwrap(),
        nearflow_topo::from_synthetic("pack:4 [numa] core:1 pu:1").unwrap(),
        nearflow_topo::from_synthetic("core:2 pu:1").unwrap(),
    ];
    for n in [0, 1, 2, 3, 5, 7, 63, 64, 65, 150, 300, 441] {
        for (i, m) in machines.iter().enumerate() {
            let s = store(m, n);
            let f = d.join(format!("s{n}-{i}.nfs"));
            for format in [
                &packed::Packed::CODED as &dyn Format,
                &packed::Packed::UNCODED,
                &mapped::Mapped,
                &whole::Whole,
            ] {
                save_capped(&s, &f, u64::MAX, format).unwrap();
                for other in &machines {
                    let o = open(&f, other).unwrap_or_else(|e| panic!("{n} triples: {e}"));
                    assert_eq!(all(&o), all(&s), "{n} triples, written on machine {i}");
                    assert_eq!(o.stats().triples, s.stats().triples);
                    assert_eq!(o.stats().per_predicate, s.stats().per_predicate);
                }
            }
        }
    }
}

/// Rewrites the checksum of a snapshot's bytes (format 2) after a test changed them on
/// purpose.
fn reseal(bytes: &mut [u8]) {
    let n = |i: usize| u64::from_le_bytes(bytes[8 + 8 * i..16 + 8 * i].try_into().unwrap());
    let (terms, arena, quads, graphs) =
        (n(0) as usize, n(1) as usize, n(2) as usize, n(3) as usize);
    let mut sections = vec![40, arena, terms * 8, graphs * 16];
    sections.extend([quads * 4; 9]);
    let mut sum = Sum::new();
    let mut at = 0;
    for len in sections {
        sum.add(&bytes[at..at + len]);
        sum.end();
        at += len;
    }
    bytes[at..at + 8].copy_from_slice(&sum.value.to_le_bytes());
}

/// A snapshot whose checksum holds but whose POS disagrees with SPO is
/// refused, saying so.
#[test]
fn permutations_that_disagree_are_refused() {
    let tmp = dir("disagree");
    let d = tmp.path();
    let m = nearflow_topo::from_synthetic("core:1 pu:1").unwrap();
    let s = store(&m, 30);
    let f = d.join("s.nfs");
    save2(&s, &f);
    let mut bytes = std::fs::read(&f).unwrap();
    let mut copy = bytes.clone();
    reseal(&mut copy);
    assert_eq!(copy, bytes, "reseal recomputes the same checksum");
    // POS's last row's subject (its third column), raised to the largest id: still sorted,
    // still in range, but no longer a triple SPO holds.
    let n = |i: usize| u64::from_le_bytes(bytes[8 + 8 * i..16 + 8 * i].try_into().unwrap());
    let (terms, arena, t, g) = (n(0) as usize, n(1) as usize, n(2) as usize, n(3) as usize);
    assert_eq!(g, 1, "one graph: the default");
    let pos_s = 40 + arena + terms * 8 + g * 16 + 3 * t * 4 + 2 * t * 4;
    let last = pos_s + (t - 1) * 4;
    let old = u32::from_le_bytes(bytes[last..last + 4].try_into().unwrap());
    assert!(old < terms as u32, "the test needs room to raise it");
    bytes[last..last + 4].copy_from_slice(&(terms as u32).to_le_bytes());
    reseal(&mut bytes);
    std::fs::write(&f, &bytes).unwrap();
    let e = open(&f, &m).unwrap_err().to_string();
    assert!(e.contains("SPO and POS do not hold the same quads"), "{e}");
}

/// A write that fails part way (a full disk) leaves the previous snapshot
/// whole and no temporary file; a good write replaces it.
#[test]
fn a_failed_write_keeps_the_previous_snapshot() {
    let tmp = dir("atomic");
    let d = tmp.path();
    let m = nearflow_topo::from_synthetic("core:1 pu:1").unwrap();
    let f = d.join("s.nfs");
    let small = store(&m, 5);
    save(&small, &f).unwrap();
    let before = std::fs::read(&f).unwrap();
    let big = store(&m, 100);
    for room in [0, 10, 100, 1000] {
        for format in [
            &packed::Packed::CODED as &dyn Format,
            &mapped::Mapped,
            &whole::Whole,
        ] {
            let e = save_capped(&big, &f, room, format).unwrap_err().to_string();
            assert!(e.contains("no space left"), "{e}");
            assert_eq!(std::fs::read(&f).unwrap(), before, "room {room}");
        }
        let names: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["s.nfs"], "room {room}: no temporary file is left");
    }
    save(&big, &f).unwrap();
    assert_eq!(all(&open(&f, &m).unwrap()), all(&big));
    let e = save(&big, &d.join("no-such-dir/s.nfs"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no-such-dir"), "{e}");
}

/// A snapshot of format 1 (before named graphs: no graph table) opens, its triples in the
/// default graph; a graph table out of order is refused.
#[test]
fn format_one_opens_as_the_default_graph_and_a_bad_graph_table_is_refused() {
    let tmp = dir("format1");
    let d = tmp.path();
    let m = nearflow_topo::from_synthetic("core:1 pu:1").unwrap();
    // 100 quads: all in the default graph (the first 147 are).
    let s = store(&m, 100);
    assert_eq!(s.graphs(), [(DEFAULT_GRAPH, 0)]);
    let f = d.join("s.nfs");
    save2(&s, &f);
    let v2 = std::fs::read(&f).unwrap();
    // Format 1: version 1, three counts, no graph table; the rest as it is.
    let n = |i: usize| u64::from_le_bytes(v2[8 + 8 * i..16 + 8 * i].try_into().unwrap());
    let (terms, arena) = (n(0) as usize, n(1) as usize);
    let mut v1 = v2[..32].to_vec();
    v1[6..8].copy_from_slice(&1u16.to_le_bytes());
    let body = 40 + arena + terms * 8;
    v1.extend_from_slice(&v2[40..body]);
    v1.extend_from_slice(&v2[body + 16..v2.len() - 8]);
    let mut sum = Sum::new();
    let mut at = 0;
    let mut sections = vec![32, arena, terms * 8];
    sections.extend([100 * 4; 9]);
    for len in sections {
        sum.add(&v1[at..at + len]);
        sum.end();
        at += len;
    }
    v1.extend_from_slice(&sum.value.to_le_bytes());
    std::fs::write(&f, &v1).unwrap();
    let o = open(&f, &m).unwrap();
    assert_eq!(all(&o), all(&s));
    // Two named graphs, their table's entries swapped.
    let s = store(&m, 441);
    assert_eq!(s.graphs().len(), 3);
    save2(&s, &f);
    assert_eq!(all(&open(&f, &m).unwrap()), all(&s));
    let mut bytes = std::fs::read(&f).unwrap();
    let n = |i: usize| u64::from_le_bytes(bytes[8 + 8 * i..16 + 8 * i].try_into().unwrap());
    let table = 40 + n(1) as usize + n(0) as usize * 8;
    let (a, b) = (table + 16, table + 32);
    let first: Vec<u8> = bytes[a..a + 8].to_vec();
    let second: Vec<u8> = bytes[b..b + 8].to_vec();
    bytes[a..a + 8].copy_from_slice(&second);
    bytes[b..b + 8].copy_from_slice(&first);
    reseal(&mut bytes);
    std::fs::write(&f, &bytes).unwrap();
    let e = open(&f, &m).unwrap_err().to_string();
    assert!(e.contains("the graph table is bad at entry 2"), "{e}");
}

/// Writes format 3 (the mapped format of earlier builds, still read).
fn save3(s: &Store, f: &Path) {
    save_capped(s, f, u64::MAX, &mapped::Mapped).unwrap();
}

fn save4(s: &Store, f: &Path) {
    save_capped(s, f, u64::MAX, &packed::Packed::UNCODED).unwrap();
}

/// Formats 5, 4 and 3 open by mapping: the same quads, statistics and terms; lookups by binary
/// search; nothing of the indexes or terms copied into memory; the checks find nothing wrong.
#[test]
fn a_mapped_snapshot_reads_as_the_store_it_was() {
    let tmp = dir("mapped");
    let d = tmp.path();
    let m = nearflow_topo::from_synthetic("pack:2 [numa] core:1 pu:1").unwrap();
    let s = store(&m, 441);
    let f = d.join("s.nfs");
    for write in [|s: &Store, f: &Path| save(s, f).unwrap(), save4, save3] {
        write(&s, &f);
        let o = open(&f, &m).unwrap();
        assert_eq!(all(&o), all(&s));
        assert_eq!(o.graphs(), s.graphs());
        assert!(o.dict().is_mapped());
        assert_eq!(o.dict().len(), s.dict().len());
        for id in 1..=s.dict().len() as Id {
            assert_eq!(o.dict().term(id), s.dict().term(id));
            assert_eq!(o.dict().lookup(s.dict().term(id).as_ref()), Some(id));
        }
        assert_eq!(o.dict().lookup(TermRef::Iri("http://t/none")), None);
        assert!(o.mapped_bytes() > 441, "{}", o.mapped_bytes());
        let columns: usize = Permutation::ALL
            .iter()
            .flat_map(|&p| o.perm(p).partitions().iter())
            .map(|p| p.data.heap_bytes())
            .sum();
        assert_eq!(columns, 0, "the columns are read in place");
        assert_eq!(o.health().unwrap().check_all(), None);
        // An update over it, merged, written (a dictionary of two levels) and mapped again.
        let mut e = o.edit();
        let q = [
            e.intern(TermRef::Iri("http://t/new")).unwrap(),
            1,
            2,
            DEFAULT_GRAPH,
        ];
        e.insert(q);
        let v = e.finish();
        let merged = v.merged().unwrap();
        write(&merged, &f);
        let again = open(&f, &m).unwrap();
        assert_eq!(all(&again), all(&v));
        assert_eq!(
            again.dict().lookup(TermRef::Iri("http://t/new")),
            Some(q[0])
        );
    }
}

/// Terms in key order with long shared prefixes (as `nearflow load` gives them), then a few out
/// of order (as an update adds them): format 5 front-codes them, reads every one back as written,
/// finds every one by lookup and none that is absent, gives the same run of ordered simple
/// literals as format 4, and takes less room.
#[test]
fn front_coded_terms_read_and_look_up_as_written() {
    let tmp = dir("coded");
    let m = nearflow_topo::from_synthetic("core:1 pu:1").unwrap();
    let mut terms: Vec<crate::term::Term> = Vec::new();
    for i in 0..3000 {
        terms.push(crate::term::Term::Iri(format!(
            "http://example.org/publications/Journal{}/{}/Article{i}",
            i % 7,
            1940 + i % 50
        )));
    }
    for i in 0..1000 {
        terms.push(crate::term::Term::Blank(format!("b{i}")));
    }
    for i in 0..2000 {
        terms.push(TermRef::string(&format!("Erdős {} the {}th", i % 11, i)).into());
        terms.push(crate::term::Term::Literal {
            value: format!("{i}"),
            datatype: "http://www.w3.org/2001/XMLSchema#integer".into(),
            lang: None,
        });
    }
    terms.push(crate::term::Term::Literal {
        value: "été".into(),
        datatype: crate::term::RDF_LANG_STRING.into(),
        lang: Some("fr".into()),
    });
    let key = |t: &crate::term::Term| {
        let mut k = String::new();
        t.as_ref().encode(&mut k);
        k
    };
    terms.sort_by_key(key);
    terms.dedup();
    let ordered = terms.len();
    // Out of order after them, the first mid-block.
    for t in [
        "http://a/late",
        "http://z/late",
        "http://example.org/publications/late",
    ] {
        terms.push(crate::term::Term::Iri(t.into()));
    }
    let mut d = Dict::new();
    for t in &terms {
        d.intern(t.as_ref()).unwrap();
    }
    let p = d.lookup(terms[0].as_ref()).unwrap();
    let quads: Vec<_> = (1..=terms.len() as Id)
        .map(|o| [1, p, o, DEFAULT_GRAPH])
        .collect();
    let s = Store::build(&m, d, quads).unwrap();
    let (f5, f4) = (tmp.path().join("s5.nfs"), tmp.path().join("s4.nfs"));
    save(&s, &f5).unwrap();
    save4(&s, &f4);
    let (o5, o4) = (open(&f5, &m).unwrap(), open(&f4, &m).unwrap());
    assert_eq!(o5.health().unwrap().check_all(), None);
    assert_eq!(all(&o5), all(&s));
    let mut buf = String::new();
    for (i, t) in terms.iter().enumerate() {
        let id = i as Id + 1;
        assert_eq!(o5.dict().term(id), t.as_ref(), "term {id}");
        assert_eq!(o5.dict().term_into(id, &mut buf), t.as_ref(), "term {id}");
        assert_eq!(o5.dict().lookup(t.as_ref()), Some(id), "{t:?}");
        // Keys that lie between two held ones, before the first and after the last.
        let mut k = key(t);
        k.push('\u{1}');
        let between = TermRef::Iri(&k[1..]);
        if o4.dict().lookup(between).is_none() {
            assert_eq!(o5.dict().lookup(between), None, "{k:?}");
        }
    }
    assert_eq!(o5.dict().lookup(TermRef::Iri("")), None);
    assert_eq!(
        o5.dict()
            .lookup(TermRef::Iri("http://example.org/publications/J")),
        None
    );
    assert_eq!(o5.dict().lookup(TermRef::Blank("zzz")), None);
    let strings = o5.dict().ordered_strings();
    assert_eq!(strings, o4.dict().ordered_strings());
    assert!(
        strings.len() >= 2000 && (strings.end as usize) <= ordered + 1,
        "{strings:?}"
    );
    let (n5, n4) = (
        std::fs::metadata(&f5).unwrap().len(),
        std::fs::metadata(&f4).unwrap().len(),
    );
    assert!(n5 < n4, "format 5 {n5} bytes, format 4 {n4}");
}

/// A store of `n` quads over `n / 3` subjects, each with three objects of its own.
fn wide(machine: &Machine, n: usize) -> Store {
    let mut d = Dict::new();
    let p = d.intern(TermRef::Iri("http://t/p")).unwrap();
    let mut quads = Vec::with_capacity(n);
    for i in 0..n / 3 {
        let s = d.intern(TermRef::Iri(&format!("http://t/s{i}"))).unwrap();
        for k in 0..3 {
            let o = d.intern(TermRef::string(&format!("{i}-{k}"))).unwrap();
            quads.push([s, p, o, DEFAULT_GRAPH]);
        }
    }
    Store::build(machine, d, quads).unwrap()
}

/// Format 4 checks what is read, when it is read: a lookup of one subject checks a few
/// chunks and finds nothing wrong with a file damaged elsewhere; reading the damaged rows or
/// terms finds it, naming them, and so does the whole check. Damage to the header or a small
/// section is refused at open.
#[test]
fn damage_to_a_packed_snapshot_is_found_where_it_is_read() {
    let tmp = dir("packed-damage");
    let d = tmp.path();
    let m = nearflow_topo::from_synthetic("core:1 pu:1").unwrap();
    let s = wide(&m, 60_000);
    let f = d.join("s.nfs");
    for format in [
        &packed::Packed::CODED as &dyn Format,
        &packed::Packed::UNCODED,
    ] {
        save_capped(&s, &f, u64::MAX, format).unwrap();
        packed_damage(&f, &m);
    }
}

fn packed_damage(f: &Path, m: &Machine) {
    let (f, m) = (f.to_owned(), m.clone());
    let good = std::fs::read(&f).unwrap();
    let section = |i: usize| {
        let at = 56 + 24 * i;
        let w = |k: usize| u64::from_le_bytes(good[k..k + 8].try_into().unwrap()) as usize;
        (w(at), w(at + 8))
    };
    let damaged = |at: usize| {
        let mut b = good.clone();
        b[at] ^= 0x5a;
        std::fs::write(&f, &b).unwrap();
        open(&f, &m)
    };
    let e = damaged(20).unwrap_err().to_string();
    assert!(e.contains("header is damaged"), "{e}");
    let (graphs, _) = section(5);
    let e = damaged(graphs + 3).unwrap_err().to_string();
    assert!(e.contains("'graph table' is damaged"), "{e}");
    let first = TermRef::Iri("http://t/s0");
    for (i, name) in [
        (7, "the SPO index"),
        (0, "the terms"),
        (1, "the terms"),
        (14, "the OSP index"),
        (3, "the term index"),
    ] {
        let (off, len) = section(i);
        // Nothing read from the damaged store is written: the write that reads the damage
        // fails, naming it, and leaves no file.
        let copy = f.with_extension("copy");
        let o = damaged(off + len * 3 / 4).unwrap();
        match save(&o, &copy) {
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains("is damaged")
                        && e.contains(name)
                        && e.contains("nothing was written"),
                    "{name}: {e}"
                );
                assert!(!copy.exists(), "{name}: a copy of damaged data was kept");
            }
            Ok(()) => {
                // A section the write does not read (the term index is made again): the copy
                // is whole and holds exactly the data.
                let c = open(&copy, &m).unwrap();
                assert_eq!(c.health().unwrap().check_all(), None, "{name}");
                std::fs::write(&f, &good).unwrap();
                let g = open(&f, &m).unwrap();
                assert_eq!(c.quads(), g.quads(), "{name}");
                for id in 1..=g.dict().len() as Id {
                    assert_eq!(c.dict().term(id), g.dict().term(id), "{name}");
                }
                std::fs::remove_file(&copy).unwrap();
            }
        }
        let o = damaged(off + len * 3 / 4).unwrap();
        // The first subject's rows and terms lie before the damage.
        let s0 = o.dict().lookup(first).expect("the first subject");
        assert_eq!(o.count([Some(s0), None, None]), 3);
        assert_eq!(o.damage(), None, "{name}: not read yet");
        let said = o.health().unwrap().check_all().map(str::to_owned);
        assert!(
            said.as_deref().is_some_and(|x| x.contains(name)),
            "{name}: {said:?}"
        );
        assert_eq!(o.damage(), said.as_deref());
        // Reading the damaged store does not panic.
        let _ = o.quads();
        for id in 1..=o.dict().len() as Id {
            let _ = o.dict().term(id);
        }
    }
    std::fs::write(&f, &good[..good.len() - 5000]).unwrap();
    let e = open(&f, &m).unwrap_err().to_string();
    assert!(e.contains("outside the file"), "{e}");
}

/// Damage to a format-3 snapshot: in the header or a small section, refused at open naming
/// it; in a column or the terms, found by the background check, naming the section, and
/// reading it meanwhile does not panic.
#[test]
fn damage_to_a_mapped_snapshot_names_its_section() {
    let tmp = dir("mapped-damage");
    let d = tmp.path();
    let m = nearflow_topo::from_synthetic("core:1 pu:1").unwrap();
    let s = store(&m, 300);
    let f = d.join("s.nfs");
    save3(&s, &f);
    let good = std::fs::read(&f).unwrap();
    let section = |i: usize| {
        let at = 48 + 24 * i;
        let w = |k: usize| u64::from_le_bytes(good[k..k + 8].try_into().unwrap()) as usize;
        (w(at), w(at + 8))
    };
    let damaged = |at: usize| {
        let mut b = good.clone();
        b[at] ^= 0x5a;
        std::fs::write(&f, &b).unwrap();
        open(&f, &m)
    };
    let e = damaged(20).unwrap_err().to_string();
    assert!(e.contains("header is damaged"), "{e}");
    let (graphs, _) = section(3);
    let e = damaged(graphs + 3).unwrap_err().to_string();
    assert!(e.contains("'graph table' is damaged"), "{e}");
    for (i, name) in [(6, "SPO column 2"), (0, "term keys"), (12, "OSP column 2")] {
        let (off, len) = section(i);
        let o = damaged(off + len / 2).unwrap();
        let said = o.health().unwrap().check_all().map(str::to_owned);
        assert!(
            said.as_deref().is_some_and(|x| x.contains(name)),
            "{name}: {said:?}"
        );
        assert_eq!(o.damage(), said.as_deref());
        // Reading the damaged store does not panic.
        let _ = o.quads();
        for id in 1..=o.dict().len() as Id {
            let _ = o.dict().term(id);
        }
    }
    std::fs::write(&f, &good[..good.len() - 5000]).unwrap();
    let e = open(&f, &m).unwrap_err().to_string();
    assert!(e.contains("outside the file"), "{e}");
}

proptest! {
    /// The checksum of a section does not depend on how it is cut into pieces.
    #[test]
    fn a_section_sums_alike_in_any_pieces(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        cuts in proptest::collection::vec(0usize..200, 0..8),
    ) {
        let mut whole = Sum::new();
        whole.add(&bytes);
        whole.end();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
        cuts.sort_unstable();
        let mut pieces = Sum::new();
        let mut at = 0;
        for c in cuts.into_iter().chain([bytes.len()]) {
            pieces.add(&bytes[at..c]);
            at = c;
        }
        pieces.end();
        prop_assert_eq!(whole.value, pieces.value);
    }
}
