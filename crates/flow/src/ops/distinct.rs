//! Distinct: keeps the first occurrence of every tuple, streaming.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(vec![3, 1, 3, 2, 1]);
//! let d = b.distinct(s);
//! let out = b.collect(d);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), vec![3, 1, 2]);
//! ```

use std::collections::HashSet;
use std::hash::Hash;

use super::{Emitter, Flow, Unary, UnaryOp};
use crate::error::FlowError;
use crate::plan::{PlanBuilder, Stream};
use crate::{Io, Packet};

struct Distinct<T> {
    seen: HashSet<T>,
}

impl<T> Unary<T, T> for Distinct<T>
where
    T: Hash + Eq + Clone + Send + 'static,
{
    fn packet(
        &mut self,
        p: Packet<T>,
        out: &mut Emitter<T>,
        io: &mut Io<'_>,
    ) -> Result<Flow, FlowError> {
        for x in p {
            if !self.seen.contains(&x) {
                self.seen.insert(x.clone());
                out.push(io, x);
            }
        }
        Ok(Flow::Continue)
    }
}

impl PlanBuilder {
    /// Drops repeated tuples; the first occurrence of each passes through at once.
    pub fn distinct<T>(&mut self, input: Stream<T>) -> Stream<T>
    where
        T: Hash + Eq + Clone + Send + 'static,
    {
        let n = self.add_auto(
            "distinct",
            UnaryOp::<T, T, _>::new(Distinct {
                seen: HashSet::new(),
            }),
        );
        self.feed(input, n, 0);
        self.out0(n)
    }
}
