//! `nearflow bench streammap --simulate x5355,e5320-uma,nehalem-2x4`: StreamMap's three
//! micro-benchmarks (§III: Fig. 4, Tables I–II, Fig. 5) on models of its machines
//! (SIMULATED). Each plan is calibrated once on this host (per-tuple costs, operator state
//! sizes; `map_sim::calibrate_plan`) and then run in the simulator under the `pinned` policy
//! with its two threads on two PUs at every distance the machine has: the same PU, under one
//! L2, in one package or node, across the machine.

use anyhow::{bail, Result};
use nearflow_flow::PlanBuilder;
use nearflow_map::CacheTree;
use nearflow_topo::Machine;

use super::micro::{chain, mix, Config, Measure, Out, OPS};
use crate::map::sim::{calibrate_plan, simulate_mapped};

/// Runs the micro-benchmarks of `cmd` on the machines `presets` names, into `o`.
pub(crate) fn run(cmd: &Config, presets: &str, o: &mut Out) -> Result<()> {
    use std::fmt::Write;
    let machines: Vec<Machine> = presets
        .split(',')
        .map(|p| nearflow_topo::presets::build(p.trim()).map_err(anyhow::Error::from))
        .collect::<Result<_>>()?;
    if machines.iter().any(|m| m.pu_count() < 2) {
        bail!("the micro-benchmarks need machines of at least 2 PUs");
    }
    let packet = cmd.packet_bytes as u64;
    let micro: Vec<&str> = cmd.micro.split(',').map(str::trim).collect();
    if let Some(m) = micro
        .iter()
        .find(|m| !["pc", "contention", "barrier"].contains(m))
    {
        bail!("unknown micro-benchmark {m:?}: expected pc, contention, barrier");
    }
    writeln!(
        o.text,
        "StreamMap micro-benchmarks, SIMULATED on {presets} (costs calibrated on {})",
        nearflow_topo::host::cpu_label()
    )?;
    if micro.contains(&"pc") {
        let n = cmd.tuples;
        let (model, shape) = calibrate_plan(
            "pc",
            packet,
            |b: &mut PlanBuilder| {
                b.on_thread(Some(0));
                let s = b.generate(n, mix);
                b.on_thread(Some(1));
                let f = b.filter(s, |x: &u64| *x == 0);
                b.collect(f)
            },
            |out, s| out.take(s).is_empty() == (0..n).all(|i| mix(i) != 0),
        )?;
        writeln!(
            o.text,
            "\nproducer → consumer, {n} tuples of 8 B (Fig. 4; SIMULATED)"
        )?;
        for m in &machines {
            for (label, pus) in pairs(m) {
                let r = simulate_mapped(m, &model, &shape, &pus)?;
                let mbs = n as f64 * 8.0 / (r.makespan_ns as f64 * 1e-9) / 1e6;
                writeln!(o.text, "  {:<12} {label:<28} {mbs:>9.1} MB/s", name(m))?;
                o.data.push(Measure {
                    micro: "pc",
                    machine: name(m),
                    case: label,
                    value: mbs,
                    unit: "MB/s",
                    simulated: true,
                });
            }
        }
    }
    if micro.contains(&"contention") {
        contention(cmd, &machines, packet, o)?;
    }
    if micro.contains(&"barrier") {
        let n = cmd.rounds;
        let (model, shape) = calibrate_plan(
            "barrier",
            8,
            |b: &mut PlanBuilder| {
                b.buffer_packets(1);
                b.on_thread(Some(0));
                let a = b.generate(n, |i| i);
                b.on_thread(Some(1));
                let c = b.generate(n, |i| i);
                b.on_thread(None);
                let z = b.zip(a, c);
                b.collect(z)
            },
            |out, s| out.take(s).len() as u64 == n,
        )?;
        writeln!(
            o.text,
            "\nbarrier: two threads meet at a shared zip {n} times (Fig. 5; SIMULATED)"
        )?;
        for m in &machines {
            let mut base = None;
            for (label, pus) in pairs(m) {
                let r = simulate_mapped(m, &model, &shape, &pus)?;
                let s = r.makespan_ns as f64 * 1e-9;
                let b = *base.get_or_insert(s);
                writeln!(
                    o.text,
                    "  {:<12} {label:<28} {s:>8.3} s  ({:.2}x the same-PU time)",
                    name(m),
                    s / b
                )?;
                o.data.push(Measure {
                    micro: "barrier",
                    machine: name(m),
                    case: label,
                    value: s,
                    unit: "s",
                    simulated: true,
                });
            }
        }
    }
    Ok(())
}

