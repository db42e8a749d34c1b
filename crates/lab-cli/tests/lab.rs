//! The `nearflow-lab` binary as a user runs it: the experiments' outputs, JSON keys, and clear
//! errors on bad input (the product commands it shares with `nearflow` included).

#[path = "../../cli/tests/common/mod.rs"]
mod common;

use common::{fails_with, json, nearflow};
use serde_json::Value;

#[test]
fn bad_input_is_a_clear_error() {
    fails_with(&["topo", "--preset", "e9999"], "unknown preset");
    fails_with(
        &["topo", "--synthetic", "pack:oops"],
        "invalid hwloc synthetic",
    );
    fails_with(&["topo", "--xml", "/no/such/file.xml"], "no such file");
    fails_with(&["stress", "--policy", "lifo"], "unknown policy");
    fails_with(
        &["stress", "--tasks", "2", "--requests", "4"],
        "at least one task per request",
    );
    fails_with(&["bench", "queues", "--sizes", "0"], "sizes must be");
    fails_with(&["bench", "queues", "--sizes", "12,abc"], "abc");
    fails_with(&["bench", "overhead", "--fib", "90"], "out of range");
    fails_with(&["bench", "overhead", "--barriers", "fence,nope"], "nope");
    fails_with(&["bench", "plans", "--warmup", "x"], "invalid");
    fails_with(
        &["bench", "queues", "--policies", "las,nope"],
        "unknown policy",
    );
    fails_with(
        &["bench", "queues", "--orders", "both-ends,sideways"],
        "unknown order `sideways`",
    );
}

#[test]
fn stress_json_counts_every_task() {
    for policy in ["las", "bobox2011", "fifo-rr", "per-thread"] {
        let v = json(&[
            "stress",
            "--policy",
            policy,
            "--preset",
            "e7540",
            "--tasks",
            "20000",
            "--requests",
            "16",
            "--json",
        ]);
        assert_eq!(v["spawned"], 20000, "{policy}");
        assert_eq!(v["executed"], 20000, "{policy}");
        assert_eq!(v["requests_submitted"], 16, "{policy}");
        assert_eq!(v["requests_completed"], 16, "{policy}");
    }
}

#[test]
fn bench_overhead_json_shape() {
    let v = json(&[
        "bench",
        "overhead",
        "--tasks",
        "2000",
        "--fib",
        "10",
        "--reps",
        "1",
        "--policies",
        "las,central",
        "--json",
    ]);
    let rows = v.as_array().unwrap();
    let row = |policy: &str, workload: &str| {
        rows.iter()
            .find(|r| r["policy"] == policy && r["workload"] == workload)
            .unwrap_or_else(|| panic!("no row {policy}/{workload}"))
    };
    let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap();
    for workload in ["chain", "fanout", "fib"] {
        let rayon = row("rayon-scope", workload);
        for policy in ["las", "central", "crossbeam-deque"] {
            let r = row(policy, workload);
            assert!(f(r, "ns_per_task") > 0.0);
            // One round: the ratio is this cell's time over rayon's in that round, and the
            // spread of one ratio is the ratio itself.
            let want = f(r, "ns_per_task") / f(rayon, "ns_per_task");
            let got = f(r, "ratio_to_rayon");
            assert!(
                (got - want).abs() <= 1e-9 * want,
                "{policy}/{workload}: {got} vs {want}"
            );
            assert_eq!(r["ratio_spread"], serde_json::json!([got, got]));
        }
    }
    let tasks = |w: &str| row("las", w)["tasks"].as_u64().unwrap();
    assert_eq!(
        (tasks("chain"), tasks("fanout"), tasks("fib")),
        (2000, 2000, 177)
    );
    // Both sleep barriers side by side: one column per (barriers, policy), named for both.
    let args = [
        "bench",
        "overhead",
        "--tasks",
        "2000",
        "--reps",
        "1",
        "--workloads",
        "chain,request",
        "--requests",
        "20",
        "--policies",
        "las",
        "--barriers",
        "fence,membarrier",
        "--warmup",
        "0",
        "--json",
    ];
    let out = nearflow(&args);
    if !out.status.success() {
        // Only a kernel (or seccomp filter) that refuses membarrier may fail this, and it says so.
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("refuses membarrier"), "{err}");
        return;
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["workload"] == "chain")
        .map(|r| r["policy"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "rayon-scope",
            "crossbeam-deque",
            "las+fence",
            "las+membarrier"
        ],
        "{v}"
    );
}

