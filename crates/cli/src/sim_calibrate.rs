//! Calibrating the simulator's plan model from a traced run of the real engine on this host
//! (`nearflow sim --workload plans`).
//!
//! The generated plan of `bench plans` runs untimed, then `CONCURRENT` copies at once with the
//! runtime's trace on (one plan alone on an otherwise idle pool pays cold caches and idle
//! wake-ups that a loaded engine does not: calibrated that way, the model over-estimated 16
//! concurrent plans by 1.6×). From each copy's run: the plan's shape (`Plan::shape`), each operator's tasks and busy time
//! (trace events, labelled by operator), its tuples in and out (the input buffers' counters),
//! and whether it sent anything before its inputs ended (`PlanStats::sends`: an operator that
//! did not is blocking). Costs are per tuple, so the model can run at another packet size: the
//! simulated machine's own (half its L2, as the engine's default) unless `--packet-bytes` says.

use anyhow::{bail, Result};
use nearflow_apps::genplan;
use nearflow_flow::{PlanBuilder, PlanShape, PlanStats};
use nearflow_rt::TraceEvent;
use nearflow_sim::{OpKind, OpModel, PlanModel};

/// What was measured, besides the model.
pub(crate) struct Calibration {
    pub(crate) model: PlanModel,
    /// Wall time of the traced run, ms.
    pub(crate) traced_ms: f64,
    pub(crate) host_packet_bytes: usize,
}

/// Plans run at once for the calibration; their per-tuple costs are averaged.
const CONCURRENT: usize = 4;

/// Runs the generated plan (`rows` per source) on this host under LAS and derives its model at
/// `packet_bytes`.
pub(crate) fn genplan(rows: u64, packet_bytes: u64) -> Result<Calibration> {
    if rows == 0 {
        bail!("--rows must be at least 1");
    }
    let host = nearflow_topo::detect_host()?;
    let rt = crate::args::build_runtime(
        host,
        nearflow_policy::PolicyKind::Las,
        nearflow_rt::Pinning::Group,
        true,
        nearflow_rt::Allocator::Nearflow,
    )?;
    let expect = genplan::reference(rows);
    let run = |rt: &nearflow_rt::Runtime| -> Result<Vec<(PlanShape, PlanStats, u64)>> {
        let mut handles = Vec::new();
        for _ in 0..CONCURRENT {
            let mut b = PlanBuilder::for_runtime(rt);
            let sinks = genplan::build(&mut b, rows);
            let plan = b.build()?;
            let shape = plan.shape();
            handles.push((shape, plan.submit(rt), sinks));
        }
        let mut runs = Vec::new();
        for (shape, handle, sinks) in handles {
            let req = handle.request_id();
            let out = handle.wait()?;
            if genplan::result(&out, &sinks) != expect {
                bail!("the generated plan's result differs from its reference");
            }
            runs.push((shape, out.stats, req));
        }
        Ok(runs)
    };
    run(&rt)?; // warm-up
    rt.take_trace();
    let runs = run(&rt)?;
    let events = rt.take_trace();
    let mut models = Vec::new();
    for (shape, stats, req) in &runs {
        let mine: Vec<TraceEvent> = events
            .iter()
            .filter(|e| e.request == *req)
            .copied()
            .collect();
        models.push(derive(shape, stats, &mine, packet_bytes, "generated plan")?);
    }
    let mut model = models.swap_remove(0);
    for (i, op) in model.operators.iter_mut().enumerate() {
        let sum: f64 = models.iter().map(|m| m.operators[i].ns_per_tuple).sum();
        op.ns_per_tuple = (op.ns_per_tuple + sum) / (models.len() + 1) as f64;
    }
    let (_, stats, _) = &runs[0];
    Ok(Calibration {
        model,
        traced_ms: runs
            .iter()
            .map(|r| r.1.elapsed.as_secs_f64() * 1e3)
            .fold(0.0, f64::max),
        host_packet_bytes: stats.packet_bytes,
    })
}

/// The model of one traced run.
pub(crate) fn derive(
    shape: &PlanShape,
    stats: &PlanStats,
    events: &[TraceEvent],
    packet_bytes: u64,
    name: &str,
) -> Result<PlanModel> {
    let ops = &shape.operators;
    // Input buffers are listed operator by operator, port by port.
    let mut first_chan = Vec::with_capacity(ops.len());
    let mut n = 0;
    for o in ops {
        first_chan.push(n);
        n += o.fed_by.len();
    }
    if stats.channels.len() != n || stats.sends.len() != ops.len() {
        bail!("the run's counters do not match the plan's shape");
    }
    let chan = |op: usize, port: usize| &stats.channels[first_chan[op] + port];
    let mut busy = vec![0f64; ops.len()];
    let mut runs = vec![0u64; ops.len()];
    for e in events {
        if let Some(b) = busy.get_mut(e.label as usize) {
            *b += (e.end_ns - e.start_ns) as f64;
            runs[e.label as usize] += 1;
        }
    }
    let operators = ops
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let tuples_in: u64 = (0..o.fed_by.len()).map(|p| chan(i, p).tuples_popped).sum();
            let out: Vec<u64> = o
                .feeds
                .iter()
                .map(|&(c, cp)| chan(c, cp).tuples_pushed)
                .collect();
            let tuple_bytes_out: Vec<u64> = o
                .output_tuple_bytes
                .iter()
                .map(|&b| b.max(1) as u64)
                .collect();
            let (kind, ns_per_tuple, out_per_in) = if o.fed_by.is_empty() {
                // Packets at the simulated size; tuples per packet from the run.
                let packets = out
                    .iter()
                    .zip(&tuple_bytes_out)
                    .map(|(&t, &b)| t.div_ceil((packet_bytes / b).max(1)))
                    .max()
                    .unwrap_or(0)
                    .max(1);
                let host_packets: u64 = o
                    .feeds
                    .iter()
                    .map(|&(c, cp)| chan(c, cp).pushed)
                    .max()
                    .unwrap_or(0);
                let per_run = host_packets.div_ceil(runs[i].max(1)).max(1);
                let total: u64 = out.iter().sum();
                (
                    OpKind::Source { packets, per_run },
                    busy[i] / total.max(1) as f64,
                    out.iter().map(|&t| t as f64 / packets as f64).collect(),
                )
            } else {
                let s = stats.sends[i];
                let kind = if s.while_inputs_open == 0 && s.after_inputs_closed > 0 {
                    OpKind::Blocking
                } else {
                    OpKind::Stream
                };
                (
                    kind,
                    busy[i] / tuples_in.max(1) as f64,
                    out.iter()
                        .map(|&t| t as f64 / tuples_in.max(1) as f64)
                        .collect(),
                )
            };
            OpModel {
                name: o.name.clone(),
                fed_by: o.fed_by.clone(),
                feeds: o.feeds.clone(),
                kind,
                ns_per_tuple,
                out_per_in,
                tuple_bytes_out,
                home: o.home_node,
            }
        })
        .collect();
    Ok(PlanModel {
        name: name.into(),
        operators,
        buffer_packets: shape.buffer_packets,
        packet_bytes,
    })
}
