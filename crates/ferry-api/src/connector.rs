//! The connector API: sources (an enumerator and readers), sinks (writers and a
//! committer) and transforms, shaped after SeaTunnel's connector API v2.
//!
//! # Checkpoints
//! Every method here runs on one thread at a time and may block, but only briefly
//! (a reader's [`SourceReader::poll_next`] should return within ~100 ms even when no data
//! is available), so that checkpoint barriers and cancellation are never held up. A
//! plugin that waits on the network does so in a task on the process's I/O runtime
//! ([`crate::io`]) and hands its results to the reader through a queue, with a readiness
//! signal that wakes the reader when data arrives.
//!
//! A checkpoint `N` proceeds so:
//! 1. the enumerator is snapshotted ([`SplitEnumerator::snapshot`]);
//! 2. each reader, between two polls, is snapshotted ([`SourceReader::snapshot`]); the
//!    snapshot covers exactly the rows it has returned so far, and a barrier follows them;
//! 3. each sink writer, when the barrier reaches it, prepares a commit for `N`
//!    ([`SinkWriter::prepare_commit`]) and snapshots its state;
//! 4. once all of that is durably stored, the committer publishes `N`
//!    ([`SinkCommitter::commit`]), then sources are told `N` completed.
//!
//! After a crash the engine restores every part from the latest complete checkpoint and
//! calls [`SinkCommitter::commit`] again for a checkpoint that was stored but not marked
//! published: **committers must be idempotent**.
//!
//! Split, reader, writer and commit states are JSON values at this boundary so that the
//! embedded engine's checkpoint files and Spark's offset logs can hold them as they are.
//! Connectors keep them as their own serde types and erase them here ([`Split::typed`],
//! [`Split::read_state`], [`encode_state`], [`decode_state`]), so a damaged or foreign
//! state is an error naming the split, not a silent default.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::data::{ChangeBatch, TableSchema};
use crate::error::{FerryError, Result};
use crate::options::{OptionSpec, Options};

/// Whether a job runs to completion or until stopped (`env.job.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobMode {
    /// Bounded: every source ends.
    Batch,
    /// Unbounded: sources run until the job is stopped.
    Streaming,
}

/// Facts about the job that every plugin may use.
#[derive(Debug, Clone)]
pub struct JobContext {
    /// Batch or streaming.
    pub mode: JobMode,
    /// The job's id (stable across restarts of the same job).
    pub job_id: String,
    /// The job's name (`env.job.name`).
    pub job_name: String,
}

impl Default for JobContext {
    fn default() -> Self {
        JobContext {
            mode: JobMode::Batch,
            job_id: "local".into(),
            job_name: "ferry".into(),
        }
    }
}

/// Whether a source ends by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundedness {
    /// Ends when its data is read.
    Bounded,
    /// Runs until the job is stopped.
    Unbounded,
}

/// A unit of work a reader owns (a file, a range of generated rows, a partition), with
/// where reading it has got to. The state is JSON so that checkpoints can hold it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Stable identifier, unique within the source.
    pub id: String,
    /// Progress and anything else needed to resume reading it.
    pub state: Value,
}

impl Split {
    /// A split whose state is a connector's own type, erased to JSON for the checkpoint.
    pub fn typed<S: Serialize>(id: impl Into<String>, state: &S) -> Result<Split> {
        let id = id.into();
        let state = encode_state(state, &format!("split '{id}'"))?;
        Ok(Split { id, state })
    }

    /// The split's state as the connector's own type. A checkpoint holding something
    /// else (written by another version, or damaged) is an error naming the split.
    pub fn read_state<S: serde::de::DeserializeOwned>(&self) -> Result<S> {
        decode_state(&self.state, &format!("split '{}'", self.id))
    }
}

/// A connector's typed state (a writer's snapshot, a commit's info, an enumerator's
/// state) as the JSON a checkpoint holds; `what` names it in the error.
pub fn encode_state<S: Serialize>(state: &S, what: &str) -> Result<Value> {
    serde_json::to_value(state)
        .map_err(|e| FerryError::internal(format!("{what} cannot be written as JSON: {e}")))
}

/// The typed state a checkpoint holds as JSON: the inverse of [`encode_state`]. What
/// does not fit the type is an error naming `what`, never a panic or a default.
pub fn decode_state<S: serde::de::DeserializeOwned>(state: &Value, what: &str) -> Result<S> {
    S::deserialize(state).map_err(|e| {
        FerryError::external(
            "checkpoint",
            format!("the state of {what} is not what this version of the connector wrote ({e}): {state}"),
        )
    })
}

