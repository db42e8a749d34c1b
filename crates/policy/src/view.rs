//! Decisions over a view of the queues, written once for the threaded runtime and the
//! simulator: each implements [`QueueView`] over its own queues, and both
//! call the same [`Policy::first_queued`] (the wake chain's "is a task left within my reach?")
//! and [`Policy::node_loads`] (what Bobox-2011's balancer sees, §5.2); each implements
//! [`WakeSite`] over its sleep domains, and both wake by the same [`wake_walk`].

use crate::{NodeLoad, Policy, QueueRef, RequestId, Step, WorkerId};

/// What the shared decisions need to see of a runtime's queues and sleepers.
pub trait QueueView {
    /// Tasks in queue `q`: exact in the simulator, a hint in the threaded runtime (its queues'
    /// length hints, exact after a barrier of the sleep protocol).
    fn queue_len(&self, q: QueueRef) -> usize;
    /// Workers asleep in sleep domain `d` (a node's under the policies with a balancer).
    fn sleeping(&self, d: usize) -> usize;
    /// Calls `f` with each request in flight, ascending, and the nodes it has run on.
    fn requests(&self, f: &mut dyn FnMut(RequestId, &[usize]));
}

impl Policy {
    /// The first queue of worker `w`'s search that holds a task, if any: the wake chain's test
    /// (rt/src/sleep/README.md, "The wake chain"): a worker that found work wakes another only
    /// if a task is left within its reach.
    pub fn first_queued(&self, w: WorkerId, view: &impl QueueView) -> Option<QueueRef> {
        self.search(w)
            .iter()
            .flat_map(Step::probes)
            .map(|p| p.queue)
            .find(|&q| view.queue_len(q) > 0)
    }

