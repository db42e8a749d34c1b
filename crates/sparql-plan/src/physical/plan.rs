//! The physical plan's types: operators, the slots of a pattern, partitionings, the counters
//! each operator fills; what a plan yields and in which order.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::algebra::Agg;
use crate::expr::Expr;
use crate::path::{End, PathExpr};
use nearflow_store::index::Permutation;
use nearflow_store::term::{Id, Term};

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
    /// Rows it wrote to disk past the memory limit ([`Options::spill`](nearflow_sparql_algebra::Options::spill)):
    /// a hash join's rows of both inputs, a DISTINCT's rows in runs.
    pub spilled: AtomicU64,
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
/// (one graph: [`DEFAULT_GRAPH`](nearflow_store::DEFAULT_GRAPH) or a named graph), or a variable ranging over the named graphs
/// of the query's dataset ([`Planner::named`](super::Planner::named)), or a variable fixed to one of them.
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

    pub(super) fn any(n: usize) -> Partitioning {
        if n <= 1 {
            Partitioning::Single
        } else {
            Partitioning::Any(n)
        }
    }

    /// The partitioning after columns `changed` are cleared or overwritten: a hash on them no
    /// longer holds.
    pub(super) fn after_changing(&self, changed: &[usize]) -> Partitioning {
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

/// How an [`Op::StarCount`] reads its two patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountHow {
    /// `keys`' values of `s` read into a set or a count per value, then every match of `rows`
    /// read, each adding its value's.
    Table,
    /// Every match of `rows` read, its `s` looked up in `keys`' index (`rows` far smaller).
    Probe,
    /// `keys`' values of `s` read and counted per value, then each distinct value's matches
    /// in `rows` counted by `rows`' index, and `rows`' matches counted by its index (`keys`
    /// far smaller).
    Grouped,
}

