//! The packed snapshot (formats 5 and 4): a store that opens by mapping its file, reads its
//! indexes packed in blocks (`blocks.rs`) and its terms in place, and checks each chunk of them
//! the first time a query reads it — so a one-row lookup in a large store reads and checks a few
//! dozen pages, not the file, and `nearflow check store` checks the rest. Format 5, written,
//! front-codes the terms (`coded.rs`); format 4, still opened, holds them one after another.
//!
//! Layout, all integers little-endian, every section at a 4 KiB boundary:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `NFRDF\0` and format version 5 or 4 (u16) |
//! | 8 × 5 | terms, arena bytes, quads, graphs, ids in key order (`ordered`) |
//! | 4 + 4 | sections (16), the CRC-32 of every byte after the header (a delta segment names the file it belongs to by it: `segment.rs`) |
//! | 24 × 16 | per section: offset u64, length u64, CRC-32 u32 (the small sections'; 0 for those checked by chunk), reserved u32 |
//! | 4 | CRC-32 of the header before it |
//! | sections | see `NAMES` |
//!
//! The terms are the dictionary's keys in id order: in format 5 front-coded in blocks of
//! `BLOCK` with each block's start offset (u64), in format 4 one after
//! another with each one's end offset (u64). Ids `1..=ordered` are in key order (a store written
//! by `nearflow load`: all of them), and the term index lists the others' ids sorted by key, so
//! a lookup is two binary searches (in format 5 the first one over the blocks' first keys, then
//! a scan of one block). Their checksums are per chunk: one per
//! `TERM_CHUNK` terms (their offsets — in format 5 also the end of
//! the chunk's last block — then their keys' bytes) and one per
//! `SORTED_CHUNK` entries of the index. Each permutation is three
//! sections: its packed bits, its block headers and its chunks' checksums. The graph table and
//! the statistics are small and checked whole at open.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use nearflow_split::{PartInfo, SplitBy, SplittableData};
use nearflow_topo::Machine;

use super::common::{graph_table, Hashing, SnapshotError, MAGIC};
use super::format::{Format, PushRow, PushTerm, Sink, Spool, WriteSeek};
use super::mapped::{decode_stats, encode_stats};
use crate::base::Base;
use crate::blocks::{PackWriter, PackedRows};
use crate::dict::{Dict, MappedTerms, TermChecks, SORTED_CHUNK, TERM_CHUNK};
use crate::health::{ChunkMarks, Health};
use crate::layout::PartRows;
use crate::shared::Shared;
use crate::store::{Columns, Permutation, Store};
use crate::term::Id;

/// The format written: terms front-coded (`coded.rs`).
pub(crate) const VERSION: u16 = 5;
/// The format before it, still opened: terms one after another, each with its end offset.
pub(crate) const VERSION_UNCODED: u16 = 4;
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

/// Writes sections one after another, each at a page boundary, recording each in the table
/// under its index in [`NAMES`] (the file's order need not be the table's).
struct Sections<W: Write> {
    out: W,
    written: u64,
    table: [(u64, u64, u32); SECTIONS],
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

