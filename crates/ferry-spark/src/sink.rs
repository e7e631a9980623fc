//! Ferry sinks and transforms inside Spark.
//!
//! A Spark write task opens a Ferry writer ([`PartitionWriter`]), writes the task's
//! batches, prepares the commit for the (micro-)batch and hands the prepared commit back
//! in Spark's commit message. The driver-side commit ([`commit`]) runs the sink's
//! committer once per (query, batch): it keeps a record of every batch it published under
//! the checkpoint location, `published/<sink>/<query>-<batch>`, and skips a batch already
//! recorded, so a batch Spark commits again after a restart is not published twice.

use std::path::Path;

use arrow::array::RecordBatch;
use ferry_api::{ChangeBatch, FerryError, Result, SinkWriter, WriterContext};
use ferry_plan::ChainedTransform;
use serde_json::Value;

use crate::convert::StreamCodec;
use crate::job::SparkJob;
use crate::source::PartitionReader;

/// One Spark write task's Ferry writer.
pub struct PartitionWriter {
    writer: Box<dyn SinkWriter>,
    /// How the sink's input looks in Spark (the union of its input streams' tables).
    codec: StreamCodec,
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
        let codec = StreamCodec::new(job.sink_input(sink)?)?;
        let ctx = WriterContext {
            subtask,
            parallelism: parallelism.max(1),
            job: job.plan.job.clone(),
            attempt: attempt.to_string(),
        };
        let writer = node.sink.create_writer(&ctx, None)?;
        Ok(PartitionWriter {
            writer,
            codec,
            rows: 0,
        })
    }

    /// Writes a batch from Spark (each table's rows stamped with its name).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        for b in self.codec.from_spark(batch)? {
            self.rows += b.num_rows() as u64;
            self.writer.write(&b)?;
        }
        Ok(())
    }

    /// Writes a batch in Ferry's types (a fused chain's output, which never went
    /// through Spark).
    pub fn write_change(&mut self, batch: &ChangeBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if !self.writer.keeps_unchanged() {
            batch.refuse_unchanged("the sink")?;
        }
        self.rows += batch.num_rows() as u64;
        self.writer.write(batch)
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

/// Runs a whole [`crate::job::Chain`] in one task: reads `reader` (the source with the
/// chain's transforms) to its end, writes everything through `writer` and prepares the
/// commit of checkpoint `checkpoint_id`. Returns the prepared commit and the rows written;
/// on an error, what the writer staged is discarded.
pub fn run_chain(
    reader: &mut PartitionReader,
    writer: &mut PartitionWriter,
    checkpoint_id: u64,
) -> Result<Option<Value>> {
    let mut run = || -> Result<Option<Value>> {
        while let Some(b) = reader.next_change()? {
            writer.write_change(&b)?;
        }
        writer.prepare(checkpoint_id)
    };
    run().inspect_err(|_| {
        let _ = writer.abort();
    })
}

/// Publishes the prepared commits `infos` of checkpoint `checkpoint_id` through sink
/// `sink`'s committer, once: when `record` is given and exists, the batch was published
/// before, and the new `infos` (a replay's) are discarded (returns `false`).
///
/// With a `record`, the infos are first stored beside it (`<record>.pending`), so that a
/// crash in the middle of publishing is finished by [`recover`] with the same infos
/// before Spark replays the batch. With `finish`, the committer's end-of-job checks run
/// too (batch jobs).
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
            abort(job, sink, checkpoint_id, infos)?;
            return Ok(false);
        }
        let pending = PendingCommit {
            checkpoint: checkpoint_id,
            infos: infos.clone(),
        };
        write_file(
            &pending_path(r),
            &serde_json::to_vec(&pending).map_err(FerryError::internal)?,
        )?;
    }
    publish(job, sink, checkpoint_id, infos, finish)?;
    if let Some(r) = record {
        write_file(r, checkpoint_id.to_string().as_bytes())?;
        let _ = std::fs::remove_file(pending_path(r));
    }
    Ok(true)
}

/// Finishes the commits that a crash interrupted (a `.pending` file without its record)
/// under `dir` (`published/<sink>/` of a checkpoint location), with the infos they were
/// started with; returns how many. Run it before the query starts: writers of the
/// replayed batch may clean up staged output the interrupted commit still needs.
pub fn recover(job: &SparkJob, sink: usize, dir: &Path) -> Result<usize> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(0);
    };
    let mut done = 0;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(record_name) = name.strip_suffix(PENDING) else {
            continue;
        };
        let record = dir.join(record_name);
        if !record.exists() {
            let p: PendingCommit = ferry_checkpoint::read_checked(&e.path())?;
            publish(job, sink, p.checkpoint, p.infos, false)?;
            write_file(&record, p.checkpoint.to_string().as_bytes())?;
            done += 1;
        }
        let _ = std::fs::remove_file(e.path());
    }
    Ok(done)
}

const PENDING: &str = ".pending";

/// Prepared commits being published.
#[derive(serde::Serialize, serde::Deserialize)]
struct PendingCommit {
    checkpoint: u64,
    infos: Vec<Value>,
}

