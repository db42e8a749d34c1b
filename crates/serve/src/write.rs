//! Writes: SPARQL 1.1 Update over the Protocol (§2.2: a POSTed form with `update`, or the
//! request itself as `application/sparql-update`; `using-graph-uri` and
//! `using-named-graph-uri`), and the Graph Store Protocol's PUT, POST and DELETE (§5.3–5.5).
//!
//! Writes take turns of their own, one at a time (the store has one writer; an update does not
//! queue behind queries, and its WHERE clauses add at most one query to the runtime's load);
//! each is parsed and run on a blocking thread, and is answered only once the store has logged it
//! (`nearflow_rdf::db`): `204 No Content` (`201 Created` for a graph a Graph Store write
//! created). Writes run one at a time; queries keep reading the version they started on.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, StatusCode};
use axum::response::Response;
use nearflow_rdf::db::UpdateError;
use nearflow_rdf::load::{self, Format, Loaded};
use nearflow_rdf::store::DEFAULT_GRAPH;
use nearflow_rdf::term::TermRef;
use nearflow_sparql::update::{add_loaded, Update, UpdateOptions};
use nearflow_sparql::{Options, QueryError};

use crate::protocol::{graph_param, media, pairs};
use crate::{ApiError, Endpoint};

/// An update request as the Protocol sends it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UpdateRequest {
    /// The update text.
    pub text: String,
    /// `using-graph-uri`.
    pub using: Vec<String>,
    /// `using-named-graph-uri`.
    pub using_named: Vec<String>,
}

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, m)
}

fn utf8(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|e| {
        bad(format!(
            "the update is not UTF-8 (at byte {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

fn iri(v: String) -> Result<String, ApiError> {
    oxrdf::NamedNode::new(v.as_str())
        .map_err(|e| bad(format!("{v:?} is not an absolute IRI: {e}")))?;
    Ok(v)
}

/// An update request's body, as read once: a decoded form, or the update itself.
pub enum UpdateBody<'a> {
    /// A POSTed `application/x-www-form-urlencoded` form, its pairs decoded.
    Form(Vec<(String, String)>),
    /// A POSTed `application/sparql-update`: the update's bytes.
    Text(&'a [u8]),
}

/// Reads an update request (§2.2.1–2.2.2).
pub fn read_update(
    method: &Method,
    url_query: Option<&str>,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<UpdateRequest, ApiError> {
    if *method != Method::POST {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("an update is POSTed (SPARQL 1.1 Protocol §2.2), not sent by {method}"),
        ));
    }
    let url = pairs(url_query.unwrap_or("").as_bytes())?;
    match media(content_type).as_str() {
        "application/x-www-form-urlencoded" => update_request(url, UpdateBody::Form(pairs(body)?)),
        "application/sparql-update" => update_request(url, UpdateBody::Text(body)),
        other => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "an update is POSTed as application/sparql-update or as an \
                 application/x-www-form-urlencoded form with an update parameter{}",
                match other {
                    "" => String::new(),
                    o => format!(", not as {o}"),
                }
            ),
        )),
    }
}

/// The update request of a POST whose URL's parameters are `url` and whose body is `body`.
pub fn update_request(
    url: Vec<(String, String)>,
    body: UpdateBody<'_>,
) -> Result<UpdateRequest, ApiError> {
    let mut req = UpdateRequest::default();
    let mut text = None;
    let mut take =
        |k: &str, v: String, form: bool| -> Result<(), ApiError> {
            match k {
                "update" if form && text.is_some() => {
                    return Err(bad("the request gives the update parameter more than once"))
                }
                "update" if form => text = Some(v),
                "update" => return Err(bad(
                    "an update POSTed as application/sparql-update is the body; the URL may not \
                     name another",
                )),
                "using-graph-uri" => req.using.push(iri(v)?),
                "using-named-graph-uri" => req.using_named.push(iri(v)?),
                "query" => return Err(bad("this is the update endpoint; queries go to /query")),
                _ => {}
            }
            Ok(())
        };
    for (k, v) in url {
        take(&k, v, false)?;
    }
    match body {
        UpdateBody::Form(form) => {
            for (k, v) in form {
                take(&k, v, true)?;
            }
        }
        UpdateBody::Text(body) => text = Some(utf8(body)?),
    }
    req.text = text.ok_or_else(|| bad("the request has no update parameter"))?;
    if req.text.trim().is_empty() {
        return Err(bad("the update is empty"));
    }
    Ok(req)
}

