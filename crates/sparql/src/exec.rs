//! The physical plan as a flow plan: every operator of [`Phys`] becomes one or more operators
//! of `nearflow-flow`. A row is an inline array `[Id; N]` (0 = unbound), `N` the query's width
//! rounded up to a power of two ([`width_class`]), so a packet of rows is one allocation and a
//! row moves by copy: boxed rows cost one `malloc`/`free` pair each, and with two workers on
//! one request (LAS rule 3) most of those frees were remote, 26 % of Q4's time.
//!
//! - a scan is one source per store partition (split further into chunks when the plan's
//!   degree of parallelism is larger than the partition count), each **homed** on its
//!   partition's NUMA node, so its deferred tasks queue there (LAS §4, `PlanBuilder::home`);
//! - hash joins and index joins run in parallel: both inputs of a hash join are partitioned by
//!   the join key, an index join's input is dealt round robin, then the parts are united; a
//!   merge join reads its two index ranges itself, one source per range of the join values;
//! - the result leaves through a sink that hands each packet to the caller as it arrives
//!   (results are streamed, not collected and copied).
//!
//! Length: every flow operator a plan is built from (scans, index, hash and merge joins,
//! sorts, sinks), each short, and the `Rows` batches they hand out; they share the row layout
//! and the width classes defined here, so splitting them would make those public.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;

// hashbrown's default hasher (foldhash), not std's SipHash: the join tables are keyed by an
// already mixed u64 and DISTINCT hashes whole rows; SipHash took 7 % of Q4's samples.
use hashbrown::{HashMap, HashSet};
use std::time::Instant;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::aggregate::GroupOp;
use super::algebra::{Pat, Slot};
use super::expr::{order_by_cmp, term_order, value_key, EvalCx, Expr};
use super::minted::Minted;
use super::path::PathOp;
use super::plan::{bound_of, JoinMode, Op, OpStat, Phys};
use nearflow_rdf::store::{key_prefix, Permutation, Store};
use nearflow_rdf::term::{Id, UNBOUND};

/// A solution inside a plan: one id per query column, [`UNBOUND`] where unbound and in the
/// columns past the query's width.
pub(crate) type Row<const N: usize> = [Id; N];

/// The widest query a plan can run: 128 variables.
pub const MAX_WIDTH: usize = 128;

/// The row array's length for a query of `width` variables: the next power of two, at least
/// 4; `None` past [`MAX_WIDTH`].
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
        if self.ids.is_empty() {
            std::mem::swap(&mut self.ids, &mut other.ids);
        } else {
            self.ids.append(&mut other.ids);
        }
        self.len += other.len;
    }
}

/// `n` ports of rows.
pub(crate) fn row_ports<const N: usize>(n: usize) -> Vec<PortType> {
    vec![PortType::of::<Row<N>>(); n]
}

/// Rows below which an operator is not worth parallelising.
const PAR_MIN_ROWS: f64 = 20_000.0;

/// What the builder needs.
pub struct ExecCx {
    /// The store.
    pub store: Arc<Store>,
    /// The terms the query makes.
    pub minted: Arc<Minted>,
    /// Row width (the query's variables).
    pub width: usize,
    /// Degree of parallelism.
    pub dop: usize,
    /// Whether operators time themselves.
    pub timing: bool,
}

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

/// Matches triple `t` (s, p, o) against `pat` into `row`; false when a repeated variable
/// disagrees.
#[inline]
fn bind(pat: &Pat, t: [Id; 3], row: &mut [Id]) -> bool {
    for i in 0..3 {
        match pat[i] {
            Slot::Var(c) => {
                if row[c] == UNBOUND {
                    row[c] = t[i];
                } else if row[c] != t[i] {
                    return false;
                }
            }
            Slot::Fixed(c, id) => row[c] = id,
            Slot::Const(_) => {}
        }
    }
    true
}

struct ScanOp<const N: usize> {
    store: Arc<Store>,
    order: Permutation,
    part: usize,
    range: std::ops::Range<usize>,
    pat: Pat,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> Operator for ScanOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(0)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let cols = &self.store.perm(self.order).partitions()[self.part].data;
        let pos = self.order.positions();
        let budget = io.capacity_of::<Row<N>>() * 2;
        let mut n = 0;
        while self.range.start < self.range.end && n < budget && !io.blocked() {
            let key = cols.row(self.range.start);
            self.range.start += 1;
            let mut t = [0; 3];
            for c in 0..3 {
                t[pos[c]] = key[c];
            }
            let mut row = [UNBOUND; N];
            if bind(&self.pat, t, &mut row) {
                self.out.push(io, row);
                n += 1;
            }
        }
        self.stat.rows.fetch_add(n as u64, Ordering::Relaxed);
        if self.range.start >= self.range.end {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        Ok(Status::More)
    }
}

