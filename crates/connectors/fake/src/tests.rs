//! Tests of the factory, the split plan, reading, determinism and checkpoints.

use std::time::Duration;

use arrow::array::{Array, AsArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type};
use arrow::record_batch::RecordBatch;
use ferry_api::types::{same_type, type_name};
use ferry_api::value::{array_value_to_json, RowStyle};
use ferry_api::{
    Boundedness, ChangeBatch, EnumeratorContext, JobContext, JobMode, ReadStatus, ReaderContext,
    RowKind, Source, SourceFactory, SourceReader, Split,
};
use serde_json::{json, Value};

use super::*;
use crate::source::arrays_equal;

fn job(mode: JobMode) -> JobContext {
    JobContext {
        mode,
        ..JobContext::default()
    }
}

fn create(v: Value) -> Result<Box<dyn Source>> {
    FakeSourceFactory.create(
        &mut Options::from_json("FakeSource", v),
        &job(JobMode::Batch),
    )
}

fn create_err(v: Value) -> String {
    match create(v) {
        Ok(s) => panic!("expected an error, got {s:?}"),
        Err(e) => e.to_string(),
    }
}

fn schema3() -> Value {
    json!({"fields": {"id": "int", "name": "string", "age": "int"}})
}

fn reader_ctx(subtask: usize, parallelism: usize, mode: JobMode) -> ReaderContext {
    ReaderContext {
        subtask,
        parallelism,
        job: job(mode),
    }
}

/// Splits of a fresh enumerator, by reader.
fn assign(src: &dyn Source, parallelism: usize) -> Vec<Vec<Split>> {
    let mut e = src
        .create_enumerator(
            &EnumeratorContext {
                parallelism,
                job: job(JobMode::Batch),
            },
            None,
        )
        .unwrap();
    let mut by_reader = vec![Vec::new(); parallelism];
    for (r, s) in e.discover().unwrap() {
        by_reader[r].push(s);
    }
    assert!(e.is_exhausted());
    by_reader
}

/// Polls a reader until it finishes, collecting its batches.
fn drain(r: &mut dyn SourceReader) -> Vec<ChangeBatch> {
    let mut out = Vec::new();
    loop {
        match r.poll_next().unwrap() {
            ReadStatus::Batch(b) => out.push(b),
            ReadStatus::Idle(d) => std::thread::sleep(d),
            ReadStatus::Finished => return out,
        }
    }
}

/// Every batch of a batch-mode run with `parallelism` readers.
fn run(src: &dyn Source, parallelism: usize) -> Vec<ChangeBatch> {
    let mut out = Vec::new();
    for (i, splits) in assign(src, parallelism).into_iter().enumerate() {
        let mut r = src
            .create_reader(&reader_ctx(i, parallelism, JobMode::Batch))
            .unwrap();
        r.add_splits(splits).unwrap();
        r.no_more_splits();
        out.extend(drain(r.as_mut()));
    }
    out
}

fn rows(batches: &[ChangeBatch]) -> usize {
    batches.iter().map(|b| b.num_rows()).sum()
}

fn concat(batches: &[ChangeBatch]) -> RecordBatch {
    concat_batches(&batches[0].data.schema(), batches.iter().map(|b| &b.data)).unwrap()
}

// ---------------------------------------------------------------- option errors

#[test]
fn bad_type_name_is_reported_with_the_field() {
    let e = create_err(json!({"schema": {"fields": {"a": "strnig"}}}));
    assert!(
        e.contains("option 'schema.fields'")
            && e.contains("field 'a'")
            && e.contains("unknown type 'strnig'"),
        "{e}"
    );
}

#[test]
fn missing_schema_is_reported() {
    let e = create_err(json!({"row.num": 3}));
    assert!(
        e.contains("option 'schema'") && e.contains("required"),
        "{e}"
    );
}

#[test]
fn min_greater_than_max_is_reported() {
    for (k_min, k_max) in [
        ("int.min", "int.max"),
        ("tinyint.min", "tinyint.max"),
        ("double.min", "double.max"),
    ] {
        let e = create_err(json!({"schema": schema3(), k_min: 10, k_max: 5}));
        assert!(
            e.contains(&format!("option '{k_min}'")) && e.contains("greater than"),
            "{e}"
        );
    }
}

