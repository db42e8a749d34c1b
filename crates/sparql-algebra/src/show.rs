//! The algebra and its expressions as text, as `--explain` prints them: a node a line,
//! indented by depth, columns by their variables' names.

use std::fmt::Write as _;

use crate::algebra::{Node, QuadPat, TermPat};
use crate::expr::{ArithOp, CmpOp, Expr};

/// Column `c`'s name: its variable (`?x`), a blank node of the query, or the engine's own.
pub fn name(names: &[String], c: usize) -> String {
    let n = &names[c];
    match n.strip_prefix("_:") {
        Some(label) => format!("_:{label}"),
        None if n.contains(' ') => format!("?({n})"),
        None => format!("?{n}"),
    }
}

/// A term of a pattern: its variable, its term, or both for a column fixed to a term.
pub fn term_pat(t: &TermPat, names: &[String]) -> String {
    match t {
        TermPat::Var(c) => name(names, *c),
        TermPat::Term(t) => t.to_string(),
        TermPat::Fixed(c, t) => format!("{}={t}", name(names, *c)),
    }
}

/// A quad pattern: its subject, predicate and object, and its graph where it has one.
pub fn quad(q: &QuadPat, names: &[String]) -> String {
    let mut s = format!(
        "{} {} {}",
        term_pat(&q.t[0], names),
        term_pat(&q.t[1], names),
        term_pat(&q.t[2], names)
    );
    if let Some(g) = &q.g {
        let _ = write!(s, " in graph {}", term_pat(g, names));
    }
    s
}

/// Columns by name, comma-separated.
pub fn cols(cs: &[usize], names: &[String]) -> String {
    cs.iter()
        .map(|&c| name(names, c))
        .collect::<Vec<_>>()
        .join(" ")
}

/// An expression in SPARQL-like text.
pub fn expr(e: &Expr, names: &[String]) -> String {
    crate::deeper(|| expr_at(e, names))
}

fn expr_at(e: &Expr, names: &[String]) -> String {
    let x = |e: &Expr| expr(e, names);
    let list = |l: &[Expr]| l.iter().map(&x).collect::<Vec<_>>().join(", ");
    match e {
        Expr::Var(c) => name(names, *c),
        Expr::Const(t) => t.to_string(),
        Expr::Or(a, b) => format!("({} || {})", x(a), x(b)),
        Expr::And(a, b) => format!("({} && {})", x(a), x(b)),
        Expr::Not(a) => format!("!{}", x(a)),
        Expr::Eq(a, b) => format!("({} = {})", x(a), x(b)),
        Expr::SameTerm(a, b) => format!("sameTerm({}, {})", x(a), x(b)),
        Expr::Cmp(a, b, op) => {
            let op = match op {
                CmpOp::Lt => "<",
                CmpOp::Le => "<=",
                CmpOp::Gt => ">",
                CmpOp::Ge => ">=",
            };
            format!("({} {op} {})", x(a), x(b))
        }
        Expr::In(a, l) => format!("({} IN ({}))", x(a), list(l)),
        Expr::Arith(a, b, op) => {
            let op = match op {
                ArithOp::Add => "+",
                ArithOp::Sub => "-",
                ArithOp::Mul => "*",
                ArithOp::Div => "/",
            };
            format!("({} {op} {})", x(a), x(b))
        }
        Expr::Neg(a) => format!("-{}", x(a)),
        Expr::Plus(a) => format!("+{}", x(a)),
        Expr::Bound(c) => format!("bound({})", name(names, *c)),
        Expr::If(a, b, c) => format!("IF({}, {}, {})", x(a), x(b), x(c)),
        Expr::Coalesce(l) => format!("COALESCE({})", list(l)),
        // A keyword as SPARQL writes it, an IRI in brackets.
        Expr::Call(f, l) if f.name().contains(':') => format!("<{}>({})", f.name(), list(l)),
        Expr::Call(f, l) => format!("{}({})", f.name(), list(l)),
        Expr::Regex(a, re) => format!("REGEX({}, {:?})", x(a), re.as_str()),
        Expr::Exists(_) => "EXISTS {…}".to_owned(),
    }
}

