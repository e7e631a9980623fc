//! Tests against the local MariaDB (127.0.0.1:3306, root without password, ROW binlog as
//! `scripts/setup-databases` sets it). Each test has its own database `ferry_mcdc_<name>`
//! and its own replica id, so tests run in parallel without meeting.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int32Type;
use ferry_api::{
    ChangeBatch, EnumeratorContext, JobMode, Options, ReadStatus, ReaderContext, ResolveContext,
    Result, RowKind, Source, SourceFactory, Split,
};
use ferry_connector_testkit::{job, SourceDriver, SourceSnapshot};
use serde_json::{json, Value};

use crate::MySqlCdcSourceFactory;

/// Runs `sql` with the `mariadb` client and returns its rows (tab-separated columns).
fn my(sql: &str) -> Vec<Vec<String>> {
    let out = Command::new("mariadb")
        .args(["-h", "127.0.0.1", "-u", "root", "-N", "-B", "-e", sql])
        .output()
        .expect("the mariadb client runs");
    assert!(
        out.status.success(),
        "mariadb: {}\n{sql}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// A fresh database `ferry_mcdc_<name>` holding `ddl`.
fn setup(name: &str, ddl: &str) {
    let db = format!("ferry_mcdc_{name}");
    my(&format!(
        "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}; USE {db}; {ddl}"
    ));
}

fn teardown(name: &str) {
    my(&format!("DROP DATABASE IF EXISTS ferry_mcdc_{name}"));
}

fn source(name: &str, server_id: u32, extra: Value) -> Result<Box<dyn Source>> {
    let mut o = json!({
        "base-url": "jdbc:mysql://127.0.0.1:3306/mysql",
        "username": "root",
        "password": "",
        "table-names": [format!("ferry_mcdc_{name}.t")],
        "server-id": server_id.to_string(),
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut o, extra) {
        m.extend(e);
    }
    let mut s = MySqlCdcSourceFactory.create(
        &mut Options::from_json("MySQL-CDC", o),
        &job(JobMode::Streaming),
    )?;
    s.resolve(&ResolveContext::new(
        "source MySQL-CDC",
        job(JobMode::Streaming),
        Duration::from_secs(20),
    ))?;
    Ok(s)
}

/// Steps `d` until `done` holds of its output, for at most 60 s.
fn step_until(d: &mut SourceDriver, done: impl Fn(&[ChangeBatch]) -> bool) -> Result<()> {
    let start = Instant::now();
    while !done(d.output()) {
        d.step()?;
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "gave up after 60 s with {} rows read",
            d.rows_read()
        );
    }
    Ok(())
}

/// The error that ends `d`'s reading, within 60 s.
fn first_error(d: &mut SourceDriver) -> String {
    let start = Instant::now();
    loop {
        if let Err(e) = d.step() {
            return e.to_string();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no error within 60 s"
        );
    }
}

/// Every row of `batches` as (id, version, kind), in order.
fn events(batches: &[ChangeBatch]) -> Vec<(i32, i32, RowKind)> {
    let mut out = Vec::new();
    for b in batches {
        let ids = b
            .data
            .column_by_name("id")
            .unwrap()
            .as_primitive::<Int32Type>();
        let vs = b.data.column_by_name("v").unwrap();
        for i in 0..b.num_rows() {
            let v = if vs.is_null(i) {
                -1
            } else {
                vs.as_primitive::<Int32Type>().value(i)
            };
            out.push((ids.value(i), v, b.kind(i)));
        }
    }
    out
}

/// The table the events describe, applied as an upsert sink applies them.
fn apply(events: &[(i32, i32, RowKind)]) -> BTreeMap<i32, i32> {
    let mut m = BTreeMap::new();
    for (id, v, k) in events {
        match k {
            RowKind::Insert | RowKind::UpdateAfter => {
                m.insert(*id, *v);
            }
            RowKind::Delete => {
                m.remove(id);
            }
            RowKind::UpdateBefore => {}
        }
    }
    m
}

fn table(name: &str) -> BTreeMap<i32, i32> {
    my(&format!("SELECT id, v FROM ferry_mcdc_{name}.t"))
        .into_iter()
        .map(|r| (r[0].parse().unwrap(), r[1].parse().unwrap()))
        .collect()
}

/// Inserts, updates (v + 1) and deletes in multi-statement transactions. Rows 2001–3000
/// are left alone: only the snapshot brings them, so a snapshot row lost shows.
fn workload(name: &str, round: i32) {
    let t = format!("ferry_mcdc_{name}.t");
    let m = round % 7;
    let keep = "(id <= 2000 OR id > 3000)";
    my(&format!(
        "USE ferry_mcdc_{name}; BEGIN;
         UPDATE {t} SET v = v + 1 WHERE id % 7 = {m} AND {keep};
         INSERT INTO {t} (id, v, note) SELECT 100000 + {round} * 100 + seq, 0, repeat('x', 3000) FROM seq_1_to_20;
         DELETE FROM {t} WHERE id % 97 = {m} AND {keep};
         COMMIT;
         UPDATE {t} SET v = v + 1 WHERE id % 11 = {m} AND {keep};"
    ));
}

fn position(s: &SourceSnapshot) -> crate::stream::Position {
    serde_json::from_value(s.readers[0][0].state.clone()).unwrap()
}

const DDL: &str = "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, note text,
      u int unsigned DEFAULT 4294967295, amount decimal(10,2) DEFAULT 12.5,
      ts datetime(3) DEFAULT '2024-02-29 13:14:15.5', e enum('x','y') DEFAULT 'y');
    INSERT INTO t (id, v, note) SELECT seq, 0, concat('row ', seq) FROM seq_1_to_3000;";

#[test]
fn snapshot_and_changes_converge_and_a_restore_inside_repeats_nothing() {
    converge("converge", 6101, 1, 400, json!({}));
}

/// Three readers: windows of twelve 150-row chunks read by three connections at once, the
/// last window's final chunk the table's rest. The keys 1 to 3000 are even: the chunks are
/// cut by arithmetic.
#[test]
fn parallel_snapshot_readers_converge_and_a_restore_inside_repeats_nothing() {
    converge("converge3", 6102, 3, 150, json!({}));
}

/// The same with keys taken as uneven (at most 0.5 keys per row): each window's chunks are
/// cut by a query over the keys.
#[test]
fn parallel_snapshot_readers_cut_by_a_key_query_converge_too() {
    let uneven = json!({"chunk-key.even-distribution.factor.upper-bound": 0.5});
    converge("converge3q", 6108, 3, 150, uneven);
}

/// A snapshot under a concurrent workload, a checkpoint inside it, a crash after it and a
/// restore: the events applied in order equal the table, and none repeats.
fn converge(name: &'static str, server_id: u32, readers: usize, split: usize, extra: Value) {
    setup(name, DDL);
    let mut options = json!({
        // The test's own database, so that its connections can be told apart.
        "base-url": format!("jdbc:mysql://127.0.0.1:3306/ferry_mcdc_{name}"),
        "snapshot.split.size": split,
        "snapshot.fetch.size": 100,
    });
    if let (Some(o), Some(e)) = (options.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    let s = source(name, server_id, options).unwrap();
    assert!(s.is_replayable());
    let mut d = SourceDriver::start(s.as_ref(), readers, job(JobMode::Streaming)).unwrap();
    // A concurrent workload while the snapshot runs, so that chunks meet changes made
    // before, during and after their select.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut round = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && round < 60 {
                workload(name, round);
                round += 1;
                std::thread::sleep(Duration::from_millis(30));
            }
            round
        })
    };
    while d.rows_read() < 1500 {
        d.step().unwrap();
    }
    if readers > 1 {
        // The task's own connection, the binlog dump's and one per snapshot reader.
        let open = my(&format!(
            "SELECT count(*) FROM information_schema.processlist \
             WHERE db = 'ferry_mcdc_{name}' AND command <> 'Binlog Dump'"
        ));
        let open: usize = open[0][0].parse().unwrap();
        assert!(
            open > readers,
            "{open} connections for {readers} snapshot readers"
        );
    }
    let snap = d.snapshot().unwrap();
    let mut kept = d.take_output();
    // Read on past the checkpoint, then "crash": what came after it is lost downstream.
    for _ in 0..50 {
        d.step().unwrap();
    }
    drop(d);
    let mut d = SourceDriver::restore(s.as_ref(), readers, job(JobMode::Streaming), &snap).unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        d.step().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let rounds = worker.join().unwrap();
    assert!(rounds > 5, "only {rounds} workload rounds");
    // A last row marks the end of the workload.
    my(&format!(
        "INSERT INTO ferry_mcdc_{name}.t (id, v) VALUES (999999, 7)"
    ));
    step_until(&mut d, |out| events(out).iter().any(|e| e.0 == 999_999)).unwrap();
    kept.extend(d.take_output());
    let ev = events(&kept);
    assert_eq!(
        apply(&ev),
        table(name),
        "the target would differ from the table"
    );
    // Nothing from before the checkpoint came again: versions never go back.
    let mut last: BTreeMap<i32, i32> = BTreeMap::new();
    for (id, v, k) in &ev {
        if matches!(k, RowKind::Insert | RowKind::UpdateAfter) {
            let prev = last.insert(*id, *v).unwrap_or(-1);
            assert!(*v >= prev, "id {id}: version {v} after {prev}");
        }
    }
    // Its figures: the snapshot done, streaming, close to the server's binlog end.
    let f: BTreeMap<&str, f64> = d.figures(0).into_iter().collect();
    assert_eq!(f["snapshot_tables_done"], 1.0, "{f:?}");
    assert_eq!(f["streaming"], 1.0, "{f:?}");
    d.close().unwrap();
    teardown(name);
}

