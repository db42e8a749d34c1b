//! The `nearflow` binary as a user runs it: the product commands' outputs, JSON keys, and clear
//! errors on bad input; the experiments' commands handed on to `nearflow-lab`.

mod common;

use common::{json, nearflow};

#[test]
fn topo_json_of_presets() {
    let expect = [
        ("e7-4820", 64, 4, vec![16; 4]),
        ("e5310-smp", 8, 1, vec![2; 4]),
        ("e7540", 48, 4, vec![12; 4]),
        ("i7-2600", 8, 1, vec![8]),
        ("x5355", 4, 1, vec![2; 2]),
        ("nehalem-2x4", 8, 2, vec![4; 2]),
        ("e5320-uma", 8, 1, vec![2; 4]),
    ];
    for (name, pus, nodes, groups) in expect {
        let v = json(&["topo", "--preset", name, "--json"]);
        assert_eq!(v["pus"], pus, "{name}");
        assert_eq!(v["numa_nodes"], nodes, "{name}");
        let sizes: Vec<usize> = v["core_groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_array().unwrap().len())
            .collect();
        assert_eq!(sizes, groups, "{name}");
    }
}

#[test]
fn topo_text_and_host() {
    let out = nearflow(&["topo", "--preset", "nehalem-2x4"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Core groups") && text.contains("NUMA node distances (raw"),
        "{text}"
    );
    let v = json(&["topo", "--json"]);
    let n = std::thread::available_parallelism().unwrap().get();
    assert_eq!(v["pus"], n);
    let xml = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topo/tests/data/two-nodes.xml"
    );
    let v = json(&["topo", "--xml", xml, "--json"]);
    assert_eq!(v["numa_nodes"], 2);
    assert_eq!(v["numa_matrix_raw"][0][1], 21);
}

#[test]
fn run_vwap_generated_json_and_reference() {
    for policy in ["las", "nls", "bobox2011", "fifo-rr"] {
        let v = json(&[
            "run",
            "vwap",
            "--ticks",
            "20000",
            "--branches",
            "3",
            "--policy",
            policy,
            "--preset",
            "e5310-smp",
            "--json",
        ]);
        assert_eq!(v["tuples_in"], 20000);
        assert!(v["bargains"].as_u64().unwrap() > 0);
        assert_eq!(v["checksum"].as_str().unwrap().len(), 16);
        assert_eq!(v["matches_reference"], true, "{policy}");
        assert!(v["top"].as_array().unwrap().len() <= 10);
    }
}

#[test]
#[ignore = "needs ../shared/data: ./test.sh runs it, and CI fails without the data"]
fn run_vwap_real_file() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/vwap/TradesAndQuotes.csv.gz"
    );
    assert!(
        std::path::Path::new(path).exists(),
        "{path} is missing: this test needs the VWAP file"
    );
    let mut sums = Vec::new();
    for branches in ["1", "8"] {
        let v = json(&[
            "run",
            "vwap",
            "--input",
            path,
            "--branches",
            branches,
            "--json",
        ]);
        assert_eq!(v["tuples_in"], 29999);
        assert_eq!(v["matches_reference"], true);
        sums.push(v["checksum"].clone());
    }
    assert_eq!(sums[0], sums[1]);
}

#[test]
fn run_with_trace_writes_svg() {
    let dir = std::env::temp_dir().join(format!("nearflow-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("plan.svg");
    let v = json(&[
        "run",
        "plan",
        "--rows",
        "2000",
        "--json",
        "--trace",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(v["matches_reference"], true);
    assert!(v["operators"].as_u64().unwrap() >= 160);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("<title>request"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_placement_passes_here() {
    let v = json(&["check", "placement", "--json"]);
    assert_eq!(v["failed"], 0, "{v}");
    let checks = v["checks"].as_array().unwrap();
    assert!(checks.iter().all(|c| c["ok"] == true), "{v}");
    let detail = |name: &str| {
        checks
            .iter()
            .find(|c| c["name"].as_str().unwrap().contains(name))
            .unwrap_or_else(|| panic!("no check {name}: {v}"))["detail"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let nodes = v["nodes"].as_array().unwrap().len();
    assert_eq!(v["across_nodes"], nodes > 1);
    // What holds on any number of nodes: a node that does not exist is refused, a freed block
    // goes back to its owner, and every homed task is counted where it ran. (Which node is the
    // right one only means something on several: scripts/numa-vm-test.sh, two nodes in QEMU.)
    assert!(
        detail("allocate on missing node").starts_with("refused: "),
        "{v}"
    );
    assert!(
        detail("returns to its owner").contains("reused the same block: true"),
        "{v}"
    );
    let homed = detail("homed tasks run at home");
    let tasks = std::thread::available_parallelism().unwrap().get() * 10;
    assert!(
        homed.contains(&format!(
            "{tasks} of {tasks} ran on their node, counted {tasks} at home and 0 away"
        )),
        "{homed}"
    );
    assert!(detail("dispatched tasks").contains("runtime node = CPU node for all: true"));
    let text = common::ok(&["check", "placement"]);
    assert_eq!(text.contains("one NUMA node here"), nodes == 1, "{text}");
}

/// `nearflow bench …` runs `nearflow-lab bench …` beside it, with every argument as given; with
/// no `nearflow-lab` there nor on the `PATH`, it says how to get one and exits with status 2.
#[test]
fn experiments_are_handed_to_the_lab_binary() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("nearflow-hand-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("nearflow");
    std::fs::copy(env!("CARGO_BIN_EXE_nearflow"), &bin).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(&bin)
            .args(args)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap()
    };
    let alone = run(&["sim", "--preset", "x5355"]);
    assert_eq!(alone.status.code(), Some(2));
    let err = String::from_utf8_lossy(&alone.stderr);
    assert!(
        err.contains("nearflow-lab") && err.contains("cargo build"),
        "{err}"
    );
    let lab = dir.join("nearflow-lab");
    std::fs::write(&lab, "#!/bin/sh\necho \"lab:$*\"\n").unwrap();
    std::fs::set_permissions(&lab, std::fs::Permissions::from_mode(0o755)).unwrap();
    let handed = run(&["bench", "queues", "--sizes", "a b"]);
    assert!(handed.status.success());
    assert_eq!(
        String::from_utf8_lossy(&handed.stdout),
        "lab:bench queues --sizes a b\n"
    );
    // A product command stays here.
    let topo = run(&["topo", "--preset", "x5355"]);
    assert!(topo.status.success());
    assert!(!String::from_utf8_lossy(&topo.stdout).contains("lab:"));
    std::fs::remove_dir_all(&dir).unwrap();
}
