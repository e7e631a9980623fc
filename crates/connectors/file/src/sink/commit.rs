//! Publishing: the committer renames staged files into place, once per checkpoint, and
//! removes the staging directories it emptied.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_api::{decode_state, FerryError, Result, SinkCommitter};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::read::COMPONENT;

use super::config::*;
use super::STAGING_DIR;

/// A staged file and the name it is published under.
pub(super) type FilePair = (PathBuf, PathBuf);

/// Publishes staged files by renaming them into place.
pub(super) struct FileCommitter {
    pub(super) cfg: Arc<SinkConfig>,
}

/// What a writer's `prepare_commit` hands the committer: the staging directories it
/// filled and the (staged, final) name of every file. `stage_dir` is the single-table
/// shape of earlier versions, read so that a checkpoint they wrote is still published
/// after an upgrade.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct CommitInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) stage_dirs: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) stage_dir: Option<String>,
    pub(super) files: Vec<(String, String)>,
}

/// A commit info's staging directories and (staged, final) file pairs.
pub(super) fn parse_info(info: &Value) -> Result<(Vec<PathBuf>, Vec<FilePair>)> {
    let info: CommitInfo = decode_state(info, "a LocalFile commit")?;
    let stages = match (info.stage_dirs, info.stage_dir) {
        (Some(dirs), _) => dirs.into_iter().map(PathBuf::from).collect(),
        (None, Some(d)) => vec![PathBuf::from(d)],
        (None, None) => {
            return Err(FerryError::external(
                "checkpoint",
                "the state of a LocalFile commit names no staging directory (stage_dirs)",
            ))
        }
    };
    let files = info
        .files
        .into_iter()
        .map(|(s, t)| (PathBuf::from(s), PathBuf::from(t)))
        .collect();
    Ok((stages, files))
}

/// Removes the staging directory `dir`, then each parent it leaves empty, up to (not
/// including) the `_ferry_tmp` directory it lies in.
pub(super) fn remove_stage(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    let in_staging = dir
        .ancestors()
        .skip(1)
        .any(|a| a.file_name().is_some_and(|n| n == STAGING_DIR));
    if !in_staging {
        return;
    }
    let mut p = dir.parent();
    while let Some(d) = p {
        if d.file_name().is_some_and(|n| n == STAGING_DIR) || std::fs::remove_dir(d).is_err() {
            break;
        }
        p = d.parent();
    }
}

impl SinkCommitter for FileCommitter {
    fn commit(&mut self, checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
        for info in &infos {
            let (stages, files) = parse_info(info)?;
            for (staged, target) in &files {
                if staged.exists() {
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
                    }
                    std::fs::rename(staged, target).map_err(|e| {
                        io_err(
                            staged,
                            format!("cannot publish as {}: {e}", target.display()),
                        )
                    })?;
                } else if !target.exists() {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!("checkpoint {checkpoint_id}: staged file '{}' is missing and '{}' was never published", staged.display(), target.display()),
                    ));
                }
                // Staged file gone and target present: published by an earlier attempt.
            }
            // Only once every file of every table is in place: tables may share a directory.
            for stage in &stages {
                remove_stage(stage);
            }
        }
        Ok(())
    }

    fn abort(&mut self, _checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
        for info in &infos {
            let (stages, files) = parse_info(info)?;
            for (staged, _) in files {
                let _ = std::fs::remove_file(staged);
            }
            for stage in &stages {
                remove_stage(stage);
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        // A finished batch job is not restored: a later run with the same id starts anew.
        for root in &self.cfg.roots {
            let staging = root.join(STAGING_DIR);
            let _ = std::fs::remove_file(save_mode_marker(root, &self.cfg.job_id));
            let _ = std::fs::remove_dir(staging.join(&self.cfg.job_id));
            let _ = std::fs::remove_dir(staging);
        }
        Ok(())
    }
}
