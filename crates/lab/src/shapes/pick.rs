//! The predicates a shape is made of, picked by size from the store's own statistics, and the
//! queries of each shape, counted and in full.

use super::*;

/// Runs `text` in this process; its rows.
pub(super) fn rows_of(
    store: &Arc<nearflow_rdf::Store>,
    rt: &Runtime,
    text: &str,
) -> Result<sparql::Collected> {
    let p = sparql::prepare(store, text, &Options::default())
        .with_context(|| format!("the generator's query {text}"))?;
    match p.execute(rt, None)? {
        QueryResults::Solutions(s) => Ok(s.collect()?),
        _ => bail!("the generator's query is not a SELECT: {text}"),
    }
}

/// The count of a one-row `SELECT (COUNT(*) AS ?c)`.
pub(super) fn count_in(store: &Arc<nearflow_rdf::Store>, rt: &Runtime, text: &str) -> Result<u64> {
    let out = rows_of(store, rt, text)?;
    let n = out
        .rows
        .get(0)
        .and_then(|r| out.term(r, 0))
        .and_then(|t| match t.as_ref() {
            TermRef::Literal { value, .. } => value.parse().ok(),
            _ => None,
        });
    n.with_context(|| format!("no count from {text}"))
}

/// What an object of `p` is, from its first match: a number (its lexical form), a plain
/// string, a language-tagged string (its tag) or something else.
pub(super) enum Kind {
    Number,
    Plain(String),
    Lang(String),
    Other,
}

pub(super) fn kind_of(store: &Arc<nearflow_rdf::Store>, rt: &Runtime, p: &str) -> Result<Kind> {
    let out = rows_of(
        store,
        rt,
        &format!("SELECT ?o WHERE {{ ?s <{p}> ?o }} LIMIT 1"),
    )?;
    let Some(t) = out.rows.get(0).and_then(|r| out.term(r, 0)) else {
        return Ok(Kind::Other);
    };
    const XSD: &str = "http://www.w3.org/2001/XMLSchema#";
    Ok(match t.as_ref() {
        TermRef::Literal {
            lang: Some(tag), ..
        } => Kind::Lang(tag.to_owned()),
        TermRef::Literal {
            value, datatype, ..
        } => match datatype.strip_prefix(XSD) {
            Some("string") => Kind::Plain(value.to_owned()),
            Some(
                "integer" | "decimal" | "double" | "float" | "int" | "long" | "short"
                | "nonNegativeInteger" | "positiveInteger",
            ) => Kind::Number,
            _ => Kind::Other,
        },
        _ => Kind::Other,
    })
}

/// A word of three to six letters from `s` to search for (its first such run of letters,
/// cut to six), or `None`.
pub(super) fn needle(s: &str) -> Option<String> {
    s.split(|c: char| !c.is_ascii_alphabetic())
        .find(|w| w.len() >= 3)
        .map(|w| w.chars().take(6).collect())
}