#[test]
fn values_outside_the_type_are_reported() {
    let e = create_err(json!({"schema": schema3(), "tinyint.max": 300}));
    assert!(
        e.contains("option 'tinyint.max'") && e.contains("does not fit type tinyint"),
        "{e}"
    );
    let e = create_err(json!({"schema": schema3(), "smallint.template": [1, 70000]}));
    assert!(e.contains("option 'smallint.template[1]'"), "{e}");
    let e = create_err(json!({"schema": schema3(), "date.month.template": [13]}));
    assert!(e.contains("option 'date.month.template[0]'"), "{e}");
    let e = create_err(json!({"schema": schema3(), "row.num": -1}));
    assert!(
        e.contains("option 'row.num'") && e.contains("negative"),
        "{e}"
    );
    let e = create_err(json!({"schema": schema3(), "split.num": 0}));
    assert!(e.contains("option 'split.num'"), "{e}");
    let e = create_err(json!({"schema": schema3(), "string.length": 1_000_000_000}));
    assert!(
        e.contains("option 'string.length'") && e.contains("too large"),
        "{e}"
    );
}

#[test]
fn unknown_option_is_reported_with_the_nearest_name() {
    let e = create_err(json!({"schema": schema3(), "row": {"nmu": 3}}));
    assert!(
        e.contains("option 'row.nmu': unknown option") && e.contains("did you mean 'row.num'"),
        "{e}"
    );
    let e = create_err(json!({"schema": schema3(), "itn.min": 3}));
    assert!(e.contains("option 'itn.min': unknown option"), "{e}");
}

#[test]
fn rows_with_wrong_field_count_or_value_are_reported() {
    let e =
        create_err(json!({"schema": schema3(), "rows": [{"kind": "INSERT", "fields": [1, "a"]}]}));
    assert!(
        e.contains("option 'rows[0].fields'") && e.contains("2 values but the schema has 3"),
        "{e}"
    );
    let e = create_err(json!({"schema": schema3(), "rows": [
        {"kind": "INSERT", "fields": [1, "a", 3]},
        {"kind": "INSERT", "fields": [1, "a", "old"]}
    ]}));
    assert!(
        e.contains("option 'rows[1].fields[2]'") && e.contains("field 'age'"),
        "{e}"
    );
    let e = create_err(
        json!({"schema": schema3(), "rows": [{"kind": "UPSERT", "fields": [1, "a", 3]}]}),
    );
    assert!(
        e.contains("option 'rows[0].kind'") && e.contains("UPSERT"),
        "{e}"
    );
    let e = create_err(
        json!({"schema": schema3(), "rows": [{"kind": "INSERT", "fields": {"nope": 1}}]}),
    );
    assert!(e.contains("option 'rows[0].fields.nope'"), "{e}");
}

#[test]
fn template_mode_without_template_is_reported() {
    let e = create_err(json!({"schema": schema3(), "int.fake.mode": "template"}));
    assert!(
        e.contains("option 'int.fake.mode'") && e.contains("int.template"),
        "{e}"
    );
    let e = create_err(json!({"schema": schema3(), "string.fake.mode": "sometimes"}));
    assert!(
        e.contains("option 'string.fake.mode'") && e.contains("valid values: range, template"),
        "{e}"
    );
}

#[test]
fn misspelt_fake_mode_prefix_is_ignored_like_seatunnel() {
    let src = create(json!({
        "schema": {"fields": {"c_smallint": "smallint"}},
        "smalling.fake.mode": "template",
        "smallint.template": [10, 11]
    }))
    .unwrap();
    let b = concat(&run(src.as_ref(), 1));
    assert!(b
        .column(0)
        .as_primitive::<Int16Type>()
        .values()
        .iter()
        .all(|v| *v == 10 || *v == 11));
}

#[test]
fn tables_configs_errors_name_the_item() {
    let e = create_err(
        json!({"tables_configs": [{"schema": schema3()}, {"schema": schema3(), "row.nmu": 1}]}),
    );
    assert!(
        e.contains("option 'tables_configs[1].row.nmu': unknown option"),
        "{e}"
    );
    let e = create_err(json!({"tables_configs": [{"schema": schema3()}, {"schema": schema3()}]}));
    assert!(e.contains("used twice"), "{e}");
    let e = create_err(json!({"tables_configs": [{"schema": schema3()}], "row.num": 3}));
    assert!(
        e.contains("option 'row.num'") && e.contains("tables_configs"),
        "{e}"
    );
}

