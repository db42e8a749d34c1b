//! `nearflow bench sp2bench`: the LAS paper's experiment (§6.2–6.4): SP²Bench queries, one at a
//! time and 16 concurrent copies of each (the multi-query test), per policy and allocator, every
//! answer's row count checked; Oxigraph (in this process, single-threaded as it ships) as the
//! peer column, with a per-query time limit.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use nearflow_policy::PolicyKind;
use nearflow_rdf::sparql::{self, Options};
use nearflow_rt::{Allocator, Pinning};
use serde::Serialize;

use crate::args::{build_runtime, machine_label, parse_list, TopoArgs};
use crate::bench::{host_cpu, in_a_vm, median, Csv};
use crate::sparql_cmd::{source_store, Source};

#[derive(Args, Debug, Clone)]
pub struct Sp2benchCmd {
    #[command(flatten)]
    pub source: Source,
    /// Queries (file names without `.sparql` in `--queries-dir`), comma-separated.
    #[arg(long, default_value = "q2,q4,q5a,q6,q7,q8,q9,q11")]
    pub queries: String,
    /// Where the query files are.
    #[arg(long, default_value = "../shared/data/sp2bench/queries")]
    pub queries_dir: PathBuf,
    /// Policies (comma-separated).
    #[arg(long, default_value = "las,nls")]
    pub policies: String,
    /// Copies of each query run at once (comma-separated).
    #[arg(long, default_value = "1,16")]
    pub concurrent: String,
    /// Allocators of the runtime (comma-separated: nearflow, system).
    #[arg(long, default_value = "nearflow")]
    pub allocators: String,
    /// Timed repetitions per cell (median reported).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Run the queries in a peer engine too: `oxigraph`.
    #[arg(long)]
    pub peer: Option<String>,
    /// The peer's time limit per query, in seconds ("> limit" in the table).
    #[arg(long, default_value_t = 60.0)]
    pub peer_timeout: f64,
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Thread binding (only applied on the host).
    #[arg(long, default_value = "group")]
    pub pinning: Pinning,
    /// Also write the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
}

/// One measured cell.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub query: String,
    pub engine: String,
    pub concurrent: usize,
    /// Median seconds for the whole batch of `concurrent` copies.
    pub seconds: Option<f64>,
    pub rows: u64,
}

fn peer_run(
    store: &oxigraph::store::Store,
    text: &str,
    limit: Duration,
) -> Result<(Option<f64>, u64)> {
    use oxigraph::sparql::{CancellationToken, QueryResults, SparqlEvaluator};
    let token = CancellationToken::new();
    let t = token.clone();
    let done = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let d = done.clone();
    let watchdog = std::thread::spawn(move || {
        let (m, cv) = &*d;
        let g = m.lock().unwrap_or_else(|p| p.into_inner());
        let (g, _) = cv
            .wait_timeout_while(g, limit, |finished| !*finished)
            .unwrap_or_else(|p| p.into_inner());
        if !*g {
            t.cancel();
        }
    });
    let started = Instant::now();
    let r = SparqlEvaluator::new()
        .with_cancellation_token(token)
        .parse_query(text)
        .context("oxigraph cannot parse the query")?
        .on_store(store)
        .execute();
    let mut n = 0u64;
    let mut cancelled = false;
    match r {
        Ok(QueryResults::Solutions(s)) => {
            for x in s {
                if x.is_err() {
                    cancelled = true;
                    break;
                }
                n += 1;
            }
        }
        Ok(QueryResults::Boolean(b)) => n = u64::from(b),
        Ok(QueryResults::Graph(g)) => n = g.count() as u64,
        Err(_) => cancelled = true,
    }
    let took = started.elapsed();
    {
        let (m, cv) = &*done;
        *m.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
    }
    let _ = watchdog.join();
    if cancelled || took > limit {
        return Ok((None, n));
    }
    Ok((Some(took.as_secs_f64()), n))
}

