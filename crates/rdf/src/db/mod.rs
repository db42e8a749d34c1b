//! The durable store: a snapshot, a log of the updates made since it was written, and the
//! versions queries read.
//!
//! - **Reads** take the current version ([`Db::current`], an `Arc<Store>`) and keep it to their
//!   end: an update never blocks them, and they never see half of one.
//! - **Updates** run one at a time ([`Db::update`]): the change is computed against the
//!   current version, its record (every quad it adds or removes, as terms) is appended to the
//!   log and synced (`fdatasync`), and only then is the new version published and the update
//!   acknowledged. A failed write publishes nothing and cuts the log back.
//! - **Recovery** ([`Db::open`]) reads the snapshot, then replays the log's records in order.
//!   A record says, for each quad, whether the store holds it after the update (not "add" or
//!   "remove" relative to anything), so replaying records a snapshot already includes changes
//!   nothing: replay is idempotent, and a checkpoint that died between writing the snapshot and
//!   cutting the log loses nothing. A record cut short at the end of the log (a write the kill
//!   interrupted, never acknowledged) is dropped; damage anywhere else is an error naming the
//!   byte, never a silent loss of later updates.
//! - **Merging** ([`Db::merge`], run by the background thread of [`Db::start_merger`]) folds the
//!   delta into new sorted indexes outside the writer's lock, then rebases the versions
//!   committed meanwhile onto them (`delta.rs`). When the log has grown past
//!   [`Tuning::checkpoint_bytes`] the merged version is also written as the new snapshot and the
//!   log cut to the records after it.
//! - **A large store** (a snapshot of at least [`Tuning::segment_min_quads`]) is not merged
//!   in memory, which would copy every index: its versions keep their delta beside the mapped
//!   indexes, and a checkpoint writes that delta as a segment beside the snapshot
//!   (`snapshot/segment.rs`, `STORE.delta`), its size that of the change, not of the store.
//!   Once the delta holds [`Tuning::delta_max_quads`] or a [`Tuning::rewrite_fraction`]-th of
//!   the snapshot, a checkpoint writes the snapshot again with the delta merged in as it
//!   streams out (no copy of the indexes in memory), maps it, and removes the segment. Opening
//!   reads the snapshot, its segment, then the log.
//!
//! One process writes a store at a time: a writable open takes an exclusive `flock` on
//! `STORE.lock` beside it. The log's format, and how damage is told from a torn tail, is
//! `log.rs`'s.
//!
//! Here: the store, its versions and its updates. `files.rs`: the log as written, read and
//! replayed, `STORE.acked`, the write lock; `merge.rs`: the merge, the checkpoints and their
//! thread; `salvage.rs`: [`salvage`].

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use nearflow_topo::Machine;

use crate::snapshot::segment::Fingerprint;
use crate::snapshot::{self, segment, SnapshotError};
use crate::store::{Store, DEFAULT_GRAPH};
use crate::term::{Id, TermRef};

use crate::log::{self as logfmt, Changes, End};

mod files;
mod merge;
mod salvage;
#[cfg(test)]
mod tests;

use files::*;
pub use files::{acked_path, lock_path, log_path};
pub use salvage::{salvage, Salvaged};

