//! The sources: integer ranges, slices and `Vec`s (by reference and by value), chunks of
//! slices, and a `SplittableData`'s partitions.

use std::ops::Range;

use nearflow_split::{PartInfo, SplittableData};

use crate::{bridge, Consumer, IntoParallelIterator, ParallelIterator, Producer, Reducer as _};

/// A parallel iterator over a source that can be cut anywhere (a [`Producer`]): what ranges,
/// slices, `Vec`s and chunks become.
#[derive(Debug)]
pub struct Par<P> {
    producer: P,
    min_len: usize,
}

impl<P: Producer> Par<P> {
    fn new(producer: P) -> Self {
        Par {
            producer,
            min_len: 1,
        }
    }

    /// Pieces of at least `min` items (rayon's `with_min_len`): fewer, larger tasks for cheap
    /// items.
    pub fn with_min_len(mut self, min: usize) -> Self {
        self.min_len = min.max(1);
        self
    }

    /// Each item with its position (rayon's `enumerate`, on a source whose positions are
    /// known).
    pub fn enumerate(self) -> Par<EnumerateProducer<P>> {
        Par {
            producer: EnumerateProducer {
                base: self.producer,
                offset: 0,
            },
            min_len: self.min_len,
        }
    }

    /// Pairs of this source's items and `other`'s, as long as the shorter (rayon's `zip`, on
    /// sources whose positions are known).
    pub fn zip<Q: Producer>(self, other: Par<Q>) -> Par<ZipProducer<P, Q>> {
        let len = self.producer.len().min(other.producer.len());
        let (a, _) = self.producer.split_at(len);
        let (b, _) = other.producer.split_at(len);
        Par {
            producer: ZipProducer { a, b },
            min_len: self.min_len.max(other.min_len),
        }
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.producer.len()
    }

    /// Whether there is no item.
    pub fn is_empty(&self) -> bool {
        self.producer.is_empty()
    }
}

impl<P> ParallelIterator for Par<P>
where
    P: Producer,
    P::Item: Send,
{
    type Item = P::Item;

    fn drive<C: Consumer<Self::Item>>(self, consumer: C) -> C::Result {
        bridge(self.producer, consumer, self.min_len)
    }
}

/// [`Par::enumerate`]'s source.
#[derive(Debug)]
pub struct EnumerateProducer<P> {
    base: P,
    offset: usize,
}

impl<P: Producer> Producer for EnumerateProducer<P> {
    type Item = (usize, P::Item);
    type IntoIter = std::iter::Zip<std::ops::RangeFrom<usize>, P::IntoIter>;
    fn len(&self) -> usize {
        self.base.len()
    }
    fn split_at(self, index: usize) -> (Self, Self) {
        let (l, r) = self.base.split_at(index);
        (
            EnumerateProducer {
                base: l,
                offset: self.offset,
            },
            EnumerateProducer {
                base: r,
                offset: self.offset + index,
            },
        )
    }
    fn into_iter(self) -> Self::IntoIter {
        (self.offset..).zip(self.base.into_iter())
    }
}

/// [`Par::zip`]'s source (both sides cut to the same length).
#[derive(Debug)]
pub struct ZipProducer<A, B> {
    a: A,
    b: B,
}

impl<A: Producer, B: Producer> Producer for ZipProducer<A, B> {
    type Item = (A::Item, B::Item);
    type IntoIter = std::iter::Zip<A::IntoIter, B::IntoIter>;
    fn len(&self) -> usize {
        self.a.len().min(self.b.len())
    }
    fn split_at(self, index: usize) -> (Self, Self) {
        let (al, ar) = self.a.split_at(index);
        let (bl, br) = self.b.split_at(index);
        (ZipProducer { a: al, b: bl }, ZipProducer { a: ar, b: br })
    }
    fn into_iter(self) -> Self::IntoIter {
        self.a.into_iter().zip(self.b.into_iter())
    }
}

// ---- Ranges.

/// The items of an integer range.
#[derive(Debug)]
pub struct RangeProducer<T> {
    range: Range<T>,
}

