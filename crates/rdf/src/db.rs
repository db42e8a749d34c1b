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

/// The log file, open for appending.
struct Log {
    path: PathBuf,
    file: File,
    len: u64,
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
            base: Arc::downgrade(&store.base),
            dict: Arc::downgrade(&store.dict),
            print,
        }
    }

    /// Whether `store` lies over the snapshot: its indexes, and the snapshot's dictionary or
    /// one over it.
    fn under(&self, store: &Store) -> bool {
        let (Some(base), Some(dict)) = (self.base.upgrade(), self.dict.upgrade()) else {
            return false;
        };
        Arc::ptr_eq(&base, &store.base)
            && (Arc::ptr_eq(&dict, &store.dict)
                || store.dict.under().is_some_and(|u| Arc::ptr_eq(u, &dict)))
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

/// The log beside snapshot `path`.
pub fn log_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".log");
    PathBuf::from(p)
}

/// The record of the last acknowledged update beside snapshot `path` (`STORE.acked`): 44
/// bytes, `NFACK\0`, format u16 (2; format 1, 28 bytes without the last field, is still read),
/// the update's sequence number u64, the last update of the delta segment the store needs
/// beside its snapshot u64 (0: none), the fingerprint of a snapshot being written to replace
/// the one the log follows (16 bytes, zero: none), CRC-32 of those. It is rewritten in place
/// after each update's record is synced to the log, so it is never ahead of what the log
/// holds: a log that ends before it lost acknowledged updates. The segment's number is written
/// (and synced) when a checkpoint writes a segment, before it cuts the log, and cleared once a
/// snapshot holds the segment's updates, before the segment is removed: a store that needs a
/// segment it does not find lost the updates the segment held. The snapshot being written is
/// recorded (synced) after it is written and before its rename, and cleared once the log
/// follows it: the one snapshot an open accepts beside a log that follows another (a crash
/// between the two renames); a replacement of the whole store records a mark instead, and the
/// old log's records are then not replayed onto the new snapshot.
pub fn acked_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".acked");
    PathBuf::from(p)
}

const ACKED_MAGIC: &[u8; 6] = b"NFACK\0";
const ACKED_LEN: usize = 44;
/// The record's length in format 1 (without `next`).
const ACKED_LEN_1: usize = 28;

/// What `STORE.acked` records: the last acknowledged update, the last update of the segment
/// the store needs (0: none), and the snapshot being written to replace the one the log
/// follows, from just before its rename until the log follows it
/// ([`Fingerprint::REPLACING`]: a replacement whose log starts afresh).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Acked {
    seq: u64,
    segment: u64,
    next: Option<Fingerprint>,
}

/// The record at `path`; `None` when there is none (a store written before these records, or
/// one never opened for writing).
fn read_acked(path: &Path) -> Result<Option<Acked>, DbError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path)(e)),
    };
    let n = bytes.len().saturating_sub(4);
    let version = match bytes.len() {
        ACKED_LEN_1 => 1u16,
        ACKED_LEN => 2,
        _ => 0,
    };
    let whole = version > 0
        && &bytes[..6] == ACKED_MAGIC
        && bytes[6..8] == version.to_le_bytes()
        && crc32fast::hash(&bytes[..n]).to_le_bytes() == bytes[n..];
    if !whole {
        return Err(DbError::Damaged {
            path: path.to_owned(),
            why: "(the record of the last acknowledged update is not whole)".into(),
        });
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let next = (version >= 2)
        .then(|| Fingerprint::from_bytes(bytes[24..40].try_into().expect("16 bytes")))
        .filter(|&f| f != Fingerprint::NONE);
    Ok(Some(Acked {
        seq: word(8),
        segment: word(16),
        next,
    }))
}

fn open_acked(path: &Path) -> Result<File, DbError> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io(path))
}

/// Writes `a` into `f` (one write at offset 0).
fn write_acked(f: &File, a: Acked) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; ACKED_LEN];
    b[..6].copy_from_slice(ACKED_MAGIC);
    b[6..8].copy_from_slice(&2u16.to_le_bytes());
    b[8..16].copy_from_slice(&a.seq.to_le_bytes());
    b[16..24].copy_from_slice(&a.segment.to_le_bytes());
    b[24..40].copy_from_slice(&a.next.unwrap_or(Fingerprint::NONE).to_bytes());
    let crc = crc32fast::hash(&b[..ACKED_LEN - 4]);
    b[ACKED_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
    f.write_all_at(&b, 0)?;
    f.set_len(ACKED_LEN as u64)
}

/// [`write_acked`] into the record of store `path`, synced.
fn record_acked(path: &Path, a: Acked) -> Result<(), DbError> {
    let ap = acked_path(path);
    let f = open_acked(&ap)?;
    write_acked(&f, a)
        .and_then(|()| f.sync_data())
        .map_err(io(&ap))
}

/// The file whose lock is the store's write lock ([`log_path`]'s sibling).
pub fn lock_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// The exclusive write lock of a store: an `flock` on `STORE.lock`, and a name in the
/// kernel's abstract socket namespace made from the store's directory (device and inode) and
/// file name. The name is held while the process lives and cannot be deleted from the file
/// system, so a lock file removed by hand does not let a second writer in.
pub(crate) struct WriteLock {
    _file: File,
    _name: std::os::unix::net::UnixListener,
}

/// Takes the exclusive write lock of store `path`.
fn lock(path: &Path) -> Result<WriteLock, DbError> {
    let lp = lock_path(path);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lp)
        .map_err(io(&lp))?;
    let busy = || DbError::Busy {
        path: path.to_owned(),
    };
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function owns; no memory is involved.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            busy()
        } else {
            io(&lp)(e)
        });
    }
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::fs::MetadataExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let d = std::fs::metadata(&dir).map_err(io(&dir))?;
    let file = path.file_name().unwrap_or_default().as_encoded_bytes();
    let mut name = format!("nearflow-store:{:x}:{:x}:", d.dev(), d.ino()).into_bytes();
    // An abstract name holds at most 107 bytes: a long file name by its checksum.
    if name.len() + file.len() <= 100 {
        name.extend_from_slice(file);
    } else {
        name.extend_from_slice(format!("{:08x}", crc32fast::hash(file)).as_bytes());
    }
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).map_err(io(path))?;
    match std::os::unix::net::UnixListener::bind_addr(&addr) {
        Ok(l) => Ok(WriteLock { _file: f, _name: l }),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(busy()),
        Err(e) => Err(io(path)(e)),
    }
}

fn sync_dir(path: &Path) -> Result<(), DbError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io(&dir))
}

/// Writes a log of `header(base_seq, snap)` and `records` to `path` atomically (a temporary
/// file synced and renamed over it, the directory synced).
fn write_log(path: &Path, base_seq: u64, snap: Fingerprint, records: &[u8]) -> Result<(), DbError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let r = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(&logfmt::header(base_seq, snap))?;
        f.write_all(records)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(path)(e));
    }
    sync_dir(path)
}

/// The log's records, read: the last sequence number, the changes of every record in order,
/// the length of the good prefix and the bytes of a torn last record; an error naming the byte
/// for damage.
fn read_log(path: &Path, bytes: &[u8]) -> Result<logfmt::Scan, DbError> {
    let damaged = |why: String| DbError::Damaged {
        path: path.to_owned(),
        why,
    };
    let scan = logfmt::scan(bytes).map_err(damaged)?;
    if let End::Damaged { at, record, why } = &scan.end {
        let after = logfmt::readable_after(bytes, scan.version, *at, scan.last_seq);
        return Err(damaged(format!(
            "at byte {at} (record {record}): {why}; {} good record{} before it, {after} readable after it",
            scan.records.len(),
            if scan.records.len() == 1 { "" } else { "s" },
        )));
    }
    Ok(scan)
}

