//! The event loop: virtual workers, the runtime's queues and sleep protocol, and the costs of
//! the machine model.
//!
//! ## What is the runtime's, unchanged
//!
//! Every decision is a call into `nearflow-policy`, as in `nearflow-rt`: where a spawned task
//! goes ([`Policy::place`], [`Policy::place_at`]), where a request's root goes
//! ([`Policy::place_root`], Bobox's [`choose_node`]), which queues an idle worker probes in
//! which order ([`walk`] over [`Policy::search`], deferred takes by [`resolve_deferred`]), whom a
//! push wakes ([`Policy::wake_order`]), what counts as a steal ([`Policy::is_steal`]), and what
//! Bobox's load balancer does ([`balance`]). The queues have the runtime's semantics: a `Local`
//! deque per worker (owner takes the youngest, thieves the oldest), `Shared` deques, `Deferred`
//! queues ordered by request with a deque per request.
//!
//! ## The sleep protocol (rt/src/sleep/README.md), as events
//!
//! - A worker that finds nothing *searches* for `spin_ns` (the runtime's search rounds), counted
//!   in its domain's searchers; a task pushed where it looks is noticed `poll_ns` later.
//! - A push walks the wake order: it stops at the first domain with a searcher, or wakes that
//!   domain's most recent sleeper (LIFO, as the runtime's waiting list), who runs `wake_ns`
//!   later and counts as searching.
//! - A searcher that finds a task stops searching; if it was its domain's last searcher and a
//!   task is still queued within its reach, it wakes for the first such queue of its search (the
//!   wake chain).
//! - The counting-semaphore scheme (FIFO+RR): a permit per queued task; a worker without one
//!   sleeps; a push hands its permit to a sleeper if there is one.
//!
//! A push after which no worker will ever look is a lost wake-up: the run then ends with tasks
//! left and [`SimError::Stalled`], so the simulator also checks the protocol on every run.
//!
//! ## Costs
//!
//! A task's time is the runtime's per-task cost, its probes (empty ones, and a pop under the
//! queue's lock if it came from a shared or deferred queue), what its worker owes (semaphore
//! claims, and 5 µs per wake-up it made as a waker), its work (slowed while its hyper-thread
//! sibling is busy when it starts), and its memory: each block read from the nearest cache of its PU that holds it, or
//! from its home node's memory at the bandwidth left by the other tasks already streaming from
//! that node (and, when remote, over that link; a task is one stream per node and link however
//! many blocks it reads), a remote node's at the core's rate divided by the NUMA factor of the
//! two nodes (a latency ratio). Blocks read
//! or written enter every cache of the PU (LRU). When a task ends, its worker pushes its spawns
//! one after another, each taking its queue's lock (and, for FIFO+RR, posting the semaphore
//! under its lock), so other workers start on the first while the rest are pushed. Each shared or deferred queue, and the counting
//! semaphore, has one lock: operations on it serialise (an operation waits until the lock is
//! free, then holds it `locked_pop_ns`), which is what makes a central queue slow under load. Bandwidth shares are fixed when a task starts
//! (a later reader does not slow an earlier one): an approximation, documented in `lib.rs`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use nearflow_policy::{
    balance_round, choose_node, pop_of, resolve_deferred, search_reaches, wake_walk, walk, Balance,
    BalanceSite, Cursors, End, Home, NodeLoad, Place, Policy, PolicyKind, Pop, Probe, QueueRef,
    QueueView, RequestId, RequestNodes, Rng, RootPlace, SleepScheme, Take, WakeSite,
    BALANCER_PERIOD,
};
use nearflow_topo::Machine;

use crate::cache::Cache;
use crate::driver::Driver;
use crate::model::Model;
use crate::report::{PuStats, Report};
use crate::workload::{BlockId, TaskId};
use crate::{AllocatorKind, SimError, TaskSpan};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The task of this worker ends.
    End(usize),
    /// A woken worker runs.
    Wake(usize),
    /// A searching worker looks again.
    Probe(usize),
    /// A searching worker's search rounds are over (if its epoch still matches).
    SpinEnd(usize, u64),
    /// A worker whose task ended has pushed one of its spawns; it pushes the next.
    Spawned(usize),
    /// Bobox's load balancer runs.
    Balance,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Busy,
    Searching,
    Sleeping,
    /// Woken, not running yet (counts as searching).
    Waking,
}

