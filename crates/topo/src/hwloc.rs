//! The only file that talks to hwloc (like oneTBB's `tbbbind`): detection of the host, hwloc
//! synthetic strings and hwloc XML files, converted into the pure [`Machine`] model.

use std::collections::BTreeMap;
use std::path::Path;

use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::{TopologyBuilder, TypeFilter};
use hwlocality::Topology;

use crate::model::{Cache, Machine, Pu, Source, TreeLine};
use crate::TopoError;

const CACHE_TYPES: [ObjectType; 5] = [
    ObjectType::L1Cache,
    ObjectType::L2Cache,
    ObjectType::L3Cache,
    ObjectType::L4Cache,
    ObjectType::L5Cache,
];

/// Most PUs a machine may have: Linux's largest `NR_CPUS` on x86-64 is 8192, and every PU
/// becomes a runtime worker; 4096 PUs load in about a second (`pu:100000` hung with
/// no output).
pub const MAX_PUS: usize = 4096;

/// Largest OS index of a PU or NUMA node: hwloc sizes its bitmaps by the largest index, so
/// `os_index="4294967295"` cost 520 MB before anything could check it.
pub const MAX_OS_INDEX: u64 = 1 << 16;

/// Largest cache accepted (64 GiB, far above any CPU cache): the engine's packets are half the
/// L2, so an absurd size made every plan abort allocating exabytes.
pub const MAX_CACHE_BYTES: u64 = 64 << 30;

/// Largest hwloc XML file read (64 MiB; a 4096-PU machine's is a few MiB).
const MAX_XML_BYTES: u64 = 64 << 20;