/// One input row's lookup of a pattern, resumable: the row, the permutation and key prefix its
/// bound positions give, and where in which partition the next match is.
struct Lookup<const N: usize> {
    row: Row<N>,
    order: Permutation,
    prefix: Vec<Id>,
    part: usize,
    /// The rest of the current partition's range; `None` before the partition is searched.
    range: Option<std::ops::Range<usize>>,
}

impl<const N: usize> Lookup<N> {
    fn new(pat: &Pat, row: Row<N>) -> Self {
        let mut bound = bound_of(pat);
        for i in 0..3 {
            if let Slot::Var(c) = pat[i] {
                if row[c] != UNBOUND {
                    bound[i] = Some(row[c]);
                }
            }
        }
        let (order, k) = Permutation::for_bound(bound.map(|x| x.is_some()));
        Lookup {
            row,
            order,
            prefix: key_prefix(order, bound, k),
            part: 0,
            range: None,
        }
    }

    /// Pushes the row extended by each match of `pat` until the matches end (true) or the
    /// output blocks between two of them (false: call again to go on). `n` counts the rows.
    fn run(
        &mut self,
        store: &Store,
        pat: &Pat,
        io: &mut Io<'_>,
        out: &mut Emitter<Row<N>>,
        n: &mut u64,
    ) -> bool {
        let parts = store.perm(self.order).partitions();
        let pos = self.order.positions();
        while self.part < parts.len() {
            let cols = &parts[self.part].data;
            let range = self.range.get_or_insert_with(|| cols.range(&self.prefix));
            for i in range.by_ref() {
                let key = cols.row(i);
                let mut t = [0; 3];
                for c in 0..3 {
                    t[pos[c]] = key[c];
                }
                let mut r = self.row;
                if bind(pat, t, &mut r) {
                    out.push(io, r);
                    *n += 1;
                    if io.blocked() {
                        return false;
                    }
                }
            }
            self.part += 1;
            self.range = None;
        }
        true
    }
}

