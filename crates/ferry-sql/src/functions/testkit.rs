//! Helpers for the function tests: an expression is evaluated through the public transform
//! API (`SqlTransformFactory` → instance → batch), on a small in-memory table, so the
//! planner's coercions, constant folding and the output schema are all part of the test.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use ferry_api::types::{parse_type, type_name};
use ferry_api::value::{array_value_to_json, json_to_array, RowStyle};
use ferry_api::{ChangeBatch, JobContext, Options, TableSchema, TransformFactory};
use serde_json::{json, Value};

use crate::SqlTransformFactory;

/// The columns of the one-row sample table (`t`) that [`check`] evaluates on.
const SAMPLE: &[(&str, &str)] = &[
    ("s", "string"),
    ("e", "string"),
    ("nul", "string"),
    ("n", "int"),
    ("neg", "int"),
    ("zero", "int"),
    ("ni", "int"),
    ("big", "bigint"),
    ("nbig", "bigint"),
    ("tiny", "tinyint"),
    ("small", "smallint"),
    ("d", "double"),
    ("nd", "double"),
    ("f", "float"),
    ("dec", "decimal(10, 2)"),
    ("ndec", "decimal(10, 2)"),
    ("ts", "timestamp"),
    ("ts_us", "timestamp"),
    ("nts", "timestamp"),
    ("dt", "date"),
    ("ndt", "date"),
    ("tm", "time"),
    ("ntm", "time"),
    ("bin", "bytes"),
    ("flag", "boolean"),
];

fn sample_row() -> Value {
    json!([[
        "Joy Ding",
        "",
        null,
        5,
        -7,
        0,
        null,
        10000000000i64,
        null,
        -3,
        300,
        -2.5,
        null,
        1.5,
        "12.35",
        null,
        "2022-12-12T23:34:45",
        "2024-02-29T08:05:09.123456",
        null,
        "2020-02-29",
        null,
        "13:34:45",
        null,
        "SGk=",
        true
    ]])
}

/// A table `t` with `fields` (SeaTunnel type names) and `rows` (JSON lists).
pub(crate) fn table(fields: &[(&str, &str)], rows: Value) -> (TableSchema, RecordBatch) {
    let schema: SchemaRef = Arc::new(Schema::new(
        fields
            .iter()
            .map(|(n, t)| Field::new(*n, parse_type(t).expect("test type"), true))
            .collect::<Vec<_>>(),
    ));
    let rows = rows.as_array().cloned().unwrap_or_default();
    let cols: Vec<ArrayRef> = (0..fields.len())
        .map(|k| {
            let vals: Vec<&Value> = rows.iter().map(|r| &r[k]).collect();
            json_to_array(&vals, schema.field(k).data_type()).expect("test row")
        })
        .collect();
    let batch = RecordBatch::try_new_with_options(
        schema.clone(),
        cols,
        &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows.len())),
    )
    .expect("test batch");
    (TableSchema::new("t", schema), batch)
}

fn create(query: &str, input: &TableSchema) -> ferry_api::Result<Arc<dyn ferry_api::Transform>> {
    let mut o = Options::from_json("Sql", json!({ "query": query }));
    SqlTransformFactory.create(&mut o, std::slice::from_ref(input), &JobContext::default())
}

/// Runs `query` on one batch of `input`: the output rows as JSON lists, or the error.
pub(crate) fn run_query(
    query: &str,
    input: &TableSchema,
    batch: RecordBatch,
) -> Result<Vec<Value>, String> {
    let t = create(query, input).map_err(|e| format!("plan: {e}"))?;
    let mut inst = t.create_instance().map_err(|e| e.to_string())?;
    let out = inst
        .transform(ChangeBatch::inserts(input.name.clone(), batch))
        .map_err(|e| format!("run: {e}"))?;
    let Some(out) = out else { return Ok(vec![]) };
    Ok((0..out.num_rows())
        .map(|i| {
            Value::Array(
                out.data
                    .columns()
                    .iter()
                    .map(|c| array_value_to_json(c.as_ref(), i, RowStyle::Positional))
                    .collect(),
            )
        })
        .collect())
}

