//! Placement checks of SplittableData on this host, for `nearflow check placement` (and so for
//! the two-node QEMU guest of `scripts/numa-vm-test.sh`): each partition's pages are on its
//! node (`move_pages`), and each dispatched task's node as the runtime counts it is the node
//! of the CPU it really ran on.

use std::sync::{Arc, Mutex};

use nearflow_alloc::placement::{page_census, Check};
use nearflow_policy::PolicyKind;
use nearflow_rt::{Pinning, Runtime};
use nearflow_topo::Machine;

use crate::{Placed, SplitBy, SplittableData};

/// Values per partition in the page check (2 MiB of `u64`).
const VALUES: usize = 1 << 18;

/// Builds one 2 MiB partition per node of the host and checks where its pages are.
pub fn partitions_on_their_nodes(host: &Machine) -> Check {
    let name = "SplittableData partitions are on their nodes".to_string();
    let data = match SplittableData::build(host, SplitBy::Node, |info| {
        (0..VALUES as u64)
            .map(|x| x ^ info.node as u64)
            .collect::<Vec<u64>>()
    }) {
        Ok(d) => d,
        Err(e) => {
            return Check {
                name,
                ok: false,
                detail: e.to_string(),
            }
        }
    };
    let mut ok = true;
    let mut detail = Vec::new();
    for p in data.partitions() {
        let census = page_census(p.data.as_ptr().cast(), p.data.len() * 8);
        let right = p.placed == Placed::Bound
            && census
                .as_ref()
                .is_ok_and(|c| c.iter().all(|&(n, _)| n == p.info.node as i32));
        ok &= right;
        detail.push(format!(
            "partition {} (node {}): {:?}, pages per node {:?}",
            p.info.index, p.info.node, p.placed, census
        ));
    }
    Check {
        name,
        ok,
        detail: detail.join("; "),
    }
}

/// Dispatches to one partition per node of the host, 40 times, under LAS with group pinning,
/// and checks that the runtime's node of each task is the node it ran on, that its local and
/// remote counts agree with that, and that every partition's tasks ran at home at least once.
pub fn dispatched_tasks_run_where_counted(host: &Machine) -> Check {
    let name = "dispatched tasks run where the runtime counts them".to_string();
    let fail = |detail: String| Check {
        name: name.clone(),
        ok: false,
        detail,
    };
    let rt = match Runtime::builder(host.clone())
        .policy(PolicyKind::Las)
        .pinning(Pinning::Group)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(e.to_string()),
    };
    let data = match SplittableData::build(host, SplitBy::Node, |info| info.node) {
        Ok(d) => d,
        Err(e) => return fail(e.to_string()),
    };
    // (partition node, runtime's node, CPU's node) of every task.
    let seen: Arc<Mutex<Vec<(usize, usize, usize)>>> = Arc::default();
    for _ in 0..40 {
        let s = seen.clone();
        let r = data.dispatch(
            &rt,
            move |cx, &node, _| {
                let real = nearflow_alloc::current_node();
                s.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((node, cx.node(), real));
            },
            |(), ()| (),
        );
        if let Err(e) = r {
            return fail(e.to_string());
        }
    }
    let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let (local, remote) = rt.counters().homed();
    let truthful = seen.iter().all(|&(_, counted, real)| counted == real);
    let at_home = seen.iter().filter(|&&(node, _, real)| node == real).count() as u64;
    let every_home =
        (0..data.len()).all(|n| seen.iter().any(|&(node, _, real)| node == n && real == n));
    Check {
        name,
        ok: truthful
            && local == at_home
            && local + remote == seen.len() as u64
            && every_home,
        detail: format!(
            "{} tasks: {local} counted at home, {at_home} ran on their partition's node, {remote} \
             away; runtime node = CPU node for all: {truthful}; every partition ran at home: {every_home}",
            seen.len()
        ),
    }
}
