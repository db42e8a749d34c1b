//! # nearflow-sparql — a parallel SPARQL 1.1 engine on the nearflow runtime
//!
//! A query goes through four stages. The first three — parsing, the algebra and its rewrite
//! passes, which make a [`Query`] — are the crate `nearflow-sparql-algebra`, whose modules this
//! crate re-exports; the fourth is here:
//!
//! 4. **physical plan** (`physical/`): when the query meets a store, terms become its ids and
//!    the planner picks join order, join algorithms and partitioning from its statistics
//!    ([`Plan::plan`]); **lowering** (`lower/`) builds one flow plan of it, one request of the
//!    runtime.
//!
//! Stages 1–3 make a [`Query`], which knows no store and can be planned against any number of
//! stores (or store versions); [`prepare`] does all four. Queries started together run
//! concurrently, each its own request (LAS §6: the multi-query test). The store is
//! `nearflow-rdf`'s: a default graph and named graphs.
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
//! - `lib.rs` — [`Prepared`], planning ([`Plan`]), running and streaming, CONSTRUCT and
//!   DESCRIBE output.
//! - `answer.rs` — [`QueryResults`]: a run's answer by form (solutions streamed, a boolean, a
//!   graph), the one type every consumer reads.
//! - `lower/` — the physical plan (the crate `nearflow-sparql-plan`, re-exported as
//!   [`physical`] and [`fragment`]) lowered to flow operators.
//! - `explain.rs` — the three levels of `--explain`.
//! - `results.rs` — output formats (`sparesults`, the terminal table, N-Triples/Turtle).
//! - `replica_check.rs` — the placement check of a replicated store: pages on their nodes, no
//!   remote index read.
//! - `update.rs` — SPARQL 1.1 Update: every operation, each DELETE/INSERT's WHERE clause run
//!   through the same four stages, the request's result a new version of the store.

mod answer;
pub mod explain;
pub mod lower;
pub mod replica_check;
pub mod results;
pub mod update;

pub use nearflow_sparql_algebra::{
    algebra, deeper, default_memory_limit, expr, functions, minted, parse, path, rewrite, value,
    Options, Query, QueryError, MAX_WIDTH,
};
pub use nearflow_sparql_algebra::{
    parse_with_base, stack_room, syntax_message, MAX_ELEMENTS, MAX_LEVELS, MAX_NESTING,
};
pub use nearflow_sparql_plan::{fragment, physical};

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use nearflow_flow::{PlanBuilder, PlanHandle, PlanShape, PlanStats};
use nearflow_rt::Runtime;

pub use self::algebra::{Form, TemplateSlot};
pub use self::answer::{AnswerError, Answered, Printing, QueryResults, Solutions, Undamaged};
use self::expr::EvalCx;
pub use self::lower::Rows;
use self::minted::Minted;
use self::physical::{Phys, Planner};
use nearflow_rdf::index::Store;
use nearflow_rdf::term::{Id, Term, TermCow, TermRef, UNBOUND};

/// The least packet of a plan that stops after its first rows (`Prepared::first_rows_packet`):
/// a few dozen rows, so a scan's task does more than a handful of lookups.
pub const FIRST_ROWS_PACKET_MIN: usize = 1024;

/// Packets an input buffer holds in a first-rows plan (the default is
/// [`nearflow_flow::DEFAULT_BUFFER_PACKETS`]).
pub const FIRST_ROWS_BUFFER_PACKETS: usize = 1;

/// Planning a parsed [`Query`] against a store (stage 4): terms become the store's ids, the
/// dataset's graphs graph ids, and the planner chooses join orders, access paths and exchanges
/// from the store's statistics.
pub trait Plan {
    /// Plans the query against `store`.
    fn plan(self: &Arc<Self>, store: &Arc<Store>, options: &Options) -> Prepared;

    /// Plans the query over its fragments' answers from a sharded store's shards
    /// ([`fragment`]): every basic graph pattern is joined from `given`'s rows, and `store`
    /// (any one shard: each holds the whole dictionary) serves ids and terms.
    fn plan_given(
        self: &Arc<Self>,
        store: &Arc<Store>,
        options: &Options,
        given: &fragment::Given,
    ) -> Prepared;
}

impl Plan for Query {
    fn plan(self: &Arc<Self>, store: &Arc<Store>, options: &Options) -> Prepared {
        plan_with(self, store, options, None)
    }

