//! Packed key columns: one permutation's rows in blocks of [`BLOCK`] rows, each column of a
//! block held as its smallest value and each row's difference from it in as few bits as the
//! block's range needs (frame of reference, bit-packed). A row is read in place in constant
//! time — a block header and three shifted words — so binary searches and index joins read a
//! packed permutation as they read plain columns, with no block decoded whole and no cache.
//!
//! Measured on SP²Bench 1M (this crate's format 4 against format 3's three 32-bit columns of
//! 12 bytes a row): 4.7, 2.7 and 3.4 bytes a row for SPO, POS and OSP with ids in load order.
//! The ids a sorted column holds lie close together within a block (a subject's rows, a
//! predicate's objects), and so do the ids of the terms loaded together.
//!
//! Blocks are grouped into chunks of [`CHUNK`] rows, each with a CRC-32 over its blocks'
//! headers and bits: a chunk is checked the first time one of its rows is read
//! ([`ChunkMarks`]), so a query checks what it reads and nothing else, and the rows of a
//! damaged chunk read as ids past every term (damaged terms) while the store's [`Health`]
//! names the chunk.
//!
//! Layout of one permutation (all integers little-endian):
//!
//! - the bits: per block, each column's `BLOCK` values of its width in bits, least
//!   significant bit first, the columns one after another (a column of width `w` takes
//!   `BLOCK * w / 8` bytes; a block's unused rows are zeros), then 8 bytes of padding;
//! - the headers, 24 bytes a block: where its bits start (u64, from the start of the bits),
//!   each column's base (3 × u32), each column's width (3 × u8, at most 32), a zero byte;
//! - the checksums: per chunk, the CRC-32 of its bits and then its headers (u32).

use std::io::Write;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::health::{ChunkMarks, Health};
use crate::term::Id;

/// Rows per block.
pub(crate) const BLOCK: usize = 1 << BLOCK_SHIFT;
const BLOCK_SHIFT: usize = 8;
/// Rows per checked chunk.
pub(crate) const CHUNK: usize = 1 << CHUNK_SHIFT;
const CHUNK_SHIFT: usize = 12;
const BLOCKS_PER_CHUNK: usize = CHUNK / BLOCK;
/// Bytes of a block header.
pub(crate) const HEAD: usize = 24;
/// Bytes after the bits, so that a value's 8-byte read never ends past them.
pub(crate) const PAD: usize = 8;

/// Bits needed for `x`.
fn width(x: u32) -> u8 {
    (32 - x.leading_zeros()) as u8
}

/// Writes sorted keys as packed blocks: the bits as they come (to `out`), the headers and the
/// chunks' checksums kept for the caller to write after them.
pub(crate) struct PackWriter<W: Write> {
    out: W,
    block: Vec<[Id; 3]>,
    /// Bytes of bits written.
    written: u64,
    heads: Vec<u8>,
    crcs: Vec<u32>,
    /// The current chunk's checksum of its bits so far, and its first header's index.
    chunk: crc32fast::Hasher,
    chunk_blocks: usize,
    buf: Vec<u8>,
}

/// What a [`PackWriter`] wrote, and what is left to write.
pub(crate) struct Packed {
    /// Bytes of bits written, padding included.
    pub(crate) bits_len: u64,
    /// The headers, to write after the bits.
    pub(crate) heads: Vec<u8>,
    /// The chunks' checksums.
    pub(crate) crcs: Vec<u32>,
}

impl<W: Write> PackWriter<W> {
    pub(crate) fn new(out: W) -> Self {
        PackWriter {
            out,
            block: Vec::with_capacity(BLOCK),
            written: 0,
            heads: Vec::new(),
            crcs: Vec::new(),
            chunk: crc32fast::Hasher::new(),
            chunk_blocks: 0,
            buf: Vec::with_capacity(BLOCK * 12 + PAD),
        }
    }

