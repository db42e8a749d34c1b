//! The cache tree StreamMap maps onto (`streammap-cache-topology-mapping.txt` §II.B, Fig. 2):
//! the machine at the root, then NUMA nodes, packages, shared caches and cores, PUs as leaves.
//! A level that does not branch (a core with one PU, an L1 per core) is folded into the level
//! below, so every inner vertex has at least two children — TreeMatch's "arity per level".
//!
//! When more threads than PUs are mapped, each PU is given `slots` places (threads on one PU
//! time-share it); [`CacheTree::with_slots`] adds that level.

use nearflow_topo::{Machine, PuId};
use serde::Serialize;

/// One vertex: a set of PUs that share something (a node, a package, a cache).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Vertex {
    /// What it is, e.g. `L2`, `node 1`, `package 0 + L3`, `PU 3`.
    pub label: String,
    /// The PUs under it, ascending.
    pub pus: Vec<PuId>,
    /// Children (indices into [`CacheTree::vertices`]), ordered by lowest PU.
    pub children: Vec<usize>,
    /// The size of a cache shared by exactly these PUs, when there is one (the shared cache
    /// whose capacity Holistic balances contention against).
    pub cache_bytes: Option<u64>,
}

/// A set of PUs that may become a vertex: (size, kind rank, label, PUs, cache size).
type Candidate = (usize, u8, String, Vec<PuId>, Option<u64>);

/// A machine's cache tree.
#[derive(Clone, Debug, Serialize)]
pub struct CacheTree {
    /// Vertices; 0 is the root.
    pub vertices: Vec<Vertex>,
    /// Places per PU (1 unless [`CacheTree::with_slots`] added more).
    pub slots: usize,
    pus: usize,
}

