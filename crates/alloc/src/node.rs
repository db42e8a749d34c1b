//! The superblock allocator of one NUMA node (§5.2): superblocks from the OS, backed on the node
//! of the thread that first writes them (first touch); one lock per node; released superblocks
//! kept in a LIFO stack and handed out again first (most recently used first, for the caches and
//! the TLB). Beyond §5.2: among the most recent ones ([`CLASS_WINDOW`]), a superblock last used
//! for the size being asked for is handed out before the head. Its resident pages are those
//! that size covered; with plain LIFO every superblock drifted between sizes and came to hold
//! the pages of the largest size it had ever served (`bench alloc` larson, 4 threads, 8–512 KiB
//! blocks: peak RSS 463–495 MiB with plain LIFO, 238–256 MiB with this, mimalloc 211–251 MiB). The stack holds at most `cached_superblocks`; beyond, a released superblock goes
//! back to the OS. The same lock guards the node's cache of large blocks (`large.rs`), one LIFO
//! stack per large class.
//!
//! **Resident memory** (our extension of §5.2, which touches a superblock in full when it is
//! mapped and keeps every released one): a new superblock is not touched here; its pages are
//! backed when its blocks are first written, by the thread that owns it, on that thread's node.
//! And what the node keeps beyond `Config::node_reserve_bytes` (the most recently released
//! first: superblocks, then large blocks by class) is *purged* once unused for
//! `Config::purge_delay_ms`: its pages go back to the OS (`MADV_DONTNEED`), the mapping stays in
//! the stack for reuse (a reused purged superblock is backed again page by page, by first touch).
//! The node looks for what to purge when it is used (a release or an obtain), at most every
//! half delay, as mimalloc purges on later allocator calls; a process that stops allocating
//! keeps what it had until it allocates again.
//!
//! Invariant: every member of a stack has `owner == null`, `pq_index == NOT_QUEUED`, is in the
//! address map and was backed on this node; each stack's `len` is its length; within a stack,
//! `released_at` does not increase from head to tail, and the purged members form a suffix
//! (so a sweep stops at the first purged member).

use core::ptr::{self, NonNull};
use std::sync::Mutex;

use crate::config::Config;
use crate::large::{first_at_or_above, MAX_LARGE};
use crate::os::{self, OsError};
use crate::superblock::{Kind, Superblock, HEADER, NOT_QUEUED};

/// Most NUMA nodes supported; a node id beyond is folded (`id % MAX_NODES`).
pub const MAX_NODES: usize = 64;

/// How many of the most recently released superblocks `obtain` looks through for one of the
/// size asked for (under the node's lock; the purged ones, at the bottom, are never looked at).
pub(crate) const CLASS_WINDOW: usize = 64;

/// A LIFO stack of released mappings, linked through their headers' `next`.
struct Stack {
    head: *mut Superblock,
    len: usize,
}

impl Stack {
    const fn new() -> Self {
        Stack {
            head: ptr::null_mut(),
            len: 0,
        }
    }

    fn pop(&mut self) -> Option<NonNull<Superblock>> {
        let sb = NonNull::new(self.head)?;
        // SAFETY: stack members are live mappings owned by the stack (under the node's lock).
        unsafe {
            self.head = (*sb.as_ptr()).next;
            (*sb.as_ptr()).next = ptr::null_mut();
        }
        self.len -= 1;
        Some(sb)
    }

    /// The most recently released member last formatted for sub-allocator `class`, among the
    /// first `window` ones that are not purged; else the head.
    fn take(&mut self, class: u32, window: usize) -> Option<NonNull<Superblock>> {
        let mut prev: *mut Superblock = ptr::null_mut();
        let mut p = self.head;
        let mut seen = 0;
        // SAFETY (the loop): stack members are live mappings owned by the stack.
        while !p.is_null() && seen < window && unsafe { !(*p).purged } {
            if unsafe { (*p).class } == class {
                unsafe {
                    let next = (*p).next;
                    if prev.is_null() {
                        self.head = next;
                    } else {
                        (*prev).next = next;
                    }
                    (*p).next = ptr::null_mut();
                }
                self.len -= 1;
                return NonNull::new(p);
            }
            prev = p;
            p = unsafe { (*p).next };
            seen += 1;
        }
        self.pop()
    }

    /// Bytes of the members that are not purged (resident, or backed when written).
    fn resident(&self) -> usize {
        let (mut n, mut p) = (0, self.head);
        // SAFETY (the loop): stack members are live mappings owned by the stack; the purged
        // ones form a suffix.
        while !p.is_null() && unsafe { !(*p).purged } {
            unsafe {
                n += (*p).len;
                p = (*p).next;
            }
        }
        n
    }

