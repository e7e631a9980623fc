//! Row counters per source stream and per sink, read by the progress line and the
//! end-of-run summary. Counters are atomics bumped once per batch.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Counters of one run.
#[derive(Debug, Default)]
pub struct Metrics {
    read: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    written: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
}

impl Metrics {
    /// The counter of rows read by the source emitting `stream`.
    pub fn source_counter(&self, stream: &str) -> Arc<AtomicU64> {
        counter(&self.read, stream)
    }
    /// The counter of rows written by sink `name`.
    pub fn sink_counter(&self, name: &str) -> Arc<AtomicU64> {
        counter(&self.written, name)
    }
    /// Rows read, by source stream.
    pub fn read(&self) -> BTreeMap<String, u64> {
        snapshot(&self.read)
    }
    /// Rows written, by sink.
    pub fn written(&self) -> BTreeMap<String, u64> {
        snapshot(&self.written)
    }
}

fn counter(m: &Mutex<BTreeMap<String, Arc<AtomicU64>>>, key: &str) -> Arc<AtomicU64> {
    let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
    g.entry(key.to_string()).or_default().clone()
}

fn snapshot(m: &Mutex<BTreeMap<String, Arc<AtomicU64>>>) -> BTreeMap<String, u64> {
    let g = m.lock().unwrap_or_else(|p| p.into_inner());
    g.iter()
        .map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed)))
        .collect()
}
