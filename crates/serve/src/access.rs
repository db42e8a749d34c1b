//! Who may use the endpoint, and from where: what a web page of another origin may read or
//! write, which `Host` a request may name, and what a write must carry.
//!
//! Safe by default, as the Jupyter server and Oxigraph's are:
//! - **No CORS** unless [`Access::cors`] names origins: a page of another origin may send a
//!   request (a browser lets any page send a form or load an image) but cannot read its
//!   answer, and its preflights are refused. `*` lets every page read answers, never write.
//! - **Writes** (SPARQL Update, Graph Store PUT/POST/DELETE, LOAD) are refused when the request
//!   comes from a browser page whose origin is neither the endpoint's own nor named in
//!   [`Access::cors`]: a browser sends `Origin` with every POST, PUT and DELETE, so a form on
//!   another site cannot change the store. A client that is not a browser sends no `Origin`.
//! - **The `Host` header** of a server bound to loopback must name a loopback host
//!   (`localhost`, `127.0.0.1`, `[::1]`, or a name of [`Access::hosts`]): a page whose DNS name
//!   is rebound to 127.0.0.1 sends its own name, and is refused.
//! - **A token for writes**: with [`Access::write_token`], every write must carry
//!   `Authorization: Bearer TOKEN`. A server bound beyond loopback without a token takes no
//!   writes at all (the CLI warns at start).

use std::net::{IpAddr, SocketAddr};

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};

use crate::ApiError;

/// Who may use the endpoint, and from where.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// Origins (`scheme://host[:port]`) whose pages may read answers and write; `*`: every
    /// page may read (not write). Empty: no page of another origin may read.
    pub cors: Vec<String>,
    /// The token a write must carry as `Authorization: Bearer TOKEN`.
    pub write_token: Option<String>,
    /// The address the server listens on (`None`: loopback, as in tests without a socket).
    pub bind: Option<SocketAddr>,
    /// Host names, besides the loopback ones, that a loopback server answers to.
    pub hosts: Vec<String>,
}

/// Where a request comes from, by its `Origin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// No `Origin`: not a page of another origin (a client that is not a browser, or a
    /// same-origin GET).
    NoOrigin,
    /// The endpoint's own page.
    Same,
    /// A page of an origin [`Access::cors`] names.
    Named,
    /// Any page, let read by `*`.
    Anyone,
    /// A page of another origin, not let in.
    Foreign,
}

impl Access {
    /// Whether the server listens on loopback only.
    pub fn is_loopback(&self) -> bool {
        self.bind.is_none_or(|a| a.ip().is_loopback())
    }

