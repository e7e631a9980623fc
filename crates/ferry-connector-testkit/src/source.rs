//! Driving a source: enumerator, readers, snapshots and restores.

use std::time::{Duration, Instant};

use ferry_api::{
    ChangeBatch, EnumeratorContext, FerryError, JobContext, ReadStatus, ReaderContext, Result,
    Source, SourceReader, Split, SplitEnumerator,
};
use serde_json::Value;

use crate::{ensure_same_rows, rows, through_text};

/// How long a driver waits for a source before it calls the source stuck.
const PATIENCE: Duration = Duration::from_secs(60);

/// What a checkpoint holds of a source: the enumerator's state and each reader's splits,
/// as read back from their JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSnapshot {
    /// The checkpoint it was taken for.
    pub checkpoint_id: u64,
    /// [`SplitEnumerator::snapshot`].
    pub enumerator: Value,
    /// [`SourceReader::snapshot`] of reader `i` at index `i`.
    pub readers: Vec<Vec<Split>>,
}

/// Runs one source on the calling thread as the embedded engine does: the enumerator
/// assigns what it discovers, every reader is told when no more splits will come, and
/// readers are polled in turn; a snapshot is taken between two polls, so it covers exactly
/// the rows returned so far.
pub struct SourceDriver {
    job: JobContext,
    enumerator: Box<dyn SplitEnumerator>,
    readers: Vec<Box<dyn SourceReader>>,
    finished: Vec<bool>,
    told_no_more: bool,
    next_checkpoint: u64,
    output: Vec<ChangeBatch>,
}

impl SourceDriver {
    /// A fresh run with `parallelism` readers.
    pub fn start(source: &dyn Source, parallelism: usize, job: JobContext) -> Result<Self> {
        Self::open(source, parallelism, job, None)
    }

    /// A run restored from `snapshot`: the enumerator gets its state back and every reader
    /// its splits, in fresh instances, as after a restart.
    pub fn restore(
        source: &dyn Source,
        parallelism: usize,
        job: JobContext,
        snapshot: &SourceSnapshot,
    ) -> Result<Self> {
        if snapshot.readers.len() != parallelism {
            return Err(FerryError::internal(format!(
                "the snapshot holds {} readers, the restore asks for {parallelism}",
                snapshot.readers.len()
            )));
        }
        Self::open(source, parallelism, job, Some(snapshot))
    }

    fn open(
        source: &dyn Source,
        parallelism: usize,
        job: JobContext,
        snapshot: Option<&SourceSnapshot>,
    ) -> Result<Self> {
        let enumerator = source.create_enumerator(
            &EnumeratorContext {
                parallelism,
                job: job.clone(),
            },
            snapshot.map(|s| s.enumerator.clone()),
        )?;
        let mut readers = Vec::with_capacity(parallelism);
        for subtask in 0..parallelism {
            let mut reader = source.create_reader(&ReaderContext {
                subtask,
                parallelism,
                job: job.clone(),
            })?;
            if let Some(splits) = snapshot.map(|s| &s.readers[subtask]) {
                if !splits.is_empty() {
                    reader.add_splits(splits.clone())?;
                }
            }
            readers.push(reader);
        }
        Ok(SourceDriver {
            job,
            enumerator,
            finished: vec![false; parallelism],
            readers,
            told_no_more: false,
            next_checkpoint: snapshot.map_or(1, |s| s.checkpoint_id + 1),
            output: Vec::new(),
        })
    }

    /// The job the readers were created for.
    pub fn job(&self) -> &JobContext {
        &self.job
    }

    /// One round: what the enumerator discovers is assigned, readers hear once that no
    /// more splits will come when the enumerator is exhausted, and every reader that has
    /// not finished is polled once. Returns the rows this round read; sleeps briefly when
    /// every reader idled.
    pub fn step(&mut self) -> Result<usize> {
        for (reader, split) in self.enumerator.discover()? {
            let parallelism = self.readers.len();
            let r = self.readers.get_mut(reader).ok_or_else(|| {
                FerryError::internal(format!(
                    "the enumerator assigned split '{}' to reader {reader} of {parallelism}",
                    split.id
                ))
            })?;
            r.add_splits(vec![split])?;
        }
        if !self.told_no_more && self.enumerator.is_exhausted() {
            self.told_no_more = true;
            for r in &mut self.readers {
                r.no_more_splits();
            }
        }
        let (mut read, mut idle) = (0, None::<Duration>);
        for (r, finished) in self.readers.iter_mut().zip(&mut self.finished) {
            if *finished {
                continue;
            }
            match r.poll_next()? {
                ReadStatus::Batch(b) => {
                    read += b.num_rows();
                    if b.num_rows() > 0 {
                        self.output.push(b);
                    }
                }
                ReadStatus::Idle(d) => idle = Some(idle.map_or(d, |i| i.min(d))),
                ReadStatus::Finished => *finished = true,
            }
        }
        if read == 0 {
            if let Some(d) = idle {
                std::thread::sleep(d.min(Duration::from_millis(10)));
            }
        }
        Ok(read)
    }

