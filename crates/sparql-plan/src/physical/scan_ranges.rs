//! The streams a scan reads: the graphs a pattern's graph slot names, and the store's key
//! ranges for its bound prefix, cut for parallelism (`QuadIndex::scan_streams`).

use nearflow_store::index::{key_prefix, Permutation, QuadIndex, ScanStream, Store};
use nearflow_store::term::Id;

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

/// The streams a scan of `pat` in `order` reads ([`QuadIndex::scan_streams`]): one per
/// partition that holds matches, cut into `dop / partitions` chunks when it holds at least
/// [`PAR_MIN_ROWS`].
pub fn scan_pieces(
    store: &Store,
    pat: &Pat,
    order: Permutation,
    named: &[Id],
    dop: usize,
) -> Vec<ScanStream> {
    let bound = bound_of(pat);
    let k = bound.iter().filter(|x| x.is_some()).count();
    let prefix = key_prefix(order, bound, k);
    let graphs = graphs_of(pat[3], named);
    store.scan_streams(order, &prefix, &graphs, dop, PAR_MIN_ROWS as usize)
}
