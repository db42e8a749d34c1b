//! The prototype behind the choice of nearflow's distributed engine (README, "Beyond one
//! machine"): the same two queries — a count over a 10-row table (the fixed cost of a job) and
//! a join of two tables on a key that neither is partitioned by (one shuffle of both sides) —
//! run by DataFusion in one process, by datafusion-distributed over local workers, and by
//! Ballista over a local scheduler and executors, all reading the same Parquet files.
//! `scripts/engine-choice.sh` starts the workers and runs the rounds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::*;

const JOIN: &str = "SELECT count(*) FROM a JOIN b ON a.k = b.k";
const TINY: &str = "SELECT count(*) FROM t WHERE k > 1";

fn usage() -> ! {
    eprintln!(
        "usage: engine-choice gen DIR ROWS | local DIR REPS | dd-worker PORT | dd-run DIR PORT,… REPS | \
         b-scheduler PORT | b-executor SCHEDULER_PORT PORT WORK_DIR | b-run DIR SCHEDULER_PORT REPS | \
         dd-once DIR PORT,… | dd-where DIR PORT,… REPS | b-once DIR SCHEDULER_PORT"
    );
    std::process::exit(2)
}

fn config() -> SessionConfig {
    SessionConfig::new().with_target_partitions(2)
}

async fn register(ctx: &SessionContext, dir: &str) -> datafusion::error::Result<()> {
    for t in ["a", "b", "t"] {
        ctx.register_parquet(t, format!("{dir}/{t}/"), ParquetReadOptions::default())
            .await?;
    }
    Ok(())
}

/// The count a query answers.
async fn count(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<i64> {
    let batches = ctx.sql(sql).await?.collect().await?;
    let column = batches[0].column(0);
    let ints = column
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .expect("count(*) is an Int64");
    Ok(ints.value(0))
}

/// Each query `reps` times: one line per query, its median, min and max in ms and its count.
async fn report(engine: &str, ctx: &SessionContext, reps: usize) -> datafusion::error::Result<()> {
    for (name, sql) in [("tiny", TINY), ("join", JOIN)] {
        let mut ms = Vec::new();
        let mut answer = 0;
        for _ in 0..reps {
            let t = Instant::now();
            answer = count(ctx, sql).await?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(f64::total_cmp);
        println!(
            "{engine}\t{name}\t{:.1}\t{:.1}\t{:.1}\t{answer}",
            ms[ms.len() / 2],
            ms[0],
            ms[ms.len() - 1]
        );
    }
    Ok(())
}

#[derive(Clone)]
struct Ports(Vec<u16>);

#[async_trait::async_trait]
impl datafusion_distributed::WorkerResolver for Ports {
    fn get_urls(&self) -> Result<Vec<url::Url>, datafusion::common::DataFusionError> {
        self.0
            .iter()
            .map(|p| {
                url::Url::parse(&format!("http://127.0.0.1:{p}"))
                    .map_err(|e| datafusion::common::DataFusionError::External(e.into()))
            })
            .collect()
    }
}

fn ports(list: &str) -> Vec<u16> {
    list.split(',')
        .map(|p| p.parse().unwrap_or_else(|_| usage()))
        .collect()
}

/// A session planning for datafusion-distributed over the workers on the ports in `list`, every
/// file its own task; `routed` adds our route-tasks handler.
async fn distributed_with(
    dir: &str,
    list: &str,
    routed: bool,
) -> datafusion::error::Result<SessionContext> {
    use datafusion_distributed::{DistributedExt, SessionStateBuilderExt};
    let mut state = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config())
        .with_distributed_worker_resolver(Ports(ports(list)))
        .with_distributed_planner()
        .with_distributed_file_scan_config_bytes_per_partition(1)?;
    if routed {
        state = state.with_distributed_route_tasks_handler(reversed(list));
    }
    let ctx = SessionContext::from(state.build());
    ctx.register_udf(worker_port(0));
    register(&ctx, dir).await?;
    Ok(ctx)
}

async fn distributed(dir: &str, list: &str) -> datafusion::error::Result<SessionContext> {
    distributed_with(dir, list, false).await
}

async fn ballista(dir: &str, port: &str) -> datafusion::error::Result<SessionContext> {
    use ballista::prelude::*;
    let state = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config())
        .build();
    let ctx = SessionContext::remote_with_state(&format!("df://127.0.0.1:{port}"), state).await?;
    register(&ctx, dir).await?;
    Ok(ctx)
}

/// `worker_port()`: the port of the worker that evaluates it (0 in the coordinator). Volatile,
/// so it is evaluated where its rows are, never folded into a constant when the plan is made.
fn worker_port(port: u16) -> datafusion::logical_expr::ScalarUDF {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::logical_expr::{create_udf, ColumnarValue, Volatility};
    create_udf(
        "worker_port",
        vec![],
        DataType::Int64,
        Volatility::Volatile,
        Arc::new(move |_: &[ColumnarValue]| {
            Ok(ColumnarValue::Scalar(
                datafusion::common::ScalarValue::Int64(Some(i64::from(port))),
            ))
        }),
    )
}

/// Which worker scanned which rows of `a`: the table's `v` runs 1..=N through its files in
/// order, so each task's file group is a range of `v`.
const WHERE: &str =
    "SELECT worker_port() AS worker, min(v) AS first, max(v) AS last, count(*) AS rows \
                     FROM a GROUP BY worker ORDER BY first";

