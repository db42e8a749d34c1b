//! A LOIS-like outlier detector (StreamMap §V.B, Fig. 10) on a generated radio-like stream.
//!
//! The paper's LOIS reads a radio-telescope recording we do not have; [`generate`] makes a
//! stream of the same shape instead (documented below), and the plan has Fig. 10's threads:
//!
//! 1. **coordinates**: each raw sample (channel, in-phase, quadrature) → its amplitude;
//! 2. **short window**: per channel, mean and spread of the last [`Config::short`] amplitudes →
//!    bounds `mean ± k·sd`; feeds thread 3 and the barrier;
//! 3. **long window**: the same over the last [`Config::long`] amplitudes;
//! 4. **outlier finder**: takes each sample with the two pairs of bounds and keeps those
//!    outside both.
//!
//! Threads 2 and 3 meet in a shared **barrier** (a zip, run by whichever of them delivers:
//! an operator shared by two threads, §III.D). With 5 threads the finder's last stage gets its
//! own thread, with 6 the long window's bounds too — "further introducing Threaded Ports to
//! split the work of Thread 3 and 4".
//!
//! Amplitudes are fixed-point (1e-6) and window sums integers, so the plan and the sequential
//! [`reference()`] agree exactly.
//!
//! ## The generator
//!
//! `channels` channels sampled in turn; channel `c` carries a tone of amplitude `1 + c/8` at a
//! slowly drifting phase, plus Gaussian noise of standard deviation 0.3 on each component;
//! 0.2 % of samples are radio-frequency interference bursts, 8× the tone's amplitude. All from
//! one seed ([`crate::rng::Rng`]).

use std::collections::{HashMap, VecDeque};

use nearflow_flow::ops::window_agg::WindowAgg;
use nearflow_flow::{PlanBuilder, Sink, Stream};

use crate::rng::Rng;

/// One raw sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub seq: u64,
    pub channel: u32,
    /// In-phase and quadrature components.
    pub i: f32,
    pub q: f32,
}

/// A sample's coordinates: its amplitude in micro-units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    pub seq: u64,
    pub channel: u32,
    pub amp: i64,
}

/// Bounds from one window: `[lo, hi]` in micro-units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub seq: u64,
    pub lo: i64,
    pub hi: i64,
}

/// An outlier found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Outlier {
    pub seq: u64,
    pub channel: u32,
    pub amp: i64,
}

/// The detector's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Samples in the short window, per channel.
    pub short: usize,
    /// Samples in the long window, per channel.
    pub long: usize,
    /// Bounds are mean ± `k_tenths / 10` standard deviations.
    pub k_tenths: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            short: 256,
            long: 4096,
            k_tenths: 30,
        }
    }
}

/// The generated stream (see the module docs).
pub fn generate(n: u64, channels: u32, seed: u64) -> Vec<Sample> {
    let mut rng = Rng::new(seed);
    let channels = channels.max(1);
    (0..n)
        .map(|seq| {
            let channel = (seq % u64::from(channels)) as u32;
            let tone = 1.0 + channel as f64 / 8.0;
            let phase = (seq / u64::from(channels)) as f64 * 0.01 + f64::from(channel);
            let burst = if rng.below(1000) < 2 { 8.0 } else { 1.0 };
            let noise = |r: &mut Rng| 0.3 * r.normal() as f64;
            let i = (tone * burst * phase.cos() + noise(&mut rng)) as f32;
            let q = (tone * burst * phase.sin() + noise(&mut rng)) as f32;
            Sample { seq, channel, i, q }
        })
        .collect()
}

/// Thread 1's work: the amplitude, in micro-units.
pub fn coordinates(s: &Sample) -> Point {
    let amp = (f64::from(s.i).hypot(f64::from(s.q)) * 1e6).round() as i64;
    Point {
        seq: s.seq,
        channel: s.channel,
        amp,
    }
}

/// Window statistics over amplitudes: count, sum and sum of squares, exact.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    k_tenths: i64,
}

impl Stats {
    fn bounds(&self, acc: &(i128, i128), n: usize, seq: u64) -> Bounds {
        let n = n.max(1) as i128;
        let mean = acc.0 / n;
        let var = (acc.1 / n - mean * mean).max(0);
        let sd = isqrt(var as u128) as i64;
        let reach = sd * self.k_tenths / 10;
        Bounds {
            seq,
            lo: mean as i64 - reach,
            hi: mean as i64 + reach,
        }
    }
}

