//! The CDC chaos test, shared by Postgres-CDC (tests/cdc.rs) and MySQL-CDC
//! (tests/mysqlcdc.rs): a keyed table of [`Chaos::rows`] rows (every [`BIG_EVERY`]th with a
//! large value) under a continuous workload of multi-statement transactions (updates,
//! inserts, large values changed, deletes), while the job (CDC → Jdbc upserts) is killed
//! with SIGKILL [`Chaos::kills`] times: once while it starts, then at points spread over the
//! snapshot, then in the stream (some while the run catches up, before its first
//! checkpoint). The kill moments follow the job's progress as its checkpoints record it
//! (the reader's position: the snapshot's last key, or streaming), not the clock, so they
//! land in both phases on a fast machine and on a slow one. After the workload stops, the
//! target equals the source row for row and the job holds no more of the server than its
//! own position, close to the server's ([`Dialect::check_server`]).
//!
//! A [`Dialect`] supplies the SQL: the tables, one transaction, the rows as text, the job.

use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Rng;

/// Rows with a large value in the table the test starts with: every `BIG_EVERY`th key.
pub const BIG_EVERY: u64 = 100;

/// The password the job files carry where the dialect's server takes one: it must never
/// show in the job's output.
pub const SECRET: &str = "secret-not-shown";

/// One transaction of the workload, as numbers; [`Dialect::transaction`] writes it as SQL.
/// Every table in it is `src`.
#[derive(Debug, Clone)]
pub struct Transaction {
    /// The workload's round (0, 1, …).
    pub round: u64,
    /// Rows with `id BETWEEN .0 AND .0 + 1999 AND id % 19 = .1` (about 105, one of them
    /// with a large value) get `v = v + 1` and one more character in `note`; `big` is not
    /// touched (in PostgreSQL an unchanged value stored out of line, which the change
    /// stream leaves out).
    pub update: (u64, u64),
    /// Ten new rows `insert_from + 0..=9` with `v = 0`, `note` `note_md5s` md5 hex digests
    /// long; the first also gets a large `big` of `big_md5s` digests.
    pub insert_from: u64,
    /// See `insert_from`.
    pub note_md5s: u64,
    /// The row whose `big` is replaced by one of `big_md5s` digests (a multiple of
    /// [`BIG_EVERY`]; it may be gone by now).
    pub big_id: u64,
    /// See `insert_from` and `big_id`.
    pub big_md5s: u64,
    /// Rows with `id BETWEEN .0 AND .0 + 199 AND id % 7 = .1` (about 28) are deleted.
    pub delete: (u64, u64),
}

impl Transaction {
    fn random(round: u64, rows: u64, rng: &mut Rng) -> Transaction {
        // Anywhere in the key range, the rows inserted so far included: ahead of the
        // snapshot's chunks and behind them.
        let keys = rows + round * 10;
        Transaction {
            round,
            update: (rng.between(1, keys), rng.between(0, 19)),
            insert_from: rows + 1 + round * 10,
            note_md5s: rng.between(1, 60),
            big_id: rng.between(1, rows / BIG_EVERY + 1) * BIG_EVERY,
            big_md5s: rng.between(300, 1000),
            delete: (rng.between(1, keys), rng.between(0, 7)),
        }
    }
}

/// What the chaos test needs of a database: its SQL, its job file, its checks.
pub trait Dialect: Send + Sync + 'static {
    /// Runs `sql` (statements separated by `;`), failing the test on an error; returns the
    /// rows, one a line.
    fn sql(&self, sql: &str) -> String;

    /// Makes the tables afresh (and drops what an earlier run left on the server, such as
    /// a replication slot): `src (id, v, note, big)` keyed by `id` with rows `1..=rows`,
    /// `v = 0`, a short `note`, and `big` a large value (10 to 32 KB: in PostgreSQL stored out
    /// of line) where `id % BIG_EVERY = 0`, else NULL; `dst` the same, empty.
    fn create_tables(&self, rows: u64);

    /// The SQL of one transaction of the workload (see [`Transaction`]), `BEGIN` to
    /// `COMMIT`.
    fn transaction(&self, t: &Transaction) -> String;

    /// `SELECT` of table `t` (`src` or `dst`) in key order: `id`, `v`, and `note` and `big`
    /// by their md5.
    fn rows_query(&self, t: &str) -> String;

    /// The job file: `src` → Jdbc upserts by `id` into `dst`, `STREAMING`,
    /// `exactly_once = true`.
    fn job(&self) -> String;

    /// After the job stopped with a savepoint whose reader position is `position` (the
    /// reader's split state): panics unless the job holds nothing on the server beyond its
    /// own position (one replication slot, no binlog dump left) and that position is close
    /// to the server's.
    fn check_server(&self, position: &Value);

    /// Drops what the test made.
    fn clean_up(&self);
}

