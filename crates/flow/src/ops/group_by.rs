//! Hash group-by aggregate: folds the tuples of each key into an accumulator; emits
//! `(key, accumulator)` per key once the input has ended (in no particular order).
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let s = b.source(vec![("a", 1), ("b", 10), ("a", 2)]);
//! let sums = b.group_by(s, |t: &(&str, i32)| t.0, 0, |acc: &mut i32, t| *acc += t.1);
//! let out = b.collect(sums);
//! let mut res = b.build().unwrap().run(&rt).unwrap().take(&out);
//! res.sort();
//! assert_eq!(res, vec![("a", 3), ("b", 10)]);
//! ```

use std::collections::HashMap;
use std::hash::Hash;

use super::{drain_vec, Emitter, Flow, Unary, UnaryOp};
use crate::error::FlowError;
use crate::plan::{PlanBuilder, Stream};
use crate::{Io, Packet};

struct GroupBy<K, A, FK, FA> {
    key: FK,
    init: A,
    fold: FA,
    groups: HashMap<K, A>,
    out: Option<std::vec::IntoIter<(K, A)>>,
}

impl<T, K, A, FK, FA> Unary<T, (K, A)> for GroupBy<K, A, FK, FA>
where
    T: Send + 'static,
    K: Hash + Eq + Send + 'static,
    A: Clone + Send + 'static,
    FK: FnMut(&T) -> K + Send + 'static,
    FA: FnMut(&mut A, T) + Send + 'static,
{
    fn packet(
        &mut self,
        p: Packet<T>,
        _out: &mut Emitter<(K, A)>,
        _io: &mut Io<'_>,
    ) -> Result<Flow, FlowError> {
        for x in p {
            let k = (self.key)(&x);
            let acc = self.groups.entry(k).or_insert_with(|| self.init.clone());
            (self.fold)(acc, x);
        }
        Ok(Flow::Continue)
    }

    fn state_bytes(&self) -> usize {
        let groups = self.groups.len() + self.out.as_ref().map_or(0, |o| o.len());
        groups * std::mem::size_of::<(K, A)>()
    }

    fn finish(&mut self, out: &mut Emitter<(K, A)>, io: &mut Io<'_>) -> Result<bool, FlowError> {
        if self.out.is_none() {
            let groups: Vec<(K, A)> = std::mem::take(&mut self.groups).into_iter().collect();
            self.out = Some(groups.into_iter());
        }
        Ok(drain_vec(self.out.as_mut().expect("set above"), out, io))
    }
}

impl PlanBuilder {
    /// Groups by `key`; each group's accumulator starts as `init` and takes every tuple of the
    /// group through `fold`.
    pub fn group_by<T, K, A, FK, FA>(
        &mut self,
        input: Stream<T>,
        key: FK,
        init: A,
        fold: FA,
    ) -> Stream<(K, A)>
    where
        T: Send + 'static,
        K: Hash + Eq + Send + 'static,
        A: Clone + Send + 'static,
        FK: FnMut(&T) -> K + Send + 'static,
        FA: FnMut(&mut A, T) + Send + 'static,
    {
        let n = self.add_auto(
            "group_by",
            UnaryOp::<T, (K, A), _>::new(GroupBy {
                key,
                init,
                fold,
                groups: HashMap::new(),
                out: None,
            }),
        );
        self.feed(input, n, 0);
        self.out0(n)
    }
}
