//! The three queue structures of the runtime (named by [`QueueRef`](nearflow_policy::QueueRef)).
//!
//! - `Local`: a per-core immediate queue (LAS §4.1) or per-thread immediate list (NLS, Bobox).
//!   Only its owner pushes, so it is a Chase–Lev deque (`crossbeam-deque`): the owner pops the
//!   youngest task without a lock, others steal the oldest. It is created in [`crate::worker`].
//! - [`SharedQueue`]: a locked deque any thread may push to (the queues of
//!   load-balancing-queues.txt, which its author built as Java blocking queues; FIFO+RR's lists).
//! - [`DeferredQueue`]: a priority queue by request id of per-request deques (LAS §4.1; Bobox's
//!   per-node request lists, §5.1), behind one lock, fed through one single-producer ring per
//!   member worker and a lock-free inbox for everybody else.
//!
//! Both keep an atomic length (and the deferred queue its inbox's and rings' indices) so an idle
//! worker can skip an empty queue without taking its lock. Readers use them only as a hint, except in the
//! sleep protocol, where they are read after its barrier (see `sleep/README.md`).

use std::collections::VecDeque;

use crossbeam_deque::{Injector, Steal};
use crossbeam_utils::CachePadded;
use nearflow_policy::{resolve_deferred, End, RequestId, Take};
use smallvec::SmallVec;

use crate::ring::Ring;
use crate::sync::{lock, os, AtomicUsize, Mutex, Ordering, QueueLock};

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

/// A priority queue by request id of per-request deques, sorted by id (LAS §4.1), behind one
/// lock, fed without taking it.
///
/// **Rings and inbox.** A push does not take the lock. A *member* of the queue (a worker whose
/// policy puts its deferred spawns here: the workers of a LAS core group) appends
/// `(request, task)` to its own [`Ring`], a bounded single-producer ring: two plain stores, no
/// read-modify-write. Any other thread (a request's root, a spawn homed elsewhere) appends to
/// `inbox`, a lock-free FIFO (`crossbeam_deque::Injector`). A take locks, first moves the inbox
/// and then every ring into the per-request deques, each in its own order, then chooses its task.
/// So the tasks one thread pushes stay in push order, and a take sees every push that completed
/// before it, as with one lock for both; tasks that *different* threads pushed since the last
/// take are sorted source by source (the inbox's first, then ring by ring), which is the one
/// order the lock would not have fixed either (it serialises concurrent pushes arbitrarily).
///
/// Why rings: a producer spawning deferred tasks in a loop while a worker takes them (a fan-out)
/// paid, through the inbox alone, two locked instructions per push on lines the taker had just
/// read (the tail index and the slot's state word): 14 % of all samples, the largest single item
/// (`perf annotate`). A plain store does not wait for
/// the line. A member whose ring is full takes the lock and sorts everything itself, then pushes.
///
/// A deque that drains stays in place (a fan-out drains and refills its request's deque
/// constantly); empty entries are skipped when choosing a request, and pruned when a new
/// request's first task arrives or once more than [`EMPTY_KEPT`] entries have gathered. Pruning
/// when a request arrives keeps the live requests first and, when one is left, inline in the hot
/// line: kept until the eighth request, the drained entries of earlier requests had moved the
/// entries to the heap and put the live deque behind them, one more cache line passed between
/// the takers at every take (each run of `bench queues` is a new request on the same runtime:
/// LAS 1.11–1.16× the fastest of LAS, central and NLS at 512 with the entries kept, 1.00–1.03×
/// with them dropped).
pub(crate) struct DeferredQueue<T> {
    inbox: Injector<(RequestId, T)>,
    /// One per member, in member order.
    rings: Box<[Ring<(RequestId, T)>]>,
    /// Names the queue to its pushers.
    id: usize,
    /// The count and the lock in one line: a take reads the one, then takes the other, and
    /// both move between the workers taking from this queue.
    hot: CachePadded<Hot<T>>,
}

