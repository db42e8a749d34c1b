//! From `spargebra`'s algebra to ours: variables become row columns, constants become ids
//! (or "absent": a constant the store does not hold matches nothing), expressions are compiled
//! ([`Expr`]). What the engine cannot evaluate is refused here with "not supported: …".

use std::collections::HashMap;

use std::collections::HashSet;

use spargebra::algebra::{
    AggregateExpression, AggregateFunction, Expression, Function, GraphPattern, OrderExpression,
};
use spargebra::term::GroundTerm;
use spargebra::term::{NamedNodePattern, TermPattern, TriplePattern};

use super::expr::{compile_regex, ArithOp, CmpOp, Expr, Func};
use super::functions::Cast;
use super::path::{End, PathExpr};
use super::QueryError;
use nearflow_rdf::store::Store;
use nearflow_rdf::term::{Id, Term, TermRef, XSD_STRING};

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
    /// A property path between two ends.
    Path(End, std::sync::Arc<PathExpr>, End),
    /// VALUES: these columns, and per row a term or UNDEF for each.
    Values(Vec<usize>, Vec<Vec<Option<Term>>>),
    /// GROUP BY these key columns, with aggregates into their own columns (§18.2.4.1, §18.5).
    Group(Box<Node>, Vec<usize>, Vec<(usize, Agg)>),
    /// `FILTER EXISTS { pattern }` (or `NOT EXISTS` when the flag is set) over the first node,
    /// decorrelated into a semi-join (anti-join): exact when the pattern's expressions read no
    /// variable of the outer solutions that the pattern does not bind itself ([`decorrelates`]).
    Exists(Box<Node>, Box<Node>, bool),
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
    /// The query's base IRI (for `IRI()`), when it has one.
    pub base: Option<String>,
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
            base: None,
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

    fn path_end(&mut self, t: &TermPattern) -> Result<End, QueryError> {
        Ok(match t {
            TermPattern::NamedNode(n) => End::Term(Term::Iri(n.as_str().to_owned())),
            TermPattern::Literal(l) => End::Term(literal_term(l)),
            TermPattern::Variable(v) => End::Var(self.vars.col(v.as_str())),
            TermPattern::BlankNode(b) => End::Var(self.vars.col(&format!("_:{}", b.as_str()))),
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
                let mut node = self.pattern(inner)?;
                // `[NOT] EXISTS` conjuncts become semi- and anti-joins; the rest filter.
                let mut conjuncts = Vec::new();
                split_and(expr, &mut conjuncts);
                let mut rest = Vec::new();
                for c in conjuncts {
                    let (pattern, negated) = match c {
                        Expression::Exists(p) => (p, false),
                        Expression::Not(x) => match x.as_ref() {
                            Expression::Exists(p) => (p, true),
                            _ => {
                                rest.push(c);
                                continue;
                            }
                        },
                        _ => {
                            rest.push(c);
                            continue;
                        }
                    };
                    if !decorrelates(pattern, inner) {
                        return Err(unsupported(
                            "EXISTS whose filters read a variable of the outer solution that its own pattern does not bind",
                        ));
                    }
                    let p = self.pattern(pattern)?;
                    node = Node::Exists(b(node), b(p), negated);
                }
                // The other conjuncts, compiled one by one and joined as a balanced tree (a
                // chain of 10k FILTERs stays shallow).
                let compiled = rest
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
            } => Node::Slice(b(self.pattern(inner)?), *start, *length),
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
                let s = self.path_end(subject)?;
                let o = self.path_end(object)?;
                Node::Path(s, std::sync::Arc::new(path), o)
            }
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
            Expression::Exists(_) => {
                return Err(unsupported(
                    "EXISTS inside an expression (FILTER EXISTS and FILTER NOT EXISTS, as conjuncts of a FILTER, are evaluated)",
                ))
            }
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
                    Function::Replace => Func::Replace,
                    Function::Year => Func::Year,
                    Function::Month => Func::Month,
                    Function::Day => Func::Day,
                    Function::Hours => Func::Hours,
                    Function::Minutes => Func::Minutes,
                    Function::Seconds => Func::Seconds,
                    Function::Timezone => Func::Timezone,
                    Function::Tz => Func::Tz,
                    Function::Now => Func::Now,
                    Function::Md5 => Func::Md5,
                    Function::Sha1 => Func::Sha1,
                    Function::Sha256 => Func::Sha256,
                    Function::Sha384 => Func::Sha384,
                    Function::Sha512 => Func::Sha512,
                    Function::Iri => Func::Iri,
                    Function::BNode => Func::BNode,
                    Function::Uuid => Func::Uuid,
                    Function::StrUuid => Func::StrUuid,
                    Function::Rand => Func::Rand,
                    Function::EncodeForUri => Func::EncodeForUri,
                    Function::Custom(iri) => match Cast::of_iri(iri.as_str()) {
                        Some(c) if args.len() == 1 => Func::Cast(c),
                        Some(_) => {
                            return Err(QueryError::Invalid(format!(
                                "the cast {iri} takes one argument, not {}",
                                args.len()
                            )))
                        }
                        None => {
                            return Err(QueryError::Unsupported(format!("the function {iri}")))
                        }
                    },
                    #[allow(unreachable_patterns)]
                    other => return Err(QueryError::Unsupported(format!("the function {other}"))),
                };
                let mut args: Vec<Expr> = args
                    .iter()
                    .map(|x| self.expr(x))
                    .collect::<Result<_, _>>()?;
                // IRI() resolves a relative reference against the query's base.
                if func == Func::Iri {
                    if let Some(b) = &self.base {
                        args.push(Expr::Const(Term::Literal {
                            value: b.clone(),
                            datatype: XSD_STRING.to_owned(),
                            lang: None,
                        }));
                    }
                }
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

