//! `nearflow bench streammap`: StreamMap's micro-benchmarks (`streammap-cache-topology-mapping.txt`
//! §III) on this host, each thread mapped to a PU by the `mapped` policy:
//!
//! - **pc** (Fig. 4): a producer thread sending tuples to a consumer thread, on the same PU,
//!   on two PUs, and unbound (the OS decides);
//! - **contention** (Tables I–II): two independent chains source → op → sink, op one of
//!   Filter, Functor, Aggregator, Sort, Hash Join (in order of working set); the left chain's
//!   rate with the right one running on the other PU, normalised to its rate alone (measured
//!   back to back, median of the ratios). The paper's other case, two threads under one L2,
//!   does not exist on a 2-PU host with an L2 per core (and one PU time-shared by two threads
//!   measures the worker's task interleaving, not the cache), so it is left out here;
//! - **barrier** (Fig. 5): two threads meeting at a shared zip once per tuple (one-tuple
//!   packets), `--rounds` times: same PU, two PUs, unbound.
//!
//! Figures only. `--simulate x5355,e5320-uma,nehalem-2x4` runs the same three on models of
//! the paper's machines instead (SIMULATED, `streammap_sim.rs`).

use std::time::Duration;

use anyhow::{bail, Result};
use nearflow_flow::ops::window_agg::WindowAgg;
use nearflow_flow::{Plan, PlanBuilder, Sink, Stream};
use nearflow_policy::PolicyKind;
use nearflow_rt::{Pinning, Runtime};

use super::{host_cpu, median};

/// StreamMap's micro-benchmarks on this host (Fig. 4, Tables I–II, Fig. 5).
#[derive(clap::Args, Debug)]
pub struct StreammapCmd {
    /// Which: pc, contention, barrier (comma-separated).
    #[arg(long, default_value = "pc,contention,barrier")]
    pub micro: String,
    /// Tuples per chain (pc, contention).
    /// Range: 1..=1e10.
    #[arg(value_parser = crate::args::int_in(1u64, 10_000_000_000), long, default_value_t = 2_000_000)]
    pub tuples: u64,
    /// Meetings of the two barrier threads (the paper: 10,000,000).
    /// Range: 1..=1e9.
    #[arg(value_parser = crate::args::int_in(1u64, 1_000_000_000), long, default_value_t = 1_000_000)]
    pub rounds: u64,
    /// Runs per case; the median is reported (the simulator is deterministic: one run).
    /// Range: 1..=1000.
    #[arg(value_parser = crate::args::int_in(1usize, 1000), long, default_value_t = 3)]
    pub repeat: usize,
    /// Packet size in bytes (pc, contention).
    /// Range: 64..=1 GiB.
    #[arg(value_parser = crate::args::int_in(64usize, 1 << 30), long, default_value_t = 64 * 1024)]
    pub packet_bytes: usize,
    /// Simulate on these machines instead (comma-separated presets, e.g.
    /// x5355,e5320-uma,nehalem-2x4; SIMULATED).
    #[arg(long, value_name = "PRESETS")]
    pub simulate: Option<String>,
}

/// Where the two threads go: PUs, or unbound.
#[derive(Clone, Copy, Debug)]
enum Place {
    Same,
    Other,
    Unbound,
}

impl Place {
    fn label(self) -> &'static str {
        match self {
            Place::Same => "same PU",
            Place::Other => "other PU",
            Place::Unbound => "unbound (OS)",
        }
    }
}

struct Rts {
    bound: Runtime,
    unbound: Runtime,
}

impl Rts {
    fn new() -> Result<Rts> {
        let host = nearflow_topo::detect_host()?;
        if host.pu_count() < 2 {
            bail!("the StreamMap micro-benchmarks need 2 PUs; this host has 1");
        }
        Ok(Rts {
            bound: Runtime::builder(host)
                .policy(PolicyKind::Mapped)
                .pinning(Pinning::Pu)
                .build()?,
            unbound: Runtime::builder(nearflow_topo::from_synthetic("pack:1 core:2 pu:1")?)
                .policy(PolicyKind::Mapped)
                .build()?,
        })
    }

    /// The runtime and the PUs of threads 0 and 1 for a placement.
    fn at(&self, p: Place) -> (&Runtime, [usize; 2]) {
        match p {
            Place::Same => (&self.bound, [0, 0]),
            Place::Other => (&self.bound, [0, 1]),
            Place::Unbound => (&self.unbound, [0, 1]),
        }
    }
}

pub fn run(cmd: &StreammapCmd) -> Result<()> {
    if cmd.repeat == 0 || cmd.tuples == 0 || cmd.rounds == 0 {
        bail!("--repeat, --tuples and --rounds must be at least 1");
    }
    if let Some(presets) = &cmd.simulate {
        return super::streammap_sim::run(cmd, presets);
    }
    let rts = Rts::new()?;
    println!("StreamMap micro-benchmarks on {} (measured)", host_cpu());
    for m in cmd.micro.split(',').map(str::trim) {
        match m {
            "pc" => producer_consumer(cmd, &rts)?,
            "contention" => contention(cmd, &rts)?,
            "barrier" => barrier(cmd, &rts)?,
            other => bail!("unknown micro-benchmark {other:?}: expected pc, contention, barrier"),
        }
    }
    Ok(())
}

pub(super) fn mix(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i >> 17)
}

