//! # nearflow-map — StreamMap: mapping operator threads to cores
//!
//! Where the scheduler (`nearflow-policy`) decides task by task, StreamMap
//! (`../shared/papers/streammap-cache-topology-mapping.txt`, §IV) decides once which PU each
//! long-lived thread of a dataflow runs on, from a [`Profile`] of the application (bytes sent
//! between threads, data they share, their demand on shared caches) and the machine's
//! [`CacheTree`]. Everything here is a pure function of profile × tree; measuring profiles and
//! running mapped plans is the engine's part (`nearflow-flow`, the `pinned` policy, and
//! `nearflow map`).
//!
//! | mapper | paper | input |
//! |---|---|---|
//! | [`Mapper::TreeMatch`] | §IV.B.2 (Jeannot & Mercier) | communication matrix |
//! | [`Mapper::TreeMatchS`] | §IV.B.3, Fig. 8 | correlation matrix |
//! | [`Mapper::Holistic`] | §IV.B.4 | correlation matrix + contention weights (METIS) |
//! | [`Mapper::Exhaustive`] | §IV.B.1 | every mapping up to symmetry ([`exhaustive::mappings`]), measured by the caller |
//!
//! ```
//! use nearflow_map::{CacheTree, Mapper, Profile};
//! let x5355 = nearflow_topo::presets::build("x5355").unwrap(); // two L2s of two cores
//! let tree = CacheTree::new(&x5355);
//! // A producer sending 1 GB to its consumer.
//! let p = Profile::from_communication("pc", vec![vec![0, 1 << 30], vec![0, 0]]);
//! let m = nearflow_map::map(Mapper::TreeMatch, &tree, &p).unwrap();
//! assert_eq!(tree.common_depth(m[0], m[1]), 1); // under one L2
//! ```
//!
//! ## Files
//!
//! - `lib.rs` — [`Mapper`], [`map`], [`MapError`], [`describe`].
//! - `tree.rs` — [`CacheTree`].
//! - `profile.rs` — [`Profile`], [`ContentionUnit`].
//! - `treematch.rs` — TreeMatch and TreeMatch-S.
//! - `holistic.rs` — Holistic mapping with METIS.
//! - `exhaustive.rs` — enumeration up to the tree's symmetries.
//! - `cost.rs` — [`cost`], a mapping's predicted cost (for online re-mapping).

mod cost;
pub mod exhaustive;
mod holistic;
mod profile;
mod tree;
mod treematch;

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

pub use cost::{better, cost};
pub use profile::{ContentionUnit, Profile};
pub use tree::{CacheTree, Vertex};
pub use treematch::EXHAUSTIVE_LIMIT;

/// The mapping algorithms of §IV.B.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapper {
    TreeMatch,
    TreeMatchS,
    Holistic,
    Exhaustive,
}

impl Mapper {
    /// All four, in the paper's order of presentation.
    pub const ALL: [Mapper; 4] = [
        Mapper::Exhaustive,
        Mapper::TreeMatch,
        Mapper::TreeMatchS,
        Mapper::Holistic,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Mapper::TreeMatch => "treematch",
            Mapper::TreeMatchS => "treematch-s",
            Mapper::Holistic => "holistic",
            Mapper::Exhaustive => "exhaustive",
        }
    }
}

impl fmt::Display for Mapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mapper {
    type Err = MapError;
    fn from_str(s: &str) -> Result<Self, MapError> {
        Mapper::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| MapError::UnknownMapper(s.to_string()))
    }
}

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("unknown mapper `{0}`; known: treematch, treematch-s, holistic, exhaustive, all")]
    UnknownMapper(String),
    #[error("bad profile: {0}")]
    BadProfile(String),
    #[error("{threads} threads do not fit {places} places")]
    TooManyThreads { threads: usize, places: usize },
    #[error("TreeMatch needs a symmetric cache tree (same arity across each level); use holistic or exhaustive on this machine")]
    Asymmetric,
    #[error("more than {limit} mappings up to symmetry; exhaustive search is not affordable here (use another mapper)")]
    TooManyMappings { limit: usize },
    #[error("the exhaustive mapper measures every mapping: use nearflow_map::exhaustive::mappings and measure each")]
    NeedsMeasurements,
    #[error("METIS failed: {0}")]
    Partitioner(String),
}

