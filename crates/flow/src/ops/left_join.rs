//! Left outer join: every tuple of the left input (0) appears, combined with each matching
//! right tuple (input 1, hashed), or with `None` when there is none.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let left = b.source(vec![1, 2, 3]);
//! let right = b.source(vec![(2, "two"), (2, "deux")]);
//! let j = b.left_join(left, right, |l: &i32| *l, |r: &(i32, &str)| r.0,
//!                     |l, r| (*l, r.map(|r| r.1)));
//! let out = b.collect(j);
//! let mut res = b.build().unwrap().run(&rt).unwrap().take(&out);
//! res.sort();
//! assert_eq!(res, vec![(1, None), (2, Some("deux")), (2, Some("two")), (3, None)]);
//! ```

use std::hash::Hash;

use super::join_core::JoinCore;
use super::Emitter;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

struct LeftJoin<L, R, K, FL, FR, C, O> {
    core: JoinCore<R, L, K>,
    key_l: FL,
    key_r: FR,
    combine: C,
    out: Emitter<O>,
}

impl<L, R, K, FL, FR, C, O> Operator for LeftJoin<L, R, K, FL, FR, C, O>
where
    L: Send + 'static,
    R: Send + 'static,
    K: Hash + Eq + Send + 'static,
    O: Send + 'static,
    FL: FnMut(&L) -> K + Send + 'static,
    FR: FnMut(&R) -> K + Send + 'static,
    C: FnMut(&L, Option<&R>) -> O + Send + 'static,
{
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<L>(), PortType::of::<R>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<O>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let built = self.core.build(io, &mut self.key_r);
        let combine = &mut self.combine;
        self.core.probe(
            io,
            &mut self.out,
            built,
            &mut self.key_l,
            |l, matches, out, io| match matches {
                Some(rs) if !rs.is_empty() => {
                    for r in rs {
                        out.push(io, combine(&l, Some(r)));
                    }
                }
                _ => out.push(io, combine(&l, None)),
            },
        )
    }
}

impl PlanBuilder {
    /// Left outer equi-join of `left` with `right` (hashed).
    pub fn left_join<L, R, K, FL, FR, C, O>(
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
        K: Hash + Eq + Send + 'static,
        O: Send + 'static,
        FL: FnMut(&L) -> K + Send + 'static,
        FR: FnMut(&R) -> K + Send + 'static,
        C: FnMut(&L, Option<&R>) -> O + Send + 'static,
    {
        let n = self.add_auto(
            "left_join",
            LeftJoin {
                core: JoinCore::new(1, 0),
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
