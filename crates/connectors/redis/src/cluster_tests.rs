//! Against the Redis cluster `scripts/test-services` forms: three masters on
//! 127.0.0.1:7101-7103, password "SeaTunnel", each test on keys of its own prefix.

use std::collections::BTreeMap;

use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use ferry_api::{ChangeBatch, JobMode, Options, Result, Sink, SinkFactory, Source, SourceFactory};
use ferry_connector_testkit::{check_source_replay, check_source_restore, job, read_all};
use redis::cluster::ClusterConnection;
use serde_json::{json, Value};

use super::*;

const PORTS: [u16; 3] = [7101, 7102, 7103];

/// The sink test moves a slot between masters: the tests here run one at a time.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

fn prefix(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("ferry-cluster-test:{test}:{}:{nanos}:", std::process::id())
}

fn cluster() -> ClusterConnection {
    redis::cluster::ClusterClient::new(vec!["redis://:SeaTunnel@127.0.0.1:7101/"])
        .unwrap()
        .get_connection()
        .expect("the Redis cluster on 127.0.0.1:7101-7103 (scripts/test-services forms it)")
}

/// A plain connection to one node (no redirections followed).
fn node(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://:SeaTunnel@127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// How many of the keys matching `pattern` each master holds.
fn per_master(pattern: &str) -> Vec<usize> {
    PORTS
        .iter()
        .map(|p| {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(pattern)
                .query(&mut node(*p))
                .unwrap();
            keys.len()
        })
        .collect()
}

fn cleanup(prefix: &str) {
    for p in PORTS {
        let mut c = node(p);
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query(&mut c)
            .unwrap();
        for k in keys {
            let _: () = redis::cmd("DEL").arg(k).query(&mut c).unwrap();
        }
    }
}

fn options(extra: Value) -> Value {
    // One seed node: the client finds the other masters from it.
    let mut o = json!({"mode": "CLUSTER", "nodes": ["127.0.0.1:7102"], "auth": "SeaTunnel", "batch_size": 7});
    if let (Value::Object(o), Value::Object(e)) = (&mut o, extra) {
        o.extend(e);
    }
    o
}

fn source(extra: Value) -> Result<Box<dyn Source>> {
    RedisSourceFactory.create(
        &mut Options::from_json(NAME, options(extra)),
        &job(JobMode::Batch),
    )
}

fn contents(batches: &[ChangeBatch]) -> Vec<String> {
    let mut out: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            let c = b
                .data
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            (0..c.len())
                .map(|i| c.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_cluster_source_scans_every_master_and_a_restored_scan_reads_each_value_once() {
    let _one = lock();
    let p = prefix("scan");
    let mut c = cluster();
    let mut want = BTreeMap::<&str, Vec<String>>::new();
    for i in 0..150 {
        let _: () = redis::cmd("SET")
            .arg(format!("{p}s{i}"))
            .arg(format!("v{i}"))
            .query(&mut c)
            .unwrap();
        want.entry("string").or_default().push(format!("v{i}"));
    }
    for i in 0..20 {
        for j in 0..2 {
            let v = format!("l{i}-{j}");
            let _: () = redis::cmd("RPUSH")
                .arg(format!("{p}l{i}"))
                .arg(&v)
                .query(&mut c)
                .unwrap();
            want.entry("list").or_default().push(v);
        }
        let _: () = redis::cmd("HSET")
            .arg(format!("{p}h{i}"))
            .arg("n")
            .arg(i)
            .query(&mut c)
            .unwrap();
        want.entry("hash")
            .or_default()
            .push(json!({"n": i.to_string(), "hash_key": format!("{p}h{i}")}).to_string());
    }
    // The keys are spread over all three masters, so a scan of one node would miss some.
    let spread = per_master(&format!("{p}*"));
    assert!(spread.iter().all(|n| *n > 0), "{spread:?}");
    for (ty, values) in &mut want {
        values.sort();
        let src = source(json!({"keys": format!("{p}*"), "data_type": ty})).unwrap();
        let whole = read_all(&*src, 1, job(JobMode::Batch)).unwrap();
        let got = contents(&whole);
        if *ty == "hash" {
            let parse = |v: &[String]| -> Vec<Value> {
                let mut v: Vec<Value> =
                    v.iter().map(|s| serde_json::from_str(s).unwrap()).collect();
                v.sort_by_key(|v| v.to_string());
                v
            };
            assert_eq!(parse(&got), parse(values), "{ty}");
            continue;
        }
        assert_eq!(&got, values, "{ty}");
        // Restored before, inside and after the first master's part and at the end.
        for at in [0, 1, 13, 60, values.len()] {
            let whole = check_source_restore(&*src, 2, job(JobMode::Batch), at)
                .unwrap_or_else(|e| panic!("{ty} restored after {at} rows: {e}"));
            assert_eq!(&contents(&whole), values, "{ty} restored after {at} rows");
        }
        check_source_replay(&*src, 1, job(JobMode::Batch), 9).unwrap();
    }
    cleanup(&p);
}

#[test]
fn cluster_options_are_checked() {
    let err = |o: Value| source(o).unwrap_err().to_string();
    let e = err(json!({"keys": "x", "data_type": "key", "nodes": ["127.0.0.1"]}));
    assert!(e.contains("nodes") && e.contains("host:port"), "{e}");
    let e = err(json!({"keys": "x", "data_type": "key", "db_num": 2}));
    assert!(e.contains("db_num"), "{e}");
    let e = err(json!({"keys": "x", "data_type": "key", "nodes": []}));
    assert!(e.contains("nodes"), "{e}");
    // Single mode wants a host and no nodes.
    let single = |o: Value| {
        RedisSourceFactory
            .create(&mut Options::from_json(NAME, o), &job(JobMode::Batch))
            .unwrap_err()
            .to_string()
    };
    let e = single(json!({"keys": "x", "data_type": "key"}));
    assert!(e.contains("host"), "{e}");
    let e = single(json!({"host": "h", "keys": "x", "data_type": "key", "nodes": ["h:1"]}));
    assert!(e.contains("mode = cluster"), "{e}");
    // A wrong password is reported with the nodes, never itself.
    let src = source(json!({"keys": "x", "data_type": "key", "auth": "wrong-pw"})).unwrap();
    let e = read_all(&*src, 1, job(JobMode::Batch))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("127.0.0.1:7102") && !e.contains("wrong-pw"),
        "{e}"
    );
}

/// The id of the master on `port`.
fn node_id(port: u16) -> String {
    let id: String = redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node(port))
        .unwrap();
    id
}

/// The port of the master serving `slot`.
fn owner(slot: i64) -> u16 {
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut node(PORTS[0]))
        .unwrap();
    for line in nodes.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        for range in &f[8..] {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            if let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>()) {
                if (a..=b).contains(&slot) {
                    let addr = f[1].split('@').next().unwrap();
                    return addr.rsplit_once(':').unwrap().1.parse().unwrap();
                }
            }
        }
    }
    panic!("no master serves slot {slot}");
}

