//! Building partitions on their nodes (Fig. 5's `newAtProcessor`).
//!
//! Each partition is built by its own thread, all at once, and the thread is bound to the PUs of
//! the partition's node (or group) first when the machine is this host's: whatever the build
//! allocates and first writes then lands on that node, under Linux's first-touch policy with the
//! system allocator, and in that node's superblocks with `nearflow-alloc` as the global
//! allocator (its per-thread allocators take the node of the CPU they run on, LAS §5). A
//! synthetic machine's nodes do not exist here: its partitions are built unbound and marked so.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use nearflow_topo::Machine;

use crate::{layout, PartInfo, Partition, Placed, Route, SplitBy, SplitError, SplittableData};

/// The PUs of `info`'s node or group to bind its build thread to, where the machine is the
/// host; else why it is not bound. Made before the thread starts, so that the thread binds
/// itself before it allocates anything of its own.
fn pus_of(machine: &Machine, info: &PartInfo) -> Result<Vec<usize>, Placed> {
    if !machine.source().is_host() {
        return Err(Placed::Unbound(
            "not this host's topology: nodes are simulated, pages stay where the OS puts them"
                .into(),
        ));
    }
    Ok(match info.group {
        Some(g) => machine.groups()[g].pus.clone(),
        None => (0..machine.pu_count())
            .filter(|&p| machine.node_of(p) == info.node)
            .collect(),
    })
}

/// Binds the calling thread to `pus` (from [`pus_of`]), first thing on a build thread.
fn bind_to(machine: &Machine, node: usize, pus: Result<Vec<usize>, Placed>) -> Placed {
    match pus {
        Ok(pus) => match nearflow_topo::bind_current_thread(machine, &pus) {
            Ok(()) => {
                // Whatever the thread allocated before (its start-up) fixed nothing.
                nearflow_alloc::rehome_current_thread();
                Placed::Bound
            }
            Err(e) => Placed::Unbound(format!("binding to node {node} failed: {e}")),
        },
        Err(placed) => placed,
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    nearflow_rt::panic_message(payload)
}

impl<T: Send> SplittableData<T> {
    /// Builds one partition per node (or group) of `machine`, each by `make` on a thread bound to
    /// that node, all in parallel. A panic in `make` is returned as [`SplitError::Task`].
    pub fn build<F>(machine: &Machine, by: SplitBy, make: F) -> Result<Self, SplitError>
    where
        F: Fn(&PartInfo) -> T + Sync,
    {
        let infos = layout(machine, by);
        let inputs: Vec<(PartInfo, ())> = infos.into_iter().map(|i| (i, ())).collect();
        Self::build_parts(machine, by, inputs, |info, ()| make(info))
    }

    /// Builds the partitions from `items`: each element goes to the partition `route` gives its
    /// `key`, and each partition is made by `empty` and filled by `insert`, on a thread bound to
    /// its node, all partitions in parallel. Elements keep their order within a partition.
    pub fn build_by_key<E, K, N, I>(
        machine: &Machine,
        by: SplitBy,
        items: Vec<E>,
        key: K,
        route: Route,
        empty: N,
        insert: I,
    ) -> Result<Self, SplitError>
    where
        E: Send,
        K: Fn(&E) -> u64,
        N: Fn(&PartInfo) -> T + Sync,
        I: Fn(&mut T, E) + Sync,
    {
        let infos = layout(machine, by);
        let n = infos.len();
        let mut buckets: Vec<Vec<E>> = (0..n).map(|_| Vec::new()).collect();
        for e in items {
            let p = route.partition(key(&e), n);
            buckets[p].push(e);
        }
        let inputs = infos.into_iter().zip(buckets).collect();
        Self::build_parts(machine, by, inputs, |info, bucket: Vec<E>| {
            let mut t = empty(info);
            for e in bucket {
                insert(&mut t, e);
            }
            t
        })
    }

    fn build_parts<X, F>(
        machine: &Machine,
        by: SplitBy,
        inputs: Vec<(PartInfo, X)>,
        make: F,
    ) -> Result<Self, SplitError>
    where
        X: Send,
        F: Fn(&PartInfo, X) -> T + Sync,
    {
        let results: Vec<Result<Partition<T>, SplitError>> = std::thread::scope(|s| {
            let handles: Vec<_> = inputs
                .into_iter()
                .map(|(info, x)| {
                    let make = &make;
                    let pus = pus_of(machine, &info);
                    std::thread::Builder::new()
                        .name(format!("split-build-{}", info.index))
                        .spawn_scoped(s, move || {
                            let placed = bind_to(machine, info.node, pus);
                            catch_unwind(AssertUnwindSafe(|| make(&info, x)))
                                .map(|data| Partition { info, placed, data })
                                .map_err(|p| {
                                    SplitError::Task(format!(
                                        "building partition {}: {}",
                                        info.index,
                                        panic_text(&*p)
                                    ))
                                })
                        })
                        .map_err(|e| SplitError::Task(format!("cannot start a build thread: {e}")))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().unwrap_or_else(|p| {
                        Err(SplitError::Task(format!(
                            "a build thread panicked: {}",
                            panic_text(&*p)
                        )))
                    }),
                    Err(e) => Err(e),
                })
                .collect()
        });
        let parts = results.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(SplittableData {
            parts: Arc::from(parts),
            by,
            nodes: machine.node_count(),
            groups: machine.groups().len(),
        })
    }
}
