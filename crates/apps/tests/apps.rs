//! The applications against their sequential references, under every policy.

use std::path::Path;

use nearflow_apps::{genplan, vwap};
use nearflow_flow::PlanBuilder;
use nearflow_policy::PolicyKind;
use nearflow_rt::Runtime;

fn runtime(policy: PolicyKind) -> Runtime {
    let machine = nearflow_topo::presets::build("e5310-smp").expect("preset");
    Runtime::builder(machine)
        .policy(policy)
        .build()
        .expect("runtime")
}

fn sorted(mut v: Vec<vwap::Bargain>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = v.drain(..).map(|b| (b.seq, b.index.to_bits())).collect();
    out.sort_unstable();
    out
}

fn check_vwap(ticks: &[vwap::Tick], window: usize, packet_bytes: Option<usize>) {
    let expect = vwap::reference(ticks, window);
    assert!(!expect.is_empty(), "the input has bargains");
    for policy in PolicyKind::ALL {
        let rt = runtime(policy);
        for branches in 1..=8 {
            let mut b = PlanBuilder::for_runtime(&rt);
            if let Some(p) = packet_bytes {
                b.packet_bytes(p);
            }
            let src = b.source(ticks.to_vec());
            let sink = vwap::build(&mut b, src, branches, window);
            let out = b.build().expect("valid plan").run(&rt).expect("plan runs");
            let got = out.take(&sink);
            assert_eq!(
                vwap::checksum(&got),
                vwap::checksum(&expect),
                "{policy:?} branches {branches}"
            );
            assert_eq!(
                sorted(got),
                sorted(expect.clone()),
                "{policy:?} branches {branches}"
            );
            assert!(
                out.stats.conserved() && out.stats.bounded(),
                "{:?}",
                out.stats
            );
            assert_eq!(out.stats.concurrent_entries, 0);
        }
    }
}

#[test]
fn vwap_generated_matches_reference_for_every_policy_and_branch_count() {
    let ticks = vwap::generate(20_000, 7);
    check_vwap(&ticks, 5, Some(4096));
}

#[test]
#[ignore = "needs ../shared/data: ./test.sh runs it, and CI fails without the data"]
fn vwap_real_file_matches_reference() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/vwap/TradesAndQuotes.csv.gz");
    assert!(
        path.exists(),
        "{} is missing: this test needs the VWAP file",
        path.display()
    );
    let ticks = vwap::read_file(&path, 1).expect("the file parses");
    assert_eq!(ticks.len(), 29_999);
    check_vwap(&ticks, 5, None);
    check_vwap(&ticks, 75, Some(2048));
}

#[test]
fn vwap_window_of_one_trade() {
    let ticks = vwap::generate(3_000, 3);
    let expect = vwap::reference(&ticks, 1);
    let rt = runtime(PolicyKind::Las);
    let mut b = PlanBuilder::for_runtime(&rt);
    b.packet_bytes(64);
    let src = b.source(ticks);
    let sink = vwap::build(&mut b, src, 3, 1);
    let out = b.build().unwrap().run(&rt).unwrap();
    assert_eq!(sorted(out.take(&sink)), sorted(expect));
}

#[test]
fn parse_price_is_exact_and_rejects_junk() {
    assert_eq!(vwap::parse_price("19.3"), Ok(19_300_000));
    assert_eq!(vwap::parse_price("0.000001"), Ok(1));
    assert_eq!(vwap::parse_price("7"), Ok(7_000_000));
    assert!(vwap::parse_price("1.2.3").is_err());
    assert!(vwap::parse_price("abc").is_err());
    assert!(vwap::parse_price("1.1234567").is_err());
    assert!(vwap::parse_price("").is_err());
}

