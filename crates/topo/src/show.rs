//! A machine described for a person or a program, as `nearflow topo` prints it: its tree,
//! core groups and distance matrices as text ([`text`]), or as JSON ([`json()`]).

use serde_json::json;

use crate::Machine;

/// Most PUs for which `--json` prints the PU × PU matrices (they grow with the square of the
/// PU count: 8192 PUs took 6.8 GB); above, they are null and `pu_matrices` says why. The node
/// matrices and the core groups carry the same information at that scale.
pub const JSON_PU_MATRICES_MAX: usize = 256;

/// The machine as JSON: its source, PUs, nodes, core groups, caches, the node matrices, and
/// the PU matrices up to [`JSON_PU_MATRICES_MAX`] PUs.
pub fn json(m: &Machine) -> serde_json::Value {
    let small = m.pu_count() <= JSON_PU_MATRICES_MAX;
    json!({
        "source": m.source(),
        "pus": m.pu_count(),
        "numa_nodes": m.node_count(),
        "core_groups": m.groups().iter().map(|g| g.pus.clone()).collect::<Vec<_>>(),
        "core_group_nodes": m.groups().iter().map(|g| g.node).collect::<Vec<_>>(),
        "pu_os_index": m.pus().iter().map(|p| p.os_index).collect::<Vec<_>>(),
        "caches": m.caches(),
        "numa_matrix_raw": m.numa_raw(),
        "numa_hops": m.node_hops(),
        "pu_matrices": if small { json!("included") } else {
            json!(format!("omitted: more than {JSON_PU_MATRICES_MAX} PUs (see numa_hops and core_groups)"))
        },
        "cache_distance": small.then(|| m.cache_distance_matrix().iter()
            .map(|r| r.iter().map(|d| match d {
                crate::CacheDistance::Level(l) => json!(l),
                crate::CacheDistance::Infinite => json!(null),
            }).collect::<Vec<_>>())
            .collect::<Vec<_>>()),
        "numa_distance": small.then(|| m.numa_distance_matrix()),
        "tree": m.tree().iter().map(|t| format!("{}{}", "  ".repeat(t.depth), t.label)).collect::<Vec<_>>(),
        "warnings": m.warnings(),
    })
}

fn matrix<T: std::fmt::Display>(out: &mut String, title: &str, rows: &[Vec<T>]) {
    use std::fmt::Write;
    let _ = writeln!(out, "\n{title}");
    let w = rows.len().to_string().len().max(3) + 1;
    let _ = write!(out, "{:>w$}", "");
    for j in 0..rows.len() {
        let _ = write!(out, "{j:>w$}");
    }
    let _ = writeln!(out);
    for (i, r) in rows.iter().enumerate() {
        let _ = write!(out, "{i:>w$}");
        for v in r {
            let _ = write!(out, "{:>w$}", v.to_string());
        }
        let _ = writeln!(out);
    }
}

/// The machine as text: its tree, core groups, the node distances, and up to 64 PUs the PU
/// matrices.
pub fn text(m: &Machine) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} PUs, {} NUMA nodes, {} core groups",
        m.label(),
        m.pu_count(),
        m.node_count(),
        m.groups().len()
    );
    let _ = writeln!(out, "\nTree");
    for t in m.tree() {
        let _ = writeln!(out, "  {}{}", "  ".repeat(t.depth), t.label);
    }
    let _ = writeln!(out, "\nCore groups (one thread pool each, §4.1)");
    for g in m.groups() {
        let _ = writeln!(
            out,
            "  group {:>2}  node {}  PUs {:?}",
            g.index, g.node, g.pus
        );
    }
    if let Some(raw) = m.numa_raw() {
        matrix(&mut out, "NUMA node distances (raw, 10 = local)", raw);
    }
    matrix(&mut out, "NUMA node distances (hops)", m.node_hops());
    if m.pu_count() <= 64 {
        matrix(
            &mut out,
            "Cache distance between PUs (lowest shared level; inf = none)",
            &m.cache_distance_matrix(),
        );
        matrix(
            &mut out,
            "NUMA distance between PUs (hops)",
            &m.numa_distance_matrix(),
        );
    }
    out
}
