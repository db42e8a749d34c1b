//! Joins from the small side: an OPTIONAL, EXISTS, NOT EXISTS, MINUS or mark join whose other
//! side is a basic graph pattern is planned as lookups of that pattern per row of this side
//! ([`Op::LookupJoin`]) when the lookups read less than the pattern's matches would — a
//! `?s rdf:_24 ?o OPTIONAL { ?s rdf:type ?t }` looks 986 subjects up instead of reading 911 k
//! `rdf:type` triples into a table. An EXISTS whose own side is one large pattern and whose
//! other side is small runs the other way: the small side's values looked up in the pattern
//! ([`Planner::semi_from_keys`]). Otherwise the hash join of `join_order.rs`.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::algebra::{vars_of, Node, QuadPat};
use crate::expr::Expr;
use crate::rewrite::and_all;
use nearflow_store::term::Id;

use super::plan::*;
use super::planner::Planner;

/// Patterns a chain of lookups takes at most: past it the other side is planned on its own.
const MAX_CHAIN: usize = 4;

/// The lookups per input row after which the lookups are not chosen whatever the other side's
/// size: a chain that fans out this much is a join of its own.
const MAX_LOOKUPS_PER_ROW: f64 = 64.0;

/// A basic graph pattern, alone or under a filter: its patterns and the filter.
fn bgp_and_filter(node: &Node) -> Option<(&[QuadPat], Option<&Expr>)> {
    match node {
        Node::Bgp(q) => Some((q, None)),
        Node::Filter(e, inner) => match &**inner {
            Node::Bgp(q) => Some((q, Some(e))),
            _ => None,
        },
        _ => None,
    }
}

