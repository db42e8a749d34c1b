//! Bobox-2011: `../shared/papers/task-scheduling-in-data-stream-processing.txt` §5.
//!
//! Data structures (§5.1): each NUMA node keeps the requests it evaluates, each with its list of
//! deferred tasks (`Deferred(node)`, keyed by request); each thread keeps its list of immediate
//! tasks (`Local(w)`). A new request goes to the node with the most free resources
//! ([`choose_node`]). An idle thread takes, in order:
//! 1. the newest task of its own immediate list;
//! 2. the oldest deferred task of the request it last ran a task of;
//! 3. the oldest deferred task of the oldest request of its node;
//! 4. the oldest immediate task of another thread of its node;
//! 5. otherwise it sleeps.
//!
//! §5.2: a load balancer runs every 100 ms while some PU is idle and moves the newest request of
//! an overloaded node to a partially idle node, or, when the overloaded node evaluates only one
//! request, shares that request with the idle node ([`balance`]); a shared request's new deferred
//! tasks are made the responsibility of its nodes in round robin ([`RequestNodes`]). Threads sleep
//! per node and are woken only for tasks of their own node.

use nearflow_topo::Machine;
use serde::Serialize;

use crate::search::{End, Probe, QueueRef, RequestId, Step, Take};
use crate::{Place, Policy, PolicyKind, RootPlace, Services, SleepLayout, SleepScheme};

pub(crate) fn build(m: &Machine) -> Policy {
    let workers = m.pu_count();
    let nodes = m.node_count();
    let node_workers: Vec<Vec<usize>> = (0..nodes)
        .map(|n| (0..workers).filter(|&w| m.node_of(w) == n).collect())
        .collect();
    let searches = (0..workers)
        .map(|w| {
            let n = m.node_of(w);
            let mates = &node_workers[n];
            let pos = mates.iter().position(|&x| x == w).unwrap_or(0);
            let steal: Vec<Probe> = (1..mates.len())
                .map(|k| mates[(pos + k) % mates.len()])
                .map(|v| Probe {
                    queue: QueueRef::Local(v),
                    take: Take::Plain(End::Oldest),
                    rule: 4,
                })
                .collect();
            vec![
                Step::Scan(vec![Probe {
                    queue: QueueRef::Local(w),
                    take: Take::Plain(End::Youngest),
                    rule: 1,
                }]),
                Step::Scan(vec![Probe {
                    queue: QueueRef::Deferred(n),
                    take: Take::LastRequestOldest,
                    rule: 2,
                }]),
                Step::Scan(vec![Probe {
                    queue: QueueRef::Deferred(n),
                    take: Take::OldestRequestOldest,
                    rule: 3,
                }]),
                Step::Scan(steal),
            ]
        })
        .collect();
    Policy {
        kind: PolicyKind::Bobox2011,
        workers,
        local_queues: workers,
        shared_queues: 0,
        deferred_queues: nodes,
        searches,
        place_immediate: (0..workers)
            .map(|w| Place::Queue(QueueRef::Local(w)))
            .collect(),
        place_deferred: vec![Place::RequestNode; workers],
        root: RootPlace::LeastLoadedNode,
        sleep: SleepLayout::from_domains(SleepScheme::Domains, node_workers, workers),
        wake_local: (0..workers).map(|w| vec![m.node_of(w)]).collect(),
        wake_shared: Vec::new(),
        wake_deferred: (0..nodes).map(|n| vec![n]).collect(),
        node_of_worker: (0..workers).map(|w| m.node_of(w)).collect(),
        services: Services {
            request_registry: true,
            // One node has nothing to balance.
            balancer: nodes > 1,
        },
        homes: Default::default(),
    }
}

/// The nodes evaluating one request, and whose turn it is to be responsible for its next
/// deferred task (§5.2: "distributed in the round-robin way among all sharing nodes").
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RequestNodes {
    nodes: Vec<usize>,
    next: usize,
}

impl RequestNodes {
    /// A request evaluated by one node.
    pub fn new(home: usize) -> Self {
        RequestNodes {
            nodes: vec![home],
            next: 0,
        }
    }
    /// The node responsible for the next deferred task; advances the round robin.
    #[inline]
    pub fn next_node(&mut self) -> usize {
        let n = self.nodes[self.next % self.nodes.len()];
        self.next = (self.next + 1) % self.nodes.len();
        n
    }
    /// The nodes evaluating the request (the first is its home).
    pub fn nodes(&self) -> &[usize] {
        &self.nodes
    }
    /// Moves the request from `from` to `to`.
    pub fn move_to(&mut self, from: usize, to: usize) {
        for n in &mut self.nodes {
            if *n == from {
                *n = to;
            }
        }
        self.nodes.dedup();
    }
    /// Shares the request with `node` too.
    pub fn share_with(&mut self, node: usize) {
        if !self.nodes.contains(&node) {
            self.nodes.push(node);
        }
    }
}