impl CacheTree {
    /// Builds the tree of `machine` from its nodes, packages, caches and cores.
    pub fn new(machine: &Machine) -> CacheTree {
        let n = machine.pu_count();
        // Candidate sets, bigger first; on a tie the broader kind first (node, package, cache
        // by descending level, core) so that `node 0 + L3` reads naturally.
        let mut sets: Vec<Candidate> = Vec::new();
        let by = |key: &dyn Fn(usize) -> usize| {
            let mut m: std::collections::BTreeMap<usize, Vec<PuId>> = Default::default();
            for p in machine.pus() {
                m.entry(key(p.index)).or_default().push(p.index);
            }
            m
        };
        if machine.node_count() > 1 {
            for (k, pus) in by(&|p| machine.pus()[p].node) {
                sets.push((pus.len(), 0, format!("node {k}"), pus, None));
            }
        }
        for (k, pus) in by(&|p| machine.pus()[p].package) {
            sets.push((pus.len(), 1, format!("package {k}"), pus, None));
        }
        for c in machine.caches() {
            sets.push((
                c.pus.len(),
                10 - c.level.min(9),
                format!("L{}", c.level),
                c.pus.clone(),
                c.size,
            ));
        }
        for (k, pus) in by(&|p| machine.pus()[p].core) {
            sets.push((pus.len(), 20, format!("core {k}"), pus, None));
        }
        sets.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.3.cmp(&b.3)));

        let mut t = CacheTree {
            vertices: vec![Vertex {
                label: "machine".into(),
                pus: (0..n).collect(),
                children: Vec::new(),
                cache_bytes: None,
            }],
            slots: 1,
            pus: n,
        };
        for (_, _, label, pus, size) in sets {
            t.insert(label, pus, size);
        }
        for p in 0..n {
            t.insert(format!("PU {p}"), vec![p], None);
        }
        t.fold();
        t
    }

    /// Adds `pus` under the deepest vertex that contains it; merges it into an equal vertex; a
    /// set that cuts across a vertex (not laminar) is left out.
    fn insert(&mut self, label: String, pus: Vec<PuId>, size: Option<u64>) {
        let mut v = 0;
        loop {
            if self.vertices[v].pus == pus {
                let x = &mut self.vertices[v];
                if v != 0 && !x.label.contains(&label) {
                    x.label = format!("{} + {label}", x.label);
                }
                x.cache_bytes = x.cache_bytes.max(size);
                return;
            }
            let mut next = None;
            for &c in &self.vertices[v].children {
                let cp = &self.vertices[c].pus;
                let inside = pus.iter().all(|p| cp.binary_search(p).is_ok());
                let overlaps = pus.iter().any(|p| cp.binary_search(p).is_ok());
                if inside {
                    next = Some(c);
                } else if overlaps {
                    return;
                }
            }
            match next {
                Some(c) => v = c,
                None => break,
            }
        }
        // Children of `v` inside the new set move under it.
        let idx = self.vertices.len();
        let (moved, kept): (Vec<usize>, Vec<usize>) =
            self.vertices[v].children.iter().partition(|&&c| {
                self.vertices[c]
                    .pus
                    .iter()
                    .all(|p| pus.binary_search(p).is_ok())
            });
        self.vertices.push(Vertex {
            label,
            pus,
            children: moved,
            cache_bytes: size,
        });
        let mut kids = kept;
        kids.push(idx);
        kids.sort_by_key(|&c| self.vertices[c].pus[0]);
        self.vertices[v].children = kids;
    }

    /// Folds every vertex with one child into that child, and renumbers depth-first.
    fn fold(&mut self) {
        let old = std::mem::take(&mut self.vertices);
        let mut out = Vec::new();
        fn visit(old: &[Vertex], v: usize, out: &mut Vec<Vertex>) -> usize {
            let mut x = old[v].clone();
            while x.children.len() == 1 {
                let c = &old[x.children[0]];
                let cache = x.cache_bytes.max(c.cache_bytes);
                // The PU (or the lower level) keeps its name; a shared cache's size stays.
                let label = if c.children.is_empty() {
                    c.label.clone()
                } else {
                    format!("{} + {}", x.label, c.label)
                };
                x = Vertex {
                    label,
                    pus: x.pus,
                    children: c.children.clone(),
                    cache_bytes: cache,
                };
            }
            let me = out.len();
            out.push(Vertex {
                children: Vec::new(),
                ..x.clone()
            });
            let kids: Vec<usize> = x.children.iter().map(|&c| visit(old, c, out)).collect();
            out[me].children = kids;
            me
        }
        visit(&old, 0, &mut out);
        self.vertices = out;
    }

    /// The same tree with `slots` places per PU (for more threads than PUs).
    pub fn with_slots(mut self, slots: usize) -> CacheTree {
        self.slots = slots.max(1);
        self
    }

    /// Number of PUs.
    pub fn pu_count(&self) -> usize {
        self.pus
    }

    /// Places for threads: PUs × slots.
    pub fn capacity(&self) -> usize {
        self.pus * self.slots
    }

    /// Places under vertex `v`.
    pub fn capacity_of(&self, v: usize) -> usize {
        self.vertices[v].pus.len() * self.slots
    }

    /// The arity of each level from the root down (with the slots level last when
    /// `slots > 1`), or `None` when the tree is not symmetric (leaves at different depths, or
    /// vertices of one level with different arities). TreeMatch needs a symmetric tree.
    pub fn arities(&self) -> Option<Vec<usize>> {
        let mut level = vec![0];
        let mut out = Vec::new();
        loop {
            let a = self.vertices[level[0]].children.len();
            if level.iter().any(|&v| self.vertices[v].children.len() != a) {
                return None;
            }
            if a == 0 {
                break;
            }
            out.push(a);
            level = level
                .iter()
                .flat_map(|&v| self.vertices[v].children.iter().copied())
                .collect();
        }
        if self.slots > 1 {
            out.push(self.slots);
        }
        Some(out)
    }

    /// The leaves (PUs) in depth-first order, which is the order TreeMatch assigns groups in.
    pub fn leaves(&self) -> Vec<PuId> {
        let mut out = Vec::new();
        let mut stack = vec![0];
        while let Some(v) = stack.pop() {
            let x = &self.vertices[v];
            if x.children.is_empty() {
                out.push(x.pus[0]);
            }
            stack.extend(x.children.iter().rev());
        }
        out
    }

    /// A string equal for two vertices exactly when their subtrees are the same shape (so
    /// swapping them is a symmetry of the machine, as far as mapping goes).
    pub fn shape(&self, v: usize) -> String {
        let x = &self.vertices[v];
        if x.children.is_empty() {
            return "p".into();
        }
        let kids: Vec<String> = x.children.iter().map(|&c| self.shape(c)).collect();
        format!("({}:{})", x.cache_bytes.unwrap_or(0), kids.join(","))
    }

    /// The tree as indented text, for `nearflow map --tree`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        fn go(t: &CacheTree, v: usize, d: usize, s: &mut String) {
            let x = &t.vertices[v];
            let size = x
                .cache_bytes
                .map(|b| format!(" ({} KiB)", b / 1024))
                .unwrap_or_default();
            s.push_str(&format!("{}{}{size}\n", "  ".repeat(d), x.label));
            for &c in &x.children {
                go(t, c, d + 1, s);
            }
        }
        go(self, 0, 0, &mut s);
        s
    }

    /// The lowest common vertex of two PUs' depth (0 = only the root in common): a larger
    /// value means closer. Used by cost models and tests.
    pub fn common_depth(&self, a: PuId, b: PuId) -> usize {
        let mut v = 0;
        let mut d = 0;
        loop {
            let next = self.vertices[v].children.iter().copied().find(|&c| {
                let p = &self.vertices[c].pus;
                p.binary_search(&a).is_ok() && p.binary_search(&b).is_ok()
            });
            match next {
                Some(c) => {
                    v = c;
                    d += 1;
                }
                None => return d,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nearflow_topo::presets;

    #[test]
    fn the_papers_machines_have_the_trees_of_fig_2() {
        // x5355: two L2s of two cores.
        let t = CacheTree::new(&presets::build("x5355").unwrap());
        assert_eq!(t.arities(), Some(vec![2, 2]));
        assert_eq!(
            t.vertices[t.vertices[0].children[0]].cache_bytes,
            Some(4 << 20)
        );
        // e5320-uma: two packages, two L2s each, two cores each.
        let t = CacheTree::new(&presets::build("e5320-uma").unwrap());
        assert_eq!(t.arities(), Some(vec![2, 2, 2]));
        assert!(t.vertices[t.vertices[0].children[0]]
            .label
            .contains("package"));
        // nehalem-2x4: two nodes with an L3, four cores each (private L2 folded into the PU).
        let t = CacheTree::new(&presets::build("nehalem-2x4").unwrap());
        assert_eq!(t.arities(), Some(vec![2, 4]));
        assert_eq!(t.leaves(), (0..8).collect::<Vec<_>>());
        assert_eq!(t.common_depth(0, 1), 1);
        assert_eq!(t.common_depth(0, 5), 0);
        // e7-4820: 4 nodes x 8 cores x 2 hyper-threads.
        let t = CacheTree::new(&presets::build("e7-4820").unwrap());
        assert_eq!(t.arities(), Some(vec![4, 8, 2]));
        assert_eq!(t.with_slots(3).arities(), Some(vec![4, 8, 2, 3]));
    }

    #[test]
    fn an_asymmetric_machine_has_no_arities() {
        let m = nearflow_topo::from_synthetic("pack:1 l2:2(size=1MiB) core:2 pu:1").unwrap();
        assert_eq!(CacheTree::new(&m).arities(), Some(vec![2, 2]));
        let m = nearflow_topo::from_synthetic("pack:2 core:1 pu:1").unwrap();
        let t = CacheTree::new(&m);
        assert_eq!(t.arities(), Some(vec![2]));
        assert_eq!(t.shape(t.vertices[0].children[0]), "p");
    }
}
