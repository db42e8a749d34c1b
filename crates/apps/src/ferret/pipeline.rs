//! Ferret's pipeline as a plan on the dataflow engine (§2.3: "organized as a pipeline; pipeline
//! stages are interconnected with queues"): read a query → extract (normalise) its features →
//! query the database for candidates → rank them → output.
//!
//! The query stage calls the plain database from inside an operator (an operator cannot wait
//! for a dispatch); the split database is driven by requests in `nearflow bench split`, where
//! each query is one dispatch.

use std::sync::Arc;

use nearflow_flow::{PlanBuilder, Sink};

use super::lsh::{self, Hit};
use super::{normalise, PlainDb};

/// Candidates the query stage passes to the rank stage, per result kept.
pub const CANDIDATES_PER_RESULT: usize = 4;

/// Adds the pipeline for `queries` (raw vectors) to `b`: each output is `(query number, its k
/// nearest)`. The database must hold features normalised to `scale` ([`normalise`]).
pub fn plan(
    b: &mut PlanBuilder,
    db: PlainDb,
    queries: Arc<Vec<Vec<f32>>>,
    k: usize,
    scale: f32,
) -> Sink<(u64, Vec<Hit>)> {
    let n = queries.len() as u64;
    let read = b.generate(n, move |i| (i, queries[i as usize].clone()));
    let features = b.map(read, move |(i, mut v): (u64, Vec<f32>)| {
        normalise(&mut v, scale);
        (i, v)
    });
    let candidates = b.map(features, move |(i, v): (u64, Vec<f32>)| {
        (i, db.query(&v, k * CANDIDATES_PER_RESULT, None))
    });
    let ranked = b.map(candidates, move |(i, c): (u64, Vec<Hit>)| {
        (i, lsh::top_k(c, k))
    });
    b.collect(ranked)
}
