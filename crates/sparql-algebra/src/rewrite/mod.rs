//! The rewrite passes over the logical algebra: each takes a plan and returns one with the same
//! answers on every store, so they run once per query, before any store is seen. In order
//! ([`optimize`]):
//!
//! 1. [`graphs`]: a `GRAPH` block's name goes into its quad patterns where that is exact (every
//!    part of the block reads the graph, and nothing in it mentions the name's variable);
//!    otherwise the block stays, and the physical planner evaluates it per named graph.
//! 2. [`extract_exists`]: `FILTER EXISTS` and `FILTER NOT EXISTS` conjuncts become semi- and
//!    anti-joins; an `EXISTS` elsewhere in an expression becomes a mark join that sets a column
//!    to `true` or `false`, which the expression then reads. A correlated `EXISTS` (its
//!    pattern's filters read a variable only the tested solution binds) gets the outer values
//!    joined into its pattern first (`correlate`).
//! 3. [`anti_optional`]: `OPTIONAL { … ?x … } FILTER(!bound(?x))`, `?x` bound in every solution
//!    of the optional part and in none of the left, is an anti-join.
//! 4. [`fold_constants`]: expressions without variables are evaluated once (not `NOW()`,
//!    `RAND()`, `UUID()`, `STRUUID()` or `BNODE()`, whose values are per run or per solution); a
//!    filter that is then always true goes, one always false leaves no solution.
//! 5. [`push_filters`]: filter conjuncts move below joins, unions, OPTIONALs' left sides,
//!    BINDs, DISTINCT and ORDER BY, to the side whose solutions bind every variable they read.
//! 6. [`merge_bgps`]: joined basic graph patterns become one (the physical planner orders its
//!    joins from statistics), a pattern joined with a UNION is joined into each branch.
//! 7. [`fix_constants`]: `FILTER(?v = <iri>)` (any constant whose `=` is term equality, and
//!    any constant under `sameTerm`) puts the constant into the patterns in place of `?v`.
//!
//! Join order, join algorithms and parallelism are chosen later, from the store's statistics
//! (`physical/`).
//!
//! Each pass is its own file, with tests of its plan shape (input algebra → output algebra);
//! the helpers they share (walking a node's children, conjuncts) are here.

mod anti_optional;
mod exists;
mod fix_constants;
mod fold;
mod graphs;
mod merge_bgps;
mod push_filters;

pub use anti_optional::anti_optional;
pub use exists::extract_exists;
pub use fix_constants::{eq_is_same_term, fix_constants};
pub use fold::{fold, fold_constants};
pub use graphs::graphs;
pub use merge_bgps::merge_bgps;
pub use push_filters::push_filters;

use std::collections::BTreeSet;

use crate::algebra::{
    certain, correlation, has_exists, limited_vars, maybe, mentioned, unless_bound_reads, vars_of,
    visible, Node, QuadPat, TermPat, Vars,
};
use crate::error::QueryError;
use crate::expr::{EvalCx, Expr};
use crate::minted::Minted;
use nearflow_store::term::{Term, TermRef, XSD_STRING};

/// Every pass, in order.
pub fn optimize(node: Node, vars: &mut Vars) -> Result<Node, QueryError> {
    let n = graphs(node, None);
    let n = extract_exists(n, vars)?;
    let n = anti_optional(n);
    let n = fold_constants(n);
    let n = push_filters(n);
    let n = merge_bgps(n);
    Ok(fix_constants(n))
}

/// Applies `f` to every child node (not to the patterns of `EXISTS` in expressions),
/// rebuilding the node; each call one level deeper on the stack ([`crate::deeper`]).
fn map_children(n: Node, f: &mut impl FnMut(Node) -> Node) -> Node {
    let mut bx = |x: Box<Node>| Box::new(crate::deeper(|| f(*x)));
    match n {
        leaf @ (Node::Bgp(_) | Node::Path { .. } | Node::Values(..) | Node::Graphs { .. }) => leaf,
        Node::Join(a, b) => {
            let a = bx(a);
            Node::Join(a, bx(b))
        }
        Node::LeftJoin(a, b, e) => {
            let a = bx(a);
            Node::LeftJoin(a, bx(b), e)
        }
        Node::Minus(a, b, pairs) => {
            let a = bx(a);
            Node::Minus(a, bx(b), pairs)
        }
        Node::SemiJoin {
            left,
            right,
            cond,
            anti,
        } => {
            let left = bx(left);
            Node::SemiJoin {
                left,
                right: bx(right),
                cond,
                anti,
            }
        }
        Node::MarkJoin { left, right, col } => {
            let left = bx(left);
            Node::MarkJoin {
                left,
                right: bx(right),
                col,
            }
        }
        Node::Filter(e, i) => Node::Filter(e, bx(i)),
        Node::Union(bs) => Node::Union(bs.into_iter().map(|b| crate::deeper(|| f(b))).collect()),
        Node::Distinct(i) => Node::Distinct(bx(i)),
        Node::OrderBy(i, k) => Node::OrderBy(bx(i), k),
        Node::Project(i, c) => Node::Project(bx(i), c),
        Node::Slice(i, a, b, per) => Node::Slice(bx(i), a, b, per),
        Node::Extend(i, c, e) => Node::Extend(bx(i), c, e),
        Node::Group(i, k, a) => Node::Group(bx(i), k, a),
        Node::Graph(g, i) => Node::Graph(g, bx(i)),
    }
}

