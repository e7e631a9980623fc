//! The kit's checks must catch the mistakes they exist for: each faulty plugin here
//! breaks one rule of the protocol, and the check that guards that rule must fail.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use ferry_api::{
    Boundedness, ChangeBatch, EnumeratorContext, JobMode, ReadStatus, ReaderContext, Result, Sink,
    SinkCommitter, SinkDelivery, SinkWriter, Source, SourceReader, Split, SplitEnumerator,
    TableSchema, WriterContext,
};
use serde_json::{json, Value};

use crate::*;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]))
}

fn batch(ids: Vec<i64>) -> ChangeBatch {
    let data = RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(ids))]).unwrap();
    ChangeBatch::inserts("t".into(), data)
}

fn ids(b: &ChangeBatch) -> Vec<i64> {
    b.data
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec()
}

// ------------------------------------------------------------------ a counting source

/// How [`Counting`]'s reader reports its progress in a snapshot.
#[derive(Debug, Clone, Copy)]
enum Snapshot {
    Exact,
    /// One batch behind: a restore reads that batch again.
    Behind,
    /// One batch ahead: a restore skips a batch.
    Ahead,
}

/// Two splits of 100 ids each, read ten at a time.
#[derive(Debug)]
struct Counting(Snapshot);

struct CountingEnumerator {
    splits: Vec<Split>,
    readers: usize,
}

impl SplitEnumerator for CountingEnumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        let readers = self.readers;
        Ok(std::mem::take(&mut self.splits)
            .into_iter()
            .enumerate()
            .map(|(i, s)| (i % readers, s))
            .collect())
    }
    fn is_exhausted(&self) -> bool {
        self.splits.is_empty()
    }
    fn add_splits_back(&mut self, splits: Vec<Split>, _reader: usize) {
        self.splits.extend(splits);
    }
    fn snapshot(&mut self, _id: u64) -> Result<Value> {
        Ok(serde_json::to_value(&self.splits).unwrap())
    }
}

struct CountingReader {
    mode: Snapshot,
    splits: Vec<(i64, i64)>, // (first id, next id to read)
    no_more: bool,
}

impl SourceReader for CountingReader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in splits {
            let first: i64 = s.id.parse().unwrap();
            self.splits.push((first, s.state["next"].as_i64().unwrap()));
        }
        Ok(())
    }
    fn no_more_splits(&mut self) {
        self.no_more = true;
    }
    fn poll_next(&mut self) -> Result<ReadStatus> {
        while let Some((first, next)) = self.splits.first_mut() {
            if *next >= *first + 100 {
                self.splits.remove(0);
                continue;
            }
            let out: Vec<i64> = (*next..*next + 10).collect();
            *next += 10;
            return Ok(ReadStatus::Batch(batch(out)));
        }
        Ok(if self.no_more {
            ReadStatus::Finished
        } else {
            ReadStatus::Idle(std::time::Duration::from_millis(1))
        })
    }
    fn snapshot(&mut self, _id: u64) -> Result<Vec<Split>> {
        let shift = match self.mode {
            Snapshot::Exact => 0,
            Snapshot::Behind => -10,
            Snapshot::Ahead => 10,
        };
        Ok(self
            .splits
            .iter()
            .map(|(first, next)| Split {
                id: first.to_string(),
                state: json!({"next": (next + shift).max(*first)}),
            })
            .collect())
    }
}

impl Source for Counting {
    fn boundedness(&self) -> Boundedness {
        Boundedness::Bounded
    }
    fn tables(&self) -> Vec<TableSchema> {
        vec![TableSchema::new("t", schema())]
    }
    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let splits = match restored {
            Some(v) => serde_json::from_value(v).unwrap(),
            None => [0, 1000]
                .iter()
                .map(|first| Split {
                    id: first.to_string(),
                    state: json!({"next": first}),
                })
                .collect(),
        };
        Ok(Box::new(CountingEnumerator {
            splits,
            readers: ctx.parallelism,
        }))
    }
    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(CountingReader {
            mode: self.0,
            splits: Vec::new(),
            no_more: false,
        }))
    }
}

#[test]
fn a_correct_source_passes_restore_and_replay() {
    let src: Arc<dyn Source> = Arc::new(Counting(Snapshot::Exact));
    for at in [0, 15, 100, 200] {
        let whole = check_source_restore(&*src, 2, job(JobMode::Batch), at).unwrap();
        assert_eq!(rows(&whole).len(), 200);
    }
    check_source_replay(&*src, 2, job(JobMode::Batch), 50).unwrap();
}

#[test]
fn a_snapshot_behind_the_rows_is_caught_as_repeated_rows() {
    let src: Arc<dyn Source> = Arc::new(Counting(Snapshot::Behind));
    let e = check_source_restore(&*src, 2, job(JobMode::Batch), 50).unwrap_err();
    assert!(
        e.to_string().contains("0 missing") && e.to_string().contains("extra"),
        "{e}"
    );
}