/// Every type the binlog carries arrives as the snapshot's `SELECT` reads it.
#[test]
fn every_type_reads_the_same_from_the_binlog_as_from_the_snapshot() {
    let name = "types";
    setup(
        name,
        "CREATE TABLE t (id int PRIMARY KEY, v int,
           ti tinyint, tiu tinyint unsigned, b1 tinyint(1), si smallint, siu smallint unsigned,
           mi mediumint, miu mediumint unsigned, iu int unsigned, bi bigint, biu bigint unsigned,
           f float, d double, de decimal(12,4), deu decimal(5,1) unsigned,
           dt date, tm time(3), dtm datetime(6), ts timestamp(2) NULL, y year,
           c char(5), vc varchar(20), tx text, mt mediumtext, bn binary(4), vb varbinary(8),
           bl blob, bit1 bit(1), bit9 bit(9), en enum('a','b''c'), st set('x','y','z'),
           js json, n int);",
    );
    let row = |id: i32| {
        format!(
            "({id}, 1, -128, 255, 1, -32768, 65535, -8388608, 16777215, 4294967295,
              -9223372036854775808, 18446744073709551615, 1.5, -2.25, -12345678.1234, 9999.9,
              '2024-02-29', '23:59:58.125', '2020-07-17 18:00:22.123456', '2021-01-02 03:04:05.67',
              2155, 'ab', 'héllo', 'text', 'medium', 0x0102, 0x00ff, 0xdeadbeef, 1, b'100000001',
              'b''c', 'x,z', '{{\"k\": [1, 2]}}', NULL)"
        )
    };
    my(&format!(
        "INSERT INTO ferry_mcdc_{name}.t VALUES {}",
        row(1)
    ));
    let s = source(name, 6102, json!({})).unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    step_until(&mut d, |out| !out.is_empty()).unwrap();
    my(&format!(
        "INSERT INTO ferry_mcdc_{name}.t VALUES {}",
        row(2)
    ));
    step_until(&mut d, |out| events(out).iter().any(|e| e.0 == 2)).unwrap();
    let out = d.take_output();
    let text = |b: &ChangeBatch, row: usize| -> Vec<String> {
        (2..b.data.num_columns())
            .map(|c| {
                let col = b.data.column(c);
                if col.is_null(row) {
                    "NULL".into()
                } else {
                    arrow::util::display::array_value_to_string(col, row).unwrap()
                }
            })
            .collect()
    };
    let snap_row = text(&out[0], 0);
    let last = out.last().unwrap();
    let bin_row = text(last, last.num_rows() - 1);
    assert_eq!(snap_row, bin_row, "snapshot vs binlog");
    assert!(
        snap_row.contains(&"18446744073709551615".to_string()),
        "{snap_row:?}"
    );
    assert!(snap_row.contains(&"b'c".to_string()), "{snap_row:?}");
    assert!(snap_row.contains(&"x,z".to_string()), "{snap_row:?}");
    d.close().unwrap();
    teardown(name);
}

