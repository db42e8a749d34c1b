//! The four operator states of 001 §3.1 as one atomic, so that an operator runs on at most one
//! thread at a time and repeated scheduling collapses into one task. The transitions (the
//! table) are [`OpState`]'s, in `nearflow-policy`, which the simulator applies too; this file
//! makes them atomic.
//!
//! Invariants (model-checked by loom below): at most one task of an operator exists at a time;
//! what a scheduler published before `schedule` is seen by a run that begins after it (no
//! schedule is lost); when every task has ended, the state is `NOTHING`.
//!
//! The second invariant needs the data to be published **under a lock** the operator's run also
//! takes (the engine's input buffers are mutexes): a scheduler that finds `SCHEDULED` only
//! *loads* the state, so a plain atomic store before it would not be ordered before the run
//! (the store-buffering pattern). Loom found exactly that when the model published with an
//! atomic counter; the model now publishes as the engine does.

use crate::sync::{AtomicBool, AtomicU8, Ordering};

use nearflow_policy::dataflow::{successor_kind, OpState};
use nearflow_policy::TaskKind;

const NOTHING: u8 = OpState::Nothing as u8;
const SCHEDULED: u8 = OpState::Scheduled as u8;
const RUNNING: u8 = OpState::Running as u8;

pub(crate) struct SchedState {
    state: AtomicU8,
    /// Some `schedule` since the task began asked for an immediate task.
    want_immediate: AtomicBool,
}

impl SchedState {
    pub(crate) fn new() -> Self {
        SchedState {
            state: AtomicU8::new(NOTHING),
            want_immediate: AtomicBool::new(false),
        }
    }

    /// Moves towards `SCHEDULED`; returns true when the caller must spawn the operator's task.
    pub(crate) fn schedule(&self, kind: TaskKind) -> bool {
        if kind == TaskKind::Immediate {
            // Relaxed: only chooses the kind of the next task; no data depends on it.
            self.want_immediate.store(true, Ordering::Relaxed);
        }
        // Acquire: pairs with the Release/AcqRel writes of `begin` and `end`.
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            let Some(next) = OpState::from_u8(s).on_schedule() else {
                return false;
            };
            let next = next as u8;
            // AcqRel: the task that sees the new state also sees what was sent before it.
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return next == SCHEDULED,
                Err(now) => s = now,
            }
        }
    }

    /// The operator's task begins.
    pub(crate) fn begin(&self) {
        // AcqRel: acquires the `schedule` CAS that made it SCHEDULED (and what was sent before);
        // releases to the schedulers that will see RUNNING.
        let prev = self.state.swap(RUNNING, Ordering::AcqRel);
        debug_assert_eq!(
            OpState::from_u8(prev).on_begin(),
            Ok(OpState::Running),
            "a task runs only a scheduled operator"
        );
        // Relaxed: see `schedule`.
        self.want_immediate.store(false, Ordering::Relaxed);
    }

    /// The operator's task ends; `Some(kind)` when it was scheduled meanwhile and the caller
    /// must spawn the next task, of that kind.
    pub(crate) fn end(&self) -> Option<TaskKind> {
        // AcqRel: releases the run's effects to the next `schedule`; on failure, acquires the
        // CAS of the `schedule` that made it RUNNING_SCHEDULED.
        match self
            .state
            .compare_exchange(RUNNING, NOTHING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => None,
            Err(now) => {
                // RUNNING failed, so the state is RUNNING_SCHEDULED: → SCHEDULED, a successor.
                let end = OpState::from_u8(now).on_end();
                debug_assert_eq!(
                    end,
                    Ok((OpState::Scheduled, true)),
                    "operator state {now} while running"
                );
                // Release: pairs with the successor task's `begin` swap.
                self.state.store(SCHEDULED, Ordering::Release);
                Some(successor_kind(
                    self.want_immediate.swap(false, Ordering::Relaxed),
                ))
            }
        }
    }

    #[cfg(any(test, loom))]
    fn is_idle(&self) -> bool {
        self.state.load(Ordering::Acquire) == NOTHING
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn repeated_scheduling_collapses_and_reruns_once() {
        let s = SchedState::new();
        assert!(s.schedule(TaskKind::Deferred));
        assert!(!s.schedule(TaskKind::Immediate), "already scheduled");
        s.begin();
        assert!(
            !s.schedule(TaskKind::Immediate),
            "running: marked, no new task"
        );
        assert!(!s.schedule(TaskKind::Deferred));
        assert_eq!(s.end(), Some(TaskKind::Immediate));
        s.begin();
        assert_eq!(s.end(), None);
        assert!(s.is_idle());
    }
}

#[cfg(loom)]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::{Arc, Mutex};

    struct Model {
        op: SchedState,
        /// A thread is inside the operator.
        inside: AtomicBool,
        /// Packets sent: each scheduler adds one under the lock before `schedule`, as a
        /// producer pushes to an input buffer.
        sent: Mutex<usize>,
        /// The largest `scheduled` seen at the start of a run.
        seen: AtomicUsize,
        runs: AtomicUsize,
    }

    /// Runs the operator as the runtime would: the spawner runs the task it spawned, and the
    /// task's successor after it.
    fn run_tasks(m: &Model) {
        loop {
            m.op.begin();
            assert!(
                !m.inside.swap(true, Ordering::AcqRel),
                "operator entered twice"
            );
            let sent = *m.sent.lock().unwrap();
            m.seen.fetch_max(sent, Ordering::AcqRel);
            m.runs.fetch_add(1, Ordering::Relaxed);
            m.inside.store(false, Ordering::Release);
            if m.op.end().is_none() {
                return;
            }
        }
    }

    fn schedule(m: &Model, kind: TaskKind) {
        *m.sent.lock().unwrap() += 1;
        if m.op.schedule(kind) {
            run_tasks(m);
        }
    }

    #[test]
    fn loom_operator_states_lose_no_schedule_and_never_overlap() {
        loom::model(|| {
            let m = Arc::new(Model {
                op: SchedState::new(),
                inside: AtomicBool::new(false),
                sent: Mutex::new(0),
                seen: AtomicUsize::new(0),
                runs: AtomicUsize::new(0),
            });
            let threads: Vec<_> = [TaskKind::Immediate, TaskKind::Deferred]
                .into_iter()
                .map(|kind| {
                    let m = m.clone();
                    loom::thread::spawn(move || schedule(&m, kind))
                })
                .collect();
            schedule(&m, TaskKind::Immediate);
            for t in threads {
                t.join().unwrap();
            }
            assert!(m.op.is_idle(), "every task ended, so the operator is idle");
            assert_eq!(
                m.seen.load(Ordering::Acquire),
                3,
                "a run saw every packet sent"
            );
            assert!(m.runs.load(Ordering::Relaxed) >= 1);
        });
    }
}
