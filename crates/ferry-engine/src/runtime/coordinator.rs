//! The coordinator, on the thread that called [`super::run`]: assigns splits (with each
//! enumerator's discovery on its own thread), triggers checkpoints (periodic, on idle,
//! savepoints, the final one), collects acknowledgements, stores checkpoints and runs the
//! committers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use ferry_api::{FerryError, Result, SinkCommitter, Split, SplitEnumerator};
use ferry_checkpoint::{CheckpointData, CheckpointStore, SinkState, SourceState};
use ferry_plan::JobPlan;
use serde_json::Value;

use super::faults::crash_point;
use super::messages::{Control, Event};
use super::{spawn, RunOutcome, StopHandle};
use crate::metrics::Metrics;

/// How often an enumerator that is not exhausted is asked to discover splits.
pub(super) const DISCOVER_EVERY: Duration = Duration::from_millis(200);

/// A source's enumerator, seen from the coordinator. `discover()` may be slow (a query for
/// a table's bounds, a listing of a remote directory), so it runs on the enumerator's own
/// thread: the coordinator hands the enumerator over and gets it back with what it found
/// ([`Event::Discovered`]), and meanwhile triggers and completes checkpoints as usual.
///
/// A checkpoint triggered while the enumerator is away stores the snapshot taken when it
/// left. That state is consistent with what readers hold: the coordinator sends a
/// discovery's splits to the readers only once the enumerator is back, through the same
/// channels as the checkpoint barriers, so no split of the discovery in flight is in any
/// reader's snapshot of that checkpoint, and a restore discovers those splits again.
/// (The snapshot is asked for with the id of the next checkpoint at the time it leaves;
/// enumerators store what is unassigned, not the id.)
pub(super) struct EnumeratorSlot {
    /// The enumerator while it is with the coordinator; `None` while it discovers.
    home: Option<Box<dyn SplitEnumerator>>,
    /// Its snapshot from when it left for its current discovery.
    away_snapshot: Value,
    /// Checkpoints that completed while it was away, told when it comes back.
    completed: Vec<u64>,
    /// When it last came back (or started): discoveries are [`DISCOVER_EVERY`] apart.
    back_at: Instant,
    /// It said it is exhausted: readers were told there are no more splits.
    exhausted: bool,
    /// Hands the enumerator to its thread for one discovery.
    to_worker: Sender<Box<dyn SplitEnumerator>>,
}

impl EnumeratorSlot {
    /// The slot of source `source`'s `enumerator`, and its discovery thread, which reports
    /// on `ev` and ends when the slot is dropped.
    pub(super) fn start(
        source: usize,
        plugin: &str,
        enumerator: Box<dyn SplitEnumerator>,
        ev: Sender<Event>,
    ) -> Result<(Self, JoinHandle<()>)> {
        let (to_worker, from_coordinator) = unbounded::<Box<dyn SplitEnumerator>>();
        let worker = spawn(&format!("enumerator-{plugin}-{source}"), move || {
            for mut enumerator in from_coordinator {
                let event = match enumerator.discover() {
                    Ok(found) => Event::Discovered {
                        source,
                        exhausted: enumerator.is_exhausted(),
                        enumerator,
                        found,
                    },
                    Err(e) => Event::Failed(e),
                };
                if ev.send(event).is_err() {
                    return;
                }
            }
        })?;
        let slot = EnumeratorSlot {
            home: Some(enumerator),
            away_snapshot: Value::Null,
            completed: Vec::new(),
            back_at: Instant::now() - DISCOVER_EVERY,
            exhausted: false,
            to_worker,
        };
        Ok((slot, worker))
    }

