//! The logical algebra: SPARQL 1.1's algebra (§18.2) over **terms**, with variables as row
//! columns, translated from `spargebra`'s. It knows no store: a constant is a term, whether a
//! store holds it or not, so a query translated once can be planned against any store version
//! (the physical planner gives terms their ids, `physical/`). What the engine cannot evaluate
//! is refused here with "not supported: …".
//!
//! Quad patterns carry their graph: `None` reads the *active graph* (the dataset's default
//! graph, or the graph a `GRAPH` block evaluates in), `Some` a named graph by IRI or variable.
//! A `GRAPH` block is translated as [`Node::Graph`] around its pattern; the rewrite passes
//! (`rewrite/`) push its name into the patterns where that is exact.
//!
//! The analyses every later pass needs live here too: the columns a node mentions, binds in
//! every solution ([`certain`]) or may bind ([`maybe`]), and the columns an expression reads.
//!
//! Here: the algebra's types. `translate.rs`: the translation from `spargebra`, with its bounds;
//! `analysis.rs`: the analyses.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use spargebra::algebra::{
    AggregateExpression, AggregateFunction, Expression, Function, GraphPattern, OrderExpression,
};
use spargebra::term::{GroundTerm, NamedNodePattern, TermPattern, TriplePattern};

use crate::error::QueryError;
use crate::expr::{ArithOp, CmpOp, Expr};
use crate::functions::strings::compile_regex;
use crate::functions::Registry;
use crate::path::PathExpr;
use nearflow_store::term::{Term, XSD_STRING};

mod analysis;
mod translate;

pub use analysis::*;
pub use translate::{literal_term, Translator, MAX_DEPTH, MAX_PATTERNS};

/// A position of a quad pattern.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TermPat {
    /// A variable's column.
    Var(usize),
    /// A constant term.
    Term(Term),
    /// A variable fixed to a constant by an equality filter (`rewrite/`): matched as the
    /// constant, and the column still receives it.
    Fixed(usize, Term),
}

impl TermPat {
    /// The column it binds, if any.
    pub fn var(&self) -> Option<usize> {
        match self {
            TermPat::Var(c) | TermPat::Fixed(c, _) => Some(*c),
            TermPat::Term(_) => None,
        }
    }
}

/// A quad pattern: subject, predicate and object, and the graph (`None`: the active graph).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuadPat {
    /// Subject, predicate, object.
    pub t: [TermPat; 3],
    /// The graph: `None` for the active graph, else a named graph's IRI or a variable.
    pub g: Option<TermPat>,
}

impl QuadPat {
    /// The columns it binds.
    pub fn vars(&self) -> impl Iterator<Item = usize> + '_ {
        self.t
            .iter()
            .chain(self.g.as_ref())
            .filter_map(TermPat::var)
    }
}

/// The logical plan.
#[derive(Clone, Debug)]
pub enum Node {
    /// A basic graph pattern (an empty one is the one empty solution).
    Bgp(Vec<QuadPat>),
    /// A property path between two ends, in a graph (`None`: the active graph).
    Path {
        /// The subject end.
        s: TermPat,
        /// The path.
        path: Arc<PathExpr>,
        /// The object end.
        o: TermPat,
        /// The graph.
        g: Option<TermPat>,
    },
    /// Inner join.
    Join(Box<Node>, Box<Node>),
    /// OPTIONAL, with its filter.
    LeftJoin(Box<Node>, Box<Node>, Option<Expr>),
    /// MINUS; the columns listed pair the two sides' solutions exactly without counting as a
    /// shared variable (a correlated EXISTS's copies of the outer values, `rewrite/`).
    Minus(Box<Node>, Box<Node>, Vec<usize>),
    /// FILTER.
    Filter(Expr, Box<Node>),
    /// UNION of its branches (a chain `{A} UNION {B} UNION {C}` is one node, so a query of
    /// thousands of branches is not thousands of levels deep).
    Union(Vec<Node>),
    /// DISTINCT (and REDUCED, which may drop duplicates: it drops them all).
    Distinct(Box<Node>),
    /// ORDER BY: expressions, descending?
    OrderBy(Box<Node>, Vec<(Expr, bool)>),
    /// Projection to these columns (the others are cleared).
    Project(Box<Node>, Vec<usize>),
    /// OFFSET / LIMIT: of all the solutions, or with key columns, of each key's solutions on
    /// their own (a subquery's LIMIT inside a correlated EXISTS, once per tested solution).
    Slice(Box<Node>, usize, Option<usize>, Vec<usize>),
    /// BIND / a SELECT expression (§18.2.4.1): the column gets the expression's value; an
    /// error leaves it unbound.
    Extend(Box<Node>, usize, Expr),
    /// VALUES: these columns, and per row a term or UNDEF for each.
    Values(Vec<usize>, Vec<Vec<Option<Term>>>),
    /// GROUP BY these key columns, with aggregates into their own columns (§18.2.4.1, §18.5).
    Group(Box<Node>, Vec<usize>, Vec<(usize, Agg)>),
    /// `GRAPH name { pattern }` (§18.6): the pattern evaluated in the named graph `name`, or
    /// for a variable in each named graph of the dataset, the variable bound to it.
    Graph(TermPat, Box<Node>),
    /// One solution per named graph of the dataset, binding `col` to it; with `only`, just that
    /// graph (no solution when the dataset does not name it).
    Graphs {
        /// The column bound to the graph.
        col: Option<usize>,
        /// The one graph asked about.
        only: Option<Term>,
    },
    /// The solutions of `left` that have (`anti`: have no) a compatible solution in `right`
    /// for which `cond` holds on the merged solution: `FILTER [NOT] EXISTS` decorrelated
    /// (`rewrite/`), and OPTIONAL with `!bound` (an anti-join).
    SemiJoin {
        /// The solutions kept or dropped.
        left: Box<Node>,
        /// The pattern looked for.
        right: Box<Node>,
        /// A condition on the merged solution (the OPTIONAL's filter).
        cond: Option<Expr>,
        /// Keep the solutions without a match.
        anti: bool,
    },
    /// Each solution of `left`, with `col` set to `true` or `false`: whether it has a
    /// compatible solution in `right` (an `EXISTS` inside an expression, decorrelated).
    MarkJoin {
        /// The solutions.
        left: Box<Node>,
        /// The pattern looked for.
        right: Box<Node>,
        /// The column of the answer (`xsd:boolean`).
        col: usize,
    },
}

