//! Runs a [`JobPlan`]: one thread per source reader (with the transforms downstream of
//! it chained in the same thread, so a batch crosses no thread between source and
//! transform), one thread per sink writer fed by a bounded channel (a slow sink slows
//! the sources, memory stays bounded), and a coordinator on the calling thread that
//! assigns splits and drives checkpoints.
//!
//! Checkpoint `N`: the coordinator snapshots the enumerators and sends `Checkpoint(N)` to
//! every reader; a reader, between two polls, snapshots its splits and sends barrier `N`
//! after the rows it already emitted, to every writer downstream. A writer that has
//! barrier `N` from all its inputs (holding back inputs that delivered it first, in
//! exactly-once mode) prepares its commit and acknowledges. When every reader and
//! writer has answered, the checkpoint is stored, committers publish it, and sources
//! are told it completed.
//!
//! A bounded job ends with a final checkpoint once every reader has finished; then end
//! of input flows to the writers, which close, and committers finish.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use ferry_api::{
    ChangeBatch, EnumeratorContext, FerryError, ReaderContext, Result, SinkCommitter, Split,
    SplitEnumerator, WriterContext, MAX_IDLE_WITH_READINESS,
};
use serde_json::Value;

use crate::metrics::Metrics;
use ferry_checkpoint::{CheckpointData, CheckpointStore, SinkState, SourceState};
use ferry_plan::{ChainedTransform, CheckpointMode, JobPlan, Polled, SourceChain};

/// Batches a writer may have queued before its upstream waits.
const CHANNEL_CAPACITY: usize = 8;

/// What flows from readers to writers.
enum Msg {
    Data(ChangeBatch),
    Barrier(u64),
    End,
}

/// What the coordinator tells a reader.
enum Control {
    AddSplits(Vec<Split>),
    NoMoreSplits,
    Checkpoint(u64),
    Complete(u64),
    /// Send end of input downstream and stop.
    EndInput,
}

/// What tasks tell the coordinator.
enum Event {
    ReaderSnapshot {
        source: usize,
        subtask: usize,
        id: u64,
        splits: Vec<Split>,
    },
    ReaderFinished {
        source: usize,
        subtask: usize,
        reader: usize,
    },
    /// Reader `reader` has read all it has for now (only with `checkpoint.on-idle`).
    /// `pending`: it emitted rows after its last barrier, `last_barrier`.
    ReaderCaughtUp {
        reader: usize,
        last_barrier: Option<u64>,
        pending: bool,
    },
    /// Reader `reader`, after catching up, emits rows again.
    ReaderBusy {
        reader: usize,
    },
    WriterAck {
        sink: usize,
        subtask: usize,
        id: u64,
        commit: Option<Value>,
        state: Option<Value>,
    },
    WriterClosed,
    /// Source `source`'s enumerator is back from a discovery on its own thread, with the
    /// splits it found and whether it is exhausted.
    Discovered {
        source: usize,
        enumerator: Box<dyn SplitEnumerator>,
        found: Vec<(usize, Split)>,
        exhausted: bool,
    },
    Failed(FerryError),
}

/// Requests from outside the job (signals, `ferry savepoint`).
#[derive(Debug, Clone, Default)]
pub struct StopHandle {
    savepoint: Arc<AtomicBool>,
    cancel: Arc<AtomicBool>,
}

impl StopHandle {
    /// Stop after a final checkpoint (a savepoint) is committed.
    pub fn request_savepoint(&self) {
        self.savepoint.store(true, Ordering::SeqCst);
    }
    /// Stop at once, without a checkpoint.
    pub fn request_cancel(&self) {
        self.cancel.store(true, Ordering::SeqCst);
    }
    fn savepoint_requested(&self) -> bool {
        self.savepoint.load(Ordering::SeqCst)
    }
    fn cancel_requested(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every source ended and everything was committed.
    Finished,
    /// Stopped with a savepoint: a final checkpoint was committed.
    Savepoint,
}

/// One downstream edge of a stream inside a reader thread.
enum Route {
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
    },
}

