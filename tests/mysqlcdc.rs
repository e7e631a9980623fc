//! MySQL-CDC through the `ferry` binary against the local MariaDB (ROW binlog, set by
//! scripts/setup-databases):
//!
//! - SeaTunnel's own job files from its `connector-cdc-mysql-e2e` tests (`tests/mysqlcdc/`,
//!   host names and credentials rewritten) with its DDL (`tests/mysqlcdc/mysql_cdc.sql`,
//!   MySQL 8's `utf8mb4_0900_ai_ci` collation written as `utf8mb4_general_ci`, which
//!   MariaDB has), checked as its `MysqlCDCIT` checks them: the sink table holds what the
//!   source table holds after the snapshot, and again after inserts, an update and a
//!   delete (or a delete of every row); and its restore case, a savepoint taken with one
//!   table and restored with two.
//! - The chaos test (tests/common/chaos.rs): a keyed table of 200 000 rows, every 100th
//!   with a value of 10–32 KB, under a continuous workload of multi-statement transactions
//!   while the job (MySQL-CDC → Jdbc upserts) is killed with SIGKILL 20 times, in the
//!   snapshot and in the binlog phase; afterwards the target equals the source row for row,
//!   no binlog dump of the job's replica id is left and its position is close to the
//!   server's end.
//! - The same on Spark (`--engine spark`, into PostgreSQL): the driver's whole process
//!   group killed in the snapshot and in the binlog phase, then the target equals the source.
//!
//! SeaTunnel's job files name its databases `mysql_cdc`/`mysql_cdc2` and one replica id,
//! so its cases run one at a time.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::chaos::{self, BIG_EVERY};
use common::{repo_root, Engine, Rng};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn case(name: &str) -> PathBuf {
    repo_root().join("tests/mysqlcdc").join(name)
}

