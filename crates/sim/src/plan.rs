//! Dataflow plans as the engine runs them (`task-scheduling-in-data-stream-processing.txt`
//! §3.1, `crates/flow/src/exec.rs`), with per-operator costs calibrated from a traced run.
//!
//! Each request is one instance of the plan. Per operator: the four states (a `schedule` of an
//! idle operator spawns its task, of a running one marks it to run again, and collapses
//! otherwise: `nearflow_policy::dataflow::OpState`, the engine's own transitions), bounded
//! input buffers of `buffer_packets` packets (a packet that does not fit is held by its
//! producer, which stops until the consumer makes room and schedules it again as a deferred
//! task), a sent packet schedules its consumer as the engine does (`consumer_kind`: an
//! **immediate** task on a plain edge, a **deferred** one out of a fan-out), a source that
//! has more to produce schedules itself as a **deferred** task, and end of stream closes the
//! consumers' inputs and schedules them. The plan's root schedules every source (deferred).
//!
//! What an operator does in one run is the model's ([`OpModel`]): a source produces its next
//! packets; a streaming operator takes every packet waiting on its inputs and produces
//! `out_per_in` tuples per tuple taken, in full packets (the remainder when its inputs end); a
//! blocking one (sort, aggregate: it sent nothing before its inputs ended, in the traced run)
//! produces everything when its inputs have ended. A run costs `ns_per_tuple` per tuple taken
//! (a source: per tuple produced); the packets taken are read and freed, the packets made are
//! written, so the machine model charges where they are. A source that reads stored data (a
//! SPARQL scan of a store partition) reads one input block per packet from its home node's
//! memory; the blocks are the same for every request, as the partition is, so concurrent
//! queries can find them in a cache. An operator's state (a sort's rows, a hash join's table,
//! DISTINCT's set: the largest size the calibration's profiled run recorded) is data too: a
//! run reads and writes back the pages its tuples touch, or the whole state
//! ([`OpModel::state_bytes_per_tuple`]). An index join's lookups read the plan's store
//! ([`StoreModel`]): the pages its input rows touch, from the nodes the store's partitions lie
//! on. Not modelled: consumers that finish early (`limit`), and the cost of a run that takes
//! nothing.

use std::collections::VecDeque;

use nearflow_policy::dataflow::{consumer_kind, successor_kind, OpState as Sched};
use nearflow_policy::TaskKind;
use serde::{Deserialize, Serialize};

use crate::driver::{Begun, Driver, Ended};
use crate::workload::{BlockId, Spawn, TaskId, WorkloadError};

/// What kind of operator, as the traced run showed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpKind {
    /// No inputs: produces `packets` packets in all, `per_run` per run.
    Source { packets: u64, per_run: u64 },
    /// Produces while its inputs are open.
    Stream,
    /// Produces only once its inputs have ended.
    Blocking,
}

/// One operator of a [`PlanModel`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpModel {
    pub name: String,
    /// For each input port: the producing (operator, output port).
    pub fed_by: Vec<(usize, usize)>,
    /// For each output port: the consuming (operator, input port).
    pub feeds: Vec<(usize, usize)>,
    pub kind: OpKind,
    /// Work per tuple taken (a source: per tuple produced), ns.
    pub ns_per_tuple: f64,
    /// Tuples produced on each output per tuple taken (a source: per packet produced).
    pub out_per_in: Vec<f64>,
    pub tuple_bytes_out: Vec<u64>,
    /// A source that reads data which exists before the run (a store's partition): bytes read
    /// per tuple produced, from `home`'s memory. 0 for a source that makes its data.
    #[serde(default)]
    pub input_bytes_per_tuple: f64,
    /// The node its deferred tasks go to (and a reading source's data lies on).
    pub home: Option<usize>,
    /// The PU every task of it runs on, when the plan is mapped (StreamMap; the `pinned`
    /// policy keeps it there).
    #[serde(default)]
    pub pu: Option<usize>,
    /// Bytes of state it keeps between runs (windows, tables): one block per instance that
    /// each of its tasks reads and writes back, so it stays in the caches of the PU that ran
    /// it last and moves when the operator runs elsewhere.
    #[serde(default)]
    pub state_bytes: u64,
    /// Bytes of that state one tuple taken touches (a hash table's bucket, a set's slot, a
    /// sort buffer's row), when a run touches only part of it: the state is then pages of
    /// [`STATE_PAGE`] bytes, and a run reads and writes back the pages its tuples touch
    /// (spread over the state, as hashed accesses are), and a blocking operator's last run, which
    /// emits from its state, all of them. 0: every run reads and writes the whole state (a
    /// window that each tuple slides).
    #[serde(default)]
    pub state_bytes_per_tuple: f64,
    /// Bytes of the plan's stored data ([`PlanModel::store`]) one tuple taken reads: an index
    /// join's lookup per input row (a binary search's last line and the matching rows). 0:
    /// none.
    #[serde(default)]
    pub lookup_bytes_per_tuple: f64,
}

