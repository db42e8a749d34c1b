//! Loading RDF files: Turtle (and the SP²Bench `.n3` files, which are Turtle), N-Triples,
//! N-Quads and TriG through `oxttl`, RDF/XML through `oxrdfxml`, streamed, gzip recognised by
//! its magic bytes, standard input as the file `-`. Relative IRIs resolve against a base: the
//! one given ([`LoadOptions::base`]), else the file's own `file:` IRI. Statements of a named
//! graph (N-Quads, TriG) go to that graph; a triples file (Turtle, N-Triples, RDF/XML) goes to
//! the default graph, or to a named graph of the caller's choosing ([`LoadOptions::named`], the
//! CLI's `--named IRI=FILE`, as the W3C tests' `qt:graphData` needs).
//!
//! All files are parsed and encoded before the store is built, so a syntax error anywhere loads
//! nothing; it names the file, line and column. Blank node labels are scoped per file (two files
//! that both say `_:a` mean two nodes, RDF 1.1 §3.4), by a `f<i>_` prefix when more than one file
//! is loaded.
//!
//! Loading runs as a pipeline of up to three threads, so that on more than one core the stages
//! overlap instead of adding up: gunzipping (a thread that reads ahead, [`ReadAhead`]), parsing
//! (`oxttl`, batches of 4,096 triples), and encoding into the dictionary (the caller's
//! thread). Parsing is about two thirds of the work. N-Triples and N-Quads, where no statement
//! spans a newline, are cut into chunks of whole lines parsed on up to four threads and put
//! back in order (`parse_lines_into`). Turtle, TriG and RDF/XML are parsed by one thread:
//! `oxttl`'s parallel Turtle parser may "return wrong results" on valid documents (prefixes
//! declared late, Turtle inside literals). The encoding stays on one thread, since a
//! dictionary shared by several encoders would need locks on every term.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use nearflow_topo::Machine;

use crate::dict::{Dict, DictFull};
use crate::store::{Quad, Store, StoreError, DEFAULT_GRAPH};
use crate::term::{Id, Term, TermRef};

/// The syntax of an input file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Turtle (`.ttl`, `.turtle`, `.n3`: the SP²Bench generator's N3 is Turtle).
    Turtle,
    /// N-Triples (`.nt`).
    NTriples,
    /// N-Quads (`.nq`): the default graph and named graphs.
    NQuads,
    /// TriG (`.trig`): the default graph and named graphs.
    TriG,
    /// RDF/XML (`.rdf`, `.owl`).
    RdfXml,
}

impl Format {
    /// The format a file name says (a trailing `.gz` is looked through).
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        let ext = name.rsplit_once('.')?.1;
        match ext {
            "ttl" | "turtle" | "n3" => Some(Format::Turtle),
            "nt" | "ntriples" => Some(Format::NTriples),
            "nq" | "nquads" => Some(Format::NQuads),
            "trig" => Some(Format::TriG),
            "rdf" | "owl" => Some(Format::RdfXml),
            _ => None,
        }
    }

    /// The format a name says: a file extension (`ttl`, `nt`, `nq`, `trig`, `rdf`, …) or a
    /// media type (`text/turtle`, `application/rdf+xml`, …), as `--format` takes it.
    pub fn from_name(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "text/turtle" | "application/x-turtle" => Some(Format::Turtle),
            "application/n-triples" | "text/plain" => Some(Format::NTriples),
            "application/n-quads" => Some(Format::NQuads),
            "application/trig" => Some(Format::TriG),
            "application/rdf+xml" | "xml" | "rdfxml" => Some(Format::RdfXml),
            other => Format::from_path(Path::new(&format!("x.{other}"))),
        }
    }
}

/// How to read input files.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// The base IRI relative IRIs resolve against; `None`: each file's own `file:` IRI
    /// (standard input has none, so relative IRIs in it are an error).
    pub base: Option<String>,
    /// The syntax of every file; `None`: each file's name says it.
    pub format: Option<Format>,
    /// Files to load into named graphs, beside the files given: each graph's IRI and the file
    /// (a triples format: Turtle, N-Triples or RDF/XML).
    pub named: Vec<(String, PathBuf)>,
}

impl Format {
    /// Whether the syntax holds quads (statements of named graphs), not only triples.
    pub fn has_graphs(self) -> bool {
        matches!(self, Format::NQuads | Format::TriG)
    }
}

/// A path's `file:` IRI (the default base of the file), made absolute, with the characters an
/// IRI cannot hold percent-encoded.
pub fn file_iri(path: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut out = String::from("file://");
    for b in abs.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The local path a `file://` IRI names (its `%XX` escapes decoded): the inverse of
/// [`file_iri`]; `None` for an IRI of another scheme.
pub fn file_path(iri: &str) -> Option<PathBuf> {
    let p = iri.strip_prefix("file://")?.as_bytes();
    let mut out = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let hex = p
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (p[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out).into_owned()))
}

