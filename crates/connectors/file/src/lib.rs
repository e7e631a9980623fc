//! LocalFile source and sink: text, csv, json and parquet, hive-style partitions,
//! transactional commits — SeaTunnel's `LocalFile` connector, option for option.
//!
//! - [`LocalFileSourceFactory`]: one split per file, resumable inside a file, streaming
//!   discovery of new files (names starting with `.` or `_` are never read).
//! - [`LocalFileSinkFactory`]: files staged under `<path>/_ferry_tmp/…` and renamed into
//!   place by the committer, so output appears exactly once per checkpoint; several input
//!   tables each get their own files, in the directory `path` names for them
//!   (`${table_name}`, `${database_name}`, `${schema_name}`).

mod lzo;
mod read;
mod sink;
mod source;
mod text;
mod util;

pub use sink::{LocalFileSink, LocalFileSinkFactory, SINK_OPTIONS};
pub use source::{LocalFileSource, LocalFileSourceFactory, SOURCE_OPTIONS};

#[cfg(test)]
mod protocol_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_read;
