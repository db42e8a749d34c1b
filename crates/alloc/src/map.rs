//! The address map: from any address to the header of the allocator mapping that holds it.
//!
//! `free(p)` must tell whether `p` is ours (a superblock or a large mapping) or the system
//! allocator's, and find its header. Every mapping of ours starts on a [`GRANULE`] boundary, so
//! the granule `p >> 21` is covered by at most one mapping of ours, which *starts* at or before
//! it. A two-level radix table (like a page table) maps each granule to that mapping's header;
//! the header's `[base, base + len)` range then settles whether `p` is inside it (a mapping's last
//! granule may be shared with someone else's memory).
//!
//! Invariants: an entry is set before the mapping's first block is handed out and cleared only
//! when the mapping is given back to the OS; leaves are never freed (4096 × 128 KiB at most, for
//! the whole 128 TiB user address space).

use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, Ordering};

use crate::os::{self, GRANULE};
use crate::superblock::Superblock;

const GRANULE_BITS: u32 = GRANULE.trailing_zeros();
const ADDR_BITS: u32 = 47;
const LEAF_BITS: u32 = 14;
const TOP_BITS: u32 = ADDR_BITS - GRANULE_BITS - LEAF_BITS;
const LEAF_LEN: usize = 1 << LEAF_BITS;

type Leaf = [AtomicPtr<Superblock>; LEAF_LEN];

/// Granule → mapping header.
pub(crate) struct AddrMap {
    top: [AtomicPtr<Leaf>; 1 << TOP_BITS],
}

impl AddrMap {
    pub(crate) const fn new() -> Self {
        AddrMap {
            top: [const { AtomicPtr::new(ptr::null_mut()) }; 1 << TOP_BITS],
        }
    }

    fn split(addr: usize) -> Option<(usize, usize)> {
        if addr >> ADDR_BITS != 0 {
            return None;
        }
        let g = addr >> GRANULE_BITS;
        Some((g >> LEAF_BITS, g & (LEAF_LEN - 1)))
    }

    /// Records `hdr` for every granule of `[base, base + len)`. Returns false if a leaf could
    /// not be mapped (out of memory); the entries set so far are cleared again.
    pub(crate) fn insert(&self, base: usize, len: usize, hdr: *mut Superblock) -> bool {
        let mut g = base;
        while g < base + len {
            let Some((t, l)) = Self::split(g) else {
                self.remove(base, g - base);
                return false;
            };
            let Some(leaf) = self.leaf(t) else {
                self.remove(base, g - base);
                return false;
            };
            // Release: pairs with the Acquire load in `lookup` of a thread that is handed a block
            // of this mapping (the header is written before this store).
            leaf[l].store(hdr, Ordering::Release);
            g += GRANULE;
        }
        true
    }

    /// Clears the entries of `[base, base + len)`.
    pub(crate) fn remove(&self, base: usize, len: usize) {
        let mut g = base;
        while g < base + len {
            if let Some((t, l)) = Self::split(g) {
                // Acquire: pairs with the Release store that installed the leaf.
                let leaf = self.top[t].load(Ordering::Acquire);
                if !leaf.is_null() {
                    // SAFETY: installed leaves are never freed.
                    // Relaxed: nobody may look up a mapping that is being given back.
                    unsafe { (*leaf)[l].store(ptr::null_mut(), Ordering::Relaxed) };
                }
            }
            g += GRANULE;
        }
    }

    fn leaf(&self, t: usize) -> Option<&Leaf> {
        // Acquire: pairs with the Release CAS below, so the zeroed leaf is visible.
        let cur = self.top[t].load(Ordering::Acquire);
        if !cur.is_null() {
            // SAFETY: installed leaves live forever.
            return Some(unsafe { &*cur });
        }
        let bytes = core::mem::size_of::<Leaf>();
        let fresh = os::map(bytes).ok()?.as_ptr().cast::<Leaf>();
        // Release/Acquire: publishes the zeroed leaf (all-null entries); on failure reads the
        // winner's leaf.
        match self.top[t].compare_exchange(
            ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: just installed; lives forever.
            Ok(_) => Some(unsafe { &*fresh }),
            Err(winner) => {
                // SAFETY: `fresh` is our unused mapping of `bytes` bytes.
                unsafe { os::unmap(NonNull::new_unchecked(fresh.cast()), bytes) };
                // SAFETY: installed leaves live forever.
                Some(unsafe { &*winner })
            }
        }
    }

    /// The header of our mapping that holds `p`, if any.
    #[inline]
    pub(crate) fn lookup(&self, p: *const u8) -> Option<NonNull<Superblock>> {
        let addr = p as usize;
        let (t, l) = Self::split(addr)?;
        // Acquire: pairs with the Release CAS in `leaf`.
        let leaf = self.top[t].load(Ordering::Acquire);
        if leaf.is_null() {
            return None;
        }
        // SAFETY: installed leaves live forever.
        // Acquire: pairs with the Release store in `insert`, so the header fields are visible.
        let hdr = unsafe { (*leaf)[l].load(Ordering::Acquire) };
        let hdr = NonNull::new(hdr)?;
        // SAFETY: a header in the map belongs to a live mapping; base and len never change.
        let (base, len) = unsafe { ((*hdr.as_ptr()).base as usize, (*hdr.as_ptr()).len) };
        (addr >= base && addr < base + len).then_some(hdr)
    }
}
