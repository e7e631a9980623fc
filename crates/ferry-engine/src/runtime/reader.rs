//! A source reader's thread: polls the reader through the shared source-chain executor
//! (`ferry_plan::SourceChain`), runs the transforms downstream of it in the same thread
//! ([`Route::Transform`]) and sends rows, barriers and end of input to the writers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use ferry_api::{ChangeBatch, FerryError, Result, MAX_IDLE_WITH_READINESS};
use ferry_plan::{ChainedTransform, JobPlan, Polled, SourceChain};

use super::messages::{Control, Event, Msg};
use crate::metrics::{Flow, Metrics};

/// One downstream edge of a stream inside a reader thread.
pub(super) enum Route {
    /// A transform chained into this thread, then the streams it feeds.
    Transform {
        transform: ChainedTransform,
        next: Vec<Route>,
    },
    /// The input channels of one sink's writers: rows go to `target`, barriers to all.
    Sink {
        txs: Vec<Sender<(usize, Msg)>>,
        target: usize,
        sender_id: usize,
        /// The sink's counters: time spent waiting on a full channel is backpressure.
        flow: Arc<Flow>,
    },
}

/// The routes for rows of `stream` in reader `subtask`: chained transform instances
/// and the writer channel of every sink reached.
pub(super) fn build_routes(
    plan: &JobPlan,
    stream: &str,
    subtask: usize,
    sink_txs: &[Vec<Sender<(usize, Msg)>>],
    sender_ids: &mut [usize],
    metrics: &Metrics,
) -> Result<Vec<Route>> {
    let mut routes = Vec::new();
    let readers = plan.readers_of(stream);
    for t in readers.transforms.iter().map(|t| &plan.transforms[*t]) {
        let next = build_routes(plan, &t.output, subtask, sink_txs, sender_ids, metrics)?;
        routes.push(Route::Transform {
            transform: ChainedTransform::new(t)?,
            next,
        });
    }
    for k in readers.sinks {
        let s = &plan.sinks[k];
        routes.push(Route::Sink {
            txs: sink_txs[k].clone(),
            target: subtask % s.parallelism,
            sender_id: sender_ids[k],
            flow: metrics.sink_flow(&s.label),
        });
        sender_ids[k] += 1;
    }
    Ok(routes)
}

/// What a reader's wait between polls ended with.
pub(super) enum Wait {
    /// A message from the coordinator.
    Control(Control),
    /// The time passed, or the reader signalled that data may be ready.
    Quiet,
    /// The coordinator is gone: the run is over.
    Disconnected,
}

pub(super) struct ReaderTask {
    /// The source's reader; its batches get the source's table name here.
    pub(super) chain: SourceChain,
    /// The reader's signal that data may be ready, if it offers one.
    pub(super) readiness: Option<ferry_api::io::Readiness>,
    pub(super) routes: Vec<Route>,
    pub(super) ctl: Receiver<Control>,
    pub(super) ev: Sender<Event>,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) source: usize,
    pub(super) subtask: usize,
    /// Index among all readers of the job.
    pub(super) index: usize,
    /// Whether to tell the coordinator when this reader catches up (`checkpoint.on-idle`).
    pub(super) report_caught_up: bool,
    pub(super) rows: Arc<Flow>,
    /// Where the reader's own figures go, and under which stream.
    pub(super) metrics: Arc<Metrics>,
    pub(super) stream: String,
}

/// How often a reader is asked for its own figures.
const FIGURES_EVERY: Duration = Duration::from_secs(1);