/// The good records of `scan` (over `bytes`) framed in the format written.
fn reframed(bytes: &[u8], scan: &logfmt::Scan) -> Vec<u8> {
    let mut out = Vec::with_capacity(scan.good);
    for r in &scan.payloads {
        logfmt::frame(&bytes[r.clone()], &mut out);
    }
    out
}

fn encode(seq: u64, store: &Store, changes: &[([Id; 4], bool)]) -> Vec<u8> {
    let mut p = Vec::with_capacity(16 + changes.len() * 64);
    p.extend_from_slice(&seq.to_le_bytes());
    p.extend_from_slice(&(changes.len() as u32).to_le_bytes());
    let mut key = String::new();
    for (q, holds) in changes {
        p.push(u8::from(*holds));
        for (i, &id) in q.iter().enumerate() {
            key.clear();
            if !(i == 3 && id == DEFAULT_GRAPH) {
                store.dict().term(id).as_ref().encode(&mut key);
            }
            p.extend_from_slice(&(key.len() as u32).to_le_bytes());
            p.extend_from_slice(key.as_bytes());
        }
    }
    let mut rec = Vec::with_capacity(12 + p.len());
    logfmt::frame(&p, &mut rec);
    rec
}

/// `store` with `records` applied in order (later ones win for a quad).
fn replay(store: &Store, records: &[Changes]) -> Result<Store, DbError> {
    if records.is_empty() {
        return Ok(store.clone());
    }
    let mut e = store.edit();
    for changes in records {
        for (keys, holds) in changes {
            let mut q = [DEFAULT_GRAPH; 4];
            for (i, k) in keys.iter().enumerate() {
                if !k.is_empty() {
                    q[i] = e.intern(TermRef::decode(k))?;
                }
            }
            if *holds {
                e.insert(q);
            } else {
                e.remove(q);
            }
        }
    }
    Ok(e.finish())
}

