//! GROUP BY and the aggregates (SPARQL 1.1 §18.5.1): a flow operator that takes every row,
//! keeps one accumulator per group and aggregate, and emits one row per group when its input
//! ends. In parallel, two ways:
//!
//! - **by key**: the plan hash-partitions the rows by the group keys, so every group falls
//!   wholly in one stream, and one operator per stream aggregates it;
//! - **in two phases**, when the input already comes in several streams and no aggregate is
//!   DISTINCT: one *partial* operator per input stream aggregates what it sees and sends its
//!   groups' accumulators ([`Partial`]), routed by the groups' key hash, to the *final*
//!   operators, which merge them (COUNT and SUM add, MIN and MAX compare, …). Only the groups
//!   cross between streams, not the rows: an aggregate without keys over a parallel scan
//!   becomes one partial per stream and one final merge of a few accumulators.
//!
//! Semantics, per §18.5.1:
//! - `COUNT` counts the rows whose argument evaluates without error (`COUNT(*)`: all rows);
//! - `SUM` and `AVG` add numbers with the usual promotion; a value that is not a number makes
//!   the aggregate an error (its column stays unbound); over no rows both are `0`;
//! - `MIN` and `MAX` take the least and greatest value in ORDER BY's order;
//! - `SAMPLE` takes some value that is not an error; `GROUP_CONCAT` joins string values with
//!   the separator, and any other value is an error;
//! - an argument that evaluates to an error makes every aggregate but `COUNT` and `SAMPLE` an
//!   error (as Oxigraph does);
//! - `DISTINCT` takes each distinct term once (`COUNT(DISTINCT *)`: each distinct solution);
//! - with no GROUP BY, an empty input is one group: `COUNT` 0, `SUM`/`AVG` 0, the others
//!   unbound (`GROUP_CONCAT` the empty string).

use std::collections::VecDeque;
use std::sync::Arc;

use hashbrown::{HashSet, HashTable};
use nearflow_flow::{Emitter, FlowError, Io, Operator, PortType, Status};

use nearflow_flow::{PlanBuilder, Stream};

use super::{emit_queued, mix, row_ports, ExecCx, Held, Row, Timer};
use crate::algebra::{Agg, AggFunc};
use crate::expr::{ArithOp, EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{OpStat, Phys};
use crate::value::{order_by_cmp, Num, Val};
use nearflow_rdf::index::Store;
use nearflow_rdf::term::{Id, UNBOUND};

/// One aggregate's running state in one group.
#[derive(Default)]
pub(super) struct Acc {
    /// Rows counted (COUNT, AVG).
    count: u64,
    /// The running sum (SUM, AVG); `None` before the first value.
    sum: Option<Num>,
    /// The best value so far (MIN, MAX, SAMPLE).
    best: Option<Id>,
    /// The concatenation so far (GROUP_CONCAT).
    text: String,
    /// A value made the aggregate an error.
    error: bool,
    /// For DISTINCT: the values (or whole rows) taken so far.
    seen: Option<HashSet<Vec<Id>>>,
}

/// An aggregate's argument for one row.
enum Arg<'s> {
    /// `COUNT(*)`: the whole row.
    Row,
    /// A bound variable: its id.
    Id(Id),
    /// A computed value.
    Val(Val<'s>),
}

/// Some groups' states, from a partial aggregation, for the final operator `target`.
pub(super) struct Partial {
    target: usize,
    /// How many groups.
    groups: usize,
    /// The groups' key ids end to end.
    keys: Vec<Id>,
    /// Their accumulators end to end.
    accs: Vec<Acc>,
}

/// What a group operator takes and gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Rows in, one row per group out.
    Full,
    /// Rows in, [`Partial`]s out, for this many final operators.
    Partial(usize),
    /// [`Partial`]s in, one row per group out.
    Final,
}

