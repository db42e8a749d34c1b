//! Shared by the endpoint's tests: URL encoding, and a server on a loopback port.
#![allow(dead_code)]

use std::sync::Arc;

use nearflow_serve::Endpoint;

/// `s` percent-encoded for a URL's query (the endpoint's own encoder).
pub fn enc(s: &str) -> String {
    nearflow_serve::protocol::encode(s)
}

/// `ep` served on a loopback port by its own one-thread I/O runtime (dropping the runtime
/// stops it).
pub fn start(ep: Arc<Endpoint>) -> (std::net::SocketAddr, tokio::runtime::Runtime) {
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = io
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    io.spawn(nearflow_serve::serve(listener, ep, std::future::pending()));
    (addr, io)
}
