//! Property paths (SPARQL 1.1 §9, evaluated as §18.4 defines): a path in the algebra holds
//! terms ([`PathExpr`]); when the plan is built for a run its IRIs become the store's ids
//! ([`Resolved`]), and one flow operator ([`PathOp`]) computes the path's solutions from the
//! store's indexes.
//!
//! - A sequence and an alternative keep duplicates (bag semantics: `:a :p/:q ?x` is one
//!   solution per middle node, `:a (:p|:q) ?x` one per branch); a negated property set is one
//!   solution per matching triple, as `{ :a ?p ?x FILTER(?p NOT IN (…)) }` would give.
//! - `*`, `+` and `?` are sets per start node (§18.4's ALP): a breadth-first walk that marks
//!   each node it reaches, so it stops on cycles.
//! - With one end bound the walk starts there (from the object backwards when only the object
//!   is bound): the closure is never built for nodes the query does not ask about. With both
//!   ends variables, every node of the graph (subject or object of some triple) is a start.
//! - A zero-length path matches a constant end even when the graph does not hold it (§18.4:
//!   "the term itself").

use std::collections::VecDeque;
use std::sync::Arc;

use hashbrown::HashSet;
use nearflow_flow::{Emitter, FlowError, Io, Operator, PortType, Status};
use spargebra::algebra::PropertyPathExpression;

use super::exec::{emit_queued, row_ports, Row, Timer};
use super::expr::EvalCx;
use super::minted::Minted;
use super::plan::OpStat;
use nearflow_rdf::store::Store;
use nearflow_rdf::term::{Id, Term, TermRef, UNBOUND};

/// A property path over terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathExpr {
    /// One predicate (an IRI).
    Link(String),
    /// `^p`
    Inverse(Box<PathExpr>),
    /// `p / q`
    Seq(Box<PathExpr>, Box<PathExpr>),
    /// `p | q`
    Alt(Box<PathExpr>, Box<PathExpr>),
    /// `p*`
    ZeroOrMore(Box<PathExpr>),
    /// `p+`
    OneOrMore(Box<PathExpr>),
    /// `p?`
    ZeroOrOne(Box<PathExpr>),
    /// `!(p1 | … | pn)`: any predicate but these.
    Negated(Vec<String>),
}

impl PathExpr {
    /// From `spargebra`'s path.
    pub fn of(p: &PropertyPathExpression) -> PathExpr {
        let b = |x: &PropertyPathExpression| Box::new(PathExpr::of(x));
        match p {
            PropertyPathExpression::NamedNode(n) => PathExpr::Link(n.as_str().to_owned()),
            PropertyPathExpression::Reverse(x) => PathExpr::Inverse(b(x)),
            PropertyPathExpression::Sequence(x, y) => PathExpr::Seq(b(x), b(y)),
            PropertyPathExpression::Alternative(x, y) => PathExpr::Alt(b(x), b(y)),
            PropertyPathExpression::ZeroOrMore(x) => PathExpr::ZeroOrMore(b(x)),
            PropertyPathExpression::OneOrMore(x) => PathExpr::OneOrMore(b(x)),
            PropertyPathExpression::ZeroOrOne(x) => PathExpr::ZeroOrOne(b(x)),
            PropertyPathExpression::NegatedPropertySet(ps) => {
                PathExpr::Negated(ps.iter().map(|n| n.as_str().to_owned()).collect())
            }
        }
    }

    /// How deep it nests (translation refuses paths past the nesting bound).
    pub fn depth(&self) -> usize {
        match self {
            PathExpr::Link(_) | PathExpr::Negated(_) => 1,
            PathExpr::Inverse(x)
            | PathExpr::ZeroOrMore(x)
            | PathExpr::OneOrMore(x)
            | PathExpr::ZeroOrOne(x) => 1 + x.depth(),
            PathExpr::Seq(x, y) | PathExpr::Alt(x, y) => 1 + x.depth().max(y.depth()),
        }
    }

