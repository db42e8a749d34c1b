//! What the measured and the simulated micro-benchmarks share: their configuration, the
//! figures they report, and the plans they run (the producer's tuples and the chains of
//! Tables I–II).

use nearflow_flow::ops::window_agg::WindowAgg;
use nearflow_flow::{PlanBuilder, Sink, Stream};
use serde::Serialize;

/// StreamMap's micro-benchmarks on this host (Fig. 4, Tables I–II, Fig. 5).
#[derive(Debug, Clone)]
pub struct Config {
    /// Which: pc, contention, barrier (comma-separated).
    pub micro: String,
    /// Tuples per chain (pc, contention).
    pub tuples: u64,
    /// Meetings of the two barrier threads (the paper: 10,000,000).
    pub rounds: u64,
    /// Runs per case; the median is reported (the simulator is deterministic: one run).
    pub repeat: usize,
    /// Packet size in bytes (pc, contention).
    pub packet_bytes: usize,
    /// Simulate on these machines instead (comma-separated presets, e.g.
    /// x5355,e5320-uma,nehalem-2x4; SIMULATED).
    pub simulate: Option<String>,
}

/// One figure of a micro-benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct Measure {
    /// `pc`, `contention` or `barrier`.
    pub micro: &'static str,
    /// `host` or the simulated machine's preset.
    pub machine: String,
    /// The placement (pc, barrier: e.g. `same PU`), or `LEFT with RIGHT on PLACEMENT`
    /// (contention).
    pub case: String,
    pub value: f64,
    /// `MB/s` (pc), `% of alone` (contention: the left chain's rate with the right one
    /// running over its rate alone), `s` (barrier).
    pub unit: &'static str,
    pub simulated: bool,
}

/// The text and the figures as they are made.
#[derive(Default)]
pub struct Out {
    pub(crate) text: String,
    pub(crate) data: Vec<Measure>,
}

pub(crate) fn mix(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i >> 17)
}

/// The five operators of Tables I–II, in order of working set.
pub(crate) const OPS: [&str; 5] = ["Filter", "Functor", "Aggregator", "Sort", "HashJoin"];

struct Sum;
impl WindowAgg<u64> for Sum {
    type Acc = u64;
    type Out = u64;
    fn add(&mut self, acc: &mut u64, t: &u64) {
        *acc = acc.wrapping_add(*t);
    }
    fn remove(&mut self, acc: &mut u64, t: &u64) {
        *acc = acc.wrapping_sub(*t);
    }
    fn output(&mut self, acc: &u64, _t: &u64, _len: usize) -> Option<u64> {
        Some(*acc)
    }
}

/// source → op → sink (nothing kept), all on thread 0.
/// source → op → sink (the sink keeps nothing), all on `thread`.
pub(crate) fn chain(b: &mut PlanBuilder, op: &str, n: u64, thread: usize) -> Sink<u64> {
    b.on_thread(Some(thread));
    let s: Stream<u64> = b.generate(n, mix);
    let out: Stream<u64> = match op {
        "Filter" => b.filter(s, |x: &u64| x % 3 != 0),
        "Functor" => b.map(s, |x: u64| x.rotate_left(13) ^ 0x5555),
        // 16,384 keys x 32 tuples of 8 B: a 4 MiB window state.
        "Aggregator" => b.window_aggregate(s, 32, |x: &u64| x % 16_384, Sum),
        "Sort" => b.sort_by_key(s, |x: &u64| *x),
        _ => {
            // A table of half as many rows as the stream has tuples (1M rows, ≈ 40 MiB, at
            // the default 2M), probed by the stream.
            let build = b.generate((n / 2).max(1024), |i| (mix(i) % (1 << 22), i));
            b.hash_join(
                build,
                s,
                |r: &(u64, u64)| r.0,
                |x: &u64| x % (1 << 22),
                |r, _| r.1,
            )
        }
    };
    let none = b.filter(out, |_: &u64| false);
    b.collect(none)
}
