//! The configuration of `map` ([`Config`]).

use std::path::PathBuf;

use nearflow_topo::TopologySpec;

/// Map an application's threads to PUs with StreamMap's mappers and measure the mappings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The application: vwap (Fig. 9) or lois (Fig. 10).
    pub app: String,
    /// Thread counts, comma-separated (VWAP: 1 source + N-1 workers; LOIS: 1 to 6).
    pub threads: String,
    /// The target machine (default: this host).
    pub topology: TopologySpec,
    /// treematch, treematch-s, holistic, exhaustive, or all.
    pub mapper: String,
    /// VWAP's sliding window per ticker: small (5 trades), large (75,000), or a number (§V.A).
    pub window: String,
    /// VWAP: generated ticks.
    pub ticks: u64,
    /// LOIS: generated samples (16 channels).
    pub samples: u64,
    /// Packet size in bytes (default: half the L2 of the machine the plan runs on).
    pub packet_bytes: Option<usize>,
    /// Runs per mapping; the median is reported.
    pub repeat: usize,
    /// Measure in the simulator instead of on the host (SIMULATED).
    pub simulate: bool,
    /// Print the mappings only, measure nothing.
    pub no_measure: bool,
    /// Most mappings Exhaustive may measure (it reports how many there were).
    pub max_exhaustive: usize,
    /// Use this profile (JSON, from --profile-out) instead of a profiling run.
    pub profile: Option<PathBuf>,
    /// Save the profile of the first thread count as JSON.
    pub profile_out: Option<PathBuf>,
    /// No progress bars on stderr.
    pub quiet: bool,
    /// Re-map while running (beyond the paper): VWAP whose windows switch from 5 to 75,000
    /// trades halfway, on this host, beside the same run keeping its first mapping.
    pub online: bool,
    /// --online: how often the monitor looks at the running profile.
    pub period_ms: u64,
    /// --online: move only when the predicted cost drops by more than this fraction.
    pub margin: f64,
}
