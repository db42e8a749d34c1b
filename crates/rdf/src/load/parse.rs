//! Parsing: the formats' parsers on a thread of their own, sending batches of quads to the
//! encoder; N-Triples and N-Quads cut at line ends and parsed on several threads; syntax errors
//! with their file, line and column.

use super::*;

/// Longest parser message kept: oxttl quotes the offending token, and a 10 MB bad token was
/// echoed whole into the error.
pub(super) const MAX_MESSAGE_CHARS: usize = 300;

pub(super) fn syntax(path: &Path, e: &dyn SyntaxLike) -> LoadError {
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
pub(super) struct LineCount<R> {
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

pub(super) trait SyntaxLike {
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
pub(super) const BATCH_TEXT: usize = 1 << 20;

/// About the bytes of text a statement's terms hold.
pub(super) fn quad_text(q: &oxrdf::Quad) -> usize {
    let term = |t: oxrdf::TermRef<'_>| match t {
        oxrdf::TermRef::NamedNode(n) => n.as_str().len(),
        oxrdf::TermRef::BlankNode(b) => b.as_str().len(),
        oxrdf::TermRef::Literal(l) => {
            l.value().len() + l.datatype().as_str().len() + l.language().map_or(0, str::len)
        }
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

pub(super) type Batch = Result<Vec<oxrdf::Quad>, LoadError>;

/// Parses `reader` and sends its statements in batches (a triple as a quad of the default
/// graph); stops at the first error (sent) or when the encoder has gone (it failed).
pub(super) fn parse_into(
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
pub(super) const LINE_CHUNK: usize = 1 << 18;

/// The longest line a parallel parse takes: oxttl's own token limit, which a line longer than
/// this would most likely break too.
pub(super) const MAX_LINE: usize = 16 << 20;

/// Threads that parse N-Triples and N-Quads side by side: the machine's cores, at most 4 (one
/// thread encodes what they all parse). On 2 cores, where the gunzip and the
/// encoding threads share them, two parsers still load 25 M triples a few per cent faster
/// than one (`docs/results.md`).
pub(super) fn line_parsers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// Work for a parsing thread: a chunk of whole lines and the number of its first line (from
/// 0), or the error that ended the reading there.
pub(super) enum Lines {
    Chunk(u64, Vec<u8>),
    Fail(LoadError),
}

/// What a parsing thread made of a chunk: its statements in batches of at most [`BATCH`], and
/// the error that stopped it, if any.
pub(super) type Parsed = (Vec<Vec<oxrdf::Quad>>, Option<LoadError>);

/// Parses a line-based document (N-Triples, N-Quads: no statement spans a newline, §2 of
/// either) on `workers` threads: this thread cuts the input into chunks of whole lines, which
/// go round to the workers, and a collector sends their batches on to `tx` in the document's
/// order. The statements, and the first error with its line and column, are those a sequential
/// parse gives; `chunk` is the size of a chunk.
pub(super) fn parse_lines_into(
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
pub(super) fn fill_to_newline(
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
pub(super) fn parse_chunk(path: &Path, format: Format, line: u64, bytes: &[u8]) -> Parsed {
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
