//! Formats 1 and 2: read whole and checked (the snapshots of earlier builds); format 2 is also
//! written, for the tests of its reader.
//!
//! Layout of format 2, all integers little-endian:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `NFRDF\0` and format version (u16) |
//! | 8 × 4 | terms, arena bytes, quads, graphs |
//! | arena | the terms' keys, one after another (`term.rs`) |
//! | 8 × terms | each term's end offset |
//! | 16 × graphs | each graph's id (0: the default graph) and the row its run starts at |
//! | 4 × quads × 9 | SPO, POS, OSP, each as three key columns, graph by graph |
//! | 8 | a checksum of everything before it |
//!
//! Format 1 (before named graphs) has no graph count and no graph table: its triples open as the
//! default graph.
//!
//! The checksum is FNV-1a over 8-byte little-endian words, section by section: the header, the
//! arena, the end offsets, the graph table and each of the nine key columns, each section's
//! last word padded with zeros. It depends only on the bytes of each section, not on how a
//! writer cuts them: a column is written partition by partition (one per NUMA node), read
//! whole, and both give one sum.
//!
//! A short file, a bad checksum, an id out of range, a graph table out of order, a permutation
//! out of order within a graph, or three permutations that do not hold the same quads is an
//! error that names the file; nothing is half-opened. The permutations are compared by an
//! order-independent hash of their quads (every row read once, in the pass that checks the
//! order), so an SPO that disagrees with POS is refused instead of answering differently by
//! access path.
//!

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use nearflow_topo::Machine;

use crate::dict::Dict;
use crate::store::{Permutation, Store, DEFAULT_GRAPH};
use crate::term::Id;

use super::common::{graph_table, SnapshotError, MAGIC};
use super::format::{Format, WriteSeek};

const VERSION: u16 = 2;

/// A running checksum (FNV-1a over 8-byte words; enough to catch a damaged file, not a
/// malicious one). Bytes are taken as they come and folded a word at a time; [`Sum::end`]
/// closes a section, padding its last word, so a section summed in pieces of any length gives
/// the same value as the section summed whole.
pub(super) struct Sum {
    pub(super) value: u64,
    pending: [u8; 8],
    filled: usize,
}

impl Sum {
    pub(super) fn new() -> Self {
        Sum {
            value: 0xcbf2_9ce4_8422_2325,
            pending: [0; 8],
            filled: 0,
        }
    }

    fn word(&mut self, w: [u8; 8]) {
        self.value = (self.value ^ u64::from_le_bytes(w)).wrapping_mul(0x0000_0100_0000_01b3);
    }

    pub(super) fn add(&mut self, mut bytes: &[u8]) {
        if self.filled > 0 {
            let k = (8 - self.filled).min(bytes.len());
            self.pending[self.filled..self.filled + k].copy_from_slice(&bytes[..k]);
            self.filled += k;
            bytes = &bytes[k..];
            if self.filled < 8 {
                return;
            }
            let w = self.pending;
            self.word(w);
            self.filled = 0;
        }
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.word(c.try_into().expect("8 bytes"));
        }
        let rest = chunks.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.filled = rest.len();
    }

    /// Ends a section: its last, partial word is padded with zeros.
    pub(super) fn end(&mut self) {
        if self.filled > 0 {
            let mut w = [0u8; 8];
            w[..self.filled].copy_from_slice(&self.pending[..self.filled]);
            self.word(w);
            self.filled = 0;
        }
    }
}

/// An order-independent hash of a set of quads (a sum of a mix of each), so three
/// permutations can be compared in one pass each. Distinct rows are guaranteed by the order
/// check, so a sum of a good 64-bit mix is as strong as comparing the sets for damage; a file
/// crafted to collide is not the threat a checksum guards against.
fn quad_hash(t: [Id; 3], g: Id) -> u64 {
    let mut x = (u64::from(t[0]) << 32 | u64::from(t[1]))
        ^ u64::from(t[2]).rotate_left(17)
        ^ u64::from(g).rotate_left(41);
    // splitmix64's finaliser.
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

struct W<'a> {
    out: BufWriter<&'a mut dyn WriteSeek>,
    sum: Sum,
    path: &'a Path,
}

