//! This crate has no code. It exists for its dependency list: see its `Cargo.toml`.
//! Crates that are built on their own (the Spark module, by `maturin`) depend on it so
//! that Cargo resolves their dependencies' features exactly as in the workspace build,
//! and the compiled dependencies of `cargo test --workspace` are reused instead of being
//! compiled again.
