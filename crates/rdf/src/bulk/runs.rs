//! Runs on disk: the load's temporary folder, a run's files (magic, count, entries, CRC-32)
//! written and read back with every id checked, and a run spilled on a thread of its own.

use super::*;

/// The temporary folder of a load, removed with everything in it when dropped (on success, on
/// an error, and on an interruption that returns: the CLI turns Ctrl-C into one).
pub struct TempDir {
    pub(super) path: PathBuf,
    /// Bytes its files hold now, and the most they held.
    pub(super) bytes: AtomicU64,
    pub(super) peak: AtomicU64,
}

impl TempDir {
    /// A new folder `.NAME.load-PID` beside `target`.
    pub fn beside(target: &Path) -> Result<TempDir, LoadError> {
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let name = target
            .file_name()
            .map_or_else(|| "store".into(), |n| n.to_string_lossy().into_owned());
        let path = dir.join(format!(".{name}.load-{}", std::process::id()));
        std::fs::create_dir(&path).map_err(|error| LoadError::Spill {
            path: path.clone(),
            error,
        })?;
        Ok(TempDir {
            path,
            bytes: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        })
    }

    /// Removes the temporary folders that loads into `target` killed before they could clean
    /// up (`kill -9`, a power cut) left beside it; how many. Only for a caller that holds the
    /// store's lock (`Db::replace_by`), so that no load of `target` is running.
    pub fn remove_stale(target: &Path) -> usize {
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let Some(name) = target.file_name() else {
            return 0;
        };
        let prefix = format!(".{}.load-", name.to_string_lossy());
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.strip_prefix(&prefix)
                    .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
                    && e.file_type().is_ok_and(|t| t.is_dir())
            })
            .filter(|e| std::fs::remove_dir_all(e.path()).is_ok())
            .count()
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn file(&self, name: &str, run: usize) -> PathBuf {
        self.path.join(format!("{name}-{run}"))
    }

    pub(super) fn added(&self, n: u64) {
        let now = self.bytes.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// Removes a run file it no longer needs.
    pub(super) fn remove(&self, path: &Path) {
        if let Ok(m) = std::fs::metadata(path) {
            self.bytes.fetch_sub(m.len(), Ordering::Relaxed);
        }
        let _ = std::fs::remove_file(path);
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub(super) fn spill_err(path: &Path) -> impl Fn(std::io::Error) -> LoadError + '_ {
    move |error| LoadError::Spill {
        path: path.to_owned(),
        error,
    }
}

pub(super) fn damaged(why: impl Into<String>) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("a temporary run file is damaged: {}", why.into()),
    )
}

/// The first bytes of every run file.
pub(super) const RUN_MAGIC: &[u8; 8] = b"NFRUN\0\0\x01";

/// Writes a run file: the magic, the count of entries, the entries (LEB128 integers and raw
/// bytes), and the CRC-32 of the entries.
pub(super) struct RunWriter {
    pub(super) out: BufWriter<Hashing<File>>,
}

impl RunWriter {
    pub(super) fn create(path: &Path, count: u64) -> std::io::Result<RunWriter> {
        let mut f = File::create(path)?;
        f.write_all(RUN_MAGIC)?;
        f.write_all(&count.to_le_bytes())?;
        Ok(RunWriter {
            out: BufWriter::with_capacity(
                1 << 18,
                Hashing {
                    inner: f,
                    crc: crc32fast::Hasher::new(),
                },
            ),
        })
    }

    #[inline]
    pub(super) fn varint(&mut self, mut v: u64) -> std::io::Result<()> {
        let mut buf = [0u8; 10];
        let mut n = 0;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                buf[n] = b;
                n += 1;
                break;
            }
            buf[n] = b | 0x80;
            n += 1;
        }
        self.out.write_all(&buf[..n])
    }

    pub(super) fn bytes(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.out.write_all(b)
    }

    /// Writes the checksum; the file's size.
    pub(super) fn finish(self) -> std::io::Result<u64> {
        let h = self.out.into_inner().map_err(|e| e.into_error())?;
        let mut f = h.inner;
        f.write_all(&h.crc.finalize().to_le_bytes())?;
        f.flush()?;
        f.metadata().map(|m| m.len())
    }
}

/// Reads a run file that [`RunWriter`] wrote, checking its magic, its length and, at
/// [`end`](Self::end), its checksum.
pub(super) struct RunReader {
    pub(super) file: std::io::Take<File>,
    pub(super) buf: Vec<u8>,
    pub(super) at: usize,
    pub(super) crc: crc32fast::Hasher,
    /// Entries the file says it holds.
    pub(super) count: u64,
}

