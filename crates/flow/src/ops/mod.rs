//! The operator library: one file per operator, each a single-threaded [`Operator`] with a
//! typed builder method on [`PlanBuilder`](crate::PlanBuilder).
//!
//! Streaming operators (map, filter, …) work packet by packet and stop as soon as an output is
//! blocked. Blocking operators (sort, aggregate, hash-join build, barrier) keep state until their
//! input ends and then emit in packets, stopping whenever blocked. Operators with several inputs
//! that must consume them in an order (joins, merges) move whatever has arrived into their own
//! queues while their output is free, so a producer feeding several of their inputs can never
//! be blocked by one input waiting for another; what they hold is bounded by the skew between
//! their inputs, not by a slow consumer.

use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use crate::error::FlowError;
use crate::plan::{Operator, PortType, Status};
use crate::{Io, Packet};

pub mod anti_join;
pub mod barrier;
pub mod binary;
pub mod broadcast;
pub mod collect;
pub mod csv_source;
pub mod distinct;
pub mod filter;
pub mod flat_map;
pub mod group_by;
pub mod hash_join;
pub(crate) mod join_core;
pub mod left_join;
pub mod limit;
pub mod map;
pub mod merge;
pub mod merge_join;
pub mod partition;
pub mod project;
pub mod sort;
pub mod source;
pub mod union;
pub mod window_agg;
pub mod window_join;
pub mod zip;

/// Buffers tuples into packets of the plan's size and sends each full one (the first packets
/// smaller when the plan says so: [`PlanBuilder::first_packet_bytes`](crate::PlanBuilder::first_packet_bytes)).
#[derive(Debug)]
pub struct Emitter<T> {
    port: usize,
    buf: Vec<T>,
    /// Tuples in the packet being filled (0 before the first push).
    cap: usize,
    /// Tuples in a full-size packet.
    full: usize,
}

impl<T: Send + 'static> Emitter<T> {
    /// An emitter for output `port`.
    pub fn new(port: usize) -> Self {
        Emitter {
            port,
            buf: Vec::new(),
            cap: 0,
            full: 0,
        }
    }

    /// Appends a tuple; sends the packet when it is full.
    ///
    /// Always inlined, and only the append is: the packet's last tuple (and the first push,
    /// which sizes the buffer) take `push_last`, out of line. Left to the
    /// compiler's inliner, whether the whole push was inlined into a join's probe loop changed
    /// with unrelated code elsewhere in the crate, and q4 took 3–5 % longer when it was not
    /// (measured, `perf` showing the push as its own symbol at 20 % of the samples).
    #[inline(always)]
    pub fn push(&mut self, io: &mut Io<'_>, x: T) {
        if self.buf.len() + 1 >= self.cap {
            self.push_last(io, x);
            return;
        }
        self.buf.push(x);
    }

    /// [`push`](Self::push)'s rare case: a first push (the buffer is sized to a packet) or the
    /// tuple that fills the packet (which is then sent).
    #[inline(never)]
    fn push_last(&mut self, io: &mut Io<'_>, x: T) {
        if self.cap == 0 {
            self.full = io.capacity_of::<T>();
            self.cap = io.first_capacity_of::<T>().min(self.full);
            self.buf.reserve(self.cap);
        }
        self.buf.push(x);
        if self.buf.len() >= self.cap {
            self.send(io);
        }
    }

    /// Tuples in the packet being filled: the plan's packet size, or while packets grow
    /// ([`PlanBuilder::first_packet_bytes`](crate::PlanBuilder::first_packet_bytes)) the size
    /// they have reached. A source that bounds its work per run by packets bounds it by this.
    pub fn capacity(&self, io: &Io<'_>) -> usize {
        if self.cap == 0 {
            io.first_capacity_of::<T>()
        } else {
            self.cap
        }
    }

    /// Sends what is buffered, if anything.
    pub fn flush(&mut self, io: &mut Io<'_>) {
        if !self.buf.is_empty() {
            self.send(io);
        }
    }

    /// The operator goes idle, its input not ended: while packets are still growing
    /// ([`PlanBuilder::first_packet_bytes`](crate::PlanBuilder::first_packet_bytes): a plan
    /// whose consumer wants its first rows early) sends what is buffered, so that a row that
    /// passed reaches the consumer now, not once more input has filled the packet; with
    /// full-size packets, does nothing.
    pub fn idle(&mut self, io: &mut Io<'_>) {
        if self.cap < self.full && !self.buf.is_empty() {
            self.send(io);
        }
    }

    fn send(&mut self, io: &mut Io<'_>) {
        // Packets grow from the first packet's size to the full one, doubling.
        self.cap = self.cap.saturating_mul(2).min(self.full);
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(self.cap));
        io.send(self.port, full);
    }
}

