//! SplittableData on the papers' machines and on random topologies, under every policy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nearflow_policy::PolicyKind;
use nearflow_rt::Runtime;
use nearflow_split::{Placed, Route, SplitBy, SplitError, SplittableData};
use nearflow_topo::{presets, Machine, TopologySpec};
use proptest::prelude::*;

fn machines() -> Vec<(&'static str, Machine)> {
    ["i7-2600", "nehalem-2x4", "e7-4820"]
        .into_iter()
        .map(|p| (p, presets::build(p).unwrap()))
        .collect()
}

#[test]
fn dispatch_runs_every_partition_once_and_merges_in_order_under_every_policy() {
    for (name, m) in machines() {
        for by in [SplitBy::Node, SplitBy::Group] {
            let data = SplittableData::build(&m, by, |info| vec![info.index as u64; 100]).unwrap();
            let expect_len = match by {
                SplitBy::Node => m.node_count(),
                SplitBy::Group => m.groups().len(),
            };
            assert_eq!(data.len(), expect_len, "{name} {by:?}");
            for n in 0..m.node_count() {
                let on_node = data.partitions_on_node(n).collect::<Vec<_>>();
                let want = match by {
                    SplitBy::Node => 1,
                    SplitBy::Group => m.groups().iter().filter(|g| g.node == n).count(),
                };
                assert_eq!(on_node.len(), want, "{name} {by:?} node {n}");
                assert!(on_node.iter().all(|&i| data.partitions()[i].info.node == n));
            }
            for (info, placed) in data.map() {
                assert!(
                    matches!(placed, Placed::Unbound(_)),
                    "a preset is not this host"
                );
                assert_eq!(info.home.node_index(), info.node);
            }
            for kind in PolicyKind::ALL {
                let rt = Runtime::builder(m.clone()).policy(kind).build().unwrap();
                let runs: Arc<Vec<AtomicU64>> =
                    Arc::new((0..data.len()).map(|_| AtomicU64::new(0)).collect());
                let r = runs.clone();
                let order = data
                    .dispatch(
                        &rt,
                        move |_, part, info| {
                            r[info.index].fetch_add(1, Ordering::Relaxed);
                            assert!(part.iter().all(|&x| x == info.index as u64));
                            vec![info.index]
                        },
                        |mut a, b| {
                            a.extend(b);
                            a
                        },
                    )
                    .unwrap();
                assert_eq!(
                    order,
                    (0..data.len()).collect::<Vec<_>>(),
                    "{name} {by:?} {kind:?}"
                );
                assert!(runs.iter().all(|n| n.load(Ordering::Relaxed) == 1));
                for i in 0..data.len() {
                    let got = data.dispatch_to(&rt, i, |_, part, _| part[0]).unwrap();
                    assert_eq!(got, i as u64);
                }
            }
        }
    }
}

