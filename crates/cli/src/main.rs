//! `nearflow`: the command-line tool of the nearflow runtime.
//!
//! - `nearflow topo` — a machine's tree, core groups and distance matrices;
//! - `nearflow stress` — the random-DAG workload with every task counted;
//! - `nearflow run vwap|plan` — applications on the dataflow engine (`--trace FILE.svg`);
//! - `nearflow bench overhead|queues|packet-size|plans|alloc|split|sp2bench|numa-factor|streammap` —
//!   benchmarks (figures only, never assertions);
//! - `nearflow sparql`, `nearflow load` — SPARQL queries over RDF files or a store snapshot;
//! - `nearflow serve` — a SPARQL 1.1 Protocol endpoint over a store (`nearflow-serve`);
//! - `nearflow gen sp2bench` — a document of SP²Bench's shape from our own generator;
//! - `nearflow check placement` — are pages and threads on the NUMA nodes they should be?
//! - `nearflow map` — StreamMap's thread-to-core mappers on VWAP and LOIS, measured on the host;
//! - `nearflow sim` — a workload on a model of a machine, every policy, in the discrete-event
//!   simulator (SIMULATED figures);
//! - `nearflow demo` — the main job on embedded defaults: this machine's topology, SP²Bench at
//!   250k triples beside Oxigraph (the original document, or a generated one), the SPARQL
//!   endpoint under 16 HTTP clients (LAS and NLS, each also beside 10 updates a second), a small VWAP run, VWAP's threads mapped by
//!   StreamMap's mappers, the concurrent-plans comparison with both allocators, the placement checks, a short
//!   ferret search (plain against split), the allocator benchmark (latency and pipeline) and
//!   the queue study, in about five minutes.
//!
//! ## Files
//!
//! The CLI parses, calls and prints; the work is in the library crates, the experiments in
//! `nearflow-lab` (each subcommand's flags become a lab config, its report comes back and is
//! printed). No file here imports another subcommand's file.
//!
//! - `args.rs` — flags several commands share (machine, store source), number parsers,
//!   printing a lab report.
//! - `topo_cmd.rs` — `topo`; `stress_cmd.rs` — `stress`; `run_cmd.rs` — `run vwap`, `run plan`;
//!   `check_cmd.rs` — `check placement`, `check store`; `sparql_cmd.rs` — `sparql`, `load`; `serve_cmd.rs` — `serve`; `update_cmd.rs` — `update`; `gen_cmd.rs` —
//!   `gen sp2bench`.
//! - `bench_cmd.rs` — every `bench` subcommand; `sim_cmd.rs` — `sim`; `map_cmd.rs` — `map`.

// The doc comments of the argument structs are clap's `--help` text, printed verbatim, where
// hwloc's `[numa]` syntax is not a rustdoc link.
#![allow(rustdoc::broken_intra_doc_links)]

mod args;
mod bench_cmd;
mod check_cmd;
mod gen_cmd;
mod map_cmd;
mod run_cmd;
mod serve_cmd;
mod sim_cmd;
mod sparql_cmd;
mod stress_cmd;
mod topo_cmd;
mod update_cmd;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// The whole program allocates through the nearflow allocator (LAS paper §5): 8–512 KiB blocks
/// (the dataflow engine's packets) from per-thread local allocators on the thread's NUMA node,
/// the rest from glibc or the OS. `--allocator system` sends everything to glibc.
#[global_allocator]
static GLOBAL_ALLOCATOR: nearflow_alloc::Nearflow = nearflow_alloc::Nearflow;

