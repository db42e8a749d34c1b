//! Applications built on the engine, used by the CLI's `run` and `bench` commands.


pub mod vwap;
pub mod genplan;
