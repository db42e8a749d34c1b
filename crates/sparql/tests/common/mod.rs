//! Shared by the differential tests: run a query in nearflow and in Oxigraph, compare.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use nearflow_policy::PolicyKind;
use nearflow_rdf::{load, Store};
use nearflow_sparql::{self as sparql, Form, Options};
use oxigraph::sparql::{QueryResults, SparqlEvaluator};

/// One solution: each projected variable's term in N-Triples, `None` when unbound.
pub type Sol = Vec<Option<String>>;

/// A query's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Variables and solutions, in order.
    Rows(Vec<String>, Vec<Sol>),
    /// ASK.
    Bool(bool),
    /// CONSTRUCT: triples in N-Triples, sorted.
    Graph(Vec<String>),
}

impl Answer {
    /// Rows, triples, or 1/0.
    pub fn count(&self) -> u64 {
        match self {
            Answer::Rows(_, r) => r.len() as u64,
            Answer::Bool(b) => u64::from(*b),
            Answer::Graph(g) => g.len() as u64,
        }
    }
}

/// Our store from a file.
pub fn load_store(file: &Path, machine: &nearflow_topo::Machine) -> Store {
    let l = load::load_files(&[file.to_owned()], &Arc::default()).unwrap();
    l.into_store(machine).unwrap()
}

/// Oxigraph's store from a file, parsed by `oxttl` here so that blank node labels are kept
/// (Oxigraph's own loader renames them) and answers can be compared term by term.
pub fn load_oxigraph(file: &Path) -> oxigraph::store::Store {
    let f = std::fs::File::open(file).unwrap();
    let r: Box<dyn std::io::Read> = if file.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(f))
    } else {
        Box::new(f)
    };
    let store = oxigraph::store::Store::new().unwrap();
    let quads = oxttl::TurtleParser::new()
        .for_reader(r)
        .map(|t| t.unwrap().in_graph(oxrdf::GraphName::DefaultGraph));
    store.extend(quads).unwrap();
    store
}

/// Oxigraph's store from Turtle text (labels kept).
pub fn oxigraph_from_turtle(text: &str) -> oxigraph::store::Store {
    let store = oxigraph::store::Store::new().unwrap();
    let quads = oxttl::TurtleParser::new()
        .for_slice(text)
        .map(|t| t.unwrap().in_graph(oxrdf::GraphName::DefaultGraph));
    store.extend(quads).unwrap();
    store
}

/// Oxigraph's store from TriG text (labels kept).
pub fn oxigraph_from_trig(text: &str) -> oxigraph::store::Store {
    let store = oxigraph::store::Store::new().unwrap();
    let quads = oxttl::TriGParser::new().for_slice(text).map(|q| q.unwrap());
    store.extend(quads).unwrap();
    store
}

/// Oxigraph's answer.
pub fn reference(store: &oxigraph::store::Store, text: &str) -> Answer {
    let r = SparqlEvaluator::new()
        .parse_query(text)
        .unwrap()
        .on_store(store)
        .execute()
        .unwrap();
    match r {
        QueryResults::Solutions(s) => {
            let vars: Vec<String> = s
                .variables()
                .iter()
                .map(|v| v.as_str().to_owned())
                .collect();
            let rows = s
                .map(|sol| {
                    let sol = sol.unwrap();
                    vars.iter()
                        .map(|v| sol.get(v.as_str()).map(|t| t.to_string()))
                        .collect()
                })
                .collect();
            Answer::Rows(vars, rows)
        }
        QueryResults::Boolean(b) => Answer::Bool(b),
        QueryResults::Graph(g) => {
            let mut t: Vec<String> = g.map(|t| t.unwrap().to_string()).collect();
            t.sort();
            Answer::Graph(t)
        }
    }
}

/// Our answer, on a runtime with `policy`.
pub fn ours(
    store: &Arc<Store>,
    machine: &nearflow_topo::Machine,
    policy: PolicyKind,
    text: &str,
) -> Answer {
    let rt = nearflow_rt::Runtime::builder(machine.clone())
        .policy(policy)
        .build()
        .unwrap();
    ours_on(store, &rt, text)
}

