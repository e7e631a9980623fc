//! SeaTunnel's e2e jobs for its broker connectors (`connector-redis-e2e`,
//! `connector-rabbitmq-e2e`), run through the real binary against the local brokers, with
//! the data their ITs write first and the results their ITs check. The job files in
//! `tests/brokers/` are SeaTunnel's, unchanged; the test rewrites only where the broker is:
//! the container host names (`redis-e2e`, `rabbitmq-e2e`) become 127.0.0.1, and the Redis
//! port 6379 becomes 6380, the Redis with a password that `scripts/test-services` starts
//! (SeaTunnel's jobs log in with `auth`, base64-shaded; the machine's own Redis has no
//! password). The Redis jobs write fixed key names, so the Redis tests run one at a time.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use common::{ferry, repo_root, wait_for};
use serde_json::{json, Value};

/// SeaTunnel's Redis jobs share key names: one at a time.
static REDIS: Mutex<()> = Mutex::new(());

fn job(name: &str, root: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo_root().join("tests/brokers").join(name)).unwrap();
    let text = text
        .replace("\"redis-e2e\"", "\"127.0.0.1\"")
        .replace("port = 6379", "port = 6380")
        .replace("\"rabbitmq-e2e\"", "\"127.0.0.1\"");
    let path = root.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `job` to its end on `engine` with checkpoints under `root`; fails with its output
/// otherwise.
fn run(job: &Path, root: &Path, engine: &str) {
    let name = job.file_name().unwrap().to_string_lossy().to_string();
    let (out, err) = (
        root.join(format!("{name}.out")),
        root.join(format!("{name}.err")),
    );
    let mut child = ferry()
        .arg("run")
        .arg(job)
        .args(["--engine", engine])
        .arg("--checkpoint-dir")
        .arg(root.join(format!("checkpoints-{name}")))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    // A Spark session takes up to a minute and a half to start on a loaded machine.
    let status = wait_for(&mut child, Duration::from_secs(300), &name);
    assert!(
        status.success(),
        "{name} on {engine}: {}{}",
        std::fs::read_to_string(&out).unwrap_or_default(),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
}

fn redis(db: i64) -> redis::Connection {
    redis::Client::open(format!("redis://:SeaTunnel@127.0.0.1:6380/{db}"))
        .unwrap()
        .get_connection()
        .expect("the Redis on 127.0.0.1:6380 (scripts/test-services starts it)")
}

fn del(c: &mut redis::Connection, pattern: &str) {
    let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(c).unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL").arg(keys).query(c).unwrap();
    }
}

/// A row as SeaTunnel's IT writes it (its JsonSerializationSchema of the test data set).
fn row(i: i64) -> Value {
    json!({
        "id": i, "c_map": {"key": 1}, "c_array": [1, 2], "c_string": format!("s{i}"),
        "c_boolean": i % 2 == 0, "c_tinyint": 1, "c_smallint": 2, "c_int": 3, "c_bigint": i,
        "c_float": 1.5, "c_double": 1.25, "c_decimal": 1.1, "c_bytes": "Ynl0ZXM=",
        "c_date": "2024-01-02", "c_timestamp": "2024-01-02T03:04:05",
    })
}

