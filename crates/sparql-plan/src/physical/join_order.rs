//! A basic graph pattern's join order (greedy, smallest estimate first), its join algorithms
//! (index, merge, hash), where its filters go, and the estimates these choices read.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::algebra::{vars_of, QuadPat};
use crate::expr::Expr;
use crate::rewrite::and_all;
use nearflow_store::index::{Permutation, QuadIndex};
use nearflow_store::term::Id;

use super::plan::*;
use super::planner::Planner;
use super::scan_ranges::scan_pieces;

/// Conjuncts of an `&&` chain.
pub(super) fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::And(a, b) => {
            conjuncts(*a, out);
            conjuncts(*b, out);
        }
        e => out.push(e),
    }
}

/// `?a = ?b`: the two columns.
pub(super) fn var_eq(e: &Expr) -> Option<(usize, usize)> {
    match e {
        Expr::Eq(a, b) => match (&**a, &**b) {
            (Expr::Var(x), Expr::Var(y)) if x != y => Some((*x, *y)),
            _ => None,
        },
        _ => None,
    }
}

impl Planner<'_> {
    /// An inner join of two planned sides.
    #[inline(never)]
    pub(super) fn join(&self, a: Phys, b: Phys) -> Phys {
        // The empty solution joins as the identity; no solution, as nothing.
        match (&a.op, &b.op) {
            (Op::Unit, _) => return b,
            (_, Op::Unit) => return a,
            (Op::Empty, _) | (_, Op::Empty) => {
                return Phys::empty(a.cert.union(&b.cert).copied().collect())
            }
            _ => {}
        }
        // Build the smaller side.
        if a.est < b.est {
            self.hash_join(JoinMode::Inner, b, a, None)
        } else {
            self.hash_join(JoinMode::Inner, a, b, None)
        }
    }

    /// A join of two planned sides on their shared variables (and, for OPTIONAL, the equalities
    /// of its filter), each side partitioned by the join's keys when it is large.
    #[inline(never)]
    pub(super) fn hash_join(
        &self,
        mode: JoinMode,
        probe: Phys,
        build: Phys,
        residual: Option<Expr>,
    ) -> Phys {
        let keys: Vec<usize> = probe.cert.intersection(&build.cert).copied().collect();
        let pb = probe.bound();
        let bb = build.bound();
        let check: Vec<usize> = pb
            .intersection(&bb)
            .filter(|c| !keys.contains(c))
            .copied()
            .collect();
        let mut value_key = None;
        if let Some(e) = &residual {
            let mut cs = Vec::new();
            conjuncts(e.clone(), &mut cs);
            value_key = cs.iter().filter_map(var_eq).find_map(|(a, b)| {
                if probe.cert.contains(&a) && build.cert.contains(&b) && !bb.contains(&a) {
                    Some((a, b))
                } else if probe.cert.contains(&b) && build.cert.contains(&a) && !bb.contains(&b) {
                    Some((b, a))
                } else {
                    None
                }
            });
        }
        let (cert, maybe, est) = match mode {
            JoinMode::Inner => {
                let cert: BTreeSet<usize> = probe.cert.union(&build.cert).copied().collect();
                let maybe = pb
                    .union(&bb)
                    .filter(|c| !cert.contains(c))
                    .copied()
                    .collect();
                let est = if keys.is_empty() && value_key.is_none() {
                    probe.est * build.est
                } else {
                    probe.est.max(build.est)
                };
                (cert, maybe, est)
            }
            JoinMode::Left => {
                let cert = probe.cert.clone();
                let maybe = pb
                    .union(&bb)
                    .filter(|c| !cert.contains(c))
                    .copied()
                    .collect();
                (cert, maybe, probe.est)
            }
            JoinMode::Anti | JoinMode::Minus | JoinMode::Semi => {
                (probe.cert.clone(), probe.maybe.clone(), probe.est / 2.0)
            }
            JoinMode::Mark(col) => {
                let mut cert = probe.cert.clone();
                cert.insert(col);
                (cert, probe.maybe.clone(), probe.est)
            }
        };
        let keyed = !keys.is_empty() || value_key.is_some();
        let n = self.par(probe.est.max(build.est));
        let (probe, build) = if keyed && n > 1 {
            let side = |value: Option<usize>| Partitioning::Hash {
                keys: keys.clone(),
                value,
                n,
            };
            (
                self.exchange(probe, side(value_key.map(|v| v.0))),
                self.exchange(build, side(value_key.map(|v| v.1))),
            )
        } else {
            (
                self.exchange(probe, Partitioning::Single),
                self.exchange(build, Partitioning::Single),
            )
        };
        let out = match mode {
            JoinMode::Mark(col) => probe.out.after_changing(&[col]),
            _ => probe.out.clone(),
        };
        let op = Op::HashJoin {
            mode,
            keys,
            value_key,
            check,
            residual: residual.map(Arc::new),
            pairs: Vec::new(),
        };
        let mut j = Phys::new(op, vec![probe, build], est, cert, maybe);
        j.out = out;
        j
    }

    pub(super) fn filters(&self, p: Phys, cs: Vec<Expr>) -> Phys {
        match and_all(cs) {
            None => p,
            Some(e) => {
                let est = p.est / 2.0;
                Phys::over(Op::Filter(Arc::new(e)), p, est)
            }
        }
    }

    /// Rows of a join's input of `input` rows that its consumer reads, when the join yields
    /// `output`: all of them, or under a row limit ([`Planner::needed`]) the share that yields
    /// the rows needed, assuming matches spread evenly over the input. An index join costs a
    /// lookup per row read and a hash join its whole build side, so under `LIMIT 10` the join
    /// that reads a few rows of its input is an index join even when the input is large.
    pub(super) fn rows_read(&self, input: f64, output: f64) -> f64 {
        match self.needed.get() {
            Some(n) => (input * n / output.max(1.0)).clamp(1.0, input.max(1.0)),
            None => input,
        }
    }

    /// Plans a basic graph pattern with the filter conjuncts of its group. Under a row limit
    /// ([`Planner::needed`]) the plan that reads only the share of its inputs the limit needs
    /// is kept when it passes rows on as they come ([`Phys::streams`]: its joins index or merge
    /// joins); when it has to wait for a whole side anyway (a hash join on a `=` edge) the limit
    /// saves nothing, and the pattern is planned as without one.
    pub(super) fn bgp(&self, quads: &[QuadPat], cs: Vec<Expr>, active: &[Id]) -> Phys {
        if self.needed.get().is_none() {
            return self.bgp_for(quads, cs, active);
        }
        let first_rows = self.bgp_for(quads, cs.clone(), active);
        if first_rows.streams() {
            return first_rows;
        }
        let needed = self.needed.replace(None);
        let p = self.bgp_for(quads, cs, active);
        self.needed.set(needed);
        p
    }

    /// [`bgp`](Self::bgp) with the row limit as it is.
    fn bgp_for(&self, quads: &[QuadPat], cs: Vec<Expr>, active: &[Id]) -> Phys {
        let all_vars: BTreeSet<usize> = quads.iter().flat_map(QuadPat::vars).collect();
        if quads.is_empty() {
            return self.filters(Phys::unit(), cs);
        }
        if let Some(given) = self.given {
            return self.given_bgp(given, quads, cs);
        }
        if active.len() > 1 && quads.iter().any(|q| q.g.is_none()) {
            return self.merged_bgp(quads, cs, active);
        }
        let pats: Vec<Pat> = quads.iter().map(|q| self.pat(q, active)).collect();
        if pats.iter().flatten().any(|s| *s == Slot::Const(None)) {
            return Phys::empty(all_vars);
        }
        let mut cs = cs;
        let cards: Vec<f64> = pats.iter().map(|p| self.count(p) as f64).collect();
        let mut left: Vec<usize> = (0..pats.len()).collect();
        // Start from the smallest pattern.
        let first = *left
            .iter()
            .min_by(|&&a, &&b| cards[a].total_cmp(&cards[b]))
            .expect("not empty");
        left.retain(|&x| x != first);
        let mut cur = self.scan(pats[first], cards[first]);
        cur = self.apply_ready(cur, &mut cs);
        // The estimated bytes of the hash tables planned so far (`Planner::table_budget`).
        let mut tables = 0.0;
        while !left.is_empty() {
            let bound = cur.cert.clone();
            // Best connected pattern: by shared variables, else by an `=` edge.
            let mut best: Option<Candidate> = None;
            for &k in &left {
                let vars: BTreeSet<usize> = pats[k].iter().filter_map(|s| s.var()).collect();
                let shared: Vec<usize> = vars.intersection(&bound).copied().collect();
                let (est, edge) = if !shared.is_empty() {
                    let d = shared
                        .iter()
                        .map(|&v| self.distinct(&pats[k], v, cards[k]))
                        .fold(1.0f64, f64::max);
                    (cur.est * cards[k] / d, None)
                } else if let Some((a, b)) = cs.iter().filter_map(var_eq).find_map(|(a, b)| {
                    if bound.contains(&a) && vars.contains(&b) {
                        Some((a, b))
                    } else if bound.contains(&b) && vars.contains(&a) {
                        Some((b, a))
                    } else {
                        None
                    }
                }) {
                    let d = self.distinct(&pats[k], b, cards[k]).max(1.0);
                    (cur.est * cards[k] / d, Some((a, b)))
                } else {
                    continue;
                };
                if best.as_ref().is_none_or(|b| est < b.1) {
                    best = Some((k, est, edge));
                }
            }
            let (k, est, edge) = match best {
                Some(b) => b,
                None => {
                    // Not connected: a cross product with the smallest remaining pattern.
                    let k = *left
                        .iter()
                        .min_by(|&&a, &&b| cards[a].total_cmp(&cards[b]))
                        .expect("not empty");
                    (k, cur.est * cards[k], None)
                }
            };
            left.retain(|&x| x != k);
            let pat = pats[k];
            let vars: BTreeSet<usize> = pat.iter().filter_map(|s| s.var()).collect();
            let shares = !vars.is_disjoint(&cur.cert);
            let read = self.rows_read(cur.est, est);
            // An index join: by the shared variables, or by the `=` alone (a lookup per row of
            // the term `=` to its `?a`, `lower/index_join.rs`, the `=` checked there).
            let eq = if shares { None } else { edge };
            // The table a hash join would build, of its smaller side: a row, its chain link and
            // its share of the key table.
            let table = cur.est.min(cards[k]) * (self.row_bytes + 24.0);
            let over = self.table_budget.is_some_and(|b| tables + table > b);
            cur = if (shares || eq.is_some()) && (read * 4.0 < cards[k] || over) {
                let mut cert = cur.cert.clone();
                cert.extend(vars);
                let maybe = cur.maybe.clone();
                let cur = self.spread(cur, read);
                let out = cur.out.clone();
                let mut j = Phys::new(
                    Op::IndexJoin { pat, eq },
                    vec![cur],
                    est.max(1.0),
                    cert,
                    maybe,
                );
                j.out = out;
                if let Some((a, b)) = eq {
                    cs.retain(|c| var_eq(c) != Some((a, b)) && var_eq(c) != Some((b, a)));
                }
                j
            } else {
                let scan = self.scan(pat, cards[k]);
                // A merge join reads the sorted indexes by position: not where the store's
                // delta holds rows of either side's range (a hash join over the scans, which
                // merge them in).
                let merge = merge_column(&cur, &scan).filter(|_| {
                    self.store.is_flat() || [&cur, &scan].iter().all(|p| self.reads_no_delta(p))
                });
                if let (None, Some(on)) = (edge, merge) {
                    let mut cert = cur.cert.clone();
                    cert.extend(scan.cert.iter().copied());
                    let ranges = self.par(cur.est.max(scan.est));
                    let op = Op::MergeJoin { on, ranges };
                    cur = Phys::new(op, vec![cur, scan], est.max(1.0), cert, BTreeSet::new());
                    cur.out = Partitioning::any(ranges);
                    cur = self.apply_ready(cur, &mut cs);
                    continue;
                }
                tables += table;
                let residual =
                    edge.map(|(a, b)| Expr::Eq(Box::new(Expr::Var(a)), Box::new(Expr::Var(b))));
                let mut j = if cur.est <= scan.est && edge.is_none() {
                    self.hash_join(JoinMode::Inner, scan, cur, None)
                } else {
                    self.hash_join(JoinMode::Inner, cur, scan, residual)
                };
                j.est = est.max(1.0);
                // The `=` made the join: it is checked there (value key, residual).
                if let Some((a, b)) = edge {
                    cs.retain(|c| var_eq(c) != Some((a, b)) && var_eq(c) != Some((b, a)));
                }
                j
            };
            cur = self.apply_ready(cur, &mut cs);
        }
        self.filters(cur, cs)
    }

    /// A basic graph pattern over a default graph merged from several graphs (`FROM a FROM
    /// b`): each pattern reading it is the distinct union of its matches in each graph (the
    /// merge is a set: a triple in two graphs matches once), and the patterns are hash-joined,
    /// smallest first.
    pub(super) fn merged_bgp(&self, quads: &[QuadPat], cs: Vec<Expr>, active: &[Id]) -> Phys {
        let mut parts: Vec<Phys> = quads
            .iter()
            .map(|q| {
                if q.g.is_some() {
                    let p = self.pat(q, active);
                    let card = self.count(&p) as f64;
                    return self.scan(p, card);
                }
                let scans: Vec<Phys> = active
                    .iter()
                    .map(|&g| {
                        let p = self.pat(q, &[g]);
                        let card = self.count(&p) as f64;
                        self.scan(p, card)
                    })
                    .collect();
                let u = self.union(scans);
                let est = u.est;
                let u = self.exchange(u, Partitioning::Single);
                Phys::over(Op::Distinct, u, est)
            })
            .collect();
        parts.sort_by(|a, b| a.est.total_cmp(&b.est));
        let mut it = parts.into_iter();
        let mut cur = it.next().expect("not empty");
        let mut cs = cs;
        cur = self.apply_ready(cur, &mut cs);
        for p in it {
            cur = self.join(cur, p);
            cur = self.apply_ready(cur, &mut cs);
        }
        self.filters(cur, cs)
    }

    /// A basic graph pattern joined from its fragments' rows ([`crate::fragment`]), greedily as
    /// [`bgp`](Self::bgp) orders patterns: the fragment with the fewest rows first, then the
    /// connected one (a shared variable, else an `=` conjunct, which becomes a value-key join)
    /// with the fewest rows; hash joins throughout.
    fn given_bgp(&self, given: &crate::fragment::Given, quads: &[QuadPat], cs: Vec<Expr>) -> Phys {
        let mut parts: Vec<Phys> = crate::fragment::groups(given.split, quads)
            .iter()
            .map(|g| {
                let rows = given.of(g);
                let cert: BTreeSet<usize> = rows.cols.iter().copied().collect();
                let est = rows.rows as f64;
                Phys::new(Op::Given(rows), vec![], est, cert, BTreeSet::new())
            })
            .collect();
        let mut cs = cs;
        let smallest = |parts: &[Phys], among: &mut dyn Iterator<Item = usize>| {
            among.min_by(|&a, &b| parts[a].est.total_cmp(&parts[b].est))
        };
        let first = smallest(&parts, &mut (0..parts.len())).expect("not empty");
        let mut cur = parts.remove(first);
        cur = self.apply_ready(cur, &mut cs);
        while !parts.is_empty() {
            let connected = smallest(
                &parts,
                &mut (0..parts.len()).filter(|&k| !parts[k].cert.is_disjoint(&cur.cert)),
            );
            let edge = |k: usize| {
                cs.iter().filter_map(var_eq).find(|&(a, b)| {
                    (cur.cert.contains(&a) && parts[k].cert.contains(&b))
                        || (cur.cert.contains(&b) && parts[k].cert.contains(&a))
                })
            };
            let by_edge = smallest(&parts, &mut (0..parts.len()).filter(|&k| edge(k).is_some()));
            cur = match (connected, by_edge) {
                (Some(k), _) => {
                    let p = parts.remove(k);
                    self.join(cur, p)
                }
                (None, Some(k)) => {
                    let (a, b) = edge(k).expect("found");
                    let p = parts.remove(k);
                    cs.retain(|c| var_eq(c) != Some((a, b)));
                    let eq = Expr::Eq(Box::new(Expr::Var(a)), Box::new(Expr::Var(b)));
                    let est = cur.est.max(p.est);
                    let mut j = self.hash_join(JoinMode::Inner, cur, p, Some(eq));
                    j.est = est;
                    j
                }
                (None, None) => {
                    // Not connected: a cross product with the smallest remaining fragment.
                    let k = smallest(&parts, &mut (0..parts.len())).expect("not empty");
                    let p = parts.remove(k);
                    self.join(cur, p)
                }
            };
            cur = self.apply_ready(cur, &mut cs);
        }
        self.filters(cur, cs)
    }

    /// Wraps `p` in the conjuncts whose columns it always binds.
    pub(super) fn apply_ready(&self, p: Phys, cs: &mut Vec<Expr>) -> Phys {
        let (ready, rest): (Vec<Expr>, Vec<Expr>) = std::mem::take(cs)
            .into_iter()
            .partition(|c| vars_of(c).is_subset(&p.cert));
        *cs = rest;
        self.filters(p, ready)
    }

    /// `p` spread over as many streams as reading `read` rows from it calls for, when that is
    /// more than it has (an index join's input: each row's lookups run where the row is).
    pub(super) fn spread(&self, p: Phys, read: f64) -> Phys {
        match self.par(read) {
            n if n > p.out.count() => self.exchange(p, Partitioning::Any(n)),
            _ => p,
        }
    }

    pub(super) fn scan(&self, pat: Pat, card: f64) -> Phys {
        let (order, _) = Permutation::for_bound(bound_of(&pat).map(|x| x.is_some()));
        let cert: BTreeSet<usize> = pat.iter().filter_map(|s| s.var()).collect();
        let streams = scan_pieces(self.store, &pat, order, &self.named, self.dop).len();
        if streams == 0 {
            return Phys::empty(cert);
        }
        let mut p = Phys::new(Op::Scan { pat, order }, vec![], card, cert, BTreeSet::new());
        p.out = Partitioning::any(streams);
        p
    }

    /// Estimated distinct values of column `v` among `pat`'s matches.
    pub(super) fn distinct(&self, pat: &Pat, v: usize, card: f64) -> f64 {
        let pred = pat[1]
            .id()
            .and_then(|p| self.store.stats().per_predicate.get(&p).copied());
        let pos = pat[..3].iter().position(|s| s.var() == Some(v));
        let d = match (pred, pos) {
            (Some(ps), Some(0)) => ps.subjects as f64 * (card / ps.triples.max(1) as f64).min(1.0),
            (Some(ps), Some(2)) => ps.objects as f64 * (card / ps.triples.max(1) as f64).min(1.0),
            (_, Some(1)) => self.store.stats().predicates as f64,
            (_, None) => self.named.len().max(1) as f64,
            _ => card,
        };
        d.clamp(1.0, card.max(1.0))
    }
}

