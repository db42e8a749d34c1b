//! Writes through the endpoint: SPARQL Update by the Protocol, the Graph Store Protocol's PUT,
//! POST and DELETE, their refusals, and an acknowledged update found again after the store is
//! reopened.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use http_body_util::BodyExt;
use nearflow_rdf::db::Db;
use nearflow_rdf::load;
use nearflow_serve::{Config, Endpoint};
use tower::ServiceExt;

mod common;
use common::enc;

const DATA: &str = "@prefix ex: <http://ex/> .\nex:a ex:name \"Alice\" .\nex:b ex:name \"Bob\" .\nGRAPH ex:g1 { ex:c ex:name \"Carol\" . }\n";

fn machine() -> nearflow_topo::Machine {
    nearflow_topo::presets::build("nehalem-2x4").unwrap()
}

fn store() -> nearflow_rdf::Store {
    let mut l = load::Loaded::default();
    load::load_reader(
        &mut l,
        "t.trig".as_ref(),
        load::Format::TriG,
        DATA.as_bytes(),
        "",
    )
    .unwrap();
    l.into_store(&machine()).unwrap()
}

fn endpoint_over(db: Db, config: impl FnOnce(&mut Config)) -> Arc<Endpoint> {
    let m = machine();
    let rt = nearflow_rt::Runtime::builder(m.clone()).build().unwrap();
    let mut c = Config::for_pus(m.pu_count());
    config(&mut c);
    Endpoint::new(Arc::new(db), Arc::new(rt), c)
}

async fn send(ep: &Arc<Endpoint>, req: Request<Body>) -> (StatusCode, String) {
    let r = nearflow_serve::router(ep.clone())
        .oneshot(req)
        .await
        .unwrap();
    let status = r.status();
    let body = r.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn update_form(text: &str, extra: &str) -> Request<Body> {
    Request::post("/update")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("update={}{extra}", enc(text))))
        .unwrap()
}

fn update_direct(text: &str) -> Request<Body> {
    Request::post("/update")
        .header(header::CONTENT_TYPE, "application/sparql-update")
        .body(Body::from(text.to_owned()))
        .unwrap()
}

