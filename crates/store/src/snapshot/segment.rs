//! A delta segment: what a version of a large store holds beyond its snapshot and what of the
//! snapshot it lacks, written beside the snapshot (`STORE.delta`) by a checkpoint instead of
//! the whole store, so that a checkpoint writes about what the updates changed.
//!
//! A segment belongs to one snapshot: it names the snapshot's fingerprint (its length and an
//! FNV-1a hash of its first page, which in format 5 holds the CRC-32 of the rest of the file).
//! Not a CRC of the page: a page that ends with its own CRC and zeros has the same CRC as every
//! other such page. A segment whose snapshot has since been replaced — a checkpoint that rewrote the
//! snapshot and died before it removed the segment — is stale: the snapshot already holds
//! everything it held, and it is ignored (removed by the next writer).
//!
//! Layout, all integers little-endian:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `NFDLT\0` and version 1 (u16) |
//! | 8 + 8 | the snapshot's length, the FNV-1a hash of its first page (`whole.rs`'s, over 8-byte words) |
//! | 8 | the sequence number of the last update it holds |
//! | 8 × 4 | the snapshot's terms, the terms added after them, quads added, quads removed |
//! | | each added term: its key's length (u32) and key, in id order (they follow the snapshot's ids) |
//! | 16 × n | the added quads, then the removed ones, each `[graph, s, p, o]` (u32s), sorted |
//! | 4 | CRC-32 of everything before it |
//!
//! Reading one checks the checksum, every key (UTF-8, a known kind, not already a term of the
//! snapshot) and every quad (ids in range, sorted), so damage is an error, never a silently
//! different store. Whether each added quad is absent from the snapshot and each removed one
//! present takes a lookup in the snapshot per quad, pages read at random: `nearflow check
//! store` checks that ([`Store::delta_agrees`]), an open does not.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::common::SnapshotError;
use crate::delta::{quad_of, Delta, Row};
use crate::dict::Dict;
use crate::layout::DEFAULT_GRAPH;
use crate::store::{Permutation, Store};
use crate::term::{Id, TermRef, TAG_TYPED};

const MAGIC: &[u8; 6] = b"NFDLT\0";
const VERSION: u16 = 1;
const HEADER: usize = 8 + 16 + 8 + 32;
/// The bytes of a snapshot its fingerprint covers.
const FIRST_PAGE: usize = 4096;

/// The segment beside snapshot `path`.
pub fn segment_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".delta");
    PathBuf::from(p)
}

/// What tells one written snapshot from another: its length and its first page's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    len: u64,
    hash: u64,
}

impl Fingerprint {
    /// The snapshot's length in bytes.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// As 16 bytes: the length, then the hash (little-endian).
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..].copy_from_slice(&self.hash.to_le_bytes());
        b
    }

    /// From [`to_bytes`](Self::to_bytes).
    pub fn from_bytes(b: &[u8; 16]) -> Fingerprint {
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        Fingerprint {
            len: word(0),
            hash: word(8),
        }
    }

    /// A value no snapshot has (a file's length is never `u64::MAX`): a record's mark for
    /// "the store is being replaced whole".
    pub const REPLACING: Fingerprint = Fingerprint {
        len: u64::MAX,
        hash: 0,
    };

    /// No fingerprint (a record's mark for "none"): a snapshot is never empty.
    pub const NONE: Fingerprint = Fingerprint { len: 0, hash: 0 };
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes, {:016x}", self.len, self.hash)
    }
}

