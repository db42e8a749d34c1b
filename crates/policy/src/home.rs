//! Data homes: where the data a task reads lives, and where each policy puts such a task.
//!
//! SplittableData (`numa-template-library-splittable-data.txt` §3, Fig. 5) keeps one partition
//! of a data structure per NUMA node and "ensures good data locality by executing tasks at the
//! same processor as the processor holding the data processed by the task". A task spawned with
//! a [`Home`] is queued where workers of that node (or core group) look first; the stealing
//! rules are unchanged, so it may still run elsewhere when its node is busy, and the runtime
//! counts whether it ran at home.
//!
//! What a home means to each policy — the queues its *deferred* tasks go to, restricted to
//! those the home's workers are fed from (derived from the policy's own placement, so a new
//! policy gets homes for free):
//!
//! | policy | a task with a home goes to |
//! |---|---|
//! | `las` | the deferred queue of a core group of the home node (spread over the node's groups by ticket), or of the home group (§4.1) |
//! | `bobox2011` | the home node's request lists (its deferred queue, §5.1), whichever node the request's turn would pick |
//! | `fifo-rr`, `per-thread`, `random-steal` | the list of a worker of the home node (spread by ticket) |
//! | `nls`, `central` | the one shared queue, as without a home: these designs have no per-node queue |
//!
//! A home can also name one PU ([`Home::pu`], StreamMap's mapping of a thread to a core): the
//! task goes to a queue that PU's worker is fed from — under `pinned` its own queue, which no
//! other worker takes from, so the task runs there; under the other policies the queue its
//! own deferred spawns go to (its group's, for LAS), from which it may be stolen as usual.

use nearflow_topo::{GroupId, Machine, NodeId, PuId};
use serde::Serialize;

use crate::search::QueueRef;
use crate::{Place, Policy};

/// Where a task's data lives: a NUMA node, and optionally one of its core groups. Built against
/// a machine, so its indices are valid there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Home {
    node: NodeId,
    group: Option<GroupId>,
    pu: Option<PuId>,
}

/// A home that does not exist on the machine.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HomeError {
    /// The node index is out of range.
    #[error("NUMA node {node} does not exist (the machine has {nodes})")]
    NoSuchNode { node: usize, nodes: usize },
    /// The group index is out of range.
    #[error("core group {group} does not exist (the machine has {groups})")]
    NoSuchGroup { group: usize, groups: usize },
    /// The PU index is out of range.
    #[error("PU {pu} does not exist (the machine has {pus})")]
    NoSuchPu { pu: usize, pus: usize },
}

impl Home {
    /// NUMA node `node` of `machine`.
    pub fn node(machine: &Machine, node: NodeId) -> Result<Home, HomeError> {
        let nodes = machine.node_count();
        if node >= nodes {
            return Err(HomeError::NoSuchNode { node, nodes });
        }
        Ok(Home {
            node,
            group: None,
            pu: None,
        })
    }

    /// PU `pu` of `machine` (and so its group and node).
    pub fn pu(machine: &Machine, pu: PuId) -> Result<Home, HomeError> {
        let pus = machine.pu_count();
        if pu >= pus {
            return Err(HomeError::NoSuchPu { pu, pus });
        }
        Ok(Home {
            node: machine.node_of(pu),
            group: Some(machine.group_of(pu)),
            pu: Some(pu),
        })
    }

    /// Core group `group` of `machine` (and so its node).
    pub fn group(machine: &Machine, group: GroupId) -> Result<Home, HomeError> {
        let groups = machine.groups();
        let g = groups.get(group).ok_or(HomeError::NoSuchGroup {
            group,
            groups: groups.len(),
        })?;
        Ok(Home {
            node: g.node,
            group: Some(group),
            pu: None,
        })
    }

    /// The home node.
    pub fn node_index(&self) -> NodeId {
        self.node
    }

    /// The home group, if one was given (or implied by a PU).
    pub fn group_index(&self) -> Option<GroupId> {
        self.group
    }

