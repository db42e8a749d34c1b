//! The cluster as the commands reach it: `nearflow-cluster` with the `cluster` feature (it links
//! DataFusion, whose build is longer than the rest of nearflow's); without it, connecting to
//! workers and serving as one fail with how to build it in, so that `nearflow worker` and
//! `--cluster` say why they cannot run instead of being unknown flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use nearflow_rdf::index::Store;
use nearflow_sparql::{Options, QueryPlanner};
use nearflow_topo::Machine;

/// A coordinator connected to a sharded store's workers, as the commands use it.
pub struct Cluster {
    /// Plans each query: its fragments run on the workers.
    pub planner: Arc<dyn QueryPlanner>,
    /// The store whose dictionary gives the answers' terms (a shard, read-only).
    pub store: Arc<Store>,
    /// The sharded store's folder.
    pub dir: PathBuf,
    /// The triples of all its shards.
    pub triples: u64,
}

/// Connects to the workers `list` (`HOST:PORT,…`) of the sharded store in `dir`.
pub fn connect(dir: &Path, list: &str, machine: &Machine) -> Result<Cluster> {
    #[cfg(feature = "cluster")]
    {
        let c = nearflow_cluster::Coordinator::connect(
            dir,
            nearflow_cluster::worker_urls(list)?,
            machine,
        )?;
        Ok(Cluster {
            store: c.store().clone(),
            triples: c.manifest().total(),
            dir: dir.to_owned(),
            planner: Arc::new(c),
        })
    }
    #[cfg(not(feature = "cluster"))]
    {
        let _ = (dir, list, machine);
        anyhow::bail!(NOT_BUILT)
    }
}

/// Serves the shards of the sharded store in `dir` to a coordinator on `addr` until stopped;
/// `listening` is told the address and the sharding (shards, and by what) once it listens.
pub fn serve_worker(
    dir: &Path,
    machine: Machine,
    options: Options,
    addr: SocketAddr,
    listening: impl FnOnce(SocketAddr, usize, &str),
) -> Result<()> {
    #[cfg(feature = "cluster")]
    {
        use anyhow::Context;
        let server = Arc::new(
            nearflow_cluster::ShardServer::open(dir, machine, options)
                .with_context(|| format!("{}", dir.display()))?,
        );
        let m = server.manifest();
        let (shards, by) = (m.sharding.shards, m.sharding.by.name());
        nearflow_cluster::serve_worker(server, addr, move |a| listening(a, shards, by))?;
        Ok(())
    }
    #[cfg(not(feature = "cluster"))]
    {
        let _ = (dir, machine, options, addr, listening);
        anyhow::bail!(NOT_BUILT)
    }
}

#[cfg(not(feature = "cluster"))]
const NOT_BUILT: &str = "this nearflow was built without the cluster: build it with \
    `cargo install --path crates/cli --features cluster` (or `cargo build --release -p \
    nearflow-cli --features cluster`), which also builds DataFusion";