/// Picks the predicates from `store`'s statistics (see the module's documentation).
pub fn pick(store: &Arc<nearflow_rdf::Store>, rt: &Runtime) -> Result<Picked> {
    let out = rows_of(
        store,
        rt,
        "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p",
    )?;
    let mut preds: Vec<(String, u64)> = Vec::new();
    for r in &out.rows {
        let (Some(p), Some(n)) = (out.term(r, 0), out.term(r, 1)) else {
            continue;
        };
        if let (TermRef::Iri(p), TermRef::Literal { value, .. }) = (p.as_ref(), n.as_ref()) {
            preds.push((p.to_owned(), value.parse().unwrap_or(0)));
        }
    }
    // Largest first; ties by IRI, so the pick does not depend on the order of the groups.
    preds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut picked = Picked::default();
    let Some(large) = preds.first().cloned() else {
        return Ok(picked);
    };
    let shares = |a: &str, b: &str| -> Result<bool> {
        let q = format!("SELECT (COUNT(*) AS ?c) WHERE {{ ?s <{a}> ?x . ?s <{b}> ?y }}");
        Ok(count_in(store, rt, &q)? > 0)
    };
    for (p, n) in preds.iter().skip(1).take(PAIR_CANDIDATES) {
        if shares(&large.0, p)? {
            picked.large2 = Some((p.clone(), *n));
            break;
        }
    }
    for (p, n) in preds.iter().rev() {
        if *n >= SMALL_MIN && n.saturating_mul(50) <= large.1 && shares(&large.0, p)? {
            picked.small = Some((p.clone(), *n));
            break;
        }
    }
    'path: for (a, _) in preds.iter().take(PAIR_CANDIDATES) {
        for (b, _) in preds.iter().take(PAIR_CANDIDATES) {
            let q = format!("SELECT (COUNT(*) AS ?c) WHERE {{ ?s <{a}> ?x . ?x <{b}> ?y }}");
            if count_in(store, rt, &q)? > 0 {
                picked.path = Some((a.clone(), b.clone()));
                break 'path;
            }
        }
    }
    for (p, _) in &preds {
        if picked.numeric.is_some() && picked.string.is_some() && picked.lang.is_some() {
            break;
        }
        match kind_of(store, rt, p)? {
            Kind::Number if picked.numeric.is_none() => {
                // The median value, so the filter passes about half.
                let q = format!(
                    "SELECT ?o WHERE {{ ?s <{p}> ?o FILTER(isNumeric(?o)) }} ORDER BY ?o \
                     OFFSET {} LIMIT 1",
                    preds.iter().find(|x| &x.0 == p).map_or(0, |x| x.1 / 2)
                );
                let out = rows_of(store, rt, &q)?;
                let v =
                    out.rows
                        .get(0)
                        .and_then(|r| out.term(r, 0))
                        .and_then(|t| match t.as_ref() {
                            TermRef::Literal { value, .. } => Some(value.to_owned()),
                            _ => None,
                        });
                if let Some(v) = v.filter(|v| v.parse::<f64>().is_ok()) {
                    picked.numeric = Some((p.clone(), v));
                }
            }
            Kind::Plain(s) if picked.string.is_none() => {
                if let Some(w) = needle(&s) {
                    picked.string = Some((p.clone(), w));
                }
            }
            Kind::Lang(tag) if picked.lang.is_none() => picked.lang = Some((p.clone(), tag)),
            _ => {}
        }
    }
    picked.large = Some(large);
    Ok(picked)
}

/// Shapes by name: `(name, query)`, or `(name, why it is left out)`.
pub type Named = Vec<(String, String)>;

