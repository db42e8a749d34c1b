//! One allocator: its settings and shared parts (address map, superblock allocators, registry
//! of local allocators). Its entry points are split by concern, as mimalloc splits its own:
//! `alloc.rs` (allocation, routed by size, §5), `free.rs` (freeing, local and foreign, §5.1),
//! `posix.rs` (`calloc`, `realloc`, usable size), `inspect.rs` (ownership, draining, checks,
//! statistics); `options.rs` reads the environment.

use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use crate::config::{round_up, Config, ConfigError, SizeClasses};
use crate::heap::{Heap, MAX_HEAPS};
use crate::large::LargeClasses;
use crate::map::AddrMap;
use crate::node::{SuperblockAllocator, MAX_NODES};
use crate::os::{self, PAGE};
use crate::stats::{self, Counters};

/// Why an allocate-on-node request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// The OS refused memory.
    #[error("out of memory")]
    OutOfMemory,
    /// The node does not exist or has no memory (mbind failed with this errno).
    #[error("NUMA node {node} is not available (mbind: errno {errno})")]
    NoSuchNode {
        /// Node asked for.
        node: usize,
        /// errno of mbind.
        errno: i32,
    },
}

/// A NUMA-aware allocator (§5). The process-wide one is [`crate::GLOBAL`]; others, with other
/// settings, come from [`Allocator::new`] and live as long as the process.
pub struct Allocator {
    pub(crate) cfg: Config,
    pub(crate) classes: SizeClasses,
    pub(crate) large: LargeClasses,
    pub(crate) map: AddrMap,
    pub(crate) nodes: [SuperblockAllocator; MAX_NODES],
    /// Local allocators by id; id 0 is never used (it names "a thread without one" in bins).
    heaps: [AtomicPtr<Heap>; MAX_HEAPS],
    next_id: AtomicU32,
    /// The superblock size in use; 0 until the first superblock (see `superblock_size`).
    sb_size: AtomicUsize,
    pub(crate) stats: Counters,
}

impl Allocator {
    pub(crate) const fn build(cfg: Config, classes: SizeClasses) -> Self {
        let large = match LargeClasses::new(cfg.max_block, cfg.large_max) {
            Some(l) => l,
            None => panic!("the settings were checked by `Config::classes`"),
        };
        Allocator {
            cfg,
            classes,
            large,
            map: AddrMap::new(),
            nodes: [const { SuperblockAllocator::new() }; MAX_NODES],
            heaps: [const { AtomicPtr::new(ptr::null_mut()) }; MAX_HEAPS],
            next_id: AtomicU32::new(1),
            sb_size: AtomicUsize::new(0),
            stats: Counters::new(),
        }
    }

    /// A new allocator with these settings. It is never freed (threads may hold its blocks
    /// until the process ends); a thread can use at most seven such allocators besides
    /// [`crate::GLOBAL`] (more fall back to the system allocator for that thread).
    pub fn new(cfg: Config) -> Result<&'static Allocator, ConfigError> {
        let classes = cfg.classes()?;
        Ok(Box::leak(Box::new(Allocator::build(cfg, classes))))
    }

    /// The sub-allocator for a request of `size` bytes; None below `min_block` (never asked)
    /// and above `max_block` (§5: those go to the OS, even where the last block size, rounded
    /// up, would hold them).
    #[inline]
    pub(crate) fn class_for(&self, size: usize) -> Option<usize> {
        if size > self.cfg.max_block {
            None
        } else {
            self.classes.class_of(size)
        }
    }

    /// The superblock size in use: the setting, except that [`crate::GLOBAL`] (and so the
    /// `LD_PRELOAD` library) takes `NEARFLOW_SUPERBLOCK_KB` from the environment when it is set
    /// and usable, read once, at the first superblock.
    pub fn superblock_size(&self) -> usize {
        // Relaxed: every thread that resolves it computes the same value.
        let s = self.sb_size.load(Ordering::Relaxed);
        if s != 0 {
            return s;
        }
        let s = if ptr::eq(self, &crate::GLOBAL) {
            crate::options::superblock_size(&self.cfg).unwrap_or(self.cfg.superblock_size)
        } else {
            self.cfg.superblock_size
        };
        // Relaxed: as above.
        self.sb_size.store(s, Ordering::Relaxed);
        s
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The block sizes of the sub-allocators.
    pub fn classes(&self) -> &SizeClasses {
        &self.classes
    }

    /// The registry's pointer to local allocator `id` (the one `owner` fields hold).
    pub(crate) fn heap_ptr(&self, id: u32) -> *mut Heap {
        // Acquire: pairs with the Release store in `new_heap`.
        self.heaps[id as usize].load(Ordering::Acquire)
    }

    pub(crate) fn registered(&self) -> impl Iterator<Item = *mut Heap> + '_ {
        // Acquire: pairs with the Release store in `new_heap`.
        let n = (self.next_id.load(Ordering::Acquire) as usize).min(MAX_HEAPS);
        // Acquire: as above.
        (1..n)
            .map(|i| self.heaps[i].load(Ordering::Acquire))
            .filter(|h| !h.is_null())
    }

    /// A local allocator for a new thread on `node`: an abandoned one of that node, else a new
    /// one, else any abandoned one. None when all `MAX_HEAPS − 1` are in use.
    pub(crate) fn bind_heap(&self, node: usize) -> Option<NonNull<Heap>> {
        let node = node % MAX_NODES;
        let adopt = |same_node: bool| {
            self.registered().find(|&h| {
                // SAFETY: heaps are never unmapped; `node` is atomic.
                let hn = unsafe { (*h).node.load(Ordering::Relaxed) } as usize;
                // SAFETY: adoption goes through the state CAS.
                (!same_node || hn == node) && unsafe { (*h).adopt(self, node) }
            })
        };
        if let Some(h) = adopt(true) {
            return NonNull::new(h);
        }
        if let Some(h) = self.new_heap(node) {
            return Some(h);
        }
        adopt(false).and_then(NonNull::new)
    }

    fn new_heap(&self, node: usize) -> Option<NonNull<Heap>> {
        // Relaxed: the id is unique by the RMW; the heap is published by the Release below.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) as usize;
        if id >= MAX_HEAPS {
            // Keep the counter from wrapping.
            self.next_id.store(MAX_HEAPS as u32, Ordering::Relaxed);
            return None;
        }
        let bytes = round_up(core::mem::size_of::<Heap>(), PAGE);
        let p = os::map(bytes).ok()?.cast::<Heap>();
        // SAFETY: a zeroed mapping is a valid empty heap (null pointers, zero counters, atomics
        // at 0); we set its identity before publishing it.
        unsafe {
            let h = p.as_ptr();
            ptr::addr_of_mut!((*h).id).write(id as u32);
            (*h).node.store(node as u32, Ordering::Relaxed);
            debug_assert_eq!((*h).reclaim.get(), crate::bin::UNUSED);
            (*h).reclaim.set(crate::bin::OWNED);
        }
        // Release: pairs with the Acquire loads in `registered`.
        self.heaps[id].store(p.as_ptr(), Ordering::Release);
        stats::count(&self.stats.heaps_created, 1);
        Some(p)
    }
}
