//! Pass 3: `OPTIONAL { … ?x … } FILTER(!bound(?x))`, `?x` bound in every solution of the
//! optional part and in none of the left, is an anti-join.

use super::*;

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

#[cfg(test)]
mod tests {
    use super::super::shape::*;

    #[test]
    fn optional_with_not_bound_of_a_variable_only_its_right_side_binds_is_an_anti_join() {
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b OPTIONAL { ?b :q ?c } FILTER(!bound(?c)) }",
            |n, _| anti_optional(n),
            "
            project ?a
              anti join (not exists)
                bgp
                  ?a <http://ex/p> ?b
                bgp
                  ?b <http://ex/q> ?c
            ",
        );
    }

    #[test]
    fn a_variable_the_left_side_binds_too_keeps_the_optional() {
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?c OPTIONAL { ?a :q ?c } FILTER(!bound(?c)) }",
            |n, _| anti_optional(n),
            "
            project ?a
              filter !bound(?c)
                optional
                  bgp
                    ?a <http://ex/p> ?c
                  bgp
                    ?a <http://ex/q> ?c
            ",
        );
    }
}