/// The compatible changes between the job that took checkpoint `data` and `plan`, or
/// an error that says why `plan` cannot resume it (the rule both engines apply).
fn resume_changes(plan: &JobPlan, data: &CheckpointData) -> Result<Vec<String>> {
    ferry_plan::jobdir::check_resume(
        &plan.job.job_id,
        &format!("checkpoint {}", data.id),
        &plan.layout,
        data.layout.as_ref(),
    )
}

/// Runs `plan` to completion (or until `stop` says so), resuming from the latest
/// checkpoint in `store` when there is one, and restarting from the latest checkpoint
/// after a failure up to `retries` times, `retry_interval` apart.
pub fn run(
    plan: &JobPlan,
    store: &mut dyn CheckpointStore,
    stop: StopHandle,
    metrics: Arc<Metrics>,
    retries: u32,
    retry_interval: Duration,
) -> Result<RunOutcome> {
    let mut attempt = 0;
    ferry_plan::setup_sinks(plan, store.latest()?.is_some())?;
    loop {
        let restore = store.latest()?;
        if let Some((data, _)) = &restore {
            if data.fingerprint != plan.fingerprint {
                for change in resume_changes(plan, data)? {
                    eprintln!(
                        "ferry: job file changed since checkpoint {}: {change}",
                        data.id
                    );
                }
            }
            let splits: usize = data
                .sources
                .iter()
                .flat_map(|s| s.readers.iter())
                .map(Vec::len)
                .sum();
            let pending: usize = if restore.as_ref().is_some_and(|(_, committed)| !committed) {
                data.sinks.iter().map(|s| s.commits.len()).sum()
            } else {
                0
            };
            eprintln!(
                "ferry: resuming job '{}' from checkpoint {} ({splits} reader splits restored, {pending} prepared commits to publish again)",
                plan.job.job_id, data.id
            );
        }
        match run_once(plan, store, restore, stop.clone(), metrics.clone()) {
            Ok(o) => return Ok(o),
            Err(e)
                if attempt < retries
                    && !e.is_user_error()
                    && !matches!(e, FerryError::Cancelled) =>
            {
                attempt += 1;
                eprintln!("ferry: job failed: {e}; restarting from the latest checkpoint (retry {attempt} of {retries})");
                std::thread::sleep(retry_interval);
            }
            Err(e) => return Err(e),
        }
    }
}

