//! What an allocator answers about itself and the maintenance its users trigger: ownership of a
//! block, draining bins and releasing caches, invariant checks, statistics, purging.

use core::sync::atomic::Ordering;

use crate::instance::Allocator;
use crate::stats::Stats;
use crate::thread;

impl Allocator {
    /// Whether `p` lies in a mapping of this allocator.
    pub fn owns(&self, p: *const u8) -> bool {
        self.map.lookup(p).is_some()
    }

    /// The NUMA node whose memory backs block `p` of this allocator (where its superblock was
    /// touched or bound), if it is ours.
    pub fn node_of(&self, p: *const u8) -> Option<usize> {
        // SAFETY: a header found in the map is live.
        self.map
            .lookup(p)
            .map(|sb| unsafe { (*sb.as_ptr()).node as usize })
    }

    /// Drains the calling thread's recollection bins now (nearflow workers call this after each
    /// task, §5.1). Cheap when they are empty.
    #[inline]
    pub fn collect(&self) {
        if let Some(h) = thread::current_heap(self) {
            // SAFETY: this thread owns the heap.
            unsafe {
                if (*h.as_ptr()).pending.any_relaxed() {
                    (*h.as_ptr()).collect(self);
                }
            }
        }
    }

    /// The calling thread is about to go idle: its kept empty superblocks and its cached large
    /// blocks go back to their nodes, where the pages of what exceeds the node's reserve are
    /// purged after the delay, instead of staying pinned by an idle thread (up to 16 MiB of
    /// superblocks and 32 MiB of large blocks). nearflow workers call it before they sleep.
    pub fn release_cached(&self) {
        if let Some(h) = thread::current_heap(self) {
            // SAFETY: this thread owns the heap.
            unsafe { (*h.as_ptr()).release_cached(self) };
        }
    }

    /// Checks every invariant of the calling thread's local allocator (superblocks, free lists,
    /// priority queues); true if it has none. O(superblocks + free blocks).
    pub fn check_thread(&self) -> bool {
        match thread::current_heap(self) {
            // SAFETY: this thread owns the heap.
            Some(h) => unsafe { (*h.as_ptr()).is_valid(self.classes.len(), h.as_ptr()) },
            None => true,
        }
    }

    /// Checks the invariants of every node's caches (`node.rs`); true if they hold.
    /// O(cached superblocks and large blocks).
    pub fn check_nodes(&self) -> bool {
        self.nodes.iter().all(|n| n.is_valid())
    }

    /// Checks every abandoned local allocator (claiming each for the check). True if all hold
    /// their invariants.
    pub fn check_abandoned(&self) -> bool {
        self.registered().all(|h| {
            // SAFETY: heaps are never unmapped; we check only what we claim.
            unsafe {
                if !(*h).reclaim.try_claim(crate::bin::CLAIMED) {
                    return true;
                }
                let ok = (*h).is_valid(self.classes.len(), h);
                (*h).reclaim.release();
                ok
            }
        })
    }

    /// A snapshot of the counters and of what the local allocators hold. Exact when the threads
    /// using the allocator are quiescent.
    pub fn stats(&self) -> Stats {
        let c = &self.stats;
        let ld = |a: &core::sync::atomic::AtomicUsize| a.load(Ordering::Relaxed);
        let mut s = Stats {
            mapped_bytes: ld(&c.mapped_bytes),
            superblocks: ld(&c.superblocks_mapped),
            superblocks_reused: ld(&c.superblocks_reused),
            large_blocks: ld(&c.large_live),
            heaps_created: ld(&c.heaps_created),
            heaps_adopted: ld(&c.heaps_adopted),
            heaps_abandoned: ld(&c.heaps_abandoned),
            reclaims: ld(&c.reclaims),
            purges: ld(&c.purges),
            large_mapped: ld(&c.large_mapped),
            large_cached: self.nodes.iter().map(|n| n.cached_large()).sum(),
            large_evicted: ld(&c.large_evicted),
            ..Stats::default()
        };
        for n in &self.nodes {
            let (cached, covered) = n.cached();
            s.superblocks_cached += cached;
            s.covered_cached += covered;
        }
        for h in self.registered() {
            // SAFETY: heaps are never unmapped; the counts are read racily (documented).
            unsafe {
                s.superblocks_in_heaps += (*h).superblocks(self.classes.len());
                let (used, covered) = (*h).usage(self.classes.len());
                s.used_blocks += used;
                s.covered_in_heaps += covered;
                s.heaps_idle += usize::from((*h).is_abandoned());
            }
        }
        s
    }

    /// Gives the pages of what the nodes keep beyond their reserve, unused for the purge delay,
    /// back to the OS now (it otherwise happens as the nodes are used; see `Config`).
    pub fn purge(&self) {
        for n in &self.nodes {
            n.sweep_now(self);
        }
    }
}
