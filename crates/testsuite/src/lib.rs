//! # nearflow-testsuite — the W3C SPARQL and RDF tests against nearflow
//!
//! Reads the W3C manifests (`mf:include` lists of per-folder manifests, each an `mf:entries`
//! list), runs each query evaluation test on nearflow's SPARQL engine and compares the answer
//! with the expected result: solutions as multisets (and the sequence of a top-level ORDER BY's
//! projected variables), blank nodes up to a consistent renaming, literals by their exact
//! lexical form (RDF term equality); a graph (CONSTRUCT) up to blank node renaming; ASK's
//! boolean. Syntax tests check that the query parses, or that it does not. RDF parser tests
//! (`rdf.rs`) read a document with nearflow's loader and compare what it holds. As Oxigraph keeps its
//! conformance runs in a `testsuite/` crate, this one keeps ours out of the engine.
//!
//! The test's data loads into the default graph (`qt:data`) and into named graphs named by
//! their files' IRIs (`qt:graphData`). CSV results (which keep only each term's text) are
//! compared with our answer written as CSV text. A test this engine cannot take (a result
//! format we do not read) fails with that reason: nothing is skipped, so the count is what a
//! user gets.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use oxrdf::{NamedOrBlankNode, Term as OxTerm};

const MF: &str = "http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#";
const QT: &str = "http://www.w3.org/2001/sw/DataAccess/tests/test-query#";
const RDF: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#";
const UT: &str = "http://www.w3.org/2009/sparql/tests/test-update#";
const RDFS: &str = "http://www.w3.org/2000/01/rdf-schema#";
const RDFT: &str = "http://www.w3.org/ns/rdftest#";

mod rdf;
mod update;

pub use rdf::Expect;

/// What a test checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Run a query over data, compare with the expected result.
    QueryEvaluation,
    /// The query parses.
    PositiveSyntax,
    /// The query is refused.
    NegativeSyntax,
    /// Run an update request over a dataset, compare the dataset with the expected one.
    UpdateEvaluation,
    /// The update request parses.
    PositiveUpdateSyntax,
    /// The update request is refused.
    NegativeUpdateSyntax,
    /// A parser test of an RDF syntax (`rdft:`): the document is read by nearflow's loader,
    /// and refused, or read as the expected quads.
    Rdf(Expect),
    /// Any other kind (updates, result formats, protocol): its type IRI.
    Other(String),
}

/// One test of a manifest.
#[derive(Clone, Debug)]
pub struct Test {
    /// Its IRI.
    pub id: String,
    pub kind: Kind,
    /// The query file (`qt:query`, or the action itself for a syntax test).
    pub query: Option<PathBuf>,
    /// Default-graph data (`qt:data`).
    pub data: Vec<PathBuf>,
    /// Named graphs (`qt:graphData`).
    pub graph_data: Vec<PathBuf>,
    /// The expected result (`mf:result`).
    pub result: Option<PathBuf>,
    /// An update test's named graphs before (`ut:graphData`: the file and the graph's IRI,
    /// its `rdfs:label`); its default graph before is `data`, its request `query`.
    pub update_graphs: Vec<(PathBuf, String)>,
    /// An update test's expected default graph (`mf:result`'s `ut:data`).
    pub result_data: Vec<PathBuf>,
    /// An update test's expected named graphs.
    pub result_graphs: Vec<(PathBuf, String)>,
    /// The base IRI a parser test's document is read against: its manifest's
    /// `mf:assumedTestBase` and the document's file name (else the file's own IRI).
    pub base: Option<String>,
}

/// How a test went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// Why not.
    Fail(String),
}

/// A parsed Turtle document: triples by subject.
struct Graph {
    by_subject: HashMap<String, Vec<(String, OxTerm)>>,
}

fn key(s: &NamedOrBlankNode) -> String {
    s.to_string()
}

fn term_key(t: &OxTerm) -> String {
    t.to_string()
}

