//! `nearflow bench overhead`: the cost of spawning and running empty tasks.
//!
//! Three workloads, each with heap-allocated tasks on every side:
//! - `chain`: each task spawns the next one (immediate), N tasks;
//! - `fanout`: one task spawns N−1 deferred tasks;
//! - `fib`: fork-join Fibonacci, each call a task spawning two immediate children.
//!
//! Measured side by side in one run: every nearflow policy, rayon's `scope.spawn` (the reference:
//! ratios are to it), rayon's `join` (fib only, for information: it does not heap-allocate), and a
//! raw single-thread crossbeam-deque push/pop loop of boxed closures (the limit).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use crossbeam_deque::Worker;
use nearflow_policy::PolicyKind;
use nearflow_rt::{Pinning, Runtime, TaskCx};
use serde::Serialize;

use crate::args::{machine_label, parse_list, TopoArgs};
use crate::bench::{median, progress};

#[derive(Args, Debug)]
pub struct OverheadCmd {
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Policies to measure (comma-separated).
    #[arg(
        long,
        default_value = "las,nls,bobox2011,fifo-rr,central,per-thread,random-steal"
    )]
    pub policies: String,
    /// Tasks in `chain` and `fanout`.
    #[arg(long, default_value_t = 200_000)]
    pub tasks: u64,
    /// n of `fib` (fib(25) is 242,785 tasks).
    #[arg(long, default_value_t = 25)]
    pub fib: u32,
    /// Timed repetitions per cell (the median is reported), after one warm-up.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Thread binding for nearflow (only applied on the host).
    #[arg(long, default_value = "group")]
    pub pinning: Pinning,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    Chain,
    Fanout,
    Fib,
}

impl Workload {
    const ALL: [Workload; 3] = [Workload::Chain, Workload::Fanout, Workload::Fib];
    fn name(self) -> &'static str {
        match self {
            Workload::Chain => "chain",
            Workload::Fanout => "fanout",
            Workload::Fib => "fib",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub policy: String,
    pub workload: String,
    pub tasks: u64,
    pub ns_per_task: f64,
    /// ns_per_task of this row / ns_per_task of rayon `scope.spawn` on the same workload.
    pub ratio_to_rayon: f64,
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

fn tasks_of(w: Workload, cmd: &OverheadCmd) -> u64 {
    match w {
        Workload::Chain | Workload::Fanout => cmd.tasks,
        Workload::Fib => fib_calls(cmd.fib),
    }
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

fn nf_once(rt: &Runtime, w: Workload, cmd: &OverheadCmd) -> Result<Duration> {
    let (n, fib) = (cmd.tasks, cmd.fib);
    let t = Instant::now();
    let h = match w {
        Workload::Chain => rt.submit(move |cx| nf_chain(cx, n - 1)),
        Workload::Fanout => rt.submit(move |cx| {
            for _ in 1..n {
                cx.spawn_deferred(|_| {});
            }
        }),
        Workload::Fib => rt.submit(move |cx| nf_fib(cx, fib)),
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

fn rayon_scope_once(pool: &rayon::ThreadPool, w: Workload, cmd: &OverheadCmd) -> Duration {
    let (n, fib) = (cmd.tasks, cmd.fib);
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

fn crossbeam_once(wl: Workload, cmd: &OverheadCmd) -> Duration {
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
    });
    w.push(root);
    while let Some(j) = w.pop() {
        (j.0)(&w);
    }
    t.elapsed()
}

fn measure(reps: usize, mut once: impl FnMut() -> Result<Duration>) -> Result<Duration> {
    once()?; // warm-up
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        v.push(once()?);
    }
    Ok(median(v))
}

pub fn run(cmd: &OverheadCmd) -> Result<()> {
    let machine = cmd.topo.load()?;
    let label = machine_label(&machine);
    let policies: Vec<PolicyKind> = parse_list(&cmd.policies)?;
    if cmd.tasks < 2 {
        anyhow::bail!("--tasks must be at least 2");
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
    let cells = (policies.len() + 3) * Workload::ALL.len();
    let bar = progress(cells as u64, "overhead", cmd.json);
    let mut raw: Vec<(String, Workload, Duration)> = Vec::new();
    for w in Workload::ALL {
        raw.push((
            "rayon-scope".into(),
            w,
            measure(cmd.reps, || Ok(rayon_scope_once(&pool, w, cmd)))?,
        ));
        bar.inc(1);
        if w == Workload::Fib {
            let fib = cmd.fib;
            let d = measure(cmd.reps, || {
                let t = Instant::now();
                let calls = pool.install(|| ry_join_fib(fib));
                debug_assert_eq!(calls, fib_calls(fib));
                Ok(t.elapsed())
            })?;
            raw.push(("rayon-join".into(), w, d));
        }
        bar.inc(1);
        raw.push((
            "crossbeam-deque".into(),
            w,
            measure(cmd.reps, || Ok(crossbeam_once(w, cmd)))?,
        ));
        bar.inc(1);
    }
    for &p in &policies {
        let rt = Runtime::builder(machine.clone())
            .policy(p)
            .pinning(cmd.pinning)
            .build()?;
        for w in Workload::ALL {
            raw.push((
                p.name().to_string(),
                w,
                measure(cmd.reps, || nf_once(&rt, w, cmd))?,
            ));
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let per_task = |w: Workload, d: Duration| d.as_secs_f64() * 1e9 / tasks_of(w, cmd) as f64;
    let reference = |w: Workload| {
        raw.iter()
            .find(|(n, x, _)| n == "rayon-scope" && *x == w)
            .map_or(f64::NAN, |r| per_task(w, r.2))
    };
    let rows: Vec<Row> = raw
        .iter()
        .map(|(name, w, d)| Row {
            policy: name.clone(),
            workload: w.name().into(),
            tasks: tasks_of(*w, cmd),
            ns_per_task: per_task(*w, *d),
            ratio_to_rayon: per_task(*w, *d) / reference(*w),
        })
        .collect();
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "bench overhead on {label}: {threads} threads, median of {} runs, ns per task (ratio to rayon scope.spawn)",
        cmd.reps
    );
    println!("{:<16} {:>22} {:>22} {:>22}", "", "chain", "fanout", "fib");
    let mut names: Vec<&str> = vec!["rayon-scope", "rayon-join", "crossbeam-deque"];
    names.extend(policies.iter().map(|p| p.name()));
    for name in names {
        print!("{name:<16}");
        for w in Workload::ALL {
            match rows
                .iter()
                .find(|r| r.policy == name && r.workload == w.name())
            {
                Some(r) => print!(" {:>13.1} ({:>5.2}x)", r.ns_per_task, r.ratio_to_rayon),
                None => print!(" {:>22}", "-"),
            }
        }
        println!();
    }
    println!(
        "tasks: chain {} (immediate), fanout {} (deferred), fib({}) {} (immediate); crossbeam-deque is one thread",
        cmd.tasks,
        cmd.tasks,
        cmd.fib,
        fib_calls(cmd.fib)
    );
    Ok(())
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
