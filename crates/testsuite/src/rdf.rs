//! The W3C RDF parser tests (`rdf/rdf12/`, the `rdft:` kinds) against nearflow's loader: a
//! positive syntax test's document loads, a negative one is refused, an evaluation test's
//! loads as the expected N-Triples or N-Quads (term by term, blank nodes up to a consistent
//! renaming), and a canonical-form test's (`…PositiveC14N`) also writes every quad's terms
//! exactly as the expected file's lines are. The expected files are read with oxttl's N-Quads parser, not
//! with the loader under test. A document is read against its manifest's
//! `mf:assumedTestBase`, as the suites say.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use nearflow_rdf::load;

use super::{file_iri, match_rows, same_terms, Renaming, Test};

/// What a parser test expects of its document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// It is read.
    Positive,
    /// It is refused.
    Negative,
    /// It is read as the expected quads.
    Eval,
    /// It parses but means nothing (a bad IRI after resolution, …): refused.
    NegativeEval,
    /// It is read as the expected quads, each term written in canonical N-Triples form.
    Canonical,
}

impl Expect {
    /// The expectation of an `rdft:` type's local name (`TestTurtleEval`, …), when it is a
    /// parser test of a syntax the loader reads.
    pub(crate) fn of(name: &str) -> Option<Expect> {
        let rest = name.strip_prefix("Test")?;
        let kind = ["Turtle", "Trig", "NTriples", "NQuads", "XML"]
            .iter()
            .find_map(|syntax| rest.strip_prefix(syntax))?;
        match kind {
            "PositiveSyntax" => Some(Expect::Positive),
            "NegativeSyntax" => Some(Expect::Negative),
            "Eval" => Some(Expect::Eval),
            "NegativeEval" => Some(Expect::NegativeEval),
            "PositiveC14N" => Some(Expect::Canonical),
            _ => None,
        }
    }
}

/// A quad as text: subject, predicate, object in N-Triples, and the graph's name (empty for
/// the default graph).
type QuadText = [String; 4];

/// Runs the parser test `test`.
pub(crate) fn run(test: &Test, expect: Expect, machine: &nearflow_topo::Machine) -> Result<()> {
    let doc = test.query.as_ref().context("the test names no document")?;
    let read = read(doc, test.base.as_deref());
    match expect {
        Expect::Positive => read.map(drop).map_err(|e| anyhow!("refused: {e:#}")),
        Expect::Negative | Expect::NegativeEval => match read {
            Ok(_) => bail!("read a document the test says is invalid"),
            Err(_) => Ok(()),
        },
        Expect::Eval | Expect::Canonical => {
            let got = quads(read.map_err(|e| anyhow!("refused: {e:#}"))?, machine)?;
            let file = test.result.as_ref().context("no mf:result")?;
            let want = expected(file)?;
            same_quads(&got, &want)?;
            if expect == Expect::Canonical {
                canonical(&got, file)?;
            }
            Ok(())
        }
    }
}

/// `doc` read by the loader, in the syntax its name says, against `base` (else its own IRI).
fn read(doc: &Path, base: Option<&str>) -> Result<load::Loaded> {
    let format = load::Format::from_path(doc).with_context(|| {
        format!(
            "the syntax of {} is not one the loader reads",
            doc.display()
        )
    })?;
    let bytes = std::fs::read(doc).with_context(|| format!("{}", doc.display()))?;
    let base = match base {
        Some(b) => b.to_owned(),
        None => file_iri(doc)?,
    };
    let mut loaded = load::Loaded::default();
    load::load_reader_with_base(&mut loaded, doc, format, bytes.as_slice(), "b_", &base)
        .map_err(|e| anyhow!("{e}"))?;
    Ok(loaded)
}

