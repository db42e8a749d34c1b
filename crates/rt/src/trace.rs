//! Task timeline recording (off by default).
//!
//! When a runtime is built with [`Builder::trace`](crate::Builder::trace), each worker appends
//! one [`TraceEvent`] per task it runs to a buffer of its own. The buffer's lock is taken only by
//! its owner while it runs and by [`Runtime::take_trace`](crate::Runtime::take_trace), so
//! recording costs two clock reads and an uncontended lock per task. A task may name what it
//! does with [`TaskCx::set_label`](crate::TaskCx::set_label); the dataflow engine puts the
//! operator's index there.

use std::time::Instant;

use nearflow_policy::RequestId;

use crate::sync::os::Mutex;

/// The label of a task that set none.
pub const NO_LABEL: u32 = u32::MAX;

/// One task, as run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TraceEvent {
    /// The worker (= home PU) that ran it.
    pub worker: usize,
    /// Its request.
    pub request: RequestId,
    /// What the task set with `TaskCx::set_label`, or [`NO_LABEL`].
    pub label: u32,
    /// Start and end, in nanoseconds since the runtime started.
    pub start_ns: u64,
    /// End; see `start_ns`.
    pub end_ns: u64,
}

pub(crate) struct Trace {
    epoch: Instant,
    per_worker: Vec<Mutex<Vec<TraceEvent>>>,
}

impl Trace {
    pub(crate) fn new(workers: usize) -> Self {
        Trace {
            epoch: Instant::now(),
            per_worker: (0..workers).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub(crate) fn record(&self, ev: TraceEvent) {
        let mut v = self.per_worker[ev.worker]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        v.push(ev);
    }

    /// Takes every event recorded so far, ordered by start time.
    pub(crate) fn take(&self) -> Vec<TraceEvent> {
        let mut all = Vec::new();
        for b in &self.per_worker {
            all.append(&mut b.lock().unwrap_or_else(|p| p.into_inner()));
        }
        all.sort_by_key(|e| (e.start_ns, e.worker));
        all
    }
}
