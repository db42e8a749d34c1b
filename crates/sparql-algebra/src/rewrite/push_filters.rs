//! Pass 5: filter conjuncts move below joins, unions, OPTIONALs' left sides, BINDs, DISTINCT and
//! ORDER BY, to the side whose solutions bind every variable they read.

use super::*;

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
pub(super) fn push_into(cs: Vec<Expr>, inner: Node) -> Node {
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

#[cfg(test)]
mod tests {
    use super::super::shape::*;

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
        let now = Expr::Call(crate::functions::builtin("NOW"), vec![]);
        assert!(matches!(fold(now), Expr::Call(..)), "NOW() is per run");
    }

    #[test]
    fn a_conjunct_goes_to_the_left_of_an_optional_and_one_on_its_right_stays_above() {
        let int = |v: u8| format!("\"{v}\"^^<http://www.w3.org/2001/XMLSchema#integer>");
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b OPTIONAL { ?b :q ?c } FILTER(?b > 2 && ?c > 1) }",
            |n, _| push_filters(n),
            &format!(
                "
                project ?a
                  filter (?c > {})
                    optional
                      filter (?b > {})
                        bgp
                          ?a <http://ex/p> ?b
                      bgp
                        ?b <http://ex/q> ?c
                ",
                int(1),
                int(2)
            ),
        );
    }
}
