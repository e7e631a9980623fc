//! End-to-end tests of the source and sink through the connector API.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int32Type, Schema};
use ferry_api::types::schema_from_fields;
use ferry_api::value::{array_value_to_json, json_to_array, RowStyle};
use ferry_api::{
    ChangeBatch, EnumeratorContext, JobContext, JobMode, Options, ReadStatus, ReaderContext,
    SinkDelivery, SinkFactory, SourceFactory, SourceReader, Split, TableSchema, WriterContext,
};
use serde_json::{json, Value};

use crate::{LocalFileSinkFactory, LocalFileSourceFactory};

/// The conformance pack's data files: `$FERRY_CONFORMANCE_DIR/data`, or `shared/` beside the clone.
fn data_dir() -> PathBuf {
    match std::env::var_os("FERRY_CONFORMANCE_DIR") {
        Some(d) => PathBuf::from(d).join("data"),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../../shared/conformance/seatunnel/data"),
    }
}

fn full_fields() -> Value {
    let inner = json!({
        "c_map": "map<string, string>", "c_array": "array<int>", "c_string": "string", "c_boolean": "boolean",
        "c_tinyint": "tinyint", "c_smallint": "smallint", "c_int": "int", "c_bigint": "bigint", "c_float": "float",
        "c_double": "double", "c_bytes": "bytes", "c_date": "date", "c_decimal": "decimal(38, 18)", "c_timestamp": "timestamp"
    });
    let mut outer = inner.clone();
    outer.as_object_mut().unwrap().insert("c_row".into(), inner);
    outer
}

fn upper_row_fields() -> Value {
    let mut f = full_fields();
    let row: serde_json::Map<String, Value> = f["c_row"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.to_ascii_uppercase(), v.clone()))
        .collect();
    f["c_row"] = Value::Object(row);
    f
}

pub(crate) fn job(mode: JobMode) -> JobContext {
    JobContext {
        mode,
        job_id: "job1".into(),
        job_name: "t".into(),
    }
}

fn copy_into(src: &str, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let to = dir.join(Path::new(src).file_name().unwrap());
    std::fs::copy(data_dir().join(src), &to).unwrap();
    to
}

/// Runs a bounded source to the end with one reader; returns the batches.
pub(crate) fn read_all(opts: Value) -> ferry_api::Result<(Arc<Schema>, Vec<RecordBatch>)> {
    let mut o = Options::from_json("LocalFile", opts);
    let src = LocalFileSourceFactory.create(&mut o, &job(JobMode::Batch))?;
    let schema = src.tables()[0].schema.clone();
    let batches = ferry_connector_testkit::read_all(&*src, 1, job(JobMode::Batch))?;
    Ok((schema, batches.into_iter().map(|b| b.data).collect()))
}

pub(crate) fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(|b| b.num_rows()).sum()
}

pub(crate) fn value(batches: &[RecordBatch], col: &str, row: usize) -> Value {
    let b = &batches[0];
    let i = b.schema().index_of(col).unwrap();
    array_value_to_json(b.column(i).as_ref(), row, RowStyle::Named)
}

#[test]
fn reads_conformance_text_with_nested_values_and_partitions() {
    let dir = tempfile::tempdir().unwrap();
    copy_into(
        "e2e.txt",
        &dir.path().join("text/name=tyrantlucifer/hobby=coding"),
    );
    let (schema, b) = read_all(json!({"path": dir.path().join("text"), "file_format_type": "text", "schema": {"fields": full_fields()}})).unwrap();
    assert_eq!(rows(&b), 5);
    assert_eq!(schema.fields().len(), 17);
    assert_eq!(value(&b, "name", 0), json!("tyrantlucifer"));
    assert_eq!(value(&b, "hobby", 4), json!("coding"));
    assert_eq!(value(&b, "c_string", 0), json!("MTDna"));
    assert_eq!(
        value(&b, "c_array", 0),
        json!([545685759, 1576298739, 1577646877, 1379463644, 2057612252])
    );
    assert_eq!(value(&b, "c_map", 0)["uDDrw"], json!("sQQYO"));
    assert_eq!(value(&b, "c_timestamp", 0), json!("2023-05-08T16:08:51"));
    let row = value(&b, "c_row", 0);
    assert_eq!(row["c_map"]["ipToE"], json!("dierO"));
    assert_eq!(row["c_array"][4], json!(1385108050));
    assert_eq!(row["c_string"], json!("hArFu"));
    assert_eq!(row["c_timestamp"], json!("2023-10-20T03:49:02"));
    for batch in &b {
        for c in ["c_string", "c_boolean", "c_double"] {
            assert_eq!(
                batch
                    .column(batch.schema().index_of(c).unwrap())
                    .null_count(),
                0,
                "{c}"
            );
        }
    }
}

#[test]
fn skip_header_rows_skips_lines_of_every_file() {
    let dir = tempfile::tempdir().unwrap();
    copy_into(
        "e2e.txt",
        &dir.path().join("text/name=tyrantlucifer/hobby=coding"),
    );
    let (_, b) =
        read_all(json!({"path": dir.path().join("text"), "file_format_type": "text", "skip_header_row_number": 1, "schema": {"fields": full_fields()}})).unwrap();
    assert_eq!(rows(&b), 4);
    assert_eq!(value(&b, "c_string", 0), json!("xaTOk"));
}

#[test]
fn escaped_regex_delimiter_and_read_columns() {
    let dir = tempfile::tempdir().unwrap();
    copy_into("e2e_delimiter.txt", &dir.path().join("text_delimiter"));
    let (schema, b) = read_all(json!({
        "path": dir.path().join("text_delimiter"), "file_format_type": "text", "delimiter": "\\|",
        "read_columns": ["c_string", "c_boolean"], "schema": {"fields": full_fields()}
    }))
    .unwrap();
    assert_eq!(
        schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>(),
        vec!["c_string", "c_boolean"]
    );
    assert_eq!(rows(&b), 5);
    for batch in &b {
        for i in 0..batch.num_rows() {
            assert_eq!(
                array_value_to_json(batch.column(0).as_ref(), i, RowStyle::Named),
                json!("qwer")
            );
            assert_eq!(
                array_value_to_json(batch.column(1).as_ref(), i, RowStyle::Named),
                json!(true)
            );
        }
    }
}

#[test]
fn reads_conformance_json_with_upper_case_row_fields() {
    let dir = tempfile::tempdir().unwrap();
    copy_into(
        "e2e.json",
        &dir.path().join("json/name=tyrantlucifer/hobby=coding"),
    );
    let (_, b) = read_all(json!({"path": dir.path().join("json"), "file_format_type": "json", "schema": {"fields": upper_row_fields()}})).unwrap();
    assert_eq!(rows(&b), 5);
    assert_eq!(value(&b, "c_string", 0), json!("WArEB"));
    assert_eq!(value(&b, "c_bytes", 0), json!("Q3NrVnQ="));
    assert_eq!(value(&b, "c_row", 0)["C_STRING"], json!("bYjyZ"));
    assert_eq!(value(&b, "hobby", 0), json!("coding"));
    // The same file read with lower-case row fields matches them ignoring case.
    let (_, b) = read_all(json!({"path": dir.path().join("json"), "file_format_type": "json", "schema": {"fields": full_fields()}})).unwrap();
    assert_eq!(value(&b, "c_row", 0)["c_string"], json!("bYjyZ"));
}

#[test]
fn reads_conformance_parquet_with_its_own_schema() {
    let dir = tempfile::tempdir().unwrap();
    copy_into(
        "e2e.parquet",
        &dir.path().join("parquet/name=tyrantlucifer/hobby=coding"),
    );
    let (schema, b) =
        read_all(json!({"path": dir.path().join("parquet"), "file_format_type": "parquet"}))
            .unwrap();
    assert_eq!(rows(&b), 5);
    for c in ["c_string", "c_boolean", "c_double", "name", "hobby"] {
        let i = schema.index_of(c).unwrap();
        assert!(b.iter().all(|x| x.column(i).null_count() == 0), "{c}");
    }
    let ts = schema.field_with_name("c_timestamp").unwrap();
    assert_eq!(ts.data_type(), &ferry_api::types::TIMESTAMP_TYPE);
    // With a declared schema the columns are cast to it.
    let (schema, b) =
        read_all(json!({"path": dir.path().join("parquet"), "file_format_type": "parquet", "schema": {"fields": full_fields()}})).unwrap();
    assert_eq!(rows(&b), 5);
    assert_eq!(
        schema.field_with_name("c_tinyint").unwrap().data_type(),
        &arrow::datatypes::DataType::Int8
    );
}

