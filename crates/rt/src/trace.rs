//! Task timeline recording (off by default).
//!
//! When a runtime is built with [`Builder::trace`](crate::Builder::trace), each worker appends
//! one [`TraceEvent`] per task it runs to a buffer of its own. The buffer's lock is taken only by
//! its owner while it runs and by [`Runtime::take_trace`](crate::Runtime::take_trace), so
//! recording costs four clock reads (wall and thread CPU time, at start and end) and an
//! uncontended lock per task. A task may name what it does with
//! [`TaskCx::set_label`](crate::TaskCx::set_label); the dataflow engine puts the operator's
//! index there.
//!
//! The thread CPU time lets a trace measure a task's own work where the wall time does not: on
//! an oversubscribed pool (a 64-PU preset on a 2-core host) a task that is preempted halfway
//! takes longer by the wall clock, not by its thread's clock.

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
    /// CPU time its thread spent in it, ns (`CLOCK_THREAD_CPUTIME_ID`); equal to
    /// `end_ns - start_ns` where the platform has no thread clock.
    pub cpu_ns: u64,
}

/// The calling thread's CPU time, ns; `None` where the platform has no thread clock.
pub(crate) fn thread_cpu_ns() -> Option<u64> {
    #[cfg(all(target_os = "linux", not(miri), not(loom)))]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the call's duration.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc == 0 {
            return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
        }
    }
    None
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