macro_rules! ranges {
    ($($t:ty),*) => {$(
        impl Producer for RangeProducer<$t> {
            type Item = $t;
            type IntoIter = Range<$t>;
            fn len(&self) -> usize {
                if self.range.start >= self.range.end {
                    0
                } else {
                    // Wider than the type: a range of i64 may span more than i64::MAX.
                    (self.range.end as i128 - self.range.start as i128).min(usize::MAX as i128)
                        as usize
                }
            }
            fn split_at(self, index: usize) -> (Self, Self) {
                let mid = (self.range.start as i128 + index as i128) as $t;
                (
                    RangeProducer { range: self.range.start..mid },
                    RangeProducer { range: mid..self.range.end },
                )
            }
            fn into_iter(self) -> Range<$t> {
                self.range
            }
        }

        impl IntoParallelIterator for Range<$t> {
            type Iter = Par<RangeProducer<$t>>;
            type Item = $t;
            fn into_par_iter(self) -> Self::Iter {
                Par::new(RangeProducer { range: self })
            }
        }
    )*};
}

ranges!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

/// The items of an inclusive integer range (`None`: empty).
#[derive(Debug)]
pub struct RangeInclusiveProducer<T> {
    bounds: Option<(T, T)>,
}

macro_rules! inclusive_ranges {
    ($($t:ty),*) => {$(
        impl Producer for RangeInclusiveProducer<$t> {
            type Item = $t;
            type IntoIter = std::iter::Flatten<std::option::IntoIter<std::ops::RangeInclusive<$t>>>;
            fn len(&self) -> usize {
                match self.bounds {
                    None => 0,
                    Some((a, b)) => (b as i128 - a as i128 + 1).min(usize::MAX as i128) as usize,
                }
            }
            fn split_at(self, index: usize) -> (Self, Self) {
                match self.bounds {
                    Some((a, b)) if index > 0 => {
                        let mid = (a as i128 + index as i128) as $t;
                        let right = (index < self.len()).then(|| (mid, b));
                        (
                            RangeInclusiveProducer { bounds: Some((a, (mid as i128 - 1) as $t)) },
                            RangeInclusiveProducer { bounds: right },
                        )
                    }
                    bounds => (RangeInclusiveProducer { bounds: None }, RangeInclusiveProducer { bounds }),
                }
            }
            fn into_iter(self) -> Self::IntoIter {
                self.bounds.map(|(a, b)| a..=b).into_iter().flatten()
            }
        }

        impl IntoParallelIterator for std::ops::RangeInclusive<$t> {
            type Iter = Par<RangeInclusiveProducer<$t>>;
            type Item = $t;
            fn into_par_iter(self) -> Self::Iter {
                let bounds = (!self.is_empty()).then(|| (*self.start(), *self.end()));
                Par::new(RangeInclusiveProducer { bounds })
            }
        }
    )*};
}

inclusive_ranges!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

// ---- Slices by reference.

/// A slice's items by reference.
#[derive(Debug)]
pub struct SliceProducer<'a, T> {
    slice: &'a [T],
}

impl<'a, T: Sync> Producer for SliceProducer<'a, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn len(&self) -> usize {
        self.slice.len()
    }
    fn split_at(self, index: usize) -> (Self, Self) {
        let (l, r) = self.slice.split_at(index);
        (SliceProducer { slice: l }, SliceProducer { slice: r })
    }
    fn into_iter(self) -> Self::IntoIter {
        self.slice.iter()
    }
}

/// `par_iter()` over a slice or a `Vec`.
pub type Iter<'a, T> = Par<SliceProducer<'a, T>>;

impl<'a, T: Sync + 'a> IntoParallelIterator for &'a [T] {
    type Iter = Iter<'a, T>;
    type Item = &'a T;
    fn into_par_iter(self) -> Self::Iter {
        Par::new(SliceProducer { slice: self })
    }
}

impl<'a, T: Sync + 'a> IntoParallelIterator for &'a Vec<T> {
    type Iter = Iter<'a, T>;
    type Item = &'a T;
    fn into_par_iter(self) -> Self::Iter {
        self.as_slice().into_par_iter()
    }
}

