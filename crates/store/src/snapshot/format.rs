//! What a snapshot format is, to the rest of the store: a [`Format`] writes a store to a file
//! and opens one, found by the version number after the magic. Every format is one module
//! under `snapshot/` implementing it (`packed.rs`: [`Packed`](super::packed::Packed), formats 5
//! and 4; `mapped.rs`: [`Mapped`](super::mapped::Mapped), format 3; `whole.rs`:
//! [`Whole`](super::whole::Whole), formats 1 and 2), and [`FORMATS`] lists the ones
//! [`open`](super::open) tries. Saving ([`save_as`](super::save_as)) makes the write atomic and
//! refuses to keep a file written from a damaged read, whatever the format; opening with a
//! list of one's own ([`open_with`](super::open_with)) tries those formats instead.

use std::io::{Seek, Write};
use std::path::Path;

use nearflow_topo::Machine;

use super::common::SnapshotError;
use crate::store::Store;

/// A file a format writes to: the temporary file of an atomic save, behind the size cap of
/// the caller's room.
pub trait WriteSeek: Write + Seek {}

impl<T: Write + Seek + ?Sized> WriteSeek for T {}

/// A snapshot format.
pub trait Format: Sync {
    /// The version number it writes after the magic ([`MAGIC`](super::MAGIC), then the
    /// version as a little-endian `u16`: the first eight bytes of every snapshot).
    fn version(&self) -> u16;

    /// Whether it opens a file of `version` (a module may read its earlier versions too).
    fn reads(&self, version: u16) -> bool {
        version == self.version()
    }

    /// Whether it writes a version of a store with a delta as it is (its quads merged as they
    /// stream out); when not, the store is merged first.
    fn writes_deltas(&self) -> bool {
        false
    }

    /// Writes `store` to `file`, empty, from its first byte (the magic and
    /// [`version`](Self::version) first); `path` names the file in errors. The caller syncs
    /// and renames it.
    ///
    /// # Errors
    /// When a write fails (the cap of the caller's room among the ways).
    fn write(
        &self,
        store: &Store,
        file: &mut dyn WriteSeek,
        path: &Path,
    ) -> Result<(), SnapshotError>;

    /// Opens the snapshot at `path` for `machine`.
    ///
    /// # Errors
    /// When the file cannot be read, or is not a whole snapshot of this format.
    fn open(&self, path: &Path, machine: &Machine) -> Result<Store, SnapshotError>;
}

/// The formats [`open`](super::open) tries, in order: the first that reads a file's version
/// opens it.
pub static FORMATS: &[&dyn Format] = &[
    &super::packed::Packed::CODED,
    &super::mapped::Mapped,
    &super::whole::Whole,
];

/// `error` while writing `path`, as a snapshot error.
pub(crate) fn io_at(path: &Path) -> impl Fn(std::io::Error) -> SnapshotError + '_ {
    move |error| SnapshotError::Io {
        path: path.to_owned(),
        error,
    }
}
