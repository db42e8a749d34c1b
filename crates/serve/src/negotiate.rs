//! Content negotiation: the result format a client's `Accept` header (or `format` parameter)
//! asks for, among those a query's form can be written in.

use axum::http::StatusCode;
use nearflow_sparql::results::{Format, GraphFormat};

use crate::ApiError;

/// What a response holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Solutions or a boolean (SELECT, ASK).
    Results,
    /// A graph (CONSTRUCT, DESCRIBE, the service description, the graph store).
    Graph,
}

/// A chosen format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chosen {
    /// A SPARQL results format.
    Results(Format),
    /// An RDF syntax.
    Graph(GraphFormat),
}

impl Chosen {
    /// The `Content-Type` of a response in it.
    pub fn content_type(self) -> &'static str {
        match self {
            Chosen::Results(Format::Xml) => "application/sparql-results+xml",
            Chosen::Results(Format::Csv) => "text/csv; charset=utf-8",
            Chosen::Results(Format::Tsv) => "text/tab-separated-values; charset=utf-8",
            Chosen::Results(_) => "application/sparql-results+json",
            Chosen::Graph(GraphFormat::NTriples) => "application/n-triples",
            Chosen::Graph(GraphFormat::Turtle) => "text/turtle; charset=utf-8",
            Chosen::Graph(GraphFormat::NQuads) => "application/n-quads",
            Chosen::Graph(GraphFormat::RdfXml) => "application/rdf+xml",
        }
    }
}

/// Media types offered for results, the default first; a wildcard (`text/*`) takes the first
/// it matches, so that `text/*` is CSV, a table a person reads, rather than XML.
const RESULTS: &[(&str, Chosen)] = &[
    (
        "application/sparql-results+json",
        Chosen::Results(Format::Json),
    ),
    ("application/json", Chosen::Results(Format::Json)),
    (
        "application/sparql-results+xml",
        Chosen::Results(Format::Xml),
    ),
    ("application/xml", Chosen::Results(Format::Xml)),
    ("text/csv", Chosen::Results(Format::Csv)),
    ("text/tab-separated-values", Chosen::Results(Format::Tsv)),
    ("text/xml", Chosen::Results(Format::Xml)),
];

/// Media types offered for graphs, the default first.
const GRAPHS: &[(&str, Chosen)] = &[
    ("text/turtle", Chosen::Graph(GraphFormat::Turtle)),
    ("application/x-turtle", Chosen::Graph(GraphFormat::Turtle)),
    (
        "application/n-triples",
        Chosen::Graph(GraphFormat::NTriples),
    ),
    ("text/plain", Chosen::Graph(GraphFormat::NTriples)),
    ("application/n-quads", Chosen::Graph(GraphFormat::NQuads)),
    ("application/rdf+xml", Chosen::Graph(GraphFormat::RdfXml)),
    ("application/xml", Chosen::Graph(GraphFormat::RdfXml)),
];

/// Short names for the `format` parameter.
const NAMES: &[(&str, Chosen)] = &[
    ("json", Chosen::Results(Format::Json)),
    ("xml", Chosen::Results(Format::Xml)),
    ("csv", Chosen::Results(Format::Csv)),
    ("tsv", Chosen::Results(Format::Tsv)),
    ("turtle", Chosen::Graph(GraphFormat::Turtle)),
    ("ttl", Chosen::Graph(GraphFormat::Turtle)),
    ("ntriples", Chosen::Graph(GraphFormat::NTriples)),
    ("nt", Chosen::Graph(GraphFormat::NTriples)),
    ("nquads", Chosen::Graph(GraphFormat::NQuads)),
    ("nq", Chosen::Graph(GraphFormat::NQuads)),
    ("rdfxml", Chosen::Graph(GraphFormat::RdfXml)),
    ("rdf", Chosen::Graph(GraphFormat::RdfXml)),
];

