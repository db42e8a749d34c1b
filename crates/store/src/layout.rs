//! The sorted indexes' layout: a quad's ids, the three permutations (SPO, POS, OSP) and the
//! key order each gives, one partition's key columns ([`Columns`]) and the searches over them,
//! the planner's statistics, and how sorted quads become partitions and statistics. The
//! store's formats hold their indexes as plain columns or packed blocks; a format with a
//! layout of its own gives its rows through [`PermutationRows`]. The query engine never sees
//! any of it (`index.rs` is its view of a store).

use std::ops::Range;
use std::sync::Arc;

use nearflow_split::{PartInfo, SplitBy, SplittableData};
use nearflow_topo::Machine;

use crate::blocks::PackedRows;
use crate::shared::Shared;
use crate::term::Id;

/// The graph id of the default graph (no term has id 0).
pub const DEFAULT_GRAPH: Id = 0;

/// A quad: subject, predicate, object and graph ([`DEFAULT_GRAPH`] or a named graph's IRI).
pub type Quad = [Id; 4];

/// A permutation: the order of the three positions in its sort key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Permutation {
    /// subject, predicate, object.
    Spo,
    /// predicate, object, subject.
    Pos,
    /// object, subject, predicate.
    Osp,
}

impl Permutation {
    /// All three, in the order the store holds them.
    pub const ALL: [Permutation; 3] = [Permutation::Spo, Permutation::Pos, Permutation::Osp];

    /// For each key column, the triple position (0 = s, 1 = p, 2 = o) it holds.
    pub fn positions(self) -> [usize; 3] {
        match self {
            Permutation::Spo => [0, 1, 2],
            Permutation::Pos => [1, 2, 0],
            Permutation::Osp => [2, 0, 1],
        }
    }

    /// The permutation whose key starts with exactly the bound positions (`bound[i]`: position
    /// `i` of s, p, o is bound), and how many key columns that prefix is.
    pub fn for_bound(bound: [bool; 3]) -> (Permutation, usize) {
        match bound {
            [false, false, false] => (Permutation::Spo, 0),
            [true, false, false] => (Permutation::Spo, 1),
            [false, true, false] => (Permutation::Pos, 1),
            [false, false, true] => (Permutation::Osp, 1),
            [true, true, false] => (Permutation::Spo, 2),
            [false, true, true] => (Permutation::Pos, 2),
            [true, false, true] => (Permutation::Osp, 2),
            [true, true, true] => (Permutation::Spo, 3),
        }
    }

