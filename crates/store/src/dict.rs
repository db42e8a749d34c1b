//! The dictionary: every distinct term once, as a dense id (LAS §6.1: the store holds id
//! triples, terms are looked up only to compare values and to print results).
//!
//! Layout: the terms' keys (`TermRef::encode`) one after another in one byte arena, an end
//! offset per term, and a hash table of ids keyed by the bytes they point at — about
//! `key length + 8 + 4·(1/load)` bytes per term, no per-term allocation.
//!
//! A dictionary may lie over another ([`Dict::over`]): the terms an update adds after a store
//! was built live in a small dictionary of their own whose ids continue the shared one's, so
//! a new version of the store copies only the new terms, never the whole dictionary, and
//! queries running on the old version keep theirs. [`Dict::flattened`] folds the two into one
//! (the background merge), keeping every id.

use std::borrow::Cow;
use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

use crate::coded;
use crate::shared::Shared;
use crate::term::{Id, TermCow, TermRef};

/// The terms of a mapped snapshot (`snapshot/mapped.rs`, `snapshot/packed.rs`): the arena and
/// end offsets as written, and the ids sorted by key, so that a lookup is a binary search and
/// no hash table is built at open (ids `1..=ordered` are in key order already, and `sorted`
/// holds the others). A damaged section never panics here: a key out of its arena or not
/// UTF-8 reads as [`DAMAGED`] (and the checks say where).
pub struct MappedTerms {
    pub(crate) bytes: Shared<u8>,
    /// Each term's end offset in `bytes`; when `coded`, each block's start.
    pub(crate) ends: Shared<u64>,
    /// Terms.
    pub(crate) terms: usize,
    /// The keys are front-coded in blocks (`coded.rs`, format 5), else one after another.
    pub(crate) coded: bool,
    pub(crate) sorted: Shared<u32>,
    /// Ids `1..=ordered` are in key order (not in `sorted`).
    pub(crate) ordered: usize,
    /// The checks of a snapshot checked as it is read, chunk by chunk (formats 5 and 4); `None` for
    /// one checked in the background (format 3: then `whole`).
    pub(crate) as_read: Option<TermChecks>,
    /// Set once the background check has found the terms whole: every key in its arena, on
    /// character boundaries, valid UTF-8, with a valid tag. Until then each read checks its
    /// key; after, a read is a slice (the checks cost 10 % of a query that compares many
    /// terms).
    pub(crate) whole: Arc<std::sync::atomic::AtomicBool>,
    /// The ids of each kind of term (by tag: IRIs, blank nodes, simple, language-tagged and
    /// typed literals) among ids `1..=ordered`, found on first use.
    pub(crate) kind_ids: std::sync::OnceLock<[std::ops::Range<Id>; 5]>,
}

/// The key a damaged term of a mapped snapshot reads as (an IRI that says so).
pub const DAMAGED: &str = "\u{1}urn:nearflow:damaged-term";

/// Terms per checked chunk of the keys and their ends.
pub(crate) const TERM_CHUNK: usize = 256;
/// Entries per checked chunk of the sorted ids.
pub(crate) const SORTED_CHUNK: usize = 1024;

/// The chunk-by-chunk checks of a mapped snapshot's terms: a chunk of [`TERM_CHUNK`] terms is
/// whole when the CRC-32 of its end offsets and then its keys' bytes is the one written, its
/// ends increase inside the arena, and its keys are UTF-8 with a valid tag; a chunk of
/// [`SORTED_CHUNK`] sorted ids when the CRC-32 of its bytes is. Each is checked before its first
/// read.
pub(crate) struct TermChecks {
    pub(crate) keys: crate::health::ChunkMarks,
    pub(crate) key_crcs: Shared<u32>,
    pub(crate) sorted: crate::health::ChunkMarks,
    pub(crate) sorted_crcs: Shared<u32>,
    pub(crate) health: Arc<crate::health::Health>,
}

impl MappedTerms {
    fn len(&self) -> usize {
        self.terms
    }

    /// Block `b`'s bytes (format 5), unchecked: the caller has checked its chunk.
    #[inline]
    fn block(&self, b: usize) -> &[u8] {
        let start = self.ends[b] as usize;
        let end = self
            .ends
            .get(b + 1)
            .map_or(self.bytes.len(), |&e| e as usize);
        self.bytes.get(start..end).unwrap_or(&[])
    }

