//! The results: every packet of every stream of the plan's root, handed to the caller as it
//! arrives, as [`Rows`] (results are streamed, not collected and copied).
//!
//! The hand-off is bounded: past [`WAITING_PACKETS`] packets of rows the caller has not taken
//! yet (a server's client that reads slowly, or not at all), the sink takes nothing more from
//! its input (the operators above it stop when their buffers fill) and looks again after a
//! short nap, so the query waits for its caller; its time limit keeps running meanwhile (the
//! engine checks it before each step).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use nearflow_flow::{FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{row_ports, Row, Rows};

/// Packets' worth of rows the caller may leave untaken before the sink waits for it.
pub(crate) const WAITING_PACKETS: usize = 8;

/// How long the sink naps before it looks again at a caller that has not taken its rows.
const NAP: Duration = Duration::from_micros(100);

/// What the sink and its caller share: the bytes of rows in the channel not yet taken (added
/// by the sink before it sends, taken off by the caller once it has received:
/// `Running::next_batch`), and whether the caller has gone (then the sink never waits).
#[derive(Default)]
pub struct Waiting {
    pub(crate) bytes: AtomicUsize,
    pub(crate) gone: std::sync::atomic::AtomicBool,
}

/// The caller's side of [`Waiting`]: dropped with the caller (or when it stops reading), it
/// says the caller has gone.
#[derive(Default)]
pub(crate) struct Caller(pub(crate) Arc<Waiting>);

impl Drop for Caller {
    fn drop(&mut self) {
        self.0.gone.store(true, Ordering::Release);
    }
}

impl Caller {
    /// Takes `bytes` the caller received off the count.
    pub(crate) fn took(&self, bytes: usize) {
        self.0.bytes.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Where the sink hands its rows: the channel, and what it shares with the caller.
pub struct Handoff {
    pub(crate) tx: Sender<Rows>,
    pub(crate) waiting: Arc<Waiting>,
}

impl Handoff {
    /// A hand-off over `tx`, and the caller's side of it.
    pub(crate) fn new(tx: Sender<Rows>) -> (Self, Caller) {
        let waiting = Arc::new(Waiting::default());
        (
            Handoff {
                tx,
                waiting: waiting.clone(),
            },
            Caller(waiting),
        )
    }
}

/// Hands every packet to the caller.
struct ChannelSink<const N: usize> {
    /// Dropped at the end of the stream, which tells the caller there is no more.
    tx: Option<Handoff>,
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
        let cap = WAITING_PACKETS * io.packet_bytes().max(1 << 16);
        loop {
            if let Some(h) = &self.tx {
                if h.waiting.bytes.load(Ordering::Acquire) >= cap
                    && !h.waiting.gone.load(Ordering::Acquire)
                {
                    // The caller is behind: take nothing more until it catches up.
                    std::thread::sleep(NAP);
                    io.check()?;
                    return Ok(Status::More);
                }
            }
            let Some(p) = io.recv::<Row<N>>(0) else {
                break;
            };
            let mut rows = Rows::new(self.width);
            rows.reserve(p.len());
            for r in p {
                rows.push(&r);
            }
            // A caller that stopped reading has what it wanted: drop the rest.
            if let Some(h) = &self.tx {
                // Counted before it is sent, so the caller's count of what it took never runs
                // ahead of it.
                let bytes = handed_bytes(&rows);
                h.waiting.bytes.fetch_add(bytes, Ordering::AcqRel);
                if h.tx.send(rows).is_err() {
                    h.waiting.bytes.fetch_sub(bytes, Ordering::AcqRel);
                }
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

/// The bytes a batch of rows handed to the caller counts for while it waits to be taken.
pub(crate) fn handed_bytes(rows: &Rows) -> usize {
    rows.len() * rows.width().max(1) * std::mem::size_of::<nearflow_rdf::term::Id>()
}

/// The sink over the root's streams (united first).
pub(super) fn build<const N: usize>(
    b: &mut PlanBuilder,
    streams: Vec<Stream<Row<N>>>,
    tx: Handoff,
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
