//! A merge join of two index ranges of one graph each, sorted on the same column, over ranges
//! of that column's values: equal-valued groups of the two sides are paired row by row; between
//! groups each side skips ahead by binary search. A source: it reads the store itself, one
//! operator per range of the join values (cut at the first side's quantiles, so a value's rows
//! all fall in one range), homed where its first rows live (unhomed over a replicated store,
//! whose rows it reads on its worker's node).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{bind, row_ports, ExecCx, Reads, Row, Timer};
use crate::physical::{bound_of, Op, OpStat, Pat, Phys};
use nearflow_rdf::index::{key_prefix, KeyRun, Permutation, QuadIndex, Store, Tally};
use nearflow_rdf::term::UNBOUND;

/// The matches of `pat`'s bound prefix in `order`, in the pattern's one graph, as a run read
/// by position.
fn run_of(store: &Store, pat: &Pat, order: Permutation) -> KeyRun {
    let bound = bound_of(pat);
    let k = bound.iter().filter(|x| x.is_some()).count();
    let prefix = key_prefix(order, bound, k);
    let graph = pat[3].id().expect("a merge join reads one graph per side");
    store.key_run(order, graph, &prefix)
}

/// One side of a merge join: its pattern, its run, the key column it is sorted on.
#[derive(Clone, Debug)]
struct Side {
    pat: Pat,
    run: KeyRun,
    col: usize,
}

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
        // As a scan: about two packets of rows per task (of the size packets have now), then
        // the worker may take another.
        let budget = self.out.capacity(io) as u64 * 2;
        let mut n = 0u64;
        let mut reads = Reads::new(io.numa_node(), &stat);
        let r = reads.tally();
        let status = loop {
            if io.blocked() || n >= budget {
                break Status::More;
            }
            if let Some((g, i, j)) = &mut self.group {
                if *i < g[0].end {
                    let mut left = [UNBOUND; N];
                    if bind(
                        &a.pat,
                        store.run_triple(&a.run, *i, r),
                        a.run.graph(),
                        &mut left,
                    ) {
                        // One left row may pair with a whole group: stop between two rows when
                        // the output blocks, and go on from `j` next time.
                        while *j < g[1].end && !io.blocked() {
                            let mut row = left;
                            if bind(
                                &b.pat,
                                store.run_triple(&b.run, *j, r),
                                b.run.graph(),
                                &mut row,
                            ) {
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
            let va = store.run_key(&a.run, self.at[0], r)[a.col];
            let vb = store.run_key(&b.run, self.at[1], r)[b.col];
            match va.cmp(&vb) {
                std::cmp::Ordering::Less => {
                    self.at[0] = store.run_seek(&a.run, self.at[0], a.col, vb, false, r);
                }
                std::cmp::Ordering::Greater => {
                    self.at[1] = store.run_seek(&b.run, self.at[1], b.col, va, false, r);
                }
                std::cmp::Ordering::Equal => {
                    let ea = store.run_seek(&a.run, self.at[0], a.col, va, true, r);
                    let eb = store.run_seek(&b.run, self.at[1], b.col, va, true, r);
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

/// The permutation a merge join's side scans.
fn order_of(side: &Phys) -> Permutation {
    match &side.op {
        Op::Scan { order, .. } => *order,
        _ => unreachable!("a merge join joins two scans"),
    }
}

/// The merge join's streams: `ranges` operators, fewer when the values do not split so.
pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    ranges: usize,
) -> Vec<Stream<Row<N>>> {
    let side = |i: usize| -> Side {
        let Op::Scan { pat, order } = &p.inputs[i].op else {
            unreachable!("a merge join joins two scans")
        };
        let (_, k) = Permutation::for_bound(bound_of(pat).map(|x| x.is_some()));
        Side {
            pat: *pat,
            run: run_of(&cx.store, pat, *order),
            col: k,
        }
    };
    let sides = [side(0), side(1)];
    for (s, input) in sides.iter().zip(&p.inputs) {
        input
            .stat
            .rows
            .fetch_add(s.run.len() as u64, Ordering::Relaxed);
    }
    let (la, lb) = (sides[0].run.len(), sides[1].run.len());
    let d = ranges.max(1);
    // The cuts' reads are the planning thread's, not a task's: not counted (and read from the
    // partitions themselves: no node is this thread's).
    let r = &mut Tally::on(usize::MAX);
    let mut cuts: Vec<[usize; 2]> = vec![[0, 0]];
    for c in 1..d {
        if la == 0 {
            break;
        }
        let v = cx.store.run_key(&sides[0].run, la * c / d, r)[sides[0].col];
        let cut = [0, 1].map(|s| {
            let side = &sides[s];
            cx.store.run_seek(&side.run, 0, side.col, v, false, r)
        });
        if cut != *cuts.last().expect("one at least") {
            cuts.push(cut);
        }
    }
    cuts.push([la, lb]);
    // The plan promised `ranges` streams: values that do not split that finely leave some
    // ranges empty (their operators end at once).
    while cuts.len() < d + 1 {
        cuts.push([la, lb]);
    }
    cuts.windows(2)
        .map(|w| {
            let sides = [0, 1].map(|s| Side {
                run: sides[s].run.slice(w[0][s], w[1][s]),
                ..sides[s].clone()
            });
            let home = sides[0]
                .run
                .first_partition()
                .map(|part| cx.store.partition_home(order_of(&p.inputs[0]), part));
            let op = b.add(
                "merge join",
                MergeJoinOp::<N> {
                    store: cx.store.clone(),
                    sides,
                    at: [0, 0],
                    group: None,
                    out: Emitter::new(0),
                    stat: p.stat.clone(),
                    timing: cx.timing,
                },
            );
            // Where its first rows lie; over a replicated store, wherever a worker takes it.
            if let Some(h) = home.filter(|_| !cx.store.is_replicated()) {
                b.home(op, h);
            }
            b.stream::<Row<N>>(op, 0)
                .expect("a merge join outputs rows")
        })
        .collect()
}
