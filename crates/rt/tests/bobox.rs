//! The Bobox-2011 load balancer at work (task-scheduling-in-data-stream-processing.txt §5.2).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nearflow_policy::PolicyKind;
use nearflow_rt::{Runtime, TaskCx};
use nearflow_topo::presets;

/// A binary tree of deferred tasks, each busy for a millisecond, with `budget` descendants.
fn tree(cx: &TaskCx<'_>, budget: u64, done: Arc<AtomicU64>) {
    std::thread::sleep(Duration::from_millis(1));
    done.fetch_add(1, Ordering::Relaxed);
    if budget == 0 {
        return;
    }
    let left = (budget - 1) / 2;
    let right = budget - 1 - left;
    let d = done.clone();
    cx.spawn_deferred(move |cx| tree(cx, left, d));
    if right > 0 {
        cx.spawn_deferred(move |cx| tree(cx, right - 1, done));
    }
}

#[test]
fn a_lone_request_on_an_overloaded_node_is_shared() {
    // e7-4820: 4 nodes of 16 threads. One request starts on one node; its tree is wide enough to
    // keep that node's threads busy with tasks waiting, while the other nodes sleep.
    let rt = Runtime::builder(presets::build("e7-4820").unwrap())
        .policy(PolicyKind::Bobox2011)
        .build()
        .unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let d = done.clone();
    let budget = 3000;
    rt.submit(move |cx| tree(cx, budget - 1, d)).wait().unwrap();
    // Count what the tree really spawned: the right child takes `right - 1`, so fewer than budget.
    let ran = done.load(Ordering::Relaxed);
    assert!(ran > 1000, "the tree ran {ran} tasks");
    let (moves, shares) = rt.balancer_actions();
    assert!(
        shares >= 1,
        "the balancer never shared the request (moves {moves}, shares {shares})"
    );
    let c = rt.counters();
    let home = (0..16).map(|w| c.workers[w].executed).sum::<u64>();
    let home_node = c
        .workers
        .chunks(16)
        .enumerate()
        .max_by_key(|(_, ws)| ws.iter().map(|w| w.executed).sum::<u64>())
        .map(|(n, _)| n)
        .unwrap();
    let elsewhere: u64 = c
        .workers
        .chunks(16)
        .enumerate()
        .filter(|(n, _)| *n != home_node)
        .map(|(_, ws)| ws.iter().map(|w| w.executed).sum::<u64>())
        .sum();
    assert!(
        elsewhere > 0,
        "after sharing, other nodes ran none of the request's tasks (node 0 ran {home})"
    );
    assert_eq!(c.executed(), ran);
}

#[test]
fn new_requests_go_to_the_most_idle_node() {
    let rt = Runtime::builder(presets::build("e7540").unwrap())
        .policy(PolicyKind::Bobox2011)
        .build()
        .unwrap();
    // Four requests of 12 tasks each, submitted one after another, start on four different
    // nodes. Each is submitted once the previous one's tasks have all started, and every task
    // stays busy until the last request's tasks have started: a node's workers are busy, not
    // idle, when the next request is placed, however slowly this machine runs the threads (a
    // fixed sleep let the first request finish before the fourth was placed on a loaded host).
    let started = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(AtomicBool::new(false));
    let deadline = Duration::from_secs(30);
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let (s, r) = (started.clone(), release.clone());
            let h = rt.submit(move |cx| {
                for _ in 0..12 {
                    let (s, r) = (s.clone(), r.clone());
                    cx.spawn_deferred(move |_| {
                        s.fetch_add(1, Ordering::SeqCst);
                        let t = std::time::Instant::now();
                        while !r.load(Ordering::SeqCst) && t.elapsed() < deadline {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    });
                }
            });
            let t = std::time::Instant::now();
            while started.load(Ordering::SeqCst) < 12 * (i + 1) && t.elapsed() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(
                started.load(Ordering::SeqCst),
                12 * (i + 1),
                "request {i}'s tasks did not all start within {deadline:?}"
            );
            h
        })
        .collect();
    release.store(true, Ordering::SeqCst);
    for h in handles {
        h.wait().unwrap();
    }
    let c = rt.counters();
    let busy_nodes = c
        .workers
        .chunks(12)
        .filter(|ws| ws.iter().any(|w| w.executed > 0))
        .count();
    assert_eq!(
        busy_nodes,
        4,
        "per-node executed: {:?}",
        c.workers
            .chunks(12)
            .map(|ws| ws.iter().map(|w| w.executed).sum::<u64>())
            .collect::<Vec<_>>()
    );
}
