//! Running a query for a request and writing its answer into the response.
//!
//! The handler takes a turn ([`Endpoint::turn`]) and hands the request to a thread of tokio's
//! blocking pool, which parses and plans it, starts it as a request of the nearflow runtime
//! and writes the answer through an [`Out`]: the first 64 KiB are held back, so an answer that
//! fits is sent once the query has ended and its status says how it ended; past that the
//! answer streams in 64 KiB chunks through a channel of four, so a slow client holds back the
//! query instead of filling memory. The turn is held until the query has ended, however it
//! ends.
//!
//! A client that goes away drops the handler's future (before the answer starts) or the
//! response body (after): either drops a [`Gone`] guard, which raises the flag the running
//! query polls ([`Running::cancel_on`]); a write into a closed body fails the same way.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::Response;
use nearflow_rdf::term::{Term, TermRef};
use nearflow_sparql::results;
use nearflow_sparql::{AnswerError, Form, Options, Plan, Query, QueryError, QueryResults};
use tokio::sync::{mpsc, oneshot};

use crate::negotiate::{self, Chosen, Kind};
use crate::protocol::QueryRequest;
use crate::{ApiError, Endpoint, InCount};

/// Bytes held back before an answer starts to stream, and the size of each chunk after.
const CHUNK: usize = 64 << 10;

/// Raises its flag when dropped: the client's side of a query went away (or the answer was
/// sent).
pub(crate) struct Gone(pub(crate) Arc<AtomicBool>);

impl Drop for Gone {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What the query's thread tells the handler before the body: the format, or the error.
type Head = Result<Chosen, ApiError>;

/// Runs `req` and answers it (only the headers when `head_only`).
pub(crate) async fn query(
    ep: &Arc<Endpoint>,
    req: QueryRequest,
    accept: Option<String>,
    head_only: bool,
) -> Result<Response, ApiError> {
    let turn = ep.turn().await?;
    let (head_tx, head_rx) = oneshot::channel::<Head>();
    let (body_tx, body_rx) = mpsc::channel::<io::Result<Bytes>>(4);
    let flag = Arc::new(AtomicBool::new(false));
    let gone = Gone(flag.clone());
    let ep2 = ep.clone();
    tokio::task::spawn_blocking(move || {
        let c = &ep2.counters;
        // The count and the turn are given back however this thread ends, a panic included
        // (the handler then answers 500: the head's sender is dropped).
        let running = InCount::enter(&c.running);
        let mut out = Out {
            head: Some(head_tx),
            chosen: None,
            buf: Vec::new(),
            tx: body_tx,
            deadline: None,
            io: tokio::runtime::Handle::current(),
        };
        let r = run(&ep2, req, accept.as_deref(), flag, &mut out);
        if !head_only && matches!(r, Err(ref e) if e.cancelled) {
            c.cancelled.fetch_add(1, Ordering::Relaxed);
        }
        // The query has ended: its turn is free before the client hears of it, so that a
        // client's next query never finds its own last one still holding a turn.
        drop(running);
        drop(turn);
        out.end(r);
    });
    let chosen = match head_rx.await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the query's thread stopped without an answer",
            ))
        }
    };
    let mut length = None;
    let body = if head_only {
        // The answer is made and counted, not sent: HEAD says the length GET would send.
        let mut rx = body_rx;
        let mut n = 0;
        while let Some(chunk) = rx.recv().await {
            n += chunk
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
                .len();
        }
        drop(gone);
        length = Some(n);
        Body::empty()
    } else {
        Body::from_stream(futures_util::stream::unfold(
            (body_rx, gone),
            |(mut rx, gone)| async move { rx.recv().await.map(|chunk| (chunk, (rx, gone))) },
        ))
    };
    let mut r = Response::builder()
        .header(header::CONTENT_TYPE, chosen.content_type())
        .header(header::VARY, "Accept");
    if let Some(n) = length {
        r = r.header(header::CONTENT_LENGTH, n);
    }
    r.body(body)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// Parses, plans and runs the query on the runtime, writing its answer into `out`.