    /// Records section `i` as the bytes written since `at`, with `crc`.
    fn end(&mut self, i: usize, at: u64, crc: u32) {
        self.table[i] = (at, self.written - at, crc);
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Section `i` whole at once.
    fn section(&mut self, i: usize, bytes: &[u8], crc: u32) -> std::io::Result<()> {
        let at = self.start()?;
        self.write(bytes)?;
        self.end(i, at, crc);
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

/// Formats 5 and 4's [`Sink`]: writes the snapshot as its parts come — the terms in id order,
/// the index of those not in key order, each permutation's rows in key order, the graph table
/// and the statistics, then the header at the start. Nothing but the block headers and the
/// checksums is kept in memory, so a store larger than memory is written as it is merged.
struct Writer<W: Write + Seek> {
    s: Sections<BufWriter<Hashing<W>>>,
    /// Format 5 (front-coded terms), else 4.
    coded: bool,
    terms: u64,
    arena: u64,
    ordered: u64,
    quads: Option<u64>,
    graphs: u64,
}

impl<W: Write + Seek> Writer<W> {
    /// A writer of format `version` (5, or 4 for the tests that open it) into `file` (empty),
    /// the header's room left at its start.
    fn of_format(file: W, version: u16) -> std::io::Result<Self> {
        let mut s = Sections {
            out: BufWriter::with_capacity(
                1 << 20,
                Hashing {
                    inner: file,
                    crc: crc32fast::Hasher::new(),
                },
            ),
            written: 0,
            table: [(0, 0, 0); SECTIONS],
        };
        s.write(&vec![0u8; HEADER])?;
        Ok(Writer {
            s,
            coded: version == VERSION,
            terms: 0,
            arena: 0,
            ordered: 0,
            quads: None,
            graphs: 0,
        })
    }

    /// The terms' keys in id order, from `fill` (each key handed to its argument): in format 5
    /// front-coded in blocks (`coded.rs`), each block's start offset going to `spool` as it
    /// comes (8 bytes a block); in format 4 one after another, each one's end offset going to
    /// `spool` (8 bytes a term). The offsets are copied after the keys. The leading ids whose
    /// keys increase are counted as in key order.
    fn put_terms(
        &mut self,
        spool: &mut dyn Spool,
        fill: &mut dyn FnMut(PushTerm<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let at = self.s.start()?;
        let coded = self.coded;
        let mut n = 0usize;
        let mut offsets = 0u64;
        let mut arena = 0u64;
        let mut ordered = 0usize;
        let mut in_order = true;
        let mut prev: Vec<u8> = Vec::new();
        let mut encoder = crate::coded::Encoder::default();
        let mut encoded: Vec<u8> = Vec::new();
        // Each chunk's checksum is of its offsets (format 5: its blocks' starts, then the end of
        // its last block), then its keys' bytes: both hashed as they come and combined at the
        // chunk's end.
        let mut ends_crc = crc32fast::Hasher::new();
        let mut keys_crc = crc32fast::Hasher::new();
        let mut crcs: Vec<u32> = Vec::new();
        let chunk_crc =
            |ends_crc: &mut crc32fast::Hasher, keys_crc: &mut crc32fast::Hasher, arena: u64| {
                if coded {
                    ends_crc.update(&arena.to_le_bytes());
                }
                let mut h = std::mem::replace(ends_crc, crc32fast::Hasher::new());
                h.combine(&std::mem::replace(keys_crc, crc32fast::Hasher::new()));
                h.finalize()
            };
        {
            let s = &mut self.s;
            let mut ends = BufWriter::with_capacity(1 << 16, &mut *spool);
            let mut push = |k: &str| -> std::io::Result<()> {
                if n % TERM_CHUNK == 0 && n > 0 {
                    crcs.push(chunk_crc(&mut ends_crc, &mut keys_crc, arena));
                }
                in_order &= n == 0 || prev.as_slice() < k.as_bytes();
                if in_order {
                    ordered = n + 1;
                    prev.clear();
                    prev.extend_from_slice(k.as_bytes());
                }
                let bytes = if coded {
                    encoded.clear();
                    if encoder.push(k.as_bytes(), &mut encoded) {
                        ends.write_all(&arena.to_le_bytes())?;
                        ends_crc.update(&arena.to_le_bytes());
                        offsets += 1;
                    }
                    encoded.as_slice()
                } else {
                    k.as_bytes()
                };
                s.write(bytes)?;
                keys_crc.update(bytes);
                arena += bytes.len() as u64;
                if !coded {
                    ends.write_all(&arena.to_le_bytes())?;
                    ends_crc.update(&arena.to_le_bytes());
                    offsets += 1;
                }
                n += 1;
                Ok(())
            };
            fill(&mut push)?;
            ends.flush()?;
        }
        if n > 0 {
            crcs.push(chunk_crc(&mut ends_crc, &mut keys_crc, arena));
        }
        self.s.end(0, at, 0);
        let at = self.s.start()?;
        spool.seek(SeekFrom::Start(0))?;
        let copied = std::io::copy(&mut (&mut *spool).take(offsets * 8), &mut self.s.out)?;
        if copied != offsets * 8 {
            return Err(std::io::Error::other(
                "the term offsets' spool is cut short",
            ));
        }
        self.s.written += copied;
        self.s.end(1, at, 0);
        self.s.section(2, &u32s(&crcs), 0)?;
        (self.terms, self.arena, self.ordered) = (n as u64, arena, ordered as u64);
        Ok(())
    }

    /// The ids after the ordered ones, sorted by key.
    fn term_index(&mut self, sorted: &[u32]) -> std::io::Result<()> {
        let crcs: Vec<u32> = sorted
            .chunks(SORTED_CHUNK)
            .map(|c| crc32fast::hash(&u32s(c)))
            .collect();
        self.s.section(3, &u32s(sorted), 0)?;
        self.s.section(4, &u32s(&crcs), 0)
    }

    /// Permutation `order`'s rows in key order (graph by graph), from `fill`; packed as they
    /// come, the block headers and checksums written after them.
    fn permutation(
        &mut self,
        order: Permutation,
        fill: &mut dyn FnMut(PushRow<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let at = self.s.start()?;
        let mut w = PackWriter::new(Counting {
            out: &mut self.s.out,
            n: 0,
        });
        let mut rows = 0u64;
        fill(&mut |k| {
            rows += 1;
            w.push(k)
        })?;
        let (c, packed) = w.finish()?;
        debug_assert_eq!(c.n, packed.bits_len);
        if self.quads.is_some_and(|q| q != rows) {
            return Err(std::io::Error::other(format!(
                "{} has {rows} rows, another permutation {}",
                order.name(),
                self.quads.unwrap_or(0)
            )));
        }
        self.quads = Some(rows);
        let s = 7 + 3 * order.index();
        self.s.written += packed.bits_len;
        self.s.end(s, at, 0);
        self.s
            .section(s + 1, &packed.heads, 0)
            .and_then(|()| self.s.section(s + 2, &u32s(&packed.crcs), 0))
    }

    /// The graph table (each graph and the row its run starts at) and the statistics.
    fn graphs_and_stats(
        &mut self,
        graphs: &[(Id, usize)],
        stats: &crate::store::Stats,
    ) -> std::io::Result<()> {
        let mut table = Vec::with_capacity(graphs.len() * 16);
        for &(g, start) in graphs {
            table.extend_from_slice(&u64::from(g).to_le_bytes());
            table.extend_from_slice(&(start as u64).to_le_bytes());
        }
        self.s.section(5, &table, crc32fast::hash(&table))?;
        self.graphs = graphs.len() as u64;
        let stats = encode_stats(stats);
        self.s.section(6, &stats, crc32fast::hash(&stats))
    }

    /// Writes the header at the start, and flushes: the file is whole (not yet synced).
    fn end(self) -> std::io::Result<W> {
        let hashed = self.s.out.into_inner().map_err(|e| e.into_error())?;
        let tag = hashed.crc.finalize();
        let mut file = hashed.inner;
        let mut head = Vec::with_capacity(HEADER);
        head.extend_from_slice(MAGIC);
        let version = if self.coded { VERSION } else { VERSION_UNCODED };
        head.extend_from_slice(&version.to_le_bytes());
        for n in [
            self.terms,
            self.arena,
            self.quads.unwrap_or(0),
            self.graphs,
            self.ordered,
        ] {
            head.extend_from_slice(&n.to_le_bytes());
        }
        head.extend_from_slice(&(SECTIONS as u32).to_le_bytes());
        head.extend_from_slice(&tag.to_le_bytes());
        for (off, len, crc) in self.s.table {
            head.extend_from_slice(&off.to_le_bytes());
            head.extend_from_slice(&len.to_le_bytes());
            head.extend_from_slice(&crc.to_le_bytes());
            head.extend_from_slice(&0u32.to_le_bytes());
        }
        let crc = crc32fast::hash(&head);
        head.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(head.len(), HEADER);
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&head)?;
        file.seek(SeekFrom::End(0))?;
        file.flush()?;
        Ok(file)
    }
}

impl<W: Write + Seek> Sink for Writer<W> {
    fn terms(
        &mut self,
        spool: &mut dyn Spool,
        fill: &mut dyn FnMut(PushTerm<'_>) -> std::io::Result<()>,
        sort_rest: &mut dyn FnMut(usize) -> Vec<Id>,
    ) -> std::io::Result<()> {
        self.put_terms(spool, fill)?;
        let rest = sort_rest(self.ordered as usize);
        if rest.len() as u64 != self.terms - self.ordered {
            return Err(std::io::Error::other(format!(
                "{} ids after the {} in key order, sorted as {}",
                self.terms - self.ordered,
                self.ordered,
                rest.len()
            )));
        }
        self.term_index(&rest)
    }

    fn rows(
        &mut self,
        order: Permutation,
        fill: &mut dyn FnMut(PushRow<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.permutation(order, fill)
    }

    fn finish(
        mut self: Box<Self>,
        graphs: &[(Id, usize)],
        stats: &crate::store::Stats,
    ) -> std::io::Result<()> {
        self.graphs_and_stats(graphs, stats)?;
        self.end().map(drop)
    }
}

/// Formats 5 and 4 as a [`Format`]: [`Packed::CODED`] writes format 5 (what a save writes),
/// [`Packed::UNCODED`] format 4 (for the tests of its reader); each opens either.
pub struct Packed {
    version: u16,
}

impl Packed {
    /// Format 5: terms front-coded.
    pub const CODED: Packed = Packed { version: VERSION };
    /// Format 4: terms one after another.
    pub const UNCODED: Packed = Packed {
        version: VERSION_UNCODED,
    };
}

impl Format for Packed {
    fn version(&self) -> u16 {
        self.version
    }

    fn reads(&self, version: u16) -> bool {
        version == VERSION || version == VERSION_UNCODED
    }

    fn writes_deltas(&self) -> bool {
        true
    }

    fn sink<'a>(&self, file: &'a mut dyn WriteSeek) -> std::io::Result<Box<dyn Sink + 'a>> {
        Ok(Box::new(Writer::of_format(file, self.version)?))
    }

    fn open(&self, path: &Path, machine: &Machine) -> Result<Store, SnapshotError> {
        open(path, machine)
    }
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
    let version = u16::from_le_bytes(head[6..8].try_into().expect("2 bytes"));
    let coded = version == VERSION;
    let (terms, arena, quads, n_graphs, ordered) =
        (u64_at(8), u64_at(16), u64_at(24), u64_at(32), u64_at(40));
    let n_sections = u32::from_le_bytes(head[48..52].try_into().expect("4 bytes")) as usize;
    if n_sections != SECTIONS {
        return Err(invalid(format!(
            "{n_sections} sections, format {version} has {SECTIONS}"
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
    let offsets = if coded {
        terms.div_ceil(crate::coded::BLOCK as u64)
    } else {
        terms
    };
    let known = |i: usize| -> Option<u64> {
        match i {
            0 => Some(arena),
            1 => Some(offsets * 8),
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
            "formats 4 and 5 are read in place, little-endian; this machine is big-endian".into(),
        ));
    }
    let health = Arc::new(Health::default());
    let terms_of = Arc::new(MappedTerms {
        bytes: Shared::mapped(&map, sec[0].0 as usize, arena as usize),
        ends: Shared::mapped(&map, sec[1].0 as usize, offsets as usize),
        terms: terms as usize,
        coded,
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
        kind_ids: Default::default(),
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
                    rows: PartRows::Packed {
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
