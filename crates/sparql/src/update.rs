//! SPARQL 1.1 Update: every operation (INSERT DATA, DELETE DATA, DELETE/INSERT … WHERE with
//! USING and WITH, DELETE WHERE, LOAD of a local file, CLEAR, CREATE, DROP; ADD, MOVE and COPY
//! as the Update spec §3.2.3–3.2.5 rewrites them, which `spargebra`'s parser does).
//!
//! An update request is parsed into operations ([`Update::parse`]), each DELETE/INSERT's
//! WHERE clause translated and rewritten as a SELECT of its template's variables (the same
//! pipeline as a query). [`Update::apply`] runs them in order over a version of the store
//! (`nearflow_rdf::delta`): each operation sees the ones before it, and its WHERE clause is
//! evaluated on the runtime against the version the operation starts from (Update §4.2.3:
//! the deletions and insertions of one operation do not see each other). The request's result
//! is one new version and the quads it changed, which the store's owner logs and publishes as
//! one atomic update (`nearflow_rdf::db`).
//!
//! Graphs: the store keeps a graph while it holds a quad, so an empty graph does not exist.
//! CREATE of a graph that holds quads fails (unless SILENT) and otherwise changes nothing;
//! DROP and CLEAR of a graph that holds none fail unless SILENT, as the spec says for a graph
//! that does not exist.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use nearflow_rdf::index::Edit;
use nearflow_rdf::index::{Store, DEFAULT_GRAPH};
use nearflow_rdf::term::{Id, Term, TermRef};
use nearflow_rt::Runtime;
use spargebra::algebra::GraphPattern;
use spargebra::algebra::GraphTarget;
use spargebra::term::{
    GraphName, GraphNamePattern, GroundTerm, GroundTermPattern, NamedNodePattern, TermPattern,
};
use spargebra::GraphUpdateOperation;

use crate::algebra::literal_term;
use crate::{Form, Options, Plan, Query, QueryError};

/// A slot of a quad template.
#[derive(Clone, Debug)]
enum Slot {
    Term(Term),
    /// A variable: its index among the WHERE clause's projected columns.
    Var(usize),
    /// A blank node: fresh per solution (per operation for INSERT DATA).
    Blank(String),
}

/// A quad template; `g` is `None` for the default graph.
#[derive(Clone, Debug)]
struct Template {
    s: Slot,
    p: Slot,
    o: Slot,
    g: Option<Slot>,
}

/// Which graphs CLEAR and DROP act on.
#[derive(Clone, Debug)]
enum Target {
    Default,
    Named(String),
    AllNamed,
    All,
}

#[derive(Clone, Debug)]
enum Operation {
    InsertData(Vec<Template>),
    DeleteData(Vec<Template>),
    Modify {
        delete: Vec<Template>,
        insert: Vec<Template>,
        /// The WHERE clause, selecting the templates' variables in order.
        query: Arc<Query>,
    },
    Load {
        silent: bool,
        source: String,
        into: Option<String>,
    },
    Clear {
        silent: bool,
        target: Target,
    },
    Create {
        silent: bool,
        graph: String,
    },
    Drop {
        silent: bool,
        target: Target,
    },
}

/// A parsed update request.
#[derive(Clone, Debug)]
pub struct Update {
    ops: Vec<Operation>,
}

/// Where LOAD may read files from.
#[derive(Clone, Debug, Default)]
pub enum LoadFrom {
    /// Nowhere: LOAD fails (unless SILENT). The server's default: a client must not make it
    /// read the host's files.
    #[default]
    Nowhere,
    /// Any local file (`file://` IRIs): the CLI's `nearflow update`.
    AnyFile,
    /// Files under this directory only.
    Under(PathBuf),
}

/// How to run an update.
#[derive(Clone, Debug, Default)]
pub struct UpdateOptions {
    /// How the WHERE clauses run (time and memory limits, parallelism). The memory limit also
    /// bounds the changes an operation computes from its solutions.
    pub query: Options,
    /// Where LOAD may read.
    pub load: LoadFrom,
    /// Once set, the update stops (a server's client that went away): nothing is changed.
    pub cancel: Option<Arc<std::sync::atomic::AtomicBool>>,
}

