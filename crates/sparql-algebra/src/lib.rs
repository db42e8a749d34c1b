//! # nearflow-sparql-algebra — SPARQL's language: parsing, the algebra, its rewrites, expressions
//!
//! The first three stages of a query (the fourth, planning against a store and running, is
//! `nearflow-sparql`'s):
//!
//! 1. **parse** (`parse.rs`): `spargebra` parses the text (nesting bounded first, `bound.rs`; a
//!    syntax error names its line and column and shows the line with a caret);
//! 2. **algebra** (`algebra/`): SPARQL's algebra over terms, variables as columns, quad
//!    patterns with their graph, every function call resolved in a [`functions::Registry`];
//! 3. **rewrites** (`rewrite/`): passes that keep every answer on every store (GRAPH into
//!    patterns, EXISTS to semi-, anti- and mark joins, OPTIONAL + `!bound` to anti-joins,
//!    constant folding, filter pushdown, BGP merging, constants fixed by `=`).
//!
//! They make a [`Query`], which reads no store's indexes and can be planned against any number
//! of stores or store versions. What an expression means is here too (`expr.rs`, `value.rs`,
//! `functions/`): constant folding evaluates it, and the operators of a run evaluate the same
//! code over the dictionary's terms (`nearflow-store`'s) and the terms a query computes
//! (`minted.rs`, charged to the run's memory account).
//!
//! ## Files
//!
//! - `lib.rs` — [`Query`] (stages 1–3) and [`Options`], how a query is read and run.
//! - `parse.rs`, `bound.rs` — parsing, and the nesting bound read before it.
//! - `algebra/` — the algebra's types, the translation from `spargebra`, its analyses.
//! - `rewrite/` — the rewrite passes, one per file, with their plan-shape tests.
//! - `expr.rs`, `value.rs`, `functions/` — expression semantics: values, comparison,
//!   promotion, the function registry and its families.
//! - `path.rs` — property paths over terms, and their walker over the store.
//! - `minted.rs` — ids for the terms a query computes.
//! - `show.rs` — the algebra and its expressions as `--explain` prints them.
//! - `error.rs` — [`QueryError`], which every stage returns.

pub mod algebra;
mod bound;
mod error;
pub mod expr;
pub mod functions;
pub mod minted;
pub mod parse;
pub mod path;
pub mod rewrite;
pub mod show;
pub mod value;

use std::sync::Arc;

use spargebra::term::NamedNodePattern;

use self::algebra::{outer_projection, Dataset, Form, Node, TemplateSlot, Translator};
pub use self::error::QueryError;
pub use self::parse::{
    parse, parse_with_base, stack_room, syntax_message, MAX_ELEMENTS, MAX_LEVELS, MAX_NESTING,
};
use nearflow_store::term::Term;

/// The most columns a query's rows may have (its variables, and a column per `EXISTS` inside
/// an expression): the widest row the flow operators are built for.
pub const MAX_WIDTH: usize = 512;

/// What a recursive pass over a query keeps free on its stack before it goes one level deeper.
const RED_ZONE: usize = 256 << 10;
/// The stack segment it then continues on.
const SEGMENT: usize = 4 << 20;

/// Runs one level of a recursive pass over a query (translation, rewriting, planning, building
/// the flow plan, explaining, evaluating an expression) on the stack it has, or on a new segment
/// when less than `RED_ZONE` (256 KiB) is left. [`algebra::MAX_DEPTH`] and [`MAX_NESTING`] bound the
/// work; this bounds the stack, whatever the caller's stack (a runtime worker's is 2 MiB) and
/// the build's frame sizes (an unoptimised build's are tens of times larger: 27 KB per level
/// of translation, where 512 levels must fit).
#[inline]
pub fn deeper<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}

/// The memory limit of a query run from the command line when none is given: three quarters of
/// this host's memory (`None` where it cannot be read), so that a query too large for the
/// machine stops with an error rather than waking the kernel's out-of-memory killer.
pub fn default_memory_limit() -> Option<usize> {
    nearflow_topo::host::memory().map(|m| (m / 4 * 3) as usize)
}