/// A slice's items by mutable reference.
#[derive(Debug)]
pub struct SliceMutProducer<'a, T> {
    slice: &'a mut [T],
}

impl<'a, T: Send> Producer for SliceMutProducer<'a, T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn len(&self) -> usize {
        self.slice.len()
    }
    fn split_at(self, index: usize) -> (Self, Self) {
        let (l, r) = self.slice.split_at_mut(index);
        (SliceMutProducer { slice: l }, SliceMutProducer { slice: r })
    }
    fn into_iter(self) -> Self::IntoIter {
        self.slice.iter_mut()
    }
}

/// `par_iter_mut()` over a slice or a `Vec`.
pub type IterMut<'a, T> = Par<SliceMutProducer<'a, T>>;

impl<'a, T: Send + 'a> IntoParallelIterator for &'a mut [T] {
    type Iter = IterMut<'a, T>;
    type Item = &'a mut T;
    fn into_par_iter(self) -> Self::Iter {
        Par::new(SliceMutProducer { slice: self })
    }
}

impl<'a, T: Send + 'a> IntoParallelIterator for &'a mut Vec<T> {
    type Iter = IterMut<'a, T>;
    type Item = &'a mut T;
    fn into_par_iter(self) -> Self::Iter {
        self.as_mut_slice().into_par_iter()
    }
}

// ---- Vec by value.

/// A `Vec`'s items by value (`into_par_iter()`).
#[derive(Debug)]
pub struct VecIntoIter<T> {
    vec: Vec<T>,
}

impl<T: Send> IntoParallelIterator for Vec<T> {
    type Iter = VecIntoIter<T>;
    type Item = T;
    fn into_par_iter(self) -> Self::Iter {
        VecIntoIter { vec: self }
    }
}

impl<T: Send> ParallelIterator for VecIntoIter<T> {
    type Item = T;

    fn drive<C: Consumer<T>>(self, consumer: C) -> C::Result {
        let mut vec = self.vec;
        let len = vec.len();
        // The items now belong to the producer, which moves each out once or drops it; the
        // `Vec` keeps only its buffer (freed below). A panic may leak items, never drop one
        // twice.
        // SAFETY: `len` initialised items, none read before.
        unsafe { vec.set_len(0) };
        // SAFETY: the buffer holds `len` initialised items that nothing else reads now.
        let slice = unsafe { std::slice::from_raw_parts_mut(vec.as_mut_ptr(), len) };
        let r = bridge(DrainProducer { slice }, consumer, 1);
        drop(vec);
        r
    }
}

/// Items moved out of a slice they own.
struct DrainProducer<'a, T> {
    slice: &'a mut [T],
}

impl<'a, T: Send> Producer for DrainProducer<'a, T> {
    type Item = T;
    type IntoIter = Drain<'a, T>;
    fn len(&self) -> usize {
        self.slice.len()
    }
    fn split_at(mut self, index: usize) -> (Self, Self) {
        let slice = std::mem::take(&mut self.slice);
        let (l, r) = slice.split_at_mut(index);
        (DrainProducer { slice: l }, DrainProducer { slice: r })
    }
    fn into_iter(mut self) -> Drain<'a, T> {
        Drain {
            iter: std::mem::take(&mut self.slice).iter_mut(),
        }
    }
}

impl<T> Drop for DrainProducer<'_, T> {
    fn drop(&mut self) {
        // Never consumed: its items are dropped here, once.
        // SAFETY: the items are owned by this producer and not read again.
        unsafe { std::ptr::drop_in_place(std::ptr::from_mut(std::mem::take(&mut self.slice))) };
    }
}

/// The items of a [`DrainProducer`] piece, moved out one by one.
struct Drain<'a, T> {
    iter: std::slice::IterMut<'a, T>,
}

impl<T> Iterator for Drain<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        // SAFETY: each item is read once (the iterator moves past it) and owned by this drain.
        self.iter.next().map(|x| unsafe { std::ptr::read(x) })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

impl<T> Drop for Drain<'_, T> {
    fn drop(&mut self) {
        // The items not taken (a consumer that stopped early) are dropped here, once.
        let rest = std::mem::take(&mut self.iter).into_slice();
        // SAFETY: owned by this drain, not read.
        unsafe { std::ptr::drop_in_place(rest) };
    }
}