impl W<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        self.sum.add(bytes);
        self.out
            .write_all(bytes)
            .map_err(|source| SnapshotError::Io {
                path: self.path.to_owned(),
                error: source,
            })
    }

    fn u32s(&mut self, xs: &[Id]) -> Result<(), SnapshotError> {
        let mut buf = Vec::with_capacity(1 << 16);
        for chunk in xs.chunks(1 << 14) {
            buf.clear();
            for x in chunk {
                buf.extend_from_slice(&x.to_le_bytes());
            }
            self.put(&buf)?;
        }
        Ok(())
    }
}

/// Formats 1 and 2 as a [`Format`] (format 2 written, for the tests of its reader).
pub struct Whole;

impl Format for Whole {
    fn version(&self) -> u16 {
        VERSION
    }

    fn reads(&self, version: u16) -> bool {
        version == VERSION || version == 1
    }

    fn write(
        &self,
        store: &Store,
        file: &mut dyn WriteSeek,
        path: &Path,
    ) -> Result<(), SnapshotError> {
        write_to(store, file, path)
    }

    fn open(&self, path: &Path, machine: &Machine) -> Result<Store, SnapshotError> {
        open(path, machine)
    }
}

fn write_to(store: &Store, file: &mut dyn WriteSeek, path: &Path) -> Result<(), SnapshotError> {
    let io = |source| SnapshotError::Io {
        path: path.to_owned(),
        error: source,
    };
    let mut w = W {
        out: BufWriter::with_capacity(1 << 20, file),
        sum: Sum::new(),
        path,
    };
    let (bytes, ends) = store.dict().parts();
    let mut head = Vec::new();
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    let graphs = store.graphs();
    for n in [
        ends.len() as u64,
        bytes.len() as u64,
        store.len(),
        graphs.len() as u64,
    ] {
        head.extend_from_slice(&n.to_le_bytes());
    }
    w.put(&head)?;
    w.sum.end();
    w.put(bytes)?;
    w.sum.end();
    let mut e = Vec::with_capacity(ends.len() * 8);
    for x in ends {
        e.extend_from_slice(&x.to_le_bytes());
    }
    w.put(&e)?;
    w.sum.end();
    let mut t = Vec::with_capacity(graphs.len() * 16);
    for &(g, start) in graphs {
        t.extend_from_slice(&u64::from(g).to_le_bytes());
        t.extend_from_slice(&(start as u64).to_le_bytes());
    }
    w.put(&t)?;
    w.sum.end();
    for order in Permutation::ALL {
        for c in 0..3 {
            for part in store.perm(order).partitions() {
                w.u32s(&part.data.column(c))?;
            }
            w.sum.end();
        }
    }
    let sum = w.sum.value;
    w.out.write_all(&sum.to_le_bytes()).map_err(io)?;
    w.out.flush().map_err(io)?;
    Ok(())
}

struct R<'a> {
    inp: BufReader<File>,
    sum: Sum,
    path: &'a Path,
}

