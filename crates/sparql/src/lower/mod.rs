//! Lowering: the physical plan as a flow plan, one flow operator per file here. Every node of
//! [`Phys`] becomes its operators, once per stream of its output
//! ([`Partitioning`](crate::physical::Partitioning)): a node of `n` streams is `n` operators
//! fed one stream each, so filters, BINDs, projections and index joins run in parallel
//! wherever their input is split, and rows move between streams only at an [`Op::Exchange`]
//! (a union, a round robin, or a hash routing; `exchange.rs`).
//!
//! A row is an inline array `[Id; N]` (0 = unbound), `N` the query's width rounded up to a
//! power of two ([`width_class`]), so a packet of rows is one allocation and a row moves by
//! copy: boxed rows cost one `malloc`/`free` pair each, and with two workers on one request
//! (LAS rule 3) most of those frees were remote, 26 % of Q4's time.
//!
//! - a scan is one source per store partition (split further into chunks when the plan's
//!   degree of parallelism is larger than the partition count), each **homed** on its
//!   partition's NUMA node, so its deferred tasks queue there (LAS §4, `PlanBuilder::home`);
//! - a merge join reads its two index ranges itself, one source per range of the join values;
//! - the result leaves through a sink that hands each packet to the caller as it arrives
//!   (results are streamed, not collected and copied).
//!
//! ## Files
//!
//! - `scan.rs`, `index_join.rs`, `merge_join.rs`, `hash_join.rs` — reading the store, joins;
//!   `lookup_join.rs` — OPTIONAL, EXISTS, NOT EXISTS, MINUS and mark joins by lookups per row;
//!   `star_count.rs` — a count of a join on one variable, from the indexes;
//! - `filter.rs`, `extend.rs`, `project.rs` — row by row;
//! - `sort.rs`, `distinct.rs`, `group.rs`, `path.rs` — the operators that hold state;
//! - `exchange.rs` — repartitioning; `sink.rs` — the results.

mod distinct;
mod exchange;
mod extend;
mod filter;
mod group;
mod hash_join;
mod index_join;
mod lookup_join;
mod merge_join;
mod path;
mod project;
mod runs;
mod scan;
mod sink;
pub(crate) use sink::handed_bytes as sink_bytes;
pub(crate) use sink::Caller;
pub use sink::Handoff;
mod sort;
mod spill;

pub use spill::Spill;
mod star_count;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use nearflow_flow::{Emitter, FlowError, Io, PlanBuilder, PortType, Status, Stream};

use super::expr::{value_key, EvalCx};
use super::minted::Minted;
use super::physical::{Op, OpStat, Phys, Slot};
use nearflow_rdf::index::{Store, Tally};
use nearflow_rdf::term::{Id, UNBOUND};

/// The flow operator name of an index join (a lookup into the store per input row), as plan
/// shapes and traces show it; the simulator's calibration finds the lookups by it.
pub const INDEX_JOIN_OPERATOR: &str = "index join";

/// A solution inside a plan: one id per query column, [`UNBOUND`] where unbound and in the
/// columns past the query's width.
pub(crate) type Row<const N: usize> = [Id; N];

pub use nearflow_sparql_algebra::MAX_WIDTH;

/// The row array's length for a query of `width` columns: the next power of two, at least 4;
/// `None` past [`MAX_WIDTH`].
pub fn width_class(width: usize) -> Option<usize> {
    (width <= MAX_WIDTH).then(|| width.next_power_of_two().max(4))
}

/// Solution rows as they leave a plan: `len` rows of `width` ids each, end to end in one
/// vector (one allocation per batch, not per row).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rows {
    width: usize,
    len: usize,
    ids: Vec<Id>,
}

impl Rows {
    /// No rows of `width` ids.
    pub fn new(width: usize) -> Self {
        Rows {
            width,
            len: 0,
            ids: Vec::new(),
        }
    }