/// A store could not be opened, written or recovered.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The snapshot.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// Reading or writing a file failed.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The log is damaged (not merely cut short at its end).
    #[error("{path}: the update log is damaged {why}; the store is not opened, so that no acknowledged update is lost silently (`nearflow check store --salvage` keeps the records before the damage and says how many after it are dropped; or restore the log from a copy)")]
    Damaged {
        /// The log.
        path: PathBuf,
        /// Where and how.
        why: String,
    },
    /// The log ends before an update that was acknowledged (`STORE.acked` says which): it was
    /// cut, zeroed, removed, or replaced by an older copy.
    #[error("{path}: the store's updates end at update {have}, but updates up to {acked} were acknowledged (recorded in {record}): {missing} acknowledged update{s} {are} missing (the log was cut, zeroed, damaged at its end, removed or replaced by an older copy); the store is not opened, so that none is lost silently (restore the log from a copy, or `nearflow check store --salvage` opens it without them)", s = if *missing == 1 { "" } else { "s" }, are = if *missing == 1 { "is" } else { "are" })]
    Unlogged {
        /// The log.
        path: PathBuf,
        /// The file that records the last acknowledged update.
        record: PathBuf,
        /// The last update the snapshot, its segment and the log hold.
        have: u64,
        /// The last update acknowledged.
        acked: u64,
        /// How many acknowledged updates the files do not hold.
        missing: u64,
    },
    /// The delta segment the store needs beside its snapshot is not there (or the one there
    /// belongs to another snapshot).
    #[error("{path} {what}: the store needs its own (so {record} says), since it holds the updates up to update {upto} that its snapshot does not; the store is not opened, so that they are not lost silently (restore the segment from a copy, or `nearflow check store --salvage` opens the store without them)", what = if *stale { "belongs to another snapshot" } else { "is missing" })]
    SegmentMissing {
        /// The segment.
        path: PathBuf,
        /// The file that records which segment the store needs.
        record: PathBuf,
        /// The last update the segment held.
        upto: u64,
        /// Whether a segment is there, written beside another snapshot.
        stale: bool,
    },
    /// The log follows another snapshot than the one beside it: the snapshot is another
    /// store's or an older copy of this one's, or the log is another store's.
    #[error("{path} is not the snapshot {log} follows (the snapshot is another store's or an older copy, or the log is another store's): its {records} update record{s} (up to update {last}) are not replayed onto it, and the store is not opened, so that no update is applied to the wrong data or lost silently (put back the files that belong together, or `nearflow check store --salvage` opens the snapshot as it is and gives the log's records up)", s = if *records == 1 { "" } else { "s" })]
    Foreign {
        /// The snapshot.
        path: PathBuf,
        /// The log.
        log: PathBuf,
        /// Its records.
        records: usize,
        /// Its last update.
        last: u64,
    },
    /// The background check of a mapped snapshot found a section damaged.
    #[error("{path}: the store's snapshot is damaged: {why}; updates are refused (rebuild it with `nearflow load … --save`, or restore a copy)")]
    SnapshotDamaged {
        /// The snapshot.
        path: PathBuf,
        /// Which section.
        why: String,
    },
    /// Another process holds the store for writing.
    #[error("{path}: another process is writing this store (a `nearflow serve` or `nearflow update`?); stop it first")]
    Busy {
        /// The store.
        path: PathBuf,
    },
    /// The store was opened for reading only.
    #[error("the store is open for reading only")]
    ReadOnly,
    /// The dictionary's ids are exhausted.
    #[error(transparent)]
    Full(#[from] crate::dict::DictFull),
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> DbError + '_ {
    move |error| DbError::Io {
        path: path.to_owned(),
        error,
    }
}

/// When the background merge and checkpoint run.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Merge once the delta holds this many quads, however busy the writers are. A scan reads
    /// the delta beside the indexes and a merge join is not planned while there is one, so a
    /// large delta slows queries; a merge copies every index, so merging after every small
    /// update would spend more than it saves.
    pub merge_quads: usize,
    /// Merge a non-empty delta once no update has come for this long.
    pub merge_idle: Duration,
    /// Write a new snapshot (and cut the log) once the log is this long.
    pub checkpoint_bytes: u64,
    /// A store whose snapshot holds at least this many quads keeps its delta beside the mapped
    /// indexes (no merge in memory), and its checkpoints write the delta as a segment.
    pub segment_min_quads: u64,
    /// Such a store's snapshot is written again once its delta holds this many quads…
    pub delta_max_quads: u64,
    /// …or this fraction (`1 / rewrite_fraction`) of the snapshot's quads, whichever is fewer.
    pub rewrite_fraction: u64,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            merge_quads: 1 << 16,
            merge_idle: Duration::from_secs(2),
            checkpoint_bytes: 64 << 20,
            // An in-memory merge copies three permutations of 16-byte rows: about 400 MB at
            // this size, and a full snapshot written again is about 150 MB.
            segment_min_quads: 1 << 23,
            // The delta costs about 100 bytes a quad in memory (six sorted copies): 400 MB.
            delta_max_quads: 1 << 22,
            rewrite_fraction: 8,
        }
    }
}

