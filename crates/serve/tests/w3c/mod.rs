//! Shared by the W3C Protocol and Graph Store Protocol drivers: the manifests' graph, and a
//! test's HTTP request built as the manifest writes it (method, path, headers, body in its
//! character encoding).
#![allow(dead_code)]

use axum::body::Body;
use axum::http::Request;
use oxrdf::{Graph, NamedNodeRef, NamedOrBlankNodeRef, TermRef};

pub const MF: &str = "http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#";
pub const HT: &str = "http://www.w3.org/2011/http#";
pub const CNT: &str = "http://www.w3.org/2011/content#";
pub const UT: &str = "http://www.w3.org/2009/sparql/tests/test-update#";
pub const RDF: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#";
pub const RDFS: &str = "http://www.w3.org/2000/01/rdf-schema#";

pub struct Manifest {
    pub g: Graph,
}

impl Manifest {
    pub fn objects<'a>(&'a self, s: NamedOrBlankNodeRef<'a>, p: &str) -> Vec<TermRef<'a>> {
        let p = NamedNodeRef::new(p).unwrap();
        self.g.objects_for_subject_predicate(s, p).collect()
    }

    pub fn object<'a>(&'a self, s: NamedOrBlankNodeRef<'a>, p: &str) -> Option<TermRef<'a>> {
        self.objects(s, p).into_iter().next()
    }

    pub fn text(&self, s: NamedOrBlankNodeRef<'_>, p: &str) -> Option<String> {
        match self.object(s, p)? {
            TermRef::Literal(l) => Some(l.value().to_owned()),
            TermRef::NamedNode(n) => Some(n.as_str().to_owned()),
            _ => None,
        }
    }

    pub fn list<'a>(&'a self, mut head: TermRef<'a>) -> Vec<TermRef<'a>> {
        let mut out = Vec::new();
        loop {
            let node = match head {
                TermRef::NamedNode(n) if n.as_str() == format!("{RDF}nil") => return out,
                TermRef::NamedNode(n) => NamedOrBlankNodeRef::from(n),
                TermRef::BlankNode(b) => NamedOrBlankNodeRef::from(b),
                _ => return out,
            };
            if let Some(first) = self.object(node, &format!("{RDF}first")) {
                out.push(first);
            }
            match self.object(node, &format!("{RDF}rest")) {
                Some(rest) => head = rest,
                None => return out,
            }
        }
    }
}

pub fn node(t: TermRef<'_>) -> NamedOrBlankNodeRef<'_> {
    match t {
        TermRef::NamedNode(n) => n.into(),
        TermRef::BlankNode(b) => b.into(),
        other => panic!("not a node: {other}"),
    }
}

/// Reads a manifest (Turtle) with `base` as its IRI.
pub fn read(path: &std::path::Path, base: &str) -> Manifest {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut g = Graph::new();
    for t in oxttl::TurtleParser::new()
        .with_base_iri(base)
        .unwrap()
        .for_slice(&text)
    {
        g.insert(&t.unwrap());
    }
    Manifest { g }
}

/// The body of a request or response (`ht:body`), in its character encoding.
pub fn body(m: &Manifest, of: NamedOrBlankNodeRef<'_>) -> Option<Vec<u8>> {
    let body = node(m.object(of, &format!("{HT}body"))?);
    let chars = m.text(body, &format!("{CNT}chars")).unwrap_or_default();
    Some(
        match m.text(body, &format!("{CNT}characterEncoding")).as_deref() {
            Some("UTF-16") => chars
                .encode_utf16()
                .flat_map(|u| u.to_be_bytes())
                .collect::<Vec<u8>>(),
            _ => chars.into_bytes(),
        },
    )
}

/// The request `req` as the manifest writes it, its path through `map` (a driver maps the
/// manifest's endpoint path to ours), to host www.example (the manifests' connection).
pub fn build(
    m: &Manifest,
    req: NamedOrBlankNodeRef<'_>,
    map: impl Fn(&str) -> String,
) -> Request<Body> {
    let path = m.text(req, &format!("{HT}absolutePath")).unwrap();
    let method = m.text(req, &format!("{HT}methodName")).unwrap();
    // The manifest's connection is to www.example: the Host header says so.
    let mut b = Request::builder()
        .method(method.as_str())
        .uri(map(&path))
        .header("host", "www.example");
    if let Some(h) = m.object(req, &format!("{HT}headers")) {
        for field in m.list(h) {
            let field = node(field);
            b = b.header(
                m.text(field, &format!("{HT}fieldName")).unwrap(),
                m.text(field, &format!("{HT}fieldValue")).unwrap(),
            );
        }
    }
    let body = body(m, req).unwrap_or_default();
    b.body(Body::from(body)).unwrap()
}