    /// With its IRIs as the store's ids.
    pub fn resolve(&self, store: &Store) -> Resolved {
        let b = |x: &PathExpr| Box::new(x.resolve(store));
        match self {
            PathExpr::Link(iri) => Resolved::Link(store.id_of(TermRef::Iri(iri))),
            PathExpr::Inverse(x) => Resolved::Inverse(b(x)),
            PathExpr::Seq(x, y) => Resolved::Seq(b(x), b(y)),
            PathExpr::Alt(x, y) => Resolved::Alt(b(x), b(y)),
            PathExpr::ZeroOrMore(x) => Resolved::Closure(b(x), true),
            PathExpr::OneOrMore(x) => Resolved::Closure(b(x), false),
            PathExpr::ZeroOrOne(x) => Resolved::ZeroOrOne(b(x)),
            PathExpr::Negated(ps) => Resolved::Negated(
                ps.iter()
                    .filter_map(|p| store.id_of(TermRef::Iri(p)))
                    .collect(),
            ),
        }
    }
}

impl std::fmt::Display for PathExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathExpr::Link(i) => write!(f, "<{i}>"),
            PathExpr::Inverse(x) => write!(f, "^{x}"),
            PathExpr::Seq(x, y) => write!(f, "({x} / {y})"),
            PathExpr::Alt(x, y) => write!(f, "({x} | {y})"),
            PathExpr::ZeroOrMore(x) => write!(f, "{x}*"),
            PathExpr::OneOrMore(x) => write!(f, "{x}+"),
            PathExpr::ZeroOrOne(x) => write!(f, "{x}?"),
            PathExpr::Negated(ps) => {
                let ps: Vec<String> = ps.iter().map(|p| format!("<{p}>")).collect();
                write!(f, "!({})", ps.join(" | "))
            }
        }
    }
}

/// A path over the store's ids (a link the store lacks matches nothing).
#[derive(Clone, Debug)]
pub enum Resolved {
    /// A predicate, `None` when the store does not hold it.
    Link(Option<Id>),
    /// `^p`
    Inverse(Box<Resolved>),
    /// `p / q`
    Seq(Box<Resolved>, Box<Resolved>),
    /// `p | q`
    Alt(Box<Resolved>, Box<Resolved>),
    /// `p*` (true: zero steps allowed) or `p+`.
    Closure(Box<Resolved>, bool),
    /// `p?`
    ZeroOrOne(Box<Resolved>),
    /// Any predicate but these.
    Negated(Vec<Id>),
}

/// One end of a path pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// A variable's column.
    Var(usize),
    /// A constant term.
    Term(Term),
}

/// Evaluates paths over one store.
pub struct Walker<'s> {
    store: &'s Store,
}

impl<'s> Walker<'s> {
    /// A walker over `store`.
    pub fn new(store: &'s Store) -> Self {
        Walker { store }
    }

    /// Every `y` with `x path y`, with duplicates as §18.4 counts them.
    pub fn from(&self, p: &Resolved, x: Id, out: &mut Vec<Id>) {
        match p {
            Resolved::Link(Some(l)) => out.extend(
                self.store
                    .matches([Some(x), Some(*l), None])
                    .into_iter()
                    .map(|t| t[2]),
            ),
            Resolved::Link(None) => {}
            Resolved::Inverse(q) => self.to(q, x, out),
            Resolved::Seq(a, b) => {
                let mut mid = Vec::new();
                self.from(a, x, &mut mid);
                for m in mid {
                    self.from(b, m, out);
                }
            }
            Resolved::Alt(a, b) => {
                self.from(a, x, out);
                self.from(b, x, out);
            }
            Resolved::Closure(q, zero) => out.extend(self.closure(q, x, *zero, true)),
            Resolved::ZeroOrOne(q) => {
                let mut step = vec![x];
                self.from(q, x, &mut step);
                out.extend(distinct(step));
            }
            // One solution per triple, as `{ x ?p ?y FILTER(?p NOT IN (…)) }` gives.
            Resolved::Negated(ps) => out.extend(
                self.store
                    .matches([Some(x), None, None])
                    .into_iter()
                    .filter(|t| !ps.contains(&t[1]))
                    .map(|t| t[2]),
            ),
        }
    }

