//! Running a plan: operator states, scheduling by packets, end of stream, errors (001 §3.1).
//!
//! Each operator has one of four states (Nothing, Scheduled, Running, Running-and-scheduled),
//! kept in an atomic and model-checked with loom ([`SchedState`], `state.rs`), so at most one
//! task of an operator exists at a time, and an operator never runs on two
//! threads at once. The engine checks the second claim anyway: the operator lives behind a mutex
//! that its task only `try_lock`s; a failed `try_lock` would be counted in
//! [`PlanStats::concurrent_entries`] (the stress tests assert it stays 0).
//!
//! A packet (or end of stream) sent to an input schedules the consumer as an **immediate** task,
//! queued where the sender runs; an operator that returns [`Status::More`], and a producer woken
//! because its refused packet now fits, are scheduled as **deferred** tasks.

use crate::sync::os::{
    Arc, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Mutex, Ordering, TryLockError,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use nearflow_policy::dataflow::consumer_kind;
use nearflow_policy::TaskKind;
use nearflow_rt::TaskCx;

use crate::account::Account;
use crate::channel::Chan;
use crate::error::FlowError;
use crate::io::Io;
use crate::plan::{Operator, Plan, Status};
use crate::state::SchedState;
use crate::stats::PlanStats;

/// An operator and what the engine keeps of it between runs; behind the operator's mutex.
pub(crate) struct OperatorState {
    op: Box<dyn Operator>,
    /// Per output: packets refused by the consumer and held in its buffer (`Chan::held`),
    /// sent before anything new.
    pub(crate) held: Vec<usize>,
    /// Most packets held at once over all outputs.
    pub(crate) held_high: usize,
    finishing: bool,
    pub(crate) done: bool,
    failed: bool,
    /// Profiling ([`PlanBuilder::profile_threads`](crate::PlanBuilder::profile_threads)): who
    /// (thread, or worker) ran it last, runs per worker, and its largest state.
    last_worker: Option<usize>,
    runs_on: Vec<u64>,
    state_high: usize,
    /// Bytes it has charged against the memory limit and not given back.
    charged: usize,
}

/// What stands in for an operator once it is done: the operator itself is dropped then, so
/// that its state (a hash table, sorted rows) is freed while the rest of the plan runs on.
struct Finished;

impl Operator for Finished {
    fn inputs(&self) -> Vec<crate::plan::PortType> {
        Vec::new()
    }

    fn outputs(&self) -> Vec<crate::plan::PortType> {
        Vec::new()
    }

    fn run(&mut self, _io: &mut Io<'_>) -> Result<Status, FlowError> {
        Ok(Status::Done)
    }
}

/// One operator of a running plan.
pub(crate) struct OperatorRt {
    pub(crate) name: String,
    home: Option<nearflow_rt::Home>,
    /// The PU all its tasks go to when mapped ([`NO_PU`] when not): from its home, and
    /// changed while the plan runs by `PlanHandle::remap` (online re-mapping).
    pu: AtomicU32,
    sched: SchedState,
    pub(crate) state: Mutex<OperatorState>,
    /// (consumer operator, consumer port, buffer) per output.
    pub(crate) outs: Vec<(usize, usize, Arc<dyn Chan>)>,
    /// (buffer, producer operator) per input.
    pub(crate) ins: Vec<InEdge>,
    /// Every input has seen end of stream (once true, stays true).
    pub(crate) inputs_closed: AtomicBool,
    /// Packets produced while some input was open, and after all had closed: zero of the
    /// first marks an operator that emits only at the end (sort, aggregate), which the
    /// simulator's calibration needs (`PlanStats::sends`).
    pub(crate) sent_open: AtomicU64,
    pub(crate) sent_closed: AtomicU64,
}

/// No PU: the operator is not mapped.
pub(crate) const NO_PU: u32 = u32::MAX;

/// An input's buffer and the operator feeding it.
type InEdge = (Arc<dyn Chan>, usize);

/// A running plan's operators and counters, shared by its tasks.
pub(crate) struct Exec {
    pub(crate) ops: Vec<OperatorRt>,
    pub(crate) packet_bytes: usize,
    /// The size of an emitter's first packet (`PlanBuilder::first_packet_bytes`, at most
    /// `packet_bytes`).
    pub(crate) first_packet_bytes: usize,
    pub(crate) error: Mutex<Option<FlowError>>,
    pub(crate) done_ops: AtomicUsize,
    runs: AtomicU64,
    concurrent_entries: AtomicU64,
    pub(crate) profile: Option<ThreadProfile>,
    /// Each operator's thread once mapped (`PlanShape::effective_threads`), for `remap`.
    pub(crate) threads_of: Vec<Option<usize>>,
    /// The number of application threads.
    pub(crate) threads: usize,
    /// PUs (workers) of the runtime it runs on.
    pub(crate) workers: usize,
    /// The time limit and when it expires (set on submission).
    pub(crate) time_limit: Option<(Duration, std::time::Instant)>,
    /// The request's memory account: its limit and the bytes charged (by operators, the
    /// consumer, and whatever else shares the account).
    pub(crate) account: Arc<Account>,
}

/// What [`PlanBuilder::profile_threads`](crate::PlanBuilder::profile_threads) records, as
/// `dims × dims` row-major counters (relaxed adds; read after the plan ended, or as a running
/// snapshot). The dimensions are the plan's application threads when it has some
/// ([`PlanBuilder::on_thread`](crate::PlanBuilder::on_thread)) — so a profile stays per thread
/// when several threads share a PU — and the runtime's workers otherwise.
pub(crate) struct ThreadProfile {
    dims: usize,
    /// By thread: true; by worker: false.
    by_thread: bool,
    /// Bytes of tuples sent from thread (worker) `i` to an operator of thread (on worker) `j`.
    comm: Vec<AtomicU64>,
    /// Bytes of operator state that passed from `i` to `j` (an operator run by `j` whose
    /// previous run was by `i`).
    moved: Vec<AtomicU64>,
    /// Per worker: the thread of the last mapped operator it ran; an operator without a
    /// thread (a shared one) counts as run by it — System S runs such an operator on the
    /// thread that delivers its input, and the engine runs it on the deliverer's worker.
    current: Vec<AtomicU32>,
}

impl ThreadProfile {
    fn new(threads: usize, workers: usize) -> Self {
        let by_thread = threads > 0;
        let dims = if by_thread { threads } else { workers };
        let cells = || (0..dims * dims).map(|_| AtomicU64::new(0)).collect();
        ThreadProfile {
            dims,
            by_thread,
            comm: cells(),
            moved: cells(),
            current: (0..workers).map(|w| AtomicU32::new(w as u32)).collect(),
        }
    }

    /// Who runs operator `node` of `e` on worker `w`: its thread, the worker's current
    /// thread, or the worker itself.
    pub(crate) fn who(&self, e: &Exec, node: usize, w: usize) -> usize {
        if !self.by_thread {
            return w;
        }
        match e.threads_of[node] {
            Some(t) => t,
            None => self
                .current
                .get(w)
                .map_or(0, |c| c.load(Ordering::Relaxed) as usize),
        }
    }

    /// Who will run consumer `node` of a packet sent by `from` (on worker `w`).
    pub(crate) fn receiver(&self, e: &Exec, node: usize, from: usize, w: usize) -> usize {
        if self.by_thread {
            e.threads_of[node].unwrap_or(from)
        } else {
            e.runs_on(node, w)
        }
    }

    pub(crate) fn sent(&self, from: usize, to: usize, bytes: u64) {
        if from < self.dims && to < self.dims {
            self.comm[from * self.dims + to].fetch_add(bytes, Ordering::Relaxed);
        }
    }

    fn matrix(&self, cells: &[AtomicU64]) -> Vec<Vec<u64>> {
        cells
            .chunks(self.dims)
            .map(|r| r.iter().map(|c| c.load(Ordering::Relaxed)).collect())
            .collect()
    }
}

impl Exec {
    pub(crate) fn new(plan: Plan, packet_bytes: usize, workers: usize) -> Self {
        // Only a plan with threads pays for its shape on submission.
        let first_packet_bytes = plan
            .first_packet_bytes
            .map_or(packet_bytes, |f| f.min(packet_bytes));
        let threads = plan.threads();
        let threads_of = if threads > 0 {
            plan.shape().effective_threads()
        } else {
            vec![None; plan.nodes.len()]
        };
        let profile = plan
            .profile_threads
            .then(|| ThreadProfile::new(threads, workers));
        let runs_on = if plan.profile_threads {
            vec![0; workers]
        } else {
            Vec::new()
        };
        let cap = plan.buffer_packets;
        let limits = plan.limits;
        let account = plan
            .account
            .unwrap_or_else(|| Arc::new(Account::new(limits.memory)));
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
        let mut ops = Vec::with_capacity(plan.nodes.len());
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
            ops.push(OperatorRt {
                name: n.name,
                pu: AtomicU32::new(
                    n.home
                        .and_then(|h| h.pu_index())
                        .map_or(NO_PU, |p| p as u32),
                ),
                home: n.home,
                sched: SchedState::new(),
                state: Mutex::new(OperatorState {
                    held: vec![0; n.outputs.len()],
                    held_high: 0,
                    op: n.op,
                    finishing: false,
                    done: false,
                    failed: false,
                    last_worker: None,
                    runs_on: runs_on.clone(),
                    state_high: 0,
                    charged: 0,
                }),
                outs,
                ins,
                inputs_closed: AtomicBool::new(false),
                sent_open: AtomicU64::new(0),
                sent_closed: AtomicU64::new(0),
            });
        }
        Exec {
            ops,
            packet_bytes,
            first_packet_bytes,
            error: Mutex::new(None),
            done_ops: AtomicUsize::new(0),
            runs: AtomicU64::new(0),
            concurrent_entries: AtomicU64::new(0),
            profile,
            threads_of,
            threads,
            workers,
            time_limit: limits.time.map(|t| (t, std::time::Instant::now() + t)),
            account,
        }
    }

    /// Charges `bytes` of operator `node`'s state against the memory limit.
    pub(crate) fn charge(&self, node: usize, bytes: usize) -> Result<(), FlowError> {
        self.charge_as(|| self.ops[node].name.clone(), bytes)
    }

    /// Adds `bytes` to what the plan holds, charged for `who`, unless that would pass the
    /// memory limit ([`Account::charge`]).
    pub(crate) fn charge_as(
        &self,
        who: impl FnOnce() -> String,
        bytes: usize,
    ) -> Result<(), FlowError> {
        self.account.charge(who, bytes)
    }

    /// Gives back `bytes` an operator charged and no longer holds.
    pub(crate) fn uncharge(&self, bytes: usize) {
        self.account.uncharge(bytes);
    }

    /// The worker an operator's next task will run on, as far as the plan knows: its thread's
    /// PU when it is mapped, else the worker that schedules it (001 §3: an immediate task is
    /// queued where its sender runs).
    pub(crate) fn runs_on(&self, node: usize, sender: usize) -> usize {
        match self.ops[node].pu.load(Ordering::Relaxed) {
            NO_PU => sender,
            p => p as usize,
        }
    }

    /// Moves operator `node` to PU `pu` (or unpins it): its next tasks go there. Relaxed: a
    /// task spawned just before may still run on the old PU, which is harmless (the operator
    /// states keep it on one thread at a time).
    pub(crate) fn pin(&self, node: usize, pu: Option<usize>) {
        self.ops[node]
            .pu
            .store(pu.map_or(NO_PU, |p| p as u32), Ordering::Relaxed);
    }

    /// Moves `node` towards `SCHEDULED`; spawns its task when it was idle.
    pub(crate) fn schedule(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize, kind: TaskKind) {
        if self.ops[node].sched.schedule(kind) {
            self.spawn(cx, node, kind);
        }
    }

    fn spawn(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize, kind: TaskKind) {
        let e = self.clone();
        // Mapped to a PU: every task goes there (StreamMap, `Plan::map_threads`,
        // `PlanHandle::remap`).
        let pu = self.ops[node].pu.load(Ordering::Relaxed);
        if pu != NO_PU {
            if let Ok(home) = cx.home_on_pu(pu as usize) {
                return cx.spawn_at(kind, home, move |cx| e.task(cx, node));
            }
        }
        match (kind, self.ops[node].home) {
            (TaskKind::Deferred, Some(home)) => {
                cx.spawn_deferred_at(home, move |cx| e.task(cx, node))
            }
            _ => cx.spawn(kind, move |cx| e.task(cx, node)),
        }
    }

    /// The body of an operator's task.
    fn task(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize) {
        let n = &self.ops[node];
        n.sched.begin();
        cx.set_label(node as u32);
        if !cx.request_failed() {
            self.step(cx, node);
        }
        if let Some(kind) = n.sched.end() {
            self.spawn(cx, node, kind);
        }
    }

    fn step(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize) {
        let n = &self.ops[node];
        let mut state = match n.state.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => {
                // Relaxed (and the two counters below): statistics only, read after the
                // request completed, whose AcqRel completion count orders every task before it.
                self.concurrent_entries.fetch_add(1, Ordering::Relaxed);
                n.state.lock().unwrap_or_else(|p| p.into_inner())
            }
            Err(TryLockError::Poisoned(_)) => return,
        };
        self.runs.fetch_add(1, Ordering::Relaxed);
        if state.done || state.failed {
            return;
        }
        if let Some((limit, deadline)) = self.time_limit {
            if std::time::Instant::now() >= deadline {
                state.failed = true;
                self.fail(cx, FlowError::TimeLimit { limit });
                return;
            }
        }
        if let Some(e) = self.account.refusal() {
            state.failed = true;
            self.fail(cx, e);
            return;
        }
        if !self.flush(cx, node, &mut state) {
            return;
        }
        // Every consumer has finished (a `limit` downstream, say): nothing this operator could
        // produce is wanted, so it finishes without running again.
        if !n.outs.is_empty() && n.outs.iter().all(|(_, _, c)| c.discarding()) {
            state.finishing = true;
        }
        if let Some(prof) = &self.profile {
            let w = cx.worker();
            let who = prof.who(self, node, w);
            if let (true, Some(t), Some(c)) =
                (prof.by_thread, self.threads_of[node], prof.current.get(w))
            {
                c.store(t as u32, Ordering::Relaxed);
            }
            let before = state.op.state_bytes();
            if let Some(last) = state.last_worker.filter(|&l| l != who) {
                if last < prof.dims && who < prof.dims {
                    prof.moved[last * prof.dims + who].fetch_add(before as u64, Ordering::Relaxed);
                }
            }
            state.last_worker = Some(who);
            if let Some(r) = state.runs_on.get_mut(w) {
                *r += 1;
            }
        }
        if !state.finishing {
            let OperatorState {
                op,
                held,
                held_high,
                charged,
                ..
            } = &mut *state;
            let mut io = Io {
                exec: self,
                node,
                cx,
                held,
                held_high,
                charged,
                gone: 0,
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
                Ok(Ok(Status::Done)) => state.finishing = true,
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
                    state.failed = true;
                    self.fail(cx, e);
                    return;
                }
                Err(payload) => {
                    state.failed = true;
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
        if self.profile.is_some() {
            state.state_high = state.state_high.max(state.op.state_bytes());
        }
        // The consumers may have finished while it ran (it saw so and stopped): finish now,
        // since no consumer will schedule it again.
        if !n.outs.is_empty() && n.outs.iter().all(|(_, _, c)| c.discarding()) {
            state.finishing = true;
        }
        if state.finishing && state.held.iter().all(|&h| h == 0) {
            state.done = true;
            drop(std::mem::replace(&mut state.op, Box::new(Finished)));
            self.uncharge(std::mem::take(&mut state.charged));
            let kind = consumer_kind(n.outs.len());
            for (consumer, _, chan) in &n.outs {
                chan.close();
                self.schedule(cx, *consumer, kind);
            }
            for (chan, producer) in &n.ins {
                if chan.discard() {
                    self.schedule(cx, *producer, TaskKind::Deferred);
                }
            }
            self.done_ops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends held packets, oldest first; whether every output is clear.
    fn flush(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize, state: &mut OperatorState) -> bool {
        let n = &self.ops[node];
        let mut clear = true;
        for (port, held) in state.held.iter_mut().enumerate() {
            if *held == 0 {
                continue;
            }
            let (consumer, _, chan) = &n.outs[port];
            let f = chan.flush_held();
            *held = f.held;
            clear &= f.held == 0;
            if f.sent {
                self.schedule(cx, *consumer, consumer_kind(n.outs.len()));
            }
        }
        clear
    }

    pub(crate) fn fail(&self, cx: &TaskCx<'_>, e: FlowError) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        drop(slot);
        cx.cancel_request();
    }

    pub(crate) fn stats(&self, elapsed: Duration) -> PlanStats {
        let mut st = PlanStats {
            operators: self.ops.len(),
            packet_bytes: self.packet_bytes,
            runs: self.runs.load(Ordering::Relaxed),
            concurrent_entries: self.concurrent_entries.load(Ordering::Relaxed),
            elapsed,
            ..PlanStats::default()
        };
        for n in &self.ops {
            st.sends.push(crate::stats::OperatorSends {
                while_inputs_open: n.sent_open.load(Ordering::Relaxed),
                after_inputs_closed: n.sent_closed.load(Ordering::Relaxed),
            });
            let high = n.state.lock().unwrap_or_else(|p| p.into_inner()).held_high;
            st.max_pending_packets = st.max_pending_packets.max(high);
            st.held_packets += n.outs.iter().map(|(_, _, c)| c.held() as u64).sum::<u64>();
            for (chan, _) in &n.ins {
                let c = chan.stats();
                st.channels.push(c);
            }
        }
        st.threads = self.thread_stats();
        st
    }

    /// The thread profile so far (`PlanBuilder::profile_threads`), None when not recorded.
    /// While the plan runs, it waits for each running operator's current run.
    pub(crate) fn thread_stats(&self) -> Option<crate::stats::ThreadStats> {
        let prof = self.profile.as_ref()?;
        let mut runs_on = Vec::new();
        let mut state_bytes = Vec::new();
        for n in &self.ops {
            let g = n.state.lock().unwrap_or_else(|p| p.into_inner());
            runs_on.push(g.runs_on.clone());
            state_bytes.push(g.state_high);
        }
        Some(crate::stats::ThreadStats {
            workers: self.workers,
            by_thread: prof.by_thread,
            communication: prof.matrix(&prof.comm),
            state_moves: prof.matrix(&prof.moved),
            runs_on,
            state_bytes,
        })
    }
}
