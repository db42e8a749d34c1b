//! Flat-map: any number of output tuples per input tuple.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(vec![1u32, 3]);
//! let expanded = b.flat_map(s, |n: u32| 0..n);
//! let out = b.collect(expanded);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), vec![0, 0, 1, 2]);
//! ```

use super::{Emitter, Flow, Unary, UnaryOp};
use crate::error::FlowError;
use crate::plan::{PlanBuilder, Stream};
use crate::{Io, Packet};

struct FlatMap<F>(F);

impl<I, O, It, F> Unary<I, O> for FlatMap<F>
where
    I: Send + 'static,
    O: Send + 'static,
    It: IntoIterator<Item = O>,
    F: FnMut(I) -> It + Send + 'static,
{
    fn packet(
        &mut self,
        p: Packet<I>,
        out: &mut Emitter<O>,
        io: &mut Io<'_>,
    ) -> Result<Flow, FlowError> {
        for x in p {
            for y in (self.0)(x) {
                out.push(io, y);
            }
        }
        Ok(Flow::Continue)
    }
}

impl PlanBuilder {
    /// Replaces every tuple by the items `f` returns for it, in order.
    pub fn flat_map<I, O, It, F>(&mut self, input: Stream<I>, f: F) -> Stream<O>
    where
        I: Send + 'static,
        O: Send + 'static,
        It: IntoIterator<Item = O>,
        F: FnMut(I) -> It + Send + 'static,
    {
        let n = self.add_auto("flat_map", UnaryOp::<I, O, _>::new(FlatMap(f)));
        self.feed(input, n, 0);
        self.out0(n)
    }
}
