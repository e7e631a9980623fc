//! # ferry-connector-testkit
//!
//! Every connector proves the source/sink protocol with this kit, in a few lines of its
//! own tests. It drives a plugin on one thread exactly as the engines do, with no engine
//! in between, so that a failure points at the connector:
//!
//! - [`SourceDriver`]: one enumerator and `parallelism` readers; splits discovered and
//!   assigned, readers polled, checkpoints taken between polls and restored into fresh
//!   readers. Snapshots go through JSON text, as they do in checkpoint files and in
//!   Spark's offset logs, so a state that does not survive serialisation fails here.
//! - [`SinkDriver`]: writers and the committer through write → prepare → store →
//!   commit, with [`SinkDriver::crash`] dropping every writer on the floor as `kill -9`
//!   would, and a restore that publishes the stored checkpoint again (committers must be
//!   idempotent).
//! - Protocol checks built on them: [`check_source_restore`] (rows before a snapshot plus
//!   rows after restoring it are the whole input, none lost, none repeated),
//!   [`check_source_replay`] (restoring the same snapshot twice reads the same rows) and
//!   [`check_sink`] (a crash between prepare and commit, and one before any prepare, lose
//!   nothing and, for an exactly-once sink, repeat nothing).
//!
//! Rows are compared as [`rows`]: one text per row (table, row kind, values as JSON),
//! sorted, so that the order in which readers or writers interleave does not matter.
//!
//! ```
//! use std::sync::Arc;
//! use ferry_api::{JobMode, Source};
//! use ferry_connector_testkit::{check_source_replay, check_source_restore, job};
//!
//! /// In a connector's tests, with `source` from its factory: restored after 1000 rows
//! /// with 2 readers, it reads every row once; a replay reads the same rows.
//! fn proves_the_source_protocol(source: &dyn Source) -> ferry_api::Result<()> {
//!     check_source_restore(source, 2, job(JobMode::Batch), 1_000)?;
//!     check_source_replay(source, 2, job(JobMode::Batch), 1_000)
//! }
//! ```

mod sink;
mod source;

use arrow::array::Array;
use ferry_api::value::{array_value_to_json, RowStyle};
use ferry_api::{ChangeBatch, FerryError, JobContext, JobMode, Result};
use serde_json::{Map, Value};

pub use sink::{check_sink, SinkCheckpoint, SinkDriver};
pub use source::{
    check_source_bounded_replay, check_source_replay, check_source_restore, read_all, SourceDriver,
    SourceSnapshot,
};

/// `batches` insert batches of table `t` (`id bigint, name string`, both nullable) with
/// ids counting up from 0, `rows` a batch, and names `"{prefix} {id}"`: the input that
/// sinks' protocol tests write.
pub fn id_name_batches(
    batches: i64,
    rows: i64,
    prefix: &str,
) -> (ferry_api::TableSchema, Vec<ChangeBatch>) {
    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let out = (0..batches)
        .map(|b| {
            let ids: Vec<i64> = (b * rows..(b + 1) * rows).collect();
            let names: Vec<String> = ids.iter().map(|i| format!("{prefix} {i}")).collect();
            let data = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(ids)),
                    Arc::new(StringArray::from(names)),
                ],
            )
            .expect("two columns of equal length match the schema");
            ChangeBatch::inserts("t".into(), data)
        })
        .collect();
    (ferry_api::TableSchema::new("t", schema), out)
}

/// A name no other test, and no earlier run, uses: `ferry_{test}_{pid}_{nanos}`, only
/// letters, digits and `_`, so valid as a queue, stream, topic or client id.
pub fn unique_name(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("ferry_{test}_{}_{nanos}", std::process::id())
}

/// Runs `f` to its end on the process's I/O runtime ([`ferry_api::io`]), for tests that
/// talk to a broker themselves.
pub fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    ferry_api::io::handle()
        .expect("the I/O runtime starts")
        .block_on(f)
}

/// The non-null values of the first column (a `bigint` id) of every batch, sorted.
pub fn ids(batches: &[ChangeBatch]) -> Vec<i64> {
    let mut out: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.data
                .column(0)
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .expect("the first column is a bigint id")
                .iter()
                .flatten()
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out
}

/// A job context for tests: the given mode, job id `testkit`.
pub fn job(mode: JobMode) -> JobContext {
    JobContext {
        mode,
        job_id: "testkit".into(),
        job_name: "testkit".into(),
    }
}

/// Every row of `batches` as one text (`table kind {values}`), sorted: a multiset of rows
/// that compares equal whatever the order of batches and rows.
pub fn rows(batches: &[ChangeBatch]) -> Vec<String> {
    let mut out = Vec::with_capacity(batches.iter().map(ChangeBatch::num_rows).sum());
    for b in batches {
        let schema = b.data.schema();
        for i in 0..b.num_rows() {
            let mut values = Map::new();
            for (f, col) in schema.fields().iter().zip(b.data.columns()) {
                let v = if col.is_null(i) {
                    Value::Null
                } else {
                    array_value_to_json(col.as_ref(), i, RowStyle::Named)
                };
                values.insert(f.name().clone(), v);
            }
            out.push(format!(
                "{} {} {}",
                b.table,
                b.kind(i).short(),
                Value::Object(values)
            ));
        }
    }
    out.sort();
    out
}

/// The rows of `actual` that are missing from or extra to `expected` (both as [`rows`]),
/// described for an assertion message, or `None` when they are equal.
pub fn diff_rows(expected: &[String], actual: &[String]) -> Option<String> {
    if expected == actual {
        return None;
    }
    let (mut missing, mut extra) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < expected.len() || j < actual.len() {
        match (expected.get(i), actual.get(j)) {
            (Some(e), Some(a)) if e == a => {
                i += 1;
                j += 1;
            }
            (Some(e), Some(a)) if e < a => {
                missing.push(e);
                i += 1;
            }
            (Some(e), None) => {
                missing.push(e);
                i += 1;
            }
            (_, Some(a)) => {
                extra.push(a);
                j += 1;
            }
            (None, None) => break,
        }
    }
    let show = |v: &[&String]| {
        v.iter()
            .take(5)
            .map(|s| format!("\n    {s}"))
            .collect::<String>()
    };
    Some(format!(
        "expected {} rows, got {}: {} missing{}, {} extra{}",
        expected.len(),
        actual.len(),
        missing.len(),
        show(&missing),
        extra.len(),
        show(&extra)
    ))
}

/// Fails with `what` and the row difference unless `actual` equals `expected`.
pub(crate) fn ensure_same_rows(what: &str, expected: &[String], actual: &[String]) -> Result<()> {
    match diff_rows(expected, actual) {
        None => Ok(()),
        Some(d) => Err(FerryError::internal(format!("{what}: {d}"))),
    }
}

/// A JSON value after a trip through its text, as it comes back from a checkpoint file.
pub(crate) fn through_text(v: &Value) -> Result<Value> {
    let text = serde_json::to_string(v)
        .map_err(|e| FerryError::internal(format!("state does not serialise: {e}")))?;
    serde_json::from_str(&text)
        .map_err(|e| FerryError::internal(format!("state does not read back: {e}")))
}

#[cfg(test)]
mod tests;
