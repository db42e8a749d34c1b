//! nearflow for Python: the `nearflow` package's native module, `nearflow._nearflow`.
//!
//! It wraps the product path every other front end takes — a [`nearflow_rdf::db::Db`] (a
//! store in memory, or a snapshot with its update log), queries prepared and run by
//! `nearflow-sparql` on one LAS runtime per process, updates applied and logged as
//! `nearflow update` and the endpoint apply them — in Python classes a pyoxigraph user knows:
//! `Store` (`store.rs`), the terms (`terms.rs`), solutions that hand their columns to Arrow
//! (`arrow.rs`) without a Python object per value.
//!
//! Every query, update and load runs with the GIL released, and Ctrl-C (`KeyboardInterrupt`)
//! cancels it inside the runtime (or the parser) and is raised once it has stopped: a query
//! or update on Python's main thread runs on that thread, with a SIGINT handler of ours in
//! front of Python's while it lasts (`interrupt.rs`); anything else on a helper thread while
//! the calling thread waits for it and checks for signals. Errors are Python
//! exceptions (a syntax error a `SyntaxError`, bad data a `ValueError` naming the line and
//! column), never a crash of the interpreter.

mod answers;
mod arrow;
#[cfg(target_os = "linux")]
mod interrupt;
mod server;
mod store;
mod terms;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nearflow_rt::Runtime;
use nearflow_sparql::QueryError;
use pyo3::create_exception;
use pyo3::exceptions::{
    PyException, PyMemoryError, PyRuntimeError, PySyntaxError, PyTimeoutError, PyValueError,
};
use pyo3::prelude::*;

create_exception!(
    nearflow,
    QuerySyntaxError,
    PySyntaxError,
    "A SPARQL query or update that does not parse: the message gives the line, the column and what was expected."
);
create_exception!(
    nearflow,
    QueryCancelled,
    PyException,
    "A query or update stopped before its end (Ctrl-C raises KeyboardInterrupt instead)."
);
create_exception!(
    nearflow,
    MemoryLimitExceeded,
    PyMemoryError,
    "A query whose operators would hold more than its memory limit, and whose spill folder (if any) did not suffice."
);

// The module's own allocations (the engine's operators, rows and indexes) come from the
// NUMA-aware allocator of the LAS paper §5, as in the `nearflow` command; Python's objects keep
// Python's allocator.
#[global_allocator]
static GLOBAL_ALLOCATOR: nearflow_alloc::Nearflow = nearflow_alloc::Nearflow;

/// The runtime every query of this process runs on: this machine's topology under LAS,
/// started on the first query. Its threads are not pinned: a Python process shares its cores
/// with whatever else the program runs.
fn runtime() -> PyResult<&'static Arc<Runtime>> {
    static RT: OnceLock<Result<Arc<Runtime>, String>> = OnceLock::new();
    RT.get_or_init(|| {
        let machine = nearflow_topo::detect_host().map_err(|e| e.to_string())?;
        Runtime::builder(machine)
            .policy(nearflow_policy::PolicyKind::Las)
            .pinning(nearflow_rt::Pinning::None)
            .build_checked()
            .map(Arc::new)
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| PyRuntimeError::new_err(format!("cannot start nearflow's runtime: {e}")))
}

/// The Python exception of a query's error.
fn query_error(e: QueryError) -> PyErr {
    match e {
        QueryError::Syntax(m) => QuerySyntaxError::new_err(syntax_args(&m)),
        QueryError::Unsupported(_) | QueryError::Invalid(_) => PyValueError::new_err(e.to_string()),
        QueryError::Timeout(_) => PyTimeoutError::new_err(e.to_string()),
        QueryError::MemoryLimit { .. } => MemoryLimitExceeded::new_err(e.to_string()),
        QueryError::Cancelled => QueryCancelled::new_err(e.to_string()),
        QueryError::Exec(_) => PyRuntimeError::new_err(e.to_string()),
    }
}

/// A `SyntaxError`'s arguments, `(msg, (filename, lineno, offset, text))`, from the parser's
/// message (`at L:C: what was expected`, then the line and a caret under the place), so that
/// Python shows the place as it shows its own syntax errors.
fn syntax_args(message: &str) -> (String, (String, usize, usize, String)) {
    let first = message.lines().next().unwrap_or(message);
    let place = first.strip_prefix("at ").and_then(|r| {
        let (l, rest) = r.split_once(':')?;
        let (c, _) = rest.split_once(':')?;
        Some((l.parse::<usize>().ok()?, c.parse::<usize>().ok()?))
    });
    let (line, column) = place.unwrap_or((1, 1));
    let text = message
        .lines()
        .nth(1)
        .map(|l| l.strip_prefix("  ").unwrap_or(l))
        .unwrap_or("")
        .to_owned();
    (
        format!("SPARQL syntax error: {first}"),
        ("<query>".to_owned(), line, column, text),
    )
}

