//! Freeing: a block of the calling thread's local allocator goes back to it, another thread's
//! to that thread's recollection bin (§5.1), a large block to a cache or the OS, an empty
//! superblock to its node (§5.2).

use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use crate::heap::Heap;
use crate::instance::Allocator;
use crate::large::NO_CLASS;
use crate::node::{self, MAX_NODES};
use crate::stats;
use crate::superblock::{Kind, Superblock};
use crate::{sys, thread};

impl Allocator {
    /// Frees a large block: into the freeing thread's cache when it is of the thread's node and
    /// cacheable, else into its node's cache, else (not cacheable) back to the OS.
    ///
    /// # Safety
    /// `sb` is a live large mapping whose block is given up.
    unsafe fn free_large(&self, sb: *mut Superblock) {
        stats::uncount(&self.stats.large_live, 1);
        // SAFETY: `sb` is a live mapping header (caller), and its block was just given up, so
        // nobody writes the header while we read it.
        let (c, node) = unsafe { ((*sb).large_class, (*sb).node as usize % MAX_NODES) };
        // SAFETY (non-null): a live header's address.
        let sb_nn = unsafe { NonNull::new_unchecked(sb) };
        if c == NO_CLASS {
            // SAFETY: an uncached large mapping whose only block was given up: nobody holds it.
            unsafe { node::destroy(self, sb_nn) };
            return;
        }
        if let Some(h) = thread::current_heap(self) {
            // SAFETY: `current_heap` is the local allocator this thread holds: nobody else
            // touches its large-block cache while we do.
            let h = unsafe { &mut *h.as_ptr() };
            if h.node.load(Ordering::Relaxed) as usize % MAX_NODES == node
                && h.large.put(c as usize, sb)
            {
                return;
            }
        }
        // SAFETY: a cacheable large mapping nobody holds, of node `node`.
        unsafe { self.nodes[node].put_large(self, c as usize, sb_nn) };
    }

    /// Frees a block of this allocator, or of the system allocator (null is ignored). A block
    /// of another thread's local allocator goes to that thread's recollection bin (§5.1).
    ///
    /// # Safety
    /// `p` is null or a live block from this allocator (any of its entry points) or from the
    /// system allocator, not used after this call.
    pub unsafe fn free(&self, p: *mut u8) {
        if p.is_null() {
            return;
        }
        match self.map.lookup(p) {
            // SAFETY: by the caller's contract, a live block of ours.
            Some(sb) => unsafe { self.free_ours(sb.as_ptr(), p) },
            // SAFETY: by the caller's contract, a system block.
            None => unsafe { sys::free(p) },
        }
    }

    /// # Safety
    /// `p` is a live block of mapping `sb`.
    pub(crate) unsafe fn free_ours(&self, sb: *mut Superblock, p: *mut u8) {
        // SAFETY: `sb` is the live header of `p`'s mapping. Its owner is stable while any of its
        // blocks is handed out.
        unsafe {
            if (*sb).kind == Kind::Large {
                self.free_large(sb);
                return;
            }
            let owner = (*sb).owner;
            debug_assert!(
                !owner.is_null(),
                "double free of a block of a released superblock"
            );
            match thread::current_heap(self) {
                Some(me) if me.as_ptr() == owner => (*owner).free_local(self, sb, p),
                Some(me) => Heap::free_foreign(self, owner, (*me.as_ptr()).id as usize, p),
                None => Heap::free_foreign(self, owner, 0, p),
            }
        }
    }

    /// Gives an empty superblock back to its node (§5.2), or to the OS when the node's stack is
    /// full.
    ///
    /// # Safety
    /// `sb` is an empty superblock nobody holds any more.
    pub(crate) unsafe fn give_back(&self, sb: NonNull<Superblock>) {
        // SAFETY: live header.
        let node = unsafe { (*sb.as_ptr()).node } as usize % MAX_NODES;
        // SAFETY: by the caller's contract.
        if let Some(extra) =
            unsafe { self.nodes[node].release(self, sb, self.cfg.cached_superblocks) }
        {
            // SAFETY: nobody holds it.
            unsafe { node::destroy(self, extra) };
        }
    }
}