    fn plan_given(
        self: &Arc<Self>,
        store: &Arc<Store>,
        options: &Options,
        given: &fragment::Given,
    ) -> Prepared {
        plan_with(self, store, options, Some(given))
    }
}

fn plan_with(
    query: &Arc<Query>,
    store: &Arc<Store>,
    options: &Options,
    given: Option<&fragment::Given>,
) -> Prepared {
    let dop = options
        .dop
        .unwrap_or_else(|| store.machine().pu_count().max(1))
        .max(1);
    let (default, named) = physical::dataset_ids(store, query.dataset.as_ref());
    let planner = Planner {
        store,
        dop,
        default: default.clone(),
        named: named.clone(),
        needed: Default::default(),
        row_bytes: (lower::width_class(query.names.len()).unwrap_or(lower::MAX_WIDTH)
            * std::mem::size_of::<Id>()) as f64,
        table_budget: options.memory_limit.map(|l| l as f64 / 4.0),
        given,
    };
    let phys = planner.plan(&query.optimized, &default);
    Prepared {
        form: query.form.clone(),
        phys,
        query: query.clone(),
        store: store.clone(),
        width: query.names.len(),
        options: Options {
            dop: Some(dop),
            ..options.clone()
        },
        default,
        named,
        note: None,
    }
}

/// Parses and plans `text` against `store` ([`Query::parse`], then [`Plan::plan`]).
pub fn prepare(store: &Arc<Store>, text: &str, options: &Options) -> Result<Prepared, QueryError> {
    Ok(Arc::new(Query::parse(text, options)?).plan(store, options))
}

/// A query planned against one store, ready to run (as often as wanted).
pub struct Prepared {
    /// What it returns.
    pub form: Form,
    /// The physical plan.
    pub phys: Phys,
    query: Arc<Query>,
    store: Arc<Store>,
    width: usize,
    options: Options,
    /// The dataset's default graph (graph ids merged into it).
    default: Vec<Id>,
    /// The dataset's named graphs.
    named: Arc<Vec<Id>>,
    /// What its planner says of how it was planned (a cluster's fragments), for `--explain`.
    note: Option<String>,
}

/// Plans a parsed query into one ready to run: what a front end calls where the plan is not
/// made against a store of its own (a cluster's coordinator, which runs the query's fragments
/// on the shards and plans the rest over their rows).
pub trait QueryPlanner: Send + Sync {
    /// The query planned, ready to run on the caller's runtime.
    ///
    /// # Errors
    /// As planning on a store, and whatever the planner's own failures are.
    fn plan(&self, query: Arc<Query>, options: &Options) -> Result<Prepared, QueryError>;
}

/// A running query: batches of rows as they come, then the plan's counters.
pub struct Running {
    rx: Receiver<Rows>,
    /// The count of rows in `rx` not taken yet (the sink waits past a few packets of them);
    /// dropped, it tells the sink the caller has gone.
    waiting: lower::Caller,
    /// The plan's handle and shape; `None` for a query answered without a request (its plan
    /// yields nothing: [`physical::yields_nothing`]).
    run: Option<(PlanHandle, PlanShape)>,
    minted: Arc<Minted>,
    /// The time limit and its expiry: the engine checks it before each operator step; the
    /// reader checks it too, for a plan that waits on nothing but the reader.
    deadline: Option<(std::time::Duration, std::time::Instant)>,
    timed_out: bool,
    /// Set by the caller to stop the run ([`Running::cancel_on`]); the reader checks it.
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    stopped: bool,
    /// The store it reads: damage its reads found fails the query at its end.
    store: Arc<Store>,
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

    /// Charges `bytes` of its output that the caller holds (`what` names them) against the
    /// query's memory limit, together with its operators' state; past the limit the run is
    /// cancelled and the error returned.
    pub fn charge_held(&self, what: &str, bytes: usize) -> Result<(), QueryError> {
        let Some((h, _)) = &self.run else {
            return Ok(());
        };
        h.charge_held(what, bytes).map_err(|e| {
            h.cancel();
            QueryError::from_flow(e)
        })
    }

    /// Stops the run once `flag` is set (checked every 20 ms while a batch is awaited), e.g.
    /// by a server whose client went away; [`Running::finish`] then says
    /// [`QueryError::Cancelled`].
    pub fn cancel_on(&mut self, flag: Arc<std::sync::atomic::AtomicBool>) {
        self.stop = Some(flag);
    }

