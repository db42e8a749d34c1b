//! The physical plan and the planner that makes it from the logical algebra when the query
//! meets a store: terms become the store's ids here (a constant the store lacks makes its
//! pattern match nothing), the dataset's graphs become graph ids, and the planner chooses join
//! order, join algorithms and parallelism from the store's statistics.
//!
//! A basic graph pattern is ordered greedily: start from the pattern with the fewest matches
//! (counted exactly by binary search), then repeatedly add the connected pattern whose join is
//! estimated smallest, joined by an **index join** (a lookup per input row) when the input is
//! small against the pattern, by a **merge join** when both sides are index scans of one graph
//! sorted on a shared variable (Q4's `?journal`), otherwise by a **hash join** on the shared
//! variables. Filter conjuncts go where their variables are first all bound; `?a = ?b` across
//! two unconnected parts (Q5a, Q12a) becomes a hash join on a *value key*
//! ([`value_key`](super::expr::value_key): terms that may be `=` share a key) with the `=` kept as
//! a residual check, so it is exact for every literal; an equality between the two sides
//! inside an OPTIONAL's filter becomes its key the same way.
//!
//! **Parallelism is part of the plan** (as DataFusion's `EnforceDistribution` makes it): every
//! node says how its output is partitioned ([`Partitioning`]: one stream, `n` streams, or `n`
//! streams routed by the hash of key columns), and the planner inserts an [`Op::Exchange`]
//! where an operator needs another partitioning than its input has — a hash join both inputs
//! hash-partitioned on its keys (an input already partitioned so, by a join on the same keys
//! below, is not moved again), DISTINCT and GROUP BY on their keys, a sort and a slice one
//! stream. Row-by-row operators (filters, BINDs, projections, index joins) run once per
//! stream of their input. `--explain` shows every exchange.
//!
//! Length: the planner is one concept — the cost model, the join order, the algorithms and
//! the partitioning decide together; splitting them would scatter each decision over files.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::algebra::{vars_of, Agg, AggFunc, Node, QuadPat, TermPat};
use super::expr::Expr;
use super::path::{End, PathExpr};
use super::rewrite::and_all;
use nearflow_rdf::store::{key_prefix, Permutation, Store, DEFAULT_GRAPH};
use nearflow_rdf::term::{Id, Term};

/// Rows below which an operator is not worth parallelising.
pub const PAR_MIN_ROWS: f64 = 20_000.0;

/// Counters of one operator, filled while it runs.
#[derive(Debug, Default)]
pub struct OpStat {
    /// Rows it produced.
    pub rows: AtomicU64,
    /// Nanoseconds spent in it (when timing is on).
    pub nanos: AtomicU64,
    /// For an operator that reads the store's indexes (scans, index and merge joins): index
    /// rows read, one more per binary search.
    pub reads: AtomicU64,
    /// Of [`reads`](Self::reads), those from memory of another NUMA node than the reading
    /// worker's (by where the partition or replica was built: nominal on a synthetic machine).
    pub remote_reads: AtomicU64,
}

/// A position of a physical quad pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// A variable's column.
    Var(usize),
    /// A constant: its id, or `None` when the store does not hold it (nothing matches).
    Const(Option<Id>),
    /// A variable fixed to a constant by an equality filter: matched as the constant, and the
    /// column still receives it.
    Fixed(usize, Id),
}

impl Slot {
    /// The column it binds, if any.
    pub fn var(self) -> Option<usize> {
        match self {
            Slot::Var(c) | Slot::Fixed(c, _) => Some(c),
            Slot::Const(_) => None,
        }
    }

    /// The id it matches, if fixed.
    pub fn id(self) -> Option<Id> {
        match self {
            Slot::Const(id) => id,
            Slot::Fixed(_, id) => Some(id),
            Slot::Var(_) => None,
        }
    }
}

/// A quad pattern over ids: subject, predicate, object, graph. The graph slot is a constant
/// (one graph: [`DEFAULT_GRAPH`] or a named graph), or a variable ranging over the named graphs
/// of the query's dataset ([`Planner::named`]), or a variable fixed to one of them.
pub type Pat = [Slot; 4];

