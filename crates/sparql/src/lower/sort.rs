//! ORDER BY: every row of its one input stream, sorted by the keys' values (§15.1); with a
//! limit from a LIMIT above it, only the first `limit` rows are kept as they come (a top-k,
//! its memory bounded by the limit, not by its input).

use std::collections::VecDeque;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{emit_queued, row_ports, ExecCx, Held, Row, Timer};
use crate::expr::{EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{OpStat, Phys};
use crate::value::{order_by_cmp, term_order};
use nearflow_rdf::index::Store;
use nearflow_rdf::term::{Id, UNBOUND};

struct SortOp<const N: usize> {
    keys: Arc<Vec<(Expr, bool)>>,
    /// Keep only the first `limit` rows of the order (a top-k).
    limit: Option<usize>,
    store: Arc<Store>,
    minted: Arc<Minted>,
    rows: Vec<Row<N>>,
    /// What `rows`, then `sorted`, hold, as charged.
    held: Held,
    sorted: Option<VecDeque<Row<N>>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> SortOp<N> {
    /// `rows` in ORDER BY's order, cut to the first `keep` when given: by the keys' values,
    /// ties broken by the terms themselves (`1` before `1.0e0` by datatype); rows equal in every
    /// key keep their arrival order (SPARQL leaves it free), and a top-k keeps any of them.
    /// What the ordering holds beside `rows` is charged against the memory limit before it is
    /// allocated and given back after: the keys' values as they are computed (a query may
    /// order by thousands of keys, or by long computed strings), the sort's scratch space and
    /// the ordered rows. The time limit is checked between rows.
    fn order_rows(
        &self,
        rows: Vec<Row<N>>,
        keep: Option<usize>,
        io: &mut Io<'_>,
    ) -> Result<Vec<Row<N>>, FlowError> {
        let (store, minted) = (self.store.clone(), self.minted.clone());
        let kept = keep.map_or(rows.len(), |k| k.min(rows.len()));
        if let Some(cols) = self.by_id(&store, &rows) {
            let scratch = sort_scratch::<Row<N>>(kept);
            io.charge(scratch)?;
            let sorted = self.order_by_id(rows, &cols, keep);
            io.uncharge(scratch);
            return Ok(sorted);
        }
        if let Some(cols) = self.var_cols().filter(|_| rows.len() < 1 << 31) {
            return self.order_by_rank(rows, &cols, keep, io);
        }
        type Keyed<'a, const N: usize> = (Vec<Option<crate::value::Val<'a>>>, Row<N>);
        // The keyed rows, the sort's scratch and the ordered rows, charged at once.
        let fixed = rows.len() * std::mem::size_of::<Keyed<'_, N>>()
            + sort_scratch::<Keyed<'_, N>>(kept)
            + kept * std::mem::size_of::<Row<N>>();
        io.charge(fixed)?;
        let cx = EvalCx::new(&store, &minted);
        let mut keyed: Vec<Keyed<'_, N>> = Vec::with_capacity(rows.len());
        let mut charged = fixed;
        let mut pending = 0;
        let r = (|| {
            for (i, r) in rows.into_iter().enumerate() {
                let key: Vec<_> = self.keys.iter().map(|(e, _)| e.eval(cx, &r).ok()).collect();
                pending += key_bytes(&key);
                keyed.push((key, r));
                if i % 64 == 63 {
                    io.check()?;
                    io.charge(pending)?;
                    charged += pending;
                    pending = 0;
                }
            }
            io.charge(pending)?;
            charged += pending;
            Ok(())
        })();
        if let Err(e) = r {
            io.uncharge(charged);
            return Err(e);
        }
        let cmp = |(a, _): &Keyed<'_, N>, (b, _): &Keyed<'_, N>| {
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
        let keyed = sorted_keeping(keyed, keep, cmp);
        let sorted = keyed.into_iter().map(|(_, r)| r).collect();
        io.uncharge(charged);
        Ok(sorted)
    }
}

impl<const N: usize> SortOp<N> {
    /// The key columns, when every key is a variable and every row binds it to nothing, to an
    /// IRI or to a simple literal of the store with its id in key order: then ids order as
    /// ORDER BY orders their terms (unbound, then IRIs, then simple literals by code point; an
    /// id is one term, so equal values are one id) and no term is read.
    fn by_id(&self, store: &Store, rows: &[Row<N>]) -> Option<Vec<(usize, bool)>> {
        let cols = self.var_cols()?;
        let dict = store.dict();
        let (iris, strings) = (dict.ordered_iris(), dict.ordered_strings());
        let fits = |id: Id| id == UNBOUND || iris.contains(&id) || strings.contains(&id);
        rows.iter()
            .all(|r| cols.iter().all(|&(c, _)| fits(r[c])))
            .then_some(cols)
    }

    /// The key columns and their directions, when every key is a variable.
    fn var_cols(&self) -> Option<Vec<(usize, bool)>> {
        self.keys
            .iter()
            .map(|(e, desc)| match e {
                crate::expr::Expr::Var(c) => Some((*c, *desc)),
                _ => None,
            })
            .collect()
    }

    /// [`order_rows`](Self::order_rows) when every key is a variable, in little memory beside
    /// the rows (a few bytes a row, where keeping each row's values took hundreds): each key
    /// column's distinct ids are ordered by their values once, and ranked twice, by value
    /// (equal values one rank) and by value then term. The rows are then ordered as
    /// [`order_rows`](Self::order_rows) orders them, every key's value rank first, then every
    /// key's term rank, then arrival, through a permutation applied in place. The ranks, the
    /// permutation and the distinct ids' values are charged while they are held.
    fn order_by_rank(
        &self,
        mut rows: Vec<Row<N>>,
        cols: &[(usize, bool)],
        keep: Option<usize>,
        io: &mut Io<'_>,
    ) -> Result<Vec<Row<N>>, FlowError> {
        let (n, k) = (rows.len(), cols.len());
        let width = 2 * k;
        let fixed = n * width * 4 + n * 4;
        io.charge(fixed)?;
        let mut charged = fixed;
        let ranked = (|| {
            let mut ranks = vec![0u32; n * width];
            let cx = EvalCx::new(&self.store, &self.minted);
            for (j, &(c, _)) in cols.iter().enumerate() {
                let mut index: hashbrown::HashMap<Id, u32> = hashbrown::HashMap::new();
                let mut ids: Vec<Id> = Vec::new();
                for r in &rows {
                    index.entry(r[c]).or_insert_with(|| {
                        ids.push(r[c]);
                        (ids.len() - 1) as u32
                    });
                }
                let vals: Vec<Option<crate::value::Val<'_>>> =
                    ids.iter().map(|&id| cx.val(id)).collect();
                let held = index.allocation_size()
                    + ids.capacity() * std::mem::size_of::<Id>()
                    + key_bytes(&vals)
                    + ids.len() * 12;
                io.charge(held)?;
                charged += held;
                io.check()?;
                let mut order: Vec<u32> = (0..ids.len() as u32).collect();
                let by_value = |a: u32, b: u32| {
                    order_by_cmp(vals[a as usize].as_ref(), vals[b as usize].as_ref())
                };
                let by_term = |a: u32, b: u32| {
                    term_order(vals[a as usize].as_ref(), vals[b as usize].as_ref())
                };
                let full = |a: &u32, b: &u32| by_value(*a, *b).then_with(|| by_term(*a, *b));
                // A top-k over one key needs the order of the first `keep` distinct values (in
                // the key's direction) and of those tied with the last of them by value: every
                // other value comes after them, so all take one rank past theirs (before them,
                // for a descending key). The ranks of the rest are never compared among
                // themselves in the rows kept.
                let desc = cols[j].1;
                let (ranked, rest, offset) = match keep {
                    Some(kk) if k == 1 && kk > 0 && kk < order.len() => {
                        let dir = |a: &u32, b: &u32| {
                            let o = full(a, b);
                            if desc {
                                o.reverse()
                            } else {
                                o
                            }
                        };
                        order.select_nth_unstable_by(kk - 1, dir);
                        let last = order[kk - 1];
                        let (head, tail) = order.split_at(kk);
                        let mut ranked = head.to_vec();
                        ranked.extend(tail.iter().filter(|&&d| by_value(last, d).is_eq()));
                        ranked.sort_by(full);
                        let n_ranked = ranked.len() as u32;
                        if desc {
                            (ranked, 0, 1)
                        } else {
                            (ranked, n_ranked, 0)
                        }
                    }
                    _ => {
                        order.sort_by(full);
                        (order, 0, 0)
                    }
                };
                let mut value_rank = vec![rest; ids.len()];
                let mut term_rank = vec![rest; ids.len()];
                for (at, &d) in ranked.iter().enumerate() {
                    let here = at as u32 + offset;
                    let (v, t) = match at.checked_sub(1).map(|p| ranked[p]) {
                        Some(prev) if by_value(prev, d).is_eq() => (
                            value_rank[prev as usize],
                            if by_term(prev, d).is_eq() {
                                term_rank[prev as usize]
                            } else {
                                here
                            },
                        ),
                        _ => (here, here),
                    };
                    value_rank[d as usize] = v;
                    term_rank[d as usize] = t;
                }
                for (i, r) in rows.iter().enumerate() {
                    let d = index[&r[c]] as usize;
                    ranks[i * width + j] = value_rank[d];
                    ranks[i * width + k + j] = term_rank[d];
                }
                io.check()?;
            }
            Ok(ranks)
        })();
        let ranks = match ranked {
            Ok(r) => r,
            Err(e) => {
                io.uncharge(charged);
                return Err(e);
            }
        };
        let desc: Vec<bool> = (0..width).map(|i| cols[i % k].1).collect();
        let cmp = |a: &u32, b: &u32| {
            let (x, y) = (*a as usize * width, *b as usize * width);
            for i in 0..width {
                let o = ranks[x + i].cmp(&ranks[y + i]);
                let o = if desc[i] { o.reverse() } else { o };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            a.cmp(b)
        };
        let mut perm: Vec<u32> = (0..n as u32).collect();
        let sorted = match keep {
            Some(kept) if kept < n => {
                if kept > 0 {
                    perm.select_nth_unstable_by(kept - 1, cmp);
                    perm.truncate(kept);
                    perm.sort_unstable_by(cmp);
                }
                perm.iter().map(|&i| rows[i as usize]).collect()
            }
            _ => {
                perm.sort_unstable_by(cmp);
                permute(&mut rows, &mut perm);
                rows
            }
        };
        io.uncharge(charged);
        Ok(sorted)
    }

    /// [`order_rows`](Self::order_rows) by the ids of `cols` (see [`by_id`](Self::by_id)).
    fn order_by_id(
        &self,
        rows: Vec<Row<N>>,
        cols: &[(usize, bool)],
        keep: Option<usize>,
    ) -> Vec<Row<N>> {
        let cmp = |a: &Row<N>, b: &Row<N>| {
            for &(c, desc) in cols {
                let o = a[c].cmp(&b[c]);
                let o = if desc { o.reverse() } else { o };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            std::cmp::Ordering::Equal
        };
        sorted_keeping(rows, keep, cmp)
    }
}

/// Reorders `rows` so that row `i` is the one that was at `perm[i]`, in place: each cycle of
/// the permutation is followed once, its entries marked done by their top bit (so fewer than
/// 2^31 rows).
fn permute<T: Copy>(rows: &mut [T], perm: &mut [u32]) {
    const DONE: u32 = 1 << 31;
    debug_assert!(rows.len() < DONE as usize && rows.len() == perm.len());
    for start in 0..rows.len() {
        if perm[start] & DONE != 0 {
            continue;
        }
        let first = rows[start];
        let mut at = start;
        loop {
            let from = perm[at] as usize;
            perm[at] |= DONE;
            if from == start {
                rows[at] = first;
                break;
            }
            rows[at] = rows[from];
            at = from;
        }
    }
}

/// `v` sorted by `cmp` (stably), cut to its first `keep` when given: the best `keep` are
/// selected first, so a top-k sorts only them.
fn sorted_keeping<T>(
    mut v: Vec<T>,
    keep: Option<usize>,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering + Copy,
) -> Vec<T> {
    if let Some(k) = keep {
        if v.len() > k {
            if k == 0 {
                return Vec::new();
            }
            v.select_nth_unstable_by(k - 1, cmp);
            v.truncate(k);
        }
    }
    v.sort_by(cmp);
    v
}

/// The bytes a stable sort of `len` items of `T` allocates for its scratch space: half of
/// them, or all of them while they take under 8 MB (the standard library's merge sort).
fn sort_scratch<T>(len: usize) -> usize {
    let size = std::mem::size_of::<T>().max(1);
    (len - len / 2).max(len.min(8_000_000 / size)) * size
}

/// The bytes a row's sort keys hold: what the vector and its values own.
fn key_bytes(key: &[Option<crate::value::Val<'_>>]) -> usize {
    use crate::value::Val;
    use std::borrow::Cow;
    let owned = |c: &Cow<'_, str>| match c {
        Cow::Owned(s) => s.capacity(),
        Cow::Borrowed(_) => 0,
    };
    std::mem::size_of_val(key)
        + key
            .iter()
            .map(|v| match v {
                Some(Val::Iri(s) | Val::Blank(s)) => owned(s),
                Some(Val::Lit {
                    value,
                    datatype,
                    lang,
                }) => owned(value) + owned(datatype) + lang.as_ref().map_or(0, owned),
                None => 0,
            })
            .sum::<usize>()
}

impl<const N: usize> Operator for SortOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn state_bytes(&self) -> usize {
        self.held.bytes()
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
                self.held.grow(io, &mut self.rows, p.len(), 0)?;
                self.rows.extend(p);
                // A top-k holds at most twice k rows (or k plus a few packets): past that it
                // keeps the best k, so its memory is bounded by k, not by its input.
                if let Some(k) = self.limit {
                    if self.rows.len() >= k.saturating_mul(2).max(k.saturating_add(4096)) {
                        let rows = std::mem::take(&mut self.rows);
                        self.rows = self.order_rows(rows, Some(k), io)?;
                        self.held.set(io, self.rows.capacity() * row)?;
                    }
                }
            }
            if !io.finished::<Row<N>>(0) {
                return Ok(Status::Idle);
            }
            let rows = std::mem::take(&mut self.rows);
            let sorted = self.order_rows(rows, self.limit, io)?;
            self.held.set(io, sorted.capacity() * row)?;
            self.sorted = Some(sorted.into());
        }
        let q = self.sorted.as_mut().expect("sorted above");
        Ok(emit_queued(io, q, &mut self.out, &self.stat, Status::Idle))
    }
}

pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    keys: &Arc<Vec<(Expr, bool)>>,
    limit: Option<usize>,
    input: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    let input = super::exchange::unite(b, input);
    let op = b.add(
        "order by",
        SortOp::<N> {
            keys: keys.clone(),
            limit,
            store: cx.store.clone(),
            minted: cx.minted.clone(),
            rows: Vec::new(),
            held: Held::default(),
            sorted: None,
            out: Emitter::new(0),
            stat: p.stat.clone(),
            timing: cx.timing,
        },
    );
    b.feed(input, op, 0);
    vec![b.stream::<Row<N>>(op, 0).expect("a sort outputs rows")]
}
