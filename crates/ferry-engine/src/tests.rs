//! Engine tests with two small fixtures written for them: a source of numbered rows split
//! into ranges, and a transactional sink that publishes rows into a shared list only when
//! its committer runs. They check the protocol itself: every row once across savepoints
//! and restores, barrier alignment with several readers, and failures that end the job.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow::array::{Array, Int64Array};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use ferry_api::*;
use ferry_checkpoint::{CheckpointStore, MemoryStore};
use serde_json::{json, Value};

use crate::{run, Metrics, RunOutcome, StopHandle};
use ferry_plan::{build_plan, PlanOptions};

mod tcp;

/// Rows `0..rows` in `splits` ranges, 10 rows a batch; streaming readers idle at the end.
#[derive(Debug)]
struct Numbers {
    rows: i64,
    splits: i64,
    fail_at: Option<i64>,
    /// When set, the enumerator never finishes discovering, and every discovery after the
    /// first takes this long (a slow query for new splits).
    discover_sleep_ms: Option<i64>,
}

struct NumbersFactory;
impl SourceFactory for NumbersFactory {
    fn name(&self) -> &'static str {
        "Numbers"
    }
    fn description(&self) -> &'static str {
        "numbered rows"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[]
    }
    fn create(&self, o: &mut Options, _job: &JobContext) -> Result<Box<dyn Source>> {
        Ok(Box::new(Numbers {
            rows: o.i64("rows")?.unwrap_or(100),
            splits: o.i64("splits")?.unwrap_or(4),
            fail_at: o.i64("fail_at")?,
            discover_sleep_ms: o.i64("discover_sleep_ms")?,
        }))
    }
}

impl Source for Numbers {
    fn boundedness(&self) -> Boundedness {
        Boundedness::Bounded
    }
    fn tables(&self) -> Vec<TableSchema> {
        vec![TableSchema::new(
            "n",
            Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
        )]
    }
    fn create_enumerator(
        &self,
        _ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let done = restored.is_some();
        let per = self.rows / self.splits;
        let pending = if done {
            Vec::new()
        } else {
            (0..self.splits)
                .map(|i| Split {
                    id: i.to_string(),
                    state: json!({"next": i * per, "end": (i + 1) * per}),
                })
                .collect()
        };
        Ok(Box::new(NumbersEnum {
            pending,
            handed_out: done,
            sleep: self
                .discover_sleep_ms
                .map(|ms| Duration::from_millis(ms.max(0) as u64)),
        }))
    }
    fn create_reader(&self, ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(NumbersReader {
            splits: Vec::new(),
            no_more: false,
            streaming: ctx.job.mode == JobMode::Streaming,
            fail_at: self.fail_at,
        }))
    }
}

struct NumbersEnum {
    pending: Vec<Split>,
    handed_out: bool,
    sleep: Option<Duration>,
}
impl SplitEnumerator for NumbersEnum {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        if let (Some(d), true) = (self.sleep, self.handed_out) {
            std::thread::sleep(d);
        }
        self.handed_out = true;
        Ok(self.pending.drain(..).enumerate().collect())
    }
    fn is_exhausted(&self) -> bool {
        self.handed_out && self.pending.is_empty() && self.sleep.is_none()
    }
    fn add_splits_back(&mut self, splits: Vec<Split>, _reader: usize) {
        self.pending.extend(splits);
    }
    fn snapshot(&mut self, _id: u64) -> Result<Value> {
        Ok(json!(self.pending.len()))
    }
}

