//! # nearflow-sparql — a parallel SPARQL 1.1 engine on the nearflow runtime
//!
//! A query is parsed by `spargebra`, translated to our algebra ([`algebra`]), planned from the
//! store's statistics ([`plan`]) and run as one flow plan — one request of the runtime
//! ([`exec`]). Queries started together run concurrently, each its own request (LAS §6: the
//! multi-query test). The store it reads is `nearflow-rdf`'s.
//!
//! ```
//! use std::sync::Arc;
//! use nearflow_rdf::{load, Store};
//! let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
//! let mut l = load::Loaded::default();
//! load::load_reader(&mut l, "t.ttl".as_ref(), load::Format::Turtle,
//!     "<http://a> <http://knows> <http://b> , <http://c> .".as_bytes(), "").unwrap();
//! let store = Arc::new(l.into_store(&machine).unwrap());
//! let rt = nearflow_rt::Runtime::builder(machine).build().unwrap();
//! let q = nearflow_sparql::prepare(&store,
//!     "SELECT ?x WHERE { <http://a> <http://knows> ?x } ORDER BY ?x",
//!     &nearflow_sparql::Options::default()).unwrap();
//! let out = q.run_collect(&rt).unwrap();
//! let names: Vec<String> = out.rows.iter().map(|r| out.term(r, 0).unwrap().to_string()).collect();
//! assert_eq!(names, ["<http://b>", "<http://c>"]);
//! ```
//!
//! ## Files
//!
//! - `lib.rs` — preparing, running, streaming and explaining a query; its error type.
//! - `algebra.rs` — `spargebra`'s algebra to ours; unsupported features refused by name.
//! - `expr.rs` — expression semantics: values, comparison, promotion, functions.
//! - `minted.rs` — ids for the terms a query computes.
//! - `plan.rs` — the cost-based planner and its rewrites.
//! - `exec.rs` — the flow operators a query plan is built from.
//! - `results.rs` — output formats (`sparesults`, the terminal table, N-Triples/Turtle).

pub mod aggregate;
pub mod algebra;
pub mod exec;
pub mod expr;
pub mod functions;
pub mod minted;
pub mod path;
pub mod plan;
pub mod results;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use nearflow_flow::{PlanBuilder, PlanHandle, PlanShape, PlanStats};
use nearflow_rt::Runtime;
use spargebra::term::{NamedNodePattern, TermPattern};

use self::algebra::{literal_term, Node, Translator};
pub use self::exec::Rows;
use self::expr::EvalCx;
use self::minted::Minted;
use self::plan::{Op, Phys, Planner};
use nearflow_rdf::store::Store;
use nearflow_rdf::term::{Id, Term, TermRef, UNBOUND};

/// Why a query could not run.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// A syntax error: the position, what was expected, and the line with a caret.
    #[error("SPARQL syntax error: {0}")]
    Syntax(String),
    /// Valid SPARQL this engine does not evaluate (refused rather than answered wrongly).
    #[error("not supported: {0}")]
    Unsupported(String),
    /// A query that cannot be evaluated (a bad regular expression, …).
    #[error("invalid query: {0}")]
    Invalid(String),
    /// The plan failed while running.
    #[error("query execution failed: {0}")]
    Exec(String),
    /// The query ran past [`Options::timeout`] and was stopped.
    #[error("the query ran past its time limit of {0:.3?} and was stopped")]
    Timeout(std::time::Duration),
    /// The query's operators would have held more than [`Options::memory_limit`]; it was
    /// stopped.
    #[error("the query would hold more than its memory limit of {limit} bytes ({operator} asked for {wanted} in all) and was stopped")]
    MemoryLimit {
        /// The operator that asked.
        operator: String,
        /// The limit.
        limit: usize,
        /// What the query would have held.
        wanted: usize,
    },
}

impl QueryError {
    fn from_flow(e: nearflow_flow::FlowError) -> Self {
        use nearflow_flow::FlowError;
        match e {
            FlowError::TimeLimit { limit } => QueryError::Timeout(limit),
            FlowError::MemoryLimit {
                operator,
                limit,
                wanted,
            } => QueryError::MemoryLimit {
                operator,
                limit,
                wanted,
            },
            other => QueryError::Exec(other.to_string()),
        }
    }
}

