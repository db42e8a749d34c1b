//! The baselines: NLS (LAS paper §6.1), FIFO+RR (Bobox paper §6) and the three queue designs of
//! `load-balancing-queues.txt` §II (central, per-thread, random stealing).

use nearflow_topo::Machine;

use crate::search::{End, Probe, QueueRef, Step, Take};
use crate::{Place, Policy, PolicyKind, RootPlace, Services, SleepLayout, SleepScheme};

fn probe(queue: QueueRef, end: End, rule: u8) -> Probe {
    Probe {
        queue,
        take: Take::Plain(end),
        rule,
    }
}

/// Workers other than `w`, in cyclic order after `w`.
fn others(w: usize, n: usize) -> impl Iterator<Item = usize> {
    (1..n).map(move |k| (w + k) % n)
}

/// A policy skeleton with one sleep domain holding every worker.
fn base(kind: PolicyKind, m: &Machine) -> Policy {
    let workers = m.pu_count();
    Policy {
        kind,
        workers,
        local_queues: 0,
        shared_queues: 0,
        deferred_queues: 0,
        searches: Vec::new(),
        place_immediate: Vec::new(),
        place_deferred: Vec::new(),
        root: RootPlace::Queue(QueueRef::Shared(0)),
        sleep: SleepLayout::from_domains(
            SleepScheme::Domains,
            vec![(0..workers).collect()],
            workers,
        ),
        wake_local: Vec::new(),
        wake_shared: Vec::new(),
        wake_deferred: Vec::new(),
        node_of_worker: (0..workers).map(|w| m.node_of(w)).collect(),
        services: Services::default(),
        homes: Default::default(),
    }
}

/// NLS (§6.1): per-thread immediate queues, one shared FIFO of deferred tasks. Order: (1) the
/// latest immediate task of the own queue; (2) the oldest deferred task of the shared queue;
/// (3) the oldest immediate task of another thread (threads in cyclic order after self).
pub(crate) fn nls(m: &Machine) -> Policy {
    let mut p = base(PolicyKind::Nls, m);
    let n = p.workers;
    p.local_queues = n;
    p.shared_queues = 1;
    p.searches = (0..n)
        .map(|w| {
            vec![
                Step::Scan(vec![probe(QueueRef::Local(w), End::Youngest, 1)]),
                Step::Scan(vec![probe(QueueRef::Shared(0), End::Oldest, 2)]),
                Step::Scan(
                    others(w, n)
                        .map(|v| probe(QueueRef::Local(v), End::Oldest, 3))
                        .collect(),
                ),
            ]
        })
        .collect();
    p.place_immediate = (0..n).map(|w| Place::Queue(QueueRef::Local(w))).collect();
    p.place_deferred = vec![Place::Queue(QueueRef::Shared(0)); n];
    p.wake_local = vec![vec![0]; n];
    p.wake_shared = vec![vec![0]];
    p
}

/// FIFO+RR (Bobox paper §6): one FIFO list per thread, no immediate/deferred distinction; an idle
/// thread steals from the others in round robin; one global counting semaphore for sleeping.
/// Requests are dealt to threads in round robin.
pub(crate) fn fifo_rr(m: &Machine) -> Policy {
    let mut p = own_queue_and_steal(PolicyKind::FifoRr, m, End::Oldest, Step::RoundRobin);
    p.sleep.scheme = SleepScheme::CountingSemaphore;
    p
}

/// One locked deque per worker, fed by its owner's spawns (requests from outside dealt in round
/// robin); the owner takes from `own_end`, a thief the oldest task of the others, probed by
/// `steal` (round robin or random). Shared by FIFO+RR and random stealing.
fn own_queue_and_steal(
    kind: PolicyKind,
    m: &Machine,
    own_end: End,
    steal: fn(Vec<Probe>) -> Step,
) -> Policy {
    let mut p = base(kind, m);
    let n = p.workers;
    p.shared_queues = n;
    p.searches = (0..n)
        .map(|w| {
            let victims = others(w, n)
                .map(|v| probe(QueueRef::Shared(v), End::Oldest, 2))
                .collect();
            vec![
                Step::Scan(vec![probe(QueueRef::Shared(w), own_end, 1)]),
                steal(victims),
            ]
        })
        .collect();
    p.place_immediate = (0..n).map(|w| Place::Queue(QueueRef::Shared(w))).collect();
    p.place_deferred = p.place_immediate.clone();
    p.root = RootPlace::RoundRobinShared { count: n };
    p.wake_shared = vec![vec![0]; n];
    p
}

/// Centralized queue (§II.A): one locked FIFO shared by all workers.
pub(crate) fn central(m: &Machine) -> Policy {
    let mut p = base(PolicyKind::Central, m);
    let n = p.workers;
    p.shared_queues = 1;
    p.searches = vec![vec![Step::Scan(vec![probe(QueueRef::Shared(0), End::Oldest, 1)])]; n];
    p.place_immediate = vec![Place::Queue(QueueRef::Shared(0)); n];
    p.place_deferred = p.place_immediate.clone();
    p.wake_shared = vec![vec![0]];
    p
}

