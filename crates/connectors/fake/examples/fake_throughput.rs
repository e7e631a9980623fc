//! Measures FakeSource's generation speed: `cargo run --release -p ferry-connector-fake
//! --example fake_throughput [ROWS]` reads ROWS (default 10 000 000) rows of a typical
//! schema through one reader and prints rows per second.

use std::time::Instant;

use ferry_api::{EnumeratorContext, JobContext, Options, ReadStatus, ReaderContext, SourceFactory};
use ferry_connector_fake::FakeSourceFactory;
use serde_json::json;

fn main() -> ferry_api::Result<()> {
    let rows: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let job = JobContext::default();
    let mut opts = Options::from_json(
        "FakeSource",
        json!({"row.num": rows, "schema": {"fields": {
            "id": "bigint", "name": "string", "age": "int", "score": "double", "ok": "boolean",
            "ts": "timestamp", "amount": "decimal(10, 2)"
        }}}),
    );
    let src = FakeSourceFactory.create(&mut opts, &job)?;
    let mut e = src.create_enumerator(
        &EnumeratorContext {
            parallelism: 1,
            job: job.clone(),
        },
        None,
    )?;
    let splits = e.discover()?.into_iter().map(|(_, s)| s).collect();
    let mut r = src.create_reader(&ReaderContext {
        subtask: 0,
        parallelism: 1,
        job,
    })?;
    r.add_splits(splits)?;
    r.no_more_splits();
    let start = Instant::now();
    let mut n = 0u64;
    loop {
        match r.poll_next()? {
            ReadStatus::Batch(b) => n += b.num_rows() as u64,
            ReadStatus::Idle(d) => std::thread::sleep(d),
            ReadStatus::Finished => break,
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{n} rows in {secs:.2} s: {:.1} M rows/s",
        n as f64 / secs / 1e6
    );
    Ok(())
}
