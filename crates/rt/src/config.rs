//! The runtime's settings that are plain values: how threads are bound ([`Pinning`]), which
//! allocator the workers use ([`AllocatorKind`](crate::AllocatorKind), re-exported from `nearflow-alloc`) and which barriers the sleep protocol uses
//! ([`SleepBarriers`]).

use std::fmt;
use std::str::FromStr;

/// How worker threads are bound to PUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pinning {
    /// Each thread to the cpuset of its core group (LAS §4.1).
    #[default]
    Group,
    /// Each thread to its home PU.
    Pu,
    /// No binding.
    None,
}

impl FromStr for Pinning {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "group" => Ok(Pinning::Group),
            "pu" => Ok(Pinning::Pu),
            "none" => Ok(Pinning::None),
            _ => Err(format!("unknown pinning `{s}`; expected group, pu or none")),
        }
    }
}

impl fmt::Display for Pinning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pinning::Group => "group",
            Pinning::Pu => "pu",
            Pinning::None => "none",
        })
    }
}

/// The pair of store–load barriers of the sleep protocol (`sleep/README.md`, "Barriers"): one
/// on every spawn, between the push and the check for sleepers, and one when a worker registers
/// to sleep, between its registration and its last look at the queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SleepBarriers {
    /// A `SeqCst` fence on both sides, as rayon, tokio and crossbeam do.
    Fence,
    /// No fence instruction on a spawn; `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` when a
    /// worker goes to sleep, which interrupts every running thread of the process. Linux ≥ 4.14
    /// only: where the kernel refuses it, the runtime uses [`Fence`](SleepBarriers::Fence) and
    /// [`Runtime::asymmetric_barriers`](crate::Runtime::asymmetric_barriers) says so.
    Membarrier,
}

impl SleepBarriers {
    /// Both, for experiments.
    pub const ALL: [SleepBarriers; 2] = [SleepBarriers::Fence, SleepBarriers::Membarrier];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            SleepBarriers::Fence => "fence",
            SleepBarriers::Membarrier => "membarrier",
        }
    }

    /// The choice of a builder that makes none: `NEARFLOW_MEMBARRIER=0` selects
    /// [`Fence`](SleepBarriers::Fence), anything else (or nothing)
    /// [`Membarrier`](SleepBarriers::Membarrier). Membarrier is the default because spawns are
    /// far more frequent than sleeps in task-parallel code: a spawn's fence cost about 3.5 ns of
    /// a 36 ns chained task on the KVM guests of `docs/results.md`.
    /// `Fence` suits processes where workers sleep far more often than they spawn, or where
    /// other latency-sensitive threads run: each sleep's `membarrier` interrupts every running
    /// thread of the process, which cost about 10 µs per sleep on those guests.
    pub fn from_env() -> SleepBarriers {
        match std::env::var_os("NEARFLOW_MEMBARRIER") {
            Some(v) if v == "0" => SleepBarriers::Fence,
            _ => SleepBarriers::Membarrier,
        }
    }
}

impl fmt::Display for SleepBarriers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SleepBarriers {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fence" => Ok(SleepBarriers::Fence),
            "membarrier" => Ok(SleepBarriers::Membarrier),
            _ => Err(format!(
                "unknown sleep barriers {s:?} (expected fence or membarrier)"
            )),
        }
    }
}
