//! The sorted indexes a store's versions share ([`Base`]): the three permutations in their
//! partitions, the graphs' runs, the statistics, the machine they were built for, and the
//! per-node copies once built. Nothing of a file format is here: a mapped snapshot's
//! background check is the version's (`Store::health`).

use std::ops::Range;

use nearflow_split::SplittableData;
use nearflow_topo::Machine;

use crate::layout::{Columns, Stats};
use crate::replica::Replicas;
use crate::term::Id;

/// The sorted indexes a store's versions share.
pub struct Base {
    pub(crate) perms: [SplittableData<Columns>; 3],
    /// Each graph that holds a quad and the row its run starts at, in graph id order; a run
    /// ends where the next starts (the last at the base's length).
    pub(crate) graphs: Vec<(Id, usize)>,
    pub(crate) stats: Stats,
    pub(crate) machine: Machine,
    /// Per-node copies of the permutations, once [`Store::replicate`] has built them
    /// (`replica.rs`).
    pub(crate) replicas: std::sync::OnceLock<Replicas>,
}

impl Base {
    /// The quads in the sorted indexes.
    pub fn len(&self) -> usize {
        self.stats.triples as usize
    }

    /// Whether the sorted indexes hold no quad.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows of graph `g` in every permutation.
    pub(crate) fn graph_rows(&self, g: Id) -> Range<usize> {
        match self.graphs.binary_search_by_key(&g, |&(id, _)| id) {
            Ok(i) => {
                let end = self.graphs.get(i + 1).map_or(self.len(), |&(_, s)| s);
                self.graphs[i].1..end
            }
            Err(_) => 0..0,
        }
    }
}