struct NumbersReader {
    splits: Vec<(String, i64, i64)>,
    no_more: bool,
    streaming: bool,
    fail_at: Option<i64>,
}
impl SourceReader for NumbersReader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in splits {
            self.splits.push((
                s.id,
                s.state["next"].as_i64().unwrap_or(0),
                s.state["end"].as_i64().unwrap_or(0),
            ));
        }
        Ok(())
    }
    fn no_more_splits(&mut self) {
        self.no_more = true;
    }
    fn poll_next(&mut self) -> Result<ReadStatus> {
        let Some(s) = self.splits.iter_mut().find(|s| s.1 < s.2) else {
            return Ok(if self.no_more && !self.streaming {
                ReadStatus::Finished
            } else {
                ReadStatus::Idle(Duration::from_millis(5))
            });
        };
        let end = (s.1 + 10).min(s.2);
        if let Some(f) = self.fail_at {
            if (s.1..end).contains(&f) {
                return Err(FerryError::external(
                    "Numbers",
                    format!("cannot read row {f}"),
                ));
            }
        }
        let ids = Int64Array::from_iter_values(s.1..end);
        s.1 = end;
        std::thread::sleep(Duration::from_millis(1));
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(ids)])?;
        Ok(ReadStatus::Batch(ChangeBatch::inserts("n".into(), batch)))
    }
    fn snapshot(&mut self, _id: u64) -> Result<Vec<Split>> {
        Ok(self
            .splits
            .iter()
            .map(|(id, next, end)| Split {
                id: id.clone(),
                state: json!({"next": next, "end": end}),
            })
            .collect())
    }
}

/// Publishes rows into `published` only in its committer; staged rows live in the commit info.
#[derive(Debug, Clone, Default)]
struct Collect {
    published: Arc<Mutex<Vec<i64>>>,
    commits: Arc<Mutex<Vec<u64>>>,
    /// Rows its writers were handed (staged or not): when data reached the sink.
    written: Arc<std::sync::atomic::AtomicUsize>,
}

struct CollectFactory(Collect);
impl SinkFactory for CollectFactory {
    fn name(&self) -> &'static str {
        "Collect"
    }
    fn description(&self) -> &'static str {
        "collects rows"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[]
    }
    fn create(
        &self,
        _o: &mut Options,
        _input: &[TableSchema],
        _job: &JobContext,
    ) -> Result<Arc<dyn Sink>> {
        Ok(Arc::new(self.0.clone()))
    }
}
impl Sink for Collect {
    fn delivery(&self) -> SinkDelivery {
        SinkDelivery::ExactlyOnce
    }
    fn create_writer(
        &self,
        _ctx: &WriterContext,
        _restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(CollectWriter {
            staged: Vec::new(),
            written: self.written.clone(),
        }))
    }
    fn create_committer(&self) -> Result<Option<Box<dyn SinkCommitter>>> {
        Ok(Some(Box::new(self.clone())))
    }
}
struct CollectWriter {
    staged: Vec<i64>,
    written: Arc<std::sync::atomic::AtomicUsize>,
}
impl SinkWriter for CollectWriter {
    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        let ids = batch
            .data
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| FerryError::internal("ids"))?;
        self.staged.extend(ids.values().iter());
        self.written
            .fetch_add(ids.len(), std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
    fn prepare_commit(&mut self, _id: u64) -> Result<Option<Value>> {
        Ok(Some(json!(std::mem::take(&mut self.staged))))
    }
}
impl SinkCommitter for Collect {
    fn commit(&mut self, id: u64, infos: Vec<Value>) -> Result<()> {
        let mut seen = self
            .commits
            .lock()
            .map_err(|_| FerryError::internal("lock"))?;
        if seen.contains(&id) {
            return Ok(()); // idempotent, as the contract requires
        }
        seen.push(id);
        let mut p = self
            .published
            .lock()
            .map_err(|_| FerryError::internal("lock"))?;
        for info in infos {
            p.extend(
                info.as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_i64),
            );
        }
        Ok(())
    }
}

fn plan(text: &str, sink: &Collect) -> ferry_plan::JobPlan {
    plan_with(text, sink, Registry::new().source(NumbersFactory))
}

