//! The pure hardware model: PUs, caches, NUMA nodes, distances and core groups.
//!
//! Nothing here talks to hwloc; [`crate::hwloc`] converts an hwloc topology into a [`Machine`],
//! and tests can build one by hand. Definitions follow
//! `../shared/papers/las-scheduler-and-numa-allocator.txt` §4.1 (core groups) and §4.2 (cache and
//! NUMA distance).

use std::fmt;

use serde::Serialize;

use crate::TopoError;

/// Index of a processing unit (hwloc "logical index": 0..n in topology order).
pub type PuId = usize;
/// Index of a core group (§4.1), ordered by the lowest PU they contain.
pub type GroupId = usize;
/// Logical index of a NUMA node.
pub type NodeId = usize;

/// The cache distance of two PUs (§4.2): the lowest cache level they share, or infinity when
/// they share no cache. `Level(l) < Infinite` for every `l`, so sorting by it scans nearest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum CacheDistance {
    /// They share a cache of this level (1 = L1).
    Level(u8),
    /// They share no cache at all.
    Infinite,
}

impl fmt::Display for CacheDistance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheDistance::Level(l) => write!(f, "{l}"),
            CacheDistance::Infinite => f.write_str("inf"),
        }
    }
}

/// One processing unit (a logical core in the papers' words).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pu {
    /// Logical index, equal to its position in [`Machine::pus`].
    pub index: PuId,
    /// Operating-system index, used for binding on the host.
    pub os_index: usize,
    /// Logical index of the physical core it belongs to.
    pub core: usize,
    /// Logical index of its package (socket), 0 when the topology names none. StreamMap's cache
    /// tree (`nearflow-map`) needs it: two packages of one UMA machine share no cache.
    pub package: usize,
    /// NUMA node it belongs to.
    pub node: NodeId,
}

/// One data or unified cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cache {
    /// 1 for L1, 2 for L2, …
    pub level: u8,
    /// Size in bytes, when known.
    pub size: Option<u64>,
    /// PUs under this cache, ascending.
    pub pus: Vec<PuId>,
}

/// A core group (§4.1): PUs that share at least one cache, never spanning a NUMA node. The
/// runtime creates one thread pool per group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CoreGroup {
    /// Its index in [`Machine::groups`].
    pub index: GroupId,
    /// The NUMA node that contains it.
    pub node: NodeId,
    /// Its PUs, ascending.
    pub pus: Vec<PuId>,
}

/// Where a [`Machine`] came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Source {
    /// Detected on this machine with hwloc.
    Host,
    /// Built from an hwloc synthetic description.
    Synthetic(String),
    /// Loaded from an hwloc XML file.
    Xml(String),
    /// One of the named machines of the papers.
    Preset(String),
}

impl Source {
    /// True when the topology describes the machine we run on, so threads may be bound.
    pub fn is_host(&self) -> bool {
        matches!(self, Source::Host)
    }
}

/// One line of the printable object tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TreeLine {
    /// Nesting depth (0 = machine).
    pub depth: usize,
    /// e.g. `L2 (256 KiB)` or `PU #3 (os 3)`.
    pub label: String,
}

/// The hardware model of one machine, with everything the scheduler derives from it.
///
/// Invariants (checked by [`Machine::new`]): PU indices are `0..pus.len()`; every PU's node is a
/// valid node; the core groups partition the PUs; no group spans two nodes; a group is a union of
/// PUs connected by shared caches within one node.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    source: Source,
    pus: Vec<Pu>,
    caches: Vec<Cache>,
    node_count: usize,
    /// Raw NUMA distance matrix (e.g. hwloc's latency values, 10 = local), if one was given.
    numa_raw: Option<Vec<Vec<u64>>>,
    /// Hops between nodes, derived from `numa_raw` (see [`hops_from_matrix`]).
    numa_hops: Vec<Vec<u32>>,
    groups: Vec<CoreGroup>,
    group_of: Vec<GroupId>,
    tree: Vec<TreeLine>,
    /// What was accepted with a caveat while building (see [`Machine::warnings`]).
    warnings: Vec<String>,
}

