//! Plans: operators connected by streams, validated when built (001 §3).

use crate::sync::os::Arc;
use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;

use crate::channel::{Chan, Channel};
use crate::error::{FlowError, PlanError};
use crate::Io;

/// What an operator's `run` asks the engine to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Nothing to do until a packet (or end of stream) arrives on an input, or a blocked output
    /// frees up.
    Idle,
    /// More output is ready to be produced now: the engine reschedules the operator as a
    /// **deferred** task (001 §3.1), or, when an output is blocked, when it frees up.
    More,
    /// The operator has finished: the engine sends what it still holds, then end of stream on
    /// every output. `run` is not called again.
    Done,
}

/// The tuple type of a port.
#[derive(Clone, Copy)]
pub struct PortType {
    pub(crate) id: TypeId,
    pub(crate) name: &'static str,
    /// `size_of` the tuple type.
    pub(crate) size: usize,
    pub(crate) make: fn(usize) -> Arc<dyn Chan>,
}

impl PortType {
    /// The port type of packets of `T`.
    pub fn of<T: Send + 'static>() -> Self {
        PortType {
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
            size: std::mem::size_of::<T>(),
            make: |cap| Arc::new(Channel::<T>::new(cap)),
        }
    }

    /// The tuple type's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl fmt::Debug for PortType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// A single-threaded step of a dataflow: the engine guarantees that `run` is never entered by
/// two threads at once (the four states of 001 §3.1) and that it only sees whole packets.
///
/// `run` receives packets with [`Io::recv`], sends with [`Io::send`] (or an
/// [`Emitter`](crate::Emitter)), and should return [`Status::Idle`] as soon as
/// [`Io::blocked`] is true, so that memory stays bounded.
pub trait Operator: Send + 'static {
    /// The tuple types of the inputs, in port order.
    fn inputs(&self) -> Vec<PortType>;
    /// The tuple types of the outputs, in port order.
    fn outputs(&self) -> Vec<PortType>;
    /// Does some work; see [`Status`]. An `Err` stops the plan with that error.
    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError>;
    /// Bytes of state the operator keeps between runs (windows, tables, buffered input): its
    /// working set, as StreamMap's profiles need it. 0 for a stateless operator.
    fn state_bytes(&self) -> usize {
        0
    }
}

/// An operator's index in its plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperatorId(pub(crate) usize);

impl OperatorId {
    /// The index.
    pub fn index(self) -> usize {
        self.0
    }
}

/// A stream of `T`: output `port` of an operator, to be consumed exactly once.
pub struct Stream<T> {
    pub(crate) node: OperatorId,
    pub(crate) port: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Stream<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Stream<T> {}

impl<T> fmt::Debug for Stream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stream({}:{})", self.node.0, self.port)
    }
}

impl<T> Stream<T> {
    /// The producing operator.
    pub fn operator(&self) -> OperatorId {
        self.node
    }

    /// The producing operator's output port.
    pub fn port(&self) -> usize {
        self.port
    }
}

/// Where a collecting sink leaves its result; take it from the [`PlanOutput`](crate::PlanOutput).
pub struct Sink<T> {
    /// Its index among the plan's sinks.
    pub(crate) slot: usize,
    /// The cell the sink operator fills, typed; the plan holds the same cell, untyped, to tell
    /// its own sinks from another plan's.
    pub(crate) cell: Arc<SinkCell<T>>,
}

/// A sink's result: `None` until the sink has seen end of stream, and after it was taken.
pub(crate) type SinkCell<T> = crate::sync::os::Mutex<Option<Vec<T>>>;

impl<T> fmt::Debug for Sink<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sink({})", self.slot)
    }
}

pub(crate) type SinkSlot = Arc<dyn Any + Send + Sync>;

