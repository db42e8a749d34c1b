//! The placement check of a replicated store (`nearflow check placement`, and so the two-node
//! QEMU guest): the store of a Turtle document, built for this host and replicated
//! ([`Store::replicate`](nearflow_rdf::Store::replicate)); every replica's pages must lie on the node it was built for, and a
//! query on a LAS runtime bound by core group must read no index row from another node's memory
//! ([`Prepared::index_reads`](crate::Prepared::index_reads)). On one node nothing is copied,
//! which the check says.

use std::path::Path;
use std::sync::Arc;

use nearflow_alloc::checks::Check;
use nearflow_rdf::index::Replication;
use nearflow_rdf::load;

/// Runs the check on `host` over the Turtle document `doc` with the SELECT query `query` (the
/// CLI passes a generated SP²Bench document and its q2: scans, hash joins and an index join).
pub fn replicas_on_their_nodes(host: &nearflow_topo::Machine, doc: &[u8], query: &str) -> Check {
    let name = "store replicas are on their nodes and a query reads its workers' own".to_string();
    match check_replicas(host, doc, query) {
        Ok((ok, detail)) => Check { name, ok, detail },
        Err(e) => Check {
            name,
            ok: false,
            detail: e.to_string(),
        },
    }
}

fn check_replicas(
    host: &nearflow_topo::Machine,
    doc: &[u8],
    query: &str,
) -> Result<(bool, String), Box<dyn std::error::Error>> {
    let mut loaded = load::Loaded::default();
    load::load_reader(
        &mut loaded,
        Path::new("generated.n3"),
        load::Format::Turtle,
        doc,
        "",
    )?;
    let store = Arc::new(loaded.into_store(host)?);
    let (nodes, bytes) = match store.replicate()? {
        Replication::Built { nodes, bytes } => (nodes, bytes),
        Replication::OneNode => {
            return Ok((
                true,
                "one NUMA node: its partitions are the whole indexes, nothing to replicate".into(),
            ))
        }
        Replication::Already => return Err("a fresh store was already replicated".into()),
    };
    let (mut ok, mut detail) = store.replicas_on_their_nodes()?;
    detail.insert(
        0,
        format!(
            "{} quads, {nodes} replicas of 3 permutations, {:.1} MiB",
            store.len(),
            bytes as f64 / (1 << 20) as f64
        ),
    );
    let rt = nearflow_rt::Runtime::builder(host.clone())
        .policy(nearflow_policy::PolicyKind::Las)
        .pinning(nearflow_rt::Pinning::Group)
        .build()?;
    let q = crate::prepare(&store, query, &Default::default())?;
    let rows = q.run_collect(&rt)?.rows.len();
    let (reads, remote) = q.index_reads();
    ok &= reads > 0 && remote == 0;
    detail.push(format!(
        "the query: {rows} rows, {reads} index reads, {remote} from another node's memory"
    ));
    Ok((ok, detail.join("; ")))
}
