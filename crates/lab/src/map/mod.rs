//! `nearflow map`: StreamMap's workflow (`streammap-cache-topology-mapping.txt` §IV.A, Fig. 7)
//! — profile the application once, compute each mapper's thread-to-PU mapping for the target
//! machine, and measure them beside the OS default, a random mapping and Exhaustive's best and
//! worst (§V, Figs. 12, 14, 15), normalised to the single-threaded OS-default run.
//!
//! Measuring needs the machine: on the host the mappings run for real (the `pinned` policy,
//! workers bound to their PUs; the OS default runs the same threads unbound); on any other
//! machine `--simulate` runs them in the simulator (SIMULATED), and without it only the
//! mappings are printed.

use anyhow::{bail, Context, Result};
use nearflow_apps::{lois, vwap};
use nearflow_map::{exhaustive, CacheTree, Mapper, Profile};
use nearflow_policy::PolicyKind;
use nearflow_rt::{Pinning, Runtime};

use serde::Serialize;

use crate::harness::{load_machine, parse_list};
use apps::{check_threads, App};
use report::{fill, median, random_mapping, Mappings, Row};

pub mod apps;
mod config;
pub mod online;
pub mod report;
pub mod sim;

pub use config::Config;

fn app_of(cmd: &Config) -> Result<App> {
    Ok(match cmd.app.as_str() {
        "vwap" => {
            let window = match cmd.window.as_str() {
                "small" => 5,
                "large" => 75_000,
                w => w
                    .parse::<usize>()
                    .ok()
                    .filter(|&w| w > 0)
                    .with_context(|| {
                        format!("--window {w}: expected small, large or a number > 0")
                    })?,
            };
            App::Vwap {
                ticks: vwap::generate(cmd.ticks, 0x5eed),
                window,
            }
        }
        "lois" => App::Lois {
            samples: lois::generate(cmd.samples, 16, 0x1015),
            cfg: lois::Config::default(),
        },
        other => bail!("unknown --app {other:?}: expected vwap or lois"),
    })
}

/// What `map` found: each thread count's mappings, or the online run.
#[derive(Serialize, Debug, Clone)]
#[serde(untagged)]
pub enum Mapped {
    Offline(Vec<Mappings>),
    Online(online::Online),
}

