//! Driving a sink: writers, prepared commits, the committer, crashes and restores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ferry_api::{
    ChangeBatch, FerryError, JobContext, Result, Sink, SinkCommitter, SinkDelivery, SinkWriter,
    WriterContext,
};
use serde_json::Value;

use crate::{diff_rows, ensure_same_rows, rows, through_text};

/// What a checkpoint holds of a sink: every writer's prepared commit and state, as read
/// back from their JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkCheckpoint {
    /// The checkpoint id.
    pub checkpoint_id: u64,
    /// The prepared commits ([`SinkWriter::prepare_commit`]) of the writers that had one.
    pub commits: Vec<Value>,
    /// [`SinkWriter::snapshot`] of writer `i` at index `i`.
    pub writers: Vec<Option<Value>>,
}

/// Runs one sink on the calling thread as the embedded engine does: batches are written,
/// a checkpoint prepares a commit in every writer and snapshots it, the committer
/// publishes what was stored, and a restore creates fresh writers from their states after
/// publishing again a checkpoint that was stored but not marked published.
pub struct SinkDriver {
    sink: Arc<dyn Sink>,
    job: JobContext,
    writers: Vec<Box<dyn SinkWriter>>,
    committer: Option<Box<dyn SinkCommitter>>,
    next_checkpoint: u64,
}

impl SinkDriver {
    /// Fresh writers, `parallelism` of them.
    pub fn start(sink: Arc<dyn Sink>, parallelism: usize, job: JobContext) -> Result<Self> {
        Self::open(sink, parallelism, job, None)
    }

    /// A restart from `last`: when it was stored but not published (`published` false) the
    /// committer publishes it again first, then every writer is created from its state.
    pub fn restore(
        sink: Arc<dyn Sink>,
        parallelism: usize,
        job: JobContext,
        last: &SinkCheckpoint,
        published: bool,
    ) -> Result<Self> {
        if last.writers.len() != parallelism {
            return Err(FerryError::internal(format!(
                "the checkpoint holds {} writers, the restore asks for {parallelism}",
                last.writers.len()
            )));
        }
        if !published {
            if let Some(mut c) = sink.create_committer()? {
                c.commit(last.checkpoint_id, last.commits.clone())?;
            }
        }
        Self::open(sink, parallelism, job, Some(last))
    }

    fn open(
        sink: Arc<dyn Sink>,
        parallelism: usize,
        job: JobContext,
        last: Option<&SinkCheckpoint>,
    ) -> Result<Self> {
        static ATTEMPT: AtomicU64 = AtomicU64::new(0);
        let mut writers = Vec::with_capacity(parallelism);
        for subtask in 0..parallelism {
            let ctx = WriterContext {
                subtask,
                parallelism,
                job: job.clone(),
                attempt: format!(
                    "testkit-{}-{}",
                    std::process::id(),
                    ATTEMPT.fetch_add(1, Ordering::Relaxed)
                ),
            };
            let state = last.and_then(|l| l.writers[subtask].clone());
            writers.push(sink.create_writer(&ctx, state)?);
        }
        Ok(SinkDriver {
            committer: sink.create_committer()?,
            sink,
            job,
            writers,
            next_checkpoint: last.map_or(1, |l| l.checkpoint_id + 1),
        })
    }

    /// The job the writers were created for.
    pub fn job(&self) -> &JobContext {
        &self.job
    }

    /// Writes `batch` with writer `writer`.
    pub fn write(&mut self, writer: usize, batch: &ChangeBatch) -> Result<()> {
        let n = self.writers.len();
        self.writers
            .get_mut(writer)
            .ok_or_else(|| FerryError::internal(format!("no writer {writer} of {n}")))?
            .write(batch)
    }

    /// Writes batch `i` with writer `i mod parallelism`.
    pub fn write_all(&mut self, batches: &[ChangeBatch]) -> Result<()> {
        let n = self.writers.len();
        for (i, b) in batches.iter().enumerate() {
            self.write(i % n, b)?;
        }
        Ok(())
    }

    /// Checkpoint `N` (the next id) as far as the barrier: every writer prepares its commit
    /// and snapshots its state. Nothing is published yet.
    pub fn prepare(&mut self) -> Result<SinkCheckpoint> {
        let id = self.next_checkpoint;
        self.next_checkpoint += 1;
        let (mut commits, mut states) = (Vec::new(), Vec::new());
        for w in &mut self.writers {
            if let Some(c) = w.prepare_commit(id)? {
                commits.push(through_text(&c)?);
            }
            states.push(w.snapshot(id)?.map(|s| through_text(&s)).transpose()?);
        }
        Ok(SinkCheckpoint {
            checkpoint_id: id,
            commits,
            writers: states,
        })
    }

    /// Publishes a prepared checkpoint with this run's committer.
    pub fn commit(&mut self, checkpoint: &SinkCheckpoint) -> Result<()> {
        match &mut self.committer {
            Some(c) => c.commit(checkpoint.checkpoint_id, checkpoint.commits.clone()),
            None => Ok(()),
        }
    }

    /// [`prepare`](Self::prepare) then [`commit`](Self::commit).
    pub fn checkpoint(&mut self) -> Result<SinkCheckpoint> {
        let cp = self.prepare()?;
        self.commit(&cp)?;
        Ok(cp)
    }

    /// Every writer discards what it wrote since its last prepared commit.
    pub fn abort(&mut self) -> Result<()> {
        for w in &mut self.writers {
            w.abort()?;
        }
        Ok(())
    }

