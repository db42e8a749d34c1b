//! The seam between the query engine and the store: [`QuadIndex`], the one interface through
//! which `nearflow-sparql` reads a store (as Oxigraph's engine reads its storage through
//! `QueryableDataset`, and DataFusion's through `TableProvider`). It gives terms and ids, the
//! graphs, exact counts and the planner's statistics, and reads of key ranges of a permutation
//! by key prefix — a scan's streams, an index lookup, a run read by position — each resumable,
//! each reporting which NUMA node's memory it read. How the rows are held (partitions of
//! columns in memory, a mapped snapshot, per-node copies, a version's delta merged in) stays
//! behind it: the engine names [`Store`], a version of a store, and calls nothing of it but
//! this trait. A new on-disk format is a module under `snapshot/` and a way for [`Store`] to
//! read it; the engine does not change.
//!
//! The engine's other needs from this crate are the term types (`term.rs`, `dict.rs`) and, for
//! SPARQL Update, the write side: [`Edit`], the changes that make a new version (reading a
//! document for `LOAD` is `nearflow-rdf`'s `load`).

use std::ops::Range;

use nearflow_split::Home;
use nearflow_topo::Machine;

use crate::delta::key_of;
pub use crate::dict::{Dict, DAMAGED};
pub use crate::edit::{Edit, CHANGE_BYTES};
pub use crate::layout::{key_prefix, Permutation, PredStats, Quad, Stats, DEFAULT_GRAPH};
pub use crate::replica::Replication;
pub use crate::store::Store;
use crate::term::{Id, TermRef};

/// Reads of index rows, counted by where their memory is: `all` rows, `remote` of them from
/// another NUMA node's memory than `node`'s (the reading worker's).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    /// The reader's node.
    pub node: usize,
    /// Rows read.
    pub all: u64,
    /// Rows read from another node's memory.
    pub remote: u64,
}

impl Tally {
    /// A tally for a reader on `node`.
    pub fn on(node: usize) -> Tally {
        Tally {
            node,
            ..Tally::default()
        }
    }

    /// `n` rows read from memory on node `from`.
    #[inline]
    pub fn add(&mut self, from: usize, n: u64) {
        self.all += n;
        if from != self.node {
            self.remote += n;
        }
    }
}

/// One graph's rows a scan stream reads: a key range of one partition, and the version's delta
/// rows that sort between its first key and the next range's, merged in as it is read so that
/// the stream stays sorted.
#[derive(Clone, Debug)]
struct ScanRange {
    graph: Id,
    /// Rows of the partition.
    rows: Range<usize>,
    /// Positions of the delta's added rows (in the scan's order) merged in.
    added: Range<usize>,
    /// Positions of the delta's removed rows left out.
    removed: Range<usize>,
}

/// One stream of a scan: graphs' key ranges, all in one partition, read in order; resumable
/// ([`QuadIndex::read_scan`]).
#[derive(Clone, Debug)]
pub struct ScanStream {
    order: Permutation,
    part: usize,
    ranges: Vec<ScanRange>,
    next: usize,
}

impl ScanStream {
    /// The partition it reads (for homing its operator where that partition lies).
    pub fn partition(&self) -> usize {
        self.part
    }

    /// Whether every row has been read.
    pub fn is_done(&self) -> bool {
        self.next >= self.ranges.len()
    }
}

/// One index lookup in one graph: the rows whose key in `order` starts with a prefix, every
/// partition in turn, then the version's added rows; resumable ([`QuadIndex::lookup`]).
#[derive(Clone, Debug)]
pub struct Lookup {
    order: Permutation,
    prefix: [Id; 3],
    k: usize,
    graph: Id,
    part: usize,
    /// The rest of the current partition's range; `None` before the partition is searched.
    range: Option<Range<usize>>,
    /// The delta's added rows still to give, and its removed rows of this graph and prefix;
    /// `None` before they are searched.
    delta: Option<(Range<usize>, Range<usize>)>,
}

impl Lookup {
    /// A lookup of the rows of graph `graph` whose key in `order` starts with the first `k`
    /// ids of `prefix`.
    pub fn new(order: Permutation, prefix: [Id; 3], k: usize, graph: Id) -> Lookup {
        Lookup {
            order,
            prefix,
            k,
            graph,
            part: 0,
            range: None,
            delta: None,
        }
    }
}

