//! From `spargebra`'s algebra to ours: variables become row columns, constants become ids
//! (or "absent": a constant the store does not hold matches nothing), expressions are compiled
//! ([`Expr`]). What the engine cannot evaluate is refused here with "not supported: …".

use std::collections::HashMap;

use spargebra::algebra::{Expression, Function, GraphPattern, OrderExpression};
use spargebra::term::{NamedNodePattern, TermPattern, TriplePattern};

use super::expr::{compile_regex, ArithOp, CmpOp, Expr, Func};
use super::QueryError;
use nearflow_rdf::store::Store;
use nearflow_rdf::term::{Id, Term, TermRef};

/// A position of a triple pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// A variable's column.
    Var(usize),
    /// A constant: its id, or `None` when the store does not hold it (nothing matches).
    Const(Option<Id>),
    /// A variable fixed to a constant by an equality filter: matched as the constant, and the
    /// column still receives it.
    Fixed(usize, Id),
}

impl Slot {
    /// The column it binds, if any.
    pub fn var(self) -> Option<usize> {
        match self {
            Slot::Var(c) | Slot::Fixed(c, _) => Some(c),
            Slot::Const(_) => None,
        }
    }
}

/// A triple pattern over columns.
pub type Pat = [Slot; 3];

/// The logical plan.
#[derive(Clone, Debug)]
pub enum Node {
    /// A basic graph pattern (an empty one is the one empty solution).
    Bgp(Vec<Pat>),
    /// Inner join.
    Join(Box<Node>, Box<Node>),
    /// OPTIONAL, with its filter.
    LeftJoin(Box<Node>, Box<Node>, Option<Expr>),
    /// MINUS.
    Minus(Box<Node>, Box<Node>),
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
    /// OFFSET / LIMIT.
    Slice(Box<Node>, usize, Option<usize>),
    /// BIND / a SELECT expression (§18.2.4.1): the column gets the expression's value; an
    /// error leaves it unbound.
    Extend(Box<Node>, usize, Expr),
}

/// Variables to columns.
#[derive(Debug, Default)]
pub struct Vars {
    /// Column → name (a blank node of the query gets a name no query can write).
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

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

fn unsupported(what: &str) -> QueryError {
    QueryError::Unsupported(what.to_owned())
}

/// How deep graph patterns and expressions may nest (each of them). Translation, planning,
/// building and evaluation all recurse over the trees, evaluation on a worker thread of 2 MiB
/// stack; issue 40 found stack overflows (an abort) from 10k BINDs or OPTIONALs, 2.3k UNION
/// branches or a 3.5k-term `+`. UNION chains and `&&`/`||` chains do not count (they are made
/// one node, or a balanced tree: both are associative); other nesting past the bound is
/// refused with an error saying so.
pub const MAX_DEPTH: usize = 512;

/// Translates a pattern.
pub struct Translator<'s> {
    /// The store (for constants' ids).
    pub store: &'s Store,
    /// The columns.
    pub vars: Vars,
    /// Current nesting depth of patterns and expressions (see [`MAX_DEPTH`]).
    depth: usize,
}

/// An `oxrdf` literal as our term (tags lower case, as the loader stores them).
pub fn literal_term(l: &oxrdf::Literal) -> Term {
    Term::from_oxrdf_literal(l)
}