    /// Whether every reader has finished and the enumerator will assign nothing more.
    pub fn is_finished(&self) -> bool {
        self.told_no_more && self.finished.iter().all(|f| *f)
    }

    /// Steps until every reader has finished (a bounded source read to its end).
    pub fn run_to_end(&mut self) -> Result<()> {
        self.run_until(usize::MAX)
    }

    /// Steps until at least `rows` rows were read in all, or the source finished.
    pub fn run_until(&mut self, rows: usize) -> Result<()> {
        let start = Instant::now();
        while self.rows_read() < rows && !self.is_finished() {
            self.step()?;
            if start.elapsed() > PATIENCE {
                return Err(FerryError::internal(format!(
                    "the source neither finished nor read {rows} rows within {PATIENCE:?} ({} read)",
                    self.rows_read()
                )));
            }
        }
        Ok(())
    }

    /// Takes checkpoint `N` (the next id): the enumerator first, then every reader, each
    /// state through its JSON text.
    pub fn snapshot(&mut self) -> Result<SourceSnapshot> {
        let id = self.next_checkpoint;
        self.next_checkpoint += 1;
        let enumerator = through_text(&self.enumerator.snapshot(id)?)?;
        let mut readers = Vec::with_capacity(self.readers.len());
        for r in &mut self.readers {
            let splits = serde_json::to_value(r.snapshot(id)?)
                .map_err(|e| FerryError::internal(format!("splits do not serialise: {e}")))?;
            readers.push(
                serde_json::from_value(through_text(&splits)?)
                    .map_err(|e| FerryError::internal(format!("splits do not read back: {e}")))?,
            );
        }
        Ok(SourceSnapshot {
            checkpoint_id: id,
            enumerator,
            readers,
        })
    }

    /// Tells the enumerator and every reader that checkpoint `id` completed.
    pub fn complete(&mut self, id: u64) -> Result<()> {
        self.enumerator.notify_checkpoint_complete(id)?;
        for r in &mut self.readers {
            r.notify_checkpoint_complete(id)?;
        }
        Ok(())
    }

    /// Rows read so far.
    pub fn rows_read(&self) -> usize {
        self.output.iter().map(ChangeBatch::num_rows).sum()
    }

    /// The batches read so far.
    pub fn output(&self) -> &[ChangeBatch] {
        &self.output
    }

    /// Reader `reader`'s own figures ([`SourceReader::figures`]), as the engine exports them.
    pub fn figures(&self, reader: usize) -> Vec<(&'static str, f64)> {
        self.readers
            .get(reader)
            .map(|r| r.figures())
            .unwrap_or_default()
    }

    /// The batches read so far, leaving none.
    pub fn take_output(&mut self) -> Vec<ChangeBatch> {
        std::mem::take(&mut self.output)
    }

    /// Closes every reader.
    pub fn close(mut self) -> Result<()> {
        for r in &mut self.readers {
            r.close()?;
        }
        Ok(())
    }
}

/// Reads a bounded source to its end in one run.
pub fn read_all(
    source: &dyn Source,
    parallelism: usize,
    job: JobContext,
) -> Result<Vec<ChangeBatch>> {
    let mut d = SourceDriver::start(source, parallelism, job)?;
    d.run_to_end()?;
    let out = d.take_output();
    d.close()?;
    Ok(out)
}

