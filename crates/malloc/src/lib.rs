//! # nearflow-malloc — the nearflow allocator behind the C `malloc` family
//!
//! A `cdylib` exporting `malloc`, `free`, `calloc`, `realloc`, `posix_memalign`,
//! `aligned_alloc`, `memalign` and `malloc_usable_size` over [`nearflow_alloc::GLOBAL`], so that
//! any program runs on the allocator of `../shared/papers/las-scheduler-and-numa-allocator.txt`
//! §5:
//!
//! ```text
//! cargo build --profile preload -p nearflow-malloc
//! LD_PRELOAD=target/preload/libnearflow_malloc.so python3 -c 'print(sum(range(10**6)))'
//! ```
//!
//! Rules this library keeps:
//! - **No allocation inside malloc.** Every path ends in the allocator's OS layer (`mmap`) or in
//!   glibc's own `__libc_malloc` family (requests below 8 KiB, alignments above 64 bytes in the
//!   8–512 KiB range); the thread-local state is `const`-initialised without destructor, and the
//!   per-thread teardown is a pthread key destructor (see `nearflow_alloc`'s `thread.rs`).
//! - **No unwinding.** The `preload` profile builds with `panic = "abort"`; an `extern "C"`
//!   function that panicked would abort in any case.
//! - `free` and `realloc` accept glibc's blocks too (made before the library was loaded, or by
//!   glibc-internal calls such as `valloc`): the allocator's address map tells them apart.
//! - Load it with `LD_PRELOAD` (static TLS), not with `dlopen`.
//!
//! Environment: `NEARFLOW_MALLOC_STATS=1` prints the allocator's counters at exit;
//! `NEARFLOW_SUPERBLOCK_KB=n` sets the superblock size (default 10240, §5.2). Each thread holds
//! one superblock, touched in full, per block size it uses: smaller superblocks mean a smaller
//! resident set for programs that use many sizes from many threads.

//! The C contract, as glibc keeps it (checked by `scripts/malloc-contract.c`, which runs with
//! and without this library and must print the same): a failed allocation returns null with
//! `errno` set to `ENOMEM` (and `realloc` leaves the old block alone); a size above
//! `PTRDIFF_MAX`, or one the kernel's overcommit policy will not back, fails instead of
//! crashing or succeeding on paper; `memalign` and `aligned_alloc` take an alignment up to 16
//! as plain `malloc`, round one that is not a power of two up to the next, and refuse one above
//! `SIZE_MAX / 2 + 1` with `EINVAL`; `posix_memalign` returns `EINVAL` for an alignment that is
//! not a power of two multiple of `sizeof(void *)`.

use core::ffi::c_void;

use nearflow_alloc::GLOBAL;

/// Sets `errno`.
fn set_errno(e: i32) {
    // SAFETY: the calling thread's errno location is always valid.
    unsafe { *libc::__errno_location() = e };
}

/// `p`, with `errno = ENOMEM` when it is null.
fn or_enomem(p: *mut u8) -> *mut c_void {
    if p.is_null() {
        set_errno(libc::ENOMEM);
    }
    p.cast()
}

/// C `malloc`.
///
/// # Safety
/// Callable from C with any size.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    or_enomem(GLOBAL.alloc(size))
}

/// C `free`.
///
/// # Safety
/// `p` is null or a live block of this library or of glibc.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    // SAFETY: by the C contract of `free`.
    unsafe { GLOBAL.free(p.cast()) }
}

/// C `calloc`.
///
/// # Safety
/// Callable from C with any sizes.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    or_enomem(GLOBAL.calloc(n, size))
}

/// C `realloc`.
///
/// # Safety
/// `p` is null or a live block of this library or of glibc.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: by the C contract of `realloc`.
    let q = unsafe { GLOBAL.realloc(p.cast(), size) };
    // `realloc(p, 0)` frees `p` and returns null without an error.
    if q.is_null() && (size != 0 || p.is_null()) {
        set_errno(libc::ENOMEM);
    }
    q.cast()
}