/// The plan of `text` with `registry`'s plugins and the `Collect` sink.
fn plan_with(text: &str, sink: &Collect, registry: Registry) -> ferry_plan::JobPlan {
    let job = ferry_config::parse_job(text, "test.conf", &Default::default()).expect("job parses");
    let registry = registry.sink(CollectFactory(sink.clone()));
    build_plan(job, &registry, &PlanOptions::default()).expect("plan builds")
}

/// Runs plan `p` without in-process retries until it ends or `stop` stops it.
fn run_job(
    p: &ferry_plan::JobPlan,
    store: &mut MemoryStore,
    stop: StopHandle,
) -> Result<RunOutcome> {
    run(
        p,
        store,
        stop,
        Arc::new(Metrics::default()),
        0,
        Duration::ZERO,
    )
}

fn sorted(v: &Arc<Mutex<Vec<i64>>>) -> Vec<i64> {
    let mut v = v.lock().unwrap().clone();
    v.sort_unstable();
    v
}

#[test]
fn a_bounded_job_delivers_every_row_once_through_the_final_checkpoint() {
    let sink = Collect::default();
    let p = plan("env { parallelism = 3 }\nsource { Numbers { rows = 400, splits = 8 } }\nsink { Collect {} }", &sink);
    let mut store = MemoryStore::default();
    let out = run_job(&p, &mut store, StopHandle::default()).unwrap();
    assert_eq!(out, RunOutcome::Finished);
    assert_eq!(sorted(&sink.published), (0..400).collect::<Vec<_>>());
}

#[test]
fn periodic_checkpoints_with_several_readers_and_writers_publish_each_row_once() {
    let sink = Collect::default();
    let p = plan(
        "env { parallelism = 3, checkpoint.interval = 5 }\nsource { Numbers { rows = 3000, splits = 6 } }\nsink { Collect { parallelism = 2 } }",
        &sink,
    );
    let mut store = MemoryStore::default();
    run_job(&p, &mut store, StopHandle::default()).unwrap();
    assert!(
        sink.commits.lock().unwrap().len() > 2,
        "several checkpoints were taken"
    );
    assert_eq!(sorted(&sink.published), (0..3000).collect::<Vec<_>>());
}

#[test]
fn a_savepoint_then_a_restore_gives_every_row_once() {
    let sink = Collect::default();
    let text = "env { job.mode = STREAMING, parallelism = 2, checkpoint.interval = 10 }\nsource { Numbers { rows = 4000, splits = 4 } }\nsink { Collect {} }";
    let p = plan(text, &sink);
    let mut store = MemoryStore::default();
    let stop = StopHandle::default();
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        s2.request_savepoint();
    });
    assert_eq!(
        run_job(&p, &mut store, stop).unwrap(),
        RunOutcome::Savepoint
    );
    t.join().unwrap();
    let first = sink.published.lock().unwrap().len();
    assert!(
        first > 0 && first < 4000,
        "the savepoint came mid-stream ({first} rows)"
    );

    // Same store: the restored job goes on where the savepoint left off.
    let p = plan(text, &sink);
    let stop = StopHandle::default();
    let s2 = stop.clone();
    let published = sink.published.clone();
    let t = std::thread::spawn(move || {
        while published.lock().unwrap().len() < 4000 {
            std::thread::sleep(Duration::from_millis(10));
        }
        s2.request_savepoint();
    });
    run_job(&p, &mut store, stop).unwrap();
    t.join().unwrap();
    assert_eq!(sorted(&sink.published), (0..4000).collect::<Vec<_>>());
}

