//! Throughput of the Sql transform alone: a projection with three SeaTunnel functions and
//! a filter over 1 M in-memory rows (batches of 8192), on one thread.
//!
//! `CARGO_TARGET_DIR=/work/target-release cargo run --release -p ferry-sql --example sql_throughput`

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Int32Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use ferry_api::{ChangeBatch, JobContext, Options, TableSchema, TransformFactory};
use ferry_sql::SqlTransformFactory;

const ROWS: usize = 1_000_000;
const BATCH: usize = 8192;
const QUERY: &str = "select id, upper(name) as name, concat(name, '_', id) as tag, \
     formatdatetime(ts, 'yyyy-MM-dd HH:mm') as day from t where age > 20";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("age", DataType::Int32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
    ]));
    let input = TableSchema::new("t", schema.clone());
    let mut batches = Vec::new();
    let mut start = 0;
    while start < ROWS {
        let n = BATCH.min(ROWS - start);
        let ids: Vec<i32> = (start..start + n).map(|i| i as i32).collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(ids.clone())),
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|i| format!("name_{}", i % 1000)),
            )),
            Arc::new(Int32Array::from_iter_values(ids.iter().map(|i| i % 60))),
            Arc::new(TimestampMicrosecondArray::from_iter_values(
                ids.iter()
                    .map(|i| 1_672_502_400_000_000 + *i as i64 * 1_000_000),
            )),
        ];
        batches.push(RecordBatch::try_new(schema.clone(), cols)?);
        start += n;
    }
    let mut o = Options::from_json("Sql", serde_json::json!({ "query": QUERY }));
    let t = SqlTransformFactory.create(&mut o, &[input], &JobContext::default())?;
    let mut best = f64::MAX;
    let mut out_rows = 0;
    for _ in 0..5 {
        let mut inst = t.create_instance()?;
        let began = Instant::now();
        out_rows = 0;
        for b in &batches {
            if let Some(out) = inst.transform(ChangeBatch::inserts("t".into(), b.clone()))? {
                out_rows += out.num_rows();
            }
        }
        best = best.min(began.elapsed().as_secs_f64());
    }
    println!(
        "{ROWS} rows in, {out_rows} out, best of 5: {:.3} s = {:.2} M rows/s\n  {QUERY}",
        best,
        ROWS as f64 / best / 1e6
    );
    Ok(())
}