/// The ids a pattern fixes, per position of the triple.
pub fn bound_of(p: &Pat) -> [Option<Id>; 3] {
    [p[0].id(), p[1].id(), p[2].id()]
}

/// How an operator's output is split into streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Partitioning {
    /// One stream.
    Single,
    /// `n` streams (`n` > 1), a row in any.
    Any(usize),
    /// `n` streams (`n` > 1), a row in the one its key's hash picks: the ids of `keys` and,
    /// for a value-key join, the value key of column `value`.
    Hash {
        /// Key columns, compared by id.
        keys: Vec<usize>,
        /// A column compared by value (`=`).
        value: Option<usize>,
        /// Streams.
        n: usize,
    },
}

impl Partitioning {
    /// Streams.
    pub fn count(&self) -> usize {
        match self {
            Partitioning::Single => 1,
            Partitioning::Any(n) | Partitioning::Hash { n, .. } => *n,
        }
    }

    fn any(n: usize) -> Partitioning {
        if n <= 1 {
            Partitioning::Single
        } else {
            Partitioning::Any(n)
        }
    }

    /// The partitioning after columns `changed` are cleared or overwritten: a hash on them no
    /// longer holds.
    fn after_changing(&self, changed: &[usize]) -> Partitioning {
        match self {
            Partitioning::Hash { keys, value, n }
                if keys.iter().chain(value).any(|c| changed.contains(c)) =>
            {
                Partitioning::Any(*n)
            }
            other => other.clone(),
        }
    }
}

impl std::fmt::Display for Partitioning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Partitioning::Single => write!(f, "1 stream"),
            Partitioning::Any(n) => write!(f, "{n} streams"),
            Partitioning::Hash { n, .. } => write!(f, "{n} streams by hash"),
        }
    }
}

/// How a hash join combines its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinMode {
    /// Inner join.
    Inner,
    /// OPTIONAL: every probe row, with its matches or alone.
    Left,
    /// Probe rows with no match (OPTIONAL + `!bound`, `FILTER NOT EXISTS`).
    Anti,
    /// MINUS: probe rows with no compatible match sharing a bound variable.
    Minus,
    /// `FILTER EXISTS`: probe rows with a compatible match, each once.
    Semi,
    /// Every probe row, each once, with this column set to `true` or `false`: whether it has
    /// a compatible match (an `EXISTS` inside an expression).
    Mark(usize),
}

/// Where a property path is walked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathGraphs {
    /// The graphs: merged into one (their union, each triple once) when `bind` is `None`,
    /// else each walked on its own.
    pub graphs: Vec<Id>,
    /// The column bound to the graph walked (`GRAPH ?g { … path … }`).
    pub bind: Option<usize>,
}