/// The status of a failed update.
fn refused(e: QueryError) -> ApiError {
    let status = match &e {
        QueryError::Syntax(_) | QueryError::Invalid(_) | QueryError::Unsupported(_) => {
            StatusCode::BAD_REQUEST
        }
        QueryError::Timeout(_) | QueryError::MemoryLimit { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, e.to_string())
}

/// The refusal of a write to a read-only endpoint.
fn read_only(ep: &Endpoint) -> ApiError {
    if ep.planner.is_some() {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "this endpoint answers over a cluster, whose shards are read-only: a cluster takes \
             no update",
        );
    }
    stored(UpdateError::Store(nearflow_rdf::db::DbError::ReadOnly))
}

fn stored(e: UpdateError<ApiError>) -> ApiError {
    match e {
        UpdateError::Update(e) => e,
        UpdateError::Store(nearflow_rdf::db::DbError::ReadOnly) => ApiError::new(
            StatusCode::FORBIDDEN,
            "this endpoint is read-only (it serves RDF files, or was started with --read-only); \
             serve a store saved with `nearflow load --save` to update it",
        ),
        UpdateError::Store(e) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the update was not made: {e}"),
        ),
    }
}

fn done(status: StatusCode) -> Result<Response, ApiError> {
    Response::builder()
        .status(status)
        .body(Body::empty())
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// Runs an update request: 204 once it is logged.
pub(crate) async fn update(
    ep: &Arc<Endpoint>,
    req: UpdateRequest,
    base: Option<String>,
) -> Result<Response, ApiError> {
    if !ep.db.is_writable() {
        return Err(read_only(ep));
    }
    let _turn = ep.write_turn().await?;
    let ep2 = ep.clone();
    // A client that goes away while the update runs drops this future, and with it `gone`:
    // the update stops, changing nothing (once it is logged it stands, answered or not).
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gone = crate::respond::Gone(flag.clone());
    let run = move || -> Result<(), ApiError> {
        let mut update = Update::parse(&req.text, base.as_deref()).map_err(refused)?;
        update
            .with_dataset(&req.using, &req.using_named)
            .map_err(refused)?;
        let options = UpdateOptions {
            query: Options {
                timeout: Some(ep2.config.timeout),
                memory_limit: ep2.config.memory_limit,
                spill: ep2.config.spill.clone(),
                spill_limit: ep2.config.spill_limit(),
                ..Options::standard()
            },
            load: ep2.load.clone(),
            cancel: Some(flag),
        };
        ep2.db
            .update(|s| {
                let a = update.apply(s, &ep2.rt, &options).map_err(refused)?;
                Ok((a.store, a.changes))
            })
            .map_err(stored)?;
        Ok(())
    };
    tokio::task::spawn_blocking(run)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    drop(gone);
    done(StatusCode::NO_CONTENT)
}

/// A new graph's IRI under the store's URL (`base`, e.g. `http://host/store`), one the store
/// does not hold.
fn new_graph(ep: &Endpoint, base: Option<&str>) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let base = base
        .unwrap_or("http://localhost/store")
        .trim_end_matches('/');
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let g = format!("{base}/g{stamp:x}-{n}");
        let held = ep
            .db
            .current()
            .id_of(TermRef::Iri(&g))
            .is_some_and(|id| ep.db.current().graph_len(id) > 0);
        if !held {
            return g;
        }
    }
}

/// The RDF syntax of a Graph Store write's body, from its Content-Type.
fn syntax(content_type: Option<&str>) -> Result<Format, ApiError> {
    let media = media(content_type);
    Ok(match media.as_str() {
        "text/turtle" | "application/x-turtle" => Format::Turtle,
        "application/n-triples" | "text/plain" => Format::NTriples,
        "application/rdf+xml" | "application/xml" => Format::RdfXml,
        _ => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "a graph is sent as text/turtle, application/n-triples or \
                     application/rdf+xml{}",
                    if media.is_empty() {
                        String::new()
                    } else {
                        format!(", not as {media}")
                    }
                ),
            ))
        }
    })
}

/// The boundary of a multipart/form-data body, when it is one.
fn multipart_boundary(content_type: Option<&str>) -> Option<String> {
    let ct = content_type?;
    (media(Some(ct)) == "multipart/form-data")
        .then(|| multer::parse_boundary(ct).ok())
        .flatten()
}

