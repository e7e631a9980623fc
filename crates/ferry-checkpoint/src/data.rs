//! The content of one checkpoint.

use ferry_api::Split;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::JobLayout;

/// One source's part of a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceState {
    /// The enumerator's snapshot.
    pub enumerator: Value,
    /// The splits each reader owned, by reader index.
    pub readers: Vec<Vec<Split>>,
}

/// One sink's part of a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SinkState {
    /// Each writer's state, by writer index.
    pub writers: Vec<Option<Value>>,
    /// The commits the writers prepared for this checkpoint, for the committer.
    pub commits: Vec<Value>,
}

/// Checkpoint `id` of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointData {
    /// Checkpoint number, increasing from 1.
    pub id: u64,
    /// Fingerprint of the job file it was taken with.
    pub fingerprint: String,
    /// The shape of the job it was taken with, to decide whether a changed job file can
    /// resume it (absent in checkpoints of older versions: those resume only unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<JobLayout>,
    /// By source index in the job file.
    pub sources: Vec<SourceState>,
    /// By sink index in the job file.
    pub sinks: Vec<SinkState>,
}
