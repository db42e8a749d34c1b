//! What a mapped store's checks have found ([`Health`]), and the marks of which chunks of a
//! file have been checked (`ChunkMarks`).
//!
//! A mapped store is read in place, so its checksums are checked apart from the open. Format 3
//! checks every section once, in the background (`snapshot/mapped.rs`); formats 5 and 4 check each
//! chunk of its indexes and terms the first time a row or term of it is read
//! (`snapshot/packed.rs`, `blocks.rs`), so a query reads and checks only what it touches, and
//! [`Health::check_all`] checks the rest (`nearflow check store`). Either way the first damage
//! found is kept, naming what is damaged, and every later query and update of the store fails
//! with it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// What the checks of a mapped store found.
#[derive(Default)]
pub struct Health {
    pub(crate) damage: OnceLock<String>,
    /// Set when a background check has checked everything (or found damage); unused when the
    /// store is checked as it is read.
    pub(crate) done: AtomicBool,
    /// Checks every chunk not checked yet (a store checked as it is read); `None` for a store
    /// checked in the background.
    pub(crate) check_rest: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("damage", &self.damage.get())
            .field("checked_as_read", &self.check_rest.get().is_some())
            .finish()
    }
}

impl Health {
    /// The damage found so far, naming what is damaged.
    pub fn damage(&self) -> Option<&str> {
        self.damage.get().map(String::as_str)
    }

    /// Records damage (the first report is kept).
    pub(crate) fn report(&self, why: String) {
        let _ = self.damage.set(why);
    }

    /// Whether the store is checked as it is read (each chunk before its first read), rather
    /// than by one pass in the background.
    pub fn checked_as_read(&self) -> bool {
        self.check_rest.get().is_some()
    }

    /// Whether every section has been checked (a background check), or — for a store checked
    /// as it is read — whether what was read so far is known whole: always, since nothing is
    /// read before its check.
    pub fn checked(&self) -> bool {
        self.checked_as_read() || self.done.load(Ordering::Acquire)
    }

    /// The damage in what a finished query read: waits for the background check of a store
    /// checked in the background (it may not have reached what the query read); for a store
    /// checked as it is read, what its reads found, at once.
    pub fn settled(&self) -> Option<&str> {
        while !self.checked() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        self.damage()
    }

    /// Checks the whole store: waits for the background check, or checks every chunk not read
    /// yet. The damage, if any.
    pub fn check_all(&self) -> Option<&str> {
        if let Some(rest) = self.check_rest.get() {
            rest();
        }
        self.settled()
    }
}

/// Which chunks of a section have been checked, and which of them were found whole: two bits
/// per chunk, set once. A chunk checked by two readers at once is checked twice, with the same
/// verdict.
pub(crate) struct ChunkMarks {
    checked: Box<[AtomicU64]>,
    whole: Box<[AtomicU64]>,
}

impl ChunkMarks {
    /// Marks for `chunks` chunks, none checked.
    pub(crate) fn new(chunks: usize) -> ChunkMarks {
        let words = chunks.div_ceil(64);
        ChunkMarks {
            checked: (0..words).map(|_| AtomicU64::new(0)).collect(),
            whole: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// `None` before chunk `c` is checked, then whether it is whole. One load when it is (the
    /// read path's case).
    #[inline]
    pub(crate) fn state(&self, c: usize) -> Option<bool> {
        let (w, bit) = (c >> 6, 1u64 << (c & 63));
        if self.whole[w].load(Ordering::Acquire) & bit != 0 {
            return Some(true);
        }
        self.damaged_or_unchecked(w, bit)
    }

    #[cold]
    fn damaged_or_unchecked(&self, w: usize, bit: u64) -> Option<bool> {
        (self.checked[w].load(Ordering::Acquire) & bit != 0).then_some(false)
    }

    /// Records chunk `c`'s verdict.
    pub(crate) fn set(&self, c: usize, whole: bool) {
        let (w, bit) = (c >> 6, 1u64 << (c & 63));
        if whole {
            self.whole[w].fetch_or(bit, Ordering::Release);
        }
        self.checked[w].fetch_or(bit, Ordering::Release);
    }

    /// Chunks checked so far.
    pub(crate) fn checked_count(&self) -> usize {
        self.checked
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones() as usize)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_marks_keep_each_verdict() {
        let m = ChunkMarks::new(130);
        assert_eq!(m.state(0), None);
        m.set(0, true);
        m.set(129, false);
        assert_eq!(m.state(0), Some(true));
        assert_eq!(m.state(129), Some(false));
        assert_eq!(m.state(64), None);
        assert_eq!(m.checked_count(), 2);
    }
}