    /// Sends the enumerator off to discover when it is home, not exhausted and its last
    /// discovery is long enough ago; `next_id` names the snapshot it leaves behind.
    pub(super) fn discover_if_due(&mut self, next_id: u64) -> Result<()> {
        if self.exhausted || self.back_at.elapsed() < DISCOVER_EVERY {
            return Ok(());
        }
        let Some(mut e) = self.home.take() else {
            return Ok(());
        };
        self.away_snapshot = e.snapshot(next_id)?;
        self.to_worker
            .send(e)
            .map_err(|_| FerryError::internal("the enumerator's thread stopped"))
    }

    /// The enumerator is back: it is home again and hears of the checkpoints that
    /// completed meanwhile.
    pub(super) fn back(&mut self, mut e: Box<dyn SplitEnumerator>) -> Result<()> {
        for id in self.completed.drain(..) {
            e.notify_checkpoint_complete(id)?;
        }
        self.home = Some(e);
        self.back_at = Instant::now();
        Ok(())
    }

    /// The state to store in checkpoint `id`.
    pub(super) fn snapshot(&mut self, id: u64) -> Result<Value> {
        match self.home.as_mut() {
            Some(e) => e.snapshot(id),
            None => Ok(self.away_snapshot.clone()),
        }
    }

    /// Checkpoint `id` completed.
    pub(super) fn complete(&mut self, id: u64) -> Result<()> {
        match self.home.as_mut() {
            Some(e) => e.notify_checkpoint_complete(id),
            None => {
                self.completed.push(id);
                Ok(())
            }
        }
    }
}

pub(super) struct Coordinator<'a> {
    pub(super) plan: &'a JobPlan,
    pub(super) store: &'a mut dyn CheckpointStore,
    pub(super) enumerators: Vec<EnumeratorSlot>,
    pub(super) controls: Vec<Vec<Sender<Control>>>,
    pub(super) committers: Vec<Option<Box<dyn SinkCommitter>>>,
    pub(super) ev_rx: Receiver<Event>,
    pub(super) total_readers: usize,
    pub(super) total_writers: usize,
    pub(super) next_id: u64,
    pub(super) stop: StopHandle,
    pub(super) cancel: Arc<AtomicBool>,
    /// Index among all readers of reader 0 of each source.
    pub(super) first_reader: Vec<usize>,
    pub(super) catch_up: CatchUp,
    /// Checkpoint statistics go here.
    pub(super) metrics: Arc<Metrics>,
}

/// What `checkpoint.on-idle` triggers on: which readers have caught up with their input,
/// and which emitted rows that no checkpoint triggered so far covers.
pub(super) struct CatchUp {
    caught_up: Vec<bool>,
    pending: Vec<bool>,
    last_triggered: Option<u64>,
}

impl CatchUp {
    pub(super) fn new(readers: usize) -> Self {
        CatchUp {
            caught_up: vec![false; readers],
            pending: vec![false; readers],
            last_triggered: None,
        }
    }

    /// Reader `r` caught up; rows it emitted after barrier `last_barrier` are pending
    /// unless a later checkpoint, whose barrier it has yet to emit, covers them.
    pub(super) fn caught_up(&mut self, r: usize, last_barrier: Option<u64>, pending: bool) {
        self.caught_up[r] = true;
        if pending && last_barrier == self.last_triggered {
            self.pending[r] = true;
        }
    }

    /// Reader `r` emits rows again, or was just given splits.
    pub(super) fn busy(&mut self, r: usize) {
        self.caught_up[r] = false;
    }

    /// Reader `r` ended: caught up for good (a reader ends only after its source's last
    /// split was assigned, so it is never given splits again).
    pub(super) fn finished(&mut self, r: usize) {
        self.caught_up[r] = true;
    }

    /// Checkpoint `id` was triggered: it covers every row emitted so far.
    pub(super) fn triggered(&mut self, id: u64) {
        self.last_triggered = Some(id);
        self.pending.fill(false);
    }

    /// Rows are pending and every reader has caught up (or finished).
    pub(super) fn ready(&self) -> bool {
        self.pending.iter().any(|p| *p) && self.caught_up.iter().all(|c| *c)
    }
}

