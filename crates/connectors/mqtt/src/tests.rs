//! Against the Mosquitto broker the machine runs (127.0.0.1:1883), each test on topics and
//! client ids of its own.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use ferry_api::{
    ChangeBatch, JobMode, Options, Result, Sink, SinkDelivery, SinkFactory, Source, SourceFactory,
    TableSchema,
};
use ferry_connector_testkit::{block_on, check_sink, ids, job, rows, unique_name, SourceDriver};
use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use serde_json::{json, Value};

use super::*;

/// Connects as `client_id` with a persistent session, subscribes to `topic` and leaves:
/// the broker queues the topic's messages for the session from now on.
fn create_session(client_id: &str, topic: &str) {
    block_on(async {
        let mut o = MqttOptions::new(client_id, "127.0.0.1", 1883);
        o.set_clean_start(false)
            .set_session_expiry_interval(Some(600));
        let (c, mut ev) = AsyncClient::new(o, 16);
        c.subscribe(topic, QoS::AtLeastOnce).await.unwrap();
        loop {
            if let Event::Incoming(Packet::SubAck(_)) = ev.poll().await.unwrap() {
                break;
            }
        }
        disconnect(&c, &mut ev).await;
    });
}

/// Disconnects cleanly: drives the event loop until the DISCONNECT has gone out.
async fn disconnect(c: &AsyncClient, ev: &mut rumqttc::v5::EventLoop) {
    c.disconnect().await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            match ev.poll().await {
                Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect)) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// Publishes rows `ids` with QoS 1 and waits for the broker's acknowledgements.
fn publish(topic: &str, ids: std::ops::Range<i64>) {
    block_on(async {
        let o = MqttOptions::new(unique_name("pub"), "127.0.0.1", 1883);
        let (c, mut ev) = AsyncClient::new(o, 1024);
        let n = ids.end - ids.start;
        for id in ids {
            let body = json!({"id": id, "name": format!("row {id}")}).to_string();
            c.publish(topic, QoS::AtLeastOnce, false, body)
                .await
                .unwrap();
        }
        let mut acked = 0;
        while acked < n {
            if let Event::Incoming(Packet::PubAck(_)) = ev.poll().await.unwrap() {
                acked += 1;
            }
        }
        disconnect(&c, &mut ev).await;
    });
}

fn source(topic: &str, client_id: &str) -> Result<Box<dyn Source>> {
    MqttSourceFactory.create(
        &mut Options::from_json(
            NAME,
            json!({
                "host": "127.0.0.1", "port": 1883, "topic": topic, "client_id": client_id,
                "session_expiry_interval": 600,
                "schema": {"fields": {"id": "bigint", "name": "string"}},
            }),
        ),
        &job(JobMode::Streaming),
    )
}

/// The ids read, each once.
fn distinct_ids(batches: &[ChangeBatch]) -> Vec<i64> {
    let mut out = ids(batches);
    out.dedup();
    out
}

/// Steps `d` for `time`, however many rows come.
fn run_for(d: &mut SourceDriver, time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        d.step().unwrap();
    }
}

#[test]
fn unacknowledged_messages_come_again_after_a_crash_and_acknowledged_ones_do_not() {
    let topic = unique_name("src");
    let client = unique_name("session");
    create_session(&client, &topic);
    publish(&topic, 0..20);
    let src = source(&topic, &client).unwrap();
    assert!(!src.is_replayable());
    let mut d = SourceDriver::start(&*src, 1, job(JobMode::Streaming)).unwrap();
    d.run_until(20).unwrap();
    let cp1 = d.snapshot().unwrap();
    d.complete(cp1.checkpoint_id).unwrap();
    publish(&topic, 20..30);
    d.run_until(30).unwrap();
    assert_eq!(distinct_ids(d.output()), (0..30).collect::<Vec<_>>());
    let cp2 = d.snapshot().unwrap();
    // Give the acknowledgements of checkpoint 1 time to leave, then crash before
    // checkpoint 2 completes.
    run_for(&mut d, Duration::from_millis(300));
    drop(d);

    let mut d = SourceDriver::restore(&*src, 1, job(JobMode::Streaming), &cp2).unwrap();
    d.run_until(10).unwrap();
    run_for(&mut d, Duration::from_millis(300));
    assert_eq!(distinct_ids(d.output()), (20..30).collect::<Vec<_>>());
    let cp3 = d.snapshot().unwrap();
    d.complete(cp3.checkpoint_id).unwrap();
    run_for(&mut d, Duration::from_millis(300));
    drop(d);

    let mut d = SourceDriver::restore(&*src, 1, job(JobMode::Streaming), &cp3).unwrap();
    run_for(&mut d, Duration::from_millis(500));
    assert_eq!(
        d.rows_read(),
        0,
        "acknowledged messages were delivered again"
    );
    drop(d);
}