/// The GROUP BY operator.
pub(super) struct GroupOp<const N: usize> {
    phase: Phase,
    keys: Vec<usize>,
    aggs: Arc<Vec<(usize, Agg)>>,
    store: Arc<Store>,
    minted: Arc<Minted>,
    /// The groups, by their number: an index over [`Self::group_keys`] (no allocation per
    /// group: a vector per key and per group's accumulators was 40 % of a GROUP BY's time in
    /// `malloc` and `free`).
    groups: HashTable<u32>,
    /// Every group's key ids end to end, `keys.len()` per group, in the order first seen.
    group_keys: Vec<Id>,
    /// Every group's accumulators end to end, `aggs.len()` per group.
    accs: Vec<Acc>,
    /// Groups so far.
    count: usize,
    /// The group of the last row added.
    last: Option<usize>,
    /// Whether this operator makes the one group of an aggregate without keys.
    whole: bool,
    /// What the tables of groups hold, as charged.
    held: Held,
    output: Option<VecDeque<Row<N>>>,
    out: Emitter<Row<N>>,
    /// A partial operator's output, made when its input ended.
    partials: Option<VecDeque<Partial>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> GroupOp<N> {
    /// A GROUP BY of `keys` computing `aggs`, in `phase`. `whole`: there are no keys, and this
    /// operator answers for the whole input (so an empty input still makes one group).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        phase: Phase,
        keys: Vec<usize>,
        aggs: Arc<Vec<(usize, Agg)>>,
        store: Arc<Store>,
        minted: Arc<Minted>,
        whole: bool,
        stat: Arc<OpStat>,
        timing: bool,
    ) -> Self {
        GroupOp {
            phase,
            keys,
            aggs,
            store,
            minted,
            groups: HashTable::new(),
            group_keys: Vec::new(),
            accs: Vec::new(),
            count: 0,
            last: None,
            whole,
            held: Held::default(),
            output: None,
            out: Emitter::new(0),
            partials: None,
            stat,
            timing,
        }
    }

    /// Adds a group's fresh accumulators.
    fn push_accs(&mut self) {
        for (_, a) in self.aggs.iter() {
            self.accs.push(Acc {
                seen: a.distinct.then(HashSet::new),
                ..Acc::default()
            });
        }
    }

    fn group_key_hash(key: &[Id]) -> u64 {
        key.iter().fold(0, |h, &id| mix(h, u64::from(id)))
    }

    /// Bytes a group holds in the operator's tables (its key, accumulators and table slot).
    fn group_bytes(&self) -> usize {
        self.keys.len() * 4 + self.aggs.len() * std::mem::size_of::<Acc>() + 48
    }

    /// Bytes the tables of groups hold, by their capacities (for the memory limit; what the
    /// accumulators own beside them, DISTINCT's sets and GROUP_CONCAT's strings, is charged
    /// as it grows).
    fn tables_bytes(&self) -> usize {
        self.group_keys.capacity() * std::mem::size_of::<Id>()
            + self.accs.capacity() * std::mem::size_of::<Acc>()
            + self.groups.allocation_size()
    }

    /// The number of the group of `key`, made when new, and the bytes a new group holds
    /// beside the tables (none: [`tables_bytes`](Self::tables_bytes) counts them).
    fn group_of(&mut self, key: &[Id]) -> (usize, usize) {
        let k = self.keys.len();
        let hash = Self::group_key_hash(key);
        let found = {
            let keys = &self.group_keys;
            self.groups
                .find(hash, |&g| {
                    &keys[g as usize * k..(g as usize + 1) * k] == key
                })
                .copied()
        };
        match found {
            Some(g) => (g as usize, 0),
            None => {
                let g = self.count;
                self.count += 1;
                self.group_keys.extend_from_slice(key);
                self.push_accs();
                let keys = &self.group_keys;
                self.groups.insert_unique(hash, g as u32, |&h| {
                    Self::group_key_hash(&keys[h as usize * k..(h as usize + 1) * k])
                });
                (g, 0)
            }
        }
    }