/// A node's load as the balancer sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeLoad {
    pub node: usize,
    /// Threads of the node (workers whose PUs it holds); 0 for a node without CPUs, or one
    /// that shares its CPUs with another node that the model gave them to.
    pub threads: usize,
    /// Threads of the node that are asleep.
    pub idle_threads: usize,
    /// Tasks queued on the node (deferred of its requests and immediate of its threads).
    pub queued: usize,
    /// Requests the node evaluates (home or shared), ascending ids, with whether each is shared.
    pub requests: Vec<(RequestId, bool)>,
    /// Free memory of the node in bytes, when known.
    pub free_memory: Option<u64>,
}

impl NodeLoad {
    /// Every thread is busy and tasks are waiting.
    pub fn overloaded(&self) -> bool {
        self.idle_threads == 0 && self.queued > 0
    }
    /// Some thread sleeps and nothing is waiting.
    pub fn partially_idle(&self) -> bool {
        self.idle_threads > 0 && self.queued == 0
    }
}

/// What the load balancer does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Balance {
    /// Move `request` (with its queued deferred tasks) from `from` to `to`.
    Move {
        request: RequestId,
        from: usize,
        to: usize,
    },
    /// Let `to` evaluate `request` too.
    Share {
        request: RequestId,
        from: usize,
        to: usize,
    },
}

/// §5.2: with an overloaded node (the one with most queued tasks) and a partially idle node (the
/// one with most idle threads), move the overloaded node's newest request that is not shared, or,
/// when it evaluates a single request, share that request with the idle node.
///
/// Beyond §5.2, which assumes every node has CPUs: a node without threads that holds tasks
/// (none should: [`choose_node`] never picks one) has its newest request moved, never shared,
/// since a share only sends the request's *new* tasks elsewhere and the queued ones would wait
/// forever (stress on `pack:2 [numa] [numa] core:2 pu:2` stalled).
pub fn balance(loads: &[NodeLoad]) -> Option<Balance> {
    let from = loads
        .iter()
        .filter(|l| l.overloaded())
        .max_by_key(|l| (l.queued, std::cmp::Reverse(l.node)))?;
    let to = loads
        .iter()
        .filter(|l| l.partially_idle())
        .max_by_key(|l| (l.idle_threads, std::cmp::Reverse(l.node)))?;
    if from.threads == 0 {
        let &(request, _) = from.requests.last()?;
        return Some(Balance::Move {
            request,
            from: from.node,
            to: to.node,
        });
    }
    if from.requests.len() >= 2 {
        if let Some(&(request, _)) = from.requests.iter().rev().find(|(_, shared)| !shared) {
            return Some(Balance::Move {
                request,
                from: from.node,
                to: to.node,
            });
        }
    }
    let &(request, _) = from.requests.last()?;
    if to.requests.iter().any(|&(r, _)| r == request) {
        return None;
    }
    Some(Balance::Share {
        request,
        from: from.node,
        to: to.node,
    })
}

/// What carries out the balancer's decisions: the runtime's registry or the simulator's queues.
/// The round itself, [`balance_round`], is written once and driven by both.
pub trait BalanceSite {
    /// Whether some worker sleeps: the balancer does nothing while none does (§5.2: it looks
    /// for a partially idle node).
    fn anyone_asleep(&self) -> bool;
    /// Each node's load (the policy's count over the site's queues,
    /// [`Policy::node_loads`](crate::Policy::node_loads)).
    fn loads(&self) -> Vec<NodeLoad>;
    /// Applies `f` to the nodes of `request` if it is still in flight; false if it is not.
    fn with_nodes(&mut self, request: RequestId, f: impl FnOnce(&mut RequestNodes)) -> bool;
    /// Moves `request`'s tasks queued in node `from`'s deferred queue to node `to`'s, in order;
    /// returns how many.
    fn move_queued(&mut self, request: RequestId, from: usize, to: usize) -> usize;
    /// Workers of sleep domain `d` (Bobox-2011 sleeps per node: a node's domain).
    fn domain_workers(&self, d: usize) -> usize;
    /// Wakes a sleeping worker of domain `d` by the wake walk; false when it woke none.
    fn wake_domain(&mut self, d: usize) -> bool;
    /// Counts an action carried out (`tasks`: how many a move took along).
    fn count(&mut self, action: Balance, tasks: usize);
}

