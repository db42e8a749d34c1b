//! TreeMatch (Jeannot & Mercier, Euro-Par 2010; `streammap-cache-topology-mapping.txt`
//! §IV.B.2) and, on the correlation matrix, TreeMatch-S (§IV.B.3, Fig. 8).
//!
//! Bottom-up over the cache tree: the threads, padded with virtual threads (no communication) up
//! to the number of places, are grouped into groups of the leaves' arity so that as much
//! communication as possible stays inside groups; the groups become the entities of the next
//! level up (their communication aggregated), and so on to the root. Groups are then laid onto
//! the tree in depth-first order. Each grouping is exhaustive (the best partition into groups)
//! while the number of partitions is at most [`EXHAUSTIVE_LIMIT`], else greedy: seed a group
//! with the entity that communicates most, add the entity that communicates most with the
//! group, repeat.

use nearflow_topo::PuId;

use crate::tree::CacheTree;
use crate::MapError;

/// Most partitions a grouping step enumerates before it turns greedy.
pub const EXHAUSTIVE_LIMIT: u128 = 200_000;

/// Maps `n = w.len()` threads with symmetric affinity `w` onto `tree`: thread `i` → PU.
pub(crate) fn treematch(tree: &CacheTree, w: &[Vec<f64>]) -> Result<Vec<PuId>, MapError> {
    let arities = tree.arities().ok_or(MapError::Asymmetric)?;
    let n = w.len();
    if n > tree.capacity() {
        return Err(MapError::TooManyThreads {
            threads: n,
            places: tree.capacity(),
        });
    }
    // Entities of the current level: the original threads each stands for.
    let places = tree.capacity();
    let mut members: Vec<Vec<usize>> = (0..places).map(|i| vec![i]).collect();
    let mut m: Vec<Vec<f64>> = (0..places)
        .map(|i| {
            (0..places)
                .map(|j| if i < n && j < n { w[i][j] } else { 0.0 })
                .collect()
        })
        .collect();
    for &a in arities.iter().rev() {
        let groups = group(&m, a);
        members = groups
            .iter()
            .map(|g| g.iter().flat_map(|&e| members[e].clone()).collect())
            .collect();
        m = groups
            .iter()
            .enumerate()
            .map(|(i, gi)| {
                groups
                    .iter()
                    .enumerate()
                    .map(|(j, gj)| {
                        if i == j {
                            0.0
                        } else {
                            gi.iter()
                                .map(|&x| gj.iter().map(|&y| m[x][y]).sum::<f64>())
                                .sum()
                        }
                    })
                    .collect()
            })
            .collect();
    }
    // One entity is left: its member list, in grouping order, is the order of the leaves.
    let order = &members[0];
    let leaves = tree.leaves();
    let mut pu = vec![0; n];
    for (slot, &t) in order.iter().enumerate() {
        if t < n {
            pu[t] = leaves[slot / tree.slots];
        }
    }
    Ok(pu)
}

/// Partitions entities `0..m.len()` into groups of `a`, keeping the most weight inside groups.
/// Each group lists its entities in ascending order; groups in order of their first entity.
pub(crate) fn group(m: &[Vec<f64>], a: usize) -> Vec<Vec<usize>> {
    let p = m.len();
    debug_assert_eq!(p % a, 0);
    if a == 1 {
        return (0..p).map(|i| vec![i]).collect();
    }
    if partitions(p, a) <= EXHAUSTIVE_LIMIT {
        exhaustive(m, a)
    } else {
        greedy(m, a)
    }
}

/// p! / ((a!)^(p/a) (p/a)!), saturating.
pub(crate) fn partitions(p: usize, a: usize) -> u128 {
    // Product over groups: choose the companions of the lowest free entity.
    let mut total: u128 = 1;
    let mut left = p;
    while left > 0 {
        total = total.saturating_mul(choose(left - 1, a - 1));
        left -= a;
    }
    total
}

pub(crate) fn choose(n: usize, k: usize) -> u128 {
    let mut r: u128 = 1;
    for i in 0..k {
        r = r.saturating_mul((n - i) as u128) / (i as u128 + 1);
    }
    r
}