struct Worker {
    state: State,
    cursors: Cursors,
    rng: Rng,
    last_request: Option<RequestId>,
    epoch: u64,
    probe_pending: bool,
    /// Nodes (and remote node pairs) whose bandwidth the running task holds a share of.
    streams: Vec<(usize, usize)>,
    running: Option<TaskId>,
    /// The task that ended and whose spawns it is still pushing, one after another.
    ending: Option<TaskId>,
    spawning: VecDeque<crate::workload::Spawn>,
    /// Time owed to the next task: semaphore claims, and the wake-ups it made as a waker.
    debt: f64,
    node: usize,
    domain: usize,
    core: usize,
    stats: PuStats,
}

#[derive(Default)]
struct Domain {
    searching: usize,
    waiting: Vec<usize>,
}

pub(crate) struct Sim<'a, D: Driver> {
    machine: &'a Machine,
    policy: Policy,
    model: &'a Model,
    driver: D,
    alloc: AllocatorKind,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    locals: Vec<VecDeque<TaskId>>,
    shared: Vec<VecDeque<TaskId>>,
    deferred: Vec<BTreeMap<RequestId, VecDeque<TaskId>>>,
    /// Workers whose search reaches each queue (`Local`, then `Shared`, then `Deferred`).
    reach: Vec<Vec<usize>>,
    workers: Vec<Worker>,
    domains: Vec<Domain>,
    permits: usize,
    sem_waiting: Vec<usize>,
    /// When the lock of each queue (by `queue_index`; locals have none) and of the counting
    /// semaphore is next free: operations on one lock serialise.
    lock_free_at: Vec<u64>,
    sem_free_at: u64,
    caches: Vec<Cache>,
    pu_caches: Vec<Vec<usize>>,
    /// Homes of written blocks (input blocks: the driver's).
    block_home: Vec<Option<usize>>,
    node_streams: Vec<u32>,
    link_streams: Vec<Vec<u32>>,
    numa_factor: Vec<Vec<f64>>,
    pending: Vec<u64>,
    done_at: Vec<Option<u64>>,
    req_nodes: Vec<Option<RequestNodes>>,
    ticket: usize,
    /// Requests not completed.
    left: usize,
    report: Report,
    /// Every task run, when asked for (`simulate_traced`).
    timeline: Option<Vec<TaskSpan>>,
}

/// The simulator's queues as the policy's shared decisions see them (the runtime's registry
/// is the other view).
impl<D: Driver> QueueView for Sim<'_, D> {
    fn queue_len(&self, q: QueueRef) -> usize {
        match q {
            QueueRef::Local(v) => self.locals.get(v).map_or(0, VecDeque::len),
            QueueRef::Shared(i) => self.shared.get(i).map_or(0, VecDeque::len),
            QueueRef::Deferred(i) => self
                .deferred
                .get(i)
                .map_or(0, |d| d.values().map(VecDeque::len).sum()),
        }
    }
    fn sleeping(&self, d: usize) -> usize {
        self.domains.get(d).map_or(0, |d| d.waiting.len())
    }
    fn requests(&self, f: &mut dyn FnMut(RequestId, &[usize])) {
        for (r, nodes) in self.req_nodes.iter().enumerate() {
            if let Some(nodes) = nodes {
                f(r as RequestId, nodes.nodes());
            }
        }
    }
}

