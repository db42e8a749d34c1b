//! The endpoint end to end: protocol requests through the router (no socket), and over
//! loopback the cases that need a connection (a client that goes away, malformed bytes).

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use http_body_util::BodyExt;
use nearflow_rdf::load;
use nearflow_serve::{Config, Endpoint};
use tower::ServiceExt;

mod common;
use common::{enc, start};

const DATA: &str = r#"
@prefix ex: <http://ex/> .
ex:a ex:name "Alice" ; ex:age 30 ; ex:knows ex:b .
ex:b ex:name "Bob" ; ex:age 25 .
GRAPH ex:g1 { ex:c ex:name "Carol" . }
GRAPH ex:g2 { ex:d ex:name "Dan" . ex:e ex:name "Eve" . }
"#;

fn endpoint_with(extra: &str, config: impl FnOnce(&mut Config)) -> Arc<Endpoint> {
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let mut l = load::Loaded::default();
    let text = format!("{DATA}\n{extra}");
    load::load_reader(
        &mut l,
        "t.trig".as_ref(),
        load::Format::TriG,
        text.as_bytes(),
        "",
    )
    .unwrap();
    let store = Arc::new(l.into_store(&machine).unwrap());
    let rt = nearflow_rt::Runtime::builder(machine.clone())
        .build()
        .unwrap();
    let mut c = Config::for_pus(machine.pu_count());
    config(&mut c);
    Endpoint::new(
        Arc::new(nearflow_rdf::db::Db::in_memory((*store).clone())),
        Arc::new(rt),
        c,
    )
}

fn endpoint() -> Arc<Endpoint> {
    endpoint_with("", |_| {})
}

struct Reply {
    status: StatusCode,
    content_type: String,
    cors: bool,
    body: String,
}

