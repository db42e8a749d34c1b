//! `nearflow bench overhead`: the cost of spawning and running empty tasks.
//!
//! Three workloads, each with heap-allocated tasks on every side:
//! - `chain`: each task spawns the next one (immediate), N tasks;
//! - `fanout`: one task spawns N−1 deferred tasks;
//! - `fib`: fork-join Fibonacci, each call a task spawning two immediate children;
//! - `request`: a request of one empty task submitted from outside the pool and waited for,
//!   `--requests` times back to back (the round trip of a tiny query: submit, a worker finds
//!   the task, completion, the waiter wakes);
//! - `wake`: the same, but each request is submitted after the pool has fallen asleep (5 ms of
//!   idleness, not timed): the latency of waking a sleeping pool for a request's first task.
//!
//! Measured side by side in one run: every nearflow policy, rayon's `scope.spawn` (the reference:
//! ratios are to it), rayon's `join` (fib only, for information: it does not heap-allocate), and a
//! raw single-thread crossbeam-deque push/pop loop of boxed closures (the limit).
//!
//! **Interleaved rounds**: on a shared, noisy machine a contender measured a few
//! seconds after another meets another machine (three back-to-back runs once gave las/rayon on
//! fan-out of 7.1, 1.85 and 1.49). So every contender is built first, and each round runs every
//! (workload, contender) cell once, in an order that rotates from round to round. A cell's time
//! is the median over the rounds, with the 10th–90th percentile as its spread; a ratio to rayon
//! is the median of the per-round ratios (each taken within one round, seconds apart), with its
//! spread the same way. Between two cells the bench pauses 5 ms, so that the pools that just
//! ran have stopped spinning and sleep (every contender's threads are alive all along), then
//! runs the cell `--warmup` times untimed before the timed run: on this project's KVM guests a
//! vCPU that idles for a few milliseconds can come back to caches the host has given to
//! someone else (summing a 4 MiB array after a 50 ms sleep took 4× as long as after none), so
//! a cell of a few milliseconds measured straight after the pause pays that at random.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossbeam_deque::Worker;
use nearflow_policy::PolicyKind;
use nearflow_rt::{Pinning, Runtime, SleepBarriers, TaskCx};
use serde::Serialize;

use nearflow_topo::TopologySpec;

use crate::harness::{load_machine, parse_list, progress, start_runtime, summary};
use crate::phase::Probe;
use crate::Report;

#[derive(Debug, Clone)]
pub struct Config {
    /// The machine (default: this host).
    pub topology: TopologySpec,
    /// Policies to measure (comma-separated).
    pub policies: String,
    /// Tasks in `chain` and `fanout`.
    pub tasks: u64,
    /// n of `fib` (fib(25) is 242,785 tasks).
    pub fib: u32,
    /// Workloads (comma-separated): chain, fanout, fib, request, wake.
    pub workloads: String,
    /// Requests in `request` (`wake` runs a tenth as many, each after 5 ms of idleness).
    pub requests: u64,
    /// Interleaved rounds (each runs every cell once; medians over rounds are reported).
    pub reps: usize,
    /// Untimed runs of a cell right before each timed one (not for `wake`, which measures the
    /// cold start). On a virtual machine whose vCPUs idle in the 5 ms pause between cells, the
    /// host may take the caches away; a run of a few milliseconds then pays for it at random.
    pub warmup: usize,
    /// Barriers of the sleep protocol to compare (comma-separated: fence, membarrier); each
    /// policy runs once per choice, named `policy+barriers` when there are several (default:
    /// the runtime's default alone).
    pub barriers: Option<String>,
    /// Thread binding for nearflow (only applied on the host).
    pub pinning: Pinning,
    /// No progress bars on stderr.
    pub quiet: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    Chain,
    Fanout,
    Fib,
    Request,
    Wake,
}

impl Workload {
    const ALL: [Workload; 5] = [
        Workload::Chain,
        Workload::Fanout,
        Workload::Fib,
        Workload::Request,
        Workload::Wake,
    ];
    fn name(self) -> &'static str {
        match self {
            Workload::Chain => "chain",
            Workload::Fanout => "fanout",
            Workload::Fib => "fib",
            Workload::Request => "request",
            Workload::Wake => "wake",
        }
    }

    /// A round trip from outside the pool (no crossbeam contender).
    fn is_request(self) -> bool {
        matches!(self, Workload::Request | Workload::Wake)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub policy: String,
    pub workload: String,
    pub tasks: u64,
    pub ns_per_task: f64,
    /// 10th and 90th percentile of ns_per_task over the rounds.
    pub ns_spread: [f64; 2],
    /// Median over the rounds of (this cell / rayon `scope.spawn` on the same workload in the
    /// same round).
    pub ratio_to_rayon: f64,
    /// 10th and 90th percentile of those per-round ratios.
    pub ratio_spread: [f64; 2],
    /// Rounds measured.
    pub rounds: usize,
}

