//! Running one job on the embedded engine with its job directory: what `ferry run` and
//! every job of `ferry serve` share. The job directory is locked (one run per job id),
//! its `state` file says RUNNING while the job runs and how it ended afterwards, its
//! `control` file (`ferry savepoint|cancel ID`) is watched, and checkpoints are stored
//! there, so a run resumes from the latest one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferry_api::FerryError;
use ferry_checkpoint::{CheckpointStore, FileStore, JobInfo, JobLock, JobState, MemoryStore};
use ferry_engine::{Metrics, RunOutcome, StopHandle};
use ferry_plan::{JobPlan, StopRequest, StopRequests};

/// A job's directory, opened and locked by this process (until dropped).
pub struct JobDir {
    store: FileStore,
    _lock: JobLock,
}

impl JobDir {
    /// Locks and opens the directory of `plan`'s job under checkpoint directory `dir`.
    /// With `from_scratch` the old checkpoint history is set aside first (and said so).
    pub fn open(dir: &Path, plan: &JobPlan, from_scratch: bool) -> Result<JobDir, FerryError> {
        let id = plan.job.job_id.clone();
        let root = ferry_checkpoint::job_dir(dir, &id)?;
        // The lock is taken before anything in the directory changes.
        let lock = JobLock::acquire(&root, &id)?;
        ferry_plan::jobdir::check_engine(&root, &id, ferry_plan::jobdir::LOCAL_ENGINE)?;
        // Whether a changed job file may resume is decided against the latest
        // checkpoint, when the engine restores it.
        let mut store = FileStore::open(dir, &id, &plan.fingerprint, plan.checkpoint.retained)?;
        if from_scratch {
            match store.discard_history()? {
                Some(aside) => eprintln!(
                    "ferry: --from-scratch: job '{id}' starts anew; its old checkpoints are in {}",
                    aside.display()
                ),
                None => {
                    eprintln!("ferry: --from-scratch: job '{id}' has no checkpoints to set aside")
                }
            }
        }
        store.fingerprint()?;
        Ok(JobDir { store, _lock: lock })
    }

    /// The latest intact checkpoint's id, if any.
    pub fn latest_checkpoint(&mut self) -> Result<Option<u64>, FerryError> {
        Ok(self.store.latest()?.map(|(d, _)| d.id))
    }
}

/// Whether stop signals (SIGTERM, Ctrl-C) reach the run: `ferry run`'s job owns the
/// process; the jobs of `ferry serve` do not (the server handles them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signals {
    /// SIGTERM and SIGINT ask for a savepoint.
    Watch,
    /// Signals are someone else's.
    Ignore,
}

/// Runs `plan` to its end with checkpoints in `dir` (in memory without one), watching the
/// directory's `control` file, and records how it ended in the directory's `state`.
/// `Err(FerryError::Cancelled)` is a cancelled run.
pub fn execute(
    plan: &JobPlan,
    mut dir: Option<JobDir>,
    stop: StopHandle,
    metrics: Arc<Metrics>,
    signals: Signals,
) -> Result<RunOutcome, FerryError> {
    let state = |dir: &Option<JobDir>, s: JobState, last: Option<u64>| {
        if let Some(d) = dir {
            let _ = d.store.set_state(&JobInfo {
                job_id: plan.job.job_id.clone(),
                state: s,
                pid: std::process::id(),
                engine: ferry_plan::jobdir::LOCAL_ENGINE.into(),
                last_checkpoint: last,
                updated: now_secs(),
            });
        }
    };
    // A request left over from an earlier run goes before the state says running: one
    // sent once it does (`ferry savepoint` right after start) must not be lost.
    let requests = StopRequests::new(dir.as_ref().map(|d| d.store.root()));
    state(&dir, JobState::Running, None);
    let watcher = watch_stop_requests(stop.clone(), requests, signals)?;
    let mut memory_store = MemoryStore::default();
    let result = {
        let store: &mut dyn CheckpointStore = match dir.as_mut() {
            Some(d) => &mut d.store,
            None => &mut memory_store,
        };
        ferry_engine::run(
            plan,
            store,
            stop,
            metrics,
            plan.checkpoint.retry_times,
            plan.checkpoint.retry_interval,
        )
    };
    watcher.store(true, Ordering::SeqCst);
    let last = dir
        .as_mut()
        .and_then(|d| d.latest_checkpoint().ok().flatten());
    let end = match &result {
        Ok(RunOutcome::Savepoint) => JobState::Savepoint,
        Ok(RunOutcome::Finished) => JobState::Finished,
        Err(FerryError::Cancelled) => JobState::Cancelled,
        Err(_) => JobState::Failed,
    };
    state(&dir, end, last);
    result
}

/// Seconds since the epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A `control` file written by `ferry savepoint|cancel` (and, with [`Signals::Watch`],
/// SIGTERM / SIGINT) stops the job (the rules are `ferry_plan::stop`'s, which the Spark
/// driver follows too). Set the returned flag to end the watch.
fn watch_stop_requests(
    stop: StopHandle,
    mut requests: StopRequests,
    signals: Signals,
) -> Result<Arc<AtomicBool>, FerryError> {
    let term = Arc::new(AtomicBool::new(false));
    if signals == Signals::Watch {
        for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::flag::register(sig, term.clone())
                .map_err(|e| FerryError::internal(format!("cannot handle signals: {e}")))?;
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    std::thread::Builder::new()
        .name("stop-watch".into())
        .spawn(move || {
            while !done2.load(Ordering::SeqCst) {
                if term.swap(false, Ordering::SeqCst) && requests.signal() {
                    eprintln!("ferry: stop requested; taking a savepoint");
                }
                match requests.poll() {
                    Some(StopRequest::Cancel) => stop.request_cancel(),
                    Some(StopRequest::Savepoint) => stop.request_savepoint(),
                    None => {}
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
        .map_err(|e| FerryError::internal(e.to_string()))?;
    Ok(done)
}
