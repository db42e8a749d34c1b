//! The applications `nearflow map` maps (StreamMap §V: VWAP and LOIS), their runs on a runtime
//! with a thread-to-PU mapping, and the profiling run that turns the engine's accounting into a
//! [`Profile`] (§IV.B), with the hardware-counter probe for Holistic's LLC miss rates.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use nearflow_apps::{lois, vwap};
use nearflow_flow::{PlanBuilder, PlanShape, ThreadStats};
use nearflow_map::{ContentionUnit, Profile};
use nearflow_policy::PolicyKind;
use nearflow_rt::Runtime;
use nearflow_topo::host::LlcCounters;

/// An application with its input.
pub enum App {
    Vwap {
        ticks: Vec<vwap::Tick>,
        window: usize,
    },
    Lois {
        samples: Vec<lois::Sample>,
        cfg: lois::Config,
    },
}

/// One run of an application.
pub struct AppRun {
    pub elapsed: Duration,
    pub tuples_in: u64,
    /// Order-independent checksum of the result, the same for every mapping.
    pub checksum: u64,
    pub threads: Option<ThreadStats>,
    pub shape: PlanShape,
    pub packet_bytes: usize,
}

impl AppRun {
    /// Input tuples per second.
    pub fn throughput(&self) -> f64 {
        self.tuples_in as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl App {
    /// A name for reports, e.g. `vwap (window 5)`.
    pub fn label(&self) -> String {
        match self {
            App::Vwap { ticks, window } => format!("vwap (window {window}, {} ticks)", ticks.len()),
            App::Lois { samples, cfg } => format!(
                "lois (windows {}/{}, {} samples)",
                cfg.short,
                cfg.long,
                samples.len()
            ),
        }
    }

    /// Runs the app with `threads` threads on `rt`; `pus` maps them (None: thread `t` on PU
    /// `t`, which is how the unpinned OS-default baseline runs on an unbound machine).
    pub fn run(
        &self,
        rt: &Runtime,
        threads: usize,
        pus: Option<&[usize]>,
        packet_bytes: Option<usize>,
        profile: bool,
    ) -> Result<AppRun> {
        let mut b = PlanBuilder::for_runtime(rt);
        if let Some(p) = packet_bytes {
            b.packet_bytes(p);
        }
        b.profile_threads(profile);
        b.on_thread(Some(0));
        let identity: Vec<usize> = (0..threads).collect();
        let pus = pus.unwrap_or(&identity);
        let (n, run) = match self {
            App::Vwap { ticks, window } => {
                let src = b.source(ticks.clone());
                let sink = vwap::build_threads(&mut b, src, threads, *window);
                let (got, stats, shape) = run_mapped(b, rt, pus, &sink)?;
                (ticks.len(), (vwap::checksum(&got), stats, shape))
            }
            App::Lois { samples, cfg } => {
                let src = b.source(samples.clone());
                let sink = lois::build(&mut b, src, threads, *cfg);
                let (got, stats, shape) = run_mapped(b, rt, pus, &sink)?;
                let sum = got.iter().fold(0u64, |a, o| {
                    a.wrapping_add(o.seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ o.amp as u64)
                });
                (samples.len(), (sum, stats, shape))
            }
        };
        let (checksum, stats, shape) = run;
        Ok(AppRun {
            elapsed: stats.elapsed,
            tuples_in: n as u64,
            checksum,
            packet_bytes: stats.packet_bytes,
            threads: stats.threads,
            shape,
        })
    }

    /// The profiling run (§IV.B, Fig. 7): the app on a machine of `threads` unbound PUs, thread
    /// `t` on worker `t`, with the engine's accounting on. Communication: bytes sent between
    /// threads. Correlation: the communication plus the state of operators that passed from one
    /// thread to another (a shared operator). Contention: LLC misses per thousand instructions
    /// where this machine has counters, else each thread's working set — the largest state of
    /// every operator it ran plus one packet per input of those operators.
    pub fn profile(&self, threads: usize, packet_bytes: Option<usize>) -> Result<Profile> {
        let flat = nearflow_topo::from_synthetic(&format!("pack:1 core:{threads} pu:1"))
            .context("profiling machine")?;
        let rt = Runtime::builder(flat)
            .policy(PolicyKind::Pinned)
            .build()
            .context("profiling runtime")?;
        let counters = LlcCounters::open(&rt.worker_thread_ids());
        let run = self.run(&rt, threads, None, packet_bytes, true)?;
        let rates = counters.as_ref().ok().map(LlcCounters::rates);
        let t = run
            .threads
            .as_ref()
            .context("the profiling run kept no profile")?;
        let n = threads;
        let sub = |m: &Vec<Vec<u64>>| -> Vec<Vec<u64>> {
            (0..n).map(|i| (0..n).map(|j| m[i][j]).collect()).collect()
        };
        let communication = sub(&t.communication);
        let moves = sub(&t.state_moves);
        let correlation = (0..n)
            .map(|i| (0..n).map(|j| communication[i][j] + moves[i][j]).collect())
            .collect();
        let mut working = vec![0f64; n];
        for (op, runs) in t.runs_on.iter().enumerate() {
            let inputs = run.shape.operators[op].fed_by.len();
            for (w, &r) in runs.iter().enumerate().take(n) {
                if r > 0 {
                    working[w] += (t.state_bytes[op] + inputs * run.packet_bytes) as f64;
                }
            }
        }
        let mut notes = vec![format!(
            "profiled on {n} unbound workers, {} tuples in {:.3} s",
            run.tuples_in,
            run.elapsed.as_secs_f64()
        )];
        let (contention, unit) = match (counters, rates) {
            (Ok(_), Some(Some(r))) => (r, ContentionUnit::LlcMissesPerKiloInstruction),
            (Ok(_), _) => {
                notes.push("LLC counters opened but unreadable; working sets used".into());
                (working, ContentionUnit::WorkingSetBytes)
            }
            (Err(why), _) => {
                notes.push(format!(
                    "LLC miss counters unavailable ({why}); contention = working sets"
                ));
                (working, ContentionUnit::WorkingSetBytes)
            }
        };
        Ok(Profile {
            app: self.label(),
            threads: (0..n).map(|i| thread_name(self, n, i)).collect(),
            communication,
            correlation,
            contention,
            contention_unit: unit,
            notes,
        })
    }
}

/// Builds the plan, maps its threads to `pus`, runs it; the sink's tuples, the stats, the shape.
fn run_mapped<T: Send + 'static>(
    b: PlanBuilder,
    rt: &Runtime,
    pus: &[usize],
    sink: &nearflow_flow::Sink<T>,
) -> Result<(Vec<T>, nearflow_flow::PlanStats, PlanShape)> {
    let mut plan = b.build()?;
    plan.map_threads(rt, pus)?;
    let shape = plan.shape();
    let out = plan.run(rt)?;
    Ok((out.take(sink), out.stats, shape))
}

/// The name of thread `i` of an app with `n` threads.
pub fn thread_name(app: &App, n: usize, i: usize) -> String {
    match app {
        App::Vwap { .. } if i == 0 => "source".into(),
        App::Vwap { .. } => format!("worker{i}"),
        App::Lois { .. } => {
            let names = ["coords", "short", "long", "finder", "emit", "long-bounds"];
            if n == 1 {
                "all".into()
            } else {
                names.get(i).copied().unwrap_or("extra").to_string()
            }
        }
    }
}

/// Checks the thread count an app supports.
pub fn check_threads(app: &str, threads: usize) -> Result<()> {
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    if app == "lois" && threads > 6 {
        bail!("lois has 1 to 6 threads (Fig. 10 and its 5- and 6-thread versions), not {threads}");
    }
    if threads > 64 {
        bail!("at most 64 threads can be profiled, not {threads}");
    }
    Ok(())
}
