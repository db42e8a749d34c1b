//! DISTINCT: passes each row the first time it comes, holding every row seen (its table charged
//! against the plan's memory limit). One operator per input stream: the plan hash-partitions a large
//! input by its whole row, so equal rows meet in one operator and the streams deduplicate in
//! parallel.

use std::sync::atomic::Ordering;
use std::sync::Arc;

// hashbrown's default hasher (foldhash): DISTINCT hashes whole rows.
use hashbrown::HashSet;
use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{per_stream, row_ports, table_bytes, ExecCx, Held, Row, Timer};
use crate::physical::{OpStat, Phys};

struct DistinctOp<const N: usize> {
    seen: HashSet<Row<N>>,
    held: Held,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> Operator for DistinctOp<N> {
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
        let entry = std::mem::size_of::<Row<N>>();
        let mut n = 0;
        while !io.blocked() {
            let Some(p) = io.recv::<Row<N>>(0) else {
                break;
            };
            // Charged before the table grows: as if every row were new.
            let grown = table_bytes(self.seen.len() + p.len(), entry);
            self.held.set(io, grown.max(self.seen.allocation_size()))?;
            self.seen.reserve(p.len());
            for r in p {
                if self.seen.insert(r) {
                    self.out.push(io, r);
                    n += 1;
                }
            }
            self.held.set(io, self.seen.allocation_size())?;
        }
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        if io.finished::<Row<N>>(0) && !io.blocked() {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        self.out.idle(io);
        Ok(Status::Idle)
    }
}

pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    input: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    per_stream(b, input, "distinct", || DistinctOp::<N> {
        seen: HashSet::new(),
        held: Held::default(),
        out: Emitter::new(0),
        stat: p.stat.clone(),
        timing: cx.timing,
    })
}
