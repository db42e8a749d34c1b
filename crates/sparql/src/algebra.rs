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

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use spargebra::algebra::{
    AggregateExpression, AggregateFunction, Expression, Function, GraphPattern, OrderExpression,
};
use spargebra::term::{GroundTerm, NamedNodePattern, TermPattern, TriplePattern};

use super::expr::{ArithOp, CmpOp, Expr};
use super::functions::strings::compile_regex;
use super::functions::Registry;
use super::path::PathExpr;
use crate::error::QueryError;
use nearflow_rdf::term::{Term, XSD_STRING};

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

fn unsupported(what: &str) -> QueryError {
    QueryError::Unsupported(what.to_owned())
}

/// How deep graph patterns and expressions may nest (each of them). Translation, planning,
/// building and evaluation all recurse over the trees, evaluation on a worker thread of 2 MiB
/// stack; without it, stack overflows (an abort) from 10k BINDs or OPTIONALs, 2.3k UNION
/// branches or a 3.5k-term `+`. UNION chains and `&&`/`||` chains do not count (they are made
/// one node, or a balanced tree: both are associative); other nesting past the bound is
/// refused with an error saying so.
pub const MAX_DEPTH: usize = 512;

/// How many triple patterns a query may have: planning orders a basic graph pattern's patterns
/// in time quadratic in their number, and each becomes an operator in the flow (20,000 took
/// 20 s to plan and 2.4 GB to run). SP²Bench's largest query has 11.
pub const MAX_PATTERNS: usize = 4096;

/// Translates `spargebra`'s algebra.
pub struct Translator {
    /// The columns.
    pub vars: Vars,
    /// Current nesting depth of patterns and expressions (see [`MAX_DEPTH`]).
    depth: usize,
    /// Triple patterns translated so far (see [`MAX_PATTERNS`]).
    patterns: usize,
    /// The query's base IRI (for `IRI()`), when it has one.
    pub base: Option<String>,
    /// The functions its calls are resolved in.
    pub functions: Arc<Registry>,
    /// Functions called that nearflow does not know (their IRIs, each once): every call is an
    /// expression error; a front end says so, since a misspelt name answers nothing.
    pub unknown_functions: Vec<String>,
}

/// An `oxrdf` literal as our term (tags lower case, as the loader stores them).
pub fn literal_term(l: &oxrdf::Literal) -> Term {
    Term::from_oxrdf_literal(l)
}

impl Translator {
    /// A translator whose calls are resolved in `functions`.
    pub fn new(functions: &Arc<Registry>) -> Self {
        Translator {
            vars: Vars::default(),
            depth: 0,
            patterns: 0,
            base: None,
            functions: functions.clone(),
            unknown_functions: Vec::new(),
        }
    }

