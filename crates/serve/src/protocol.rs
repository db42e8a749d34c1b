//! The SPARQL 1.1 Protocol's query operation (§2.1): a request's query, dataset and options
//! read from its URL, its content type and its body, with a 4xx error for everything the
//! protocol does not allow.

use std::time::Duration;

use axum::http::{Method, StatusCode};

use crate::ApiError;

/// What a query request asks for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct QueryRequest {
    /// The query text.
    pub text: String,
    /// `default-graph-uri`: the graphs merged into the default graph (they override the
    /// query's `FROM`, as §2.1.4 says).
    pub default_graphs: Vec<String>,
    /// `named-graph-uri`: the named graphs (they override `FROM NAMED`).
    pub named_graphs: Vec<String>,
    /// `timeout`: a time limit lower than the server's.
    pub timeout: Option<Duration>,
    /// `format`: a result format named in the URL, for clients that cannot set `Accept`.
    pub format: Option<String>,
    /// The IRI relative IRIs of the query resolve against: the endpoint's own URL (§2.1.4
    /// lets the service define it), when the request names its host.
    pub base: Option<String>,
}

/// What a request to the query endpoint is.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// A query.
    Query(QueryRequest),
    /// A `GET` with no parameters: the service description.
    Describe,
    /// An update sent to the query URL (the Protocol lets one URL take both): a POSTed
    /// `application/sparql-update`, or a POSTed form with an `update` parameter.
    Update(crate::write::UpdateRequest),
}

/// Reads a request to the query endpoint (§2.1.1–2.1.3: GET with the query in the URL, POST of
/// a URL-encoded form, POST of the query itself), or an update sent there (§2.2), each byte of
/// the body read once.
pub fn read(
    method: &Method,
    url_query: Option<&str>,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Request, ApiError> {
    let url = pairs(url_query.unwrap_or("").as_bytes())?;
    let media = content_type.map(|c| media(Some(c)));
    use crate::write::{update_request, UpdateBody};
    let form = match (method, media.as_deref()) {
        (&Method::POST, Some("application/sparql-update")) => {
            return update_request(url, UpdateBody::Text(body)).map(Request::Update);
        }
        (&Method::POST, Some("application/x-www-form-urlencoded")) => {
            let form = pairs(body)?;
            if form.iter().any(|(k, _)| k == "update") {
                return update_request(url, UpdateBody::Form(form)).map(Request::Update);
            }
            form
        }
        _ => Vec::new(),
    };
    if let Some(charset) = content_type.and_then(charset) {
        if !charset.eq_ignore_ascii_case("utf-8") && !charset.eq_ignore_ascii_case("utf8") {
            return Err(bad(&format!(
                "the request says charset={charset}; a query is sent in UTF-8 (SPARQL 1.1 Protocol §2.1.2–2.1.3)"
            )));
        }
    }
    let mut req = QueryRequest::default();
    let mut text = None;
    match *method {
        Method::GET | Method::HEAD => {
            if url.is_empty() {
                return Ok(Request::Describe);
            }
            for (k, v) in url {
                take(&mut req, &mut text, &k, v)?;
            }
        }
        Method::POST => match media.as_deref() {
            Some("application/x-www-form-urlencoded") => {
                for (k, v) in url.into_iter().chain(form) {
                    take(&mut req, &mut text, &k, v)?;
                }
            }
            Some("application/sparql-query") => {
                for (k, v) in url {
                    if k == "query" {
                        return Err(bad(
                            "a query POSTed as application/sparql-query is the body; the URL \
                             may not name another",
                        ));
                    }
                    take(&mut req, &mut text, &k, v)?;
                }
                text = Some(utf8(body, "the query")?.to_owned());
            }
            Some(other) => {
                return Err(ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    format!(
                        "a query is POSTed as application/sparql-query or as an \
                         application/x-www-form-urlencoded form, not as {other}"
                    ),
                ))
            }
            None => {
                return Err(ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "a POSTed query needs a Content-Type: application/sparql-query, or \
                     application/x-www-form-urlencoded with a query parameter",
                ))
            }
        },
        _ => {
            return Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("the query endpoint takes GET and POST, not {method}"),
            ))
        }
    }
    req.text = text.ok_or_else(|| bad("the request has no query parameter"))?;
    if req.text.trim().is_empty() {
        return Err(bad("the query is empty"));
    }
    Ok(Request::Query(req))
}

/// The `charset` parameter of a media type, unquoted.
fn charset(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches('"'))
    })
}

