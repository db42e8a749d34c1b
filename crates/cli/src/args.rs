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

/// A runtime for `machine` with `policy`, `pinning`, an optional trace and `allocator`,
/// checked to be in effect ([`nearflow_rt::Builder::build_checked`]).
pub fn build_runtime(
    machine: Machine,
    policy: nearflow_policy::PolicyKind,
    pinning: nearflow_rt::Pinning,
    trace: bool,
    allocator: nearflow_rt::AllocatorKind,
) -> Result<nearflow_rt::Runtime> {
    nearflow_rt::Runtime::builder(machine)
        .policy(policy)
        .pinning(pinning)
        .trace(trace)
        .allocator(allocator)
        .build_checked()
        .context("cannot start the runtime")
}

/// Where a store comes from (`sparql`, `serve`, `bench sp2bench`, `bench serve`): one of the
/// two is needed, except by `sparql`, whose query may name its files (`FROM <file>`).
#[derive(Args, Debug, Clone)]
#[group(required = false, multiple = false)]
pub struct SourceArgs {
    /// RDF files to load (Turtle/.n3, N-Triples, N-Quads, TriG, RDF/XML; gzip recognised; `-`
    /// is standard input), comma-separated.
    #[arg(long, value_name = "FILE[,FILE…]", value_delimiter = ',')]
    pub data: Vec<PathBuf>,
    /// A store snapshot written by `nearflow load … --save`.
    #[arg(long, value_name = "STORE")]
    pub store: Option<PathBuf>,
}

/// Where a store's indexes lie over the NUMA nodes (`nearflow_rdf::open::StorePlacement`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum StorePlacementArg {
    /// Each permutation split by key range over the nodes, scans homed on their partition's.
    #[default]
    Partitioned,
    /// Every node also holds a copy of every permutation, read by the workers on it (memory:
    /// the indexes once more per extra node; nothing copied on one node).
    Replicated,
}

impl From<StorePlacementArg> for nearflow_rdf::open::StorePlacement {
    fn from(a: StorePlacementArg) -> Self {
        match a {
            StorePlacementArg::Partitioned => Self::Partitioned,
            StorePlacementArg::Replicated => Self::Replicated,
        }
    }
}

/// How RDF files are read.
#[derive(Args, Debug, Clone)]
pub struct ReadArgs {
    /// The base IRI relative IRIs in the data resolve against (default: each file's own
    /// `file:` IRI; standard input has none).
    #[arg(long, value_name = "IRI")]
    pub base: Option<String>,
    /// The syntax of the data, for every file: an extension (ttl, nt, nq, trig, rdf) or a
    /// media type (text/turtle, application/rdf+xml, …). Default: each file's name says it.
    #[arg(long = "data-format", value_name = "FORMAT", value_parser = parse_format)]
    pub data_format: Option<nearflow_rdf::load::Format>,
    /// Loads a triples file (Turtle, N-Triples, RDF/XML) into the named graph IRI, beside the
    /// other files; repeatable. The file's name is what follows the last `=`.
    #[arg(long, value_name = "IRI=FILE", value_parser = parse_named)]
    pub named: Vec<(String, PathBuf)>,
}

impl ReadArgs {
    /// As the loader's options.
    pub fn options(&self) -> nearflow_rdf::load::LoadOptions {
        nearflow_rdf::load::LoadOptions {
            base: self.base.clone(),
            format: self.data_format,
            named: self.named.clone(),
        }
    }
}

fn parse_named(s: &str) -> Result<(String, PathBuf), String> {
    let (iri, file) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("`{s}` is not IRI=FILE (e.g. http://example.org/g=data.ttl)"))?;
    if iri.is_empty() || file.is_empty() {
        return Err(format!(
            "`{s}` is not IRI=FILE (e.g. http://example.org/g=data.ttl)"
        ));
    }
    Ok((iri.to_owned(), PathBuf::from(file)))
}

fn parse_format(s: &str) -> Result<nearflow_rdf::load::Format, String> {
    nearflow_rdf::load::Format::from_name(s).ok_or_else(|| {
        format!("unknown RDF format '{s}' (ttl, n3, nt, nq, trig, rdf, or a media type)")
    })
}

impl SourceArgs {
    /// Whether they name nothing (nor does `--named`).
    pub fn is_empty(&self, read: &ReadArgs) -> bool {
        self.store.is_none() && self.data.is_empty() && read.named.is_empty()
    }

    /// The source these flags name, files read as `read` says; an error when they name none.
    pub fn source(&self, read: &ReadArgs) -> Result<nearflow_rdf::open::Source> {
        if self.is_empty(read) {
            anyhow::bail!("give the data: --data FILE[,FILE…] or --store STORE");
        }
        Ok(match &self.store {
            Some(p) => nearflow_rdf::open::Source::Snapshot(p.clone()),
            None => nearflow_rdf::open::Source::Files(self.data.clone(), read.options()),
        })
    }
}

/// A parser for an integer flag in `lo..=hi`: a value outside says the range, instead of a
/// panic or a hang deep in the work (`--tasks 18446744073709551615` would otherwise fail with
/// "capacity overflow"). Underscores are allowed (`1_000_000`).
pub fn int_in<T>(lo: T, hi: T) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: std::str::FromStr + PartialOrd + Copy + std::fmt::Display + Send + Sync + 'static,
    T::Err: std::fmt::Display,
{
    move |s: &str| {
        let v: T = s
            .replace('_', "")
            .parse()
            .map_err(|e| format!("`{s}` is not a whole number in {lo}..={hi} ({e})"))?;
        if v < lo || v > hi {
            return Err(format!("{v} is out of range: give {lo}..={hi}"));
        }
        Ok(v)
    }
}

/// A parser for a real-number flag in `lo..=hi` (finite).
pub fn real_in(lo: f64, hi: f64) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync {
    move |s: &str| {
        let v: f64 = s
            .parse()
            .map_err(|e| format!("`{s}` is not a number ({e})"))?;
        if !(v.is_finite() && v >= lo && v <= hi) {
            return Err(format!("{s} is out of range: give {lo}..={hi}"));
        }
        Ok(v)
    }
}

pub use nearflow_topo::units::{bytes, duration};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_units_and_refusals() {
        let p = int_in(1u64, 1000);
        assert_eq!(p("1_000"), Ok(1000));
        assert!(p("0").unwrap_err().contains("1..=1000"));
        assert!(p("18446744073709551615")
            .unwrap_err()
            .contains("out of range"));
        assert!(p("18446744073709551616")
            .unwrap_err()
            .contains("not a whole number"));
        assert!(p("-1").is_err());
        let r = real_in(0.0, 1.0);
        assert_eq!(r("0.5"), Ok(0.5));
        assert!(r("NaN").is_err() && r("inf").is_err() && r("2").is_err());
        assert_eq!(duration("250ms"), Ok(std::time::Duration::from_millis(250)));
        assert_eq!(duration("2m"), Ok(std::time::Duration::from_secs(120)));
        assert_eq!(duration("1.5"), Ok(std::time::Duration::from_millis(1500)));
        assert!(duration("0").is_err() && duration("10y").is_err() && duration("1e400").is_err());
        assert!(duration("99999999999999999999").is_err());
        assert_eq!(bytes("2MiB"), Ok(2 << 20));
        assert_eq!(bytes("1GB"), Ok(1_000_000_000));
        assert_eq!(bytes("4096"), Ok(4096));
        assert!(bytes("0").is_err() && bytes("2EiB").is_err() && bytes("9999999999T").is_err());
    }
}