#[test]
fn a_snapshot_ahead_of_the_rows_is_caught_as_lost_rows() {
    let src: Arc<dyn Source> = Arc::new(Counting(Snapshot::Ahead));
    let e = check_source_restore(&*src, 1, job(JobMode::Batch), 50).unwrap_err();
    assert!(
        e.to_string().contains("missing") && e.to_string().contains("0 extra"),
        "{e}"
    );
}

// ------------------------------------------------------------ an interleaving source

/// [`Counting`]'s two splits in one reader, which reads first the split its instance number
/// picks, then the other (as a broker decides which partition's records come first), with or
/// without [`Source::bound_splits`].
#[derive(Debug)]
struct Interleaving {
    bounds: bool,
    instances: std::sync::atomic::AtomicUsize,
}

struct InterleavingReader {
    /// (first id, next id to read, end: next id not to read)
    splits: Vec<(i64, i64, i64)>,
    /// The split read first.
    turn: usize,
    no_more: bool,
}

impl SourceReader for InterleavingReader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in splits {
            let first: i64 = s.id.parse().unwrap();
            let next = s.state["next"].as_i64().unwrap();
            let end = s.state["end"].as_i64().unwrap_or(first + 100);
            self.splits.push((first, next, end));
        }
        Ok(())
    }
    fn no_more_splits(&mut self) {
        self.no_more = true;
    }
    fn poll_next(&mut self) -> Result<ReadStatus> {
        for k in 0..self.splits.len() {
            let i = (self.turn + k) % self.splits.len();
            let (_, next, end) = &mut self.splits[i];
            if *next < *end {
                let out: Vec<i64> = (*next..(*next + 10).min(*end)).collect();
                *next += out.len() as i64;
                return Ok(ReadStatus::Batch(batch(out)));
            }
        }
        Ok(if self.no_more {
            ReadStatus::Finished
        } else {
            ReadStatus::Idle(std::time::Duration::from_millis(1))
        })
    }
    fn snapshot(&mut self, _id: u64) -> Result<Vec<Split>> {
        Ok(self
            .splits
            .iter()
            .map(|(first, next, _)| Split {
                id: first.to_string(),
                state: json!({ "next": next }),
            })
            .collect())
    }
}

impl Source for Interleaving {
    fn boundedness(&self) -> Boundedness {
        Boundedness::Bounded
    }
    fn tables(&self) -> Vec<TableSchema> {
        vec![TableSchema::new("t", schema())]
    }
    fn bound_splits(&self, start: Vec<Split>, end: &[Split]) -> Result<Vec<Split>> {
        if !self.bounds {
            return Ok(start);
        }
        Ok(start
            .into_iter()
            .map(|mut s| {
                let e = end.iter().find(|e| e.id == s.id).unwrap();
                s.state["end"] = e.state["next"].clone();
                s
            })
            .collect())
    }
    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        Counting(Snapshot::Exact).create_enumerator(ctx, restored)
    }
    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        let instance = self
            .instances
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Box::new(InterleavingReader {
            splits: Vec::new(),
            turn: instance,
            no_more: false,
        }))
    }
}

#[test]
fn a_source_that_bounds_its_splits_replays_a_read_exactly() {
    let src = Interleaving {
        bounds: true,
        instances: Default::default(),
    };
    for at in [20, 50, 130] {
        check_source_bounded_replay(&src, 1, job(JobMode::Batch), at, &mut || {}).unwrap();
    }
}

#[test]
fn an_interleaving_source_without_bounds_is_caught_replaying_other_rows() {
    let src = Interleaving {
        bounds: false,
        instances: Default::default(),
    };
    // Unbounded, the replay's reader starts with the other split: the same count, other rows.
    let e = check_source_bounded_replay(&src, 1, job(JobMode::Batch), 50, &mut || {}).unwrap_err();
    assert!(
        e.to_string().contains("missing") && e.to_string().contains("extra"),
        "{e}"
    );
}

#[test]
fn a_source_read_in_a_fixed_order_replays_by_count_alone() {
    let src: Arc<dyn Source> = Arc::new(Counting(Snapshot::Exact));
    check_source_bounded_replay(&*src, 1, job(JobMode::Batch), 50, &mut || {}).unwrap();
}

// ------------------------------------------------------------------ an in-memory sink

/// The ways [`Memory`] can break the sink protocol.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// Publishes the same checkpoint again when asked twice.
    CommitTwice,
    /// Rows are visible as soon as they are written.
    VisibleOnWrite,
    /// `abort` keeps what was written.
    AbortKeeps,
}

/// A table in memory: the ids published, and which checkpoints were.
#[derive(Debug, Default)]
struct Table {
    ids: Vec<i64>,
    published: BTreeSet<u64>,
}