/// Profiles the application, maps it with every mapper and measures the mappings (on the host,
/// or SIMULATED), or runs the online re-mapping.
pub fn run(cmd: &Config) -> Result<crate::Report<Mapped>> {
    let threads: Vec<usize> = parse_list(&cmd.threads)?;
    for &t in &threads {
        check_threads(&cmd.app, t)?;
    }
    if cmd.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    if !(0.0..1.0).contains(&cmd.margin) {
        bail!("--margin must be in [0, 1)");
    }
    if cmd.online {
        if threads.len() != 1 {
            bail!("--online takes one thread count");
        }
        let (online, text) = online::run(cmd, threads[0])?;
        return Ok(crate::Report::new(Mapped::Online(online), text));
    }
    let mappers: Vec<Mapper> = if cmd.mapper == "all" {
        Mapper::ALL.to_vec()
    } else {
        parse_list(&cmd.mapper)?
    };
    let target = load_machine(&cmd.topology)?;
    let app = app_of(cmd)?;
    let measure_host = !cmd.no_measure && !cmd.simulate && target.source().is_host();
    let simulate = cmd.simulate && !cmd.no_measure;
    let sim_packet =
        cmd.packet_bytes
            .unwrap_or_else(|| nearflow_flow::default_packet_bytes(&target)) as u64;
    let mut reports = Vec::new();
    let baseline = if measure_host {
        let one = Runtime::builder(nearflow_topo::from_synthetic("pack:1 core:1 pu:1")?)
            .policy(PolicyKind::Pinned)
            .build()?;
        let mut v: Vec<f64> = (0..cmd.repeat)
            .map(|_| {
                app.run(&one, 1, None, cmd.packet_bytes, false)
                    .map(|r| r.throughput())
            })
            .collect::<Result<_>>()?;
        Some(median(&mut v))
    } else if simulate {
        if !cmd.quiet {
            eprintln!("calibrating {} with 1 thread on this host …", app.label());
        }
        Some(app.calibrate(1, sim_packet)?.throughput(&target, &[0])?)
    } else {
        None
    };
    for (k, &n) in threads.iter().enumerate() {
        let profile = match &cmd.profile {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read profile {}", p.display()))?;
                let prof = Profile::from_json(&text)
                    .with_context(|| format!("profile {}", p.display()))?;
                if prof.threads.len() != n {
                    bail!(
                        "profile {} has {} threads, not {n}",
                        p.display(),
                        prof.threads.len()
                    );
                }
                prof
            }
            None => {
                if !cmd.quiet {
                    eprintln!("profiling {} with {n} threads …", app.label());
                }
                app.profile(n, cmd.packet_bytes)?
            }
        };
        if k == 0 {
            if let Some(out) = &cmd.profile_out {
                std::fs::write(out, serde_json::to_string_pretty(&profile)?)
                    .with_context(|| format!("cannot write {}", out.display()))?;
            }
        }
        let slots = n.div_ceil(target.pu_count());
        let tree = CacheTree::new(&target).with_slots(slots);
        let mut profile = profile;
        let sim = if simulate {
            if !cmd.quiet {
                eprintln!(
                    "calibrating {} with {n} threads on this host …",
                    app.label()
                );
            }
            let sim = app.calibrate(n, sim_packet)?;
            // Holistic's second profiling run (§IV.B.4): the TreeMatch-S mapping, with the
            // misses counted — here the simulator's, per PU, shared by the PU's threads.
            let first = nearflow_map::map(Mapper::TreeMatchS, &tree, &profile)?;
            let per_pu = sim.dram_bytes(&target, &first)?;
            let on = |p: usize| first.iter().filter(|&&q| q == p).count().max(1) as f64;
            profile.contention = first.iter().map(|&p| per_pu[p] as f64 / on(p)).collect();
            profile.contention_unit = nearflow_map::ContentionUnit::SimulatedLlcMisses;
            profile.notes.retain(|n| !n.contains("contention ="));
            profile.notes.push(format!(
                "contention = bytes each thread read from memory in a simulated run of the TreeMatch-S mapping on {} (SIMULATED)",
                target.label()
            ));
            Some(sim)
        } else {
            None
        };
        let mut rows: Vec<Row> = Vec::new();
        for &m in mappers.iter().filter(|&&m| m != Mapper::Exhaustive) {
            let r = nearflow_map::map(m, &tree, &profile);
            rows.push(Row {
                name: m.name().into(),
                pus: r.as_ref().map(Clone::clone).unwrap_or_default(),
                tuples_per_s: None,
                normalised: None,
                error: r.err().map(|e| e.to_string()),
            });
        }
        rows.push(Row {
            name: "random".into(),
            pus: random_mapping(&tree, n, 0x5eed + n as u64),
            tuples_per_s: None,
            normalised: None,
            error: None,
        });
        let all = if mappers.contains(&Mapper::Exhaustive) {
            Some(exhaustive::mappings(&tree, n, cmd.max_exhaustive))
        } else {
            None
        };
        let mut report = Mappings {
            app: app.label(),
            machine: target.label(),
            threads: n,
            pus: target.pu_count(),
            measured: if measure_host {
                format!("measured on {}", nearflow_topo::host::cpu_label())
            } else if simulate {
                "SIMULATED".into()
            } else {
                "not measured".into()
            },
            profile,
            rows,
            exhaustive_mappings: None,
            baseline_tuples_per_s: baseline,
            found_best: Vec::new(),
        };
        match &all {
            Some(Ok(list)) => report.exhaustive_mappings = Some(list.len()),
            Some(Err(e)) => report.rows.push(Row {
                name: "exhaustive".into(),
                pus: Vec::new(),
                tuples_per_s: None,
                normalised: None,
                error: Some(e.to_string()),
            }),
            None => {}
        }
        if measure_host {
            let list = match &all {
                Some(Ok(l)) => l.clone(),
                _ => Vec::new(),
            };
            measure_on_host(cmd, &app, &target, n, &mut report, &list)?;
        } else if let Some(sim) = &sim {
            let list = match &all {
                Some(Ok(l)) => l.clone(),
                _ => Vec::new(),
            };
            let mut eval = |pus: Option<&[usize]>| -> Result<Option<f64>> {
                pus.map(|p| sim.throughput(&target, p)).transpose()
            };
            fill(&mut report, &list, 1, &mut eval)?;
        }
        reports.push(report);
    }
    let mut text = String::new();
    for r in &reports {
        report::text(&mut text, r)?;
    }
    Ok(crate::Report::new(Mapped::Offline(reports), text))
}

/// Runs every mapping on the host, `cmd.repeat` rounds ([`fill`]), checking every run's
/// result is the same.
fn measure_on_host(
    cmd: &Config,
    app: &App,
    host: &nearflow_topo::Machine,
    n: usize,
    report: &mut Mappings,
    exhaustive: &[Vec<usize>],
) -> Result<()> {
    if !cmd.quiet {
        eprintln!(
            "measuring {n} threads: {} rounds over the mappings and the OS default …",
            cmd.repeat
        );
    }
    let bound = Runtime::builder(host.clone())
        .policy(PolicyKind::Pinned)
        .pinning(Pinning::Pu)
        .build()?;
    let unbound = Runtime::builder(nearflow_topo::from_synthetic(&format!(
        "pack:1 core:{n} pu:1"
    ))?)
    .policy(PolicyKind::Pinned)
    .build()?;
    let mut checksum = None;
    let mut eval = |pus: Option<&[usize]>| -> Result<Option<f64>> {
        let r = match pus {
            Some(p) => app.run(&bound, n, Some(p), cmd.packet_bytes, false)?,
            None => app.run(&unbound, n, None, cmd.packet_bytes, false)?,
        };
        if *checksum.get_or_insert(r.checksum) != r.checksum {
            bail!("mapping {pus:?} computed a different result: the engine is broken");
        }
        Ok(Some(r.throughput()))
    };
    fill(report, exhaustive, cmd.repeat, &mut eval)
}
