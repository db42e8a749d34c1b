//! The planner: a query's terms and graphs as the store's ids, and one plan node per algebra
//! node (the basic graph patterns' join order is `join_order.rs`'s).

use std::cell::Cell;
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::algebra::{Agg, AggFunc, Node, QuadPat, TermPat};
use crate::expr::Expr;
use crate::path::{End, PathExpr};
use nearflow_store::index::{Permutation, Store, DEFAULT_GRAPH};
use nearflow_store::term::{Id, Term};

use super::join_order::conjuncts;
use super::plan::*;
use super::scan_ranges::graphs_of;

/// Rows of an index range read in the time of one index lookup, for [`Op::StarCount`]'s choice
/// between reading the keys into a set and looking each row's key up: 17–23 measured on
/// SP²Bench's q3c count at 1M and 5M (a warm server, 2 vCPUs: 1,101 and 5,060 lookups against
/// 57 k and 285 k Articles read into a set).
const LOOKUP_ROWS: u64 = 16;

/// Matches per distinct value, at least, for [`Op::Runs`] to read a pattern's values under a
/// filter of the value: the runs evaluate the filter once per value on one stream, where a
/// scan evaluates it once per row (once per id, by its table of verdicts) on every stream;
/// from runs of 8 rows on, a run's `2 log2 L + 1` row reads by galloping are fewer than its
/// rows too. Without a filter the runs are always taken: at one row per value they read about
/// two rows per value, and hash nothing.
const RUN_ROWS: f64 = 8.0;

/// The planner: one store version, one query's dataset.
pub struct Planner<'s> {
    /// The store (for ids, counts and statistics).
    pub store: &'s Store,
    /// Degree of parallelism for the parallel operators.
    pub dop: usize,
    /// The graphs merged into the dataset's default graph (those the store holds).
    pub default: Vec<Id>,
    /// The dataset's named graphs the store holds, in id order.
    pub named: Arc<Vec<Id>>,
    /// Rows the consumer of the node being planned takes at most (`LIMIT`, `ASK`), when it stops
    /// early: set by a slice for the nodes below it that pass rows on as they come (projections,
    /// BINDs, filters, unions, basic graph patterns), cleared under any other. A basic graph
    /// pattern planned under it reads the share of its inputs that yields these rows
    /// (`join_order.rs`). `None`: every row is read.
    pub needed: Cell<Option<f64>>,
    /// Bytes a row takes in the plan (its width in ids, `nearflow_sparql::lower::width_class`).
    pub row_bytes: f64,
    /// Bytes the hash tables of one basic graph pattern may take by the estimates, a quarter
    /// of the query's memory limit (the rest for what holds rows above it: a sort, a
    /// DISTINCT): past it, a join that can look its rows up in the store (an index join, its
    /// memory a packet) does, where a hash join would hold a table that the limit would stop
    /// (`join_order.rs`). `None`: no limit.
    pub table_budget: Option<f64>,
    /// The answers of the query's fragments, when the store is split into shards
    /// ([`crate::fragment`]): each basic graph pattern is then joined from its fragments'
    /// rows, never read from `store` (which serves the dictionary and the graphs).
    pub given: Option<&'s crate::fragment::Given>,
}

