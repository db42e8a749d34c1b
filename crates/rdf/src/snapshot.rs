//! The binary snapshot: the dictionary, the graphs' runs and the three sorted permutations as
//! they are in memory, so opening a store is reading it (no parsing, no sorting).
//!
//! [`save`] writes format 3 (`mapped.rs`): sections at page boundaries with a checksum each,
//! opened by mapping the file and read in place. [`open`] reads formats 1 and 2 too (the
//! snapshots of earlier builds), as this module's text describes: read whole and checked.
//!
//! Layout (format 2), all integers little-endian:
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
//! [`save`] (either format) writes a temporary file beside the target, syncs it, and renames it
//! over the target, then syncs the directory: a kill or a full disk during the write leaves the previous
//! snapshot whole, and the temporary file is removed on error.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use nearflow_topo::Machine;

use crate::dict::Dict;
use crate::store::{Permutation, Store, StoreError, DEFAULT_GRAPH};
use crate::term::Id;

pub(crate) const MAGIC: &[u8; 6] = b"NFRDF\0";
const VERSION: u16 = 2;

/// A snapshot could not be written or opened.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Reading or writing failed.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The file is not a whole, valid snapshot.
    #[error("{path}: not a valid nearflow store snapshot: {why}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// Building the partitions failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The target may not be written (see [`check_target`]).
    #[error("{path}: will not write a snapshot there: it {why}")]
    Refused {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// A running checksum (FNV-1a over 8-byte words; enough to catch a damaged file, not a
/// malicious one). Bytes are taken as they come and folded a word at a time; [`Sum::end`]
/// closes a section, padding its last word, so a section summed in pieces of any length gives
/// the same value as the section summed whole.
struct Sum {
    value: u64,
    pending: [u8; 8],
    filled: usize,
}

impl Sum {
    fn new() -> Self {
        Sum {
            value: 0xcbf2_9ce4_8422_2325,
            pending: [0; 8],
            filled: 0,
        }
    }

    fn word(&mut self, w: [u8; 8]) {
        self.value = (self.value ^ u64::from_le_bytes(w)).wrapping_mul(0x0000_0100_0000_01b3);
    }

    fn add(&mut self, mut bytes: &[u8]) {
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
    fn end(&mut self) {
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

/// The snapshot file, with room for at most `room` more bytes (unbounded outside tests, where
/// a small room stands for a full disk).
struct Capped {
    file: File,
    room: u64,
}

impl std::io::Seek for Capped {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        self.file.seek(pos)
    }
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.room == 0 && !buf.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "no space left on device",
            ));
        }
        let n = (buf.len() as u64).min(self.room) as usize;
        let n = self.file.write(&buf[..n])?;
        self.room -= n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

struct W<'a> {
    out: BufWriter<Capped>,
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

/// Whether `target` may receive a snapshot built from `inputs`: it must not be one of them (a
/// `load x.ttl --save x.ttl` would replace the data with its snapshot), and a file already
/// there must be a snapshot (its magic number), so a typo cannot overwrite other data. Checked
/// before loading, so the user does not wait for a refusal.
pub fn check_target(target: &Path, inputs: &[PathBuf]) -> Result<(), SnapshotError> {
    let refuse = |why: String| SnapshotError::Refused {
        path: target.to_owned(),
        why,
    };
    let Ok(meta) = std::fs::metadata(target) else {
        return Ok(());
    };
    if meta.is_dir() {
        return Err(refuse("is a directory".into()));
    }
    let same = |a: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(target)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if let Some(input) = inputs.iter().find(|i| same(i)) {
        return Err(refuse(format!(
            "is the input {}; save the snapshot under another name",
            input.display()
        )));
    }
    let mut magic = [0u8; 6];
    let is_snapshot = File::open(target)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == MAGIC;
    if !is_snapshot && meta.len() > 0 {
        return Err(refuse(
            "exists and is not a nearflow store snapshot; remove it or choose another name".into(),
        ));
    }
    Ok(())
}

/// Writes `store` to `path`, atomically: into a temporary file in the same directory, synced,
/// then renamed over `path` (and the directory synced). On any error the temporary file is
/// removed and whatever was at `path` before is untouched.
pub fn save(store: &Store, path: &Path) -> Result<(), SnapshotError> {
    if !store.is_flat() {
        // A version with a delta is written as its merged indexes.
        return save_capped(&store.merged()?, path, u64::MAX, Format::Mapped);
    }
    save_capped(store, path, u64::MAX, Format::Mapped)
}

/// Which format [`save`] writes: 3 (mapped, the default), or 2 (read whole; kept for the tests
/// of its reader, which opens the snapshots of earlier builds).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Mapped,
    #[cfg_attr(not(test), allow(dead_code))]
    Read,
}

