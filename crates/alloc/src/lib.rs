//! # nearflow-alloc — the NUMA-aware allocator of the LAS paper
//!
//! `../shared/papers/las-scheduler-and-numa-allocator.txt` §5 (all of it), with §3.2's aims:
//! speed with one thread and many, scaling, no false sharing, low fragmentation. This page is the
//! map of the allocator (as mimalloc's `types.h` is of mimalloc): every structure, who may touch
//! it, and what it counts. Debug builds run the checkers of the superblock and of its priority
//! queue (`Superblock::is_valid`, `PrioQueue::is_valid`) on every allocation and free; the
//! checker of a whole local allocator (`Heap::is_valid`) runs from the tests through
//! [`Allocator::check_thread`] and [`Allocator::check_abandoned`].
//!
//! ```
//! let a = &nearflow_alloc::GLOBAL;
//! let p = a.alloc(64 << 10);                 // 64 KiB: from this thread's local allocator
//! assert!(a.owns(p));
//! unsafe { p.write_bytes(7, 64 << 10) };
//! unsafe { a.free(p) };
//! let small = a.alloc(100);                  // below 8 KiB: the system allocator
//! assert!(!a.owns(small));
//! unsafe { a.free(small) };
//! ```
//!
//! ## Routing by size (§5)
//!
//! | request          | served by                                                      |
//! |------------------|----------------------------------------------------------------|
//! | < 8 KiB          | the system allocator (`sys.rs`: C `malloc`; `__libc_malloc` in the `LD_PRELOAD` library) |
//! | 8 KiB … 512 KiB  | the calling thread's local allocator (`heap.rs`)               |
//! | > 512 KiB … 64 MiB | the large tier (`large.rs`, our extension): the thread's cache, its node's cache, else a new mapping on its node |
//! | > 64 MiB, or aligned above a page | its own mapping from the OS (`Kind::Large`), as §5 does above 512 KiB |
//!
//! The bounds, the growth factor and the superblock size are settings ([`Config`]); the
//! process-wide [`GLOBAL`] uses the paper's ([`Config::DEFAULT`]).
//!
//! ## Layers, one file each (bottom up)
//!
//! - `os.rs` — **OS layer**: `mmap` aligned to a 2 MiB granule, `mbind`, first touch, `getcpu`,
//!   `move_pages`. Under Miri: `std::alloc::System` and node 0, so the logic above runs there.
//! - `map.rs` — **address map** (`AddrMap`): granule → mapping header, a two-level radix table.
//!   Lets `free(p)` tell our blocks from the system allocator's without a size. Entries are set
//!   before a mapping's first block is handed out and cleared only when it is unmapped.
//! - `large.rs` — **large tier** (our extension of §5): size classes above 512 KiB (eight per
//!   doubling, to 64 MiB), per-thread caches of freed blocks (in `Heap`), per-node caches (in
//!   `node.rs`). Blocks up to 64 MiB are reused without a system call in the steady state.
//! - `superblock.rs` — **superblock** (`Superblock`, §5.1–5.2): one mapping (10 MB), header in
//!   its first page, then `capacity` blocks of one size. Owned by one local allocator, or by
//!   its node's superblock allocator while `owner` is null.
//!   *Invariant:* `used + free_len + (capacity − bump) = capacity`; the doubly linked free list
//!   (links inside the free blocks, LIFO) holds exactly `free_len` blocks, all below `bump`.
//! - `node.rs` — **superblock allocator** (`SuperblockAllocator`, §5.2), one per NUMA node,
//!   one lock each: new superblocks are backed page by page as their blocks are first written
//!   by the owning thread (first touch puts them on its node), or bound with `mbind` first
//!   (allocate-on-node); released ones go to a LIFO stack, reused first; the same lock guards
//!   the node's large-block cache. What a node keeps beyond `node_reserve_bytes` is purged
//!   (`MADV_DONTNEED`) after `purge_delay_ms` unused. *Invariant:* stack members have no owner
//!   and are not queued; purged members form the stack's tail.
//! - `pq.rs` — **priority queue** (`PrioQueue`) of one sub-allocator's not-full superblocks,
//!   fewest free blocks (most occupied) on top. *Invariant:* heap order; each member's
//!   `pq_index` is its position; a member has a free block.
//! - `bin.rs` — **recollection bins** (`RecollectionBin`, §5.1): per (owner, freer) pair, a
//!   list under a spin-lock; a bitmap of non-empty bins (`Pending`); the life states of a local
//!   allocator (`Reclaim`: owned, abandoned, claimed). Model-checked with loom.
//! - `heap.rs` — **local allocator** (`Heap`, §5.1), one per thread: sub-allocators S0…S61,
//!   each a list of superblocks plus a priority queue; no lock on its path. Only the holder (the
//!   owning thread, or the claimer of an abandoned one) touches them. *Invariants:* each
//!   sub-allocator's `count` is its list's length; a superblock is queued iff it has a free
//!   block; at most 32 empty superblocks in all, holding at most 16 MiB of touched pages,
//!   flagged `kept` (none once abandoned), besides the sole superblock of a sub-allocator,
//!   which stays while it has touched at most 1 MiB.
//! - `instance.rs` — **allocator** ([`Allocator`]): settings, address map, superblock allocators,
//!   registry of local allocators (≤ 1023; id 0 names threads without one). Its entry points,
//!   by concern: `alloc.rs` (routing by size), `free.rs` (local, foreign and large frees),
//!   `posix.rs` (`calloc`, `realloc`, usable size), `inspect.rs` (ownership, draining, checks,
//!   statistics, purging).
//! - `options.rs` — every environment variable, read in one place without allocating.
//! - `thread.rs` — which local allocator a thread uses (a `const` thread-local) and its teardown
//!   (a pthread key destructor).
//! - `global.rs` — [`GLOBAL`] and [`Nearflow`], the `GlobalAlloc`.
//! - `checks.rs` — checks with `move_pages` that pages are where §5.2 says.
//! - `config.rs` — the settings and the sub-allocators' block sizes.
//! - `stats.rs` — counters of rare events (superblocks, allocators).
//! - `sync.rs` — the loom shim every primitive of the bin protocol comes through.
//!
//! ## Foreign frees (§5.1)
//!
//! "The memory is always deallocated only by the thread that owns it." A thread freeing another
//! thread's block pushes it into the owner's recollection bin for that pair and marks it pending;
//! the owner drains its bins on its next allocation (one relaxed load when none are pending),
//! and nearflow workers drain after each task ([`Allocator::collect`]) and give what their
//! thread keeps back to the node before they sleep ([`Allocator::release_cached`]). A
//! superblock left empty goes back to its node's superblock allocator, except the most recently
//! emptied ones of each local allocator (up to 32, and 16 MiB of their touched pages) and the only superblock of a
//! size while it has touched at most 1 MiB, kept so that a thread allocating and freeing blocks
//! of many sizes does not fetch a superblock each time.
//!
//! ## Threads that exit
//!
//! The pthread key destructor abandons the thread's local allocator: it drains the bins, gives
//! every empty superblock to its node, and marks the allocator abandoned, keeping superblocks
//! that still have blocks in use elsewhere. Nothing becomes unreachable:
//! - a later free of such a block goes to the abandoned allocator's bin, and the freer then
//!   claims the allocator, drains it and gives back what became empty (see `bin.rs` for why no
//!   block waits forever);
//! - a new thread adopts an abandoned allocator (preferring one of its node) before making a
//!   new one, so allocators are recycled and their count is bounded by the threads alive at once.
//!
//! ## What is not from the paper
//!
//! - Lazy formatting: blocks past `bump` are not linked until first handed out.
//! - No full touch: §5.2 touches a superblock in full when it is mapped. Here its pages are
//!   backed when its blocks are first written, by the owning thread (so still on its node: the
//!   placement checks write the blocks and find every page there). A thread that uses many
//!   block sizes does not pin 10 MB per size: its resident set is what its blocks covered.
//!   (Touched in full, `bench alloc` shows 1.2–1.9 GB resident against mimalloc's 0.2 GB.)
//! - Purging: each node keeps every released superblock, as §5.2 does (unless
//!   `cached_superblocks` bounds it), but gives the pages of those beyond its reserve back to
//!   the OS after a delay (`node.rs`), so the resident set follows the live data.
//! - A local allocator keeps up to 32 recently emptied superblocks (16 MiB of touched pages), and the only superblock of each size (up to 1 MiB touched).
//! - The large tier above 512 KiB (`large.rs`): packets of ½ L2 on cores with 2 MiB or 4 MiB
//!   of L2 are 1–2 MiB, which §5 would map and unmap for every packet.
//! - The address map (the paper's allocator is told the size at free; `free(p)` is not).
//! - The pending bitmap, adoption and reclamation of abandoned allocators (the paper's threads
//!   are the runtime's and never exit).
//! - Alignments above 64 bytes in the 8–512 KiB range go to the system allocator.
//! - The paper counts 63 sub-allocators for 8–512 KB; rounding each step up to 64 bytes gives 62
//!   (S0 = 8,192 … S61 = 534,144 bytes), with overhead under 7.1 %.

