//! # nearflow-topo — the hardware model
//!
//! What the scheduler needs to know about a machine, after
//! `../shared/papers/las-scheduler-and-numa-allocator.txt` §2 and §4.1–4.2:
//!
//! - the **processing units** (logical cores) with their physical core and NUMA node;
//! - every data/unified **cache** level (hwloc is told to keep all of them) and the PUs under it;
//! - the **cache distance** of two PUs — the lowest cache level they share, infinite if none — and
//!   their **NUMA distance** — hops between their nodes, derived from the node distance matrix;
//! - the **core groups** of §4.1: PUs that share at least one cache, never spanning a NUMA node.
//!   The runtime creates one thread pool per group.
//!
//! A [`Machine`] comes from hwloc: the detected host, an hwloc synthetic string, an hwloc XML file
//! (with its `distances2` matrix), or a named [preset](presets::PRESETS) of the papers' machines.
//! hwloc is confined to one module (`hwloc.rs`), like oneTBB's `tbbbind`; the model itself is plain
//! data and every derived quantity is computed from it in `model.rs`.
//!
//! Invariants: PU indices are `0..n`; groups partition the PUs and each lies in one node; cache
//! distance is symmetric and `Level(1)` for a PU with itself whenever it has an L1.
//!
//! ## Files
//!
//! - `model.rs` — the plain-data [`Machine`] and everything derived from it (distances, groups).
//! - `hwloc.rs` — the only use of hwloc: detection, synthetic strings, XML with distances.
//! - `presets.rs` — the papers' machines as hwloc synthetic strings with distance matrices.
//! - `bind.rs` — binding the calling thread to PUs.

mod bind;
pub mod host;
mod hwloc;
mod model;
pub mod presets;
pub mod show;
pub mod units;

use std::path::PathBuf;
use std::str::FromStr;

pub use bind::bind_current_thread;
pub use hwloc::{MAX_CACHE_BYTES, MAX_OS_INDEX, MAX_PUS};
pub use model::{
    hops_and_warnings, hops_from_matrix, Cache, CacheDistance, CoreGroup, GroupId, Machine, NodeId,
    Pu, PuId, Source, TreeLine,
};

/// Everything that can go wrong while building or using a topology.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    /// `--preset` named no known machine.
    #[error("unknown preset `{name}`; known presets: host, {known}")]
    UnknownPreset { name: String, known: String },
    /// hwloc rejected a synthetic description.
    #[error("invalid hwloc synthetic topology `{input}`: {reason} (example: \"pack:2 [numa] l3:1(size=8MiB) core:4 pu:2\")")]
    BadSynthetic { input: String, reason: String },
    /// hwloc could not load an XML file.
    #[error("cannot load hwloc XML topology {path}: {reason}")]
    BadXml { path: String, reason: String },
    /// The topology is inconsistent.
    #[error("invalid topology: {0}")]
    Invalid(String),
    /// hwloc itself failed.
    #[error("hwloc error: {0}")]
    Hwloc(String),
    /// Binding was asked for on a machine that is not this host.
    #[error("cannot bind threads: the topology does not describe this host")]
    NotHost,
    /// The OS refused the binding.
    #[error("cannot bind thread: {0}")]
    Bind(String),
}

/// Which machine to model: the form of the CLI's `--preset/--synthetic/--xml` flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologySpec {
    /// The detected machine.
    Host,
    /// A named preset (see [`presets::PRESETS`]).
    Preset(String),
    /// An hwloc synthetic description.
    Synthetic(String),
    /// An hwloc XML file.
    Xml(PathBuf),
}

impl TopologySpec {
    /// Builds the machine this spec names.
    pub fn load(&self) -> Result<Machine, TopoError> {
        match self {
            TopologySpec::Host => hwloc::detect_host(),
            TopologySpec::Preset(name) => presets::build(name),
            TopologySpec::Synthetic(s) => hwloc::from_synthetic(s),
            TopologySpec::Xml(p) => hwloc::from_xml_file(p),
        }
    }
}

impl FromStr for TopologySpec {
    type Err = TopoError;
    /// Parses a preset name, `host`, `synthetic:STR` or `xml:PATH`.
    fn from_str(s: &str) -> Result<Self, TopoError> {
        if s == "host" {
            Ok(TopologySpec::Host)
        } else if let Some(rest) = s.strip_prefix("synthetic:") {
            Ok(TopologySpec::Synthetic(rest.to_string()))
        } else if let Some(rest) = s.strip_prefix("xml:") {
            Ok(TopologySpec::Xml(PathBuf::from(rest)))
        } else if presets::find(s).is_some() {
            Ok(TopologySpec::Preset(s.to_string()))
        } else {
            Err(TopoError::UnknownPreset {
                name: s.to_string(),
                known: presets::PRESETS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    }
}

/// Detects this machine with hwloc.
pub fn detect_host() -> Result<Machine, TopoError> {
    hwloc::detect_host()
}

/// Builds a machine from an hwloc synthetic description.
pub fn from_synthetic(description: &str) -> Result<Machine, TopoError> {
    hwloc::from_synthetic(description)
}

/// Loads a machine from an hwloc XML file.
pub fn from_xml_file(path: impl AsRef<std::path::Path>) -> Result<Machine, TopoError> {
    hwloc::from_xml_file(path.as_ref())
}