/// The snapshot's identity, to notice a checkpoint replacing it while it is read.
fn identity(path: &Path) -> Option<(u64, u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()?))
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

    /// Folds the current delta into new sorted indexes, and writes a snapshot when the log
    /// has grown past [`Tuning::checkpoint_bytes`] (or when `checkpoint`). Returns whether it
    /// merged. Queries and updates go on meanwhile.
    ///
    /// A large store's version keeps its delta instead: the checkpoint, when due, writes the
    /// delta as a segment beside the snapshot, or — once the delta is large — the snapshot
    /// again with the delta merged in (see the module's text).
    pub fn merge(&self, checkpoint: bool) -> Result<bool, DbError> {
        let _one = self.merging.lock().expect("not poisoned");
        let (from, seq, cut) = {
            let w = self.writer.lock().expect("not poisoned");
            (self.current(), w.seq, w.log.as_ref().map(|l| l.len))
        };
        let due = checkpoint || cut.is_some_and(|c| c >= self.tuning.checkpoint_bytes);
        if let (Some(path), Some(cut)) = (&self.snapshot, cut) {
            if self.keeps_delta(&from) {
                // An empty delta (updates that cancelled out) is written too: the segment
                // then says the snapshot is the store, and the log is cut all the same.
                if due {
                    self.write_segment(path, &from, seq, cut)?;
                }
                return Ok(false);
            }
            if self.is_large(&from) && !from.is_flat() {
                self.rewrite_large(path, &from, seq, cut)?;
                return Ok(true);
            }
        }
        let started = Instant::now();
        let merged_any = !from.is_flat();
        let merged = Arc::new(from.merged().map_err(SnapshotError::from)?);
        // The merge read every row and term of `from`: a damaged one read as a stand-in.
        if let Some(d) = from.settled_damage() {
            return Err(DbError::SnapshotDamaged {
                path: self.snapshot.clone().unwrap_or_default(),
                why: d.to_owned(),
            });
        }
        {
            let _w = self.writer.lock().expect("not poisoned");
            let latest = self.current();
            let next = if Arc::ptr_eq(&latest, &from) {
                merged.clone()
            } else {
                Arc::new(latest.rebased_onto(&from, &merged)?)
            };
            *self.current.write().expect("not poisoned") = next;
        }
        if merged_any {
            let mut st = self.stats.lock().expect("not poisoned");
            st.merges += 1;
            st.last_merge = started.elapsed();
        }
        let (Some(path), Some(cut)) = (&self.snapshot, cut) else {
            return Ok(merged_any);
        };
        if due {
            // The snapshot holds every record up to `seq` (the log's first `cut` bytes).
            self.save_snapshot(&merged, path)?;
            self.cut_log(seq, cut)?;
            // The snapshot just written, mapped: the versions go on over its indexes, read in
            // place, and the copies in memory are freed once no query holds them.
            let mapped = self.map_written(path, &merged)?;
            let _w = self.writer.lock().expect("not poisoned");
            let latest = self.current();
            let next = latest.rebased_onto(&merged, &mapped)?;
            *self.current.write().expect("not poisoned") = Arc::new(next);
        }
        Ok(merged_any)
    }

    /// Whether `store` lies over a snapshot large enough to keep its delta beside it.
    fn is_large(&self, store: &Store) -> bool {
        store.base.len() as u64 >= self.tuning.segment_min_quads
            && self
                .disk
                .lock()
                .expect("not poisoned")
                .as_ref()
                .is_some_and(|d| d.under(store))
    }

    /// Whether `store` keeps its delta: it lies over a large snapshot, and its delta is below
    /// the size at which the snapshot is written again.
    fn keeps_delta(&self, store: &Store) -> bool {
        let (a, r) = store.delta().counts();
        let room = self
            .tuning
            .delta_max_quads
            .min(store.base.len() as u64 / self.tuning.rewrite_fraction.max(1));
        ((a + r) as u64) < room && self.is_large(store)
    }

    /// Writes `from`'s delta (every record up to `seq`, the log's first `cut` bytes) as the
    /// snapshot's segment, then cuts the log.
    fn write_segment(&self, path: &Path, from: &Store, seq: u64, cut: u64) -> Result<(), DbError> {
        let print = {
            let disk = self.disk.lock().expect("not poisoned");
            disk.as_ref().expect("a large store's snapshot").print
        };
        let bytes = segment::write(path, print, seq, from)?;
        // Recorded before the log is cut: from here on, the store needs the segment.
        self.need_segment(seq)?;
        self.cut_log(seq, cut)?;
        let mut st = self.stats.lock().expect("not poisoned");
        st.segments += 1;
        st.last_checkpoint_bytes = bytes;
        Ok(())
    }

    /// Records, synced, that the store needs the segment holding the updates up to `upto`
    /// beside its snapshot (0: none).
    fn need_segment(&self, upto: u64) -> Result<(), DbError> {
        let mut w = self.writer.lock().expect("not poisoned");
        w.segment = upto;
        self.record(&w)
    }

    /// Records `w`'s state in `STORE.acked`, synced (a durable store's).
    fn record(&self, w: &Writer) -> Result<(), DbError> {
        match (&self.snapshot, w.acked.is_some()) {
            (Some(path), true) => record_acked(path, w.acked()),
            _ => Ok(()),
        }
    }

    /// Writes `store` as the snapshot at `path` (a checkpoint: every record up to the log's
    /// cut), recording it (synced) as the snapshot about to replace the one the log follows
    /// before it is renamed: a crash before the log follows it leaves a snapshot the record
    /// names beside the old log, which an open accepts (and nothing else).
    fn save_snapshot(&self, store: &Store, path: &Path) -> Result<(), DbError> {
        let saved = snapshot::save_then(store, path, |tmp| {
            let print = segment::fingerprint(tmp)?;
            let mut w = self.writer.lock().expect("not poisoned");
            w.next = Some(print);
            self.record(&w)
        });
        if saved.is_err() {
            // Not renamed: the record names no file that will be the snapshot.
            let mut w = self.writer.lock().expect("not poisoned");
            if w.next.take().is_some() {
                let _ = self.record(&w);
            }
        }
        saved
    }

    /// Writes `from` (every record up to `seq`) as the snapshot, its delta merged in as the
    /// rows stream out; cuts the log, removes the segment, and rebases the versions onto the
    /// snapshot mapped.
    fn rewrite_large(&self, path: &Path, from: &Store, seq: u64, cut: u64) -> Result<(), DbError> {
        let started = Instant::now();
        self.save_snapshot(from, path)?;
        self.cut_log(seq, cut)?;
        let mapped = self.map_written(path, from)?;
        {
            let _w = self.writer.lock().expect("not poisoned");
            let latest = self.current();
            let next = latest.rebased_onto(from, &mapped)?;
            *self.current.write().expect("not poisoned") = Arc::new(next);
        }
        let mut st = self.stats.lock().expect("not poisoned");
        st.merges += 1;
        st.last_merge = started.elapsed();
        Ok(())
    }

    /// The log cut to the records after its first `cut` bytes (the last of them `seq`), now
    /// that a snapshot or segment holds those.
    fn cut_log(&self, seq: u64, cut: u64) -> Result<(), DbError> {
        let mut w = self.writer.lock().expect("not poisoned");
        // The log follows the snapshot a checkpoint just wrote, or the one it followed.
        let snap = w.next.unwrap_or(w.snap);
        let log = w.log.as_mut().expect("a durable store has its log");
        let rest = log.read_from(cut)?;
        write_log(&log.path, seq, snap, &rest)?;
        *log = open_append(&log.path)?;
        w.snap = snap;
        if w.next.take().is_some() {
            // The new snapshot holds every record up to `seq`, the segment's among them: the
            // store needs no segment from here on (its file goes once the snapshot is mapped).
            w.segment = 0;
            self.record(&w)?;
        }
        Ok(())
    }

    /// The snapshot at `path` just written from `written`, mapped; the segment of the one it
    /// replaced removed, and the new one recorded as the store's file.
    fn map_written(&self, path: &Path, written: &Store) -> Result<Store, DbError> {
        // The snapshot holds the segment's updates: recorded before the segment goes.
        self.need_segment(0)?;
        remove_segment(path)?;
        let mapped = snapshot::open(path, written.machine())?;
        let print = segment::fingerprint(path)?;
        *self.disk.lock().expect("not poisoned") = Some(OnDisk::of(&mapped, print));
        let mut st = self.stats.lock().expect("not poisoned");
        st.checkpoints += 1;
        st.last_checkpoint_bytes = print.file_len();
        Ok(mapped)
    }

    /// Starts the background merge: a thread that merges once the delta holds
    /// [`Tuning::merge_quads`] quads, or a delta has waited [`Tuning::merge_idle`] without an
    /// update. It ends when the `Db` is dropped… or at [`stop_merger`](Self::stop_merger).
    pub fn start_merger(self: &Arc<Self>) -> std::thread::JoinHandle<()> {
        let db = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("nearflow-merge".into())
            .spawn(move || loop {
                let Some(db) = db.upgrade() else { return };
                if *db.stop.lock().expect("not poisoned") {
                    return;
                }
                let due = {
                    let w = db.writer.lock().expect("not poisoned");
                    let cur = db.current();
                    let (a, r) = cur.delta().counts();
                    let size = a + r;
                    let idle = w.last_update.elapsed();
                    let kept = db.keeps_delta(&cur);
                    let checkpoint = w
                        .log
                        .as_ref()
                        .is_some_and(|l| l.len >= db.tuning.checkpoint_bytes);
                    // A delta kept beside the snapshot waits for its checkpoint; another is
                    // merged once large, or once no update has come for a while.
                    if (kept && checkpoint)
                        || (!kept
                            && (size >= db.tuning.merge_quads
                                || (size > 0 && idle >= db.tuning.merge_idle)))
                    {
                        None
                    } else if kept {
                        let (_w, _) = db
                            .wake
                            .wait_timeout(w, Duration::from_secs(1))
                            .expect("not poisoned");
                        Some(())
                    } else {
                        let wait = if size > 0 {
                            db.tuning.merge_idle - idle
                        } else {
                            Duration::from_secs(1)
                        };
                        let (_w, _) = db.wake.wait_timeout(w, wait).expect("not poisoned");
                        Some(())
                    }
                };
                if due.is_none() {
                    let r = db.merge(false);
                    let mut failure = db.failure.lock().expect("not poisoned");
                    match r {
                        Ok(_) => *failure = None,
                        Err(e) => {
                            eprintln!("nearflow: the background merge failed: {e}");
                            *failure = Some(e.to_string());
                            drop(failure);
                            db.stats.lock().expect("not poisoned").failed += 1;
                            std::thread::sleep(Duration::from_secs(1));
                        }
                    }
                }
            })
            .expect("a thread can be started")
    }

    /// Why the last background merge or checkpoint failed, when none has succeeded since.
    pub fn last_failure(&self) -> Option<String> {
        self.failure.lock().expect("not poisoned").clone()
    }

    /// Stops the background merge thread (it ends at its next wake).
    pub fn stop_merger(&self) {
        *self.stop.lock().expect("not poisoned") = true;
        self.wake.notify_all();
    }
}

/// What [`salvage`] did to a store's log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Salvaged {
    /// Records kept: those before the damage (all of them when there was none).
    pub kept: usize,
    /// Acknowledged records dropped: the damaged one and those still readable after it.
    pub dropped: usize,
    /// Where the damaged log was copied before it was cut (`None`: nothing was damaged).
    pub copy: Option<PathBuf>,
    /// Where and how it was damaged.
    pub why: Option<String>,
    /// Acknowledged updates past the log's end (`STORE.acked` recorded a later one), given up:
    /// the record now names the log's last update.
    pub unlogged: u64,
    /// The last update of a delta segment the store needed and did not find (or found
    /// written beside another snapshot), given up.
    pub segment_lost: Option<u64>,
    /// Records of a log that follows another snapshot, given up (the log is copied to
    /// [`copy`](Self::copy) and started afresh): the snapshot opens as it is.
    pub foreign: Option<usize>,
}

