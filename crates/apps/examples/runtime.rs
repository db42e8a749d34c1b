//! The runtime alone: submit a request, spawn immediate and deferred tasks, wait, read the
//! counters. `cargo run --release -p nearflow-apps --example runtime [TASKS]`
//!
//! Runs on this machine's topology, and again on the 4-node E7-4820 preset of the LAS paper
//! (64 threads: oversubscribed here, which works, only slower).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nearflow_policy::PolicyKind;
use nearflow_rt::Runtime;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tasks: u64 = std::env::args().nth(1).map_or(Ok(10_000), |s| s.parse())?;
    for machine in [
        nearflow_topo::detect_host()?,
        nearflow_topo::presets::build("e7-4820")?,
    ] {
        let rt = Runtime::builder(machine).policy(PolicyKind::Las).build()?;
        let sum = Arc::new(AtomicU64::new(0));
        let s = sum.clone();
        // The root task runs as a deferred task; each deferred child (independent work, possibly
        // far away) spawns an immediate grandchild (shares its data: runs nearby, soon).
        let handle = rt.submit(move |cx| {
            for i in 0..tasks {
                let s = s.clone();
                cx.spawn_deferred(move |cx| {
                    cx.spawn_immediate(move |_| {
                        s.fetch_add(i, Ordering::Relaxed);
                    });
                });
            }
            "root done"
        });
        // `wait` returns once every task of the request has ended.
        assert_eq!(handle.wait()?, "root done");
        assert_eq!(sum.load(Ordering::Relaxed), tasks * (tasks - 1) / 2);
        let counters = rt.counters();
        let executed: u64 = counters.workers.iter().map(|w| w.executed).sum();
        let steals: u64 = counters.workers.iter().map(|w| w.steals).sum();
        println!(
            "{:>3} workers: {executed} tasks run, {steals} stolen",
            rt.workers(),
        );
    }
    Ok(())
}
