//! A superblock (§5.1, §5.2): one mapping of `superblock_size` bytes whose first page is this
//! header and whose rest is cut into blocks of one sub-allocator's size. The same header, with
//! [`Kind::Large`], describes a large block mapped straight from the OS.
//!
//! Free blocks form a doubly linked list kept inside the free blocks themselves (§5.1), used
//! LIFO: a freed block is pushed at the head and the next allocation pops it, while it may still
//! be in the cache. Blocks never handed out since the superblock was formatted are not linked:
//! they are the `capacity − bump` blocks past the bump index (formatting a 10 MB superblock into
//! a list would write to every block for nothing).
//!
//! Counting invariant (checked by [`Superblock::is_valid`]):
//! `used + free_len + (capacity − bump) = capacity`, and the list holds exactly `free_len`
//! blocks, each inside `[data, data + bump·block_size)` on a block boundary, with consistent
//! `prev`/`next` links.

use core::ptr::{self, NonNull};

use crate::heap::Heap;

/// Bytes at the start of each mapping given to its header (one page: blocks stay page-aligned
/// for the 8 KB class).
pub const HEADER: usize = crate::os::PAGE;

// The header fits in its page, and a page-aligned address is aligned for it.
const _: () = assert!(
    core::mem::size_of::<Superblock>() <= HEADER
        && HEADER % core::mem::align_of::<Superblock>() == 0
);

/// What a mapping holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// Blocks of one sub-allocator.
    Super,
    /// One block larger than the sub-allocators' range, at `base + offset`.
    Large,
}

/// A free block's links, stored in the block itself.
#[repr(C)]
pub(crate) struct FreeBlock {
    pub(crate) next: *mut FreeBlock,
    pub(crate) prev: *mut FreeBlock,
}

/// The header of a superblock or of a large mapping.
///
/// Who touches what: `base`, `len`, `kind` and `node` are set when the mapping is made and never
/// change. Everything else belongs to the owner: the local allocator in `owner` (only its thread,
/// or whoever holds its claim, see `heap.rs`), or the node's superblock allocator while `owner`
/// is null (only under the node's lock).
#[repr(C)]
pub(crate) struct Superblock {
    pub(crate) base: *mut u8,
    pub(crate) len: usize,
    pub(crate) kind: Kind,
    /// The node whose memory backs the pages (where it was touched or bound).
    pub(crate) node: u32,
    /// The local allocator that owns the blocks; null while cached by the node.
    pub(crate) owner: *mut Heap,
    /// Sub-allocator index, block size and number of blocks (kept while the superblock is in
    /// a node's stack: the node hands it to the same sub-allocator first).
    pub(crate) class: u32,
    pub(crate) block_size: u32,
    pub(crate) capacity: u32,
    /// Blocks handed out and not yet freed to the owner.
    pub(crate) used: u32,
    /// Blocks `[0, bump)` have been handed out at least once since formatting.
    pub(crate) bump: u32,
    /// Length of the free list.
    pub(crate) free_len: u32,
    pub(crate) free_head: *mut FreeBlock,
    /// Position in the owner's priority queue; `NOT_QUEUED` when full or not owned.
    pub(crate) pq_index: u32,
    /// Links in the sub-allocator's list of superblocks, or in the node's LIFO stack.
    pub(crate) next: *mut Superblock,
    pub(crate) prev: *mut Superblock,
    /// For [`Kind::Large`]: offset of the block from `base`.
    pub(crate) offset: usize,
    /// Empty, and kept by its owner instead of going back to the node (see `heap.rs`).
    pub(crate) kept: bool,
    /// In a node's stack: its pages were given back to the OS (`node.rs`).
    pub(crate) purged: bool,
    /// Bytes from `data()` that blocks have covered since the superblock was mapped or last
    /// purged (at least; brought up to date when it empties): what keeping it costs.
    pub(crate) touched: usize,
    /// When it entered a node's stack (ms, `os::now_ms`).
    pub(crate) released_at: u64,
    /// For [`Kind::Large`]: its large class, or `large::NO_CLASS` when it is not cached.
    pub(crate) large_class: u32,
}

/// `pq_index` of a superblock outside any priority queue.
pub(crate) const NOT_QUEUED: u32 = u32::MAX;