/// One round of Bobox-2011's load balancer (§5.2), carried out on `site`: when some worker
/// sleeps, [`balance`] over the nodes' loads; a move takes the request's node set and its
/// queued deferred tasks to the idle node and wakes as many of its workers as tasks went
/// along; a share adds the idle node to the request's nodes. Returns what was done (nothing
/// when the request finished in between).
pub fn balance_round(site: &mut impl BalanceSite) -> Option<Balance> {
    if !site.anyone_asleep() {
        return None;
    }
    let action = balance(&site.loads())?;
    match action {
        Balance::Move { request, from, to } => {
            if !site.with_nodes(request, |n| n.move_to(from, to)) {
                return None;
            }
            let n = site.move_queued(request, from, to);
            for _ in 0..n.min(site.domain_workers(to)) {
                if !site.wake_domain(to) {
                    break;
                }
            }
            site.count(action, n);
        }
        Balance::Share { request, to, .. } => {
            if !site.with_nodes(request, |n| n.share_with(to)) {
                return None;
            }
            site.count(action, 0);
        }
    }
    Some(action)
}

/// §5.1: the node with the most free resources — most idle threads, then most free memory (when
/// known), then fewest requests; ties go to the lowest node. Only nodes with threads count: a
/// node without CPUs has no idle thread, but also the fewest requests, and won every tie while
/// all threads were busy, so its requests waited for the balancer.
pub fn choose_node(loads: &[NodeLoad]) -> usize {
    loads
        .iter()
        .filter(|l| l.threads > 0)
        .max_by_key(|l| {
            (
                l.idle_threads,
                l.free_memory.unwrap_or(0),
                std::cmp::Reverse(l.requests.len()),
                std::cmp::Reverse(l.node),
            )
        })
        .map_or(0, |l| l.node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{resolve_deferred, walk, Cursors, Rng};
    use nearflow_topo::presets;

    fn load(node: usize, idle: usize, queued: usize, requests: &[u64]) -> NodeLoad {
        NodeLoad {
            node,
            threads: 4,
            idle_threads: idle,
            queued,
            requests: requests.iter().map(|&r| (r, false)).collect(),
            free_memory: None,
        }
    }

    /// A node without threads is never chosen for a request, even when it
    /// has the fewest; one that holds tasks has its request moved, not shared.
    #[test]
    fn nodes_without_threads_get_no_requests_and_give_theirs_away() {
        let cpuless = |node, queued, requests: &[u64]| NodeLoad {
            threads: 0,
            ..load(node, 0, queued, requests)
        };
        let loads = [
            load(0, 0, 5, &[1, 2]),
            cpuless(1, 0, &[]),
            load(2, 0, 3, &[3]),
        ];
        assert_eq!(
            choose_node(&loads),
            2,
            "node 1 has the fewest requests but no thread"
        );
        let loads = [load(0, 2, 0, &[1]), cpuless(1, 2, &[4])];
        assert_eq!(
            balance(&loads),
            Some(Balance::Move {
                request: 4,
                from: 1,
                to: 0
            }),
            "a share would leave the queued tasks where no thread runs them"
        );
    }

    #[test]
    fn balancer_moves_the_newest_request() {
        let loads = [load(0, 0, 10, &[1, 4, 6]), load(1, 3, 0, &[])];
        assert_eq!(
            balance(&loads),
            Some(Balance::Move {
                request: 6,
                from: 0,
                to: 1
            })
        );
    }

    #[test]
    fn balancer_shares_a_lone_request() {
        let loads = [
            load(0, 0, 10, &[2]),
            load(1, 12, 0, &[]),
            load(2, 1, 0, &[]),
        ];
        assert_eq!(
            balance(&loads),
            Some(Balance::Share {
                request: 2,
                from: 0,
                to: 1
            })
        );
        // Already shared with that node: nothing to do.
        let loads = [load(0, 0, 10, &[2]), load(1, 12, 0, &[2])];
        assert_eq!(balance(&loads), None);
    }

    #[test]
    fn balancer_idles_when_balanced() {
        assert_eq!(
            balance(&[load(0, 0, 10, &[1, 2]), load(1, 0, 3, &[3])]),
            None
        );
        assert_eq!(balance(&[load(0, 2, 0, &[]), load(1, 1, 0, &[])]), None);
    }

    /// A site of two nodes whose queues and wakes are recorded: what [`balance_round`] does
    /// there is what the runtime's registry and the simulator's queues both get.
    struct Fake {
        asleep: bool,
        loads: Vec<NodeLoad>,
        nodes: std::collections::HashMap<u64, RequestNodes>,
        queued: [Vec<(u64, u32)>; 2],
        sleepers: usize,
        wakes: usize,
        counted: Vec<(Balance, usize)>,
    }

    impl BalanceSite for Fake {
        fn anyone_asleep(&self) -> bool {
            self.asleep
        }
        fn loads(&self) -> Vec<NodeLoad> {
            self.loads.clone()
        }
        fn with_nodes(&mut self, r: u64, f: impl FnOnce(&mut RequestNodes)) -> bool {
            self.nodes.get_mut(&r).map(f).is_some()
        }
        fn move_queued(&mut self, r: u64, from: usize, to: usize) -> usize {
            let (moved, kept): (Vec<_>, Vec<_>) =
                self.queued[from].drain(..).partition(|&(q, _)| q == r);
            self.queued[from] = kept;
            let n = moved.len();
            self.queued[to].extend(moved);
            n
        }
        fn domain_workers(&self, _: usize) -> usize {
            4
        }
        fn wake_domain(&mut self, _: usize) -> bool {
            if self.sleepers == 0 {
                return false;
            }
            self.sleepers -= 1;
            self.wakes += 1;
            true
        }
        fn count(&mut self, a: Balance, n: usize) {
            self.counted.push((a, n));
        }
    }

    fn fake(requests: &[u64]) -> Fake {
        Fake {
            asleep: true,
            loads: vec![load(0, 0, 6, requests), load(1, 3, 0, &[])],
            nodes: requests
                .iter()
                .map(|&r| (r, RequestNodes::new(0)))
                .collect(),
            queued: [
                vec![(1, 0), (2, 1), (2, 2), (1, 3), (2, 4), (2, 5)],
                Vec::new(),
            ],
            sleepers: 2,
            wakes: 0,
            counted: Vec::new(),
        }
    }

    #[test]
    fn a_round_moves_the_newest_request_with_its_tasks_and_wakes_the_idle_node() {
        let mut s = fake(&[1, 2]);
        let done = balance_round(&mut s);
        let want = Balance::Move {
            request: 2,
            from: 0,
            to: 1,
        };
        assert_eq!(done, Some(want));
        assert_eq!(s.queued[0], [(1, 0), (1, 3)]);
        assert_eq!(s.queued[1], [(2, 1), (2, 2), (2, 4), (2, 5)], "in order");
        assert_eq!(s.nodes[&2].nodes(), [1]);
        assert_eq!(
            s.wakes, 2,
            "4 tasks, 2 sleepers: the walk stops when none is woken"
        );
        assert_eq!(s.counted, [(want, 4)]);
        // A single request is shared, its tasks stay; nothing while nobody sleeps; nothing for a
        // request that finished meanwhile.
        let mut s = fake(&[1]);
        assert!(matches!(
            balance_round(&mut s),
            Some(Balance::Share {
                request: 1,
                to: 1,
                ..
            })
        ));
        assert_eq!((s.queued[0].len(), s.wakes), (6, 0));
        assert_eq!(s.nodes[&1].nodes(), [0, 1]);
        let mut s = fake(&[1, 2]);
        s.asleep = false;
        assert_eq!(balance_round(&mut s), None);
        let mut s = fake(&[1, 2]);
        s.nodes.clear();
        assert_eq!(balance_round(&mut s), None);
        assert!(s.counted.is_empty() && s.queued[1].is_empty());
    }

    #[test]
    fn new_request_goes_to_most_idle_node() {
        assert_eq!(
            choose_node(&[load(0, 1, 0, &[]), load(1, 6, 0, &[1]), load(2, 6, 0, &[])]),
            2
        );
    }

    #[test]
    fn shared_request_rotates_responsibility() {
        let mut r = RequestNodes::new(0);
        r.share_with(2);
        r.share_with(2);
        let seq: Vec<usize> = (0..4).map(|_| r.next_node()).collect();
        assert_eq!(seq, vec![0, 2, 0, 2]);
        r.move_to(0, 1);
        assert_eq!(r.nodes(), &[1, 2]);
    }

    #[test]
    fn rule_order_prefers_last_request() {
        let p = Policy::new(PolicyKind::Bobox2011, &presets::build("e7-4820").unwrap());
        let reqs = [3u64, 5];
        let got = walk(
            p.search(0),
            &mut Cursors::new(p.search(0)),
            &mut Rng::new(1),
            |pr| match pr.queue {
                QueueRef::Deferred(0) => resolve_deferred(pr.take, &reqs, Some(5)),
                _ => None,
            },
        );
        let ((req, end), probe) = got.unwrap();
        assert_eq!((req, end, probe.rule), (5, End::Oldest, 2));
        // Without a last request, rule 3 takes the oldest request.
        let got = walk(
            p.search(0),
            &mut Cursors::new(p.search(0)),
            &mut Rng::new(1),
            |pr| match pr.queue {
                QueueRef::Deferred(0) => resolve_deferred(pr.take, &reqs, None),
                _ => None,
            },
        );
        assert_eq!(got.unwrap().1.rule, 3);
        // Rule 4 only steals from threads of the same node.
        assert!(crate::search_reaches(p.search(0), QueueRef::Local(15)));
        assert!(!crate::search_reaches(p.search(0), QueueRef::Local(16)));
    }
}
