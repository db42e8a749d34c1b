//! Collecting sink: gathers every tuple; the plan's output hands them over.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(vec!["x", "y"]);
//! let sink = b.collect(s);
//! let output = b.build().unwrap().run(&rt).unwrap();
//! assert_eq!(output.take(&sink), vec!["x", "y"]);
//! assert!(output.take(&sink).is_empty()); // taken once
//! ```

use crate::sync::os::Arc;

use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Sink, SinkCell, Status, Stream};
use crate::Io;

struct Collect<T> {
    items: Vec<T>,
    slot: Arc<SinkCell<T>>,
}

impl<T: Send + 'static> Operator for Collect<T> {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<T>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        Vec::new()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        while let Some(p) = io.recv::<T>(0) {
            if self.items.is_empty() {
                self.items = p.into_vec();
            } else {
                self.items.extend(p);
            }
        }
        if io.finished::<T>(0) {
            *self.slot.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(std::mem::take(&mut self.items));
            return Ok(Status::Done);
        }
        Ok(Status::Idle)
    }
}

impl PlanBuilder {
    /// Ends a stream in a sink that collects it; take the tuples from the plan's output.
    pub fn collect<T: Send + 'static>(&mut self, input: Stream<T>) -> Sink<T> {
        let (sink, slot) = self.new_sink::<T>();
        let n = self.add_auto(
            "collect",
            Collect {
                items: Vec::new(),
                slot,
            },
        );
        self.feed(input, n, 0);
        sink
    }
}
