//! Tests against the local PostgreSQL (127.0.0.1:5432, trust auth, `wal_level = logical` as
//! `scripts/setup-databases` sets it). Each test has its own schema `ferry_cdc_<name>` and
//! its own slot, so tests run in parallel without meeting.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int32Type;
use ferry_api::{
    ChangeBatch, JobMode, Options, ResolveContext, Result, RowKind, Source, SourceFactory,
};
use ferry_connector_testkit::{job, SourceDriver, SourceSnapshot};
use serde_json::{json, Value};

use crate::PostgresCdcSourceFactory;

fn pg(sql: &str) -> Vec<Vec<Option<String>>> {
    let sql = sql.to_string();
    ferry_api::io::handle()
        .unwrap()
        .block_on(ferry_db::catalog::pg_script(
            "host=127.0.0.1 port=5432 user=postgres dbname=test",
            &sql,
        ))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Drops `slot` if it exists. The server ends a closed reader's walsender a moment after
/// the socket closes (a test's, or an earlier run's); until then the slot is "active" and
/// cannot be dropped, so this waits for that first.
fn drop_slot(slot: &str) {
    let t0 = Instant::now();
    while !pg(&format!(
        "SELECT 1 FROM pg_replication_slots WHERE slot_name = '{slot}' AND active"
    ))
    .is_empty()
    {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "slot {slot} stays active"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    pg(&format!(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'"
    ));
}

/// A fresh schema with table `t`, and no slot or publication left from an earlier run.
fn setup(name: &str, ddl: &str) {
    let schema = format!("ferry_cdc_{name}");
    let slot = format!("ferry_t_{name}");
    drop_slot(&slot);
    pg(&format!(
        "DROP PUBLICATION IF EXISTS {slot}_publication;
         DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
         SET search_path = {schema}; {ddl}"
    ));
}

/// Drops the test's slot, so that no test leaves WAL held on the server.
fn teardown(name: &str) {
    drop_slot(&format!("ferry_t_{name}"));
}

fn source(name: &str, extra: Value) -> Result<Box<dyn Source>> {
    let mut o = json!({
        "base-url": "jdbc:postgresql://127.0.0.1:5432/test",
        "username": "postgres",
        "password": "",
        "table-names": [format!("test.ferry_cdc_{name}.t")],
        "slot.name": format!("ferry_t_{name}"),
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut o, extra) {
        m.extend(e);
    }
    let mut s = PostgresCdcSourceFactory.create(
        &mut Options::from_json("Postgres-CDC", o),
        &job(JobMode::Streaming),
    )?;
    s.resolve(&ResolveContext::new(
        "source Postgres-CDC",
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
    pg(&format!("SELECT id, v FROM ferry_cdc_{name}.t"))
        .into_iter()
        .map(|r| {
            (
                r[0].as_deref().unwrap().parse().unwrap(),
                r[1].as_deref().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// Inserts, updates (v + 1) and deletes in multi-statement transactions. Rows 2001 to
/// 3000 are left alone: only the snapshot brings them, so a chunk that lost rows shows.
fn workload(name: &str, round: i32) {
    let t = format!("ferry_cdc_{name}.t");
    pg(&format!(
        "BEGIN;
         UPDATE {t} SET v = v + 1 WHERE id % 7 = {m} AND (id <= 2000 OR id > 3000);
         INSERT INTO {t} (id, v, note) SELECT 100000 + {round} * 100 + g, 0, repeat('x', 3000) FROM generate_series(1, 20) g;
         DELETE FROM {t} WHERE id % 97 = {m} AND (id <= 2000 OR id > 3000);
         COMMIT;
         UPDATE {t} SET v = v + 1 WHERE id % 11 = {m} AND (id <= 2000 OR id > 3000);",
        m = round % 7
    ));
}

/// The slot's confirmed position, as an integer.
fn confirmed(slot: &str) -> u64 {
    let r = pg(&format!(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '{slot}'"
    ));
    let lsn = r[0][0].clone().unwrap();
    pgwire_replication::Lsn::parse(&lsn).unwrap().0
}

fn position(s: &SourceSnapshot) -> crate::stream::Position {
    serde_json::from_value(s.readers[0][0].state.clone()).unwrap()
}

const DDL: &str = "CREATE TABLE t (id int4 PRIMARY KEY, v int4 NOT NULL, note text,
      u uuid DEFAULT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', ip inet DEFAULT '10.1.2.3',
      amount numeric(10,2) DEFAULT 12.5, ts timestamp DEFAULT '2024-02-29 13:14:15.5');
    ALTER TABLE t REPLICA IDENTITY FULL;
    INSERT INTO t (id, v, note) SELECT g, 0, 'row ' || g FROM generate_series(1, 3000) g;";

#[test]
fn snapshot_and_changes_converge_and_a_restore_inside_repeats_nothing() {
    converge("converge", 1, 400, json!({}));
}

/// Three readers: windows of twelve 150-row chunks read by three connections at once, the
/// last window's final chunk the table's rest. The keys 1 to 3000 are even: the chunks are
/// cut by arithmetic.
#[test]
fn parallel_snapshot_readers_converge_and_a_restore_inside_repeats_nothing() {
    converge("converge3", 3, 150, json!({}));
}

/// The same with keys taken as uneven (at most 0.5 keys per row): each window's chunks are
/// cut by a query over the keys.
#[test]
fn parallel_snapshot_readers_cut_by_a_key_query_converge_too() {
    let uneven = json!({"chunk-key.even-distribution.factor.upper-bound": 0.5});
    converge("converge3q", 3, 150, uneven);
}

/// The most backends named `application` open at once, sampled on one connection until
/// `watching` turns false.
fn most_connections(application: &str, watching: &std::sync::atomic::AtomicBool) -> usize {
    let sql =
        format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{application}'");
    ferry_api::io::handle().unwrap().block_on(async {
        let (client, connection) = tokio_postgres::connect(
            "host=127.0.0.1 port=5432 user=postgres dbname=test",
            tokio_postgres::NoTls,
        )
        .await
        .unwrap();
        tokio::spawn(connection);
        let mut most = 0usize;
        while watching.load(std::sync::atomic::Ordering::SeqCst) {
            let open: i64 = client.query_one(&sql, &[]).await.unwrap().get(0);
            most = most.max(usize::try_from(open).unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        most
    })
}

/// A snapshot under a concurrent workload, a checkpoint inside it, a crash after it and a
/// restore: the events applied in order equal the table, and none repeats.
fn converge(name: &'static str, readers: usize, split: usize, extra: Value) {
    setup(name, DDL);
    let mut options = json!({
        "base-url": format!("jdbc:postgresql://127.0.0.1:5432/test?ApplicationName=ferry_t_{name}"),
        "snapshot.split.size": split,
        "snapshot.fetch.size": 100,
    });
    if let (Some(o), Some(e)) = (options.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    let s = source(name, options).unwrap();
    assert!(s.is_replayable());
    let mut d = SourceDriver::start(s.as_ref(), readers, job(JobMode::Streaming)).unwrap();
    // A concurrent workload while the snapshot runs, so that chunks' windows see changes
    // committed between their low watermark, their SELECT and their high watermark.
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
    // The most connections of the job seen at once while the snapshot is read (the
    // snapshot readers close theirs when every table is read). One connection samples
    // every millisecond or two: a connection per sample (several milliseconds each on a
    // loaded machine) once missed the few dozen milliseconds the readers' connections are
    // all open before the first window's rows come.
    let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let watching = watching.clone();
        std::thread::spawn(move || most_connections(&format!("ferry_t_{name}"), &watching))
    };
    while d.rows_read() < 1500 {
        d.step().unwrap();
    }
    let snap = d.snapshot().unwrap();
    let mut kept = d.take_output();
    // Read on past the checkpoint, then "crash": what came after it is lost downstream.
    for _ in 0..50 {
        d.step().unwrap();
    }
    watching.store(false, std::sync::atomic::Ordering::SeqCst);
    let most = watcher.join().unwrap();
    if readers > 1 {
        // The first window of the 3000-row table cut twelve chunks, for three readers:
        // the task's own connection and one per snapshot reader (the replication
        // connection does not carry the name).
        assert!(
            most > readers,
            "at most {most} connections for {readers} snapshot readers"
        );
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
    pg(&format!(
        "INSERT INTO ferry_cdc_{name}.t (id, v) VALUES (999999, 7)"
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
    // The values of every type arrive as the Jdbc source reads them.
    let b = kept.iter().find(|b| b.num_rows() > 0).unwrap();
    let col = |n: &str| {
        arrow::util::display::array_value_to_string(b.data.column_by_name(n).unwrap(), 0).unwrap()
    };
    assert_eq!(col("u"), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    assert_eq!(col("ip"), "10.1.2.3");
    assert_eq!(col("amount"), "12.50");
    assert_eq!(col("ts"), "2024-02-29T13:14:15.500");
    d.close().unwrap();
    teardown(name);
}

#[test]
fn the_slot_is_confirmed_only_up_to_completed_checkpoints() {
    let name = "ack";
    setup(name, DDL);
    let slot = format!("ferry_t_{name}");
    let s = source(name, json!({"snapshot.split.size": 1000})).unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    step_until(&mut d, |out| events(out).len() >= 3000).unwrap();
    let start = confirmed(&slot);
    workload(name, 0);
    step_until(&mut d, |out| events(out).iter().any(|e| e.0 > 100_000)).unwrap();
    let snap = d.snapshot().unwrap();
    let at = position(&snap).lsn;
    assert!(at > start);
    workload(name, 1);
    for _ in 0..200 {
        d.step().unwrap();
    }
    // Read past the checkpoint, but it has not completed: the slot stays where it was.
    assert_eq!(confirmed(&slot), start);
    // Its figures: the snapshot done, streaming, and close to the server's WAL end.
    let t0 = Instant::now();
    loop {
        d.step().unwrap();
        let f: BTreeMap<&str, f64> = d.figures(0).into_iter().collect();
        assert_eq!(
            f["snapshot_tables_done"], f["snapshot_tables_total"],
            "{f:?}"
        );
        assert_eq!(f["streaming"], 1.0, "{f:?}");
        assert!(f["snapshot_chunks_read"] >= 3.0, "{f:?}");
        if f["lag_bytes"] < 1_000_000.0 && f["lag_seconds"] < 60.0 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "lagging: {f:?}");
    }
    d.complete(snap.checkpoint_id).unwrap();
    let t0 = Instant::now();
    while confirmed(&slot) != at {
        d.step().unwrap();
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "slot not confirmed at {at}"
        );
    }
    d.close().unwrap();
    teardown(name);
}

#[test]
fn a_dropped_slot_or_a_new_column_stops_the_job_with_the_reason() {
    let name = "refuse";
    setup(name, DDL);
    let slot = format!("ferry_t_{name}");
    let s = source(name, json!({})).unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    step_until(&mut d, |out| events(out).len() >= 3000).unwrap();
    let snap = d.snapshot().unwrap();
    // A column added while the job runs: never silently dropped.
    pg(&format!(
        "ALTER TABLE ferry_cdc_{name}.t ADD COLUMN extra int4; INSERT INTO ferry_cdc_{name}.t (id, v, extra) VALUES (5000, 1, 1)"
    ));
    let err = first_error(&mut d);
    assert!(err.contains("column 'extra'"), "{err}");
    drop(d);
    // Restarted, the job reads the table with the column; one dropped while it runs
    // stops it (the server no longer has it: not a change from before it was added).
    let s = source(name, json!({})).unwrap();
    let mut d = SourceDriver::restore(s.as_ref(), 1, job(JobMode::Streaming), &snap).unwrap();
    step_until(&mut d, |out| events(out).iter().any(|e| e.0 == 5000)).unwrap();
    pg(&format!(
        "ALTER TABLE ferry_cdc_{name}.t DROP COLUMN extra; INSERT INTO ferry_cdc_{name}.t (id, v) VALUES (5001, 1)"
    ));
    let err = first_error(&mut d);
    assert!(err.contains("no longer has column 'extra'"), "{err}");
    drop(d);
    // The slot gone: the position cannot be resumed, and the job says so.
    drop_slot(&slot);
    let s = source(name, json!({})).unwrap();
    let mut d = SourceDriver::restore(s.as_ref(), 1, job(JobMode::Streaming), &snap).unwrap();
    let err = first_error(&mut d);
    assert!(err.contains("does not exist any more"), "{err}");
}

#[test]
fn options_are_checked_before_any_connection() {
    let bad = |o: Value| {
        PostgresCdcSourceFactory
            .create(
                &mut Options::from_json("Postgres-CDC", o),
                &job(JobMode::Streaming),
            )
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let base = |extra: Value| {
        let mut o = json!({"base-url": "jdbc:postgresql://h:5432/db", "username": "u", "password": "s3cret", "table-names": ["db.s.t"]});
        if let (Value::Object(m), Value::Object(e)) = (&mut o, extra) {
            m.extend(e);
        }
        o
    };
    assert!(bad(base(json!({"table-names": ["s.t"]}))).contains("not database.schema.table"));
    assert!(bad(base(json!({"format": "AVRO"}))).contains("format"));
    let e = bad(base(json!({"format": "COMPATIBLE_DEBEZIUM_JSON",
        "debezium": {"key.converter.schemas.enable": "maybe"}})));
    assert!(e.contains("key.converter.schemas.enable"), "{e}");
    assert!(bad(base(json!({"base-url": "jdbc:mysql://h/db"}))).contains("jdbc:postgresql"));
    assert!(bad(base(json!({"startup.mode": "specific"}))).contains("startup.mode"));
    let e = bad(base(json!({"slot.nmae": "x"})));
    assert!(e.contains("slot.name") && !e.contains("s3cret"), "{e}");
    let batch = PostgresCdcSourceFactory
        .create(
            &mut Options::from_json("Postgres-CDC", base(json!({}))),
            &job(JobMode::Batch),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(batch.contains("STREAMING"), "{batch}");
}

#[test]
fn a_big_transaction_comes_in_bounded_batches_and_a_checkpoint_inside_it_resumes_exactly() {
    let name = "bigtx";
    setup(
        name,
        "CREATE TABLE t (id int4 PRIMARY KEY, v int4 NOT NULL, note text);",
    );
    let s = source(name, json!({"snapshot.fetch.size": 500})).unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    // The (empty) snapshot first, so that the transaction comes through the log (on a
    // loaded machine a fixed number of steps may not be enough: wait for the snapshot).
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
    pg(&format!(
        "INSERT INTO ferry_cdc_{name}.t SELECT g, 1, repeat('x', 100) FROM generate_series(1, 5000) g"
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
fn the_option_lists_name_no_option_twice_and_every_default_fits_its_kind() {
    use ferry_api::SourceFactory as _;
    ferry_api::declare::check_specs(crate::PostgresCdcSourceFactory.options(), &[]).unwrap();
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

#[test]
fn compatible_debezium_json_writes_each_change_as_debeziums_event() {
    let name = "dbz";
    setup(
        name,
        "CREATE TABLE t (id int4 PRIMARY KEY, v int4 NOT NULL, note text, amount numeric(10,2),
           d date, ts timestamp, tz timestamptz, doc jsonb);
         INSERT INTO t VALUES (1, 0, 'snap', 12.50, '2024-02-29', '2024-02-29 13:14:15.5',
           '2024-02-29 13:14:15+00', '{\"a\": 1}');",
    );
    let s = source(name, json!({"format": "COMPATIBLE_DEBEZIUM_JSON"})).unwrap();
    let tables = s.tables();
    assert_eq!(tables.len(), 1);
    assert_eq!(&*tables[0].name, "default.default");
    let names: Vec<&str> = tables[0]
        .schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, vec!["topic", "key", "value"]);
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    step_until(&mut d, |out| debezium_rows(out).len() == 1).unwrap();
    let t = format!("ferry_cdc_{name}.t");
    pg(&format!(
        "INSERT INTO {t} VALUES (2, 0, 'new', -3.25, '1970-01-02', '1970-01-01 00:00:01', NULL, NULL);
         UPDATE {t} SET v = 1, note = 'upd' WHERE id = 2;
         DELETE FROM {t} WHERE id = 1;"
    ));
    step_until(&mut d, |out| debezium_rows(out).len() >= 4).unwrap();
    let rows = debezium_rows(d.output());
    assert_eq!(rows.len(), 4, "{rows:?}");
    let topic = format!("postgres_cdc_source.ferry_cdc_{name}.t");
    let ops: Vec<&str> = rows
        .iter()
        .map(|r| r.2["payload"]["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, vec!["r", "c", "u", "d"]);
    for (tp, key, value) in &rows {
        assert_eq!(tp, &topic);
        assert_eq!(key["schema"]["name"], json!(format!("{topic}.Key")));
        assert_eq!(value["schema"]["name"], json!(format!("{topic}.Envelope")));
        let src = &value["payload"]["source"];
        assert_eq!(src["connector"], "postgresql");
        assert_eq!(src["name"], "postgres_cdc_source");
        assert_eq!(src["db"], "test");
        assert_eq!(src["schema"], json!(format!("ferry_cdc_{name}")));
        assert_eq!(src["table"], "t");
        assert!(src["lsn"].as_i64().unwrap() > 0, "{src}");
        assert!(value["payload"]["ts_ms"].as_i64().unwrap() > 1_600_000_000_000);
    }
    // The snapshot row: every type as Debezium's PostgreSQL connector writes it.
    let (_, key, value) = &rows[0];
    assert_eq!(key["payload"], json!({"id": 1}));
    let p = &value["payload"];
    assert_eq!(p["before"], Value::Null);
    // (Parsed from text: a decimal keeps its scale, 12.50, as JsonConverter writes it.)
    let after1: Value = serde_json::from_str(
        r#"{"id": 1, "v": 0, "note": "snap", "amount": 12.50, "d": 19782,
            "ts": 1709212455500000, "tz": "2024-02-29T13:14:15Z", "doc": "{\"a\": 1}"}"#,
    )
    .unwrap();
    assert_eq!(p["after"], after1);
    assert!(value.to_string().contains("\"amount\":12.50"), "{value}");
    assert_eq!(p["source"]["snapshot"], "true");
    assert_eq!(p["source"]["txId"], Value::Null);
    let fields = &value["schema"]["fields"][1]["fields"];
    let field = |n: &str| {
        fields
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["field"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        field("id"),
        json!({"type": "int32", "optional": false, "field": "id"})
    );
    assert_eq!(
        field("amount"),
        json!({"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
               "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "10"},
               "field": "amount"})
    );
    assert_eq!(field("d")["name"], "io.debezium.time.Date");
    assert_eq!(field("ts")["name"], "io.debezium.time.MicroTimestamp");
    assert_eq!(field("tz")["name"], "io.debezium.time.ZonedTimestamp");
    assert_eq!(field("doc")["name"], "io.debezium.data.Json");
    // The insert, the update (one event; replica identity DEFAULT: no row before) and the
    // delete (the row before is the key alone).
    let after2 = json!({"id": 2, "v": 0, "note": "new", "amount": -3.25, "d": 1,
                        "ts": 1_000_000, "tz": null, "doc": null});
    assert_eq!(rows[1].1["payload"], json!({"id": 2}));
    assert_eq!(rows[1].2["payload"]["after"], after2);
    assert_eq!(rows[1].2["payload"]["before"], Value::Null);
    let u = &rows[2].2["payload"];
    assert_eq!(u["before"], Value::Null);
    assert_eq!(u["after"]["v"], 1);
    assert_eq!(u["after"]["note"], "upd");
    let del = &rows[3].2["payload"];
    assert_eq!(rows[3].1["payload"], json!({"id": 1}));
    assert_eq!(del["after"], Value::Null);
    assert_eq!(
        del["before"],
        json!({"id": 1, "v": null, "note": null, "amount": null, "d": null, "ts": null,
               "tz": null, "doc": null})
    );
    for r in &rows[1..] {
        let src = &r.2["payload"]["source"];
        assert_eq!(src["snapshot"], "false");
        assert!(src["txId"].as_i64().unwrap() > 0, "{src}");
        assert!(src["ts_ms"].as_i64().unwrap() > 1_600_000_000_000, "{src}");
    }
    // Changes in WAL order.
    let lsn = |i: usize| rows[i].2["payload"]["source"]["lsn"].as_i64().unwrap();
    assert!(lsn(1) < lsn(2) && lsn(2) < lsn(3));
    d.close().unwrap();
    teardown(name);
}

/// `stop.mode = latest`: a job restored after changes were made reads them all and ends
/// (its readers finish) at the WAL's end as of its start, without waiting for a
/// keepalive; a change made after its start is not read; once the last checkpoint
/// completes the slot is advanced to the end position. A restore of that end finishes at
/// once. Spark is refused with the reason, and other stop modes name the option.
#[test]
fn stop_mode_latest_ends_at_the_wal_end_of_the_start() {
    let name = "stoplatest";
    setup(name, DDL);
    let s = source(name, json!({})).unwrap();
    assert_eq!(s.needs_long_lived_reader(), None);
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    step_until(&mut d, |out| events(out).len() >= 3000).unwrap();
    let snap = d.snapshot().unwrap();
    let mut kept = d.take_output();
    d.close().unwrap();
    for round in 0..5 {
        workload(name, round);
    }
    let stop = source(name, json!({"stop.mode": "latest"})).unwrap();
    let why = stop.needs_long_lived_reader().unwrap_or_default();
    assert!(why.contains("stop.mode = latest"), "{why}");
    let t0 = Instant::now();
    let mut d = SourceDriver::restore(stop.as_ref(), 1, job(JobMode::Streaming), &snap).unwrap();
    let mut later = false;
    while !d.is_finished() {
        d.step().unwrap();
        let streaming = pg(&format!(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = 'ferry_t_{name}' AND active"
        ));
        if !later && !streaming.is_empty() {
            // The stream is open, so the stop is written: this change is past it.
            later = true;
            pg(&format!(
                "INSERT INTO ferry_cdc_{name}.t (id, v) VALUES (777777, 1)"
            ));
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "not finished after 20 s"
        );
    }
    kept.extend(d.take_output());
    let ev = events(&kept);
    assert!(
        ev.iter().all(|e| e.0 != 777_777),
        "a change after the stop was read"
    );
    pg(&format!("DELETE FROM ferry_cdc_{name}.t WHERE id = 777777"));
    assert_eq!(
        apply(&ev),
        table(name),
        "the changes before the stop differ"
    );
    let end = d.snapshot().unwrap();
    let end_lsn = position(&end).lsn;
    assert!(position(&end).stop.is_some_and(|s| end_lsn >= s));
    d.complete(end.checkpoint_id).unwrap();
    d.close().unwrap();
    assert!(
        confirmed(&format!("ferry_t_{name}")) >= end_lsn,
        "the slot was not advanced to the end"
    );
    // Restored at its end, the job has nothing left to read.
    let mut d = SourceDriver::restore(stop.as_ref(), 1, job(JobMode::Streaming), &end).unwrap();
    let t0 = Instant::now();
    while !d.is_finished() {
        d.step().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(20), "not finished again");
    }
    assert_eq!(d.rows_read(), 0);
    d.close().unwrap();
    let err = source(name, json!({"stop.mode": "specific"}))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("stop.mode"), "{err}");
    teardown(name);
}