fn save_capped(store: &Store, path: &Path, room: u64, format: Format) -> Result<(), SnapshotError> {
    let io = |source| SnapshotError::Io {
        path: path.to_owned(),
        error: source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io(std::io::Error::other("not a file name")))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|source| SnapshotError::Io {
            path: tmp.clone(),
            error: source,
        })?;
    let mut capped = Capped { file, room };
    let body = match format {
        Format::Read => write_to(store, capped, &tmp),
        Format::Mapped => crate::mapped::write(store, &mut capped)
            .and_then(|()| capped.file.sync_all())
            .map_err(|error| SnapshotError::Io {
                path: tmp.clone(),
                error,
            }),
    };
    let written = body.and_then(|()| {
        std::fs::rename(&tmp, path).map_err(io)?;
        // The rename is durable once the directory is: a failure to sync it (some filesystems
        // do not support it) leaves the file whole either way, so it is not an error.
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn write_to(store: &Store, file: Capped, path: &Path) -> Result<(), SnapshotError> {
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
                w.u32s(&part.data.cols[c])?;
            }
            w.sum.end();
        }
    }
    let sum = w.sum.value;
    w.out.write_all(&sum.to_le_bytes()).map_err(io)?;
    let file = w.out.into_inner().map_err(|e| io(e.into_error()))?;
    file.file.sync_all().map_err(io)?;
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

/// The graph table of a snapshot (id u64, first row u64 per graph), checked: ids in range and
/// increasing, runs starting at row 0 and increasing within the quads, a table when there are
/// quads.
pub(crate) fn graph_table(
    bytes: &[u8],
    terms: u64,
    quads: u64,
) -> Result<Vec<(Id, usize)>, String> {
    let mut graphs: Vec<(Id, usize)> = Vec::with_capacity(bytes.len() / 16);
    for (i, c) in bytes.chunks_exact(16).enumerate() {
        let g = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
        let start = u64::from_le_bytes(c[8..].try_into().expect("8 bytes"));
        let prev = graphs.last().copied();
        let bad = g > terms
            || start >= quads
            || (i == 0 && start != 0)
            || prev.is_some_and(|(pg, ps)| u64::from(pg) >= g || ps as u64 >= start);
        if bad {
            return Err(format!("the graph table is bad at entry {i}"));
        }
        graphs.push((g as Id, start as usize));
    }
    if quads > 0 && graphs.is_empty() {
        return Err("quads without a graph table".into());
    }
    Ok(graphs)
}