#[test]
fn missing_path_is_an_external_error_naming_it() {
    let e = read_all(json!({"path": "/nonexistent/ferry/dir", "file_format_type": "text"}))
        .unwrap_err();
    assert!(matches!(e, ferry_api::FerryError::External { .. }), "{e}");
    assert!(e.to_string().contains("/nonexistent/ferry/dir"), "{e}");
}

#[test]
fn unsupported_formats_are_named() {
    let e = read_all(json!({"path": "/tmp", "file_format_type": "orc"}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("'orc' format is not supported"), "{e}");
}

#[test]
fn malformed_rows_name_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "1\u{1}x\n2\u{1}y\nthree\u{1}z\n").unwrap();
    let e = read_all(json!({"path": dir.path(), "file_format_type": "text", "schema": {"fields": {"id": "int", "s": "string"}}})).unwrap_err().to_string();
    assert!(
        e.contains("a.txt") && e.contains("line 3, column 1 ('id')") && e.contains("'three'"),
        "{e}"
    );
    std::fs::write(dir.path().join("a.txt"), "{\"id\": 1}\n{\"id\": \n").unwrap();
    let e = read_all(json!({"path": dir.path(), "file_format_type": "json", "schema": {"fields": {"id": "int"}}})).unwrap_err().to_string();
    assert!(e.contains("a.txt: line 2"), "{e}");
}

#[test]
fn hidden_and_filtered_files_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.csv"), "1\n").unwrap();
    std::fs::write(dir.path().join(".b.csv"), "2\n").unwrap();
    std::fs::write(dir.path().join("_c.csv"), "3\n").unwrap();
    std::fs::create_dir_all(dir.path().join("_tmp")).unwrap();
    std::fs::write(dir.path().join("_tmp/d.csv"), "4\n").unwrap();
    std::fs::write(dir.path().join("e.log"), "5\n").unwrap();
    let (_, b) = read_all(json!({"path": dir.path(), "file_format_type": "csv", "schema": {"fields": {"id": "int"}}, "file_filter_pattern": ".*\\.csv"})).unwrap();
    assert_eq!(rows(&b), 1);
    assert_eq!(b[0].column(0).as_primitive::<Int32Type>().value(0), 1);
}

#[test]
fn csv_reads_quotes_headers_and_nulls() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.csv"), "s,id\n\"x,y\",1\n,2\n").unwrap();
    let (_, b) = read_all(json!({"path": dir.path(), "file_format_type": "csv", "csv_use_header_line": true, "schema": {"fields": {"id": "int", "s": "string"}}})).unwrap();
    assert_eq!(rows(&b), 2);
    assert_eq!(value(&b, "s", 0), json!("x,y"));
    assert_eq!(value(&b, "id", 1), json!(2));
    assert_eq!(value(&b, "s", 1), Value::Null);
    let (_, b) = read_all(json!({"path": dir.path(), "file_format_type": "csv", "skip_header_row_number": 1, "schema": {"fields": {"s": "string", "id": "int"}}})).unwrap();
    assert_eq!(value(&b, "s", 0), json!("x,y"));
}

// ---- sink ----

fn sample_batch(n: usize) -> (TableSchema, RecordBatch) {
    let fields = full_fields();
    let schema = Arc::new(schema_from_fields(fields.as_object().unwrap()).unwrap());
    let mut rows = Vec::new();
    for i in 0..n {
        let inner = json!([
            {"k": format!("v{i}"), "k2": "w"}, [i, i + 1], format!("s{i}"), i % 2 == 0, (i % 100) as i64, 300, i * 7, 1i64 << 40,
            1.5, 2.0e300, "Ynl0ZXM=", "2024-01-26", "12345678901234567890.123456789012345678", "2023-05-08T16:08:51.250000"
        ]);
        let mut outer = inner.as_array().unwrap().clone();
        outer.push(inner.clone());
        if i == 1 {
            // Nulls everywhere a null can be.
            outer = vec![Value::Null; 15];
            outer[2] = json!("s1");
        }
        rows.push(Value::Array(outer));
    }
    let refs: Vec<&Value> = rows.iter().collect();
    let st = json_to_array(
        &refs,
        &arrow::datatypes::DataType::Struct(schema.fields().clone()),
    )
    .unwrap();
    let batch = RecordBatch::from(st.as_struct().clone());
    let batch = batch.with_schema(schema.clone()).unwrap();
    (TableSchema::new("t", schema), batch)
}

fn writer_ctx(attempt: &str) -> WriterContext {
    WriterContext {
        subtask: 0,
        parallelism: 1,
        job: job(JobMode::Batch),
        attempt: attempt.into(),
    }
}

fn sink(opts: Value, table: &TableSchema) -> Arc<dyn ferry_api::Sink> {
    let mut o = Options::from_json("LocalFile", opts);
    LocalFileSinkFactory
        .create(&mut o, std::slice::from_ref(table), &job(JobMode::Batch))
        .unwrap()
}

fn visible_files(dir: &Path) -> Vec<PathBuf> {
    crate::source::list_files(dir, None).unwrap_or_default()
}

pub(crate) fn as_json(batches: &[RecordBatch]) -> Vec<Value> {
    let mut out = Vec::new();
    for b in batches {
        for i in 0..b.num_rows() {
            let m: serde_json::Map<String, Value> = b
                .schema()
                .fields()
                .iter()
                .zip(b.columns())
                .map(|(f, c)| {
                    (
                        f.name().clone(),
                        array_value_to_json(c.as_ref(), i, RowStyle::Named),
                    )
                })
                .collect();
            out.push(Value::Object(m));
        }
    }
    out
}

