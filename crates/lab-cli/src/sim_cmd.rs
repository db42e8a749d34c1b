//! `nearflow sim`: a workload on a model of a machine, under several policies, in the
//! discrete-event simulator (`nearflow_lab::sim`). Every figure it prints is SIMULATED.
//! `--validate` (on this host's topology only) also runs the very same work on the real
//! runtime and prints measured against simulated makespans.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use nearflow_lab::sim::{self, Workload};
use nearflow_rdf::open::Source;

use crate::report::print_report;
use nearflow_cli::args::{StorePlacementArg, TopoArgs};

/// Simulates and prints.
pub fn run(cmd: &SimCmd) -> Result<()> {
    if cmd.las_figures {
        let fig = sim::figures::FiguresConfig {
            models_dir: cmd.models_dir.clone(),
            chart: cmd.chart.clone(),
        };
        return print_report(&sim::figures::las(&cmd.config()?, &fig)?, cmd.json);
    }
    if cmd.models_dir.is_some() || cmd.chart.is_some() {
        anyhow::bail!("--models-dir and --chart go with --las-figures");
    }
    print_report(&sim::run(&cmd.config()?)?, cmd.json)
}

#[derive(Args, Debug)]
pub struct SimCmd {
    #[command(flatten)]
    pub topo: TopoArgs,
    /// What runs.
    #[arg(long, value_enum, default_value = "pipeline")]
    pub workload: Workload,
    /// Grid of NxM entries: N·M requests at once (matmul ignores it: one request).
    #[arg(long, default_value = "1x1,4x4")]
    pub grid: String,
    /// Policies (comma-separated).
    #[arg(long, default_value = "las,nls,bobox2011,fifo-rr")]
    pub policies: String,
    /// Allocators of written blocks (comma-separated: nearflow, system).
    #[arg(long, default_value = "nearflow")]
    pub allocators: String,
    /// Size of the workload (see --workload); default per workload.
    /// Range: 1..=1048576.
    #[arg(value_parser = nearflow_cli::args::int_in(1u32, 1 << 20), long)]
    pub size: Option<u32>,
    /// Pipeline: packets per request.
    /// Range: 1..=1e6.
    #[arg(value_parser = nearflow_cli::args::int_in(1u32, 1_000_000), long, default_value_t = 64)]
    pub packets: u32,
    /// Pipeline: operators after the source.
    /// Range: 1..=10000.
    #[arg(value_parser = nearflow_cli::args::int_in(1u32, 10_000), long, default_value_t = 6)]
    pub operators: u32,
    /// Pipeline: packet size (default: half the L2 of the machine, as the engine's).
    /// Range: 64..=1 GiB.
    #[arg(value_parser = nearflow_cli::args::int_in(64u64, 1 << 30), long, value_name = "BYTES")]
    pub packet_bytes: Option<u64>,
    /// Pipeline: work per packet byte per operator, in ns.
    /// Range: 0..=1000.
    #[arg(value_parser = nearflow_cli::args::real_in(0.0, 1000.0), long, default_value_t = 0.5)]
    pub ns_per_byte: f64,
    /// Pipeline: each request's input on its own node (spawned homed) instead of on node 0.
    #[arg(long)]
    pub homed_input: bool,
    /// Plans: rows per source of the generated plan.
    /// Range: 1..=1e9.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 1_000_000_000), long, default_value_t = 20_000)]
    pub rows: u64,
    /// VWAP: ticks generated (as `run vwap`).
    /// Range: 1..=1e9.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 1_000_000_000), long, default_value_t = 200_000)]
    pub ticks: u64,
    /// VWAP: branches the stream is split into.
    /// Range: 1..=64.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 64), long, default_value_t = 4)]
    pub branches: usize,
    /// SP²Bench: queries (file names without `.sparql`, see `bench sp2bench --queries-dir`).
    #[arg(long, default_value = "q2,q4")]
    pub queries: String,
    /// SP²Bench: where the query files are (default: as `bench sp2bench`).
    #[arg(long, value_name = "DIR")]
    pub queries_dir: Option<PathBuf>,
    /// SP²Bench: copies of each query at once (comma-separated); replaces `--grid`.
    #[arg(long, default_value = "1,16")]
    pub concurrent: String,
    /// SP²Bench: where the simulated store's data lies: `partitioned` (each permutation
    /// split by key range over the nodes, scans homed there) or `replicated` (every node holds
    /// every permutation, each scan reads its node's replica), as `sparql --store-placement`
    /// builds them.
    #[arg(long, value_enum, default_value = "partitioned")]
    pub store_placement: StorePlacementArg,
    /// SP²Bench: RDF files to load (as `sparql --data`), instead of generated data.
    #[arg(
        long,
        value_name = "FILE[,FILE…]",
        value_delimiter = ',',
        conflicts_with = "store"
    )]
    pub data: Vec<PathBuf>,
    /// SP²Bench: a store snapshot (`nearflow load … --save`), instead of generated data.
    #[arg(long, value_name = "STORE")]
    pub store: Option<PathBuf>,
    /// SP²Bench: triples to generate (`gen sp2bench`, seed 1) when no `--data` or `--store`.
    /// Range: 1..=1e9.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 1_000_000_000), long, default_value_t = 50_000)]
    pub triples: u64,
    /// Ferret: the database's size in bytes (default: `bench split`'s 50,000 vectors of 64
    /// floats).
    /// Range: 1..=1 TiB.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 1 << 40), long, default_value_t = 12_800_000)]
    pub db_bytes: u64,
    /// Task work in ns (fib, fanout, stress).
    /// Range: 0..=1e9.
    #[arg(value_parser = nearflow_cli::args::real_in(0.0, 1e9), long, default_value_t = 200.0)]
    pub work_ns: f64,
    /// Seed (random stealing, stress trees).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Change a model constant: KEY=VALUE (repeatable; keys in crates/sim/src/model.rs).
    #[arg(long, value_name = "KEY=VALUE")]
    pub model: Vec<String>,
    /// Plan workloads: use the plan models saved with --save-models instead of calibrating
    /// again (runs compared across commands then share one model).
    #[arg(long, value_name = "FILE")]
    pub models: Option<PathBuf>,
    /// Plan workloads: save the calibrated plan models to this file (JSON).
    #[arg(long, value_name = "FILE")]
    pub save_models: Option<PathBuf>,
    /// Also write the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write a per-PU timeline (SVG, as `run --trace`) of each simulated run: FILE itself for
    /// one run, else FILE's stem followed by -GRID-POLICY[-ALLOCATOR].svg.
    #[arg(long, value_name = "FILE.svg")]
    pub trace: Option<PathBuf>,
    /// Print every report as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// Also run each graph on the real runtime of this host and compare (host topology only).
    #[arg(long)]
    pub validate: bool,
    /// Rounds of the real runs of --validate (median reported).
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 5)]
    pub reps: usize,
    /// The LAS paper's §6.2–6.4 (Figs. 5–10) in one command: its eight queries ×1 and ×16, LAS
    /// against NLS and the nearflow against the system allocator, on e5310-smp and e7-4820
    /// (SIMULATED), each cell beside the paper's result and counted only where the same plans
    /// validate on this host within 20 %. It sets the queries, copies, policies, allocators
    /// and machines itself; data (--triples, --data, --store), --packet-bytes, --reps and
    /// --model apply.
    #[arg(long)]
    pub las_figures: bool,
    /// With --las-figures: read each machine's plan models from DIR/PRESET.json, or calibrate
    /// and save them there (reruns then compare one model).
    #[arg(long, value_name = "DIR")]
    pub models_dir: Option<PathBuf>,
    /// With --las-figures: draw one chart per machine, PREFIX-PRESET.svg.
    #[arg(long, value_name = "PREFIX.svg")]
    pub chart: Option<PathBuf>,
}