    /// Ids per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Row `i`.
    pub fn get(&self, i: usize) -> Option<&[Id]> {
        (i < self.len).then(|| &self.ids[i * self.width..(i + 1) * self.width])
    }

    /// The rows in order.
    pub fn iter(&self) -> RowsIter<'_> {
        RowsIter {
            rows: self,
            next: 0,
        }
    }

    /// Adds a row; its first `width` ids are kept.
    ///
    /// # Panics
    /// If `row` is shorter than the width.
    pub fn push(&mut self, row: &[Id]) {
        self.ids.extend_from_slice(&row[..self.width]);
        self.len += 1;
    }

    /// Moves `other`'s rows after these.
    ///
    /// # Panics
    /// If the widths differ.
    pub fn append(&mut self, mut other: Rows) {
        assert_eq!(self.width, other.width, "rows of different widths");
        if self.ids.is_empty() && self.ids.capacity() < other.ids.len() {
            std::mem::swap(&mut self.ids, &mut other.ids);
        } else {
            self.ids.append(&mut other.ids);
        }
        self.len += other.len;
    }

    /// Room for `rows` more rows, allocated now.
    pub(crate) fn reserve(&mut self, rows: usize) {
        self.ids.reserve_exact(rows * self.width);
    }
}

/// The rows of a [`Rows`] in order.
pub struct RowsIter<'a> {
    rows: &'a Rows,
    next: usize,
}

impl<'a> Iterator for RowsIter<'a> {
    type Item = &'a [Id];

    fn next(&mut self) -> Option<&'a [Id]> {
        let row = self.rows.get(self.next)?;
        self.next += 1;
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.rows.len - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for RowsIter<'_> {}

impl<'a> IntoIterator for &'a Rows {
    type Item = &'a [Id];
    type IntoIter = RowsIter<'a>;

    fn into_iter(self) -> RowsIter<'a> {
        self.iter()
    }
}

/// The ports of an operator that takes one stream of rows and gives one (most of them), inside
/// its `impl<const N: usize> Operator`.
macro_rules! one_row_stream_in_and_out {
    () => {
        fn inputs(&self) -> Vec<nearflow_flow::PortType> {
            super::row_ports::<N>(1)
        }

        fn outputs(&self) -> Vec<nearflow_flow::PortType> {
            super::row_ports::<N>(1)
        }
    };
}
pub(crate) use one_row_stream_in_and_out;

/// `n` ports of rows.
pub(crate) fn row_ports<const N: usize>(n: usize) -> Vec<PortType> {
    vec![PortType::of::<Row<N>>(); n]
}

/// What the builder needs.
pub struct ExecCx {
    /// The store.
    pub store: Arc<Store>,
    /// The terms the query makes.
    pub minted: Arc<Minted>,
    /// Row width (the query's columns).
    pub width: usize,
    /// Degree of parallelism.
    pub dop: usize,
    /// Whether operators time themselves.
    pub timing: bool,
    /// The named graphs of the query's dataset, in id order (what a graph variable ranges
    /// over).
    pub named: Arc<Vec<Id>>,
    /// Where operators past the memory limit write their rows ([`Options::spill`](crate::Options::spill)).
    pub spill: Option<Spill>,
}

impl ExecCx {
    /// The expression context of the run.
    pub(crate) fn eval(&self) -> EvalCx<'_> {
        EvalCx::new(&self.store, &self.minted)
    }
}

/// Times an operator step into its counters (when timing is on).
pub(crate) struct Timer<'a> {
    start: Option<Instant>,
    stat: &'a OpStat,
}