pub fn run(cmd: &Sp2benchCmd) -> Result<Vec<Cell>> {
    let policies: Vec<PolicyKind> = parse_list(&cmd.policies)?;
    let concurrent: Vec<usize> = parse_list(&cmd.concurrent)?;
    let allocators: Vec<Allocator> = parse_list(&cmd.allocators)?;
    let names: Vec<String> = parse_list(&cmd.queries)?;
    if policies.is_empty() || concurrent.is_empty() || names.is_empty() || allocators.is_empty() {
        bail!("give at least one query, policy, allocator and concurrency");
    }
    if concurrent.contains(&0) || cmd.reps == 0 {
        bail!("--concurrent and --reps must be at least 1");
    }
    if let Some(p) = &cmd.peer {
        if p != "oxigraph" {
            bail!("unknown peer '{p}' (the only one is oxigraph)");
        }
    }
    if !(cmd.peer_timeout > 0.0 && cmd.peer_timeout.is_finite()) {
        bail!("--peer-timeout must be a positive number of seconds");
    }
    let mut texts = Vec::new();
    for q in &names {
        let f = cmd.queries_dir.join(format!("{q}.sparql"));
        let t = std::fs::read_to_string(&f).with_context(|| {
            format!(
                "{} (set --queries-dir to the SP²Bench queries)",
                f.display()
            )
        })?;
        texts.push(t);
    }
    let machine = cmd.topo.load()?;
    let load_started = Instant::now();
    let store = Arc::new(source_store(&machine, &cmd.source, cmd.quiet)?);
    let our_load = load_started.elapsed();
    println!(
        "SP²Bench: {} triples; machine {}; host CPU {}{}; {} reps, median",
        store.len(),
        machine_label(&machine),
        host_cpu(),
        if in_a_vm() { " (a VM)" } else { "" },
        cmd.reps
    );
    let prepared: Vec<sparql::Prepared> = texts
        .iter()
        .zip(&names)
        .map(|(t, n)| sparql::prepare(&store, t, &Options::default()).with_context(|| n.clone()))
        .collect::<Result<_>>()?;
    let mut cells = Vec::new();
    let mut reference: Vec<Option<u64>> = vec![None; names.len()];
    for &alloc in &allocators {
        for &policy in &policies {
            let rt = build_runtime(machine.clone(), policy, cmd.pinning, false, alloc)?;
            let engine = if allocators.len() > 1 {
                format!("{policy}/{alloc}")
            } else {
                policy.name().to_string()
            };
            for (qi, q) in prepared.iter().enumerate() {
                for &c in &concurrent {
                    let mut times = Vec::new();
                    let mut rows = 0;
                    for _ in 0..cmd.reps {
                        let t = Instant::now();
                        let running: Vec<_> =
                            (0..c).map(|_| q.start(&rt)).collect::<Result<_, _>>()?;
                        let mut counts = Vec::new();
                        for mut r in running {
                            let mut n = 0u64;
                            while let Some(b) = r.next_batch() {
                                n += b.len() as u64;
                            }
                            r.finish()?;
                            counts.push(n);
                        }
                        times.push(t.elapsed());
                        rows = counts[0];
                        if counts.iter().any(|&n| n != rows) {
                            bail!(
                                "{}: concurrent copies gave different row counts {counts:?}",
                                names[qi]
                            );
                        }
                        match reference[qi] {
                            None => reference[qi] = Some(rows),
                            Some(r) if r != rows => {
                                bail!("{}: {engine} gave {rows} rows, earlier {r}", names[qi])
                            }
                            _ => {}
                        }
                    }
                    if !cmd.quiet {
                        eprintln!(
                            "{} {engine} ×{c}: {:.3} s",
                            names[qi],
                            median(times.clone()).as_secs_f64()
                        );
                    }
                    cells.push(Cell {
                        query: names[qi].clone(),
                        engine: engine.clone(),
                        concurrent: c,
                        seconds: Some(median(times).as_secs_f64()),
                        rows,
                    });
                }
            }
        }
    }
    let mut peer_load = None;
    if cmd.peer.is_some() {
        let files = &cmd.source.data;
        if files.is_empty() {
            bail!("--peer oxigraph needs --data (Oxigraph loads the files itself)");
        }
        let t = Instant::now();
        let ox = oxigraph::store::Store::new()?;
        let mut loader = ox.bulk_loader();
        for f in files {
            let r = nearflow_rdf::load::open_input(f)?;
            loader
                .load_from_reader(oxigraph::io::RdfFormat::Turtle, r)
                .with_context(|| format!("oxigraph loading {}", f.display()))?;
        }
        loader.commit().context("oxigraph committing the load")?;
        peer_load = Some(t.elapsed());
        let limit = Duration::from_secs_f64(cmd.peer_timeout);
        for (qi, text) in texts.iter().enumerate() {
            let (secs, rows) = peer_run(&ox, text, limit)?;
            if !cmd.quiet {
                eprintln!(
                    "{} oxigraph: {}",
                    names[qi],
                    secs.map_or(format!("> {} s", cmd.peer_timeout), super::sp2bench::secs)
                );
            }
            if let (Some(_), Some(r)) = (secs, reference[qi]) {
                if r != rows {
                    bail!("{}: Oxigraph gave {rows} rows, nearflow {r}", names[qi]);
                }
            }
            cells.push(Cell {
                query: names[qi].clone(),
                engine: "oxigraph".into(),
                concurrent: 1,
                seconds: secs,
                rows,
            });
        }
    }
    print_table(cmd, &names, &cells, our_load, peer_load);
    if let Some(path) = &cmd.csv {
        let mut csv = Csv::new(&["query", "engine", "concurrent", "seconds", "rows"]);
        for c in &cells {
            csv.row(&[
                c.query.clone(),
                c.engine.clone(),
                c.concurrent.to_string(),
                c.seconds.map_or("timeout".into(), |s| format!("{s:.6}")),
                c.rows.to_string(),
            ]);
        }
        csv.write(path)?;
        println!("wrote {}", path.display());
    }
    Ok(cells)
}

