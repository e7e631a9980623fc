//! The Python module `ferry_spark._native`: a thin layer over the rest of this crate.
//! Batches cross as `pyarrow.RecordBatch` through the Arrow C data interface (no copy);
//! Ferry errors become `ferry_spark._native.FerryError` with Ferry's message.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, RecordBatch, StructArray};
use arrow::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde_json::Value;

use crate::job::{cached, JobSpec, SparkJob};
use crate::sink::{PartitionWriter, TransformRunner};
use crate::source::{
    assign_all, stream_partitions, PartitionReader, StreamOffset, StreamOffsets, StreamPartition,
};
use crate::state;

create_exception!(
    _native,
    FerryError,
    PyException,
    "An error reported by Ferry; the message says what to fix."
);

fn err(e: ferry_api::FerryError) -> PyErr {
    FerryError::new_err(e.to_string())
}

fn lock<T>(m: &Mutex<T>) -> PyResult<std::sync::MutexGuard<'_, T>> {
    m.lock().map_err(|_| {
        FerryError::new_err("internal error: a native object was poisoned by an earlier panic")
    })
}

/// Hands `batch` to pyarrow through the C data interface.
fn to_py<'py>(py: Python<'py>, batch: RecordBatch) -> PyResult<Bound<'py, PyAny>> {
    let data = StructArray::from(batch).into_data();
    let array = FFI_ArrowArray::new(&data);
    let schema = FFI_ArrowSchema::try_from(data.data_type()).map_err(|e| err(e.into()))?;
    let class = py.import("pyarrow")?.getattr("RecordBatch")?;
    // pyarrow moves both structures out (it clears their release callbacks), so dropping
    // them here afterwards frees nothing twice.
    class.call_method1(
        "_import_from_c",
        (
            std::ptr::addr_of!(array) as usize,
            std::ptr::addr_of!(schema) as usize,
        ),
    )
}

/// Takes a `pyarrow.RecordBatch` through the C data interface.
fn from_py(batch: &Bound<'_, PyAny>) -> PyResult<RecordBatch> {
    let mut array = FFI_ArrowArray::empty();
    let mut schema = FFI_ArrowSchema::empty();
    batch.call_method1(
        "_export_to_c",
        (
            std::ptr::addr_of_mut!(array) as usize,
            std::ptr::addr_of_mut!(schema) as usize,
        ),
    )?;
    // SAFETY: pyarrow just filled both structures with a valid exported record batch
    // (a struct array and its schema); `from_ffi` takes ownership of the array.
    let data = unsafe { from_ffi(array, &schema) }.map_err(|e| err(e.into()))?;
    if !matches!(data.data_type(), arrow::datatypes::DataType::Struct(_)) {
        return Err(FerryError::new_err(format!(
            "internal error: expected a record batch, got {}",
            data.data_type()
        )));
    }
    let s = StructArray::from(data);
    if s.null_count() > 0 {
        return Err(FerryError::new_err(
            "internal error: a record batch with null rows",
        ));
    }
    Ok(RecordBatch::from(s))
}

fn job(spec: &str) -> PyResult<Arc<SparkJob>> {
    cached(spec).map_err(err)
}

fn json_arg(text: &str, what: &str) -> PyResult<Value> {
    serde_json::from_str(text)
        .map_err(|e| FerryError::new_err(format!("internal error: malformed {what}: {e}")))
}

/// Reads the job file at `path` with user variables (`-i NAME=VALUE` as given, parsed by
/// the same code as the `ferry` binary's) and plans it. Returns the spec (JSON text every
/// worker gets) and the plan (JSON).
#[pyfunction]
#[pyo3(signature = (path, variables, parallelism=None, job_id=None))]
fn load_job(
    path: &str,
    variables: Vec<String>,
    parallelism: Option<usize>,
    job_id: Option<String>,
) -> PyResult<(String, String)> {
    let variables = ferry_plan::parse_vars(&variables).map_err(err)?;
    let spec = JobSpec::from_file(Path::new(path), &variables, parallelism, job_id).map_err(err)?;
    let text = spec.to_json();
    let j = job(&text)?;
    let plan = j.plan_json().map_err(err)?;
    Ok((text, plan.to_string()))
}

