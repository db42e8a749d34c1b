//! Behaviour tests of the runtime API: results, panics, shutdown, counters, oversubscription.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nearflow_policy::{PolicyKind, TaskKind};
use nearflow_rt::{Pinning, RequestError, Runtime, SleepBarriers};
use nearflow_topo::{presets, TopologySpec};

fn rt(preset: &str, policy: PolicyKind) -> Runtime {
    Runtime::builder(presets::build(preset).unwrap())
        .policy(policy)
        .build()
        .unwrap()
}

#[test]
fn request_ids_are_sequential_and_results_come_back() {
    for policy in PolicyKind::ALL {
        let rt = rt("e5310-smp", policy);
        let handles: Vec<_> = (0..10u64).map(|i| rt.submit(move |_| i * 2)).collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(h.id(), i as u64, "{policy}");
            assert_eq!(h.wait().unwrap(), i as u64 * 2, "{policy}");
        }
    }
}

#[test]
fn wait_covers_every_task_of_the_request() {
    for policy in PolicyKind::ALL {
        let rt = rt("e7-4820", policy);
        let hits = Arc::new(AtomicU64::new(0));
        let h2 = hits.clone();
        let h = rt.submit(move |cx| {
            for _ in 0..50 {
                let h3 = h2.clone();
                cx.spawn_deferred(move |cx| {
                    for _ in 0..4 {
                        let h4 = h3.clone();
                        cx.spawn_immediate(move |_| {
                            std::thread::sleep(Duration::from_micros(50));
                            h4.fetch_add(1, Ordering::Relaxed);
                        });
                    }
                });
            }
        });
        assert!(
            h.wait_timeout(Duration::from_secs(60)),
            "{policy}: request did not finish"
        );
        // Exact once done: the root and 50 deferred tasks, 200 immediate ones, all run.
        let c = h.counters();
        assert_eq!(
            (
                c.spawned_deferred,
                c.spawned_immediate,
                c.executed,
                c.skipped
            ),
            (51, 200, 251, 0),
            "{policy}"
        );
        h.wait().unwrap();
        assert_eq!(hits.load(Ordering::Relaxed), 200, "{policy}");
    }
}

#[test]
fn a_panicking_task_fails_only_its_request() {
    for policy in PolicyKind::ALL {
        let rt = rt("e5310-smp", policy);
        let bad = rt.submit(|cx| {
            cx.spawn_immediate(|_| panic!("boom in a child"));
            7
        });
        let good = rt.submit(|cx| {
            cx.spawn_deferred(|_| {});
            1
        });
        match bad.wait() {
            Err(RequestError::Panicked { message, .. }) => {
                assert_eq!(message, "boom in a child", "{policy}")
            }
            Ok(v) => panic!("{policy}: a failed request returned {v}"),
            Err(e) => panic!("{policy}: {e}"),
        }
        assert_eq!(good.wait().unwrap(), 1, "{policy}");
        // The pool still works.
        assert_eq!(rt.submit(|_| 5).wait().unwrap(), 5);
    }
}

