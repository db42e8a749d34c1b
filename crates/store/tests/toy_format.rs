//! A snapshot format added from outside the store's own modules, in this one file: a format
//! is a type implementing [`Format`] — its version, a writer that takes a store as sorted
//! streams ([`Sink`]: the terms in id order, each permutation's rows in key order, the graph
//! table and statistics), and how it opens a file into a store that reads the format's own
//! rows by key prefix ([`PermutationRows`], [`Store::of_rows`]). Saving it with [`save_as`]
//! makes the write atomic and merges a version's delta into the streams; [`open_with`] finds
//! it by the version in the file's header.
//!
//! The toy writes the terms length-prefixed, then each permutation's rows as three ids, then
//! the graph table; it keeps the file in memory until it ends, as a toy may.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use nearflow_store::dict::Dict;
use nearflow_store::layout::{Permutation, PermutationRows, Stats};
use nearflow_store::snapshot::{
    self, Format, PushRow, PushTerm, Sink, SnapshotError, Spool, WriteSeek, MAGIC,
};
use nearflow_store::term::{Id, TermRef};
use nearflow_store::{Store, DEFAULT_GRAPH};
use nearflow_topo::Machine;

/// The toy's version number: one no format of the store's uses.
const TOY: u16 = 0x7e57;

struct Toy;

/// The toy's writer: the file's bytes, written out at the end.
struct ToySink<'a> {
    file: &'a mut dyn WriteSeek,
    bytes: Vec<u8>,
}

impl ToySink<'_> {
    fn u32(&mut self, x: u32) {
        self.bytes.extend_from_slice(&x.to_le_bytes());
    }

    fn u64(&mut self, x: u64) {
        self.bytes.extend_from_slice(&x.to_le_bytes());
    }

    /// A section whose count comes first: its room left, then filled in.
    fn counted(
        &mut self,
        items: impl FnOnce(&mut Self) -> std::io::Result<u64>,
    ) -> std::io::Result<()> {
        let at = self.bytes.len();
        self.u64(0);
        let n = items(self)?;
        self.bytes[at..at + 8].copy_from_slice(&n.to_le_bytes());
        Ok(())
    }
}

impl Sink for ToySink<'_> {
    fn terms(
        &mut self,
        _spool: &mut dyn Spool,
        fill: &mut dyn FnMut(PushTerm<'_>) -> std::io::Result<()>,
        _sort_rest: &mut dyn FnMut(usize) -> Vec<Id>,
    ) -> std::io::Result<()> {
        self.counted(|me| {
            let mut n = 0;
            fill(&mut |key| {
                me.u32(key.len() as u32);
                me.bytes.extend_from_slice(key.as_bytes());
                n += 1;
                Ok(())
            })?;
            Ok(n)
        })
    }

    fn rows(
        &mut self,
        _order: Permutation,
        fill: &mut dyn FnMut(PushRow<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.counted(|me| {
            let mut n = 0;
            fill(&mut |row| {
                row.into_iter().for_each(|id| me.u32(id));
                n += 1;
                Ok(())
            })?;
            Ok(n)
        })
    }

    fn finish(mut self: Box<Self>, graphs: &[(Id, usize)], _stats: &Stats) -> std::io::Result<()> {
        self.u64(graphs.len() as u64);
        for &(g, at) in graphs {
            self.u32(g);
            self.u64(at as u64);
        }
        self.file.write_all(&self.bytes)
    }
}

/// One permutation's rows as the toy holds them: a vector of keys, searched by the store
/// through the trait's default binary search.
#[derive(Debug)]
struct ToyRows(Vec<[Id; 3]>);

impl PermutationRows for ToyRows {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn row(&self, i: usize) -> [Id; 3] {
        self.0[i]
    }

    fn heap_bytes(&self) -> usize {
        self.0.capacity() * 12
    }
}

/// `error` at `path` as a snapshot error.
fn io(path: &Path) -> impl Fn(std::io::Error) -> SnapshotError + '_ {
    move |error| SnapshotError::Io {
        path: path.to_owned(),
        error,
    }
}

impl Format for Toy {
    fn version(&self) -> u16 {
        TOY
    }

    fn writes_deltas(&self) -> bool {
        true
    }