/// The stored data a plan's lookups read ([`OpModel::lookup_bytes_per_tuple`]): one region of
/// `bytes`, shared by every request and operator (one store), in pages of [`STATE_PAGE`]
/// homed in contiguous ranges over `nodes` (the store's partitions by key range), or, with no
/// nodes, on every node (replicas: a page is read from the reader's node).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoreModel {
    pub bytes: u64,
    pub nodes: Vec<usize>,
}

/// The unit a state touched per tuple is read in: a page, the unit the allocator places.
pub const STATE_PAGE: u64 = 4096;

/// A plan's operators with their calibrated costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanModel {
    pub name: String,
    pub operators: Vec<OpModel>,
    pub buffer_packets: usize,
    /// The packet size the simulated engine uses.
    pub packet_bytes: u64,
    /// The stored data its lookups read, if any.
    #[serde(default)]
    pub store: StoreModel,
}

impl PlanModel {
    /// The tuples each operator takes in one instance, by the model's ratios (a source: the
    /// tuples it produces). A check of a calibration: the sink's figure is the query's result.
    pub fn tuples_in(&self) -> Vec<f64> {
        let ops = &self.operators;
        let mut t = vec![0.0; ops.len()];
        // Plans are acyclic: as many passes as operators settle every path.
        for _ in 0..ops.len() {
            for (i, o) in ops.iter().enumerate() {
                t[i] = match o.kind {
                    OpKind::Source { packets, .. } => (0..o.feeds.len())
                        .map(|p| o.out_per_in[p] * packets as f64)
                        .fold(0.0, f64::max),
                    _ => o
                        .fed_by
                        .iter()
                        .map(|&(f, port)| {
                            let from = &ops[f];
                            match from.kind {
                                OpKind::Source { packets, .. } => {
                                    from.out_per_in[port] * packets as f64
                                }
                                _ => from.out_per_in[port] * t[f],
                            }
                        })
                        .sum(),
                };
            }
        }
        t
    }

    /// Checks that connections point at existing ports and match each other.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Invalid(m));
        let ops = &self.operators;
        for (i, o) in ops.iter().enumerate() {
            for (p, &(from, port)) in o.fed_by.iter().enumerate() {
                if ops.get(from).and_then(|f| f.feeds.get(port)) != Some(&(i, p)) {
                    return bad(format!("input {p} of {} is not connected back", o.name));
                }
            }
            if o.out_per_in.len() != o.feeds.len() || o.tuple_bytes_out.len() != o.feeds.len() {
                return bad(format!("{}: one cost per output expected", o.name));
            }
            if matches!(o.kind, OpKind::Source { .. }) != o.fed_by.is_empty() {
                return bad(format!(
                    "{}: a source has no inputs, and only a source",
                    o.name
                ));
            }
            let ok = |x: f64| x.is_finite() && x >= 0.0;
            if !ok(o.ns_per_tuple)
                || !ok(o.input_bytes_per_tuple)
                || !ok(o.lookup_bytes_per_tuple)
                || !ok(o.state_bytes_per_tuple)
                || o.out_per_in.iter().any(|&x| !ok(x))
            {
                return bad(format!("{}: costs must be numbers ≥ 0", o.name));
            }
        }
        if self.buffer_packets == 0 || self.packet_bytes == 0 {
            return bad("buffers and packets must hold something".into());
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug)]
struct Packet {
    tuples: u64,
    block: BlockId,
}

#[derive(Clone, Debug, Default)]
struct Input {
    q: VecDeque<Packet>,
    closed: bool,
    producer_blocked: bool,
}

#[derive(Clone, Debug, Default)]
struct OpState {
    /// The engine's operator state (`nearflow_policy::dataflow::OpState`, as flow applies it).
    sched: Sched,
    want_immediate: bool,
    inputs: Vec<Input>,
    /// Per output: packets refused by the consumer, oldest first.
    held: Vec<VecDeque<Packet>>,
    /// Per output: tuples made but not yet a full packet.
    carry: Vec<f64>,
    /// A blocking operator's tuples taken so far.
    taken: f64,
    produced: u64,
    /// It has made its last output; it ends once that has gone out (`OperatorState::finishing`).
    finishing: bool,
    done: bool,
}

