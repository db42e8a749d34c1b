//! A mapping's predicted cost, for choosing between mappings without running them — what
//! online re-mapping needs (StreamMap §IV.B.5 leaves "continuously monitor and adjust thread
//! mappings at runtime" to future work; we do it, see `nearflow map --online`).
//!
//! Two terms, both in bytes:
//!
//! - **sharing**: for each pair of threads, the bytes they share (the correlation matrix,
//!   both directions) times how far apart their PUs are: 0 on one PU, and otherwise the
//!   fraction of the tree's depth between the PUs and their lowest common vertex (1 when they
//!   share only the machine);
//! - **overflow**: for each vertex with a cache two threads can share (a shared cache, or a
//!   PU's own when it holds several threads), the bytes by which the working sets of the
//!   threads under it exceed it (only for [`ContentionUnit::WorkingSetBytes`]; other
//!   units are not bytes and add nothing).

use crate::profile::{ContentionUnit, Profile};
use crate::tree::CacheTree;

/// The predicted cost of putting thread `i` on PU `pus[i]`; lower is better.
pub fn cost(tree: &CacheTree, profile: &Profile, pus: &[usize]) -> f64 {
    let depth = leaf_depth(tree).max(1) as f64;
    let n = pus.len().min(profile.threads.len());
    let mut sharing = 0.0;
    for a in 0..n {
        for b in a + 1..n {
            let w = (profile.correlation[a][b] + profile.correlation[b][a]) as f64;
            if w == 0.0 || pus[a] == pus[b] {
                continue;
            }
            let common = tree.common_depth(pus[a], pus[b]) as f64;
            sharing += w * (depth - common) / depth;
        }
    }
    let mut overflow = 0.0;
    if profile.contention_unit == ContentionUnit::WorkingSetBytes {
        for (i, v) in tree.vertices.iter().enumerate() {
            // Only caches that threads can share: a private cache (one place) overflows the
            // same under every mapping.
            let Some(cache) = v.cache_bytes.filter(|_| tree.capacity_of(i) >= 2) else {
                continue;
            };
            let load: f64 = (0..n)
                .filter(|&t| v.pus.binary_search(&pus[t]).is_ok())
                .map(|t| profile.contention[t])
                .sum();
            overflow += (load - cache as f64).max(0.0);
        }
    }
    sharing + overflow
}

/// Online re-mapping's decision: the mapper's mapping for `profile` (what happened lately), if
/// [`cost`] predicts it cheaper than `current` by more than `margin` (a fraction); with the
/// two costs.
pub fn better(
    mapper: crate::Mapper,
    tree: &CacheTree,
    profile: &Profile,
    current: &[usize],
    margin: f64,
) -> Result<Option<(Vec<usize>, f64, f64)>, crate::MapError> {
    let cand = crate::map(mapper, tree, profile)?;
    let (before, after) = (cost(tree, profile, current), cost(tree, profile, &cand));
    Ok((after < (1.0 - margin) * before).then_some((cand, before, after)))
}

fn leaf_depth(tree: &CacheTree) -> usize {
    let mut v = 0;
    let mut d = 0;
    while let Some(&c) = tree.vertices[v].children.first() {
        v = c;
        d += 1;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use nearflow_topo::presets;

    /// VWAP on e5320-uma: with small windows the source and its workers are packed; when the
    /// windows grow past the L2s, the decision moves the workers apart, and does not move
    /// back and forth while the behaviour stays.
    #[test]
    fn the_online_decision_follows_a_change_of_behaviour() {
        let t = CacheTree::new(&presets::build("e5320-uma").unwrap());
        let mut comm = vec![vec![0u64; 4]; 4];
        for c in &mut comm[0][1..] {
            *c = 1 << 20;
        }
        let mut p = Profile::from_communication("vwap", comm);
        p.contention = vec![64.0 * 1024.0; 4];
        let small = crate::map(crate::Mapper::Holistic, &t, &p).unwrap();
        assert!(better(crate::Mapper::Holistic, &t, &p, &small, 0.1)
            .unwrap()
            .is_none());
        p.contention = vec![64.0 * 1024.0, 3e6, 3e6, 3e6];
        let (large, before, after) = better(crate::Mapper::Holistic, &t, &p, &small, 0.1)
            .unwrap()
            .expect("a move");
        assert!(after < before);
        for a in 1..4 {
            for b in a + 1..4 {
                assert!(t.common_depth(large[a], large[b]) < 2, "{large:?}");
            }
        }
        assert!(better(crate::Mapper::Holistic, &t, &p, &large, 0.1)
            .unwrap()
            .is_none());
    }

    #[test]
    fn closer_talkers_and_spread_heavy_threads_cost_less() {
        let t = CacheTree::new(&presets::build("x5355").unwrap());
        let mut p = Profile::from_communication("pc", vec![vec![0, 1000], vec![0, 0]]);
        // Same L2 (half the depth apart) beats different L2s; one PU costs nothing.
        assert_eq!(cost(&t, &p, &[0, 1]), 500.0);
        assert_eq!(cost(&t, &p, &[0, 2]), 1000.0);
        assert_eq!(cost(&t, &p, &[0, 0]), 0.0);
        // Working sets of 3 MiB each overflow a 4 MiB L2 together by 2 MiB.
        p.correlation = vec![vec![0, 0], vec![0, 0]];
        p.contention = vec![3.0 * 1048576.0; 2];
        assert_eq!(cost(&t, &p, &[0, 1]), 2.0 * 1048576.0);
        assert_eq!(cost(&t, &p, &[0, 2]), 0.0);
        // Every mapper's answer is no worse than the worst of Exhaustive's.
        let all = crate::exhaustive::mappings(&t, 2, 100).unwrap();
        let worst = all.iter().map(|m| cost(&t, &p, m)).fold(0.0, f64::max);
        let h = crate::map(crate::Mapper::Holistic, &t, &p).unwrap();
        assert!(cost(&t, &p, &h) <= worst);
        assert_eq!(cost(&t, &p, &h), 0.0);
    }
}