/// What an update request did: the new version and the quads that differ from the old one.
pub struct Applied {
    /// The new version.
    pub store: Store,
    /// Each changed quad (`[s, p, o, g]`, ids of the new version) and whether it holds it.
    pub changes: Vec<([Id; 4], bool)>,
}

/// The limits of one update request as it applies: its time limit, counted from the start of
/// the request (its WHERE clauses get the time left), and its memory limit, which bounds what
/// the operations hold: the solutions read, the changes made ([`Edit::held_bytes`]) and a
/// `LOAD`'s parse. Each is checked as the changes are made; past either the request fails and
/// nothing of it is kept.
struct Guard {
    deadline: Option<(std::time::Duration, std::time::Instant)>,
    limit: Option<usize>,
    cancel: Option<Arc<std::sync::atomic::AtomicBool>>,
}

/// Rows (or quads) between two checks of a [`Guard`].
const CHECK_EVERY: usize = 1024;

impl Guard {
    fn new(options: &UpdateOptions) -> Guard {
        Guard {
            deadline: options
                .query
                .timeout
                .map(|t| (t, std::time::Instant::now() + t)),
            limit: options.query.memory_limit,
            cancel: options.cancel.clone(),
        }
    }

    /// `options` with the time left as the time limit.
    fn left(&self, options: &Options) -> Options {
        let mut o = options.clone();
        if let Some((_, at)) = self.deadline {
            let left = at.saturating_duration_since(std::time::Instant::now());
            o.timeout = Some(left.max(std::time::Duration::from_millis(1)));
        }
        o
    }

    /// An error when the time limit has passed or the update was cancelled, or when `held`
    /// bytes (for `what`) pass the memory limit.
    fn check(&self, held: usize, what: &str) -> Result<(), QueryError> {
        // Relaxed: a flag, set once.
        if self
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
        {
            return Err(QueryError::Cancelled);
        }
        if let Some((limit, at)) = self.deadline {
            if std::time::Instant::now() >= at {
                return Err(QueryError::Timeout(limit));
            }
        }
        match self.limit {
            Some(limit) if held > limit => Err(QueryError::MemoryLimit {
                operator: what.into(),
                limit,
                wanted: held,
            }),
            _ => Ok(()),
        }
    }
}

fn iri(n: &oxrdf::NamedNode) -> Term {
    Term::Iri(n.as_str().to_owned())
}

fn ground(t: &GroundTerm) -> Result<Term, QueryError> {
    match t {
        GroundTerm::NamedNode(n) => Ok(iri(n)),
        GroundTerm::Literal(l) => literal_term(l),
        _ => Err(QueryError::Unsupported("triple terms (RDF 1.2)".into())),
    }
}

/// The variables of the templates, numbered as they first appear.
#[derive(Default)]
struct Vars(Vec<String>);

impl Vars {
    fn slot(&mut self, name: &str) -> Slot {
        match self.0.iter().position(|v| v == name) {
            Some(i) => Slot::Var(i),
            None => {
                self.0.push(name.to_owned());
                Slot::Var(self.0.len() - 1)
            }
        }
    }
}

fn term_slot(t: &TermPattern, vars: &mut Vars) -> Result<Slot, QueryError> {
    Ok(match t {
        TermPattern::NamedNode(n) => Slot::Term(iri(n)),
        TermPattern::Literal(l) => Slot::Term(literal_term(l)?),
        TermPattern::BlankNode(b) => Slot::Blank(b.as_str().to_owned()),
        TermPattern::Variable(v) => vars.slot(v.as_str()),
        _ => return Err(QueryError::Unsupported("triple terms (RDF 1.2)".into())),
    })
}

