//! The source/sink protocol of LocalFile, proved with the shared connector test kit:
//! a source restored mid-file reads every line once, a replay reads the same lines, and
//! the transactional sink holds every row exactly once through crashes in each phase.

use std::path::Path;
use std::sync::Arc;

use ferry_api::{
    ChangeBatch, JobMode, Options, Result, Sink, SinkDelivery, SinkFactory, SourceFactory,
    TableSchema,
};
use ferry_connector_testkit::{
    check_sink, check_source_replay, check_source_restore, job, read_all,
};
use serde_json::{json, Value};

use crate::{LocalFileSinkFactory, LocalFileSourceFactory};

fn fields() -> Value {
    json!({"id": "bigint", "name": "string"})
}

fn source(dir: &Path, format: &str) -> Result<Arc<dyn ferry_api::Source>> {
    LocalFileSourceFactory
        .create(
            &mut Options::from_json(
                "LocalFile",
                json!({"path": dir, "file_format_type": format, "schema": {"fields": fields()}}),
            ),
            &job(JobMode::Batch),
        )
        .map(Arc::from)
}

/// `files` CSV files of `rows` lines each, ids counting up across files.
fn write_csv(dir: &Path, files: usize, rows: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for f in 0..files {
        let text: String = (0..rows)
            .map(|i| {
                let id = f * rows + i;
                format!("{id},name {id}\n")
            })
            .collect();
        std::fs::write(dir.join(format!("part-{f}.csv")), text).unwrap();
    }
}

#[test]
fn source_restored_anywhere_reads_every_line_once() {
    let dir = tempfile::tempdir().unwrap();
    // Files larger than one batch, so that snapshots fall inside a file.
    write_csv(dir.path(), 3, 20_000);
    let src = source(dir.path(), "csv").unwrap();
    for parallelism in [1, 2] {
        for at in [0, 1, 8_192, 25_000, 59_999, 60_000] {
            let whole = check_source_restore(&*src, parallelism, job(JobMode::Batch), at)
                .unwrap_or_else(|e| panic!("parallelism {parallelism}, at {at}: {e}"));
            assert_eq!(
                whole.iter().map(ChangeBatch::num_rows).sum::<usize>(),
                60_000
            );
        }
        check_source_replay(&*src, parallelism, job(JobMode::Batch), 30_000).unwrap();
    }
}

fn input() -> (TableSchema, Vec<ChangeBatch>) {
    ferry_connector_testkit::id_name_batches(8, 1000, "name")
}

fn sink(dir: &Path, table: &TableSchema, extra: Value) -> Result<Arc<dyn Sink>> {
    let mut opts = json!({"path": dir, "file_format_type": "csv"});
    if let (Some(o), Some(e)) = (opts.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    LocalFileSinkFactory.create(
        &mut Options::from_json("LocalFile", opts),
        std::slice::from_ref(table),
        &job(JobMode::Batch),
    )
}

/// What a reader of the directory sees now, as table `t`.
fn read_back(dir: &Path) -> Result<Vec<ChangeBatch>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    Ok(read_all(&*source(dir, "csv")?, 1, job(JobMode::Batch))?
        .into_iter()
        .map(|b| ChangeBatch::inserts("t".into(), b.data))
        .collect())
}

#[test]
fn transactional_sink_holds_every_row_once_through_crashes() {
    let (table, batches) = input();
    for parallelism in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let make = || sink(&out, &table, json!({}));
        assert_eq!(make().unwrap().delivery(), SinkDelivery::ExactlyOnce);
        check_sink(
            SinkDelivery::ExactlyOnce,
            &make,
            parallelism,
            job(JobMode::Batch),
            &batches,
            &|| read_back(&out),
        )
        .unwrap_or_else(|e| panic!("parallelism {parallelism}: {e}"));
    }
}

#[test]
fn sink_without_transactions_loses_nothing_through_crashes() {
    let (table, batches) = input();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let make = || sink(&out, &table, json!({"is_enable_transaction": false}));
    assert_eq!(make().unwrap().delivery(), SinkDelivery::AtLeastOnce);
    check_sink(
        SinkDelivery::AtLeastOnce,
        &make,
        2,
        job(JobMode::Batch),
        &batches,
        &|| read_back(&out),
    )
    .unwrap();
}
