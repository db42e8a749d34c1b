//! The physical plan and the cost-based planner.
//!
//! A basic graph pattern is ordered greedily from the store's statistics: start from the
//! pattern with the fewest matches (counted exactly by binary search), then repeatedly add the
//! connected pattern whose join is estimated smallest, joined by an **index join** (a lookup per
//! input row) when the input is small against the pattern, by a **merge join** when both sides
//! are index scans sorted on a shared variable (Q4's `?journal`), otherwise by a **hash join**
//! on the shared variables. Filter conjuncts go where their variables are first all bound. Two
//! rewrites make SP²Bench's traps cheap without changing any answer:
//!
//! - `?v = <iri>` (or a string or language-tagged literal, or any constant under `sameTerm`)
//!   fixes `?v` in the patterns: for those constants `=` is true exactly for the same term;
//!   numbers, booleans and dateTimes are compared by value and keep the filter;
//! - `?a = ?b` across two unconnected parts (Q5a, Q12a) becomes a hash join on a *value key*
//!   ([`value_key`](super::expr::value_key): terms that may be `=` share a key) with the `=`
//!   kept as a residual check, so it is exact for every literal;
//! - `FILTER(!bound(?x))` over an OPTIONAL whose right side always binds `?x` (Q6, Q7) is an
//!   anti-join; an equality between the two sides inside the OPTIONAL's filter becomes its key.
//!
//! Length: the planner is one concept — the cost model, the join order and the rewrites decide
//! together; splitting them would scatter each decision over files.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::algebra::{Agg, AggFunc, Node, Pat, Slot};
use super::expr::Expr;
use super::path::{End, PathExpr};
use nearflow_rdf::store::{Permutation, Store};
use nearflow_rdf::term::{Id, Term, TermRef, XSD_STRING};

/// Counters of one operator, filled while it runs.
#[derive(Debug, Default)]
pub struct OpStat {
    /// Rows it produced.
    pub rows: AtomicU64,
    /// Nanoseconds spent in it (when timing is on).
    pub nanos: AtomicU64,
}

