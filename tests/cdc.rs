//! Postgres-CDC through the `ferry` binary against the local PostgreSQL (`wal_level =
//! logical`, set by scripts/setup-databases):
//!
//! - SeaTunnel's own job files from its `connector-cdc-postgres-e2e` tests (`tests/cdc/`,
//!   host names rewritten) with its DDL (`tests/cdc/inventory.sql`, without the PostGIS
//!   extension the tables do not use), checked as its `PostgresCDCIT` checks them: the sink
//!   table holds what the source table holds after the snapshot, and again after inserts,
//!   an update and a delete.
//! - The chaos test (tests/common/chaos.rs): a keyed table of 200 000 rows, every 100th
//!   with a value of 10–32 KB stored out of line (TOAST), under a continuous workload of
//!   multi-statement transactions while the job (Postgres-CDC → Jdbc upserts) is killed
//!   with SIGKILL 20 times, in the snapshot and in the stream; afterwards the target equals
//!   the source row for row (large values unchanged by updates that leave them alone
//!   included) and only the job's slot exists, confirmed close to the server's position.
//!
//! The job files name one database and the default slot, so the cases run one at a time.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::chaos::{self, BIG_EVERY, SECRET};
use common::{psql, repo_root, Engine};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn case(name: &str) -> PathBuf {
    repo_root().join("tests/cdc").join(name)
}

/// Drops `slot` and the publication the source makes for it in `db`.
fn drop_slot(db: &str, slot: &str) {
    psql(
        "test",
        &format!("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'"),
    );
    psql(
        db,
        &format!("DROP PUBLICATION IF EXISTS {slot}_publication"),
    );
}

/// SeaTunnel's database `postgres_cdc` with its `inventory` schema, as its test starts.
fn inventory() {
    let exists = psql(
        "test",
        "SELECT 1 FROM pg_database WHERE datname = 'postgres_cdc'",
    );
    if exists.trim().is_empty() {
        psql("test", "CREATE DATABASE postgres_cdc");
    }
    drop_slot("postgres_cdc", "seatunnel");
    let out = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "postgres_cdc",
            "-XAtq",
        ])
        .args(["-v", "ON_ERROR_STOP=1", "-f"])
        .arg(case("inventory.sql"))
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether `a` and `b` hold the same rows by SQL equality (an unconstrained `numeric` of
/// the source is written with SeaTunnel's decimal(38, 18): `500` arrives as `500.000…`,
/// equal as a number; see docs/connectors/Postgres-CDC.md).
fn equal_tables(db: &str, a: &str, b: &str) -> bool {
    psql(
        db,
        &format!(
            "SELECT count(*) FROM ((TABLE {a} EXCEPT ALL TABLE {b}) UNION ALL (TABLE {b} EXCEPT ALL TABLE {a})) d"
        ),
    )
    .trim()
        == "0"
}

fn table_text(db: &str, table: &str) -> String {
    psql(db, &format!("SELECT * FROM {table} ORDER BY id"))
}

/// `PostgresCDCIT.upsertDeleteSourceTable`.
fn upsert_delete(table: &str) {
    let row = "'2', 32767, 65535, 2147483647, 5.5, 6.6, 123.12345, 404.4443, true, 'Hello World', 'a', 'abc', 'abcd..xyz', \
               '2020-07-17 18:00:22.123', '2020-07-17 18:00:22.123456', '2020-07-17', '18:00:22', 500,'192.168.1.1'";
    psql(
        "postgres_cdc",
        &format!(
            "INSERT INTO {table} VALUES (2, {row}); INSERT INTO {table} VALUES (3, {row});
             DELETE FROM {table} where id = 2; UPDATE {table} SET f_big = 10000 where id = 3;"
        ),
    );
}

/// Runs SeaTunnel's job file `job` until each (source, sink) pair holds the same rows,
/// then changes the sources and waits for the sinks to follow; stops with a savepoint.
fn seatunnel_case(job: &str, pairs: &[(&str, &str)]) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    inventory();
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    let mut child = common::start_job(&case(job), "cdc", &ckpt, &[]);
    let same = || {
        pairs
            .iter()
            .all(|(s, t)| equal_tables("postgres_cdc", s, t))
    };
    let snapshot = common::eventually(Duration::from_secs(90), same);
    if snapshot {
        for (s, _) in pairs {
            upsert_delete(s);
        }
    }
    let changes = snapshot && common::eventually(Duration::from_secs(90), same);
    common::request_savepoint("cdc", &ckpt);
    let status = common::wait_for(&mut child, Duration::from_secs(60), job);
    let err = common::stderr_of(child);
    for (s, t) in pairs {
        assert!(
            snapshot && changes,
            "{job}: {t} differs from {s} ({}):\n{}\nvs\n{}\n{err}",
            if snapshot {
                "after the changes"
            } else {
                "after the snapshot"
            },
            table_text("postgres_cdc", s),
            table_text("postgres_cdc", t)
        );
    }
    assert!(status.success(), "{job}: {err}");
    assert!(
        !err.contains("postgres\"") && !err.contains("password"),
        "the password shows: {err}"
    );
    drop_slot("postgres_cdc", "seatunnel");
}