/// The chaos test's size and seeds.
#[derive(Debug, Clone)]
pub struct Chaos {
    /// Rows in `src` at the start.
    pub rows: u64,
    /// SIGKILLs in all.
    pub kills: u64,
    /// Of these, the kills placed at points spread over the snapshot's key range.
    pub snapshot_kills: u64,
    /// The job file's `checkpoint.interval`, in ms (a killed run resumes from the last).
    pub checkpoint_ms: u64,
    /// Seed of the workload's transactions.
    pub workload_seed: u64,
    /// Seed of the kill moments.
    pub kill_seed: u64,
}

/// Where the job resumes after a kill: the newest checkpoint's reader position.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// No checkpoint, or one taken before the reader read anything.
    Start,
    /// Inside the snapshot, after key `after` (0 before the first chunk).
    Snapshot {
        /// The last key of the chunks read.
        after: u64,
    },
    /// Every table snapshotted: following the change log.
    Stream,
}

/// The newest checkpoint of the job directory `job_dir` (id, and reader 0's split state),
/// as a restart finds it: the highest `offsets/N`, with its `sources/0/N/0`.
pub fn restore_point(job_dir: &Path) -> Option<(u64, Value)> {
    let mut ids: Vec<u64> = std::fs::read_dir(job_dir.join("offsets"))
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    // The newest can be pruned under us (only the last few are kept): then the one before.
    ids.iter().rev().take(3).find_map(|id| {
        let text = std::fs::read_to_string(job_dir.join(format!("sources/0/{id}/0"))).ok()?;
        let body = &text[..text.rfind("\n#crc32=")?];
        let splits: Vec<Value> = serde_json::from_str(body).ok()?;
        Some((*id, splits.first()?.get("state")?.clone()))
    })
}

/// The phase a reader's split state (a CDC `Position`, or null) is in.
pub fn phase(state: &Value) -> Phase {
    let Some(done) = state.get("snapshotted").and_then(Value::as_array) else {
        return Phase::Start;
    };
    if !done.is_empty() {
        return Phase::Stream;
    }
    let after = state
        .pointer("/chunk/after/0")
        .and_then(Value::as_str)
        .and_then(|k| k.parse().ok())
        .unwrap_or(0);
    Phase::Snapshot { after }
}

/// How a run is killed.
#[derive(Debug, Clone, Copy)]
enum Plan {
    /// At a random moment 100–1000 ms after its start, whatever it is doing (connecting,
    /// restoring, creating the slot, catching up).
    Early,
    /// Soon after a checkpoint of its own past key `.0` of the snapshot.
    SnapshotPast(u64),
    /// At a random moment within 2 s after a checkpoint of its own in the stream.
    Streaming,
}

