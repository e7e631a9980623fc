//! `ferry jobs`, `ferry savepoint` and `ferry cancel`: what the job directories of a
//! checkpoint directory say, and requests to running jobs.
//!
//! Whether a job runs is decided by its directory's lock ([`ferry_checkpoint::JobLock`]),
//! not by its `state` file: a process killed with `kill -9` leaves `RUNNING` in the state
//! file, but the kernel has released its lock. None of these commands takes the lock.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ferry_api::FerryError;
use ferry_checkpoint::{format_utc, lock_status, FileStore, JobInfo, JobState, LockStatus};

use ferry_plan::jobdir::checkpoint_dir_or_default;

use crate::ControlArgs;

/// What `ferry jobs` shows of one job.
struct Row {
    job_id: String,
    state: String,
    engine: String,
    pid: String,
    since: String,
    last_checkpoint: String,
}

impl Row {
    fn new(info: &JobInfo, lock: &LockStatus) -> Row {
        let (state, pid, since) = match lock {
            // Locked, but the state file still holds the previous run's end: the run is
            // opening its directory and does not watch for requests yet.
            LockStatus::Held(Some(h)) if info.state != JobState::Running => {
                ("STARTING".into(), h.pid.to_string(), format_utc(h.since))
            }
            LockStatus::Held(Some(h)) => ("RUNNING".into(), h.pid.to_string(), format_utc(h.since)),
            LockStatus::Held(None) => ("RUNNING".into(), info.pid.to_string(), "-".into()),
            // The state file says running, but nobody holds the lock: the process died.
            LockStatus::Free if info.state == JobState::Running => {
                ("CRASHED".into(), info.pid.to_string(), "-".into())
            }
            LockStatus::Free => (state_name(info.state), "-".into(), "-".into()),
        };
        Row {
            job_id: info.job_id.clone(),
            state,
            engine: info.engine.clone(),
            pid,
            since,
            last_checkpoint: info
                .last_checkpoint
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
        }
    }
}

fn state_name(s: JobState) -> String {
    format!("{s:?}").to_uppercase()
}

fn print_row(r: &Row) {
    println!(
        "{:<24} {:<9} {:<7} {:>8}  {:<23} {:>15}",
        r.job_id, r.state, r.engine, r.pid, r.since, r.last_checkpoint
    );
}

/// `ferry jobs`: every job in `dir` with its state, the process holding its lock and its
/// last checkpoint.
pub fn list(dir: &Path) -> Result<ExitCode, FerryError> {
    let mut rows = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let job_dir = e.path();
            if let Ok(info) = FileStore::read_state(&job_dir) {
                let lock = lock_status(&job_dir)?;
                rows.push(Row::new(&info, &lock));
            }
        }
    }
    rows.sort_by(|a, b| a.job_id.cmp(&b.job_id));
    print_row(&Row {
        job_id: "JOB ID".into(),
        state: "STATE".into(),
        engine: "ENGINE".into(),
        pid: "PID".into(),
        since: "RUNNING SINCE".into(),
        last_checkpoint: "LAST CHECKPOINT".into(),
    });
    for r in &rows {
        print_row(r);
    }
    if rows.iter().any(|r| r.state == "CRASHED") {
        println!("\nCRASHED: the job's state says running, but no process holds its lock (it was killed or crashed); rerun it with the same --job-id to resume from its latest checkpoint.");
    }
    Ok(ExitCode::SUCCESS)
}

/// `ferry savepoint|cancel ID`: asks the process holding the job's lock to `what`, through
/// the job directory's `control` file.
pub fn control(args: ControlArgs, what: &str) -> Result<ExitCode, FerryError> {
    let dir = ferry_checkpoint::job_dir(
        &checkpoint_dir_or_default(args.checkpoint_dir),
        &args.job_id,
    )?;
    let lock = lock_status(&dir)?;
    if let LockStatus::Held(_) = lock {
        wait_until_running(&dir, &args.job_id)?;
    }
    let state = FileStore::read_state(&dir);
    let pid = match lock {
        LockStatus::Held(Some(h)) => h.pid,
        LockStatus::Held(None) => state.as_ref().map(|i| i.pid).unwrap_or(0),
        LockStatus::Free => {
            return Err(FerryError::config(match state {
                Err(_) => format!("no job '{}' in {}", args.job_id, dir.display()),
                Ok(info) if info.state == JobState::Running => format!(
                    "job '{}' is not running: no process holds its lock (pid {} was killed or crashed)",
                    args.job_id, info.pid
                ),
                Ok(info) => format!(
                    "job '{}' is not running (state {})",
                    args.job_id,
                    state_name(info.state)
                ),
            }));
        }
    };
    ferry_checkpoint::write_control(&dir, what)?;
    println!("ferry: asked job '{}' (pid {pid}) to {what}", args.job_id);
    Ok(ExitCode::SUCCESS)
}

/// How long a request waits for a run that holds the lock but is still opening its
/// directory (it clears stale requests there before it says RUNNING).
const STARTING_PATIENCE: Duration = Duration::from_secs(10);

/// Waits until the state of the job whose lock is held says RUNNING: from then on the run
/// watches for requests, and one written earlier could be cleared as a stale one.
fn wait_until_running(dir: &Path, job_id: &str) -> Result<(), FerryError> {
    let started = Instant::now();
    loop {
        if FileStore::read_state(dir).is_ok_and(|i| i.state == JobState::Running) {
            return Ok(());
        }
        if started.elapsed() >= STARTING_PATIENCE {
            return Err(FerryError::config(format!(
                "job '{job_id}' is starting and does not take requests yet; try again in a moment"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