/// A key range of one permutation in one graph across its partitions, read by position as one
/// sorted sequence (the partitions are consecutive slices of one sorted permutation). Exact
/// where the version's delta holds none of the range ([`QuadIndex::is_flat_at`]).
#[derive(Clone, Debug)]
pub struct KeyRun {
    order: Permutation,
    graph: Id,
    pieces: Vec<(usize, Range<usize>)>,
}

impl KeyRun {
    /// The graph it reads.
    pub fn graph(&self) -> Id {
        self.graph
    }

    /// Its rows.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|(_, r)| r.len()).sum()
    }

    /// Whether it has no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The partition its first row lies in.
    pub fn first_partition(&self) -> Option<usize> {
        self.pieces.first().map(|(p, _)| *p)
    }

    /// Positions `lo..hi` as a run of their own.
    pub fn slice(&self, lo: usize, hi: usize) -> KeyRun {
        let mut pieces = Vec::new();
        let mut at = 0;
        for (part, r) in &self.pieces {
            let (a, b) = (lo.max(at), hi.min(at + r.len()));
            if a < b {
                pieces.push((*part, r.start + a - at..r.start + b - at));
            }
            at += r.len();
        }
        KeyRun {
            order: self.order,
            graph: self.graph,
            pieces,
        }
    }
}

/// What the query engine reads of a store. Implemented by [`Store`].
pub trait QuadIndex {
    /// The id of a term, if the store holds it.
    fn id_of(&self, term: TermRef<'_>) -> Option<Id>;

    /// The dictionary: the store's terms and their ids.
    fn dict(&self) -> &Dict;

    /// The machine the store was built for (its partitions are per NUMA node of it).
    fn machine(&self) -> &Machine;

    /// Quads held.
    fn len(&self) -> u64;

    /// Whether it holds no quad.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The graphs holding a quad, in id order ([`DEFAULT_GRAPH`] first when it holds any).
    fn graph_ids(&self) -> &[Id];

    /// The named graphs holding a quad, in id order.
    fn named_graphs(&self) -> impl Iterator<Item = Id> + '_ {
        self.graph_ids()
            .iter()
            .copied()
            .filter(|&g| g != DEFAULT_GRAPH)
    }

    /// Quads of graph `g`.
    fn graph_len(&self, g: Id) -> u64;

    /// The planner's statistics.
    fn stats(&self) -> &Stats;

    /// Triples of graph `g` matching a pattern (`None` = any), exactly.
    fn count_in(&self, g: Id, pattern: [Option<Id>; 3]) -> u64;

    /// Whether the store holds quad `q` (`[s, p, o, g]`).
    fn contains(&self, q: &Quad) -> bool;

    /// Each triple of graph `g` matching a pattern, in the order of the permutation its bound
    /// positions pick.
    fn for_each_match(&self, g: Id, pattern: [Option<Id>; 3], f: impl FnMut([Id; 3]));

    /// What a background check of the store's file found damaged, if anything.
    fn damage(&self) -> Option<&str>;

    /// Whether every NUMA node has its own copy of the indexes, read by the workers on it (a
    /// reader then has no home to run at).
    fn is_replicated(&self) -> bool;

    /// Where the tasks reading partition `part` of permutation `order` belong.
    fn partition_home(&self, order: Permutation, part: usize) -> Home;

    /// Whether the indexes are the whole version (no delta): then every key range can be
    /// read by position ([`KeyRun`]).
    fn is_flat(&self) -> bool;

    /// Whether the version's delta holds no row of graph `graph` whose key in `order` starts
    /// with `prefix`: then that key range can be read by position ([`key_run`](Self::key_run))
    /// though the version has a delta elsewhere.
    fn is_flat_at(&self, order: Permutation, graph: Id, prefix: &[Id]) -> bool;

    /// The streams a scan reads: the rows of `graphs` whose key in `order` starts with
    /// `prefix`, one stream per partition that holds any, each cut into `dop / partitions`
    /// streams when it holds at least `min_rows`; the version's delta rows given to the
    /// streams they sort into.
    fn scan_streams(
        &self,
        order: Permutation,
        prefix: &[Id],
        graphs: &[Id],
        dop: usize,
        min_rows: usize,
    ) -> Vec<ScanStream>;

