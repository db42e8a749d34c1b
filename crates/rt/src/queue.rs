//! The three queue structures of the runtime (named by [`QueueRef`](nearflow_policy::QueueRef)).
//!
//! - `Local`: a per-core immediate queue (LAS §4.1) or per-thread immediate list (NLS, Bobox).
//!   Only its owner pushes, so it is a Chase–Lev deque (`crossbeam-deque`): the owner pops the
//!   youngest task without a lock, others steal the oldest. It is created in [`crate::worker`].
//! - [`SharedQueue`]: a locked deque any thread may push to (the queues of
//!   load-balancing-queues.txt, which its author built as Java blocking queues; FIFO+RR's lists).
//! - [`DeferredQueue`]: a priority queue by request id of per-request deques (LAS §4.1; Bobox's
//!   per-node request lists, §5.1), behind one lock, fed through a lock-free inbox.
//!
//! Both keep an atomic length (and the deferred queue its inbox's indices) so an idle worker can
//! skip an empty queue without taking its lock. Readers use them only as a hint, except in the
//! sleep protocol, where they are read after its barrier (see `sleep/README.md`).

use std::collections::VecDeque;

use crossbeam_deque::{Injector, Steal};
use crossbeam_utils::CachePadded;
use nearflow_policy::{resolve_deferred, End, RequestId, Take};
use smallvec::SmallVec;

use crate::sync::{lock, AtomicUsize, Mutex, Ordering};

/// A locked deque.
pub(crate) struct SharedQueue<T> {
    items: Mutex<VecDeque<T>>,
    len: AtomicUsize,
}

impl<T> SharedQueue<T> {
    pub(crate) fn new() -> Self {
        SharedQueue {
            items: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
        }
    }

    pub(crate) fn push(&self, t: T) {
        let mut q = lock(&self.items);
        q.push_back(t);
        // Relaxed: the lock orders queue contents; waking pairs this store with the light barrier
        // in `Sleep::wake` (see sleep/README.md).
        self.len.store(q.len(), Ordering::Relaxed);
    }

    pub(crate) fn pop(&self, end: End) -> Option<T> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut q = lock(&self.items);
        let t = match end {
            End::Oldest => q.pop_front(),
            End::Youngest => q.pop_back(),
        };
        self.len.store(q.len(), Ordering::Relaxed);
        t
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

/// A priority queue by request id of per-request deques, sorted by id (LAS §4.1), fed through a
/// lock-free inbox.
///
/// **Inbox.** A push does not take the lock: it appends `(request, task)` to `inbox`, a
/// lock-free FIFO (`crossbeam_deque::Injector`). A take locks, first moves everything in the
/// inbox into the per-request deques, in inbox order, then chooses its task. The tasks of a
/// request therefore stay in push order and a take sees every push that completed before it, as
/// with one lock for both; but a producer spawning deferred tasks in a loop no longer hands the
/// lock back and forth with the workers taking them (the LAS fan-out spent a fifth of its time in
/// the lock's contended path and futex calls, `perf record -e cpu-clock`, docs/results.md).
///
/// A deque that drains stays in place (a fan-out drains and refills its request's deque
/// constantly); empty entries are skipped when choosing a request and pruned once more than
/// [`EMPTY_KEPT`] entries have gathered.
pub(crate) struct DeferredQueue<T> {
    inbox: Injector<(RequestId, T)>,
    by_request: CachePadded<Mutex<ByRequest<T>>>,
    /// Tasks in `by_request`; written only under the lock (so a Relaxed load under the lock is
    /// exact), read without it as a hint.
    sorted: AtomicUsize,
}

struct ByRequest<T> {
    /// Ascending by id; a deque may be empty. The first entry is stored inline.
    entries: SmallVec<[(RequestId, VecDeque<T>); 1]>,
}

impl<T> ByRequest<T> {
    fn find(&self, request: RequestId) -> Result<usize, usize> {
        match self.entries.first() {
            // The common case: one request, or the oldest.
            Some(e) if e.0 == request => Ok(0),
            _ => self.entries.binary_search_by_key(&request, |e| e.0),
        }
    }
    /// The deque of `request`, created if needed.
    fn deque(&mut self, request: RequestId) -> &mut VecDeque<T> {
        let i = match self.find(request) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (request, VecDeque::new()));
                i
            }
        };
        &mut self.entries[i].1
    }
    /// Notes that entry `i` may have become empty.
    fn drained(&mut self, i: usize) {
        if self.entries.len() > EMPTY_KEPT && self.entries[i].1.is_empty() {
            self.entries.retain(|e| !e.1.is_empty());
        }
    }
}

/// Entries (empty ones included) kept before empty ones are pruned.
const EMPTY_KEPT: usize = 8;

impl<T> DeferredQueue<T> {
    pub(crate) fn new() -> Self {
        DeferredQueue {
            inbox: Injector::new(),
            by_request: CachePadded::new(Mutex::new(ByRequest {
                entries: SmallVec::new(),
            })),
            sorted: AtomicUsize::new(0),
        }
    }

    /// Queues a task of `request` (lock-free).
    pub(crate) fn push(&self, request: RequestId, t: T) {
        self.inbox.push((request, t));
    }

    /// Moves the inbox into the per-request deques, keeping its order; under the lock.
    fn sort_inbox(&self, v: &mut ByRequest<T>) {
        if self.inbox.is_empty() {
            return;
        }
        let mut n = 0;
        loop {
            match self.inbox.steal() {
                Steal::Success((request, t)) => {
                    v.deque(request).push_back(t);
                    n += 1;
                }
                Steal::Empty => break,
                Steal::Retry => std::hint::spin_loop(),
            }
        }
        if n > 0 {
            self.add_sorted(n as isize);
        }
    }

