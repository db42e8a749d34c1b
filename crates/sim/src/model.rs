//! Every constant of the machine model, with its source, in one place.
//!
//! The topology (PUs, cores, caches and their sizes and sharing sets, NUMA nodes and the distance
//! matrix) comes from the [`Machine`](nearflow_topo::Machine). What a topology does not say —
//! bandwidths, latencies, what a hyper-thread costs its sibling, what the runtime's own steps
//! cost — is here. None of these numbers was tuned to make a figure of a paper come out: each is
//! a datasheet or manual figure, or our own measurement on the development machine, as its doc
//! says. A run prints the model it used (`--json` includes it), and every field can be changed
//! from the command line (`nearflow sim --model KEY=VALUE`).

use serde::Serialize;

/// The costs the simulator charges. Times in nanoseconds, bandwidths in bytes per nanosecond
/// (= GB/s).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Model {
    /// Read bandwidth of one core from a cache of level 1, 2, 3 (index `level - 1`; deeper
    /// levels use the last). Source: Intel 64 and IA-32 Architectures Optimization Reference
    /// Manual, sustained per-core load bandwidth of Nehalem/Westmere (L1 ≈ 32 B/cycle, L2 ≈
    /// 20 B/cycle, L3 ≈ 10 B/cycle) at 2.0 GHz, the clock of the E7-4820 (LAS paper §6.1.2:
    /// "clocked at 2.0Ghz") and of the E7540.
    pub cache_read_bw: [f64; 3],
    /// Write bandwidth into the writer's own L1/L2 (a fresh output block): half the L2 read
    /// bandwidth (same manual: one store port against two load ports).
    pub cache_write_bw: f64,
    /// Sustained read bandwidth of one NUMA node's memory controller, shared by every reader of
    /// that node. Source: Intel Xeon E7-4800 datasheet, 4 DDR3-1066 channels = 34 GB/s peak per
    /// socket; ≈ 60 % sustained (STREAM on Westmere-EX) ≈ 20 GB/s.
    pub node_bw: f64,
    /// What one core can pull from its own node's memory (line fill buffers limit it below the
    /// node's bandwidth): 10 outstanding L1 misses (same manual) × 64 B / the local load
    /// latency of a 4-socket Westmere-EX, ≈ 135 ns (published measurements, quoted in issue
    /// 37). From another node the latency is the NUMA factor times longer, so the same misses
    /// give `core_dram_bw / factor` (the engine divides; the factor is not charged again).
    pub core_dram_bw: f64,
    /// Bandwidth of the link between two nodes, shared by every remote reader on that pair.
    /// Source: Intel QPI at 6.4 GT/s = 12.8 GB/s per direction.
    pub link_bw: f64,
    /// Extra time of a hyper-thread while its sibling on the same core is busy: two busy
    /// siblings run at `1 / ht_slowdown` of a lone thread each. Source: Intel's hyper-threading
    /// white paper, "up to 30 %" more throughput from two threads: 2 / 1.25 = 1.6.
    pub ht_slowdown: f64,
    /// What the runtime spends on one task besides its work: the spawn (box, push), the find
    /// (own queue), running it and counting it. Ours: `nearflow bench overhead`, chain workload,
    /// ≈ 45 ns per task on the development machine (docs/results/overhead.md).
    pub task_ns: f64,
    /// What a `join`'s side costs instead of `task_ns` when the worker that spawned it takes
    /// it back from its own queue ([`crate::workload::Task::call`]): the runtime's fast path pushes it,
    /// pops it back and runs it as a call, with no task run and no counters. Ours: `bench
    /// rayon --simulate` times fib on a one-worker runtime against a sequential fib and
    /// divides the difference by the calls (one side per call), and uses that; this default
    /// is what it measures on the development machine (EPYC guest: 4–6 ns).
    pub call_ns: f64,
    /// One probe of a queue that turns out empty (the `is_empty` look). Ours: the same bench's
    /// fan-out minus chain, divided by the probes of a failed search, rounded.
    pub probe_ns: f64,
    /// One pop from a locked queue (shared or deferred): lock, pop, unlock, uncontended. Ours:
    /// fan-out ≈ 200 ns per task against chain ≈ 45,
    /// less the task itself.
    pub locked_pop_ns: f64,
    /// From a wake-up (a semaphore post) to the woken thread running. Source: futex wake-up
    /// latency on an idle Linux core, 5–20 µs; the middle.
    pub wake_ns: f64,
    /// What the waker spends on that wake-up (the futex system call). Ours: `unpark` of a
    /// blocked thread, 5.0 µs mean on the development machine (a KVM guest, where waking a
    /// halted vCPU exits to the host; bare metal is nearer 1–2 µs).
    pub wake_call_ns: f64,
    /// A condition variable's notify with nobody waiting: std's futex-based `Condvar` makes a
    /// system call on every notify. Ours: `Mutex` lock + `notify_one` 192 ns against 11 ns for
    /// the lock alone, on the development machine. The counting semaphore (FIFO+RR) pays it on
    /// every post, under its lock.
    pub notify_ns: f64,
    /// How long an idle worker keeps searching before it sleeps (the runtime's 16 search
    /// rounds, each a `yield_now` and one walk): ≈ 1 µs per round.
    pub spin_ns: f64,
    /// How soon a searching worker notices a task pushed where it looks (half a search round).
    pub poll_ns: f64,
}

