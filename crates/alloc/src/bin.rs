//! Recollection bins (§5.1) and the protocol that empties them.
//!
//! "The memory is always deallocated only by the thread that owns it. If a thread needs to
//! deallocate foreign memory, it returns it to the corresponding memory recollection bin of the
//! owning thread. Every thread has a recollection bin for every other thread … The recollection
//! bin is a linked list of pointers, which is protected by a simple spin-lock."
//!
//! Each local allocator (owner) has one [`RecollectionBin`] per possible freeing thread, indexed
//! by the freer's local-allocator id, so only that pair ever contends on a lock. A freer pushes
//! the block, then marks its bin in the owner's [`Pending`] bitmap (one bit per bin, and a summary
//! bit per 64 bins), so the owner finds the non-empty bins without scanning them all: its check
//! "is anything waiting?" is one load.
//!
//! Steps, and why nothing is lost:
//! - freer: `push` under the bin's lock, then `mark` (summary bit set after the word bit);
//! - owner: `drain` swaps the summary to 0 first, then each marked word, then empties the marked
//!   bins under their locks. A mark the owner misses is one whose summary bit was set after the
//!   owner's swap; it stays set for the next drain. A bin emptied before its mark arrives just
//!   gives an empty drain later.
//!
//! When the owner's thread has exited, its allocator is **abandoned** ([`Reclaim`]): a freer
//! that pushes into an abandoned allocator claims it (`ABANDONED → CLAIMED`) and drains it
//! itself, so empty superblocks still return to their node. The claimer re-checks the marks
//! after giving the claim back, and the freer checks the state after marking, each behind a
//! SeqCst fence, so of any (mark, release) pair at least one side sees the other: no block waits
//! in the bin of a dead thread. The loom models below check both protocols; each fails when the
//! freer's fence or the releaser's re-check is removed.

use core::ptr;

