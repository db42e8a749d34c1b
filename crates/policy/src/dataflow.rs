//! The dataflow engine's scheduling rules, written once for the engine (`nearflow-flow`) and
//! the simulator (`nearflow-sim`, `plan.rs`), which both call them.
//!
//! - [`OpState`]: the four operator states of the Bobox paper (001 §3.1), as transitions. The
//!   engine applies them to one atomic (compare-and-swap loops in `flow/src/state.rs`, model-
//!   checked by loom there), the simulator to a plain field.
//! - [`consumer_kind`]: the kind of the task a producer spawns for its consumer (LAS §4).

use crate::TaskKind;

/// An operator's scheduling state (Bobox paper 001 §3.1): an operator runs on at most one
/// thread at a time and repeated scheduling collapses into one task.
///
/// | state | [`on_schedule`](Self::on_schedule) | [`on_end`](Self::on_end) of its task |
/// |---|---|---|
/// | `Nothing` | → `Scheduled`; the caller spawns a task | — |
/// | `Scheduled` | stays (collapses) | — |
/// | `Running` | → `RunningScheduled` | → `Nothing` |
/// | `RunningScheduled` | stays | → `Scheduled`; the task spawns its successor |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum OpState {
    #[default]
    Nothing = 0,
    Scheduled = 1,
    Running = 2,
    RunningScheduled = 3,
}

impl OpState {
    /// The state stored as a byte (the engine keeps it in an `AtomicU8`).
    ///
    /// # Panics
    /// On a byte no state has: the engine stores only states.
    pub fn from_u8(b: u8) -> OpState {
        match b {
            0 => OpState::Nothing,
            1 => OpState::Scheduled,
            2 => OpState::Running,
            3 => OpState::RunningScheduled,
            other => panic!("no operator state is {other}"),
        }
    }

    /// `schedule`: the new state, or `None` when the request collapses into a task that is
    /// already scheduled. Moving to `Scheduled` means the caller spawns the operator's task.
    pub fn on_schedule(self) -> Option<OpState> {
        match self {
            OpState::Nothing => Some(OpState::Scheduled),
            OpState::Running => Some(OpState::RunningScheduled),
            OpState::Scheduled | OpState::RunningScheduled => None,
        }
    }

    /// The operator's task begins: only a scheduled operator runs.
    pub fn on_begin(self) -> Result<OpState, OpState> {
        match self {
            OpState::Scheduled => Ok(OpState::Running),
            other => Err(other),
        }
    }

    /// The operator's task ends: the new state, and whether the task spawns a successor (it
    /// was scheduled while it ran).
    pub fn on_end(self) -> Result<(OpState, bool), OpState> {
        match self {
            OpState::Running => Ok((OpState::Nothing, false)),
            OpState::RunningScheduled => Ok((OpState::Scheduled, true)),
            other => Err(other),
        }
    }
}

/// The kind of an operator's successor task: immediate if any `schedule` while it ran asked
/// for an immediate task (a producer sent it data that is hot where that producer ran),
/// else deferred.
pub fn successor_kind(want_immediate: bool) -> TaskKind {
    if want_immediate {
        TaskKind::Immediate
    } else {
        TaskKind::Deferred
    }
}

/// The kind of the task a producer with `consumers` outputs spawns for a consumer when it
/// sends it a packet or ends its stream (LAS §4, the choice of a task's type):
///
/// - one consumer: the packet it was just sent is most of what the consumer's task reads,
///   hot in the producer's cache, so the task is **immediate** ("the majority of the data
///   accessed by the new task is shared with the old task");
/// - several consumers (a partition, a split: the start of parallel branches): each begins
///   "a larger portion of compact work (tasks that are expected to spawn many other tasks)",
///   which LAS §4 spawns **deferred**, "so they are more likely to be adopted by a more
///   distant core" — the branches spread over the machine instead of queueing on the
///   producer's node (LAS §6.3: "the scheduler tries to keep different
///   branches of the execution plans on different NUMA nodes").
pub fn consumer_kind(consumers: usize) -> TaskKind {
    if consumers >= 2 {
        TaskKind::Deferred
    } else {
        TaskKind::Immediate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_table() {
        use OpState::*;
        assert_eq!(Nothing.on_schedule(), Some(Scheduled));
        assert_eq!(Scheduled.on_schedule(), None);
        assert_eq!(Running.on_schedule(), Some(RunningScheduled));
        assert_eq!(RunningScheduled.on_schedule(), None);
        assert_eq!(Scheduled.on_begin(), Ok(Running));
        assert!(Nothing.on_begin().is_err() && Running.on_begin().is_err());
        assert_eq!(Running.on_end(), Ok((Nothing, false)));
        assert_eq!(RunningScheduled.on_end(), Ok((Scheduled, true)));
        assert!(Scheduled.on_end().is_err() && Nothing.on_end().is_err());
        for s in [Nothing, Scheduled, Running, RunningScheduled] {
            assert_eq!(OpState::from_u8(s as u8), s);
        }
    }

    #[test]
    fn branches_are_deferred_and_plain_edges_immediate() {
        assert_eq!(consumer_kind(1), TaskKind::Immediate);
        assert_eq!(consumer_kind(2), TaskKind::Deferred);
        assert_eq!(consumer_kind(64), TaskKind::Deferred);
        assert_eq!(successor_kind(true), TaskKind::Immediate);
        assert_eq!(successor_kind(false), TaskKind::Deferred);
    }
}