/// Batch mode: the splits of each reader subtask of source `source`, as JSON text.
#[pyfunction]
fn batch_splits(py: Python<'_>, spec: &str, source: usize) -> PyResult<Vec<String>> {
    let j = job(spec)?;
    let splits = py.detach(|| assign_all(&j, source)).map_err(err)?;
    splits
        .iter()
        .map(|s| serde_json::to_string(s).map_err(|e| FerryError::new_err(e.to_string())))
        .collect()
}

fn batch_reader(
    j: &SparkJob,
    source: usize,
    subtask: usize,
    splits: &str,
    transforms: &[usize],
) -> PyResult<PartitionReader> {
    let splits = serde_json::from_value(json_arg(splits, "splits")?)
        .map_err(|e| FerryError::new_err(e.to_string()))?;
    PartitionReader::batch(j, source, subtask, splits)
        .and_then(|r| r.with_transforms(j, transforms))
        .map_err(err)
}

/// Batch mode: runs a whole chain (see `ferry_spark::job::Chain`) in one task: reads
/// subtask `subtask`'s splits of source `source`, applies `transforms`, writes through
/// sink `sink` as writer `subtask` of `parallelism` and prepares the commit. Returns the
/// prepared commit (JSON text, or `None`) and the rows written; rows never leave Rust.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn run_chain(
    py: Python<'_>,
    spec: &str,
    source: usize,
    subtask: usize,
    splits: &str,
    transforms: Vec<usize>,
    sink: usize,
    parallelism: usize,
    attempt: &str,
) -> PyResult<(Option<String>, u64)> {
    let j = job(spec)?;
    let reader = batch_reader(&j, source, subtask, splits, &transforms)?;
    let writer = PartitionWriter::open(&j, sink, subtask, parallelism, attempt).map_err(err)?;
    chain_to_commit(py, reader, writer, 1)
}

/// Streaming: runs a whole chain for one micro-batch partition in one task: reads the
/// partition (a descriptor from `StreamSource.partitions`), applies `transforms`, writes
/// through sink `sink` as writer `subtask` of `parallelism` (the partition's subtask) and
/// prepares the commit of checkpoint `checkpoint_id`. Returns the prepared commit (JSON
/// text, or `None`) and the rows written.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn run_chain_stream(
    py: Python<'_>,
    spec: &str,
    partition: &str,
    transforms: Vec<usize>,
    sink: usize,
    parallelism: usize,
    attempt: &str,
    checkpoint_id: u64,
) -> PyResult<(Option<String>, u64)> {
    let j = job(spec)?;
    let p = stream_partition(partition)?;
    let subtask = p.subtask;
    let reader = stream_reader(&j, p, &transforms)?;
    let writer = PartitionWriter::open(&j, sink, subtask, parallelism, attempt).map_err(err)?;
    chain_to_commit(py, reader, writer, checkpoint_id)
}

/// Runs `reader` into `writer` without the GIL and prepares checkpoint `checkpoint_id`:
/// the prepared commit (JSON text, or `None`) and the rows written.
fn chain_to_commit(
    py: Python<'_>,
    mut reader: PartitionReader,
    mut writer: PartitionWriter,
    checkpoint_id: u64,
) -> PyResult<(Option<String>, u64)> {
    let info = py
        .detach(|| crate::sink::run_chain(&mut reader, &mut writer, checkpoint_id))
        .map_err(err)?;
    Ok((info.map(|v| v.to_string()), writer.rows()))
}

fn stream_partition(text: &str) -> PyResult<StreamPartition> {
    serde_json::from_value(json_arg(text, "partition")?)
        .map_err(|e| FerryError::new_err(e.to_string()))
}

fn stream_reader(
    j: &SparkJob,
    p: StreamPartition,
    transforms: &[usize],
) -> PyResult<PartitionReader> {
    PartitionReader::stream(j, p)
        .and_then(|r| r.with_transforms(j, transforms))
        .map_err(err)
}

/// Reads one Spark partition of a source: iterate it for `pyarrow.RecordBatch`es.
#[pyclass(module = "ferry_spark._native")]
struct SourcePartition {
    inner: Mutex<PartitionReader>,
}