/// Our answer on a given runtime.
pub fn ours_on(store: &Arc<Store>, rt: &nearflow_rt::Runtime, text: &str) -> Answer {
    let q =
        sparql::prepare(store, text, &Options::default()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let out = q.run_collect(rt).unwrap();
    assert!(out.stats.conserved(), "the plan lost or duplicated packets");
    match &q.form {
        Form::Select(vars) => Answer::Rows(
            vars.iter().map(|(v, _)| v.clone()).collect(),
            out.rows
                .iter()
                .map(|r| {
                    (0..vars.len())
                        .map(|i| out.term(r, i).map(|t| t.to_string()))
                        .collect()
                })
                .collect(),
        ),
        Form::Ask => Answer::Bool(out.boolean()),
        Form::Construct(_) | Form::Describe(_) => {
            let mut t: Vec<String> = q
                .graph(&out.minted, &out.rows)
                .iter()
                .map(|[s, p, o]| format!("{s} {p} {o}"))
                .collect();
            t.sort();
            Answer::Graph(t)
        }
    }
}

/// What order a query's answer must have.
#[derive(Clone, Debug)]
pub struct Expected {
    /// The variables of a top-level ORDER BY that are projected (their sequence must match).
    pub ordered_by: Vec<String>,
    /// `SELECT *`: the columns may come in another order (we list them as they appear in the
    /// pattern; Oxigraph 0.5 alphabetically), so they are compared as a set.
    pub star: bool,
}

impl Expected {
    /// From the query text: `ORDER BY ?a ?b` (plain variables; an expression key leaves the
    /// order unchecked).
    pub fn from_query(text: &str) -> Expected {
        let q = spargebra::SparqlParser::new().parse_query(text).unwrap();
        let mut ordered_by = Vec::new();
        if let spargebra::Query::Select { pattern, .. } = &q {
            let mut p = pattern;
            loop {
                use spargebra::algebra::{Expression, GraphPattern, OrderExpression};
                match p {
                    GraphPattern::Project { inner, .. }
                    | GraphPattern::Distinct { inner }
                    | GraphPattern::Reduced { inner }
                    | GraphPattern::Slice { inner, .. } => p = inner,
                    GraphPattern::OrderBy { expression, .. } => {
                        for e in expression {
                            match e {
                                OrderExpression::Asc(Expression::Variable(v))
                                | OrderExpression::Desc(Expression::Variable(v)) => {
                                    ordered_by.push(v.as_str().to_owned())
                                }
                                _ => {
                                    ordered_by.clear();
                                    break;
                                }
                            }
                        }
                        break;
                    }
                    _ => break,
                }
            }
        }
        let star = regex::Regex::new(r"(?i)\bSELECT\s+(?:DISTINCT\s+|REDUCED\s+)?\*")
            .unwrap()
            .is_match(text);
        Expected { ordered_by, star }
    }
}

fn multiset(rows: &[Sol]) -> BTreeMap<&Sol, usize> {
    let mut m = BTreeMap::new();
    for r in rows {
        *m.entry(r).or_insert(0) += 1;
    }
    m
}

/// Asserts that two answers agree: the same multiset of solutions, and the same sequence of the
/// ORDER BY variables.
pub fn compare(got: &Answer, want: &Answer, what: &str, expected: Expected) {
    match (got, want) {
        (Answer::Rows(gv, g), Answer::Rows(wv, w)) => {
            // SELECT *: the same variables, our rows put in Oxigraph's column order.
            let reordered;
            let g = if expected.star && gv != wv {
                let (mut a, mut b) = (gv.clone(), wv.clone());
                a.sort();
                b.sort();
                assert_eq!(a, b, "{what}: variables");
                let at: Vec<usize> = wv
                    .iter()
                    .map(|v| gv.iter().position(|x| x == v).expect("same set"))
                    .collect();
                reordered = g
                    .iter()
                    .map(|r| at.iter().map(|&i| r[i].clone()).collect())
                    .collect::<Vec<Sol>>();
                &reordered
            } else {
                assert_eq!(gv, wv, "{what}: variables");
                g
            };
            if g.len() != w.len() || multiset(g) != multiset(w) {
                let (mg, mw) = (multiset(g), multiset(w));
                let extra: Vec<_> = mg
                    .iter()
                    .filter(|(k, n)| mw.get(*k) != Some(n))
                    .take(5)
                    .collect();
                let missing: Vec<_> = mw
                    .iter()
                    .filter(|(k, n)| mg.get(*k) != Some(n))
                    .take(5)
                    .collect();
                panic!(
                    "{what}: {} rows, Oxigraph {}; ours not theirs (first 5): {extra:?}; theirs not ours: {missing:?}",
                    g.len(),
                    w.len()
                );
            }
            let cols: Vec<usize> = expected
                .ordered_by
                .iter()
                .filter_map(|v| wv.iter().position(|x| x == v))
                .collect();
            if !cols.is_empty() && cols.len() == expected.ordered_by.len() {
                let key = |r: &Sol| cols.iter().map(|&c| r[c].clone()).collect::<Vec<_>>();
                let gk: Vec<_> = g.iter().map(key).collect();
                let wk: Vec<_> = w.iter().map(key).collect();
                assert_eq!(gk, wk, "{what}: ORDER BY sequence");
            }
        }
        (g, w) => assert_eq!(g, w, "{what}"),
    }
}

/// Runs `text` in Oxigraph and in ours under each policy; asserts every answer equals
/// Oxigraph's ([`compare`]); returns Oxigraph's.
pub fn matches_oxigraph(
    store: &Arc<Store>,
    oxi: &oxigraph::store::Store,
    machine: &nearflow_topo::Machine,
    policies: &[PolicyKind],
    text: &str,
    what: &str,
) -> Answer {
    let want = reference(oxi, text);
    for &policy in policies {
        let got = ours(store, machine, policy, text);
        compare(
            &got,
            &want,
            &format!("{what} under {policy}"),
            Expected::from_query(text),
        );
    }
    want
}

/// Our store of a Turtle text (N-Triples is Turtle) on a two-node preset, and a runtime.
pub fn ours_of(text: &str) -> (Arc<nearflow_rdf::Store>, nearflow_rt::Runtime) {
    ours_of_format(text, load::Format::Turtle)
}

/// Our store of TriG text (named graphs), on a two-node machine.
pub fn ours_of_trig(text: &str) -> (Arc<nearflow_rdf::Store>, nearflow_rt::Runtime) {
    ours_of_format(text, load::Format::TriG)
}

fn ours_of_format(
    text: &str,
    format: load::Format,
) -> (Arc<nearflow_rdf::Store>, nearflow_rt::Runtime) {
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let mut l = load::Loaded::default();
    load::load_reader(&mut l, "t.trig".as_ref(), format, text.as_bytes(), "").unwrap();
    let store = Arc::new(l.into_store(&machine).unwrap());
    (
        store,
        nearflow_rt::Runtime::builder(machine).build().unwrap(),
    )
}