/// What a source reader is given to work with.
#[derive(Debug, Clone)]
pub struct ReaderContext {
    /// This reader's index, `0..parallelism`.
    pub subtask: usize,
    /// Number of readers of this source.
    pub parallelism: usize,
    /// The job.
    pub job: JobContext,
}

/// What a split enumerator is given to work with.
#[derive(Debug, Clone)]
pub struct EnumeratorContext {
    /// Number of readers splits can be assigned to.
    pub parallelism: usize,
    /// The job.
    pub job: JobContext,
}

/// What a sink writer is given to work with.
#[derive(Debug, Clone)]
pub struct WriterContext {
    /// This writer's index, `0..parallelism`.
    pub subtask: usize,
    /// Number of writers of this sink.
    pub parallelism: usize,
    /// The job.
    pub job: JobContext,
    /// A token unique to this attempt of this writer (Spark task attempt, engine restart),
    /// for naming staged output so that attempts never collide.
    pub attempt: String,
}

/// How long a plugin may take to resolve its tables ([`Source::resolve`]) or set up its
/// target ([`Sink::setup`]) unless the job says otherwise.
pub const DEFAULT_RESOLVE_TIMEOUT: Duration = Duration::from_secs(30);

/// What a plugin is given for the steps where it may do I/O before any data flows:
/// [`Source::resolve`] (connect, list tables, read columns and keys) and [`Sink::setup`]
/// (check or create the target). Both run once per job run on the planning side (the
/// embedded engine's coordinator, Spark's driver and every Spark worker that plans), within
/// a deadline.
#[derive(Debug, Clone)]
pub struct ResolveContext {
    /// The job.
    pub job: JobContext,
    /// The plugin as errors name it (`source Jdbc`, `sink Jdbc`).
    pub plugin: String,
    /// When the step must be done by.
    pub deadline: Instant,
    /// Whether the job resumes from a checkpoint. A sink's setup must not redo what a fresh
    /// run does once (SeaTunnel's save modes: dropping or recreating the target).
    pub resumed: bool,
}

impl ResolveContext {
    /// A context for `plugin` with `timeout` from now.
    pub fn new(plugin: impl Into<String>, job: JobContext, timeout: Duration) -> Self {
        ResolveContext {
            job,
            plugin: plugin.into(),
            deadline: Instant::now() + timeout,
            resumed: false,
        }
    }

    /// Time left before the deadline, zero once it passed. A blocking driver passes this as
    /// its connect and statement timeout.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Runs `fut` on the process's I/O runtime ([`crate::io`]) and waits for it, at most until
    /// the deadline. `what` names the work and its address for the error when time runs out
    /// (`connecting to 127.0.0.1:5432`): "source Jdbc: connecting to 127.0.0.1:5432 did not
    /// finish within 30 s". Call it from the planning thread, never from inside the runtime.
    pub fn block_on<T, F>(&self, what: &str, fut: F) -> Result<T>
    where
        F: Future<Output = Result<T>>,
    {
        let handle = crate::io::handle()?;
        let limit = self.remaining();
        let started = Instant::now();
        match handle.block_on(async { tokio::time::timeout(limit, fut).await }) {
            Ok(r) => r,
            Err(_) => Err(self.timed_out(what, started.elapsed())),
        }
    }

    /// The error for work that did not finish before the deadline.
    pub fn timed_out(&self, what: &str, waited: Duration) -> FerryError {
        FerryError::external(
            self.plugin.clone(),
            format!(
                "{what} did not finish within {:.1} s",
                waited.as_secs_f64().max(0.1)
            ),
        )
    }
}

/// Creates a source from its options. One per connector, listed in the registry.
pub trait SourceFactory: Send + Sync {
    /// The plugin name used in job files (`FakeSource`); matched case-insensitively.
    fn name(&self) -> &'static str;
    /// One line on what the source reads.
    fn description(&self) -> &'static str;
    /// Every option the source accepts.
    fn options(&self) -> &'static [OptionSpec];
    /// Reads and validates the options. Must read every option it accepts through
    /// `options` so that misspelt ones are reported; does no I/O (that is
    /// [`Source::resolve`]'s place).
    fn create(&self, options: &mut Options, job: &JobContext) -> Result<Box<dyn Source>>;
}

