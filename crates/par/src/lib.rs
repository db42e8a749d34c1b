//! # nearflow-par — parallel iterators on the nearflow runtime
//!
//! Rayon's parallel iterators, by rayon's names and contracts, on the nearflow scheduler
//! ([`nearflow_rt::join`]): porting code from rayon is a change of `use` lines.
//!
//! ```
//! use nearflow_par::prelude::*;
//!
//! let v: Vec<u64> = (0..100_000).collect();
//! let sum_of_squares: u64 = v.par_iter().map(|x| x * x).sum();
//! assert_eq!(sum_of_squares, v.iter().map(|x| x * x).sum::<u64>());
//!
//! let evens: Vec<u64> = (0..20u64).into_par_iter().filter(|x| x % 2 == 0).collect();
//! assert_eq!(evens, [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]); // order kept
//!
//! let mut w = vec![1u32; 1000];
//! w.par_iter_mut().for_each(|x| *x *= 3);
//! w.par_chunks_mut(100).for_each(|c| c.iter_mut().for_each(|x| *x += 1));
//! assert!(w.iter().all(|&x| x == 4));
//! ```
//!
//! ## What there is
//!
//! - **Sources**: integer ranges (`(0..n).into_par_iter()`), slices and `Vec`s by reference
//!   (`par_iter`, `par_iter_mut`) and by value (`into_par_iter`), slices in chunks
//!   (`par_chunks`, `par_chunks_mut`), and a [`SplittableData`]'s partitions
//!   ([`ParallelPartitions::par_partitions`]; `par_iter` over a `SplittableData<Vec<T>>`).
//! - **Adaptors**: `map`, `filter`, `filter_map`, `flat_map` (inner parallel), `flat_map_iter`
//!   (inner sequential), `fold`, `copied`, `cloned`; on sources (whose positions are known:
//!   rayon's indexed iterators) also `enumerate`, `zip` and `with_min_len`.
//! - **Terminal operations**: `for_each`, `reduce`, `reduce_with`, `fold` then `reduce`/`sum`,
//!   `sum`, `product`, `count`, `min`/`max` (and `_by`, `_by_key`), `any`, `all`,
//!   `find_any`, `collect` into a `Vec` (in order).
//!
//! ## How work is split
//!
//! As in rayon: a source is cut in halves with [`join`](nearflow_rt::join) while a splitter
//! allows, starting from as many pieces as the runtime has workers, and splitting again
//! whenever a half was stolen (it ran on another worker than the one that made it), so that
//! work is cut finer exactly where workers are idle; `with_min_len` bounds the pieces from
//! below. Under LAS the second half of each split is an immediate task on the worker's own
//! queue, so a piece runs where its neighbour's data is hot unless another worker is idle.
//!
//! Over a [`SplittableData`] the first cut is by partition: each partition's work is a task
//! spawned at the partition's home ([`nearflow_rt::Scope::spawn_at`]), queued where the policy
//! puts work for its NUMA node, and split further there; results are combined in partition
//! order.
//!
//! Outside any runtime, the work runs in [`nearflow_rt::global`]; inside
//! [`Runtime::install`](nearflow_rt::Runtime::install) or a task, on that runtime.
//!
//! ## Files
//!
//! - `lib.rs` — this overview, the traits ([`ParallelIterator`], [`IntoParallelIterator`],
//!   the consumer/producer plumbing) and the splitting bridge.
//! - `sources.rs` — ranges, slices, `Vec`, chunks, `SplittableData` partitions.
//! - `adaptors.rs` — map, filter, flat_map, fold and the rest.
//! - `terminal.rs` — the consumers behind for_each, reduce, sum, collect, any, find.

mod adaptors;
mod sources;
mod terminal;

pub use adaptors::{Filter, FilterMap, FlatMap, FlatMapIter, Fold, Map};
pub use nearflow_split::SplittableData;
pub use sources::{
    Chunks, ChunksMut, EnumerateProducer, Iter, IterMut, Par, ParallelPartitions, ParallelSlice,
    ParallelSliceMut, Partitions, VecIntoIter, ZipProducer,
};

/// Everything a user of the parallel iterators imports (rayon's `prelude`).
pub mod prelude {
    pub use crate::{
        FromParallelIterator, IntoParallelIterator, IntoParallelRefIterator,
        IntoParallelRefMutIterator, ParallelIterator, ParallelPartitions, ParallelSlice,
        ParallelSliceMut,
    };
}