    /// Its name, for plans.
    pub fn name(self) -> &'static str {
        match self {
            Permutation::Spo => "SPO",
            Permutation::Pos => "POS",
            Permutation::Osp => "OSP",
        }
    }

    /// A key of this permutation (its columns in its order) as a triple (s, p, o).
    #[inline]
    pub fn triple(self, key: [Id; 3]) -> [Id; 3] {
        let pos = self.positions();
        let mut t = [0; 3];
        for c in 0..3 {
            t[pos[c]] = key[c];
        }
        t
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A permutation's rows held a format's own way: what a format that keeps neither plain
/// columns nor packed blocks gives the store at open ([`Store::of_rows`](crate::Store::of_rows)),
/// read by row and searched by key prefix. Its rows are sorted by graph, then by key (the
/// permutation's column order), the graphs' runs where the store's graph table says.
///
/// The store's own two layouts are read without this trait's indirection (their scans are the
/// engine's hottest loop); a format of one's own pays one dynamic call per row read.
pub trait PermutationRows: Send + Sync + std::fmt::Debug {
    /// Rows held.
    fn len(&self) -> usize;

    /// Whether it holds no row.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`'s key, in the permutation's column order.
    fn row(&self, i: usize) -> [Id; 3];

    /// The rows in `within` (sorted by key: one graph's run, or part of it) whose key starts
    /// with `prefix` (0 to 3 ids), as a range. By default two binary searches over
    /// [`row`](Self::row).
    fn range(&self, within: Range<usize>, prefix: &[Id]) -> Range<usize> {
        let key_cmp = |i: usize| self.row(i)[..prefix.len()].cmp(prefix);
        let n = within.len();
        let base = within.start;
        let lo = partition_point(n, |i| key_cmp(base + i).is_lt());
        let hi = lo + partition_point(n - lo, |i| key_cmp(base + lo + i).is_le());
        base + lo..base + hi
    }

    /// Heap bytes it owns.
    fn heap_bytes(&self) -> usize {
        0
    }

    /// Bytes of a mapped file it reads in place.
    fn mapped_bytes(&self) -> usize {
        0
    }
}

/// One partition of one permutation: its rows' three key columns, sorted within each graph's
/// run — plain (owned, or slices of a mapped format-3 snapshot: [`Shared`]), a row range of
/// a permutation packed in blocks (`blocks.rs`, a mapped format-5 snapshot), or a row range
/// of a format's own [`PermutationRows`].
#[derive(Debug, Default)]
pub struct Columns {
    pub(crate) rows: PartRows,
    /// The row of the whole permutation this partition's first row is.
    pub first: usize,
}

/// How a partition's rows are held.
#[derive(Debug)]
pub(crate) enum PartRows {
    /// Three columns of ids, in the permutation's order.
    Columns([Shared<Id>; 3]),
    /// Rows `at..at + len` of a packed permutation.
    Packed {
        rows: Arc<PackedRows>,
        at: usize,
        len: usize,
    },
    /// Rows `at..at + len` of a format's own rows.
    Format {
        rows: Arc<dyn PermutationRows>,
        at: usize,
        len: usize,
    },
}

impl Default for PartRows {
    fn default() -> Self {
        PartRows::Columns(Default::default())
    }
}

impl Columns {
    /// Plain columns starting at row `first` of the permutation.
    pub(crate) fn plain(cols: [Shared<Id>; 3], first: usize) -> Columns {
        Columns {
            rows: PartRows::Columns(cols),
            first,
        }
    }

    /// Rows `range` of a format's own rows.
    pub(crate) fn of_format(rows: Arc<dyn PermutationRows>, range: Range<usize>) -> Columns {
        Columns {
            rows: PartRows::Format {
                rows,
                at: range.start,
                len: range.len(),
            },
            first: range.start,
        }
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        match &self.rows {
            PartRows::Columns(cols) => cols[0].len(),
            PartRows::Packed { len, .. } | PartRows::Format { len, .. } => *len,
        }
    }

    /// Whether it holds no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`'s key.
    #[inline]
    pub fn row(&self, i: usize) -> [Id; 3] {
        match &self.rows {
            PartRows::Columns(cols) => [cols[0][i], cols[1][i], cols[2][i]],
            PartRows::Packed { rows, at, len } => {
                debug_assert!(i < *len);
                rows.row(at + i)
            }
            PartRows::Format { rows, at, len } => {
                debug_assert!(i < *len);
                rows.row(at + i)
            }
        }
    }

    /// Key column `c` of row `i`.
    #[inline]
    fn value(&self, c: usize, i: usize) -> Id {
        match &self.rows {
            PartRows::Columns(cols) => cols[c][i],
            PartRows::Packed { rows, at, .. } => rows.value(c, at + i),
            PartRows::Format { rows, at, .. } => rows.row(at + i)[c],
        }
    }

    /// Key column `c` of rows `range`, in order, to `f` until it returns false (then false;
    /// a packed block's header read once for its rows).
    #[inline]
    pub fn for_each_value(
        &self,
        c: usize,
        range: Range<usize>,
        mut f: impl FnMut(Id) -> bool,
    ) -> bool {
        match &self.rows {
            PartRows::Columns(cols) => cols[c][range].iter().all(|&v| f(v)),
            PartRows::Packed { rows, at, len } => {
                debug_assert!(range.end <= *len);
                rows.for_each_value(c, at + range.start..at + range.end, f)
            }
            PartRows::Format { rows, at, len } => {
                debug_assert!(range.end <= *len);
                (at + range.start..at + range.end).all(|i| f(rows.row(i)[c]))
            }
        }
    }

    /// Key column `c`, whole (a copy when the rows are packed).
    pub fn column(&self, c: usize) -> std::borrow::Cow<'_, [Id]> {
        match &self.rows {
            PartRows::Columns(cols) => std::borrow::Cow::Borrowed(&cols[c][..]),
            PartRows::Packed { .. } | PartRows::Format { .. } => {
                (0..self.len()).map(|i| self.value(c, i)).collect()
            }
        }
    }

    /// The plain columns, when they are (what the placement check reads of a replica).
    pub(crate) fn plain_columns(&self) -> Option<&[Shared<Id>; 3]> {
        match &self.rows {
            PartRows::Columns(cols) => Some(cols),
            PartRows::Packed { .. } | PartRows::Format { .. } => None,
        }
    }

    /// Heap bytes it owns.
    pub fn heap_bytes(&self) -> usize {
        match &self.rows {
            PartRows::Columns(cols) => cols.iter().map(|c| c.heap_bytes()).sum(),
            PartRows::Packed { .. } => 0,
            PartRows::Format { rows, len, .. } => share(rows.heap_bytes(), *len, rows.len()),
        }
    }

    /// Bytes of a mapped snapshot it reads in place (a packed partition: its share of the
    /// permutation's bytes).
    pub fn mapped_bytes(&self) -> usize {
        match &self.rows {
            PartRows::Columns(cols) => cols.iter().map(|c| c.mapped_bytes()).sum(),
            PartRows::Packed { rows, len, .. } => share(rows.mapped_bytes(), *len, rows.len()),
            PartRows::Format { rows, len, .. } => share(rows.mapped_bytes(), *len, rows.len()),
        }
    }

    /// The part of `rows` (the whole permutation's row numbers, one graph's run) this partition
    /// holds, as its own row numbers.
    pub fn local(&self, rows: &Range<usize>) -> Range<usize> {
        let lo = rows.start.max(self.first);
        let hi = rows.end.min(self.first + self.len());
        if lo >= hi {
            return 0..0;
        }
        lo - self.first..hi - self.first
    }

    /// The rows in `within` (this partition's row numbers, sorted by key: one graph's run)
    /// whose key starts with `prefix` (0 to 3 ids): a range, by binary search.
    pub fn range_in(&self, within: Range<usize>, prefix: &[Id]) -> Range<usize> {
        if let PartRows::Packed { rows, at, .. } = &self.rows {
            let key_cmp = |key: [Id; 3]| key[..prefix.len()].cmp(prefix);
            let within = within.start + at..within.end + at;
            let lo = rows.partition_point(within.clone(), |k| key_cmp(k).is_lt());
            let hi = rows.partition_point(lo..within.end, |k| key_cmp(k).is_le());
            return lo - at..hi - at;
        }
        if let PartRows::Format { rows, at, .. } = &self.rows {
            let found = rows.range(within.start + at..within.end + at, prefix);
            return found.start - at..found.end - at;
        }
        let cmp = |i: usize| -> std::cmp::Ordering {
            for (c, &p) in prefix.iter().enumerate() {
                match self.value(c, i).cmp(&p) {
                    std::cmp::Ordering::Equal => {}
                    o => return o,
                }
            }
            std::cmp::Ordering::Equal
        };
        let n = within.len();
        let base = within.start;
        let lo = partition_point(n, |i| cmp(base + i) == std::cmp::Ordering::Less);
        let hi = lo
            + partition_point(n - lo, |i| {
                cmp(base + lo + i) != std::cmp::Ordering::Greater
            });
        base + lo..base + hi
    }
}

