//! Pass 7: `FILTER(?v = <iri>)` (any constant whose `=` is term equality, and any constant under
//! `sameTerm`) puts the constant into the patterns in place of `?v`.

use super::*;

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
pub(super) fn fixing(e: &Expr) -> Option<(usize, &Term)> {
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
    use super::super::shape::*;

    #[test]
    fn an_iri_or_a_language_string_compared_with_equals_goes_into_the_pattern() {
        for (constant, shown) in [(":x", "<http://ex/x>"), ("\"x\"@en", "\"x\"@en")] {
            check(
                &format!(
                    "PREFIX : <http://ex/> SELECT ?a WHERE {{ ?a :p ?b FILTER(?b = {constant}) }}"
                ),
                |n, _| fix_constants(n),
                &format!(
                    "
                    project ?a
                      bgp
                        ?a <http://ex/p> ?b={shown}
                    "
                ),
            );
        }
    }

    /// `?b = 1` holds for `1.0` and `"01"^^xsd:integer` too: a number's `=` is value equality, so
    /// the filter stays; under `sameTerm` the term itself goes into the pattern.
    #[test]
    fn a_number_stays_a_filter_unless_compared_with_same_term() {
        let int = "\"1\"^^<http://www.w3.org/2001/XMLSchema#integer>";
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b FILTER(?b = 1) }",
            |n, _| fix_constants(n),
            &format!(
                "
                project ?a
                  filter (?b = {int})
                    bgp
                      ?a <http://ex/p> ?b
                "
            ),
        );
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b FILTER(sameTerm(?b, 1)) }",
            |n, _| fix_constants(n),
            &format!(
                "
                project ?a
                  bgp
                    ?a <http://ex/p> ?b={int}
                "
            ),
        );
    }
}
