//! Submitting a plan ([`Plan::submit`]) and what comes back: [`PlanHandle`] while it runs,
//! [`PlanOutput`] when it has ended.

use crate::sync::os::{Arc, Ordering};
use std::time::Instant;

use nearflow_policy::{RequestId, TaskKind};
use nearflow_rt::{RequestError, RequestHandle, Runtime};

use crate::error::FlowError;
use crate::exec::Exec;
use crate::packet::default_packet_bytes;
use crate::plan::{Plan, Sink, SinkSlot};
use crate::stats::PlanStats;

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
    /// Takes what a collecting sink gathered (in arrival order); empty if taken before, or if
    /// `sink` belongs to another plan.
    pub fn take<T: Send + 'static>(&self, sink: &Sink<T>) -> Vec<T> {
        let ours = self
            .sinks
            .get(sink.slot)
            .is_some_and(|c| std::ptr::addr_eq(Arc::as_ptr(c), Arc::as_ptr(&sink.cell)));
        if !ours {
            return Vec::new();
        }
        sink.cell
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
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
        self.exec.ops.iter().map(|n| n.name.clone()).collect()
    }

    /// Moves the plan's threads while it runs (online re-mapping, beyond StreamMap's §IV.A):
    /// thread `t`'s operators (and those it alone feeds) send their next tasks to PU `pus[t]`
    /// under the `pinned` policy. A task already queued runs where it was queued; the
    /// operator's state follows it to the new PU at its next run.
    pub fn remap(&self, pus: &[usize]) -> Result<(), crate::PlanError> {
        let e = &self.exec;
        if pus.len() != e.threads {
            return Err(crate::PlanError::Setting(format!(
                "a mapping of {} threads given for a plan with {}",
                pus.len(),
                e.threads
            )));
        }
        if let Some(&p) = pus.iter().find(|&&p| p >= e.workers) {
            return Err(crate::PlanError::Setting(format!(
                "bad mapping: PU {p} does not exist (the machine has {})",
                e.workers
            )));
        }
        for (i, t) in e.threads_of.iter().enumerate() {
            if let Some(t) = t {
                e.pin(i, Some(pus[*t]));
            }
        }
        Ok(())
    }

    /// Each operator's thread once mapped (`PlanShape::effective_threads`): what
    /// [`remap`](Self::remap) moves.
    pub fn threads_of(&self) -> Vec<Option<usize>> {
        self.exec.threads_of.clone()
    }

    /// The thread profile so far, when the plan records one
    /// ([`PlanBuilder::profile_threads`](crate::PlanBuilder::profile_threads)); the counters
    /// only grow, so the difference of two snapshots is what happened in between.
    pub fn profile_now(&self) -> Option<crate::ThreadStats> {
        self.exec.thread_stats()
    }

    /// Whether the plan has ended (completed, failed or cancelled): [`wait`](Self::wait) then
    /// returns at once.
    pub fn is_done(&self) -> bool {
        self.req.is_done()
    }

    /// Charges `bytes` that the plan's consumer holds of its output (`what` names them in the
    /// error) against the plan's memory limit, on the same count as its operators' state: the
    /// limit bounds the operators and the held output together, and an operator that asks for
    /// more once the output fills the limit is stopped. Past the limit it returns
    /// [`FlowError::MemoryLimit`] (nothing is charged; the caller cancels the plan).
    pub fn charge_held(&self, what: &str, bytes: usize) -> Result<(), FlowError> {
        self.exec.charge_as(|| what.to_owned(), bytes)
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
        if self.exec.done_ops.load(Ordering::Relaxed) != self.exec.ops.len() {
            let unfinished = self
                .exec
                .ops
                .iter()
                .filter(|n| !n.state.lock().map(|c| c.done).unwrap_or(false))
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
        let exec = Arc::new(Exec::new(self, packet_bytes, rt.workers()));
        let sources: Vec<usize> = (0..exec.ops.len())
            .filter(|&i| exec.ops[i].ins.is_empty())
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