#[test]
fn a_batch_job_is_refused_with_a_reason() {
    let err = MqttSourceFactory
        .create(
            &mut Options::from_json(
                NAME,
                json!({"host": "127.0.0.1", "topic": "t", "client_id": "c",
                       "schema": {"fields": {"id": "bigint"}}}),
            ),
            &job(JobMode::Batch),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("STREAMING"), "{err}");
}

#[test]
fn the_sink_loses_no_row_through_crashes() {
    let topic = unique_name("sink");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let table = TableSchema::new("t", schema.clone());
    let batches: Vec<ChangeBatch> = (0..8)
        .map(|b| {
            let ids: Vec<i64> = (b * 25..(b + 1) * 25).collect();
            let names: Vec<String> = ids.iter().map(|i| format!("row {i}")).collect();
            let data = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(ids)),
                    Arc::new(StringArray::from(names)),
                ],
            )
            .unwrap();
            ChangeBatch::inserts("t".into(), data)
        })
        .collect();
    // A subscriber that collects everything published on the topic.
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let (c, mut ev) = AsyncClient::new(
        MqttOptions::new(unique_name("sub"), "127.0.0.1", 1883),
        1024,
    );
    let (seen2, topic2) = (seen.clone(), topic.clone());
    let (subscribed_tx, subscribed) = std::sync::mpsc::channel();
    let task = ferry_api::io::runtime().unwrap().spawn(async move {
        if c.subscribe(topic2, QoS::AtLeastOnce).await.is_err() {
            return;
        }
        while let Ok(e) = ev.poll().await {
            match e {
                Event::Incoming(Packet::SubAck(_)) => {
                    let _ = subscribed_tx.send(());
                }
                Event::Incoming(Packet::Publish(p)) => {
                    if let Ok(v) = serde_json::from_slice(&p.payload) {
                        seen2.lock().unwrap().push(v);
                    }
                }
                _ => {}
            }
        }
    });
    subscribed.recv_timeout(Duration::from_secs(10)).unwrap();
    let make = || -> Result<Arc<dyn Sink>> {
        MqttSinkFactory.create(
            &mut Options::from_json(NAME, json!({"host": "127.0.0.1", "topic": topic})),
            std::slice::from_ref(&table),
            &job(JobMode::Batch),
        )
    };
    assert_eq!(make().unwrap().delivery(), SinkDelivery::AtLeastOnce);
    let read_back = || -> Result<Vec<ChangeBatch>> {
        // Published messages reach the subscriber a moment after the broker acknowledged
        // them: wait until no more come.
        let mut n = usize::MAX;
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = seen.lock().unwrap().len();
            if now == n {
                break;
            }
            n = now;
        }
        let values = seen.lock().unwrap().clone();
        let col = |k: &str, t: &DataType| {
            ferry_api::value::json_to_array(&values.iter().map(|v| &v[k]).collect::<Vec<_>>(), t)
                .unwrap()
        };
        Ok(vec![ChangeBatch::inserts(
            "t".into(),
            RecordBatch::try_new(
                schema.clone(),
                vec![col("id", &DataType::Int64), col("name", &DataType::Utf8)],
            )?,
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
    let mut got = rows(&read_back().unwrap());
    got.dedup();
    assert_eq!(got, rows(&batches));
    task.abort();
}

#[test]
fn the_option_lists_name_no_option_twice_and_every_default_fits_its_kind() {
    use ferry_api::{SinkFactory as _, SourceFactory as _};
    ferry_api::declare::check_specs(crate::MqttSourceFactory.options(), &[]).unwrap();
    ferry_api::declare::check_specs(crate::MqttSinkFactory.options(), &[]).unwrap();
}