/// A configured source.
pub trait Source: Send + Sync + Debug {
    /// Finds the tables it will read and their schemas and keys, doing whatever I/O that
    /// needs (connect, list tables, read columns): called once after `create` and before
    /// [`Source::tables`], within `ctx`'s deadline. An error names the option and address at
    /// fault. Sources whose tables follow from their options alone keep the default.
    fn resolve(&mut self, _ctx: &ResolveContext) -> Result<()> {
        Ok(())
    }
    /// Whether it ends by itself.
    fn boundedness(&self) -> Boundedness;
    /// The tables it produces, with their schemas and keys, known before any data is read
    /// (after [`Source::resolve`]).
    fn tables(&self) -> Vec<TableSchema>;
    /// Whether reading again from a snapshot yields the same rows, so that a restart
    /// neither loses nor repeats data (required for exactly-once delivery).
    fn is_replayable(&self) -> bool {
        true
    }
    /// Why this source needs one reader instance to live from the checkpoint that covers its
    /// rows until that checkpoint completes (it acknowledges them through the connection that
    /// received them), or `None` when any reader restored from a snapshot will do. An engine
    /// that starts readers afresh for each micro-batch (Spark) cannot run such a source and
    /// refuses the job with this reason before it starts.
    fn needs_long_lived_reader(&self) -> Option<String> {
        None
    }
    /// Restored splits `start`, bounded so that a reader given them returns exactly the rows
    /// an earlier read from `start` returned before its snapshot was `end`, and nothing after.
    /// An engine that replays a read (Spark, replaying a micro-batch after a crash) calls it
    /// and also stops at the earlier read's row count. A source whose reader returns rows in
    /// an order its split states settle (one ordered stream per reader, files read in turn)
    /// keeps the default, which bounds nothing: the same count gives the same rows. A source
    /// whose reader interleaves several splits in an order it does not choose (Kafka's
    /// partitions, as the broker delivers them) must bound each split at its `end` state, or a
    /// replay of the same count may return other rows than the first read did.
    fn bound_splits(&self, start: Vec<Split>, _end: &[Split]) -> Result<Vec<Split>> {
        Ok(start)
    }
    /// Splits `start` (with, on a replay, the states `end` where the first read of the same
    /// micro-batch ended), bounded at `bound`: the value the source's enumerator returned from
    /// [`SplitEnumerator::bound_micro_batch`] for this micro-batch. A reader given them reads
    /// up to the bound and then returns [`ReadStatus::Finished`] (the micro-batch is read, not
    /// the source: the next micro-batch gets the snapshot's states with its own bound). Reads
    /// with the same `start` and `bound` must return the same changes, so a replayed
    /// micro-batch repeats the first read's; `end` tells a reader what the first read covered
    /// where the source cannot derive it from the bound alone (a table snapshot's chunks).
    /// The engine does not count rows for such a replay: the bound decides where it ends.
    /// Only sources whose enumerator returns bounds are asked; the default refuses.
    fn bound_splits_at(
        &self,
        _start: Vec<Split>,
        _bound: &Value,
        _end: Option<&[Split]>,
    ) -> Result<Vec<Split>> {
        Err(FerryError::internal(
            "the source's enumerator bounded a micro-batch, but the source takes no bound",
        ))
    }
    /// The enumerator, fresh or restored from a snapshot taken by [`SplitEnumerator::snapshot`].
    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>>;
    /// A reader; it gets its splits through [`SourceReader::add_splits`].
    fn create_reader(&self, ctx: &ReaderContext) -> Result<Box<dyn SourceReader>>;
}

/// Finds splits and assigns them to readers. Lives in the coordinator; one per source.
pub trait SplitEnumerator: Send {
    /// Splits found since the last call, each with the index of the reader that gets it.
    /// Called at start and then periodically (streaming sources discover new splits).
    fn discover(&mut self) -> Result<Vec<(usize, Split)>>;
    /// Whether no split will ever come again (all assigned, source bounded).
    fn is_exhausted(&self) -> bool;
    /// Splits that a failed reader owned, to assign again.
    fn add_splits_back(&mut self, splits: Vec<Split>, reader: usize);
    /// State to store in checkpoint `checkpoint_id` (splits not yet assigned, what was seen).
    fn snapshot(&mut self, checkpoint_id: u64) -> Result<Value>;
    /// Checkpoint `checkpoint_id` is durable and committed.
    fn notify_checkpoint_complete(&mut self, _checkpoint_id: u64) -> Result<()> {
        Ok(())
    }
    /// A bound for micro-batch `batch`, which the engine is planning (Spark's
    /// `latestOffset`), or `None` (the default): the micro-batch then reads for a time or
    /// row budget, and a replay reads the same number of rows. A source whose reads cannot
    /// be cut by a count so that a replay repeats them (a change log read on a connection
    /// only one reader may hold, with table snapshots between its changes) marks where the
    /// micro-batch ends instead: Postgres-CDC writes a message into the WAL and returns its
    /// LSN. The engine logs the bound in the micro-batch's offset, before any reader runs,
    /// and hands it to every reader of the batch through [`Source::bound_splits_at`]; each
    /// reads up to it and no further, so every micro-batch ends, and a replay, given the same
    /// bound, reads the same changes. May do I/O (on the planning thread, briefly).
    fn bound_micro_batch(&mut self, _batch: u64) -> Result<Option<Value>> {
        Ok(None)
    }
}

