//! # nearflow-rdf — an in-memory RDF store and a parallel SPARQL engine on the dataflow engine
//!
//! The workload of the LAS paper's experiments (`../shared/papers/las-scheduler-and-numa-allocator.txt`
//! §6.1: SP²Bench queries evaluated by the Bobox engine), built on this project's pieces:
//!
//! - [`load`]: Turtle, N-Triples and N-Quads through `oxttl`, gzip by magic bytes, errors with
//!   file, line and column, nothing loaded on an error;
//! - [`dict`]: terms dictionary-encoded to dense 32-bit ids (RDF 1.1: `"x"^^xsd:string` is `"x"`;
//!   lexical forms kept as written);
//! - [`store`]: three sorted permutations (SPO, POS, OSP), column-wise, in
//!   [`nearflow_split::SplittableData`] partitions, one per NUMA node, and per-predicate
//!   statistics for the planner;
//! - [`snapshot`]: a binary image of the store that opens by reading it;
//! - [`sparql`]: SPARQL 1.1 queries parsed by `spargebra`, planned by cost, run as one flow plan
//!   (one runtime request) each, results streamed out through `sparesults`.
//!
//! Files: `term.rs`, `dict.rs`, `load.rs`, `store.rs`, `snapshot.rs`, `sparql/` (`algebra.rs`
//! translation, `expr.rs` FILTER semantics, `plan.rs` the planner, `exec.rs` the flow operators,
//! `results.rs` output formats).

pub mod dict;
pub mod load;
pub mod snapshot;
pub mod sparql;
pub mod store;
pub mod term;

pub use store::Store;
pub use term::{Id, Term, TermRef};
