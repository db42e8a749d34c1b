//! `nearflow serve`: a SPARQL 1.1 Protocol endpoint over a nearflow store.
//!
//! HTTP/1.1 is served by hyper (axum's router, our accept loop) on a small tokio runtime that does I/O only
//! ([`Config::io_threads`], one thread by default). A query is parsed and planned on a thread of
//! tokio's blocking pool and runs as one request of the nearflow runtime, like every other
//! flow plan (LAS paper §4: a request is a unit the policy places and balances); the blocking
//! thread reads its batches and writes the answer into the response body, so neither the
//! query's work nor its serialisation touches the I/O threads.
//!
//! Routes:
//! - `/query` (and `/sparql`): the query operation of the SPARQL 1.1 Protocol — `GET` with the
//!   query in the URL, `POST` of a URL-encoded form or of the query itself
//!   (`application/sparql-query`); `default-graph-uri` and `named-graph-uri` override the
//!   query's dataset; `timeout` lowers the time limit; `format` names a result format where a
//!   client cannot set `Accept`. A `GET` without parameters answers the service description.
//! - `/store`: the Graph Store HTTP Protocol (`?default` or `?graph=IRI`): `GET` and `HEAD`,
//!   `PUT`, `POST` and `DELETE` (`write.rs`).
//! - `/update`: SPARQL 1.1 Update (a form with `update`, or `application/sparql-update`; also
//!   accepted at `/query`), answered once it is on disk (`write.rs`, `nearflow_rdf::db`).
//! - `/status`: what the endpoint is doing, as JSON (with the runtime's counters per core
//!   group); `/prefixes`: the store's namespaces with their usual prefixes.
//! - `/`: a page — a query editor that knows the store's prefixes, a results table that
//!   pages, the runtime's live view.
//!
//! Who may use it from where (`access.rs`): by default no page of another origin may read an
//! answer or write, a loopback server answers only requests for a loopback `Host`, and a
//! server beyond loopback takes writes only with a token ([`Access`]).
//!
//! Protection against what clients send ([`Config`]): a time limit per query (the default and
//! the most a request may ask), a memory limit per query, at most [`Config::max_running`]
//! queries at once with at most [`Config::max_waiting`] waiting (503 beyond), request bodies of
//! at most [`Config::max_request_bytes`] (413 beyond), headers within
//! [`Config::header_timeout`] (a stalled connection is closed). A query whose client goes away is
//! cancelled inside the runtime. An answer that fits the first 64 KiB is sent only once the
//! query has ended, so its status says whether it succeeded; a longer one streams, and a
//! failure after its first bytes aborts the response (the client sees a broken transfer, never
//! a truncated document that parses).
//!
//! Files: `protocol.rs` reads a request, `negotiate.rs` picks a format, `respond.rs` runs a
//! query and writes its answer, `write.rs` runs updates and Graph Store writes, this file holds
//! the configuration, the routes and the errors.

pub mod access;
mod conn;
pub mod negotiate;
pub mod prefixes;
pub mod protocol;
mod respond;
pub mod write;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use nearflow_rdf::db::Db;
use nearflow_rt::Runtime;
use nearflow_sparql::QueryPlanner;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use access::Access;

/// How the endpoint runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The time limit of a query, and the most a request's `timeout` may ask.
    pub timeout: Duration,
    /// Bytes a query's operators may hold (sorts, hash tables, DISTINCT's set); `None`: no limit.
    pub memory_limit: Option<usize>,
    /// Where a query's hash join or DISTINCT that would pass the memory limit writes its rows
    /// and goes on ([`Options::spill`](nearflow_sparql::Options::spill), the system's
    /// temporary folder by default); `None`: the query fails at the limit. Each query's files
    /// take at most what the folder's file system has free when it starts, shared by twice
    /// [`max_running`](Self::max_running): the queries running at once never fill it.
    pub spill: Option<std::path::PathBuf>,
    /// Queries run at once; more wait.
    pub max_running: usize,
    /// Queries that may wait for a turn; more are refused with 503.
    pub max_waiting: usize,
    /// The largest request body (a query, a form) accepted; larger ones get 413.
    pub max_request_bytes: usize,
    /// Threads of the tokio runtime that does the HTTP I/O.
    pub io_threads: usize,
    /// How long a connection may take to send a request's headers (and may stay idle between
    /// requests); past it the connection is closed, so that stalled clients do not pile up.
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive whole; past it the request gets 408 and
    /// its connection is closed (a client trickling its body cannot hold a connection).
    pub body_timeout: Duration,
    /// Connections open at once; at the cap the oldest idle one is closed for a new one.
    pub max_connections: usize,
    /// Where an update's LOAD may read files (by default nowhere: a client must not make the
    /// server read its host's files).
    pub load: nearflow_sparql::update::LoadFrom,
    /// Who may read and write from where ([`Access`]: by default no other origin, loopback
    /// hosts only).
    pub access: Access,
}

