//! `nearflow bench …`: the benchmarks of `nearflow-lab`. Each subcommand's flags become the
//! lab's config; the report comes back and is printed (one JSON document with `--json`, else
//! its tables). Benchmarks print figures; they never assert on time.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use nearflow_lab as lab;
use nearflow_policy::{PolicyKind, TaskKind};
use nearflow_rt::Pinning;
use nearflow_split::SplitBy;

use crate::report::print_report;
use nearflow_cli::args::{SourceArgs, TopoArgs};

/// The machine a benchmark runs on and how its threads are bound: every `bench` that starts a
/// runtime takes these.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Thread binding (only applied on the host).
    #[arg(long, default_value = "group")]
    pub pinning: Pinning,
}

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Spawn+run cost of empty tasks, every policy beside rayon and crossbeam-deque.
    Overhead(OverheadCmd),
    /// Matrix multiplication with one task per element (load-balancing-queues.txt, Table I).
    Queues(QueuesCmd),
    /// One plan with packet sizes from 1 KB to 4 MB (task-scheduling paper, Fig. 1).
    PacketSize(PacketSizeCmd),
    /// N·M concurrent generated plans under several policies (task-scheduling paper, Fig. 3;
    /// with `--allocators nearflow,system`, the allocator experiment of LAS §6.4).
    Plans(PlansCmd),
    /// The nearflow allocator beside glibc, mimalloc and jemalloc (LAS paper §5).
    Alloc(AllocCmd),
    /// Ferret's similarity search, plain against SplittableData (SplittableData paper §2.3, §3).
    Split(SplitCmd),
    /// SP²Bench SPARQL queries, single and concurrent, per policy, with Oxigraph as the peer
    /// (LAS paper §6.2–6.4).
    Sp2bench(Sp2benchCmd),
    /// `nearflow serve`'s endpoint under N concurrent HTTP clients replaying a query mix, per
    /// policy, with another endpoint (Oxigraph's server) as the peer (LAS paper §6.4 on a
    /// real server).
    Serve(ServeLoadCmd),
    /// Query shapes one at a time (joins, stars, OPTIONAL, EXISTS, MINUS, UNION, GROUP BY,
    /// DISTINCT, filters, a large result), generated from the store's own statistics, sent to
    /// `nearflow serve`'s endpoint and to the peers' servers in interleaved rounds, every answer
    /// compared.
    Shapes(ShapesCmd),
    /// StreamMap's micro-benchmarks on this host: producer/consumer, contention table,
    /// barrier (StreamMap §III, Fig. 4, Tables I–II, Fig. 5).
    Streammap(StreammapCmd),
    /// NUMA factors of this host: reversing an array on node j from node i (Bobox paper §6, Table 1).
    NumaFactor(NumaFactorCmd),
    /// The host's phase: the round trip of a cache line between two of its CPUs, which the
    /// timing benches also sample once per round (a shared host's speed changes with it).
    Phase(PhaseCmd),
    /// Rayon's demo workloads and the classic task-parallel set (fib, quicksort, mergesort,
    /// n-body, n-queens, UTS, a sum of 10⁸, blocked matrix multiply), one source compiled
    /// against nearflow and against rayon, timed side by side on this machine.
    Rayon(RayonCmd),
    /// What a checkpoint writes after N updates on a store (a copy of it: the store itself is
    /// never written).
    Checkpoint(CheckpointCmd),
}

