//! The store's prefixes, for the page's editor: the namespaces of its predicates and of its
//! classes (objects of `rdf:type`), named by the usual prefix where there is one (`rdf`,
//! `foaf`, `dcterms`, …) and `ns1`, `ns2`, … otherwise, most used first.

use std::collections::HashMap;

use nearflow_rdf::store::Store;
use nearflow_rdf::term::TermRef;

/// Well-known namespaces and the prefixes people write for them.
const KNOWN: &[(&str, &str)] = &[
    ("rdf", "http://www.w3.org/1999/02/22-rdf-syntax-ns#"),
    ("rdfs", "http://www.w3.org/2000/01/rdf-schema#"),
    ("xsd", "http://www.w3.org/2001/XMLSchema#"),
    ("owl", "http://www.w3.org/2002/07/owl#"),
    ("foaf", "http://xmlns.com/foaf/0.1/"),
    ("dc", "http://purl.org/dc/elements/1.1/"),
    ("dcterms", "http://purl.org/dc/terms/"),
    ("skos", "http://www.w3.org/2004/02/skos/core#"),
    ("schema", "http://schema.org/"),
    ("swrc", "http://swrc.ontoware.org/ontology#"),
    ("bench", "http://localhost/vocabulary/bench/"),
    ("person", "http://localhost/persons/"),
    ("prov", "http://www.w3.org/ns/prov#"),
    ("void", "http://rdfs.org/ns/void#"),
    ("geo", "http://www.opengis.net/ont/geosparql#"),
];

/// The namespace of an IRI: up to its last `#` or `/` (None when that leaves no local name).
fn namespace(iri: &str) -> Option<&str> {
    let cut = iri.rfind(['#', '/'])? + 1;
    (cut < iri.len() && cut > "http://".len()).then(|| &iri[..cut])
}

/// `(prefix, namespace)` for the store's predicates and classes, most used first, at most 30.
pub fn of(store: &Store) -> Vec<(String, String)> {
    let mut uses: HashMap<String, u64> = HashMap::new();
    for (&p, s) in &store.stats().per_predicate {
        if let TermRef::Iri(iri) = store.dict().term(p).as_ref() {
            if let Some(ns) = namespace(iri) {
                *uses.entry(ns.to_owned()).or_default() += s.triples.max(1);
            }
        }
    }
    if let Some(a) = store.id_of(TermRef::Iri(
        "http://www.w3.org/1999/02/22-rdf-syntax-ns#type",
    )) {
        let mut classes: HashMap<u32, u64> = HashMap::new();
        store.for_each_match(
            nearflow_rdf::store::DEFAULT_GRAPH,
            [None, Some(a), None],
            |t| {
                *classes.entry(t[2]).or_default() += 1;
            },
        );
        for (c, n) in classes {
            if let TermRef::Iri(iri) = store.dict().term(c).as_ref() {
                if let Some(ns) = namespace(iri) {
                    *uses.entry(ns.to_owned()).or_default() += n;
                }
            }
        }
    }
    let mut by_use: Vec<(String, u64)> = uses.into_iter().collect();
    by_use.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut unnamed = 0;
    by_use
        .into_iter()
        .take(30)
        .map(|(ns, _)| {
            let name = KNOWN.iter().find(|(_, k)| *k == ns.as_str()).map_or_else(
                || {
                    unnamed += 1;
                    format!("ns{unnamed}")
                },
                |(p, _)| (*p).to_owned(),
            );
            (name, ns)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::namespace;

    #[test]
    fn namespaces_end_at_the_last_hash_or_slash() {
        assert_eq!(
            namespace("http://xmlns.com/foaf/0.1/name"),
            Some("http://xmlns.com/foaf/0.1/")
        );
        assert_eq!(namespace("http://ex.org/o#a"), Some("http://ex.org/o#"));
        assert_eq!(namespace("http://ex.org/o#"), None);
        assert_eq!(namespace("urn:isbn:1"), None);
    }
}