/// What a run decided at its start, applied at its end.
#[derive(Debug, Default)]
struct Run {
    /// Per output: packets made.
    made: Vec<Vec<Packet>>,
    /// Outputs on which held packets went out at the start of the run.
    resent: Vec<usize>,
    taken: Vec<BlockId>,
    /// Input data a source reads (not freed).
    inputs: Vec<BlockId>,
    /// Producers to schedule (their refused packets now fit).
    wake: Vec<usize>,
    more: bool,
    finish: bool,
    /// Tuples taken from the inputs (what touches the state and looks up the store).
    tuples_taken: u64,
}

/// Instances of a plan, one per request.
pub(crate) struct PlanDriver<'m> {
    model: &'m PlanModel,
    requests: usize,
    ops: Vec<Vec<OpState>>,
    /// (request, operator) of each task; the root of request r is `(r, NO_OP)`.
    tasks: Vec<(u32, u32)>,
    runs: Vec<Option<Run>>,
    blocks: Vec<u64>,
    /// Input data: the first `input_homes.len()` blocks, one per packet of each reading
    /// source, shared by every request (the same store partition), with their nodes.
    input_homes: Vec<Option<usize>>,
    /// Per operator: its first input block.
    input_base: Vec<usize>,
    /// The pages of the plan's store that lookups read (input blocks too).
    lookup_pages: Vec<BlockId>,
    /// Per request and operator: its state's blocks (one, or pages: `state_bytes_per_tuple`).
    state: Vec<Vec<Vec<BlockId>>>,
    /// Draws which pages of a state a run touches (deterministic).
    state_rng: u64,
    /// Per request and operator: when it finished.
    done_at: Vec<Vec<u64>>,
    /// Per operator: the work and memory time its tasks were charged (all requests).
    charges: Vec<(f64, f64)>,
    now: u64,
    done_ops: usize,
}

const NO_OP: u32 = u32::MAX;

impl<'m> PlanDriver<'m> {
    pub(crate) fn new(model: &'m PlanModel, requests: usize) -> Self {
        let fresh: Vec<OpState> = model
            .operators
            .iter()
            .map(|o| OpState {
                inputs: vec![Input::default(); o.fed_by.len()],
                held: vec![VecDeque::new(); o.feeds.len()],
                carry: vec![0.0; o.feeds.len()],
                ..OpState::default()
            })
            .collect();
        let mut blocks = Vec::new();
        let mut input_homes = Vec::new();
        let mut input_base = Vec::with_capacity(model.operators.len());
        for (o, m) in model.operators.iter().enumerate() {
            input_base.push(blocks.len());
            if let (OpKind::Source { packets, .. }, true) = (m.kind, m.input_bytes_per_tuple > 0.0)
            {
                let per = (0..m.feeds.len())
                    .map(|p| Self::source_tuples(model, o, p))
                    .max()
                    .unwrap_or(1);
                for _ in 0..packets {
                    blocks.push(((per as f64 * m.input_bytes_per_tuple).ceil() as u64).max(1));
                    input_homes.push(m.home);
                }
            }
        }
        let pages = model.store.bytes.div_ceil(STATE_PAGE) as usize;
        let mut lookup_pages = Vec::with_capacity(pages);
        if model
            .operators
            .iter()
            .any(|o| o.lookup_bytes_per_tuple > 0.0)
        {
            let nodes = &model.store.nodes;
            for i in 0..pages {
                blocks.push(STATE_PAGE.min(model.store.bytes - i as u64 * STATE_PAGE));
                input_homes.push((!nodes.is_empty()).then(|| nodes[i * nodes.len() / pages]));
                lookup_pages.push((blocks.len() - 1) as BlockId);
            }
        }
        let state = (0..requests)
            .map(|_| {
                model
                    .operators
                    .iter()
                    .map(|m| {
                        let mut pages = Vec::new();
                        if m.state_bytes > 0 && m.state_bytes_per_tuple > 0.0 {
                            let mut left = m.state_bytes;
                            while left > 0 {
                                blocks.push(left.min(STATE_PAGE));
                                pages.push((blocks.len() - 1) as BlockId);
                                left -= left.min(STATE_PAGE);
                            }
                        } else if m.state_bytes > 0 {
                            blocks.push(m.state_bytes);
                            pages.push((blocks.len() - 1) as BlockId);
                        }
                        pages
                    })
                    .collect()
            })
            .collect();
        PlanDriver {
            model,
            requests,
            ops: vec![fresh; requests],
            state,
            state_rng: 0x9e37_79b9_7f4a_7c15,
            done_at: vec![vec![0; model.operators.len()]; requests],
            charges: vec![(0.0, 0.0); model.operators.len()],
            now: 0,
            tasks: Vec::new(),
            runs: Vec::new(),
            blocks,
            input_homes,
            input_base,
            lookup_pages,
            done_ops: 0,
        }
    }

