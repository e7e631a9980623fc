//! End-to-end tests of the Spark engine.