#[test]
fn on_idle_checkpoints_publish_once_the_readers_catch_up_and_not_again_while_idle() {
    let sink = Collect::default();
    // The interval alone would publish nothing for a minute.
    let p = plan("env { job.mode = STREAMING, parallelism = 2, checkpoint.interval = 60000, checkpoint.on-idle = true }\nsource { Numbers { rows = 400, splits = 4 } }\nsink { Collect {} }", &sink);
    let mut store = MemoryStore::default();
    let stop = StopHandle::default();
    let s2 = stop.clone();
    let (published, commits) = (sink.published.clone(), sink.commits.clone());
    let t = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        while published.lock().unwrap().len() < 400 && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let took = start.elapsed();
        let checkpoints = commits.lock().unwrap().len();
        std::thread::sleep(Duration::from_millis(300));
        let later = commits.lock().unwrap().len();
        s2.request_savepoint();
        (took, checkpoints, later)
    });
    let out = run_job(&p, &mut store, stop).unwrap();
    let (took, checkpoints, later) = t.join().unwrap();
    assert_eq!(out, RunOutcome::Savepoint);
    assert!(took < Duration::from_secs(10), "published after {took:?}");
    assert_eq!(checkpoints, later, "no checkpoint while nothing is pending");
    assert_eq!(sorted(&sink.published), (0..400).collect::<Vec<_>>());
}

#[test]
fn checkpoint_interval_zero_in_a_streaming_job_checkpoints_once_the_readers_catch_up() {
    let sink = Collect::default();
    // No periodic checkpoint (`checkpoint.interval = 0`): the planner's one meaning of 0
    // for a STREAMING job, the same as on Spark, where each micro-batch reads until its
    // readers have caught up. Before, 0 published nothing until the job was stopped.
    let p = plan("env { job.mode = STREAMING, parallelism = 2, checkpoint.interval = 0 }\nsource { Numbers { rows = 400, splits = 4 } }\nsink { Collect {} }", &sink);
    assert_eq!(
        (p.checkpoint.interval_ms, p.checkpoint.on_idle),
        (None, true)
    );
    assert!(
        p.describe()
            .contains("checkpoints: when every reader has caught up"),
        "{}",
        p.describe()
    );
    let mut store = MemoryStore::default();
    let stop = StopHandle::default();
    let s2 = stop.clone();
    let published = sink.published.clone();
    let t = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        while published.lock().unwrap().len() < 400 && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let took = start.elapsed();
        s2.request_savepoint();
        took
    });
    assert_eq!(
        run_job(&p, &mut store, stop).unwrap(),
        RunOutcome::Savepoint
    );
    let took = t.join().unwrap();
    assert!(took < Duration::from_secs(10), "published after {took:?}");
    assert_eq!(sorted(&sink.published), (0..400).collect::<Vec<_>>());
}

#[test]
fn a_slow_discovery_does_not_hold_up_checkpoints() {
    let sink = Collect::default();
    // Every discovery after the first takes 3 s; checkpoints are due every 50 ms.
    let p = plan("env { job.mode = STREAMING, checkpoint.interval = 50 }\nsource { Numbers { rows = 200, splits = 2, discover_sleep_ms = 3000 } }\nsink { Collect {} }", &sink);
    let mut store = MemoryStore::default();
    let stop = StopHandle::default();
    let s2 = stop.clone();
    let commits = sink.commits.clone();
    let t = std::thread::spawn(move || {
        // The second discovery starts about 200 ms in and sleeps until about 3.2 s.
        std::thread::sleep(Duration::from_millis(500));
        let before = commits.lock().unwrap().len();
        std::thread::sleep(Duration::from_millis(1500));
        let after = commits.lock().unwrap().len();
        s2.request_savepoint();
        (before, after)
    });
    assert_eq!(
        run_job(&p, &mut store, stop).unwrap(),
        RunOutcome::Savepoint
    );
    let (before, after) = t.join().unwrap();
    // About 30 in those 1.5 s; on the coordinator thread the discovery allowed none.
    assert!(
        after >= before + 5,
        "{} checkpoints completed while the enumerator discovered",
        after - before
    );
    assert_eq!(sorted(&sink.published), (0..200).collect::<Vec<_>>());
}