/// Runs `select <expr> as v from t`: the declared output type and the result column.
fn run_on(
    expr: &str,
    input: &TableSchema,
    batch: RecordBatch,
) -> Result<(String, ArrayRef), String> {
    let query = format!("select {expr} as v from t");
    let t = create(&query, input).map_err(|e| format!("plan: {e}"))?;
    let out_schema = t.output_tables()[0].schema.clone();
    let mut inst = t.create_instance().map_err(|e| e.to_string())?;
    let rows = batch.num_rows();
    let out = inst
        .transform(ChangeBatch::inserts(input.name.clone(), batch))
        .map_err(|e| format!("run: {e}"))?
        .ok_or("no rows came out")?;
    assert_eq!(out.data.schema(), out_schema, "{expr}: batch schema");
    assert_eq!(out.num_rows(), rows, "{expr}: row count");
    Ok((
        type_name(out_schema.field(0).data_type()),
        out.data.column(0).clone(),
    ))
}

/// Evaluates `expr` on the sample row: (SeaTunnel type name, result array of one row).
pub(crate) fn raw(expr: &str) -> (String, ArrayRef) {
    let (t, b) = table(SAMPLE, sample_row());
    run_on(expr, &t, b).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

/// Evaluates `expr` on the sample row: (SeaTunnel type name, value as JSON).
pub(crate) fn eval(expr: &str) -> (String, Value) {
    let (t, a) = raw(expr);
    (t, array_value_to_json(a.as_ref(), 0, RowStyle::Positional))
}

fn same(got: &Value, want: &Value) -> bool {
    match (got.as_f64(), want.as_f64()) {
        // Numbers compare by value (a double 5.0 prints as 5), exactly.
        (Some(a), Some(b)) => a == b,
        _ => got == want,
    }
}

/// Asserts that `expr` on the sample row has SeaTunnel type `ty` and value `v`.
#[track_caller]
pub(crate) fn check(expr: &str, ty: &str, v: Value) {
    let (t, got) = eval(expr);
    assert!(
        t == ty && same(&got, &v),
        "{expr}: got {t} {got}, expected {ty} {v}"
    );
}

/// Evaluates `expr` over a one-column table `x` of type `ty` holding `values`, so the
/// function runs on a real (non-constant) array with nulls mixed in.
#[track_caller]
pub(crate) fn check_col(expr: &str, ty: &str, values: Value, out_ty: &str, want: Value) {
    let rows: Vec<Value> = values
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|v| json!([v]))
        .collect();
    let (t, b) = table(&[("x", ty)], Value::Array(rows));
    let (got_ty, a) = run_on(expr, &t, b).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let got: Vec<Value> = (0..a.len())
        .map(|i| array_value_to_json(a.as_ref(), i, RowStyle::Positional))
        .collect();
    let want = want.as_array().cloned().unwrap_or_default();
    let ok = got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| same(g, w));
    assert!(
        got_ty == out_ty && ok,
        "{expr} over {ty} {values}: got {got_ty} {got:?}, expected {out_ty} {want:?}"
    );
}

/// The error `expr` raises on the sample row, when it is planned or when it runs.
#[track_caller]
pub(crate) fn error(expr: &str) -> String {
    let (t, b) = table(SAMPLE, sample_row());
    match run_on(expr, &t, b) {
        Ok((ty, a)) => panic!(
            "{expr}: expected an error, got {ty} {}",
            array_value_to_json(a.as_ref(), 0, RowStyle::Positional)
        ),
        Err(e) => e,
    }
}

/// Asserts that `expr` fails with a message containing `needle`.
#[track_caller]
pub(crate) fn check_error(expr: &str, needle: &str) {
    let e = error(expr);
    assert!(e.contains(needle), "{expr}: error {e:?} lacks {needle:?}");
}

/// The value of a double result, NaN and infinities included.
pub(crate) fn f64_of(expr: &str) -> f64 {
    let (t, a) = raw(expr);
    assert_eq!(t, "double", "{expr}");
    let a = a
        .as_any()
        .downcast_ref::<arrow::array::Float64Array>()
        .expect("double column");
    assert!(!a.is_null(0), "{expr} is null");
    a.value(0)
}