impl Config {
    /// The defaults for a store on `machine_pus` processing units: a 60 s time limit, four
    /// queries at once per PU (at least 8: their tasks share the runtime's workers, so that
    /// short queries are not queued behind long ones), 64 waiting, 1 MiB requests, one I/O
    /// thread, and a memory limit per query of this host's memory shared by twice the queries
    /// that may run (at least 256 MiB), so that the running queries together stay within half
    /// of it rather than waking the OOM killer.
    pub fn for_pus(machine_pus: usize) -> Self {
        let max_running = (4 * machine_pus).max(8);
        Config {
            timeout: Duration::from_secs(60),
            memory_limit: Config::memory_limit_for(max_running),
            spill: nearflow_sparql::Options::standard().spill,
            max_running,
            max_waiting: 64,
            max_request_bytes: 1 << 20,
            io_threads: 1,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 512,
            load: nearflow_sparql::update::LoadFrom::Nowhere,
            access: Access::default(),
        }
    }
}

impl Config {
    /// The spill limit of a query starting now: what the spill folder's file system has free,
    /// shared by twice the queries that may run at once (`None` without a folder).
    pub(crate) fn spill_limit(&self) -> Option<u64> {
        let dir = self.spill.as_deref()?;
        let free = nearflow_topo::host::disk_available(dir).unwrap_or(0);
        Some(free / (2 * self.max_running.max(1) as u64))
    }
}

impl Config {
    /// The default memory limit per query when `max_running` queries may run at once: this
    /// host's memory over `2 × max_running`, at least 256 MiB (`None` where the host's memory
    /// cannot be read).
    pub fn memory_limit_for(max_running: usize) -> Option<usize> {
        nearflow_topo::host::memory()
            .map(|m| (m / (2 * max_running.max(1) as u64)).max(256 << 20) as usize)
    }
}

/// A refusal or failure: its status and a message for the client (plain text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, in words.
    pub message: String,
    /// The query was cancelled ([`nearflow_sparql::QueryError::Cancelled`]: its client went
    /// away), which the endpoint counts apart from failures.
    pub cancelled: bool,
}

impl ApiError {
    /// An error with `status` saying `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            cancelled: false,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, format!("{}\n", self.message)).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    }
}

