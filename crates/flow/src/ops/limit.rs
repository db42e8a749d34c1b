//! Limit/offset: skips `offset` tuples, then passes at most `limit`; it finishes as soon as the
//! limit is reached. Its input is then dropped, so upstream never blocks on it, and an operator
//! whose every consumer has finished finishes too: an endless source under a limit ends.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(0..1_000_000u64);
//! let page = b.limit(s, 10, 3);
//! let out = b.collect(page);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), vec![10, 11, 12]);
//! ```

use super::{Emitter, Flow, Unary, UnaryOp};
use crate::error::FlowError;
use crate::plan::{PlanBuilder, Stream};
use crate::{Io, Packet};

struct Limit {
    skip: u64,
    left: u64,
}

impl<T: Send + 'static> Unary<T, T> for Limit {
    fn packet(
        &mut self,
        p: Packet<T>,
        out: &mut Emitter<T>,
        io: &mut Io<'_>,
    ) -> Result<Flow, FlowError> {
        for x in p {
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            if self.left == 0 {
                break;
            }
            self.left -= 1;
            out.push(io, x);
        }
        Ok(if self.left == 0 {
            Flow::Stop
        } else {
            Flow::Continue
        })
    }
}

impl PlanBuilder {
    /// Skips `offset` tuples, then keeps at most `limit`.
    pub fn limit<T: Send + 'static>(
        &mut self,
        input: Stream<T>,
        offset: u64,
        limit: u64,
    ) -> Stream<T> {
        let n = self.add_auto(
            "limit",
            UnaryOp::<T, T, _>::new(Limit {
                skip: offset,
                left: limit,
            }),
        );
        self.feed(input, n, 0);
        self.out0(n)
    }
}