impl Machine {
    /// Builds a machine from its PUs, caches, node count and optional raw distance matrix, and
    /// derives hop distances and core groups.
    pub fn new(
        source: Source,
        pus: Vec<Pu>,
        mut caches: Vec<Cache>,
        node_count: usize,
        numa_raw: Option<Vec<Vec<u64>>>,
        tree: Vec<TreeLine>,
    ) -> Result<Self, TopoError> {
        if pus.is_empty() {
            return Err(TopoError::Invalid(
                "the topology has no processing unit".into(),
            ));
        }
        if node_count == 0 {
            return Err(TopoError::Invalid("the topology has no NUMA node".into()));
        }
        for (i, pu) in pus.iter().enumerate() {
            if pu.index != i {
                return Err(TopoError::Invalid(format!("PU {i} has index {}", pu.index)));
            }
            if pu.node >= node_count {
                return Err(TopoError::Invalid(format!(
                    "PU {i} is on node {} but there are {node_count} nodes",
                    pu.node
                )));
            }
        }
        for c in &mut caches {
            c.pus.sort_unstable();
            c.pus.dedup();
            if let Some(&p) = c.pus.iter().find(|&&p| p >= pus.len()) {
                return Err(TopoError::Invalid(format!(
                    "a cache names PU {p}, which does not exist"
                )));
            }
        }
        let mut warnings = Vec::new();
        let numa_hops = match &numa_raw {
            Some(m) => {
                let (hops, w) = hops_and_warnings(m, node_count)?;
                warnings.extend(w);
                hops
            }
            None => (0..node_count)
                .map(|a| (0..node_count).map(|b| u32::from(a != b)).collect())
                .collect(),
        };
        let (groups, group_of, w) = derive_core_groups(&pus, &caches, node_count);
        warnings.extend(w);
        Ok(Machine {
            source,
            pus,
            caches,
            node_count,
            numa_raw,
            numa_hops,
            groups,
            group_of,
            tree,
            warnings,
        })
    }

    /// What was accepted with a caveat while building this machine, one sentence each: a NUMA
    /// matrix whose remote distance equals the local one, or nodes made core groups because their
    /// cores share no cache. Empty for the papers' machines. The CLI prints them on stderr.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Where this topology came from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// A short human name of where this topology came from, with its PU count:
    /// `host (2 PUs)`, `icpp2013 (64 PUs)`, `synthetic "…" (8 PUs)`, `xml FILE (16 PUs)`.
    pub fn label(&self) -> String {
        let n = self.pu_count();
        match &self.source {
            Source::Host => format!("host ({n} PUs)"),
            Source::Preset(p) => format!("{p} ({n} PUs)"),
            Source::Synthetic(s) => format!("synthetic \"{s}\" ({n} PUs)"),
            Source::Xml(x) => format!("xml {x} ({n} PUs)"),
        }
    }
    /// All PUs, by logical index.
    pub fn pus(&self) -> &[Pu] {
        &self.pus
    }
    /// Number of PUs.
    pub fn pu_count(&self) -> usize {
        self.pus.len()
    }
    /// All data/unified caches (every level kept).
    pub fn caches(&self) -> &[Cache] {
        &self.caches
    }
    /// Number of NUMA nodes.
    pub fn node_count(&self) -> usize {
        self.node_count
    }
    /// The core groups of §4.1.
    pub fn groups(&self) -> &[CoreGroup] {
        &self.groups
    }
    /// The core group of a PU.
    pub fn group_of(&self, pu: PuId) -> GroupId {
        self.group_of[pu]
    }
    /// The NUMA node of a PU.
    pub fn node_of(&self, pu: PuId) -> NodeId {
        self.pus[pu].node
    }
    /// The printable object tree.
    pub fn tree(&self) -> &[TreeLine] {
        &self.tree
    }
    /// The raw NUMA distance matrix, when the source had one.
    pub fn numa_raw(&self) -> Option<&[Vec<u64>]> {
        self.numa_raw.as_deref()
    }