fn ground_slot(t: &GroundTermPattern, vars: &mut Vars) -> Result<Slot, QueryError> {
    Ok(match t {
        GroundTermPattern::NamedNode(n) => Slot::Term(iri(n)),
        GroundTermPattern::Literal(l) => Slot::Term(literal_term(l)?),
        GroundTermPattern::Variable(v) => vars.slot(v.as_str()),
        _ => return Err(QueryError::Unsupported("triple terms (RDF 1.2)".into())),
    })
}

fn pred_slot(p: &NamedNodePattern, vars: &mut Vars) -> Slot {
    match p {
        NamedNodePattern::NamedNode(n) => Slot::Term(iri(n)),
        NamedNodePattern::Variable(v) => vars.slot(v.as_str()),
    }
}

fn graph_slot(g: &GraphNamePattern, vars: &mut Vars) -> Option<Slot> {
    match g {
        GraphNamePattern::DefaultGraph => None,
        GraphNamePattern::NamedNode(n) => Some(Slot::Term(iri(n))),
        GraphNamePattern::Variable(v) => Some(vars.slot(v.as_str())),
    }
}

fn graph_name(g: &GraphName) -> Option<Slot> {
    match g {
        GraphName::DefaultGraph => None,
        GraphName::NamedNode(n) => Some(Slot::Term(iri(n))),
    }
}

fn target(t: &GraphTarget) -> Target {
    match t {
        GraphTarget::DefaultGraph => Target::Default,
        GraphTarget::NamedNode(n) => Target::Named(n.as_str().to_owned()),
        GraphTarget::NamedGraphs => Target::AllNamed,
        GraphTarget::AllGraphs => Target::All,
    }
}

impl Update {
    /// Parses an update request (relative IRIs against `base`, as for a query).
    pub fn parse(text: &str, base: Option<&str>) -> Result<Update, QueryError> {
        crate::parse::with_parsed_update(text, base, |u| {
            let mut ops = Vec::with_capacity(u.operations.len());
            for op in &u.operations {
                ops.push(Self::operation(op, u)?);
            }
            Ok(Update { ops })
        })?
    }

