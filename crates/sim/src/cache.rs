//! One cache of the machine: an LRU set of whole data blocks, bounded by bytes.
//!
//! Blocks are the unit of the model (a packet, a matrix row, a partition's slice), not cache
//! lines: a block is in a cache or not. A block larger than the cache is never kept. Invariant:
//! `used` is the sum of the sizes of the blocks held, and never exceeds `capacity`.

use std::collections::{BTreeMap, HashMap};

use crate::workload::BlockId;

#[derive(Clone, Debug)]
pub(crate) struct Cache {
    pub(crate) level: u8,
    capacity: u64,
    used: u64,
    /// Block → (last use, bytes).
    held: HashMap<BlockId, (u64, u64)>,
    /// Last use → block, oldest first.
    order: BTreeMap<u64, BlockId>,
    clock: u64,
}

impl Cache {
    pub(crate) fn new(level: u8, capacity: u64) -> Self {
        Cache {
            level,
            capacity,
            used: 0,
            held: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
        }
    }

    /// Whether `b` is held; a hit makes it the most recently used.
    pub(crate) fn touch(&mut self, b: BlockId) -> bool {
        let Some(e) = self.held.get_mut(&b) else {
            return false;
        };
        self.order.remove(&e.0);
        self.clock += 1;
        e.0 = self.clock;
        self.order.insert(self.clock, b);
        true
    }

    /// Puts `b` in as the most recently used, evicting the least recently used blocks.
    pub(crate) fn insert(&mut self, b: BlockId, bytes: u64) {
        if self.touch(b) || bytes > self.capacity {
            return;
        }
        while self.used + bytes > self.capacity {
            let Some((_, old)) = self.order.pop_first() else {
                break;
            };
            if let Some((_, n)) = self.held.remove(&old) {
                self.used -= n;
            }
        }
        self.clock += 1;
        self.held.insert(b, (self.clock, bytes));
        self.order.insert(self.clock, b);
        self.used += bytes;
    }

    /// Drops `b` (its memory was freed).
    pub(crate) fn forget(&mut self, b: BlockId) {
        if let Some((t, n)) = self.held.remove(&b) {
            self.order.remove(&t);
            self.used -= n;
        }
    }

    #[cfg(test)]
    fn used(&self) -> u64 {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_by_bytes() {
        let mut c = Cache::new(2, 100);
        c.insert(1, 40);
        c.insert(2, 40);
        assert!(c.touch(1)); // 2 is now the oldest
        c.insert(3, 40);
        assert!(c.touch(1) && c.touch(3) && !c.touch(2));
        assert_eq!(c.used(), 80);
        c.insert(4, 200); // larger than the cache: not kept, nothing evicted
        assert!(!c.touch(4) && c.touch(1));
        c.forget(1);
        assert_eq!(c.used(), 40);
        c.insert(5, 60);
        assert!(c.touch(3) && c.touch(5));
        assert_eq!(c.used(), 100);
    }
}