fn isqrt(x: u128) -> u128 {
    if x < 2 {
        return x;
    }
    let mut r = (x as f64).sqrt() as u128;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

impl WindowAgg<Point> for Stats {
    type Acc = (i128, i128);
    /// The point goes on with its bounds (thread 2 feeds thread 3 the samples).
    type Out = (Point, Bounds);
    fn add(&mut self, acc: &mut (i128, i128), p: &Point) {
        acc.0 += i128::from(p.amp);
        acc.1 += i128::from(p.amp) * i128::from(p.amp);
    }
    fn remove(&mut self, acc: &mut (i128, i128), p: &Point) {
        acc.0 -= i128::from(p.amp);
        acc.1 -= i128::from(p.amp) * i128::from(p.amp);
    }
    fn output(&mut self, acc: &(i128, i128), p: &Point, len: usize) -> Option<(Point, Bounds)> {
        Some((*p, self.bounds(acc, len, p.seq)))
    }
}

fn outlier(p: &Point, short: &Bounds, long: &Bounds) -> bool {
    let lo = short.lo.max(long.lo);
    let hi = short.hi.min(long.hi);
    p.amp < lo || p.amp > hi
}

/// Builds the detector over `input` with `threads` threads (1 to 6; 1 puts everything on
/// one thread, 2 and 3 merge threads of Fig. 10 from the end), returns the outliers' sink.
/// The caller creates `input` on thread 0 (`b.on_thread(Some(0))`).
pub fn build(
    b: &mut PlanBuilder,
    input: Stream<Sample>,
    threads: usize,
    cfg: Config,
) -> Sink<Outlier> {
    // Thread of each of Fig. 10's roles, and of the split-off stages (5 and 6 threads).
    let (t_short, t_long, t_find, t_emit, t_long_bounds) = match threads {
        0 | 1 => (0, 0, 0, 0, 0),
        2 => (1, 1, 1, 1, 1),
        3 => (1, 2, 2, 2, 2),
        4 => (1, 2, 3, 3, 2),
        5 => (1, 2, 3, 4, 2),
        _ => (1, 2, 3, 4, 5),
    };
    let stats = Stats {
        k_tenths: cfg.k_tenths,
    };
    b.on_thread(Some(0));
    let points = b.map(input, |s: Sample| coordinates(&s));
    let to = b.broadcast(points, 2);
    let (points_short, points_find) = (to[0], to[1]);

    b.on_thread(Some(t_short));
    let short = b.window_aggregate(points_short, cfg.short.max(1), |p: &Point| p.channel, stats);
    let fan = b.broadcast(short, 2);

    b.on_thread(Some(t_long));
    let long_points = b.map(fan[0], |(p, _): (Point, Bounds)| p);
    let long = b.window_aggregate(long_points, cfg.long.max(1), |p: &Point| p.channel, stats);
    b.on_thread(Some(t_long_bounds));
    let long = b.map(long, |(_, l): (Point, Bounds)| l);

    // The barrier: threads 2 and 3 meet here, whichever delivers runs it.
    b.on_thread(None);
    let short_bounds = b.map(fan[1], |(_, s): (Point, Bounds)| s);
    let both = b.zip(short_bounds, long);

    b.on_thread(Some(t_find));
    let joined = b.zip(points_find, both);
    b.on_thread(Some(t_emit));
    let found = b.flat_map(joined, |(p, (s, l)): (Point, (Bounds, Bounds))| {
        debug_assert!(p.seq == s.seq && p.seq == l.seq, "streams out of step");
        outlier(&p, &s, &l).then_some(Outlier {
            seq: p.seq,
            channel: p.channel,
            amp: p.amp,
        })
    });
    b.on_thread(None);
    b.collect(found)
}

/// The sequential computation: one pass, two windows per channel.
pub fn reference(samples: &[Sample], cfg: Config) -> Vec<Outlier> {
    let mut stats = Stats {
        k_tenths: cfg.k_tenths,
    };
    let mut short: HashMap<u32, (VecDeque<Point>, (i128, i128))> = HashMap::new();
    let mut long: HashMap<u32, (VecDeque<Point>, (i128, i128))> = HashMap::new();
    let mut slide = |w: &mut (VecDeque<Point>, (i128, i128)), cap: usize, p: Point| {
        stats.add(&mut w.1, &p);
        if w.0.len() == cap {
            let old = w.0.pop_front().expect("full");
            stats.remove(&mut w.1, &old);
        }
        w.0.push_back(p);
        stats.bounds(&w.1, w.0.len(), p.seq)
    };
    let mut out = Vec::new();
    for s in samples {
        let p = coordinates(s);
        let sb = slide(short.entry(p.channel).or_default(), cfg.short.max(1), p);
        let lb = slide(long.entry(p.channel).or_default(), cfg.long.max(1), p);
        if outlier(&p, &sb, &lb) {
            out.push(Outlier {
                seq: p.seq,
                channel: p.channel,
                amp: p.amp,
            });
        }
    }
    out
}