    /// The write token held in the file at `path`: its text without surrounding white space,
    /// one word of at least 16 characters.
    pub fn read_token(path: &std::path::Path) -> Result<String, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let token = text.trim().to_owned();
        if token.len() < 16 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "{}: the token must be one word of at least 16 characters",
                path.display()
            ));
        }
        Ok(token)
    }

    /// What is open to whom, a line each, for a server to say at start: the origins whose
    /// pages may read (and, when the server is `writable`, write), and a warning when any page
    /// may read or the server listens beyond loopback.
    pub fn said(&self, writable: bool) -> Vec<String> {
        let mut lines = Vec::new();
        if self.cors.iter().any(|c| c == "*") {
            lines.push(
                "warning: every web page may read this store's answers (not write): --cors '*'"
                    .to_owned(),
            );
        }
        let named: Vec<&str> = self
            .cors
            .iter()
            .filter(|c| *c != "*")
            .map(|s| s.as_str())
            .collect();
        if !named.is_empty() {
            let and_write = if writable { " and write" } else { "" };
            lines.push(format!("pages of {} may read{and_write}", named.join(", ")));
        }
        if !self.is_loopback() {
            let at = self.bind.map(|a| a.to_string()).unwrap_or_default();
            lines.push(match self.write_token {
                None => format!(
                    "warning: listening beyond loopback ({at}) with no write token: anyone who \
                     reaches this address may query the store, and writes are refused"
                ),
                Some(_) => format!(
                    "warning: listening beyond loopback ({at}): anyone who reaches this address \
                     may query the store; writes need the token"
                ),
            });
        }
        lines
    }

    /// An error when an origin given to [`Access::cors`] is not `*` or `scheme://host[:port]`.
    pub fn check_origin(origin: &str) -> Result<String, String> {
        if origin == "*" {
            return Ok(origin.to_owned());
        }
        let o = origin.trim_end_matches('/').to_ascii_lowercase();
        let ok = ["http://", "https://"].iter().any(|s| {
            o.strip_prefix(s)
                .is_some_and(|rest| !rest.is_empty() && !rest.contains(['/', '?', '#', ' ']))
        });
        if ok {
            Ok(o)
        } else {
            Err(format!(
                "{origin:?} is not an origin: give scheme://host[:port] (http://localhost:3000) or *"
            ))
        }
    }

    /// 403 when the request's `Host` is not one a loopback server answers to (a
    /// DNS-rebinding page); a request without `Host`, or to a server beyond loopback, passes.
    pub fn check_host(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        if !self.is_loopback() {
            return Ok(());
        }
        let Some(host) = headers.get(header::HOST) else {
            return Ok(());
        };
        let host = host.to_str().unwrap_or("");
        let name = host_name(host);
        let loopback = name.eq_ignore_ascii_case("localhost")
            || name.to_ascii_lowercase().ends_with(".localhost")
            || name
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
            || self.hosts.iter().any(|h| h.eq_ignore_ascii_case(name));
        if loopback {
            Ok(())
        } else {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "the request is for host {host:?}, but this server listens on loopback and \
                     answers only requests for localhost (a page whose name was rebound to this \
                     machine is refused); `nearflow serve --allow-host NAME` admits a name"
                ),
            ))
        }
    }

    fn source(&self, headers: &HeaderMap) -> Source {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Source::NoOrigin;
        };
        let origin = origin.to_str().unwrap_or("").to_ascii_lowercase();
        let own = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| {
                let h = h.to_ascii_lowercase();
                origin == format!("http://{h}") || origin == format!("https://{h}")
            });
        if own {
            Source::Same
        } else if self.cors.contains(&origin) {
            Source::Named
        } else if self.cors.iter().any(|c| c == "*") {
            Source::Anyone
        } else {
            Source::Foreign
        }
    }

    /// Whether the request may write: 403 for a page of an origin not let in to write (or a
    /// server beyond loopback without a token), 401 without the token when there is one.
    pub fn may_write(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match self.source(headers) {
            Source::NoOrigin | Source::Same | Source::Named => {}
            Source::Anyone | Source::Foreign => {
                let origin = headers
                    .get(header::ORIGIN)
                    .and_then(|o| o.to_str().ok())
                    .unwrap_or("?");
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "a page of origin {origin} may not write to this store; \
                         `nearflow serve --cors {origin}` lets it"
                    ),
                ));
            }
        }
        match &self.write_token {
            Some(token) => {
                let given = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::trim);
                match given {
                    Some(g) if same_bytes(g.as_bytes(), token.as_bytes()) => Ok(()),
                    Some(_) => Err(ApiError::new(
                        StatusCode::FORBIDDEN,
                        "the bearer token is not this server's write token",
                    )),
                    None => Err(ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "a write needs the server's token: send Authorization: Bearer TOKEN",
                    )),
                }
            }
            None if !self.is_loopback() => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this server listens beyond loopback without a write token, so it takes no \
                 writes; start it with --write-token-file FILE",
            )),
            None => Ok(()),
        }
    }

    /// The answer to a CORS preflight (`OPTIONS` with `Origin`): 204 with what the origin may
    /// send, or 403 for an origin not let in.
    pub fn preflight(&self, headers: &HeaderMap) -> Result<HeaderMap, ApiError> {
        let methods = match self.source(headers) {
            Source::Same | Source::Named => "GET, HEAD, POST, PUT, DELETE, OPTIONS",
            Source::Anyone => "GET, HEAD, POST, OPTIONS",
            Source::NoOrigin => return Ok(HeaderMap::new()),
            Source::Foreign => return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this server lets no page of that origin read it (`nearflow serve --cors ORIGIN`)",
            )),
        };
        let mut h = self.cors_headers(headers);
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(methods),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("Content-Type, Accept, Authorization"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        Ok(h)
    }

    /// The CORS headers of a response to this request: the origin echoed when it is let in
    /// (`*` for every page when [`Access::cors`] says so), and `Vary: Origin` whenever the
    /// answer depends on it.
    pub fn cors_headers(&self, headers: &HeaderMap) -> HeaderMap {
        let mut h = HeaderMap::new();
        if self.cors.is_empty() {
            return h;
        }
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
        match self.source(headers) {
            Source::Named | Source::Same => {
                if let Some(o) = headers.get(header::ORIGIN) {
                    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o.clone());
                }
            }
            Source::Anyone => {
                h.insert(
                    header::ACCESS_CONTROL_ALLOW_ORIGIN,
                    HeaderValue::from_static("*"),
                );
            }
            Source::NoOrigin | Source::Foreign => {}
        }
        h
    }
}

