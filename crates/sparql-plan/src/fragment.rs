//! A query cut for a store split into shards: each basic graph pattern split into fragments
//! that every shard answers on its own, so that the union of the shards' answers to a fragment
//! is its answer over the whole store; the rest of the query is planned over the fragments'
//! rows (`nearflow_sparql::Plan::plan_given`).
//!
//! Which patterns make a fragment follows from how the quads were split
//! (`nearflow_store::shard`): by subject, the patterns of one basic graph pattern that share
//! their subject (a variable or a constant) make one fragment — a *star*, whose every match
//! reads triples of one subject, all on the shard that owns it; by whole triple, each pattern
//! is a fragment of its own. A fragment is shipped as SPARQL text (`SELECT ?v3 ?v7 WHERE { … }`,
//! variables named by their column), which each shard parses and plans on its own statistics;
//! its answer comes back as ids, which agree across shards because every shard holds the
//! whole dictionary.
//!
//! A query that is one fragment under a LIMIT (`SELECT * { ?s ?p ?o } LIMIT 10`, or an ASK)
//! carries its LIMIT to the shards: without ORDER BY any rows of the answer will do, so each
//! shard returns at most as many as the query keeps, instead of every row of the star.
//!
//! What a fragment cannot express is refused with [`QueryError::Unsupported`]: property paths
//! (a path's steps cross subjects), `GRAPH` and the dataset clauses (a shard's named graphs are
//! those whose quads it holds), and `DESCRIBE` (which reads the store around a resource).

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use crate::algebra::{Form, Node, QuadPat, TermPat};
use crate::{Query, QueryError};
use nearflow_store::term::{Id, Term};

/// How the store's quads were split into shards, so which patterns one shard answers alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Every quad of a subject on one shard: a basic graph pattern's star on one subject is
    /// one fragment.
    Subject,
    /// Quads spread by the whole triple: every pattern is a fragment.
    Triple,
}

/// A fragment: the columns it binds, and its text as each shard runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fragment {
    /// The query's columns the fragment binds, in the order of the text's projection.
    pub cols: Vec<usize>,
    /// `SELECT ?v… WHERE { … }`: what the fragment's rows are known by in [`Given`].
    pub text: String,
    /// The most rows a shard need return, when the query is this one fragment under a LIMIT
    /// (OFFSET + LIMIT of the outermost slice; 1 for an ASK).
    pub limit: Option<usize>,
}

impl Fragment {
    /// The text each shard runs: [`text`](Self::text), with the [`limit`](Self::limit).
    pub fn shard_text(&self) -> String {
        match self.limit {
            Some(n) => format!("{} LIMIT {n}", self.text),
            None => self.text.clone(),
        }
    }
}

/// A fragment's answer, from all the shards: `rows` rows of `cols.len()` ids each, end to end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GivenRows {
    /// The query's columns, in the order of each row's ids.
    pub cols: Vec<usize>,
    /// Rows (a fragment with no variable still has a count: how often it matched).
    pub rows: usize,
    /// The ids, row after row.
    pub ids: Vec<Id>,
}

/// The answers of a query's fragments, by the fragment's text: what
/// `nearflow_sparql::Plan::plan_given` plans the rest of the query over.
#[derive(Clone, Debug)]
pub struct Given {
    /// How the fragments were cut.
    pub split: Split,
    /// Each fragment's rows.
    pub rows: HashMap<String, Arc<GivenRows>>,
}

/// The fragments of `query` for a store split by `split`, each once (two basic graph patterns
/// with the same star share its fragment).
///
/// # Errors
/// [`QueryError::Unsupported`] for what a fragment cannot express (see the module's docs).
pub fn fragments(query: &Query, split: Split) -> Result<Vec<Fragment>, QueryError> {
    if matches!(query.form, Form::Describe(_)) {
        return Err(unsupported("DESCRIBE"));
    }
    if query.dataset.is_some() {
        return Err(unsupported("FROM and FROM NAMED"));
    }
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut stack = vec![&query.optimized];
    while let Some(n) = stack.pop() {
        match n {
            Node::Bgp(quads) => {
                for group in groups(split, quads) {
                    let f = fragment_of(&group)?;
                    if seen.insert(f.text.clone()) {
                        out.push(f);
                    }
                }
            }
            Node::Path { .. } => return Err(unsupported("property paths")),
            Node::Graph(..) | Node::Graphs { .. } => return Err(unsupported("GRAPH")),
            other => stack.extend(other.children()),
        }
    }
    if let [only] = &mut out[..] {
        only.limit = carried_limit(query, split);
    }
    Ok(out)
}