#[test]
fn a_big_transaction_comes_in_bounded_batches_and_a_checkpoint_inside_it_resumes_exactly() {
    let name = "bigtx";
    setup(
        name,
        "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, note text);",
    );
    let s = source(name, 6103, json!({"snapshot.fetch.size": 500})).unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    // The (empty) snapshot first, so that the transaction comes through the binlog.
    let start = Instant::now();
    loop {
        d.step().unwrap();
        let snap = d.snapshot().unwrap();
        let state = snap.readers[0].first().map(|s| &s.state);
        if state.is_some_and(|s| !s.is_null()) && !position(&snap).snapshotted.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no snapshot after 60 s"
        );
    }
    my(&format!(
        "USE ferry_mcdc_{name}; INSERT INTO t SELECT seq, 1, repeat('x', 100) FROM seq_1_to_5000"
    ));
    step_until(&mut d, |out| events(out).len() >= 1500).unwrap();
    let snap = d.snapshot().unwrap();
    let p = position(&snap);
    assert!(
        p.skip > 0,
        "the checkpoint is not inside the transaction: {p:?}"
    );
    let mut kept = d.take_output();
    for _ in 0..20 {
        d.step().unwrap();
    }
    drop(d);
    let mut d = SourceDriver::restore(s.as_ref(), 1, job(JobMode::Streaming), &snap).unwrap();
    let before = events(&kept).len();
    step_until(&mut d, |out| before + events(out).len() >= 5000).unwrap();
    for _ in 0..20 {
        d.step().unwrap();
    }
    kept.extend(d.take_output());
    // Memory holds one batch at a time: no batch is larger than snapshot.fetch.size.
    assert!(kept.iter().all(|b| b.num_rows() <= 500));
    let mut ids: Vec<i32> = events(&kept).iter().map(|e| e.0).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (1..=5000).collect::<Vec<_>>(),
        "every row of the transaction once"
    );
    d.close().unwrap();
    teardown(name);
}

#[test]
fn an_added_column_or_a_purged_position_stops_the_job_with_the_reason() {
    let name = "refuse";
    setup(name, DDL);
    let s = source(name, 6104, json!({})).unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    step_until(&mut d, |out| events(out).len() >= 3000).unwrap();
    let snap = d.snapshot().unwrap();
    // A column added while the job runs: never silently dropped.
    my(&format!(
        "ALTER TABLE ferry_mcdc_{name}.t ADD COLUMN extra int; INSERT INTO ferry_mcdc_{name}.t (id, v, extra) VALUES (5000, 1, 1)"
    ));
    let err = first_error(&mut d);
    assert!(
        err.contains(&format!("ferry_mcdc_{name}.t")) && err.contains("a column was added"),
        "{err}"
    );
    assert!(err.contains("ADD COLUMN extra"), "{err}");
    drop(d);
    // A position in a binlog file the server no longer has.
    let mut snap = snap;
    let mut p = position(&snap);
    p.file = "mysql-bin.000000".into();
    snap.readers[0][0].state = serde_json::to_value(&p).unwrap();
    let s = source(name, 6104, json!({})).unwrap();
    let mut d = SourceDriver::restore(s.as_ref(), 1, job(JobMode::Streaming), &snap).unwrap();
    let err = first_error(&mut d);
    assert!(err.contains("no longer has the binlog"), "{err}");
    teardown(name);
}

/// A restored job whose table gained columns while it was stopped: the rows written before
/// are placed by the column names in the binlog (`binlog_row_metadata = FULL`, as
/// `scripts/setup-databases` sets it), carry NULL for a column without a value of its own and
/// leave one with a default to the target; a column dropped while the restored job runs
/// stops it, naming the column.
#[test]
fn a_restored_job_places_rows_written_before_columns_were_added() {
    let name = "addcol";
    setup(name, DDL);
    let t = format!("ferry_mcdc_{name}.t");
    let s = source(name, 6110, json!({})).unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    step_until(&mut d, |out| events(out).len() >= 3000).unwrap();
    let snap = d.snapshot().unwrap();
    drop(d);
    // While the job is stopped: changes in the old shape, then two columns, one in the
    // middle (AFTER v: placing by position would shift every column after it).
    my(&format!(
        "INSERT INTO {t} (id, v) VALUES (5001, 1); UPDATE {t} SET v = 5 WHERE id = 1;
         ALTER TABLE {t} ADD COLUMN extra int AFTER v, ADD COLUMN flag int NOT NULL DEFAULT 7;
         INSERT INTO {t} (id, v, extra, flag) VALUES (5002, 2, 3, 8);"
    ));
    let s = source(name, 6110, json!({})).unwrap();
    let mut d = SourceDriver::restore(s.as_ref(), 1, job(JobMode::Streaming), &snap).unwrap();
    step_until(&mut d, |out| events(out).iter().any(|e| e.0 == 5002)).unwrap();
    // Per written row (+I, +U): id, v, extra, flag, note, whether flag is left to the
    // target (`flag` is NOT NULL DEFAULT 7, `extra` nullable without a default).
    let mut rows = Vec::new();
    for b in d.output() {
        let col = |n: &str| b.data.schema().index_of(n).unwrap();
        let int = |c: usize, i: usize| {
            let a = b.data.column(c);
            (!a.is_null(i)).then(|| a.as_primitive::<Int32Type>().value(i))
        };
        let (id, v, extra, flag) = (col("id"), col("v"), col("extra"), col("flag"));
        for i in 0..b.num_rows() {
            if matches!(b.kind(i), RowKind::Insert | RowKind::UpdateAfter) {
                let kept = b
                    .unchanged
                    .as_ref()
                    .is_some_and(|u| u.is_unchanged(flag, i));
                let note = b.data.column(col("note")).as_string::<i32>();
                rows.push((
                    int(id, i),
                    int(v, i),
                    int(extra, i),
                    // A column left to the target holds no value (a placeholder where it
                    // cannot be NULL).
                    if kept { None } else { int(flag, i) },
                    (!note.is_null(i)).then(|| note.value(i).to_string()),
                    kept,
                ));
            }
        }
    }
    assert_eq!(
        rows,
        vec![
            (Some(5001), Some(1), None, None, None, true),
            (Some(1), Some(5), None, None, Some("row 1".into()), true),
            (Some(5002), Some(2), Some(3), Some(8), None, false),
        ]
    );
    // Both columns dropped while the restored job runs: its rows lack the same columns as
    // those written before they were added, and the job must not take them for those.
    my(&format!(
        "ALTER TABLE {t} DROP COLUMN extra, DROP COLUMN flag; INSERT INTO {t} (id, v) VALUES (5003, 3)"
    ));
    let err = first_error(&mut d);
    assert!(
        err.contains(&t) && err.contains("no longer has column 'extra'"),
        "{err}"
    );
    teardown(name);
}

