//! `--explain`: a query's plan at its three levels, as text — the algebra as translated from
//! the query, the algebra after the rewrite passes, and the physical plan with its join
//! algorithms, partitioning and exchanges, estimated rows and, after a run, actual rows (and
//! time per operator when timing was on).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::algebra::{Node, QuadPat, TermPat};
use super::expr::{ArithOp, CmpOp, Expr};
use super::path;
use super::physical::{CountHow, JoinMode, Op, Partitioning, Phys, RunsOut, Slot};
use super::Prepared;
use nearflow_rdf::index::DEFAULT_GRAPH;

/// All three levels, each under its heading.
pub fn all(p: &Prepared) -> String {
    let names = &p.query().names;
    let mut s = String::new();
    s.push_str("== logical plan (as translated)\n");
    node(&p.query().translated, names, 0, &mut s);
    s.push_str("== logical plan (rewritten)\n");
    node(&p.query().optimized, names, 0, &mut s);
    s.push_str("== physical plan\n");
    s.push_str(&physical(p));
    if let Some(rows) = p.phys.first_rows() {
        let _ = writeln!(
            s,
            "first rows: the slice takes {rows}, and nothing under it waits for all its input: \
             packets start at {} bytes and double up to the full size, an operator sends what \
             it holds when it runs out of input, and a buffer holds {} packet(s)",
            p.first_packet_bytes(rows),
            crate::FIRST_ROWS_BUFFER_PACKETS
        );
    }
    s
}

fn name(names: &[String], c: usize) -> String {
    let n = &names[c];
    match n.strip_prefix("_:") {
        Some(label) => format!("_:{label}"),
        None if n.contains(' ') => format!("?({n})"),
        None => format!("?{n}"),
    }
}

fn term_pat(t: &TermPat, names: &[String]) -> String {
    match t {
        TermPat::Var(c) => name(names, *c),
        TermPat::Term(t) => t.to_string(),
        TermPat::Fixed(c, t) => format!("{}={t}", name(names, *c)),
    }
}