#[pymethods]
impl SourcePartition {
    /// Batch mode: subtask `subtask`'s splits (JSON text from `batch_splits`), with the
    /// job's transforms `transforms` applied in order (a chain's).
    #[staticmethod]
    #[pyo3(signature = (spec, source, subtask, splits, transforms=Vec::new()))]
    fn batch(
        spec: &str,
        source: usize,
        subtask: usize,
        splits: &str,
        transforms: Vec<usize>,
    ) -> PyResult<Self> {
        let j = job(spec)?;
        let r = batch_reader(&j, source, subtask, splits, &transforms)?;
        Ok(SourcePartition {
            inner: Mutex::new(r),
        })
    }

    /// Streaming: a partition descriptor from `StreamSource.partitions`, with the job's
    /// transforms `transforms` applied in order.
    #[staticmethod]
    #[pyo3(signature = (spec, partition, transforms=Vec::new()))]
    fn stream(spec: &str, partition: &str, transforms: Vec<usize>) -> PyResult<Self> {
        let j = job(spec)?;
        let r = stream_reader(&j, stream_partition(partition)?, &transforms)?;
        Ok(SourcePartition {
            inner: Mutex::new(r),
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let next = py.detach(|| lock(&self.inner).and_then(|mut r| r.next_batch().map_err(err)))?;
        next.map(|b| to_py(py, b)).transpose()
    }

    /// Rows read so far.
    fn rows(&self) -> PyResult<u64> {
        Ok(lock(&self.inner)?.rows())
    }
}

/// The micro-batch offsets of a streaming source (driver side).
#[pyclass(module = "ferry_spark._native")]
struct StreamSource {
    spec: String,
    offsets: Mutex<StreamOffsets>,
}

#[pymethods]
impl StreamSource {
    #[new]
    fn new(spec: &str, source: usize, location: &str) -> PyResult<Self> {
        let j = job(spec)?;
        let offsets = StreamOffsets::new(j, source, PathBuf::from(location)).map_err(err)?;
        Ok(StreamSource {
            spec: spec.to_string(),
            offsets: Mutex::new(offsets),
        })
    }

    /// The offset before the first batch (canonical JSON).
    #[staticmethod]
    fn initial_offset(source: usize) -> PyResult<String> {
        StreamOffset::initial(source).to_canonical().map_err(err)
    }

    /// The end offset of the next micro-batch (canonical JSON).
    fn latest_offset(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| lock(&self.offsets).and_then(|mut p| p.latest_offset().map_err(err)))
    }

    /// The partition descriptors of the batch ending at `end` (JSON texts).
    #[staticmethod]
    fn partitions(
        end: &str,
        location: &str,
        budget_ms: Option<u64>,
        max_rows: u64,
    ) -> PyResult<Vec<String>> {
        let end = StreamOffset::parse(end).map_err(err)?;
        stream_partitions(&end, location, budget_ms, max_rows)
            .iter()
            .map(|p| serde_json::to_string(p).map_err(|e| FerryError::new_err(e.to_string())))
            .collect()
    }

    /// The job spec this source belongs to.
    fn spec(&self) -> String {
        self.spec.clone()
    }
}

/// Applies a Ferry transform to Spark batches (`mapInArrow`).
#[pyclass(module = "ferry_spark._native")]
struct Transform {
    inner: Mutex<TransformRunner>,
}

#[pymethods]
impl Transform {
    #[new]
    fn new(spec: &str, index: usize) -> PyResult<Self> {
        let j = job(spec)?;
        Ok(Transform {
            inner: Mutex::new(TransformRunner::new(&j, index).map_err(err)?),
        })
    }

    /// The transformed batch, or `None` when no row remains.
    fn apply<'py>(
        &self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let b = from_py(batch)?;
        let out = py.detach(|| lock(&self.inner).and_then(|mut t| t.apply(&b).map_err(err)))?;
        out.map(|b| to_py(py, b)).transpose()
    }
}

/// A Ferry sink writer in one Spark write task.
#[pyclass(module = "ferry_spark._native")]
struct Writer {
    inner: Mutex<PartitionWriter>,
}

