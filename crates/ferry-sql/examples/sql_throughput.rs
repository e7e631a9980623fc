//! Throughput of the Sql transform alone, on one thread, over in-memory batches of 8192
//! rows (the batch size of FakeSource):
//!
//! - `names`: a projection with three SeaTunnel functions and a filter over 1 M rows of
//!   short names;
//! - `bench`: the query of the benchmark job `bench/jobs/fake_sql_blackhole.conf` (UPPER,
//!   ROUND, CONCAT and `WHERE amount > 10`) over 1 M rows shaped like that job's FakeSource
//!   rows (12 random letters per string, amounts uniform in 0..500).
//!
//! `CARGO_TARGET_DIR=/work/target-release cargo run --release -p ferry-sql --example sql_throughput [names|bench] [runs]`
//!
//! Without an argument both run; `runs` (default 5) is how often each is repeated (the
//! best run is reported). Running it under `perf record` profiles the transform alone.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use ferry_api::{ChangeBatch, JobContext, Options, TableSchema, TransformFactory};
use ferry_sql::SqlTransformFactory;
use rand::{Rng, SeedableRng};

const ROWS: usize = 1_000_000;
const BATCH: usize = 8192;
const NAMES_QUERY: &str = "select id, upper(name) as name, concat(name, '_', id) as tag, \
     formatdatetime(ts, 'yyyy-MM-dd HH:mm') as day from t where age > 20";
const BENCH_QUERY: &str = "select id, user_id, upper(event_type) as event_type, \
     round(amount * 1.1, 2) as amount, ts, concat(note, '-x') as note from events where amount > 10";

type Batches = (Arc<Schema>, Vec<RecordBatch>);

fn names_data() -> Result<Batches, Box<dyn std::error::Error>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("age", DataType::Int32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
    ]));
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
    Ok((schema, batches))
}

fn letters(rng: &mut impl Rng, n: usize) -> StringArray {
    const L: &[u8; 52] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    StringArray::from_iter_values((0..n).map(|_| {
        (0..12)
            .map(|_| L[rng.random_range(0..L.len())] as char)
            .collect::<String>()
    }))
}

fn bench_data() -> Result<Batches, Box<dyn std::error::Error>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("user_id", DataType::Int32, true),
        Field::new("event_type", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("note", DataType::Utf8, true),
    ]));
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut batches = Vec::new();
    let mut start = 0;
    while start < ROWS {
        let n = BATCH.min(ROWS - start);
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(
                (start..start + n).map(|i| i as i64),
            )),
            Arc::new(Int32Array::from_iter_values(
                (0..n).map(|_| rng.random_range(0..=999_999)),
            )),
            Arc::new(letters(&mut rng, n)),
            Arc::new(Float64Array::from_iter_values(
                (0..n).map(|_| rng.random_range(0.0..500.0)),
            )),
            Arc::new(TimestampMicrosecondArray::from_iter_values((0..n).map(
                |_| 1_672_502_400_000_000 + rng.random_range(0..86_400_000_000i64),
            ))),
            Arc::new(letters(&mut rng, n)),
        ];
        batches.push(RecordBatch::try_new(schema.clone(), cols)?);
        start += n;
    }
    Ok((schema, batches))
}

fn measure(
    table: &str,
    (schema, batches): Batches,
    query: &str,
    runs: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let input = TableSchema::new(table, schema);
    let mut o = Options::from_json("Sql", serde_json::json!({ "query": query }));
    let t = SqlTransformFactory.create(&mut o, &[input], &JobContext::default())?;
    let mut best = f64::MAX;
    let mut out_rows = 0;
    for _ in 0..runs {
        let mut inst = t.create_instance()?;
        let began = Instant::now();
        out_rows = 0;
        for b in &batches {
            if let Some(out) = inst.transform(ChangeBatch::inserts(table.into(), b.clone()))? {
                out_rows += out.num_rows();
            }
        }
        best = best.min(began.elapsed().as_secs_f64());
    }
    println!(
        "{ROWS} rows in, {out_rows} out, best of {runs}: {:.4} s = {:.2} M rows/s ({:.1} ns a row)\n  {query}",
        best,
        ROWS as f64 / best / 1e6,
        best / ROWS as f64 * 1e9,
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "all".into());
    let runs: usize = match args.next() {
        Some(r) => r.parse()?,
        None => 5,
    };
    if which == "all" || which == "names" {
        measure("t", names_data()?, NAMES_QUERY, runs)?;
    }
    if which == "all" || which == "bench" {
        measure("events", bench_data()?, BENCH_QUERY, runs)?;
    }
    Ok(())
}