/// Runs one benchmark and prints its report.
pub fn run(cmd: &BenchCmd) -> Result<()> {
    match cmd {
        BenchCmd::Overhead(c) => print_report(&lab::overhead::run(&c.config()?)?, c.json),
        BenchCmd::Queues(c) => print_report(&lab::queues::run(&c.config()?)?, c.json),
        BenchCmd::PacketSize(c) => print_report(&lab::packet_size::run(&c.config()?)?, c.json),
        BenchCmd::Plans(c) => print_report(&lab::concurrent_plans::run(&c.config()?)?, c.json),
        BenchCmd::Alloc(c) => print_report(&lab::alloc::run(&c.config()?)?, c.json),
        BenchCmd::Split(c) => print_report(&lab::split::run(&c.config()?)?, c.json),
        BenchCmd::Sp2bench(c) => print_report(&lab::sp2bench::run(&c.config()?)?, false),
        BenchCmd::Serve(c) => print_report(&lab::serve_load::run(&c.config()?)?, c.json),
        BenchCmd::Shapes(c) => print_report(&lab::shapes::run(&c.config()?)?, c.json),
        BenchCmd::Streammap(c) => print_report(&lab::streammap::run(&c.config()?)?, false),
        BenchCmd::NumaFactor(c) => print_report(&lab::numa_factor::run(&c.config()?)?, c.json),
        BenchCmd::Phase(c) => print_report(&lab::phase::run(&c.config()?)?, false),
        BenchCmd::Checkpoint(c) => print_report(&lab::checkpoint::run(&c.config())?, c.json),
        BenchCmd::Rayon(c) => match &c.simulate {
            Some(preset) => print_report(&lab::taskpar::simulate(&c.sim_config(preset))?, c.json),
            None => print_report(&lab::taskpar::run(&c.config())?, c.json),
        },
    }
}

#[derive(Args, Debug)]
pub struct RayonCmd {
    /// Workloads (comma-separated): fib, quicksort, mergesort, nbody, nqueens, uts, sum, matmul.
    #[arg(
        long,
        default_value = "fib,quicksort,mergesort,nbody,nqueens,uts,sum,matmul"
    )]
    pub workloads: String,
    /// nearflow's policies (comma-separated), each beside rayon.
    #[arg(long, default_value = "las")]
    pub policies: String,
    /// Interleaved rounds (medians over rounds are reported).
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 7)]
    pub rounds: usize,
    /// The correctness sizes (milliseconds a run) instead of the full ones.
    #[arg(long)]
    pub tiny: bool,
    /// Instead of timing: the same graphs in the simulator on this preset (e.g. e7-4820), LAS
    /// against NLS, with the data split per NUMA node and the work per unit timed on this host
    /// (SIMULATED).
    #[arg(long, value_name = "PRESET")]
    pub simulate: Option<String>,
    /// With --simulate: parallel loops cut into this many leaves per PU (a stand-in for rayon's
    /// adaptive splitting). Range: 1..=64.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 64), long, default_value_t = 4)]
    pub pieces_per_pu: u64,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

impl RayonCmd {
    fn sim_config(&self, preset: &str) -> lab::taskpar::SimConfig {
        lab::taskpar::SimConfig {
            workloads: self.workloads.clone(),
            preset: preset.to_string(),
            sizes: self.config().sizes,
            pieces_per_pu: self.pieces_per_pu,
        }
    }

    fn config(&self) -> lab::taskpar::Config {
        lab::taskpar::Config {
            workloads: self.workloads.clone(),
            policies: self.policies.clone(),
            rounds: self.rounds,
            sizes: if self.tiny {
                lab::taskpar::Sizes::TINY
            } else {
                lab::taskpar::Sizes::FULL
            },
            quiet: self.json,
        }
    }
}

#[derive(Args, Debug)]
pub struct OverheadCmd {
    #[command(flatten)]
    pub run: RunArgs,
    /// Policies to measure (comma-separated).
    #[arg(
        long,
        default_value = "las,nls,bobox2011,fifo-rr,central,per-thread,random-steal"
    )]
    pub policies: String,
    /// Tasks in `chain` and `fanout`.
    /// Range: 1..=1e9.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 1_000_000_000), long, default_value_t = 200_000)]
    pub tasks: u64,
    /// n of `fib` (fib(25) is 242,785 tasks).
    /// Range: 1..=40.
    #[arg(value_parser = nearflow_cli::args::int_in(1u32, 40), long, default_value_t = 25)]
    pub fib: u32,
    /// Workloads (comma-separated): chain, fanout, fib, request, wake.
    #[arg(long, default_value = "chain,fanout,fib,request,wake")]
    pub workloads: String,
    /// Requests in `request` (`wake` runs a tenth as many, each after 5 ms of idleness).
    /// Range: 1..=1e7.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 10_000_000), long, default_value_t = 2000)]
    pub requests: u64,
    /// Interleaved rounds (each runs every cell once; medians over rounds are reported).
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 11)]
    pub reps: usize,
    /// Untimed runs of a cell right before each timed one (not for `wake`, which measures the
    /// cold start). On a virtual machine whose vCPUs idle in the 5 ms pause between cells, the
    /// host may take the caches away; a run of a few milliseconds then pays for it at random.
    /// Range: 0..=100.
    #[arg(value_parser = nearflow_cli::args::int_in(0usize, 100), long, default_value_t = 1)]
    pub warmup: usize,
    /// Barriers of the sleep protocol to compare (comma-separated: fence, membarrier); each
    /// policy runs once per choice, named `policy+barriers` when there are several (default:
    /// the runtime's default alone).
    #[arg(long, value_name = "LIST")]
    pub barriers: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

