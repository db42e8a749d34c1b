//! The HTTP edge: connections and request bodies, bounded so that slow or malformed clients
//! cannot hold the server.
//!
//! - **Connections** are at most [`Config::max_connections`](crate::Config). When a new one
//!   comes at the cap, the oldest connection that is not being answered (idle between
//!   requests, or still sending its headers or body) is closed to make room; when every one is
//!   being answered, the new one is closed at once.
//! - **A request's body** is refused before any of it is read when its declared length is
//!   over the limit (413, and no `100 Continue` is sent), when it is encoded (`Content-Encoding`
//!   other than `identity`: 415) or when it expects anything but `100-continue` (417); and it
//!   must arrive whole within [`Config::body_timeout`](crate::Config) (408, and the connection
//!   is closed), however slowly it trickles.
//! - **HTTP/2 with prior knowledge** is answered with HTTP/2's own refusal (a GOAWAY frame with
//!   `HTTP_1_1_REQUIRED`, RFC 9113 §9.2.1), so that such a client says why instead of seeing a
//!   connection dropped without a word.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::io::AsyncWriteExt;

use crate::ApiError;

/// One connection's state, shared by its task, the accept loop and its requests.
#[derive(Default)]
pub(crate) struct Conn {
    /// Requests of this connection being answered (read whole, answer not yet sent).
    busy: AtomicUsize,
    /// The connection's task has ended.
    done: AtomicBool,
    /// Raised to make the connection's task close it.
    close: tokio::sync::Notify,
}

impl Conn {
    /// Marks one request of `conn` as being answered until the returned guard drops.
    pub(crate) fn answering(conn: Option<&Arc<Conn>>) -> Busy {
        if let Some(c) = conn {
            c.busy.fetch_add(1, Ordering::SeqCst);
        }
        Busy(conn.cloned())
    }

    /// Waits until the accept loop asks this connection to close.
    pub(crate) async fn closing(&self) {
        self.close.notified().await
    }

    /// The connection's task has ended.
    pub(crate) fn end(&self) {
        self.done.store(true, Ordering::SeqCst);
    }
}

/// A request being answered; dropped with the last of its response body.
pub(crate) struct Busy(Option<Arc<Conn>>);

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(c) = &self.0 {
            c.busy.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The open connections, oldest first.
pub(crate) struct Table {
    open: VecDeque<Arc<Conn>>,
    cap: usize,
}

impl Table {
    pub(crate) fn new(cap: usize) -> Self {
        Table {
            open: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    /// Room for one more connection: at the cap, the oldest one not being answered is asked
    /// to close. `None` when every open connection is being answered (the new one is
    /// refused).
    pub(crate) fn admit(&mut self) -> Option<Arc<Conn>> {
        self.open.retain(|c| !c.done.load(Ordering::SeqCst));
        if self.open.len() >= self.cap {
            let idle = self
                .open
                .iter()
                .position(|c| c.busy.load(Ordering::SeqCst) == 0)?;
            let c = self.open.remove(idle).expect("a position in the table");
            c.close.notify_one();
            tracing::info!("at the connection cap: the oldest idle connection is closed");
        }
        let c = Arc::new(Conn::default());
        self.open.push_back(c.clone());
        Some(c)
    }
}

/// A response body that keeps its request counted as being answered until it is sent (or
/// dropped).
pub(crate) struct BusyBody {
    inner: Body,
    _busy: Busy,
}

impl BusyBody {
    /// `r` with its body counted by `busy`.
    pub(crate) fn wrap(r: Response, busy: Busy) -> Response {
        r.map(|inner| Body::new(BusyBody { inner, _busy: busy }))
    }
}

impl http_body::Body for BusyBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Reads a request's body within the edge's bounds: the declared length, the encoding and the
/// expectation checked before any of it is read, the whole of it within `timeout` and `limit`
/// (408 past it: [`refusal`] closes the connection).
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ApiError> {
    let refuse = |status: StatusCode, message: String| Err(ApiError::new(status, message));
    if let Some(e) = headers.get(header::EXPECT) {
        if !e.as_bytes().eq_ignore_ascii_case(b"100-continue") {
            return refuse(
                StatusCode::EXPECTATION_FAILED,
                format!(
                    "the request expects {:?}; this server meets only 100-continue",
                    String::from_utf8_lossy(e.as_bytes())
                ),
            );
        }
    }
    if let Some(n) = headers.get(header::CONTENT_LENGTH) {
        match n.to_str().ok().and_then(|n| n.parse::<u64>().ok()) {
            Some(n) if n > limit as u64 => {
                return refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request's body is {n} bytes; this server takes at most {limit}"),
                )
            }
            Some(_) => {}
            None => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "the Content-Length is not a number".into(),
                )
            }
        }
    }
    for coding in headers.get_all(header::CONTENT_ENCODING) {
        let c = coding.to_str().unwrap_or("?").trim();
        if !c.eq_ignore_ascii_case("identity") {
            return refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("the request's body is encoded as {c:?}; send it unencoded"),
            );
        }
    }
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => {
            let too_long = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if too_long {
                refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request's body is over {limit} bytes"),
                )
            } else {
                refuse(
                    StatusCode::BAD_REQUEST,
                    format!("the request's body could not be read: {e}"),
                )
            }
        }
        Err(_) => refuse(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request's body did not arrive within {} s",
                timeout.as_secs_f64()
            ),
        ),
    }
}

/// The response to a body [`read_body`] refused; after a 408 the connection is closed (what
/// is left of a body that stalled cannot be told from the next request).
pub(crate) fn refusal(e: ApiError) -> Response {
    let close = e.status == StatusCode::REQUEST_TIMEOUT;
    let mut r = e.into_response();
    if close {
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// The client preface of HTTP/2 with prior knowledge.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How a connection opens.
pub(crate) enum Opening {
    /// With HTTP/2's preface.
    Http2,
    /// With anything else (an HTTP/1 request never begins with `PRI `).
    Http1,
    /// With nothing within the wait (or the peer went away): it is closed.
    Silent,
}

/// How the connection opens, waiting at most `wait` for its first bytes.
pub(crate) async fn opening(tcp: &tokio::net::TcpStream, wait: Duration) -> Opening {
    let mut buf = [0u8; 24];
    match tokio::time::timeout(wait, tcp.peek(&mut buf)).await {
        Ok(Ok(n)) if n >= 4 && H2_PREFACE.starts_with(&buf[..n.min(H2_PREFACE.len())]) => {
            Opening::Http2
        }
        Ok(Ok(n)) if n > 0 => Opening::Http1,
        _ => Opening::Silent,
    }
}

/// Answers an HTTP/2 connection with an empty SETTINGS frame and a GOAWAY of error
/// `HTTP_1_1_REQUIRED` (0xd) saying why, then closes it.
pub(crate) async fn refuse_http2(mut tcp: tokio::net::TcpStream) {
    let why = b"nearflow serves HTTP/1.1 only";
    let mut out = vec![0, 0, 0, 0x4, 0, 0, 0, 0, 0];
    let len = (8 + why.len()) as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[0x7, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0xdu32.to_be_bytes());
    out.extend_from_slice(why);
    let _ = tcp.write_all(&out).await;
    let _ = tcp.shutdown().await;
}