/// The column a scan's output is sorted on: the variable in the first key column after its
/// bound prefix (a scan of one graph reads its permutation in key order, partition after
/// partition).
pub fn sorted_on(pat: &Pat, order: Permutation) -> Option<usize> {
    if matches!(pat[3], Slot::Var(_)) {
        return None;
    }
    let (_, k) = Permutation::for_bound(bound_of(pat).map(|x| x.is_some()));
    let pos = *order.positions().get(k)?;
    match pat[pos] {
        Slot::Var(c) => Some(c),
        _ => None,
    }
}

/// The column two plain scans of one graph each can be merge-joined on: both sorted on it.
impl Planner<'_> {
    /// Whether `p` is a scan of one graph whose range the store's delta holds no row of.
    fn reads_no_delta(&self, p: &Phys) -> bool {
        let Op::Scan { pat, order } = &p.op else {
            return false;
        };
        let Some(graph) = pat[3].id() else {
            return false;
        };
        let bound = bound_of(pat);
        let (_, k) = Permutation::for_bound(bound.map(|x| x.is_some()));
        let prefix = nearflow_store::index::key_prefix(*order, bound, k);
        self.store.is_flat_at(*order, graph, &prefix)
    }
}

pub(super) fn merge_column(a: &Phys, b: &Phys) -> Option<usize> {
    match (&a.op, &b.op) {
        (Op::Scan { pat: pa, order: oa }, Op::Scan { pat: pb, order: ob }) => {
            let on = sorted_on(pa, *oa)?;
            (sorted_on(pb, *ob) == Some(on)).then_some(on)
        }
        _ => None,
    }
}

/// A pattern to add next: its index, the estimated rows after it, the `=` edge it joins by.
pub(super) type Candidate = (usize, f64, Option<(usize, usize)>);
