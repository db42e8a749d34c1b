//! LAS, the locality-aware scheduler: `../shared/papers/las-scheduler-and-numa-allocator.txt`
//! §4.1 (queues), §4.2 (the five rules) and §4.3 (waking).
//!
//! Queues: one immediate queue per core (`Local(pu)`), one deferred queue per core group
//! (`Deferred(group)`, a priority queue by request id of deques).
//!
//! The five rules for worker `w` of group `g` on node `n`, in order:
//! 1. `Local(w)`, youngest task;
//! 2. the other cores of `g` in increasing cache distance (ties: in PU order after `w`), oldest;
//! 3. `Deferred(g)`, youngest task of the oldest request;
//! 4. the other groups' deferred queues in increasing NUMA distance (ties: in group order after
//!    `g`), oldest task of the second oldest request, or of the only request;
//! 5. immediate queues of cores of the other groups on node `n`, in a resumable round robin: the
//!    next scan starts after the queue where the last successful scan ended, so the groups are
//!    tested evenly. Empty when `n` has one group (footnote 3).
//!
//! Waking (§4.3): the spawner's own group first, then the other groups in increasing NUMA
//! distance; for an immediate task only the groups of its own node, since rules 1, 2 and 5 never
//! let an immediate task leave its node.

use nearflow_topo::{GroupId, Machine, PuId};

use crate::search::{End, Probe, QueueRef, Step, Take};
use crate::{Place, Policy, PolicyKind, RootPlace, Services, SleepLayout, SleepScheme};

/// Other members of `items` ordered by `key`, ties broken by cyclic order after `me`.
fn nearest_first<K: Ord>(
    items: &[usize],
    me: usize,
    n: usize,
    key: impl Fn(usize) -> K,
) -> Vec<usize> {
    let mut v: Vec<usize> = items.iter().copied().filter(|&x| x != me).collect();
    v.sort_by_key(|&x| (key(x), (x + n - me) % n));
    v
}

/// Groups other than `g`, nearest NUMA distance first.
fn groups_by_distance(m: &Machine, g: GroupId) -> Vec<GroupId> {
    let all: Vec<GroupId> = (0..m.groups().len()).collect();
    nearest_first(&all, g, all.len(), |h| m.group_distance(g, h))
}