impl R<'_> {
    fn take(&mut self, n: usize) -> Result<Vec<u8>, SnapshotError> {
        let mut v = Vec::new();
        v.try_reserve_exact(n)
            .map_err(|_| self.invalid(format!("a section of {n} bytes does not fit in memory")))?;
        v.resize(n, 0);
        self.inp.read_exact(&mut v).map_err(|e| self.short(e))?;
        self.sum.add(&v);
        self.sum.end();
        Ok(v)
    }

    fn short(&self, e: std::io::Error) -> SnapshotError {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            self.invalid("the file is truncated".into())
        } else {
            SnapshotError::Io {
                path: self.path.to_owned(),
                error: e,
            }
        }
    }

    fn invalid(&self, why: String) -> SnapshotError {
        SnapshotError::Invalid {
            path: self.path.to_owned(),
            why,
        }
    }

    fn u32s(&mut self, n: usize) -> Result<Vec<Id>, SnapshotError> {
        let bytes = self.take(
            n.checked_mul(4)
                .ok_or_else(|| self.invalid("sizes overflow".into()))?,
        )?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

/// Opens the snapshot at `path`, for `machine`.
pub(super) fn open(path: &Path, machine: &Machine) -> Result<Store, SnapshotError> {
    let file = File::open(path).map_err(|source| SnapshotError::Io {
        path: path.to_owned(),
        error: source,
    })?;
    let file_len = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    let mut r = R {
        inp: BufReader::with_capacity(1 << 20, file),
        sum: Sum::new(),
        path,
    };
    // The header is one section of the checksum: 32 bytes in format 1, 40 in format 2.
    let mut head = vec![0u8; 8];
    r.inp.read_exact(&mut head).map_err(|e| r.short(e))?;
    if &head[..6] != MAGIC {
        return Err(r.invalid("wrong magic number".into()));
    }
    let version = u16::from_le_bytes([head[6], head[7]]);
    if version == super::mapped::VERSION {
        drop(r);
        return super::mapped::open(path, machine);
    }
    if version != VERSION && version != 1 {
        return Err(r.invalid(format!(
            "format version {version}, this build reads 1, {VERSION} and {}",
            super::mapped::VERSION
        )));
    }
    let counts = if version == 1 { 3 } else { 4 };
    head.resize(8 + 8 * counts, 0);
    r.inp.read_exact(&mut head[8..]).map_err(|e| r.short(e))?;
    r.sum.add(&head);
    r.sum.end();
    let n = |i: usize| u64::from_le_bytes(head[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"));
    let (terms, arena, quads) = (n(0), n(1), n(2));
    let graph_runs = if version == 1 { 0 } else { n(3) };
    let need = head.len() as u128
        + arena as u128
        + 8 * terms as u128
        + 16 * graph_runs as u128
        + 36 * quads as u128
        + 8;
    if need != file_len as u128 {
        return Err(r.invalid(if need > file_len as u128 {
            "the file is truncated".into()
        } else {
            "the file has trailing bytes".into()
        }));
    }
    if terms >= Id::MAX as u64 {
        return Err(r.invalid(format!("{terms} terms do not fit 32-bit ids")));
    }
    let bytes = r.take(arena as usize)?;
    let ends: Vec<u64> = r
        .take(terms as usize * 8)?
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    let t = quads as usize;
    let graphs: Vec<(Id, usize)> = if version == 1 {
        if t == 0 {
            Vec::new()
        } else {
            vec![(DEFAULT_GRAPH, 0)]
        }
    } else {
        let table = r.take(graph_runs as usize * 16)?;
        graph_table(&table, terms, quads).map_err(|why| r.invalid(why))?
    };
    // Each row's graph, walked along the runs.
    let graph_at = |i: usize, run: &mut usize| -> Id {
        while *run + 1 < graphs.len() && graphs[*run + 1].1 <= i {
            *run += 1;
        }
        graphs[*run].0
    };
    let mut perms: [[Vec<Id>; 3]; 3] = Default::default();
    let mut hashes = [0u64; 3];
    for (o, order) in Permutation::ALL.iter().enumerate() {
        for col in perms[o].iter_mut() {
            *col = r.u32s(t)?;
        }
        let cols = &perms[o];
        let mut h = 0u64;
        let mut run = 0;
        let mut prev_graph = None;
        for i in 0..t {
            let key = [cols[0][i], cols[1][i], cols[2][i]];
            if key.iter().any(|&id| id == 0 || id as u64 > terms) {
                return Err(r.invalid(format!("{} row {i} has an id out of range", order.name())));
            }
            let g = graph_at(i, &mut run);
            if prev_graph == Some(g) && [cols[0][i - 1], cols[1][i - 1], cols[2][i - 1]] >= key {
                return Err(r.invalid(format!("{} is not sorted at row {i}", order.name())));
            }
            prev_graph = Some(g);
            h = h.wrapping_add(quad_hash(order.triple(key), g));
        }
        hashes[o] = h;
    }
    let expect = r.sum.value;
    let mut tail = [0u8; 8];
    r.inp.read_exact(&mut tail).map_err(|e| r.short(e))?;
    if u64::from_le_bytes(tail) != expect {
        return Err(r.invalid("checksum mismatch (the file is damaged)".into()));
    }
    for o in 1..3 {
        if hashes[o] != hashes[0] {
            return Err(r.invalid(format!(
                "{} and {} do not hold the same quads",
                Permutation::ALL[0].name(),
                Permutation::ALL[o].name()
            )));
        }
    }
    let dict = Dict::from_parts(bytes, ends).map_err(|why| r.invalid(why))?;
    Ok(Store::from_sorted(machine, dict, perms, graphs)?)
}
