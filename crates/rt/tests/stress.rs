//! Stress: random task DAGs over many concurrent requests, for every policy on several machines.
//! Every task is counted: each runs exactly once, every request completes, and no worker sleeps
//! while work it could run waits with no task running (see `nearflow_rt::stress`).

use std::time::Duration;

use nearflow_policy::PolicyKind;
use nearflow_rt::stress::{self, StressConfig};
use nearflow_rt::{Runtime, SleepBarriers};
use nearflow_topo::{presets, Machine, TopologySpec};

fn check(machine: Machine, label: &str, tasks: u64, requests: u64) {
    for policy in PolicyKind::ALL {
        // Both barriers of the sleep protocol, one seed each.
        for (seed, barriers) in [(1, SleepBarriers::Fence), (2, SleepBarriers::Membarrier)] {
            let rt = Runtime::builder(machine.clone())
                .policy(policy)
                .sleep_barriers(barriers)
                .build()
                .unwrap();
            let cfg = StressConfig {
                tasks,
                requests,
                seed,
                stall_timeout: Duration::from_secs(10),
                deadline: Duration::from_secs(240),
                ..StressConfig::default()
            };
            match stress::run(&rt, &cfg) {
                Ok(r) => {
                    assert!(
                        r.is_exact(),
                        "{policy} on {label}, seed {seed} ({barriers}): spawned {} executed {} (workers say {}, requests say {}) duplicated {} missing {} requests {}/{}",
                        r.spawned, r.executed, r.worker_executed, r.request_executed_sum, r.duplicated, r.missing,
                        r.requests_completed, r.requests_submitted
                    );
                    assert_eq!(r.spawned, tasks);
                    // Each request owns an exact budget: tasks / requests, the first ones one more.
                    assert_eq!(
                        r.request_executed_min,
                        tasks / requests,
                        "{policy} on {label}"
                    );
                    assert_eq!(
                        r.request_executed_max,
                        tasks.div_ceil(requests),
                        "{policy} on {label}"
                    );
                }
                Err(e) => {
                    // The runtime cannot be dropped with requests stuck in it: leak it and fail.
                    std::mem::forget(rt);
                    panic!("{policy} on {label}, seed {seed}: {e}");
                }
            }
        }
    }
}

#[test]
fn stress_host() {
    check(TopologySpec::Host.load().unwrap(), "host", 40_000, 64);
}

#[test]
fn stress_e5310_smp() {
    check(
        presets::build("e5310-smp").unwrap(),
        "e5310-smp",
        40_000,
        64,
    );
}

#[test]
fn stress_e7_4820() {
    check(presets::build("e7-4820").unwrap(), "e7-4820", 40_000, 64);
}

#[test]
fn stress_e7540() {
    check(presets::build("e7540").unwrap(), "e7540", 40_000, 64);
}

#[test]
fn stress_single_request_many_tasks() {
    // One request only: LAS rule 4 must spread it over groups, Bobox must share it.
    for name in ["e7-4820", "nehalem-2x4"] {
        check(presets::build(name).unwrap(), name, 30_000, 1);
    }
}

/// NUMA nodes that share their CPUs with another node, and nodes without
/// CPUs (KNL's memory-only MCDRAM, sub-NUMA clusters, CXL memory): hwloc attaches several
/// nodes to one package, and the model gives each PU to one of them, so some nodes have no
/// worker. No policy may place work where no worker can take it.
#[test]
fn stress_nodes_sharing_cpus_or_without_cpus() {
    for shape in [
        "pack:2 [numa] [numa] core:2 pu:2",
        "[numa] pack:2 [numa] core:2 pu:1",
        "pack:2 core:2 [numa] [numa] pu:2",
    ] {
        let m = nearflow_topo::from_synthetic(shape).unwrap();
        check(m, shape, 40_000, 64);
    }
}
