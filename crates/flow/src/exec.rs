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

use crate::sync::os::{Arc, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering, TryLockError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use nearflow_policy::TaskKind;
use nearflow_rt::TaskCx;

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
}

/// One operator of a running plan.
pub(crate) struct OperatorRt {
    pub(crate) name: String,
    home: Option<nearflow_rt::Home>,
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

/// An input's buffer and the operator feeding it.
type InEdge = (Arc<dyn Chan>, usize);

/// A running plan's operators and counters, shared by its tasks.
pub(crate) struct Exec {
    pub(crate) ops: Vec<OperatorRt>,
    pub(crate) packet_bytes: usize,
    pub(crate) error: Mutex<Option<FlowError>>,
    pub(crate) done_ops: AtomicUsize,
    runs: AtomicU64,
    concurrent_entries: AtomicU64,
}

impl Exec {
    pub(crate) fn new(plan: Plan, packet_bytes: usize) -> Self {
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
                home: n.home,
                sched: SchedState::new(),
                state: Mutex::new(OperatorState {
                    held: vec![0; n.outputs.len()],
                    held_high: 0,
                    op: n.op,
                    finishing: false,
                    done: false,
                    failed: false,
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
            error: Mutex::new(None),
            done_ops: AtomicUsize::new(0),
            runs: AtomicU64::new(0),
            concurrent_entries: AtomicU64::new(0),
        }
    }

    /// Moves `node` towards `SCHEDULED`; spawns its task when it was idle.
    pub(crate) fn schedule(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize, kind: TaskKind) {
        if self.ops[node].sched.schedule(kind) {
            self.spawn(cx, node, kind);
        }
    }

    fn spawn(self: &Arc<Self>, cx: &TaskCx<'_>, node: usize, kind: TaskKind) {
        let e = self.clone();
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
        if !self.flush(cx, node, &mut state) {
            return;
        }
        // Every consumer has finished (a `limit` downstream, say): nothing this operator could
        // produce is wanted, so it finishes without running again.
        if !n.outs.is_empty() && n.outs.iter().all(|(_, _, c)| c.discarding()) {
            state.finishing = true;
        }
        if !state.finishing {
            let OperatorState {
                op,
                held,
                held_high,
                ..
            } = &mut *state;
            let mut io = Io {
                exec: self,
                node,
                cx,
                held,
                held_high,
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
        if state.finishing && state.held.iter().all(|&h| h == 0) {
            state.done = true;
            for (consumer, _, chan) in &n.outs {
                chan.close();
                self.schedule(cx, *consumer, TaskKind::Immediate);
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
                self.schedule(cx, *consumer, TaskKind::Immediate);
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
        st
    }
}
