//! Pass 2: `FILTER EXISTS` and `FILTER NOT EXISTS` conjuncts become semi- and anti-joins; an
//! `EXISTS` elsewhere in an expression becomes a mark join that sets a column to `true` or
//! `false`, which the expression then reads. A correlated `EXISTS` gets the outer values joined
//! into its pattern first (`correlate`).

use super::*;

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
pub(super) fn correlate(
    pattern: Node,
    outer: &mut Node,
    vars: &mut Vars,
) -> Result<Node, QueryError> {
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
pub(super) fn add_copies(outer: &mut Node, v: &BTreeSet<usize>, vars: &mut Vars) -> Vec<usize> {
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
pub(super) fn needs(n: &Node, v: &BTreeSet<usize>) -> bool {
    let mut read = BTreeSet::new();
    unless_bound_reads(n, &mut read);
    limited_vars(n, &mut read);
    !read.is_disjoint(v)
}

pub(super) fn reads_any(e: &Expr, v: &BTreeSet<usize>) -> bool {
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
pub(super) fn optional_exists(
    l: Node,
    r: Node,
    e: Expr,
    vars: &mut Vars,
) -> Result<Node, QueryError> {
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
pub(super) fn marks(e: Expr, inner: &mut Node, vars: &mut Vars) -> Result<Expr, QueryError> {
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

#[cfg(test)]
mod tests {
    use super::super::shape::*;

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
    fn filter_exists_and_not_exists_become_semi_and_anti_joins() {
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b FILTER NOT EXISTS { ?b :q ?c } FILTER EXISTS { ?a :r ?d } }",
            |n, v| extract_exists(n, v).unwrap(),
            "
            project ?a
              semi join (exists)
                anti join (not exists)
                  bgp
                    ?a <http://ex/p> ?b
                  bgp
                    ?b <http://ex/q> ?c
                bgp
                  ?a <http://ex/r> ?d
            ",
        );
    }

    #[test]
    fn exists_inside_an_expression_is_a_mark_join() {
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b BIND(EXISTS { ?b :q ?c } AS ?e) }",
            |n, v| extract_exists(n, v).unwrap(),
            "
            project ?a
              bind ?e := ?(exists 5)
                mark join: ?(exists 5) := exists
                  bgp
                    ?a <http://ex/p> ?b
                  bgp
                    ?b <http://ex/q> ?c
            ",
        );
    }

    /// The pattern's filter reads `?a`, which only the tested solution binds: the distinct outer
    /// values (with a copy of `?a` bound in every solution) are joined into the pattern below
    /// the filter and at its top, and the semi-join pairs the sides on the copies.
    #[test]
    fn a_correlated_exists_gets_the_outer_values_joined_into_its_pattern() {
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b FILTER EXISTS { ?b :q ?c FILTER(?c != ?a) } }",
            |n, v| extract_exists(n, v).unwrap(),
            "
            project ?a
              semi join (exists)
                bind ?(outer value 4) := COALESCE(?a, _:nearflow unbound)
                  bgp
                    ?a <http://ex/p> ?b
                join
                  distinct
                    project ?a ?(outer value 4)
                      bind ?(outer value 4) := COALESCE(?a, _:nearflow unbound)
                        bgp
                          ?a <http://ex/p> ?b
                  filter !(?c = ?a)
                    join
                      distinct
                        project ?a ?(outer value 4)
                          bind ?(outer value 4) := COALESCE(?a, _:nearflow unbound)
                            bgp
                              ?a <http://ex/p> ?b
                      bgp
                        ?b <http://ex/q> ?c
            ",
        );
    }
}