#[pymethods]
impl Writer {
    #[new]
    fn new(
        spec: &str,
        sink: usize,
        subtask: usize,
        parallelism: usize,
        attempt: &str,
    ) -> PyResult<Self> {
        let j = job(spec)?;
        Ok(Writer {
            inner: Mutex::new(
                PartitionWriter::open(&j, sink, subtask, parallelism, attempt).map_err(err)?,
            ),
        })
    }

    /// Writes a `pyarrow.RecordBatch`.
    fn write(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<()> {
        let b = from_py(batch)?;
        py.detach(|| lock(&self.inner).and_then(|mut w| w.write(&b).map_err(err)))
    }

    /// Prepares the commit of checkpoint `checkpoint_id`: JSON text, or `None`.
    fn prepare(&self, py: Python<'_>, checkpoint_id: u64) -> PyResult<Option<String>> {
        let info = py
            .detach(|| lock(&self.inner).and_then(|mut w| w.prepare(checkpoint_id).map_err(err)))?;
        Ok(info.map(|v| v.to_string()))
    }

    /// Discards what was written.
    fn abort(&self) -> PyResult<()> {
        lock(&self.inner)?.abort().map_err(err)
    }

    /// Rows written.
    fn rows(&self) -> PyResult<u64> {
        Ok(lock(&self.inner)?.rows())
    }
}

fn infos(texts: Vec<String>) -> PyResult<Vec<Value>> {
    texts.iter().map(|t| json_arg(t, "commit info")).collect()
}

/// Publishes prepared commits once per `record` (see `ferry_spark::sink::commit`).
/// Returns whether anything was published.
#[pyfunction]
#[pyo3(signature = (spec, sink, checkpoint_id, infos_json, record=None, finish=false))]
fn commit(
    py: Python<'_>,
    spec: &str,
    sink: usize,
    checkpoint_id: u64,
    infos_json: Vec<String>,
    record: Option<String>,
    finish: bool,
) -> PyResult<bool> {
    let j = job(spec)?;
    let infos = infos(infos_json)?;
    py.detach(|| {
        crate::sink::commit(
            &j,
            sink,
            checkpoint_id,
            infos,
            record.as_deref().map(Path::new),
            finish,
        )
    })
    .map_err(err)
}

/// Finishes commits a crash interrupted under `dir` (`published/<sink>` of a checkpoint
/// location); returns how many.
#[pyfunction]
fn recover_commits(py: Python<'_>, spec: &str, sink: usize, dir: &str) -> PyResult<usize> {
    let j = job(spec)?;
    py.detach(|| crate::sink::recover(&j, sink, Path::new(dir)))
        .map_err(err)
}

/// Discards prepared commits.
#[pyfunction]
fn abort(spec: &str, sink: usize, checkpoint_id: u64, infos_json: Vec<String>) -> PyResult<()> {
    let j = job(spec)?;
    crate::sink::abort(&j, sink, checkpoint_id, infos(infos_json)?).map_err(err)
}

/// The lock of a job directory ([`ferry_checkpoint::JobLock`]), held by the driver for its
/// whole run; released by `release()`, or by the kernel when the driver's process ends.
#[pyclass(module = "ferry_spark._native")]
struct JobDirLock {
    lock: Mutex<Option<ferry_checkpoint::JobLock>>,
}

#[pymethods]
impl JobDirLock {
    /// Lets the lock go (the run is over).
    fn release(&self) -> PyResult<()> {
        lock(&self.lock)?.take();
        Ok(())
    }
}

/// Creates or reopens the directory of the job `spec` describes under `dir` (where Spark's
/// checkpoint locations live) and takes its lock; with `from_scratch`, sets the job's old
/// history aside first. Returns its path, the compatible changes of the job file since the
/// job last ran there, where the old history went (or `None`), and the lock, to hold while
/// the job runs. Fails naming the holder when another run of the job holds the directory.
#[pyfunction]
#[pyo3(signature = (dir, spec, from_scratch = false))]
fn open_job_dir(
    dir: &str,
    spec: &str,
    from_scratch: bool,
) -> PyResult<(String, Vec<String>, Option<String>, JobDirLock)> {
    let j = job(spec)?;
    let opened = state::open_job_dir(
        Path::new(dir),
        &j.plan.job.job_id,
        &j.plan.fingerprint,
        &j.plan.layout,
        from_scratch,
    )
    .map_err(err)?;
    let held = JobDirLock {
        lock: Mutex::new(Some(opened.lock)),
    };
    Ok((
        opened.root.display().to_string(),
        opened.changes,
        opened.discarded.map(|p| p.display().to_string()),
        held,
    ))
}

/// Prepares every sink's target before the query starts (`Sink::setup`: create or check
/// the table, apply save modes), on the driver. `job_dir` is the job's directory, or empty
/// for a job that cannot resume; a directory with a committed micro-batch means the job
/// resumes, so save modes are not applied again.
#[pyfunction]
fn setup_sinks(spec: &str, job_dir: &str) -> PyResult<()> {
    let j = job(spec)?;
    let resumed = !job_dir.is_empty() && state::last_committed(Path::new(job_dir)).is_some();
    ferry_plan::setup_sinks(&j.plan, resumed).map_err(err)
}

/// Writes the `state` file `ferry jobs` reads.
#[pyfunction]
fn set_state(job_dir: &str, job_id: &str, state_name: &str, pid: u32) -> PyResult<()> {
    let s = state::parse_state(state_name).map_err(err)?;
    let dir = Path::new(job_dir);
    state::set_state(dir, job_id, s, pid, state::last_committed(dir)).map_err(err)
}

/// The checkpoint directory when none is given (`$FERRY_HOME/checkpoints`), as the
/// `ferry` binary has it.
#[pyfunction]
fn default_checkpoint_dir() -> String {
    ferry_plan::jobdir::default_checkpoint_dir()
        .display()
        .to_string()
}

/// Stop requests to the driver ([`ferry_plan::StopRequests`], the `ferry` binary's rules):
/// signals the driver's Python handler passes on, and the job directory's `control` file.
#[pyclass(module = "ferry_spark._native")]
struct StopRequests {
    inner: Mutex<ferry_plan::StopRequests>,
}

#[pymethods]
impl StopRequests {
    /// Watches `job_dir`'s `control` file (`None`: no job directory), dropping a request
    /// an earlier run left there.
    #[new]
    #[pyo3(signature = (job_dir=None))]
    fn new(job_dir: Option<&str>) -> Self {
        StopRequests {
            inner: Mutex::new(ferry_plan::StopRequests::new(job_dir.map(Path::new))),
        }
    }