/// How a hash join combines its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinMode {
    /// Inner join.
    Inner,
    /// OPTIONAL: every probe row, with its matches or alone.
    Left,
    /// Probe rows with no match (OPTIONAL + `!bound`).
    Anti,
    /// MINUS: probe rows with no compatible match sharing a bound variable.
    Minus,
    /// `FILTER EXISTS`: probe rows with a compatible match, each once.
    Semi,
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
        /// Inner, left, anti or minus.
        mode: JoinMode,
        /// Columns bound on both sides, compared by id.
        keys: Vec<usize>,
        /// A value-key pair (probe column, build column) from an `=`.
        value_key: Option<(usize, usize)>,
        /// Columns that may be bound on both sides: checked for compatibility.
        check: Vec<usize>,
        /// The OPTIONAL's (or the rewritten filter's) expression.
        residual: Option<Arc<Expr>>,
    },
    /// A merge join of its two inputs, both [`Op::Scan`]s sorted on column `on` (the first key
    /// column after each scan's bound prefix). It reads the two index ranges itself, in
    /// parallel over ranges of `on`'s values; the inputs are there for the plan's text.
    MergeJoin {
        /// The column both scans are sorted on.
        on: usize,
    },
    /// FILTER.
    Filter(Arc<Expr>),
    /// UNION (bag union; order not kept).
    Union,
    /// DISTINCT.
    Distinct,
    /// ORDER BY; with a limit, only the first `limit` rows of the order are kept (a top-k:
    /// a LIMIT above it, through projections and BINDs, which keep every row).
    Sort(Arc<Vec<(Expr, bool)>>, Option<usize>),
    /// OFFSET/LIMIT.
    Slice(usize, Option<usize>),
    /// Projection (other columns cleared).
    Project(Vec<usize>),
    /// BIND / a SELECT expression: the column gets the expression's value, or stays unbound
    /// when it is an error.
    Extend(usize, Arc<Expr>),
    /// A property path: every solution of `subject path object`, from the store.
    Path(End, Arc<PathExpr>, End),
    /// VALUES: constant rows (their terms get ids when the plan is built for a run).
    Values(Vec<usize>, Arc<Vec<Vec<Option<Term>>>>),
    /// GROUP BY the key columns, computing the aggregates (only the keys and the aggregates'
    /// columns are bound in its output).
    Group(Vec<usize>, Arc<Vec<(usize, Agg)>>),
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
            stat: Arc::default(),
        }
    }

    fn over(op: Op, input: Phys, est: f64) -> Phys {
        let (cert, maybe) = (input.cert.clone(), input.maybe.clone());
        Phys::new(op, vec![input], est, cert, maybe)
    }

    fn empty(cert: BTreeSet<usize>) -> Phys {
        Phys::new(Op::Empty, vec![], 0.0, cert, BTreeSet::new())
    }

    fn bound(&self) -> BTreeSet<usize> {
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

fn and_all(es: Vec<Expr>) -> Option<Expr> {
    super::expr::balanced(es, |a, b| Expr::And(Box::new(a), Box::new(b)))
}

/// The columns an expression reads.
pub fn expr_vars(e: &Expr, out: &mut BTreeSet<usize>) {
    match e {
        Expr::Var(c) | Expr::Bound(c) => {
            out.insert(*c);
        }
        Expr::Const(_) => {}
        Expr::Or(a, b)
        | Expr::And(a, b)
        | Expr::Eq(a, b)
        | Expr::SameTerm(a, b)
        | Expr::Cmp(a, b, _)
        | Expr::Arith(a, b, _) => {
            expr_vars(a, out);
            expr_vars(b, out);
        }
        Expr::Not(a) | Expr::Neg(a) | Expr::Plus(a) | Expr::Regex(a, _) => expr_vars(a, out),
        Expr::In(a, l) => {
            expr_vars(a, out);
            l.iter().for_each(|x| expr_vars(x, out));
        }
        Expr::If(a, b, c) => {
            expr_vars(a, out);
            expr_vars(b, out);
            expr_vars(c, out);
        }
        Expr::Coalesce(l) | Expr::Call(_, l) => l.iter().for_each(|x| expr_vars(x, out)),
    }
}

fn vars_of(e: &Expr) -> BTreeSet<usize> {
    let mut s = BTreeSet::new();
    expr_vars(e, &mut s);
    s
}

/// Whether `=` with this constant is true exactly for the same term: IRIs, blank nodes, string
/// and language-tagged literals, literals of datatypes outside XSD (RDFterm-equal).
fn eq_is_same_term(t: TermRef<'_>) -> bool {
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
fn fixing(e: &Expr) -> Option<(usize, TermRef<'_>)> {
    let (a, b, same) = match e {
        Expr::Eq(a, b) => (a, b, false),
        Expr::SameTerm(a, b) => (a, b, true),
        _ => return None,
    };
    let (c, t) = match (&**a, &**b) {
        (Expr::Var(c), Expr::Const(t)) | (Expr::Const(t), Expr::Var(c)) => (*c, t.as_ref()),
        _ => return None,
    };
    (same || eq_is_same_term(t)).then_some((c, t))
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

/// The planner.
pub struct Planner<'s> {
    /// The store (for counts and statistics).
    pub store: &'s Store,
    /// Degree of parallelism for the parallel operators.
    pub dop: usize,
}

impl Planner<'_> {
    /// Plans a logical node.
    pub fn plan(&self, node: Node) -> Phys {
        match node {
            Node::Bgp(pats) => self.bgp(pats, Vec::new()),
            Node::Join(a, b) => match (*a, *b) {
                // A BGP joined with a UNION: join it into each branch (exact for bags), so a
                // selective BGP drives each branch's plan (SP²Bench Q8, Q12b).
                (x, Node::Union(us)) | (Node::Union(us), x) if is_bgp_tree(&x) => {
                    let branches = us
                        .into_iter()
                        .map(|u| Node::Join(Box::new(x.clone()), Box::new(u)))
                        .collect();
                    self.plan(Node::Union(branches))
                }
                // A BGP joined with a filtered BGP whose filter reads only that BGP's own
                // variables: one BGP with the filter (the filter sees the same values).
                (x, Node::Filter(e, f)) | (Node::Filter(e, f), x)
                    if is_bgp_tree(&x)
                        && is_bgp_tree(&f)
                        && vars_of(&e).is_subset(&tree_vars(&f)) =>
                {
                    let mut leaves = Vec::new();
                    flatten_bgps(x, &mut leaves);
                    flatten_bgps(*f, &mut leaves);
                    let mut cs = Vec::new();
                    conjuncts(e, &mut cs);
                    self.bgp(leaves.into_iter().flatten().collect(), cs)
                }
                (a, b) => self.join(a, b),
            },
            Node::Filter(e, inner) => {
                let mut cs = Vec::new();
                conjuncts(e, &mut cs);
                match *inner {
                    Node::Bgp(pats) => self.bgp(pats, cs),
                    Node::Join(a, b) if is_bgp_tree(&a) && is_bgp_tree(&b) => {
                        let mut leaves = Vec::new();
                        flatten_bgps(*a, &mut leaves);
                        flatten_bgps(*b, &mut leaves);
                        self.bgp(leaves.into_iter().flatten().collect(), cs)
                    }
                    Node::LeftJoin(l, r, e2) => self.filter_left_join(*l, *r, e2, cs),
                    other => {
                        let p = self.plan(other);
                        self.filters(p, cs)
                    }
                }
            }
            Node::LeftJoin(l, r, e) => {
                let (l, r) = (self.plan(*l), self.plan(*r));
                self.hash_join(JoinMode::Left, l, r, e)
            }
            Node::Minus(l, r) => {
                let (l, r) = (self.plan(*l), self.plan(*r));
                self.hash_join(JoinMode::Minus, l, r, None)
            }
            Node::Exists(l, r, negated) => self.exists(*l, *r, negated),
            Node::Path(s, path, o) => self.path(s, path, o),
            Node::Values(cols, rows) => self.values(cols, rows),
            Node::Group(i, keys, aggs) => self.group(*i, keys, aggs),
            Node::Union(branches) => {
                let ps: Vec<Phys> = branches.into_iter().map(|b| self.plan(b)).collect();
                let mut cert = ps.first().map(|p| p.cert.clone()).unwrap_or_default();
                let mut maybe = BTreeSet::new();
                for p in &ps {
                    cert = cert.intersection(&p.cert).copied().collect();
                    maybe.extend(p.bound());
                }
                maybe = maybe.difference(&cert).copied().collect();
                let est = ps.iter().map(|p| p.est).sum();
                Phys::new(Op::Union, ps, est, cert, maybe)
            }
            Node::Distinct(i) => {
                let p = self.plan(*i);
                let est = p.est;
                Phys::over(Op::Distinct, p, est)
            }
            Node::OrderBy(i, keys) => {
                let p = self.plan(*i);
                let est = p.est;
                Phys::over(Op::Sort(Arc::new(keys), None), p, est)
            }
            Node::Project(i, cols) => {
                let p = self.plan(*i);
                let est = p.est;
                let keep: BTreeSet<usize> = cols.iter().copied().collect();
                let mut out = Phys::over(Op::Project(cols), p, est);
                out.cert = out.cert.intersection(&keep).copied().collect();
                out.maybe = out.maybe.intersection(&keep).copied().collect();
                out
            }
            Node::Extend(i, col, e) => {
                let p = self.plan(*i);
                let est = p.est;
                // A constant, or a column bound in every row, cannot fail: always bound.
                let always = match &e {
                    Expr::Const(_) => true,
                    Expr::Var(c) => p.cert.contains(c),
                    _ => false,
                };
                let mut out = Phys::over(Op::Extend(col, Arc::new(e)), p, est);
                if always {
                    out.cert.insert(col);
                } else {
                    out.maybe.insert(col);
                }
                out
            }
            Node::Slice(i, start, len) => {
                let mut p = self.plan(*i);
                // ORDER BY … LIMIT: the sort keeps only the rows the slice can take (issue 40:
                // `ORDER BY ?c LIMIT 1` kept every row, 4 GB in 9 s, for one).
                if let Some(len) = len {
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
                Phys::over(Op::Slice(start, len), p, est)
            }
        }
    }

    // The plans of the less common nodes, each its own function and never inlined: `plan`
    // recurses once per nesting level (500 OPTIONALs on a 2 MiB stack), so its frame stays
    // small.

    #[inline(never)]
    fn exists(&self, l: Node, r: Node, negated: bool) -> Phys {
        let (l, r) = (self.plan(l), self.plan(r));
        let mode = if negated {
            JoinMode::Anti
        } else {
            JoinMode::Semi
        };
        self.hash_join(mode, l, r, None)
    }

    #[inline(never)]
    fn path(&self, s: End, path: Arc<PathExpr>, o: End) -> Phys {
        let cert: BTreeSet<usize> = [&s, &o]
            .into_iter()
            .filter_map(|e| match e {
                End::Var(c) => Some(*c),
                End::Term(_) => None,
            })
            .collect();
        // A guess: a bound end reaches a few nodes; two free ends, a fraction of the
        // store.
        let est = match cert.len() {
            0 => 1.0,
            1 => 100.0,
            _ => (self.store.len() as f64 / 4.0).max(100.0),
        };
        Phys::new(Op::Path(s, path, o), Vec::new(), est, cert, BTreeSet::new())
    }

    #[inline(never)]
    fn values(&self, cols: Vec<usize>, rows: Vec<Vec<Option<Term>>>) -> Phys {
        let mut cert = BTreeSet::new();
        let mut maybe = BTreeSet::new();
        for (i, &c) in cols.iter().enumerate() {
            if rows.iter().all(|r| r[i].is_some()) {
                cert.insert(c);
            } else if rows.iter().any(|r| r[i].is_some()) {
                maybe.insert(c);
            }
        }
        let est = rows.len() as f64;
        Phys::new(
            Op::Values(cols, Arc::new(rows)),
            Vec::new(),
            est,
            cert,
            maybe,
        )
    }

    #[inline(never)]
    fn group(&self, i: Node, keys: Vec<usize>, aggs: Vec<(usize, Agg)>) -> Phys {
        let p = self.plan(i);
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
        Phys::new(Op::Group(keys, Arc::new(aggs)), vec![p], est, cert, maybe)
    }

    /// An inner join of two logical nodes.
    fn join(&self, a: Node, b: Node) -> Phys {
        if is_bgp_tree(&a) && is_bgp_tree(&b) {
            let mut leaves = Vec::new();
            flatten_bgps(a, &mut leaves);
            flatten_bgps(b, &mut leaves);
            return self.bgp(leaves.into_iter().flatten().collect(), Vec::new());
        }
        let (a, b) = (self.plan(a), self.plan(b));
        // Build the smaller side.
        if a.est < b.est {
            self.hash_join(JoinMode::Inner, b, a, None)
        } else {
            self.hash_join(JoinMode::Inner, a, b, None)
        }
    }

    /// A join of two planned sides on their shared variables (and, for OPTIONAL, the equalities
    /// of its filter).
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
            collect_conjunct_refs(e, &mut cs);
            value_key = cs.iter().filter_map(|e| var_eq(e)).find_map(|(a, b)| {
                if probe.cert.contains(&a) && build.cert.contains(&b) && !build.bound().contains(&a)
                {
                    Some((a, b))
                } else if probe.cert.contains(&b)
                    && build.cert.contains(&a)
                    && !build.bound().contains(&b)
                {
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
        };
        let op = Op::HashJoin {
            mode,
            keys,
            value_key,
            check,
            residual: residual.map(Arc::new),
        };
        Phys::new(op, vec![probe, build], est, cert, maybe)
    }

    /// `FILTER(…)` over an OPTIONAL: `!bound(?x)` with `?x` always bound on the right and never
    /// on the left is an anti-join; the other conjuncts filter its output.
    fn filter_left_join(&self, l: Node, r: Node, e: Option<Expr>, cs: Vec<Expr>) -> Phys {
        let (l, r) = (self.plan(l), self.plan(r));
        let lb = l.bound();
        let anti = cs.iter().position(|c| match c {
            Expr::Not(inner) => {
                matches!(&**inner, Expr::Bound(x) if !lb.contains(x) && r.cert.contains(x))
            }
            _ => false,
        });
        match anti {
            Some(i) => {
                let mut cs = cs;
                cs.remove(i);
                let j = self.hash_join(JoinMode::Anti, l, r, e);
                self.filters(j, cs)
            }
            None => {
                let j = self.hash_join(JoinMode::Left, l, r, e);
                self.filters(j, cs)
            }
        }
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
    fn bgp(&self, mut pats: Vec<Pat>, mut cs: Vec<Expr>) -> Phys {
        let all_vars: BTreeSet<usize> = pats.iter().flatten().filter_map(|s| s.var()).collect();
        if pats.is_empty() {
            let unit = Phys::new(Op::Unit, vec![], 1.0, BTreeSet::new(), BTreeSet::new());
            return self.filters(unit, cs);
        }
        // Fix variables compared to a constant.
        let mut i = 0;
        while i < cs.len() {
            if let Some((c, t)) = fixing(&cs[i]) {
                if all_vars.contains(&c) {
                    let Some(id) = self.store.id_of(t) else {
                        return Phys::empty(all_vars);
                    };
                    for p in &mut pats {
                        for s in p.iter_mut() {
                            if *s == Slot::Var(c) {
                                *s = Slot::Fixed(c, id);
                            }
                        }
                    }
                    cs.remove(i);
                    continue;
                }
            }
            i += 1;
        }
        if pats.iter().flatten().any(|s| *s == Slot::Const(None)) {
            return Phys::empty(all_vars);
        }
        let cards: Vec<f64> = pats
            .iter()
            .map(|p| self.store.count(bound_of(p)) as f64)
            .collect();
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
                Phys::new(Op::IndexJoin { pat }, vec![cur], est.max(1.0), cert, maybe)
            } else {
                let scan = self.scan(pat, cards[k]);
                if let (None, Some(on)) = (edge, merge_column(&cur, &scan)) {
                    let mut cert = cur.cert.clone();
                    cert.extend(scan.cert.iter().copied());
                    let op = Op::MergeJoin { on };
                    cur = Phys::new(op, vec![cur, scan], est.max(1.0), cert, BTreeSet::new());
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
        Phys::new(Op::Scan { pat, order }, vec![], card, cert, BTreeSet::new())
    }

    /// Estimated distinct values of column `v` among `pat`'s matches.
    fn distinct(&self, pat: &Pat, v: usize, card: f64) -> f64 {
        let pred = match pat[1] {
            Slot::Const(Some(p)) | Slot::Fixed(_, p) => {
                self.store.stats().per_predicate.get(&p).copied()
            }
            _ => None,
        };
        let pos = pat.iter().position(|s| s.var() == Some(v));
        let d = match (pred, pos) {
            (Some(ps), Some(0)) => ps.subjects as f64 * (card / ps.triples.max(1) as f64).min(1.0),
            (Some(ps), Some(2)) => ps.objects as f64 * (card / ps.triples.max(1) as f64).min(1.0),
            (_, Some(1)) => self.store.stats().predicates as f64,
            _ => card,
        };
        d.clamp(1.0, card.max(1.0))
    }
}

/// Whether a plan yields no row whatever the store holds beyond what planning saw: an
/// [`Op::Empty`] (a constant the store lacks, SP²Bench Q3c and Q12c) that every path to the
/// output passes through. Such a query is answered without a request.
pub fn yields_nothing(p: &Phys) -> bool {
    let input = |i: usize| yields_nothing(&p.inputs[i]);
    match &p.op {
        Op::Empty => true,
        Op::Unit | Op::Scan { .. } => false,
        Op::Values(_, rows) => rows.is_empty(),
        Op::Path(..) => false,
        // Without keys, a group is one row even over no input.
        Op::Group(keys, _) => !keys.is_empty() && input(0),
        Op::Slice(_, Some(0)) => true,
        Op::HashJoin { mode, .. } => match mode {
            JoinMode::Inner | JoinMode::Semi => input(0) || input(1),
            JoinMode::Left | JoinMode::Anti | JoinMode::Minus => input(0),
        },
        Op::MergeJoin { .. } => input(0) || input(1),
        Op::Union => p.inputs.iter().all(yields_nothing),
        Op::IndexJoin { .. }
        | Op::Filter(_)
        | Op::Distinct
        | Op::Sort(..)
        | Op::Slice(..)
        | Op::Project(_)
        | Op::Extend(..) => input(0),
    }
}

/// The column a scan's output is sorted on: the variable in the first key column after its
/// bound prefix (a scan reads its permutation in key order, partition after partition).
pub fn sorted_on(pat: &Pat, order: Permutation) -> Option<usize> {
    let (_, k) = Permutation::for_bound(bound_of(pat).map(|x| x.is_some()));
    let pos = *order.positions().get(k)?;
    match pat[pos] {
        Slot::Var(c) => Some(c),
        _ => None,
    }
}

/// The column two plain scans can be merge-joined on: both sorted on it.
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

/// The ids a pattern fixes, per position.
pub fn bound_of(p: &Pat) -> [Option<Id>; 3] {
    p.map(|s| match s {
        Slot::Const(id) => id,
        Slot::Fixed(_, id) => Some(id),
        Slot::Var(_) => None,
    })
}

fn collect_conjunct_refs<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::And(a, b) => {
            collect_conjunct_refs(a, out);
            collect_conjunct_refs(b, out);
        }
        e => out.push(e),
    }
}

/// The variables of a BGP tree's patterns.
fn tree_vars(n: &Node) -> BTreeSet<usize> {
    match n {
        Node::Bgp(p) => p.iter().flatten().filter_map(|s| s.var()).collect(),
        Node::Join(a, b) => tree_vars(a).union(&tree_vars(b)).copied().collect(),
        _ => BTreeSet::new(),
    }
}

fn is_bgp_tree(n: &Node) -> bool {
    match n {
        Node::Bgp(_) => true,
        Node::Join(a, b) => is_bgp_tree(a) && is_bgp_tree(b),
        _ => false,
    }
}

/// The BGPs of a join tree of BGPs (checked by [`is_bgp_tree`]).
fn flatten_bgps(n: Node, out: &mut Vec<Vec<Pat>>) {
    match n {
        Node::Bgp(p) => out.push(p),
        Node::Join(a, b) => {
            flatten_bgps(*a, out);
            flatten_bgps(*b, out);
        }
        _ => unreachable!("checked by is_bgp_tree"),
    }
}
