//! The generated plan of the concurrent-plans experiment (001 §6, Fig. 3: "an execution plan
//! of around 170 operators"): a join/sort/aggregate-heavy DAG over generated data.
//!
//! Six blocks, each: two generated sources → filter / map → a parallel hash join (degree 4) →
//! a parallel aggregate by key (degree 4) → a parallel sort (degree 5); blocks are merge-joined
//! in pairs; the three results are united, copied by a broadcast, and end in an aggregate by
//! `key % 64` and a distinct count of keys. [`reference()`] computes the same sequentially.

use std::collections::{BTreeMap, HashMap, HashSet};

use nearflow_flow::{PlanBuilder, Sink, Stream};

/// A row: (key, value).
pub type Row = (u64, u64);

const BLOCKS: u64 = 6;

fn mix(mut x: u64) -> u64 {
    x ^= x >> 31;
    x = x.wrapping_mul(0x7fb5_d329_728e_a185);
    x ^= x >> 27;
    x = x.wrapping_mul(0x81da_def4_bc2d_d44d);
    x ^ (x >> 33)
}

fn a_row(block: u64, j: u64, keys: u64) -> Row {
    (mix(block << 40 | j) % keys, j)
}

fn b_row(block: u64, j: u64, keys: u64) -> Row {
    (mix(0xB << 56 | block << 40 | j) % keys, j * 3)
}

fn keep(r: &Row) -> bool {
    r.1 % 7 != 0
}

/// The sinks of the plan.
#[derive(Debug)]
pub struct GenSinks {
    /// Σ value per `key % 64`.
    pub groups: Sink<(u64, u64)>,
    /// The distinct keys.
    pub keys: Sink<u64>,
}

/// What the plan computes, in a canonical order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenResult {
    /// Σ value per `key % 64`, sorted by group.
    pub groups: Vec<(u64, u64)>,
    /// Number of distinct keys.
    pub distinct_keys: usize,
}

impl GenResult {
    /// A short checksum, equal for equal results.
    pub fn checksum(&self) -> u64 {
        self.groups
            .iter()
            .fold(self.distinct_keys as u64, |acc, &(g, s)| {
                mix(acc ^ mix(g ^ s.rotate_left(7)))
            })
    }
}

/// Builds the plan with `rows` rows per source; returns its sinks.
pub fn build(b: &mut PlanBuilder, rows: u64) -> GenSinks {
    let keys = (rows / 2).max(1);
    let mut blocks: Vec<Stream<Row>> = Vec::new();
    for blk in 0..BLOCKS {
        let a = b.generate(rows, move |j| a_row(blk, j, keys));
        let a = b.filter(a, keep);
        let bb = b.generate(rows / 2, move |j| b_row(blk, j, keys));
        let bb = b.map(bb, |r: Row| (r.0, r.1 + 1));
        let joined = b.par_hash_join(
            a,
            bb,
            Some(4),
            |r: &Row| r.0,
            |r: &Row| r.0,
            |x: &Row, y: &Row| (x.0, x.1 ^ y.1),
        );
        let sums = b.par_group_by(
            joined,
            Some(4),
            |r: &Row| r.0,
            0u64,
            |acc: &mut u64, r: Row| *acc = acc.wrapping_add(r.1),
        );
        let sorted = b.par_sort(sums, Some(5), |r: &Row| r.0);
        blocks.push(sorted);
    }
    let mut pairs = Vec::new();
    for p in blocks.chunks(2) {
        pairs.push(b.merge_join(
            p[0],
            p[1],
            |r: &Row| r.0,
            |r: &Row| r.0,
            |x: &Row, y: &Row| (x.0, x.1.wrapping_add(y.1)),
        ));
    }
    let all = b.union(pairs);
    let copies = b.broadcast(all, 2);
    let groups = b.group_by(
        copies[0],
        |r: &Row| r.0 % 64,
        0u64,
        |acc: &mut u64, r: Row| *acc = acc.wrapping_add(r.1),
    );
    let key_only = b.map(copies[1], |r: Row| r.0);
    let distinct = b.distinct(key_only);
    GenSinks {
        groups: b.collect(groups),
        keys: b.collect(distinct),
    }
}

