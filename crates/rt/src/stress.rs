//! The random-DAG stress workload, shared by the test suite and `nearflow stress`.
//!
//! Each request owns a budget of exactly `tasks / requests` tasks (the first requests take the
//! remainder). A task that owns a budget `b > 0` spawns `k = min(b, 1..=max_fanout)` children —
//! chains when `k = 1`, fan-outs otherwise — each immediate or deferred at random, and splits the
//! rest of its budget among them at random. So the DAG shape is random but the number of tasks
//! is exact, and every task gets a unique id whose executions are counted: each must run exactly
//! once.
//!
//! While waiting, a monitor samples the runtime every few milliseconds. If tasks are queued and
//! none has run for `stall_timeout`, it reports a stall (a lost task or wake-up) with the
//! sleeping workers that could have run the queued work.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nearflow_policy::{Rng, TaskKind};
use serde::Serialize;

use crate::{RequestHandle, Runtime, RuntimeCounters, TaskCx};

/// Parameters of a stress run.
#[derive(Clone, Debug)]
pub struct StressConfig {
    /// Total tasks over all requests (at least one per request).
    pub tasks: u64,
    /// Concurrent requests.
    pub requests: u64,
    /// Most children of one task.
    pub max_fanout: u32,
    /// Seed of the DAG shapes.
    pub seed: u64,
    /// Submitting threads.
    pub submitters: usize,
    /// No task run for this long while tasks are queued = stall.
    pub stall_timeout: Duration,
    /// Give up after this long.
    pub deadline: Duration,
}

impl Default for StressConfig {
    fn default() -> Self {
        StressConfig {
            tasks: 100_000,
            requests: 32,
            max_fanout: 8,
            seed: 1,
            submitters: 2,
            stall_timeout: Duration::from_secs(5),
            deadline: Duration::from_secs(600),
        }
    }
}

/// What a stress run observed.
#[derive(Clone, Debug, Serialize)]
pub struct StressReport {
    pub policy: String,
    pub topology: String,
    pub workers: usize,
    pub spawned: u64,
    pub executed: u64,
    /// Tasks that ran more than once (must be 0).
    pub duplicated: u64,
    /// Tasks that never ran (must be 0).
    pub missing: u64,
    pub requests_submitted: u64,
    pub requests_completed: u64,
    pub elapsed_ms: f64,
    /// Monitor samples where a sleeping worker could reach queued work (transient is normal).
    pub samples_with_idle_sleepers: u64,
    pub samples: u64,
    /// Tasks the workers' counters say they ran during this run.
    pub worker_executed: u64,
    /// Fewest / most tasks one request ran, and the sum over requests (per-request counters).
    pub request_executed_min: u64,
    pub request_executed_max: u64,
    pub request_executed_sum: u64,
    /// The runtime's counters after the run (cumulative since it started).
    pub counters: RuntimeCounters,
    pub balancer_moves: u64,
    pub balancer_shares: u64,
}

impl StressReport {
    /// Every task ran exactly once and every request completed.
    pub fn is_exact(&self) -> bool {
        self.spawned == self.executed
            && self.duplicated == 0
            && self.missing == 0
            && self.requests_completed == self.requests_submitted
            && self.worker_executed == self.executed
            && self.request_executed_sum == self.executed
    }
}

/// Why a stress run failed.
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    #[error("bad stress parameters: {0}")]
    Config(String),
    #[error(
        "stall: {queued} tasks queued and none ran for {secs:.1} s; sleepers that could run them: {sleepers:?}; {asleep} workers asleep"
    )]
    Stall {
        queued: usize,
        secs: f64,
        sleepers: Vec<usize>,
        asleep: usize,
    },
    #[error("deadline of {0:?} passed with {1} requests unfinished")]
    Deadline(Duration, u64),
    #[error("request failed: {0}")]
    Request(String),
}

struct Ledger {
    seen: Vec<AtomicU8>,
    next_id: AtomicU64,
    spawned: AtomicU64,
    overflow: AtomicU64,
    max_fanout: u32,
    seed: u64,
}

