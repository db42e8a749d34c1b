//! `nearflow-lab`: the experiments of the papers and the product benchmarks, beside the product
//! commands (the same as `nearflow`'s, from `nearflow-cli`'s library).
//!
//! - `stress` — the random-DAG workload with every task counted;
//! - `bench overhead|queues|packet-size|plans|alloc|split|sp2bench|serve|numa-factor|streammap|
//!   phase|rayon` — benchmarks (figures only, never assertions);
//! - `gen sp2bench` — a document of SP²Bench's shape from our own generator;
//! - `map` — StreamMap's thread-to-core mappers on VWAP and LOIS, measured on the host;
//! - `sim` — a workload on a model of a machine, every policy, in the discrete-event simulator
//!   (SIMULATED figures);
//! - `demo` — the main job on embedded defaults (see [`Command::Demo`]).
//!
//! `nearflow bench …` (and the others) run this binary when it is installed beside `nearflow`.
//!
//! ## Files
//!
//! Each subcommand's flags become a `nearflow-lab` config, its report comes back and is
//! printed. `bench_cmd.rs` — every `bench` subcommand; `sim_cmd.rs` — `sim`; `map_cmd.rs` —
//! `map`; `stress_cmd.rs` — `stress`; `gen_cmd.rs` — `gen sp2bench`; `report.rs` — printing a
//! lab report.

// The doc comments of the argument structs are clap's `--help` text, printed verbatim, where
// hwloc's `[numa]` syntax is not a rustdoc link.
#![allow(rustdoc::broken_intra_doc_links)]

mod bench_cmd;
#[cfg(test)]
mod docs_tests;
mod gen_cmd;
mod map_cmd;
mod report;
mod sim_cmd;
mod stress_cmd;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// As `nearflow`: the nearflow allocator is the global allocator (LAS paper §5), which the
/// experiments' runtimes check before they label a column with it.
#[global_allocator]
static GLOBAL_ALLOCATOR: nearflow_alloc::Nearflow = nearflow_alloc::Nearflow;

#[derive(Parser, Debug)]
#[command(
    name = "nearflow-lab",
    version,
    about = "The experiments of the nearflow papers and the product benchmarks, beside nearflow's own commands"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    #[command(flatten)]
    Product(nearflow_cli::Command),
    /// Run random task DAGs and check that every task runs exactly once.
    Stress(stress_cmd::StressCmd),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(bench_cmd::BenchCmd),
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

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Product(c) => nearflow_cli::run(c),
        Command::Stress(c) => stress_cmd::run(&c),
        Command::Bench(c) => bench_cmd::run(&c),
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
        std::iter::once("nearflow-lab").chain(args.iter().map(String::as_str)),
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
    // The endpoint under 16 clients, each policy with and without an update stream, in three
    // interleaved rounds of 2 s: the update stream's cost is the median of the rounds' ratios,
    // with their range beside it (one round's ratio would be the host's noise).
    let mut serve = line("bench serve --seconds 2 --rounds 3 --updates 10 --data");
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
    nearflow_cli::init_process();
    nearflow_cli::exit_status(run(Cli::parse()))
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
