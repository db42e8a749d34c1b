//! The adaptors: each wraps the consumer it is driven with, so that the source's split reaches
//! the terminal operation through every stage (rayon's design).

use crate::{Consumer, IntoParallelIterator, ParallelIterator, Reducer};

/// `map`.
#[derive(Debug)]
pub struct Map<I, F> {
    base: I,
    f: F,
}

impl<I, F> Map<I, F> {
    pub(crate) fn new(base: I, f: F) -> Self {
        Map { base, f }
    }
}

impl<I, F, R> ParallelIterator for Map<I, F>
where
    I: ParallelIterator,
    F: Fn(I::Item) -> R + Sync + Send,
    R: Send,
{
    type Item = R;

    fn drive<C: Consumer<R>>(self, consumer: C) -> C::Result {
        self.base.drive(MapConsumer {
            base: consumer,
            f: &self.f,
        })
    }
}

struct MapConsumer<'f, C, F> {
    base: C,
    f: &'f F,
}

impl<'f, T, R, C, F> Consumer<T> for MapConsumer<'f, C, F>
where
    C: Consumer<R>,
    F: Fn(T) -> R + Sync,
{
    type Result = C::Result;
    type Reducer = C::Reducer;
    fn split(self) -> (Self, Self, C::Reducer) {
        let (l, r, red) = self.base.split();
        (
            MapConsumer { base: l, f: self.f },
            MapConsumer { base: r, f: self.f },
            red,
        )
    }
    fn consume_iter<It: Iterator<Item = T>>(self, iter: It) -> C::Result {
        self.base.consume_iter(iter.map(self.f))
    }
    fn full(&self) -> bool {
        self.base.full()
    }
}

/// `filter`.
#[derive(Debug)]
pub struct Filter<I, P> {
    base: I,
    p: P,
}

impl<I, P> Filter<I, P> {
    pub(crate) fn new(base: I, p: P) -> Self {
        Filter { base, p }
    }
}

impl<I, P> ParallelIterator for Filter<I, P>
where
    I: ParallelIterator,
    P: Fn(&I::Item) -> bool + Sync + Send,
{
    type Item = I::Item;

    fn drive<C: Consumer<I::Item>>(self, consumer: C) -> C::Result {
        self.base.drive(FilterConsumer {
            base: consumer,
            p: &self.p,
        })
    }
}

struct FilterConsumer<'p, C, P> {
    base: C,
    p: &'p P,
}

impl<'p, T, C, P> Consumer<T> for FilterConsumer<'p, C, P>
where
    C: Consumer<T>,
    P: Fn(&T) -> bool + Sync,
{
    type Result = C::Result;
    type Reducer = C::Reducer;
    fn split(self) -> (Self, Self, C::Reducer) {
        let (l, r, red) = self.base.split();
        (
            FilterConsumer { base: l, p: self.p },
            FilterConsumer { base: r, p: self.p },
            red,
        )
    }
    fn consume_iter<It: Iterator<Item = T>>(self, iter: It) -> C::Result {
        let p = self.p;
        self.base.consume_iter(iter.filter(|x| p(x)))
    }
    fn full(&self) -> bool {
        self.base.full()
    }
}

/// `filter_map`.
#[derive(Debug)]
pub struct FilterMap<I, F> {
    base: I,
    f: F,
}

impl<I, F> FilterMap<I, F> {
    pub(crate) fn new(base: I, f: F) -> Self {
        FilterMap { base, f }
    }
}

impl<I, F, R> ParallelIterator for FilterMap<I, F>
where
    I: ParallelIterator,
    F: Fn(I::Item) -> Option<R> + Sync + Send,
    R: Send,
{
    type Item = R;

    fn drive<C: Consumer<R>>(self, consumer: C) -> C::Result {
        self.base.drive(FilterMapConsumer {
            base: consumer,
            f: &self.f,
        })
    }
}

struct FilterMapConsumer<'f, C, F> {
    base: C,
    f: &'f F,
}

impl<'f, T, R, C, F> Consumer<T> for FilterMapConsumer<'f, C, F>
where
    C: Consumer<R>,
    F: Fn(T) -> Option<R> + Sync,
{
    type Result = C::Result;
    type Reducer = C::Reducer;
    fn split(self) -> (Self, Self, C::Reducer) {
        let (l, r, red) = self.base.split();
        (
            FilterMapConsumer { base: l, f: self.f },
            FilterMapConsumer { base: r, f: self.f },
            red,
        )
    }
    fn consume_iter<It: Iterator<Item = T>>(self, iter: It) -> C::Result {
        self.base.consume_iter(iter.filter_map(self.f))
    }
    fn full(&self) -> bool {
        self.base.full()
    }
}

/// `flat_map_iter`: each item's sequential iterator, flattened.
#[derive(Debug)]
pub struct FlatMapIter<I, F> {
    base: I,
    f: F,
}

impl<I, F> FlatMapIter<I, F> {
    pub(crate) fn new(base: I, f: F) -> Self {
        FlatMapIter { base, f }
    }
}

impl<I, F, U> ParallelIterator for FlatMapIter<I, F>
where
    I: ParallelIterator,
    F: Fn(I::Item) -> U + Sync + Send,
    U: IntoIterator,
    U::Item: Send,
{
    type Item = U::Item;

    fn drive<C: Consumer<U::Item>>(self, consumer: C) -> C::Result {
        self.base.drive(FlatMapIterConsumer {
            base: consumer,
            f: &self.f,
        })
    }
}

