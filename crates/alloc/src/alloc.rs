//! Allocation, routed by size (§5): below `min_block` the system allocator, up to `max_block`
//! the calling thread's local allocator, above it the large tier or the OS.

use core::ptr::{self, NonNull};
use core::sync::atomic::Ordering;

use crate::config::CACHE_LINE;
use crate::instance::{AllocError, Allocator};
use crate::node::{self, Placement, MAX_NODES};
use crate::os::{self, OsError, GRANULE, PAGE};
use crate::stats;
use crate::superblock::{Kind, Superblock, HEADER};
use crate::{sys, thread};

impl Allocator {
    /// Allocates `size` bytes aligned to at least 16 (64 inside the sub-allocators' range).
    /// Null when memory is exhausted. `size` 0 gives a valid unique pointer.
    #[inline]
    pub fn alloc(&self, size: usize) -> *mut u8 {
        self.alloc_aligned(size, 16)
    }

    /// Allocates `size` bytes aligned to `align` (a power of two). Null when memory is exhausted
    /// or the alignment is not a power of two.
    pub fn alloc_aligned(&self, size: usize, align: usize) -> *mut u8 {
        if !align.is_power_of_two() {
            return ptr::null_mut();
        }
        if size < self.cfg.min_block {
            // §5: smaller blocks come from the system allocator.
            return if align <= 16 {
                sys::malloc(size)
            } else {
                sys::memalign(align, size)
            };
        }
        if let Some(class) = self.class_for(size) {
            if align > CACHE_LINE {
                return sys::memalign(align, size);
            }
            match thread::heap(self) {
                // SAFETY: this thread owns the heap; `class` is valid.
                Some(h) => unsafe { (*h.as_ptr()).alloc(self, class) },
                None => sys::malloc(size),
            }
        } else {
            // §5: larger blocks come straight from the OS.
            self.alloc_large(size, align)
        }
    }

    fn alloc_large(&self, size: usize, align: usize) -> *mut u8 {
        if align > GRANULE {
            return sys::memalign(align, size);
        }
        if align <= HEADER {
            if let Some(c) = self.large.class_of(size) {
                return self.alloc_large_cached(c);
            }
        }
        let offset = HEADER.max(align);
        let Some(len) = size.checked_add(offset + PAGE - 1).map(|n| n & !(PAGE - 1)) else {
            return ptr::null_mut();
        };
        match node::fresh(
            self,
            os::current_node() % MAX_NODES,
            len,
            Placement::FirstTouch,
            Kind::Large,
            false,
        ) {
            Ok(sb) => {
                stats::count(&self.stats.large_mapped, 1);
                // SAFETY: a fresh header of ours.
                unsafe {
                    (*sb.as_ptr()).offset = offset;
                    stats::count(&self.stats.large_live, 1);
                    (*sb.as_ptr()).base.add(offset)
                }
            }
            Err(_) => ptr::null_mut(),
        }
    }

    /// A block of large class `c` (`large.rs`): from the thread's cache, else its node's, else
    /// a new mapping on its node.
    fn alloc_large_cached(&self, c: usize) -> *mut u8 {
        let heap = thread::heap(self);
        let node = match heap {
            // SAFETY: this thread holds its local allocator; `node` is atomic.
            Some(h) => unsafe {
                if let Some(sb) = (*h.as_ptr()).large.take_fit(c) {
                    return self.hand_out_large(sb);
                }
                (*h.as_ptr()).node.load(Ordering::Relaxed) as usize
            },
            None => os::current_node(),
        } % MAX_NODES;
        if let Some(sb) = self.nodes[node].take_large(self, c) {
            return self.hand_out_large(sb.as_ptr());
        }
        self.map_large(node, c)
    }

    /// A miss of the large tier: room made on `node` (`large.rs`, eviction), then a new block
    /// of class `c` mapped. Out of line, so the hit path stays small.
    #[cold]
    #[inline(never)]
    fn map_large(&self, node: usize, c: usize) -> *mut u8 {
        let len = HEADER + self.large.size(c);
        self.nodes[node].evict_large(self, len);
        match node::fresh(self, node, len, Placement::FirstTouch, Kind::Large, false) {
            Ok(sb) => {
                // SAFETY: a fresh header of ours.
                unsafe {
                    (*sb.as_ptr()).offset = HEADER;
                    (*sb.as_ptr()).large_class = c as u32;
                }
                stats::count(&self.stats.large_mapped, 1);
                self.hand_out_large(sb.as_ptr())
            }
            Err(_) => ptr::null_mut(),
        }
    }

    #[inline]
    fn hand_out_large(&self, sb: *mut Superblock) -> *mut u8 {
        stats::count(&self.stats.large_live, 1);
        // SAFETY: a live large mapping, ours alone; the block starts at `offset`.
        unsafe { (*sb).base.add((*sb).offset) }
    }

    /// Allocates `size` bytes whose pages are on NUMA node `node` (mbind, then touched by the
    /// caller). Page-granular: meant for per-node partitions (SplittableData), not small
    /// objects. Free it with [`Allocator::free`].
    pub fn alloc_on_node(&self, size: usize, node: usize) -> Result<NonNull<u8>, AllocError> {
        if node >= MAX_NODES {
            return Err(AllocError::NoSuchNode {
                node,
                errno: libc::EINVAL,
            });
        }
        let len = size
            .checked_add(HEADER + PAGE - 1)
            .map(|n| n & !(PAGE - 1))
            .ok_or(AllocError::OutOfMemory)?;
        let sb =
            node::fresh(self, node, len, Placement::Bind, Kind::Large, true).map_err(
                |e| match e {
                    OsError::NoMemory => AllocError::OutOfMemory,
                    OsError::Node(errno) => AllocError::NoSuchNode { node, errno },
                },
            )?;
        // SAFETY: a fresh header of ours.
        unsafe {
            (*sb.as_ptr()).node = node as u32;
            (*sb.as_ptr()).offset = HEADER;
            stats::count(&self.stats.large_live, 1);
            Ok(NonNull::new_unchecked((*sb.as_ptr()).base.add(HEADER)))
        }
    }
}