    /// Changes `sorted` by `n`; under the lock.
    fn add_sorted(&self, n: isize) {
        // Relaxed: written only under the lock; readers without it take it as a hint, or read it
        // after the sleep protocol's barrier (sleep/README.md).
        let now = self.sorted.load(Ordering::Relaxed).wrapping_add_signed(n);
        self.sorted.store(now, Ordering::Relaxed);
    }

    /// Whether no task is queued (a hint, like `len`).
    pub(crate) fn is_empty(&self) -> bool {
        self.sorted.load(Ordering::Relaxed) == 0 && self.inbox.is_empty()
    }

    /// Takes a task as [`resolve_deferred`] prescribes for `take`.
    pub(crate) fn take(&self, take: Take, last_request: Option<RequestId>) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut v = lock(&self.by_request);
        self.sort_inbox(&mut v);
        // Only the two oldest requests and `last_request` matter to any Take: pass those, in
        // ascending order, without allocating.
        let mut ids = [0; 3];
        let mut n = 0;
        for e in v.entries.iter().filter(|e| !e.1.is_empty()).take(2) {
            ids[n] = e.0;
            n += 1;
        }
        if let Some(l) = last_request {
            if n == 2 && l > ids[1] && v.find(l).is_ok_and(|i| !v.entries[i].1.is_empty()) {
                ids[n] = l;
                n += 1;
            }
        }
        let (request, end) = resolve_deferred(take, &ids[..n], last_request)?;
        let i = v.find(request).ok()?;
        let d = &mut v.entries[i].1;
        let t = match end {
            End::Oldest => d.pop_front(),
            End::Youngest => d.pop_back(),
        };
        v.drained(i);
        if t.is_some() {
            self.add_sorted(-1);
        }
        t
    }

    /// Removes every queued task of a request (Bobox load balancer: moving a request).
    pub(crate) fn remove_request(&self, request: RequestId) -> VecDeque<T> {
        let mut v = lock(&self.by_request);
        self.sort_inbox(&mut v);
        match v.find(request) {
            Ok(i) => {
                let d = std::mem::take(&mut v.entries[i].1);
                v.drained(i);
                self.add_sorted(-(d.len() as isize));
                d
            }
            Err(_) => VecDeque::new(),
        }
    }

    /// Appends tasks of a request, keeping their order.
    pub(crate) fn append_request(&self, request: RequestId, mut tasks: VecDeque<T>) {
        if tasks.is_empty() {
            return;
        }
        let mut v = lock(&self.by_request);
        self.sort_inbox(&mut v);
        let n = tasks.len();
        v.deque(request).append(&mut tasks);
        self.add_sorted(n as isize);
    }

    /// Tasks queued (a hint: a push or take may be under way).
    pub(crate) fn len(&self) -> usize {
        self.sorted.load(Ordering::Relaxed) + self.inbox.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn deferred_queue_orders_by_request() {
        let q = DeferredQueue::new();
        for (r, t) in [(7, 'a'), (3, 'b'), (7, 'c'), (3, 'd'), (9, 'e')] {
            q.push(r, t);
        }
        assert_eq!(q.len(), 5);
        // LAS rule 3: youngest of oldest request (3) = 'd'.
        assert_eq!(q.take(Take::OldestRequestYoungest, None), Some('d'));
        // LAS rule 4: oldest of second oldest request (7) = 'a'.
        assert_eq!(q.take(Take::SecondOldestRequestOldest, None), Some('a'));
        // Bobox rule 2 with last request 9.
        assert_eq!(q.take(Take::LastRequestOldest, Some(9)), Some('e'));
        assert_eq!(q.take(Take::OldestRequestOldest, None), Some('b'));
        let moved = q.remove_request(7);
        assert_eq!(moved, VecDeque::from(['c']));
        assert_eq!(q.len(), 0);
        assert_eq!(q.take(Take::OldestRequestOldest, None), None);
        q.append_request(4, moved);
        assert_eq!(q.take(Take::SecondOldestRequestOldest, None), Some('c'));
    }

    /// Producers push through the inbox while consumers take: every task comes out once, and the
    /// tasks of each request leave in push order when taken from the oldest end.
    #[test]
    fn deferred_queue_concurrent_pushes_keep_order() {
        use std::sync::Arc;
        const PER: u64 = if cfg!(miri) { 50 } else { 20_000 };
        let q = Arc::new(DeferredQueue::new());
        let producers: Vec<_> = (0..3u64)
            .map(|r| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..PER {
                        q.push(r, (r, i));
                    }
                })
            })
            .collect();
        let mut last = [None::<u64>; 3];
        let mut got = 0;
        while got < 3 * PER {
            match q.take(Take::OldestRequestOldest, None) {
                Some((r, i)) => {
                    let prev = last[r as usize].replace(i);
                    assert!(
                        prev.is_none_or(|p| p < i),
                        "request {r}: {prev:?} before {i}"
                    );
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(q.len(), 0);
        assert!(q.is_empty());
        assert_eq!(last, [Some(PER - 1); 3]);
    }

    #[test]
    fn shared_queue_ends() {
        let q = SharedQueue::new();
        q.push(1);
        q.push(2);
        q.push(3);
        assert_eq!(q.pop(End::Youngest), Some(3));
        assert_eq!(q.pop(End::Oldest), Some(1));
        assert_eq!(q.len(), 1);
    }
}
