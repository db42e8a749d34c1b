//! The physical plan as a flow plan: every operator of [`Phys`] becomes one or more operators
//! of `nearflow-flow`, rows are boxed id slices of the query's width (0 = unbound).
//!
//! - a scan is one source per store partition (split further into chunks when the plan's
//!   degree of parallelism is larger than the partition count), each **homed** on its
//!   partition's NUMA node, so its deferred tasks queue there (LAS §4, `PlanBuilder::home`);
//! - hash joins and index joins run in parallel: both inputs of a hash join are partitioned by
//!   the join key, an index join's input is dealt round robin, then the parts are united;
//! - the result leaves through a sink that hands each packet to the caller as it arrives
//!   (results are streamed, not collected and copied).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Instant;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::algebra::{Pat, Slot};
use super::expr::{order, value_key, Cx, Expr};
use super::plan::{bound_of, JoinMode, Op, OpStat, Phys};
use crate::store::{key_prefix, Order, Store};
use crate::term::{Id, UNBOUND};

/// A solution: one id per query column, [`UNBOUND`] where unbound.
pub type Row = Box<[Id]>;

/// Rows below which an operator is not worth parallelising.
const PAR_MIN_ROWS: f64 = 20_000.0;

/// What the builder needs.
pub struct Ctx {
    /// The store.
    pub store: Arc<Store>,
    /// Row width.
    pub width: usize,
    /// Degree of parallelism.
    pub dop: usize,
    /// Whether operators time themselves.
    pub timing: bool,
}

struct Timer<'a> {
    start: Option<Instant>,
    stat: &'a OpStat,
}