#[test]
fn schema_columns_give_defaults_lengths_and_nullability() {
    let src = create(
        json!({"row.num": 3, "schema": {"table": "db.t", "columns": [
            {"name": "id", "type": "bigint", "nullable": false, "defaultValue": 7},
            {"name": "s", "type": "string", "columnLength": 12},
            {"name": "ts", "type": "timestamp", "defaultValue": "2024-09-12 15:45:30"},
            {"name": "now", "type": "date", "defaultValue": "CURRENT_DATE"}
        ]}}),
    )
    .unwrap();
    let t = &src.tables()[0];
    assert_eq!(&*t.name, "db.t");
    assert!(!t.schema.field(0).is_nullable());
    let b = concat(&run(src.as_ref(), 1));
    assert_eq!(b.num_rows(), 3);
    assert!(b
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .iter()
        .all(|v| *v == 7));
    assert!(b
        .column(1)
        .as_string::<i32>()
        .iter()
        .all(|s| s.is_some_and(|s| s.len() == 12)));
    assert_eq!(
        array_value_to_json(b.column(2).as_ref(), 2, RowStyle::Positional),
        json!("2024-09-12T15:45:30")
    );
    assert_eq!(b.column(3).null_count(), 0);
    let e = create_err(json!({"schema": {"columns": [{"name": "x", "type": "int", "lenght": 3}]}}));
    assert!(e.contains("option 'schema.columns[0].lenght'"), "{e}");
}

// ---------------------------------------------------------------- semantics

#[test]
fn defaults_give_five_rows_of_the_schema_in_one_split() {
    let src = create(json!({"schema": schema3(), "plugin_output": "fake"})).unwrap();
    assert_eq!(src.boundedness(), Boundedness::Bounded);
    let tables = src.tables();
    assert_eq!(tables.len(), 1);
    assert_eq!(&*tables[0].name, "fake");
    let splits = assign(src.as_ref(), 1);
    assert_eq!(splits[0].len(), 1);
    assert_eq!(splits[0][0].id, "fake_0");
    let batches = run(src.as_ref(), 1);
    assert_eq!(rows(&batches), 5);
    assert!(batches
        .iter()
        .all(|b| b.kinds.is_none() && &*b.table == "fake"));
    let b = concat(&batches);
    assert_eq!(b.schema(), tables[0].schema);
    assert!(b
        .column(1)
        .as_string::<i32>()
        .iter()
        .all(|s| s.is_some_and(|s| s.len() == 5)));
}