impl Graph {
    fn parse(path: &Path) -> Result<Graph> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
        let base = file_iri(path)?;
        let mut by_subject: HashMap<String, Vec<(String, OxTerm)>> = HashMap::new();
        for t in oxttl::TurtleParser::new()
            .with_base_iri(&base)
            .map_err(|e| anyhow!("{base}: {e}"))?
            .for_slice(&text)
        {
            let t = t.with_context(|| format!("{}", path.display()))?;
            by_subject
                .entry(key(&t.subject))
                .or_default()
                .push((t.predicate.as_str().to_string(), t.object));
        }
        Ok(Graph { by_subject })
    }

    fn objects(&self, subject: &str, predicate: &str) -> Vec<&OxTerm> {
        self.by_subject
            .get(subject)
            .map(|v| {
                v.iter()
                    .filter(|(p, _)| p == predicate)
                    .map(|(_, o)| o)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn object(&self, subject: &str, predicate: &str) -> Option<&OxTerm> {
        self.objects(subject, predicate).into_iter().next()
    }

    /// The members of the RDF list starting at `head`.
    fn list(&self, head: &OxTerm) -> Vec<OxTerm> {
        let mut out = Vec::new();
        let mut node = head.clone();
        let nil = format!("{RDF}nil");
        for _ in 0..100_000 {
            if matches!(&node, OxTerm::NamedNode(n) if n.as_str() == nil) {
                break;
            }
            let k = term_key(&node);
            let Some(first) = self.object(&k, &format!("{RDF}first")) else {
                break;
            };
            out.push(first.clone());
            let Some(rest) = self.object(&k, &format!("{RDF}rest")) else {
                break;
            };
            node = rest.clone();
        }
        out
    }
}

/// `file://` IRI of a path (made absolute).
fn file_iri(path: &Path) -> Result<String> {
    let abs = std::fs::canonicalize(path).with_context(|| format!("{}", path.display()))?;
    Ok(format!("file://{}", abs.display()))
}

/// The path of a `file://` IRI.
fn iri_path(t: &OxTerm) -> Option<PathBuf> {
    match t {
        OxTerm::NamedNode(n) => n.as_str().strip_prefix("file://").map(PathBuf::from),
        _ => None,
    }
}

/// Every test of the manifest at `path` and of the manifests it includes, in order.
pub fn load_manifest(path: &Path) -> Result<Vec<Test>> {
    let g = Graph::parse(path)?;
    // The manifest is the file itself (`<>`) in the SPARQL 1.1 suites, a node of its own
    // (`trs:manifest`) in the 1.2 ones: whatever subject lists includes or entries.
    let me = format!("<{}>", file_iri(path)?);
    let mut manifests: Vec<&String> = (g.by_subject.keys())
        .filter(|s| {
            !g.objects(s, &format!("{MF}include")).is_empty()
                || !g.objects(s, &format!("{MF}entries")).is_empty()
        })
        .collect();
    manifests.sort_by_key(|s| (**s != me, s.to_string()));
    let mut tests = Vec::new();
    for me in &manifests {
        for inc in g.objects(me, &format!("{MF}include")) {
            for m in g.list(inc) {
                let p = iri_path(&m)
                    .ok_or_else(|| anyhow!("an included manifest {m} is not a file"))?;
                tests.extend(load_manifest(&p)?);
            }
        }
    }
    for me in manifests {
        let assumed_base = match g.object(me, &format!("{MF}assumedTestBase")) {
            Some(OxTerm::NamedNode(b)) => Some(b.as_str().to_owned()),
            _ => None,
        };
        for entries in g.objects(me, &format!("{MF}entries")) {
            for e in g.list(entries) {
                tests.push(entry(&g, &e, assumed_base.as_deref())?);
            }
        }
    }
    Ok(tests)
}

/// The test `e` of a manifest's entries.
fn entry(g: &Graph, e: &OxTerm, assumed_base: Option<&str>) -> Result<Test> {
    let k = term_key(e);
    let kind = match g.object(&k, &format!("{RDF}type")) {
        Some(OxTerm::NamedNode(t)) if t.as_str().starts_with(RDFT) => {
            match Expect::of(&t.as_str()[RDFT.len()..]) {
                Some(expect) => Kind::Rdf(expect),
                None => Kind::Other(t.as_str().to_string()),
            }
        }
        Some(OxTerm::NamedNode(t)) => match t.as_str().strip_prefix(MF) {
            // A CSV result test is an evaluation whose expected answer is CSV text.
            Some("QueryEvaluationTest") | Some("CSVResultFormatTest") => Kind::QueryEvaluation,
            Some("PositiveSyntaxTest11") | Some("PositiveSyntaxTest") => Kind::PositiveSyntax,
            Some("NegativeSyntaxTest11") | Some("NegativeSyntaxTest") => Kind::NegativeSyntax,
            Some("UpdateEvaluationTest") => Kind::UpdateEvaluation,
            Some("PositiveUpdateSyntaxTest11") | Some("PositiveUpdateSyntaxTest") => {
                Kind::PositiveUpdateSyntax
            }
            Some("NegativeUpdateSyntaxTest11") | Some("NegativeUpdateSyntaxTest") => {
                Kind::NegativeUpdateSyntax
            }
            _ => Kind::Other(t.as_str().to_string()),
        },
        _ => Kind::Other("untyped".into()),
    };
    let action = g.object(&k, &format!("{MF}action"));
    // An update test's action and result: `ut:request`, `ut:data`, `ut:graphData`.
    let files = |node: Option<&OxTerm>, p: &str| -> Vec<PathBuf> {
        node.map(|n| {
            g.objects(&term_key(n), &format!("{UT}{p}"))
                .into_iter()
                .filter_map(iri_path)
                .collect()
        })
        .unwrap_or_default()
    };
    let graphs = |node: Option<&OxTerm>| -> Vec<(PathBuf, String)> {
        node.map(|n| {
            g.objects(&term_key(n), &format!("{UT}graphData"))
                .into_iter()
                .filter_map(|gd| {
                    let gk = term_key(gd);
                    let file = g.object(&gk, &format!("{UT}graph")).and_then(iri_path)?;
                    let name = match g.object(&gk, &format!("{RDFS}label")) {
                        Some(OxTerm::Literal(l)) => l.value().to_string(),
                        _ => return None,
                    };
                    Some((file, name))
                })
                .collect()
        })
        .unwrap_or_default()
    };
    let result_node = g.object(&k, &format!("{MF}result"));
    let is_update = kind == Kind::UpdateEvaluation;
    let request = if is_update {
        files(action, "request").into_iter().next()
    } else {
        None
    };
    let (query, data, graph_data) = match action {
        Some(a @ OxTerm::NamedNode(_)) => (iri_path(a), Vec::new(), Vec::new()),
        Some(a) => {
            let ak = term_key(a);
            (
                g.object(&ak, &format!("{QT}query")).and_then(iri_path),
                g.objects(&ak, &format!("{QT}data"))
                    .into_iter()
                    .filter_map(iri_path)
                    .collect(),
                g.objects(&ak, &format!("{QT}graphData"))
                    .into_iter()
                    .filter_map(iri_path)
                    .collect(),
            )
        }
        None => (None, Vec::new(), Vec::new()),
    };
    let (query, data) = if is_update {
        (request, files(action, "data"))
    } else {
        (query, data)
    };
    let base = match (assumed_base, &query) {
        (Some(b), Some(file)) => file
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| format!("{b}{n}")),
        _ => None,
    };
    Ok(Test {
        id: match e {
            OxTerm::NamedNode(n) => n.as_str().to_string(),
            other => other.to_string(),
        },
        query,
        data,
        graph_data,
        result: result_node.and_then(iri_path),
        update_graphs: if is_update {
            graphs(action)
        } else {
            Vec::new()
        },
        result_data: if is_update {
            files(result_node, "data")
        } else {
            Vec::new()
        },
        result_graphs: if is_update {
            graphs(result_node)
        } else {
            Vec::new()
        },
        base,
        kind,
    })
}

/// A solution: variable name → term in N-Triples.
type Solution = BTreeMap<String, String>;

/// An answer, ours or expected.
#[derive(Debug)]
enum Answer {
    Solutions(Vec<Solution>),
    Boolean(bool),
    /// Triples, each `[s, p, o]` in N-Triples.
    Graph(Vec<[String; 3]>),
}

/// Runs `test`; syntax and query evaluation tests only (others fail as not run here).
pub fn run(test: &Test, rt: &nearflow_rt::Runtime) -> Outcome {
    match run_inner(test, rt) {
        Ok(()) => Outcome::Pass,
        Err(e) => Outcome::Fail(format!("{e:#}").replace('\n', " ")),
    }
}

fn run_inner(test: &Test, rt: &nearflow_rt::Runtime) -> Result<()> {
    if let Kind::Rdf(expect) = test.kind {
        return rdf::run(test, expect, rt.machine());
    }
    let query_file = test.query.as_ref().context("the test names no query")?;
    let text =
        std::fs::read_to_string(query_file).with_context(|| format!("{}", query_file.display()))?;
    // The query's base is its own file, as the tests expect.
    let text = format!("BASE <{}>\n{text}", file_iri(query_file)?);
    match &test.kind {
        Kind::PositiveSyntax => {
            read_query(&text).map_err(|e| anyhow!("refused: {e}"))?;
            Ok(())
        }
        Kind::NegativeSyntax => match read_query(&text) {
            Ok(_) => bail!("accepted a query the test says is invalid"),
            Err(_) => Ok(()),
        },
        Kind::Other(t) => bail!("not a query test: {t}"),
        Kind::PositiveUpdateSyntax => {
            nearflow_sparql::update::Update::parse(&text, None)
                .map_err(|e| anyhow!("refused: {e}"))?;
            Ok(())
        }
        Kind::NegativeUpdateSyntax => match nearflow_sparql::update::Update::parse(&text, None) {
            Ok(_) => bail!("accepted an update the test says is invalid"),
            Err(_) => Ok(()),
        },
        Kind::UpdateEvaluation => update::run(test, rt, &text),
        Kind::Rdf(_) => unreachable!("read above"),
        Kind::QueryEvaluation => {
            let store = Arc::new(load(&test.data, &test.graph_data, rt.machine())?);
            let result = test.result.as_ref().context("no mf:result")?;
            let mut got = evaluate(&store, rt, &text)?;
            if result.extension().is_some_and(|e| e == "csv") {
                // CSV keeps only each term's text (SPARQL 1.1 CSV/TSV §2): compare ours so.
                got = as_csv_text(got);
            }
            let want = expected(result)?;
            compare(&got, &want, &ordered_by(&text))
        }
    }
}

/// The query read as the engine reads it before planning: parsed, and translated to its
/// algebra (where what the grammar lets through but the specification forbids is refused).
fn read_query(text: &str) -> Result<nearflow_sparql::Query, nearflow_sparql::QueryError> {
    nearflow_sparql::Query::parse(text, &nearflow_sparql::Options::default())
}

/// The store of a test: `data` in the default graph, each file of `graph_data` in the named
/// graph of its own IRI (as `qt:graphData` means).
fn load(
    data: &[PathBuf],
    graph_data: &[PathBuf],
    machine: &nearflow_topo::Machine,
) -> Result<nearflow_rdf::Store> {
    let named: Vec<(PathBuf, String)> = graph_data
        .iter()
        .map(|f| Ok((f.clone(), file_iri(f)?)))
        .collect::<Result<_>>()?;
    load_named(data, &named, machine)
}

/// [`load`], each named graph's file with the graph's IRI given.
fn load_named(
    data: &[PathBuf],
    graph_data: &[(PathBuf, String)],
    machine: &nearflow_topo::Machine,
) -> Result<nearflow_rdf::Store> {
    use nearflow_rdf::load;
    let mut loaded = load::Loaded::default();
    let files = data
        .iter()
        .map(|f| (f, None))
        .chain(graph_data.iter().map(|(f, g)| (f, Some(g))));
    for (i, (f, named)) in files.enumerate() {
        let format = load::Format::from_path(f)
            .with_context(|| format!("data format of {} not supported", f.display()))?;
        let bytes = std::fs::read(f).with_context(|| format!("{}", f.display()))?;
        // Relative IRIs in the data resolve against the file's own IRI.
        let iri = file_iri(f)?;
        let prefix = format!("f{i}_");
        if let Some(graph) = named {
            load::load_reader_into_graph(
                &mut loaded,
                f,
                format,
                bytes.as_slice(),
                &prefix,
                &iri,
                graph,
            )
        } else {
            load::load_reader_with_base(&mut loaded, f, format, bytes.as_slice(), &prefix, &iri)
        }
        .map_err(|e| anyhow!("loading {}: {e}", f.display()))?;
    }
    Ok(loaded.into_store(machine)?)
}

fn evaluate(
    store: &Arc<nearflow_rdf::Store>,
    rt: &nearflow_rt::Runtime,
    text: &str,
) -> Result<Answer> {
    use nearflow_sparql::{self as sparql, Options, QueryResults};
    let q = sparql::prepare(store, text, &Options::default()).map_err(|e| anyhow!("{e}"))?;
    let answer = q.execute(rt, None).map_err(|e| anyhow!("{e}"))?;
    Ok(match answer {
        QueryResults::Solutions(s) => {
            let vars = s.variables();
            let out = s.collect().map_err(|e| anyhow!("{e}"))?;
            Answer::Solutions(
                out.rows
                    .iter()
                    .map(|r| {
                        vars.iter()
                            .enumerate()
                            .filter_map(|(i, (v, _))| {
                                out.term(r, i).map(|t| (v.clone(), t.to_string()))
                            })
                            .collect()
                    })
                    .collect(),
            )
        }
        QueryResults::Boolean(a) => Answer::Boolean(a.value),
        QueryResults::Graph(a) => Answer::Graph(
            a.value
                .iter()
                .map(|[s, p, o]| [s.to_string(), p.to_string(), o.to_string()])
                .collect(),
        ),
    })
}

/// Solutions as CSV writes their terms (SPARQL 1.1 CSV/TSV §2): an IRI as itself, a literal
/// as its lexical form, a blank node as `_:label` (still matched up to renaming).
fn as_csv_text(a: Answer) -> Answer {
    let text = |t: &str| -> String {
        if let Some(iri) = t.strip_prefix('<').and_then(|x| x.strip_suffix('>')) {
            return iri.to_owned();
        }
        if t.starts_with("_:") {
            return t.to_owned();
        }
        match oxrdf::Literal::from_str(t) {
            Ok(l) => l.value().to_owned(),
            Err(_) => t.to_owned(),
        }
    };
    match a {
        Answer::Solutions(rows) => Answer::Solutions(
            rows.into_iter()
                .map(|r| r.into_iter().map(|(k, v)| (k, text(&v))).collect())
                .collect(),
        ),
        other => other,
    }
}

/// The solutions of a CSV results document (RFC 4180 fields: quoted with `""` for a quote,
/// possibly across lines); an empty field is unbound.
fn csv_solutions(text: &str) -> Result<Answer> {
    let mut records: Vec<Vec<String>> = Vec::new();
    let mut field = String::new();
    let mut record = Vec::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    if quoted {
        bail!("an unterminated quoted field");
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    let mut it = records.into_iter();
    let head = it.next().context("no header line")?;
    let mut out = Vec::new();
    for r in it {
        if r.len() != head.len() {
            bail!(
                "a row of {} fields under a header of {}",
                r.len(),
                head.len()
            );
        }
        out.push(
            head.iter()
                .zip(r)
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.clone(), v))
                .collect(),
        );
    }
    Ok(Answer::Solutions(out))
}