/// Refuses a synthetic description that would make more than [`MAX_PUS`] PUs, before hwloc
/// builds it: the product of the arities (`pack:2 core:4 pu:2` is 16).
fn check_synthetic(description: &str) -> Result<(), TopoError> {
    let mut pus: u64 = 1;
    for token in description.split_whitespace() {
        let Some((_, rest)) = token.split_once(':') else {
            continue;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<u64>() {
            pus = pus.saturating_mul(n);
        } else if !digits.is_empty() {
            pus = u64::MAX;
        }
    }
    if pus > MAX_PUS as u64 {
        return Err(TopoError::BadSynthetic {
            input: description.to_string(),
            reason: format!(
                "it describes {} PUs; nearflow models at most {MAX_PUS}",
                if pus == u64::MAX {
                    "more than 2^64".to_string()
                } else {
                    pus.to_string()
                }
            ),
        });
    }
    Ok(())
}

/// Refuses an XML file that is too large or names an OS index beyond [`MAX_OS_INDEX`], before
/// hwloc reads it.
fn check_xml(path: &Path) -> Result<(), String> {
    let len = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if len > MAX_XML_BYTES {
        return Err(format!(
            "the file has {len} bytes; nearflow reads at most {MAX_XML_BYTES}"
        ));
    }
    let text = std::fs::read(path).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&text);
    for (at, _) in text.match_indices("os_index=\"") {
        let digits: String = text[at + 10..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if digits.parse::<u64>().map_or(true, |v| v > MAX_OS_INDEX) {
            let line = text[..at].matches('\n').count() + 1;
            return Err(format!(
                "line {line}: os_index {digits} is beyond {MAX_OS_INDEX}, the largest nearflow accepts"
            ));
        }
    }
    Ok(())
}

fn builder() -> Result<TopologyBuilder, TopoError> {
    let mut b = Topology::builder();
    // Keep every data/unified cache level even when it brings no structure (a private L2 under
    // a private L1 would otherwise be merged away by a KeepStructure filter).
    for ty in CACHE_TYPES {
        b = b
            .with_type_filter(ty, TypeFilter::KeepAll)
            .map_err(|e| TopoError::Hwloc(format!("cannot keep {ty} objects: {e}")))?;
    }
    Ok(b)
}

/// Detects this machine.
pub fn detect_host() -> Result<Machine, TopoError> {
    let topo = builder()?
        .build()
        .map_err(|e| TopoError::Hwloc(format!("hwloc could not detect this machine: {e}")))?;
    convert(&topo, Source::Host, None)
}

/// Builds a machine from an hwloc synthetic description such as
/// `pack:2 [numa] l3:1(size=8MiB) core:4 pu:2`.
pub fn from_synthetic(description: &str) -> Result<Machine, TopoError> {
    from_synthetic_with(
        description,
        Source::Synthetic(description.to_string()),
        None,
    )
}

pub(crate) fn from_synthetic_with(
    description: &str,
    source: Source,
    numa_raw: Option<Vec<Vec<u64>>>,
) -> Result<Machine, TopoError> {
    if description.trim().is_empty() {
        return Err(TopoError::BadSynthetic {
            input: description.to_string(),
            reason: "the description is empty".into(),
        });
    }
    check_synthetic(description)?;
    let topo = builder()?
        .from_synthetic(description)
        .map_err(|e| TopoError::BadSynthetic {
            input: description.to_string(),
            reason: e.to_string(),
        })?
        .build()
        .map_err(|e| TopoError::BadSynthetic {
            input: description.to_string(),
            reason: e.to_string(),
        })?;
    convert(&topo, source, numa_raw)
}

/// Loads a machine from an hwloc XML file (as written by `lstopo file.xml`), including its NUMA
/// distance matrix (`distances2`) when it has one.
pub fn from_xml_file(path: &Path) -> Result<Machine, TopoError> {
    if !path.is_file() {
        return Err(TopoError::BadXml {
            path: path.display().to_string(),
            reason: "no such file".into(),
        });
    }
    let bad = |reason: String| TopoError::BadXml {
        path: path.display().to_string(),
        reason,
    };
    check_xml(path).map_err(bad)?;
    let topo = builder()?
        .from_xml_file(path)
        .map_err(|e| bad(e.to_string()))?
        .build()
        .map_err(|e| bad(e.to_string()))?;
    convert(&topo, Source::Xml(path.display().to_string()), None)
}

fn cache_level(ty: ObjectType) -> Option<u8> {
    CACHE_TYPES
        .iter()
        .position(|&t| t == ty)
        .map(|i| i as u8 + 1)
}

fn convert(
    topo: &Topology,
    source: Source,
    numa_override: Option<Vec<Vec<u64>>>,
) -> Result<Machine, TopoError> {
    let numa: Vec<&TopologyObject> = topo.objects_with_type(ObjectType::NUMANode).collect();
    let node_count = numa.len().max(1);
    let node_by_os: BTreeMap<usize, usize> = numa
        .iter()
        .enumerate()
        .filter_map(|(i, n)| n.os_index().map(|os| (os, i)))
        .collect();

    let pu_count = topo.objects_with_type(ObjectType::PU).count();
    if pu_count > MAX_PUS {
        return Err(TopoError::Invalid(format!(
            "the machine has {pu_count} PUs; nearflow models at most {MAX_PUS}"
        )));
    }
    let mut pus = Vec::new();
    // (cache type, cache logical index) -> (level, size, pus)
    let mut caches: BTreeMap<(u8, usize), Cache> = BTreeMap::new();
    for (index, obj) in topo.objects_with_type(ObjectType::PU).enumerate() {
        let os_index = obj.os_index().unwrap_or(index);
        if os_index as u64 > MAX_OS_INDEX {
            return Err(TopoError::Invalid(format!(
                "PU {index} has OS index {os_index}, beyond {MAX_OS_INDEX}"
            )));
        }
        let core = obj
            .ancestors()
            .find(|a| a.object_type() == ObjectType::Core)
            .map_or(index, |c| c.logical_index());
        let package = obj
            .ancestors()
            .find(|a| a.object_type() == ObjectType::Package)
            .map_or(0, |c| c.logical_index());
        let node = obj
            .nodeset()
            .and_then(|ns| ns.first_set())
            .and_then(|os| node_by_os.get(&usize::from(os)).copied())
            .unwrap_or(0);
        for a in obj.ancestors() {
            if let Some(level) = cache_level(a.object_type()) {
                let size = match a.attributes() {
                    Some(ObjectAttributes::Cache(c)) => c.size().map(|s| s.get()),
                    _ => None,
                };
                if let Some(bytes) = size.filter(|&b| b > MAX_CACHE_BYTES) {
                    return Err(TopoError::Invalid(format!(
                        "an L{level} cache of {bytes} bytes; nearflow accepts caches of at most {} GiB",
                        MAX_CACHE_BYTES >> 30
                    )));
                }
                caches
                    .entry((level, a.logical_index()))
                    .or_insert_with(|| Cache {
                        level,
                        size,
                        pus: Vec::new(),
                    })
                    .pus
                    .push(index);
            }
        }
        pus.push(Pu {
            index,
            os_index,
            core,
            package,
            node,
        });
    }

    let numa_raw = match numa_override {
        Some(m) => Some(m),
        None => numa_matrix(topo, &numa)?,
    };
    let mut tree = Vec::new();
    walk(topo.root_object(), 0, &mut tree);
    Machine::new(
        source,
        pus,
        caches.into_values().collect(),
        node_count,
        numa_raw,
        tree,
    )
}

/// The NUMA node latency matrix hwloc knows (from the OS, or `distances2` in XML), in NUMA
/// logical order.
fn numa_matrix(
    topo: &Topology,
    numa: &[&TopologyObject],
) -> Result<Option<Vec<Vec<u64>>>, TopoError> {
    if numa.len() < 2 {
        return Ok(None);
    }
    let all = topo
        .distances_with_type(None, ObjectType::NUMANode)
        .map_err(|e| TopoError::Hwloc(format!("cannot read NUMA distances: {e}")))?;
    for d in all {
        if d.num_objects() != numa.len() {
            continue;
        }
        let order: Vec<Option<usize>> = d.objects().map(|o| o.map(|o| o.logical_index())).collect();
        if order.iter().any(Option::is_none) {
            continue;
        }
        let n = numa.len();
        let mut m = vec![vec![0u64; n]; n];
        let flat = d.distances();
        for (i, a) in order.iter().enumerate() {
            for (j, b) in order.iter().enumerate() {
                let (a, b) = (a.unwrap_or(0), b.unwrap_or(0));
                if a >= n || b >= n {
                    return Err(TopoError::Invalid(
                        "NUMA distance matrix names unknown nodes".into(),
                    ));
                }
                m[a][b] = flat[i * n + j];
            }
        }
        return Ok(Some(m));
    }
    Ok(None)
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

fn walk(obj: &TopologyObject, depth: usize, out: &mut Vec<TreeLine>) {
    let ty = obj.object_type();
    let label = if let Some(level) = cache_level(ty) {
        match obj.attributes() {
            Some(ObjectAttributes::Cache(c)) => match c.size() {
                Some(s) => format!("L{level} ({})", human(s.get())),
                None => format!("L{level}"),
            },
            _ => format!("L{level}"),
        }
    } else {
        match ty {
            ObjectType::PU => format!(
                "PU #{} (os {})",
                obj.logical_index(),
                obj.os_index().map_or_else(|| "?".into(), |o| o.to_string())
            ),
            ObjectType::NUMANode => format!("NUMANode #{}", obj.logical_index()),
            ObjectType::L1ICache | ObjectType::L2ICache | ObjectType::L3ICache => String::new(),
            other => format!("{other} #{}", obj.logical_index()),
        }
    };
    let next = if label.is_empty() {
        depth
    } else {
        out.push(TreeLine { depth, label });
        depth + 1
    };
    for m in obj.memory_children() {
        walk(m, next, out);
    }
    for c in obj.normal_children() {
        walk(c, next, out);
    }
}
