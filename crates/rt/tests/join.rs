//! `join`, `scope`, `install` and the wait that helps (`src/join.rs`), under every policy:
//! results, borrowing, panics, every closure run once, nested waits that never deadlock.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use nearflow_policy::PolicyKind;
use nearflow_rt::{join, scope, RequestError, Runtime};
use nearflow_topo::{from_synthetic, presets};

fn rt(machine: nearflow_topo::Machine, policy: PolicyKind) -> Runtime {
    Runtime::builder(machine).policy(policy).build().unwrap()
}

/// Two workers, as on the project's machines (and the hang).
fn two(policy: PolicyKind) -> Runtime {
    rt(from_synthetic("core:2 pu:1").unwrap(), policy)
}

/// Runs `f` on a thread of its own and fails, naming `what`, if it has not finished in `secs`
/// (a hang becomes a failure instead of a test that never ends).
fn within<R: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what}: not finished after {secs} s (hung)"),
    }
}

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = join(|| fib(n - 1), || fib(n - 2));
    a + b
}

#[test]
fn join_computes_and_borrows_from_the_stack_under_every_policy() {
    for policy in PolicyKind::ALL {
        let rt = rt(presets::build("e5310-smp").unwrap(), policy);
        let data: Vec<u64> = (0..10_000).collect();
        let (l, r) = data.split_at(3_000);
        let (a, b) = rt.join(|| l.iter().sum::<u64>(), || r.iter().sum::<u64>());
        assert_eq!(a + b, 49_995_000, "{policy}");
        assert_eq!(rt.install(|| fib(18)), 2584, "{policy}");
        // Mutable borrows on both sides.
        let mut v = vec![1u64; 1000];
        let (x, y) = v.split_at_mut(500);
        rt.join(
            || x.iter_mut().for_each(|e| *e += 1),
            || y.iter_mut().for_each(|e| *e *= 3),
        );
        assert_eq!(v[..500], [2; 500][..], "{policy}");
        assert_eq!(v[500..], [3; 500][..], "{policy}");
    }
}

#[test]
fn join_and_scope_work_outside_any_runtime() {
    // The global runtime.
    assert_eq!(fib(15), 610);
    let mut hits = [0u8; 8];
    scope(|s| {
        for h in hits.iter_mut() {
            s.spawn(move |_| *h += 1);
        }
    });
    assert_eq!(hits, [1; 8]);
    assert!(nearflow_rt::current_num_threads() >= 1);
    assert_eq!(nearflow_rt::current_thread_index(), None);
}

#[test]
fn a_panic_on_either_side_propagates_after_both_finish() {
    for policy in PolicyKind::ALL {
        let rt = two(policy);
        let b_done = AtomicBool::new(false);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.join(
                || panic!("left side"),
                || {
                    std::thread::sleep(Duration::from_millis(20));
                    b_done.store(true, Ordering::SeqCst);
                },
            )
        }));
        let msg = r.expect_err("the panic comes back");
        assert_eq!(nearflow_rt::panic_message(&*msg), "left side", "{policy}");
        assert!(b_done.load(Ordering::SeqCst), "{policy}: b finished first");
        let a_done = AtomicBool::new(false);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.join(
                || {
                    std::thread::sleep(Duration::from_millis(5));
                    a_done.store(true, Ordering::SeqCst)
                },
                || panic!("right side"),
            )
        }));
        let msg = r.expect_err("the panic comes back");
        assert_eq!(nearflow_rt::panic_message(&*msg), "right side", "{policy}");
        assert!(a_done.load(Ordering::SeqCst), "{policy}");
        // The runtime is still whole.
        assert_eq!(rt.install(|| fib(10)), 55, "{policy}");
    }
}

#[test]
fn scope_waits_for_every_spawn_and_counts_each_once() {
    for policy in PolicyKind::ALL {
        let rt = rt(presets::build("e7-4820").unwrap(), policy);
        let count = AtomicU64::new(0);
        let mut slots = vec![0u32; 64];
        rt.scope(|s| {
            for (i, slot) in slots.iter_mut().enumerate() {
                let count = &count;
                if i % 3 == 0 {
                    s.spawn_deferred(move |s| {
                        *slot = i as u32;
                        // Nested spawns into the same scope.
                        for _ in 0..4 {
                            s.spawn(move |_| {
                                count.fetch_add(1, Ordering::Relaxed);
                            });
                        }
                    });
                } else {
                    s.spawn(move |_| *slot = i as u32);
                }
            }
        });
        assert_eq!(count.load(Ordering::Relaxed), 22 * 4, "{policy}");
        assert!(
            slots.iter().enumerate().all(|(i, &v)| v == i as u32),
            "{policy}"
        );
    }
}

