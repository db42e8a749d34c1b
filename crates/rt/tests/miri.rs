//! A small runtime workload meant for Miri (`scripts/miri.sh`):
//! it checks the runtime's `unsafe` (the `RequestRef` lifetime protocol in `request.rs`) and its
//! data races. The machine is built by hand, since Miri cannot call into hwloc; sizes shrink under
//! Miri, as crossbeam's tests do. It also runs as a plain test.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nearflow_policy::PolicyKind;
use nearflow_rt::{RequestError, Runtime, TaskCx};
use nearflow_topo::{Cache, Machine, Pu, Source};

/// Two nodes, two groups of two PUs each (an L2 per pair), built without hwloc.
fn machine() -> Machine {
    let pus = (0..4)
        .map(|i| Pu {
            index: i,
            os_index: i,
            core: i,
            package: i / 2,
            node: i / 2,
        })
        .collect();
    let caches = vec![
        Cache {
            level: 2,
            size: Some(1 << 18),
            pus: vec![0, 1],
        },
        Cache {
            level: 2,
            size: Some(1 << 18),
            pus: vec![2, 3],
        },
    ];
    let numa = Some(vec![vec![10, 20], vec![20, 10]]);
    Machine::new(
        Source::Synthetic("miri".into()),
        pus,
        caches,
        2,
        numa,
        vec![],
    )
    .unwrap()
}

fn tree(cx: &TaskCx<'_>, depth: u32, count: Arc<AtomicU64>) {
    count.fetch_add(1, Ordering::Relaxed);
    if depth > 0 {
        let c = count.clone();
        cx.spawn_immediate(move |cx| tree(cx, depth - 1, c));
        cx.spawn_deferred(move |cx| tree(cx, depth - 1, count));
    }
}

#[test]
fn requests_complete_and_release_their_state() {
    let depth = if cfg!(miri) { 3 } else { 8 };
    let requests = if cfg!(miri) { 3 } else { 16 };
    for policy in [PolicyKind::Las, PolicyKind::Bobox2011, PolicyKind::FifoRr] {
        let rt = Runtime::builder(machine()).policy(policy).build().unwrap();
        let count = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..requests)
            .map(|i| {
                let c = count.clone();
                rt.submit(move |cx| {
                    tree(cx, depth, c);
                    i
                })
            })
            .collect();
        let bad = rt.submit(|cx| {
            cx.spawn_immediate(|_| panic!("expected failure"));
        });
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(h.wait().unwrap(), i);
        }
        assert!(matches!(bad.wait(), Err(RequestError::Panicked { .. })));
        let per_request = (1u64 << (depth + 1)) - 1;
        assert_eq!(
            count.load(Ordering::Relaxed),
            per_request * requests as u64,
            "{policy}"
        );
        drop(rt);
        // Every request's state was freed: the count its tasks held was given back.
        assert_eq!(
            nearflow_rt::live_requests(),
            0,
            "{policy}: request state leaked"
        );
    }
}

fn fib(n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    let (a, b) = nearflow_rt::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

/// `join` and `scope` (`src/join.rs`): the stack task popped back or stolen, the latch, scope
/// spawns that write to borrowed slots; Miri checks the borrows of the caller's stack and the
/// races on the jobs' results.
#[test]
fn join_and_scope() {
    let n = if cfg!(miri) { 7 } else { 18 };
    for policy in [PolicyKind::Las, PolicyKind::Central] {
        let rt = Runtime::builder(machine()).policy(policy).build().unwrap();
        assert_eq!(rt.install(|| fib(n)), if cfg!(miri) { 13 } else { 2584 });
        let mut slots = vec![0u32; 6];
        rt.scope(|s| {
            for (i, slot) in slots.iter_mut().enumerate() {
                s.spawn(move |_| *slot = i as u32 * 2);
            }
        });
        assert_eq!(slots, [0, 2, 4, 6, 8, 10]);
    }
}

/// A task that waits for another request, and helps meanwhile (`RequestHandle::wait` on a
/// worker).
#[test]
fn a_wait_inside_a_task_helps() {
    for policy in [PolicyKind::Las, PolicyKind::Central] {
        let rt: &'static Runtime = Box::leak(Box::new(
            Runtime::builder(machine()).policy(policy).build().unwrap(),
        ));
        let outer = rt.submit(move |_| rt.submit(move |_| fib(5)).wait().unwrap());
        assert_eq!(outer.wait().unwrap(), 5, "{policy}");
    }
}