/// What one [`SourceReader::poll_next`] call produced.
#[derive(Debug)]
pub enum ReadStatus {
    /// A batch; call again soon.
    Batch(ChangeBatch),
    /// Nothing now; call again after about this long.
    Idle(Duration),
    /// This reader has read all its splits and will get no more: it is done.
    Finished,
}

/// The longest an engine waits before polling an idle reader that offers a
/// [`SourceReader::readiness`] signal; a reader that forgets to raise it is still polled.
pub const MAX_IDLE_WITH_READINESS: Duration = Duration::from_secs(5);

/// Reads the splits assigned to it. One per subtask; runs on one thread.
pub trait SourceReader: Send {
    /// New splits to read (fresh, or restored with their progress).
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()>;
    /// No more splits will be added.
    fn no_more_splits(&mut self);
    /// The next batch, or why there is none. Must return within ~100 ms.
    fn poll_next(&mut self) -> Result<ReadStatus>;
    /// A signal raised when data may have become available (see [`crate::io`]). A reader
    /// that offers one is not polled again after [`ReadStatus::Idle`] until the signal is
    /// raised, a control message (a split, a checkpoint) arrives, or its idle time (up to
    /// [`MAX_IDLE_WITH_READINESS`]) passes; one that offers none is polled again after at
    /// most 200 ms. Asked once, after the reader is created.
    fn readiness(&self) -> Option<crate::io::Readiness> {
        None
    }
    /// The state of every split it owns, covering exactly the rows returned so far.
    fn snapshot(&mut self, checkpoint_id: u64) -> Result<Vec<Split>>;
    /// Checkpoint `checkpoint_id` is durable and committed (acknowledge upstream here).
    fn notify_checkpoint_complete(&mut self, _checkpoint_id: u64) -> Result<()> {
        Ok(())
    }
    /// The reader's own figures, as `(name, value)` pairs: how far behind its input it is
    /// (Kafka's consumer lag, a change stream's replication lag, rows still to generate).
    /// Names are snake_case with their unit (`lag_messages`, `lag_bytes`, `lag_rows`). The
    /// engine asks about once a second, between polls, on the reader's thread, and exports
    /// them (`ferry_source_figure` at `/metrics`): answer from what the reader already
    /// knows, without I/O or blocking.
    fn figures(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// Releases resources; the reader is not used afterwards.
    fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

/// What delivery guarantee a sink can give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkDelivery {
    /// Output becomes visible only when its checkpoint commits (transactional), or writing
    /// the same rows again changes nothing (idempotent).
    ExactlyOnce,
    /// Rows may be written again after a restart.
    AtLeastOnce,
}

/// Creates a sink from its options. One per connector, listed in the registry.
pub trait SinkFactory: Send + Sync {
    /// The plugin name used in job files (`LocalFile`); matched case-insensitively.
    fn name(&self) -> &'static str;
    /// One line on what the sink writes.
    fn description(&self) -> &'static str;
    /// Every option the sink accepts.
    fn options(&self) -> &'static [OptionSpec];
    /// Reads and validates the options for the given input tables.
    fn create(
        &self,
        options: &mut Options,
        input: &[TableSchema],
        job: &JobContext,
    ) -> Result<Arc<dyn Sink>>;
}

/// A configured sink.
pub trait Sink: Send + Sync + Debug {
    /// The guarantee it gives when the job checkpoints.
    fn delivery(&self) -> SinkDelivery;
    /// The guarantee and why, for `ferry check`: begins with the guarantee ("exactly-once:
    /// XA transactions committed with the checkpoint", "exactly-once in effect: upserts by
    /// primary key"); `None` when the guarantee says it all.
    fn delivery_reason(&self) -> Option<String> {
        None
    }
    /// Prepares the target before any writer starts, doing whatever I/O that needs: checks
    /// that it exists, creates it, applies a save mode. Called once per job run, on the side
    /// that commits (the embedded coordinator, Spark's driver), within `ctx`'s deadline; when
    /// `ctx.resumed` the job continues from a checkpoint and what a fresh run does once
    /// (dropping data, recreating a table) must not be redone.
    fn setup(&self, _ctx: &ResolveContext) -> Result<()> {
        Ok(())
    }
    /// A writer, fresh or restored from [`SinkWriter::snapshot`].
    fn create_writer(
        &self,
        ctx: &WriterContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>>;
    /// The committer that publishes prepared commits, if the sink has one.
    fn create_committer(&self) -> Result<Option<Box<dyn SinkCommitter>>> {
        Ok(None)
    }
}

/// Writes batches. One per subtask; runs on one thread.
pub trait SinkWriter: Send {
    /// Writes (or stages) rows.
    fn write(&mut self, batch: &ChangeBatch) -> Result<()>;
    /// Whether [`SinkWriter::write`] keeps the target's value where rows leave a column
    /// unchanged without its value ([`crate::data::Unchanged`]); when not, such rows are
    /// refused before they reach it.
    fn keeps_unchanged(&self) -> bool {
        false
    }
    /// Ends what was written since the last call as the commit of `checkpoint_id`. For an
    /// exactly-once sink nothing may be visible to readers until the committer publishes it.
    fn prepare_commit(&mut self, checkpoint_id: u64) -> Result<Option<Value>>;
    /// State to keep in checkpoint `checkpoint_id`, given to [`Sink::create_writer`] on restore.
    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        Ok(None)
    }
    /// Discards what was written since the last prepared commit.
    fn abort(&mut self) -> Result<()> {
        Ok(())
    }
    /// Called once after the last `prepare_commit` of a job that ended.
    fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Publishes prepared commits. One per sink; lives in the coordinator (Spark: the driver).
pub trait SinkCommitter: Send {
    /// Publishes the commits all writers prepared for `checkpoint_id`. Must be idempotent:
    /// after a crash it may be called again with the same infos.
    fn commit(&mut self, checkpoint_id: u64, infos: Vec<Value>) -> Result<()>;
    /// Discards prepared commits that will never be published.
    fn abort(&mut self, _checkpoint_id: u64, _infos: Vec<Value>) -> Result<()> {
        Ok(())
    }
    /// Called once when a bounded job ends, after its last commit (final checks).
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Creates a transform from its options. One per transform, listed in the registry.
pub trait TransformFactory: Send + Sync {
    /// The plugin name used in job files (`Filter`); matched case-insensitively.
    fn name(&self) -> &'static str;
    /// One line on what the transform does.
    fn description(&self) -> &'static str;
    /// Every option the transform accepts.
    fn options(&self) -> &'static [OptionSpec];
    /// Reads the options and checks them against the input tables' schemas, so that
    /// mistakes (an unknown column, a bad query) fail before any data flows.
    fn create(
        &self,
        options: &mut Options,
        input: &[TableSchema],
        job: &JobContext,
    ) -> Result<Arc<dyn Transform>>;
}

/// A configured transform.
pub trait Transform: Send + Sync + Debug {
    /// The tables it emits, with their schemas.
    fn output_tables(&self) -> Vec<TableSchema>;
    /// A per-subtask instance that does the work.
    fn create_instance(&self) -> Result<Box<dyn TransformInstance>>;
}

/// Transforms batches on one thread.
pub trait TransformInstance: Send {
    /// The transformed batch, or `None` when no row remains. Row kinds are carried through.
    fn transform(&mut self, batch: ChangeBatch) -> Result<Option<ChangeBatch>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Progress {
        path: String,
        rows: u64,
    }

    #[test]
    fn a_typed_split_state_reads_back_and_a_foreign_one_is_an_error_naming_the_split() {
        let p = Progress {
            path: "a.csv".into(),
            rows: 7,
        };
        let split = Split::typed("file-0", &p).unwrap();
        assert_eq!(split.state, serde_json::json!({"path": "a.csv", "rows": 7}));
        assert_eq!(split.read_state::<Progress>().unwrap(), p);
        let damaged = Split {
            id: "file-0".into(),
            state: serde_json::json!({"path": "a.csv", "rows": "seven"}),
        };
        let e = damaged.read_state::<Progress>().unwrap_err().to_string();
        assert!(e.contains("split 'file-0'") && e.contains("rows"), "{e}");
    }
}