/// The runtime's remote-share counters agree exactly with what the partition tasks saw.
#[test]
fn remote_share_counts_every_partition_task_exactly() {
    for (name, m) in machines() {
        for kind in [PolicyKind::Las, PolicyKind::Nls, PolicyKind::Bobox2011] {
            let rt = Runtime::builder(m.clone()).policy(kind).build().unwrap();
            let data = SplittableData::build(&m, SplitBy::Node, |info| info.node).unwrap();
            let local = Arc::new(AtomicU64::new(0));
            let rounds = 50u64;
            for _ in 0..rounds {
                let l = local.clone();
                data.dispatch(
                    &rt,
                    move |cx, &node, _| {
                        if cx.node() == node {
                            l.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    |(), ()| (),
                )
                .unwrap();
            }
            let (home_local, home_remote) = rt.counters().homed();
            let tasks = rounds * data.len() as u64;
            assert_eq!(home_local + home_remote, tasks, "{name} {kind:?}");
            assert_eq!(home_local, local.load(Ordering::Relaxed), "{name} {kind:?}");
        }
    }
}

#[test]
fn dispatch_from_inside_a_task_continues_with_the_merged_result() {
    let m = presets::build("e7-4820").unwrap();
    let rt = Runtime::builder(m.clone()).build().unwrap();
    let data = SplittableData::build_by_key(
        &m,
        SplitBy::Group,
        (0..10_000u64).collect(),
        |x| *x,
        Route::Range { max: 10_000 },
        |_| Vec::new(),
        |v: &mut Vec<u64>, x| v.push(x),
    )
    .unwrap();
    let out = Arc::new(AtomicU64::new(0));
    let o = out.clone();
    let d = data.clone();
    rt.submit(move |cx| {
        d.dispatch_in(
            cx,
            |_, part, _| part.iter().sum::<u64>(),
            |a, b| a + b,
            move |cx, sum| {
                // The continuation may spawn, as any task.
                cx.spawn_immediate(move |_| o.store(sum, Ordering::Relaxed));
            },
        )
        .unwrap();
    })
    .wait()
    .unwrap();
    assert_eq!(out.load(Ordering::Relaxed), (0..10_000u64).sum::<u64>());
    // Range routing keeps each partition a contiguous, ordered run.
    let mut all = Vec::new();
    for p in data.partitions() {
        assert!(p.data.windows(2).all(|w| w[0] < w[1]));
        all.extend_from_slice(&p.data);
    }
    assert_eq!(all, (0..10_000u64).collect::<Vec<_>>());
}

#[test]
fn errors_are_reported_not_panicked() {
    let m = presets::build("nehalem-2x4").unwrap();
    let other = presets::build("e7-4820").unwrap();
    let data = SplittableData::build(&m, SplitBy::Node, |i| i.index).unwrap();
    let rt_other = Runtime::builder(other).build().unwrap();
    assert!(matches!(
        data.dispatch(&rt_other, |_, x, _| *x, |a, _| a),
        Err(SplitError::MachineMismatch {
            nodes: 2,
            rt_nodes: 4,
            ..
        })
    ));
    let rt = Runtime::builder(m.clone()).build().unwrap();
    assert!(matches!(
        data.dispatch_to(&rt, 2, |_, x, _| *x),
        Err(SplitError::NoSuchPartition { index: 2, len: 2 })
    ));
    let e = data
        .dispatch(
            &rt,
            |_, &x, _| {
                if x == 1 {
                    panic!("partition 1 failed")
                }
                x
            },
            |a, _| a,
        )
        .unwrap_err();
    assert!(e.to_string().contains("partition 1 failed"), "{e}");
    let e = SplittableData::<u8>::build(&m, SplitBy::Node, |i| {
        assert!(i.index == 0, "cannot build {}", i.index);
        0
    })
    .unwrap_err();
    assert!(e.to_string().contains("cannot build 1"), "{e}");
    // The runtime is still usable after the failed request.
    assert_eq!(data.dispatch(&rt, |_, x, _| *x, |a, b| a + b).unwrap(), 1);
}

#[test]
fn on_the_host_partitions_are_built_bound() {
    let m = TopologySpec::Host.load().unwrap();
    let data =
        SplittableData::build(&m, SplitBy::Node, |_| nearflow_alloc::current_node()).unwrap();
    for p in data.partitions() {
        assert_eq!(p.placed, Placed::Bound, "{:?}", p.placed);
        // The build ran on the partition's node.
        assert_eq!(p.data, p.info.node);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]
    /// Random machines (1–3 packages as nodes, 1–3 L2 caches each, 1–2 PUs per L2) and random
    /// keyed elements: every element lands once, in the partition its key routes to, and a
    /// dispatch sees them all.
    #[test]
    fn build_by_key_and_dispatch_on_random_topologies(
        packs in 1usize..4,
        groups in 1usize..4,
        pus in 1usize..3,
        by_group in any::<bool>(),
        hash in any::<bool>(),
        keys in proptest::collection::vec(0u64..1000, 0..300),
    ) {
        let desc = format!("pack:{packs} [numa] l2:{groups} pu:{pus}");
        let m = nearflow_topo::from_synthetic(&desc).unwrap();
        let by = if by_group { SplitBy::Group } else { SplitBy::Node };
        let route = if hash { Route::Hash } else { Route::Range { max: 1000 } };
        let items: Vec<(u64, usize)> = keys.iter().copied().zip(0..).collect();
        let data = SplittableData::build_by_key(
            &m, by, items.clone(), |e| e.0, route, |_| Vec::new(), |v: &mut Vec<(u64, usize)>, e| v.push(e),
        ).unwrap();
        let n = data.len();
        prop_assert_eq!(n, if by_group { m.groups().len() } else { packs });
        prop_assert_eq!(m.node_count(), packs);
        for p in data.partitions() {
            for e in &p.data {
                prop_assert_eq!(route.partition(e.0, n), p.info.index);
            }
        }
        let rt = Runtime::builder(m).policy(PolicyKind::Las).build().unwrap();
        let mut seen = data.dispatch(&rt, |_, part, _| part.clone(), |mut a, b| { a.extend(b); a }).unwrap();
        seen.sort_by_key(|e| e.1);
        prop_assert_eq!(seen, items);
    }
}