/// The expected answer in `path` (SPARQL XML or JSON results, or a Turtle graph).
fn expected(path: &Path) -> Result<Answer> {
    use sparesults::{QueryResultsFormat, QueryResultsParser, ReaderQueryResultsParserOutput};
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let format = match ext {
        "srx" => QueryResultsFormat::Xml,
        "srj" => QueryResultsFormat::Json,
        "tsv" => QueryResultsFormat::Tsv,
        "ttl" | "nt" => {
            let text = std::fs::read_to_string(path)?;
            let mut triples = Vec::new();
            for t in oxttl::TurtleParser::new()
                .with_base_iri(file_iri(path)?)
                .map_err(|e| anyhow!("{e}"))?
                .for_slice(&text)
            {
                let t = t.with_context(|| format!("{}", path.display()))?;
                triples.push([
                    t.subject.to_string(),
                    t.predicate.to_string(),
                    t.object.to_string(),
                ]);
            }
            // A result graph written as a result set (rs:ResultSet) is read as solutions.
            return Ok(result_set_graph(&triples).unwrap_or(Answer::Graph(triples)));
        }
        "csv" => {
            return csv_solutions(&std::fs::read_to_string(path)?)
                .with_context(|| format!("{}", path.display()))
        }
        other => bail!("expected results in .{other} are not compared yet"),
    };
    let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    match QueryResultsParser::from_format(format)
        .for_reader(file)
        .with_context(|| format!("{}", path.display()))?
    {
        ReaderQueryResultsParserOutput::Boolean(b) => Ok(Answer::Boolean(b)),
        ReaderQueryResultsParserOutput::Solutions(s) => {
            let mut out = Vec::new();
            for sol in s {
                let sol = sol.with_context(|| format!("{}", path.display()))?;
                out.push(
                    sol.iter()
                        .map(|(v, t)| (v.as_str().to_string(), t.to_string()))
                        .collect(),
                );
            }
            Ok(Answer::Solutions(out))
        }
    }
}

