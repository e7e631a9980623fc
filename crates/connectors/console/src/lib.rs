//! Console sink (prints rows with their kind, as SeaTunnel's `Console` does) and
//! Blackhole sink (counts rows and drops them, for benchmarks).
//! Values are printed as SeaTunnel's Java code prints them (`ferry_api::javatext`).

pub mod blackhole;
pub mod console;

pub use blackhole::{total_rows, BlackholeSinkFactory};
pub use console::ConsoleSinkFactory;