/// What an [`Op::Runs`] gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsOut {
    /// A row per value kept, the value in its column and, in column `n` when given, its
    /// matches as an `xsd:integer` (`SELECT ?o (COUNT(*) AS ?n) … GROUP BY ?o`; `SELECT
    /// DISTINCT ?o`).
    Rows {
        /// The column of each value's count of matches.
        n: Option<usize>,
    },
    /// One row: in column `col`, as an `xsd:integer`, the matches of the values kept summed
    /// (`matches`: `COUNT(*)` of a filtered pattern) or the number of values kept
    /// (`COUNT(DISTINCT ?o)`).
    Count {
        /// The aggregate's column.
        col: usize,
        /// Whether matches are summed, rather than values counted.
        matches: bool,
    },
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
    /// `COUNT(*)` of one pattern's matches, or of a UNION of patterns (the sum), counted by
    /// the indexes when the plan is made (binary searches, no row read): one row, `count` as
    /// an `xsd:integer` in column `col`.
    IndexCount {
        /// The patterns counted.
        pats: Vec<Pat>,
        /// The aggregate's column.
        col: usize,
        /// Its matches.
        count: u64,
    },
    /// `COUNT(*)` of the join of two patterns of one graph that share one variable, column `s`
    /// (`?x rdf:type bench:Article . ?x swrc:pages ?v`, `?x dc:creator ?a . ?x rdf:type ?t`), or
    /// of `rows` OPTIONAL, EXISTS, NOT EXISTS or MINUS `keys`: over the matches of `rows`, a
    /// function of the number `m` of `keys`' matches with its `s` — `m` (inner), `max(1, m)`
    /// (left), `[m > 0]` (semi), `[m = 0]` (anti, minus) — summed from the indexes without
    /// forming a joined row (`lower/star_count.rs`). One row: the count as an `xsd:integer` in
    /// column `col`.
    StarCount {
        /// The pattern whose `s` values are read into a set (a multiset when `mult`), looked
        /// up or grouped.
        keys: Pat,
        /// The other pattern (the left side of OPTIONAL, EXISTS, MINUS).
        rows: Pat,
        /// The shared variable's column.
        s: usize,
        /// The aggregate's column.
        col: usize,
        /// How the two patterns are read.
        how: CountHow,
        /// Whether `keys` has a variable besides `s`, so that an `s` value can match it more
        /// than once: its values are counted, not only held.
        mult: bool,
        /// The join: `Inner`, `Left`, `Semi`, `Anti` or `Minus`.
        mode: JoinMode,
    },
    /// The distinct values of one variable `v` of one pattern of one graph, each with its
    /// number of matches, read from the permutation that holds the pattern's constants as a
    /// prefix and `v` next: each value's run of rows is skipped by a galloping search, so a
    /// predicate's 12 classes or 2,000 page counts cost a few dozen row reads each, not a read
    /// of its 900 k matches (`lower/runs.rs`). A value failing `filter` (an expression of `v`
    /// alone) is dropped.
    Runs {
        /// The pattern (every variable once; `v` the key column after its constants).
        pat: Pat,
        /// The variable whose values are read.
        v: usize,
        /// An expression of `v` alone each value must hold.
        filter: Option<Arc<Expr>>,
        /// What it gives.
        out: RunsOut,
    },
    /// A lookup of `pat` per input row.
    IndexJoin {
        /// The pattern (its variables bound by the input are looked up).
        pat: Pat,
        /// An `=` edge `(a, b)`: the input's column `a` is `=` to the pattern's `b`, which
        /// shares no other variable with the input (`lower/index_join.rs`).
        eq: Option<(usize, usize)>,
    },
    /// A join from the small side: for each input row, the other side's patterns looked up in
    /// the store's indexes one after another (nested loops, each pattern's variables bound by
    /// the row and the patterns before it), `residual` checked on each match, and the row
    /// passed on as `mode` says — OPTIONAL, EXISTS, NOT EXISTS, MINUS or a mark join without a
    /// table of the other side's matches (`lower/lookup_join.rs`). One pattern for a left join
    /// (its matches come out resumably); a chain for the modes that pass each row at most once.
    LookupJoin {
        /// Left, semi, anti, minus or mark.
        mode: JoinMode,
        /// The other side's patterns, in lookup order.
        pats: Vec<Pat>,
        /// The other side's filter and the join's condition, checked on the merged row.
        residual: Option<Arc<Expr>>,
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
    /// A fragment's rows, answered by a sharded store's shards ([`crate::fragment`]).
    Given(Arc<crate::fragment::GivenRows>),
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
    /// Rows the plan's consumer takes when the plan stops early and no operator on the way
    /// waits for all of its input: a slice (`LIMIT`, `ASK`) at its top, under projections,
    /// BINDs, filters and exchanges only, over scans, index and merge joins, unions, DISTINCT
    /// and other operators that pass rows on as they come — no hash join's build side, sort or
    /// group. `start + len` of that slice.
    pub fn first_rows(&self) -> Option<usize> {
        match &self.op {
            Op::Project(_) | Op::Extend(..) | Op::Exchange(_) | Op::Filter(_) => {
                self.inputs[0].first_rows()
            }
            Op::Slice(start, Some(len), per) if per.is_empty() && self.inputs[0].streams() => {
                Some(start.saturating_add(*len))
            }
            _ => None,
        }
    }

    /// For a hash join: whether its build rows bind the one key column and nothing else while
    /// every probe row binds it (`?x rdf:type bench:Article` joined on `?x`). A match then adds
    /// nothing to the probe row, and the join counts the build side's keys instead of keeping
    /// its rows (`lower/hash_join.rs`).
    pub fn counts_build_keys(&self) -> bool {
        let Op::HashJoin {
            keys, value_key, ..
        } = &self.op
        else {
            return false;
        };
        let (probe, build) = (&self.inputs[0], &self.inputs[1]);
        matches!(keys.as_slice(), [k] if value_key.is_none()
            && build.cert.union(&build.maybe).eq(std::iter::once(k))
            && probe.cert.contains(k))
    }

    /// Whether every operator of the plan passes rows on as they come.
    pub(crate) fn streams(&self) -> bool {
        matches!(
            self.op,
            Op::Unit
                | Op::Empty
                | Op::Scan { .. }
                | Op::IndexJoin { .. }
                | Op::LookupJoin { .. }
                | Op::MergeJoin { .. }
                | Op::Exchange(_)
                | Op::Filter(_)
                | Op::Union
                | Op::Distinct
                | Op::Slice(..)
                | Op::Project(_)
                | Op::Extend(..)
                | Op::Values(..)
                | Op::Given(_)
                | Op::IndexCount { .. }
                | Op::Runs { .. }
                | Op::Graphs(..)
        ) && self.inputs.iter().all(Phys::streams)
    }

    pub(super) fn new(
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
    pub(super) fn over(op: Op, input: Phys, est: f64) -> Phys {
        let (cert, maybe, out) = (input.cert.clone(), input.maybe.clone(), input.out.clone());
        let mut p = Phys::new(op, vec![input], est, cert, maybe);
        p.out = out;
        p
    }

    pub(super) fn empty(cert: BTreeSet<usize>) -> Phys {
        Phys::new(Op::Empty, vec![], 0.0, cert, BTreeSet::new())
    }

    pub(super) fn unit() -> Phys {
        Phys::new(Op::Unit, vec![], 1.0, BTreeSet::new(), BTreeSet::new())
    }

    /// Columns bound in some row.
    pub fn bound(&self) -> BTreeSet<usize> {
        self.cert.union(&self.maybe).copied().collect()
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
        Op::Given(g) => g.rows == 0,
        Op::IndexCount { .. } | Op::StarCount { .. } | Op::Runs { .. } => false,
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
        // Its patterns hold no absent constant (the planner leaves those to a hash join).
        Op::IndexJoin { .. }
        | Op::LookupJoin { .. }
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
