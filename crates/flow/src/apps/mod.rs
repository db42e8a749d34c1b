//! Applications built on the engine, used by the CLI's `run` and `bench` commands.

pub mod genplan;
pub mod vwap;
