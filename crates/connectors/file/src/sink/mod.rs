//! The `LocalFile` sink: writes text, csv, json or parquet files, optionally in
//! hive-style partition directories, and publishes them exactly once through staged
//! files that the committer renames into place. A stream of several tables is written
//! table by table, each with its own columns, files and (through `${table_name}` and the
//! other table placeholders) directory, as SeaTunnel's multi-table file sink does.
//!
//! By concern: [`config`] (the options, per-table configuration, save modes and the
//! `Sink`), [`writer`] (a subtask's writer: partitions, rolling, staging), [`formats`]
//! (the open output file of each format) and [`commit`] (publishing staged files).

mod commit;
mod config;
mod formats;
mod writer;

pub use config::{LocalFileSink, LocalFileSinkFactory, SINK_OPTIONS};

/// Where staged files live under the output path; the leading `_` hides it from readers.
pub const STAGING_DIR: &str = "_ferry_tmp";

/// Whether a path component is hidden from readers (used by tests).
#[cfg(test)]
pub(crate) fn hidden(p: &std::path::Path) -> bool {
    p.components()
        .any(|c| crate::source::is_hidden(&c.as_os_str().to_string_lossy()))
}
