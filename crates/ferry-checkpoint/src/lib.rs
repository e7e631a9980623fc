//! # ferry-checkpoint
//!
//! What a checkpoint of the embedded engine holds and where it is kept. The Spark engine
//! does not store this format: its offsets and commits are Spark's own logs (one Spark
//! checkpoint location per sink, whose offsets are the readers' split states). What the two
//! engines share is the job directory and its rules (the lock, the `state` and `control`
//! files, the job's [`JobLayout`] and the resume rule built on it), the atomic checksummed
//! file writes, and the Spark-like layout of `offsets/N`, `commits/N` and
//! `sources/<source>/<N>/<reader>`. The Spark engine refuses a job directory of the
//! embedded engine.
//!
//! A checkpoint `N` holds, for every source, the enumerator's state and each reader's
//! splits, and for every sink, each writer's state and the commits prepared for `N`.
//! It is stored before the committers publish those commits, and marked committed
//! after; a restart re-publishes a stored but unmarked checkpoint (committers are
//! idempotent).
//!
//! A job directory is used by one run at a time: [`JobLock`] is the OS file lock that
//! ensures it, on both engines.

mod data;
mod file;
mod layout;
mod lock;

pub use data::{CheckpointData, SinkState, SourceState};
pub use file::{
    create_discard_dir, job_dir, read_checked, write_atomic, FileStore, JobInfo, JobState,
};
pub use layout::{hash_options, JobLayout, NodeLayout};
pub use lock::{format_utc, lock_status, JobLock, LockHolder, LockStatus, LOCK_FILE};

use ferry_api::Result;

/// Where checkpoints are kept. Local files ([`FileStore`]) or memory ([`MemoryStore`]);
/// an object store can implement the same trait.
pub trait CheckpointStore: Send {
    /// Stores checkpoint `data` durably (before its commits are published).
    fn save(&mut self, data: &CheckpointData) -> Result<()>;
    /// Records that the committers published checkpoint `id`.
    fn mark_committed(&mut self, id: u64) -> Result<()>;
    /// The latest complete checkpoint, and whether its commits were published.
    fn latest(&mut self) -> Result<Option<(CheckpointData, bool)>>;
}

/// Keeps only the latest checkpoint, in memory: for jobs run without a checkpoint
/// directory, which cannot resume after the process ends.
#[derive(Debug, Default)]
pub struct MemoryStore {
    latest: Option<(CheckpointData, bool)>,
}

impl CheckpointStore for MemoryStore {
    fn save(&mut self, data: &CheckpointData) -> Result<()> {
        self.latest = Some((data.clone(), false));
        Ok(())
    }
    fn mark_committed(&mut self, id: u64) -> Result<()> {
        if let Some((d, c)) = self.latest.as_mut() {
            if d.id == id {
                *c = true;
            }
        }
        Ok(())
    }
    fn latest(&mut self) -> Result<Option<(CheckpointData, bool)>> {
        Ok(self.latest.clone())
    }
}

/// Asks the process running the job in `job_dir` to `savepoint` or `cancel`: the job
/// watches for this file.
pub fn write_control(job_dir: &std::path::Path, request: &str) -> Result<()> {
    let tmp = job_dir.join(".control.tmp");
    std::fs::write(&tmp, request)
        .map_err(|e| ferry_api::FerryError::io("checkpoint", tmp.display(), e))?;
    std::fs::rename(&tmp, job_dir.join("control"))
        .map_err(|e| ferry_api::FerryError::io("checkpoint", job_dir.display(), e))
}
