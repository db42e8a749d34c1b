//! Union: merges any number of streams into one, packets in arrival order.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let x = b.source(vec![1, 2]);
//! let y = b.source(vec![3]);
//! let all = b.union(vec![x, y]);
//! let out = b.collect(all);
//! let mut res = b.build().unwrap().run(&rt).unwrap().take(&out);
//! res.sort();
//! assert_eq!(res, vec![1, 2, 3]);
//! ```

use std::marker::PhantomData;

use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

struct Union<T> {
    n: usize,
    _t: PhantomData<fn(T)>,
}

impl<T: Send + 'static> Operator for Union<T> {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>(); self.n]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        loop {
            let mut moved = false;
            for port in 0..self.n {
                if io.blocked() {
                    return Ok(Status::Idle);
                }
                if let Some(p) = io.recv::<T>(port) {
                    io.send(0, p);
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        if (0..self.n).all(|p| io.finished::<T>(p)) {
            return Ok(Status::Done);
        }
        Ok(Status::Idle)
    }
}

impl PlanBuilder {
    /// One stream carrying every packet of `inputs`.
    pub fn union<T: Send + 'static>(&mut self, inputs: Vec<Stream<T>>) -> Stream<T> {
        if inputs.is_empty() {
            self.invalid("union needs at least one stream".into());
        }
        let node = self.add_auto(
            "union",
            Union::<T> {
                n: inputs.len(),
                _t: PhantomData,
            },
        );
        for (i, s) in inputs.into_iter().enumerate() {
            self.feed(s, node, i);
        }
        self.out0(node)
    }
}
