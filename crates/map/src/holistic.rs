//! Holistic mapping (`streammap-cache-topology-mapping.txt` §IV.B.4): graph partitioning down
//! the cache tree with two goals at once — keep data sharing (the correlation matrix, as edge
//! weights) inside groups, and balance the threads' contention weights (as vertex weights)
//! among groups. The paper partitions with SCOTCH; we call METIS (`metis` crate, built from its
//! vendored sources), k-way, once per inner vertex of the tree, top down.
//!
//! At a vertex with `k` children, the threads it holds are split into `k` parts with two
//! constraints per thread:
//!
//! 1. **places**: weight 1, each part at most its child's places (a hard limit; METIS's
//!    tolerance is set to allow exactly that, and a part METIS overfills is repaired by moving
//!    the thread that loses least);
//! 2. **contention**: the thread's weight, balanced to METIS's usual 10 % — except for working
//!    sets in bytes, where a part only has to stay within its child's shared cache (or, for a
//!    child without one, the caches below it together) when the whole load fits in the
//!    children's caches: sharing then wins, as the paper's small-window
//!    VWAP shows, and contention is balanced only where caches overflow (its large window).
//!
//! Small splits (at most 2^20 assignments, so up to 20 threads over 2 children, 10 over 4) are
//! solved exactly on the same constraints instead (least overflow, then least cut): METIS
//! assumes every part non-empty and complains on graphs with fewer vertices than parts, while
//! leaving a child empty (packing the talkers) is often the right answer here. The test
//! `metis_and_exact_agree` checks the two agree on cases both can do.

use metis::{Graph, Idx, Real};

use crate::profile::{symmetric, ContentionUnit, Profile};
use crate::tree::CacheTree;
use crate::MapError;

/// Maps the profile's threads onto `tree`: thread `i` → PU.
pub(crate) fn holistic(tree: &CacheTree, p: &Profile) -> Result<Vec<usize>, MapError> {
    let n = p.threads.len();
    if n > tree.capacity() {
        return Err(MapError::TooManyThreads {
            threads: n,
            places: tree.capacity(),
        });
    }
    let w = symmetric(&p.correlation);
    let mut pu = vec![usize::MAX; n];
    split(tree, p, &w, 0, (0..n).collect(), &mut pu)?;
    Ok(pu)
}

fn split(
    tree: &CacheTree,
    p: &Profile,
    w: &[Vec<f64>],
    v: usize,
    threads: Vec<usize>,
    pu: &mut [usize],
) -> Result<(), MapError> {
    let x = &tree.vertices[v];
    if x.children.is_empty() {
        for t in threads {
            pu[t] = x.pus[0];
        }
        return Ok(());
    }
    let kids = &x.children;
    let k = kids.len();
    let caps: Vec<usize> = kids.iter().map(|&c| tree.capacity_of(c)).collect();
    // METIS wants no more parts than vertices: with fewer threads than children, the
    // partition is over the largest children only (all of one size on a symmetric tree).
    let mut used: Vec<usize> = (0..k).collect();
    used.sort_by_key(|&i| std::cmp::Reverse(caps[i]));
    used.truncate(threads.len().max(1));
    used.sort_unstable();
    let parts: Vec<usize> = if threads.len() <= 1 {
        vec![used[0]; threads.len()]
    } else {
        let ucaps: Vec<usize> = used.iter().map(|&i| caps[i]).collect();
        let caches: Vec<Option<u64>> = used.iter().map(|&i| cache_of(tree, kids[i])).collect();
        partition(p, w, &threads, &ucaps, &caches)?
            .into_iter()
            .map(|q| used[q])
            .collect()
    };
    let mut by_part: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (i, &t) in threads.iter().enumerate() {
        by_part[parts[i]].push(t);
    }
    for (i, group) in by_part.into_iter().enumerate() {
        split(tree, p, w, kids[i], group, pu)?;
    }
    Ok(())
}

/// The cache a vertex's threads share: its own, or, where it has none (a package of a UMA
/// machine, a node without an L3), the caches below it together. None when there are none.
fn cache_of(tree: &CacheTree, v: usize) -> Option<u64> {
    let x = &tree.vertices[v];
    x.cache_bytes.or_else(|| {
        x.children
            .iter()
            .map(|&c| cache_of(tree, c))
            .sum::<Option<u64>>()
    })
}