fn inside(m: &[Vec<f64>], g: &[usize]) -> f64 {
    let mut s = 0.0;
    for (i, &x) in g.iter().enumerate() {
        for &y in &g[i + 1..] {
            s += m[x][y];
        }
    }
    s
}

fn exhaustive(m: &[Vec<f64>], a: usize) -> Vec<Vec<usize>> {
    let p = m.len();
    let mut best: (f64, Vec<Vec<usize>>) = (-1.0, Vec::new());
    let mut used = vec![false; p];
    let mut cur: Vec<Vec<usize>> = Vec::new();
    fn rec(
        m: &[Vec<f64>],
        a: usize,
        used: &mut [bool],
        cur: &mut Vec<Vec<usize>>,
        score: f64,
        best: &mut (f64, Vec<Vec<usize>>),
    ) {
        let Some(first) = used.iter().position(|u| !u) else {
            if score > best.0 {
                *best = (score, cur.clone());
            }
            return;
        };
        used[first] = true;
        let free: Vec<usize> = (first + 1..used.len()).filter(|&i| !used[i]).collect();
        let mut pick = Vec::with_capacity(a);
        combos(&free, a - 1, 0, &mut pick, &mut |companions| {
            let mut g = vec![first];
            g.extend_from_slice(companions);
            for &c in companions {
                used[c] = true;
            }
            let s = inside(m, &g);
            cur.push(g);
            rec(m, a, used, cur, score + s, best);
            cur.pop();
            for &c in companions {
                used[c] = false;
            }
        });
        used[first] = false;
    }
    rec(m, a, &mut used, &mut cur, 0.0, &mut best);
    best.1
}

/// Calls `f` with every `k`-subset of `from[start..]` (ascending).
fn combos(
    from: &[usize],
    k: usize,
    start: usize,
    pick: &mut Vec<usize>,
    f: &mut dyn FnMut(&[usize]),
) {
    if pick.len() == k {
        f(pick);
        return;
    }
    for i in start..from.len() {
        if from.len() - i < k - pick.len() {
            break;
        }
        pick.push(from[i]);
        combos(from, k, i + 1, pick, f);
        pick.pop();
    }
}

fn greedy(m: &[Vec<f64>], a: usize) -> Vec<Vec<usize>> {
    let p = m.len();
    let total: Vec<f64> = (0..p).map(|i| m[i].iter().sum()).collect();
    let mut free: Vec<bool> = vec![true; p];
    let mut groups = Vec::new();
    for _ in 0..p / a {
        // Seed: the free entity that communicates most (lowest index on ties).
        let seed = (0..p)
            .filter(|&i| free[i])
            .max_by(|&x, &y| total[x].total_cmp(&total[y]).then(y.cmp(&x)))
            .expect("entities left");
        free[seed] = false;
        let mut g = vec![seed];
        while g.len() < a {
            let next = (0..p)
                .filter(|&i| free[i])
                .max_by(|&x, &y| {
                    let gx: f64 = g.iter().map(|&e| m[e][x]).sum();
                    let gy: f64 = g.iter().map(|&e| m[e][y]).sum();
                    gx.total_cmp(&gy).then(y.cmp(&x))
                })
                .expect("entities left");
            free[next] = false;
            g.push(next);
        }
        g.sort_unstable();
        groups.push(g);
    }
    groups.sort_by_key(|g| g[0]);
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_counts() {
        assert_eq!(partitions(4, 2), 3);
        assert_eq!(partitions(8, 2), 105);
        assert_eq!(partitions(8, 4), 35);
        assert_eq!(partitions(6, 3), 10);
    }

    #[test]
    fn exhaustive_and_greedy_pair_the_talkers() {
        // 0-3 and 1-2 talk.
        let mut m = vec![vec![0.0; 4]; 4];
        m[0][3] = 9.0;
        m[3][0] = 9.0;
        m[1][2] = 5.0;
        m[2][1] = 5.0;
        assert_eq!(exhaustive(&m, 2), vec![vec![0, 3], vec![1, 2]]);
        assert_eq!(greedy(&m, 2), vec![vec![0, 3], vec![1, 2]]);
    }
}
