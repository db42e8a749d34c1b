//! `nearflow map`: StreamMap's workflow (`streammap-cache-topology-mapping.txt` §IV.A, Fig. 7),
//! run by `nearflow_lab::map`: profile the application once, compute each mapper's
//! thread-to-PU mapping for the target machine, and measure them beside the OS default, a
//! random mapping and Exhaustive's best and worst, on the host or `--simulate`d.

use std::path::PathBuf;

use anyhow::Result;
use nearflow_lab::map;

use crate::report::print_report;
use nearflow_cli::args::TopoArgs;

/// Maps, measures and prints.
pub fn run(cmd: &MapCmd) -> Result<()> {
    print_report(&map::run(&cmd.config()?)?, cmd.json)
}

#[derive(clap::Args, Debug)]
pub struct MapCmd {
    /// The application: vwap (Fig. 9) or lois (Fig. 10).
    #[arg(long, default_value = "vwap")]
    pub app: String,
    /// Thread counts, comma-separated (VWAP: 1 source + N-1 workers; LOIS: 1 to 6).
    #[arg(long, default_value = "4")]
    pub threads: String,
    /// The target machine (default: this host).
    #[command(flatten)]
    pub topo: TopoArgs,
    /// treematch, treematch-s, holistic, exhaustive, or all.
    #[arg(long, default_value = "all")]
    pub mapper: String,
    /// VWAP's sliding window per ticker: small (5 trades), large (75,000), or a number (§V.A).
    #[arg(long, default_value = "small")]
    pub window: String,
    /// VWAP: generated ticks.
    /// Range: 1..=1e10.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 10_000_000_000), long, default_value_t = 2_000_000)]
    pub ticks: u64,
    /// LOIS: generated samples (16 channels).
    /// Range: 1..=1e10.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 10_000_000_000), long, default_value_t = 1_000_000)]
    pub samples: u64,
    /// Packet size in bytes (default: half the L2 of the machine the plan runs on).
    /// Range: 64..=1 GiB.
    #[arg(value_parser = nearflow_cli::args::int_in(64usize, 1 << 30), long)]
    pub packet_bytes: Option<usize>,
    /// Runs per mapping; the median is reported.
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 3)]
    pub repeat: usize,
    /// Measure in the simulator instead of on the host (SIMULATED).
    #[arg(long)]
    pub simulate: bool,
    /// Print the mappings only, measure nothing.
    #[arg(long)]
    pub no_measure: bool,
    /// Most mappings Exhaustive may measure (it reports how many there were).
    /// Range: 1..=1e9.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1_000_000_000), long, default_value_t = 200)]
    pub max_exhaustive: usize,
    /// Use this profile (JSON, from --profile-out) instead of a profiling run.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Save the profile of the first thread count as JSON.
    #[arg(long, value_name = "FILE")]
    pub profile_out: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Re-map while running (beyond the paper): VWAP whose windows switch from 5 to 75,000
    /// trades halfway, on this host, beside the same run keeping its first mapping.
    #[arg(long)]
    pub online: bool,
    /// --online: how often the monitor looks at the running profile.
    /// Range: 1..=60000.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 60_000), long, default_value_t = 50)]
    pub period_ms: u64,
    /// --online: move only when the predicted cost drops by more than this fraction.
    /// Range: 0..=10.
    #[arg(value_parser = nearflow_cli::args::real_in(0.0, 10.0), long, default_value_t = 0.10)]
    pub margin: f64,
}

impl MapCmd {
    fn config(&self) -> Result<map::Config> {
        Ok(map::Config {
            app: self.app.clone(),
            threads: self.threads.clone(),
            topology: self.topo.spec()?,
            mapper: self.mapper.clone(),
            window: self.window.clone(),
            ticks: self.ticks,
            samples: self.samples,
            packet_bytes: self.packet_bytes,
            repeat: self.repeat,
            simulate: self.simulate,
            no_measure: self.no_measure,
            max_exhaustive: self.max_exhaustive,
            profile: self.profile.clone(),
            profile_out: self.profile_out.clone(),
            quiet: self.json,
            online: self.online,
            period_ms: self.period_ms,
            margin: self.margin,
        })
    }
}
