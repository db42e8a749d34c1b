//! `scope`: tasks that write into the caller's buffers, spawned immediate (near their spawner),
//! deferred, and at a NUMA node's home; the scope returns when all have run.
//!
//! `cargo run --release -p nearflow --example scope`

use nearflow::{presets, PolicyKind, Runtime};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The LAS paper's 4-node machine, oversubscribed on this host.
    let rt = Runtime::builder(presets::build("e7-4820")?)
        .policy(PolicyKind::Las)
        .build()?;
    let mut per_node = vec![0u64; 4];
    let mut squares = vec![0u64; 16];
    rt.scope(|s| {
        for (node, slot) in per_node.iter_mut().enumerate() {
            let home = rt.home_on_node(node).expect("the machine has four nodes");
            // Work whose data lives on `node`: queued where LAS puts that node's work.
            s.spawn_at(home, move |_| *slot = (node as u64 + 1) * 100);
        }
        for (i, sq) in squares.iter_mut().enumerate() {
            s.spawn(move |_| *sq = (i * i) as u64); // immediate: runs near this task
        }
        s.spawn_deferred(|s| {
            // The start of a large part of the work: may run on any node, and spawn more.
            s.spawn(|_| println!("a task spawned from a deferred one"));
        });
    });
    println!("per node: {per_node:?}");
    println!("squares: {squares:?}");
    let c = rt.counters();
    let (home, away): (u64, u64) = c
        .workers
        .iter()
        .fold((0, 0), |(h, a), w| (h + w.home_local, a + w.home_remote));
    println!("homed tasks run at home: {home}, away: {away}");
    Ok(())
}