#[test]
fn options_are_checked_before_any_connection() {
    let bad = |o: Value| {
        MySqlCdcSourceFactory
            .create(
                &mut Options::from_json("MySQL-CDC", o),
                &job(JobMode::Streaming),
            )
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let base = |extra: Value| {
        let mut o = json!({"base-url": "jdbc:mysql://h:3306/db", "username": "u", "password": "s3cret", "table-names": ["db.t"]});
        if let (Value::Object(m), Value::Object(e)) = (&mut o, extra) {
            m.extend(e);
        }
        o
    };
    assert!(bad(base(json!({}))).is_empty());
    assert!(bad(base(json!({"table-names": ["db.s.t"]}))).contains("not database.table"));
    assert!(bad(base(json!({"format": "COMPATIBLE_DEBEZIUM_JSON"}))).is_empty());
    assert!(bad(base(json!({"format": "JSON"}))).contains("format"));
    let e = bad(base(json!({"format": "COMPATIBLE_DEBEZIUM_JSON",
        "debezium": {"value.converter.schemas.enable": 0}})));
    assert!(e.contains("value.converter.schemas.enable"), "{e}");
    assert!(bad(base(json!({"base-url": "jdbc:postgresql://h/db"}))).contains("jdbc:mysql"));
    assert!(bad(base(json!({"startup.mode": "specific"}))).contains("startup.specific-offset"));
    assert!(bad(base(json!({"startup.mode": "timestamp"}))).contains("startup.timestamp"));
    assert!(bad(base(json!({"server-id": "6000-5000"}))).contains("server-id"));
    assert!(bad(base(json!({"server-id": "abc"}))).contains("server-id"));
    assert!(bad(base(json!({"stop.mode": "specific"}))).contains("stop.specific-offset"));
    assert!(bad(base(json!({"stop.mode": "timestamp"}))).contains("stop.timestamp"));
    assert!(bad(base(json!({"stop.mode": "earliest"}))).contains("stop.mode"));
    assert!(bad(base(json!({"schema-changes.enabled": true}))).contains("schema"));
    assert!(bad(base(
        json!({"table-names-config": [{"table": "db.other", "primaryKeys": ["id"]}]})
    ))
    .contains("db.other"));
    let e = bad(base(json!({"server-idd": "5"})));
    assert!(e.contains("server-id") && !e.contains("s3cret"), "{e}");
    let batch = MySqlCdcSourceFactory
        .create(
            &mut Options::from_json("MySQL-CDC", base(json!({}))),
            &job(JobMode::Batch),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(batch.contains("STREAMING"), "{batch}");
}

#[test]
fn a_keyless_table_is_refused_with_exactly_once_and_read_without() {
    let name = "keyless";
    setup(
        name,
        "CREATE TABLE t (id int, v int); INSERT INTO t VALUES (1, 1), (2, 2);",
    );
    let e = source(name, 6105, json!({"exactly_once": true}))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("no primary or unique key") && e.contains("exactly_once"),
        "{e}"
    );
    let s = source(name, 6105, json!({})).unwrap();
    assert!(!s.is_replayable());
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    step_until(&mut d, |out| events(out).len() >= 2).unwrap();
    my(&format!(
        "UPDATE ferry_mcdc_{name}.t SET v = 5 WHERE id = 2"
    ));
    step_until(&mut d, |out| events(out).len() >= 4).unwrap();
    let ev = events(d.output());
    assert_eq!(ev[2], (2, 2, RowKind::UpdateBefore));
    assert_eq!(ev[3], (2, 5, RowKind::UpdateAfter));
    d.close().unwrap();
    teardown(name);
}

#[test]
fn an_xa_transaction_is_passed_on_at_its_prepare_and_the_position_moves_past_it() {
    let name = "xa";
    setup(name, "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL);");
    let s = source(name, 6106, json!({})).unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    let start = Instant::now();
    loop {
        d.step().unwrap();
        let snap = d.snapshot().unwrap();
        let state = snap.readers[0].first().map(|s| &s.state);
        if state.is_some_and(|s| !s.is_null()) && !position(&snap).snapshotted.is_empty() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no snapshot");
    }
    my(&format!(
        "USE ferry_mcdc_{name}; XA START 'ferry-x'; INSERT INTO t VALUES (1, 1), (2, 1);
         XA END 'ferry-x'; XA PREPARE 'ferry-x'; XA COMMIT 'ferry-x'; INSERT INTO t VALUES (3, 1);"
    ));
    step_until(&mut d, |out| events(out).len() >= 3).unwrap();
    let snap = d.snapshot().unwrap();
    let ev = events(d.output());
    assert_eq!(
        ev.iter().map(|e| e.0).collect::<Vec<_>>(),
        vec![1, 2, 3],
        "{ev:?}"
    );
    // Restored after the last row, nothing comes again.
    drop(d);
    let mut d = SourceDriver::restore(s.as_ref(), 1, job(JobMode::Streaming), &snap).unwrap();
    my(&format!("INSERT INTO ferry_mcdc_{name}.t VALUES (4, 1)"));
    step_until(&mut d, |out| !events(out).is_empty()).unwrap();
    assert_eq!(events(d.output())[0].0, 4);
    d.close().unwrap();
    teardown(name);
}

#[test]
fn the_option_lists_name_no_option_twice_and_every_default_fits_its_kind() {
    use ferry_api::SourceFactory as _;
    ferry_api::declare::check_specs(crate::MySqlCdcSourceFactory.options(), &[]).unwrap();
}

/// One micro-batch as Spark reads it: splits `start` bounded at `bound` (with the first
/// read's `end` on a replay), read by a fresh reader until it finishes, then closed. Its
/// rows, its end states and how long it took.
fn micro_batch(
    s: &dyn Source,
    start: &[Split],
    bound: &Value,
    end: Option<&[Split]>,
) -> (Vec<ChangeBatch>, Vec<Split>, Duration) {
    let t0 = Instant::now();
    let splits = s.bound_splits_at(start.to_vec(), bound, end).unwrap();
    let ctx = ReaderContext {
        subtask: 0,
        parallelism: 1,
        job: job(JobMode::Streaming),
    };
    let mut r = s.create_reader(&ctx).unwrap();
    let ready = r.readiness().expect("a readiness signal");
    r.add_splits(splits).unwrap();
    r.no_more_splits();
    let mut out = Vec::new();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the micro-batch did not end within 60 s"
        );
        match r.poll_next().unwrap() {
            ReadStatus::Batch(b) => out.push(b),
            ReadStatus::Idle(d) => {
                let _ = ready
                    .receiver()
                    .recv_timeout(d.min(Duration::from_millis(200)));
            }
            ReadStatus::Finished => break,
        }
    }
    let end = r.snapshot(1).unwrap();
    r.close().unwrap();
    (out, end, t0.elapsed())
}