/// The number of rows a query gives (CSV, minus its header).
async fn count(ep: &Arc<Endpoint>, q: &str) -> usize {
    let req = Request::get(format!("/query?query={}", enc(q)))
        .header(header::ACCEPT, "text/csv")
        .body(Body::empty())
        .unwrap();
    let (status, body) = send(ep, req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body.lines().count() - 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_by_the_protocol_change_what_queries_see() {
    let ep = endpoint_over(Db::in_memory(store()), |_| {});
    let all = "SELECT * WHERE { ?s ?p ?o }";
    assert_eq!(count(&ep, all).await, 2);
    let (s, b) = send(
        &ep,
        update_form(
            "PREFIX ex: <http://ex/> INSERT DATA { ex:d ex:name \"Dan\" }",
            "",
        ),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{b}");
    assert_eq!(count(&ep, all).await, 3);
    // DELETE/INSERT WHERE, sent as the request itself.
    let (s, b) = send(
        &ep,
        update_direct(
            "PREFIX ex: <http://ex/> DELETE { ?x ex:name ?n } INSERT { ?x ex:label ?n } WHERE { ?x ex:name ?n FILTER(?n != \"Alice\") }",
        ),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{b}");
    assert_eq!(
        count(
            &ep,
            "PREFIX ex: <http://ex/> SELECT ?x WHERE { ?x ex:label ?n }"
        )
        .await,
        2
    );
    // An update to the query URL is an update too.
    let r = Request::post("/query")
        .header(header::CONTENT_TYPE, "application/sparql-update")
        .body(Body::from("CLEAR DEFAULT"))
        .unwrap();
    assert_eq!(send(&ep, r).await.0, StatusCode::NO_CONTENT);
    assert_eq!(count(&ep, all).await, 0);
    assert_eq!(
        count(&ep, "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }").await,
        1,
        "the named graph is untouched"
    );
    // using-graph-uri sets the WHERE clause's dataset…
    let (s, b) = send(
        &ep,
        update_form(
            "PREFIX ex: <http://ex/> INSERT { ?s ex:copied ?o } WHERE { ?s ex:name ?o }",
            &format!("&using-graph-uri={}", enc("http://ex/g1")),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{b}");
    assert_eq!(count(&ep, all).await, 1);
    // …but not beside the update's own.
    let (s, b) = send(
        &ep,
        update_form(
            "WITH <http://ex/g1> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
            &format!("&using-graph-uri={}", enc("http://ex/g1")),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    let status: serde_json::Value = serde_json::from_str(
        &send(&ep, Request::get("/status").body(Body::empty()).unwrap())
            .await
            .1,
    )
    .unwrap();
    assert_eq!(status["store"]["updates"], 4);
    assert_eq!(status["store"]["writable"], true);
    assert_eq!(status["store"]["durable"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_and_forbidden_updates_are_refused_with_a_message() {
    let ep = endpoint_over(Db::in_memory(store()), |_| {});
    for (req, want, says) in [
        (
            update_direct("INSERT DATA { <a> <b> }"),
            StatusCode::BAD_REQUEST,
            "syntax",
        ),
        (
            update_direct("SELECT * { ?s ?p ?o }"),
            StatusCode::BAD_REQUEST,
            "not an update",
        ),
        (
            update_direct("DROP GRAPH <http://nowhere>"),
            StatusCode::BAD_REQUEST,
            "no graph",
        ),
        (
            update_direct("LOAD <file:///etc/passwd>"),
            StatusCode::BAD_REQUEST,
            "does not read files",
        ),
        (
            update_direct("LOAD <http://example.org/data.ttl>"),
            StatusCode::BAD_REQUEST,
            "local files only",
        ),
        (
            Request::post("/update")
                .header(header::CONTENT_TYPE, "text/plain")
                .body(Body::from("CLEAR ALL"))
                .unwrap(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/sparql-update",
        ),
        (
            update_form("CLEAR ALL", "&update=CLEAR%20ALL"),
            StatusCode::BAD_REQUEST,
            "more than once",
        ),
    ] {
        let (s, body) = send(&ep, req).await;
        assert_eq!(s, want, "{body}");
        assert!(body.contains(says), "{body}");
    }
    assert_eq!(ep.db().seq(), 0, "nothing was changed");
    assert_eq!(ep.db().current().len(), 3);
    // SILENT makes a failing operation a no-op.
    let (s, _) = send(&ep, update_direct("DROP SILENT GRAPH <http://nowhere>")).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    // A read-only endpoint refuses every write.
    let ro = endpoint_over(Db::read_only(store()), |_| {});
    let (s, body) = send(&ro, update_direct("CLEAR ALL")).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
    let put = Request::put("/store?default")
        .header(header::CONTENT_TYPE, "text/turtle")
        .body(Body::from("<http://a> <http://b> <http://c> ."))
        .unwrap();
    assert_eq!(send(&ro, put).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_reads_only_under_the_directory_it_is_given() {
    let dir = std::env::temp_dir().join(format!("nearflow-serve-load-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("ok")).unwrap();
    let inside = dir.join("ok/d.ttl");
    std::fs::write(
        &inside,
        "<http://x> <http://y> _:b . _:b <http://y> \"z\" .",
    )
    .unwrap();
    let outside = dir.join("d.ttl");
    std::fs::write(&outside, "<http://x> <http://y> <http://w> .").unwrap();
    let ok = dir.join("ok");
    let ep = endpoint_over(Db::in_memory(store()), |c| {
        c.load = nearflow_sparql::update::LoadFrom::Under(ok.clone())
    });
    let (s, body) = send(
        &ep,
        update_direct(&format!(
            "LOAD <file://{}> INTO GRAPH <http://ex/l>",
            inside.display()
        )),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        count(&ep, "SELECT * WHERE { GRAPH <http://ex/l> { ?s ?p ?o } }").await,
        2
    );
    let (s, body) = send(
        &ep,
        update_direct(&format!("LOAD <file://{}>", outside.display())),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("under"), "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graph_store_puts_posts_and_deletes_graphs() {
    let ep = endpoint_over(Db::in_memory(store()), |_| {});
    let g = format!("/store?graph={}", enc("http://ex/new"));
    let body = |method: &str, uri: &str, media: &str, text: &str| {
        Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, media)
            .body(Body::from(text.to_owned()))
            .unwrap()
    };
    let in_new = "SELECT * WHERE { GRAPH <http://ex/new> { ?s ?p ?o } }";
    let (s, b) = send(
        &ep,
        body("PUT", &g, "text/turtle", "<http://a> <http://p> 1, 2 ."),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(count(&ep, in_new).await, 2);
    let (s, _) = send(
        &ep,
        body(
            "POST",
            &g,
            "application/n-triples",
            "<http://a> <http://p> \"3\" .\n",
        ),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(count(&ep, in_new).await, 3);
    // PUT replaces.
    let (s, _) = send(
        &ep,
        body(
            "PUT",
            &g,
            "text/turtle",
            "<http://a> <http://q> <http://b> .",
        ),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(count(&ep, in_new).await, 1);
    // The default graph, in RDF/XML.
    let xml = r#"<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://ex/"><rdf:Description rdf:about="http://ex/z"><ex:name>Zed</ex:name></rdf:Description></rdf:RDF>"#;
    let (s, b) = send(
        &ep,
        body("POST", "/store?default", "application/rdf+xml", xml),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{b}");
    assert_eq!(count(&ep, "SELECT * WHERE { ?s ?p ?o }").await, 3);
    // Refusals: an unknown syntax, a broken body, a graph that is not an IRI.
    let (s, _) = send(&ep, body("PUT", &g, "application/json", "{}")).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (s, b) = send(
        &ep,
        body("PUT", &g, "text/turtle", "<http://a> <http://p> ."),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert_eq!(count(&ep, in_new).await, 1, "a refused PUT changes nothing");
    let (s, _) = send(&ep, body("PUT", "/store?graph=nope", "text/turtle", "")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // DELETE, then it is gone.
    let del = || Request::delete(g.as_str()).body(Body::empty()).unwrap();
    assert_eq!(send(&ep, del()).await.0, StatusCode::NO_CONTENT);
    assert_eq!(count(&ep, in_new).await, 0);
    assert_eq!(send(&ep, del()).await.0, StatusCode::NOT_FOUND);
    let get = Request::get(g.as_str()).body(Body::empty()).unwrap();
    assert_eq!(send(&ep, get).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_named_by_its_url_and_one_the_store_names() {
    let ep = endpoint_over(Db::in_memory(store()), |c| {
        c.access.hosts = vec!["example.org".into()]
    });
    let put = Request::put("/store/people/1")
        .header(header::HOST, "example.org")
        .header(header::CONTENT_TYPE, "text/turtle")
        .body(Body::from("<http://a> <http://p> 1 ."))
        .unwrap();
    assert_eq!(send(&ep, put).await.0, StatusCode::CREATED);
    assert_eq!(
        count(
            &ep,
            "SELECT * WHERE { GRAPH <http://example.org/store/people/1> { ?s ?p ?o } }"
        )
        .await,
        1
    );
    let get = Request::get("/store/people/1")
        .header(header::HOST, "example.org")
        .header(header::ACCEPT, "application/n-triples")
        .body(Body::empty())
        .unwrap();
    let (s, body) = send(&ep, get).await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains("<http://a> <http://p>"), "{body}");
    // A POST naming no graph: the store names a new one.
    let post = Request::post("/store")
        .header(header::HOST, "example.org")
        .header(header::CONTENT_TYPE, "text/turtle")
        .body(Body::from("<http://b> <http://p> 2 ."))
        .unwrap();
    let r = nearflow_serve::router(ep.clone())
        .oneshot(post)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let loc = r.headers()[header::LOCATION].to_str().unwrap().to_owned();
    assert!(loc.starts_with("http://example.org/store/"), "{loc}");
    assert_eq!(
        count(
            &ep,
            &format!("SELECT * WHERE {{ GRAPH <{loc}> {{ ?s ?p ?o }} }}")
        )
        .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_update_is_there_after_the_store_reopens() {
    let dir = std::env::temp_dir().join(format!("nearflow-serve-durable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.nfs");
    nearflow_rdf::snapshot::save(&store(), &path).unwrap();
    {
        let ep = endpoint_over(Db::open(&path, &machine(), true).unwrap(), |_| {});
        let (s, b) = send(
            &ep,
            update_direct("INSERT DATA { <http://x> <http://y> \"kept\" }"),
        )
        .await;
        assert_eq!(s, StatusCode::NO_CONTENT, "{b}");
    }
    let db = Db::open(&path, &machine(), false).unwrap();
    let s = db.current();
    assert_eq!(s.len(), 4);
    assert!(s.id_of(nearflow_rdf::TermRef::string("kept")).is_some());
    let _ = std::fs::remove_dir_all(&dir);
}
