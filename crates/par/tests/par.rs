//! The parallel iterators against their sequential counterparts, under every policy, with
//! random inputs; order, drops and early stops; SplittableData's homed partitions.

use std::sync::atomic::{AtomicUsize, Ordering};

use nearflow_par::prelude::*;
use nearflow_policy::PolicyKind;
use nearflow_rt::Runtime;
use nearflow_split::{SplitBy, SplittableData};
use nearflow_topo::presets;
use proptest::prelude::*;

fn rt(policy: PolicyKind) -> Runtime {
    Runtime::builder(presets::build("e5310-smp").unwrap())
        .policy(policy)
        .build()
        .unwrap()
}

#[test]
fn every_operation_matches_the_sequential_one_under_every_policy() {
    let v: Vec<i64> = (0..20_000).map(|i| (i * 7919) % 10_007 - 5_000).collect();
    for policy in PolicyKind::ALL {
        let rt = rt(policy);
        rt.install(|| {
            assert_eq!(v.par_iter().sum::<i64>(), v.iter().sum::<i64>(), "{policy}");
            assert_eq!(
                v.par_iter().map(|x| x * 2).collect::<Vec<_>>(),
                v.iter().map(|x| x * 2).collect::<Vec<_>>(),
                "{policy}: map keeps order"
            );
            assert_eq!(
                v.par_iter()
                    .filter(|x| **x % 3 == 0)
                    .copied()
                    .collect::<Vec<_>>(),
                v.iter()
                    .filter(|x| **x % 3 == 0)
                    .copied()
                    .collect::<Vec<_>>(),
                "{policy}: filter keeps order"
            );
            assert_eq!(
                v.par_iter()
                    .filter_map(|x| (*x > 0).then_some(x * 3))
                    .collect::<Vec<_>>(),
                v.iter()
                    .filter_map(|x| (*x > 0).then_some(x * 3))
                    .collect::<Vec<_>>(),
                "{policy}"
            );
            assert_eq!(v.par_iter().count(), v.len(), "{policy}");
            assert_eq!(v.par_iter().min(), v.iter().min(), "{policy}");
            assert_eq!(v.par_iter().max(), v.iter().max(), "{policy}");
            assert_eq!(
                v.par_iter().min_by_key(|x| x.abs()),
                v.iter().min_by_key(|x| x.abs()),
                "{policy}: the first of equals"
            );
            assert_eq!(
                v.par_iter().max_by_key(|x| x.abs()),
                v.iter().max_by_key(|x| x.abs()),
                "{policy}: the last of equals"
            );
            assert_eq!(
                v.par_iter().copied().reduce(|| 0, |a, b| a.wrapping_add(b)),
                v.iter().sum::<i64>(),
                "{policy}"
            );
            assert_eq!(
                v.par_iter().fold(|| 0i64, |a, x| a + x).sum::<i64>(),
                v.iter().sum::<i64>(),
                "{policy}: fold then sum"
            );
            assert!(v.par_iter().any(|x| *x == 4_999), "{policy}");
            assert!(!v.par_iter().any(|x| *x > 10_000), "{policy}");
            assert!(v.par_iter().all(|x| x.abs() <= 5_006), "{policy}");
            assert_eq!(
                v.par_iter().find_any(|x| **x == 17).copied(),
                Some(17),
                "{policy}"
            );
            assert_eq!(v.par_iter().find_any(|x| **x > 10_000), None, "{policy}");
            // Ranges, flat_map (inner parallel) and flat_map_iter, in order.
            let nested: Vec<u32> = (0..200u32)
                .into_par_iter()
                .flat_map(|i| (0..i % 7).into_par_iter().map(move |j| i * 10 + j))
                .collect();
            let expect: Vec<u32> = (0..200u32)
                .flat_map(|i| (0..i % 7).map(move |j| i * 10 + j))
                .collect();
            assert_eq!(nested, expect, "{policy}: flat_map keeps order");
            let it: Vec<u32> = (0..200u32)
                .into_par_iter()
                .flat_map_iter(|i| 0..i % 5)
                .collect();
            assert_eq!(
                it,
                (0..200u32).flat_map(|i| 0..i % 5).collect::<Vec<_>>(),
                "{policy}"
            );
            assert_eq!(
                (1..=20u64).into_par_iter().product::<u64>(),
                2_432_902_008_176_640_000
            );
            assert_eq!(
                (0..=u8::MAX).into_par_iter().map(u64::from).sum::<u64>(),
                32_640
            );
            assert_eq!((i64::MAX - 5..=i64::MAX).into_par_iter().count(), 6);
            assert_eq!((i64::MIN..=i64::MIN + 99).into_par_iter().count(), 100);
            #[allow(clippy::reversed_empty_ranges)]
            let empty = (5..=4u32).into_par_iter().count();
            assert_eq!(empty, 0);
            // Mutation through par_iter_mut and chunks.
            let mut w = v.clone();
            w.par_iter_mut().for_each(|x| *x = -*x);
            assert!(w.iter().zip(&v).all(|(a, b)| *a == -*b), "{policy}");
            w.par_chunks_mut(333).for_each(|c| c.sort_unstable());
            for (c, orig) in w.chunks(333).zip(v.chunks(333)) {
                let mut o: Vec<i64> = orig.iter().map(|x| -x).collect();
                o.sort_unstable();
                assert_eq!(c, &o[..], "{policy}");
            }
            // enumerate and zip keep positions.
            let idx: Vec<(usize, i64)> = v.par_iter().enumerate().map(|(i, x)| (i, *x)).collect();
            assert_eq!(
                idx,
                v.iter().copied().enumerate().collect::<Vec<_>>(),
                "{policy}"
            );
            let mut out = vec![0i64; v.len() + 5];
            out.par_iter_mut()
                .zip(v.par_iter())
                .for_each(|(o, x)| *o = x + 1);
            assert!(
                out[..v.len()].iter().zip(&v).all(|(o, x)| *o == x + 1),
                "{policy}"
            );
            assert_eq!(out[v.len()..], [0; 5], "{policy}: zip stops at the shorter");
            let sums: Vec<i64> = v.par_chunks(1000).map(|c| c.iter().sum()).collect();
            assert_eq!(
                sums,
                v.chunks(1000).map(|c| c.iter().sum()).collect::<Vec<i64>>()
            );
        });
    }
}

