//! A query's answer by its form, as every consumer reads it: the CLI, the endpoint, the W3C
//! test suite and the benchmarks all start a query with [`Prepared::execute`] and match on
//! [`QueryResults`] (as Oxigraph's users match on its `QueryResults`), instead of each running
//! the plan and telling SELECT, ASK, CONSTRUCT and DESCRIBE apart on its own.
//!
//! SELECT solutions stream: [`Solutions`] hands out batches as the plan makes them, or writes
//! them in a format while they come, or holds them all ([`Solutions::collect`], counted against
//! the memory limit). ASK, CONSTRUCT and DESCRIBE are answered once the run has ended, so that
//! a run stopped by its time or memory limit never shows a partial answer; their triples count
//! against the memory limit while they are made. How a run ended is a [`QueryError`] variant
//! (cancelled, timed out, over its memory limit), never a message to compare.

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use nearflow_flow::PlanStats;
use nearflow_rdf::term::Term;
use nearflow_rt::Runtime;

use crate::expr::EvalCx;
use crate::minted::Minted;
use crate::results::{self, Format};
use crate::{Collected, Form, Prepared, QueryError, Rows, Running};

/// A run's answer, by the query's form.
pub enum QueryResults<'p> {
    /// SELECT: the solutions, streamed.
    Solutions(Solutions<'p>),
    /// ASK: whether there is a solution.
    Boolean(Answered<bool>),
    /// CONSTRUCT and DESCRIBE: the graph, each triple once.
    Graph(Answered<Vec<[Term; 3]>>),
}

/// An answer given once its run has ended, with the run's counters.
pub struct Answered<T> {
    /// The answer.
    pub value: T,
    /// The plan's counters.
    pub stats: PlanStats,
}

/// Why an answer could not be given: the run failed, or writing it did.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The run failed or was stopped.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// Writing failed: the output went away, or the format cannot hold a term of the answer
    /// ([`io::ErrorKind::InvalidData`]: XML and a control character).
    #[error("cannot write the answer: {0}")]
    Write(io::Error),
}

// The message holds the I/O error, so it is not also the source: a chain printed with `{:#}`
// would say it twice.
impl From<io::Error> for AnswerError {
    fn from(e: io::Error) -> Self {
        AnswerError::Write(e)
    }
}

/// How [`QueryResults::print`] writes an answer.
#[derive(Clone, Copy, Debug)]
pub struct Printing {
    /// The format of solutions and of an ASK's answer (a graph is N-Triples, or Turtle).
    pub format: Format,
    /// Only the number of results (an ASK's: 1 or 0).
    pub count: bool,
    /// A CONSTRUCT's or DESCRIBE's graph as Turtle rather than N-Triples.
    pub turtle: bool,
}

impl QueryResults<'_> {
    /// Writes the answer as a command line prints it: solutions in a streamed format while the
    /// run makes them; a count, an ASK's answer, a table or a graph once the run has succeeded,
    /// so that a run stopped by its time or memory limit prints its error and no partial
    /// answer. A count holds nothing: it needs no more memory than the plan's operators. The
    /// number of results, and the run's counters.
    pub fn print(
        self,
        out: &mut dyn io::Write,
        how: Printing,
    ) -> Result<(u64, PlanStats), AnswerError> {
        match self {
            QueryResults::Solutions(s) if !how.count && how.format != Format::Table => {
                s.write(out, how.format)
            }
            QueryResults::Solutions(mut s) if how.count => {
                let mut n = 0u64;
                while let Some(b) = s.next_batch() {
                    n += b.len() as u64;
                }
                let stats = s.finish()?;
                writeln!(out, "{n}")?;
                Ok((n, stats))
            }
            QueryResults::Solutions(s) => {
                let (vars, store) = (s.variables(), s.prepared.store().clone());
                let all = s.collect()?;
                let n = results::write_solutions(
                    &mut Undamaged::new(out, &store),
                    how.format,
                    EvalCx::new(&store, &all.minted),
                    vars,
                    std::iter::once(all.rows),
                )?;
                Ok((n, all.stats))
            }
            QueryResults::Boolean(a) => {
                match how.count {
                    true => writeln!(out, "{}", u8::from(a.value))?,
                    false => results::write_boolean(out, how.format, a.value)?,
                }
                Ok((u64::from(a.value), a.stats))
            }
            QueryResults::Graph(a) => {
                match how.count {
                    true => writeln!(out, "{}", a.value.len())?,
                    false => results::write_graph(out, &a.value, how.turtle)?,
                }
                Ok((a.value.len() as u64, a.stats))
            }
        }
    }
}