#![warn(missing_docs)]

#[cfg(not(loom))]
mod alloc;
#[cfg(all(not(loom), not(miri)))]
pub mod checks;
#[cfg(not(loom))]
mod config;
#[cfg(not(loom))]
mod free;
#[cfg(not(loom))]
mod global;
#[cfg(not(loom))]
mod heap;
#[cfg(not(loom))]
mod inspect;
#[cfg(not(loom))]
mod instance;
#[cfg(not(loom))]
mod large;
#[cfg(not(loom))]
mod map;
#[cfg(not(loom))]
mod node;
#[cfg(not(loom))]
pub mod options;
#[cfg(not(loom))]
mod os;
#[cfg(not(loom))]
mod posix;
#[cfg(not(loom))]
mod pq;
#[cfg(not(loom))]
mod stats;
#[cfg(not(loom))]
mod superblock;
#[cfg(not(loom))]
mod sys;
#[cfg(not(loom))]
mod thread;

mod bin;
mod kind;
mod sync;

#[cfg(not(loom))]
pub use config::{Config, ConfigError, SizeClasses, CACHE_LINE, MAX_CLASSES};
#[cfg(not(loom))]
pub use global::{current_choice, set_default_choice, Nearflow, GLOBAL};
#[cfg(not(loom))]
pub use heap::MAX_HEAPS;
#[cfg(not(loom))]
pub use instance::{AllocError, Allocator};
pub use kind::AllocatorKind;
#[cfg(not(loom))]
pub use node::MAX_NODES;
/// The node each page is on (`move_pages(2)`), for placement checks.
#[cfg(not(any(loom, miri)))]
pub use os::page_nodes;
#[cfg(not(loom))]
pub use os::{current_node, GRANULE, PAGE};
#[cfg(not(loom))]
pub use stats::Stats;
#[cfg(not(loom))]
pub use thread::{rehome_current_thread, set_thread_choice};

