//! Anti join: the tuples of the left input (0) whose key matches no tuple of the right input
//! (1, hashed), in order.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let all = b.source(1..=6);
//! let banned = b.source(vec![2, 5]);
//! let kept = b.anti_join(all, banned, |x: &i32| *x, |y: &i32| *y);
//! let out = b.collect(kept);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), vec![1, 3, 4, 6]);
//! ```

use std::hash::Hash;

use super::join_core::JoinCore;
use super::Emitter;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

struct AntiJoin<L, R, K, FL, FR> {
    core: JoinCore<(), L, K>,
    key_l: FL,
    key_r: FR,
    out: Emitter<L>,
    _r: std::marker::PhantomData<fn(R)>,
}

impl<L, R, K, FL, FR> Operator for AntiJoin<L, R, K, FL, FR>
where
    L: Send + 'static,
    R: Send + 'static,
    K: Hash + Eq + Send + 'static,
    FL: FnMut(&L) -> K + Send + 'static,
    FR: FnMut(&R) -> K + Send + 'static,
{
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<L>(), PortType::of::<R>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<L>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        // Only the right side's keys matter: the table maps them to empty lists.
        while let Some(p) = io.recv::<R>(1) {
            for r in p {
                self.core.table.entry((self.key_r)(&r)).or_default();
            }
        }
        let built = io.finished::<R>(1);
        self.core.probe(
            io,
            &mut self.out,
            built,
            &mut self.key_l,
            |l, matches, out, io| {
                if matches.is_none() {
                    out.push(io, l);
                }
            },
        )
    }
}

impl PlanBuilder {
    /// The tuples of `left` whose key has no match in `right`.
    pub fn anti_join<L, R, K, FL, FR>(
        &mut self,
        left: Stream<L>,
        right: Stream<R>,
        key_l: FL,
        key_r: FR,
    ) -> Stream<L>
    where
        L: Send + 'static,
        R: Send + 'static,
        K: Hash + Eq + Send + 'static,
        FL: FnMut(&L) -> K + Send + 'static,
        FR: FnMut(&R) -> K + Send + 'static,
    {
        let n = self.add_auto(
            "anti_join",
            AntiJoin {
                core: JoinCore::new(1, 0),
                key_l,
                key_r,
                out: Emitter::new(0),
                _r: std::marker::PhantomData,
            },
        );
        self.feed(left, n, 0);
        self.feed(right, n, 1);
        self.out0(n)
    }
}