    /// The next batch of solution rows; `None` at the end (or once the time limit passed or
    /// the run was cancelled: [`Running::finish`] then says so).
    pub fn next_batch(&mut self) -> Option<Rows> {
        use std::sync::mpsc::RecvTimeoutError;
        loop {
            if !self.stopped
                && self
                    .stop
                    .as_ref()
                    .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
            {
                self.stopped = true;
                self.cancel();
            }
            if self.stopped {
                return None;
            }
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
                Ok(b) => {
                    self.taken(&b);
                    // A value refused for the memory limit was made unbound in the rows
                    // after it: none of them reaches the caller (`finish` says why).
                    if self.minted.refused().is_some() {
                        self.stopped_for_memory();
                        return None;
                    }
                    return Some(b);
                }
                Err(RecvTimeoutError::Disconnected) => return None,
                // A plan that failed never closes the channel: ask the runtime.
                Err(RecvTimeoutError::Timeout)
                    if self.run.as_ref().is_none_or(|(h, _)| h.is_done()) =>
                {
                    let b = self.rx.try_recv().ok();
                    if let Some(b) = &b {
                        self.taken(b);
                    }
                    if self.minted.refused().is_some() {
                        self.stopped_for_memory();
                        return None;
                    }
                    return b;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Stops the run for a value refused for the memory limit ([`Minted::refused`]).
    fn stopped_for_memory(&mut self) {
        self.cancel();
        self.stopped = true;
    }

    /// Batch `b` was taken from the channel: the caller holds its rows now, off the sink's
    /// count of rows waiting.
    fn taken(&self, b: &Rows) {
        self.waiting.took(lower::sink_bytes(b));
    }

    /// Waits for the plan to end (after the last batch was read, or dropping the rest).
    pub fn finish(self) -> Result<PlanStats, QueryError> {
        let Running {
            rx,
            waiting,
            run,
            minted,
            deadline,
            timed_out,
            stop: _,
            stopped,
            store,
        } = self;
        let Some((handle, _)) = run else {
            return Ok(PlanStats::default());
        };
        // No more rows are taken: the sink no longer waits for them (it drops the rest).
        drop(waiting);
        drop(rx);
        let out = handle.wait();
        if let Some(e) = minted.refused() {
            return Err(QueryError::from_flow(e));
        }
        if stopped {
            return Err(QueryError::Cancelled);
        }
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
        // A store checked as it is read may have found damage in what this query read; one
        // checked in the background is waited for.
        if let Some(d) = store.settled_damage() {
            return Err(damaged(d));
        }
        Ok(stats)
    }
}

/// The error of a query on a store whose file is damaged.
pub(crate) fn damaged(d: &str) -> QueryError {
    QueryError::Exec(format!(
        "the store's snapshot file is damaged: {d}; rebuild it (`nearflow load … --save`) or restore a copy"
    ))
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
    pub fn term<'a>(&'a self, row: &[Id], i: usize) -> Option<TermCow<'a>> {
        let Form::Select(cols) = &self.form else {
            return None;
        };
        let id = row[cols[i].1];
        (id != UNBOUND).then(|| self.cx().term(id))
    }

    /// The error to give instead of what was read from these rows' terms, when a read of the
    /// store found damage: a damaged term reads as a stand-in, never to be given as data.
    pub fn undamaged(&self) -> Result<(), QueryError> {
        match self.store.damage() {
            Some(d) => Err(damaged(d)),
            None => Ok(()),
        }
    }

    /// Where its ids' terms are.
    pub fn cx(&self) -> EvalCx<'_> {
        EvalCx::new(&self.store, &self.minted)
    }

    /// The ASK answer: whether there was a solution.
    pub fn boolean(&self) -> bool {
        !self.rows.is_empty()
    }
}