/// The solutions of a running SELECT.
pub struct Solutions<'p> {
    prepared: &'p Prepared,
    running: Running,
    minted: Arc<Minted>,
}

impl<'p> Solutions<'p> {
    /// The projected variables: each name and its column in a row.
    pub fn variables(&self) -> &'p [(String, usize)] {
        match &self.prepared.form {
            Form::Select(vars) => vars,
            _ => unreachable!("solutions are a SELECT's"),
        }
    }

    /// The next batch of solution rows (every column; [`variables`](Self::variables) says
    /// which are output), or `None` at the end of the run.
    pub fn next_batch(&mut self) -> Option<Rows> {
        self.running.next_batch()
    }

    /// The terms of the rows' ids: the store's and the ones the run made.
    pub fn cx(&self) -> EvalCx<'_> {
        EvalCx::new(self.prepared.store(), &self.minted)
    }

    /// Waits for the end of the run: its counters, or how it failed.
    pub fn finish(self) -> Result<PlanStats, QueryError> {
        self.running.finish()
    }

    /// Writes every solution in `format` while the run makes them; the number written and
    /// the run's counters. A write that fails cancels the run.
    pub fn write(
        mut self,
        out: &mut dyn io::Write,
        format: Format,
    ) -> Result<(u64, PlanStats), AnswerError> {
        let vars = self.variables();
        let minted = self.minted.clone();
        let store = self.prepared.store().clone();
        let cx = EvalCx::new(&store, &minted);
        let running = &mut self.running;
        let batches = std::iter::from_fn(|| running.next_batch());
        let mut checked = Undamaged { out, store: &store };
        match results::write_solutions(&mut checked, format, cx, vars, batches) {
            Ok(n) => Ok((n, self.running.finish()?)),
            Err(e) => {
                self.running.cancel();
                let _ = self.running.finish();
                match store.damage() {
                    Some(d) => Err(crate::damaged(d).into()),
                    None => Err(e.into()),
                }
            }
        }
    }

    /// Every solution, held (they count against the memory limit: past it the run stops with
    /// [`QueryError::MemoryLimit`]).
    pub fn collect(self) -> Result<Collected, QueryError> {
        self.prepared.held(self.running)
    }
}

impl Prepared {
    /// Starts the query as one request of `rt` and gives its answer by form; a set `stop`
    /// (a client that went away) cancels the run. SELECT's solutions stream; the other forms
    /// are answered once the run has ended.
    pub fn execute(
        &self,
        rt: &Runtime,
        stop: Option<Arc<AtomicBool>>,
    ) -> Result<QueryResults<'_>, QueryError> {
        let mut running = self.start(rt)?;
        if let Some(flag) = stop {
            running.cancel_on(flag);
        }
        let minted = running.minted();
        if matches!(self.form, Form::Select(_)) {
            return Ok(QueryResults::Solutions(Solutions {
                prepared: self,
                running,
                minted,
            }));
        }
        let batches = match self.hold_batches(&mut running) {
            Ok(b) => b,
            Err(e) => {
                let _ = running.finish();
                return Err(e);
            }
        };
        let stats = running.finish()?;
        Ok(match self.form {
            Form::Ask => QueryResults::Boolean(Answered {
                value: batches.iter().any(|b| !b.is_empty()),
                stats,
            }),
            _ => {
                let value = self.graph(&minted, batches.iter().flat_map(|b| b.iter()));
                // Its terms were read after the run ended: a damaged one read as a stand-in.
                if let Some(d) = self.store().damage() {
                    return Err(crate::damaged(d));
                }
                QueryResults::Graph(Answered { value, stats })
            }
        })
    }
}

/// A writer that refuses every write once the store's checks have found damage. The check of
/// a chunk is made, and its damage recorded, before any term of it is read, so no byte written
/// after a damaged term's read (a stand-in for the data) reaches `out`.
pub struct Undamaged<'a> {
    out: &'a mut dyn io::Write,
    store: &'a nearflow_rdf::Store,
}

impl<'a> Undamaged<'a> {
    /// `out`, refusing writes once `store` is found damaged.
    pub fn new(out: &'a mut dyn io::Write, store: &'a nearflow_rdf::Store) -> Self {
        Undamaged { out, store }
    }
}

impl io::Write for Undamaged<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if let Some(d) = self.store.damage() {
            return Err(io::Error::other(format!("the store is damaged: {d}")));
        }
        self.out.write(b)
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some(d) = self.store.damage() {
            return Err(io::Error::other(format!("the store is damaged: {d}")));
        }
        self.out.flush()
    }
}
