//! Count-based sliding-window aggregate, partitioned by key: for every tuple, the aggregate of
//! the last `window` tuples of its key (itself included), maintained incrementally.
//!
//! The aggregate is a [`WindowAgg`]: `add` a tuple entering the window, `remove` one leaving
//! it, `output` after each tuple (or `None` to emit nothing for it).
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, ops::window_agg::WindowAgg, PlanBuilder};
//! struct Sum;
//! impl WindowAgg<(char, i64)> for Sum {
//!     type Acc = i64;
//!     type Out = (char, i64);
//!     fn add(&mut self, acc: &mut i64, t: &(char, i64)) { *acc += t.1; }
//!     fn remove(&mut self, acc: &mut i64, t: &(char, i64)) { *acc -= t.1; }
//!     fn output(&mut self, acc: &i64, t: &(char, i64), _len: usize) -> Option<(char, i64)> {
//!         Some((t.0, *acc))
//!     }
//! }
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(vec![('a', 1), ('b', 10), ('a', 2), ('a', 4), ('b', 20)]);
//! let w = b.window_aggregate(s, 2, |t: &(char, i64)| t.0, Sum);
//! let out = b.collect(w);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out),
//!            vec![('a', 1), ('b', 10), ('a', 3), ('a', 6), ('b', 30)]);
//! ```

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use super::{Emitter, Flow, Unary, UnaryOp};
use crate::error::FlowError;
use crate::plan::{PlanBuilder, Stream};
use crate::{Io, Packet};

/// An incrementally maintained window aggregate.
pub trait WindowAgg<T>: Send + 'static {
    /// The running state of one key's window.
    type Acc: Default + Send + 'static;
    /// What is emitted per tuple.
    type Out: Send + 'static;
    /// `t` enters the window.
    fn add(&mut self, acc: &mut Self::Acc, t: &T);
    /// `t` leaves the window.
    fn remove(&mut self, acc: &mut Self::Acc, t: &T);
    /// The output after `t` entered a window now holding `len` tuples.
    fn output(&mut self, acc: &Self::Acc, t: &T, len: usize) -> Option<Self::Out>;
}

struct WindowOp<T, K, A: WindowAgg<T>, F, W> {
    /// The window's size for the tuple that enters it.
    window: W,
    key: F,
    agg: A,
    windows: HashMap<K, (VecDeque<T>, A::Acc)>,
    /// Tuples in all windows.
    held: usize,
}

impl<T, K, A, F, W> Unary<T, A::Out> for WindowOp<T, K, A, F, W>
where
    T: Send + 'static,
    K: Hash + Eq + Send + 'static,
    A: WindowAgg<T>,
    F: FnMut(&T) -> K + Send + 'static,
    W: FnMut(&T) -> usize + Send + 'static,
{
    fn packet(
        &mut self,
        p: Packet<T>,
        out: &mut Emitter<A::Out>,
        io: &mut Io<'_>,
    ) -> Result<Flow, FlowError> {
        for t in p {
            let size = (self.window)(&t).max(1);
            let (w, acc) = self.windows.entry((self.key)(&t)).or_default();
            self.agg.add(acc, &t);
            // The window holds at most `size` tuples once `t` is in (it may shrink).
            while w.len() >= size {
                let old = w.pop_front().expect("a full window is not empty");
                self.agg.remove(acc, &old);
                self.held -= 1;
            }
            self.held += 1;
            if let Some(o) = self.agg.output(acc, &t, w.len() + 1) {
                out.push(io, o);
            }
            w.push_back(t);
        }
        Ok(Flow::Continue)
    }

    fn state_bytes(&self) -> usize {
        self.held * std::mem::size_of::<T>()
            + self.windows.len() * (std::mem::size_of::<K>() + std::mem::size_of::<A::Acc>())
    }
}

impl PlanBuilder {
    /// Per key, the aggregate of its last `window` tuples, emitted after each tuple.
    pub fn window_aggregate<T, K, A, F>(
        &mut self,
        input: Stream<T>,
        window: usize,
        key: F,
        agg: A,
    ) -> Stream<A::Out>
    where
        T: Send + 'static,
        K: Hash + Eq + Send + 'static,
        A: WindowAgg<T>,
        F: FnMut(&T) -> K + Send + 'static,
    {
        if window == 0 {
            self.invalid("a sliding window holds at least 1 tuple".into());
        }
        let window = window.max(1);
        self.window_aggregate_sized(input, move |_: &T| window, key, agg)
    }

    /// As [`window_aggregate`](Self::window_aggregate), with the window's size given per
    /// tuple: `size(t)` tuples at most (at least 1) once `t` has entered; a smaller size than
    /// before drops the oldest. (StreamMap's online re-mapping test switches VWAP from small
    /// to large windows halfway with it.)
    pub fn window_aggregate_sized<T, K, A, F, W>(
        &mut self,
        input: Stream<T>,
        size: W,
        key: F,
        agg: A,
    ) -> Stream<A::Out>
    where
        T: Send + 'static,
        K: Hash + Eq + Send + 'static,
        A: WindowAgg<T>,
        F: FnMut(&T) -> K + Send + 'static,
        W: FnMut(&T) -> usize + Send + 'static,
    {
        let n = self.add_auto(
            "window_agg",
            UnaryOp::<T, A::Out, _>::new(WindowOp {
                window: size,
                key,
                agg,
                windows: HashMap::new(),
                held: 0,
            }),
        );
        self.feed(input, n, 0);
        self.out0(n)
    }
}