    /// The next row, in key order.
    pub(crate) fn push(&mut self, key: [Id; 3]) -> std::io::Result<()> {
        self.block.push(key);
        if self.block.len() == BLOCK {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> std::io::Result<()> {
        let rows = &self.block;
        let mut base = [0u32; 3];
        let mut w = [0u8; 3];
        self.buf.clear();
        for c in 0..3 {
            let lo = rows.iter().map(|r| r[c]).min().unwrap_or(0);
            let hi = rows.iter().map(|r| r[c]).max().unwrap_or(0);
            base[c] = lo;
            w[c] = width(hi - lo);
            let start = self.buf.len();
            self.buf.resize(start + BLOCK * w[c] as usize / 8, 0);
            if w[c] == 0 {
                continue;
            }
            let bits = &mut self.buf[start..];
            for (j, r) in rows.iter().enumerate() {
                let v = u64::from(r[c] - lo);
                let at = j * w[c] as usize;
                let (byte, shift) = (at >> 3, at & 7);
                // Up to 39 bits from `byte` on: five bytes at most.
                let x = v << shift;
                for (k, b) in bits[byte..].iter_mut().take(5).enumerate() {
                    *b |= (x >> (8 * k)) as u8;
                }
            }
        }
        self.heads.extend_from_slice(&self.written.to_le_bytes());
        for b in base {
            self.heads.extend_from_slice(&b.to_le_bytes());
        }
        self.heads.extend_from_slice(&[w[0], w[1], w[2], 0]);
        self.chunk.update(&self.buf);
        self.out.write_all(&self.buf)?;
        self.written += self.buf.len() as u64;
        self.block.clear();
        self.chunk_blocks += 1;
        if self.chunk_blocks == BLOCKS_PER_CHUNK {
            self.end_chunk();
        }
        Ok(())
    }

    fn end_chunk(&mut self) {
        let mut h = std::mem::replace(&mut self.chunk, crc32fast::Hasher::new());
        let first = self.heads.len() - self.chunk_blocks * HEAD;
        h.update(&self.heads[first..]);
        self.crcs.push(h.finalize());
        self.chunk_blocks = 0;
    }

    /// Writes the last block and the padding; what is left to write.
    pub(crate) fn finish(mut self) -> std::io::Result<(W, Packed)> {
        if !self.block.is_empty() {
            self.flush_block()?;
        }
        if self.chunk_blocks > 0 {
            self.end_chunk();
        }
        self.out.write_all(&[0u8; PAD])?;
        Ok((
            self.out,
            Packed {
                bits_len: self.written + PAD as u64,
                heads: self.heads,
                crcs: self.crcs,
            },
        ))
    }
}

/// One packed permutation read in place from a mapping, each chunk checked before its first
/// read.
pub(crate) struct PackedRows {
    map: Arc<memmap2::Mmap>,
    /// The starts of the bits and of the headers in the mapping (read through these on the
    /// read path, see [`PackedRows::row`]).
    bits_at: *const u8,
    heads_at: *const u8,
    /// Byte ranges of the mapping: the bits (padding included), the headers, the checksums.
    bits: Range<usize>,
    heads: Range<usize>,
    crcs: Range<usize>,
    rows: usize,
    marks: ChunkMarks,
    /// Each block's first key, filled in when its chunk is checked (the chunk's bits are read
    /// then anyway): a search finds its block here, in memory, and reads the bits of that
    /// block alone. Zeroed pages until then, so a large store's untouched blocks cost nothing.
    firsts: Box<[AtomicU32]>,
    health: Arc<Health>,
    /// What the damage report calls it ("the SPO index").
    name: &'static str,
}

// SAFETY: the pointers point into the mapping `map`, which the struct keeps alive and nobody
// writes; reading it from any thread is fine.
unsafe impl Send for PackedRows {}
// SAFETY: as above; the marks are atomics.
unsafe impl Sync for PackedRows {}

impl std::fmt::Debug for PackedRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedRows")
            .field("name", &self.name)
            .field("rows", &self.rows)
            .finish()
    }
}

/// The sections of one packed permutation in a mapping are not as its row count says.
#[derive(Debug)]
pub(crate) struct BadExtent;

impl PackedRows {
    /// `rows` rows packed at `bits`, `heads` and `crcs` of `map` (checked against the row
    /// count; their contents are checked chunk by chunk as they are read).
    pub(crate) fn new(
        map: Arc<memmap2::Mmap>,
        rows: usize,
        bits: Range<usize>,
        heads: Range<usize>,
        crcs: Range<usize>,
        health: Arc<Health>,
        name: &'static str,
    ) -> Result<PackedRows, BadExtent> {
        let blocks = rows.div_ceil(BLOCK);
        let chunks = rows.div_ceil(CHUNK);
        let inside = |r: &Range<usize>| r.start <= r.end && r.end <= map.len();
        if !inside(&bits)
            || !inside(&heads)
            || !inside(&crcs)
            || heads.len() != blocks * HEAD
            || crcs.len() != chunks * 4
            || bits.len() < PAD
        {
            return Err(BadExtent);
        }
        Ok(PackedRows {
            bits_at: map[bits.start..].as_ptr(),
            heads_at: map[heads.start..].as_ptr(),
            map,
            bits,
            heads,
            crcs,
            rows,
            marks: ChunkMarks::new(chunks),
            firsts: zeroed(blocks * 3),
            health,
            name,
        })
    }