    /// Keys in block `b` (format 5).
    fn block_len(&self, b: usize) -> usize {
        (self.terms - b * coded::BLOCK).min(coded::BLOCK)
    }

    /// Whether term chunk `c` is whole, checking it on its first read.
    #[inline]
    fn key_chunk_whole(&self, ch: &TermChecks, c: usize) -> bool {
        match ch.keys.state(c) {
            Some(whole) => whole,
            None => self.check_key_chunk(ch, c),
        }
    }

    #[cold]
    fn check_key_chunk(&self, ch: &TermChecks, c: usize) -> bool {
        let ids = c * TERM_CHUNK..((c + 1) * TERM_CHUNK).min(self.len());
        let whole = (|| {
            if self.coded {
                return self.check_coded_chunk(ch, c, ids.clone());
            }
            let mut prev = if ids.start == 0 {
                0
            } else {
                self.ends[ids.start - 1]
            };
            let first = prev;
            for &e in &self.ends[ids.clone()] {
                if e <= prev || e as usize > self.bytes.len() {
                    return false;
                }
                let key = &self.bytes[prev as usize..e as usize];
                if key[0] > crate::term::TAG_TYPED || std::str::from_utf8(key).is_err() {
                    return false;
                }
                prev = e;
            }
            let mut h = crc32fast::Hasher::new();
            for e in &self.ends[ids.clone()] {
                h.update(&e.to_le_bytes());
            }
            h.update(&self.bytes[first as usize..prev as usize]);
            ch.key_crcs.get(c) == Some(&h.finalize())
        })();
        if !whole {
            ch.health.report(format!(
                "the terms {}..={} are damaged (term chunk {c}: checksum mismatch or a bad key)",
                ids.start + 1,
                ids.end
            ));
        }
        ch.keys.set(c, whole);
        whole
    }

    /// Whether front-coded chunk `c` (terms `ids`, 0-based) is whole: the CRC-32 of its
    /// blocks' starts, the end of its last block and its bytes is the one written, the starts
    /// increase inside the arena, and each block holds its keys exactly (`coded::check`).
    fn check_coded_chunk(&self, ch: &TermChecks, c: usize, ids: std::ops::Range<usize>) -> bool {
        let blocks = ids.start / coded::BLOCK..ids.end.div_ceil(coded::BLOCK);
        let Some(starts) = self.ends.get(blocks.clone()) else {
            return false;
        };
        let end = self
            .ends
            .get(blocks.end)
            .map_or(self.bytes.len() as u64, |&e| e);
        let mut prev = starts.first().copied().unwrap_or(end);
        for &e in starts[1..].iter().chain([&end]) {
            if e <= prev || e as usize > self.bytes.len() {
                return false;
            }
            prev = e;
        }
        let mut h = crc32fast::Hasher::new();
        for e in starts {
            h.update(&e.to_le_bytes());
        }
        h.update(&end.to_le_bytes());
        h.update(&self.bytes[starts[0] as usize..end as usize]);
        if ch.key_crcs.get(c) != Some(&h.finalize()) {
            return false;
        }
        blocks
            .clone()
            .all(|b| coded::check(self.block(b), self.block_len(b), crate::term::TAG_TYPED))
    }

    /// Sorted id `i`, its chunk checked on its first read (`None` when damaged).
    #[inline]
    fn sorted_at(&self, i: usize) -> Option<Id> {
        let Some(ch) = &self.as_read else {
            return Some(self.sorted[i]);
        };
        let c = i / SORTED_CHUNK;
        let whole = match ch.sorted.state(c) {
            Some(whole) => whole,
            None => {
                let r = c * SORTED_CHUNK..((c + 1) * SORTED_CHUNK).min(self.sorted.len());
                let mut h = crc32fast::Hasher::new();
                for x in &self.sorted[r.clone()] {
                    h.update(&x.to_le_bytes());
                }
                let whole = ch.sorted_crcs.get(c) == Some(&h.finalize());
                if !whole {
                    ch.health.report(format!(
                        "the term index is damaged in its entries {}..{} (checksum mismatch)",
                        r.start, r.end
                    ));
                }
                ch.sorted.set(c, whole);
                whole
            }
        };
        whole.then(|| self.sorted[i])
    }

