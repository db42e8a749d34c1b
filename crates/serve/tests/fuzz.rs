//! Property-based fuzzing of what the endpoint reads from a client: the request (method, URL
//! query, content type, body), the `Accept` header with the `format` parameter, and queries and
//! updates sent over HTTP (random shapes, with long chains of operators and deep nesting).
//! Arbitrary bytes give a request or a 4xx, never a panic; a result is always a format the
//! answer can be given in; a query or update over HTTP is answered, refused with 4xx or stopped
//! at a limit with 503, never a 500 or a crash of the server. `NEARFLOW_FUZZ_CASES` sets the
//! number of cases.

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{header, Method, Request as HttpRequest, StatusCode};
use nearflow_serve::negotiate::{choose, Chosen, Kind};
use nearflow_serve::protocol::{read, Request};
use proptest::prelude::*;
use tower::ServiceExt;

mod common;

fn cases() -> u32 {
    std::env::var("NEARFLOW_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

/// Bytes that look like URL-encoded forms: names the protocol knows, `=`, `&`, `%`, `+` and
/// anything else.
fn formish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"query=".to_vec()),
        Just(b"default-graph-uri=".to_vec()),
        Just(b"named-graph-uri=".to_vec()),
        Just(b"timeout=".to_vec()),
        Just(b"update=".to_vec()),
        Just(b"format=".to_vec()),
        Just(b"&".to_vec()),
        Just(b"%".to_vec()),
        Just(b"+".to_vec()),
        Just(b"%C3%28".to_vec()),
        Just(b"http%3A%2F%2Fex%2Fg".to_vec()),
        Just(b"ASK%7B%7D".to_vec()),
        prop::collection::vec(any::<u8>(), 0..8),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
}

fn content_type() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("application/sparql-query".to_owned())),
        Just(Some("application/x-www-form-urlencoded".to_owned())),
        Just(Some("application/sparql-query; charset=UTF-16".to_owned())),
        Just(Some(
            "application/x-www-form-urlencoded;charset=\"utf-8\"".to_owned()
        )),
        ".{0,40}".prop_map(Some),
    ]
}

/// Pieces of SPARQL text, some repeated many times in a row (a chain of thousands of `/`,
/// `&&` or `+`, brackets hundreds deep), joined at random.
fn query_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("SELECT * WHERE { ".to_owned()),
        Just("ASK { ".to_owned()),
        Just("INSERT { ?s <http://ex/w> ?o } WHERE { ".to_owned()),
        Just("?s <http://ex/v> ?o . ".to_owned()),
        Just("?s ?p ?o . ".to_owned()),
        Just("FILTER(".to_owned()),
        Just("?o IN (1, 2, 3)".to_owned()),
        Just("OPTIONAL { ".to_owned()),
        Just(" UNION ".to_owned()),
        Just("} ".to_owned()),
        Just(") ".to_owned()),
        Just("ORDER BY ?o ".to_owned()),
        Just("LIMIT 3".to_owned()),
        (1usize..6000)
            .prop_map(|n| format!("?s {}<http://ex/v> ?o . ", "<http://ex/v>/".repeat(n))),
        (1usize..6000)
            .prop_map(|n| format!("?s {}<http://ex/v> ?o . ", "<http://ex/v>|".repeat(n))),
        (1usize..6000).prop_map(|n| format!("FILTER({}?o) ", "?o + ".repeat(n))),
        (1usize..6000).prop_map(|n| format!("FILTER({}true) ", "?o = 1 && ".repeat(n))),
        (1usize..400).prop_map(|n| format!("FILTER({}?o{}) ", "(".repeat(n), ")".repeat(n))),
        (1usize..400).prop_map(|n| "{ ".repeat(n)),
        "[ -~]{0,12}",
    ];
    prop::collection::vec(piece, 1..8).prop_map(|v| v.concat())
}

/// A small endpoint with short limits, made once, and the runtime its HTTP is served on.
fn endpoint() -> &'static (Arc<nearflow_serve::Endpoint>, tokio::runtime::Runtime) {
    static EP: OnceLock<(Arc<nearflow_serve::Endpoint>, tokio::runtime::Runtime)> = OnceLock::new();
    EP.get_or_init(|| {
        let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
        let text: String = (0..200)
            .map(|i| format!("<http://ex/s{i}> <http://ex/v> {i} .\n"))
            .collect();
        let store = common::store_of(&text, &machine);
        let rt = nearflow_rt::Runtime::builder(machine.clone())
            .build()
            .unwrap();
        let mut c = nearflow_serve::Config::for_pus(machine.pu_count());
        c.timeout = std::time::Duration::from_secs(2);
        c.memory_limit = Some(64 << 20);
        let ep = nearflow_serve::Endpoint::new(
            Arc::new(nearflow_rdf::db::Db::in_memory(store)),
            Arc::new(rt),
            c,
        );
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        (ep, io)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn any_query_over_http_is_answered_refused_or_stopped(
        text in query_text(),
        update in any::<bool>(),
    ) {
        let (ep, io) = endpoint();
        let (path, media) = if update {
            ("/update", "application/sparql-update")
        } else {
            ("/query", "application/sparql-query")
        };
        let req = HttpRequest::post(path)
            .header(header::CONTENT_TYPE, media)
            .body(Body::from(text.clone()))
            .unwrap();
        let status = io
            .block_on(nearflow_serve::router(ep.clone()).oneshot(req))
            .unwrap()
            .status();
        prop_assert!(
            status.is_success()
                || status.is_client_error()
                || status == StatusCode::SERVICE_UNAVAILABLE,
            "{status} for {}…",
            &text[..text.len().min(200)]
        );
    }

    #[test]
    fn any_request_is_read_or_refused_with_4xx(
        method in prop_oneof![Just(Method::GET), Just(Method::POST), Just(Method::HEAD), Just(Method::PUT)],
        url in formish(),
        ct in content_type(),
        body in prop_oneof![formish(), prop::collection::vec(any::<u8>(), 0..64)],
    ) {
        let url = String::from_utf8_lossy(&url).into_owned();
        match read(&method, Some(&url), ct.as_deref(), &body) {
            Ok(Request::Query(q)) => prop_assert!(!q.text.trim().is_empty()),
            // No parameter at all (`&` alone separates nothing).
            Ok(Request::Describe) => prop_assert!(url.split('&').all(str::is_empty)),
            // A POSTed update (to the query URL, as the Protocol allows).
            Ok(Request::Update(u)) => {
                prop_assert!(method == Method::POST && !u.text.trim().is_empty())
            }
            Err(e) => prop_assert!(e.status.is_client_error() && !e.message.is_empty(), "{e:?}"),
        }
    }

    #[test]
    fn any_accept_header_gives_an_offered_format_or_406(
        accept in prop::option::of("[a-z/*+;=.,0-9 q-]{0,60}"),
        format in prop::option::of("[a-z/+-]{0,20}"),
        graph in any::<bool>(),
    ) {
        let kind = if graph { Kind::Graph } else { Kind::Results };
        match choose(kind, accept.as_deref(), format.as_deref()) {
            Ok(Chosen::Results(_)) => prop_assert!(!graph),
            Ok(Chosen::Graph(_)) => prop_assert!(graph),
            Err(e) => prop_assert_eq!(e.status, StatusCode::NOT_ACCEPTABLE),
        }
    }
}