/// One parameter into the request; an error for a repeated `query`, an `update`, or a bad
/// value.
fn take(
    req: &mut QueryRequest,
    text: &mut Option<String>,
    key: &str,
    value: String,
) -> Result<(), ApiError> {
    match key {
        "query" => {
            if text.is_some() {
                return Err(bad("the request gives the query parameter more than once"));
            }
            *text = Some(value);
        }
        "default-graph-uri" => req.default_graphs.push(iri(value)?),
        "named-graph-uri" => req.named_graphs.push(iri(value)?),
        "timeout" => req.timeout = Some(duration(&value)?),
        // SPARQLWrapper sends both, with the same value; two that disagree are refused.
        "format" | "output" => match &req.format {
            Some(f) if !f.eq_ignore_ascii_case(&value) => {
                return Err(bad(&format!(
                    "the request names two formats ({f} and {value}; format, output)"
                )));
            }
            Some(_) => {}
            None => req.format = Some(value),
        },
        "update" | "using-graph-uri" | "using-named-graph-uri" => {
            return Err(bad(
                "this is the query endpoint; SPARQL Update requests go to /update",
            ))
        }
        // Unknown parameters are ignored, as other endpoints do (a cache-buster, a UI's own).
        _ => {}
    }
    Ok(())
}

/// The media type of a Content-Type: lower case, without its parameters; empty when there is
/// none.
pub fn media(content_type: Option<&str>) -> String {
    content_type
        .map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// The graph a Graph Store request's URL names (§4.2): `Some(None)` for `?default`,
/// `Some(Some(IRI))` for `?graph=IRI`, `None` when it names none; an error for both, for two
/// graphs, or for a graph that is not an absolute IRI.
pub fn graph_param(url: Option<&str>) -> Result<Option<Option<String>>, ApiError> {
    let params = pairs(url.unwrap_or("").as_bytes())?;
    let default = params.iter().any(|(k, _)| k == "default");
    let named: Vec<&String> = params
        .iter()
        .filter(|(k, _)| k == "graph")
        .map(|(_, v)| v)
        .collect();
    match (default, named.as_slice()) {
        (true, []) => Ok(Some(None)),
        (false, [g]) => {
            oxrdf::NamedNode::new(g.as_str())
                .map_err(|e| bad(&format!("{g:?} is not an absolute IRI: {e}")))?;
            Ok(Some(Some((*g).clone())))
        }
        (false, []) => Ok(None),
        _ => Err(bad("name one graph: ?default, or ?graph=IRI")),
    }
}

/// `s` percent-encoded for a URL's query (every byte but the unreserved ones).
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The pairs of a URL-encoded string; an error when a name or value is not UTF-8.
pub(crate) fn pairs(bytes: &[u8]) -> Result<Vec<(String, String)>, ApiError> {
    let mut out = Vec::new();
    for piece in bytes.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
        let (k, v) = match piece.iter().position(|&b| b == b'=') {
            Some(i) => (&piece[..i], &piece[i + 1..]),
            None => (piece, &[][..]),
        };
        let k = decode(k).ok_or_else(|| bad("a parameter name is not UTF-8 once decoded"))?;
        let v =
            decode(v).ok_or_else(|| bad(&format!("parameter {k} is not UTF-8 once decoded")))?;
        out.push((k, v));
    }
    Ok(out)
}

/// `+` as a space, `%XX` as its byte (a `%` not followed by two hex digits is itself);
/// `None` when the result is not UTF-8.
fn decode(s: &[u8]) -> Option<String> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut raw = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => raw.push(b' '),
            b'%' => {
                match (
                    s.get(i + 1).and_then(|&b| hex(b)),
                    s.get(i + 2).and_then(|&b| hex(b)),
                ) {
                    (Some(h), Some(l)) => {
                        raw.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => raw.push(b'%'),
                }
            }
            b => raw.push(b),
        }
        i += 1;
    }
    String::from_utf8(raw).ok()
}

fn utf8<'a>(body: &'a [u8], what: &str) -> Result<&'a str, ApiError> {
    std::str::from_utf8(body).map_err(|e| {
        bad(&format!(
            "{what} is not UTF-8 (byte {} is not part of a character)",
            e.valid_up_to()
        ))
    })
}

/// A graph IRI parameter: absolute, with no character an IRI may not hold.
fn iri(value: String) -> Result<String, ApiError> {
    oxrdf::NamedNode::new(value.as_str())
        .map(|_| value.clone())
        .map_err(|e| bad(&format!("{value:?} is not an absolute IRI: {e}")))
}

