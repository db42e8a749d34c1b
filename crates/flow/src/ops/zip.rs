//! Zip: pairs the i-th tuple of one stream with the i-th tuple of another, in arrival order — the
//! lock-step meeting point of two threads (StreamMap's shared Barrier operator,
//! `streammap-cache-topology-mapping.txt` §III.D and LOIS, Fig. 10). The unmatched tuples of the
//! faster input wait in the operator (its state, reported by `state_bytes`); the zip ends when
//! one input has ended and its waiting tuples are used up; what the other input still sends is
//! taken and dropped, so its producer is never blocked.

use std::collections::VecDeque;

use super::Emitter;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

struct Zip<L, R> {
    left: VecDeque<L>,
    right: VecDeque<R>,
    out: Emitter<(L, R)>,
}

impl<L: Send + 'static, R: Send + 'static> Operator for Zip<L, R> {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<L>(), PortType::of::<R>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<(L, R)>()]
    }

    fn state_bytes(&self) -> usize {
        self.left.len() * std::mem::size_of::<L>() + self.right.len() * std::mem::size_of::<R>()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        loop {
            if io.blocked() {
                return Ok(Status::Idle);
            }
            let l_done = io.recv_all(0, &mut self.left);
            let r_done = io.recv_all(1, &mut self.right);
            while !self.left.is_empty() && !self.right.is_empty() && !io.blocked() {
                let l = self.left.pop_front().expect("not empty");
                let r = self.right.pop_front().expect("not empty");
                self.out.push(io, (l, r));
            }
            if io.blocked() {
                continue;
            }
            let ended = (l_done && self.left.is_empty()) || (r_done && self.right.is_empty());
            if ended {
                // Nothing more can pair; drop what the other side still sends until it ends.
                self.left.clear();
                self.right.clear();
                self.out.flush(io);
                if l_done && r_done {
                    return Ok(Status::Done);
                }
            } else {
                self.out.flush(io);
            }
            return Ok(Status::Idle);
        }
    }
}

impl PlanBuilder {
    /// Pairs the streams tuple by tuple in arrival order: `(left[i], right[i])`; ends with the
    /// shorter one.
    pub fn zip<L: Send + 'static, R: Send + 'static>(
        &mut self,
        left: Stream<L>,
        right: Stream<R>,
    ) -> Stream<(L, R)> {
        let n = self.add_auto(
            "zip",
            Zip::<L, R> {
                left: VecDeque::new(),
                right: VecDeque::new(),
                out: Emitter::new(0),
            },
        );
        self.feed(left, n, 0);
        self.feed(right, n, 1);
        self.out0(n)
    }
}