/// How many of its one fragment's rows a query needs, when that is all it reads: the root,
/// through projections and slices of all the solutions, is a basic graph pattern that makes
/// one fragment, and a slice or an ASK bounds the count. `None` for
/// anything else: a DISTINCT, a FILTER, an ORDER BY or a join between the fragment and the
/// limit needs every row.
fn carried_limit(query: &Query, split: Split) -> Option<usize> {
    // The rows needed from below the node being looked at (`None`: all).
    let mut needed = matches!(query.form, Form::Ask).then_some(1usize);
    let mut n = &query.optimized;
    loop {
        match n {
            Node::Project(inner, _) => n = inner,
            Node::Slice(inner, start, len, keys) if keys.is_empty() => {
                let kept = match (needed, *len) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                needed = kept.map(|k| start.saturating_add(k));
                n = inner;
            }
            Node::Bgp(quads) if groups(split, quads).len() == 1 => return needed,
            _ => return None,
        }
    }
}

fn unsupported(what: &str) -> QueryError {
    QueryError::Unsupported(format!(
        "{what} on a sharded store (a cluster runs basic graph patterns, split so that each \
         shard answers its part alone)"
    ))
}

/// A basic graph pattern's patterns, grouped into fragments: by subject (in the order each
/// subject first appears) or one each.
pub(crate) fn groups(split: Split, quads: &[QuadPat]) -> Vec<Vec<&QuadPat>> {
    match split {
        Split::Triple => quads.iter().map(|q| vec![q]).collect(),
        Split::Subject => {
            let mut keys: Vec<String> = Vec::new();
            let mut out: Vec<Vec<&QuadPat>> = Vec::new();
            for q in quads {
                let key = match &q.t[0] {
                    TermPat::Var(c) | TermPat::Fixed(c, _) => format!("?{c}"),
                    TermPat::Term(t) => t.to_string(),
                };
                match keys.iter().position(|k| *k == key) {
                    Some(i) => out[i].push(q),
                    None => {
                        keys.push(key);
                        out.push(vec![q]);
                    }
                }
            }
            out
        }
    }
}

