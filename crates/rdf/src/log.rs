//! The update log's format: how records are framed, and how a log is read back, telling a
//! record cut short at the end (a write a kill or a crash interrupted, never acknowledged) from
//! damage (a record that was acknowledged and is now unreadable).
//!
//! Layout (little-endian): a 36-byte header (`NFLOG\0`, format u16, the last sequence number
//! the snapshot is known to hold u64, the fingerprint of the snapshot the log follows — its
//! length u64 and its first page's hash u64 — and CRC-32 of those), then records. Formats 1
//! and 2 have a 20-byte header without the fingerprint. A log follows one snapshot: opened
//! beside another (another store's, or an older copy of its own), its records are not
//! replayed (`db.rs`). Format 3, the one written, frames a record as format 2 does: `[payload length u32][CRC-32 of that length u32][CRC-32 of the
//! payload u32][payload]`: the length has its own checksum, so a damaged length is seen as
//! damage and never taken for a record that reaches past the end. Format 1 (`[length
//! u32][CRC-32 of the payload u32][payload]`) is still read; a writable open rewrites it as
//! format 2. A payload is `seq u64, changes u32`, and per change `holds u8` and four terms
//! (subject, predicate, object, graph; the default graph as an empty key) each `length u32,
//! key bytes`.
//!
//! What ends a log's good records:
//! - the end of the file: a clean end;
//! - a torn tail, dropped: fewer bytes than a record's frame, a frame whose (checked) length
//!   reaches past the end, a last record whose payload does not match its checksum, or nothing
//!   but zero bytes (a file system that extended the file before its data reached the disk);
//! - damage, refused with the byte: anything else (a length whose checksum fails, a payload
//!   that fails with records after it, a record that does not decode, sequence numbers out of
//!   order).

use std::ops::Range;

use crate::snapshot::segment::Fingerprint;
use crate::term::TAG_TYPED;

pub(crate) const MAGIC: &[u8; 6] = b"NFLOG\0";
/// The format written.
pub(crate) const VERSION: u16 = 3;
/// The header's length in the format written.
pub(crate) const HEADER: usize = 36;
/// The header's length in formats 1 and 2.
const HEADER_2: usize = 20;
/// The most a record may hold (a longer one is damage, not an update).
const MAX_RECORD: usize = 1 << 30;

/// One record's changes: each quad as four term keys (the graph's empty for the default
/// graph) and whether the store holds it after the update.
pub(crate) type Changes = Vec<([String; 4], bool)>;

