//! A phase indicator for shared hosts: how long a cache line takes to go from one of the host's
//! CPUs to another and back.
//!
//! On the KVM guests this project runs on, the host moves between phases in which every timing
//! changes together: in one, this probe's round trip between the guest's two vCPUs read about
//! 45 ns and `bench queues` 512 took about 40 ms per policy; minutes later about 370 ns and
//! 120–180 ms, with the policies in a different order (the runtime's
//! queues hand tasks between cores, so a policy that moves more lines per task loses more when a
//! line costs several times as much). Interleaved rounds keep each ratio within one moment, but a
//! reader still needs to know which moment a table comes from, and whether a run straddled two.
//! The benches sample this round trip once per round and print its range beside their tables,
//! with a warning when it moved by more than half during the run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::Report;

/// Round trips per measurement; a sample is the median of [`MEASUREMENTS`] of them (about
/// 1–10 ms in all, by phase), so one interruption does not decide it.
const TRIPS: u64 = 2_000;
const MEASUREMENTS: usize = 5;

/// A sample that takes longer than this is abandoned (one of the two threads was not running:
/// an oversubscribed host), and the sample is left out.
const GIVE_UP: Duration = Duration::from_millis(500);

/// The largest max/min ratio of the samples of one run read as one phase.
const STEADY: f64 = 1.5;

/// `nearflow bench phase`: samples of the round trip, one per `every_ms`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Samples to take.
    pub samples: u32,
    /// Pause between samples, in milliseconds.
    pub every_ms: u64,
}

/// Takes the samples: each in ns (`None`: a thread of the probe did not get its CPU); the
/// text has one line per sample, then the summary the benches print.
pub fn run(cmd: &Config) -> anyhow::Result<Report<Vec<Option<f64>>>> {
    use std::fmt::Write;
    let mut out = String::new();
    let mut data = Vec::new();
    let mut probe = Probe::new();
    if probe.cpus.is_none() {
        anyhow::bail!(
            "this process may run on fewer than two CPUs: there is no round trip to time"
        );
    }
    for k in 0..cmd.samples {
        if k > 0 {
            std::thread::sleep(Duration::from_millis(cmd.every_ms));
        }
        let before = probe.samples.len();
        probe.sample();
        let got = probe.samples.get(before).copied();
        match got {
            Some(ns) => writeln!(out, "{ns:.1} ns")?,
            None => writeln!(out, "no sample (a thread of the probe did not get its CPU)")?,
        }
        data.push(got);
    }
    writeln!(out, "{}", probe.line())?;
    Ok(Report::new(data, out))
}

/// Samples of the host's CPU-to-CPU round trip, taken between a bench's rounds.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The first two CPUs this process may run on; `None` with fewer than two.
    cpus: Option<[usize; 2]>,
    /// Nanoseconds per round trip, one per sample.
    samples: Vec<f64>,
}

impl Default for Probe {
    fn default() -> Probe {
        Probe::new()
    }
}

impl Probe {
    /// A probe between the first two CPUs of this process's affinity mask (the host's CPUs, not
    /// a synthetic machine's PUs: what it measures is the host).
    pub fn new() -> Probe {
        Probe {
            cpus: first_two_cpus(),
            samples: Vec::new(),
        }
    }

    /// Takes one sample (nothing with fewer than two CPUs, or when the two threads could not
    /// both run).
    pub fn sample(&mut self) {
        let Some(cpus) = self.cpus else { return };
        let mut v: Vec<f64> = (0..MEASUREMENTS)
            .filter_map(|_| round_trip_ns(cpus))
            .collect();
        if v.len() == MEASUREMENTS {
            v.sort_by(f64::total_cmp);
            self.samples.push(v[MEASUREMENTS / 2]);
        }
    }

    /// The smallest and largest sample, in ns.
    pub fn range(&self) -> Option<[f64; 2]> {
        let min = self.samples.iter().copied().reduce(f64::min)?;
        let max = self.samples.iter().copied().reduce(f64::max)?;
        Some([min, max])
    }

    /// Whether the samples moved by more than half during the run.
    pub fn moved(&self) -> bool {
        self.range().is_some_and(|[lo, hi]| hi > STEADY * lo)
    }