    /// The next draw of the pages a run touches (xorshift; deterministic).
    fn next_random(&mut self) -> u64 {
        let mut x = self.state_rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state_rng = x;
        x
    }

    fn new_task(&mut self, r: usize, op: u32) -> TaskId {
        self.tasks.push((r as u32, op));
        self.runs.push(None);
        (self.tasks.len() - 1) as TaskId
    }

    fn capacity(&self, o: usize, port: usize) -> u64 {
        Self::capacity_of(self.model, o, port)
    }

    fn capacity_of(model: &PlanModel, o: usize, port: usize) -> u64 {
        (model.packet_bytes / model.operators[o].tuple_bytes_out[port].max(1)).max(1)
    }

    /// Tuples in each packet source `o` makes on output `port`.
    fn source_tuples(model: &PlanModel, o: usize, port: usize) -> u64 {
        let cap = Self::capacity_of(model, o, port);
        (model.operators[o].out_per_in[port].round() as u64).clamp(1, cap)
    }

    fn packet(&mut self, tuples: u64, tuple_bytes: u64) -> Packet {
        self.blocks.push((tuples * tuple_bytes).max(1));
        Packet {
            tuples,
            block: (self.blocks.len() - 1) as BlockId,
        }
    }

    /// `schedule` of the engine's state machine (flow/src/state.rs); the task to spawn, if any.
    fn schedule(&mut self, r: usize, o: usize, kind: TaskKind, out: &mut Vec<Spawn>) {
        let st = &mut self.ops[r][o];
        if kind == TaskKind::Immediate {
            st.want_immediate = true;
        }
        if let Some(next) = st.sched.on_schedule() {
            st.sched = next;
            if next == Sched::Scheduled {
                self.spawn(r, o, kind, out);
            }
        }
    }

    fn spawn(&mut self, r: usize, o: usize, kind: TaskKind, out: &mut Vec<Spawn>) {
        let home = match kind {
            TaskKind::Deferred => self.model.operators[o].home,
            TaskKind::Immediate => None,
        };
        let pu = self.model.operators[o].pu;
        let task = self.new_task(r, o as u32);
        out.push(Spawn {
            task,
            kind,
            home,
            pu,
        });
    }

    /// Offers `p` to the consumer of output `port` of `o`; whether it was taken.
    fn offer(&mut self, r: usize, o: usize, port: usize, p: Packet) -> bool {
        let (c, cp) = self.model.operators[o].feeds[port];
        let cap = self.model.buffer_packets;
        let input = &mut self.ops[r][c].inputs[cp];
        if input.q.len() >= cap {
            input.producer_blocked = true;
            return false;
        }
        input.q.push_back(p);
        true
    }

    fn inputs_ended(&self, r: usize, o: usize) -> bool {
        self.ops[r][o]
            .inputs
            .iter()
            .all(|i| i.closed && i.q.is_empty())
    }

    /// Makes `tuples` more tuples on output `port` into packets; `all` flushes the remainder.
    fn make(&mut self, r: usize, o: usize, port: usize, tuples: f64, all: bool, run: &mut Run) {
        let cap = self.capacity(o, port);
        let bytes = self.model.operators[o].tuple_bytes_out[port];
        let mut have = self.ops[r][o].carry[port] + tuples;
        while have >= cap as f64 {
            let p = self.packet(cap, bytes);
            run.made[port].push(p);
            have -= cap as f64;
        }
        if all && have >= 0.5 {
            let p = self.packet(have.round() as u64, bytes);
            run.made[port].push(p);
            have = 0.0;
        }
        self.ops[r][o].carry[port] = have;
    }
}

