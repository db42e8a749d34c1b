//! `nearflow sim`: a workload on a model of a machine, under several policies, in the
//! discrete-event simulator (`nearflow-sim`). Every figure it reports is SIMULATED.
//!
//! With `validate` (on this host's topology only) it also runs the very same work on the real
//! runtime — a task graph task by task, or the generated plans on the engine — and reports
//! measured against simulated makespans, per policy and grid entry (median of `reps`
//! interleaved rounds).
//!
//! The real runs of `validate` are in [`validate`], the calibration of plans in [`calibrate`],
//! the table and timelines in `report.rs`, the LAS paper's figures in one command in
//! [`figures`].

pub mod calibrate;
mod config;
pub mod conformance;
pub mod figures;
mod report;
pub mod validate;

pub use config::{Config, StorePlacement, Workload};

use anyhow::{bail, Context, Result};
use nearflow_policy::PolicyKind;
use nearflow_sim::workload::{self, PipelineSpec};
use nearflow_sim::{
    simulate_plan, simulate_traced, AllocatorKind, Graph, Model, Report, RunOptions,
};
use serde::Serialize;

use crate::harness::{load_machine, parse_list, progress, Csv};

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

fn graph(cmd: &Config, machine: &nearflow_topo::Machine, requests: u32) -> Result<Graph> {
    let size = cmd.size;
    Ok(match cmd.workload {
        Workload::Pipeline => {
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
        Workload::Fib => workload::fib(size.unwrap_or(20), cmd.work_ns, requests)?,
        Workload::Fanout => workload::fanout(size.unwrap_or(20_000), cmd.work_ns, requests)?,
        Workload::Matmul => workload::matmul(size.unwrap_or(256), 1.0)?,
        Workload::Stress => {
            workload::stress(requests, size.unwrap_or(20_000), cmd.work_ns, cmd.seed)?
        }
        Workload::FerretPlain | Workload::FerretSplit => {
            workload::similarity(&workload::SimilaritySpec {
                requests,
                queries: size.unwrap_or(500),
                nodes: machine.node_count(),
                db_bytes: cmd.db_bytes,
                chunks: 256,
                probes: 16,
                ns_per_byte: 0.25,
                key_ns: 2_000.0,
                split: cmd.workload == Workload::FerretSplit,
                seed: cmd.seed,
            })?
        }
        Workload::Plans | Workload::Vwap | Workload::Sp2bench => {
            unreachable!("plans are not task graphs")
        }
    })
}

/// The store replicated on every node ([`StorePlacement::Replicated`]): each scan (a source
/// that reads stored data) loses its home, so it runs where the policy puts it and reads the
/// replica of that node (an input block without a home is read from the reader's node), and
/// index joins' lookups read their node's replica too.
/// Returns how many scans there were.
fn replicate_store(plans: &mut calibrate::NamedPlans) -> usize {
    let mut scans = 0;
    for (_, plan) in plans.iter_mut() {
        // Lookups read the replica of the node they run on.
        plan.store.nodes.clear();
        for op in &mut plan.operators {
            if op.input_bytes_per_tuple > 0.0 {
                op.home = None;
                scans += 1;
            }
        }
    }
    scans
}

/// Every simulated run (what `--json` prints), and the validation's rows when asked for.
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct Simulated {
    /// Every simulated run, in table order.
    pub runs: Vec<Report>,
    /// The grid entry (or query and copies) of each run.
    #[serde(skip)]
    pub entries: Vec<String>,
    /// With `validate`: each measured median beside its simulated makespan.
    #[serde(skip)]
    pub validation: Vec<validate::Row>,
}

/// Simulates the workload under every policy and allocator on every grid entry (and validates
/// it against real runs when asked).
pub fn run(cmd: &Config) -> Result<crate::Report<Simulated>> {
    use std::fmt::Write;
    let machine = load_machine(&cmd.topology)?;
    let mut out = String::new();
    let policies: Vec<PolicyKind> = parse_list(&cmd.policies)?;
    let allocators: Vec<AllocatorKind> = parse_list(&cmd.allocators)?;
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
        Workload::Matmul => vec![("1x1".into(), 1)],
        Workload::Sp2bench => parse_list::<usize>(&cmd.concurrent)?
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
    if matches!(cmd.packet_bytes, Some(0)) {
        bail!("--packet-bytes must be positive");
    }
    let (mut plans, said) = calibrate::calibrated_plans(cmd, &machine)?;
    for line in said {
        writeln!(out, "{line}")?;
    }
    if cmd.store_placement == StorePlacement::Replicated {
        if cmd.workload != Workload::Sp2bench {
            bail!("--store-placement is for --workload sp2bench");
        }
        let scans = replicate_store(&mut plans);
        writeln!(
            out,
            "store placement: replicated on each of the {} nodes ({scans} scans read the \
             replica of the node they run on, unhomed); memory: the permutations once per node \
             (SIMULATED; the engine builds them with `--store-placement replicated`)",
            machine.node_count()
        )?;
    }
    let bar = progress(
        (grid.len() * policies.len() * allocators.len() * plans.len().max(1)) as u64,
        "sim",
        cmd.quiet,
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
                Some((q, _)) if cmd.workload == Workload::Sp2bench => format!("{q} {label}"),
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
                        let file =
                            report::trace_file(path, runs, &label, p, alloc, allocators.len());
                        report::write_trace(&file, &spans, &r, &label)?;
                    }
                    reports.push((label.clone(), r));
                    bar.inc(1);
                }
            }
            graphs.push((label, std::sync::Arc::new(g)));
        }
    }
    bar.finish_and_clear();
    let mut validation = Vec::new();
    if cmd.validate {
        let (rows, text) = match cmd.workload {
            _ if plans.is_empty() => {
                validate::validate(cmd, &machine, &policies, &graphs, &reports)?
            }
            Workload::Sp2bench => {
                validate::validate_sparql(cmd, &machine, &policies, &grid, &reports)?
            }
            Workload::Vwap => {
                let grid: Vec<(u32, u32)> = parse_grid(&cmd.grid)?;
                validate::validate_vwap(cmd, &machine, &policies, &grid, &reports)?
            }
            _ => {
                let grid: Vec<(u32, u32)> = parse_grid(&cmd.grid)?;
                validate::validate_plans(cmd, &machine, &policies, &grid, &reports)?
            }
        };
        out.push_str(&text);
        validation = rows;
    } else {
        out.push_str(&report::table(&reports)?);
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
            "dram_remote_share",
            "read_remote_share",
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
                format!("{:.4}", r.dram_remote_share),
                format!("{:.4}", r.read_remote_share),
                r.steals.to_string(),
                r.wakes.to_string(),
            ]);
        }
        csv.write(path)?;
    }
    let (entries, runs) = reports.into_iter().unzip();
    let data = Simulated {
        runs,
        entries,
        validation,
    };
    Ok(crate::Report::new(data, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nearflow_topo::TopologySpec;

    /// Every grid entry × policy × allocator is one run, in table order, each named by its
    /// entry; the report's text says SIMULATED.
    #[test]
    fn every_entry_policy_and_allocator_is_one_simulated_run() {
        let cfg = Config {
            topology: TopologySpec::Synthetic("pack:2 [numa] core:2 pu:1".into()),
            workload: Workload::Fib,
            size: Some(12),
            grid: "1x1,2x2".into(),
            policies: "las,nls".into(),
            allocators: "nearflow,system".into(),
            ..Config::default()
        };
        let r = run(&cfg).unwrap();
        assert_eq!(r.data.runs.len(), 2 * 2 * 2);
        assert_eq!(r.data.entries.len(), r.data.runs.len());
        assert!(r.data.entries[..4].iter().all(|e| e == "1x1"));
        assert!(r.data.entries[4..].iter().all(|e| e == "2x2"));
        let fib_tasks = |n: u64| -> u64 {
            let (mut a, mut b) = (1u64, 1u64);
            for _ in 1..n {
                (a, b) = (b, a + b + 1);
            }
            b
        };
        for (e, run) in r.data.entries.iter().zip(&r.data.runs) {
            let requests = if e == "1x1" { 1 } else { 4 };
            assert_eq!(run.tasks as u64, requests * fib_tasks(12), "{e}");
            assert!(run.makespan_ns > 0);
        }
        assert!(r.text.starts_with("SIMULATED"), "{}", r.text);
        assert!(r.data.validation.is_empty());
        // Serialized, the report is the list of runs alone (what `--json` prints).
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json.as_array().map(Vec::len), Some(8));
    }

    /// `validate` runs the same graphs on this host's runtime: one row per entry and policy,
    /// each measured median beside the simulated makespan of the same entry and policy.
    #[test]
    fn validation_pairs_each_real_run_with_its_simulated_makespan() {
        let cfg = Config {
            workload: Workload::Fanout,
            size: Some(500),
            grid: "1x1,2x1".into(),
            policies: "las,nls".into(),
            validate: true,
            reps: 2,
            ..Config::default()
        };
        let r = run(&cfg).unwrap();
        let v = &r.data.validation;
        assert_eq!(v.len(), 2 * 2);
        for row in v {
            assert!(row.measured_ms > 0.0, "{row:?}");
            let sim = r
                .data
                .entries
                .iter()
                .zip(&r.data.runs)
                .find(|(e, run)| **e == row.grid && run.policy == row.policy)
                .map(|(_, run)| run.makespan_ns as f64 / 1e6)
                .unwrap();
            assert_eq!(row.simulated_ms, sim, "{row:?}");
        }
        assert!(
            r.text.contains("measured (median of 2 interleaved rounds)"),
            "{}",
            r.text
        );
    }

    /// The generated plan, calibrated on this host, simulated and run for real: one row per
    /// grid entry and policy, the calibration said in the text.
    #[test]
    fn plans_are_calibrated_simulated_and_validated() {
        let cfg = Config {
            workload: Workload::Plans,
            rows: 800,
            grid: "1x1,2x1".into(),
            policies: "las".into(),
            validate: true,
            reps: 1,
            ..Config::default()
        };
        let r = run(&cfg).unwrap();
        assert_eq!(r.data.runs.len(), 2);
        assert_eq!(r.data.validation.len(), 2);
        assert!(r.data.validation.iter().all(|v| v.measured_ms > 0.0));
        assert!(r.text.starts_with("calibrated on this host"), "{}", r.text);
    }

    /// Models saved by one run and loaded by another simulate alike: the second run does not
    /// calibrate again, so two commands compare the same model.
    #[test]
    fn saved_plan_models_are_reused_as_they_were() {
        let dir = std::env::temp_dir().join(format!("nearflow-models-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("plans.json");
        let first = Config {
            workload: Workload::Plans,
            rows: 600,
            grid: "1x1,2x2".into(),
            policies: "las,nls".into(),
            save_models: Some(file.clone()),
            ..Config::default()
        };
        let a = run(&first).unwrap();
        let again = Config {
            models: Some(file.clone()),
            save_models: None,
            ..first.clone()
        };
        let b = run(&again).unwrap();
        assert!(b.text.starts_with("plan models from"), "{}", b.text);
        let makespans = |r: &crate::Report<Simulated>| -> Vec<u64> {
            r.data.runs.iter().map(|x| x.makespan_ns).collect()
        };
        assert_eq!(makespans(&a), makespans(&b));
        // Not for task graphs, and not on a machine the models do not fit.
        let graph = Config {
            workload: Workload::Fib,
            models: Some(file.clone()),
            ..Config::default()
        };
        assert!(run(&graph).is_err());
        // A model that places work on a node this machine lacks is refused.
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        v["plans"][0][1]["operators"][0]["home"] = serde_json::json!(99);
        std::fs::write(&file, v.to_string()).unwrap();
        let e = run(&again).unwrap_err().to_string();
        assert!(e.contains("calibrated for another machine"), "{e}");
        std::fs::write(&file, "{}").unwrap();
        let e = run(&again).unwrap_err().to_string();
        assert!(e.contains("not a file of saved plan models"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A replicated store (as a model): every scan loses its home and no
    /// other operator changes; the run says so; other workloads refuse the setting.
    #[test]
    fn a_replicated_store_unhomes_the_scans_only() {
        let machine = nearflow_topo::from_synthetic("pack:2 [numa] core:2 pu:1").unwrap();
        let cfg = Config {
            topology: TopologySpec::Synthetic("pack:2 [numa] core:2 pu:1".into()),
            workload: Workload::Sp2bench,
            triples: 3000,
            queries: "q2".into(),
            concurrent: "2".into(),
            policies: "las".into(),
            ..Config::default()
        };
        let (plans, _) = calibrate::calibrated_plans(&cfg, &machine).unwrap();
        let mut replicated = plans.clone();
        let scans = replicate_store(&mut replicated);
        let homed = |p: &calibrate::NamedPlans| {
            p[0].1
                .operators
                .iter()
                .filter(|o| o.input_bytes_per_tuple > 0.0 && o.home.is_some())
                .count()
        };
        assert!(scans > 0 && homed(&plans) == scans, "every scan was homed");
        assert_eq!(homed(&replicated), 0);
        for (a, b) in plans[0].1.operators.iter().zip(&replicated[0].1.operators) {
            if a.input_bytes_per_tuple == 0.0 {
                assert_eq!(a, b, "only scans change");
            }
        }
        let r = run(&Config {
            store_placement: StorePlacement::Replicated,
            ..cfg.clone()
        })
        .unwrap();
        assert!(r
            .text
            .contains("store placement: replicated on each of the 2 nodes"));
        let e = run(&Config {
            workload: Workload::Fib,
            store_placement: StorePlacement::Replicated,
            ..cfg
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--store-placement is for --workload sp2bench"),
            "{e}"
        );
    }

    #[test]
    fn validation_needs_the_host() {
        let on_a_model = Config {
            topology: TopologySpec::Synthetic("pack:1 core:2 pu:1".into()),
            validate: true,
            ..Config::default()
        };
        let e = run(&on_a_model).unwrap_err().to_string();
        assert!(e.contains("needs this host's topology"), "{e}");
    }

    /// VWAP and SP²Bench plans validate too: a measured row beside every simulated
    /// policy and entry, each result checked by the real run.
    #[test]
    fn plan_workloads_validate_on_the_host() {
        let vwap = Config {
            workload: Workload::Vwap,
            ticks: 20_000,
            grid: "1x1,2x1".into(),
            policies: "las,nls".into(),
            validate: true,
            reps: 1,
            ..Config::default()
        };
        let r = run(&vwap).unwrap();
        assert_eq!(r.data.validation.len(), 2 * 2);
        assert!(r.text.contains("the VWAP plan on the real engine"));
        let sparql = Config {
            workload: Workload::Sp2bench,
            triples: 3000,
            queries: "q1,q2".into(),
            concurrent: "1,3".into(),
            policies: "las,nls".into(),
            validate: true,
            reps: 1,
            ..Config::default()
        };
        let r = run(&sparql).unwrap();
        assert_eq!(r.data.validation.len(), 2 * 2 * 2);
        for row in &r.data.validation {
            assert!(row.measured_ms > 0.0 && row.simulated_ms > 0.0, "{row:?}");
        }
        assert!(r.data.validation.iter().any(|v| v.grid == "q2 x3"));
    }

    #[test]
    fn grids_parse_and_bad_ones_are_errors() {
        assert_eq!(parse_grid("1x1, 4x4").unwrap(), vec![(1, 1), (4, 4)]);
        for bad in ["4", "0x1", "ax2", "100x100"] {
            assert!(parse_grid(bad).is_err(), "{bad}");
        }
    }
}
