//! `nearflow worker`: serves a sharded store's shards to a cluster's coordinator
//! (`nearflow sparql --cluster`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use nearflow_sparql::Options;

use crate::args::TopoArgs;

#[derive(Args, Debug, Clone)]
pub struct WorkerCmd {
    /// The sharded store's folder (`nearflow load … --save DIR --shards N`): the worker opens
    /// each shard the coordinator sends it a task of, on first use.
    pub dir: PathBuf,
    /// The address to listen on (loopback by default: a cluster's workers are reached from
    /// its coordinator, never from a web page; give another address only inside a trusted
    /// network). Port 0 takes a free port, printed on stderr.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7101")]
    pub listen: SocketAddr,
    /// Stop a fragment when its operators would hold more than this (e.g. 512MiB, 2G).
    /// Default: three quarters of this host's memory.
    #[arg(long, value_name = "SIZE", value_parser = crate::args::bytes)]
    pub memory_limit: Option<usize>,
    #[command(flatten)]
    pub topo: TopoArgs,
}

pub fn worker(cmd: &WorkerCmd) -> Result<()> {
    let machine = cmd.topo.load()?;
    let standard = Options::standard();
    let options = Options {
        memory_limit: cmd.memory_limit.or(standard.memory_limit),
        ..standard
    };
    crate::cluster::serve_worker(
        &cmd.dir,
        machine,
        options,
        cmd.listen,
        |addr, shards, by| {
            eprintln!(
            "worker of {shards} shards by {by} listening on {addr} (Ctrl-C or SIGTERM stops it)"
        );
        },
    )
    .with_context(|| format!("worker on {}", cmd.listen))?;
    Ok(())
}