#[test]
fn every_format_round_trips_every_type() {
    let (table, batch) = sample_batch(4);
    for (format, codec) in [
        ("text", "none"),
        ("text", "lzo"),
        ("csv", "none"),
        ("json", "none"),
        ("parquet", "snappy"),
        ("parquet", "gzip"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let s = sink(
            json!({"path": dir.path(), "file_format_type": format, "compress_codec": codec}),
            &table,
        );
        assert_eq!(s.delivery(), SinkDelivery::ExactlyOnce);
        let mut w = s.create_writer(&writer_ctx("a0"), None).unwrap();
        w.write(&ChangeBatch::inserts("t".into(), batch.clone()))
            .unwrap();
        let info = w.prepare_commit(1).unwrap().expect("rows were written");
        assert!(
            visible_files(dir.path()).is_empty(),
            "{format}: nothing visible before commit"
        );
        s.create_committer()
            .unwrap()
            .unwrap()
            .commit(1, vec![info])
            .unwrap();
        let files = visible_files(dir.path());
        assert_eq!(files.len(), 1, "{format}");
        let name = files[0].file_name().unwrap().to_string_lossy().to_string();
        let suffix = if codec == "lzo" {
            ".lzo.txt".to_string()
        } else {
            format!(".{}", if format == "text" { "txt" } else { format })
        };
        assert!(
            name.starts_with("T_job1_a0_0_1") && name.ends_with(&suffix),
            "{name}"
        );
        let mut opts = json!({"path": dir.path(), "file_format_type": format});
        if format != "parquet" {
            opts["schema"] = json!({"fields": full_fields()});
        }
        let (_, back) = read_all(opts).unwrap();
        assert_eq!(
            as_json(&back),
            as_json(std::slice::from_ref(&batch)),
            "{format} {codec}"
        );
        assert!(
            !dir.path()
                .join(crate::sink::STAGING_DIR)
                .join("job1")
                .join("0")
                .exists(),
            "{format}: staging cleaned"
        );
    }
}

#[test]
fn commit_is_idempotent_and_abort_discards() {
    let (table, batch) = sample_batch(3);
    let dir = tempfile::tempdir().unwrap();
    let s = sink(
        json!({"path": dir.path(), "file_format_type": "text"}),
        &table,
    );
    let mut w = s.create_writer(&writer_ctx("a0"), None).unwrap();
    w.write(&ChangeBatch::inserts("t".into(), batch.clone()))
        .unwrap();
    let info = w.prepare_commit(1).unwrap().unwrap();
    let staged: Vec<PathBuf> = info["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| PathBuf::from(p[0].as_str().unwrap()))
        .collect();
    assert!(staged
        .iter()
        .all(|p| p.exists() && crate::sink::hidden(p.strip_prefix(dir.path()).unwrap())));
    let mut c = s.create_committer().unwrap().unwrap();
    c.commit(1, vec![info.clone()]).unwrap();
    c.commit(1, vec![info.clone()]).unwrap(); // again after a "crash": already done
    assert_eq!(visible_files(dir.path()).len(), 1);
    // A checkpoint with no rows produces no file; the next one produces a new file.
    assert!(w.prepare_commit(2).unwrap().is_none());
    w.write(&ChangeBatch::inserts("t".into(), batch.clone()))
        .unwrap();
    let info3 = w.prepare_commit(3).unwrap().unwrap();
    c.abort(3, vec![info3.clone()]).unwrap();
    let staged3 = PathBuf::from(info3["files"][0][0].as_str().unwrap());
    assert!(!staged3.exists());
    assert!(
        c.commit(3, vec![info3]).is_err(),
        "an aborted commit cannot be published"
    );
    // Writer abort drops what was written since the last prepare.
    w.write(&ChangeBatch::inserts("t".into(), batch)).unwrap();
    w.abort().unwrap();
    assert!(w.prepare_commit(4).unwrap().is_none());
    assert_eq!(visible_files(dir.path()).len(), 1);
}

#[test]
fn restored_writer_cleans_stale_staging_but_keeps_pending_commits() {
    let (table, batch) = sample_batch(2);
    let dir = tempfile::tempdir().unwrap();
    let s = sink(
        json!({"path": dir.path(), "file_format_type": "csv"}),
        &table,
    );
    let mut w = s.create_writer(&writer_ctx("first"), None).unwrap();
    w.write(&ChangeBatch::inserts("t".into(), batch.clone()))
        .unwrap();
    let info1 = w.prepare_commit(1).unwrap().unwrap();
    let state = w.snapshot(1).unwrap();
    // Rows after checkpoint 1, then a crash before checkpoint 2.
    w.write(&ChangeBatch::inserts("t".into(), batch.clone()))
        .unwrap();
    w.prepare_commit(2).unwrap();
    drop(w);
    let mut w2 = s.create_writer(&writer_ctx("second"), state).unwrap();
    let staged1 = PathBuf::from(info1["files"][0][0].as_str().unwrap());
    assert!(
        staged1.exists(),
        "checkpoint 1's staged file awaits its commit"
    );
    let stale = dir.path().join("_ferry_tmp/job1/0/first/2");
    assert!(
        !stale.exists(),
        "uncommitted staging of the old attempt is removed"
    );
    s.create_committer()
        .unwrap()
        .unwrap()
        .commit(1, vec![info1])
        .unwrap();
    w2.write(&ChangeBatch::inserts("t".into(), batch)).unwrap();
    let info2 = w2.prepare_commit(2).unwrap().unwrap();
    let name2 = info2["files"][0][1].as_str().unwrap().to_string();
    assert!(name2.contains("T_job1_second_0_2"), "{name2}");
    s.create_committer()
        .unwrap()
        .unwrap()
        .commit(2, vec![info2])
        .unwrap();
    let (_, back) = read_all(
        json!({"path": dir.path(), "file_format_type": "csv", "schema": {"fields": full_fields()}}),
    )
    .unwrap();
    assert_eq!(rows(&back), 4);
}

#[test]
fn partitions_rolling_headers_and_direct_writes() {
    let (table, batch) = sample_batch(6);
    let dir = tempfile::tempdir().unwrap();
    let s = sink(
        json!({"path": dir.path(), "file_format_type": "text", "partition_by": ["c_boolean"], "partition_dir_expression": "${k0}=${v0}",
               "is_enable_transaction": false, "batch_size": 2, "file_name_expression": "${transactionId}_${now}", "filename_time_format": "yyyy.MM.dd",
               "sink_columns": ["c_string", "c_int", "c_boolean"]}),
        &table,
    );
    assert_eq!(s.delivery(), SinkDelivery::AtLeastOnce);
    let mut w = s.create_writer(&writer_ctx("a"), None).unwrap();
    w.write(&ChangeBatch::inserts("t".into(), batch)).unwrap();
    assert!(w.prepare_commit(1).unwrap().is_none());
    let files = visible_files(dir.path());
    // true: rows 0, 2, 4 (3 rows → 2 files at batch_size 2); false: 3, 5; null: 1.
    assert_eq!(files.len(), 2 + 1 + 1, "{files:?}");
    let today = chrono::Local::now().format("%Y.%m.%d").to_string();
    assert!(files.iter().all(|f| f.to_string_lossy().contains(&today)));
    let (schema, back) = read_all(json!({"path": dir.path(), "file_format_type": "text", "schema": {"fields": {"c_string": "string", "c_int": "int"}}})).unwrap();
    assert_eq!(
        schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>(),
        vec!["c_string", "c_int", "c_boolean"]
    );
    assert_eq!(rows(&back), 6);
    let all = as_json(&back);
    assert!(all.iter().any(|r| r["c_string"] == json!("s4")
        && r["c_boolean"] == json!("true")
        && r["c_int"] == json!(28)));
}

#[test]
fn save_modes() {
    let (table, _) = sample_batch(1);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("old.txt"), "x").unwrap();
    let mut o = Options::from_json(
        "LocalFile",
        json!({"path": dir.path(), "file_format_type": "text", "save_mode": "error"}),
    );
    let e = LocalFileSinkFactory
        .create(&mut o, std::slice::from_ref(&table), &job(JobMode::Batch))
        .unwrap_err()
        .to_string();
    assert!(e.contains("already holds data"), "{e}");
    sink(
        json!({"path": dir.path(), "file_format_type": "json", "schema_save_mode": "RECREATE_SCHEMA", "data_save_mode": "DROP_DATA"}),
        &table,
    );
    assert!(!dir.path().join("old.txt").exists());
    let mut o = Options::from_json(
        "LocalFile",
        json!({"path": dir.path(), "file_format_type": "parquet", "compress_codec": "lzo"}),
    );
    let e = LocalFileSinkFactory
        .create(&mut o, std::slice::from_ref(&table), &job(JobMode::Batch))
        .unwrap_err()
        .to_string();
    assert!(e.contains("compress_codec"), "{e}");
}

// ---- multi-table sink ----

/// Two tables of different schemas: `db.fake1 (id int, name string)` with `n1` rows and
/// `fake2 (code bigint)` with `n2` rows.
fn two_tables(n1: usize, n2: usize) -> (Vec<TableSchema>, Vec<ChangeBatch>) {
    use arrow::array::{Int32Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field};
    let s1 = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let s2 = Arc::new(Schema::new(vec![Field::new("code", DataType::Int64, true)]));
    let b1 = RecordBatch::try_new(
        s1.clone(),
        vec![
            Arc::new(Int32Array::from_iter_values(0..n1 as i32)),
            Arc::new(StringArray::from_iter_values(
                (0..n1).map(|i| format!("n{}", i % 2)),
            )),
        ],
    )
    .unwrap();
    let b2 = RecordBatch::try_new(
        s2.clone(),
        vec![Arc::new(Int64Array::from_iter_values(
            (0..n2 as i64).map(|i| 100 + i),
        ))],
    )
    .unwrap();
    (
        vec![
            TableSchema::new("db.fake1", s1),
            TableSchema::new("fake2", s2),
        ],
        vec![
            ChangeBatch::inserts("db.fake1".into(), b1),
            ChangeBatch::inserts("fake2".into(), b2),
        ],
    )
}

fn multi_sink(opts: Value, tables: &[TableSchema]) -> ferry_api::Result<Arc<dyn ferry_api::Sink>> {
    let mut o = Options::from_json("LocalFile", opts);
    LocalFileSinkFactory.create(&mut o, tables, &job(JobMode::Batch))
}

/// The JSON lines of every visible file under `dir`.
fn json_lines(dir: &Path) -> Vec<Value> {
    visible_files(dir)
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn each_table_goes_to_the_directory_its_placeholders_name() {
    let (tables, batches) = two_tables(4, 3);
    let dir = tempfile::tempdir().unwrap();
    let s = multi_sink(
        json!({"path": format!("{}/${{database_name:nodb}}/${{table_name}}", dir.path().display()),
               "file_format_type": "json", "file_name_expression": "${table_full_name}_${transactionId}"}),
        &tables,
    )
    .unwrap();
    let mut w = s.create_writer(&writer_ctx("a0"), None).unwrap();
    // Interleaved batches of both tables.
    for b in batches.iter().chain(&batches) {
        w.write(b).unwrap();
    }
    let info = w.prepare_commit(1).unwrap().unwrap();
    assert_eq!(info["stage_dirs"].as_array().unwrap().len(), 2, "{info}");
    assert!(
        visible_files(dir.path()).is_empty(),
        "nothing before commit"
    );
    let mut c = s.create_committer().unwrap().unwrap();
    c.commit(1, vec![info.clone()]).unwrap();
    c.commit(1, vec![info]).unwrap(); // repeated after a crash: harmless
    c.finish().unwrap();

    let one = dir.path().join("db/fake1");
    let two = dir.path().join("nodb/fake2");
    let rows1 = json_lines(&one);
    let rows2 = json_lines(&two);
    assert_eq!(rows1.len(), 8);
    assert_eq!(rows2.len(), 6);
    assert!(rows1
        .iter()
        .all(|r| r.as_object().unwrap().len() == 2 && r.get("name").is_some()));
    assert!(rows2
        .iter()
        .all(|r| r.as_object().unwrap().keys().eq(["code"])));
    let name1 = visible_files(&one)[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(
        name1.starts_with("db.fake1_T_job1_a0_0_1") && name1.ends_with(".json"),
        "{name1}"
    );
    let name2 = visible_files(&two)[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(name2.starts_with("fake2_T_job1_a0_0_1."), "{name2}");
    for root in [&one, &two] {
        assert!(
            !root.join(crate::sink::STAGING_DIR).exists(),
            "staging cleaned in {}",
            root.display()
        );
    }
}

#[test]
fn tables_sharing_a_directory_get_their_own_files() {
    let (tables, batches) = two_tables(5, 2);
    let dir = tempfile::tempdir().unwrap();
    let s = multi_sink(
        json!({"path": dir.path(), "file_format_type": "csv", "batch_size": 2}),
        &tables,
    )
    .unwrap();
    let mut w = s.create_writer(&writer_ctx("a0"), None).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    let info = w.prepare_commit(1).unwrap().unwrap();
    let mut c = s.create_committer().unwrap().unwrap();
    c.commit(1, vec![info]).unwrap();
    let names: Vec<String> = visible_files(dir.path())
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    // fake1: 5 rows at 2 per file = 3 files; fake2: 2 rows = 1 file.
    let of = |tag: &str| names.iter().filter(|n| n.contains(tag)).count();
    assert_eq!(of("T_job1_a0_0_1_0-db-fake1"), 3, "{names:?}");
    assert_eq!(of("T_job1_a0_0_1_1-fake2"), 1, "{names:?}");
    assert_eq!(names.len(), 4, "{names:?}");
    let lines = |tag: &str| -> usize {
        visible_files(dir.path())
            .iter()
            .filter(|f| f.to_string_lossy().contains(tag))
            .map(|f| std::fs::read_to_string(f).unwrap().lines().count())
            .sum()
    };
    assert_eq!(lines("db-fake1"), 5);
    assert_eq!(lines("fake2"), 2);
    assert!(std::fs::read_to_string(
        visible_files(dir.path())
            .iter()
            .find(|f| f.to_string_lossy().contains("fake2"))
            .unwrap()
    )
    .unwrap()
    .starts_with("100\n"));
}

#[test]
fn abort_and_restore_clean_every_tables_staging() {
    let (tables, batches) = two_tables(3, 3);
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/${{table_name}}", dir.path().display());
    let s = multi_sink(json!({"path": path, "file_format_type": "text"}), &tables).unwrap();
    let mut w = s.create_writer(&writer_ctx("first"), None).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    let info1 = w.prepare_commit(1).unwrap().unwrap();
    let state = w.snapshot(1).unwrap();
    // Rows after checkpoint 1 that a crash leaves staged in both tables' directories.
    for b in &batches {
        w.write(b).unwrap();
    }
    w.prepare_commit(2).unwrap().unwrap();
    drop(w);
    for t in ["fake1", "fake2"] {
        assert!(dir
            .path()
            .join(t)
            .join("_ferry_tmp/job1/0/first/2")
            .exists());
    }
    let mut w2 = s.create_writer(&writer_ctx("second"), state).unwrap();
    for t in ["fake1", "fake2"] {
        assert!(
            !dir.path()
                .join(t)
                .join("_ferry_tmp/job1/0/first/2")
                .exists(),
            "{t}: stale staging removed"
        );
        assert!(
            dir.path()
                .join(t)
                .join("_ferry_tmp/job1/0/first/1")
                .exists(),
            "{t}: pending commit kept"
        );
    }
    let mut c = s.create_committer().unwrap().unwrap();
    c.commit(1, vec![info1]).unwrap();
    // Writer abort drops what both tables staged since the last prepare.
    for b in &batches {
        w2.write(b).unwrap();
    }
    w2.abort().unwrap();
    assert!(w2.prepare_commit(2).unwrap().is_none());
    // A prepared commit aborted by the committer leaves nothing behind either.
    for b in &batches {
        w2.write(b).unwrap();
    }
    let info3 = w2.prepare_commit(3).unwrap().unwrap();
    c.abort(3, vec![info3]).unwrap();
    c.finish().unwrap();
    for t in ["fake1", "fake2"] {
        let root = dir.path().join(t);
        assert_eq!(
            visible_files(&root).len(),
            1,
            "{t}: only checkpoint 1's file"
        );
        let n: usize = visible_files(&root)
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap().lines().count())
            .sum();
        assert_eq!(n, 3, "{t}");
        assert!(!root.join("_ferry_tmp").exists(), "{t}: staging gone");
    }
}

#[test]
fn options_apply_to_each_table_and_errors_name_the_table() {
    let (tables, batches) = two_tables(4, 2);
    let dir = tempfile::tempdir().unwrap();
    // partition_by must hold for every table, as SeaTunnel creates one sink per table.
    let e = multi_sink(
        json!({"path": format!("{}/${{table_name}}", dir.path().display()), "partition_by": ["name"]}),
        &tables,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("partition_by") && e.contains("'name'") && e.contains("'fake2'"),
        "{e}"
    );
    let e = multi_sink(
        json!({"path": dir.path(), "sink_columns": ["code"]}),
        &tables,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("sink_columns") && e.contains("'db.fake1'"),
        "{e}"
    );

    // Save modes run once per output directory.
    let out = dir.path().join("fake2");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("old.txt"), "x").unwrap();
    let e = multi_sink(
        json!({"path": format!("{}/${{table_name}}", dir.path().display()), "data_save_mode": "ERROR_WHEN_DATA_EXISTS"}),
        &tables,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("fake2") && e.contains("already holds data"),
        "{e}"
    );
    let s = multi_sink(
        json!({"path": format!("{}/${{table_name}}", dir.path().display()), "data_save_mode": "DROP_DATA",
               "file_format_type": "json", "is_enable_transaction": false}),
        &tables,
    )
    .unwrap();
    assert!(!out.join("old.txt").exists());
    let mut w = s.create_writer(&writer_ctx("a"), None).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    assert!(
        w.prepare_commit(1).unwrap().is_none(),
        "direct writes commit nothing"
    );
    assert_eq!(json_lines(&dir.path().join("fake1")).len(), 4);
    assert_eq!(json_lines(&out).len(), 2);

    // A batch of a table the sink was not given is refused, not written somewhere.
    let stray = ChangeBatch::inserts("other".into(), batches[1].data.clone());
    let e = w.write(&stray).unwrap_err().to_string();
    assert!(
        e.contains("'other'") && e.contains("db.fake1, fake2"),
        "{e}"
    );
}

#[test]
fn a_single_table_takes_its_stream_name_for_table_name() {
    let (table, batch) = sample_batch(2);
    let dir = tempfile::tempdir().unwrap();
    let s = sink(
        json!({"path": format!("{}/${{table_name}}", dir.path().display()), "file_format_type": "json"}),
        &table,
    );
    let mut w = s.create_writer(&writer_ctx("a"), None).unwrap();
    // A stream of one table may tag its batches differently; they still go to that table.
    w.write(&ChangeBatch::inserts("renamed".into(), batch))
        .unwrap();
    let info = w.prepare_commit(1).unwrap().unwrap();
    s.create_committer()
        .unwrap()
        .unwrap()
        .commit(1, vec![info])
        .unwrap();
    assert_eq!(json_lines(&dir.path().join("t")).len(), 2);
}

#[test]
fn commit_infos_of_the_single_table_shape_still_publish() {
    let dir = tempfile::tempdir().unwrap();
    let stage = dir.path().join("_ferry_tmp/job1/0/a/1");
    std::fs::create_dir_all(&stage).unwrap();
    std::fs::write(stage.join("f.txt"), "x\n").unwrap();
    let (table, _) = sample_batch(1);
    let s = sink(
        json!({"path": dir.path(), "file_format_type": "text"}),
        &table,
    );
    let info = json!({"stage_dir": stage.to_string_lossy(), "files": [[stage.join("f.txt").to_string_lossy(), dir.path().join("f.txt").to_string_lossy()]]});
    s.create_committer()
        .unwrap()
        .unwrap()
        .commit(1, vec![info])
        .unwrap();
    assert!(dir.path().join("f.txt").exists());
    assert!(!dir.path().join("_ferry_tmp/job1/0").exists());
}

// ---- resumption and streaming ----

#[test]
fn restored_reader_resumes_inside_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..100).map(|i| format!("{i}\u{1}r{i}\n")).collect();
    std::fs::write(dir.path().join("a.txt"), &text).unwrap();
    std::fs::write(
        dir.path().join("b.csv"),
        (0..100).map(|i| format!("{i},c{i}\n")).collect::<String>(),
    )
    .unwrap();
    for (format, total) in [("text", 100), ("csv", 100)] {
        let opts = json!({"path": dir.path(), "file_format_type": format, "batch_size": 30, "schema": {"fields": {"id": "int", "s": "string"}},
                          "file_filter_pattern": if format == "text" { ".*txt" } else { ".*csv" }});
        let src = LocalFileSourceFactory
            .create(
                &mut Options::from_json("LocalFile", opts),
                &job(JobMode::Batch),
            )
            .unwrap();
        let mut en = src
            .create_enumerator(
                &EnumeratorContext {
                    parallelism: 1,
                    job: job(JobMode::Batch),
                },
                None,
            )
            .unwrap();
        let splits: Vec<Split> = en.discover().unwrap().into_iter().map(|(_, s)| s).collect();
        let rctx = ReaderContext {
            subtask: 0,
            parallelism: 1,
            job: job(JobMode::Batch),
        };
        let mut r = src.create_reader(&rctx).unwrap();
        r.add_splits(splits).unwrap();
        r.no_more_splits();
        let mut ids = Vec::new();
        let take = |r: &mut Box<dyn SourceReader>, ids: &mut Vec<i32>| match r.poll_next().unwrap()
        {
            ReadStatus::Batch(b) => {
                ids.extend(
                    b.data
                        .column(0)
                        .as_primitive::<Int32Type>()
                        .values()
                        .iter()
                        .copied(),
                );
                true
            }
            _ => false,
        };
        take(&mut r, &mut ids);
        take(&mut r, &mut ids);
        let snap = r.snapshot(1).unwrap();
        assert_eq!(snap[0].state["rows"], json!(60));
        take(&mut r, &mut ids); // read after the checkpoint, lost in the crash
        ids.truncate(60);
        let mut r2 = src.create_reader(&rctx).unwrap();
        r2.add_splits(snap).unwrap();
        r2.no_more_splits();
        while take(&mut r2, &mut ids) {}
        assert_eq!(ids, (0..total).collect::<Vec<_>>(), "{format}");
    }
}

