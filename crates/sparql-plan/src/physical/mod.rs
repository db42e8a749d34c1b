//! The physical plan and the planner that makes it from the logical algebra when the query
//! meets a store: terms become the store's ids here (a constant the store lacks makes its
//! pattern match nothing), the dataset's graphs become graph ids, and the planner chooses join
//! order, join algorithms and parallelism from the store's statistics.
//!
//! A basic graph pattern is ordered greedily: start from the pattern with the fewest matches
//! (counted exactly by binary search), then repeatedly add the connected pattern whose join is
//! estimated smallest, joined by an **index join** (a lookup per input row) when the input is
//! small against the pattern, by a **merge join** when both sides are index scans of one graph
//! sorted on a shared variable (Q4's `?journal`), otherwise by a **hash join** on the shared
//! variables. Filter conjuncts go where their variables are first all bound; `?a = ?b` across
//! two unconnected parts (Q5a, Q12a) becomes a hash join on a *value key*
//! ([`value_key`](super::expr::value_key): terms that may be `=` share a key) with the `=` kept as
//! a residual check, so it is exact for every literal; an equality between the two sides
//! inside an OPTIONAL's filter becomes its key the same way.
//!
//! **First rows.** Under a `LIMIT` or an `ASK` ([`Planner::needed`]) a basic graph pattern is
//! planned to read the share of its inputs the limit needs, so a large input joins by index
//! lookups too, and kept so when the whole plan under the slice passes rows on as they come
//! ([`Phys::first_rows`]); the query then runs with small first packets that double to the full
//! size (`Prepared` sets `PlanBuilder::first_packet_bytes`), and the slice stops the rest after
//! the first few.
//!
//! **Parallelism is part of the plan** (as DataFusion's `EnforceDistribution` makes it): every
//! node says how its output is partitioned ([`Partitioning`]: one stream, `n` streams, or `n`
//! streams routed by the hash of key columns), and the planner inserts an [`Op::Exchange`]
//! where an operator needs another partitioning than its input has — a hash join both inputs
//! hash-partitioned on its keys (an input already partitioned so, by a join on the same keys
//! below, is not moved again), DISTINCT and GROUP BY on their keys, a sort and a slice one
//! stream. Row-by-row operators (filters, BINDs, projections, index joins) run once per
//! stream of their input. `--explain` shows every exchange.
//!
//! ## Files
//!
//! - `plan.rs` — the plan's types: operators, slots, partitionings, counters; what a plan
//!   yields and in which order.
//! - `planner.rs` — the planner: ids of terms and graphs, one plan node per algebra node.
//! - `join_order.rs` — a basic graph pattern's join order and algorithms, filter placement,
//!   the estimates they use.
//! - `lookup.rs` — OPTIONAL, EXISTS, NOT EXISTS, MINUS and mark joins from the small side: the
//!   other side's patterns looked up per row where that reads less than a hash table of them.
//! - `distribution.rs` — how many streams a node runs and the exchanges between partitionings.
//! - `scan_ranges.rs` — the streams a scan reads.

mod distribution;
mod join_order;
mod lookup;
mod plan;
mod planner;
mod scan_ranges;

pub use distribution::PAR_MIN_ROWS;
pub use join_order::sorted_on;
pub use plan::*;
pub use planner::{dataset_ids, Planner};
pub use scan_ranges::{graphs_of, scan_pieces};
