//! Broadcast: copies every packet to each of its outputs (one stream feeding several inputs).
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(vec![1, 2]);
//! let copies = b.broadcast(s, 2);
//! let a = b.collect(copies[0]);
//! let c = b.collect(copies[1]);
//! let out = b.build().unwrap().run(&rt).unwrap();
//! assert_eq!((out.take(&a), out.take(&c)), (vec![1, 2], vec![1, 2]));
//! ```

use std::marker::PhantomData;

use super::forward_packets;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::{Io, Packet};

struct Broadcast<T> {
    n: usize,
    _t: PhantomData<fn(T)>,
}

impl<T: Clone + Send + 'static> Operator for Broadcast<T> {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>(); self.n]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let n = self.n;
        Ok(forward_packets(io, |p: Packet<T>, io| {
            for port in 1..n {
                io.send(port, p.clone());
            }
            io.send(0, p);
        }))
    }
}

impl PlanBuilder {
    /// `n` copies of a stream.
    pub fn broadcast<T: Clone + Send + 'static>(
        &mut self,
        input: Stream<T>,
        n: usize,
    ) -> Vec<Stream<T>> {
        if n == 0 {
            self.invalid("broadcast needs at least one stream".into());
        }
        let node = self.add_auto("broadcast", Broadcast::<T> { n, _t: PhantomData });
        self.feed(input, node, 0);
        self.streams_of(node)
    }
}