/// What [`Db::update`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The update's sequence number (the last one's when it changed nothing).
    pub seq: u64,
    /// Quads it changed (added or removed).
    pub changed: usize,
}

/// An update's failure: its own error, or the store's.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError<E> {
    /// The update itself failed: nothing was changed.
    #[error(transparent)]
    Update(E),
    /// Logging it failed: nothing was changed.
    #[error(transparent)]
    Store(#[from] DbError),
}

/// Counts for `/status` and the tests.
#[derive(Clone, Copy, Debug, Default)]
pub struct DbStats {
    /// Updates logged since the store was opened.
    pub commits: u64,
    /// Background merges done.
    pub merges: u64,
    /// Snapshots written by checkpoints.
    pub checkpoints: u64,
    /// Delta segments written by checkpoints (a large store's, instead of its snapshot).
    pub segments: u64,
    /// Bytes the last checkpoint wrote (a snapshot or a segment).
    pub last_checkpoint_bytes: u64,
    /// The delta segment read at open, if any: the quads it adds and removes.
    pub segment: Option<(u64, u64)>,
    /// Background merges or checkpoints that failed (each retried a second later).
    pub failed: u64,
    /// Records replayed from the log at open.
    pub replayed: u64,
    /// Bytes of a record cut short at the log's end, dropped at open.
    pub dropped_bytes: u64,
    /// The last merge's time.
    pub last_merge: Duration,
}

struct Writer {
    log: Option<Log>,
    /// The record of the last acknowledged update (`STORE.acked`), for a durable store.
    acked: Option<File>,
    /// The last update of the segment the store needs beside its snapshot (0: none).
    segment: u64,
    /// The snapshot the log follows (its header names it).
    snap: Fingerprint,
    /// The snapshot being written to replace it, recorded before its rename.
    next: Option<Fingerprint>,
    seq: u64,
    last_update: Instant,
}

impl Writer {
    /// What `STORE.acked` records of this state.
    fn acked(&self) -> Acked {
        Acked {
            seq: self.seq,
            segment: self.segment,
            next: self.next,
        }
    }
}

/// A store with its versions, its writer and (when durable) its files.
pub struct Db {
    snapshot: Option<PathBuf>,
    current: RwLock<Arc<Store>>,
    writer: Mutex<Writer>,
    /// Signalled on every commit and at shutdown.
    wake: Condvar,
    /// Held by a merge from start to end: one merge at a time.
    merging: Mutex<()>,
    stop: Mutex<bool>,
    stats: Mutex<DbStats>,
    /// Why the last background merge or checkpoint failed, while it has not succeeded since.
    failure: Mutex<Option<String>>,
    tuning: Tuning,
    writable: bool,
    /// The snapshot as this process last opened or wrote it, when there is one.
    disk: Mutex<Option<OnDisk>>,
    _lock: Option<WriteLock>,
}

/// The snapshot file's indexes and dictionary as mapped (weak: only to tell whether a version
/// lies over them), and its fingerprint, which its delta segment names.
struct OnDisk {
    base: std::sync::Weak<crate::base::Base>,
    dict: std::sync::Weak<crate::dict::Dict>,
    print: segment::Fingerprint,
}

impl OnDisk {
    fn of(store: &Store, print: segment::Fingerprint) -> OnDisk {
        OnDisk {
            base: Arc::downgrade(store.shared().0),
            dict: Arc::downgrade(store.shared().1),
            print,
        }
    }

