//! The allocator's settings and the block sizes of its sub-allocators (§5, §5.1, §5.2).

use crate::os::{GRANULE, PAGE};
use crate::superblock::HEADER;

/// The most sub-allocators a local allocator can have.
pub const MAX_CLASSES: usize = 128;

/// The cache-line size every block size is rounded up to (§5.1: "to avoid false sharing").
pub const CACHE_LINE: usize = 64;

/// Settings of one allocator instance. [`Config::DEFAULT`] is the paper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Smallest size served by the sub-allocators (|S0|); smaller requests go to the system
    /// allocator (§5: 8 KB).
    pub min_block: usize,
    /// Largest size served by the sub-allocators; larger requests are mapped straight from the
    /// OS (§5: 512 KB).
    pub max_block: usize,
    /// |Si| = growth/1000 · |Si−1|, rounded up to the cache line (§5.1: 1.07).
    pub growth_permille: u32,
    /// Size of a superblock, a multiple of the page size (§5.2: 10 MB).
    pub superblock_size: usize,
    /// Released superblocks each node's superblock allocator keeps in its LIFO stack; more are
    /// given back to the OS. `usize::MAX` keeps all of them, as §5.2 does.
    pub cached_superblocks: usize,
    /// Largest block of the large tier (our extension of §5, `large.rs`): blocks above
    /// `max_block` and up to this are cached per thread and per node and reused without a system
    /// call; larger ones are mapped and unmapped each time. `max_block` turns the tier off.
    pub large_max: usize,
    /// Bytes of empty superblocks and cached large blocks each node keeps backed by memory; the
    /// pages of those beyond it are given back to the OS (`MADV_DONTNEED`) once they have been
    /// unused for `purge_delay_ms` (mimalloc's purge delay is the model).
    pub node_reserve_bytes: usize,
    /// See `node_reserve_bytes`. `u32::MAX` never purges.
    pub purge_delay_ms: u32,
}

impl Config {
    /// The paper's settings: blocks of 8 KB to 512 KB in steps of 1.07, superblocks of 10 MB.
    /// As in §5.2, every released superblock is kept (`usize::MAX`): memory is never given back
    /// to the OS. A bound makes threads that use many block sizes map and touch fresh superblocks
    /// over and over: with 4 per node the multi-thread benchmarks ran 10–100× slower, with 64
    /// `xmalloc` still 5× slower.
    ///
    /// Beyond the paper: the large tier up to 64 MiB (`large.rs`), and the pages of what a node
    /// keeps beyond 32 MiB are purged after 1 s unused, so the resident set follows the live
    /// data, not the peak. Not mimalloc's 10 ms: the engine runs plans in bursts, and with 10 ms
    /// (and 100 ms) a plan of 1 MiB packets run every few tens of milliseconds found its packets
    /// purged and faulted them in again each time (`bench plans --allocators nearflow,system`
    /// 1x1: 1.2–1.5× the time with glibc; with no purging 1.03×; with 1 s 0.80–1.12×).
    pub const DEFAULT: Config = Config {
        min_block: 8 << 10,
        max_block: 512 << 10,
        growth_permille: 1070,
        superblock_size: 10 << 20,
        cached_superblocks: usize::MAX,
        large_max: 64 << 20,
        node_reserve_bytes: 32 << 20,
        purge_delay_ms: 1000,
    };

    /// Checks the settings and computes the block sizes.
    pub fn classes(&self) -> Result<SizeClasses, ConfigError> {
        if self.min_block < CACHE_LINE || self.min_block % CACHE_LINE != 0 {
            return Err(ConfigError::MinBlock(self.min_block));
        }
        if self.max_block < self.min_block {
            return Err(ConfigError::Range {
                min: self.min_block,
                max: self.max_block,
            });
        }
        if self.growth_permille <= 1000 {
            return Err(ConfigError::Growth(self.growth_permille));
        }
        if self.superblock_size % PAGE != 0
            || self.superblock_size < HEADER + 2 * round_up(self.max_block, CACHE_LINE)
        {
            return Err(ConfigError::Superblock {
                size: self.superblock_size,
                need: HEADER + 2 * round_up(self.max_block, CACHE_LINE),
            });
        }
        if self.superblock_size > (u32::MAX as usize) {
            return Err(ConfigError::Superblock {
                size: self.superblock_size,
                need: 0,
            });
        }
        if self.large_max < self.max_block {
            return Err(ConfigError::LargeMax {
                large_max: self.large_max,
                max_block: self.max_block,
            });
        }
        crate::large::LargeClasses::new(self.max_block, self.large_max)
            .ok_or(ConfigError::TooManyClasses)?;
        SizeClasses::new(self.min_block, self.max_block, self.growth_permille)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::DEFAULT
    }
}

/// A setting that cannot work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The smallest block must be a positive multiple of the cache line.
    #[error("min_block {0} must be a positive multiple of {CACHE_LINE} bytes")]
    MinBlock(usize),
    /// The range is empty.
    #[error("max_block {max} is below min_block {min}")]
    Range {
        /// Smallest block.
        min: usize,
        /// Largest block.
        max: usize,
    },
    /// The growth factor must be above 1.
    #[error("growth {0}‰ must be above 1000‰")]
    Growth(u32),
    /// The large tier must start where the sub-allocators end.
    #[error("large_max {large_max} is below max_block {max_block}")]
    LargeMax {
        /// Largest block of the large tier.
        large_max: usize,
        /// Largest block of the sub-allocators.
        max_block: usize,
    },
    /// Too many sub-allocators (or large classes).
    #[error("the range needs more than {MAX_CLASSES} sub-allocators; raise the growth factor")]
    TooManyClasses,
    /// The superblock is not a multiple of the page or cannot hold two of the largest blocks.
    #[error(
        "superblock size {size} must be a multiple of {PAGE} bytes, at least {need} bytes \
         (header and two of the largest blocks) and below 4 GiB"
    )]
    Superblock {
        /// Size asked for.
        size: usize,
        /// Smallest size that works with these blocks.
        need: usize,
    },
}