impl Driver for PlanDriver<'_> {
    fn name(&self) -> String {
        format!(
            "{} x{} ({} operators, {} B packets)",
            self.model.name,
            self.requests,
            self.model.operators.len(),
            self.model.packet_bytes
        )
    }
    fn requests(&self) -> usize {
        self.requests
    }
    fn root(&mut self, r: usize) -> (TaskId, Option<usize>) {
        (self.new_task(r, NO_OP), None)
    }
    fn request_of(&self, t: TaskId) -> u32 {
        self.tasks[t as usize].0
    }

    fn begin(&mut self, t: TaskId) -> Begun {
        let (r, o) = self.tasks[t as usize];
        let (r, o32) = (r as usize, o);
        if o32 == NO_OP {
            return Begun::default();
        }
        let o = o32 as usize;
        let m = &self.model.operators[o];
        let outs = m.feeds.len();
        let mut run = Run {
            made: vec![Vec::new(); outs],
            ..Run::default()
        };
        let st = &mut self.ops[r][o];
        st.sched = st
            .sched
            .on_begin()
            .expect("a task runs only a scheduled operator");
        st.want_immediate = false;
        let mut begun = Begun::default();
        if st.done {
            self.runs[t as usize] = Some(run);
            return begun;
        }
        // Held packets first (`Exec::flush`); a producer still blocked makes nothing new.
        let mut clear = true;
        for port in 0..outs {
            while let Some(&p) = self.ops[r][o].held[port].front() {
                if !self.offer(r, o, port, p) {
                    clear = false;
                    break;
                }
                self.ops[r][o].held[port].pop_front();
                if !run.resent.contains(&port) {
                    run.resent.push(port);
                }
            }
        }
        if clear && self.ops[r][o].finishing {
            run.finish = true;
        } else if clear {
            let m = &self.model.operators[o];
            match m.kind {
                OpKind::Source { packets, per_run } => {
                    let st = &self.ops[r][o];
                    let first = st.produced;
                    let n = per_run.max(1).min(packets.saturating_sub(first));
                    if m.input_bytes_per_tuple > 0.0 {
                        let base = self.input_base[o] as u64 + first;
                        run.inputs = (base..base + n).map(|b| b as BlockId).collect();
                    }
                    for port in 0..outs {
                        let per = Self::source_tuples(self.model, o, port);
                        let bytes = m.tuple_bytes_out[port];
                        for _ in 0..n {
                            let p = self.packet(per, bytes);
                            begun.work_ns += m.ns_per_tuple * per as f64;
                            run.made[port].push(p);
                        }
                    }
                    let st = &mut self.ops[r][o];
                    st.produced += n;
                    run.more = st.produced < packets;
                    run.finish = !run.more;
                }
                OpKind::Stream | OpKind::Blocking => {
                    let mut taken = 0u64;
                    for port in 0..m.fed_by.len() {
                        let input = &mut self.ops[r][o].inputs[port];
                        while let Some(p) = input.q.pop_front() {
                            taken += p.tuples;
                            run.taken.push(p.block);
                        }
                        if input.producer_blocked {
                            input.producer_blocked = false;
                            run.wake.push(m.fed_by[port].0);
                        }
                    }
                    begun.work_ns += m.ns_per_tuple * taken as f64;
                    run.tuples_taken = taken;
                    let ended = self.inputs_ended(r, o);
                    let blocking = m.kind == OpKind::Blocking;
                    if blocking {
                        self.ops[r][o].taken += taken as f64;
                    }
                    for port in 0..outs {
                        let ratio = self.model.operators[o].out_per_in[port];
                        if !blocking {
                            self.make(r, o, port, ratio * taken as f64, ended, &mut run);
                        } else if ended {
                            let all = ratio * self.ops[r][o].taken;
                            self.make(r, o, port, all, true, &mut run);
                        }
                    }
                    run.finish = ended;
                }
            }
        }
        if run.finish {
            self.ops[r][o].finishing = true;
        }
        begun.writes = run.made.iter().flatten().map(|p| p.block).collect();
        begun.reads = run.taken.clone();
        begun.reads.append(&mut run.inputs);
        // Lookups into the store: the pages its tuples read, drawn over the store as keys fall.
        let m = &self.model.operators[o];
        if m.lookup_bytes_per_tuple > 0.0 && !self.lookup_pages.is_empty() {
            let bytes = m.lookup_bytes_per_tuple * run.tuples_taken as f64;
            let n = ((bytes / STATE_PAGE as f64).ceil() as usize).min(self.lookup_pages.len());
            for _ in 0..n {
                let k = (self.next_random() % self.lookup_pages.len() as u64) as usize;
                begun.reads.push(self.lookup_pages[k]);
            }
        }
        // The operator's state: read, then written back (which takes it out of every other
        // PU's caches: the next run elsewhere misses it). All of it, or the pages its tuples
        // touch.
        let m = &self.model.operators[o];
        let pages = self.state[r][o].len();
        let touched = if m.state_bytes_per_tuple > 0.0 {
            let emits_all = m.kind == OpKind::Blocking && run.made.iter().any(|p| !p.is_empty());
            let bytes = m.state_bytes_per_tuple * run.tuples_taken as f64;
            if emits_all {
                pages
            } else {
                ((bytes / STATE_PAGE as f64).ceil() as usize).min(pages)
            }
        } else {
            pages
        };
        for k in 0..touched {
            let page = if touched == pages {
                k
            } else {
                // A page drawn over the whole state, as hashed accesses fall.
                (self.next_random() % pages as u64) as usize
            };
            let b = self.state[r][o][page];
            begun.reads.push(b);
            begun.writes.push(b);
        }
        self.runs[t as usize] = Some(run);
        begun
    }

    fn end(&mut self, t: TaskId) -> Ended {
        let (r, o32) = self.tasks[t as usize];
        let r = r as usize;
        let mut out = Ended::default();
        if o32 == NO_OP {
            for o in 0..self.model.operators.len() {
                if self.model.operators[o].fed_by.is_empty() {
                    self.schedule(r, o, TaskKind::Deferred, &mut out.spawns);
                }
            }
            return out;
        }
        let o = o32 as usize;
        let run = self.runs[t as usize].take().unwrap_or_default();
        out.frees = run.taken;
        let outs = self.model.operators[o].feeds.len();
        // Deliver what was made: a packet that fits schedules its consumer (immediate), one
        // that does not is held.
        for (port, made) in run.made.into_iter().enumerate() {
            let consumer = self.model.operators[o].feeds[port].0;
            let mut sent = run.resent.contains(&port);
            for p in made {
                if !self.ops[r][o].held[port].is_empty() || !self.offer(r, o, port, p) {
                    self.ops[r][o].held[port].push_back(p);
                } else {
                    sent = true;
                }
            }
            if sent {
                self.schedule(r, consumer, consumer_kind(outs), &mut out.spawns);
            }
        }
        for p in run.wake {
            self.schedule(r, p, TaskKind::Deferred, &mut out.spawns);
        }
        let blocked = self.ops[r][o].held.iter().any(|h| !h.is_empty());
        if run.more && !blocked {
            self.schedule(r, o, TaskKind::Deferred, &mut out.spawns);
        }
        if run.finish && !blocked && !self.ops[r][o].done {
            self.ops[r][o].done = true;
            self.done_at[r][o] = self.now;
            self.done_ops += 1;
            for port in 0..outs {
                let (c, cp) = self.model.operators[o].feeds[port];
                self.ops[r][c].inputs[cp].closed = true;
                self.schedule(r, c, consumer_kind(outs), &mut out.spawns);
            }
        }
        // `end` of the state machine: run again if scheduled meanwhile.
        let st = &mut self.ops[r][o];
        let (next, successor) = st.sched.on_end().expect("an operator ends while running");
        st.sched = next;
        if successor {
            let kind = successor_kind(st.want_immediate);
            self.spawn(r, o, kind, &mut out.spawns);
        }
        out
    }

    fn block_bytes(&self, b: BlockId) -> u64 {
        self.blocks[b as usize]
    }
    fn input_home(&self, b: BlockId) -> Option<usize> {
        self.input_homes.get(b as usize).copied().flatten()
    }
    fn set_now(&mut self, ns: u64) {
        self.now = ns;
    }
    fn finish_times(&self) -> Vec<Vec<u64>> {
        self.done_at.clone()
    }
    fn charged(&mut self, t: TaskId, work_ns: f64, memory_ns: f64) {
        let o = self.tasks[t as usize].1;
        if o != NO_OP {
            let c = &mut self.charges[o as usize];
            c.0 += work_ns;
            c.1 += memory_ns;
        }
    }
    fn operator_charges(&self) -> Vec<(f64, f64)> {
        self.charges.clone()
    }
    fn check(&self) -> Result<(), String> {
        let all = self.requests * self.model.operators.len();
        if self.done_ops == all {
            Ok(())
        } else {
            Err(format!(
                "{} of {all} operator instances never finished (the plan model stalled)",
                all - self.done_ops
            ))
        }
    }
}