impl SimCmd {
    fn config(&self) -> Result<sim::Config> {
        Ok(sim::Config {
            topology: self.topo.spec()?,
            workload: self.workload,
            grid: self.grid.clone(),
            policies: self.policies.clone(),
            allocators: self.allocators.clone(),
            size: self.size,
            packets: self.packets,
            operators: self.operators,
            packet_bytes: self.packet_bytes,
            ns_per_byte: self.ns_per_byte,
            homed_input: self.homed_input,
            rows: self.rows,
            ticks: self.ticks,
            branches: self.branches,
            queries: self.queries.clone(),
            queries_dir: self.queries_dir.clone(),
            concurrent: self.concurrent.clone(),
            source: match (&self.store, self.data.is_empty()) {
                (Some(p), _) => Some(Source::Snapshot(p.clone())),
                (None, false) => Some(Source::Files(self.data.clone(), Default::default())),
                (None, true) => None,
            },
            triples: self.triples,
            store_placement: self.store_placement.into(),
            db_bytes: self.db_bytes,
            work_ns: self.work_ns,
            seed: self.seed,
            model: self.model.clone(),
            models: self.models.clone(),
            save_models: self.save_models.clone(),
            csv: self.csv.clone(),
            trace: self.trace.clone(),
            quiet: self.json,
            validate: self.validate,
            reps: self.reps,
        })
    }
}