/// The shapes' queries over `picked`, and the shapes left out with why.
pub fn generate(picked: &Picked) -> (Named, Named) {
    let mut shapes: Vec<(String, String)> = Vec::new();
    let mut left_out: Vec<(String, String)> = Vec::new();
    let mut add = |name: &str, body: Option<String>, why: &str| match body {
        Some(b) => shapes.push((name.to_owned(), b)),
        None => left_out.push((name.to_owned(), why.to_owned())),
    };
    let p = |x: &Option<(String, u64)>| x.as_ref().map(|(p, _)| p.clone());
    let (large, large2, small) = (p(&picked.large), p(&picked.large2), p(&picked.small));
    let both = |f: &dyn Fn(&str, &str) -> String, a: &Option<String>, b: &Option<String>| {
        a.as_ref().zip(b.as_ref()).map(|(a, b)| f(a, b))
    };
    let no_small = "no predicate of at least 100 triples and at most a fiftieth of the largest \
                    shares subjects with it";
    let join = |a: &str, b: &str| format!("SELECT * WHERE {{ ?s <{a}> ?a . ?s <{b}> ?b }}");
    add("join-small-large", both(&join, &small, &large), no_small);
    add("join-large-small", both(&join, &large, &small), no_small);
    add(
        "join-large-large",
        both(&join, &large, &large2),
        "no second large predicate shares subjects with the largest",
    );
    add(
        "join-path",
        picked
            .path
            .as_ref()
            .map(|(a, b)| format!("SELECT * WHERE {{ ?s <{a}> ?x . ?x <{b}> ?y }}")),
        "no large predicate's objects are another's subjects",
    );
    add(
        "star-3",
        small
            .as_ref()
            .zip(large.as_ref())
            .zip(large2.as_ref())
            .map(|((a, b), c)| {
                format!("SELECT * WHERE {{ ?s <{a}> ?a . ?s <{b}> ?b . ?s <{c}> ?c }}")
            }),
        no_small,
    );
    let opt =
        |a: &str, b: &str| format!("SELECT * WHERE {{ ?s <{a}> ?a OPTIONAL {{ ?s <{b}> ?b }} }}");
    add("optional-small-large", both(&opt, &small, &large), no_small);
    add("optional-large-small", both(&opt, &large, &small), no_small);
    let exists = |a: &str, b: &str| {
        format!("SELECT * WHERE {{ ?s <{a}> ?a FILTER EXISTS {{ ?s <{b}> ?b }} }}")
    };
    add(
        "exists-small-large",
        both(&exists, &small, &large),
        no_small,
    );
    add(
        "exists-large-small",
        both(&exists, &large, &small),
        no_small,
    );
    let not_exists = |a: &str, b: &str| {
        format!("SELECT * WHERE {{ ?s <{a}> ?a FILTER NOT EXISTS {{ ?s <{b}> ?b }} }}")
    };
    add(
        "not-exists-small-large",
        both(&not_exists, &small, &large),
        no_small,
    );
    add(
        "not-exists-large-small",
        both(&not_exists, &large, &small),
        no_small,
    );
    let minus =
        |a: &str, b: &str| format!("SELECT * WHERE {{ ?s <{a}> ?a MINUS {{ ?s <{b}> ?b }} }}");
    add("minus-small-large", both(&minus, &small, &large), no_small);
    add("minus-large-small", both(&minus, &large, &small), no_small);
    let union = |a: &str, b: &str| {
        format!("SELECT * WHERE {{ {{ ?s <{a}> ?o }} UNION {{ ?s <{b}> ?o }} }}")
    };
    add("union", both(&union, &small, &large), no_small);
    add(
        "group-by",
        large
            .as_ref()
            .map(|a| format!("SELECT ?o (COUNT(*) AS ?n) WHERE {{ ?s <{a}> ?o }} GROUP BY ?o")),
        "an empty store",
    );
    add(
        "distinct",
        large
            .as_ref()
            .map(|a| format!("SELECT DISTINCT ?o WHERE {{ ?s <{a}> ?o }}")),
        "an empty store",
    );
    add(
        "filter-numeric",
        picked
            .numeric
            .as_ref()
            .map(|(p, v)| format!("SELECT * WHERE {{ ?s <{p}> ?v FILTER(?v > {v}) }}")),
        "no predicate with numbers as objects",
    );
    let no_string = "no predicate with plain strings as objects";
    add(
        "filter-contains",
        picked.string.as_ref().map(|(p, w)| {
            format!("SELECT * WHERE {{ ?s <{p}> ?v FILTER(CONTAINS(?v, \"{w}\")) }}")
        }),
        no_string,
    );
    add(
        "filter-regex",
        picked.string.as_ref().map(|(p, w)| {
            format!("SELECT * WHERE {{ ?s <{p}> ?v FILTER(REGEX(?v, \"^{w}\", \"i\")) }}")
        }),
        no_string,
    );
    add(
        "filter-strstarts",
        picked.string.as_ref().map(|(p, w)| {
            format!("SELECT * WHERE {{ ?s <{p}> ?v FILTER(STRSTARTS(STR(?v), \"{w}\")) }}")
        }),
        no_string,
    );
    add(
        "filter-lang",
        picked.lang.as_ref().map(|(p, tag)| {
            format!("SELECT * WHERE {{ ?s <{p}> ?v FILTER(LANGMATCHES(LANG(?v), \"{tag}\")) }}")
        }),
        "no predicate with language-tagged strings as objects",
    );
    add(
        "scan-large",
        large
            .as_ref()
            .map(|a| format!("SELECT * WHERE {{ ?s <{a}> ?o }}")),
        "an empty store",
    );
    (shapes, left_out)
}

/// The queries of `shapes` in the forms asked for.
pub(super) fn forms(shapes: &[(String, String)], counted: bool, full: bool) -> Vec<ShapeQuery> {
    let mut out = Vec::new();
    for (shape, text) in shapes {
        if counted {
            out.push(ShapeQuery {
                name: format!("{shape}:count"),
                shape: shape.clone(),
                counted: true,
                text: format!("SELECT (COUNT(*) AS ?count) WHERE {{ {{ {text} }} }}"),
            });
        }
        if full {
            out.push(ShapeQuery {
                name: format!("{shape}:full"),
                shape: shape.clone(),
                counted: false,
                text: text.clone(),
            });
        }
    }
    out
}
