//! `nearflow sim --las-figures`: the LAS paper's §6.2–6.4 (Figs. 5–10) in one command, SIMULATED.
//!
//! The eight queries of §6.1.1 (Q2, Q4, Q5a, Q6, Q7, Q8, Q9, Q11), one copy and 16 at once, LAS
//! against NLS with the nearflow allocator, LAS with the system allocator (§6.4), and LAS
//! against NLS with the store replicated on every node (a model), on
//! `e5310-smp` (§6.2, Figs. 5, 6, 10) and `e7-4820` (§6.3, Figs. 7, 8, 9). Each machine's plans
//! are calibrated once (or read from `models_dir/PRESET.json`, saved there on first use) and
//! every contender of that machine runs the same models. Then the same queries are validated on
//! this host (`--validate`: the real engine against the model of this host, LAS and NLS): a
//! simulated cell **counts** only where both policies' runs of that query and copy count came
//! within 20 % here. The paper's own result for each cell stands beside ours, as its text states
//! it (the figures' bars are not in the text).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nearflow_topo::TopologySpec;
use serde::Serialize;

use super::config::{Config, Workload};
use crate::chart::{log_bars, Bar};

/// The queries of §6.1.1.
pub const PAPER_QUERIES: &str = "q2,q4,q5a,q6,q7,q8,q9,q11";
/// The machines of §6.1.2.
pub const PAPER_MACHINES: [&str; 2] = ["e5310-smp", "e7-4820"];
/// A simulated cell counts when the host's measured and simulated times agree this well.
pub const VALID_WITHIN: f64 = 0.20;

/// What `--las-figures` runs besides `Config`'s data, packet and rounds settings.
#[derive(Clone, Debug, Default)]
pub struct FiguresConfig {
    /// Read each machine's plan models from `DIR/PRESET.json`, or save them there.
    pub models_dir: Option<PathBuf>,
    /// Draw the figures: `PREFIX-PRESET.svg`, one chart per machine.
    pub chart: Option<PathBuf>,
}

/// One query and copy count on one machine (all SIMULATED but `validated`).
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub machine: String,
    pub query: String,
    pub copies: usize,
    pub las_ms: f64,
    pub nls_ms: f64,
    /// NLS over LAS: above 1, LAS is faster.
    pub nls_over_las: f64,
    /// LAS with the system allocator over LAS with nearflow's: above 1, nearflow's is faster.
    pub system_over_nearflow: f64,
    /// The store replicated on every node (`StorePlacement::Replicated`, a model): LAS's time
    /// and NLS over LAS.
    pub las_replicated_ms: f64,
    pub nls_over_las_replicated: f64,
    /// Simulated over measured on this host, LAS and NLS (the validation).
    pub host_sim_over_meas: [f64; 2],
    /// Whether the cell counts (both within `VALID_WITHIN`).
    pub counts: bool,
    /// The paper's result for the cell, as its text states it.
    pub paper: &'static str,
    pub simulated: bool,
}

/// The paper's result for a cell (§6.2–6.4, as worded there).
pub fn paper_claim(machine: &str, query: &str, copies: usize) -> &'static str {
    match (machine, copies > 1, query) {
        ("e5310-smp", false, "q2") => "LAS almost 2× (Fig. 5)",
        ("e5310-smp", false, "q4" | "q6") => "LAS noticeably faster (Fig. 5)",
        ("e5310-smp", false, _) => "LAS ≥ NLS (Fig. 5)",
        ("e5310-smp", true, _) => {
            "LAS faster in almost every case (Fig. 6); allocator: minor gains, never worse (Fig. 10)"
        }
        (_, false, _) => "LAS ≥ NLS (Fig. 7)",
        (_, true, "q2") => "LAS 3.3× (Fig. 8); allocator ≈ 15 % (Fig. 9)",
        (_, true, "q4") => "LAS > 2× for several queries (Fig. 8); allocator ≈ 35 % (Fig. 9)",
        (_, true, _) => "LAS > 2× for several queries (Fig. 8); allocator never worse (Fig. 9)",
    }
}