/// What the loader read, as a store holds it (duplicates gone), as text.
fn quads(loaded: load::Loaded, machine: &nearflow_topo::Machine) -> Result<Vec<QuadText>> {
    let store = loaded.into_store(machine)?;
    let text = |id| store.dict().term(id).to_string();
    Ok(store
        .quads()
        .into_iter()
        .map(|[s, p, o, g]| {
            let graph = if g == nearflow_rdf::DEFAULT_GRAPH {
                String::new()
            } else {
                text(g)
            };
            [text(s), text(p), text(o), graph]
        })
        .collect())
}

/// An expected term written as nearflow writes its own (so that a term compares by what it
/// is, not by how either side escapes it).
fn text(t: oxrdf::TermRef<'_>) -> String {
    use nearflow_rdf::TermRef;
    match t {
        oxrdf::TermRef::NamedNode(n) => TermRef::Iri(n.as_str()).to_string(),
        oxrdf::TermRef::BlankNode(b) => TermRef::Blank(b.as_str()).to_string(),
        oxrdf::TermRef::Literal(l) => TermRef::Literal {
            value: l.value(),
            datatype: l.datatype().as_str(),
            lang: l.language(),
        }
        .to_string(),
        // A triple term, as oxrdf writes it (the loader refuses triple terms, so a test that
        // expects one fails).
        other => other.to_string(),
    }
}

/// The expected N-Triples or N-Quads file's quads, read with oxttl.
fn expected(file: &Path) -> Result<Vec<QuadText>> {
    let bytes = std::fs::read(file).with_context(|| format!("{}", file.display()))?;
    oxttl::NQuadsParser::new()
        .for_slice(&bytes)
        .map(|q| {
            let q = q.with_context(|| format!("the expected file {}", file.display()))?;
            let graph = match &q.graph_name {
                oxrdf::GraphName::DefaultGraph => String::new(),
                oxrdf::GraphName::NamedNode(n) => text(n.as_ref().into()),
                oxrdf::GraphName::BlankNode(b) => text(b.as_ref().into()),
            };
            Ok([
                text(q.subject.as_ref().into()),
                text(q.predicate.as_ref().into()),
                text(q.object.as_ref()),
                graph,
            ])
        })
        .collect()
}

/// Whether the two sets of quads are the same up to a renaming of blank nodes.
fn same_quads(got: &[QuadText], want: &[QuadText]) -> Result<()> {
    let (mut got, mut want) = (got.to_vec(), want.to_vec());
    for q in [&mut got, &mut want] {
        q.sort();
        q.dedup();
    }
    if got.len() != want.len() {
        bail!("{} quads read, expected {}", got.len(), want.len());
    }
    let same =
        |a: &QuadText, b: &QuadText, m: &mut Renaming| (0..4).all(|i| same_terms(&a[i], &b[i], m));
    if !match_rows(&got, &want, &same, false) {
        let first = got.iter().find(|q| !want.contains(q));
        bail!("the quads differ (e.g. ours {first:?}, not among the expected)");
    }
    Ok(())
}

/// Whether every quad written as an N-Triples or N-Quads line is a line of `file`, as the
/// canonical form writes it (when no blank node is among them: their labels are the
/// loader's own, compared up to renaming above).
fn canonical(got: &[QuadText], file: &Path) -> Result<()> {
    if got.iter().flatten().any(|t| t.starts_with("_:")) {
        return Ok(());
    }
    let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
    let mut want: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut ours: Vec<String> = (got.iter())
        .map(|[s, p, o, g]| match g.as_str() {
            "" => format!("{s} {p} {o} ."),
            g => format!("{s} {p} {o} {g} ."),
        })
        .collect();
    want.sort_unstable();
    want.dedup();
    ours.sort_unstable();
    ours.dedup();
    match ours.iter().zip(&want).find(|(a, b)| a != *b) {
        Some((a, b)) => bail!("not in canonical form: ours {a:?}, expected {b:?}"),
        None if ours.len() != want.len() => {
            bail!("{} lines written, expected {}", ours.len(), want.len())
        }
        None => Ok(()),
    }
}