impl RunReader {
    pub(super) fn open(path: &Path) -> std::io::Result<RunReader> {
        let mut f = File::open(path)?;
        let len = f.metadata()?.len();
        let mut head = [0u8; 16];
        if len < 20 || f.read_exact(&mut head).is_err() {
            return Err(damaged("cut short before its header ends"));
        }
        if &head[..8] != RUN_MAGIC {
            return Err(damaged("not a run file (bad magic number)"));
        }
        let count = u64::from_le_bytes(head[8..].try_into().expect("8 bytes"));
        Ok(RunReader {
            file: f.take(len - 20),
            buf: Vec::with_capacity(1 << 18),
            at: 0,
            crc: crc32fast::Hasher::new(),
            count,
        })
    }

    /// Makes at least one byte ready; false at the end of the entries.
    pub(super) fn fill(&mut self) -> std::io::Result<bool> {
        if self.at < self.buf.len() {
            return Ok(true);
        }
        self.buf.clear();
        self.at = 0;
        (&mut self.file).take(1 << 18).read_to_end(&mut self.buf)?;
        self.crc.update(&self.buf);
        Ok(!self.buf.is_empty())
    }

    #[inline]
    pub(super) fn byte(&mut self) -> std::io::Result<u8> {
        if self.at == self.buf.len() && !self.fill()? {
            return Err(damaged("cut short inside an entry"));
        }
        let b = self.buf[self.at];
        self.at += 1;
        Ok(b)
    }

    #[inline]
    pub(super) fn varint(&mut self) -> std::io::Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(damaged("an integer longer than 64 bits"))
    }

    /// A varint that must be an id (at most [`Id::MAX`]).
    #[inline]
    pub(super) fn id(&mut self) -> std::io::Result<Id> {
        Id::try_from(self.varint()?).map_err(|_| damaged("an id past 32 bits"))
    }

    pub(super) fn bytes(&mut self, n: usize, out: &mut Vec<u8>) -> std::io::Result<()> {
        out.clear();
        while out.len() < n {
            if !self.fill()? {
                return Err(damaged("cut short inside a term"));
            }
            let take = (n - out.len()).min(self.buf.len() - self.at);
            out.extend_from_slice(&self.buf[self.at..self.at + take]);
            self.at += take;
        }
        Ok(())
    }

    /// After the last entry: nothing may be left, and the checksum must match.
    pub(super) fn end(mut self) -> std::io::Result<()> {
        if self.at < self.buf.len() || self.fill()? {
            return Err(damaged("bytes after its last entry"));
        }
        let mut want = [0u8; 4];
        self.file
            .into_inner()
            .read_exact(&mut want)
            .map_err(|_| damaged("cut short before its checksum"))?;
        if self.crc.finalize() != u32::from_le_bytes(want) {
            return Err(damaged("checksum mismatch"));
        }
        Ok(())
    }
}

/// A run as spilled: its terms and quads.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Run {
    pub(super) terms: u64,
    pub(super) quads: u64,
}

/// Bytes a run holds in memory: its dictionary and its quads' vector, as allocated.
pub(super) fn run_bytes(run: &Loaded) -> u64 {
    (run.dict.heap_bytes() + run.quads.capacity() * std::mem::size_of::<Quad>()) as u64
}

/// Writes `run` to `terms-R` (its keys sorted, each with its id) and `quads-R`.
pub(super) fn spill(tmp: &TempDir, r: usize, run: Loaded) -> Result<Run, LoadError> {
    let Loaded { dict, quads } = run;
    let n = dict.len();
    let mut ids: Vec<Id> = (1..=n as Id).collect();
    ids.sort_unstable_by(|&a, &b| dict.key_of(a).cmp(&dict.key_of(b)));
    let path = tmp.file("terms", r);
    let mut w = RunWriter::create(&path, n as u64).map_err(spill_err(&path))?;
    for &id in &ids {
        let k = dict.key_of(id);
        w.varint(k.len() as u64)
            .and_then(|()| w.bytes(k.as_bytes()))
            .and_then(|()| w.varint(u64::from(id)))
            .map_err(spill_err(&path))?;
    }
    tmp.added(w.finish().map_err(spill_err(&path))?);
    drop((ids, dict));
    let path = tmp.file("quads", r);
    let mut w = RunWriter::create(&path, quads.len() as u64).map_err(spill_err(&path))?;
    for q in &quads {
        for &x in q {
            w.varint(u64::from(x)).map_err(spill_err(&path))?;
        }
    }
    tmp.added(w.finish().map_err(spill_err(&path))?);
    Ok(Run {
        terms: n as u64,
        quads: quads.len() as u64,
    })
}
