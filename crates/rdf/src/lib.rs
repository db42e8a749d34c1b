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
//! ## Files
//!
//! - `term.rs` — [`Term`] and [`TermRef`], their key encoding and N-Triples display.
//! - `dict.rs` — the dictionary: terms to dense ids and back.
//! - `load.rs` — parsing (Turtle, N-Triples, N-Quads, gzip), progress, errors with positions.
//! - `store.rs` — [`Store`]: the permutations in partitions, scans, statistics.
//! - `snapshot.rs` — the binary snapshot: save, open, validation.
//! - `sparql/mod.rs` — preparing, running, streaming and explaining a query.
//! - `sparql/algebra.rs` — `spargebra`'s algebra to ours; unsupported features refused by name.
//! - `sparql/expr.rs` — FILTER semantics: values, comparison, promotion, functions.
//! - `sparql/plan.rs` — the cost-based planner and its rewrites.
//! - `sparql/exec.rs` — the flow operators a query plan is built from.
//! - `sparql/results.rs` — output formats (`sparesults`, the terminal table, N-Triples/Turtle).

pub mod dict;
pub mod load;
pub mod snapshot;
pub mod sparql;
pub mod store;
pub mod term;

pub use store::Store;
pub use term::{Id, Term, TermRef};