impl From<nearflow_sparql::QueryError> for ApiError {
    fn from(e: nearflow_sparql::QueryError) -> Self {
        use nearflow_sparql::QueryError as Q;
        let status = match &e {
            Q::Syntax(_) | Q::Invalid(_) | Q::Unsupported(_) => StatusCode::BAD_REQUEST,
            Q::Timeout(_) | Q::MemoryLimit { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Q::Cancelled | Q::Exec(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError {
            cancelled: matches!(e, Q::Cancelled),
            ..ApiError::new(status, e.to_string())
        }
    }
}

/// Counters of what the endpoint did, shown by `/status`.
#[derive(Default, Debug)]
pub struct Counters {
    /// Requests answered with 2xx (`/status` and preflights not counted).
    pub answered: AtomicU64,
    /// Requests refused or failed (4xx, 5xx), including queries turned away busy.
    pub failed: AtomicU64,
    /// Queries cancelled because their client went away.
    pub cancelled: AtomicU64,
    /// Queries running now.
    pub running: AtomicUsize,
    /// Queries waiting for a turn now.
    pub waiting: AtomicUsize,
}

/// One more in a count while it lives (queries waiting, queries running).
pub(crate) struct InCount<'a>(&'a AtomicUsize);

impl<'a> InCount<'a> {
    pub(crate) fn enter(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        InCount(count)
    }
}

impl Drop for InCount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The endpoint: a store (its versions: `nearflow_rdf::db`), the runtime its queries run on,
/// and its limits.
pub struct Endpoint {
    db: Arc<Db>,
    load: nearflow_sparql::update::LoadFrom,
    rt: Arc<Runtime>,
    config: Config,
    turns: Arc<Semaphore>,
    /// Writes run one at a time (the store's writer is one), beside the queries' turns: an
    /// update does not wait behind queries, and cannot crowd them out.
    writes: Arc<Semaphore>,
    /// The store's namespaces and their prefixes ([`prefixes::of`]).
    prefixes: Vec<(String, String)>,
    /// What it did.
    pub counters: Counters,
    started: Instant,
    /// Plans the queries instead of the store (`with_planner`).
    planner: Option<Arc<dyn QueryPlanner>>,
}

impl Endpoint {
    /// An endpoint over `db`, running queries on `rt`.
    pub fn new(db: Arc<Db>, rt: Arc<Runtime>, config: Config) -> Arc<Self> {
        Arc::new(Endpoint {
            turns: Arc::new(Semaphore::new(config.max_running.max(1))),
            writes: Arc::new(Semaphore::new(1)),
            prefixes: prefixes::of(&db.current()),
            load: config.load.clone(),
            db,
            rt,
            config,
            counters: Counters::default(),
            started: Instant::now(),
            planner: None,
        })
    }

    /// An endpoint over `db` whose queries `planner` plans ([`QueryPlanner`]: a cluster's coordinator, which runs the query's fragments on the
    /// shards and plans the rest over their rows; the endpoint's store then serves the
    /// dictionary, and the Graph Store Protocol answers only for the default graph).
    pub fn with_planner(
        db: Arc<Db>,
        rt: Arc<Runtime>,
        config: Config,
        planner: Arc<dyn QueryPlanner>,
    ) -> Arc<Self> {
        let mut ep = Arc::into_inner(Self::new(db, rt, config)).expect("just made");
        ep.planner = Some(planner);
        Arc::new(ep)
    }

    /// Its configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Its store.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// A turn to run a query: at once, after waiting, or 503 when too many wait.
    async fn turn(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        self.wait_for(&self.turns).await
    }

    /// A turn to write (an update, a Graph Store write): one at a time, apart from the
    /// queries' turns; 503 when too many requests wait.
    async fn write_turn(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        self.wait_for(&self.writes).await
    }

    async fn wait_for(&self, turns: &Arc<Semaphore>) -> Result<OwnedSemaphorePermit, ApiError> {
        if let Ok(p) = turns.clone().try_acquire_owned() {
            return Ok(p);
        }
        let c = &self.counters;
        // The count goes down however the wait ends (a client that leaves drops this future).
        let before = c.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = InCount(&c.waiting);
        if before >= self.config.max_waiting {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "busy: {} queries are running and {} waiting; try again later",
                    self.config.max_running, self.config.max_waiting
                ),
            ));
        }
        turns
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the server is stopping"))
    }
}

/// The routes over `endpoint`.
pub fn router(endpoint: Arc<Endpoint>) -> Router {
    let limit = endpoint.config.max_request_bytes;
    Router::new()
        .route("/", any(home))
        .route("/query", any(query))
        .route("/sparql", any(query))
        .route("/sparql/", any(query))
        .route("/query/", any(query))
        .route("/store", any(graph_store))
        .route("/store/{*graph}", any(graph_store_direct))
        .route("/update", any(update))
        .route("/status", any(status))
        .route("/prefixes", any(prefixes_json))
        .route("/favicon.ico", any(|| async { StatusCode::NO_CONTENT }))
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "no such resource; the endpoint is /query (see / for the others)",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            endpoint.clone(),
            guard,
        ))
        .layer(axum::middleware::map_response_with_state(
            endpoint.clone(),
            count,
        ))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(endpoint)
}