/// Whether `FILTER [NOT] EXISTS { pattern }` over the solutions of `outer` may be evaluated as
/// a semi-join (anti-join) of `outer` with `pattern` evaluated on its own. §18.6 substitutes
/// each outer solution into the pattern; that equals joining on shared variables except where
/// an expression inside the pattern (a FILTER, BIND, OPTIONAL's condition, ORDER BY, an
/// aggregate or a nested EXISTS) reads a variable the outer solution binds and the pattern
/// does not bind in every solution itself: substituted, the expression would see the outer
/// value; evaluated alone, an unbound variable.
pub fn decorrelates(pattern: &GraphPattern, outer: &GraphPattern) -> bool {
    let mut outer_vars = HashSet::new();
    pattern_vars(outer, &mut outer_vars);
    let mut read = HashSet::new();
    expr_read_vars(pattern, &mut read);
    let certain = certain_vars(pattern);
    read.iter()
        .all(|v| !outer_vars.contains(v) || certain.contains(v))
}

fn term_var(t: &TermPattern, out: &mut HashSet<String>) {
    if let TermPattern::Variable(v) = t {
        out.insert(v.as_str().to_owned());
    }
}

fn triple_vars(t: &TriplePattern, out: &mut HashSet<String>) {
    term_var(&t.subject, out);
    if let NamedNodePattern::Variable(v) = &t.predicate {
        out.insert(v.as_str().to_owned());
    }
    term_var(&t.object, out);
}