    /// Rows held.
    pub(crate) fn len(&self) -> usize {
        self.rows
    }

    /// Bytes of the mapping it reads.
    pub(crate) fn mapped_bytes(&self) -> usize {
        self.bits.len() + self.heads.len() + self.crcs.len()
    }

    /// Row `i`'s key (`i` below [`len`](Self::len)).
    #[inline]
    pub(crate) fn row(&self, i: usize) -> [Id; 3] {
        assert!(i < self.rows, "row {i} of {}", self.rows);
        if !self.whole(i >> CHUNK_SHIFT) {
            return [Id::MAX; 3];
        }
        let h = self.head(i >> BLOCK_SHIFT);
        let j = i & (BLOCK - 1);
        let at1 = h.at + BLOCK * h.width[0] as usize / 8;
        let at2 = at1 + BLOCK * h.width[1] as usize / 8;
        [
            self.value_at(h.at, h.base[0], h.width[0], j),
            self.value_at(at1, h.base[1], h.width[1], j),
            self.value_at(at2, h.base[2], h.width[2], j),
        ]
    }

    /// Column `c` of row `i` (`i` below [`len`](Self::len)).
    #[inline]
    pub(crate) fn value(&self, c: usize, i: usize) -> Id {
        assert!(i < self.rows, "row {i} of {}", self.rows);
        if !self.whole(i >> CHUNK_SHIFT) {
            return Id::MAX;
        }
        let h = self.head(i >> BLOCK_SHIFT);
        let at = h.at
            + (0..c)
                .map(|k| BLOCK * h.width[k] as usize / 8)
                .sum::<usize>();
        self.value_at(at, h.base[c], h.width[c], i & (BLOCK - 1))
    }

    /// Column `c` of rows `range`, in order, to `f` until it returns false (then false): each
    /// block's header read once, each chunk checked on its first read (a damaged chunk's
    /// values read as `Id::MAX`, as [`value`](Self::value) gives them).
    pub(crate) fn for_each_value(
        &self,
        c: usize,
        range: Range<usize>,
        mut f: impl FnMut(Id) -> bool,
    ) -> bool {
        assert!(range.end <= self.rows, "rows {range:?} of {}", self.rows);
        let mut i = range.start;
        while i < range.end {
            let b = i >> BLOCK_SHIFT;
            let end = ((b + 1) << BLOCK_SHIFT).min(range.end);
            if !self.whole(i >> CHUNK_SHIFT) {
                if !(i..end).all(|_| f(Id::MAX)) {
                    return false;
                }
                i = end;
                continue;
            }
            let h = self.head(b);
            let at = h.at
                + (0..c)
                    .map(|k| BLOCK * h.width[k] as usize / 8)
                    .sum::<usize>();
            let first = i & (BLOCK - 1);
            for j in first..first + (end - i) {
                if !f(self.value_at(at, h.base[c], h.width[c], j)) {
                    return false;
                }
            }
            i = end;
        }
        true
    }

    /// Value `j` of the column whose bits start at `at` (of the bits section).
    #[inline]
    fn value_at(&self, at: usize, base: u32, w: u8, j: usize) -> Id {
        if w == 0 {
            return base;
        }
        let bit = j * w as usize;
        // SAFETY: only rows of a chunk found whole are read (`row`, `value`), and its check
        // found each block's columns inside the bits (`at + BLOCK * w / 8` at most their
        // length less the padding); a value's byte lies inside its column, and the padding
        // covers the 8-byte read from it.
        let word =
            unsafe { std::ptr::read_unaligned(self.bits_at.add(at + (bit >> 3)).cast::<u64>()) };
        let word = u64::from_le(word);
        let mask = (1u64 << w) - 1;
        base.wrapping_add(((word >> (bit & 7)) & mask) as u32)
    }