/// Entries of the direct lookup table (one per 64 bytes of request size, up to 512 KiB).
const LUT: usize = (512 << 10) / CACHE_LINE + 1;

/// The block sizes |S0| < |S1| < … of the sub-allocators.
#[derive(Clone, Copy)]
pub struct SizeClasses {
    sizes: [u32; MAX_CLASSES],
    len: usize,
    /// `lut[⌈n/64⌉]` = the class of a request of n bytes, for n ≤ `lut_max`; a binary search
    /// above (a search on every allocation cost a third of the fast path).
    lut: [u8; LUT],
    lut_max: usize,
}

impl core::fmt::Debug for SizeClasses {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(&self.sizes[..self.len]).finish()
    }
}

impl SizeClasses {
    /// |S0| = `min`, |Si| = ⌈growth·|Si−1|⌉ rounded up to the cache line, until `max` is covered.
    pub const fn new(min: usize, max: usize, growth_permille: u32) -> Result<Self, ConfigError> {
        let mut sizes = [0u32; MAX_CLASSES];
        let mut s = min;
        let mut len = 0;
        loop {
            if len == MAX_CLASSES || s > u32::MAX as usize {
                return Err(ConfigError::TooManyClasses);
            }
            sizes[len] = s as u32;
            len += 1;
            if s >= max {
                break;
            }
            let mut grown = (s * growth_permille as usize).div_ceil(1000);
            if grown <= s {
                grown = s + 1;
            }
            s = round_up(grown, CACHE_LINE);
        }
        // Two pointers: the class only grows with the size.
        let mut lut = [0u8; LUT];
        let mut i = 0;
        let mut c = 0;
        let last = sizes[len - 1] as usize;
        let lut_max = if last < (LUT - 1) * CACHE_LINE {
            last
        } else {
            (LUT - 1) * CACHE_LINE
        };
        while i < LUT && i * CACHE_LINE <= lut_max {
            while (sizes[c] as usize) < i * CACHE_LINE {
                c += 1;
            }
            lut[i] = c as u8;
            i += 1;
        }
        Ok(SizeClasses {
            sizes,
            len,
            lut,
            lut_max,
        })
    }

    /// Number of sub-allocators.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a range has at least one size.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Block size of sub-allocator `i`.
    pub fn size(&self, i: usize) -> usize {
        self.sizes[i] as usize
    }

    /// The sub-allocator for a request of `n` bytes: the smallest |Si| ≥ n (§5.1), if any.
    #[inline]
    pub fn class_of(&self, n: usize) -> Option<usize> {
        if n <= self.lut_max {
            return Some(self.lut[n.div_ceil(CACHE_LINE)] as usize);
        }
        let i = self.sizes[..self.len].partition_point(|&s| (s as usize) < n);
        (i < self.len).then_some(i)
    }

    /// The sizes, smallest first.
    pub fn sizes(&self) -> impl Iterator<Item = usize> + '_ {
        self.sizes[..self.len].iter().map(|&s| s as usize)
    }
}

/// `n` rounded up to a multiple of `to` (a power of two).
pub(crate) const fn round_up(n: usize, to: usize) -> usize {
    (n + to - 1) & !(to - 1)
}

const _: () = assert!(GRANULE % PAGE == 0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_classes_cover_8k_to_512k_with_overhead_under_7_6_percent() {
        let c = Config::DEFAULT.classes().unwrap();
        // The paper counts 63 sub-allocators; rounding each step up to the cache line gives 62.
        assert_eq!(c.len(), 62);
        assert_eq!(c.size(0), 8192);
        assert!(c.size(c.len() - 1) >= 512 << 10);
        assert!(c.size(c.len() - 2) < 512 << 10);
        let mut worst = 0.0f64;
        for (i, s) in c.sizes().enumerate() {
            assert_eq!(s % CACHE_LINE, 0);
            if i > 0 {
                // The worst request for Si is |Si−1| + 1.
                let prev = c.size(i - 1) + 1;
                worst = worst.max((s - prev) as f64 / s as f64);
            }
        }
        assert!(worst < 0.071, "worst overhead {worst}");
        assert_eq!(c.class_of(1), Some(0));
        assert_eq!(c.class_of(8192), Some(0));
        assert_eq!(c.class_of(8193), Some(1));
        assert_eq!(c.class_of(512 << 10), Some(61));
        assert_eq!(c.class_of(c.size(61) + 1), None);
        // The table agrees with a search at every size.
        for n in (1..=(c.size(61) + 200)).step_by(7) {
            let want = c.sizes().position(|s| s >= n);
            assert_eq!(c.class_of(n), want, "{n}");
        }
    }

    #[test]
    fn bad_settings_are_refused() {
        let d = Config::DEFAULT;
        assert!(Config {
            min_block: 100,
            ..d
        }
        .classes()
        .is_err());
        assert!(Config {
            max_block: 4096,
            ..d
        }
        .classes()
        .is_err());
        assert!(Config {
            growth_permille: 1000,
            ..d
        }
        .classes()
        .is_err());
        assert!(Config {
            superblock_size: 1 << 20,
            ..d
        }
        .classes()
        .is_err());
        assert!(Config {
            superblock_size: (10 << 20) + 1,
            ..d
        }
        .classes()
        .is_err());
        assert_eq!(
            Config {
                growth_permille: 1001,
                ..d
            }
            .classes()
            .err(),
            Some(ConfigError::TooManyClasses)
        );
    }
}
