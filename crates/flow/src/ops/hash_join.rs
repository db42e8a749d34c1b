//! Hash join (inner): builds a hash table from input 0, then streams input 1 through it;
//! `combine(&build, &probe)` for every matching pair.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let people = b.source(vec![(1, "ann"), (2, "bob")]);
//! let orders = b.source(vec![(2, 30), (1, 10), (3, 99), (2, 5)]);
//! let j = b.hash_join(people, orders, |p: &(i32, &str)| p.0, |o: &(i32, i32)| o.0,
//!                     |p, o| (p.1, o.1));
//! let out = b.collect(j);
//! let mut res = b.build().unwrap().run(&rt).unwrap().take(&out);
//! res.sort();
//! assert_eq!(res, vec![("ann", 10), ("bob", 5), ("bob", 30)]);
//! ```

use std::hash::Hash;

use super::join_core::JoinCore;
use super::Emitter;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

struct HashJoin<B, P, K, FB, FP, C, O> {
    core: JoinCore<B, P, K>,
    key_b: FB,
    key_p: FP,
    combine: C,
    out: Emitter<O>,
}

impl<B, P, K, FB, FP, C, O> Operator for HashJoin<B, P, K, FB, FP, C, O>
where
    B: Send + 'static,
    P: Send + 'static,
    K: Hash + Eq + Send + 'static,
    O: Send + 'static,
    FB: FnMut(&B) -> K + Send + 'static,
    FP: FnMut(&P) -> K + Send + 'static,
    C: FnMut(&B, &P) -> O + Send + 'static,
{
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<B>(), PortType::of::<P>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<O>()]
    }

    fn state_bytes(&self) -> usize {
        self.core.state_bytes()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let built = self.core.build(io, &mut self.key_b);
        let combine = &mut self.combine;
        self.core.probe(
            io,
            &mut self.out,
            built,
            &mut self.key_p,
            |p, matches, out, io| {
                for b in matches.into_iter().flatten() {
                    out.push(io, combine(b, &p));
                }
            },
        )
    }
}

impl PlanBuilder {
    /// Inner equi-join: a table of `build` by `key_b`, probed by every tuple of `probe`.
    pub fn hash_join<B, P, K, FB, FP, C, O>(
        &mut self,
        build: Stream<B>,
        probe: Stream<P>,
        key_b: FB,
        key_p: FP,
        combine: C,
    ) -> Stream<O>
    where
        B: Send + 'static,
        P: Send + 'static,
        K: Hash + Eq + Send + 'static,
        O: Send + 'static,
        FB: FnMut(&B) -> K + Send + 'static,
        FP: FnMut(&P) -> K + Send + 'static,
        C: FnMut(&B, &P) -> O + Send + 'static,
    {
        let n = self.add_auto(
            "hash_join",
            HashJoin {
                core: JoinCore::new(0, 1),
                key_b,
                key_p,
                combine,
                out: Emitter::new(0),
            },
        );
        self.feed(build, n, 0);
        self.feed(probe, n, 1);
        self.out0(n)
    }
}