fn run(
    ep: &Endpoint,
    req: QueryRequest,
    accept: Option<&str>,
    stop: Arc<AtomicBool>,
    out: &mut Out,
) -> Result<(), ApiError> {
    let cfg = &ep.config;
    let timeout = req.timeout.map_or(cfg.timeout, |t| t.min(cfg.timeout));
    // The time limit holds for the wait for a client that reads slowly too: past it the
    // answer's next chunk is not waited for, and the query stops.
    out.deadline = Some(std::time::Instant::now() + timeout);
    let options = Options {
        timeout: Some(timeout),
        memory_limit: cfg.memory_limit,
        spill: cfg.spill.clone(),
        spill_limit: cfg.spill_limit(),
        base: req.base.clone(),
        ..Options::standard()
    };
    let mut q = Query::parse(&req.text, &options)?;
    q.use_dataset(req.default_graphs, req.named_graphs);
    let kind = match q.form {
        Form::Select(_) | Form::Ask => Kind::Results,
        Form::Construct(_) | Form::Describe(_) => Kind::Graph,
    };
    let chosen = negotiate::choose(kind, accept, req.format.as_deref())?;
    out.chosen = Some(chosen);
    let prepared = match &ep.planner {
        Some(p) => p.plan(Arc::new(q), &options)?,
        None => Arc::new(q).plan(&ep.db.current(), &options),
    };
    match (prepared.execute(&ep.rt, Some(stop))?, chosen) {
        (QueryResults::Solutions(s), Chosen::Results(f)) => {
            s.write(out, f).map_err(|e| match e {
                AnswerError::Query(q) => ApiError::from(q),
                AnswerError::Write(w) => written(w),
            })?;
        }
        (QueryResults::Boolean(a), Chosen::Results(f)) => {
            results::write_boolean(out, f, a.value).map_err(written)?;
        }
        (QueryResults::Graph(a), Chosen::Graph(f)) => {
            results::write_graph_as(out, &a.value, f).map_err(written)?;
        }
        _ => unreachable!("the format was chosen for the form"),
    }
    Ok(())
}

/// A write into the response failed: the answer cannot be given in the format asked (a term
/// XML cannot hold: 406), or the client went away.
fn written(e: io::Error) -> ApiError {
    if e.kind() == io::ErrorKind::InvalidData {
        return ApiError::new(StatusCode::NOT_ACCEPTABLE, e.to_string());
    }
    if e.kind() == io::ErrorKind::TimedOut {
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
    }
    tracing::debug!(error = %e, "the answer could not be written");
    ApiError::from(QueryError::Cancelled)
}

/// The answer as it is written: held back up to [`CHUNK`], then streamed.
struct Out {
    head: Option<oneshot::Sender<Head>>,
    chosen: Option<Chosen>,
    buf: Vec<u8>,
    tx: mpsc::Sender<io::Result<Bytes>>,
    /// The query's time limit: a chunk the client has not made room for by then is not sent.
    deadline: Option<std::time::Instant>,
    /// The I/O runtime, whose timer bounds the wait for the client.
    io: tokio::runtime::Handle,
}

impl Out {
    /// Sends what is held: the head first if it has not gone yet.
    fn send(&mut self) -> io::Result<()> {
        let closed = || io::Error::new(io::ErrorKind::BrokenPipe, "the client went away");
        if let Some(h) = self.head.take() {
            let chosen = self
                .chosen
                .expect("a format is chosen before anything is written");
            h.send(Ok(chosen)).map_err(|_| closed())?;
        }
        if !self.buf.is_empty() {
            let chunk = Bytes::from(std::mem::take(&mut self.buf));
            let Some(deadline) = self.deadline else {
                return self.tx.blocking_send(Ok(chunk)).map_err(|_| closed());
            };
            let deadline = tokio::time::Instant::from_std(deadline);
            match self
                .io
                .block_on(tokio::time::timeout_at(deadline, self.tx.send(Ok(chunk))))
            {
                Ok(sent) => sent.map_err(|_| closed())?,
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client did not read the answer within the query's time limit",
                    ))
                }
            }
        }
        Ok(())
    }

    /// Ends the answer: what is held goes out, or the error does — as the status when nothing
    /// was sent yet, else as a failed body (the transfer breaks).
    fn end(mut self, r: Result<(), ApiError>) {
        match r {
            Ok(()) => {
                let _ = self.send();
            }
            Err(e) => match self.head.take() {
                Some(h) => {
                    let _ = h.send(Err(e));
                }
                None => {
                    let _ = self
                        .tx
                        .blocking_send(Err(io::Error::other(e.message.clone())));
                }
            },
        }
    }
}