pub(crate) struct OperatorDecl {
    pub(crate) name: String,
    pub(crate) op: Box<dyn Operator>,
    pub(crate) inputs: Vec<PortType>,
    pub(crate) outputs: Vec<PortType>,
    /// For each input: the producing (node, port).
    pub(crate) fed_by: Vec<Option<(usize, usize)>>,
    /// For each output: the consuming (node, port).
    pub(crate) feeds: Vec<Option<(usize, usize)>>,
    /// Where the operator's deferred tasks are queued ([`PlanBuilder::home`]).
    pub(crate) home: Option<nearflow_rt::Home>,
    /// The application thread it belongs to ([`PlanBuilder::on_thread`]).
    pub(crate) thread: Option<usize>,
}

/// Default number of packets an input buffer holds before it refuses more.
pub const DEFAULT_BUFFER_PACKETS: usize = 4;

/// Builds a plan. The typed methods (`source`, `map`, `hash_join`, …, one per operator in
/// [`ops`](crate::ops)) connect streams as they go; [`add`](Self::add) and
/// [`connect`](Self::connect) build any graph by hand, checked at once.
pub struct PlanBuilder {
    pub(crate) nodes: Vec<OperatorDecl>,
    pub(crate) sinks: Vec<SinkSlot>,
    errors: Vec<PlanError>,
    packet_bytes: Option<usize>,
    first_packet_bytes: Option<usize>,
    buffer_packets: usize,
    dop: Option<usize>,
    thread: Option<usize>,
    profile_threads: bool,
    limits: Limits,
    account: Option<std::sync::Arc<crate::Account>>,
}

/// What a plan may use: time from its submission and bytes of operator state. Past either, the
/// engine fails the plan ([`FlowError::TimeLimit`], [`FlowError::MemoryLimit`]): its request is
/// cancelled, tasks not yet started are skipped, and its operators' state is freed with it.
///
/// [`FlowError::TimeLimit`]: crate::FlowError::TimeLimit
/// [`FlowError::MemoryLimit`]: crate::FlowError::MemoryLimit
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Time from submission; checked before every operator step, so a plan stops within one
    /// step (about a packet of work) of it.
    pub time: Option<std::time::Duration>,
    /// Bytes that operators holding rows (sorts, hash tables, sets) may charge
    /// ([`Io::charge`](crate::Io::charge)); packets in flight are bounded by the buffers and
    /// not counted.
    pub memory: Option<usize>,
}

impl Default for PlanBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for PlanBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanBuilder")
            .field("operators", &self.nodes.len())
            .finish()
    }
}

impl PlanBuilder {
    /// An empty plan.
    pub fn new() -> Self {
        PlanBuilder {
            nodes: Vec::new(),
            sinks: Vec::new(),
            errors: Vec::new(),
            packet_bytes: None,
            first_packet_bytes: None,
            buffer_packets: DEFAULT_BUFFER_PACKETS,
            dop: None,
            thread: None,
            profile_threads: false,
            limits: Limits::default(),
            account: None,
        }
    }

    /// The plan's limits of time and memory (none by default).
    pub fn limits(&mut self, limits: Limits) -> &mut Self {
        self.limits = limits;
        self
    }

    /// The memory account the plan charges, shared with whatever else its request holds
    /// beside the plan; its limit replaces [`Limits::memory`]. Without one, the plan has an
    /// account of its own with that limit.
    pub fn account(&mut self, account: std::sync::Arc<crate::Account>) -> &mut Self {
        self.account = Some(account);
        self
    }

    /// Operators added from now on belong to application thread `t` (StreamMap's Threaded
    /// Ports, `streammap-cache-topology-mapping.txt` §II.A), or to none: an operator without a
    /// thread runs on the thread that delivers its input. Threads matter once the plan is
    /// mapped ([`Plan::map_threads`]); otherwise they are only labels.
    pub fn on_thread(&mut self, t: Option<usize>) -> &mut Self {
        self.thread = t;
        self
    }