/// How to run a query.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Degree of parallelism (default: the runtime machine's PU count, or 1 when unknown).
    pub dop: Option<usize>,
    /// Time every operator (for `--explain`; costs a clock read per row in some operators).
    pub timing: bool,
    /// Packet size in bytes (default: half the L2 of the runtime's machine, 001 §5.2).
    pub packet_bytes: Option<usize>,
    /// How long a run may take from its start; past it the run's request is cancelled inside
    /// the runtime (its tasks stop within a step) and [`Running::finish`] says so.
    pub timeout: Option<std::time::Duration>,
    /// Bytes the run's operators may hold (sorts, hash tables, DISTINCT's set); past it the
    /// run is stopped the same way.
    pub memory_limit: Option<usize>,
    /// Record each operator's largest state (hash tables, sorted rows, DISTINCT's set) and
    /// which worker sent what to which (`PlanBuilder::profile_threads`), in the run's
    /// `PlanStats::threads`: for the simulator's calibration. Off by default.
    pub profile: bool,
    /// The base IRI relative IRIs in the query resolve against (a `BASE` in the query comes
    /// after it). Without one, a relative IRI is a syntax error.
    pub base: Option<String>,
}

/// A position of a CONSTRUCT template.
#[derive(Clone, Debug)]
pub enum TemplateSlot {
    /// A variable's column.
    Var(usize),
    /// A constant.
    Term(Term),
    /// A blank node: a fresh one per solution.
    Blank(String),
}

/// What a query returns.
#[derive(Clone, Debug)]
pub enum Form {
    /// Solutions over these variables (names, columns).
    Select(Vec<(String, usize)>),
    /// Whether there is a solution.
    Ask,
    /// A graph from a template.
    Construct(Vec<[TemplateSlot; 3]>),
}

/// A planned query, ready to run (as often as wanted).
pub struct Prepared {
    /// What it returns.
    pub form: Form,
    /// The physical plan.
    pub phys: Phys,
    store: Arc<Store>,
    width: usize,
    options: Options,
    names: Vec<String>,
}

/// Parses and plans `text` against `store`.
pub fn prepare(store: &Arc<Store>, text: &str, options: &Options) -> Result<Prepared, QueryError> {
    let query = parse_with_base(text, options.base.as_deref())?;
    let mut tr = Translator::new(store);
    tr.base = match &query {
        spargebra::Query::Select { base_iri, .. }
        | spargebra::Query::Ask { base_iri, .. }
        | spargebra::Query::Construct { base_iri, .. }
        | spargebra::Query::Describe { base_iri, .. } => {
            base_iri.as_ref().map(|b| b.as_str().to_owned())
        }
    };
    let (form, pattern, dataset) = match &query {
        spargebra::Query::Select {
            pattern, dataset, ..
        } => (None, pattern, dataset),
        spargebra::Query::Ask {
            pattern, dataset, ..
        } => (Some(Form::Ask), pattern, dataset),
        spargebra::Query::Construct {
            pattern, dataset, ..
        } => (Some(Form::Construct(Vec::new())), pattern, dataset),
        spargebra::Query::Describe { .. } => {
            return Err(QueryError::Unsupported("DESCRIBE".into()))
        }
    };
    if dataset.is_some() {
        return Err(QueryError::Unsupported(
            "FROM / FROM NAMED (datasets)".into(),
        ));
    }
    let mut node = tr.pattern(pattern)?;
    let form = match form {
        None => {
            // The projection is the outermost Project (spargebra always makes one).
            let mut cols = outer_projection(&node)
                .ok_or_else(|| QueryError::Invalid("a SELECT without a projection".into()))?;
            // `SELECT *`: the variables in the order they first appear in the pattern (columns
            // are numbered in that order as the pattern is translated), not `spargebra`'s.
            if select_star(text) {
                cols.sort_unstable();
            }
            Form::Select(
                cols.iter()
                    .map(|&c| (tr.vars.names[c].clone(), c))
                    .collect(),
            )
        }
        Some(Form::Ask) => {
            node = Node::Slice(Box::new(node), 0, Some(1));
            Form::Ask
        }
        Some(_) => {
            let spargebra::Query::Construct { template, .. } = &query else {
                unreachable!("matched above")
            };
            let mut out = Vec::new();
            for t in template {
                let slot = |tr: &mut Translator<'_>,
                            p: &TermPattern|
                 -> Result<TemplateSlot, QueryError> {
                    Ok(match p {
                        TermPattern::NamedNode(n) => {
                            TemplateSlot::Term(Term::Iri(n.as_str().to_owned()))
                        }
                        TermPattern::Literal(l) => TemplateSlot::Term(literal_term(l)),
                        TermPattern::BlankNode(b) => TemplateSlot::Blank(b.as_str().to_owned()),
                        TermPattern::Variable(v) => TemplateSlot::Var(tr.vars.col(v.as_str())),
                        #[allow(unreachable_patterns)]
                        _ => {
                            return Err(QueryError::Unsupported("quoted triples (RDF 1.2)".into()))
                        }
                    })
                };
                let s = slot(&mut tr, &t.subject)?;
                let p = match &t.predicate {
                    NamedNodePattern::NamedNode(n) => {
                        TemplateSlot::Term(Term::Iri(n.as_str().to_owned()))
                    }
                    NamedNodePattern::Variable(v) => TemplateSlot::Var(tr.vars.col(v.as_str())),
                };
                let o = slot(&mut tr, &t.object)?;
                out.push([s, p, o]);
            }
            Form::Construct(out)
        }
    };
    if tr.vars.len() > exec::MAX_WIDTH {
        return Err(QueryError::Unsupported(format!(
            "a query of {} variables (at most {})",
            tr.vars.len(),
            exec::MAX_WIDTH
        )));
    }
    let dop = options
        .dop
        .unwrap_or_else(|| store.machine().pu_count().max(1))
        .max(1);
    let phys = Planner { store, dop }.plan(node);
    Ok(Prepared {
        form,
        phys,
        store: store.clone(),
        width: tr.vars.len(),
        options: Options {
            dop: Some(dop),
            ..options.clone()
        },
        names: tr.vars.names,
    })
}

