//! Throughput check: CSV (id, user_id, event_type, amount, ts, note) → Parquet through
//! the LocalFile source and sink, single-threaded. `cargo run --release --example
//! csv_to_parquet -p ferry-connector-file [rows]`.

use std::io::Write;
use std::time::Instant;

use ferry_api::{
    EnumeratorContext, JobContext, Options, ReadStatus, ReaderContext, SinkFactory, SourceFactory,
    WriterContext,
};
use ferry_connector_file::{LocalFileSinkFactory, LocalFileSourceFactory};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rows: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    let dir = std::env::temp_dir().join(format!("ferry-bench-{}", std::process::id()));
    let input = dir.join("in");
    std::fs::create_dir_all(&input)?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(input.join("events.csv"))?);
    let kinds = ["click", "view", "purchase", "signup"];
    for i in 0..rows {
        writeln!(
            f,
            "{i},{},{},{}.{:02},2024-01-{:02} {:02}:{:02}:{:02},note number {}",
            i % 100_000,
            kinds[i % 4],
            i % 1000,
            i % 100,
            1 + i % 28,
            i % 24,
            i % 60,
            (i / 60) % 60,
            i % 977
        )?;
    }
    f.flush()?;
    drop(f);
    let job = JobContext::default();
    let fields = json!({"id": "bigint", "user_id": "bigint", "event_type": "string", "amount": "double", "ts": "timestamp", "note": "string"});
    let mut so = Options::from_json(
        "LocalFile",
        json!({"path": input, "file_format_type": "csv", "schema": {"fields": fields}}),
    );
    let source = LocalFileSourceFactory.create(&mut so, &job)?;
    let tables = source.tables();
    let mut sk = Options::from_json(
        "LocalFile",
        json!({"path": dir.join("out"), "file_format_type": "parquet", "compress_codec": "snappy"}),
    );
    let sink = LocalFileSinkFactory.create(&mut sk, &tables, &job)?;

    let start = Instant::now();
    let mut en = source.create_enumerator(
        &EnumeratorContext {
            parallelism: 1,
            job: job.clone(),
        },
        None,
    )?;
    let mut reader = source.create_reader(&ReaderContext {
        subtask: 0,
        parallelism: 1,
        job: job.clone(),
    })?;
    reader.add_splits(en.discover()?.into_iter().map(|(_, s)| s).collect())?;
    reader.no_more_splits();
    let mut writer = sink.create_writer(
        &WriterContext {
            subtask: 0,
            parallelism: 1,
            job: job.clone(),
            attempt: "bench".into(),
        },
        None,
    )?;
    let mut n = 0;
    let (mut read_t, mut write_t) = (0.0, 0.0);
    loop {
        let t = Instant::now();
        let ReadStatus::Batch(b) = reader.poll_next()? else {
            break;
        };
        read_t += t.elapsed().as_secs_f64();
        n += b.num_rows();
        let t = Instant::now();
        writer.write(&b)?;
        write_t += t.elapsed().as_secs_f64();
    }
    println!("reading {read_t:.2} s, writing {write_t:.2} s");
    let info = writer.prepare_commit(1)?;
    if let (Some(mut c), Some(i)) = (sink.create_committer()?, info) {
        c.commit(1, vec![i])?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{n} rows in {secs:.2} s: {:.2} M rows/s",
        n as f64 / secs / 1e6
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