struct FlatMapIterConsumer<'f, C, F> {
    base: C,
    f: &'f F,
}

impl<'f, T, U, C, F> Consumer<T> for FlatMapIterConsumer<'f, C, F>
where
    C: Consumer<U::Item>,
    F: Fn(T) -> U + Sync,
    U: IntoIterator,
{
    type Result = C::Result;
    type Reducer = C::Reducer;
    fn split(self) -> (Self, Self, C::Reducer) {
        let (l, r, red) = self.base.split();
        (
            FlatMapIterConsumer { base: l, f: self.f },
            FlatMapIterConsumer { base: r, f: self.f },
            red,
        )
    }
    fn consume_iter<It: Iterator<Item = T>>(self, iter: It) -> C::Result {
        self.base.consume_iter(iter.flat_map(self.f))
    }
    fn full(&self) -> bool {
        self.base.full()
    }
}

/// `flat_map`: each item's parallel iterator, run in parallel and flattened in order.
#[derive(Debug)]
pub struct FlatMap<I, F> {
    base: I,
    f: F,
}

impl<I, F> FlatMap<I, F> {
    pub(crate) fn new(base: I, f: F) -> Self {
        FlatMap { base, f }
    }
}

impl<I, F, PI> ParallelIterator for FlatMap<I, F>
where
    I: ParallelIterator,
    F: Fn(I::Item) -> PI + Sync + Send,
    PI: IntoParallelIterator,
{
    type Item = PI::Item;

    fn drive<C: Consumer<PI::Item>>(self, consumer: C) -> C::Result {
        self.base.drive(FlatMapConsumer {
            base: consumer,
            f: &self.f,
        })
    }
}

struct FlatMapConsumer<'f, C, F> {
    base: C,
    f: &'f F,
}

impl<'f, T, PI, C, F> Consumer<T> for FlatMapConsumer<'f, C, F>
where
    C: Consumer<PI::Item>,
    F: Fn(T) -> PI + Sync,
    PI: IntoParallelIterator,
{
    type Result = C::Result;
    type Reducer = C::Reducer;
    fn split(self) -> (Self, Self, C::Reducer) {
        let (l, r, red) = self.base.split();
        (
            FlatMapConsumer { base: l, f: self.f },
            FlatMapConsumer { base: r, f: self.f },
            red,
        )
    }
    fn consume_iter<It: Iterator<Item = T>>(self, iter: It) -> C::Result {
        // Each item's iterator is driven with a consumer split off the base, in order; the
        // results are combined left to right with the reducers of those splits (every
        // reducer here combines alike, so which split's reducer joins which pair is free).
        let mut base = self.base;
        let mut acc: Option<(C::Result, C::Reducer)> = None;
        for x in iter {
            if base.full() {
                break;
            }
            let (l, r, red) = base.split();
            base = r;
            let res = (self.f)(x).into_par_iter().drive(l);
            acc = Some(match acc.take() {
                None => (res, red),
                Some((a, prev)) => (prev.reduce(a, res), red),
            });
        }
        let tail = base.consume_iter(std::iter::empty());
        match acc {
            None => tail,
            Some((a, red)) => red.reduce(a, tail),
        }
    }
    fn full(&self) -> bool {
        self.base.full()
    }
}

/// `fold`: one accumulator per piece.
#[derive(Debug)]
pub struct Fold<I, ID, F> {
    base: I,
    identity: ID,
    fold_op: F,
}

impl<I, ID, F> Fold<I, ID, F> {
    pub(crate) fn new(base: I, identity: ID, fold_op: F) -> Self {
        Fold {
            base,
            identity,
            fold_op,
        }
    }
}

impl<I, ID, F, T> ParallelIterator for Fold<I, ID, F>
where
    I: ParallelIterator,
    ID: Fn() -> T + Sync + Send,
    F: Fn(T, I::Item) -> T + Sync + Send,
    T: Send,
{
    type Item = T;

    fn drive<C: Consumer<T>>(self, consumer: C) -> C::Result {
        self.base.drive(FoldConsumer {
            base: consumer,
            identity: &self.identity,
            fold_op: &self.fold_op,
        })
    }
}

struct FoldConsumer<'f, C, ID, F> {
    base: C,
    identity: &'f ID,
    fold_op: &'f F,
}

impl<'f, T, A, C, ID, F> Consumer<T> for FoldConsumer<'f, C, ID, F>
where
    C: Consumer<A>,
    ID: Fn() -> A + Sync,
    F: Fn(A, T) -> A + Sync,
{
    type Result = C::Result;
    type Reducer = C::Reducer;
    fn split(self) -> (Self, Self, C::Reducer) {
        let (l, r, red) = self.base.split();
        (
            FoldConsumer {
                base: l,
                identity: self.identity,
                fold_op: self.fold_op,
            },
            FoldConsumer {
                base: r,
                identity: self.identity,
                fold_op: self.fold_op,
            },
            red,
        )
    }
    fn consume_iter<It: Iterator<Item = T>>(self, iter: It) -> C::Result {
        let acc = iter.fold((self.identity)(), self.fold_op);
        self.base.consume_iter(std::iter::once(acc))
    }
    fn full(&self) -> bool {
        self.base.full()
    }
}
