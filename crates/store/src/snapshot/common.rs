//! What the snapshot formats share: the magic number, the error, the graph table's check, the
//! capped file they are written into.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use crate::layout::StoreError;
use crate::term::Id;

/// The first six bytes of every snapshot, before its format's version number.
pub const MAGIC: &[u8; 6] = b"NFRDF\0";

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
    /// The delta segment beside the snapshot is damaged.
    #[error("{path}: the store's delta segment is damaged: {why}; the store is not opened, so that no acknowledged update is lost silently (restore the segment from a copy, or remove it and its log to go back to the snapshot alone)")]
    Segment {
        /// The segment.
        path: PathBuf,
        /// How.
        why: String,
    },
    /// The store being written was found damaged while it was read: what was written is
    /// removed, so nothing derived from a damaged read is ever kept.
    #[error("the store read to write {path} is damaged: {why}; nothing was written (rebuild the store with `nearflow load … --save`, or restore a copy)")]
    Damaged {
        /// The file that was to be written.
        path: PathBuf,
        /// What is damaged.
        why: String,
    },
    /// The target may not be written (see `check_target`).
    #[error("{path}: will not write a snapshot there: it {why}")]
    Refused {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// A CRC-32 of what passes through it.
pub struct Hashing<T> {
    pub inner: T,
    pub crc: crc32fast::Hasher,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The graph table of a snapshot (id u64, first row u64 per graph), checked: ids in range and
/// increasing, runs starting at row 0 and increasing within the quads, a table when there are
/// quads.
pub(super) fn graph_table(
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

/// The snapshot file, with room for at most `room` more bytes (unbounded outside tests, where
/// a small room stands for a full disk).
pub(super) struct Capped {
    pub(super) file: File,
    pub(super) room: u64,
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