impl<'a> Timer<'a> {
    pub(crate) fn new(on: bool, stat: &'a OpStat) -> Self {
        Timer {
            start: on.then(Instant::now),
            stat,
        }
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.start {
            self.stat
                .nanos
                .fetch_add(s.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// An operator run's index reads, counted by where their memory lies against the worker's node
/// (the store's placement decides which reads stay on the node), added to
/// the operator's counters at the end of the run.
pub(crate) struct Reads<'a> {
    /// The node of the worker running the operator, and what it read.
    tally: Tally,
    stat: &'a OpStat,
}

impl<'a> Reads<'a> {
    pub(crate) fn new(node: usize, stat: &'a OpStat) -> Self {
        Reads {
            tally: Tally::on(node),
            stat,
        }
    }

    /// The count the store's reads add to.
    #[inline]
    pub(crate) fn tally(&mut self) -> &mut Tally {
        &mut self.tally
    }
}

impl Drop for Reads<'_> {
    fn drop(&mut self) {
        if self.tally.all > 0 {
            self.stat.reads.fetch_add(self.tally.all, Ordering::Relaxed);
            self.stat
                .remote_reads
                .fetch_add(self.tally.remote, Ordering::Relaxed);
        }
    }
}

/// Matches triple `t` (s, p, o) of graph `g` against `pat` into `row`; false when a repeated
/// variable disagrees.
#[inline]
pub(crate) fn bind(pat: &[Slot; 4], t: [Id; 3], g: Id, row: &mut [Id]) -> bool {
    for (i, v) in t.into_iter().chain([g]).enumerate() {
        match pat[i] {
            Slot::Var(c) => {
                if row[c] == UNBOUND {
                    row[c] = v;
                } else if row[c] != v {
                    return false;
                }
            }
            Slot::Fixed(c, id) => row[c] = id,
            Slot::Const(_) => {}
        }
    }
    true
}

/// What an operator's state holds, as charged against the plan's memory limit
/// ([`Io::charge`]): allocations by their capacity, not their length (a vector that doubles
/// holds up to twice its rows, a hash table its empty slots too). [`grow`](Self::grow) charges
/// a vector's next capacity before it is allocated.
#[derive(Default)]
pub(crate) struct Held {
    bytes: usize,
}

impl Held {
    /// Charges or gives back the difference to `bytes`, what the state holds now. Past the
    /// limit it is an error, and what is charged stays as it was.
    pub(crate) fn set(&mut self, io: &mut Io<'_>, bytes: usize) -> Result<(), FlowError> {
        let before = std::mem::replace(&mut self.bytes, bytes);
        if bytes > before {
            io.charge(bytes - before)
                .inspect_err(|_| self.bytes = before)
        } else {
            io.uncharge(before - bytes);
            Ok(())
        }
    }

    /// Makes room in `v` for `extra` more items, growing it as `Vec` does (doubling), with the
    /// growth charged first: past the limit it is an error and nothing was allocated. `others`
    /// is what the rest of the state holds.
    pub(crate) fn grow<T>(
        &mut self,
        io: &mut Io<'_>,
        v: &mut Vec<T>,
        extra: usize,
        others: usize,
    ) -> Result<(), FlowError> {
        let cap = grown(v, extra);
        if cap > v.capacity() {
            self.set(io, others + cap * std::mem::size_of::<T>())?;
            v.reserve_exact(cap - v.len());
        }
        Ok(())
    }

    /// The bytes charged.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The capacity `v` grows to for `extra` more items, as `Vec` grows (doubling); its capacity
/// now when they fit.
pub(crate) fn grown<T>(v: &Vec<T>, extra: usize) -> usize {
    let need = v.len().saturating_add(extra);
    if need <= v.capacity() {
        v.capacity()
    } else {
        need.max(v.capacity().saturating_mul(2)).max(4)
    }
}

/// The bytes a hash table of `len` entries of `entry` bytes would allocate: its buckets (at
/// most 7 of 8 full, a power of two) and a control byte each. What it takes once it has grown
/// to `len`, charged before it grows.
pub(crate) fn table_bytes(len: usize, entry: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let buckets = (len.saturating_mul(8) / 7).max(4).next_power_of_two();
    buckets * (entry + 1)
}

/// The loop of an operator that takes its input row by row: hands queued rows to `each` while
/// `ready` and the output is not blocked, refilling the queue from input `port`. True when the
/// input is finished and every row handed over; false when it must wait (input or output).
pub(crate) fn pump<const N: usize>(
    io: &mut Io<'_>,
    queue: &mut VecDeque<Row<N>>,
    port: usize,
    ready: bool,
    mut each: impl FnMut(&mut Io<'_>, Row<N>),
) -> bool {
    loop {
        if io.blocked() {
            return false;
        }
        if ready {
            if let Some(row) = queue.pop_front() {
                each(io, row);
                continue;
            }
        }
        match io.recv::<Row<N>>(port) {
            Some(p) => queue.extend(p),
            // When ready, every queued row was handed over above.
            None => return ready && io.finished::<Row<N>>(port),
        }
    }
}

/// The loop of an operator that takes its input a packet at a time (a filter, a BIND, a
/// projection): hands each waiting packet's rows to `each` until the output is blocked (then
/// `Idle`) or the input has ended (then `Done`; the caller flushes what it buffered).
pub(crate) fn per_packet<const N: usize>(
    io: &mut Io<'_>,
    mut each: impl FnMut(&mut Io<'_>, Vec<Row<N>>),
) -> Status {
    loop {
        if io.blocked() {
            return Status::Idle;
        }
        match io.recv::<Row<N>>(0) {
            Some(p) => each(io, p.into_vec()),
            None if io.finished::<Row<N>>(0) => return Status::Done,
            None => return Status::Idle,
        }
    }
}

/// One operator per input stream, each fed its stream: `make` makes each (an operator with one
/// input and one output of rows); their output streams, in order.
pub(crate) fn per_stream<const N: usize, O: nearflow_flow::Operator>(
    b: &mut PlanBuilder,
    input: Vec<Stream<Row<N>>>,
    name: &str,
    mut make: impl FnMut() -> O,
) -> Vec<Stream<Row<N>>> {
    input
        .into_iter()
        .map(|s| {
            let op = b.add(name, make());
            b.feed(s, op, 0);
            b.stream::<Row<N>>(op, 0)
                .expect("the operator outputs rows")
        })
        .collect()
}

/// The last phase of an operator that computed all its rows first (a sort, a group, a path):
/// pushes the queued rows until the output blocks (then `blocked`: the status to come back
/// with) or the queue is empty (then the stream is flushed and ended: `Done`). Counts the rows.
pub(crate) fn emit_queued<const N: usize>(
    io: &mut Io<'_>,
    q: &mut VecDeque<Row<N>>,
    out: &mut Emitter<Row<N>>,
    stat: &OpStat,
    blocked: Status,
) -> Status {
    let mut n = 0;
    let status = loop {
        if io.blocked() {
            break blocked;
        }
        match q.pop_front() {
            Some(r) => {
                out.push(io, r);
                n += 1;
            }
            None => {
                out.flush(io);
                break Status::Done;
            }
        }
    };
    stat.rows.fetch_add(n, Ordering::Relaxed);
    status
}

/// The id of a count: `n` as an `xsd:integer` (minted when the store does not hold it).
pub(crate) fn count_id(cx: EvalCx<'_>, n: u64) -> Id {
    cx.id_of_term(nearflow_rdf::term::TermRef::Literal {
        value: &n.to_string(),
        datatype: "http://www.w3.org/2001/XMLSchema#integer",
        lang: None,
    })
    .unwrap_or(UNBOUND)
}

#[inline]
pub(crate) fn mix(h: u64, v: u64) -> u64 {
    let mut z = (h ^ v).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The key of a row for a hash join or a hash exchange: its key columns' ids and, for a
/// value-key join, its value key.
#[derive(Clone)]
pub(crate) struct KeyFn {
    pub(crate) store: Arc<Store>,
    pub(crate) minted: Arc<Minted>,
    pub(crate) keys: Arc<Vec<usize>>,
    pub(crate) value_col: Option<usize>,
}

impl KeyFn {
    #[inline]
    pub(crate) fn key(&self, row: &[Id]) -> u64 {
        let mut h = 0;
        for &c in self.keys.iter() {
            h = mix(h, u64::from(row[c]));
        }
        if let Some(c) = self.value_col {
            h = mix(h, value_key(EvalCx::new(&self.store, &self.minted), row[c]));
        }
        h
    }
}

/// Adds `p` to the flow plan; its output streams (as many as `p.out` says).
fn build<const N: usize>(cx: &ExecCx, b: &mut PlanBuilder, p: &Phys) -> Vec<Stream<Row<N>>> {
    crate::deeper(|| build_at(cx, b, p))
}

fn build_at<const N: usize>(cx: &ExecCx, b: &mut PlanBuilder, p: &Phys) -> Vec<Stream<Row<N>>> {
    let stat = p.stat.clone();
    let out = match &p.op {
        Op::Unit => {
            stat.rows.store(1, Ordering::Relaxed);
            vec![b.source(vec![[UNBOUND; N]])]
        }
        Op::Empty => vec![b.source(Vec::<Row<N>>::new())],
        Op::Scan { pat, order } => scan::build::<N>(cx, b, p, pat, *order),
        Op::IndexJoin { pat, eq } => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            index_join::build(cx, b, p, *pat, *eq, input)
        }
        Op::LookupJoin { .. } => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            lookup_join::build(cx, b, p, input)
        }
        Op::HashJoin { .. } => {
            let probe = build::<N>(cx, b, &p.inputs[0]);
            let bld = build::<N>(cx, b, &p.inputs[1]);
            hash_join::build(cx, b, p, probe, bld)
        }
        Op::MergeJoin { ranges, .. } => merge_join::build::<N>(cx, b, p, *ranges),
        Op::Exchange(to) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            exchange::build(cx, b, input, to)
        }
        Op::Filter(e) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            filter::build(cx, b, p, e, input)
        }
        Op::Extend(col, e) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            extend::build(cx, b, p, *col, e, input)
        }
        Op::Project(cols) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            project::build(cx, b, p, cols, input)
        }
        Op::Union => {
            // A union is its inputs' streams side by side; its rows are counted where they
            // come from (the plan's text sums them).
            p.inputs.iter().flat_map(|i| build::<N>(cx, b, i)).collect()
        }
        Op::Distinct => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            distinct::build(cx, b, p, input)
        }
        Op::Sort(keys, limit) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            sort::build(cx, b, p, keys, *limit, input)
        }
        Op::Slice(start, len, per) => {
            let mut input = build::<N>(cx, b, &p.inputs[0]);
            debug_assert_eq!(input.len(), 1, "a slice reads one stream");
            if !per.is_empty() {
                return project::slice_per_key(b, input.remove(0), p, *start, *len, per);
            }
            let s = b.limit(
                input.remove(0),
                *start as u64,
                len.map_or(u64::MAX, |l| l as u64),
            );
            vec![counted(b, s, stat)]
        }
        Op::Values(cols, rows) => {
            // The terms get ids now: the store's, or minted for this run.
            let ecx = cx.eval();
            let out: Vec<Row<N>> = rows
                .iter()
                .map(|r| {
                    let mut row = [UNBOUND; N];
                    for (&c, t) in cols.iter().zip(r) {
                        if let Some(t) = t {
                            row[c] = ecx.id_of_term(t.as_ref()).unwrap_or(UNBOUND);
                        }
                    }
                    row
                })
                .collect();
            stat.rows.store(out.len() as u64, Ordering::Relaxed);
            vec![b.source(out)]
        }
        Op::Given(g) => {
            let width = g.cols.len();
            let out: Vec<Row<N>> = (0..g.rows)
                .map(|i| {
                    let mut row = [UNBOUND; N];
                    for (k, &c) in g.cols.iter().enumerate() {
                        row[c] = g.ids[i * width + k];
                    }
                    row
                })
                .collect();
            stat.rows.store(out.len() as u64, Ordering::Relaxed);
            vec![b.source(out)]
        }
        Op::StarCount { .. } => star_count::build::<N>(cx, b, p),
        Op::Runs { .. } => runs::build::<N>(cx, b, p),
        Op::IndexCount { col, count, .. } => {
            let mut row = [UNBOUND; N];
            row[*col] = count_id(cx.eval(), *count);
            stat.rows.store(1, Ordering::Relaxed);
            vec![b.source(vec![row])]
        }
        Op::Graphs(col, ids) => {
            let out: Vec<Row<N>> = ids
                .iter()
                .map(|&g| {
                    let mut row = [UNBOUND; N];
                    row[*col] = g;
                    row
                })
                .collect();
            stat.rows.store(out.len() as u64, Ordering::Relaxed);
            vec![b.source(out)]
        }
        Op::Path(..) => path::build::<N>(cx, b, p),
        Op::Group(keys, aggs, two_phase) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            group::build(cx, b, p, keys, aggs, *two_phase, input)
        }
    };
    debug_assert_eq!(out.len(), p.out.count(), "{:?} streams", p.op);
    out
}