/// The parts of a multipart/form-data body, each with the RDF syntax its Content-Type names.
async fn parts(
    body: axum::body::Bytes,
    boundary: String,
) -> Result<Vec<(Format, axum::body::Bytes)>, ApiError> {
    let stream = futures_util::stream::once(async move { Ok::<_, std::convert::Infallible>(body) });
    let mut m = multer::Multipart::new(stream, boundary);
    let mut out = Vec::new();
    while let Some(field) = m
        .next_field()
        .await
        .map_err(|e| bad(format!("the multipart body cannot be read: {e}")))?
    {
        let ct = field.content_type().map(|m| m.essence_str().to_owned());
        let format = syntax(ct.as_deref())?;
        let bytes = field
            .bytes()
            .await
            .map_err(|e| bad(format!("the multipart body cannot be read: {e}")))?;
        out.push((format, bytes));
    }
    Ok(out)
}

/// The Graph Store Protocol's writes: PUT replaces a graph with the body, POST adds the body
/// (or each part of a multipart/form-data body) to it, DELETE removes it (404 when the store
/// has no such graph). A POST that names no graph creates one under the store's URL and
/// answers 201 with its IRI in `Location` (§5.5).
pub(crate) async fn graph_write(
    ep: &Arc<Endpoint>,
    method: Method,
    url: Option<&str>,
    content_type: Option<&str>,
    body: axum::body::Bytes,
    base: Option<String>,
) -> Result<Response, ApiError> {
    if !ep.db.is_writable() {
        return Err(read_only(ep));
    }
    let (graph, created_iri) = match graph_param(url)? {
        Some(g) => (g, None),
        None if method == Method::POST => {
            let g = new_graph(ep, base.as_deref());
            (Some(g.clone()), Some(g))
        }
        None => return Err(bad("name one graph: ?default, or ?graph=IRI")),
    };
    let replace = method == Method::PUT;
    let delete = method == Method::DELETE;
    let parsed = if delete {
        None
    } else {
        let base = base.unwrap_or_else(|| "http://localhost/store".into());
        let mut loaded = Loaded::default();
        // A POST may carry several documents as multipart/form-data (§5.5), each part in
        // the syntax its own Content-Type names.
        let parts = match multipart_boundary(content_type) {
            Some(b) if method == Method::POST => parts(body, b).await?,
            _ => vec![(syntax(content_type)?, body)],
        };
        for (i, (format, bytes)) in parts.iter().enumerate() {
            let prefix = format!("b{i}_");
            let r = match &graph {
                None => load::load_reader_with_base(
                    &mut loaded,
                    "body".as_ref(),
                    *format,
                    &bytes[..],
                    &prefix,
                    &base,
                ),
                Some(g) => load::load_reader_into_graph(
                    &mut loaded,
                    "body".as_ref(),
                    *format,
                    &bytes[..],
                    &prefix,
                    &base,
                    g,
                ),
            };
            r.map_err(|e| bad(format!("the graph in the request cannot be read: {e}")))?;
        }
        Some(loaded)
    };
    let _turn = ep.write_turn().await?;
    let ep2 = ep.clone();
    let run = move || -> Result<StatusCode, ApiError> {
        let mut created = false;
        ep2.db
            .update(|s| {
                let mut e = s.edit();
                let g = match &graph {
                    None => Some(DEFAULT_GRAPH),
                    Some(g) => s.id_of(TermRef::Iri(g)),
                };
                let existed = g.is_some_and(|g| g == DEFAULT_GRAPH || s.graph_len(g) > 0);
                if delete && !existed {
                    return Err(ApiError::new(
                        StatusCode::NOT_FOUND,
                        format!(
                            "the store has no graph named <{}>",
                            graph.clone().unwrap_or_default()
                        ),
                    ));
                }
                if replace || delete {
                    if let Some(g) = g {
                        s.for_each_match(g, [None; 3], |t| e.remove([t[0], t[1], t[2], g]));
                    }
                }
                if let Some(loaded) = &parsed {
                    add_loaded(&mut e, loaded)
                        .map_err(|m| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, m))?;
                }
                created = !existed && parsed.as_ref().is_some_and(|l| !l.quads.is_empty());
                let changes = e.changes();
                Ok((e.finish(), changes))
            })
            .map_err(stored)?;
        Ok(if created {
            StatusCode::CREATED
        } else {
            StatusCode::NO_CONTENT
        })
    };
    let status = tokio::task::spawn_blocking(run)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    let mut r = done(status)?;
    if let Some(g) = created_iri.filter(|_| status == StatusCode::CREATED) {
        if let Ok(v) = axum::http::HeaderValue::from_str(&g) {
            r.headers_mut().insert(header::LOCATION, v);
        }
    }
    Ok(r)
}
