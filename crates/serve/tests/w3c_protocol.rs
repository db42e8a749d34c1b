//! The W3C SPARQL 1.1 Protocol tests (`../shared/w3c/sparql/sparql11/protocol/manifest.ttl`),
//! driven through the endpoint's router: each test's HTTP requests as the manifest writes them
//! (method, path, headers, body in its character encoding), each response checked for its
//! status class, its format (boolean, tabular, RDF) and its boolean.
//!
//! Every case must pass, query and update alike.
//!
//! `#[ignore]`d because it needs `../shared`: `./test.sh` runs it, and CI fails when the
//! files are missing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use http_body_util::BodyExt;
use nearflow_rdf::load;
use nearflow_serve::{Config, Endpoint};
use oxrdf::{NamedNodeRef, NamedOrBlankNodeRef, TermRef};
use tower::ServiceExt;

mod w3c;
use w3c::{node, Manifest, HT, MF, RDF, RDFS, UT};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/w3c/sparql/sparql11/protocol")
}

fn endpoint(m: &Manifest, test: NamedOrBlankNodeRef<'_>) -> Arc<Endpoint> {
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let mut loaded = load::Loaded::default();
    for gd in m.objects(test, &format!("{UT}graphData")) {
        let gd = node(gd);
        let file = m.text(gd, &format!("{UT}graph")).unwrap();
        let label = m.text(gd, &format!("{RDFS}label")).unwrap();
        let path = dir().join(file.rsplit('/').next().unwrap());
        let text = std::fs::read(&path).unwrap();
        load::load_reader_into_graph(
            &mut loaded,
            &path,
            load::Format::NTriples,
            &text[..],
            "",
            "http://www.example/",
            &label,
        )
        .unwrap();
    }
    let store = Arc::new(loaded.into_store(&machine).unwrap());
    let rt = nearflow_rt::Runtime::builder(machine.clone())
        .build()
        .unwrap();
    // The tests name the host `www.example`, as a server would be told of its public name
    // (`nearflow serve --allow-host www.example`).
    let mut config = Config::for_pus(machine.pu_count());
    config.access.hosts = vec!["www.example".into()];
    Endpoint::new(
        Arc::new(nearflow_rdf::db::Db::in_memory((*store).clone())),
        Arc::new(rt),
        config,
    )
}

/// Runs one request of a test; `Err` says how the response differs from what is expected.
async fn request(
    m: &Manifest,
    ep: &Arc<Endpoint>,
    req: NamedOrBlankNodeRef<'_>,
) -> Result<(), String> {
    let b = w3c::build(m, req, |p| p.to_owned());
    let r = nearflow_serve::router(ep.clone()).oneshot(b).await.unwrap();
    let status = r.status().as_u16();
    let content_type = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text =
        String::from_utf8_lossy(&r.into_body().collect().await.unwrap().to_bytes()).into_owned();
    let resp = node(m.object(req, &format!("{HT}resp")).unwrap());
    let classes: Vec<u16> = m
        .objects(resp, &format!("{MF}expectedStatus"))
        .iter()
        .filter_map(|t| match t {
            TermRef::NamedNode(n) => n.as_str().strip_suffix("xx")?.chars().last()?.to_digit(10),
            _ => None,
        })
        .map(|d| d as u16)
        .collect();
    if !classes.contains(&(status / 100)) {
        return Err(format!(
            "status {status}, expected {classes:?}xx: {}",
            text.trim()
        ));
    }
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_owned();
    match m.text(resp, &format!("{MF}expectedFormat")).as_deref() {
        Some("boolean")
            if ![
                "application/sparql-results+json",
                "application/sparql-results+xml",
            ]
            .contains(&media.as_str()) =>
        {
            return Err(format!("a boolean as {media}"))
        }
        Some("tabular")
            if ![
                "application/sparql-results+json",
                "application/sparql-results+xml",
                "text/csv",
                "text/tab-separated-values",
            ]
            .contains(&media.as_str()) =>
        {
            return Err(format!("solutions as {media}"))
        }
        Some("RDF")
            if ![
                "application/rdf+xml",
                "text/turtle",
                "application/n-triples",
            ]
            .contains(&media.as_str()) =>
        {
            return Err(format!("a graph as {media}"))
        }
        _ => {}
    }
    if let Some(TermRef::Literal(l)) = m.object(resp, &format!("{MF}expectedBoolean")) {
        let want = l.value() == "true";
        let got = text.contains("true");
        if got != want || !(text.contains("true") || text.contains("false")) {
            return Err(format!("boolean {}, expected {want}", text.trim()));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ../shared/w3c; ./test.sh runs it"]
async fn w3c_protocol_tests() {
    let manifest = dir().join("manifest.ttl");
    let m = w3c::read(
        &manifest,
        "http://www.w3.org/2009/sparql/docs/tests/data-sparql11/protocol/manifest.ttl",
    );
    let manifest_node =
        m.g.subjects_for_predicate_object(
            NamedNodeRef::new(&format!("{RDF}type")).unwrap(),
            NamedNodeRef::new(&format!("{MF}Manifest")).unwrap(),
        )
        .next()
        .expect("a manifest");
    let entries = m.list(m.object(manifest_node, &format!("{MF}entries")).unwrap());
    assert_eq!(entries.len(), 34, "the manifest's entries");
    let (mut passed, mut passed_updates) = (0, 0);
    let (mut failed_queries, mut failed_updates) = (Vec::new(), Vec::new());
    for e in entries {
        let test = node(e);
        let name = match test {
            NamedOrBlankNodeRef::NamedNode(n) => n.as_str().rsplit('#').next().unwrap().to_owned(),
            _ => "?".to_owned(),
        };
        let ep = endpoint(&m, test);
        let action = node(m.object(test, &format!("{MF}action")).unwrap());
        let mut outcome = Ok(());
        for req in m.list(m.object(action, &format!("{HT}requests")).unwrap()) {
            outcome = request(&m, &ep, node(req)).await;
            if outcome.is_err() {
                break;
            }
        }
        match outcome {
            Ok(()) if name.contains("update") => passed_updates += 1,
            Ok(()) => passed += 1,
            Err(why) if name.contains("update") => failed_updates.push(format!("{name}: {why}")),
            Err(why) => failed_queries.push(format!("{name}: {why}")),
        }
    }
    println!(
        "W3C SPARQL 1.1 Protocol: query cases {passed}/{} passed; update cases {passed_updates}/{}",
        passed + failed_queries.len(),
        passed_updates + failed_updates.len()
    );
    assert!(
        failed_queries.is_empty() && failed_updates.is_empty(),
        "cases failed:\n{}",
        failed_queries
            .iter()
            .chain(&failed_updates)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