#[test]
fn generated_plan_has_about_170_operators_and_matches_reference() {
    let expect = genplan::reference(3_000);
    assert!(expect.distinct_keys > 0 && !expect.groups.is_empty());
    for policy in PolicyKind::ALL {
        let rt = runtime(policy);
        let mut b = PlanBuilder::for_runtime(&rt);
        b.packet_bytes(8 * 1024);
        let sinks = genplan::build(&mut b, 3_000);
        let plan = b.build().expect("valid");
        assert!(
            (160..=180).contains(&plan.len()),
            "{} operators",
            plan.len()
        );
        let out = plan.run(&rt).expect("runs");
        assert_eq!(genplan::result(&out, &sinks), expect, "{policy:?}");
        assert!(out.stats.conserved() && out.stats.bounded());
    }
}

/// LOIS (StreamMap Fig. 10) against its reference: every thread count under every policy
/// (threads only label operators there), and mapped onto a 6-PU machine in three different
/// ways; the outliers are the bursts and a few noise extremes, never nothing.
#[test]
fn lois_matches_reference_for_every_thread_count_policy_and_mapping() {
    use nearflow_apps::lois;
    let samples = lois::generate(40_000, 8, 11);
    let cfg = lois::Config {
        short: 64,
        long: 512,
        k_tenths: 30,
    };
    let expect = lois::reference(&samples, cfg);
    assert!(expect.len() > 40, "{} outliers", expect.len());
    let run = |rt: &Runtime, threads: usize, map: Option<&[usize]>| {
        let mut b = PlanBuilder::for_runtime(rt);
        b.packet_bytes(2048);
        b.on_thread(Some(0));
        let src = b.source(samples.clone());
        let sink = lois::build(&mut b, src, threads, cfg);
        let mut plan = b.build().expect("valid plan");
        assert_eq!(plan.threads(), threads.clamp(1, 6));
        if let Some(pus) = map {
            plan.map_threads(rt, pus).expect("mapping");
        }
        let out = plan.run(rt).expect("plan runs");
        let mut got = out.take(&sink);
        got.sort_unstable();
        assert!(out.stats.conserved() && out.stats.bounded());
        got
    };
    for policy in PolicyKind::ALL {
        let rt = runtime(policy);
        for threads in 1..=6 {
            assert_eq!(
                run(&rt, threads, None),
                expect,
                "{policy} {threads} threads"
            );
        }
    }
    let m = nearflow_topo::from_synthetic("pack:1 core:6 pu:1").unwrap();
    let rt = Runtime::builder(m)
        .policy(PolicyKind::Pinned)
        .build()
        .unwrap();
    for pus in [[0, 1, 2, 3, 4, 5], [5, 5, 0, 0, 1, 1], [3, 3, 3, 3, 3, 3]] {
        assert_eq!(run(&rt, 6, Some(&pus)), expect, "mapped {pus:?}");
    }
    assert_eq!(run(&rt, 4, Some(&[2, 0, 1, 2])), expect, "4 threads mapped");
}

/// VWAP with StreamMap's threads, mapped, against its reference (small and large windows).
#[test]
fn vwap_threads_mapped_match_reference() {
    let ticks = vwap::generate(30_000, 5);
    let m = nearflow_topo::from_synthetic("pack:1 core:4 pu:1").unwrap();
    let rt = Runtime::builder(m)
        .policy(PolicyKind::Pinned)
        .build()
        .unwrap();
    for window in [5, 75_000] {
        let expect = sorted(vwap::reference(&ticks, window));
        for (threads, pus) in [(1, vec![2]), (3, vec![0, 3, 1]), (5, vec![0, 0, 1, 2, 3])] {
            let mut b = PlanBuilder::for_runtime(&rt);
            b.packet_bytes(4096);
            b.on_thread(Some(0));
            let src = b.source(ticks.clone());
            let sink = vwap::build_threads(&mut b, src, threads, window);
            let mut plan = b.build().unwrap();
            assert_eq!(plan.threads(), threads);
            plan.map_threads(&rt, &pus).unwrap();
            let out = plan.run(&rt).unwrap();
            assert_eq!(sorted(out.take(&sink)), expect, "window {window} {pus:?}");
        }
    }
}
