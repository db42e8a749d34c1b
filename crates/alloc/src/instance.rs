//! One allocator: the shared parts (address map, superblock allocators, registry of local
//! allocators) and the entry points that route a request by size (§5).

use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use crate::config::{round_up, Config, ConfigError, SizeClasses, CACHE_LINE};
use crate::heap::{Heap, MAX_HEAPS};
use crate::large::{LargeClasses, NO_CLASS};
use crate::map::AddrMap;
use crate::node::{self, Placement, SuperblockAllocator, MAX_NODES};
use crate::os::{self, OsError, GRANULE, PAGE};
use crate::stats::{self, Counters, Stats};
use crate::superblock::{Kind, Superblock, HEADER};
use crate::{sys, thread};

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

/// Reads `NEARFLOW_SUPERBLOCK_KB` without allocating. None when unset or unusable (then a
/// one-line warning goes to stderr).
fn superblock_size_from_env(cfg: &Config) -> Option<usize> {
    // SAFETY: getenv with a NUL-terminated name; the result is read up to its NUL.
    let p = unsafe { libc::getenv(c"NEARFLOW_SUPERBLOCK_KB".as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: getenv returns a NUL-terminated string.
    let bytes = unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes();
    let mut kb: usize = 0;
    let mut ok = !bytes.is_empty();
    for &b in bytes {
        ok &= b.is_ascii_digit();
        kb = kb
            .saturating_mul(10)
            .saturating_add(b.wrapping_sub(b'0') as usize);
    }
    let size = kb.saturating_mul(1024);
    if ok
        && (Config {
            superblock_size: size,
            ..*cfg
        })
        .classes()
        .is_ok()
    {
        return Some(size);
    }
    let msg = b"nearflow-alloc: NEARFLOW_SUPERBLOCK_KB must be a multiple of 4 holding two of the largest blocks (at least 1028 for the defaults); using 10240\n";
    // SAFETY: writes a static message to stderr.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    None
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
    fn class_for(&self, size: usize) -> Option<usize> {
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
            superblock_size_from_env(&self.cfg).unwrap_or(self.cfg.superblock_size)
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
                if let Some(sb) = (*h.as_ptr()).large.take(c) {
                    return self.hand_out_large(sb);
                }
                (*h.as_ptr()).node.load(Ordering::Relaxed) as usize
            },
            None => os::current_node(),
        } % MAX_NODES;
        if let Some(sb) = self.nodes[node].take_large(self, c) {
            return self.hand_out_large(sb.as_ptr());
        }
        let len = HEADER + self.large.size(c);
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

    /// Frees a large block: into the freeing thread's cache when it is of the thread's node and
    /// cacheable, else into its node's cache, else (not cacheable) back to the OS.
    ///
    /// # Safety
    /// `sb` is a live large mapping whose block is given up.
    unsafe fn free_large(&self, sb: *mut Superblock) {
        stats::uncount(&self.stats.large_live, 1);
        // SAFETY: by the caller's contract.
        let (c, node) = unsafe { ((*sb).large_class, (*sb).node as usize % MAX_NODES) };
        if c == NO_CLASS {
            // SAFETY: by the caller's contract.
            unsafe { node::destroy(self, NonNull::new_unchecked(sb)) };
            return;
        }
        if let Some(h) = thread::current_heap(self) {
            // SAFETY: this thread holds its local allocator.
            unsafe {
                let h = &mut *h.as_ptr();
                if h.node.load(Ordering::Relaxed) as usize % MAX_NODES == node
                    && h.large.put(c as usize, sb)
                {
                    return;
                }
            }
        }
        // SAFETY: by the caller's contract.
        unsafe { self.nodes[node].put_large(self, c as usize, NonNull::new_unchecked(sb)) };
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

    /// `calloc`: `n · size` zeroed bytes, null on overflow or exhaustion.
    pub fn calloc(&self, n: usize, size: usize) -> *mut u8 {
        let Some(total) = n.checked_mul(size) else {
            return ptr::null_mut();
        };
        if total < self.cfg.min_block {
            return sys::calloc(n, size);
        }
        let p = self.alloc(total);
        if !p.is_null() {
            // SAFETY: `total` bytes were just allocated. (Reused blocks hold old data, fresh
            // large mappings are zero already but the write is cheap next to the mapping.)
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
            superblocks_cached: self.nodes.iter().map(|n| n.cached()).sum(),
            ..Stats::default()
        };
        for h in self.registered() {
            // SAFETY: heaps are never unmapped; the counts are read racily (documented).
            unsafe {
                s.superblocks_in_heaps += (*h).superblocks(self.classes.len());
                s.used_blocks += (*h).used_blocks(self.classes.len());
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

    /// The registry's pointer to local allocator `id` (the one `owner` fields hold).
    pub(crate) fn heap_ptr(&self, id: u32) -> *mut Heap {
        // Acquire: pairs with the Release store in `new_heap`.
        self.heaps[id as usize].load(Ordering::Acquire)
    }

    fn registered(&self) -> impl Iterator<Item = *mut Heap> + '_ {
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
            (*h).reclaim.set(crate::bin::OWNED);
        }
        // Release: pairs with the Acquire loads in `registered`.
        self.heaps[id].store(p.as_ptr(), Ordering::Release);
        stats::count(&self.stats.heaps_created, 1);
        Some(p)
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
