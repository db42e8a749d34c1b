//! Merge join over sorted inputs: both inputs sorted by the join key; for each key present on
//! both sides, every pair of its tuples. Output is sorted by key.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let l = b.source(vec![(1, 'a'), (2, 'b'), (2, 'c'), (5, 'd')]);
//! let r = b.source(vec![(2, 20), (3, 30), (5, 50), (5, 51)]);
//! let j = b.merge_join(l, r, |x: &(i32, char)| x.0, |y: &(i32, i32)| y.0, |x, y| (x.1, y.1));
//! let out = b.collect(j);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out),
//!            vec![('b', 20), ('c', 20), ('d', 50), ('d', 51)]);
//! ```

use std::cmp::Ordering;
use std::collections::VecDeque;

use super::Emitter;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

struct MergeJoin<L, R, FL, FR, C, O> {
    left: VecDeque<L>,
    right: VecDeque<R>,
    key_l: FL,
    key_r: FR,
    combine: C,
    out: Emitter<O>,
}

/// Length of the run of equal keys at the front, and whether it is known to be complete.
fn group<T, K: Ord>(q: &VecDeque<T>, key: &mut impl FnMut(&T) -> K, ended: bool) -> (usize, bool) {
    let Some(first) = q.front() else {
        return (0, ended);
    };
    let k = key(first);
    let len = q.iter().take_while(|x| key(x) == k).count();
    (len, len < q.len() || ended)
}

impl<L, R, K, FL, FR, C, O> Operator for MergeJoin<L, R, FL, FR, C, O>
where
    L: Send + 'static,
    R: Send + 'static,
    K: Ord,
    O: Send + 'static,
    FL: FnMut(&L) -> K + Send + 'static,
    FR: FnMut(&R) -> K + Send + 'static,
    C: FnMut(&L, &R) -> O + Send + 'static,
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
            let l_end = io.recv_all::<L>(0, &mut self.left);
            let r_end = io.recv_all::<R>(1, &mut self.right);
            let mut progressed = false;
            while !io.blocked() {
                let (Some(l), Some(r)) = (self.left.front(), self.right.front()) else {
                    // One side is empty: if it has ended, the other side's tuples match nothing.
                    if self.left.is_empty() && l_end {
                        progressed |= !self.right.is_empty();
                        self.right.clear();
                    }
                    if self.right.is_empty() && r_end {
                        progressed |= !self.left.is_empty();
                        self.left.clear();
                    }
                    break;
                };
                match (self.key_l)(l).cmp(&(self.key_r)(r)) {
                    Ordering::Less => {
                        self.left.pop_front();
                    }
                    Ordering::Greater => {
                        self.right.pop_front();
                    }
                    Ordering::Equal => {
                        let (ln, l_done) = group(&self.left, &mut self.key_l, l_end);
                        let (rn, r_done) = group(&self.right, &mut self.key_r, r_end);
                        if !(l_done && r_done) {
                            break; // the group may go on in packets not yet here
                        }
                        for x in self.left.drain(..ln) {
                            for y in self.right.iter().take(rn) {
                                self.out.push(io, (self.combine)(&x, y));
                            }
                        }
                        self.right.drain(..rn);
                    }
                }
                progressed = true;
            }
            if self.left.is_empty() && self.right.is_empty() && l_end && r_end {
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
    /// Inner join of two streams sorted by their keys.
    pub fn merge_join<L, R, K, FL, FR, C, O>(
        &mut self,
        left: Stream<L>,
        right: Stream<R>,
        key_l: FL,
        key_r: FR,
        combine: C,
    ) -> Stream<O>
    where
        L: Send + 'static,
        R: Send + 'static,
        K: Ord,
        O: Send + 'static,
        FL: FnMut(&L) -> K + Send + 'static,
        FR: FnMut(&R) -> K + Send + 'static,
        C: FnMut(&L, &R) -> O + Send + 'static,
    {
        let n = self.add_auto(
            "merge_join",
            MergeJoin {
                left: VecDeque::new(),
                right: VecDeque::new(),
                key_l,
                key_r,
                combine,
                out: Emitter::new(0),
            },
        );
        self.feed(left, n, 0);
        self.feed(right, n, 1);
        self.out0(n)
    }
}
