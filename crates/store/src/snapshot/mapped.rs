//! The mapped snapshot (format 3, written by earlier builds; opened, and written by the tests
//! of its reader): a store that opens by mapping its file — no full read, no
//! hash table built, no statistics recounted — and reads its columns and terms in place.
//!
//! Layout, all integers little-endian, every section at a 4 KiB boundary:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `NFRDF\0` and format version 3 (u16) |
//! | 8 × 4 | terms, arena bytes, quads, graphs |
//! | 4 + 4 | sections (15), reserved |
//! | 24 × 15 | per section: offset u64, length u64, CRC-32 u32, reserved u32 |
//! | 4 | CRC-32 of the header before it |
//! | sections | the terms' keys; their end offsets (u64); the term ids sorted by key (u32); the graph table (id u64, first row u64); the statistics; SPO, POS, OSP, each as three columns of u32 |
//!
//! At open the header and the small sections (graph table, statistics) are checked, and every
//! section's extent against the file; the columns and the terms are used where they lie, so a
//! 25M-triple store opens in the time it takes to map it. Their checksums are checked in the
//! background ([`Health`]): one thread reads the big sections once, and a damaged one makes
//! every later query and update of the store fail with an error that names the section.
//! `nearflow check store FILE` waits for the check. Reading a damaged section before its check
//! ends never panics: a term key out of place reads as `dict::DAMAGED`, an id past the terms as
//! a damaged term too.
//!
//! The indexes are the partitions of each permutation as slices of the mapped columns (one per
//! NUMA node, as a loaded store has): their pages come in on first touch, and a scan runs on
//! its partition's node, so on a multi-node machine the page cache fills near its readers —
//! not bound as a loaded store's copies are. Writes go to a delta beside them (`delta.rs`); a
//! checkpoint writes a new snapshot and maps it again (`db.rs`).

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_split::{PartInfo, SplitBy, SplittableData};
use nearflow_topo::Machine;

use super::common::{graph_table, SnapshotError, MAGIC};
use super::format::{io_at, Format, WriteSeek};
use crate::base::Base;
use crate::dict::{Dict, MappedTerms};
use crate::health::Health;
use crate::shared::Shared;
use crate::store::{Columns, Permutation, PredStats, Stats, Store};
use crate::term::Id;

pub(crate) const VERSION: u16 = 3;

/// Format 3 as a [`Format`].
pub struct Mapped;

impl Format for Mapped {
    fn version(&self) -> u16 {
        VERSION
    }

    fn write(
        &self,
        store: &Store,
        mut file: &mut dyn WriteSeek,
        path: &Path,
    ) -> Result<(), SnapshotError> {
        write(store, &mut file).map_err(io_at(path))
    }

    fn open(&self, path: &Path, machine: &Machine) -> Result<Store, SnapshotError> {
        open(path, machine)
    }
}
const PAGE: u64 = 4096;
const SECTIONS: usize = 15;
const HEADER: usize = 8 + 32 + 8 + 24 * SECTIONS + 4;

/// The sections, in file order, by name (the name an error gives).
const NAMES: [&str; SECTIONS] = [
    "term keys",
    "term ends",
    "term index",
    "graph table",
    "statistics",
    "SPO column 1",
    "SPO column 2",
    "SPO column 3",
    "POS column 1",
    "POS column 2",
    "POS column 3",
    "OSP column 1",
    "OSP column 2",
    "OSP column 3",
    "reserved",
];

fn align(n: u64) -> u64 {
    n.div_ceil(PAGE) * PAGE
}

