//! `bench queues --orders`: the same product on plain threads, without the runtime, in the
//! orders in which the policies hand out the element tasks.
//!
//! With one request and deferred spawns, a policy decides little besides the *order* in which
//! its workers get the elements: LAS rule 3 (LAS §4.2) has every worker of the group take the
//! youngest task of the one request, one stream taken from its young end; central, NLS's shared
//! deferred list and FIFO+RR take the oldest; under random stealing the root's worker takes its
//! deque's youngest task and the thieves its oldest, two streams from opposite ends. Timing
//! those orders with no queue at all (each thread claims its next element index from an atomic
//! word) says how much of a policy's time is its order and how much its queues: a policy behind
//! another by the same factor as its order is behind the other's order loses nothing in its
//! own code. These contenders run in the same interleaved rounds as the policies.
//!
//! What they leave out: under the runtime the root spawns the elements while the other workers
//! already take them, so the orders hold only once spawning is done (most of the run at the
//! large sizes, see docs/results/queues.md).

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use crossbeam_utils::CachePadded;
use nearflow_policy::{End, Place, Policy, QueueRef, Step, Take, TaskKind};

use nearflow_apps::matmul::Problem;

/// An order in which threads claim the element tasks `0..n²` (row-major, so the root's spawn
/// order: a higher index is a younger task).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimOrder {
    /// Every thread claims the youngest unclaimed element (LAS rule 3 with one request).
    YoungestFirst,
    /// Every thread claims the oldest (central, NLS's deferred list, FIFO+RR).
    OldestFirst,
    /// Thread 0 claims the youngest, the others the oldest (random stealing once the root has
    /// spawned: the owner takes its deque's young end, the thieves the old end).
    BothEnds,
    /// Each thread walks its own contiguous block of rows from the oldest (a static partition).
    Blocks,
}

impl ClaimOrder {
    pub const ALL: [ClaimOrder; 4] = [
        ClaimOrder::YoungestFirst,
        ClaimOrder::OldestFirst,
        ClaimOrder::BothEnds,
        ClaimOrder::Blocks,
    ];

    /// The contender's name in the tables: `order:` and the order's name.
    pub fn name(self) -> &'static str {
        match self {
            ClaimOrder::YoungestFirst => "order:youngest-first",
            ClaimOrder::OldestFirst => "order:oldest-first",
            ClaimOrder::BothEnds => "order:both-ends",
            ClaimOrder::Blocks => "order:blocks",
        }
    }

    /// The order in which `policy`'s workers get the element tasks when one worker spawns them
    /// all as `kind` tasks of one request, read from the policy itself rather than from a list:
    /// the queue a spawn of that kind goes to, and the end that each worker's first probe of
    /// that queue takes (a take by request reads, with one request, as its end). `None` where
    /// that is none of the orders: a queue drawn per task (per-thread's round robin, Bobox's
    /// request nodes), a worker that never probes the queue, a mix the orders do not have (LAS
    /// on several core groups: the spawner's group takes young, the other groups old by rule 4),
    /// or an order that depends on which worker spawns.
    pub fn of_policy(policy: &Policy, kind: TaskKind) -> Option<ClaimOrder> {
        let workers = policy.workers();
        let mut found = None;
        for spawner in 0..workers {
            let Place::Queue(q) = policy.place(kind, spawner) else {
                return None;
            };
            let young: Vec<bool> = (0..workers)
                .map(|w| takes_young(policy.search(w), q))
                .collect::<Option<_>>()?;
            let order = if young.iter().all(|&y| y) {
                ClaimOrder::YoungestFirst
            } else if young.iter().all(|&y| !y) {
                ClaimOrder::OldestFirst
            } else if young.iter().enumerate().all(|(w, &y)| y == (w == spawner)) {
                ClaimOrder::BothEnds
            } else {
                return None;
            };
            if found.is_some_and(|f| f != order) {
                return None;
            }
            found = Some(order);
        }
        found
    }
}

/// Whether the first probe of `q` in `search` takes its youngest task (`None`: no probe of it).
fn takes_young(search: &[Step], q: QueueRef) -> Option<bool> {
    let p = search
        .iter()
        .flat_map(Step::probes)
        .find(|p| p.queue == q)?;
    Some(match p.take {
        Take::Plain(End::Youngest) | Take::OldestRequestYoungest => true,
        Take::Plain(End::Oldest)
        | Take::SecondOldestRequestOldest
        | Take::LastRequestOldest
        | Take::OldestRequestOldest => false,
    })
}

impl FromStr for ClaimOrder {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<ClaimOrder> {
        let s = s.trim();
        ClaimOrder::ALL
            .into_iter()
            .find(|o| o.name() == s || o.name().strip_prefix("order:") == Some(s))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown order `{s}` (known: youngest-first, oldest-first, both-ends, blocks)"
                )
            })
    }
}

/// The unclaimed indices `lo..hi` of one stream in one word (`hi` in the upper half), so that
/// a claim from either end is one compare-and-swap that cannot cross the other end.
struct Span(CachePadded<AtomicU64>);

impl Span {
    fn new(lo: u32, hi: u32) -> Span {
        Span(CachePadded::new(AtomicU64::new(pack(lo, hi))))
    }

    /// Claims the lowest (`young == false`) or highest unclaimed index.
    fn claim(&self, young: bool) -> Option<u32> {
        // Relaxed: the word orders nothing but itself; the product's stores are published by the
        // threads' join.
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            let (lo, hi) = unpack(cur);
            if lo >= hi {
                return None;
            }
            let (next, got) = if young {
                (pack(lo, hi - 1), hi - 1)
            } else {
                (pack(lo + 1, hi), lo)
            };
            match self
                .0
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(got),
                Err(now) => cur = now,
            }
        }
    }
}