#[test]
fn parquet_reader_resumes_at_a_row() {
    let (table, batch) = sample_batch(10);
    let dir = tempfile::tempdir().unwrap();
    let s = sink(
        json!({"path": dir.path(), "file_format_type": "parquet"}),
        &table,
    );
    let mut w = s.create_writer(&writer_ctx("a"), None).unwrap();
    w.write(&ChangeBatch::inserts("t".into(), batch)).unwrap();
    let info = w.prepare_commit(1).unwrap().unwrap();
    s.create_committer()
        .unwrap()
        .unwrap()
        .commit(1, vec![info])
        .unwrap();
    let src = LocalFileSourceFactory
        .create(
            &mut Options::from_json(
                "LocalFile",
                json!({"path": dir.path(), "file_format_type": "parquet", "batch_size": 4}),
            ),
            &job(JobMode::Batch),
        )
        .unwrap();
    let mut en = src
        .create_enumerator(
            &EnumeratorContext {
                parallelism: 1,
                job: job(JobMode::Batch),
            },
            None,
        )
        .unwrap();
    let mut split = en.discover().unwrap().remove(0).1;
    split.state["rows"] = json!(7);
    let mut r = src
        .create_reader(&ReaderContext {
            subtask: 0,
            parallelism: 1,
            job: job(JobMode::Batch),
        })
        .unwrap();
    r.add_splits(vec![split]).unwrap();
    r.no_more_splits();
    let ReadStatus::Batch(b) = r.poll_next().unwrap() else {
        panic!("expected rows")
    };
    assert_eq!(b.num_rows(), 3);
    assert_eq!(
        array_value_to_json(b.data.column(2).as_ref(), 0, RowStyle::Named),
        json!("s7")
    );
}