/// Solutions from a graph that uses the result-set vocabulary (`rs:solution`, `rs:binding`),
/// as some older tests write their results.
fn result_set_graph(triples: &[[String; 3]]) -> Option<Answer> {
    const RS: &str = "http://www.w3.org/2001/sw/DataAccess/tests/result-set#";
    let p = |name: &str| format!("<{RS}{name}>");
    let sets: Vec<&String> = triples
        .iter()
        .filter(|[_, pr, o]| pr == &format!("<{RDF}type>") && o == &p("ResultSet"))
        .map(|[s, ..]| s)
        .collect();
    let set = sets.first()?;
    if let Some([.., b]) = triples
        .iter()
        .find(|[s, pr, _]| s == *set && pr == &p("boolean"))
    {
        return Some(Answer::Boolean(b.starts_with("\"true\"")));
    }
    let mut out = Vec::new();
    for [_, _, sol] in triples
        .iter()
        .filter(|[s, pr, _]| s == *set && pr == &p("solution"))
    {
        let mut row = Solution::new();
        for [_, _, b] in triples
            .iter()
            .filter(|[s, pr, _]| s == sol && pr == &p("binding"))
        {
            let get = |name: &str| {
                triples
                    .iter()
                    .find(|[s, pr, _]| s == b && pr == &p(name))
                    .map(|[.., o]| o.clone())
            };
            let var = get("variable")?;
            let value = get("value")?;
            let var = var.trim_matches('"').to_string();
            let var = var.split("\"^^").next().unwrap_or(&var).to_string();
            row.insert(var, value);
        }
        out.push(row);
    }
    Some(Answer::Solutions(out))
}

