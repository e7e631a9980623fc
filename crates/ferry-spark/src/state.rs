//! The job directory of a Spark job: `<checkpoint-dir>/<job-id>/`. It holds `layout`
//! (the fingerprint and [`JobLayout`] of the job file it last ran with), the `state` and `control` files that
//! `ferry jobs`, `ferry savepoint` and `ferry cancel` use (the embedded engine's format),
//! and one Spark checkpoint location per sink, `query-<sink>/`: Spark's own `metadata`,
//! `offsets/`, `commits/` and `state/`, and what Ferry keeps there, `sources/` (what
//! partitions read, see [`crate::source`]) and `published/` (see [`crate::sink`]). The
//! driver holds the directory's `lock` ([`JobLock`]) for its whole run, as the embedded
//! engine does: one run per job id.

use std::path::{Path, PathBuf};

use ferry_api::{FerryError, Result};
use ferry_checkpoint::{FileStore, JobInfo, JobLayout, JobLock, JobState};
use serde::{Deserialize, Serialize};

/// What `layout` holds.
#[derive(Debug, Serialize, Deserialize)]
struct SavedLayout {
    fingerprint: String,
    layout: JobLayout,
}

/// Creates (or reopens) the directory of job `job_id` under `dir` for a job file with
/// `fingerprint` and `layout`, and takes its lock, which the caller must hold for the
/// whole run. Refuses a directory that another process holds (the job is already running),
/// that belongs to the embedded engine, or whose saved state the job file cannot resume
/// (see [`JobLayout::resume_from`]); returns the directory, the compatible changes since
/// the last run (to tell the user) and the lock.
pub fn open_job_dir(
    dir: &Path,
    job_id: &str,
    fingerprint: &str,
    layout: &JobLayout,
) -> Result<(PathBuf, Vec<String>, JobLock)> {
    let root = ferry_checkpoint::job_dir(dir, job_id)?;
    let lock = JobLock::acquire(&root, job_id)?;
    if let Ok(info) = FileStore::read_state(&root) {
        if info.engine != "spark" {
            return Err(FerryError::config(format!(
                "job '{job_id}' in {} was run by the {} engine; use another --job-id for Spark",
                dir.display(),
                if info.engine.is_empty() {
                    "local"
                } else {
                    &info.engine
                }
            )));
        }
    }
    let path = root.join("layout");
    let refuse = |why: String| {
        FerryError::config(format!(
            "job '{job_id}' in {} cannot be resumed by this job file: {why}. Restore the job file it ran with, or use another --job-id",
            dir.display()
        ))
    };
    let changes = match ferry_checkpoint::read_checked::<SavedLayout>(&path) {
        Ok(saved) if saved.fingerprint == fingerprint => return Ok((root, Vec::new(), lock)),
        Ok(saved) => layout.resume_from(&saved.layout).map_err(refuse)?,
        Err(_) => Vec::new(),
    };
    let body = serde_json::to_vec(&SavedLayout {
        fingerprint: fingerprint.to_string(),
        layout: layout.clone(),
    })
    .map_err(FerryError::internal)?;
    ferry_checkpoint::write_atomic(&path, &body)?;
    Ok((root, changes, lock))
}

/// Parses a state name as `ferry jobs` prints it.
pub fn parse_state(s: &str) -> Result<JobState> {
    Ok(match s.to_ascii_uppercase().as_str() {
        "RUNNING" => JobState::Running,
        "FINISHED" => JobState::Finished,
        "SAVEPOINT" => JobState::Savepoint,
        "CANCELLED" => JobState::Cancelled,
        "FAILED" => JobState::Failed,
        other => return Err(FerryError::internal(format!("unknown job state '{other}'"))),
    })
}

/// Records the job's state in `<job_dir>/state` for `ferry jobs`.
pub fn set_state(
    job_dir: &Path,
    job_id: &str,
    state: JobState,
    pid: u32,
    last_checkpoint: Option<u64>,
) -> Result<()> {
    let updated = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let info = JobInfo {
        job_id: job_id.to_string(),
        state,
        pid,
        engine: "spark".into(),
        last_checkpoint,
        updated,
    };
    let body = serde_json::to_vec(&info).map_err(FerryError::internal)?;
    ferry_checkpoint::write_atomic(&job_dir.join("state"), &body)
}