/// Replica ids registered with the server (`SHOW SLAVE HOSTS`): a binlog dump lists its
/// replica there until the server has ended it.
fn replicas() -> Vec<String> {
    my("SHOW SLAVE HOSTS")
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

/// Spark's micro-batches, driven as its engine drives them: each is bounded at the
/// server's binlog end when it is planned, reads the changes before the bound and none
/// after, reads snapshot chunks after the bound, and leaves no binlog dump registered
/// under the job's server-id; a replay with the first read's end repeats its rows and
/// end, and one after further changes serves instead of the first read; a micro-batch with
/// nothing new ends at once; the rows kept make the table.
#[test]
fn micro_batches_end_at_their_bound_free_the_server_id_and_replay_the_first_read() {
    let name = "bounded";
    setup(name, DDL);
    let s = source(name, 6107, json!({"snapshot.split.size": 150})).unwrap();
    let ctx = EnumeratorContext {
        parallelism: 1,
        job: job(JobMode::Streaming),
    };
    let mut e = s.create_enumerator(&ctx, None).unwrap();
    let mut start: Vec<Split> = e.discover().unwrap().into_iter().map(|(_, s)| s).collect();
    let mut kept = Vec::new();
    let inserted = |round: i32| (100_000 + round * 100 + 1)..=(100_000 + round * 100 + 20);
    let (mut replays, mut streamed) = (0, 0);
    for batch in 0..60 {
        let snapshot_done = start[0]
            .read_state::<Option<crate::stream::Position>>()
            .unwrap()
            .is_some_and(|p| !p.snapshotted.is_empty());
        if batch < 12 {
            workload(name, batch);
        }
        let bound = e.bound_micro_batch(batch as u64).unwrap().expect("a bound");
        if batch < 12 {
            // After the bound: the next micro-batch's.
            workload(name, 1000 + batch);
        }
        let (out, end, took) = micro_batch(s.as_ref(), &start, &bound, None);
        eprintln!(
            "batch {batch}: {} rows in {took:?}, bound {bound}, end {}",
            events(&out).len(),
            end[0].state
        );
        assert!(
            !replicas().contains(&"6107".to_string()),
            "batch {batch}: the binlog dump is still registered: {:?}",
            replicas()
        );
        if snapshot_done && batch < 12 {
            streamed += 1;
            let ids: std::collections::BTreeSet<i32> = events(&out).iter().map(|e| e.0).collect();
            assert!(
                inserted(batch).all(|id| ids.contains(&id)),
                "batch {batch}: the inserts before the bound are missing"
            );
            assert!(
                !inserted(1000 + batch).any(|id| ids.contains(&id)),
                "batch {batch}: inserts after the bound came"
            );
        }
        let out = match batch {
            1 => {
                // Nothing changed since the first read: the same rows, the same end.
                let (again, end2, _) = micro_batch(s.as_ref(), &start, &bound, Some(&end));
                assert_eq!(events(&again), events(&out), "batch {batch} replayed");
                assert_eq!(end2, end, "batch {batch} replayed");
                replays += 1;
                // A first read that got less far into the table (its second ran out): the
                // replay's chunks stop at its last key too.
                let state = |s: &[Split]| {
                    s[0].read_state::<Option<crate::stream::Position>>()
                        .unwrap()
                        .unwrap()
                };
                let (from, mut short) = (state(&start), state(&end));
                let key = |p: &crate::stream::Position| {
                    p.chunk
                        .as_ref()
                        .map_or(0, |c| c.after[0].parse::<i32>().unwrap())
                };
                let mid = (key(&from) + key(&short)) / 2;
                assert!(mid > key(&from), "batch {batch}: {from:?} to {short:?}");
                short.chunk = Some(crate::stream::ChunkProgress {
                    table: format!("ferry_mcdc_{name}.t"),
                    after: vec![mid.to_string()],
                });
                let short = vec![Split::typed("mysql-cdc", &Some(short)).unwrap()];
                let (part, end3, _) = micro_batch(s.as_ref(), &start, &bound, Some(&short));
                assert_eq!(end3, short, "batch {batch} replayed after a shorter read");
                // Snapshot rows are the inserts of ids below the workload's.
                let chunked: Vec<i32> = events(&part)
                    .iter()
                    .filter(|e| e.2 == RowKind::Insert && e.0 < 100_000)
                    .map(|e| e.0)
                    .collect();
                assert!(
                    !chunked.is_empty() && chunked.iter().all(|id| *id > key(&from) && *id <= mid),
                    "batch {batch}: snapshot rows outside ({}, {mid}]",
                    key(&from)
                );
                out
            }
            2 | 9 => {
                // The first read is lost (a crash before the commit); changes come; the
                // replay ends where the first read did and serves instead.
                workload(name, 2000 + batch);
                let (again, end2, _) = micro_batch(s.as_ref(), &start, &bound, Some(&end));
                assert_eq!(end2, end, "batch {batch} replayed");
                replays += 1;
                again
            }
            _ => out,
        };
        kept.extend(out);
        start = end;
        if batch >= 12 && snapshot_done {
            break;
        }
    }
    assert_eq!(replays, 3);
    assert!(
        streamed >= 3,
        "only {streamed} micro-batches after the snapshot"
    );
    // The rows kept, applied as an upsert sink applies them, make the table.
    assert_eq!(
        apply(&events(&kept)),
        table(name),
        "the target would differ from the table"
    );
    // A micro-batch with nothing new (in this table) ends at once, without rows.
    let bound = e.bound_micro_batch(100).unwrap().expect("a bound");
    let (out, _, took) = micro_batch(s.as_ref(), &start, &bound, None);
    assert!(events(&out).is_empty());
    assert!(took < Duration::from_secs(3), "took {took:?}");
    teardown(name);
}

/// The rows of `batches` (`format = COMPATIBLE_DEBEZIUM_JSON`): topic, key and value, the
/// last two parsed (`null` for no key).
fn debezium_rows(batches: &[ChangeBatch]) -> Vec<(String, Value, Value)> {
    let mut out = Vec::new();
    for b in batches {
        assert_eq!(&*b.table, "default.default");
        let col = |n: &str| b.data.column_by_name(n).unwrap().as_string::<i32>().clone();
        let (topic, key, value) = (col("topic"), col("key"), col("value"));
        for i in 0..b.num_rows() {
            assert_eq!(b.kind(i), RowKind::Insert);
            let key = if key.is_null(i) {
                Value::Null
            } else {
                serde_json::from_str(key.value(i)).unwrap()
            };
            let value = serde_json::from_str(value.value(i)).unwrap();
            out.push((topic.value(i).to_string(), key, value));
        }
    }
    out
}

/// `format = COMPATIBLE_DEBEZIUM_JSON` with the value converter's schema off and a server
/// name of the job's: a snapshot row, an insert, an update, a delete and an update of the
/// key, as Debezium's MySQL connector writes them.
#[test]
fn compatible_debezium_json_writes_each_change_as_debeziums_event() {
    let name = "dbz";
    setup(
        name,
        "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, note varchar(20),
           amount decimal(10,2), d date, dtm datetime, dt6 datetime(6), ts timestamp NULL,
           b1 tinyint(1), en enum('a','b'), js json);
         INSERT INTO t VALUES (1, 0, 'snap', 12.50, '2024-02-29', '2024-02-29 13:14:15',
           '2024-02-29 13:14:15.5', '2024-02-29 13:14:15', 1, 'b', '{\"a\": 1}');",
    );
    let s = source(
        name,
        6190,
        json!({"format": "COMPATIBLE_DEBEZIUM_JSON", "debezium": {
            "database.server.name": "shop", "value.converter.schemas.enable": "false"}}),
    )
    .unwrap();
    let tables = s.tables();
    assert_eq!(tables.len(), 1);
    assert_eq!(&*tables[0].name, "default.default");
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    step_until(&mut d, |out| debezium_rows(out).len() == 1).unwrap();
    let t = format!("ferry_mcdc_{name}.t");
    my(&format!(
        "INSERT INTO {t} (id, v, note, amount, d) VALUES (2, 0, 'new', -3.25, '1970-01-02');
         UPDATE {t} SET v = 1, note = 'upd' WHERE id = 2;
         DELETE FROM {t} WHERE id = 1;
         UPDATE {t} SET id = 3 WHERE id = 2;"
    ));
    step_until(&mut d, |out| debezium_rows(out).len() >= 6).unwrap();
    let rows = debezium_rows(d.output());
    assert_eq!(rows.len(), 6, "{rows:?}");
    let ops: Vec<&str> = rows.iter().map(|r| r.2["op"].as_str().unwrap()).collect();
    assert_eq!(ops, vec!["r", "c", "u", "d", "d", "c"]);
    let topic = format!("shop.ferry_mcdc_{name}.t");
    for (tp, key, value) in &rows {
        assert_eq!(tp, &topic);
        // The key keeps its schema; the value is the payload alone.
        assert_eq!(key["schema"]["name"], json!(format!("{topic}.Key")));
        assert!(value.get("schema").is_none(), "{value}");
        let src = &value["source"];
        assert_eq!(src["connector"], "mysql");
        assert_eq!(src["name"], "shop");
        assert_eq!(src["db"], json!(format!("ferry_mcdc_{name}")));
        assert_eq!(src["table"], "t");
        assert!(!src["file"].as_str().unwrap().is_empty(), "{src}");
        assert!(value["ts_ms"].as_i64().unwrap() > 1_600_000_000_000);
    }
    let ts: i64 = my(&format!("SELECT UNIX_TIMESTAMP(ts) FROM {t} WHERE id = 1"))
        .first()
        .map(|r| r[0].parse().unwrap())
        .unwrap_or_else(|| {
            // Row 1 is deleted by now: the same value, as the server reads it.
            my("SELECT UNIX_TIMESTAMP('2024-02-29 13:14:15')")[0][0]
                .parse()
                .unwrap()
        });
    let zoned = {
        let days = ts.div_euclid(86_400);
        assert_eq!(days, 19782, "the server's time zone moved the day");
        format!(
            "2024-02-29T{:02}:{:02}:{:02}Z",
            ts.rem_euclid(86_400) / 3600,
            ts.rem_euclid(3600) / 60,
            ts.rem_euclid(60)
        )
    };
    // The snapshot row: every type as Debezium's MySQL connector writes it.
    let (_, key, value) = &rows[0];
    assert_eq!(key["payload"], json!({"id": 1}));
    assert_eq!(value["before"], Value::Null);
    let after1: Value = serde_json::from_str(&format!(
        r#"{{"id": 1, "v": 0, "note": "snap", "amount": 12.50, "d": 19782,
            "dtm": 1709212455000, "dt6": 1709212455500000, "ts": "{zoned}", "b1": 1,
            "en": "b", "js": "{{\"a\": 1}}"}}"#
    ))
    .unwrap();
    assert_eq!(value["after"], after1);
    assert_eq!(value["source"]["snapshot"], "true");
    let key_fields = &key["schema"]["fields"];
    assert_eq!(
        key_fields,
        &json!([{"type": "int32", "optional": false, "field": "id"}])
    );
    // The changes: the insert, the update (one event, with the whole row before), the
    // delete, and the key's update as a delete of the old key and a create of the new.
    let payload = |i: usize| &rows[i].2;
    assert_eq!(payload(1)["before"], Value::Null);
    assert_eq!(payload(1)["after"]["amount"], json!(-3.25));
    assert_eq!(payload(1)["after"]["d"], 1);
    assert_eq!(payload(1)["after"]["dtm"], Value::Null);
    assert_eq!(payload(2)["before"]["note"], "new");
    assert_eq!(payload(2)["after"]["note"], "upd");
    assert_eq!(rows[3].1["payload"], json!({"id": 1}));
    assert_eq!(payload(3)["before"]["note"], "snap");
    assert_eq!(payload(3)["after"], Value::Null);
    assert_eq!(rows[4].1["payload"], json!({"id": 2}));
    assert_eq!(payload(4)["before"]["id"], 2);
    assert_eq!(rows[5].1["payload"], json!({"id": 3}));
    assert_eq!(payload(5)["after"]["note"], "upd");
    for i in 1..6 {
        let src = &payload(i)["source"];
        assert_eq!(src["snapshot"], "false");
        assert!(src["server_id"].as_i64().unwrap() > 0, "{src}");
        assert!(src["pos"].as_i64().unwrap() > 0, "{src}");
        assert!(src["ts_ms"].as_i64().unwrap() > 1_600_000_000_000, "{src}");
        assert_eq!(src["ts_ms"].as_i64().unwrap() % 1000, 0, "{src}");
        // MariaDB's GTID of the transaction: domain-server-sequence.
        let gtid = src["gtid"].as_str().unwrap_or_default();
        let parts: Vec<&str> = gtid.split('-').collect();
        assert!(
            parts.len() == 3 && parts.iter().all(|p| p.parse::<u64>().is_ok()),
            "{src}"
        );
    }
    // Each statement is its own transaction: its own GTID.
    let gtid = |i: usize| payload(i)["source"]["gtid"].clone();
    assert!(gtid(1) != gtid(2) && gtid(4) == gtid(5), "{rows:?}");
    // Binlog order: each later statement's rows event lies further on.
    let pos = |i: usize| payload(i)["source"]["pos"].as_i64().unwrap();
    assert!(
        pos(1) < pos(2) && pos(2) < pos(3) && pos(3) < pos(4),
        "{rows:?}"
    );
    d.close().unwrap();
    teardown(name);
}