    fn operation(
        op: &GraphUpdateOperation,
        request: &spargebra::Update,
    ) -> Result<Operation, QueryError> {
        Ok(match op {
            GraphUpdateOperation::InsertData { data } => {
                let mut out = Vec::with_capacity(data.len());
                for q in data {
                    out.push(Template {
                        s: match &q.subject {
                            oxrdf::NamedOrBlankNode::NamedNode(n) => Slot::Term(iri(n)),
                            oxrdf::NamedOrBlankNode::BlankNode(b) => {
                                Slot::Blank(b.as_str().to_owned())
                            }
                        },
                        p: Slot::Term(iri(&q.predicate)),
                        o: match &q.object {
                            oxrdf::Term::NamedNode(n) => Slot::Term(iri(n)),
                            oxrdf::Term::BlankNode(b) => Slot::Blank(b.as_str().to_owned()),
                            oxrdf::Term::Literal(l) => Slot::Term(literal_term(l)?),
                            _ => {
                                return Err(QueryError::Unsupported(
                                    "triple terms (RDF 1.2)".into(),
                                ))
                            }
                        },
                        g: graph_name(&q.graph_name),
                    });
                }
                Operation::InsertData(out)
            }
            GraphUpdateOperation::DeleteData { data } => {
                let mut out = Vec::with_capacity(data.len());
                for q in data {
                    out.push(Template {
                        s: Slot::Term(iri(&q.subject)),
                        p: Slot::Term(iri(&q.predicate)),
                        o: Slot::Term(ground(&q.object)?),
                        g: graph_name(&q.graph_name),
                    });
                }
                Operation::DeleteData(out)
            }
            GraphUpdateOperation::DeleteInsert {
                delete,
                insert,
                using,
                pattern,
            } => {
                let mut vars = Vars::default();
                let mut del = Vec::with_capacity(delete.len());
                for q in delete {
                    del.push(Template {
                        s: ground_slot(&q.subject, &mut vars)?,
                        p: pred_slot(&q.predicate, &mut vars),
                        o: ground_slot(&q.object, &mut vars)?,
                        g: graph_slot(&q.graph_name, &mut vars),
                    });
                }
                let mut ins = Vec::with_capacity(insert.len());
                for q in insert {
                    ins.push(Template {
                        s: term_slot(&q.subject, &mut vars)?,
                        p: pred_slot(&q.predicate, &mut vars),
                        o: term_slot(&q.object, &mut vars)?,
                        g: graph_slot(&q.graph_name, &mut vars),
                    });
                }
                let select = spargebra::Query::Select {
                    dataset: using.clone(),
                    pattern: GraphPattern::Project {
                        inner: pattern.clone(),
                        variables: vars
                            .0
                            .iter()
                            .map(|v| spargebra::term::Variable::new_unchecked(v.clone()))
                            .collect(),
                    },
                    base_iri: request.base_iri.clone(),
                };
                let mut query =
                    Query::translate("", &select, crate::functions::Registry::builtins())?;
                if let (Some(d), Some(u)) = (&mut query.dataset, using) {
                    // `WITH` alone (no `USING NAMED`): the store's named graphs stay visible.
                    d.all_named = u.named.is_none();
                }
                // Template variable `i` is output column `i` of the SELECT.
                debug_assert!(matches!(&query.form, Form::Select(c) if c.len() == vars.0.len()));
                Operation::Modify {
                    delete: del,
                    insert: ins,
                    query: Arc::new(query),
                }
            }
            GraphUpdateOperation::Load {
                silent,
                source,
                destination,
            } => Operation::Load {
                silent: *silent,
                source: source.as_str().to_owned(),
                into: match destination {
                    GraphName::DefaultGraph => None,
                    GraphName::NamedNode(n) => Some(n.as_str().to_owned()),
                },
            },
            GraphUpdateOperation::Clear { silent, graph } => Operation::Clear {
                silent: *silent,
                target: target(graph),
            },
            GraphUpdateOperation::Create { silent, graph } => Operation::Create {
                silent: *silent,
                graph: graph.as_str().to_owned(),
            },
            GraphUpdateOperation::Drop { silent, graph } => Operation::Drop {
                silent: *silent,
                target: target(graph),
            },
        })
    }

    /// Sets the dataset of every DELETE/INSERT's WHERE clause (the Protocol's
    /// `using-graph-uri` and `using-named-graph-uri`, §2.2.3); an error when an operation
    /// names its own (`USING`, `USING NAMED` or `WITH`), as the Protocol says.
    pub fn with_dataset(&mut self, default: &[String], named: &[String]) -> Result<(), QueryError> {
        if default.is_empty() && named.is_empty() {
            return Ok(());
        }
        for op in &mut self.ops {
            if let Operation::Modify { query, .. } = op {
                if query.dataset.is_some() {
                    return Err(QueryError::Invalid(
                        "the request gives using-graph-uri or using-named-graph-uri, and the \
                         update names its own dataset (USING or WITH)"
                            .into(),
                    ));
                }
                let q = Arc::get_mut(query).expect("a request's queries are its own until run");
                q.dataset = Some(crate::algebra::Dataset {
                    default: default.to_vec(),
                    named: named.to_vec(),
                    all_named: false,
                });
            }
        }
        Ok(())
    }

    /// How many operations the request has.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Runs the request's operations in order over `store` (untouched: the result is a new
    /// version). An operation that fails fails the request, and nothing of it is kept.
    pub fn apply(
        &self,
        store: &Arc<Store>,
        rt: &Runtime,
        options: &UpdateOptions,
    ) -> Result<Applied, QueryError> {
        let mut cur = store.clone();
        let mut touched: HashSet<[Id; 4]> = HashSet::new();
        let mut blanks = Blanks::default();
        let guard = Guard::new(options);
        for op in &self.ops {
            let next = {
                let mut e = cur.edit();
                run(op, &cur, &mut e, rt, options, &guard, &mut blanks)?;
                touched.extend(e.changes().into_iter().map(|(q, _)| q));
                e.finish()
            };
            cur = Arc::new(next);
        }
        let mut changes: Vec<([Id; 4], bool)> = touched
            .into_iter()
            .filter_map(|q| {
                let now = cur.contains(&q);
                (now != store.contains(&q)).then_some((q, now))
            })
            .collect();
        changes.sort_unstable();
        let store = Arc::try_unwrap(cur).unwrap_or_else(|shared| (*shared).clone());
        Ok(Applied { store, changes })
    }
}

