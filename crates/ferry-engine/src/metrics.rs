//! Counters of one run: rows and bytes per source stream and per sink, the time readers
//! waited for a sink's full input channel (backpressure), and checkpoint statistics. The
//! progress line, the end-of-run summary and the operator's endpoints (`ferry serve`,
//! `ferry run --metrics-listen`) read them; the engine knows nothing of how they are shown.
//! Row and byte counters are atomics bumped once per batch.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Rows and bytes through one source stream or one sink.
#[derive(Debug, Default)]
pub struct Flow {
    /// Rows.
    pub rows: AtomicU64,
    /// Bytes: the Arrow memory size of the batches (`RecordBatch::get_array_memory_size`).
    pub bytes: AtomicU64,
    /// Nanoseconds readers spent waiting for this sink's writers to take a batch (a full
    /// input channel: the sink is the bottleneck). Zero for sources.
    pub wait_ns: AtomicU64,
}

impl Flow {
    /// Counts one batch.
    pub fn add(&self, rows: usize, bytes: usize) {
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// A snapshot of one [`Flow`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCount {
    /// Rows.
    pub rows: u64,
    /// Bytes.
    pub bytes: u64,
    /// Time readers waited for the sink, in nanoseconds.
    pub wait_ns: u64,
}

/// One completed checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRecord {
    /// Its id.
    pub id: u64,
    /// When it completed, in milliseconds since the epoch.
    pub completed_ms: u64,
    /// From trigger to commit.
    pub duration: Duration,
    /// Size of its stored state in bytes (the JSON of every snapshot and prepared commit).
    pub bytes: u64,
}

/// Checkpoint statistics of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    /// Checkpoints completed.
    pub completed: u64,
    /// Checkpoints that failed (timed out, or a task failed while one was in flight).
    pub failed: u64,
    /// The latest completed checkpoints, oldest first (at most [`HISTORY`]).
    pub history: VecDeque<CheckpointRecord>,
}

/// How many completed checkpoints [`CheckpointStats::history`] keeps.
pub const HISTORY: usize = 20;

/// Counters of one run.
#[derive(Debug, Default)]
pub struct Metrics {
    read: Mutex<BTreeMap<String, Arc<Flow>>>,
    written: Mutex<BTreeMap<String, Arc<Flow>>>,
    checkpoints: Mutex<CheckpointStats>,
    /// Source readers' own figures, by (stream, reader subtask, name).
    figures: Mutex<BTreeMap<(String, usize, &'static str), f64>>,
}

impl Metrics {
    /// The counters of the source emitting `stream`.
    pub fn source_flow(&self, stream: &str) -> Arc<Flow> {
        flow(&self.read, stream)
    }
    /// The counters of sink `name`.
    pub fn sink_flow(&self, name: &str) -> Arc<Flow> {
        flow(&self.written, name)
    }
    /// Rows read, by source stream.
    pub fn read(&self) -> BTreeMap<String, u64> {
        rows(&self.read)
    }
    /// Rows written, by sink.
    pub fn written(&self) -> BTreeMap<String, u64> {
        rows(&self.written)
    }
    /// Rows and bytes read, by source stream.
    pub fn read_flows(&self) -> BTreeMap<String, FlowCount> {
        snapshot(&self.read)
    }
    /// Rows, bytes and waits written, by sink.
    pub fn written_flows(&self) -> BTreeMap<String, FlowCount> {
        snapshot(&self.written)
    }
    /// Records a completed checkpoint.
    pub fn checkpoint_completed(&self, id: u64, duration: Duration, bytes: u64) {
        let mut g = self.checkpoints.lock().unwrap_or_else(|p| p.into_inner());
        g.completed += 1;
        if g.history.len() >= HISTORY {
            g.history.pop_front();
        }
        g.history.push_back(CheckpointRecord {
            id,
            completed_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            duration,
            bytes,
        });
    }
    /// Records a failed checkpoint.
    pub fn checkpoint_failed(&self) {
        let mut g = self.checkpoints.lock().unwrap_or_else(|p| p.into_inner());
        g.failed += 1;
    }
    /// Records the figures reader `subtask` of the source emitting `stream` reported.
    pub fn set_figures(&self, stream: &str, subtask: usize, figures: &[(&'static str, f64)]) {
        let mut g = self.figures.lock().unwrap_or_else(|p| p.into_inner());
        for (name, v) in figures {
            g.insert((stream.to_string(), subtask, name), *v);
        }
    }
    /// The source readers' figures: (stream, subtask, name, value).
    pub fn figures(&self) -> Vec<(String, usize, &'static str, f64)> {
        let g = self.figures.lock().unwrap_or_else(|p| p.into_inner());
        g.iter()
            .map(|((s, i, n), v)| (s.clone(), *i, *n, *v))
            .collect()
    }
    /// Checkpoint statistics so far.
    pub fn checkpoints(&self) -> CheckpointStats {
        self.checkpoints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

fn flow(m: &Mutex<BTreeMap<String, Arc<Flow>>>, key: &str) -> Arc<Flow> {
    let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
    g.entry(key.to_string()).or_default().clone()
}

fn rows(m: &Mutex<BTreeMap<String, Arc<Flow>>>) -> BTreeMap<String, u64> {
    let g = m.lock().unwrap_or_else(|p| p.into_inner());
    g.iter()
        .map(|(k, v)| (k.clone(), v.rows.load(Ordering::Relaxed)))
        .collect()
}

fn snapshot(m: &Mutex<BTreeMap<String, Arc<Flow>>>) -> BTreeMap<String, FlowCount> {
    let g = m.lock().unwrap_or_else(|p| p.into_inner());
    g.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                FlowCount {
                    rows: v.rows.load(Ordering::Relaxed),
                    bytes: v.bytes.load(Ordering::Relaxed),
                    wait_ns: v.wait_ns.load(Ordering::Relaxed),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_history_keeps_the_latest_ones() {
        let m = Metrics::default();
        for id in 1..=(HISTORY as u64 + 5) {
            m.checkpoint_completed(id, Duration::from_millis(id), id * 10);
        }
        m.checkpoint_failed();
        let s = m.checkpoints();
        assert_eq!(s.completed, HISTORY as u64 + 5);
        assert_eq!(s.failed, 1);
        assert_eq!(s.history.len(), HISTORY);
        assert_eq!(s.history.front().map(|r| r.id), Some(6));
        assert_eq!(
            s.history.back().map(|r| r.bytes),
            Some((HISTORY as u64 + 5) * 10)
        );
    }

    #[test]
    fn flows_count_rows_and_bytes_per_key() {
        let m = Metrics::default();
        m.source_flow("a").add(3, 30);
        m.source_flow("a").add(2, 20);
        m.sink_flow("s").add(5, 7);
        assert_eq!(m.read().get("a"), Some(&5));
        assert_eq!(m.read_flows().get("a").map(|f| f.bytes), Some(50));
        assert_eq!(m.written().get("s"), Some(&5));
    }
}
