//! Running a plan: operator states, scheduling by packets, end of stream, errors (001 §3.1).
//!
//! Each operator has one of four states (Nothing, Scheduled, Running, Running-and-scheduled),
//! kept in an atomic and model-checked with loom (see `state.rs`), so at most one task of an operator exists at a time, and an operator never runs on two
//! threads at once. The engine checks the second claim anyway: the operator lives behind a mutex
//! that its task only `try_lock`s; a failed `try_lock` would be counted in
//! [`PlanStats::concurrent_entries`] (the stress tests assert it stays 0).
//!
//! A packet (or end of stream) sent to an input schedules the consumer as an **immediate** task,
//! queued where the sender runs; an operator that returns [`Status::More`], and a producer woken
//! because its refused packet now fits, are scheduled as **deferred** tasks.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

use nearflow_policy::RequestId;
use nearflow_policy::TaskKind;
use nearflow_rt::{RequestError, RequestHandle, Runtime, TaskCx};

use crate::channel::{Chan, ChanStats, Channel};
use crate::error::FlowError;
use crate::plan::{Operator, Plan, Sink, SinkSlot, Status};
use crate::state::OpState;

/// Packet size used when the topology reports no L2 cache (a synthetic machine without caches).
pub const FALLBACK_PACKET_BYTES: usize = 128 * 1024;

/// The default packet size on `machine`: half its L2 cache (001 §5.2, "CPU cache support"), or
/// [`FALLBACK_PACKET_BYTES`] when it has none.
pub fn default_packet_bytes(machine: &nearflow_topo::Machine) -> usize {
    machine
        .pus()
        .first()
        .and_then(|pu| machine.cache_size(pu.index, 2))
        .map_or(FALLBACK_PACKET_BYTES, |l2| (l2 / 2).max(1) as usize)
}

/// Tuples of `tuple_bytes` each in a packet of `packet_bytes` (at least one).
pub fn packet_capacity(packet_bytes: usize, tuple_bytes: usize) -> usize {
    (packet_bytes / tuple_bytes.max(1)).max(1)
}

struct Core {
    op: Box<dyn Operator>,
    /// Per output: packets refused by the consumer, oldest first, sent before anything new.
    pending: Vec<VecDeque<Box<dyn Any + Send>>>,
    pending_high: usize,
    finishing: bool,
    done: bool,
    failed: bool,
}

struct NodeRt {
    name: String,
    state: OpState,
    core: Mutex<Core>,
    /// (consumer node, consumer port, buffer) per output.
    outs: Vec<(usize, usize, Arc<dyn Chan>)>,
    /// (buffer, producer node) per input.
    ins: Vec<(Arc<dyn Chan>, usize)>,
}

/// An input's buffer and the node feeding it.
type InEdge = (Arc<dyn Chan>, usize);

pub(crate) struct Exec {
    nodes: Vec<NodeRt>,
    packet_bytes: usize,
    error: Mutex<Option<FlowError>>,
    done_nodes: AtomicUsize,
    runs: AtomicU64,
    concurrent_entries: AtomicU64,
}

/// What an operator sees while it runs: its inputs and outputs.
pub struct Io<'a> {
    exec: &'a Arc<Exec>,
    node: usize,
    cx: &'a TaskCx<'a>,
    pending: &'a mut Vec<VecDeque<Box<dyn Any + Send>>>,
    pending_high: &'a mut usize,
}

