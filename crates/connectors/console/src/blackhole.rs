//! The `Blackhole` sink: counts rows and drops them, for benchmarks. SeaTunnel has no
//! such sink; the name and its lack of options follow Flink's `blackhole` connector.
//!
//! Counts come out three ways: each writer's `prepare_commit` info
//! (`{"subtask": 0, "rows": 100, "bytes": 4096, "tables": {"fake": 100}}`, counting since the
//! previous checkpoint), the committer's log line when a bounded job ends, and
//! [`total_rows`] for benchmarks that run the engine in-process.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ferry_api::{
    ChangeBatch, FerryError, JobContext, OptionSpec, Options, Result, Sink, SinkCommitter,
    SinkDelivery, SinkFactory, SinkWriter, TableSchema, WriterContext,
};
use serde_json::{json, Map, Value};

static TOTAL_ROWS: AtomicU64 = AtomicU64::new(0);

/// Rows every `Blackhole` writer in this process has dropped so far.
pub fn total_rows() -> u64 {
    TOTAL_ROWS.load(Ordering::Relaxed)
}

ferry_api::declare_options! {
    /// The `Blackhole` sink's options.
    struct BlackholeOptions => SPECS {
        /// Accepted for compatibility with SeaTunnel sinks; has no effect.
        _replica: i64 = "multi_table_sink_replica", default 1;
    }
}

/// Creates `Blackhole` sinks.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlackholeSinkFactory;

impl SinkFactory for BlackholeSinkFactory {
    fn name(&self) -> &'static str {
        "Blackhole"
    }

    fn description(&self) -> &'static str {
        "Counts rows and drops them (for benchmarks)"
    }

    fn options(&self) -> &'static [OptionSpec] {
        SPECS
    }

    fn create(
        &self,
        options: &mut Options,
        _input: &[TableSchema],
        _job: &JobContext,
    ) -> Result<Arc<dyn Sink>> {
        BlackholeOptions::read(options)?;
        options.finish(SPECS)?;
        Ok(Arc::new(BlackholeSink))
    }
}

/// A configured `Blackhole` sink.
#[derive(Debug)]
pub struct BlackholeSink;

impl Sink for BlackholeSink {
    fn delivery(&self) -> SinkDelivery {
        // Writing nothing is trivially idempotent.
        SinkDelivery::ExactlyOnce
    }

    fn create_writer(
        &self,
        ctx: &WriterContext,
        _restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(BlackholeWriter {
            subtask: ctx.subtask,
            rows: 0,
            bytes: 0,
            tables: BTreeMap::new(),
        }))
    }

    fn create_committer(&self) -> Result<Option<Box<dyn SinkCommitter>>> {
        Ok(Some(Box::new(BlackholeCommitter::default())))
    }
}

/// Counts what it is given since the last checkpoint.
#[derive(Debug)]
pub struct BlackholeWriter {
    subtask: usize,
    rows: u64,
    bytes: u64,
    tables: BTreeMap<Arc<str>, u64>,
}

impl SinkWriter for BlackholeWriter {
    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        let n = batch.num_rows() as u64;
        self.rows += n;
        self.bytes += batch.data.get_array_memory_size() as u64;
        *self.tables.entry(batch.table.clone()).or_insert(0) += n;
        TOTAL_ROWS.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    fn prepare_commit(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        let tables: Map<String, Value> = std::mem::take(&mut self.tables)
            .into_iter()
            .map(|(t, n)| (t.to_string(), json!(n)))
            .collect();
        let info = json!({ "subtask": self.subtask, "rows": self.rows, "bytes": self.bytes, "tables": tables });
        self.rows = 0;
        self.bytes = 0;
        Ok(Some(info))
    }
}

/// Adds up the writers' counts; logs the totals when a bounded job ends.
#[derive(Debug, Default)]
pub struct BlackholeCommitter {
    committed: std::collections::BTreeSet<u64>,
    rows: u64,
    bytes: u64,
    tables: BTreeMap<String, u64>,
}

impl BlackholeCommitter {
    /// Rows counted over all committed checkpoints.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Rows per table over all committed checkpoints.
    pub fn tables(&self) -> &BTreeMap<String, u64> {
        &self.tables
    }
}

impl SinkCommitter for BlackholeCommitter {
    fn commit(&mut self, checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
        // Idempotent: a checkpoint committed again after a restart is not counted twice.
        if !self.committed.insert(checkpoint_id) {
            return Ok(());
        }
        for info in &infos {
            let count = |key: &str| info.get(key).and_then(Value::as_u64);
            let (Some(rows), Some(bytes)) = (count("rows"), count("bytes")) else {
                return Err(FerryError::internal(format!(
                    "Blackhole: malformed commit info {info}"
                )));
            };
            self.rows += rows;
            self.bytes += bytes;
            if let Some(Value::Object(tables)) = info.get("tables") {
                for (t, n) in tables {
                    *self.tables.entry(t.clone()).or_insert(0) += n.as_u64().unwrap_or(0);
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        tracing::info!(
            "Blackhole: dropped {} rows ({} bytes in memory), per table: {:?}",
            self.rows,
            self.bytes,
            self.tables
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};

    fn batch(table: &str, n: i32) -> ChangeBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, true)]));
        let data = RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from_iter_values(0..n))])
            .unwrap();
        ChangeBatch::inserts(table.into(), data)
    }

    #[test]
    fn counts_rows_per_table_and_commits_idempotently() {
        let mut o = Options::from_json("Blackhole", json!({}));
        let sink = BlackholeSinkFactory
            .create(&mut o, &[], &JobContext::default())
            .unwrap();
        let ctx = |subtask| WriterContext {
            subtask,
            parallelism: 2,
            job: JobContext::default(),
            attempt: "a".into(),
        };
        let mut w0 = sink.create_writer(&ctx(0), None).unwrap();
        let mut w1 = sink.create_writer(&ctx(1), None).unwrap();
        let before = total_rows();
        w0.write(&batch("a", 3)).unwrap();
        w0.write(&batch("b", 2)).unwrap();
        w1.write(&batch("a", 4)).unwrap();
        assert!(total_rows() >= before + 9);
        let i0 = w0.prepare_commit(1).unwrap().unwrap();
        assert_eq!(i0["rows"], json!(5));
        assert_eq!(i0["tables"], json!({"a": 3, "b": 2}));
        assert_eq!(i0["subtask"], json!(0));
        let i1 = w1.prepare_commit(1).unwrap().unwrap();
        // Counts restart after each checkpoint.
        assert_eq!(w1.prepare_commit(2).unwrap().unwrap()["rows"], json!(0));

        let mut c = BlackholeCommitter::default();
        c.commit(1, vec![i0.clone(), i1.clone()]).unwrap();
        c.commit(1, vec![i0, i1]).unwrap();
        assert_eq!(c.rows(), 9);
        assert_eq!(c.tables().get("a"), Some(&7));
        c.finish().unwrap();
        assert!(c.commit(2, vec![json!({"x": 1})]).is_err());
    }

    #[test]
    fn rejects_unknown_options() {
        let mut o = Options::from_json("Blackhole", json!({"rows": 1}));
        let e = BlackholeSinkFactory
            .create(&mut o, &[], &JobContext::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("option 'rows': unknown option"), "{e}");
    }
}
