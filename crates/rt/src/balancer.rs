//! The load balancer of Bobox-2011 (task-scheduling-in-data-stream-processing.txt §5.2): while at
//! least one worker is idle, every 100 ms, it asks [`nearflow_policy::balance`] what to do and
//! moves or shares one request.

use std::thread::JoinHandle;
use std::time::Duration;

use nearflow_policy::{balance, Balance};

use crate::registry::Registry;
use crate::sync::os::{Arc as StdArc, Condvar as StdCondvar, Mutex as StdMutex};
use crate::sync::{lock, Arc, Ordering};

/// The period of §5.2.
pub const PERIOD: Duration = nearflow_policy::BALANCER_PERIOD;

pub(crate) struct Balancer {
    stop: StdArc<(StdMutex<bool>, StdCondvar)>,
    handle: JoinHandle<()>,
}

impl Balancer {
    pub(crate) fn stop(self) {
        {
            let (m, cv) = &*self.stop;
            *m.lock().unwrap_or_else(|p| p.into_inner()) = true;
            cv.notify_all();
        }
        let _ = self.handle.join();
    }
}

pub(crate) fn start(shared: Arc<Registry>) -> Balancer {
    let stop = StdArc::new((StdMutex::new(false), StdCondvar::new()));
    let st = stop.clone();
    let handle = std::thread::Builder::new()
        .name("nearflow-balancer".into())
        .spawn(move || {
            let (m, cv) = &*st;
            let mut stopped = m.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                stopped = match cv.wait_timeout(stopped, PERIOD) {
                    Ok((g, _)) => g,
                    Err(p) => p.into_inner().0,
                };
                if *stopped {
                    return;
                }
                tick(&shared);
            }
        })
        .expect("cannot start the Bobox load balancer thread");
    Balancer { stop, handle }
}

/// One round of §5.2.
pub(crate) fn tick(s: &Registry) {
    if s.sleep.asleep() == 0 {
        return; // no idle logical processor: the balancer does not run
    }
    let Some(action) = balance(&s.node_loads()) else {
        return;
    };
    match action {
        Balance::Move { request, from, to } => {
            let Some(req) = lock(&s.synced).in_flight.get(&request).cloned() else {
                return;
            };
            lock(&req.nodes).move_to(from, to);
            let tasks = s.deferred[from].remove_request(request);
            let n = tasks.len();
            s.deferred[to].append_request(request, tasks);
            for _ in 0..n.min(s.policy.sleep().domains[to].len()) {
                if !s.sleep.wake(&[to]) {
                    break;
                }
            }
            s.balancer_moves.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                "bobox balancer: moved request {request} ({n} tasks) from node {from} to {to}"
            );
        }
        Balance::Share { request, from, to } => {
            let Some(req) = lock(&s.synced).in_flight.get(&request).cloned() else {
                return;
            };
            lock(&req.nodes).share_with(to);
            s.balancer_shares.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                "bobox balancer: request {request} of node {from} now shared with node {to}"
            );
        }
    }
}