/// What every take touches, laid out to share one cache line with the first request's deque
/// (stored inline in `entries`): 8 bytes of count, the lock's byte, then the entries.
#[repr(C)]
struct Hot<T> {
    /// Tasks in `by_request`; written only under the lock (so a Relaxed load under the lock is
    /// exact), read without it as a hint.
    sorted: AtomicUsize,
    by_request: QueueLock<ByRequest<T>>,
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
    ///
    /// A new entry first clears out the empty ones, so that the requests still queued stay
    /// first and, when one is left, inline in the queue's hot line.
    fn deque(&mut self, request: RequestId) -> &mut VecDeque<T> {
        let i = match self.find(request) {
            Ok(i) => i,
            Err(_) => {
                self.prune();
                let i = self.find(request).unwrap_err();
                self.entries.insert(i, (request, VecDeque::new()));
                i
            }
        };
        &mut self.entries[i].1
    }
    /// Notes that entry `i` may have become empty.
    fn drained(&mut self, i: usize) {
        if self.entries.len() > EMPTY_KEPT && self.entries[i].1.is_empty() {
            self.prune();
        }
    }
    /// Drops the empty entries, and moves the one left, if so, back inline.
    fn prune(&mut self) {
        self.entries.retain(|e| !e.1.is_empty());
        if self.entries.len() <= self.entries.inline_size() {
            self.entries.shrink_to_fit();
        }
    }
}

/// Entries (empty ones included) kept before empty ones are pruned, while no new request comes.
const EMPTY_KEPT: usize = 8;

/// Slots of a member's ring: 512 pushes between two takes before the member sorts them itself
/// (8 KiB per member: a slot holds a request id and an 8-byte task).
pub(crate) const RING_SLOTS: usize = 512;

impl<T> DeferredQueue<T> {
    /// A queue with no members (every push goes through the inbox).
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::with_members(0, RING_SLOTS)
    }

    /// A queue with `members` rings of `slots` slots (a power of two).
    pub(crate) fn with_members(members: usize, slots: usize) -> Self {
        // Relaxed: only uniqueness matters.
        static NEXT_ID: os::AtomicUsize = os::AtomicUsize::new(0);
        DeferredQueue {
            id: NEXT_ID.fetch_add(1, os::Ordering::Relaxed),
            rings: (0..members).map(|_| Ring::new(slots)).collect(),
            inbox: Injector::new(),
            hot: CachePadded::new(Hot {
                sorted: AtomicUsize::new(0),
                by_request: QueueLock::new(ByRequest {
                    entries: SmallVec::new(),
                }),
            }),
        }
    }

    /// Queues a task of `request` (lock-free), from a thread that is not a member.
    pub(crate) fn push(&self, request: RequestId, t: T) {
        self.inbox.push((request, t));
    }

    /// The pusher of member `member`, once: `None` if it was handed out already, or if there is
    /// no such member.
    pub(crate) fn pusher(&self, member: usize) -> Option<Pusher> {
        let ring = self.rings.get(member)?;
        if !ring.claim() {
            return None;
        }
        Some(Pusher {
            queue: self.id,
            member,
            head: 0,
            tail: 0,
        })
    }

    /// Queues a task of `request` through a member's ring: lock-free unless the ring is full,
    /// when the member takes the lock and sorts everything queued so far itself.
    ///
    /// # Panics
    /// If `p` is not a pusher of this queue.
    #[inline]
    pub(crate) fn push_own(&self, p: &mut Pusher, request: RequestId, t: T) {
        assert_eq!(p.queue, self.id, "a pusher of another deferred queue");
        let ring = &self.rings[p.member];
        // SAFETY: `p` is the one pusher of this ring (handed out once, not `Clone`, borrowed
        // mutably here), so this thread is the ring's only producer, and `p.tail` its position.
        let Err(item) = (unsafe { ring.push(&mut p.head, &mut p.tail, (request, t)) }) else {
            return;
        };
        {
            let mut v = self.hot.by_request.lock();
            // SAFETY: `v` is this queue's, locked.
            unsafe { self.sort_inbox(&mut v) };
        }
        // SAFETY: as above.
        if unsafe { ring.push(&mut p.head, &mut p.tail, item) }.is_err() {
            unreachable!("a ring just drained by its own producer has room");
        }
    }

    /// Moves the inbox, then every ring, into the per-request deques, keeping the order of each.
    ///
    /// # Safety
    /// `v` must be this queue's `by_request`, locked by the caller: holding the lock is what makes
    /// this thread the rings' one consumer.
    unsafe fn sort_inbox(&self, v: &mut ByRequest<T>) {
        let mut n = 0;
        if !self.inbox.is_empty() {
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
        }
        for ring in self.rings.iter() {
            // SAFETY: the lock is held (the contract above): this is the ring's only consumer.
            n += unsafe { ring.drain(|(request, t)| v.deque(request).push_back(t)) };
        }
        if n > 0 {
            self.add_sorted(n as isize);
        }
    }

    /// Changes `sorted` by `n`; under the lock.
    fn add_sorted(&self, n: isize) {
        // Relaxed: written only under the lock; readers without it take it as a hint, or read it
        // after the sleep protocol's barrier (sleep/README.md).
        let now = self
            .hot
            .sorted
            .load(Ordering::Relaxed)
            .wrapping_add_signed(n);
        self.hot.sorted.store(now, Ordering::Relaxed);
    }

    /// Whether no task is queued (a hint, like `len`).
    pub(crate) fn is_empty(&self) -> bool {
        self.hot.sorted.load(Ordering::Relaxed) == 0
            && self.inbox.is_empty()
            && self.rings.iter().all(Ring::is_empty)
    }

    /// Takes a task as [`resolve_deferred`] prescribes for `take`.
    pub(crate) fn take(&self, take: Take, last_request: Option<RequestId>) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut v = self.hot.by_request.lock();
        // SAFETY: `v` is this queue's, locked.
        unsafe { self.sort_inbox(&mut v) };
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
        let mut v = self.hot.by_request.lock();
        // SAFETY: `v` is this queue's, locked.
        unsafe { self.sort_inbox(&mut v) };
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
        let mut v = self.hot.by_request.lock();
        // SAFETY: `v` is this queue's, locked.
        unsafe { self.sort_inbox(&mut v) };
        let n = tasks.len();
        v.deque(request).append(&mut tasks);
        self.add_sorted(n as isize);
    }

    /// Tasks queued (a hint: a push or take may be under way).
    pub(crate) fn len(&self) -> usize {
        self.hot.sorted.load(Ordering::Relaxed)
            + self.inbox.len()
            + self.rings.iter().map(Ring::len).sum::<usize>()
    }
}