fn pending_path(record: &Path) -> std::path::PathBuf {
    let mut name = record
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(PENDING);
    record.with_file_name(name)
}

fn write_file(path: &Path, body: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| FerryError::io("spark", dir.display(), e))?;
    }
    ferry_checkpoint::write_atomic(path, body)
}

fn publish(
    job: &SparkJob,
    sink: usize,
    checkpoint_id: u64,
    infos: Vec<Value>,
    finish: bool,
) -> Result<()> {
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
    Ok(())
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
    /// The instance, run as the embedded engine and fused chains run it.
    transform: ChainedTransform,
    /// Its input: the union of its input streams' tables.
    input: StreamCodec,
    output: StreamCodec,
}

impl TransformRunner {
    /// An instance of transform `index`.
    pub fn new(job: &SparkJob, index: usize) -> Result<Self> {
        let node = job
            .plan
            .transforms
            .get(index)
            .ok_or_else(|| FerryError::internal(format!("no transform {index}")))?;
        Ok(TransformRunner {
            transform: ChainedTransform::new(node)?,
            input: StreamCodec::new(&job.transform_input(index)?)?,
            output: StreamCodec::new(&node.tables)?,
        })
    }

    /// The transformed batch in Spark's types, or `None` when no row remains.
    pub fn apply(&mut self, batch: &RecordBatch) -> Result<Option<RecordBatch>> {
        let mut out = Vec::new();
        for b in self.input.from_spark(batch)? {
            if let Some(t) = self.transform.apply(b)? {
                out.push(self.output.to_spark(&t)?);
            }
        }
        match out.len() {
            0 => Ok(None),
            1 => Ok(out.pop()),
            _ => Ok(Some(arrow::compute::concat_batches(
                self.output.spark_schema(),
                &out,
            )?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::KIND_COLUMN;
    use crate::job::tests::spec;
    use arrow::array::{Array, Int64Array, Int8Array};
    use std::sync::Arc;

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
        // A replay of the batch prepares again; its output is discarded.
        let mut w = PartitionWriter::open(&job, 0, 0, 1, "q-0-0-1").unwrap();
        w.write(&ids(3)).unwrap();
        let again = w.prepare(1).unwrap().unwrap();
        assert!(
            !commit(&job, 0, 1, vec![again], Some(&record), false).unwrap(),
            "a recorded batch is skipped"
        );
        assert_eq!(visible(&out), 3);
        assert!(!dir.path().join("published/0/q-0.pending").exists());
    }

    #[test]
    fn a_commit_interrupted_by_a_crash_is_finished_with_its_own_infos() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let job = job(&out);
        let mut w = PartitionWriter::open(&job, 0, 0, 1, "q-4-0-0").unwrap();
        w.write(&ids(5)).unwrap();
        let info = w.prepare(5).unwrap().unwrap();
        // The crash: infos stored, nothing published, no record.
        let record = dir.path().join("published/0/q-4");
        let pending = PendingCommit {
            checkpoint: 5,
            infos: vec![info],
        };
        write_file(
            &pending_path(&record),
            &serde_json::to_vec(&pending).unwrap(),
        )
        .unwrap();
        assert_eq!(
            recover(&job, 0, &dir.path().join("published/0")).unwrap(),
            1
        );
        assert_eq!(visible(&out), 5);
        assert!(record.exists());
        assert_eq!(
            recover(&job, 0, &dir.path().join("published/0")).unwrap(),
            0
        );
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

    /// Source 0's only reader with `transforms` fused, and sink 0's only writer.
    fn fused(job: &SparkJob, transforms: &[usize]) -> (PartitionReader, PartitionWriter) {
        let splits = crate::source::assign_all(job, 0).unwrap();
        let reader = PartitionReader::batch(job, 0, 0, splits[0].clone())
            .unwrap()
            .with_transforms(job, transforms)
            .unwrap();
        let writer = PartitionWriter::open(job, 0, 0, 1, "fused-0").unwrap();
        (reader, writer)
    }

    #[test]
    fn a_fused_chain_reads_transforms_and_writes_in_one_task() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let job = job(&out);
        let chain = &job.chains()[0];
        assert_eq!(
            (chain.transforms.as_slice(), chain.sink),
            (&[0][..], Some(0))
        );
        let (mut reader, mut writer) = fused(&job, &chain.transforms);
        let info = run_chain(&mut reader, &mut writer, 1).unwrap().unwrap();
        assert_eq!((reader.rows(), writer.rows()), (4, 4));
        assert_eq!(visible(&out), 0, "nothing is visible before the commit");
        assert!(commit(&job, 0, 1, vec![info], None, true).unwrap());
        assert_eq!(visible(&out), 4);
        // What the sink wrote went through the Filter: only `id`.
        let line = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .find(|e| !e.file_name().to_string_lossy().starts_with(['.', '_']))
            .map(|e| std::fs::read_to_string(e.path()).unwrap())
            .unwrap();
        let first: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        assert_eq!(first.as_object().unwrap().len(), 1, "{first}");
    }

    #[test]
    fn fused_transforms_see_the_tables_the_embedded_engine_gives_them() {
        // Replace accepts only batches of its input table: each step's output must be
        // renamed to its stream as the embedded engine does.
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let text = format!(
            r#"
            env {{ job.mode = BATCH }}
            source {{ FakeSource {{ plugin_output = fake, row.num = 6, schema = {{ fields {{ id = bigint, name = string }} }} }} }}
            transform {{
              Sql {{ plugin_input = fake, plugin_output = q, query = "select id, name from fake where id % 2 = 0" }}
              Replace {{ plugin_input = q, plugin_output = r, replace_field = name, pattern = "a", replacement = "A" }}
            }}
            sink {{ LocalFile {{ plugin_input = r, path = "{}", file_format_type = json }} }}
            "#,
            out.display()
        );
        let job = SparkJob::build(spec(&text)).unwrap();
        let chain = &job.chains()[0];
        assert_eq!(chain.transforms, vec![0, 1]);
        let (mut reader, mut writer) = fused(&job, &chain.transforms);
        let info = run_chain(&mut reader, &mut writer, 1).unwrap();
        assert!(commit(&job, 0, 1, info.into_iter().collect(), None, true).unwrap());
        assert_eq!(reader.rows(), 6);
        assert_eq!(visible(&out), writer.rows() as usize);
    }

    #[test]
    fn a_reader_with_fused_transforms_returns_their_output_in_sparks_types() {
        let dir = tempfile::tempdir().unwrap();
        let job = job(dir.path());
        let splits = crate::source::assign_all(&job, 0).unwrap();
        let mut reader = PartitionReader::batch(&job, 0, 0, splits[0].clone())
            .unwrap()
            .with_transforms(&job, &[0])
            .unwrap();
        let b = reader.next_batch().unwrap().unwrap();
        let names: Vec<_> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, vec!["id".to_string(), KIND_COLUMN.to_string()]);
    }

    #[test]
    fn a_failing_chain_reports_the_sinks_error() {
        // The Assert sink's writer fails on the first row over its MAX rule.
        let text = r#"
            env { job.mode = BATCH }
            source { FakeSource { plugin_output = fake, row.num = 4, schema = { fields { id = bigint } } } }
            sink { Assert { plugin_input = fake, rules { field_rules = [{ field_name = id, field_type = bigint, field_value = [{ rule_type = MAX, rule_value = -1 }] }] } } }
        "#;
        let job = SparkJob::build(spec(text)).unwrap();
        let splits = crate::source::assign_all(&job, 0).unwrap();
        let mut reader = PartitionReader::batch(&job, 0, 0, splits[0].clone()).unwrap();
        let mut writer = PartitionWriter::open(&job, 0, 0, 1, "fused-0").unwrap();
        let e = run_chain(&mut reader, &mut writer, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("row 1 of table"), "{e}");
    }

    #[test]
    fn a_union_of_two_streams_reaches_transforms_and_sinks_table_by_table() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let text = format!(
            r#"
            env {{ job.mode = BATCH }}
            source {{
              FakeSource {{ plugin_output = a, row.num = 2, schema = {{ fields {{ id = bigint }} }} }}
              FakeSource {{ plugin_output = b, row.num = 3, schema = {{ fields {{ id = bigint }} }} }}
            }}
            transform {{ TableMerge {{ plugin_input = [a, b], plugin_output = ab, table = "ab" }} }}
            sink {{ LocalFile {{ plugin_input = [a, b], path = "{}/${{table_name}}", file_format_type = json }} }}
            "#,
            out.display()
        );
        let job = SparkJob::build(spec(&text)).unwrap();
        let codec = StreamCodec::new(job.sink_input(0).unwrap()).unwrap();
        // A batch of the union as Spark gives it: rows of `b`, then of `a`.
        let rows = |table: &str, n: i64| {
            let t = job
                .sink_input(0)
                .unwrap()
                .iter()
                .find(|t| &*t.name == table)
                .unwrap();
            let data = RecordBatch::try_new(
                t.schema.clone(),
                vec![Arc::new(Int64Array::from_iter_values(0..n))],
            )
            .unwrap();
            codec
                .to_spark(&ChangeBatch::inserts(t.name.clone(), data))
                .unwrap()
        };
        let union =
            arrow::compute::concat_batches(codec.spark_schema(), &[rows("b", 3), rows("a", 2)])
                .unwrap();
        let mut merge = TransformRunner::new(&job, 0).unwrap();
        let merged = merge.apply(&union).unwrap().unwrap();
        assert_eq!(merged.num_rows(), 5);
        assert_eq!(merged.schema().field(0).name(), "id");
        let mut w = PartitionWriter::open(&job, 0, 0, 1, "q-0-0-0").unwrap();
        w.write(&union).unwrap();
        let info = w.prepare(1).unwrap();
        assert!(commit(&job, 0, 1, info.into_iter().collect(), None, true).unwrap());
        assert_eq!((visible(&out.join("a")), visible(&out.join("b"))), (2, 3));
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
