//! One run per job: an exclusive OS file lock on `<job-dir>/lock`.
//!
//! Two processes running the same job id would both write checkpoints into the same
//! directory and both publish commits, duplicating output and tearing the checkpoint
//! sequence. So a run takes [`JobLock`] before it touches its job directory, and holds it
//! until it ends. The lock is the operating system's (`flock(2)` on Unix, through
//! [`File::try_lock`]): the kernel drops it when the process that holds it exits, however
//! it exits, so `kill -9` or a crash never leaves a stale lock behind.
//!
//! After locking, the holder writes its process id and start time into the file, so that a
//! refused run and `ferry jobs` can name it. The file stays when the run ends; its content
//! then names the last holder and means nothing: only the lock counts.
//!
//! Observers (`ferry jobs`, `ferry savepoint`, `ferry cancel`) use [`lock_status`], which
//! never keeps the lock: they must work while the job runs.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use ferry_api::{FerryError, Result};
use serde::{Deserialize, Serialize};

/// The lock file's name in a job directory.
pub const LOCK_FILE: &str = "lock";

/// How long [`JobLock::acquire`] retries a lock that is busy: long enough to outlast an
/// observer's momentary probe ([`lock_status`]), short enough to refuse "at once".
const ACQUIRE_PATIENCE: Duration = Duration::from_millis(300);

/// How long a refused run or an observer waits for a holder that has just taken the lock
/// to write its process id.
const HOLDER_PATIENCE: Duration = Duration::from_millis(500);

/// The process holding a job's lock, as it recorded itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// Its process id.
    pub pid: u32,
    /// When it took the lock, in seconds since the epoch.
    pub since: u64,
}

impl LockHolder {
    /// `pid 4242, since 2026-12-01 14:10:13 UTC`.
    pub fn describe(&self) -> String {
        format!("pid {}, since {}", self.pid, format_utc(self.since))
    }
}

/// Whether a process holds a job's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockStatus {
    /// No process holds it (the job is not running).
    Free,
    /// A process holds it; `None` when it has not recorded who it is (yet).
    Held(Option<LockHolder>),
}

/// The exclusive lock of one job directory, held by this process until dropped (or until
/// the process ends).
#[derive(Debug)]
pub struct JobLock {
    // Never read: holding the open file is what holds the lock.
    _file: File,
    holder: LockHolder,
}

impl JobLock {
    /// Takes the lock of job `job_id`'s directory `job_dir` (creating the directory), and
    /// records this process as its holder. Fails at once, naming the holder, when another
    /// process holds it: `job 'orders' is already running (pid 4242, since …)`.
    pub fn acquire(job_dir: &Path, job_id: &str) -> Result<JobLock> {
        std::fs::create_dir_all(job_dir)
            .map_err(|e| FerryError::io("checkpoint", job_dir.display(), e))?;
        let path = job_dir.join(LOCK_FILE);
        let io = |e| FerryError::io("checkpoint", path.display(), e);
        // Not truncated on open: the holder's record must survive a refused attempt.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if started.elapsed() < ACQUIRE_PATIENCE => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(TryLockError::WouldBlock) => {
                    let who = wait_for_holder(&path)
                        .map(|h| h.describe())
                        .unwrap_or_else(|| "by a process that has not recorded its pid".into());
                    return Err(FerryError::config(format!(
                        "job '{job_id}' is already running ({who}); its directory {} is locked. Stop it first (`ferry savepoint {job_id}` or `ferry cancel {job_id}`), or use another --job-id",
                        job_dir.display()
                    )));
                }
                Err(TryLockError::Error(e)) => return Err(io(e)),
            }
        }
        let holder = LockHolder {
            pid: std::process::id(),
            since: now_secs(),
        };
        let body = serde_json::to_vec(&holder).map_err(FerryError::internal)?;
        file.set_len(0).map_err(io)?;
        file.write_all(&body).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(JobLock {
            _file: file,
            holder,
        })
    }

    /// This process, as recorded in the lock file.
    pub fn holder(&self) -> &LockHolder {
        &self.holder
    }
}

/// Whether a process holds the lock of `job_dir`, and which. Probes with a shared lock
/// that it releases at once, so it never stands in a run's way for longer than
/// [`JobLock::acquire`] waits.
pub fn lock_status(job_dir: &Path) -> Result<LockStatus> {
    let path = job_dir.join(LOCK_FILE);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LockStatus::Free),
        Err(e) => return Err(FerryError::io("checkpoint", path.display(), e)),
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(LockStatus::Free)
        }
        Err(TryLockError::WouldBlock) => Ok(LockStatus::Held(wait_for_holder(&path))),
        Err(TryLockError::Error(e)) => Err(FerryError::io("checkpoint", path.display(), e)),
    }
}

/// The holder recorded in `path`, waiting briefly for one that has just locked it.
fn wait_for_holder(path: &Path) -> Option<LockHolder> {
    let started = Instant::now();
    loop {
        let mut text = String::new();
        let read = File::open(path).and_then(|mut f| f.read_to_string(&mut text));
        if read.is_ok() {
            if let Ok(h) = serde_json::from_str::<LockHolder>(&text) {
                return Some(h);
            }
        }
        if started.elapsed() >= HOLDER_PATIENCE {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `2026-12-01 14:10:13 UTC` for seconds since the epoch.
pub fn format_utc(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| format!("{secs} s after the epoch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_of_the_same_job_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("orders");
        let first = JobLock::acquire(&job, "orders").unwrap();
        assert_eq!(first.holder().pid, std::process::id());
        // Another open file description conflicts even within one process, as another
        // process's would.
        let e = JobLock::acquire(&job, "orders").unwrap_err().to_string();
        let expected = format!(
            "job 'orders' is already running ({})",
            first.holder().describe()
        );
        assert!(e.contains(&expected), "{e}");
        assert!(e.contains("--job-id"), "{e}");
    }

    #[test]
    fn the_lock_is_free_again_once_its_holder_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("j");
        assert_eq!(lock_status(&job).unwrap(), LockStatus::Free);
        let lock = JobLock::acquire(&job, "j").unwrap();
        assert_eq!(
            lock_status(&job).unwrap(),
            LockStatus::Held(Some(lock.holder().clone()))
        );
        drop(lock);
        assert_eq!(lock_status(&job).unwrap(), LockStatus::Free);
        // The stale record of the last holder does not stand in the way.
        assert!(job.join(LOCK_FILE).exists());
        JobLock::acquire(&job, "j").unwrap();
    }

    #[test]
    fn probing_the_lock_does_not_make_a_run_fail() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("j");
        drop(JobLock::acquire(&job, "j").unwrap());
        // An observer holding its probe while a run starts: the run waits it out.
        let probe = File::open(job.join(LOCK_FILE)).unwrap();
        probe.try_lock_shared().unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            probe.unlock().unwrap();
        });
        JobLock::acquire(&job, "j").unwrap();
        release.join().unwrap();
    }

    #[test]
    fn times_read_as_utc() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_utc(1_764_598_213), "2025-12-01 14:10:13 UTC");
    }
}
