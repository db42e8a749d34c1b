//! The error every stage of a query returns.

/// Why a query could not run.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// A syntax error: the position, what was expected, and the line with a caret.
    #[error("SPARQL syntax error: {0}")]
    Syntax(String),
    /// Valid SPARQL this engine does not evaluate (refused rather than answered wrongly).
    #[error("not supported: {0}")]
    Unsupported(String),
    /// A query that cannot be evaluated (a bad regular expression, …).
    #[error("invalid query: {0}")]
    Invalid(String),
    /// The plan failed while running.
    #[error("query execution failed: {0}")]
    Exec(String),
    /// The query was cancelled by its caller (`nearflow_sparql::Running::cancel_on`: a client that went away).
    #[error("the query was cancelled")]
    Cancelled,
    /// The query ran past [`Options::timeout`](crate::Options::timeout) and was stopped.
    #[error("the query ran past its time limit of {0:.3?} and was stopped")]
    Timeout(std::time::Duration),
    /// The query's operators would have held more than [`Options::memory_limit`](crate::Options::memory_limit); it was
    /// stopped.
    #[error("the query would hold more than its memory limit of {limit} bytes ({operator} asked for {wanted} in all) and was stopped")]
    MemoryLimit {
        /// The operator that asked.
        operator: String,
        /// The limit.
        limit: usize,
        /// What the query would have held.
        wanted: usize,
    },
}

impl QueryError {
    pub fn from_flow(e: nearflow_flow::FlowError) -> Self {
        use nearflow_flow::FlowError;
        match e {
            FlowError::TimeLimit { limit } => QueryError::Timeout(limit),
            FlowError::MemoryLimit {
                operator,
                limit,
                wanted,
            } => QueryError::MemoryLimit {
                operator,
                limit,
                wanted,
            },
            other => QueryError::Exec(other.to_string()),
        }
    }
}