/// How to run a query. [`Options::standard`] is what every front end starts from (the command
/// line, the endpoint, Python, a cluster's workers), each setting only what its own flags set;
/// [`Options::default`] has no limit at all, for a program that sets its own.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Degree of parallelism (default: the runtime machine's PU count, or 1 when unknown).
    pub dop: Option<usize>,
    /// Time every operator (for `--explain`; costs a clock read per operator step).
    pub timing: bool,
    /// Packet size in bytes (default: half the L2 of the runtime's machine, 001 §5.2).
    pub packet_bytes: Option<usize>,
    /// How long a run may take from its start; past it the run's request is cancelled inside
    /// the runtime (its tasks stop within a step) and `Running::finish` says so.
    pub timeout: Option<std::time::Duration>,
    /// Bytes the run's operators may hold (sorts, hash tables, DISTINCT's set, rows waiting
    /// on a hash table being built), together with an answer its caller holds
    /// (`Solutions::collect`, a CONSTRUCT's triples); past it the run is stopped the same
    /// way. Operators are charged what they are about to allocate, before they allocate it.
    /// The planner plans within it: a join whose hash table would take the pattern's tables
    /// past a quarter of it by the estimates looks its rows up in the store instead (an index
    /// join), where it can. No limit by default ([`default_memory_limit`] is the command
    /// line's).
    pub memory_limit: Option<usize>,
    /// A folder where operators whose state would pass [`memory_limit`](Self::memory_limit)
    /// write their rows instead of stopping the run: a hash join partitions both its inputs
    /// into files and joins them a partition at a time (a grace hash join), a DISTINCT whose
    /// input is in no particular order writes sorted runs and merges them. The files are
    /// unnamed, so they are gone when the run ends, fails or is killed. `None` (the default):
    /// the limit stops the run.
    pub spill: Option<std::path::PathBuf>,
    /// The most bytes a run's spilled rows may take on disk, all its files together; past it
    /// the run stops with an error that says so. `None`: half of what the spill folder's file
    /// system has free when the run starts, so that no query fills the disk.
    pub spill_limit: Option<u64>,
    /// Record each operator's largest state (hash tables, sorted rows, DISTINCT's set) and
    /// which worker sent what to which (`PlanBuilder::profile_threads`), in the run's
    /// `PlanStats::threads`: for the simulator's calibration. Off by default.
    pub profile: bool,
    /// The base IRI relative IRIs in the query resolve against (a `BASE` in the query comes
    /// after it). Without one, a relative IRI is a syntax error.
    pub base: Option<String>,
    /// The functions the query's calls are resolved in; `None` (the default): the built-ins
    /// ([`Registry::builtins`](functions::Registry::builtins)). Add a function of your own to a
    /// copy of them.
    pub functions: Option<Arc<functions::Registry>>,
}

impl Options {
    /// The defaults of every front end, written once:
    ///
    /// | option | default |
    /// |---|---|
    /// | time limit | none (the endpoint sets its own: 60 s) |
    /// | memory limit | three quarters of this host's memory ([`default_memory_limit`]; the endpoint shares half of it among the queries it runs at once) |
    /// | past the memory limit | rows spilled to the system's temporary folder, at most half of what its file system has free when the run starts |
    /// | parallelism, packet size | the runtime machine's PUs, half its L2 |
    /// | functions | the built-ins ([`functions::Registry::builtins`]) |
    /// | base IRI | none |
    pub fn standard() -> Options {
        static LIMIT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
        Options {
            memory_limit: *LIMIT.get_or_init(default_memory_limit),
            spill: Some(std::env::temp_dir()),
            ..Options::default()
        }
    }

    /// The spill limit of a run starting now in `dir`: [`spill_limit`](Self::spill_limit),
    /// else half of what `dir`'s file system has free (nothing where that cannot be read).
    pub fn spill_bytes(&self, dir: &std::path::Path) -> u64 {
        self.spill_limit
            .unwrap_or_else(|| nearflow_topo::host::disk_available(dir).map_or(0, |free| free / 2))
    }
}

/// A parsed, translated and rewritten query: stages 1–3, knowing no store. Plan it against a
/// store with `nearflow_sparql::Plan::plan`, as often as wanted.
#[derive(Debug)]
pub struct Query {
    /// What it returns.
    pub form: Form,
    /// The algebra as translated from the text.
    pub translated: Node,
    /// The algebra after the rewrite passes: what is planned.
    pub optimized: Node,
    /// Column names (variables; `_:label` for a blank node of the query; a name with a space
    /// for a column of the engine's own).
    pub names: Vec<String>,
    /// The dataset clauses (`FROM`, `FROM NAMED`), when the query has any.
    pub dataset: Option<Dataset>,
    /// Functions it calls that nearflow does not know (IRIs): each call is an expression
    /// error (§17.6), so a FILTER over one is false; worth telling the user.
    pub unknown_functions: Vec<String>,
}

impl Query {
    /// Parses, translates and rewrites `text` (relative IRIs against [`Options::base`]).
    pub fn parse(text: &str, options: &Options) -> Result<Query, QueryError> {
        parse::with_parsed(text, options.base.as_deref(), |query| {
            let functions = options
                .functions
                .as_ref()
                .unwrap_or(functions::Registry::builtins());
            Self::translate(text, query, functions)
        })?
    }

