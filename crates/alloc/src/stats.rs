//! Counters of rare events (superblocks, allocators), per allocator instance. Per-block events
//! are not counted: a shared counter on the allocation path would be the contention §5 avoids.

use core::sync::atomic::{AtomicUsize, Ordering};

/// Live counters of one allocator.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) mapped_bytes: AtomicUsize,
    pub(crate) superblocks_mapped: AtomicUsize,
    pub(crate) superblocks_reused: AtomicUsize,
    pub(crate) large_live: AtomicUsize,
    pub(crate) heaps_created: AtomicUsize,
    pub(crate) heaps_adopted: AtomicUsize,
    pub(crate) heaps_abandoned: AtomicUsize,
    pub(crate) reclaims: AtomicUsize,
    pub(crate) purges: AtomicUsize,
    pub(crate) large_mapped: AtomicUsize,
    pub(crate) large_evicted: AtomicUsize,
}

impl Counters {
    pub(crate) const fn new() -> Self {
        Counters {
            mapped_bytes: AtomicUsize::new(0),
            superblocks_mapped: AtomicUsize::new(0),
            superblocks_reused: AtomicUsize::new(0),
            large_live: AtomicUsize::new(0),
            heaps_created: AtomicUsize::new(0),
            heaps_adopted: AtomicUsize::new(0),
            heaps_abandoned: AtomicUsize::new(0),
            reclaims: AtomicUsize::new(0),
            purges: AtomicUsize::new(0),
            large_mapped: AtomicUsize::new(0),
            large_evicted: AtomicUsize::new(0),
        }
    }
}

#[inline]
pub(crate) fn count(c: &AtomicUsize, n: usize) {
    // Relaxed: statistics only.
    c.fetch_add(n, Ordering::Relaxed);
}

#[inline]
pub(crate) fn uncount(c: &AtomicUsize, n: usize) {
    // Relaxed: statistics only.
    c.fetch_sub(n, Ordering::Relaxed);
}

/// A snapshot of an allocator's state (see [`crate::Allocator::stats`]). Taken without stopping
/// the threads: exact only when they are quiescent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes mapped from the OS (superblocks, large blocks, allocate-on-node blocks).
    pub mapped_bytes: usize,
    /// Superblocks in existence.
    pub superblocks: usize,
    /// Superblocks held by local allocators.
    pub superblocks_in_heaps: usize,
    /// Superblocks in the nodes' LIFO stacks.
    pub superblocks_cached: usize,
    /// Times a superblock came from a node's stack instead of the OS.
    pub superblocks_reused: usize,
    /// Large (and allocate-on-node) blocks alive.
    pub large_blocks: usize,
    /// Local allocators created / adopted by a new thread / abandoned by an exiting thread.
    pub heaps_created: usize,
    /// See `heaps_created`.
    pub heaps_adopted: usize,
    /// See `heaps_created`.
    pub heaps_abandoned: usize,
    /// Local allocators abandoned now.
    pub heaps_idle: usize,
    /// Times a freer drained the bins of an abandoned allocator.
    pub reclaims: usize,
    /// Times the pages of a superblock or large block kept by a node were given back to the OS.
    pub purges: usize,
    /// Mappings made for blocks above the sub-allocators' range (not allocate-on-node): those of
    /// the large tier are made once and then reused (`large.rs`), larger ones each time.
    pub large_mapped: usize,
    /// Large blocks kept for reuse in the nodes' caches (thread caches not included).
    pub large_cached: usize,
    /// Cached large blocks unmapped to make room for a new one (`large.rs`, eviction on a miss).
    pub large_evicted: usize,
    /// Blocks of the sub-allocators handed out and not yet freed to their owner (blocks waiting
    /// in a recollection bin count as used).
    pub used_blocks: usize,
    /// Bytes the blocks of the superblocks held by local allocators have covered since those
    /// were mapped or last purged: an upper bound of their resident block pages.
    pub covered_in_heaps: usize,
    /// The same for the superblocks in the nodes' stacks (purged ones count 0).
    pub covered_cached: usize,
}
