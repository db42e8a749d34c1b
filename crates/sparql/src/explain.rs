//! `--explain`: a query's plan at its three levels, as text — the algebra as translated from
//! the query, the algebra after the rewrite passes, and the physical plan with its join
//! algorithms, partitioning and exchanges, estimated rows and, after a run, actual rows (and
//! time per operator when timing was on).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::path;
use super::physical::{CountHow, JoinMode, Op, Partitioning, Phys, RunsOut, Slot};
use super::Prepared;
use nearflow_rdf::index::DEFAULT_GRAPH;
use nearflow_sparql_algebra::show::{cols, expr, name, node};

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
