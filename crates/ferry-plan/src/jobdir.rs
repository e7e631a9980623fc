//! The rules of a job directory, `<checkpoint-dir>/<job-id>/`, that both engines apply
//! (the files themselves, the lock and the atomic writes are `ferry-checkpoint`'s):
//! where checkpoint directories are by default, that a directory belongs to the engine
//! that created it, and whether a job file may resume what an earlier run left.

use std::path::{Path, PathBuf};

use ferry_api::{FerryError, Result};
use ferry_checkpoint::{FileStore, JobLayout};

/// The engine names a job directory's `state` file records.
pub const LOCAL_ENGINE: &str = "local";
/// See [`LOCAL_ENGINE`].
pub const SPARK_ENGINE: &str = "spark";

/// The checkpoint directory when none is given: `$FERRY_HOME/checkpoints`, `FERRY_HOME`
/// defaulting to `~/.ferry` (and to `./.ferry` without a home directory).
pub fn default_checkpoint_dir() -> PathBuf {
    let home = std::env::var_os("FERRY_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ferry")))
        .unwrap_or_else(|| PathBuf::from(".ferry"));
    home.join("checkpoints")
}

/// `dir`, or [`default_checkpoint_dir`].
pub fn checkpoint_dir_or_default(dir: Option<PathBuf>) -> PathBuf {
    dir.unwrap_or_else(default_checkpoint_dir)
}

/// Refuses the job directory `root` of job `job_id` when another engine ran it: the two
/// engines keep their offsets in different files, so neither can resume the other's, and
/// starting afresh there would mix two histories. A directory without a `state` file is
/// new. (Directories written before the engine was recorded count as the local engine's.)
pub fn check_engine(root: &Path, job_id: &str, engine: &str) -> Result<()> {
    let Ok(info) = FileStore::read_state(root) else {
        return Ok(());
    };
    let owner = if info.engine.is_empty() {
        LOCAL_ENGINE
    } else {
        info.engine.as_str()
    };
    if owner == engine {
        return Ok(());
    }
    let dir = root.parent().unwrap_or(root);
    Err(FerryError::config(format!(
        "job '{job_id}' in {} was run by the {owner} engine; its history cannot be resumed on the {engine} engine: use another --job-id",
        dir.display()
    )))
}

/// Whether a job file with layout `now` may resume the state that `taken` (a checkpoint,
/// `checkpoint 12`, or a run, `its last run`) left with layout `saved`: the compatible
/// changes to report, or an error that says why not and what to do. `saved` is `None`
/// for state of a Ferry version that recorded no layout: only the same job file resumes it.
pub fn check_resume(
    job_id: &str,
    taken: &str,
    now: &JobLayout,
    saved: Option<&JobLayout>,
) -> Result<Vec<String>> {
    let refuse = |why: String| {
        FerryError::config(format!(
            "job '{job_id}': {taken} cannot be resumed by this job file: {why}. Restore the job file it was taken with, start anew with --from-scratch, or use another --job-id"
        ))
    };
    match saved {
        None => Err(refuse(
            "it was taken with a different job file, by a Ferry version that did not record the job's layout".into(),
        )),
        Some(saved) => now.resume_from(saved).map_err(refuse),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_checkpoint::{JobInfo, JobState, NodeLayout};

    fn layout(parallelism: usize) -> JobLayout {
        JobLayout {
            mode: "STREAMING".into(),
            sources: vec![NodeLayout::new(
                "FakeSource",
                parallelism,
                &serde_json::Map::new(),
            )],
            ..JobLayout::default()
        }
    }

    #[test]
    fn a_directory_of_one_engine_is_refused_by_the_other() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path(), "j", "fp", 1).unwrap();
        check_engine(store.root(), "j", SPARK_ENGINE).unwrap();
        check_engine(store.root(), "j", LOCAL_ENGINE).unwrap();
        let mut info = JobInfo {
            job_id: "j".into(),
            state: JobState::Finished,
            pid: 1,
            engine: String::new(),
            last_checkpoint: None,
            updated: 0,
        };
        store.set_state(&info).unwrap();
        let e = check_engine(store.root(), "j", SPARK_ENGINE)
            .unwrap_err()
            .to_string();
        assert!(e.contains("run by the local engine"), "{e}");
        info.engine = SPARK_ENGINE.into();
        store.set_state(&info).unwrap();
        check_engine(store.root(), "j", SPARK_ENGINE).unwrap();
        let e = check_engine(store.root(), "j", LOCAL_ENGINE)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("run by the spark engine") && e.contains("another --job-id"),
            "{e}"
        );
    }

    #[test]
    fn a_resume_names_what_changed_or_why_it_cannot() {
        assert!(
            check_resume("j", "checkpoint 3", &layout(2), Some(&layout(2)))
                .unwrap()
                .is_empty()
        );
        let e = check_resume("j", "checkpoint 3", &layout(3), Some(&layout(2)))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("job 'j': checkpoint 3 cannot be resumed by this job file: source 1 (FakeSource) ran with 2 readers and would now run with 3")
                && e.contains("--from-scratch"),
            "{e}"
        );
        let e = check_resume("j", "checkpoint 3", &layout(2), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not record the job's layout"), "{e}");
    }

    #[test]
    fn ferry_home_decides_the_default_checkpoint_dir() {
        let given = PathBuf::from("/x");
        assert_eq!(checkpoint_dir_or_default(Some(given.clone())), given);
        assert!(default_checkpoint_dir().ends_with("checkpoints"));
    }
}