/// How deep brackets (`(`, `{`, `[`) may nest in a query's text, and how many unary operators
/// (`!`, `-`, `+`) may follow each other: the parser recurses once per level, and about 3,500
/// levels overflowed the stack (issue 40). No hand-written query comes near.
pub const MAX_NESTING: usize = 256;

/// Parses a query: its nesting is checked first ([`MAX_NESTING`]), then `spargebra` parses it;
/// a syntax error is one line with its position.
pub fn parse(text: &str) -> Result<spargebra::Query, QueryError> {
    parse_with_base(text, None)
}

/// [`parse`], with relative IRIs resolved against `base`.
pub fn parse_with_base(text: &str, base: Option<&str>) -> Result<spargebra::Query, QueryError> {
    check_nesting(text)?;
    let mut parser = spargebra::SparqlParser::new();
    if let Some(b) = base {
        parser = parser.with_base_iri(b).map_err(|e| {
            QueryError::Invalid(format!("the base IRI {b:?} is not an absolute IRI: {e}"))
        })?;
    }
    parser
        .parse_query(text)
        .map_err(|e| QueryError::Syntax(syntax_message(text, &e.to_string())))
}

/// Refuses text whose brackets nest, or whose unary operators chain, past [`MAX_NESTING`],
/// naming the line and column. Strings, IRIs and comments are skipped.
fn check_nesting(text: &str) -> Result<(), QueryError> {
    let chars: Vec<char> = text.chars().collect();
    let (mut depth, mut unary) = (0usize, 0usize);
    let (mut line, mut col) = (1usize, 0usize);
    let mut i = 0;
    // Whether the last token could end an operand (then `-`/`+` is binary).
    let mut after_operand = false;
    let refuse = |line: usize, col: usize, what: &str| {
        Err(QueryError::Syntax(format!(
            "at {line}:{col}: {what} more than {MAX_NESTING} deep; nearflow refuses such a query"
        )))
    };
    while i < chars.len() {
        let c = chars[i];
        col += 1;
        let skip_to = |i: &mut usize, line: &mut usize, col: &mut usize, end: &[char]| {
            // Advance past the closing `end` (or to the end of the text).
            *i += 1;
            while *i < chars.len() {
                if chars[*i..].starts_with(end) {
                    *i += end.len();
                    *col += end.len();
                    return;
                }
                if chars[*i] == '\\' {
                    *i += 1;
                    *col += 1;
                }
                if chars.get(*i) == Some(&'\n') {
                    *line += 1;
                    *col = 0;
                } else {
                    *col += 1;
                }
                *i += 1;
            }
        };
        match c {
            '\n' => {
                line += 1;
                col = 0;
                i += 1;
                continue;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '"' | '\'' => {
                let long = chars[i..].starts_with(&[c, c, c]);
                if long {
                    i += 2;
                    skip_to(&mut i, &mut line, &mut col, &[c, c, c]);
                } else {
                    skip_to(&mut i, &mut line, &mut col, &[c]);
                }
                after_operand = true;
                unary = 0;
                continue;
            }
            '<' => {
                // An IRI if a `>` closes it before any space; otherwise the operator.
                let end = chars[i + 1..]
                    .iter()
                    .position(|&x| x == '>' || x.is_whitespace() || x == '<');
                if let Some(k) = end.filter(|&k| chars[i + 1 + k] == '>') {
                    i += k + 2;
                    col += k + 1;
                    after_operand = true;
                    unary = 0;
                    continue;
                }
                after_operand = false;
            }
            '(' | '{' | '[' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return refuse(line, col, "brackets nested");
                }
                after_operand = false;
                unary = 0;
            }
            ')' | '}' | ']' => {
                depth = depth.saturating_sub(1);
                after_operand = true;
                unary = 0;
            }
            '!' | '-' | '+' if !after_operand => {
                unary += 1;
                if unary > MAX_NESTING {
                    return refuse(line, col, "unary operators chained");
                }
            }
            c if c.is_whitespace() => {}
            c => {
                after_operand = c.is_alphanumeric() || "?$_:.".contains(c);
                unary = 0;
            }
        }
        i += 1;
    }
    Ok(())
}