#[test]
fn seatunnels_postgres_cdc_job_copies_a_table_and_its_changes() {
    seatunnel_case(
        "postgrescdc_to_postgres.conf",
        &[(
            "inventory.postgres_cdc_table_1",
            "inventory.sink_postgres_cdc_table_1",
        )],
    );
}

#[test]
fn seatunnels_custom_primary_key_job_copies_a_table_without_one() {
    seatunnel_case(
        "postgrescdc_to_postgres_with_custom_primary_key.conf",
        &[(
            "inventory.full_types_no_primary_key",
            "inventory.sink_postgres_cdc_table_1",
        )],
    );
}

#[test]
fn seatunnels_no_primary_key_job_converges_at_least_once() {
    seatunnel_case(
        "postgrescdc_to_postgres_with_no_primary_key.conf",
        &[(
            "inventory.full_types_no_primary_key",
            "inventory.sink_postgres_cdc_table_1",
        )],
    );
}

#[test]
fn seatunnels_multi_table_job_copies_each_table_into_its_own() {
    seatunnel_case(
        "pgcdc_to_pg_with_multi_table_mode_two_table.conf",
        &[
            (
                "inventory.postgres_cdc_table_1",
                "inventory.sink_postgres_cdc_table_1",
            ),
            (
                "inventory.postgres_cdc_table_2",
                "inventory.sink_postgres_cdc_table_2",
            ),
        ],
    );
}

/// The chaos test's tables: schema `ferry_cdc_chaos` of database `test`, captured through
/// slot `ferry_chaos`.
struct ChaosPostgres;

const CHAOS_CHECKPOINT_MS: u64 = 500;

impl chaos::Dialect for ChaosPostgres {
    fn sql(&self, sql: &str) -> String {
        psql("test", sql)
    }

    fn create_tables(&self, rows: u64) {
        drop_slot("test", "ferry_chaos");
        // `big` is stored out of line and uncompressed (`EXTERNAL`), so that an update
        // which leaves it alone sends it as "unchanged TOAST", without its value: the
        // source takes it from the old row, which `REPLICA IDENTITY FULL` makes the server
        // send (without, the job stops naming that setting: see docs/connectors/Postgres-CDC.md).
        psql(
            "test",
            &format!(
                "DROP SCHEMA IF EXISTS ferry_cdc_chaos CASCADE; CREATE SCHEMA ferry_cdc_chaos;
                 CREATE TABLE ferry_cdc_chaos.src (id int8 PRIMARY KEY, v int4 NOT NULL, note text, big text);
                 ALTER TABLE ferry_cdc_chaos.src ALTER COLUMN big SET STORAGE EXTERNAL, REPLICA IDENTITY FULL;
                 CREATE TABLE ferry_cdc_chaos.dst (id int8 PRIMARY KEY, v int4 NOT NULL, note text, big text);
                 INSERT INTO ferry_cdc_chaos.src
                   SELECT g, 0, 'row ' || g, CASE WHEN g % {BIG_EVERY} = 0 THEN repeat(md5(g::text), 300 + g % 700) END
                   FROM generate_series(1, {rows}) g;
                 ANALYZE ferry_cdc_chaos.src;"
            ),
        );
        let toast: u64 = psql(
            "test",
            "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = 'ferry_cdc_chaos.src'::regclass",
        )
        .trim()
        .parse()
        .unwrap();
        assert!(
            toast >= rows / BIG_EVERY * 9_600,
            "the large values are not out of line: {toast} bytes of TOAST"
        );
    }