impl<'a> Timer<'a> {
    fn new(on: bool, stat: &'a OpStat) -> Self {
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

struct ScanOp {
    store: Arc<Store>,
    order: Order,
    part: usize,
    range: std::ops::Range<usize>,
    pat: Pat,
    width: usize,
    out: Emitter<Row>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl Operator for ScanOp {
    fn inputs(&self) -> Vec<PortType> {
        Vec::new()
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<Row>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let cols = &self.store.perm(self.order).partitions()[self.part].data;
        let pos = self.order.positions();
        let budget = io.capacity_of::<Row>() * 2;
        let mut n = 0;
        while self.range.start < self.range.end && n < budget && !io.blocked() {
            let key = cols.row(self.range.start);
            self.range.start += 1;
            let mut t = [0; 3];
            for c in 0..3 {
                t[pos[c]] = key[c];
            }
            let mut row = vec![UNBOUND; self.width].into_boxed_slice();
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

/// Looks `pat` up for one input row: the row extended by each match.
fn index_lookup(store: &Store, pat: &Pat, row: &[Id], out: &mut Vec<Row>) {
    let mut bound = bound_of(pat);
    for i in 0..3 {
        if let Slot::Var(c) = pat[i] {
            if row[c] != UNBOUND {
                bound[i] = Some(row[c]);
            }
        }
    }
    let (order, k) = Order::for_bound(bound.map(|x| x.is_some()));
    let prefix = key_prefix(order, bound, k);
    let pos = order.positions();
    for part in store.perm(order).partitions() {
        let cols = &part.data;
        for i in cols.range(&prefix) {
            let key = cols.row(i);
            let mut t = [0; 3];
            for c in 0..3 {
                t[pos[c]] = key[c];
            }
            let mut r: Row = row.into();
            if bind(pat, t, &mut r) {
                out.push(r);
            }
        }
    }
}

#[inline]
fn mix(h: u64, v: u64) -> u64 {
    let mut z = (h ^ v).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The join key of a row: its key columns' ids and, for a value-key join, its value key.
#[derive(Clone)]
struct KeyFn {
    store: Arc<Store>,
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
            h = mix(h, value_key(Cx { store: &self.store }, row[c]));
        }
        h
    }
}

struct JoinOp {
    mode: JoinMode,
    keys: Arc<Vec<usize>>,
    check: Vec<usize>,
    residual: Option<Arc<Expr>>,
    store: Arc<Store>,
    probe_key: KeyFn,
    build_key: KeyFn,
    table: HashMap<u64, Vec<Row>>,
    built: bool,
    queue: VecDeque<Row>,
    out: Emitter<Row>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl JoinOp {
    fn probe_one(&mut self, io: &mut Io<'_>, p: Row) -> u64 {
        let cx = Cx { store: &self.store };
        let mut emitted = 0;
        let mut matched = false;
        if let Some(bucket) = self.table.get(&self.probe_key.key(&p)) {
            for b in bucket {
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
                        matched = true;
                        break;
                    }
                    continue;
                }
                let merged: Row = p
                    .iter()
                    .zip(b.iter())
                    .map(|(&x, &y)| if x != UNBOUND { x } else { y })
                    .collect();
                if let Some(e) = &self.residual {
                    if !e.holds(cx, &merged) {
                        continue;
                    }
                }
                matched = true;
                match self.mode {
                    JoinMode::Anti => break,
                    _ => {
                        self.out.push(io, merged);
                        emitted += 1;
                    }
                }
            }
        }
        if !matched && self.mode != JoinMode::Inner {
            self.out.push(io, p);
            emitted += 1;
        }
        emitted
    }
}

impl Operator for JoinOp {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<Row>(), PortType::of::<Row>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<Row>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        if !self.built {
            while let Some(p) = io.recv::<Row>(1) {
                for b in p {
                    self.table
                        .entry(self.build_key.key(&b))
                        .or_default()
                        .push(b);
                }
            }
            self.built = io.finished::<Row>(1);
        }
        let mut n = 0;
        let status = loop {
            if io.blocked() {
                break Status::Idle;
            }
            if self.built {
                if let Some(p) = self.queue.pop_front() {
                    n += self.probe_one(io, p);
                    continue;
                }
            }
            match io.recv::<Row>(0) {
                Some(p) => self.queue.extend(p),
                None if self.built && io.finished::<Row>(0) => {
                    self.out.flush(io);
                    break Status::Done;
                }
                None => break Status::Idle,
            }
        };
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        Ok(status)
    }
}

struct SortOp {
    keys: Arc<Vec<(Expr, bool)>>,
    store: Arc<Store>,
    rows: Vec<Row>,
    sorted: Option<VecDeque<Row>>,
    out: Emitter<Row>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl Operator for SortOp {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<Row>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<Row>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        if self.sorted.is_none() {
            while let Some(p) = io.recv::<Row>(0) {
                self.rows.extend(p);
            }
            if !io.finished::<Row>(0) {
                return Ok(Status::Idle);
            }
            let store = self.store.clone();
            let cx = Cx { store: &store };
            let mut keyed: Vec<(Vec<Option<super::expr::Val<'_>>>, Row)> =
                std::mem::take(&mut self.rows)
                    .into_iter()
                    .map(|r| {
                        (
                            self.keys.iter().map(|(e, _)| e.eval(cx, &r).ok()).collect(),
                            r,
                        )
                    })
                    .collect();
            keyed.sort_by(|(a, _), (b, _)| {
                for (i, (_, desc)) in self.keys.iter().enumerate() {
                    let o = order(a[i].as_ref(), b[i].as_ref());
                    let o = if *desc { o.reverse() } else { o };
                    if o != std::cmp::Ordering::Equal {
                        return o;
                    }
                }
                std::cmp::Ordering::Equal
            });
            self.sorted = Some(keyed.into_iter().map(|(_, r)| r).collect());
        }
        let q = self.sorted.as_mut().expect("sorted above");
        let mut n = 0;
        while !io.blocked() {
            match q.pop_front() {
                Some(r) => {
                    self.out.push(io, r);
                    n += 1;
                }
                None => {
                    self.out.flush(io);
                    self.stat.rows.fetch_add(n, Ordering::Relaxed);
                    return Ok(Status::Done);
                }
            }
        }
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        Ok(Status::Idle)
    }
}

/// Hands every packet to the caller.
struct ChannelSink {
    /// Dropped at the end of the stream, which tells the caller there is no more.
    tx: Option<Sender<Vec<Row>>>,
}

impl Operator for ChannelSink {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<Row>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        Vec::new()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        while let Some(p) = io.recv::<Row>(0) {
            let rows: Vec<Row> = p.into_iter().collect();
            // A caller that stopped reading has what it wanted: drop the rest.
            if let Some(tx) = &self.tx {
                let _ = tx.send(rows);
            }
        }
        Ok(if io.finished::<Row>(0) {
            self.tx = None;
            Status::Done
        } else {
            Status::Idle
        })
    }
}

/// Adds `p` to the flow plan; its output stream.
pub fn build(cx: &Ctx, b: &mut PlanBuilder, p: &Phys) -> Stream<Row> {
    let stat = p.stat.clone();
    let timing = cx.timing;
    let count = move |stat: &Arc<OpStat>, n: u64| {
        stat.rows.fetch_add(n, Ordering::Relaxed);
    };
    match &p.op {
        Op::Unit => {
            stat.rows.store(1, Ordering::Relaxed);
            b.source(vec![vec![UNBOUND; cx.width].into_boxed_slice()])
        }
        Op::Empty => b.source(Vec::<Row>::new()),
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
                        ScanOp {
                            store: cx.store.clone(),
                            order: *order,
                            part: i,
                            range: lo..hi,
                            pat: *pat,
                            width: cx.width,
                            out: Emitter::new(0),
                            stat: stat.clone(),
                            timing,
                        },
                    );
                    b.home(op, part.info.home);
                    streams.push(b.stream::<Row>(op, 0).expect("a scan outputs rows"));
                }
            }
            match streams.len() {
                0 => b.source(Vec::<Row>::new()),
                1 => streams.pop().expect("one"),
                _ => b.union(streams),
            }
        }
        Op::IndexJoin { pat } => {
            let input = build(cx, b, &p.inputs[0]);
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
            let outs: Vec<Stream<Row>> = parts
                .into_iter()
                .map(|s| {
                    let store = cx.store.clone();
                    let pat = *pat;
                    let stat = stat.clone();
                    b.flat_map(s, move |row: Row| {
                        let _t = Timer::new(timing, &stat);
                        let mut out = Vec::new();
                        index_lookup(&store, &pat, &row, &mut out);
                        count(&stat, out.len() as u64);
                        out
                    })
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
                keys: keys.clone(),
                value_col: value_key.map(|v| v.0),
            };
            let build_key = KeyFn {
                store: cx.store.clone(),
                keys: keys.clone(),
                value_col: value_key.map(|v| v.1),
            };
            let keyed = !keys.is_empty() || value_key.is_some();
            let big = p.inputs[0].est.max(p.inputs[1].est) >= PAR_MIN_ROWS;
            let d = if keyed && big { cx.dop } else { 1 };
            let (ps, bs) = if d > 1 {
                let (pk, bk) = (probe_key.clone(), build_key.clone());
                (
                    b.partition_by(probe, d, move |r: &Row| (pk.key(r) % d as u64) as usize),
                    b.partition_by(bld, d, move |r: &Row| (bk.key(r) % d as u64) as usize),
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
                        JoinOp {
                            mode: *mode,
                            keys: keys.clone(),
                            check: check.clone(),
                            residual: residual.clone(),
                            store: cx.store.clone(),
                            probe_key: probe_key.clone(),
                            build_key: build_key.clone(),
                            table: HashMap::new(),
                            built: false,
                            queue: VecDeque::new(),
                            out: Emitter::new(0),
                            stat: stat.clone(),
                            timing,
                        },
                    );
                    b.feed(ps, op, 0);
                    b.feed(bs, op, 1);
                    b.stream::<Row>(op, 0).expect("a join outputs rows")
                })
                .collect();
            unite(b, outs)
        }
        Op::Filter(e) => {
            let input = build(cx, b, &p.inputs[0]);
            let (store, e) = (cx.store.clone(), e.clone());
            b.filter(input, move |r: &Row| {
                let _t = Timer::new(timing, &stat);
                let keep = e.holds(Cx { store: &store }, r);
                count(&stat, u64::from(keep));
                keep
            })
        }
        Op::Union => {
            let ins: Vec<Stream<Row>> = p.inputs.iter().map(|i| build(cx, b, i)).collect();
            let s = b.union(ins);
            counted(b, s, stat)
        }
        Op::Distinct => {
            let input = build(cx, b, &p.inputs[0]);
            let mut seen: HashSet<Row> = HashSet::new();
            b.filter(input, move |r: &Row| {
                let _t = Timer::new(timing, &stat);
                let new = !seen.contains(r) && seen.insert(r.clone());
                count(&stat, u64::from(new));
                new
            })
        }
        Op::Sort(keys) => {
            let input = build(cx, b, &p.inputs[0]);
            let op = b.add(
                "order by",
                SortOp {
                    keys: keys.clone(),
                    store: cx.store.clone(),
                    rows: Vec::new(),
                    sorted: None,
                    out: Emitter::new(0),
                    stat,
                    timing,
                },
            );
            b.feed(input, op, 0);
            b.stream::<Row>(op, 0).expect("a sort outputs rows")
        }
        Op::Slice(start, len) => {
            let input = build(cx, b, &p.inputs[0]);
            let s = b.limit(input, *start as u64, len.map_or(u64::MAX, |l| l as u64));
            counted(b, s, stat)
        }
        Op::Project(cols) => {
            let input = build(cx, b, &p.inputs[0]);
            let mut keep = vec![false; cx.width];
            for &c in cols {
                keep[c] = true;
            }
            b.map(input, move |mut r: Row| {
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

fn unite(b: &mut PlanBuilder, mut outs: Vec<Stream<Row>>) -> Stream<Row> {
    if outs.len() == 1 {
        outs.pop().expect("one")
    } else {
        b.union(outs)
    }
}

fn counted(b: &mut PlanBuilder, s: Stream<Row>, stat: Arc<OpStat>) -> Stream<Row> {
    b.map(s, move |r: Row| {
        stat.rows.fetch_add(1, Ordering::Relaxed);
        r
    })
}

/// Adds the sink that sends every packet to `tx`.
pub fn sink(b: &mut PlanBuilder, s: Stream<Row>, tx: Sender<Vec<Row>>) {
    let op = b.add("results", ChannelSink { tx: Some(tx) });
    b.feed(s, op, 0);
}
