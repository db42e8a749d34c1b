//! The large tier: blocks above the sub-allocators' range, reused without a system call.
//! **Our extension of §5**, not in the paper.
//!
//! §5 maps every block above 512 KB straight from the OS, because in 2013 the engine's packets
//! (half the L2, §4 of the Bobox paper) were at most 512 KB. Today's cores have 1–2 MiB of L2
//! (so packets of 512 KiB–1 MiB, and more on machines with 4 MiB), and an `mmap`, its page
//! faults and an `munmap` for every packet made the allocator 1.7–1.9× slower than glibc's.
//! The tier keeps such blocks for reuse, in two levels, like the sub-allocators:
//!
//! - **size classes**: eight per doubling above `max_block` (block sizes at most 9.5 % apart, so a
//!   reused block wastes under 9 % of its pages), up to `Config::large_max` (64 MiB by
//!   default); one mapping per block (`Kind::Large`, header page then the block), mapped on the
//!   node of the thread that first asks (first touch, §5.2);
//! - **per-thread caches** (in the local allocator, `Heap::large`): a freed block of the thread's
//!   own node goes to the freeing thread's cache for its class, at most [`PER_CLASS`] blocks and
//!   [`THREAD_BYTES`] bytes in all; no lock, no atomic;
//! - **per-node caches** (`node.rs`, under the node's lock): what a thread cache cannot take,
//!   and every block freed by a thread of another node, goes back to the cache of the block's
//!   node, LIFO per class. An allocation looks in the thread's cache, then in its node's, each
//!   for a block of its class, else of the smallest larger class there is ([`STRETCH`]).
//! - **eviction on a miss**: when neither has a block that fits and a new one must be
//!   mapped, the node first unmaps cached blocks, the most recently freed of each class first,
//!   until what it keeps resident plus the new block is within `Config::node_reserve_bytes`.
//!   Cached blocks that could not serve the miss are of other sizes; keeping them while
//!   mapping more made resident memory grow with every size ever seen (`bench alloc`'s
//!   `large-churn`, blocks of 1–25 MiB with at most 500 MiB live: 1.83 GB resident, against
//!   536–584 MiB for glibc and mimalloc; now 515–583 MiB). So what the tier keeps resident is
//!   bounded by the live blocks' peak, the thread caches and the reserve.
//!
//! So in the steady state of a pipeline (producer allocates, consumer frees) a packet costs a
//! lock round trip on its node at most, never a system call, and its pages stay on the node that
//! touched them first. The node keeps its large blocks like its superblocks: the pages of what
//! exceeds its reserve are purged after the delay (`node.rs`), the mapping stays for reuse.
//!
//! Blocks above `large_max`, blocks aligned to more than a page and allocate-on-node blocks are
//! not cached (`NO_CLASS`): mapped and unmapped each time, as §5 says.

use crate::os::PAGE;
use crate::superblock::Superblock;

/// Most large classes (64 MiB over 512 KiB is 7 doublings, 56 classes).
pub(crate) const MAX_LARGE: usize = 64;

/// `Superblock::large_class` of a mapping that is not cached.
pub(crate) const NO_CLASS: u32 = u32::MAX;

/// Blocks of one class a thread keeps.
pub(crate) const PER_CLASS: usize = 4;

/// Bytes a thread keeps over all classes; a block larger than this is never kept by a thread.
pub(crate) const THREAD_BYTES: usize = 32 << 20;

/// How many classes above the one asked for a reused block may be: any. A cached block is
/// resident already (its pages were touched), so handing out a larger one costs no memory,
/// where mapping a new block beside it would, and its pages fault in again. Measured on
/// `bench alloc`'s `large-churn` (2-vCPU EPYC guest): allowing one doubling only, 1.34 ms per
/// operation (almost every request mapped anew); any larger class, 72 µs and 583 MiB peak, where
/// mimalloc took 69 µs and 584 MiB.
pub(crate) const STRETCH: usize = MAX_LARGE;

/// The smallest class in `c..=c + STRETCH` whose bit is set in `held`.
#[inline]
pub(crate) fn first_at_or_above(held: u64, c: usize) -> Option<usize> {
    const _: () = assert!(MAX_LARGE <= 64, "one bit per class");
    let above = held.checked_shr(c as u32)?;
    let k = c + above.trailing_zeros() as usize;
    (above != 0 && k <= c + STRETCH).then_some(k)
}

/// Eight steps per doubling: 2^(k/8) in permille, k = 1..8.
const STEPS: [usize; 8] = [1091, 1189, 1297, 1414, 1542, 1682, 1834, 2000];

/// The block sizes of the large classes: `size(0) > max_block`, each at most 9.5 % above the
/// previous, multiples of the page, the last ≥ `large_max`.
#[derive(Clone, Copy)]
pub(crate) struct LargeClasses {
    sizes: [usize; MAX_LARGE],
    len: usize,
    max_block: usize,
}