/// Runs the figures (see the module docs).
pub fn las(cmd: &Config, fig: &FiguresConfig) -> Result<crate::Report<Vec<Cell>>> {
    let mut out = String::new();
    let base = Config {
        workload: Workload::Sp2bench,
        queries: PAPER_QUERIES.into(),
        concurrent: "1,16".into(),
        policies: "las,nls".into(),
        validate: false,
        csv: None,
        trace: None,
        models: None,
        save_models: None,
        ..cmd.clone()
    };
    // The validation on this host first: it decides which cells count.
    eprintln!("validating the eight plans on this host (real engine against its model)");
    let host = super::run(&Config {
        topology: TopologySpec::Host,
        allocators: "nearflow".into(),
        validate: true,
        ..base.clone()
    })?;
    let ratio = |q: &str, copies: usize, policy: &str| -> Option<f64> {
        host.data
            .validation
            .iter()
            .find(|r| r.grid == format!("{q} x{copies}") && r.policy == policy)
            .map(|r| r.simulated_ms / r.measured_ms)
    };
    writeln!(
        out,
        "LAS paper §6.2–6.4 (Figs. 5–10), SIMULATED; validated on this host ({})",
        nearflow_topo::host::cpu_label()
    )?;
    let mut cells = Vec::new();
    for preset in PAPER_MACHINES {
        // Every contender of a machine runs one calibration: kept in DIR, or in a temporary
        // file for this command.
        let (models, temporary) = match &fig.models_dir {
            Some(d) => (d.join(format!("{preset}.json")), false),
            None => (
                std::env::temp_dir().join(format!(
                    "nearflow-las-figures-{}-{preset}.json",
                    std::process::id()
                )),
                true,
            ),
        };
        let (load, save) = if models.exists() && !temporary {
            (Some(models.clone()), None)
        } else {
            if let Some(dir) = models.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            (None, Some(models.clone()))
        };
        eprintln!("simulating {preset}");
        let r = super::run(&Config {
            topology: TopologySpec::Preset(preset.into()),
            allocators: "nearflow,system".into(),
            models: load,
            save_models: save,
            ..base.clone()
        });
        let replicated = r.as_ref().ok().map(|_| {
            super::run(&Config {
                topology: TopologySpec::Preset(preset.into()),
                allocators: "nearflow".into(),
                models: Some(models.clone()),
                store_placement: super::StorePlacement::Replicated,
                ..base.clone()
            })
        });
        if temporary {
            std::fs::remove_file(&models).ok();
        }
        let r = r?;
        let rep = replicated.expect("run after a success")?;
        // The calibration's account lines lead the run's text.
        for line in r.text.lines() {
            if line.starts_with("calibrated") {
                writeln!(out, "{preset}: {line}")?;
            } else if line.starts_with("plan models") {
                // The file's own account of its calibration is long: its opening only.
                let short = line.split_once(": ").map_or(line, |(head, _)| head);
                writeln!(out, "{preset}: {short}), not calibrated again")?;
            }
        }
        let ms_in = |r: &crate::Report<super::Simulated>,
                     label: &str,
                     policy: &str,
                     alloc: &str|
         -> Result<f64> {
            r.data
                .entries
                .iter()
                .zip(&r.data.runs)
                .find(|(e, run)| *e == label && run.policy == policy && run.allocator == alloc)
                .map(|(_, run)| run.makespan_ns as f64 / 1e6)
                .with_context(|| format!("{preset}: no run of {label} {policy} {alloc}"))
        };
        let ms = |label: &str, policy: &str, alloc: &str| ms_in(&r, label, policy, alloc);
        for q in PAPER_QUERIES.split(',') {
            for copies in [1usize, 16] {
                let label = format!("{q} x{copies}");
                let (las, nls) = (
                    ms(&label, "las", "nearflow")?,
                    ms(&label, "nls", "nearflow")?,
                );
                let system = ms(&label, "las", "system")?;
                let las_rep = ms_in(&rep, &label, "las", "nearflow")?;
                let nls_rep = ms_in(&rep, &label, "nls", "nearflow")?;
                let v = [
                    ratio(q, copies, "las").unwrap_or(f64::NAN),
                    ratio(q, copies, "nls").unwrap_or(f64::NAN),
                ];
                cells.push(Cell {
                    machine: preset.into(),
                    query: q.into(),
                    copies,
                    las_ms: las,
                    nls_ms: nls,
                    nls_over_las: nls / las,
                    system_over_nearflow: system / las,
                    las_replicated_ms: las_rep,
                    nls_over_las_replicated: nls_rep / las_rep,
                    host_sim_over_meas: v,
                    counts: v.iter().all(|x| (x - 1.0).abs() <= VALID_WITHIN),
                    paper: paper_claim(preset, q, copies),
                    simulated: true,
                });
            }
        }
    }
    out.push_str(&table(&cells)?);
    if let Some(prefix) = &fig.chart {
        if let Some(dir) = prefix.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        for preset in PAPER_MACHINES {
            let path = chart_path(prefix, preset);
            chart(&path, preset, &cells)?;
            writeln!(out, "chart: {}", path.display())?;
        }
    }
    Ok(crate::Report::new(cells, out))
}