/// A physical operator.
#[derive(Debug)]
pub enum Op {
    /// One empty solution.
    Unit,
    /// No solution.
    Empty,
    /// An index range scan.
    Scan {
        /// The pattern.
        pat: Pat,
        /// The permutation read.
        order: Permutation,
    },
    /// A lookup of `pat` per input row.
    IndexJoin {
        /// The pattern (its variables bound by the input are looked up).
        pat: Pat,
    },
    /// A hash join: input 0 probes, input 1 is built.
    HashJoin {
        /// Inner, left, anti, minus, semi or mark.
        mode: JoinMode,
        /// Columns bound on both sides, compared by id.
        keys: Vec<usize>,
        /// A value-key pair (probe column, build column) from an `=`.
        value_key: Option<(usize, usize)>,
        /// Columns that may be bound on both sides: checked for compatibility.
        check: Vec<usize>,
        /// The OPTIONAL's (or the rewritten filter's) expression.
        residual: Option<Arc<Expr>>,
        /// MINUS: key columns that pair the two sides without counting as a shared variable.
        pairs: Vec<usize>,
    },
    /// A merge join of its two inputs, both [`Op::Scan`]s of one graph sorted on column `on`
    /// (the first key column after each scan's bound prefix). It reads the two index ranges
    /// itself, in parallel over `ranges` ranges of `on`'s values; the inputs are there for the
    /// plan's text.
    MergeJoin {
        /// The column both scans are sorted on.
        on: usize,
        /// Ranges of the join column's values, one operator each.
        ranges: usize,
    },
    /// Repartitions its input's streams.
    Exchange(Partitioning),
    /// FILTER.
    Filter(Arc<Expr>),
    /// UNION (bag union; order not kept).
    Union,
    /// DISTINCT.
    Distinct,
    /// ORDER BY; with a limit, only the first `limit` rows of the order are kept (a top-k:
    /// a LIMIT above it, through projections and BINDs, which keep every row).
    Sort(Arc<Vec<(Expr, bool)>>, Option<usize>),
    /// OFFSET/LIMIT, of all the rows or of each key's rows (the key columns).
    Slice(usize, Option<usize>, Vec<usize>),
    /// Projection (other columns cleared).
    Project(Vec<usize>),
    /// BIND / a SELECT expression: the column gets the expression's value, or stays unbound
    /// when it is an error.
    Extend(usize, Arc<Expr>),
    /// A property path: every solution of `subject path object`, from the store.
    Path(End, Arc<PathExpr>, End, PathGraphs),
    /// VALUES: constant rows (their terms get ids when the plan is built for a run).
    Values(Vec<usize>, Arc<Vec<Vec<Option<Term>>>>),
    /// One row per graph id, the column bound to it.
    Graphs(usize, Arc<Vec<Id>>),
    /// GROUP BY the key columns, computing the aggregates (only the keys and the aggregates'
    /// columns are bound in its output); in two phases when the flag is set (a partial
    /// aggregation per input stream, the groups' states then merged: `exec/group.rs`).
    Group(Vec<usize>, Arc<Vec<(usize, Agg)>>, bool),
}

/// A node of the physical plan.
#[derive(Debug)]
pub struct Phys {
    /// The operator.
    pub op: Op,
    /// Its inputs.
    pub inputs: Vec<Phys>,
    /// Estimated rows out.
    pub est: f64,
    /// Columns bound in every row.
    pub cert: BTreeSet<usize>,
    /// Columns bound in some rows.
    pub maybe: BTreeSet<usize>,
    /// How its output is split into streams.
    pub out: Partitioning,
    /// Its counters.
    pub stat: Arc<OpStat>,
}

impl Phys {
    fn new(
        op: Op,
        inputs: Vec<Phys>,
        est: f64,
        cert: BTreeSet<usize>,
        maybe: BTreeSet<usize>,
    ) -> Phys {
        Phys {
            op,
            inputs,
            est,
            cert,
            maybe,
            out: Partitioning::Single,
            stat: Arc::default(),
        }
    }

    /// Over one input, keeping its columns and its partitioning.
    fn over(op: Op, input: Phys, est: f64) -> Phys {
        let (cert, maybe, out) = (input.cert.clone(), input.maybe.clone(), input.out.clone());
        let mut p = Phys::new(op, vec![input], est, cert, maybe);
        p.out = out;
        p
    }

    fn empty(cert: BTreeSet<usize>) -> Phys {
        Phys::new(Op::Empty, vec![], 0.0, cert, BTreeSet::new())
    }

    fn unit() -> Phys {
        Phys::new(Op::Unit, vec![], 1.0, BTreeSet::new(), BTreeSet::new())
    }

    /// Columns bound in some row.
    pub fn bound(&self) -> BTreeSet<usize> {
        self.cert.union(&self.maybe).copied().collect()
    }
}

/// Conjuncts of an `&&` chain.
fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::And(a, b) => {
            conjuncts(*a, out);
            conjuncts(*b, out);
        }
        e => out.push(e),
    }
}

/// `?a = ?b`: the two columns.
fn var_eq(e: &Expr) -> Option<(usize, usize)> {
    match e {
        Expr::Eq(a, b) => match (&**a, &**b) {
            (Expr::Var(x), Expr::Var(y)) if x != y => Some((*x, *y)),
            _ => None,
        },
        _ => None,
    }
}

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
}