    /// Cache distance of two PUs (§4.2): the lowest level of cache they share.
    pub fn cache_distance(&self, a: PuId, b: PuId) -> CacheDistance {
        self.caches
            .iter()
            .filter(|c| c.pus.binary_search(&a).is_ok() && c.pus.binary_search(&b).is_ok())
            .map(|c| c.level)
            .min()
            .map_or(CacheDistance::Infinite, CacheDistance::Level)
    }

    /// NUMA distance of two PUs (§4.2): hops between their nodes, 0 on the same node.
    pub fn numa_distance(&self, a: PuId, b: PuId) -> u32 {
        self.node_distance(self.pus[a].node, self.pus[b].node)
    }

    /// Hops between two NUMA nodes.
    pub fn node_distance(&self, a: NodeId, b: NodeId) -> u32 {
        self.numa_hops[a][b]
    }

    /// NUMA distance between two core groups (the distance of their nodes).
    pub fn group_distance(&self, a: GroupId, b: GroupId) -> u32 {
        self.node_distance(self.groups[a].node, self.groups[b].node)
    }

    /// Size in bytes of the smallest cache of the given level above `pu`, if known.
    pub fn cache_size(&self, pu: PuId, level: u8) -> Option<u64> {
        self.caches
            .iter()
            .filter(|c| c.level == level && c.pus.binary_search(&pu).is_ok())
            .filter_map(|c| c.size)
            .min()
    }

    /// Full cache-distance matrix, for printing.
    pub fn cache_distance_matrix(&self) -> Vec<Vec<CacheDistance>> {
        let n = self.pus.len();
        (0..n)
            .map(|a| (0..n).map(|b| self.cache_distance(a, b)).collect())
            .collect()
    }

    /// Full PU-to-PU NUMA distance matrix, for printing.
    pub fn numa_distance_matrix(&self) -> Vec<Vec<u32>> {
        let n = self.pus.len();
        (0..n)
            .map(|a| (0..n).map(|b| self.numa_distance(a, b)).collect())
            .collect()
    }

    /// Node-to-node hop matrix.
    pub fn node_hops(&self) -> &[Vec<u32>] {
        &self.numa_hops
    }
}

/// Derives hop counts from a raw distance matrix such as hwloc's NUMA latency matrix.
///
/// The diagonal (local access) is 0 hops. Off-diagonal entries are scaled by the smallest remote
/// step: `hops = round((d(a,b) − d(a,a)) / (min remote d − local d))`, at least 1. So a SLIT-like
/// `10/20/30` gives 1 and 2 hops, `10/21/31` also 1 and 2, and the NUMA factors of Table 1 of
/// task-scheduling-in-data-stream-processing.txt (`1.0/1.4/1.5`, stored ×10) give 1 hop
/// everywhere, as on that fully connected 4-socket machine.
///
/// A remote distance *equal* to the local one is accepted (some firmware reports it, and hwloc
/// loads it): the other node is still another node, so it is 1 hop away, and the smallest step is
/// taken over the strictly larger entries only. A remote distance *smaller* than the local one
/// contradicts what "local" means and is refused. See [`hops_and_warnings`] for the warnings.
pub fn hops_from_matrix(m: &[Vec<u64>], nodes: usize) -> Result<Vec<Vec<u32>>, TopoError> {
    hops_and_warnings(m, nodes).map(|(h, _)| h)
}

