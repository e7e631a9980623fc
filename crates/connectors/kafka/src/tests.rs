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
    check_sink, check_source_replay, check_source_restore, job, read_all, rows, SourceDriver,
};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;
use serde_json::{json, Value};

use super::*;

const SERVERS: &str = "127.0.0.1:9092";

/// A topic name no other test (or earlier run) uses, created with `partitions`.
fn topic(test: &str, partitions: i32) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let name = format!("ferry-test-{test}-{}-{nanos}", std::process::id());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", SERVERS)
        .create()
        .unwrap();
    let new = NewTopic::new(&name, partitions, TopicReplication::Fixed(1));
    let done = ferry_api::io::handle()
        .unwrap()
        .block_on(admin.create_topics([&new], &AdminOptions::new()))
        .unwrap();
    for r in done {
        r.unwrap();
    }
    name
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

fn read_topic(topic: &str) -> Result<Vec<ChangeBatch>> {
    let s = source(topic, JobMode::Batch, json!({"start_mode": "earliest"}))?;
    read_all(s.as_ref(), 1, job(JobMode::Batch))
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
            &|| read_topic(&t),
        )
        .unwrap();
    }
}

#[test]
fn sink_exactly_once_commits_a_transaction_per_checkpoint() {
    let t = topic("sink-eo", 2);
    let prefix = format!("{t}-txn");
    let make = || {
        sink(
            &t,
            json!({"semantics": "EXACTLY_ONCE", "transaction_prefix": prefix}),
        )
    };
    let reason = make().unwrap().delivery_reason().unwrap();
    assert!(reason.contains("transaction"), "{reason}");
    // Every row at least once through the crashes (Tansu's read_committed consumers also
    // see aborted records, so exactly-once visibility cannot be checked on it).
    check_sink(
        SinkDelivery::AtLeastOnce,
        &make,
        2,
        job(JobMode::Batch),
        &input(),
        &|| read_topic(&t),
    )
    .unwrap();
}

#[test]
fn sink_exactly_once_fences_a_stale_writer() {
    let t = topic("sink-fence", 1);
    let s = sink(
        &t,
        json!({"semantics": "EXACTLY_ONCE", "transaction_prefix": format!("{t}-txn")}),
    )
    .unwrap();
    let ctx = WriterContext {
        subtask: 0,
        parallelism: 1,
        job: job(JobMode::Streaming),
        attempt: "a".into(),
    };
    let mut old = s.create_writer(&ctx, None).unwrap();
    old.write(&batch(&[1, 2])).unwrap();
    // A restarted writer with the same transactional.id fences the old one.
    let mut new = s.create_writer(&ctx, None).unwrap();
    assert!(old.prepare_commit(1).is_err());
    new.write(&batch(&[3])).unwrap();
    new.prepare_commit(1).unwrap();
    new.close().unwrap();
    let got = ids_of(&read_topic(&t).unwrap());
    assert!(got.contains(&3), "{got:?}");
}

#[test]
fn sink_partition_and_text_format() {
    let t = topic("sink-text", 3);
    let s = sink(
        &t,
        json!({"format": "text", "field_delimiter": "|", "partition": 2}),
    )
    .unwrap();
    let ctx = WriterContext {
        subtask: 0,
        parallelism: 1,
        job: job(JobMode::Batch),
        attempt: "a".into(),
    };
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