    /// Record, while the plan runs, which worker sends how many bytes to which, and how often
    /// each operator's state passes from one worker to another ([`PlanStats::threads`]):
    /// StreamMap's communication and correlation profiles. Off by default (it costs a few
    /// atomic adds per packet and per task).
    ///
    /// [`PlanStats::threads`]: crate::PlanStats::threads
    pub fn profile_threads(&mut self, on: bool) -> &mut Self {
        self.profile_threads = on;
        self
    }

    /// Packet size in bytes for this plan (default: half the L2 cache of the runtime's
    /// topology, 001 §5.2).
    pub fn packet_bytes(&mut self, bytes: usize) -> &mut Self {
        self.packet_bytes = Some(bytes);
        self
    }

    /// Starts every [`Emitter`](crate::Emitter)'s packets at `bytes` (when less than the
    /// packet size), each next packet twice the last, up to the packet size: a plan whose
    /// consumer stops after a few rows (a `LIMIT`) gets them after one small packet per
    /// operator instead of after a full packet's work, and one that reads everything pays a
    /// handful of small packets per emitter before they reach full size.
    pub fn first_packet_bytes(&mut self, bytes: usize) -> &mut Self {
        self.first_packet_bytes = Some(bytes);
        self
    }

    /// Packets an input buffer holds before it refuses more (default
    /// [`DEFAULT_BUFFER_PACKETS`]).
    pub fn buffer_packets(&mut self, packets: usize) -> &mut Self {
        self.buffer_packets = packets;
        self
    }

    /// Degree of parallelism of the parallel forms when none is given (default: the number of
    /// PUs of the runtime the plan is built for; see [`PlanBuilder::for_runtime`]).
    pub fn default_dop(&mut self, dop: usize) -> &mut Self {
        self.dop = Some(dop);
        self
    }

    /// A builder whose default degree of parallelism is the runtime's PU count.
    pub fn for_runtime(rt: &nearflow_rt::Runtime) -> Self {
        let mut b = Self::new();
        b.dop = Some(rt.machine().pu_count().max(1));
        b
    }

    pub(crate) fn dop(&self) -> usize {
        self.dop.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
    }

    /// Number of operators so far.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the plan has no operators yet.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Adds an operator; its ports start unconnected.
    pub fn add<O: Operator>(&mut self, name: impl Into<String>, op: O) -> OperatorId {
        let inputs = op.inputs();
        let outputs = op.outputs();
        let id = OperatorId(self.nodes.len());
        let mut name = name.into();
        if name.is_empty() {
            name = format!("op#{}", id.0);
        }
        self.nodes.push(OperatorDecl {
            name,
            op: Box::new(op),
            fed_by: vec![None; inputs.len()],
            feeds: vec![None; outputs.len()],
            inputs,
            outputs,
            home: None,
            thread: self.thread,
        });
        id
    }

    /// Gives an operator a data home: its **deferred** tasks (a source's start and every
    /// reschedule, a producer woken by backpressure) are queued where the runtime's policy puts
    /// work for that home ([`nearflow_rt::TaskCx::spawn_deferred_at`]), so a source that scans
    /// data placed on one NUMA node runs there, and so does a consumer of a fan-out (a packet
    /// out of an operator with several outputs schedules a deferred task, LAS §4:
    /// [`nearflow_policy::dataflow::consumer_kind`]). Immediate tasks stay on the sender's
    /// core, as 001 §3 wants. An operator without a home is queued as before.
    pub fn home(&mut self, node: OperatorId, home: nearflow_rt::Home) {
        self.nodes[node.0].home = Some(home);
    }

    /// Records a setting error, reported by `build`.
    pub(crate) fn invalid(&mut self, message: String) {
        self.errors.push(PlanError::Setting(message));
    }

    /// Adds an operator named `kind#index`.
    pub(crate) fn add_auto<O: Operator>(&mut self, kind: &str, op: O) -> OperatorId {
        let name = format!("{kind}#{}", self.nodes.len());
        self.add(name, op)
    }

    /// The name of an operator.
    pub fn name(&self, node: OperatorId) -> &str {
        &self.nodes[node.0].name
    }