    /// The home PU, if one was given.
    pub fn pu_index(&self) -> Option<PuId> {
        self.pu
    }
}

/// The queues a homed deferred task may go to, per node and per group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct HomeQueues {
    by_node: Vec<Vec<QueueRef>>,
    by_group: Vec<Vec<QueueRef>>,
    /// Per worker: the queues its own deferred spawns go to (empty: use its group's).
    by_worker: Vec<Vec<QueueRef>>,
}

impl HomeQueues {
    /// Derives them from `p`'s placement of deferred tasks: the queues that deferred spawns of
    /// the node's (group's) workers go to. Local queues are left out (only their owner may push
    /// to one); a node or group left with none takes every candidate queue of the machine.
    pub(crate) fn derive(p: &Policy, m: &Machine) -> HomeQueues {
        let of_worker = |w: usize| -> Vec<QueueRef> {
            match p.place_deferred[w] {
                Place::Queue(QueueRef::Local(_)) => Vec::new(),
                Place::Queue(q) => vec![q],
                Place::RoundRobinShared { count } if count == p.workers => {
                    vec![QueueRef::Shared(w)]
                }
                Place::RoundRobinShared { count } => (0..count).map(QueueRef::Shared).collect(),
                Place::RequestNode => vec![QueueRef::Deferred(p.node_of_worker[w])],
            }
        };
        let collect = |workers: &mut dyn Iterator<Item = usize>| {
            let mut qs: Vec<QueueRef> = Vec::new();
            for w in workers {
                for q in of_worker(w) {
                    if !qs.contains(&q) {
                        qs.push(q);
                    }
                }
            }
            qs
        };
        let all = collect(&mut (0..p.workers));
        let or_all = |qs: Vec<QueueRef>| if qs.is_empty() { all.clone() } else { qs };
        HomeQueues {
            by_worker: (0..p.workers).map(of_worker).collect(),
            by_node: (0..m.node_count())
                .map(|n| {
                    or_all(collect(
                        &mut (0..p.workers).filter(|&w| p.node_of_worker[w] == n),
                    ))
                })
                .collect(),
            by_group: m
                .groups()
                .iter()
                .map(|g| {
                    or_all(collect(
                        &mut g.pus.iter().copied().filter(|&w| w < p.workers),
                    ))
                })
                .collect(),
        }
    }
}