fn run_once(
    plan: &JobPlan,
    store: &mut dyn CheckpointStore,
    restore: Option<(CheckpointData, bool)>,
    stop: StopHandle,
    metrics: Arc<Metrics>,
) -> Result<RunOutcome> {
    // A checkpoint stored but not yet published: publish it again (committers are idempotent).
    let restore = match restore {
        Some((data, false)) => {
            for (k, node) in plan.sinks.iter().enumerate() {
                if let (Some(mut c), Some(state)) =
                    (node.sink.create_committer()?, data.sinks.get(k))
                {
                    c.commit(data.id, state.commits.clone())?;
                }
            }
            store.mark_committed(data.id)?;
            Some(data)
        }
        Some((data, true)) => Some(data),
        None => None,
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let (ev_tx, ev_rx) = unbounded::<Event>();
    let aligned = plan.checkpoint.mode == CheckpointMode::ExactlyOnce;

    // Every sink writer gets a bounded channel. Readers send rows to one writer (by
    // index, so rows of a split stay in order) and barriers and end of input to all.
    let total_readers: usize = plan.sources.iter().map(|s| s.parallelism).sum();
    let mut sink_txs: Vec<Vec<Sender<(usize, Msg)>>> = Vec::new();
    let mut sink_rxs: Vec<Vec<Receiver<(usize, Msg)>>> = Vec::new();
    let mut committers: Vec<Option<Box<dyn SinkCommitter>>> = Vec::new();
    for node in &plan.sinks {
        committers.push(node.sink.create_committer()?);
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..node.parallelism)
            .map(|_| bounded::<(usize, Msg)>(CHANNEL_CAPACITY))
            .unzip();
        sink_txs.push(txs);
        sink_rxs.push(rxs);
    }

    // Enumerators and readers, with the transforms they feed chained in.
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    let mut enumerators: Vec<EnumeratorSlot> = Vec::new();
    let mut controls: Vec<Vec<Sender<Control>>> = Vec::new();
    let mut sender_ids: Vec<usize> = vec![0; plan.sinks.len()];
    let mut reader_tasks = Vec::new();
    for (i, node) in plan.sources.iter().enumerate() {
        let ectx = EnumeratorContext {
            parallelism: node.parallelism,
            job: plan.job.clone(),
        };
        let restored = restore
            .as_ref()
            .and_then(|r| r.sources.get(i))
            .map(|s| s.enumerator.clone());
        let enumerator = node.source.create_enumerator(&ectx, restored)?;
        let (slot, worker) = EnumeratorSlot::start(i, &node.plugin, enumerator, ev_tx.clone())?;
        enumerators.push(slot);
        threads.push(worker);
        let mut ctl = Vec::new();
        for subtask in 0..node.parallelism {
            let (ctl_tx, ctl_rx) = unbounded::<Control>();
            if let Some(splits) = restore
                .as_ref()
                .and_then(|r| r.sources.get(i))
                .and_then(|s| s.readers.get(subtask))
            {
                if !splits.is_empty() {
                    let _ = ctl_tx.send(Control::AddSplits(splits.clone()));
                }
            }
            ctl.push(ctl_tx);
            let rctx = ReaderContext {
                subtask,
                parallelism: node.parallelism,
                job: plan.job.clone(),
            };
            let reader = node.source.create_reader(&rctx)?;
            let readiness = reader.readiness();
            // Transforms fan out by stream here, so the chain holds none: they are the
            // routes' (each a `ChainedTransform` of the same executor).
            let chain = SourceChain::new(plan, i, reader, &[])?;
            let routes = build_routes(plan, &node.output, subtask, &sink_txs, &mut sender_ids)?;
            reader_tasks.push(ReaderTask {
                readiness,
                chain,
                routes,
                ctl: ctl_rx,
                ev: ev_tx.clone(),
                cancel: cancel.clone(),
                source: i,
                subtask,
                index: reader_tasks.len(),
                report_caught_up: plan.checkpoint.on_idle,
                rows: metrics.source_counter(&node.output),
            });
        }
        controls.push(ctl);
    }
    drop(sink_txs);

    // Writers, each expecting barriers from every route that reaches its sink.
    for (k, node) in plan.sinks.iter().enumerate() {
        for (subtask, rx) in std::mem::take(&mut sink_rxs[k]).into_iter().enumerate() {
            let ctx = WriterContext {
                subtask,
                parallelism: node.parallelism,
                job: plan.job.clone(),
                attempt: format!("{}-{}", std::process::id(), unique_suffix()),
            };
            let restored = restore
                .as_ref()
                .and_then(|r| r.sinks.get(k))
                .and_then(|s| s.writers.get(subtask).cloned().flatten());
            let writer = node.sink.create_writer(&ctx, restored)?;
            let ev = ev_tx.clone();
            let senders = sender_ids[k];
            let rows = metrics.sink_counter(&node.label);
            threads.push(spawn(
                &format!("sink-{}-{subtask}", node.plugin),
                move || {
                    if let Err(e) =
                        writer_loop(writer, rx, senders, aligned, k, subtask, &ev, &rows)
                    {
                        let _ = ev.send(Event::Failed(e));
                    }
                },
            )?);
        }
    }
    for mut task in reader_tasks {
        let ev = task.ev.clone();
        threads.push(spawn(
            &format!(
                "source-{}-{}",
                plan.sources[task.source].plugin, task.subtask
            ),
            move || {
                if let Err(e) = task.run() {
                    let _ = ev.send(Event::Failed(e));
                }
            },
        )?);
    }
    drop(ev_tx);

    let mut coord = Coordinator {
        plan,
        store,
        enumerators,
        controls,
        committers,
        ev_rx,
        total_readers,
        total_writers: plan.sinks.iter().map(|s| s.parallelism).sum(),
        next_id: restore.as_ref().map(|r| r.id + 1).unwrap_or(1),
        stop,
        cancel: cancel.clone(),
        first_reader: plan
            .sources
            .iter()
            .scan(0, |n, s| {
                let first = *n;
                *n += s.parallelism;
                Some(first)
            })
            .collect(),
        catch_up: CatchUp::new(total_readers),
    };
    let result = coord.run();
    if result.is_err() {
        cancel.store(true, Ordering::SeqCst);
    }
    drop(coord);
    for t in threads {
        let _ = t.join();
    }
    result
}

