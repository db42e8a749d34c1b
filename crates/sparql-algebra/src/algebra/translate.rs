//! The translation of `spargebra`'s algebra into ours: patterns, expressions (calls resolved
//! in the query's [`Registry`]), aggregates and paths, within the nesting and size bounds.

use super::*;

pub(super) fn unsupported(what: &str) -> QueryError {
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
///
/// # Errors
/// A literal the store does not hold (one with a base direction): not supported.
pub fn literal_term(l: &oxrdf::Literal) -> Result<Term, QueryError> {
    Term::from_oxrdf_literal(l).map_err(|e| QueryError::Unsupported(e.to_string()))
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
            TermPattern::Literal(l) => TermPat::Term(literal_term(l)?),
            TermPattern::Variable(v) => TermPat::Var(self.vars.col(v.as_str())),
            TermPattern::BlankNode(b) => TermPat::Var(self.vars.col(&format!("_:{}", b.as_str()))),
            _ => return Err(unsupported("triple terms (RDF 1.2)")),
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
                match crate::expr::balanced(compiled, |a, c| Expr::And(Box::new(a), Box::new(c))) {
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
                // An aggregate nested in another's argument reaches it as the column the
                // inner one computes in this same group: refused (aggregates do not nest).
                let computed: BTreeSet<usize> = (aggregates.iter())
                    .map(|(v, _)| self.vars.col(v.as_str()))
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
                    if (agg.expr.as_ref()).is_some_and(|e| !vars_of(e).is_disjoint(&computed)) {
                        return Err(QueryError::Invalid(
                            "an aggregate inside an aggregate's argument: aggregates do not nest"
                                .into(),
                        ));
                    }
                    aggs.push((self.vars.col(v.as_str()), agg));
                }
                Node::Group(b(i), keys, aggs)
            }
            GraphPattern::Service { .. } => return Err(unsupported("SERVICE (federation)")),
            // LATERAL, when a crate of the build turns on spargebra's `sep-0006` (Oxigraph
            // does, in the tests that compare with it).
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
        Ok(crate::expr::balanced(operands, join).expect("a chain has operands"))
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
            Expression::Literal(l) => Expr::Const(literal_term(l)?),
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
                    // A built-in of the language nearflow does not implement (SPARQL 1.2's
                    // TRIPLE, LANGDIR, …) is refused: answering its calls as errors would
                    // answer the query wrongly.
                    None if !matches!(f, Function::Custom(_)) => {
                        return Err(QueryError::Unsupported(format!(
                            "the built-in function {name}"
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

pub(super) fn constant_regex(args: &[Expr]) -> Result<Option<regex::Regex>, QueryError> {
    let text_of = |e: &Expr| match e {
        Expr::Const(Term::Literal {
            value,
            datatype,
            lang: None,
        }) if datatype == nearflow_store::term::XSD_STRING => Some(value.clone()),
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
pub(super) fn ground_term(t: &GroundTerm) -> Result<Term, QueryError> {
    Ok(match t {
        GroundTerm::NamedNode(n) => Term::Iri(n.as_str().to_owned()),
        GroundTerm::Literal(l) => literal_term(l)?,
        _ => return Err(unsupported("triple terms (RDF 1.2)")),
    })
}

/// The operands of a chain of `&&`, left to right.
pub(super) fn split_and<'e>(e: &'e Expression, out: &mut Vec<&'e Expression>) {
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
