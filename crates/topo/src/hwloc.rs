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

    let mut pus = Vec::new();
    // (cache type, cache logical index) -> (level, size, pus)
    let mut caches: BTreeMap<(u8, usize), Cache> = BTreeMap::new();
    for (index, obj) in topo.objects_with_type(ObjectType::PU).enumerate() {
        let os_index = obj.os_index().unwrap_or(index);
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