#[test]
fn cancel_skips_the_tasks_not_started() {
    for policy in PolicyKind::ALL {
        let rt = rt("e5310-smp", policy);
        let gate = Arc::new(AtomicBool::new(false));
        let g = gate.clone();
        let h = rt.submit(move |cx| {
            for _ in 0..1000 {
                let g = g.clone();
                cx.spawn_deferred(move |_| {
                    while !g.load(Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                });
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(10));
        h.cancel();
        gate.store(true, Ordering::Release);
        let id = h.id();
        let counters = {
            assert!(
                h.wait_timeout(std::time::Duration::from_secs(30)),
                "{policy}"
            );
            h.counters()
        };
        assert_eq!(
            h.wait().unwrap_err(),
            RequestError::Cancelled { id },
            "{policy}"
        );
        assert!(counters.skipped > 0, "{policy}: {counters:?}");
        assert_eq!(
            counters.executed + counters.skipped,
            1001,
            "{policy}: {counters:?}"
        );
        // Cancelling a completed request changes nothing.
        let done = rt.submit(|_| 3);
        assert!(done.wait_timeout(std::time::Duration::from_secs(30)));
        done.cancel();
        assert_eq!(done.wait().unwrap(), 3);
    }
}

#[test]
fn formatted_panic_messages_are_kept() {
    let rt = rt("x5355", PolicyKind::Las);
    let h = rt.submit(|_| -> u32 { panic!("bad value {}", 42) });
    assert_eq!(
        h.wait().unwrap_err().to_string(),
        "request 0 failed: a task panicked: bad value 42"
    );
}

#[test]
fn drop_waits_for_submitted_requests() {
    let done = Arc::new(AtomicU64::new(0));
    {
        let rt = rt("e5310-smp", PolicyKind::Las);
        for _ in 0..8 {
            let d = done.clone();
            drop(rt.submit(move |cx| {
                for _ in 0..10 {
                    let d = d.clone();
                    cx.spawn_deferred(move |_| {
                        std::thread::sleep(Duration::from_millis(1));
                        d.fetch_add(1, Ordering::Relaxed);
                    });
                }
            }));
        }
    }
    assert_eq!(done.load(Ordering::Relaxed), 80);
}

#[test]
fn counters_attribute_tasks_to_rules() {
    let rt = rt("e5310-smp", PolicyKind::Las);
    rt.submit(|cx| {
        for _ in 0..100 {
            cx.spawn_immediate(|_| {});
        }
    })
    .wait()
    .unwrap();
    let c = rt.counters();
    assert_eq!(c.executed(), 101);
    assert_eq!(c.by_rule().iter().sum::<u64>(), 101);
    assert_eq!(c.rule_names.len(), 5);
    assert_eq!(c.total(|w| w.spawned), 100);
}

#[test]
fn sixty_four_workers_run_on_a_small_host() {
    let m = presets::build("e7-4820").unwrap();
    let rt = Runtime::builder(m).pinning(Pinning::Group).build().unwrap();
    assert_eq!(rt.workers(), 64);
    assert_eq!(rt.pinning(), Pinning::None, "binding is skipped off-host");
    let sum: u64 = (0..64u64)
        .map(|i| rt.submit(move |_| i))
        .map(|h| h.wait().unwrap())
        .sum();
    assert_eq!(sum, 63 * 64 / 2);
}

#[test]
fn host_runtime_binds_to_groups() {
    let m = TopologySpec::Host.load().unwrap();
    for pinning in [Pinning::Group, Pinning::Pu, Pinning::None] {
        let rt = Runtime::builder(m.clone())
            .pinning(pinning)
            .build()
            .unwrap();
        assert_eq!(rt.pinning(), pinning);
        // Read the affinity the OS applied to the worker that runs the task.
        let (w, cpus) = rt
            .submit(|cx| {
                let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
                let cpus: Vec<usize> = (0..nix::sched::CpuSet::count())
                    .filter(|&c| set.is_set(c).unwrap())
                    .collect();
                (cx.worker(), cpus)
            })
            .wait()
            .unwrap();
        let os = |p: usize| m.pus()[p].os_index;
        match pinning {
            Pinning::Pu => assert_eq!(cpus, vec![os(w)]),
            Pinning::Group => {
                let mut want: Vec<usize> = m.groups()[m.group_of(w)]
                    .pus
                    .iter()
                    .map(|&p| os(p))
                    .collect();
                want.sort_unstable();
                assert_eq!(cpus, want);
            }
            Pinning::None => assert!(cpus.contains(&os(w))),
        }
    }
}

/// LAS rule 5 at work in the threaded runtime: on `e5310-smp` (one node, four groups of two) a
/// root that spawns only immediate tasks fills one core's queue; its group mate steals by rule 2,
/// and the workers of the other three groups, woken by the spawns (same node), can only reach that
/// queue by rule 5.
#[test]
fn las_rule5_spreads_immediate_work_within_the_node() {
    let rt = rt("e5310-smp", PolicyKind::Las);
    rt.submit(|cx| {
        for _ in 0..4000 {
            cx.spawn_immediate(|_| {
                let t = std::time::Instant::now();
                while t.elapsed() < Duration::from_micros(20) {
                    std::hint::spin_loop();
                }
            });
        }
    })
    .wait()
    .unwrap();
    let c = rt.counters();
    let by_rule = c.by_rule();
    assert_eq!(by_rule.iter().sum::<u64>(), 4001);
    assert!(by_rule[4] > 0, "no task was found by rule 5: {by_rule:?}");
    // The only deferred task is the root: at most it was found by rule 4 (taken by another group).
    assert!(by_rule[3] <= 1, "{by_rule:?}");
}

/// Tasks with a data home: under every policy, on a 2-node machine, each homed task is counted
/// once, as local exactly when the worker that ran it is on its home node (checked against what
/// the tasks themselves saw), per request and per worker.
#[test]
fn homed_tasks_are_counted_local_or_remote_exactly() {
    use std::sync::Mutex;
    let m = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    for policy in PolicyKind::ALL {
        let rt = Runtime::builder(m.clone()).policy(policy).build().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let home0 = rt.home_on_node(0).unwrap();
        assert!(rt.home_on_node(2).is_err());
        let h = rt.submit_at(home0, move |cx| {
            s.lock().unwrap().push((0, cx.node()));
            for i in 0..400usize {
                let s = s.clone();
                let home = cx.home_on_node(i % 2).unwrap();
                cx.spawn_deferred_at(home, move |cx| {
                    // Some work, so that both nodes' workers take part.
                    let mut x = i as u64;
                    for _ in 0..2_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                    s.lock().unwrap().push((i % 2, cx.node()));
                });
                // Unhomed tasks are not counted.
                cx.spawn_deferred(|_| {});
            }
        });
        assert!(
            h.wait_timeout(Duration::from_secs(60)),
            "{policy}: did not finish"
        );
        let c = h.counters();
        h.wait().unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 401, "{policy}");
        let local = seen.iter().filter(|(home, node)| home == node).count() as u64;
        assert_eq!(
            (c.home_local, c.home_remote),
            (local, 401 - local),
            "{policy}"
        );
        assert_eq!(rt.counters().homed(), (local, 401 - local), "{policy}");
        let by_group: (u64, u64) = rt
            .counters()
            .homed_by_group(&m)
            .iter()
            .fold((0, 0), |a, g| (a.0 + g.0, a.1 + g.1));
        assert_eq!(by_group, (local, 401 - local), "{policy}");
        let share = c.remote_share().unwrap();
        assert!((0.0..=1.0).contains(&share));
    }
}

/// A burst of deferred tasks gets as many workers as it has tasks, whatever was searching when
/// it was spawned (the sleep README's wake chain): each task waits until all have started, which
/// completes only if no task stays queued while a worker that could run it sleeps.
#[test]
fn a_burst_of_deferred_tasks_runs_in_parallel() {
    use std::sync::atomic::AtomicUsize;
    // `pinned` keeps a task without a home on its spawner's worker by design (StreamMap: no
    // stealing), so a burst runs one task after another there; it is checked below instead.
    for kind in PolicyKind::ALL
        .into_iter()
        .filter(|&k| k != PolicyKind::Pinned)
    {
        // Two groups of two PUs; four tasks from a task of the request, twice over, so that the
        // second burst meets workers that searched or slept after the first.
        let rt = Runtime::builder(
            TopologySpec::Synthetic("pack:2 l2:2 pu:1".into())
                .load()
                .unwrap(),
        )
        .policy(kind)
        .build()
        .unwrap();
        for round in 0..2 {
            let started = Arc::new(AtomicUsize::new(0));
            let all_met = Arc::new(AtomicU64::new(0));
            let (s, m) = (started.clone(), all_met.clone());
            rt.submit(move |cx| {
                for _ in 0..4 {
                    let (s, m) = (s.clone(), m.clone());
                    cx.spawn_deferred(move |_| {
                        s.fetch_add(1, Ordering::SeqCst);
                        let t = std::time::Instant::now();
                        while s.load(Ordering::SeqCst) < 4 && t.elapsed() < Duration::from_secs(20)
                        {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        if s.load(Ordering::SeqCst) == 4 {
                            m.fetch_add(1, Ordering::SeqCst);
                        }
                    });
                }
            })
            .wait()
            .unwrap();
            assert_eq!(
                all_met.load(Ordering::SeqCst),
                4,
                "{kind:?}, burst {round}: a task waited in a queue while a worker slept"
            );
        }
    }
}

/// The other side of the wake chain: a one-task request sent to an idle runtime wakes one
/// worker, and that worker, finding nothing else queued, wakes nobody (waking a second worker for
/// nothing tripled the round trip on a virtual machine). Both barrier kinds; every policy whose workers sleep in domains.
#[test]
fn a_lone_task_wakes_no_second_worker() {
    for barriers in [SleepBarriers::Fence, SleepBarriers::Membarrier] {
        for kind in [
            PolicyKind::Las,
            PolicyKind::Nls,
            PolicyKind::Central,
            PolicyKind::RandomSteal,
        ] {
            let rt = Runtime::builder(
                TopologySpec::Synthetic("pack:1 l2:4 pu:1".into())
                    .load()
                    .unwrap(),
            )
            .policy(kind)
            .sleep_barriers(barriers)
            .build()
            .unwrap();
            for i in 0..5u64 {
                // Until every worker has searched, given up and blocked.
                let t = std::time::Instant::now();
                while rt.asleep() < 4 && t.elapsed() < Duration::from_secs(20) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert_eq!(
                    rt.asleep(),
                    4,
                    "{kind:?}, {barriers:?}: workers stayed awake"
                );
                assert_eq!(rt.submit(move |_| i).wait().unwrap(), i);
            }
            let c = rt.counters();
            // One worker woken per request (by the submitter), none by another worker.
            let woken: u64 = c.workers.iter().map(|w| w.sleeps).sum();
            let wakes: u64 = c.workers.iter().map(|w| w.wakes).sum();
            assert_eq!(
                (woken, wakes),
                (5, 0),
                "{kind:?}, {barriers:?}: (workers woken, wakes by workers) for 5 one-task requests"
            );
        }
    }
}

/// Under `pinned`, tasks homed on four different PUs run on those four PUs, at once: each
/// waits until all four have started, which completes only if each PU's worker was woken for
/// its own task (the wake of `Home::pu` reaches exactly that worker).
#[test]
fn mapped_tasks_run_on_their_pus_at_once() {
    use std::sync::atomic::AtomicUsize;
    let rt = Runtime::builder(
        TopologySpec::Synthetic("pack:2 l2:2 pu:1".into())
            .load()
            .unwrap(),
    )
    .policy(PolicyKind::Pinned)
    .build()
    .unwrap();
    for round in 0..3 {
        let started = Arc::new(AtomicUsize::new(0));
        let ran_on = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, r) = (started.clone(), ran_on.clone());
        let homes: Vec<_> = (0..4).map(|p| rt.home_on_pu(p).unwrap()).collect();
        rt.submit(move |cx| {
            for (p, &home) in homes.iter().enumerate() {
                let (s, r) = (s.clone(), r.clone());
                let kind = if p % 2 == 0 {
                    TaskKind::Immediate
                } else {
                    TaskKind::Deferred
                };
                cx.spawn_at(kind, home, move |cx| {
                    r.lock().unwrap().push((p, cx.worker()));
                    s.fetch_add(1, Ordering::SeqCst);
                    let t = std::time::Instant::now();
                    while s.load(Ordering::SeqCst) < 4 && t.elapsed() < Duration::from_secs(20) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                });
            }
        })
        .wait()
        .unwrap();
        let mut got = ran_on.lock().unwrap().clone();
        got.sort_unstable();
        assert_eq!(got, vec![(0, 0), (1, 1), (2, 2), (3, 3)], "round {round}");
    }
    assert!(rt.home_on_pu(4).is_err());
}

#[test]
fn the_sleep_barriers_are_the_ones_chosen() {
    let m = presets::build("e5310-smp").unwrap();
    let fence = Runtime::builder(m.clone())
        .sleep_barriers(SleepBarriers::Fence)
        .build()
        .unwrap();
    assert!(!fence.asymmetric_barriers());
    let mb = Runtime::builder(m)
        .sleep_barriers(SleepBarriers::Membarrier)
        .build()
        .unwrap();
    // Linux ≥ 4.14 allows membarrier unless a seccomp filter refuses it; either way requests
    // complete on both.
    if cfg!(target_os = "linux") && !mb.asymmetric_barriers() {
        eprintln!("membarrier is refused here: the runtime fell back to fences");
    }
    for rt in [&fence, &mb] {
        for i in 0..200u64 {
            assert_eq!(rt.submit(move |_| i).wait().unwrap(), i);
        }
    }
}

/// The ids a runtime gives for its workers are its workers': a task run on worker `w` reads
/// its own thread id, and it is the `w`-th of the list.
#[test]
fn worker_thread_ids_name_the_workers() {
    let m = nearflow_topo::from_synthetic("pack:1 core:4 pu:1").unwrap();
    let rt = Runtime::builder(m).build().unwrap();
    let ids = rt.worker_thread_ids();
    assert_eq!(ids.len(), rt.workers());
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "ids are distinct: {ids:?}");
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    assert!(!ids.contains(&me));
    for _ in 0..200 {
        let (w, tid) = rt
            // SAFETY: gettid has no preconditions.
            .submit(|cx| (cx.worker(), unsafe { libc::gettid() }))
            .wait()
            .unwrap();
        assert_eq!(ids[w], tid, "worker {w}");
    }
}