/// Runs `sql` with the `mariadb` client (stopping at the first error, which fails the
/// test) and returns its tab-separated rows.
fn mariadb(sql: &str) -> String {
    let out = Command::new("mariadb")
        .args(["-h", "127.0.0.1", "-u", "root", "-N", "-B", "-e", sql])
        .output()
        .expect("the mariadb client runs");
    assert!(
        out.status.success(),
        "mariadb: {}\n{sql}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// SeaTunnel's databases `mysql_cdc` and `mysql_cdc2`, as its test starts.
fn inventory() {
    mariadb("DROP DATABASE IF EXISTS mysql_cdc; DROP DATABASE IF EXISTS mysql_cdc2");
    let sql = std::fs::read(case("mysql_cdc.sql")).unwrap();
    let mut child = Command::new("mariadb")
        .args(["-h", "127.0.0.1", "-u", "root"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("the mariadb client runs");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&sql).unwrap();
    assert!(child.wait().unwrap().success(), "loading mysql_cdc.sql");
}

/// `MysqlCDCIT`'s source query, for both tables (its sink query's `cast(f_year as year)`
/// is MySQL's; MariaDB has no such cast, and both columns are `year` already).
fn rows(db: &str, table: &str) -> String {
    mariadb(&format!(
        "select id, cast(f_binary as char) as f_binary, cast(f_blob as char) as f_blob, cast(f_long_varbinary as char) as f_long_varbinary,
          cast(f_longblob as char) as f_longblob, cast(f_tinyblob as char) as f_tinyblob, cast(f_varbinary as char) as f_varbinary,
          f_smallint, f_smallint_unsigned, f_mediumint, f_mediumint_unsigned, f_int, f_int_unsigned, f_integer, f_integer_unsigned,
          f_bigint, f_bigint_unsigned, f_numeric, f_decimal, f_float, f_double, f_double_precision, f_longtext, f_mediumtext,
          f_text, f_tinytext, f_varchar, f_date, f_datetime, f_timestamp, f_bit1, cast(f_bit64 as char) as f_bit64, f_char,
          f_enum, cast(f_mediumblob as char) as f_mediumblob, f_long_varchar, f_real, f_time, f_tinyint, f_tinyint_unsigned,
          f_json, f_year from {db}.{table} order by id"
    ))
}

/// `MysqlCDCIT.upsertDeleteSourceTable`.
fn upsert_delete(table: &str) {
    let row = |id: u32, year: u32| {
        format!(
            "INSERT INTO {table} ( id, f_binary, f_blob, f_long_varbinary, f_longblob, f_tinyblob, f_varbinary, f_smallint,
              f_smallint_unsigned, f_mediumint, f_mediumint_unsigned, f_int, f_int_unsigned, f_integer,
              f_integer_unsigned, f_bigint, f_bigint_unsigned, f_numeric, f_decimal, f_float, f_double,
              f_double_precision, f_longtext, f_mediumtext, f_text, f_tinytext, f_varchar, f_date, f_datetime,
              f_timestamp, f_bit1, f_bit64, f_char, f_enum, f_mediumblob, f_long_varchar, f_real, f_time,
              f_tinyint, f_tinyint_unsigned, f_json, f_year )
            VALUES ( {id}, 0x61626374000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000,
              0x68656C6C6F, 0x18000000789C0BC9C82C5600A244859CFCBC7485B2C4A2A4CCBCC4A24A00697308D4, NULL,
              0x74696E79626C6F62, 0x48656C6C6F20776F726C64, 12345, 54321, 123456, 654321, 1234567, 7654321, 1234567, 7654321,
              123456789, 987654321, 123, 789, 12.34, 56.78, 90.12, 'This is a long text field', 'This is a medium text field',
              'This is a text field', 'This is a tiny text field', 'This is a varchar field', '2022-04-27', '2022-04-27 14:30:00',
              '2023-04-27 11:08:40', 1, b'0101010101010101010101010101010101010101010101010101010101010101', 'C', 'enum2',
              0x1B000000789C0BC9C82C5600A24485DCD494CCD25C85A49CFC2485B4CCD49C140083FF099A, 'This is a long varchar field',
              12.345, '14:30:00', -128, 255, '{{ \"key\": \"value\" }}', {year} );"
        )
    };
    mariadb(&format!(
        "{} {} DELETE FROM {table} where id = 2; UPDATE {table} SET f_bigint = 10000 where id = 3;",
        row(5, 1992),
        row(6, 1999)
    ));
}

/// What the source is changed with once the snapshot arrived.
#[derive(Clone, Copy)]
enum Change {
    /// Inserts, a delete and an update.
    UpsertDelete,
    /// Every row deleted.
    DeleteAll,
}

/// Runs SeaTunnel's job file `job` until each (source, sink) pair (`db.table`) holds the
/// same rows, then changes the sources and waits for the sinks to follow; stops with a
/// savepoint.
fn seatunnel_case(job: &str, pairs: &[(&str, &str)], change: Change) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    inventory();
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    let mut child = common::start_job(&case(job), "mysqlcdc", &ckpt, &[]);
    let same = || pairs.iter().all(|(s, t)| table_rows(s) == table_rows(t));
    let snapshot = common::eventually(Duration::from_secs(90), same);
    if snapshot {
        for (s, _) in pairs {
            match change {
                Change::UpsertDelete => upsert_delete(s),
                Change::DeleteAll => {
                    mariadb(&format!("DELETE FROM {s}"));
                }
            }
        }
    }
    let changes = snapshot && common::eventually(Duration::from_secs(90), same);
    common::request_savepoint("mysqlcdc", &ckpt);
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
            table_rows(s),
            table_rows(t)
        );
    }
    assert!(status.success(), "{job}: {err}");
}

fn table_rows(path: &str) -> String {
    let (db, t) = path.split_once('.').unwrap();
    rows(db, t)
}

#[test]
fn seatunnels_mysql_cdc_job_copies_a_table_and_its_changes() {
    seatunnel_case(
        "mysqlcdc_to_mysql.conf",
        &[(
            "mysql_cdc.mysql_cdc_e2e_source_table",
            "mysql_cdc.mysql_cdc_e2e_sink_table",
        )],
        Change::UpsertDelete,
    );
}

#[test]
fn seatunnels_job_without_exactly_once_follows_a_delete_of_every_row() {
    seatunnel_case(
        "mysqlcdc_to_mysql_with_disable_exactly_once.conf",
        &[(
            "mysql_cdc.mysql_cdc_e2e_source_table",
            "mysql_cdc.mysql_cdc_e2e_sink_table",
        )],
        Change::DeleteAll,
    );
}

