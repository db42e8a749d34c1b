//! An index range scan: one source operator per stream of the scan (a store partition, or a
//! chunk of one), homed on the partition's NUMA node (LAS §4: its deferred tasks queue there),
//! or, over a store with per-node replicas, unhomed and reading the replica of the node whose
//! worker runs it.
//! A stream reads a list of graphs' row ranges of its partition: one range for a pattern of one
//! graph, one per named graph for a graph variable (whose column each row then receives).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{bind, row_ports, ExecCx, Reads, Row, Timer};
use crate::physical::{scan_pieces, OpStat, Pat, Phys};
use nearflow_rdf::index::{Permutation, QuadIndex, ScanStream, Store};
use nearflow_rdf::term::UNBOUND;

struct ScanOp<const N: usize> {
    store: Arc<Store>,
    stream: ScanStream,
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
        // About two packets of rows per task, then the worker may take another (of the size
        // packets have now: while they grow, the operators below see the first rows early).
        let budget = self.out.capacity(io) * 2;
        let mut n = 0;
        let (pat, out) = (&self.pat, &mut self.out);
        if !io.blocked() {
            self.store
                .read_scan(&mut self.stream, reads.tally(), |graph, triple| {
                    let mut row = [UNBOUND; N];
                    if bind(pat, triple, graph, &mut row) {
                        out.push(io, row);
                        n += 1;
                    }
                    n < budget && !io.blocked()
                });
        }
        self.stat.rows.fetch_add(n as u64, Ordering::Relaxed);
        if self.stream.is_done() {
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
    scan_pieces(&cx.store, pat, order, &cx.named, cx.dop)
        .into_iter()
        .enumerate()
        .map(|(i, stream)| {
            let part = stream.partition();
            let op = b.add(
                format!("scan {} part {part}.{i}", order.name()),
                ScanOp::<N> {
                    store: cx.store.clone(),
                    stream,
                    pat: *pat,
                    out: Emitter::new(0),
                    stat: p.stat.clone(),
                    timing: cx.timing,
                },
            );
            // Homed where its partition lies; a replicated store has the rows on every node,
            // and the scan runs wherever a worker takes it (LAS keeps it on its request's node).
            if !cx.store.is_replicated() {
                b.home(op, cx.store.partition_home(order, part));
            }
            b.stream::<Row<N>>(op, 0).expect("a scan outputs rows")
        })
        .collect()
}
