//! # ferry-spark
//!
//! Ferry on Apache Spark. This crate is a Python extension module (built with maturin,
//! `--features python`) that runs Ferry's own connectors and transforms inside Spark's
//! Python workers; the Python package `ferry_spark` (in `python/`) registers them as
//! Spark Python data sources and drives the job. See `docs/spark.md`.
//!
//! - [`job`]: the job file's text and variables travel to the workers, which build the
//!   same plan as the `ferry` binary (`ferry_plan::build_plan`, `ferry_plugins`).
//! - [`convert`]: Ferry's Arrow types ↔ the types Spark accepts, and row kinds.
//! - [`source`]: batch splits, streaming offsets and partition readers.
//! - [`sink`]: writers, exactly-once commits per Spark batch, transforms.
//! - [`state`]: the job directory (Spark's checkpoint location) and `ferry jobs` state.
//!
//! Everything but the thin `python` module is plain Rust, tested without Python.

pub mod canonical;
pub mod convert;
pub mod job;
pub mod sink;
pub mod source;
pub mod state;

#[cfg(feature = "python")]
mod python;