#[test]
fn min_pause_keeps_checkpoints_apart_however_short_the_interval() {
    let sink = Collect::default();
    let p = plan("env { job.mode = STREAMING, checkpoint.interval = 5, checkpoint.min-pause = 250 }\nsource { Numbers { rows = 100000, splits = 2 } }\nsink { Collect {} }", &sink);
    let mut store = MemoryStore::default();
    let stop = StopHandle::default();
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        s2.request_savepoint();
    });
    let start = std::time::Instant::now();
    run_job(&p, &mut store, stop).unwrap();
    let ran = start.elapsed();
    t.join().unwrap();
    // Every 5 ms would be about 200 a second; 250 ms apart, one per 250 ms of the run at
    // most (however late the savepoint came on a loaded machine), plus the savepoint.
    let n = sink.commits.lock().unwrap().len() as u128;
    let most = ran.as_millis() / 250 + 2;
    assert!((2..=most).contains(&n), "{n} checkpoints in {ran:?}");
}

#[test]
fn a_failing_reader_fails_the_job_with_its_error_and_nothing_hangs() {
    let sink = Collect::default();
    let p = plan("env { parallelism = 2 }\nsource { Numbers { rows = 1000, splits = 4, fail_at = 333 } }\nsink { Collect {} }", &sink);
    let mut store = MemoryStore::default();
    let e = run_job(&p, &mut store, StopHandle::default()).unwrap_err();
    assert_eq!(e.to_string(), "Numbers: cannot read row 333");
}

#[test]
fn in_process_retries_resume_from_the_latest_checkpoint() {
    let sink = Collect::default();
    let p = plan("env { checkpoint.interval = 5 }\nsource { Numbers { rows = 3000, splits = 2, fail_at = 2500 } }\nsink { Collect {} }", &sink);
    let mut store = MemoryStore::default();
    // The row that fails fails every attempt, so retries run out; rows before it are published once.
    let e = run(
        &p,
        &mut store,
        StopHandle::default(),
        Arc::new(Metrics::default()),
        2,
        Duration::ZERO,
    )
    .unwrap_err();
    assert!(e.to_string().contains("cannot read row 2500"));
    let published = sorted(&sink.published);
    let mut dedup = published.clone();
    dedup.dedup();
    assert_eq!(published, dedup, "no row published twice across retries");
    assert!(store.latest().unwrap().is_some());
}

#[test]
fn the_engine_and_checkpoint_crates_depend_on_no_connector() {
    for manifest in [
        concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../ferry-checkpoint/Cargo.toml"
        ),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../ferry-api/Cargo.toml"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../ferry-config/Cargo.toml"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../ferry-plan/Cargo.toml"),
    ] {
        let text = std::fs::read_to_string(manifest).unwrap();
        for forbidden in [
            "ferry-connector",
            "ferry-transforms",
            "ferry-sql",
            "ferry-plugins",
        ] {
            assert!(
                !text.contains(forbidden),
                "{manifest} depends on {forbidden}"
            );
        }
    }
}

#[test]
fn neither_engine_depends_on_the_other_and_both_on_the_planner() {
    let manifest = |crate_dir: &str| {
        std::fs::read_to_string(format!(
            "{}/../{crate_dir}/Cargo.toml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let (engine, spark) = (manifest("ferry-engine"), manifest("ferry-spark"));
    assert!(
        !engine.contains("ferry-spark"),
        "ferry-engine depends on ferry-spark"
    );
    assert!(
        !spark.contains("ferry-engine"),
        "ferry-spark depends on ferry-engine"
    );
    assert!(engine.contains("ferry-plan") && spark.contains("ferry-plan"));
}

#[test]
fn no_connector_depends_on_another() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../connectors");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        seen += 1;
        let own = text
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .unwrap()
            .trim_matches('"')
            .to_string();
        for line in text.lines() {
            let dep = line.split([' ', '=']).next().unwrap_or("");
            // The test kit is the one shared crate named like a connector.
            if dep.starts_with("ferry-connector-") && dep != own && dep != "ferry-connector-testkit"
            {
                panic!("{} depends on {dep}", manifest.display());
            }
        }
    }
    assert!(seen >= 10, "found only {seen} connector manifests in {dir}");
}
