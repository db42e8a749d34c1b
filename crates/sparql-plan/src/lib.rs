//! # nearflow-sparql-plan — a query's physical plan against a store
//!
//! Stage 4's first half: when a [`Query`] (stages 1–3, the
//! crate `nearflow-sparql-algebra`) meets a store, [`physical::Planner`] maps its terms to the
//! store's ids and chooses join orders, access paths (a scan, a lookup per row, a count from
//! the indexes) and exchanges from the store's statistics, reading the store through
//! `nearflow-store`'s seam only. Lowering the plan to flow operators and running it is the
//! crate `nearflow-sparql`, which re-exports both modules here. The planner's plan-shape tests
//! are this crate's `tests/plans.rs`.
//!
//! ## Files
//!
//! - `physical/` — the plan's types and the planner (its own module docs list its files).
//! - `fragment.rs` — a query cut into the fragments each shard of a sharded store answers
//!   alone, and the plan of the rest over their rows.

pub mod fragment;
pub mod physical;

use nearflow_sparql_algebra::{algebra, deeper, expr, path, rewrite, Query, QueryError};
