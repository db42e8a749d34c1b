//! Flags shared by several commands.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use nearflow_topo::{Machine, TopologySpec};

/// Which machine to model (default: this host).
#[derive(Args, Clone, Debug, Default)]
#[group(multiple = false)]
pub struct TopoArgs {
    /// A named machine of the papers (`nearflow topo --list`), or `host`.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// An hwloc synthetic description, e.g. "pack:2 [numa] l3:1(size=8MiB) core:4 pu:2".
    #[arg(long, value_name = "STR")]
    pub synthetic: Option<String>,
    /// An hwloc XML file (as written by `lstopo file.xml`), with its NUMA distance matrix.
    #[arg(long, value_name = "FILE")]
    pub xml: Option<PathBuf>,
}

impl TopoArgs {
    /// The spec these flags name.
    pub fn spec(&self) -> Result<TopologySpec> {
        Ok(if let Some(p) = &self.preset {
            p.parse::<TopologySpec>()?
        } else if let Some(s) = &self.synthetic {
            TopologySpec::Synthetic(s.clone())
        } else if let Some(x) = &self.xml {
            TopologySpec::Xml(x.clone())
        } else {
            TopologySpec::Host
        })
    }

    /// Loads the machine, printing what it accepted with a caveat on stderr.
    pub fn load(&self) -> Result<Machine> {
        let spec = self.spec()?;
        let m = spec
            .load()
            .with_context(|| format!("cannot build topology {spec:?}"))?;
        for w in m.warnings() {
            eprintln!("warning: {w}");
        }
        Ok(m)
    }
}

/// A short human name of a machine's source.
pub fn machine_label(m: &Machine) -> String {
    match m.source() {
        nearflow_topo::Source::Host => format!("host ({} PUs)", m.pu_count()),
        nearflow_topo::Source::Preset(p) => format!("{p} ({} PUs)", m.pu_count()),
        nearflow_topo::Source::Synthetic(s) => format!("synthetic \"{s}\" ({} PUs)", m.pu_count()),
        nearflow_topo::Source::Xml(x) => format!("xml {x} ({} PUs)", m.pu_count()),
    }
}

/// Parses a comma-separated list.
pub fn parse_list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>>
where
    T::Err: std::fmt::Display,
{
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<T>().map_err(|e| anyhow::anyhow!("`{x}`: {e}")))
        .collect()
}

/// A runtime for `machine`, `policy`, `pinning`, an optional trace and the allocator setting,
/// checked to be in effect (the binary installs the nearflow global allocator, so `nearflow`
/// must take effect when asked for); see [`start_runtime`], through which every runtime of the
/// CLI starts.
pub fn build_runtime(
    machine: nearflow_topo::Machine,
    policy: nearflow_policy::PolicyKind,
    pinning: nearflow_rt::Pinning,
    trace: bool,
    allocator: nearflow_rt::Allocator,
) -> anyhow::Result<nearflow_rt::Runtime> {
    start_runtime(
        nearflow_rt::Runtime::builder(machine)
            .policy(policy)
            .pinning(pinning)
            .trace(trace),
        allocator,
    )
}

/// Starts the runtime `builder` describes with `allocator`, failing if another allocator is in
/// effect (a column of a table would otherwise be mislabelled).
pub fn start_runtime(
    builder: nearflow_rt::Builder,
    allocator: nearflow_rt::Allocator,
) -> anyhow::Result<nearflow_rt::Runtime> {
    use anyhow::Context;
    let rt = builder
        .allocator(allocator)
        .build()
        .context("cannot start the runtime")?;
    let in_effect = rt.allocator_in_effect();
    if in_effect != allocator {
        anyhow::bail!("allocator {allocator} requested but {in_effect} is in effect");
    }
    Ok(rt)
}