/// An aggregate function (§18.5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AggFunc {
    /// `COUNT`
    Count,
    /// `SUM`
    Sum,
    /// `AVG`
    Avg,
    /// `MIN`
    Min,
    /// `MAX`
    Max,
    /// `SAMPLE`
    Sample,
    /// `GROUP_CONCAT` with its separator.
    GroupConcat(String),
}

/// One aggregate of a GROUP BY.
#[derive(Clone, Debug)]
pub struct Agg {
    /// The function.
    pub func: AggFunc,
    /// Its argument; `None` for `COUNT(*)`.
    pub expr: Option<Expr>,
    /// `DISTINCT`: each distinct value (for `COUNT(DISTINCT *)`, each distinct solution) once.
    pub distinct: bool,
}

/// Variables to columns.
#[derive(Clone, Debug, Default)]
pub struct Vars {
    /// Column → name (a blank node of the query gets a name `_:label` no query can write; a
    /// column the engine adds for itself a name with a space).
    pub names: Vec<String>,
    index: HashMap<String, usize>,
}

impl Vars {
    /// The column of a name, made when new.
    pub fn col(&mut self, name: &str) -> usize {
        if let Some(&c) = self.index.get(name) {
            return c;
        }
        self.names.push(name.to_owned());
        self.index.insert(name.to_owned(), self.names.len() - 1);
        self.names.len() - 1
    }

    /// A new column of the engine's own (no variable of the query names it).
    pub fn hidden(&mut self, what: &str) -> usize {
        let name = format!("{what} {}", self.names.len());
        self.col(&name)
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// The dataset of a query (§13.2): `FROM` graphs merged into its default graph, `FROM NAMED`
/// graphs as its named graphs. Without either clause the store's own default graph and all
/// of its named graphs; with only one kind, the other is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dataset {
    /// The graphs merged into the default graph (IRIs).
    pub default: Vec<String>,
    /// The named graphs (IRIs).
    pub named: Vec<String>,
    /// Every named graph of the store, whatever `named` says: an update's `WITH` without
    /// `USING` sets the default graph only (Update §3.1.3).
    pub all_named: bool,
}

/// A position of a CONSTRUCT template.
#[derive(Clone, Debug)]
pub enum TemplateSlot {
    /// A variable's column.
    Var(usize),
    /// A constant.
    Term(Term),
    /// A blank node: a fresh one per solution.
    Blank(String),
}

/// What a query returns.
#[derive(Clone, Debug)]
pub enum Form {
    /// Solutions over these variables (names, columns).
    Select(Vec<(String, usize)>),
    /// Whether there is a solution.
    Ask,
    /// A graph from a template.
    Construct(Vec<[TemplateSlot; 3]>),
    /// A graph describing the resources these columns hold (their concise bounded
    /// descriptions).
    Describe(Vec<usize>),
}

impl Node {
    /// Its child nodes (not the patterns of `EXISTS` in its expressions).
    pub fn children(&self) -> Vec<&Node> {
        match self {
            Node::Bgp(_) | Node::Path { .. } | Node::Values(..) | Node::Graphs { .. } => vec![],
            Node::Join(a, b) | Node::LeftJoin(a, b, _) | Node::Minus(a, b, _) => vec![a, b],
            Node::SemiJoin { left, right, .. } | Node::MarkJoin { left, right, .. } => {
                vec![left, right]
            }
            Node::Union(bs) => bs.iter().collect(),
            Node::Filter(_, i)
            | Node::Distinct(i)
            | Node::OrderBy(i, _)
            | Node::Project(i, _)
            | Node::Slice(i, ..)
            | Node::Extend(i, ..)
            | Node::Group(i, ..)
            | Node::Graph(_, i) => vec![i],
        }
    }

