//! Sort: collects its input, sorts it stably by a key, emits it in packets.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(vec![(3, 'a'), (1, 'b'), (3, 'c'), (2, 'd')]);
//! let sorted = b.sort_by_key(s, |t: &(i32, char)| t.0);
//! let out = b.collect(sorted);
//! let res = b.build().unwrap().run(&rt).unwrap().take(&out);
//! assert_eq!(res, vec![(1, 'b'), (2, 'd'), (3, 'a'), (3, 'c')]); // stable
//! ```

use super::{drain_vec, Emitter, Flow, Unary, UnaryOp};
use crate::error::FlowError;
use crate::plan::{PlanBuilder, Stream};
use crate::{Io, Packet};

struct Sort<T, F> {
    key: F,
    items: Vec<T>,
    out: Option<std::vec::IntoIter<T>>,
}

impl<T, K, F> Unary<T, T> for Sort<T, F>
where
    T: Send + 'static,
    K: Ord,
    F: FnMut(&T) -> K + Send + 'static,
{
    fn packet(
        &mut self,
        p: Packet<T>,
        _out: &mut Emitter<T>,
        _io: &mut Io<'_>,
    ) -> Result<Flow, FlowError> {
        self.items.extend(p);
        Ok(Flow::Continue)
    }

    fn state_bytes(&self) -> usize {
        (self.items.len() + self.out.as_ref().map_or(0, |o| o.len())) * std::mem::size_of::<T>()
    }

    fn finish(&mut self, out: &mut Emitter<T>, io: &mut Io<'_>) -> Result<bool, FlowError> {
        if self.out.is_none() {
            let mut items = std::mem::take(&mut self.items);
            items.sort_by_key(&mut self.key);
            self.out = Some(items.into_iter());
        }
        Ok(drain_vec(self.out.as_mut().expect("set above"), out, io))
    }
}

impl PlanBuilder {
    /// Sorts the whole stream by `key` (stable: equal keys keep their arrival order).
    pub fn sort_by_key<T, K, F>(&mut self, input: Stream<T>, key: F) -> Stream<T>
    where
        T: Send + 'static,
        K: Ord,
        F: FnMut(&T) -> K + Send + 'static,
    {
        let n = self.add_auto(
            "sort",
            UnaryOp::<T, T, _>::new(Sort {
                key,
                items: Vec::new(),
                out: None,
            }),
        );
        self.feed(input, n, 0);
        self.out0(n)
    }
}