/// Fault injection for crash tests: with `FERRY_CRASH_POINT=<name>:<n>` the process
/// aborts (as abruptly as `kill -9`) the `n`-th time it reaches point `name`; with
/// `FERRY_CRASH_POINT=<name>:<n>:error` that step fails with an error instead, once, so
/// that in-process restarts (`job.retry.times`) can be tested.
fn crash_point(name: &str) -> Result<()> {
    static HITS: AtomicU64 = AtomicU64::new(0);
    let Ok(spec) = std::env::var("FERRY_CRASH_POINT") else {
        return Ok(());
    };
    let mut parts = spec.split(':');
    let (Some(point), Some(nth)) = (parts.next(), parts.next()) else {
        return Ok(());
    };
    if point != name || nth.parse::<u64>().ok() != Some(HITS.fetch_add(1, Ordering::SeqCst) + 1) {
        return Ok(());
    }
    if parts.next() == Some("error") {
        return Err(FerryError::external(
            "fault injection",
            format!("FERRY_CRASH_POINT {spec}"),
        ));
    }
    eprintln!("ferry: FERRY_CRASH_POINT {spec}: aborting");
    std::process::abort();
}

fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}{:x}", nanos, COUNTER.fetch_add(1, Ordering::Relaxed))
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map_err(|e| FerryError::internal(format!("cannot start thread {name}: {e}")))
}

/// The routes for rows of `stream` in reader `subtask`: chained transform instances
/// and the writer channel of every sink reached.
fn build_routes(
    plan: &JobPlan,
    stream: &str,
    subtask: usize,
    sink_txs: &[Vec<Sender<(usize, Msg)>>],
    sender_ids: &mut [usize],
) -> Result<Vec<Route>> {
    let mut routes = Vec::new();
    let readers = plan.readers_of(stream);
    for t in readers.transforms.iter().map(|t| &plan.transforms[*t]) {
        let next = build_routes(plan, &t.output, subtask, sink_txs, sender_ids)?;
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
        });
        sender_ids[k] += 1;
    }
    Ok(routes)
}

/// What a reader's wait between polls ended with.
enum Wait {
    /// A message from the coordinator.
    Control(Control),
    /// The time passed, or the reader signalled that data may be ready.
    Quiet,
    /// The coordinator is gone: the run is over.
    Disconnected,
}

struct ReaderTask {
    /// The source's reader; its batches get the source's table name here.
    chain: SourceChain,
    /// The reader's signal that data may be ready, if it offers one.
    readiness: Option<ferry_api::io::Readiness>,
    routes: Vec<Route>,
    ctl: Receiver<Control>,
    ev: Sender<Event>,
    cancel: Arc<AtomicBool>,
    source: usize,
    subtask: usize,
    /// Index among all readers of the job.
    index: usize,
    /// Whether to tell the coordinator when this reader catches up (`checkpoint.on-idle`).
    report_caught_up: bool,
    rows: Arc<AtomicU64>,
}

