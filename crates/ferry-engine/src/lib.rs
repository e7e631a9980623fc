//! # ferry-engine
//!
//! The embedded engine: plans a job ([`plan::build_plan`]) and runs it on threads of this
//! process ([`runtime::run`]), with in-band checkpoint barriers (see [`runtime`]).
//! It knows connectors only through the traits of `ferry-api` and the registry it is
//! given.

pub mod metrics;
pub mod plan;
pub mod runtime;

pub use metrics::Metrics;
pub use plan::{build_plan, setup_sinks, Delivery, JobPlan, PlanOptions};
pub use runtime::{run, RunOutcome, StopHandle};

#[cfg(test)]
mod tests;