    /// Reads `stream` on, giving each row's graph and triple to `f`, until `f` returns false
    /// (the reader's output is full) or the stream ends. Reads are counted in `tally` (the
    /// copy of the tally's node, when the store is replicated).
    fn read_scan(
        &self,
        stream: &mut ScanStream,
        tally: &mut Tally,
        f: impl FnMut(Id, [Id; 3]) -> bool,
    );

    /// Reads `lookup` on, giving each matching triple to `f`, until `f` returns false (then
    /// `false`: call again to go on) or the matches end (`true`).
    fn lookup(
        &self,
        lookup: &mut Lookup,
        tally: &mut Tally,
        f: impl FnMut([Id; 3]) -> bool,
    ) -> bool;

    /// Position `pos` (0, 1, 2: subject, predicate, object) of each triple of graph `g`
    /// matching a pattern, in the order of the permutation its bound positions pick, to `f`
    /// until it returns false (then false); the reads counted in `tally`. Where the version's
    /// delta holds none of the range, one key column is read a block at a time, no whole row
    /// decoded.
    fn for_each_value(
        &self,
        g: Id,
        pattern: [Option<Id>; 3],
        pos: usize,
        tally: &mut Tally,
        f: impl FnMut(Id) -> bool,
    ) -> bool;

    /// The key range of graph `graph` whose key in `order` starts with `prefix`, for reading
    /// by position (a flat version: [`is_flat`](Self::is_flat)).
    fn key_run(&self, order: Permutation, graph: Id, prefix: &[Id]) -> KeyRun;

    /// The key (in the order's column order) at position `i` of `run`.
    fn run_key(&self, run: &KeyRun, i: usize, tally: &mut Tally) -> [Id; 3];

    /// The key at position `i` of `run` as a triple (s, p, o).
    fn run_triple(&self, run: &KeyRun, i: usize, tally: &mut Tally) -> [Id; 3] {
        run.order.triple(self.run_key(run, i, tally))
    }