impl ReaderTask {
    fn run(&mut self) -> Result<()> {
        let mut finished = false;
        let mut idle_for = Duration::ZERO;
        // For `checkpoint.on-idle`: rows emitted since the last barrier, that barrier, and
        // whether the coordinator was told this reader caught up (and nothing since).
        let mut pending = false;
        let mut last_barrier = None;
        let mut reported_caught_up = false;
        loop {
            if self.cancel.load(Ordering::Relaxed) {
                return Ok(());
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
                    self.rows.fetch_add(read as u64, Ordering::Relaxed);
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
    fn wait(&self, timeout: Duration, finished: bool) -> Wait {
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
    fn tell_caught_up(&self, last_barrier: Option<u64>, pending: bool) {
        let _ = self.ev.send(Event::ReaderCaughtUp {
            reader: self.index,
            last_barrier,
            pending,
        });
    }
}

/// Sends `batch` down every route; transforms run here, in the reader's thread.
fn emit(routes: &mut [Route], batch: ChangeBatch) -> Result<()> {
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
            } => {
                txs[*target]
                    .send((*sender_id, Msg::Data(b)))
                    .map_err(|_| FerryError::Cancelled)?;
            }
        }
    }
    Ok(())
}

/// Sends a control message (barrier, end) to every writer reachable through `routes`.
fn broadcast(routes: &mut [Route], make: &dyn Fn() -> Msg) -> Result<()> {
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

#[allow(clippy::too_many_arguments)]
fn writer_loop(
    mut writer: Box<dyn ferry_api::SinkWriter>,
    rx: Receiver<(usize, Msg)>,
    senders: usize,
    aligned: bool,
    sink: usize,
    subtask: usize,
    ev: &Sender<Event>,
    rows: &AtomicU64,
) -> Result<()> {
    // Senders are numbered per sink across all readers; this writer hears from a subset.
    let mut barrier_from: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut held: HashMap<usize, VecDeque<Msg>> = HashMap::new();
    let mut ended: Vec<usize> = Vec::new();
    let expected = senders;
    let mut pending: VecDeque<(usize, Msg)> = VecDeque::new();
    loop {
        let (from, msg) = match pending.pop_front() {
            Some(m) => m,
            None => match rx.recv() {
                Ok(m) => m,
                Err(_) => return Ok(()), // upstream gone: the job is being cancelled
            },
        };
        if aligned && barrier_from.values().any(|v| v.contains(&from)) {
            held.entry(from).or_default().push_back(msg);
            continue;
        }
        match msg {
            Msg::Data(b) => {
                rows.fetch_add(b.num_rows() as u64, Ordering::Relaxed);
                writer.write(&b)?;
            }
            Msg::Barrier(id) => {
                let got = barrier_from.entry(id).or_default();
                got.push(from);
                if got.len() >= expected.max(1) {
                    barrier_from.remove(&id);
                    let commit = writer.prepare_commit(id)?;
                    let state = writer.snapshot(id)?;
                    let _ = ev.send(Event::WriterAck {
                        sink,
                        subtask,
                        id,
                        commit,
                        state,
                    });
                    // Release what the inputs sent after the barrier, in order.
                    for (f, q) in held.drain() {
                        for m in q {
                            pending.push_back((f, m));
                        }
                    }
                }
            }
            Msg::End => {
                ended.push(from);
                if ended.len() >= expected.max(1) {
                    writer.close()?;
                    let _ = ev.send(Event::WriterClosed);
                    return Ok(());
                }
            }
        }
    }
}

/// How often an enumerator that is not exhausted is asked to discover splits.
const DISCOVER_EVERY: Duration = Duration::from_millis(200);

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
struct EnumeratorSlot {
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
    fn start(
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
    fn discover_if_due(&mut self, next_id: u64) -> Result<()> {
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
    fn back(&mut self, mut e: Box<dyn SplitEnumerator>) -> Result<()> {
        for id in self.completed.drain(..) {
            e.notify_checkpoint_complete(id)?;
        }
        self.home = Some(e);
        self.back_at = Instant::now();
        Ok(())
    }

    /// The state to store in checkpoint `id`.
    fn snapshot(&mut self, id: u64) -> Result<Value> {
        match self.home.as_mut() {
            Some(e) => e.snapshot(id),
            None => Ok(self.away_snapshot.clone()),
        }
    }

    /// Checkpoint `id` completed.
    fn complete(&mut self, id: u64) -> Result<()> {
        match self.home.as_mut() {
            Some(e) => e.notify_checkpoint_complete(id),
            None => {
                self.completed.push(id);
                Ok(())
            }
        }
    }
}

struct Coordinator<'a> {
    plan: &'a JobPlan,
    store: &'a mut dyn CheckpointStore,
    enumerators: Vec<EnumeratorSlot>,
    controls: Vec<Vec<Sender<Control>>>,
    committers: Vec<Option<Box<dyn SinkCommitter>>>,
    ev_rx: Receiver<Event>,
    total_readers: usize,
    total_writers: usize,
    next_id: u64,
    stop: StopHandle,
    cancel: Arc<AtomicBool>,
    /// Index among all readers of reader 0 of each source.
    first_reader: Vec<usize>,
    catch_up: CatchUp,
}

/// What `checkpoint.on-idle` triggers on: which readers have caught up with their input,
/// and which emitted rows that no checkpoint triggered so far covers.
struct CatchUp {
    caught_up: Vec<bool>,
    pending: Vec<bool>,
    last_triggered: Option<u64>,
}

impl CatchUp {
    fn new(readers: usize) -> Self {
        CatchUp {
            caught_up: vec![false; readers],
            pending: vec![false; readers],
            last_triggered: None,
        }
    }

    /// Reader `r` caught up; rows it emitted after barrier `last_barrier` are pending
    /// unless a later checkpoint, whose barrier it has yet to emit, covers them.
    fn caught_up(&mut self, r: usize, last_barrier: Option<u64>, pending: bool) {
        self.caught_up[r] = true;
        if pending && last_barrier == self.last_triggered {
            self.pending[r] = true;
        }
    }

    /// Reader `r` emits rows again, or was just given splits.
    fn busy(&mut self, r: usize) {
        self.caught_up[r] = false;
    }

    /// Reader `r` ended: caught up for good (a reader ends only after its source's last
    /// split was assigned, so it is never given splits again).
    fn finished(&mut self, r: usize) {
        self.caught_up[r] = true;
    }

    /// Checkpoint `id` was triggered: it covers every row emitted so far.
    fn triggered(&mut self, id: u64) {
        self.last_triggered = Some(id);
        self.pending.fill(false);
    }

    /// Rows are pending and every reader has caught up (or finished).
    fn ready(&self) -> bool {
        self.pending.iter().any(|p| *p) && self.caught_up.iter().all(|c| *c)
    }
}

/// A checkpoint being collected.
struct InFlight {
    id: u64,
    started: Instant,
    data: CheckpointData,
    readers_left: usize,
    writers_left: usize,
    commits: Vec<Vec<Value>>,
}

impl Coordinator<'_> {
    fn run(&mut self) -> Result<RunOutcome> {
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
                Event::Failed(e) => return Err(e),
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
    fn discovered(
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

    fn trigger(&mut self) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        Ok(id)
    }

    fn new_inflight(&mut self, id: u64) -> Result<InFlight> {
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

    fn complete(&mut self, mut f: InFlight) -> Result<()> {
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
        Ok(())
    }
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
