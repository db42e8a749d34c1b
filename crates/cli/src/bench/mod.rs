//! `nearflow bench …`: benchmarks. They print figures; they never assert on time.

pub mod alloc;
pub mod chart;
pub mod numa_factor;
pub mod overhead;
pub mod packet_size;
pub mod phase;
pub mod plans;
pub mod queues;
pub mod sp2bench;
pub mod split;
pub mod streammap;
pub mod streammap_sim;

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// This machine for the tables: CPU model, L2 per core and CPU count, e.g.
/// `AMD EPYC, L2 512K, 2 CPUs` (the brief asks every figure to name its machine).
pub fn host_cpu() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let l2 = (0..8)
        .filter_map(|i| {
            let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
            let level = std::fs::read_to_string(format!("{dir}/level")).ok()?;
            let ty = std::fs::read_to_string(format!("{dir}/type")).ok()?;
            (level.trim() == "2" && ty.trim() != "Instruction")
                .then(|| std::fs::read_to_string(format!("{dir}/size")).ok())
                .flatten()
        })
        .next()
        .map_or_else(|| "L2 unknown".into(), |s| format!("L2 {}", s.trim()));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model}, {l2}, {cpus} CPUs")
}

/// Whether this host is a virtual machine (the `hypervisor` CPU flag): its NUMA nodes, if
/// several, are emulated, and NUMA timings there say nothing about hardware.
pub fn in_a_vm() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
        })
        .unwrap_or(false)
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