/// A time for the table: milliseconds below 0.1 s (so that small queries are not all "0.000 s").
pub fn secs(s: f64) -> String {
    if s < 0.1 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}

fn print_table(
    cmd: &Sp2benchCmd,
    names: &[String],
    cells: &[Cell],
    ours: Duration,
    peer: Option<Duration>,
) {
    let mut cols: Vec<(String, usize)> = Vec::new();
    for c in cells {
        if !cols.contains(&(c.engine.clone(), c.concurrent)) {
            cols.push((c.engine.clone(), c.concurrent));
        }
    }
    let head: Vec<String> = cols.iter().map(|(e, c)| format!("{e} ×{c}")).collect();
    println!("| query | rows | {} |", head.join(" | "));
    println!("|---|---:|{}|", vec!["---:"; cols.len()].join("|"));
    for q in names {
        let rows = cells
            .iter()
            .find(|c| &c.query == q && c.engine != "oxigraph")
            .map_or(0, |c| c.rows);
        let vals: Vec<String> = cols
            .iter()
            .map(|(e, n)| {
                cells
                    .iter()
                    .find(|c| &c.query == q && &c.engine == e && c.concurrent == *n)
                    .map_or("-".into(), |c| match c.seconds {
                        Some(s) => secs(s),
                        None => format!("> {} s", cmd.peer_timeout),
                    })
            })
            .collect();
        println!("| {q} | {rows} | {} |", vals.join(" | "));
    }
    match peer {
        Some(p) => println!(
            "load: nearflow {:.2} s, oxigraph bulk load {:.2} s",
            ours.as_secs_f64(),
            p.as_secs_f64()
        ),
        None => println!("load: nearflow {:.2} s", ours.as_secs_f64()),
    }
}
