//! The C library's other entry points on an allocator: `calloc`, `realloc` and the usable size.

use core::ptr;

use crate::instance::Allocator;
use crate::superblock::Kind;
use crate::sys;

impl Allocator {
    /// `calloc`: `n · size` zeroed bytes, null on overflow or exhaustion.
    pub fn calloc(&self, n: usize, size: usize) -> *mut u8 {
        let Some(total) = n.checked_mul(size) else {
            return ptr::null_mut();
        };
        if total < self.cfg.min_block {
            return sys::calloc(n, size);
        }
        let p = self.alloc(total);
        // Above the large tier every block is a fresh mapping, zero already: writing it would
        // back every page (a `calloc` of a huge product was OOM-killed where glibc,
        // which also skips the write for fresh mappings, returns lazily zeroed memory).
        let fresh = self.class_for(total).is_none() && self.large.class_of(total).is_none();
        if !p.is_null() && !fresh {
            // SAFETY: `total` bytes were just allocated; reused blocks hold old data.
            unsafe { p.write_bytes(0, total) };
        }
        p
    }

    /// `realloc` with C semantics: null `p` allocates; size 0 frees and returns null; the block
    /// stays in place when the new size fits the same block size.
    ///
    /// # Safety
    /// As for [`Allocator::free`].
    pub unsafe fn realloc(&self, p: *mut u8, new: usize) -> *mut u8 {
        if p.is_null() {
            return self.alloc(new);
        }
        if new == 0 {
            // SAFETY: by the caller's contract.
            unsafe { self.free(p) };
            return ptr::null_mut();
        }
        let old = match self.map.lookup(p) {
            Some(sb) => {
                // SAFETY: live header.
                let h = unsafe { &*sb.as_ptr() };
                match h.kind {
                    Kind::Super => {
                        let bs = h.block_size as usize;
                        if new <= bs && self.class_for(new) == Some(h.class as usize) {
                            return p;
                        }
                        bs
                    }
                    Kind::Large => {
                        let usable = h.len - h.offset;
                        if new <= usable && new > usable / 2 && self.class_for(new).is_none() {
                            return p;
                        }
                        usable
                    }
                }
            }
            None => {
                if new < self.cfg.min_block {
                    // SAFETY: a system block staying with the system allocator.
                    return unsafe { sys::realloc(p, new) };
                }
                // SAFETY: a system block.
                unsafe { sys::usable_size(p) }
            }
        };
        let q = self.alloc(new);
        if !q.is_null() {
            // SAFETY: both live, distinct; copy what both can hold, then free the old block.
            unsafe {
                q.copy_from_nonoverlapping(p, old.min(new));
                self.free(p);
            }
        }
        q
    }

    /// The usable size of a block of this allocator or of the system allocator.
    ///
    /// # Safety
    /// `p` is a live block, as for [`Allocator::free`].
    pub unsafe fn usable_size(&self, p: *mut u8) -> usize {
        if p.is_null() {
            return 0;
        }
        let Some(sb) = self.map.lookup(p) else {
            // SAFETY: by the caller's contract, a system block.
            return unsafe { sys::usable_size(p) };
        };
        // SAFETY: live header.
        unsafe {
            let h = &*sb.as_ptr();
            match h.kind {
                Kind::Super => h.block_size as usize,
                Kind::Large => h.len - h.offset,
            }
        }
    }
}
