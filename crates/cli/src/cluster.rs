//! What the commands call of `nearflow-cluster`. With the `cluster` feature, the crate itself;
//! without it (the default: the crate links DataFusion, whose build is longer than the rest
//! of nearflow's), the same names, whose entry points fail with how to build them in, so that
//! `nearflow worker` and `--cluster` say why they cannot run instead of being unknown flags.

#[cfg(feature = "cluster")]
pub use nearflow_cluster::{serve_worker, worker_urls, Coordinator, ShardServer};

#[cfg(not(feature = "cluster"))]
pub use absent::{serve_worker, worker_urls, Coordinator, ShardServer};

#[cfg(not(feature = "cluster"))]
mod absent {
    use std::net::SocketAddr;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use anyhow::{bail, Result};
    use nearflow_rdf::index::Store;
    use nearflow_rdf::shard::Manifest;
    use nearflow_sparql::{Options, Prepared, Query, QueryError};
    use nearflow_topo::Machine;

    const NOT_BUILT: &str = "this nearflow was built without the cluster: build it with \
        `cargo install --path crates/cli --features cluster` (or `cargo build --release -p \
        nearflow-cli --features cluster`), which also builds DataFusion";

    /// The workers' addresses: never read, the cluster is not built in.
    pub fn worker_urls(_list: &str) -> Result<Vec<String>> {
        bail!(NOT_BUILT)
    }

    /// A shard server, which this build cannot make.
    pub enum ShardServer {}

    impl ShardServer {
        pub fn open(_dir: &Path, _machine: Machine, _options: Options) -> Result<Self> {
            bail!(NOT_BUILT)
        }

        pub fn manifest(&self) -> &Manifest {
            match *self {}
        }
    }

    pub fn serve_worker(
        server: Arc<ShardServer>,
        _addr: SocketAddr,
        _listening: impl FnOnce(SocketAddr),
    ) -> Result<()> {
        match *server {}
    }

    /// What a coordinator fetched for a query.
    pub struct Fetched {
        pub fragments: usize,
        pub rows: u64,
        pub elapsed: Duration,
    }

    /// A coordinator, which this build cannot make.
    pub enum Coordinator {}

    impl Coordinator {
        pub fn connect(_dir: &Path, _workers: Vec<String>, _machine: &Machine) -> Result<Self> {
            bail!(NOT_BUILT)
        }

        pub fn store(&self) -> &Arc<Store> {
            match *self {}
        }

        pub fn manifest(&self) -> &Manifest {
            match *self {}
        }

        pub fn dir(&self) -> &Path {
            match *self {}
        }

        pub fn prepare(
            &self,
            _text: &str,
            _options: &Options,
        ) -> Result<(Prepared, Fetched), QueryError> {
            match *self {}
        }

        pub fn prepare_query(
            &self,
            _query: Arc<Query>,
            _options: &Options,
        ) -> Result<(Prepared, Fetched), QueryError> {
            match *self {}
        }
    }
}
