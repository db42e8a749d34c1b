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
//!
//! Here: the formats, the entry points and the encoder. `input.rs`: files, standard input and
//! the read-ahead; `parse.rs`: the parsers' threads and their errors.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use nearflow_topo::Machine;

use crate::dict::{Dict, DictFull};
use crate::store::{Quad, Store, StoreError, DEFAULT_GRAPH};
use crate::term::{Id, Term, TermRef, RDF_DIR_LANG_STRING};

mod input;
mod parse;
#[cfg(test)]
mod tests;

use input::*;
pub use input::{open_input, Progress, ReadAhead};
pub(crate) use parse::BATCH;
use parse::*;

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
                            what: "triple terms (RDF 1.2)".into(),
                        },
                        EncErr::Invalid(why) => LoadError::SyntaxNoPosition {
                            path: path.to_owned(),
                            message: why.into(),
                        },
                        EncErr::NotHeld(what) => LoadError::Unsupported {
                            path: path.to_owned(),
                            what: what.to_string(),
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
    /// A term no RDF document may hold, for this reason.
    Invalid(&'static str),
    /// A term of RDF 1.2 the store does not hold yet.
    NotHeld(crate::term::NotHeld),
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

    fn object(&mut self, o: &oxrdf::Term) -> Result<Id, EncErr> {
        Ok(match o {
            oxrdf::Term::NamedNode(n) => self.iri(n.as_str())?,
            oxrdf::Term::BlankNode(b) => self.blank(b.as_str())?,
            oxrdf::Term::Literal(l) => {
                // A directional language-tagged string is written with its tag and direction
                // (`"x"@en--ltr`), never by naming its datatype (RDF 1.2 Concepts §3.3).
                if l.language().is_none() && l.datatype().as_str() == RDF_DIR_LANG_STRING {
                    return Err(EncErr::Invalid(
                        "a literal typed rdf:dirLangString without a language tag and a direction",
                    ));
                }
                let t = Term::from_oxrdf_literal(l).map_err(EncErr::NotHeld)?;
                self.dict.intern(t.as_ref())?
            }
            _ => return Err(EncErr::Triple),
        })
    }
}
