//! The superblock allocator of one NUMA node (§5.2): superblocks from the OS, touched by the
//! allocating thread so that first-touch backs them on its node; one lock per node; released
//! superblocks kept in a LIFO stack and handed out again first (most recently used first, for
//! the caches and the TLB). The stack holds at most `cached_superblocks`; beyond, a released
//! superblock goes back to the OS.
//!
//! Invariant: every superblock in the stack has `owner == null`, `pq_index == NOT_QUEUED`, is
//! in the address map and is backed on this node; `len == count(stack)`.

use core::ptr::{self, NonNull};
use std::sync::Mutex;

use crate::os::{self, OsError};
use crate::superblock::{Kind, Superblock, NOT_QUEUED};

/// Most NUMA nodes supported; a node id beyond is folded (`id % MAX_NODES`).
pub const MAX_NODES: usize = 64;

struct Stack {
    head: *mut Superblock,
    len: usize,
}

// SAFETY: the stack is only reached under the node's mutex.
unsafe impl Send for Stack {}

/// One node's superblock allocator.
pub(crate) struct SuperblockAllocator {
    stack: Mutex<Stack>,
}

/// How a new superblock's pages are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Touched by the calling thread (first-touch, §5.2).
    FirstTouch,
    /// Bound to the node with `mbind` before touching (allocate-on-node).
    Bind,
}

impl SuperblockAllocator {
    pub(crate) const fn new() -> Self {
        SuperblockAllocator {
            stack: Mutex::new(Stack {
                head: ptr::null_mut(),
                len: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Stack> {
        match self.stack.lock() {
            Ok(g) => g,
            // Nothing panics under this lock; ignore poisoning as a matter of form.
            Err(p) => p.into_inner(),
        }
    }

    /// A superblock of `size` bytes on `node`: the last one released, else a fresh mapping.
    pub(crate) fn obtain(
        &self,
        a: &crate::Allocator,
        node: usize,
        size: usize,
        placement: Placement,
    ) -> Result<NonNull<Superblock>, OsError> {
        {
            let mut s = self.lock();
            if let Some(sb) = NonNull::new(s.head) {
                // SAFETY: stack members are live superblocks owned by this stack.
                s.head = unsafe { (*sb.as_ptr()).next };
                s.len -= 1;
                // SAFETY: as above; now ours alone.
                unsafe { (*sb.as_ptr()).next = ptr::null_mut() };
                crate::stats::count(&a.stats.superblocks_reused, 1);
                return Ok(sb);
            }
        }
        fresh(a, node, size, placement, Kind::Super, true)
    }

    /// Takes back an empty superblock (LIFO). Returns it when the stack is full, for the caller
    /// to give back to the OS.
    ///
    /// # Safety
    /// `sb` is a live superblock of ours that no local allocator holds any more.
    pub(crate) unsafe fn release(
        &self,
        sb: NonNull<Superblock>,
        cap: usize,
    ) -> Option<NonNull<Superblock>> {
        let p = sb.as_ptr();
        // SAFETY: the caller hands the superblock over.
        unsafe {
            (*p).owner = ptr::null_mut();
            (*p).pq_index = NOT_QUEUED;
            (*p).prev = ptr::null_mut();
        }
        let mut s = self.lock();
        if s.len >= cap {
            return Some(sb);
        }
        // SAFETY: as above.
        unsafe { (*p).next = s.head };
        s.head = p;
        s.len += 1;
        None
    }

    /// Number of superblocks in the stack.
    pub(crate) fn cached(&self) -> usize {
        self.lock().len
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
    let base = os::map(size)?;
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
