//! # nearflow-split — SplittableData
//!
//! A data structure split into one partition per NUMA node (or per core group), each partition's
//! memory on its node, and tasks dispatched to the partition they read. After
//! `../shared/papers/numa-template-library-splittable-data.txt` §3 (Fig. 5):
//!
//! | Fig. 5 | here |
//! |---|---|
//! | `Map<Processor, Data> map` | [`SplittableData::map`]: each partition's [`PartInfo`] (node, group, [`Home`]) and how its memory got there ([`Placed`]) |
//! | `newAtProcessor(p)` | [`SplittableData::build`]: each partition is built by a thread bound to its node's (or group's) PUs, so the OS's first-touch policy, or `nearflow-alloc`'s per-node pools when it is the global allocator, put its memory on that node; for raw buffers [`NodeBuffer`] binds the pages with `mbind` (`nearflow_alloc::Allocator::alloc_on_node`) |
//! | `ThreadPool threadPool` | a [`nearflow_rt::Runtime`] on the same machine |
//! | `dispatch(query, task)` | [`SplittableData::dispatch`] (blocking, from outside the runtime) and [`SplittableData::dispatch_in`] (from inside a task, with a continuation): one task per partition, spawned with the partition's home ([`nearflow_rt::TaskCx::spawn_deferred_at`]), results merged in partition order with a user-given merge |
//! | — | [`SplittableData::dispatch_to`] / [`dispatch_to_in`](SplittableData::dispatch_to_in): a query that needs one partition only |
//! | — | [`SplittableData::build_by_key`]: a parallel builder that routes elements to partitions by a key ([`Route`]: hash or range) |
//!
//! The paper's thread pool runs a dispatched task *at* the processor holding the data. Here the
//! task is queued where the policy puts work for that node (`nearflow_policy::home`), and the
//! stealing rules stay as they are: a busy node's partition tasks may run elsewhere. The runtime
//! counts every homed task as run at home or away ([`nearflow_rt::RuntimeCounters::remote_share`]),
//! which is this project's counter-free substitute for the paper's sampled data addresses (§2.2):
//! exact for the data placed through this crate, blind to every other access.
//!
//! On a one-node machine there is one partition, and `dispatch` costs one more task than
//! calling the task directly. On a synthetic, preset or XML machine (oversubscribed on this
//! host) partitions are built unbound: their nodes are the machine's, not the host's, and
//! [`Placed::Unbound`] says so.
//!
//! ```
//! use nearflow_split::{Route, SplitBy, SplittableData};
//! use nearflow_rt::Runtime;
//!
//! // The paper's 2-socket, 8-core Nehalem (§2, Fig. 1), simulated here (oversubscribed).
//! let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
//! let rt = Runtime::builder(machine.clone()).build().unwrap();
//! // Numbers 0..1000, each in the partition its key routes it to.
//! let data = SplittableData::build_by_key(
//!     &machine,
//!     SplitBy::Node,
//!     (0..1000u64).collect(),
//!     |x| *x,
//!     Route::Hash,
//!     |_| Vec::new(),
//!     |part: &mut Vec<u64>, x| part.push(x),
//! )
//! .unwrap();
//! assert_eq!(data.len(), 2);
//! // A query over every partition: the sum of the even numbers.
//! let sum = data
//!     .dispatch(&rt, |_cx, part, _info| part.iter().filter(|x| *x % 2 == 0).sum::<u64>(), |a, b| a + b)
//!     .unwrap();
//! assert_eq!(sum, (0..1000u64).filter(|x| x % 2 == 0).sum::<u64>());
//! ```
//!
//! ## Files
//!
//! - `lib.rs` — this map and [`SplittableData`].
//! - `build.rs` — building partitions on their nodes.
//! - `dispatch.rs` — dispatch to partitions and the ordered merge.
//! - `buffer.rs` — [`NodeBuffer`].
//! - `checks.rs` — the checks of `nearflow check placement`.

mod buffer;
mod build;
#[cfg(all(target_os = "linux", not(miri)))]
pub mod checks;
mod dispatch;

use std::sync::Arc;

pub use buffer::NodeBuffer;
pub use nearflow_rt::Home;
use nearflow_topo::Machine;
use serde::Serialize;

/// What a partition is per.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SplitBy {
    /// One partition per NUMA node (the paper's "per processor", a processor being a socket).
    Node,
    /// One partition per core group (cores sharing a cache, LAS §4.1): finer, for data that fits
    /// a shared cache.
    Group,
}

/// How [`SplittableData::build_by_key`] maps an element's key to a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Route {
    /// A hash of the key, modulo the number of partitions: even spread, no order.
    Hash,
    /// Keys in `0..max` in equal contiguous ranges, in partition order (a key ≥ `max` goes to the
    /// last partition): range queries then touch few partitions.
    Range { max: u64 },
}

impl Route {
    /// The partition of `key` among `parts` partitions.
    pub fn partition(self, key: u64, parts: usize) -> usize {
        debug_assert!(parts > 0);
        match self {
            // A fixed mixer (splitmix64's finaliser), so a route is the same in every process.
            Route::Hash => {
                let mut z = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
                (z % parts as u64) as usize
            }
            Route::Range { max } => {
                if max == 0 {
                    return parts - 1;
                }
                let i = (u128::from(key) * parts as u128 / u128::from(max)) as usize;
                i.min(parts - 1)
            }
        }
    }
}

