//! The rows each stream of a scan reads: a partition's key range per graph, cut into chunks
//! for parallelism, with the store's delta rows given to the ranges they sort into.

use nearflow_rdf::store::{key_prefix, Permutation, Store};
use nearflow_rdf::term::Id;

use super::distribution::PAR_MIN_ROWS;
use super::plan::*;

/// The graphs a graph slot reads: its one graph, or the named graphs `named` for a variable.
pub fn graphs_of(g: Slot, named: &[Id]) -> Vec<Id> {
    match g {
        Slot::Const(Some(id)) | Slot::Fixed(_, id) => vec![id],
        Slot::Const(None) => vec![],
        Slot::Var(_) => named.to_vec(),
    }
}

/// One graph's rows a scan stream reads: a range of the sorted indexes' rows in one
/// partition, and the ranges of the store's delta (positions in
/// [`Delta::added_rows`](nearflow_rdf::delta::Delta::added_rows) and `removed_rows` of the
/// scan's order) that fall between this range's first key and the next range's, merged in as
/// it is read so that the stream stays sorted.
#[derive(Clone, Debug)]
pub struct ScanRange {
    /// The graph.
    pub graph: Id,
    /// Rows of the partition.
    pub rows: std::ops::Range<usize>,
    /// The delta's added rows merged in.
    pub added: std::ops::Range<usize>,
    /// The delta's removed rows left out.
    pub removed: std::ops::Range<usize>,
}

/// One stream of a scan: a partition of the store, and the graphs' ranges it reads there.
pub type ScanPiece = (usize, Vec<ScanRange>);

/// The streams a scan of `pat` in `order` reads: one per partition that holds matches, cut
/// into `dop / partitions` chunks of rows when it holds at least [`PAR_MIN_ROWS`] (a chunk is
/// a list of graphs' ranges, all in one partition). A version of the store with a delta
/// (`nearflow_rdf::delta`) has the delta's rows of each graph given to the ranges they sort
/// into (to partition 0 for a graph the indexes lack).
pub fn scan_pieces(
    store: &Store,
    pat: &Pat,
    order: Permutation,
    named: &[Id],
    dop: usize,
) -> Vec<ScanPiece> {
    let bound = bound_of(pat);
    let k = bound.iter().filter(|x| x.is_some()).count();
    let prefix = key_prefix(order, bound, k);
    let parts = store.perm(order).len().max(1);
    let graphs = graphs_of(pat[3], named);
    let mut per_part: Vec<Vec<(Id, std::ops::Range<usize>)>> = vec![Vec::new(); parts];
    for &g in &graphs {
        for (p, r) in store.ranges(order, g, &prefix) {
            per_part[p].push((g, r));
        }
    }
    let mut out: Vec<ScanPiece> = Vec::new();
    for (p, pieces) in per_part.into_iter().enumerate() {
        let total: usize = pieces.iter().map(|(_, r)| r.len()).sum();
        if total == 0 {
            continue;
        }
        let chunks = if (total as f64) < PAR_MIN_ROWS {
            1
        } else {
            dop.div_ceil(parts).max(1)
        };
        // Cut the concatenated pieces at `total * c / chunks`.
        let mut at = 0;
        let mut it = pieces.into_iter().peekable();
        let mut current: Option<(Id, std::ops::Range<usize>)> = it.next();
        for c in 0..chunks {
            let end = total * (c + 1) / chunks;
            let mut chunk = Vec::new();
            while at < end {
                let Some((g, r)) = current.take() else { break };
                let take = (end - at).min(r.len());
                chunk.push(ScanRange {
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
            if !chunk.is_empty() {
                out.push((p, chunk));
            }
        }
    }
    let delta = store.delta();
    if !delta.is_empty() {
        give_delta(store, order, &prefix, &graphs, &mut out);
    }
    out
}

/// Gives each range of `out` the delta's rows of its graph that sort between its first key and
/// the next range's of the same graph (the streams are in key order per graph).
pub(super) fn give_delta(
    store: &Store,
    order: Permutation,
    prefix: &[Id],
    graphs: &[Id],
    out: &mut Vec<ScanPiece>,
) {
    use nearflow_rdf::delta::key_of;
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
            .flat_map(|(i, (_, rs))| {
                rs.iter()
                    .enumerate()
                    .filter(|(_, r)| r.graph == g)
                    .map(move |(j, _)| (i, j))
            })
            .collect();
        if at.is_empty() {
            // The indexes hold none of it: one stream of the delta's rows alone.
            out.push((
                0,
                vec![ScanRange {
                    graph: g,
                    rows: 0..0,
                    added: ar,
                    removed: 0..0,
                }],
            ));
            continue;
        }
        let (mut a, mut r) = (ar.start, rr.start);
        for (n, &(i, j)) in at.iter().enumerate() {
            // Up to the next range's first key (or the end).
            let (a_end, r_end) = match at.get(n + 1) {
                Some(&(ni, nj)) => {
                    let next = &out[ni].1[nj];
                    let key = parts[out[ni].0].data.row(next.rows.start);
                    (
                        a + added[a..ar.end].partition_point(|x| key_of(x) < key),
                        r + removed[r..rr.end].partition_point(|x| key_of(x) < key),
                    )
                }
                None => (ar.end, rr.end),
            };
            let range = &mut out[i].1[j];
            range.added = a..a_end;
            range.removed = r..r_end;
            (a, r) = (a_end, r_end);
        }
    }
}