    fn transaction(&self, t: &chaos::Transaction) -> String {
        let s = "ferry_cdc_chaos.src";
        let from = t.insert_from;
        format!(
            "BEGIN;
             UPDATE {s} SET v = v + 1, note = note || '.' WHERE id BETWEEN {u} AND {u} + 1999 AND id % 19 = {};
             INSERT INTO {s} (id, v, note, big)
               SELECT {from} + g, 0, repeat(md5(g::text), {}), CASE WHEN g = 0 THEN repeat(md5(({from} + g)::text), {}) END
               FROM generate_series(0, 9) g;
             UPDATE {s} SET big = repeat(md5((id + {})::text), {}) WHERE id = {};
             DELETE FROM {s} WHERE id BETWEEN {d} AND {d} + 199 AND id % 7 = {};
             COMMIT;",
            t.update.1,
            t.note_md5s,
            t.big_md5s,
            t.round,
            t.big_md5s,
            t.big_id,
            t.delete.1,
            u = t.update.0,
            d = t.delete.0
        )
    }

    fn rows_query(&self, t: &str) -> String {
        format!("SELECT id, v, md5(note), md5(big) FROM ferry_cdc_chaos.{t} ORDER BY id")
    }

    fn job(&self) -> String {
        format!(
            r#"
env {{ job.name = "cdc-chaos", job.mode = "STREAMING", checkpoint.interval = {CHAOS_CHECKPOINT_MS} }}
source {{
  Postgres-CDC {{
    base-url = "jdbc:postgresql://127.0.0.1:5432/test"
    username = "postgres"
    password = "{SECRET}"
    table-names = ["test.ferry_cdc_chaos.src"]
    slot.name = "ferry_chaos"
    snapshot.split.size = 2000
    exactly_once = true
    # Two snapshot readers: windows of two chunks read at once.
    parallelism = 2
  }}
}}
sink {{
  Jdbc {{
    url = "jdbc:postgresql://127.0.0.1:5432/test"
    driver = "org.postgresql.Driver"
    user = "postgres"
    password = "{SECRET}"
    generate_sink_sql = true
    database = test
    table = ferry_cdc_chaos.dst
    primary_keys = ["id"]
  }}
}}
"#
        )
    }

    fn check_server(&self, position: &serde_json::Value) {
        // Only the job's own slot: no temporary one, none leaked beside it (other tests'
        // slots, of other names, are theirs).
        let slots = psql(
            "test",
            "SELECT slot_name FROM pg_replication_slots WHERE temporary OR slot_name LIKE 'ferry_chaos%' ORDER BY 1",
        );
        assert_eq!(slots.trim(), "ferry_chaos", "slots: {slots}");
        // It follows the server: no WAL held back for good.
        let behind: i64 = psql(
            "test",
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::int8 FROM pg_replication_slots WHERE slot_name = 'ferry_chaos'",
        )
        .trim()
        .parse()
        .unwrap();
        assert!(
            behind < 64 << 20,
            "the slot is {behind} bytes behind the server"
        );
        // … and never ahead of the checkpoint a restart resumes from: the slot is
        // confirmed only once the checkpoint covering the position is committed.
        let confirmed: u64 = psql(
            "test",
            "SELECT (confirmed_flush_lsn - '0/0')::int8 FROM pg_replication_slots WHERE slot_name = 'ferry_chaos'",
        )
        .trim()
        .parse()
        .unwrap();
        let saved = position["lsn"].as_u64();
        assert!(
            saved.is_some_and(|lsn| confirmed <= lsn),
            "the slot is confirmed at {confirmed}, past the savepoint's position {position}"
        );
    }

    fn clean_up(&self) {
        drop_slot("test", "ferry_chaos");
        psql("test", "DROP SCHEMA IF EXISTS ferry_cdc_chaos CASCADE");
    }
}

#[test]
fn a_keyed_table_under_load_survives_repeated_kills_row_for_row() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    chaos::survives_repeated_kills(
        ChaosPostgres,
        &chaos::Chaos {
            rows: 200_000,
            kills: 20,
            snapshot_kills: 7,
            checkpoint_ms: CHAOS_CHECKPOINT_MS,
            workload_seed: 0xcdc0_c4a5,
            kill_seed: 0x5eed_cdc1,
        },
    );
}