/// Why a load failed. Nothing was loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be opened or read.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// A syntax error.
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: u64,
        /// 1-based column.
        column: u64,
        /// The parser's message.
        message: String,
    },
    /// Valid syntax this store does not hold.
    #[error("{path}: not supported: {what}")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What.
        what: String,
    },
    /// A term longer than the parser's buffer (16 MiB).
    #[error("{path}:{line}: a term longer than 16 MiB, the longest the parser reads")]
    TermTooLong {
        /// The file.
        path: PathBuf,
        /// 1-based line where the reading stopped, inside the term.
        line: u64,
    },
    /// A syntax error the parser gives no position for (RDF/XML).
    #[error("{path}: {message}")]
    SyntaxNoPosition {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// The base IRI is not an absolute IRI.
    #[error("the base IRI {base:?} is not an absolute IRI: {message}")]
    BadBase {
        /// The base given.
        base: String,
        /// Why.
        message: String,
    },
    /// A named graph's IRI (`--named IRI=FILE`) is not an absolute IRI.
    #[error("the graph name {graph:?} is not an absolute IRI: {message}")]
    BadGraphName {
        /// The name given.
        graph: String,
        /// Why.
        message: String,
    },
    /// A quads file (N-Quads, TriG) was given for one named graph.
    #[error("{0}: a quads file (N-Quads, TriG) names its own graphs; load it with the other files, not into one named graph")]
    QuadsIntoGraph(PathBuf),
    /// The file name does not say its format.
    #[error("{0}: cannot tell the format from the name (use .ttl, .n3, .nt, .nq, .trig or .rdf, optionally with .gz, or give --data-format)")]
    UnknownFormat(PathBuf),
    /// Too many terms.
    #[error(transparent)]
    Full(#[from] DictFull),
    /// Building the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the snapshot failed.
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
    /// The load was stopped ([`Progress::cancel`]).
    #[error("interrupted")]
    Interrupted,
    /// A load in bounded memory could not write or read its temporary files or the snapshot.
    #[error("{path}: {error}")]
    Spill {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
}

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

struct Counting<R> {
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
const CHUNK: usize = 1 << 18;

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
fn open(path: &Path, progress: &Arc<Progress>) -> Result<Box<dyn Read + Send>, LoadError> {
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

/// Dictionary and id quads, before the indexes are built.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The terms.
    pub dict: Dict,
    /// The quads (`[s, p, o, graph]`, the default graph [`DEFAULT_GRAPH`]), in file order,
    /// duplicates kept.
    pub quads: Vec<Quad>,
}

impl Loaded {
    /// Builds the store for `machine`.
    pub fn into_store(self, machine: &Machine) -> Result<Store, LoadError> {
        Ok(Store::build(machine, self.dict, self.quads)?)
    }
}

/// Parses and encodes `paths`, in order, each relative to its own `file:` IRI and in the format
/// its name says. `progress` is updated as it goes.
pub fn load_files(paths: &[PathBuf], progress: &Arc<Progress>) -> Result<Loaded, LoadError> {
    load_files_with(paths, &LoadOptions::default(), progress)
}

/// [`load_files`] with a base IRI and a format for every file, and the named graphs of
/// [`LoadOptions::named`]; `-` reads standard input.
pub fn load_files_with(
    paths: &[PathBuf],
    options: &LoadOptions,
    progress: &Arc<Progress>,
) -> Result<Loaded, LoadError> {
    load_files_onto(Loaded::default(), paths, options, progress)
}

impl Loaded {
    /// The loaded terms and quads of `store`, to add more to ([`load_files_onto`]).
    pub fn of_store(store: crate::store::Store) -> Loaded {
        let (dict, quads) = store.into_parts();
        Loaded { dict, quads }
    }

    /// A blank node label prefix `a{N}_` that no blank node held starts with: the blank nodes
    /// of documents added later get it, so that they stay apart from those already loaded
    /// (RDF 1.1 Concepts §3.5: blank nodes are local to their document).
    fn fresh_blank_prefix(&self) -> String {
        let mut taken = 0u64;
        for id in 1..=self.dict.len() as Id {
            if let TermRef::Blank(label) = self.dict.term(id).as_ref() {
                let digits: String = label
                    .strip_prefix('a')
                    .unwrap_or("")
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if !digits.is_empty() && label[1 + digits.len()..].starts_with('_') {
                    taken = taken.max(digits.parse().unwrap_or(u64::MAX - 1));
                }
            }
        }
        format!("a{}_", taken.saturating_add(1))
    }
}

/// [`load_files_with`], adding to `out` (e.g. [`Loaded::of_store`]): the new documents'
/// blank nodes get a label prefix that none of `out`'s has, so they never merge with them.
pub fn load_files_onto(
    mut out: Loaded,
    paths: &[PathBuf],
    options: &LoadOptions,
    progress: &Arc<Progress>,
) -> Result<Loaded, LoadError> {
    load_files_into(&mut out, paths, options, progress, &mut |_| Ok(()))?;
    Ok(out)
}

/// [`load_files_onto`] into `out`, calling `after` with it after each batch of statements
/// encoded: a load in bounded memory (`bulk.rs`) moves what `out` holds to disk there and
/// leaves it empty.
pub(crate) fn load_files_into(
    out: &mut Loaded,
    paths: &[PathBuf],
    options: &LoadOptions,
    progress: &Arc<Progress>,
    after: &mut dyn FnMut(&mut Loaded) -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    let fresh = if out.quads.is_empty() && out.dict.is_empty() {
        String::new()
    } else {
        out.fresh_blank_prefix()
    };
    if let Some(b) = &options.base {
        check_base(b)?;
    }
    let mut inputs: Vec<(&Path, Option<&str>)> =
        paths.iter().map(|p| (p.as_path(), None)).collect();
    for (graph, path) in &options.named {
        oxiri::Iri::parse(graph.as_str()).map_err(|e| LoadError::BadGraphName {
            graph: graph.clone(),
            message: e.to_string(),
        })?;
        inputs.push((path.as_path(), Some(graph.as_str())));
    }
    let format_of = |path: &Path| {
        options
            .format
            .or_else(|| Format::from_path(path))
            .ok_or_else(|| LoadError::UnknownFormat(path.to_owned()))
    };
    // Every name and format is checked before anything is read.
    for &(path, graph) in &inputs {
        let format = format_of(path)?;
        if graph.is_some() && format.has_graphs() {
            return Err(LoadError::QuadsIntoGraph(path.to_owned()));
        }
    }
    let total: u64 = inputs
        .iter()
        .map(|(p, _)| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    progress.bytes_total.store(total, Ordering::Relaxed);
    let scoped = inputs.len() > 1;
    for (i, &(path, graph)) in inputs.iter().enumerate() {
        let stdin = path.as_os_str() == "-";
        let format = format_of(path)?;
        let reader: Box<dyn Read + Send> = if stdin {
            Box::new(std::io::stdin())
        } else {
            open(path, progress)?
        };
        let prefix = if scoped {
            format!("{fresh}f{i}_")
        } else {
            fresh.clone()
        };
        let base = match &options.base {
            Some(b) => Some(b.clone()),
            None if stdin => None,
            None => Some(file_iri(path)),
        };
        load_one(
            out,
            path,
            format,
            reader,
            &Target {
                prefix: &prefix,
                base: base.as_deref(),
                graph,
            },
            progress,
            after,
        )?;
    }
    Ok(())
}

/// Where a document's statements go: its blank nodes' label prefix, its base IRI, and the
/// graph its triples go to (`None`: the default graph; a quads format's named graphs keep their
/// own).
struct Target<'a> {
    prefix: &'a str,
    base: Option<&'a str>,
    graph: Option<&'a str>,
}

/// Parses one document from a reader into `out` (`prefix` scopes its blank nodes).
pub fn load_reader(
    out: &mut Loaded,
    name: &Path,
    format: Format,
    reader: impl Read + Send,
    prefix: &str,
) -> Result<(), LoadError> {
    load_reader_to(
        out,
        name,
        format,
        reader,
        prefix,
        None,
        None,
        &Arc::default(),
    )
}

/// [`load_reader`] with relative IRIs resolved against `base`.
pub fn load_reader_with_base(
    out: &mut Loaded,
    name: &Path,
    format: Format,
    reader: impl Read + Send,
    prefix: &str,
    base: &str,
) -> Result<(), LoadError> {
    load_reader_to(
        out,
        name,
        format,
        reader,
        prefix,
        Some(base),
        None,
        &Arc::default(),
    )
}

/// [`load_reader_with_base`] into the named graph `graph` (an absolute IRI): a triples
/// document (Turtle, N-Triples, RDF/XML) as the W3C tests' `qt:graphData` gives one.
pub fn load_reader_into_graph(
    out: &mut Loaded,
    name: &Path,
    format: Format,
    reader: impl Read + Send,
    prefix: &str,
    base: &str,
    graph: &str,
) -> Result<(), LoadError> {
    load_reader_to(
        out,
        name,
        format,
        reader,
        prefix,
        Some(base),
        Some(graph),
        &Arc::default(),
    )
}

/// [`load_reader`] with every option: relative IRIs resolved against `base` (without one, a
/// relative IRI is an error), the triples into the named graph `graph` (an absolute IRI; a
/// triples document only), and `progress`, whose `cancel` stops the load with
/// [`LoadError::Interrupted`] after the batch it is encoding.
#[allow(clippy::too_many_arguments)]
pub fn load_reader_to(
    out: &mut Loaded,
    name: &Path,
    format: Format,
    reader: impl Read + Send,
    prefix: &str,
    base: Option<&str>,
    graph: Option<&str>,
    progress: &Arc<Progress>,
) -> Result<(), LoadError> {
    let target = Target {
        prefix,
        base,
        graph,
    };
    load_target(
        out,
        name,
        format,
        reader,
        &target,
        progress,
        &mut |_| Ok(()),
    )
}

/// [`load_reader_to`] calling `after` with what is loaded so far after each batch of
/// statements: an error it returns stops the load (a caller that bounds the load's memory or
/// time).
#[allow(clippy::too_many_arguments)]
pub fn load_reader_watched(
    out: &mut Loaded,
    name: &Path,
    format: Format,
    reader: impl Read + Send,
    prefix: &str,
    base: &str,
    graph: Option<&str>,
    after: &mut dyn FnMut(&mut Loaded) -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    let target = Target {
        prefix,
        base: Some(base),
        graph,
    };
    load_target(out, name, format, reader, &target, &Arc::default(), after)
}

/// The base and the graph checked, then [`load_one`].
fn load_target(
    out: &mut Loaded,
    name: &Path,
    format: Format,
    reader: impl Read + Send,
    target: &Target<'_>,
    progress: &Arc<Progress>,
    after: &mut dyn FnMut(&mut Loaded) -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    if let Some(b) = target.base {
        check_base(b)?;
    }
    if let Some(g) = target.graph {
        oxiri::Iri::parse(g).map_err(|e| LoadError::BadGraphName {
            graph: g.to_owned(),
            message: e.to_string(),
        })?;
        if format.has_graphs() {
            return Err(LoadError::QuadsIntoGraph(name.to_owned()));
        }
    }
    load_one(out, name, format, Box::new(reader), target, progress, after)
}

/// Refuses a base that is not an absolute IRI (the parsers then take any base given).
fn check_base(base: &str) -> Result<(), LoadError> {
    oxiri::Iri::parse(base)
        .map(|_| ())
        .map_err(|e| LoadError::BadBase {
            base: base.to_owned(),
            message: e.to_string(),
        })
}

/// Longest parser message kept: oxttl quotes the offending token, and a 10 MB bad token was
/// echoed whole into the error.
const MAX_MESSAGE_CHARS: usize = 300;

fn syntax(path: &Path, e: &dyn SyntaxLike) -> LoadError {
    let (line, column, message) = e.parts();
    let message = match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!(
            "{}… ({} characters in all)",
            &message[..cut],
            message.chars().count()
        ),
        None => message,
    };
    LoadError::Syntax {
        path: path.to_owned(),
        line: line + 1,
        column: column + 1,
        message,
    }
}

/// A reader that counts the lines it has passed, so that an error with no position of its
/// own (a term past the parser's 16 MiB buffer) can say where the reading was.
struct LineCount<R> {
    inner: R,
    newlines: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for LineCount<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let k = buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        self.newlines.set(self.newlines.get() + k);
        Ok(n)
    }
}

trait SyntaxLike {
    fn parts(&self) -> (u64, u64, String);
}

impl SyntaxLike for oxttl::TurtleSyntaxError {
    fn parts(&self) -> (u64, u64, String) {
        let l = self.location();
        (l.start.line, l.start.column, self.message().to_owned())
    }
}

/// Triples per batch from the parser thread to the encoder.
pub(crate) const BATCH: usize = 4096;

/// Bytes of terms' text past which a batch is sent before it has [`BATCH`] statements: the
/// batches in flight hold at most about this each, however long the terms (a caller that
/// bounds a load's memory checks it between batches).
const BATCH_TEXT: usize = 1 << 20;

/// About the bytes of text a statement's terms hold.
fn quad_text(q: &oxrdf::Quad) -> usize {
    let term = |t: oxrdf::TermRef<'_>| match t {
        oxrdf::TermRef::NamedNode(n) => n.as_str().len(),
        oxrdf::TermRef::BlankNode(b) => b.as_str().len(),
        oxrdf::TermRef::Literal(l) => {
            l.value().len() + l.datatype().as_str().len() + l.language().map_or(0, str::len)
        }
        #[allow(unreachable_patterns)]
        _ => 64,
    };
    let graph = match &q.graph_name {
        oxrdf::GraphName::NamedNode(n) => n.as_str().len(),
        oxrdf::GraphName::BlankNode(b) => b.as_str().len(),
        oxrdf::GraphName::DefaultGraph => 0,
    };
    let subject = match &q.subject {
        oxrdf::NamedOrBlankNode::NamedNode(n) => n.as_str().len(),
        oxrdf::NamedOrBlankNode::BlankNode(b) => b.as_str().len(),
    };
    subject + q.predicate.as_str().len() + term(q.object.as_ref()) + graph
}