/// Where one partition is meant to live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PartInfo {
    /// The partition's index (0..len), in node (then group) order.
    pub index: usize,
    /// Its NUMA node (of the machine it was built for).
    pub node: usize,
    /// Its core group, when split per group.
    pub group: Option<usize>,
    /// Its home, for spawning tasks that read it.
    pub home: Home,
}

/// How a partition's memory got to its node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Placed {
    /// Built by a thread bound to the PUs of its node (or group) on this host.
    Bound,
    /// Built by an unbound thread, for the reason given (a synthetic machine, or binding failed):
    /// the partition's node is a label, not where its pages are.
    Unbound(String),
}

/// One partition: its data and where it lives.
#[derive(Debug)]
pub struct Partition<T> {
    pub info: PartInfo,
    pub placed: Placed,
    pub data: T,
}

/// Errors of building or dispatching.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// The runtime's machine is not the one the data was split for.
    #[error(
        "the runtime's machine has {rt_nodes} NUMA node(s) and {rt_groups} core group(s); the data \
         was split for {nodes} node(s) and {groups} group(s)"
    )]
    MachineMismatch {
        nodes: usize,
        groups: usize,
        rt_nodes: usize,
        rt_groups: usize,
    },
    /// No such partition.
    #[error("partition {index} does not exist (there are {len})")]
    NoSuchPartition { index: usize, len: usize },
    /// A partition task (or the build of a partition) panicked, or the request was cancelled.
    #[error("{0}")]
    Task(String),
}

/// A data structure split per NUMA node or core group (Fig. 5's `SplittableData`). Cheap to
/// clone (the partitions are shared).
#[derive(Debug)]
pub struct SplittableData<T> {
    parts: Arc<[Partition<T>]>,
    by: SplitBy,
    nodes: usize,
    groups: usize,
}

impl<T> Clone for SplittableData<T> {
    fn clone(&self) -> Self {
        SplittableData {
            parts: self.parts.clone(),
            by: self.by,
            nodes: self.nodes,
            groups: self.groups,
        }
    }
}

impl<T> SplittableData<T> {
    /// Fig. 5's `map`: where each partition lives, in partition order.
    pub fn map(&self) -> Vec<(PartInfo, Placed)> {
        self.parts
            .iter()
            .map(|p| (p.info, p.placed.clone()))
            .collect()
    }

    /// The partitions, in order.
    pub fn partitions(&self) -> &[Partition<T>] {
        &self.parts
    }

    /// Number of partitions.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Always false: a machine has at least one node and one group.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// What the partitions are per.
    pub fn split_by(&self) -> SplitBy {
        self.by
    }

    /// The partitions to which a home on `node` belongs (one when split per node, the node's
    /// groups when split per group).
    pub fn partitions_on_node(&self, node: usize) -> impl Iterator<Item = usize> + '_ {
        self.parts
            .iter()
            .filter(move |p| p.info.node == node)
            .map(|p| p.info.index)
    }

    fn check_machine(&self, m: &Machine) -> Result<(), SplitError> {
        let (rt_nodes, rt_groups) = (m.node_count(), m.groups().len());
        if rt_nodes != self.nodes || (self.by == SplitBy::Group && rt_groups != self.groups) {
            return Err(SplitError::MachineMismatch {
                nodes: self.nodes,
                groups: self.groups,
                rt_nodes,
                rt_groups,
            });
        }
        Ok(())
    }
}

/// The partitions of `machine` split `by`, in order.
pub fn layout(machine: &Machine, by: SplitBy) -> Vec<PartInfo> {
    match by {
        SplitBy::Node => (0..machine.node_count())
            .map(|n| PartInfo {
                index: n,
                node: n,
                group: None,
                home: Home::node(machine, n).expect("a node of the machine"),
            })
            .collect(),
        SplitBy::Group => machine
            .groups()
            .iter()
            .enumerate()
            .map(|(i, g)| PartInfo {
                index: i,
                node: g.node,
                group: Some(g.index),
                home: Home::group(machine, g.index).expect("a group of the machine"),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_cover_every_partition_and_stay_in_range() {
        for parts in 1..6 {
            let mut seen = vec![0; parts];
            for k in 0..1000 {
                seen[Route::Hash.partition(k, parts)] += 1;
                let r = Route::Range { max: 1000 }.partition(k, parts);
                assert_eq!(r, (k as usize * parts) / 1000);
            }
            assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
            assert_eq!(
                Route::Range { max: 10 }.partition(u64::MAX, parts),
                parts - 1
            );
            assert_eq!(Route::Range { max: 0 }.partition(5, parts), parts - 1);
        }
    }

    #[test]
    fn layouts_follow_the_machine() {
        let m = nearflow_topo::presets::build("e7-4820").unwrap();
        let nodes = layout(&m, SplitBy::Node);
        assert_eq!(nodes.len(), 4);
        assert!(nodes
            .iter()
            .enumerate()
            .all(|(i, p)| p.node == i && p.group.is_none()));
        let groups = layout(&m, SplitBy::Group);
        assert_eq!(groups.len(), m.groups().len());
        for p in &groups {
            assert_eq!(p.node, m.groups()[p.group.unwrap()].node);
            assert_eq!(p.home.group_index(), p.group);
        }
    }
}