/// Opens the way past what an open refuses, under the store's write lock, saying what it
/// gives up: a damaged log is cut back to its good records (a copy of it kept as
/// `STORE.log.damaged`); a log that follows another snapshot is started afresh (a copy kept as
/// `STORE.log.foreign`); acknowledged updates past the log's end and a segment the store needs
/// and lacks (or finds written beside another snapshot) are given up. A store that needs none
/// of this is left as it is; a log whose header is damaged cannot be salvaged.
pub fn salvage(path: &Path) -> Result<Salvaged, DbError> {
    let _lock = lock(path)?;
    let lp = log_path(path);
    let print = segment::fingerprint(path)?;
    let ap = acked_path(path);
    let acked = match read_acked(&ap) {
        Ok(a) => a,
        // A damaged record says nothing to keep.
        Err(DbError::Damaged { .. }) => Some(Acked {
            seq: u64::MAX,
            ..Acked::default()
        }),
        Err(e) => return Err(e),
    };
    let next = acked.and_then(|a| a.next);
    let floor = acked.map_or(0, |a| a.seq).min(u64::MAX - 1);
    let (mut out, last) = match std::fs::read(&lp) {
        Ok(bytes) => salvage_log(&lp, &bytes, print, next, floor)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Salvaged::default(), 0),
        Err(e) => return Err(io(&lp)(e)),
    };
    // The segment is the snapshot's own, or a checkpoint wrote this snapshot over the one it
    // belonged to (and the snapshot holds what it held).
    let seg = segment::base_of(path)?;
    let usable = seg == Some(print) || next == Some(print);
    if seg.is_some_and(|f| f != print) {
        remove_segment(path)?;
    }
    match acked {
        Some(a) if a.seq > last || (a.segment > 0 && !usable) || out.foreign.is_some() => {
            if a.seq > last && a.seq != u64::MAX && out.foreign.is_none() {
                out.unlogged = a.seq - last;
            }
            if a.segment > 0 && !usable {
                out.segment_lost = Some(a.segment);
            }
            let segment = if usable && seg == Some(print) {
                a.segment
            } else {
                0
            };
            record_acked(
                path,
                Acked {
                    seq: a.seq.min(last).max(segment),
                    segment,
                    // A log started afresh follows this snapshot; else the record of a
                    // snapshot being written still tells the next open which it is.
                    next: a.next.filter(|_| out.foreign.is_none()),
                },
            )?;
        }
        _ => {}
    }
    Ok(out)
}

/// [`salvage`] of the log's bytes beside the snapshot of fingerprint `print` (`next`: the
/// snapshot `STORE.acked` says a checkpoint or a replacement was writing; `floor`: the last
/// acknowledged update it records): what was kept and dropped, and the last update the log
/// now holds.
fn salvage_log(
    lp: &Path,
    bytes: &[u8],
    print: Fingerprint,
    next: Option<Fingerprint>,
    floor: u64,
) -> Result<(Salvaged, u64), DbError> {
    let scan = logfmt::scan(bytes).map_err(|why| DbError::Damaged {
        path: lp.to_owned(),
        why,
    })?;
    let keep_copy = |suffix: &str| -> Result<PathBuf, DbError> {
        let mut copy = lp.as_os_str().to_owned();
        copy.push(suffix);
        let copy = PathBuf::from(copy);
        std::fs::write(&copy, bytes)
            .and_then(|()| File::open(&copy)?.sync_all())
            .map_err(io(&copy))?;
        Ok(copy)
    };
    let foreign = scan.snap.is_some_and(|f| f != print)
        && next != Some(print)
        && next != Some(Fingerprint::REPLACING);
    if foreign {
        let copy = keep_copy(".foreign")?;
        // Numbered on from every update the store acknowledged or the log held.
        let last = scan.last_seq.max(floor);
        write_log(lp, last, print, &[])?;
        return Ok((
            Salvaged {
                copy: Some(copy),
                foreign: Some(scan.records.len()),
                ..Salvaged::default()
            },
            last,
        ));
    }
    let End::Damaged { at, record, why } = &scan.end else {
        return Ok((
            Salvaged {
                kept: scan.records.len(),
                ..Salvaged::default()
            },
            scan.last_seq,
        ));
    };
    let dropped = 1 + logfmt::readable_after(bytes, scan.version, *at, scan.last_seq);
    let copy = keep_copy(".damaged")?;
    write_log(lp, scan.base_seq, print, &reframed(bytes, &scan))?;
    Ok((
        Salvaged {
            kept: scan.records.len(),
            dropped,
            copy: Some(copy),
            why: Some(format!("at byte {at} (record {record}): {why}")),
            ..Salvaged::default()
        },
        scan.last_seq,
    ))
}