/// Polls the newest checkpoint under `job_dir` every 20 ms until `ready` holds of it (id,
/// phase); fails the test (with the job's output) if `child` ends or `limit` passes first.
fn await_point(
    child: &mut Child,
    job_dir: &Path,
    limit: Duration,
    what: &str,
    ready: impl Fn(u64, &Phase) -> bool,
) {
    let start = Instant::now();
    loop {
        let point = restore_point(job_dir);
        if let Some((id, state)) = &point {
            if ready(*id, &phase(state)) {
                return;
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.stderr.take().map(|mut e| {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut e, &mut s);
                s
            });
            panic!(
                "{what}: the job ended by itself ({status}): {}",
                out.unwrap_or_default()
            );
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what}: not reached within {limit:?}; the newest checkpoint: {:?}",
                point.map(|(id, s)| (id, phase(&s)))
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lines of `a` not in `b`, at most `n` of them (both sorted by key, as the rows
/// queries return them).
fn missing(a: &str, b: &str, n: usize) -> Vec<String> {
    let b: std::collections::HashSet<&str> = b.lines().collect();
    a.lines()
        .filter(|l| !b.contains(l))
        .take(n)
        .map(|l| l.to_string())
        .collect()
}

/// The chaos test (see the module documentation) with dialect `d`.
pub fn survives_repeated_kills<D: Dialect>(d: D, c: &Chaos) {
    let d = Arc::new(d);
    let t0 = Instant::now();
    d.create_tables(c.rows);
    eprintln!("chaos: {} rows made in {:?}", c.rows, t0.elapsed());
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.conf");
    let job_text = d.job();
    std::fs::write(&job, &job_text).unwrap();
    let ckpt = dir.path().join("ckpt");
    let job_dir = ckpt.join("chaos");
    // The workload runs throughout, one transaction after another.
    let writer = d.clone();
    let rows = c.rows;
    let workload = super::Workload::start(
        c.workload_seed,
        Duration::from_millis(20),
        move |round, rng| {
            writer.sql(&writer.transaction(&Transaction::random(round, rows, rng)));
        },
    );
    let mut rng = Rng(c.kill_seed);
    // Kills after which the job resumed from a checkpoint inside the snapshot, or in the
    // stream.
    let (mut in_snapshot, mut in_stream) = (0, 0);
    for i in 0..c.kills {
        let plan = if i == 0 {
            Plan::Early
        } else if i <= c.snapshot_kills {
            // At 1/(n+2), 2/(n+2) … n/(n+2) of the key range (n the snapshot kills), so that
            // the rest of the snapshot outlasts the pause before the kill however fast it goes.
            Plan::SnapshotPast(c.rows * i / (c.snapshot_kills + 2))
        } else if (i - c.snapshot_kills).is_multiple_of(4) {
            Plan::Early
        } else {
            Plan::Streaming
        };
        let before = restore_point(&job_dir).map(|(id, _)| id);
        let newer = move |id: u64| before.is_none_or(|b| id > b);
        let mut child = super::start_job(&job, "chaos", &ckpt, &[]);
        let what = format!("run {i} ({plan:?})");
        let limit = Duration::from_secs(120);
        match plan {
            Plan::Early => std::thread::sleep(Duration::from_millis(rng.between(100, 1000))),
            Plan::SnapshotPast(key) => {
                await_point(&mut child, &job_dir, limit, &what, |id, p| {
                    newer(id)
                        && match p {
                            Phase::Snapshot { after } => *after >= key,
                            Phase::Stream => true,
                            Phase::Start => false,
                        }
                });
                std::thread::sleep(Duration::from_millis(rng.between(0, c.checkpoint_ms / 2)));
            }
            Plan::Streaming => {
                await_point(&mut child, &job_dir, limit, &what, |id, p| {
                    newer(id) && *p == Phase::Stream
                });
                std::thread::sleep(Duration::from_millis(rng.between(0, 2000)));
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "{what} ended by itself ({status}): {}",
                super::stderr_of(child)
            );
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let point = restore_point(&job_dir).map(|(id, s)| (id, phase(&s)));
        match point {
            Some((_, Phase::Snapshot { .. })) => in_snapshot += 1,
            Some((_, Phase::Stream)) => in_stream += 1,
            _ => {}
        }
        eprintln!(
            "chaos: {what} killed at {:?}; resumes from {point:?}",
            t0.elapsed()
        );
    }
    assert!(
        in_snapshot >= c.snapshot_kills / 2 && in_stream >= (c.kills - c.snapshot_kills) / 2,
        "of {} kills, {in_snapshot} resumed inside the snapshot and {in_stream} in the stream",
        c.kills
    );
    // The last run starts under load too; once it has checkpointed, the workload stops and
    // the run catches up.
    let before = restore_point(&job_dir).map(|(id, _)| id);
    let mut last = super::start_job(&job, "chaos", &ckpt, &[]);
    await_point(
        &mut last,
        &job_dir,
        Duration::from_secs(120),
        "the last run",
        |id, _| before.is_none_or(|b| id > b),
    );
    let rounds = workload.stop();
    let text = |t: &str| d.sql(&d.rows_query(t));
    let same = super::eventually(Duration::from_secs(180), || text("src") == text("dst"));
    eprintln!(
        "chaos: {rounds} transactions; the target {} the source at {:?}",
        if same { "equals" } else { "still differs from" },
        t0.elapsed()
    );
    super::wait_running("chaos", &ckpt, "local", Duration::from_secs(30));
    super::request_savepoint("chaos", &ckpt);
    let status = super::wait_for(&mut last, Duration::from_secs(60), "the last run");
    let err = super::stderr_of(last);
    assert!(status.success(), "{err}");
    if job_text.contains(SECRET) {
        assert!(!err.contains(SECRET), "the password shows: {err}");
    }
    if !same {
        let (src, dst) = (text("src"), text("dst"));
        panic!(
            "after {} kills and {rounds} transactions the target differs: {} rows in src, {} in dst; \
             rows of src missing or different in dst: {:?}; rows of dst not in src: {:?}",
            c.kills,
            src.lines().count(),
            dst.lines().count(),
            missing(&src, &dst, 5),
            missing(&dst, &src, 5)
        );
    }
    assert!(rounds > 20, "only {rounds} workload transactions ran");
    let (_, position) = restore_point(&job_dir).expect("the savepoint");
    d.check_server(&position);
    d.clean_up();
    eprintln!("chaos: done in {:?}", t0.elapsed());
}