/// [`hops_from_matrix`], with one warning per remote distance equal to its row's local distance.
pub fn hops_and_warnings(
    m: &[Vec<u64>],
    nodes: usize,
) -> Result<(Vec<Vec<u32>>, Vec<String>), TopoError> {
    if m.len() != nodes || m.iter().any(|r| r.len() != nodes) {
        return Err(TopoError::Invalid(format!(
            "the NUMA distance matrix must be {nodes}×{nodes}"
        )));
    }
    let mut step = u64::MAX;
    let mut warnings = Vec::new();
    for (a, row) in m.iter().enumerate() {
        for (b, &d) in row.iter().enumerate() {
            if a == b {
                continue;
            }
            match d.cmp(&row[a]) {
                std::cmp::Ordering::Less => {
                    return Err(TopoError::Invalid(format!(
                        "NUMA distance {a}→{b} ({d}) is smaller than local distance ({})",
                        row[a]
                    )))
                }
                std::cmp::Ordering::Equal => warnings.push(format!(
                    "NUMA distance {a}→{b} ({d}) equals the local distance of node {a}; \
                     counting node {b} as 1 hop from node {a}"
                )),
                std::cmp::Ordering::Greater => step = step.min(d - row[a]),
            }
        }
    }
    let hops = m
        .iter()
        .enumerate()
        .map(|(a, row)| {
            row.iter()
                .enumerate()
                .map(|(b, &d)| {
                    if a == b {
                        0
                    } else if d == row[a] {
                        1
                    } else {
                        let hops = ((d - row[a]) as f64 / step as f64).round() as u32;
                        hops.max(1)
                    }
                })
                .collect()
        })
        .collect();
    Ok((hops, warnings))
}

