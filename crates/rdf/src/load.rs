//! Loading RDF files: Turtle (and the SP²Bench `.n3` files, which are Turtle), N-Triples and
//! N-Quads through `oxttl`, streamed, gzip recognised by its magic bytes.
//!
//! All files are parsed and encoded before the store is built, so a syntax error anywhere loads
//! nothing; it names the file, line and column. Blank node labels are scoped per file (two files
//! that both say `_:a` mean two nodes, RDF 1.1 §3.4), by a `f<i>_` prefix when more than one file
//! is loaded.
//!
//! Length: just over 400 with its unit tests (the last 60 lines); parsing, progress and error
//! reporting are one concept.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nearflow_topo::Machine;

use crate::dict::{Dict, DictFull};
use crate::store::{Store, StoreError};
use crate::term::{Id, Term, TermRef};

/// The syntax of an input file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Turtle (`.ttl`, `.turtle`, `.n3`: the SP²Bench generator's N3 is Turtle).
    Turtle,
    /// N-Triples (`.nt`).
    NTriples,
    /// N-Quads (`.nq`): quads in the default graph only; a named graph is refused.
    NQuads,
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
            _ => None,
        }
    }
}

/// Why a load failed. Nothing was loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
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
    /// The file name does not say its format.
    #[error("{0}: cannot tell the format from the name (use .ttl, .n3, .nt or .nq, optionally with .gz)")]
    UnknownFormat(PathBuf),
    /// Too many terms.
    #[error(transparent)]
    Full(#[from] DictFull),
    /// Building the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Progress of a load, readable from another thread (for a progress bar).
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes of the input files (as stored, compressed or not) read so far.
    pub bytes_read: AtomicU64,
    /// Total bytes of the input files.
    pub bytes_total: AtomicU64,
    /// Triples parsed so far.
    pub triples: AtomicU64,
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

/// Opens a file, looking through gzip when its first two bytes are gzip's magic number.
fn open(path: &Path, progress: &Arc<Progress>) -> Result<Box<dyn Read>, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
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
        Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::read::MultiGzDecoder::new(counted),
        )))
    } else {
        Ok(Box::new(counted))
    }
}

/// A file's bytes, gunzipped when it starts with gzip's magic number (for other readers of the
/// same files, such as a peer engine in a benchmark).
pub fn open_input(path: &Path) -> Result<Box<dyn Read>, LoadError> {
    open(path, &Arc::default())
}

/// Dictionary and id triples, before the indexes are built.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The terms.
    pub dict: Dict,
    /// The triples, in file order, duplicates kept.
    pub triples: Vec<[Id; 3]>,
}

impl Loaded {
    /// Builds the store for `machine`.
    pub fn into_store(self, machine: &Machine) -> Result<Store, LoadError> {
        Ok(Store::build(machine, self.dict, self.triples)?)
    }
}

/// Parses and encodes `paths`, in order. `progress` is updated as it goes.
pub fn load_files(paths: &[PathBuf], progress: &Arc<Progress>) -> Result<Loaded, LoadError> {
    let total: u64 = paths
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    progress.bytes_total.store(total, Ordering::Relaxed);
    let mut out = Loaded::default();
    let scoped = paths.len() > 1;
    for (i, path) in paths.iter().enumerate() {
        let format =
            Format::from_path(path).ok_or_else(|| LoadError::UnknownFormat(path.clone()))?;
        let reader = open(path, progress)?;
        let prefix = if scoped {
            format!("f{i}_")
        } else {
            String::new()
        };
        load_one(&mut out, path, format, reader, &prefix, progress)?;
    }
    Ok(out)
}

/// Parses one document from a reader into `out` (`prefix` scopes its blank nodes).
pub fn load_reader(
    out: &mut Loaded,
    name: &Path,
    format: Format,
    reader: impl Read,
    prefix: &str,
) -> Result<(), LoadError> {
    load_one(out, name, format, Box::new(reader), prefix, &Arc::default())
}