// ---- Chunks.

/// Rayon's `ParallelSlice`: chunks of a shared slice.
pub trait ParallelSlice<T: Sync> {
    /// The slice's chunks of `size` items (the last may be shorter), in parallel.
    ///
    /// # Panics
    /// If `size` is 0.
    fn par_chunks(&self, size: usize) -> Chunks<'_, T>;
}

impl<T: Sync> ParallelSlice<T> for [T] {
    fn par_chunks(&self, size: usize) -> Chunks<'_, T> {
        assert!(size != 0, "par_chunks: the chunk size is 0");
        Par::new(ChunksProducer { slice: self, size })
    }
}

/// Rayon's `ParallelSliceMut`: chunks of a mutable slice.
pub trait ParallelSliceMut<T: Send> {
    /// The slice's chunks of `size` items (the last may be shorter), in parallel.
    ///
    /// # Panics
    /// If `size` is 0.
    fn par_chunks_mut(&mut self, size: usize) -> ChunksMut<'_, T>;
}

impl<T: Send> ParallelSliceMut<T> for [T] {
    fn par_chunks_mut(&mut self, size: usize) -> ChunksMut<'_, T> {
        assert!(size != 0, "par_chunks_mut: the chunk size is 0");
        Par::new(ChunksMutProducer { slice: self, size })
    }
}

/// Chunks of a shared slice.
#[derive(Debug)]
pub struct ChunksProducer<'a, T> {
    slice: &'a [T],
    size: usize,
}

/// `par_chunks()`.
pub type Chunks<'a, T> = Par<ChunksProducer<'a, T>>;

impl<'a, T: Sync> Producer for ChunksProducer<'a, T> {
    type Item = &'a [T];
    type IntoIter = std::slice::Chunks<'a, T>;
    fn len(&self) -> usize {
        self.slice.len().div_ceil(self.size)
    }
    fn split_at(self, index: usize) -> (Self, Self) {
        let at = (index * self.size).min(self.slice.len());
        let (l, r) = self.slice.split_at(at);
        (
            ChunksProducer {
                slice: l,
                size: self.size,
            },
            ChunksProducer {
                slice: r,
                size: self.size,
            },
        )
    }
    fn into_iter(self) -> Self::IntoIter {
        self.slice.chunks(self.size)
    }
}

/// Chunks of a mutable slice.
#[derive(Debug)]
pub struct ChunksMutProducer<'a, T> {
    slice: &'a mut [T],
    size: usize,
}

/// `par_chunks_mut()`.
pub type ChunksMut<'a, T> = Par<ChunksMutProducer<'a, T>>;

impl<'a, T: Send> Producer for ChunksMutProducer<'a, T> {
    type Item = &'a mut [T];
    type IntoIter = std::slice::ChunksMut<'a, T>;
    fn len(&self) -> usize {
        self.slice.len().div_ceil(self.size)
    }
    fn split_at(self, index: usize) -> (Self, Self) {
        let at = (index * self.size).min(self.slice.len());
        let (l, r) = self.slice.split_at_mut(at);
        (
            ChunksMutProducer {
                slice: l,
                size: self.size,
            },
            ChunksMutProducer {
                slice: r,
                size: self.size,
            },
        )
    }
    fn into_iter(self) -> Self::IntoIter {
        self.slice.chunks_mut(self.size)
    }
}

// ---- SplittableData.

/// A parallel iterator over a [`SplittableData`]'s partitions: `(info, data)` per partition,
/// each partition's piece run by a task spawned at its home (its NUMA node or core group).
#[derive(Debug)]
pub struct Partitions<'a, T> {
    data: &'a SplittableData<T>,
}

/// `par_partitions()` on a [`SplittableData`].
pub trait ParallelPartitions<T: Send + Sync> {
    /// Its partitions in parallel, each partition's work homed where its data is. With
    /// `flat_map`, the work on each partition's items is split further on its node:
    /// `data.par_partitions().flat_map(|(_, v)| v.par_iter())`, which is what `par_iter()` on a
    /// `SplittableData<Vec<T>>` is.
    fn par_partitions(&self) -> Partitions<'_, T>;
}

