//! # ferry-plan
//!
//! The planner both engines share. "Plan" means one thing in Ferry: the [`JobPlan`] this
//! crate builds from a job file, with every plugin created through the registry, every
//! table's schema known and the wiring checked before any data flows. The embedded engine
//! (`ferry-engine`) runs it on threads; the Spark engine (`ferry-spark`) rebuilds the same
//! plan in every Spark worker and runs it as Spark jobs. Neither engine re-derives any of
//! what is here, and neither depends on the other.
//!
//! - [`plan`]: [`build_plan`], [`setup_sinks`], the [`Delivery`] guarantee and the
//!   [`CheckpointSettings`] with their defaults (one meaning of `checkpoint.interval`).
//! - [`graph`]: plan-graph queries: who reads a stream, the tables of a stream, [`Chain`]s.
//! - [`jobdir`]: job-directory rules: the default checkpoint directory, one engine per
//!   directory, whether a changed job file may resume.
//! - [`exec`]: the source-chain executor: poll a reader, stamp the table name, run the
//!   chained transforms ([`SourceChain`], [`ChainedTransform`]).
//! - [`args`]: `-i NAME=VALUE` variables, parsed once for the CLI and the Spark driver.
//! - [`stop`]: stop requests (signals, `ferry savepoint|cancel`), handled alike by both.

pub mod args;
pub mod exec;
pub mod graph;
pub mod jobdir;
pub mod plan;
pub mod stop;

pub use args::parse_vars;
pub use exec::{ChainedTransform, Polled, SourceChain};
pub use graph::{Chain, Readers};
pub use plan::{
    build_plan, mode_name, setup_sinks, CheckpointMode, CheckpointSettings, Delivery, JobPlan,
    MicroBatch, PlanOptions, SinkNode, SourceNode, TransformNode,
};
pub use stop::{StopRequest, StopRequests};
