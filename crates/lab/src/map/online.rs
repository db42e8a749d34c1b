//! `nearflow map --online`: re-mapping while the application runs — StreamMap's future work
//! ("continuously monitor and adjust thread mappings at runtime", §IV.B.5), shown on a VWAP
//! run whose behaviour changes halfway: its windows switch from small (5 trades) to large
//! (75,000).
//!
//! The run starts with the mapper's mapping for an offline profile of the small-window
//! behaviour. Every `--period-ms` a monitor takes the engine's running profile
//! (`PlanHandle::profile_now`), keeps what happened since the last look (communication and
//! state moves) and each thread's working set so far, asks the mapper for a mapping, and moves
//! the threads (`PlanHandle::remap`) when `nearflow_map::cost` predicts the new mapping cheaper
//! by more than `--margin`. Side by side, the same run keeps its first mapping all along.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use nearflow_apps::vwap;
use nearflow_flow::{PlanBuilder, ThreadStats};
use nearflow_map::{CacheTree, ContentionUnit, Mapper, Profile};
use nearflow_policy::PolicyKind;
use nearflow_rt::{Pinning, Runtime};
use serde::Serialize;

use super::apps::{thread_name, App};
use super::config::Config;
use crate::harness::load_machine;

/// One move of the monitor.
#[derive(Serialize, Debug, Clone)]
pub struct Move {
    pub at_ms: f64,
    pub from: Vec<usize>,
    pub to: Vec<usize>,
    pub cost_before: f64,
    pub cost_after: f64,
}

#[derive(Serialize, Debug, Clone)]
pub struct Online {
    pub machine: String,
    pub app: String,
    pub threads: usize,
    pub mapper: String,
    pub first_mapping: Vec<usize>,
    /// Input tuples per second, medians: first mapping kept, and re-mapped online.
    pub static_tuples_per_s: f64,
    pub online_tuples_per_s: f64,
    /// The moves of the last online run.
    pub moves: Vec<Move>,
    /// Looks the monitor took in that run.
    pub looks: usize,
}