/// Fresh blank node labels: unlike any the store holds, unlike each other.
#[derive(Default)]
struct Blanks {
    next: u64,
    stamp: Option<String>,
}

impl Blanks {
    fn fresh(&mut self, e: &Edit<'_>) -> String {
        let stamp = self.stamp.get_or_insert_with(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            format!("u{:x}{:x}", nanos, std::process::id())
        });
        loop {
            self.next += 1;
            let label = format!("{stamp}n{}", self.next);
            if e.dict().lookup(TermRef::Blank(&label)).is_none() {
                return label;
            }
        }
    }
}

/// A template slot's term for one solution (`None`: unbound, or not a term that position
/// takes); blank nodes through `scope`.
fn instantiate<'a>(
    slot: &'a Slot,
    row: &[Option<TermRef<'a>>],
    scope: &mut HashMap<String, String>,
    blanks: &mut Blanks,
    e: &Edit<'_>,
) -> Option<Term> {
    match slot {
        Slot::Term(t) => Some(t.clone()),
        Slot::Var(i) => row.get(*i).copied().flatten().map(Term::from),
        Slot::Blank(b) => {
            if !scope.contains_key(b) {
                let fresh = blanks.fresh(e);
                scope.insert(b.clone(), fresh);
            }
            Some(Term::Blank(scope[b].clone()))
        }
    }
}

/// A quad of terms as ids of the edit (interned when `intern`, else looked up: a quad with a
/// term the store lacks is not in it). `None` when a position holds a term it cannot (a
/// literal subject or predicate, a blank predicate or graph).
fn quad_ids(
    e: &mut Edit<'_>,
    t: [&Term; 3],
    g: Option<&Term>,
    intern: bool,
) -> Result<Option<[Id; 4]>, QueryError> {
    let ok = !matches!(t[0], Term::Literal { .. })
        && matches!(t[1], Term::Iri(_))
        && g.is_none_or(|g| matches!(g, Term::Iri(_)));
    if !ok {
        return Ok(None);
    }
    let mut q = [DEFAULT_GRAPH; 4];
    for (i, term) in t.into_iter().chain(g).enumerate() {
        q[i] = if intern {
            e.intern(term.as_ref())
                .map_err(|err| QueryError::Exec(err.to_string()))?
        } else {
            match e.dict().lookup(term.as_ref()) {
                Some(id) => id,
                None => return Ok(None),
            }
        };
    }
    Ok(Some(q))
}

