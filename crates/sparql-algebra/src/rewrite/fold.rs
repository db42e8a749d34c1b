//! Pass 4: expressions without variables are evaluated once (not the calls of a
//! [volatile](crate::functions::Function::volatile) function: `NOW()`, `RAND()`, `UUID()`,
//! `STRUUID()`, `BNODE()`); a filter that is then always true goes, one always false leaves no
//! solution.

use super::*;

/// Evaluates the expressions without variables.
pub fn fold_constants(n: Node) -> Node {
    let n = map_children(n, &mut fold_constants);
    let n = map_exprs(n, &mut |e| {
        let e = map_exists_patterns(e, &mut fold_constants);
        fold(e)
    });
    match n {
        Node::Filter(Expr::Const(t), inner) => {
            match crate::value::Val::from_term(t.as_ref()).ebv() {
                Ok(true) => *inner,
                _ => Node::Values(Vec::new(), Vec::new()),
            }
        }
        other => other,
    }
}

/// The most a folded constant's value may hold, with its copies: a larger one stays an
/// expression, evaluated in the run, where the query's memory limit bounds it.
const FOLDED_BYTES: usize = 1 << 20;

/// Folds the constant subexpressions of `e`, bottom-up.
pub fn fold(e: Expr) -> Expr {
    let dict = nearflow_store::index::Dict::new();
    // A refusal fails this fold only (the expression is kept): each fold has its own account.
    let minted = Minted::above(0).charged_to(std::sync::Arc::new(nearflow_flow::Account::new(
        Some(FOLDED_BYTES),
    )));
    let cx = EvalCx::over(&dict, &minted);
    e.rewrite(&mut |x| {
        let constant = match &x {
            Expr::Var(_) | Expr::Bound(_) | Expr::Exists(_) | Expr::Const(_) => false,
            Expr::Call(f, args) => !f.is_volatile() && args.iter().all(is_const),
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

pub(super) fn is_const(e: &Expr) -> bool {
    matches!(e, Expr::Const(_))
}

#[cfg(test)]
mod tests {
    use super::super::shape::*;

    const INT: &str = "<http://www.w3.org/2001/XMLSchema#integer>";

    #[test]
    fn constant_parts_of_a_filter_fold_and_per_run_functions_stay() {
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b FILTER(?b > 3 * 2) BIND(NOW() AS ?t) BIND(STRLEN(\"abc\") AS ?n) }",
            |n, _| fold_constants(n),
            &format!(
                "
                project ?a
                  filter (?b > \"6\"^^{INT})
                    bind ?n := \"3\"^^{INT}
                      bind ?t := NOW()
                        bgp
                          ?a <http://ex/p> ?b
                "
            ),
        );
    }

    #[test]
    fn a_constant_too_large_to_fold_stays_an_expression_for_the_run() {
        use crate::expr::Expr;
        use crate::functions::builtin;
        let text = |n: usize| {
            Expr::Const(nearflow_store::term::Term::from(
                nearflow_store::term::TermRef::string(&"x".repeat(n)),
            ))
        };
        let concat = |n: usize| Expr::Call(builtin("CONCAT"), vec![text(n), text(n)]);
        assert!(matches!(super::fold(concat(1000)), Expr::Const(_)));
        // Two values of 200 KB: their 400 KB concatenation and its copies pass the 1 MiB a
        // fold may build; the run's memory limit decides.
        assert!(matches!(
            super::fold(concat(200_000)),
            Expr::Call(f, _) if f.name() == "CONCAT"
        ));
    }

    #[test]
    fn a_filter_always_false_leaves_no_solution_and_one_always_true_goes() {
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b FILTER(1 = 2) }",
            |n, _| fold_constants(n),
            "
            project ?a
              values  (0 rows)
            ",
        );
        check(
            "PREFIX : <http://ex/> SELECT ?a WHERE { ?a :p ?b FILTER(2 > 1) }",
            |n, _| fold_constants(n),
            "
            project ?a
              bgp
                ?a <http://ex/p> ?b
            ",
        );
    }
}