impl OverheadCmd {
    fn config(&self) -> Result<lab::overhead::Config> {
        Ok(lab::overhead::Config {
            topology: self.run.topo.spec()?,
            policies: self.policies.clone(),
            tasks: self.tasks,
            fib: self.fib,
            workloads: self.workloads.clone(),
            requests: self.requests,
            reps: self.reps,
            warmup: self.warmup,
            barriers: self.barriers.clone(),
            pinning: self.run.pinning,
            quiet: self.json,
        })
    }
}

/// How the root of `bench queues` spawns the element tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SpawnKind {
    Immediate,
    Deferred,
}

#[derive(Args, Debug, Clone)]
pub struct QueuesCmd {
    #[command(flatten)]
    pub run: RunArgs,
    /// Matrix sizes (comma-separated).
    #[arg(long, default_value = "128,256,512,1024,2048")]
    pub sizes: String,
    /// Also run 4096 (16.8 M tasks, about 1.5 GB of queued tasks).
    #[arg(long)]
    pub with_4096: bool,
    /// Policies (comma-separated), in table order.
    #[arg(long, default_value = "central,per-thread,random-steal,nls,las")]
    pub policies: String,
    /// How the root spawns the element tasks.
    #[arg(long, value_enum, default_value = "deferred")]
    pub spawn: SpawnKind,
    /// Timed repetitions per cell (median reported).
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 3)]
    pub reps: usize,
    /// Untimed runs of a cell right before each timed one (every product still verified):
    /// they meet the cold start after the pause between cells (see `bench plans --warmup`).
    /// Range: 0..=100.
    #[arg(value_parser = nearflow_cli::args::int_in(0usize, 100), long, default_value_t = 1)]
    pub warmup: usize,
    /// Also time the product on plain threads (one per PU of the machine), without the runtime,
    /// in the orders in which the policies hand out the elements: `youngest-first` (LAS rule 3
    /// with one request), `oldest-first` (central, NLS, FIFO+RR), `both-ends` (random
    /// stealing), `blocks` (a static partition). They run in the same rounds as the policies,
    /// and a last table divides each policy's time by its own order's, round by round. Without
    /// a list, all four.
    #[arg(
        long,
        value_name = "ORDERS",
        num_args = 0..=1,
        default_missing_value = "youngest-first,oldest-first,both-ends,blocks"
    )]
    pub orders: Option<String>,
    /// Also write the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

impl QueuesCmd {
    fn config(&self) -> Result<lab::queues::Config> {
        Ok(lab::queues::Config {
            topology: self.run.topo.spec()?,
            sizes: self.sizes.clone(),
            with_4096: self.with_4096,
            policies: self.policies.clone(),
            spawn: match self.spawn {
                SpawnKind::Immediate => TaskKind::Immediate,
                SpawnKind::Deferred => TaskKind::Deferred,
            },
            reps: self.reps,
            warmup: self.warmup,
            orders: self.orders.clone(),
            pinning: self.run.pinning,
            csv: self.csv.clone(),
            quiet: self.json,
        })
    }
}

