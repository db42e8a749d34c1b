//! # nearflow-cluster — SPARQL over a sharded store, on datafusion-distributed
//!
//! A store split into shards (`nearflow load … --shards N`, `nearflow_rdf::shard`) is served
//! by **workers**: processes that each open the shards asked of them and answer query
//! fragments on nearflow's runtime. A **coordinator** cuts a query into fragments that each
//! shard answers alone (`nearflow_sparql::fragment`: by subject, a basic graph pattern's star
//! on one subject), runs each fragment as a stage of `datafusion-distributed` with one task per
//! shard, routed to the worker that holds the shard, and plans the rest of the query (the
//! joins between stars, OPTIONAL, FILTER, ORDER BY, …) over the fragments' rows with nearflow's
//! planner, run on its own runtime ([`Coordinator::prepare`]).
//!
//! The engine does the rest of what a cluster needs: the workers' gRPC service, the plan's
//! encoding ([`FragmentExec`] with its codec), the tasks' placement through our route
//! handler, and the rows' transport as Arrow (each fragment's columns are `UInt32` ids, which
//! agree across shards because every shard holds the whole dictionary).
//!
//! **Failure.** A worker that dies or cannot be reached fails the fragment's stage, and with
//! it the query, with the engine's transport error: a query is answered whole or not at all.
//! A worker that serves another store is refused: every fragment carries the fingerprint of the
//! coordinator's manifest, and a worker whose folder's differs fails the task. A shard opens
//! read-only; a cluster takes no update.
//!
//! ## Files
//!
//! - `lib.rs` — [`ShardServer`] (a worker's shards and runtime), [`serve_worker`],
//!   [`Coordinator`].
//! - `exec.rs` — [`FragmentExec`]: a fragment as the engine's plan node, its codec and its
//!   table.

mod exec;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlanProperties, ReplaceChildrenOptions,
};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_distributed::{
    DesiredTaskCountEvent, DesiredTaskCountEventResponse, DistributedExt, RouteTasksEvent,
    RouteTasksEventResponse, ScaleUpLeafNodeEvent, ScaleUpLeafNodeEventResponse,
    SessionStateBuilderExt, WorkerQueryContext, WorkerResolver,
};
use futures::TryStreamExt;
use nearflow_rdf::index::Store;
use nearflow_rdf::shard::{Manifest, ShardBy, ShardError};
use nearflow_sparql::fragment::{self, Given, GivenRows, Split};
use nearflow_sparql::{Options, Plan, Prepared, Query, QueryError};
use nearflow_topo::Machine;

pub use exec::{FragmentCodec, FragmentExec};

/// Why a cluster could not be served or queried.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The folder is not a sharded store, or one of its shards is damaged.
    #[error(transparent)]
    Shards(#[from] ShardError),
    /// A shard could not be opened.
    #[error("shard {shard}: {why}")]
    Open {
        /// The shard.
        shard: usize,
        /// Why.
        why: String,
    },
    /// The query cannot run on a cluster, or failed.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A worker's URL is not one.
    #[error("worker address {addr:?}: {why}")]
    Address {
        /// What was given.
        addr: String,
        /// Why it is refused.
        why: String,
    },
    /// The distributed engine failed: a worker died, could not be reached, or refused a task.
    #[error("the cluster failed: {0}")]
    Engine(String),
    /// The tokio runtime or the worker's socket could not be set up.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A one-shard store: nothing to distribute.
    #[error(
        "{0} holds one shard: query it as a store (`--store {0}/shard-0.store`), or load it \
         again with `--shards 2` or more"
    )]
    OneShard(PathBuf),
}

impl From<ClusterError> for QueryError {
    /// A cluster's failure as a query's: what a cluster does not run stays `Unsupported`, a
    /// query's own error stays itself, the rest is an execution error.
    fn from(e: ClusterError) -> Self {
        match e {
            ClusterError::Query(q) => q,
            other => QueryError::Exec(other.to_string()),
        }
    }
}

impl From<datafusion::error::DataFusionError> for ClusterError {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        let detail = e.to_string().replace('\n', " ");
        // The engine reports a worker lost in the middle of a stream, or never reached, as a
        // transport error of its gRPC stack: said first in words, the detail after.
        let lost = [
            "h2 protocol error",
            "transport error",
            "broken pipe",
            "connection refused",
        ]
        .iter()
        .any(|m| detail.to_lowercase().contains(m));
        ClusterError::Engine(if lost {
            format!(
                "a worker could not be reached or stopped answering (it died, or the network \
                 failed); the query is not answered. The engine said: {detail}"
            )
        } else {
            detail
        })
    }
}