/// Writes `store` in format 3 to `file` (the caller's temporary file, empty).
pub(crate) fn write<F: Write + Seek>(store: &Store, file: &mut F) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 20, &mut *file);
    let out = &mut out;
    let dict = store.dict();
    let n_terms = dict.len();
    let mut arena_len = 0u64;
    let mut ends = Vec::with_capacity(n_terms * 8);
    for k in dict.keys() {
        arena_len += k.len() as u64;
        ends.extend_from_slice(&arena_len.to_le_bytes());
    }
    let mut sorted: Vec<u32> = (1..=n_terms as Id).collect();
    sorted.sort_unstable_by(|&a, &b| dict.key_of(a).cmp(&dict.key_of(b)));
    let sorted: Vec<u8> = sorted.iter().flat_map(|x| x.to_le_bytes()).collect();
    let graphs = store.graphs();
    let mut table = Vec::with_capacity(graphs.len() * 16);
    for &(g, start) in graphs {
        table.extend_from_slice(&u64::from(g).to_le_bytes());
        table.extend_from_slice(&(start as u64).to_le_bytes());
    }
    let stats = encode_stats(store.stats());
    let quads = store.len();
    // Section lengths and offsets.
    let mut lens = [0u64; SECTIONS];
    lens[0] = arena_len;
    lens[1] = ends.len() as u64;
    lens[2] = sorted.len() as u64;
    lens[3] = table.len() as u64;
    lens[4] = stats.len() as u64;
    for l in &mut lens[5..14] {
        *l = quads * 4;
    }
    let mut offsets = [0u64; SECTIONS];
    let mut at = align(HEADER as u64);
    for i in 0..SECTIONS {
        offsets[i] = at;
        at = align(at + lens[i]);
    }
    // The checksums: the small sections now, the arena and the columns as they are written
    // (their CRCs go in the header, which is written last by seeking back).
    let mut crcs = [0u32; SECTIONS];
    crcs[1] = crc32fast::hash(&ends);
    crcs[2] = crc32fast::hash(&sorted);
    crcs[3] = crc32fast::hash(&table);
    crcs[4] = crc32fast::hash(&stats);
    out.write_all(&vec![0u8; offsets[0] as usize])?;
    let mut written = offsets[0];
    let pad_to = |out: &mut BufWriter<&mut F>, written: &mut u64, to: u64| {
        out.write_all(&vec![0u8; (to - *written) as usize])?;
        *written = to;
        std::io::Result::Ok(())
    };
    // Arena.
    let mut h = crc32fast::Hasher::new();
    for k in dict.keys() {
        h.update(k.as_bytes());
        out.write_all(k.as_bytes())?;
    }
    crcs[0] = h.finalize();
    written += arena_len;
    for (i, bytes) in [(1, &ends), (2, &sorted), (3, &table), (4, &stats)] {
        pad_to(out, &mut written, offsets[i])?;
        out.write_all(bytes)?;
        written += bytes.len() as u64;
    }
    let mut i = 5;
    let mut buf = Vec::with_capacity(1 << 16);
    for order in Permutation::ALL {
        for c in 0..3 {
            pad_to(out, &mut written, offsets[i])?;
            let mut h = crc32fast::Hasher::new();
            for part in store.perm(order).partitions() {
                for chunk in part.data.column(c).chunks(1 << 14) {
                    buf.clear();
                    for x in chunk {
                        buf.extend_from_slice(&x.to_le_bytes());
                    }
                    h.update(&buf);
                    out.write_all(&buf)?;
                }
            }
            crcs[i] = h.finalize();
            written += quads * 4;
            i += 1;
        }
    }
    pad_to(out, &mut written, offsets[SECTIONS - 1])?;
    crcs[SECTIONS - 1] = crc32fast::hash(&[]);
    // The header, at the start.
    let mut head = Vec::with_capacity(HEADER);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    for n in [n_terms as u64, arena_len, quads, graphs.len() as u64] {
        head.extend_from_slice(&n.to_le_bytes());
    }
    head.extend_from_slice(&(SECTIONS as u32).to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    for i in 0..SECTIONS {
        head.extend_from_slice(&offsets[i].to_le_bytes());
        head.extend_from_slice(&lens[i].to_le_bytes());
        head.extend_from_slice(&crcs[i].to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes());
    }
    let crc = crc32fast::hash(&head);
    head.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(head.len(), HEADER);
    out.flush()?;
    let file = out.get_mut();
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&head)?;
    file.seek(SeekFrom::End(0))?;
    file.flush()
}