impl Superblock {
    /// Writes a fresh header at the start of a new mapping.
    ///
    /// # Safety
    /// `base` is a fresh writable mapping of `len` ≥ [`HEADER`] bytes.
    pub(crate) unsafe fn init(base: NonNull<u8>, len: usize, kind: Kind, node: u32) -> *mut Self {
        let sb = base.as_ptr().cast::<Superblock>();
        // SAFETY: (1) the caller's mapping is writable for `len` ≥ `HEADER` bytes, and the
        // header fits in `HEADER` (asserted above); (2) mappings start on a page boundary, which
        // is aligned for the header; (3) the mapping is fresh, so nothing else refers to it.
        unsafe {
            sb.write(Superblock {
                base: base.as_ptr(),
                len,
                kind,
                node,
                owner: ptr::null_mut(),
                class: 0,
                block_size: 0,
                capacity: 0,
                used: 0,
                bump: 0,
                free_len: 0,
                free_head: ptr::null_mut(),
                pq_index: NOT_QUEUED,
                next: ptr::null_mut(),
                prev: ptr::null_mut(),
                offset: 0,
                kept: false,
                purged: false,
                touched: 0,
                released_at: 0,
                large_class: crate::large::NO_CLASS,
            })
        };
        sb
    }

    /// First byte of the first block.
    #[inline]
    pub(crate) fn data(&self) -> *mut u8 {
        // SAFETY: `HEADER` < `len`, inside the mapping.
        unsafe { self.base.add(HEADER) }
    }

    /// Cuts the superblock into blocks of `block_size` for sub-allocator `class` of `owner`.
    pub(crate) fn format(&mut self, class: usize, block_size: usize, owner: *mut Heap) {
        debug_assert!(self.kind == Kind::Super && self.owner.is_null());
        self.class = class as u32;
        self.block_size = block_size as u32;
        self.capacity = ((self.len - HEADER) / block_size) as u32;
        self.used = 0;
        self.bump = 0;
        self.free_len = 0;
        self.free_head = ptr::null_mut();
        self.pq_index = NOT_QUEUED;
        self.kept = false;
        self.owner = owner;
    }

    /// Bytes from `data()` that blocks have covered since the mapping or the last purge: at
    /// least its resident block pages.
    #[inline]
    pub(crate) fn covered(&self) -> usize {
        self.touched
            .max(self.bump as usize * self.block_size as usize)
    }

    /// Blocks that can still be handed out.
    #[inline]
    pub(crate) fn free(&self) -> u32 {
        self.free_len + (self.capacity - self.bump)
    }

    /// Takes a free block: the head of the free list (the last freed, LIFO), else the next
    /// never-used block. The caller has checked `free() > 0`.
    #[inline]
    pub(crate) fn pop(&mut self) -> *mut u8 {
        debug_assert!(self.free() > 0);
        self.used += 1;
        let head = self.free_head;
        if !head.is_null() {
            // SAFETY: list blocks are free blocks of this superblock holding valid links.
            unsafe {
                let next = (*head).next;
                if !next.is_null() {
                    (*next).prev = ptr::null_mut();
                }
                self.free_head = next;
            }
            self.free_len -= 1;
            head.cast()
        } else {
            // SAFETY: bump < capacity, so the block is inside the mapping.
            let b = unsafe {
                self.data()
                    .add(self.bump as usize * self.block_size as usize)
            };
            self.bump += 1;
            b
        }
    }

    /// Gives block `b` back to the free list, at its head (LIFO, §5.1).
    ///
    /// # Safety
    /// `b` is a block of this superblock that is handed out (not free).
    #[inline]
    pub(crate) unsafe fn push(&mut self, b: *mut u8) {
        debug_assert!(self.used > 0 && self.owns_block(b));
        let fb = b.cast::<FreeBlock>();
        // SAFETY: the block is ours again and at least 64 bytes long.
        unsafe {
            fb.write(FreeBlock {
                next: self.free_head,
                prev: ptr::null_mut(),
            });
            if !self.free_head.is_null() {
                (*self.free_head).prev = fb;
            }
        }
        self.free_head = fb;
        self.free_len += 1;
        self.used -= 1;
    }

    /// Whether `b` is the start of a block of this superblock that has been handed out before.
    pub(crate) fn owns_block(&self, b: *const u8) -> bool {
        let data = self.data() as usize;
        let a = b as usize;
        a >= data
            && a < data + self.bump as usize * self.block_size as usize
            && (a - data) % self.block_size as usize == 0
    }

    /// Checks the counting invariant and the free list (debug builds and tests; O(free_len)).
    pub(crate) fn is_valid(&self) -> bool {
        if self.kind != Kind::Super {
            return self.offset >= HEADER && self.offset < self.len;
        }
        if self.bump > self.capacity
            || self.used + self.free_len + (self.capacity - self.bump) != self.capacity
        {
            return false;
        }
        let mut n = 0u32;
        let mut prev: *mut FreeBlock = ptr::null_mut();
        let mut cur = self.free_head;
        while !cur.is_null() {
            if n > self.free_len || !self.owns_block(cur.cast()) {
                return false;
            }
            // SAFETY: `cur` is a block of this superblock (checked above) on the free list.
            unsafe {
                if (*cur).prev != prev {
                    return false;
                }
                prev = cur;
                cur = (*cur).next;
            }
            n += 1;
        }
        n == self.free_len
    }
}
