//! # nearflow-rdf — an RDF database: files in, a durable store, updates that last
//!
//! The store itself — terms, the dictionary, the sorted permutations, versions, the snapshot
//! formats — is the crate below, `nearflow-store`, whose modules this crate re-exports
//! ([`term`], [`dict`], [`store`], [`snapshot`], [`delta`], [`index`], …), so a program names
//! one crate. This one adds what moves data in and keeps it:
//!
//! - [`load`]: Turtle, N-Triples, N-Quads and TriG through `oxttl`, RDF/XML through
//!   `oxrdfxml`; named graphs (a quads file's own, or a triples file loaded into one); gzip by
//!   magic bytes, errors with file, line and column, nothing loaded on an error;
//! - [`bulk`]: loading files straight into a snapshot in bounded memory (sorted runs spilled
//!   to disk, merged);
//! - [`db`]: the durable store — a snapshot (and, for a large store, a delta segment beside
//!   it) and a synced log of updates, recovery, checkpoints, one writer at a time;
//! - [`open`]: opening a store as a program does, reporting its progress to a caller's
//!   [`open::Report`].
//!
//! The SPARQL engine over it is the crate `nearflow-sparql`, which reads the store through
//! [`Store`]'s scans and statistics and the dictionary.
//!
//! ## Files
//!
//! - `load/` — parsing (Turtle, N-Triples, N-Quads, gzip), progress, errors with positions.
//! - `bulk/` — a load in bounded memory: runs spilled, terms merged into ids in key order,
//!   quads sorted and merged into the snapshot.
//! - `check.rs` — checking a store on disk (every checksum, the segment, the log; a
//!   cluster's shards), after a salvage when asked.
//! - `log.rs` — the update log's format: records framed with checksums, torn tails told from
//!   damage.
//! - `db/` — the update log, recovery, the writer, the background merge and checkpoints.
//! - `open.rs` — opening a store as a program does: files or a snapshot, with progress, then
//!   placed over the NUMA nodes.

pub mod bulk;
pub mod check;
pub mod db;
pub mod load;
mod log;
pub mod open;

pub use nearflow_store::{
    base, delta, dict, health, index, layout, replica, shard, shared, snapshot, store, term,
};
pub use nearflow_store::{Id, Quad, Store, Term, TermCow, TermRef, DEFAULT_GRAPH};