    fn sink<'a>(&self, file: &'a mut dyn WriteSeek) -> std::io::Result<Box<dyn Sink + 'a>> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&TOY.to_le_bytes());
        Ok(Box::new(ToySink { file, bytes }))
    }

    fn open(&self, path: &Path, machine: &Machine) -> Result<Store, SnapshotError> {
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(io(path))?;
        let invalid = |why: &str| SnapshotError::Invalid {
            path: path.to_owned(),
            why: why.to_owned(),
        };
        let mut at = 8;
        let mut take = |n: usize| -> Result<&[u8], SnapshotError> {
            let piece = bytes.get(at..at + n).ok_or_else(|| invalid("cut short"))?;
            at += n;
            Ok(piece)
        };
        let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
        let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        let mut dict = Dict::new();
        for id in 1..=u64_of(take(8)?) {
            let len = u32_of(take(4)?) as usize;
            let key = std::str::from_utf8(take(len)?).map_err(|_| invalid("not UTF-8"))?;
            let interned = dict.intern(TermRef::decode(key));
            if interned.map(u64::from).ok() != Some(id) {
                return Err(invalid("a term twice, or too many"));
            }
        }
        let mut rows: Vec<Arc<dyn PermutationRows>> = Vec::new();
        for _ in Permutation::ALL {
            let n = u64_of(take(8)?);
            let mut keys = Vec::new();
            for _ in 0..n {
                let row = take(12)?;
                keys.push([0, 4, 8].map(|i| u32_of(&row[i..i + 4])));
            }
            rows.push(Arc::new(ToyRows(keys)));
        }
        let mut graphs = Vec::new();
        for _ in 0..u64_of(take(8)?) {
            let g = u32_of(take(4)?);
            graphs.push((g, u64_of(take(8)?) as usize));
        }
        let rows = rows.try_into().expect("three permutations");
        Ok(Store::of_rows(machine, dict, rows, graphs, None)?)
    }
}

/// Every quad of `store` as its four terms in N-Triples, sorted.
fn terms_of(store: &Store) -> Vec<String> {
    let show = |id: Id| store.dict().term(id).to_string();
    let mut all: Vec<String> = (store.quads().into_iter())
        .map(|[s, p, o, g]| {
            let g = if g == DEFAULT_GRAPH {
                "default".into()
            } else {
                show(g)
            };
            format!("{} {} {} {g}", show(s), show(p), show(o))
        })
        .collect();
    all.sort();
    all
}

#[test]
fn a_format_of_ones_own_saves_and_opens_a_store() {
    let machine = nearflow_topo::presets::build("nehalem-2x4").expect("a preset");
    let mut dict = Dict::new();
    let mut id = |t: TermRef<'_>| dict.intern(t).expect("room for a term");
    let (a, b, knows) = (
        id(TermRef::Iri("http://ex/a")),
        id(TermRef::Iri("http://ex/b")),
        id(TermRef::Iri("http://ex/knows")),
    );
    let note = id(TermRef::Literal {
        value: "two\nlines, \"quoted\"",
        datatype: "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString",
        lang: Some("en"),
    });
    let (blank, graph) = (id(TermRef::Blank("x")), id(TermRef::Iri("http://ex/g")));
    let quads = vec![
        [a, knows, b, DEFAULT_GRAPH],
        [b, knows, blank, DEFAULT_GRAPH],
        [a, knows, note, graph],
        [blank, knows, a, graph],
    ];
    let store = Store::build(&machine, dict, quads).expect("a store");

    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("toy.store");
    snapshot::save_as(&Toy, &store, &path).expect("the toy writes the store");
    let head = std::fs::read(&path).expect("the file")[..8].to_vec();
    assert_eq!(&head[..6], MAGIC);
    assert_eq!(u16::from_le_bytes([head[6], head[7]]), TOY);

    let opened = snapshot::open_with(&[&Toy], &path, &machine).expect("the toy opens it");
    assert_eq!(opened.len(), store.len());
    assert_eq!(terms_of(&opened), terms_of(&store));
    let knows_there = opened
        .id_of(TermRef::Iri("http://ex/knows"))
        .expect("a term");
    assert_eq!(
        opened.count([None, Some(knows_there), None]),
        2,
        "the default graph's"
    );

    // Every shape of pattern, in every graph, reads the toy's rows by key prefix (each shape
    // its own permutation and prefix length) and counts what the built store counts.
    for [s, p, o, g] in store.quads() {
        for mask in 0..8u8 {
            let pick = |bit: u8, id: Id| (mask & bit != 0).then_some(id);
            let pattern = [pick(1, s), pick(2, p), pick(4, o)];
            assert_eq!(
                opened.count_in(g, pattern),
                store.count_in(g, pattern),
                "{pattern:?} in graph {g}"
            );
            assert!(
                opened.count_in(g, pattern) >= 1,
                "{pattern:?} matches its own quad"
            );
        }
    }
    let stats = opened.stats();
    assert_eq!(stats.per_predicate[&knows_there].triples, 4);
    assert_eq!(stats.subjects, store.stats().subjects);
    assert_eq!(stats.objects, store.stats().objects);

    // A version made by an update streams into the toy with its delta merged in.
    let mut edit = store.edit();
    let c = edit.intern(TermRef::Iri("http://ex/c")).expect("room");
    edit.insert([c, knows, a, DEFAULT_GRAPH]);
    edit.remove([a, knows, b, DEFAULT_GRAPH]);
    let changed = edit.finish();
    assert!(!changed.is_flat(), "the version has a delta");
    snapshot::save_as(&Toy, &changed, &path).expect("the toy writes the version");
    let reopened = snapshot::open_with(&[&Toy], &path, &machine).expect("the toy opens it");
    assert_eq!(terms_of(&reopened), terms_of(&changed));
    assert_eq!(reopened.len(), 4);

    // The store's own formats do not know the toy's version: the error says what was found.
    let refused = snapshot::open(&path, &machine).expect_err("no format of the store reads it");
    assert!(
        refused
            .to_string()
            .contains(&format!("format version {TOY}")),
        "{refused}"
    );
}