/// `redis-to-redis.conf`, `redis-to-redis-expire.conf` and `redis-to-redis-by-db-num.conf`:
/// 100 JSON strings `key_test*` read with `data_type = string` / `key` into one list.
fn redis_string_jobs(engine: &str) {
    let _one = REDIS.lock().unwrap_or_else(|e| e.into_inner());
    let root = tempfile::tempdir().unwrap();
    for db in [0, 1, 2] {
        let mut c = redis(db);
        del(&mut c, "key_test*");
        del(&mut c, "key_list");
        del(&mut c, "db_test");
    }
    for db in [0, 1] {
        let mut c = redis(db);
        for i in 0..100 {
            let _: () = redis::cmd("SET")
                .arg(format!("key_test{i}"))
                .arg(row(i).to_string())
                .query(&mut c)
                .unwrap();
        }
    }
    let mut c = redis(0);
    run(
        &job("redis-to-redis.conf", root.path()),
        root.path(),
        engine,
    );
    let list: Vec<String> = redis::cmd("LRANGE")
        .arg("key_list")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(list.len(), 100);
    // Without a format every value is one `content` column, written back as {"content": …}.
    let mut values: Vec<Value> = list
        .iter()
        .map(|v| {
            let written: Value = serde_json::from_str(v).unwrap();
            serde_json::from_str::<Value>(written["content"].as_str().unwrap()).unwrap()
        })
        .collect();
    values.sort_by_key(|v| v["id"].as_i64());
    assert_eq!(values, (0..100).map(row).collect::<Vec<_>>());
    del(&mut c, "key_list");
    // `expire` and `db_num` are options of the same code on both engines; Spark sessions
    // are slow to start, so one of these jobs proves the transport there.
    if engine == "spark" {
        for db in [0, 1, 2] {
            del(&mut redis(db), "key_test*");
        }
        return;
    }

    run(
        &job("redis-to-redis-expire.conf", root.path()),
        root.path(),
        engine,
    );
    let n: i64 = redis::cmd("LLEN").arg("key_list").query(&mut c).unwrap();
    let ttl: i64 = redis::cmd("TTL").arg("key_list").query(&mut c).unwrap();
    assert_eq!(n, 100);
    assert!(ttl > 0 && ttl <= 30, "TTL {ttl}");
    del(&mut c, "key_list");

    run(
        &job("redis-to-redis-by-db-num.conf", root.path()),
        root.path(),
        engine,
    );
    let n: i64 = redis::cmd("LLEN")
        .arg("db_test")
        .query(&mut redis(2))
        .unwrap();
    assert_eq!(n, 100);
    for db in [0, 1, 2] {
        let mut c = redis(db);
        del(&mut c, "key_test*");
        del(&mut c, "db_test");
    }
}

/// The `scan-*` jobs: 1000 strings, 100 lists, sets and sorted sets of 10 and 100 hashes
/// read by pattern and type into lists.
fn redis_scan_jobs(engine: &str) {
    let _one = REDIS.lock().unwrap_or_else(|e| e.into_inner());
    let root = tempfile::tempdir().unwrap();
    let mut c = redis(0);
    for i in 0..1000 {
        let _: () = redis::cmd("SET")
            .arg(format!("string_test{i}"))
            .arg("val")
            .query(&mut c)
            .unwrap();
    }
    for i in 0..100 {
        for j in 0..10 {
            let _: () = redis::cmd("LPUSH")
                .arg(format!("list-test-read{i}"))
                .arg(format!("val{j}"))
                .query(&mut c)
                .unwrap();
            let _: () = redis::cmd("SADD")
                .arg(format!("key-test-set{i}"))
                .arg(j)
                .query(&mut c)
                .unwrap();
            let _: () = redis::cmd("ZADD")
                .arg(format!("key-test-zset{i}"))
                .arg(1)
                .arg(j)
                .query(&mut c)
                .unwrap();
        }
        let _: () = redis::cmd("HSET")
            .arg(format!("key-test-hash{i}"))
            .arg("name")
            .arg("fuyoujie")
            .query(&mut c)
            .unwrap();
    }
    for (file, target, expected) in [
        ("scan-string-to-redis.conf", "string_test_list", 1000),
        (
            "scan-list-test-read-to-redis-list-test-check.conf",
            "list-test-check",
            1000,
        ),
        (
            "scan-set-to-redis-list-set-check.conf",
            "list-set-check",
            1000,
        ),
        (
            "scan-zset-to-redis-list-zset-check.conf",
            "list-zset-check",
            1000,
        ),
        (
            "scan-hash-to-redis-list-hash-check.conf",
            "list-hash-check",
            100,
        ),
    ] {
        // Each type is read by the same source code on both engines; on Spark, whose
        // sessions are slow to start, two of them prove the transport.
        if engine == "spark"
            && !matches!(
                file,
                "scan-string-to-redis.conf" | "scan-hash-to-redis-list-hash-check.conf"
            )
        {
            continue;
        }
        del(&mut c, target);
        run(&job(file, root.path()), root.path(), engine);
        let n: i64 = redis::cmd("LLEN").arg(target).query(&mut c).unwrap();
        assert_eq!(n, expected, "{file}");
        del(&mut c, target);
    }
    for p in [
        "string_test*",
        "list-test-read*",
        "key-test-set*",
        "key-test-zset*",
        "key-test-hash*",
    ] {
        del(&mut c, p);
    }
}

