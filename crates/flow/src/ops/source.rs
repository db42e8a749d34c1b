//! Source from an iterator or a generator: one packet per run, then it reschedules itself as a
//! deferred task (001 §3.1).
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let squares = b.generate(5, |i| i * i);
//! let out = b.collect(squares);
//! let res = b.build().unwrap().run(&rt).unwrap();
//! assert_eq!(res.take(&out), vec![0, 1, 4, 9, 16]);
//! ```

use super::Emitter;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

/// Emits the items of an iterator.
pub struct IterSource<I: Iterator> {
    it: I,
    out: Emitter<I::Item>,
}

impl<I> Operator for IterSource<I>
where
    I: Iterator + Send + 'static,
    I::Item: Send + 'static,
{
    fn inputs(&self) -> Vec<PortType> {
        Vec::new()
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<I::Item>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        // One packet per run, of the size packets have now.
        for _ in 0..self.out.capacity(io) {
            match self.it.next() {
                Some(x) => self.out.push(io, x),
                None => {
                    self.out.flush(io);
                    return Ok(Status::Done);
                }
            }
        }
        self.out.flush(io);
        Ok(Status::More)
    }
}

impl PlanBuilder {
    /// A source emitting the items of `items`, in order.
    pub fn source<I>(&mut self, items: I) -> Stream<I::Item>
    where
        I: IntoIterator,
        I::IntoIter: Send + 'static,
        I::Item: Send + 'static,
    {
        let n = self.add_auto(
            "source",
            IterSource {
                it: items.into_iter(),
                out: Emitter::new(0),
            },
        );
        self.out0(n)
    }

    /// A generator: emits `f(0), f(1), …, f(count - 1)`.
    pub fn generate<T, F>(&mut self, count: u64, f: F) -> Stream<T>
    where
        T: Send + 'static,
        F: FnMut(u64) -> T + Send + 'static,
    {
        self.source((0..count).map(f))
    }
}