    /// Adds one row to its group.
    fn add(&mut self, row: &Row<N>) -> usize {
        let k = self.keys.len();
        let mut key = [UNBOUND; N];
        for (i, &c) in self.keys.iter().enumerate() {
            key[i] = row[c];
        }
        // Rows of one group often come one after another (a scan sorted on the key): the
        // last row's group is checked before the table.
        let (g, mut grew) = match self.last {
            Some(g) if self.group_keys[g * k..(g + 1) * k] == key[..k] => (g, 0),
            _ => self.group_of(&key[..k]),
        };
        self.last = Some(g);
        let cx = EvalCx::new(&self.store, &self.minted);
        for (i, (_, agg)) in self.aggs.iter().enumerate() {
            let acc = &mut self.accs[g * self.aggs.len() + i];
            if acc.error && agg.func != AggFunc::Count {
                continue;
            }
            // The argument: the row for COUNT(*); a variable's id as it is (no term is read
            // for COUNT or DISTINCT); else the expression's value.
            let arg = match &agg.expr {
                None => Arg::Row,
                Some(Expr::Var(c)) if row[*c] != UNBOUND => Arg::Id(row[*c]),
                Some(e) => match e.eval(cx, row) {
                    Ok(v) => Arg::Val(v),
                    Err(_) => {
                        // An error: COUNT and SAMPLE skip the row; the others become errors.
                        if !matches!(agg.func, AggFunc::Count | AggFunc::Sample) {
                            acc.error = true;
                        }
                        continue;
                    }
                },
            };
            if let Some(seen) = &mut acc.seen {
                let item = match &arg {
                    Arg::Row => row[..].to_vec(),
                    Arg::Id(id) => vec![*id],
                    Arg::Val(v) => match cx.id_of(v) {
                        Some(id) => vec![id],
                        None => {
                            acc.error = true;
                            continue;
                        }
                    },
                };
                let before = seen.len();
                if !seen.insert(item) {
                    continue;
                }
                grew += (seen.len() - before) * (N * 4 + 24);
            }
            if agg.func == AggFunc::Count {
                acc.count += 1;
                continue;
            }
            let value = match arg {
                Arg::Row => unreachable!("only COUNT(*) has no argument"),
                Arg::Id(id) => cx.val(id).expect("a bound id"),
                Arg::Val(v) => v,
            };
            match &agg.func {
                AggFunc::Count => unreachable!("counted above"),
                AggFunc::Sum | AggFunc::Avg => match value.numeric() {
                    Some(n) => {
                        acc.count += 1;
                        acc.sum = match acc.sum {
                            None => Some(n),
                            Some(s) => Num::arith(s, n, ArithOp::Add),
                        };
                        if acc.sum.is_none() {
                            acc.error = true;
                        }
                    }
                    None => acc.error = true,
                },
                AggFunc::Min | AggFunc::Max | AggFunc::Sample => {
                    let better = match acc.best {
                        None => true,
                        Some(_) if agg.func == AggFunc::Sample => false,
                        Some(b) => {
                            let o = order_by_cmp(Some(&value), cx.val(b).as_ref());
                            if agg.func == AggFunc::Min {
                                o == std::cmp::Ordering::Less
                            } else {
                                o == std::cmp::Ordering::Greater
                            }
                        }
                    };
                    if better {
                        match cx.id_of(&value) {
                            Some(id) => acc.best = Some(id),
                            None => acc.error = true,
                        }
                    }
                }
                AggFunc::GroupConcat(sep) => match string_of(&value) {
                    Some(s) => {
                        if acc.count > 0 {
                            acc.text.push_str(sep);
                        }
                        acc.text.push_str(s);
                        grew += s.len() + sep.len();
                        acc.count += 1;
                    }
                    None => acc.error = true,
                },
            }
        }
        grew
    }

    /// Merges a partial aggregation's groups into these (no DISTINCT aggregate: the plan
    /// uses two phases only without one).
    fn merge(&mut self, part: Partial) -> usize {
        let (k, a) = (self.keys.len(), self.aggs.len());
        let (store, minted) = (self.store.clone(), self.minted.clone());
        let cx = EvalCx::new(&store, &minted);
        let mut grew = 0;
        let mut accs = part.accs.into_iter();
        for i in 0..part.groups {
            let (g, more) = self.group_of(&part.keys[i * k..(i + 1) * k]);
            grew += more;
            for (j, other) in accs.by_ref().take(a).enumerate() {
                let func = &self.aggs[j].1.func;
                let acc = &mut self.accs[g * a + j];
                acc.error |= other.error;
                match func {
                    AggFunc::Count => acc.count += other.count,
                    AggFunc::Sum | AggFunc::Avg => {
                        acc.count += other.count;
                        acc.sum = match (acc.sum, other.sum) {
                            (Some(x), Some(y)) => {
                                let s = Num::arith(x, y, ArithOp::Add);
                                acc.error |= s.is_none();
                                s
                            }
                            (x, y) => x.or(y),
                        };
                    }
                    AggFunc::Min | AggFunc::Max => {
                        if let Some(o) = other.best {
                            let better = acc.best.is_none_or(|b| {
                                let ord = order_by_cmp(cx.val(o).as_ref(), cx.val(b).as_ref());
                                if *func == AggFunc::Min {
                                    ord == std::cmp::Ordering::Less
                                } else {
                                    ord == std::cmp::Ordering::Greater
                                }
                            });
                            if better {
                                acc.best = Some(o);
                            }
                        }
                    }
                    AggFunc::Sample => acc.best = acc.best.or(other.best),
                    AggFunc::GroupConcat(sep) => {
                        if other.count > 0 {
                            if acc.count > 0 {
                                acc.text.push_str(sep);
                            }
                            acc.text.push_str(&other.text);
                            grew += other.text.len() + sep.len();
                            acc.count += other.count;
                        }
                    }
                }
            }
        }
        grew
    }

