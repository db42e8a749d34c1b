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
//! (`physical.rs`).

use std::collections::BTreeSet;

use super::algebra::{
    certain, correlation, has_exists, limited_vars, maybe, mentioned, unless_bound_reads, vars_of,
    visible, Node, QuadPat, TermPat, Vars,
};
use super::expr::{EvalCx, Expr, Func};
use super::minted::Minted;
use super::QueryError;
use nearflow_rdf::term::{Term, TermRef, XSD_STRING};

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

// ---------------------------------------------------------------------------------------------
// 1. GRAPH.

/// Sets the graph of every pattern that reads the active graph to `active` (when given), and
/// rewrites each `GRAPH` block: its name pushed into its patterns where exact, else kept.
pub fn graphs(n: Node, active: Option<&TermPat>) -> Node {
    let n = map_exprs(n, &mut |e| {
        map_exists_patterns(e, &mut |p| graphs(p, active))
    });
    match n {
        Node::Bgp(mut pats) => {
            if let Some(a) = active {
                for p in &mut pats {
                    p.g.get_or_insert_with(|| a.clone());
                }
            }
            Node::Bgp(pats)
        }
        Node::Path { s, path, o, g } => Node::Path {
            s,
            path,
            o,
            g: g.or_else(|| active.cloned()),
        },
        Node::Graph(TermPat::Var(g), inner) if graph_pushable(&inner, g) => {
            let name = TermPat::Var(g);
            let inner = add_to_projections(graphs(*inner, Some(&name)), g);
            debug_assert!(certain(&inner).contains(&g));
            inner
        }
        Node::Graph(TermPat::Var(g), inner) => {
            Node::Graph(TermPat::Var(g), Box::new(graphs(*inner, None)))
        }
        Node::Graph(name, inner) => {
            // A constant name: the block reads that graph, and has no solution when the
            // dataset does not name it (`Graphs` with `only`).
            let only = match &name {
                TermPat::Term(t) | TermPat::Fixed(_, t) => Some(t.clone()),
                TermPat::Var(_) => None,
            };
            let inner = graphs(*inner, Some(&name));
            Node::Join(Box::new(Node::Graphs { col: None, only }), Box::new(inner))
        }
        other => map_children(other, &mut |c| graphs(c, active)),
    }
}

/// Whether `GRAPH ?g { inner }` may be evaluated by reading `?g` as one more variable of every
/// quad pattern inside: exact when every solution of every part of the block comes from a
/// pattern that reads the graph (so joins, OPTIONALs and unions inside all pair solutions of
/// one graph), and nothing inside mentions `?g` (a subquery's own `?g`, or a filter on it, is
/// another variable inside the block: §18.6 evaluates the block first, then binds `?g`).
/// MINUS (its shared-variable test would see `?g`), GROUP (a group per graph also for a graph
/// with no solution), LIMIT (per graph), VALUES and empty patterns (no graph read) are not.
fn graph_pushable(inner: &Node, g: usize) -> bool {
    let mut m = BTreeSet::new();
    mentioned(inner, &mut m);
    !m.contains(&g) && every_part_reads_the_graph(inner)
}

fn every_part_reads_the_graph(n: &Node) -> bool {
    let exprs_ok = |e: &Expr| {
        let mut ok = true;
        e.visit(&mut |x| {
            if let Expr::Exists(p) = x {
                ok &= every_part_reads_the_graph(p);
            }
        });
        ok
    };
    match n {
        Node::Bgp(pats) => !pats.is_empty() && pats.iter().all(|p| p.g.is_none()),
        Node::Path { g, .. } => g.is_none(),
        Node::Join(a, b) | Node::LeftJoin(a, b, None) => {
            every_part_reads_the_graph(a) && every_part_reads_the_graph(b)
        }
        Node::LeftJoin(a, b, Some(e)) => {
            every_part_reads_the_graph(a) && every_part_reads_the_graph(b) && exprs_ok(e)
        }
        Node::Union(bs) => bs.iter().all(every_part_reads_the_graph),
        Node::Filter(e, i) | Node::Extend(i, _, e) => every_part_reads_the_graph(i) && exprs_ok(e),
        Node::OrderBy(i, keys) => {
            every_part_reads_the_graph(i) && keys.iter().all(|(e, _)| exprs_ok(e))
        }
        Node::Distinct(i) | Node::Project(i, _) => every_part_reads_the_graph(i),
        Node::Minus(..)
        | Node::Group(..)
        | Node::Slice(..)
        | Node::Values(..)
        | Node::Graph(..)
        | Node::Graphs { .. }
        | Node::SemiJoin { .. }
        | Node::MarkJoin { .. } => false,
    }
}