/// The plain variables of a top-level ORDER BY (their sequence must match), or none.
fn ordered_by(text: &str) -> Vec<String> {
    use spargebra::algebra::{GraphPattern, OrderExpression};
    use spargebra::Query;
    let Ok(q) = spargebra::SparqlParser::new().parse_query(text) else {
        return Vec::new();
    };
    let Query::Select { pattern, .. } = q else {
        return Vec::new();
    };
    let mut p = &pattern;
    loop {
        match p {
            GraphPattern::Slice { inner, .. }
            | GraphPattern::Distinct { inner }
            | GraphPattern::Reduced { inner }
            | GraphPattern::Project { inner, .. } => p = inner,
            GraphPattern::OrderBy { expression, .. } => {
                let mut vars = Vec::new();
                for e in expression {
                    match e {
                        OrderExpression::Asc(spargebra::algebra::Expression::Variable(v))
                        | OrderExpression::Desc(spargebra::algebra::Expression::Variable(v)) => {
                            vars.push(v.as_str().to_string())
                        }
                        _ => return Vec::new(),
                    }
                }
                return vars;
            }
            _ => return Vec::new(),
        }
    }
}

fn is_blank(t: &str) -> bool {
    t.starts_with("_:")
}

/// Whether `a` and `b` are the same up to a renaming of blank nodes, extending `map` (a
/// bijection, ours → expected).
fn same_terms(a: &str, b: &str, map: &mut Renaming) -> bool {
    if is_blank(a) != is_blank(b) {
        return false;
    }
    if !is_blank(a) {
        return a == b;
    }
    match (
        map.iter().find(|(x, _)| x == a),
        map.iter().find(|(_, y)| y == b),
    ) {
        (Some((_, y)), _) => y == b,
        (None, Some(_)) => false,
        (None, None) => {
            map.push((a.to_string(), b.to_string()));
            true
        }
    }
}

