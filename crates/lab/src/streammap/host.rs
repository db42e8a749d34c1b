//! The micro-benchmarks measured on this host, each thread mapped to a PU by the `mapped`
//! policy.

use std::time::Duration;

use anyhow::{bail, Result};
use nearflow_flow::{Plan, PlanBuilder};
use nearflow_policy::PolicyKind;
use nearflow_rt::{Pinning, Runtime};

use super::micro::{chain, mix, Config, Measure, Out, OPS};
use crate::harness::median;

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

pub(super) struct Rts {
    bound: Runtime,
    unbound: Runtime,
}

impl Rts {
    pub(super) fn new() -> Result<Rts> {
        let host = nearflow_topo::detect_host()?;
        if host.pu_count() < 2 {
            bail!("the StreamMap micro-benchmarks need 2 PUs; this host has 1");
        }
        Ok(Rts {
            bound: Runtime::builder(host)
                .policy(PolicyKind::Pinned)
                .pinning(Pinning::Pu)
                .build()?,
            unbound: Runtime::builder(nearflow_topo::from_synthetic("pack:1 core:2 pu:1")?)
                .policy(PolicyKind::Pinned)
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
    cmd: &Config,
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

pub(super) fn producer_consumer(cmd: &Config, rts: &Rts, o: &mut Out) -> Result<()> {
    use std::fmt::Write;
    writeln!(
        o.text,
        "\nproducer → consumer, {} tuples of 8 B (Fig. 4)",
        cmd.tuples
    )?;
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
        writeln!(o.text, "  {:<14} {mbs:>9.1} MB/s", p.label())?;
        o.data.push(Measure {
            micro: "pc",
            machine: "host".into(),
            case: p.label().into(),
            value: mbs,
            unit: "MB/s",
            simulated: false,
        });
    }
    Ok(())
}

pub(super) fn contention(cmd: &Config, rts: &Rts, o: &mut Out) -> Result<()> {
    use std::fmt::Write;
    writeln!(
o.text,
        "\ncontention: left chain's rate with the right chain running / alone (Tables I–II), {} tuples",
        cmd.tuples
    )?;
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
    writeln!(
        o.text,
        "  left on PU 0, right on PU 1 (rows: left, columns: right)"
    )?;
    write!(o.text, "  {:<11}", "")?;
    for r in OPS {
        write!(o.text, " {r:>10}")?;
    }
    writeln!(o.text)?;
    for left in OPS {
        write!(o.text, "  {left:<11}")?;
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
            let pct = 100.0 * ratios[ratios.len() / 2];
            write!(o.text, " {pct:>9.1}%")?;
            o.data.push(Measure {
                micro: "contention",
                machine: "host".into(),
                case: format!("{left} with {right} on {}", Place::Other.label()),
                value: pct,
                unit: "% of alone",
                simulated: false,
            });
        }
        writeln!(o.text)?;
    }
    Ok(())
}

pub(super) fn barrier(cmd: &Config, rts: &Rts, o: &mut Out) -> Result<()> {
    use std::fmt::Write;
    writeln!(
        o.text,
        "\nbarrier: two threads meet at a shared zip {} times (Fig. 5; one-tuple packets)",
        cmd.rounds
    )?;
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
        writeln!(
            o.text,
            "  {:<14} {d:>8.3} s  ({:.2}x the same-PU time)",
            p.label(),
            d / same
        )?;
        o.data.push(Measure {
            micro: "barrier",
            machine: "host".into(),
            case: p.label().into(),
            value: d,
            unit: "s",
            simulated: false,
        });
    }
    Ok(())
}