/// A job for a helper thread.
type Job = Box<dyn FnOnce() + Send>;

/// The helper threads that wait for a job, each by the sender of its own queue. A query hands
/// its work to one of them rather than to a new thread: a new thread costs its stack and a
/// fresh allocator state per call, which a query of a millisecond notices.
static IDLE: Mutex<Vec<mpsc::Sender<Job>>> = Mutex::new(Vec::new());

/// Helper threads kept waiting at most; past that a finished one ends.
const MAX_IDLE: usize = 8;

/// Runs `job` on an idle helper thread, or on a new one when none waits.
fn hand_off(job: Job) -> PyResult<()> {
    let idle = IDLE.lock().expect("not poisoned").pop();
    let job = match idle {
        Some(tx) => match tx.send(job) {
            Ok(()) => return Ok(()),
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    let (tx, rx) = mpsc::channel::<Job>();
    tx.send(job).expect("the receiver is here");
    std::thread::Builder::new()
        .name("nearflow-py".into())
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                // A job that panics has told its caller so (its result channel closes).
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                let mut idle = IDLE.lock().expect("not poisoned");
                if idle.len() >= MAX_IDLE {
                    return;
                }
                idle.push(tx.clone());
            }
        })
        .map(|_| ())
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))
}

/// Runs `work` with the GIL released; on Ctrl-C the flag `work` was given is set (a query's
/// run stops within a step), and once `work` has returned `KeyboardInterrupt` is raised.
///
/// On Python's main thread `work` runs on the calling thread, Ctrl-C seen by a handler of
/// ours ([`interrupt`]). Elsewhere it runs on a helper thread while the calling thread wakes
/// every 50 ms to check for signals.
fn run_detached<T, E, F>(py: Python<'_>, work: F) -> PyResult<Result<T, E>>
where
    T: Send + 'static,
    E: Send + 'static,
    F: FnOnce(Arc<AtomicBool>) -> Result<T, E> + Send + 'static,
{
    #[cfg(target_os = "linux")]
    if let Some((watch, stop)) = interrupt::watch() {
        let r = py.detach(move || work(stop));
        drop(watch);
        // A Ctrl-C during the run (which stopped it) is raised now.
        py.check_signals()?;
        return Ok(r);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    run_detached_with(
        py,
        move || work(flag),
        move || stop.store(true, Ordering::Release),
    )
}

/// [`run_detached`] for work stopped another way: `interrupt` is called on Ctrl-C.
fn run_detached_with<T, E, F>(
    py: Python<'_>,
    work: F,
    interrupt: impl FnOnce(),
) -> PyResult<Result<T, E>>
where
    T: Send + 'static,
    E: Send + 'static,
    F: FnOnce() -> Result<T, E> + Send + 'static,
{
    let (tx, rx) = mpsc::sync_channel(1);
    hand_off(Box::new(move || {
        let _ = tx.send(work());
    }))?;
    // Waited on with the GIL released, which asks for a `Sync` receiver.
    let rx = Mutex::new(rx);
    let recv = |timeout: Option<Duration>| {
        let rx = rx.lock().expect("not poisoned");
        match timeout {
            Some(t) => rx.recv_timeout(t),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        }
    };
    loop {
        match py.detach(|| recv(Some(Duration::from_millis(50)))) {
            Ok(r) => return Ok(r),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err("nearflow's worker thread panicked"))
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    interrupt();
                    let _ = py.detach(|| recv(None));
                    return Err(e);
                }
            }
        }
    }
}

#[pymodule]
fn _nearflow(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<terms::NamedNode>()?;
    m.add_class::<terms::BlankNode>()?;
    m.add_class::<terms::Literal>()?;
    m.add_class::<terms::DefaultGraph>()?;
    m.add_class::<terms::Triple>()?;
    m.add_class::<terms::Quad>()?;
    m.add_class::<store::Store>()?;
    m.add_class::<answers::QuerySolutions>()?;
    m.add_class::<answers::QuerySolution>()?;
    m.add_class::<answers::SolutionsIter>()?;
    m.add_class::<server::Server>()?;
    m.add("QuerySyntaxError", py.get_type::<QuerySyntaxError>())?;
    m.add("QueryCancelled", py.get_type::<QueryCancelled>())?;
    m.add("MemoryLimitExceeded", py.get_type::<MemoryLimitExceeded>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