impl Io<'_> {
    fn input<T: Send + 'static>(&self, port: usize) -> &Channel<T> {
        let n = &self.exec.nodes[self.node];
        n.ins[port]
            .0
            .as_any()
            .downcast_ref::<Channel<T>>()
            .unwrap_or_else(|| {
                panic!(
                    "operator '{}' read input {port} as {}, which is not its declared type",
                    n.name,
                    std::any::type_name::<T>()
                )
            })
    }

    /// Takes the oldest packet waiting on input `port`, if any.
    pub fn recv<T: Send + 'static>(&mut self, port: usize) -> Option<Vec<T>> {
        let popped = self.input::<T>(port).pop();
        if popped.wake_producer {
            let producer = self.exec.nodes[self.node].ins[port].1;
            self.exec.schedule(self.cx, producer, TaskKind::Deferred);
        }
        popped.packet
    }

    /// Moves every packet waiting on input `port` into `queue`, tuple by tuple; returns whether
    /// the input has ended. (For operators that hold their inputs, see [`crate::ops`].)
    pub fn recv_all<T: Send + 'static>(&mut self, port: usize, queue: &mut VecDeque<T>) -> bool {
        while let Some(p) = self.recv::<T>(port) {
            queue.extend(p);
        }
        self.finished::<T>(port)
    }

    /// Whether input `port` has ended: end of stream arrived and every packet was taken.
    pub fn finished<T: Send + 'static>(&self, port: usize) -> bool {
        self.input::<T>(port).finished()
    }

    /// Packets waiting on input `port`.
    pub fn waiting<T: Send + 'static>(&self, port: usize) -> usize {
        self.input::<T>(port).len()
    }

    /// Number of input ports.
    pub fn inputs(&self) -> usize {
        self.exec.nodes[self.node].ins.len()
    }

    /// Number of output ports.
    pub fn outputs(&self) -> usize {
        self.exec.nodes[self.node].outs.len()
    }

    /// Sends a packet on output `port` (an empty one is dropped). If the consumer's buffer is
    /// full, the engine keeps the packet and sends it first when the consumer makes room;
    /// meanwhile [`blocked`](Self::blocked) is true.
    pub fn send<T: Send + 'static>(&mut self, port: usize, packet: Vec<T>) {
        if packet.is_empty() {
            return;
        }
        let (consumer, _, chan) = &self.exec.nodes[self.node].outs[port];
        if !self.pending[port].is_empty() {
            self.pending[port].push_back(Box::new(packet));
        } else {
            let ch = chan
                .as_any()
                .downcast_ref::<Channel<T>>()
                .expect("output type checked when the plan was built");
            match ch.try_push(packet) {
                Ok(()) => self.exec.schedule(self.cx, *consumer, TaskKind::Immediate),
                Err(p) => self.pending[port].push_back(Box::new(p)),
            }
        }
        let held: usize = self.pending.iter().map(VecDeque::len).sum();
        *self.pending_high = (*self.pending_high).max(held);
    }

    /// Whether some output holds refused packets: stop producing and return [`Status::Idle`]
    /// (the engine runs the operator again when the consumer makes room).
    pub fn blocked(&self) -> bool {
        self.pending.iter().any(|p| !p.is_empty())
    }

    /// The plan's packet size in bytes.
    pub fn packet_bytes(&self) -> usize {
        self.exec.packet_bytes
    }

    /// Tuples of `T` per packet at the plan's packet size.
    pub fn capacity_of<T>(&self) -> usize {
        packet_capacity(self.exec.packet_bytes, std::mem::size_of::<T>())
    }

    /// Whether the plan is being stopped (cancelled or failed): long operators may return.
    pub fn stopping(&self) -> bool {
        self.cx.request_failed()
    }

    /// The worker (= PU) running this operator now.
    pub fn worker(&self) -> usize {
        self.cx.worker()
    }
}

impl Exec {
    fn new(plan: Plan, packet_bytes: usize) -> Self {
        let cap = plan.buffer_packets;
        // One buffer per connection, made with the input's type.
        let mut in_chans: Vec<Vec<Option<InEdge>>> = plan
            .nodes
            .iter()
            .map(|n| vec![None; n.inputs.len()])
            .collect();
        for (i, n) in plan.nodes.iter().enumerate() {
            for (p, fed) in n.fed_by.iter().enumerate() {
                let (from, _) = fed.expect("validated: every input connected");
                in_chans[i][p] = Some(((n.inputs[p].make)(cap), from));
            }
        }
        let mut nodes = Vec::with_capacity(plan.nodes.len());
        for (i, n) in plan.nodes.into_iter().enumerate() {
            let outs = n
                .feeds
                .iter()
                .map(|f| {
                    let (to, port) = f.expect("validated: every output connected");
                    let chan = in_chans[to][port].as_ref().expect("made above").0.clone();
                    (to, port, chan)
                })
                .collect();
            let ins = in_chans[i]
                .iter()
                .map(|c| c.clone().expect("made above"))
                .collect();
            nodes.push(NodeRt {
                name: n.name,
                state: OpState::new(),
                core: Mutex::new(Core {
                    pending: (0..n.outputs.len()).map(|_| VecDeque::new()).collect(),
                    pending_high: 0,
                    op: n.op,
                    finishing: false,
                    done: false,
                    failed: false,
                }),
                outs,
                ins,
            });
        }
        Exec {
            nodes,
            packet_bytes,
            error: Mutex::new(None),
            done_nodes: AtomicUsize::new(0),
            runs: AtomicU64::new(0),
            concurrent_entries: AtomicU64::new(0),
        }
    }

    /// Moves `node` towards `SCHEDULED`; spawns its task when it was idle.
    fn schedule(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize, kind: TaskKind) {
        if self.nodes[node].state.schedule(kind) {
            self.spawn(cx, node, kind);
        }
    }

    fn spawn(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize, kind: TaskKind) {
        let e = self.clone();
        cx.spawn(kind, move |cx| e.task(cx, node));
    }

