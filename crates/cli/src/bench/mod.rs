//! `nearflow bench …`: benchmarks. They print figures; they never assert on time.

pub mod alloc;
pub mod overhead;
pub mod packet_size;
pub mod plans;
pub mod queues;

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
