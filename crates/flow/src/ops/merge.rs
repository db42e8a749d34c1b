//! K-way merge of sorted streams: inputs each sorted by a key, one output sorted by it (ties
//! go to the lower input). It emits a tuple only once every unfinished input has one waiting.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let x = b.source(vec![1, 4, 9]);
//! let y = b.source(vec![2, 3, 10]);
//! let z = b.source(Vec::<i32>::new());
//! let m = b.merge_sorted(vec![x, y, z], |v: &i32| *v);
//! let out = b.collect(m);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), vec![1, 2, 3, 4, 9, 10]);
//! ```

use std::collections::VecDeque;

use super::Emitter;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

struct Merge<T, F> {
    key: F,
    heads: Vec<VecDeque<T>>,
    out: Emitter<T>,
}

impl<T, K, F> Operator for Merge<T, F>
where
    T: Send + 'static,
    K: Ord,
    F: FnMut(&T) -> K + Send + 'static,
{
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>(); self.heads.len()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let n = self.heads.len();
        loop {
            if io.blocked() {
                return Ok(Status::Idle);
            }
            for (port, q) in self.heads.iter_mut().enumerate() {
                io.recv_all::<T>(port, q);
            }
            let mut progressed = false;
            'emit: while !io.blocked() {
                let mut best: Option<(usize, K)> = None;
                for port in 0..n {
                    match self.heads[port].front() {
                        Some(x) => {
                            let k = (self.key)(x);
                            if best.as_ref().is_none_or(|(_, bk)| k < *bk) {
                                best = Some((port, k));
                            }
                        }
                        None if io.finished::<T>(port) => {}
                        None => break 'emit, // this input may still bring a smaller tuple
                    }
                }
                let Some((port, _)) = best else { break };
                let x = self.heads[port].pop_front().expect("has a head");
                self.out.push(io, x);
                progressed = true;
            }
            if self.heads.iter().all(VecDeque::is_empty) && (0..n).all(|p| io.finished::<T>(p)) {
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
    /// Merges streams each sorted by `key` into one sorted stream.
    pub fn merge_sorted<T, K, F>(&mut self, inputs: Vec<Stream<T>>, key: F) -> Stream<T>
    where
        T: Send + 'static,
        K: Ord,
        F: FnMut(&T) -> K + Send + 'static,
    {
        if inputs.is_empty() {
            self.invalid("merge needs at least one stream".into());
        }
        let node = self.add_auto(
            "merge",
            Merge {
                key,
                heads: (0..inputs.len()).map(|_| VecDeque::new()).collect(),
                out: Emitter::new(0),
            },
        );
        for (i, s) in inputs.into_iter().enumerate() {
            self.feed(s, node, i);
        }
        self.out0(node)
    }
}
