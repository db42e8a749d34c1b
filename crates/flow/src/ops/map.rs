//! Map: one output tuple per input tuple.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(vec![1, 2, 3]);
//! let doubled = b.map(s, |x: i32| x * 2);
//! let out = b.collect(doubled);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), vec![2, 4, 6]);
//! ```

use super::{Emitter, Flow, Unary, UnaryOp};
use crate::error::FlowError;
use crate::plan::{PlanBuilder, Stream};
use crate::{Io, Packet};

struct Map<F>(F);

impl<I, O, F> Unary<I, O> for Map<F>
where
    I: Send + 'static,
    O: Send + 'static,
    F: FnMut(I) -> O + Send + 'static,
{
    fn packet(
        &mut self,
        p: Packet<I>,
        out: &mut Emitter<O>,
        io: &mut Io<'_>,
    ) -> Result<Flow, FlowError> {
        for x in p {
            out.push(io, (self.0)(x));
        }
        Ok(Flow::Continue)
    }
}

impl PlanBuilder {
    /// Applies `f` to every tuple.
    pub fn map<I, O, F>(&mut self, input: Stream<I>, f: F) -> Stream<O>
    where
        I: Send + 'static,
        O: Send + 'static,
        F: FnMut(I) -> O + Send + 'static,
    {
        let n = self.add_auto("map", UnaryOp::<I, O, _>::new(Map(f)));
        self.feed(input, n, 0);
        self.out0(n)
    }
}
