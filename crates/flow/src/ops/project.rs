//! Project: keeps chosen columns of row tuples (`Vec<V>`), in the chosen order.
//!
//! A row too short for the projection is a bad input: the plan stops with an error naming the
//! row's length and the column asked for.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let rows = b.source(vec![vec![1, 2, 3], vec![4, 5, 6]]);
//! let p = b.project(rows, vec![2, 0]);
//! let out = b.collect(p);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), vec![vec![3, 1], vec![6, 4]]);
//! ```

use super::{Emitter, Flow, Unary, UnaryOp};
use crate::error::FlowError;
use crate::plan::{PlanBuilder, Stream};
use crate::{Io, Packet};

struct Project {
    columns: Vec<usize>,
}

impl<V: Clone + Send + 'static> Unary<Vec<V>, Vec<V>> for Project {
    fn packet(
        &mut self,
        p: Packet<Vec<V>>,
        out: &mut Emitter<Vec<V>>,
        io: &mut Io<'_>,
    ) -> Result<Flow, FlowError> {
        for row in p {
            let mut r = Vec::with_capacity(self.columns.len());
            for &c in &self.columns {
                match row.get(c) {
                    Some(v) => r.push(v.clone()),
                    None => {
                        return Err(FlowError::input(format!(
                            "a row has {} columns; the projection needs column {c}",
                            row.len()
                        )))
                    }
                }
            }
            out.push(io, r);
        }
        Ok(Flow::Continue)
    }
}

impl PlanBuilder {
    /// Keeps `columns` (indices, possibly repeated or reordered) of every row.
    pub fn project<V>(&mut self, input: Stream<Vec<V>>, columns: Vec<usize>) -> Stream<Vec<V>>
    where
        V: Clone + Send + 'static,
    {
        let n = self.add_auto(
            "project",
            UnaryOp::<Vec<V>, Vec<V>, _>::new(Project { columns }),
        );
        self.feed(input, n, 0);
        self.out0(n)
    }
}