/// A blank node renaming, ours → expected, as pairs.
type Renaming = Vec<(String, String)>;

/// Whether two rows are the same under a renaming (which it may extend).
type SameRow<'a, R> = &'a dyn Fn(&R, &R, &mut Renaming) -> bool;

/// A backtracking search for one renaming under which every row of `got` is a distinct row of
/// `want` (the tests' answers are small; a step budget bounds the search).
struct Matcher<'a, R> {
    got: &'a [R],
    want: &'a [R],
    same: SameRow<'a, R>,
    ordered: bool,
    used: Vec<bool>,
    map: Renaming,
    budget: u64,
}

impl<R> Matcher<'_, R> {
    fn go(&mut self, i: usize) -> bool {
        if i == self.got.len() {
            return true;
        }
        let candidates: Vec<usize> = if self.ordered {
            vec![i]
        } else {
            (0..self.want.len()).filter(|&j| !self.used[j]).collect()
        };
        for j in candidates {
            if self.budget == 0 {
                return false;
            }
            self.budget -= 1;
            let before = self.map.len();
            if (self.same)(&self.got[i], &self.want[j], &mut self.map) {
                self.used[j] = true;
                if self.go(i + 1) {
                    return true;
                }
                self.used[j] = false;
            }
            self.map.truncate(before);
        }
        false
    }
}

