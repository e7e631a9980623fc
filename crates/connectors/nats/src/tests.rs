//! Against the NATS server with JetStream the machine runs (127.0.0.1:4222), each test on
//! a memory stream of its own, deleted at the end.

use std::sync::Arc;

use ferry_api::{
    ChangeBatch, JobMode, Options, Result, Sink, SinkDelivery, SinkFactory, Source, SourceFactory,
    TableSchema,
};
use ferry_connector_testkit::{
    block_on, check_sink, check_source_replay, check_source_restore, ids, job, read_all, rows,
    unique_name, SourceDriver,
};
use serde_json::{json, Value};

use super::client::Client;
use super::*;

fn server() -> Server {
    Server::read(&mut Options::from_json(
        NAME,
        json!({"servers": "nats://127.0.0.1:4222"}),
    ))
    .unwrap()
}

/// A memory stream `name` on subjects `name.>`.
fn create_stream(name: &str) {
    block_on(async {
        let mut c = Client::connect(&server()).await.unwrap();
        c.request(
            &format!("$JS.API.STREAM.CREATE.{name}"),
            &json!({"name": name, "subjects": [format!("{name}.>")], "storage": "memory"}),
        )
        .await
        .unwrap();
    });
}

fn delete_stream(name: &str) {
    block_on(async {
        let mut c = Client::connect(&server()).await.unwrap();
        c.request(&format!("$JS.API.STREAM.DELETE.{name}"), &Value::Null)
            .await
            .unwrap();
    });
}

fn stream_info(name: &str) -> Value {
    block_on(async {
        let mut c = Client::connect(&server()).await.unwrap();
        c.request(&format!("$JS.API.STREAM.INFO.{name}"), &Value::Null)
            .await
            .unwrap()
    })
}

/// Publishes rows `ids` on `subject`, each acknowledged by the stream.
fn publish(subject: &str, ids: std::ops::Range<i64>) {
    block_on(async {
        let mut c = Client::connect(&server()).await.unwrap();
        for id in ids {
            let body = json!({"id": id, "name": format!("row {id}")}).to_string();
            let reply = c.new_reply();
            let mut out = Vec::new();
            Client::encode_publish(&mut out, subject, Some(&reply), &[], body.as_bytes());
            c.flush(&out).await.unwrap();
            loop {
                if c.next_msg().await.unwrap().subject == reply {
                    break;
                }
            }
        }
    });
}

fn source(stream: &str, durable: &str, mode: JobMode, extra: Value) -> Result<Box<dyn Source>> {
    let mut o = json!({
        "servers": "nats://127.0.0.1:4222", "stream": stream, "durable_name": durable,
        "batch_size": 16, "schema": {"fields": {"id": "bigint", "name": "string"}},
    });
    if let (Value::Object(o), Value::Object(e)) = (&mut o, extra) {
        o.extend(e);
    }
    NatsSourceFactory.create(&mut Options::from_json(NAME, o), &job(mode))
}

#[test]
fn a_bounded_read_resumes_exactly_at_its_stream_sequence() {
    let s = unique_name("restore");
    create_stream(&s);
    publish(&format!("{s}.a"), 0..100);
    publish(&format!("{s}.b"), 100..120);
    let src = source(&s, "reader", JobMode::Batch, json!({})).unwrap();
    assert!(src.is_replayable());
    for at in [0, 1, 50, 119, 120] {
        let whole = check_source_restore(&*src, 2, job(JobMode::Batch), at)
            .unwrap_or_else(|e| panic!("restored after {at} rows: {e}"));
        assert_eq!(ids(&whole), (0..120).collect::<Vec<_>>());
    }
    check_source_replay(&*src, 1, job(JobMode::Batch), 33).unwrap();
    // A subject filter reads only its messages.
    let src = source(
        &s,
        "only_b",
        JobMode::Batch,
        json!({"subject": format!("{s}.b")}),
    )
    .unwrap();
    assert_eq!(
        ids(&read_all(&*src, 1, job(JobMode::Batch)).unwrap()),
        (100..120).collect::<Vec<_>>()
    );
    delete_stream(&s);
}

