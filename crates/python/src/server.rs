//! `Store.serve`: the endpoint of `nearflow serve` on threads of its own, stopped by its caller.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nearflow_rdf::db::Db;
use nearflow_rt::Runtime;
use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;

/// What stops a running server, and its thread.
type Running = (
    tokio::sync::oneshot::Sender<()>,
    JoinHandle<std::io::Result<()>>,
);

/// A running SPARQL endpoint over a store; `stop()` (or leaving a `with` block) ends it.
#[pyclass(module = "nearflow", frozen)]
pub struct Server {
    addr: SocketAddr,
    running: Mutex<Option<Running>>,
}

impl Server {
    /// Binds `addr` and serves `db` on a thread of its own; returns once it listens, or with
    /// the reason it cannot (the address taken, …).
    pub(crate) fn start(
        py: Python<'_>,
        db: Arc<Db>,
        rt: Arc<Runtime>,
        config: nearflow_serve::Config,
        addr: SocketAddr,
    ) -> PyResult<Server> {
        let endpoint = nearflow_serve::Endpoint::new(db, rt, config);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (tx, rx) = mpsc::channel::<Result<SocketAddr, String>>();
        let failed = tx.clone();
        let thread = std::thread::Builder::new()
            .name("nearflow-serve".into())
            .spawn(move || {
                let r = nearflow_serve::run_until(
                    endpoint,
                    addr,
                    move |a| {
                        let _ = tx.send(Ok(a));
                    },
                    async move {
                        let _ = stopped.await;
                    },
                );
                if let Err(e) = &r {
                    let _ = failed.send(Err(e.to_string()));
                }
                r
            })
            .map_err(|e| {
                PyRuntimeError::new_err(format!("cannot start the server's thread: {e}"))
            })?;
        match py.detach(move || rx.recv()) {
            Ok(Ok(bound)) => Ok(Server {
                addr: bound,
                running: Mutex::new(Some((stop, thread))),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(PyOSError::new_err(e))
            }
            Err(_) => {
                let _ = thread.join();
                Err(PyRuntimeError::new_err(
                    "the server stopped before it listened",
                ))
            }
        }
    }
}

#[pymethods]
impl Server {
    /// The server's address, `http://HOST:PORT` (the port the system picked for port 0).
    #[getter]
    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The SPARQL Protocol's query URL.
    #[getter]
    fn query_url(&self) -> String {
        format!("http://{}/query", self.addr)
    }

    /// The SPARQL Protocol's update URL.
    #[getter]
    fn update_url(&self) -> String {
        format!("http://{}/update", self.addr)
    }

    /// Stops accepting connections, lets the requests being answered end, and returns once
    /// the server has stopped. Stopping a stopped server does nothing.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let Some((stop, thread)) = self.running.lock().expect("not poisoned").take() else {
            return Ok(());
        };
        let _ = stop.send(());
        match py.detach(|| thread.join()) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(PyOSError::new_err(e.to_string())),
            Err(_) => Err(PyRuntimeError::new_err("the server's thread panicked")),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.stop(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.running.lock().expect("not poisoned").is_some() {
            "serving"
        } else {
            "stopped"
        };
        format!("<nearflow.Server {state} at http://{}/query>", self.addr)
    }
}

impl Drop for Server {
    /// A server dropped unstopped is stopped: its threads do not outlive it.
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.running.get_mut().expect("not poisoned").take() {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }
}