#[test]
fn check_states_the_guarantee_and_the_engines_and_never_shows_the_password() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    inventory();
    let out = common::ferry()
        .arg("check")
        .arg(case("postgrescdc_to_postgres.conf"))
        .output()
        .expect("ferry check runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Postgres-CDC") && text.contains("[replayable]"),
        "{text}"
    );
    assert!(text.contains("delivery: exactly-once"), "{text}");
    assert!(text.contains("engines: local, spark"), "{text}");
    assert!(!text.contains("password = "), "{text}");
}

/// The job file of the restore test: `tables` captured into `dst_<table>`.
fn grown_job(tables: &[&str]) -> String {
    let names: Vec<String> = tables
        .iter()
        .map(|t| format!("\"test.ferry_cdc_grow.{t}\""))
        .collect();
    format!(
        r#"
env {{ job.name = "cdc-grow", job.mode = "STREAMING", checkpoint.interval = 500 }}
source {{
  Postgres-CDC {{
    base-url = "jdbc:postgresql://127.0.0.1:5432/test"
    username = "postgres"
    table-names = [{}]
    slot.name = "ferry_grow"
  }}
}}
sink {{
  Jdbc {{
    url = "jdbc:postgresql://127.0.0.1:5432/test"
    driver = "org.postgresql.Driver"
    user = "postgres"
    generate_sink_sql = true
    database = test
    schema = "ferry_cdc_grow"
    tablePrefix = "dst_"
    primary_keys = ["id"]
  }}
}}
"#,
        names.join(", ")
    )
}

#[test]
fn a_savepoint_restored_with_an_added_table_reads_that_table_from_its_snapshot() {
    restore_with_an_added_table(Engine::Local);
}

/// The same on Spark: the restored query reads the added table from its snapshot in its
/// micro-batches and goes on with the first from its offset log.
#[test]
fn a_savepoint_restored_with_an_added_table_reads_that_table_from_its_snapshot_on_spark() {
    restore_with_an_added_table(Engine::Spark);
}

fn restore_with_an_added_table(engine: Engine) {
    engine.check_installed();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    drop_slot("test", "ferry_grow");
    psql(
        "test",
        "DROP SCHEMA IF EXISTS ferry_cdc_grow CASCADE; CREATE SCHEMA ferry_cdc_grow;
         CREATE TABLE ferry_cdc_grow.a (id int4 PRIMARY KEY, v text);
         CREATE TABLE ferry_cdc_grow.b (id int4 PRIMARY KEY, v text);
         INSERT INTO ferry_cdc_grow.a SELECT g, 'a' || g FROM generate_series(1, 500) g;
         INSERT INTO ferry_cdc_grow.b SELECT g, 'b' || g FROM generate_series(1, 700) g;",
    );
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    let job = dir.path().join("job.conf");
    let same = |t: &str| {
        common::eventually(engine.patience(), || {
            psql(
                "test",
                &format!("SELECT to_regclass('ferry_cdc_grow.dst_{t}') IS NOT NULL"),
            )
            .trim()
                == "t"
                && equal_tables(
                    "test",
                    &format!("ferry_cdc_grow.{t}"),
                    &format!("ferry_cdc_grow.dst_{t}"),
                )
        })
    };
    // First run: table a only, stopped with a savepoint.
    std::fs::write(&job, grown_job(&["a"])).unwrap();
    let mut child = common::start_job(&job, "grow", &ckpt, engine.args());
    let first = same("a");
    common::request_savepoint("grow", &ckpt);
    let status = common::wait_for(&mut child, engine.patience(), "the first run");
    let err = common::stderr_of(child);
    let batches = common::spark_last_commit(&ckpt, "grow");
    assert!(first && status.success(), "{err}");
    psql("test", "INSERT INTO ferry_cdc_grow.a VALUES (501, 'while stopped'); UPDATE ferry_cdc_grow.b SET v = 'changed' WHERE id = 1");
    // Restored with table b added: b is read from its snapshot, a goes on from the savepoint.
    std::fs::write(&job, grown_job(&["a", "b"])).unwrap();
    let mut child = common::start_job(&job, "grow", &ckpt, engine.args());
    psql("test", "INSERT INTO ferry_cdc_grow.b VALUES (701, 'new'); DELETE FROM ferry_cdc_grow.a WHERE id = 2");
    let both = same("a") && same("b");
    common::request_savepoint("grow", &ckpt);
    let status = common::wait_for(&mut child, engine.patience(), "the restored run");
    let err = common::stderr_of(child);
    assert!(both, "the targets differ after the restore: {err}");
    assert!(status.success(), "{err}");
    assert!(
        engine.resumed(&err, &ckpt, "grow", batches),
        "the second run did not resume: {err}"
    );
    drop_slot("test", "ferry_grow");
}