pub(super) fn encode_stats(st: &Stats) -> Vec<u8> {
    let mut out = Vec::new();
    for n in [st.triples, st.subjects, st.predicates, st.objects] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    let mut per: Vec<(&Id, &PredStats)> = st.per_predicate.iter().collect();
    per.sort_unstable_by_key(|(id, _)| **id);
    out.extend_from_slice(&(per.len() as u64).to_le_bytes());
    for (id, p) in per {
        out.extend_from_slice(&u64::from(*id).to_le_bytes());
        for n in [p.triples, p.subjects, p.objects] {
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
    out
}

pub(super) fn decode_stats(b: &[u8], terms: u64) -> Result<Stats, String> {
    let word = |i: usize| -> Result<u64, String> {
        b.get(i * 8..i * 8 + 8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .ok_or_else(|| "it is cut short".to_owned())
    };
    let mut st = Stats {
        triples: word(0)?,
        subjects: word(1)?,
        predicates: word(2)?,
        objects: word(3)?,
        ..Stats::default()
    };
    let n = word(4)? as usize;
    if b.len() != 40 + n * 32 {
        return Err("its length does not match its count".into());
    }
    for k in 0..n {
        let id = word(5 + 4 * k)?;
        if id == 0 || id > terms {
            return Err(format!("predicate id {id} is out of range"));
        }
        st.per_predicate.insert(
            id as Id,
            PredStats {
                triples: word(6 + 4 * k)?,
                subjects: word(7 + 4 * k)?,
                objects: word(8 + 4 * k)?,
            },
        );
    }
    Ok(st)
}

/// Opens a format-3 snapshot by mapping it (see the module's text).
pub(crate) fn open(path: &Path, machine: &Machine) -> Result<Store, SnapshotError> {
    let invalid = |why: String| SnapshotError::Invalid {
        path: path.to_owned(),
        why,
    };
    let file = File::open(path).map_err(|error| SnapshotError::Io {
        path: path.to_owned(),
        error,
    })?;
    // SAFETY: the snapshot is written to a temporary file and renamed into place, never
    // changed where it lies, so the mapping's bytes do not change under the readers (a
    // replacement is a new file; this mapping keeps the old one's pages).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|error| SnapshotError::Io {
        path: path.to_owned(),
        error,
    })?;
    let map = Arc::new(map);
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
    let (terms, arena, quads, n_graphs) = (u64_at(8), u64_at(16), u64_at(24), u64_at(32));
    let n_sections = u32::from_le_bytes(head[40..44].try_into().expect("4 bytes")) as usize;
    if n_sections != SECTIONS {
        return Err(invalid(format!(
            "{n_sections} sections, format 3 has {SECTIONS}"
        )));
    }
    if terms >= Id::MAX as u64 {
        return Err(invalid(format!("{terms} terms do not fit 32-bit ids")));
    }
    let mut sec = [(0u64, 0u64, 0u32); SECTIONS];
    for (i, s) in sec.iter_mut().enumerate() {
        let at = 48 + 24 * i;
        *s = (
            u64_at(at),
            u64_at(at + 8),
            u32::from_le_bytes(head[at + 16..at + 20].try_into().expect("4 bytes")),
        );
    }
    let want = |i: usize| -> u64 {
        match i {
            0 => arena,
            1 => terms * 8,
            2 => terms * 4,
            3 => n_graphs * 16,
            4 => sec[4].1,
            5..=13 => quads * 4,
            _ => 0,
        }
    };
    for (i, &(off, len, _)) in sec.iter().enumerate() {
        let bad = off % PAGE != 0
            || off < HEADER as u64
            || len != want(i)
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
    let bytes_of = |i: usize| &map[sec[i].0 as usize..(sec[i].0 + sec[i].1) as usize];
    // The small sections, checked now.
    for i in [3, 4] {
        if crc32fast::hash(bytes_of(i)) != sec[i].2 {
            return Err(invalid(format!(
                "the section '{}' is damaged (checksum mismatch)",
                NAMES[i]
            )));
        }
    }
    let graphs = graph_table(bytes_of(3), terms, quads).map_err(invalid)?;
    let stats = decode_stats(bytes_of(4), terms)
        .map_err(|why| invalid(format!("the section 'statistics' is bad: {why}")))?;
    if stats.triples != quads {
        return Err(invalid("the statistics do not count the quads".into()));
    }
    if cfg!(target_endian = "big") {
        return Err(invalid(
            "format 3 is read in place, little-endian; this machine is big-endian".into(),
        ));
    }
    let terms_of = Arc::new(MappedTerms {
        bytes: Shared::mapped(&map, sec[0].0 as usize, arena as usize),
        ends: Shared::mapped(&map, sec[1].0 as usize, terms as usize),
        terms: terms as usize,
        coded: false,
        sorted: Shared::mapped(&map, sec[2].0 as usize, terms as usize),
        ordered: 0,
        as_read: None,
        whole: Arc::default(),
        kind_ids: Default::default(),
    });
    let dict = Dict::of_mapped(terms_of.clone());
    let parts = nearflow_split::layout(machine, SplitBy::Node).len().max(1);
    let n = quads as usize;
    let mut perms = Vec::with_capacity(3);
    for o in 0..3 {
        let col = |c: usize, r: std::ops::Range<usize>| -> Shared<Id> {
            Shared::mapped(&map, sec[5 + 3 * o + c].0 as usize + r.start * 4, r.len())
        };
        perms.push(
            SplittableData::build(machine, SplitBy::Node, |info: &PartInfo| {
                let r = (n * info.index / parts)..(n * (info.index + 1) / parts);
                Columns::plain(
                    [col(0, r.clone()), col(1, r.clone()), col(2, r.clone())],
                    r.start,
                )
            })
            .map_err(|e| SnapshotError::Store(crate::store::StoreError::Split(e)))?,
        );
    }
    let perms: [SplittableData<Columns>; 3] = perms
        .try_into()
        .map_err(|_| invalid("three permutations".into()))?;
    let health = Arc::new(Health::default());
    // The big sections' checksums, in the background, read through the file (not the
    // mapping, whose pages would count as the process's own once touched).
    {
        let weak = Arc::downgrade(&health);
        let file = file.try_clone().map_err(|error| SnapshotError::Io {
            path: path.to_owned(),
            error,
        })?;
        let big: Vec<(usize, u64, u64, u32)> = [0, 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13]
            .iter()
            .map(|&i| (i, sec[i].0, sec[i].1, sec[i].2))
            .collect();
        let layout = (sec[0].0, sec[0].1, sec[1].0, terms);
        let terms = Arc::downgrade(&terms_of);
        std::thread::Builder::new()
            .name("nearflow-check".into())
            .spawn(move || {
                // Behind the queries: on a machine of few cores the check should not take a
                // worker's core (nice 10 for this thread only, as Linux allows).
                // SAFETY: setpriority on this thread's own id.
                unsafe {
                    libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
                }
                check(&file, &big, &weak, &terms, layout)
            })
            .map_err(|error| SnapshotError::Io {
                path: path.to_owned(),
                error,
            })?;
    }
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

/// Whether the terms are whole: each key's extent inside the arena and increasing, on a
/// character boundary, the arena UTF-8, each key's tag valid. One pass over the ends and the
/// arena together (both in order), read through `file` a chunk at a time.
fn terms_whole(
    file: &File,
    arena_at: u64,
    arena_len: u64,
    ends_at: u64,
    n_terms: u64,
) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    const CHUNK: u64 = 4 << 20;
    let io = |e: std::io::Error| format!("reading it: {e}");
    let mut ends = vec![0u8; CHUNK as usize];
    let mut arena = Vec::with_capacity(CHUNK as usize + 4);
    // `arena` holds the arena's bytes from `base` to `loaded`.
    let (mut base, mut loaded) = (0u64, 0u64);
    let mut prev = 0u64;
    let mut term = 0u64;
    while term < n_terms {
        let n = (n_terms - term).min(CHUNK / 8);
        ends.resize((n * 8) as usize, 0);
        file.read_exact_at(&mut ends, ends_at + term * 8)
            .map_err(io)?;
        for w in ends.chunks_exact(8) {
            term += 1;
            let e = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            if e <= prev || e > arena_len {
                return Err(format!("term {term} has a bad extent"));
            }
            // Load the arena up to `e`.
            while loaded < e {
                // Keep from this term's start onwards.
                let from = (prev - base) as usize;
                arena.drain(..from);
                base = prev;
                let n = (arena_len - loaded).min(CHUNK) as usize;
                let at = arena.len();
                arena.resize(at + n, 0);
                file.read_exact_at(&mut arena[at..], arena_at + loaded)
                    .map_err(io)?;
                loaded += n as u64;
            }
            let key = &arena[(prev - base) as usize..(e - base) as usize];
            if key[0] > crate::term::TAG_TYPED {
                return Err(format!("term {term} is not a valid term key"));
            }
            if std::str::from_utf8(key).is_err() {
                return Err(format!("term {term} is not UTF-8"));
            }
            prev = e;
        }
    }
    if prev != arena_len {
        return Err("the term keys have trailing bytes".into());
    }
    Ok(())
}

/// Checks the sections' checksums, a chunk at a time, until done or the store is gone; then
/// that the terms are whole (after which reading a term is a slice).
fn check(
    file: &File,
    sections: &[(usize, u64, u64, u32)],
    health: &std::sync::Weak<Health>,
    terms: &std::sync::Weak<MappedTerms>,
    (arena_at, arena_len, ends_at, n_terms): (u64, u64, u64, u64),
) {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 4 << 20];
    for &(i, off, len, crc) in sections {
        let mut h = crc32fast::Hasher::new();
        let mut at = off;
        let mut ok = true;
        while at < off + len {
            if health.strong_count() == 0 {
                return;
            }
            let n = ((off + len - at) as usize).min(buf.len());
            if file.read_exact_at(&mut buf[..n], at).is_err() {
                ok = false;
                break;
            }
            h.update(&buf[..n]);
            at += n as u64;
        }
        if !ok || h.finalize() != crc {
            if let Some(hl) = health.upgrade() {
                let _ = hl.damage.set(format!(
                    "the section '{}' (bytes {off}..{}) is damaged (checksum mismatch)",
                    NAMES[i],
                    off + len
                ));
                hl.done.store(true, Ordering::Release);
            }
            return;
        }
    }
    // Read through the file too, so that the check adds nothing to what the process maps.
    let shape = terms_whole(file, arena_at, arena_len, ends_at, n_terms);
    if shape.is_ok() {
        if let Some(t) = terms.upgrade() {
            t.set_whole();
        }
    }
    if let Some(hl) = health.upgrade() {
        if let Err(why) = shape {
            let _ = hl.damage.set(format!(
                "the section 'term keys' or 'term ends' is damaged: {why}"
            ));
        }
        hl.done.store(true, Ordering::Release);
    }
}