/// Maps the profile's threads onto `tree` with a profile-driven mapper: `result[i]` is thread
/// `i`'s PU. When there are more threads than PUs, pass `tree.with_slots(…)`.
pub fn map(mapper: Mapper, tree: &CacheTree, profile: &Profile) -> Result<Vec<usize>, MapError> {
    profile.validate()?;
    match mapper {
        Mapper::TreeMatch => {
            treematch::treematch(tree, &profile::symmetric(&profile.communication))
        }
        Mapper::TreeMatchS => treematch::treematch(tree, &profile::symmetric(&profile.correlation)),
        Mapper::Holistic => holistic::holistic(tree, profile),
        Mapper::Exhaustive => Err(MapError::NeedsMeasurements),
    }
}

/// A mapping as text: `t0→3 t1→5`, or with names `source→3 worker1→5`.
pub fn describe(names: &[String], pus: &[usize]) -> String {
    names
        .iter()
        .zip(pus)
        .map(|(n, p)| format!("{n}→{p}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nearflow_topo::presets;

    fn tree(name: &str) -> CacheTree {
        CacheTree::new(&presets::build(name).unwrap())
    }

    fn heavy_pair(contention: f64) -> Profile {
        let mut p = Profile::from_communication("two", vec![vec![0, 0], vec![0, 0]]);
        p.contention = vec![contention; 2];
        p
    }

    /// A producer/consumer pair lands under one L2 on x5355, by every profile-driven mapper.
    #[test]
    fn a_producer_and_its_consumer_share_an_l2() {
        let t = tree("x5355");
        let mut p = Profile::from_communication("pc", vec![vec![0, 1 << 30], vec![0, 0]]);
        p.contention = vec![64.0 * 1024.0; 2];
        for m in [Mapper::TreeMatch, Mapper::TreeMatchS, Mapper::Holistic] {
            let pus = map(m, &t, &p).unwrap();
            assert_ne!(pus[0], pus[1], "{m}");
            assert_eq!(t.common_depth(pus[0], pus[1]), 1, "{m}: {pus:?}");
        }
    }

    /// Two independent threads whose working sets overflow a shared L2 land on different
    /// L2s under Holistic (TreeMatch, blind to contention, may pack them).
    #[test]
    fn two_heavy_independent_threads_get_their_own_l2() {
        let p = heavy_pair(3.0 * 1024.0 * 1024.0); // 3 MiB each, 4 MiB L2s
        for name in ["x5355", "e5320-uma"] {
            let t = tree(name);
            let pus = map(Mapper::Holistic, &t, &p).unwrap();
            assert!(
                t.common_depth(pus[0], pus[1]) < t.common_depth(0, 1),
                "{name}: {pus:?}"
            );
        }
        // Small working sets: nothing to balance, no sharing either; any mapping is fine, but
        // it must be a mapping (distinct PUs).
        let pus = map(Mapper::Holistic, &tree("x5355"), &heavy_pair(1024.0)).unwrap();
        assert_ne!(pus[0], pus[1]);
    }

    /// VWAP's shape (a source feeding workers that share nothing): the source's pairs stay
    /// close under TreeMatch; with large windows Holistic spreads the workers.
    #[test]
    fn vwap_shapes() {
        let t = tree("e5320-uma");
        let mut comm = vec![vec![0u64; 4]; 4];
        for c in &mut comm[0][1..] {
            *c = 1 << 28;
        }
        let mut p = Profile::from_communication("vwap", comm);
        let pus = map(Mapper::TreeMatch, &t, &p).unwrap();
        // Four threads packed into one package (its two L2s).
        assert!(
            pus.iter().all(|&x| t.common_depth(x, pus[0]) >= 1),
            "{pus:?}"
        );
        // Large windows: 3 MiB per worker over 4 MiB L2s — no two workers on one L2.
        p.contention = vec![64.0 * 1024.0, 3e6, 3e6, 3e6];
        let pus = map(Mapper::Holistic, &t, &p).unwrap();
        for a in 1..4 {
            for b in a + 1..4 {
                assert!(t.common_depth(pus[a], pus[b]) < 2, "{pus:?}");
            }
        }
    }

    /// Every mapper gives distinct PUs (one per thread) on every preset, for every thread
    /// count up to the PUs, and an exhaustive enumeration contains TreeMatch's answer's class.
    #[test]
    fn every_mapper_on_every_preset_gives_a_mapping() {
        for preset in presets::PRESETS {
            let m = presets::build(preset.name).unwrap();
            let t = CacheTree::new(&m);
            for n in [1, 2, 3, m.pu_count().min(8)] {
                let comm: Vec<Vec<u64>> = (0..n)
                    .map(|i| {
                        (0..n)
                            .map(|j| ((i * 7 + j * 3) % 5) as u64 * 1000)
                            .collect()
                    })
                    .collect();
                let mut p = Profile::from_communication("x", comm);
                p.contention = (0..n).map(|i| (i * 100_000) as f64).collect();
                for mapper in [Mapper::TreeMatch, Mapper::TreeMatchS, Mapper::Holistic] {
                    let pus = map(mapper, &t, &p).unwrap();
                    let mut s = pus.clone();
                    s.sort_unstable();
                    s.dedup();
                    assert_eq!(s.len(), n, "{mapper} on {}: {pus:?}", preset.name);
                    assert!(pus.iter().all(|&x| x < m.pu_count()));
                }
            }
        }
    }

    /// More threads than PUs: places are slots, and PUs hold at most `slots` threads.
    #[test]
    fn oversubscribed_mappings_fill_slots() {
        let m = nearflow_topo::from_synthetic("pack:1 core:2 pu:1").unwrap();
        let t = CacheTree::new(&m).with_slots(2);
        let comm = vec![
            vec![0, 9, 0, 0],
            vec![0, 0, 0, 0],
            vec![0, 0, 0, 9],
            vec![0; 4],
        ];
        let p = Profile::from_communication("x", comm);
        for mapper in [Mapper::TreeMatch, Mapper::Holistic] {
            let pus = map(mapper, &t, &p).unwrap();
            assert_eq!(pus[0], pus[1], "{mapper}: {pus:?}");
            assert_eq!(pus[2], pus[3], "{mapper}: {pus:?}");
            assert_ne!(pus[0], pus[2], "{mapper}: {pus:?}");
        }
        assert!(matches!(
            map(Mapper::TreeMatch, &CacheTree::new(&m), &p),
            Err(MapError::TooManyThreads {
                threads: 4,
                places: 2
            })
        ));
    }

    /// Exhaustive counts: 2 threads on x5355 have two classes (same L2, different L2s); 4 on
    /// x5355 one; the enumeration has no two mappings equal up to a swap of sibling subtrees.
    #[test]
    fn exhaustive_enumerates_up_to_symmetry() {
        let t = tree("x5355");
        assert_eq!(exhaustive::mappings(&t, 2, 1000).unwrap().len(), 2);
        assert_eq!(exhaustive::mappings(&t, 4, 1000).unwrap().len(), 3);
        assert_eq!(exhaustive::mappings(&t, 1, 1000).unwrap().len(), 1);
        let t = tree("e5320-uma");
        let all = exhaustive::mappings(&t, 3, 10_000).unwrap();
        // Classes of 3 threads on 2x2x2: {all in one package: one L2 pair + one, ...}.
        // Distinctness of the classes: the multiset of pairwise common depths together with
        // which thread is where must differ between any two.
        let key = |pus: &Vec<usize>| -> Vec<usize> {
            let mut k = Vec::new();
            for a in 0..pus.len() {
                for b in a + 1..pus.len() {
                    k.push(t.common_depth(pus[a], pus[b]));
                }
            }
            k
        };
        let mut keys: Vec<Vec<usize>> = all.iter().map(key).collect();
        keys.sort();
        let before = keys.len();
        keys.dedup();
        assert_eq!(before, keys.len(), "{all:?}");
        assert!(matches!(
            exhaustive::mappings(&tree("e7-4820"), 12, 1000),
            Err(MapError::TooManyMappings { .. })
        ));
    }

    #[test]
    fn names_and_errors() {
        for m in Mapper::ALL {
            assert_eq!(m.name().parse::<Mapper>().unwrap(), m);
        }
        assert!("tree".parse::<Mapper>().is_err());
        let p = Profile::from_communication("x", vec![vec![0]]);
        assert!(matches!(
            map(Mapper::Exhaustive, &tree("x5355"), &p),
            Err(MapError::NeedsMeasurements)
        ));
        let asym = nearflow_topo::from_synthetic("pack:2 core:1 pu:1").unwrap();
        let asym = CacheTree::new(&asym).with_slots(1);
        assert!(map(Mapper::TreeMatch, &asym, &p).is_ok());
    }
}