impl Planner<'_> {
    pub(super) fn term_id(&self, t: &Term) -> Option<Id> {
        self.store.id_of(t.as_ref())
    }

    pub(super) fn slot(&self, t: &TermPat) -> Slot {
        match t {
            TermPat::Var(c) => Slot::Var(*c),
            TermPat::Term(t) => Slot::Const(self.term_id(t)),
            TermPat::Fixed(c, t) => match self.term_id(t) {
                Some(id) => Slot::Fixed(*c, id),
                None => Slot::Const(None),
            },
        }
    }

    pub(super) fn named_id(&self, t: &Term) -> Option<Id> {
        self.term_id(t)
            .filter(|id| self.named.binary_search(id).is_ok())
    }

    /// The graph slot of a pattern reading `g` (`None`: the active graph, which must be one
    /// graph here).
    pub(super) fn graph_slot(&self, g: Option<&TermPat>, active: &[Id]) -> Slot {
        match g {
            None => match active {
                [one] => Slot::Const(Some(*one)),
                _ => Slot::Const(None),
            },
            Some(TermPat::Var(c)) => Slot::Var(*c),
            Some(TermPat::Term(t)) => Slot::Const(self.named_id(t)),
            Some(TermPat::Fixed(c, t)) => match self.named_id(t) {
                Some(id) => Slot::Fixed(*c, id),
                None => Slot::Const(None),
            },
        }
    }

    pub(super) fn pat(&self, q: &QuadPat, active: &[Id]) -> Pat {
        [
            self.slot(&q.t[0]),
            self.slot(&q.t[1]),
            self.slot(&q.t[2]),
            self.graph_slot(q.g.as_ref(), active),
        ]
    }

    /// The graphs a pattern's graph slot reads.
    pub fn graphs_of(&self, g: Slot) -> Vec<Id> {
        graphs_of(g, &self.named)
    }

    /// Triples matching a pattern, exactly.
    pub(super) fn count(&self, p: &Pat) -> u64 {
        self.graphs_of(p[3])
            .into_iter()
            .map(|g| self.store.count_in(g, bound_of(p)))
            .sum()
    }

    /// Plans a logical node, patterns that read the active graph reading `active`.
    ///
    /// A dispatcher only: `plan` recurses once per nesting level (500 OPTIONALs on a 2 MiB
    /// stack), so every node's planning is a function of its own, never inlined, and this
    /// frame stays small.
    pub fn plan(&self, node: &Node, active: &[Id]) -> Phys {
        crate::deeper(|| self.plan_at(node, active))
    }

    pub(super) fn plan_at(&self, node: &Node, active: &[Id]) -> Phys {
        let needed = self.needed.get();
        let streams_through = matches!(
            node,
            Node::Bgp(_)
                | Node::Filter(..)
                | Node::Union(_)
                | Node::Project(..)
                | Node::Extend(..)
                | Node::Slice(..)
        );
        if !streams_through {
            self.needed.set(None);
        }
        let p = self.plan_node(node, active);
        self.needed.set(needed);
        p
    }

    fn plan_node(&self, node: &Node, active: &[Id]) -> Phys {
        match node {
            Node::Bgp(pats) => self.bgp(pats, Vec::new(), active),
            Node::Filter(e, inner) => self.filter(e, inner, active),
            Node::Join(a, b) => self.join_nodes(a, b, active),
            Node::LeftJoin(l, r, e) => self.binary(JoinMode::Left, l, r, e.as_ref(), active),
            Node::Minus(l, r, pairs) => {
                let l = self.plan(l, active);
                let l = if pairs.is_empty() {
                    match self.lookup_join(JoinMode::Minus, l, r, None, active) {
                        Ok(j) => return j,
                        Err(l) => *l,
                    }
                } else {
                    l
                };
                let r = self.plan(r, active);
                let mut j = self.hash_join(JoinMode::Minus, l, r, None);
                if let Op::HashJoin { pairs: p, .. } = &mut j.op {
                    p.clone_from(pairs);
                }
                j
            }
            Node::SemiJoin {
                left,
                right,
                cond,
                anti,
            } => {
                let mode = if *anti {
                    JoinMode::Anti
                } else {
                    JoinMode::Semi
                };
                self.binary(mode, left, right, cond.as_ref(), active)
            }
            Node::MarkJoin { left, right, col } => {
                self.binary(JoinMode::Mark(*col), left, right, None, active)
            }
            Node::Path { s, path, o, g } => self.path(s, path, o, g.as_ref(), active),
            Node::Values(cols, rows) => self.values(cols, rows),
            Node::Group(i, keys, aggs) => self.group(i, keys, aggs, active),
            Node::Graph(name, inner) => self.graph(name, inner),
            Node::Graphs { col, only } => self.graph_rows(*col, only.as_ref()),
            Node::Union(branches) => self.union_nodes(branches, active),
            Node::Distinct(i) => self.distinct_node(i, active),
            Node::OrderBy(i, keys) => self.order_by(i, keys, active),
            Node::Project(i, cols) => self.project(i, cols, active),
            Node::Extend(i, col, e) => self.extend(i, *col, e, active),
            Node::Slice(i, start, len, per) => self.slice(i, *start, *len, per, active),
        }
    }

    #[inline(never)]
    pub(super) fn filter(&self, e: &Expr, inner: &Node, active: &[Id]) -> Phys {
        let mut cs = Vec::new();
        conjuncts(e.clone(), &mut cs);
        match inner {
            Node::Bgp(pats) => self.bgp(pats, cs, active),
            other => {
                let p = self.plan(other, active);
                self.filters(p, cs)
            }
        }
    }

    #[inline(never)]
    pub(super) fn join_nodes(&self, a: &Node, b: &Node, active: &[Id]) -> Phys {
        let a = self.plan(a, active);
        let b = self.plan(b, active);
        self.join(a, b)
    }

    #[inline(never)]
    pub(super) fn binary(
        &self,
        mode: JoinMode,
        l: &Node,
        r: &Node,
        cond: Option<&Expr>,
        active: &[Id],
    ) -> Phys {
        let left = l;
        let l = self.plan(l, active);
        let l = match self.lookup_join(mode, l, r, cond, active) {
            Ok(j) => return j,
            Err(l) => *l,
        };
        let r = self.plan(r, active);
        let r = if matches!(mode, JoinMode::Semi) && cond.is_none() && r.est < l.est {
            match self.semi_from_keys(left, r, active) {
                Ok(j) => return j,
                Err(r) => *r,
            }
        } else {
            r
        };
        self.hash_join(mode, l, r, cond.cloned())
    }

    #[inline(never)]
    pub(super) fn union_nodes(&self, branches: &[Node], active: &[Id]) -> Phys {
        let ps: Vec<Phys> = branches.iter().map(|b| self.plan(b, active)).collect();
        self.union(ps)
    }

    #[inline(never)]
    pub(super) fn distinct_node(&self, i: &Node, active: &[Id]) -> Phys {
        if let Node::Project(inner, cols) = i {
            if let [v] = cols.as_slice() {
                if let Some(p) = self.runs(inner, *v, RunsOut::Rows { n: None }, active) {
                    return p;
                }
            }
        }
        let p = self.plan(i, active);
        self.distinct_rows(p)
    }

    /// `p`'s rows, each once: partitioned by hash of its columns when large.
    pub(super) fn distinct_rows(&self, p: Phys) -> Phys {
        let est = p.est;
        // Over an ORDER BY (`SELECT DISTINCT … ORDER BY …` is DISTINCT over the ordered
        // projection), one stream keeps the order.
        let p = match self.par(est) {
            _ if is_ordered(&p) => self.exchange(p, Partitioning::Single),
            1 => self.exchange(p, Partitioning::Single),
            n => {
                let keys: Vec<usize> = p.bound().into_iter().collect();
                self.exchange(
                    p,
                    Partitioning::Hash {
                        keys,
                        value: None,
                        n,
                    },
                )
            }
        };
        Phys::over(Op::Distinct, p, est)
    }

    #[inline(never)]
    pub(super) fn order_by(&self, i: &Node, keys: &[(Expr, bool)], active: &[Id]) -> Phys {
        let p = self.plan(i, active);
        let est = p.est;
        let p = self.exchange(p, Partitioning::Single);
        Phys::over(Op::Sort(Arc::new(keys.to_vec()), None), p, est)
    }

    #[inline(never)]
    pub(super) fn project(&self, i: &Node, cols: &[usize], active: &[Id]) -> Phys {
        let p = self.plan(i, active);
        let est = p.est;
        let keep: BTreeSet<usize> = cols.iter().copied().collect();
        let dropped: Vec<usize> = p.bound().difference(&keep).copied().collect();
        let mut out = Phys::over(Op::Project(cols.to_vec()), p, est);
        out.cert = out.cert.intersection(&keep).copied().collect();
        out.maybe = out.maybe.intersection(&keep).copied().collect();
        out.out = out.out.after_changing(&dropped);
        out
    }

    #[inline(never)]
    pub(super) fn extend(&self, i: &Node, col: usize, e: &Expr, active: &[Id]) -> Phys {
        let p = self.plan(i, active);
        let est = p.est;
        // A constant, or a column bound in every row, cannot fail: always bound.
        let always = crate::algebra::never_fails(e, &p.cert);
        let mut out = Phys::over(Op::Extend(col, Arc::new(e.clone())), p, est);
        out.out = out.out.after_changing(&[col]);
        if always {
            out.cert.insert(col);
        } else {
            out.maybe.insert(col);
        }
        out
    }

    #[inline(never)]
    pub(super) fn slice(
        &self,
        i: &Node,
        start: usize,
        len: Option<usize>,
        per: &[usize],
        active: &[Id],
    ) -> Phys {
        let needed = self.needed.get();
        if let (Some(len), true) = (len, per.is_empty()) {
            let take = start.saturating_add(len) as f64;
            self.needed.set(Some(needed.map_or(take, |n| n.min(take))));
        }
        let p = self.plan(i, active);
        self.needed.set(needed);
        let mut p = self.exchange(p, Partitioning::Single);
        // ORDER BY … LIMIT: the sort keeps only the rows the slice can take (a whole
        // sort of `ORDER BY ?c LIMIT 1` would keep every row, 4 GB in 9 s, for one).
        if let (Some(len), true) = (len, per.is_empty()) {
            let mut below = &mut p;
            while matches!(below.op, Op::Project(_) | Op::Extend(..)) {
                below = &mut below.inputs[0];
            }
            if let Op::Sort(_, limit) = &mut below.op {
                *limit = Some(start.saturating_add(len));
            }
        }
        let est = (p.est - start as f64)
            .max(0.0)
            .min(len.map_or(f64::INFINITY, |l| l as f64));
        Phys::over(Op::Slice(start, len, per.to_vec()), p, est)
    }

    // The plans of the less common nodes, each its own function and never inlined: `plan`
    // recurses once per nesting level (500 OPTIONALs on a 2 MiB stack), so its frame stays
    // small.

    #[inline(never)]
    pub(super) fn union(&self, ps: Vec<Phys>) -> Phys {
        let ps: Vec<Phys> = ps
            .into_iter()
            .filter(|p| !matches!(p.op, Op::Empty))
            .collect();
        let mut cert = ps.first().map(|p| p.cert.clone()).unwrap_or_default();
        let mut maybe = BTreeSet::new();
        for p in &ps {
            cert = cert.intersection(&p.cert).copied().collect();
            maybe.extend(p.bound());
        }
        maybe = maybe.difference(&cert).copied().collect();
        if ps.is_empty() {
            return Phys::empty(cert);
        }
        let est = ps.iter().map(|p| p.est).sum();
        let streams = ps.iter().map(|p| p.out.count()).sum();
        let mut u = Phys::new(Op::Union, ps, est, cert, maybe);
        u.out = Partitioning::any(streams);
        u
    }

    /// `GRAPH ?g { inner }` that could not be pushed into the patterns: the block planned once
    /// per named graph of the dataset, joined with `?g` bound to it.
    #[inline(never)]
    pub(super) fn graph(&self, name: &TermPat, inner: &Node) -> Phys {
        let branches = match name {
            TermPat::Var(c) => self
                .named
                .iter()
                .map(|&g| {
                    let p = self.plan(inner, &[g]);
                    let one = self.graph_ids(*c, vec![g]);
                    self.join(p, one)
                })
                .collect(),
            // Constant names were pushed into the patterns (`rewrite::graphs`).
            TermPat::Term(t) | TermPat::Fixed(_, t) => match self.named_id(t) {
                Some(g) => vec![self.plan(inner, &[g])],
                None => vec![],
            },
        };
        let mut p = self.union(branches);
        if let TermPat::Var(c) = name {
            p.cert.insert(*c);
            p.maybe.remove(c);
        }
        p
    }

    pub(super) fn graph_ids(&self, col: usize, ids: Vec<Id>) -> Phys {
        if ids.is_empty() {
            return Phys::empty([col].into());
        }
        let est = ids.len() as f64;
        Phys::new(
            Op::Graphs(col, Arc::new(ids)),
            vec![],
            est,
            [col].into(),
            BTreeSet::new(),
        )
    }

    #[inline(never)]
    pub(super) fn graph_rows(&self, col: Option<usize>, only: Option<&Term>) -> Phys {
        let ids: Vec<Id> = match only {
            Some(t) => self.named_id(t).into_iter().collect(),
            None => self.named.to_vec(),
        };
        match col {
            Some(c) => self.graph_ids(c, ids),
            None if ids.is_empty() => Phys::empty(BTreeSet::new()),
            None => Phys::unit(),
        }
    }

    #[inline(never)]
    pub(super) fn path(
        &self,
        s: &TermPat,
        path: &Arc<PathExpr>,
        o: &TermPat,
        g: Option<&TermPat>,
        active: &[Id],
    ) -> Phys {
        let end = |t: &TermPat| match t {
            TermPat::Var(c) => End::Var(*c),
            TermPat::Term(t) => End::Term(t.clone()),
            // Paths are not fixed (`rewrite::fix_constants` fixes BGPs only).
            TermPat::Fixed(c, _) => End::Var(*c),
        };
        let (s, o) = (end(s), end(o));
        let graphs = match g {
            None => PathGraphs {
                graphs: active.to_vec(),
                bind: None,
            },
            Some(TermPat::Var(c)) => PathGraphs {
                graphs: self.named.to_vec(),
                bind: Some(*c),
            },
            Some(TermPat::Term(t) | TermPat::Fixed(_, t)) => PathGraphs {
                graphs: self.named_id(t).into_iter().collect(),
                bind: None,
            },
        };
        let mut cert: BTreeSet<usize> = [&s, &o]
            .into_iter()
            .filter_map(|e| match e {
                End::Var(c) => Some(*c),
                End::Term(_) => None,
            })
            .collect();
        cert.extend(graphs.bind);
        // A guess: a bound end reaches a few nodes; two free ends, a fraction of the
        // store.
        let free = [&s, &o].iter().filter(|e| matches!(e, End::Var(_))).count();
        let est = match free {
            0 => 1.0,
            1 => 100.0,
            _ => (self.store.len() as f64 / 4.0).max(100.0),
        };
        Phys::new(
            Op::Path(s, path.clone(), o, graphs),
            Vec::new(),
            est,
            cert,
            BTreeSet::new(),
        )
    }

    #[inline(never)]
    pub(super) fn values(&self, cols: &[usize], rows: &[Vec<Option<Term>>]) -> Phys {
        let mut cert = BTreeSet::new();
        let mut maybe = BTreeSet::new();
        for (i, &c) in cols.iter().enumerate() {
            if rows.iter().all(|r| r[i].is_some()) {
                cert.insert(c);
            } else if rows.iter().any(|r| r[i].is_some()) {
                maybe.insert(c);
            }
        }
        if rows.is_empty() {
            return Phys::empty(cert);
        }
        let est = rows.len() as f64;
        Phys::new(
            Op::Values(cols.to_vec(), Arc::new(rows.to_vec())),
            Vec::new(),
            est,
            cert,
            maybe,
        )
    }

    /// `COUNT(*)` (or `COUNT(?x)` of a variable the pattern binds) of one triple pattern
    /// with no GROUP BY, or `COUNT(*)` of a UNION of such patterns: the indexes count their
    /// matches exactly ([`Planner::count`], binary searches in each graph it reads; a UNION
    /// keeps every branch's rows, so their sum), so no row is read — `SELECT (COUNT(*) AS ?n)
    /// WHERE { ?s ?p ?o }` answers at once over any store. Only where a count of matches is
    /// the count of solutions: no variable twice in a pattern (`?x ?p ?x` matches fewer), no
    /// filter, one graph or the named graphs (a default graph merged from several `FROM`s
    /// counts a triple once however many hold it), not `DISTINCT`; `COUNT(*)` also through a
    /// projection (a subquery's `SELECT ?x`).
    fn index_count(
        &self,
        i: &Node,
        keys: &[usize],
        aggs: &[(usize, Agg)],
        active: &[Id],
    ) -> Option<Phys> {
        // A projection (a subquery's SELECT, not DISTINCT) keeps every row: `COUNT(*)` over it
        // counts the pattern's matches.
        let i = match i {
            Node::Project(inner, _) if matches!(aggs, [(_, a)] if a.expr.is_none()) => inner,
            _ => i,
        };
        let (true, [(col, agg)]) = (keys.is_empty(), aggs) else {
            return None;
        };
        if agg.func != AggFunc::Count || agg.distinct {
            return None;
        }
        // One pattern's matches, where they are its solutions.
        let one = |n: &Node| -> Option<Pat> {
            let Node::Bgp(quads) = n else {
                return None;
            };
            let [q] = quads.as_slice() else {
                return None;
            };
            if active.len() > 1 && q.g.is_none() {
                return None;
            }
            let pat = self.pat(q, active);
            let vars: Vec<usize> = pat.iter().filter_map(|s| s.var()).collect();
            let once = vars
                .iter()
                .all(|v| vars.iter().filter(|w| *w == v).count() == 1);
            let counts_rows = match &agg.expr {
                None => true,
                Some(Expr::Var(c)) => vars.contains(c),
                Some(_) => false,
            };
            (once && counts_rows).then_some(pat)
        };
        let pats: Vec<Pat> = match i {
            Node::Union(branches) if agg.expr.is_none() => {
                branches.iter().map(one).collect::<Option<Vec<Pat>>>()?
            }
            _ => vec![one(i)?],
        };
        let count = pats
            .iter()
            .map(|pat| {
                if pat.contains(&Slot::Const(None)) {
                    0
                } else {
                    self.count(pat)
                }
            })
            .sum();
        let cert = BTreeSet::from([*col]);
        let op = Op::IndexCount {
            pats,
            col: *col,
            count,
        };
        Some(Phys::new(op, Vec::new(), 1.0, cert, BTreeSet::new()))
    }

    /// `COUNT(*)` of a join of two patterns that share one variable `?s`, or of one pattern
    /// OPTIONAL, EXISTS, NOT EXISTS or MINUS another on one shared variable `?s`, as
    /// [`Op::StarCount`]: for each match of one pattern (the left one of OPTIONAL, EXISTS,
    /// MINUS), the other's matches with its `?s`, summed from the two index ranges, no joined
    /// row formed. An inner join: with a pattern whose only variable is `?s` (a type check,
    /// `?x rdf:type bench:Article`) that pattern is the set; else the one with fewer matches is
    /// counted per value of `?s`, or looked up per match of the other when that has far fewer.
    /// The others: the right side read into a table, or looked up per left match when the left
    /// has far fewer, or grouped by value and each value's left matches counted when the right
    /// has far fewer. Where the sum is the count of solutions: one graph, no variable twice in
    /// a pattern, no condition on the OPTIONAL or EXISTS, not DISTINCT; through a subquery's
    /// projection too.
    fn star_count(
        &self,
        i: &Node,
        keys: &[usize],
        aggs: &[(usize, Agg)],
        active: &[Id],
    ) -> Option<Phys> {
        let ([(col, agg)], true) = (aggs, keys.is_empty()) else {
            return None;
        };
        if agg.func != AggFunc::Count || agg.distinct || agg.expr.is_some() || active.len() != 1 {
            return None;
        }
        let i = match i {
            Node::Project(inner, _) => inner,
            _ => i,
        };
        let one = |n: &Node| match n {
            Node::Bgp(q) if q.len() == 1 => Some(q[0].clone()),
            _ => None,
        };
        let (q0, q1, mode) = match i {
            Node::Bgp(quads) => match quads.as_slice() {
                [q0, q1] => (q0.clone(), q1.clone(), JoinMode::Inner),
                _ => return None,
            },
            Node::LeftJoin(l, r, None) => (one(l)?, one(r)?, JoinMode::Left),
            Node::SemiJoin {
                left,
                right,
                cond: None,
                anti,
            } => (
                one(left)?,
                one(right)?,
                if *anti {
                    JoinMode::Anti
                } else {
                    JoinMode::Semi
                },
            ),
            Node::Minus(l, r, extra) if extra.is_empty() => (one(l)?, one(r)?, JoinMode::Minus),
            _ => return None,
        };
        if q0.g.is_some() || q1.g.is_some() {
            return None;
        }
        let (p0, p1) = (self.pat(&q0, active), self.pat(&q1, active));
        let vars = |p: &Pat| plain_vars(p).filter(|_| p[3].id().is_some());
        let (v0, v1) = (vars(&p0)?, vars(&p1)?);
        let shared: Vec<usize> = v0.iter().copied().filter(|v| v1.contains(v)).collect();
        let [s] = shared.as_slice() else {
            return None;
        };
        let (keys, rows, mult, how) = if mode == JoinMode::Inner {
            let (keys, rows, mult) = match (v0.len(), v1.len()) {
                (1, _) => (p0, p1, false),
                (_, 1) => (p1, p0, false),
                // The smaller pattern is the table, unless the other is small enough to look
                // up from (the larger is then `keys`).
                _ => {
                    let (small, large) = if self.count(&p0) <= self.count(&p1) {
                        (p0, p1)
                    } else {
                        (p1, p0)
                    };
                    if self.count(&small).saturating_mul(LOOKUP_ROWS) < self.count(&large) {
                        (large, small, true)
                    } else {
                        (small, large, true)
                    }
                }
            };
            let probe = self.count(&rows).saturating_mul(LOOKUP_ROWS) < self.count(&keys);
            let how = if probe {
                CountHow::Probe
            } else {
                CountHow::Table
            };
            (keys, rows, mult, how)
        } else {
            // The left side's matches are the rows; the right side's are looked up, held or
            // grouped, by the reads each takes (a lookup as [`LOOKUP_ROWS`] rows read).
            let (l, r) = (self.count(&p0), self.count(&p1));
            let groups = self.distinct(&p1, *s, r as f64) as u64;
            let grouped = r.saturating_add(groups.saturating_mul(LOOKUP_ROWS));
            let probe = l.saturating_mul(LOOKUP_ROWS + 1);
            let table = l.saturating_add(r);
            let how = if grouped <= probe.min(table) {
                CountHow::Grouped
            } else if probe < table {
                CountHow::Probe
            } else {
                CountHow::Table
            };
            (p1, p0, v1.len() > 1, how)
        };
        let op = Op::StarCount {
            keys,
            rows,
            s: *s,
            col: *col,
            how,
            mult,
            mode,
        };
        Some(Phys::new(
            op,
            Vec::new(),
            1.0,
            BTreeSet::from([*col]),
            BTreeSet::new(),
        ))
    }

    /// The values of `v` in one pattern, each with its matches, as an [`Op::Runs`]: where
    /// `i` is one pattern of the one active graph (or a FILTER of `v` alone over it), every
    /// variable once and every constant in the store, `v` the key column after its constants
    /// (`?s rdf:type ?o`: POS); under a filter, where the pattern has at least [`RUN_ROWS`]
    /// matches per value of `v` by the statistics.
    fn runs(&self, i: &Node, v: usize, out: RunsOut, active: &[Id]) -> Option<Phys> {
        if self.given.is_some() || active.len() != 1 {
            return None;
        }
        let (filter, i) = match i {
            Node::Filter(e, inner) if e.of_one_value() == Some(v) => {
                (Some(Arc::new(e.clone())), &**inner)
            }
            _ => (None, i),
        };
        let Node::Bgp(quads) = i else {
            return None;
        };
        let [q] = quads.as_slice() else {
            return None;
        };
        if q.g.is_some() {
            return None;
        }
        let pat = self.pat(q, active);
        plain_vars(&pat)?;
        let (order, _) = Permutation::for_bound(bound_of(&pat).map(|x| x.is_some()));
        if super::join_order::sorted_on(&pat, order) != Some(v) {
            return None;
        }
        let n = self.count(&pat) as f64;
        let d = self.distinct(&pat, v, n);
        if filter.is_some() && d * RUN_ROWS > n {
            return None;
        }
        let (est, cert) = match out {
            RunsOut::Rows { n: None } => (d, BTreeSet::from([v])),
            RunsOut::Rows { n: Some(c) } => (d, BTreeSet::from([v, c])),
            RunsOut::Count { col, .. } => (1.0, BTreeSet::from([col])),
        };
        let op = Op::Runs {
            pat,
            v,
            filter,
            out,
        };
        Some(Phys::new(op, Vec::new(), est, cert, BTreeSet::new()))
    }

    /// A GROUP BY or an aggregate answered by [`Planner::runs`]: `GROUP BY ?v` with at most a
    /// `COUNT(*)` (or a `COUNT` of a variable of the pattern, bound in every match) over one
    /// pattern; `COUNT(*)` of one pattern filtered on `?v`; `COUNT(DISTINCT ?v)`; and
    /// `COUNT(*)` of the rows of a `SELECT DISTINCT ?v` or of a `GROUP BY ?v` over one pattern
    /// (projections and BINDs between keep every row).
    fn group_runs(
        &self,
        i: &Node,
        keys: &[usize],
        aggs: &[(usize, Agg)],
        active: &[Id],
    ) -> Option<Phys> {
        let rows = |col: usize| RunsOut::Rows { n: Some(col) };
        let count = |col: usize, matches: bool| RunsOut::Count { col, matches };
        match (keys, aggs) {
            ([v], []) => self.runs(i, *v, RunsOut::Rows { n: None }, active),
            ([v], [(col, a)]) if a.func == AggFunc::Count && !a.distinct => {
                let p = self.runs(i, *v, rows(*col), active)?;
                // `COUNT(?x)` counts the rows binding `?x`: every match, where the pattern
                // has `?x`.
                let Op::Runs { pat, .. } = &p.op else {
                    unreachable!("runs")
                };
                match &a.expr {
                    None => Some(p),
                    Some(Expr::Var(x)) if pat[..3].iter().any(|s| s.var() == Some(*x)) => Some(p),
                    Some(_) => None,
                }
            }
            ([], [(col, a)]) if a.func == AggFunc::Count => {
                if a.distinct {
                    let Some(Expr::Var(v)) = &a.expr else {
                        return None;
                    };
                    return self.runs(i, *v, count(*col, false), active);
                }
                if a.expr.is_some() {
                    return None;
                }
                // Projections and BINDs keep every row.
                let mut n = i;
                while let Node::Project(x, _) | Node::Extend(x, ..) = n {
                    n = x;
                }
                match n {
                    Node::Distinct(x) => match &**x {
                        Node::Project(inner, cols) if cols.len() == 1 => {
                            self.runs(inner, cols[0], count(*col, false), active)
                        }
                        _ => None,
                    },
                    Node::Group(inner, gk, _) if gk.len() == 1 => {
                        self.runs(inner, gk[0], count(*col, false), active)
                    }
                    Node::Filter(e, _) => {
                        self.runs(n, e.of_one_value()?, count(*col, true), active)
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    #[inline(never)]
    pub(super) fn group(
        &self,
        i: &Node,
        keys: &[usize],
        aggs: &[(usize, Agg)],
        active: &[Id],
    ) -> Phys {
        // The counts from the indexes read the store's: not a shard's.
        if let Some(p) = self
            .given
            .is_none()
            .then(|| {
                self.index_count(i, keys, aggs, active)
                    .or_else(|| self.star_count(i, keys, aggs, active))
                    .or_else(|| self.group_runs(i, keys, aggs, active))
            })
            .flatten()
        {
            return p;
        }
        let p = self.plan(i, active);
        // One row per group: without keys exactly one; with keys at most the input's.
        let est = if keys.is_empty() {
            1.0
        } else {
            (p.est / 2.0).max(1.0)
        };
        let cert: BTreeSet<usize> = keys
            .iter()
            .copied()
            .filter(|k| p.cert.contains(k))
            .chain(
                aggs.iter()
                    .filter(|(_, a)| a.func == AggFunc::Count)
                    .map(|(c, _)| *c),
            )
            .collect();
        let maybe = keys
            .iter()
            .copied()
            .chain(aggs.iter().map(|(c, _)| *c))
            .filter(|c| !cert.contains(c))
            .collect();
        let n = self.par(p.est);
        // Two phases when the input is already split and every aggregate merges (DISTINCT
        // ones need every value in one place): only the groups' states cross streams.
        // Partial aggregates pay when they shrink the input: with about as many groups as
        // rows (authors of papers), routing the rows by key to one aggregation each is cheaper
        // than aggregating twice.
        let groups = self.distinct_keys(&p, keys);
        let shrinks = groups.is_none_or(|g| g * 4.0 <= p.est);
        let two_phase = shrinks && p.out.count() > 1 && aggs.iter().all(|(_, a)| !a.distinct);
        let keyed = |n: usize| Partitioning::Hash {
            keys: keys.to_vec(),
            value: None,
            n,
        };
        let (p, out) = if two_phase {
            let out = if n > 1 && !keys.is_empty() {
                keyed(n)
            } else {
                Partitioning::Single
            };
            (p, out)
        } else {
            let to = if n > 1 && !keys.is_empty() {
                keyed(n)
            } else {
                Partitioning::Single
            };
            let p = self.exchange(p, to);
            let out = p.out.clone();
            (p, out)
        };
        let mut g = Phys::new(
            Op::Group(keys.to_vec(), Arc::new(aggs.to_vec()), two_phase),
            vec![p],
            est,
            cert,
            maybe,
        );
        g.out = out;
        g
    }

    /// The estimated number of distinct values of the columns `keys` in `p`'s rows: the
    /// product of each key's distinct values where a pattern of `p` binds it with a constant
    /// predicate (the store's per-predicate statistics); `None` when a key has no such
    /// pattern. No keys: one group.
    pub(super) fn distinct_keys(&self, p: &Phys, keys: &[usize]) -> Option<f64> {
        let mut groups = 1.0f64;
        for &k in keys {
            groups *= self.column_distinct(p, k)?;
        }
        Some(groups.min(p.est.max(1.0)))
    }

    pub(super) fn column_distinct(&self, p: &Phys, col: usize) -> Option<f64> {
        match &p.op {
            Op::Scan { pat, .. } | Op::IndexJoin { pat, .. }
                if pat.iter().any(|s| s.var() == Some(col)) =>
            {
                let card = if matches!(p.op, Op::Scan { .. }) {
                    p.est
                } else {
                    self.count(pat) as f64
                };
                Some(self.distinct(pat, col, card))
            }
            _ => p.inputs.iter().find_map(|i| self.column_distinct(i, col)),
        }
    }
}

/// The variables of a pattern's subject, predicate and object, where each is there once and
/// every constant is in the store: then each match is one solution, binding each of them.
fn plain_vars(p: &Pat) -> Option<Vec<usize>> {
    let v: Vec<usize> = p[..3].iter().filter_map(|s| s.var()).collect();
    let once = v.iter().all(|a| v.iter().filter(|b| *b == a).count() == 1);
    (once && !p[..3].contains(&Slot::Const(None))).then_some(v)
}

/// The graphs of a dataset: the default graph's (merged) and the named ones, as ids of `store`.
pub fn dataset_ids(
    store: &Store,
    dataset: Option<&crate::algebra::Dataset>,
) -> (Vec<Id>, Arc<Vec<Id>>) {
    match dataset {
        None => (
            vec![DEFAULT_GRAPH],
            Arc::new(store.named_graphs().collect()),
        ),
        Some(d) => {
            let id = |iri: &String| store.id_of(nearflow_store::term::TermRef::Iri(iri));
            let mut default: Vec<Id> = d.default.iter().filter_map(id).collect();
            default.sort_unstable();
            default.dedup();
            let mut named: Vec<Id> = if d.all_named {
                store.named_graphs().collect()
            } else {
                d.named.iter().filter_map(id).collect()
            };
            named.sort_unstable();
            named.dedup();
            (default, Arc::new(named))
        }
    }
}