#[derive(Debug)]
struct Memory {
    fault: Fault,
    table: Arc<Mutex<Table>>,
}

struct MemoryWriter {
    fault: Fault,
    table: Arc<Mutex<Table>>,
    buffered: Vec<i64>,
}

impl SinkWriter for MemoryWriter {
    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        if self.fault == Fault::VisibleOnWrite {
            self.table.lock().unwrap().ids.extend(ids(batch));
        } else {
            self.buffered.extend(ids(batch));
        }
        Ok(())
    }
    fn prepare_commit(&mut self, _id: u64) -> Result<Option<Value>> {
        Ok((!self.buffered.is_empty()).then(|| json!(std::mem::take(&mut self.buffered))))
    }
    fn abort(&mut self) -> Result<()> {
        if self.fault != Fault::AbortKeeps {
            self.buffered.clear();
        }
        Ok(())
    }
}

struct MemoryCommitter {
    fault: Fault,
    table: Arc<Mutex<Table>>,
}

impl SinkCommitter for MemoryCommitter {
    fn commit(&mut self, id: u64, infos: Vec<Value>) -> Result<()> {
        let mut t = self.table.lock().unwrap();
        if !t.published.insert(id) && self.fault != Fault::CommitTwice {
            return Ok(());
        }
        for info in infos {
            let ids: Vec<i64> = serde_json::from_value(info).unwrap();
            t.ids.extend(ids);
        }
        Ok(())
    }
}

impl Sink for Memory {
    fn delivery(&self) -> SinkDelivery {
        SinkDelivery::ExactlyOnce
    }
    fn create_writer(
        &self,
        _ctx: &WriterContext,
        _restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(MemoryWriter {
            fault: self.fault,
            table: self.table.clone(),
            buffered: Vec::new(),
        }))
    }
    fn create_committer(&self) -> Result<Option<Box<dyn SinkCommitter>>> {
        Ok(Some(Box::new(MemoryCommitter {
            fault: self.fault,
            table: self.table.clone(),
        })))
    }
}

fn check_memory(fault: Fault, exactly_once: bool) -> Result<()> {
    let table = Arc::new(Mutex::new(Table::default()));
    let input: Vec<ChangeBatch> = (0..6)
        .map(|b| batch((b * 10..b * 10 + 10).collect()))
        .collect();
    let make = || -> Result<Arc<dyn Sink>> {
        Ok(Arc::new(Memory {
            fault,
            table: table.clone(),
        }))
    };
    let read_back = || Ok(vec![batch(table.lock().unwrap().ids.clone())]);
    let delivery = if exactly_once {
        SinkDelivery::ExactlyOnce
    } else {
        SinkDelivery::AtLeastOnce
    };
    check_sink(delivery, &make, 2, job(JobMode::Batch), &input, &read_back)
}

#[test]
fn a_correct_sink_passes_both_checks() {
    check_memory(Fault::None, true).unwrap();
    check_memory(Fault::None, false).unwrap();
}

#[test]
fn each_broken_rule_fails_the_exactly_once_check() {
    for (fault, phase) in [
        (Fault::CommitTwice, "published a second time"),
        (Fault::VisibleOnWrite, "after a crash lost rows"),
        (Fault::AbortKeeps, "at the end"),
    ] {
        let e = check_memory(fault, true).unwrap_err().to_string();
        assert!(e.contains(phase) && e.contains("extra"), "{fault:?}: {e}");
    }
}

#[test]
fn duplicates_pass_the_at_least_once_check_and_losses_do_not() {
    check_memory(Fault::CommitTwice, false).unwrap();
    let table = Arc::new(Mutex::new(Table::default()));
    let input = vec![batch((0..40).collect())];
    let make = || -> Result<Arc<dyn Sink>> {
        Ok(Arc::new(Memory {
            fault: Fault::None,
            table: table.clone(),
        }))
    };
    // A target that drops its last row loses data.
    let lossy = || {
        let mut ids = table.lock().unwrap().ids.clone();
        ids.pop();
        Ok(vec![batch(ids)])
    };
    let e = check_sink(
        SinkDelivery::AtLeastOnce,
        &make,
        1,
        job(JobMode::Batch),
        &input,
        &lossy,
    )
    .unwrap_err();
    assert!(e.to_string().contains("rows lost"), "{e}");
}

#[test]
fn rows_compare_as_multisets() {
    let a = rows(&[batch(vec![3, 1]), batch(vec![2])]);
    let b = rows(&[batch(vec![1, 2, 3])]);
    assert_eq!(a, b);
    assert!(diff_rows(&a, &rows(&[batch(vec![1, 2, 2])])).is_some());
    assert!(batch(vec![1]).data.column(0).null_count() == 0);
}
