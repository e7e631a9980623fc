//! `format = COMPATIBLE_DEBEZIUM_JSON` end to end through the `ferry` binary: a
//! Postgres-CDC or MySQL-CDC source with that format into a Kafka sink with that format
//! (the local PostgreSQL with `wal_level = logical`, MariaDB with its ROW binlog, and Tansu,
//! the Kafka-compatible broker, on 127.0.0.1:9092), on the embedded engine and (Postgres-CDC)
//! on Spark. The topic is read back: every change must be in it once, in commit order, as
//! Debezium's event keyed by the row's key.

mod common;

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::psql;
use serde_json::{json, Value};

const SERVERS: &str = "127.0.0.1:9092";

/// One job at a time: a Spark session beside another job makes both slow.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The database a case captures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Db {
    Postgres,
    MySql,
}

/// Runs `sql` with the `mariadb` client (stopping at the first error, which fails the test).
fn mariadb(sql: &str) {
    let out = std::process::Command::new("mariadb")
        .args(["-h", "127.0.0.1", "-u", "root", "-N", "-B", "-e", sql])
        .output()
        .expect("the mariadb client runs");
    assert!(
        out.status.success(),
        "mariadb: {}\n{sql}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `sql` on the case's database.
fn run_sql(db: Db, sql: &str) {
    match db {
        Db::Postgres => {
            psql("test", sql);
        }
        Db::MySql => mariadb(sql),
    }
}

/// Drops `slot` and its publication.
fn drop_slot(slot: &str) {
    psql(
        "test",
        &format!("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'"),
    );
    psql(
        "test",
        &format!("DROP PUBLICATION IF EXISTS {slot}_publication"),
    );
}

/// Every message of partition 0 of `topic` once at least `want` are read and the end offset
/// is reached, or `limit` has passed: (key, value).
fn read_topic(topic: &str, want: usize, limit: Duration) -> Vec<(Option<String>, String)> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", SERVERS)
        .set("group.id", "ferry-test-cdc-debezium")
        .set("enable.auto.commit", "false")
        .create()
        .expect("a Kafka consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("partition 0");
    c.assign(&tpl).expect("assigned");
    let start = Instant::now();
    let mut out = Vec::new();
    loop {
        let (_, high) = c
            .fetch_watermarks(topic, 0, Duration::from_secs(10))
            .expect("watermarks");
        if out.len() as i64 >= high && out.len() >= want {
            return out;
        }
        if start.elapsed() > limit {
            return out;
        }
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).to_string());
                out.push((text(m.key()), text(m.payload()).unwrap_or_default()));
            }
            Some(Err(e)) => eprintln!("reading {topic}: {e} (high watermark {high})"),
            None => {}
        }
    }
}

/// An event as (op, id, v before, v after) from its value, after checking its key, its
/// schemas and its source block.
fn event(
    key: &Option<String>,
    value: &str,
    topic: &str,
    db: Db,
    scope: &str,
) -> (String, i64, i64, i64) {
    let v: Value = serde_json::from_str(value).unwrap_or_else(|e| panic!("{e}: {value}"));
    let k: Value = serde_json::from_str(key.as_deref().expect("every row has a key"))
        .unwrap_or_else(|e| panic!("{e}: {key:?}"));
    assert_eq!(k["schema"]["name"], json!(format!("{topic}.Key")), "{k}");
    assert_eq!(
        v["schema"]["name"],
        json!(format!("{topic}.Envelope")),
        "{v}"
    );
    let p = &v["payload"];
    let src = &p["source"];
    match db {
        Db::Postgres => {
            assert_eq!(src["connector"], "postgresql", "{src}");
            assert_eq!(src["db"], "test", "{src}");
            assert_eq!(src["schema"], json!(scope), "{src}");
        }
        Db::MySql => {
            assert_eq!(src["connector"], "mysql", "{src}");
            assert_eq!(src["db"], json!(scope), "{src}");
        }
    }
    assert_eq!(src["table"], "t", "{src}");
    let op = p["op"].as_str().expect("op").to_string();
    let row = if op == "d" { &p["before"] } else { &p["after"] };
    let id = row["id"].as_i64().expect("id");
    assert_eq!(k["payload"], json!({ "id": id }), "{k}");
    let num = |r: &Value| r["v"].as_i64().unwrap_or(-1);
    (op, id, num(&p["before"]), num(&p["after"]))
}