/// Matches every row of `got` to a distinct row of `want` under one blank node renaming.
fn match_rows<R>(got: &[R], want: &[R], same: SameRow<'_, R>, ordered: bool) -> bool {
    got.len() == want.len()
        && Matcher {
            got,
            want,
            same,
            ordered,
            used: vec![false; want.len()],
            map: Vec::new(),
            budget: 5_000_000,
        }
        .go(0)
}

fn same_solution(a: &Solution, b: &Solution, map: &mut Renaming) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(v, t)| b.get(v).is_some_and(|u| same_terms(t, u, map)))
}

fn compare(got: &Answer, want: &Answer, ordered_by: &[String]) -> Result<()> {
    match (got, want) {
        (Answer::Boolean(a), Answer::Boolean(b)) if a == b => Ok(()),
        (Answer::Boolean(a), Answer::Boolean(b)) => bail!("answered {a}, expected {b}"),
        (Answer::Solutions(g), Answer::Solutions(w)) => {
            if g.len() != w.len() {
                bail!("{} solutions, expected {}", g.len(), w.len());
            }
            if !match_rows(g, w, &same_solution, false) {
                let first = g.iter().find(|s| !w.contains(s));
                bail!(
                    "the solutions differ (e.g. ours {:?}, not among the expected)",
                    first.map(|s| s
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>())
                );
            }
            if !ordered_by.is_empty() {
                let keys = |s: &[Solution]| -> Vec<Vec<Option<String>>> {
                    s.iter()
                        .map(|r| ordered_by.iter().map(|v| r.get(v).cloned()).collect())
                        .collect()
                };
                let plain = |k: &Vec<Vec<Option<String>>>| {
                    k.iter().flatten().flatten().all(|t| !is_blank(t))
                };
                let (gk, wk) = (keys(g), keys(w));
                if plain(&gk) && plain(&wk) && gk != wk {
                    bail!("the ORDER BY sequence differs");
                }
            }
            Ok(())
        }
        (Answer::Graph(g), Answer::Graph(w)) => {
            let mut g = g.clone();
            let mut w = w.clone();
            g.sort();
            g.dedup();
            w.sort();
            w.dedup();
            let same = |a: &[String; 3], b: &[String; 3], m: &mut Renaming| {
                (0..3).all(|i| same_terms(&a[i], &b[i], m))
            };
            if g.len() != w.len() {
                bail!("{} triples, expected {}", g.len(), w.len());
            }
            if !match_rows(&g, &w, &same, false) {
                bail!("the graphs differ");
            }
            Ok(())
        }
        (g, w) => bail!("answered a {}, expected a {}", kind(g), kind(w)),
    }
}

fn kind(a: &Answer) -> &'static str {
    match a {
        Answer::Solutions(_) => "solution sequence",
        Answer::Boolean(_) => "boolean",
        Answer::Graph(_) => "graph",
    }
}

/// The tally of a run: tests by kind, passed, and each failure with its reason.
#[derive(Debug, Default)]
pub struct Tally {
    pub evaluation: usize,
    pub evaluation_passed: usize,
    pub syntax: usize,
    pub syntax_passed: usize,
    /// Update evaluation tests, and passed.
    pub update: usize,
    pub update_passed: usize,
    /// RDF parser tests (syntax, evaluation, canonical form), and passed.
    pub parsing: usize,
    pub parsing_passed: usize,
    /// (test IRI, reason), every failed evaluation or syntax test.
    pub failures: Vec<(String, String)>,
}