    /// A stop signal arrived; `True` when it is the first request.
    fn signal(&self) -> PyResult<bool> {
        Ok(lock(&self.inner)?.signal())
    }

    /// The request so far: `"savepoint"`, `"cancel"` or `None`.
    fn poll(&self) -> PyResult<Option<&'static str>> {
        Ok(lock(&self.inner)?.poll().map(ferry_plan::StopRequest::name))
    }
}

/// The Python module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("FerryError", m.py().get_type::<FerryError>())?;
    m.add_function(wrap_pyfunction!(load_job, m)?)?;
    m.add_function(wrap_pyfunction!(setup_sinks, m)?)?;
    m.add_function(wrap_pyfunction!(batch_splits, m)?)?;
    m.add_function(wrap_pyfunction!(run_chain, m)?)?;
    m.add_function(wrap_pyfunction!(run_chain_stream, m)?)?;
    m.add_function(wrap_pyfunction!(commit, m)?)?;
    m.add_function(wrap_pyfunction!(abort, m)?)?;
    m.add_function(wrap_pyfunction!(recover_commits, m)?)?;
    m.add_function(wrap_pyfunction!(open_job_dir, m)?)?;
    m.add_function(wrap_pyfunction!(set_state, m)?)?;
    m.add_function(wrap_pyfunction!(default_checkpoint_dir, m)?)?;
    m.add_class::<StopRequests>()?;
    m.add_class::<SourcePartition>()?;
    m.add_class::<StreamSource>()?;
    m.add_class::<Transform>()?;
    m.add_class::<Writer>()?;
    m.add_class::<JobDirLock>()?;
    Ok(())
}