/// A partition's share (`len` of `all` rows) of a permutation's `bytes`.
fn share(bytes: usize, len: usize, all: usize) -> usize {
    (bytes as u128 * len as u128 / all.max(1) as u128) as usize
}

fn partition_point(n: usize, mut pred: impl FnMut(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Per-predicate statistics (the planner's), summed over the graphs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PredStats {
    /// Quads with this predicate.
    pub triples: u64,
    /// Distinct subjects among them (per graph, summed).
    pub subjects: u64,
    /// Distinct objects among them (per graph, summed).
    pub objects: u64,
}

/// Whole-store statistics: counts of distinct terms are per graph, summed over the graphs (for
/// a store of one graph, the plain counts).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Quads.
    pub triples: u64,
    /// Distinct subjects.
    pub subjects: u64,
    /// Distinct predicates (over all graphs).
    pub predicates: u64,
    /// Distinct objects.
    pub objects: u64,
    /// Per predicate, by id.
    pub per_predicate: hashbrown::HashMap<Id, PredStats>,
}

/// A store could not be built.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Building the partitions failed.
    #[error("building the store's partitions: {0}")]
    Split(nearflow_split::SplitError),
    /// A format's rows disagree with each other or with their graph table.
    #[error("a format's rows do not make a store: {0}")]
    Rows(String),
}