/// A syntax error as a user reads it: where (line and column), what was expected in plain
/// words where `spargebra` lists grammar tokens (the query form, an undeclared prefix, a SPARQL
/// Update request given as a query), and the line with a caret under the position.
pub fn syntax_message(text: &str, message: &str) -> String {
    let flat = message.split_whitespace().collect::<Vec<_>>().join(" ");
    // "error at L:C: …"
    let mut pos = flat.strip_prefix("error at ").and_then(|r| {
        let (l, rest) = r.split_once(':')?;
        let (c, _) = rest.split_once(':')?;
        Some((l.parse::<usize>().ok()?, c.trim().parse::<usize>().ok()?))
    });
    let reason = flat
        .split_once(": ")
        .and_then(|(_, r)| r.split_once(": ").map(|(_, x)| x).or(Some(r)))
        .unwrap_or(&flat)
        .to_owned();
    let line_of = |l: usize| -> Vec<char> {
        text.lines()
            .nth(l.saturating_sub(1))
            .unwrap_or("")
            .chars()
            .collect()
    };
    let mut what = None;
    if spargebra::SparqlParser::new().parse_update(text).is_ok() {
        if let Some((at, _)) = query_form_word(text) {
            pos = Some(line_col(text, at));
        }
        what = Some(
            "this is a SPARQL Update request (INSERT, DELETE, LOAD, CLEAR, …); `nearflow sparql` \
             evaluates queries (SELECT, CONSTRUCT, ASK, DESCRIBE), and updates are not supported yet"
                .to_owned(),
        );
    } else if flat.contains("Prefix not found") {
        if let Some((l, c)) = pos {
            // The prefixed name ends just before column C of line L.
            let line = line_of(l);
            let end = c.saturating_sub(1).min(line.len());
            let start = line[..end]
                .iter()
                .rposition(|ch| ch.is_whitespace() || "{(.;,".contains(*ch))
                .map_or(0, |i| i + 1);
            let token: String = line[start..end].iter().collect();
            if let Some((prefix, _)) = token.split_once(':') {
                what = Some(format!(
                    "undeclared prefix '{prefix}:' (no PREFIX declares it)"
                ));
            }
        }
        what.get_or_insert_with(|| "undeclared prefix".to_owned());
    } else if let Some((at, word)) = query_form_word(text) {
        // The first word after the prologue is not a query form: say so there (`spargebra`
        // reports the furthest point its grammar reached, e.g. "expected CONSTRUCT" inside
        // the pattern for `SELEC * WHERE …`).
        let upper = word.to_ascii_uppercase();
        if !["SELECT", "CONSTRUCT", "ASK", "DESCRIBE"].contains(&upper.as_str()) {
            pos = Some(line_col(text, at));
            what = Some(format!(
                "expected SELECT, CONSTRUCT, ASK or DESCRIBE (after any PREFIX and BASE \
                 declarations), found '{word}'"
            ));
        }
    }
    if what.is_none() && reason.starts_with("expected one of") && reason.contains("ABS") {
        // Every function name and operator that may start an expression.
        what = Some(
            "expected an expression (a variable, a term, a function call or a bracket)".into(),
        );
    }
    let what = what.unwrap_or_else(|| match reason.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &reason[..i]),
        None => reason.clone(),
    });
    match pos {
        Some((l, c)) => {
            let line: String = line_of(l).into_iter().take(160).collect();
            let caret = " ".repeat(c.saturating_sub(1).min(line.chars().count()));
            format!("at {l}:{c}: {what}\n  {line}\n  {caret}^")
        }
        None => what,
    }
}

