//! Probe searches: the order in which an idle worker looks at queues, and the one function that walks
//! a search. The runtime and the tests (and later the simulator) all call [`walk`], so they apply
//! exactly the same rules.

use serde::Serialize;

/// A worker thread. Worker `w` is the thread created for PU `w` (one thread per PU, §4.1).
pub type WorkerId = usize;
/// Requests are numbered sequentially from 0 in submission order; a smaller id is older.
pub type RequestId = u64;

/// A queue of the runtime, as named by a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum QueueRef {
    /// A deque owned by one worker: only its owner pushes; the owner takes either end, others
    /// take the oldest. LAS's per-core immediate queue, NLS's and Bobox's per-thread lists.
    Local(WorkerId),
    /// A locked deque any thread may push to: the queues of load-balancing-queues.txt, FIFO+RR's
    /// per-thread lists and NLS's shared deferred queue.
    Shared(usize),
    /// A locked priority queue (by request id) of per-request deques: LAS's per-group deferred
    /// queue (§4.1), Bobox-2011's per-node request lists (§5.1).
    Deferred(usize),
}

/// Which end of a deque.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum End {
    /// The task pushed last.
    Youngest,
    /// The task pushed first.
    Oldest,
}

/// What to take from a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Take {
    /// From a plain deque (`Local`/`Shared`).
    Plain(End),
    /// LAS rule 3: the youngest task of the oldest request.
    OldestRequestYoungest,
    /// LAS rule 4: the oldest task of the second oldest request, or of the oldest when the queue
    /// holds only one request.
    SecondOldestRequestOldest,
    /// Bobox rule 2: the oldest task of the request this worker last ran a task of.
    LastRequestOldest,
    /// Bobox rule 3: the oldest task of the oldest request.
    OldestRequestOldest,
}

/// One queue to probe, and which rule of the policy it implements (for counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Probe {
    pub queue: QueueRef,
    pub take: Take,
    /// The rule number of the policy (1-based, as in the paper), counted per worker.
    pub rule: u8,
}

/// One step of a search.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Step {
    /// Probe these queues in this order.
    Scan(Vec<Probe>),
    /// Probe these queues in a resumable round robin: the scan starts after the queue where the
    /// previous successful scan of this step ended (LAS rule 5, FIFO+RR stealing).
    RoundRobin(Vec<Probe>),
    /// Probe these queues starting at a random one (random work stealing).
    Random(Vec<Probe>),
}

impl Step {
    /// The queues this step probes.
    pub fn probes(&self) -> &[Probe] {
        match self {
            Step::Scan(p) | Step::RoundRobin(p) | Step::Random(p) => p,
        }
    }
}

/// Per-worker state of a search: the round-robin cursor of each step.
#[derive(Clone, Debug, Default)]
pub struct Cursors {
    next: Vec<usize>,
}

impl Cursors {
    /// Cursors for a search.
    #[inline]
    pub fn new(search: &[Step]) -> Self {
        Cursors {
            next: vec![0; search.len()],
        }
    }
}

/// A tiny xorshift generator for random stealing; deterministic for a given seed so the
/// simulator can replay runs.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (0 is replaced by a fixed odd constant).
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }
    /// Next value.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// A value in `0..n` (`n > 0`).
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Walks a search in order and returns the first result `try_take` yields, with the probe that
/// yielded it. `try_take` is the runtime's pop, or a lookup in a view of queue state.
pub fn walk<T>(
    search: &[Step],
    cursors: &mut Cursors,
    rng: &mut Rng,
    mut try_take: impl FnMut(&Probe) -> Option<T>,
) -> Option<(T, Probe)> {
    for (si, step) in search.iter().enumerate() {
        let probes = step.probes();
        let n = probes.len();
        if n == 0 {
            continue;
        }
        let start = match step {
            Step::Scan(_) => 0,
            Step::RoundRobin(_) => cursors.next[si].min(n - 1),
            Step::Random(_) => rng.below(n),
        };
        // Probe start..n, then 0..start, without a division per probe.
        for i in (start..n).chain(0..start) {
            if let Some(t) = try_take(&probes[i]) {
                if let Step::RoundRobin(_) = step {
                    cursors.next[si] = if i + 1 == n { 0 } else { i + 1 };
                }
                return Some((t, probes[i]));
            }
        }
    }
    None
}

/// The one pop a probe prescribes to worker `w`: which deque, and which end. The runtime's
/// `try_take` (over crossbeam deques and its locked queues) and the simulator's `take` (over
/// plain ones) both carry out exactly this (the mechanics written once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pop {
    /// The worker's own local deque at the end it pushes to (LIFO).
    OwnYoungest,
    /// Worker `v`'s local deque at its oldest end: a steal (or the worker's own, when a
    /// policy asks for its oldest task).
    LocalOldest(WorkerId),
    /// Shared deque `i` at `end` (a request-ordered take on a plain deque takes its oldest).
    Shared(usize, End),
    /// Deferred queue `i`, the task [`resolve_deferred`] names.
    Deferred(usize, Take),
}