#[test]
fn seatunnels_no_primary_key_job_converges_at_least_once() {
    seatunnel_case(
        "mysqlcdc_to_mysql_with_no_primary_key.conf",
        &[(
            "mysql_cdc.mysql_cdc_e2e_source_table_no_primary_key",
            "mysql_cdc.mysql_cdc_e2e_sink_table",
        )],
        Change::DeleteAll,
    );
}

#[test]
fn seatunnels_custom_primary_key_job_copies_two_tables_without_one() {
    seatunnel_case(
        "mysqlcdc_to_mysql_with_custom_primary_key.conf",
        &[
            (
                "mysql_cdc.mysql_cdc_e2e_source_table_1_custom_primary_key",
                "mysql_cdc2.mysql_cdc_e2e_source_table_1_custom_primary_key",
            ),
            (
                "mysql_cdc.mysql_cdc_e2e_source_table_2_custom_primary_key",
                "mysql_cdc2.mysql_cdc_e2e_source_table_2_custom_primary_key",
            ),
        ],
        Change::UpsertDelete,
    );
}

#[test]
fn seatunnels_multi_table_job_copies_each_table_into_its_own() {
    seatunnel_case(
        "mysqlcdc_to_mysql_with_multi_table_mode_two_table.conf",
        &[
            (
                "mysql_cdc.mysql_cdc_e2e_source_table",
                "mysql_cdc2.mysql_cdc_e2e_source_table",
            ),
            (
                "mysql_cdc.mysql_cdc_e2e_source_table2",
                "mysql_cdc2.mysql_cdc_e2e_source_table2",
            ),
        ],
        Change::UpsertDelete,
    );
}

/// `MysqlCDCIT.testMultiTableWithRestore`: one table, a savepoint, then the job restored
/// with a second table, which is read from its snapshot.
#[test]
fn seatunnels_restore_with_an_added_table_reads_that_table_from_its_snapshot() {
    restore_with_an_added_table(Engine::Local);
}

/// The same on Spark: the restored query reads the added table from its snapshot in its
/// micro-batches and goes on with the first from its offset log.
#[test]
fn seatunnels_restore_with_an_added_table_reads_that_table_from_its_snapshot_on_spark() {
    restore_with_an_added_table(Engine::Spark);
}

fn restore_with_an_added_table(engine: Engine) {
    engine.check_installed();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    inventory();
    let (s1, s2) = (
        "mysql_cdc.mysql_cdc_e2e_source_table",
        "mysql_cdc.mysql_cdc_e2e_source_table2",
    );
    let (t1, t2) = (
        "mysql_cdc2.mysql_cdc_e2e_source_table",
        "mysql_cdc2.mysql_cdc_e2e_source_table2",
    );
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    let mut child = common::start_job(
        &case("mysqlcdc_to_mysql_with_multi_table_mode_one_table.conf"),
        "restore",
        &ckpt,
        engine.args(),
    );
    upsert_delete(s1);
    let first = common::eventually(engine.patience(), || table_rows(s1) == table_rows(t1));
    common::request_savepoint("restore", &ckpt);
    let status = common::wait_for(&mut child, engine.patience(), "the first run");
    let err = common::stderr_of(child);
    let batches = common::spark_last_commit(&ckpt, "restore");
    assert!(first && status.success(), "{err}");
    let mut child = common::start_job(
        &case("mysqlcdc_to_mysql_with_multi_table_mode_two_table.conf"),
        "restore",
        &ckpt,
        engine.args(),
    );
    upsert_delete(s2);
    let both = common::eventually(engine.patience(), || {
        table_rows(s1) == table_rows(t1) && table_rows(s2) == table_rows(t2)
    });
    common::request_savepoint("restore", &ckpt);
    let status = common::wait_for(&mut child, engine.patience(), "the restored run");
    let err = common::stderr_of(child);
    assert!(
        both,
        "the targets differ after the restore:\n{}\nvs\n{}\n{err}",
        table_rows(s2),
        table_rows(t2)
    );
    assert!(status.success(), "{err}");
    assert!(
        engine.resumed(&err, &ckpt, "restore", batches),
        "the second run did not resume: {err}"
    );
}

