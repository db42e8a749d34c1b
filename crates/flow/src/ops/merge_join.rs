//! Merge join over sorted inputs: both inputs sorted by the join key; for each key present on
//! both sides, every pair of its tuples. Output is sorted by key.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! let l = b.source(vec![(1, 'a'), (2, 'b'), (2, 'c'), (5, 'd')]);
//! let r = b.source(vec![(2, 20), (3, 30), (5, 50), (5, 51)]);
//! let j = b.merge_join(l, r, |x: &(i32, char)| x.0, |y: &(i32, i32)| y.0, |x, y| (x.1, y.1));
//! let out = b.collect(j);
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out),
//!            vec![('b', 20), ('c', 20), ('d', 50), ('d', 51)]);
//! ```

use std::cmp::Ordering;
use std::collections::VecDeque;

use crate::plan::{PlanBuilder, Stream};

/// Length of the run of equal keys at the front, and whether it is known to be complete.
fn group<T, K: Ord>(q: &VecDeque<T>, key: &mut impl FnMut(&T) -> K, ended: bool) -> (usize, bool) {
    let Some(first) = q.front() else {
        return (0, ended);
    };
    let k = key(first);
    let len = q.iter().take_while(|x| key(x) == k).count();
    (len, len < q.len() || ended)
}

impl PlanBuilder {
    /// Inner join of two streams sorted by their keys.
    pub fn merge_join<L, R, K, FL, FR, C, O>(
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
        K: Ord,
        O: Send + 'static,
        FL: FnMut(&L) -> K + Send + 'static,
        FR: FnMut(&R) -> K + Send + 'static,
        C: FnMut(&L, &R) -> O + Send + 'static,
    {
        let (mut key_l, mut key_r, mut combine) = (key_l, key_r, combine);
        self.binary("merge_join", left, right, move |inp, out| {
            let (Some(l), Some(r)) = (inp.left.front(), inp.right.front()) else {
                // One side is empty: if it has ended, the other side's tuples match nothing.
                let mut dropped = false;
                if inp.left.is_empty() && inp.left_ended {
                    dropped |= !inp.right.is_empty();
                    inp.right.clear();
                }
                if inp.right.is_empty() && inp.right_ended {
                    dropped |= !inp.left.is_empty();
                    inp.left.clear();
                }
                return dropped;
            };
            match key_l(l).cmp(&key_r(r)) {
                Ordering::Less => {
                    inp.left.pop_front();
                }
                Ordering::Greater => {
                    inp.right.pop_front();
                }
                Ordering::Equal => {
                    let (ln, l_done) = group(inp.left, &mut key_l, inp.left_ended);
                    let (rn, r_done) = group(inp.right, &mut key_r, inp.right_ended);
                    if !(l_done && r_done) {
                        return false; // the group may go on in packets not yet here
                    }
                    for x in inp.left.drain(..ln) {
                        for y in inp.right.iter().take(rn) {
                            out.push(combine(&x, y));
                        }
                    }
                    inp.right.drain(..rn);
                }
            }
            true
        })
    }
}
