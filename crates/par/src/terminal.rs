//! The consumers behind the terminal operations.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{Consumer, Reducer};

/// A reducer that combines with a plain function of the two results.
pub(crate) struct FnReducer<R>(fn(R, R) -> R);

impl<R> Reducer<R> for FnReducer<R> {
    fn reduce(self, left: R, right: R) -> R {
        (self.0)(left, right)
    }
}

fn both(_: (), _: ()) {}

/// `for_each`.
pub(crate) struct ForEach<'f, OP> {
    pub(crate) op: &'f OP,
}

impl<T, OP: Fn(T) + Sync> Consumer<T> for ForEach<'_, OP> {
    type Result = ();
    type Reducer = FnReducer<()>;
    fn split(self) -> (Self, Self, FnReducer<()>) {
        (
            ForEach { op: self.op },
            ForEach { op: self.op },
            FnReducer(both),
        )
    }
    fn consume_iter<I: Iterator<Item = T>>(self, iter: I) {
        iter.for_each(self.op);
    }
}

/// `reduce`.
pub(crate) struct Reduce<'f, ID, OP> {
    pub(crate) identity: &'f ID,
    pub(crate) op: &'f OP,
}

/// The reducer of [`Reduce`]: the user's operation.
pub(crate) struct OpReducer<'f, OP>(&'f OP);

impl<T, OP: Fn(T, T) -> T + Sync> Reducer<T> for OpReducer<'_, OP> {
    fn reduce(self, left: T, right: T) -> T {
        (self.0)(left, right)
    }
}

impl<'f, T: Send, ID, OP> Consumer<T> for Reduce<'f, ID, OP>
where
    ID: Fn() -> T + Sync,
    OP: Fn(T, T) -> T + Sync,
{
    type Result = T;
    type Reducer = OpReducer<'f, OP>;
    fn split(self) -> (Self, Self, OpReducer<'f, OP>) {
        (
            Reduce {
                identity: self.identity,
                op: self.op,
            },
            Reduce {
                identity: self.identity,
                op: self.op,
            },
            OpReducer(self.op),
        )
    }
    fn consume_iter<I: Iterator<Item = T>>(self, iter: I) -> T {
        iter.fold((self.identity)(), self.op)
    }
}

/// `reduce_with` (and `min`, `max` and their kin).
pub(crate) struct ReduceWith<'f, OP> {
    pub(crate) op: &'f OP,
}

/// The reducer of [`ReduceWith`]: the user's operation on two `Some`s.
pub(crate) struct OptionReducer<'f, OP>(&'f OP);

impl<T, OP: Fn(T, T) -> T + Sync> Reducer<Option<T>> for OptionReducer<'_, OP> {
    fn reduce(self, left: Option<T>, right: Option<T>) -> Option<T> {
        match (left, right) {
            (Some(a), Some(b)) => Some((self.0)(a, b)),
            (a, None) => a,
            (None, b) => b,
        }
    }
}

impl<'f, T: Send, OP: Fn(T, T) -> T + Sync> Consumer<T> for ReduceWith<'f, OP> {
    type Result = Option<T>;
    type Reducer = OptionReducer<'f, OP>;
    fn split(self) -> (Self, Self, OptionReducer<'f, OP>) {
        (
            ReduceWith { op: self.op },
            ReduceWith { op: self.op },
            OptionReducer(self.op),
        )
    }
    fn consume_iter<I: Iterator<Item = T>>(self, iter: I) -> Option<T> {
        iter.reduce(self.op)
    }
}

/// `sum`.
pub(crate) struct Sum<S>(PhantomData<fn() -> S>);

impl<S> Sum<S> {
    pub(crate) fn new() -> Self {
        Sum(PhantomData)
    }
}

fn add<S: std::iter::Sum<S>>(a: S, b: S) -> S {
    [a, b].into_iter().sum()
}

impl<T, S: Send + std::iter::Sum<T> + std::iter::Sum<S>> Consumer<T> for Sum<S> {
    type Result = S;
    type Reducer = FnReducer<S>;
    fn split(self) -> (Self, Self, FnReducer<S>) {
        (Sum::new(), Sum::new(), FnReducer(add::<S>))
    }
    fn consume_iter<I: Iterator<Item = T>>(self, iter: I) -> S {
        iter.sum()
    }
}

