//! What the event loop asks of a workload: the requests' roots, and for each task, when it
//! starts, its work and blocks, and when it ends, what it spawns and frees.
//!
//! A static [`Graph`] answers from its tables; a dataflow plan (`plan.rs`) decides as it goes,
//! from its operators' states and buffers, so that the schedule the policy makes changes what
//! runs next, as in the engine.

use crate::workload::{BlockId, Graph, Spawn, TaskId};

/// What a task does, decided when it starts.
#[derive(Debug, Default)]
pub(crate) struct Begun {
    pub(crate) work_ns: f64,
    pub(crate) reads: Vec<BlockId>,
    pub(crate) writes: Vec<BlockId>,
}

/// What a task leaves when it ends.
#[derive(Debug, Default)]
pub(crate) struct Ended {
    pub(crate) spawns: Vec<Spawn>,
    pub(crate) frees: Vec<BlockId>,
}

pub(crate) trait Driver {
    /// What it is, for tables.
    fn name(&self) -> String;
    fn requests(&self) -> usize;
    /// Request `r`'s first task and its data home.
    fn root(&mut self, r: usize) -> (TaskId, Option<usize>);
    fn request_of(&self, t: TaskId) -> u32;
    /// Whether `t` is a `join`'s side ([`crate::workload::Task::call`]).
    fn is_call(&self, _t: TaskId) -> bool {
        false
    }
    fn begin(&mut self, t: TaskId) -> Begun;
    fn end(&mut self, t: TaskId) -> Ended;
    fn block_bytes(&self, b: BlockId) -> u64;
    /// The node of a block that exists before the run (input data).
    fn input_home(&self, b: BlockId) -> Option<usize>;
    /// After the run: whether the workload ended as it should (every operator finished).
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
    /// The simulated time, told before each `end` (a plan records when operators finish).
    fn set_now(&mut self, _ns: u64) {}
    /// After the run: when each operator of each request finished (plans; empty otherwise).
    fn finish_times(&self) -> Vec<Vec<u64>> {
        Vec::new()
    }
    /// Told when task `t` starts: the work and the memory time it is charged.
    fn charged(&mut self, _t: TaskId, _work_ns: f64, _memory_ns: f64) {}
    /// After the run: per operator, the work and memory time its tasks were charged, summed
    /// over requests (plans; empty otherwise).
    fn operator_charges(&self) -> Vec<(f64, f64)> {
        Vec::new()
    }
}

/// A static [`Graph`] as a driver: its tables, and for each join node how many of the tasks
/// that spawn it have ended (it is pushed by the last).
pub(crate) struct GraphDriver<'g> {
    graph: &'g Graph,
    arrived: Vec<u32>,
}

impl<'g> GraphDriver<'g> {
    pub(crate) fn new(graph: &'g Graph) -> Self {
        GraphDriver {
            graph,
            arrived: vec![0; graph.tasks.len()],
        }
    }
}

impl Driver for GraphDriver<'_> {
    fn name(&self) -> String {
        self.graph.name.clone()
    }
    fn requests(&self) -> usize {
        self.graph.roots.len()
    }
    fn root(&mut self, r: usize) -> (TaskId, Option<usize>) {
        self.graph.roots[r]
    }
    fn request_of(&self, t: TaskId) -> u32 {
        self.graph.tasks[t as usize].request
    }
    fn is_call(&self, t: TaskId) -> bool {
        self.graph.tasks[t as usize].call
    }
    fn begin(&mut self, t: TaskId) -> Begun {
        let task = &self.graph.tasks[t as usize];
        Begun {
            work_ns: task.work_ns,
            reads: task.reads.clone(),
            writes: task.writes.clone(),
        }
    }
    fn end(&mut self, t: TaskId) -> Ended {
        let task = &self.graph.tasks[t as usize];
        let (tasks, arrived) = (&self.graph.tasks, &mut self.arrived);
        let spawns = task
            .spawns
            .iter()
            .filter(|s| {
                let c = s.task as usize;
                arrived[c] += 1;
                arrived[c] == tasks[c].joins.max(1)
            })
            .copied()
            .collect();
        Ended {
            spawns,
            frees: task.frees.clone(),
        }
    }
    fn block_bytes(&self, b: BlockId) -> u64 {
        self.graph.blocks[b as usize].bytes
    }
    fn input_home(&self, b: BlockId) -> Option<usize> {
        self.graph.blocks[b as usize].home
    }
}
