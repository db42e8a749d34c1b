//! The load balancer of Bobox-2011 (task-scheduling-in-data-stream-processing.txt §5.2): while at
//! least one worker is idle, every 100 ms, it moves or shares one request. The round is
//! [`nearflow_policy::balance_round`], which the simulator drives too; this file is its thread
//! and the registry as a [`BalanceSite`].

use std::thread::JoinHandle;
use std::time::Duration;

use nearflow_policy::{balance_round, Balance, BalanceSite, NodeLoad, RequestId, RequestNodes};

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
    balance_round(&mut Site(s));
}

/// The registry as the balancer's [`BalanceSite`].
struct Site<'a>(&'a Registry);

impl BalanceSite for Site<'_> {
    fn anyone_asleep(&self) -> bool {
        self.0.sleep.asleep() > 0
    }

    fn loads(&self) -> Vec<NodeLoad> {
        self.0.node_loads()
    }

    fn with_nodes(&mut self, request: RequestId, f: impl FnOnce(&mut RequestNodes)) -> bool {
        let Some(req) = lock(&self.0.synced).in_flight.get(&request).cloned() else {
            return false;
        };
        f(&mut lock(&req.nodes));
        true
    }

    fn move_queued(&mut self, request: RequestId, from: usize, to: usize) -> usize {
        let tasks = self.0.deferred[from].remove_request(request);
        let n = tasks.len();
        self.0.deferred[to].append_request(request, tasks);
        n
    }

    fn domain_workers(&self, d: usize) -> usize {
        self.0.policy.sleep().domains[d].len()
    }

    fn wake_domain(&mut self, d: usize) -> bool {
        self.0.sleep.wake(&[d])
    }

    fn count(&mut self, action: Balance, tasks: usize) {
        match action {
            Balance::Move { request, from, to } => {
                self.0.balancer_moves.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    "bobox balancer: moved request {request} ({tasks} tasks) from node {from} to {to}"
                );
            }
            Balance::Share { request, from, to } => {
                self.0.balancer_shares.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    "bobox balancer: request {request} of node {from} now shared with node {to}"
                );
            }
        }
    }
}