/// The format for a response of `kind`: the `format` parameter when given (a short name or a
/// media type), else the `Accept` header's most preferred offered type (by `q`, then order),
/// else the default. 406 when nothing asked for can be written.
pub fn choose(kind: Kind, accept: Option<&str>, format: Option<&str>) -> Result<Chosen, ApiError> {
    let offered = match kind {
        Kind::Results => RESULTS,
        Kind::Graph => GRAPHS,
    };
    let names = || {
        offered
            .iter()
            .map(|(m, _)| *m)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(f) = format {
        let f = f.trim().to_ascii_lowercase();
        let by_name = NAMES.iter().find(|(n, _)| *n == f).map(|(_, c)| *c);
        let by_type = offered.iter().find(|(m, _)| *m == f).map(|(_, c)| *c);
        return match by_name.or(by_type) {
            Some(c) if offered.iter().any(|(_, o)| *o == c) => Ok(c),
            _ => Err(ApiError::new(
                StatusCode::NOT_ACCEPTABLE,
                format!(
                    "format {f:?} cannot be given for this answer; it can be one of {}",
                    names()
                ),
            )),
        };
    }
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(offered[0].1);
    };
    let mut ranges: Vec<(f32, usize, String)> = Vec::new();
    for (i, range) in accept.split(',').enumerate() {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut q = 1.0f32;
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    q = v.trim().parse().unwrap_or(0.0);
                }
            }
        }
        if !media.is_empty() && q > 0.0 {
            ranges.push((q, i, media));
        }
    }
    // Most preferred first; more specific ranges before wildcards of the same weight.
    ranges.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.2.contains('*').cmp(&b.2.contains('*')))
            .then(a.1.cmp(&b.1))
    });
    for (_, _, media) in &ranges {
        let hit = offered.iter().find(|(m, _)| {
            media == "*/*"
                || media == m
                || media
                    .strip_suffix("/*")
                    .is_some_and(|t| m.split('/').next() == Some(t))
        });
        if let Some((_, c)) = hit {
            return Ok(*c);
        }
    }
    Err(ApiError::new(
        StatusCode::NOT_ACCEPTABLE,
        format!("none of the types in Accept ({accept}) can be given for this answer; it can be one of {}", names()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_pick_by_weight_then_specificity() {
        let r = |a: Option<&str>| choose(Kind::Results, a, None).unwrap();
        assert_eq!(r(None), Chosen::Results(Format::Json));
        assert_eq!(r(Some("*/*")), Chosen::Results(Format::Json));
        assert_eq!(r(Some("text/csv")), Chosen::Results(Format::Csv));
        assert_eq!(
            r(Some(
                "application/sparql-results+json;q=0.5, application/sparql-results+xml"
            )),
            Chosen::Results(Format::Xml)
        );
        assert_eq!(
            r(Some("text/*;q=0.9, */*;q=0.1")),
            Chosen::Results(Format::Csv)
        );
        assert_eq!(r(Some("text/*")), Chosen::Results(Format::Csv));
        assert_eq!(
            r(Some("*/*;q=0.8, text/tab-separated-values;q=0.8")),
            Chosen::Results(Format::Tsv)
        );
        let g = |a: Option<&str>| choose(Kind::Graph, a, None).unwrap();
        assert_eq!(g(None), Chosen::Graph(GraphFormat::Turtle));
        assert_eq!(
            g(Some("application/n-triples")),
            Chosen::Graph(GraphFormat::NTriples)
        );
        assert_eq!(
            g(Some("application/rdf+xml")),
            Chosen::Graph(GraphFormat::RdfXml)
        );
        assert_eq!(
            g(Some("application/n-quads")),
            Chosen::Graph(GraphFormat::NQuads)
        );
    }

    #[test]
    fn what_cannot_be_given_is_406() {
        let e = choose(Kind::Results, Some("image/png"), None).unwrap_err();
        assert_eq!(e.status, StatusCode::NOT_ACCEPTABLE);
        assert!(e.message.contains("text/csv"), "{}", e.message);
        let e = choose(Kind::Results, Some("text/csv;q=0"), None).unwrap_err();
        assert_eq!(e.status, StatusCode::NOT_ACCEPTABLE);
        let e = choose(Kind::Graph, None, Some("csv")).unwrap_err();
        assert_eq!(e.status, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(
            choose(Kind::Graph, Some("image/png"), Some("nt")).unwrap(),
            Chosen::Graph(GraphFormat::NTriples)
        );
        assert_eq!(
            choose(Kind::Results, None, Some("text/csv")).unwrap(),
            Chosen::Results(Format::Csv)
        );
    }
}
