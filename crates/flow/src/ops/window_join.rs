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

use super::Emitter;
use crate::error::FlowError;
use crate::plan::{Operator, PlanBuilder, PortType, Status, Stream};
use crate::Io;

/// Window sizes, in tuples per key, of each side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    /// Left tuples kept per key.
    pub left: usize,
    /// Right tuples kept per key.
    pub right: usize,
}

struct WindowJoin<L, R, K, SL, SR, KL, KR, C, O> {
    w: Windows,
    left: VecDeque<L>,
    right: VecDeque<R>,
    lwin: HashMap<K, VecDeque<L>>,
    rwin: HashMap<K, VecDeque<R>>,
    seq: (SL, SR),
    key: (KL, KR),
    combine: C,
    out: Emitter<O>,
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

impl<L, R, K, SL, SR, KL, KR, C, O> Operator for WindowJoin<L, R, K, SL, SR, KL, KR, C, O>
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
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<L>(), PortType::of::<R>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<O>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        loop {
            if io.blocked() {
                return Ok(Status::Idle);
            }
            let l_end = io.recv_all::<L>(0, &mut self.left);
            let r_end = io.recv_all::<R>(1, &mut self.right);
            let mut progressed = false;
            while !io.blocked() {
                let take_left = match (self.left.front(), self.right.front()) {
                    (Some(l), Some(r)) => (self.seq.0)(l) <= (self.seq.1)(r),
                    (Some(_), None) if r_end => true,
                    (None, Some(_)) if l_end => false,
                    _ => break, // the empty side may still bring an earlier tuple
                };
                progressed = true;
                if take_left {
                    let l = self.left.pop_front().expect("has a head");
                    let k = (self.key.0)(&l);
                    if let Some(rs) = self.rwin.get(&k) {
                        for r in rs {
                            if let Some(o) = (self.combine)(&l, r) {
                                self.out.push(io, o);
                            }
                        }
                    }
                    slide(self.lwin.entry(k).or_default(), self.w.left, l);
                } else {
                    let r = self.right.pop_front().expect("has a head");
                    let k = (self.key.1)(&r);
                    if let Some(ls) = self.lwin.get(&k) {
                        for l in ls {
                            if let Some(o) = (self.combine)(l, &r) {
                                self.out.push(io, o);
                            }
                        }
                    }
                    slide(self.rwin.entry(k).or_default(), self.w.right, r);
                }
            }
            if self.left.is_empty() && self.right.is_empty() && l_end && r_end {
                self.out.flush(io);
                return Ok(Status::Done);
            }
            if !progressed {
                return Ok(Status::Idle);
            }
        }
    }
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
        let n = self.add_auto(
            "window_join",
            WindowJoin {
                w: windows,
                left: VecDeque::new(),
                right: VecDeque::new(),
                lwin: HashMap::new(),
                rwin: HashMap::new(),
                seq,
                key,
                combine,
                out: Emitter::new(0),
            },
        );
        self.feed(left, n, 0);
        self.feed(right, n, 1);
        self.out0(n)
    }
}