    /// Enters one more level of nesting; an error past [`MAX_DEPTH`].
    fn deeper(&mut self, what: &str) -> Result<(), QueryError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(QueryError::Unsupported(format!(
                "{what} nested more than {MAX_DEPTH} levels deep"
            )));
        }
        Ok(())
    }

    /// Translates a graph pattern.
    pub fn pattern(&mut self, p: &GraphPattern) -> Result<Node, QueryError> {
        self.deeper("graph patterns")?;
        let out = crate::deeper(|| self.pattern_at(p));
        self.depth -= 1;
        out
    }

    /// Compiles an expression.
    pub fn expr(&mut self, e: &Expression) -> Result<Expr, QueryError> {
        self.deeper("expressions")?;
        let out = crate::deeper(|| self.expr_at(e));
        self.depth -= 1;
        out
    }

    /// A term pattern of a triple (or a template, a path end).
    pub fn term_pat(&mut self, t: &TermPattern) -> Result<TermPat, QueryError> {
        Ok(match t {
            TermPattern::NamedNode(n) => TermPat::Term(Term::Iri(n.as_str().to_owned())),
            TermPattern::Literal(l) => TermPat::Term(literal_term(l)),
            TermPattern::Variable(v) => TermPat::Var(self.vars.col(v.as_str())),
            TermPattern::BlankNode(b) => TermPat::Var(self.vars.col(&format!("_:{}", b.as_str()))),
            #[allow(unreachable_patterns)]
            _ => return Err(unsupported("quoted triples (RDF 1.2)")),
        })
    }

    /// A predicate or graph name position.
    pub fn named_pat(&mut self, p: &NamedNodePattern) -> TermPat {
        match p {
            NamedNodePattern::NamedNode(n) => TermPat::Term(Term::Iri(n.as_str().to_owned())),
            NamedNodePattern::Variable(v) => TermPat::Var(self.vars.col(v.as_str())),
        }
    }

    fn triple(&mut self, t: &TriplePattern) -> Result<QuadPat, QueryError> {
        self.patterns += 1;
        if self.patterns > MAX_PATTERNS {
            return Err(QueryError::Unsupported(format!(
                "a query of more than {MAX_PATTERNS} triple patterns"
            )));
        }
        Ok(QuadPat {
            t: [
                self.term_pat(&t.subject)?,
                self.named_pat(&t.predicate),
                self.term_pat(&t.object)?,
            ],
            g: None,
        })
    }

    fn pattern_at(&mut self, p: &GraphPattern) -> Result<Node, QueryError> {
        let b = |x: Node| Box::new(x);
        Ok(match p {
            GraphPattern::Bgp { patterns } => Node::Bgp(
                patterns
                    .iter()
                    .map(|t| self.triple(t))
                    .collect::<Result<_, _>>()?,
            ),
            GraphPattern::Join { left, right } => {
                Node::Join(b(self.pattern(left)?), b(self.pattern(right)?))
            }
            GraphPattern::LeftJoin {
                left,
                right,
                expression,
            } => {
                let l = self.pattern(left)?;
                let r = self.pattern(right)?;
                let e = expression.as_ref().map(|e| self.expr(e)).transpose()?;
                Node::LeftJoin(b(l), b(r), e)
            }
            GraphPattern::Minus { left, right } => {
                Node::Minus(b(self.pattern(left)?), b(self.pattern(right)?), Vec::new())
            }
            GraphPattern::Filter { expr, inner } => {
                let node = self.pattern(inner)?;
                // The conjuncts, compiled one by one and joined as a balanced tree (a chain of
                // 10k FILTERs stays shallow).
                let mut conjuncts = Vec::new();
                split_and(expr, &mut conjuncts);
                let compiled = conjuncts
                    .into_iter()
                    .map(|c| self.expr(c))
                    .collect::<Result<Vec<_>, _>>()?;
                match super::expr::balanced(compiled, |a, c| Expr::And(Box::new(a), Box::new(c))) {
                    Some(e) => Node::Filter(e, b(node)),
                    None => node,
                }
            }
            GraphPattern::Union { .. } => {
                // The chain's branches, gathered without recursion, left to right.
                let mut branches = Vec::new();
                let mut todo = vec![p];
                while let Some(q) = todo.pop() {
                    match q {
                        GraphPattern::Union { left, right } => {
                            todo.push(right);
                            todo.push(left);
                        }
                        other => branches.push(self.pattern(other)?),
                    }
                }
                Node::Union(branches)
            }
            GraphPattern::Distinct { inner } | GraphPattern::Reduced { inner } => {
                Node::Distinct(b(self.pattern(inner)?))
            }
            GraphPattern::OrderBy { inner, expression } => {
                let i = self.pattern(inner)?;
                let keys = expression
                    .iter()
                    .map(|o| match o {
                        OrderExpression::Asc(e) => Ok((self.expr(e)?, false)),
                        OrderExpression::Desc(e) => Ok((self.expr(e)?, true)),
                    })
                    .collect::<Result<_, QueryError>>()?;
                Node::OrderBy(b(i), keys)
            }
            GraphPattern::Project { inner, variables } => {
                let i = self.pattern(inner)?;
                let cols = variables
                    .iter()
                    .map(|v| self.vars.col(v.as_str()))
                    .collect();
                Node::Project(b(i), cols)
            }
            GraphPattern::Slice {
                inner,
                start,
                length,
            } => Node::Slice(b(self.pattern(inner)?), *start, *length, Vec::new()),
            GraphPattern::Path {
                subject,
                path,
                object,
            } => {
                let path = PathExpr::of(path);
                if path.depth() > MAX_DEPTH {
                    return Err(QueryError::Unsupported(format!(
                        "a property path nested more than {MAX_DEPTH} levels deep"
                    )));
                }
                Node::Path {
                    s: self.term_pat(subject)?,
                    path: Arc::new(path),
                    o: self.term_pat(object)?,
                    g: None,
                }
            }
            GraphPattern::Graph { name, inner } => {
                let name = self.named_pat(name);
                Node::Graph(name, b(self.pattern(inner)?))
            }
            GraphPattern::Extend {
                inner,
                variable,
                expression,
            } => {
                let i = self.pattern(inner)?;
                let e = self.expr(expression)?;
                Node::Extend(b(i), self.vars.col(variable.as_str()), e)
            }
            GraphPattern::Values {
                variables,
                bindings,
            } => {
                let cols: Vec<usize> = variables
                    .iter()
                    .map(|v| self.vars.col(v.as_str()))
                    .collect();
                let rows = bindings
                    .iter()
                    .map(|row| {
                        row.iter()
                            .map(|t| t.as_ref().map(ground_term).transpose())
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Node::Values(cols, rows)
            }
            GraphPattern::Group {
                inner,
                variables,
                aggregates,
            } => {
                let i = self.pattern(inner)?;
                let keys = variables
                    .iter()
                    .map(|v| self.vars.col(v.as_str()))
                    .collect();
                let mut aggs = Vec::new();
                for (v, a) in aggregates {
                    let agg = match a {
                        AggregateExpression::CountSolutions { distinct } => Agg {
                            func: AggFunc::Count,
                            expr: None,
                            distinct: *distinct,
                        },
                        AggregateExpression::FunctionCall {
                            name,
                            expr,
                            distinct,
                        } => Agg {
                            func: match name {
                                AggregateFunction::Count => AggFunc::Count,
                                AggregateFunction::Sum => AggFunc::Sum,
                                AggregateFunction::Avg => AggFunc::Avg,
                                AggregateFunction::Min => AggFunc::Min,
                                AggregateFunction::Max => AggFunc::Max,
                                AggregateFunction::Sample => AggFunc::Sample,
                                AggregateFunction::GroupConcat { separator } => {
                                    AggFunc::GroupConcat(
                                        separator.clone().unwrap_or_else(|| " ".to_owned()),
                                    )
                                }
                                AggregateFunction::Custom(iri) => {
                                    return Err(QueryError::Unsupported(format!(
                                        "the aggregate {iri}"
                                    )))
                                }
                            },
                            expr: Some(self.expr(expr)?),
                            distinct: *distinct,
                        },
                    };
                    aggs.push((self.vars.col(v.as_str()), agg));
                }
                Node::Group(b(i), keys, aggs)
            }
            GraphPattern::Service { .. } => return Err(unsupported("SERVICE (federation)")),
            #[allow(unreachable_patterns)]
            _ => return Err(unsupported("this graph pattern")),
        })
    }

    /// The operands of a chain of one associative operator (`&&` or `||`), gathered without
    /// recursion, compiled, and made a balanced tree.
    fn chain(
        &mut self,
        e: &Expression,
        split: fn(&Expression) -> Option<(&Expression, &Expression)>,
        join: fn(Expr, Expr) -> Expr,
    ) -> Result<Expr, QueryError> {
        let mut operands = Vec::new();
        let mut todo = vec![e];
        while let Some(x) = todo.pop() {
            match split(x) {
                Some((a, c)) => {
                    todo.push(c);
                    todo.push(a);
                }
                None => operands.push(self.expr(x)?),
            }
        }
        Ok(super::expr::balanced(operands, join).expect("a chain has operands"))
    }

    fn expr_at(&mut self, e: &Expression) -> Result<Expr, QueryError> {
        match e {
            Expression::Or(..) => {
                return self.chain(
                    e,
                    |x| match x {
                        Expression::Or(a, c) => Some((a, c)),
                        _ => None,
                    },
                    |a, c| Expr::Or(Box::new(a), Box::new(c)),
                )
            }
            Expression::And(..) => {
                return self.chain(
                    e,
                    |x| match x {
                        Expression::And(a, c) => Some((a, c)),
                        _ => None,
                    },
                    |a, c| Expr::And(Box::new(a), Box::new(c)),
                )
            }
            _ => {}
        }
        let mut bx =
            |e: &Expression| -> Result<Box<Expr>, QueryError> { Ok(Box::new(self.expr(e)?)) };
        Ok(match e {
            Expression::NamedNode(n) => Expr::Const(Term::Iri(n.as_str().to_owned())),
            Expression::Literal(l) => Expr::Const(literal_term(l)),
            Expression::Variable(v) => Expr::Var(self.vars.col(v.as_str())),
            Expression::Or(..) | Expression::And(..) => unreachable!("chains, above"),
            Expression::Equal(a, c) => Expr::Eq(bx(a)?, bx(c)?),
            Expression::SameTerm(a, c) => Expr::SameTerm(bx(a)?, bx(c)?),
            Expression::Greater(a, c) => Expr::Cmp(bx(a)?, bx(c)?, CmpOp::Gt),
            Expression::GreaterOrEqual(a, c) => Expr::Cmp(bx(a)?, bx(c)?, CmpOp::Ge),
            Expression::Less(a, c) => Expr::Cmp(bx(a)?, bx(c)?, CmpOp::Lt),
            Expression::LessOrEqual(a, c) => Expr::Cmp(bx(a)?, bx(c)?, CmpOp::Le),
            Expression::Add(a, c) => Expr::Arith(bx(a)?, bx(c)?, ArithOp::Add),
            Expression::Subtract(a, c) => Expr::Arith(bx(a)?, bx(c)?, ArithOp::Sub),
            Expression::Multiply(a, c) => Expr::Arith(bx(a)?, bx(c)?, ArithOp::Mul),
            Expression::Divide(a, c) => Expr::Arith(bx(a)?, bx(c)?, ArithOp::Div),
            Expression::UnaryPlus(a) => Expr::Plus(bx(a)?),
            Expression::UnaryMinus(a) => Expr::Neg(bx(a)?),
            Expression::Not(a) => Expr::Not(bx(a)?),
            Expression::In(a, list) => {
                let a = bx(a)?;
                Expr::In(
                    a,
                    list.iter()
                        .map(|x| self.expr(x))
                        .collect::<Result<_, _>>()?,
                )
            }
            Expression::Bound(v) => Expr::Bound(self.vars.col(v.as_str())),
            Expression::If(c, t, f) => Expr::If(bx(c)?, bx(t)?, bx(f)?),
            Expression::Coalesce(list) => Expr::Coalesce(
                list.iter()
                    .map(|x| self.expr(x))
                    .collect::<Result<_, _>>()?,
            ),
            Expression::Exists(p) => Expr::Exists(Box::new(self.pattern(p)?)),
            Expression::FunctionCall(f, args) => {
                let name = match f {
                    Function::Custom(iri) => iri.as_str().to_owned(),
                    keyword => keyword.to_string(),
                };
                let func = match self.functions.get(&name) {
                    Some(func) if func.arity().contains(&args.len()) => func.clone(),
                    Some(func) => {
                        let arity = func.arity();
                        return Err(QueryError::Invalid(format!(
                            "the function {name} takes {}, not {}",
                            match (arity.start(), arity.end()) {
                                (a, b) if a == b => format!("{a} arguments"),
                                (a, &usize::MAX) => format!("at least {a} arguments"),
                                (a, b) => format!("{a} to {b} arguments"),
                            },
                            args.len()
                        )));
                    }
                    // A function nearflow does not know is an error where it is called
                    // (§17.6), not a refusal of the whole query.
                    None => {
                        if !self.unknown_functions.contains(&name) {
                            self.unknown_functions.push(name.clone());
                        }
                        Arc::new(crate::functions::Function::unknown(&name))
                    }
                };
                let mut args: Vec<Expr> = args
                    .iter()
                    .map(|x| self.expr(x))
                    .collect::<Result<_, _>>()?;
                // IRI() resolves a relative reference against the query's base.
                if func.name() == "IRI" {
                    if let Some(b) = &self.base {
                        args.push(Expr::Const(Term::Literal {
                            value: b.clone(),
                            datatype: XSD_STRING.to_owned(),
                            lang: None,
                        }));
                    }
                }
                // REGEX with a constant pattern (and flags): compiled once, a bad one refused now.
                if func.name() == "REGEX" {
                    if let Some(re) = constant_regex(&args)? {
                        let text = args.into_iter().next().expect("regex has a text argument");
                        return Ok(Expr::Regex(Box::new(text), Box::new(re)));
                    }
                }
                Expr::Call(func, args)
            }
        })
    }
}

fn constant_regex(args: &[Expr]) -> Result<Option<regex::Regex>, QueryError> {
    let text_of = |e: &Expr| match e {
        Expr::Const(Term::Literal {
            value,
            datatype,
            lang: None,
        }) if datatype == nearflow_rdf::term::XSD_STRING => Some(value.clone()),
        _ => None,
    };
    let Some(p) = args.get(1).and_then(text_of) else {
        return Ok(None);
    };
    let flags = match args.get(2) {
        None => String::new(),
        Some(e) => match text_of(e) {
            Some(f) => f,
            None => return Ok(None),
        },
    };
    compile_regex(&p, &flags).map(Some).map_err(|e| {
        let e = e.split_whitespace().collect::<Vec<_>>().join(" ");
        QueryError::Invalid(format!("bad regular expression {p:?}: {e}"))
    })
}

/// A VALUES term.
fn ground_term(t: &GroundTerm) -> Result<Term, QueryError> {
    Ok(match t {
        GroundTerm::NamedNode(n) => Term::Iri(n.as_str().to_owned()),
        GroundTerm::Literal(l) => literal_term(l),
        #[allow(unreachable_patterns)]
        _ => return Err(unsupported("quoted triples (RDF 1.2)")),
    })
}

/// The operands of a chain of `&&`, left to right.
fn split_and<'e>(e: &'e Expression, out: &mut Vec<&'e Expression>) {
    let mut todo = vec![e];
    while let Some(x) = todo.pop() {
        match x {
            Expression::And(a, c) => {
                todo.push(c);
                todo.push(a);
            }
            other => out.push(other),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Analyses.

/// The columns an expression reads (an `EXISTS` reads every column its pattern mentions).
pub fn expr_vars(e: &Expr, out: &mut BTreeSet<usize>) {
    match e {
        Expr::Var(c) | Expr::Bound(c) => {
            out.insert(*c);
        }
        Expr::Const(_) => {}
        Expr::Or(a, b)
        | Expr::And(a, b)
        | Expr::Eq(a, b)
        | Expr::SameTerm(a, b)
        | Expr::Cmp(a, b, _)
        | Expr::Arith(a, b, _) => {
            expr_vars(a, out);
            expr_vars(b, out);
        }
        Expr::Not(a) | Expr::Neg(a) | Expr::Plus(a) | Expr::Regex(a, _) => expr_vars(a, out),
        Expr::In(a, l) => {
            expr_vars(a, out);
            l.iter().for_each(|x| expr_vars(x, out));
        }
        Expr::If(a, b, c) => {
            expr_vars(a, out);
            expr_vars(b, out);
            expr_vars(c, out);
        }
        Expr::Coalesce(l) | Expr::Call(_, l) => l.iter().for_each(|x| expr_vars(x, out)),
        Expr::Exists(p) => mentioned(p, out),
    }
}

/// [`expr_vars`] as a set.
pub fn vars_of(e: &Expr) -> BTreeSet<usize> {
    let mut s = BTreeSet::new();
    expr_vars(e, &mut s);
    s
}

/// Whether an expression holds an `EXISTS`.
pub fn has_exists(e: &Expr) -> bool {
    let mut found = false;
    e.visit(&mut |x| found |= matches!(x, Expr::Exists(_)));
    found
}

fn term_pat_var(t: &TermPat, out: &mut BTreeSet<usize>) {
    if let Some(c) = t.var() {
        out.insert(c);
    }
}

/// Every column a node mentions, in patterns, expressions (and the patterns of their
/// `EXISTS`), projections and groups.
pub fn mentioned(n: &Node, out: &mut BTreeSet<usize>) {
    own_columns(n, out);
    n.exprs().into_iter().for_each(|e| expr_vars(e, out));
    n.children().into_iter().for_each(|c| mentioned(c, out));
}

/// The columns a node names itself, outside its expressions and its children: its patterns'
/// variables, the columns it binds (BIND, aggregate and mark targets, VALUES, graphs), keeps
/// (a projection) or groups by.
fn own_columns(n: &Node, out: &mut BTreeSet<usize>) {
    match n {
        Node::Bgp(pats) => pats.iter().for_each(|p| out.extend(p.vars())),
        Node::Path { s, o, g, .. } => {
            for t in [Some(s), Some(o), g.as_ref()].into_iter().flatten() {
                term_pat_var(t, out);
            }
        }
        Node::MarkJoin { col, .. } | Node::Extend(_, col, _) => {
            out.insert(*col);
        }
        Node::Project(_, cols) | Node::Values(cols, _) => out.extend(cols.iter().copied()),
        Node::Group(_, keys, aggs) => {
            out.extend(keys.iter().copied());
            out.extend(aggs.iter().map(|(c, _)| *c));
        }
        Node::Graph(name, _) => term_pat_var(name, out),
        Node::Graphs { col, .. } => out.extend(col.iter().copied()),
        Node::Join(..)
        | Node::LeftJoin(..)
        | Node::Minus(..)
        | Node::SemiJoin { .. }
        | Node::Filter(..)
        | Node::Union(_)
        | Node::Distinct(_)
        | Node::Slice(..)
        | Node::OrderBy(..) => {}
    }
}

/// The columns a node's solutions may bind (its in-scope variables, §18.2.1).
pub fn maybe(n: &Node) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    match n {
        Node::Bgp(_) | Node::Path { .. } | Node::Values(..) | Node::Graphs { .. } => {
            mentioned(n, &mut out)
        }
        Node::Join(a, b) | Node::LeftJoin(a, b, _) => {
            out = maybe(a);
            out.extend(maybe(b));
        }
        Node::Minus(a, ..) | Node::SemiJoin { left: a, .. } => out = maybe(a),
        Node::MarkJoin { left, col, .. } => {
            out = maybe(left);
            out.insert(*col);
        }
        Node::Filter(_, i) | Node::Distinct(i) | Node::Slice(i, ..) | Node::OrderBy(i, _) => {
            out = maybe(i)
        }
        Node::Union(bs) => bs.iter().for_each(|b| out.extend(maybe(b))),
        Node::Project(i, cols) => {
            let inner = maybe(i);
            out = cols.iter().copied().filter(|c| inner.contains(c)).collect();
        }
        Node::Extend(i, c, _) => {
            out = maybe(i);
            out.insert(*c);
        }
        Node::Group(_, keys, aggs) => {
            out.extend(keys.iter().copied());
            out.extend(aggs.iter().map(|(c, _)| *c));
        }
        Node::Graph(name, i) => {
            out = maybe(i);
            term_pat_var(name, &mut out);
        }
    }
    out
}

/// The columns bound in every solution of a node.
pub fn certain(n: &Node) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    match n {
        Node::Bgp(_) | Node::Path { .. } => mentioned(n, &mut out),
        Node::Graphs { col, .. } => out.extend(col.iter().copied()),
        Node::Values(cols, rows) => {
            for (i, c) in cols.iter().enumerate() {
                if rows.iter().all(|r| r.get(i).is_some_and(Option::is_some)) {
                    out.insert(*c);
                }
            }
        }
        Node::Join(a, b) => {
            out = certain(a);
            out.extend(certain(b));
        }
        Node::LeftJoin(a, ..) | Node::Minus(a, ..) | Node::SemiJoin { left: a, .. } => {
            out = certain(a)
        }
        Node::MarkJoin { left, col, .. } => {
            out = certain(left);
            out.insert(*col);
        }
        Node::Union(bs) => {
            let mut it = bs.iter();
            if let Some(first) = it.next() {
                out = certain(first);
                for b in it {
                    let c = certain(b);
                    out.retain(|x| c.contains(x));
                }
            }
        }
        Node::Project(i, cols) => {
            let c = certain(i);
            out = cols.iter().copied().filter(|x| c.contains(x)).collect();
        }
        Node::Filter(_, i) | Node::Distinct(i) | Node::Slice(i, ..) | Node::OrderBy(i, _) => {
            out = certain(i)
        }
        // An expression may fail and leave its column unbound.
        Node::Extend(i, c, e) => {
            out = certain(i);
            if never_fails(e, &out) {
                out.insert(*c);
            }
        }
        // An aggregate may be an error (unbound); the keys are bound unless a key is unbound
        // in some input solution.
        Node::Group(i, keys, _) => {
            let c = certain(i);
            out = keys.iter().copied().filter(|k| c.contains(k)).collect();
        }
        Node::Graph(name, i) => {
            out = certain(i);
            term_pat_var(name, &mut out);
        }
    }
    out
}

/// Whether an expression has a value in every solution whose bound columns include `bound`:
/// a constant, such a column, or a COALESCE with one of them.
pub fn never_fails(e: &Expr, bound: &BTreeSet<usize>) -> bool {
    match e {
        Expr::Const(_) => true,
        Expr::Var(v) => bound.contains(v),
        Expr::Coalesce(l) => l.iter().any(|x| never_fails(x, bound)),
        _ => false,
    }
}

/// The columns that expressions inside a pattern read (and BIND targets), at any depth.
pub fn expr_read_vars(n: &Node, out: &mut BTreeSet<usize>) {
    match n {
        // A subquery's variables that it does not project are its own (§18.2.1's scope):
        // only the projected ones are the outer query's.
        Node::Project(i, cols) => {
            let mut inner = BTreeSet::new();
            expr_read_vars(i, &mut inner);
            out.extend(inner.into_iter().filter(|c| cols.contains(c)));
        }
        _ => {
            if let Node::Extend(_, c, _) = n {
                out.insert(*c);
            }
            n.exprs().into_iter().for_each(|e| expr_vars(e, out));
            n.children()
                .into_iter()
                .for_each(|c| expr_read_vars(c, out));
        }
    }
}

/// Whether `[NOT] EXISTS { pattern }` over the solutions of `outer` may be evaluated as a
/// semi-join (anti-join, mark join) of `outer` with `pattern` evaluated on its own. §18.6
/// substitutes each outer solution into the pattern; that equals joining on shared variables
/// except where
/// - an expression inside the pattern (a FILTER, BIND, OPTIONAL's condition, ORDER BY, an
///   aggregate or a nested EXISTS), or the right side of an OPTIONAL, reads a variable the outer
///   solution may bind and the pattern does not bind in every solution itself: substituted, it
///   would see the outer value; evaluated alone, an unbound variable (or another value);
/// - a LIMIT/OFFSET, a GROUP or a MINUS inside sees a variable the outer solution may bind,
///   bound by the pattern or not: substituted, the LIMIT counts, the GROUP groups and the
///   MINUS compares the rows of that value only.
///
/// A subquery's variables that it does not project are its own (§18.2.1): no outer value is
/// substituted for them.
pub fn decorrelates(pattern: &Node, outer: &Node) -> bool {
    correlation(pattern, outer).is_empty()
}

/// The columns that make `EXISTS { pattern }` over `outer` correlated ([`decorrelates`]).
pub fn correlation(pattern: &Node, outer: &Node) -> BTreeSet<usize> {
    let outer_vars = maybe(outer);
    let mut read = BTreeSet::new();
    unless_bound_reads(pattern, &mut read);
    let certain = certain(pattern);
    let mut v: BTreeSet<usize> = read
        .into_iter()
        .filter(|v| outer_vars.contains(v) && !certain.contains(v))
        .collect();
    let mut limited = BTreeSet::new();
    limited_vars(pattern, &mut limited);
    v.extend(limited.into_iter().filter(|c| outer_vars.contains(c)));
    v
}

/// The columns a pattern reads where a substituted value would matter unless the pattern binds
/// them in every solution: in its expressions, and on the right of an OPTIONAL (a constant that
/// does not match leaves the solution without the optional part; a variable that matches
/// another value makes it incompatible).
pub fn unless_bound_reads(pattern: &Node, out: &mut BTreeSet<usize>) {
    expr_read_vars(pattern, out);
    optional_reads(pattern, out);
}

fn optional_reads(n: &Node, out: &mut BTreeSet<usize>) {
    match n {
        Node::LeftJoin(a, b, _) => {
            optional_reads(a, out);
            visible(b, out);
        }
        Node::Project(i, cols) => {
            let mut inner = BTreeSet::new();
            optional_reads(i, &mut inner);
            out.extend(inner.into_iter().filter(|c| cols.contains(c)));
        }
        _ => n
            .children()
            .into_iter()
            .for_each(|c| optional_reads(c, out)),
    }
}

/// The columns visible under a LIMIT/OFFSET, a GROUP or a MINUS inside a pattern, where a
/// substituted value always matters.
pub fn limited_vars(n: &Node, out: &mut BTreeSet<usize>) {
    match n {
        Node::Slice(..) | Node::Group(..) | Node::Minus(..) => visible(n, out),
        Node::Project(i, cols) => {
            let mut inner = BTreeSet::new();
            limited_vars(i, &mut inner);
            out.extend(inner.into_iter().filter(|c| cols.contains(c)));
        }
        _ => n.children().into_iter().for_each(|c| limited_vars(c, out)),
    }
}

/// The columns a node mentions that are in scope outside it: all it mentions, except a
/// subquery's variables it does not project.
pub fn visible(n: &Node, out: &mut BTreeSet<usize>) {
    own_columns(n, out);
    if !matches!(n, Node::Project(..)) {
        n.exprs().into_iter().for_each(|e| expr_vars(e, out));
        n.children().into_iter().for_each(|c| visible(c, out));
    }
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