/// Runs the first mapping kept and the re-mapped run, `cmd.repeat` rounds each, interleaved.
pub fn run(cmd: &Config, threads: usize) -> Result<(Online, String)> {
    use std::fmt::Write;
    let host = load_machine(&cmd.topology)?;
    if !host.source().is_host() {
        bail!(
            "--online runs on this host: it moves real threads (drop --preset/--synthetic/--xml)"
        );
    }
    if cmd.app != "vwap" {
        bail!(
            "--online runs VWAP with a window that changes halfway; --app {} is not supported",
            cmd.app
        );
    }
    if threads < 2 {
        bail!("--online needs at least 2 threads");
    }
    let mapper: Mapper = if cmd.mapper == "all" {
        Mapper::Holistic
    } else {
        cmd.mapper.parse()?
    };
    if mapper == Mapper::Exhaustive {
        bail!("--online needs a profile-driven mapper (treematch, treematch-s or holistic)");
    }
    let ticks = vwap::generate(cmd.ticks, 0x5eed);
    let window = vwap::Window {
        first: 5,
        then: 75_000,
        from_seq: cmd.ticks / 2,
    };
    let expect = vwap::checksum(&vwap::reference_window(&ticks, window));
    // The first mapping: an offline profile of the small-window behaviour (§IV.A).
    let small = App::Vwap {
        ticks: ticks[..ticks.len() / 2].to_vec(),
        window: 5,
    };
    let tree = CacheTree::new(&host).with_slots(threads.div_ceil(host.pu_count()));
    let profile = small.profile(threads, cmd.packet_bytes)?;
    let first = nearflow_map::map(mapper, &tree, &profile)?;
    let rt = Runtime::builder(host.clone())
        .policy(PolicyKind::Pinned)
        .pinning(Pinning::Pu)
        .build()?;
    let names: Vec<String> = (0..threads)
        .map(|i| thread_name(&small, threads, i))
        .collect();
    let period = Duration::from_millis(cmd.period_ms.max(1));
    let mut stat = Vec::new();
    let mut online = Vec::new();
    let mut last = (Vec::new(), 0);
    for round in 0..cmd.repeat {
        if !cmd.quiet {
            eprintln!(
                "round {}/{}: first mapping kept, then re-mapped online …",
                round + 1,
                cmd.repeat
            );
        }
        for adapt in [false, true] {
            let mut b = PlanBuilder::for_runtime(&rt);
            if let Some(p) = cmd.packet_bytes {
                b.packet_bytes(p);
            }
            // Both runs keep the accounting, so that they differ only by the monitor.
            b.profile_threads(true);
            b.on_thread(Some(0));
            let src = b.source(ticks.clone());
            let sink = vwap::build_threads_window(&mut b, src, threads, window);
            let mut plan = b.build()?;
            plan.map_threads(&rt, &first)?;
            let t0 = Instant::now();
            let handle = plan.submit(&rt);
            let mut moves = Vec::new();
            let mut looks = 0;
            if adapt {
                let mut current = first.clone();
                let mut prev: Option<ThreadStats> = None;
                while !handle.is_done() {
                    std::thread::sleep(period);
                    let Some(now) = handle.profile_now() else {
                        break;
                    };
                    looks += 1;
                    let p = window_profile(&names, &now, prev.as_ref(), &handle.threads_of());
                    prev = Some(now);
                    if let Some((cand, before, after)) =
                        nearflow_map::better(mapper, &tree, &p, &current, cmd.margin)?
                    {
                        handle.remap(&cand)?;
                        moves.push(Move {
                            at_ms: t0.elapsed().as_secs_f64() * 1e3,
                            from: current.clone(),
                            to: cand.clone(),
                            cost_before: before,
                            cost_after: after,
                        });
                        current = cand;
                    }
                }
            }
            let out = handle.wait()?;
            if vwap::checksum(&out.take(&sink)) != expect {
                bail!("the re-mapped run's bargains differ from the reference");
            }
            let tput = ticks.len() as f64 / out.stats.elapsed.as_secs_f64();
            if adapt {
                online.push(tput);
                last = (moves, looks);
            } else {
                stat.push(tput);
            }
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let report = Online {
        machine: format!("host: {}", nearflow_topo::host::cpu_label()),
        app: format!(
            "vwap, window 5 then 75,000 from tick {}, {} ticks",
            window.from_seq,
            ticks.len()
        ),
        threads,
        mapper: mapper.name().into(),
        first_mapping: first.clone(),
        static_tuples_per_s: med(&mut stat),
        online_tuples_per_s: med(&mut online),
        moves: last.0,
        looks: last.1,
    };
    let mut out = String::new();
    writeln!(
        out,
        "online re-mapping — {} on {} (measured)",
        report.app, report.machine
    )?;
    writeln!(
        out,
        "  {threads} threads, {mapper}; first mapping {}",
        nearflow_map::describe(&names, &first)
    )?;
    writeln!(
        out,
        "  first mapping kept: {:.3} M tuples/s",
        report.static_tuples_per_s / 1e6
    )?;
    writeln!(
        out,
        "  re-mapped online:   {:.3} M tuples/s ({:.2}x); last run: {} looks, {} moves",
        report.online_tuples_per_s / 1e6,
        report.online_tuples_per_s / report.static_tuples_per_s,
        report.looks,
        report.moves.len()
    )?;
    for m in &report.moves {
        writeln!(
            out,
            "    at {:>7.1} ms: {} (predicted cost {:.3e} → {:.3e})",
            m.at_ms,
            nearflow_map::describe(&names, &m.to),
            m.cost_before,
            m.cost_after
        )?;
    }
    Ok((report, out))
}

/// The profile of what happened since `prev` (communication and state moves), with each
/// thread's working set so far (the largest state of its operators plus nothing for shared
/// ones).
fn window_profile(
    names: &[String],
    now: &ThreadStats,
    prev: Option<&ThreadStats>,
    threads_of: &[Option<usize>],
) -> Profile {
    let n = names.len();
    let diff = |a: &Vec<Vec<u64>>, b: Option<&Vec<Vec<u64>>>| -> Vec<Vec<u64>> {
        (0..n)
            .map(|i| (0..n).map(|j| a[i][j] - b.map_or(0, |b| b[i][j])).collect())
            .collect()
    };
    let communication = diff(&now.communication, prev.map(|p| &p.communication));
    let moves = diff(&now.state_moves, prev.map(|p| &p.state_moves));
    let correlation = (0..n)
        .map(|i| (0..n).map(|j| communication[i][j] + moves[i][j]).collect())
        .collect();
    let mut working = vec![0.0; n];
    for (op, t) in threads_of.iter().enumerate() {
        if let Some(t) = t {
            working[*t] += now.state_bytes[op] as f64;
        }
    }
    Profile {
        app: "online".into(),
        threads: names.to_vec(),
        communication,
        correlation,
        contention: working,
        contention_unit: ContentionUnit::WorkingSetBytes,
        notes: Vec::new(),
    }
}