    /// Whether `store` lies over the snapshot: its indexes, and the snapshot's dictionary or
    /// one over it.
    fn under(&self, store: &Store) -> bool {
        let (Some(base), Some(dict)) = (self.base.upgrade(), self.dict.upgrade()) else {
            return false;
        };
        let (store_base, store_dict) = store.shared();
        Arc::ptr_eq(&base, store_base)
            && (Arc::ptr_eq(&dict, store_dict)
                || store_dict.under().is_some_and(|u| Arc::ptr_eq(u, &dict)))
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("snapshot", &self.snapshot)
            .field("current", &*self.current())
            .finish()
    }
}

impl Db {
    /// A store kept in memory only: updates change it, nothing is written (tests, and a server
    /// over RDF files, which says so).
    pub fn in_memory(store: Store) -> Db {
        Db::new(
            None,
            store,
            None,
            None,
            0,
            Fingerprint::NONE,
            0,
            None,
            true,
            Tuning::default(),
            DbStats::default(),
            None,
        )
    }

    /// A store kept in memory that takes no update (a server over RDF files).
    pub fn read_only(store: Store) -> Db {
        Db::new(
            None,
            store,
            None,
            None,
            0,
            Fingerprint::NONE,
            0,
            None,
            false,
            Tuning::default(),
            DbStats::default(),
            None,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn new(
        snapshot: Option<PathBuf>,
        store: Store,
        log: Option<Log>,
        acked: Option<File>,
        segment: u64,
        snap: Fingerprint,
        seq: u64,
        lock: Option<WriteLock>,
        writable: bool,
        tuning: Tuning,
        stats: DbStats,
        disk: Option<OnDisk>,
    ) -> Db {
        Db {
            snapshot,
            current: RwLock::new(Arc::new(store)),
            writer: Mutex::new(Writer {
                log,
                acked,
                segment,
                snap,
                next: None,
                seq,
                last_update: Instant::now(),
            }),
            wake: Condvar::new(),
            merging: Mutex::new(()),
            stop: Mutex::new(false),
            stats: Mutex::new(stats),
            failure: Mutex::new(None),
            tuning,
            writable,
            disk: Mutex::new(disk),
            _lock: lock,
        }
    }

    /// Opens the store whose snapshot is `path` for `machine`, with every acknowledged update
    /// of its log. `writable`: take the store's write lock, cut a torn record off the log's
    /// end, and accept updates; else read only (the log is read, never changed).
    pub fn open(path: &Path, machine: &Machine, writable: bool) -> Result<Db, DbError> {
        Db::open_tuned(path, machine, writable, Tuning::default())
    }

    /// [`open`](Self::open) with the merge and checkpoint set by `tuning`.
    pub fn open_tuned(
        path: &Path,
        machine: &Machine,
        writable: bool,
        tuning: Tuning,
    ) -> Result<Db, DbError> {
        let lock = if writable { Some(lock(path)?) } else { None };
        if writable {
            remove_stale_temporaries(path);
        }
        let lp = log_path(path);
        // A checkpoint may replace the snapshot, its segment and the log while a reader opens
        // them (in that order, each by a rename): read all three again when the snapshot or
        // the segment changed meanwhile.
        let seg = segment::segment_path(path);
        let ap = acked_path(path);
        let mut tries = 0;
        let (store, print, found, read, bytes, recorded) = loop {
            let before = (identity(path), identity(&seg));
            let store = snapshot::open(path, machine)?;
            let print = segment::fingerprint(path)?;
            let found = segment::read(path, print, &store)?;
            let bytes = match std::fs::read(&lp) {
                Ok(b) => Some(b),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(io(&lp)(e)),
            };
            let read = bytes.as_deref().map(|b| read_log(&lp, b)).transpose();
            // The record is rewritten in place after every update: a reader may catch it
            // half written, and reads it again.
            let recorded = read_acked(&ap);
            tries += 1;
            // A reader beside a writer may also catch a checkpoint between its renames: the
            // new snapshot read, the log read before it was cut, the record read after it
            // was cleared. It reads them all again.
            let settled = match (&read, &recorded) {
                (Ok(r), Ok(a)) => {
                    let follows = r.as_ref().is_none_or(|r| r.snap.is_none_or(|f| f == print));
                    let named = a.and_then(|a| a.next);
                    follows || named == Some(print) || named == Some(Fingerprint::REPLACING)
                }
                _ => false,
            };
            if writable || ((identity(path), identity(&seg)) == before && settled) || tries >= 5 {
                break (store, print, found, read?, bytes, recorded?);
            }
            std::thread::sleep(std::time::Duration::from_millis(5 * tries));
        };
        let disk = OnDisk::of(&store, print);
        // A snapshot written to replace the one the log follows, recorded before its rename:
        // a crash before the log followed it leaves it beside the old log.
        let next = recorded.and_then(|a| a.next);
        let checkpointed = next == Some(print);
        // Whether the log follows this snapshot (a log of format 1 or 2 does not say), and
        // whether the snapshot replaced the store whole (its old log then starts afresh).
        let follows = read
            .as_ref()
            .is_none_or(|r| r.snap.is_none_or(|f| f == print));
        let replaced = !follows && next == Some(Fingerprint::REPLACING);
        if let (false, Some(r)) = (follows || checkpointed || replaced, &read) {
            return Err(DbError::Foreign {
                path: path.to_owned(),
                log: lp,
                records: r.records.len(),
                last: r.last_seq,
            });
        }
        let segment_seq = match &found {
            segment::Found::Applied(_, s) => *s,
            _ => 0,
        };
        let segment_found = matches!(found, segment::Found::Applied(..));
        let segment_stale = matches!(found, segment::Found::Stale);
        let mut stats = DbStats::default();
        let store = match found {
            segment::Found::Applied(s, _) => {
                let (a, r) = s.delta().counts();
                stats.segment = Some((a as u64, r as u64));
                s
            }
            segment::Found::Absent | segment::Found::Stale => store,
        };
        let (store, seq, log) = match read {
            None => {
                let log = if writable {
                    write_log(&lp, 0, print, &[])?;
                    Some(open_append(&lp)?)
                } else {
                    None
                };
                (store, 0, log)
            }
            Some(r) if replaced => {
                // The replacement holds what the store is to be: the old log's records are
                // not its updates, and it starts afresh (as the replacement would have made it).
                let log = if writable {
                    write_log(&lp, r.last_seq, print, &[])?;
                    Some(open_append(&lp)?)
                } else {
                    None
                };
                (store, r.last_seq, log)
            }
            Some(r) => {
                stats.replayed = r.records.len() as u64;
                if let End::Torn(n) = r.end {
                    stats.dropped_bytes = n;
                }
                let store = replay(&store, &r.records)?;
                let log = if writable {
                    // A torn tail is cut off, a log of an earlier format rewritten in the one
                    // appended to, and the log of the snapshot a checkpoint replaced made to
                    // follow the new one (which holds its records: replaying them again, in
                    // order, leaves each quad as the last of them left it).
                    if r.end != End::Clean || r.version != logfmt::VERSION || !follows {
                        let keep = reframed(bytes.as_deref().expect("read"), &r);
                        write_log(&lp, r.base_seq, print, &keep)?;
                    }
                    Some(open_append(&lp)?)
                } else {
                    None
                };
                (store, r.last_seq, log)
            }
        };
        let have = seq.max(segment_seq);
        if let Some(a) = recorded.filter(|_| !replaced) {
            if a.seq > have {
                return Err(DbError::Unlogged {
                    path: lp,
                    record: ap,
                    have,
                    acked: a.seq,
                    missing: a.seq - have,
                });
            }
            // A segment of another snapshot is not this one's, unless a checkpoint or a
            // replacement wrote this snapshot (which holds what the store is to hold).
            let rewritten = checkpointed || next == Some(Fingerprint::REPLACING);
            if a.segment > 0 && !segment_found && !rewritten {
                return Err(DbError::SegmentMissing {
                    path: seg,
                    record: ap,
                    upto: a.segment,
                    stale: segment_stale,
                });
            }
        }
        if writable && segment_stale {
            remove_segment(path)?;
        }
        // The segment the store now needs: the one applied, or none.
        let segment = segment_seq;
        let acked = if writable {
            let f = open_acked(&ap)?;
            write_acked(
                &f,
                Acked {
                    seq: have,
                    segment,
                    next: None,
                },
            )
            .and_then(|()| f.sync_data())
            .map_err(io(&ap))?;
            Some(f)
        } else {
            None
        };
        Ok(Db::new(
            Some(path.to_owned()),
            store,
            log,
            acked,
            segment,
            print,
            seq,
            lock,
            writable,
            tuning,
            stats,
            Some(disk),
        ))
    }

    /// Writes `store` as the snapshot at `path` and starts its log afresh (the updates of the
    /// old log are in `store`, or deliberately replaced by it), under the store's write lock:
    /// `nearflow load --save` and `load --add`.
    pub fn replace(path: &Path, store: &Store) -> Result<(), DbError> {
        Db::replace_by(path, || Ok(snapshot::save(store, path)?))
    }

    /// [`replace`](Self::replace) with the snapshot written by `save` (a load in bounded
    /// memory writes it as it merges), under the store's lock; the log is started afresh once
    /// `save` has succeeded.
    pub fn replace_by<T, E: From<DbError>>(
        path: &Path,
        save: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let _lock = lock(path)?;
        let lp = log_path(path);
        let base_seq = match std::fs::read(&lp) {
            Ok(b) => read_log(&lp, &b).map(|r| r.last_seq).unwrap_or(0),
            Err(_) => 0,
        };
        // Recorded before the snapshot is replaced: a crash before the new log is written
        // leaves the replacement beside the old log, whose records are then not replayed
        // onto it. The rest of the record stays the old store's, whole until the rename.
        let before = read_acked(&acked_path(path)).ok().flatten();
        let kept = before.unwrap_or(Acked {
            seq: base_seq,
            ..Acked::default()
        });
        // (A new store has no old log to set aside.)
        let replacing = path.exists();
        if replacing {
            record_acked(
                path,
                Acked {
                    next: Some(Fingerprint::REPLACING),
                    ..kept
                },
            )?;
        }
        let out = match save() {
            Ok(out) => out,
            Err(e) => {
                // Not renamed: the old store stands, and its record as it was.
                if replacing {
                    let _ = record_acked(path, Acked { next: None, ..kept });
                }
                return Err(e);
            }
        };
        let print = segment::fingerprint(path).map_err(DbError::from)?;
        write_log(&lp, base_seq, print, &[])?;
        remove_segment(path)?;
        record_acked(
            path,
            Acked {
                seq: base_seq,
                segment: 0,
                next: None,
            },
        )?;
        Ok(out)
    }

    /// Replaces the store's contents with `store` (`nearflow load --add` over a store opened
    /// writable): the snapshot rewritten, the log started afresh, `store` the current version.
    pub fn rewrite(&self, store: Store) -> Result<(), DbError> {
        let mut w = self.writer.lock().expect("not poisoned");
        let seq = w.seq;
        if let (Some(path), true) = (&self.snapshot, w.log.is_some()) {
            // The store replaced whole: a crash before the log starts afresh leaves the new
            // snapshot beside the old log, whose records are then not replayed onto it.
            w.next = Some(Fingerprint::REPLACING);
            self.record(&w)?;
            if let Err(e) = snapshot::save(&store, path) {
                // Not renamed: the old store stands, and its record says nothing else.
                w.next = None;
                let _ = self.record(&w);
                return Err(e.into());
            }
            let print = segment::fingerprint(path)?;
            let log = w.log.as_mut().expect("checked above");
            write_log(&log.path, seq, print, &[])?;
            *log = open_append(&log.path)?;
            w.segment = 0;
            w.snap = print;
            w.next = None;
            self.record(&w)?;
            remove_segment(path)?;
            *self.disk.lock().expect("not poisoned") = None;
        } else if !self.writable {
            return Err(DbError::ReadOnly);
        }
        *self.current.write().expect("not poisoned") = Arc::new(store);
        Ok(())
    }

    /// The current version: keep it for as long as it is read.
    pub fn current(&self) -> Arc<Store> {
        self.current.read().expect("not poisoned").clone()
    }

    /// Whether updates are accepted.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Whether an acknowledged update is on disk (a store opened from a snapshot, writable).
    pub fn is_durable(&self) -> bool {
        self.writer.lock().expect("not poisoned").log.is_some()
    }

    /// The snapshot's path, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.snapshot.as_deref()
    }

    /// The last committed update's sequence number.
    pub fn seq(&self) -> u64 {
        self.writer.lock().expect("not poisoned").seq
    }

    /// Whether the log has grown past [`Tuning::checkpoint_bytes`] (a [`merge`](Self::merge)
    /// would write a new snapshot).
    pub fn checkpoint_due(&self) -> bool {
        let w = self.writer.lock().expect("not poisoned");
        w.log
            .as_ref()
            .is_some_and(|l| l.len >= self.tuning.checkpoint_bytes)
    }

    /// Counts.
    pub fn stats(&self) -> DbStats {
        *self.stats.lock().expect("not poisoned")
    }

    /// Runs an update: `change` computes, from the current version, the new one and the quads
    /// that differ (each with whether the new version holds it: `Edit::changes` and
    /// `Edit::finish`). Updates run one at a time; queries go on
    /// reading their versions meanwhile. Returns once the update's record is on disk and the
    /// new version is the current one.
    ///
    /// `Edit::changes`: crate::delta::Edit::changes
    pub fn update<E>(
        &self,
        change: impl FnOnce(&Arc<Store>) -> Result<(Store, Vec<([Id; 4], bool)>), E>,
    ) -> Result<Committed, UpdateError<E>> {
        if !self.writable {
            return Err(UpdateError::Store(DbError::ReadOnly));
        }
        let mut w = self.writer.lock().expect("not poisoned");
        let cur = self.current();
        if let Some(d) = cur.damage() {
            return Err(UpdateError::Store(DbError::SnapshotDamaged {
                path: self.snapshot.clone().unwrap_or_default(),
                why: d.to_owned(),
            }));
        }
        let (new, changes) = change(&cur).map_err(UpdateError::Update)?;
        // The update read the store: a damaged chunk read then reads as a stand-in, which must
        // not become data.
        if let Some(d) = cur.settled_damage() {
            return Err(UpdateError::Store(DbError::SnapshotDamaged {
                path: self.snapshot.clone().unwrap_or_default(),
                why: d.to_owned(),
            }));
        }
        if changes.is_empty() {
            return Ok(Committed {
                seq: w.seq,
                changed: 0,
            });
        }
        let seq = w.seq + 1;
        if let Some(log) = &mut w.log {
            let rec = encode(seq, &new, &changes);
            log.append(&rec)?;
        }
        if let Some(f) = &w.acked {
            // Not synced: it is written after the record is, so a crash can leave it behind
            // the log, never ahead of it. A failed write loses no update, only the check of the
            // next open against this one.
            let _ = write_acked(
                f,
                Acked {
                    seq,
                    segment: w.segment,
                    next: w.next,
                },
            );
        }
        w.seq = seq;
        w.last_update = Instant::now();
        *self.current.write().expect("not poisoned") = Arc::new(new);
        self.stats.lock().expect("not poisoned").commits += 1;
        self.wake.notify_all();
        Ok(Committed {
            seq,
            changed: changes.len(),
        })
    }
}