#[test]
fn rows_are_per_reader_and_cut_into_splits_like_seatunnel() {
    let src = create(json!({"schema": schema3(), "row.num": 10, "split.num": 3})).unwrap();
    let splits = assign(src.as_ref(), 2);
    // ceil(10 / 3) = 4 rows a split: 4 + 4 + 2 for each reader, indexes i, i+2, i+4.
    let ids: Vec<_> = splits[1].iter().map(|s| s.id.clone()).collect();
    assert_eq!(ids, ["default_1", "default_3", "default_5"]);
    let sizes: Vec<u64> = splits[0]
        .iter()
        .map(|s| s.state["rows"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [4, 4, 2]);
    assert_eq!(rows(&run(src.as_ref(), 2)), 20);
}

#[test]
fn explicit_rows_keep_their_kinds_and_every_value_form() {
    let src = create(json!({
        "schema": {"fields": {
            "c_null": "null", "c_string": "string", "c_boolean": "boolean", "c_decimal": "decimal(30, 8)",
            "c_date": "date", "c_timestamp": "timestamp", "c_time": "time", "c_bytes": "bytes",
            "c_array": "array<int>", "c_map": "map<date, string>",
            "c_map_nest": "map<string, {c_int = int, c_string = string}>",
            "c_row": {"c_int": "int", "c_map": "map<string, string>"}
        }},
        "rows": [
            {"kind": "INSERT", "fields": [null, "AAA", false, 99999.99999999, "2012-12-21", "2012-12-21T12:34:56", "12:34:56",
                "bWlJWmo=", [0, 1, 2], {"2024-01-26": "v0"}, {"k1": [123, "BBB-BB"]}, [5, {"k0": "v0"}]]},
            {"kind": "DELETE", "fields": {"c_string": "B", "c_row": {"c_int": 1, "c_map": {}}}}
        ]
    }))
    .unwrap();
    let batches = run(src.as_ref(), 1);
    assert_eq!(rows(&batches), 2);
    let b = &batches[0];
    assert_eq!(b.kind(0), RowKind::Insert);
    assert_eq!(b.kind(1), RowKind::Delete);
    let want = json!([null, "AAA", false, 99999.99999999, "2012-12-21", "2012-12-21T12:34:56", "12:34:56",
        "bWlJWmo=", [0, 1, 2], {"2024-01-26": "v0"}, {"k1": [123, "BBB-BB"]}, [5, {"k0": "v0"}]]);
    let got: Vec<Value> = b
        .data
        .columns()
        .iter()
        .map(|c| array_value_to_json(c.as_ref(), 0, RowStyle::Positional))
        .collect();
    assert_eq!(Value::Array(got), want);
    assert!(b.data.column(2).is_null(1));
}

#[test]
fn explicit_rows_come_once_per_split_like_seatunnel() {
    let src = create(json!({"schema": schema3(), "split.num": 5, "rows": [
        {"kind": "INSERT", "fields": [1, "a", 2]}, {"kind": "UPDATE_AFTER", "fields": [1, "b", 2]}
    ]}))
    .unwrap();
    // row.num = 5 in 5 splits: each split yields both rows.
    assert_eq!(rows(&run(src.as_ref(), 1)), 10);
}

#[test]
fn ranges_and_templates_follow_the_options() {
    let src = create(json!({
        "row.num": 300,
        "string.template": ["tyrantlucifer", "hailin", "kris"],
        "tinyint.min": 1, "tinyint.max": 9,
        "smallint.min": -19, "smallint.max": -10,
        "int.fake.mode": "range", "int.min": 20, "int.max": 29, "int.template": [1],
        "bigint.template": [30, 31],
        "float.min": 40.0, "float.max": 43.0,
        "double.fake.mode": "template", "double.template": [44.0, 45.5],
        "schema": {"fields": {"s": "string", "t": "tinyint", "sm": "smallint", "i": "int", "b": "bigint", "f": "float", "d": "double"}}
    }))
    .unwrap();
    let b = concat(&run(src.as_ref(), 1));
    assert_eq!(b.num_rows(), 300);
    assert!(b
        .column(0)
        .as_string::<i32>()
        .iter()
        .all(|s| ["tyrantlucifer", "hailin", "kris"].contains(&s.unwrap_or(""))));
    assert!(b
        .column(1)
        .as_primitive::<Int8Type>()
        .values()
        .iter()
        .all(|v| (1..=9).contains(v)));
    assert!(b
        .column(2)
        .as_primitive::<Int16Type>()
        .values()
        .iter()
        .all(|v| (-19..=-10).contains(v)));
    assert!(b
        .column(3)
        .as_primitive::<Int32Type>()
        .values()
        .iter()
        .all(|v| (20..=29).contains(v)));
    assert!(b
        .column(4)
        .as_primitive::<Int64Type>()
        .values()
        .iter()
        .all(|v| *v == 30 || *v == 31));
    assert!(b
        .column(5)
        .as_primitive::<Float32Type>()
        .values()
        .iter()
        .all(|v| (40.0..=43.0).contains(v)));
    assert!(b
        .column(6)
        .as_primitive::<Float64Type>()
        .values()
        .iter()
        .all(|v| *v == 44.0 || *v == 45.5));
}

#[test]
fn bracketed_template_text_from_a_variable_is_a_list() {
    let src = create(json!({"row.num": "10", "string.template": "[abc,def]", "schema": {"fields": {"name": "string", "age": "int"}}}))
        .unwrap();
    let b = concat(&run(src.as_ref(), 1));
    assert_eq!(b.num_rows(), 10);
    assert!(b
        .column(0)
        .as_string::<i32>()
        .iter()
        .all(|s| s == Some("abc") || s == Some("def")));
}

#[test]
fn large_splits_come_in_batches_of_8192() {
    let src = create(json!({"schema": schema3(), "row.num": 20_000})).unwrap();
    let batches = run(src.as_ref(), 1);
    let sizes: Vec<usize> = batches.iter().map(|b| b.num_rows()).collect();
    assert_eq!(sizes, [8192, 8192, 3616]);
}

#[test]
fn same_seed_same_rows_other_seed_other_rows() {
    let opts = |seed: i64| {
        json!({"seed": seed, "row.num": 1000, "split.num": 3, "schema": {"fields": {
            "s": "string", "i": "int", "d": "decimal(10, 2)", "ts": "timestamp", "m": "map<string, array<int>>",
            "r": {"x": "double", "b": "bytes"}
        }}})
    };
    let a = concat(&run(create(opts(1)).unwrap().as_ref(), 2));
    let b = concat(&run(create(opts(1)).unwrap().as_ref(), 2));
    let c = concat(&run(create(opts(2)).unwrap().as_ref(), 2));
    assert_eq!(a.num_rows(), 2000);
    assert_eq!(a, b);
    assert_ne!(a.column(0).to_data(), c.column(0).to_data());
}

#[test]
fn resumed_reader_yields_exactly_the_remaining_rows() {
    let opts = json!({"row.num": 30_000, "split.num": 2, "schema": {"fields": {"s": "string", "i": "bigint", "a": "array<int>"}}});
    let src = create(opts).unwrap();
    let splits = assign(src.as_ref(), 1).remove(0);

    let mut full = src
        .create_reader(&reader_ctx(0, 1, JobMode::Batch))
        .unwrap();
    full.add_splits(splits.clone()).unwrap();
    full.no_more_splits();
    let whole = concat(&drain(full.as_mut()));
    assert_eq!(whole.num_rows(), 30_000);

    // Read three batches (the first split, 8192 + 6808 rows, then one batch into the
    // second), snapshot, and restore a new reader.
    let mut first = src
        .create_reader(&reader_ctx(0, 1, JobMode::Batch))
        .unwrap();
    first.add_splits(splits).unwrap();
    first.no_more_splits();
    let mut before = Vec::new();
    while before.len() < 3 {
        if let ReadStatus::Batch(b) = first.poll_next().unwrap() {
            before.push(b);
        }
    }
    let snap = first.snapshot(1).unwrap();
    assert_eq!(snap.len(), 1, "the finished split is not kept");
    assert_eq!(snap[0].state["emitted"], json!(8192));
    // The state is JSON and survives a round trip through text.
    let snap: Vec<Split> = serde_json::from_str(&serde_json::to_string(&snap).unwrap()).unwrap();
    let mut second = src
        .create_reader(&reader_ctx(0, 1, JobMode::Batch))
        .unwrap();
    second.add_splits(snap).unwrap();
    second.no_more_splits();
    let mut all = before;
    all.extend(drain(second.as_mut()));
    let resumed = concat(&all);
    assert_eq!(resumed.num_rows(), whole.num_rows());
    for (x, y) in resumed.columns().iter().zip(whole.columns()) {
        assert!(arrays_equal(x.as_ref(), y.as_ref()));
    }
}

#[test]
fn resuming_mid_block_regenerates_the_same_rows() {
    let src = create(json!({"row.num": 10_000, "schema": schema3()})).unwrap();
    let mut split = assign(src.as_ref(), 1).remove(0).remove(0);
    let mut r = src
        .create_reader(&reader_ctx(0, 1, JobMode::Batch))
        .unwrap();
    r.add_splits(vec![split.clone()]).unwrap();
    r.no_more_splits();
    let whole = concat(&drain(r.as_mut()));
    split.state["emitted"] = json!(100);
    let mut r = src
        .create_reader(&reader_ctx(0, 1, JobMode::Batch))
        .unwrap();
    r.add_splits(vec![split]).unwrap();
    r.no_more_splits();
    let rest = concat(&drain(r.as_mut()));
    assert_eq!(rest, whole.slice(100, 9_900));
}

#[test]
fn enumerator_snapshot_holds_unassigned_splits() {
    let src = create(json!({"schema": schema3(), "split.num": 2})).unwrap();
    let ctx = EnumeratorContext {
        parallelism: 2,
        job: job(JobMode::Batch),
    };
    let mut e = src.create_enumerator(&ctx, None).unwrap();
    let fresh = e.snapshot(0).unwrap();
    let mut restored = src.create_enumerator(&ctx, Some(fresh)).unwrap();
    assert_eq!(
        restored.discover().unwrap().len(),
        4,
        "not yet discovered: plans again"
    );

    let assigned = e.discover().unwrap();
    assert_eq!(assigned.len(), 4);
    let snap = e.snapshot(1).unwrap();
    let mut restored = src.create_enumerator(&ctx, Some(snap)).unwrap();
    assert!(restored.is_exhausted());
    assert!(restored.discover().unwrap().is_empty());

    // A failed reader's splits come back and are assigned again to the same reader.
    let (reader, split) = assigned[1].clone();
    e.add_splits_back(vec![split.clone()], reader);
    assert!(!e.is_exhausted());
    let mut restored = src
        .create_enumerator(&ctx, Some(e.snapshot(2).unwrap()))
        .unwrap();
    assert_eq!(restored.discover().unwrap(), vec![(reader, split)]);
}

#[test]
fn streaming_reader_spaces_splits_and_then_idles_forever() {
    let src = FakeSourceFactory
        .create(
            &mut Options::from_json(
                "FakeSource",
                json!({"schema": schema3(), "row.num": 6, "split.num": 3, "split.read-interval": 150}),
            ),
            &job(JobMode::Streaming),
        )
        .unwrap();
    assert_eq!(src.boundedness(), Boundedness::Unbounded);
    let splits = assign(src.as_ref(), 1).remove(0);
    let mut r = src
        .create_reader(&reader_ctx(0, 1, JobMode::Streaming))
        .unwrap();
    r.add_splits(splits).unwrap();
    r.no_more_splits();
    let start = std::time::Instant::now();
    let mut got = 0;
    let mut idles = 0;
    while got < 6 {
        match r.poll_next().unwrap() {
            ReadStatus::Batch(b) => got += b.num_rows(),
            ReadStatus::Idle(d) => {
                assert!(d <= Duration::from_millis(150));
                idles += 1;
                std::thread::sleep(d);
            }
            ReadStatus::Finished => panic!("a streaming FakeSource never finishes"),
        }
    }
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "three splits 150 ms apart"
    );
    assert!(idles > 0);
    for _ in 0..3 {
        assert!(matches!(r.poll_next().unwrap(), ReadStatus::Idle(_)));
    }
    assert!(
        r.snapshot(1).unwrap().is_empty(),
        "finished splits are not kept"
    );
}