/// The clock of the papers' 4-socket machines, GHz (E7-4820 and E7540: 2.0 GHz).
pub const CLOCK_GHZ: f64 = 2.0;

/// Local DRAM load latency of a 4-socket Westmere-EX, ns ([`Model::core_dram_bw`]).
pub const LOCAL_DRAM_NS: f64 = 135.0;

impl Default for Model {
    fn default() -> Self {
        Model {
            cache_read_bw: [32.0 * CLOCK_GHZ, 20.0 * CLOCK_GHZ, 10.0 * CLOCK_GHZ],
            cache_write_bw: 10.0 * CLOCK_GHZ,
            node_bw: 20.0,
            core_dram_bw: 10.0 * 64.0 / LOCAL_DRAM_NS,
            link_bw: 12.8,
            ht_slowdown: 1.6,
            task_ns: 45.0,
            call_ns: 5.0,
            probe_ns: 5.0,
            locked_pop_ns: 100.0,
            wake_ns: 10_000.0,
            wake_call_ns: 5_000.0,
            notify_ns: 180.0,
            spin_ns: 16_000.0,
            poll_ns: 500.0,
        }
    }
}

/// A model key that is not a field, or a value that is not a non-negative number.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("unknown model key `{0}`; known: cache_read_bw_l1, cache_read_bw_l2, cache_read_bw_l3, cache_write_bw, node_bw, core_dram_bw, link_bw, ht_slowdown, task_ns, call_ns, probe_ns, locked_pop_ns, wake_ns, wake_call_ns, notify_ns, spin_ns, poll_ns")]
    UnknownKey(String),
    #[error("model value `{0}` for `{1}` is not a number ≥ 0 (and > 0 for a bandwidth, ≥ 1 for ht_slowdown)")]
    BadValue(String, String),
    #[error("model setting `{0}` is not KEY=VALUE")]
    NotKeyValue(String),
}