    /// Block `b`'s header (`b` below the block count).
    #[inline]
    fn head(&self, b: usize) -> Head {
        debug_assert!(b < self.rows.div_ceil(BLOCK));
        // SAFETY: `new` found the headers section `HEAD` bytes a block for every block, and
        // every caller's `b` is a block of a row below `rows`.
        let h: &[u8; HEAD] = unsafe { &*self.heads_at.add(b * HEAD).cast() };
        let u32_at = |k: usize| u32::from_le_bytes(h[k..k + 4].try_into().expect("4 bytes"));
        Head {
            at: u64::from_le_bytes(h[..8].try_into().expect("8 bytes")) as usize,
            base: [u32_at(8), u32_at(12), u32_at(16)],
            width: [h[20], h[21], h[22]],
        }
    }

    /// Whether chunk `c` is whole, checking it on its first read.
    #[inline]
    fn whole(&self, c: usize) -> bool {
        match self.marks.state(c) {
            Some(whole) => whole,
            None => self.check(c),
        }
    }

    /// Checks chunk `c`: its checksum, and its headers' extents (each block's bits right
    /// after the previous block's, widths of at most 32 bits, inside the section).
    #[cold]
    fn check(&self, c: usize) -> bool {
        let blocks =
            (c * BLOCKS_PER_CHUNK)..((c + 1) * BLOCKS_PER_CHUNK).min(self.rows.div_ceil(BLOCK));
        let last_chunk = blocks.end == self.rows.div_ceil(BLOCK);
        let mut extent: Option<Range<usize>> = None;
        let mut shape_ok = true;
        let mut next = None;
        for b in blocks.clone() {
            let h = self.head(b);
            let size: usize = h.width.iter().map(|&w| BLOCK * w as usize / 8).sum();
            if h.width.iter().any(|&w| w > 32) || next.is_some_and(|n| n != h.at) {
                shape_ok = false;
                break;
            }
            next = Some(h.at + size);
            let start = extent.as_ref().map_or(h.at, |e| e.start);
            extent = Some(start..h.at + size);
        }
        let ext = extent.unwrap_or(0..0);
        let bits_len = self.bits.len() - PAD;
        shape_ok &= ext.start <= ext.end && ext.end <= bits_len;
        // The chunk's bits end where the next chunk's begin: the last chunk's at the padding.
        shape_ok &= !last_chunk || ext.end == bits_len;
        let whole = shape_ok && {
            let mut h = crc32fast::Hasher::new();
            h.update(&self.map[self.bits.start + ext.start..self.bits.start + ext.end]);
            h.update(
                &self.map
                    [self.heads.start + blocks.start * HEAD..self.heads.start + blocks.end * HEAD],
            );
            let at = self.crcs.start + c * 4;
            h.finalize() == u32::from_le_bytes(self.map[at..at + 4].try_into().expect("4 bytes"))
        };
        if whole {
            for b in blocks {
                let h = self.head(b);
                let first = [
                    self.value_at(h.at, h.base[0], h.width[0], 0),
                    self.value_at(
                        h.at + BLOCK * h.width[0] as usize / 8,
                        h.base[1],
                        h.width[1],
                        0,
                    ),
                    self.value_at(
                        h.at + BLOCK * (h.width[0] as usize + h.width[1] as usize) / 8,
                        h.base[2],
                        h.width[2],
                        0,
                    ),
                ];
                for (k, v) in first.into_iter().enumerate() {
                    // Published by the marks' release below.
                    self.firsts[3 * b + k].store(v, Ordering::Relaxed);
                }
            }
        } else {
            let rows = c * CHUNK..((c + 1) * CHUNK).min(self.rows);
            self.health.report(format!(
                "{} is damaged in its rows {}..{} (chunk {c}: checksum mismatch)",
                self.name, rows.start, rows.end
            ));
        }
        self.marks.set(c, whole);
        whole
    }

    /// Block `b`'s first key (its chunk checked first; a damaged one's reads as ids past every
    /// term).
    #[inline]
    fn first_key(&self, b: usize) -> [Id; 3] {
        if !self.whole((b * BLOCK) >> CHUNK_SHIFT) {
            return [Id::MAX; 3];
        }
        std::array::from_fn(|k| self.firsts[3 * b + k].load(Ordering::Relaxed))
    }

