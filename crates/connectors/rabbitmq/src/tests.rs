//! Against the RabbitMQ broker the machine runs (127.0.0.1:5672, guest/guest), each test on
//! its own queue, deleted at the end.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use ferry_api::{
    ChangeBatch, JobMode, Options, Result, Sink, SinkDelivery, SinkFactory, Source, SourceFactory,
    TableSchema,
};
use ferry_connector_testkit::{
    block_on, check_sink, check_source_replay, check_source_restore, ids, job, read_all, rows,
    unique_name, SourceDriver,
};
use lapin::options::{BasicGetOptions, BasicPublishOptions, QueueDeleteOptions};
use lapin::BasicProperties;
use serde_json::{json, Value};

use super::*;

fn options(queue: &str, extra: Value) -> Value {
    let mut o = json!({
        "host": "127.0.0.1", "port": 5672, "virtual_host": "/",
        "username": "guest", "password": "guest", "queue_name": queue,
        "durable": "false", "exclusive": "false", "auto_delete": "false",
        "schema": {"fields": {"id": "bigint", "name": "string"}},
    });
    if let (Value::Object(o), Value::Object(e)) = (&mut o, extra) {
        o.extend(e);
    }
    o
}

fn broker(queue: &str) -> Broker {
    let mut o = Options::from_json(NAME, options(queue, json!({})));
    Broker::read(&mut o).unwrap()
}

fn source(queue: &str, mode: JobMode, extra: Value) -> Result<Box<dyn Source>> {
    RabbitmqSourceFactory.create(
        &mut Options::from_json(NAME, options(queue, extra)),
        &job(mode),
    )
}

/// Publishes rows `ids` as JSON, each with its id as correlation id.
fn publish(queue: &str, ids: std::ops::Range<i64>) {
    let b = broker(queue);
    block_on(async {
        let (conn, channel, _) = b.open(None).await.unwrap();
        for id in ids {
            let body = json!({"id": id, "name": format!("row {id}")}).to_string();
            channel
                .basic_publish(
                    "".into(),
                    queue.into(),
                    BasicPublishOptions::default(),
                    body.as_bytes(),
                    BasicProperties::default().with_correlation_id(format!("m{id}").into()),
                )
                .await
                .unwrap()
                .await
                .unwrap();
        }
        let _ = conn.close(200, "OK".into()).await;
    });
}

/// The messages in the queue now, left there: read without acknowledgement, then the
/// connection closes and the broker puts them back.
fn peek(queue: &str) -> Vec<Value> {
    let b = broker(queue);
    block_on(async {
        let (conn, channel, _) = b.open(None).await.unwrap();
        let mut out = Vec::new();
        while let Some(m) = channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: false })
            .await
            .unwrap()
        {
            out.push(serde_json::from_slice(&m.delivery.data).unwrap());
        }
        let _ = conn.close(200, "OK".into()).await;
        out
    })
}

