//! [`PlanStats`]: the counters of one plan run.

use std::time::Duration;

use crate::channel::ChanStats;

/// Counters of one plan run; exact after [`PlanHandle::wait`](crate::PlanHandle::wait).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PlanStats {
    /// Operators in the plan.
    pub operators: usize,
    /// The packet size the plan ran with, in bytes (its own setting, or the runtime machine's
    /// default, [`default_packet_bytes`](crate::default_packet_bytes)).
    pub packet_bytes: usize,
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
    /// Packets each operator produced, before and after its inputs ended, by operator.
    pub sends: Vec<OperatorSends>,
    /// Wall time from submission to completion.
    #[serde(serialize_with = "ser_secs")]
    pub elapsed: Duration,
    /// Who talked to whom, when the plan was built with
    /// [`PlanBuilder::profile_threads`](crate::PlanBuilder::profile_threads).
    pub threads: Option<ThreadStats>,
}

/// A plan run's profile (StreamMap's profiling run, `streammap-cache-topology-mapping.txt`
/// §IV.B). The matrices are per application thread when the plan has threads
/// ([`PlanBuilder::on_thread`](crate::PlanBuilder::on_thread); `by_thread`), else per worker;
/// row = from.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ThreadStats {
    /// Workers of the runtime (the length of each `runs_on`).
    pub workers: usize,
    /// Whether the matrices are by thread (else by worker).
    pub by_thread: bool,
    /// Bytes of tuples sent by `i` to operators run by `j`. An operator without a thread
    /// counts as run by the thread that delivers to it.
    pub communication: Vec<Vec<u64>>,
    /// Bytes of operator state that moved from `i` to `j`: each time an operator ran by `j`
    /// after its previous run by `i`, its state size then.
    pub state_moves: Vec<Vec<u64>>,
    /// Per operator: its runs on each worker.
    pub runs_on: Vec<Vec<u64>>,
    /// Per operator: the largest state it reported ([`Operator::state_bytes`](crate::Operator::state_bytes)).
    pub state_bytes: Vec<usize>,
}

/// When an operator produced its packets (see [`PlanStats::sends`]). A source has no inputs, so
/// all its packets count as produced while its inputs are open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OperatorSends {
    pub while_inputs_open: u64,
    pub after_inputs_closed: u64,
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