/// Receives the items of (part of) a parallel iterator and makes a result of them: what a
/// terminal operation or an adaptor does to each piece of the split.
pub trait Consumer<T>: Send + Sized {
    /// What it makes of its items.
    type Result: Send;
    /// Combines the results of the two halves of a split.
    type Reducer: Reducer<Self::Result>;
    /// Two consumers for the two halves of a split, and how their results combine.
    fn split(self) -> (Self, Self, Self::Reducer);
    /// Consumes a piece's items, in order.
    fn consume_iter<I: Iterator<Item = T>>(self, iter: I) -> Self::Result;
    /// Whether the result is already decided (`any`, `find_any`): the rest is skipped.
    fn full(&self) -> bool {
        false
    }
}

/// Combines the results of the left and the right half of a split. The reducers one consumer
/// type makes must all combine alike (associatively, left before right): `flat_map` joins
/// its items' pieces with whichever of them it holds.
pub trait Reducer<R>: Send {
    /// The combination, left before right.
    fn reduce(self, left: R, right: R) -> R;
}

/// A source that can be cut at any position: ranges, slices, `Vec`s, chunks.
pub trait Producer: Send + Sized {
    /// Its items.
    type Item;
    /// A piece's items, in order.
    type IntoIter: Iterator<Item = Self::Item>;
    /// Its number of items.
    fn len(&self) -> usize;
    /// Whether it has no item.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The items before `index` and the items from it.
    fn split_at(self, index: usize) -> (Self, Self);
    /// Its items, sequentially.
    fn into_iter(self) -> Self::IntoIter;
}

/// A parallel iterator (rayon's `ParallelIterator`): adaptors that build a pipeline, and
/// terminal operations that run it on the runtime.
pub trait ParallelIterator: Sized + Send {
    /// The items.
    type Item: Send;

    /// Runs the iterator, feeding its items to `consumer` piece by piece (the plumbing under
    /// every terminal operation).
    fn drive<C: Consumer<Self::Item>>(self, consumer: C) -> C::Result;

    /// Applies `f` to each item.
    fn map<F, R>(self, f: F) -> Map<Self, F>
    where
        F: Fn(Self::Item) -> R + Sync + Send,
        R: Send,
    {
        Map::new(self, f)
    }

    /// Keeps the items for which `p` holds.
    fn filter<P>(self, p: P) -> Filter<Self, P>
    where
        P: Fn(&Self::Item) -> bool + Sync + Send,
    {
        Filter::new(self, p)
    }

    /// Applies `f` to each item and keeps the `Some` values.
    fn filter_map<F, R>(self, f: F) -> FilterMap<Self, F>
    where
        F: Fn(Self::Item) -> Option<R> + Sync + Send,
        R: Send,
    {
        FilterMap::new(self, f)
    }

    /// Applies `f` to each item and flattens the parallel iterators it returns (each is run in
    /// parallel too).
    fn flat_map<F, PI>(self, f: F) -> FlatMap<Self, F>
    where
        F: Fn(Self::Item) -> PI + Sync + Send,
        PI: IntoParallelIterator,
    {
        FlatMap::new(self, f)
    }

    /// Applies `f` to each item and flattens the sequential iterators it returns.
    fn flat_map_iter<F, I>(self, f: F) -> FlatMapIter<Self, F>
    where
        F: Fn(Self::Item) -> I + Sync + Send,
        I: IntoIterator,
        I::Item: Send,
    {
        FlatMapIter::new(self, f)
    }

    /// Folds each piece's items into an accumulator that starts at `identity()`: a parallel
    /// iterator of the accumulators (one per piece; reduce or sum them next).
    fn fold<T, ID, F>(self, identity: ID, fold_op: F) -> Fold<Self, ID, F>
    where
        ID: Fn() -> T + Sync + Send,
        F: Fn(T, Self::Item) -> T + Sync + Send,
        T: Send,
    {
        Fold::new(self, identity, fold_op)
    }

