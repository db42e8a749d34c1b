//! Shared by the endpoint's tests: URL encoding, and a server on a loopback port.
#![allow(dead_code)]

use std::sync::Arc;

use nearflow_serve::Endpoint;

/// `s` percent-encoded for a URL's query (the endpoint's own encoder).
pub fn enc(s: &str) -> String {
    nearflow_serve::protocol::encode(s)
}

/// A store of `text` (Turtle) on `machine`.
pub fn store_of(text: &str, machine: &nearflow_topo::Machine) -> nearflow_rdf::Store {
    let mut l = nearflow_rdf::load::Loaded::default();
    nearflow_rdf::load::load_reader(
        &mut l,
        "d.ttl".as_ref(),
        nearflow_rdf::load::Format::Turtle,
        text.as_bytes(),
        "",
    )
    .unwrap();
    l.into_store(machine).unwrap()
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