/// `stop.mode = latest`: a job restored after changes were made reads them all and ends
/// (its readers finish) at the binlog's end as of its start; a change made after its start
/// is not read; a restore of that end finishes at once. Spark is refused with the reason.
#[test]
fn stop_mode_latest_ends_at_the_binlog_end_of_the_start() {
    let name = "stoplatest";
    setup(name, DDL);
    let s = source(name, 6109, json!({})).unwrap();
    assert_eq!(s.needs_long_lived_reader(), None);
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    step_until(&mut d, |out| events(out).len() >= 3000).unwrap();
    let snap = d.snapshot().unwrap();
    let mut kept = d.take_output();
    d.close().unwrap();
    for round in 0..5 {
        workload(name, round);
    }
    let stop = source(name, 6109, json!({"stop.mode": "latest"})).unwrap();
    let why = stop.needs_long_lived_reader().unwrap_or_default();
    assert!(why.contains("stop.mode = latest"), "{why}");
    let t0 = Instant::now();
    let mut d = SourceDriver::restore(stop.as_ref(), 1, job(JobMode::Streaming), &snap).unwrap();
    let mut later = false;
    while !d.is_finished() {
        d.step().unwrap();
        if !later && replicas().contains(&"6109".to_string()) {
            // The binlog dump is open, so the stop was read: this change is past it.
            later = true;
            my(&format!(
                "INSERT INTO ferry_mcdc_{name}.t (id, v) VALUES (777777, 1)"
            ));
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "not finished after 30 s"
        );
    }
    kept.extend(d.take_output());
    let ev = events(&kept);
    assert!(
        ev.iter().all(|e| e.0 != 777_777),
        "a change after the stop was read"
    );
    my(&format!(
        "DELETE FROM ferry_mcdc_{name}.t WHERE id = 777777"
    ));
    assert_eq!(
        apply(&ev),
        table(name),
        "the changes before the stop differ"
    );
    let end = d.snapshot().unwrap();
    let p = position(&end);
    let stop_at = p.stop.clone().expect("the end is recorded");
    assert!(p.binlog().reached(&stop_at.binlog()), "{p:?}");
    d.close().unwrap();
    let mut d = SourceDriver::restore(stop.as_ref(), 1, job(JobMode::Streaming), &end).unwrap();
    let t0 = Instant::now();
    while !d.is_finished() {
        d.step().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(30), "not finished again");
    }
    assert_eq!(d.rows_read(), 0);
    d.close().unwrap();
    teardown(name);
}