// The message holds the split's error, so it is not also the source: a chain printed with
// `{:#}` would say it twice.
impl From<nearflow_split::SplitError> for StoreError {
    fn from(e: nearflow_split::SplitError) -> Self {
        StoreError::Split(e)
    }
}

/// The first `k` ids of a pattern's key in `order`.
pub fn key_prefix(order: Permutation, pattern: [Option<Id>; 3], k: usize) -> Vec<Id> {
    order.positions()[..k]
        .iter()
        .map(|&p| pattern[p].expect("bound by for_bound"))
        .collect()
}

/// The runs of equal values among `n` values sorted by them: each value and its first index.
pub(crate) fn runs(n: usize, value: impl Fn(usize) -> Id) -> Vec<(Id, usize)> {
    let mut out: Vec<(Id, usize)> = Vec::new();
    for i in 0..n {
        let v = value(i);
        if out.last().is_none_or(|&(last, _)| last != v) {
            out.push((v, i));
        }
    }
    out
}

/// Each row's graph, from the runs (for the statistics of a snapshot being opened).
pub(crate) fn graph_of_rows(graphs: &[(Id, usize)], n: usize) -> Vec<Id> {
    let mut out = Vec::with_capacity(n);
    for (i, &(g, start)) in graphs.iter().enumerate() {
        let end = graphs.get(i + 1).map_or(n, |&(_, s)| s);
        out.resize(out.len() + (end - start), g);
    }
    out
}

pub(crate) fn slice_of(n: usize, index: usize, parts: usize) -> Range<usize> {
    (n * index / parts)..(n * (index + 1) / parts)
}

pub(crate) fn split(
    machine: &Machine,
    sorted: &[Quad],
    order: Permutation,
) -> Result<SplittableData<Columns>, StoreError> {
    let pos = order.positions();
    let parts = nearflow_split::layout(machine, SplitBy::Node).len();
    let sorted = Arc::new(sorted);
    Ok(SplittableData::build(
        machine,
        SplitBy::Node,
        |info: &PartInfo| {
            let r = slice_of(sorted.len(), info.index, parts);
            let first = r.start;
            let rows = &sorted[r];
            let mut cols: [Vec<Id>; 3] = [
                Vec::with_capacity(rows.len()),
                Vec::with_capacity(rows.len()),
                Vec::with_capacity(rows.len()),
            ];
            for q in rows {
                for c in 0..3 {
                    cols[c].push(q[pos[c]]);
                }
            }
            Columns::plain(cols.map(Shared::from), first)
        },
    )?)
}