/// Proves that a bounded source resumes exactly: reads it whole once; then reads about
/// `at_rows` rows, snapshots, throws those readers away and reads the rest from the
/// snapshot in fresh ones. The rows before the snapshot plus the rows after the restore
/// must be the whole input, none lost and none read twice. Returns the whole input.
pub fn check_source_restore(
    source: &dyn Source,
    parallelism: usize,
    job: JobContext,
    at_rows: usize,
) -> Result<Vec<ChangeBatch>> {
    let whole = read_all(source, parallelism, job.clone())?;
    let mut first = SourceDriver::start(source, parallelism, job.clone())?;
    first.run_until(at_rows)?;
    let snapshot = first.snapshot()?;
    let mut seen = first.take_output();
    // The readers are dropped without close, as a crashed process leaves them.
    drop(first);
    let mut second = SourceDriver::restore(source, parallelism, job, &snapshot)?;
    second.run_to_end()?;
    seen.extend(second.take_output());
    second.close()?;
    ensure_same_rows(
        &format!("rows before a snapshot taken after {at_rows} rows plus rows after restoring it"),
        &rows(&whole),
        &rows(&seen),
    )?;
    Ok(whole)
}

/// Proves that a bounded source replays: restoring the same snapshot twice reads the same
/// rows both times (what exactly-once delivery after a restart relies on).
pub fn check_source_replay(
    source: &dyn Source,
    parallelism: usize,
    job: JobContext,
    at_rows: usize,
) -> Result<()> {
    let mut first = SourceDriver::start(source, parallelism, job.clone())?;
    first.run_until(at_rows)?;
    let snapshot = first.snapshot()?;
    drop(first);
    let mut replays = Vec::new();
    for _ in 0..2 {
        let mut d = SourceDriver::restore(source, parallelism, job.clone(), &snapshot)?;
        d.run_to_end()?;
        replays.push(rows(&d.take_output()));
        d.close()?;
    }
    ensure_same_rows(
        &format!("two replays of checkpoint {}", snapshot.checkpoint_id),
        &replays[0],
        &replays[1],
    )
}

/// Proves that a read can be replayed exactly, as Spark replays a micro-batch after a crash:
/// readers restored from a snapshot `start` (taken after the first round), with their splits
/// bounded by [`Source::bound_splits`] at the snapshot `end` that a first read took after at
/// least `at_rows` more rows, and stopped at the first read's row count, return that read's
/// rows. A source whose readers interleave several splits in an order they do not choose
/// fails it unless it bounds its splits. `more_input` is called after each of the two
/// snapshots, for streaming sources: what it adds after `start` is read by the first read,
/// what it adds after `end` must not take the place of the first read's rows in the replay.
pub fn check_source_bounded_replay(
    source: &dyn Source,
    parallelism: usize,
    job: JobContext,
    at_rows: usize,
    more_input: &mut dyn FnMut(),
) -> Result<()> {
    let mut first = SourceDriver::start(source, parallelism, job.clone())?;
    first.step()?;
    let start = first.snapshot()?;
    first.take_output();
    more_input();
    first.run_until(at_rows)?;
    let end = first.snapshot()?;
    let expected = rows(&first.take_output());
    first.close()?;
    more_input();
    let mut bounded = start.clone();
    for (i, splits) in bounded.readers.iter_mut().enumerate() {
        *splits = source.bound_splits(std::mem::take(splits), &end.readers[i])?;
    }
    let mut replay = SourceDriver::restore(source, parallelism, job, &bounded)?;
    let began = Instant::now();
    while replay.rows_read() < expected.len() && !replay.is_finished() {
        replay.step()?;
        if began.elapsed() > PATIENCE {
            return Err(FerryError::internal(format!(
                "a replay bounded at checkpoint {} read {} of the first read's {} rows within {PATIENCE:?}",
                end.checkpoint_id,
                replay.rows_read(),
                expected.len()
            )));
        }
    }
    let replayed = rows(&first_rows(replay.take_output(), expected.len()));
    replay.close()?;
    ensure_same_rows(
        &format!(
            "a replay of {} rows from checkpoint {} bounded at checkpoint {}",
            expected.len(),
            start.checkpoint_id,
            end.checkpoint_id
        ),
        &expected,
        &replayed,
    )
}

/// The first `n` rows of `batches`, in order (the last batch cut), as an engine that stops
/// a replay at a row count returns them.
fn first_rows(batches: Vec<ChangeBatch>, mut n: usize) -> Vec<ChangeBatch> {
    let mut out = Vec::new();
    for b in batches {
        if n == 0 {
            break;
        }
        let k = b.num_rows().min(n);
        n -= k;
        out.push(b.slice(0, k));
    }
    out
}