    /// Checks every chunk of the terms not checked yet.
    pub(crate) fn check_all(&self) {
        if let Some(ch) = &self.as_read {
            for c in 0..self.len().div_ceil(TERM_CHUNK) {
                self.key_chunk_whole(ch, c);
            }
            for c in 0..self.sorted.len().div_ceil(SORTED_CHUNK) {
                self.sorted_at(c * SORTED_CHUNK);
            }
        }
    }

    /// The key of term `id` (1-based).
    #[inline]
    fn key(&self, id: Id) -> Cow<'_, str> {
        if self.coded {
            // Allocated only for a key that is not read in place, at its size.
            let mut buf = Vec::new();
            return match self.coded_key(id, &mut buf) {
                Some(k) => Cow::Borrowed(k),
                // SAFETY: `coded_key` fills `buf` only with a key of a checked chunk, and the
                // check found each of its keys valid UTF-8 (the mapping does not change).
                None => Cow::Owned(unsafe { String::from_utf8_unchecked(buf) }),
            };
        }
        Cow::Borrowed(self.plain_key(id))
    }

    /// The key of term `id` of front-coded terms: in place when it heads its block, else
    /// decoded into `buf` (`None`). A damaged chunk reads as [`DAMAGED`].
    #[inline]
    fn coded_key<'a>(&'a self, id: Id, buf: &mut Vec<u8>) -> Option<&'a str> {
        let i = (id as usize).wrapping_sub(1);
        let whole = match &self.as_read {
            Some(ch) => i < self.len() && self.key_chunk_whole(ch, i / TERM_CHUNK),
            None => false,
        };
        if !whole {
            return Some(DAMAGED);
        }
        let (b, j) = (i / coded::BLOCK, i % coded::BLOCK);
        let block = self.block(b);
        if j == 0 {
            // SAFETY: the chunk's check found every key of its blocks valid UTF-8.
            return coded::head(block).map(|k| unsafe { std::str::from_utf8_unchecked(k) });
        }
        match coded::nth(block, j, buf) {
            Some(()) => None,
            None => Some(DAMAGED),
        }
    }

    /// The key of term `id` (1-based) of keys one after another.
    #[inline]
    fn plain_key(&self, id: Id) -> &str {
        let i = (id as usize).wrapping_sub(1);
        if let Some(ch) = &self.as_read {
            if i < self.len() && self.key_chunk_whole(ch, i / TERM_CHUNK) {
                let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
                let end = self.ends[i] as usize;
                // SAFETY: the chunk's check found each of its keys' extents inside the arena
                // and increasing, and each key valid UTF-8; the mapping's bytes do not change.
                return unsafe {
                    std::str::from_utf8_unchecked(self.bytes.get_unchecked(start..end))
                };
            }
            return DAMAGED;
        }
        if self.whole.load(std::sync::atomic::Ordering::Acquire) && i < self.ends.len() {
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            let end = self.ends[i] as usize;
            // SAFETY: `whole` is set only after the background check (`mapped::terms_whole`)
            // found every key's extent inside the arena and increasing, and each key valid
            // UTF-8; the mapping's bytes do not change (see `mapped::open`).
            return unsafe { std::str::from_utf8_unchecked(self.bytes.get_unchecked(start..end)) };
        }
        self.checked_key(i)
    }

    /// [`key`](Self::key) before the terms are known whole (`i`: 0-based).
    fn checked_key(&self, i: usize) -> &str {
        let start = if i == 0 {
            Some(0)
        } else {
            self.ends.get(i - 1).map(|&e| e as usize)
        };
        let end = self.ends.get(i).map(|&e| e as usize);
        match (start, end) {
            (Some(s), Some(e)) if s < e && e <= self.bytes.len() => {
                match std::str::from_utf8(&self.bytes[s..e]) {
                    Ok(k) if k.as_bytes()[0] <= crate::term::TAG_TYPED => k,
                    _ => DAMAGED,
                }
            }
            _ => DAMAGED,
        }
    }

    /// Marks the terms whole (see `whole`): by the background check, once it has found every
    /// key's extent, boundaries, UTF-8 and tag right (`snapshot/mapped.rs`).
    pub(crate) fn set_whole(&self) {
        self.whole.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The ids among `1..=ordered` whose keys are of kind `tag` (a run: the keys are in
    /// order, and a key starts with its kind).
    fn ordered_of_kind(&self, tag: u8) -> std::ops::Range<Id> {
        let n = self.ordered.min(self.len());
        // The first id whose kind is `t` or after.
        let first = |t: u8| {
            let (mut lo, mut hi) = (1, n + 1);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if self.key(mid as Id).as_bytes()[0] < t {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo as Id
        };
        first(tag)..first(tag + 1)
    }

    fn lookup(&self, key: &str) -> Option<Id> {
        // Ids `1..=ordered` first, by id.
        let ordered = self.ordered.min(self.len());
        if self.coded {
            if let Some(id) = self.coded_lookup(key, ordered) {
                return Some(id);
            }
        } else {
            let (mut lo, mut hi) = (1, ordered + 1);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match self.plain_key(mid as Id).cmp(key) {
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                    std::cmp::Ordering::Equal => return Some(mid as Id),
                }
            }
        }
        let n = self.sorted.len();
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let id = self.sorted_at(mid)?;
            if id == 0 || id as usize > self.len() {
                return None;
            }
            match (*self.key(id)).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(id),
            }
        }
        None
    }

    /// The id among `1..=ordered` (in key order) of `key`, front-coded: a binary search over
    /// the blocks' first keys, in place, then a scan of one block.
    fn coded_lookup(&self, key: &str, ordered: usize) -> Option<Id> {
        let mut buf = Vec::new();
        // The first block whose first key is after `key`.
        let (mut lo, mut hi) = (0, ordered.div_ceil(coded::BLOCK));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let head = self.coded_key((mid * coded::BLOCK + 1) as Id, &mut buf)?;
            if head <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let b = lo.checked_sub(1)?;
        let count = (ordered - b * coded::BLOCK).min(coded::BLOCK);
        let mut found = None;
        coded::scan(self.block(b), count, &mut buf, |j, k| {
            match k.cmp(key.as_bytes()) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Equal => {
                    found = Some((b * coded::BLOCK + j + 1) as Id);
                    false
                }
                std::cmp::Ordering::Greater => false,
            }
        })?;
        found
    }
}

