//! The packed snapshot (format 4): a store that opens by mapping its file, reads its indexes
//! packed in blocks (`blocks.rs`) and its terms in place, and checks each chunk of them the
//! first time a query reads it — so a one-row lookup in a large store reads and checks a few
//! dozen pages, not the file, and `nearflow check store` checks the rest.
//!
//! Layout, all integers little-endian, every section at a 4 KiB boundary:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `NFRDF\0` and format version 4 (u16) |
//! | 8 × 5 | terms, arena bytes, quads, graphs, ids in key order (`ordered`) |
//! | 4 + 4 | sections (16), reserved |
//! | 24 × 16 | per section: offset u64, length u64, CRC-32 u32 (the small sections'; 0 for those checked by chunk), reserved u32 |
//! | 4 | CRC-32 of the header before it |
//! | sections | see [`NAMES`] |
//!
//! The terms are the dictionary's keys in id order and each one's end offset (u64); ids
//! `1..=ordered` are in key order, and the term index lists the others' ids sorted by key, so a
//! lookup is two binary searches. Their checksums are per chunk: one per
//! [`TERM_CHUNK`](crate::dict::TERM_CHUNK) terms (their ends, then their keys) and one per
//! [`SORTED_CHUNK`](crate::dict::SORTED_CHUNK) entries of the index. Each permutation is three
//! sections: its packed bits, its block headers and its chunks' checksums. The graph table and
//! the statistics are small and checked whole at open.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use nearflow_split::{PartInfo, SplitBy, SplittableData};
use nearflow_topo::Machine;

use super::common::{graph_table, SnapshotError, MAGIC};
use super::mapped::{decode_stats, encode_stats};
use crate::base::Base;
use crate::blocks::{PackWriter, PackedRows};
use crate::dict::{Dict, MappedTerms, TermChecks, SORTED_CHUNK, TERM_CHUNK};
use crate::health::{ChunkMarks, Health};
use crate::layout::Rows;
use crate::shared::Shared;
use crate::store::{Columns, Permutation, Store};
use crate::term::Id;

pub(crate) const VERSION: u16 = 4;
const PAGE: u64 = 4096;
const SECTIONS: usize = 16;
const HEADER: usize = 8 + 40 + 8 + 24 * SECTIONS + 4;

/// The sections, in file order, by name (the name an error gives).
const NAMES: [&str; SECTIONS] = [
    "term keys",
    "term ends",
    "term checksums",
    "term index",
    "term index checksums",
    "graph table",
    "statistics",
    "SPO bits",
    "SPO block headers",
    "SPO checksums",
    "POS bits",
    "POS block headers",
    "POS checksums",
    "OSP bits",
    "OSP block headers",
    "OSP checksums",
];

/// What the damage reports call each permutation.
const INDEX_NAMES: [&str; 3] = ["the SPO index", "the POS index", "the OSP index"];

/// Writes sections one after another, each at a page boundary.
struct Sections<W: Write> {
    out: W,
    written: u64,
    table: [(u64, u64, u32); SECTIONS],
    next: usize,
}

impl<W: Write> Sections<W> {
    /// Pads to the next page: where the next section starts.
    fn start(&mut self) -> std::io::Result<u64> {
        let to = self.written.div_ceil(PAGE) * PAGE;
        self.out
            .write_all(&vec![0u8; (to - self.written) as usize])?;
        self.written = to;
        Ok(to)
    }

