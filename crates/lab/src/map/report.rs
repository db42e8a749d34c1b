//! `nearflow map`'s report: its rows, how they are measured ([`fill`]) and printed.

use anyhow::Result;
use nearflow_map::{CacheTree, Profile};
use serde::Serialize;

/// One mapping and what it measured.
#[derive(Serialize, Debug, Clone)]
pub struct Row {
    /// treematch, treematch-s, holistic, exhaustive-best, exhaustive-worst, os-default, random.
    pub name: String,
    /// PU of each thread; empty for the OS default (unbound).
    pub pus: Vec<usize>,
    /// Input tuples per second (median of the runs), when measured.
    pub tuples_per_s: Option<f64>,
    /// Throughput over the single-threaded OS-default run's.
    pub normalised: Option<f64>,
    /// Why the mapper gave no mapping, if it did not.
    pub error: Option<String>,
}

/// One thread count's mappings and what they measured.
#[derive(Serialize, Debug, Clone)]
pub struct Mappings {
    pub app: String,
    pub machine: String,
    pub threads: usize,
    /// PUs of the machine mapped onto.
    pub pus: usize,
    /// "host", "SIMULATED" or "not measured".
    pub measured: String,
    pub profile: Profile,
    pub rows: Vec<Row>,
    /// Mappings Exhaustive enumerated up to symmetry (and measured, when measuring).
    pub exhaustive_mappings: Option<usize>,
    /// The single-threaded OS-default run, tuples per second.
    pub baseline_tuples_per_s: Option<f64>,
    /// The mappers whose mapping measured within 2 % of Exhaustive's best.
    pub found_best: Vec<String>,
}

/// Measures every distinct mapping of the report (the mappers', random, each of
/// `exhaustive`) and the OS default with `eval` (None: not available there), `repeat` rounds
/// interleaved so that drift of a noisy host hits them alike; fills in the rows, adds the OS
/// default and Exhaustive's best and worst, and names the mappers that found the best.
pub fn fill(
    report: &mut Mappings,
    exhaustive: &[Vec<usize>],
    repeat: usize,
    eval: &mut Eval<'_>,
) -> Result<()> {
    let mut cands: Vec<Option<Vec<usize>>> = vec![None];
    let index = |pus: &Vec<usize>, cands: &mut Vec<Option<Vec<usize>>>| -> usize {
        let c = Some(pus.clone());
        match cands.iter().position(|x| *x == c) {
            Some(i) => i,
            None => {
                cands.push(c);
                cands.len() - 1
            }
        }
    };
    let row_at: Vec<Option<usize>> = report
        .rows
        .iter()
        .map(|r| r.error.is_none().then(|| index(&r.pus, &mut cands)))
        .collect();
    let ex_at: Vec<usize> = exhaustive.iter().map(|p| index(p, &mut cands)).collect();
    let mut figures: Vec<Vec<f64>> = vec![Vec::new(); cands.len()];
    for _ in 0..repeat {
        for (i, c) in cands.iter().enumerate() {
            if let Some(t) = eval(c.as_deref())? {
                figures[i].push(t);
            }
        }
    }
    let med: Vec<Option<f64>> = figures
        .iter_mut()
        .map(|v| (!v.is_empty()).then(|| median(v)))
        .collect();
    let base = report.baseline_tuples_per_s.unwrap_or(f64::NAN);
    for (r, at) in report.rows.iter_mut().zip(&row_at) {
        if let Some(i) = at {
            r.tuples_per_s = med[*i];
            r.normalised = med[*i].map(|t| t / base);
        }
    }
    report.rows.push(Row {
        name: "os-default".into(),
        pus: Vec::new(),
        tuples_per_s: med[0],
        normalised: med[0].map(|t| t / base),
        error: med[0]
            .is_none()
            .then(|| "not modelled: the simulator has no OS scheduler".into()),
    });
    if !exhaustive.is_empty() {
        let ex: Vec<f64> = ex_at.iter().map(|&i| med[i].unwrap_or(f64::NAN)).collect();
        let (bi, wi) = (argmax(&ex, true), argmax(&ex, false));
        for (name, i) in [("exhaustive-best", bi), ("exhaustive-worst", wi)] {
            report.rows.push(Row {
                name: name.into(),
                pus: exhaustive[i].clone(),
                tuples_per_s: Some(ex[i]),
                normalised: Some(ex[i] / base),
                error: None,
            });
        }
        let best = ex[bi];
        report.found_best = report
            .rows
            .iter()
            .filter(|r| !r.name.starts_with("exhaustive") && r.name != "os-default")
            .filter(|r| r.tuples_per_s.is_some_and(|t| t >= 0.98 * best))
            .map(|r| r.name.clone())
            .collect();
    }
    Ok(())
}

/// Measures a mapping (None: the OS default): tuples per second, or None where unavailable.
pub type Eval<'a> = dyn FnMut(Option<&[usize]>) -> Result<Option<f64>> + 'a;

fn argmax(v: &[f64], max: bool) -> usize {
    let mut best = 0;
    for i in 1..v.len() {
        if (max && v[i] > v[best]) || (!max && v[i] < v[best]) {
            best = i;
        }
    }
    best
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A mapping drawn at random (seeded): threads on distinct places of the tree.
pub fn random_mapping(tree: &CacheTree, n: usize, seed: u64) -> Vec<usize> {
    let mut rng = nearflow_apps::rng::Rng::new(seed);
    let mut places: Vec<usize> = (0..tree.capacity()).map(|p| p / tree.slots).collect();
    for i in (1..places.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        places.swap(i, j);
    }
    places.truncate(n);
    places
}

/// The text of one thread count's mappings.
pub fn text(out: &mut String, r: &Mappings) -> std::fmt::Result {
    use std::fmt::Write;
    writeln!(
        out,
        "{} — {} threads on {} ({})",
        r.app, r.threads, r.machine, r.measured
    )?;
    for note in &r.profile.notes {
        writeln!(out, "  profile: {note}")?;
    }
    if let Some(b) = r.baseline_tuples_per_s {
        let what = if r.measured == "SIMULATED" {
            "1 thread on PU 0"
        } else {
            "1-thread OS default"
        };
        writeln!(out, "  {what}: {:.3} M tuples/s (= 1.00)", b / 1e6)?;
    }
    writeln!(
        out,
        "  {:<18} {:>10} {:>8}  mapping",
        "mapping", "Mtuples/s", "norm."
    )?;
    for row in &r.rows {
        let tput = row
            .tuples_per_s
            .map_or("-".into(), |t| format!("{:.3}", t / 1e6));
        let norm = row.normalised.map_or("-".into(), |t| format!("{t:.2}"));
        let what = match (&row.error, row.pus.is_empty()) {
            (Some(e), _) => format!("({e})"),
            (None, true) => "unbound".into(),
            (None, false) => nearflow_map::describe(&r.profile.threads, &row.pus),
        };
        writeln!(out, "  {:<18} {tput:>10} {norm:>8}  {what}", row.name)?;
    }
    if let Some(n) = r.exhaustive_mappings {
        writeln!(
            out,
            "  exhaustive: {n} mappings up to the cache tree's symmetries"
        )?;
    }
    if r.threads > r.pus {
        writeln!(
            out,
            "  note: {} threads share {} PUs; the mappers weigh communication, sharing and cache \
             contention, not CPU load (StreamMap maps at most one thread per core)",
            r.threads, r.pus
        )?;
    }
    if !r.found_best.is_empty() {
        writeln!(out, "  within 2 % of the best: {}", r.found_best.join(", "))?;
    }
    writeln!(out)?;
    Ok(())
}