    /// Stages 2 and 3 over `spargebra`'s tree of `text`.
    pub fn translate(
        text: &str,
        query: &spargebra::Query,
        functions: &Arc<functions::Registry>,
    ) -> Result<Query, QueryError> {
        let mut tr = Translator::new(functions);
        let (pattern, dataset, base) = match query {
            spargebra::Query::Select {
                pattern,
                dataset,
                base_iri,
            }
            | spargebra::Query::Ask {
                pattern,
                dataset,
                base_iri,
            }
            | spargebra::Query::Construct {
                pattern,
                dataset,
                base_iri,
                ..
            }
            | spargebra::Query::Describe {
                pattern,
                dataset,
                base_iri,
            } => (pattern, dataset, base_iri),
        };
        tr.base = base.as_ref().map(|b| b.as_str().to_owned());
        let dataset = dataset.as_ref().map(|d| Dataset {
            default: d.default.iter().map(|n| n.as_str().to_owned()).collect(),
            named: d
                .named
                .iter()
                .flatten()
                .map(|n| n.as_str().to_owned())
                .collect(),
            all_named: false,
        });
        let mut node = tr.pattern(pattern)?;
        let form = match query {
            spargebra::Query::Select { .. } => {
                // The projection is the outermost Project (spargebra always makes one).
                let mut cols = outer_projection(&node)
                    .ok_or_else(|| QueryError::Invalid("a SELECT without a projection".into()))?;
                // `SELECT *`: the variables in the order they first appear in the pattern
                // (columns are numbered in that order as the pattern is translated), not
                // `spargebra`'s.
                if parse::select_star(text) {
                    cols.sort_unstable();
                }
                Form::Select(
                    cols.iter()
                        .map(|&c| (tr.vars.names[c].clone(), c))
                        .collect(),
                )
            }
            spargebra::Query::Ask { .. } => {
                node = Node::Slice(Box::new(node), 0, Some(1), Vec::new());
                Form::Ask
            }
            spargebra::Query::Describe { .. } => Form::Describe(
                outer_projection(&node)
                    .ok_or_else(|| QueryError::Invalid("a DESCRIBE without a projection".into()))?,
            ),
            spargebra::Query::Construct { template, .. } => {
                let mut out = Vec::new();
                for t in template {
                    let s = template_slot(&mut tr, &t.subject)?;
                    let p = match &t.predicate {
                        NamedNodePattern::NamedNode(n) => {
                            TemplateSlot::Term(Term::Iri(n.as_str().to_owned()))
                        }
                        NamedNodePattern::Variable(v) => TemplateSlot::Var(tr.vars.col(v.as_str())),
                    };
                    let o = template_slot(&mut tr, &t.object)?;
                    out.push([s, p, o]);
                }
                Form::Construct(out)
            }
        };
        let translated = node.clone();
        let optimized = rewrite::optimize(node, &mut tr.vars)?;
        if tr.vars.len() > MAX_WIDTH {
            return Err(QueryError::Unsupported(format!(
                "a query of {} variables (at most {}, counting a column per EXISTS inside an \
                 expression)",
                tr.vars.len(),
                MAX_WIDTH
            )));
        }
        Ok(Query {
            form,
            translated,
            optimized,
            names: tr.vars.names,
            dataset,
            unknown_functions: tr.unknown_functions,
        })
    }

    /// The graphs its `FROM` and `FROM NAMED` clauses name, each once, in order.
    pub fn dataset_iris(&self) -> Vec<String> {
        let all = self
            .dataset
            .iter()
            .flat_map(|d| d.default.iter().chain(&d.named));
        all.cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Replaces the query's `FROM` and `FROM NAMED` with the graphs a request names (the
    /// SPARQL 1.1 Protocol's `default-graph-uri` and `named-graph-uri`, §2.1.4; Python's
    /// `default_graph` and `named_graphs`); a request that names none leaves them.
    pub fn use_dataset(&mut self, default: Vec<String>, named: Vec<String>) {
        if !default.is_empty() || !named.is_empty() {
            self.dataset = Some(Dataset {
                default,
                named,
                all_named: false,
            });
        }
    }
}

fn template_slot(
    tr: &mut Translator,
    p: &spargebra::term::TermPattern,
) -> Result<TemplateSlot, QueryError> {
    use spargebra::term::TermPattern;
    Ok(match p {
        TermPattern::NamedNode(n) => TemplateSlot::Term(Term::Iri(n.as_str().to_owned())),
        TermPattern::Literal(l) => TemplateSlot::Term(algebra::literal_term(l)?),
        TermPattern::BlankNode(b) => TemplateSlot::Blank(b.as_str().to_owned()),
        TermPattern::Variable(v) => TemplateSlot::Var(tr.vars.col(v.as_str())),
        _ => return Err(QueryError::Unsupported("triple terms (RDF 1.2)".into())),
    })
}
