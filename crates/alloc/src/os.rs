//! The OS layer: virtual memory, NUMA placement and the current node (Linux).
//!
//! Every mapping the allocator makes starts on a [`GRANULE`] boundary, so the address map
//! (`map.rs`) can find a mapping's header from any address inside it. Under Miri the mappings
//! come from `std::alloc::System` with the same alignment, placement calls are no-ops and every
//! thread is on node 0, so the allocator's own logic runs unchanged.

use core::ptr::{self, NonNull};

/// The page size the allocator assumes (x86-64, aarch64 with 4K pages).
pub const PAGE: usize = 4096;

/// Alignment of every mapping: 2 MiB, one entry of the address map.
pub const GRANULE: usize = 2 << 20;

/// Why a mapping or a placement failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OsError {
    /// `mmap` refused.
    NoMemory,
    /// `mbind` refused this node (it does not exist or has no memory).
    Node(i32),
}

/// The largest mapping asked of the OS: C's `PTRDIFF_MAX` less the alignment slack, as glibc
/// refuses any request above `PTRDIFF_MAX` (a block larger than that could not be indexed).
pub const MAX_MAP: usize = isize::MAX as usize - GRANULE;

/// Maps `len` bytes (a multiple of [`PAGE`]) of zeroed memory starting on a [`GRANULE`]
/// boundary, with `MAP_NORESERVE`: for the allocator's own structures and superblocks, which are
/// backed page by page as they are used.
pub(crate) fn map(len: usize) -> Result<NonNull<u8>, OsError> {
    map_with(len, true)
}

/// As [`map`], for a block handed to a program (the large tier): without `MAP_NORESERVE`, so the
/// kernel's overcommit policy judges it as it judges glibc's `mmap` of a large block, and a
/// request larger than the machine can back (64 TiB on a 24 GiB machine, say) is refused here
/// instead of succeeding and failing at first touch.
pub(crate) fn map_block(len: usize) -> Result<NonNull<u8>, OsError> {
    map_with(len, false)
}

#[cfg(not(miri))]
fn map_with(len: usize, noreserve: bool) -> Result<NonNull<u8>, OsError> {
    debug_assert!(len % PAGE == 0 && len > 0);
    // A length near `usize::MAX` would wrap here (`malloc(SIZE_MAX - 1 MiB)` mapped a
    // few pages and the program wrote past them).
    if len > MAX_MAP {
        return Err(OsError::NoMemory);
    }
    let over = len + GRANULE;
    let flags =
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | if noreserve { libc::MAP_NORESERVE } else { 0 };
    // SAFETY: an anonymous private mapping at an address of the kernel's choice; no existing
    // memory is affected.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(OsError::NoMemory);
    }
    let start = p as usize;
    let aligned = (start + GRANULE - 1) & !(GRANULE - 1);
    let head = aligned - start;
    let tail = over - head - len;
    // SAFETY: both ranges lie inside the mapping just made and are not used by anyone.
    unsafe {
        if head > 0 {
            libc::munmap(p, head);
        }
        if tail > 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
    }
    // SAFETY: `aligned` is inside a successful mapping, so it is not null.
    Ok(unsafe { NonNull::new_unchecked(aligned as *mut u8) })
}

/// Gives back a mapping made by [`map`].
///
/// # Safety
/// `p` and `len` are those of a live mapping from [`map`] that nobody uses any more.
#[cfg(not(miri))]
pub(crate) unsafe fn unmap(p: NonNull<u8>, len: usize) {
    // SAFETY: the caller passes a whole mapping of ours.
    unsafe { libc::munmap(p.as_ptr().cast(), len) };
}

#[cfg(miri)]
fn map_with(len: usize, _noreserve: bool) -> Result<NonNull<u8>, OsError> {
    use std::alloc::{GlobalAlloc, Layout, System};
    if len > MAX_MAP {
        return Err(OsError::NoMemory);
    }
    let layout = Layout::from_size_align(len, GRANULE).map_err(|_| OsError::NoMemory)?;
    // SAFETY: the layout has a non-zero size.
    NonNull::new(unsafe { System.alloc_zeroed(layout) }).ok_or(OsError::NoMemory)
}

#[cfg(miri)]
pub(crate) unsafe fn unmap(p: NonNull<u8>, len: usize) {
    use std::alloc::{GlobalAlloc, Layout, System};
    // SAFETY: `p` came from `map(len)`, which used this layout.
    unsafe { System.dealloc(p.as_ptr(), Layout::from_size_align_unchecked(len, GRANULE)) };
}