#[test]
fn batch_reader_waits_for_no_more_splits() {
    let src = create(json!({"schema": schema3()})).unwrap();
    let mut r = src
        .create_reader(&reader_ctx(0, 1, JobMode::Batch))
        .unwrap();
    assert!(matches!(r.poll_next().unwrap(), ReadStatus::Idle(_)));
    r.no_more_splits();
    assert!(matches!(r.poll_next().unwrap(), ReadStatus::Finished));
}

#[test]
fn tables_configs_produce_each_table() {
    let src = create(json!({"seed": 3, "tables_configs": [
        {"row.num": 16, "schema": {"table": "test.table1", "fields": {"a": "string", "b": "tinyint"}}},
        {"row.num": 17, "tinyint.min": 5, "tinyint.max": 5, "schema": {"table": "test.table2", "fields": {"b": "tinyint"}}}
    ]}))
    .unwrap();
    let names: Vec<String> = src.tables().iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, ["test.table1", "test.table2"]);
    let batches = run(src.as_ref(), 1);
    let count = |t: &str| {
        batches
            .iter()
            .filter(|b| &*b.table == t)
            .map(|b| b.num_rows())
            .sum::<usize>()
    };
    assert_eq!(count("test.table1"), 16);
    assert_eq!(count("test.table2"), 17);
    for b in batches.iter().filter(|b| &*b.table == "test.table2") {
        assert_eq!(b.data.num_columns(), 1);
        assert!(b
            .data
            .column(0)
            .as_primitive::<Int8Type>()
            .values()
            .iter()
            .all(|v| *v == 5));
    }
}

