//! An index range scan: one source operator per stream of the scan (a store partition, or a
//! chunk of one), homed on the partition's NUMA node (LAS §4: its deferred tasks queue there),
//! or, over a store with per-node replicas (`nearflow_rdf::replica`), unhomed and reading the
//! replica of the node whose worker runs it.
//! A stream reads a list of graphs' row ranges of its partition: one range for a pattern of one
//! graph, one per named graph for a graph variable (whose column each row then receives).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{bind, row_ports, ExecCx, Reads, Row, Timer};
use crate::physical::{scan_pieces, OpStat, Pat, Phys, ScanRange};
use nearflow_rdf::delta::key_of;
use nearflow_rdf::store::{Permutation, Store};
use nearflow_rdf::term::UNBOUND;

struct ScanOp<const N: usize> {
    store: Arc<Store>,
    order: Permutation,
    part: usize,
    /// The graphs' ranges still to read, in order (the first is the current one).
    pieces: Vec<ScanRange>,
    next: usize,
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
        let mut reads = Reads::new(io.numa_node(), &stat);
        // The partition's rows where this worker's node has them (a replicated store), else
        // where the partition lies.
        let cols = self.store.part(self.order, self.part, reads.node);
        let delta = self.store.delta();
        let (added, removed) = (delta.added_rows(self.order), delta.removed_rows(self.order));
        // About two packets of rows per task, then the worker may take another.
        let budget = io.capacity_of::<Row<N>>() * 2;
        let (mut n, mut read) = (0, 0);
        while self.next < self.pieces.len() && n < budget && !io.blocked() {
            let r = &mut self.pieces[self.next];
            // The next key: the indexes' next row or the delta's next added row, whichever
            // sorts first; an indexes' row the delta removed is passed over.
            let base = (r.rows.start < r.rows.end).then(|| cols.row(r.rows.start));
            let add = (r.added.start < r.added.end).then(|| key_of(&added[r.added.start]));
            let key = match (base, add) {
                (None, None) => {
                    self.next += 1;
                    continue;
                }
                (Some(b), a) if a.is_none_or(|a| b < a) => {
                    r.rows.start += 1;
                    read += 1;
                    while r.removed.start < r.removed.end && key_of(&removed[r.removed.start]) < b {
                        r.removed.start += 1;
                    }
                    if r.removed.start < r.removed.end && key_of(&removed[r.removed.start]) == b {
                        r.removed.start += 1;
                        continue;
                    }
                    b
                }
                (_, Some(a)) => {
                    r.added.start += 1;
                    a
                }
                (Some(_), None) => unreachable!("matched above"),
            };
            let mut row = [UNBOUND; N];
            if bind(&self.pat, self.order.triple(key), r.graph, &mut row) {
                self.out.push(io, row);
                n += 1;
            }
        }
        self.stat.rows.fetch_add(n as u64, Ordering::Relaxed);
        // Every row of this run came from one partition's (or copy's) memory.
        reads.add(cols.node(), read);
        if self.next >= self.pieces.len() {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        Ok(Status::More)
    }
}

/// The scan's streams.
pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    pat: &Pat,
    order: Permutation,
) -> Vec<Stream<Row<N>>> {
    let perm = cx.store.perm(order);
    scan_pieces(&cx.store, pat, order, &cx.named, cx.dop)
        .into_iter()
        .enumerate()
        .map(|(i, (part, pieces))| {
            let op = b.add(
                format!("scan {} part {part}.{i}", order.name()),
                ScanOp::<N> {
                    store: cx.store.clone(),
                    order,
                    part,
                    pieces,
                    next: 0,
                    pat: *pat,
                    out: Emitter::new(0),
                    stat: p.stat.clone(),
                    timing: cx.timing,
                },
            );
            // Homed where its partition lies; a replicated store has the rows on every node,
            // and the scan runs wherever a worker takes it (LAS keeps it on its request's node).
            if !cx.store.is_replicated() {
                b.home(op, perm.partitions()[part].info.home);
            }
            b.stream::<Row<N>>(op, 0).expect("a scan outputs rows")
        })
        .collect()
}