#[derive(Args, Debug, Clone)]
pub struct PacketSizeCmd {
    #[command(flatten)]
    pub run: RunArgs,
    /// Packet sizes in KiB (comma-separated); the default size is added if missing.
    #[arg(long, default_value = "1,2,4,8,16,32,64,128,256,512,1024,2048,4096")]
    pub sizes_kib: String,
    /// Rows per source of the generated plan.
    /// Range: 1..=1e9.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 1_000_000_000), long, default_value_t = 200_000)]
    pub rows: u64,
    /// Scheduling policy.
    #[arg(long, default_value = "las")]
    pub policy: PolicyKind,
    /// Timed repetitions per size (median reported).
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 3)]
    pub reps: usize,
    /// Print JSON: a list of {packet_bytes, tuples_per_s, default}.
    #[arg(long)]
    pub json: bool,
}

impl PacketSizeCmd {
    fn config(&self) -> Result<lab::packet_size::Config> {
        Ok(lab::packet_size::Config {
            topology: self.run.topo.spec()?,
            sizes_kib: self.sizes_kib.clone(),
            rows: self.rows,
            policy: self.policy,
            pinning: self.run.pinning,
            reps: self.reps,
            quiet: self.json,
        })
    }
}

#[derive(Args, Debug, Clone)]
pub struct PlansCmd {
    #[command(flatten)]
    pub run: RunArgs,
    /// Grid of NxM entries: N·M plans run concurrently.
    #[arg(long, default_value = "1x1,2x2,4x4")]
    pub grid: String,
    /// Policies (comma-separated).
    #[arg(long, default_value = "bobox2011,fifo-rr,las,nls")]
    pub policies: String,
    /// Allocators of the packet buffers (comma-separated: nearflow, system); both give the
    /// allocator experiment of LAS §6.4, side by side in one run.
    #[arg(long, default_value = "nearflow")]
    pub allocators: String,
    /// Rows per source of each plan.
    /// Range: 1..=1e9.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 1_000_000_000), long, default_value_t = 20_000)]
    pub rows: u64,
    /// Packet size in bytes (default: half the L2 cache of the topology).
    /// Range: 64..=1 GiB.
    #[arg(value_parser = nearflow_cli::args::int_in(64usize, 1 << 30), long, value_name = "BYTES")]
    pub packet_bytes: Option<usize>,
    /// Timed repetitions per cell (median reported).
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 5)]
    pub reps: usize,
    /// Untimed runs of a cell right before each timed one. The bench pauses between cells so
    /// that the previous column's workers fall asleep; on a virtual machine whose vCPUs idle
    /// in that pause, the next run can start with caches the host has taken away (a 10 ms
    /// plan then takes 50 % longer, at random); a warm-up run absorbs that.
    /// Range: 0..=100.
    #[arg(value_parser = nearflow_cli::args::int_in(0usize, 100), long, default_value_t = 1)]
    pub warmup: usize,
    /// Also write the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

impl PlansCmd {
    fn config(&self) -> Result<lab::concurrent_plans::Config> {
        Ok(lab::concurrent_plans::Config {
            topology: self.run.topo.spec()?,
            grid: self.grid.clone(),
            policies: self.policies.clone(),
            allocators: self.allocators.clone(),
            rows: self.rows,
            packet_bytes: self.packet_bytes,
            pinning: self.run.pinning,
            reps: self.reps,
            warmup: self.warmup,
            csv: self.csv.clone(),
            quiet: self.json,
        })
    }
}