    /// Its own expressions (not its children's): filters, BIND, OPTIONAL's and semi-joins'
    /// conditions, ORDER BY keys and aggregate arguments.
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            Node::Filter(e, _) | Node::Extend(_, _, e) => vec![e],
            Node::LeftJoin(_, _, e) | Node::SemiJoin { cond: e, .. } => e.iter().collect(),
            Node::OrderBy(_, keys) => keys.iter().map(|(e, _)| e).collect(),
            Node::Group(_, _, aggs) => aggs.iter().filter_map(|(_, a)| a.expr.as_ref()).collect(),
            Node::Bgp(_)
            | Node::Path { .. }
            | Node::Values(..)
            | Node::Graphs { .. }
            | Node::Join(..)
            | Node::Minus(..)
            | Node::MarkJoin { .. }
            | Node::Union(_)
            | Node::Distinct(_)
            | Node::Project(..)
            | Node::Slice(..)
            | Node::Graph(..) => vec![],
        }
    }
}

impl Expr {
    /// Calls `f` on this expression and every subexpression (not inside `EXISTS` patterns).
    pub fn visit(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Var(_) | Expr::Const(_) | Expr::Bound(_) | Expr::Exists(_) => {}
            Expr::Or(a, b)
            | Expr::And(a, b)
            | Expr::Eq(a, b)
            | Expr::SameTerm(a, b)
            | Expr::Cmp(a, b, _)
            | Expr::Arith(a, b, _) => {
                a.visit(f);
                b.visit(f);
            }
            Expr::Not(a) | Expr::Neg(a) | Expr::Plus(a) | Expr::Regex(a, _) => a.visit(f),
            Expr::In(a, l) => {
                a.visit(f);
                l.iter().for_each(|x| x.visit(f));
            }
            Expr::If(a, b, c) => {
                a.visit(f);
                b.visit(f);
                c.visit(f);
            }
            Expr::Coalesce(l) | Expr::Call(_, l) => l.iter().for_each(|x| x.visit(f)),
        }
    }

    /// The one column this expression reads, when its value is a function of that column's
    /// id alone: one variable, and nothing whose value changes from call to call (a
    /// [volatile](crate::functions::Function::volatile) function: `RAND`, `NOW`, `BNODE`, …) or
    /// reads more than the row (`EXISTS`).
    pub fn of_one_value(&self) -> Option<usize> {
        let mut fixed = true;
        self.visit(&mut |x| {
            fixed &= match x {
                Expr::Exists(_) => false,
                Expr::Call(f, _) => !f.is_volatile(),
                _ => true,
            }
        });
        let vars = vars_of(self);
        match (fixed, vars.len()) {
            (true, 1) => vars.first().copied(),
            _ => None,
        }
    }

    /// Rewrites this expression bottom-up: `f` gets each subexpression after its operands
    /// were rewritten (not the patterns of `EXISTS`).
    pub fn rewrite(self, f: &mut impl FnMut(Expr) -> Expr) -> Expr {
        let mut bx = |e: Box<Expr>| Box::new(e.rewrite(f));
        let out = match self {
            e @ (Expr::Var(_) | Expr::Const(_) | Expr::Bound(_) | Expr::Exists(_)) => e,
            Expr::Or(a, b) => Expr::Or(bx(a), bx(b)),
            Expr::And(a, b) => Expr::And(bx(a), bx(b)),
            Expr::Eq(a, b) => Expr::Eq(bx(a), bx(b)),
            Expr::SameTerm(a, b) => Expr::SameTerm(bx(a), bx(b)),
            Expr::Cmp(a, b, op) => Expr::Cmp(bx(a), bx(b), op),
            Expr::Arith(a, b, op) => Expr::Arith(bx(a), bx(b), op),
            Expr::Not(a) => Expr::Not(bx(a)),
            Expr::Neg(a) => Expr::Neg(bx(a)),
            Expr::Plus(a) => Expr::Plus(bx(a)),
            Expr::Regex(a, r) => Expr::Regex(bx(a), r),
            Expr::In(a, l) => {
                let a = bx(a);
                Expr::In(a, l.into_iter().map(|x| x.rewrite(f)).collect())
            }
            Expr::If(a, b, c) => {
                let (a, b) = (bx(a), bx(b));
                Expr::If(a, b, bx(c))
            }
            Expr::Coalesce(l) => Expr::Coalesce(l.into_iter().map(|x| x.rewrite(f)).collect()),
            Expr::Call(func, l) => Expr::Call(func, l.into_iter().map(|x| x.rewrite(f)).collect()),
        };
        f(out)
    }
}

/// The variables a query's own projection lists (the outermost `Project`).
pub fn outer_projection(n: &Node) -> Option<Vec<usize>> {
    match n {
        Node::Project(_, cols) => Some(cols.clone()),
        Node::Distinct(i) | Node::Slice(i, ..) | Node::OrderBy(i, _) => outer_projection(i),
        _ => None,
    }
}