impl Ledger {
    fn new_id(&self) -> u64 {
        self.spawned.fetch_add(1, Ordering::Relaxed);
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn mark(&self, id: u64) {
        match self.seen.get(id as usize) {
            Some(c) => {
                c.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                self.overflow.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Runs task `id`, which owns `budget` descendants.
fn node(ledger: Arc<Ledger>, id: u64, budget: u64, cx: &TaskCx<'_>) {
    ledger.mark(id);
    if budget == 0 {
        return;
    }
    let mut rng = Rng::new(ledger.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xABCD);
    let want = if rng.below(3) == 0 {
        1
    } else {
        1 + rng.below(ledger.max_fanout as usize) as u64
    };
    let k = want.min(budget);
    let mut rest = budget - k;
    for i in 0..k {
        let share = if i + 1 == k {
            rest
        } else {
            (rng.next_u64() % (rest + 1)) / 2
        };
        rest -= share;
        let kind = if rng.below(2) == 0 {
            TaskKind::Immediate
        } else {
            TaskKind::Deferred
        };
        let child = ledger.new_id();
        let l = ledger.clone();
        cx.spawn(kind, move |cx| node(l, child, share, cx));
    }
}

/// Runs the workload on `rt` and checks what it can while it runs.
pub fn run(rt: &Runtime, cfg: &StressConfig) -> Result<StressReport, StressError> {
    if cfg.requests == 0 || cfg.tasks < cfg.requests {
        return Err(StressError::Config(format!(
            "need at least one task per request (tasks = {}, requests = {})",
            cfg.tasks, cfg.requests
        )));
    }
    if cfg.max_fanout == 0 {
        return Err(StressError::Config("max fan-out must be at least 1".into()));
    }
    let base = rt.counters().executed();
    let ledger = Arc::new(Ledger {
        seen: (0..cfg.tasks).map(|_| AtomicU8::new(0)).collect(),
        next_id: AtomicU64::new(0),
        spawned: AtomicU64::new(0),
        overflow: AtomicU64::new(0),
        max_fanout: cfg.max_fanout,
        seed: cfg.seed,
    });
    let start = Instant::now();
    let per = cfg.tasks / cfg.requests;
    let extra = cfg.tasks % cfg.requests;
    let submitters = cfg.submitters.max(1);
    let handles: Vec<RequestHandle<()>> = std::thread::scope(|s| {
        let parts: Vec<_> = (0..submitters)
            .map(|t| {
                let ledger = &ledger;
                s.spawn(move || {
                    (0..cfg.requests)
                        .filter(|r| (*r as usize) % submitters == t)
                        .map(|r| {
                            let budget = per + u64::from(r < extra) - 1;
                            let id = ledger.new_id();
                            let l = ledger.clone();
                            rt.submit(move |cx| node(l, id, budget, cx))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().expect("submitter thread"))
            .collect()
    });

    // Monitor until every request is done.
    let mut samples = 0u64;
    let mut idle_samples = 0u64;
    let mut last_exec = rt.counters().executed();
    let mut last_progress = Instant::now();
    loop {
        let pending = handles.iter().filter(|h| !h.is_done()).count() as u64;
        if pending == 0 {
            break;
        }
        if start.elapsed() > cfg.deadline {
            return Err(StressError::Deadline(cfg.deadline, pending));
        }
        std::thread::sleep(Duration::from_millis(2));
        samples += 1;
        let exec = rt.counters().executed();
        let sleepers = rt.sleepers_with_work();
        if !sleepers.is_empty() {
            idle_samples += 1;
        }
        if exec != last_exec {
            last_exec = exec;
            last_progress = Instant::now();
        } else if rt.queued() > 0 && last_progress.elapsed() > cfg.stall_timeout {
            return Err(StressError::Stall {
                queued: rt.queued(),
                secs: last_progress.elapsed().as_secs_f64(),
                sleepers,
                asleep: rt.asleep(),
            });
        }
    }
    let submitted = handles.len() as u64;
    let mut completed = 0;
    let mut per_request = Vec::with_capacity(handles.len());
    for h in handles {
        // Every request is done here, so its counters are exact.
        per_request.push(h.counters().executed);
        h.wait().map_err(|e| StressError::Request(e.to_string()))?;
        completed += 1;
    }
    let elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut duplicated = 0;
    let mut missing = 0;
    let mut executed = 0;
    for c in &ledger.seen {
        match c.load(Ordering::Relaxed) {
            0 => missing += 1,
            1 => executed += 1,
            n => {
                duplicated += 1;
                executed += u64::from(n);
            }
        }
    }
    executed += ledger.overflow.load(Ordering::Relaxed);
    let counters = rt.counters();
    let (moves, shares) = rt.balancer_actions();
    Ok(StressReport {
        policy: rt.policy().kind().name().to_string(),
        topology: format!("{:?}", rt.machine().source()),
        workers: rt.workers(),
        spawned: ledger.spawned.load(Ordering::Relaxed),
        executed,
        duplicated,
        missing,
        requests_submitted: submitted,
        requests_completed: completed,
        elapsed_ms,
        samples_with_idle_sleepers: idle_samples,
        samples,
        worker_executed: counters.executed() - base,
        request_executed_min: per_request.iter().copied().min().unwrap_or(0),
        request_executed_max: per_request.iter().copied().max().unwrap_or(0),
        request_executed_sum: per_request.iter().sum(),
        counters,
        balancer_moves: moves,
        balancer_shares: shares,
    })
}