#[test]
fn streaming_discovers_new_visible_files_once_across_restore() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let opts = json!({"path": dir.path(), "file_format_type": "text"});
    let src = LocalFileSourceFactory
        .create(
            &mut Options::from_json("LocalFile", opts),
            &job(JobMode::Streaming),
        )
        .unwrap();
    assert_eq!(src.boundedness(), ferry_api::Boundedness::Unbounded);
    let ctx = EnumeratorContext {
        parallelism: 2,
        job: job(JobMode::Streaming),
    };
    let mut en = src.create_enumerator(&ctx, None).unwrap();
    let first = en.discover().unwrap();
    assert_eq!(first.len(), 1);
    assert!(!en.is_exhausted());
    std::fs::write(dir.path().join("b.txt"), "b\n").unwrap();
    std::fs::write(dir.path().join(".c.txt"), "in progress\n").unwrap();
    std::fs::create_dir_all(dir.path().join("_staging")).unwrap();
    std::fs::write(dir.path().join("_staging/d.txt"), "staged\n").unwrap();
    let second = en.discover().unwrap();
    assert_eq!(second.len(), 1);
    assert!(second[0].1.id.ends_with("b.txt"));
    assert_eq!(second[0].0, 1, "round robin over two readers");
    let snap = en.snapshot(1).unwrap();
    assert_eq!(crate::source::seen_of(&snap).len(), 2);
    let mut restored = src.create_enumerator(&ctx, Some(snap)).unwrap();
    assert!(
        restored.discover().unwrap().is_empty(),
        "no file is handed out twice"
    );
    std::fs::write(dir.path().join("e.txt"), "e\n").unwrap();
    assert_eq!(restored.discover().unwrap().len(), 1);
    // A streaming reader with nothing to do idles instead of finishing.
    let mut r = src
        .create_reader(&ReaderContext {
            subtask: 0,
            parallelism: 2,
            job: job(JobMode::Streaming),
        })
        .unwrap();
    r.add_splits(first.into_iter().map(|(_, s)| s).collect())
        .unwrap();
    assert!(matches!(r.poll_next().unwrap(), ReadStatus::Batch(_)));
    assert!(matches!(r.poll_next().unwrap(), ReadStatus::Idle(_)));
}