    /// Copies referenced items.
    fn copied<'a, T>(self) -> Map<Self, fn(&'a T) -> T>
    where
        Self: ParallelIterator<Item = &'a T>,
        T: 'a + Copy + Send + Sync,
    {
        fn copy<T: Copy>(x: &T) -> T {
            *x
        }
        self.map(copy as fn(&'a T) -> T)
    }

    /// Clones referenced items.
    fn cloned<'a, T>(self) -> Map<Self, fn(&'a T) -> T>
    where
        Self: ParallelIterator<Item = &'a T>,
        T: 'a + Clone + Send + Sync,
    {
        self.map(T::clone as fn(&'a T) -> T)
    }

    /// Calls `op` on each item.
    fn for_each<OP>(self, op: OP)
    where
        OP: Fn(Self::Item) + Sync + Send,
    {
        self.drive(terminal::ForEach { op: &op })
    }

    /// Reduces the items with `op`, an associative operation whose identity is `identity()`.
    fn reduce<ID, OP>(self, identity: ID, op: OP) -> Self::Item
    where
        ID: Fn() -> Self::Item + Sync + Send,
        OP: Fn(Self::Item, Self::Item) -> Self::Item + Sync + Send,
    {
        self.drive(terminal::Reduce {
            identity: &identity,
            op: &op,
        })
    }

    /// Reduces the items with `op`, an associative operation; `None` without items.
    fn reduce_with<OP>(self, op: OP) -> Option<Self::Item>
    where
        OP: Fn(Self::Item, Self::Item) -> Self::Item + Sync + Send,
    {
        self.drive(terminal::ReduceWith { op: &op })
    }

    /// The sum of the items.
    fn sum<S>(self) -> S
    where
        S: Send + std::iter::Sum<Self::Item> + std::iter::Sum<S>,
    {
        self.drive(terminal::Sum::new())
    }

    /// The product of the items.
    fn product<P>(self) -> P
    where
        P: Send + std::iter::Product<Self::Item> + std::iter::Product<P>,
    {
        self.drive(terminal::Product::new())
    }

    /// The number of items.
    fn count(self) -> usize {
        fn one<T>(_: T) -> usize {
            1
        }
        self.map(one as fn(Self::Item) -> usize).sum()
    }

    /// The least item (the first of equals, as `Iterator::min`); `None` without items.
    fn min(self) -> Option<Self::Item>
    where
        Self::Item: Ord,
    {
        self.reduce_with(|a, b| if b < a { b } else { a })
    }

    /// The greatest item (the last of equals, as `Iterator::max`); `None` without items.
    fn max(self) -> Option<Self::Item>
    where
        Self::Item: Ord,
    {
        self.reduce_with(|a, b| if b >= a { b } else { a })
    }

    /// The least item by `cmp` (the first of equals).
    fn min_by<F>(self, cmp: F) -> Option<Self::Item>
    where
        F: Fn(&Self::Item, &Self::Item) -> std::cmp::Ordering + Sync + Send,
    {
        self.reduce_with(|a, b| if cmp(&b, &a).is_lt() { b } else { a })
    }

    /// The greatest item by `cmp` (the last of equals).
    fn max_by<F>(self, cmp: F) -> Option<Self::Item>
    where
        F: Fn(&Self::Item, &Self::Item) -> std::cmp::Ordering + Sync + Send,
    {
        self.reduce_with(|a, b| if cmp(&b, &a).is_ge() { b } else { a })
    }

    /// The item whose key is least (the first of equals).
    fn min_by_key<K, F>(self, key: F) -> Option<Self::Item>
    where
        K: Ord,
        F: Fn(&Self::Item) -> K + Sync + Send,
    {
        self.min_by(|a, b| key(a).cmp(&key(b)))
    }

    /// The item whose key is greatest (the last of equals).
    fn max_by_key<K, F>(self, key: F) -> Option<Self::Item>
    where
        K: Ord,
        F: Fn(&Self::Item) -> K + Sync + Send,
    {
        self.max_by(|a, b| key(a).cmp(&key(b)))
    }

    /// Whether `p` holds for some item; stops looking once one is found.
    fn any<P>(self, p: P) -> bool
    where
        P: Fn(Self::Item) -> bool + Sync + Send,
    {
        let found = std::sync::atomic::AtomicBool::new(false);
        self.drive(terminal::Any {
            p: &p,
            found: &found,
        });
        found.into_inner()
    }

    /// Whether `p` holds for every item; stops looking once one fails.
    fn all<P>(self, p: P) -> bool
    where
        P: Fn(Self::Item) -> bool + Sync + Send,
    {
        !self.any(|x| !p(x))
    }

    /// Some item for which `p` holds, if any (not necessarily the first); stops looking once
    /// one is found.
    fn find_any<P>(self, p: P) -> Option<Self::Item>
    where
        P: Fn(&Self::Item) -> bool + Sync + Send,
    {
        let found = std::sync::atomic::AtomicBool::new(false);
        self.drive(terminal::Find {
            p: &p,
            found: &found,
        })
    }

    /// Collects the items, in order.
    fn collect<C>(self) -> C
    where
        C: FromParallelIterator<Self::Item>,
    {
        C::from_par_iter(self)
    }
}

/// A collection a parallel iterator collects into.
pub trait FromParallelIterator<T: Send>: Sized {
    /// The collection of `iter`'s items.
    fn from_par_iter<I: IntoParallelIterator<Item = T>>(iter: I) -> Self;
}

impl<T: Send> FromParallelIterator<T> for Vec<T> {
    fn from_par_iter<I: IntoParallelIterator<Item = T>>(iter: I) -> Self {
        let pieces = iter.into_par_iter().drive(terminal::Collect::new());
        let mut out = Vec::with_capacity(pieces.iter().map(Vec::len).sum());
        for mut p in pieces {
            out.append(&mut p);
        }
        out
    }
}

/// What can become a parallel iterator (rayon's `IntoParallelIterator`).
pub trait IntoParallelIterator {
    /// The parallel iterator.
    type Iter: ParallelIterator<Item = Self::Item>;
    /// Its items.
    type Item: Send;
    /// The parallel iterator over it.
    fn into_par_iter(self) -> Self::Iter;
}

impl<T: ParallelIterator> IntoParallelIterator for T {
    type Iter = T;
    type Item = T::Item;
    fn into_par_iter(self) -> T {
        self
    }
}

/// `par_iter()` on whatever a shared reference of it iterates (rayon's
/// `IntoParallelRefIterator`): slices, `Vec`s, `SplittableData<Vec<T>>`.
pub trait IntoParallelRefIterator<'data> {
    /// The parallel iterator.
    type Iter: ParallelIterator<Item = Self::Item>;
    /// Its items (references).
    type Item: Send + 'data;
    /// A parallel iterator over its items by reference.
    fn par_iter(&'data self) -> Self::Iter;
}

impl<'data, I: 'data + ?Sized> IntoParallelRefIterator<'data> for I
where
    &'data I: IntoParallelIterator,
{
    type Iter = <&'data I as IntoParallelIterator>::Iter;
    type Item = <&'data I as IntoParallelIterator>::Item;
    fn par_iter(&'data self) -> Self::Iter {
        self.into_par_iter()
    }
}

/// `par_iter_mut()` on whatever a mutable reference of it iterates (rayon's
/// `IntoParallelRefMutIterator`).
pub trait IntoParallelRefMutIterator<'data> {
    /// The parallel iterator.
    type Iter: ParallelIterator<Item = Self::Item>;
    /// Its items (mutable references).
    type Item: Send + 'data;
    /// A parallel iterator over its items by mutable reference.
    fn par_iter_mut(&'data mut self) -> Self::Iter;
}

impl<'data, I: 'data + ?Sized> IntoParallelRefMutIterator<'data> for I
where
    &'data mut I: IntoParallelIterator,
{
    type Iter = <&'data mut I as IntoParallelIterator>::Iter;
    type Item = <&'data mut I as IntoParallelIterator>::Item;
    fn par_iter_mut(&'data mut self) -> Self::Iter {
        self.into_par_iter()
    }
}

/// Rayon's adaptive splitter: as many pieces as workers at first, more where a piece was
/// stolen (see the module docs).
#[derive(Clone, Copy)]
struct Splitter {
    splits: usize,
    min: usize,
}

impl Splitter {
    fn new(min: usize) -> Self {
        Splitter {
            splits: nearflow_rt::current_num_threads(),
            min: min.max(1),
        }
    }

    fn try_split(&mut self, len: usize, stolen: bool) -> bool {
        if len / 2 < self.min {
            return false;
        }
        if stolen {
            self.splits = nearflow_rt::current_num_threads().max(self.splits / 2);
            true
        } else if self.splits > 0 {
            self.splits /= 2;
            true
        } else {
            false
        }
    }
}

/// Runs `producer`'s items through `consumer`, cutting both in halves with `join` while the
/// splitter allows.
fn bridge<P, C>(producer: P, consumer: C, min_len: usize) -> C::Result
where
    P: Producer,
    C: Consumer<P::Item>,
{
    let len = producer.len();
    bridge_piece(len, false, Splitter::new(min_len), producer, consumer)
}

fn bridge_piece<P, C>(
    len: usize,
    stolen: bool,
    mut splitter: Splitter,
    producer: P,
    consumer: C,
) -> C::Result
where
    P: Producer,
    C: Consumer<P::Item>,
{
    if consumer.full() {
        return consumer.consume_iter(std::iter::empty());
    }
    if !splitter.try_split(len, stolen) {
        return consumer.consume_iter(producer.into_iter());
    }
    let mid = len / 2;
    let (lp, rp) = producer.split_at(mid);
    let (lc, rc, reducer) = consumer.split();
    let maker = nearflow_rt::current_thread_index();
    let (l, r) = nearflow_rt::join(
        || bridge_piece(mid, false, splitter, lp, lc),
        || {
            let stolen = nearflow_rt::current_thread_index() != maker;
            bridge_piece(len - mid, stolen, splitter, rp, rc)
        },
    );
    reducer.reduce(l, r)
}