    /// Each node's load as Bobox-2011's balancer sees it (§5.2): its workers, those asleep,
    /// the tasks queued on it (its deferred queue and its workers' own queues), and the
    /// requests it evaluates, each marked shared when it has run on several nodes.
    pub fn node_loads(&self, view: &impl QueueView) -> Vec<NodeLoad> {
        let mut loads: Vec<NodeLoad> = (0..self.deferred_queues)
            .map(|n| NodeLoad {
                node: n,
                threads: 0,
                idle_threads: view.sleeping(n),
                queued: view.queue_len(QueueRef::Deferred(n)),
                requests: Vec::new(),
                free_memory: None,
            })
            .collect();
        for w in 0..self.workers() {
            let l = &mut loads[self.node_of_worker(w)];
            l.threads += 1;
            l.queued += view.queue_len(QueueRef::Local(w));
        }
        view.requests(&mut |id, nodes| {
            let shared = nodes.len() > 1;
            for &n in nodes {
                if let Some(l) = loads.get_mut(n) {
                    l.requests.push((id, shared));
                }
            }
        });
        loads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PolicyKind;

    /// Queues as plain counts, for the tests.
    struct Counts {
        lens: Vec<(QueueRef, usize)>,
        asleep: Vec<usize>,
        requests: Vec<(RequestId, Vec<usize>)>,
    }

    impl QueueView for Counts {
        fn queue_len(&self, q: QueueRef) -> usize {
            self.lens
                .iter()
                .find(|(r, _)| *r == q)
                .map_or(0, |&(_, n)| n)
        }
        fn sleeping(&self, d: usize) -> usize {
            self.asleep.get(d).copied().unwrap_or(0)
        }
        fn requests(&self, f: &mut dyn FnMut(RequestId, &[usize])) {
            for (id, nodes) in &self.requests {
                f(*id, nodes);
            }
        }
    }

    #[test]
    fn loads_count_threads_sleepers_queues_and_requests_per_node() {
        let m = nearflow_topo::from_synthetic("pack:2 [numa] core:2 pu:1").unwrap();
        let p = Policy::new(PolicyKind::Bobox2011, &m);
        let view = Counts {
            lens: vec![
                (QueueRef::Deferred(1), 3),
                (QueueRef::Local(0), 2),
                (QueueRef::Local(3), 1),
            ],
            asleep: vec![1, 0],
            requests: vec![
                (RequestId::from(4u32), vec![0]),
                (RequestId::from(7u32), vec![0, 1]),
            ],
        };
        let l = p.node_loads(&view);
        assert_eq!(l.len(), 2);
        assert_eq!((l[0].threads, l[0].idle_threads, l[0].queued), (2, 1, 2));
        assert_eq!((l[1].threads, l[1].idle_threads, l[1].queued), (2, 0, 4));
        assert_eq!(
            l[0].requests,
            vec![
                (RequestId::from(4u32), false),
                (RequestId::from(7u32), true)
            ]
        );
        assert_eq!(l[1].requests, vec![(RequestId::from(7u32), true)]);
    }

    #[test]
    fn the_first_queued_is_the_first_probe_that_finds_a_task() {
        let m = nearflow_topo::from_synthetic("pack:2 [numa] core:2 pu:1").unwrap();
        let p = Policy::new(PolicyKind::Las, &m);
        let empty = Counts {
            lens: vec![],
            asleep: vec![],
            requests: vec![],
        };
        assert_eq!(p.first_queued(0, &empty), None);
        // Worker 0's own queue comes before its node's deferred queue in its search.
        let both = Counts {
            lens: vec![(QueueRef::Local(0), 1), (QueueRef::Deferred(0), 1)],
            ..empty
        };
        assert_eq!(p.first_queued(0, &both), Some(QueueRef::Local(0)));
    }
}

/// The sleep domains as the wake walk sees them: the threaded runtime's (atomic counters, a
/// locked list of sleepers per domain, the fences of rt/src/sleep/README.md) and the
/// simulator's (plain counts).
pub trait WakeSite {
    /// Whether domain `d` has a searching worker that stays searching, so that it will find the
    /// pushed task, or pass the wake on when it finds one and sees another left. `order` is the
    /// whole walk (the runtime re-checks behind a fence only when one of its domains sleeps).
    fn searcher_stays(&mut self, order: &[usize], d: usize) -> bool;
    /// Whether domain `d` has a sleeper (a hint: [`take_sleeper`](Self::take_sleeper) decides).
    fn has_sleeper(&self, d: usize) -> bool;
    /// Takes a sleeper of domain `d`, which counts as searching from now on; `None` when there
    /// was none after all.
    fn take_sleeper(&mut self, d: usize) -> Option<WorkerId>;
}

/// The wake walk after a push (rt/src/sleep/README.md): the domains of the queue's wake order
/// ([`Policy::wake_order`]), nearest first; stop at the first with a searcher that stays (it
/// finds the task), pass over those without a sleeper, and take a sleeper of the first that has
/// one. Returns the worker to wake; the caller posts it.
pub fn wake_walk(site: &mut impl WakeSite, order: &[usize]) -> Option<WorkerId> {
    for &d in order {
        if site.searcher_stays(order, d) {
            return None;
        }
        if !site.has_sleeper(d) {
            continue;
        }
        if let Some(w) = site.take_sleeper(d) {
            return Some(w);
        }
    }
    None
}

#[cfg(test)]
mod wake_tests {
    use super::*;

    /// Domains of (searching, sleepers).
    struct Domains(Vec<(usize, Vec<WorkerId>)>);

    impl WakeSite for Domains {
        fn searcher_stays(&mut self, _: &[usize], d: usize) -> bool {
            self.0[d].0 > 0
        }
        fn has_sleeper(&self, d: usize) -> bool {
            !self.0[d].1.is_empty()
        }
        fn take_sleeper(&mut self, d: usize) -> Option<WorkerId> {
            let w = self.0[d].1.pop()?;
            self.0[d].0 += 1;
            Some(w)
        }
    }

    #[test]
    fn the_walk_stops_at_a_searcher_and_wakes_the_nearest_sleeper() {
        // Domain 0 busy, 1 without sleepers, 2 with two: the walk 0, 1, 2 wakes 2's latest.
        let mut s = Domains(vec![(0, vec![]), (0, vec![]), (0, vec![7, 9])]);
        assert_eq!(wake_walk(&mut s, &[0, 1, 2]), Some(9));
        assert_eq!(s.0[2], (1, vec![7]), "the woken worker searches");
        // Now 2 has a searcher: a second push wakes nobody through 2 ...
        assert_eq!(wake_walk(&mut s, &[2, 0]), None);
        // ... and a searcher nearer in the order stops the walk before any sleeper.
        let mut s = Domains(vec![(1, vec![]), (0, vec![4])]);
        assert_eq!(wake_walk(&mut s, &[0, 1]), None);
        assert_eq!(wake_walk(&mut s, &[1, 0]), Some(4));
        assert_eq!(wake_walk(&mut Domains(vec![(0, vec![])]), &[0]), None);
    }
}