#[test]
fn text_without_schema_is_one_content_column() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "tyrantlucifer#26#male\n").unwrap();
    let (schema, b) = read_all(json!({"path": dir.path(), "file_format_type": "text"})).unwrap();
    assert_eq!(schema.field(0).name(), "content");
    assert_eq!(value(&b, "content", 0), json!("tyrantlucifer#26#male"));
    // One-column schema over wider lines takes the first field (stream_sink_file_text_to_assert).
    std::fs::write(dir.path().join("a.txt"), "1\u{1}name\u{1}26\n").unwrap();
    let (_, b) = read_all(json!({"path": dir.path(), "file_format_type": "text", "schema": {"fields": {"c_string": "string"}}})).unwrap();
    assert_eq!(value(&b, "c_string", 0), json!("1"));
}

#[test]
fn null_typed_columns_round_trip_through_text_and_parquet() {
    let fields = json!({"id": "int", "c_null": "null"});
    let schema = Arc::new(schema_from_fields(fields.as_object().unwrap()).unwrap());
    let rows = [json!([1, null]), json!([2, null])];
    let refs: Vec<&Value> = rows.iter().collect();
    let st = json_to_array(
        &refs,
        &arrow::datatypes::DataType::Struct(schema.fields().clone()),
    )
    .unwrap();
    let batch = RecordBatch::from(st.as_struct().clone())
        .with_schema(schema.clone())
        .unwrap();
    let table = TableSchema::new("t", schema);
    for format in ["text", "parquet"] {
        let dir = tempfile::tempdir().unwrap();
        let s = sink(
            json!({"path": dir.path(), "file_format_type": format}),
            &table,
        );
        let mut w = s.create_writer(&writer_ctx("a"), None).unwrap();
        w.write(&ChangeBatch::inserts("t".into(), batch.clone()))
            .unwrap();
        let info = w.prepare_commit(1).unwrap().unwrap();
        s.create_committer()
            .unwrap()
            .unwrap()
            .commit(1, vec![info])
            .unwrap();
        let (_, back) = read_all(
            json!({"path": dir.path(), "file_format_type": format, "schema": {"fields": fields}}),
        )
        .unwrap();
        assert_eq!(
            as_json(&back),
            as_json(std::slice::from_ref(&batch)),
            "{format}"
        );
    }
}

#[test]
fn parquet_row_groups_end_at_their_size_so_a_writer_holds_one_bounded_group() {
    use arrow::array::{Int64Array, StringArray};
    let schema = Arc::new(Schema::new(vec![
        arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
        arrow::datatypes::Field::new("s", arrow::datatypes::DataType::Utf8, false),
    ]));
    let rows = 20_000i64;
    let batches = (0..rows).step_by(1000).map(|start| {
        let ids = Int64Array::from_iter_values(start..start + 1000);
        // Distinct 40-byte strings: no dictionary or run-length shortcut keeps them small.
        let strs = StringArray::from_iter_values((start..start + 1000).map(|i| format!("{i:040}")));
        RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(strs)]).unwrap()
    });
    let (_dir, file) = write_one_parquet_file(&schema, batches);
    let meta = parquet::file::reader::FileReader::metadata(
        &parquet::file::serialized_reader::SerializedFileReader::new(
            std::fs::File::open(&file).unwrap(),
        )
        .unwrap(),
    )
    .clone();
    let groups = meta.num_row_groups();
    assert!(
        groups > 1,
        "one row group of {rows} rows: the size bound is not applied"
    );
    let total: i64 = meta.row_groups().iter().map(|g| g.num_rows()).sum();
    assert_eq!(total, rows);
}

#[test]
fn parquet_columns_of_few_values_keep_their_dictionary_and_unique_ones_fall_back_early() {
    use arrow::array::StringArray;
    use parquet::basic::{Encoding, PageType};
    use parquet::file::reader::FileReader;
    let schema = Arc::new(Schema::new(vec![
        arrow::datatypes::Field::new("kind", arrow::datatypes::DataType::Utf8, false),
        arrow::datatypes::Field::new("unique", arrow::datatypes::DataType::Utf8, false),
    ]));
    let batches = (0..4000).step_by(1000).map(|start| {
        let kinds =
            StringArray::from_iter_values((start..start + 1000).map(|i| ["a", "b", "c"][i % 3]));
        let unique =
            StringArray::from_iter_values((start..start + 1000).map(|i| format!("{i:040}")));
        RecordBatch::try_new(schema.clone(), vec![Arc::new(kinds), Arc::new(unique)]).unwrap()
    });
    let (_dir, file) = write_one_parquet_file(&schema, batches);
    let reader = parquet::file::serialized_reader::SerializedFileReader::new(
        std::fs::File::open(&file).unwrap(),
    )
    .unwrap();
    // The data pages' encodings of each column, over the first row group.
    let encodings = |col: usize| -> Vec<Encoding> {
        let group = reader.get_row_group(0).unwrap();
        let mut pages = group.get_column_page_reader(col).unwrap();
        let mut out = Vec::new();
        while let Some(p) = pages.get_next_page().unwrap() {
            if p.page_type() != PageType::DICTIONARY_PAGE {
                out.push(p.encoding());
            }
        }
        out
    };
    let kinds = encodings(0);
    assert!(
        kinds.iter().all(|e| *e == Encoding::RLE_DICTIONARY),
        "kind: {kinds:?}"
    );
    // 40 bytes a value: the dictionary outgrows its limit within the first 1000 rows.
    let unique = encodings(1);
    assert!(unique.contains(&Encoding::PLAIN), "unique: {unique:?}");
}

