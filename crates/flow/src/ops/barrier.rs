//! Barrier: holds every input until all inputs have ended, then releases each input's packets
//! on the matching output. Nothing downstream starts before everything upstream is done.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let x = b.source(vec![1, 2]);
//! let y = b.source(vec![3]);
//! let held = b.barrier(vec![x, y]);
//! let a = b.collect(held[0]);
//! let c = b.collect(held[1]);
//! let out = b.build().unwrap().run(&rt).unwrap();
//! assert_eq!((out.take(&a), out.take(&c)), (vec![1, 2], vec![3]));
//! ```

use std::collections::VecDeque;

use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::{Io, Packet};

struct Barrier<T> {
    held: Vec<VecDeque<Packet<T>>>,
}

impl<T: Send + 'static> Operator for Barrier<T> {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>(); self.held.len()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>(); self.held.len()]
    }

    fn state_bytes(&self) -> usize {
        self.held.iter().flatten().map(|p| p.bytes()).sum()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let n = self.held.len();
        for port in 0..n {
            while let Some(p) = io.recv::<T>(port) {
                self.held[port].push_back(p);
            }
        }
        if !(0..n).all(|p| io.finished::<T>(p)) {
            return Ok(Status::Idle);
        }
        // Release one packet per output per run, then reschedule (deferred) while any is left.
        for port in 0..n {
            if let Some(p) = self.held[port].pop_front() {
                io.send(port, p);
            }
        }
        if self.held.iter().all(VecDeque::is_empty) {
            Ok(Status::Done)
        } else {
            Ok(Status::More)
        }
    }
}

impl PlanBuilder {
    /// Holds the streams until all have ended, then releases them (output `i` = input `i`).
    pub fn barrier<T: Send + 'static>(&mut self, inputs: Vec<Stream<T>>) -> Vec<Stream<T>> {
        if inputs.is_empty() {
            self.invalid("barrier needs at least one stream".into());
        }
        let node = self.add_auto(
            "barrier",
            Barrier::<T> {
                held: (0..inputs.len()).map(|_| VecDeque::new()).collect(),
            },
        );
        for (i, s) in inputs.into_iter().enumerate() {
            self.feed(s, node, i);
        }
        self.streams_of(node)
    }
}
