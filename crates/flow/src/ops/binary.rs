//! The two-input operator form (after timely's `binary`): the engine-facing loop of an operator
//! that consumes two typed inputs in an order it chooses, written once; the operator supplies
//! only its step.
//!
//! The loop moves whatever has arrived on both inputs into the operator's two queues (so a
//! producer feeding both inputs is never blocked by one input waiting for the other, see the
//! module docs of `ops`), then calls the step while the output is free and the step makes
//! progress. The operator has finished when both inputs have ended and both queues are empty;
//! it waits for input when a step makes no progress.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let xs = b.source(vec![1u64, 2, 3]);
//! let ys = b.source(vec![10u64, 20]);
//! // Pairwise sums while both sides have a tuple; a leftover tuple is dropped.
//! let sums = b.binary("zip_sum", xs, ys, |inp, out| {
//!     match (inp.left.pop_front(), inp.right.pop_front()) {
//!         (Some(x), Some(y)) => { out.push(x + y); true }
//!         (x, y) => {
//!             // Put back what was taken; drop what can never be paired.
//!             if let Some(x) = x { if !inp.right_ended { inp.left.push_front(x); return false; } }
//!             if let Some(y) = y { if !inp.left_ended { inp.right.push_front(y); return false; } }
//!             inp.left.clear();
//!             inp.right.clear();
//!             false
//!         }
//!     }
//! });
//! let out = b.collect(sums);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), vec![11, 22]);
//! ```

use std::collections::VecDeque;

use super::Emitter;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

/// The two inputs as a step sees them: the tuples received and not yet consumed, oldest first,
/// and whether each input has ended (nothing more will arrive).
#[derive(Debug)]
pub struct Inputs2<'a, L, R> {
    pub left: &'a mut VecDeque<L>,
    pub right: &'a mut VecDeque<R>,
    pub left_ended: bool,
    pub right_ended: bool,
}

/// The output as a step sees it.
pub struct Out<'a, 'io, O> {
    emitter: &'a mut Emitter<O>,
    io: &'a mut Io<'io>,
}

impl<O: Send + 'static> Out<'_, '_, O> {
    /// Emits one tuple (packets are filled to the plan's packet size).
    pub fn push(&mut self, x: O) {
        self.emitter.push(self.io, x);
    }

    /// Whether the consumer refused a packet: a step may stop early; the loop will not call it
    /// again until there is room.
    pub fn blocked(&self) -> bool {
        self.io.blocked()
    }
}

/// An operator of two inputs `L`, `R` and one output `O` run by the shared loop; `step` returns
/// whether it consumed or emitted anything.
struct Binary<L, R, O, F> {
    left: VecDeque<L>,
    right: VecDeque<R>,
    out: Emitter<O>,
    step: F,
}

impl<L, R, O, F> Operator for Binary<L, R, O, F>
where
    L: Send + 'static,
    R: Send + 'static,
    O: Send + 'static,
    F: FnMut(&mut Inputs2<'_, L, R>, &mut Out<'_, '_, O>) -> bool + Send + 'static,
{
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<L>(), PortType::of::<R>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<O>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        loop {
            if io.blocked() {
                return Ok(Status::Idle);
            }
            let left_ended = io.recv_all::<L>(0, &mut self.left);
            let right_ended = io.recv_all::<R>(1, &mut self.right);
            let mut progressed = false;
            while !io.blocked() {
                let mut inputs = Inputs2 {
                    left: &mut self.left,
                    right: &mut self.right,
                    left_ended,
                    right_ended,
                };
                let mut out = Out {
                    emitter: &mut self.out,
                    io,
                };
                if !(self.step)(&mut inputs, &mut out) {
                    break;
                }
                progressed = true;
            }
            if self.left.is_empty() && self.right.is_empty() && left_ended && right_ended {
                self.out.flush(io);
                return Ok(Status::Done);
            }
            if !progressed {
                return Ok(Status::Idle);
            }
        }
    }
}

impl PlanBuilder {
    /// A two-input operator named `name` from its step: `step(inputs, out)` consumes from the
    /// fronts of `inputs.left` / `inputs.right`, emits through `out`, and returns whether it did
    /// anything (false: wait for more input). It must leave both queues empty once both inputs
    /// have ended, or the plan reports the operator as stalled.
    pub fn binary<L, R, O, F>(
        &mut self,
        name: &str,
        left: Stream<L>,
        right: Stream<R>,
        step: F,
    ) -> Stream<O>
    where
        L: Send + 'static,
        R: Send + 'static,
        O: Send + 'static,
        F: FnMut(&mut Inputs2<'_, L, R>, &mut Out<'_, '_, O>) -> bool + Send + 'static,
    {
        let n = self.add_auto(
            name,
            Binary {
                left: VecDeque::new(),
                right: VecDeque::new(),
                out: Emitter::new(0),
                step,
            },
        );
        self.feed(left, n, 0);
        self.feed(right, n, 1);
        self.out0(n)
    }
}