/// Writes one byte of every page, so that the kernel backs each page now, on the node of the
/// calling thread (first-touch, §5.2) or on the node `mbind` chose.
///
/// # Safety
/// `[p, p+len)` is writable memory of ours that holds nothing yet.
pub(crate) unsafe fn touch(p: NonNull<u8>, len: usize) {
    let mut off = 0;
    while off < len {
        // SAFETY: inside the range the caller owns; a volatile write so it is not elided.
        unsafe { ptr::write_volatile(p.as_ptr().add(off), 0) };
        off += PAGE;
    }
}

/// Gives the pages of `[p, p+len)` back to the OS but keeps the mapping (`MADV_DONTNEED`): the
/// range reads as zeros afterwards and its pages are backed again, by first touch, when written.
/// Used for the empty superblocks and large blocks a node keeps beyond its reserve (`node.rs`).
///
/// # Safety
/// `[p, p+len)` is page-aligned memory of one of our mappings that holds nothing anyone reads.
#[cfg(not(miri))]
pub(crate) unsafe fn purge(p: *mut u8, len: usize) {
    debug_assert!(p as usize % PAGE == 0 && len % PAGE == 0);
    // SAFETY: by the caller's contract the range is ours and unused; DONTNEED on a private
    // anonymous mapping only drops its pages.
    unsafe { libc::madvise(p.cast(), len, libc::MADV_DONTNEED) };
}

/// Under Miri: the effect of `MADV_DONTNEED` on anonymous memory (zeros).
///
/// # Safety
/// As above.
#[cfg(miri)]
pub(crate) unsafe fn purge(p: *mut u8, len: usize) {
    // SAFETY: by the caller's contract.
    unsafe { p.write_bytes(0, len) };
}

/// A monotonic clock in milliseconds, cheap enough for the node-level paths
/// (`CLOCK_MONOTONIC_COARSE` is served by the vDSO, without a system call).
#[cfg(not(miri))]
pub(crate) fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Under Miri: a clock that advances 1 ms per reading, so that purging is exercised.
#[cfg(miri)]
pub(crate) fn now_ms() -> u64 {
    use core::sync::atomic::{AtomicU64, Ordering};
    static T: AtomicU64 = AtomicU64::new(0);
    // Relaxed: a counter.
    T.fetch_add(1, Ordering::Relaxed)
}

/// Binds `[p, p+len)` to `node` (MPOL_BIND) before it is touched, so its pages come from there.
#[cfg(not(miri))]
pub(crate) fn bind(p: NonNull<u8>, len: usize, node: usize) -> Result<(), OsError> {
    const MPOL_BIND: libc::c_long = 2;
    const MASK_BITS: usize = 1024;
    if node >= MASK_BITS {
        return Err(OsError::Node(libc::EINVAL));
    }
    let mut mask = [0u64; MASK_BITS / 64];
    mask[node / 64] |= 1 << (node % 64);
    // SAFETY: mbind reads `mask` (MASK_BITS bits) and changes only the policy of our range.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            p.as_ptr(),
            len,
            MPOL_BIND,
            mask.as_ptr(),
            MASK_BITS as libc::c_ulong,
            0 as libc::c_uint,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(OsError::Node(errno()))
    }
}

#[cfg(miri)]
pub(crate) fn bind(_p: NonNull<u8>, _len: usize, node: usize) -> Result<(), OsError> {
    if node == 0 {
        Ok(())
    } else {
        Err(OsError::Node(22))
    }
}

/// The NUMA node of the CPU the calling thread runs on (0 where it cannot be known).
#[cfg(not(miri))]
pub fn current_node() -> usize {
    let mut cpu: libc::c_uint = 0;
    let mut node: libc::c_uint = 0;
    // SAFETY: getcpu writes two integers we own; the cache argument is unused since Linux 2.6.24.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut libc::c_uint,
            &mut node as *mut libc::c_uint,
            ptr::null_mut::<libc::c_void>(),
        )
    };
    if r == 0 {
        node as usize
    } else {
        0
    }
}

/// Every thread is on node 0 under Miri.
#[cfg(miri)]
pub fn current_node() -> usize {
    0
}

/// The node each page of `pages` is resident on, from `move_pages(2)` with no target nodes;
/// negative entries are `-errno` (e.g. `-ENOENT` for a page not yet backed).
#[cfg(not(miri))]
pub fn page_nodes(pages: &[*const u8]) -> std::io::Result<Vec<i32>> {
    let mut status = vec![0i32; pages.len()];
    // SAFETY: move_pages reads `pages.len()` addresses and writes as many statuses; with a null
    // node list it moves nothing.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::c_int,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0 as libc::c_int,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(status)
}

#[cfg(not(miri))]
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