/// [`Pop`] of probe `p` by worker `w`.
#[inline]
pub fn pop_of(w: WorkerId, p: &Probe) -> Pop {
    match (p.queue, p.take) {
        (QueueRef::Local(v), Take::Plain(End::Youngest)) if v == w => Pop::OwnYoungest,
        (QueueRef::Local(v), _) => Pop::LocalOldest(v),
        (QueueRef::Shared(i), Take::Plain(end)) => Pop::Shared(i, end),
        (QueueRef::Shared(i), _) => Pop::Shared(i, End::Oldest),
        (QueueRef::Deferred(i), take) => Pop::Deferred(i, take),
    }
}

/// Resolves a [`Take`] on a deferred queue holding tasks of `requests` (ascending ids, each with
/// at least one task): which request, and which end of its deque.
#[inline]
pub fn resolve_deferred(
    take: Take,
    requests: &[RequestId],
    last_request: Option<RequestId>,
) -> Option<(RequestId, End)> {
    let oldest = *requests.first()?;
    match take {
        Take::Plain(end) => Some((oldest, end)),
        Take::OldestRequestYoungest => Some((oldest, End::Youngest)),
        Take::SecondOldestRequestOldest => Some((*requests.get(1).unwrap_or(&oldest), End::Oldest)),
        Take::LastRequestOldest => {
            let last = last_request?;
            requests
                .binary_search(&last)
                .ok()
                .map(|_| (last, End::Oldest))
        }
        Take::OldestRequestOldest => Some((oldest, End::Oldest)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_pops_one_end_of_one_deque() {
        let probe = |queue, take| Probe {
            queue,
            take,
            rule: 1,
        };
        let cases = [
            (
                QueueRef::Local(3),
                Take::Plain(End::Youngest),
                Pop::OwnYoungest,
            ),
            (
                QueueRef::Local(3),
                Take::Plain(End::Oldest),
                Pop::LocalOldest(3),
            ),
            (
                QueueRef::Local(5),
                Take::Plain(End::Youngest),
                Pop::LocalOldest(5),
            ),
            (
                QueueRef::Local(5),
                Take::OldestRequestOldest,
                Pop::LocalOldest(5),
            ),
            (
                QueueRef::Shared(1),
                Take::Plain(End::Youngest),
                Pop::Shared(1, End::Youngest),
            ),
            (
                QueueRef::Shared(1),
                Take::Plain(End::Oldest),
                Pop::Shared(1, End::Oldest),
            ),
            (
                QueueRef::Shared(2),
                Take::LastRequestOldest,
                Pop::Shared(2, End::Oldest),
            ),
            (
                QueueRef::Deferred(0),
                Take::SecondOldestRequestOldest,
                Pop::Deferred(0, Take::SecondOldestRequestOldest),
            ),
        ];
        for (q, t, want) in cases {
            assert_eq!(pop_of(3, &probe(q, t)), want, "{q:?} {t:?} by worker 3");
        }
    }

    fn p(i: usize) -> Probe {
        Probe {
            queue: QueueRef::Shared(i),
            take: Take::Plain(End::Oldest),
            rule: 5,
        }
    }

    #[test]
    fn round_robin_resumes_after_last_found() {
        let search = vec![Step::RoundRobin(vec![p(0), p(1), p(2)])];
        let mut c = Cursors::new(&search);
        let mut rng = Rng::new(1);
        let full = [true, true, true];
        let mut seen = vec![];
        for _ in 0..4 {
            let (i, _) = walk(&search, &mut c, &mut rng, |pr| match pr.queue {
                QueueRef::Shared(i) if full[i] => Some(i),
                _ => None,
            })
            .unwrap();
            seen.push(i);
        }
        assert_eq!(seen, vec![0, 1, 2, 0]);
    }

    #[test]
    fn deferred_takes() {
        let r = [3, 5, 9];
        assert_eq!(
            resolve_deferred(Take::OldestRequestYoungest, &r, None),
            Some((3, End::Youngest))
        );
        assert_eq!(
            resolve_deferred(Take::SecondOldestRequestOldest, &r, None),
            Some((5, End::Oldest))
        );
        assert_eq!(
            resolve_deferred(Take::SecondOldestRequestOldest, &r[..1], None),
            Some((3, End::Oldest))
        );
        assert_eq!(
            resolve_deferred(Take::LastRequestOldest, &r, Some(9)),
            Some((9, End::Oldest))
        );
        assert_eq!(resolve_deferred(Take::LastRequestOldest, &r, Some(4)), None);
        assert_eq!(resolve_deferred(Take::OldestRequestOldest, &[], None), None);
    }
}
