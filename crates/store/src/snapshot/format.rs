//! What a snapshot format is, to the rest of the store: a [`Format`] writes a store to a file
//! and opens one, found by the version number after the magic. Every format is one module
//! under `snapshot/` implementing it (`packed.rs`: [`Packed`](super::packed::Packed), formats 5
//! and 4; `mapped.rs`: [`Mapped`](super::mapped::Mapped), format 3; `whole.rs`:
//! [`Whole`](super::whole::Whole), formats 1 and 2), and [`FORMATS`] lists the ones
//! [`open`](super::open) tries. Saving ([`save_as`](super::save_as)) makes the write atomic and
//! refuses to keep a file written from a damaged read, whatever the format; opening with a
//! list of one's own ([`open_with`](super::open_with)) tries those formats instead.

use std::io::{Read, Seek, Write};
use std::path::Path;

use nearflow_topo::Machine;

use super::common::SnapshotError;
use crate::layout::{Permutation, Stats};
use crate::store::Store;
use crate::term::Id;

/// A file a format writes to: the temporary file of an atomic save, behind the size cap of
/// the caller's room.
pub trait WriteSeek: Write + Seek {}

impl<T: Write + Seek + ?Sized> WriteSeek for T {}

/// Room a [`Sink`] may write to and read back while it takes the terms (format 5 keeps its
/// blocks' offsets there until the keys are written): a temporary file of the caller's, or
/// memory.
pub trait Spool: Read + Write + Seek {}

impl<T: Read + Write + Seek + ?Sized> Spool for T {}

/// How a [`Sink`]'s caller hands it the terms' keys, one at a time.
pub type PushTerm<'p> = &'p mut dyn FnMut(&str) -> std::io::Result<()>;

/// How a [`Sink`]'s caller hands it a permutation's rows, one at a time.
pub type PushRow<'p> = &'p mut dyn FnMut([Id; 3]) -> std::io::Result<()>;

