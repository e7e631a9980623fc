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
use ferry_checkpoint::{JobInfo, JobLayout, JobLock, JobState};
use serde::{Deserialize, Serialize};

/// What `layout` holds.
#[derive(Debug, Serialize, Deserialize)]
struct SavedLayout {
    fingerprint: String,
    layout: JobLayout,
}

/// A job directory opened by [`open_job_dir`].
#[derive(Debug)]
pub struct OpenedJobDir {
    /// `<checkpoint-dir>/<job-id>/`.
    pub root: PathBuf,
    /// The compatible changes of the job file since the job last ran there.
    pub changes: Vec<String>,
    /// Where `--from-scratch` set the old history aside, when it did.
    pub discarded: Option<PathBuf>,
    /// The directory's lock: the caller holds it for the whole run.
    pub lock: JobLock,
}

/// Creates (or reopens) the directory of job `job_id` under `dir` for a job file with
/// `fingerprint` and `layout`, and takes its lock. Refuses a directory that another process
/// holds (the job is already running), that belongs to the embedded engine, or whose saved
/// state the job file cannot resume (see [`JobLayout::resume_from`]). With `from_scratch`,
/// first sets the job's history aside (see [`discard_history`]), deliberately starting anew.
pub fn open_job_dir(
    dir: &Path,
    job_id: &str,
    fingerprint: &str,
    layout: &JobLayout,
    from_scratch: bool,
) -> Result<OpenedJobDir> {
    let root = ferry_checkpoint::job_dir(dir, job_id)?;
    let lock = JobLock::acquire(&root, job_id)?;
    ferry_plan::jobdir::check_engine(&root, job_id, ferry_plan::jobdir::SPARK_ENGINE)?;
    let discarded = if from_scratch {
        discard_history(&root)?
    } else {
        None
    };
    let opened = |changes| OpenedJobDir {
        root: root.clone(),
        changes,
        discarded: discarded.clone(),
        lock,
    };
    let path = root.join("layout");
    let changes = match ferry_checkpoint::read_checked::<SavedLayout>(&path) {
        Ok(saved) if saved.fingerprint == fingerprint => return Ok(opened(Vec::new())),
        Ok(saved) => ferry_plan::jobdir::check_resume(
            job_id,
            &format!("its last run in {}", dir.display()),
            layout,
            Some(&saved.layout),
        )?,
        Err(_) => Vec::new(),
    };
    let body = serde_json::to_vec(&SavedLayout {
        fingerprint: fingerprint.to_string(),
        layout: layout.clone(),
    })
    .map_err(FerryError::internal)?;
    ferry_checkpoint::write_atomic(&path, &body)?;
    Ok(opened(changes))
}

/// What a Spark job directory holds of a job's history: Spark's checkpoint locations
/// (with Ferry's `sources/` and `published/` in them) and the saved layout.
fn history(root: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("query-"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    if root.join("layout").exists() {
        found.push(root.join("layout"));
    }
    found.sort();
    found
}

/// `--from-scratch` on Spark: moves the job's history (every `query-*/` and `layout`),
/// untouched, into `discarded-<time>/` of the job directory `root`, so that Spark starts
/// new queries from the sources' beginning. Returns where it went, or `None` when there was
/// none. The caller must hold the directory's lock.
pub fn discard_history(root: &Path) -> Result<Option<PathBuf>> {
    let found = history(root);
    if found.is_empty() {
        return Ok(None);
    }
    let aside = ferry_checkpoint::create_discard_dir(root)?;
    for from in found {
        if let Some(name) = from.file_name() {
            std::fs::rename(&from, aside.join(name))
                .map_err(|e| FerryError::io("spark", from.display(), e))?;
        }
    }
    Ok(Some(aside))
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
        engine: ferry_plan::jobdir::SPARK_ENGINE.into(),
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
    use ferry_checkpoint::FileStore;

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
        let root = open_job_dir(dir.path(), "j", "fp", &layout(1), false)
            .unwrap()
            .root;
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
        open_job_dir(dir.path(), "j", "fp", &layout(2), false).unwrap();
        let opened = open_job_dir(dir.path(), "j", "fp", &layout(2), false).unwrap();
        assert!(opened.changes.is_empty());
        // Each run holds the directory's lock until it ends: end this one first.
        drop(opened);
        let mut tuned = layout(2);
        tuned.env = ferry_checkpoint::hash_options(
            serde_json::json!({"checkpoint.interval": 500})
                .as_object()
                .unwrap(),
        );
        let opened = open_job_dir(dir.path(), "j", "fp2", &tuned, false).unwrap();
        assert_eq!(
            opened.changes,
            vec!["env: checkpoint.interval changed".to_string()]
        );
        drop(opened);
        let e = open_job_dir(dir.path(), "j", "other", &layout(3), false)
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
        let e = open_job_dir(dir.path(), "l", "fp", &layout(1), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("run by the local engine"), "{e}");
        assert!(open_job_dir(dir.path(), "../x", "fp", &layout(1), false).is_err());
    }

    #[test]
    fn a_job_directory_is_opened_by_one_run_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let held = open_job_dir(dir.path(), "j", "fp", &layout(1), false)
            .unwrap()
            .lock;
        let e = open_job_dir(dir.path(), "j", "fp", &layout(1), false)
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
        open_job_dir(dir.path(), "j", "fp", &layout(1), false).unwrap();
    }

    #[test]
    fn from_scratch_sets_the_spark_history_aside_and_skips_the_layout_check() {
        let dir = tempfile::tempdir().unwrap();
        let root = open_job_dir(dir.path(), "j", "fp", &layout(2), false)
            .unwrap()
            .root;
        std::fs::create_dir_all(root.join("query-0/offsets")).unwrap();
        std::fs::write(root.join("query-0/offsets/0"), "v1\n{").unwrap();
        // Another layout resumes only from scratch.
        assert!(open_job_dir(dir.path(), "j", "other", &layout(3), false).is_err());
        let opened = open_job_dir(dir.path(), "j", "other", &layout(3), true).unwrap();
        let aside = opened.discarded.expect("history set aside");
        assert!(opened.changes.is_empty());
        assert_eq!(
            std::fs::read_to_string(aside.join("query-0/offsets/0")).unwrap(),
            "v1\n{"
        );
        assert!(aside.join("layout").exists());
        assert!(!root.join("query-0").exists());
        drop(opened.lock);
        let again = open_job_dir(dir.path(), "j", "other", &layout(3), true).unwrap();
        // Only the new layout was there: set aside too, nothing else.
        assert!(again.discarded.is_some());
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