/// A checkpoint being collected.
pub(super) struct InFlight {
    id: u64,
    started: Instant,
    data: CheckpointData,
    readers_left: usize,
    writers_left: usize,
    commits: Vec<Vec<Value>>,
}

impl Coordinator<'_> {
    /// The error to report for `first`. A task that meets a stopped task downstream (its
    /// channel closed) fails with `Cancelled`, which can arrive before the stopped task's
    /// own error: then that error, if it follows within a second, is the cause.
    fn cause_of(&self, first: FerryError) -> FerryError {
        if !matches!(first, FerryError::Cancelled) {
            return first;
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        while let Ok(ev) = self.ev_rx.recv_deadline(deadline) {
            if let Event::Failed(e) = ev {
                if !matches!(e, FerryError::Cancelled) {
                    return e;
                }
            }
        }
        first
    }

    pub(super) fn run(&mut self) -> Result<RunOutcome> {
        let mut finished_readers = 0usize;
        let mut closed_writers = 0usize;
        let mut inflight: Option<InFlight> = None;
        let mut final_id: Option<u64> = None;
        let mut outcome = RunOutcome::Finished;
        let mut last_checkpoint = Instant::now();
        // When the last checkpoint completed: `checkpoint.min-pause` counts from here.
        let mut last_completed: Option<Instant> = None;
        let min_pause = self.plan.checkpoint.min_pause;
        let on_idle = self.plan.checkpoint.on_idle;
        let interval = self.plan.checkpoint.interval_ms.map(Duration::from_millis);
        let mut ending = false;

        loop {
            if self.stop.cancel_requested() {
                self.cancel.store(true, Ordering::SeqCst);
                return Err(FerryError::Cancelled);
            }
            // Discover splits (streaming sources keep discovering), each enumerator on
            // its own thread; what they find is assigned when they come back.
            if !ending {
                for e in &mut self.enumerators {
                    e.discover_if_due(self.next_id)?;
                }
            }
            // Start a checkpoint: periodic, on idle, a savepoint, or the final one of a
            // bounded job.
            if inflight.is_none() && final_id.is_none() {
                let all_finished = finished_readers == self.total_readers;
                let savepoint = self.stop.savepoint_requested();
                let paused = last_completed.is_none_or(|t| t.elapsed() >= min_pause);
                let periodic = paused && interval.is_some_and(|i| last_checkpoint.elapsed() >= i);
                let idle = paused && on_idle && self.catch_up.ready();
                if all_finished || savepoint || periodic || idle {
                    let id = self.trigger()?;
                    self.catch_up.triggered(id);
                    if all_finished || savepoint {
                        final_id = Some(id);
                        if savepoint && !all_finished {
                            outcome = RunOutcome::Savepoint;
                        }
                    }
                    inflight = Some(self.new_inflight(id)?);
                    last_checkpoint = Instant::now();
                }
            }
            if let Some(f) = &inflight {
                if f.started.elapsed() > Duration::from_millis(self.plan.checkpoint.timeout_ms) {
                    self.metrics.checkpoint_failed();
                    return Err(FerryError::external(
                        "checkpoint",
                        format!(
                            "checkpoint {} timed out after {} ms (checkpoint.timeout)",
                            f.id, self.plan.checkpoint.timeout_ms
                        ),
                    ));
                }
            }
            // Wake up in time for the next periodic checkpoint (and the end of a min-pause).
            let wait = interval
                .map(|i| i.saturating_sub(last_checkpoint.elapsed()))
                .unwrap_or(Duration::from_millis(50))
                .max(
                    last_completed
                        .map_or(Duration::ZERO, |t| min_pause.saturating_sub(t.elapsed())),
                )
                .clamp(Duration::from_millis(1), Duration::from_millis(50));
            let ev = match self.ev_rx.recv_timeout(wait) {
                Ok(ev) => ev,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(FerryError::internal(
                        "every task stopped before the job ended",
                    ));
                }
            };
            match ev {
                Event::Discovered {
                    source,
                    enumerator,
                    found,
                    exhausted,
                } => self.discovered(source, enumerator, found, exhausted)?,
                Event::Failed(FerryError::Cancelled) if self.cancel.load(Ordering::SeqCst) => {}
                Event::Failed(e) => {
                    if inflight.is_some() {
                        self.metrics.checkpoint_failed();
                    }
                    return Err(self.cause_of(e));
                }
                Event::ReaderFinished {
                    source,
                    subtask,
                    reader,
                } => {
                    tracing::debug!(source = %self.plan.sources[source].plugin, subtask, "reader finished");
                    finished_readers += 1;
                    self.catch_up.finished(reader);
                }
                Event::ReaderCaughtUp {
                    reader,
                    last_barrier,
                    pending,
                } => self.catch_up.caught_up(reader, last_barrier, pending),
                Event::ReaderBusy { reader } => self.catch_up.busy(reader),
                Event::ReaderSnapshot {
                    source,
                    subtask,
                    id,
                    splits,
                } => {
                    if let Some(f) = inflight.as_mut().filter(|f| f.id == id) {
                        f.data.sources[source].readers[subtask] = splits;
                        f.readers_left -= 1;
                    }
                }
                Event::WriterAck {
                    sink,
                    subtask,
                    id,
                    commit,
                    state,
                } => {
                    if let Some(f) = inflight.as_mut().filter(|f| f.id == id) {
                        f.data.sinks[sink].writers[subtask] = state;
                        if let Some(c) = commit {
                            f.commits[sink].push(c);
                        }
                        f.writers_left -= 1;
                    }
                }
                Event::WriterClosed => {
                    closed_writers += 1;
                    if closed_writers == self.total_writers {
                        for c in self.committers.iter_mut().flatten() {
                            c.finish()?;
                        }
                        return Ok(outcome);
                    }
                }
            }
            if inflight
                .as_ref()
                .is_some_and(|f| f.readers_left == 0 && f.writers_left == 0)
            {
                if let Some(f) = inflight.take() {
                    self.complete(f)?;
                    last_completed = Some(Instant::now());
                }
                if final_id.is_some() && !ending {
                    ending = true;
                    for c in self.controls.iter().flatten() {
                        let _ = c.send(Control::EndInput);
                    }
                    if self.total_writers == 0 {
                        return Ok(outcome);
                    }
                }
            }
        }
    }

    /// Source `source`'s enumerator came back from a discovery: its splits go to their
    /// readers (by index, so a split keeps its reader), then, if it is exhausted, word that
    /// no more will come.
    pub(super) fn discovered(
        &mut self,
        source: usize,
        enumerator: Box<dyn SplitEnumerator>,
        found: Vec<(usize, Split)>,
        exhausted: bool,
    ) -> Result<()> {
        self.enumerators[source].back(enumerator)?;
        let mut per_reader: BTreeMap<usize, Vec<Split>> = BTreeMap::new();
        for (r, s) in found {
            per_reader
                .entry(r % self.controls[source].len())
                .or_default()
                .push(s);
        }
        for (r, splits) in per_reader {
            self.catch_up.busy(self.first_reader[source] + r);
            let _ = self.controls[source][r].send(Control::AddSplits(splits));
        }
        if exhausted && !self.enumerators[source].exhausted {
            self.enumerators[source].exhausted = true;
            for c in &self.controls[source] {
                let _ = c.send(Control::NoMoreSplits);
            }
        }
        Ok(())
    }

    pub(super) fn trigger(&mut self) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        Ok(id)
    }

    pub(super) fn new_inflight(&mut self, id: u64) -> Result<InFlight> {
        let mut data = CheckpointData {
            id,
            fingerprint: self.plan.fingerprint.clone(),
            layout: Some(self.plan.layout.clone()),
            sources: Vec::new(),
            sinks: Vec::new(),
        };
        // The enumerators are snapshotted before any reader hears of the checkpoint, so
        // every split assigned before this point is in some reader's snapshot.
        for (i, e) in self.enumerators.iter_mut().enumerate() {
            data.sources.push(SourceState {
                enumerator: e.snapshot(id)?,
                readers: vec![Vec::new(); self.controls[i].len()],
            });
        }
        for s in &self.plan.sinks {
            data.sinks.push(SinkState {
                writers: vec![None; s.parallelism],
                commits: Vec::new(),
            });
        }
        for c in self.controls.iter().flatten() {
            let _ = c.send(Control::Checkpoint(id));
        }
        Ok(InFlight {
            id,
            started: Instant::now(),
            data,
            readers_left: self.total_readers,
            writers_left: self.total_writers,
            commits: vec![Vec::new(); self.plan.sinks.len()],
        })
    }

    pub(super) fn complete(&mut self, f: InFlight) -> Result<()> {
        let (id, started) = (f.id, f.started);
        match self.complete_inner(f) {
            Ok(bytes) => {
                self.metrics
                    .checkpoint_completed(id, started.elapsed(), bytes);
                Ok(())
            }
            Err(e) => {
                self.metrics.checkpoint_failed();
                Err(e)
            }
        }
    }

    /// Stores, publishes and completes checkpoint `f`; returns the size of its state.
    fn complete_inner(&mut self, mut f: InFlight) -> Result<u64> {
        for (k, c) in f.commits.iter().enumerate() {
            f.data.sinks[k].commits = c.clone();
        }
        crash_point("checkpoint-acknowledged")?;
        // Durable first, then publish: a crash between the two re-runs the committers.
        self.store.save(&f.data)?;
        crash_point("checkpoint-stored")?;
        for (k, committer) in self.committers.iter_mut().enumerate() {
            if let Some(c) = committer {
                c.commit(f.id, f.commits[k].clone())?;
                crash_point("sink-committed")?;
            }
        }
        self.store.mark_committed(f.id)?;
        crash_point("checkpoint-committed")?;
        for e in self.enumerators.iter_mut() {
            e.complete(f.id)?;
        }
        for c in self.controls.iter().flatten() {
            let _ = c.send(Control::Complete(f.id));
        }
        tracing::debug!(
            checkpoint = f.id,
            ms = f.started.elapsed().as_millis() as u64,
            "checkpoint complete"
        );
        Ok(state_size(&f.data))
    }
}