/// SeaTunnel's `PostgresCDCIT.testAddFiledWithRestore` with its job file: the job copies
/// `postgres_cdc_table_3`, stops with a savepoint, both tables gain `f_big`, the source a
/// row, and the restored job writes that row with its new column. Beyond SeaTunnel's steps,
/// changes written while the job was stopped and before the columns were added (an insert
/// and an update) come back from the log without them: the target writes NULL for
/// `f_big`, and for a column added with a default (`f_flag NOT NULL DEFAULT 7`) keeps its
/// own, as the source holds it, instead of writing NULL into it.
#[test]
fn seatunnels_restore_with_an_added_column_writes_that_column() {
    restore_with_an_added_column(Engine::Local);
}

/// The same on Spark: the first run's query resumes from its offset log with the table
/// wider than when it stopped.
#[test]
fn seatunnels_restore_with_an_added_column_writes_that_column_on_spark() {
    restore_with_an_added_column(Engine::Spark);
}

fn restore_with_an_added_column(engine: Engine) {
    engine.check_installed();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    inventory();
    let slot = "ferry_add_field";
    drop_slot("postgres_cdc", slot);
    let job = case("postgrescdc_to_postgres_test_add_Filed.conf");
    let vars = format!("slot_name={slot}");
    let mut args = vec!["-i", vars.as_str()];
    args.extend(engine.args());
    let (source, target) = (
        "inventory.postgres_cdc_table_3",
        "inventory.sink_postgres_cdc_table_3",
    );
    let same = || {
        common::eventually(engine.patience(), || {
            equal_tables("postgres_cdc", source, target)
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    let mut child = common::start_job(&job, "add-field", &ckpt, &args);
    let first = same();
    common::request_savepoint("add-field", &ckpt);
    let status = common::wait_for(&mut child, engine.patience(), "the first run");
    let err = common::stderr_of(child);
    let batches = common::spark_last_commit(&ckpt, "add-field");
    assert!(
        first && status.success(),
        "the first run: {}\nvs\n{}\n{err}",
        table_text("postgres_cdc", source),
        table_text("postgres_cdc", target)
    );
    psql(
        "postgres_cdc",
        &format!(
            "INSERT INTO {source} VALUES (10, 'x', 1, 2); UPDATE {source} SET f_int = 5 WHERE id = 1;
             ALTER TABLE {source} ADD COLUMN f_big BIGINT; ALTER TABLE {target} ADD COLUMN f_big BIGINT;
             ALTER TABLE {source} ADD COLUMN f_flag int NOT NULL DEFAULT 7;
             ALTER TABLE {target} ADD COLUMN f_flag int NOT NULL DEFAULT 7;
             INSERT INTO {source} VALUES (2, '2', 32767, 65535, 2147483647);"
        ),
    );
    let mut child = common::start_job(&job, "add-field", &ckpt, &args);
    psql(
        "postgres_cdc",
        &format!("UPDATE {source} SET f_big = 10000, f_flag = 8 WHERE id = 10"),
    );
    let restored = same();
    common::request_savepoint("add-field", &ckpt);
    let status = common::wait_for(&mut child, engine.patience(), "the restored run");
    let err = common::stderr_of(child);
    assert!(
        restored,
        "the target differs after the restore: {}\nvs\n{}\n{err}",
        table_text("postgres_cdc", source),
        table_text("postgres_cdc", target)
    );
    assert!(status.success(), "{err}");
    assert!(
        engine.resumed(&err, &ckpt, "add-field", batches),
        "the second run did not resume: {err}"
    );
    assert_eq!(
        psql(
            "postgres_cdc",
            &format!("SELECT id, f_big, f_flag FROM {target} ORDER BY id")
        )
        .trim(),
        "1||7\n2|2147483647|7\n10|10000|8"
    );
    drop_slot("postgres_cdc", slot);
}

/// The job file of the TOAST tests: table `ferry_cdc_toast.src` captured through slot
/// `slot` into `sink`.
fn toast_job(slot: &str, sink: &str) -> String {
    format!(
        r#"
env {{ job.name = "cdc-toast", job.mode = "STREAMING", checkpoint.interval = 500 }}
source {{
  Postgres-CDC {{
    base-url = "jdbc:postgresql://127.0.0.1:5432/test"
    username = "postgres"
    table-names = ["test.ferry_cdc_toast.src"]
    slot.name = "{slot}"
  }}
}}
sink {{
{sink}
}}
"#
    )
}

/// The keyed Jdbc target of the TOAST table: `ferry_cdc_toast.dst_src`.
const TOAST_TARGET: &str = r#"  Jdbc {
    url = "jdbc:postgresql://127.0.0.1:5432/test"
    driver = "org.postgresql.Driver"
    user = "postgres"
    generate_sink_sql = true
    database = test
    schema = "ferry_cdc_toast"
    tablePrefix = "dst_"
    primary_keys = ["id"]
  }"#;

/// A table with the default replica identity (the old row is not sent) and a column
/// whose values are stored out of line, so that an update leaving it alone sends it as
/// "unchanged TOAST", without its value.
fn toast_table() {
    psql(
        "test",
        "DROP SCHEMA IF EXISTS ferry_cdc_toast CASCADE; CREATE SCHEMA ferry_cdc_toast;
         CREATE TABLE ferry_cdc_toast.src (id int4 PRIMARY KEY, v int4 NOT NULL, big text);
         ALTER TABLE ferry_cdc_toast.src ALTER COLUMN big SET STORAGE EXTERNAL;
         INSERT INTO ferry_cdc_toast.src
           SELECT g, 0, repeat(md5(g::text), 400) FROM generate_series(1, 20) g;",
    );
    let toast: u64 = psql(
        "test",
        "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = 'ferry_cdc_toast.src'::regclass",
    )
    .trim()
    .parse()
    .unwrap();
    assert!(toast > 0, "the large values are not out of line");
}

/// Updates that leave the TOASTed column alone (and one that changes it, and a delete).
fn toast_updates() {
    psql(
        "test",
        "UPDATE ferry_cdc_toast.src SET v = v + 1 WHERE id <= 10;
         BEGIN; UPDATE ferry_cdc_toast.src SET v = 7, big = 'short now' WHERE id = 11;
         UPDATE ferry_cdc_toast.src SET v = v + 2 WHERE id = 12; COMMIT;
         DELETE FROM ferry_cdc_toast.src WHERE id = 13;",
    );
}

#[test]
fn an_update_without_its_unchanged_toasted_value_keeps_the_targets_value() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    drop_slot("test", "ferry_toast");
    toast_table();
    let dir = tempfile::tempdir().unwrap();
    let (ckpt, job) = (dir.path().join("ckpt"), dir.path().join("job.conf"));
    let sink = TOAST_TARGET;
    std::fs::write(&job, toast_job("ferry_toast", sink)).unwrap();
    let mut child = common::start_job(&job, "toast", &ckpt, &[]);
    let same = || {
        common::eventually(Duration::from_secs(60), || {
            psql(
                "test",
                "SELECT to_regclass('ferry_cdc_toast.dst_src') IS NOT NULL",
            )
            .trim()
                == "t"
                && equal_tables("test", "ferry_cdc_toast.src", "ferry_cdc_toast.dst_src")
        })
    };
    let snapshot = same();
    // While it runs, `ferry jobs` shows its figures under its line: the phase, rows read.
    let mut jobs = String::new();
    let figures = common::eventually(Duration::from_secs(20), || {
        let out = common::ferry()
            .args(["jobs", "--checkpoint-dir"])
            .arg(&ckpt)
            .output()
            .expect("ferry jobs runs");
        jobs = String::from_utf8_lossy(&out.stdout).to_string();
        let mut lines = jobs.lines().skip_while(|l| !l.starts_with("toast "));
        lines.next().is_some_and(|l| l.contains("RUNNING"))
            && lines.next().is_some_and(|l| {
                l.contains("read 20 (") && l.contains("phase streaming") && l.contains("lag_bytes")
            })
    });
    assert!(figures, "no figures under the job's line:\n{jobs}");
    toast_updates();
    // The updates arrived (v moved) and kept the large values (NULL would differ).
    let changes = snapshot && same();
    common::request_savepoint("toast", &ckpt);
    let status = common::wait_for(&mut child, Duration::from_secs(60), "the TOAST job");
    let err = common::stderr_of(child);
    assert!(
        snapshot && changes,
        "the target differs ({}):\n{}\n{err}",
        if snapshot {
            "after the updates"
        } else {
            "after the snapshot"
        },
        psql(
            "test",
            "SELECT id, v, length(big) FROM ferry_cdc_toast.dst_src ORDER BY id"
        )
    );
    assert!(status.success(), "{err}");
    drop_slot("test", "ferry_toast");
}

#[test]
fn an_update_without_its_unchanged_toasted_value_stops_a_sink_that_would_write_null() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    drop_slot("test", "ferry_toast_file");
    toast_table();
    let dir = tempfile::tempdir().unwrap();
    let (ckpt, job, out) = (
        dir.path().join("ckpt"),
        dir.path().join("job.conf"),
        dir.path().join("out"),
    );
    let sink = format!(
        "  LocalFile {{\n    path = \"{}\"\n    file_format_type = \"json\"\n  }}",
        out.display()
    );
    std::fs::write(&job, toast_job("ferry_toast_file", &sink)).unwrap();
    let mut child = common::start_job(&job, "toastfile", &ckpt, &[]);
    // The snapshot's rows are whole: they go through.
    let snapshot = common::eventually(Duration::from_secs(60), || {
        std::fs::read_dir(&out)
            .map(|d| {
                d.flatten()
                    .filter_map(|f| std::fs::read_to_string(f.path()).ok())
                    .map(|t| t.lines().count())
                    .sum::<usize>()
                    >= 20
            })
            .unwrap_or(false)
    });
    toast_updates();
    let status = common::wait_for(&mut child, Duration::from_secs(60), "the TOAST job");
    let err = common::stderr_of(child);
    assert!(snapshot, "the snapshot never reached the files: {err}");
    assert!(
        !status.success(),
        "the job wrote NULL for unchanged values: {err}"
    );
    for part in ["LocalFile", "big", "REPLICA IDENTITY FULL"] {
        assert!(err.contains(part), "the error does not name {part}: {err}");
    }
    drop_slot("test", "ferry_toast_file");
}