/// The split a manifest's rule gives the fragments.
fn split_of(by: ShardBy) -> Split {
    match by {
        ShardBy::Subject => Split::Subject,
        ShardBy::Triple => Split::Triple,
    }
}

/// A sharded store's folder as a worker serves it: the shards it was asked for, opened on
/// first use and kept, and the runtime their fragments run on.
pub struct ShardServer {
    dir: PathBuf,
    manifest: Manifest,
    fingerprint: u32,
    machine: Machine,
    rt: nearflow_rt::Runtime,
    options: Options,
    open: Mutex<HashMap<usize, Arc<Store>>>,
}

impl ShardServer {
    /// Serves the sharded store in `dir` on a runtime for `machine`; each fragment runs with
    /// `options` (its memory limit, its time limit).
    ///
    /// # Errors
    /// When the manifest is missing or damaged, or the runtime cannot start.
    pub fn open(dir: &Path, machine: Machine, options: Options) -> Result<Self, ClusterError> {
        let manifest = Manifest::read(dir)?;
        let rt = nearflow_rt::Runtime::builder(machine.clone())
            .build()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(ShardServer {
            dir: dir.to_owned(),
            fingerprint: manifest.fingerprint(),
            manifest,
            machine,
            rt,
            options,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// The folder's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Shard `i`, opened (read-only) on first use.
    ///
    /// # Errors
    /// When `i` is not a shard of the folder or its file cannot be opened.
    pub fn shard(&self, i: usize) -> Result<Arc<Store>, ClusterError> {
        if i >= self.manifest.sharding.shards {
            return Err(ClusterError::Open {
                shard: i,
                why: format!("the store has {} shards", self.manifest.sharding.shards),
            });
        }
        if let Some(s) = self.open.lock().expect("not poisoned").get(&i) {
            return Ok(s.clone());
        }
        let path = Manifest::shard_path(&self.dir, i);
        let store =
            nearflow_rdf::open::open_store(&self.machine, &path, &nearflow_rdf::open::Silent)
                .map_err(|e| ClusterError::Open {
                    shard: i,
                    why: e.to_string(),
                })?;
        let store = Arc::new(store);
        self.open
            .lock()
            .expect("not poisoned")
            .entry(i)
            .or_insert(store.clone());
        Ok(store)
    }
}

/// Serves `server`'s shards as a datafusion-distributed worker on `addr` until Ctrl-C or
/// SIGTERM; `listening` is told the address once it is bound (port 0 takes a free one).
///
/// # Errors
/// When the address cannot be bound.
pub fn serve_worker(
    server: Arc<ShardServer>,
    addr: SocketAddr,
    listening: impl FnOnce(SocketAddr),
) -> Result<(), ClusterError> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    tokio.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        listening(listener.local_addr()?);
        // Graceful: the server stops taking requests, and ends once those in flight have.
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let stop = async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        let worker =
            datafusion_distributed::Worker::from_session_builder(move |ctx: WorkerQueryContext| {
                let server = server.clone();
                async move {
                    Ok(ctx
                        .builder
                        .with_distributed_user_codec(FragmentCodec::new(Some(server)))
                        .build())
                }
            });
        tonic::transport::Server::builder()
            .add_service(worker.into_worker_server())
            .serve_with_incoming_shutdown(tokio_stream_of(listener), stop)
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(())
    })
}

/// The accepted connections of `listener`, as tonic's server reads them.
fn tokio_stream_of(
    listener: tokio::net::TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |l| async move {
        let next = l.accept().await.map(|(s, _)| {
            let _ = s.set_nodelay(true);
            s
        });
        Some((next, l))
    })
}

/// The workers' URLs, for the engine.
#[derive(Clone)]
struct Workers(Vec<url::Url>);

impl WorkerResolver for Workers {
    fn get_urls(&self) -> Result<Vec<url::Url>, datafusion::common::DataFusionError> {
        Ok(self.0.clone())
    }
}

/// Parses worker addresses: `host:port` or `http://host:port`, comma-separated.
///
/// # Errors
/// For an empty list or an address that is not one.
pub fn worker_urls(list: &str) -> Result<Vec<url::Url>, ClusterError> {
    let mut out = Vec::new();
    for a in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let text = if a.contains("://") {
            a.to_owned()
        } else {
            format!("http://{a}")
        };
        let bad = |why: String| ClusterError::Address {
            addr: a.to_owned(),
            why,
        };
        let u = url::Url::parse(&text).map_err(|e| bad(e.to_string()))?;
        if u.scheme() != "http" || u.host_str().is_none() || u.port().is_none() {
            return Err(bad("give host:port (http, with a port)".into()));
        }
        out.push(u);
    }
    if out.is_empty() {
        return Err(ClusterError::Address {
            addr: list.to_owned(),
            why: "no worker given".into(),
        });
    }
    Ok(out)
}