#[test]
fn scope_spawns_at_a_home_and_from_other_threads() {
    for policy in PolicyKind::ALL {
        let rt = rt(presets::build("e7-4820").unwrap(), policy);
        let hits = AtomicUsize::new(0);
        rt.scope(|s| {
            for node in 0..4 {
                let home = rt.home_on_node(node).unwrap();
                let hits = &hits;
                s.spawn_at(home, move |_| {
                    hits.fetch_add(1, Ordering::Relaxed);
                });
            }
            // A spawn from a thread that is no worker goes into the scope's request.
            std::thread::scope(|t| {
                t.spawn(|| {
                    for _ in 0..10 {
                        s.spawn(|_| {
                            hits.fetch_add(1, Ordering::Relaxed);
                        });
                    }
                });
            });
        });
        assert_eq!(hits.load(Ordering::Relaxed), 14, "{policy}");
    }
}

#[test]
fn a_panicking_spawn_propagates_after_the_others() {
    for policy in PolicyKind::ALL {
        let rt = two(policy);
        let done = AtomicUsize::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.scope(|s| {
                s.spawn(|_| panic!("spawn 0"));
                for _ in 0..20 {
                    s.spawn(|_| {
                        std::thread::sleep(Duration::from_millis(1));
                        done.fetch_add(1, Ordering::SeqCst);
                    });
                }
            })
        }));
        let msg = r.expect_err("the panic comes back");
        assert_eq!(nearflow_rt::panic_message(&*msg), "spawn 0", "{policy}");
        assert_eq!(done.load(Ordering::SeqCst), 20, "{policy}");
    }
}

#[test]
fn every_closure_runs_even_when_the_request_is_cancelled() {
    // A task cancels its request while joins and scope spawns of it are queued: the runtime
    // drops their tasks unrun, and the waiters run the closures themselves.
    for policy in PolicyKind::ALL {
        let rt = two(policy);
        let ran = std::sync::Arc::new(AtomicUsize::new(0));
        let r2 = ran.clone();
        let h = rt.submit(move |cx| {
            cx.cancel_request();
            let ran = &r2;
            scope(|s| {
                for _ in 0..16 {
                    s.spawn(move |_| {
                        let (a, b) = join(|| 1, || 2);
                        ran.fetch_add(a + b, Ordering::SeqCst);
                    });
                }
            });
        });
        assert!(
            matches!(h.wait(), Err(RequestError::Cancelled { .. })),
            "{policy}"
        );
        assert_eq!(ran.load(Ordering::SeqCst), 16 * 3, "{policy}");
    }
}

/// A request whose root waits for an inner request, `depth` levels down; the innermost runs
/// a small fork-join tree. Returns the tree's sum.
fn nested(rt: &'static Runtime, depth: u32) -> u64 {
    if depth == 0 {
        return fib(12);
    }
    rt.submit(move |_| nested(rt, depth - 1)).wait().unwrap()
}

#[test]
fn nested_waits_eight_deep_never_deadlock_on_two_workers() {
    // The hang: four outer requests, each waiting (from inside its task) on an inner
    // one, on two workers; here eight levels deep, under every policy.
    for policy in PolicyKind::ALL {
        let rt: &'static Runtime = Box::leak(Box::new(two(policy)));
        let sums = within(120, &format!("{policy}: nested waits"), move || {
            let outer: Vec<_> = (0..4).map(|_| rt.submit(move |_| nested(rt, 8))).collect();
            outer
                .into_iter()
                .map(|h| h.wait().unwrap())
                .collect::<Vec<_>>()
        });
        assert_eq!(sums, [144; 4], "{policy}");
    }
}

#[test]
fn install_from_a_worker_of_another_runtime_helps_there() {
    let a: &'static Runtime = Box::leak(Box::new(two(PolicyKind::Las)));
    let b: &'static Runtime = Box::leak(Box::new(two(PolicyKind::Nls)));
    let v = within(60, "cross-runtime install", move || {
        let hs: Vec<_> = (0..4)
            .map(|i| a.submit(move |_| b.install(move || fib(10 + i))))
            .collect();
        hs.into_iter()
            .map(|h| h.wait().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(v, [55, 89, 144, 233]);
}

#[test]
fn deep_fork_join_trees_count_every_leaf() {
    // A stress of the join path: unbalanced trees of joins and scopes, every leaf counted.
    fn mix(mut z: u64) -> u64 {
        // splitmix64's finaliser: well-spread cuts, so the trees are a few dozen levels deep.
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn tree(n: u64, seed: u64, leaves: &AtomicU64) {
        if n <= 1 {
            leaves.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let cut = 1 + seed % (n - 1);
        let (l, r) = (mix(seed ^ 1), mix(seed ^ 2));
        if seed % 5 == 0 {
            scope(|s| {
                s.spawn(move |_| tree(cut, l, leaves));
                s.spawn(move |_| tree(n - cut, r, leaves));
            });
        } else {
            join(|| tree(cut, l, leaves), || tree(n - cut, r, leaves));
        }
    }
    for policy in PolicyKind::ALL {
        let rt = rt(presets::build("e5310-smp").unwrap(), policy);
        eprintln!("deep trees: {policy}");
        for seed in 1..4u64 {
            let leaves = AtomicU64::new(0);
            rt.install(|| tree(5_000, mix(seed), &leaves));
            assert_eq!(
                leaves.load(Ordering::Relaxed),
                5_000,
                "{policy} seed {seed}"
            );
        }
    }
}
