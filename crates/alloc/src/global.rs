//! The process-wide allocator and its `GlobalAlloc` face.

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicU8, Ordering};

use crate::config::{Config, SizeClasses};
use crate::thread;
use crate::AllocatorKind;
use crate::{sys, Allocator};

const CLASSES: SizeClasses = match SizeClasses::new(
    Config::DEFAULT.min_block,
    Config::DEFAULT.max_block,
    Config::DEFAULT.growth_permille,
) {
    Ok(c) => c,
    Err(_) => panic!("the default settings are valid"),
};

/// The process-wide allocator, with the paper's settings ([`Config::DEFAULT`]). [`Nearflow`] and
/// the `LD_PRELOAD` library allocate from it.
pub static GLOBAL: Allocator = Allocator::build(Config::DEFAULT, CLASSES);

static DEFAULT_CHOICE: AtomicU8 = AtomicU8::new(AllocatorKind::Nearflow as u8);

/// Sets the choice of every thread that has not made its own ([`crate::set_thread_choice`]).
pub fn set_default_choice(c: AllocatorKind) {
    // Relaxed: a setting read on each allocation; threads started later see it through the
    // spawn's happens-before.
    DEFAULT_CHOICE.store(c as u8, Ordering::Relaxed);
}

/// The choice the calling thread's allocations follow.
pub fn current_choice() -> AllocatorKind {
    if use_nearflow() {
        AllocatorKind::Nearflow
    } else {
        AllocatorKind::System
    }
}

#[inline]
fn use_nearflow() -> bool {
    let c = thread::choice();
    let c = if c == 0 {
        // Relaxed: see `set_default_choice`.
        DEFAULT_CHOICE.load(Ordering::Relaxed)
    } else {
        c
    };
    c == AllocatorKind::Nearflow as u8
}

/// `GlobalAlloc` over [`GLOBAL`]: `#[global_allocator] static A: nearflow_alloc::Nearflow =
/// nearflow_alloc::Nearflow;`
///
/// Requests below 8 KB go to the system allocator, 8–512 KB to the calling thread's local
/// allocator, larger ones to the OS (§5). A thread (or the process, by default) may choose the
/// system allocator for everything instead ([`AllocatorKind`]); frees find the owner of a block from its
/// address, so blocks of either kind may be freed under either choice.
pub struct Nearflow;

// SAFETY: every block returned has at least `layout.size()` bytes at `layout.align()`: the
// system allocator's by its contract, ours by `Allocator::alloc_aligned`. `dealloc` routes each
// block to the allocator that made it (small sizes never reach ours; others are looked up).
unsafe impl GlobalAlloc for Nearflow {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        if size < Config::DEFAULT.min_block || !use_nearflow() {
            return if align <= 16 {
                sys::malloc(size)
            } else {
                sys::memalign(align, size)
            };
        }
        GLOBAL.alloc_aligned(size, align)
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if layout.size() < Config::DEFAULT.min_block {
            // SAFETY: blocks this small always come from the system allocator.
            unsafe { sys::free(p) }
        } else {
            // SAFETY: a live block of ours or of the system allocator.
            unsafe { GLOBAL.free(p) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        let ours = old >= Config::DEFAULT.min_block && GLOBAL.owns(p);
        let to_system = new_size < Config::DEFAULT.min_block || !use_nearflow();
        if !ours && to_system && layout.align() <= 16 {
            // SAFETY: a system block, staying with the system allocator.
            return unsafe { sys::realloc(p, new_size) };
        }
        if ours && !to_system && layout.align() <= crate::CACHE_LINE {
            // SAFETY: a live block of ours; C realloc semantics match (new_size > 0).
            return unsafe { GLOBAL.realloc(p, new_size) };
        }
        // SAFETY: a valid layout (same alignment, size checked by the caller's contract).
        let q = unsafe { self.alloc(Layout::from_size_align_unchecked(new_size, layout.align())) };
        if !q.is_null() {
            // SAFETY: both live; copy the smaller size; then free the old block.
            unsafe {
                q.copy_from_nonoverlapping(p, old.min(new_size));
                self.dealloc(p, layout);
            }
        }
        q
    }
}
