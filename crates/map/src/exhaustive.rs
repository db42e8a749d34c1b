//! Exhaustive Search (`streammap-cache-topology-mapping.txt` §IV.B.1): every mapping of the
//! threads onto the cache tree, up to the tree's symmetries — two sibling subtrees of the same
//! shape are interchangeable, so of the mappings that differ only by swapping them one is
//! kept. The caller measures each (a run on the host, or a simulation) and keeps the best; the
//! paper reports the same count (600 runs for 6-thread LOIS on its 8-core UMA machine).

use crate::tree::CacheTree;
use crate::MapError;

/// Every mapping (thread `i` → PU) up to symmetry, at most `limit` of them.
pub fn mappings(tree: &CacheTree, n: usize, limit: usize) -> Result<Vec<Vec<usize>>, MapError> {
    if n > tree.capacity() {
        return Err(MapError::TooManyThreads {
            threads: n,
            places: tree.capacity(),
        });
    }
    let threads: Vec<usize> = (0..n).collect();
    let placed = place(tree, 0, &threads, limit)?;
    Ok(placed
        .into_iter()
        .map(|pairs| {
            let mut pu = vec![0; n];
            for (t, p) in pairs {
                pu[t] = p;
            }
            pu
        })
        .collect())
}

type Placement = Vec<(usize, usize)>;

/// Every way to place `threads` under vertex `v`, as (thread, PU) lists.
fn place(
    tree: &CacheTree,
    v: usize,
    threads: &[usize],
    limit: usize,
) -> Result<Vec<Placement>, MapError> {
    let x = &tree.vertices[v];
    if threads.is_empty() {
        return Ok(vec![Vec::new()]);
    }
    if x.children.is_empty() {
        return Ok(vec![threads.iter().map(|&t| (t, x.pus[0])).collect()]);
    }
    let kids = &x.children;
    let caps: Vec<usize> = kids.iter().map(|&c| tree.capacity_of(c)).collect();
    let shapes: Vec<String> = kids.iter().map(|&c| tree.shape(c)).collect();
    // Distribute the threads over the children. Among siblings of one shape, a child's first
    // thread must be lower than its next same-shaped sibling's, and empty children come last:
    // one representative per symmetric class.
    let mut out = Vec::new();
    let mut assign: Vec<Vec<usize>> = vec![Vec::new(); kids.len()];
    distribute(threads, 0, &caps, &shapes, &mut assign, &mut |assign| {
        if out.len() > limit {
            return;
        }
        // Cartesian product of the children's placements.
        let mut acc: Vec<Placement> = vec![Vec::new()];
        for (i, group) in assign.iter().enumerate() {
            let Ok(sub) = place(tree, kids[i], group, limit) else {
                return;
            };
            let mut next = Vec::with_capacity(acc.len() * sub.len());
            for a in &acc {
                for s in &sub {
                    let mut c = a.clone();
                    c.extend_from_slice(s);
                    next.push(c);
                }
            }
            acc = next;
            if acc.len() > limit {
                break;
            }
        }
        out.extend(acc);
    });
    if out.len() > limit {
        return Err(MapError::TooManyMappings { limit });
    }
    Ok(out)
}

fn distribute(
    threads: &[usize],
    next: usize,
    caps: &[usize],
    shapes: &[String],
    assign: &mut Vec<Vec<usize>>,
    f: &mut dyn FnMut(&[Vec<usize>]),
) {
    if next == threads.len() {
        // Canonical: among same-shaped siblings, non-empty ones first, ordered by first thread.
        for i in 0..assign.len() {
            for j in i + 1..assign.len() {
                if shapes[i] != shapes[j] {
                    continue;
                }
                match (assign[i].first(), assign[j].first()) {
                    (None, Some(_)) => return,
                    (Some(a), Some(b)) if a > b => return,
                    _ => {}
                }
            }
        }
        f(assign);
        return;
    }
    let t = threads[next];
    let mut tried_empty: Vec<&str> = Vec::new();
    for c in 0..caps.len() {
        if assign[c].len() >= caps[c] {
            continue;
        }
        // Putting the thread into an empty child: one empty child per shape is enough.
        if assign[c].is_empty() {
            if tried_empty.contains(&shapes[c].as_str()) {
                continue;
            }
            tried_empty.push(&shapes[c]);
        }
        assign[c].push(t);
        distribute(threads, next + 1, caps, shapes, assign, f);
        assign[c].pop();
    }
}
