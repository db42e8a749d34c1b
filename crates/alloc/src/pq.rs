//! The priority queue of a sub-allocator's not-full superblocks, keyed by free-block count with
//! the **most occupied** (fewest free blocks) at the top (§5.1). A binary heap whose array comes
//! from the OS layer (the allocator cannot allocate through itself); each superblock remembers
//! its position (`pq_index`) so a free can re-sift it in O(log n).
//!
//! Invariant (checked by [`PrioQueue::is_valid`]): entry `i` has `pq_index == i`, 0 < free <
//! capacity… or = capacity for the one empty superblock a sub-allocator may keep, and no child
//! has fewer free blocks than its parent.

use core::ptr::{self, NonNull};

use crate::os;
use crate::superblock::{Superblock, NOT_QUEUED};

/// A binary min-heap of superblocks by free blocks.
pub(crate) struct PrioQueue {
    items: *mut *mut Superblock,
    len: usize,
    cap: usize,
}

impl PrioQueue {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The most occupied not-full superblock.
    #[inline]
    pub(crate) fn top(&self) -> *mut Superblock {
        if self.len == 0 {
            ptr::null_mut()
        } else {
            // SAFETY: `len > 0` entries are initialised.
            unsafe { *self.items }
        }
    }

    #[inline]
    fn key(&self, i: usize) -> u32 {
        // SAFETY: `i < len`; queued superblocks are live.
        unsafe { (**self.items.add(i)).free() }
    }

    #[inline]
    fn set(&mut self, i: usize, sb: *mut Superblock) {
        // SAFETY: `i < cap`; `sb` is a live superblock.
        unsafe {
            *self.items.add(i) = sb;
            (*sb).pq_index = i as u32;
        }
    }

    #[inline]
    fn get(&self, i: usize) -> *mut Superblock {
        // SAFETY: `i < len`.
        unsafe { *self.items.add(i) }
    }

    /// Adds a superblock. Returns false when the array cannot grow (out of memory).
    pub(crate) fn push(&mut self, sb: *mut Superblock) -> bool {
        if self.len == self.cap && !self.grow() {
            return false;
        }
        self.len += 1;
        self.set(self.len - 1, sb);
        self.sift_up(self.len - 1);
        true
    }

    /// Removes a queued superblock.
    pub(crate) fn remove(&mut self, sb: *mut Superblock) {
        // SAFETY: `sb` is queued, so live.
        let i = unsafe { (*sb).pq_index } as usize;
        debug_assert!(i < self.len && self.get(i) == sb);
        self.len -= 1;
        if i != self.len {
            let last = self.get(self.len);
            self.set(i, last);
            self.sift_down(i);
            self.sift_up(i);
        }
        // SAFETY: `sb` is live.
        unsafe { (*sb).pq_index = NOT_QUEUED };
    }

    /// Restores the order after the free count of a queued superblock went up.
    #[inline]
    pub(crate) fn increased(&mut self, sb: *mut Superblock) {
        // SAFETY: `sb` is queued, so live.
        let i = unsafe { (*sb).pq_index } as usize;
        self.sift_down(i);
    }

    fn sift_up(&mut self, mut i: usize) {
        let sb = self.get(i);
        let k = self.key(i);
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.key(parent) <= k {
                break;
            }
            self.set(i, self.get(parent));
            i = parent;
        }
        self.set(i, sb);
    }

    fn sift_down(&mut self, mut i: usize) {
        let sb = self.get(i);
        let k = self.key(i);
        loop {
            let l = 2 * i + 1;
            if l >= self.len {
                break;
            }
            let r = l + 1;
            let c = if r < self.len && self.key(r) < self.key(l) {
                r
            } else {
                l
            };
            if self.key(c) >= k {
                break;
            }
            self.set(i, self.get(c));
            i = c;
        }
        self.set(i, sb);
    }

    fn grow(&mut self) -> bool {
        let new_cap = (self.cap * 2).max(os::PAGE / core::mem::size_of::<usize>());
        let bytes = new_cap * core::mem::size_of::<usize>();
        let Ok(fresh) = os::map(bytes) else {
            return false;
        };
        let fresh = fresh.as_ptr().cast::<*mut Superblock>();
        if self.cap > 0 {
            // SAFETY: both arrays are ours and `len ≤ cap < new_cap`.
            unsafe {
                ptr::copy_nonoverlapping(self.items, fresh, self.len);
                os::unmap(
                    NonNull::new_unchecked(self.items.cast()),
                    self.cap * core::mem::size_of::<usize>(),
                );
            }
        }
        self.items = fresh;
        self.cap = new_cap;
        true
    }

    /// Checks positions and heap order.
    pub(crate) fn is_valid(&self) -> bool {
        (0..self.len).all(|i| {
            let sb = self.get(i);
            // SAFETY: queued superblocks are live.
            let (idx, free) = unsafe { ((*sb).pq_index as usize, (*sb).free()) };
            idx == i && free > 0 && (i == 0 || self.key((i - 1) / 2) <= free)
        })
    }
}