/// Writes `batches` through one LocalFile parquet writer, commits them, and returns the
/// directory (kept alive) and the file.
fn write_one_parquet_file(
    schema: &Arc<Schema>,
    batches: impl Iterator<Item = RecordBatch>,
) -> (tempfile::TempDir, PathBuf) {
    let table = TableSchema::new("t", schema.clone());
    let dir = tempfile::tempdir().unwrap();
    let s = sink(
        json!({"path": dir.path(), "file_format_type": "parquet"}),
        &table,
    );
    let mut w = s.create_writer(&writer_ctx("a"), None).unwrap();
    for b in batches {
        w.write(&ChangeBatch::inserts("t".into(), b)).unwrap();
    }
    let info = w.prepare_commit(1).unwrap().unwrap();
    s.create_committer()
        .unwrap()
        .unwrap()
        .commit(1, vec![info])
        .unwrap();
    let file = walk(dir.path())
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .expect("a parquet file");
    (dir, file)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

// ---- several tables (tables_configs) ----

fn create_source(opts: Value, mode: JobMode) -> ferry_api::Result<Arc<dyn ferry_api::Source>> {
    LocalFileSourceFactory
        .create(&mut Options::from_json("LocalFile", opts), &job(mode))
        .map(Arc::from)
}

fn reader_ctx(mode: JobMode) -> ReaderContext {
    ReaderContext {
        subtask: 0,
        parallelism: 1,
        job: job(mode),
    }
}

/// Polls `r` until it finishes (or, when `limit` is given, until it returned that many
/// batches); the batches' rows counted per table, and whether the reader finished.
fn drain(
    r: &mut Box<dyn SourceReader>,
    limit: Option<usize>,
    counts: &mut std::collections::BTreeMap<String, usize>,
) -> bool {
    let mut n = 0;
    loop {
        if limit == Some(n) {
            return false;
        }
        match r.poll_next().unwrap() {
            ReadStatus::Batch(b) => {
                *counts.entry(b.table.to_string()).or_default() += b.data.num_rows();
                n += 1;
            }
            ReadStatus::Finished => return true,
            ReadStatus::Idle(_) => panic!("a bounded reader with all its splits idled"),
        }
    }
}

/// Two directories: `json/` with 3 JSON lines, `csv/` with 4 `;`-separated lines.
fn two_dirs(root: &Path) -> (PathBuf, PathBuf) {
    let json_dir = root.join("json");
    let csv_dir = root.join("csv");
    std::fs::create_dir_all(&json_dir).unwrap();
    std::fs::create_dir_all(&csv_dir).unwrap();
    std::fs::write(
        json_dir.join("a.json"),
        "{\"id\": 1, \"name\": \"a\"}\n{\"id\": 2, \"name\": \"b\"}\n{\"id\": 3, \"name\": \"c\"}\n",
    )
    .unwrap();
    std::fs::write(
        csv_dir.join("b.csv"),
        "1;x;1.5\n2;y;2.5\n3;z;3.5\n4;w;4.5\n",
    )
    .unwrap();
    (json_dir, csv_dir)
}

#[test]
fn tables_configs_read_each_table_with_its_own_path_format_options_and_schema() {
    let dir = tempfile::tempdir().unwrap();
    let (json_dir, csv_dir) = two_dirs(dir.path());
    let src = create_source(
        json!({"tables_configs": [
            {"path": json_dir, "file_format_type": "json",
             "schema": {"table": "db.users", "fields": {"id": "int", "name": "string"}}},
            {"path": csv_dir, "file_format_type": "csv", "field_delimiter": ";",
             "schema": {"table": "db.orders", "fields": {"id": "bigint", "code": "string", "amount": "double"}}},
            // The same directory again, as SeaTunnel's own e2e job does: a table of its own.
            {"path": json_dir, "file_format_type": "json", "read_columns": ["name"],
             "schema": {"table": "db.names", "fields": {"id": "int", "name": "string"}}}
        ]}),
        JobMode::Batch,
    )
    .unwrap();
    let tables = src.tables();
    let shapes: Vec<(String, Vec<String>)> = tables
        .iter()
        .map(|t| {
            (
                t.name.to_string(),
                t.schema.fields().iter().map(|f| f.name().clone()).collect(),
            )
        })
        .collect();
    assert_eq!(
        shapes,
        [
            (
                "db.users".to_string(),
                vec!["id".to_string(), "name".into()]
            ),
            (
                "db.orders".into(),
                vec!["id".into(), "code".into(), "amount".into()]
            ),
            ("db.names".into(), vec!["name".into()]),
        ]
    );
    assert_eq!(
        tables[1].schema.field(0).data_type(),
        &arrow::datatypes::DataType::Int64
    );
    let mut en = src
        .create_enumerator(
            &EnumeratorContext {
                parallelism: 1,
                job: job(JobMode::Batch),
            },
            None,
        )
        .unwrap();
    let splits: Vec<Split> = en.discover().unwrap().into_iter().map(|(_, s)| s).collect();
    assert_eq!(splits.len(), 3, "one split per table and file");
    let ids: std::collections::HashSet<&str> = splits.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), 3, "split ids are unique: {ids:?}");
    assert!(en.is_exhausted());
    let mut r = src.create_reader(&reader_ctx(JobMode::Batch)).unwrap();
    r.add_splits(splits).unwrap();
    r.no_more_splits();
    let mut by_table: std::collections::BTreeMap<String, Vec<RecordBatch>> = Default::default();
    loop {
        match r.poll_next().unwrap() {
            ReadStatus::Batch(b) => {
                let t = tables.iter().find(|t| *t.name == *b.table).unwrap();
                assert_eq!(b.data.schema(), t.schema, "{}", b.table);
                by_table
                    .entry(b.table.to_string())
                    .or_default()
                    .push(b.data);
            }
            ReadStatus::Finished => break,
            ReadStatus::Idle(_) => panic!("idle"),
        }
    }
    assert_eq!(rows(&by_table["db.users"]), 3);
    assert_eq!(rows(&by_table["db.orders"]), 4);
    assert_eq!(rows(&by_table["db.names"]), 3);
    assert_eq!(value(&by_table["db.orders"], "code", 3), json!("w"));
    assert_eq!(value(&by_table["db.orders"], "amount", 0), json!(1.5));
    assert_eq!(value(&by_table["db.names"], "name", 2), json!("c"));
}

#[test]
fn tables_configs_errors_name_the_entry_and_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let (json_dir, csv_dir) = two_dirs(dir.path());
    let users = json!({"path": json_dir, "file_format_type": "json",
                       "schema": {"table": "db.users", "fields": {"id": "int"}}});
    let err = |opts: Value| {
        create_source(opts, JobMode::Batch)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let cases = [
        (
            json!({"tables_configs": [users, {"path": csv_dir, "file_format_type": "csv", "field_delimter": ";",
                                              "schema": {"table": "db.orders", "fields": {"id": "int"}}}]}),
            "option 'tables_configs[1].field_delimter': unknown option (did you mean 'field_delimiter'?",
        ),
        (
            json!({"tables_configs": [{"file_format_type": "json", "schema": {"fields": {"id": "int"}}}]}),
            "option 'tables_configs[0].path': is required but not set",
        ),
        (
            json!({"tables_configs": [users, {"path": csv_dir, "file_format_type": "orc"}]}),
            "option 'tables_configs[1].file_format_type': the 'orc' format is not supported",
        ),
        (
            json!({"tables_configs": [users, {"path": csv_dir, "file_format_type": "csv",
                                              "schema": {"table": "db.orders", "fields": {"id": "nonsense"}}}]}),
            "option 'tables_configs[1].schema.fields'",
        ),
        (
            json!({"tables_configs": [users, {"path": csv_dir, "file_format_type": "csv"}]}),
            "option 'tables_configs[1].schema': is required for the csv and json formats",
        ),
        (
            json!({"tables_configs": [users, {"path": csv_dir, "file_format_type": "csv",
                                              "schema": {"table": "db.users", "fields": {"id": "int"}}}]}),
            "option 'tables_configs[1].schema.table': table name 'db.users' is also the name of tables_configs[0]",
        ),
        (
            json!({"tables_configs": [users, {"path": dir.path().join("missing"), "file_format_type": "csv",
                                              "schema": {"table": "db.orders", "fields": {"id": "int"}}}]}),
            "LocalFile: tables_configs[1]: path '",
        ),
        (
            json!({"tables_configs": [users], "path": csv_dir}),
            "option 'path': has no effect when tables_configs is set",
        ),
        (
            json!({"tables_configs": []}),
            "option 'tables_configs': is empty",
        ),
        (
            json!({"tables_configs": ["db.users"]}),
            "option 'tables_configs[0]': expected a block",
        ),
    ];
    for (opts, expected) in cases {
        let e = err(opts);
        assert!(e.contains(expected), "expected {expected:?} in: {e}");
    }
}

#[test]
fn a_restore_resumes_each_tables_files_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    // The same file name in both directories, so only the table tells their splits apart.
    let lines = |n: usize| (0..n).map(|i| format!("{i}\n")).collect::<String>();
    std::fs::write(a.join("f.txt"), lines(50)).unwrap();
    std::fs::write(b.join("f.txt"), lines(70)).unwrap();
    let opts = json!({"tables_configs": [
        {"path": a, "file_format_type": "text", "batch_size": 20, "schema": {"table": "t.a", "fields": {"n": "int"}}},
        {"path": b, "file_format_type": "text", "batch_size": 20, "schema": {"table": "t.b", "fields": {"n": "int"}}}
    ]});
    let src = create_source(opts.clone(), JobMode::Streaming).unwrap();
    let ectx = EnumeratorContext {
        parallelism: 1,
        job: job(JobMode::Streaming),
    };
    let mut en = src.create_enumerator(&ectx, None).unwrap();
    let splits: Vec<Split> = en.discover().unwrap().into_iter().map(|(_, s)| s).collect();
    assert_eq!(splits.len(), 2);
    let mut r = src.create_reader(&reader_ctx(JobMode::Streaming)).unwrap();
    r.add_splits(splits).unwrap();
    let mut counts = std::collections::BTreeMap::new();
    // Three batches: all of t.a's 50 lines (20 + 20 + 10), then a checkpoint.
    drain(&mut r, Some(3), &mut counts);
    let reader_state = r.snapshot(1).unwrap();
    let enum_state = en.snapshot(1).unwrap();
    // Read on after the checkpoint; a crash loses it.
    drain(&mut r, Some(1), &mut counts);
    let mut counts: std::collections::BTreeMap<String, usize> =
        [("t.a".to_string(), 50)].into_iter().collect();

    // The restored job: a new file in each directory appears meanwhile.
    std::fs::write(a.join("g.txt"), lines(5)).unwrap();
    std::fs::write(b.join("g.txt"), lines(7)).unwrap();
    let src = create_source(opts, JobMode::Streaming).unwrap();
    let mut en = src.create_enumerator(&ectx, Some(enum_state)).unwrap();
    let new: Vec<Split> = en.discover().unwrap().into_iter().map(|(_, s)| s).collect();
    let mut new_ids: Vec<&str> = new.iter().map(|s| s.id.as_str()).collect();
    new_ids.sort();
    assert_eq!(
        new_ids,
        [
            format!("t.a:{}", a.join("g.txt").display()),
            format!("t.b:{}", b.join("g.txt").display())
        ],
        "only the files no table has seen"
    );
    let mut r = src.create_reader(&reader_ctx(JobMode::Streaming)).unwrap();
    r.add_splits(reader_state).unwrap();
    r.add_splits(new).unwrap();
    r.no_more_splits();
    assert!(drain(&mut r, None, &mut counts));
    assert_eq!(
        counts,
        [("t.a".to_string(), 55), ("t.b".to_string(), 77)]
            .into_iter()
            .collect(),
        "every line of every table exactly once"
    );
}