#[derive(Args, Debug, Clone)]
pub struct AllocCmd {
    /// Allocators (comma-separated): glibc, mimalloc, jemalloc, nearflow.
    #[arg(long, default_value = "glibc,mimalloc,jemalloc,nearflow")]
    pub allocators: String,
    /// Patterns (comma-separated): latency, larson, xmalloc, cache-scratch, pipeline,
    /// large-churn, producer-consumer.
    #[arg(
        long,
        default_value = "latency,larson,xmalloc,cache-scratch,pipeline,large-churn,producer-consumer"
    )]
    pub patterns: String,
    /// Threads of the multi-thread patterns (more than the machine's CPUs is allowed).
    /// Range: 2..=1024.
    #[arg(value_parser = nearflow_cli::args::int_in(2usize, 1024), long, default_value_t = 4)]
    pub threads: usize,
    /// Multiplies the operation counts (1.0 takes about a minute on a 2-CPU machine).
    /// Range: 0.0001..=1000.
    #[arg(value_parser = nearflow_cli::args::real_in(0.0001, 1000.0), long, default_value_t = 1.0)]
    pub scale: f64,
    /// Directory of the allocbench-* programs (default: next to this executable).
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Print one JSON document: {machine, measurements: [{allocator, pattern, size, ns_per_op,
    /// peak_rss_bytes, …}]}.
    #[arg(long)]
    pub json: bool,
}

impl AllocCmd {
    fn config(&self) -> Result<lab::alloc::Config> {
        Ok(lab::alloc::Config {
            allocators: self.allocators.clone(),
            patterns: self.patterns.clone(),
            threads: self.threads,
            scale: self.scale,
            bin_dir: self.bin_dir.clone(),
            quiet: self.json,
        })
    }
}

/// What `bench split` partitions per.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum By {
    Node,
    Group,
}

#[derive(Args, Debug, Clone)]
pub struct SplitCmd {
    #[command(flatten)]
    pub run: RunArgs,
    /// Policies (comma-separated).
    #[arg(long, default_value = "las,nls,bobox2011")]
    pub policies: String,
    /// Queries per round.
    /// Range: 1..=1e7.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 10_000_000), long, default_value_t = 2000)]
    pub queries: usize,
    /// Feature vectors in the database.
    /// Range: 1..=1e8.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 100_000_000), long, default_value_t = 200_000)]
    pub points: usize,
    /// Dimensions of a feature vector.
    /// Range: 1..=4096.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 4096), long, default_value_t = 64)]
    pub dim: usize,
    /// Results per query.
    /// Range: 1..=10000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 10_000), long, default_value_t = 10)]
    pub k: usize,
    /// Partitions per NUMA node or per core group.
    #[arg(long, value_enum, default_value = "node")]
    pub by: By,
    /// Timed rounds (median reported).
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 3)]
    pub reps: usize,
    /// Queries checked against brute force.
    /// Range: 0..=1e6.
    #[arg(value_parser = nearflow_cli::args::int_in(0usize, 1_000_000), long, default_value_t = 100)]
    pub check_queries: usize,
    /// Also write the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

impl SplitCmd {
    fn config(&self) -> Result<lab::split::Config> {
        Ok(lab::split::Config {
            topology: self.run.topo.spec()?,
            policies: self.policies.clone(),
            queries: self.queries,
            points: self.points,
            dim: self.dim,
            k: self.k,
            by: match self.by {
                By::Node => SplitBy::Node,
                By::Group => SplitBy::Group,
            },
            reps: self.reps,
            check_queries: self.check_queries,
            pinning: self.run.pinning,
            csv: self.csv.clone(),
            quiet: self.json,
        })
    }
}

#[derive(Args, Debug, Clone)]
pub struct Sp2benchCmd {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub read: nearflow_cli::args::ReadArgs,
    /// Queries (file names without `.sparql` in `--queries-dir`), comma-separated.
    #[arg(long, default_value = "q2,q4,q5a,q6,q7,q8,q9,q11")]
    pub queries: String,
    /// Where the query files are (`NAME.sparql`). Default: the original benchmark's files in
    /// `../shared/data/sp2bench/queries` when present, else our own wording of the 17 queries
    /// (`nearflow_apps::sp2bench::queries`).
    #[arg(long)]
    pub queries_dir: Option<PathBuf>,
    /// Policies (comma-separated).
    #[arg(long, default_value = "las,nls")]
    pub policies: String,
    /// Copies of each query run at once (comma-separated).
    #[arg(long, default_value = "1,16")]
    pub concurrent: String,
    /// Allocators of the runtime (comma-separated: nearflow, system).
    #[arg(long, default_value = "nearflow")]
    pub allocators: String,
    /// Packet sizes in bytes (comma-separated); the default is the plan's (half the L2 cache
    /// of the topology). With more than one, each is a column of its own.
    #[arg(long, value_name = "BYTES[,BYTES…]")]
    pub packet_bytes: Option<String>,
    /// Timed repetitions per cell (median reported).
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 3)]
    pub reps: usize,
    /// Run the queries in a peer engine too: `oxigraph`.
    #[arg(long)]
    pub peer: Option<String>,
    /// The peer's time limit per query, in seconds ("> limit" in the table).
    /// Range: 0.001..=86400 s.
    #[arg(value_parser = nearflow_cli::args::real_in(0.001, 86_400.0), long, default_value_t = 60.0)]
    pub peer_timeout: f64,
    #[command(flatten)]
    pub run: RunArgs,
    /// Also write the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also draw the table as an SVG bar chart (log time axis, one group per query).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Where the store's indexes lie: `partitioned` (split by key range over the NUMA nodes,
    /// scans homed on their partition's node) or `replicated` (every node also holds a copy,
    /// built on it, and a worker reads its node's: memory ×nodes; nothing is copied on a
    /// one-node machine).
    #[arg(long, value_enum, default_value = "partitioned")]
    pub store_placement: nearflow_cli::args::StorePlacementArg,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
}