#[test]
fn every_type_is_generated_matching_the_schema() {
    let fields = json!({
        "c_map": "map<string, array<int>>", "c_map_nest": "map<string, {c_int = int, c_string = string}>",
        "c_array": "array<int>", "c_string": "string", "c_boolean": "boolean", "c_tinyint": "tinyint",
        "c_smallint": "smallint", "c_int": "int", "c_bigint": "bigint", "c_float": "float", "c_double": "double",
        "c_decimal": "decimal(30, 8)", "c_null": "null", "c_bytes": "bytes", "c_date": "date", "c_time": "time",
        "c_timestamp": "timestamp",
        "c_row": {"c_map": "map<string, map<string, string>>", "c_array": "array<int>", "c_null": "null", "c_date": "date"}
    });
    let src = create(json!({"row.num": 10, "map.size": 10, "array.size": 10, "bytes.length": 10, "string.length": 10,
        "date.year.template": [2020], "schema": {"fields": fields}}))
    .unwrap();
    let schema = src.tables()[0].schema.clone();
    let b = concat(&run(src.as_ref(), 1));
    assert_eq!(b.num_rows(), 10);
    for (f, c) in schema.fields().iter().zip(b.columns()) {
        assert!(
            same_type(f.data_type(), c.data_type()),
            "{}: {}",
            f.name(),
            type_name(c.data_type())
        );
        if f.name() != "c_null" {
            assert_eq!(c.null_count(), 0, "{}", f.name());
        }
    }
    assert_eq!(b.column(0).as_map().value_length(0), 10);
    assert!(b
        .column(13)
        .as_binary::<i32>()
        .iter()
        .all(|v| v.is_some_and(|v| v.len() == 10)));
    let d = array_value_to_json(b.column(14).as_ref(), 0, RowStyle::Positional);
    assert!(d.as_str().is_some_and(|s| s.starts_with("2020-")), "{d}");
}