impl Policy {
    /// Where a deferred task whose data lives at `home` goes; `ticket` spreads tasks over the
    /// home's queues (the runtime draws it from a counter). None when the policy has no queue
    /// for homed tasks at all (then the task is placed as without a home).
    #[inline]
    pub fn place_at(&self, home: Home, ticket: usize) -> Option<QueueRef> {
        let h = &self.homes;
        if let Some(qs) = home.pu.and_then(|w| h.by_worker.get(w)) {
            if !qs.is_empty() {
                return Some(qs[ticket % qs.len()]);
            }
        }
        let qs = match home.group {
            Some(g) if g < h.by_group.len() => &h.by_group[g],
            _ => h.by_node.get(home.node)?,
        };
        (!qs.is_empty()).then(|| qs[ticket % qs.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PolicyKind;
    use nearflow_topo::presets;

    fn queues(p: &Policy, home: Home) -> Vec<QueueRef> {
        let mut v: Vec<QueueRef> = (0..16).filter_map(|t| p.place_at(home, t)).collect();
        v.sort_by_key(|q| format!("{q:?}"));
        v.dedup();
        v
    }

    #[test]
    fn homes_are_checked_against_the_machine() {
        let m = presets::build("nehalem-2x4").unwrap();
        assert_eq!(Home::node(&m, 1).unwrap().node_index(), 1);
        assert_eq!(
            Home::node(&m, 2),
            Err(HomeError::NoSuchNode { node: 2, nodes: 2 })
        );
        let g = Home::group(&m, 1).unwrap();
        assert_eq!((g.node_index(), g.group_index()), (1, Some(1)));
        assert!(Home::group(&m, 9).is_err());
    }

    /// A PU home: under `pinned` (and the per-worker designs) that PU's own queue, which only
    /// its worker probes under `pinned`; under LAS its group's deferred queue; a PU that does
    /// not exist is refused.
    #[test]
    fn a_pu_home_is_its_workers_queue() {
        let m = presets::build("e5310-smp").unwrap(); // 8 PUs, groups of 2
        let h = Home::pu(&m, 5).unwrap();
        assert_eq!((h.pu_index(), h.group_index()), (Some(5), Some(2)));
        assert_eq!(Home::pu(&m, 8), Err(HomeError::NoSuchPu { pu: 8, pus: 8 }));
        let p = Policy::new(PolicyKind::Pinned, &m);
        assert_eq!(queues(&p, h), vec![QueueRef::Shared(5)]);
        let reach: Vec<usize> = (0..8)
            .filter(|&w| crate::search_reaches(p.search(w), QueueRef::Shared(5)))
            .collect();
        assert_eq!(reach, vec![5]);
        let p = Policy::new(PolicyKind::Las, &m);
        assert_eq!(queues(&p, h), vec![QueueRef::Deferred(2)]);
        let p = Policy::new(PolicyKind::PerThread, &m);
        assert_eq!(queues(&p, h), vec![QueueRef::Shared(5)]);
    }

    /// LAS: a node's groups' deferred queues, spread by ticket; a group home its own queue.
    #[test]
    fn las_puts_a_homed_task_in_a_group_of_its_node() {
        let m = presets::build("e5310-smp").unwrap(); // 1 node, 4 groups of 2
        let p = Policy::new(PolicyKind::Las, &m);
        let all: Vec<QueueRef> = (0..4).map(QueueRef::Deferred).collect();
        assert_eq!(queues(&p, Home::node(&m, 0).unwrap()), all);
        assert_eq!(
            queues(&p, Home::group(&m, 2).unwrap()),
            vec![QueueRef::Deferred(2)]
        );
        let m = presets::build("e7-4820").unwrap(); // 4 nodes, a group each
        let p = Policy::new(PolicyKind::Las, &m);
        for n in 0..4 {
            let g = m.groups().iter().find(|g| g.node == n).unwrap().index;
            assert_eq!(
                queues(&p, Home::node(&m, n).unwrap()),
                vec![QueueRef::Deferred(g)]
            );
        }
    }

    /// Bobox: the node's request lists; per-worker designs: a worker of the node; NLS and the
    /// central queue: their one queue.
    #[test]
    fn every_policy_has_a_documented_home() {
        let m = presets::build("nehalem-2x4").unwrap(); // 2 nodes x 4 PUs
        let node1_workers: Vec<usize> = (0..8).filter(|&w| m.node_of(w) == 1).collect();
        for kind in PolicyKind::ALL {
            let p = Policy::new(kind, &m);
            let got = queues(&p, Home::node(&m, 1).unwrap());
            let want: Vec<QueueRef> = match kind {
                PolicyKind::Las => vec![QueueRef::Deferred(m.group_of(node1_workers[0]))],
                PolicyKind::Bobox2011 => vec![QueueRef::Deferred(1)],
                PolicyKind::Nls | PolicyKind::Central => vec![QueueRef::Shared(0)],
                PolicyKind::FifoRr
                | PolicyKind::PerThread
                | PolicyKind::RandomSteal
                | PolicyKind::Pinned => {
                    node1_workers.iter().map(|&w| QueueRef::Shared(w)).collect()
                }
            };
            let mut want = want;
            want.sort_by_key(|q| format!("{q:?}"));
            assert_eq!(got, want, "{kind}");
            // Whoever may be woken for such a queue can reach it (the wake invariant).
            for q in got {
                assert!((0..p.workers()).any(|w| crate::search_reaches(p.search(w), q)));
            }
        }
    }
}