/// The size of a checkpoint's state: its JSON (snapshots, prepared commits, layout).
fn state_size(data: &CheckpointData) -> u64 {
    serde_json::to_vec(data).map_or(0, |v| v.len() as u64)
}

#[cfg(test)]
mod catch_up_tests {
    use super::CatchUp;

    #[test]
    fn ready_once_every_reader_caught_up_with_rows_no_checkpoint_covers() {
        let mut c = CatchUp::new(2);
        c.caught_up(0, None, true);
        assert!(!c.ready(), "reader 1 has not caught up");
        c.caught_up(1, None, false);
        assert!(c.ready());
        c.busy(1);
        assert!(!c.ready(), "reader 1 got new splits");
        c.finished(1);
        assert!(c.ready(), "a finished reader counts as caught up");
        c.triggered(7);
        assert!(!c.ready(), "checkpoint 7 covers the rows");
    }

    #[test]
    fn rows_before_a_barrier_not_yet_emitted_are_covered_by_its_checkpoint() {
        let mut c = CatchUp::new(1);
        c.triggered(3);
        // Caught up before it saw checkpoint 3: its rows go into checkpoint 3.
        c.caught_up(0, Some(2), true);
        assert!(!c.ready());
        // Rows after barrier 3 need a new checkpoint.
        c.caught_up(0, Some(3), true);
        assert!(c.ready());
        c.caught_up(0, Some(3), false);
        c.triggered(4);
        c.caught_up(0, Some(4), false);
        assert!(!c.ready(), "nothing emitted since barrier 4");
    }
}
