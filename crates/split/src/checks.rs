//! Placement checks of SplittableData on this host, for `nearflow check placement` (and so for
//! the two-node QEMU guest of `scripts/numa-vm-test.sh`): each partition's pages are on its
//! node (`move_pages`), each dispatched task's node as the runtime counts it is the node of the
//! CPU it really ran on, and homed tasks run at home when no worker is idle to steal them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nearflow_alloc::checks::{page_census, Check};
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

/// The runtime both task checks use: LAS, threads bound to their core group.
fn las_runtime(host: &Machine) -> Result<Runtime, String> {
    Runtime::builder(host.clone())
        .policy(PolicyKind::Las)
        .pinning(Pinning::Group)
        .build()
        .map_err(|e| e.to_string())
}

/// How long a task of [`homed_tasks_run_at_home_when_no_worker_is_idle`] waits for the others
/// before the check gives up (a worker that never took a task).
const PATIENCE: Duration = Duration::from_secs(10);

/// Spins until `count` reaches `want` or [`PATIENCE`] runs out; whether it was reached.
fn await_count(count: &AtomicUsize, want: usize) -> bool {
    let t = Instant::now();
    // Acquire: pairs with the Release increments (only the count matters here).
    while count.load(Ordering::Acquire) < want {
        if t.elapsed() > PATIENCE {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// Homing, checked where LAS promises it (§4: a worker looks for deferred tasks in its own
/// group's and node's queues before it steals from another node): every worker is first held
/// busy, then as many tasks homed on each node as the node has workers are submitted (they wait
/// in their node's queue), then the workers are let go; each finds its own node's task first,
/// and every task waits until all have started, so no worker is idle to steal. Ten rounds;
/// every task must run on its partition's node and be counted there. (A dispatch onto idle
/// workers promises less: an idle worker may take another node's deferred task before that
/// node's worker wakes, LAS rule 4, which [`dispatched_tasks_run_where_counted`] reports.)
pub fn homed_tasks_run_at_home_when_no_worker_is_idle(host: &Machine) -> Check {
    let name = "homed tasks run at home when no worker is idle".to_string();
    let fail = |detail: String| Check {
        name: name.clone(),
        ok: false,
        detail,
    };
    let rt = match las_runtime(host) {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let workers = rt.workers();
    let mut per_node = vec![0usize; host.node_count()];
    for w in 0..workers {
        per_node[host.node_of(w)] += 1;
    }
    // (node, home) of each node with workers; a node without CPUs has no worker to find them.
    let mut homes = Vec::new();
    for (node, &n) in per_node.iter().enumerate() {
        if n > 0 {
            match rt.home_on_node(node) {
                Ok(h) => homes.extend(std::iter::repeat_n((node, h), n)),
                Err(e) => return fail(e.to_string()),
            }
        }
    }
    let tasks = homes.len();
    // (home node, runtime's node, CPU's node) of every task.
    let seen: Arc<Mutex<Vec<(usize, usize, usize)>>> = Arc::default();
    for round in 0..10 {
        let go = Arc::new(AtomicBool::new(false));
        let busy = Arc::new(AtomicUsize::new(0));
        let blockers: Vec<_> = (0..workers)
            .map(|_| {
                let (go, busy) = (go.clone(), busy.clone());
                rt.submit(move |_| {
                    busy.fetch_add(1, Ordering::Release);
                    let t = Instant::now();
                    // Acquire: pairs with the Release store of `go`.
                    while !go.load(Ordering::Acquire) && t.elapsed() < PATIENCE {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        if !await_count(&busy, workers) {
            go.store(true, Ordering::Release);
            return fail(format!(
                "round {round}: only {} of {workers} workers took a blocking task",
                busy.load(Ordering::Acquire)
            ));
        }
        let started = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = homes
            .iter()
            .map(|&(node, home)| {
                let (s, started) = (seen.clone(), started.clone());
                rt.submit_at(home, move |cx| {
                    let real = nearflow_alloc::current_node();
                    s.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((node, cx.node(), real));
                    started.fetch_add(1, Ordering::Release);
                    await_count(&started, tasks)
                })
            })
            .collect();
        // Release: the tasks were queued before any worker is let go.
        go.store(true, Ordering::Release);
        for b in blockers {
            if let Err(e) = b.wait() {
                return fail(e.to_string());
            }
        }
        for h in handles {
            match h.wait() {
                Ok(true) => {}
                Ok(false) => {
                    return fail(format!(
                        "round {round}: a task waited {PATIENCE:?} for the others to start"
                    ))
                }
                Err(e) => return fail(e.to_string()),
            }
        }
    }
    let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let (local, remote) = rt.counters().homed();
    let at_home = seen.iter().filter(|&&(node, _, real)| node == real).count();
    let truthful = seen.iter().all(|&(_, counted, real)| counted == real);
    Check {
        name,
        ok: at_home == seen.len() && truthful && remote == 0 && local == seen.len() as u64,
        detail: format!(
            "10 rounds of {tasks} task(s) homed on nodes with workers {:?}: {at_home} of {} ran \
             on their node, counted {local} at home and {remote} away; runtime node = CPU node \
             for all: {truthful}",
            per_node
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(node, _)| node)
                .collect::<Vec<_>>(),
            seen.len()
        ),
    }
}

/// Dispatches to one partition per node of the host, 40 times, under LAS with group pinning, on
/// idle workers, and checks that the runtime's node of each task is the node it ran on, and that
/// its local and remote counts agree with that. How many ran at home is reported, not required:
/// the dispatch's root runs on one worker while the others may sleep, and an idle worker may
/// take another node's deferred task before that node's worker wakes (LAS rule 4; in the
/// two-node QEMU guest, about half of them); homing itself is checked by
/// [`homed_tasks_run_at_home_when_no_worker_is_idle`].
pub fn dispatched_tasks_run_where_counted(host: &Machine) -> Check {
    let name = "dispatched tasks run where the runtime counts them".to_string();
    let fail = |detail: String| Check {
        name: name.clone(),
        ok: false,
        detail,
    };
    let rt = match las_runtime(host) {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let data = match SplittableData::build(host, SplitBy::Node, |info| info.node) {
        Ok(d) => d,
        Err(e) => return fail(e.to_string()),
    };
    // (partition node, runtime's node, CPU's node, round, worker) of every task.
    type Seen = (usize, usize, usize, usize, usize);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    for round in 0..40 {
        let s = seen.clone();
        let r = data.dispatch(
            &rt,
            move |cx, &node, _| {
                let real = nearflow_alloc::current_node();
                s.lock().unwrap_or_else(|p| p.into_inner()).push((
                    node,
                    cx.node(),
                    real,
                    round,
                    cx.worker(),
                ));
            },
            |(), ()| (),
        );
        if let Err(e) = r {
            return fail(e.to_string());
        }
    }
    let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // Tasks run away from home by a worker that also ran another task of the same dispatch: it
    // took the other node's task when it had finished its own, before that node's worker came.
    let by_a_busy_worker = seen
        .iter()
        .filter(|&&(node, _, real, round, worker)| {
            node != real
                && seen
                    .iter()
                    .filter(|&&(.., r, w)| r == round && w == worker)
                    .count()
                    > 1
        })
        .count();
    let (local, remote) = rt.counters().homed();
    let truthful = seen.iter().all(|&(_, counted, real, ..)| counted == real);
    let at_home = seen
        .iter()
        .filter(|&&(node, _, real, ..)| node == real)
        .count() as u64;
    Check {
        name,
        ok: truthful && local == at_home && local + remote == seen.len() as u64,
        detail: format!(
            "{} tasks: {local} counted at home, {at_home} ran on their partition's node, {remote} \
             away ({by_a_busy_worker} of them by a worker that ran another task of the same \
             dispatch); runtime node = CPU node for all: {truthful}",
            seen.len()
        ),
    }
}