/// The 1-based line and column (in characters) of byte offset `at`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line_start = before.rfind('\n').map_or(0, |nl| nl + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// The first word after the query's prologue (comments, PREFIX and BASE declarations) and its
/// byte offset, when the text goes on with letters there.
fn query_form_word(text: &str) -> Option<(usize, &str)> {
    static PROLOGUE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = PROLOGUE.get_or_init(|| {
        regex::Regex::new(
            r"(?is)^(?:\s|#[^\n]*(?:\n|$)|PREFIX\s*[^\s:]*:\s*<[^>]*>|BASE\s*<[^>]*>)*",
        )
        .expect("a valid pattern")
    });
    let at = re.find(text).map_or(0, |m| m.end());
    let rest = &text[at..];
    let len = rest
        .find(|ch: char| !ch.is_alphanumeric() && ch != '_')
        .unwrap_or(rest.len());
    (len > 0).then(|| (at, &rest[..len]))
}

/// Whether the query's own projection is `SELECT *` (after its prologue and comments).
fn select_star(text: &str) -> bool {
    let Some((at, word)) = query_form_word(text) else {
        return false;
    };
    if !word.eq_ignore_ascii_case("SELECT") {
        return false;
    }
    let mut rest = text[at + word.len()..].trim_start();
    for modifier in ["DISTINCT", "REDUCED"] {
        if rest
            .get(..modifier.len())
            .is_some_and(|m| m.eq_ignore_ascii_case(modifier))
        {
            rest = rest[modifier.len()..].trim_start();
        }
    }
    rest.starts_with('*')
}

fn outer_projection(n: &Node) -> Option<Vec<usize>> {
    match n {
        Node::Project(_, cols) => Some(cols.clone()),
        Node::Distinct(i) | Node::Slice(i, _, _) | Node::OrderBy(i, _) => outer_projection(i),
        _ => None,
    }
}

/// A running query: batches of rows as they come, then the plan's counters.
pub struct Running {
    rx: Receiver<Rows>,
    /// The plan's handle and shape; `None` for a query answered without a request (its plan
    /// yields nothing: [`plan::yields_nothing`]).
    run: Option<(PlanHandle, PlanShape)>,
    minted: Arc<Minted>,
    /// The time limit and its expiry: the engine checks it before each operator step; the
    /// reader checks it too, for a plan that waits on nothing but the reader.
    deadline: Option<(std::time::Duration, std::time::Instant)>,
    timed_out: bool,
}

impl Running {
    /// The flow plan's operators and connections (as `Plan::shape`), e.g. to model it in the
    /// simulator; `None` when the query was answered without running a plan.
    pub fn shape(&self) -> Option<&PlanShape> {
        self.run.as_ref().map(|(_, s)| s)
    }

    /// The terms the query makes (BIND, SELECT expressions): rows may hold their ids, so
    /// results are read through them (see [`EvalCx::term`]).
    pub fn minted(&self) -> Arc<Minted> {
        self.minted.clone()
    }

    /// The runtime request that runs it (trace events carry it); `None` when there is none.
    pub fn request_id(&self) -> Option<nearflow_policy::RequestId> {
        self.run.as_ref().map(|(h, _)| h.request_id())
    }

    /// Stops the run: its request is cancelled (tasks not started are skipped, running
    /// operators stop at their next step); [`Running::finish`] then reports it.
    pub fn cancel(&self) {
        if let Some((h, _)) = &self.run {
            h.cancel();
        }
    }