/// What a query's fragments cost on the cluster: for `--explain` and the benchmark.
#[derive(Clone, Debug, Default)]
pub struct Fetched {
    /// Fragments run.
    pub fragments: usize,
    /// Rows they returned, all shards together.
    pub rows: u64,
    /// Time from the first fragment's start to the last one's end (they run concurrently).
    pub elapsed: Duration,
}

/// A query's coordinator: plans over the fragments' rows from the workers.
pub struct Coordinator {
    dir: PathBuf,
    manifest: Manifest,
    store: Arc<Store>,
    ctx: SessionContext,
    tokio: tokio::runtime::Runtime,
}

impl nearflow_sparql::QueryPlanner for Coordinator {
    /// [`Coordinator::prepare_query`], with what the fragments cost as the plan's note.
    fn plan(&self, query: Arc<Query>, options: &Options) -> Result<Prepared, QueryError> {
        let (prepared, f) = self.prepare_query(query, options)?;
        Ok(prepared.noted(format!(
            "cluster: {} fragments on {} shards, {} rows from the workers in {:.3} s",
            f.fragments,
            self.manifest.sharding.shards,
            f.rows,
            f.elapsed.as_secs_f64()
        )))
    }
}

impl Drop for Coordinator {
    /// Lets the engine's tasks of the last query end before the runtime does. A query's tasks
    /// outlive its answer for a moment (they close the streams to the workers, or are being
    /// dropped after a query stopped early), and a runtime dropped under them would cancel a
    /// task's children while it waits for them, which the engine reports as a panic. What
    /// stays are the connections to the workers, whose number then holds still: the wait ends
    /// once the count of live tasks has not changed for 25 ms, or after 2 s.
    fn drop(&mut self) {
        let metrics = self.tokio.metrics();
        let start = Instant::now();
        let (mut last, mut since) = (metrics.num_alive_tasks(), Instant::now());
        while since.elapsed() < Duration::from_millis(25)
            && start.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_millis(1));
            let now = metrics.num_alive_tasks();
            if now != last {
                (last, since) = (now, Instant::now());
            }
        }
    }
}

impl Coordinator {
    /// A coordinator of the sharded store in `dir`, served by `workers`. The coordinator opens
    /// one shard for the dictionary (every shard holds all of it): ids and terms, the filters'
    /// values; it reads none of that shard's quads.
    ///
    /// # Errors
    /// When the folder is not a sharded store of two or more shards.
    pub fn connect(
        dir: &Path,
        workers: Vec<url::Url>,
        machine: &Machine,
    ) -> Result<Self, ClusterError> {
        let manifest = Manifest::read(dir)?;
        let shards = manifest.sharding.shards;
        if shards < 2 {
            return Err(ClusterError::OneShard(dir.to_owned()));
        }
        let store = nearflow_rdf::open::open_store(
            machine,
            &Manifest::shard_path(dir, 0),
            &nearflow_rdf::open::Silent,
        )
        .map_err(|e| ClusterError::Open {
            shard: 0,
            why: e.to_string(),
        })?;
        let routes = workers.clone();
        let state = SessionStateBuilder::new()
            .with_default_features()
            .with_config(SessionConfig::new().with_target_partitions(1))
            .with_distributed_worker_resolver(Workers(workers))
            .with_distributed_planner()
            .with_distributed_user_codec(FragmentCodec::new(None))
            // One task per shard, however few workers: a stage of one task would run here.
            .with_distributed_max_tasks_per_stage(shards)?
            .with_distributed_desired_task_count_handler(|ev: DesiredTaskCountEvent| {
                let f = ev.plan.downcast_ref::<FragmentExec>()?;
                Some(Ok(DesiredTaskCountEventResponse::desired(f.shards())))
            })
            .with_distributed_scale_up_leaf_node_handler(|ev: ScaleUpLeafNodeEvent| {
                ev.plan.downcast_ref::<FragmentExec>()?;
                Some(Ok(ScaleUpLeafNodeEventResponse::new(ev.plan.clone())))
            })
            // Task i to worker i mod W: a shard's task always to the same worker.
            .with_distributed_route_tasks_handler(move |ev: RouteTasksEvent| {
                let n = routes.len();
                Some(Ok(RouteTasksEventResponse::new(
                    (0..ev.task_count).map(|i| routes[i % n].clone()).collect(),
                )))
            })
            .build();
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        Ok(Coordinator {
            dir: dir.to_owned(),
            manifest,
            store: Arc::new(store),
            ctx: SessionContext::from(state),
            tokio,
        })
    }

