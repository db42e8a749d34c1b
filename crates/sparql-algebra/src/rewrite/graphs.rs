//! Pass 1: a `GRAPH` block's name goes into its quad patterns where that is exact (every part of
//! the block reads the graph, and nothing in it mentions the name's variable); otherwise the
//! block stays, and the physical planner evaluates it per named graph.

use super::*;

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
pub(super) fn graph_pushable(inner: &Node, g: usize) -> bool {
    let mut m = BTreeSet::new();
    mentioned(inner, &mut m);
    !m.contains(&g) && every_part_reads_the_graph(inner)
}

pub(super) fn every_part_reads_the_graph(n: &Node) -> bool {
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
pub(super) fn add_to_projections(n: Node, g: usize) -> Node {
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

#[cfg(test)]
mod tests {
    use super::super::shape::*;

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
    fn a_graph_block_becomes_its_patterns_graph_column() {
        check(
            "PREFIX : <http://ex/> SELECT ?g ?a WHERE { GRAPH ?g { ?a :p ?b . ?b :q ?c } }",
            |n, _| graphs(n, None),
            "
            project ?g ?a
              bgp
                ?a <http://ex/p> ?b in graph ?g
                ?b <http://ex/q> ?c in graph ?g
            ",
        );
    }

    /// `?g` as a subject or object inside the block: the block stays, evaluated per graph.
    #[test]
    fn a_block_that_mentions_its_graph_variable_stays() {
        check(
            "PREFIX : <http://ex/> SELECT ?g ?a WHERE { GRAPH ?g { ?a :p ?g } }",
            |n, _| graphs(n, None),
            "
            project ?g ?a
              graph ?g (each named graph)
                bgp
                  ?a <http://ex/p> ?g
            ",
        );
    }
}
