//! The system allocator, for requests below the sub-allocators' range (§5: "Smaller blocks were
//! allocated by standard libc allocator") and for threads that have no local allocator.
//!
//! In a Rust program this calls the C library's `malloc` family by their public names, so a
//! sanitizer or another preloaded allocator sees every block. With the `preload` feature (the
//! `LD_PRELOAD` library, where `malloc` is our own) it calls `__libc_malloc` and its siblings,
//! the names glibc exports for its own allocator. Under Miri it calls `std::alloc::System`, with
//! a small header that remembers the layout.

#[cfg(not(miri))]
mod imp {
    use core::ffi::c_void;

    #[cfg(feature = "preload")]
    extern "C" {
        #[link_name = "__libc_malloc"]
        fn c_malloc(size: usize) -> *mut c_void;
        #[link_name = "__libc_calloc"]
        fn c_calloc(n: usize, size: usize) -> *mut c_void;
        #[link_name = "__libc_realloc"]
        fn c_realloc(p: *mut c_void, size: usize) -> *mut c_void;
        #[link_name = "__libc_free"]
        fn c_free(p: *mut c_void);
        #[link_name = "__libc_memalign"]
        fn c_memalign(align: usize, size: usize) -> *mut c_void;
    }

    #[cfg(not(feature = "preload"))]
    extern "C" {
        #[link_name = "malloc"]
        fn c_malloc(size: usize) -> *mut c_void;
        #[link_name = "calloc"]
        fn c_calloc(n: usize, size: usize) -> *mut c_void;
        #[link_name = "realloc"]
        fn c_realloc(p: *mut c_void, size: usize) -> *mut c_void;
        #[link_name = "free"]
        fn c_free(p: *mut c_void);
        #[link_name = "memalign"]
        fn c_memalign(align: usize, size: usize) -> *mut c_void;
    }

    /// `malloc` of the C library's allocator.
    #[inline]
    pub fn malloc(size: usize) -> *mut u8 {
        // SAFETY: plain C allocation; a null result is passed on.
        unsafe { c_malloc(size).cast() }
    }

    /// `calloc` of the C library's allocator.
    #[inline]
    pub fn calloc(n: usize, size: usize) -> *mut u8 {
        // SAFETY: plain C allocation; a null result is passed on.
        unsafe { c_calloc(n, size).cast() }
    }

    /// `memalign` of the C library's allocator (`align` a power of two).
    #[inline]
    pub fn memalign(align: usize, size: usize) -> *mut u8 {
        // SAFETY: plain C allocation; a null result is passed on.
        unsafe { c_memalign(align, size).cast() }
    }

    /// `realloc` of the C library's allocator.
    ///
    /// # Safety
    /// `p` is null or a live block of the C library's allocator.
    #[inline]
    pub unsafe fn realloc(p: *mut u8, size: usize) -> *mut u8 {
        // SAFETY: by the caller's contract.
        unsafe { c_realloc(p.cast(), size).cast() }
    }

    /// `malloc_usable_size` of the C library's allocator, found with `dlsym(RTLD_NEXT)` on
    /// first use (in the `LD_PRELOAD` library the plain name is our own).
    ///
    /// # Safety
    /// `p` is a live block of the C library's allocator.
    #[cfg(not(feature = "preload"))]
    pub unsafe fn usable_size(p: *mut u8) -> usize {
        // SAFETY: by the caller's contract.
        unsafe { libc::malloc_usable_size(p.cast()) }
    }

    /// As above, inside the `LD_PRELOAD` library.
    ///
    /// # Safety
    /// `p` is a live block of the C library's allocator.
    #[cfg(feature = "preload")]
    pub unsafe fn usable_size(p: *mut u8) -> usize {
        use core::sync::atomic::{AtomicUsize, Ordering};
        type F = unsafe extern "C" fn(*mut c_void) -> usize;
        static FN: AtomicUsize = AtomicUsize::new(0);
        // Relaxed: the value is a function address, valid whichever thread stored it.
        let mut f = FN.load(Ordering::Relaxed);
        if f == 0 {
            // SAFETY: dlsym with a NUL-terminated name; it may allocate (small: glibc's own).
            f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"malloc_usable_size".as_ptr()) } as usize;
            if f == 0 {
                // SAFETY: as above, the default search order.
                f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"malloc_usable_size".as_ptr()) }
                    as usize;
            }
            FN.store(f, Ordering::Relaxed);
        }
        if f == 0 {
            return 0;
        }
        // SAFETY: `f` is glibc's malloc_usable_size; `p` is its block.
        unsafe { core::mem::transmute::<usize, F>(f)(p.cast()) }
    }

    /// `free` of the C library's allocator.
    ///
    /// # Safety
    /// `p` is null or a live block of the C library's allocator.
    #[inline]
    pub unsafe fn free(p: *mut u8) {
        // SAFETY: by the caller's contract.
        unsafe { c_free(p.cast()) }
    }
}

#[cfg(miri)]
mod imp {
    use std::alloc::{GlobalAlloc, Layout, System};

    const HDR: usize = 64;

    pub fn memalign(align: usize, size: usize) -> *mut u8 {
        let align = align.max(HDR);
        let Ok(layout) = Layout::from_size_align(size + align, align) else {
            return core::ptr::null_mut();
        };
        // SAFETY: non-zero size.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            return p;
        }
        // SAFETY: the block has `align` ≥ 64 bytes before the user part for the header.
        unsafe {
            let user = p.add(align);
            user.cast::<usize>().sub(1).write(align);
            user.cast::<usize>().sub(2).write(size);
            user
        }
    }
    pub fn malloc(size: usize) -> *mut u8 {
        memalign(16, size)
    }
    pub fn calloc(n: usize, size: usize) -> *mut u8 {
        let Some(t) = n.checked_mul(size) else {
            return core::ptr::null_mut();
        };
        let p = malloc(t);
        if !p.is_null() {
            // SAFETY: `t` bytes were just allocated.
            unsafe { p.write_bytes(0, t) };
        }
        p
    }
    pub unsafe fn free(p: *mut u8) {
        if p.is_null() {
            return;
        }
        // SAFETY: `p` came from `memalign`, which wrote the header.
        unsafe {
            let align = p.cast::<usize>().sub(1).read();
            let size = p.cast::<usize>().sub(2).read();
            System.dealloc(
                p.sub(align),
                Layout::from_size_align_unchecked(size + align, align),
            );
        }
    }
    pub unsafe fn usable_size(p: *mut u8) -> usize {
        // SAFETY: `p` came from `memalign`, which wrote the header.
        unsafe { p.cast::<usize>().sub(2).read() }
    }
    pub unsafe fn realloc(p: *mut u8, size: usize) -> *mut u8 {
        let q = malloc(size);
        if !p.is_null() && !q.is_null() {
            // SAFETY: `p` is ours; copy the smaller of the two sizes.
            unsafe {
                let old = p.cast::<usize>().sub(2).read();
                q.copy_from_nonoverlapping(p, old.min(size));
                free(p);
            }
        }
        q
    }
}

pub(crate) use imp::*;
