//! The loader's tests: formats, bases, errors with their lines, the parallel N-Triples reader.

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

#[test]
fn a_dir_lang_string_named_by_its_datatype_is_refused() {
    let doc = "<http://a> <http://b> \"Hello\"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString> .";
    for format in [Format::NTriples, Format::Turtle] {
        let e = load_str(doc, format).expect_err("an ill-formed literal");
        // The parser refuses it, or the loader does (a parser that lets it through).
        assert!(e.to_string().contains("rdf:dirLangString"), "{e}");
    }
    // RDF 1.2's triple terms and base directions are read, and refused as not held (never
    // loaded as something else: a literal without its direction would be another term).
    for (doc, what) in [
        (
            "<http://a> <http://b> \"Hello\"@en--ltr .",
            "literals with a base direction",
        ),
        (
            "<http://a> <http://b> <<( <http://c> <http://d> <http://e> )>> .",
            "triple terms",
        ),
    ] {
        let e = load_str(doc, Format::NTriples).expect_err("not held");
        assert!(
            e.to_string().contains(&format!("not supported: {what}")),
            "{e}"
        );
    }
    let fine = "<http://a> <http://b> \"Hello\"@en .";
    assert_eq!(
        load_str(fine, Format::NTriples)
            .expect("a tagged string")
            .quads
            .len(),
        1
    );
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