/// Keeps column `g` through every projection of a block whose patterns now bind it.
fn add_to_projections(n: Node, g: usize) -> Node {
    match n {
        Node::Project(i, mut cols) => {
            if !cols.contains(&g) {
                cols.push(g);
            }
            Node::Project(Box::new(add_to_projections(*i, g)), cols)
        }
        other => {
            let other = map_exprs(other, &mut |e| {
                map_exists_patterns(e, &mut |p| add_to_projections(p, g))
            });
            map_children(other, &mut |c| add_to_projections(c, g))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2. EXISTS.

/// `EXISTS { pattern }` over the solutions of `outer`, made a pattern that can be semi-joined
/// with `outer` on their shared variables; `outer` may gain columns. When the pattern
/// decorrelates both stay as they are.
///
/// Otherwise (a correlated EXISTS: the pattern's filters read variables `V` that only the outer
/// solution binds), §18.6 substitutes each outer solution's values into the pattern. That is
/// done with joins: each outer solution gets, for each variable of `V`, a copy column that holds
/// its value or a marker for "unbound" (a blank node no data can hold), so the copies are bound
/// in every solution; the distinct values of `V` and their copies among the outer solutions,
/// `D`, are joined into the pattern below every expression that reads `V` (`seed`) and once at
/// its top, so every solution of the pattern carries the copies of the outer values it was
/// made from. The semi-join (or mark join) then pairs each outer solution with exactly those
/// solutions, on the copies, which are bound on both sides. The outer pattern is evaluated once
/// more for `D`.
fn correlate(pattern: Node, outer: &mut Node, vars: &mut Vars) -> Result<Node, QueryError> {
    let v = correlation(&pattern, outer);
    if v.is_empty() {
        return Ok(pattern);
    }
    let copies = add_copies(outer, &v, vars);
    let cols: Vec<usize> = v.iter().copied().chain(copies.iter().copied()).collect();
    let seeding = Seeding {
        d: Node::Distinct(Box::new(Node::Project(Box::new(outer.clone()), cols))),
        v,
        copies,
    };
    let seeded = seeding.seed(pattern)?;
    Ok(Node::Join(Box::new(seeding.d), Box::new(seeded)))
}

/// Extends `outer` with a copy of each column of `v` that is bound in every solution: the
/// column's value, or a marker for "unbound" (a blank node no data can hold). Returns the
/// copies' columns.
fn add_copies(outer: &mut Node, v: &BTreeSet<usize>, vars: &mut Vars) -> Vec<usize> {
    let unbound = Expr::Const(Term::Blank("nearflow unbound".into()));
    let mut copies = Vec::new();
    for &c in v {
        let copy = vars.hidden("outer value");
        let taken = std::mem::replace(outer, Node::Bgp(Vec::new()));
        let value = Expr::Coalesce(vec![Expr::Var(c), unbound.clone()]);
        *outer = Node::Extend(Box::new(taken), copy, value);
        copies.push(copy);
    }
    copies
}

/// What [`correlate`] joins into a correlated pattern: `D` (the distinct outer values of `V`
/// and their copies), `V`, and the copies' columns.
struct Seeding {
    d: Node,
    v: BTreeSet<usize>,
    copies: Vec<usize>,
}

impl Seeding {
    /// `n`'s solutions, each with the outer values it must see.
    fn bind(&self, n: Node) -> Result<Node, QueryError> {
        Ok(Node::Join(
            Box::new(self.d.clone()),
            Box::new(self.seed(n)?),
        ))
    }

    /// The columns a subquery, a group or a slice inside keeps per outer value.
    fn outer_columns(&self) -> impl Iterator<Item = usize> + '_ {
        self.v.iter().chain(&self.copies).copied()
    }

    /// `n` with `D` joined in under every expression that reads `V` (see [`correlate`]).
    fn seed(&self, n: Node) -> Result<Node, QueryError> {
        let v = &self.v;
        if !needs(&n, v) {
            return Ok(n);
        }
        let bx = |n: Node| -> Result<Box<Node>, QueryError> { Ok(Box::new(self.seed(n)?)) };
        let bound = |n: Node| -> Result<Box<Node>, QueryError> { Ok(Box::new(self.bind(n)?)) };
        Ok(match n {
            Node::Filter(e, i) if reads_any(&e, v) => Node::Filter(e, bound(*i)?),
            Node::Filter(e, i) => Node::Filter(e, bx(*i)?),
            Node::Extend(i, c, e) if reads_any(&e, v) => Node::Extend(bound(*i)?, c, e),
            Node::Extend(i, c, e) => Node::Extend(bx(*i)?, c, e),
            Node::OrderBy(i, keys) if keys.iter().any(|(e, _)| reads_any(e, v)) => {
                Node::OrderBy(bound(*i)?, keys)
            }
            Node::OrderBy(i, keys) => Node::OrderBy(bx(*i)?, keys),
            Node::LeftJoin(a, b, cond) => {
                let a = if cond.as_ref().is_some_and(|c| reads_any(c, v)) {
                    bound(*a)?
                } else {
                    bx(*a)?
                };
                Node::LeftJoin(a, bx(*b)?, cond)
            }
            Node::Join(a, b) => Node::Join(bx(*a)?, bx(*b)?),
            Node::Union(bs) => Node::Union(
                bs.into_iter()
                    .map(|b| self.seed(b))
                    .collect::<Result<_, _>>()?,
            ),
            Node::Distinct(i) => Node::Distinct(bx(*i)?),
            Node::Graph(g, i) => Node::Graph(g, bx(*i)?),
            // A subquery sees the outer values, and passes them out (with their copies) to be
            // joined on.
            Node::Project(i, mut cols) => {
                let i = bound(*i)?;
                let extra: Vec<usize> =
                    self.outer_columns().filter(|c| !cols.contains(c)).collect();
                cols.extend(extra);
                Node::Project(i, cols)
            }
            // One group per outer value as well.
            Node::Group(i, mut keys, aggs) => {
                let i = bound(*i)?;
                let extra: Vec<usize> =
                    self.outer_columns().filter(|c| !keys.contains(c)).collect();
                keys.extend(extra);
                Node::Group(i, keys, aggs)
            }
            // OFFSET/LIMIT once per outer value: of the rows with its copies.
            Node::Slice(i, start, len, mut per) => {
                let i = bound(*i)?;
                per.extend(
                    self.copies
                        .iter()
                        .filter(|c| !per.contains(c))
                        .copied()
                        .collect::<Vec<_>>(),
                );
                Node::Slice(i, start, len, per)
            }
            Node::SemiJoin {
                left,
                right,
                cond,
                anti,
            } => Node::SemiJoin {
                left: bx(*left)?,
                right: bx(*right)?,
                cond,
                anti,
            },
            Node::MarkJoin { left, right, col } => Node::MarkJoin {
                left: bx(*left)?,
                right: bx(*right)?,
                col,
            },
            Node::Minus(a, b, pairs) if !needs(&b, v) => Node::Minus(bx(*a)?, b, pairs),
            // The right side reads the outer values: both sides carry them and their copies,
            // the right side's substituted variables are no variables of it (they are dropped),
            // and the copies pair the two sides without counting as shared.
            Node::Minus(a, b, mut pairs) => {
                let mut keep = BTreeSet::new();
                visible(&b, &mut keep);
                let right = self.bind(*b)?;
                let cols: Vec<usize> = keep
                    .into_iter()
                    .filter(|c| !v.contains(c))
                    .chain(self.copies.iter().copied())
                    .collect();
                pairs.extend(self.copies.iter().copied());
                Node::Minus(
                    bound(*a)?,
                    Box::new(Node::Project(Box::new(right), cols)),
                    pairs,
                )
            }
            leaf @ (Node::Bgp(_) | Node::Path { .. } | Node::Values(..) | Node::Graphs { .. }) => {
                Node::Join(Box::new(self.d.clone()), Box::new(leaf))
            }
        })
    }
}

/// Whether a node reads a column of `v` where substitution matters.
fn needs(n: &Node, v: &BTreeSet<usize>) -> bool {
    let mut read = BTreeSet::new();
    unless_bound_reads(n, &mut read);
    limited_vars(n, &mut read);
    !read.is_disjoint(v)
}

fn reads_any(e: &Expr, v: &BTreeSet<usize>) -> bool {
    !vars_of(e).is_disjoint(v)
}

/// Makes every `EXISTS` a join (see the module's documentation).
pub fn extract_exists(n: Node, vars: &mut Vars) -> Result<Node, QueryError> {
    let n = try_map_children(n, &mut |c| extract_exists(c, vars))?;
    Ok(match n {
        Node::Filter(e, inner) => {
            let mut inner = *inner;
            let mut conjuncts = Vec::new();
            split_conjuncts(e, &mut conjuncts);
            let mut rest = Vec::new();
            for c in conjuncts {
                let (pattern, anti) = match c {
                    Expr::Exists(p) => (p, false),
                    Expr::Not(x) if matches!(*x, Expr::Exists(_)) => match *x {
                        Expr::Exists(p) => (p, true),
                        _ => unreachable!("matched above"),
                    },
                    other => {
                        rest.push(marks(other, &mut inner, vars)?);
                        continue;
                    }
                };
                let pattern = extract_exists(*pattern, vars)?;
                let pattern = correlate(pattern, &mut inner, vars)?;
                inner = Node::SemiJoin {
                    left: Box::new(inner),
                    right: Box::new(pattern),
                    cond: None,
                    anti,
                };
            }
            match and_all(rest) {
                Some(e) => Node::Filter(e, Box::new(inner)),
                None => inner,
            }
        }
        Node::Extend(inner, col, e) if has_exists(&e) => {
            let mut inner = *inner;
            let e = marks(e, &mut inner, vars)?;
            Node::Extend(Box::new(inner), col, e)
        }
        Node::OrderBy(inner, keys) if keys.iter().any(|(e, _)| has_exists(e)) => {
            let mut inner = *inner;
            let keys = keys
                .into_iter()
                .map(|(e, d)| Ok((marks(e, &mut inner, vars)?, d)))
                .collect::<Result<_, QueryError>>()?;
            Node::OrderBy(Box::new(inner), keys)
        }
        Node::Group(inner, keys, aggs)
            if aggs
                .iter()
                .any(|(_, a)| a.expr.as_ref().is_some_and(has_exists)) =>
        {
            let mut inner = *inner;
            let aggs = aggs
                .into_iter()
                .map(|(c, mut a)| {
                    if let Some(e) = a.expr.take() {
                        a.expr = Some(marks(e, &mut inner, vars)?);
                    }
                    Ok((c, a))
                })
                .collect::<Result<_, QueryError>>()?;
            Node::Group(Box::new(inner), keys, aggs)
        }
        Node::LeftJoin(l, r, Some(e)) if has_exists(&e) => optional_exists(*l, *r, e, vars)?,
        other => other,
    })
}

/// An OPTIONAL whose filter holds an `EXISTS`. The filter reads the merged solution. When
/// every variable the pattern shares with the left side is bound by the optional side too
/// (compatible solutions agree on it), a mark computed on the optional side is the same, and
/// the OPTIONAL stays one. Otherwise the filter is evaluated on the merged solutions, and the
/// OPTIONAL is spelled out (§18.5's LeftJoin): the merged solutions that pass, and the left
/// solutions with none that passes — paired with them on copies of the left side's variables
/// that are bound in every solution (as [`correlate`] pairs), so equal left solutions, which
/// have the same matches, stand for each other and no other.
fn optional_exists(l: Node, r: Node, e: Expr, vars: &mut Vars) -> Result<Node, QueryError> {
    let left = maybe(&l);
    let right_certain = certain(&r);
    let mut local = true;
    e.visit(&mut |x| {
        if let Expr::Exists(p) = x {
            let mut m = BTreeSet::new();
            mentioned(p, &mut m);
            local &= m
                .iter()
                .all(|v| !left.contains(v) || right_certain.contains(v));
        }
    });
    if local {
        let mut r = r;
        let e = marks(e, &mut r, vars)?;
        return Ok(Node::LeftJoin(Box::new(l), Box::new(r), Some(e)));
    }
    // The left solutions with copies of their variables, and the merged solutions that pass.
    let mut l = l;
    let copies = add_copies(&mut l, &left, vars);
    let mut merged = Node::Join(Box::new(l.clone()), Box::new(r));
    let e = marks(e, &mut merged, vars)?;
    let passing = Node::Filter(e, Box::new(merged));
    let keep: Vec<usize> = copies.clone();
    let unmatched = Node::SemiJoin {
        left: Box::new(l),
        right: Box::new(Node::Project(Box::new(passing.clone()), keep)),
        cond: None,
        anti: true,
    };
    Ok(Node::Union(vec![passing, unmatched]))
}

/// Replaces every `EXISTS` in `e` by a column that a mark join over `inner` sets.
fn marks(e: Expr, inner: &mut Node, vars: &mut Vars) -> Result<Expr, QueryError> {
    if !has_exists(&e) {
        return Ok(e);
    }
    let mut err = None;
    let mut joins = Vec::new();
    let e = e.rewrite(&mut |x| match x {
        Expr::Exists(p) => {
            let col = vars.hidden("exists");
            match extract_exists(*p, vars) {
                Ok(p) => joins.push((p, col)),
                Err(e) => err = Some(e),
            }
            Expr::Var(col)
        }
        other => other,
    });
    if let Some(e) = err {
        return Err(e);
    }
    for (p, col) in joins {
        let p = correlate(p, inner, vars)?;
        let left = std::mem::replace(inner, Node::Bgp(Vec::new()));
        *inner = Node::MarkJoin {
            left: Box::new(left),
            right: Box::new(p),
            col,
        };
    }
    Ok(e)
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

// ---------------------------------------------------------------------------------------------
// 3. OPTIONAL + !bound.

/// `FILTER(!bound(?x))` over an OPTIONAL whose right side binds `?x` in every solution and
/// whose left side never does: an anti-join (the other conjuncts filter its output).
pub fn anti_optional(n: Node) -> Node {
    let n = map_children(n, &mut anti_optional);
    match n {
        Node::Filter(e, inner) if matches!(*inner, Node::LeftJoin(..)) => {
            let Node::LeftJoin(l, r, cond) = *inner else {
                unreachable!("matched above")
            };
            let mut cs = Vec::new();
            split_conjuncts(e, &mut cs);
            let lb = maybe(&l);
            let rc = certain(&r);
            let anti = cs.iter().position(|c| match c {
                Expr::Not(x) => matches!(&**x, Expr::Bound(v) if !lb.contains(v) && rc.contains(v)),
                _ => false,
            });
            let node = match anti {
                Some(i) => {
                    cs.remove(i);
                    Node::SemiJoin {
                        left: l,
                        right: r,
                        cond,
                        anti: true,
                    }
                }
                None => Node::LeftJoin(l, r, cond),
            };
            match and_all(cs) {
                Some(e) => Node::Filter(e, Box::new(node)),
                None => node,
            }
        }
        other => other,
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Constant folding.

/// Evaluates the expressions without variables.
pub fn fold_constants(n: Node) -> Node {
    let n = map_children(n, &mut fold_constants);
    let n = map_exprs(n, &mut |e| {
        let e = map_exists_patterns(e, &mut fold_constants);
        fold(e)
    });
    match n {
        Node::Filter(Expr::Const(t), inner) => {
            match crate::expr::Val::from_term(t.as_ref()).ebv() {
                Ok(true) => *inner,
                _ => Node::Values(Vec::new(), Vec::new()),
            }
        }
        other => other,
    }
}

fn deterministic(f: Func) -> bool {
    !matches!(
        f,
        Func::Now | Func::Rand | Func::Uuid | Func::StrUuid | Func::BNode
    )
}

/// Folds the constant subexpressions of `e`, bottom-up.
pub fn fold(e: Expr) -> Expr {
    let dict = nearflow_rdf::dict::Dict::new();
    let minted = Minted::above(0);
    let cx = EvalCx::over(&dict, &minted);
    e.rewrite(&mut |x| {
        let constant = match &x {
            Expr::Var(_) | Expr::Bound(_) | Expr::Exists(_) | Expr::Const(_) => false,
            Expr::Call(f, args) => deterministic(*f) && args.iter().all(is_const),
            Expr::Or(a, b)
            | Expr::And(a, b)
            | Expr::Eq(a, b)
            | Expr::SameTerm(a, b)
            | Expr::Cmp(a, b, _)
            | Expr::Arith(a, b, _) => is_const(a) && is_const(b),
            Expr::Not(a) | Expr::Neg(a) | Expr::Plus(a) | Expr::Regex(a, _) => is_const(a),
            Expr::In(a, l) => is_const(a) && l.iter().all(is_const),
            Expr::If(a, b, c) => is_const(a) && is_const(b) && is_const(c),
            Expr::Coalesce(l) => l.iter().all(is_const),
        };
        if !constant {
            return x;
        }
        match x.eval(cx, &[]) {
            Ok(v) => Expr::Const(Term::from(v.as_term())),
            // An error stays an expression: it is an error in every solution.
            Err(_) => x,
        }
    })
}

fn is_const(e: &Expr) -> bool {
    matches!(e, Expr::Const(_))
}

// ---------------------------------------------------------------------------------------------
// 5. Filter pushdown.

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
    super::expr::balanced(es, |a, b| Expr::And(Box::new(a), Box::new(b)))
}

fn filtered(cs: Vec<Expr>, n: Node) -> Node {
    match and_all(cs) {
        Some(e) => Node::Filter(e, Box::new(n)),
        None => n,
    }
}

/// Moves filter conjuncts down to where their variables are bound.
pub fn push_filters(n: Node) -> Node {
    let n = map_children(n, &mut push_filters);
    match n {
        Node::Filter(e, inner) => {
            let mut cs = Vec::new();
            split_conjuncts(e, &mut cs);
            push_into(cs, *inner)
        }
        other => other,
    }
}

/// `inner` filtered by the conjuncts `cs`, each pushed as deep as it stays exact.
fn push_into(cs: Vec<Expr>, inner: Node) -> Node {
    if cs.is_empty() {
        return inner;
    }
    // Conjuncts reading an EXISTS pattern stay put (the passes before made them joins).
    let reads = |c: &Expr| vars_of(c);
    match inner {
        Node::Filter(e, i) => {
            let mut all = cs;
            split_conjuncts(e, &mut all);
            push_into(all, *i)
        }
        Node::Join(a, b) => {
            let (ca, cb) = (certain(&a), certain(&b));
            let (mut to_a, mut to_b, mut stay) = (Vec::new(), Vec::new(), Vec::new());
            for c in cs {
                let r = reads(&c);
                if r.is_subset(&ca) {
                    to_a.push(c);
                } else if r.is_subset(&cb) {
                    to_b.push(c);
                } else {
                    stay.push(c);
                }
            }
            let j = Node::Join(Box::new(push_into(to_a, *a)), Box::new(push_into(to_b, *b)));
            filtered(stay, j)
        }
        Node::Union(bs) => Node::Union(bs.into_iter().map(|b| push_into(cs.clone(), b)).collect()),
        Node::LeftJoin(l, r, cond) => {
            let cl = certain(&l);
            let (to_l, stay): (Vec<Expr>, Vec<Expr>) =
                cs.into_iter().partition(|c| reads(c).is_subset(&cl));
            filtered(stay, Node::LeftJoin(Box::new(push_into(to_l, *l)), r, cond))
        }
        Node::SemiJoin {
            left,
            right,
            cond,
            anti,
        } => {
            let cl = certain(&left);
            let (to_l, stay): (Vec<Expr>, Vec<Expr>) =
                cs.into_iter().partition(|c| reads(c).is_subset(&cl));
            filtered(
                stay,
                Node::SemiJoin {
                    left: Box::new(push_into(to_l, *left)),
                    right,
                    cond,
                    anti,
                },
            )
        }
        Node::Minus(l, r, pairs) => {
            let cl = certain(&l);
            let (to_l, stay): (Vec<Expr>, Vec<Expr>) =
                cs.into_iter().partition(|c| reads(c).is_subset(&cl));
            filtered(stay, Node::Minus(Box::new(push_into(to_l, *l)), r, pairs))
        }
        Node::MarkJoin { left, right, col } => {
            let (down, stay): (Vec<Expr>, Vec<Expr>) =
                cs.into_iter().partition(|c| !reads(c).contains(&col));
            filtered(
                stay,
                Node::MarkJoin {
                    left: Box::new(push_into(down, *left)),
                    right,
                    col,
                },
            )
        }
        Node::Extend(i, col, e) => {
            let (down, stay): (Vec<Expr>, Vec<Expr>) =
                cs.into_iter().partition(|c| !reads(c).contains(&col));
            filtered(stay, Node::Extend(Box::new(push_into(down, *i)), col, e))
        }
        Node::Distinct(i) => Node::Distinct(Box::new(push_into(cs, *i))),
        Node::OrderBy(i, keys) => Node::OrderBy(Box::new(push_into(cs, *i)), keys),
        Node::Project(i, cols) => {
            let keep: BTreeSet<usize> = cols.iter().copied().collect();
            let (down, stay): (Vec<Expr>, Vec<Expr>) =
                cs.into_iter().partition(|c| reads(c).is_subset(&keep));
            filtered(stay, Node::Project(Box::new(push_into(down, *i)), cols))
        }
        Node::Group(i, keys, aggs) if !keys.is_empty() => {
            // A condition on the keys alone holds for all of a group's solutions or none.
            let ks: BTreeSet<usize> = keys.iter().copied().collect();
            let (down, stay): (Vec<Expr>, Vec<Expr>) =
                cs.into_iter().partition(|c| reads(c).is_subset(&ks));
            filtered(stay, Node::Group(Box::new(push_into(down, *i)), keys, aggs))
        }
        other => filtered(cs, other),
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Basic graph patterns.

fn is_bgp_tree(n: &Node) -> bool {
    match n {
        Node::Bgp(_) => true,
        Node::Join(a, b) => is_bgp_tree(a) && is_bgp_tree(b),
        _ => false,
    }
}

fn flatten_bgps(n: Node, out: &mut Vec<QuadPat>) {
    match n {
        Node::Bgp(p) => out.extend(p),
        Node::Join(a, b) => {
            flatten_bgps(*a, out);
            flatten_bgps(*b, out);
        }
        _ => unreachable!("checked by is_bgp_tree"),
    }
}

fn bgp_vars(n: &Node) -> BTreeSet<usize> {
    let mut m = BTreeSet::new();
    mentioned(n, &mut m);
    m
}

/// Joined basic graph patterns become one; a filter over one's own variables rides along; a
/// pattern joined with a UNION is joined into each branch (exact for bags), so a selective
/// pattern drives each branch's plan (SP²Bench Q8, Q12b).
pub fn merge_bgps(n: Node) -> Node {
    let n = map_children(n, &mut merge_bgps);
    let n = map_exprs(n, &mut |e| map_exists_patterns(e, &mut merge_bgps));
    match n {
        Node::Join(a, b) => match (*a, *b) {
            (x, y) if is_bgp_tree(&x) && is_bgp_tree(&y) => {
                let mut pats = Vec::new();
                flatten_bgps(x, &mut pats);
                flatten_bgps(y, &mut pats);
                Node::Bgp(pats)
            }
            (x, Node::Union(us)) | (Node::Union(us), x) if is_bgp_tree(&x) => Node::Union(
                us.into_iter()
                    .map(|u| merge_bgps(Node::Join(Box::new(x.clone()), Box::new(u))))
                    .collect(),
            ),
            // A BGP joined with a filtered BGP whose filter reads only that BGP's variables:
            // one BGP with the filter (the filter sees the same values).
            (x, Node::Filter(e, f)) | (Node::Filter(e, f), x)
                if is_bgp_tree(&x) && is_bgp_tree(&f) && vars_of(&e).is_subset(&bgp_vars(&f)) =>
            {
                let mut pats = Vec::new();
                flatten_bgps(x, &mut pats);
                flatten_bgps(*f, &mut pats);
                Node::Filter(e, Box::new(Node::Bgp(pats)))
            }
            (Node::Filter(e, f), Node::Filter(e2, f2))
                if is_bgp_tree(&f)
                    && is_bgp_tree(&f2)
                    && vars_of(&e).is_subset(&bgp_vars(&f))
                    && vars_of(&e2).is_subset(&bgp_vars(&f2)) =>
            {
                let mut pats = Vec::new();
                flatten_bgps(*f, &mut pats);
                flatten_bgps(*f2, &mut pats);
                Node::Filter(
                    Expr::And(Box::new(e), Box::new(e2)),
                    Box::new(Node::Bgp(pats)),
                )
            }
            (a, b) => Node::Join(Box::new(a), Box::new(b)),
        },
        Node::Filter(e, inner) => match *inner {
            Node::Filter(e2, i) => Node::Filter(Expr::And(Box::new(e), Box::new(e2)), i),
            other => Node::Filter(e, Box::new(other)),
        },
        other => other,
    }
}

// ---------------------------------------------------------------------------------------------
// 7. Constants fixed by equality.

/// Whether `=` with this constant is true exactly for the same term: IRIs, blank nodes, string
/// and language-tagged literals, literals of datatypes outside XSD (RDFterm-equal).
pub fn eq_is_same_term(t: TermRef<'_>) -> bool {
    match t {
        TermRef::Literal { datatype, lang, .. } => {
            lang.is_some()
                || datatype == XSD_STRING
                || !datatype.starts_with("http://www.w3.org/2001/XMLSchema#")
        }
        _ => true,
    }
}

/// `?v = const` (or `sameTerm`) that may fix `?v`: the column and the constant.
fn fixing(e: &Expr) -> Option<(usize, &Term)> {
    let (a, b, same) = match e {
        Expr::Eq(a, b) => (a, b, false),
        Expr::SameTerm(a, b) => (a, b, true),
        _ => return None,
    };
    let (c, t) = match (&**a, &**b) {
        (Expr::Var(c), Expr::Const(t)) | (Expr::Const(t), Expr::Var(c)) => (*c, t),
        _ => return None,
    };
    (same || eq_is_same_term(t.as_ref())).then_some((c, t))
}

/// Puts the constants of `FILTER(?v = const)` into the patterns of a filtered BGP.
pub fn fix_constants(n: Node) -> Node {
    let n = map_children(n, &mut fix_constants);
    let n = map_exprs(n, &mut |e| map_exists_patterns(e, &mut fix_constants));
    match n {
        Node::Filter(e, inner) if matches!(*inner, Node::Bgp(_)) => {
            let Node::Bgp(mut pats) = *inner else {
                unreachable!("matched above")
            };
            let all: BTreeSet<usize> = pats.iter().flat_map(QuadPat::vars).collect();
            let mut cs = Vec::new();
            split_conjuncts(e, &mut cs);
            let mut rest = Vec::new();
            for c in cs {
                let fix = fixing(&c)
                    .filter(|(v, _)| all.contains(v))
                    .map(|(v, t)| (v, t.clone()));
                match fix {
                    Some((v, t)) => {
                        for p in &mut pats {
                            for s in p.t.iter_mut().chain(p.g.as_mut()) {
                                if *s == TermPat::Var(v) {
                                    *s = TermPat::Fixed(v, t.clone());
                                }
                            }
                        }
                        // A variable fixed twice to different constants: the second stays a
                        // filter, which then fails.
                        if !pats.iter().any(|p| {
                            p.t.iter()
                                .chain(p.g.as_ref())
                                .any(|s| *s == TermPat::Fixed(v, t.clone()))
                        }) {
                            rest.push(c);
                        }
                    }
                    None => rest.push(c),
                }
            }
            filtered(rest, Node::Bgp(pats))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(c: usize) -> TermPat {
        TermPat::Var(c)
    }

    fn iri(s: &str) -> Term {
        Term::Iri(s.to_owned())
    }

    fn pat(s: usize, p: &str, o: usize) -> QuadPat {
        QuadPat {
            t: [var(s), TermPat::Term(iri(p)), var(o)],
            g: None,
        }
    }

    #[test]
    fn a_graph_block_of_patterns_reads_its_variable_as_a_pattern_column() {
        // GRAPH ?g { ?s :p ?o }
        let n = Node::Graph(var(2), Box::new(Node::Bgp(vec![pat(0, "p", 1)])));
        let Node::Bgp(pats) = graphs(n, None) else {
            panic!("pushed into the pattern")
        };
        assert_eq!(pats[0].g, Some(var(2)));
        // A block mentioning ?g inside, or holding a MINUS, stays a block.
        let n = Node::Graph(var(1), Box::new(Node::Bgp(vec![pat(0, "p", 1)])));
        assert!(matches!(graphs(n, None), Node::Graph(..)));
        let minus = Node::Minus(
            Box::new(Node::Bgp(vec![pat(0, "p", 1)])),
            Box::new(Node::Bgp(vec![pat(3, "p", 1)])),
            Vec::new(),
        );
        assert!(matches!(
            graphs(Node::Graph(var(2), Box::new(minus)), None),
            Node::Graph(..)
        ));
        // A constant graph: the patterns read it, and the block checks the dataset names it.
        let n = Node::Graph(
            TermPat::Term(iri("g")),
            Box::new(Node::Bgp(vec![pat(0, "p", 1)])),
        );
        let Node::Join(check, inner) = graphs(n, None) else {
            panic!("a join with the graph check")
        };
        assert!(matches!(
            *check,
            Node::Graphs {
                col: None,
                only: Some(_)
            }
        ));
        let Node::Bgp(pats) = *inner else { panic!() };
        assert_eq!(pats[0].g, Some(TermPat::Term(iri("g"))));
    }

    #[test]
    fn exists_becomes_semi_anti_and_mark_joins() {
        let mut vars = Vars::default();
        for v in ["s", "o", "x"] {
            vars.col(v);
        }
        let outer = Node::Bgp(vec![pat(0, "p", 1)]);
        let inner = Node::Bgp(vec![pat(0, "q", 2)]);
        let ex = || Expr::Exists(Box::new(inner.clone()));
        // FILTER NOT EXISTS
        let n = Node::Filter(Expr::Not(Box::new(ex())), Box::new(outer.clone()));
        assert!(matches!(
            extract_exists(n, &mut vars).unwrap(),
            Node::SemiJoin { anti: true, .. }
        ));
        // FILTER(?o = 1 || EXISTS {…}): a mark join under the filter.
        let or = Expr::Or(
            Box::new(Expr::Eq(
                Box::new(Expr::Var(1)),
                Box::new(Expr::Const(iri("a"))),
            )),
            Box::new(ex()),
        );
        let n = Node::Filter(or, Box::new(outer.clone()));
        let Node::Filter(e, inner) = extract_exists(n, &mut vars).unwrap() else {
            panic!("a filter stays")
        };
        let Node::MarkJoin { col, .. } = *inner else {
            panic!("over a mark join")
        };
        assert!(vars_of(&e).contains(&col));
        assert!(!has_exists(&e));
        // Correlated: the pattern's filter reads ?o, which only the outer solution binds.
        let correlated = Node::Filter(Expr::Bound(1), Box::new(Node::Bgp(vec![pat(0, "q", 2)])));
        let n = Node::Filter(
            Expr::Exists(Box::new(correlated.clone())),
            Box::new(outer.clone()),
        );
        let Node::SemiJoin { left, right, .. } = extract_exists(n, &mut vars).unwrap() else {
            panic!("a semi-join")
        };
        // The outer solutions carry a copy of ?o (bound in every one), the pattern carries the
        // copy of the outer value it was evaluated with: the join pairs them on it.
        let Node::Extend(_, copy, _) = *left else {
            panic!("the outer solutions get a copy of ?o")
        };
        let Node::Join(top, pattern) = *right else {
            panic!("the outer values joined on top")
        };
        assert!(certain(&top).contains(&copy));
        let Node::Filter(_, seeded) = *pattern else {
            panic!("the pattern's filter")
        };
        let Node::Join(d, _) = *seeded else {
            panic!("the outer values joined in below it")
        };
        assert!(maybe(&d).contains(&1) && certain(&d).contains(&copy));
        // A LIMIT inside counts per outer value: a slice per key of the copies.
        let limited = Node::Slice(Box::new(correlated.clone()), 0, Some(1), Vec::new());
        let n = Node::Filter(Expr::Exists(Box::new(limited)), Box::new(outer.clone()));
        let Node::SemiJoin { right, .. } = extract_exists(n, &mut vars).unwrap() else {
            panic!("a semi-join")
        };
        let Node::Join(_, slice) = *right else {
            panic!("the outer values joined on top")
        };
        assert!(
            matches!(&*slice, Node::Slice(_, 0, Some(1), per) if !per.is_empty()),
            "{slice:?}"
        );
        // A MINUS whose right side reads the outer value: its sides paired on the copies.
        let minus = Node::Minus(
            Box::new(Node::Bgp(vec![pat(0, "q", 2)])),
            Box::new(correlated),
            Vec::new(),
        );
        let n = Node::Filter(Expr::Exists(Box::new(minus)), Box::new(outer));
        let Node::SemiJoin { right, .. } = extract_exists(n, &mut vars).unwrap() else {
            panic!("a semi-join")
        };
        let Node::Join(_, minus) = *right else {
            panic!("the outer values joined on top")
        };
        assert!(
            matches!(&*minus, Node::Minus(_, _, pairs) if !pairs.is_empty()),
            "{minus:?}"
        );
    }

    #[test]
    fn filters_go_down_to_the_side_that_binds_them_and_constants_fold() {
        let a = Node::Bgp(vec![pat(0, "p", 1)]);
        let b = Node::Extend(Box::new(Node::Bgp(vec![pat(2, "q", 3)])), 4, Expr::Var(3));
        let cond = Expr::Bound(2);
        let n = push_filters(Node::Filter(
            cond,
            Box::new(Node::Join(Box::new(a), Box::new(b))),
        ));
        let Node::Join(_, right) = n else {
            panic!("the filter left the join")
        };
        let Node::Extend(inner, ..) = *right else {
            panic!()
        };
        assert!(matches!(*inner, Node::Filter(..)), "below the BIND");
        let one = Expr::Const(Term::Literal {
            value: "1".into(),
            datatype: "http://www.w3.org/2001/XMLSchema#integer".into(),
            lang: None,
        });
        let sum = Expr::Arith(
            Box::new(one.clone()),
            Box::new(one),
            crate::expr::ArithOp::Add,
        );
        match fold(sum) {
            Expr::Const(Term::Literal { value, .. }) => assert_eq!(value, "2"),
            other => panic!("{other:?}"),
        }
        let now = Expr::Call(Func::Now, vec![]);
        assert!(matches!(fold(now), Expr::Call(..)), "NOW() is per run");
    }
}