/// The single-threaded core (and one foreign free) with a small configuration, small enough to
/// run under Miri (`scripts/miri.sh`), whose OS layer is `std::alloc::System`.
#[cfg(all(test, not(loom)))]
mod core_tests {
    use super::*;

    fn tiny_config() -> Config {
        Config {
            min_block: 256,
            max_block: 2048,
            growth_permille: 1500,
            superblock_size: 16 << 10,
            cached_superblocks: 1,
            large_max: 16 << 10,
            node_reserve_bytes: 0,
            purge_delay_ms: 0,
        }
    }

    fn tiny() -> &'static Allocator {
        Allocator::new(tiny_config()).unwrap()
    }

    #[test]
    fn blocks_are_unique_kept_and_counted() {
        let a = tiny();
        let n = if cfg!(miri) { 60 } else { 2000 };
        let mut live: Vec<(*mut u8, usize)> = Vec::new();
        for i in 0..n {
            let size = 256 + (i * 37) % 1792;
            let p = a.alloc(size);
            assert!(a.owns(p));
            // SAFETY: `size` bytes of ours.
            unsafe { p.write_bytes(i as u8, size) };
            live.push((p, size));
            if i % 3 == 2 {
                let (q, s) = live.swap_remove(i % live.len());
                // SAFETY: ours; checked then freed.
                unsafe {
                    assert!(std::slice::from_raw_parts(q, s).iter().all(|&b| b == *q));
                    a.free(q);
                }
            }
        }
        let mut addrs: Vec<usize> = live.iter().map(|&(p, _)| p as usize).collect();
        addrs.sort();
        addrs.dedup();
        assert_eq!(addrs.len(), live.len(), "a block handed out twice");
        assert!(a.check_thread());
        assert_eq!(a.stats().used_blocks, live.len());
        // A foreign free: another thread frees half; we collect them.
        let half: Vec<usize> = live
            .drain(..live.len() / 2)
            .map(|(p, _)| p as usize)
            .collect();
        std::thread::spawn(move || {
            for p in half {
                // SAFETY: blocks handed to this thread.
                unsafe { a.free(p as *mut u8) };
            }
        })
        .join()
        .unwrap();
        a.collect();
        assert_eq!(a.stats().used_blocks, live.len());
        for (p, _) in live {
            // SAFETY: ours.
            unsafe { a.free(p) };
        }
        assert!(a.check_thread());
        let s = a.stats();
        assert_eq!(s.used_blocks, 0);
        assert!(
            s.superblocks_in_heaps <= heap::MAX_KEPT as usize + a.classes().len(),
            "at most MAX_KEPT empty superblocks kept, and one per size: {s:?}"
        );
    }

    /// A node hands a released superblock to the size it served before, even from below the
    /// head of its stack (`node.rs`, `CLASS_WINDOW`), and the stack keeps its invariants.
    #[test]
    fn released_superblocks_go_back_to_their_size() {
        let a = Allocator::new(Config {
            cached_superblocks: 16,
            purge_delay_ms: 3_600_000,
            ..tiny_config()
        })
        .unwrap();
        // Blocks of 1944 bytes: 6 per superblock; of 256 bytes: 48 per superblock.
        let big: Vec<*mut u8> = (0..12).map(|_| a.alloc(1944)).collect();
        let small: Vec<*mut u8> = (0..96).map(|_| a.alloc(256)).collect();
        for &p in big.iter().chain(&small) {
            // SAFETY: ours, unused.
            unsafe { a.free(p) };
        }
        a.release_cached();
        let s = a.stats();
        assert_eq!(
            (s.superblocks_in_heaps, s.superblocks_cached),
            (0, 4),
            "{s:?}"
        );
        assert_eq!(s.covered_in_heaps, 0, "{s:?}");
        assert!(s.covered_cached >= 12 * 1944 + 96 * 256, "{s:?}");
        assert!(a.check_nodes());
        // The 256-byte superblocks are on top; a 1944-byte one is taken from below them.
        let p = a.alloc(1944);
        assert!(big.contains(&p), "a 1944-byte superblock came back");
        let q = a.alloc(256);
        assert!(small.contains(&q), "a 256-byte superblock came back");
        assert!(a.check_nodes() && a.check_thread());
        assert_eq!(a.stats().superblocks_cached, 2);
        // SAFETY: ours, unused.
        unsafe {
            a.free(p);
            a.free(q);
        }
        assert!(a.check_nodes());
    }

    /// The large tier (`large.rs`): a block freed by its thread comes back from the thread's
    /// cache; one freed by another thread goes to the node's cache and is reused from there;
    /// what the node keeps is purged (no reserve, no delay here) and reads as zeros.
    #[test]
    fn large_blocks_are_cached_reused_and_purged() {
        let a = tiny();
        let size = 12 << 10; // above max_block (2 KiB), below large_max (16 KiB)
        let p = a.alloc(size);
        assert!(a.owns(p));
        // SAFETY: `size` bytes of ours.
        unsafe {
            p.write_bytes(1, size);
            a.free(p);
        }
        let mapped = a.stats().large_mapped;
        let q = a.alloc(size);
        assert_eq!(q, p, "from the thread's cache");
        assert_eq!(a.stats().large_mapped, mapped);
        // SAFETY: ours.
        unsafe { q.write_bytes(2, size) };
        let q = q as usize;
        std::thread::spawn(move || {
            // SAFETY: the block handed to this thread: a foreign free, to the node's cache.
            unsafe { a.free(q as *mut u8) };
        })
        .join()
        .unwrap();
        assert_eq!(a.stats().large_cached, 1);
        a.purge();
        assert!(a.stats().purges >= 1);
        let r = a.alloc(size);
        assert_eq!(r as usize, q, "from the node's cache");
        assert_eq!(a.stats().large_mapped, mapped);
        // SAFETY: ours; purged pages read as zeros.
        unsafe {
            assert!(std::slice::from_raw_parts(r, size).iter().all(|&b| b == 0));
            a.free(r);
        }
        assert_eq!(a.stats().large_blocks, 0);
    }

    /// A cached large block serves a smaller request (it is resident
    /// already), and a miss unmaps the cached blocks that could not serve it, beyond the
    /// node's reserve, before mapping a new one.
    #[test]
    fn large_blocks_serve_smaller_requests_and_a_miss_evicts() {
        let a = Allocator::new(Config {
            purge_delay_ms: u32::MAX,
            ..tiny_config()
        })
        .unwrap();
        let (small, big) = (3 << 10, 15 << 10);
        let p = a.alloc(big);
        // SAFETY: ours.
        unsafe { a.free(p) };
        let mapped = a.stats().large_mapped;
        let q = a.alloc(small);
        assert_eq!(q, p, "the thread's larger block serves a smaller request");
        assert_eq!(a.stats().large_mapped, mapped);
        let foreign = |ps: Vec<usize>| {
            std::thread::spawn(move || {
                for p in ps {
                    // SAFETY: blocks handed to this thread: foreign frees, to the node's cache.
                    unsafe { a.free(p as *mut u8) };
                }
            })
            .join()
            .unwrap()
        };
        foreign(vec![q as usize]);
        assert_eq!(a.stats().large_cached, 1);
        let r = a.alloc(small);
        assert_eq!(r, p, "the node's larger block serves a smaller request");
        // Small blocks in the node's cache cannot serve a big request: the miss unmaps them
        // (the reserve is 0) before it maps one.
        let smalls: Vec<usize> = (0..4).map(|_| a.alloc(small) as usize).collect();
        foreign(smalls);
        assert_eq!(a.stats().large_cached, 4);
        let big2 = a.alloc(big);
        assert!(a.owns(big2));
        assert_eq!(a.stats().large_cached, 0);
        assert_eq!(a.stats().large_evicted, 4);
        assert!(a.check_nodes());
        // SAFETY: ours.
        unsafe {
            a.free(r);
            a.free(big2);
        }
    }
}
