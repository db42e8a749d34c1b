//! Reading a load's input: files and standard input, gunzipped on a thread of their own ahead
//! of the parser ([`ReadAhead`]), with the bytes read counted for the progress bar.

use super::*;

/// Progress of a load, readable from another thread (for a progress bar).
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes of the input files (as stored, compressed or not) read so far.
    pub bytes_read: AtomicU64,
    /// Total bytes of the input files.
    pub bytes_total: AtomicU64,
    /// Statements (triples and quads) parsed so far.
    pub triples: AtomicU64,
    /// Set (by a Ctrl-C handler) to stop the load: it ends with [`LoadError::Interrupted`]
    /// after the batch it is encoding.
    pub cancel: std::sync::atomic::AtomicBool,
}

pub(super) struct Counting<R> {
    inner: R,
    progress: Arc<Progress>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress
            .bytes_read
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Bytes read ahead per chunk by [`ReadAhead`].
pub(super) const CHUNK: usize = 1 << 18;

/// A reader whose source is read (and gunzipped) by a thread of its own, a few chunks ahead of
/// the consumer. Dropping it stops the thread at its next chunk.
pub struct ReadAhead {
    rx: Receiver<std::io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
}

impl ReadAhead {
    /// Starts reading `source` on a new thread.
    pub fn new(mut source: impl Read + Send + 'static) -> ReadAhead {
        let (tx, rx) = sync_channel(4);
        std::thread::Builder::new()
            .name("nearflow-read".into())
            .spawn(move || loop {
                let mut buf = vec![0u8; CHUNK];
                let mut n = 0;
                let r = loop {
                    match source.read(&mut buf[n..]) {
                        Ok(0) => break Ok(()),
                        Ok(k) => {
                            n += k;
                            if n == CHUNK {
                                break Ok(());
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => break Err(e),
                    }
                };
                buf.truncate(n);
                let end = n < CHUNK;
                let sent = match r {
                    Ok(()) => tx.send(Ok(buf)),
                    Err(e) => {
                        let _ = tx.send(Ok(buf));
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                if sent.is_err() || end {
                    return;
                }
            })
            .expect("spawning the read-ahead thread");
        ReadAhead {
            rx,
            chunk: Vec::new(),
            at: 0,
        }
    }
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.rx.recv() {
                Ok(Ok(c)) if c.is_empty() => return Ok(0),
                Ok(Ok(c)) => {
                    self.chunk = c;
                    self.at = 0;
                }
                Ok(Err(e)) => return Err(e),
                // The thread ended after the last chunk.
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Opens a file, looking through gzip when its first two bytes are gzip's magic number (then
/// gunzipped a few chunks ahead by a thread of its own).
pub(super) fn open(
    path: &Path,
    progress: &Arc<Progress>,
) -> Result<Box<dyn Read + Send>, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        error: source,
    };
    let mut f = File::open(path).map_err(io)?;
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        match f.read(&mut magic[got..]).map_err(io)? {
            0 => break,
            n => got += n,
        }
    }
    let head = std::io::Cursor::new(magic[..got].to_vec());
    let counted = Counting {
        inner: BufReader::with_capacity(1 << 16, head.chain(f)),
        progress: progress.clone(),
    };
    if got == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(ReadAhead::new(flate2::read::MultiGzDecoder::new(
            counted,
        ))))
    } else {
        Ok(Box::new(counted))
    }
}

/// A file's bytes, gunzipped when it starts with gzip's magic number (for other readers of the
/// same files, such as a peer engine in a benchmark).
pub fn open_input(path: &Path) -> Result<Box<dyn Read + Send>, LoadError> {
    open(path, &Arc::default())
}