#[derive(Parser, Debug)]
#[command(
    name = "nearflow",
    version,
    about = "A locality-aware runtime for parallel dataflow on multicore and NUMA machines"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a machine's topology: tree, core groups, cache and NUMA distances.
    Topo(topo_cmd::TopoCmd),
    /// Run random task DAGs and check that every task runs exactly once.
    Stress(stress_cmd::StressCmd),
    /// Run an application on the dataflow engine.
    #[command(subcommand)]
    Run(run_cmd::RunCmd),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(bench_cmd::BenchCmd),
    /// Checks of this machine's behaviour (exit status 1 when one fails).
    #[command(subcommand)]
    Check(CheckCmd),
    /// Run a SPARQL query over RDF files or a store snapshot.
    Sparql(sparql_cmd::SparqlCmd),
    /// Load RDF files and save a store snapshot (`--store` of `sparql` opens it).
    Load(sparql_cmd::LoadCmd),
    /// Serve SPARQL over HTTP (the SPARQL 1.1 Protocol) from RDF files or a store snapshot.
    Serve(serve_cmd::ServeCmd),
    /// Run a SPARQL 1.1 Update request against a store snapshot (durable when it returns).
    Update(update_cmd::UpdateCmd),
    /// Generate benchmark data.
    #[command(subcommand)]
    Gen(gen_cmd::GenCmd),
    /// Simulate a workload on a model of a machine under several policies (SIMULATED).
    Sim(sim_cmd::SimCmd),
    /// StreamMap: map an application's threads to PUs (TreeMatch, TreeMatch-S, Holistic,
    /// Exhaustive) and measure the mappings.
    Map(map_cmd::MapCmd),
    /// The main job: this machine's topology, SP²Bench on the 250k document beside Oxigraph
    /// (generated when ../shared does not have it), the SPARQL endpoint under 16 HTTP clients
    /// (LAS and NLS, each also beside 10 updates a second), a small VWAP run, VWAP's threads mapped by
    /// StreamMap's mappers, the concurrent-plans comparison (both allocators), the placement checks, the allocator latency table and the
    /// queue study, on embedded defaults.
    Demo {
        /// Where to write the queue study's CSV.
        #[arg(long, default_value = "results/queues.csv")]
        csv: std::path::PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum CheckCmd {
    /// Pages of the allocator and the runtime's threads are on the right NUMA nodes.
    Placement(check_cmd::PlacementCmd),
    /// A store snapshot and its log are whole: every section's checksum, every logged update.
    Store(check_cmd::StoreCheckCmd),
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Topo(c) => topo_cmd::run(&c),
        Command::Stress(c) => stress_cmd::run(&c),
        Command::Bench(c) => bench_cmd::run(&c),
        Command::Check(CheckCmd::Placement(c)) => check_cmd::placement(&c),
        Command::Check(CheckCmd::Store(c)) => check_cmd::store(&c),
        Command::Run(run_cmd::RunCmd::Vwap(c)) => run_cmd::vwap(&c),
        Command::Run(run_cmd::RunCmd::Plan(c)) => run_cmd::plan(&c),
        Command::Sparql(c) => sparql_cmd::run(&c),
        Command::Load(c) => sparql_cmd::load(&c),
        Command::Serve(c) => serve_cmd::run(&c),
        Command::Update(c) => update_cmd::run(&c),
        Command::Gen(c) => gen_cmd::run(&c),
        Command::Sim(c) => sim_cmd::run(&c),
        Command::Map(c) => map_cmd::run(&c),
        Command::Demo { csv } => demo(&csv),
    }
}

/// The main job, as the command lines a user would type: every option not given here takes
/// the subcommand's own default (the same parser runs them), and each line is printed before
/// it runs.
fn demo(csv: &std::path::Path) -> Result<()> {
    let original = std::path::Path::new(SP2B_250K);
    let data = if original.exists() {
        Sp2bData::Original(original.to_path_buf())
    } else {
        println!(
            "(the original SP²Bench document is not at {SP2B_250K}: the SPARQL step runs on a \
             generated document of the same size and shape)\n"
        );
        Sp2bData::Generated(csv.with_file_name("sp2b-gen-250000.n3.gz"))
    };
    for (i, args) in demo_steps(csv, &data).iter().enumerate() {
        if i > 0 {
            println!();
        }
        println!("$ nearflow {}", args.join(" "));
        run(parse_step(args)?)?;
    }
    Ok(())
}

