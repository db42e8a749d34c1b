//! `nearflow bench sp2bench`: the LAS paper's experiment (§6.2–6.4): SP²Bench queries, one at a
//! time and 16 concurrent copies of each (the multi-query test), per policy and allocator, every
//! answer's row count checked; Oxigraph (in this process, single-threaded as it ships) as the
//! peer column, with a per-query time limit.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nearflow_policy::PolicyKind;
use nearflow_rt::{AllocatorKind, Pinning};
use nearflow_sparql::{self as sparql, Options};
use nearflow_topo::host::{cpu_label as host_cpu, in_a_vm};
use nearflow_topo::TopologySpec;
use serde::Serialize;

use crate::harness::{build_runtime, load_machine, median, parse_list, size_label, Csv};
use crate::Report;
use nearflow_rdf::open::Source;

#[derive(Debug, Clone)]
pub struct Config {
    /// The store: RDF files or a snapshot.
    pub source: Source,
    /// Queries (file names without `.sparql` in `--queries-dir`), comma-separated.
    pub queries: String,
    /// Where the query files are (`NAME.sparql`). Default: the original benchmark's files in
    /// `../shared/data/sp2bench/queries` when present, else our own wording of the 17 queries
    /// (`nearflow_apps::sp2bench::queries`).
    pub queries_dir: Option<PathBuf>,
    /// Policies (comma-separated).
    pub policies: String,
    /// Copies of each query run at once (comma-separated).
    pub concurrent: String,
    /// Allocators of the runtime (comma-separated: nearflow, system).
    pub allocators: String,
    /// Packet sizes in bytes (comma-separated); the default is the plan's (half the L2 cache
    /// of the topology). With more than one, each is a column of its own.
    pub packet_bytes: Option<String>,
    /// Timed repetitions per cell (median reported).
    pub reps: usize,
    /// Run the queries in a peer engine too: `oxigraph`.
    pub peer: Option<String>,
    /// The peer's time limit per query, in seconds ("> limit" in the table).
    pub peer_timeout: f64,
    /// The machine (default: this host).
    pub topology: TopologySpec,
    /// Thread binding (only applied on the host).
    pub pinning: Pinning,
    /// Also write the table as CSV to this file.
    pub csv: Option<PathBuf>,
    /// Also draw the table as an SVG bar chart (log time axis, one group per query).
    pub svg: Option<PathBuf>,
    /// Where the store's indexes lie over the NUMA nodes.
    pub store_placement: nearflow_rdf::open::StorePlacement,
    /// No progress output.
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

/// Runs every query under every engine, single and concurrent, then the peer; every row count
/// is checked against the first engine's.
pub fn run(cmd: &Config) -> Result<Report<Vec<Cell>>> {
    let mut out = String::new();
    let policies: Vec<PolicyKind> = parse_list(&cmd.policies)?;
    let concurrent: Vec<usize> = parse_list(&cmd.concurrent)?;
    let allocators: Vec<AllocatorKind> = parse_list(&cmd.allocators)?;
    let names: Vec<String> = parse_list(&cmd.queries)?;
    let packets: Vec<Option<usize>> = match &cmd.packet_bytes {
        None => vec![None],
        Some(list) => parse_list::<usize>(list)?.into_iter().map(Some).collect(),
    };
    if packets.is_empty()
        || packets
            .iter()
            .flatten()
            .any(|&p| !(64..=1 << 30).contains(&p))
    {
        bail!("--packet-bytes must list sizes of 64..=1073741824 bytes (1 GiB)");
    }
    if policies.is_empty() || concurrent.is_empty() || names.is_empty() || allocators.is_empty() {
        bail!("give at least one query, policy, allocator and concurrency");
    }
    if concurrent.iter().any(|&c| c == 0 || c > 1024) {
        bail!("--concurrent must list counts of 1..=1024 copies");
    }
    if let Some(p) = &cmd.peer {
        if p != "oxigraph" {
            bail!("unknown peer '{p}' (the only one is oxigraph)");
        }
        // Checked before any query runs, not after all of them.
        if !matches!(cmd.source, Source::Files(..)) {
            bail!("--peer oxigraph needs --data (Oxigraph loads the files itself)");
        }
    }
    if !(cmd.peer_timeout > 0.0 && cmd.peer_timeout.is_finite()) {
        bail!("--peer-timeout must be a positive number of seconds");
    }
    let texts = query_texts(cmd.queries_dir.as_deref(), &names)?;
    let machine = load_machine(&cmd.topology)?;
    let load_started = Instant::now();
    let store = Arc::new(
        cmd.source
            .open(&machine, &crate::harness::Said(cmd.quiet))?,
    );
    // The replicas' build counts as part of our load.
    nearflow_rdf::open::place(
        &store,
        cmd.store_placement,
        &crate::harness::Said(cmd.quiet),
    )?;
    let our_load = load_started.elapsed();
    let sizes: Vec<String> = packets
        .iter()
        .map(|p| size_label(p.unwrap_or_else(|| nearflow_flow::default_packet_bytes(&machine))))
        .collect();
    writeln!(
        out,
        "SP²Bench: {} triples; machine {}; host CPU {}{}; packets {}; {} reps, median",
        store.len(),
        machine.label(),
        host_cpu(),
        if in_a_vm() { " (a VM)" } else { "" },
        sizes.join(", "),
        cmd.reps
    )?;
    // Every engine (packet size × allocator × policy) is built first, and the repetitions of a
    // cell go round the engines in turn, so that a drift of the machine (another guest, the
    // page cache) falls on all of them alike; each engine runs each query once untimed first.
    let mut prepared: Vec<Vec<sparql::Prepared>> = Vec::new();
    for &packet in &packets {
        let options = Options {
            packet_bytes: packet,
            ..Options::default()
        };
        prepared.push(
            texts
                .iter()
                .zip(&names)
                .map(|(t, n)| sparql::prepare(&store, t, &options).with_context(|| n.clone()))
                .collect::<Result<_>>()?,
        );
    }
    let mut runtimes = Vec::new();
    for &alloc in &allocators {
        for &policy in &policies {
            let rt = build_runtime(machine.clone(), policy, cmd.pinning, false, alloc)?;
            runtimes.push((alloc, policy, rt));
        }
    }
    let mut engines = Vec::new();
    for (pi, &packet) in packets.iter().enumerate() {
        for (ri, (alloc, policy, _)) in runtimes.iter().enumerate() {
            let mut name = if allocators.len() > 1 {
                format!("{policy}/{alloc}")
            } else {
                policy.name().to_string()
            };
            if let (true, Some(p)) = (packets.len() > 1, packet) {
                write!(name, "/{}", size_label(p)).expect("a String");
            }
            engines.push((name, pi, ri));
        }
    }
    let run_batch = |qi: usize, pi: usize, ri: usize, c: usize| -> Result<u64> {
        let q = &prepared[pi][qi];
        let rt = &runtimes[ri].2;
        let running: Vec<_> = (0..c).map(|_| q.start(rt)).collect::<Result<_, _>>()?;
        let mut counts = Vec::new();
        for mut r in running {
            let mut n = 0u64;
            while let Some(b) = r.next_batch() {
                n += b.len() as u64;
            }
            r.finish()?;
            counts.push(n);
        }
        if counts.iter().any(|&n| n != counts[0]) {
            bail!(
                "{}: concurrent copies gave different row counts {counts:?}",
                names[qi]
            );
        }
        Ok(counts[0])
    };
    let mut cells = Vec::new();
    // Per query and engine: the untimed run's index reads and those from another node's memory.
    let mut reads: Vec<(usize, usize, (u64, u64))> = Vec::new();
    let mut reference: Vec<Option<u64>> = vec![None; names.len()];
    for qi in 0..names.len() {
        for (e, (engine, pi, ri)) in engines.iter().enumerate() {
            let rows = run_batch(qi, *pi, *ri, 1)?;
            reads.push((qi, e, prepared[*pi][qi].index_reads()));
            if *reference[qi].get_or_insert(rows) != rows {
                bail!(
                    "{}: {engine} gave {rows} rows, another engine {:?}",
                    names[qi],
                    reference[qi]
                );
            }
        }
        for &c in &concurrent {
            let mut times = vec![Vec::new(); engines.len()];
            let mut rows = 0;
            for _ in 0..cmd.reps {
                for (e, (engine, pi, ri)) in engines.iter().enumerate() {
                    let t = Instant::now();
                    rows = run_batch(qi, *pi, *ri, c)?;
                    times[e].push(t.elapsed());
                    if Some(rows) != reference[qi] {
                        bail!(
                            "{}: {engine} gave {rows} rows, earlier {:?}",
                            names[qi],
                            reference[qi]
                        );
                    }
                }
            }
            for ((engine, _, _), times) in engines.iter().zip(times) {
                let secs = median(times).as_secs_f64();
                if !cmd.quiet {
                    eprintln!("{} {engine} ×{c}: {}", names[qi], self::secs(secs));
                }
                cells.push(Cell {
                    query: names[qi].clone(),
                    engine: engine.clone(),
                    concurrent: c,
                    seconds: Some(secs),
                    rows,
                });
            }
        }
    }
    let mut peer_load = None;
    if cmd.peer.is_some() {
        let Source::Files(files, _) = &cmd.source else {
            bail!("--peer oxigraph needs --data (Oxigraph loads the files itself)");
        };
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
                    secs.map_or(format!("> {} s", cmd.peer_timeout), self::secs)
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
    table(&mut out, cmd, &names, &cells, our_load, peer_load)?;
    if machine.node_count() > 1 {
        remote_table(&mut out, &store, &names, &engines, &reads)?;
    }
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
        writeln!(out, "wrote {}", path.display())?;
    }
    if let Some(path) = &cmd.svg {
        draw(cmd, path, &names, &cells, store.len())?;
        writeln!(out, "wrote {}", path.display())?;
    }
    Ok(Report::new(cells, out))
}

/// The original benchmark's query files, when there.
pub const ORIGINAL_QUERIES: &str = "../shared/data/sp2bench/queries";

/// The texts of `names`: from `dir`, else from [`ORIGINAL_QUERIES`] when present, else our own
/// wording. Says on stderr which it used.
pub fn query_texts(dir: Option<&std::path::Path>, names: &[String]) -> Result<Vec<String>> {
    let original = std::path::Path::new(ORIGINAL_QUERIES);
    let dir = dir.or_else(|| original.is_dir().then_some(original));
    let mut texts = Vec::new();
    match dir {
        Some(d) => {
            eprintln!("queries from {}", d.display());
            for q in names {
                let f = d.join(format!("{q}.sparql"));
                texts.push(
                    std::fs::read_to_string(&f)
                        .with_context(|| format!("{} (the query '{q}')", f.display()))?,
                );
            }
        }
        None => {
            eprintln!("queries: our own wording of SP²Bench's ({ORIGINAL_QUERIES} is absent)");
            for q in names {
                let known: Vec<&str> = nearflow_apps::sp2bench::queries::QUERIES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect();
                texts.push(nearflow_apps::sp2bench::queries::text(q).with_context(|| {
                    format!("no query '{q}' (SP²Bench has {})", known.join(", "))
                })?);
            }
        }
    }
    Ok(texts)
}

/// The table as a chart: one group per query, one bar per engine and concurrency.
fn draw(
    cmd: &Config,
    path: &std::path::Path,
    names: &[String],
    cells: &[Cell],
    triples: u64,
) -> Result<()> {
    use crate::chart::{log_bars, Bar};
    let cols = columns(cells);
    let bars: Vec<Vec<Bar>> = names
        .iter()
        .map(|q| {
            cols.iter()
                .map(|(e, n)| {
                    cells
                        .iter()
                        .find(|c| &c.query == q && &c.engine == e && c.concurrent == *n)
                        .map_or(Bar::Missing, |c| match c.seconds {
                            Some(s) => Bar::Secs(s),
                            None => Bar::Over(cmd.peer_timeout),
                        })
                })
                .collect()
        })
        .collect();
    let series: Vec<String> = cols.iter().map(|(e, c)| format!("{e} ×{c}")).collect();
    let title = format!(
        "SP²Bench, {triples} triples; median of {} reps; {}",
        cmd.reps,
        host_cpu()
    );
    let y_desc =
        "time to answer (log scale; lower is better; ×N: N copies at once, until the last ends)";
    log_bars(path, &title, y_desc, names, &series, &bars)
}

/// The table's columns: (engine, copies), in the order first measured.
fn columns(cells: &[Cell]) -> Vec<(String, usize)> {
    let mut cols: Vec<(String, usize)> = Vec::new();
    for c in cells {
        if !cols.contains(&(c.engine.clone(), c.concurrent)) {
            cols.push((c.engine.clone(), c.concurrent));
        }
    }
    cols
}

/// A time for the table: microseconds below 0.1 ms, milliseconds below 0.1 s (so that small
/// queries are not all "0.000 s").
pub fn secs(s: f64) -> String {
    if s < 1e-4 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 0.1 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}

/// Seconds as milliseconds for the table: three significant digits below 100 ms, whole
/// milliseconds above.
pub fn ms(s: f64) -> String {
    let m = s * 1e3;
    if m < 1.0 {
        format!("{m:.3}")
    } else if m < 10.0 {
        format!("{m:.2}")
    } else if m < 100.0 {
        format!("{m:.1}")
    } else {
        format!("{m:.0}")
    }
}

/// Where each query's index reads came from: per engine, the share of the
/// untimed single run's reads that read memory of another node than the reading worker's.
fn remote_table(
    out: &mut String,
    store: &nearflow_rdf::Store,
    names: &[String],
    engines: &[(String, usize, usize)],
    reads: &[(usize, usize, (u64, u64))],
) -> std::fmt::Result {
    writeln!(
        out,
        "index reads from another NUMA node's memory, one copy (store {}):",
        if store.is_replicated() {
            "replicated on every node"
        } else {
            "partitioned over the nodes"
        }
    )?;
    let head: Vec<&str> = engines.iter().map(|(e, _, _)| e.as_str()).collect();
    writeln!(out, "| query | {} |", head.join(" | "))?;
    writeln!(out, "|---|{}|", vec!["---:"; engines.len()].join("|"))?;
    for (qi, q) in names.iter().enumerate() {
        let vals: Vec<String> = (0..engines.len())
            .map(|e| {
                reads.iter().find(|r| r.0 == qi && r.1 == e).map_or(
                    "-".into(),
                    |&(_, _, (all, remote))| {
                        if all == 0 {
                            "no reads".into()
                        } else {
                            format!("{:.1} % of {all}", 100.0 * remote as f64 / all as f64)
                        }
                    },
                )
            })
            .collect();
        writeln!(out, "| {q} | {} |", vals.join(" | "))?;
    }
    Ok(())
}

fn table(
    out: &mut String,
    cmd: &Config,
    names: &[String],
    cells: &[Cell],
    ours: Duration,
    peer: Option<Duration>,
) -> std::fmt::Result {
    let cols = columns(cells);
    // One unit for every cell (ms), so that a column reads at a glance; the precision follows
    // the size (3 significant digits or whole milliseconds).
    let head: Vec<String> = cols.iter().map(|(e, c)| format!("{e} ×{c} (ms)")).collect();
    writeln!(out, "| query | rows | {} |", head.join(" | "))?;
    writeln!(out, "|---|---:|{}|", vec!["---:"; cols.len()].join("|"))?;
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
                        Some(s) => ms(s),
                        None => format!("> {}", ms(cmd.peer_timeout)),
                    })
            })
            .collect();
        writeln!(out, "| {q} | {rows} | {} |", vals.join(" | "))?;
    }
    match peer {
        Some(p) => writeln!(
            out,
            "load: nearflow {:.2} s, oxigraph bulk load {:.2} s",
            ours.as_secs_f64(),
            p.as_secs_f64()
        )?,
        None => writeln!(out, "load: nearflow {:.2} s", ours.as_secs_f64())?,
    }
    Ok(())
}