/// POSIX `posix_memalign`.
///
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    if !align.is_power_of_two() || align % core::mem::size_of::<usize>() != 0 {
        return libc::EINVAL;
    }
    let p = GLOBAL.alloc_aligned(size, align);
    if p.is_null() {
        // errno is left as it was: posix_memalign reports through its result.
        return libc::ENOMEM;
    }
    // SAFETY: by the C contract, `out` is writable.
    unsafe { *out = p.cast() };
    0
}

/// C11 `aligned_alloc`: glibc 2.36 (Debian 12) makes it the same function as `memalign`.
///
/// # Safety
/// Callable from C with any arguments.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    // SAFETY: callable with any arguments.
    unsafe { memalign(align, size) }
}

/// The alignment `memalign` gives for `align`, as glibc's: at least 16 (plain `malloc`), the
/// next power of two for one that is not; None above `SIZE_MAX / 2 + 1`.
fn memalign_alignment(align: usize) -> Option<usize> {
    if align <= 16 {
        Some(16)
    } else if align > usize::MAX / 2 + 1 {
        None
    } else {
        Some(align.next_power_of_two())
    }
}

/// Legacy `memalign`.
///
/// # Safety
/// Callable from C with any arguments.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    match memalign_alignment(align) {
        Some(a) => or_enomem(GLOBAL.alloc_aligned(size, a)),
        None => {
            set_errno(libc::EINVAL);
            core::ptr::null_mut()
        }
    }
}

/// GNU `malloc_usable_size`.
///
/// # Safety
/// `p` is null or a live block of this library or of glibc.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    // SAFETY: by the C contract.
    unsafe { GLOBAL.usable_size(p.cast()) }
}

/// Prints the allocator's counters to stderr at exit when `NEARFLOW_MALLOC_STATS` is set
/// (formatted on the stack: nothing is allocated).
extern "C" fn report_at_exit() {
    if !nearflow_alloc::options::malloc_stats() {
        return;
    }
    let s = GLOBAL.stats();
    let mut buf = StackBuf { b: [0; 512], n: 0 };
    let _ = core::fmt::Write::write_fmt(
        &mut buf,
        format_args!(
            "nearflow-malloc: {} superblocks ({} in local allocators covering {} MiB, {} cached \
             covering {} MiB, {} reused), {} blocks in use, {} large blocks, {} MiB mapped, {} \
             local allocators ({} adopted, {} idle)\n",
            s.superblocks,
            s.superblocks_in_heaps,
            s.covered_in_heaps >> 20,
            s.superblocks_cached,
            s.covered_cached >> 20,
            s.superblocks_reused,
            s.used_blocks,
            s.large_blocks,
            s.mapped_bytes >> 20,
            s.heaps_created,
            s.heaps_adopted,
            s.heaps_idle,
        ),
    );
    // SAFETY: writes our stack buffer to stderr.
    unsafe { libc::write(2, buf.b.as_ptr().cast(), buf.n) };
}

#[used]
#[link_section = ".fini_array"]
static REPORT_AT_EXIT: extern "C" fn() = report_at_exit;

struct StackBuf {
    b: [u8; 512],
    n: usize,
}

impl core::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let k = s.len().min(self.b.len() - self.n);
        self.b[self.n..self.n + k].copy_from_slice(&s.as_bytes()[..k]);
        self.n += k;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::memalign_alignment;

    #[test]
    fn memalign_alignments_are_glibcs() {
        assert_eq!(memalign_alignment(0), Some(16));
        assert_eq!(memalign_alignment(3), Some(16));
        assert_eq!(memalign_alignment(16), Some(16));
        assert_eq!(memalign_alignment(17), Some(32));
        assert_eq!(memalign_alignment(4096), Some(4096));
        assert_eq!(
            memalign_alignment(usize::MAX / 2 + 1),
            Some(usize::MAX / 2 + 1)
        );
        assert_eq!(memalign_alignment(usize::MAX / 2 + 2), None);
    }
}
