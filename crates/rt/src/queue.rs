//! The three queue structures of the runtime (named by [`QueueRef`](nearflow_policy::QueueRef)).
//!
//! - `Local`: a per-core immediate queue (LAS §4.1) or per-thread immediate list (NLS, Bobox).
//!   Only its owner pushes, so it is a Chase–Lev deque (`crossbeam-deque`): the owner pops the
//!   youngest task without a lock, others steal the oldest. It is created in [`crate::worker`].
//! - [`SharedQueue`]: a locked deque any thread may push to (the queues of
//!   load-balancing-queues.txt, which its author built as Java blocking queues; FIFO+RR's lists).
//! - [`DeferredQueue`]: a priority queue by request id of per-request deques (LAS §4.1; Bobox's
//!   per-node request lists, §5.1), behind one lock.
//!
//! Both locked queues keep an atomic length so an idle worker can skip an empty queue without
//! taking its lock. The length is updated under the lock; readers use it only as a hint, except in
//! the sleep protocol, where it is read after a `SeqCst` fence (see `sleep/README.md`).

use std::collections::VecDeque;

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
        // Relaxed: the lock orders queue contents; waking pairs this store with the SeqCst fence
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

/// A priority queue by request id of per-request deques, sorted by id. A deque that drains stays
/// in place (a fan-out drains and refills its request's deque constantly); empty entries are
/// skipped when choosing a request and pruned when more than [`EMPTY_KEPT`] have gathered.
pub(crate) struct DeferredQueue<T> {
    by_request: Mutex<ByRequest<T>>,
    len: AtomicUsize,
}

struct ByRequest<T> {
    /// Ascending by id; a deque may be empty. The first two entries are stored inline, beside the
    /// lock: with one or two requests per group (the common case) a push or take touches the
    /// lock's cache lines and the task buffer only, which matters when a producer and a consumer
    /// hand tasks over through this queue at high rate.
    entries: SmallVec<[(RequestId, VecDeque<T>); 2]>,
    /// Number of empty deques in `entries`.
    empty: usize,
    /// Tasks in all deques (published to `DeferredQueue::len` with a store under the lock, as
    /// `SharedQueue` does: a read-modify-write beside the lock cost a fifth of a deferred spawn).
    total: usize,
}

impl<T> ByRequest<T> {
    fn find(&self, request: RequestId) -> Result<usize, usize> {
        self.entries.binary_search_by_key(&request, |e| e.0)
    }
    /// The deque of `request`, created if needed.
    fn deque(&mut self, request: RequestId) -> &mut VecDeque<T> {
        let i = match self.find(request) {
            Ok(i) => {
                if self.entries[i].1.is_empty() {
                    self.empty -= 1;
                }
                i
            }
            Err(i) => {
                self.entries.insert(i, (request, VecDeque::new()));
                i
            }
        };
        &mut self.entries[i].1
    }
    /// Notes that entry `i` may have become empty.
    fn drained(&mut self, i: usize) {
        if self.entries[i].1.is_empty() {
            self.empty += 1;
            if self.empty > EMPTY_KEPT {
                self.entries.retain(|e| !e.1.is_empty());
                self.empty = 0;
            }
        }
    }
}

/// Empty per-request deques kept before they are pruned.
const EMPTY_KEPT: usize = 8;

impl<T> DeferredQueue<T> {
    pub(crate) fn new() -> Self {
        DeferredQueue {
            by_request: Mutex::new(ByRequest {
                entries: SmallVec::new(),
                empty: 0,
                total: 0,
            }),
            len: AtomicUsize::new(0),
        }
    }

    pub(crate) fn push(&self, request: RequestId, t: T) {
        let mut v = lock(&self.by_request);
        v.deque(request).push_back(t);
        v.total += 1;
        // Relaxed: see SharedQueue::push.
        self.len.store(v.total, Ordering::Relaxed);
    }

    /// Takes a task as [`resolve_deferred`] prescribes for `take`.
    pub(crate) fn take(&self, take: Take, last_request: Option<RequestId>) -> Option<T> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut v = lock(&self.by_request);
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
            v.total -= 1;
            // Relaxed: see SharedQueue::push.
            self.len.store(v.total, Ordering::Relaxed);
        }
        t
    }

    /// Removes every queued task of a request (Bobox load balancer: moving a request).
    pub(crate) fn remove_request(&self, request: RequestId) -> VecDeque<T> {
        let mut v = lock(&self.by_request);
        match v.find(request) {
            Ok(i) => {
                let d = std::mem::take(&mut v.entries[i].1);
                if !d.is_empty() {
                    v.drained(i);
                }
                v.total -= d.len();
                // Relaxed: see SharedQueue::push.
                self.len.store(v.total, Ordering::Relaxed);
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
        let n = tasks.len();
        v.deque(request).append(&mut tasks);
        v.total += n;
        // Relaxed: see SharedQueue::push.
        self.len.store(v.total, Ordering::Relaxed);
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
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
