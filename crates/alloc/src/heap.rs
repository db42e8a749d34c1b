//! The local allocator of one thread (§5.1): sub-allocators S0…Sn, each with its superblocks and
//! a priority queue of the not-full ones, plus the recollection bins other threads fill.
//!
//! Who touches what:
//! - `subs`, `abandoned` and every superblock the allocator owns: only the **holder** — the
//!   owning thread, or whoever holds the claim of an abandoned allocator (`bin::Reclaim`). No
//!   lock is taken on this path.
//! - `bins[i]`: the freer with id `i` (push) and the holder (take), under the bin's spin-lock;
//!   `pending`: atomics, see `bin.rs`.
//! - `id` never changes; `node` changes only on adoption (atomic, read by adopters).
//!
//! Invariants (checked by [`Heap::is_valid`]): for each sub-allocator, `count` = length of
//! `list`; every superblock in `list` has `owner == self` and `class == i`; it is in `pq` iff it
//! has a free block; an owned allocator keeps at most `MAX_KEPT` empty superblocks in all, the
//! most recently emptied (`kept_ring[..empty_kept]`, each flagged `kept`); an abandoned one
//! keeps none once drained.

use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::bin::{Link, Pending, Reclaim, RecollectionBin, ABANDONED, CLAIMED, OWNED};
use crate::config::MAX_CLASSES;
use crate::large::ThreadCache;
use crate::node::Placement;
use crate::pq::PrioQueue;
use crate::superblock::{Superblock, NOT_QUEUED};
use crate::Allocator;

/// Most local allocators (threads using the allocator at once, plus id 0 for threads without
/// one). A thread beyond this uses the system allocator.
pub const MAX_HEAPS: usize = 1024;

const WORDS: usize = MAX_HEAPS / 64;

/// Empty superblocks a local allocator keeps instead of giving them back to the node, so that a
/// thread that allocates and frees blocks of many sizes does not fetch a superblock each time
/// (with 2, the multi-thread benchmarks spent a fifth of their time taking superblocks from the
/// node and faulting their pages in again). Bounded over all sub-allocators, in number and in
/// the bytes they have had touched ([`KEPT_BYTES`]): superblocks are not touched in full, so a
/// kept one pins only what its blocks used.
pub(crate) const MAX_KEPT: u32 = 32;

/// An empty superblock that is the only one of its sub-allocator stays with it (neither kept
/// nor given back) while its blocks have touched at most this many bytes. Without this, a
/// thread using more sizes than [`MAX_KEPT`] fetched a superblock from its node every few
/// allocations (larson: 394,278 fetches for 1.6 M allocations). At most one per size, so at
/// most 62 × 1 MiB per thread.
pub(crate) const SOLE_BYTES: usize = 1 << 20;

/// Bytes of touched pages the kept superblocks of one local allocator may hold.
pub(crate) const KEPT_BYTES: usize = 16 << 20;

/// One sub-allocator Si (§5.1).
#[repr(C)]
pub(crate) struct SubAllocator {
    /// Superblocks held (length of `list`).
    pub(crate) count: u32,
    /// All superblocks of this sub-allocator, doubly linked through their headers.
    pub(crate) list: *mut Superblock,
    /// The not-full ones, most occupied first.
    pub(crate) pq: PrioQueue,
}

