//! [`NodeBuffer`]: a fixed-length buffer of plain values whose pages are bound to one NUMA node,
//! the literal `newAtProcessor` of Fig. 5 (the paper maps it to `numa_alloc`; here it is
//! `nearflow_alloc::Allocator::alloc_on_node`, which `mbind`s the pages before they are
//! touched). For data built by ordinary Rust code, [`SplittableData::build`](crate::SplittableData::build)
//! places memory by building on the node instead.

use std::marker::PhantomData;
use std::ptr::NonNull;

use nearflow_alloc::{AllocError, GLOBAL};

mod sealed {
    pub trait Sealed {}
}

/// Values for which all-zero bytes are a valid value and that own nothing: what a
/// [`NodeBuffer`] may hold.
pub trait Plain: Copy + Send + Sync + sealed::Sealed + 'static {}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Plain for $t {}
    )*};
}
plain!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);

/// `len` values of `T` on NUMA node `node` of this host, zeroed.
pub struct NodeBuffer<T: Plain> {
    ptr: NonNull<T>,
    len: usize,
    node: usize,
    _own: PhantomData<T>,
}

// SAFETY: the buffer owns its memory and `T` is `Send + Sync` plain data.
unsafe impl<T: Plain> Send for NodeBuffer<T> {}
// SAFETY: as above; shared access only reads.
unsafe impl<T: Plain> Sync for NodeBuffer<T> {}

impl<T: Plain> NodeBuffer<T> {
    /// Allocates `len` zeroed values on host NUMA node `node`. Fails if the node does not exist
    /// here (a synthetic machine's node 1 on a one-node host) or memory runs out.
    pub fn zeroed(node: usize, len: usize) -> Result<Self, AllocError> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(AllocError::OutOfMemory)?
            .max(1);
        let p = GLOBAL.alloc_on_node(bytes, node)?;
        // The allocator's blocks are 16-byte aligned, more than any `Plain` type needs.
        debug_assert_eq!(p.as_ptr() as usize % std::mem::align_of::<T>(), 0);
        // SAFETY: `bytes` writable bytes at `p`, ours alone; writing them is the first touch,
        // which backs the pages on `node` (they are bound there).
        unsafe { std::ptr::write_bytes(p.as_ptr(), 0, bytes) };
        Ok(NodeBuffer {
            ptr: p.cast(),
            len,
            node,
            _own: PhantomData,
        })
    }

    /// The node the pages are bound to.
    pub fn node(&self) -> usize {
        self.node
    }
}

impl<T: Plain> std::ops::Deref for NodeBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised (zeroed, and all-zero is a valid `T`) values, alive while
        // `self` is.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Plain> std::ops::DerefMut for NodeBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Plain> Drop for NodeBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: allocated by `GLOBAL.alloc_on_node` and freed once.
        unsafe { GLOBAL.free(self.ptr.as_ptr().cast()) };
    }
}

impl<T: Plain + std::fmt::Debug> std::fmt::Debug for NodeBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeBuffer")
            .field("node", &self.node)
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_on_node_0_is_zeroed_writable_and_freed() {
        let mut b = NodeBuffer::<f32>::zeroed(0, 100_000).unwrap();
        assert!(b.iter().all(|&x| x == 0.0));
        b[99_999] = 1.5;
        assert_eq!(b.iter().sum::<f32>(), 1.5);
        assert_eq!(b.node(), 0);
        #[cfg(target_os = "linux")]
        {
            let pages: Vec<*const u8> = b.chunks(1024).map(|c| c.as_ptr().cast()).collect();
            let nodes = nearflow_alloc::page_nodes(&pages).unwrap();
            assert!(nodes.iter().all(|&n| n == 0), "{nodes:?}");
        }
    }

    #[test]
    fn a_node_that_is_not_here_is_an_error() {
        assert!(NodeBuffer::<u8>::zeroed(63, 10).is_err());
    }
}