    /// The body of an operator's task.
    fn task(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize) {
        let n = &self.nodes[node];
        n.state.begin();
        cx.set_label(node as u32);
        if !cx.request_failed() {
            self.step(cx, node);
        }
        if let Some(kind) = n.state.end() {
            self.spawn(cx, node, kind);
        }
    }

    fn step(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize) {
        let n = &self.nodes[node];
        let mut core = match n.core.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => {
                // Relaxed (and the two counters below): statistics only, read after the
                // request completed, whose AcqRel completion count orders every task before it.
                self.concurrent_entries.fetch_add(1, Ordering::Relaxed);
                n.core.lock().unwrap_or_else(|p| p.into_inner())
            }
            Err(TryLockError::Poisoned(_)) => return,
        };
        self.runs.fetch_add(1, Ordering::Relaxed);
        if core.done || core.failed {
            return;
        }
        if !self.flush(cx, node, &mut core) {
            return;
        }
        // Every consumer has finished (a `limit` downstream, say): nothing this operator could
        // produce is wanted, so it finishes without running again.
        if !n.outs.is_empty() && n.outs.iter().all(|(_, _, c)| c.discarding()) {
            core.finishing = true;
        }
        if !core.finishing {
            let Core {
                op,
                pending,
                pending_high,
                ..
            } = &mut *core;
            let mut io = Io {
                exec: self,
                node,
                cx,
                pending,
                pending_high,
            };
            let r = catch_unwind(AssertUnwindSafe(|| op.run(&mut io)));
            let blocked = io.blocked();
            match r {
                Ok(Ok(Status::Idle)) => {}
                Ok(Ok(Status::More)) => {
                    if !blocked {
                        self.schedule(cx, node, TaskKind::Deferred);
                    }
                }
                Ok(Ok(Status::Done)) => core.finishing = true,
                Ok(Err(e)) => {
                    let e = match e {
                        FlowError::Operator { operator, message } if operator.is_empty() => {
                            FlowError::Operator {
                                operator: n.name.clone(),
                                message,
                            }
                        }
                        other => other,
                    };
                    core.failed = true;
                    self.fail(cx, e);
                    return;
                }
                Err(payload) => {
                    core.failed = true;
                    self.fail(
                        cx,
                        FlowError::Panicked {
                            operator: n.name.clone(),
                            message: nearflow_rt::panic_message(&*payload),
                        },
                    );
                    return;
                }
            }
        }
        if core.finishing && core.pending.iter().all(VecDeque::is_empty) {
            core.done = true;
            for (consumer, _, chan) in &n.outs {
                chan.close();
                self.schedule(cx, *consumer, TaskKind::Immediate);
            }
            for (chan, producer) in &n.ins {
                if chan.discard() {
                    self.schedule(cx, *producer, TaskKind::Deferred);
                }
            }
            self.done_nodes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends refused packets, oldest first; whether every output is clear.
    fn flush(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize, core: &mut Core) -> bool {
        let n = &self.nodes[node];
        let mut clear = true;
        for (port, q) in core.pending.iter_mut().enumerate() {
            let (consumer, _, chan) = &n.outs[port];
            let mut sent = false;
            while let Some(p) = q.pop_front() {
                match chan.push_boxed(p) {
                    Ok(()) => sent = true,
                    Err(p) => {
                        q.push_front(p);
                        clear = false;
                        break;
                    }
                }
            }
            if sent {
                self.schedule(cx, *consumer, TaskKind::Immediate);
            }
        }
        clear
    }

    fn fail(&self, cx: &TaskCx<'_>, e: FlowError) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        drop(slot);
        cx.cancel_request();
    }

    fn stats(&self, elapsed: Duration) -> PlanStats {
        let mut st = PlanStats {
            operators: self.nodes.len(),
            runs: self.runs.load(Ordering::Relaxed),
            concurrent_entries: self.concurrent_entries.load(Ordering::Relaxed),
            elapsed,
            ..PlanStats::default()
        };
        for n in &self.nodes {
            let core = n.core.lock().unwrap_or_else(|p| p.into_inner());
            st.max_pending_packets = st.max_pending_packets.max(core.pending_high);
            st.held_packets += core.pending.iter().map(VecDeque::len).sum::<usize>() as u64;
            drop(core);
            for (chan, _) in &n.ins {
                let c = chan.stats();
                st.channels.push(c);
            }
        }
        st
    }
}

/// Counters of one plan run; exact after [`PlanHandle::wait`].
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PlanStats {
    /// Operators in the plan.
    pub operators: usize,
    /// Operator tasks run.
    pub runs: u64,
    /// Times a task found its operator already entered by another thread (must be 0).
    pub concurrent_entries: u64,
    /// Most refused packets any operator held at once.
    pub max_pending_packets: usize,
    /// Refused packets still held at the end (0 for a plan that completed).
    pub held_packets: u64,
    /// Every input buffer's counters, operator by operator.
    pub channels: Vec<ChanStats>,
    /// Wall time from submission to completion.
    #[serde(serialize_with = "ser_secs")]
    pub elapsed: Duration,
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl PlanStats {
    /// Packets sent over all connections.
    pub fn packets(&self) -> u64 {
        self.channels.iter().map(|c| c.pushed).sum()
    }

    /// Whether every packet pushed was taken by its consumer or dropped after it finished, and
    /// every tuple pushed was taken (no packet lost, none counted twice).
    pub fn conserved(&self) -> bool {
        self.held_packets == 0
            && self.channels.iter().all(|c| {
                c.pushed == c.popped + c.discarded
                    && c.tuples_pushed == c.tuples_popped + c.tuples_discarded
            })
    }

    /// Whether no buffer ever held more than its capacity.
    pub fn bounded(&self) -> bool {
        self.channels.iter().all(|c| c.high_water <= c.capacity)
    }
}

/// A running plan.
pub struct PlanHandle {
    req: RequestHandle<()>,
    exec: Arc<Exec>,
    sinks: Vec<SinkSlot>,
    started: Instant,
}

impl std::fmt::Debug for PlanHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanHandle")
            .field("request", &self.req.id())
            .finish()
    }
}