/// A format's writer from sorted streams: a store written as its parts come, in this order —
/// the terms in id order ([`terms`](Self::terms)), each permutation's rows in key order
/// ([`rows`](Self::rows), the three in [`Permutation::ALL`]'s order), then the graph table and
/// the statistics ([`finish`](Self::finish)). Nothing of the store needs to be in memory: the
/// bounded-memory load streams its merged runs into one, a checkpoint a version with its delta
/// merged as the rows stream out, a cluster's shard the rows it keeps.
///
/// Its methods take the caller's loop as `fill`, handed a push for each item: a failed write
/// stops the loop with the push's error. A caller whose loop fails in its own ways (a damaged
/// run, a cancelled load) uses [`terms_or`](trait.Sink.html#method.terms_or) and
/// [`rows_or`](trait.Sink.html#method.rows_or), which keep its error.
pub trait Sink {
    /// Every term's key (`term::TermRef::encode`), in id order from id 1, handed by `fill`;
    /// `spool` is the room the format may use meanwhile. A format that keeps an index of its
    /// terms' key order then asks `sort_rest(n)`, `n` being how many leading ids it found in
    /// key order, for the ids after them sorted by key.
    ///
    /// # Errors
    /// When a write fails, or `fill` does.
    fn terms(
        &mut self,
        spool: &mut dyn Spool,
        fill: &mut dyn FnMut(PushTerm<'_>) -> std::io::Result<()>,
        sort_rest: &mut dyn FnMut(usize) -> Vec<Id>,
    ) -> std::io::Result<()>;

    /// Permutation `order`'s rows (each its key in the permutation's order), in key order
    /// graph by graph, handed by `fill`.
    ///
    /// # Errors
    /// When a write fails, or `fill` does, or the permutation's count of rows is not another's.
    fn rows(
        &mut self,
        order: Permutation,
        fill: &mut dyn FnMut(PushRow<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<()>;

    /// The graph table (each graph and the row its run starts at: the same row in every
    /// permutation) and the statistics, after the rows; the file is then whole, not yet
    /// synced.
    ///
    /// # Errors
    /// When a write fails.
    fn finish(self: Box<Self>, graphs: &[(Id, usize)], stats: &Stats) -> std::io::Result<()>;
}

impl dyn Sink + '_ {
    /// [`terms`](Sink::terms) from a loop with errors of its own (`E`): the loop's error if it
    /// failed, else a failed write's as `err` makes it.
    ///
    /// # Errors
    /// As the loop's, or a write's.
    pub fn terms_or<E>(
        &mut self,
        spool: &mut dyn Spool,
        err: impl Fn(std::io::Error) -> E,
        sort_rest: &mut dyn FnMut(usize) -> Vec<Id>,
        fill: impl FnOnce(PushTerm<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut theirs = Kept::new(fill);
        let wrote = self.terms(spool, &mut |push| theirs.run(push), sort_rest);
        theirs.or(wrote, err)
    }

    /// [`rows`](Sink::rows) from a loop with errors of its own, as
    /// [`terms_or`](trait.Sink.html#method.terms_or).
    ///
    /// # Errors
    /// As the loop's, or a write's.
    pub fn rows_or<E>(
        &mut self,
        order: Permutation,
        err: impl Fn(std::io::Error) -> E,
        fill: impl FnOnce(PushRow<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut theirs = Kept::new(fill);
        let wrote = self.rows(order, &mut |push| theirs.run(push));
        theirs.or(wrote, err)
    }
}

/// A caller's loop run once inside a sink's `fill`, its own error kept aside (the sink sees
/// only that the loop stopped).
struct Kept<F, E> {
    fill: Option<F>,
    failed: Option<E>,
}

impl<F, E> Kept<F, E> {
    fn new(fill: F) -> Self {
        Kept {
            fill: Some(fill),
            failed: None,
        }
    }

    fn run<P>(&mut self, push: P) -> std::io::Result<()>
    where
        F: FnOnce(P) -> Result<(), E>,
    {
        let fill = self
            .fill
            .take()
            .ok_or_else(|| std::io::Error::other("a sink asked for its items twice"))?;
        fill(push).map_err(|e| {
            self.failed = Some(e);
            std::io::Error::other("stopped by the loop that fills it")
        })
    }

    fn or(self, wrote: std::io::Result<()>, err: impl Fn(std::io::Error) -> E) -> Result<(), E> {
        match (self.failed, wrote) {
            (Some(e), _) => Err(e),
            (None, wrote) => wrote.map_err(err),
        }
    }
}

/// A snapshot format: its version, how it opens a file, and how it writes a store — as a
/// [`Sink`] of sorted streams ([`sink`](Self::sink); then [`write`](Self::write) streams a
/// store into it, its delta merged in on the way), or whole ([`write`](Self::write) of its
/// own). A format implements one of the two.
pub trait Format: Sync {
    /// The version number it writes after the magic ([`MAGIC`](super::MAGIC), then the
    /// version as a little-endian `u16`: the first eight bytes of every snapshot).
    fn version(&self) -> u16;

    /// Whether it opens a file of `version` (a module may read its earlier versions too).
    fn reads(&self, version: u16) -> bool {
        version == self.version()
    }

    /// Whether it writes a version of a store with a delta as it is (its quads merged as they
    /// stream out); when not, the store is merged first. A format written through its
    /// [`sink`](Self::sink) may say it does: the stream merges the delta in.
    fn writes_deltas(&self) -> bool {
        false
    }

    /// A writer of this format into `file`, empty, from its first byte (the magic and
    /// [`version`](Self::version) first), taking the store as sorted streams. A format that
    /// writes whole stores only leaves it as it is: an error saying so.
    ///
    /// # Errors
    /// When the first write fails, or the format takes no streams.
    fn sink<'a>(&self, file: &'a mut dyn WriteSeek) -> std::io::Result<Box<dyn Sink + 'a>> {
        let _ = file;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!(
                "format {} writes whole stores, not sorted streams",
                self.version()
            ),
        ))
    }

    /// Writes `store` to `file`, empty, from its first byte (the magic and
    /// [`version`](Self::version) first); `path` names the file in errors. The caller syncs
    /// and renames it. Unless a format writes its own way, the store streams into its
    /// [`sink`](Self::sink), the delta merged in as the rows go.
    ///
    /// # Errors
    /// When a write fails (the cap of the caller's room among the ways).
    fn write(
        &self,
        store: &Store,
        file: &mut dyn WriteSeek,
        path: &Path,
    ) -> Result<(), SnapshotError> {
        let sink = self.sink(file).map_err(io_at(path))?;
        super::stream::write(store, sink, None).map_err(io_at(path))
    }

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