/// A log's header for the snapshot of fingerprint `snap`, holding the updates up to
/// `base_seq`.
pub(crate) fn header(base_seq: u64, snap: Fingerprint) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..6].copy_from_slice(MAGIC);
    h[6..8].copy_from_slice(&VERSION.to_le_bytes());
    h[8..16].copy_from_slice(&base_seq.to_le_bytes());
    h[16..32].copy_from_slice(&snap.to_bytes());
    let crc = crc32fast::hash(&h[..32]);
    h[32..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// `payload` framed as a record of the format written, appended to `out`.
pub(crate) fn frame(payload: &[u8], out: &mut Vec<u8>) {
    let len = (payload.len() as u32).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc32fast::hash(&len).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// How the good records of a log end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// At the end of the file.
    Clean,
    /// At a torn tail of this many bytes.
    Torn(u64),
    /// At damage.
    Damaged {
        /// The byte where the damaged record starts.
        at: usize,
        /// Its number, counting from 1.
        record: usize,
        /// What is wrong, in words.
        why: String,
    },
}

/// A log read: its header, its good records and how they end.
pub(crate) struct Scan {
    /// The header's format.
    pub version: u16,
    /// The last sequence number the snapshot holds.
    pub base_seq: u64,
    /// The snapshot the log follows (`None`: a log of format 1 or 2, which does not say).
    pub snap: Option<Fingerprint>,
    /// The last good record's sequence number (`base_seq` when there is none).
    pub last_seq: u64,
    /// The good records' payloads, decoded, in order.
    pub records: Vec<Changes>,
    /// The good records' payloads, as byte ranges of the log.
    pub payloads: Vec<Range<usize>>,
    /// Bytes of the log up to the end of the last good record.
    pub good: usize,
    /// How they end.
    pub end: End,
}

/// One record at the start of `rest` in format `version` (`zeros`: `rest` is nothing but zero
/// bytes): its payload's range within `rest` and its decoded content, or why it is not one
/// (`Err((true, _))`: a torn tail; `Err((false, why))`: damage).
type Framed = Result<(Range<usize>, u64, Changes), (bool, String)>;

fn record(rest: &[u8], version: u16, zeros: bool) -> Framed {
    if zeros {
        return Err((true, "zero bytes to the end".into()));
    }
    let frame = if version == 1 { 8 } else { 12 };
    if rest.len() < frame {
        return Err((true, "a frame cut short".into()));
    }
    let word = |i: usize| u32::from_le_bytes(rest[i..i + 4].try_into().expect("4 bytes"));
    let len = word(0) as usize;
    if version >= 2 && crc32fast::hash(&rest[..4]) != word(4) {
        return Err((false, "its length does not match its checksum".into()));
    }
    if len > MAX_RECORD {
        return Err((version == 1, format!("it claims {len} bytes")));
    }
    if frame + len > rest.len() {
        // A checked length that reaches past the end: a write cut short.
        return Err((true, "it reaches past the end".into()));
    }
    let payload = &rest[frame..frame + len];
    if crc32fast::hash(payload) != word(frame - 4) {
        // The last record, whole in length but not in content, was cut short too.
        return Err((
            frame + len == rest.len(),
            "its checksum does not match".into(),
        ));
    }
    let (seq, changes) = decode(payload).map_err(|why| (false, why))?;
    Ok((frame..frame + len, seq, changes))
}

/// Reads a log's bytes; `Err` for a header that is not a nearflow log's (in words).
pub(crate) fn scan(bytes: &[u8]) -> Result<Scan, String> {
    let not_a_log = || "in its header (not a nearflow update log?)".to_owned();
    if bytes.len() < HEADER_2 || &bytes[..6] != MAGIC {
        return Err(not_a_log());
    }
    let version = u16::from_le_bytes([bytes[6], bytes[7]]);
    if !(1..=VERSION).contains(&version) {
        return Err(format!(
            "in its header: format {version}, this build reads 1 to {VERSION}"
        ));
    }
    let header = if version >= 3 { HEADER } else { HEADER_2 };
    let sum = header - 4;
    if bytes.len() < header || crc32fast::hash(&bytes[..sum]).to_le_bytes() != bytes[sum..header] {
        return Err(not_a_log());
    }
    let base_seq = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let snap = (version >= 3)
        .then(|| Fingerprint::from_bytes(bytes[16..32].try_into().expect("16 bytes")));
    let mut s = Scan {
        version,
        base_seq,
        snap,
        last_seq: base_seq,
        records: Vec::new(),
        payloads: Vec::new(),
        good: header,
        end: End::Clean,
    };
    let nonzero_end = nonzero_end(bytes);
    while s.good < bytes.len() {
        let at = s.good;
        let damaged = |why: String, s: &Scan| End::Damaged {
            at,
            record: s.records.len() + 1,
            why,
        };
        match record(&bytes[at..], version, at >= nonzero_end) {
            Ok((range, seq, changes)) => {
                if seq <= s.last_seq {
                    s.end = damaged(format!("record {seq} follows record {}", s.last_seq), &s);
                    break;
                }
                s.last_seq = seq;
                s.records.push(changes);
                s.good = at + range.end;
                s.payloads.push(at + range.start..at + range.end);
            }
            Err((true, why)) => {
                // A tail is torn only where nothing readable follows it: a damaged length
                // in a log of format 1 reaches past the end as a cut write does.
                s.end = if readable_after(bytes, version, at, s.last_seq) > 0 {
                    damaged(format!("{why}, with readable records after it"), &s)
                } else {
                    End::Torn((bytes.len() - at) as u64)
                };
                break;
            }
            Err((false, why)) => {
                s.end = damaged(why, &s);
                break;
            }
        }
    }
    Ok(s)
}

/// How many records can still be read after damage at byte `at` (searching byte by byte for
/// the next frame that checks out, then following the frames): the acknowledged updates that
/// keeping only the log's good prefix drops, the damaged one not counted.
pub(crate) fn readable_after(bytes: &[u8], version: u16, at: usize, last_seq: u64) -> usize {
    let mut n = 0;
    let mut last = last_seq;
    let mut i = at + 1;
    let end = nonzero_end(bytes);
    while i < end {
        match record(&bytes[i..], version, false) {
            Ok((range, seq, _)) if seq > last => {
                n += 1;
                last = seq;
                i += range.end;
            }
            _ => i += 1,
        }
    }
    n
}

/// The length of `bytes` without its trailing zero bytes.
fn nonzero_end(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

/// A payload's sequence number and changes; why not, in words.
fn decode(p: &[u8]) -> Result<(u64, Changes), String> {
    let mut at = 0;
    let mut take = |n: usize| -> Result<&[u8], String> {
        let s = p.get(at..at + n).ok_or("it ends inside a change")?;
        at += n;
        Ok(s)
    };
    let seq = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
    let n = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes")) as usize;
    let mut out = Vec::with_capacity(n.min(1 << 20));
    for _ in 0..n {
        let holds = match take(1)?[0] {
            0 => false,
            1 => true,
            b => return Err(format!("a change flag of {b}")),
        };
        let mut terms: [String; 4] = Default::default();
        for (i, t) in terms.iter_mut().enumerate() {
            let len = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes")) as usize;
            let s = std::str::from_utf8(take(len)?).map_err(|_| "a term is not UTF-8")?;
            let valid = match s.as_bytes().first() {
                None => i == 3,
                Some(&tag) => tag <= TAG_TYPED,
            };
            if !valid {
                return Err("a term key is not valid".into());
            }
            *t = s.to_owned();
        }
        out.push((terms, holds));
    }
    if at != p.len() {
        return Err("bytes after its last change".into());
    }
    Ok((seq, out))
}