/// The loop of an operator that takes its input row by row: hands queued rows to `each` while
/// `ready` and the output is not blocked, refilling the queue from input `port`. True when the
/// input is finished and every row handed over; false when it must wait (input or output).
fn pump<const N: usize>(
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

/// An index join: each input row looked up in the store's indexes, its matches pushed straight
/// into the output packet (a flat-map that returned a vector per row spent 15 % of Q7's time
/// allocating and copying them).
struct IndexJoinOp<const N: usize> {
    store: Arc<Store>,
    pat: Pat,
    queue: VecDeque<Row<N>>,
    /// An input row whose matches were interrupted.
    looking: Option<Lookup<N>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> Operator for IndexJoinOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let mut n = 0;
        let (store, pat, out) = (&self.store, &self.pat, &mut self.out);
        if let Some(mut l) = self.looking.take() {
            if !l.run(store, pat, io, out, &mut n) {
                self.looking = Some(l);
            }
        }
        let looking = &mut self.looking;
        let done = looking.is_none()
            && pump(io, &mut self.queue, 0, true, |io, row| {
                let mut l = Lookup::new(pat, row);
                if !l.run(store, pat, io, out, &mut n) {
                    *looking = Some(l);
                }
            });
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        if done {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        Ok(Status::Idle)
    }
}

/// A key range of one permutation across its partitions, read as one sorted sequence (the
/// partitions are consecutive slices of one sorted permutation): `(partition, range)` pieces.
#[derive(Clone, Debug)]
struct KeyRange {
    order: Permutation,
    pieces: Vec<(usize, std::ops::Range<usize>)>,
}

impl KeyRange {
    /// The matches of `pat`'s bound prefix in `order`.
    fn of(store: &Store, pat: &Pat, order: Permutation) -> KeyRange {
        let bound = bound_of(pat);
        let k = bound.iter().filter(|x| x.is_some()).count();
        let prefix = key_prefix(order, bound, k);
        let pieces = store
            .perm(order)
            .partitions()
            .iter()
            .enumerate()
            .map(|(i, part)| (i, part.data.range(&prefix)))
            .filter(|(_, r)| !r.is_empty())
            .collect();
        KeyRange { order, pieces }
    }

    fn len(&self) -> usize {
        self.pieces.iter().map(|(_, r)| r.len()).sum()
    }

    /// The key (in the order's column order) at position `i` of the run.
    fn key(&self, store: &Store, mut i: usize) -> [Id; 3] {
        for (part, r) in &self.pieces {
            if i < r.len() {
                return store.perm(self.order).partitions()[*part]
                    .data
                    .row(r.start + i);
            }
            i -= r.len();
        }
        unreachable!("a position past the run")
    }

    /// The key at `i` as a triple (s, p, o).
    fn triple(&self, store: &Store, i: usize) -> [Id; 3] {
        let key = self.key(store, i);
        let pos = self.order.positions();
        let mut t = [0; 3];
        for c in 0..3 {
            t[pos[c]] = key[c];
        }
        t
    }

    /// The first position in `from..len` whose key column `col` is not below `v` (or, with
    /// `above`, is above `v`).
    fn seek(&self, store: &Store, from: usize, col: usize, v: Id, above: bool) -> usize {
        let (mut lo, mut hi) = (from, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let x = self.key(store, mid)[col];
            if x < v || (above && x == v) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Positions `lo..hi` as a run of their own.
    fn slice(&self, lo: usize, hi: usize) -> KeyRange {
        let mut pieces = Vec::new();
        let mut at = 0;
        for (part, r) in &self.pieces {
            let (a, b) = (lo.max(at), hi.min(at + r.len()));
            if a < b {
                pieces.push((*part, r.start + a - at..r.start + b - at));
            }
            at += r.len();
        }
        KeyRange {
            order: self.order,
            pieces,
        }
    }
}

/// One side of a merge join: its pattern, its run, the key column it is sorted on.
#[derive(Clone, Debug)]
struct Side {
    pat: Pat,
    run: KeyRange,
    col: usize,
}

/// A merge join of two index ranges sorted on the same column, over one range of that column's
/// values: equal-valued groups of the two sides are paired row by row; between groups each side
/// skips ahead by binary search. A source: it reads the store itself.
struct MergeJoinOp<const N: usize> {
    store: Arc<Store>,
    sides: [Side; 2],
    /// Next unread position of each side.
    at: [usize; 2],
    /// The group being paired: each side's `lo..hi`, the first side's row, and the second
    /// side's next row for it.
    group: Option<([std::ops::Range<usize>; 2], usize, usize)>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> Operator for MergeJoinOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(0)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let store = self.store.clone();
        let [a, b] = &self.sides;
        // As a scan: about two packets of rows per task, then the worker may take another.
        let budget = io.capacity_of::<Row<N>>() as u64 * 2;
        let mut n = 0u64;
        let status = loop {
            if io.blocked() || n >= budget {
                break Status::More;
            }
            if let Some((g, i, j)) = &mut self.group {
                if *i < g[0].end {
                    let mut left = [UNBOUND; N];
                    if bind(&a.pat, a.run.triple(&store, *i), &mut left) {
                        // One left row may pair with a whole group: stop between two rows when
                        // the output blocks, and go on from `j` next time.
                        while *j < g[1].end && !io.blocked() {
                            let mut row = left;
                            if bind(&b.pat, b.run.triple(&store, *j), &mut row) {
                                self.out.push(io, row);
                                n += 1;
                            }
                            *j += 1;
                        }
                        if *j < g[1].end {
                            continue;
                        }
                    }
                    *i += 1;
                    *j = g[1].start;
                    continue;
                }
                self.group = None;
            }
            let (la, lb) = (a.run.len(), b.run.len());
            if self.at[0] >= la || self.at[1] >= lb {
                self.out.flush(io);
                break Status::Done;
            }
            let va = a.run.key(&store, self.at[0])[a.col];
            let vb = b.run.key(&store, self.at[1])[b.col];
            match va.cmp(&vb) {
                std::cmp::Ordering::Less => {
                    self.at[0] = a.run.seek(&store, self.at[0], a.col, vb, false);
                }
                std::cmp::Ordering::Greater => {
                    self.at[1] = b.run.seek(&store, self.at[1], b.col, va, false);
                }
                std::cmp::Ordering::Equal => {
                    let ea = a.run.seek(&store, self.at[0], a.col, va, true);
                    let eb = b.run.seek(&store, self.at[1], b.col, va, true);
                    let g = [self.at[0]..ea, self.at[1]..eb];
                    self.group = Some((g, self.at[0], self.at[1]));
                    self.at = [ea, eb];
                }
            }
        };
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        Ok(status)
    }
}

#[inline]
pub(crate) fn mix(h: u64, v: u64) -> u64 {
    let mut z = (h ^ v).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The join key of a row: its key columns' ids and, for a value-key join, its value key.
#[derive(Clone)]
struct KeyFn {
    store: Arc<Store>,
    minted: Arc<Minted>,
    keys: Arc<Vec<usize>>,
    value_col: Option<usize>,
}

impl KeyFn {
    #[inline]
    fn key(&self, row: &[Id]) -> u64 {
        let mut h = 0;
        for &c in self.keys.iter() {
            h = mix(h, u64::from(row[c]));
        }
        if let Some(c) = self.value_col {
            h = mix(
                h,
                value_key(
                    EvalCx {
                        store: &self.store,
                        minted: &self.minted,
                    },
                    row[c],
                ),
            );
        }
        h
    }
}

/// A hash join's build side: the rows end to end, and per key hash the last row with it, each
/// row linking to the one before it with the same hash. Three vectors in all, where a vector
/// per key cost one allocation per distinct key to build and as many frees to drop (23 % of
/// Q6's time).
struct Table<const N: usize> {
    heads: HashMap<u64, usize>,
    next: Vec<usize>,
    rows: Vec<Row<N>>,
}

/// The end of a chain.
const NONE: usize = usize::MAX;

impl<const N: usize> Table<N> {
    fn new() -> Self {
        Table {
            heads: HashMap::new(),
            next: Vec::new(),
            rows: Vec::new(),
        }
    }

    fn insert(&mut self, key: u64, row: Row<N>) {
        let head = self.heads.entry(key).or_insert(NONE);
        self.next.push(*head);
        *head = self.rows.len();
        self.rows.push(row);
    }

    /// The first entry of the chain of rows whose key hash is `key` (last inserted first);
    /// [`NONE`] when there is none.
    fn head(&self, key: u64) -> usize {
        self.heads.get(&key).copied().unwrap_or(NONE)
    }

    /// Chain entry `at`: its row and the next entry; `None` past the end.
    fn entry(&self, at: usize) -> Option<(&Row<N>, usize)> {
        Some((self.rows.get(at)?, self.next[at]))
    }
}

struct JoinOp<const N: usize> {
    mode: JoinMode,
    keys: Arc<Vec<usize>>,
    check: Vec<usize>,
    residual: Option<Arc<Expr>>,
    store: Arc<Store>,
    minted: Arc<Minted>,
    probe_key: KeyFn,
    build_key: KeyFn,
    table: Table<N>,
    built: bool,
    queue: VecDeque<Row<N>>,
    /// A probe row whose matches were interrupted.
    probing: Option<Probing<N>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> JoinOp<N> {
    /// Bytes of a row in the table: the row, its chain link and (at most) a head entry.
    const ENTRY: usize = std::mem::size_of::<Row<N>>() + 2 * std::mem::size_of::<usize>() + 8;
}

/// A probe row part way through its matches: the output blocked (or its consumer finished)
/// between two of them.
struct Probing<const N: usize> {
    row: Row<N>,
    /// The next entry of the row's chain in the table.
    at: usize,
    /// Whether some match was found so far (OPTIONAL, anti-join and MINUS need it).
    matched: bool,
}

impl<const N: usize> JoinOp<N> {
    /// Probes one row from chain entry `at` (a fresh row starts at its key's head), pushing
    /// merged rows until the chain ends or the output blocks between two matches; then the
    /// rest waits in `self.probing`. Returns the rows pushed.
    fn probe(&mut self, io: &mut Io<'_>, mut st: Probing<N>) -> u64 {
        let cx = EvalCx {
            store: &self.store,
            minted: &self.minted,
        };
        let p = st.row;
        let mut emitted = 0;
        while let Some((b, next)) = self.table.entry(st.at) {
            if io.blocked() {
                self.probing = Some(st);
                return emitted;
            }
            st.at = next;
            if self.keys.iter().any(|&c| p[c] != b[c]) {
                continue;
            }
            let mut overlap = !self.keys.is_empty();
            let mut ok = true;
            for &c in &self.check {
                let (x, y) = (p[c], b[c]);
                if x != UNBOUND && y != UNBOUND {
                    if x != y {
                        ok = false;
                        break;
                    }
                    overlap = true;
                }
            }
            if !ok {
                continue;
            }
            if self.mode == JoinMode::Minus {
                if overlap {
                    st.matched = true;
                    break;
                }
                continue;
            }
            let mut merged = p;
            for (m, &y) in merged.iter_mut().zip(b.iter()) {
                if *m == UNBOUND {
                    *m = y;
                }
            }
            if let Some(e) = &self.residual {
                if !e.holds(cx, &merged) {
                    continue;
                }
            }
            st.matched = true;
            match self.mode {
                JoinMode::Anti => break,
                JoinMode::Semi => {
                    self.out.push(io, p);
                    emitted += 1;
                    break;
                }
                _ => {
                    self.out.push(io, merged);
                    emitted += 1;
                }
            }
        }
        if !st.matched && !matches!(self.mode, JoinMode::Inner | JoinMode::Semi) {
            self.out.push(io, p);
            emitted += 1;
        }
        emitted
    }

    /// A fresh probe of row `p`.
    fn start(&self, p: Row<N>) -> Probing<N> {
        Probing {
            row: p,
            at: self.table.head(self.probe_key.key(&p)),
            matched: false,
        }
    }
}

impl<const N: usize> Operator for JoinOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(2)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn state_bytes(&self) -> usize {
        self.table.rows.len() * Self::ENTRY + self.queue.len() * std::mem::size_of::<Row<N>>()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        if !self.built {
            let entry = Self::ENTRY;
            while let Some(p) = io.recv::<Row<N>>(1) {
                io.charge(p.len() * entry)?;
                for b in p {
                    self.table.insert(self.build_key.key(&b), b);
                }
            }
            self.built = io.finished::<Row<N>>(1);
        }
        let mut n = 0;
        if let Some(st) = self.probing.take() {
            n += self.probe(io, st);
        }
        let mut queue = std::mem::take(&mut self.queue);
        let done = self.probing.is_none()
            && pump(io, &mut queue, 0, self.built, |io, p| {
                let st = self.start(p);
                n += self.probe(io, st)
            });
        self.queue = queue;
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        if done {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        Ok(Status::Idle)
    }
}

struct SortOp<const N: usize> {
    keys: Arc<Vec<(Expr, bool)>>,
    /// Keep only the first `limit` rows of the order (a top-k).
    limit: Option<usize>,
    store: Arc<Store>,
    minted: Arc<Minted>,
    rows: Vec<Row<N>>,
    sorted: Option<VecDeque<Row<N>>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> SortOp<N> {
    /// `rows` in ORDER BY's order, cut to the first `keep` when given: by the keys' values,
    /// ties broken by the terms themselves (`1` before `1.0e0` by datatype); rows equal in every
    /// key keep their arrival order (SPARQL leaves it free), and a top-k keeps any of them.
    fn order_rows(&self, rows: Vec<Row<N>>, keep: Option<usize>) -> Vec<Row<N>> {
        let (store, minted) = (self.store.clone(), self.minted.clone());
        let cx = EvalCx {
            store: &store,
            minted: &minted,
        };
        let mut keyed: Vec<(Vec<Option<super::expr::Val<'_>>>, Row<N>)> = rows
            .into_iter()
            .map(|r| {
                (
                    self.keys.iter().map(|(e, _)| e.eval(cx, &r).ok()).collect(),
                    r,
                )
            })
            .collect();
        let cmp = |(a, _): &(Vec<Option<super::expr::Val<'_>>>, Row<N>),
                   (b, _): &(Vec<Option<super::expr::Val<'_>>>, Row<N>)| {
            for (i, (_, desc)) in self.keys.iter().enumerate() {
                let o = order_by_cmp(a[i].as_ref(), b[i].as_ref());
                let o = if *desc { o.reverse() } else { o };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            // Every key ties by value: SPARQL leaves the order free; break it by the terms.
            for (i, (_, desc)) in self.keys.iter().enumerate() {
                let o = term_order(a[i].as_ref(), b[i].as_ref());
                let o = if *desc { o.reverse() } else { o };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            std::cmp::Ordering::Equal
        };
        if let Some(k) = keep {
            if keyed.len() > k {
                if k == 0 {
                    return Vec::new();
                }
                keyed.select_nth_unstable_by(k - 1, cmp);
                keyed.truncate(k);
            }
        }
        keyed.sort_by(cmp);
        keyed.into_iter().map(|(_, r)| r).collect()
    }
}

impl<const N: usize> Operator for SortOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn state_bytes(&self) -> usize {
        (self.rows.len() + self.sorted.as_ref().map_or(0, |q| q.len()))
            * std::mem::size_of::<Row<N>>()
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        if self.sorted.is_none() {
            let row = std::mem::size_of::<Row<N>>();
            while let Some(p) = io.recv::<Row<N>>(0) {
                io.charge(p.len() * row)?;
                self.rows.extend(p);
                // A top-k holds at most twice k rows (or k plus a few packets): past that it
                // keeps the best k, so its memory is bounded by k, not by its input.
                if let Some(k) = self.limit {
                    if self.rows.len() >= k.saturating_mul(2).max(k.saturating_add(4096)) {
                        let rows = std::mem::take(&mut self.rows);
                        let before = rows.len();
                        self.rows = self.order_rows(rows, Some(k));
                        io.uncharge((before - self.rows.len()) * row);
                    }
                }
            }
            if !io.finished::<Row<N>>(0) {
                return Ok(Status::Idle);
            }
            let rows = std::mem::take(&mut self.rows);
            self.sorted = Some(self.order_rows(rows, self.limit).into());
        }
        let q = self.sorted.as_mut().expect("sorted above");
        Ok(emit_queued(io, q, &mut self.out, &self.stat, Status::Idle))
    }
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

/// DISTINCT: passes each row the first time it comes, holding every row seen (charged against
/// the plan's memory limit).
struct DistinctOp<const N: usize> {
    seen: HashSet<Row<N>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> Operator for DistinctOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn state_bytes(&self) -> usize {
        self.seen.len() * (std::mem::size_of::<Row<N>>() + 8)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        // A row and its hash-table slot overhead.
        let entry = std::mem::size_of::<Row<N>>() + 8;
        let mut n = 0;
        while !io.blocked() {
            let Some(p) = io.recv::<Row<N>>(0) else {
                break;
            };
            let before = self.seen.len();
            for r in p {
                if self.seen.insert(r) {
                    self.out.push(io, r);
                    n += 1;
                }
            }
            io.charge((self.seen.len() - before) * entry)?;
        }
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        if io.finished::<Row<N>>(0) && !io.blocked() {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        Ok(Status::Idle)
    }
}

/// Hands every packet to the caller.
struct ChannelSink<const N: usize> {
    /// Dropped at the end of the stream, which tells the caller there is no more.
    tx: Option<Sender<Rows>>,
    width: usize,
}

impl<const N: usize> Operator for ChannelSink<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(0)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        while let Some(p) = io.recv::<Row<N>>(0) {
            let mut rows = Rows::new(self.width);
            rows.ids.reserve_exact(p.len() * self.width);
            for r in p {
                rows.push(&r);
            }
            // A caller that stopped reading has what it wanted: drop the rest.
            if let Some(tx) = &self.tx {
                let _ = tx.send(rows);
            }
        }
        Ok(if io.finished::<Row<N>>(0) {
            self.tx = None;
            Status::Done
        } else {
            Status::Idle
        })
    }
}

/// Adds `p` to the flow plan; its output stream.
fn build<const N: usize>(cx: &ExecCx, b: &mut PlanBuilder, p: &Phys) -> Stream<Row<N>> {
    let stat = p.stat.clone();
    let timing = cx.timing;
    let count = move |stat: &Arc<OpStat>, n: u64| {
        stat.rows.fetch_add(n, Ordering::Relaxed);
    };
    match &p.op {
        Op::Unit => {
            stat.rows.store(1, Ordering::Relaxed);
            b.source(vec![[UNBOUND; N]])
        }
        Op::Empty => b.source(Vec::<Row<N>>::new()),
        Op::Scan { pat, order } => {
            let bound = bound_of(pat);
            let k = bound.iter().filter(|x| x.is_some()).count();
            let prefix = key_prefix(*order, bound, k);
            let perm = cx.store.perm(*order);
            let mut streams = Vec::new();
            let parts = perm.partitions().len();
            for (i, part) in perm.partitions().iter().enumerate() {
                let range = part.data.range(&prefix);
                if range.is_empty() {
                    continue;
                }
                let chunks = if (range.len() as f64) < PAR_MIN_ROWS {
                    1
                } else {
                    cx.dop.div_ceil(parts).max(1)
                };
                for c in 0..chunks {
                    let lo = range.start + range.len() * c / chunks;
                    let hi = range.start + range.len() * (c + 1) / chunks;
                    let op = b.add(
                        format!("scan {} part {i}.{c}", order.name()),
                        ScanOp::<N> {
                            store: cx.store.clone(),
                            order: *order,
                            part: i,
                            range: lo..hi,
                            pat: *pat,
                            out: Emitter::new(0),
                            stat: stat.clone(),
                            timing,
                        },
                    );
                    b.home(op, part.info.home);
                    streams.push(b.stream::<Row<N>>(op, 0).expect("a scan outputs rows"));
                }
            }
            match streams.len() {
                0 => b.source(Vec::<Row<N>>::new()),
                1 => streams.pop().expect("one"),
                _ => b.union(streams),
            }
        }
        Op::IndexJoin { pat } => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            let d = if p.inputs[0].est >= PAR_MIN_ROWS {
                cx.dop
            } else {
                1
            };
            let parts = if d > 1 {
                b.partition_round_robin(input, d)
            } else {
                vec![input]
            };
            let outs: Vec<Stream<Row<N>>> = parts
                .into_iter()
                .map(|s| {
                    let op = b.add(
                        "index join",
                        IndexJoinOp::<N> {
                            store: cx.store.clone(),
                            pat: *pat,
                            queue: VecDeque::new(),
                            looking: None,
                            out: Emitter::new(0),
                            stat: stat.clone(),
                            timing,
                        },
                    );
                    b.feed(s, op, 0);
                    b.stream::<Row<N>>(op, 0)
                        .expect("an index join outputs rows")
                })
                .collect();
            unite(b, outs)
        }
        Op::HashJoin {
            mode,
            keys,
            value_key,
            check,
            residual,
        } => {
            let probe = build(cx, b, &p.inputs[0]);
            let bld = build(cx, b, &p.inputs[1]);
            let keys = Arc::new(keys.clone());
            let probe_key = KeyFn {
                store: cx.store.clone(),
                minted: cx.minted.clone(),
                keys: keys.clone(),
                value_col: value_key.map(|v| v.0),
            };
            let build_key = KeyFn {
                store: cx.store.clone(),
                minted: cx.minted.clone(),
                keys: keys.clone(),
                value_col: value_key.map(|v| v.1),
            };
            let keyed = !keys.is_empty() || value_key.is_some();
            let big = p.inputs[0].est.max(p.inputs[1].est) >= PAR_MIN_ROWS;
            let d = if keyed && big { cx.dop } else { 1 };
            let (ps, bs) = if d > 1 {
                let (pk, bk) = (probe_key.clone(), build_key.clone());
                (
                    b.partition_by(probe, d, move |r: &Row<N>| (pk.key(r) % d as u64) as usize),
                    b.partition_by(bld, d, move |r: &Row<N>| (bk.key(r) % d as u64) as usize),
                )
            } else {
                (vec![probe], vec![bld])
            };
            let outs = ps
                .into_iter()
                .zip(bs)
                .map(|(ps, bs)| {
                    let op = b.add(
                        format!("{mode:?} hash join"),
                        JoinOp::<N> {
                            mode: *mode,
                            keys: keys.clone(),
                            check: check.clone(),
                            residual: residual.clone(),
                            store: cx.store.clone(),
                            minted: cx.minted.clone(),
                            probe_key: probe_key.clone(),
                            build_key: build_key.clone(),
                            table: Table::new(),
                            built: false,
                            queue: VecDeque::new(),
                            probing: None,
                            out: Emitter::new(0),
                            stat: stat.clone(),
                            timing,
                        },
                    );
                    b.feed(ps, op, 0);
                    b.feed(bs, op, 1);
                    b.stream::<Row<N>>(op, 0).expect("a join outputs rows")
                })
                .collect();
            unite(b, outs)
        }
        Op::MergeJoin { .. } => {
            let side = |i: usize| -> Side {
                let Op::Scan { pat, order } = &p.inputs[i].op else {
                    unreachable!("a merge join joins two scans")
                };
                let (_, k) = Permutation::for_bound(bound_of(pat).map(|x| x.is_some()));
                Side {
                    pat: *pat,
                    run: KeyRange::of(&cx.store, pat, *order),
                    col: k,
                }
            };
            let sides = [side(0), side(1)];
            for (s, input) in sides.iter().zip(&p.inputs) {
                count(&input.stat, s.run.len() as u64);
            }
            // Parallel over ranges of the join column's values, cut at the first side's
            // quantiles (a value's rows all fall in one range).
            let (la, lb) = (sides[0].run.len(), sides[1].run.len());
            let d = if (la.max(lb) as f64) < PAR_MIN_ROWS {
                1
            } else {
                cx.dop.max(1)
            };
            let mut cuts: Vec<[usize; 2]> = vec![[0, 0]];
            for c in 1..d {
                let v = sides[0].run.key(&cx.store, la * c / d)[sides[0].col];
                let cut = [0, 1].map(|s| {
                    let side = &sides[s];
                    side.run.seek(&cx.store, 0, side.col, v, false)
                });
                if cut != *cuts.last().expect("one at least") {
                    cuts.push(cut);
                }
            }
            cuts.push([la, lb]);
            let outs: Vec<Stream<Row<N>>> = cuts
                .windows(2)
                .map(|w| {
                    let sides = [0, 1].map(|s| Side {
                        run: sides[s].run.slice(w[0][s], w[1][s]),
                        ..sides[s].clone()
                    });
                    let home = sides[0].run.pieces.first().map(|(part, _)| {
                        cx.store.perm(sides[0].run.order).partitions()[*part]
                            .info
                            .home
                    });
                    let op = b.add(
                        "merge join",
                        MergeJoinOp::<N> {
                            store: cx.store.clone(),
                            sides,
                            at: [0, 0],
                            group: None,
                            out: Emitter::new(0),
                            stat: stat.clone(),
                            timing,
                        },
                    );
                    if let Some(h) = home {
                        b.home(op, h);
                    }
                    b.stream::<Row<N>>(op, 0)
                        .expect("a merge join outputs rows")
                })
                .collect();
            unite(b, outs)
        }
        Op::Filter(e) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            let (store, minted, e) = (cx.store.clone(), cx.minted.clone(), e.clone());
            b.filter(input, move |r: &Row<N>| {
                let _t = Timer::new(timing, &stat);
                let cx = EvalCx {
                    store: &store,
                    minted: &minted,
                };
                let keep = e.holds(cx, r);
                count(&stat, u64::from(keep));
                keep
            })
        }
        Op::Union => {
            let ins: Vec<Stream<Row<N>>> = p.inputs.iter().map(|i| build(cx, b, i)).collect();
            let s = b.union(ins);
            counted(b, s, stat)
        }
        Op::Distinct => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            let op = b.add(
                "distinct",
                DistinctOp::<N> {
                    seen: HashSet::new(),
                    out: Emitter::new(0),
                    stat,
                    timing,
                },
            );
            b.feed(input, op, 0);
            b.stream::<Row<N>>(op, 0).expect("distinct outputs rows")
        }
        Op::Sort(keys, limit) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            let op = b.add(
                "order by",
                SortOp::<N> {
                    keys: keys.clone(),
                    limit: *limit,
                    store: cx.store.clone(),
                    minted: cx.minted.clone(),
                    rows: Vec::new(),
                    sorted: None,
                    out: Emitter::new(0),
                    stat,
                    timing,
                },
            );
            b.feed(input, op, 0);
            b.stream::<Row<N>>(op, 0).expect("a sort outputs rows")
        }
        Op::Slice(start, len) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            let s = b.limit(input, *start as u64, len.map_or(u64::MAX, |l| l as u64));
            counted(b, s, stat)
        }
        Op::Extend(col, e) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            let (store, minted, e, col) = (cx.store.clone(), cx.minted.clone(), e.clone(), *col);
            b.map(input, move |mut r: Row<N>| {
                let _t = Timer::new(timing, &stat);
                let cx = EvalCx {
                    store: &store,
                    minted: &minted,
                };
                // §18.5 Extend: an error leaves the variable unbound.
                r[col] = e
                    .eval(cx, &r)
                    .ok()
                    .and_then(|v| cx.id_of(&v))
                    .unwrap_or(UNBOUND);
                count(&stat, 1);
                r
            })
        }
        Op::Values(cols, rows) => {
            // The terms get ids now: the store's, or minted for this run.
            let ecx = EvalCx {
                store: &cx.store,
                minted: &cx.minted,
            };
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
            b.source(out)
        }
        Op::Path(s, path, o) => {
            let op = b.add(
                format!("path {path}"),
                PathOp::<N>::new(
                    cx.store.clone(),
                    cx.minted.clone(),
                    (s.clone(), path.clone(), o.clone()),
                    stat,
                    timing,
                ),
            );
            b.stream::<Row<N>>(op, 0).expect("a path outputs rows")
        }
        Op::Group(keys, aggs) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            // With keys and a large input, one operator per hash part of the keys: each group
            // falls wholly in one part.
            let d = if !keys.is_empty() && p.inputs[0].est >= PAR_MIN_ROWS {
                cx.dop
            } else {
                1
            };
            let parts = if d > 1 {
                let ks = keys.clone();
                b.partition_by(input, d, move |r: &Row<N>| {
                    let mut h = 0;
                    for &c in &ks {
                        h = mix(h, u64::from(r[c]));
                    }
                    (h % d as u64) as usize
                })
            } else {
                vec![input]
            };
            let outs = parts
                .into_iter()
                .map(|s| {
                    let op = b.add(
                        "group by",
                        GroupOp::<N>::new(
                            keys.clone(),
                            aggs.clone(),
                            cx.store.clone(),
                            cx.minted.clone(),
                            keys.is_empty(),
                            stat.clone(),
                            timing,
                        ),
                    );
                    b.feed(s, op, 0);
                    b.stream::<Row<N>>(op, 0).expect("a group outputs rows")
                })
                .collect();
            unite(b, outs)
        }
        Op::Project(cols) => {
            let input = build::<N>(cx, b, &p.inputs[0]);
            let mut keep = vec![false; cx.width];
            for &c in cols {
                keep[c] = true;
            }
            b.map(input, move |mut r: Row<N>| {
                for (v, k) in r.iter_mut().zip(&keep) {
                    if !k {
                        *v = UNBOUND;
                    }
                }
                count(&stat, 1);
                r
            })
        }
    }
}

fn unite<const N: usize>(b: &mut PlanBuilder, mut outs: Vec<Stream<Row<N>>>) -> Stream<Row<N>> {
    if outs.len() == 1 {
        outs.pop().expect("one")
    } else {
        b.union(outs)
    }
}

fn counted<const N: usize>(
    b: &mut PlanBuilder,
    s: Stream<Row<N>>,
    stat: Arc<OpStat>,
) -> Stream<Row<N>> {
    b.map(s, move |r: Row<N>| {
        stat.rows.fetch_add(1, Ordering::Relaxed);
        r
    })
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

/// Adds `p` to the flow plan, and the sink that sends every packet of its rows to `tx`.
///
/// # Panics
/// If the width is past [`MAX_WIDTH`] (`prepare` refuses such queries).
pub fn build_into(cx: &ExecCx, b: &mut PlanBuilder, p: &Phys, tx: Sender<Rows>) {
    fn with<const N: usize>(cx: &ExecCx, b: &mut PlanBuilder, p: &Phys, tx: Sender<Rows>) {
        let s = build::<N>(cx, b, p);
        let sink = ChannelSink::<N> {
            tx: Some(tx),
            width: cx.width,
        };
        let op = b.add("results", sink);
        b.feed(s, op, 0);
    }
    match width_class(cx.width) {
        Some(4) => with::<4>(cx, b, p, tx),
        Some(8) => with::<8>(cx, b, p, tx),
        Some(16) => with::<16>(cx, b, p, tx),
        Some(32) => with::<32>(cx, b, p, tx),
        Some(64) => with::<64>(cx, b, p, tx),
        Some(128) => with::<128>(cx, b, p, tx),
        _ => panic!("a query of {} variables (at most {MAX_WIDTH})", cx.width),
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