/// Starts moving `slot` from `from` to `to` (importing / migrating) and migrates `keys`.
fn start_move(slot: i64, from: u16, to: u16, keys: &[String]) {
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("IMPORTING")
        .arg(node_id(from))
        .query(&mut node(to))
        .unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("MIGRATING")
        .arg(node_id(to))
        .query(&mut node(from))
        .unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(to)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("AUTH")
            .arg("SeaTunnel")
            .arg("KEYS")
            .arg(keys)
            .query(&mut node(from))
            .unwrap();
    }
}

/// Migrates the rest of `slot`'s keys and gives it to `to` on every master.
fn finish_move(slot: i64, from: u16, to: u16) {
    let keys: Vec<String> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(1000)
        .query(&mut node(from))
        .unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(to)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("AUTH")
            .arg("SeaTunnel")
            .arg("KEYS")
            .arg(keys)
            .query(&mut node(from))
            .unwrap();
    }
    let id = node_id(to);
    for p in [to, from] {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("NODE")
            .arg(&id)
            .query(&mut node(p))
            .unwrap();
    }
    for p in PORTS {
        if p != to && p != from {
            let _: () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(&id)
                .query(&mut node(p))
                .unwrap();
        }
    }
}

/// Gives `slot` back to the master on `home` when dropped, also when the test fails, so
/// that the cluster stays as `scripts/test-services` formed it.
struct SlotHome {
    slot: i64,
    home: u16,
}

impl Drop for SlotHome {
    fn drop(&mut self) {
        for p in PORTS {
            let _: redis::RedisResult<()> = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(self.slot)
                .arg("STABLE")
                .query(&mut node(p));
        }
        let now = owner(self.slot);
        if now != self.home {
            finish_move(self.slot, now, self.home);
        }
    }
}