/// Core groups (§4.1): connected components of "shares a cache", cut at NUMA node boundaries.
///
/// One exception, after LAS §6.1.2 (the E7-4820 run with "4 thread pools, one for each NUMA
/// node"): on a node where no two physical cores share any cache (older Opterons, whose L2 is
/// private and which have no L3), the components would be single cores, so the per-group
/// deferred queue and rule 3 would degenerate into per-core queues. There the node itself is
/// the group, and a warning says so. Hyper-threads of one core still share its L1; that alone does
/// not make a group.
fn derive_core_groups(
    pus: &[Pu],
    caches: &[Cache],
    node_count: usize,
) -> (Vec<CoreGroup>, Vec<GroupId>, Vec<String>) {
    let mut parent: Vec<usize> = (0..pus.len()).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    fn union(parent: &mut [usize], a: usize, b: usize) {
        let (ra, rb) = (find(parent, a), find(parent, b));
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    }
    // Nodes in which some cache is shared by PUs of two different physical cores.
    let mut node_shares = vec![false; node_count];
    for c in caches {
        // A cache that spans nodes only links PUs of the same node: groups never span nodes.
        for (i, &a) in c.pus.iter().enumerate() {
            for &b in c.pus[i + 1..]
                .iter()
                .filter(|&&b| pus[b].node == pus[a].node)
            {
                if pus[b].core != pus[a].core {
                    node_shares[pus[a].node] = true;
                }
            }
            if let Some(&b) = c.pus[i + 1..].iter().find(|&&b| pus[b].node == pus[a].node) {
                union(&mut parent, a, b);
            }
        }
    }
    let mut warnings = Vec::new();
    for (node, _) in node_shares.iter().enumerate().filter(|(_, &s)| !s) {
        let members: Vec<usize> = pus
            .iter()
            .filter(|p| p.node == node)
            .map(|p| p.index)
            .collect();
        let cores: std::collections::BTreeSet<usize> = pus
            .iter()
            .filter(|p| p.node == node)
            .map(|p| p.core)
            .collect();
        if cores.len() < 2 {
            continue;
        }
        for w in members.windows(2) {
            union(&mut parent, w[0], w[1]);
        }
        warnings.push(format!(
            "the {} cores of NUMA node {node} share no cache; node {node} is one core group \
             (LAS §6.1.2: one thread pool per NUMA node)",
            cores.len()
        ));
    }
    let mut groups: Vec<CoreGroup> = Vec::new();
    let mut root_to_group = vec![usize::MAX; pus.len()];
    let mut group_of = vec![0; pus.len()];
    for pu in pus {
        let r = find(&mut parent, pu.index);
        if root_to_group[r] == usize::MAX {
            root_to_group[r] = groups.len();
            groups.push(CoreGroup {
                index: groups.len(),
                node: pu.node,
                pus: Vec::new(),
            });
        }
        let g = root_to_group[r];
        groups[g].pus.push(pu.index);
        group_of[pu.index] = g;
    }
    (groups, group_of, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pu(index: usize, node: usize) -> Pu {
        Pu {
            index,
            os_index: index,
            core: index,
            package: 0,
            node,
        }
    }

    #[test]
    fn groups_follow_caches_and_stop_at_nodes() {
        // 4 PUs, one L3 over all of them, but two nodes: two groups.
        let pus = vec![pu(0, 0), pu(1, 0), pu(2, 1), pu(3, 1)];
        let caches = vec![Cache {
            level: 3,
            size: None,
            pus: vec![0, 1, 2, 3],
        }];
        let m = Machine::new(Source::Synthetic("t".into()), pus, caches, 2, None, vec![]).unwrap();
        assert_eq!(m.groups().len(), 2);
        assert_eq!(m.groups()[1].pus, vec![2, 3]);
        assert_eq!(m.cache_distance(0, 3), CacheDistance::Level(3));
        assert_eq!(m.numa_distance(0, 3), 1);
    }

    #[test]
    fn cores_sharing_no_cache_make_their_node_the_group() {
        // Two nodes of two cores, each core with a private L2 shared by its two hyper-threads:
        // no cache links two cores, so each node is one group (LAS §6.1.2).
        let mut pus = Vec::new();
        for i in 0..8 {
            pus.push(Pu {
                index: i,
                os_index: i,
                core: i / 2,
                package: 0,
                node: i / 4,
            });
        }
        let caches = (0..4)
            .map(|c| Cache {
                level: 2,
                size: Some(1 << 20),
                pus: vec![2 * c, 2 * c + 1],
            })
            .collect();
        let m = Machine::new(Source::Synthetic("t".into()), pus, caches, 2, None, vec![]).unwrap();
        assert_eq!(m.groups().len(), 2);
        assert_eq!(m.groups()[0].pus, vec![0, 1, 2, 3]);
        assert_eq!(m.groups()[1].pus, vec![4, 5, 6, 7]);
        assert_eq!(m.cache_distance(0, 2), CacheDistance::Infinite);
        assert_eq!(m.warnings().len(), 2, "{:?}", m.warnings());
        // A single core per node stays a group of its own, without a warning.
        let m = Machine::new(
            Source::Synthetic("t".into()),
            vec![pu(0, 0), pu(1, 1)],
            vec![],
            2,
            None,
            vec![],
        )
        .unwrap();
        assert_eq!(m.groups().len(), 2);
        assert!(m.warnings().is_empty());
    }

    #[test]
    fn equal_remote_distance_loads_with_a_warning() {
        let m = vec![vec![17, 17, 28], vec![17, 17, 28], vec![28, 28, 17]];
        let (h, w) = hops_and_warnings(&m, 3).unwrap();
        assert_eq!(h, vec![vec![0, 1, 1], vec![1, 0, 1], vec![1, 1, 0]]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("1 hop"), "{w:?}");
        // All equal: every remote node is 1 hop.
        let (h, w) = hops_and_warnings(&[vec![10, 10], vec![10, 10]], 2).unwrap();
        assert_eq!(h, vec![vec![0, 1], vec![1, 0]]);
        assert_eq!(w.len(), 2);
        // Smaller than local is refused.
        let e = hops_from_matrix(&[vec![10, 5], vec![5, 10]], 2).unwrap_err();
        assert!(e.to_string().contains("smaller than local"), "{e}");
    }

    #[test]
    fn hops_scale_by_smallest_remote_step() {
        let m = vec![vec![10, 20, 30], vec![20, 10, 20], vec![30, 20, 10]];
        let h = hops_from_matrix(&m, 3).unwrap();
        assert_eq!(h, vec![vec![0, 1, 2], vec![1, 0, 1], vec![2, 1, 0]]);
        assert!(hops_from_matrix(&[vec![10, 5], vec![5, 10]], 2).is_err());
        assert!(hops_from_matrix(&[vec![10, 20]], 2).is_err());
    }
}