    /// This partial aggregation's groups, split for `n` final operators by their keys' hash
    /// (as a hash exchange on the keys would route their rows).
    fn partials(&mut self, n: usize) -> VecDeque<Partial> {
        let (k, a) = (self.keys.len(), self.aggs.len());
        let mut parts: Vec<Partial> = (0..n)
            .map(|target| Partial {
                target,
                groups: 0,
                keys: Vec::new(),
                accs: Vec::new(),
            })
            .collect();
        let mut accs = std::mem::take(&mut self.accs).into_iter();
        for g in 0..self.count {
            let key = &self.group_keys[g * k..(g + 1) * k];
            let t = (Self::group_key_hash(key) % n as u64) as usize;
            parts[t].groups += 1;
            parts[t].keys.extend_from_slice(key);
            parts[t].accs.extend(accs.by_ref().take(a));
        }
        self.groups.clear();
        self.group_keys = Vec::new();
        parts.into_iter().filter(|p| p.groups > 0).collect()
    }

    /// The output rows, one per group.
    fn finish(&mut self) -> VecDeque<Row<N>> {
        if self.count == 0 && self.whole {
            self.count = 1;
            self.push_accs();
        }
        let cx = EvalCx::new(&self.store, &self.minted);
        let (k, a) = (self.keys.len(), self.aggs.len());
        let mut out = VecDeque::with_capacity(self.count);
        let mut accs = std::mem::take(&mut self.accs).into_iter();
        // Counts repeat from group to group: each number's id is looked up once (a term's id
        // costs a dictionary lookup, and a mint for a number the store does not hold).
        let mut counts: hashbrown::HashMap<u64, Id> = hashbrown::HashMap::new();
        for g in 0..self.count {
            let mut row = [UNBOUND; N];
            for (&c, &id) in self.keys.iter().zip(&self.group_keys[g * k..(g + 1) * k]) {
                row[c] = id;
            }
            for ((col, agg), acc) in self.aggs.iter().zip(accs.by_ref().take(a)) {
                row[*col] = match agg.func {
                    AggFunc::Min | AggFunc::Max | AggFunc::Sample => {
                        acc.best.filter(|_| !acc.error).unwrap_or(UNBOUND)
                    }
                    AggFunc::Count => *counts.entry(acc.count).or_insert_with(|| {
                        result(agg, acc)
                            .and_then(|v| cx.id_of(&v))
                            .unwrap_or(UNBOUND)
                    }),
                    _ => result(agg, acc)
                        .and_then(|v| cx.id_of(&v))
                        .unwrap_or(UNBOUND),
                };
            }
            out.push_back(row);
        }
        self.groups.clear();
        self.group_keys = Vec::new();
        out
    }
}

/// A string literal's text (simple, `xsd:string` or language-tagged).
fn string_of<'v>(v: &'v Val<'_>) -> Option<&'v str> {
    match v {
        Val::Lit {
            value,
            datatype,
            lang,
        } if lang.is_some() || datatype == nearflow_rdf::term::XSD_STRING => Some(value),
        _ => None,
    }
}

/// The value of a COUNT, SUM, AVG or GROUP_CONCAT from its final state; `None` for an error.
fn result(agg: &Agg, acc: Acc) -> Option<Val<'static>> {
    if acc.error && agg.func != AggFunc::Count {
        return None;
    }
    let zero = || Num::I(0.into()).to_val();
    match &agg.func {
        AggFunc::Count => Some(Num::I((acc.count as i64).into()).to_val()),
        AggFunc::Sum => Some(acc.sum.map_or_else(zero, Num::to_val)),
        AggFunc::Avg => match acc.sum {
            None => Some(zero()),
            Some(s) => {
                Num::arith(s, Num::I((acc.count as i64).into()), ArithOp::Div).map(Num::to_val)
            }
        },
        // Their result is the id they hold (see `finish`).
        AggFunc::Min | AggFunc::Max | AggFunc::Sample => None,
        AggFunc::GroupConcat(_) => Some(Val::Lit {
            value: std::borrow::Cow::Owned(acc.text),
            datatype: std::borrow::Cow::Borrowed(nearflow_rdf::term::XSD_STRING),
            lang: None,
        }),
    }
}