impl Prepared {
    /// The first packets' size of a plan whose consumer stops after a few rows and whose
    /// operators pass rows on as they come ([`Phys::first_rows`]): about those rows (at least
    /// [`FIRST_ROWS_PACKET_MIN`] bytes), doubling from there to the plan's packet size
    /// ([`PlanBuilder::first_packet_bytes`]). So the first packet the scans fill answers the
    /// query and the slice stops the rest, where a packet of half the L2 would read and join
    /// tens of thousands of rows first; and a plan that reads everything after all (a filter
    /// that passes fewer rows than the limit) reaches full packets after a few. `None` for any
    /// other plan, and when the rows fill full packets anyway.
    fn first_rows_packet(&self, rt: &Runtime) -> Option<usize> {
        let bytes = self.first_packet_bytes(self.phys.first_rows()?);
        let full = self
            .options
            .packet_bytes
            .unwrap_or_else(|| nearflow_flow::default_packet_bytes(rt.machine()));
        (bytes < full).then_some(bytes)
    }

    /// The first packets' size for `rows` rows of this query's width.
    pub(crate) fn first_packet_bytes(&self, rows: usize) -> usize {
        let row = self.width.max(1) * std::mem::size_of::<Id>();
        rows.saturating_mul(row).max(FIRST_ROWS_PACKET_MIN)
    }

    /// The store it runs on.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The query it plans.
    pub fn query(&self) -> &Arc<Query> {
        &self.query
    }

