//! Hash partition: splits a stream into `n` by the hash of a key (equal keys go to the same
//! output, order kept within an output); also a round-robin split of whole packets.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(0..100u32);
//! let parts = b.partition(s, 3, |x: &u32| x % 10);
//! let sinks: Vec<_> = parts.into_iter().map(|p| b.collect(p)).collect();
//! let out = b.build().unwrap().run(&rt).unwrap();
//! let parts: Vec<Vec<u32>> = sinks.iter().map(|s| out.take(s)).collect();
//! assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), 100);
//! for p in &parts { // every key lands in exactly one part
//!     for x in p { assert!(parts.iter().filter(|q| q.iter().any(|y| y % 10 == x % 10)).count() == 1); }
//! }
//! ```

use std::hash::Hash;
use std::marker::PhantomData;

use super::{forward_packets, hash_of, Emitter};
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::{Io, Packet};

struct Partition<T, F> {
    route: F,
    outs: Vec<Emitter<T>>,
}

impl<T, F> Operator for Partition<T, F>
where
    T: Send + 'static,
    F: FnMut(&T) -> usize + Send + 'static,
{
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>(); self.outs.len()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let n = self.outs.len();
        loop {
            if io.blocked() {
                return Ok(Status::Idle);
            }
            match io.recv::<T>(0) {
                Some(p) => {
                    for x in p {
                        let i = (self.route)(&x);
                        match self.outs.get_mut(i) {
                            Some(o) => o.push(io, x),
                            None => {
                                return Err(FlowError::input(format!(
                                    "routed a tuple to output {i} of {n}"
                                )))
                            }
                        }
                    }
                }
                None if io.finished::<T>(0) => {
                    for o in &mut self.outs {
                        o.flush(io);
                    }
                    return Ok(Status::Done);
                }
                None => return Ok(Status::Idle),
            }
        }
    }
}

struct RoundRobin<T> {
    n: usize,
    next: usize,
    _t: PhantomData<fn(T)>,
}

impl<T: Send + 'static> Operator for RoundRobin<T> {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>(); self.n]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let (next, n) = (&mut self.next, self.n);
        Ok(forward_packets(io, |p: Packet<T>, io| {
            io.send(*next, p);
            *next = (*next + 1) % n;
        }))
    }
}

impl PlanBuilder {
    /// Splits `input` into `n` streams by `hash(key(tuple)) % n`.
    pub fn partition<T, K, F>(&mut self, input: Stream<T>, n: usize, mut key: F) -> Vec<Stream<T>>
    where
        T: Send + 'static,
        K: Hash,
        F: FnMut(&T) -> K + Send + 'static,
    {
        let m = n.max(1) as u64;
        self.partition_by(input, n, move |t| (hash_of(&key(t)) % m) as usize)
    }

    /// Splits `input` into `n` streams, each tuple to output `route(tuple)` (a route out of
    /// range stops the plan with an error).
    pub fn partition_by<T, F>(&mut self, input: Stream<T>, n: usize, route: F) -> Vec<Stream<T>>
    where
        T: Send + 'static,
        F: FnMut(&T) -> usize + Send + 'static,
    {
        if n == 0 {
            self.invalid("partition needs at least one stream".into());
        }
        let node = self.add_auto(
            "partition",
            Partition {
                route,
                outs: (0..n).map(Emitter::new).collect(),
            },
        );
        self.feed(input, node, 0);
        self.streams_of(node)
    }

    /// Splits `input` into `n` streams, whole packets dealt round robin.
    pub fn partition_round_robin<T: Send + 'static>(
        &mut self,
        input: Stream<T>,
        n: usize,
    ) -> Vec<Stream<T>> {
        if n == 0 {
            self.invalid("split_rr needs at least one stream".into());
        }
        let node = self.add_auto(
            "split_rr",
            RoundRobin::<T> {
                n,
                next: 0,
                _t: PhantomData,
            },
        );
        self.feed(input, node, 0);
        self.streams_of(node)
    }
}