/// Every variable a pattern mentions, in patterns and expressions.
fn pattern_vars(p: &GraphPattern, out: &mut HashSet<String>) {
    match p {
        GraphPattern::Bgp { patterns } => patterns.iter().for_each(|t| triple_vars(t, out)),
        GraphPattern::Path {
            subject, object, ..
        } => {
            term_var(subject, out);
            term_var(object, out);
        }
        GraphPattern::Join { left, right }
        | GraphPattern::Union { left, right }
        | GraphPattern::Minus { left, right } => {
            pattern_vars(left, out);
            pattern_vars(right, out);
        }
        GraphPattern::LeftJoin {
            left,
            right,
            expression,
        } => {
            pattern_vars(left, out);
            pattern_vars(right, out);
            if let Some(e) = expression {
                expr_vars(e, out);
            }
        }
        GraphPattern::Filter { expr, inner } => {
            expr_vars(expr, out);
            pattern_vars(inner, out);
        }
        GraphPattern::Graph { name, inner } => {
            if let NamedNodePattern::Variable(v) = name {
                out.insert(v.as_str().to_owned());
            }
            pattern_vars(inner, out);
        }
        GraphPattern::Extend {
            inner,
            variable,
            expression,
        } => {
            out.insert(variable.as_str().to_owned());
            expr_vars(expression, out);
            pattern_vars(inner, out);
        }
        GraphPattern::Values { variables, .. } => {
            out.extend(variables.iter().map(|v| v.as_str().to_owned()));
        }
        GraphPattern::OrderBy { inner, expression } => {
            for o in expression {
                match o {
                    OrderExpression::Asc(e) | OrderExpression::Desc(e) => expr_vars(e, out),
                }
            }
            pattern_vars(inner, out);
        }
        GraphPattern::Project { inner, variables } => {
            out.extend(variables.iter().map(|v| v.as_str().to_owned()));
            pattern_vars(inner, out);
        }
        GraphPattern::Distinct { inner }
        | GraphPattern::Reduced { inner }
        | GraphPattern::Slice { inner, .. }
        | GraphPattern::Service { inner, .. } => pattern_vars(inner, out),
        GraphPattern::Group {
            inner,
            variables,
            aggregates,
        } => {
            out.extend(variables.iter().map(|v| v.as_str().to_owned()));
            for (v, a) in aggregates {
                out.insert(v.as_str().to_owned());
                if let AggregateExpression::FunctionCall { expr, .. } = a {
                    expr_vars(expr, out);
                }
            }
            pattern_vars(inner, out);
        }
        #[allow(unreachable_patterns)]
        _ => {}
    }
}

/// Every variable an expression reads (a nested EXISTS reads all of its pattern's).
fn expr_vars(e: &Expression, out: &mut HashSet<String>) {
    match e {
        Expression::Variable(v) | Expression::Bound(v) => {
            out.insert(v.as_str().to_owned());
        }
        Expression::NamedNode(_) | Expression::Literal(_) => {}
        Expression::Or(a, c)
        | Expression::And(a, c)
        | Expression::Equal(a, c)
        | Expression::SameTerm(a, c)
        | Expression::Greater(a, c)
        | Expression::GreaterOrEqual(a, c)
        | Expression::Less(a, c)
        | Expression::LessOrEqual(a, c)
        | Expression::Add(a, c)
        | Expression::Subtract(a, c)
        | Expression::Multiply(a, c)
        | Expression::Divide(a, c) => {
            expr_vars(a, out);
            expr_vars(c, out);
        }
        Expression::UnaryPlus(a) | Expression::UnaryMinus(a) | Expression::Not(a) => {
            expr_vars(a, out)
        }
        Expression::In(a, list) => {
            expr_vars(a, out);
            list.iter().for_each(|x| expr_vars(x, out));
        }
        Expression::If(a, c, d) => {
            expr_vars(a, out);
            expr_vars(c, out);
            expr_vars(d, out);
        }
        Expression::Coalesce(list) | Expression::FunctionCall(_, list) => {
            list.iter().for_each(|x| expr_vars(x, out))
        }
        Expression::Exists(p) => pattern_vars(p, out),
        #[allow(unreachable_patterns)]
        _ => {}
    }
}