/// Turns the sinks' contents into a [`GenResult`].
pub fn result(out: &nearflow_flow::PlanOutput, sinks: &GenSinks) -> GenResult {
    let mut groups = out.take(&sinks.groups);
    groups.sort_unstable();
    GenResult {
        groups,
        distinct_keys: out.take(&sinks.keys).len(),
    }
}

/// The same computation, sequentially.
pub fn reference(rows: u64) -> GenResult {
    let keys = (rows / 2).max(1);
    let mut blocks = Vec::new();
    for blk in 0..BLOCKS {
        let mut table: HashMap<u64, Vec<u64>> = HashMap::new();
        for j in 0..rows {
            let r = a_row(blk, j, keys);
            if keep(&r) {
                table.entry(r.0).or_default().push(r.1);
            }
        }
        let mut sums: BTreeMap<u64, u64> = BTreeMap::new();
        for j in 0..rows / 2 {
            let r = b_row(blk, j, keys);
            let v = r.1 + 1;
            for &a in table.get(&r.0).into_iter().flatten() {
                let s = sums.entry(r.0).or_insert(0);
                *s = s.wrapping_add(a ^ v);
            }
        }
        blocks.push(sums);
    }
    let mut groups: BTreeMap<u64, u64> = BTreeMap::new();
    let mut distinct = HashSet::new();
    for p in blocks.chunks(2) {
        for (k, x) in &p[0] {
            if let Some(y) = p[1].get(k) {
                let g = groups.entry(k % 64).or_insert(0);
                *g = g.wrapping_add(x.wrapping_add(*y));
                distinct.insert(*k);
            }
        }
    }
    GenResult {
        groups: groups.into_iter().collect(),
        distinct_keys: distinct.len(),
    }
}

/// One run of the generated plan, as `nearflow run plan` reports it: as JSON (serde) or as
/// text (`Display`).
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// The machine it ran on.
    pub machine: String,
    /// The scheduling policy.
    pub policy: String,
    /// The plan's operators.
    pub operators: usize,
    /// Rows per source.
    pub rows: u64,
    /// The packet size it ran with.
    pub packet_bytes: usize,
    /// The allocator the operators used.
    pub allocator: String,
    /// From submitting the plan to its end.
    pub seconds: f64,
    /// Packets sent.
    pub packets: u64,
    /// [`GenResult::checksum`], in hex.
    pub checksum: String,
    /// Whether the result equals [`reference()`]'s.
    pub matches_reference: bool,
    /// The request it ran as (for a timeline).
    #[serde(skip)]
    pub request: nearflow_policy::RequestId,
    /// The operators' names, in plan order (for a timeline).
    #[serde(skip)]
    pub names: Vec<String>,
}

/// Runs the plan of `rows` rows per source as one request of `rt` (which `b` was made for),
/// and compares its result with [`reference()`] (computed after the run, not timed).
/// `(machine, policy, allocator)` name what it ran on, for the report.
///
/// # Errors
/// When the plan cannot be built or its run fails.
pub fn run(
    rt: &nearflow_rt::Runtime,
    mut b: PlanBuilder,
    rows: u64,
    (machine, policy, allocator): (String, String, String),
) -> Result<Report, Box<dyn std::error::Error + Send + Sync>> {
    let sinks = build(&mut b, rows);
    let plan = b.build()?;
    let operators = plan.len();
    let handle = plan.submit(rt);
    let (names, request) = (handle.names(), handle.request_id());
    let out = handle.wait()?;
    let got = result(&out, &sinks);
    Ok(Report {
        machine,
        policy,
        operators,
        rows,
        packet_bytes: out.stats.packet_bytes,
        allocator,
        seconds: out.stats.elapsed.as_secs_f64(),
        packets: out.stats.packets(),
        checksum: format!("{:016x}", got.checksum()),
        matches_reference: got == reference(rows),
        request,
        names,
    })
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "generated plan: {} operators, {} rows per source, on {} with {}",
            self.operators, self.rows, self.machine, self.policy
        )?;
        writeln!(
            f,
            "{:.3} s, {} packets; checksum {}; {}",
            self.seconds,
            self.packets,
            self.checksum,
            match self.matches_reference {
                true => "equals the sequential reference",
                false => "DIFFERS from the sequential reference",
            }
        )
    }
}