impl<'a, D: Driver> Sim<'a, D> {
    pub(crate) fn new(
        machine: &'a Machine,
        kind: PolicyKind,
        model: &'a Model,
        driver: D,
        alloc: AllocatorKind,
        seed: u64,
    ) -> Self {
        let policy = Policy::new(kind, machine);
        let n = policy.workers();
        let nodes = machine.node_count();
        let mut queues: Vec<QueueRef> = (0..policy.local_queues).map(QueueRef::Local).collect();
        queues.extend((0..policy.shared_queues).map(QueueRef::Shared));
        queues.extend((0..policy.deferred_queues).map(QueueRef::Deferred));
        let reach = queues
            .iter()
            .map(|&q| {
                (0..n)
                    .filter(|&w| search_reaches(policy.search(w), q))
                    .collect()
            })
            .collect();
        let sleep = policy.sleep().clone();
        let workers = (0..n)
            .map(|w| Worker {
                state: State::Sleeping,
                cursors: Cursors::new(policy.search(w)),
                rng: Rng::new(seed ^ (w as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                last_request: None,
                epoch: 0,
                probe_pending: false,
                streams: Vec::new(),
                running: None,
                ending: None,
                spawning: VecDeque::new(),
                debt: 0.0,
                node: machine.node_of(w),
                domain: sleep.domain_of[w],
                core: machine.pus()[w].core,
                stats: PuStats::default(),
            })
            .collect();
        let mut domains: Vec<Domain> = sleep.domains.iter().map(|_| Domain::default()).collect();
        let mut sem_waiting = Vec::new();
        // Every worker starts asleep; the lowest-numbered is woken first.
        match sleep.scheme {
            SleepScheme::Domains => {
                for (d, ws) in sleep.domains.iter().enumerate() {
                    domains[d].waiting = ws.iter().rev().copied().collect();
                }
            }
            SleepScheme::CountingSemaphore => sem_waiting = (0..n).rev().collect(),
        }
        let caches: Vec<Cache> = machine
            .caches()
            .iter()
            .filter_map(|c| c.size.map(|s| Cache::new(c.level, s)))
            .collect();
        let sized: Vec<&nearflow_topo::Cache> = machine
            .caches()
            .iter()
            .filter(|c| c.size.is_some())
            .collect();
        let pu_caches = (0..n)
            .map(|p| {
                let mut v: Vec<usize> = (0..sized.len())
                    .filter(|&i| sized[i].pus.binary_search(&p).is_ok())
                    .collect();
                v.sort_by_key(|&i| sized[i].level);
                v
            })
            .collect();
        let numa_factor = (0..nodes)
            .map(|a| {
                (0..nodes)
                    .map(|b| match machine.numa_raw() {
                        Some(m) if m[a][a] > 0 => m[a][b] as f64 / m[a][a] as f64,
                        _ => 1.0 + f64::from(machine.node_distance(a, b)),
                    })
                    .collect()
            })
            .collect();
        let levels: Vec<u8> = {
            let mut l: Vec<u8> = caches.iter().map(|c| c.level).collect();
            l.sort_unstable();
            l.dedup();
            l
        };
        let requests = driver.requests();
        let report = Report::new(
            machine,
            kind,
            driver.name(),
            requests,
            model,
            alloc,
            &levels,
        );
        Sim {
            machine,
            model,
            driver,
            alloc,
            now: 0,
            seq: 0,
            events: BinaryHeap::new(),
            locals: vec![VecDeque::new(); policy.local_queues],
            shared: vec![VecDeque::new(); policy.shared_queues],
            deferred: vec![BTreeMap::new(); policy.deferred_queues],
            reach,
            workers,
            domains,
            permits: 0,
            sem_waiting,
            lock_free_at: vec![
                0;
                policy.local_queues + policy.shared_queues + policy.deferred_queues
            ],
            sem_free_at: 0,
            caches,
            pu_caches,
            block_home: Vec::new(),
            node_streams: vec![0; nodes],
            link_streams: vec![vec![0; nodes]; nodes],
            numa_factor,
            pending: vec![0; requests],
            done_at: vec![None; requests],
            req_nodes: vec![None; requests],
            ticket: 0,
            left: requests,
            report,
            policy,
            timeline: None,
        }
    }

    /// Records every task run (for a timeline) when `on`.
    pub(crate) fn traced(mut self, on: bool) -> Self {
        self.timeline = on.then(Vec::new);
        self
    }

    fn at(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, e)));
    }

    /// Takes a lock free at `*free_at` for `hold` ns from time `at`; returns the time spent
    /// (waiting and holding).
    fn occupy(at: u64, free_at: &mut u64, hold: f64) -> f64 {
        let start = at.max(*free_at);
        *free_at = start + hold.ceil() as u64;
        (*free_at - at) as f64
    }

    /// A locked operation on queue `q` (none for a worker's own deque), `after` ns from now
    /// (a spawner's earlier pushes of the same task end).
    fn lock_queue(&mut self, q: QueueRef, after: f64) -> f64 {
        if let QueueRef::Local(_) = q {
            return 0.0;
        }
        let i = self.queue_index(q);
        let at = self.now + after as u64;
        Self::occupy(at, &mut self.lock_free_at[i], self.model.locked_pop_ns)
    }

    /// One operation on the counting semaphore's lock, `after` ns from now: a claim, or a post
    /// (which also notifies its condition variable under the lock, `post_task`).
    fn lock_semaphore(&mut self, after: f64, post: bool) -> f64 {
        let at = self.now + after as u64;
        let hold = self.model.locked_pop_ns + if post { self.model.notify_ns } else { 0.0 };
        Self::occupy(at, &mut self.sem_free_at, hold)
    }

    fn next_ticket(&mut self) -> usize {
        self.ticket += 1;
        self.ticket - 1
    }

    fn queue_index(&self, q: QueueRef) -> usize {
        match q {
            QueueRef::Local(v) => v,
            QueueRef::Shared(i) => self.policy.local_queues + i,
            QueueRef::Deferred(i) => self.policy.local_queues + self.policy.shared_queues + i,
        }
    }

    /// Runs to the end; the report, or why the run could not end.
    pub(crate) fn run(mut self) -> Result<(Report, Vec<TaskSpan>), SimError> {
        for r in 0..self.driver.requests() {
            self.submit(r);
        }
        if self.policy.services().balancer {
            self.at(BALANCER_PERIOD.as_nanos() as u64, Event::Balance);
        }
        while let Some(Reverse((t, _, e))) = self.events.pop() {
            self.now = t;
            self.report.events += 1;
            match e {
                Event::End(w) => self.end(w),
                Event::Wake(w) => self.woken(w),
                Event::Probe(w) => self.probe(w),
                Event::SpinEnd(w, epoch) => self.spin_end(w, epoch),
                Event::Spawned(w) => self.spawn_next(w),
                Event::Balance => {
                    if self.left > 0 {
                        self.balance_tick();
                        self.at(t + BALANCER_PERIOD.as_nanos() as u64, Event::Balance);
                    }
                }
            }
        }
        if self.left > 0 {
            return Err(SimError::Stalled {
                left: self.left,
                at_ns: self.now,
            });
        }
        self.driver.check().map_err(SimError::Model)?;
        let mut report = self.report;
        report.operator_done_ns = self.driver.finish_times();
        report.operator_charges = self.driver.operator_charges();
        report.finish(
            self.workers.into_iter().map(|w| w.stats).collect(),
            self.done_at.into_iter().map(|d| d.unwrap_or(0)).collect(),
        );
        Ok((report, self.timeline.unwrap_or_default()))
    }

    // ---- requests and spawns (rt/src/runtime.rs `submit_inner`, worker.rs `spawn_task`) ----

    fn submit(&mut self, r: usize) {
        let (root, home) = self.driver.root(r);
        let homed = home.and_then(|h| {
            let home = Home::node(self.machine, h).ok()?;
            let t = self.next_ticket();
            self.policy.place_at(home, t).map(|q| (h, q))
        });
        let q = match (self.policy.place_root(), homed) {
            (RootPlace::LeastLoadedNode, Some((h, q))) => {
                self.req_nodes[r] = Some(RequestNodes::new(h));
                q
            }
            (_, Some((_, q))) => q,
            (RootPlace::Queue(q), None) => q,
            (RootPlace::DeferredByRequest { groups }, None) => QueueRef::Deferred(r % groups),
            (RootPlace::RoundRobinShared { count }, None) => {
                QueueRef::Shared(self.next_ticket() % count)
            }
            (RootPlace::LeastLoadedNode, None) => {
                let node = choose_node(&self.node_loads());
                self.req_nodes[r] = Some(RequestNodes::new(node));
                QueueRef::Deferred(node)
            }
        };
        self.lock_queue(q, 0.0);
        self.push(q, root);
        self.notify(q, None);
    }

    /// Pushes one spawn of worker `w`; returns the time the push took (its queue's lock, and
    /// the semaphore's for FIFO+RR).
    fn spawn(&mut self, w: usize, s: crate::workload::Spawn) -> f64 {
        let r = self.driver.request_of(s.task) as usize;
        let homed = match s.pu {
            Some(p) => Home::pu(self.machine, p).ok(),
            None => s.home.and_then(|h| Home::node(self.machine, h).ok()),
        }
        .and_then(|home| {
            let t = self.next_ticket();
            self.policy.place_at(home, t)
        });
        let q = match homed {
            Some(q) => q,
            None => match self.policy.place(s.kind, w) {
                Place::Queue(q) => q,
                Place::RoundRobinShared { count } => QueueRef::Shared(self.next_ticket() % count),
                Place::RequestNode => {
                    let n = self.req_nodes[r].as_mut().map_or(0, |n| n.next_node());
                    QueueRef::Deferred(n)
                }
            },
        };
        let mut cost = self.lock_queue(q, 0.0);
        self.push(q, s.task);
        if self.policy.sleep().scheme == SleepScheme::CountingSemaphore {
            cost += self.lock_semaphore(cost, true);
        }
        self.notify(q, Some(w));
        cost
    }

    fn push(&mut self, q: QueueRef, t: TaskId) {
        let r = self.driver.request_of(t);
        self.pending[r as usize] += 1;
        match q {
            QueueRef::Local(v) => self.locals[v].push_back(t),
            QueueRef::Shared(i) => self.shared[i].push_back(t),
            QueueRef::Deferred(i) => self.deferred[i]
                .entry(RequestId::from(r))
                .or_default()
                .push_back(t),
        }
    }

    // ---- the sleep protocol ----

    /// After a push to `q` by worker `by` (or from outside) (rt/src/sleep/mod.rs `wake`,
    /// `post_task`).
    fn notify(&mut self, q: QueueRef, by: Option<usize>) {
        // Searching workers poll: whoever looks where the task is notices it soon.
        let qi = self.queue_index(q);
        for i in 0..self.reach[qi].len() {
            let w = self.reach[qi][i];
            if self.workers[w].state == State::Searching && !self.workers[w].probe_pending {
                self.workers[w].probe_pending = true;
                let t = self.now + self.model.poll_ns as u64;
                self.at(t, Event::Probe(w));
            }
        }
        match self.policy.sleep().scheme {
            SleepScheme::Domains => {
                let order = self.policy.wake_order(q).to_vec();
                self.wake(&order, by);
            }
            SleepScheme::CountingSemaphore => match self.sem_waiting.pop() {
                Some(w) => self.wake_worker(w, by),
                None => self.permits += 1,
            },
        }
    }

    /// The wake walk (the policy's [`wake_walk`], as the runtime's) over these domains.
    fn wake(&mut self, order: &[usize], by: Option<usize>) -> bool {
        match wake_walk(&mut SimDomains(&mut self.domains), order) {
            Some(w) => {
                self.wake_worker(w, by);
                true
            }
            None => false,
        }
    }

    /// Wakes `w`; a waker that is a worker pays the system call (charged to its next task).
    fn wake_worker(&mut self, w: usize, by: Option<usize>) {
        if let Some(b) = by {
            self.workers[b].debt += self.model.wake_call_ns;
        }
        self.workers[w].state = State::Waking;
        self.report.wakes += 1;
        let t = self.now + self.model.wake_ns as u64;
        self.at(t, Event::Wake(w));
    }

    fn woken(&mut self, w: usize) {
        debug_assert_eq!(self.workers[w].state, State::Waking);
        self.workers[w].stats.sleeps += 1;
        match self.policy.sleep().scheme {
            SleepScheme::Domains => {
                self.workers[w].state = State::Searching;
                if !self.try_start_searching(w) {
                    self.start_spin(w);
                }
            }
            SleepScheme::CountingSemaphore => {
                // It holds the permit of the push that woke it; taking it locks the semaphore.
                self.workers[w].state = State::Searching;
                let debt = self.workers[w].debt;
                self.workers[w].debt += self.lock_semaphore(debt, false);
                let found = self.find_and_start(w);
                debug_assert!(found, "a permit without a task");
            }
        }
    }

    fn start_spin(&mut self, w: usize) {
        let wk = &mut self.workers[w];
        wk.epoch += 1;
        let (epoch, t) = (wk.epoch, self.now + self.model.spin_ns as u64);
        self.at(t, Event::SpinEnd(w, epoch));
    }

    fn probe(&mut self, w: usize) {
        self.workers[w].probe_pending = false;
        if self.workers[w].state == State::Searching {
            self.try_start_searching(w);
        }
    }

    fn spin_end(&mut self, w: usize, epoch: u64) {
        let wk = &self.workers[w];
        if wk.state != State::Searching || wk.epoch != epoch {
            return;
        }
        // The re-check after registering to sleep.
        if self.try_start_searching(w) {
            return;
        }
        let d = self.workers[w].domain;
        self.domains[d].searching -= 1;
        self.domains[d].waiting.push(w);
        self.workers[w].state = State::Sleeping;
    }

    /// A searching worker (Domains scheme) looks once; on success it stops searching and, as
    /// its domain's last searcher, passes the wake on if a task is still queued within its
    /// reach (the wake chain).
    fn try_start_searching(&mut self, w: usize) -> bool {
        if !self.find_and_start(w) {
            return false;
        }
        let d = self.workers[w].domain;
        self.domains[d].searching -= 1;
        if self.domains[d].searching == 0 {
            let Some(q) = self.queued_within_reach(w) else {
                return true;
            };
            let order = self.policy.wake_order(q).to_vec();
            self.wake(&order, Some(w));
        }
        true
    }

    /// The first queue of `w`'s search that holds a task (rt/src/worker.rs
    /// `queued_within_reach`).
    fn queued_within_reach(&self, w: usize) -> Option<QueueRef> {
        self.policy.first_queued(w, self)
    }

    // ---- finding and running tasks ----

    /// Walks the worker's search (rt/src/worker.rs `find`); starts the task found.
    fn find_and_start(&mut self, w: usize) -> bool {
        let search = self.policy.search(w);
        let last = self.workers[w].last_request;
        let mut probes = 0u32;
        let (locals, shared, deferred) = (&mut self.locals, &mut self.shared, &mut self.deferred);
        let wk = &mut self.workers[w];
        let found = walk(search, &mut wk.cursors, &mut wk.rng, |p| {
            probes += 1;
            take(locals, shared, deferred, w, p, last)
        });
        let Some((t, probe)) = found else {
            self.report.failed_probes += u64::from(probes);
            return false;
        };
        let steal = self.policy.is_steal(w, probe.queue);
        let wk = &mut self.workers[w];
        wk.last_request = Some(RequestId::from(self.driver.request_of(t)));
        let rule = usize::from(probe.rule).saturating_sub(1);
        if wk.stats.by_rule.len() <= rule {
            wk.stats.by_rule.resize(rule + 1, 0);
        }
        wk.stats.by_rule[rule] += 1;
        wk.stats.steals += u64::from(steal);
        let debt = std::mem::take(&mut wk.debt);
        // A join's side taken back by the worker that spawned it (its own queue) is a call.
        let own = matches!(probe.queue, QueueRef::Local(v) if v == w);
        let run_ns = if own && self.driver.is_call(t) {
            self.model.call_ns
        } else {
            self.model.task_ns
        };
        let overhead = run_ns
            + f64::from(probes.saturating_sub(1)) * self.model.probe_ns
            + debt
            + self.lock_queue(probe.queue, debt);
        self.start(w, t, overhead);
        true
    }

    fn start(&mut self, w: usize, t: TaskId, overhead: f64) {
        let task = self.driver.begin(t);
        self.report.total_work_ns += task.work_ns;
        let core = self.workers[w].core;
        let sibling_busy = self
            .workers
            .iter()
            .enumerate()
            .any(|(v, o)| v != w && o.core == core && o.state == State::Busy);
        let work = task.work_ns
            * if sibling_busy {
                self.model.ht_slowdown
            } else {
                1.0
            };
        let mut mem = 0.0;
        for i in 0..task.reads.len() {
            mem += self.read(w, task.reads[i]);
        }
        for i in 0..task.writes.len() {
            mem += self.write(w, task.writes[i]);
        }
        self.driver.charged(t, work, mem);
        let d = (overhead + work + mem).ceil() as u64;
        let wk = &mut self.workers[w];
        wk.state = State::Busy;
        wk.running = Some(t);
        wk.stats.busy_ns += d;
        wk.stats.tasks += 1;
        wk.stats.work_ns += work;
        wk.stats.memory_ns += mem;
        let end = self.now + d;
        if let Some(tl) = &mut self.timeline {
            tl.push(TaskSpan {
                pu: w,
                request: self.driver.request_of(t),
                task: t,
                start_ns: self.now,
                end_ns: end,
            });
        }
        self.at(end, Event::End(w));
    }

    /// The time to read block `b` on PU `w`; moves it into `w`'s caches.
    fn read(&mut self, w: usize, b: BlockId) -> f64 {
        let bytes = self.driver.block_bytes(b);
        let mine = &self.pu_caches[w];
        for (k, &ci) in mine.iter().enumerate() {
            if self.caches[ci].touch(b) {
                let level = self.caches[ci].level;
                self.report.hit(level, bytes);
                for &lower in &mine[..k] {
                    self.caches[lower].insert(b, bytes);
                }
                return bytes as f64 / self.model.cache_bw(level);
            }
        }
        let from = self.workers[w].node;
        let home = self
            .block_home
            .get(b as usize)
            .copied()
            .flatten()
            .or_else(|| self.driver.input_home(b))
            .unwrap_or(from);
        // One stream per task per (node, link): a task's later blocks from the same node follow
        // its first in the same stream, sharing the bandwidth with the other tasks' streams, not
        // with its own (a stream per block would make a task's memory time grow with the square
        // of its blocks).
        let mine = u32::from(self.workers[w].streams.contains(&(from, home)));
        // The NUMA factor is a latency ratio: with the same outstanding misses a core pulls
        // `factor` times less from a remote node. It limits the core's own rate; the link's
        // share limits it separately, and neither is charged twice.
        let mut bw = (self.model.core_dram_bw / self.numa_factor[from][home])
            .min(self.model.node_bw / f64::from(self.node_streams[home] - mine + 1));
        if home != from {
            bw = bw.min(self.model.link_bw / f64::from(self.link_streams[from][home] - mine + 1));
            self.report.dram_remote_bytes += bytes;
        } else {
            self.report.dram_local_bytes += bytes;
        }
        if mine == 0 {
            self.node_streams[home] += 1;
            if home != from {
                self.link_streams[from][home] += 1;
            }
            self.workers[w].streams.push((from, home));
        }
        self.workers[w].stats.dram_bytes += bytes;
        for &ci in &self.pu_caches[w] {
            self.caches[ci].insert(b, bytes);
        }
        bytes as f64 / bw
    }

    /// The time to write block `b` (fresh) on PU `w`; its home is decided now.
    fn write(&mut self, w: usize, b: BlockId) -> f64 {
        let bytes = self.driver.block_bytes(b);
        let nodes = self.machine.node_count();
        if self.block_home.len() <= b as usize {
            self.block_home.resize(b as usize + 1, None);
        }
        // A block written again (an operator's state) keeps its home; a fresh one gets one.
        if self.block_home[b as usize].is_none() {
            self.block_home[b as usize] = Some(match self.alloc {
                // First touch by the writer's per-thread allocator on its node (LAS §5).
                AllocatorKind::Nearflow => self.workers[w].node,
                // A recycled block may come from any node's memory (glibc's arenas keep no node).
                AllocatorKind::System => (b as usize).wrapping_mul(0x9E37_79B1) % nodes,
            });
        }
        // Write invalidates: copies in caches this PU does not use are dropped.
        let mine = &self.pu_caches[w];
        for (ci, c) in self.caches.iter_mut().enumerate() {
            if !mine.contains(&ci) {
                c.forget(b);
            }
        }
        for &ci in &self.pu_caches[w] {
            self.caches[ci].insert(b, bytes);
        }
        bytes as f64 / self.model.cache_write_bw
    }

    fn end(&mut self, w: usize) {
        let t = self.workers[w]
            .running
            .take()
            .expect("an End without a task");
        for (from, home) in std::mem::take(&mut self.workers[w].streams) {
            self.node_streams[home] -= 1;
            if from != home {
                self.link_streams[from][home] -= 1;
            }
        }
        self.driver.set_now(self.now);
        let ended = self.driver.end(t);
        for &b in &ended.frees {
            for c in &mut self.caches {
                c.forget(b);
            }
            if let Some(h) = self.block_home.get_mut(b as usize) {
                *h = None;
            }
        }
        let wk = &mut self.workers[w];
        wk.spawning = ended.spawns.into();
        wk.ending = Some(t);
        self.spawn_next(w);
    }

    /// Pushes the ended task's spawns one after another, each after the previous push's time
    /// (so a worker that starts meanwhile takes the first ones while the rest are pushed, as
    /// in the runtime); then the task is over and the worker looks for the next.
    fn spawn_next(&mut self, w: usize) {
        while let Some(s) = self.workers[w].spawning.pop_front() {
            let cost = self.spawn(w, s).ceil() as u64;
            if cost > 0 {
                self.workers[w].stats.busy_ns += cost;
                let t = self.now + cost;
                self.at(t, Event::Spawned(w));
                return;
            }
        }
        let t = self.workers[w]
            .ending
            .take()
            .expect("spawns without a task");
        let r = self.driver.request_of(t) as usize;
        self.pending[r] -= 1;
        if self.pending[r] == 0 {
            self.left -= 1;
            self.done_at[r] = Some(self.now);
            self.req_nodes[r] = None;
        }
        self.workers[w].state = State::Searching;
        match self.policy.sleep().scheme {
            SleepScheme::Domains => {
                if !self.find_and_start(w) {
                    let d = self.workers[w].domain;
                    self.domains[d].searching += 1;
                    self.start_spin(w);
                }
            }
            SleepScheme::CountingSemaphore => {
                if self.permits > 0 {
                    self.permits -= 1;
                    let debt = self.workers[w].debt;
                    self.workers[w].debt += self.lock_semaphore(debt, false);
                    let found = self.find_and_start(w);
                    debug_assert!(found, "a permit without a task");
                } else {
                    self.workers[w].state = State::Sleeping;
                    self.sem_waiting.push(w);
                }
            }
        }
    }

    // ---- Bobox-2011's load balancer (rt/src/balancer.rs `tick`) ----

    fn node_loads(&self) -> Vec<NodeLoad> {
        self.policy.node_loads(self)
    }

    fn balance_tick(&mut self) {
        balance_round(self);
    }
}