impl LargeClasses {
    /// The classes over `(max_block, large_max]`; none when `large_max == max_block`. None when
    /// more than [`MAX_LARGE`] would be needed.
    pub(crate) const fn new(max_block: usize, large_max: usize) -> Option<Self> {
        let mut sizes = [0usize; MAX_LARGE];
        let mut len = 0;
        let mut j = 0;
        while large_max > max_block && (len == 0 || sizes[len - 1] < large_max) {
            if len == MAX_LARGE {
                return None;
            }
            let base = max_block << (j / 8);
            let s = (base * STEPS[j % 8] / 1000 + PAGE - 1) & !(PAGE - 1);
            if len == 0 || s > sizes[len - 1] {
                sizes[len] = s;
                len += 1;
            }
            j += 1;
        }
        Some(LargeClasses {
            sizes,
            len,
            max_block,
        })
    }

    /// The class of a request of `n` bytes above `max_block`, if the tier covers it.
    #[inline]
    pub(crate) fn class_of(&self, n: usize) -> Option<usize> {
        if n <= self.max_block || self.len == 0 || n > self.sizes[self.len - 1] {
            return None;
        }
        Some(self.sizes[..self.len].partition_point(|&s| s < n))
    }

    /// The block size of class `c`.
    #[inline]
    pub(crate) fn size(&self, c: usize) -> usize {
        self.sizes[c]
    }

    /// Number of classes.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// A thread's cache of large blocks (inside its local allocator; all-zero is empty). Only the
/// holder of the local allocator touches it.
#[repr(C)]
pub(crate) struct ThreadCache {
    bytes: usize,
    /// Bit `c` set when class `c` holds a block: the smallest class at or above the one asked
    /// for is one bit scan, not a walk over the empty ones.
    held: u64,
    count: [u8; MAX_LARGE],
    slots: [[*mut Superblock; PER_CLASS]; MAX_LARGE],
}

impl ThreadCache {
    /// A kept block for a request of class `c`: of class `c`, else of the smallest larger class
    /// the thread keeps (up to [`STRETCH`] above).
    #[inline]
    pub(crate) fn take_fit(&mut self, c: usize) -> Option<*mut Superblock> {
        self.take(first_at_or_above(self.held, c)?)
    }

    /// The most recently kept block of class `c`, if any.
    #[inline]
    pub(crate) fn take(&mut self, c: usize) -> Option<*mut Superblock> {
        let n = self.count[c] as usize;
        if n == 0 {
            return None;
        }
        self.count[c] -= 1;
        if n == 1 {
            self.held &= !(1 << c);
        }
        let sb = self.slots[c][n - 1];
        // SAFETY: a kept mapping is live and ours alone.
        self.bytes -= unsafe { (*sb).len };
        Some(sb)
    }

    /// Keeps `sb` (of class `c`) if there is room; false when the caller must pass it on.
    #[inline]
    pub(crate) fn put(&mut self, c: usize, sb: *mut Superblock) -> bool {
        let n = self.count[c] as usize;
        // SAFETY: the caller hands over a live mapping.
        let len = unsafe { (*sb).len };
        if n == PER_CLASS || self.bytes + len > THREAD_BYTES {
            return false;
        }
        self.slots[c][n] = sb;
        self.count[c] += 1;
        self.held |= 1 << c;
        self.bytes += len;
        true
    }

    /// Takes every kept block out (for a thread that exits), calling `f` on each.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(usize, *mut Superblock)) {
        for c in 0..MAX_LARGE {
            while let Some(sb) = self.take(c) {
                f(c, sb);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_held_class_at_or_above() {
        let held = 1 << 3 | 1 << 10 | 1 << 63;
        assert_eq!(first_at_or_above(held, 0), Some(3));
        assert_eq!(first_at_or_above(held, 3), Some(3));
        assert_eq!(first_at_or_above(held, 4), Some(10));
        assert_eq!(first_at_or_above(held, 11), Some(63));
        assert_eq!(first_at_or_above(0, 5), None);
        assert_eq!(first_at_or_above(held, 64), None);
    }

    #[test]
    fn classes_cover_the_range_in_steps_of_at_most_9_5_percent() {
        let c = LargeClasses::new(512 << 10, 64 << 20).unwrap();
        assert!(c.len() <= 57, "{}", c.len());
        assert!(c.size(0) > 512 << 10);
        assert!(c.size(c.len() - 1) >= 64 << 20);
        for i in 1..c.len() {
            assert_eq!(c.size(i) % PAGE, 0);
            let step = c.size(i) as f64 / c.size(i - 1) as f64;
            assert!(step > 1.0 && step < 1.095, "{i}: {step}");
        }
        assert_eq!(c.class_of(512 << 10), None, "the sub-allocators' range");
        assert_eq!(c.class_of((512 << 10) + 1), Some(0));
        assert_eq!(c.class_of(c.size(3)), Some(3));
        assert_eq!(c.class_of(c.size(3) + 1), Some(4));
        assert_eq!(c.class_of((64 << 20) + PAGE * 1000), None);
        for n in [1 << 20, 2 << 20, 4 << 20, 8 << 20, 3_000_000] {
            let k = c.class_of(n).unwrap();
            assert!(c.size(k) >= n && (k == 0 || c.size(k - 1) < n));
        }
        let none = LargeClasses::new(512 << 10, 512 << 10).unwrap();
        assert_eq!(none.class_of(600 << 10), None);
        assert!(LargeClasses::new(4096, 1 << 40).is_none());
    }
}