impl Model {
    /// Sets one field from `KEY=VALUE`.
    pub fn set(&mut self, kv: &str) -> Result<(), ModelError> {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| ModelError::NotKeyValue(kv.to_string()))?;
        let (k, v) = (k.trim(), v.trim());
        let x: f64 = v
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| ModelError::BadValue(v.to_string(), k.to_string()))?;
        let bad = || ModelError::BadValue(v.to_string(), k.to_string());
        let bw = |x: f64| if x > 0.0 { Ok(x) } else { Err(bad()) };
        match k {
            "cache_read_bw_l1" => self.cache_read_bw[0] = bw(x)?,
            "cache_read_bw_l2" => self.cache_read_bw[1] = bw(x)?,
            "cache_read_bw_l3" => self.cache_read_bw[2] = bw(x)?,
            "cache_write_bw" => self.cache_write_bw = bw(x)?,
            "node_bw" => self.node_bw = bw(x)?,
            "core_dram_bw" => self.core_dram_bw = bw(x)?,
            "link_bw" => self.link_bw = bw(x)?,
            "ht_slowdown" if x >= 1.0 => self.ht_slowdown = x,
            "ht_slowdown" => return Err(bad()),
            "task_ns" => self.task_ns = x,
            "call_ns" => self.call_ns = x,
            "probe_ns" => self.probe_ns = x,
            "locked_pop_ns" => self.locked_pop_ns = x,
            "wake_ns" => self.wake_ns = x,
            "wake_call_ns" => self.wake_call_ns = x,
            "notify_ns" => self.notify_ns = x,
            "spin_ns" => self.spin_ns = x,
            "poll_ns" => self.poll_ns = x,
            _ => return Err(ModelError::UnknownKey(k.to_string())),
        }
        Ok(())
    }

    /// A model in which only the tasks' own work costs time: no memory, no runtime steps, no
    /// wake-up latency (for the invariant "one PU: makespan = Σ work").
    pub fn free() -> Model {
        Model {
            cache_read_bw: [f64::INFINITY; 3],
            cache_write_bw: f64::INFINITY,
            node_bw: f64::INFINITY,
            core_dram_bw: f64::INFINITY,
            link_bw: f64::INFINITY,
            ht_slowdown: 1.0,
            task_ns: 0.0,
            call_ns: 0.0,
            probe_ns: 0.0,
            locked_pop_ns: 0.0,
            wake_ns: 0.0,
            wake_call_ns: 0.0,
            notify_ns: 0.0,
            spin_ns: 0.0,
            poll_ns: 0.0,
        }
    }

    /// Read bandwidth of a cache of `level` (1-based).
    pub fn cache_bw(&self, level: u8) -> f64 {
        self.cache_read_bw[usize::from(level.clamp(1, 3)) - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_checks_keys_and_values() {
        let mut m = Model::default();
        m.set("node_bw=10").unwrap();
        assert_eq!(m.node_bw, 10.0);
        m.set(" wake_ns = 0 ").unwrap();
        assert_eq!(m.wake_ns, 0.0);
        assert!(matches!(m.set("nope=1"), Err(ModelError::UnknownKey(_))));
        assert!(matches!(m.set("node_bw=0"), Err(ModelError::BadValue(..))));
        assert!(matches!(m.set("node_bw=-1"), Err(ModelError::BadValue(..))));
        assert!(matches!(
            m.set("ht_slowdown=0.5"),
            Err(ModelError::BadValue(..))
        ));
        assert!(matches!(m.set("task_ns=x"), Err(ModelError::BadValue(..))));
        assert!(matches!(m.set("task_ns"), Err(ModelError::NotKeyValue(_))));
    }

    /// The defaults follow from the sources their docs name: per-cycle bandwidths at the papers'
    /// 2.0 GHz (not 2.2), and the per-core memory bandwidth at a 135 ns latency (not 80 ns).
    #[test]
    fn defaults_follow_their_sources() {
        let m = Model::default();
        assert_eq!(m.cache_read_bw, [64.0, 40.0, 20.0]);
        assert_eq!(m.cache_write_bw, m.cache_read_bw[1] / 2.0);
        assert!((m.core_dram_bw - 640.0 / 135.0).abs() < 1e-12);
        assert!(m.core_dram_bw < m.node_bw && m.core_dram_bw < m.link_bw);
    }
}