async fn send(ep: &Arc<Endpoint>, req: Request<Body>) -> Reply {
    let r = nearflow_serve::router(ep.clone())
        .oneshot(req)
        .await
        .unwrap();
    let status = r.status();
    let content_type = r
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let cors = r
        .headers()
        .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
        .is_some_and(|v| v == "*");
    let body = r.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        content_type,
        cors,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

fn get(path_and_query: &str, accept: Option<&str>) -> Request<Body> {
    let mut b = Request::get(path_and_query);
    if let Some(a) = accept {
        b = b.header(header::ACCEPT, a);
    }
    b.body(Body::empty()).unwrap()
}

fn get_query(q: &str, extra: &str, accept: Option<&str>) -> Request<Body> {
    get(&format!("/query?query={}{extra}", enc(q)), accept)
}

/// The solutions of a JSON answer: each binding's values, in order of the head's variables.
fn solutions(body: &str) -> Vec<Vec<Option<String>>> {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    let vars: Vec<String> = v["head"]["vars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_owned())
        .collect();
    v["results"]["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            vars.iter()
                .map(|n| b.get(n).map(|t| t["value"].as_str().unwrap().to_owned()))
                .collect()
        })
        .collect()
}

const NAMES: &str = "SELECT ?n WHERE { ?s <http://ex/name> ?n } ORDER BY ?n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_three_ways_to_send_a_query_get_one_answer() {
    let ep = endpoint();
    let by_get = send(&ep, get_query(NAMES, "", None)).await;
    assert_eq!(by_get.status, StatusCode::OK, "{}", by_get.body);
    assert_eq!(by_get.content_type, "application/sparql-results+json");
    assert!(
        !by_get.cors,
        "no CORS unless the server is started with --cors"
    );
    assert_eq!(
        solutions(&by_get.body),
        vec![vec![Some("Alice".to_owned())], vec![Some("Bob".to_owned())]]
    );
    let form = Request::post("/query")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("query={}", enc(NAMES))))
        .unwrap();
    assert_eq!(send(&ep, form).await.body, by_get.body);
    let direct = Request::post("/sparql")
        .header(header::CONTENT_TYPE, "application/sparql-query")
        .body(Body::from(NAMES))
        .unwrap();
    assert_eq!(send(&ep, direct).await.body, by_get.body);
    assert_eq!(ep.counters.answered.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_picks_the_results_format() {
    let ep = endpoint();
    let csv = send(&ep, get_query(NAMES, "", Some("text/csv"))).await;
    assert_eq!(csv.content_type, "text/csv; charset=utf-8");
    assert_eq!(csv.body, "n\r\nAlice\r\nBob\r\n");
    let tsv = send(&ep, get_query(NAMES, "", Some("text/tab-separated-values"))).await;
    assert_eq!(tsv.body, "?n\n\"Alice\"\n\"Bob\"\n");
    let xml = send(
        &ep,
        get_query(NAMES, "", Some("application/sparql-results+xml")),
    )
    .await;
    assert_eq!(xml.content_type, "application/sparql-results+xml");
    assert!(
        xml.body.contains("<literal>Alice</literal>"),
        "{}",
        xml.body
    );
    let by_param = send(&ep, get_query(NAMES, "&format=csv", Some("image/png"))).await;
    assert_eq!(by_param.body, csv.body);
    let none = send(&ep, get_query(NAMES, "", Some("image/png"))).await;
    assert_eq!(none.status, StatusCode::NOT_ACCEPTABLE);
    assert!(
        none.body.contains("application/sparql-results+json"),
        "{}",
        none.body
    );
    let ask = send(&ep, get_query("ASK { ?s <http://ex/age> 30 }", "", None)).await;
    assert_eq!(ask.body.replace(' ', ""), r#"{"head":{},"boolean":true}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphs_come_in_every_rdf_syntax() {
    let ep = endpoint();
    let q =
        "CONSTRUCT { ?s <http://ex/n> ?n } WHERE { ?s <http://ex/name> ?n FILTER(?n = \"Bob\") }";
    let ttl = send(&ep, get_query(q, "", None)).await;
    assert_eq!(ttl.status, StatusCode::OK);
    assert_eq!(ttl.content_type, "text/turtle; charset=utf-8");
    assert!(
        ttl.body.contains("<http://ex/b> <http://ex/n> \"Bob\""),
        "{}",
        ttl.body
    );
    let nt = send(&ep, get_query(q, "", Some("application/n-triples"))).await;
    assert_eq!(nt.body, "<http://ex/b> <http://ex/n> \"Bob\" .\n");
    let nq = send(&ep, get_query(q, "", Some("application/n-quads"))).await;
    assert_eq!(nq.body, nt.body);
    let xml = send(&ep, get_query(q, "", Some("application/rdf+xml"))).await;
    assert_eq!(xml.content_type, "application/rdf+xml");
    assert!(
        xml.body.contains("rdf:about=\"http://ex/b\""),
        "{}",
        xml.body
    );
    let json = send(
        &ep,
        get_query(q, "", Some("application/sparql-results+json")),
    )
    .await;
    assert_eq!(json.status, StatusCode::NOT_ACCEPTABLE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_graph_parameters_override_the_querys_dataset() {
    let ep = endpoint();
    let q = "SELECT ?n FROM <http://ex/g1> WHERE { ?s <http://ex/name> ?n } ORDER BY ?n";
    let own = send(&ep, get_query(q, "", None)).await;
    assert_eq!(solutions(&own.body), vec![vec![Some("Carol".to_owned())]]);
    let over = send(
        &ep,
        get_query(
            q,
            &format!("&default-graph-uri={}", enc("http://ex/g2")),
            None,
        ),
    )
    .await;
    assert_eq!(
        solutions(&over.body),
        vec![vec![Some("Dan".to_owned())], vec![Some("Eve".to_owned())]]
    );
    let named = "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g";
    let only_g1 = send(
        &ep,
        get_query(
            named,
            &format!("&named-graph-uri={}", enc("http://ex/g1")),
            None,
        ),
    )
    .await;
    assert_eq!(
        solutions(&only_g1.body),
        vec![vec![Some("http://ex/g1".to_owned()), Some("1".to_owned())]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_4xx_with_a_message() {
    let ep = endpoint_with("", |c| c.max_request_bytes = 4096);
    let syntax = send(&ep, get_query("SELECT * WHERE {", "", None)).await;
    assert_eq!(syntax.status, StatusCode::BAD_REQUEST);
    assert_eq!(syntax.content_type, "text/plain; charset=utf-8");
    assert!(
        syntax.body.contains("SPARQL syntax error: at 1:"),
        "{}",
        syntax.body
    );
    let unsupported = send(
        &ep,
        get_query("SELECT * { SERVICE <http://x/> { ?s ?p ?o } }", "", None),
    )
    .await;
    assert_eq!(unsupported.status, StatusCode::BAD_REQUEST);
    let huge = Request::post("/query")
        .header(header::CONTENT_TYPE, "application/sparql-query")
        .body(Body::from(format!(
            "SELECT * {{ ?s ?p ?o }} #{}",
            "x".repeat(8192)
        )))
        .unwrap();
    assert_eq!(send(&ep, huge).await.status, StatusCode::PAYLOAD_TOO_LARGE);
    let media = Request::post("/query")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(
        send(&ep, media).await.status,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    let delete = Request::delete("/query").body(Body::empty()).unwrap();
    assert_eq!(
        send(&ep, delete).await.status,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(
        send(&ep, get("/nowhere", None)).await.status,
        StatusCode::NOT_FOUND
    );
    let update = Request::get("/update?update=CLEAR%20ALL")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        send(&ep, update).await.status,
        StatusCode::METHOD_NOT_ALLOWED
    );
    let deep = format!(
        "SELECT * {{ ?s ?p ?o {} }}",
        "OPTIONAL { ?s ?p ?o } ".repeat(600)
    );
    let r = send(&ep, get_query(&deep, "", None)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    // Every refusal counted, those before a handler ran (413, 404) too.
    assert_eq!(ep.counters.failed.load(Ordering::SeqCst), 8);
    assert_eq!(ep.counters.answered.load(Ordering::SeqCst), 0);
}

/// A cross product of the data with itself, five times over: about 10¹⁰ rows to count.
fn slow_query() -> &'static str {
    "SELECT (COUNT(*) AS ?n) { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l . ?m ?n2 ?o }"
}

fn filler() -> String {
    (0..100)
        .map(|i| format!("<http://ex/f{i}> <http://ex/v> {i} .\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_past_its_time_limit_is_stopped_with_503() {
    let ep = endpoint_with(&filler(), |c| c.timeout = Duration::from_secs(30));
    let started = Instant::now();
    let r = send(&ep, get_query(slow_query(), "&timeout=200ms", None)).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert!(r.body.contains("time limit of 200"), "{}", r.body);
    // The request's limit was the one applied, not the server's 30 s.
    assert!(started.elapsed() < Duration::from_secs(20));
    // The runtime is free again: the next query is answered.
    let next = send(&ep, get_query(NAMES, "", None)).await;
    assert_eq!(next.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_waiting_room_the_endpoint_says_busy() {
    let ep = endpoint_with(&filler(), |c| {
        c.max_running = 1;
        c.max_waiting = 0;
    });
    let slow = tokio::spawn({
        let ep = ep.clone();
        async move { send(&ep, get_query(slow_query(), "&timeout=3s", None)).await }
    });
    while ep.counters.running.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The live view sees the running query's tasks on the runtime's workers.
    let t = Instant::now();
    loop {
        let st: serde_json::Value =
            serde_json::from_str(&send(&ep, get("/status", None)).await.body).unwrap();
        let groups = st["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 2, "{st}");
        let running: u64 = groups
            .iter()
            .map(|g| g["running_requests"].as_u64().unwrap())
            .sum();
        if running > 0 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "no group runs the query's tasks: {st}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let turned_away = send(&ep, get_query(NAMES, "", None)).await;
    assert_eq!(turned_away.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(turned_away.body.starts_with("busy"), "{}", turned_away.body);
    assert_eq!(slow.await.unwrap().status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        send(&ep, get_query(NAMES, "", None)).await.status,
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_streams_whole() {
    let rows: String = (0..20_000)
        .map(|i| format!("<http://ex/r{i}> <http://ex/w> \"{i}\" .\n"))
        .collect();
    let ep = endpoint_with(&rows, |_| {});
    let r = send(
        &ep,
        get_query("SELECT ?s ?v { ?s <http://ex/w> ?v }", "", None),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body.len() > 1 << 20, "{} bytes", r.body.len());
    let sols = solutions(&r.body);
    assert_eq!(sols.len(), 20_000);
    let mut values: Vec<u32> = sols
        .iter()
        .map(|s| s[1].as_ref().unwrap().parse().unwrap())
        .collect();
    values.sort_unstable();
    assert!(values.iter().enumerate().all(|(i, &v)| v == i as u32));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_past_its_memory_limit_fails_with_503_and_the_next_runs() {
    let rows: String = (0..20_000)
        .map(|i| format!("<http://ex/r{i}> <http://ex/w> \"{i}\" .\n"))
        .collect();
    let ep = endpoint_with(&rows, |c| c.memory_limit = Some(64 << 10));
    let r = send(
        &ep,
        get_query("SELECT ?s ?v { ?s <http://ex/w> ?v } ORDER BY ?v", "", None),
    )
    .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert!(r.body.contains("memory limit"), "{}", r.body);
    assert_eq!(
        send(&ep, get_query(NAMES, "", None)).await.status,
        StatusCode::OK
    );
}

/// A DISTINCT past the memory limit answers with a spill folder (the default, or
/// `--spill-dir`); without one (`--no-spill`) it stops at the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spill_folder_lets_a_distinct_past_the_limit_answer() {
    let rows: String = (0..20_000)
        .map(|i| format!("<http://ex/r{i}> <http://ex/w> \"{}\" .\n", i % 5000))
        .collect();
    let q = "SELECT DISTINCT ?v ?t { ?s <http://ex/w> ?v . ?t <http://ex/w> \"7\" }";
    let dir = std::env::temp_dir();
    let ep = endpoint_with(&rows, |c| {
        c.memory_limit = Some(512 << 10);
        c.spill = Some(dir.clone());
    });
    let r = send(&ep, get_query(q, "", None)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(solutions(&r.body).len(), 5000 * 4);
    // The same query stops at the limit without the folder (`--no-spill`).
    let q = q.replace("SELECT", "SELECT (COUNT(*) AS ?n) { SELECT") + " }";
    let ep = endpoint_with(&rows, |c| {
        c.memory_limit = Some(512 << 10);
        c.spill = None;
    });
    let r = send(&ep, get_query(&q, "", None)).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert!(r.body.contains("memory limit"), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graph_store_reads_graphs_and_cors_preflights_pass() {
    let ep = endpoint();
    let g2 = send(
        &ep,
        get(
            &format!("/store?graph={}", enc("http://ex/g2")),
            Some("application/n-triples"),
        ),
    )
    .await;
    assert_eq!(g2.status, StatusCode::OK);
    let mut lines: Vec<&str> = g2.body.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        vec![
            "<http://ex/d> <http://ex/name> \"Dan\" .",
            "<http://ex/e> <http://ex/name> \"Eve\" ."
        ]
    );
    let default = send(&ep, get("/store?default", Some("application/n-triples"))).await;
    assert_eq!(default.body.lines().count(), 5);
    let missing = send(
        &ep,
        get(&format!("/store?graph={}", enc("http://ex/none")), None),
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        send(&ep, get("/store", None)).await.status,
        StatusCode::BAD_REQUEST
    );
    let put = Request::put("/store?default").body(Body::from("")).unwrap();
    assert_eq!(
        send(&ep, put).await.status,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "a graph without its syntax"
    );
    let pre = || {
        Request::options("/query")
            .header(header::ORIGIN, "http://elsewhere")
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .body(Body::empty())
            .unwrap()
    };
    let r = nearflow_serve::router(ep.clone())
        .oneshot(pre())
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::FORBIDDEN,
        "no origin is let in by default"
    );
    let ep = endpoint_with("", |c| c.access.cors = vec!["*".into()]);
    let r = nearflow_serve::router(ep.clone())
        .oneshot(pre())
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(r.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
    assert!(r.headers()[header::ACCESS_CONTROL_ALLOW_METHODS]
        .to_str()
        .unwrap()
        .contains("POST"));
    let sd = send(&ep, get("/query", Some("text/turtle"))).await;
    assert_eq!(sd.status, StatusCode::OK);
    assert!(
        sd.body.contains("sparql-service-description#SPARQL11Query"),
        "{}",
        sd.body
    );
}

/// Sends `bytes` and reads until the server closes. Requests that may be cut short are sent
/// with the write side closed after them (the server then sees the end of the request); a
/// whole request is not, as hyper treats a half-closed connection as a client that left.
fn raw(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = s.write_all(bytes);
    if !bytes.windows(17).any(|w| w == b"Connection: close") {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn status_line(reply: &str) -> &str {
    reply.lines().next().unwrap_or("")
}

#[test]
fn a_client_that_goes_away_has_its_query_cancelled() {
    let ep = endpoint_with(&filler(), |c| c.timeout = Duration::from_secs(120));
    let (addr, _io) = start(ep.clone());
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /query?query={} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        enc(slow_query())
    )
    .unwrap();
    let t = Instant::now();
    while ep.counters.running.load(Ordering::SeqCst) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the query never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(s);
    let t = Instant::now();
    while ep.counters.running.load(Ordering::SeqCst) != 0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the query of a client that left is still running"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(ep.counters.cancelled.load(Ordering::SeqCst), 1);
    let r = raw(
        addr,
        b"GET /status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(status_line(&r).contains("200"), "{r}");
}

#[test]
fn a_client_that_stalls_mid_request_is_disconnected() {
    let ep = endpoint_with("", |c| c.header_timeout = Duration::from_millis(300));
    let (addr, _io) = start(ep.clone());
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /query?query=ASK%7B%7D HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        .unwrap();
    let t = Instant::now();
    let mut out = Vec::new();
    // The server closes the connection (with a 408 or without a word); the read ends.
    let _ = s.read_to_end(&mut out);
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "the stalled connection was kept"
    );
    let reply = String::from_utf8_lossy(&out);
    assert!(
        reply.is_empty() || reply.starts_with("HTTP/1.1 408"),
        "{reply}"
    );
    // A client that sends its request in time is served as before.
    let r = raw(
        addr,
        b"GET /status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(status_line(&r).contains("200"), "{r}");
}

#[test]
fn malformed_requests_never_bring_the_server_down() {
    let ep = endpoint_with("", |c| c.max_request_bytes = 64 << 10);
    let (addr, _io) = start(ep.clone());
    let long_header = format!(
        "GET /query HTTP/1.1\r\nHost: localhost\r\nX-A: {}\r\n\r\n",
        "a".repeat(1 << 20)
    );
    let huge_body = format!(
        "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sparql-query\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        1 << 20,
        "x".repeat(1 << 20)
    );
    let cases: Vec<Vec<u8>> = vec![
        b"\x00\xff\xfe garbage\r\n\r\n".to_vec(),
        b"GET\r\n\r\n".to_vec(),
        b"GET /query?query=%ZZ%FF HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_vec(),
        b"GET /query?query=%C3%28 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_vec(),
        b"POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sparql-query\r\nContent-Length: 5\r\nConnection: close\r\n\r\n\xff\xfe\xfd\xfc\xfb".to_vec(),
        b"POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n".to_vec(),
        b"POST /query HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Type: application/sparql-query\r\nConnection: close\r\n\r\nzz\r\n".to_vec(),
        b"POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sparql-query\r\nContent-Length: 100\r\n\r\nSELECT".to_vec(),
        b"GET /query?query=SELECT%20*%20%7B HTTP/1.1\r\nHost: localhost\r\nAccept: ;;;,,,q=abc\r\nConnection: close\r\n\r\n".to_vec(),
        long_header.into_bytes(),
        huge_body.into_bytes(),
    ];
    for (i, c) in cases.iter().enumerate() {
        let r = raw(addr, c);
        let line = status_line(&r);

        assert!(
            line.is_empty() || line.contains(" 4"),
            "case {i}: {line:?} (a malformed request is refused with 4xx or the connection closed)"
        );
    }
    // Slow clients: fifty connections that send half a request and stall hold no query
    // turn and no I/O thread.
    let stalled: Vec<std::net::TcpStream> = (0..50)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(b"POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Le")
                .unwrap();
            s
        })
        .collect();
    let r = raw(
        addr,
        format!(
            "GET /query?query={} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
            enc(NAMES)
        )
        .as_bytes(),
    );
    assert!(status_line(&r).contains("200"), "{r}");
    assert!(r.contains("Alice"));
    drop(stalled);
    assert_eq!(ep.counters.running.load(Ordering::SeqCst), 0);
}