    /// The head, if it is not purged.
    ///
    /// # Safety
    /// Under the node's lock.
    unsafe fn pop_resident(&mut self) -> Option<NonNull<Superblock>> {
        // SAFETY: stack members are live mappings owned by the stack.
        if self.head.is_null() || unsafe { (*self.head).purged } {
            return None;
        }
        self.pop()
    }

    /// # Safety
    /// `p` is a live mapping handed over to the stack.
    unsafe fn push(&mut self, p: *mut Superblock, now: u64) {
        // SAFETY: by the caller's contract.
        unsafe {
            (*p).next = self.head;
            (*p).released_at = now;
        }
        self.head = p;
        self.len += 1;
    }

    /// The invariant of the module docs: `len` members, each free of any owner and queue,
    /// `released_at` not increasing from the head, the purged ones a suffix.
    fn is_valid(&self) -> bool {
        let (mut n, mut last, mut purged) = (0, u64::MAX, false);
        let mut p = self.head;
        while !p.is_null() {
            // SAFETY: stack members are live mappings owned by the stack.
            let h = unsafe { &*p };
            if !h.owner.is_null()
                || h.pq_index != NOT_QUEUED
                || h.released_at > last
                || purged && !h.purged
            {
                return false;
            }
            (last, purged) = (h.released_at, h.purged);
            n += 1;
            p = h.next;
        }
        n == self.len
    }

    /// Purges the members past `budget` bytes (which it consumes) that have been unused for
    /// `delay` ms. Returns the number purged.
    fn sweep(&mut self, now: u64, delay: u64, budget: &mut usize) -> usize {
        let mut purged = 0;
        let mut p = self.head;
        while !p.is_null() {
            // SAFETY: stack members are live mappings owned by the stack.
            let h = unsafe { &mut *p };
            if h.purged {
                break;
            }
            if *budget >= h.len {
                *budget -= h.len;
            } else if now.saturating_sub(h.released_at) >= delay {
                *budget = 0;
                // SAFETY: the block data of a mapping nobody holds; the header stays.
                unsafe { os::purge(h.base.add(HEADER), h.len - HEADER) };
                h.purged = true;
                h.touched = 0;
                purged += 1;
            } else {
                *budget = 0;
            }
            p = h.next;
        }
        purged
    }
}

/// What the node's lock guards.
struct Cache {
    superblocks: Stack,
    large: [Stack; MAX_LARGE],
    /// Bit `c` set when `large[c]` is not empty.
    large_held: u64,
    /// No sweep before this time (ms).
    next_sweep: u64,
}

// SAFETY: the stacks are only reached under the node's mutex.
unsafe impl Send for Cache {}

impl Cache {
    /// Purges what lies beyond the reserve, at most every half delay.
    fn maybe_sweep(&mut self, a: &crate::Allocator, cfg: &Config, now: u64) {
        if cfg.purge_delay_ms == u32::MAX || now < self.next_sweep {
            return;
        }
        let delay = u64::from(cfg.purge_delay_ms);
        self.next_sweep = now + delay / 2;
        let mut budget = cfg.node_reserve_bytes;
        let mut n = self.superblocks.sweep(now, delay, &mut budget);
        for s in &mut self.large {
            if s.len > 0 {
                n += s.sweep(now, delay, &mut budget);
            }
        }
        if n > 0 {
            crate::stats::count(&a.stats.purges, n);
        }
    }
}

/// One node's superblock allocator, with its cache of large blocks.
pub(crate) struct SuperblockAllocator {
    cache: Mutex<Cache>,
}

/// How a new superblock's pages are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Backed where the owning thread first writes them (first-touch, §5.2).
    FirstTouch,
    /// Bound to the node with `mbind` before touching (allocate-on-node).
    Bind,
}

