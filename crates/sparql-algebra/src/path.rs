//! Property paths (SPARQL 1.1 §9, evaluated as §18.4 defines): a path in the algebra holds
//! terms ([`PathExpr`]); when the plan is built for a run its IRIs become the store's ids
//! ([`Resolved`]), and one flow operator (`exec/path.rs`) computes the path's solutions from
//! the store's indexes with a [`Walker`], in one graph or in the merge of several.
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

use hashbrown::HashSet;
use spargebra::algebra::PropertyPathExpression;

use nearflow_store::index::Store;
use nearflow_store::term::{Id, Term, TermRef};

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

/// Evaluates paths over the graphs of one store: one graph, or several merged (their union,
/// each triple once).
pub struct Walker<'s> {
    store: &'s Store,
    graphs: Vec<Id>,
    /// Asked every few hundred nodes of a closure whether to stop (a time limit passed, the
    /// run was cancelled); once it says so, every walk ends early and [`Walker::stopped`] is
    /// true.
    stop: Option<&'s (dyn Fn() -> bool + 's)>,
    stopped: std::cell::Cell<bool>,
    steps: std::cell::Cell<u32>,
    /// Ids the walk's collections hold now (results, sets of nodes seen, queues, a merge's
    /// set of triples), each counted as [`ID_BYTES`] against `budget`.
    held: std::cell::Cell<usize>,
    /// Ids it may hold ([`Walker::within`]).
    budget: usize,
    /// The most it would have held, once it passed the budget (the walk then ends early).
    over: std::cell::Cell<Option<usize>>,
}

/// Bytes a walk counts for each id it holds: the id (4 bytes) in a vector that may have
/// doubled (8), or in a hash set at its lowest load (about 12 with its control bytes), and a
/// margin for the queue and the step buffers that hold it too. An over-count: the budget
/// refuses early, never late.
pub const ID_BYTES: usize = 16;

impl<'s> Walker<'s> {
    /// A walker over the graphs `graphs` of `store`.
    pub fn new(store: &'s Store, graphs: Vec<Id>) -> Self {
        Walker {
            store,
            graphs,
            stop: None,
            stopped: std::cell::Cell::new(false),
            steps: std::cell::Cell::new(0),
            held: std::cell::Cell::new(0),
            budget: usize::MAX,
            over: std::cell::Cell::new(None),
        }
    }

    /// The walker, holding at most `bytes` (counted as [`ID_BYTES`] an id): past them every
    /// walk ends early, [`Walker::stopped`] is true and [`Walker::over_budget`] says how much
    /// it would have held.
    pub fn within(mut self, bytes: usize) -> Self {
        self.budget = bytes / ID_BYTES;
        self
    }

    /// The bytes it would have held past its budget, if it passed it.
    pub fn over_budget(&self) -> Option<usize> {
        self.over.get()
    }

    /// `n` more ids held; `false` (and the walk stops) when they would pass the budget: the
    /// caller then does not keep them.
    pub fn grow(&self, n: usize) -> bool {
        let now = self.held.get().saturating_add(n);
        if now > self.budget {
            self.over.set(Some(
                now.saturating_mul(ID_BYTES)
                    .max(self.over.get().unwrap_or(0)),
            ));
            self.stopped.set(true);
            return false;
        }
        self.held.set(now);
        true
    }

    /// `n` ids no longer held.
    pub(crate) fn shrink(&self, n: usize) {
        self.held.set(self.held.get().saturating_sub(n));
    }

    /// [`distinct`] of `v`, whose ids are held: what it drops is given back.
    fn distinct_held(&self, v: Vec<Id>) -> Vec<Id> {
        let n = v.len();
        // The set of the ids seen is held while it is made.
        if !self.grow(n) {
            self.shrink(n);
            return Vec::new();
        }
        let d = distinct(v);
        self.shrink(2 * n - d.len());
        d
    }

