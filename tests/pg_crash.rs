//! PostgreSQL crashing under a running job: `pg_ctlcluster … stop -m immediate` ends the
//! server without a shutdown checkpoint, so WAL it had not flushed is lost, as in a power
//! cut; then the server starts again and recovers. A job writing into it must lose no row.
//!
//! This is a test binary of its own because it stops the machine's PostgreSQL: Cargo runs
//! test binaries one after another, so no other test's connection meets the crash.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn psql(sql: &str) -> String {
    common::psql("test", sql)
}

/// Runs `pg_ctlcluster` on the machine's one cluster (its version is the one directory of
/// /etc/postgresql).
fn pg_ctlcluster(args: &[&str]) {
    let version = std::fs::read_dir("/etc/postgresql")
        .expect("PostgreSQL's configuration directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .next()
        .expect("a PostgreSQL cluster");
    let out = Command::new("pg_ctlcluster")
        .arg("--skip-systemctl-redirect")
        .arg(&version)
        .arg("main")
        .args(args)
        .output()
        .expect("pg_ctlcluster runs");
    assert!(
        out.status.success(),
        "pg_ctlcluster {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn server_accepts() -> bool {
    Command::new("pg_isready")
        .args(["-h", "127.0.0.1", "-p", "5432", "-q"])
        .status()
        .is_ok_and(|s| s.success())
}

const ROWS_PER_FILE: u64 = 400;

/// A streaming LocalFile source → Jdbc sink (plain inserts, small batches, so the writer
/// commits many times between checkpoints) while PostgreSQL crashes and comes back: the
/// job fails over (`job.retry.times`) to its last checkpoint and in the end the table
/// holds every id (at least once: plain inserts after a restore are written again, as
/// `ferry check` states). Asynchronous commits between checkpoints (see the Jdbc sink's
/// `AsyncCommits`) are what a crash can take back; the writer notices the restarted
/// server and fails rather than completing a checkpoint over rows that are gone.
#[test]
fn a_postgresql_crash_under_a_streaming_jdbc_job_loses_no_row() {
    psql(
        "DROP SCHEMA IF EXISTS ferry_t_pg_crash CASCADE; CREATE SCHEMA ferry_t_pg_crash;
         CREATE TABLE ferry_t_pg_crash.events (id int8, payload text)",
    );
    let root = tempfile::tempdir().unwrap();
    let input: PathBuf = root.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let job = root.path().join("job.conf");
    std::fs::write(
        &job,
        format!(
            r#"
env {{
  job.name = "pg-crash", job.mode = "STREAMING", checkpoint.interval = 3000
  job.retry.times = 20, job.retry.interval.seconds = 1
}}
source {{ LocalFile {{ path = "{}", file_format_type = csv, schema = {{ fields {{ id = bigint, payload = string }} }} }} }}
sink {{
  Jdbc {{
    url = "jdbc:postgresql://127.0.0.1:5432/test"
    driver = "org.postgresql.Driver"
    user = "postgres"
    query = "insert into ferry_t_pg_crash.events (id, payload) values (?, ?)"
    batch_size = 40
    max_retries = 5
  }}
}}
"#,
            input.display()
        ),
    )
    .unwrap();
    // Files arrive throughout, one every 40 ms.
    let files = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (files, stop, input) = (files.clone(), stop.clone(), input.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let n = files.load(Ordering::SeqCst);
                let mut text = String::new();
                for i in 0..ROWS_PER_FILE {
                    text.push_str(&format!("{},row-{n}-{i}\n", n * ROWS_PER_FILE + i));
                }
                let tmp = input.join(format!(".part-{n:05}.csv"));
                std::fs::write(&tmp, text).unwrap();
                std::fs::rename(&tmp, input.join(format!("part-{n:05}.csv"))).unwrap();
                files.store(n + 1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(40));
            }
        })
    };
    let ckpt = root.path().join("ckpt");
    // The log goes to a file: with its retries it may outgrow a pipe nobody reads.
    let log_path = root.path().join("job.log");
    let mut child = common::ferry()
        .arg("run")
        .arg(&job)
        .args(["--job-id", "pgcrash", "--checkpoint-dir"])
        .arg(&ckpt)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .expect("ferry starts");
    let count = || -> u64 {
        if !server_accepts() {
            return 0;
        }
        psql("SELECT count(DISTINCT id) FROM ferry_t_pg_crash.events")
            .trim()
            .parse()
            .unwrap_or(0)
    };
    // Two crashes, each well after a checkpoint, while rows stream in.
    for crash in 0..2 {
        let before = count();
        assert!(
            common::eventually(Duration::from_secs(60), || count() > before + 2000),
            "crash {crash}: rows stopped arriving: {}",
            count()
        );
        std::thread::sleep(Duration::from_millis(1200));
        pg_ctlcluster(&["stop", "-m", "immediate"]);
        std::thread::sleep(Duration::from_millis(1500));
        pg_ctlcluster(&["start"]);
        assert!(
            common::eventually(Duration::from_secs(60), server_accepts),
            "PostgreSQL did not come back"
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::SeqCst);
    feeder.join().unwrap();
    let expected = files.load(Ordering::SeqCst) * ROWS_PER_FILE;
    let arrived = common::eventually(Duration::from_secs(120), || count() >= expected);
    common::wait_running("pgcrash", &ckpt, "local", Duration::from_secs(60));
    common::request_savepoint("pgcrash", &ckpt);
    let status = common::wait_for(&mut child, Duration::from_secs(60), "the job");
    let err = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(status.success(), "{err}");
    let missing = psql(&format!(
        "SELECT g FROM generate_series(0, {}) g WHERE NOT EXISTS
           (SELECT 1 FROM ferry_t_pg_crash.events e WHERE e.id = g) LIMIT 10",
        expected - 1
    ));
    assert!(
        arrived && missing.trim().is_empty(),
        "{} of {expected} ids arrived; missing ids include {missing}\n{err}",
        count()
    );
    psql("DROP SCHEMA IF EXISTS ferry_t_pg_crash CASCADE");
}