/// Removes the temporary files a killed writer of this store left (a snapshot or a log being
/// written: `.NAME.PID.tmp`, `NAME.log.PID.tmp`). Called under the write lock, so no writer
/// is making one now.
fn remove_stale_temporaries(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let (snap, log) = (format!(".{name}."), format!("{name}.log."));
    for e in entries.flatten() {
        let f = e.file_name();
        let Some(f) = f.to_str() else { continue };
        if f.ends_with(".tmp") && (f.starts_with(&snap) || f.starts_with(&log)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Removes the segment beside snapshot `path`, if any (one the snapshot holds everything of),
/// durably.
fn remove_segment(path: &Path) -> Result<(), DbError> {
    let seg = segment::segment_path(path);
    match std::fs::remove_file(&seg) {
        Ok(()) => sync_dir(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(&seg)(e)),
    }
}

fn open_append(path: &Path) -> Result<Log, DbError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(path)
        .map_err(io(path))?;
    let len = file.metadata().map_err(io(path))?.len();
    Ok(Log {
        path: path.to_owned(),
        file,
        len,
    })
}

impl Log {
    /// Appends a record and syncs it; on failure cuts the log back to where it was.
    fn append(&mut self, rec: &[u8]) -> Result<(), DbError> {
        let r = self
            .file
            .write_all(rec)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = r {
            let _ = self.file.set_len(self.len);
            let _ = self.file.sync_data();
            return Err(io(&self.path)(e));
        }
        self.len += rec.len() as u64;
        Ok(())
    }

    /// The bytes from offset `at` to the end.
    fn read_from(&mut self, at: u64) -> Result<Vec<u8>, DbError> {
        let mut f = File::open(&self.path).map_err(io(&self.path))?;
        f.seek(SeekFrom::Start(at)).map_err(io(&self.path))?;
        let mut out = Vec::new();
        f.read_to_end(&mut out).map_err(io(&self.path))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict::Dict;
    use crate::log::HEADER;
    use crate::term::TermRef;

    fn machine() -> Machine {
        nearflow_topo::from_synthetic("pack:2 [numa] core:1 pu:1").unwrap()
    }

    fn store_with(n: usize) -> Store {
        let mut d = Dict::new();
        let p = d.intern(TermRef::Iri("http://p")).unwrap();
        let quads = (0..n)
            .map(|i| {
                let s = d.intern(TermRef::Iri(&format!("http://s{i}"))).unwrap();
                [s, p, s, DEFAULT_GRAPH]
            })
            .collect();
        Store::build(&machine(), d, quads).unwrap()
    }

    /// Inserts `<http://new{i}> <http://p> "i"` in graph `g` (or the default graph).
    fn insert(db: &Db, i: usize, g: Option<&str>) -> Committed {
        db.update(|s| {
            let mut e = s.edit();
            let q = [
                e.intern(TermRef::Iri(&format!("http://new{i}")))?,
                e.intern(TermRef::Iri("http://p"))?,
                e.intern(TermRef::string(&i.to_string()))?,
                match g {
                    Some(g) => e.intern(TermRef::Iri(g))?,
                    None => DEFAULT_GRAPH,
                },
            ];
            e.insert(q);
            let changes = e.changes();
            Ok::<_, crate::dict::DictFull>((e.finish(), changes))
        })
        .unwrap()
    }

    #[test]
    fn acknowledged_updates_survive_a_reopen_and_a_checkpoint() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        snapshot::save(&store_with(10), &path).unwrap();
        {
            let db = Db::open(&path, &machine(), true).unwrap();
            assert!(matches!(
                Db::open(&path, &machine(), true),
                Err(DbError::Busy { .. })
            ));
            for i in 0..5 {
                assert_eq!(insert(&db, i, None).seq, i as u64 + 1);
            }
            insert(&db, 5, Some("http://g"));
            // Nothing changed: no record.
            assert_eq!(insert(&db, 5, Some("http://g")).changed, 0);
            assert_eq!(db.current().len(), 16);
        }
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(db.stats().replayed, 6);
        assert_eq!(db.current().len(), 16);
        assert_eq!(db.seq(), 6);
        assert!(db.merge(true).unwrap());
        assert!(db.current().is_flat());
        assert_eq!(db.stats().checkpoints, 1);
        insert(&db, 6, None);
        drop(db);
        let read = Db::open(&path, &machine(), false).unwrap();
        assert_eq!(read.stats().replayed, 1, "the checkpoint cut the log");
        assert_eq!(read.current().len(), 17);
        assert_eq!(read.seq(), 7);
        assert!(matches!(
            read.update(|_| Ok::<_, DbError>((store_with(1), vec![]))),
            Err(UpdateError::Store(DbError::ReadOnly))
        ));
    }

    #[test]
    fn a_torn_last_record_is_dropped_and_damage_elsewhere_refused() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        snapshot::save(&store_with(3), &path).unwrap();
        {
            let db = Db::open(&path, &machine(), true).unwrap();
            for i in 0..3 {
                insert(&db, i, None);
            }
        }
        let lp = log_path(&path);
        let whole = std::fs::read(&lp).unwrap();
        // Cut at every byte of the last record: the first two updates always come back. The
        // third was acknowledged, so its loss is refused; a crash while its record was being
        // written (before it was acknowledged) leaves the record of the second as the last.
        let rec = (whole.len() - HEADER) / 3;
        let acked = std::fs::read(acked_path(&path)).unwrap();
        for cut in [
            whole.len() - 1,
            whole.len() - rec + 3,
            whole.len() - rec + 9,
        ] {
            std::fs::write(&lp, &whole[..cut]).unwrap();
            std::fs::write(acked_path(&path), &acked).unwrap();
            let e = Db::open(&path, &machine(), false).unwrap_err().to_string();
            assert!(e.contains("1 acknowledged update is missing"), "{e}");
            record_acked(
                &path,
                Acked {
                    seq: 2,
                    ..Acked::default()
                },
            )
            .unwrap();
            let db = Db::open(&path, &machine(), true).unwrap();
            assert_eq!(db.current().len(), 5, "cut at {cut}");
            assert!(db.stats().dropped_bytes > 0);
            drop(db);
            assert_eq!(
                std::fs::metadata(&lp).unwrap().len() as usize,
                whole.len() - rec,
                "the torn record is cut off"
            );
        }
        // A flipped byte in the first record, with records after it: refused, naming where.
        let mut bad = whole.clone();
        bad[HEADER + 12] ^= 1;
        std::fs::write(&lp, &bad).unwrap();
        let e = Db::open(&path, &machine(), false).unwrap_err().to_string();
        assert!(e.contains("damaged at byte 36 (record 1)"), "{e}");
        // A bad header.
        std::fs::write(&lp, b"hello").unwrap();
        let e = Db::open(&path, &machine(), false).unwrap_err().to_string();
        assert!(e.contains("header"), "{e}");
    }

    /// An acknowledged update the log no longer holds (cut at a record's end, zeroed from the
    /// middle, the last record damaged, removed, an older copy put back) is refused, saying how
    /// many; `salvage` gives them up, saying so, and the store opens; bytes after the last
    /// acknowledged record (a torn write) are dropped as before.
    #[test]
    fn acknowledged_updates_past_the_log_are_refused_until_salvaged() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        snapshot::save(&store_with(3), &path).unwrap();
        let lp = log_path(&path);
        let older = {
            let db = Db::open(&path, &machine(), true).unwrap();
            for i in 0..3 {
                insert(&db, i, None);
            }
            let older = std::fs::read(&lp).unwrap();
            for i in 3..5 {
                insert(&db, i, None);
            }
            older
        };
        let whole = std::fs::read(&lp).unwrap();
        let starts = record_starts(&whole);
        let mut flipped = whole.clone();
        *flipped.last_mut().unwrap() ^= 0x10;
        let mut zeroed = whole.clone();
        zeroed[starts[2]..].fill(0);
        let cases: [(&str, Option<Vec<u8>>, u64); 5] = [
            (
                "cut after the third record",
                Some(whole[..starts[3]].to_vec()),
                2,
            ),
            ("zeroed from the third record", Some(zeroed), 3),
            ("the last record damaged", Some(flipped), 1),
            ("an older copy", Some(older), 2),
            ("removed", None, 5),
        ];
        let acked = std::fs::read(acked_path(&path)).unwrap();
        for (case, log, missing) in cases {
            match &log {
                Some(b) => std::fs::write(&lp, b).unwrap(),
                None => std::fs::remove_file(&lp).unwrap(),
            }
            std::fs::write(acked_path(&path), &acked).unwrap();
            for writable in [false, true] {
                let e = Db::open(&path, &machine(), writable)
                    .unwrap_err()
                    .to_string();
                let s = if missing == 1 { " is" } else { "s are" };
                assert!(
                    e.contains(&format!("{missing} acknowledged update{s} missing")),
                    "{case}: {e}"
                );
                assert!(e.contains("--salvage"), "{case}: {e}");
            }
            let s = salvage(&path).unwrap();
            assert_eq!(s.unlogged, missing, "{case}");
            let db = Db::open(&path, &machine(), true).unwrap();
            assert_eq!(db.current().len(), 3 + 5 - missing, "{case}");
            drop(db);
            std::fs::write(&lp, &whole).unwrap();
        }
        // A write cut short after the last acknowledged record: dropped, nothing refused.
        std::fs::write(acked_path(&path), &acked).unwrap();
        let mut torn = whole.clone();
        torn.extend_from_slice(&whole[starts[4]..starts[4] + 10]);
        std::fs::write(&lp, &torn).unwrap();
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(db.current().len(), 8);
        assert!(db.stats().dropped_bytes > 0);
    }

    /// The byte offsets of the records of a log of format 2.
    fn record_starts(log: &[u8]) -> Vec<usize> {
        let mut at = HEADER;
        let mut out = Vec::new();
        while at < log.len() {
            out.push(at);
            at += 12 + u32::from_le_bytes(log[at..at + 4].try_into().unwrap()) as usize;
        }
        out
    }

    #[test]
    fn a_damaged_length_in_the_middle_is_refused_and_salvage_keeps_the_prefix() {
        let (dir, whole) = logged();
        let path = dir.path().join("s.nfs");
        let lp = log_path(&path);
        let starts = record_starts(&whole);
        assert_eq!(starts.len(), 8);
        // Every bit of the fourth record's length: damage, named, never a silent prefix.
        for bit in 0..32 {
            let mut bad = whole.clone();
            bad[starts[3] + bit / 8] ^= 1 << (bit % 8);
            std::fs::write(&lp, &bad).unwrap();
            let e = Db::open(&path, &machine(), false).unwrap_err().to_string();
            assert!(
                e.contains(&format!("damaged at byte {} (record 4)", starts[3])),
                "bit {bit}: {e}"
            );
            assert!(
                e.contains("3 good records before it, 4 readable after it"),
                "{e}"
            );
        }
        // The user's choice: keep the three records before it, and be told five are dropped.
        let s = salvage(&path).unwrap();
        assert_eq!((s.kept, s.dropped), (3, 5));
        let copy = s.copy.unwrap();
        assert_eq!(std::fs::read(&copy).unwrap().len(), whole.len());
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(db.stats().replayed, 3);
        assert_eq!(db.current().len(), 6);
        drop(db);
        // A whole log is left alone.
        let s = salvage(&path).unwrap();
        assert_eq!((s.kept, s.dropped, s.copy), (3, 0, None));
    }

    #[test]
    fn a_zero_filled_tail_is_torn_and_an_old_format_log_still_opens() {
        let (dir, whole) = logged();
        let path = dir.path().join("s.nfs");
        let lp = log_path(&path);
        let mut zeros = whole.clone();
        zeros.extend(std::iter::repeat_n(0u8, 4096));
        std::fs::write(&lp, &zeros).unwrap();
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(db.stats().replayed, 8);
        assert_eq!(db.stats().dropped_bytes, 4096);
        drop(db);
        assert_eq!(std::fs::read(&lp).unwrap(), whole, "the zeros are cut off");
        // The same records framed as format 1 ([length][CRC of the payload][payload]).
        // A 20-byte header: no fingerprint of the snapshot it follows.
        let mut old = logfmt::header(0, Fingerprint::NONE)[..20].to_vec();
        old[6..8].copy_from_slice(&1u16.to_le_bytes());
        let crc = crc32fast::hash(&old[..16]);
        old[16..20].copy_from_slice(&crc.to_le_bytes());
        let starts = record_starts(&whole);
        for &at in &starts {
            let len = u32::from_le_bytes(whole[at..at + 4].try_into().unwrap()) as usize;
            old.extend_from_slice(&whole[at..at + 4]);
            old.extend_from_slice(&whole[at + 8..at + 12 + len]);
        }
        // Format 1's weakness stays covered: a damaged length with records after it.
        let mut bad = old.clone();
        bad[20 + 3] ^= 0x10;
        std::fs::write(&lp, &bad).unwrap();
        let e = Db::open(&path, &machine(), false).unwrap_err().to_string();
        assert!(e.contains("damaged at byte 20 (record 1)"), "{e}");
        std::fs::write(&lp, &old).unwrap();
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(db.stats().replayed, 8);
        insert(&db, 100, None);
        drop(db);
        let log = std::fs::read(&lp).unwrap();
        assert_eq!(
            &log[6..8],
            &logfmt::VERSION.to_le_bytes(),
            "rewritten in the format written"
        );
        assert_eq!(record_starts(&log).len(), 9);
        let db = Db::open(&path, &machine(), false).unwrap();
        assert_eq!(db.current().len(), 3 + 9);
    }

    #[test]
    fn the_background_merge_keeps_every_update_made_while_it_runs() {
        let db = Arc::new(Db::in_memory(store_with(200)));
        let t = {
            let db = db.clone();
            std::thread::spawn(move || {
                for _ in 0..20 {
                    db.merge(false).unwrap();
                }
            })
        };
        for i in 0..200 {
            insert(&db, i, if i % 2 == 0 { None } else { Some("http://g") });
        }
        t.join().unwrap();
        let s = db.current();
        assert_eq!(s.len(), 400);
        db.merge(false).unwrap();
        let s2 = db.current();
        assert!(s2.is_flat());
        let mut a = s.quads();
        let mut b = s2.quads();
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }

    #[test]
    fn a_segment_that_disagrees_with_its_snapshot_is_found_by_the_full_check() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        let db = segmented(&path);
        insert(&db, 1, None);
        db.merge(true).unwrap();
        drop(db);
        assert!(Db::open(&path, &machine(), false)
            .unwrap()
            .current()
            .delta_agrees());
        // The one added quad made `<http://s0> <http://p> <http://s0>`, which the snapshot
        // holds (ids: `http://p` 1, `http://s0` 2), under a checksum that matches.
        let seg = segment::segment_path(&path);
        let mut b = std::fs::read(&seg).unwrap();
        let body = b.len() - 4;
        for (j, id) in [0u32, 2, 1, 2].iter().enumerate() {
            b[body - 16 + 4 * j..body - 12 + 4 * j].copy_from_slice(&id.to_le_bytes());
        }
        let crc = crc32fast::hash(&b[..body]);
        b[body..].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&seg, &b).unwrap();
        let read = Db::open(&path, &machine(), false).unwrap();
        assert!(!read.current().delta_agrees());
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: std::env::var("NEARFLOW_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(128),
            failure_persistence: None,
            ..Default::default()
        })]

        /// The log reader on damaged logs: a log cut anywhere opens with a prefix of its
        /// updates; bytes flipped or inserted open or give an error, never a panic.
        #[test]
        fn a_damaged_log_opens_a_prefix_or_is_refused(
            cut in 0usize..2000,
            flips in proptest::collection::vec((0usize..2000, proptest::prelude::any::<u8>()), 0..3),
            insert in proptest::option::of((0usize..2000, proptest::prelude::any::<u8>())),
        ) {
            let (dir, whole) = logged();
            let path = dir.path().join("s.nfs");
            let lp = log_path(&path);
            let cut = cut.min(whole.len());
            std::fs::write(&lp, &whole[..cut.max(HEADER)]).unwrap();
            let db = Db::open(&path, &machine(), false).unwrap();
            let n = db.stats().replayed;
            proptest::prop_assert!(n <= 8);
            proptest::prop_assert_eq!(db.current().len(), 3 + n);
            let mut bad = whole.clone();
            for (i, b) in flips {
                let n = bad.len();
                bad[i % n] = b;
            }
            if let Some((i, b)) = insert {
                let n = bad.len();
                bad.insert(i % n, b);
            }
            std::fs::write(&lp, &bad).unwrap();
            if let Ok(db) = Db::open(&path, &machine(), false) {
                proptest::prop_assert!(db.current().len() >= 3);
            }
        }
    }

    /// A store of 3 triples and a log of 8 inserts, made once, written into a folder of the
    /// caller's own (`s.nfs` and its log); the log's bytes.
    fn logged() -> (tempfile::TempDir, Vec<u8>) {
        static MADE: std::sync::OnceLock<(Vec<u8>, Vec<u8>)> = std::sync::OnceLock::new();
        let (snap, log) = MADE.get_or_init(|| {
            let dir = tempdir();
            let path = dir.path().join("s.nfs");
            snapshot::save(&store_with(3), &path).unwrap();
            let db = Db::open(&path, &machine(), true).unwrap();
            for i in 0..8 {
                insert(&db, i, None);
            }
            drop(db);
            let log = std::fs::read(log_path(&path)).unwrap();
            (std::fs::read(&path).unwrap(), log)
        });
        let own = tempdir();
        let path = own.path().join("s.nfs");
        std::fs::write(&path, snap).unwrap();
        std::fs::write(log_path(&path), log).unwrap();
        (own, log.clone())
    }

    /// A folder of the test's own, removed when dropped.
    /// Removes `<http://s{i}> <http://p> <http://s{i}>` (a quad of [`store_with`]).
    fn remove(db: &Db, i: usize) {
        db.update(|s| {
            let mut e = s.edit();
            let t = e.intern(TermRef::Iri(&format!("http://s{i}")))?;
            let p = e.intern(TermRef::Iri("http://p"))?;
            e.remove([t, p, t, DEFAULT_GRAPH]);
            let changes = e.changes();
            Ok::<_, crate::dict::DictFull>((e.finish(), changes))
        })
        .unwrap();
    }

    /// A store of 100 quads that counts as large: its delta is kept below 50 quads.
    fn segmented(path: &Path) -> Db {
        snapshot::save(&store_with(100), path).unwrap();
        let tuning = Tuning {
            segment_min_quads: 50,
            delta_max_quads: 1000,
            rewrite_fraction: 2,
            ..Tuning::default()
        };
        Db::open_tuned(path, &machine(), true, tuning).unwrap()
    }

    use crate::bulk::tests::{stats_of, terms_of};

    #[test]
    fn a_large_store_checkpoints_its_delta_beside_the_snapshot() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        let db = segmented(&path);
        let snap = std::fs::read(&path).unwrap();
        for i in 0..10 {
            insert(&db, i, if i % 3 == 0 { Some("http://g") } else { None });
        }
        for i in 0..5 {
            remove(&db, i);
        }
        // The delta is kept: no merge, and the checkpoint writes it as a segment.
        assert!(!db.merge(true).unwrap());
        let st = db.stats();
        assert_eq!((st.segments, st.checkpoints, st.merges), (1, 0, 0));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            snap,
            "the snapshot is not written"
        );
        let seg = segment::segment_path(&path);
        let seg_len = std::fs::metadata(&seg).unwrap().len();
        assert_eq!(st.last_checkpoint_bytes, seg_len);
        assert!(seg_len < snap.len() as u64 / 4, "{seg_len} bytes");
        assert_eq!(db.current().delta().counts(), (10, 5));
        insert(&db, 10, None);
        let want = db.current();
        drop(db);
        // Reopened: the snapshot, its segment, then the one record after it.
        let read = Db::open(&path, &machine(), false).unwrap();
        assert_eq!(read.stats().segment, Some((10, 5)));
        assert_eq!(
            read.stats().replayed,
            1,
            "the segment's checkpoint cut the log"
        );
        assert_eq!(read.seq(), 16);
        let got = read.current();
        assert_eq!(got.len(), 106);
        assert_eq!(terms_of(&got), terms_of(&want));
        assert_eq!(stats_of(&got), stats_of(&want));
        assert_eq!(got.graph_ids().len(), 2);
        drop(read);
        // The segment removed: its 15 updates would be lost, so the store is not opened;
        // salvage gives them up, saying so.
        let kept = std::fs::read(&seg).unwrap();
        std::fs::remove_file(&seg).unwrap();
        for writable in [false, true] {
            let e = Db::open(&path, &machine(), writable)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("s.nfs.delta is missing") && e.contains("up to update 15"),
                "{e}"
            );
        }
        // Put back, it opens again.
        std::fs::write(&seg, &kept).unwrap();
        assert_eq!(
            Db::open(&path, &machine(), true).unwrap().current().len(),
            106
        );
        // A segment written beside another snapshot (its header names it) is not this one's.
        let mut other = kept.clone();
        other[8] ^= 1;
        let n = other.len() - 4;
        let crc = crc32fast::hash(&other[..n]);
        other[n..].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&seg, &other).unwrap();
        for writable in [false, true] {
            let e = refusal(&path, writable, "another snapshot's segment");
            assert!(e.contains("belongs to another snapshot"), "{e}");
        }
        assert_eq!(std::fs::read(&seg).unwrap(), other, "nothing removed");
        std::fs::remove_file(&seg).unwrap();
        let s = salvage(&path).unwrap();
        assert_eq!(s.segment_lost, Some(15));
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(
            db.current().len(),
            100 + 1,
            "the snapshot and the record after"
        );
    }

    #[test]
    fn updates_that_cancel_out_still_let_a_checkpoint_cut_the_log() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        let db = segmented(&path);
        for round in 0..20 {
            insert(&db, 7, None);
            db.update(|s| {
                let mut e = s.edit();
                let q = [
                    e.intern(TermRef::Iri("http://new7"))?,
                    e.intern(TermRef::Iri("http://p"))?,
                    e.intern(TermRef::string("7"))?,
                    DEFAULT_GRAPH,
                ];
                e.remove(q);
                let changes = e.changes();
                Ok::<_, crate::dict::DictFull>((e.finish(), changes))
            })
            .unwrap();
            assert!(db.current().delta().is_empty(), "round {round}");
        }
        assert!(std::fs::metadata(log_path(&path)).unwrap().len() > HEADER as u64 * 10);
        db.merge(true).unwrap();
        assert_eq!(db.stats().segments, 1);
        assert_eq!(
            std::fs::metadata(log_path(&path)).unwrap().len(),
            HEADER as u64,
            "the log is cut"
        );
        drop(db);
        let read = Db::open(&path, &machine(), false).unwrap();
        assert_eq!(read.stats().segment, Some((0, 0)));
        assert_eq!(read.current().len(), 100);
        assert_eq!(read.seq(), 40);
    }

    #[test]
    fn a_segment_and_the_log_it_did_not_cut_replay_to_the_same_store() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        let db = segmented(&path);
        for i in 0..8 {
            insert(&db, i, None);
        }
        remove(&db, 3);
        let log = std::fs::read(log_path(&path)).unwrap();
        db.merge(true).unwrap();
        let want = terms_of(&db.current());
        drop(db);
        // Killed after the segment was renamed into place, before the log was cut: every
        // record is replayed over the segment that holds it.
        std::fs::write(log_path(&path), &log).unwrap();
        let read = Db::open(&path, &machine(), false).unwrap();
        assert_eq!(read.stats().replayed, 9);
        assert_eq!(terms_of(&read.current()), want);
    }

    #[test]
    fn the_snapshot_is_written_again_once_the_delta_is_large() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        let db = segmented(&path);
        for i in 0..20 {
            insert(&db, i, None);
        }
        db.merge(true).unwrap();
        let seg = segment::segment_path(&path);
        let stale = std::fs::read(&seg).unwrap();
        for i in 20..40 {
            insert(&db, i, Some("http://g"));
        }
        for i in 0..12 {
            remove(&db, i);
        }
        // 52 quads of delta: the snapshot is written with it merged in as it streams out.
        let from = db.current();
        assert!(db.merge(false).unwrap());
        let st = db.stats();
        assert_eq!((st.segments, st.checkpoints), (1, 1));
        assert!(!seg.exists(), "the segment is removed");
        assert!(db.current().is_flat());
        let merged = from.merged().unwrap();
        drop(db);
        let read = Db::open(&path, &machine(), false).unwrap();
        assert_eq!(read.stats().replayed, 0);
        assert_eq!(read.stats().segment, None);
        assert_eq!(terms_of(&read.current()), terms_of(&merged));
        assert_eq!(stats_of(&read.current()), stats_of(&merged));
        assert_eq!(read.current().graphs(), merged.graphs());
        drop(read);
        // Killed after the new snapshot was renamed into place, before the old segment was
        // removed: the segment is stale, ignored, and removed by the next writer.
        std::fs::write(&seg, &stale).unwrap();
        let read = Db::open(&path, &machine(), false).unwrap();
        assert_eq!(read.stats().segment, None);
        assert_eq!(terms_of(&read.current()), terms_of(&merged));
        drop(read);
        let db = Db::open(&path, &machine(), true).unwrap();
        assert!(!seg.exists());
        assert_eq!(terms_of(&db.current()), terms_of(&merged));
    }

    #[test]
    fn a_damaged_segment_is_refused() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        let db = segmented(&path);
        for i in 0..6 {
            insert(&db, i, None);
        }
        remove(&db, 1);
        db.merge(true).unwrap();
        drop(db);
        let seg = segment::segment_path(&path);
        let good = std::fs::read(&seg).unwrap();
        let damaged = |bytes: &[u8]| {
            std::fs::write(&seg, bytes).unwrap();
            match Db::open(&path, &machine(), false) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("a damaged segment opened"),
            }
        };
        for at in [0, 30, 70, good.len() / 2, good.len() - 20, good.len() - 1] {
            let mut b = good.clone();
            b[at] ^= 0x40;
            let e = damaged(&b);
            assert!(e.contains("delta segment is damaged"), "byte {at}: {e}");
        }
        for len in [0, 10, good.len() - 4, good.len() - 1] {
            let e = damaged(&good[..len]);
            assert!(e.contains("delta segment is damaged"), "cut at {len}: {e}");
        }
        std::fs::write(&seg, &good).unwrap();
        assert_eq!(
            Db::open(&path, &machine(), false).unwrap().current().len(),
            105
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// A segment changed anywhere, its checksum made to match: opening it is an error or
        /// a store, never a panic.
        #[test]
        fn a_segment_changed_under_a_matching_checksum_never_panics(
            edits in proptest::collection::vec((0usize..4096, proptest::prelude::any::<u8>()), 1..6),
        ) {
            let dir = tempdir();
            let path = dir.path().join("s.nfs");
            let db = segmented(&path);
            for i in 0..6 {
                insert(&db, i, if i % 2 == 0 { Some("http://g") } else { None });
            }
            remove(&db, 2);
            db.merge(true).unwrap();
            drop(db);
            let seg = segment::segment_path(&path);
            let mut b = std::fs::read(&seg).unwrap();
            let body = b.len() - 4;
            for (at, x) in &edits {
                b[at % body] = *x;
            }
            let crc = crc32fast::hash(&b[..body]);
            b[body..].copy_from_slice(&crc.to_le_bytes());
            std::fs::write(&seg, &b).unwrap();
            if let Err(e) = Db::open(&path, &machine(), false) {
                let e = e.to_string();
                proptest::prop_assert!(e.contains("delta segment") || e.contains("s.nfs"), "{}", e);
            }
        }
    }

    /// Why the store at `path` is not opened (`why`: what should refuse it).
    fn refusal(path: &Path, writable: bool, why: &str) -> String {
        match Db::open(path, &machine(), writable) {
            Ok(_) => panic!("opened: {why}"),
            Err(e) => e.to_string(),
        }
    }

    fn tempdir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("nearflow-db-")
            .tempdir()
            .unwrap()
    }

    #[test]
    fn the_snapshot_or_log_of_another_store_is_refused_until_salvaged() {
        // Store A: 3 quads and 8 logged updates; store B: 5 quads.
        let (dir, _) = logged();
        let path = dir.path().join("s.nfs");
        let other = dir.path().join("other.nfs");
        snapshot::save(&store_with(5), &other).unwrap();
        let mine = std::fs::read(&path).unwrap();
        // B's snapshot beside A's log: its records are not replayed onto it.
        std::fs::copy(&other, &path).unwrap();
        for writable in [false, true] {
            let e = refusal(&path, writable, "another snapshot beside the log");
            assert!(
                e.contains("is not the snapshot") && e.contains("8 update records"),
                "{e}"
            );
        }
        // A's own snapshot back: every update is there.
        std::fs::write(&path, &mine).unwrap();
        assert_eq!(
            Db::open(&path, &machine(), false).unwrap().current().len(),
            3 + 8
        );
        // B's log beside A's snapshot.
        let db = Db::open(&other, &machine(), true).unwrap();
        insert(&db, 50, None);
        drop(db);
        std::fs::copy(log_path(&other), log_path(&path)).unwrap();
        let e = refusal(&path, false, "another store's log");
        assert!(e.contains("1 update record "), "{e}");
        // Salvaged: the log's record is given up (the log kept aside), the snapshot opens
        // as it is and takes updates.
        let s = salvage(&path).unwrap();
        assert_eq!(s.foreign, Some(1));
        let copy = s.copy.expect("the log kept");
        assert_eq!(
            std::fs::read(&copy).unwrap(),
            std::fs::read(log_path(&other)).unwrap()
        );
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(db.current().len(), 3);
        insert(&db, 60, None);
        drop(db);
        assert_eq!(
            Db::open(&path, &machine(), false).unwrap().current().len(),
            4
        );
    }

    #[test]
    fn an_older_copy_of_the_snapshot_is_refused() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        snapshot::save(&store_with(3), &path).unwrap();
        let old = std::fs::read(&path).unwrap();
        let db = Db::open(&path, &machine(), true).unwrap();
        for i in 0..4 {
            insert(&db, i, None);
        }
        db.merge(true).unwrap();
        insert(&db, 4, None);
        insert(&db, 5, None);
        drop(db);
        assert_ne!(
            std::fs::read(&path).unwrap(),
            old,
            "a checkpoint wrote the snapshot"
        );
        let new = std::fs::read(&path).unwrap();
        // The snapshot from before the checkpoint put back: the 4 updates it lacks are in no
        // file, and the log's 2 records are not replayed onto it.
        std::fs::write(&path, &old).unwrap();
        let e = refusal(&path, false, "an older snapshot");
        assert!(
            e.contains("is not the snapshot") && e.contains("2 update records"),
            "{e}"
        );
        std::fs::write(&path, &new).unwrap();
        assert_eq!(
            Db::open(&path, &machine(), false).unwrap().current().len(),
            3 + 6
        );
    }

    #[test]
    fn a_checkpoint_cut_short_between_its_renames_opens_with_every_update() {
        let dir = tempdir();
        let path = dir.path().join("s.nfs");
        snapshot::save(&store_with(3), &path).unwrap();
        let db = Db::open(&path, &machine(), true).unwrap();
        for i in 0..4 {
            insert(&db, i, None);
        }
        let before = std::fs::read(log_path(&path)).unwrap();
        db.merge(true).unwrap();
        drop(db);
        let print = segment::fingerprint(&path).unwrap();
        // What a crash after the new snapshot's rename and before the log's leaves: the old
        // log, and the record naming the new snapshot as the one being written.
        std::fs::write(log_path(&path), &before).unwrap();
        let crashed = |next| {
            record_acked(
                &path,
                Acked {
                    seq: 4,
                    segment: 0,
                    next,
                },
            )
            .unwrap()
        };
        crashed(Some(print));
        assert_eq!(
            Db::open(&path, &machine(), false).unwrap().current().len(),
            7
        );
        // Without that record, the same files are refused.
        crashed(None);
        assert!(Db::open(&path, &machine(), false).is_err());
        // A writable open makes the log follow the new snapshot and clears the record.
        crashed(Some(print));
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(db.current().len(), 7);
        insert(&db, 9, None);
        drop(db);
        assert_eq!(read_acked(&acked_path(&path)).unwrap().unwrap().next, None);
        assert_eq!(
            Db::open(&path, &machine(), false).unwrap().current().len(),
            8
        );
    }

    #[test]
    fn a_replacement_cut_short_opens_as_the_old_store_or_the_new_one_never_a_mix() {
        let replacing = |path: &Path| {
            record_acked(
                path,
                Acked {
                    seq: 8,
                    segment: 0,
                    next: Some(Fingerprint::REPLACING),
                },
            )
            .unwrap()
        };
        // Killed before the replacement's rename: the old snapshot and its log, whole.
        let (dir, _) = logged();
        let path = dir.path().join("s.nfs");
        replacing(&path);
        assert_eq!(
            Db::open(&path, &machine(), false).unwrap().current().len(),
            11
        );
        // Killed after it, before the new log: the replacement, the old log's records not
        // replayed onto it.
        snapshot::save(&store_with(5), &path).unwrap();
        assert_eq!(
            Db::open(&path, &machine(), false).unwrap().current().len(),
            5
        );
        let db = Db::open(&path, &machine(), true).unwrap();
        assert_eq!(db.current().len(), 5);
        insert(&db, 70, None);
        drop(db);
        assert_eq!(
            Db::open(&path, &machine(), false).unwrap().current().len(),
            6
        );
        // `Db::replace` itself leaves the new store and a log that follows it.
        Db::replace(&path, &store_with(2)).unwrap();
        assert_eq!(
            Db::open(&path, &machine(), false).unwrap().current().len(),
            2
        );
        assert_eq!(read_acked(&acked_path(&path)).unwrap().unwrap().next, None);
    }
}
