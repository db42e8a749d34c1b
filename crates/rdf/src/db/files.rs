//! The store's files beside its snapshot: the log and how it is written, read and replayed,
//! the record of the last acknowledged update (`STORE.acked`), the write lock (`STORE.lock`),
//! and the clean-up of what a killed writer left.

use super::*;

/// The log file, open for appending.
pub(super) struct Log {
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) len: u64,
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

pub(super) const ACKED_MAGIC: &[u8; 6] = b"NFACK\0";
pub(super) const ACKED_LEN: usize = 44;
/// The record's length in format 1 (without `next`).
pub(super) const ACKED_LEN_1: usize = 28;

/// What `STORE.acked` records: the last acknowledged update, the last update of the segment
/// the store needs (0: none), and the snapshot being written to replace the one the log
/// follows, from just before its rename until the log follows it
/// ([`Fingerprint::REPLACING`]: a replacement whose log starts afresh).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Acked {
    pub(super) seq: u64,
    pub(super) segment: u64,
    pub(super) next: Option<Fingerprint>,
}

/// The record at `path`; `None` when there is none (a store written before these records, or
/// one never opened for writing).
pub(super) fn read_acked(path: &Path) -> Result<Option<Acked>, DbError> {
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

pub(super) fn open_acked(path: &Path) -> Result<File, DbError> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io(path))
}

/// Writes `a` into `f` (one write at offset 0).
pub(super) fn write_acked(f: &File, a: Acked) -> std::io::Result<()> {
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
pub(super) fn record_acked(path: &Path, a: Acked) -> Result<(), DbError> {
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
pub(super) fn lock(path: &Path) -> Result<WriteLock, DbError> {
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

pub(super) fn sync_dir(path: &Path) -> Result<(), DbError> {
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
pub(super) fn write_log(
    path: &Path,
    base_seq: u64,
    snap: Fingerprint,
    records: &[u8],
) -> Result<(), DbError> {
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
pub(super) fn read_log(path: &Path, bytes: &[u8]) -> Result<logfmt::Scan, DbError> {
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
pub(super) fn reframed(bytes: &[u8], scan: &logfmt::Scan) -> Vec<u8> {
    let mut out = Vec::with_capacity(scan.good);
    for r in &scan.payloads {
        logfmt::frame(&bytes[r.clone()], &mut out);
    }
    out
}

pub(super) fn encode(seq: u64, store: &Store, changes: &[([Id; 4], bool)]) -> Vec<u8> {
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
pub(super) fn replay(store: &Store, records: &[Changes]) -> Result<Store, DbError> {
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
pub(super) fn identity(path: &Path) -> Option<(u64, u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()?))
}

/// Removes the temporary files a killed writer of this store left (a snapshot or a log being
/// written: `.NAME.PID.tmp`, `NAME.log.PID.tmp`). Called under the write lock, so no writer
/// is making one now.
pub(super) fn remove_stale_temporaries(path: &Path) {
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
pub(super) fn remove_segment(path: &Path) -> Result<(), DbError> {
    let seg = segment::segment_path(path);
    match std::fs::remove_file(&seg) {
        Ok(()) => sync_dir(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(&seg)(e)),
    }
}

pub(super) fn open_append(path: &Path) -> Result<Log, DbError> {
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
    pub(super) fn append(&mut self, rec: &[u8]) -> Result<(), DbError> {
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
    pub(super) fn read_from(&mut self, at: u64) -> Result<Vec<u8>, DbError> {
        let mut f = File::open(&self.path).map_err(io(&self.path))?;
        f.seek(SeekFrom::Start(at)).map_err(io(&self.path))?;
        let mut out = Vec::new();
        f.read_to_end(&mut out).map_err(io(&self.path))?;
        Ok(out)
    }
}