impl Planner<'_> {
    fn par(&self, est: f64) -> usize {
        if est >= PAR_MIN_ROWS {
            self.dop.max(1)
        } else {
            1
        }
    }

    /// `p` with its output repartitioned as `to` (as it is when it already is).
    fn exchange(&self, p: Phys, to: Partitioning) -> Phys {
        if p.out == to || (to.count() == 1 && p.out.count() == 1) {
            return p;
        }
        let est = p.est;
        let mut x = Phys::over(Op::Exchange(to.clone()), p, est);
        x.out = to;
        x
    }

    fn term_id(&self, t: &Term) -> Option<Id> {
        self.store.id_of(t.as_ref())
    }

    fn slot(&self, t: &TermPat) -> Slot {
        match t {
            TermPat::Var(c) => Slot::Var(*c),
            TermPat::Term(t) => Slot::Const(self.term_id(t)),
            TermPat::Fixed(c, t) => match self.term_id(t) {
                Some(id) => Slot::Fixed(*c, id),
                None => Slot::Const(None),
            },
        }
    }

    fn named_id(&self, t: &Term) -> Option<Id> {
        self.term_id(t)
            .filter(|id| self.named.binary_search(id).is_ok())
    }

    /// The graph slot of a pattern reading `g` (`None`: the active graph, which must be one
    /// graph here).
    fn graph_slot(&self, g: Option<&TermPat>, active: &[Id]) -> Slot {
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

    fn pat(&self, q: &QuadPat, active: &[Id]) -> Pat {
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
    fn count(&self, p: &Pat) -> u64 {
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

    fn plan_at(&self, node: &Node, active: &[Id]) -> Phys {
        match node {
            Node::Bgp(pats) => self.bgp(pats, Vec::new(), active),
            Node::Filter(e, inner) => self.filter(e, inner, active),
            Node::Join(a, b) => self.join_nodes(a, b, active),
            Node::LeftJoin(l, r, e) => self.binary(JoinMode::Left, l, r, e.as_ref(), active),
            Node::Minus(l, r, pairs) => {
                let (l, r) = (self.plan(l, active), self.plan(r, active));
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
    fn filter(&self, e: &Expr, inner: &Node, active: &[Id]) -> Phys {
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
    fn join_nodes(&self, a: &Node, b: &Node, active: &[Id]) -> Phys {
        let a = self.plan(a, active);
        let b = self.plan(b, active);
        self.join(a, b)
    }

    #[inline(never)]
    fn binary(
        &self,
        mode: JoinMode,
        l: &Node,
        r: &Node,
        cond: Option<&Expr>,
        active: &[Id],
    ) -> Phys {
        let l = self.plan(l, active);
        let r = self.plan(r, active);
        self.hash_join(mode, l, r, cond.cloned())
    }

    #[inline(never)]
    fn union_nodes(&self, branches: &[Node], active: &[Id]) -> Phys {
        let ps: Vec<Phys> = branches.iter().map(|b| self.plan(b, active)).collect();
        self.union(ps)
    }

    #[inline(never)]
    fn distinct_node(&self, i: &Node, active: &[Id]) -> Phys {
        let p = self.plan(i, active);
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
    fn order_by(&self, i: &Node, keys: &[(Expr, bool)], active: &[Id]) -> Phys {
        let p = self.plan(i, active);
        let est = p.est;
        let p = self.exchange(p, Partitioning::Single);
        Phys::over(Op::Sort(Arc::new(keys.to_vec()), None), p, est)
    }

    #[inline(never)]
    fn project(&self, i: &Node, cols: &[usize], active: &[Id]) -> Phys {
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
    fn extend(&self, i: &Node, col: usize, e: &Expr, active: &[Id]) -> Phys {
        let p = self.plan(i, active);
        let est = p.est;
        // A constant, or a column bound in every row, cannot fail: always bound.
        let always = super::algebra::never_fails(e, &p.cert);
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
    fn slice(
        &self,
        i: &Node,
        start: usize,
        len: Option<usize>,
        per: &[usize],
        active: &[Id],
    ) -> Phys {
        let p = self.plan(i, active);
        let mut p = self.exchange(p, Partitioning::Single);
        // ORDER BY … LIMIT: the sort keeps only the rows the slice can take (issue 40:
        // `ORDER BY ?c LIMIT 1` kept every row, 4 GB in 9 s, for one).
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
    fn union(&self, ps: Vec<Phys>) -> Phys {
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
    fn graph(&self, name: &TermPat, inner: &Node) -> Phys {
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

    fn graph_ids(&self, col: usize, ids: Vec<Id>) -> Phys {
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
    fn graph_rows(&self, col: Option<usize>, only: Option<&Term>) -> Phys {
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
    fn path(
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
    fn values(&self, cols: &[usize], rows: &[Vec<Option<Term>>]) -> Phys {
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

    #[inline(never)]
    fn group(&self, i: &Node, keys: &[usize], aggs: &[(usize, Agg)], active: &[Id]) -> Phys {
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
    fn distinct_keys(&self, p: &Phys, keys: &[usize]) -> Option<f64> {
        let mut groups = 1.0f64;
        for &k in keys {
            groups *= self.column_distinct(p, k)?;
        }
        Some(groups.min(p.est.max(1.0)))
    }

    fn column_distinct(&self, p: &Phys, col: usize) -> Option<f64> {
        match &p.op {
            Op::Scan { pat, .. } | Op::IndexJoin { pat }
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

    /// An inner join of two planned sides.
    #[inline(never)]
    fn join(&self, a: Phys, b: Phys) -> Phys {
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
    fn hash_join(&self, mode: JoinMode, probe: Phys, build: Phys, residual: Option<Expr>) -> Phys {
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

    fn filters(&self, p: Phys, cs: Vec<Expr>) -> Phys {
        match and_all(cs) {
            None => p,
            Some(e) => {
                let est = p.est / 2.0;
                Phys::over(Op::Filter(Arc::new(e)), p, est)
            }
        }
    }

    /// Plans a basic graph pattern with the filter conjuncts of its group.
    fn bgp(&self, quads: &[QuadPat], cs: Vec<Expr>, active: &[Id]) -> Phys {
        let all_vars: BTreeSet<usize> = quads.iter().flat_map(QuadPat::vars).collect();
        if quads.is_empty() {
            return self.filters(Phys::unit(), cs);
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
            cur = if shares && cur.est * 4.0 < cards[k] {
                let mut cert = cur.cert.clone();
                cert.extend(vars);
                let maybe = cur.maybe.clone();
                let cur = match self.par(cur.est) {
                    n if n > cur.out.count() => self.exchange(cur, Partitioning::Any(n)),
                    _ => cur,
                };
                let out = cur.out.clone();
                let mut j = Phys::new(Op::IndexJoin { pat }, vec![cur], est.max(1.0), cert, maybe);
                j.out = out;
                j
            } else {
                let scan = self.scan(pat, cards[k]);
                // A merge join reads the sorted indexes by position: not while the store has
                // a delta beside them (a hash join over the scans, which merge it in).
                let merge = if self.store.delta().is_empty() {
                    merge_column(&cur, &scan)
                } else {
                    None
                };
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
    fn merged_bgp(&self, quads: &[QuadPat], cs: Vec<Expr>, active: &[Id]) -> Phys {
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

    /// Wraps `p` in the conjuncts whose columns it always binds.
    fn apply_ready(&self, p: Phys, cs: &mut Vec<Expr>) -> Phys {
        let (ready, rest): (Vec<Expr>, Vec<Expr>) = std::mem::take(cs)
            .into_iter()
            .partition(|c| vars_of(c).is_subset(&p.cert));
        *cs = rest;
        self.filters(p, ready)
    }

    fn scan(&self, pat: Pat, card: f64) -> Phys {
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
    fn distinct(&self, pat: &Pat, v: usize, card: f64) -> f64 {
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

/// The graphs a graph slot reads: its one graph, or the named graphs `named` for a variable.
pub fn graphs_of(g: Slot, named: &[Id]) -> Vec<Id> {
    match g {
        Slot::Const(Some(id)) | Slot::Fixed(_, id) => vec![id],
        Slot::Const(None) => vec![],
        Slot::Var(_) => named.to_vec(),
    }
}

/// One graph's rows a scan stream reads: a range of the sorted indexes' rows in one
/// partition, and the ranges of the store's delta (positions in
/// [`Delta::added_rows`](nearflow_rdf::delta::Delta::added_rows) and `removed_rows` of the
/// scan's order) that fall between this range's first key and the next range's, merged in as
/// it is read so that the stream stays sorted.
#[derive(Clone, Debug)]
pub struct ScanRange {
    /// The graph.
    pub graph: Id,
    /// Rows of the partition.
    pub rows: std::ops::Range<usize>,
    /// The delta's added rows merged in.
    pub added: std::ops::Range<usize>,
    /// The delta's removed rows left out.
    pub removed: std::ops::Range<usize>,
}

/// One stream of a scan: a partition of the store, and the graphs' ranges it reads there.
pub type ScanPiece = (usize, Vec<ScanRange>);

/// The streams a scan of `pat` in `order` reads: one per partition that holds matches, cut
/// into `dop / partitions` chunks of rows when it holds at least [`PAR_MIN_ROWS`] (a chunk is
/// a list of graphs' ranges, all in one partition). A version of the store with a delta
/// (`nearflow_rdf::delta`) has the delta's rows of each graph given to the ranges they sort
/// into (to partition 0 for a graph the indexes lack).
pub fn scan_pieces(
    store: &Store,
    pat: &Pat,
    order: Permutation,
    named: &[Id],
    dop: usize,
) -> Vec<ScanPiece> {
    let bound = bound_of(pat);
    let k = bound.iter().filter(|x| x.is_some()).count();
    let prefix = key_prefix(order, bound, k);
    let parts = store.perm(order).len().max(1);
    let graphs = graphs_of(pat[3], named);
    let mut per_part: Vec<Vec<(Id, std::ops::Range<usize>)>> = vec![Vec::new(); parts];
    for &g in &graphs {
        for (p, r) in store.ranges(order, g, &prefix) {
            per_part[p].push((g, r));
        }
    }
    let mut out: Vec<ScanPiece> = Vec::new();
    for (p, pieces) in per_part.into_iter().enumerate() {
        let total: usize = pieces.iter().map(|(_, r)| r.len()).sum();
        if total == 0 {
            continue;
        }
        let chunks = if (total as f64) < PAR_MIN_ROWS {
            1
        } else {
            dop.div_ceil(parts).max(1)
        };
        // Cut the concatenated pieces at `total * c / chunks`.
        let mut at = 0;
        let mut it = pieces.into_iter().peekable();
        let mut current: Option<(Id, std::ops::Range<usize>)> = it.next();
        for c in 0..chunks {
            let end = total * (c + 1) / chunks;
            let mut chunk = Vec::new();
            while at < end {
                let Some((g, r)) = current.take() else { break };
                let take = (end - at).min(r.len());
                chunk.push(ScanRange {
                    graph: g,
                    rows: r.start..r.start + take,
                    added: 0..0,
                    removed: 0..0,
                });
                at += take;
                if take < r.len() {
                    current = Some((g, r.start + take..r.end));
                } else {
                    current = it.next();
                }
            }
            if !chunk.is_empty() {
                out.push((p, chunk));
            }
        }
    }
    let delta = store.delta();
    if !delta.is_empty() {
        give_delta(store, order, &prefix, &graphs, &mut out);
    }
    out
}

/// Gives each range of `out` the delta's rows of its graph that sort between its first key and
/// the next range's of the same graph (the streams are in key order per graph).
fn give_delta(
    store: &Store,
    order: Permutation,
    prefix: &[Id],
    graphs: &[Id],
    out: &mut Vec<ScanPiece>,
) {
    use nearflow_rdf::delta::key_of;
    let delta = store.delta();
    let (added, removed) = (delta.added_rows(order), delta.removed_rows(order));
    let parts = store.perm(order).partitions();
    for &g in graphs {
        let (ar, rr) = (
            delta.added_range(order, g, prefix),
            delta.removed_range(order, g, prefix),
        );
        if ar.is_empty() && rr.is_empty() {
            continue;
        }
        let at: Vec<(usize, usize)> = out
            .iter()
            .enumerate()
            .flat_map(|(i, (_, rs))| {
                rs.iter()
                    .enumerate()
                    .filter(|(_, r)| r.graph == g)
                    .map(move |(j, _)| (i, j))
            })
            .collect();
        if at.is_empty() {
            // The indexes hold none of it: one stream of the delta's rows alone.
            out.push((
                0,
                vec![ScanRange {
                    graph: g,
                    rows: 0..0,
                    added: ar,
                    removed: 0..0,
                }],
            ));
            continue;
        }
        let (mut a, mut r) = (ar.start, rr.start);
        for (n, &(i, j)) in at.iter().enumerate() {
            // Up to the next range's first key (or the end).
            let (a_end, r_end) = match at.get(n + 1) {
                Some(&(ni, nj)) => {
                    let next = &out[ni].1[nj];
                    let key = parts[out[ni].0].data.row(next.rows.start);
                    (
                        a + added[a..ar.end].partition_point(|x| key_of(x) < key),
                        r + removed[r..rr.end].partition_point(|x| key_of(x) < key),
                    )
                }
                None => (ar.end, rr.end),
            };
            let range = &mut out[i].1[j];
            range.added = a..a_end;
            range.removed = r..r_end;
            (a, r) = (a_end, r_end);
        }
    }
}

/// Whether a plan yields no row whatever the store holds beyond what planning saw: an
/// [`Op::Empty`] (a constant the store lacks, SP²Bench Q3c and Q12c) that every path to the
/// output passes through. Such a query is answered without a request.
pub fn yields_nothing(p: &Phys) -> bool {
    let input = |i: usize| yields_nothing(&p.inputs[i]);
    match &p.op {
        Op::Empty => true,
        Op::Unit | Op::Scan { .. } | Op::Path(..) => false,
        Op::Values(_, rows) => rows.is_empty(),
        Op::Graphs(_, ids) => ids.is_empty(),
        // Without keys, a group is one row even over no input.
        Op::Group(keys, ..) => !keys.is_empty() && input(0),
        Op::Slice(_, Some(0), _) => true,
        Op::HashJoin { mode, .. } => match mode {
            JoinMode::Inner | JoinMode::Semi => input(0) || input(1),
            JoinMode::Left | JoinMode::Anti | JoinMode::Minus | JoinMode::Mark(_) => input(0),
        },
        Op::MergeJoin { .. } => input(0) || input(1),
        Op::Union => p.inputs.iter().all(yields_nothing),
        Op::IndexJoin { .. }
        | Op::Exchange(_)
        | Op::Filter(_)
        | Op::Distinct
        | Op::Sort(..)
        | Op::Slice(..)
        | Op::Project(_)
        | Op::Extend(..) => input(0),
    }
}

/// Whether a plan's one stream comes out in an ORDER BY's order: a sort, under operators that
/// keep the order of one stream.
pub fn is_ordered(p: &Phys) -> bool {
    match &p.op {
        Op::Sort(..) => true,
        Op::Project(_) | Op::Extend(..) | Op::Filter(_) | Op::Distinct | Op::Slice(..) => {
            p.out.count() == 1 && is_ordered(&p.inputs[0])
        }
        _ => false,
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
fn merge_column(a: &Phys, b: &Phys) -> Option<usize> {
    match (&a.op, &b.op) {
        (Op::Scan { pat: pa, order: oa }, Op::Scan { pat: pb, order: ob }) => {
            let on = sorted_on(pa, *oa)?;
            (sorted_on(pb, *ob) == Some(on)).then_some(on)
        }
        _ => None,
    }
}

/// A pattern to add next: its index, the estimated rows after it, the `=` edge it joins by.
type Candidate = (usize, f64, Option<(usize, usize)>);

/// The graphs of a dataset: the default graph's (merged) and the named ones, as ids of `store`.
pub fn dataset_ids(
    store: &Store,
    dataset: Option<&super::algebra::Dataset>,
) -> (Vec<Id>, Arc<Vec<Id>>) {
    match dataset {
        None => (
            vec![DEFAULT_GRAPH],
            Arc::new(store.named_graphs().collect()),
        ),
        Some(d) => {
            let id = |iri: &String| store.id_of(nearflow_rdf::term::TermRef::Iri(iri));
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