    /// Drops every writer and the committer without closing anything, as `kill -9` does.
    pub fn crash(self) {
        drop(self);
    }

    /// Ends a bounded job as the engine does: a final checkpoint, published, then every
    /// writer closes and the committer finishes. Returns the final checkpoint.
    pub fn finish(mut self) -> Result<SinkCheckpoint> {
        let cp = self.checkpoint()?;
        for w in &mut self.writers {
            w.close()?;
        }
        if let Some(c) = &mut self.committer {
            c.finish()?;
        }
        Ok(cp)
    }

    /// The sink these writers belong to.
    pub fn sink(&self) -> &Arc<dyn Sink> {
        &self.sink
    }
}

/// Row `offset .. offset + len` of `batch`, row kinds included.
fn slice(batch: &ChangeBatch, offset: usize, len: usize) -> ChangeBatch {
    batch.slice(offset, len)
}

/// `input` cut into four parts, each holding a quarter of every batch.
fn quarters(input: &[ChangeBatch]) -> [Vec<ChangeBatch>; 4] {
    let mut parts: [Vec<ChangeBatch>; 4] = Default::default();
    for b in input {
        let n = b.num_rows();
        for (k, part) in parts.iter_mut().enumerate() {
            let (from, to) = (n * k / 4, n * (k + 1) / 4);
            if to > from {
                part.push(slice(b, from, to - from));
            }
        }
    }
    parts
}

/// The crash scenario both checks run. `make_sink` creates the sink as a restarted job
/// would (called once per run); `read_back` returns every row visible in the sink's
/// target now. The input is written in four parts A B C D:
///
/// 1. A, checkpoint 1 prepared and published, crash before it is marked published;
///    the restart publishes checkpoint 1 again (committers are idempotent).
/// 2. B, checkpoint 2 prepared and stored, crash before it is published; the restart
///    publishes it.
/// 3. C, written and never prepared, crash: C is lost to the sink and replayed by the
///    source. (An exactly-once sink must show A and B only at this point.)
/// 4. C written, aborted, written again, D written, final checkpoint, close, finish.
fn crash_scenario(
    make_sink: &dyn Fn() -> Result<Arc<dyn Sink>>,
    parallelism: usize,
    job: &JobContext,
    input: &[ChangeBatch],
    read_back: &dyn Fn() -> Result<Vec<ChangeBatch>>,
    expect: SinkDelivery,
) -> Result<()> {
    let [a, b, c, d] = quarters(input);
    let check = |what: &str, expected: Vec<&Vec<ChangeBatch>>| -> Result<()> {
        let want = rows(&expected.into_iter().flatten().cloned().collect::<Vec<_>>());
        let got = rows(&read_back()?);
        match expect {
            SinkDelivery::ExactlyOnce => ensure_same_rows(what, &want, &got),
            SinkDelivery::AtLeastOnce => {
                let mut distinct = got.clone();
                distinct.dedup();
                // Every wanted row must be there at least once.
                let missing: Vec<&String> = want
                    .iter()
                    .filter(|r| distinct.binary_search(r).is_err())
                    .collect();
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(FerryError::internal(format!(
                        "{what}: {} rows lost{}",
                        missing.len(),
                        diff_rows(&want, &got)
                            .map(|d| format!(" ({d})"))
                            .unwrap_or_default()
                    )))
                }
            }
        }
    };

    let mut run = SinkDriver::start(make_sink()?, parallelism, job.clone())?;
    run.write_all(&a)?;
    let cp1 = run.checkpoint()?;
    run.crash();
    check("after checkpoint 1 was published", vec![&a])?;

    let mut run = SinkDriver::restore(make_sink()?, parallelism, job.clone(), &cp1, false)?;
    check("after checkpoint 1 was published a second time", vec![&a])?;
    run.write_all(&b)?;
    let cp2 = run.prepare()?;
    run.crash();

    let mut run = SinkDriver::restore(make_sink()?, parallelism, job.clone(), &cp2, false)?;
    check(
        "after a restart published the stored checkpoint 2",
        vec![&a, &b],
    )?;
    run.write_all(&c)?;
    run.crash();
    if matches!(expect, SinkDelivery::ExactlyOnce) {
        check(
            "after a crash lost rows that no checkpoint held",
            vec![&a, &b],
        )?;
    }

    let mut run = SinkDriver::restore(make_sink()?, parallelism, job.clone(), &cp2, true)?;
    run.write_all(&c)?;
    run.abort()?;
    run.write_all(&c)?;
    run.write_all(&d)?;
    run.finish()?;
    check("at the end", vec![&a, &b, &c, &d])
}

/// Proves that a sink keeps its promise through the crashes of the scenario above (a
/// crash after publishing, one between storing and publishing, one before any prepare,
/// and an abort). With [`SinkDelivery::ExactlyOnce`] every input row ends up in the target
/// exactly once and rows that no checkpoint held are never visible; with
/// [`SinkDelivery::AtLeastOnce`] every input row ends up there at least once.
pub fn check_sink(
    delivery: SinkDelivery,
    make_sink: &dyn Fn() -> Result<Arc<dyn Sink>>,
    parallelism: usize,
    job: JobContext,
    input: &[ChangeBatch],
    read_back: &dyn Fn() -> Result<Vec<ChangeBatch>>,
) -> Result<()> {
    crash_scenario(make_sink, parallelism, &job, input, read_back, delivery)
}