/// Terms ↔ ids.
#[derive(Clone)]
pub struct Dict {
    /// The dictionary this one lies over (ids `1..=under_len` are its terms), if any.
    under: Option<Arc<Dict>>,
    under_len: usize,
    /// Its own terms, from a mapped snapshot (then `bytes`, `ends` and `table` are empty).
    mapped: Option<Arc<MappedTerms>>,
    bytes: String,
    /// `ends[i]`: end of term `i + 1`'s key in `bytes` (its start is the previous end).
    ends: Vec<u64>,
    table: HashTable<Id>,
    hasher: hashbrown::DefaultHashBuilder,
    scratch: String,
}

impl Default for Dict {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Dict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dict")
            .field("terms", &self.len())
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// More distinct terms than ids.
#[derive(Debug, thiserror::Error)]
#[error("more than {} distinct terms: the store's 32-bit ids are exhausted", Id::MAX - 1)]
pub struct DictFull;

impl Dict {
    /// An empty dictionary.
    pub fn new() -> Self {
        Dict {
            under: None,
            under_len: 0,
            mapped: None,
            bytes: String::new(),
            ends: Vec::new(),
            table: HashTable::new(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            scratch: String::new(),
        }
    }

    /// An empty dictionary with room for `terms` terms of `bytes` key bytes in all: it does not
    /// reallocate until one of them is passed ([`room`](Self::room) says how far off that is).
    pub fn with_capacity(terms: usize, bytes: usize) -> Self {
        let mut d = Dict::new();
        d.bytes.reserve_exact(bytes);
        d.ends.reserve_exact(terms);
        d.table.reserve(terms, |_| 0);
        d
    }

    /// Ids of simple literals (`xsd:string`) whose order is their strings' order: for two ids
    /// in this range, comparing the ids compares the strings by code point, as SPARQL's `<`
    /// does, with no term read. The ids a snapshot holds in key order (a store loaded by
    /// `nearflow load`: all of them) give such a run; a dictionary built in memory gives none.
    pub fn ordered_strings(&self) -> std::ops::Range<Id> {
        self.ordered_kind(crate::term::TAG_STRING)
    }

    /// Ids of IRIs in key order: for two ids in this range, comparing the ids compares the
    /// IRIs by code point, as ORDER BY does. As [`ordered_strings`](Self::ordered_strings),
    /// a run only in a snapshot's dictionary.
    pub fn ordered_iris(&self) -> std::ops::Range<Id> {
        self.ordered_kind(crate::term::TAG_IRI)
    }

    /// Ids of blank nodes in key order (as [`ordered_iris`](Self::ordered_iris)).
    pub fn ordered_blanks(&self) -> std::ops::Range<Id> {
        self.ordered_kind(crate::term::TAG_BLANK)
    }

    /// The run of ids in key order whose keys are of kind `tag`.
    fn ordered_kind(&self, tag: u8) -> std::ops::Range<Id> {
        if let Some(u) = &self.under {
            return u.ordered_kind(tag);
        }
        match &self.mapped {
            Some(m) => m
                .kind_ids
                .get_or_init(|| [0, 1, 2, 3, 4].map(|t| m.ordered_of_kind(t)))[usize::from(tag)]
            .clone(),
            None => 0..0,
        }
    }

    /// Bytes of its own terms' keys held in memory (0 for a mapped dictionary).
    pub fn own_key_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Room left before its own terms' storage reallocates: terms, key bytes.
    pub fn room(&self) -> (usize, usize) {
        (
            (self.ends.capacity() - self.ends.len()).min(self.table.capacity() - self.table.len()),
            self.bytes.capacity() - self.bytes.len(),
        )
    }

    /// An empty dictionary over `under`: its ids continue `under`'s, and a term `under` holds
    /// keeps its id. `under` must not itself lie over another (one level: see
    /// [`flattened`](Self::flattened)).
    pub fn over(under: Arc<Dict>) -> Self {
        debug_assert!(under.under.is_none(), "one level of dictionaries");
        Dict {
            under_len: under.len(),
            under: Some(under),
            ..Dict::new()
        }
    }

    /// The dictionary it lies over, if any.
    pub fn under(&self) -> Option<&Arc<Dict>> {
        self.under.as_ref()
    }

    /// A dictionary of a mapped snapshot's terms.
    pub(crate) fn of_mapped(terms: Arc<MappedTerms>) -> Self {
        Dict {
            mapped: Some(terms),
            ..Dict::new()
        }
    }

    /// Whether its own terms are a mapped snapshot's.
    pub fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// Terms of its own (not of the dictionary it lies over).
    pub fn own_len(&self) -> usize {
        match &self.mapped {
            Some(m) => m.len(),
            None => self.ends.len(),
        }
    }

    /// The terms of its own, in id order.
    pub fn own_terms(&self) -> impl Iterator<Item = TermCow<'_>> + '_ {
        (1..=self.own_len() as Id).map(|i| TermCow::of_key(self.own_key(i)))
    }

    /// One dictionary holding the terms of both levels in memory (none mapped), with the same
    /// ids: what may be interned into directly.
    pub fn flattened(&self) -> Dict {
        let mut d = match (&self.under, &self.mapped) {
            (None, None) => return self.clone(),
            (Some(under), _) => under.flattened(),
            (None, Some(_)) => Dict::new(),
        };
        d.scratch = String::new();
        for id in 1..=self.own_len() as Id {
            let k = self.own_key(id);
            d.push_new(&k).expect("no more terms than the two held");
        }
        d
    }

    /// Appends a key known to be new (no lookup first), for [`flattened`](Self::flattened).
    fn push_new(&mut self, key: &str) -> Result<Id, DictFull> {
        debug_assert!(self.under.is_none() && self.mapped.is_none());
        if self.ends.len() >= (Id::MAX - 1) as usize {
            return Err(DictFull);
        }
        let h = self.hasher.hash_one(key);
        Ok(self.append(h, key))
    }

    /// Appends `key` (hash `h`, known absent) to its own terms; its own id.
    fn append(&mut self, h: u64, key: &str) -> Id {
        self.bytes.push_str(key);
        self.ends.push(self.bytes.len() as u64);
        let id = self.ends.len() as Id;
        let (b, e, hasher) = (&self.bytes, &self.ends, &self.hasher);
        self.table.insert_unique(h, id, |&id| {
            let i = id as usize - 1;
            let start = if i == 0 { 0 } else { e[i - 1] as usize };
            hasher.hash_one(&b[start..e[i] as usize])
        });
        id
    }

    /// Every key, in id order (both levels): the snapshot writer's.
    pub(crate) fn keys(&self) -> impl Iterator<Item = Cow<'_, str>> + '_ {
        (1..=self.len() as Id).map(|id| self.key(id))
    }

    /// The key of `id` (any level), for the snapshot writer's sort.
    pub fn key_of(&self, id: Id) -> Cow<'_, str> {
        self.key(id)
    }