impl Sp2benchCmd {
    fn config(&self) -> Result<lab::sp2bench::Config> {
        Ok(lab::sp2bench::Config {
            source: self.source.source(&self.read)?,
            queries: self.queries.clone(),
            queries_dir: self.queries_dir.clone(),
            policies: self.policies.clone(),
            concurrent: self.concurrent.clone(),
            allocators: self.allocators.clone(),
            packet_bytes: self.packet_bytes.clone(),
            reps: self.reps,
            peer: self.peer.clone(),
            peer_timeout: self.peer_timeout,
            topology: self.run.topo.spec()?,
            pinning: self.run.pinning,
            csv: self.csv.clone(),
            svg: self.svg.clone(),
            store_placement: self.store_placement.into(),
            quiet: self.quiet,
        })
    }
}

#[derive(Args, Debug, Clone)]
pub struct ServeLoadCmd {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub read: nearflow_cli::args::ReadArgs,
    /// The query mix (comma-separated): SP²Bench's names and the SPARQL 1.1 workloads a1, a2,
    /// a3, p1, n1. A SELECT's name with `:count` (`q2:count`) is that query wrapped in
    /// `SELECT (COUNT(*) AS ?count) { … }`, its count checked.
    #[arg(long, default_value = lab::serve_load::DEFAULT_MIX)]
    pub queries: String,
    /// Where SP²Bench's query files are (as `bench sp2bench`).
    #[arg(long)]
    pub queries_dir: Option<PathBuf>,
    /// Concurrent clients. Range: 1..=1024.
    #[arg(long, default_value_t = 16, value_parser = nearflow_cli::args::int_in(1usize, 1024))]
    pub clients: usize,
    /// Seconds each engine is driven per round. Range: 0.1..=3600.
    #[arg(long, default_value_t = 5.0, value_parser = nearflow_cli::args::real_in(0.1, 3600.0))]
    pub seconds: f64,
    /// Instead of --seconds: each client sends each query N times per turn (so every query is
    /// measured on every engine, however slow the rest). Range: 1..=10000.
    #[arg(long, value_name = "N", value_parser = nearflow_cli::args::int_in(1usize, 10000))]
    pub each: Option<usize>,
    /// Interleaved rounds. Range: 1..=100.
    #[arg(long, default_value_t = 2, value_parser = nearflow_cli::args::int_in(1usize, 100))]
    pub rounds: usize,
    /// Policies (comma-separated), an endpoint each.
    #[arg(long, default_value = "las,nls")]
    pub policies: String,
    /// Another endpoint's query URL driven alike, e.g. Oxigraph's server started by
    /// `scripts/oxigraph-server.sh` (http://127.0.0.1:7879/query).
    #[arg(long, value_name = "URL")]
    pub peer: Option<String>,
    /// The longest a request may take before it counts as failed.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = nearflow_cli::args::duration)]
    pub request_timeout: std::time::Duration,
    /// Queries each of our endpoints runs at once (default: `serve`'s, four per PU, at least 8).
    /// Range: 1..=4096.
    #[arg(long, value_parser = nearflow_cli::args::int_in(1usize, 4096))]
    pub max_running: Option<usize>,
    /// Updates per second beside the mix (e.g. 10): each policy gets a second engine,
    /// POLICY+updates, over a durable copy of the store that takes them (the throughput with
    /// and without, side by side). 0: none.
    #[arg(long, default_value = "0")]
    pub updates: f64,
    #[command(flatten)]
    pub run: RunArgs,
    /// Also write the per-query table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
}