/// The hash the partitioning operators use: std's `DefaultHasher` with its fixed keys, so every
/// operator of a process (and every run of one build) sends a key to the same partition. It is
/// not stable across Rust releases; nothing here stores it.
pub fn hash_of<K: Hash + ?Sized>(k: &K) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    k.hash(&mut h);
    h.finish()
}

/// Whether a streaming operator goes on after a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    /// It needs no more input (a limit reached).
    Stop,
}

/// The logic of a one-input, one-output operator.
pub(crate) trait Unary<I, O>: Send + 'static {
    /// Handles one input packet.
    fn packet(
        &mut self,
        p: Packet<I>,
        out: &mut Emitter<O>,
        io: &mut Io<'_>,
    ) -> Result<Flow, FlowError>;
    /// After the input has ended: emits what is left, a packet or so per call (one call per
    /// run); returns true once everything is out.
    fn finish(&mut self, _out: &mut Emitter<O>, _io: &mut Io<'_>) -> Result<bool, FlowError> {
        Ok(true)
    }
    /// Bytes of state kept between packets ([`Operator::state_bytes`]).
    fn state_bytes(&self) -> usize {
        0
    }
}

pub(crate) struct UnaryOp<I, O, L> {
    logic: L,
    out: Emitter<O>,
    _t: PhantomData<fn(I)>,
}

impl<I, O: Send + 'static, L> UnaryOp<I, O, L> {
    pub(crate) fn new(logic: L) -> Self {
        UnaryOp {
            logic,
            out: Emitter::new(0),
            _t: PhantomData,
        }
    }
}

impl<I, O, L> Operator for UnaryOp<I, O, L>
where
    I: Send + 'static,
    O: Send + 'static,
    L: Unary<I, O>,
{
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<I>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<O>()]
    }

    fn state_bytes(&self) -> usize {
        self.logic.state_bytes()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        loop {
            if io.blocked() {
                return Ok(Status::Idle);
            }
            match io.recv::<I>(0) {
                Some(p) => {
                    if self.logic.packet(p, &mut self.out, io)? == Flow::Stop {
                        self.out.flush(io);
                        return Ok(Status::Done);
                    }
                }
                None if io.finished::<I>(0) => {
                    if self.logic.finish(&mut self.out, io)? {
                        self.out.flush(io);
                        return Ok(Status::Done);
                    }
                    // More output remains: one packet per run, then reschedule as a deferred
                    // task (001 §3.1).
                    return Ok(Status::More);
                }
                None => return Ok(Status::Idle),
            }
        }
    }
}

/// The loop of a one-input operator that handles whole packets: passes each waiting packet
/// to `on_packet` until an output is blocked; `Done` once the input has ended.
pub(crate) fn forward_packets<T: Send + 'static>(
    io: &mut Io<'_>,
    mut on_packet: impl FnMut(Packet<T>, &mut Io<'_>),
) -> Status {
    loop {
        if io.blocked() {
            return Status::Idle;
        }
        match io.recv::<T>(0) {
            Some(p) => on_packet(p, io),
            None if io.finished::<T>(0) => return Status::Done,
            None => return Status::Idle,
        }
    }
}

/// Emits up to one packet of `items`; whether all are out.
pub(crate) fn drain_vec<T: Send + 'static>(
    items: &mut std::vec::IntoIter<T>,
    out: &mut Emitter<T>,
    io: &mut Io<'_>,
) -> bool {
    let cap = io.capacity_of::<T>();
    for _ in 0..cap {
        match items.next() {
            Some(x) => out.push(io, x),
            None => return true,
        }
    }
    items.len() == 0
}

/// A small runtime for examples and doctests: a synthetic 2-core machine (256 KB L2 per core,
/// so 128 KB packets), `las`.
pub fn example_runtime() -> nearflow_rt::Runtime {
    let machine =
        nearflow_topo::from_synthetic("pack:1 l3:1(size=8MiB) l2:2(size=256KiB) core:1 pu:1")
            .expect("a valid synthetic topology");
    nearflow_rt::Runtime::builder(machine)
        .build()
        .expect("two worker threads start")
}
