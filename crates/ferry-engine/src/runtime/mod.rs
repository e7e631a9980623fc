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
//!
//! The module is cut by concern: [`messages`] (what flows between the tasks),
//! [`reader`] (a source reader's thread, with its chained transforms and routes),
//! [`writer`] (a sink writer's thread, with barrier alignment), [`coordinator`] (split
//! assignment, enumerator discovery, checkpoint triggering and completion) and
//! [`faults`] (fault injection for the crash tests); this file starts them.

mod coordinator;
mod faults;
mod messages;
mod reader;
mod writer;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use ferry_api::{
    EnumeratorContext, FerryError, ReaderContext, Result, SinkCommitter, WriterContext,
};

use crate::metrics::Metrics;
use coordinator::{CatchUp, Coordinator, EnumeratorSlot};
use ferry_checkpoint::{CheckpointData, CheckpointStore};
use ferry_plan::{CheckpointMode, JobPlan, SourceChain};
use messages::{Control, Event, Msg, CHANNEL_CAPACITY};
use reader::{build_routes, ReaderTask};
use writer::writer_loop;

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
            let routes = build_routes(
                plan,
                &node.output,
                subtask,
                &sink_txs,
                &mut sender_ids,
                &metrics,
            )?;
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
                rows: metrics.source_flow(&node.output),
                metrics: metrics.clone(),
                stream: node.output.clone(),
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
            let rows = metrics.sink_flow(&node.label);
            let who = format!("sink `{}`", node.plugin);
            threads.push(spawn(
                &format!("sink-{}-{subtask}", node.plugin),
                move || {
                    if let Err(e) =
                        writer_loop(writer, rx, senders, aligned, k, subtask, &ev, &rows, &who)
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
        metrics: metrics.clone(),
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