    /// Starts the query as one request of `rt` — or, when its plan yields nothing (a constant
    /// the store does not hold), answers it at once without a request.
    pub fn start(&self, rt: &Runtime) -> Result<Running, QueryError> {
        if let Some(d) = self.store.damage() {
            return Err(damaged(d));
        }
        reset(&self.phys);
        // One account for the plan's operators, the rows held for the caller and the terms
        // the query's expressions make.
        let account = Arc::new(nearflow_flow::Account::new(self.options.memory_limit));
        let minted = Arc::new(Minted::new(&self.store).charged_to(account.clone()));
        if physical::yields_nothing(&self.phys) {
            let (_, rx) = std::sync::mpsc::channel();
            return Ok(Running {
                rx,
                waiting: lower::Caller::default(),
                run: None,
                minted,
                deadline: None,
                timed_out: false,
                stop: None,
                stopped: false,
                store: self.store.clone(),
            });
        }
        let mut b = PlanBuilder::for_runtime(rt);
        b.default_dop(self.options.dop.unwrap_or(1));
        b.limits(nearflow_flow::Limits {
            time: self.options.timeout,
            memory: self.options.memory_limit,
        });
        b.account(account);
        if let Some(p) = self.options.packet_bytes {
            b.packet_bytes(p);
        }
        if let Some(p) = self.first_rows_packet(rt) {
            b.first_packet_bytes(p);
            // One packet a buffer: no operator runs more than a packet ahead of the one it
            // feeds, so the rows the slice wants come from the first packets read (q12a: the
            // scan read 24–43 k rows with four a buffer, 4–22 k with one, engine time 14 → 3
            // ms median), and a plan that reads everything after all is as fast (measured).
            b.buffer_packets(FIRST_ROWS_BUFFER_PACKETS);
        }
        b.profile_threads(self.options.profile);
        let cx = lower::ExecCx {
            store: self.store.clone(),
            minted: minted.clone(),
            width: self.width,
            dop: self.options.dop.unwrap_or(1),
            timing: self.options.timing,
            named: self.named.clone(),
            spill: self
                .options
                .spill
                .as_deref()
                .map(|dir| lower::Spill::new(dir, self.options.spill_bytes(dir))),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (handoff, waiting) = lower::Handoff::new(tx);
        lower::build_into(&cx, &mut b, &self.phys, handoff);
        let plan = b.build().map_err(|e| QueryError::Exec(e.to_string()))?;
        let shape = plan.shape();
        let deadline = self
            .options
            .timeout
            .map(|t| (t, std::time::Instant::now() + t));
        Ok(Running {
            rx,
            waiting,
            run: Some((plan.submit(rt), shape)),
            minted,
            deadline,
            timed_out: false,
            stop: None,
            stopped: false,
            store: self.store.clone(),
        })
    }

    /// Runs and collects every row.
    pub fn run_collect(&self, rt: &Runtime) -> Result<Collected, QueryError> {
        self.collect(rt, None)
    }

    /// [`run_collect`](Self::run_collect), stopped once `stop` is set (a server's client that
    /// went away). The collected rows count against [`Options::memory_limit`] like an
    /// operator's state: past it the run stops with [`QueryError::MemoryLimit`].
    pub fn collect(
        &self,
        rt: &Runtime,
        stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    ) -> Result<Collected, QueryError> {
        let mut r = self.start(rt)?;
        if let Some(flag) = stop {
            r.cancel_on(flag);
        }
        self.held(r)
    }

    /// Every row of the run `r`, held (counted against the memory limit), and its counters.
    pub(crate) fn held(&self, mut r: Running) -> Result<Collected, QueryError> {
        let batches = match self.hold_batches(&mut r) {
            Ok(b) => b,
            Err(e) => {
                let _ = r.finish();
                return Err(e);
            }
        };
        let mut rows = Rows::new(self.width);
        if batches.len() > 1 {
            // The batches are copied into one vector while they are still held: it is
            // charged before it is made.
            let total = batches.iter().map(Rows::len).sum::<usize>();
            let bytes = total * self.width.max(1) * std::mem::size_of::<Id>();
            if let Err(e) = r.charge_held("the held solutions", bytes) {
                let _ = r.finish();
                return Err(e);
            }
            rows.reserve(total);
        }
        for batch in batches {
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

    /// The graph a CONSTRUCT or DESCRIBE makes from its solution rows (each triple once);
    /// `minted` is the run's ([`Running::minted`]). Nothing for the other forms.
    pub fn graph<'r>(
        &self,
        minted: &Minted,
        rows: impl IntoIterator<Item = &'r [Id]>,
    ) -> Vec<[Term; 3]> {
        match &self.form {
            Form::Describe(_) => self.describe(minted, rows),
            _ => self.construct(minted, rows),
        }
    }

    /// About the bytes the triples of a CONSTRUCT over `rows` solutions would hold (each
    /// template triple per solution: three terms and their text), to check against
    /// [`Options::memory_limit`] before they are made; 0 for the other forms (a DESCRIBE holds
    /// at most the store's own triples about its resources).
    fn graph_bytes(&self, rows: usize) -> usize {
        match &self.form {
            Form::Construct(template) => rows
                .saturating_mul(template.len())
                .saturating_mul(3 * (std::mem::size_of::<Term>() + 32)),
            _ => 0,
        }
    }

    /// Every batch of `running` (a run of this query), held by the caller: the rows, and for
    /// a CONSTRUCT the triples they will make, count against [`Options::memory_limit`]
    /// together with the operators' state (so the operators and the held answer never pass
    /// the limit between them); past it the run is cancelled and the error returned (the
    /// caller still calls [`Running::finish`]).
    pub fn hold_batches(&self, running: &mut Running) -> Result<Vec<Rows>, QueryError> {
        let what = if self.graph_bytes(1) > 0 {
            "the constructed triples"
        } else {
            "the held solutions"
        };
        let (mut rows, mut held, mut charged) = (0usize, 0usize, 0usize);
        let mut out = Vec::new();
        while let Some(b) = running.next_batch() {
            rows += b.len();
            held += b.len() * b.width().max(1) * std::mem::size_of::<Id>();
            let wanted = held.saturating_add(self.graph_bytes(rows));
            running.charge_held(what, wanted - charged)?;
            charged = wanted;
            out.push(b);
        }
        Ok(out)
    }

    /// The triples a CONSTRUCT makes from solution rows (a set: each once); `minted` is the
    /// run's ([`Running::minted`]).
    pub fn construct<'r>(
        &self,
        minted: &Minted,
        rows: impl IntoIterator<Item = &'r [Id]>,
    ) -> Vec<[Term; 3]> {
        let cx = EvalCx::new(&self.store, minted);
        let Form::Construct(template) = &self.form else {
            return Vec::new();
        };
        let rows: Vec<&[Id]> = rows.into_iter().collect();
        // Fresh blank nodes are labelled `{prefix}{row}_{label}`, with a prefix that no blank
        // node of the data in the output starts with (`_:c<row>_<label>` could
        // equal a data label and merge two different nodes).
        let mut data_labels = Vec::new();
        for row in &rows {
            for t in template {
                for slot in t {
                    if let TemplateSlot::Var(c) = slot {
                        if row[*c] != UNBOUND {
                            if let TermRef::Blank(l) = cx.term(row[*c]).as_ref() {
                                data_labels.push(l.to_owned());
                            }
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

    /// The triples a DESCRIBE returns: the concise bounded description of every IRI and blank
    /// node its columns hold — the triples of the dataset's default graph with the resource as
    /// subject, and recursively those of each blank node object (each triple once).
    /// Reifications of those triples are not included.
    pub fn describe<'r>(
        &self,
        minted: &Minted,
        rows: impl IntoIterator<Item = &'r [Id]>,
    ) -> Vec<[Term; 3]> {
        let Form::Describe(cols) = &self.form else {
            return Vec::new();
        };
        let dict = self.store.dict();
        let mut todo: Vec<Id> = Vec::new();
        let mut queued = HashSet::new();
        for row in rows {
            for &c in cols {
                let id = row[c];
                // A term the query computed is in no triple of the store.
                if id == UNBOUND || minted.holds(id) {
                    continue;
                }
                if !dict.term(id).as_ref().is_literal() && queued.insert(id) {
                    todo.push(id);
                }
            }
        }
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut i = 0;
        while i < todo.len() {
            let r = todo[i];
            i += 1;
            for &g in &self.default {
                self.store.for_each_match(g, [Some(r), None, None], |t| {
                    if !seen.insert(t) {
                        return;
                    }
                    if matches!(dict.term(t[2]).as_ref(), TermRef::Blank(_)) && queued.insert(t[2])
                    {
                        todo.push(t[2]);
                    }
                    out.push(t.map(|id| Term::from(dict.term(id))));
                });
            }
        }
        out
    }

    /// The plan as text at its three levels — the algebra as translated, after the rewrites,
    /// and the physical plan with estimated and (after a run) actual rows and, with timing on,
    /// time per operator.
    pub fn explain(&self) -> String {
        explain::all(self)
    }

    /// [`explain`](Self::explain) after a run that gave `rows` results in `took` with the
    /// counters `stats` under the scheduling policy `policy`, as `--explain` prints it: the
    /// plan, its planner's note, the run's size and time, where its index reads went, and the
    /// store's chunks read and checked.
    pub fn explain_run(
        &self,
        rows: u64,
        took: std::time::Duration,
        stats: &PlanStats,
        policy: &str,
    ) -> String {
        use std::fmt::Write as _;
        let mut s = self.explain();
        if let Some(note) = self.note() {
            let _ = writeln!(s, "{note}");
        }
        if stats.operators == 0 {
            s.push_str("answered without a request: a constant of the query is not in the store\n");
        }
        let _ = writeln!(
            s,
            "{rows} results in {:.3} s ({} operators, {} operator tasks, policy {policy})",
            took.as_secs_f64(),
            stats.operators,
            stats.runs,
        );
        let (reads, remote) = self.index_reads();
        if reads > 0 {
            let placement = match self.store.is_replicated() {
                true => "replicated",
                false => "partitioned",
            };
            let _ = writeln!(
                s,
                "index reads: {reads}, {:.1} % of them from another NUMA node's memory than the \
                 reading worker's (store {placement})",
                100.0 * remote as f64 / reads as f64,
            );
        }
        if let Some((read, all)) = self.store.chunks_read() {
            let _ = writeln!(
                s,
                "store chunks read and checked: {read} of {all} (each checked on its first read)"
            );
        }
        s
    }

    /// What its planner said of how it was planned ([`QueryPlanner`]), if anything.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// This query with `note` from its planner.
    pub fn noted(mut self, note: String) -> Prepared {
        self.note = Some(note);
        self
    }

    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    /// The last run's index reads over the whole plan (scans, index and merge joins: rows read
    /// and binary searches), and how many of them read memory of another NUMA node than the
    /// reading worker's: where the store's placement shows.
    pub fn index_reads(&self) -> (u64, u64) {
        fn sum(p: &Phys, acc: &mut (u64, u64)) {
            acc.0 += p.stat.reads.load(Ordering::Relaxed);
            acc.1 += p.stat.remote_reads.load(Ordering::Relaxed);
            p.inputs.iter().for_each(|i| crate::deeper(|| sum(i, acc)));
        }
        let mut acc = (0, 0);
        sum(&self.phys, &mut acc);
        acc
    }
}

fn reset(p: &Phys) {
    p.stat.rows.store(0, Ordering::Relaxed);
    p.stat.nanos.store(0, Ordering::Relaxed);
    p.stat.reads.store(0, Ordering::Relaxed);
    p.stat.remote_reads.store(0, Ordering::Relaxed);
    p.stat.spilled.store(0, Ordering::Relaxed);
    p.inputs.iter().for_each(reset);
}