/// The simulator's queues as the balancer's site: the round is the runtime's
/// ([`balance_round`]), carried out on these queues.
impl<D: Driver> BalanceSite for Sim<'_, D> {
    fn anyone_asleep(&self) -> bool {
        self.domains.iter().any(|d| !d.waiting.is_empty())
    }

    fn loads(&self) -> Vec<NodeLoad> {
        self.node_loads()
    }

    fn with_nodes(&mut self, request: RequestId, f: impl FnOnce(&mut RequestNodes)) -> bool {
        match self.req_nodes[request as usize].as_mut() {
            Some(nodes) => {
                f(nodes);
                true
            }
            None => false,
        }
    }

    fn move_queued(&mut self, request: RequestId, from: usize, to: usize) -> usize {
        let tasks = self.deferred[from].remove(&request).unwrap_or_default();
        let n = tasks.len();
        self.deferred[to].entry(request).or_default().extend(tasks);
        n
    }

    fn domain_workers(&self, d: usize) -> usize {
        self.policy.sleep().domains[d].len()
    }

    fn wake_domain(&mut self, d: usize) -> bool {
        self.wake(&[d], None)
    }

    fn count(&mut self, action: Balance, _tasks: usize) {
        match action {
            Balance::Move { .. } => self.report.balancer_moves += 1,
            Balance::Share { .. } => self.report.balancer_shares += 1,
        }
    }
}