#[test]
fn a_checkpoint_of_other_tables_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (json_dir, _) = two_dirs(dir.path());
    let src = create_source(
        json!({"tables_configs": [{"path": json_dir, "file_format_type": "json",
                                    "schema": {"table": "db.users", "fields": {"id": "int"}}}]}),
        JobMode::Batch,
    )
    .unwrap();
    let mut r = src.create_reader(&reader_ctx(JobMode::Batch)).unwrap();
    let e = r
        .add_splits(vec![Split {
            id: "db.gone:/x".into(),
            state: json!({"table": "db.gone", "path": "/x", "rows": 3}),
        }])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("split 'db.gone:/x' of table 'db.gone', which this source no longer has (tables: db.users)"),
        "{e}"
    );
}

#[test]
fn the_table_name_comes_from_schema_table_then_plugin_output() {
    let dir = tempfile::tempdir().unwrap();
    let (json_dir, _) = two_dirs(dir.path());
    let name = |opts: Value| {
        create_source(opts, JobMode::Batch).unwrap().tables()[0]
            .name
            .to_string()
    };
    let fields = json!({"id": "int"});
    assert_eq!(
        name(
            json!({"path": json_dir, "file_format_type": "json", "plugin_output": "users",
                    "schema": {"table": "db.users", "fields": fields}})
        ),
        "db.users"
    );
    assert_eq!(
        name(
            json!({"path": json_dir, "file_format_type": "json", "plugin_output": "users",
                    "schema": {"fields": fields}})
        ),
        "users"
    );
    assert_eq!(
        name(json!({"path": json_dir, "file_format_type": "json", "schema": {"fields": fields}})),
        "default"
    );
}

// ---- empty inputs ----

#[test]
fn an_empty_directory_is_an_empty_input() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("fake_empty");
    std::fs::create_dir_all(&empty).unwrap();
    // SeaTunnel's local_file_to_console.conf (json): an empty schema block, no columns.
    let (schema, b) =
        read_all(json!({"path": empty, "file_format_type": "json", "schema": {}})).unwrap();
    assert_eq!(schema.fields().len(), 0);
    assert_eq!(rows(&b), 0);
    // Parquet with nothing to take the schema from: SeaTunnel's one-column text table.
    let (schema, b) = read_all(json!({"path": empty, "file_format_type": "parquet"})).unwrap();
    assert_eq!(
        schema
            .fields()
            .iter()
            .map(|f| (f.name().as_str(), f.data_type().clone()))
            .collect::<Vec<_>>(),
        [("content", arrow::datatypes::DataType::Utf8)]
    );
    assert_eq!(rows(&b), 0);
    // read_columns cannot be checked against a schema nobody knows yet.
    let (_, b) =
        read_all(json!({"path": empty, "file_format_type": "parquet", "read_columns": ["c_int"]}))
            .unwrap();
    assert_eq!(rows(&b), 0);
    // A schema block naming only the table: no columns.
    let (schema, _) = read_all(
        json!({"path": empty, "file_format_type": "parquet", "schema": {"table": "db.t"}}),
    )
    .unwrap();
    assert_eq!(schema.fields().len(), 0);
    // Declared columns stay declared.
    let (schema, b) = read_all(json!({"path": empty, "file_format_type": "csv",
                                      "schema": {"fields": {"id": "int"}}}))
    .unwrap();
    assert_eq!(schema.fields().len(), 1);
    assert_eq!(rows(&b), 0);
    // A table of no columns has nothing to read a file into (SeaTunnel would make rows
    // of no columns): refused when listing finds a file, and when a file arrives later.
    std::fs::write(dir.path().join("x.json"), "{\"a\": 1}\n").unwrap();
    let e = read_all(
        json!({"path": dir.path().join("x.json"), "file_format_type": "json", "schema": {}}),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("option 'schema': declares no columns, but"),
        "{e}"
    );
    let src = create_source(
        json!({"path": empty, "file_format_type": "json", "schema": {}}),
        JobMode::Streaming,
    )
    .unwrap();
    let mut r = src.create_reader(&reader_ctx(JobMode::Streaming)).unwrap();
    r.add_splits(vec![Split {
        id: "x".into(),
        state: json!({"path": dir.path().join("x.json"), "rows": 0}),
    }])
    .unwrap();
    let e = r.poll_next().unwrap_err().to_string();
    assert!(e.contains("table 'default' declares no columns"), "{e}");
    // Still an error: csv and json without any schema block, and a streaming parquet
    // source whose columns nothing tells.
    let e = read_all(json!({"path": empty, "file_format_type": "json"}))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("option 'schema': is required for the csv and json formats"),
        "{e}"
    );
    let e = create_source(
        json!({"path": empty, "file_format_type": "parquet"}),
        JobMode::Streaming,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("a STREAMING job must declare its columns"),
        "{e}"
    );
}

#[test]
fn a_parquet_schema_block_with_only_a_table_name_reads_the_files_schema() {
    // SeaTunnel's local_file_parquet_to_assert_with_multipletable.conf.
    let dir = tempfile::tempdir().unwrap();
    let parquet = dir.path().join("parquet");
    copy_into(
        "e2e.parquet",
        &parquet.join("name=tyrantlucifer/hobby=coding"),
    );
    let src = create_source(
        json!({"tables_configs": [
            {"schema": {"table": "fake01"}, "path": parquet, "file_format_type": "parquet"},
            {"schema": {"table": "fake02"}, "path": parquet, "file_format_type": "parquet"}
        ]}),
        JobMode::Batch,
    )
    .unwrap();
    for t in src.tables() {
        assert_eq!(t.schema.fields().len(), 17, "{}", t.name);
        assert!(t.schema.index_of("c_timestamp").is_ok());
        assert!(t.schema.index_of("hobby").is_ok());
    }
}

#[test]
fn a_schema_block_rejects_what_it_does_not_know() {
    let dir = tempfile::tempdir().unwrap();
    let (json_dir, _) = two_dirs(dir.path());
    let e = create_source(
        json!({"path": json_dir, "file_format_type": "json",
               "schema": {"tabel": "db.users", "fields": {"id": "int"}}}),
        JobMode::Batch,
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(e.contains("option 'schema.tabel': unknown option"), "{e}");
}

#[test]
fn option_lists_are_what_ferry_connectors_prints() {
    use ferry_api::declare::check_specs;
    // Shown defaults that depend on the format.
    check_specs(crate::SOURCE_OPTIONS, &["enable_file_split"]).unwrap();
    check_specs(crate::source::TABLE_OPTIONS, &["enable_file_split"]).unwrap();
    check_specs(crate::SINK_OPTIONS, &[]).unwrap();
    assert_eq!(
        crate::SOURCE_OPTIONS.last().map(|s| s.name),
        Some("tables_configs")
    );
}