/// The fragment of a group of patterns: its columns and its text.
pub(crate) fn fragment_of(group: &[&QuadPat]) -> Result<Fragment, QueryError> {
    let mut cols = BTreeSet::new();
    let mut body = String::new();
    let mut fixed = Vec::new();
    for q in group {
        if q.g.is_some() {
            return Err(unsupported("GRAPH"));
        }
        for t in &q.t {
            match t {
                TermPat::Var(c) => {
                    cols.insert(*c);
                    let _ = write!(body, "?v{c} ");
                }
                TermPat::Fixed(c, term) => {
                    cols.insert(*c);
                    let _ = write!(body, "?v{c} ");
                    fixed.push((*c, term));
                }
                TermPat::Term(term) => {
                    body.push_str(&constant(term)?);
                    body.push(' ');
                }
            }
        }
        body.push_str(". ");
    }
    // A column fixed to a constant by an `=` filter: the same filter, which the shard's
    // rewrite fixes again.
    fixed.sort_by_key(|(c, _)| *c);
    fixed.dedup_by_key(|(c, _)| *c);
    for (c, term) in fixed {
        let _ = write!(body, "FILTER(?v{c} = {}) ", constant(term)?);
    }
    let cols: Vec<usize> = cols.into_iter().collect();
    let projection = if cols.is_empty() {
        "*".to_owned()
    } else {
        cols.iter()
            .map(|c| format!("?v{c}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    Ok(Fragment {
        text: format!("SELECT {projection} WHERE {{ {body}}}"),
        cols,
        limit: None,
    })
}

/// A constant as SPARQL text. A blank node is not a constant in SPARQL's syntax (it would be
/// read as a variable).
fn constant(t: &Term) -> Result<String, QueryError> {
    match t {
        Term::Blank(_) => Err(unsupported("a blank node as a constant")),
        t => Ok(t.to_string()),
    }
}

impl Given {
    /// The rows of a group's fragment.
    ///
    /// # Panics
    /// If the fragment was not among those given: [`fragments`] lists every fragment the
    /// planner asks for.
    pub(crate) fn of(&self, group: &[&QuadPat]) -> Arc<GivenRows> {
        let f = fragment_of(group).expect("planned fragments were listed by `fragments`");
        self.rows
            .get(&f.text)
            .cloned()
            .expect("every fragment of the query was given")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nearflow_sparql_algebra::Options;

    fn query(text: &str) -> Query {
        Query::parse(text, &Options::default()).unwrap()
    }

    #[test]
    fn a_star_is_one_fragment_by_subject_and_each_pattern_one_by_triple() {
        let q = query(
            "SELECT * WHERE { ?a <http://p> ?b . ?a <http://q> \"x\" . ?b <http://r> ?c . \
             <http://s> <http://p> ?a }",
        );
        let by_subject = fragments(&q, Split::Subject).unwrap();
        assert_eq!(by_subject.len(), 3, "{by_subject:?}");
        let star = by_subject
            .iter()
            .find(|f| f.cols.len() == 2 && f.text.contains("\"x\""));
        assert!(star.is_some(), "{by_subject:?}");
        assert_eq!(fragments(&q, Split::Triple).unwrap().len(), 4);
        // Every fragment's text parses back.
        for f in by_subject {
            query(&f.text);
        }
    }

    #[test]
    fn a_fixed_column_is_filtered_on_the_shard_and_literals_keep_their_escapes() {
        let q = query(
            "SELECT * WHERE { ?a <http://p> ?b . ?a <http://q> \"a \\\"quoted\\\"\\nline\"@en \
             FILTER(?b = <http://o>) }",
        );
        let f = fragments(&q, Split::Subject).unwrap();
        assert_eq!(f.len(), 1);
        assert!(f[0].text.contains("= <http://o>"), "{}", f[0].text);
        let back = query(&f[0].text);
        assert!(matches!(back.form, Form::Select(ref c) if c.len() == 2));
    }

    #[test]
    fn a_query_that_is_one_fragment_carries_its_limit_to_the_shards() {
        let limit = |text: &str, split| {
            let f = fragments(&query(text), split).unwrap();
            assert!(!f.is_empty(), "{text}");
            (f.len() == 1).then(|| f[0].limit).flatten()
        };
        let star = "{ ?a <http://p> ?b . ?a <http://q> ?c }";
        for (text, by_subject) in [
            (format!("SELECT * WHERE {star} LIMIT 10"), Some(10)),
            (
                format!("SELECT ?b WHERE {star} OFFSET 5 LIMIT 10"),
                Some(15),
            ),
            (format!("ASK {star}"), Some(1)),
            (
                format!("SELECT * WHERE {{ {{ SELECT * WHERE {star} LIMIT 2 }} }} LIMIT 7"),
                Some(2),
            ),
            (format!("SELECT * WHERE {star}"), None),
            (format!("SELECT * WHERE {star} OFFSET 5"), None),
            (format!("SELECT DISTINCT ?b WHERE {star} LIMIT 10"), None),
            (format!("SELECT * WHERE {star} ORDER BY ?b LIMIT 10"), None),
            (
                "SELECT * WHERE { ?a <http://p> ?b FILTER(?b != 1) } LIMIT 10".to_owned(),
                None,
            ),
            (
                format!("SELECT (COUNT(*) AS ?n) WHERE {star} LIMIT 10"),
                None,
            ),
        ] {
            assert_eq!(limit(&text, Split::Subject), by_subject, "{text}");
        }
        // Cut by triple the star is two fragments, which meet in the coordinator's join.
        let two = fragments(&query(&format!("ASK {star}")), Split::Triple).unwrap();
        assert_eq!(two.len(), 2);
        assert!(two.iter().all(|f| f.limit.is_none()), "{two:?}");
        let one = &fragments(&query(&format!("ASK {star}")), Split::Subject).unwrap()[0];
        assert!(
            one.shard_text().ends_with("} LIMIT 1"),
            "{}",
            one.shard_text()
        );
        query(&one.shard_text());
    }

    #[test]
    fn what_a_fragment_cannot_express_is_refused() {
        for text in [
            "SELECT * WHERE { ?a <http://p>+ ?b }",
            "SELECT * WHERE { GRAPH ?g { ?a <http://p> ?b } }",
            "SELECT * FROM <http://g> WHERE { ?a <http://p> ?b }",
            "DESCRIBE <http://a>",
        ] {
            let e = fragments(&query(text), Split::Subject).unwrap_err();
            assert!(
                matches!(&e, QueryError::Unsupported(m) if m.contains("sharded store")),
                "{text}: {e}"
            );
        }
    }
}
