//! A snapshot format added from outside the store's own modules, in this one file: a format
//! is a type implementing [`Format`] (its version, how it writes a store, how it opens one);
//! saving it with [`save_as`] makes the write atomic, and [`open_with`] finds it by the version
//! in the file's header. The toy writes every quad with its terms in full, length-prefixed.

use std::io::Read;
use std::path::Path;

use nearflow_store::dict::Dict;
use nearflow_store::snapshot::{self, Format, SnapshotError, WriteSeek, MAGIC};
use nearflow_store::term::{Id, TermRef};
use nearflow_store::{Store, DEFAULT_GRAPH};
use nearflow_topo::Machine;

/// The toy's version number: one no format of the store's uses.
const TOY: u16 = 0x7e57;

struct Toy;

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

    fn write(
        &self,
        store: &Store,
        file: &mut dyn WriteSeek,
        path: &Path,
    ) -> Result<(), SnapshotError> {
        let dict = store.dict();
        let quads = store.quads();
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&TOY.to_le_bytes());
        out.extend_from_slice(&(quads.len() as u64).to_le_bytes());
        for [s, p, o, g] in quads {
            for id in [s, p, o, g] {
                let key = match id {
                    DEFAULT_GRAPH if id == g => String::new(),
                    id => dict.key_of(id).into_owned(),
                };
                out.extend_from_slice(&(key.len() as u32).to_le_bytes());
                out.extend_from_slice(key.as_bytes());
            }
        }
        file.write_all(&out).map_err(io(path))
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
        let count = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
        let mut dict = Dict::new();
        let mut quads = Vec::new();
        for _ in 0..count {
            let mut quad = [DEFAULT_GRAPH; 4];
            for slot in &mut quad {
                let len = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes")) as usize;
                if len > 0 {
                    let key = std::str::from_utf8(take(len)?).map_err(|_| invalid("not UTF-8"))?;
                    *slot = (dict.intern(TermRef::decode(key)))
                        .map_err(|_| invalid("too many terms"))?;
                }
            }
            quads.push(quad);
        }
        Ok(Store::build(machine, dict, quads)?)
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

    // The store's own formats do not know the toy's version: the error says what was found.
    let refused = snapshot::open(&path, &machine).expect_err("no format of the store reads it");
    assert!(
        refused
            .to_string()
            .contains(&format!("format version {TOY}")),
        "{refused}"
    );
}