/// SeaTunnel's restore case with columns instead of a table (its MySQL tests restore with an
/// added table only; its Postgres ones add a column): changes written while the job is
/// stopped, before and after two columns are added to source and target (one in the middle,
/// one with a default), reach the target after the restore, placed by the binlog's column
/// names, with the target's default where the rows written before lack the column.
#[test]
fn a_restore_with_added_columns_writes_them_and_the_changes_before() {
    restore_with_added_columns(Engine::Local);
}

/// The same on Spark: the query resumes from its offset log with the tables wider than
/// when it stopped.
#[test]
fn a_restore_with_added_columns_writes_them_and_the_changes_before_on_spark() {
    restore_with_added_columns(Engine::Spark);
}

fn restore_with_added_columns(engine: Engine) {
    engine.check_installed();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    inventory();
    let (s1, t1) = (
        "mysql_cdc.mysql_cdc_e2e_source_table",
        "mysql_cdc2.mysql_cdc_e2e_source_table",
    );
    let added = |table: &str| {
        mariadb(&format!(
            "SELECT id, f_added, f_flag FROM {table} ORDER BY id"
        ))
    };
    let job = case("mysqlcdc_to_mysql_with_multi_table_mode_one_table.conf");
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    let mut child = common::start_job(&job, "add-column", &ckpt, engine.args());
    let first = common::eventually(engine.patience(), || table_rows(s1) == table_rows(t1));
    common::request_savepoint("add-column", &ckpt);
    let status = common::wait_for(&mut child, engine.patience(), "the first run");
    let err = common::stderr_of(child);
    let batches = common::spark_last_commit(&ckpt, "add-column");
    assert!(first && status.success(), "{err}");
    upsert_delete(s1);
    for table in [s1, t1] {
        mariadb(&format!(
            "ALTER TABLE {table} ADD COLUMN f_added bigint AFTER f_binary, \
             ADD COLUMN f_flag int NOT NULL DEFAULT 7"
        ));
    }
    mariadb(&format!("UPDATE {s1} SET f_added = 1 WHERE id = 6"));
    let mut child = common::start_job(&job, "add-column", &ckpt, engine.args());
    mariadb(&format!(
        "UPDATE {s1} SET f_added = 10000, f_flag = 8 WHERE id = 3"
    ));
    let same = common::eventually(engine.patience(), || {
        table_rows(s1) == table_rows(t1) && added(s1) == added(t1)
    });
    common::request_savepoint("add-column", &ckpt);
    let status = common::wait_for(&mut child, engine.patience(), "the restored run");
    let err = common::stderr_of(child);
    assert!(
        same,
        "the target differs after the restore:\n{}\n{}\nvs\n{}\n{}\n{err}",
        table_rows(s1),
        added(s1),
        table_rows(t1),
        added(t1)
    );
    assert!(status.success(), "{err}");
    assert!(
        engine.resumed(&err, &ckpt, "add-column", batches),
        "the second run did not resume: {err}"
    );
    assert!(
        added(t1).contains("3\t10000\t8\n") && added(t1).contains("5\tNULL\t7\n"),
        "{}",
        added(t1)
    );
}

/// The chaos test's tables: database `ferry_mcdc_chaos`, read as replica 6201.
struct ChaosMariaDb;

const CHAOS_CHECKPOINT_MS: u64 = 200;
const CHAOS_SERVER_ID: u32 = 6201;

impl chaos::Dialect for ChaosMariaDb {
    fn sql(&self, sql: &str) -> String {
        mariadb(sql)
    }

    fn create_tables(&self, rows: u64) {
        mariadb(&format!(
            "DROP DATABASE IF EXISTS ferry_mcdc_chaos; CREATE DATABASE ferry_mcdc_chaos;
             CREATE TABLE ferry_mcdc_chaos.src (id bigint PRIMARY KEY, v int NOT NULL, note mediumtext, big mediumtext);
             CREATE TABLE ferry_mcdc_chaos.dst (id bigint PRIMARY KEY, v int NOT NULL, note mediumtext, big mediumtext);
             USE ferry_mcdc_chaos;
             INSERT INTO src SELECT seq, 0, concat('row ', seq), IF(seq % {BIG_EVERY} = 0, repeat(md5(seq), 300 + seq % 700), NULL)
               FROM seq_1_to_{rows};"
        ));
    }