fn fib_calls(n: u32) -> u64 {
    let (mut a, mut b) = (1u64, 1u64); // calls(0), calls(1)
    for _ in 1..n {
        let c = a + b + 1;
        a = b;
        b = c;
    }
    if n == 0 {
        1
    } else {
        b
    }
}

fn tasks_of(w: Workload, cmd: &Config) -> u64 {
    match w {
        Workload::Chain | Workload::Fanout => cmd.tasks,
        Workload::Fib => fib_calls(cmd.fib),
        Workload::Request => cmd.requests,
        Workload::Wake => (cmd.requests / 10).max(1),
    }
}

/// Idleness before each `wake` request: every contender's workers have searched, yielded and
/// gone to sleep by then.
const WAKE_IDLE: Duration = Duration::from_millis(5);

/// Runs `one` (a round trip) `n` times; returns the time spent in the round trips only.
fn round_trips(n: u64, wake: bool, mut one: impl FnMut() -> Result<()>) -> Result<Duration> {
    let mut total = Duration::ZERO;
    for _ in 0..n {
        if wake {
            std::thread::sleep(WAKE_IDLE);
        }
        let t = Instant::now();
        one()?;
        total += t.elapsed();
    }
    Ok(total)
}

// ---- nearflow ----

fn nf_chain(cx: &TaskCx<'_>, left: u64) {
    if left > 0 {
        cx.spawn_immediate(move |cx| nf_chain(cx, left - 1));
    }
}

fn nf_fib(cx: &TaskCx<'_>, n: u32) {
    if n >= 2 {
        cx.spawn_immediate(move |cx| nf_fib(cx, n - 1));
        cx.spawn_immediate(move |cx| nf_fib(cx, n - 2));
    }
}

fn nf_once(rt: &Runtime, w: Workload, cmd: &Config) -> Result<Duration> {
    let (n, fib) = (cmd.tasks, cmd.fib);
    if w.is_request() {
        return round_trips(tasks_of(w, cmd), w == Workload::Wake, || {
            Ok(rt.submit(|_| {}).wait()?)
        });
    }
    let t = Instant::now();
    let h = match w {
        Workload::Chain => rt.submit(move |cx| nf_chain(cx, n - 1)),
        Workload::Fanout => rt.submit(move |cx| {
            for _ in 1..n {
                cx.spawn_deferred(|_| {});
            }
        }),
        Workload::Fib => rt.submit(move |cx| nf_fib(cx, fib)),
        Workload::Request | Workload::Wake => unreachable!("handled above"),
    };
    h.wait()?;
    Ok(t.elapsed())
}

// ---- rayon ----

fn ry_chain(s: &rayon::Scope<'_>, left: u64) {
    if left > 0 {
        s.spawn(move |s| ry_chain(s, left - 1));
    }
}

fn ry_fib(s: &rayon::Scope<'_>, n: u32) {
    if n >= 2 {
        s.spawn(move |s| ry_fib(s, n - 1));
        s.spawn(move |s| ry_fib(s, n - 2));
    }
}

fn ry_join_fib(n: u32) -> u64 {
    if n < 2 {
        return 1;
    }
    let (a, b) = rayon::join(|| ry_join_fib(n - 1), || ry_join_fib(n - 2));
    a + b + 1
}

fn rayon_scope_once(pool: &rayon::ThreadPool, w: Workload, cmd: &Config) -> Duration {
    let (n, fib) = (cmd.tasks, cmd.fib);
    if w.is_request() {
        // `install` from outside the pool: inject the job, block on a latch until it ran.
        let r = round_trips(tasks_of(w, cmd), w == Workload::Wake, || {
            pool.install(|| ());
            Ok(())
        });
        return r.unwrap_or_default();
    }
    let t = Instant::now();
    pool.install(|| match w {
        Workload::Chain => rayon::scope(|s| s.spawn(move |s| ry_chain(s, n - 1))),
        Workload::Fanout => rayon::scope(|s| {
            s.spawn(move |s| {
                for _ in 1..n {
                    s.spawn(|_| {});
                }
            })
        }),
        Workload::Fib => rayon::scope(|s| s.spawn(move |s| ry_fib(s, fib))),
        Workload::Request | Workload::Wake => unreachable!("handled above"),
    });
    t.elapsed()
}

// ---- crossbeam-deque, one thread ----

/// A boxed task of the crossbeam loop; it may push more jobs to the deque.
struct Job(Box<JobFn>);
type JobFn = dyn FnOnce(&Worker<Job>);