impl SuperblockAllocator {
    pub(crate) const fn new() -> Self {
        SuperblockAllocator {
            cache: Mutex::new(Cache {
                superblocks: Stack::new(),
                large: [const { Stack::new() }; MAX_LARGE],
                large_held: 0,
                next_sweep: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        match self.cache.lock() {
            Ok(g) => g,
            // Nothing panics under this lock; ignore poisoning as a matter of form.
            Err(p) => p.into_inner(),
        }
    }

    /// A superblock of `size` bytes on `node` for sub-allocator `class`: a released one (of that
    /// class if one is near the top, else the last released), else a fresh mapping (not
    /// touched: see the module docs).
    pub(crate) fn obtain(
        &self,
        a: &crate::Allocator,
        node: usize,
        size: usize,
        placement: Placement,
        class: usize,
    ) -> Result<NonNull<Superblock>, OsError> {
        {
            let mut c = self.lock();
            if let Some(sb) = c.superblocks.take(class as u32, CLASS_WINDOW) {
                // SAFETY: now ours alone; purged pages read as zeros and are backed again on
                // first write, which `format` does not need.
                unsafe { (*sb.as_ptr()).purged = false };
                crate::stats::count(&a.stats.superblocks_reused, 1);
                c.maybe_sweep(a, &a.cfg, os::now_ms());
                return Ok(sb);
            }
        }
        fresh(a, node, size, placement, Kind::Super, false)
    }

    /// Takes back an empty superblock (LIFO). Returns it when the stack is full, for the caller
    /// to give back to the OS.
    ///
    /// # Safety
    /// `sb` is a live superblock of ours that no local allocator holds any more.
    pub(crate) unsafe fn release(
        &self,
        a: &crate::Allocator,
        sb: NonNull<Superblock>,
        cap: usize,
    ) -> Option<NonNull<Superblock>> {
        let p = sb.as_ptr();
        // SAFETY: the caller hands the superblock over.
        unsafe {
            (*p).touched = (*p).covered();
            (*p).owner = ptr::null_mut();
            (*p).pq_index = NOT_QUEUED;
            (*p).prev = ptr::null_mut();
        }
        let mut c = self.lock();
        // Read under the lock, so that `released_at` is monotonic along the stack.
        let now = os::now_ms();
        if c.superblocks.len >= cap {
            return Some(sb);
        }
        // SAFETY: handed over by the caller.
        unsafe { c.superblocks.push(p, now) };
        c.maybe_sweep(a, &a.cfg, now);
        None
    }

    /// The most recently released large block of class `c`, else of the smallest larger class
    /// the node has (up to `STRETCH` above).
    pub(crate) fn take_large(&self, a: &crate::Allocator, c: usize) -> Option<NonNull<Superblock>> {
        let mut cache = self.lock();
        let k = first_at_or_above(cache.large_held, c)?;
        let sb = cache.large[k].pop()?;
        if cache.large[k].len == 0 {
            cache.large_held &= !(1 << k);
        }
        // SAFETY: now ours alone.
        unsafe { (*sb.as_ptr()).purged = false };
        cache.maybe_sweep(a, &a.cfg, os::now_ms());
        Some(sb)
    }

    /// Before a new large block of `need` bytes is mapped (a miss, `large.rs`): unmaps cached
    /// large blocks until the resident ones plus `need` fit `node_reserve_bytes`, taking each
    /// class's most recently freed (resident) blocks first. Returns how many it unmapped. The
    /// unmapping happens after the lock is released.
    pub(crate) fn evict_large(&self, a: &crate::Allocator, need: usize) -> usize {
        let mut victims: *mut Superblock = ptr::null_mut();
        {
            let mut cache = self.lock();
            let resident: usize = cache.large.iter().map(Stack::resident).sum();
            let mut over = (resident + need).saturating_sub(a.cfg.node_reserve_bytes);
            let Cache {
                large, large_held, ..
            } = &mut *cache;
            for (c, stack) in large.iter_mut().enumerate() {
                while over > 0 {
                    // SAFETY (the block): stack members are live mappings owned by the stack.
                    let Some(sb) = (unsafe { stack.pop_resident() }) else {
                        break;
                    };
                    // SAFETY: popped, ours alone; `next` links the victims.
                    unsafe {
                        over = over.saturating_sub((*sb.as_ptr()).len);
                        (*sb.as_ptr()).next = victims;
                    }
                    victims = sb.as_ptr();
                }
                if stack.len == 0 {
                    *large_held &= !(1 << c);
                }
            }
        }
        let mut n = 0;
        while let Some(sb) = NonNull::new(victims) {
            // SAFETY: a victim taken out of the cache above: nobody else holds it.
            unsafe {
                victims = (*sb.as_ptr()).next;
                destroy(a, sb);
            }
            n += 1;
        }
        if n > 0 {
            crate::stats::count(&a.stats.large_evicted, n);
        }
        n
    }

    /// Keeps a freed large block of class `c` for reuse.
    ///
    /// # Safety
    /// `sb` is a live cacheable large mapping of this node that nobody uses any more.
    pub(crate) unsafe fn put_large(&self, a: &crate::Allocator, c: usize, sb: NonNull<Superblock>) {
        let mut cache = self.lock();
        // Read under the lock, as in `release`.
        let now = os::now_ms();
        // SAFETY: handed over by the caller.
        unsafe { cache.large[c].push(sb.as_ptr(), now) };
        cache.large_held |= 1 << c;
        cache.maybe_sweep(a, &a.cfg, now);
    }

    /// Number of superblocks in the stack, and the bytes their blocks have covered
    /// (`Superblock::covered`).
    pub(crate) fn cached(&self) -> (usize, usize) {
        let c = self.lock();
        let mut covered = 0;
        let mut p = c.superblocks.head;
        while !p.is_null() {
            // SAFETY: stack members are live mappings owned by the stack (we hold the lock).
            unsafe {
                covered += if (*p).purged { 0 } else { (*p).touched };
                p = (*p).next;
            }
        }
        (c.superblocks.len, covered)
    }

    /// Checks the invariant of the module docs on every stack. O(members).
    pub(crate) fn is_valid(&self) -> bool {
        let c = self.lock();
        let mut p = c.superblocks.head;
        while !p.is_null() {
            // SAFETY: stack members are live mappings owned by the stack (we hold the lock).
            unsafe {
                if (*p).kind != Kind::Super {
                    return false;
                }
                p = (*p).next;
            }
        }
        let mask_ok = (0..MAX_LARGE).all(|k| (c.large_held >> k & 1 == 1) == (c.large[k].len > 0));
        mask_ok && c.superblocks.is_valid() && c.large.iter().all(Stack::is_valid)
    }

    /// Number of large blocks in the node's cache.
    pub(crate) fn cached_large(&self) -> usize {
        self.lock().large.iter().map(|s| s.len).sum()
    }

    /// Purges now whatever lies beyond the reserve and has been unused for the delay (for a
    /// process that goes idle, and for tests).
    pub(crate) fn sweep_now(&self, a: &crate::Allocator) {
        let mut c = self.lock();
        c.next_sweep = 0;
        c.maybe_sweep(a, &a.cfg, os::now_ms());
    }
}

/// Maps, places, touches and registers a new mapping of `size` bytes.
pub(crate) fn fresh(
    a: &crate::Allocator,
    node: usize,
    size: usize,
    placement: Placement,
    kind: Kind,
    touch: bool,
) -> Result<NonNull<Superblock>, OsError> {
    let base = if kind == Kind::Large {
        os::map_block(size)?
    } else {
        os::map(size)?
    };
    if placement == Placement::Bind {
        if let Err(e) = os::bind(base, size, node) {
            // SAFETY: our fresh mapping, unused.
            unsafe { os::unmap(base, size) };
            return Err(e);
        }
    }
    if touch {
        // SAFETY: a fresh writable mapping of `size` bytes (§5.2: "touched by the allocating
        // thread").
        unsafe { os::touch(base, size) };
    }
    // SAFETY: fresh mapping of at least a page.
    let sb = unsafe { Superblock::init(base, size, kind, node as u32) };
    if !a.map.insert(base.as_ptr() as usize, size, sb) {
        // SAFETY: our fresh mapping, unused.
        unsafe { os::unmap(base, size) };
        return Err(OsError::NoMemory);
    }
    crate::stats::count(&a.stats.mapped_bytes, size);
    if kind == Kind::Super {
        crate::stats::count(&a.stats.superblocks_mapped, 1);
    }
    // SAFETY: `sb` points into the mapping, not null.
    Ok(unsafe { NonNull::new_unchecked(sb) })
}

/// Gives a mapping back to the OS, removing it from the address map first.
///
/// # Safety
/// `sb` heads a live mapping of ours that nobody uses any more.
pub(crate) unsafe fn destroy(a: &crate::Allocator, sb: NonNull<Superblock>) {
    // SAFETY: live header.
    let (base, len, kind) =
        unsafe { ((*sb.as_ptr()).base, (*sb.as_ptr()).len, (*sb.as_ptr()).kind) };
    a.map.remove(base as usize, len);
    crate::stats::uncount(&a.stats.mapped_bytes, len);
    if kind == Kind::Super {
        crate::stats::uncount(&a.stats.superblocks_mapped, 1);
    }
    // SAFETY: by the caller's contract.
    unsafe { os::unmap(NonNull::new_unchecked(base), len) };
}
