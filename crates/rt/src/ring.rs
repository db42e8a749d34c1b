//! A bounded single-producer single-consumer ring: how a member worker of a deferred queue
//! hands it tasks without a read-modify-write (`queue.rs`, "Rings and inbox"). Lock-free and
//! `unsafe`: model-checked below (loom) and run under Miri (`scripts/miri.sh`, `queue::tests`).

use std::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicBool, AtomicUsize, Ordering, UnsafeCell};

/// A bounded single-producer single-consumer ring (see "Rings and inbox" on
/// `queue::DeferredQueue`). Positions count pushes and wrap; a slot is `position % slots`.
pub(crate) struct Ring<T> {
    /// The next position to read; written by the consumer only.
    head: CachePadded<AtomicUsize>,
    /// The next position to write; written by the producer only.
    tail: CachePadded<AtomicUsize>,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    /// Whether the producer's role was claimed.
    claimed: AtomicBool,
}

// SAFETY: a ring moves `T`s from its producer's thread to its consumer's; positions are
// published with Release/Acquire (see `push` and `drain`), so no slot is accessed by two
// threads at once.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    /// A ring of `slots` slots (a power of two).
    pub(crate) fn new(slots: usize) -> Self {
        assert!(slots.is_power_of_two(), "ring slots must be a power of two");
        Ring {
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
            slots: (0..slots)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
            claimed: AtomicBool::new(false),
        }
    }

    /// Claims the producer's role: true for the first call only (the caller then hands it to
    /// one thread, e.g. as a `queue::Pusher`).
    pub(crate) fn claim(&self) -> bool {
        // Relaxed: only uniqueness matters; the role reaches its thread through a spawn.
        !self.claimed.swap(true, Ordering::Relaxed)
    }

    /// Whether it holds nothing (a hint, like [`DeferredQueue::len`]).
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items held (a hint). `head` is read first: it never passes `tail`, and `tail` only grows.
    pub(crate) fn len(&self) -> usize {
        let head = self.head.load(Ordering::Relaxed);
        self.tail.load(Ordering::Relaxed).wrapping_sub(head)
    }

    /// Appends `item`, or gives it back if the ring is full. `head` is the producer's cached copy
    /// of the consumer's position, `tail` its own position (the value of `self.tail`).
    ///
    /// # Safety
    /// Only one thread may act as the producer, and `tail` must be its own last position.
    pub(crate) unsafe fn push(&self, head: &mut usize, tail: &mut usize, item: T) -> Result<(), T> {
        let slots = self.slots.len();
        if tail.wrapping_sub(*head) == slots {
            // Acquire: pairs with the consumer's Release store of `head`, so its reads of the
            // slots it freed happened before this producer writes them again.
            *head = self.head.load(Ordering::Acquire);
            if tail.wrapping_sub(*head) == slots {
                return Err(item);
            }
        }
        // SAFETY: the slot at `tail` is outside `head..tail`, so the consumer does not read it
        // (it reads only below the `tail` it loads) and it holds no live item.
        self.slots[*tail & (slots - 1)].with_mut(|p| unsafe { (*p).write(item) });
        *tail = tail.wrapping_add(1);
        // Release: publishes the slot written above to the consumer's Acquire load of `tail`.
        self.tail.store(*tail, Ordering::Release);
        Ok(())
    }

    /// Hands every item pushed so far to `f`, oldest first; returns how many.
    ///
    /// # Safety
    /// Only one thread at a time may act as the consumer.
    pub(crate) unsafe fn drain(&self, mut f: impl FnMut(T)) -> usize {
        let slots = self.slots.len();
        // Relaxed: only the consumer writes `head`.
        let head = self.head.load(Ordering::Relaxed);
        // Acquire: pairs with the producer's Release store, so the slots below it are written.
        let tail = self.tail.load(Ordering::Acquire);
        let mut at = head;
        while at != tail {
            // SAFETY: `at` is in `head..tail`: written by the producer (see above), not yet read,
            // and not written again before `head` passes it.
            let item =
                self.slots[at & (slots - 1)].with_mut(|p| unsafe { (*p).assume_init_read() });
            at = at.wrapping_add(1);
            // Release: the slot has been read before the producer may see it free. Stored item by
            // item, so that a panic in `f` cannot leave an item both handed out and readable.
            self.head.store(at, Ordering::Release);
            f(item);
        }
        tail.wrapping_sub(head)
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no producer or consumer is left.
        unsafe { self.drain(drop) };
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model check of the ring (run with `RUSTFLAGS="--cfg loom"`): loom's `UnsafeCell` reports
    //! a slot read while written, and the assertion an item lost, duplicated or reordered.
    use super::*;
    use crate::sync::Arc;
    use loom::thread;

    /// A producer pushes three items through two slots (so it waits for room once) while a
    /// consumer drains.
    #[test]
    fn loom_ring_hands_over_in_order() {
        loom::model(|| {
            let ring = Arc::new(Ring::new(2));
            let r = ring.clone();
            let producer = thread::spawn(move || {
                let (mut head, mut tail) = (0, 0);
                for i in 0..3 {
                    let mut item = i;
                    // SAFETY: this thread is the only producer.
                    while let Err(x) = unsafe { r.push(&mut head, &mut tail, item) } {
                        item = x;
                        thread::yield_now();
                    }
                }
            });
            let mut got = Vec::new();
            while got.len() < 3 {
                // SAFETY: this thread is the only consumer.
                unsafe { ring.drain(|x| got.push(x)) };
                if got.len() < 3 {
                    thread::yield_now();
                }
            }
            producer.join().unwrap();
            assert_eq!(got, [0, 1, 2]);
            assert!(ring.is_empty());
        });
    }
}
