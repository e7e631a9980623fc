//! Ferry sinks and transforms inside Spark.
//!
//! A Spark write task opens a Ferry writer ([`PartitionWriter`]), writes the task's
//! batches, prepares the commit for the (micro-)batch and hands the prepared commit back
//! in Spark's commit message. The driver-side commit ([`commit`]) runs the sink's
//! committer once per (query, batch): it keeps a record of every batch it published under
//! the checkpoint location, `published/<sink>/<query>-<batch>`, and skips a batch already
//! recorded, so a batch Spark commits again after a restart is not published twice.

use std::path::Path;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use ferry_api::{FerryError, Result, SinkWriter, TransformInstance, WriterContext};
use serde_json::Value;

use crate::convert::{from_spark, spark_schema, to_spark};
use crate::job::SparkJob;

/// One Spark write task's Ferry writer.
pub struct PartitionWriter {
    writer: Box<dyn SinkWriter>,
    table: Arc<str>,
    expected: SchemaRef,
    rows: u64,
}

impl PartitionWriter {
    /// A fresh writer for sink `sink`, subtask `subtask` of `parallelism`; `attempt` names
    /// this task attempt so that staged output of attempts never collides.
    pub fn open(
        job: &SparkJob,
        sink: usize,
        subtask: usize,
        parallelism: usize,
        attempt: &str,
    ) -> Result<Self> {
        let node = job
            .plan
            .sinks
            .get(sink)
            .ok_or_else(|| FerryError::internal(format!("no sink {sink}")))?;
        let input = job.sink_input(sink)?;
        let ctx = WriterContext {
            subtask,
            parallelism: parallelism.max(1),
            job: job.plan.job.clone(),
            attempt: attempt.to_string(),
        };
        let writer = node.sink.create_writer(&ctx, None)?;
        Ok(PartitionWriter {
            writer,
            table: input.name.clone(),
            expected: input.schema.clone(),
            rows: 0,
        })
    }

    /// Writes a batch from Spark.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let b = from_spark(batch, self.table.clone(), &self.expected)?;
        self.rows += b.num_rows() as u64;
        self.writer.write(&b)
    }

    /// Rows written.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Prepares the commit of checkpoint `checkpoint_id` and closes the writer.
    pub fn prepare(&mut self, checkpoint_id: u64) -> Result<Option<Value>> {
        let info = self.writer.prepare_commit(checkpoint_id)?;
        self.writer.close()?;
        Ok(info)
    }

    /// Discards what was written.
    pub fn abort(&mut self) -> Result<()> {
        self.writer.abort()
    }
}

/// Publishes the prepared commits `infos` of checkpoint `checkpoint_id` through sink
/// `sink`'s committer, once: when `record` is given and exists, the batch was published
/// before and nothing happens (returns `false`); after publishing, `record` is written.
/// With `finish`, the committer's end-of-job checks run too (batch jobs).
pub fn commit(
    job: &SparkJob,
    sink: usize,
    checkpoint_id: u64,
    infos: Vec<Value>,
    record: Option<&Path>,
    finish: bool,
) -> Result<bool> {
    if let Some(r) = record {
        if r.exists() {
            return Ok(false);
        }
    }
    let node = job
        .plan
        .sinks
        .get(sink)
        .ok_or_else(|| FerryError::internal(format!("no sink {sink}")))?;
    if let Some(mut c) = node.sink.create_committer()? {
        c.commit(checkpoint_id, infos)?;
        if finish {
            c.finish()?;
        }
    }
    if let Some(r) = record {
        if let Some(dir) = r.parent() {
            std::fs::create_dir_all(dir).map_err(|e| FerryError::io("spark", dir.display(), e))?;
        }
        ferry_checkpoint::write_atomic(r, checkpoint_id.to_string().as_bytes())?;
    }
    Ok(true)
}

/// Discards the prepared commits `infos` of checkpoint `checkpoint_id`.
pub fn abort(job: &SparkJob, sink: usize, checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
    let node = job
        .plan
        .sinks
        .get(sink)
        .ok_or_else(|| FerryError::internal(format!("no sink {sink}")))?;
    if let Some(mut c) = node.sink.create_committer()? {
        c.abort(checkpoint_id, infos)?;
    }
    Ok(())
}

/// Transform `index` of a job, applied to batches from Spark (`mapInArrow`).
pub struct TransformRunner {
    instance: Box<dyn TransformInstance>,
    table: Arc<str>,
    input: SchemaRef,
    output: SchemaRef,
}