/// Rows (id, name) whose names are the keys `{p}k{id}`, with a value column.
fn rows(p: &str, ids: &[i64], value: &str) -> ChangeBatch {
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
        arrow::datatypes::Field::new("name", arrow::datatypes::DataType::Utf8, false),
        arrow::datatypes::Field::new("v", arrow::datatypes::DataType::Utf8, false),
    ]));
    ChangeBatch::inserts(
        "t".into(),
        RecordBatch::try_new(
            schema,
            vec![
                std::sync::Arc::new(Int64Array::from(ids.to_vec())),
                std::sync::Arc::new(StringArray::from(
                    ids.iter().map(|i| format!("{p}k{i}")).collect::<Vec<_>>(),
                )),
                std::sync::Arc::new(StringArray::from(vec![value; ids.len()])),
            ],
        )
        .unwrap(),
    )
}

#[test]
fn a_cluster_sink_writes_keys_to_their_slots_masters_through_ask_and_moved() {
    let _one = lock();
    let p = prefix("sink");
    let table = ferry_api::TableSchema::new("t", rows(&p, &[0], "a").data.schema());
    let s: std::sync::Arc<dyn Sink> = RedisSinkFactory
        .create(
            &mut Options::from_json(
                NAME,
                options(json!({"key": "name", "data_type": "string", "batch_size": 10})),
            ),
            std::slice::from_ref(&table),
            &job(JobMode::Batch),
        )
        .unwrap();
    let ids: Vec<i64> = (0..60).collect();
    let mut d = ferry_connector_testkit::SinkDriver::start(s, 1, job(JobMode::Batch)).unwrap();
    d.write_all(&[rows(&p, &ids, "first")]).unwrap();
    d.checkpoint().unwrap();
    let spread = per_master(&format!("{p}*"));
    assert_eq!(spread.iter().sum::<usize>(), 60);
    assert!(spread.iter().all(|n| *n > 0), "{spread:?}");

    // Key k0's slot starts moving to another master; k0 itself is moved already, so its
    // old master answers ASK for it (the writer's slot map still names the old one).
    let k0 = format!("{p}k0");
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(&k0)
        .query(&mut node(PORTS[0]))
        .unwrap();
    let from = owner(slot);
    let to = *PORTS.iter().find(|p| **p != from).unwrap();
    let _home = SlotHome { slot, home: from };
    start_move(slot, from, to, std::slice::from_ref(&k0));
    d.write_all(&[rows(&p, &[0], "asked")]).unwrap();
    d.checkpoint().unwrap();
    // The importing master answers for the slot only after ASKING.
    let mut importing = node(to);
    let _: () = redis::cmd("ASKING").query(&mut importing).unwrap();
    let on_new: Option<String> = redis::cmd("GET").arg(&k0).query(&mut importing).unwrap();
    assert!(
        on_new.is_some_and(|v| v.contains("asked")),
        "k0 on its new master"
    );

    // The move completes: the old master answers MOVED, and the writer follows.
    finish_move(slot, from, to);
    let moved = redis::cmd("GET")
        .arg(&k0)
        .query::<Option<String>>(&mut node(from));
    assert!(
        moved
            .as_ref()
            .is_err_and(|e| e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Moved)),
        "{moved:?}"
    );
    d.write_all(&[rows(&p, &[0, 1, 2], "moved")]).unwrap();
    d.finish().unwrap();

    let mut c = cluster();
    for i in ids {
        let v: String = redis::cmd("GET")
            .arg(format!("{p}k{i}"))
            .query(&mut c)
            .unwrap();
        let v: Value = serde_json::from_str(&v).unwrap();
        let want = if i < 3 { "moved" } else { "first" };
        assert_eq!(v["v"], want, "k{i}");
        assert_eq!(v["id"], i);
    }
    cleanup(&p);
    // `_home` gives the slot back to its master.
}

#[test]
fn masters_serving_slots_are_read_from_cluster_nodes() {
    let nodes = "\
a1 10.0.0.2:7002@17002,host-b master - 0 1 2 connected 5461-10922
a2 10.0.0.1:7001@17001 myself,master - 0 1 1 connected 0-5460
a3 10.0.0.3:7003@17003 slave a1 0 1 2 connected
a4 10.0.0.4:7004@17004 master,fail - 0 1 4 disconnected 10923-16383
a5 10.0.0.5:7005@17005 master - 0 1 5 connected
a6 :0@0 master,noaddr - 0 1 6 disconnected 1-2
";
    assert_eq!(
        cluster_masters(nodes),
        vec!["10.0.0.1:7001".to_string(), "10.0.0.2:7002".to_string()]
    );
}