impl<const N: usize> Operator for GroupOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        match self.phase {
            Phase::Final => vec![PortType::of::<Partial>()],
            _ => row_ports::<N>(1),
        }
    }

    fn outputs(&self) -> Vec<PortType> {
        match self.phase {
            Phase::Partial(_) => vec![PortType::of::<Partial>()],
            _ => row_ports::<N>(1),
        }
    }

    fn state_bytes(&self) -> usize {
        self.count * self.group_bytes()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        if self.output.is_none() && self.partials.is_none() {
            let finished = if self.phase == Phase::Final {
                while let Some(p) = io.recv::<Partial>(0) {
                    let mut grew = 0;
                    for part in p {
                        grew += self.merge(part);
                    }
                    io.charge(grew)?;
                    self.held.set(io, self.tables_bytes())?;
                }
                io.finished::<Partial>(0)
            } else {
                while let Some(p) = io.recv::<Row<N>>(0) {
                    let mut grew = 0;
                    for r in &p {
                        grew += self.add(r);
                    }
                    io.charge(grew)?;
                    self.held.set(io, self.tables_bytes())?;
                }
                io.finished::<Row<N>>(0)
            };
            if !finished {
                return Ok(Status::Idle);
            }
            match self.phase {
                Phase::Partial(n) => self.partials = Some(self.partials(n)),
                _ => self.output = Some(self.finish()),
            }
        }
        if let Some(parts) = &mut self.partials {
            // A partial's groups are a few packets at most: sent at once.
            let mut out = Emitter::<Partial>::new(0);
            while let Some(p) = parts.pop_front() {
                out.push(io, p);
            }
            out.flush(io);
            return Ok(Status::Done);
        }
        let q = self.output.as_mut().expect("made above");
        Ok(emit_queued(io, q, &mut self.out, &self.stat, Status::Idle))
    }
}

/// The group operators: one per input stream (the plan partitioned the input by the keys, or
/// an aggregate without keys reads one stream); or, in two phases, one partial operator per
/// input stream and one final operator per output stream, the partial states routed by key.
pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    keys: &[usize],
    aggs: &Arc<Vec<(usize, Agg)>>,
    two_phase: bool,
    input: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    let op = |b: &mut PlanBuilder, phase: Phase, name: &str| {
        b.add(
            name,
            GroupOp::<N>::new(
                phase,
                keys.to_vec(),
                aggs.clone(),
                cx.store.clone(),
                cx.minted.clone(),
                keys.is_empty() && !matches!(phase, Phase::Partial(_)),
                p.stat.clone(),
                cx.timing,
            ),
        )
    };
    if !two_phase {
        return input
            .into_iter()
            .map(|s| {
                let g = op(b, Phase::Full, "group by");
                b.feed(s, g, 0);
                b.stream::<Row<N>>(g, 0).expect("a group outputs rows")
            })
            .collect();
    }
    let n = p.out.count();
    let mut targets: Vec<Vec<Stream<Partial>>> = (0..n).map(|_| Vec::new()).collect();
    for s in input {
        let g = op(b, Phase::Partial(n), "group by (partial)");
        b.feed(s, g, 0);
        let partials = b.stream::<Partial>(g, 0).expect("partial groups");
        if n == 1 {
            targets[0].push(partials);
        } else {
            let parts = b.partition_by(partials, n, |part: &Partial| part.target);
            for (t, s) in targets.iter_mut().zip(parts) {
                t.push(s);
            }
        }
    }
    targets
        .into_iter()
        .map(|mut ins| {
            let merged = match ins.len() {
                1 => ins.pop().expect("one"),
                _ => b.union(ins),
            };
            let g = op(b, Phase::Final, "group by (final)");
            b.feed(merged, g, 0);
            b.stream::<Row<N>>(g, 0).expect("a group outputs rows")
        })
        .collect()
}