/// Serves `router(endpoint)` on `listener` until `shutdown` completes; then every connection
/// finishes the request it is answering and closes.
///
/// One tokio task per connection, HTTP/1.1 through hyper with TCP_NODELAY (without it, an
/// answer written as headers then body waits out the client's delayed ACK, about 40 ms on
/// Linux) and [`Config::header_timeout`] (a client that stalls mid-request, or idles between
/// requests, is disconnected). A failed accept (out of file descriptors) is logged and retried
/// after a pause rather than ending the server.
pub async fn serve(
    listener: tokio::net::TcpListener,
    endpoint: Arc<Endpoint>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let header_timeout = endpoint.config.header_timeout;
    let mut table = conn::Table::new(endpoint.config.max_connections);
    let app = router(endpoint);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let tcp = tokio::select! {
            r = listener.accept() => match r {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        while connections.try_join_next().is_some() {}
        let Some(state) = table.admit() else {
            tracing::warn!("every open connection is being answered: a new one is refused");
            drop(tcp);
            continue;
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY");
        }
        let tagged = state.clone();
        let service =
            hyper_util::service::TowerToHyperService::new(tower::ServiceExt::map_request(
                app.clone(),
                move |mut req: axum::http::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(tagged.clone());
                    req
                },
            ));
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            // The first bytes come within the header timeout, as the rest of the headers must.
            match conn::opening(&tcp, header_timeout).await {
                conn::Opening::Http1 => {}
                conn::Opening::Http2 => {
                    conn::refuse_http2(tcp).await;
                    state.end();
                    return;
                }
                conn::Opening::Silent => {
                    state.end();
                    return;
                }
            }
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout);
            let conn = http.serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended");
                    }
                }
                () = state.closing() => {}
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            state.end();
        });
    }
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Binds `addr`, calls `ready` with the address bound (port 0 picks one), and serves until
/// Ctrl-C or SIGTERM, on a tokio runtime of [`Config::io_threads`] threads.
pub fn run(
    endpoint: Arc<Endpoint>,
    addr: SocketAddr,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    run_until(endpoint, addr, ready, stop_signal())
}

/// [`run`], serving until `stop` completes instead of a signal (a server started by a library
/// call, which its caller stops): the connections then end as in [`serve`].
pub fn run_until(
    endpoint: Arc<Endpoint>,
    addr: SocketAddr,
    ready: impl FnOnce(SocketAddr),
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(endpoint.config.io_threads.max(1))
        .max_blocking_threads(endpoint.config.max_running.max(1) + 8)
        .thread_name("nearflow-http")
        .enable_all()
        .build()?;
    io.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
        ready(listener.local_addr()?);
        serve(listener, endpoint, stop).await
    })
}

/// Ctrl-C or SIGTERM.
async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// Before every route: the `Host` check and CORS preflights ([`Access`]); after: the CORS
/// headers of the answer.
async fn guard(
    State(ep): State<Arc<Endpoint>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let access = &ep.config.access;
    let headers = req.headers().clone();
    if let Err(e) = access.check_host(&headers) {
        return finish(Err(e));
    }
    if req.method() == Method::OPTIONS {
        return match access.preflight(&headers) {
            Ok(h) => {
                let mut r = StatusCode::NO_CONTENT.into_response();
                r.headers_mut().extend(h);
                r
            }
            Err(e) => finish(Err(e)),
        };
    }
    let conn = req.extensions().get::<Arc<conn::Conn>>().cloned();
    let (parts, body) = req.into_parts();
    let cfg = &ep.config;
    let body = match conn::read_body(&headers, body, cfg.max_request_bytes, cfg.body_timeout).await
    {
        Ok(b) => b,
        Err(e) => return conn::refusal(e),
    };
    let busy = conn::Conn::answering(conn.as_ref());
    let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(body));
    let mut r = conn::BusyBody::wrap(next.run(req).await, busy);
    for (k, v) in access.cors_headers(&headers) {
        let k = k.expect("one value per header");
        if k == header::VARY {
            r.headers_mut().append(k, v);
        } else {
            r.headers_mut().insert(k, v);
        }
    }
    r
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The page: a query editor that knows the store's prefixes, a results table that pages, and
/// the runtime's live view (`page.html`, polling `/status`).
async fn home(method: Method) -> Response {
    match method {
        Method::OPTIONS => StatusCode::NO_CONTENT.into_response(),
        Method::GET | Method::HEAD => (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            include_str!("page.html"),
        )
            .into_response(),
        m => ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("the page takes GET, not {m}"),
        )
        .into_response(),
    }
}