pub(crate) fn build(m: &Machine) -> Policy {
    let workers = m.pu_count();
    let groups = m.groups();
    let mut searches = Vec::with_capacity(workers);
    for w in 0..workers {
        let g = m.group_of(w);
        let node = m.node_of(w);
        let own = Probe {
            queue: QueueRef::Local(w),
            take: Take::Plain(End::Youngest),
            rule: 1,
        };
        let mates: Vec<Probe> =
            nearest_first(&groups[g].pus, w, workers, |p| m.cache_distance(w, p))
                .into_iter()
                .map(|p| Probe {
                    queue: QueueRef::Local(p),
                    take: Take::Plain(End::Oldest),
                    rule: 2,
                })
                .collect();
        let deferred = Probe {
            queue: QueueRef::Deferred(g),
            take: Take::OldestRequestYoungest,
            rule: 3,
        };
        let others: Vec<Probe> = groups_by_distance(m, g)
            .into_iter()
            .map(|h| Probe {
                queue: QueueRef::Deferred(h),
                take: Take::SecondOldestRequestOldest,
                rule: 4,
            })
            .collect();
        let same_node: Vec<Probe> = groups
            .iter()
            .filter(|o| o.index != g && o.node == node)
            .flat_map(|o| o.pus.iter().copied())
            .map(|p: PuId| Probe {
                queue: QueueRef::Local(p),
                take: Take::Plain(End::Oldest),
                rule: 5,
            })
            .collect();
        searches.push(vec![
            Step::Scan(vec![own]),
            Step::Scan(mates),
            Step::Scan(vec![deferred]),
            Step::Scan(others),
            Step::RoundRobin(same_node),
        ]);
    }
    let wake_deferred: Vec<Vec<usize>> = (0..groups.len())
        .map(|g| std::iter::once(g).chain(groups_by_distance(m, g)).collect())
        .collect();
    let wake_local: Vec<Vec<usize>> = (0..workers)
        .map(|w| {
            let g = m.group_of(w);
            std::iter::once(g)
                .chain(
                    groups_by_distance(m, g)
                        .into_iter()
                        .filter(|&h| groups[h].node == groups[g].node),
                )
                .collect()
        })
        .collect();
    Policy {
        kind: PolicyKind::Las,
        workers,
        local_queues: workers,
        shared_queues: 0,
        deferred_queues: groups.len(),
        searches,
        place_immediate: (0..workers)
            .map(|w| Place::Queue(QueueRef::Local(w)))
            .collect(),
        place_deferred: (0..workers)
            .map(|w| Place::Queue(QueueRef::Deferred(m.group_of(w))))
            .collect(),
        root: RootPlace::DeferredByRequest {
            groups: groups.len(),
        },
        sleep: SleepLayout::from_domains(
            SleepScheme::Domains,
            groups.iter().map(|g| g.pus.clone()).collect(),
            workers,
        ),
        wake_local,
        wake_shared: Vec::new(),
        wake_deferred,
        node_of_worker: (0..workers).map(|w| m.node_of(w)).collect(),
        services: Services::default(),
        homes: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use nearflow_topo::{presets, Cache, Machine, Pu, Source};

    use crate::search::{resolve_deferred, walk, Cursors, End, QueueRef, RequestId, Rng};
    use crate::{Policy, PolicyKind, TaskKind};

    /// A snapshot of queue state: lengths of immediate queues, request ids in deferred queues.
    #[derive(Default)]
    struct View {
        local: HashMap<usize, usize>,
        deferred: HashMap<usize, Vec<RequestId>>,
    }

    /// What LAS picks: (rule, queue, request, end).
    type Pick = (u8, QueueRef, Option<RequestId>, End);

    fn pick(p: &Policy, w: usize, v: &View, cursors: &mut Cursors) -> Option<Pick> {
        let mut rng = Rng::new(7);
        walk(p.search(w), cursors, &mut rng, |probe| match probe.queue {
            QueueRef::Local(i) => match probe.take {
                crate::Take::Plain(end) => {
                    (v.local.get(&i).copied().unwrap_or(0) > 0).then_some((None, end))
                }
                other => panic!("immediate queue probed with {other:?}"),
            },
            QueueRef::Deferred(i) => {
                let reqs = v.deferred.get(&i).cloned().unwrap_or_default();
                resolve_deferred(probe.take, &reqs, None).map(|(r, e)| (Some(r), e))
            }
            QueueRef::Shared(_) => panic!("LAS has no shared queue"),
        })
        .map(|((r, e), probe)| (probe.rule, probe.queue, r, e))
    }

    fn las(name: &str) -> Policy {
        Policy::new(PolicyKind::Las, &presets::build(name).unwrap())
    }

    #[test]
    fn rule1_own_queue_youngest_first() {
        for name in ["e7-4820", "e5310-smp"] {
            let p = las(name);
            let mut v = View::default();
            v.local.insert(0, 3);
            v.local.insert(1, 3);
            v.deferred.insert(0, vec![1]);
            let got = pick(&p, 0, &v, &mut Cursors::new(p.search(0)));
            assert_eq!(
                got,
                Some((1, QueueRef::Local(0), None, End::Youngest)),
                "{name}"
            );
        }
    }

    #[test]
    fn rule2_group_mates_by_cache_distance_oldest() {
        // e7-4820: PU 1 is PU 0's hyper-thread (L1), PU 2 shares only the L3.
        let p = las("e7-4820");
        let mut v = View::default();
        v.local.insert(2, 1);
        v.local.insert(1, 1);
        v.deferred.insert(0, vec![5]);
        let got = pick(&p, 0, &v, &mut Cursors::new(p.search(0)));
        assert_eq!(got, Some((2, QueueRef::Local(1), None, End::Oldest)));
        v.local.remove(&1);
        let got = pick(&p, 0, &v, &mut Cursors::new(p.search(0)));
        assert_eq!(got, Some((2, QueueRef::Local(2), None, End::Oldest)));
        // e5310-smp: PU 1 shares the L2 with PU 0; PU 2 is in another group, so it is not rule 2.
        let p = las("e5310-smp");
        let mut v = View::default();
        v.local.insert(1, 1);
        v.local.insert(2, 1);
        let got = pick(&p, 0, &v, &mut Cursors::new(p.search(0)));
        assert_eq!(got, Some((2, QueueRef::Local(1), None, End::Oldest)));
    }

    #[test]
    fn rule3_group_deferred_oldest_request_youngest_task() {
        for name in ["e7-4820", "e5310-smp"] {
            let p = las(name);
            let mut v = View::default();
            v.deferred.insert(0, vec![4, 7]);
            v.deferred.insert(1, vec![2]);
            let got = pick(&p, 0, &v, &mut Cursors::new(p.search(0)));
            assert_eq!(
                got,
                Some((3, QueueRef::Deferred(0), Some(4), End::Youngest)),
                "{name}"
            );
        }
    }

    #[test]
    fn rule4_other_groups_second_oldest_request() {
        for name in ["e7-4820", "e5310-smp"] {
            let p = las(name);
            let w = p.workers() - 1; // last worker, in the last group
            let mut v = View::default();
            v.deferred.insert(1, vec![3, 8, 9]);
            let got = pick(&p, w, &v, &mut Cursors::new(p.search(w)));
            assert_eq!(
                got,
                Some((4, QueueRef::Deferred(1), Some(8), End::Oldest)),
                "{name}"
            );
            v.deferred.insert(1, vec![3]);
            let got = pick(&p, w, &v, &mut Cursors::new(p.search(w)));
            assert_eq!(
                got,
                Some((4, QueueRef::Deferred(1), Some(3), End::Oldest)),
                "{name}"
            );
        }
    }

    /// Three nodes in a line (0 – 1 – 2): from node 0, node 1's deferred queue is probed before
    /// node 2's.
    #[test]
    fn rule4_scans_in_increasing_numa_distance() {
        let pus = (0..3)
            .map(|i| Pu {
                index: i,
                os_index: i,
                core: i,
                package: i,
                node: i,
            })
            .collect();
        let caches = (0..3)
            .map(|i| Cache {
                level: 2,
                size: None,
                pus: vec![i],
            })
            .collect();
        let matrix = vec![vec![10, 20, 30], vec![20, 10, 20], vec![30, 20, 10]];
        let m = Machine::new(
            Source::Synthetic("line".into()),
            pus,
            caches,
            3,
            Some(matrix),
            vec![],
        )
        .unwrap();
        let p = Policy::new(PolicyKind::Las, &m);
        let mut v = View::default();
        v.deferred.insert(2, vec![1]);
        v.deferred.insert(1, vec![2]);
        let got = pick(&p, 0, &v, &mut Cursors::new(p.search(0)));
        assert_eq!(got, Some((4, QueueRef::Deferred(1), Some(2), End::Oldest)));
        // Waking for a deferred task of group 0 goes 0, 1, 2.
        assert_eq!(p.wake_order(QueueRef::Deferred(0)), &[0, 1, 2]);
        // An immediate task of node 0 wakes nobody beyond node 0.
        assert_eq!(p.wake_order(QueueRef::Local(0)), &[0]);
    }

    #[test]
    fn rule5_same_node_round_robin_resumes() {
        // e5310-smp: one node, four groups of two; worker 0's rule-5 queues are PUs 2..8.
        let p = las("e5310-smp");
        let mut v = View::default();
        v.local.insert(2, 5);
        v.local.insert(6, 5);
        let mut c = Cursors::new(p.search(0));
        assert_eq!(
            pick(&p, 0, &v, &mut c),
            Some((5, QueueRef::Local(2), None, End::Oldest))
        );
        // PU 2 is still non-empty, but the scan resumes after it.
        assert_eq!(
            pick(&p, 0, &v, &mut c),
            Some((5, QueueRef::Local(6), None, End::Oldest))
        );
        assert_eq!(
            pick(&p, 0, &v, &mut c),
            Some((5, QueueRef::Local(2), None, End::Oldest))
        );
    }

    #[test]
    fn immediate_tasks_never_leave_their_node() {
        // e7-4820: one group per node, so rule 5 has nothing to scan (footnote 3) and PU 16's
        // immediate queue (node 1) is invisible to worker 0.
        let p = las("e7-4820");
        let mut v = View::default();
        v.local.insert(16, 4);
        assert_eq!(pick(&p, 0, &v, &mut Cursors::new(p.search(0))), None);
        assert_eq!(p.wake_order(QueueRef::Local(16)), &[1]);
        // A deferred task of group 1 may wake any group, its own first.
        assert_eq!(p.wake_order(QueueRef::Deferred(1))[0], 1);
        assert_eq!(p.wake_order(QueueRef::Deferred(1)).len(), 4);
    }

    #[test]
    fn rules_apply_in_order() {
        let p = las("e5310-smp");
        let mut v = View::default();
        v.local.insert(4, 1); // rule 5
        v.deferred.insert(3, vec![1]); // rule 4
        v.deferred.insert(0, vec![2]); // rule 3
        v.local.insert(1, 1); // rule 2
        v.local.insert(0, 1); // rule 1
        let mut expect = vec![1, 2, 3, 4, 5];
        let order = [0usize, 1, 2, 3, 4];
        for step in order {
            let (rule, q, _, _) = pick(&p, 0, &v, &mut Cursors::new(p.search(0))).unwrap();
            assert_eq!(rule, expect.remove(0));
            match (step, q) {
                (0, QueueRef::Local(0)) | (1, QueueRef::Local(1)) => {
                    v.local.remove(&(step));
                }
                (2, QueueRef::Deferred(0)) => {
                    v.deferred.remove(&0);
                }
                (3, QueueRef::Deferred(3)) => {
                    v.deferred.remove(&3);
                }
                (4, QueueRef::Local(4)) => {}
                other => panic!("unexpected pick {other:?}"),
            }
        }
    }

    #[test]
    fn placement_follows_the_spawning_core() {
        let p = las("e7-4820");
        assert_eq!(
            p.place(TaskKind::Immediate, 17),
            crate::Place::Queue(QueueRef::Local(17))
        );
        assert_eq!(
            p.place(TaskKind::Deferred, 17),
            crate::Place::Queue(QueueRef::Deferred(1))
        );
        assert_eq!(p.sleep().domains.len(), 4);
    }
}