    /// The first row of `within` whose key does not satisfy `pred` (which holds for the keys
    /// of a prefix of `within`, sorted): a search over the blocks' first keys in memory, then
    /// over the rows of one block.
    pub(crate) fn partition_point(
        &self,
        within: Range<usize>,
        pred: impl Fn([Id; 3]) -> bool,
    ) -> usize {
        assert!(within.end <= self.rows, "rows {within:?} of {}", self.rows);
        // The blocks whose first row lies in `within`.
        let (b_lo, b_hi) = (within.start.div_ceil(BLOCK), within.end.div_ceil(BLOCK));
        let (mut lo, mut hi) = (b_lo, b_hi.max(b_lo));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.first_key(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // Every block before `lo` starts with a key that satisfies `pred`, block `lo` (if in
        // `within`) with one that does not: the answer lies from block `lo - 1`'s first row
        // to block `lo`'s.
        let from = if lo > b_lo {
            (lo - 1) * BLOCK
        } else {
            within.start
        };
        let to = (lo * BLOCK).clamp(within.start, within.end);
        let (mut lo, mut hi) = (from.max(within.start), to);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.row(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Checks every chunk not checked yet.
    pub(crate) fn check_all(&self) {
        for c in 0..self.rows.div_ceil(CHUNK) {
            self.whole(c);
        }
    }

    /// Chunks checked so far, of all.
    pub(crate) fn checked(&self) -> (usize, usize) {
        (self.marks.checked_count(), self.rows.div_ceil(CHUNK))
    }
}

/// `n` zeroed atomics, from zeroed memory (pages the kernel gives on first touch).
fn zeroed(n: usize) -> Box<[AtomicU32]> {
    let v = vec![0u32; n].into_boxed_slice();
    let len = v.len();
    let ptr = Box::into_raw(v).cast::<AtomicU32>();
    // SAFETY: `AtomicU32` has the size, alignment and bit validity of `u32`, so a boxed slice
    // of one is a boxed slice of the other, freed with the same layout.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) }
}

/// A block header.
struct Head {
    at: usize,
    base: [u32; 3],
    width: [u8; 3],
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(rows: &[[Id; 3]]) -> (Arc<memmap2::Mmap>, PackedRows, Arc<Health>) {
        let (bits, p) = {
            let mut w = PackWriter::new(Vec::new());
            for &r in rows {
                w.push(r).unwrap();
            }
            w.finish().unwrap()
        };
        let mut file = bits.clone();
        file.extend_from_slice(&p.heads);
        for c in &p.crcs {
            file.extend_from_slice(&c.to_le_bytes());
        }
        let mut m = memmap2::MmapMut::map_anon(file.len().max(1)).unwrap();
        m[..file.len()].copy_from_slice(&file);
        let map = Arc::new(m.make_read_only().unwrap());
        let health = Arc::new(Health::default());
        let (b, h) = (bits.len(), p.heads.len());
        let r = PackedRows::new(
            map.clone(),
            rows.len(),
            0..b,
            b..b + h,
            b + h..b + h + p.crcs.len() * 4,
            health.clone(),
            "the test index",
        )
        .unwrap();
        (map, r, health)
    }

    fn sample(n: usize) -> Vec<[Id; 3]> {
        let mut x = 12345u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut v: Vec<[Id; 3]> = (0..n)
            .map(|i| {
                let r = rnd();
                [
                    (i / 7) as Id + 1,
                    (r % 40) as Id + 1,
                    // Wide values now and then: every width up to 32 bits.
                    if r % 97 == 0 {
                        u32::MAX - (r % 3) as u32
                    } else {
                        (r >> 20) as Id % 100_000
                    },
                ]
            })
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn every_row_reads_back_as_written() {
        for n in [
            0,
            1,
            255,
            256,
            257,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            3 * CHUNK + 77,
        ] {
            let rows = sample(n);
            let (_m, p, health) = pack(&rows);
            assert_eq!(p.len(), n);
            for (i, r) in rows.iter().enumerate() {
                assert_eq!(p.row(i), *r, "row {i} of {n}");
                for (c, &v) in r.iter().enumerate() {
                    assert_eq!(p.value(c, i), v);
                }
            }
            assert_eq!(health.damage(), None);
            assert_eq!(p.checked().0, p.checked().1);
        }
    }

    /// A column read a block at a time gives each row's value in order, from any row to any
    /// other, and stops where its consumer says.
    #[test]
    fn a_column_read_by_blocks_is_the_rows_values() {
        let rows = sample(2 * CHUNK + 300);
        let (_m, p, _) = pack(&rows);
        for range in [0..0, 0..1, 3..255, 255..257, 100..CHUNK + 5, 0..rows.len()] {
            for c in 0..3 {
                let mut got = Vec::new();
                assert!(p.for_each_value(c, range.clone(), |v| {
                    got.push(v);
                    true
                }));
                let want: Vec<Id> = rows[range.clone()].iter().map(|r| r[c]).collect();
                assert_eq!(got, want, "column {c} of {range:?}");
            }
        }
        let mut n = 0;
        assert!(!p.for_each_value(1, 10..CHUNK, |_| {
            n += 1;
            n < 300
        }));
        assert_eq!(n, 300);
    }

    #[test]
    fn a_search_finds_what_a_scan_finds() {
        let rows = sample(2 * CHUNK + 1000);
        let (_m, p, _) = pack(&rows);
        let mut x = 99u64;
        for _ in 0..300 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (a, b) = (
                (x >> 20) as usize % rows.len(),
                (x >> 40) as usize % rows.len(),
            );
            let within = a.min(b)..a.max(b) + 1;
            let probe = rows[(x >> 8) as usize % rows.len()];
            for k in 0..=3 {
                let prefix = &probe[..k];
                let lt = |key: [Id; 3]| key[..k] < *prefix;
                let want = within.start + rows[within.clone()].iter().filter(|r| lt(**r)).count();
                assert_eq!(
                    p.partition_point(within.clone(), lt),
                    want,
                    "{within:?} {prefix:?}"
                );
            }
        }
        assert_eq!(p.partition_point(5..5, |_| true), 5);
    }

    #[test]
    fn a_damaged_chunk_is_found_on_its_first_read_and_only_its_rows_are_lost() {
        let rows = sample(3 * CHUNK);
        let (bits, p) = {
            let mut w = PackWriter::new(Vec::new());
            for &r in &rows {
                w.push(r).unwrap();
            }
            w.finish().unwrap()
        };
        // Flip one bit in the middle chunk's bits.
        let second = u64::from_le_bytes(p.heads[BLOCKS_PER_CHUNK * HEAD..][..8].try_into().unwrap())
            as usize;
        let mut file = bits.clone();
        file[second + 100] ^= 0x10;
        file.extend_from_slice(&p.heads);
        for c in &p.crcs {
            file.extend_from_slice(&c.to_le_bytes());
        }
        let mut m = memmap2::MmapMut::map_anon(file.len()).unwrap();
        m.copy_from_slice(&file);
        let map = Arc::new(m.make_read_only().unwrap());
        let health = Arc::new(Health::default());
        let (b, h) = (bits.len(), p.heads.len());
        let r = PackedRows::new(
            map,
            rows.len(),
            0..b,
            b..b + h,
            b + h..file.len(),
            health.clone(),
            "SPO",
        )
        .unwrap();
        assert_eq!(r.row(5), rows[5]);
        assert_eq!(health.damage(), None, "the first chunk is whole");
        assert_eq!(r.checked(), (1, 3), "only the chunk read was checked");
        assert_eq!(r.row(CHUNK + 3), [Id::MAX; 3]);
        let mut column = Vec::new();
        r.for_each_value(2, CHUNK - 2..CHUNK + 2, |v| {
            column.push(v);
            true
        });
        assert_eq!(
            column,
            [rows[CHUNK - 2][2], rows[CHUNK - 1][2], Id::MAX, Id::MAX]
        );
        let d = health.damage().expect("found on the first read");
        assert!(
            d.contains("SPO") && d.contains(&format!("rows {}..{}", CHUNK, 2 * CHUNK)),
            "{d}"
        );
        assert_eq!(r.row(2 * CHUNK + 9), rows[2 * CHUNK + 9]);
    }

    #[test]
    fn extents_that_disagree_with_the_row_count_are_refused() {
        let rows = sample(1000);
        let (m, _p, health) = pack(&rows);
        assert!(PackedRows::new(
            m.clone(),
            1000,
            0..8,
            8..8 + 3 * HEAD,
            0..4,
            health.clone(),
            "x"
        )
        .is_err());
        assert!(PackedRows::new(
            m.clone(),
            1000,
            0..8,
            8..8 + 4 * HEAD,
            0..8,
            health.clone(),
            "x"
        )
        .is_err());
        assert!(PackedRows::new(m.clone(), 1000, 0..m.len() + 1, 0..0, 0..0, health, "x").is_err());
    }
}