/// Counts the rows passing through a stream into `stat`, a packet at a time.
fn counted<const N: usize>(
    b: &mut PlanBuilder,
    s: Stream<Row<N>>,
    stat: Arc<OpStat>,
) -> Stream<Row<N>> {
    project::count_rows(b, s, stat)
}

/// Adds `p` to the flow plan, and the sink that sends every packet of its rows to `tx`.
///
/// # Panics
/// If the width is past [`MAX_WIDTH`] (planning refuses such queries).
pub fn build_into(cx: &ExecCx, b: &mut PlanBuilder, p: &Phys, tx: Handoff) {
    fn with<const N: usize>(cx: &ExecCx, b: &mut PlanBuilder, p: &Phys, tx: Handoff) {
        let streams = build::<N>(cx, b, p);
        sink::build::<N>(b, streams, tx, cx.width);
    }
    match width_class(cx.width) {
        Some(4) => with::<4>(cx, b, p, tx),
        Some(8) => with::<8>(cx, b, p, tx),
        Some(16) => with::<16>(cx, b, p, tx),
        Some(32) => with::<32>(cx, b, p, tx),
        Some(64) => with::<64>(cx, b, p, tx),
        Some(128) => with::<128>(cx, b, p, tx),
        Some(256) => with::<256>(cx, b, p, tx),
        Some(512) => with::<512>(cx, b, p, tx),
        _ => panic!("a query of {} columns (at most {MAX_WIDTH})", cx.width),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_classes_are_powers_of_two_from_four_to_the_limit() {
        assert_eq!(width_class(0), Some(4));
        assert_eq!(width_class(4), Some(4));
        assert_eq!(width_class(5), Some(8));
        assert_eq!(width_class(17), Some(32));
        assert_eq!(width_class(200), Some(256));
        assert_eq!(width_class(MAX_WIDTH), Some(MAX_WIDTH));
        assert_eq!(width_class(MAX_WIDTH + 1), None);
    }

    #[test]
    fn rows_keep_their_width_and_order() {
        let mut a = Rows::new(2);
        a.push(&[1, 2, 0, 0]);
        let mut b = Rows::new(2);
        b.push(&[3, 4, 0, 0]);
        b.push(&[5, 0, 0, 0]);
        a.append(b);
        assert_eq!(a.len(), 3);
        let all: Vec<&[Id]> = a.iter().collect();
        assert_eq!(all, [&[1, 2][..], &[3, 4], &[5, 0]]);
        assert_eq!(a.get(3), None);
        assert_eq!(a.iter().len(), 3);
        // No columns (an ASK of constants): rows are counted all the same.
        let mut z = Rows::new(0);
        z.push(&[0; 4]);
        z.push(&[]);
        assert_eq!((z.len(), z.iter().count()), (2, 2));
        assert_eq!(z.get(1), Some(&[][..]));
    }
}