/// Splits `threads` into `caps.len()` parts; returns each thread's part.
fn partition(
    p: &Profile,
    w: &[Vec<f64>],
    threads: &[usize],
    caps: &[usize],
    caches: &[Option<u64>],
) -> Result<Vec<usize>, MapError> {
    let n = threads.len();
    let k = caps.len();
    // Edge weights scaled to integers 1..=10_000 (METIS wants integers; zero edges left out).
    let wmax = threads
        .iter()
        .flat_map(|&a| threads.iter().map(move |&b| w[a][b]))
        .fold(0.0f64, f64::max);
    let mut xadj: Vec<Idx> = vec![0];
    let mut adjncy: Vec<Idx> = Vec::new();
    let mut adjwgt: Vec<Idx> = Vec::new();
    for &a in threads {
        for (j, &b) in threads.iter().enumerate() {
            if a != b && w[a][b] > 0.0 {
                adjncy.push(j as Idx);
                adjwgt.push(((w[a][b] / wmax) * 10_000.0).ceil().max(1.0) as Idx);
            }
        }
        xadj.push(adjncy.len() as Idx);
    }
    // Vertex weights: [place, contention scaled to 1..=1000].
    let c: Vec<f64> = threads.iter().map(|&t| p.contention[t]).collect();
    let cmax = c.iter().copied().fold(0.0f64, f64::max);
    let mut vwgt: Vec<Idx> = Vec::with_capacity(2 * n);
    for &ci in &c {
        vwgt.push(1);
        vwgt.push(if cmax > 0.0 {
            ((ci / cmax) * 1000.0).round().max(1.0) as Idx
        } else {
            1
        });
    }
    let total_cap: usize = caps.iter().sum();
    let mut tpwgts: Vec<Real> = Vec::with_capacity(2 * k);
    for &cap in caps {
        let share = cap as Real / total_cap as Real;
        tpwgts.push(share);
        tpwgts.push(share);
    }
    let load: f64 = c.iter().sum();
    let cache_total: Option<u64> = caches.iter().copied().sum();
    let contention_ub = match (p.contention_unit, cache_total) {
        (ContentionUnit::WorkingSetBytes, Some(total)) if load > 0.0 => {
            // Each part may hold up to its cache, when that is more than an even share.
            (total as f64 / load).max(1.10)
        }
        (ContentionUnit::WorkingSetBytes, _) if load == 0.0 => 1e6,
        _ => 1.10,
    } as Real;
    let place_ub = (total_cap as Real / n as Real).max(1.0);
    let ubvec = [place_ub, contention_ub.min(1e6)];
    if (k as f64).powi(n as i32) <= EXACT_LIMIT && !force_metis() {
        let limits: Vec<f64> = tpwgts
            .chunks(2)
            .map(|t| f64::from(t[1]) * load * f64::from(ubvec[1]))
            .collect();
        return Ok(exact(w, threads, &c, caps, &limits));
    }
    let mut part: Vec<Idx> = vec![0; n];
    Graph::new(2, k as Idx, &xadj, &adjncy)
        .map_err(|e| MapError::Partitioner(format!("{e:?}")))?
        .set_vwgt(&vwgt)
        .set_adjwgt(&adjwgt)
        .set_tpwgts(&tpwgts)
        .set_ubvec(&ubvec)
        .set_option(metis::option::Seed(1))
        .part_kway(&mut part)
        .map_err(|e| MapError::Partitioner(e.to_string()))?;
    let mut parts: Vec<usize> = part.iter().map(|&x| x as usize).collect();
    repair(w, threads, caps, &mut parts);
    Ok(parts)
}