#[test]
fn bench_queues_verifies_and_writes_csv() {
    let dir = std::env::temp_dir().join(format!("nearflow-q-{}", std::process::id()));
    let csv = dir.join("q.csv");
    let v = json(&[
        "bench",
        "queues",
        "--sizes",
        "16,48",
        "--reps",
        "1",
        "--json",
        "--policies",
        "central,per-thread,random-steal,nls,las,bobox2011,fifo-rr",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let cells = v.as_array().unwrap();
    assert_eq!(cells.len(), 14);
    // One cell per (size, policy), each with n² element tasks and a positive time; the CSV
    // holds the same times.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("size,central,per-thread,random-steal,nls,las,bobox2011,fifo-rr"),
        "{text}"
    );
    for n in [16u64, 48] {
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(row[0], n.to_string(), "{text}");
        for (i, p) in [
            "central",
            "per-thread",
            "random-steal",
            "nls",
            "las",
            "bobox2011",
            "fifo-rr",
        ]
        .into_iter()
        .enumerate()
        {
            let c = cells
                .iter()
                .find(|c| c["size"] == n && c["policy"] == p)
                .unwrap_or_else(|| panic!("no cell {n} {p}"));
            assert_eq!(c["tasks"], n * n, "{c}");
            let ms = c["ms"].as_f64().unwrap();
            assert!(ms > 0.0 && ms.is_finite(), "{c}");
            let csv_ms: f64 = row[i + 1].parse().unwrap();
            assert!((csv_ms - ms).abs() < 0.01, "{c} against {csv_ms}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `bench phase` prints one line per sample and the summary the benches print; `bench plans
/// --json` keeps stdout JSON (with the probe's range) and puts the summary on stderr.
#[test]
fn bench_phase_samples_and_the_line_beside_the_tables() {
    let out = nearflow(&["bench", "phase", "--samples", "3", "--every-ms", "0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 4, "{text}");
    for l in &lines[..3] {
        let ok = l.starts_with("no sample")
            || l.strip_suffix(" ns")
                .and_then(|x| x.parse::<f64>().ok())
                .is_some_and(|ns| ns > 0.0 && ns.is_finite());
        assert!(ok, "{l:?} in {text}");
    }
    assert!(lines[3].starts_with("host phase: "), "{text}");
    fails_with(&["bench", "phase", "--samples", "0"], "samples");

    let out = nearflow(&[
        "bench", "plans", "--grid", "1x1", "--rows", "500", "--reps", "2", "--warmup", "0",
        "--json",
    ]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("host phase: "), "{err}");
    match v["host_round_trip_ns"].as_array() {
        Some(r) => {
            let (lo, hi) = (r[0].as_f64().unwrap(), r[1].as_f64().unwrap());
            assert!(lo > 0.0 && lo <= hi, "{v}");
        }
        None => assert!(v["host_round_trip_ns"].is_null() && err.contains("not measured")),
    }
}

/// `--orders` adds the plain-thread contenders after the policies, each verified like them and
/// timed in the same rounds (ratios to the size's fastest policy, which has 1.0).
#[test]
fn bench_queues_orders_run_beside_the_policies() {
    let v = json(&[
        "bench",
        "queues",
        "--synthetic",
        "pack:1 [numa] l3:1 core:2 pu:1",
        "--sizes",
        "24",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--policies",
        "las",
        "--orders",
        "--json",
    ]);
    assert_eq!(
        contenders(&v),
        [
            "las",
            "order:youngest-first",
            "order:oldest-first",
            "order:both-ends",
            "order:blocks"
        ]
    );
    let cells = v.as_array().unwrap();
    for c in cells {
        assert_eq!(c["tasks"], 24 * 24, "{c}");
        assert!(c["ms"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["ratio_to_best"].as_f64().unwrap() > 0.0, "{c}");
    }
    // The one policy is the reference.
    assert_eq!(cells[0]["ratio_to_best"], 1.0, "{v}");
    // LAS's own order on one core group is youngest-first, and it is divided by it per round;
    // an order has no own order.
    assert_eq!(cells[0]["own_order"], "order:youngest-first", "{v}");
    assert!(
        cells[0]["ratio_to_own_order"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    let [lo, hi] = [0, 1].map(|i| cells[0]["own_order_spread"][i].as_f64().unwrap());
    assert!(lo <= hi, "{v}");
    assert!(cells[1..].iter().all(|c| c["own_order"].is_null()), "{v}");
    // A list picks orders; `order:` may be written or not.
    let v = json(&[
        "bench",
        "queues",
        "--synthetic",
        "pack:1 [numa] l3:1 core:2 pu:1",
        "--sizes",
        "8",
        "--reps",
        "1",
        "--policies",
        "nls,las",
        "--orders",
        "order:blocks,youngest-first",
        "--json",
    ]);
    assert_eq!(
        contenders(&v),
        ["nls", "las", "order:blocks", "order:youngest-first"]
    );
    // nls's own order (oldest-first) did not run: no ratio.
    assert!(
        v[0]["own_order"].is_null() && v[0]["ratio_to_own_order"].is_null(),
        "{v}"
    );
    assert_eq!(v[1]["own_order"], "order:youngest-first", "{v}");
}

/// The contenders of a `bench queues --json` document, in order.
fn contenders(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|c| c["policy"].as_str().unwrap())
        .collect()
}

#[test]
fn run_and_bench_reject_bad_input() {
    fails_with(&["run", "vwap", "--branches", "0"], "out of range");
    fails_with(&["run", "vwap", "--window", "0"], "out of range");
    fails_with(
        &["run", "vwap", "--input", "/no/such/file.csv"],
        "/no/such/file.csv",
    );
    fails_with(&["run", "vwap", "--policy", "fastest"], "fastest");
    let dir = std::env::temp_dir().join(format!("nearflow-badcsv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.csv");
    std::fs::write(
        &bad,
        "#RIC,Date[G],Time[G],GMT Offset,Type\nAB,x,y,z,Bogus\n",
    )
    .unwrap();
    fails_with(&["run", "vwap", "--input", bad.to_str().unwrap()], "line 2");
    std::fs::remove_dir_all(&dir).unwrap();
    fails_with(&["bench", "plans", "--grid", "2y2"], "not NxM");
    fails_with(&["bench", "plans", "--grid", "0x2"], "at least 1");
    fails_with(&["bench", "plans", "--policies", "las,nope"], "nope");
    fails_with(
        &["bench", "packet-size", "--sizes-kib", "0"],
        "1..=1048576 KiB",
    );
    fails_with(&["run", "plan", "--rows", "0"], "out of range");
}

#[test]
fn bench_packet_size_and_plans_json() {
    let v = json(&[
        "bench",
        "packet-size",
        "--sizes-kib",
        "4,64",
        "--rows",
        "2000",
        "--reps",
        "1",
        "--json",
    ]);
    let pts = v.as_array().unwrap();
    assert!(pts.len() >= 2);
    assert_eq!(pts.iter().filter(|p| p["default"] == true).count(), 1);
    assert!(
        pts.iter()
            .all(|p| p["tuples_per_s"].as_f64().unwrap() > 0.0
                && p["packet_bytes"].as_u64().is_some())
    );
    let v = json(&[
        "bench", "plans", "--grid", "1x1,1x2", "--rows", "1000", "--reps", "1", "--json",
    ]);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2 * 4);
    for grid in ["1x1", "1x2"] {
        let row: Vec<_> = cells.iter().filter(|c| c["grid"] == grid).collect();
        assert_eq!(row.len(), 4, "{grid}: {v}");
        assert!(row.iter().all(|c| c["ms"]
            .as_f64()
            .is_some_and(|ms| ms > 0.0 && ms.is_finite())));
    }
    assert_eq!(cells.iter().filter(|c| c["plans"] == 2).count(), 4, "{v}");
    // Three rounds, no warm-up: every cell keeps its three times, and LAS is compared with each
    // of the three other policies on both grid entries, from those per-round times.
    let v = json(&[
        "bench", "plans", "--grid", "1x1,1x2", "--rows", "1000", "--reps", "3", "--warmup", "0",
        "--json",
    ]);
    let cells = v["cells"].as_array().unwrap();
    let times = |policy: &str, grid: &str| -> Vec<f64> {
        let c = cells
            .iter()
            .find(|c| c["policy"] == policy && c["grid"] == grid)
            .unwrap();
        c["rounds_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let ratios = v["ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), 3 * 2, "{v}");
    for r in ratios {
        assert_eq!(r["num"], "las (nearflow)", "{r}");
        let den = r["den"].as_str().unwrap().trim_end_matches(" (nearflow)");
        let grid = r["grid"].as_str().unwrap();
        let (las, other) = (times("las", grid), times(den, grid));
        assert_eq!(las.len(), 3);
        let mut per_round: Vec<f64> = las.iter().zip(&other).map(|(a, b)| a / b).collect();
        per_round.sort_by(f64::total_cmp);
        let median = r["median"].as_f64().unwrap();
        assert!((median - per_round[1]).abs() < 1e-9, "{r}: {per_round:?}");
        let spread = r["spread"].as_array().unwrap();
        assert!(
            (spread[0].as_f64().unwrap() - per_round[0]).abs() < 1e-9,
            "{r}"
        );
        assert!(
            (spread[1].as_f64().unwrap() - per_round[2]).abs() < 1e-9,
            "{r}"
        );
    }
}

#[test]
fn allocator_flag_and_the_section_6_4_experiment() {
    let v = json(&[
        "bench",
        "plans",
        "--grid",
        "1x1,2x1",
        "--policies",
        "las",
        "--allocators",
        "nearflow,system",
        "--rows",
        "2000",
        "--reps",
        "1",
        "--json",
    ]);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for a in ["nearflow", "system"] {
        assert_eq!(cells.iter().filter(|c| c["allocator"] == a).count(), 2);
    }
    assert!(cells
        .iter()
        .all(|c| c["ms"].as_f64().is_some_and(|ms| ms > 0.0) && c["policy"] == "las"));
    // §6.4's comparison, one per grid entry: nearflow over system, under the same policy.
    let ratios = v["ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), 2, "{v}");
    assert!(ratios
        .iter()
        .all(|r| r["num"] == "las (nearflow)" && r["den"] == "las (system)"));
    let v = json(&[
        "run",
        "plan",
        "--rows",
        "2000",
        "--allocator",
        "system",
        "--packet-bytes",
        "65536",
        "--json",
    ]);
    assert_eq!(v["allocator"], "system", "{v}");
    assert_eq!(v["matches_reference"], true, "{v}");
    assert_eq!(v["packet_bytes"], 65536, "{v}");
    assert!(v["packets"].as_u64().unwrap() > 0, "{v}");
    fails_with(
        &["run", "plan", "--allocator", "tcmalloc"],
        "unknown allocator",
    );
    fails_with(
        &["bench", "plans", "--allocators", "nearflow,x"],
        "unknown allocator",
    );
}

#[test]
fn bench_alloc_runs_every_allocator_and_refuses_bad_flags() {
    fails_with(
        &["bench", "alloc", "--allocators", "tcmalloc"],
        "unknown allocators entry",
    );
    fails_with(
        &["bench", "alloc", "--patterns", "larson,nope"],
        "unknown patterns entry",
    );
    fails_with(&["bench", "alloc", "--threads", "1"], "out of range");
    fails_with(
        &["bench", "alloc", "--bin-dir", "/nonexistent"],
        "not found",
    );
}

/// The run itself needs the allocbench programs beside the binary, which `cargo test` does not
/// build: ignored here, so that it never passes having run nothing; `./test.sh` builds them
/// (`cargo build --release -p nearflow-allocbench`) and runs it with `--ignored`.
#[test]
#[ignore = "needs the allocbench programs: ./test.sh builds them and runs it"]
fn bench_alloc_runs_every_allocator() {
    let dir = std::path::Path::new(common::BIN).parent().unwrap();
    assert!(
        dir.join("allocbench-nearflow").is_file(),
        "build them first: cargo build --release -p nearflow-allocbench"
    );
    let v = json(&[
        "bench",
        "alloc",
        "--scale",
        "0.002",
        "--threads",
        "2",
        "--json",
    ]);
    let ms = v["measurements"].as_array().unwrap();
    // 4 allocators × (10 sizes × 2 latency patterns + 6 multi-thread patterns)
    let sizes = nearflow_allocbench::LATENCY_SIZES.len();
    assert_eq!(sizes, 10);
    assert_eq!(nearflow_allocbench::MT_PATTERNS.len(), 6);
    assert_eq!(ms.len(), 4 * (sizes * 2 + 6), "{v}");
    for m in ms {
        assert!(m["ns_per_op"].as_f64().unwrap() > 0.0);
        for k in ["allocator", "pattern", "size"] {
            assert!(!m[k].is_null(), "{m}");
        }
        let multi = !matches!(m["pattern"].as_str().unwrap(), "pair" | "batch64");
        assert_eq!(m["peak_rss_bytes"].is_u64(), multi, "{m}");
    }
}

/// `nearflow sim` prints SIMULATED tables for every policy, and refuses what it cannot model.
#[test]
fn sim_prints_simulated_tables_and_refuses_bad_input() {
    let out = common::ok(&[
        "sim",
        "--preset",
        "e7-4820",
        "--workload",
        "fib",
        "--size",
        "14",
        "--grid",
        "1x1,2x2",
        "--policies",
        "las,nls,bobox2011,fifo-rr",
    ]);
    assert!(
        out.contains("SIMULATED on a model of preset e7-4820"),
        "{out}"
    );
    for p in ["las", "nls", "bobox2011", "fifo-rr"] {
        assert!(out.contains(&format!("2x2    {p}")), "{out}");
    }
    let v = json(&[
        "sim",
        "--preset",
        "nehalem-2x4",
        "--workload",
        "matmul",
        "--size",
        "32",
        "--json",
    ]);
    for r in v.as_array().unwrap() {
        assert_eq!(r["simulated"], true);
        assert_eq!(r["tasks"], 1 + 32 * 32);
    }
    // SP²Bench plans: calibrated on a runtime of the simulated machine (here, oversubscribed),
    // over generated data.
    let out = common::ok(&[
        "sim",
        "--preset",
        "nehalem-2x4",
        "--workload",
        "sp2bench",
        "--queries",
        "q2,q4",
        "--concurrent",
        "1,3",
        "--triples",
        "4000",
        "--policies",
        "las,nls",
    ]);
    assert!(
        out.contains("SIMULATED on a model of preset nehalem-2x4"),
        "{out}"
    );
    for q in ["q2", "q4"] {
        assert!(out.contains(&format!("{q} on ")), "{out}");
        assert!(out.contains(&format!("{q} x3 (")), "{out}");
        for p in ["las", "nls"] {
            assert!(out.contains(&format!("{q} x3  {p}")), "{out}");
        }
    }
    assert!(out.contains("on 8 workers"), "{out}");
    let out = common::ok(&[
        "sim",
        "--preset",
        "nehalem-2x4",
        "--workload",
        "vwap",
        "--ticks",
        "20000",
        "--grid",
        "1x1",
        "--policies",
        "las",
    ]);
    assert!(out.contains("1x1: vwap x1 ("), "{out}");
    // The similarity search: both versions rank the same candidates, 2 requests of 10
    // queries; the split one has a task per partition a query reads on top.
    for (w, more) in [("ferret-plain", false), ("ferret-split", true)] {
        let v = json(&[
            "sim",
            "--preset",
            "e7540",
            "--workload",
            w,
            "--size",
            "10",
            "--grid",
            "2x1",
            "--policies",
            "las",
            "--json",
        ]);
        let tasks = v[0]["tasks"].as_u64().unwrap();
        assert_eq!(tasks > 2 + 20, more, "{w}: {tasks}");
    }
    fails_with(
        &["sim", "--workload", "sp2bench", "--concurrent", "0"],
        "between 1 and 4096",
    );
    fails_with(
        &["sim", "--workload", "sp2bench", "--triples", "0"],
        "out of range",
    );
    fails_with(
        &["sim", "--workload", "sp2bench", "--queries", "q99"],
        "q99",
    );
    fails_with(
        &["sim", "--chart", "f.svg"],
        "--models-dir and --chart go with --las-figures",
    );
    // The LAS paper's figures in one command (a few thousand triples here).
    let out = common::ok(&["sim", "--las-figures", "--triples", "3000", "--reps", "1"]);
    assert!(
        out.contains("LAS paper §6.2–6.4 (Figs. 5–10), SIMULATED"),
        "{out}"
    );
    assert!(out.contains("of 32 cells count"), "{out}");
    assert!(out.contains("e7-4820    q2      16"), "{out}");
    // The generated plan: calibrated from a traced run here, simulated on a preset.
    let out = common::ok(&[
        "sim",
        "--preset",
        "e7-4820",
        "--workload",
        "plans",
        "--rows",
        "2000",
        "--grid",
        "1x1,2x2",
        "--policies",
        "las,nls,bobox2011",
    ]);
    assert!(out.contains("calibrated on this host"), "{out}");
    assert!(
        out.contains("2x2: generated plan x4 (172 operators"),
        "{out}"
    );
    assert!(out.contains("2x2    bobox2011"), "{out}");
    fails_with(&["sim", "--grid", "2"], "not NxM");
    fails_with(&["sim", "--model", "nope=1"], "unknown model key");
    fails_with(&["sim", "--allocators", "tcmalloc"], "unknown allocator");
    fails_with(
        &["sim", "--workload", "matmul", "--size", "0"],
        "out of range",
    );
    fails_with(
        &["sim", "--preset", "e7-4820", "--validate"],
        "needs this host's topology",
    );
    // A real run of the same graphs beside the simulated one (figures not asserted: a
    // benchmark's, on a noisy machine).
    let out = common::ok(&[
        "sim",
        "--workload",
        "pipeline",
        "--size",
        "4",
        "--packet-bytes",
        "65536",
        "--grid",
        "1x1,2x1",
        "--policies",
        "las,fifo-rr",
        "--validate",
        "--reps",
        "1",
    ]);
    assert!(out.contains("validation on this host"), "{out}");
    // A timeline per run, titled SIMULATED.
    let dir = std::env::temp_dir().join(format!("nearflow-sim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("t.svg");
    common::ok(&[
        "sim",
        "--preset",
        "nehalem-2x4",
        "--workload",
        "fib",
        "--size",
        "10",
        "--grid",
        "1x1",
        "--policies",
        "las,nls",
        "--trace",
        file.to_str().unwrap(),
    ]);
    for p in ["las", "nls"] {
        let svg = std::fs::read_to_string(dir.join(format!("t-1x1-{p}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("SIMULATED"), "{p}");
        assert!(svg.matches("<rect").count() >= 177, "{p}: one box per task");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.matches("pipeline ").count(), 4, "{out}");
}

/// `nearflow map`: the mappers on presets and an XML machine without measuring, a profile
/// saved and read back, a simulated run labelled SIMULATED, a short run measured on the host
/// (every mapping computes the same result, or the command fails), and clear errors.
#[test]
fn map_presets_xml_profiles_simulation_and_host() {
    let dir = std::env::temp_dir().join(format!("nearflow-map-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prof = dir.join("lois4.json");
    let prof_s = prof.to_str().unwrap();
    let xml = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topo/tests/data/two-nodes.xml"
    );
    let v = json(&[
        "map",
        "--app",
        "lois",
        "--threads",
        "4",
        "--samples",
        "20000",
        "--preset",
        "x5355",
        "--no-measure",
        "--json",
        "--profile-out",
        prof_s,
    ]);
    let r = &v[0];
    assert_eq!(r["measured"], "not measured");
    assert_eq!(
        r["exhaustive_mappings"], 3,
        "4 threads on 2x2: three classes"
    );
    for row in r["rows"].as_array().unwrap() {
        let pus: Vec<u64> = row["pus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect();
        assert_eq!(pus.len(), 4, "{row}");
        let mut d = pus.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), 4, "one thread per PU: {row}");
        assert!(row["tuples_per_s"].is_null());
    }
    // LOIS threads 2 and 3 share the barrier: their correlation exceeds their communication.
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&prof).unwrap()).unwrap();
    let (c, k) = (&p["communication"], &p["correlation"]);
    assert!(
        k[1][2].as_u64().unwrap() + k[2][1].as_u64().unwrap()
            >= c[1][2].as_u64().unwrap() + c[2][1].as_u64().unwrap()
    );
    assert_eq!(p["contention_unit"], "working-set-bytes");
    // The profile read back gives the same mappings, on an XML machine too.
    let again = json(&[
        "map",
        "--app",
        "lois",
        "--threads",
        "4",
        "--samples",
        "20000",
        "--preset",
        "x5355",
        "--no-measure",
        "--json",
        "--profile",
        prof_s,
    ]);
    assert_eq!(again[0]["rows"], r["rows"]);
    let x = json(&[
        "map",
        "--app",
        "lois",
        "--threads",
        "4",
        "--samples",
        "20000",
        "--xml",
        xml,
        "--no-measure",
        "--json",
        "--profile",
        prof_s,
        "--mapper",
        "holistic,treematch",
    ]);
    assert_eq!(
        x[0]["rows"].as_array().unwrap().len(),
        3,
        "two mappers and random"
    );
    // Simulated: every row measured except the OS default, all labelled SIMULATED.
    let s = json(&[
        "map",
        "--app",
        "vwap",
        "--threads",
        "3",
        "--ticks",
        "20000",
        "--preset",
        "nehalem-2x4",
        "--simulate",
        "--json",
    ]);
    assert_eq!(s[0]["measured"], "SIMULATED");
    for row in s[0]["rows"].as_array().unwrap() {
        if row["name"] == "os-default" {
            assert!(row["error"].as_str().unwrap().contains("not modelled"));
        } else {
            assert!(row["tuples_per_s"].as_f64().unwrap() > 0.0, "{row}");
        }
    }
    // On the host, measured: 2 threads, one round.
    let h = json(&[
        "map",
        "--app",
        "vwap",
        "--threads",
        "2",
        "--ticks",
        "20000",
        "--repeat",
        "1",
        "--json",
    ]);
    assert!(h[0]["measured"]
        .as_str()
        .unwrap()
        .starts_with("measured on"));
    assert!(h[0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "os-default" && r["tuples_per_s"].as_f64().unwrap() > 0.0));
    // Online re-mapping on the host: both runs checked against the reference inside.
    let o = json(&[
        "map",
        "--online",
        "--threads",
        "3",
        "--ticks",
        "40000",
        "--repeat",
        "1",
        "--period-ms",
        "5",
        "--json",
    ]);
    assert!(o["static_tuples_per_s"].as_f64().unwrap() > 0.0);
    assert!(o["online_tuples_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(o["first_mapping"].as_array().unwrap().len(), 3);
    fails_with(
        &["map", "--online", "--preset", "x5355"],
        "runs on this host",
    );
    fails_with(&["map", "--online", "--app", "lois"], "not supported");
    fails_with(&["map", "--online", "--threads", "2,4"], "one thread count");
    fails_with(&["map", "--margin", "1.5", "--no-measure"], "--margin");
    // Bad input.
    fails_with(&["map", "--app", "nope"], "unknown --app");
    fails_with(
        &["map", "--app", "lois", "--threads", "7", "--no-measure"],
        "1 to 6 threads",
    );
    fails_with(&["map", "--threads", "0"], "at least 1");
    fails_with(
        &["map", "--mapper", "best", "--no-measure"],
        "unknown mapper",
    );
    fails_with(
        &["map", "--window", "huge", "--no-measure"],
        "--window huge",
    );
    fails_with(
        &[
            "map",
            "--threads",
            "4",
            "--profile",
            "/no/such.json",
            "--no-measure",
        ],
        "cannot read profile",
    );
    std::fs::write(dir.join("bad.json"), "{\"app\": 1}").unwrap();
    fails_with(
        &[
            "map",
            "--threads",
            "4",
            "--no-measure",
            "--profile",
            dir.join("bad.json").to_str().unwrap(),
        ],
        "bad profile",
    );
    fails_with(
        &[
            "map",
            "--app",
            "lois",
            "--threads",
            "5",
            "--no-measure",
            "--profile",
            prof_s,
        ],
        "has 4 threads, not 5",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `nearflow bench streammap`: the three micro-benchmarks run (figures only) and bad input is
/// refused.
#[test]
fn bench_streammap_runs_and_refuses_bad_input() {
    let out = common::ok(&[
        "bench",
        "streammap",
        "--tuples",
        "20000",
        "--rounds",
        "2000",
        "--repeat",
        "1",
    ]);
    for needle in [
        "producer → consumer",
        "same PU",
        "other PU",
        "unbound (OS)",
        "HashJoin",
        "barrier",
    ] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
    fails_with(
        &["bench", "streammap", "--micro", "nope"],
        "unknown micro-benchmark",
    );
    fails_with(&["bench", "streammap", "--repeat", "0"], "out of range");
    let sim = common::ok(&[
        "bench",
        "streammap",
        "--simulate",
        "x5355",
        "--tuples",
        "20000",
        "--rounds",
        "500",
    ]);
    for needle in [
        "SIMULATED",
        "PU 0 and 1: L2",
        "PU 0 and 2: only the machine",
        "Sort",
    ] {
        assert!(sim.contains(needle), "{needle}: {sim}");
    }
    fails_with(
        &["bench", "streammap", "--simulate", "x9999"],
        "unknown preset",
    );
    fails_with(
        &[
            "bench",
            "streammap",
            "--simulate",
            "x5355",
            "--micro",
            "nope",
        ],
        "unknown micro-benchmark",
    );
}

/// every numeric flag has a stated range; a value far outside it (2⁶⁴ − 1)
/// is refused at once with the range, never a panic ("capacity overflow"), a segfault or a
/// run that never ends.
#[test]
fn numeric_flags_refuse_values_outside_their_range() {
    const HUGE: &str = "18446744073709551615";
    let cases: &[&[&str]] = &[
        &["stress", "--tasks", HUGE],
        &["stress", "--requests", HUGE],
        &["stress", "--fanout", HUGE],
        &["stress", "--stall-secs", HUGE],
        &["run", "vwap", "--ticks", HUGE],
        &["run", "vwap", "--packet-bytes", HUGE],
        &["run", "vwap", "--branches", HUGE],
        &["run", "vwap", "--window", HUGE],
        &["run", "vwap", "--top", HUGE],
        &["run", "vwap", "--repeat", HUGE],
        &["run", "plan", "--rows", HUGE],
        &["bench", "overhead", "--tasks", HUGE],
        &["bench", "overhead", "--fib", HUGE],
        &["bench", "overhead", "--reps", "0"],
        &["bench", "packet-size", "--rows", HUGE],
        &["bench", "plans", "--packet-bytes", HUGE],
        &["bench", "plans", "--rows", HUGE],
        &["bench", "plans", "--reps", "0"],
        &["bench", "queues", "--reps", HUGE],
        &["bench", "alloc", "--threads", HUGE],
        &["bench", "alloc", "--scale", "NaN"],
        &["bench", "split", "--points", HUGE],
        &["bench", "split", "--dim", HUGE],
        &["bench", "streammap", "--tuples", HUGE],
        &["bench", "streammap", "--packet-bytes", HUGE],
        &["bench", "numa-factor", "--mib", HUGE],
        &["bench", "phase", "--every-ms", HUGE],
        &["bench", "sp2bench", "--peer-timeout", "inf"],
        &["gen", "sp2bench", "--triples", HUGE, "--out", "/tmp/x.n3"],
        &["map", "--ticks", HUGE],
        &["map", "--period-ms", HUGE],
        &["map", "--margin=-1"],
        &["sim", "--packets", HUGE],
        &["sim", "--ns-per-byte", "1e400"],
        &["sim", "--reps", "0"],
        &["sparql", "--data", "x.ttl", "-e", "ASK {}", "--dop", HUGE],
    ];
    for args in cases {
        let out = nearflow(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("out of range")
                || err.contains("not a whole number")
                || err.contains("not a number"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // Lists of numbers are checked too.
    for (args, needle) in [
        (
            &["bench", "plans", "--grid", "1x18446744073709551615"][..],
            "at most 4096 plans",
        ),
        (
            &["bench", "queues", "--sizes", HUGE][..],
            "between 1 and 8192",
        ),
        (
            &["bench", "packet-size", "--sizes-kib", HUGE][..],
            "1..=1048576 KiB",
        ),
        (
            &[
                "bench",
                "sp2bench",
                "--data",
                "/no/such.ttl",
                "--concurrent",
                HUGE,
            ][..],
            "1..=1024",
        ),
    ] {
        fails_with(args, needle);
    }
}

/// absurd topologies are refused at load, with a clear error, before
/// anything is sized by them; `topo --json` of a large machine leaves out the PU × PU matrices.
#[test]
fn absurd_topologies_are_refused_and_large_ones_print_small() {
    for (shape, needle) in [
        ("pu:100000", "at most 4096"),
        ("l2:1(size=4TiB) pu:2", "at most 64 GiB"),
        ("l2:1(size=-1) pu:2", "at most 64 GiB"),
    ] {
        fails_with(&["topo", "--synthetic", shape], needle);
        fails_with(&["stress", "--synthetic", shape, "--tasks", "10"], needle);
    }
    let v = json(&["topo", "--synthetic", "pack:2 core:200 pu:2", "--json"]);
    assert_eq!(v["pus"], 800);
    assert!(
        v["cache_distance"].is_null() && v["numa_distance"].is_null(),
        "{}",
        v["pu_matrices"]
    );
    assert!(v["pu_matrices"].as_str().unwrap().contains("omitted"));
}

/// Small faults: a closed stdout ends the program quietly; `gen sp2bench` refuses a
/// name the loader would read as N-Triples; `bench sp2bench --peer` without `--data` is refused
/// before any query runs.
#[test]
fn a_closed_pipe_a_wrong_extension_and_a_missing_flag_fail_early_and_quietly() {
    use std::io::Read;
    let mut child = std::process::Command::new(common::BIN)
        .args(["topo", "--synthetic", "pack:2 core:128 pu:1", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(status.code(), Some(101), "a panic's exit status: {err}");
    // `--out -` streams the same document to standard output.
    let file = std::env::temp_dir().join(format!("nearflow-gen-{}.ttl", std::process::id()));
    let written = nearflow(&[
        "gen",
        "sp2bench",
        "--triples",
        "3000",
        "--out",
        file.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(written.status.success());
    let streamed = nearflow(&[
        "gen",
        "sp2bench",
        "--triples",
        "3000",
        "--out",
        "-",
        "--quiet",
    ]);
    assert!(streamed.status.success());
    assert_eq!(streamed.stdout, std::fs::read(&file).unwrap());
    std::fs::remove_file(&file).unwrap();
    for out in ["/tmp/nearflow-gen.nt", "/tmp/nearflow-gen.nq.gz"] {
        fails_with(
            &["gen", "sp2bench", "--triples", "10", "--out", out],
            "writes Turtle",
        );
        assert!(!std::path::Path::new(out).exists());
    }
    fails_with(
        &[
            "bench",
            "sp2bench",
            "--store",
            "/no/such.nfs",
            "--peer",
            "oxigraph",
        ],
        "--peer oxigraph needs --data",
    );
}

#[test]
fn bench_checkpoint_updates_a_linked_copy_and_counts_the_store_again() {
    let dir = std::env::temp_dir().join(format!("nearflow-ckpt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("d.ttl");
    std::fs::write(
        &data,
        "<http://ex/a> <http://ex/b> <http://ex/c> .\n<http://ex/a> <http://ex/b> <http://ex/d> .\n",
    )
    .unwrap();
    let store = dir.join("s.nfs");
    let out = nearflow(&[
        "load",
        "--quiet",
        "--save",
        store.to_str().unwrap(),
        data.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = std::fs::read(&store).unwrap();
    let log = dir.join("s.nfs.log");
    let log_before = std::fs::read(&log).unwrap();
    let work = dir.join("work");
    let v = json(&[
        "bench",
        "checkpoint",
        "--store",
        store.to_str().unwrap(),
        "--work",
        work.to_str().unwrap(),
        "--updates",
        "40",
        "--triples",
        "3",
        "--quiet",
        "--json",
    ]);
    assert_eq!(v["store_quads"], 2);
    assert_eq!(v["quads_inserted"], 120);
    assert_eq!(v["reopened_quads"], 122);
    // A small store is merged in memory: its checkpoint writes the snapshot again.
    assert_eq!(v["wrote"], "snapshot");
    assert_eq!(v["snapshot_untouched"], false);
    assert!(v["checkpoint_bytes"].as_u64().unwrap() > 0);
    assert_eq!(
        std::fs::read(&store).unwrap(),
        before,
        "the store itself is not written"
    );
    assert_eq!(std::fs::read(&log).unwrap(), log_before);
    assert!(!dir.join("s.nfs.delta").exists());
    // The working folder must be new.
    fails_with(
        &[
            "bench",
            "checkpoint",
            "--store",
            store.to_str().unwrap(),
            "--work",
            work.to_str().unwrap(),
            "--quiet",
        ],
        "not empty",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