    /// Renames an operator (names show in errors and traces).
    pub fn rename(&mut self, node: OperatorId, name: impl Into<String>) {
        self.nodes[node.0].name = name.into();
    }

    /// Connects output `out` of `from` to input `inp` of `to`, checking ports and types now.
    pub fn connect(
        &mut self,
        from: OperatorId,
        out: usize,
        to: OperatorId,
        inp: usize,
    ) -> Result<(), PlanError> {
        let port_err = |b: &Self, n: OperatorId, direction, port, count| PlanError::NoSuchPort {
            operator: b.nodes[n.0].name.clone(),
            direction,
            port,
            count,
        };
        if from.0 >= self.nodes.len() || to.0 >= self.nodes.len() {
            return Err(PlanError::Setting(format!(
                "no operator {} in this plan",
                from.0.max(to.0)
            )));
        }
        let (f, t) = (&self.nodes[from.0], &self.nodes[to.0]);
        let Some(ft) = f.outputs.get(out) else {
            return Err(port_err(self, from, "output", out, f.outputs.len()));
        };
        let Some(tt) = t.inputs.get(inp) else {
            return Err(port_err(self, to, "input", inp, t.inputs.len()));
        };
        if ft.id != tt.id {
            return Err(PlanError::TypeMismatch {
                from: f.name.clone(),
                from_port: out,
                from_type: ft.name,
                to: t.name.clone(),
                to_port: inp,
                to_type: tt.name,
            });
        }
        if f.feeds[out].is_some() {
            return Err(PlanError::OutputReused {
                operator: f.name.clone(),
                port: out,
            });
        }
        if t.fed_by[inp].is_some() {
            return Err(PlanError::InputReused {
                operator: t.name.clone(),
                port: inp,
            });
        }
        self.nodes[from.0].feeds[out] = Some((to.0, inp));
        self.nodes[to.0].fed_by[inp] = Some((from.0, out));
        Ok(())
    }

