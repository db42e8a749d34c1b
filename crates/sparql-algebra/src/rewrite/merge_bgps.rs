//! Pass 6: joined basic graph patterns become one (the physical planner orders its joins from
//! statistics); a pattern joined with a UNION is joined into each branch.

use super::*;

pub(super) fn is_bgp_tree(n: &Node) -> bool {
    match n {
        Node::Bgp(_) => true,
        Node::Join(a, b) => is_bgp_tree(a) && is_bgp_tree(b),
        _ => false,
    }
}

pub(super) fn flatten_bgps(n: Node, out: &mut Vec<QuadPat>) {
    match n {
        Node::Bgp(p) => out.extend(p),
        Node::Join(a, b) => {
            flatten_bgps(*a, out);
            flatten_bgps(*b, out);
        }
        _ => unreachable!("checked by is_bgp_tree"),
    }
}

pub(super) fn bgp_vars(n: &Node) -> BTreeSet<usize> {
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

#[cfg(test)]
mod tests {
    use super::super::shape::*;

    #[test]
    fn joined_patterns_become_one() {
        let (a, b) = (
            Node::Bgp(vec![pat(0, "http://ex/p", 1)]),
            Node::Bgp(vec![pat(1, "http://ex/q", 2)]),
        );
        let Node::Bgp(pats) = merge_bgps(Node::Join(Box::new(a), Box::new(b))) else {
            panic!("not one pattern")
        };
        assert_eq!(pats, [pat(0, "http://ex/p", 1), pat(1, "http://ex/q", 2)]);
    }

    #[test]
    fn a_pattern_joined_with_a_union_goes_into_each_branch() {
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b . { ?b :q ?c } UNION { ?b :r ?c } }",
            |n, _| merge_bgps(n),
            "
            project ?a
              union
                bgp
                  ?a <http://ex/p> ?b
                  ?b <http://ex/q> ?c
                bgp
                  ?a <http://ex/p> ?b
                  ?b <http://ex/r> ?c
            ",
        );
    }
}