/// Runs every query evaluation and syntax test of `tests` on `rt`.
pub fn run_all(tests: &[Test], rt: &nearflow_rt::Runtime) -> Tally {
    let mut t = Tally::default();
    for test in tests {
        let evaluation = match test.kind {
            Kind::QueryEvaluation => true,
            Kind::UpdateEvaluation => false,
            Kind::PositiveSyntax
            | Kind::NegativeSyntax
            | Kind::PositiveUpdateSyntax
            | Kind::NegativeUpdateSyntax
            | Kind::Rdf(_) => false,
            Kind::Other(_) => continue,
        };
        let update = test.kind == Kind::UpdateEvaluation;
        let parsing = matches!(test.kind, Kind::Rdf(_));
        // A panic in the engine is a failure of that test, not of the run.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(test, rt)))
            .unwrap_or_else(|_| Outcome::Fail("panicked".into()));
        if evaluation {
            t.evaluation += 1;
        } else if update {
            t.update += 1;
        } else if parsing {
            t.parsing += 1;
        } else {
            t.syntax += 1;
        }
        match outcome {
            Outcome::Pass if evaluation => t.evaluation_passed += 1,
            Outcome::Pass if update => t.update_passed += 1,
            Outcome::Pass if parsing => t.parsing_passed += 1,
            Outcome::Pass => t.syntax_passed += 1,
            Outcome::Fail(why) => t.failures.push((test.id.clone(), why)),
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_results_read_quotes_and_unbound_cells_and_ours_become_text() {
        let Answer::Solutions(rows) =
            csv_solutions("s,o\r\nhttp://a,\"4,4\"\r\nhttp://b,\r\n_:x,\"say \"\"hi\"\"\"\r\n")
                .unwrap()
        else {
            panic!("solutions");
        };
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0]["o"], "4,4");
        assert!(!rows[1].contains_key("o"));
        assert_eq!(rows[2]["o"], "say \"hi\"");
        assert!(csv_solutions("a,b\n1\n").is_err());
        let ours = Answer::Solutions(vec![[
            ("s".to_string(), "<http://a>".to_string()),
            (
                "o".to_string(),
                "\"4.4\"^^<http://www.w3.org/2001/XMLSchema#decimal>".to_string(),
            ),
            ("b".to_string(), "_:x".to_string()),
        ]
        .into_iter()
        .collect()]);
        let Answer::Solutions(text) = as_csv_text(ours) else {
            panic!("solutions");
        };
        assert_eq!(text[0]["s"], "http://a");
        assert_eq!(text[0]["o"], "4.4");
        assert_eq!(text[0]["b"], "_:x");
    }

    #[test]
    fn blank_nodes_match_up_to_a_consistent_renaming() {
        let row = |pairs: &[(&str, &str)]| -> Solution {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let got = Answer::Solutions(vec![
            row(&[("x", "_:a"), ("y", "<http://e/1>")]),
            row(&[("x", "_:b"), ("y", "<http://e/2>")]),
        ]);
        let want = Answer::Solutions(vec![
            row(&[("x", "_:q"), ("y", "<http://e/2>")]),
            row(&[("x", "_:p"), ("y", "<http://e/1>")]),
        ]);
        compare(&got, &want, &[]).unwrap();
        // One blank node of ours cannot stand for two of theirs.
        let merged = Answer::Solutions(vec![
            row(&[("x", "_:a"), ("y", "<http://e/1>")]),
            row(&[("x", "_:a"), ("y", "<http://e/2>")]),
        ]);
        assert!(compare(&merged, &want, &[]).is_err());
        // Literals compare by their exact form.
        let one = Answer::Solutions(vec![row(&[(
            "v",
            "\"01\"^^<http://www.w3.org/2001/XMLSchema#integer>",
        )])]);
        let other = Answer::Solutions(vec![row(&[(
            "v",
            "\"1\"^^<http://www.w3.org/2001/XMLSchema#integer>",
        )])]);
        assert!(compare(&one, &other, &[]).is_err());
        // An ORDER BY sequence must match when the keys are plain.
        let a = Answer::Solutions(vec![row(&[("v", "\"1\"")]), row(&[("v", "\"2\"")])]);
        let b = Answer::Solutions(vec![row(&[("v", "\"2\"")]), row(&[("v", "\"1\"")])]);
        compare(&a, &b, &[]).unwrap();
        assert!(compare(&a, &b, &["v".to_string()]).is_err());
    }

    #[test]
    fn top_level_order_by_variables_are_found() {
        assert_eq!(
            ordered_by("SELECT ?a ?b { ?a ?p ?b } ORDER BY ?b DESC(?a) LIMIT 3"),
            vec!["b", "a"]
        );
        assert!(ordered_by("SELECT ?a { ?a ?p ?b } ORDER BY STR(?a)").is_empty());
        assert!(ordered_by("ASK { ?a ?p ?b }").is_empty());
    }
}