impl Planner<'_> {
    /// `probe` joined with `other` as `mode` says by lookups ([`Op::LookupJoin`]), when `other`
    /// is a basic graph pattern (with a filter of its own variables) of one graph per pattern
    /// that shares a variable with every row of `probe`, and the lookups are estimated to read
    /// less than a quarter of its matches (or a hash table of them would pass the plan's table
    /// budget). `probe` comes back (boxed) when they are not.
    #[inline(never)]
    pub(super) fn lookup_join(
        &self,
        mode: JoinMode,
        probe: Phys,
        other: &Node,
        cond: Option<&Expr>,
        active: &[Id],
    ) -> Result<Phys, Box<Phys>> {
        let Some((quads, filter)) = bgp_and_filter(other) else {
            return Err(Box::new(probe));
        };
        let single = matches!(mode, JoinMode::Left);
        if self.given.is_some()
            || quads.is_empty()
            || quads.len() > MAX_CHAIN
            || (single && quads.len() > 1)
            || matches!(mode, JoinMode::Inner)
            || (active.len() != 1 && quads.iter().any(|q| q.g.is_none()))
            || matches!(probe.op, Op::Empty | Op::Unit)
        {
            return Err(Box::new(probe));
        }
        let pats: Vec<Pat> = quads.iter().map(|q| self.pat(q, active)).collect();
        if pats.iter().flatten().any(|s| *s == Slot::Const(None)) {
            return Err(Box::new(probe));
        }
        let vars: BTreeSet<usize> = pats.iter().flatten().filter_map(|s| s.var()).collect();
        let probe_bound = probe.bound();
        // The other side's filter sees only its own variables: on the merged row they hold the
        // same values (a variable bound on both sides is bound alike).
        if filter.is_some_and(|e| !vars_of(e).is_subset(&vars)) {
            return Err(Box::new(probe));
        }
        // A variable fixed by an `=` is written, not matched: the row must not bind it.
        let fixed_clash = pats.iter().flatten().any(|s| match s {
            Slot::Fixed(c, _) => probe_bound.contains(c),
            _ => false,
        });
        if fixed_clash {
            return Err(Box::new(probe));
        }
        let Some((order, lookups, reads, fan)) = self.chain(&pats, &probe.cert) else {
            return Err(Box::new(probe));
        };
        let matches: f64 = pats.iter().map(|p| self.count(p) as f64).sum();
        let table = matches * (self.row_bytes + 24.0);
        let over = self.table_budget.is_some_and(|b| table > b);
        let read = probe.est.max(1.0) * (lookups + reads);
        if lookups > MAX_LOOKUPS_PER_ROW || !(read * 4.0 < matches || over) {
            return Err(Box::new(probe));
        }
        let pats: Vec<Pat> = order.into_iter().map(|k| pats[k]).collect();
        let residual = and_all(filter.into_iter().chain(cond).cloned().collect());
        let (cert, maybe, est) = match mode {
            JoinMode::Left => {
                let cert = probe.cert.clone();
                let maybe = probe_bound
                    .union(&vars)
                    .filter(|c| !cert.contains(c))
                    .copied()
                    .collect();
                (cert, maybe, probe.est * fan.max(1.0))
            }
            JoinMode::Mark(col) => {
                let mut cert = probe.cert.clone();
                cert.insert(col);
                (cert, probe.maybe.clone(), probe.est)
            }
            _ => (probe.cert.clone(), probe.maybe.clone(), probe.est / 2.0),
        };
        let probe = self.spread(probe, read);
        let out = match mode {
            JoinMode::Mark(col) => probe.out.after_changing(&[col]),
            _ => probe.out.clone(),
        };
        let op = Op::LookupJoin {
            mode,
            pats,
            residual: residual.map(Arc::new),
        };
        let mut j = Phys::new(op, vec![probe], est.max(1.0), cert, maybe);
        j.out = out;
        Ok(j)
    }

    /// EXISTS from a large side whose one pattern the other side's few rows can look up: the
    /// distinct values of the shared variables among `right`'s rows, each looked up in
    /// `left`'s pattern (an inner [`Op::IndexJoin`]), instead of all of `left` read past a
    /// table of `right` — `?s rdf:type ?t FILTER EXISTS { ?s rdf:_29 ?b }` looks 100 subjects
    /// up instead of reading 187 k `rdf:type` triples. Each left match comes out once: the left
    /// side is one pattern of one graph (its matches distinct, each with one value of the
    /// shared variables), and those variables are bound in every right row (a right row that
    /// leaves one unbound is compatible with every value). `right` comes back (boxed) when this
    /// does not hold or the lookups would read a quarter of the pattern's matches or more.
    #[inline(never)]
    pub(super) fn semi_from_keys(
        &self,
        left: &Node,
        right: Phys,
        active: &[Id],
    ) -> Result<Phys, Box<Phys>> {
        let Some((quads, filter)) = bgp_and_filter(left) else {
            return Err(Box::new(right));
        };
        let [q] = quads else {
            return Err(Box::new(right));
        };
        if self.given.is_some()
            || q.g.is_some()
            || active.len() != 1
            || matches!(right.op, Op::Empty | Op::Unit)
        {
            return Err(Box::new(right));
        }
        let pat = self.pat(q, active);
        if pat
            .iter()
            .any(|s| matches!(s, Slot::Const(None) | Slot::Fixed(..)))
        {
            return Err(Box::new(right));
        }
        let vars: BTreeSet<usize> = pat.iter().filter_map(|s| s.var()).collect();
        if filter.is_some_and(|e| !vars_of(e).is_subset(&vars)) {
            return Err(Box::new(right));
        }
        let right_bound = right.bound();
        let shared: Vec<usize> = vars.intersection(&right_bound).copied().collect();
        if shared.is_empty() || !shared.iter().all(|v| right.cert.contains(v)) {
            return Err(Box::new(right));
        }
        let card = self.count(&pat) as f64;
        // Matches per value of the shared variables, and the values `right` can hold.
        let d = shared
            .iter()
            .map(|&v| self.distinct(&pat, v, card))
            .fold(1.0f64, f64::max);
        let keys = right.est.min(d).max(1.0);
        let est = keys * card / d.max(1.0);
        let read = self.rows_read(keys, est);
        if read * 4.0 >= card || read.is_nan() {
            return Err(Box::new(right));
        }
        // `right` projected on the shared variables, each combination once.
        let dropped: Vec<usize> = right_bound
            .iter()
            .copied()
            .filter(|c| !shared.contains(c))
            .collect();
        let mut p = Phys::over(Op::Project(shared.clone()), right, keys);
        p.cert = shared.iter().copied().collect();
        p.maybe = BTreeSet::new();
        p.out = p.out.after_changing(&dropped);
        let distinct = self.distinct_rows(p);
        let distinct = self.spread(distinct, read);
        let out = distinct.out.clone();
        let mut cert = distinct.cert.clone();
        cert.extend(vars);
        let mut j = Phys::new(
            Op::IndexJoin { pat, eq: None },
            vec![distinct],
            est.max(1.0),
            cert,
            BTreeSet::new(),
        );
        j.out = out;
        let mut cs = Vec::new();
        if let Some(e) = filter {
            super::join_order::conjuncts(e.clone(), &mut cs);
        }
        Ok(self.filters(j, cs))
    }

    /// The order in which `pats` are looked up from rows that bind `bound`: each next the
    /// connected pattern with the fewest matches per lookup. With it, per input row: the
    /// lookups (one for the first pattern, then one per match of the chain so far), the
    /// matches read by them all, and the matches of the whole chain; `None` when a pattern
    /// never connects.
    fn chain(&self, pats: &[Pat], bound: &BTreeSet<usize>) -> Option<(Vec<usize>, f64, f64, f64)> {
        let mut bound = bound.clone();
        let mut left: Vec<usize> = (0..pats.len()).collect();
        let mut order = Vec::with_capacity(pats.len());
        let (mut lookups, mut reads, mut fan) = (0.0, 0.0, 1.0);
        while !left.is_empty() {
            let per_lookup = |k: usize| -> Option<f64> {
                let card = self.count(&pats[k]) as f64;
                pats[k]
                    .iter()
                    .filter_map(|s| s.var())
                    .filter(|v| bound.contains(v))
                    .map(|v| card / self.distinct(&pats[k], v, card))
                    .reduce(f64::min)
            };
            let (at, m) = left
                .iter()
                .enumerate()
                .filter_map(|(i, &k)| per_lookup(k).map(|m| (i, m)))
                .min_by(|a, b| a.1.total_cmp(&b.1))?;
            let k = left.remove(at);
            lookups += fan;
            fan *= m;
            reads += fan;
            bound.extend(pats[k].iter().filter_map(|s| s.var()));
            order.push(k);
        }
        Some((order, lookups, reads, fan))
    }
}