impl TransformRunner {
    /// An instance of transform `index`.
    pub fn new(job: &SparkJob, index: usize) -> Result<Self> {
        let node = job
            .plan
            .transforms
            .get(index)
            .ok_or_else(|| FerryError::internal(format!("no transform {index}")))?;
        let input = job.transform_input(index)?;
        let out = match node.tables.as_slice() {
            [one] => one.clone(),
            _ => {
                return Err(FerryError::config(format!(
                    "transform {} emits {} tables; the Spark engine carries one table per stream",
                    node.plugin,
                    node.tables.len()
                )))
            }
        };
        Ok(TransformRunner {
            instance: node.transform.create_instance()?,
            table: input.name.clone(),
            input: input.schema.clone(),
            output: spark_schema(&out.schema),
        })
    }

    /// The transformed batch in Spark's types, or `None` when no row remains.
    pub fn apply(&mut self, batch: &RecordBatch) -> Result<Option<RecordBatch>> {
        let b = from_spark(batch, self.table.clone(), &self.input)?;
        match self.instance.transform(b)? {
            Some(out) if out.num_rows() > 0 => Ok(Some(to_spark(&out, &self.output)?)),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::KIND_COLUMN;
    use crate::job::tests::spec;
    use arrow::array::{Array, Int64Array, Int8Array};

    fn job(dir: &Path) -> SparkJob {
        let text = format!(
            r#"
            env {{ job.mode = BATCH }}
            source {{ FakeSource {{ plugin_output = fake, row.num = 4, schema = {{ fields {{ id = bigint, name = string }} }} }} }}
            transform {{ Filter {{ plugin_input = fake, plugin_output = ids, include_fields = [id] }} }}
            sink {{ LocalFile {{ plugin_input = ids, path = "{}", file_format_type = json }} }}
            "#,
            dir.display()
        );
        SparkJob::build(spec(&text)).unwrap()
    }

    fn ids(n: i64) -> RecordBatch {
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, true),
            arrow::datatypes::Field::new(KIND_COLUMN, arrow::datatypes::DataType::Int8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(Int8Array::from(vec![0; n as usize])),
            ],
        )
        .unwrap()
    }

    fn visible(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with(['.', '_']))
            .map(|e| std::fs::read_to_string(e.path()).unwrap().lines().count())
            .sum()
    }

    #[test]
    fn staged_output_is_published_once_per_batch_record() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let job = job(&out);
        let mut w = PartitionWriter::open(&job, 0, 0, 1, "q-0-0-0").unwrap();
        w.write(&ids(3)).unwrap();
        let info = w.prepare(1).unwrap().unwrap();
        assert_eq!(visible(&out), 0, "nothing is visible before the commit");
        let record = dir.path().join("published/0/q-0");
        assert!(commit(&job, 0, 1, vec![info.clone()], Some(&record), false).unwrap());
        assert_eq!(visible(&out), 3);
        assert!(
            !commit(&job, 0, 1, vec![info], Some(&record), false).unwrap(),
            "a recorded batch is skipped"
        );
        assert_eq!(visible(&out), 3);
    }

    #[test]
    fn aborted_output_never_appears() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let job = job(&out);
        let mut w = PartitionWriter::open(&job, 0, 0, 1, "q-0-0-1").unwrap();
        w.write(&ids(2)).unwrap();
        let info = w.prepare(1).unwrap().unwrap();
        abort(&job, 0, 1, vec![info]).unwrap();
        assert!(!out.exists() || visible(&out) == 0);
    }

    #[test]
    fn transforms_run_ferrys_own_code_on_spark_batches() {
        let dir = tempfile::tempdir().unwrap();
        let job = job(dir.path());
        let mut t = TransformRunner::new(&job, 0).unwrap();
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, true),
            arrow::datatypes::Field::new("name", arrow::datatypes::DataType::Utf8, true),
            arrow::datatypes::Field::new(KIND_COLUMN, arrow::datatypes::DataType::Int8, true),
        ]));
        let b = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![7])),
                Arc::new(arrow::array::StringArray::from(vec!["x"])),
                Arc::new(Int8Array::from(vec![0])),
            ],
        )
        .unwrap();
        let out = t.apply(&b).unwrap().unwrap();
        assert_eq!(out.num_columns(), 2);
        assert_eq!(out.column(0).len(), 1);
        assert_eq!(out.schema().field(1).name(), KIND_COLUMN);
    }
}