    fn transaction(&self, t: &chaos::Transaction) -> String {
        let from = t.insert_from;
        format!(
            "USE ferry_mcdc_chaos; BEGIN;
             UPDATE src SET v = v + 1, note = concat(note, '.') WHERE id BETWEEN {u} AND {u} + 1999 AND id % 19 = {};
             INSERT INTO src (id, v, note, big)
               SELECT {from} + seq, 0, repeat(md5(seq), {}), IF(seq = 0, repeat(md5({from} + seq), {}), NULL) FROM seq_0_to_9;
             UPDATE src SET big = repeat(md5(id + {}), {}) WHERE id = {};
             DELETE FROM src WHERE id BETWEEN {d} AND {d} + 199 AND id % 7 = {};
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
        format!("SELECT id, v, md5(note), md5(big) FROM ferry_mcdc_chaos.{t} ORDER BY id")
    }

    fn job(&self) -> String {
        format!(
            r#"
env {{ job.name = "mysqlcdc-chaos", job.mode = "STREAMING", checkpoint.interval = {CHAOS_CHECKPOINT_MS} }}
source {{
  MySQL-CDC {{
    base-url = "jdbc:mysql://127.0.0.1:3306/ferry_mcdc_chaos"
    username = "root"
    table-names = ["ferry_mcdc_chaos.src"]
    server-id = {CHAOS_SERVER_ID}
    snapshot.split.size = 2000
    exactly_once = true
    # Two snapshot readers: windows of up to eight chunks, two read at once.
    parallelism = 2
  }}
}}
sink {{
  Jdbc {{
    url = "jdbc:mysql://127.0.0.1:3306/ferry_mcdc_chaos"
    driver = "com.mysql.cj.jdbc.Driver"
    user = "root"
    generate_sink_sql = true
    database = ferry_mcdc_chaos
    table = dst
    primary_keys = ["id"]
  }}
}}
"#
        )
    }

    fn check_server(&self, position: &serde_json::Value) {
        // No binlog dump of the job's replica id is left (a killed run's ends when the
        // server notices the closed connection).
        let gone = common::eventually(Duration::from_secs(30), || {
            !mariadb("SHOW SLAVE HOSTS")
                .lines()
                .any(|l| l.split('\t').next() == Some(&CHAOS_SERVER_ID.to_string()))
        });
        assert!(
            gone,
            "replica {CHAOS_SERVER_ID} is still registered: {}",
            mariadb("SHOW SLAVE HOSTS")
        );
        // The savepoint's position is close to the server's end: the binlog from it on,
        // across files.
        let file = position["file"].as_str().unwrap_or_default();
        let pos = position["pos"].as_u64().unwrap_or_default();
        let logs = mariadb("SHOW BINARY LOGS");
        let sizes: Vec<(&str, u64)> = logs
            .lines()
            .filter_map(|l| {
                let mut c = l.split('\t');
                Some((c.next()?, c.next()?.parse().ok()?))
            })
            .collect();
        let from = sizes.iter().position(|(f, _)| *f == file);
        let behind = from.map(|i| {
            sizes[i..]
                .iter()
                .map(|(_, s)| s)
                .sum::<u64>()
                .saturating_sub(pos)
        });
        assert!(
            behind.is_some_and(|b| b < 64 << 20),
            "the job's position {file}:{pos} is {behind:?} bytes behind the server's end ({logs})"
        );
    }

    fn clean_up(&self) {
        mariadb("DROP DATABASE IF EXISTS ferry_mcdc_chaos");
    }
}

#[test]
fn a_keyed_table_under_load_survives_repeated_kills_row_for_row() {
    chaos::survives_repeated_kills(
        ChaosMariaDb,
        &chaos::Chaos {
            rows: 200_000,
            kills: 20,
            snapshot_kills: 7,
            checkpoint_ms: CHAOS_CHECKPOINT_MS,
            workload_seed: 0xcdc0_c4a6,
            kill_seed: 0x5eed_cdc2,
        },
    );
}

#[test]
fn check_states_the_guarantee_and_the_engines_and_never_shows_the_password() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    inventory();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.conf");
    let text = std::fs::read_to_string(case("mysqlcdc_to_mysql.conf"))
        .unwrap()
        .replace("password = \"\"", "password = \"secret-not-shown\"");
    std::fs::write(&job, text).unwrap();
    let out = common::ferry()
        .arg("check")
        .arg(&job)
        .output()
        .expect("ferry check runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The password is wrong for root, so the check fails at the connection: without it.
    assert!(!text.contains("secret-not-shown"), "{text}");
    let out = common::ferry()
        .arg("check")
        .arg(case("mysqlcdc_to_mysql.conf"))
        .output()
        .expect("ferry check runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("MySQL-CDC") && text.contains("[replayable]"),
        "{text}"
    );
    assert!(text.contains("delivery: exactly-once"), "{text}");
    // Spark runs it too, in bounded micro-batches.
    assert!(text.contains("engines: local, spark"), "{text}");
}

/// MySQL-CDC on Spark (micro-batches bounded at the binlog's end) into a keyed Jdbc
/// (PostgreSQL) target, under a continuous workload of multi-statement transactions
/// (updates, inserts with large values, deletes), the driver's whole process group killed
/// with SIGKILL five times (issue 15): once inside the snapshot, four times in the binlog
/// phase. After the workload stops, the target equals the source row for row. Each kill
/// costs a Spark start and a micro-batch of its own (the run is killed once it has logged
/// one): measured at load 3, about 29 s a kill.
#[test]
fn mysql_cdc_on_spark_survives_kills_of_the_driver_row_for_row() {
    const ROWS: u64 = 2_000;
    const KILLS: usize = 5;
    Engine::Spark.check_installed();
    mariadb(&format!(
        "DROP DATABASE IF EXISTS ferry_mcdc_spark; CREATE DATABASE ferry_mcdc_spark;
         CREATE TABLE ferry_mcdc_spark.src (id bigint PRIMARY KEY, v int NOT NULL, note mediumtext);
         USE ferry_mcdc_spark;
         INSERT INTO ferry_mcdc_spark.src SELECT seq * 10, 0, concat('row ', seq, repeat(md5(seq), 4)) FROM seq_1_to_{ROWS};"
    ));
    common::psql(
        "test",
        "DROP SCHEMA IF EXISTS ferry_mcdc_spark CASCADE; CREATE SCHEMA ferry_mcdc_spark;
         CREATE TABLE ferry_mcdc_spark.dst (id int8 PRIMARY KEY, v int4 NOT NULL, note text);",
    );
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.conf");
    // Chunks of 100 rows, at most 8 a micro-batch: the snapshot takes at least 3.
    std::fs::write(
        &job,
        r#"
env { job.name = "mysqlcdc-spark", job.mode = "STREAMING", checkpoint.interval = 1000 }
source {
  MySQL-CDC {
    base-url = "jdbc:mysql://127.0.0.1:3306/ferry_mcdc_spark"
    username = "root"
    table-names = ["ferry_mcdc_spark.src"]
    server-id = 6202
    snapshot.split.size = 100
    exactly_once = true
  }
}
sink {
  Jdbc {
    url = "jdbc:postgresql://127.0.0.1:5432/test"
    driver = "org.postgresql.Driver"
    user = "postgres"
    generate_sink_sql = true
    database = test
    table = ferry_mcdc_spark.dst
    primary_keys = ["id"]
  }
}
"#,
    )
    .unwrap();
    let ckpt = dir.path().join("ckpt");
    let offsets = ckpt.join("mcdcspark/query-0/offsets");
    let batches = || common::spark_batches(&ckpt, "mcdcspark");
    // Whether the latest logged micro-batch (the one a restart replays) starts before the
    // snapshot's end.
    let in_snapshot = || common::spark_batch_in_snapshot(&offsets);
    let workload = common::Workload::start(
        0xcdc5_9a4d,
        Duration::from_millis(100),
        move |_, rng| {
            // New keys anywhere in the table's key range (ahead of the snapshot's chunks and
            // behind them), some of them keys deleted before.
            let base = rng.between(1, ROWS * 10);
            mariadb(&format!(
                "USE ferry_mcdc_spark; BEGIN;
                 UPDATE src SET v = v + 1, note = concat(note, '.') WHERE id % 13 = {} AND id % 17 = {};
                 INSERT IGNORE INTO src (id, v, note) SELECT {base} + seq, 0, repeat(md5(seq), {}) FROM seq_0_to_4;
                 DELETE FROM src WHERE id % 1009 = {} AND id % 7 = {};
                 COMMIT;",
                rng.between(0, 13),
                rng.between(0, 17),
                rng.between(1, 100),
                rng.between(0, 1009),
                rng.between(0, 7)
            ));
        },
    );
    let mut rng = Rng(0x5eed_cdc6);
    let t0 = std::time::Instant::now();
    for round in 0..KILLS {
        let planned = batches();
        let mut child = common::start_group(&job, "spark", "mcdcspark", &ckpt);
        // The first kill lands in the snapshot, once a micro-batch of it has committed (the
        // next is logged); the others in the binlog phase, after the snapshot.
        let ready = if round == 0 {
            common::eventually(Duration::from_secs(180), || batches() > planned + 1)
        } else {
            common::eventually(Duration::from_secs(180), || {
                batches() > planned && !in_snapshot()
            })
        };
        if !ready {
            common::kill_group(&mut child);
            panic!(
                "round {round}: the job did not get there: {}",
                common::stderr_of(child)
            );
        }
        // Inside the snapshot: soon, before it ends (2000 rows and the workload's inserts,
        // at most 8 chunks of 100 a micro-batch).
        let pause = if round == 0 { (0, 400) } else { (100, 1_500) };
        std::thread::sleep(Duration::from_millis(rng.between(pause.0, pause.1)));
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "round {round}: the job ended by itself ({status}): {}",
                common::stderr_of(child)
            );
        }
        common::kill_group(&mut child);
        let snapshot = in_snapshot();
        eprintln!(
            "round {round}: killed at {:?} after {} micro-batches (in the snapshot: {snapshot}), {} rows in the target",
            t0.elapsed(),
            batches(),
            common::psql("test", "SELECT count(*) FROM ferry_mcdc_spark.dst").trim()
        );
        assert_eq!(
            snapshot,
            round == 0,
            "round {round}: killed in the wrong phase"
        );
    }
    let mut last = common::start_group(&job, "spark", "mcdcspark", &ckpt);
    common::wait_running("mcdcspark", &ckpt, "spark", Duration::from_secs(180));
    std::thread::sleep(Duration::from_secs(2));
    let rounds = workload.stop();
    let src = || {
        mariadb("SELECT id, v, md5(note) FROM ferry_mcdc_spark.src ORDER BY id").replace('\t', "|")
    };
    let dst = || {
        common::psql(
            "test",
            "SELECT id, v, md5(note) FROM ferry_mcdc_spark.dst ORDER BY id",
        )
    };
    let same = common::eventually(Duration::from_secs(180), || src() == dst());
    eprintln!("target equal to the source at {:?}: {same}", t0.elapsed());
    common::request_savepoint("mcdcspark", &ckpt);
    let status = common::wait_for(&mut last, Duration::from_secs(120), "the last run");
    let err = common::stderr_of(last);
    assert!(status.success(), "last run: {err}");
    assert!(
        same,
        "after {KILLS} kills and {rounds} transactions the target differs: {} rows in src, {} in dst\n{err}",
        mariadb("SELECT count(*) FROM ferry_mcdc_spark.src").trim(),
        common::psql("test", "SELECT count(*) FROM ferry_mcdc_spark.dst").trim()
    );
    assert!(rounds > 20, "only {rounds} workload transactions ran");
    mariadb("DROP DATABASE IF EXISTS ferry_mcdc_spark");
    common::psql("test", "DROP SCHEMA IF EXISTS ferry_mcdc_spark CASCADE");
}