/// Statistics by linear passes over the permutations, each read in its own order as keys
/// `[graph, key columns…]` (no sorting: the permutations already are), whole
/// (`spo`, …) or row by row as they are merged (`spo_row`, …). A
/// change of graph starts every count afresh, so distinct counts are per graph, summed.
#[derive(Default)]
pub struct StatsBuilder {
    st: Stats,
    /// The POS pass's current `(graph, predicate)` and its quads and distinct objects so far.
    pos_run: Option<([Id; 2], u64, u64)>,
}

impl StatsBuilder {
    /// SPO keys `[g, s, p, o]`: distinct subjects, and each predicate's distinct subjects (the
    /// distinct `(g, s, p)`).
    pub(crate) fn spo(&mut self, n: usize, key: impl Fn(usize) -> [Id; 4]) {
        (0..n).for_each(|i| self.spo_row(i.checked_sub(1).map(&key), key(i)));
    }

    /// One row of the SPO pass: its key `k` and the one before it.
    pub(crate) fn spo_row(&mut self, prev: Option<[Id; 4]>, k: [Id; 4]) {
        let st = &mut self.st;
        st.triples += 1;
        if prev.is_none_or(|q| q[..2] != k[..2]) {
            st.subjects += 1;
        }
        if prev.is_none_or(|q| q[..3] != k[..3]) {
            st.per_predicate.entry(k[2]).or_default().subjects += 1;
        }
    }

    /// One row `k` of permutation `order`'s pass (the row before it `prev`, and `at` its
    /// position): its statistics, and in SPO the graph table's run that starts at it.
    pub fn row(
        &mut self,
        order: Permutation,
        prev: Option<[Id; 4]>,
        k: [Id; 4],
        graphs: &mut Vec<(Id, usize)>,
        at: usize,
    ) {
        match order {
            Permutation::Spo => {
                if prev.is_none_or(|l| l[0] != k[0]) {
                    graphs.push((k[0], at));
                }
                self.spo_row(prev, k);
            }
            Permutation::Pos => self.pos_row(prev, k),
            Permutation::Osp => self.osp_row(prev, k),
        }
    }

    /// POS keys `[g, p, o, s]`: each predicate's quads and distinct objects.
    pub(crate) fn pos(&mut self, n: usize, key: impl Fn(usize) -> [Id; 4]) {
        (0..n).for_each(|i| self.pos_row(i.checked_sub(1).map(&key), key(i)));
        self.end_pos_run();
    }

    /// One row of the POS pass (the run of a predicate is counted when it ends, or at
    /// [`finish`](Self::finish)).
    pub(crate) fn pos_row(&mut self, prev: Option<[Id; 4]>, k: [Id; 4]) {
        let gp = [k[0], k[1]];
        if self.pos_run.is_some_and(|(r, _, _)| r != gp) {
            self.end_pos_run();
        }
        let run = self.pos_run.get_or_insert((gp, 0, 0));
        run.1 += 1;
        if prev.is_none_or(|q| q[..3] != k[..3]) {
            run.2 += 1;
        }
    }

    fn end_pos_run(&mut self) {
        if let Some((gp, triples, objects)) = self.pos_run.take() {
            let e = self.st.per_predicate.entry(gp[1]).or_default();
            e.triples += triples;
            e.objects += objects;
        }
    }

    /// OSP keys `[g, o, s, p]`: distinct objects.
    pub(crate) fn osp(&mut self, n: usize, key: impl Fn(usize) -> [Id; 4]) {
        (0..n).for_each(|i| self.osp_row(i.checked_sub(1).map(&key), key(i)));
    }

    /// One row of the OSP pass.
    pub(crate) fn osp_row(&mut self, prev: Option<[Id; 4]>, k: [Id; 4]) {
        if prev.is_none_or(|q| q[..2] != k[..2]) {
            self.st.objects += 1;
        }
    }

    pub fn finish(mut self) -> Stats {
        self.end_pos_run();
        self.st.predicates = self.st.per_predicate.len() as u64;
        self.st
    }
}