fn pack(lo: u32, hi: u32) -> u64 {
    (u64::from(hi) << 32) | u64::from(lo)
}

fn unpack(w: u64) -> (u32, u32) {
    (w as u32, (w >> 32) as u32)
}

/// The product on `threads` plain threads claiming elements in `order`; returns the time and the
/// product.
pub(super) fn multiply(
    p: &Problem,
    order: ClaimOrder,
    threads: usize,
) -> Result<(Duration, Vec<f64>)> {
    let n = p.n;
    let Ok(total) = u32::try_from(n * n) else {
        bail!("n = {n}: too many elements for an order run");
    };
    let threads = threads.max(1);
    let c: Vec<AtomicU64> = (0..n * n).map(|_| AtomicU64::new(0)).collect();
    // The streams and, per thread, which stream it claims from and at which end.
    let (spans, plan): (Vec<Span>, Vec<(usize, bool)>) = match order {
        ClaimOrder::YoungestFirst => (vec![Span::new(0, total)], vec![(0, true); threads]),
        ClaimOrder::OldestFirst => (vec![Span::new(0, total)], vec![(0, false); threads]),
        ClaimOrder::BothEnds => (
            vec![Span::new(0, total)],
            (0..threads).map(|t| (0, t == 0)).collect(),
        ),
        ClaimOrder::Blocks => {
            let rows = |t: usize| (n * t / threads * n) as u32;
            (
                (0..threads)
                    .map(|t| Span::new(rows(t), rows(t + 1)))
                    .collect(),
                (0..threads).map(|t| (t, false)).collect(),
            )
        }
    };
    let start = Instant::now();
    std::thread::scope(|s| {
        for &(stream, young) in &plan {
            let (spans, c) = (&spans, &c);
            s.spawn(move || {
                while let Some(k) = spans[stream].claim(young) {
                    let k = k as usize;
                    // Relaxed: each element is written by one thread; the scope's join orders
                    // every write before the product is read.
                    c[k].store(p.element(k / n, k % n).to_bits(), Ordering::Relaxed);
                }
            });
        }
    });
    let d = start.elapsed();
    Ok((
        d,
        c.into_iter()
            .map(|x| f64::from_bits(x.into_inner()))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The orders the policies are documented with (the module's doc and `--orders`' help),
    /// read from the policies themselves.
    #[test]
    fn each_policy_gets_the_order_its_rules_give() {
        use nearflow_policy::PolicyKind;
        let host_like = nearflow_topo::from_synthetic("pack:1 l3:1 l2:2 core:1 pu:1").unwrap();
        let order = |k: PolicyKind, m: &nearflow_topo::Machine, kind: TaskKind| {
            ClaimOrder::of_policy(&Policy::new(k, m), kind)
        };
        let d = TaskKind::Deferred;
        assert_eq!(
            order(PolicyKind::Las, &host_like, d),
            Some(ClaimOrder::YoungestFirst)
        );
        for k in [PolicyKind::Central, PolicyKind::Nls, PolicyKind::FifoRr] {
            assert_eq!(
                order(k, &host_like, d),
                Some(ClaimOrder::OldestFirst),
                "{k}"
            );
        }
        assert_eq!(
            order(PolicyKind::RandomSteal, &host_like, d),
            Some(ClaimOrder::BothEnds)
        );
        // Dealt round robin to per-thread queues, or to a request's nodes in turn (Bobox):
        // none of the orders.
        assert_eq!(order(PolicyKind::PerThread, &host_like, d), None);
        assert_eq!(order(PolicyKind::Bobox2011, &host_like, d), None);
        // Immediate spawns: LAS's spawner takes its own queue's youngest, its group mate the
        // oldest (rule 2).
        assert_eq!(
            order(PolicyKind::Las, &host_like, TaskKind::Immediate),
            Some(ClaimOrder::BothEnds)
        );
        // LAS on two core groups: the other group takes the oldest by rule 4, a mix.
        let two_groups = nearflow_topo::from_synthetic("pack:2 l3:1 core:2 pu:1").unwrap();
        assert_eq!(order(PolicyKind::Las, &two_groups, d), None);
    }

    #[test]
    fn a_span_hands_out_every_index_once_from_both_ends() {
        let s = Span::new(3, 9);
        let got: Vec<u32> = [true, false, true, false, false, true, true, false]
            .into_iter()
            .filter_map(|young| s.claim(young))
            .collect();
        assert_eq!(got, [8, 3, 7, 4, 5, 6]);
        assert_eq!(s.claim(false), None);
        assert_eq!(Span::new(5, 5).claim(true), None);
    }

    #[test]
    fn every_order_computes_the_product_with_any_thread_count() {
        let p = Problem::new(23, 4);
        let reference = p.sequential();
        for order in ClaimOrder::ALL {
            for threads in [1, 2, 3, 7, 40] {
                let (_, c) = multiply(&p, order, threads).unwrap();
                assert_eq!(c, reference, "{order:?}, {threads} threads");
            }
        }
    }

    #[test]
    fn orders_parse_with_or_without_the_prefix() {
        assert_eq!(
            "youngest-first".parse::<ClaimOrder>().unwrap(),
            ClaimOrder::YoungestFirst
        );
        assert_eq!(
            "order:blocks".parse::<ClaimOrder>().unwrap(),
            ClaimOrder::Blocks
        );
        let e = "sideways".parse::<ClaimOrder>().unwrap_err().to_string();
        assert!(e.contains("unknown order `sideways`"), "{e}");
    }
}