/// Applies `f` to every expression a node holds itself (not its children's).
fn map_exprs(n: Node, f: &mut impl FnMut(Expr) -> Expr) -> Node {
    match n {
        Node::Filter(e, i) => Node::Filter(f(e), i),
        Node::Extend(i, c, e) => Node::Extend(i, c, f(e)),
        Node::LeftJoin(a, b, e) => Node::LeftJoin(a, b, e.map(&mut *f)),
        Node::SemiJoin {
            left,
            right,
            cond,
            anti,
        } => Node::SemiJoin {
            left,
            right,
            cond: cond.map(&mut *f),
            anti,
        },
        Node::OrderBy(i, keys) => {
            Node::OrderBy(i, keys.into_iter().map(|(e, d)| (f(e), d)).collect())
        }
        Node::Group(i, keys, aggs) => Node::Group(
            i,
            keys,
            aggs.into_iter()
                .map(|(c, mut a)| {
                    a.expr = a.expr.map(&mut *f);
                    (c, a)
                })
                .collect(),
        ),
        other => other,
    }
}

/// Rewrites the patterns of every `EXISTS` in `e` with `f`.
fn map_exists_patterns(e: Expr, f: &mut impl FnMut(Node) -> Node) -> Expr {
    e.rewrite(&mut |x| match x {
        Expr::Exists(p) => Expr::Exists(Box::new(f(*p))),
        other => other,
    })
}

fn try_map_children(
    n: Node,
    f: &mut impl FnMut(Node) -> Result<Node, QueryError>,
) -> Result<Node, QueryError> {
    let mut err = None;
    let out = map_children(n, &mut |c| match f(c) {
        Ok(x) => x,
        Err(e) => {
            err.get_or_insert(e);
            Node::Bgp(Vec::new())
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

fn split_conjuncts(e: Expr, out: &mut Vec<Expr>) {
    let mut todo = vec![e];
    while let Some(x) = todo.pop() {
        match x {
            Expr::And(a, b) => {
                todo.push(*b);
                todo.push(*a);
            }
            other => out.push(other),
        }
    }
}

/// The conjuncts joined by `&&` as a balanced tree; `None` when there are none.
pub fn and_all(es: Vec<Expr>) -> Option<Expr> {
    crate::expr::balanced(es, |a, b| Expr::And(Box::new(a), Box::new(b)))
}

fn filtered(cs: Vec<Expr>, n: Node) -> Node {
    match and_all(cs) {
        Some(e) => Node::Filter(e, Box::new(n)),
        None => n,
    }
}

/// Helpers of the passes' tests: a query's algebra as translated, one pass run on it, and the
/// result as `--explain` prints it, so that each test reads input algebra → output algebra.
#[cfg(test)]
mod shape {
    pub(super) use super::*;

    pub(super) fn var(c: usize) -> TermPat {
        TermPat::Var(c)
    }

    pub(super) fn iri(s: &str) -> Term {
        Term::Iri(s.to_owned())
    }

    /// `?s <p> ?o` in the active graph.
    pub(super) fn pat(s: usize, p: &str, o: usize) -> QuadPat {
        QuadPat {
            t: [var(s), TermPat::Term(iri(p)), var(o)],
            g: None,
        }
    }

    /// The algebra of `query` as translated, before any pass, and its variables.
    pub(super) fn translated(query: &str) -> (Node, Vars) {
        let q = crate::Query::parse(query, &Default::default()).expect("a valid query");
        let mut vars = Vars::default();
        for n in &q.names {
            vars.col(n);
        }
        (q.translated, vars)
    }

    /// `n` as `--explain` prints it, each line trimmed at its end.
    pub(super) fn text(n: &Node, vars: &Vars) -> String {
        let mut s = String::new();
        crate::show::node(n, &vars.names, 0, &mut s);
        s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
    }

    /// Runs `pass` over the algebra of `query` and checks the result against `want` (the
    /// indentation of `want` as written in the test is removed first).
    #[track_caller]
    pub(super) fn check(query: &str, pass: impl FnOnce(Node, &mut Vars) -> Node, want: &str) {
        let (n, mut vars) = translated(query);
        let before = text(&n, &vars);
        let got = text(&pass(n, &mut vars), &vars);
        let lines: Vec<&str> = want.lines().filter(|l| !l.trim().is_empty()).collect();
        let indent = lines
            .iter()
            .map(|l| l.len() - l.trim_start().len())
            .min()
            .unwrap_or(0);
        let want = lines
            .iter()
            .map(|l| l[indent..].trim_end())
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            got, want,
            "\nthe pass over:\n{before}\ngave:\n{got}\nnot:\n{want}"
        );
    }
}
