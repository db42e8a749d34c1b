//! Errors: of building a plan ([`PlanError`]) and of running one ([`FlowError`]).

/// A plan that cannot run, reported by [`PlanBuilder::build`](crate::PlanBuilder::build) (or by
/// [`PlanBuilder::connect`](crate::PlanBuilder::connect) at once).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The plan has no operator.
    #[error("the plan has no operators")]
    Empty,
    /// An input port is fed by no stream.
    #[error("input {port} of operator '{operator}' is not connected")]
    UnconnectedInput { operator: String, port: usize },
    /// An output port feeds nothing (a stream nobody consumes would block its producer).
    #[error("output {port} of operator '{operator}' is not connected (consume it, or end it with a sink)")]
    UnconnectedOutput { operator: String, port: usize },
    /// An output port was connected twice; one stream feeds one input (use `broadcast`).
    #[error("output {port} of operator '{operator}' is already connected; use broadcast to feed several inputs")]
    OutputReused { operator: String, port: usize },
    /// An input port was connected twice (use `union` to merge streams).
    #[error(
        "input {port} of operator '{operator}' is already connected; use union to merge streams"
    )]
    InputReused { operator: String, port: usize },
    /// The tuple types of a connection differ.
    #[error("type mismatch: output {from_port} of '{from}' carries {from_type}, input {to_port} of '{to}' expects {to_type}")]
    TypeMismatch {
        from: String,
        from_port: usize,
        from_type: &'static str,
        to: String,
        to_port: usize,
        to_type: &'static str,
    },
    /// A port index the operator does not have.
    #[error("operator '{operator}' has no {direction} port {port} (it has {count})")]
    NoSuchPort {
        operator: String,
        direction: &'static str,
        port: usize,
        count: usize,
    },
    /// The operator graph has a cycle.
    #[error("the plan has a cycle through operators: {0}")]
    Cycle(String),
    /// A setting out of range.
    #[error("invalid plan setting: {0}")]
    Setting(String),
}

/// Why a running plan did not produce its result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// An operator reported an error (a bad input row, say); the plan was stopped.
    #[error("operator '{operator}' failed: {message}")]
    Operator { operator: String, message: String },
    /// An operator panicked; the plan was stopped.
    #[error("operator '{operator}' panicked: {message}")]
    Panicked { operator: String, message: String },
    /// The plan was cancelled through its handle.
    #[error("the plan was cancelled")]
    Cancelled,
    /// The plan's tasks all ended but some operators never finished (an engine bug, reported
    /// rather than hidden).
    #[error("the plan stalled: operators {0:?} never finished")]
    Stalled(Vec<String>),
    /// The runtime failed the request outside any operator.
    #[error("runtime: {0}")]
    Runtime(String),
    /// The plan ran past its time limit ([`Limits::time`](crate::Limits::time)) and was
    /// stopped.
    #[error("the plan ran past its time limit of {limit:?} and was stopped")]
    TimeLimit {
        /// The limit.
        limit: std::time::Duration,
    },
    /// An operator's state would have passed the plan's memory limit
    /// ([`Limits::memory`](crate::Limits::memory)); the plan was stopped.
    #[error("operator '{operator}' would hold more than the plan's memory limit of {limit} bytes ({wanted} bytes charged) and was stopped")]
    MemoryLimit {
        /// The operator that asked.
        operator: String,
        /// The limit.
        limit: usize,
        /// What the plan would have held.
        wanted: usize,
    },
}

impl FlowError {
    /// An error an operator returns for a bad input (the engine fills in the operator's name).
    pub fn input(message: impl Into<String>) -> Self {
        FlowError::Operator {
            operator: String::new(),
            message: message.into(),
        }
    }
}