/// Opens the snapshot at `path`, for `machine`.
pub fn open(path: &Path, machine: &Machine) -> Result<Store, SnapshotError> {
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
    if version == crate::mapped::VERSION {
        drop(r);
        return crate::mapped::open(path, machine);
    }
    if version != VERSION && version != 1 {
        return Err(r.invalid(format!(
            "format version {version}, this build reads 1, {VERSION} and {}",
            crate::mapped::VERSION
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::TermRef;
    use proptest::prelude::*;

    fn dir(test: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("nearflow-snapshot-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
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
        save_capped(s, f, u64::MAX, Format::Read).unwrap();
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
        let d = dir("nodes");
        let machines = [
            nearflow_topo::from_synthetic("pack:2 [numa] core:1 pu:1").unwrap(),
            nearflow_topo::from_synthetic("pack:4 [numa] core:1 pu:1").unwrap(),
            nearflow_topo::from_synthetic("core:2 pu:1").unwrap(),
        ];
        for n in [0, 1, 2, 3, 5, 7, 63, 64, 65, 150, 300, 441] {
            for (i, m) in machines.iter().enumerate() {
                let s = store(m, n);
                let f = d.join(format!("s{n}-{i}.nfs"));
                for format in [Format::Mapped, Format::Read] {
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
        let d = dir("disagree");
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
        let d = dir("atomic");
        let m = nearflow_topo::from_synthetic("core:1 pu:1").unwrap();
        let f = d.join("s.nfs");
        let small = store(&m, 5);
        save(&small, &f).unwrap();
        let before = std::fs::read(&f).unwrap();
        let big = store(&m, 100);
        for room in [0, 10, 100, 1000] {
            for format in [Format::Mapped, Format::Read] {
                let e = save_capped(&big, &f, room, format).unwrap_err().to_string();
                assert!(e.contains("no space left"), "{e}");
                assert_eq!(std::fs::read(&f).unwrap(), before, "room {room}");
            }
            let names: Vec<_> = std::fs::read_dir(&d)
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
        let d = dir("format1");
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

    /// Format 3 opens by mapping: the same quads, statistics and terms; lookups by binary
    /// search; nothing of the columns or terms copied into memory; the background check finds
    /// nothing wrong.
    #[test]
    fn a_mapped_snapshot_reads_as_the_store_it_was() {
        let d = dir("mapped");
        let m = nearflow_topo::from_synthetic("pack:2 [numa] core:1 pu:1").unwrap();
        let s = store(&m, 441);
        let f = d.join("s.nfs");
        save(&s, &f).unwrap();
        let o = open(&f, &m).unwrap();
        assert_eq!(all(&o), all(&s));
        assert_eq!(o.graphs(), s.graphs());
        assert!(o.dict().is_mapped());
        assert_eq!(o.dict().len(), s.dict().len());
        for id in 1..=s.dict().len() as Id {
            assert_eq!(o.dict().term(id), s.dict().term(id));
            assert_eq!(o.dict().lookup(s.dict().term(id)), Some(id));
        }
        assert_eq!(o.dict().lookup(TermRef::Iri("http://t/none")), None);
        assert!(o.mapped_bytes() >= 441 * 36, "{}", o.mapped_bytes());
        let columns: usize = Permutation::ALL
            .iter()
            .flat_map(|&p| o.perm(p).partitions().iter())
            .map(|p| p.data.cols.iter().map(|c| c.heap_bytes()).sum::<usize>())
            .sum();
        assert_eq!(columns, 0, "the columns are read in place");
        assert_eq!(o.health().unwrap().wait(), None);
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
        save(&merged, &f).unwrap();
        let again = open(&f, &m).unwrap();
        assert_eq!(all(&again), all(&v));
        assert_eq!(
            again.dict().lookup(TermRef::Iri("http://t/new")),
            Some(q[0])
        );
    }

    /// Damage to a mapped snapshot: in the header or a small section, refused at open naming
    /// it; in a column or the terms, found by the background check, naming the section, and
    /// reading it meanwhile does not panic.
    #[test]
    fn damage_to_a_mapped_snapshot_names_its_section() {
        let d = dir("mapped-damage");
        let m = nearflow_topo::from_synthetic("core:1 pu:1").unwrap();
        let s = store(&m, 300);
        let f = d.join("s.nfs");
        save(&s, &f).unwrap();
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
            let said = o.health().unwrap().wait().map(str::to_owned);
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
}
