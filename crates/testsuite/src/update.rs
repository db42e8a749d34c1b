//! The W3C update evaluation tests: the request runs over the test's dataset (`ut:data` in
//! the default graph, each `ut:graphData` file in the graph its `rdfs:label` names), and the
//! dataset after it is compared with the expected one, quad by quad, blank nodes up to one
//! consistent renaming. The store keeps no empty graph, so an expected graph that is empty
//! and one that is absent are the same.

use std::sync::Arc;

use anyhow::{anyhow, Result};
use nearflow_rdf::store::{Store, DEFAULT_GRAPH};
use nearflow_sparql::update::{LoadFrom, Update, UpdateOptions};

use super::{compare, load_named, Answer, Solution, Test};

/// Every quad of `store` as a solution of `s`, `p`, `o` and `g` (no `g` in the default graph).
fn quads(store: &Store) -> Vec<Solution> {
    let d = store.dict();
    store
        .quads()
        .into_iter()
        .map(|q| {
            let mut s = Solution::new();
            for (i, v) in ["s", "p", "o"].iter().enumerate() {
                s.insert(v.to_string(), d.term(q[i]).to_string());
            }
            if q[3] != DEFAULT_GRAPH {
                s.insert("g".into(), d.term(q[3]).to_string());
            }
            s
        })
        .collect()
}

/// Runs one update evaluation test (`text`: its request, with its file as the base).
pub(crate) fn run(test: &Test, rt: &nearflow_rt::Runtime, text: &str) -> Result<()> {
    let machine = rt.machine();
    let before = Arc::new(load_named(&test.data, &test.update_graphs, machine)?);
    let update = Update::parse(text, None).map_err(|e| anyhow!("refused: {e}"))?;
    let options = UpdateOptions {
        load: LoadFrom::AnyFile,
        ..UpdateOptions::default()
    };
    let after = update
        .apply(&before, rt, &options)
        .map_err(|e| anyhow!("failed: {e}"))?
        .store;
    let want = load_named(&test.result_data, &test.result_graphs, machine)?;
    compare(
        &Answer::Solutions(quads(&after)),
        &Answer::Solutions(quads(&want)),
        &[],
    )
    .map_err(|e| anyhow!("the dataset after the update differs: {e}"))
}