#[test]
fn owned_items_are_each_dropped_once() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    #[derive(Debug)]
    struct Tally(u32);
    impl Drop for Tally {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let rt = rt(PolicyKind::Las);
    rt.install(|| {
        // Moved out and collected: dropped with the result.
        let v: Vec<Tally> = (0..5_000).map(Tally).collect();
        let kept: Vec<u32> = v.into_par_iter().map(|t| t.0).collect();
        assert_eq!(kept, (0..5_000).collect::<Vec<_>>());
        assert_eq!(DROPS.swap(0, Ordering::SeqCst), 5_000);
        // An early stop leaves items unconsumed: they are dropped too.
        let v: Vec<Tally> = (0..5_000).map(Tally).collect();
        let found = v.into_par_iter().find_any(|t| t.0 == 10);
        assert_eq!(found.as_ref().map(|t| t.0), Some(10));
        drop(found);
        assert_eq!(DROPS.swap(0, Ordering::SeqCst), 5_000);
        // A panic in the middle: nothing dropped twice (a double drop would count more).
        let v: Vec<Tally> = (0..5_000).map(Tally).collect();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            v.into_par_iter()
                .for_each(|t| assert!(t.0 != 2_500, "element 2500"))
        }));
        assert!(r.is_err());
        assert!(DROPS.swap(0, Ordering::SeqCst) <= 5_000);
    });
}

