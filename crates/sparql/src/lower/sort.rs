//! ORDER BY: every row of its one input stream, sorted by the keys' values (§15.1); with a
//! limit from a LIMIT above it, only the first `limit` rows are kept as they come (a top-k,
//! its memory bounded by the limit, not by its input).

use std::collections::VecDeque;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{emit_queued, row_ports, ExecCx, Row, Timer};
use crate::expr::{order_by_cmp, term_order, EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{OpStat, Phys};
use nearflow_rdf::index::Store;
use nearflow_rdf::term::{Id, UNBOUND};

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
    /// The keys' values are charged against the memory limit as they are computed (a query
    /// may order by thousands of keys, or by long computed strings) and given back after; the
    /// time limit is checked between rows.
    fn order_rows(
        &self,
        rows: Vec<Row<N>>,
        keep: Option<usize>,
        io: &mut Io<'_>,
    ) -> Result<Vec<Row<N>>, FlowError> {
        let (store, minted) = (self.store.clone(), self.minted.clone());
        if let Some(cols) = self.by_id(&store, &rows) {
            return Ok(self.order_by_id(rows, &cols, keep));
        }
        let cx = EvalCx::new(&store, &minted);
        let mut keyed: Vec<(Vec<Option<crate::expr::Val<'_>>>, Row<N>)> =
            Vec::with_capacity(rows.len());
        let mut charged = 0;
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
        let cmp = |(a, _): &(Vec<Option<crate::expr::Val<'_>>>, Row<N>),
                   (b, _): &(Vec<Option<crate::expr::Val<'_>>>, Row<N>)| {
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
        io.uncharge(charged);
        Ok(keyed.into_iter().map(|(_, r)| r).collect())
    }
}

impl<const N: usize> SortOp<N> {
    /// The key columns, when every key is a variable and every row binds it to nothing, to an
    /// IRI or to a simple literal of the store with its id in key order: then ids order as
    /// ORDER BY orders their terms (unbound, then IRIs, then simple literals by code point; an
    /// id is one term, so equal values are one id) and no term is read.
    fn by_id(&self, store: &Store, rows: &[Row<N>]) -> Option<Vec<(usize, bool)>> {
        let cols: Vec<(usize, bool)> = self
            .keys
            .iter()
            .map(|(e, desc)| match e {
                crate::expr::Expr::Var(c) => Some((*c, *desc)),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let dict = store.dict();
        let (iris, strings) = (dict.ordered_iris(), dict.ordered_strings());
        let fits = |id: Id| id == UNBOUND || iris.contains(&id) || strings.contains(&id);
        rows.iter()
            .all(|r| cols.iter().all(|&(c, _)| fits(r[c])))
            .then_some(cols)
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

/// The bytes a row's sort keys hold: the vector and what its values own.
fn key_bytes(key: &[Option<crate::expr::Val<'_>>]) -> usize {
    use crate::expr::Val;
    use std::borrow::Cow;
    let owned = |c: &Cow<'_, str>| match c {
        Cow::Owned(s) => s.capacity(),
        Cow::Borrowed(_) => 0,
    };
    std::mem::size_of_val(key)
        + 24
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
                        self.rows = self.order_rows(rows, Some(k), io)?;
                        io.uncharge((before - self.rows.len()) * row);
                    }
                }
            }
            if !io.finished::<Row<N>>(0) {
                return Ok(Status::Idle);
            }
            let rows = std::mem::take(&mut self.rows);
            self.sorted = Some(self.order_rows(rows, self.limit, io)?.into());
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
            sorted: None,
            out: Emitter::new(0),
            stat: p.stat.clone(),
            timing: cx.timing,
        },
    );
    b.feed(input, op, 0);
    vec![b.stream::<Row<N>>(op, 0).expect("a sort outputs rows")]
}