impl<'s> Translator<'s> {
    /// A translator over `store`.
    pub fn new(store: &'s Store) -> Self {
        Translator {
            store,
            vars: Vars::default(),
            depth: 0,
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
        let out = self.pattern_at(p);
        self.depth -= 1;
        out
    }

    /// Compiles an expression.
    pub fn expr(&mut self, e: &Expression) -> Result<Expr, QueryError> {
        self.deeper("expressions")?;
        let out = self.expr_at(e);
        self.depth -= 1;
        out
    }

    fn id_of(&self, t: TermRef<'_>) -> Option<Id> {
        self.store.id_of(t)
    }

    fn term_slot(&mut self, t: &TermPattern) -> Result<Slot, QueryError> {
        Ok(match t {
            TermPattern::NamedNode(n) => Slot::Const(self.id_of(TermRef::Iri(n.as_str()))),
            TermPattern::Literal(l) => Slot::Const(self.id_of(literal_term(l).as_ref())),
            TermPattern::Variable(v) => Slot::Var(self.vars.col(v.as_str())),
            TermPattern::BlankNode(b) => Slot::Var(self.vars.col(&format!("_:{}", b.as_str()))),
            #[allow(unreachable_patterns)]
            _ => return Err(unsupported("quoted triples (RDF 1.2)")),
        })
    }

    fn pred_slot(&mut self, p: &NamedNodePattern) -> Slot {
        match p {
            NamedNodePattern::NamedNode(n) => Slot::Const(self.id_of(TermRef::Iri(n.as_str()))),
            NamedNodePattern::Variable(v) => Slot::Var(self.vars.col(v.as_str())),
        }
    }

    fn triple(&mut self, t: &TriplePattern) -> Result<Pat, QueryError> {
        Ok([
            self.term_slot(&t.subject)?,
            self.pred_slot(&t.predicate),
            self.term_slot(&t.object)?,
        ])
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
                Node::Minus(b(self.pattern(left)?), b(self.pattern(right)?))
            }
            GraphPattern::Filter { expr, inner } => {
                let i = self.pattern(inner)?;
                Node::Filter(self.expr(expr)?, b(i))
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
            } => Node::Slice(b(self.pattern(inner)?), *start, *length),
            GraphPattern::Path { .. } => return Err(unsupported("property paths")),
            GraphPattern::Graph { .. } => return Err(unsupported("GRAPH (named graphs)")),
            GraphPattern::Extend {
                inner,
                variable,
                expression,
            } => {
                // GROUP BY's aggregates arrive as Extends over a Group: refused there.
                let i = self.pattern(inner)?;
                let e = self.expr(expression)?;
                Node::Extend(b(i), self.vars.col(variable.as_str()), e)
            }
            GraphPattern::Values { .. } => return Err(unsupported("VALUES")),
            GraphPattern::Group { .. } => return Err(unsupported("GROUP BY and aggregates")),
            GraphPattern::Service { .. } => return Err(unsupported("SERVICE")),
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
            Expression::Exists(_) => return Err(unsupported("EXISTS")),
            Expression::FunctionCall(f, args) => {
                let func = match f {
                    Function::Str => Func::Str,
                    Function::Lang => Func::Lang,
                    Function::LangMatches => Func::LangMatches,
                    Function::Datatype => Func::Datatype,
                    Function::IsIri => Func::IsIri,
                    Function::IsBlank => Func::IsBlank,
                    Function::IsLiteral => Func::IsLiteral,
                    Function::IsNumeric => Func::IsNumeric,
                    Function::Regex => Func::Regex,
                    Function::StrLen => Func::StrLen,
                    Function::UCase => Func::UCase,
                    Function::LCase => Func::LCase,
                    Function::Contains => Func::Contains,
                    Function::StrStarts => Func::StrStarts,
                    Function::StrEnds => Func::StrEnds,
                    Function::SubStr => Func::SubStr,
                    Function::Concat => Func::Concat,
                    Function::StrBefore => Func::StrBefore,
                    Function::StrAfter => Func::StrAfter,
                    Function::StrLang => Func::StrLang,
                    Function::StrDt => Func::StrDt,
                    Function::Abs => Func::Abs,
                    Function::Ceil => Func::Ceil,
                    Function::Floor => Func::Floor,
                    Function::Round => Func::Round,
                    other => return Err(QueryError::Unsupported(format!("the function {other}"))),
                };
                let args: Vec<Expr> = args
                    .iter()
                    .map(|x| self.expr(x))
                    .collect::<Result<_, _>>()?;
                // REGEX with a constant pattern (and flags): compiled once, a bad one refused now.
                if func == Func::Regex {
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