/// The fingerprint of the snapshot at `path`.
pub fn fingerprint(path: &Path) -> Result<Fingerprint, SnapshotError> {
    let io = |error| SnapshotError::Io {
        path: path.to_owned(),
        error,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    let mut page = Vec::with_capacity(FIRST_PAGE);
    (&mut f)
        .take(FIRST_PAGE as u64)
        .read_to_end(&mut page)
        .map_err(io)?;
    let mut sum = super::whole::Sum::new();
    sum.add(&page);
    sum.end();
    Ok(Fingerprint {
        len,
        hash: sum.value,
    })
}

/// Writes `store`'s delta as the segment of the snapshot at `path` (fingerprint `base`),
/// atomically; `seq` is the last update it holds. `store` must lie over that snapshot: its
/// indexes, and a dictionary that is the snapshot's or one over it. Returns the bytes written.
pub fn write(
    path: &Path,
    base: Fingerprint,
    seq: u64,
    store: &Store,
) -> Result<u64, SnapshotError> {
    let dict = store.dict();
    let under = dict.under().map_or(dict.len(), |u| u.len());
    let d = store.delta();
    let (added, removed) = (
        d.added_rows(Permutation::Spo),
        d.removed_rows(Permutation::Spo),
    );
    let mut out = Vec::with_capacity(HEADER + 16 * (added.len() + removed.len()) + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&base.len.to_le_bytes());
    out.extend_from_slice(&base.hash.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    for n in [under, dict.len() - under, added.len(), removed.len()] {
        out.extend_from_slice(&(n as u64).to_le_bytes());
    }
    for id in under + 1..=dict.len() {
        let key = dict.key_of(id as Id);
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(key.as_bytes());
    }
    for row in added.iter().chain(removed) {
        for id in row {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    let target = segment_path(path);
    super::write_atomically(&target, |mut file, tmp| {
        file.write_all(&out)
            .and_then(|()| file.sync_all())
            .map_err(|error| SnapshotError::Io {
                path: tmp.to_owned(),
                error,
            })?;
        super::undamaged(store, &target)
    })?;
    Ok(out.len() as u64)
}

/// The fingerprint of the snapshot the segment beside `path` belongs to, read from its
/// header (`None`: no segment); a header that is not a segment's is damage.
pub fn base_of(path: &Path) -> Result<Option<Fingerprint>, SnapshotError> {
    let target = segment_path(path);
    let mut head = [0u8; 24];
    let read = std::fs::File::open(&target).and_then(|mut f| f.read_exact(&mut head));
    match read {
        Ok(()) if &head[..6] == MAGIC => Ok(Some(Fingerprint::from_bytes(
            head[8..24].try_into().expect("16 bytes"),
        ))),
        Ok(()) => Err(SnapshotError::Segment {
            path: target,
            why: "its header is not a segment's".into(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(SnapshotError::Segment {
            path: target,
            why: "it is shorter than its header".into(),
        }),
        Err(error) => Err(SnapshotError::Io {
            path: target,
            error,
        }),
    }
}

/// What [`read`] found beside a snapshot.
pub enum Found {
    /// No segment.
    Absent,
    /// A segment of another snapshot (one this snapshot replaced, with everything it held).
    Stale,
    /// The snapshot's segment: the version it makes, and the last update it holds.
    Applied(Store, u64),
}

/// Reads the segment beside the snapshot at `path` (fingerprint `print`) and applies it to
/// `base`, the version that snapshot opens as.
pub fn read(path: &Path, print: Fingerprint, base: &Store) -> Result<Found, SnapshotError> {
    let target = segment_path(path);
    let bytes = match std::fs::read(&target) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Absent),
        Err(error) => {
            return Err(SnapshotError::Io {
                path: target,
                error,
            })
        }
    };
    let damaged = |why: String| SnapshotError::Segment {
        path: target.clone(),
        why,
    };
    if bytes.len() < HEADER + 4 || &bytes[..6] != MAGIC {
        return Err(damaged("it is not a delta segment, or is cut short".into()));
    }
    let version = u16::from_le_bytes([bytes[6], bytes[7]]);
    if version != VERSION {
        return Err(damaged(format!(
            "format {version}; this build reads format {VERSION}"
        )));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body) != u32::from_le_bytes(tail.try_into().expect("4 bytes")) {
        return Err(damaged("checksum mismatch".into()));
    }
    let u64_at = |i: usize| u64::from_le_bytes(body[i..i + 8].try_into().expect("8 bytes"));
    let written_for = Fingerprint {
        len: u64_at(8),
        hash: u64_at(16),
    };
    if written_for != print {
        return Ok(Found::Stale);
    }
    let seq = u64_at(24);
    let (under, terms, n_added, n_removed) = (u64_at(32), u64_at(40), u64_at(48), u64_at(56));
    let held = base.dict().len() as u64;
    if under != held {
        return Err(damaged(format!(
            "it follows {under} terms, the snapshot holds {held}"
        )));
    }
    let mut at = HEADER;
    let mut dict = Dict::over(base.dict.clone());
    for i in 0..terms {
        let key = body
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .and_then(|n| body.get(at + 4..at + 4 + n))
            .ok_or_else(|| damaged(format!("term {} is cut short", held + i + 1)))?;
        let key = std::str::from_utf8(key)
            .ok()
            .filter(|k| k.as_bytes().first().is_some_and(|&t| t <= TAG_TYPED))
            .ok_or_else(|| damaged(format!("term {} is not a term's key", held + i + 1)))?;
        let want = held + i + 1;
        let id = dict
            .intern(TermRef::decode(key))
            .map_err(|e| damaged(e.to_string()))?;
        if u64::from(id) != want {
            return Err(damaged(format!(
                "term {want} is already term {id} of the snapshot or the segment"
            )));
        }
        at += 4 + key.len();
    }
    n_added
        .checked_add(n_removed)
        .and_then(|n| n.checked_mul(16))
        .filter(|&n| n == (body.len() - at) as u64)
        .ok_or_else(|| damaged("its quads do not fill it".into()))?;
    let last = dict.len() as u64;
    let rows = |from: usize, n: u64, what: &str| -> Result<Vec<[Id; 4]>, SnapshotError> {
        let mut quads = Vec::with_capacity(n as usize);
        let mut prev: Option<Row> = None;
        for c in body[from..from + 16 * n as usize].chunks_exact(16) {
            let row: Row = std::array::from_fn(|j| {
                u32::from_le_bytes(c[4 * j..4 * j + 4].try_into().expect("4 bytes"))
            });
            let in_range = |x: Id| x >= 1 && u64::from(x) <= last;
            if !(row[0] == DEFAULT_GRAPH || in_range(row[0]))
                || !row[1..].iter().all(|&x| in_range(x))
            {
                return Err(damaged(format!("a quad {what} names an id out of range")));
            }
            if prev.is_some_and(|p| p >= row) {
                return Err(damaged(format!("the quads {what} are out of order")));
            }
            prev = Some(row);
            quads.push(quad_of(&row));
        }
        Ok(quads)
    };
    let added = rows(at, n_added, "added")?;
    let removed = rows(at + 16 * n_added as usize, n_removed, "removed")?;
    Ok(Found::Applied(
        base.with_delta(Arc::new(dict), Delta::of(added, removed)),
        seq,
    ))
}
