//! The results: every packet of every stream of the plan's root, handed to the caller as it
//! arrives, as [`Rows`] (results are streamed, not collected and copied).

use std::sync::mpsc::Sender;

use nearflow_flow::{FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{row_ports, Row, Rows};

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
            rows.reserve(p.len());
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

/// The sink over the root's streams (united first).
pub(super) fn build<const N: usize>(
    b: &mut PlanBuilder,
    streams: Vec<Stream<Row<N>>>,
    tx: Sender<Rows>,
    width: usize,
) {
    let s = super::exchange::unite(b, streams);
    let op = b.add(
        "results",
        ChannelSink::<N> {
            tx: Some(tx),
            width,
        },
    );
    b.feed(s, op, 0);
}