    /// Output `port` of `node` as a typed stream (checked against the operator's port type).
    pub fn stream<T: Send + 'static>(
        &self,
        node: OperatorId,
        port: usize,
    ) -> Result<Stream<T>, PlanError> {
        let n = &self.nodes[node.0];
        let Some(pt) = n.outputs.get(port) else {
            return Err(PlanError::NoSuchPort {
                operator: n.name.clone(),
                direction: "output",
                port,
                count: n.outputs.len(),
            });
        };
        if pt.id != TypeId::of::<T>() {
            return Err(PlanError::TypeMismatch {
                from: n.name.clone(),
                from_port: port,
                from_type: pt.name,
                to: "a typed stream".into(),
                to_port: 0,
                to_type: std::any::type_name::<T>(),
            });
        }
        Ok(Stream {
            node,
            port,
            _t: PhantomData,
        })
    }

    /// The typed streams of every output of `node` (all of type `T`).
    pub(crate) fn streams_of<T: Send + 'static>(&self, node: OperatorId) -> Vec<Stream<T>> {
        (0..self.nodes[node.0].outputs.len())
            .map(|p| Stream {
                node,
                port: p,
                _t: PhantomData,
            })
            .collect()
    }

    pub(crate) fn out0<T: Send + 'static>(&self, node: OperatorId) -> Stream<T> {
        Stream {
            node,
            port: 0,
            _t: PhantomData,
        }
    }

    /// Feeds a typed stream into input `inp` of `to`; a misuse (a stream consumed twice) is
    /// kept and reported by `build`.
    pub fn feed<T>(&mut self, s: Stream<T>, to: OperatorId, inp: usize) {
        if let Err(e) = self.connect(s.node, s.port, to, inp) {
            self.errors.push(e);
        }
    }

    /// A new sink of the plan: the handle for the user, and the cell for its operator.
    pub(crate) fn new_sink<T: Send + 'static>(&mut self) -> (Sink<T>, Arc<SinkCell<T>>) {
        let cell: Arc<SinkCell<T>> = Arc::new(crate::sync::os::Mutex::new(None));
        self.sinks.push(cell.clone());
        let sink = Sink {
            slot: self.sinks.len() - 1,
            cell: cell.clone(),
        };
        (sink, cell)
    }

    /// Checks the plan: at least one operator, every port connected exactly once, no cycle,
    /// settings in range.
    pub fn build(self) -> Result<Plan, PlanError> {
        if let Some(e) = self.errors.into_iter().next() {
            return Err(e);
        }
        if self.nodes.is_empty() {
            return Err(PlanError::Empty);
        }
        if self.packet_bytes == Some(0) || self.first_packet_bytes == Some(0) {
            return Err(PlanError::Setting(
                "packet size must be at least 1 byte".into(),
            ));
        }
        if self.buffer_packets == 0 {
            return Err(PlanError::Setting(
                "input buffers must hold at least 1 packet".into(),
            ));
        }
        for n in &self.nodes {
            if let Some(port) = n.fed_by.iter().position(Option::is_none) {
                return Err(PlanError::UnconnectedInput {
                    operator: n.name.clone(),
                    port,
                });
            }
            if let Some(port) = n.feeds.iter().position(Option::is_none) {
                return Err(PlanError::UnconnectedOutput {
                    operator: n.name.clone(),
                    port,
                });
            }
        }
        // Kahn's algorithm: whatever is left over lies on (or behind) a cycle.
        let mut indeg: Vec<usize> = self.nodes.iter().map(|n| n.inputs.len()).collect();
        let mut ready: VecDeque<usize> = (0..self.nodes.len()).filter(|&i| indeg[i] == 0).collect();
        let mut seen = 0;
        while let Some(i) = ready.pop_front() {
            seen += 1;
            for &(to, _) in self.nodes[i].feeds.iter().flatten() {
                indeg[to] -= 1;
                if indeg[to] == 0 {
                    ready.push_back(to);
                }
            }
        }
        if seen < self.nodes.len() {
            let names: Vec<&str> = (0..self.nodes.len())
                .filter(|&i| indeg[i] > 0)
                .map(|i| self.nodes[i].name.as_str())
                .collect();
            return Err(PlanError::Cycle(names.join(" → ")));
        }
        Ok(Plan {
            nodes: self.nodes,
            sinks: self.sinks,
            packet_bytes: self.packet_bytes,
            first_packet_bytes: self.first_packet_bytes,
            buffer_packets: self.buffer_packets,
            profile_threads: self.profile_threads,
            limits: self.limits,
            account: self.account,
        })
    }
}

/// A validated plan, ready to be submitted to a runtime (once: operators keep state).
pub struct Plan {
    pub(crate) nodes: Vec<OperatorDecl>,
    pub(crate) sinks: Vec<SinkSlot>,
    pub(crate) packet_bytes: Option<usize>,
    pub(crate) first_packet_bytes: Option<usize>,
    pub(crate) buffer_packets: usize,
    pub(crate) profile_threads: bool,
    pub(crate) limits: Limits,
    pub(crate) account: Option<std::sync::Arc<crate::Account>>,
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("operators", &self.nodes.len())
            .field("packet_bytes", &self.packet_bytes)
            .field("buffer_packets", &self.buffer_packets)
            .finish()
    }
}

impl Plan {
    /// Number of operators.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a built plan has operators.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Operator names, by index.
    pub fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// Number of application threads: one more than the highest thread an operator was put on
    /// ([`PlanBuilder::on_thread`]); 0 when none was.
    pub fn threads(&self) -> usize {
        self.nodes
            .iter()
            .filter_map(|n| n.thread)
            .max()
            .map_or(0, |t| t + 1)
    }