/// The variables that expressions inside a pattern read (and BIND targets).
fn expr_read_vars(p: &GraphPattern, out: &mut HashSet<String>) {
    match p {
        GraphPattern::Bgp { .. } | GraphPattern::Path { .. } | GraphPattern::Values { .. } => {}
        GraphPattern::Join { left, right }
        | GraphPattern::Union { left, right }
        | GraphPattern::Minus { left, right } => {
            expr_read_vars(left, out);
            expr_read_vars(right, out);
        }
        GraphPattern::LeftJoin {
            left,
            right,
            expression,
        } => {
            expr_read_vars(left, out);
            expr_read_vars(right, out);
            if let Some(e) = expression {
                expr_vars(e, out);
            }
        }
        GraphPattern::Filter { expr, inner } => {
            expr_vars(expr, out);
            expr_read_vars(inner, out);
        }
        GraphPattern::Extend {
            inner,
            variable,
            expression,
        } => {
            out.insert(variable.as_str().to_owned());
            expr_vars(expression, out);
            expr_read_vars(inner, out);
        }
        GraphPattern::OrderBy { inner, expression } => {
            for o in expression {
                match o {
                    OrderExpression::Asc(e) | OrderExpression::Desc(e) => expr_vars(e, out),
                }
            }
            expr_read_vars(inner, out);
        }
        GraphPattern::Group {
            inner, aggregates, ..
        } => {
            for (_, a) in aggregates {
                if let AggregateExpression::FunctionCall { expr, .. } = a {
                    expr_vars(expr, out);
                }
            }
            expr_read_vars(inner, out);
        }
        GraphPattern::Graph { inner, .. }
        | GraphPattern::Project { inner, .. }
        | GraphPattern::Distinct { inner }
        | GraphPattern::Reduced { inner }
        | GraphPattern::Slice { inner, .. }
        | GraphPattern::Service { inner, .. } => expr_read_vars(inner, out),
        #[allow(unreachable_patterns)]
        _ => pattern_vars(p, out),
    }
}

/// The variables bound in every solution of a pattern.
fn certain_vars(p: &GraphPattern) -> HashSet<String> {
    let mut out = HashSet::new();
    match p {
        GraphPattern::Bgp { patterns } => patterns.iter().for_each(|t| triple_vars(t, &mut out)),
        GraphPattern::Path {
            subject, object, ..
        } => {
            term_var(subject, &mut out);
            term_var(object, &mut out);
        }
        GraphPattern::Join { left, right } => {
            out = certain_vars(left);
            out.extend(certain_vars(right));
        }
        GraphPattern::LeftJoin { left, .. } | GraphPattern::Minus { left, .. } => {
            out = certain_vars(left)
        }
        GraphPattern::Union { left, right } => {
            let r = certain_vars(right);
            out = certain_vars(left)
                .into_iter()
                .filter(|v| r.contains(v))
                .collect();
        }
        GraphPattern::Graph { name, inner } => {
            out = certain_vars(inner);
            if let NamedNodePattern::Variable(v) = name {
                out.insert(v.as_str().to_owned());
            }
        }
        GraphPattern::Values {
            variables,
            bindings,
        } => {
            for (i, v) in variables.iter().enumerate() {
                if bindings
                    .iter()
                    .all(|r| r.get(i).is_some_and(Option::is_some))
                {
                    out.insert(v.as_str().to_owned());
                }
            }
        }
        GraphPattern::Project { inner, variables } => {
            let c = certain_vars(inner);
            out = variables
                .iter()
                .map(|v| v.as_str().to_owned())
                .filter(|v| c.contains(v))
                .collect();
        }
        GraphPattern::Filter { inner, .. }
        | GraphPattern::Extend { inner, .. }
        | GraphPattern::OrderBy { inner, .. }
        | GraphPattern::Distinct { inner }
        | GraphPattern::Reduced { inner }
        | GraphPattern::Slice { inner, .. } => out = certain_vars(inner),
        _ => {}
    }
    out
}