    /// Every `x` with `x path y`.
    pub fn to(&self, p: &Resolved, y: Id, out: &mut Vec<Id>) {
        match p {
            Resolved::Link(Some(l)) => out.extend(
                self.store
                    .matches([None, Some(*l), Some(y)])
                    .into_iter()
                    .map(|t| t[0]),
            ),
            Resolved::Link(None) => {}
            Resolved::Inverse(q) => self.from(q, y, out),
            Resolved::Seq(a, b) => {
                let mut mid = Vec::new();
                self.to(b, y, &mut mid);
                for m in mid {
                    self.to(a, m, out);
                }
            }
            Resolved::Alt(a, b) => {
                self.to(a, y, out);
                self.to(b, y, out);
            }
            Resolved::Closure(q, zero) => out.extend(self.closure(q, y, *zero, false)),
            Resolved::ZeroOrOne(q) => {
                let mut step = vec![y];
                self.to(q, y, &mut step);
                out.extend(distinct(step));
            }
            Resolved::Negated(ps) => out.extend(
                self.store
                    .matches([None, None, Some(y)])
                    .into_iter()
                    .filter(|t| !ps.contains(&t[1]))
                    .map(|t| t[0]),
            ),
        }
    }

    /// The nodes reachable from `x` by one or more steps of `q` (and `x` itself when `zero`),
    /// each once; forwards, or backwards when `forward` is false. Breadth first, marking
    /// every node reached: it ends on cycles.
    fn closure(&self, q: &Resolved, x: Id, zero: bool, forward: bool) -> Vec<Id> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        if zero {
            seen.insert(x);
            out.push(x);
        }
        let mut todo = VecDeque::from([x]);
        let mut step = Vec::new();
        while let Some(n) = todo.pop_front() {
            step.clear();
            if forward {
                self.from(q, n, &mut step);
            } else {
                self.to(q, n, &mut step);
            }
            for &m in &step {
                if seen.insert(m) {
                    out.push(m);
                    todo.push_back(m);
                }
            }
        }
        out
    }

    /// Every node of the graph: each subject and object once.
    pub fn nodes(&self) -> Vec<Id> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for t in self.store.matches([None, None, None]) {
            for n in [t[0], t[2]] {
                if seen.insert(n) {
                    out.push(n);
                }
            }
        }
        out
    }

    /// The nodes a path can start from when neither end is bound: for a link (or its inverse)
    /// the subjects (objects) of that predicate; otherwise every node.
    fn starts(&self, p: &Resolved) -> Vec<Id> {
        match p {
            Resolved::Link(Some(l)) => distinct(
                self.store
                    .matches([None, Some(*l), None])
                    .into_iter()
                    .map(|t| t[0])
                    .collect(),
            ),
            Resolved::Link(None) => Vec::new(),
            Resolved::Seq(a, _) => self.starts(a),
            _ => self.nodes(),
        }
    }

    /// Every pair `(x, y)` with `x path y`.
    pub fn pairs(&self, p: &Resolved) -> Vec<(Id, Id)> {
        match p {
            Resolved::Link(Some(l)) => self
                .store
                .matches([None, Some(*l), None])
                .into_iter()
                .map(|t| (t[0], t[2]))
                .collect(),
            Resolved::Link(None) => Vec::new(),
            Resolved::Inverse(q) => self.pairs(q).into_iter().map(|(a, b)| (b, a)).collect(),
            Resolved::Alt(a, b) => {
                let mut out = self.pairs(a);
                out.extend(self.pairs(b));
                out
            }
            Resolved::Negated(ps) => self
                .store
                .matches([None, None, None])
                .into_iter()
                .filter(|t| !ps.contains(&t[1]))
                .map(|t| (t[0], t[2]))
                .collect(),
            Resolved::Seq(..) | Resolved::Closure(..) | Resolved::ZeroOrOne(_) => {
                let mut out = Vec::new();
                let mut ys = Vec::new();
                for x in self.starts(p) {
                    ys.clear();
                    self.from(p, x, &mut ys);
                    out.extend(ys.iter().map(|&y| (x, y)));
                }
                out
            }
        }
    }
}