    /// The walker, asking `stop` now and then during a closure whether to end early.
    pub fn stopping_on(mut self, stop: &'s (dyn Fn() -> bool + 's)) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Whether a walk ended early because `stop` said so (its results are then partial).
    pub fn stopped(&self) -> bool {
        self.stopped.get()
    }

    /// One more node walked; whether to stop now.
    fn should_stop(&self) -> bool {
        if self.stopped.get() {
            return true;
        }
        let n = self.steps.get().wrapping_add(1);
        self.steps.set(n);
        if n % 256 == 0 && self.stop.is_some_and(|f| f()) {
            self.stopped.set(true);
        }
        self.stopped.get()
    }

    /// Calls `f` with each triple matching `pattern` in the walked graphs, each once (the
    /// merge of several graphs is a set). No triple is collected on the way for one graph.
    fn each(&self, pattern: [Option<Id>; 3], mut f: impl FnMut([Id; 3])) {
        match self.graphs.as_slice() {
            [] => {}
            [g] => self.store.for_each_match(*g, pattern, f),
            many => {
                let mut seen = HashSet::new();
                for &g in many {
                    self.store.for_each_match(g, pattern, |t| {
                        if self.over.get().is_none() && !seen.contains(&t) && self.grow(3) {
                            seen.insert(t);
                            f(t)
                        }
                    });
                }
                self.shrink(3 * seen.len());
            }
        }
    }

    /// Every `y` with `x path y`, with duplicates as §18.4 counts them.
    pub fn from(&self, p: &Resolved, x: Id, out: &mut Vec<Id>) {
        match p {
            Resolved::Link(Some(l)) => self.each([Some(x), Some(*l), None], |t| {
                if self.grow(1) {
                    out.push(t[2])
                }
            }),
            Resolved::Link(None) => {}
            Resolved::Inverse(q) => self.to(q, x, out),
            Resolved::Seq(a, b) => {
                let mut mid = Vec::new();
                self.from(a, x, &mut mid);
                let n = mid.len();
                for m in mid {
                    self.from(b, m, out);
                }
                self.shrink(n);
            }
            Resolved::Alt(a, b) => {
                self.from(a, x, out);
                self.from(b, x, out);
            }
            Resolved::Closure(q, zero) => out.extend(self.closure(q, x, *zero, true)),
            Resolved::ZeroOrOne(q) => {
                let mut step = Vec::new();
                if self.grow(1) {
                    step.push(x);
                }
                self.from(q, x, &mut step);
                out.extend(self.distinct_held(step));
            }
            // One solution per triple, as `{ x ?p ?y FILTER(?p NOT IN (…)) }` gives.
            Resolved::Negated(ps) => self.each([Some(x), None, None], |t| {
                if !ps.contains(&t[1]) && self.grow(1) {
                    out.push(t[2])
                }
            }),
        }
    }

    /// Every `x` with `x path y`.
    pub fn to(&self, p: &Resolved, y: Id, out: &mut Vec<Id>) {
        match p {
            Resolved::Link(Some(l)) => self.each([None, Some(*l), Some(y)], |t| {
                if self.grow(1) {
                    out.push(t[0])
                }
            }),
            Resolved::Link(None) => {}
            Resolved::Inverse(q) => self.from(q, y, out),
            Resolved::Seq(a, b) => {
                let mut mid = Vec::new();
                self.to(b, y, &mut mid);
                let n = mid.len();
                for m in mid {
                    self.to(a, m, out);
                }
                self.shrink(n);
            }
            Resolved::Alt(a, b) => {
                self.to(a, y, out);
                self.to(b, y, out);
            }
            Resolved::Closure(q, zero) => out.extend(self.closure(q, y, *zero, false)),
            Resolved::ZeroOrOne(q) => {
                let mut step = Vec::new();
                if self.grow(1) {
                    step.push(y);
                }
                self.to(q, y, &mut step);
                out.extend(self.distinct_held(step));
            }
            Resolved::Negated(ps) => self.each([None, None, Some(y)], |t| {
                if !ps.contains(&t[1]) && self.grow(1) {
                    out.push(t[0])
                }
            }),
        }
    }

    /// The nodes reachable from `x` by one or more steps of `q` (and `x` itself when `zero`),
    /// each once; forwards, or backwards when `forward` is false. Breadth first, marking
    /// every node reached: it ends on cycles. One step's buffer is reused for every node.
    fn closure(&self, q: &Resolved, x: Id, zero: bool, forward: bool) -> Vec<Id> {
        // Each node reached is held three times (the set, the result, the queue); the set
        // and the queue are given back at the end, the result passes to the caller.
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        if zero && self.grow(3) {
            seen.insert(x);
            out.push(x);
        }
        let mut todo = VecDeque::from([x]);
        let mut step = Vec::new();
        'walk: while let Some(n) = todo.pop_front() {
            if self.should_stop() {
                break;
            }
            self.shrink(step.len());
            step.clear();
            if forward {
                self.from(q, n, &mut step);
            } else {
                self.to(q, n, &mut step);
            }
            for &m in &step {
                if !seen.contains(&m) {
                    if !self.grow(3) {
                        break 'walk;
                    }
                    seen.insert(m);
                    out.push(m);
                    todo.push_back(m);
                }
            }
        }
        self.shrink(step.len() + 2 * seen.len());
        out
    }

    /// Every node of the walked graphs: each subject and object once.
    pub fn nodes(&self) -> Vec<Id> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        self.each([None, None, None], |t| {
            for n in [t[0], t[2]] {
                if !seen.contains(&n) && self.grow(2) {
                    seen.insert(n);
                    out.push(n);
                }
            }
        });
        self.shrink(seen.len());
        out
    }

    /// The nodes a path can start from when neither end is bound, each once: for a link (or
    /// its inverse) the subjects (objects) of that predicate, for a sequence its first step's,
    /// for an alternative either's, for `p+` those of `p`; every node where a zero-length path
    /// may start (`*`, `?`) or a negated set may step from any.
    fn starts(&self, p: &Resolved) -> Vec<Id> {
        match p {
            Resolved::Link(Some(l)) => {
                let mut v = Vec::new();
                self.each([None, Some(*l), None], |t| {
                    if self.grow(1) {
                        v.push(t[0])
                    }
                });
                self.distinct_held(v)
            }
            Resolved::Inverse(q) if matches!(**q, Resolved::Link(_)) => {
                let Resolved::Link(l) = &**q else {
                    unreachable!("matched above")
                };
                let mut v = Vec::new();
                if let Some(l) = l {
                    self.each([None, Some(*l), None], |t| {
                        if self.grow(1) {
                            v.push(t[2])
                        }
                    });
                }
                self.distinct_held(v)
            }
            Resolved::Link(None) => Vec::new(),
            Resolved::Seq(a, _) | Resolved::Closure(a, false) => self.starts(a),
            Resolved::Alt(a, b) => {
                let mut v = self.starts(a);
                v.extend(self.starts(b));
                self.distinct_held(v)
            }
            _ => self.nodes(),
        }
    }

    /// Every pair `(x, y)` with `x path y`.
    pub fn pairs(&self, p: &Resolved) -> Vec<(Id, Id)> {
        match p {
            Resolved::Link(Some(l)) => {
                let mut v = Vec::new();
                self.each([None, Some(*l), None], |t| {
                    if self.grow(2) {
                        v.push((t[0], t[2]))
                    }
                });
                v
            }
            Resolved::Link(None) => Vec::new(),
            Resolved::Inverse(q) => {
                let mut v = self.pairs(q);
                for pair in &mut v {
                    *pair = (pair.1, pair.0);
                }
                v
            }
            Resolved::Alt(a, b) => {
                let mut out = self.pairs(a);
                out.extend(self.pairs(b));
                out
            }
            Resolved::Negated(ps) => {
                let mut v = Vec::new();
                self.each([None, None, None], |t| {
                    if !ps.contains(&t[1]) && self.grow(2) {
                        v.push((t[0], t[2]))
                    }
                });
                v
            }
            Resolved::Seq(..) | Resolved::Closure(..) | Resolved::ZeroOrOne(_) => {
                let mut out = Vec::new();
                let mut ys = Vec::new();
                let starts = self.starts(p);
                let n = starts.len();
                for x in starts {
                    if self.should_stop() {
                        break;
                    }
                    self.shrink(ys.len());
                    ys.clear();
                    self.from(p, x, &mut ys);
                    if self.grow(2 * ys.len()) {
                        out.extend(ys.iter().map(|&y| (x, y)));
                    }
                }
                self.shrink(n + ys.len());
                out
            }
        }
    }
}

fn distinct(v: Vec<Id>) -> Vec<Id> {
    let mut seen = HashSet::new();
    v.into_iter().filter(|x| seen.insert(*x)).collect()
}