/// The right to push to one member's ring of a [`DeferredQueue`]: handed out once per member
/// ([`DeferredQueue::pusher`]) and not `Clone`, so its holder is the ring's only producer. It
/// names its queue by a process-unique id rather than by reference, so that a worker can keep it
/// beside its other state.
pub(crate) struct Pusher {
    queue: usize,
    member: usize,
    /// The consumer's `head` as last read (the ring is full only if it is still this).
    head: usize,
    /// The ring's `tail` (this pusher is its only writer).
    tail: usize,
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

    /// Members push through their rings (small ones, so that they fill and their producers sort
    /// them under the lock), another thread through the inbox, while a consumer takes: every
    /// task comes out once, and each producer's tasks of a request leave in push order.
    #[test]
    fn deferred_queue_rings_keep_each_producers_order() {
        use std::sync::Arc;
        const PER: u64 = if cfg!(miri) { 40 } else { 20_000 };
        let q = Arc::new(DeferredQueue::with_members(2, 4));
        assert!(q.pusher(2).is_none(), "no third member");
        let mut producers: Vec<_> = (0..2u64)
            .map(|m| {
                let q = q.clone();
                let mut p = q.pusher(m as usize).unwrap();
                assert!(
                    q.pusher(m as usize).is_none(),
                    "a pusher is handed out once"
                );
                std::thread::spawn(move || {
                    for i in 0..PER {
                        // Two requests per producer, so the consumer sorts runs of both.
                        q.push_own(&mut p, i % 2, (m, i));
                    }
                })
            })
            .collect();
        let q2 = q.clone();
        producers.push(std::thread::spawn(move || {
            for i in 0..PER {
                q2.push(i % 2, (2, i));
            }
        }));
        let mut last = [None::<u64>; 3];
        let mut got = 0;
        while got < 3 * PER {
            match q.take(Take::OldestRequestOldest, None) {
                Some((src, i)) => {
                    // Request 0 is drained first whenever both are queued, so only the order
                    // within one (producer, request) is fixed: i and i + 2.
                    let prev = last[src as usize];
                    if i % 2 == 0 {
                        last[src as usize] = Some(i);
                    }
                    assert!(
                        i % 2 == 1 || prev.is_none_or(|p| p < i),
                        "source {src}: {prev:?} before {i}"
                    );
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert!(q.is_empty());
        assert_eq!(q.len(), 0);
    }

    /// The count, the lock and the first request's deque share one 64-byte line (see `Hot`).
    #[test]
    fn hot_part_fits_one_line() {
        assert!(std::mem::size_of::<Hot<crate::task::Task>>() <= 64);
    }

    /// Requests that come one after another on one queue (a runtime's successive requests)
    /// leave no drained entry behind, and the live one stays inline in the hot line; two live
    /// requests move to the heap, and come back inline once the older has drained and a new one
    /// arrives. Before, drained entries were kept up to [`EMPTY_KEPT`], and the entries stayed on
    /// the heap from the second request on.
    #[test]
    fn a_new_request_prunes_the_drained_ones() {
        let q = DeferredQueue::new();
        let inline = |q: &DeferredQueue<u64>| {
            let v = q.hot.by_request.lock();
            (v.entries.len(), v.entries.spilled())
        };
        for r in 1..=2 * EMPTY_KEPT as u64 {
            q.push(r, 10 * r);
            q.push(r, 10 * r + 1);
            assert_eq!(q.take(Take::OldestRequestYoungest, None), Some(10 * r + 1));
            assert_eq!(inline(&q), (1, false), "request {r}");
            assert_eq!(q.take(Take::OldestRequestYoungest, None), Some(10 * r));
        }
        // Two live requests: on the heap, in request order.
        q.push(101, 1);
        q.push(102, 2);
        q.push(102, 3);
        assert_eq!(q.take(Take::OldestRequestYoungest, None), Some(1));
        assert_eq!(inline(&q), (2, true));
        // 101 has drained; a third request prunes it, and 102 is still taken first.
        q.push(103, 4);
        assert_eq!(q.take(Take::OldestRequestYoungest, None), Some(3));
        assert_eq!(inline(&q), (2, true));
        assert_eq!(q.take(Take::OldestRequestYoungest, None), Some(2));
        assert_eq!(q.take(Take::OldestRequestYoungest, None), Some(4));
        // Both drained: the next request is back inline.
        q.push(104, 5);
        assert_eq!(q.take(Take::OldestRequestYoungest, None), Some(5));
        assert_eq!(inline(&q), (1, false));
        assert!(q.is_empty());
    }

    /// A ring that fills is sorted by its producer, and the youngest task is still the last
    /// pushed (LAS rule 3), across the ring's wrap-around.
    #[test]
    fn full_ring_is_sorted_by_its_producer() {
        let q = DeferredQueue::with_members(1, 2);
        let mut p = q.pusher(0).unwrap();
        for i in 0..7 {
            q.push_own(&mut p, 5, i);
            assert_eq!(q.len(), i + 1);
        }
        // Six went through the lock when the ring was full; the last waits in the ring.
        assert_eq!(q.rings[0].len(), 1);
        assert_eq!(q.take(Take::OldestRequestYoungest, None), Some(6));
        assert_eq!(q.take(Take::OldestRequestOldest, None), Some(0));
        q.push(3, 100);
        q.push_own(&mut p, 5, 7);
        assert_eq!(q.take(Take::OldestRequestOldest, None), Some(100));
        assert_eq!(q.take(Take::OldestRequestYoungest, None), Some(7));
        assert_eq!(q.len(), 5);
    }

    #[test]
    #[should_panic(expected = "a pusher of another deferred queue")]
    fn pusher_of_another_queue_is_refused() {
        let a = DeferredQueue::<u8>::with_members(1, 2);
        let b = DeferredQueue::<u8>::with_members(1, 2);
        let mut p = a.pusher(0).unwrap();
        b.push_own(&mut p, 0, 1);
    }

    /// Items left in a ring are dropped with it, once.
    #[test]
    fn ring_drops_what_it_holds() {
        use std::sync::Arc;
        let item = Arc::new(());
        {
            let q = DeferredQueue::with_members(1, 4);
            let mut p = q.pusher(0).unwrap();
            for _ in 0..3 {
                q.push_own(&mut p, 0, item.clone());
            }
            drop(q.take(Take::OldestRequestOldest, None));
            q.push_own(&mut p, 0, item.clone());
            assert_eq!(Arc::strong_count(&item), 4);
        }
        assert_eq!(Arc::strong_count(&item), 1);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model check of a deferred queue's member ring filling up (run with
    //! `RUSTFLAGS="--cfg loom"`); the ring alone is modelled in `ring.rs`.
    use super::*;
    use crate::sync::Arc;
    use loom::thread;

    /// A member whose ring is full sorts it under the lock while another worker takes: every
    /// task comes out once, oldest first.
    #[test]
    fn loom_full_ring_sorted_under_the_lock() {
        loom::model(|| {
            let q = Arc::new(DeferredQueue::with_members(1, 1));
            let mut p = q.pusher(0).unwrap();
            let q2 = q.clone();
            let producer = thread::spawn(move || {
                for i in 0..3u32 {
                    q2.push_own(&mut p, 0, i);
                }
            });
            let mut got = Vec::new();
            while got.len() < 3 {
                match q.take(Take::OldestRequestOldest, None) {
                    Some(x) => got.push(x),
                    None => thread::yield_now(),
                }
            }
            producer.join().unwrap();
            assert_eq!(got, [0, 1, 2]);
            assert!(q.is_empty());
        });
    }
}