/// A local allocator. Lives in its own OS mapping (all-zero is a valid empty state) and is
/// never unmapped: when its thread exits it is abandoned and later adopted by a new thread.
#[repr(C)]
pub(crate) struct Heap {
    pub(crate) id: u32,
    pub(crate) node: AtomicU32,
    pub(crate) reclaim: Reclaim,
    /// Set by the exiting thread, cleared by the adopter: release empty superblocks at once.
    pub(crate) abandoned: bool,
    /// Empty superblocks kept (`kept`), at most [`MAX_KEPT`]: `kept_ring[..empty_kept]`,
    /// oldest first.
    pub(crate) empty_kept: u32,
    pub(crate) kept_ring: [*mut Superblock; MAX_KEPT as usize],
    /// Touched bytes of the kept superblocks (their `touched`), at most [`KEPT_BYTES`].
    pub(crate) kept_bytes: usize,
    pub(crate) subs: [SubAllocator; MAX_CLASSES],
    /// Large blocks kept by this thread (`large.rs`).
    pub(crate) large: ThreadCache,
    pub(crate) pending: Pending<WORDS>,
    pub(crate) bins: [RecollectionBin; MAX_HEAPS],
}

impl Heap {
    /// Allocates a block of sub-allocator `class`, or null when the OS refuses memory.
    ///
    /// # Safety
    /// The caller holds this allocator; `class` is a valid class of `a`.
    #[inline]
    pub(crate) unsafe fn alloc(&mut self, a: &Allocator, class: usize) -> *mut u8 {
        if self.pending.any_relaxed() {
            // §5.1: threads that are not workers drain their bins on their next allocation.
            // SAFETY: we hold the allocator.
            unsafe { self.collect(a) };
        }
        let mut sb = self.subs[class].pq.top();
        if sb.is_null() {
            // SAFETY: we hold the allocator.
            sb = unsafe { self.add_superblock(a, class) };
            if sb.is_null() {
                return ptr::null_mut();
            }
        }
        // SAFETY: `sb` is a queued superblock of ours, so it has a free block.
        unsafe {
            if (*sb).kept {
                self.unkeep(sb);
            }
            let b = (*sb).pop();
            if (*sb).free() == 0 {
                self.subs[class].pq.remove(sb);
            }
            debug_assert!((*sb).is_valid() && self.subs[class].pq.is_valid());
            b
        }
    }

    /// A new superblock for `class` from this node's superblock allocator, formatted and queued.
    unsafe fn add_superblock(&mut self, a: &Allocator, class: usize) -> *mut Superblock {
        let node = self.node.load(Ordering::Relaxed) as usize;
        let Ok(sb) =
            a.nodes[node].obtain(a, node, a.superblock_size(), Placement::FirstTouch, class)
        else {
            return ptr::null_mut();
        };
        let sb = sb.as_ptr();
        // The registry's pointer, not one derived from `&mut self`: frees reach this allocator
        // through `owner` long after this borrow ends.
        let me = a.heap_ptr(self.id);
        // SAFETY: the node handed `sb` to us alone.
        unsafe {
            (*sb).format(class, a.classes.size(class), me);
            let sub = &mut self.subs[class];
            if !sub.pq.push(sb) {
                (*sb).owner = ptr::null_mut();
                a.give_back(NonNull::new_unchecked(sb));
                return ptr::null_mut();
            }
            (*sb).prev = ptr::null_mut();
            (*sb).next = sub.list;
            if !sub.list.is_null() {
                (*sub.list).prev = sb;
            }
            sub.list = sb;
            sub.count += 1;
        }
        sb
    }