fn name(m: &Machine) -> String {
    match m.source() {
        nearflow_topo::Source::Preset(p) => p.clone(),
        _ => "machine".into(),
    }
}

/// PU pairs at every distance from PU 0, nearest first: (what they share, [0, j]).
fn pairs(m: &Machine) -> Vec<(String, [usize; 2])> {
    let tree = CacheTree::new(m);
    let mut out = vec![("same PU".to_string(), [0, 0])];
    let mut seen = Vec::new();
    for j in 1..m.pu_count() {
        let d = tree.common_depth(0, j);
        if seen.contains(&d) {
            continue;
        }
        seen.push(d);
        // The lowest vertex holding both.
        let mut v = 0;
        for _ in 0..d {
            v = tree.vertices[v]
                .children
                .iter()
                .copied()
                .find(|&c| tree.vertices[c].pus.contains(&j))
                .expect("a common vertex");
        }
        let what = if v == 0 {
            "only the machine".to_string()
        } else {
            tree.vertices[v].label.clone()
        };
        out.push((format!("PU 0 and {j}: {what}"), [0, j]));
    }
    out.sort_by_key(|(_, p)| {
        std::cmp::Reverse(tree.common_depth(0, p[1]) + usize::from(p[1] == 0) * 100)
    });
    out
}

/// Tables I–II: the left chain's finishing time alone over its finishing time with the right
/// chain (twice as long, so it runs throughout) on the nearest and the farthest other PU. Both
/// from one calibration of the pair (run together on this host), so the ratio compares
/// placements, not two calibrations.
fn contention(cmd: &Config, machines: &[Machine], packet: u64, o: &mut Out) -> Result<()> {
    use std::fmt::Write;
    let n = cmd.tuples;
    let ok = |_: &nearflow_flow::PlanOutput, _: &nearflow_flow::Sink<u64>| true;
    writeln!(o.text, "\ncontention: left chain's rate with the right chain running / alone (Tables I–II; SIMULATED), {n} tuples")?;
    let mut pairs_cal = Vec::new();
    for left in OPS {
        for right in OPS {
            let cal = calibrate_plan(
                "pair",
                packet,
                |b| {
                    let s = chain(b, left, n, 0);
                    let _ = chain(b, right, 2 * n, 1);
                    s
                },
                ok,
            )?;
            // The left chain's operators come first.
            let mut b = PlanBuilder::new();
            let _ = chain(&mut b, left, n, 0);
            pairs_cal.push((cal, b.len()));
        }
    }
    for m in machines {
        let p = pairs(m);
        let cases = [&p[1], &p[p.len() - 1]];
        for (label, pus) in cases {
            writeln!(
                o.text,
                "  {} — left on PU 0, right on PU {}: {label} (rows: left, columns: right)",
                name(m),
                pus[1]
            )?;
            write!(o.text, "  {:<11}", "")?;
            for r in OPS {
                write!(o.text, " {r:>10}")?;
            }
            writeln!(o.text)?;
            for (li, left) in OPS.iter().enumerate() {
                write!(o.text, "  {left:<11}")?;
                for ri in 0..OPS.len() {
                    let ((model, shape), left_ops) = &pairs_cal[li * OPS.len() + ri];
                    // Alone: the same calibrated model without the right chain (its
                    // operators come after the left's and connect only among themselves).
                    let (mut lm, mut ls) = (model.clone(), shape.clone());
                    lm.operators.truncate(*left_ops);
                    ls.operators.truncate(*left_ops);
                    let alone = simulate_mapped(m, &lm, &ls, &[0])?.makespan_ns as f64;
                    let r = simulate_mapped(m, model, shape, &[0, pus[1]])?;
                    let done = r.operator_done_ns[0][..*left_ops]
                        .iter()
                        .copied()
                        .max()
                        .unwrap_or(r.makespan_ns) as f64;
                    let pct = 100.0 * alone / done;
                    write!(o.text, " {pct:>9.1}%")?;
                    o.data.push(Measure {
                        micro: "contention",
                        machine: name(m),
                        case: format!("{left} with {} on {label}", OPS[ri]),
                        value: pct,
                        unit: "% of alone",
                        simulated: true,
                    });
                }
                writeln!(o.text)?;
            }
        }
    }
    Ok(())
}