    /// Maps the plan's threads onto PUs of `rt`'s machine (StreamMap's enforced mapping,
    /// §IV.A): every operator of thread `t` gets PU `pus[t]` as its home, so under the
    /// `pinned` policy all its tasks run there and nowhere else. An operator without a thread
    /// runs on the thread that feeds it (pinned there when one thread feeds all its inputs;
    /// left free, a shared operator, when several do).
    pub fn map_threads(
        &mut self,
        rt: &nearflow_rt::Runtime,
        pus: &[usize],
    ) -> Result<(), PlanError> {
        let threads = self.threads();
        if pus.len() != threads {
            return Err(PlanError::Setting(format!(
                "a mapping of {} threads given for a plan with {threads}",
                pus.len()
            )));
        }
        let homes = pus
            .iter()
            .map(|&p| rt.home_on_pu(p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PlanError::Setting(format!("bad mapping: {e}")))?;
        let eff = self.shape().effective_threads();
        for (n, t) in self.nodes.iter_mut().zip(eff) {
            if let Some(t) = t {
                n.home = Some(homes[t]);
            }
        }
        Ok(())
    }

    /// Its operators and connections, without the operators themselves (for the simulator,
    /// `crates/sim`, and for tools that draw plans).
    pub fn shape(&self) -> PlanShape {
        PlanShape {
            operators: self
                .nodes
                .iter()
                .map(|n| OperatorShape {
                    name: n.name.clone(),
                    fed_by: n.fed_by.iter().map(|f| f.expect("validated")).collect(),
                    feeds: n.feeds.iter().map(|f| f.expect("validated")).collect(),
                    input_tuple_bytes: n.inputs.iter().map(|p| p.size).collect(),
                    output_tuple_bytes: n.outputs.iter().map(|p| p.size).collect(),
                    home_node: n.home.map(|h| h.node_index()),
                    thread: n.thread,
                })
                .collect(),
            buffer_packets: self.buffer_packets,
            packet_bytes: self.packet_bytes,
        }
    }
}

/// A plan's operators and connections ([`Plan::shape`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct PlanShape {
    pub operators: Vec<OperatorShape>,
    /// Packets an input buffer holds.
    pub buffer_packets: usize,
    /// The plan's own packet size, if it set one.
    pub packet_bytes: Option<usize>,
}

impl PlanShape {
    /// The thread each operator runs on once the plan is mapped: its own
    /// ([`PlanBuilder::on_thread`]), or for one without a thread whose inputs all come from
    /// one thread, that thread (System S: no Threaded Port, executed by the delivering
    /// thread; [`Plan::map_threads`] pins it there so backpressure wake-ups from its consumer
    /// do not move it). None for a source without a thread and for an operator fed by several
    /// threads: a shared operator (§III.D), run by whichever delivers.
    pub fn effective_threads(&self) -> Vec<Option<usize>> {
        let ops = &self.operators;
        let mut eff: Vec<Option<usize>> = ops.iter().map(|n| n.thread).collect();
        // Plans are acyclic: as many passes as operators settle every path.
        for _ in 0..ops.len() {
            for (i, n) in ops.iter().enumerate() {
                if n.thread.is_some() || n.fed_by.is_empty() {
                    continue;
                }
                let mut from = n.fed_by.iter().map(|&(p, _)| eff[p]);
                let first = from.next().flatten();
                eff[i] = first.filter(|t| from.all(|x| x == Some(*t)));
            }
        }
        eff
    }
}

/// One operator of a [`PlanShape`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct OperatorShape {
    pub name: String,
    /// For each input port: the producing (operator, output port).
    pub fed_by: Vec<(usize, usize)>,
    /// For each output port: the consuming (operator, input port).
    pub feeds: Vec<(usize, usize)>,
    /// Bytes of a tuple on each input and output port.
    pub input_tuple_bytes: Vec<usize>,
    pub output_tuple_bytes: Vec<usize>,
    /// The node its deferred tasks go to, if it has a home.
    pub home_node: Option<usize>,
    /// The application thread it belongs to ([`PlanBuilder::on_thread`]).
    pub thread: Option<usize>,
}