impl ReaderTask {
    pub(super) fn run(&mut self) -> Result<()> {
        let mut finished = false;
        let mut idle_for = Duration::ZERO;
        // For `checkpoint.on-idle`: rows emitted since the last barrier, that barrier, and
        // whether the coordinator was told this reader caught up (and nothing since).
        let mut pending = false;
        let mut last_barrier = None;
        let mut reported_caught_up = false;
        let mut figures_at: Option<Instant> = None;
        loop {
            if self.cancel.load(Ordering::Relaxed) {
                return Ok(());
            }
            if figures_at.is_none_or(|t| t.elapsed() >= FIGURES_EVERY) {
                figures_at = Some(Instant::now());
                let figures = self.chain.reader().figures();
                if !figures.is_empty() {
                    self.metrics
                        .set_figures(&self.stream, self.subtask, &figures);
                }
            }
            // Control first: a barrier goes out between two polls, after every row already emitted.
            let ctl = if finished || !idle_for.is_zero() {
                let timeout = if finished {
                    Duration::from_millis(100)
                } else {
                    idle_for
                };
                match self.wait(timeout, finished) {
                    Wait::Control(c) => Some(c),
                    Wait::Quiet => None,
                    Wait::Disconnected => return Ok(()),
                }
            } else {
                self.ctl.try_recv().ok()
            };
            idle_for = Duration::ZERO;
            if let Some(c) = ctl {
                match c {
                    Control::AddSplits(splits) => {
                        // The coordinator counts this reader busy until it reports again.
                        reported_caught_up = false;
                        self.chain.reader().add_splits(splits)?
                    }
                    Control::NoMoreSplits => self.chain.reader().no_more_splits(),
                    Control::Checkpoint(id) => {
                        let splits = self.chain.reader().snapshot(id)?;
                        let _ = self.ev.send(Event::ReaderSnapshot {
                            source: self.source,
                            subtask: self.subtask,
                            id,
                            splits,
                        });
                        broadcast(&mut self.routes, &|| Msg::Barrier(id))?;
                        pending = false;
                        last_barrier = Some(id);
                    }
                    Control::Complete(id) => self.chain.reader().notify_checkpoint_complete(id)?,
                    Control::EndInput => {
                        self.chain.reader().close()?;
                        broadcast(&mut self.routes, &|| Msg::End)?;
                        return Ok(());
                    }
                }
                continue;
            }
            if finished {
                continue;
            }
            match self.chain.poll(|b| b)? {
                Polled::Batch { read: 0, .. } => continue,
                Polled::Batch { read, out } => {
                    let bytes = out.as_ref().map_or(0, |b| b.data.get_array_memory_size());
                    self.rows.add(read, bytes);
                    if let Some(b) = out {
                        emit(&mut self.routes, b)?;
                    }
                    pending = true;
                    if reported_caught_up {
                        reported_caught_up = false;
                        let _ = self.ev.send(Event::ReaderBusy { reader: self.index });
                    }
                }
                Polled::Idle(d) => {
                    // A reader that signals readiness is woken by it; others are polled.
                    let longest = if self.readiness.is_some() {
                        MAX_IDLE_WITH_READINESS
                    } else {
                        Duration::from_millis(200)
                    };
                    idle_for = d.clamp(Duration::from_millis(1), longest);
                    if self.report_caught_up && !reported_caught_up {
                        reported_caught_up = true;
                        self.tell_caught_up(last_barrier, pending);
                    }
                }
                Polled::Finished => {
                    finished = true;
                    if self.report_caught_up && pending {
                        self.tell_caught_up(last_barrier, pending);
                    }
                    let _ = self.ev.send(Event::ReaderFinished {
                        source: self.source,
                        subtask: self.subtask,
                        reader: self.index,
                    });
                }
            }
        }
    }

    /// Waits up to `timeout` for a control message or, while the reader has not finished,
    /// for its readiness signal (data may have arrived: poll again).
    pub(super) fn wait(&self, timeout: Duration, finished: bool) -> Wait {
        let control = |c: std::result::Result<Control, _>| match c {
            Ok(c) => Wait::Control(c),
            Err(_) => Wait::Disconnected,
        };
        match &self.readiness {
            Some(ready) if !finished => crossbeam_channel::select! {
                recv(self.ctl) -> c => control(c),
                recv(ready.receiver()) -> _ => Wait::Quiet,
                default(timeout) => Wait::Quiet,
            },
            _ => match self.ctl.recv_timeout(timeout) {
                Ok(c) => Wait::Control(c),
                Err(RecvTimeoutError::Timeout) => Wait::Quiet,
                Err(RecvTimeoutError::Disconnected) => Wait::Disconnected,
            },
        }
    }

    /// Tells the coordinator this reader has read all it has for now (`checkpoint.on-idle`).
    pub(super) fn tell_caught_up(&self, last_barrier: Option<u64>, pending: bool) {
        let _ = self.ev.send(Event::ReaderCaughtUp {
            reader: self.index,
            last_barrier,
            pending,
        });
    }
}

/// Sends `batch` down every route; transforms run here, in the reader's thread.
pub(super) fn emit(routes: &mut [Route], batch: ChangeBatch) -> Result<()> {
    let n = routes.len();
    let mut batch = Some(batch);
    for (i, r) in routes.iter_mut().enumerate() {
        // The last route takes the batch, the others a cheap clone (Arc'd columns).
        let b = if i + 1 == n {
            batch.take()
        } else {
            batch.clone()
        };
        let Some(b) = b else { break };
        match r {
            Route::Transform { transform, next } => {
                if let Some(out) = transform.apply(b)? {
                    emit(next, out)?;
                }
            }
            Route::Sink {
                txs,
                target,
                sender_id,
                flow,
            } => {
                // A full channel is the sink holding the source back: time the wait.
                match txs[*target].try_send((*sender_id, Msg::Data(b))) {
                    Ok(()) => {}
                    Err(TrySendError::Full(m)) => {
                        let started = Instant::now();
                        txs[*target].send(m).map_err(|_| FerryError::Cancelled)?;
                        flow.wait_ns
                            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    }
                    Err(TrySendError::Disconnected(_)) => return Err(FerryError::Cancelled),
                }
            }
        }
    }
    Ok(())
}

/// Sends a control message (barrier, end) to every writer reachable through `routes`.
pub(super) fn broadcast(routes: &mut [Route], make: &dyn Fn() -> Msg) -> Result<()> {
    for r in routes.iter_mut() {
        match r {
            Route::Transform { next, .. } => broadcast(next, make)?,
            Route::Sink { txs, sender_id, .. } => {
                for tx in txs.iter() {
                    tx.send((*sender_id, make()))
                        .map_err(|_| FerryError::Cancelled)?;
                }
            }
        }
    }
    Ok(())
}
