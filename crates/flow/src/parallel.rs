//! Parallel forms built from serial operators (001 §2): each operator stays single-threaded,
//! parallelism comes from partitioning the data over several copies of it.
//!
//! - [`par_hash_join`](PlanBuilder::par_hash_join): partition both inputs by key → `dop` hash
//!   joins → union;
//! - [`par_sort`](PlanBuilder::par_sort): deal packets round robin → `dop` sorts → a binary tree
//!   of 2-way merges;
//! - [`par_group_by`](PlanBuilder::par_group_by): partition by key → `dop` aggregates → union.
//!
//! `dop: None` takes the builder's default (the runtime's PU count with
//! [`PlanBuilder::for_runtime`]). With a degree of 1 each form is the serial operator alone.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::for_runtime(&rt);
//! let s = b.source((0..1000u32).rev());
//! let sorted = b.par_sort(s, Some(4), |x: &u32| *x);
//! let out = b.collect(sorted);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), (0..1000).collect::<Vec<_>>());
//! ```

use std::hash::Hash;

use crate::plan::{PlanBuilder, Stream};

impl PlanBuilder {
    fn degree(&mut self, dop: Option<usize>) -> usize {
        match dop {
            Some(0) => {
                self.invalid("degree of parallelism must be at least 1".into());
                1
            }
            Some(d) => d,
            None => self.dop().max(1),
        }
    }

    /// A partitioned parallel inner hash join; see [`hash_join`](Self::hash_join).
    pub fn par_hash_join<B, P, K, FB, FP, C, O>(
        &mut self,
        build: Stream<B>,
        probe: Stream<P>,
        dop: Option<usize>,
        key_b: FB,
        key_p: FP,
        combine: C,
    ) -> Stream<O>
    where
        B: Send + 'static,
        P: Send + 'static,
        K: Hash + Eq + Send + 'static,
        O: Send + 'static,
        FB: FnMut(&B) -> K + Clone + Send + 'static,
        FP: FnMut(&P) -> K + Clone + Send + 'static,
        C: FnMut(&B, &P) -> O + Clone + Send + 'static,
    {
        let d = self.degree(dop);
        if d == 1 {
            return self.hash_join(build, probe, key_b, key_p, combine);
        }
        let bs = self.partition(build, d, key_b.clone());
        let ps = self.partition(probe, d, key_p.clone());
        let joins = bs
            .into_iter()
            .zip(ps)
            .map(|(b, p)| self.hash_join(b, p, key_b.clone(), key_p.clone(), combine.clone()))
            .collect();
        self.union(joins)
    }

    /// A parallel sort; see [`sort_by_key`](Self::sort_by_key). Stable within a partition
    /// only: equal keys may come out in any order.
    pub fn par_sort<T, K, F>(&mut self, input: Stream<T>, dop: Option<usize>, key: F) -> Stream<T>
    where
        T: Send + 'static,
        K: Ord,
        F: FnMut(&T) -> K + Clone + Send + 'static,
    {
        let d = self.degree(dop);
        if d == 1 {
            return self.sort_by_key(input, key);
        }
        let parts = self.partition_round_robin(input, d);
        let mut level: Vec<Stream<T>> = parts
            .into_iter()
            .map(|p| self.sort_by_key(p, key.clone()))
            .collect();
        while level.len() > 1 {
            let mut next = Vec::with_capacity(level.len().div_ceil(2));
            let mut it = level.into_iter();
            while let Some(a) = it.next() {
                match it.next() {
                    Some(b) => next.push(self.merge_sorted(vec![a, b], key.clone())),
                    None => next.push(a),
                }
            }
            level = next;
        }
        level.pop().expect("at least one partition")
    }

    /// A partitioned parallel hash aggregate; see [`group_by`](Self::group_by).
    pub fn par_group_by<T, K, A, FK, FA>(
        &mut self,
        input: Stream<T>,
        dop: Option<usize>,
        key: FK,
        init: A,
        fold: FA,
    ) -> Stream<(K, A)>
    where
        T: Send + 'static,
        K: Hash + Eq + Send + 'static,
        A: Clone + Send + 'static,
        FK: FnMut(&T) -> K + Clone + Send + 'static,
        FA: FnMut(&mut A, T) + Clone + Send + 'static,
    {
        let d = self.degree(dop);
        if d == 1 {
            return self.group_by(input, key, init, fold);
        }
        let parts = self.partition(input, d, key.clone());
        let aggs = parts
            .into_iter()
            .map(|p| self.group_by(p, key.clone(), init.clone(), fold.clone()))
            .collect();
        self.union(aggs)
    }
}