fn table(cells: &[Cell]) -> Result<String> {
    let mut out = String::new();
    writeln!(
        out,
        "{:<10} {:<5} {:>4} {:>10} {:>10} {:>8} {:>8} {:>10} {:>13} {:>6}  paper",
        "machine",
        "query",
        "×",
        "LAS ms",
        "NLS ms",
        "NLS/LAS",
        "sys/nf",
        "repl. N/L",
        "host sim/meas",
        "counts"
    )?;
    for c in cells {
        writeln!(
            out,
            "{:<10} {:<5} {:>4} {:>10.3} {:>10.3} {:>8.2} {:>8.2} {:>10.2} {:>6.2}/{:<6.2} {:>6}  {}",
            c.machine,
            c.query,
            c.copies,
            c.las_ms,
            c.nls_ms,
            c.nls_over_las,
            c.system_over_nearflow,
            c.nls_over_las_replicated,
            c.host_sim_over_meas[0],
            c.host_sim_over_meas[1],
            if c.counts { "yes" } else { "no" },
            c.paper
        )?;
    }
    let counted: Vec<&Cell> = cells.iter().filter(|c| c.counts).collect();
    let behind = counted.iter().filter(|c| c.nls_over_las < 1.0).count();
    writeln!(
        out,
        "{} of {} cells count (host validation within {:.0} %); among them LAS is behind NLS in {}",
        counted.len(),
        cells.len(),
        VALID_WITHIN * 100.0,
        behind
    )?;
    Ok(out)
}

fn chart_path(prefix: &Path, preset: &str) -> PathBuf {
    let stem = prefix.file_stem().map_or_else(
        || "las-figures".into(),
        |s| s.to_string_lossy().into_owned(),
    );
    prefix.with_file_name(format!("{stem}-{preset}.svg"))
}

/// One machine's figure: a group per query and copy count, bars LAS, NLS, LAS with the
/// system allocator and LAS over a replicated store (log time axis, as the paper's Figs. 7–9).
fn chart(path: &Path, preset: &str, cells: &[Cell]) -> Result<()> {
    let mine: Vec<&Cell> = cells.iter().filter(|c| c.machine == preset).collect();
    let groups: Vec<String> = mine
        .iter()
        .map(|c| {
            format!(
                "{} ×{}{}",
                c.query,
                c.copies,
                if c.counts { "" } else { " (n/v)" }
            )
        })
        .collect();
    let series = vec![
        "LAS".to_string(),
        "NLS".to_string(),
        "LAS, system allocator".to_string(),
        "LAS, store replicated per node".to_string(),
    ];
    let bars: Vec<Vec<Bar>> = mine
        .iter()
        .map(|c| {
            vec![
                Bar::Secs(c.las_ms / 1e3),
                Bar::Secs(c.nls_ms / 1e3),
                Bar::Secs(c.system_over_nearflow * c.las_ms / 1e3),
                Bar::Secs(c.las_replicated_ms / 1e3),
            ]
        })
        .collect();
    log_bars(
        path,
        &format!("SP²Bench on {preset}, SIMULATED (LAS paper Figs. 5–10); n/v: not validated on the host"),
        "simulated time to answer (log scale; lower is better)",
        &groups,
        &series,
        &bars,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paper_claims_name_their_figures() {
        assert!(paper_claim("e7-4820", "q2", 16).contains("3.3×"));
        assert!(paper_claim("e7-4820", "q4", 16).contains("35 %"));
        assert!(paper_claim("e5310-smp", "q2", 1).contains("2×"));
        for m in PAPER_MACHINES {
            for q in PAPER_QUERIES.split(',') {
                for c in [1, 16] {
                    assert!(paper_claim(m, q, c).contains("Fig."), "{m} {q} {c}");
                }
            }
        }
    }

    /// The whole command on a few thousand generated triples: 32 cells, each simulated, each
    /// with its paper claim, its validation ratios and a verdict that follows from them; the
    /// saved models are reused on the second run, which then gives the same simulated times;
    /// the charts are written.
    #[test]
    fn the_figures_run_end_to_end_and_reuse_their_models() {
        let dir = std::env::temp_dir().join(format!("nearflow-figures-{}", std::process::id()));
        let cmd = Config {
            triples: 3000,
            reps: 1,
            ..Config::default()
        };
        let fig = FiguresConfig {
            models_dir: Some(dir.join("models")),
            chart: Some(dir.join("charts/f.svg")),
        };
        let first = las(&cmd, &fig).unwrap();
        assert_eq!(first.data.len(), 2 * 8 * 2);
        for c in &first.data {
            assert!(c.simulated && c.las_ms > 0.0 && c.nls_ms > 0.0, "{c:?}");
            assert!(!c.paper.is_empty());
            let within = c
                .host_sim_over_meas
                .iter()
                .all(|r| (r - 1.0).abs() <= VALID_WITHIN);
            assert_eq!(c.counts, within, "{c:?}");
        }
        assert!(dir.join("models/e7-4820.json").exists());
        assert!(dir.join("charts/f-e5310-smp.svg").exists());
        let second = las(&cmd, &fig).unwrap();
        assert!(second.text.contains("not calibrated again"));
        for (a, b) in first.data.iter().zip(&second.data) {
            assert_eq!(
                (a.las_ms, a.nls_ms),
                (b.las_ms, b.nls_ms),
                "{} {}",
                a.machine,
                a.query
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn chart_files_are_named_per_machine() {
        assert_eq!(
            chart_path(Path::new("out/figs.svg"), "e7-4820"),
            PathBuf::from("out/figs-e7-4820.svg")
        );
    }
}