    /// Records the section just written (from `at`), with `crc`.
    fn end(&mut self, at: u64, crc: u32) {
        self.table[self.next] = (at, self.written - at, crc);
        self.next += 1;
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// A whole section at once.
    fn section(&mut self, bytes: &[u8], crc: u32) -> std::io::Result<()> {
        let at = self.start()?;
        self.write(bytes)?;
        self.end(at, crc);
        Ok(())
    }
}

/// Counts what passes through it.
struct Counting<'a, W: Write> {
    out: &'a mut W,
    n: u64,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

fn u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Writes `store` (a version without a delta) in format 4 to `file` (the caller's temporary
/// file, empty).
pub(crate) fn write<F: Write + Seek>(store: &Store, file: &mut F) -> std::io::Result<()> {
    let dict = store.dict();
    let n_terms = dict.len();
    let mut s = Sections {
        out: BufWriter::with_capacity(1 << 20, &mut *file),
        written: 0,
        table: [(0, 0, 0); SECTIONS],
        next: 0,
    };
    s.write(&vec![0u8; HEADER])?;
    // The keys, and each chunk's checksum of its ends and keys.
    let mut ends = Vec::with_capacity(n_terms);
    let mut key_crcs = Vec::with_capacity(n_terms.div_ceil(TERM_CHUNK));
    let at = s.start()?;
    let mut arena = 0u64;
    let mut keys_crc = crc32fast::Hasher::new();
    let mut ordered = 0usize;
    let mut prev_key: Option<&str> = None;
    let mut in_order = true;
    for (i, k) in dict.keys().enumerate() {
        if i % TERM_CHUNK == 0 && i > 0 {
            key_crcs.push(std::mem::replace(&mut keys_crc, crc32fast::Hasher::new()));
        }
        in_order &= prev_key.is_none_or(|p| p < k);
        if in_order {
            ordered = i + 1;
        }
        prev_key = Some(k);
        s.write(k.as_bytes())?;
        keys_crc.update(k.as_bytes());
        arena += k.len() as u64;
        ends.push(arena);
    }
    if n_terms > 0 {
        key_crcs.push(keys_crc);
    }
    s.end(at, 0);
    // Each chunk's checksum is of its ends first, then its keys: the keys' checksum, taken as
    // they were written, is combined after the ends'.
    let key_crcs: Vec<u32> = key_crcs
        .into_iter()
        .enumerate()
        .map(|(c, keys)| {
            let r = c * TERM_CHUNK..((c + 1) * TERM_CHUNK).min(n_terms);
            let mut h = crc32fast::Hasher::new();
            for e in &ends[r.clone()] {
                h.update(&e.to_le_bytes());
            }
            h.combine(&keys);
            h.finalize()
        })
        .collect();
    let ends_bytes: Vec<u8> = ends.iter().flat_map(|e| e.to_le_bytes()).collect();
    drop(ends);
    s.section(&ends_bytes, 0)?;
    drop(ends_bytes);
    s.section(&u32s(&key_crcs), 0)?;
    // The index of the terms after the ordered ones.
    let mut sorted: Vec<u32> = ((ordered + 1) as Id..=n_terms as Id).collect();
    sorted.sort_unstable_by(|&a, &b| dict.key_of(a).cmp(dict.key_of(b)));
    let sorted_crcs: Vec<u32> = sorted
        .chunks(SORTED_CHUNK)
        .map(|c| crc32fast::hash(&u32s(c)))
        .collect();
    s.section(&u32s(&sorted), 0)?;
    drop(sorted);
    s.section(&u32s(&sorted_crcs), 0)?;
    // The small sections.
    let graphs = store.graphs();
    let mut table = Vec::with_capacity(graphs.len() * 16);
    for &(g, start) in graphs {
        table.extend_from_slice(&u64::from(g).to_le_bytes());
        table.extend_from_slice(&(start as u64).to_le_bytes());
    }
    s.section(&table, crc32fast::hash(&table))?;
    let stats = encode_stats(store.stats());
    s.section(&stats, crc32fast::hash(&stats))?;
    // The permutations: bits as they are packed, then headers and checksums.
    for order in Permutation::ALL {
        let at = s.start()?;
        let mut w = PackWriter::new(Counting {
            out: &mut s.out,
            n: 0,
        });
        for part in store.perm(order).partitions() {
            for i in 0..part.data.len() {
                w.push(part.data.row(i))?;
            }
        }
        let (c, packed) = w.finish()?;
        debug_assert_eq!(c.n, packed.bits_len);
        s.written += packed.bits_len;
        s.end(at, 0);
        s.section(&packed.heads, 0)?;
        s.section(&u32s(&packed.crcs), 0)?;
    }
    debug_assert_eq!(s.next, SECTIONS);
    // The header, at the start.
    let mut head = Vec::with_capacity(HEADER);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    for n in [
        n_terms as u64,
        arena,
        store.len(),
        graphs.len() as u64,
        ordered as u64,
    ] {
        head.extend_from_slice(&n.to_le_bytes());
    }
    head.extend_from_slice(&(SECTIONS as u32).to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    for (off, len, crc) in s.table {
        head.extend_from_slice(&off.to_le_bytes());
        head.extend_from_slice(&len.to_le_bytes());
        head.extend_from_slice(&crc.to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes());
    }
    let crc = crc32fast::hash(&head);
    head.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(head.len(), HEADER);
    let mut out = s.out;
    out.flush()?;
    let file = out.get_mut();
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&head)?;
    file.seek(SeekFrom::End(0))?;
    file.flush()
}

/// Opens a format-4 snapshot by mapping it (see the module's text).
pub(crate) fn open(path: &Path, machine: &Machine) -> Result<Store, SnapshotError> {
    let invalid = |why: String| SnapshotError::Invalid {
        path: path.to_owned(),
        why,
    };
    let io = |error| SnapshotError::Io {
        path: path.to_owned(),
        error,
    };
    let file = File::open(path).map_err(io)?;
    // SAFETY: the snapshot is written to a temporary file and renamed into place, never
    // changed where it lies, so the mapping's bytes do not change under the readers (a
    // replacement is a new file; this mapping keeps the old one's pages).
    let map = Arc::new(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?);
    if map.len() < HEADER {
        return Err(invalid(
            "the file is truncated (its header is cut short)".into(),
        ));
    }
    let head = &map[..HEADER];
    let crc = u32::from_le_bytes(head[HEADER - 4..].try_into().expect("4 bytes"));
    if crc32fast::hash(&head[..HEADER - 4]) != crc {
        return Err(invalid("its header is damaged (checksum mismatch)".into()));
    }
    let u64_at = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().expect("8 bytes"));
    let (terms, arena, quads, n_graphs, ordered) =
        (u64_at(8), u64_at(16), u64_at(24), u64_at(32), u64_at(40));
    let n_sections = u32::from_le_bytes(head[48..52].try_into().expect("4 bytes")) as usize;
    if n_sections != SECTIONS {
        return Err(invalid(format!(
            "{n_sections} sections, format 4 has {SECTIONS}"
        )));
    }
    if terms >= Id::MAX as u64 {
        return Err(invalid(format!("{terms} terms do not fit 32-bit ids")));
    }
    if ordered > terms || quads > usize::MAX as u64 / 2 {
        return Err(invalid("its counts are out of range".into()));
    }
    let mut sec = [(0u64, 0u64, 0u32); SECTIONS];
    for (i, s) in sec.iter_mut().enumerate() {
        let at = 56 + 24 * i;
        *s = (
            u64_at(at),
            u64_at(at + 8),
            u32::from_le_bytes(head[at + 16..at + 20].try_into().expect("4 bytes")),
        );
    }
    let rest = terms - ordered;
    let known = |i: usize| -> Option<u64> {
        match i {
            0 => Some(arena),
            1 => Some(terms * 8),
            2 => Some(terms.div_ceil(TERM_CHUNK as u64) * 4),
            3 => Some(rest * 4),
            4 => Some(rest.div_ceil(SORTED_CHUNK as u64) * 4),
            5 => Some(n_graphs * 16),
            // The statistics, and each permutation's sections (checked by `PackedRows`).
            _ => None,
        }
    };
    for (i, &(off, len, _)) in sec.iter().enumerate() {
        let bad = off % PAGE != 0
            || off < HEADER as u64
            || known(i).is_some_and(|want| want != len)
            || off
                .checked_add(len)
                .is_none_or(|end| end > map.len() as u64);
        if bad {
            return Err(invalid(format!(
                "the section '{}' lies outside the file or has the wrong size (the file is truncated or damaged)",
                NAMES[i]
            )));
        }
    }
    let range = |i: usize| sec[i].0 as usize..(sec[i].0 + sec[i].1) as usize;
    for i in [5, 6] {
        if crc32fast::hash(&map[range(i)]) != sec[i].2 {
            return Err(invalid(format!(
                "the section '{}' is damaged (checksum mismatch)",
                NAMES[i]
            )));
        }
    }
    let graphs = graph_table(&map[range(5)], terms, quads).map_err(invalid)?;
    let stats = decode_stats(&map[range(6)], terms)
        .map_err(|why| invalid(format!("the section 'statistics' is bad: {why}")))?;
    if stats.triples != quads {
        return Err(invalid("the statistics do not count the quads".into()));
    }
    if cfg!(target_endian = "big") {
        return Err(invalid(
            "format 4 is read in place, little-endian; this machine is big-endian".into(),
        ));
    }
    let health = Arc::new(Health::default());
    let terms_of = Arc::new(MappedTerms {
        bytes: Shared::mapped(&map, sec[0].0 as usize, arena as usize),
        ends: Shared::mapped(&map, sec[1].0 as usize, terms as usize),
        sorted: Shared::mapped(&map, sec[3].0 as usize, rest as usize),
        ordered: ordered as usize,
        as_read: Some(TermChecks {
            keys: ChunkMarks::new(terms.div_ceil(TERM_CHUNK as u64) as usize),
            key_crcs: Shared::mapped(&map, sec[2].0 as usize, (sec[2].1 / 4) as usize),
            sorted: ChunkMarks::new(rest.div_ceil(SORTED_CHUNK as u64) as usize),
            sorted_crcs: Shared::mapped(&map, sec[4].0 as usize, (sec[4].1 / 4) as usize),
            health: health.clone(),
        }),
        whole: Arc::default(),
    });
    let dict = Dict::of_mapped(terms_of.clone());
    let n = quads as usize;
    let mut packed = Vec::with_capacity(3);
    for (o, name) in INDEX_NAMES.iter().enumerate() {
        let s = 7 + 3 * o;
        packed.push(Arc::new(
            PackedRows::new(
                map.clone(),
                n,
                range(s),
                range(s + 1),
                range(s + 2),
                health.clone(),
                name,
            )
            .map_err(|_| {
                invalid(format!(
                    "the sections of {name} do not hold {quads} rows (the file is truncated or damaged)"
                ))
            })?,
        ));
    }
    let parts = nearflow_split::layout(machine, SplitBy::Node).len().max(1);
    let mut perms = Vec::with_capacity(3);
    for rows in &packed {
        perms.push(
            SplittableData::build(machine, SplitBy::Node, |info: &PartInfo| {
                let r = (n * info.index / parts)..(n * (info.index + 1) / parts);
                Columns {
                    rows: Rows::Packed {
                        rows: rows.clone(),
                        at: r.start,
                        len: r.len(),
                    },
                    first: r.start,
                }
            })
            .map_err(|e| SnapshotError::Store(crate::store::StoreError::Split(e)))?,
        );
    }
    let perms: [SplittableData<Columns>; 3] = perms
        .try_into()
        .map_err(|_| invalid("three permutations".into()))?;
    // `check store` checks what no query has read yet (through weak references: the store
    // owns its health, not the other way round).
    let weak_terms = Arc::downgrade(&terms_of);
    let weak_rows: Vec<_> = packed.iter().map(Arc::downgrade).collect();
    let _ = health.check_rest.set(Box::new(move || {
        if let Some(t) = weak_terms.upgrade() {
            t.check_all();
        }
        for r in weak_rows.iter().filter_map(std::sync::Weak::upgrade) {
            r.check_all();
        }
    }));
    Ok(Store::of_mapped_base(
        dict,
        Base {
            perms,
            graphs,
            stats,
            machine: machine.clone(),
            replicas: Default::default(),
        },
        health,
    ))
}