    /// The next batch of solution rows; `None` at the end (or once the time limit passed:
    /// [`Running::finish`] then says so).
    pub fn next_batch(&mut self) -> Option<Rows> {
        use std::sync::mpsc::RecvTimeoutError;
        loop {
            if let Some((_, at)) = self.deadline {
                if !self.timed_out && std::time::Instant::now() >= at {
                    self.timed_out = true;
                    self.cancel();
                }
            }
            if self.timed_out {
                return None;
            }
            match self.rx.recv_timeout(std::time::Duration::from_millis(20)) {
                Ok(b) => return Some(b),
                Err(RecvTimeoutError::Disconnected) => return None,
                // A plan that failed never closes the channel: ask the runtime.
                Err(RecvTimeoutError::Timeout)
                    if self.run.as_ref().is_none_or(|(h, _)| h.is_done()) =>
                {
                    return self.rx.try_recv().ok()
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Waits for the plan to end (after the last batch was read, or dropping the rest).
    pub fn finish(self) -> Result<PlanStats, QueryError> {
        let Running {
            rx,
            run,
            minted,
            deadline,
            timed_out,
        } = self;
        let Some((handle, _)) = run else {
            return Ok(PlanStats::default());
        };
        let out = handle.wait();
        drop(rx);
        let stats = match (out, deadline) {
            (Ok(o), _) if !timed_out => o.stats,
            (Ok(_) | Err(nearflow_flow::FlowError::Cancelled), Some((limit, _))) if timed_out => {
                return Err(QueryError::Timeout(limit))
            }
            (Ok(o), _) => o.stats,
            (Err(e), _) => return Err(QueryError::from_flow(e)),
        };
        if minted.overflowed() {
            return Err(QueryError::Exec(format!(
                "the query's expressions made more terms than 32-bit ids can number ({} made)",
                minted.len()
            )));
        }
        Ok(stats)
    }
}

/// All the results of a query, collected.
pub struct Collected {
    /// Solution rows (all columns; see [`Form`] for which are output).
    pub rows: Rows,
    /// The plan's counters.
    pub stats: PlanStats,
    store: Arc<Store>,
    /// The terms the query made.
    pub minted: Arc<Minted>,
    /// The form.
    pub form: Form,
}

impl Collected {
    /// Output column `i`'s term in `row`, `None` when unbound (SELECT only).
    pub fn term<'a>(&'a self, row: &[Id], i: usize) -> Option<TermRef<'a>> {
        let Form::Select(cols) = &self.form else {
            return None;
        };
        let id = row[cols[i].1];
        (id != UNBOUND).then(|| self.cx().term(id))
    }

    /// Where its ids' terms are.
    pub fn cx(&self) -> EvalCx<'_> {
        EvalCx {
            store: &self.store,
            minted: &self.minted,
        }
    }

    /// The ASK answer: whether there was a solution.
    pub fn boolean(&self) -> bool {
        !self.rows.is_empty()
    }
}

impl Prepared {
    /// The store it runs on.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Starts the query as one request of `rt` — or, when its plan yields nothing (a constant
    /// the store does not hold), answers it at once without a request.
    pub fn start(&self, rt: &Runtime) -> Result<Running, QueryError> {
        reset(&self.phys);
        let minted = Arc::new(Minted::new(&self.store));
        if plan::yields_nothing(&self.phys) {
            let (_, rx) = std::sync::mpsc::channel();
            return Ok(Running {
                rx,
                run: None,
                minted,
                deadline: None,
                timed_out: false,
            });
        }
        let mut b = PlanBuilder::for_runtime(rt);
        b.default_dop(self.options.dop.unwrap_or(1));
        b.limits(nearflow_flow::Limits {
            time: self.options.timeout,
            memory: self.options.memory_limit,
        });
        if let Some(p) = self.options.packet_bytes {
            b.packet_bytes(p);
        }
        b.profile_threads(self.options.profile);
        let cx = exec::ExecCx {
            store: self.store.clone(),
            minted: minted.clone(),
            width: self.width,
            dop: self.options.dop.unwrap_or(1),
            timing: self.options.timing,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        exec::build_into(&cx, &mut b, &self.phys, tx);
        let plan = b.build().map_err(|e| QueryError::Exec(e.to_string()))?;
        let shape = plan.shape();
        let deadline = self
            .options
            .timeout
            .map(|t| (t, std::time::Instant::now() + t));
        Ok(Running {
            rx,
            run: Some((plan.submit(rt), shape)),
            minted,
            deadline,
            timed_out: false,
        })
    }

    /// Runs and collects every row.
    pub fn run_collect(&self, rt: &Runtime) -> Result<Collected, QueryError> {
        let mut r = self.start(rt)?;
        let mut rows = Rows::new(self.width);
        while let Some(batch) = r.next_batch() {
            rows.append(batch);
        }
        let minted = r.minted();
        let stats = r.finish()?;
        Ok(Collected {
            rows,
            stats,
            store: self.store.clone(),
            minted,
            form: self.form.clone(),
        })
    }

    /// The triples a CONSTRUCT makes from solution rows (a set: each once); `minted` is the
    /// run's ([`Running::minted`]).
    pub fn construct<'r>(
        &self,
        minted: &Minted,
        rows: impl IntoIterator<Item = &'r [Id]>,
    ) -> Vec<[Term; 3]> {
        let cx = EvalCx {
            store: &self.store,
            minted,
        };
        let Form::Construct(template) = &self.form else {
            return Vec::new();
        };
        let rows: Vec<&[Id]> = rows.into_iter().collect();
        // Fresh blank nodes are labelled `{prefix}{row}_{label}`, with a prefix that no blank
        // node of the data in the output starts with (issue 40: `_:c<row>_<label>` could
        // equal a data label and merge two different nodes).
        let mut data_labels = Vec::new();
        for row in &rows {
            for t in template {
                for slot in t {
                    if let TemplateSlot::Var(c) = slot {
                        if let Some(TermRef::Blank(l)) =
                            (row[*c] != UNBOUND).then(|| cx.term(row[*c]))
                        {
                            data_labels.push(l);
                        }
                    }
                }
            }
        }
        let mut prefix = String::from("c");
        while data_labels.iter().any(|l| l.starts_with(prefix.as_str())) {
            prefix.push('c');
        }
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (n, row) in rows.into_iter().enumerate() {
            for t in template {
                let term = |s: &TemplateSlot| -> Option<Term> {
                    match s {
                        TemplateSlot::Var(c) => {
                            (row[*c] != UNBOUND).then(|| cx.term(row[*c]).into())
                        }
                        TemplateSlot::Term(t) => Some(t.clone()),
                        TemplateSlot::Blank(l) => Some(Term::Blank(format!("{prefix}{n}_{l}"))),
                    }
                };
                let (Some(s), Some(p), Some(o)) = (term(&t[0]), term(&t[1]), term(&t[2])) else {
                    continue;
                };
                // Only valid triples: a subject is no literal, a predicate is an IRI.
                if matches!(s, Term::Literal { .. }) || !matches!(p, Term::Iri(_)) {
                    continue;
                }
                let tr = [s, p, o];
                if seen.insert(tr.clone()) {
                    out.push(tr);
                }
            }
        }
        out
    }

