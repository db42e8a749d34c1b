//! Requests: independent units of work (a query, a plan), numbered sequentially from 0.
//!
//! A request completes when its last task ends: `pending` counts tasks spawned and not yet
//! finished. A task's spawns increment it before the spawning task's own decrement, so it reaches
//! zero exactly once.

use std::any::Any;
use std::fmt;

use nearflow_policy::{RequestId, RequestNodes};

use crate::counters::RequestCounters;
use crate::sync::{lock, wait, Arc, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering};

pub(crate) struct RequestInner {
    pub(crate) id: RequestId,
    pub(crate) pending: AtomicUsize,
    pub(crate) failed: AtomicBool,
    failure: Mutex<Option<String>>,
    done: Mutex<bool>,
    done_cv: Condvar,
    pub(crate) executed: AtomicU64,
    pub(crate) spawned_immediate: AtomicU64,
    pub(crate) spawned_deferred: AtomicU64,
    pub(crate) skipped: AtomicU64,
    /// Bobox-2011: the nodes evaluating this request.
    pub(crate) nodes: Mutex<RequestNodes>,
}

impl RequestInner {
    pub(crate) fn new(id: RequestId) -> Self {
        RequestInner {
            id,
            pending: AtomicUsize::new(1),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            done: Mutex::new(false),
            done_cv: Condvar::new(),
            executed: AtomicU64::new(0),
            spawned_immediate: AtomicU64::new(0),
            spawned_deferred: AtomicU64::new(1),
            skipped: AtomicU64::new(0),
            nodes: Mutex::new(RequestNodes::new(0)),
        }
    }

    /// Records the first panic of the request; later tasks of it are skipped.
    pub(crate) fn fail(&self, payload: Box<dyn Any + Send>) {
        let msg = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "task panicked with a non-string payload".to_string()
        };
        let mut f = lock(&self.failure);
        if f.is_none() {
            *f = Some(msg);
        }
        // Release: pairs with the Acquire load in `Worker::run`; the message is under its lock.
        self.failed.store(true, Ordering::Release);
    }

    pub(crate) fn complete(&self) {
        let mut d = lock(&self.done);
        *d = true;
        self.done_cv.notify_all();
    }

    pub(crate) fn counters(&self) -> RequestCounters {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RequestCounters {
            executed: r(&self.executed),
            spawned_immediate: r(&self.spawned_immediate),
            spawned_deferred: r(&self.spawned_deferred),
            skipped: r(&self.skipped),
        }
    }
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A task of the request panicked; the message of the first panic.
    #[error("request {id} failed: a task panicked: {message}")]
    Panicked { id: RequestId, message: String },
}

/// A handle to a submitted request: wait for it and get the value its root task returned.
pub struct RequestHandle<T> {
    pub(crate) inner: Arc<RequestInner>,
    pub(crate) slot: Arc<Mutex<Option<T>>>,
}

impl<T> fmt::Debug for RequestHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestHandle")
            .field("id", &self.inner.id)
            .field("done", &self.is_done())
            .finish()
    }
}

impl<T> RequestHandle<T> {
    /// The request's id (sequential from 0 per runtime).
    pub fn id(&self) -> RequestId {
        self.inner.id
    }

    /// Whether every task of the request has ended.
    pub fn is_done(&self) -> bool {
        *lock(&self.inner.done)
    }

    /// Blocks until every task of the request has ended, at most `timeout`. Returns whether it
    /// completed.
    #[cfg(not(loom))]
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut d = lock(&self.inner.done);
        while !*d {
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            d = match self.inner.done_cv.wait_timeout(d, deadline - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        true
    }

    /// Blocks until every task of the request has ended; returns the root task's value, or the
    /// message of the first panic.
    pub fn wait(self) -> Result<T, RequestError> {
        let mut d = lock(&self.inner.done);
        while !*d {
            d = wait(&self.inner.done_cv, d);
        }
        drop(d);
        if let Some(message) = lock(&self.inner.failure).clone() {
            return Err(RequestError::Panicked {
                id: self.inner.id,
                message,
            });
        }
        match lock(&self.slot).take() {
            Some(v) => Ok(v),
            None => Err(RequestError::Panicked {
                id: self.inner.id,
                message: "the root task did not run".into(),
            }),
        }
    }

    /// The request's counters so far.
    pub fn counters(&self) -> RequestCounters {
        self.inner.counters()
    }
}
