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

/// A priority queue by request id of per-request deques. Entries are kept sorted by id, with no
/// empty deque: `requests` is exactly the set of requests with queued tasks.
pub(crate) struct DeferredQueue<T> {
    by_request: Mutex<Vec<(RequestId, VecDeque<T>)>>,
    len: AtomicUsize,
}

impl<T> DeferredQueue<T> {
    pub(crate) fn new() -> Self {
        DeferredQueue {
            by_request: Mutex::new(Vec::new()),
            len: AtomicUsize::new(0),
        }
    }

    pub(crate) fn push(&self, request: RequestId, t: T) {
        let mut v = lock(&self.by_request);
        match v.binary_search_by_key(&request, |e| e.0) {
            Ok(i) => v[i].1.push_back(t),
            Err(i) => v.insert(i, (request, VecDeque::from([t]))),
        }
        // Relaxed: see SharedQueue::push.
        self.len.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes a task as [`resolve_deferred`] prescribes for `take`.
    pub(crate) fn take(&self, take: Take, last_request: Option<RequestId>) -> Option<T> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut v = lock(&self.by_request);
        let ids: Vec<RequestId> = if v.len() <= 2 {
            v.iter().map(|e| e.0).collect()
        } else {
            // Only the two oldest and `last_request` matter to any Take.
            let mut ids: Vec<RequestId> = v.iter().take(2).map(|e| e.0).collect();
            if let Some(l) = last_request {
                if v.binary_search_by_key(&l, |e| e.0).is_ok() && !ids.contains(&l) {
                    ids.push(l);
                }
            }
            ids
        };
        let (request, end) = resolve_deferred(take, &ids, last_request)?;
        let i = v.binary_search_by_key(&request, |e| e.0).ok()?;
        let t = match end {
            End::Oldest => v[i].1.pop_front(),
            End::Youngest => v[i].1.pop_back(),
        };
        if v[i].1.is_empty() {
            v.remove(i);
        }
        if t.is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        t
    }

    /// Removes every queued task of a request (Bobox load balancer: moving a request).
    pub(crate) fn remove_request(&self, request: RequestId) -> VecDeque<T> {
        let mut v = lock(&self.by_request);
        match v.binary_search_by_key(&request, |e| e.0) {
            Ok(i) => {
                let (_, d) = v.remove(i);
                self.len.fetch_sub(d.len(), Ordering::Relaxed);
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
        match v.binary_search_by_key(&request, |e| e.0) {
            Ok(i) => v[i].1.append(&mut tasks),
            Err(i) => v.insert(i, (request, tasks)),
        }
        self.len.fetch_add(n, Ordering::Relaxed);
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
