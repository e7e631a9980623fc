//! # ferry-engine
//!
//! The embedded engine: runs a [`ferry_plan::JobPlan`] on threads of this process
//! ([`runtime::run`]), with in-band checkpoint barriers (see [`runtime`]). The plan comes
//! from `ferry-plan`, the planner it shares with the Spark engine. It knows connectors only
//! through the traits of `ferry-api` and the plan it is given.

pub mod metrics;
pub mod runtime;

pub use metrics::Metrics;
pub use runtime::{run, RunOutcome, StopHandle};

#[cfg(test)]
mod tests;