async fn prefixes_json(State(ep): State<Arc<Endpoint>>) -> Response {
    let map: serde_json::Map<String, serde_json::Value> = ep
        .prefixes
        .iter()
        .map(|(p, ns)| (p.clone(), serde_json::Value::String(ns.clone())))
        .collect();
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::Value::Object(map).to_string(),
    )
        .into_response()
}

async fn query(
    State(ep): State<Arc<Endpoint>>,
    method: Method,
    uri: axum::http::Uri,
    RawQuery(url): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method == Method::OPTIONS {
        return StatusCode::NO_CONTENT.into_response();
    }
    let accept = header_str(&headers, header::ACCEPT).map(str::to_owned);
    let req = protocol::read(
        &method,
        url.as_deref(),
        header_str(&headers, header::CONTENT_TYPE),
        &body,
    );
    let r = match req {
        Ok(protocol::Request::Query(mut q)) => {
            q.base = header_str(&headers, header::HOST)
                .map(|h| format!("http://{h}{}", uri.path()))
                .filter(|b| oxrdf::NamedNode::new(b.as_str()).is_ok());
            respond::query(&ep, q, accept, method == Method::HEAD).await
        }
        Ok(protocol::Request::Describe) => {
            respond::description(&ep, accept.as_deref(), header_str(&headers, header::HOST))
        }
        // The W3C tests send updates to the query URL too.
        Ok(protocol::Request::Update(u)) => match ep.config.access.may_write(&headers) {
            Ok(()) => write::update(&ep, u, base_of(&headers, &uri)).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    finish(r)
}

/// Direct graph identification (Graph Store Protocol §4.1): `/store/PATH` names the graph
/// whose IRI is that URL, as `/store?graph=URL` does.
async fn graph_store_direct(
    State(ep): State<Arc<Endpoint>>,
    method: Method,
    uri: axum::http::Uri,
    RawQuery(url): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if url.is_some_and(|q| !q.is_empty()) {
        return finish(Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "a graph named by its URL (/store/…) takes no ?graph or ?default",
        )));
    }
    let Some(graph) = base_of(&headers, &uri) else {
        return finish(Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "a graph named by its URL needs the request's Host",
        )));
    };
    let query = format!("graph={}", protocol::encode(&graph));
    let store = "/store".parse().expect("a path");
    graph_store(
        State(ep),
        method,
        store,
        RawQuery(Some(query)),
        headers,
        body,
    )
    .await
}

async fn graph_store(
    State(ep): State<Arc<Endpoint>>,
    method: Method,
    uri: axum::http::Uri,
    RawQuery(url): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let accept = header_str(&headers, header::ACCEPT).map(str::to_owned);
    let r = match method {
        Method::OPTIONS => return StatusCode::NO_CONTENT.into_response(),
        Method::GET | Method::HEAD => {
            respond::graph(&ep, url.as_deref(), accept, method == Method::HEAD).await
        }
        Method::PUT | Method::POST | Method::DELETE => {
            if let Err(e) = ep.config.access.may_write(&headers) {
                return finish(Err(e));
            }
            write::graph_write(
                &ep,
                method,
                url.as_deref(),
                header_str(&headers, header::CONTENT_TYPE),
                body,
                base_of(&headers, &uri),
            )
            .await
        }
        m => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("the graph store takes GET, HEAD, PUT, POST and DELETE, not {m}"),
        )),
    };
    finish(r)
}