#[cfg(test)]
thread_local! {
    /// Tests set it to run METIS on small splits too.
    pub(crate) static FORCE_METIS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn force_metis() -> bool {
    #[cfg(test)]
    return FORCE_METIS.with(|f| f.get());
    #[cfg(not(test))]
    false
}

/// Most assignments (parts^threads) the exact partitioner tries before METIS takes over.
const EXACT_LIMIT: f64 = 1_048_576.0;

/// The same problem solved exactly, for the small graphs METIS is not made for (it assumes
/// every part non-empty, while packing talkers into one child and leaving another empty is
/// often the answer here): every assignment that respects the places; the least contention
/// overflow over the parts' limits first, then the least cut, then the first found.
fn exact(
    w: &[Vec<f64>],
    threads: &[usize],
    c: &[f64],
    caps: &[usize],
    limits: &[f64],
) -> Vec<usize> {
    let n = threads.len();
    let k = caps.len();
    let mut cur = vec![0usize; n];
    let mut best: (f64, f64, Vec<usize>) = (f64::INFINITY, f64::INFINITY, Vec::new());
    let mut count = vec![0usize; k];
    let mut load = vec![0.0f64; k];

    #[allow(clippy::too_many_arguments)]
    fn rec(
        i: usize,
        w: &[Vec<f64>],
        threads: &[usize],
        c: &[f64],
        caps: &[usize],
        limits: &[f64],
        cur: &mut Vec<usize>,
        count: &mut Vec<usize>,
        load: &mut Vec<f64>,
        cut: f64,
        best: &mut (f64, f64, Vec<usize>),
    ) {
        let n = threads.len();
        if i == n {
            let over: f64 = load
                .iter()
                .zip(limits)
                .map(|(l, lim)| (l - lim).max(0.0))
                .sum();
            // Relative tolerance: weights are measured, not exact.
            let better = over < best.0 * (1.0 - 1e-9)
                || (over <= best.0 * (1.0 + 1e-9) && cut < best.1 * (1.0 - 1e-9));
            if better || best.2.is_empty() {
                *best = (over, cut, cur.clone());
            }
            return;
        }
        for q in 0..caps.len() {
            if count[q] >= caps[q] {
                continue;
            }
            // Sharing with threads already placed elsewhere is cut.
            let add: f64 = (0..i)
                .filter(|&j| cur[j] != q)
                .map(|j| w[threads[i]][threads[j]])
                .sum();
            cur[i] = q;
            count[q] += 1;
            load[q] += c[i];
            rec(
                i + 1,
                w,
                threads,
                c,
                caps,
                limits,
                cur,
                count,
                load,
                cut + add,
                best,
            );
            count[q] -= 1;
            load[q] -= c[i];
        }
    }
    rec(
        0, w, threads, c, caps, limits, &mut cur, &mut count, &mut load, 0.0, &mut best,
    );
    best.2
}

/// Moves threads out of parts holding more than their capacity: each time, the thread of an
/// overfull part whose move to a part with room loses the least sharing.
fn repair(w: &[Vec<f64>], threads: &[usize], caps: &[usize], parts: &mut [usize]) {
    loop {
        let mut count = vec![0usize; caps.len()];
        for &q in parts.iter() {
            count[q] += 1;
        }
        let Some(over) = (0..caps.len()).find(|&q| count[q] > caps[q]) else {
            return;
        };
        let affinity = |i: usize, q: usize, parts: &[usize]| -> f64 {
            (0..threads.len())
                .filter(|&j| j != i && parts[j] == q)
                .map(|j| w[threads[i]][threads[j]])
                .sum()
        };
        let mut best: Option<(f64, usize, usize)> = None;
        for i in (0..threads.len()).filter(|&i| parts[i] == over) {
            for q in (0..caps.len()).filter(|&q| count[q] < caps[q]) {
                let loss = affinity(i, over, parts) - affinity(i, q, parts);
                if best.is_none_or(|b| loss < b.0) {
                    best = Some((loss, i, q));
                }
            }
        }
        let (_, i, q) = best.expect("the threads fit the places");
        parts[i] = q;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nearflow_topo::presets;

    /// On splits big enough for METIS to be at ease (16 threads in 4 pipelines of 4, over the
    /// two nodes of nehalem-2x4), METIS and the exact search find equally good mappings:
    /// every pipeline kept within one node.
    #[test]
    fn metis_and_exact_agree() {
        let tree = CacheTree::new(&presets::build("nehalem-2x4").unwrap()).with_slots(2);
        let n = 16;
        let mut comm = vec![vec![0u64; n]; n];
        for p in 0..4 {
            for s in 0..3 {
                comm[p * 4 + s][p * 4 + s + 1] = 1000;
            }
        }
        let p = Profile::from_communication("pipes", comm);
        let node = |pu: usize| pu / 4;
        for forced in [false, true] {
            FORCE_METIS.with(|f| f.set(forced));
            let pus = holistic(&tree, &p).unwrap();
            for pipe in 0..4 {
                let n0 = node(pus[pipe * 4]);
                assert!(
                    (0..4).all(|s| node(pus[pipe * 4 + s]) == n0),
                    "metis={forced}: {pus:?}"
                );
            }
            let mut per_pu = [0; 8];
            for &x in &pus {
                per_pu[x] += 1;
            }
            assert!(per_pu.iter().all(|&c| c <= 2), "metis={forced}: {pus:?}");
        }
        FORCE_METIS.with(|f| f.set(false));
    }
}
