//! `nearflow sim`: a workload on a model of a machine, under several policies, in the
//! discrete-event simulator (`nearflow-sim`). Every figure it prints is SIMULATED.
//!
//! `--validate` (on this host's topology only) also runs the very same work on the real runtime
//! — a task graph task by task, or the generated plans on the engine — and prints measured
//! against simulated makespans, per policy and grid entry (median of `--reps` interleaved
//! rounds).
//!
//! The real runs of `--validate` are in `sim_validate.rs`, the calibration of plans in
//! `sim_calibrate.rs`, the table and timelines in `sim_report.rs`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use nearflow_policy::PolicyKind;
use nearflow_sim::workload::{self, PipelineSpec};
use nearflow_sim::{simulate_plan, simulate_traced, Allocator, Graph, Model, Report, RunOptions};

use crate::args::{parse_list, TopoArgs};
use crate::bench::{progress, Csv};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SimWorkload {
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

#[derive(Args, Debug)]
pub struct SimCmd {
    #[command(flatten)]
    pub topo: TopoArgs,
    /// What runs.
    #[arg(long, value_enum, default_value = "pipeline")]
    pub workload: SimWorkload,
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
    #[arg(value_parser = crate::args::int_in(1u32, 1 << 20), long)]
    pub size: Option<u32>,
    /// Pipeline: packets per request.
    /// Range: 1..=1e6.
    #[arg(value_parser = crate::args::int_in(1u32, 1_000_000), long, default_value_t = 64)]
    pub packets: u32,
    /// Pipeline: operators after the source.
    /// Range: 1..=10000.
    #[arg(value_parser = crate::args::int_in(1u32, 10_000), long, default_value_t = 6)]
    pub operators: u32,
    /// Pipeline: packet size (default: half the L2 of the machine, as the engine's).
    /// Range: 64..=1 GiB.
    #[arg(value_parser = crate::args::int_in(64u64, 1 << 30), long, value_name = "BYTES")]
    pub packet_bytes: Option<u64>,
    /// Pipeline: work per packet byte per operator, in ns.
    /// Range: 0..=1000.
    #[arg(value_parser = crate::args::real_in(0.0, 1000.0), long, default_value_t = 0.5)]
    pub ns_per_byte: f64,
    /// Pipeline: each request's input on its own node (spawned homed) instead of on node 0.
    #[arg(long)]
    pub homed_input: bool,
    /// Plans: rows per source of the generated plan.
    /// Range: 1..=1e9.
    #[arg(value_parser = crate::args::int_in(1u64, 1_000_000_000), long, default_value_t = 20_000)]
    pub rows: u64,
    /// VWAP: ticks generated (as `run vwap`).
    /// Range: 1..=1e9.
    #[arg(value_parser = crate::args::int_in(1u64, 1_000_000_000), long, default_value_t = 200_000)]
    pub ticks: u64,
    /// VWAP: branches the stream is split into.
    /// Range: 1..=64.
    #[arg(value_parser = crate::args::int_in(1usize, 64), long, default_value_t = 4)]
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
    #[arg(value_parser = crate::args::int_in(1u64, 1_000_000_000), long, default_value_t = 50_000)]
    pub triples: u64,
    /// Ferret: the database's size in bytes (default: `bench split`'s 50,000 vectors of 64
    /// floats).
    /// Range: 1..=1 TiB.
    #[arg(value_parser = crate::args::int_in(1u64, 1 << 40), long, default_value_t = 12_800_000)]
    pub db_bytes: u64,
    /// Task work in ns (fib, fanout, stress).
    /// Range: 0..=1e9.
    #[arg(value_parser = crate::args::real_in(0.0, 1e9), long, default_value_t = 200.0)]
    pub work_ns: f64,
    /// Seed (random stealing, stress trees).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Change a model constant: KEY=VALUE (repeatable; keys in crates/sim/src/model.rs).
    #[arg(long, value_name = "KEY=VALUE")]
    pub model: Vec<String>,
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
    #[arg(value_parser = crate::args::int_in(1usize, 1000), long, default_value_t = 5)]
    pub reps: usize,
}

fn parse_grid(s: &str) -> Result<Vec<(u32, u32)>> {
    s.split(',')
        .map(|e| {
            let (a, b) = e
                .trim()
                .split_once('x')
                .with_context(|| format!("grid entry `{e}` is not NxM"))?;
            let (a, b): (u32, u32) = (
                a.parse().with_context(|| format!("grid entry `{e}`"))?,
                b.parse().with_context(|| format!("grid entry `{e}`"))?,
            );
            if a == 0 || b == 0 || a * b > 4096 {
                bail!("grid entry `{e}`: N and M must be positive, N·M at most 4096");
            }
            Ok((a, b))
        })
        .collect()
}

fn graph(cmd: &SimCmd, machine: &nearflow_topo::Machine, requests: u32) -> Result<Graph> {
    let size = cmd.size;
    Ok(match cmd.workload {
        SimWorkload::Pipeline => {
            let packet_bytes = match cmd.packet_bytes {
                Some(0) => bail!("--packet-bytes must be positive"),
                Some(b) => b,
                None => machine
                    .cache_size(0, 2)
                    .map_or(256 << 10, |l2| (l2 / 2).max(4096)),
            };
            if !(cmd.ns_per_byte.is_finite() && cmd.ns_per_byte >= 0.0) {
                bail!("--ns-per-byte must be a number ≥ 0");
            }
            workload::pipeline(&PipelineSpec {
                requests,
                packets: size.unwrap_or(cmd.packets),
                operators: cmd.operators,
                packet_bytes,
                ns_per_byte: cmd.ns_per_byte,
                homed_input: cmd.homed_input,
                nodes: machine.node_count(),
            })?
        }
        SimWorkload::Fib => workload::fib(size.unwrap_or(20), cmd.work_ns, requests)?,
        SimWorkload::Fanout => workload::fanout(size.unwrap_or(20_000), cmd.work_ns, requests)?,
        SimWorkload::Matmul => workload::matmul(size.unwrap_or(256), 1.0)?,
        SimWorkload::Stress => {
            workload::stress(requests, size.unwrap_or(20_000), cmd.work_ns, cmd.seed)?
        }
        SimWorkload::FerretPlain | SimWorkload::FerretSplit => {
            workload::similarity(&workload::SimilaritySpec {
                requests,
                queries: size.unwrap_or(500),
                nodes: machine.node_count(),
                db_bytes: cmd.db_bytes,
                chunks: 256,
                probes: 16,
                ns_per_byte: 0.25,
                key_ns: 2_000.0,
                split: cmd.workload == SimWorkload::FerretSplit,
                seed: cmd.seed,
            })?
        }
        SimWorkload::Plans | SimWorkload::Vwap | SimWorkload::Sp2bench => {
            unreachable!("plans are not task graphs")
        }
    })
}

pub fn run(cmd: &SimCmd) -> Result<()> {
    let machine = cmd.topo.load()?;
    let policies: Vec<PolicyKind> = parse_list(&cmd.policies)?;
    let allocators: Vec<Allocator> = parse_list(&cmd.allocators)?;
    if policies.is_empty() || allocators.is_empty() {
        bail!("no policy or no allocator given");
    }
    if !(cmd.work_ns.is_finite() && cmd.work_ns >= 0.0) {
        bail!("--work-ns must be a number ≥ 0");
    }
    let mut model = Model::default();
    for kv in &cmd.model {
        model.set(kv)?;
    }
    let grid: Vec<(String, usize)> = match cmd.workload {
        SimWorkload::Matmul => vec![("1x1".into(), 1)],
        SimWorkload::Sp2bench => parse_list::<usize>(&cmd.concurrent)?
            .into_iter()
            .map(|c| {
                if c == 0 || c > 4096 {
                    bail!("--concurrent: copies must be between 1 and 4096");
                }
                Ok((format!("x{c}"), c))
            })
            .collect::<Result<_>>()?,
        _ => parse_grid(&cmd.grid)?
            .into_iter()
            .map(|(n, m)| (format!("{n}x{m}"), (n * m) as usize))
            .collect(),
    };
    if grid.is_empty() {
        bail!("nothing to run: no grid entry or concurrency given");
    }
    if cmd.validate && !machine.source().is_host() {
        bail!("--validate compares with real runs, so it needs this host's topology (no --preset, --synthetic or --xml)");
    }
    if cmd.validate && matches!(cmd.workload, SimWorkload::Sp2bench | SimWorkload::Vwap) {
        bail!(
            "--validate does not cover {} yet: validate the engine's model with --workload plans",
            if cmd.workload == SimWorkload::Vwap {
                "vwap"
            } else {
                "sp2bench"
            }
        );
    }
    if matches!(cmd.packet_bytes, Some(0)) {
        bail!("--packet-bytes must be positive");
    }
    let plans = crate::sim_calibrate::calibrated_plans(cmd, &machine)?;
    let bar = progress(
        (grid.len() * policies.len() * allocators.len() * plans.len().max(1)) as u64,
        "sim",
        cmd.json,
    );
    let mut reports: Vec<(String, Report)> = Vec::new();
    let mut graphs = Vec::new();
    let models: Vec<Option<&(String, nearflow_sim::PlanModel)>> = if plans.is_empty() {
        vec![None]
    } else {
        plans.iter().map(Some).collect()
    };
    for plan in models {
        for (label, requests) in &grid {
            let label = match plan {
                Some((q, _)) if cmd.workload == SimWorkload::Sp2bench => format!("{q} {label}"),
                _ => label.clone(),
            };
            let g = match plan {
                Some(_) => Graph::default(),
                None => graph(cmd, &machine, *requests as u32)?,
            };
            for &alloc in &allocators {
                for &p in &policies {
                    bar.set_message(format!("{label} {p} {alloc}"));
                    let (r, spans) = match plan {
                        Some((_, plan)) => simulate_plan(
                            &machine,
                            p,
                            &model,
                            plan,
                            *requests,
                            RunOptions {
                                alloc,
                                seed: cmd.seed,
                                traced: cmd.trace.is_some(),
                            },
                        )?,
                        None => simulate_traced(&machine, p, &model, &g, alloc, cmd.seed)?,
                    };
                    if let Some(path) = &cmd.trace {
                        let runs =
                            grid.len() * policies.len() * allocators.len() * plans.len().max(1);
                        let file = crate::sim_report::trace_file(
                            path,
                            runs,
                            &label,
                            p,
                            alloc,
                            allocators.len(),
                        );
                        crate::sim_report::write_trace(&file, &spans, &r, &label)?;
                    }
                    reports.push((label.clone(), r));
                    bar.inc(1);
                }
            }
            graphs.push((label, std::sync::Arc::new(g)));
        }
    }
    bar.finish_and_clear();
    if cmd.validate {
        if !plans.is_empty() {
            let grid: Vec<(u32, u32)> = parse_grid(&cmd.grid)?;
            return crate::sim_validate::validate_plans(cmd, &machine, &policies, &grid, &reports);
        }
        return crate::sim_validate::validate(cmd, &machine, &policies, &graphs, &reports);
    }
    if cmd.json {
        let all: Vec<&Report> = reports.iter().map(|(_, r)| r).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        crate::sim_report::print_table(&reports);
    }
    if let Some(path) = &cmd.csv {
        let mut csv = Csv::new(&[
            "simulated",
            "machine",
            "grid",
            "workload",
            "policy",
            "allocator",
            "makespan_ms",
            "utilisation",
            "remote_share",
            "steals",
            "wakes",
        ]);
        for (grid, r) in &reports {
            csv.row(&[
                "true".into(),
                r.machine.clone(),
                grid.clone(),
                r.workload.clone(),
                r.policy.clone(),
                r.allocator.clone(),
                format!("{:.4}", r.makespan_ns as f64 / 1e6),
                format!("{:.4}", r.utilisation()),
                format!("{:.4}", r.remote_share),
                r.steals.to_string(),
                r.wakes.to_string(),
            ]);
        }
        csv.write(path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_parse_and_bad_ones_are_errors() {
        assert_eq!(parse_grid("1x1, 4x4").unwrap(), vec![(1, 1), (4, 4)]);
        for bad in ["4", "0x1", "ax2", "100x100"] {
            assert!(parse_grid(bad).is_err(), "{bad}");
        }
    }
}