impl ServeLoadCmd {
    fn config(&self) -> Result<lab::serve_load::Config> {
        Ok(lab::serve_load::Config {
            source: self.source.source(&self.read)?,
            queries: self.queries.clone(),
            queries_dir: self.queries_dir.clone(),
            clients: self.clients,
            seconds: self.seconds,
            each: self.each,
            rounds: self.rounds,
            policies: self.policies.clone(),
            peer: self.peer.clone(),
            request_timeout: self.request_timeout,
            max_running: self.max_running,
            updates_per_s: self.updates,
            topology: self.run.topo.spec()?,
            pinning: self.run.pinning,
            csv: self.csv.clone(),
            quiet: self.quiet,
        })
    }
}

#[derive(Args, Debug)]
pub struct ShapesCmd {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub read: nearflow_cli::args::ReadArgs,
    /// A peer's SPARQL query endpoint as NAME=URL (repeatable), e.g.
    /// virtuoso=http://127.0.0.1:8891/sparql from `scripts/virtuoso-server.sh` or
    /// oxigraph=http://127.0.0.1:7879/query from `scripts/oxigraph-server.sh`, loaded with the
    /// same data.
    #[arg(long = "peer", value_name = "NAME=URL", value_parser = name_url)]
    pub peers: Vec<(String, String)>,
    /// Timed rounds after the warm-up. Range: 1..=100.
    #[arg(long, default_value_t = 3, value_parser = nearflow_cli::args::int_in(1usize, 100))]
    pub rounds: usize,
    /// Only these shapes (comma-separated names, as the report gives them).
    #[arg(long, value_name = "SHAPE[,SHAPE…]")]
    pub only: Option<String>,
    /// The forms of each shape (comma-separated): count (the rows counted by the engine), full
    /// (every row sent).
    #[arg(long, default_value = "count,full", value_parser = forms)]
    pub forms: (bool, bool),
    /// The longest a request may take before it counts as failed.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = nearflow_cli::args::duration)]
    pub request_timeout: std::time::Duration,
    /// Write the generated queries to DIR (a `.sparql` file each) and stop.
    #[arg(long, value_name = "DIR")]
    pub write_queries: Option<PathBuf>,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
}

/// `NAME=URL`.
fn name_url(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, u))
            if !n.is_empty() && (u.starts_with("http://") || u.starts_with("https://")) =>
        {
            Ok((n.to_owned(), u.to_owned()))
        }
        _ => Err(format!("expected NAME=URL with an http(s) URL, got {s:?}")),
    }
}

/// `count`, `full` or both, comma-separated: (counted, full).
fn forms(s: &str) -> Result<(bool, bool), String> {
    let (mut counted, mut full) = (false, false);
    for f in s.split(',').map(str::trim) {
        match f {
            "count" => counted = true,
            "full" => full = true,
            _ => return Err(format!("unknown form {f:?}: count or full")),
        }
    }
    Ok((counted, full))
}

impl ShapesCmd {
    fn config(&self) -> Result<lab::shapes::Config> {
        Ok(lab::shapes::Config {
            source: self.source.source(&self.read)?,
            peers: self.peers.clone(),
            rounds: self.rounds,
            only: self.only.clone(),
            counted: self.forms.0,
            full: self.forms.1,
            request_timeout: self.request_timeout,
            write_queries: self.write_queries.clone(),
            topology: self.run.topo.spec()?,
            pinning: self.run.pinning,
            quiet: self.quiet,
        })
    }
}