/// The FakeSource blocks of the conformance jobs, written as the JSON the engine passes.
#[test]
fn conformance_job_blocks_are_accepted() {
    let full = json!({
        "c_map": "map<string, string>", "c_array": "array<int>", "c_string": "string", "c_boolean": "boolean",
        "c_tinyint": "tinyint", "c_smallint": "smallint", "c_int": "int", "c_bigint": "bigint", "c_float": "float",
        "c_double": "double", "c_bytes": "bytes", "c_date": "date", "c_decimal": "decimal(38, 18)", "c_timestamp": "timestamp"
    });
    let mut nested = full.clone();
    nested["c_row"] = full.clone();
    let cases = [
        // fake/fake_to_assert.conf, file/*/fake_to_local_file_*.conf
        (
            json!({"schema": {"fields": nested}, "result_table_name": "fake"}),
            5,
        ),
        // fake/fake_to_assert_with_template.conf
        (
            json!({"row": {"num": 5}, "string": {"fake": {"mode": "template"}, "template": ["tyrantlucifer", "hailin"]},
            "tinyint": {"fake": {"mode": "template"}, "template": [1, 2, 3]},
            "smalling": {"fake": {"mode": "template"}}, "smallint": {"template": [10, 11]},
            "float": {"fake": {"mode": "template"}, "template": [40.0, 41.0]},
            "schema": {"fields": {"c_string": "string", "c_tinyint": "tinyint", "c_smallint": "smallint", "c_float": "float"}}}),
            5,
        ),
        // assert/fakesource_to_assert.conf
        (
            json!({"result_table_name": "fake", "row": {"num": 100}, "split": {"row": 25, "read-interval": 2000},
            "int": {"min": 32767}, "schema": {"fields": {"name": "string", "age": "int", "c_time": "time"}}}),
            100,
        ),
        // engine/stream_fakesource_to_localfile.conf (batch here: the split plan is what matters)
        (
            json!({"result_table_name": "fake", "row.num": 100, "split.num": 5, "split.read-interval": 1,
            "schema": {"fields": {"id": "int", "name": "string", "age": "int"}}}),
            100,
        ),
        // engine/fake_to_console_with_default_value.variables.conf after substitution
        (
            json!({"result_table_name": "fake_test_table", "row.num": "50", "string.template": "[abc,def]", "int.template": [20, 21],
            "schema": {"fields": {"name": "string", "age": "int"}}}),
            50,
        ),
        // transform/sql_transform.conf
        (
            json!({"result_table_name": "fake", "row.num": 100, "schema": {"fields": {"id": "int", "name": "string", "age": "int",
            "c_time": "time", "c_timestamp": "timestamp", "c_date": "date", "c_map": "map<string, string>", "c_array": "array<int>",
            "c_decimal": "decimal(30, 8)", "c_row": {"c_row": {"c_int": "int"}}}}}),
            100,
        ),
    ];
    for (opts, n) in cases {
        let src = create(opts.clone()).unwrap_or_else(|e| panic!("{opts}: {e}"));
        assert_eq!(rows(&run(src.as_ref(), 1)), n, "{opts}");
    }
}