    /// Frees block `b` of our superblock `sb` (LIFO), and returns `sb` to its node when it is
    /// empty and not the last one of its sub-allocator (or when the allocator is abandoned).
    ///
    /// # Safety
    /// The caller holds this allocator; `b` is a handed-out block of `sb`, which we own.
    #[inline]
    pub(crate) unsafe fn free_local(&mut self, a: &Allocator, sb: *mut Superblock, b: *mut u8) {
        // SAFETY, for each block of this function: (1) the caller holds this allocator, so
        // the headers of the superblocks it owns are touched by this thread alone (a foreign
        // free goes to a bin, never to a header); (2) `sb` is one of them and `b` a block of
        // it handed out and now given up.
        unsafe {
            debug_assert!(core::ptr::eq((*sb).owner, self));
        }
        // SAFETY: (1), (2).
        let (class, was_full) = unsafe { ((*sb).class as usize, (*sb).free() == 0) };
        // SAFETY: (2): `b` goes back on `sb`'s free list once.
        unsafe { (*sb).push(b) };
        // SAFETY: (1): the queue and the header are ours; from here on `sb` is only read or
        // written through this allocator's lists.
        unsafe {
            let sub = &mut self.subs[class];
            if was_full {
                // Out of memory for the queue array leaves `sb` unqueued: its free blocks wait
                // until it is empty and given back.
                let _ = sub.pq.push(sb);
            } else if (*sb).pq_index != NOT_QUEUED {
                sub.pq.increased(sb);
            }
            debug_assert!((*sb).is_valid() && sub.pq.is_valid());
            if (*sb).used == 0 {
                if self.abandoned {
                    self.drop_superblock(a, sb);
                } else {
                    (*sb).touched = (*sb).covered();
                    if self.subs[class].count == 1 && (*sb).touched <= SOLE_BYTES {
                        // The only superblock of its sub-allocator stays where it is: the next
                        // block of this size comes from it without a trip to the node.
                        return;
                    }
                    // Keep the most recently emptied ones: the oldest kept ones go to the node
                    // (a thread that moved on to other sizes must not pin the budget).
                    while self.empty_kept > 0
                        && (self.empty_kept == MAX_KEPT
                            || self.kept_bytes + (*sb).touched > KEPT_BYTES)
                    {
                        self.drop_superblock(a, self.kept_ring[0]);
                    }
                    if (*sb).touched > KEPT_BYTES {
                        self.drop_superblock(a, sb);
                        return;
                    }
                    (*sb).kept = true;
                    self.kept_ring[self.empty_kept as usize] = sb;
                    self.empty_kept += 1;
                    self.kept_bytes += (*sb).touched;
                }
            }
        }
    }

    /// Removes a kept superblock from the ring (it is being used again, or given back).
    unsafe fn unkeep(&mut self, sb: *mut Superblock) {
        let n = self.empty_kept as usize;
        let Some(i) = self.kept_ring[..n].iter().position(|&k| k == sb) else {
            debug_assert!(false, "a kept superblock is in the ring");
            return;
        };
        self.kept_ring.copy_within(i + 1..n, i);
        self.empty_kept -= 1;
        // SAFETY: `sb` is ours (the caller holds the allocator).
        unsafe {
            (*sb).kept = false;
            self.kept_bytes -= (*sb).touched;
        }
    }

    /// Unlinks an empty superblock and gives it to the node.
    unsafe fn drop_superblock(&mut self, a: &Allocator, sb: *mut Superblock) {
        // SAFETY: `sb` is ours and empty; the caller holds the allocator.
        unsafe {
            if (*sb).kept {
                self.unkeep(sb);
            }
            let sub = &mut self.subs[(*sb).class as usize];
            if (*sb).pq_index != NOT_QUEUED {
                sub.pq.remove(sb);
            }
            let (prev, next) = ((*sb).prev, (*sb).next);
            if prev.is_null() {
                sub.list = next;
            } else {
                (*prev).next = next;
            }
            if !next.is_null() {
                (*next).prev = prev;
            }
            sub.count -= 1;
            (*sb).next = ptr::null_mut();
            (*sb).prev = ptr::null_mut();
            a.give_back(NonNull::new_unchecked(sb));
        }
    }