/// Applies `templates` to each solution: insert (interning) or remove.
fn apply_templates(
    templates: &[Template],
    rows: &[Vec<Option<TermRef<'_>>>],
    e: &mut Edit<'_>,
    insert: bool,
    blanks: &mut Blanks,
    (guard, read): (&Guard, usize),
) -> Result<(), QueryError> {
    for (i, row) in rows.iter().enumerate() {
        if i % CHECK_EVERY == 0 {
            guard.check(read.saturating_add(e.held_bytes()), "the update's changes")?;
        }
        // Blank nodes are fresh per solution.
        let mut scope = HashMap::new();
        for t in templates {
            let terms = [&t.s, &t.p, &t.o].map(|s| instantiate(s, row, &mut scope, blanks, e));
            let g =
                t.g.as_ref()
                    .map(|s| instantiate(s, row, &mut scope, blanks, e));
            let (Some(s), Some(p), Some(o)) = (&terms[0], &terms[1], &terms[2]) else {
                continue;
            };
            let g = match &g {
                None => None,
                Some(None) => continue,
                Some(Some(g)) => Some(g),
            };
            if let Some(q) = quad_ids(e, [s, p, o], g, insert)? {
                if insert {
                    e.insert(q);
                } else {
                    e.remove(q);
                }
            }
        }
    }
    guard.check(read.saturating_add(e.held_bytes()), "the update's changes")
}

/// The graphs a target names that hold quads (for an IRI the store lacks, none).
fn graphs_of(target: &Target, store: &Store) -> Vec<Id> {
    match target {
        Target::Default => vec![DEFAULT_GRAPH],
        Target::Named(g) => store
            .id_of(TermRef::Iri(g))
            .filter(|&id| store.graph_len(id) > 0)
            .into_iter()
            .collect(),
        Target::AllNamed => store.named_graphs().collect(),
        Target::All => store.graph_ids().to_vec(),
    }
}

/// Removes every quad of graph `g`: refused before anything is read when the changes would
/// pass the memory limit.
fn clear_graph(store: &Store, e: &mut Edit<'_>, g: Id, guard: &Guard) -> Result<(), QueryError> {
    let n = store.graph_len(g) as usize;
    let quad = std::mem::size_of::<[Id; 4]>();
    let held = e
        .held_bytes()
        .saturating_add(n.saturating_mul(quad + nearflow_rdf::index::CHANGE_BYTES));
    guard.check(held, "the quads the update removes")?;
    let mut quads = Vec::with_capacity(n);
    store.for_each_match(g, [None; 3], |t| quads.push([t[0], t[1], t[2], g]));
    for (i, q) in quads.into_iter().enumerate() {
        if i % CHECK_EVERY == 0 {
            guard.check(0, "")?;
        }
        e.remove(q);
    }
    Ok(())
}

fn run(
    op: &Operation,
    store: &Arc<Store>,
    e: &mut Edit<'_>,
    rt: &Runtime,
    options: &UpdateOptions,
    guard: &Guard,
    blanks: &mut Blanks,
) -> Result<(), QueryError> {
    let missing = |silent: bool, what: String| -> Result<(), QueryError> {
        if silent {
            Ok(())
        } else {
            Err(QueryError::Invalid(what))
        }
    };
    match op {
        Operation::InsertData(ts) => {
            apply_templates(ts, &[Vec::new()], e, true, blanks, (guard, 0))
        }
        Operation::DeleteData(ts) => {
            apply_templates(ts, &[Vec::new()], e, false, blanks, (guard, 0))
        }
        Operation::Modify {
            delete,
            insert,
            query,
        } => {
            let prepared = query.plan(store, &guard.left(&options.query));
            let out = prepared.collect(rt, options.cancel.clone())?;
            let width = match &out.form {
                Form::Select(cols) => cols.len(),
                _ => 0,
            };
            // The solutions' terms, read before the changes are made, held beside the rows:
            // each cell twice (decoded, then borrowed), each row's two vectors, and the text
            // of each term decoded; counted as they are read.
            let cell = std::mem::size_of::<Option<TermRef<'_>>>()
                + std::mem::size_of::<Option<nearflow_rdf::TermCow<'_>>>();
            let per_row = width * cell + 2 * (std::mem::size_of::<Vec<()>>() + 16);
            let mut held = (out.rows.len() * width.max(1) * std::mem::size_of::<Id>())
                .saturating_add(out.rows.len().saturating_mul(per_row));
            guard.check(held, "the update's solutions")?;
            let mut read: Vec<Vec<Option<nearflow_rdf::TermCow<'_>>>> =
                Vec::with_capacity(out.rows.len());
            for (n, r) in out.rows.iter().enumerate() {
                let cells: Vec<_> = (0..width).map(|i| out.term(r, i)).collect();
                held = held.saturating_add(
                    cells
                        .iter()
                        .flatten()
                        .map(|t| match t {
                            nearflow_rdf::TermCow::Key(k) => k.capacity(),
                            nearflow_rdf::TermCow::Ref(_) => 0,
                        })
                        .sum::<usize>(),
                );
                read.push(cells);
                if n % CHECK_EVERY == 0 {
                    guard.check(held, "the update's solutions")?;
                }
            }
            guard.check(held, "the update's solutions")?;
            let rows: Vec<Vec<Option<TermRef<'_>>>> = read
                .iter()
                .map(|r| r.iter().map(|t| t.as_ref().map(|t| t.as_ref())).collect())
                .collect();
            // Update §3.1.3: the deletions and insertions of one solution sequence.
            apply_templates(delete, &rows, e, false, blanks, (guard, held))?;
            apply_templates(insert, &rows, e, true, blanks, (guard, held))
        }
        Operation::Load {
            silent,
            source,
            into,
        } => match load(source, into.as_deref(), e, &options.load, guard)? {
            Ok(()) => Ok(()),
            Err(why) => missing(*silent, why),
        },
        Operation::Clear { silent, target } => {
            let graphs = graphs_of(target, store);
            if graphs.is_empty() {
                if let Target::Named(g) = target {
                    return missing(*silent, format!("CLEAR: the store holds no graph <{g}>"));
                }
            }
            for g in graphs {
                clear_graph(store, e, g, guard)?;
            }
            Ok(())
        }
        Operation::Drop { silent, target } => {
            let graphs = graphs_of(target, store);
            if graphs.is_empty() {
                if let Target::Named(g) = target {
                    return missing(*silent, format!("DROP: the store holds no graph <{g}>"));
                }
            }
            for g in graphs {
                clear_graph(store, e, g, guard)?;
            }
            Ok(())
        }
        Operation::Create { silent, graph } => {
            let held = store
                .id_of(TermRef::Iri(graph))
                .is_some_and(|id| store.graph_len(id) > 0);
            if held {
                missing(
                    *silent,
                    format!("CREATE: the graph <{graph}> already exists"),
                )
            } else {
                Ok(())
            }
        }
    }
}

/// LOAD of a `file://` IRI into the edit (its blank nodes fresh), where `allowed` lets it.
/// The inner error is the file's (`SILENT` hides it); the outer one the request's limits,
/// checked after each batch the parse reads and as the quads are added (never hidden).
fn load(
    source: &str,
    into: Option<&str>,
    e: &mut Edit<'_>,
    allowed: &LoadFrom,
    guard: &Guard,
) -> Result<Result<(), String>, QueryError> {
    match read_file(source, into, e, allowed, guard)? {
        Ok(loaded) => {
            // The quads' changes and their terms in the edit, beside the parse still held.
            let quads = loaded.quads.len();
            let adding = quads
                .saturating_mul(nearflow_rdf::index::CHANGE_BYTES)
                .saturating_add(2 * loaded.dict.heap_bytes());
            guard.check(
                e.held_bytes()
                    .saturating_add(loaded_bytes(&loaded))
                    .saturating_add(adding),
                "LOAD's quads",
            )?;
            Ok(add_loaded_guarded(e, &loaded, Some(guard))?.map(|_| ()))
        }
        Err(why) => Ok(Err(why)),
    }
}

/// Bytes a parse holds: its terms and its quads.
fn loaded_bytes(loaded: &nearflow_rdf::load::Loaded) -> usize {
    loaded
        .dict
        .heap_bytes()
        .saturating_add(loaded.quads.capacity() * std::mem::size_of::<[Id; 4]>())
}

/// The file of a LOAD, parsed (see [`load`]).
fn read_file(
    source: &str,
    into: Option<&str>,
    e: &Edit<'_>,
    allowed: &LoadFrom,
    guard: &Guard,
) -> Result<Result<nearflow_rdf::load::Loaded, String>, QueryError> {
    use nearflow_rdf::load;
    let (path, format, reader) = match open_file(source, allowed) {
        Ok(f) => f,
        Err(why) => return Ok(Err(why)),
    };
    let mut loaded = load::Loaded::default();
    let mut stopped = None;
    let before = e.held_bytes();
    let r = load::load_reader_watched(
        &mut loaded,
        &path,
        format,
        reader,
        "l",
        source,
        into,
        &mut |l| match guard.check(before.saturating_add(loaded_bytes(l)), "LOAD's parse") {
            Ok(()) => Ok(()),
            Err(err) => {
                stopped = Some(err);
                Err(load::LoadError::Interrupted)
            }
        },
    );
    if let Some(err) = stopped {
        return Err(err);
    }
    Ok(r.map(|()| loaded)
        .map_err(|err| format!("LOAD <{source}>: {err}")))
}

/// The file a LOAD names, where `allowed` lets it be read: its path, format and reader.
fn open_file(
    source: &str,
    allowed: &LoadFrom,
) -> Result<
    (
        PathBuf,
        nearflow_rdf::load::Format,
        Box<dyn std::io::Read + Send>,
    ),
    String,
> {
    use nearflow_rdf::load;
    let path = load::file_path(source).ok_or_else(|| {
        format!("LOAD <{source}>: nearflow loads local files only (a file:// IRI); it fetches nothing from the network")
    })?;
    match allowed {
        LoadFrom::Nowhere => {
            return Err(format!(
                "LOAD <{source}>: this endpoint does not read files (start it with --load-dir DIR to allow files under DIR)"
            ))
        }
        LoadFrom::AnyFile => {}
        LoadFrom::Under(dir) => {
            let inside = std::fs::canonicalize(&path)
                .ok()
                .zip(std::fs::canonicalize(dir).ok())
                .is_some_and(|(p, d)| p.starts_with(d));
            if !inside {
                return Err(format!(
                    "LOAD <{source}>: this endpoint reads files under {} only",
                    dir.display()
                ));
            }
        }
    }
    // A FIFO or a device would block the store's one writer for as long as it gives nothing.
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(format!("LOAD <{source}>: not a regular file")),
        Err(err) => return Err(format!("LOAD <{source}>: {err}")),
    }
    let format = load::Format::from_path(&path)
        .ok_or_else(|| format!("LOAD <{source}>: the file's format is not known from its name"))?;
    let reader = load::open_input(&path).map_err(|err| format!("LOAD <{source}>: {err}"))?;
    Ok((path, format, reader))
}

