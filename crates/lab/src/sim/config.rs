//! The configuration of a simulation ([`Config`]) and its workloads ([`Workload`]).

use std::path::PathBuf;

use nearflow_topo::TopologySpec;

use nearflow_rdf::open::Source;

/// What runs in the simulator (its doc comments are `nearflow-lab sim --workload`'s help).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Requests of packets through a chain of operators (`--grid NxM`: N·M requests).
    Pipeline,
    /// Fork-join Fibonacci, `--size` = n (bench overhead's fib), one request per grid cell.
    Fib,
    /// One task spawning `--size` deferred tasks (bench overhead's fan-out), per request.
    Fanout,
    /// The queue study's matrix product, `--size` = n (load-balancing-queues.txt §III).
    Matmul,
    /// Random spawn trees of `--size` tasks (nearflow stress), per request.
    Stress,
    /// `bench split`'s similarity search, plain: `--size` queries per request over a
    /// `--db-bytes` database built on node 0 (256 chunks, 16 ranked per query, 0.25 ns/B).
    FerretPlain,
    /// The same queries over the database split per node (SplittableData), one homed task per
    /// partition a query reads.
    FerretSplit,
    /// The generated plan of `bench plans` (`--rows` per source), its operators' costs
    /// calibrated from a traced run on this host; `--grid NxM`: N·M plans at once.
    Plans,
    /// The VWAP plan of `run vwap` (`--ticks`, `--branches`), calibrated from a traced run on
    /// this host as `plans` is; `--grid NxM`: N·M plans at once.
    Vwap,
    /// SP²Bench query plans (`--queries`, `--concurrent` copies at once), each calibrated from
    /// a traced run of the SPARQL engine on a runtime of the simulated machine (on this host,
    /// oversubscribed where that machine is larger), over `--data`, `--store` or `--triples`
    /// generated ones.
    Sp2bench,
}

/// Where the simulated store's data lies: the engine's placements
/// ([`nearflow_rdf::open::StorePlacement`]), modelled.
pub use nearflow_rdf::open::StorePlacement;

#[derive(Debug, Clone)]
pub struct Config {
    /// The machine (default: this host).
    pub topology: TopologySpec,
    /// What runs.
    pub workload: Workload,
    /// Grid of NxM entries: N·M requests at once (matmul ignores it: one request).
    pub grid: String,
    /// Policies (comma-separated).
    pub policies: String,
    /// Allocators of written blocks (comma-separated: nearflow, system).
    pub allocators: String,
    /// Size of the workload (see --workload); default per workload.
    pub size: Option<u32>,
    /// Pipeline: packets per request.
    pub packets: u32,
    /// Pipeline: operators after the source.
    pub operators: u32,
    /// Pipeline: packet size (default: half the L2 of the machine, as the engine's).
    pub packet_bytes: Option<u64>,
    /// Pipeline: work per packet byte per operator, in ns.
    pub ns_per_byte: f64,
    /// Pipeline: each request's input on its own node (spawned homed) instead of on node 0.
    pub homed_input: bool,
    /// Plans: rows per source of the generated plan.
    pub rows: u64,
    /// VWAP: ticks generated (as `run vwap`).
    pub ticks: u64,
    /// VWAP: branches the stream is split into.
    pub branches: usize,
    /// SP²Bench: queries (file names without `.sparql`, see `bench sp2bench --queries-dir`).
    pub queries: String,
    /// SP²Bench: where the query files are (default: as `bench sp2bench`).
    pub queries_dir: Option<PathBuf>,
    /// SP²Bench: copies of each query at once (comma-separated); replaces `--grid`.
    pub concurrent: String,
    /// SP²Bench: RDF files or a snapshot to load instead of generated data.
    pub source: Option<Source>,
    /// SP²Bench: triples to generate (`gen sp2bench`, seed 1) when no `--data` or `--store`.
    pub triples: u64,
    /// SP²Bench: where the store's data lies in the simulated machine.
    pub store_placement: StorePlacement,
    /// Ferret: the database's size in bytes (default: `bench split`'s 50,000 vectors of 64
    /// floats).
    pub db_bytes: u64,
    /// Task work in ns (fib, fanout, stress).
    pub work_ns: f64,
    /// Seed (random stealing, stress trees).
    pub seed: u64,
    /// Change a model constant: KEY=VALUE (repeatable; keys in crates/sim/src/model.rs).
    pub model: Vec<String>,
    /// Plan workloads: use the calibrated plan models saved in this file (`save_models`) instead
    /// of calibrating again, so that runs compared across commands share one model (a
    /// calibration measures this host, which is noisy).
    pub models: Option<PathBuf>,
    /// Plan workloads: save the calibrated plan models to this file (JSON).
    pub save_models: Option<PathBuf>,
    /// Also write the table as CSV to this file.
    pub csv: Option<PathBuf>,
    /// Write a per-PU timeline (SVG, as `run --trace`) of each simulated run: FILE itself for
    /// one run, else FILE's stem followed by -GRID-POLICY[-ALLOCATOR].svg.
    pub trace: Option<PathBuf>,
    /// No progress bars on stderr.
    pub quiet: bool,
    /// Also run each graph on the real runtime of this host and compare (host topology only).
    pub validate: bool,
    /// Rounds of the real runs of --validate (median reported).
    pub reps: usize,
}

impl Default for Config {
    /// The defaults of `nearflow sim`: the pipeline on this host, 1x1 and 4x4, four policies.
    fn default() -> Config {
        Config {
            topology: TopologySpec::Host,
            workload: Workload::Pipeline,
            grid: "1x1,4x4".into(),
            policies: "las,nls,bobox2011,fifo-rr".into(),
            allocators: "nearflow".into(),
            size: None,
            packets: 64,
            operators: 6,
            packet_bytes: None,
            ns_per_byte: 0.5,
            homed_input: false,
            rows: 20_000,
            ticks: 200_000,
            branches: 4,
            queries: "q2,q4".into(),
            queries_dir: None,
            concurrent: "1,16".into(),
            source: None,
            triples: 50_000,
            store_placement: StorePlacement::Partitioned,
            db_bytes: 12_800_000,
            work_ns: 200.0,
            seed: 1,
            model: Vec::new(),
            models: None,
            save_models: None,
            csv: None,
            trace: None,
            quiet: true,
            validate: false,
            reps: 5,
        }
    }
}