/// The latest batch Spark marked committed in `query-*/commits/`, as a Ferry checkpoint
/// number (Spark counts batches from 0, Ferry checkpoints from 1). With several sinks
/// (queries), the smallest of their latest batches.
pub fn last_committed(job_dir: &Path) -> Option<u64> {
    let queries = std::fs::read_dir(job_dir).ok()?;
    queries
        .flatten()
        .filter(|q| q.file_name().to_string_lossy().starts_with("query-"))
        .map(|q| {
            let rd = std::fs::read_dir(q.path().join("commits")).ok()?;
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u64>().ok()))
                .max()
                .map(|b| b + 1)
        })
        .min()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(parallelism: usize) -> JobLayout {
        let options = serde_json::Map::new();
        JobLayout {
            mode: "STREAMING".into(),
            sources: vec![ferry_checkpoint::NodeLayout::new(
                "FakeSource",
                parallelism,
                &options,
            )],
            sinks: vec![ferry_checkpoint::NodeLayout::new("Console", 1, &options)],
            ..JobLayout::default()
        }
    }

    #[test]
    fn the_state_file_reads_back_as_ferry_jobs_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let (root, _, _lock) = open_job_dir(dir.path(), "j", "fp", &layout(1)).unwrap();
        set_state(&root, "j", parse_state("running").unwrap(), 42, Some(3)).unwrap();
        let info = FileStore::read_state(&root).unwrap();
        assert_eq!(
            (info.pid, info.engine.as_str(), info.last_checkpoint),
            (42, "spark", Some(3))
        );
    }

    #[test]
    fn an_incompatible_job_file_or_a_local_job_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        open_job_dir(dir.path(), "j", "fp", &layout(2)).unwrap();
        let (_, changes, _) = open_job_dir(dir.path(), "j", "fp", &layout(2)).unwrap();
        assert!(changes.is_empty());
        let mut tuned = layout(2);
        tuned.env = ferry_checkpoint::hash_options(
            serde_json::json!({"checkpoint.interval": 500})
                .as_object()
                .unwrap(),
        );
        let (_, changes, _) = open_job_dir(dir.path(), "j", "fp2", &tuned).unwrap();
        assert_eq!(
            changes,
            vec!["env: checkpoint.interval changed".to_string()]
        );
        let e = open_job_dir(dir.path(), "j", "other", &layout(3))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ran with 2 readers and would now run with 3"),
            "{e}"
        );
        let local = FileStore::open(dir.path(), "l", "fp", 1).unwrap();
        local
            .set_state(&JobInfo {
                job_id: "l".into(),
                state: JobState::Finished,
                pid: 1,
                engine: "local".into(),
                last_checkpoint: None,
                updated: 0,
            })
            .unwrap();
        let e = open_job_dir(dir.path(), "l", "fp", &layout(1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("local engine"), "{e}");
        assert!(open_job_dir(dir.path(), "../x", "fp", &layout(1)).is_err());
    }

    #[test]
    fn a_job_directory_is_opened_by_one_run_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let (_, _, held) = open_job_dir(dir.path(), "j", "fp", &layout(1)).unwrap();
        let e = open_job_dir(dir.path(), "j", "fp", &layout(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "job 'j' is already running ({})",
                held.holder().describe()
            )),
            "{e}"
        );
        drop(held);
        open_job_dir(dir.path(), "j", "fp", &layout(1)).unwrap();
    }

    #[test]
    fn spark_batches_count_as_ferry_checkpoints_from_one() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(last_committed(dir.path()), None);
        std::fs::create_dir_all(dir.path().join("query-0/commits")).unwrap();
        std::fs::write(dir.path().join("query-0/commits/0"), "").unwrap();
        std::fs::write(dir.path().join("query-0/commits/4"), "").unwrap();
        assert_eq!(last_committed(dir.path()), Some(5));
        std::fs::create_dir_all(dir.path().join("query-1/commits")).unwrap();
        std::fs::write(dir.path().join("query-1/commits/2"), "").unwrap();
        assert_eq!(last_committed(dir.path()), Some(3));
    }
}
