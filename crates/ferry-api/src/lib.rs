//! # ferry-api
//!
//! The contract between Ferry's engines and its connectors:
//!
//! - [`data`]: what flows — Arrow [`RecordBatch`](arrow::record_batch::RecordBatch)es tagged
//!   with their table and a [`RowKind`](data::RowKind) per row for change data.
//! - [`types`]: SeaTunnel's type system (`string`, `decimal(p,s)`, `map<k,v>`, nested rows…)
//!   mapped one-to-one onto Arrow types.
//! - [`options`]: how a connector declares and reads its options, so that unknown or
//!   mistyped options become errors naming the file, line and option.
//! - [`connector`]: the source (enumerator + readers), sink (writer + committer) and
//!   transform traits, shaped after SeaTunnel's connector API v2 and built for
//!   checkpoints from the start.
//! - [`javatime`]: Java `DateTimeFormatter` patterns, compiled once, for the Sql functions
//!   and the file connectors' date formats.
//! - [`registry`]: the table of factories the binary fills in, one line per connector.
//! - [`io`]: the process's asynchronous I/O runtime and the queue with a wake-up signal
//!   that lets a reader built on it hand batches to the engine without polling.
//!
//! The engines (embedded and Spark) depend on this crate only; no engine knows any
//! connector by name.

pub mod catalog;
pub mod connector;
pub mod data;
pub mod declare;
pub mod error;
pub mod io;
pub mod javatext;
pub mod javatime;
pub mod options;
pub mod placeholder;
pub mod registry;
pub mod types;
pub mod value;

pub use catalog::{CatalogInfo, ConstraintKey, ConstraintType, KeyColumn, PrimaryKey, TableId};
pub use connector::*;
pub use data::{ChangeBatch, RowKind, TableSchema, Unchanged};
pub use error::{FerryError, Result};
pub use options::{OptionKind, OptionSpec, Options, PluginLocation};
pub use registry::Registry;