#[test]
fn the_consumer_is_acknowledged_only_up_to_completed_checkpoints() {
    let s = unique_name("ack");
    create_stream(&s);
    publish(&format!("{s}.a"), 0..30);
    let src = source(&s, "acks", JobMode::Streaming, json!({})).unwrap();
    let mut d = SourceDriver::start(&*src, 1, job(JobMode::Streaming)).unwrap();
    d.run_until(30).unwrap();
    let cp = d.snapshot().unwrap();
    let floor = || {
        block_on(async {
            let mut c = Client::connect(&server()).await.unwrap();
            c.request(&format!("$JS.API.CONSUMER.INFO.{s}.acks"), &Value::Null)
                .await
                .unwrap()["ack_floor"]["stream_seq"]
                .as_u64()
                .unwrap_or(0)
        })
    };
    assert_eq!(
        floor(),
        0,
        "nothing is acknowledged before the checkpoint completes"
    );
    d.complete(cp.checkpoint_id).unwrap();
    let mut acked = 0;
    for _ in 0..100 {
        acked = floor();
        if acked == 30 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(acked, 30);
    drop(d);
    // A fresh job on the same durable consumer starts after its ack floor.
    publish(&format!("{s}.a"), 30..35);
    let mut d = SourceDriver::start(&*src, 1, job(JobMode::Streaming)).unwrap();
    d.run_until(5).unwrap();
    assert_eq!(ids(d.output()), (30..35).collect::<Vec<_>>());
    drop(d);
    delete_stream(&s);
}

fn input() -> (TableSchema, Vec<ChangeBatch>) {
    ferry_connector_testkit::id_name_batches(8, 25, "row")
}

#[test]
fn the_sink_s_message_ids_make_replays_after_crashes_disappear() {
    let s = unique_name("sink");
    create_stream(&s);
    let (table, batches) = input();
    let subject = format!("{s}.out");
    let make = || -> Result<Arc<dyn Sink>> {
        NatsSinkFactory.create(
            &mut Options::from_json(
                NAME,
                json!({"servers": "nats://127.0.0.1:4222", "subject": subject}),
            ),
            std::slice::from_ref(&table),
            &job(JobMode::Batch),
        )
    };
    assert_eq!(make().unwrap().delivery(), SinkDelivery::ExactlyOnce);
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let read_back = || -> Result<Vec<ChangeBatch>> {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let src = source(
            &s,
            &format!("check{n}"),
            JobMode::Batch,
            json!({"schema": {"table": "t", "fields": {"id": "bigint", "name": "string"}}}),
        )?;
        read_all(&*src, 1, job(JobMode::Batch))
    };
    // Rows written and never prepared are visible (publishing cannot be undone), so the
    // check is at-least-once; the replays' duplicate ids leave each row once in the end.
    check_sink(
        SinkDelivery::AtLeastOnce,
        &make,
        2,
        job(JobMode::Batch),
        &batches,
        &read_back,
    )
    .unwrap();
    assert_eq!(rows(&read_back().unwrap()), rows(&batches));
    assert_eq!(stream_info(&s)["state"]["messages"].as_u64(), Some(200));
    delete_stream(&s);
}

#[test]
fn options_are_checked_and_secrets_stay_out_of_messages() {
    let err = source("a.b", "d", JobMode::Batch, json!({}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("stream"), "{err}");
    let src = source(
        "ferry_missing_stream",
        "d",
        JobMode::Batch,
        json!({"servers": "nats://someone:s3cret-pw@127.0.0.1:4222"}),
    )
    .unwrap();
    assert!(!format!("{src:?}").contains("s3cret-pw"));
    let err = read_all(&*src, 1, job(JobMode::Batch))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("127.0.0.1:4222") && !err.contains("s3cret-pw"),
        "{err}"
    );
}

#[test]
fn the_option_lists_name_no_option_twice_and_every_default_fits_its_kind() {
    use ferry_api::{SinkFactory as _, SourceFactory as _};
    ferry_api::declare::check_specs(crate::NatsSourceFactory.options(), &[]).unwrap();
    ferry_api::declare::check_specs(crate::NatsSinkFactory.options(), &[]).unwrap();
}