    /// The first position in `from..run.len()` whose key column `col` is not below `v` (with
    /// `above`: is above `v`).
    fn run_seek(
        &self,
        run: &KeyRun,
        from: usize,
        col: usize,
        v: Id,
        above: bool,
        tally: &mut Tally,
    ) -> usize {
        let (mut lo, mut hi) = (from, run.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let x = self.run_key(run, mid, tally)[col];
            if x < v || (above && x == v) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

impl QuadIndex for Store {
    fn id_of(&self, term: TermRef<'_>) -> Option<Id> {
        Store::id_of(self, term)
    }

    fn dict(&self) -> &Dict {
        Store::dict(self)
    }

    fn machine(&self) -> &Machine {
        Store::machine(self)
    }

    fn len(&self) -> u64 {
        Store::len(self)
    }

    fn graph_ids(&self) -> &[Id] {
        Store::graph_ids(self)
    }

    fn graph_len(&self, g: Id) -> u64 {
        Store::graph_len(self, g)
    }

    fn stats(&self) -> &Stats {
        Store::stats(self)
    }

    fn count_in(&self, g: Id, pattern: [Option<Id>; 3]) -> u64 {
        Store::count_in(self, g, pattern)
    }

    fn contains(&self, q: &Quad) -> bool {
        Store::contains(self, q)
    }

    fn for_each_match(&self, g: Id, pattern: [Option<Id>; 3], f: impl FnMut([Id; 3])) {
        Store::for_each_match(self, g, pattern, f)
    }

    fn damage(&self) -> Option<&str> {
        Store::damage(self)
    }

    fn is_replicated(&self) -> bool {
        Store::is_replicated(self)
    }

    fn partition_home(&self, order: Permutation, part: usize) -> Home {
        self.perm(order).partitions()[part].info.home
    }

    fn is_flat(&self) -> bool {
        Store::is_flat(self)
    }

    fn is_flat_at(&self, order: Permutation, graph: Id, prefix: &[Id]) -> bool {
        let d = self.delta();
        d.added_range(order, graph, prefix).is_empty()
            && d.removed_range(order, graph, prefix).is_empty()
    }

    fn scan_streams(
        &self,
        order: Permutation,
        prefix: &[Id],
        graphs: &[Id],
        dop: usize,
        min_rows: usize,
    ) -> Vec<ScanStream> {
        let parts = self.perm(order).len().max(1);
        let mut per_part: Vec<Vec<(Id, Range<usize>)>> = vec![Vec::new(); parts];
        for &g in graphs {
            for (p, r) in self.ranges(order, g, prefix) {
                per_part[p].push((g, r));
            }
        }
        let mut out: Vec<ScanStream> = Vec::new();
        for (p, pieces) in per_part.into_iter().enumerate() {
            let total: usize = pieces.iter().map(|(_, r)| r.len()).sum();
            if total == 0 {
                continue;
            }
            let n = if total < min_rows {
                1
            } else {
                dop.div_ceil(parts).max(1)
            };
            // Cut the concatenated pieces at `total * c / n`.
            let mut at = 0;
            let mut it = pieces.into_iter();
            let mut current: Option<(Id, Range<usize>)> = it.next();
            for c in 0..n {
                let end = total * (c + 1) / n;
                let mut ranges = Vec::new();
                while at < end {
                    let Some((g, r)) = current.take() else { break };
                    let take = (end - at).min(r.len());
                    ranges.push(ScanRange {
                        graph: g,
                        rows: r.start..r.start + take,
                        added: 0..0,
                        removed: 0..0,
                    });
                    at += take;
                    if take < r.len() {
                        current = Some((g, r.start + take..r.end));
                    } else {
                        current = it.next();
                    }
                }
                if !ranges.is_empty() {
                    out.push(ScanStream {
                        order,
                        part: p,
                        ranges,
                        next: 0,
                    });
                }
            }
        }
        if !self.is_flat() {
            give_delta(self, order, prefix, graphs, &mut out);
        }
        out
    }

    fn read_scan(
        &self,
        stream: &mut ScanStream,
        tally: &mut Tally,
        mut f: impl FnMut(Id, [Id; 3]) -> bool,
    ) {
        let order = stream.order;
        // The partition's rows where the reader's node has them (a replicated store), else
        // where the partition lies.
        let cols = self.part(order, stream.part, tally.node);
        let delta = self.delta();
        let (added, removed) = (delta.added_rows(order), delta.removed_rows(order));
        let mut read = 0;
        while stream.next < stream.ranges.len() {
            let r = &mut stream.ranges[stream.next];
            // The next key: the indexes' next row or the delta's next added row, whichever
            // sorts first; an indexes' row the delta removed is passed over.
            let base = (r.rows.start < r.rows.end).then(|| cols.row(r.rows.start));
            let add = (r.added.start < r.added.end).then(|| key_of(&added[r.added.start]));
            let key = match (base, add) {
                (None, None) => {
                    stream.next += 1;
                    continue;
                }
                (Some(b), a) if a.is_none_or(|a| b < a) => {
                    r.rows.start += 1;
                    read += 1;
                    while r.removed.start < r.removed.end && key_of(&removed[r.removed.start]) < b {
                        r.removed.start += 1;
                    }
                    if r.removed.start < r.removed.end && key_of(&removed[r.removed.start]) == b {
                        r.removed.start += 1;
                        continue;
                    }
                    b
                }
                (_, Some(a)) => {
                    r.added.start += 1;
                    a
                }
                (Some(_), None) => unreachable!("matched above"),
            };
            if !f(r.graph, order.triple(key)) {
                break;
            }
        }
        // Every row of this run came from one partition's (or copy's) memory.
        tally.add(cols.node(), read);
    }

    fn lookup(
        &self,
        l: &mut Lookup,
        tally: &mut Tally,
        mut f: impl FnMut([Id; 3]) -> bool,
    ) -> bool {
        let parts = self.perm(l.order).len();
        let delta = self.delta();
        let (added, removed) = (delta.added_rows(l.order), delta.removed_rows(l.order));
        let (g, order) = (l.graph, l.order);
        let rows = self.graph_rows(g);
        let prefix = &l.prefix[..l.k];
        let (_, gone) = l.delta.get_or_insert_with(|| {
            if delta.is_empty() {
                (0..0, 0..0)
            } else {
                (
                    delta.added_range(order, g, prefix),
                    delta.removed_range(order, g, prefix),
                )
            }
        });
        let gone = &removed[gone.clone()];
        while l.part < parts {
            // The partition's rows on the reader's node when the store is replicated.
            let cols = self.part(order, l.part, tally.node);
            let range = l.range.get_or_insert_with(|| {
                tally.add(cols.node(), 1);
                cols.range_in(cols.local(&rows), prefix)
            });
            for i in range.by_ref() {
                let key = cols.row(i);
                tally.add(cols.node(), 1);
                if !gone.is_empty() && gone.binary_search(&[g, key[0], key[1], key[2]]).is_ok() {
                    continue;
                }
                if !f(order.triple(key)) {
                    return false;
                }
            }
            l.part += 1;
            l.range = None;
        }
        let (more, _) = l.delta.as_mut().expect("searched above");
        for i in more.by_ref() {
            if !f(order.triple(key_of(&added[i]))) {
                return false;
            }
        }
        true
    }

    fn for_each_value(
        &self,
        g: Id,
        pattern: [Option<Id>; 3],
        pos: usize,
        tally: &mut Tally,
        mut f: impl FnMut(Id) -> bool,
    ) -> bool {
        let (order, k) = Permutation::for_bound(pattern.map(|x| x.is_some()));
        let prefix = key_prefix(order, pattern, k);
        if !self.is_flat_at(order, g, &prefix) {
            let mut p = [0; 3];
            p[..k].copy_from_slice(&prefix);
            let mut l = Lookup::new(order, p, k, g);
            return self.lookup(&mut l, tally, |t| f(t[pos]));
        }
        let col = order
            .positions()
            .iter()
            .position(|&x| x == pos)
            .expect("a position of s, p, o");
        let rows = self.graph_rows(g);
        for part in 0..self.perm(order).len() {
            let cols = self.part(order, part, tally.node);
            tally.add(cols.node(), 1);
            let range = cols.range_in(cols.local(&rows), &prefix);
            tally.add(cols.node(), range.len() as u64);
            if !cols.for_each_value(col, range, &mut f) {
                return false;
            }
        }
        true
    }

    fn key_run(&self, order: Permutation, graph: Id, prefix: &[Id]) -> KeyRun {
        KeyRun {
            order,
            graph,
            pieces: self.ranges(order, graph, prefix).collect(),
        }
    }

    #[inline]
    fn run_key(&self, run: &KeyRun, mut i: usize, tally: &mut Tally) -> [Id; 3] {
        for (part, r) in &run.pieces {
            if i < r.len() {
                let cols = self.part(run.order, *part, tally.node);
                tally.add(cols.node(), 1);
                return cols.row(r.start + i);
            }
            i -= r.len();
        }
        unreachable!("a position past the run")
    }
}

/// Gives each stream's ranges the delta's rows of their graph that sort between the range's
/// first key and the next range's of the same graph (the streams are in key order per graph);
/// a graph the indexes lack gets one stream of its added rows alone (in partition 0).
fn give_delta(
    store: &Store,
    order: Permutation,
    prefix: &[Id],
    graphs: &[Id],
    out: &mut Vec<ScanStream>,
) {
    let delta = store.delta();
    let (added, removed) = (delta.added_rows(order), delta.removed_rows(order));
    let parts = store.perm(order).partitions();
    for &g in graphs {
        let (ar, rr) = (
            delta.added_range(order, g, prefix),
            delta.removed_range(order, g, prefix),
        );
        if ar.is_empty() && rr.is_empty() {
            continue;
        }
        let at: Vec<(usize, usize)> = out
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                s.ranges
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.graph == g)
                    .map(move |(j, _)| (i, j))
            })
            .collect();
        if at.is_empty() {
            out.push(ScanStream {
                order,
                part: 0,
                ranges: vec![ScanRange {
                    graph: g,
                    rows: 0..0,
                    added: ar,
                    removed: 0..0,
                }],
                next: 0,
            });
            continue;
        }
        let (mut a, mut r) = (ar.start, rr.start);
        for (n, &(i, j)) in at.iter().enumerate() {
            // Up to the next range's first key (or the end).
            let (a_end, r_end) = match at.get(n + 1) {
                Some(&(ni, nj)) => {
                    let next = &out[ni].ranges[nj];
                    let key = parts[out[ni].part].data.row(next.rows.start);
                    (
                        a + added[a..ar.end].partition_point(|x| key_of(x) < key),
                        r + removed[r..rr.end].partition_point(|x| key_of(x) < key),
                    )
                }
                None => (ar.end, rr.end),
            };
            let range = &mut out[i].ranges[j];
            range.added = a..a_end;
            range.removed = r..r_end;
            (a, r) = (a_end, r_end);
        }
    }
}