fn parse_step(args: &[String]) -> Result<Cli> {
    Ok(Cli::try_parse_from(
        std::iter::once("nearflow").chain(args.iter().map(String::as_str)),
    )?)
}

/// The original SP²Bench document at 250k triples, outside the repository.
const SP2B_250K: &str = "../shared/data/sp2bench/sp2b-250000.n3.gz";

/// Where the demo's SP²Bench document comes from.
enum Sp2bData {
    /// The original benchmark's file.
    Original(std::path::PathBuf),
    /// Ours, generated to this path (skipped when it is already there).
    Generated(std::path::PathBuf),
}

/// The demo's command lines (see [`demo`]).
fn demo_steps(csv: &std::path::Path, sp2b: &Sp2bData) -> Vec<Vec<String>> {
    let plans_csv = csv.with_file_name("plans.csv");
    let line = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let mut plans = line(
        "bench plans --grid 1x1,2x2 --policies bobox2011,fifo-rr,las,nls \
         --allocators nearflow,system --rows 10000 --reps 3 --csv",
    );
    plans.push(plans_csv.to_string_lossy().into_owned());
    let mut queues = line("bench queues --sizes 128,256,512,1024,2048 --reps 3 --csv");
    queues.push(csv.to_string_lossy().into_owned());
    let mut steps = vec![line("topo")];
    let data = match sp2b {
        Sp2bData::Original(p) => p,
        Sp2bData::Generated(p) => {
            if !p.exists() {
                let mut g = line("gen sp2bench --triples 250000 --out");
                g.push(p.to_string_lossy().into_owned());
                steps.push(g);
            }
            p
        }
    };
    let mut b = line("bench sp2bench --peer oxigraph --peer-timeout 30 --reps 1 --data");
    b.push(data.to_string_lossy().into_owned());
    for (flag, name) in [("--csv", "sp2bench.csv"), ("--svg", "sp2bench.svg")] {
        b.push(flag.into());
        b.push(csv.with_file_name(name).to_string_lossy().into_owned());
    }
    steps.push(b);
    // The endpoint under 16 clients for a few seconds per policy (started, driven, stopped).
    let mut serve = line("bench serve --seconds 3 --rounds 1 --updates 10 --data");
    serve.push(data.to_string_lossy().into_owned());
    steps.push(serve);
    steps.extend([
        line("run vwap --ticks 200000"),
        line("map --app vwap --threads 4 --ticks 500000 --repeat 1"),
        plans,
        line("check placement"),
        line("bench split --points 50000 --queries 500 --reps 2"),
        line("bench alloc --patterns latency,pipeline --scale 0.3"),
        queues,
    ]);
    steps
}

fn main() -> ExitCode {
    // Output to a pipe that closed (`nearflow topo --json | head`) ends the program quietly, as
    // it ends any Unix filter, instead of a panic in `println!` (Rust ignores SIGPIPE by
    // default, so every write would fail with EPIPE).
    // SAFETY: restores the default action of one signal before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NEARFLOW_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    /// clap's own checks of every subcommand's flags (two fields of one name in a command were
    /// a panic at the first parse, not a compile error).
    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    /// Every step of the demo is a valid command line of this binary.
    #[test]
    fn demo_steps_parse() {
        use super::Sp2bData;
        let csv = std::path::Path::new("results/queues.csv");
        let original = super::demo_steps(csv, &Sp2bData::Original("x.n3.gz".into()));
        assert_eq!(original.len(), 10);
        let missing = std::env::temp_dir().join("nearflow-no-such-file.n3.gz");
        let generated = super::demo_steps(csv, &Sp2bData::Generated(missing));
        assert_eq!(generated.len(), 11, "the generator runs first");
        assert_eq!(generated[1][..2], ["gen", "sp2bench"]);
        for s in original.iter().chain(&generated) {
            super::parse_step(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        }
    }
}
