//! Console sink (prints rows with their kind, as SeaTunnel's `Console` does) and
//! Blackhole sink (counts rows and drops them, for benchmarks).
//!
//! [`java`] holds the Java-style value formatting both the Console and Assert sinks use.

pub mod blackhole;
pub mod console;
pub mod java;

pub use blackhole::{total_rows, BlackholeSinkFactory};
pub use console::ConsoleSinkFactory;