/// The name part of a `Host` header (`[::1]:7878` → `[::1]`, `localhost:80` → `localhost`).
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_inclusive(']').next().unwrap_or(host);
    }
    host.rsplit_once(':').map_or(host, |(n, _)| n)
}

/// Equal bytes, compared in time that does not depend on where they differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), HeaderValue::from_str(v).unwrap()))
            .collect()
    }

    #[test]
    fn by_default_only_the_endpoints_own_page_and_non_browsers_write() {
        let a = Access::default();
        let ok = |h: &[(header::HeaderName, &str)]| a.may_write(&headers(h)).is_ok();
        assert!(ok(&[]));
        assert!(ok(&[
            (header::HOST, "localhost:7878"),
            (header::ORIGIN, "http://localhost:7878")
        ]));
        assert!(!ok(&[
            (header::HOST, "localhost:7878"),
            (header::ORIGIN, "http://evil.example")
        ]));
        assert!(a
            .cors_headers(&headers(&[(header::ORIGIN, "http://evil.example")]))
            .is_empty());
        for host in ["evil.example:7878", "evil.example", "10.0.0.1:7878"] {
            let e = a.check_host(&headers(&[(header::HOST, host)])).unwrap_err();
            assert_eq!(e.status, StatusCode::FORBIDDEN, "{host}");
        }
        for host in ["localhost:7878", "127.0.0.1", "[::1]:7878", "a.localhost"] {
            a.check_host(&headers(&[(header::HOST, host)])).unwrap();
        }
    }

    #[test]
    fn named_origins_read_and_write_a_star_only_reads_and_tokens_are_checked() {
        let a = Access {
            cors: vec!["http://app.example".into(), "*".into()],
            write_token: Some("s3cret-token-of-the-server".into()),
            bind: Some("0.0.0.0:7878".parse().unwrap()),
            hosts: Vec::new(),
        };
        let app = headers(&[(header::ORIGIN, "http://app.example")]);
        let other = headers(&[(header::ORIGIN, "http://other.example")]);
        assert_eq!(
            a.cors_headers(&app)[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "http://app.example"
        );
        assert_eq!(
            a.cors_headers(&other)[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "*"
        );
        assert_eq!(
            a.may_write(&other).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            a.may_write(&app).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        let mut with = app.clone();
        with.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret-token-of-the-server"),
        );
        a.may_write(&with).unwrap();
        with.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert_eq!(
            a.may_write(&with).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
        // Beyond loopback, no Host check; without a token, no writes at all.
        a.check_host(&headers(&[(header::HOST, "db.example")]))
            .unwrap();
        let open = Access {
            write_token: None,
            ..a
        };
        assert_eq!(
            open.may_write(&HeaderMap::new()).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
    }

    #[test]
    fn origins_are_checked_when_given() {
        assert_eq!(
            Access::check_origin("http://Localhost:3000/").unwrap(),
            "http://localhost:3000"
        );
        for bad in ["localhost:3000", "http://", "http://a/b", "ftp://a"] {
            assert!(Access::check_origin(bad).is_err(), "{bad}");
        }
    }
}