/// `product`.
pub(crate) struct Product<P>(PhantomData<fn() -> P>);

impl<P> Product<P> {
    pub(crate) fn new() -> Self {
        Product(PhantomData)
    }
}

fn mul<P: std::iter::Product<P>>(a: P, b: P) -> P {
    [a, b].into_iter().product()
}

impl<T, P: Send + std::iter::Product<T> + std::iter::Product<P>> Consumer<T> for Product<P> {
    type Result = P;
    type Reducer = FnReducer<P>;
    fn split(self) -> (Self, Self, FnReducer<P>) {
        (Product::new(), Product::new(), FnReducer(mul::<P>))
    }
    fn consume_iter<I: Iterator<Item = T>>(self, iter: I) -> P {
        iter.product()
    }
}

/// `any` (and `all`): stops every piece once one item is found.
pub(crate) struct Any<'f, P> {
    pub(crate) p: &'f P,
    pub(crate) found: &'f AtomicBool,
}

impl<T, P: Fn(T) -> bool + Sync> Consumer<T> for Any<'_, P> {
    type Result = ();
    type Reducer = FnReducer<()>;
    fn split(self) -> (Self, Self, FnReducer<()>) {
        (
            Any {
                p: self.p,
                found: self.found,
            },
            Any {
                p: self.p,
                found: self.found,
            },
            FnReducer(both),
        )
    }
    fn consume_iter<I: Iterator<Item = T>>(self, iter: I) {
        for x in iter {
            // Relaxed: a flag to stop early; the answer is read after every piece joined.
            if self.found.load(Ordering::Relaxed) {
                return;
            }
            if (self.p)(x) {
                self.found.store(true, Ordering::Relaxed);
                return;
            }
        }
    }
    fn full(&self) -> bool {
        self.found.load(Ordering::Relaxed)
    }
}

/// `find_any`.
pub(crate) struct Find<'f, P> {
    pub(crate) p: &'f P,
    pub(crate) found: &'f AtomicBool,
}

fn either<T>(a: Option<T>, b: Option<T>) -> Option<T> {
    a.or(b)
}

impl<T: Send, P: Fn(&T) -> bool + Sync> Consumer<T> for Find<'_, P> {
    type Result = Option<T>;
    type Reducer = FnReducer<Option<T>>;
    fn split(self) -> (Self, Self, FnReducer<Option<T>>) {
        (
            Find {
                p: self.p,
                found: self.found,
            },
            Find {
                p: self.p,
                found: self.found,
            },
            FnReducer(either::<T>),
        )
    }
    fn consume_iter<I: Iterator<Item = T>>(self, iter: I) -> Option<T> {
        for x in iter {
            if self.found.load(Ordering::Relaxed) {
                return None;
            }
            if (self.p)(&x) {
                self.found.store(true, Ordering::Relaxed);
                return Some(x);
            }
        }
        None
    }
    fn full(&self) -> bool {
        self.found.load(Ordering::Relaxed)
    }
}

/// `collect` into a `Vec`: each piece's items in a `Vec`, the pieces in order.
pub(crate) struct Collect<T>(PhantomData<fn() -> T>);

impl<T> Collect<T> {
    pub(crate) fn new() -> Self {
        Collect(PhantomData)
    }
}

fn concat<T>(mut a: Vec<Vec<T>>, mut b: Vec<Vec<T>>) -> Vec<Vec<T>> {
    a.append(&mut b);
    a
}

impl<T: Send> Consumer<T> for Collect<T> {
    type Result = Vec<Vec<T>>;
    type Reducer = FnReducer<Vec<Vec<T>>>;
    fn split(self) -> (Self, Self, Self::Reducer) {
        (Collect::new(), Collect::new(), FnReducer(concat::<T>))
    }
    fn consume_iter<I: Iterator<Item = T>>(self, iter: I) -> Vec<Vec<T>> {
        let v: Vec<T> = iter.collect();
        if v.is_empty() {
            Vec::new()
        } else {
            vec![v]
        }
    }
}