type Batch = Result<Vec<oxrdf::Quad>, LoadError>;

/// Parses `reader` and sends its statements in batches (a triple as a quad of the default
/// graph); stops at the first error (sent) or when the encoder has gone (it failed).
fn parse_into(
    path: &Path,
    format: Format,
    base: Option<&str>,
    reader: impl Read,
    tx: &SyncSender<Batch>,
) {
    let workers = line_parsers();
    if matches!(format, Format::NTriples | Format::NQuads) && workers > 1 {
        return parse_lines_into(path, format, reader, tx, workers, LINE_CHUNK);
    }
    let newlines = std::rc::Rc::new(std::cell::Cell::new(0));
    let reader = LineCount {
        inner: reader,
        newlines: newlines.clone(),
    };
    let fail = |e: oxttl::TurtleParseError| match e {
        // oxttl's lexer refuses a token past its buffer (16 MiB) with no position: the
        // reading stopped inside the token, on the line counted so far.
        oxttl::TurtleParseError::Io(source) if source.kind() == std::io::ErrorKind::OutOfMemory => {
            LoadError::TermTooLong {
                path: path.to_owned(),
                line: newlines.get() + 1,
            }
        }
        oxttl::TurtleParseError::Io(source) => LoadError::Io {
            path: path.to_owned(),
            error: source,
        },
        oxttl::TurtleParseError::Syntax(s) => syntax(path, &s),
    };
    let mut batch = Vec::with_capacity(BATCH);
    let mut text = 0usize;
    let mut each = |q: Result<oxrdf::Quad, LoadError>| -> bool {
        match q {
            Ok(q) => {
                text += quad_text(&q);
                batch.push(q);
                if batch.len() < BATCH && text < BATCH_TEXT {
                    return true;
                }
                text = 0;
                tx.send(Ok(std::mem::replace(&mut batch, Vec::with_capacity(BATCH))))
                    .is_ok()
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                false
            }
        }
    };
    let quad = |t: oxrdf::Triple| t.in_graph(oxrdf::GraphName::DefaultGraph);
    // The base was checked by the caller: a parser refuses only what `oxiri` refuses.
    let finished = match format {
        Format::Turtle => {
            let p = oxttl::TurtleParser::new();
            let p = match base {
                Some(b) => p.with_base_iri(b).expect("checked base"),
                None => p,
            };
            p.for_reader(reader)
                .all(|t| each(t.map(quad).map_err(fail)))
        }
        Format::NTriples => oxttl::NTriplesParser::new()
            .for_reader(reader)
            .all(|t| each(t.map(quad).map_err(fail))),
        Format::NQuads => oxttl::NQuadsParser::new()
            .for_reader(reader)
            .all(|q| each(q.map_err(fail))),
        Format::TriG => {
            let p = oxttl::TriGParser::new();
            let p = match base {
                Some(b) => p.with_base_iri(b).expect("checked base"),
                None => p,
            };
            p.for_reader(reader).all(|q| each(q.map_err(fail)))
        }
        Format::RdfXml => {
            let p = oxrdfxml::RdfXmlParser::new();
            let p = match base {
                Some(b) => p.with_base_iri(b).expect("checked base"),
                None => p,
            };
            p.for_reader(reader).all(|t| {
                each(t.map(quad).map_err(|e| match e {
                    oxrdfxml::RdfXmlParseError::Io(error) => LoadError::Io {
                        path: path.to_owned(),
                        error,
                    },
                    oxrdfxml::RdfXmlParseError::Syntax(s) => LoadError::SyntaxNoPosition {
                        path: path.to_owned(),
                        message: s.to_string(),
                    },
                }))
            })
        }
    };
    if finished && !batch.is_empty() {
        let _ = tx.send(Ok(batch));
    }
}