/// Runs Postgres-CDC or MySQL-CDC (COMPATIBLE_DEBEZIUM_JSON) → Kafka
/// (COMPATIBLE_DEBEZIUM_JSON) on `engine`: a snapshot of three rows, then inserts, updates
/// and deletes (two updates of one row in one transaction among them); the topic holds
/// each as one event, in order.
fn into_kafka_on(db: Db, engine: &str) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let name = match db {
        Db::Postgres => "pg",
        Db::MySql => "my",
    };
    // PostgreSQL: the schema; MariaDB: the database.
    let schema = format!("ferry_dbz_{name}_{engine}");
    let slot = format!("ferry_dbz_{engine}");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let server = format!("ferry_dbz_{name}_{engine}_{nanos}");
    let topic = format!("{server}.{schema}.t");
    let source = match db {
        Db::Postgres => {
            drop_slot(&slot);
            psql(
                "test",
                &format!(
                    "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
                     CREATE TABLE {schema}.t (id int8 PRIMARY KEY, v int4 NOT NULL, note text);
                     ALTER TABLE {schema}.t REPLICA IDENTITY FULL;
                     INSERT INTO {schema}.t SELECT g, 0, 'row ' || g FROM generate_series(1, 3) g;"
                ),
            );
            format!(
                r#"Postgres-CDC {{
    base-url = "jdbc:postgresql://127.0.0.1:5432/test"
    username = "postgres"
    password = "secret-not-shown"
    table-names = ["test.{schema}.t"]
    slot.name = "{slot}""#
            )
        }
        Db::MySql => {
            mariadb(&format!(
                "DROP DATABASE IF EXISTS {schema}; CREATE DATABASE {schema};
                 CREATE TABLE {schema}.t (id bigint PRIMARY KEY, v int NOT NULL, note text);
                 INSERT INTO {schema}.t VALUES (1, 0, 'row 1'), (2, 0, 'row 2'), (3, 0, 'row 3');"
            ));
            format!(
                r#"MySQL-CDC {{
    base-url = "jdbc:mysql://127.0.0.1:3306/{schema}"
    username = "root"
    password = ""
    table-names = ["{schema}.t"]
    server-id = 6291"#
            )
        }
    };
    common::create_kafka_topic(SERVERS, &topic, 1);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let job = dir.path().join("job.conf");
    std::fs::write(
        &job,
        format!(
            r#"
env {{ job.name = "dbz-{engine}", job.mode = "STREAMING", checkpoint.interval = 1000, parallelism = 1 }}
source {{
  {source}
    plugin_output = "changes"
    format = COMPATIBLE_DEBEZIUM_JSON
    debezium = {{ database.server.name = "{server}" }}
  }}
}}
sink {{
  # No topic: each row names its own, as SeaTunnel's documentation of the format writes it.
  Kafka {{
    plugin_input = "changes"
    bootstrap.servers = "{SERVERS}"
    format = COMPATIBLE_DEBEZIUM_JSON
  }}
}}
"#
        ),
    )
    .expect("the job file");
    check_reports_the_schema(&job);
    let ckpt = dir.path().join("ckpt");
    let extra: &[&str] = if engine == "spark" {
        &["--engine", "spark"]
    } else {
        &[]
    };
    let mut child = common::start_job(&job, "dbz", &ckpt, extra);
    // A Spark session takes a while to start, and its first micro-batch longer.
    let limit = Duration::from_secs(if engine == "spark" { 240 } else { 60 });
    let snapshot = read_topic(&topic, 3, limit);
    let t = format!("{schema}.t");
    if snapshot.len() >= 3 {
        for sql in [
            format!("INSERT INTO {t} VALUES (4, 0, 'four')"),
            format!("UPDATE {t} SET v = 1 WHERE id = 2"),
            format!("UPDATE {t} SET v = 1 WHERE id = 4"),
            format!("DELETE FROM {t} WHERE id = 3"),
            format!(
                "BEGIN; UPDATE {t} SET v = 1 WHERE id = 1; UPDATE {t} SET v = 2 WHERE id = 1;
                 INSERT INTO {t} VALUES (5, 0, 'five'); COMMIT;"
            ),
            format!("DELETE FROM {t} WHERE id = 4"),
        ] {
            run_sql(db, &sql);
        }
    }
    let expected: Vec<(&str, i64, i64, i64)> = vec![
        ("r", 1, -1, 0),
        ("r", 2, -1, 0),
        ("r", 3, -1, 0),
        ("c", 4, -1, 0),
        ("u", 2, 0, 1),
        ("u", 4, 0, 1),
        ("d", 3, 0, -1),
        ("u", 1, 0, 1),
        ("u", 1, 1, 2),
        ("c", 5, -1, 0),
        ("d", 4, 1, -1),
    ];
    let got = read_topic(&topic, expected.len(), limit);
    common::request_savepoint("dbz", &ckpt);
    let status = common::wait_for(&mut child, Duration::from_secs(120), "the dbz job");
    let err = common::stderr_of(child);
    assert!(status.success(), "{engine}: {status}\n{err}");
    assert!(!err.contains("secret-not-shown"), "{err}");
    let events: Vec<(String, i64, i64, i64)> = got
        .iter()
        .map(|(k, v)| event(k, v, &topic, db, &schema))
        .collect();
    let events: Vec<(&str, i64, i64, i64)> = events
        .iter()
        .map(|(op, id, b, a)| (op.as_str(), *id, *b, *a))
        .collect();
    assert_eq!(events, expected, "{engine}: the topic's events\n{err}");
    // Nothing more came with the savepoint or after it: reading on for one more message
    // finds none. (Tansu's end offsets can lag behind what a consumer reads, so they are
    // not the measure here.)
    let all = read_topic(&topic, expected.len() + 1, Duration::from_secs(20));
    assert_eq!(all.len(), expected.len(), "{engine}: {all:?}");
    match db {
        Db::Postgres => drop_slot(&slot),
        Db::MySql => mariadb(&format!("DROP DATABASE IF EXISTS {schema}")),
    }
}

/// `ferry check` reports the source's rows as SeaTunnel does (one table of text columns
/// `topic`, `key`, `value`; `default.default`, here named by `plugin_output`) and that the
/// job runs on both engines.
fn check_reports_the_schema(job: &Path) {
    let out = common::ferry()
        .arg("check")
        .arg(job)
        .output()
        .expect("ferry check runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(": topic string, key string, value string"),
        "{text}"
    );
    assert!(text.contains("engines: local, spark"), "{text}");
}

#[test]
fn postgres_cdc_debezium_json_into_kafka_every_change_once_in_order() {
    into_kafka_on(Db::Postgres, "local");
}

#[test]
fn postgres_cdc_debezium_json_into_kafka_on_spark() {
    into_kafka_on(Db::Postgres, "spark");
}

#[test]
fn mysql_cdc_debezium_json_into_kafka_every_change_once_in_order() {
    into_kafka_on(Db::MySql, "local");
}

#[test]
fn mysql_cdc_debezium_json_into_kafka_on_spark() {
    into_kafka_on(Db::MySql, "spark");
}
