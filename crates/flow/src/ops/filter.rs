//! Filter: keeps the tuples a predicate accepts.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(1..=10);
//! let even = b.filter(s, |x: &i32| x % 2 == 0);
//! let out = b.collect(even);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), vec![2, 4, 6, 8, 10]);
//! ```

use super::{Emitter, Flow, Unary, UnaryOp};
use crate::error::FlowError;
use crate::plan::{PlanBuilder, Stream};
use crate::{Io, Packet};

struct Filter<F>(F);

impl<T, F> Unary<T, T> for Filter<F>
where
    T: Send + 'static,
    F: FnMut(&T) -> bool + Send + 'static,
{
    fn packet(
        &mut self,
        p: Packet<T>,
        out: &mut Emitter<T>,
        io: &mut Io<'_>,
    ) -> Result<Flow, FlowError> {
        for x in p {
            if (self.0)(&x) {
                out.push(io, x);
            }
        }
        Ok(Flow::Continue)
    }
}

impl PlanBuilder {
    /// Keeps the tuples for which `pred` is true, in order.
    pub fn filter<T, F>(&mut self, input: Stream<T>, pred: F) -> Stream<T>
    where
        T: Send + 'static,
        F: FnMut(&T) -> bool + Send + 'static,
    {
        let n = self.add_auto("filter", UnaryOp::<T, T, _>::new(Filter(pred)));
        self.feed(input, n, 0);
        self.out0(n)
    }
}