#[test]
fn work_is_split_across_workers_and_finer_where_stolen() {
    let rt = rt(PolicyKind::Las);
    let used: Vec<AtomicUsize> = (0..rt.workers()).map(|_| AtomicUsize::new(0)).collect();
    // 800 items of 250 µs (0.2 s on one worker): the pieces queued beside a busy worker are
    // stolen by the others long before it could reach them.
    rt.install(|| {
        (0..800u32).into_par_iter().for_each(|_| {
            let w = nearflow_rt::current_thread_index().expect("on a worker");
            used[w].fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_micros(250));
        })
    });
    let busy = used
        .iter()
        .filter(|u| u.load(Ordering::Relaxed) > 0)
        .count();
    assert!(
        busy >= 2,
        "only {busy} of {} workers ran pieces",
        used.len()
    );
    assert_eq!(
        used.iter()
            .map(|u| u.load(Ordering::Relaxed))
            .sum::<usize>(),
        800
    );
    // Without stealing the splitter still cuts 8 workers' worth in 16 pieces (8, 4, 2, 1
    // splits left at each level), each a run of the fold's identity.
    let pieces = AtomicUsize::new(0);
    rt.install(|| {
        (0..4_000u32)
            .into_par_iter()
            .fold(|| pieces.fetch_add(1, Ordering::Relaxed), |a, _| a)
            .for_each(drop)
    });
    assert!(pieces.load(Ordering::Relaxed) >= 16);
    // with_min_len bounds the pieces: at most 4000/1000 = 4 of them (each a for_each run).
    pieces.store(0, Ordering::Relaxed);
    rt.install(|| {
        (0..4_000u32)
            .into_par_iter()
            .with_min_len(1_000)
            .fold(|| pieces.fetch_add(1, Ordering::Relaxed), |a, _| a)
            .for_each(drop)
    });
    assert!(pieces.load(Ordering::Relaxed) <= 4);
}

#[test]
fn splittable_data_runs_each_partition_at_its_home() {
    let machine = presets::build("e7-4820").unwrap(); // 4 nodes
    for policy in [PolicyKind::Las, PolicyKind::Nls, PolicyKind::Bobox2011] {
        let rt = Runtime::builder(machine.clone())
            .policy(policy)
            .build()
            .unwrap();
        let data = SplittableData::build(&machine, SplitBy::Node, |info| {
            (0..10_000u64)
                .map(|i| i + 10_000 * info.index as u64)
                .collect::<Vec<_>>()
        })
        .unwrap();
        assert_eq!(data.len(), 4);
        let before = rt.counters();
        let homed_before: u64 = before
            .workers
            .iter()
            .map(|w| w.home_local + w.home_remote)
            .sum();
        let sum: u64 = rt.install(|| data.par_iter().sum());
        assert_eq!(sum, (0..40_000u64).sum::<u64>(), "{policy}");
        let after = rt.counters();
        let homed: u64 = after
            .workers
            .iter()
            .map(|w| w.home_local + w.home_remote)
            .sum();
        assert_eq!(
            homed - homed_before,
            4,
            "{policy}: one homed task per partition"
        );
        // Partition order is kept.
        let firsts: Vec<u64> = rt.install(|| {
            data.par_partitions()
                .map(|(info, v)| v[0] + info.index as u64)
                .collect()
        });
        assert_eq!(firsts, [0, 10_001, 20_002, 30_003], "{policy}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_pipelines_match_sequential(v in prop::collection::vec(-1000i32..1000, 0..3000), k in 1i32..7) {
        let par: Vec<i64> = v
            .par_iter()
            .filter(|x| **x % k != 0)
            .map(|x| i64::from(*x) * 3)
            .flat_map_iter(|x| [x, -x])
            .collect();
        let seq: Vec<i64> = v
            .iter()
            .filter(|x| **x % k != 0)
            .map(|x| i64::from(*x) * 3)
            .flat_map(|x| [x, -x])
            .collect();
        prop_assert_eq!(par, seq);
        prop_assert_eq!(v.par_iter().map(|x| i64::from(*x)).sum::<i64>(), v.iter().map(|x| i64::from(*x)).sum::<i64>());
        prop_assert_eq!(v.par_iter().max(), v.iter().max());
        prop_assert_eq!(v.par_iter().any(|x| *x == k), v.contains(&k));
    }
}