/// StreamMap's micro-benchmarks on this host (Fig. 4, Tables I–II, Fig. 5).
#[derive(clap::Args, Debug)]
pub struct StreammapCmd {
    /// Which: pc, contention, barrier (comma-separated).
    #[arg(long, default_value = "pc,contention,barrier")]
    pub micro: String,
    /// Tuples per chain (pc, contention).
    /// Range: 1..=1e10.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 10_000_000_000), long, default_value_t = 2_000_000)]
    pub tuples: u64,
    /// Meetings of the two barrier threads (the paper: 10,000,000).
    /// Range: 1..=1e9.
    #[arg(value_parser = nearflow_cli::args::int_in(1u64, 1_000_000_000), long, default_value_t = 1_000_000)]
    pub rounds: u64,
    /// Runs per case; the median is reported (the simulator is deterministic: one run).
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 3)]
    pub repeat: usize,
    /// Packet size in bytes (pc, contention).
    /// Range: 64..=1 GiB.
    #[arg(value_parser = nearflow_cli::args::int_in(64usize, 1 << 30), long, default_value_t = 64 * 1024)]
    pub packet_bytes: usize,
    /// Simulate on these machines instead (comma-separated presets, e.g.
    /// x5355,e5320-uma,nehalem-2x4; SIMULATED).
    #[arg(long, value_name = "PRESETS")]
    pub simulate: Option<String>,
}

impl StreammapCmd {
    fn config(&self) -> Result<lab::streammap::Config> {
        Ok(lab::streammap::Config {
            micro: self.micro.clone(),
            tuples: self.tuples,
            rounds: self.rounds,
            repeat: self.repeat,
            packet_bytes: self.packet_bytes,
            simulate: self.simulate.clone(),
        })
    }
}

#[derive(Args, Debug, Clone)]
pub struct NumaFactorCmd {
    /// Array size in MiB (larger than the last-level cache, so the reversal goes to memory).
    /// Range: 1..=65536 (64 GiB).
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 65_536), long, default_value_t = 256)]
    pub mib: usize,
    /// Passes per cell (median reported).
    /// Range: 1..=1000.
    #[arg(value_parser = nearflow_cli::args::int_in(1usize, 1000), long, default_value_t = 5)]
    pub reps: usize,
    /// Print this paper machine's stored NUMA factors instead of measuring (`nearflow topo --list`).
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

impl NumaFactorCmd {
    fn config(&self) -> Result<lab::numa_factor::Config> {
        Ok(lab::numa_factor::Config {
            mib: self.mib,
            reps: self.reps,
            preset: self.preset.clone(),
            quiet: self.json,
        })
    }
}

/// `nearflow bench phase`: samples of the round trip, one per `--every-ms`.
#[derive(clap::Args, Debug, Clone)]
pub struct PhaseCmd {
    /// Samples to take.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub samples: u32,
    /// Pause between samples, in milliseconds.
    /// Range: 0..=60000.
    #[arg(value_parser = nearflow_cli::args::int_in(0u64, 60_000), long, default_value_t = 200)]
    pub every_ms: u64,
}

#[derive(Args, Debug)]
pub struct CheckpointCmd {
    /// The store (a snapshot written by `nearflow load --save`, without updates beside it).
    #[arg(long)]
    pub store: std::path::PathBuf,
    /// A new or empty folder on the store's file system: the store is linked there (copied
    /// across file systems), and the updates and the checkpoint go there.
    #[arg(long)]
    pub work: std::path::PathBuf,
    /// Updates to run, one at a time, each synced before the next.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub updates: u64,
    /// Triples each update inserts.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub triples: u64,
    /// Below this many quads in the snapshot the delta is merged in memory and a checkpoint
    /// writes the snapshot (as `nearflow serve --segment-min-quads`; set it above the store's
    /// size to measure that path).
    #[arg(long, default_value_t = nearflow_rdf::db::Tuning::default().segment_min_quads)]
    pub segment_min_quads: u64,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

impl CheckpointCmd {
    fn config(&self) -> lab::checkpoint::Config {
        lab::checkpoint::Config {
            store: self.store.clone(),
            work: self.work.clone(),
            updates: self.updates,
            triples: self.triples,
            segment_min_quads: self.segment_min_quads,
            quiet: self.quiet,
        }
    }
}

impl PhaseCmd {
    fn config(&self) -> Result<lab::phase::Config> {
        Ok(lab::phase::Config {
            samples: self.samples,
            every_ms: self.every_ms,
        })
    }
}