#[test]
fn the_schema_block_gives_the_table_its_catalog_id_and_keys() {
    let s = create(json!({
        "plugin_output": "fake",
        "schema": {
            "table": "test.fakeTable",
            "comment": "people",
            "columns": [
                {"name": "id", "type": "bigint", "nullable": false, "comment": "the key"},
                {"name": "name", "type": "string", "columnLength": 20, "defaultValue": "x"}
            ],
            "primaryKey": {"name": "pk", "columnNames": ["id"]},
            "constraintKeys": [{"constraintName": "u", "constraintType": "UNIQUE_KEY",
                "constraintColumns": [{"columnName": "name", "sortType": "DESC"}]}]
        }
    }))
    .unwrap();
    let t = &s.tables()[0];
    let c = &t.catalog;
    let id = c.id.as_ref().unwrap();
    assert_eq!(
        (id.catalog.as_str(), id.path().as_str()),
        ("FakeSource", "test.fakeTable")
    );
    assert_eq!(t.primary_key_columns(), ["id".to_string()]);
    assert_eq!(c.constraint_keys[0].to_string(), "UNIQUE_KEY u (name DESC)");
    assert_eq!(c.comment.as_deref(), Some("people"));
    assert_eq!(c.columns["id"].comment.as_deref(), Some("the key"));
    assert_eq!(c.columns["name"].length, Some(20));
    assert_eq!(c.columns["name"].default, Some(json!("x")));

    // Without schema.table the id is the output name, else SeaTunnel's default path.
    let s = create(json!({"plugin_output": "fake", "schema": schema3()})).unwrap();
    assert_eq!(s.tables()[0].catalog.id.as_ref().unwrap().path(), "fake");
    let s = create(json!({"schema": schema3()})).unwrap();
    assert_eq!(
        s.tables()[0].catalog.id.as_ref().unwrap().path(),
        "default.default.default"
    );

    let e = create_err(json!({"schema": {"fields": {"id": "int"}, "primaryKey": {"name": "pk"}}}));
    assert!(
        e.contains("schema.primaryKey.columnNames") && e.contains("is required"),
        "{e}"
    );
}

#[test]
fn option_list_is_what_ferry_connectors_prints_and_the_defaults_are_used() {
    use ferry_api::declare::{check_specs, default_text};
    check_specs(OPTIONS, &[]).unwrap();
    check_specs(TABLE_OPTIONS, &[]).unwrap();
    assert_eq!(OPTIONS.len(), TABLE_OPTIONS.len() + 1);
    // A table built from nothing but a schema gets the defaults `ferry connectors` shows.
    let mut o = Options::from_json("FakeSource", json!({"schema": {"fields": {"a": "int"}}}));
    let seed = crate::config::SeedOption::read(&mut o).unwrap().seed as u64;
    let t = crate::config::read_table(&mut o, None, seed).unwrap();
    o.finish(OPTIONS).unwrap();
    let default = |k: &str| default_text(OPTIONS, k).unwrap().parse::<u64>().unwrap();
    assert_eq!(t.row_num, default("row.num"));
    assert_eq!(t.split_num, default("split.num"));
    assert_eq!(t.read_interval_ms, default("split.read-interval"));
    assert_eq!(t.seed, default("seed"));
    assert_eq!(t.gen.string_length as u64, default("string.length"));
    assert_eq!(t.gen.map_size as u64, default("map.size"));
}