use crate::sync::{fence, spin, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// A block waiting in a bin: its first word links to the next.
#[repr(C)]
pub(crate) struct Link {
    pub(crate) next: *mut Link,
}

/// One (owner, freer) bin: a list of blocks under a spin-lock.
#[repr(align(64))]
pub(crate) struct RecollectionBin {
    locked: AtomicBool,
    /// Only read or written under `locked`.
    head: AtomicPtr<Link>,
}

impl RecollectionBin {
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        RecollectionBin {
            locked: AtomicBool::new(false),
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    fn lock(&self) {
        let mut round = 0;
        // Acquire: pairs with the Release store in `unlock`, so the previous holder's list
        // writes are visible.
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin(&mut round);
        }
    }

    fn unlock(&self) {
        // Release: pairs with the Acquire CAS in `lock`.
        self.locked.store(false, Ordering::Release);
    }

    /// Adds a block.
    ///
    /// # Safety
    /// `l` is a block the caller may hand over, at least one word long.
    pub(crate) unsafe fn push(&self, l: *mut Link) {
        self.lock();
        // Relaxed: `head` is only touched under the lock.
        // SAFETY: the caller hands the block over.
        unsafe { (*l).next = self.head.load(Ordering::Relaxed) };
        self.head.store(l, Ordering::Relaxed);
        self.unlock();
    }

    /// Takes every block (a null-terminated list).
    pub(crate) fn take(&self) -> *mut Link {
        self.lock();
        // Relaxed: under the lock.
        let l = self.head.swap(ptr::null_mut(), Ordering::Relaxed);
        self.unlock();
        l
    }
}

/// Bits per word of the bitmap.
const W: usize = 64;

/// Which bins of one owner may hold blocks.
pub(crate) struct Pending<const WORDS: usize> {
    summary: AtomicU64,
    words: [AtomicU64; WORDS],
}

impl<const WORDS: usize> Pending<WORDS> {
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Pending {
            summary: AtomicU64::new(0),
            words: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Marks bin `i` as non-empty (after the push).
    pub(crate) fn mark(&self, i: usize) {
        // SeqCst (both): the word bit before the summary bit (pairs with `drain`'s swaps); the
        // summary RMW comes before the fence in `Reclaim::is_abandoned`.
        self.words[i / W].fetch_or(1 << (i % W), Ordering::SeqCst);
        self.summary.fetch_or(1 << (i / W), Ordering::SeqCst);
    }

    /// Whether any bin may hold blocks (one load: the owner's check before each allocation).
    #[inline]
    pub(crate) fn any_relaxed(&self) -> bool {
        // Relaxed: a hint; a mark missed now is found by a later check.
        self.summary.load(Ordering::Relaxed) != 0
    }

    /// Whether any bin may hold blocks, ordered with `mark` (used after releasing a claim).
    pub(crate) fn any(&self) -> bool {
        // SeqCst fence: pairs with the fence in `Reclaim::is_abandoned` (store-buffering: the
        // releaser stores the state then loads the summary, the freer marks the summary then
        // loads the state; with a SeqCst fence between each pair one of them sees the other).
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence.
        self.summary.load(Ordering::Relaxed) != 0
    }

    /// Calls `f` with every marked bin index, clearing the marks first.
    pub(crate) fn drain(&self, mut f: impl FnMut(usize)) {
        // Acquire (SeqCst): pairs with `mark`'s summary RMW, so the word bits set before it are
        // visible.
        let mut s = self.summary.swap(0, Ordering::SeqCst);
        while s != 0 {
            let w = s.trailing_zeros() as usize;
            s &= s - 1;
            // Acquire (SeqCst): pairs with `mark`'s word RMW, so the pushed list is visible
            // (and the bin lock orders it in any case).
            let mut bits = self.words[w].swap(0, Ordering::SeqCst);
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                f(w * W + b);
            }
        }
    }
}

/// Life of a local allocator, for adoption and reclamation of abandoned ones.
pub(crate) struct Reclaim {
    state: AtomicU32,
}

/// Slot not in use yet: the state of a zeroed local allocator before it is published.
pub(crate) const UNUSED: u32 = 0;
/// A live thread owns the allocator.
pub(crate) const OWNED: u32 = 1;
/// Its thread exited; anyone may claim it.
pub(crate) const ABANDONED: u32 = 2;
/// Someone holds it for a moment (a freer draining it, or a new thread adopting it).
pub(crate) const CLAIMED: u32 = 3;

impl Reclaim {
    #[cfg(loom)]
    pub(crate) fn new(state: u32) -> Self {
        Reclaim {
            state: AtomicU32::new(state),
        }
    }

    /// The current state (for statistics and checks).
    pub(crate) fn get(&self) -> u32 {
        // Acquire: pairs with the stores below.
        self.state.load(Ordering::Acquire)
    }

    /// Takes an abandoned allocator for a moment (`to = CLAIMED`) or for good (`to = OWNED`).
    pub(crate) fn try_claim(&self, to: u32) -> bool {
        // SeqCst: in the single order with `mark` and `release` (see the module docs); Acquire
        // part pairs with the previous holder's release, so its writes are visible.
        self.state
            .compare_exchange(ABANDONED, to, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Sets the state from the owner (fresh slot → OWNED).
    pub(crate) fn set(&self, to: u32) {
        // SeqCst: as `release`.
        self.state.store(to, Ordering::SeqCst);
    }

    /// Gives the allocator back to the abandoned state. The caller then re-checks `Pending::any`.
    pub(crate) fn release(&self) {
        // SeqCst: store-buffering pair with (`mark`, `is_abandoned`): see the module docs.
        // Release part: the holder's writes are visible to the next claimer.
        self.state.store(ABANDONED, Ordering::SeqCst);
    }

    /// Checked by a freer after `mark`.
    pub(crate) fn is_abandoned(&self) -> bool {
        // SeqCst fence: pairs with the fence in `Pending::any` (see there).
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence.
        self.state.load(Ordering::Relaxed) == ABANDONED
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    /// One owner with bins for two freers.
    struct Owner {
        bins: [RecollectionBin; 2],
        pending: Pending<1>,
        reclaim: Reclaim,
        drained: AtomicUsize,
    }

    impl Owner {
        fn new() -> Arc<Owner> {
            Arc::new(Owner {
                bins: [RecollectionBin::new(), RecollectionBin::new()],
                pending: Pending::new(),
                reclaim: Reclaim::new(OWNED),
                drained: AtomicUsize::new(0),
            })
        }

        fn drain_all(&self) {
            self.pending.drain(|i| {
                let mut l = self.bins[i].take();
                while !l.is_null() {
                    // SAFETY: blocks were boxed by the test and pushed once.
                    let b = unsafe { Box::from_raw(l) };
                    l = b.next;
                    self.drained.fetch_add(1, Ordering::Relaxed);
                }
            });
        }

        /// The claim-drain-release loop of a freer or an exiting owner.
        fn reclaim(&self) {
            while self.reclaim.try_claim(CLAIMED) {
                self.drain_all();
                self.reclaim.release();
                if !self.pending.any() {
                    break;
                }
            }
        }

        fn foreign_free(&self, freer: usize) {
            let l = Box::into_raw(Box::new(Link {
                next: ptr::null_mut(),
            }));
            // SAFETY: a fresh block handed over.
            unsafe { self.bins[freer].push(l) };
            self.pending.mark(freer);
            if self.reclaim.is_abandoned() {
                self.reclaim();
            }
        }
    }

    /// Two freers each return a block while the owner drains and then exits: every block is
    /// drained exactly once, even the ones pushed after the owner's last drain.
    #[test]
    fn loom_no_block_left_in_a_dead_owners_bin() {
        loom::model(|| {
            let o = Owner::new();
            let freers: Vec<_> = (0..2)
                .map(|f| {
                    let o = o.clone();
                    thread::spawn(move || o.foreign_free(f))
                })
                .collect();
            // The owner: one drain while alive, then exit (drain, abandon, re-check).
            o.drain_all();
            o.drain_all();
            o.reclaim.release();
            if o.pending.any() {
                o.reclaim();
            }
            for f in freers {
                f.join().unwrap();
            }
            assert_eq!(
                o.drained.load(Ordering::Relaxed),
                2,
                "a block stayed in a bin"
            );
        });
    }

    /// A live owner that keeps draining finds both blocks (no mark is lost between the summary
    /// and the word bits).
    #[test]
    fn loom_live_owner_finds_every_mark() {
        loom::model(|| {
            let o = Owner::new();
            let o2 = o.clone();
            let t = thread::spawn(move || {
                o2.foreign_free(0);
                o2.foreign_free(1);
            });
            o.drain_all();
            t.join().unwrap();
            o.drain_all();
            assert_eq!(o.drained.load(Ordering::Relaxed), 2);
            assert!(!o.pending.any());
        });
    }
}
