//! The analyses every later pass needs: the columns a node mentions, binds in every solution
//! ([`certain`]) or may bind ([`maybe`]), the columns an expression reads, and what a pattern
//! reads of an outer one (correlation).

use super::*;

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

pub(super) fn term_pat_var(t: &TermPat, out: &mut BTreeSet<usize>) {
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
pub(super) fn own_columns(n: &Node, out: &mut BTreeSet<usize>) {
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

pub(super) fn optional_reads(n: &Node, out: &mut BTreeSet<usize>) {
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
