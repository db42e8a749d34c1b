//! [`Shared`]: a read-only slice that owns its memory, or borrows it from a mapped snapshot
//! file (the pages the kernel maps, kept mapped while any slice of them lives).
//!
//! The store's columns and the dictionary's arena are slices of this kind, so one store can be
//! built in memory (loading) or opened by mapping its snapshot (`snapshot/mapped.rs`) and read by the
//! same code, with no branch on the read path: a `Shared` is a pointer and a length, and the
//! owner only keeps the memory alive.

use std::ops::Deref;
use std::sync::Arc;

/// What keeps a [`Shared`]'s memory alive.
enum Keep<T> {
    /// Its own vector (the pointer is the vector's buffer, which does not move with it).
    Owned(Vec<T>),
    /// A mapped file.
    Mapped(#[allow(dead_code)] Arc<memmap2::Mmap>),
}

/// A read-only slice of `T`, owned or mapped.
pub struct Shared<T: Copy + 'static> {
    ptr: *const T,
    len: usize,
    keep: Keep<T>,
}

// SAFETY: a `Shared` is never written through; its memory is a `Vec` it owns or a read-only
// mapping it keeps alive, both fine to read from any thread.
unsafe impl<T: Copy + Send + Sync + 'static> Send for Shared<T> {}
// SAFETY: as above: shared references only read.
unsafe impl<T: Copy + Send + Sync + 'static> Sync for Shared<T> {}

impl<T: Copy + 'static> Shared<T> {
    /// `len` values of `T` at byte `offset` of the mapping `map`.
    ///
    /// # Panics
    /// If the range is not inside the mapping or `offset` is not aligned for `T` (the caller
    /// checks both first: a snapshot's sections are page-aligned and bounded by its header).
    pub(crate) fn mapped(map: &Arc<memmap2::Mmap>, offset: usize, len: usize) -> Self {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("no overflow");
        assert!(
            offset
                .checked_add(bytes)
                .is_some_and(|end| end <= map.len()),
            "inside the mapping"
        );
        let ptr = map[offset..].as_ptr();
        assert_eq!(ptr.align_offset(std::mem::align_of::<T>()), 0, "aligned");
        Shared {
            ptr: ptr.cast(),
            len,
            keep: Keep::Mapped(map.clone()),
        }
    }

    /// Heap bytes it owns (0 for a mapped slice: those are the page cache's).
    pub fn heap_bytes(&self) -> usize {
        match &self.keep {
            Keep::Owned(v) => v.capacity() * std::mem::size_of::<T>(),
            Keep::Mapped(_) => 0,
        }
    }

    /// Bytes of a mapped file it reads (0 when owned).
    pub fn mapped_bytes(&self) -> usize {
        match &self.keep {
            Keep::Owned(_) => 0,
            Keep::Mapped(_) => self.len * std::mem::size_of::<T>(),
        }
    }
}

impl<T: Copy + 'static> From<Vec<T>> for Shared<T> {
    fn from(v: Vec<T>) -> Self {
        Shared {
            ptr: v.as_ptr(),
            len: v.len(),
            keep: Keep::Owned(v),
        }
    }
}

impl<T: Copy + 'static> Default for Shared<T> {
    fn default() -> Self {
        Vec::new().into()
    }
}

impl<T: Copy + 'static> Deref for Shared<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points at `len` initialised values of `T` that `keep` keeps alive and
        // that nothing writes (a vector's buffer, which does not move when the vector does, or
        // a range of a read-only mapping, checked in bounds and aligned when made).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: Copy + 'static> Clone for Shared<T> {
    fn clone(&self) -> Self {
        match &self.keep {
            Keep::Owned(v) => v.clone().into(),
            Keep::Mapped(m) => Shared {
                ptr: self.ptr,
                len: self.len,
                keep: Keep::Mapped(m.clone()),
            },
        }
    }
}

impl<T: Copy + std::fmt::Debug + 'static> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_and_mapped_slices_read_alike_and_outlive_their_maker() {
        let v: Vec<u32> = (0..1000).collect();
        let s: Shared<u32> = v.clone().into();
        let moved = s;
        assert_eq!(&moved[..], &v[..]);
        assert_eq!(moved.heap_bytes(), 4000);
        let c = moved.clone();
        drop(moved);
        assert_eq!(c[999], 999);
        let path = std::env::temp_dir().join(format!("nearflow-shared-{}", std::process::id()));
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: the test's own file, not changed while mapped.
        let map = Arc::new(unsafe { memmap2::Mmap::map(&file) }.unwrap());
        let m: Shared<u32> = Shared::mapped(&map, 8, 998);
        drop(map);
        let _ = std::fs::remove_file(&path);
        let m2 = m.clone();
        drop(m);
        if cfg!(target_endian = "little") {
            assert_eq!(m2[0], 2);
            assert_eq!(m2[997], 999);
        }
        assert_eq!(m2.heap_bytes(), 0);
        assert_eq!(m2.mapped_bytes(), 998 * 4);
        let e: Shared<u64> = Shared::default();
        assert!(e.is_empty());
    }
}