    /// The line the benches print under their tables.
    pub fn line(&self) -> String {
        let Some([a, b]) = self.cpus else {
            return "host phase: not measured (fewer than two CPUs to run on)".into();
        };
        let Some([lo, hi]) = self.range() else {
            return format!(
                "host phase: not measured (no sample of CPU {a} ↔ CPU {b} finished within {} ms: \
                 the host did not run both threads)",
                GIVE_UP.as_millis()
            );
        };
        let mut s = format!(
            "host phase: CPU {a} ↔ CPU {b} round trip of a cache line {lo:.0}–{hi:.0} ns over {} \
             samples",
            self.samples.len()
        );
        if self.moved() {
            s.push_str(
                "\n  warning: it moved by more than half during the run, so the host changed phase; \
                 per-round ratios still compare runs made side by side, medians across the change \
                 do not (rerun for a table from one phase)",
            );
        }
        s
    }
}

/// The first two CPUs of the calling thread's affinity mask.
fn first_two_cpus() -> Option<[usize; 2]> {
    // SAFETY: `set` is a plain bitmask, zeroed; sched_getaffinity writes at most its size.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        set
    };
    let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| {
        // SAFETY: `c` < CPU_SETSIZE.
        unsafe { libc::CPU_ISSET(c, &set) }
    });
    Some([cpus.next()?, cpus.next()?])
}

/// Nanoseconds per round trip of one cache line between two threads bound to `cpus`, over
/// [`TRIPS`] round trips after a first untimed one: each thread in turn waits for the other's
/// value and answers with the next. `None` if a thread could not be bound or the sample took
/// longer than [`GIVE_UP`].
fn round_trip_ns(cpus: [usize; 2]) -> Option<f64> {
    let word = CachePadded::new(AtomicU64::new(0));
    let deadline = Instant::now() + GIVE_UP;
    // Each thread waits for `mine` (even for the first, odd for the second), then stores
    // `mine + 1`. The first times its round trips 1..=TRIPS (the 0th meets the other thread's
    // start). Returns the time, or `None` if it gave up.
    let play = |cpu: usize, first: bool| -> Option<Duration> {
        if nearflow_alloc::checks::pin_to_cpu(cpu).is_err() {
            word.store(u64::MAX, Ordering::Relaxed);
            return None;
        }
        let mut start = Instant::now();
        for k in 0..=TRIPS {
            if first && k == 1 {
                start = Instant::now();
            }
            let mine = 2 * k + u64::from(!first);
            let mut spins = 0u32;
            loop {
                // Acquire/Release: only the value matters, but this is what a hand-off between
                // two workers costs.
                let v = word.load(Ordering::Acquire);
                if v == mine {
                    break;
                }
                if v == u64::MAX {
                    return None;
                }
                spins = spins.wrapping_add(1);
                if spins % 4096 == 0 && Instant::now() > deadline {
                    word.store(u64::MAX, Ordering::Relaxed);
                    return None;
                }
                std::hint::spin_loop();
            }
            word.store(mine + 1, Ordering::Release);
        }
        Some(start.elapsed())
    };
    let (here, other) = std::thread::scope(|s| {
        let other = s.spawn(|| play(cpus[1], false));
        let here = s.spawn(|| play(cpus[0], true));
        (here.join().ok().flatten(), other.join().ok().flatten())
    });
    other?;
    // The first thread's last wait ends with the other's answer to round trip TRIPS.
    Some(here?.as_nanos() as f64 / TRIPS as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_a_positive_time_or_nothing() {
        let mut p = Probe::new();
        p.sample();
        p.sample();
        match p.range() {
            // Two CPUs or more: both threads ran and every round trip took some time.
            Some([lo, hi]) => {
                assert!(lo > 0.0 && hi >= lo && hi.is_finite(), "{lo}–{hi}");
                assert!(p.line().contains("samples"), "{}", p.line());
            }
            None => assert!(p.line().contains("not measured"), "{}", p.line()),
        }
    }

    #[test]
    fn a_run_that_moved_is_flagged() {
        let p = Probe {
            cpus: Some([0, 1]),
            samples: vec![95.0, 101.0, 384.0],
        };
        assert!(p.moved());
        assert!(
            p.line().contains("95–384 ns over 3 samples"),
            "{}",
            p.line()
        );
        assert!(p.line().contains("warning"), "{}", p.line());
        let steady = Probe {
            cpus: Some([0, 1]),
            samples: vec![95.0, 101.0, 120.0],
        };
        assert!(!steady.moved());
        assert!(!steady.line().contains("warning"));
    }
}