    /// Drains the recollection bins: every block other threads returned is freed here (§5.1).
    ///
    /// # Safety
    /// The caller holds this allocator.
    pub(crate) unsafe fn collect(&mut self, a: &Allocator) {
        let mut marked = [0u64; WORDS];
        self.pending.drain(|i| marked[i / 64] |= 1 << (i % 64));
        for (w, mut bits) in marked.into_iter().enumerate() {
            while bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let mut l = self.bins[i].take();
                while !l.is_null() {
                    // SAFETY: blocks in our bins are handed-out blocks of our superblocks.
                    unsafe {
                        let next = (*l).next;
                        let sb = a.map.lookup(l.cast()).expect("a recollected block is ours");
                        self.free_local(a, sb.as_ptr(), l.cast());
                        l = next;
                    }
                }
            }
        }
    }

    /// Returns a block owned by `owner` from the thread whose local allocator id is `me_id`
    /// (0: a thread without one): into the owner's bin for that pair (§5.1). If the owner's
    /// thread has exited, drains the owner's bins on its behalf.
    ///
    /// # Safety
    /// `b` is a handed-out block of a superblock owned by `owner`, given up by the caller.
    pub(crate) unsafe fn free_foreign(a: &Allocator, owner: *mut Heap, me_id: usize, b: *mut u8) {
        // SAFETY: heaps are never unmapped; bins and pending are shared-access.
        let o = unsafe { &*owner };
        // SAFETY: the caller hands the block over.
        unsafe { o.bins[me_id].push(b.cast::<Link>()) };
        o.pending.mark(me_id);
        if o.reclaim.is_abandoned() {
            // SAFETY: `owner` is a live heap.
            unsafe { Self::reclaim(a, owner) };
        }
    }

    /// Claims an abandoned allocator, drains it (returning empty superblocks to their nodes)
    /// and releases it, until no mark is left (see `bin.rs`).
    ///
    /// # Safety
    /// `h` is a live heap.
    pub(crate) unsafe fn reclaim(a: &Allocator, h: *mut Heap) {
        // SAFETY: heaps are never unmapped.
        while unsafe { (*h).reclaim.try_claim(CLAIMED) } {
            crate::stats::count(&a.stats.reclaims, 1);
            // SAFETY: we hold the claim.
            unsafe {
                (*h).collect(a);
                (*h).reclaim.release();
                if !(*h).pending.any() {
                    break;
                }
            }
        }
    }

    /// Called when the owning thread exits: drains the bins, gives back every empty
    /// superblock, and leaves the allocator (with any superblock that still has live blocks)
    /// for adoption. Nothing becomes unreachable: the allocator stays in the registry.
    ///
    /// # Safety
    /// The caller owns this allocator and gives it up.
    pub(crate) unsafe fn abandon(&mut self, a: &Allocator) {
        // SAFETY: we own it.
        unsafe { self.collect(a) };
        self.abandoned = true;
        self.flush_large(a);
        for class in 0..a.classes.len() {
            let mut sb = self.subs[class].list;
            while !sb.is_null() {
                // SAFETY: our superblocks.
                unsafe {
                    let next = (*sb).next;
                    if (*sb).used == 0 {
                        self.drop_superblock(a, sb);
                    }
                    sb = next;
                }
            }
        }
        self.reclaim.release();
        crate::stats::count(&a.stats.heaps_abandoned, 1);
        if self.pending.any() {
            // SAFETY: a live heap; we no longer use `self` after this.
            unsafe { Self::reclaim(a, a.heap_ptr(self.id)) };
        }
    }

    /// Gives the kept empty superblocks and the kept large blocks back to their nodes, where
    /// what exceeds the reserve is purged after the delay (for a thread about to go idle). The
    /// sole superblock of each size stays.
    ///
    /// # Safety
    /// The caller holds this allocator.
    pub(crate) unsafe fn release_cached(&mut self, a: &Allocator) {
        while self.empty_kept > 0 {
            // SAFETY: a kept superblock is ours and empty.
            unsafe { self.drop_superblock(a, self.kept_ring[0]) };
        }
        self.flush_large(a);
    }

    /// Gives the large blocks this thread keeps back to their nodes' caches.
    fn flush_large(&mut self, a: &Allocator) {
        self.large.drain(|c, sb| {
            // SAFETY: a kept large block, live and ours alone.
            unsafe {
                let node = (*sb).node as usize % crate::node::MAX_NODES;
                a.nodes[node].put_large(a, c, NonNull::new_unchecked(sb));
            }
        });
    }

    /// Takes an abandoned allocator for a new thread on `node`.
    pub(crate) fn adopt(&mut self, a: &Allocator, node: usize) -> bool {
        if !self.reclaim.try_claim(OWNED) {
            return false;
        }
        self.abandoned = false;
        // Relaxed: read only as a hint by other adopters.
        self.node.store(node as u32, Ordering::Relaxed);
        crate::stats::count(&a.stats.heaps_adopted, 1);
        true
    }

    /// Whether the allocator is abandoned (nobody holds it).
    pub(crate) fn is_abandoned(&self) -> bool {
        self.reclaim.get() == ABANDONED
    }

    /// Superblocks held, over all sub-allocators.
    pub(crate) fn superblocks(&self, classes: usize) -> usize {
        self.subs[..classes].iter().map(|s| s.count as usize).sum()
    }

    /// Blocks handed out and not freed back to us, and the bytes the blocks of our superblocks
    /// have covered since they were mapped or purged (an upper bound of their resident pages),
    /// over all sub-allocators (O(superblocks)).
    ///
    /// # Safety
    /// The caller holds the allocator or it is quiescent.
    pub(crate) unsafe fn usage(&self, classes: usize) -> (usize, usize) {
        let (mut n, mut covered) = (0, 0);
        for s in &self.subs[..classes] {
            let mut sb = s.list;
            while !sb.is_null() {
                // SAFETY: our superblocks.
                unsafe {
                    n += (*sb).used as usize;
                    covered += (*sb).covered();
                    sb = (*sb).next;
                }
            }
        }
        (n, covered)
    }

    /// Checks every invariant of the module docs and of each superblock and queue.
    ///
    /// # Safety
    /// The caller holds the allocator or it is quiescent.
    pub(crate) unsafe fn is_valid(&self, classes: usize, a_heap_ptr: *mut Heap) -> bool {
        let me = a_heap_ptr;
        let mut empty = 0u32;
        for (class, s) in self.subs[..classes].iter().enumerate() {
            if !s.pq.is_valid() {
                return false;
            }
            let (mut n, mut queued) = (0u32, 0usize);
            let mut prev: *mut Superblock = ptr::null_mut();
            let mut sb = s.list;
            while !sb.is_null() {
                // SAFETY: our superblocks.
                let h = unsafe { &*sb };
                if h.owner != me || h.class as usize != class || h.prev != prev || !h.is_valid() {
                    return false;
                }
                // Queued iff not full (a not-full one is left out only when the queue array
                // could not grow, which the tests never provoke).
                if (h.pq_index != NOT_QUEUED) != (h.free() > 0) {
                    return false;
                }
                // Empty ⇔ kept, except the sole superblock of a sub-allocator (`SOLE_BYTES`).
                if h.kept && h.used != 0 || h.used == 0 && !h.kept && s.count != 1 {
                    return false;
                }
                queued += usize::from(h.pq_index != NOT_QUEUED);
                empty += u32::from(h.kept);
                n += 1;
                prev = sb;
                sb = h.next;
            }
            if n != s.count || queued != s.pq.len() {
                return false;
            }
        }
        let max_empty = if self.abandoned { 0 } else { MAX_KEPT };
        let kept = &self.kept_ring[..self.empty_kept as usize];
        // SAFETY: ring members are our superblocks.
        let kept_bytes: usize = kept.iter().map(|&k| unsafe { (*k).touched }).sum();
        kept_bytes == self.kept_bytes
            && kept_bytes <= KEPT_BYTES
            && empty == self.empty_kept
            && empty <= max_empty
            && self.kept_ring[..self.empty_kept as usize]
                .iter()
                // SAFETY: ring members are our superblocks.
                .all(|&k| unsafe { (*k).kept && (*k).used == 0 })
    }
}
