//! Reads every Parquet file of a directory into memory, then times writing those batches
//! again (Snappy, row groups of 64 MiB, as the LocalFile sink writes them) with several
//! writer settings. It chose the sink's dictionary page limit
//! (bench/results/parquet-dictionary.md):
//!
//! ```text
//! cargo run --release -p ferry-connector-file --example parquet_writer_settings -- DIR
//! ```
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use std::time::Instant;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: parquet_writer_settings DIR_OF_PARQUET_FILES");
    let mut batches = Vec::new();
    let mut schema = None;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "parquet") {
            let f = std::fs::File::open(&p).unwrap();
            let r = ParquetRecordBatchReaderBuilder::try_new(f)
                .unwrap()
                .with_batch_size(8192)
                .build()
                .unwrap();
            for b in r {
                let b = b.unwrap();
                schema = Some(b.schema());
                batches.push(b);
            }
        }
    }
    let schema = schema.expect("no .parquet file in the directory");
    let out_path = std::env::temp_dir().join("parquet_writer_settings.parquet");
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let base = || WriterProperties::builder().set_compression(Compression::SNAPPY);
    let variants: Vec<(&str, WriterProperties)> = vec![
        ("parquet crate's defaults", base().build()),
        (
            "page statistics off (chunk)",
            base()
                .set_statistics_enabled(EnabledStatistics::Chunk)
                .build(),
        ),
        (
            "dictionary limit 256 KiB",
            base().set_dictionary_page_size_limit(256 << 10).build(),
        ),
        (
            "dictionary limit 128 KiB",
            base().set_dictionary_page_size_limit(128 << 10).build(),
        ),
        (
            "dictionary limit 64 KiB",
            base().set_dictionary_page_size_limit(64 << 10).build(),
        ),
        (
            "no dictionary",
            base().set_dictionary_enabled(false).build(),
        ),
        (
            "no compression (defaults)",
            WriterProperties::builder().build(),
        ),
    ];
    for (name, props) in variants {
        let t = Instant::now();
        let out = std::fs::File::create(&out_path).unwrap();
        let mut w = ArrowWriter::try_new(out, schema.clone(), Some(props)).unwrap();
        for b in &batches {
            w.write(b).unwrap();
            if w.in_progress_size() > 64 << 20 {
                w.flush().unwrap();
            }
        }
        w.close().unwrap();
        let size = std::fs::metadata(&out_path).unwrap().len();
        println!(
            "{name:30} {:6.2} s  {:5} MB  ({rows} rows)",
            t.elapsed().as_secs_f64(),
            size >> 20
        );
    }
    let _ = std::fs::remove_file(&out_path);
}