/// The endpoint's own URL, the base of a request's relative IRIs (when the request names a
/// host that makes one).
fn base_of(headers: &HeaderMap, uri: &axum::http::Uri) -> Option<String> {
    header_str(headers, header::HOST)
        .map(|h| format!("http://{h}{}", uri.path()))
        .filter(|b| oxrdf::NamedNode::new(b.as_str()).is_ok())
}

async fn update(
    State(ep): State<Arc<Endpoint>>,
    method: Method,
    uri: axum::http::Uri,
    RawQuery(url): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method == Method::OPTIONS {
        return StatusCode::NO_CONTENT.into_response();
    }
    if let Err(e) = ep.config.access.may_write(&headers) {
        return finish(Err(e));
    }
    let r = match write::read_update(
        &method,
        url.as_deref(),
        header_str(&headers, header::CONTENT_TYPE),
        &body,
    ) {
        Ok(req) => write::update(&ep, req, base_of(&headers, &uri)).await,
        Err(e) => Err(e),
    };
    finish(r)
}

async fn status(State(ep): State<Arc<Endpoint>>) -> Response {
    let c = &ep.counters;
    let body = serde_json::json!({
        "uptime_s": ep.started.elapsed().as_secs_f64(),
        "triples": ep.db.current().len(),
        "store": {
            "writable": ep.db.is_writable(),
            "durable": ep.db.is_durable(),
            "updates": ep.db.seq(),
            "delta": ep.db.current().delta().counts(),
            "merges": ep.db.stats().merges,
            "checkpoints": ep.db.stats().checkpoints,
            "segments": ep.db.stats().segments,
            "last_checkpoint_bytes": ep.db.stats().last_checkpoint_bytes,
            "failed_merges": ep.db.stats().failed,
            "last_failure": ep.db.last_failure(),
        },
        "running": c.running.load(Ordering::SeqCst),
        "waiting": c.waiting.load(Ordering::SeqCst),
        "answered": c.answered.load(Ordering::SeqCst),
        "failed": c.failed.load(Ordering::SeqCst),
        "cancelled": c.cancelled.load(Ordering::SeqCst),
        "max_running": ep.config.max_running,
        "max_waiting": ep.config.max_waiting,
        "timeout_s": ep.config.timeout.as_secs_f64(),
        "workers": ep.rt.machine().pu_count(),
        "machine": ep.rt.machine().label(),
        "machine_is_host": ep.rt.machine().source().is_host(),
        "host_cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "queued_tasks": ep.rt.queued(),
        "groups": groups(&ep.rt),
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Per core group of the runtime's machine: its node, PUs, the requests its workers are
/// running tasks of right now, tasks run so far, and homed tasks run at home and away (the
/// page turns these into tasks/s and the remote share).
fn groups(rt: &Runtime) -> Vec<serde_json::Value> {
    let m = rt.machine();
    let c = rt.counters();
    let homed = c.homed_by_group(m);
    let running = c.running_by_group(m);
    m.groups()
        .iter()
        .map(|g| {
            let executed: u64 = c
                .workers
                .iter()
                .filter(|w| m.group_of(w.worker) == g.index)
                .map(|w| w.executed)
                .sum();
            let (local, remote) = homed.get(g.index).copied().unwrap_or_default();
            serde_json::json!({
                "running_requests": running.get(g.index).copied().unwrap_or(0),
                "node": g.node,
                "pus": g.pus,
                "executed": executed,
                "home_local": local,
                "home_remote": remote,
            })
        })
        .collect()
}

/// Logs a refusal and makes its response (the counting is [`count`]'s).
fn finish(r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(|e| {
        tracing::info!(status = %e.status, message = %e.message, "refused");
        e.into_response()
    })
}

/// Counts every response but preflights and `/status` by its status: 2xx answered, the rest
/// failed (those refused before a handler ran too: 404, a `Host` or a body refused).
async fn count(
    State(ep): State<Arc<Endpoint>>,
    uri: axum::http::Uri,
    method: Method,
    r: Response,
) -> Response {
    if method != Method::OPTIONS && uri.path() != "/status" {
        let c = if r.status().is_success() {
            &ep.counters.answered
        } else {
            &ep.counters.failed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
    r
}