/// `fake-to-multipletableredissink.conf`: two FakeSource tables into one list in db 3.
fn redis_multi_table_job(engine: &str) {
    let _one = REDIS.lock().unwrap_or_else(|e| e.into_inner());
    let root = tempfile::tempdir().unwrap();
    let mut c = redis(3);
    del(&mut c, "key_multi_list");
    run(
        &job("fake-to-multipletableredissink.conf", root.path()),
        root.path(),
        engine,
    );
    let list: Vec<String> = redis::cmd("LRANGE")
        .arg("key_multi_list")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    let mut ids: Vec<i64> = list
        .iter()
        .map(|v| {
            serde_json::from_str::<Value>(v).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, vec![1, 2]);
    del(&mut c, "key_multi_list");
}

/// A SeaTunnel cluster job pointed at the Redis cluster `scripts/test-services` forms
/// (127.0.0.1:7101-7103): its `redis-cluster-N:6379` nodes, or its `redis-e2e` host and
/// port 6379, become the local masters.
fn cluster_job(name: &str, root: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo_root().join("tests/brokers").join(name)).unwrap();
    let text = text
        .replace("\"redis-cluster-0:6379\"", "\"127.0.0.1:7101\"")
        .replace("\"redis-cluster-1:6379\"", "\"127.0.0.1:7102\"")
        .replace("\"redis-cluster-2:6379\"", "\"127.0.0.1:7103\"")
        .replace("\"redis-e2e\"", "\"127.0.0.1\"")
        .replace("port = 6379", "port = 7101");
    let path = root.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn redis_cluster() -> redis::cluster::ClusterConnection {
    redis::cluster::ClusterClient::new(vec!["redis://:SeaTunnel@127.0.0.1:7101/"])
        .unwrap()
        .get_connection()
        .expect("the Redis cluster on 127.0.0.1:7101-7103 (scripts/test-services forms it)")
}

/// Deletes the keys matching `pattern` from every master of the cluster.
fn del_cluster(pattern: &str) {
    for port in [7101, 7102, 7103] {
        let mut c = redis::Client::open(format!("redis://:SeaTunnel@127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut c).unwrap();
        for k in keys {
            let _: () = redis::cmd("DEL").arg(k).query(&mut c).unwrap();
        }
    }
}

/// SeaTunnel's RedisClusterIT data (100 JSON strings `key_test*`, spread over the masters)
/// through `cluster-redis-to-redis-scan.conf` (seed nodes; into a set: SCARD 100) and
/// `redis-to-redis-cluster.conf` (`mode = "CLUSTER"` named by host and port only; into a
/// list: LLEN 100). At this version of the scan job its sink writes `key_list`, which is
/// checked (RedisClusterIT checks `key_set`, which a later version of the job writes).
fn redis_cluster_jobs(engine: &str) {
    let _one = REDIS.lock().unwrap_or_else(|e| e.into_inner());
    let root = tempfile::tempdir().unwrap();
    del_cluster("key_test*");
    del_cluster("key_list");
    let mut c = redis_cluster();
    for i in 0..100 {
        let _: () = redis::cmd("SET")
            .arg(format!("key_test{i}"))
            .arg(row(i).to_string())
            .query(&mut c)
            .unwrap();
    }
    run(
        &cluster_job("cluster-redis-to-redis-scan.conf", root.path()),
        root.path(),
        engine,
    );
    let n: i64 = redis::cmd("SCARD").arg("key_list").query(&mut c).unwrap();
    assert_eq!(n, 100);
    let members: Vec<String> = redis::cmd("SMEMBERS")
        .arg("key_list")
        .query(&mut c)
        .unwrap();
    let mut ids: Vec<i64> = members
        .iter()
        .map(|v| {
            let written: Value = serde_json::from_str(v).unwrap();
            let value: Value = serde_json::from_str(written["content"].as_str().unwrap()).unwrap();
            value["id"].as_i64().unwrap()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, (0..100).collect::<Vec<_>>());
    del_cluster("key_list");
    run(
        &cluster_job("redis-to-redis-cluster.conf", root.path()),
        root.path(),
        engine,
    );
    let n: i64 = redis::cmd("LLEN").arg("key_list").query(&mut c).unwrap();
    assert_eq!(n, 100);
    del_cluster("key_list");
    del_cluster("key_test*");
}

/// `rabbitmq-to-rabbitmq.conf`: SeaTunnel's IT puts 10 JSON rows in queue `test`, runs the
/// job (STREAMING with `for_e2e_testing`, so it ends) and reads them from `test1`.
fn rabbitmq_job(engine: &str) {
    use lapin::options::{
        BasicGetOptions, BasicPublishOptions, QueueDeclareOptions, QueuePurgeOptions,
    };
    use lapin::types::FieldTable;
    use lapin::{BasicProperties, Connection, ConnectionProperties};

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let rows: Vec<Value> = (0..10).map(row).collect();
    let channel = rt.block_on(async {
        let conn = Connection::connect(
            "amqp://guest:guest@127.0.0.1:5672/%2f",
            ConnectionProperties::default(),
        )
        .await
        .unwrap();
        let ch = conn.create_channel().await.unwrap();
        for q in ["test", "test1"] {
            ch.queue_declare(
                q.into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
            ch.queue_purge(q.into(), QueuePurgeOptions::default())
                .await
                .unwrap();
        }
        for r in &rows {
            ch.basic_publish(
                "".into(),
                "test".into(),
                BasicPublishOptions::default(),
                r.to_string().as_bytes(),
                BasicProperties::default(),
            )
            .await
            .unwrap();
        }
        (conn, ch)
    });
    let root = tempfile::tempdir().unwrap();
    run(
        &job("rabbitmq-to-rabbitmq.conf", root.path()),
        root.path(),
        engine,
    );
    let got = rt.block_on(async {
        let mut got = Vec::new();
        while let Some(m) = channel
            .1
            .basic_get("test1".into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            got.push(serde_json::from_slice::<Value>(&m.delivery.data).unwrap());
        }
        let left = channel
            .1
            .queue_declare(
                "test".into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap()
            .message_count();
        (got, left)
    });
    let (mut got, left) = got;
    got.sort_by_key(|v| v["id"].as_i64());
    assert_eq!(got.len(), 10);
    assert_eq!(left, 0, "the job acknowledged what it read");
    for (g, want) in got.iter().zip(&rows) {
        assert_eq!(g["id"], want["id"]);
        assert_eq!(g["c_string"], want["c_string"]);
        assert_eq!(g["c_map"], want["c_map"]);
        assert_eq!(g["c_date"], want["c_date"]);
        assert_eq!(g["c_bytes"], want["c_bytes"]);
    }
}

#[test]
fn seatunnel_redis_string_jobs_copy_every_key_into_a_list() {
    redis_string_jobs("local");
}

#[test]
fn seatunnel_redis_string_jobs_copy_every_key_into_a_list_on_spark() {
    redis_string_jobs("spark");
}

#[test]
fn seatunnel_redis_scan_jobs_read_every_type() {
    redis_scan_jobs("local");
}

#[test]
fn seatunnel_redis_scan_jobs_read_every_type_on_spark() {
    redis_scan_jobs("spark");
}

#[test]
fn seatunnel_redis_multi_table_sink_job_writes_both_tables() {
    redis_multi_table_job("local");
}

#[test]
fn seatunnel_redis_multi_table_sink_job_writes_both_tables_on_spark() {
    redis_multi_table_job("spark");
}

#[test]
fn seatunnel_redis_cluster_jobs_read_every_master_and_write_by_slot() {
    redis_cluster_jobs("local");
}

#[test]
fn seatunnel_redis_cluster_jobs_read_every_master_and_write_by_slot_on_spark() {
    redis_cluster_jobs("spark");
}

#[test]
fn seatunnel_rabbitmq_job_copies_a_queue() {
    rabbitmq_job("local");
}

/// Spark's read tasks end with their micro-batch, so a RabbitMQ reader could never
/// acknowledge what the checkpoint committed: `ferry check` says so and Spark refuses the
/// job before its session starts, naming the file and the reason, with the queue untouched.
#[test]
fn seatunnel_rabbitmq_job_is_refused_on_spark_with_the_reason() {
    let root = tempfile::tempdir().unwrap();
    let file = job("rabbitmq-to-rabbitmq.conf", root.path());
    let check = ferry().arg("check").arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{text}");
    assert!(
        text.contains("engines: local (not spark: source RabbitMQ: RabbitMQ takes acknowledgements only on the channel"),
        "{text}"
    );
    let out = ferry()
        .arg("run")
        .arg(&file)
        .args(["--engine", "spark"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("rabbitmq-to-rabbitmq.conf: this job cannot run on Spark")
            && err.contains("run it with --engine local"),
        "{err}"
    );
    assert!(!err.contains("guest"), "no credentials in errors: {err}");
}