    /// The plan as text: operators, join methods, estimated rows and, after a run, actual rows
    /// and (with timing on) time per operator.
    pub fn explain(&self) -> String {
        let mut s = String::new();
        self.explain_node(&self.phys, 0, &mut s);
        s
    }

    fn explain_node(&self, p: &Phys, depth: usize, s: &mut String) {
        let name = |c: usize| format!("?{}", self.names[c].trim_start_matches("_:"));
        let slot = |x: &algebra::Slot| match *x {
            algebra::Slot::Var(c) => name(c),
            algebra::Slot::Fixed(c, id) => format!("{}={}", name(c), self.store.dict().term(id)),
            algebra::Slot::Const(Some(id)) => self.store.dict().term(id).to_string(),
            algebra::Slot::Const(None) => "(absent)".into(),
        };
        let what = match &p.op {
            Op::Unit => "unit".to_string(),
            Op::Empty => "empty".to_string(),
            Op::Scan { pat, order } => format!(
                "scan {} {} {} {}",
                order.name(),
                slot(&pat[0]),
                slot(&pat[1]),
                slot(&pat[2])
            ),
            Op::IndexJoin { pat } => format!(
                "index join {} {} {}",
                slot(&pat[0]),
                slot(&pat[1]),
                slot(&pat[2])
            ),
            Op::HashJoin {
                mode,
                keys,
                value_key,
                check,
                residual,
            } => {
                let mut w = format!(
                    "{mode:?} hash join on [{}]",
                    keys.iter().map(|&c| name(c)).collect::<Vec<_>>().join(", ")
                );
                if let Some((a, b)) = value_key {
                    let _ = write!(w, " value key {} = {}", name(*a), name(*b));
                }
                if !check.is_empty() {
                    let _ = write!(
                        w,
                        " checking [{}]",
                        check
                            .iter()
                            .map(|&c| name(c))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
                if residual.is_some() {
                    w.push_str(" with filter");
                }
                w
            }
            Op::MergeJoin { on } => format!("merge join on [{}]", name(*on)),
            Op::Filter(_) => "filter".to_string(),
            Op::Union => "union".to_string(),
            Op::Distinct => "distinct".to_string(),
            Op::Sort(k, None) => format!("order by ({} keys)", k.len()),
            Op::Sort(k, Some(n)) => format!("order by ({} keys), top {n}", k.len()),
            Op::Slice(a, b) => format!(
                "slice offset {a} limit {}",
                b.map_or("-".into(), |x| x.to_string())
            ),
            Op::Extend(c, _) => format!("bind {}", name(*c)),
            Op::Path(s, path, o) => {
                let end = |e: &path::End| match e {
                    path::End::Var(c) => name(*c),
                    path::End::Term(t) => t.to_string(),
                };
                format!("path {} {path} {}", end(s), end(o))
            }
            Op::Values(cols, rows) => format!(
                "values {} ({} rows)",
                cols.iter().map(|&c| name(c)).collect::<Vec<_>>().join(" "),
                rows.len()
            ),
            Op::Group(keys, aggs) => format!(
                "group by [{}] computing {}",
                keys.iter().map(|&c| name(c)).collect::<Vec<_>>().join(", "),
                aggs.iter()
                    .map(|(c, a)| format!(
                        "{} = {:?}{}",
                        name(*c),
                        a.func,
                        if a.distinct { " distinct" } else { "" }
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Op::Project(c) => format!(
                "project {}",
                c.iter().map(|&c| name(c)).collect::<Vec<_>>().join(" ")
            ),
        };
        let rows = p.stat.rows.load(Ordering::Relaxed);
        let ns = p.stat.nanos.load(Ordering::Relaxed);
        let _ = write!(
            s,
            "{}{what}  (est {:.0}, rows {rows}",
            "  ".repeat(depth),
            p.est
        );
        if self.options.timing {
            let _ = write!(s, ", {:.3} ms", ns as f64 / 1e6);
        }
        s.push_str(")\n");
        for i in &p.inputs {
            self.explain_node(i, depth + 1, s);
        }
    }
}

fn reset(p: &Phys) {
    p.stat.rows.store(0, Ordering::Relaxed);
    p.stat.nanos.store(0, Ordering::Relaxed);
    p.inputs.iter().for_each(reset);
}

#[cfg(test)]
mod syntax_tests {
    use super::parse;

    fn message(q: &str) -> String {
        parse(q).unwrap_err().to_string()
    }

    #[test]
    fn syntax_errors_say_what_was_expected_and_point_at_it() {
        let m = message("SELEC * WHERE { ?s ?p ?o }");
        assert!(
            m.contains("at 1:1: expected SELECT, CONSTRUCT, ASK or DESCRIBE"),
            "{m}"
        );
        assert!(m.contains("found 'SELEC'"), "{m}");
        assert!(m.ends_with("\n  SELEC * WHERE { ?s ?p ?o }\n  ^"), "{m}");
        let m = message("INSERT DATA { <http://a> <http://b> <http://c> }");
        assert!(m.contains("at 1:1: this is a SPARQL Update request"), "{m}");
        let m = message("SELECT * WHERE { ?s ?p ?o FILTER(?o > ) }");
        assert!(m.contains("expected an expression"), "{m}");
        let m = message("PREFIX a: <http://a/>\nSELECT * WHERE { ?s nope:p ?o }");
        assert!(
            m.contains("at 2:") && m.contains("undeclared prefix 'nope:'"),
            "{m}"
        );
        let m = message("SELECT * WHERE {\n  ?s ?p\n}");
        assert!(super::select_star(
            "PREFIX a: <x:>\n# c\nselect distinct * { ?s ?p ?o }"
        ));
        assert!(!super::select_star(
            "SELECT ?a { { SELECT * { ?a ?b ?c } } }"
        ));
        assert!(m.starts_with("SPARQL syntax error: at 3:"), "{m}");
        assert!(m.contains("\n  }\n  "), "{m}");
    }
}