impl Write for Out {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        // Serialisers flush at their end; what is held is sent by `end` or the next chunk.
        Ok(())
    }
}

/// The service description (SPARQL 1.1 Service Description) of the endpoint at `host`.
pub(crate) fn description(
    ep: &Endpoint,
    accept: Option<&str>,
    host: Option<&str>,
) -> Result<Response, ApiError> {
    let Chosen::Graph(f) = negotiate::choose(Kind::Graph, accept, None)? else {
        unreachable!("a graph format for a graph")
    };
    const SD: &str = "http://www.w3.org/ns/sparql-service-description#";
    const FORMATS: &str = "http://www.w3.org/ns/formats/";
    let iri = |s: String| Term::Iri(s);
    let sd = |l: &str| iri(format!("{SD}{l}"));
    let service = Term::Blank("service".into());
    let dataset = Term::Blank("dataset".into());
    let graph = Term::Blank("default".into());
    let a = iri("http://www.w3.org/1999/02/22-rdf-syntax-ns#type".into());
    let mut t = vec![
        [service.clone(), a.clone(), sd("Service")],
        [
            service.clone(),
            sd("supportedLanguage"),
            sd("SPARQL11Query"),
        ],
        [service.clone(), sd("defaultDataset"), dataset.clone()],
        [dataset.clone(), a.clone(), sd("Dataset")],
        [dataset.clone(), sd("defaultGraph"), graph.clone()],
        [graph.clone(), a, sd("Graph")],
        [
            graph,
            iri("http://rdfs.org/ns/void#triples".into()),
            Term::from(TermRef::Literal {
                value: &ep
                    .db
                    .current()
                    .graph_len(nearflow_rdf::store::DEFAULT_GRAPH)
                    .to_string(),
                datatype: "http://www.w3.org/2001/XMLSchema#integer",
                lang: None,
            }),
        ],
    ];
    if let Some(h) = host.filter(|h| oxrdf::NamedNode::new(format!("http://{h}/query")).is_ok()) {
        t.push([
            service.clone(),
            sd("endpoint"),
            iri(format!("http://{h}/query")),
        ]);
    }
    for f in [
        "SPARQL_Results_JSON",
        "SPARQL_Results_XML",
        "SPARQL_Results_CSV",
        "SPARQL_Results_TSV",
        "Turtle",
        "N-Triples",
        "N-Quads",
        "RDF_XML",
    ] {
        t.push([
            service.clone(),
            sd("resultFormat"),
            iri(format!("{FORMATS}{f}")),
        ]);
    }
    let mut body = Vec::new();
    results::write_graph_as(&mut body, &t, f)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Response::builder()
        .header(header::CONTENT_TYPE, Chosen::Graph(f).content_type())
        .body(Body::from(body))
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// The Graph Store Protocol's read (§5.2): the default graph (`?default`) or a named graph
/// (`?graph=IRI`) in the negotiated syntax; 404 for a graph the store does not have.
pub(crate) async fn graph(
    ep: &Arc<Endpoint>,
    url: Option<&str>,
    accept: Option<String>,
    head_only: bool,
) -> Result<Response, ApiError> {
    let params = crate::protocol::pairs(url.unwrap_or("").as_bytes())?;
    let text =
        match crate::protocol::graph_param(url)? {
            Some(None) => "CONSTRUCT WHERE { ?s ?p ?o }".to_owned(),
            Some(Some(_)) if ep.planner.is_some() => return Err(ApiError::new(
                StatusCode::NOT_IMPLEMENTED,
                "a named graph of a sharded store is not served (GRAPH is not run on a cluster); \
                 ?default is",
            )),
            Some(Some(g)) => {
                let store = ep.db.current();
                let id = store.id_of(TermRef::Iri(&g));
                if !id.is_some_and(|id| store.named_graphs().any(|n| n == id)) {
                    return Err(ApiError::new(
                        StatusCode::NOT_FOUND,
                        format!("the store has no graph named <{g}>"),
                    ));
                }
                format!("CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{g}> {{ ?s ?p ?o }} }}")
            }
            _ => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "name one graph: ?default, or ?graph=IRI",
                ))
            }
        };
    let format = params
        .iter()
        .find(|(k, _)| k == "format")
        .map(|(_, v)| v.clone());
    let req = QueryRequest {
        text,
        format,
        ..QueryRequest::default()
    };
    query(ep, req, accept, head_only).await
}