/// Multi queue without stealing (§II.B): a locked FIFO per worker, fed in round robin by every
/// spawner; a worker only takes from its own queue, so a push wakes exactly its owner.
pub(crate) fn per_thread(m: &Machine) -> Policy {
    let mut p = base(PolicyKind::PerThread, m);
    let n = p.workers;
    p.shared_queues = n;
    p.searches = (0..n)
        .map(|w| vec![Step::Scan(vec![probe(QueueRef::Shared(w), End::Oldest, 1)])])
        .collect();
    p.place_immediate = vec![Place::RoundRobinShared { count: n }; n];
    p.place_deferred = p.place_immediate.clone();
    p.root = RootPlace::RoundRobinShared { count: n };
    p.sleep = SleepLayout::from_domains(SleepScheme::Domains, (0..n).map(|w| vec![w]).collect(), n);
    p.wake_shared = (0..n).map(|w| vec![w]).collect();
    p
}

/// StreamMap's mapped execution (`streammap-cache-topology-mapping.txt` §II.A, §IV.A): each
/// worker is one thread bound to its PU with one queue that only it takes from — no stealing.
/// A task spawned without a home stays on its spawner's worker (in System S, an operator without
/// a Threaded Port runs on the thread that delivers its input); a task homed at a PU
/// ([`crate::Home::pu`]) goes to that PU's worker, which is how a mapping pins each thread's
/// operators. Requests from outside are dealt in round robin.
pub(crate) fn pinned(m: &Machine) -> Policy {
    let mut p = per_thread(m);
    p.kind = PolicyKind::Pinned;
    let n = p.workers;
    p.place_immediate = (0..n).map(|w| Place::Queue(QueueRef::Shared(w))).collect();
    p.place_deferred = p.place_immediate.clone();
    p
}

/// Work stealing with random victims (§II.C): a locked deque per worker; spawns go to the
/// spawner's own deque, the owner takes the youngest task, a thief the oldest task of a victim
/// chosen at random. Requests from outside are dealt in round robin.
pub(crate) fn random_steal(m: &Machine) -> Policy {
    own_queue_and_steal(PolicyKind::RandomSteal, m, End::Youngest, Step::Random)
}

#[cfg(test)]
mod tests {
    use nearflow_topo::presets;

    use crate::search::{walk, Cursors, QueueRef, Rng};
    use crate::{Policy, PolicyKind};

    /// First queue each policy's worker 0 takes from when every queue is non-empty.
    #[test]
    fn first_choice_is_the_own_queue() {
        let m = presets::build("e5310-smp").unwrap();
        let expect = [
            (PolicyKind::Nls, QueueRef::Local(0)),
            (PolicyKind::FifoRr, QueueRef::Shared(0)),
            (PolicyKind::Central, QueueRef::Shared(0)),
            (PolicyKind::PerThread, QueueRef::Shared(0)),
            (PolicyKind::RandomSteal, QueueRef::Shared(0)),
        ];
        for (kind, q) in expect {
            let p = Policy::new(kind, &m);
            let got = walk(
                p.search(0),
                &mut Cursors::new(p.search(0)),
                &mut Rng::new(3),
                |_| Some(()),
            );
            assert_eq!(got.unwrap().1.queue, q, "{kind}");
        }
    }

    #[test]
    fn nls_order() {
        let m = presets::build("e5310-smp").unwrap();
        let p = Policy::new(PolicyKind::Nls, &m);
        // Only another thread's queue and the shared deferred queue are non-empty: deferred first.
        let got = walk(
            p.search(0),
            &mut Cursors::new(p.search(0)),
            &mut Rng::new(1),
            |pr| matches!(pr.queue, QueueRef::Local(3) | QueueRef::Shared(0)).then_some(()),
        );
        assert_eq!(got.unwrap().1.rule, 2);
        let got = walk(
            p.search(0),
            &mut Cursors::new(p.search(0)),
            &mut Rng::new(1),
            |pr| matches!(pr.queue, QueueRef::Local(3)).then_some(()),
        );
        assert_eq!(got.unwrap().1.rule, 3);
    }

    #[test]
    fn per_thread_never_steals() {
        let m = presets::build("e5310-smp").unwrap();
        let p = Policy::new(PolicyKind::PerThread, &m);
        let got = walk(
            p.search(0),
            &mut Cursors::new(p.search(0)),
            &mut Rng::new(1),
            |pr| (pr.queue != QueueRef::Shared(0)).then_some(()),
        );
        assert!(got.is_none());
        assert_eq!(p.wake_order(QueueRef::Shared(5)), &[5]);
    }

    #[test]
    fn random_steal_spreads_victims() {
        let m = presets::build("e5310-smp").unwrap();
        let p = Policy::new(PolicyKind::RandomSteal, &m);
        let mut rng = Rng::new(99);
        let mut victims = std::collections::HashSet::new();
        for _ in 0..200 {
            let got = walk(
                p.search(0),
                &mut Cursors::new(p.search(0)),
                &mut rng,
                |pr| (pr.queue != QueueRef::Shared(0)).then_some(()),
            );
            victims.insert(got.unwrap().1.queue);
        }
        assert_eq!(victims.len(), 7, "every other worker is a victim sometimes");
    }
}