fn cb_chain(w: &Worker<Job>, left: u64) {
    if left > 0 {
        w.push(Job(Box::new(move |w| cb_chain(w, left - 1))));
    }
}

fn cb_fib(w: &Worker<Job>, n: u32) {
    if n >= 2 {
        w.push(Job(Box::new(move |w| cb_fib(w, n - 1))));
        w.push(Job(Box::new(move |w| cb_fib(w, n - 2))));
    }
}

fn crossbeam_once(wl: Workload, cmd: &Config) -> Duration {
    let (n, fib) = (cmd.tasks, cmd.fib);
    let t = Instant::now();
    let w: Worker<Job> = Worker::new_lifo();
    let root: Job = Job(match wl {
        Workload::Chain => Box::new(move |w| cb_chain(w, n - 1)),
        Workload::Fanout => Box::new(move |w| {
            for _ in 1..n {
                w.push(Job(Box::new(|_| {})));
            }
        }),
        Workload::Fib => Box::new(move |w| cb_fib(w, fib)),
        Workload::Request | Workload::Wake => unreachable!("no crossbeam request contender"),
    });
    w.push(root);
    while let Some(j) = w.pop() {
        (j.0)(&w);
    }
    t.elapsed()
}

/// Runs the interleaved rounds; one row per (contender, workload).
pub fn run(cmd: &Config) -> Result<Report<Vec<Row>>> {
    use std::fmt::Write;
    let machine = load_machine(&cmd.topology)?;
    let label = machine.label();
    let policies: Vec<PolicyKind> = parse_list(&cmd.policies)?;
    if cmd.tasks < 2 {
        anyhow::bail!("--tasks must be at least 2");
    }
    if cmd.requests == 0 {
        anyhow::bail!("--requests must be positive");
    }
    if cmd.fib > 40 {
        anyhow::bail!(
            "--fib {} would spawn {} tasks; use at most 40",
            cmd.fib,
            fib_calls(cmd.fib)
        );
    }
    let threads = machine.pu_count();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("rayon pool")?;
    let barriers: Vec<SleepBarriers> = match &cmd.barriers {
        Some(list) => parse_list(list)?,
        None => vec![SleepBarriers::from_env()],
    };
    if barriers.is_empty() {
        anyhow::bail!("--barriers is empty");
    }
    // (barriers, policy), barrier-major; a name gains `+barriers` when several are compared.
    let variants: Vec<(SleepBarriers, PolicyKind)> = barriers
        .iter()
        .flat_map(|&b| policies.iter().map(move |&p| (b, p)))
        .collect();
    let runtimes = variants
        .iter()
        .map(|&(b, p)| {
            let rt = start_runtime(
                Runtime::builder(machine.clone())
                    .policy(p)
                    .pinning(cmd.pinning)
                    .sleep_barriers(b),
                nearflow_rt::AllocatorKind::Nearflow,
            )?;
            // Asked for by name, a barrier that is not in effect would mislabel a column; the
            // default falls back to fences quietly and the table's footer says so.
            if cmd.barriers.is_some()
                && rt.asymmetric_barriers() != (b == SleepBarriers::Membarrier)
            {
                anyhow::bail!("sleep barriers {b} requested, but the kernel refuses membarrier");
            }
            Ok(rt)
        })
        .collect::<Result<Vec<_>>>()?;
    // The contenders: 0 rayon scope, 1 rayon join (fib only), 2 crossbeam, 3.. the runtimes.
    let mut names: Vec<String> = vec![
        "rayon-scope".into(),
        "rayon-join".into(),
        "crossbeam-deque".into(),
    ];
    names.extend(variants.iter().map(|&(b, p)| {
        if barriers.len() > 1 {
            format!("{}+{b}", p.name())
        } else {
            p.name().to_string()
        }
    }));
    let workloads: Vec<Workload> = cmd
        .workloads
        .split(',')
        .map(|s| {
            Workload::ALL
                .into_iter()
                .find(|w| w.name() == s.trim())
                .with_context(|| {
                    format!("unknown workload `{s}`; known: chain, fanout, fib, request, wake")
                })
        })
        .collect::<Result<_>>()?;
    let cells: Vec<(Workload, usize)> = workloads
        .iter()
        .flat_map(|&w| (0..names.len()).map(move |c| (w, c)))
        .filter(|&(w, c)| (c != 1 || w == Workload::Fib) && (c != 2 || !w.is_request()))
        .collect();
    let once = |w: Workload, c: usize| -> Result<Duration> {
        Ok(match c {
            0 => rayon_scope_once(&pool, w, cmd),
            1 => {
                let t = Instant::now();
                let calls = pool.install(|| ry_join_fib(cmd.fib));
                debug_assert_eq!(calls, fib_calls(cmd.fib));
                t.elapsed()
            }
            2 => crossbeam_once(w, cmd),
            p => nf_once(&runtimes[p - 3], w, cmd)?,
        })
    };
    let rounds = cmd.reps.max(1);
    let warmups = |w: Workload| if w == Workload::Wake { 0 } else { cmd.warmup };
    let runs: usize = cells.iter().map(|&(w, _)| warmups(w) + 1).sum();
    let bar = progress((rounds * runs) as u64, "overhead", cmd.quiet);
    // times[cell][round], in ns per task.
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); cells.len()];
    let mut probe = Probe::new();
    for round in 0..rounds {
        probe.sample();
        for k in 0..cells.len() {
            // Rotate the order so that no contender always follows the same one.
            let i = (k + round * 7) % cells.len();
            let (w, c) = cells[i];
            // Let the previous contender's idle workers finish spinning and fall asleep, so
            // they do not take the CPUs from this one (all contenders' pools are alive).
            std::thread::sleep(Duration::from_millis(5));
            // Then untimed runs of the same cell: they meet the cold start after the pause.
            for _ in 0..warmups(w) {
                once(w, c)?;
                bar.inc(1);
            }
            let d = once(w, c)?;
            times[i].push(d.as_secs_f64() * 1e9 / tasks_of(w, cmd) as f64);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let reference = |w: Workload| {
        cells
            .iter()
            .position(|&(x, c)| x == w && c == 0)
            .expect("rayon-scope runs every workload")
    };
    let rows: Vec<Row> = cells
        .iter()
        .enumerate()
        .map(|(i, &(w, c))| {
            let (ns, ns_spread) = summary(times[i].clone());
            let r = &times[reference(w)];
            let (ratio, ratio_spread) =
                summary(times[i].iter().zip(r).map(|(a, b)| a / b).collect());
            Row {
                policy: names[c].clone(),
                workload: w.name().into(),
                tasks: tasks_of(w, cmd),
                ns_per_task: ns,
                ns_spread,
                ratio_to_rayon: ratio,
                ratio_spread,
                rounds,
            }
        })
        .collect();
    let mut out = String::new();
    writeln!(
out,
        "bench overhead on {label} ({}): {threads} threads, {rounds} interleaved rounds; ns per task, median \
         [10th–90th percentile], and the median of per-round ratios to rayon scope.spawn [10th–90th]",
        nearflow_topo::host::cpu_label()
    )?;
    write!(out, "{:<16}", "")?;
    for &w in &workloads {
        write!(out, " {:>36}", w.name())?;
    }
    writeln!(out)?;
    for name in &names {
        write!(out, "{name:<16}")?;
        for &w in &workloads {
            match rows
                .iter()
                .find(|r| &r.policy == name && r.workload == w.name())
            {
                Some(r) => write!(
                    out,
                    " {:>7.1} [{:>5.0}–{:<5.0}] {:>5.2}x [{:.2}–{:.2}]",
                    r.ns_per_task,
                    r.ns_spread[0],
                    r.ns_spread[1],
                    r.ratio_to_rayon,
                    r.ratio_spread[0],
                    r.ratio_spread[1]
                )?,
                None => write!(out, " {:>36}", "-")?,
            }
        }
        writeln!(out)?;
    }
    writeln!(
out,
        "tasks: chain {} (immediate), fanout {} (deferred), fib({}) {} (immediate); crossbeam-deque is one thread",
        cmd.tasks,
        cmd.tasks,
        cmd.fib,
        fib_calls(cmd.fib)
    )?;
    writeln!(
out,
        "request: {} one-task requests back to back, ns per round trip (rayon: install); wake: {}, \
         each after {} ms idle",
        tasks_of(Workload::Request, cmd),
        tasks_of(Workload::Wake, cmd),
        WAKE_IDLE.as_millis()
    )?;
    if let ([_], Some(rt)) = (&barriers[..], runtimes.first()) {
        writeln!(
            out,
            "sleep barriers: {}",
            if rt.asymmetric_barriers() {
                "membarrier (a spawn pays no fence; going to sleep calls membarrier)"
            } else {
                "fence (a SeqCst fence on every spawn and every sleep)"
            }
        )?;
    }
    writeln!(out, "{}", probe.line())?;
    let notes = probe.line();
    Ok(Report::new(rows, out).with_notes(notes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn fib_call_counts() {
        fn calls(n: u32) -> u64 {
            if n < 2 {
                1
            } else {
                1 + calls(n - 1) + calls(n - 2)
            }
        }
        for n in 0..20 {
            assert_eq!(super::fib_calls(n), calls(n), "n = {n}");
        }
    }
}
