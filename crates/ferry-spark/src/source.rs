//! Ferry sources inside Spark.
//!
//! **Batch.** The driver runs the source's enumerator to the end ([`assign_all`]); each
//! reader subtask becomes one Spark partition that reads its splits to the end.
//!
//! **Streaming.** A micro-batch is a checkpoint. Its end offset, returned by
//! `latestOffset` and logged by Spark before the batch runs, is a [`StreamOffset`]: the
//! batch number, the enumerator's snapshot and, per subtask, where it starts — the split
//! states it carries over from the previous batch and the splits the enumerator assigned
//! since (new files, for example). A partition reads from there until its time or row
//! budget is spent (or its splits end), then records how many rows it read and where its
//! splits ended under the checkpoint location, `sources/<source>/<batch>/<subtask>`. The
//! next batch's offset starts from those recorded states. A replayed batch (Spark runs again
//! a batch that has an offset but no commit) reads from the same start states exactly the
//! recorded number of rows, with its splits bounded at the recorded end states
//! (`Source::bound_splits`: a reader that interleaves several splits, such as Kafka's
//! partitions, could otherwise return the same count in another mix), so it returns the
//! same rows for replayable sources, however long the first attempt took. The first attempt to record wins; an attempt that read a
//! different count fails and Spark retries it.
//!
//! Readers stay open between micro-batches in a process-wide cache keyed by the source,
//! subtask and the exact state they stopped at; a worker that gets a partition whose start
//! state matches continues with the open reader, any other restores from the offset.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use ferry_api::{
    ChangeBatch, EnumeratorContext, FerryError, ReaderContext, Result, SourceReader, Split,
    SplitEnumerator,
};
use ferry_plan::{Polled, SourceChain};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical;
use crate::convert::StreamCodec;
use crate::job::SparkJob;

/// How long a batch-mode enumerator may go without finding a split before it is
/// considered stuck.
const ENUMERATION_PATIENCE: Duration = Duration::from_secs(60);
/// The longest a partition without a time budget waits on an idle reader before it polls
/// again to see whether it has caught up.
const IDLE_CHECK: Duration = Duration::from_millis(200);
/// Readers kept open between micro-batches, per process.
const CACHE_CAPACITY: usize = 64;