/// Inserts the quads of `loaded` (a parsed file) into the edit, each of its blank nodes as a
/// fresh one (Update §3.1.1: new data never shares the store's blank nodes). Returns how many
/// quads it read.
pub fn add_loaded(e: &mut Edit<'_>, loaded: &nearflow_rdf::load::Loaded) -> Result<usize, String> {
    add_loaded_guarded(e, loaded, None).map_err(|err| err.to_string())?
}

/// [`add_loaded`], checking `guard` (when given) as the quads are added: its error is the
/// outer one.
fn add_loaded_guarded(
    e: &mut Edit<'_>,
    loaded: &nearflow_rdf::load::Loaded,
    guard: Option<&Guard>,
) -> Result<Result<usize, String>, QueryError> {
    let mut blanks = Blanks::default();
    let mut ids: HashMap<Id, Id> = HashMap::new();
    for (n, q) in loaded.quads.iter().enumerate() {
        if let Some(g) = guard.filter(|_| n % CHECK_EVERY == 0) {
            g.check(0, "")?;
        }
        let mut out = [DEFAULT_GRAPH; 4];
        for (i, &id) in q.iter().enumerate() {
            if i == 3 && id == DEFAULT_GRAPH {
                continue;
            }
            out[i] = match ids.get(&id) {
                Some(&x) => x,
                None => {
                    let x = match loaded.dict.term(id).as_ref() {
                        TermRef::Blank(_) => {
                            let label = blanks.fresh(e);
                            e.intern(TermRef::Blank(&label))
                        }
                        term => e.intern(term),
                    };
                    let x = match x {
                        Ok(x) => x,
                        Err(err) => return Ok(Err(err.to_string())),
                    };
                    ids.insert(id, x);
                    x
                }
            };
        }
        e.insert(out);
    }
    Ok(Ok(loaded.quads.len()))
}
