//! Property-based fuzzing of what the endpoint reads from a client before any query runs: the
//! request (method, URL query, content type, body) and the `Accept` header with the `format`
//! parameter. Arbitrary bytes give a request or a 4xx, never a panic; a result is always a
//! format the answer can be given in. `NEARFLOW_FUZZ_CASES` sets the number of cases.

use axum::http::{Method, StatusCode};
use nearflow_serve::negotiate::{choose, Chosen, Kind};
use nearflow_serve::protocol::{read, Request};
use proptest::prelude::*;

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

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

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