/// Bytes of N-Triples or N-Quads handed to a parsing thread at a time (cut after a newline):
/// small, since each thread holds a chunk, one more waiting, and their statements.
const LINE_CHUNK: usize = 1 << 18;

/// The longest line a parallel parse takes: oxttl's own token limit, which a line longer than
/// this would most likely break too.
const MAX_LINE: usize = 16 << 20;

/// Threads that parse N-Triples and N-Quads side by side: the machine's cores, at most 4 (one
/// thread encodes what they all parse). On 2 cores, where the gunzip and the
/// encoding threads share them, two parsers still load 25 M triples a few per cent faster
/// than one (`docs/results.md`).
fn line_parsers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// Work for a parsing thread: a chunk of whole lines and the number of its first line (from
/// 0), or the error that ended the reading there.
enum Lines {
    Chunk(u64, Vec<u8>),
    Fail(LoadError),
}

/// What a parsing thread made of a chunk: its statements in batches of at most [`BATCH`], and
/// the error that stopped it, if any.
type Parsed = (Vec<Vec<oxrdf::Quad>>, Option<LoadError>);

/// Parses a line-based document (N-Triples, N-Quads: no statement spans a newline, §2 of
/// either) on `workers` threads: this thread cuts the input into chunks of whole lines, which
/// go round to the workers, and a collector sends their batches on to `tx` in the document's
/// order. The statements, and the first error with its line and column, are those a sequential
/// parse gives; `chunk` is the size of a chunk.
fn parse_lines_into(
    path: &Path,
    format: Format,
    mut reader: impl Read,
    tx: &SyncSender<Batch>,
    workers: usize,
    chunk: usize,
) {
    std::thread::scope(|s| {
        let mut to_workers = Vec::with_capacity(workers);
        let mut from_workers = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (work_tx, work_rx) = sync_channel::<Lines>(1);
            let (done_tx, done_rx) = sync_channel::<Parsed>(1);
            to_workers.push(work_tx);
            from_workers.push(done_rx);
            s.spawn(move || {
                for work in work_rx {
                    let parsed = match work {
                        Lines::Chunk(line, bytes) => parse_chunk(path, format, line, &bytes),
                        Lines::Fail(e) => (Vec::new(), Some(e)),
                    };
                    if done_tx.send(parsed).is_err() {
                        return;
                    }
                }
            });
        }
        s.spawn(move || {
            // Chunk `i` went to worker `i % workers`; a worker that has ended had no chunk `i`.
            for i in 0.. {
                let Ok((batches, error)) = from_workers[i % workers].recv() else {
                    return;
                };
                for b in batches {
                    if tx.send(Ok(b)).is_err() {
                        return;
                    }
                }
                if let Some(e) = error {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        });
        // Cut the input after the last newline of each chunk; the rest starts the next one.
        // Chunk `i` goes to worker `i % workers`.
        let mut i = 0;
        let mut send = |work: Lines| {
            let sent = to_workers[i % workers].send(work).is_ok();
            i += 1;
            sent
        };
        let mut line = 0u64;
        let mut rest = Vec::new();
        loop {
            let mut buf = std::mem::take(&mut rest);
            buf.reserve(chunk);
            let filled = fill_to_newline(&mut reader, &mut buf, chunk);
            let cut = buf.iter().rposition(|&b| b == b'\n').map(|p| p + 1);
            let end = match filled {
                Ok(end) => end,
                Err(error) => {
                    // The whole lines read before the failure are parsed first, as one parser
                    // reading the same input would.
                    if let Some(cut) = cut {
                        buf.truncate(cut);
                        if !send(Lines::Chunk(line, buf)) {
                            return;
                        }
                    }
                    send(Lines::Fail(LoadError::Io {
                        path: path.to_owned(),
                        error,
                    }));
                    return;
                }
            };
            if buf.len() > MAX_LINE {
                // A line past the limit: the lines before it are parsed, then it is refused.
                let mut at = 0;
                for (k, l) in buf.split(|&b| b == b'\n').enumerate() {
                    if l.len() > MAX_LINE {
                        if at > 0 {
                            buf.truncate(at);
                            if !send(Lines::Chunk(line, buf)) {
                                return;
                            }
                        }
                        send(Lines::Fail(LoadError::TermTooLong {
                            path: path.to_owned(),
                            line: line + k as u64 + 1,
                        }));
                        return;
                    }
                    at += l.len() + 1;
                }
            }
            let work = match cut {
                _ if end => Lines::Chunk(line, buf),
                Some(cut) => {
                    rest = buf.split_off(cut);
                    let newlines = buf.iter().filter(|&&b| b == b'\n').count() as u64;
                    let start = line;
                    line += newlines;
                    Lines::Chunk(start, buf)
                }
                None => Lines::Fail(LoadError::TermTooLong {
                    path: path.to_owned(),
                    line: line + 1,
                }),
            };
            let last = end || matches!(work, Lines::Fail(_));
            if !send(work) || last {
                return;
            }
        }
    });
}

/// Reads into `buf` until it holds `chunk` more bytes and a newline past its first byte, the
/// input ends (`true`), or a line passes [`MAX_LINE`] (returned without a newline).
fn fill_to_newline(
    reader: &mut impl Read,
    buf: &mut Vec<u8>,
    chunk: usize,
) -> std::io::Result<bool> {
    let goal = buf.len() + chunk;
    let mut searched = buf.len();
    loop {
        let at = buf.len();
        let want = if at < goal { goal - at } else { 64 << 10 };
        buf.resize(at + want, 0);
        let n = loop {
            match reader.read(&mut buf[at..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        let n = match n {
            Ok(n) => n,
            Err(e) => {
                buf.truncate(at);
                return Err(e);
            }
        };
        buf.truncate(at + n);
        if n == 0 {
            return Ok(true);
        }
        if buf.len() >= goal {
            if buf[searched..].contains(&b'\n') {
                return Ok(false);
            }
            searched = buf.len();
            if buf.len() > MAX_LINE {
                return Ok(false);
            }
        }
    }
}

/// Parses one chunk of whole lines whose first line is `line` (from 0).
fn parse_chunk(path: &Path, format: Format, line: u64, bytes: &[u8]) -> Parsed {
    let mut batches = Vec::new();
    let mut batch = Vec::with_capacity(BATCH);
    let fail = |e: oxttl::TurtleSyntaxError| {
        let mut e = syntax(path, &e);
        if let LoadError::Syntax { line: l, .. } = &mut e {
            *l += line;
        }
        e
    };
    let mut each = |q: Result<oxrdf::Quad, oxttl::TurtleSyntaxError>| match q {
        Ok(q) => {
            batch.push(q);
            if batch.len() == BATCH {
                batches.push(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
            }
            None
        }
        Err(e) => Some(fail(e)),
    };
    let error = match format {
        Format::NQuads => oxttl::NQuadsParser::new()
            .for_slice(bytes)
            .find_map(&mut each),
        _ => oxttl::NTriplesParser::new()
            .for_slice(bytes)
            .find_map(|t| each(t.map(|t| t.in_graph(oxrdf::GraphName::DefaultGraph)))),
    };
    if !batch.is_empty() {
        batches.push(batch);
    }
    (batches, error)
}

fn load_one(
    out: &mut Loaded,
    path: &Path,
    format: Format,
    reader: Box<dyn Read + Send + '_>,
    target: &Target<'_>,
    progress: &Arc<Progress>,
    after: &mut dyn FnMut(&mut Loaded) -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    let mut blank = String::new();
    let base = target.base;
    // The graph of the document's triples, interned again after `after` (which may have
    // emptied the dictionary).
    let graph_of = |out: &mut Loaded| match target.graph {
        Some(g) => out.dict.intern(TermRef::Iri(g)),
        None => Ok(DEFAULT_GRAPH),
    };
    let mut default_graph = graph_of(out)?;
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<Batch>(8);
        std::thread::Builder::new()
            .name("nearflow-parse".into())
            .spawn_scoped(scope, move || parse_into(path, format, base, reader, &tx))
            .map_err(|source| LoadError::Io {
                path: path.to_owned(),
                error: source,
            })?;
        // On an error `rx` is dropped with this closure's return, which stops the parser.
        for batch in rx {
            let batch = batch?;
            let mut enc = Encoder {
                dict: &mut out.dict,
                prefix: target.prefix,
                blank: std::mem::take(&mut blank),
            };
            let quads = &mut out.quads;
            for q in &batch {
                let graph = match &q.graph_name {
                    oxrdf::GraphName::DefaultGraph => default_graph,
                    oxrdf::GraphName::NamedNode(n) => enc.iri(n.as_str())?,
                    oxrdf::GraphName::BlankNode(b) => enc.blank(b.as_str())?,
                };
                let id = [
                    enc.subject(&q.subject)?,
                    enc.iri(q.predicate.as_str())?,
                    enc.object(&q.object).map_err(|e| match e {
                        EncErr::Full(f) => LoadError::Full(f),
                        EncErr::Triple => LoadError::Unsupported {
                            path: path.to_owned(),
                            what: "quoted triples (RDF 1.2)".into(),
                        },
                    })?,
                    graph,
                ];
                quads.push(id);
            }
            blank = enc.blank;
            progress
                .triples
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            if progress.cancel.load(Ordering::Relaxed) {
                return Err(LoadError::Interrupted);
            }
            after(out)?;
            default_graph = graph_of(out)?;
        }
        Ok(())
    })
}

enum EncErr {
    Full(DictFull),
    Triple,
}

impl From<DictFull> for EncErr {
    fn from(f: DictFull) -> Self {
        EncErr::Full(f)
    }
}

struct Encoder<'a> {
    dict: &'a mut Dict,
    prefix: &'a str,
    blank: String,
}

impl Encoder<'_> {
    fn iri(&mut self, s: &str) -> Result<Id, DictFull> {
        self.dict.intern(TermRef::Iri(s))
    }

    fn blank(&mut self, label: &str) -> Result<Id, DictFull> {
        if self.prefix.is_empty() {
            return self.dict.intern(TermRef::Blank(label));
        }
        self.blank.clear();
        self.blank.push_str(self.prefix);
        self.blank.push_str(label);
        let b = std::mem::take(&mut self.blank);
        let r = self.dict.intern(TermRef::Blank(&b));
        self.blank = b;
        r
    }

    fn subject(&mut self, s: &oxrdf::NamedOrBlankNode) -> Result<Id, DictFull> {
        match s {
            oxrdf::NamedOrBlankNode::NamedNode(n) => self.iri(n.as_str()),
            oxrdf::NamedOrBlankNode::BlankNode(b) => self.blank(b.as_str()),
        }
    }

    #[allow(unreachable_patterns)] // `Term::Triple` exists when a dependency turns on RDF 1.2
    fn object(&mut self, o: &oxrdf::Term) -> Result<Id, EncErr> {
        Ok(match o {
            oxrdf::Term::NamedNode(n) => self.iri(n.as_str())?,
            oxrdf::Term::BlankNode(b) => self.blank(b.as_str())?,
            oxrdf::Term::Literal(l) => {
                let t = Term::from_oxrdf_literal(l);
                self.dict.intern(t.as_ref())?
            }
            _ => return Err(EncErr::Triple),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_iris_resolve_against_the_base_and_rdfxml_and_trig_load() {
        let mut l = Loaded::default();
        load_reader_with_base(
            &mut l,
            Path::new("t.ttl"),
            Format::Turtle,
            "<s> <p> <../o> .".as_bytes(),
            "",
            "http://ex.org/a/b",
        )
        .unwrap();
        assert!(l.dict.lookup(TermRef::Iri("http://ex.org/a/s")).is_some());
        assert!(l.dict.lookup(TermRef::Iri("http://ex.org/o")).is_some());
        // Without a base a relative IRI is an error with its position.
        let e = load_str("<s> <p> <o> .", Format::Turtle).unwrap_err();
        assert!(matches!(e, LoadError::Syntax { line: 1, .. }), "{e}");
        let xml = r#"<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://ex/">
  <rdf:Description rdf:about="http://ex/s"><ex:p>v</ex:p></rdf:Description>
</rdf:RDF>"#;
        let l = load_str(xml, Format::RdfXml).unwrap();
        assert_eq!(l.quads.len(), 1);
        let e = load_str("<rdf:RDF", Format::RdfXml).unwrap_err();
        assert!(matches!(e, LoadError::SyntaxNoPosition { .. }), "{e}");
        let l = load_str("<http://ex/s> <http://ex/p> 1 .", Format::TriG).unwrap();
        assert_eq!(l.quads.len(), 1);
        assert_eq!(l.quads[0][3], DEFAULT_GRAPH);
        let e = load_files_with(
            &[PathBuf::from("x.ttl")],
            &LoadOptions {
                base: Some("not absolute".into()),
                ..LoadOptions::default()
            },
            &Arc::default(),
        )
        .unwrap_err();
        assert!(matches!(e, LoadError::BadBase { .. }), "{e}");
    }

    #[test]
    fn file_iris_are_absolute_and_escaped() {
        let i = file_iri(Path::new("/tmp/a b/c.ttl"));
        assert_eq!(i, "file:///tmp/a%20b/c.ttl");
        assert!(oxiri::Iri::parse(file_iri(Path::new("rel/x.nt"))).is_ok());
    }

    fn load_str(text: &str, format: Format) -> Result<Loaded, LoadError> {
        let mut l = Loaded::default();
        load_reader(&mut l, Path::new("t.ttl"), format, text.as_bytes(), "")?;
        Ok(l)
    }

    #[test]
    fn xsd_string_and_plain_literals_are_one_term_and_lexical_forms_are_kept() {
        let l = load_str(
            "@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n\
             <a:s> <a:p> \"x\"^^xsd:string , \"x\" , \"01\"^^xsd:integer , \"1\"^^xsd:integer , \"chat\"@FR .",
            Format::Turtle,
        )
        .unwrap();
        assert_eq!(l.quads.len(), 5);
        assert_eq!(l.quads[0], l.quads[1]);
        assert_ne!(l.quads[2][2], l.quads[3][2], "01 and 1 stay two terms");
        let int01 = l.dict.term(l.quads[2][2]);
        assert_eq!(
            int01.to_string(),
            "\"01\"^^<http://www.w3.org/2001/XMLSchema#integer>"
        );
        assert_eq!(l.dict.term(l.quads[4][2]).to_string(), "\"chat\"@fr");
    }

    #[test]
    fn a_syntax_error_names_the_line_and_column() {
        let e = load_str("<a:s> <a:p> <a:o> .\n<a:s> <a:p> oops .\n", Format::Turtle).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("t.ttl:2:"), "{msg}");
    }

    /// N-Quads and TriG statements go to their graphs (named by IRI or blank node), triples to
    /// the default graph or to the named graph they are loaded into; a quads file is refused
    /// for one named graph, and a graph name must be an absolute IRI.
    #[test]
    fn named_graphs_load_into_their_graphs() {
        let l = load_str(
            "<a:s> <a:p> <a:o> <a:g> .\n<a:s> <a:p> <a:o> .\n<a:s> <a:p> <a:o> _:h .\n",
            Format::NQuads,
        )
        .unwrap();
        let g = l.dict.lookup(TermRef::Iri("a:g")).unwrap();
        let h = l.dict.lookup(TermRef::Blank("h")).unwrap();
        let graphs: Vec<Id> = l.quads.iter().map(|q| q[3]).collect();
        assert_eq!(graphs, [g, DEFAULT_GRAPH, h]);
        let l = load_str(
            "<http://ex/g> { <http://ex/s> <http://ex/p> 1 } <http://ex/s> <http://ex/p> 2 .",
            Format::TriG,
        )
        .unwrap();
        let g = l.dict.lookup(TermRef::Iri("http://ex/g")).unwrap();
        assert_eq!(
            l.quads.iter().map(|q| q[3]).collect::<Vec<_>>(),
            [g, DEFAULT_GRAPH]
        );
        let mut l = Loaded::default();
        load_reader_into_graph(
            &mut l,
            Path::new("t.ttl"),
            Format::Turtle,
            "<s> <p> <o> .".as_bytes(),
            "",
            "http://ex/",
            "http://ex/graph",
        )
        .unwrap();
        let g = l.dict.lookup(TermRef::Iri("http://ex/graph")).unwrap();
        assert_eq!(l.quads[0][3], g);
        let e = load_reader_into_graph(
            &mut Loaded::default(),
            Path::new("t.nq"),
            Format::NQuads,
            "".as_bytes(),
            "",
            "http://ex/",
            "http://ex/graph",
        )
        .unwrap_err();
        assert!(matches!(e, LoadError::QuadsIntoGraph(_)), "{e}");
        let e = load_files_with(
            &[],
            &LoadOptions {
                named: vec![("not an iri".into(), PathBuf::from("x.ttl"))],
                ..LoadOptions::default()
            },
            &Arc::default(),
        )
        .unwrap_err();
        assert!(matches!(e, LoadError::BadGraphName { .. }), "{e}");
        let e = load_files_with(
            &[],
            &LoadOptions {
                named: vec![("http://ex/g".into(), PathBuf::from("x.trig"))],
                ..LoadOptions::default()
            },
            &Arc::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("names its own graphs"), "{e}");
    }

    /// Many batches through the pipeline: every triple arrives, in file order; an error after
    /// several batches still names its line, and the parser stops.
    #[test]
    fn the_pipeline_keeps_every_triple_in_order_and_stops_at_an_error() {
        let n = 3 * BATCH + 17;
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!("<a:s{i}> <a:p> \"{i}\" .\n"));
        }
        let l = load_str(&text, Format::NTriples).unwrap();
        assert_eq!(l.quads.len(), n);
        for (i, t) in l.quads.iter().enumerate() {
            assert_eq!(t[3], DEFAULT_GRAPH);
            assert_eq!(l.dict.term(t[2]).to_string(), format!("\"{i}\""));
        }
        text.push_str("<a:s> <a:p> oops .\n");
        for i in 0..2 * BATCH {
            text.push_str(&format!("<a:t{i}> <a:p> <a:o> .\n"));
        }
        let e = load_str(&text, Format::NTriples).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!("t.ttl:{}:", n + 1)),
            "{e}"
        );
    }

    /// Runs one of the parsers on `text`, read a few bytes at a time: its statements, and the
    /// error it ended with.
    fn parsed(
        text: &str,
        parse: impl FnOnce(&mut dyn Read, &SyncSender<Batch>) + Send,
    ) -> (Vec<oxrdf::Quad>, Option<String>) {
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(self.0.len()).min(97);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let (tx, rx) = sync_channel(2);
        std::thread::scope(|s| {
            s.spawn(move || parse(&mut Trickle(text.as_bytes()), &tx));
            let (mut quads, mut error) = (Vec::new(), None);
            for b in rx {
                match b {
                    Ok(b) => {
                        assert!(b.len() <= BATCH);
                        quads.extend(b);
                    }
                    Err(e) => error = Some(e.to_string()),
                }
            }
            (quads, error)
        })
    }

    /// N-Triples and N-Quads parsed on several threads, in chunks of a few hundred bytes, give
    /// the statements of a sequential parse in the same order, and stop at the same first
    /// error with its line and column (comments, blank lines, CRLF, escapes, blank nodes and a
    /// last line without a newline included).
    #[test]
    fn parsing_lines_in_parallel_is_parsing_them_in_order() {
        let mut text = String::from("# a comment\n\n");
        for i in 0..3 * BATCH {
            match i % 5 {
                0 => text.push_str(&format!("<a:s{i}> <a:p> \"line\\n{i} \\u00e9\"@en .\n")),
                1 => text.push_str(&format!("_:b{} <a:p> _:b{i} . # after\r\n", i / 3)),
                2 => text.push_str(&format!("<a:s{i}> <a:p> \"{i}\"^^<a:t> <a:g{}> .\n", i % 7)),
                3 => text.push_str("\n   \n"),
                _ => text.push_str(&format!("<a:s{i}> <a:q> <a:o{i}> .\n")),
            }
        }
        text.push_str("<a:last> <a:p> <a:o> .");
        let path = Path::new("t.nq");
        let sequential = |t: &str| parsed(t, |r, tx| parse_into(path, Format::NQuads, None, r, tx));
        for (workers, chunk) in [(1, 1), (2, 300), (3, 4096), (4, 1 << 20)] {
            let lines = |t: &str| {
                parsed(t, |r, tx| {
                    parse_lines_into(path, Format::NQuads, r, tx, workers, chunk)
                })
            };
            let want = sequential(&text);
            assert_eq!(want.1, None);
            assert_eq!(
                want.0.len(),
                (0..3 * BATCH).filter(|i| i % 5 != 3).count() + 1
            );
            assert_eq!(lines(&text), want, "{workers} workers, chunks of {chunk}");
            let bad = text.replacen("<a:s2000> <a:p> \"line", "<a:s2000> <a:p> \"li\\qe", 1);
            let want = sequential(&bad);
            assert!(
                want.1.as_ref().unwrap().starts_with("t.nq:"),
                "{:?}",
                want.1
            );
            assert_eq!(lines(&bad), want, "{workers} workers, chunks of {chunk}");
            // Triples only: a graph is an error in N-Triples.
            let nt = |t: &str| {
                parsed(t, |r, tx| {
                    parse_lines_into(path, Format::NTriples, r, tx, workers, chunk)
                })
            };
            let got = nt(&text);
            assert_eq!(
                got,
                parsed(&text, |r, tx| parse_into(
                    path,
                    Format::NTriples,
                    None,
                    r,
                    tx
                ))
            );
            assert!(got.1.is_some());
        }
    }

    /// The bad input of a parallel parse: a line past [`MAX_LINE`] is refused with its line
    /// number, and a failed read is the read's error, each after the statements before it.
    #[test]
    fn a_parallel_parse_refuses_a_line_too_long_and_passes_on_a_failed_read() {
        let path = Path::new("t.nt");
        let mut text = String::new();
        for i in 0..1000 {
            text.push_str(&format!("<a:s{i}> <a:p> <a:o> .\n"));
        }
        let long = format!(
            "{text}<a:s> <a:p> \"{}\" .\n<a:t> <a:p> <a:o> .\n",
            "x".repeat(MAX_LINE)
        );
        let (quads, error) = parsed(&long, |r, tx| {
            parse_lines_into(path, Format::NTriples, r, tx, 2, 4096)
        });
        assert_eq!(quads.len(), 1000);
        let error = error.unwrap();
        assert!(error.starts_with("t.nt:1001:"), "{error}");
        struct Failing<'a>(&'a [u8]);
        impl Read for Failing<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() {
                    return Err(std::io::Error::other("disk on fire"));
                }
                let n = buf.len().min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let (tx, rx) = sync_channel(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                let r = Failing(text.as_bytes());
                parse_lines_into(path, Format::NTriples, r, &tx, 3, 1000);
                drop(tx);
            });
            let (mut quads, mut errors) = (0, Vec::new());
            for b in rx {
                match b {
                    Ok(b) => quads += b.len(),
                    Err(e) => errors.push(e.to_string()),
                }
            }
            assert_eq!(quads, 1000);
            assert_eq!(errors, ["t.nt: disk on fire"]);
        });
    }

    /// A source read ahead by its own thread gives the same bytes, across chunk boundaries, and
    /// passes on a read error after the bytes before it.
    #[test]
    fn read_ahead_gives_the_same_bytes_and_the_error() {
        let data: Vec<u8> = (0..(2 * CHUNK + 123)).map(|i| (i % 251) as u8).collect();
        let mut got = Vec::new();
        ReadAhead::new(std::io::Cursor::new(data.clone()))
            .read_to_end(&mut got)
            .unwrap();
        assert_eq!(got, data);
        struct Failing(usize);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0 == 0 {
                    return Err(std::io::Error::other("disk on fire"));
                }
                let n = buf.len().min(self.0);
                buf[..n].fill(7);
                self.0 -= n;
                Ok(n)
            }
        }
        let mut r = ReadAhead::new(Failing(CHUNK + 5));
        let mut got = Vec::new();
        let e = r.read_to_end(&mut got).unwrap_err();
        assert_eq!(e.to_string(), "disk on fire");
        assert_eq!(got.len(), CHUNK + 5);
    }

    #[test]
    fn formats_come_from_names() {
        assert_eq!(
            Format::from_path(Path::new("x/sp2b-10000.n3.gz")),
            Some(Format::Turtle)
        );
        assert_eq!(Format::from_path(Path::new("a.NT")), Some(Format::NTriples));
        assert_eq!(
            Format::from_path(Path::new("a.nq.gz")),
            Some(Format::NQuads)
        );
        assert_eq!(Format::from_path(Path::new("a.rdf")), Some(Format::RdfXml));
        assert_eq!(Format::from_path(Path::new("a.trig")), Some(Format::TriG));
        assert_eq!(Format::from_path(Path::new("a.json")), None);
        assert_eq!(
            Format::from_name("application/rdf+xml"),
            Some(Format::RdfXml)
        );
        assert_eq!(Format::from_name("nt"), Some(Format::NTriples));
        assert_eq!(Format::from_path(Path::new("noext")), None);
    }
}