impl<T: Send + Sync> ParallelPartitions<T> for SplittableData<T> {
    fn par_partitions(&self) -> Partitions<'_, T> {
        Partitions { data: self }
    }
}

impl<'a, T: Send + Sync> ParallelIterator for Partitions<'a, T> {
    type Item = (&'a PartInfo, &'a T);

    fn drive<C: Consumer<Self::Item>>(self, consumer: C) -> C::Result {
        let parts = self.data.partitions();
        if parts.is_empty() {
            return consumer.consume_iter(std::iter::empty());
        }
        // One consumer per partition, in order, and the reducers between them.
        let mut consumers = Vec::with_capacity(parts.len());
        let mut reducers = Vec::with_capacity(parts.len());
        let mut rest = consumer;
        for _ in 1..parts.len() {
            let (l, r, red) = rest.split();
            consumers.push(l);
            reducers.push(red);
            rest = r;
        }
        consumers.push(rest);
        let mut results: Vec<Option<C::Result>> = (0..parts.len()).map(|_| None).collect();
        nearflow_rt::scope(|s| {
            for ((p, c), slot) in parts.iter().zip(consumers).zip(results.iter_mut()) {
                s.spawn_at(p.info.home, move |_| {
                    *slot = Some(c.consume_iter(std::iter::once((&p.info, &p.data))));
                });
            }
        });
        // Combined right to left: reducer i joins partition i with everything after it.
        let mut results = results
            .into_iter()
            .map(|r| r.expect("the scope ran every partition"));
        let last = results.next_back().expect("at least one partition");
        let firsts: Vec<C::Result> = results.collect();
        firsts
            .into_iter()
            .zip(reducers)
            .rev()
            .fold(last, |acc, (r, red)| red.reduce(r, acc))
    }
}

type PartSlice<'a, T> = fn((&'a PartInfo, &'a Vec<T>)) -> &'a [T];

/// `par_iter()` over a `SplittableData<Vec<T>>`: every item, each partition's homed on its
/// node.
impl<'a, T: Send + Sync + 'a> IntoParallelIterator for &'a SplittableData<Vec<T>> {
    type Iter = crate::FlatMap<Partitions<'a, Vec<T>>, PartSlice<'a, T>>;
    type Item = &'a T;
    fn into_par_iter(self) -> Self::Iter {
        fn slice<'a, T>((_, v): (&'a PartInfo, &'a Vec<T>)) -> &'a [T] {
            v
        }
        self.par_partitions().flat_map(slice as PartSlice<'a, T>)
    }
}

#[cfg(test)]
mod tests {
    //! The owned `Vec` drain's unsafe code on one thread (also under Miri, `scripts/miri.sh`):
    //! every item moved out or dropped exactly once, whatever is consumed.
    use super::*;
    use std::sync::Arc as Rc; // counted like `Rc`, and `Send` as the drain's items must be

    fn items(n: usize, alive: &Rc<()>) -> Vec<Rc<()>> {
        (0..n).map(|_| alive.clone()).collect()
    }

    #[test]
    fn drained_items_are_moved_or_dropped_once() {
        let alive = Rc::new(());
        let mut v = items(10, &alive);
        let len = v.len();
        // SAFETY: as `VecIntoIter::drive` does.
        unsafe { v.set_len(0) };
        let slice = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr(), len) };
        let p = DrainProducer { slice };
        let (l, r) = p.split_at(4);
        let (rl, rr) = r.split_at(3);
        // Moved out whole, partly (the rest dropped with the drain), and not at all.
        let taken: Vec<Rc<()>> = l.into_iter().collect();
        assert_eq!(taken.len(), 4);
        let mut it = rl.into_iter();
        let one = it.next();
        drop(it);
        drop(rr);
        assert_eq!(Rc::strong_count(&alive), 1 + 4 + 1);
        drop((taken, one));
        drop(v);
        assert_eq!(Rc::strong_count(&alive), 1);
    }
}