/// `text` on a line of its own, indented two spaces a `depth`.
pub fn line(depth: usize, text: &str, out: &mut String) {
    let _ = writeln!(out, "{}{text}", "  ".repeat(depth));
}

/// A logical plan, one node a line, children indented.
pub fn node(n: &Node, names: &[String], depth: usize, out: &mut String) {
    crate::deeper(|| node_at(n, names, depth, out))
}

fn node_at(n: &Node, names: &[String], depth: usize, out: &mut String) {
    let e = |x: &Expr| expr(x, names);
    let text = match n {
        Node::Bgp(pats) if pats.is_empty() => "bgp {} (one empty solution)".to_owned(),
        Node::Bgp(pats) => {
            line(depth, "bgp", out);
            for q in pats {
                line(depth + 1, &quad(q, names), out);
            }
            return;
        }
        Node::Path { s, path, o, g } => {
            let mut t = format!("path {} {path} {}", term_pat(s, names), term_pat(o, names));
            if let Some(g) = g {
                let _ = write!(t, " in graph {}", term_pat(g, names));
            }
            t
        }
        Node::Join(..) => "join".to_owned(),
        Node::LeftJoin(_, _, None) => "optional".to_owned(),
        Node::LeftJoin(_, _, Some(c)) => format!("optional if {}", e(c)),
        Node::Minus(_, _, pairs) if pairs.is_empty() => "minus".to_owned(),
        Node::Minus(_, _, pairs) => format!("minus pairing [{}]", cols(pairs, names)),
        Node::Filter(x, _) => format!("filter {}", e(x)),
        Node::Union(_) => "union".to_owned(),
        Node::Distinct(_) => "distinct".to_owned(),
        Node::OrderBy(_, keys) => format!(
            "order by {}",
            keys.iter()
                .map(|(k, desc)| if *desc {
                    format!("DESC({})", e(k))
                } else {
                    e(k)
                })
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Node::Project(_, c) => format!("project {}", cols(c, names)),
        Node::Slice(_, start, len, per) => format!(
            "slice offset {start} limit {}{}",
            len.map_or("-".into(), |l| l.to_string()),
            if per.is_empty() {
                String::new()
            } else {
                format!(" per [{}]", cols(per, names))
            }
        ),
        Node::Extend(_, c, x) => format!("bind {} := {}", name(names, *c), e(x)),
        Node::Values(c, rows) => format!("values {} ({} rows)", cols(c, names), rows.len()),
        Node::Group(_, keys, aggs) => format!(
            "group by [{}] computing {}",
            cols(keys, names),
            aggs.iter()
                .map(|(c, a)| format!(
                    "{} = {:?}{}({})",
                    name(names, *c),
                    a.func,
                    if a.distinct { " distinct" } else { "" },
                    a.expr.as_ref().map_or("*".to_owned(), e)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Node::Graph(g, _) => format!("graph {} (each named graph)", term_pat(g, names)),
        Node::Graphs { col, only } => match (col, only) {
            (Some(c), None) => format!("named graphs as {}", name(names, *c)),
            (Some(c), Some(t)) => format!("named graph {t} as {}", name(names, *c)),
            (None, Some(t)) => format!("named graph {t} exists"),
            (None, None) => "named graphs".to_owned(),
        },
        Node::SemiJoin {
            cond, anti: false, ..
        } => format!(
            "semi join (exists){}",
            cond.as_ref()
                .map_or(String::new(), |c| format!(" if {}", e(c)))
        ),
        Node::SemiJoin {
            cond, anti: true, ..
        } => format!(
            "anti join (not exists){}",
            cond.as_ref()
                .map_or(String::new(), |c| format!(" if {}", e(c)))
        ),
        Node::MarkJoin { col, .. } => format!("mark join: {} := exists", name(names, *col)),
    };
    line(depth, &text, out);
    for c in n.children() {
        node(c, names, depth + 1, out);
    }
}