/// Runs `plans` (already mapped) at once; the elapsed time of the first.
fn run_together(rt: &Runtime, plans: Vec<Plan>) -> Result<Duration> {
    let handles: Vec<_> = plans.into_iter().map(|p| p.submit(rt)).collect();
    let mut first = None;
    for h in handles {
        let out = h.wait()?;
        first.get_or_insert(out.stats.elapsed);
    }
    Ok(first.unwrap_or_default())
}

/// The three placements of two threads, each run `repeat` times interleaved with a plan
/// from `build` (threads 0 and 1 mapped by the placement); the median time of each.
fn by_place(
    cmd: &StreammapCmd,
    rts: &Rts,
    build: impl Fn(&mut PlanBuilder),
) -> Result<Vec<(Place, Duration)>> {
    let places = [Place::Same, Place::Other, Place::Unbound];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); places.len()];
    for _ in 0..cmd.repeat {
        for (i, &p) in places.iter().enumerate() {
            let (rt, pus) = rts.at(p);
            let mut b = PlanBuilder::for_runtime(rt);
            build(&mut b);
            let mut plan = b.build()?;
            plan.map_threads(rt, &pus)?;
            times[i].push(run_together(rt, vec![plan])?);
        }
    }
    Ok(places
        .into_iter()
        .zip(times.into_iter().map(median))
        .collect())
}

fn producer_consumer(cmd: &StreammapCmd, rts: &Rts) -> Result<()> {
    println!(
        "\nproducer → consumer, {} tuples of 8 B (Fig. 4)",
        cmd.tuples
    );
    let rows = by_place(cmd, rts, |b| {
        b.packet_bytes(cmd.packet_bytes);
        b.on_thread(Some(0));
        let s = b.generate(cmd.tuples, mix);
        b.on_thread(Some(1));
        let f = b.filter(s, |x: &u64| *x == 0);
        let _ = b.collect(f);
    })?;
    for (p, d) in rows {
        let mbs = cmd.tuples as f64 * 8.0 / d.as_secs_f64() / 1e6;
        println!("  {:<14} {mbs:>9.1} MB/s", p.label());
    }
    Ok(())
}

/// The five operators of Tables I–II, in order of working set.
pub(super) const OPS: [&str; 5] = ["Filter", "Functor", "Aggregator", "Sort", "HashJoin"];

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
pub(super) fn chain(b: &mut PlanBuilder, op: &str, n: u64, thread: usize) -> Sink<u64> {
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

fn contention(cmd: &StreammapCmd, rts: &Rts) -> Result<()> {
    println!(
        "\ncontention: left chain's rate with the right chain running / alone (Tables I–II), {} tuples",
        cmd.tuples
    );
    let plan = |rt: &Runtime, op: &str, n: u64, pu: usize| -> Result<Plan> {
        let mut b = PlanBuilder::for_runtime(rt);
        b.packet_bytes(cmd.packet_bytes);
        let _ = chain(&mut b, op, n, 0);
        let mut p = b.build()?;
        p.map_threads(rt, &[pu])?;
        Ok(p)
    };
    // Warm-up: every chain once (first-touch of memory, allocator caches), not measured.
    let (rt, pus) = rts.at(Place::Other);
    for op in OPS {
        run_together(rt, vec![plan(rt, op, cmd.tuples, pus[0])?])?;
    }
    println!("  left on PU 0, right on PU 1 (rows: left, columns: right)");
    print!("  {:<11}", "");
    for r in OPS {
        print!(" {r:>10}");
    }
    println!();
    for left in OPS {
        print!("  {left:<11}");
        for right in OPS {
            // Alone and together back to back, `repeat` times; the median of the ratios.
            let mut ratios = Vec::new();
            for _ in 0..cmd.repeat {
                let alone = run_together(rt, vec![plan(rt, left, cmd.tuples, pus[0])?])?;
                // The right chain is longer, so it runs for all of the left's time.
                let l = plan(rt, left, cmd.tuples, pus[0])?;
                let r = plan(rt, right, 2 * cmd.tuples, pus[1])?;
                let with = run_together(rt, vec![l, r])?;
                ratios.push(alone.as_secs_f64() / with.as_secs_f64());
            }
            ratios.sort_by(f64::total_cmp);
            print!(" {:>9.1}%", 100.0 * ratios[ratios.len() / 2]);
        }
        println!();
    }
    Ok(())
}

fn barrier(cmd: &StreammapCmd, rts: &Rts) -> Result<()> {
    println!(
        "\nbarrier: two threads meet at a shared zip {} times (Fig. 5; one-tuple packets)",
        cmd.rounds
    );
    let rows = by_place(cmd, rts, |b| {
        b.packet_bytes(8).buffer_packets(1);
        b.on_thread(Some(0));
        let a = b.generate(cmd.rounds, |i| i);
        b.on_thread(Some(1));
        let c = b.generate(cmd.rounds, |i| i);
        b.on_thread(None);
        let z = b.zip(a, c);
        let none = b.filter(z, |_: &(u64, u64)| false);
        let _ = b.collect(none);
    })?;
    let same = rows[0].1.as_secs_f64();
    for (p, d) in rows {
        let d = d.as_secs_f64();
        println!(
            "  {:<14} {d:>8.3} s  ({:.2}x the same-PU time)",
            p.label(),
            d / same
        );
    }
    Ok(())
}