/// Batch mode: runs source `source`'s enumerator until it is exhausted and returns the
/// splits of each reader subtask (index = subtask).
pub fn assign_all(job: &SparkJob, source: usize) -> Result<Vec<Vec<Split>>> {
    let node = job
        .plan
        .sources
        .get(source)
        .ok_or_else(|| FerryError::internal(format!("no source {source}")))?;
    let ctx = EnumeratorContext {
        parallelism: node.parallelism,
        job: job.plan.job.clone(),
    };
    let mut e = node.source.create_enumerator(&ctx, None)?;
    let mut out = vec![Vec::new(); node.parallelism];
    let mut last_progress = Instant::now();
    loop {
        let found = e.discover()?;
        if !found.is_empty() {
            last_progress = Instant::now();
        }
        for (reader, split) in found {
            out.get_mut(reader)
                .ok_or_else(|| {
                    FerryError::internal(format!(
                        "source {}: split assigned to reader {reader} of {}",
                        node.plugin, node.parallelism
                    ))
                })?
                .push(split);
        }
        if e.is_exhausted() {
            return Ok(out);
        }
        if last_progress.elapsed() > ENUMERATION_PATIENCE {
            return Err(FerryError::external(
                node.plugin.clone(),
                format!(
                    "found no split for {} s and is not done finding them",
                    ENUMERATION_PATIENCE.as_secs()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where one reader subtask starts a micro-batch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PartitionStart {
    /// Its splits as the previous batch left them.
    pub carried: Vec<Split>,
    /// Splits assigned to it since the previous batch.
    pub added: Vec<Split>,
}

impl PartitionStart {
    fn is_empty(&self) -> bool {
        self.carried.is_empty() && self.added.is_empty()
    }
}

/// The end offset of micro-batch `batch` of a source, as Spark logs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamOffset {
    /// The source's index in the job file.
    pub source: usize,
    /// The micro-batch it ends (`-1`: before the first).
    pub batch: i64,
    /// The enumerator's snapshot after assigning this batch's new splits.
    pub enumerator: Value,
    /// Per reader subtask, where it starts this batch.
    pub parts: Vec<PartitionStart>,
    /// Where every reader of this batch stops, when the source's enumerator bounds its
    /// micro-batches ([`ferry_api::SplitEnumerator::bound_micro_batch`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Value>,
}

impl StreamOffset {
    /// The offset before any batch.
    pub fn initial(source: usize) -> Self {
        StreamOffset {
            source,
            batch: -1,
            enumerator: Value::Null,
            parts: Vec::new(),
            bound: None,
        }
    }

    /// Canonical JSON (sorted keys), as Spark compares offsets by text.
    pub fn to_canonical(&self) -> Result<String> {
        let v = serde_json::to_value(self).map_err(FerryError::internal)?;
        Ok(canonical::to_string(&v))
    }

    /// Parses an offset Spark hands back.
    pub fn parse(text: &str) -> Result<Self> {
        serde_json::from_str(text)
            .map_err(|e| FerryError::internal(format!("malformed source offset {text}: {e}")))
    }
}

/// What a partition recorded about the rows it read in one micro-batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRecord {
    /// Rows it returned.
    pub rows: u64,
    /// Its splits' states after those rows.
    pub end: Vec<Split>,
}

/// `sources/<source>/<batch>/<subtask>` under the checkpoint location.
pub fn record_path(location: &Path, source: usize, batch: i64, subtask: usize) -> PathBuf {
    location
        .join("sources")
        .join(source.to_string())
        .join(batch.to_string())
        .join(subtask.to_string())
}

/// Decides the end offset of each micro-batch of one streaming source (what its
/// partitions read; "plan" in Ferry is the job's `JobPlan` only). Lives in Spark's long-lived
/// driver-side reader process; after a restart it recovers from Spark's offset log and
/// the records partitions left.
pub struct StreamOffsets {
    job: Arc<SparkJob>,
    source: usize,
    location: PathBuf,
    enumerator: Option<Box<dyn SplitEnumerator>>,
    last: Option<StreamOffset>,
}

impl StreamOffsets {
    /// The offsets of source `source` of `job`, with Spark's checkpoint location.
    pub fn new(job: Arc<SparkJob>, source: usize, location: PathBuf) -> Result<Self> {
        if job.plan.sources.get(source).is_none() {
            return Err(FerryError::internal(format!("no source {source}")));
        }
        Ok(StreamOffsets {
            job,
            source,
            location,
            enumerator: None,
            last: None,
        })
    }

    fn parallelism(&self) -> usize {
        self.job.plan.sources[self.source].parallelism
    }

    fn create_enumerator(&self, restored: Option<Value>) -> Result<Box<dyn SplitEnumerator>> {
        let node = &self.job.plan.sources[self.source];
        let ctx = EnumeratorContext {
            parallelism: node.parallelism,
            job: self.job.plan.job.clone(),
        };
        node.source
            .create_enumerator(&ctx, restored.filter(|v| !v.is_null()))
    }

    /// The latest offset this source logged in Spark's `offsets/` directory, if any.
    fn logged(&self) -> Result<Option<StreamOffset>> {
        let dir = self.location.join("offsets");
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return Ok(None);
        };
        let mut ids: Vec<u64> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
            .collect();
        ids.sort_unstable();
        let Some(last) = ids.last() else {
            return Ok(None);
        };
        let path = dir.join(last.to_string());
        let text = std::fs::read_to_string(&path)
            .map_err(|e| FerryError::io("spark", path.display(), e))?;
        // Line 1 is the format version, line 2 Spark's metadata, then one offset per source.
        for line in text.lines().skip(2) {
            if let Ok(o) = serde_json::from_str::<StreamOffset>(line) {
                if o.source == self.source {
                    return Ok(Some(o));
                }
            }
        }
        Ok(None)
    }

    fn recover(&mut self) -> Result<()> {
        let logged = self.logged()?;
        let last = logged.unwrap_or_else(|| StreamOffset::initial(self.source));
        self.enumerator = Some(self.create_enumerator(Some(last.enumerator.clone()))?);
        self.last = Some(last);
        Ok(())
    }

    /// Where each subtask's splits ended in batch `o.batch`, from the partitions' records.
    fn ends(&self, o: &StreamOffset) -> Result<Vec<Vec<Split>>> {
        let p = self.parallelism();
        if o.batch < 0 {
            return Ok(vec![Vec::new(); p]);
        }
        let mut out = Vec::with_capacity(p);
        for subtask in 0..p {
            match o.parts.get(subtask) {
                Some(part) if !part.is_empty() => {
                    let path = record_path(&self.location, self.source, o.batch, subtask);
                    let rec: BatchRecord = ferry_checkpoint::read_checked(&path).map_err(|e| {
                        FerryError::external(
                            "spark",
                            format!(
                                "batch {} of source {} has no end state for subtask {subtask}: {e}",
                                o.batch, self.source
                            ),
                        )
                    })?;
                    out.push(rec.end);
                }
                _ => out.push(Vec::new()),
            }
        }
        Ok(out)
    }

    /// The end offset of the next micro-batch (canonical JSON): where every subtask
    /// starts, with the splits found since the previous batch.
    pub fn latest_offset(&mut self) -> Result<String> {
        if self.last.is_none() || self.enumerator.is_none() {
            self.recover()?;
        }
        let last = self
            .last
            .clone()
            .ok_or_else(|| FerryError::internal("no previous offset"))?;
        let ends = self.ends(&last)?;
        let mut parts: Vec<PartitionStart> = ends
            .into_iter()
            .map(|carried| PartitionStart {
                carried,
                added: Vec::new(),
            })
            .collect();
        let batch = last.batch + 1;
        let e = self
            .enumerator
            .as_mut()
            .ok_or_else(|| FerryError::internal("no enumerator"))?;
        for (reader, split) in e.discover()? {
            let n = parts.len();
            parts
                .get_mut(reader)
                .ok_or_else(|| {
                    FerryError::internal(format!("split assigned to reader {reader} of {n}"))
                })?
                .added
                .push(split);
        }
        let enumerator = e.snapshot(batch as u64 + 1)?;
        // Taken after the splits were assigned: the readers stop here (logged in the offset
        // before any of them runs, so a replay stops at the same place).
        let bound = e.bound_micro_batch(batch as u64)?;
        let next = StreamOffset {
            source: self.source,
            batch,
            enumerator,
            parts,
            bound,
        };
        let text = next.to_canonical()?;
        self.last = Some(next);
        Ok(text)
    }
}

/// What one Spark partition of a streaming source reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamPartition {
    /// The source's index.
    pub source: usize,
    /// The reader subtask.
    pub subtask: usize,
    /// The micro-batch.
    pub batch: i64,
    /// Where it starts.
    pub start: PartitionStart,
    /// Spark's checkpoint location (records go under it).
    pub location: String,
    /// How long a first attempt reads, in ms; `None`: until its reader has caught up with
    /// its input (`checkpoint.interval = 0`, see `ferry_plan::CheckpointSettings::micro_batch`).
    pub budget_ms: Option<u64>,
    /// At most this many rows per batch.
    pub max_rows: u64,
    /// The micro-batch's bound ([`StreamOffset::bound`]): the partition reads until its
    /// reader reaches it, without a time or row budget, first attempt and replay alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Value>,
}

/// The partitions of the micro-batch ending at `end` (empty when nothing is planned).
pub fn stream_partitions(
    end: &StreamOffset,
    location: &str,
    budget_ms: Option<u64>,
    max_rows: u64,
) -> Vec<StreamPartition> {
    end.parts
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(subtask, p)| StreamPartition {
            source: end.source,
            subtask,
            batch: end.batch,
            start: p.clone(),
            location: location.to_string(),
            budget_ms,
            max_rows,
            bound: end.bound.clone(),
        })
        .collect()
}

enum Limit {
    /// Batch mode: to the end of the splits.
    Exhaust,
    /// A first attempt: until the time or row budget is spent. Without a time
    /// (`checkpoint.interval = 0`), until the reader has caught up: it reports nothing to
    /// read twice in a row, the second time after the wait it asked for.
    Budget {
        max_rows: u64,
        until: Option<Instant>,
    },
    /// A replay: exactly the recorded rows.
    Exact(u64),
    /// A bounded micro-batch (first attempt or replay): until the reader reaches the bound
    /// and reports that it is finished.
    Bound,
}

type ReaderCache = Mutex<HashMap<String, Box<dyn SourceReader>>>;

fn reader_cache() -> &'static ReaderCache {
    static CACHE: OnceLock<ReaderCache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Whether readers are kept open between micro-batches (`FERRY_SPARK_READER_CACHE=0`
/// turns it off, to measure what it saves).
fn cache_enabled() -> bool {
    std::env::var("FERRY_SPARK_READER_CACHE")
        .map(|v| v != "0")
        .unwrap_or(true)
}

struct StreamState {
    part: StreamPartition,
    key_base: String,
    record: PathBuf,
    /// Rows of the last batch were cut off to match the record: the reader is past it.
    overshot: bool,
    finished: bool,
    /// A replay: the first attempt's record stands.
    replay: bool,
}

/// One Spark partition reading one reader subtask's splits, and applying the transforms
/// fused into it ([`PartitionReader::with_transforms`]).
pub struct PartitionReader {
    /// The reader with the transforms fused into this task, in order (see
    /// [`crate::job::Chain`]): the executor the embedded engine's reader threads run, so
    /// batches get the same table names and transforms on both engines.
    reader: Option<SourceChain>,
    /// How what this partition returns (after its transforms) looks in Spark.
    codec: StreamCodec,
    limit: Limit,
    rows: u64,
    /// The reader's last poll found nothing (see [`Limit::Budget`] without a time).
    idle: bool,
    done: bool,
    stream: Option<StreamState>,
}

impl PartitionReader {
    /// Batch mode: reads `splits` of subtask `subtask` to their end.
    pub fn batch(
        job: &SparkJob,
        source: usize,
        subtask: usize,
        splits: Vec<Split>,
    ) -> Result<Self> {
        let node = job
            .plan
            .sources
            .get(source)
            .ok_or_else(|| FerryError::internal(format!("no source {source}")))?;
        let codec = StreamCodec::new(&node.tables)?;
        let ctx = ReaderContext {
            subtask,
            parallelism: node.parallelism,
            job: job.plan.job.clone(),
        };
        let mut reader = node.source.create_reader(&ctx)?;
        reader.add_splits(splits)?;
        reader.no_more_splits();
        Ok(PartitionReader {
            reader: Some(SourceChain::new(&job.plan, source, reader, &[])?),
            codec,
            limit: Limit::Exhaust,
            rows: 0,
            idle: false,
            done: false,
            stream: None,
        })
    }

    /// Streaming: reads one micro-batch of a subtask.
    pub fn stream(job: &SparkJob, part: StreamPartition) -> Result<Self> {
        let node = job
            .plan
            .sources
            .get(part.source)
            .ok_or_else(|| FerryError::internal(format!("no source {}", part.source)))?;
        let codec = StreamCodec::new(&node.tables)?;
        let location = PathBuf::from(&part.location);
        let record = record_path(&location, part.source, part.batch, part.subtask);
        // A replay's splits end where the first attempt's did (see `Source::bound_splits`).
        let mut replay_end = None;
        let limit = if record.exists() {
            let rec: BatchRecord = ferry_checkpoint::read_checked(&record)?;
            replay_end = Some(rec.end);
            if part.bound.is_some() {
                Limit::Bound
            } else {
                Limit::Exact(rec.rows)
            }
        } else if part.bound.is_some() {
            Limit::Bound
        } else {
            Limit::Budget {
                max_rows: part.max_rows.max(1),
                until: part
                    .budget_ms
                    .map(|ms| Instant::now() + Duration::from_millis(ms)),
            }
        };
        let key_base = format!(
            "{}|{}|{}|{}|{}",
            job.plan.fingerprint, job.plan.job.job_id, part.location, part.source, part.subtask
        );
        let carried = serde_json::to_value(&part.start.carried).map_err(FerryError::internal)?;
        let key = format!("{key_base}|{}", canonical::to_string(&carried));
        let cached = if cache_enabled() && replay_end.is_none() && part.bound.is_none() {
            reader_cache()
                .lock()
                .map_err(|_| FerryError::internal("reader cache poisoned"))?
                .remove(&key)
        } else {
            None
        };
        let reader = match cached {
            Some(mut r) => {
                // This worker read the previous batch of this split: it was committed.
                r.notify_checkpoint_complete(part.batch as u64)?;
                r.add_splits(part.start.added.clone())?;
                r
            }
            None => {
                let ctx = ReaderContext {
                    subtask: part.subtask,
                    parallelism: node.parallelism,
                    job: job.plan.job.clone(),
                };
                let mut r = node.source.create_reader(&ctx)?;
                let mut splits = part.start.carried.clone();
                splits.extend(part.start.added.iter().cloned());
                if let Some(bound) = &part.bound {
                    splits = node
                        .source
                        .bound_splits_at(splits, bound, replay_end.as_deref())?;
                } else if let Some(end) = &replay_end {
                    splits = node.source.bound_splits(splits, end)?;
                }
                r.add_splits(splits)?;
                r
            }
        };
        Ok(PartitionReader {
            reader: Some(SourceChain::new(&job.plan, part.source, reader, &[])?),
            codec,
            limit,
            rows: 0,
            idle: false,
            done: false,
            stream: Some(StreamState {
                part,
                key_base,
                record,
                overshot: false,
                finished: false,
                replay: replay_end.is_some(),
            }),
        })
    }

    /// Applies the transforms `indices` of the job, in order, to what this partition
    /// reads: the transforms of a [`crate::job::Chain`], run in the reader's task instead
    /// of a `mapInArrow` step each (no trip through the JVM between them).
    pub fn with_transforms(mut self, job: &SparkJob, indices: &[usize]) -> Result<Self> {
        if let Some(chain) = self.reader.as_mut() {
            chain.chain(&job.plan, indices)?;
        }
        if let Some(&last) = indices.last() {
            self.codec = StreamCodec::new(job.transform_output(last)?)?;
        }
        Ok(self)
    }

    /// Rows read from the source so far (before transforms).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The next batch in Spark's types, or `None` when this partition has read what it
    /// planned. May sleep while the source has nothing (call it without holding the GIL).
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        self.next_change()?
            .map(|b| self.codec.to_spark(&b))
            .transpose()
    }

    /// The next batch in Ferry's types, after this partition's transforms; `None` when
    /// the partition has read what it planned.
    pub fn next_change(&mut self) -> Result<Option<ChangeBatch>> {
        loop {
            if self.done {
                return Ok(None);
            }
            let spent = match self.limit {
                Limit::Exhaust | Limit::Bound => false,
                Limit::Exact(n) => self.rows >= n,
                Limit::Budget { max_rows, until } => {
                    self.rows >= max_rows || until.is_some_and(|u| Instant::now() >= u)
                }
            };
            if spent {
                self.finish()?;
                continue;
            }
            let reader = self
                .reader
                .as_mut()
                .ok_or_else(|| FerryError::internal("reader already closed"))?;
            let (limit, rows) = (&self.limit, self.rows);
            let mut overshot = false;
            let polled = reader.poll(|b| {
                let (b, cut) = cut(limit, rows, b);
                overshot = cut;
                b
            })?;
            if overshot {
                if let Some(s) = self.stream.as_mut() {
                    s.overshot = true;
                }
            }
            match polled {
                Polled::Batch { read, out } => {
                    self.idle = false;
                    // Rows count before transforms: a replay reads the same source rows.
                    self.rows += read as u64;
                    if let Some(b) = out {
                        return Ok(Some(b));
                    }
                }
                Polled::Idle(d) => {
                    let d = match self.limit {
                        // No time budget: the batch ends once the reader has caught up, that
                        // is, has nothing even after the wait it asked for (a first `Idle`
                        // may be a source pacing its splits).
                        Limit::Budget { until: None, .. } if self.idle => {
                            self.finish()?;
                            continue;
                        }
                        Limit::Budget { until: None, .. } => {
                            self.idle = true;
                            d.min(IDLE_CHECK)
                        }
                        Limit::Budget {
                            until: Some(until), ..
                        } => d.min(until.saturating_duration_since(Instant::now())),
                        _ => d,
                    };
                    // A reader that signals readiness (a broker's fetch task) is woken by
                    // it as soon as data arrives, not at the end of the wait it asked for.
                    let wait = d.max(Duration::from_millis(1));
                    match self.reader.as_mut().and_then(|c| c.reader().readiness()) {
                        Some(ready) => {
                            let _ = ready.receiver().recv_timeout(wait);
                        }
                        None => std::thread::sleep(wait),
                    }
                }
                Polled::Finished => {
                    if let Limit::Exact(n) = self.limit {
                        return Err(FerryError::external(
                            "spark",
                            format!("replaying a micro-batch: the source ended after {} of the {n} rows it read the first time", self.rows),
                        ));
                    }
                    if let Some(s) = self.stream.as_mut() {
                        s.finished = true;
                    }
                    self.finish()?;
                }
            }
        }
    }

    fn finish(&mut self) -> Result<()> {
        self.done = true;
        let Some(chain) = self.reader.take() else {
            return Ok(());
        };
        let mut reader = chain.into_reader();
        let Some(s) = self.stream.as_ref() else {
            return reader.close();
        };
        let end = reader.snapshot(s.part.batch as u64 + 1)?;
        // A replay leaves the first attempt's record as it is (a bounded replay may count
        // other rows: a table snapshot read again holds the rows' newer values).
        if !s.replay {
            write_record(
                &s.record,
                &BatchRecord {
                    rows: self.rows,
                    end: end.clone(),
                },
            )?;
        }
        // A reader whose fetch task runs ahead of it (it offers a readiness signal) would
        // go on taking data while it sits in this worker's cache; when the subtask's next
        // batch runs in another worker, that data is lost to the reader there (a broker
        // delivers it once). Such readers end with their batch.
        // A replay's reader is bounded to the first attempt's end, a bounded batch's reader
        // to its bound: no later batch may use them.
        let replay = matches!(self.limit, Limit::Exact(_) | Limit::Bound);
        if cache_enabled() && !replay && !s.overshot && !s.finished && reader.readiness().is_none()
        {
            let v = serde_json::to_value(&end).map_err(FerryError::internal)?;
            let key = format!("{}|{}", s.key_base, canonical::to_string(&v));
            let mut c = reader_cache()
                .lock()
                .map_err(|_| FerryError::internal("reader cache poisoned"))?;
            if c.len() >= CACHE_CAPACITY {
                // Readers left by other partitions of earlier batches: restoring is cheap.
                c.clear();
            }
            c.insert(key, reader);
        } else {
            reader.close()?;
        }
        Ok(())
    }
}

/// In a replay (`limit` exact, `rows` read so far), the rows beyond the recorded count are
/// not part of this batch: `b` without them, and whether any were cut off.
fn cut(limit: &Limit, rows: u64, b: ChangeBatch) -> (ChangeBatch, bool) {
    let Limit::Exact(n) = limit else {
        return (b, false);
    };
    let left = n.saturating_sub(rows) as usize;
    if b.num_rows() <= left {
        return (b, false);
    }
    (b.slice(0, left), true)
}

/// Writes `rec` at `path` unless an earlier attempt did; then both must agree.
fn write_record(path: &Path, rec: &BatchRecord) -> Result<()> {
    let body = serde_json::to_vec(rec).map_err(FerryError::internal)?;
    let dir = path
        .parent()
        .ok_or_else(|| FerryError::internal(format!("{} has no directory", path.display())))?;
    std::fs::create_dir_all(dir).map_err(|e| FerryError::io("spark", dir.display(), e))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("record"),
        std::process::id()
    ));
    ferry_checkpoint::write_atomic(&tmp, &body)?;
    // A hard link never replaces an existing file: the first attempt to finish wins.
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let first: BatchRecord = ferry_checkpoint::read_checked(path)?;
            if first.rows == rec.rows {
                Ok(())
            } else {
                Err(FerryError::external(
                    "spark",
                    format!("{}: another attempt read {} rows where this one read {}; Spark retries the task", path.display(), first.rows, rec.rows),
                ))
            }
        }
        Err(e) => Err(FerryError::io("spark", path.display(), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::tests::spec;
    use crate::job::SparkJob;

    const STREAM: &str = r#"
        env { job.mode = STREAMING, parallelism = 2 }
        source { FakeSource { plugin_output = fake, row.num = 40, split.num = 4, schema = { fields { id = bigint } } } }
        sink { Console {} }
    "#;

    fn drain(r: &mut PartitionReader) -> u64 {
        let mut n = 0;
        while let Some(b) = r.next_batch().unwrap() {
            n += b.num_rows() as u64;
        }
        n
    }

    #[test]
    fn batch_mode_assigns_every_split_and_reads_them_to_the_end() {
        let job = SparkJob::build(spec(&STREAM.replace("STREAMING", "BATCH"))).unwrap();
        let splits = assign_all(&job, 0).unwrap();
        assert_eq!(splits.len(), 2);
        let mut total = 0;
        for (subtask, s) in splits.into_iter().enumerate() {
            let mut r = PartitionReader::batch(&job, 0, subtask, s).unwrap();
            total += drain(&mut r);
        }
        // SeaTunnel's FakeSource makes row.num rows per reader.
        assert_eq!(total, 80);
    }

    #[test]
    fn micro_batches_continue_where_the_last_ended_and_replays_read_the_same_rows() {
        let dir = tempfile::tempdir().unwrap();
        let job = Arc::new(SparkJob::build(spec(STREAM)).unwrap());
        let loc = dir.path().to_string_lossy().to_string();
        let mut offsets = StreamOffsets::new(job.clone(), 0, dir.path().into()).unwrap();
        let first = StreamOffset::parse(&offsets.latest_offset().unwrap()).unwrap();
        assert_eq!(first.batch, 0);
        let parts = stream_partitions(&first, &loc, Some(2_000), 15);
        assert_eq!(parts.len(), 2);
        let mut rows = 0;
        for p in &parts {
            rows += drain(&mut PartitionReader::stream(&job, p.clone()).unwrap());
        }
        // 40 rows per subtask in splits of 10 (one split a poll); a budget of 15 rows
        // ends each partition after its second split.
        assert_eq!(rows, 40);
        // A replay of subtask 0 reads exactly what the record says, even with no budget.
        let mut replay = parts[0].clone();
        replay.budget_ms = Some(0);
        let rec: BatchRecord =
            ferry_checkpoint::read_checked(&record_path(dir.path(), 0, 0, 0)).unwrap();
        assert_eq!(
            drain(&mut PartitionReader::stream(&job, replay).unwrap()),
            rec.rows
        );
        // The next offset carries the recorded end states.
        let second = StreamOffset::parse(&offsets.latest_offset().unwrap()).unwrap();
        assert_eq!(second.batch, 1);
        assert_eq!(second.parts[0].carried, rec.end);
        assert!(second.parts.iter().all(|p| p.added.is_empty()));
    }

    #[test]
    fn with_checkpoint_interval_zero_a_micro_batch_reads_until_its_readers_catch_up() {
        let dir = tempfile::tempdir().unwrap();
        let text = STREAM.replace(
            "parallelism = 2",
            "parallelism = 2, checkpoint.interval = 0",
        );
        let job = Arc::new(SparkJob::build(spec(&text)).unwrap());
        // The plan says so, and the driver takes its trigger from there: back to back.
        let plan = job.plan_json().unwrap();
        assert_eq!(
            plan["micro_batch"],
            serde_json::json!({"trigger_ms": 0, "read_budget_ms": null})
        );
        let budget = job.plan.checkpoint.micro_batch().read_budget_ms;
        let loc = dir.path().to_string_lossy().to_string();
        let mut offsets = StreamOffsets::new(job.clone(), 0, dir.path().into()).unwrap();
        let first = StreamOffset::parse(&offsets.latest_offset().unwrap()).unwrap();
        let started = Instant::now();
        let mut rows = 0;
        for p in stream_partitions(&first, &loc, budget, 1_000_000) {
            rows += drain(&mut PartitionReader::stream(&job, p).unwrap());
        }
        // Every row of both subtasks (FakeSource paces its splits 1 ms apart: no catching
        // up), and the batch ended once the readers had caught up, not after a time budget
        // (the default interval would read for 10 s).
        assert_eq!(rows, 80);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // The next micro-batch finds nothing new and ends at once.
        let second = StreamOffset::parse(&offsets.latest_offset().unwrap()).unwrap();
        let started = Instant::now();
        for p in stream_partitions(&second, &loc, budget, 1_000_000) {
            assert_eq!(drain(&mut PartitionReader::stream(&job, p).unwrap()), 0);
        }
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn a_restarted_planner_recovers_from_sparks_offset_log() {
        let dir = tempfile::tempdir().unwrap();
        let job = Arc::new(SparkJob::build(spec(STREAM)).unwrap());
        let loc = dir.path().to_string_lossy().to_string();
        let mut offsets = StreamOffsets::new(job.clone(), 0, dir.path().into()).unwrap();
        let text = offsets.latest_offset().unwrap();
        let first = StreamOffset::parse(&text).unwrap();
        std::fs::create_dir_all(dir.path().join("offsets")).unwrap();
        std::fs::write(
            dir.path().join("offsets/0"),
            format!("v1\n{{\"batchWatermarkMs\":0}}\n{text}"),
        )
        .unwrap();
        for p in stream_partitions(&first, &loc, Some(2_000), 1_000) {
            drain(&mut PartitionReader::stream(&job, p).unwrap());
        }
        let mut again = StreamOffsets::new(job, 0, dir.path().into()).unwrap();
        let next = StreamOffset::parse(&again.latest_offset().unwrap()).unwrap();
        assert_eq!(next.batch, 1);
        // Everything was read in batch 0: nothing is carried or added.
        assert!(
            next.parts
                .iter()
                .all(|p| p.carried.is_empty() && p.added.is_empty()),
            "{next:?}"
        );
    }

    #[test]
    fn a_second_attempt_that_read_a_different_count_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sources/0/3/1");
        write_record(
            &p,
            &BatchRecord {
                rows: 5,
                end: vec![],
            },
        )
        .unwrap();
        write_record(
            &p,
            &BatchRecord {
                rows: 5,
                end: vec![],
            },
        )
        .unwrap();
        let e = write_record(
            &p,
            &BatchRecord {
                rows: 6,
                end: vec![],
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("another attempt read 5 rows"), "{e}");
    }

    #[test]
    fn offsets_are_canonical() {
        let o = StreamOffset {
            source: 1,
            batch: 2,
            enumerator: serde_json::json!({"z": 1, "a": 2}),
            parts: vec![],
            bound: None,
        };
        assert_eq!(
            o.to_canonical().unwrap(),
            r#"{"batch":2,"enumerator":{"a":2,"z":1},"parts":[],"source":1}"#
        );
        // A bound shows only where a source gives one; its partitions carry it.
        let bounded = StreamOffset {
            bound: Some(serde_json::json!({"lsn": 7})),
            parts: vec![PartitionStart {
                carried: vec![],
                added: vec![Split {
                    id: "s".into(),
                    state: Value::Null,
                }],
            }],
            ..o
        };
        let text = bounded.to_canonical().unwrap();
        assert!(text.contains(r#""bound":{"lsn":7}"#), "{text}");
        assert_eq!(StreamOffset::parse(&text).unwrap(), bounded);
        let parts = stream_partitions(&bounded, "/loc", Some(1_000), 10);
        assert_eq!(parts[0].bound, bounded.bound);
    }
}