/// The queue's ready messages, waiting briefly for deliveries another connection held to
/// be put back.
fn ready(queue: &str, expect: u32) -> u32 {
    let b = broker(queue);
    let mut n = 0;
    for _ in 0..50 {
        n = block_on(async {
            let (conn, _, n) = b.open(None).await.unwrap();
            let _ = conn.close(200, "OK".into()).await;
            n
        });
        if n == expect {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    n
}

fn delete(queue: &str) {
    let b = broker(queue);
    block_on(async {
        let (conn, channel, _) = b.open(None).await.unwrap();
        channel
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await
            .unwrap();
        let _ = conn.close(200, "OK".into()).await;
    });
}

#[test]
fn deliveries_are_acknowledged_only_when_their_checkpoint_completes() {
    let q = unique_name("ack");
    publish(&q, 0..30);
    let src = source(&q, JobMode::Streaming, json!({})).unwrap();
    let mut d = SourceDriver::start(&*src, 1, job(JobMode::Streaming)).unwrap();
    d.run_until(30).unwrap();
    assert_eq!(ids(d.output()), (0..30).collect::<Vec<_>>());
    let cp = d.snapshot().unwrap();
    // Read and checkpointed, but the checkpoint never completed: a crash gives them back.
    drop(d);
    assert_eq!(ready(&q, 30), 30);

    let mut d = SourceDriver::start(&*src, 1, job(JobMode::Streaming)).unwrap();
    d.run_until(30).unwrap();
    let first = d.snapshot().unwrap();
    d.complete(first.checkpoint_id).unwrap();
    drop(d);
    assert_eq!(
        ready(&q, 0),
        0,
        "acknowledged after checkpoint {}",
        cp.checkpoint_id
    );
    delete(&q);
}

#[test]
fn a_bounded_read_takes_the_messages_present_and_resumes_exactly_with_correlation_ids() {
    let q = unique_name("restore");
    publish(&q, 0..200);
    let src = source(
        &q,
        JobMode::Batch,
        json!({"use_correlation_id": true, "prefetch_count": 50}),
    )
    .unwrap();
    assert!(src.is_replayable());
    for at in [0, 1, 120, 200] {
        let whole = check_source_restore(&*src, 2, job(JobMode::Batch), at)
            .unwrap_or_else(|e| panic!("restored after {at} rows: {e}"));
        assert_eq!(ids(&whole), (0..200).collect::<Vec<_>>());
    }
    check_source_replay(&*src, 1, job(JobMode::Batch), 77).unwrap();
    // Nothing was acknowledged: every message is still there.
    assert_eq!(ready(&q, 200), 200);
    delete(&q);
}

#[test]
fn without_correlation_ids_the_source_says_it_cannot_replay_and_bad_messages_fail_or_are_skipped() {
    let q = unique_name("format");
    publish(&q, 0..3);
    block_on(async {
        let (conn, channel, _) = broker(&q).open(None).await.unwrap();
        channel
            .basic_publish(
                "".into(),
                q.as_str().into(),
                BasicPublishOptions::default(),
                b"not json",
                BasicProperties::default(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        let _ = conn.close(200, "OK".into()).await;
    });
    let src = source(&q, JobMode::Batch, json!({})).unwrap();
    assert!(!src.is_replayable());
    let err = read_all(&*src, 1, job(JobMode::Batch))
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not decode as json"), "{err}");
    let src = source(
        &q,
        JobMode::Batch,
        json!({"format_error_handle_way": "skip"}),
    )
    .unwrap();
    assert_eq!(
        ids(&read_all(&*src, 1, job(JobMode::Batch)).unwrap()),
        vec![0, 1, 2]
    );
    delete(&q);
}

#[test]
fn errors_name_the_broker_and_queue_but_never_the_password() {
    let q = unique_name("auth");
    let src = source(&q, JobMode::Batch, json!({"password": "s3cret-pw"})).unwrap();
    assert!(!format!("{src:?}").contains("s3cret-pw"));
    let err = read_all(&*src, 1, job(JobMode::Batch))
        .unwrap_err()
        .to_string();
    assert!(err.contains("127.0.0.1:5672"), "{err}");
    assert!(!err.contains("s3cret-pw"), "{err}");
    let err = RabbitmqSourceFactory
        .create(
            &mut Options::from_json(NAME, options(&q, json!({"queue_nam": "x"}))),
            &job(JobMode::Batch),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("queue_nam"), "{err}");
}

fn input() -> (TableSchema, Vec<ChangeBatch>) {
    ferry_connector_testkit::id_name_batches(8, 40, "row")
}

#[test]
fn the_sink_loses_no_row_through_crashes() {
    let q = unique_name("sink");
    let (table, batches) = input();
    let make = || -> Result<Arc<dyn Sink>> {
        let mut o = options(&q, json!({}));
        o.as_object_mut().map(|m| m.remove("schema"));
        RabbitmqSinkFactory.create(
            &mut Options::from_json(NAME, o),
            std::slice::from_ref(&table),
            &job(JobMode::Batch),
        )
    };
    assert_eq!(make().unwrap().delivery(), SinkDelivery::AtLeastOnce);
    let read_back = || -> Result<Vec<ChangeBatch>> {
        let values = peek(&q);
        let refs: Vec<&Value> = values.iter().collect();
        let ids = ferry_api::value::json_to_array(
            &refs.iter().map(|v| &v["id"]).collect::<Vec<_>>(),
            &DataType::Int64,
        )
        .unwrap();
        let names = ferry_api::value::json_to_array(
            &refs.iter().map(|v| &v["name"]).collect::<Vec<_>>(),
            &DataType::Utf8,
        )
        .unwrap();
        Ok(vec![ChangeBatch::inserts(
            "t".into(),
            RecordBatch::try_new(table.schema.clone(), vec![ids, names])?,
        )])
    };
    check_sink(
        SinkDelivery::AtLeastOnce,
        &make,
        2,
        job(JobMode::Batch),
        &batches,
        &read_back,
    )
    .unwrap();
    // What the sink wrote reads back through the source, row for row.
    let src = source(
        &q,
        JobMode::Batch,
        json!({"schema": {"table": "t", "fields": {"id": "bigint", "name": "string"}}}),
    )
    .unwrap();
    let mut got = rows(&read_all(&*src, 1, job(JobMode::Batch)).unwrap());
    got.dedup();
    assert_eq!(got, rows(&batches));
    delete(&q);
}

#[test]
fn the_option_lists_name_no_option_twice_and_every_default_fits_its_kind() {
    use ferry_api::{SinkFactory as _, SourceFactory as _};
    ferry_api::declare::check_specs(crate::RabbitmqSourceFactory.options(), &[]).unwrap();
    ferry_api::declare::check_specs(crate::RabbitmqSinkFactory.options(), &[]).unwrap();
}
