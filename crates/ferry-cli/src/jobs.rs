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
use ferry_checkpoint::{
    format_utc, lock_status, read_checked, FileStore, JobInfo, JobState, LockStatus,
};

use ferry_plan::jobdir::checkpoint_dir_or_default;

use crate::runner::{now_secs, Progress, PROGRESS_FILE};
use crate::ControlArgs;

/// What `ferry jobs` shows of one job.
struct Row {
    job_id: String,
    state: String,
    engine: String,
    pid: String,
    since: String,
    last_checkpoint: String,
    /// A running job's figures, one line (see [`progress_line`]).
    progress: Option<String>,
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
            progress: None,
        }
    }
}

/// How old a running job's progress file may be and still be shown.
const PROGRESS_FRESH_SECS: u64 = 10;

/// A running job's figures from its directory's progress file, as one line: rows read and
/// written, rows (change events) per second, and its sources' own figures: phase
/// (`snapshot` or `streaming`, for CDC sources), snapshot chunks, replication lag. `None`
/// without a fresh, intact file (a Spark run, or a run that just started).
fn progress_line(job_dir: &Path, now: u64) -> Option<String> {
    let p: Progress = read_checked(&job_dir.join(PROGRESS_FILE)).ok()?;
    if now.saturating_sub(p.updated) > PROGRESS_FRESH_SECS {
        return None;
    }
    let mut line = format!(
        "read {} ({:.0}/s), written {}",
        p.read, p.read_per_second, p.written
    );
    let mut figures = p.figures;
    if let Some(streaming) = figures.remove("streaming") {
        line.push_str(if streaming >= 1.0 {
            ", phase streaming"
        } else {
            ", phase snapshot"
        });
    }
    for (name, v) in &figures {
        line.push_str(&format!(", {name} {}", (v * 100.0).round() / 100.0));
    }
    Some(line)
}

fn state_name(s: JobState) -> String {
    format!("{s:?}").to_uppercase()
}

fn print_row(r: &Row) {
    println!(
        "{:<24} {:<9} {:<7} {:>8}  {:<23} {:>15}",
        r.job_id, r.state, r.engine, r.pid, r.since, r.last_checkpoint
    );
    if let Some(p) = &r.progress {
        println!("    {p}");
    }
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
                let mut row = Row::new(&info, &lock);
                if row.state == "RUNNING" {
                    row.progress = progress_line(&job_dir, now_secs());
                }
                rows.push(row);
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
        progress: None,
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
