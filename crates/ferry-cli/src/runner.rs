//! Running one job on the embedded engine with its job directory: what `ferry run` and
//! every job of `ferry serve` share. The job directory is locked (one run per job id),
//! its `state` file says RUNNING while the job runs and how it ended afterwards, its
//! `control` file (`ferry savepoint|cancel ID`) is watched, and checkpoints are stored
//! there, so a run resumes from the latest one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    let progress = dir
        .as_ref()
        .map(|d| write_progress(d.store.root().to_path_buf(), metrics.clone()));
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
    if let Some((done, thread)) = progress {
        done.store(true, Ordering::SeqCst);
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
    if let Some(d) = &dir {
        // Figures of a run that ended describe nothing.
        let _ = std::fs::remove_file(d.store.root().join(PROGRESS_FILE));
    }
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

/// The file of a job directory where a running job's figures are, for `ferry jobs`.
pub const PROGRESS_FILE: &str = "progress";

/// How often [`PROGRESS_FILE`] is rewritten.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// What a running job's [`PROGRESS_FILE`] holds.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    /// When it was written, in seconds since the epoch.
    pub updated: u64,
    /// Rows the sources returned since the run started.
    pub read: u64,
    /// Rows the sinks took since the run started.
    pub written: u64,
    /// Rows (change events, for a CDC source) the sources returned per second over the
    /// last interval.
    pub read_per_second: f64,
    /// The source readers' own figures, summed ([`sum_figures`]): lag, snapshot phase, ….
    pub figures: BTreeMap<String, f64>,
}

/// Source readers' figures, each name summed over the readers reporting it (lags in bytes
/// or messages add up), but for times (`…_seconds`), which take the largest.
pub fn sum_figures(figures: &[(String, usize, &'static str, f64)]) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    for (_, _, name, v) in figures {
        let e = sums.entry((*name).to_string()).or_default();
        *e = if name.ends_with("_seconds") {
            e.max(*v)
        } else {
            *e + v
        };
    }
    sums
}

/// Rewrites `root`'s [`PROGRESS_FILE`] every [`PROGRESS_EVERY`] from `metrics` until the
/// returned flag is set. A failed write is skipped (the figures are informational; a full
/// disk must not stop the job for them).
fn write_progress(
    root: PathBuf,
    metrics: Arc<Metrics>,
) -> (Arc<AtomicBool>, Option<std::thread::JoinHandle<()>>) {
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    let thread = std::thread::Builder::new()
        .name("progress-file".into())
        .spawn(move || {
            let (mut last_read, mut last_at) = (0u64, Instant::now());
            let mut waited = Duration::ZERO;
            while !done2.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                waited += Duration::from_millis(100);
                if waited < PROGRESS_EVERY {
                    continue;
                }
                waited = Duration::ZERO;
                let read: u64 = metrics.read().values().sum();
                let secs = last_at.elapsed().as_secs_f64();
                let p = Progress {
                    updated: now_secs(),
                    read,
                    written: metrics.written().values().sum(),
                    read_per_second: read.saturating_sub(last_read) as f64 / secs.max(0.001),
                    figures: sum_figures(&metrics.figures()),
                };
                (last_read, last_at) = (read, Instant::now());
                if let Ok(body) = serde_json::to_vec(&p) {
                    let _ = ferry_checkpoint::write_atomic(&root.join(PROGRESS_FILE), &body);
                }
            }
        })
        .ok();
    (done, thread)
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