/// `stop.mode = latest` through the binary: the job copies the table and the changes made
/// before it started, then ends by itself (exit 0, no savepoint asked); `ferry check` and
/// `--engine spark` say why Spark cannot run it.
#[test]
fn a_stop_mode_latest_job_ends_by_itself_on_the_embedded_engine() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    drop_slot("test", "ferry_stop_latest");
    toast_table();
    toast_updates();
    let dir = tempfile::tempdir().unwrap();
    let (ckpt, job) = (dir.path().join("ckpt"), dir.path().join("job.conf"));
    let sink = TOAST_TARGET;
    let text = toast_job("ferry_stop_latest", sink).replace(
        "slot.name = \"ferry_stop_latest\"",
        "slot.name = \"ferry_stop_latest\"\n    stop.mode = \"latest\"",
    );
    std::fs::write(&job, text).unwrap();
    let check = common::ferry().arg("check").arg(&job).output().unwrap();
    let said = String::from_utf8_lossy(&check.stdout).to_string();
    assert!(
        said.contains("engines: local (not spark: source Postgres-CDC: stop.mode = latest"),
        "{said}"
    );
    let mut child = common::start_job(&job, "stoplatest", &ckpt, &[]);
    let status = common::wait_for(&mut child, Duration::from_secs(90), "the stop.mode job");
    let err = common::stderr_of(child);
    assert!(status.success(), "{err}");
    assert!(
        equal_tables("test", "ferry_cdc_toast.src", "ferry_cdc_toast.dst_src"),
        "the target differs:\n{err}"
    );
    let spark = common::ferry()
        .arg("run")
        .arg(&job)
        .args(["--engine", "spark"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&spark.stderr).to_string();
    assert!(
        !spark.status.success() && said.contains("stop.mode = latest"),
        "{said}"
    );
    drop_slot("test", "ferry_stop_latest");
}