/// A duration: seconds (`30`, `1.5`) or with a unit (`250ms`, `30s`, `2m`).
pub fn duration(s: &str) -> Result<Duration, ApiError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| {
        bad(&format!(
            "timeout {s:?} is not a duration (30, 1.5s, 250ms, 2m)"
        ))
    })?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1e3,
        "m" | "min" => n * 60.0,
        _ => return Err(bad(&format!("timeout {s:?}: the unit is ms, s or m"))),
    };
    if !(secs > 0.0 && secs <= 7.0 * 86_400.0) {
        return Err(bad(&format!("timeout {s:?} is not between 0 and a week")));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn bad(message: &str) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(r: Result<Request, ApiError>) -> QueryRequest {
        match r.unwrap() {
            Request::Query(q) => q,
            Request::Describe => panic!("a description"),
            Request::Update(_) => panic!("an update"),
        }
    }

    #[test]
    fn an_update_sent_to_the_query_url_is_read_once_as_an_update() {
        let form = "application/x-www-form-urlencoded";
        let update =
            |ct: &str, body: &str| match read(&Method::POST, None, Some(ct), body.as_bytes()) {
                Ok(Request::Update(u)) => u.text,
                other => panic!("{other:?}"),
            };
        assert_eq!(update(form, "update=CLEAR%20ALL"), "CLEAR ALL");
        assert_eq!(
            update("application/sparql-update", "CLEAR ALL"),
            "CLEAR ALL"
        );
        // A form with a query and no update stays a query.
        let q = query(read(&Method::POST, None, Some(form), b"query=ASK%20%7B%7D"));
        assert_eq!(q.text, "ASK {}");
        // An update in a form that also names a query is refused, as the update URL refuses it.
        let both = read(
            &Method::POST,
            None,
            Some(form),
            b"update=CLEAR%20ALL&query=ASK%7B%7D",
        );
        assert!(both.is_err());
    }

    #[test]
    fn get_form_and_direct_post_read_the_same_request() {
        let get = query(read(
            &Method::GET,
            Some("query=SELECT%20*%20%7B%3Fs%20%3Fp%20%3Fo%7D&default-graph-uri=http%3A%2F%2Fex%2Fg&timeout=2s"),
            None,
            b"",
        ));
        assert_eq!(get.text, "SELECT * {?s ?p ?o}");
        assert_eq!(get.default_graphs, vec!["http://ex/g".to_owned()]);
        assert_eq!(get.timeout, Some(Duration::from_secs(2)));
        let form = query(read(
            &Method::POST,
            Some("timeout=2s"),
            Some("application/x-www-form-urlencoded; charset=UTF-8"),
            b"query=SELECT+*+%7B%3Fs+%3Fp+%3Fo%7D&default-graph-uri=http%3A%2F%2Fex%2Fg",
        ));
        assert_eq!(form, get);
        let direct = query(read(
            &Method::POST,
            Some("default-graph-uri=http%3A%2F%2Fex%2Fg&timeout=2000ms"),
            Some("application/sparql-query"),
            b"SELECT * {?s ?p ?o}",
        ));
        assert_eq!(direct, get);
    }

    #[test]
    fn bad_requests_are_4xx_with_a_reason() {
        let status = |r: Result<Request, ApiError>| r.unwrap_err().status;
        let q = Some("query=ASK%7B%7D&query=ASK%7B%7D");
        assert_eq!(
            status(read(&Method::GET, q, None, b"")),
            StatusCode::BAD_REQUEST
        );
        // SPARQLWrapper names its format twice, alike: taken; two formats: refused.
        assert!(read(
            &Method::GET,
            Some("query=ASK%7B%7D&format=json&output=json"),
            None,
            b""
        )
        .is_ok());
        assert_eq!(
            status(read(
                &Method::GET,
                Some("query=ASK%7B%7D&format=json&output=xml"),
                None,
                b""
            )),
            StatusCode::BAD_REQUEST
        );
        let bad_utf8 = Some("query=%FF%FE");
        assert_eq!(
            status(read(&Method::GET, bad_utf8, None, b"")),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status(read(
                &Method::POST,
                None,
                Some("application/sparql-query"),
                b"\xff"
            )),
            StatusCode::BAD_REQUEST
        );
        let utf16 = Some("application/sparql-query; charset=UTF-16");
        assert_eq!(
            status(read(&Method::POST, None, utf16, b"\0A\0S\0K")),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status(read(&Method::POST, None, Some("text/plain"), b"ASK {}")),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        assert_eq!(
            status(read(&Method::POST, None, None, b"ASK {}")),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        assert_eq!(
            status(read(&Method::PUT, Some("query=ASK%7B%7D"), None, b"")),
            StatusCode::METHOD_NOT_ALLOWED
        );
        let update = Some("update=CLEAR%20ALL");
        assert_eq!(
            status(read(&Method::GET, update, None, b"")),
            StatusCode::BAD_REQUEST
        );
        let relative = Some("query=ASK%7B%7D&named-graph-uri=g");
        assert_eq!(
            status(read(&Method::GET, relative, None, b"")),
            StatusCode::BAD_REQUEST
        );
        for t in ["0", "-1", "1y", "x", "1e9"] {
            assert!(duration(t).is_err(), "{t}");
        }
        assert_eq!(
            status(read(&Method::GET, Some("format=json"), None, b"")),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            read(&Method::GET, None, None, b"").unwrap(),
            Request::Describe
        );
    }
}