/// The simulator's sleep domains as the policy's wake walk sees them.
struct SimDomains<'a>(&'a mut [Domain]);

impl WakeSite for SimDomains<'_> {
    fn searcher_stays(&mut self, _: &[usize], d: usize) -> bool {
        self.0[d].searching > 0
    }

    fn has_sleeper(&self, d: usize) -> bool {
        !self.0[d].waiting.is_empty()
    }

    fn take_sleeper(&mut self, d: usize) -> Option<usize> {
        let w = self.0[d].waiting.pop()?;
        self.0[d].searching += 1;
        Some(w)
    }
}

/// One pop as a probe prescribes (rt/src/worker.rs `try_take`, queue.rs `take`).
fn take(
    locals: &mut [VecDeque<TaskId>],
    shared: &mut [VecDeque<TaskId>],
    deferred: &mut [BTreeMap<RequestId, VecDeque<TaskId>>],
    w: usize,
    p: &Probe,
    last: Option<RequestId>,
) -> Option<TaskId> {
    let pop = |d: &mut VecDeque<TaskId>, end: End| match end {
        End::Youngest => d.pop_back(),
        End::Oldest => d.pop_front(),
    };
    match pop_of(w, p) {
        Pop::OwnYoungest => locals[w].pop_back(),
        Pop::LocalOldest(v) => locals[v].pop_front(),
        Pop::Shared(i, end) => pop(&mut shared[i], end),
        Pop::Deferred(i, how) => {
            let queue = &mut deferred[i];
            let ids: Vec<RequestId> = match how {
                Take::LastRequestOldest => queue.keys().copied().collect(),
                _ => queue.keys().take(2).copied().collect(),
            };
            let (r, end) = resolve_deferred(how, &ids, last)?;
            let d = queue.get_mut(&r)?;
            let t = pop(d, end);
            if d.is_empty() {
                queue.remove(&r);
            }
            t
        }
    }
}