    /// The store the coordinator reads the dictionary from.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The folder's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Parses `text`, runs its fragments on the workers and plans the rest over their rows:
    /// a query ready to run on the caller's runtime.
    ///
    /// # Errors
    /// A syntax error, a query a cluster does not run ([`fragment::fragments`]), or a
    /// fragment that failed on the cluster.
    pub fn prepare(
        &self,
        text: &str,
        options: &Options,
    ) -> Result<(Prepared, Fetched), ClusterError> {
        self.prepare_query(Arc::new(Query::parse(text, options)?), options)
    }

    /// [`prepare`](Self::prepare) of a query already parsed (the endpoint's, with the
    /// protocol's dataset set on it).
    ///
    /// # Errors
    /// As [`prepare`](Self::prepare).
    pub fn prepare_query(
        &self,
        query: Arc<Query>,
        options: &Options,
    ) -> Result<(Prepared, Fetched), ClusterError> {
        let split = split_of(self.manifest.sharding.by);
        let fragments = fragment::fragments(&query, split)?;
        let start = Instant::now();
        let fingerprint = self.manifest.fingerprint();
        let shards = self.manifest.sharding.shards;
        // The fragments' rows count against the query's memory limit, twice over: as fetched,
        // and as the plan's rows of the query's full width that they become when it runs.
        // Their fetching counts against its time limit (the plan over them then runs within
        // the limits again).
        let held = AtomicUsize::new(0);
        let full_row = nearflow_sparql::lower::width_class(query.names.len())
            .unwrap_or(nearflow_sparql::lower::MAX_WIDTH);
        let limit = options.memory_limit.map(|l| (l, full_row));
        let fetch = futures::future::try_join_all(
            fragments
                .iter()
                .map(|f| self.run_fragment(f, shards, fingerprint, (&held, limit))),
        );
        let answers = self.tokio.block_on(async {
            match options.timeout {
                Some(t) => tokio::time::timeout(t, fetch)
                    .await
                    .map_err(|_| ClusterError::Query(QueryError::Timeout(t)))?,
                None => fetch.await,
            }
        })?;
        let mut fetched = Fetched {
            fragments: fragments.len(),
            elapsed: start.elapsed(),
            ..Fetched::default()
        };
        let mut given = Given {
            split,
            rows: HashMap::new(),
        };
        for (f, rows) in fragments.into_iter().zip(answers) {
            fetched.rows += rows.rows as u64;
            given.rows.insert(f.text, Arc::new(rows));
        }
        Ok((query.plan_given(&self.store, options, &given), fetched))
    }

    /// One fragment on every shard: its rows, all shards' together.
    async fn run_fragment(
        &self,
        f: &fragment::Fragment,
        shards: usize,
        fingerprint: u32,
        (held, limit): (&AtomicUsize, Option<(usize, usize)>),
    ) -> Result<GivenRows, ClusterError> {
        let table = exec::FragmentTable::new(f, shards, fingerprint);
        let df = self.ctx.read_table(Arc::new(table))?;
        let plan = df.create_physical_plan().await?;
        // The engine's coordinator node reads one partition: the tasks' streams merged under it
        // (DataFusion's optimizer drops a merge at a plan's root).
        let plan = match plan.children().as_slice() {
            [tasks] if plan.output_partitioning().partition_count() > 1 => {
                let merged = Arc::new(CoalescePartitionsExec::new(Arc::clone(tasks)));
                Arc::clone(&plan).replace_children(
                    vec![merged],
                    ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
                )?
            }
            _ => plan,
        };
        let mut stream = datafusion::physical_plan::execute_stream(plan, self.ctx.task_ctx())?;
        let width = f.cols.len();
        let mut out = GivenRows {
            cols: f.cols.clone(),
            rows: 0,
            ids: Vec::new(),
        };
        while let Some(batch) = stream.try_next().await? {
            let ids = width.max(1) + limit.map_or(0, |(_, full_row)| full_row);
            let bytes = batch.num_rows() * ids * std::mem::size_of::<u32>();
            let now = held.fetch_add(bytes, Ordering::Relaxed) + bytes;
            if let Some((limit, _)) = limit.filter(|&(l, _)| now > l) {
                return Err(ClusterError::Query(QueryError::MemoryLimit {
                    operator: "the rows of the query's fragments from the shards".into(),
                    limit,
                    wanted: now,
                }));
            }
            exec::append_ids(&batch, width, &mut out)?;
        }
        Ok(out)
    }
}