fn distinct(v: Vec<Id>) -> Vec<Id> {
    let mut seen = HashSet::new();
    v.into_iter().filter(|x| seen.insert(*x)).collect()
}

/// The path operator: on its first step it computes every solution of `subject path object`
/// from the store, then emits them.
pub struct PathOp<const N: usize> {
    store: Arc<Store>,
    minted: Arc<Minted>,
    subject: End,
    path: Arc<PathExpr>,
    object: End,
    rows: Option<VecDeque<Row<N>>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> PathOp<N> {
    /// The operator for `subject path object`.
    pub fn new(
        store: Arc<Store>,
        minted: Arc<Minted>,
        (subject, path, object): (End, Arc<PathExpr>, End),
        stat: Arc<OpStat>,
        timing: bool,
    ) -> Self {
        PathOp {
            store,
            minted,
            subject,
            path,
            object,
            rows: None,
            out: Emitter::new(0),
            stat,
            timing,
        }
    }

    /// The id of a constant end: the store's, else one minted for the run (a zero-length path
    /// still matches it).
    fn id(&self, t: &Term) -> Id {
        let cx = EvalCx {
            store: &self.store,
            minted: &self.minted,
        };
        cx.id_of_term(t.as_ref()).unwrap_or(UNBOUND)
    }

    /// Every solution.
    fn solve(&self) -> Vec<Row<N>> {
        let w = Walker::new(&self.store);
        let p = self.path.resolve(&self.store);
        let row = |x: Id, y: Id| -> Option<Row<N>> {
            let mut r = [UNBOUND; N];
            for (end, v) in [(&self.subject, x), (&self.object, y)] {
                if let End::Var(c) = end {
                    if r[*c] != UNBOUND && r[*c] != v {
                        return None;
                    }
                    r[*c] = v;
                }
            }
            Some(r)
        };
        let mut out = Vec::new();
        let mut ys = Vec::new();
        match (&self.subject, &self.object) {
            (End::Term(s), End::Term(o)) => {
                let (s, o) = (self.id(s), self.id(o));
                w.from(&p, s, &mut ys);
                out.extend(ys.iter().filter(|&&y| y == o).filter_map(|_| row(s, o)));
            }
            (End::Term(s), End::Var(_)) => {
                let s = self.id(s);
                w.from(&p, s, &mut ys);
                out.extend(ys.iter().filter_map(|&y| row(s, y)));
            }
            (End::Var(_), End::Term(o)) => {
                let o = self.id(o);
                w.to(&p, o, &mut ys);
                out.extend(ys.iter().filter_map(|&x| row(x, o)));
            }
            (End::Var(_), End::Var(_)) => {
                out.extend(w.pairs(&p).into_iter().filter_map(|(x, y)| row(x, y)));
            }
        }
        out
    }
}

impl<const N: usize> Operator for PathOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(0)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn state_bytes(&self) -> usize {
        self.rows.as_ref().map_or(0, |r| r.len()) * std::mem::size_of::<Row<N>>()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        if self.rows.is_none() {
            let rows = self.solve();
            io.charge(rows.len() * std::mem::size_of::<Row<N>>())?;
            self.rows = Some(rows.into());
        }
        let q = self.rows.as_mut().expect("made above");
        Ok(emit_queued(io, q, &mut self.out, &self.stat, Status::More))
    }
}