fn syntax(path: &Path, e: &dyn SyntaxLike) -> LoadError {
    let (line, column, message) = e.parts();
    LoadError::Syntax {
        path: path.to_owned(),
        line: line + 1,
        column: column + 1,
        message,
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

fn load_one(
    out: &mut Loaded,
    path: &Path,
    format: Format,
    reader: Box<dyn Read + '_>,
    prefix: &str,
    progress: &Arc<Progress>,
) -> Result<(), LoadError> {
    let mut enc = Encoder {
        dict: &mut out.dict,
        prefix,
        blank: String::new(),
    };
    let mut push = |s: &oxrdf::NamedOrBlankNode,
                    p: &oxrdf::NamedNode,
                    o: &oxrdf::Term|
     -> Result<(), LoadError> {
        let t = [
            enc.subject(s)?,
            enc.iri(p.as_str())?,
            enc.object(o).map_err(|e| match e {
                EncErr::Full(f) => LoadError::Full(f),
                EncErr::Triple => LoadError::Unsupported {
                    path: path.to_owned(),
                    what: "quoted triples (RDF 1.2)".into(),
                },
            })?,
        ];
        out.triples.push(t);
        progress.triples.fetch_add(1, Ordering::Relaxed);
        Ok(())
    };
    let fail = |e: oxttl::TurtleParseError| match e {
        oxttl::TurtleParseError::Io(source) => LoadError::Io {
            path: path.to_owned(),
            source,
        },
        oxttl::TurtleParseError::Syntax(s) => syntax(path, &s),
    };
    match format {
        Format::Turtle => {
            for t in oxttl::TurtleParser::new().for_reader(reader) {
                let t = t.map_err(fail)?;
                push(&t.subject, &t.predicate, &t.object)?;
            }
        }
        Format::NTriples => {
            for t in oxttl::NTriplesParser::new().for_reader(reader) {
                let t = t.map_err(fail)?;
                push(&t.subject, &t.predicate, &t.object)?;
            }
        }
        Format::NQuads => {
            for q in oxttl::NQuadsParser::new().for_reader(reader) {
                let q = q.map_err(fail)?;
                if !q.graph_name.is_default_graph() {
                    return Err(LoadError::Unsupported {
                        path: path.to_owned(),
                        what: format!("named graphs (graph {})", q.graph_name),
                    });
                }
                push(&q.subject, &q.predicate, &q.object)?;
            }
        }
    }
    Ok(())
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
        assert_eq!(l.triples.len(), 5);
        assert_eq!(l.triples[0], l.triples[1]);
        assert_ne!(l.triples[2][2], l.triples[3][2], "01 and 1 stay two terms");
        let int01 = l.dict.term(l.triples[2][2]);
        assert_eq!(
            int01.to_string(),
            "\"01\"^^<http://www.w3.org/2001/XMLSchema#integer>"
        );
        assert_eq!(l.dict.term(l.triples[4][2]).to_string(), "\"chat\"@fr");
    }

    #[test]
    fn a_syntax_error_names_the_line_and_column() {
        let e = load_str("<a:s> <a:p> <a:o> .\n<a:s> <a:p> oops .\n", Format::Turtle).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("t.ttl:2:"), "{msg}");
    }

    #[test]
    fn named_graphs_are_refused() {
        let e = load_str("<a:s> <a:p> <a:o> <a:g> .\n", Format::NQuads).unwrap_err();
        assert!(e.to_string().contains("not supported: named graphs"), "{e}");
        let ok = load_str("<a:s> <a:p> <a:o> .\n", Format::NQuads).unwrap();
        assert_eq!(ok.triples.len(), 1);
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
        assert_eq!(Format::from_path(Path::new("a.rdf")), None);
        assert_eq!(Format::from_path(Path::new("noext")), None);
    }
}