fn quad(q: &QuadPat, names: &[String]) -> String {
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

fn cols(cs: &[usize], names: &[String]) -> String {
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

fn line(depth: usize, text: &str, out: &mut String) {
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

/// The physical plan, one operator a line: what it does, how its output is partitioned, its
/// estimated and actual rows, and its time when timing was on.
pub fn physical(p: &Prepared) -> String {
    let mut s = String::new();
    phys(p, &p.phys, 0, &mut s);
    s
}

fn rows_of(p: &Phys) -> u64 {
    match p.op {
        // A union and an exchange pass their inputs' rows on.
        Op::Union | Op::Exchange(_) => p.inputs.iter().map(rows_of).sum(),
        _ => p.stat.rows.load(Ordering::Relaxed),
    }
}

fn phys(pr: &Prepared, p: &Phys, depth: usize, s: &mut String) {
    crate::deeper(|| phys_at(pr, p, depth, s))
}

fn phys_at(pr: &Prepared, p: &Phys, depth: usize, s: &mut String) {
    let names = &pr.query().names;
    let dict = pr.store().dict();
    let slot = |x: &Slot| match *x {
        Slot::Var(c) => name(names, c),
        Slot::Fixed(c, id) => format!("{}={}", name(names, c), dict.term(id)),
        Slot::Const(Some(id)) => dict.term(id).to_string(),
        Slot::Const(None) => "(absent)".into(),
    };
    let pat = |q: &[Slot; 4]| {
        let mut t = format!("{} {} {}", slot(&q[0]), slot(&q[1]), slot(&q[2]));
        match q[3] {
            Slot::Const(Some(DEFAULT_GRAPH)) => {}
            Slot::Var(c) => {
                let _ = write!(t, " in named graph {}", name(names, c));
            }
            g => {
                let _ = write!(t, " in graph {}", slot(&g));
            }
        }
        t
    };
    let what = match &p.op {
        Op::Unit => "unit".to_string(),
        Op::Empty => "empty".to_string(),
        Op::Scan { pat: q, order } => format!("scan {} {}", order.name(), pat(q)),
        Op::IndexJoin { pat: q, eq: None } => format!("index join {}", pat(q)),
        Op::IndexCount { pats, col, count } => format!(
            "{} := count of {} from the indexes: {count}",
            name(names, *col),
            pats.iter().map(pat).collect::<Vec<_>>().join(" and ")
        ),
        Op::StarCount {
            keys,
            rows,
            s: v,
            col,
            how,
            mult,
            mode,
        } => {
            let how = match (how, *mult) {
                (CountHow::Probe, _) => "each looked up",
                (CountHow::Grouped, _) => "the latter's values grouped, each counted in the former",
                (CountHow::Table, false) => "from a set of the latter",
                (CountHow::Table, true) => {
                    "times its matches, from a count per value of the latter"
                }
            };
            let (col, rows, keys, v) = (name(names, *col), pat(rows), pat(keys), name(names, *v));
            match mode {
                JoinMode::Inner | JoinMode::Mark(_) => {
                    format!("{col} := count of {rows} whose {v} is one of {keys}, {how}")
                }
                m => {
                    let of = match m {
                        JoinMode::Left => "with or without a match in",
                        JoinMode::Semi => "with a match in",
                        _ => "with no match in",
                    };
                    format!("{col} := count of {rows} {of} {keys} on {v}, {how}")
                }
            }
        }
        Op::Runs {
            pat: q,
            v,
            filter,
            out,
        } => {
            let kept = match filter {
                Some(e) => format!(" holding {}", expr(e, names)),
                None => String::new(),
            };
            let v = name(names, *v);
            match out {
                RunsOut::Rows { n: None } => {
                    format!("values of {v}{kept} in {}, a run each", pat(q))
                }
                RunsOut::Rows { n: Some(n) } => format!(
                    "values of {v}{kept} in {}, a run each, {} := its matches",
                    pat(q),
                    name(names, *n)
                ),
                RunsOut::Count { col, matches } => format!(
                    "{} := {} of {v}{kept} in {}, a run each",
                    name(names, *col),
                    if *matches {
                        "matches of the values"
                    } else {
                        "values"
                    },
                    pat(q)
                ),
            }
        }
        Op::IndexJoin {
            pat: q,
            eq: Some((a, b)),
        } => format!(
            "index join {} on {} = {}",
            pat(q),
            name(names, *a),
            name(names, *b)
        ),
        Op::LookupJoin {
            mode,
            pats,
            residual,
        } => {
            let mode = match mode {
                JoinMode::Mark(c) => format!("Mark({})", name(names, *c)),
                m => format!("{m:?}"),
            };
            let chain: Vec<String> = pats.iter().map(pat).collect();
            let mut w = format!("{mode} index join {}", chain.join(", then "));
            if let Some(r) = residual {
                let _ = write!(w, " if {}", expr(r, names));
            }
            w
        }
        Op::HashJoin {
            mode,
            keys,
            value_key,
            check,
            residual,
            pairs,
        } => {
            let mode = match mode {
                JoinMode::Mark(c) => format!("Mark({})", name(names, *c)),
                m => format!("{m:?}"),
            };
            let mut w = format!("{mode} hash join on [{}]", cols(keys, names));
            if let Some((a, b)) = value_key {
                let _ = write!(w, " value key {} = {}", name(names, *a), name(names, *b));
            }
            if !check.is_empty() {
                let _ = write!(w, " checking [{}]", cols(check, names));
            }
            if let Some(r) = residual {
                let _ = write!(w, " if {}", expr(r, names));
            }
            if !pairs.is_empty() {
                let _ = write!(w, " pairing [{}]", cols(pairs, names));
            }
            if p.counts_build_keys() {
                w.push_str(", counting the build side's keys");
            }
            w
        }
        Op::MergeJoin { on, .. } => format!("merge join on [{}]", name(names, *on)),
        Op::Exchange(to) => match to {
            Partitioning::Single => "exchange: unite into one stream".to_string(),
            Partitioning::Any(n) => format!("exchange: deal into {n} streams"),
            Partitioning::Hash { keys, value, n } => {
                let mut k = cols(keys, names);
                if let Some(v) = value {
                    if !k.is_empty() {
                        k.push(' ');
                    }
                    let _ = write!(k, "value({})", name(names, *v));
                }
                format!("exchange: route into {n} streams by hash of [{k}]")
            }
        },
        Op::Filter(e) => format!("filter {}", expr(e, names)),
        Op::Union => "union".to_string(),
        Op::Distinct => "distinct".to_string(),
        Op::Sort(k, None) => format!("order by ({} keys)", k.len()),
        Op::Sort(k, Some(n)) => format!("order by ({} keys), top {n}", k.len()),
        Op::Slice(a, b, per) => format!(
            "slice offset {a} limit {}{}",
            b.map_or("-".into(), |x| x.to_string()),
            if per.is_empty() {
                String::new()
            } else {
                format!(" per [{}]", cols(per, names))
            }
        ),
        Op::Extend(c, e) => format!("bind {} := {}", name(names, *c), expr(e, names)),
        Op::Path(s, path, o, graphs) => {
            let end = |e: &path::End| match e {
                path::End::Var(c) => name(names, *c),
                path::End::Term(t) => t.to_string(),
            };
            let mut t = format!("path {} {path} {}", end(s), end(o));
            match graphs.bind {
                Some(c) => {
                    let _ = write!(t, " in each named graph as {}", name(names, c));
                }
                None if graphs.graphs == [DEFAULT_GRAPH] => {}
                None => {
                    let _ = write!(t, " in {} graph(s)", graphs.graphs.len());
                }
            }
            t
        }
        Op::Values(c, rows) => format!("values {} ({} rows)", cols(c, names), rows.len()),
        Op::Given(g) => format!("from the shards {} ({} rows)", cols(&g.cols, names), g.rows),
        Op::Graphs(c, ids) => format!("named graphs as {} ({} rows)", name(names, *c), ids.len()),
        Op::Group(keys, aggs, two_phase) => format!(
            "group by [{}]{} computing {}",
            cols(keys, names),
            if *two_phase {
                " (partial per input stream, then merged)"
            } else {
                ""
            },
            aggs.iter()
                .map(|(c, a)| format!(
                    "{} = {:?}{}",
                    name(names, *c),
                    a.func,
                    if a.distinct { " distinct" } else { "" }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Op::Project(c) => format!("project {}", cols(c, names)),
    };
    let ns = p.stat.nanos.load(Ordering::Relaxed);
    let _ = write!(
        s,
        "{}{what}  ({}; est {:.0}, rows {}",
        "  ".repeat(depth),
        p.out,
        p.est,
        rows_of(p)
    );
    if pr.options().timing {
        let _ = write!(s, ", {:.3} ms", ns as f64 / 1e6);
    }
    let reads = p.stat.reads.load(Ordering::Relaxed);
    if reads > 0 {
        let remote = p.stat.remote_reads.load(Ordering::Relaxed);
        let _ = write!(
            s,
            ", index reads {reads}, {:.0} % on another node",
            100.0 * remote as f64 / reads as f64
        );
    }
    let spilled = p.stat.spilled.load(Ordering::Relaxed);
    if spilled > 0 {
        let _ = write!(s, ", {spilled} rows spilled to disk");
    }
    s.push_str(")\n");
    for i in &p.inputs {
        phys(pr, i, depth + 1, s);
    }
}
