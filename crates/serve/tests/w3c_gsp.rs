//! The W3C SPARQL 1.1 Graph Store HTTP Protocol tests
//! (`../shared/w3c/sparql/sparql11/graph-store-protocol`), driven through the endpoint's
//! router: each test's requests as the manifest writes them, the manifest's `/gsp` mapped to
//! our `/store`; each response checked for its status and, where the manifest gives one, its
//! graph (isomorphic to the expected one, blank nodes canonicalised).
//!
//! Every test must pass: indirect (`?graph=IRI`) and direct (`/store/person/1.ttl` as the
//! graph's IRI) identification, and graph creation by a `POST` to the store (the server names
//! the new graph in `Location`, which later requests use as `$LOCATION$`).
//!
//! Each test runs against an empty store of its own (the expected graphs assume it: a POST
//! to a graph an earlier test made would merge into it).
//! `#[ignore]`d because it needs `../shared`: `./test.sh` runs it, and CI fails when the
//! files are missing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use http_body_util::BodyExt;
use nearflow_serve::{Config, Endpoint};
use oxrdf::graph::CanonicalizationAlgorithm;
use oxrdf::{Graph, NamedNodeRef, NamedOrBlankNodeRef, TermRef};
use tower::ServiceExt;

mod w3c;
use w3c::{node, Manifest, HT, MF, RDF};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/w3c/sparql/sparql11/graph-store-protocol")
}

/// An `hts:` status: a code, or a class (`StatusCode2xx`).
fn expected(t: TermRef<'_>) -> Option<(u16, bool)> {
    let TermRef::NamedNode(n) = t else {
        return None;
    };
    let name = n.as_str().rsplit('#').next()?;
    Some(match name {
        "OK" => (200, false),
        "Created" => (201, false),
        "NoContent" => (204, false),
        "BadRequest" => (400, false),
        "NotFound" => (404, false),
        c => (
            c.strip_prefix("StatusCode")?
                .strip_suffix("xx")?
                .parse()
                .ok()?,
            true,
        ),
    })
}

fn graph(bytes: &[u8], base: &str) -> Result<Graph, String> {
    let mut g = Graph::new();
    for t in oxttl::TurtleParser::new()
        .with_base_iri(base)
        .map_err(|e| e.to_string())?
        .for_slice(bytes)
    {
        g.insert(&t.map_err(|e| e.to_string())?);
    }
    g.canonicalize(CanonicalizationAlgorithm::Unstable);
    Ok(g)
}

/// Runs one request; `location` is the last `Location` a response gave (a later request's
/// `$LOCATION$`).
async fn request(
    m: &Manifest,
    ep: &Arc<Endpoint>,
    req: NamedOrBlankNodeRef<'_>,
    location: &mut Option<String>,
) -> Result<(), String> {
    let loc = location.clone().unwrap_or_default();
    let r = nearflow_serve::router(ep.clone())
        .oneshot(w3c::build(m, req, |p| {
            p.replacen("/gsp", "/store", 1).replace("$LOCATION$", &loc)
        }))
        .await
        .unwrap();
    let status = r.status();
    if let Some(l) = r.headers().get("location") {
        *location = Some(l.to_str().unwrap().to_owned());
    }
    let got = r.into_body().collect().await.unwrap().to_bytes();
    let resp = node(m.object(req, &format!("{HT}resp")).unwrap());
    let want: Vec<(u16, bool)> = m
        .objects(resp, &format!("{MF}expectedStatus"))
        .into_iter()
        .filter_map(expected)
        .collect();
    let ok = want.iter().any(|&(c, class)| {
        if class {
            status.as_u16() / 100 == c
        } else {
            status.as_u16() == c
        }
    });
    if !ok {
        return Err(format!(
            "status {status}, expected {want:?}: {}",
            String::from_utf8_lossy(&got).trim()
        ));
    }
    if let Some(body) = w3c::body(m, resp) {
        let base = "http://www.example/";
        let want = graph(&body, base).map_err(|e| format!("the expected graph: {e}"))?;
        let got = graph(&got, base).map_err(|e| format!("our graph: {e}"))?;
        if want != got {
            return Err(format!("the graph differs: ours {got}, expected {want}"));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ../shared/w3c; ./test.sh runs it"]
async fn w3c_graph_store_protocol_tests() {
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let rt = Arc::new(
        nearflow_rt::Runtime::builder(machine.clone())
            .build()
            .unwrap(),
    );
    // Each test on an empty store of its own (a test's expected graphs assume so).
    let fresh = || {
        let store = nearflow_rdf::load::Loaded::default()
            .into_store(&machine)
            .unwrap();
        // The tests name the host `www.example`, as a server would be told of its public
        // name (`nearflow serve --allow-host www.example`).
        let mut config = Config::for_pus(machine.pu_count());
        config.access.hosts = vec!["www.example".into()];
        Endpoint::new(
            Arc::new(nearflow_rdf::db::Db::in_memory(store)),
            rt.clone(),
            config,
        )
    };
    let (mut passed, mut failed) = (Vec::new(), Vec::new());
    for file in ["manifest-indirect.ttl", "manifest-direct.ttl"] {
        let m = w3c::read(
            &dir().join(file),
            &format!(
                "http://www.w3.org/2009/sparql/docs/tests/data-sparql11/http-rdf-update/{file}"
            ),
        );
        let manifest =
            m.g.subjects_for_predicate_object(
                NamedNodeRef::new(&format!("{RDF}type")).unwrap(),
                NamedNodeRef::new(&format!("{MF}Manifest")).unwrap(),
            )
            .next()
            .expect("a manifest");
        for e in m.list(m.object(manifest, &format!("{MF}entries")).unwrap()) {
            let test = node(e);
            let name = match test {
                NamedOrBlankNodeRef::NamedNode(n) => {
                    n.as_str().rsplit('#').next().unwrap().to_owned()
                }
                _ => "?".to_owned(),
            };
            let action = node(m.object(test, &format!("{MF}action")).unwrap());
            let ep = fresh();
            let mut outcome = Ok(());
            let mut location = None;
            for req in m.list(m.object(action, &format!("{HT}requests")).unwrap()) {
                outcome = request(&m, &ep, node(req), &mut location).await;
                if outcome.is_err() {
                    break;
                }
            }
            match outcome {
                Ok(()) => passed.push(name),
                Err(why) => failed.push(format!("{name}: {why}")),
            }
        }
    }
    println!(
        "W3C SPARQL 1.1 Graph Store Protocol: {}/{} passed",
        passed.len(),
        passed.len() + failed.len(),
    );
    assert!(failed.is_empty(), "cases failed:\n{}", failed.join("\n"));
    assert!(passed.len() >= 13, "too few ran: {passed:?}");
}