/// The results of a completed plan.
pub struct PlanOutput {
    sinks: Vec<SinkSlot>,
    /// Counters of the run.
    pub stats: PlanStats,
}

impl std::fmt::Debug for PlanOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanOutput")
            .field("sinks", &self.sinks.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl PlanOutput {
    /// Takes what a collecting sink gathered (in arrival order); empty if taken before.
    pub fn take<T: Send + 'static>(&self, sink: &Sink<T>) -> Vec<T> {
        self.sinks[sink.slot]
            .downcast_ref::<crate::ops::collect::SlotInner<T>>()
            .and_then(|m| m.lock().unwrap_or_else(|p| p.into_inner()).take())
            .unwrap_or_default()
    }
}

impl PlanHandle {
    /// The runtime request running the plan.
    pub fn request_id(&self) -> RequestId {
        self.req.id()
    }

    /// Operator names by index (the labels of the plan's tasks in a runtime trace).
    pub fn names(&self) -> Vec<String> {
        self.exec.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// Stops the plan: operator tasks not yet started are skipped; `wait` returns
    /// [`FlowError::Cancelled`].
    pub fn cancel(&self) {
        self.req.cancel();
    }

    /// Waits for the plan to end; its sinks' results, or why it failed.
    pub fn wait(self) -> Result<PlanOutput, FlowError> {
        let r = self.req.wait();
        let elapsed = self.started.elapsed();
        let err = self
            .exec
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(e) = err {
            return Err(e);
        }
        match r {
            Ok(()) => {}
            Err(RequestError::Cancelled { .. }) => return Err(FlowError::Cancelled),
            Err(e) => return Err(FlowError::Runtime(e.to_string())),
        }
        // Relaxed: read after `wait`, which the request's AcqRel completion orders after every
        // task's increment.
        if self.exec.done_nodes.load(Ordering::Relaxed) != self.exec.nodes.len() {
            let unfinished = self
                .exec
                .nodes
                .iter()
                .filter(|n| !n.core.lock().map(|c| c.done).unwrap_or(false))
                .map(|n| n.name.clone())
                .collect();
            return Err(FlowError::Stalled(unfinished));
        }
        Ok(PlanOutput {
            stats: self.exec.stats(elapsed),
            sinks: self.sinks,
        })
    }
}

impl Plan {
    /// Submits the plan to `rt` as one request: every operator without inputs is scheduled as
    /// a deferred task.
    pub fn submit(self, rt: &Runtime) -> PlanHandle {
        let packet_bytes = self
            .packet_bytes
            .unwrap_or_else(|| default_packet_bytes(rt.machine()));
        let sinks = self.sinks.clone();
        let exec = Arc::new(Exec::new(self, packet_bytes));
        let sources: Vec<usize> = (0..exec.nodes.len())
            .filter(|&i| exec.nodes[i].ins.is_empty())
            .collect();
        let e = exec.clone();
        let started = Instant::now();
        let req = rt.submit(move |cx| {
            for s in sources {
                e.schedule(cx, s, TaskKind::Deferred);
            }
        });
        PlanHandle {
            req,
            exec,
            sinks,
            started,
        }
    }

    /// Submits and waits.
    pub fn run(self, rt: &Runtime) -> Result<PlanOutput, FlowError> {
        self.submit(rt).wait()
    }
}