/// The server's binlog end (`SHOW MASTER STATUS`) as (file, offset).
fn binlog_end() -> (String, u64) {
    let row = my("SHOW MASTER STATUS").remove(0);
    (row[0].clone(), row[1].parse().unwrap())
}

/// Steps `d` until it finishes (at most 30 s) and returns its rows as (id, v, kind).
fn read_to_the_end(d: &mut SourceDriver) -> Vec<(i32, i32, RowKind)> {
    let t0 = Instant::now();
    while !d.is_finished() {
        d.step().unwrap();
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "not finished after 30 s"
        );
    }
    events(&d.take_output())
}

/// `stop.mode = specific` and `timestamp` end the stream between transactions: one that
/// starts before the stop is read whole (a stop inside it included), the first one at or
/// after it is not read, and the recorded position is its start, so a restore without a
/// stop reads it and repeats nothing. A time no transaction reaches ends the stream once
/// the server's clock passes it. A stop before the start is refused.
#[test]
fn stop_modes_specific_and_timestamp_end_before_the_first_transaction_past_the_stop() {
    let name = "stopat";
    setup(name, "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)");
    let t = format!("ferry_mcdc_{name}.t");
    let txn = |ids: [i32; 3]| {
        my(&format!(
            "BEGIN; INSERT INTO {t} VALUES ({}, 0); INSERT INTO {t} VALUES ({}, 0); \
             INSERT INTO {t} VALUES ({}, 0); COMMIT;",
            ids[0], ids[1], ids[2]
        ));
    };
    let (file, p0) = binlog_end();
    txn([1, 2, 3]);
    let (_, p1) = binlog_end();
    txn([4, 5, 6]);
    // B's last byte, or inside a transaction of another test written right after B, which
    // starts after B as well: either way B starts before it and C after it.
    let (_, p2) = binlog_end();
    // Transaction C lies in a later second than B, and the stop time at its second's start.
    std::thread::sleep(Duration::from_millis(1100));
    let t_stop: i64 = my("SELECT UNIX_TIMESTAMP() * 1000")[0][0].parse().unwrap();
    txn([7, 8, 9]);
    let (_, p3) = binlog_end();
    let from = json!({"startup.mode": "specific", "startup.specific-offset.file": file,
        "startup.specific-offset.pos": p0});
    let with = |extra: Value| {
        let mut o = from.clone();
        if let (Value::Object(m), Value::Object(e)) = (&mut o, extra) {
            m.extend(e);
        }
        o
    };
    let ids = |ev: &[(i32, i32, RowKind)]| ev.iter().map(|e| e.0).collect::<Vec<_>>();

    // At the end of A: A only.
    let s = source(
        name,
        6111,
        with(
            json!({"stop.mode": "specific", "stop.specific-offset.file": file,
            "stop.specific-offset.pos": p1}),
        ),
    )
    .unwrap();
    let why = s.needs_long_lived_reader().unwrap_or_default();
    assert!(why.contains("stop.mode = specific"), "{why}");
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    assert_eq!(ids(&read_to_the_end(&mut d)), [1, 2, 3]);
    d.close().unwrap();

    // Inside B: B whole; the position is past it, from which a restore without a stop
    // reads C and nothing before it. (Other tests write to the same binlog: the stop is
    // B's last byte, not p1 + 1, which could fall into one of theirs before B.)
    let s = source(
        name,
        6111,
        with(
            json!({"stop.mode": "specific", "stop.specific-offset.file": file,
            "stop.specific-offset.pos": p2 - 1}),
        ),
    )
    .unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    assert_eq!(ids(&read_to_the_end(&mut d)), [1, 2, 3, 4, 5, 6]);
    let end = d.snapshot().unwrap();
    d.close().unwrap();
    let never = source(name, 6111, with(json!({}))).unwrap();
    let mut d = SourceDriver::restore(never.as_ref(), 1, job(JobMode::Streaming), &end).unwrap();
    step_until(&mut d, |out| events(out).len() >= 3).unwrap();
    for _ in 0..20 {
        d.step().unwrap();
    }
    assert_eq!(ids(&events(&d.take_output())), [7, 8, 9]);
    d.close().unwrap();

    // At C's second: A and B.
    let s = source(
        name,
        6111,
        with(json!({"stop.mode": "timestamp", "stop.timestamp": t_stop})),
    )
    .unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    assert_eq!(ids(&read_to_the_end(&mut d)), [1, 2, 3, 4, 5, 6]);
    d.close().unwrap();

    // After C with no transaction later: ends once the clock has passed the time.
    let soon: i64 = my("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + 1500")[0][0]
        .parse()
        .unwrap();
    let s = source(
        name,
        6111,
        json!({"startup.mode": "specific", "startup.specific-offset.file": file,
            "startup.specific-offset.pos": p3, "stop.mode": "timestamp", "stop.timestamp": soon}),
    )
    .unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    assert!(read_to_the_end(&mut d).is_empty());
    d.close().unwrap();

    // A stop before the start.
    let e = source(
        name,
        6111,
        json!({"startup.mode": "specific", "startup.specific-offset.file": file,
            "startup.specific-offset.pos": p1, "stop.mode": "specific",
            "stop.specific-offset.file": file, "stop.specific-offset.pos": p0}),
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        e.contains("stop.specific-offset.pos") && e.contains("before"),
        "{e}"
    );
    teardown(name);
}

/// A fresh start records the GTID state at its binlog position exactly, whichever way the
/// source found it (asked twice on a quiet server, BINLOG_GTID_POS when other tests wrote
/// in between): the server's own answer for that position.
#[test]
fn a_fresh_start_records_the_gtid_state_of_its_position() {
    let name = "freshgtid";
    setup(name, "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)");
    for round in 0..3 {
        let s = source(name, 6112, json!({"startup.mode": "latest"})).unwrap();
        let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
        let t0 = Instant::now();
        let p = loop {
            d.step().unwrap();
            let snap = d.snapshot().unwrap();
            if !snap.readers[0][0].state.is_null() {
                break position(&snap);
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "no position");
        };
        d.close().unwrap();
        assert!(!p.file.is_empty() && !p.gtid.is_empty(), "{p:?}");
        let want = my(&format!("SELECT BINLOG_GTID_POS('{}', {})", p.file, p.pos));
        assert_eq!(want[0][0], p.gtid, "round {round}: {p:?}");
        my(&format!(
            "INSERT INTO ferry_mcdc_{name}.t VALUES ({round}, 0)"
        ));
    }
    teardown(name);
}
