//! `nearflow bench streammap`: StreamMap's micro-benchmarks (`streammap-cache-topology-mapping.txt`
//! §III) on this host, each thread mapped to a PU by the `pinned` policy:
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
//! the paper's machines instead (SIMULATED, `simulated.rs`).

mod host;
mod micro;
mod simulated;

pub use micro::{Config, Measure};

use anyhow::{bail, Result};

use crate::Report;

/// Runs the micro-benchmarks `cmd.micro` names, measured on this host or simulated.
pub fn run(cmd: &Config) -> Result<Report<Vec<Measure>>> {
    use std::fmt::Write;
    if cmd.repeat == 0 || cmd.tuples == 0 || cmd.rounds == 0 {
        bail!("--repeat, --tuples and --rounds must be at least 1");
    }
    let mut o = micro::Out::default();
    if let Some(presets) = &cmd.simulate {
        simulated::run(cmd, presets, &mut o)?;
        return Ok(Report::new(o.data, o.text));
    }
    let rts = host::Rts::new()?;
    writeln!(
        o.text,
        "StreamMap micro-benchmarks on {} (measured)",
        nearflow_topo::host::cpu_label()
    )?;
    for m in cmd.micro.split(',').map(str::trim) {
        match m {
            "pc" => host::producer_consumer(cmd, &rts, &mut o)?,
            "contention" => host::contention(cmd, &rts, &mut o)?,
            "barrier" => host::barrier(cmd, &rts, &mut o)?,
            other => bail!("unknown micro-benchmark {other:?}: expected pc, contention, barrier"),
        }
    }
    Ok(Report::new(o.data, o.text))
}
