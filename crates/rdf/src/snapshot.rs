//! The binary snapshot: the dictionary and the three sorted permutations as they are in memory,
//! so opening a store is reading it (no parsing, no sorting).
//!
//! Layout, all integers little-endian:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `NFRDF\0` and format version (u16) |
//! | 8 × 3 | terms, arena bytes, triples |
//! | arena | the terms' keys, one after another (`term.rs`) |
//! | 8 × terms | each term's end offset |
//! | 4 × triples × 9 | SPO, POS, OSP, each as three key columns |
//! | 8 | a checksum of everything before it |
//!
//! A short file, a bad checksum, an id out of range or a permutation out of order is an error
//! that names the file; nothing is half-opened.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use nearflow_topo::Machine;

use crate::dict::Dict;
use crate::store::{Order, Store, StoreError};
use crate::term::Id;

const MAGIC: &[u8; 6] = b"NFRDF\0";
const VERSION: u16 = 1;

/// A snapshot could not be written or opened.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
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
}

/// A running checksum (FNV-1a over 8-byte words; enough to catch a damaged file, not a
/// malicious one).
struct Sum(u64);

impl Sum {
    fn add(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0 ^ u64::from_le_bytes(w)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

struct W<'a> {
    out: BufWriter<File>,
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
                source,
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

/// Writes `store` to `path`.
pub fn save(store: &Store, path: &Path) -> Result<(), SnapshotError> {
    let io = |source| SnapshotError::Io {
        path: path.to_owned(),
        source,
    };
    let file = File::create(path).map_err(io)?;
    let mut w = W {
        out: BufWriter::with_capacity(1 << 20, file),
        sum: Sum(0xcbf2_9ce4_8422_2325),
        path,
    };
    let (bytes, ends) = store.dict().parts();
    let mut head = Vec::new();
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    for n in [ends.len() as u64, bytes.len() as u64, store.len()] {
        head.extend_from_slice(&n.to_le_bytes());
    }
    w.put(&head)?;
    w.put(bytes)?;
    let mut e = Vec::with_capacity(ends.len() * 8);
    for x in ends {
        e.extend_from_slice(&x.to_le_bytes());
    }
    w.put(&e)?;
    for order in Order::ALL {
        for c in 0..3 {
            for part in store.perm(order).partitions() {
                w.u32s(&part.data.cols[c])?;
            }
        }
    }
    let sum = w.sum.0;
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
        Ok(v)
    }

    fn short(&self, e: std::io::Error) -> SnapshotError {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            self.invalid("the file is truncated".into())
        } else {
            SnapshotError::Io {
                path: self.path.to_owned(),
                source: e,
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
pub fn open(path: &Path, machine: &Machine) -> Result<Store, SnapshotError> {
    let file = File::open(path).map_err(|source| SnapshotError::Io {
        path: path.to_owned(),
        source,
    })?;
    let file_len = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    let mut r = R {
        inp: BufReader::with_capacity(1 << 20, file),
        sum: Sum(0xcbf2_9ce4_8422_2325),
        path,
    };
    let head = r.take(32)?;
    if &head[..6] != MAGIC {
        return Err(r.invalid("wrong magic number".into()));
    }
    let version = u16::from_le_bytes([head[6], head[7]]);
    if version != VERSION {
        return Err(r.invalid(format!(
            "format version {version}, this build reads {VERSION}"
        )));
    }
    let n = |i: usize| u64::from_le_bytes(head[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"));
    let (terms, arena, triples) = (n(0), n(1), n(2));
    let need = 32u128 + arena as u128 + 8 * terms as u128 + 36 * triples as u128 + 8;
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
    let t = triples as usize;
    let mut perms: [[Vec<Id>; 3]; 3] = Default::default();
    for (o, order) in Order::ALL.iter().enumerate() {
        for col in perms[o].iter_mut() {
            *col = r.u32s(t)?;
        }
        let cols = &perms[o];
        for i in 0..t {
            let key = [cols[0][i], cols[1][i], cols[2][i]];
            if key.iter().any(|&id| id == 0 || id as u64 > terms) {
                return Err(r.invalid(format!("{} row {i} has an id out of range", order.name())));
            }
            if i > 0 && [cols[0][i - 1], cols[1][i - 1], cols[2][i - 1]] >= key {
                return Err(r.invalid(format!("{} is not sorted at row {i}", order.name())));
            }
        }
    }
    let expect = r.sum.0;
    let mut tail = [0u8; 8];
    r.inp.read_exact(&mut tail).map_err(|e| r.short(e))?;
    if u64::from_le_bytes(tail) != expect {
        return Err(r.invalid("checksum mismatch (the file is damaged)".into()));
    }
    let dict = Dict::from_parts(bytes, ends).map_err(|why| r.invalid(why))?;
    Ok(Store::from_sorted(machine, dict, perms)?)
}
