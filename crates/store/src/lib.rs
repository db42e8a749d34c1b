//! # nearflow-store — an RDF quad store on SplittableData
//!
//! The store the SPARQL engine reads (the LAS paper's workload,
//! `../shared/papers/las-scheduler-and-numa-allocator.txt` §6.1: SP²Bench queries evaluated by
//! the Bobox engine): terms and their dictionary, the sorted permutations, versions, and the
//! files a store is kept in. Loading files, the update log and opening a store as a program
//! does are the crate above, `nearflow-rdf`, which re-exports every module here.
//!
//! - [`dict`]: terms dictionary-encoded to dense 32-bit ids (RDF 1.1: `"x"^^xsd:string` is `"x"`;
//!   lexical forms kept as written);
//! - [`store`]: the default graph and the named graphs in three sorted permutations (SPO, POS,
//!   OSP), graph by graph, column-wise, in [`nearflow_split::SplittableData`] partitions, one per
//!   NUMA node; each graph is a run of rows, so the graph column is a table of runs; and
//!   per-predicate statistics for the planner;
//! - [`snapshot`]: a binary image of the store that opens by mapping it (its indexes packed
//!   in blocks and its terms read in place, each chunk checked the first time it is read);
//! - [`delta`]: versions of the store — an update makes a new one that shares the sorted
//!   indexes and keeps its changes in a sorted delta beside them (snapshot isolation, no lock on
//!   the read path);
//! - [`index`]: the seam through which the query engine reads a store.
//!
//! ## Files
//!
//! - `term.rs` — [`Term`], [`TermRef`] and [`TermCow`], their key encoding and N-Triples
//!   display.
//! - `dict.rs` — the dictionary: terms to dense ids and back.
//! - `coded.rs` — term keys front-coded in blocks, as format 5 stores them.
//! - `layout.rs` — the indexes' layout: permutations, a partition's rows (plain columns, or
//!   packed blocks), statistics, and building them from sorted quads.
//! - `blocks.rs` — key columns packed in blocks (frame of reference, bit-packed), read in place
//!   by row, each chunk checked on its first read.
//! - `health.rs` — what a mapped store's checks found, and which chunks have been checked.
//! - `base.rs` — the sorted indexes a store's versions share.
//! - `store.rs` — [`Store`]: one version (dictionary, base, delta), counts and matches, its
//!   per-node copies.
//! - `edit.rs` — making versions: edits, the merge, the rebase.
//! - `index.rs` — [`index::QuadIndex`]: the seam through which the query engine reads a store.
//! - `snapshot/` — the store's files, one format per file: `packed.rs` (format 5, written,
//!   and 4: packed indexes, front-coded terms in 5, a checksum per chunk checked as it is
//!   read), `mapped.rs` (format 3: plain columns, a checksum per section checked in the
//!   background), `whole.rs` (formats 1 and 2, read whole), what they share (`common.rs`),
//!   saving and opening whichever it is (`mod.rs`), and a large store's delta written beside
//!   its snapshot (`segment.rs`).
//! - `replica.rs` — per-node copies of the permutations, and a partition as read on a node.
//! - `shared.rs` — a slice owned or mapped, the columns' and the terms' storage.
//! - `delta.rs` — a version's delta: its sorted rows in each order, and merging them into a
//!   scan.
//! - `shard.rs` — a store split into shards for a cluster: stores in one folder and the
//!   manifest naming them.

pub mod base;
mod blocks;
mod coded;
pub mod delta;
pub mod dict;
mod edit;
pub mod health;
pub mod index;
pub mod layout;
pub mod replica;
pub mod shard;
pub mod shared;
pub mod snapshot;
pub mod store;
pub mod term;

pub use store::{Quad, Store, DEFAULT_GRAPH};
pub use term::{Id, Term, TermCow, TermRef};