/// A route-tasks handler that gives task `i` of a stage over a leaf the `i`-th worker of
/// `list` from its end, the reverse of the list's order, so that a routing obeyed shows in
/// which worker scanned which rows.
fn reversed(list: &str) -> impl datafusion_distributed::RouteTasksHandler {
    use datafusion_distributed::{RouteTasksEvent, RouteTasksEventResponse};
    let urls = Ports(ports(list));
    move |ev: RouteTasksEvent| {
        use datafusion_distributed::WorkerResolver;
        Some(urls.get_urls().map(|urls| {
            let n = urls.len();
            RouteTasksEventResponse::new(
                (0..ev.task_count)
                    .map(|i| urls[n - 1 - i % n].clone())
                    .collect(),
            )
        }))
    }
}

/// One join: its count, or the error it ended with (for the fault test).
async fn once(ctx: datafusion::error::Result<SessionContext>) {
    match async { count(&ctx?, JOIN).await }.await {
        Ok(n) => println!("answered\t{n}"),
        Err(e) => println!("failed\t{}", e.to_string().replace('\n', " ")),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let arg = |i: usize| a.get(i).map(String::as_str).unwrap_or_else(|| usage());
    let num = |i: usize| arg(i).parse::<u64>().unwrap_or_else(|_| usage());
    match arg(1) {
        "gen" => {
            // Two tables whose keys are two permutations of 0..rows (multipliers prime to the
            // row counts used), so the join matches every row once; a third of 10 rows.
            let n = num(3);
            let ctx = SessionContext::new_with_config(config());
            for (t, rows, mult) in [("a", n, 2_654_435_761u64), ("b", n, 40_503), ("t", 10, 1)] {
                let sql = format!(
                    "COPY (SELECT (value * {mult}) % {rows} AS k, value AS v \
                     FROM generate_series(1, {rows})) TO '{}/{t}/' STORED AS PARQUET",
                    arg(2)
                );
                ctx.sql(&sql).await?.collect().await?;
            }
        }
        "local" => {
            let ctx = SessionContext::new_with_config(config());
            register(&ctx, arg(2)).await?;
            report("datafusion-1-process", &ctx, num(3) as usize).await?;
        }
        "dd-worker" => {
            let port = num(2) as u16;
            let worker = datafusion_distributed::Worker::from_session_builder(
                move |ctx: datafusion_distributed::WorkerQueryContext| async move {
                    Ok(ctx
                        .builder
                        .with_scalar_functions(vec![Arc::new(worker_port(port))])
                        .build())
                },
            );
            tonic::transport::Server::builder()
                .add_service(worker.into_worker_server())
                .serve(SocketAddr::from(([127, 0, 0, 1], num(2) as u16)))
                .await?;
        }
        "dd-run" => {
            let ctx = distributed(arg(2), arg(3)).await?;
            let name = format!("datafusion-distributed-{}-workers", ports(arg(3)).len());
            report(&name, &ctx, num(4) as usize).await?;
        }
        "dd-once" => once(distributed(arg(2), arg(3)).await).await,
        "dd-where" => {
            // Each of `reps` runs: which worker scanned which range of `a`, with the reversed
            // routing (`reversed`) and with the engine's own.
            for (how, routed) in [("routed-reversed", true), ("engine-default", false)] {
                let ctx = distributed_with(arg(2), arg(3), routed).await?;
                for run in 0..num(4) {
                    let batches = ctx.sql(WHERE).await?.collect().await?;
                    let text = arrow::util::pretty::pretty_format_batches(&batches)?.to_string();
                    for line in text
                        .lines()
                        .filter(|l| l.starts_with("| ") && !l.contains("worker"))
                    {
                        println!("{how}\trun {run}\t{line}");
                    }
                }
            }
        }
        "b-scheduler" => {
            use ballista_scheduler::cluster::BallistaCluster;
            use ballista_scheduler::config::SchedulerConfig;
            let port = num(2) as u16;
            let config = SchedulerConfig {
                bind_port: port,
                ..SchedulerConfig::default()
            };
            let cluster = BallistaCluster::new_from_config(&config).await?;
            let at = SocketAddr::from(([127, 0, 0, 1], port));
            ballista_scheduler::scheduler_process::start_server(cluster, at, Arc::new(config))
                .await?;
        }
        "b-executor" => {
            use ballista_executor::executor_process::{
                start_executor_process, ExecutorProcessConfig,
            };
            let port = num(3) as u16;
            let config = ExecutorProcessConfig {
                scheduler_port: num(2) as u16,
                port,
                grpc_port: port + 1,
                bind_host: "127.0.0.1".into(),
                external_host: Some("127.0.0.1".into()),
                vcores: 1,
                work_dir: Some(arg(4).to_owned()),
                ..ExecutorProcessConfig::default()
            };
            start_executor_process(Arc::new(config)).await?;
        }
        "b-run" => {
            let ctx = ballista(arg(2), arg(3)).await?;
            report("ballista-2-executors", &ctx, num(4) as usize).await?;
        }
        "b-once" => once(ballista(arg(2), arg(3)).await).await,
        _ => usage(),
    }
    Ok(())
}
