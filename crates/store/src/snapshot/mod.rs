//! The binary snapshot: the dictionary, the graphs' runs and the three sorted permutations as
//! they are in memory, so opening a store is reading it (no parsing, no sorting).
//!
//! [`save`] writes format 5 (`packed.rs`): sections at page boundaries, the indexes packed in
//! blocks (`blocks.rs`), the terms front-coded in blocks (`coded.rs`), opened by mapping the
//! file and read in place, each chunk of the indexes and terms checked the first time it is
//! read. [`open`] reads the snapshots of earlier builds too: format 4 (the same, its terms one
//! after another), format 3 (`mapped.rs`: plain columns, mapped, checked in the background) and
//! formats 1 and 2 (`whole.rs`: read whole and checked).
//!
//! A large store's checkpoints write its delta beside the snapshot instead (`segment.rs`:
//! `STORE.delta`, what its updates changed), until the delta is large enough that the snapshot
//! is written again.
//!
//! Each format is its own file implementing [`Format`] (`format.rs`: its version, opening a
//! file, and writing a store — whole, or as sorted streams into its [`Sink`]), and [`open`]
//! tries each of [`FORMATS`] by the version in the file's header; what they share (the magic
//! number, the error, the graph table's check, the capped file) is `common.rs`. Every writer
//! of the store goes through the trait: a save or a checkpoint streams a version into the
//! format's sink (`stream.rs`: the delta merged in as the rows go), a cluster's shard streams
//! the rows it keeps (`save_kept`), and the bounded-memory load streams its merged runs into
//! [`WRITTEN`]'s sink. A format of one's own is saved with [`save_as`] and opened with
//! [`open_with`] (the test `tests/toy_format.rs` adds one in a file of its own). The query
//! engine never sees a format: it reads every store through `nearflow_store::index`.
//!
//! [`save`] writes a temporary file beside the target, syncs it, and renames it
//! over the target, then syncs the directory: a kill or a full disk during the write leaves the previous
//! snapshot whole, and the temporary file is removed on error.

pub mod common;
pub mod format;
pub mod mapped;
pub mod packed;
pub mod segment;
pub(crate) mod stream;
#[cfg(test)]
mod tests;
pub mod whole;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use nearflow_topo::Machine;

pub use crate::health::Health;
use crate::store::Store;
use common::Capped;
pub use common::SnapshotError;
pub use common::MAGIC;
pub use format::{Format, PushRow, PushTerm, Sink, Spool, WriteSeek, FORMATS};

/// The format [`save`] writes: format 5 ([`packed::Packed::CODED`]).
pub static WRITTEN: &dyn Format = &packed::Packed::CODED;

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
///
/// A version with a delta is written as its quads, the delta merged in as the rows stream to
/// the file: no merged copy of its indexes is made in memory.
pub fn save(store: &Store, path: &Path) -> Result<(), SnapshotError> {
    save_as(WRITTEN, store, path)
}

/// [`save`] in `format`.
pub fn save_as(format: &dyn Format, store: &Store, path: &Path) -> Result<(), SnapshotError> {
    save_capped(store, path, u64::MAX, format)
}

/// [`save`], calling `before` with the temporary file once it is written and synced, before
/// it is renamed over `path`: an error from it leaves `path` untouched (a store records which
/// file is about to become its snapshot).
pub fn save_then<E: From<SnapshotError>>(
    store: &Store,
    path: &Path,
    before: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<(), E> {
    write_atomically(path, |mut file, tmp| {
        WRITTEN.write(store, &mut file, tmp)?;
        file.sync_all().map_err(format::io_at(tmp))?;
        undamaged(store, path)?;
        before(tmp)
    })
}

/// Writes the quads of `store` that `keep` keeps (given each as `[g, s, p, o]`) to `path`,
/// atomically as [`save`] does, with every term of `store`'s dictionary, so the ids are those
/// of `store` (a shard of a cluster, `shard.rs`), in [`WRITTEN`].
pub(crate) fn save_kept(
    store: &Store,
    path: &Path,
    keep: stream::Keep<'_>,
) -> Result<(), SnapshotError> {
    write_atomically(path, |mut file, tmp| {
        WRITTEN
            .sink(&mut file)
            .and_then(|sink| stream::write(store, sink, Some(keep)))
            .and_then(|()| file.sync_all())
            .map_err(|error| SnapshotError::Io {
                path: tmp.to_owned(),
                error,
            })?;
        undamaged(store, path)
    })
}

/// Refuses to keep a file written from `store` when a read of it found damage (a damaged
/// term reads as a stand-in, which must never be written as data).
pub(crate) fn undamaged(store: &Store, path: &Path) -> Result<(), SnapshotError> {
    match store.settled_damage() {
        Some(why) => Err(SnapshotError::Damaged {
            path: path.to_owned(),
            why: why.to_owned(),
        }),
        None => Ok(()),
    }
}

fn save_capped(
    store: &Store,
    path: &Path,
    room: u64,
    format: &dyn Format,
) -> Result<(), SnapshotError> {
    if !store.is_flat() && !format.writes_deltas() {
        return save_capped(&store.merged()?, path, room, format);
    }
    write_atomically(path, |file, tmp| {
        let mut capped = Capped { file, room };
        format.write(store, &mut capped, tmp)?;
        capped.file.sync_all().map_err(format::io_at(tmp))?;
        undamaged(store, path)
    })
}

/// Writes the file at `path` atomically: `write` is given a new temporary file in the same
/// directory (and its path), which it fills and syncs; the file is then renamed over `path`
/// (and the directory synced). On any error the temporary file is removed and whatever was at
/// `path` before is untouched.
pub fn write_atomically<T, E: From<SnapshotError>>(
    path: &Path,
    write: impl FnOnce(File, &Path) -> Result<T, E>,
) -> Result<T, E> {
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
    let written = write(file, &tmp).and_then(|out| {
        std::fs::rename(&tmp, path).map_err(io)?;
        // The rename is durable once the directory is: a failure to sync it (some filesystems
        // do not support it) leaves the file whole either way, so it is not an error.
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(out)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Opens the snapshot at `path`, for `machine`, in whichever of [`FORMATS`] reads its
/// version: formats 5, 4 and 3 by mapping it, formats 1 and 2 read whole.
pub fn open(path: &Path, machine: &Machine) -> Result<Store, SnapshotError> {
    open_with(FORMATS, path, machine)
}

/// [`open`], trying `formats` (the first that reads the file's version opens it); a file of
/// no format's version gets format 2's reader, whose error says what the file is not.
pub fn open_with(
    formats: &[&dyn Format],
    path: &Path,
    machine: &Machine,
) -> Result<Store, SnapshotError> {
    let mut head = [0u8; 8];
    let read = File::open(path).and_then(|mut f| f.read_exact(&mut head));
    if read.is_ok() && &head[..6] == MAGIC {
        let version = u16::from_le_bytes([head[6], head[7]]);
        if let Some(f) = formats.iter().find(|f| f.reads(version)) {
            return f.open(path, machine);
        }
    }
    whole::Whole.open(path, machine)
}
