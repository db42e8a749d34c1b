//! Sliding-window join of two streams ordered by a sequence number: tuples are taken from both
//! inputs in sequence order (ties: left first); each joins the other side's window for its key
//! (the last `windows.right` right tuples, or the last `windows.left` left ones), then enters its
//! own side's window. A window of 0 keeps nothing: that side only probes. `combine` may return
//! `None` to emit nothing for a pair.
//!
//! Taking both inputs in sequence order makes the result the same as a sequential pass over
//! the merged stream, whatever the scheduling.
//!
//! ```
//! use nearflow_flow::{ops::example_runtime, ops::window_join::Windows, PlanBuilder};
//! let rt = example_runtime();
//! let mut b = PlanBuilder::new();
//! // (seq, key, value): prices on the left, orders on the right.
//! let prices = b.source(vec![(0u64, 'x', 10), (2, 'x', 12), (5, 'y', 7)]);
//! let orders = b.source(vec![(1u64, 'x', 1), (3, 'x', 2), (4, 'y', 3), (6, 'y', 4)]);
//! let j = b.window_join(prices, orders, Windows { left: 1, right: 0 },
//!     (|p: &(u64, char, i32)| p.0, |o: &(u64, char, i32)| o.0),
//!     (|p: &(u64, char, i32)| p.1, |o: &(u64, char, i32)| o.1),
//!     |p, o| Some((o.2, p.2)));
//! let out = b.collect(j);
//! // Each order sees the latest price of its key before it; order 3 ('y' at seq 4) none yet.
//! assert_eq!(b.build().unwrap().run(&rt).unwrap().take(&out), vec![(1, 10), (2, 12), (4, 7)]);
//! ```

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use crate::plan::{PlanBuilder, Stream};

/// Window sizes, in tuples per key, of each side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    /// Left tuples kept per key.
    pub left: usize,
    /// Right tuples kept per key.
    pub right: usize,
}

fn slide<T>(w: &mut VecDeque<T>, cap: usize, t: T) {
    if cap == 0 {
        return;
    }
    if w.len() == cap {
        w.pop_front();
    }
    w.push_back(t);
}

impl PlanBuilder {
    /// Joins `left` and `right` over per-key sliding windows, in sequence order; see the
    /// module docs. `seq` and `key` give each side's sequence number and join key.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    pub fn window_join<L, R, K, SL, SR, KL, KR, C, O>(
        &mut self,
        left: Stream<L>,
        right: Stream<R>,
        windows: Windows,
        seq: (SL, SR),
        key: (KL, KR),
        combine: C,
    ) -> Stream<O>
    where
        L: Send + 'static,
        R: Send + 'static,
        K: Hash + Eq + Send + 'static,
        O: Send + 'static,
        SL: FnMut(&L) -> u64 + Send + 'static,
        SR: FnMut(&R) -> u64 + Send + 'static,
        KL: FnMut(&L) -> K + Send + 'static,
        KR: FnMut(&R) -> K + Send + 'static,
        C: FnMut(&L, &R) -> Option<O> + Send + 'static,
    {
        let w = windows;
        let (mut seq_l, mut seq_r) = seq;
        let (mut key_l, mut key_r) = key;
        let mut combine = combine;
        let mut lwin: HashMap<K, VecDeque<L>> = HashMap::new();
        let mut rwin: HashMap<K, VecDeque<R>> = HashMap::new();
        self.binary("window_join", left, right, move |inp, out| {
            let take_left = match (inp.left.front(), inp.right.front()) {
                (Some(l), Some(r)) => seq_l(l) <= seq_r(r),
                (Some(_), None) if inp.right_ended => true,
                (None, Some(_)) if inp.left_ended => false,
                _ => return false, // the empty side may still bring an earlier tuple
            };
            if take_left {
                let l = inp.left.pop_front().expect("has a head");
                let k = key_l(&l);
                if let Some(rs) = rwin.get(&k) {
                    for r in rs {
                        if let Some(o) = combine(&l, r) {
                            out.push(o);
                        }
                    }
                }
                slide(lwin.entry(k).or_default(), w.left, l);
            } else {
                let r = inp.right.pop_front().expect("has a head");
                let k = key_r(&r);
                if let Some(ls) = lwin.get(&k) {
                    for l in ls {
                        if let Some(o) = combine(l, &r) {
                            out.push(o);
                        }
                    }
                }
                slide(rwin.entry(k).or_default(), w.right, r);
            }
            true
        })
    }
}
