//! What every experiment shares: the [`Report`] it returns, the statistics of interleaved
//! rounds ([`summary`], [`median`]), CSV tables, progress bars, unit labels, and the runtimes
//! it starts ([`start_runtime`]). Benchmarks report figures; they never assert on time.

use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nearflow_topo::{Machine, TopologySpec};
use serde::Serialize;

/// What an experiment returns: its results as data, and the same results as text tables.
/// It serializes as its data alone (what `--json` prints).
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct Report<T> {
    /// The results.
    pub data: T,
    /// The tables and notes, as `nearflow` prints them on stdout.
    #[serde(skip)]
    pub text: String,
    /// What `nearflow` prints on stderr beside the JSON document (e.g. the host's phase), which
    /// `text` already holds.
    #[serde(skip)]
    pub notes: String,
}

impl<T> Report<T> {
    /// A report of `data` with its text.
    pub fn new(data: T, text: String) -> Report<T> {
        Report {
            data,
            text,
            notes: String::new(),
        }
    }

    /// The same with notes for stderr.
    pub fn with_notes(mut self, notes: String) -> Report<T> {
        self.notes = notes;
        self
    }
}

/// Median and 10th/90th percentiles of a non-empty sample.
///
/// # Panics
/// On an empty sample.
pub fn summary(mut v: Vec<f64>) -> (f64, [f64; 2]) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), [at(0.1), at(0.9)])
}

/// Loads the machine `spec` names, printing what hwloc accepted with a caveat on stderr.
pub fn load_machine(spec: &TopologySpec) -> Result<Machine> {
    let m = spec
        .load()
        .with_context(|| format!("cannot build topology {spec:?}"))?;
    for w in m.warnings() {
        eprintln!("warning: {w}");
    }
    Ok(m)
}

/// Parses a comma-separated list.
pub fn parse_list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>>
where
    T::Err: std::fmt::Display,
{
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<T>().map_err(|e| anyhow::anyhow!("`{x}`: {e}")))
        .collect()
}

/// A runtime for `machine`, `policy`, `pinning`, an optional trace and the allocator setting,
/// checked to be in effect; see [`start_runtime`], through which every runtime of the
/// experiments starts.
pub fn build_runtime(
    machine: Machine,
    policy: nearflow_policy::PolicyKind,
    pinning: nearflow_rt::Pinning,
    trace: bool,
    allocator: nearflow_rt::AllocatorKind,
) -> Result<nearflow_rt::Runtime> {
    start_runtime(
        nearflow_rt::Runtime::builder(machine)
            .policy(policy)
            .pinning(pinning)
            .trace(trace),
        allocator,
    )
}

/// Starts the runtime `builder` describes with `allocator`, failing if another allocator is in
/// effect (a column of a table would otherwise be mislabelled: a program that asks for the
/// nearflow allocator must install it as its global allocator, as `nearflow-lab` does).
pub fn start_runtime(
    builder: nearflow_rt::Builder,
    allocator: nearflow_rt::AllocatorKind,
) -> Result<nearflow_rt::Runtime> {
    builder
        .allocator(allocator)
        .build_checked()
        .context("cannot start the runtime")
}

/// A CSV table: a header row and rows of already formatted fields (the benches' fields are
/// names and numbers, which need no quoting).
pub struct Csv {
    text: String,
}

impl Csv {
    /// A table with these column names.
    pub fn new<S: AsRef<str>>(header: &[S]) -> Csv {
        let mut c = Csv {
            text: String::new(),
        };
        c.row(header);
        c
    }

    /// Appends a row.
    pub fn row<S: AsRef<str>>(&mut self, fields: &[S]) {
        let line: Vec<&str> = fields.iter().map(AsRef::as_ref).collect();
        self.text.push_str(&line.join(","));
        self.text.push('\n');
    }

    /// The table as text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Writes the table to `path`, creating its directory.
    pub fn write(&self, path: &std::path::Path) -> anyhow::Result<()> {
        use anyhow::Context;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(path, &self.text).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// `n` bytes as "N MiB", "N KiB" or "N B", whichever is exact.
pub fn size_label(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1024 && n % 1024 == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// Median of a non-empty list of durations.
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// A progress bar on stderr (hidden with `--json` or when stderr is not a terminal).
pub fn progress(len: u64, what: &str, quiet: bool) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if quiet {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(what.to_string());
    bar
}

/// What an experiment shows of a store it opens or loads: the store's lines on stderr, unless
/// `quiet` (the benchmarks' own output stays the only progress shown).
pub struct Said(pub bool);

impl nearflow_rdf::open::Report for Said {
    fn say(&self, line: &str) {
        if !self.0 {
            eprintln!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_the_median_and_the_10th_and_90th_percentiles() {
        let v: Vec<f64> = (1..=11).rev().map(f64::from).collect();
        assert_eq!(summary(v), (6.0, [2.0, 10.0]));
        assert_eq!(summary(vec![3.0]), (3.0, [3.0, 3.0]));
        let ms = |n| Duration::from_millis(n);
        assert_eq!(median(vec![ms(5), ms(1), ms(9)]), ms(5));
        assert_eq!(median(Vec::new()), Duration::ZERO);
    }

    #[test]
    fn tables_lists_and_labels() {
        let mut c = Csv::new(&["a", "b"]);
        c.row(&["1".to_string(), "x".to_string()]);
        assert_eq!(c.text(), "a,b\n1,x\n");
        let dir = std::env::temp_dir().join(format!("nearflow-lab-csv-{}", std::process::id()));
        let file = dir.join("sub").join("t.csv");
        c.write(&file).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), c.text());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(parse_list::<u32>(" 1, 2,,3 ").unwrap(), vec![1, 2, 3]);
        let e = parse_list::<u32>("1,x").unwrap_err().to_string();
        assert!(e.starts_with("`x`: "), "{e}");
        assert_eq!(size_label(3 << 20), "3 MiB");
        assert_eq!(size_label(1536), "1536 B");
        assert_eq!(size_label(2048), "2 KiB");
        assert_eq!(size_label(1000), "1000 B");
    }

    #[test]
    fn a_report_serializes_as_its_data_alone() {
        let r = Report::new(vec![1, 2], "table\n".into()).with_notes("phase".into());
        assert_eq!(serde_json::to_string(&r).unwrap(), "[1,2]");
        assert_eq!(r.text, "table\n");
        assert_eq!(r.notes, "phase");
    }

    #[test]
    fn runtimes_start_with_the_allocator_asked_for_or_not_at_all() {
        let m = nearflow_topo::from_synthetic("pack:1 core:2 pu:1").unwrap();
        for a in [
            nearflow_rt::AllocatorKind::Nearflow,
            nearflow_rt::AllocatorKind::System,
        ] {
            let rt = build_runtime(
                m.clone(),
                nearflow_policy::PolicyKind::Las,
                nearflow_rt::Pinning::None,
                false,
                a,
            )
            .unwrap();
            assert_eq!(rt.allocator_in_effect(), a);
        }
        assert_eq!(m.label(), "synthetic \"pack:1 core:2 pu:1\" (2 PUs)");
        let e = load_machine(&TopologySpec::Synthetic("nonsense:3".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot build topology"), "{e}");
    }
}