    /// Number of terms.
    pub fn len(&self) -> usize {
        self.under_len + self.own_len()
    }

    /// Whether it holds no term.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held (arena, offsets and table, and the dictionary it lies over), for the memory
    /// report.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
            + self.ends.capacity() * 8
            + self.table.capacity() * 5
            + self.under.as_ref().map_or(0, |u| u.heap_bytes())
    }

    /// Bytes held by its own terms (not the dictionary it lies over).
    pub fn own_heap_bytes(&self) -> usize {
        self.bytes.capacity() + self.ends.capacity() * 8 + self.table.capacity() * 5
    }

    /// Bytes of a mapped snapshot it reads.
    pub fn mapped_bytes(&self) -> usize {
        self.mapped.as_ref().map_or(0, |m| {
            m.bytes.mapped_bytes()
                + m.ends.mapped_bytes()
                + m.sorted.mapped_bytes()
                + m.as_read.as_ref().map_or(0, |c| {
                    c.key_crcs.mapped_bytes() + c.sorted_crcs.mapped_bytes()
                })
        }) + self.under.as_ref().map_or(0, |u| u.mapped_bytes())
    }

    fn key(&self, id: Id) -> Cow<'_, str> {
        match &self.under {
            Some(u) if (id as usize) <= self.under_len => u.key(id),
            _ => self.own_key(id - self.under_len as Id),
        }
    }

    /// The key of own id `id` (1-based among its own terms).
    fn own_key(&self, id: Id) -> Cow<'_, str> {
        match &self.mapped {
            Some(m) => m.key(id),
            None => Cow::Borrowed(self.memory_key(id)),
        }
    }

    /// The key of own id `id` of a dictionary in memory (not mapped).
    fn memory_key(&self, id: Id) -> &str {
        let i = id as usize - 1;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.bytes[start..self.ends[i] as usize]
    }

    /// The term of `id` (1..=len): borrowed, or decoded from a front-coded block.
    ///
    /// # Panics
    /// If `id` is 0 or larger than [`len`](Self::len).
    pub fn term(&self, id: Id) -> TermCow<'_> {
        TermCow::of_key(self.key(id))
    }

    /// The term of `id` (1..=len), decoded into `buf` when it is not borrowed: what a loop
    /// over many terms uses, to reuse one buffer.
    ///
    /// # Panics
    /// If `id` is 0 or larger than [`len`](Self::len).
    pub fn term_into<'a>(&'a self, id: Id, buf: &'a mut String) -> TermRef<'a> {
        match self.key(id) {
            Cow::Borrowed(k) => TermRef::decode(k),
            Cow::Owned(k) => {
                *buf = k;
                TermRef::decode(buf)
            }
        }
    }

    /// The id of `term`, if the dictionary holds it.
    pub fn lookup(&self, term: TermRef<'_>) -> Option<Id> {
        let mut key = String::new();
        term.encode(&mut key);
        self.lookup_key(&key)
    }

    fn lookup_key(&self, key: &str) -> Option<Id> {
        if let Some(id) = self.under.as_ref().and_then(|u| u.lookup_key(key)) {
            return Some(id);
        }
        if let Some(m) = &self.mapped {
            return m.lookup(key).map(|id| id + self.under_len as Id);
        }
        let h = self.hasher.hash_one(key);
        self.table
            .find(h, |&id| self.memory_key(id) == key)
            .map(|&id| id + self.under_len as Id)
    }

    /// The id of `term`, adding it when new.
    pub fn intern(&mut self, term: TermRef<'_>) -> Result<Id, DictFull> {
        let mut key = std::mem::take(&mut self.scratch);
        key.clear();
        term.encode(&mut key);
        let r = self.intern_key(&key);
        self.scratch = key;
        r
    }

    fn intern_key(&mut self, key: &str) -> Result<Id, DictFull> {
        if let Some(id) = self.under.as_ref().and_then(|u| u.lookup_key(key)) {
            return Ok(id);
        }
        if self.mapped.is_some() {
            // A mapped dictionary takes no term: in memory first (the store's updates never
            // come here: they intern into a dictionary over this one).
            if let Some(id) = self.lookup_key(key) {
                return Ok(id);
            }
            let under = self.under.take();
            let mut own = Dict {
                mapped: self.mapped.take(),
                ..Dict::new()
            }
            .flattened();
            own.under_len = self.under_len;
            own.under = under;
            *self = own;
        }
        let base = self.under_len as Id;
        let h = self.hasher.hash_one(key);
        let found = self
            .table
            .find(h, |&id| self.memory_key(id) == key)
            .copied();
        if let Some(id) = found {
            return Ok(id + base);
        }
        if self.ends.len() + base as usize >= (Id::MAX - 1) as usize {
            return Err(DictFull);
        }
        Ok(self.append(h, key) + base)
    }

    /// The raw parts, for the snapshot (of a dictionary over none: see
    /// [`flattened`](Self::flattened)).
    pub(crate) fn parts(&self) -> (&[u8], &[u64]) {
        assert!(
            self.under.is_none() && self.mapped.is_none(),
            "a snapshot of a flattened dictionary"
        );
        (self.bytes.as_bytes(), &self.ends)
    }

    /// Rebuilds a dictionary from a snapshot's parts, checking them (a corrupt snapshot is an
    /// error, never a panic later).
    pub(crate) fn from_parts(bytes: Vec<u8>, ends: Vec<u64>) -> Result<Self, String> {
        let bytes = String::from_utf8(bytes).map_err(|e| {
            format!(
                "the term arena is not UTF-8 (at byte {})",
                e.utf8_error().valid_up_to()
            )
        })?;
        let mut prev = 0u64;
        for (i, &e) in ends.iter().enumerate() {
            if e <= prev || e as usize > bytes.len() || !bytes.is_char_boundary(e as usize) {
                return Err(format!("term {} has a bad extent", i + 1));
            }
            let tag = bytes.as_bytes()[prev as usize];
            if tag > crate::term::TAG_TYPED {
                return Err(format!("term {} is not a valid term key", i + 1));
            }
            prev = e;
        }
        if prev as usize != bytes.len() {
            return Err("the term arena has trailing bytes".into());
        }
        let mut d = Dict {
            bytes,
            ends,
            ..Dict::new()
        };
        d.table.reserve(d.ends.len(), |_| 0);
        for id in 1..=d.ends.len() as Id {
            let h = d.hasher.hash_one(d.memory_key(id));
            if d.lookup_key(d.memory_key(id)).is_some() {
                return Err(format!("term {id} appears twice"));
            }
            let (b, e, hasher) = (&d.bytes, &d.ends, &d.hasher);
            d.table.insert_unique(h, id, |&id| {
                let i = id as usize - 1;
                let start = if i == 0 { 0 } else { e[i - 1] as usize };
                hasher.hash_one(&b[start..e[i] as usize])
            });
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_idempotent_and_dense() {
        let mut d = Dict::new();
        let a = d.intern(TermRef::Iri("http://a")).unwrap();
        let b = d.intern(TermRef::string("a")).unwrap();
        assert_eq!((a, b), (1, 2));
        assert_eq!(d.intern(TermRef::Iri("http://a")).unwrap(), a);
        assert_eq!(d.lookup(TermRef::string("a")), Some(b));
        assert_eq!(d.lookup(TermRef::Blank("a")), None);
        assert_eq!(d.term(a), TermRef::Iri("http://a"));
        for i in 0..10_000 {
            let s = format!("http://x/{i}");
            let id = d.intern(TermRef::Iri(&s)).unwrap();
            assert_eq!(id, i + 3);
        }
        assert_eq!(d.lookup(TermRef::Iri("http://x/777")), Some(780));
        let (bytes, ends) = d.parts();
        let e = Dict::from_parts(bytes.to_vec(), ends.to_vec()).unwrap();
        assert_eq!(e.lookup(TermRef::Iri("http://x/777")), Some(780));
        assert_eq!(e.len(), d.len());
    }

    #[test]
    fn a_dictionary_over_another_continues_its_ids_and_flattens_to_the_same() {
        let mut base = Dict::new();
        let a = base.intern(TermRef::Iri("http://a")).unwrap();
        let b = base.intern(TermRef::string("b")).unwrap();
        let base = Arc::new(base);
        let mut top = Dict::over(base.clone());
        assert_eq!(top.len(), 2);
        assert_eq!(
            top.intern(TermRef::Iri("http://a")).unwrap(),
            a,
            "a shared term keeps its id"
        );
        let c = top.intern(TermRef::Blank("c")).unwrap();
        let d = top.intern(TermRef::Iri("http://d")).unwrap();
        assert_eq!((c, d), (3, 4));
        assert_eq!(top.own_len(), 2);
        assert_eq!(top.intern(TermRef::Blank("c")).unwrap(), c);
        assert_eq!(top.lookup(TermRef::string("b")), Some(b));
        assert_eq!(top.term(d), TermRef::Iri("http://d"));
        assert_eq!(top.term(a), TermRef::Iri("http://a"));
        assert_eq!(base.len(), 2, "the shared one is untouched");
        assert_eq!(base.lookup(TermRef::Iri("http://d")), None);
        // A copy goes on apart from the original.
        let mut next = top.clone();
        assert_eq!(next.intern(TermRef::Iri("http://e")).unwrap(), 5);
        assert_eq!(top.lookup(TermRef::Iri("http://e")), None);
        let flat = next.flattened();
        assert!(flat.under().is_none());
        assert_eq!(flat.len(), 5);
        for id in 1..=5 {
            assert_eq!(flat.term(id), next.term(id));
            assert_eq!(flat.lookup(next.term(id).as_ref()), Some(id));
        }
        let (bytes, ends) = flat.parts();
        assert_eq!(
            Dict::from_parts(bytes.to_vec(), ends.to_vec())
                .unwrap()
                .len(),
            5
        );
    }

    #[test]
    fn corrupt_parts_are_refused() {
        let mut d = Dict::new();
        d.intern(TermRef::Iri("http://a")).unwrap();
        d.intern(TermRef::Iri("http://b")).unwrap();
        let (bytes, ends) = d.parts();
        assert!(Dict::from_parts(bytes.to_vec(), vec![ends[0], ends[0]]).is_err());
        assert!(Dict::from_parts(bytes[..5].to_vec(), ends.to_vec()).is_err());
        let mut bad = bytes.to_vec();
        bad[0] = 9;
        assert!(Dict::from_parts(bad, ends.to_vec()).is_err());
        // The same key twice.
        let twice = [
            bytes[..ends[0] as usize].to_vec(),
            bytes[..ends[0] as usize].to_vec(),
        ]
        .concat();
        assert!(Dict::from_parts(twice, vec![ends[0], 2 * ends[0]]).is_err());
        // Not UTF-8, and a key that ends inside a character.
        let mut latin1 = bytes.to_vec();
        latin1[1] = 0xe9;
        assert!(Dict::from_parts(latin1, ends.to_vec()).is_err());
        let mut d = Dict::new();
        d.intern(TermRef::Iri("é")).unwrap();
        let (bytes, ends) = d.parts();
        assert_eq!(ends, [3]);
        assert!(Dict::from_parts(bytes.to_vec(), vec![2, 3]).is_err());
        assert!(Dict::from_parts(bytes.to_vec(), vec![3]).is_ok());
    }
}
