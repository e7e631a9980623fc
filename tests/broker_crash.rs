//! Crash tests for the replayable broker sources: a streaming job reads ids from NATS
//! JetStream, Kafka (on Spark; the embedded engine's is in tests/kafka.rs) or RabbitMQ
//! (with correlation ids) into the transactional file sink,
//! the test publishes more while it kills the job with SIGKILL at random moments (fixed
//! seed) and restarts it under the same job id. At the end every id is in the output
//! exactly once.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{eventually, output_ids, wait_for, Rng};

fn unique(what: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("ferry_crash_{what}_{}_{nanos}", std::process::id())
}

/// A blocking NATS connection for the test's own publishing and stream management.
struct Nats {
    read: BufReader<TcpStream>,
    write: TcpStream,
    /// This connection's own reply subject: tests run in parallel, and a shared one
    /// would hand one test the replies meant for another.
    inbox: String,
}

impl Nats {
    fn connect() -> Nats {
        let s = TcpStream::connect("127.0.0.1:4222").expect("NATS on 127.0.0.1:4222");
        // One small request at a time: without this, Nagle's algorithm and delayed
        // acknowledgements hold every request back for tens of milliseconds.
        s.set_nodelay(true).unwrap();
        let mut n = Nats {
            read: BufReader::new(s.try_clone().unwrap()),
            write: s,
            inbox: format!("_T.{}", unique("reply")),
        };
        let mut line = String::new();
        n.read.read_line(&mut line).unwrap();
        write!(
            n.write,
            "CONNECT {{\"verbose\":false,\"headers\":true}}\r\nSUB {} 1\r\n",
            n.inbox
        )
        .unwrap();
        n
    }
    /// Publishes and waits for the reply (a JetStream acknowledgement or API answer).
    fn request(&mut self, subject: &str, body: &str) -> String {
        write!(
            self.write,
            "PUB {subject} {} {}\r\n{body}\r\n",
            self.inbox,
            body.len()
        )
        .unwrap();
        loop {
            let mut line = String::new();
            self.read.read_line(&mut line).unwrap();
            if line.starts_with("PING") {
                self.write.write_all(b"PONG\r\n").unwrap();
            } else if line.starts_with("MSG") {
                let n: usize = line.split_whitespace().last().unwrap().parse().unwrap();
                let mut buf = vec![0; n + 2];
                std::io::Read::read_exact(&mut self.read, &mut buf).unwrap();
                return String::from_utf8_lossy(&buf[..n]).to_string();
            }
        }
    }
}

struct Setup {
    _root: tempfile::TempDir,
    output: PathBuf,
    ckpt: PathBuf,
    job: PathBuf,
    published: u64,
}

fn setup(source: &str) -> Setup {
    let root = tempfile::tempdir().unwrap();
    let output = root.path().join("out");
    let job = root.path().join("job.conf");
    std::fs::write(
        &job,
        format!(
            r#"
env {{
  job.name = "broker-crash"
  job.mode = "STREAMING"
  checkpoint.interval = 300
}}
source {{
  {source}
}}
sink {{
  LocalFile {{
    path = "{output}"
    file_format_type = "csv"
    is_enable_transaction = true
  }}
}}
"#,
            output = output.display(),
        ),
    )
    .unwrap();
    Setup {
        ckpt: root.path().join("ckpt"),
        _root: root,
        output,
        job,
        published: 0,
    }
}

/// Micro-batches the Spark engine has planned for the job's first sink so far.
fn spark_batches(s: &Setup) -> usize {
    std::fs::read_dir(s.ckpt.join("crash/query-0/offsets"))
        .map(|rd| rd.flatten().count())
        .unwrap_or(0)
}

/// Kills the job `kills` times at random moments, publishing `publish(n)` batches on the way.
/// On Spark, each run is killed only after it has planned a micro-batch of its own (a
/// session takes seconds to start), then at a random moment of its query.
fn kill_repeatedly(
    s: &mut Setup,
    engine: &str,
    kills: usize,
    seed: u64,
    publish: &mut dyn FnMut(&mut Setup),
) {
    let mut rng = Rng(seed);
    for round in 0..kills {
        let planned = spark_batches(s);
        let mut child = common::start_group(&s.job, engine, "crash", &s.ckpt);
        if engine == "spark" {
            // An upper bound: a Spark session took 60 s to start on a loaded machine.
            let started = eventually(Duration::from_secs(180), || spark_batches(s) > planned);
            assert!(started, "round {round}: no micro-batch started");
        }
        let life = Duration::from_millis(match engine {
            "spark" => rng.between(500, 4000),
            _ => rng.between(400, 1600),
        });
        for _ in 0..3 {
            std::thread::sleep(life / 3);
            if rng.between(0, 2) == 0 {
                publish(s);
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "round {round}: the job ended by itself ({status}): {}",
                common::stderr_of(child)
            );
        }
        common::kill_group(&mut child);
    }
}

fn finish_and_check(s: &Setup, engine: &str) {
    let expected = s.published;
    let mut last = common::start_group(&s.job, engine, "crash", &s.ckpt);
    // Upper bounds, not delays (a Spark session alone may take a minute to start).
    let done = eventually(Duration::from_secs(240), || {
        output_ids(&s.output).len() as u64 >= expected
    });
    common::wait_running("crash", &s.ckpt, engine, Duration::from_secs(180));
    common::request_savepoint("crash", &s.ckpt);
    let status = wait_for(&mut last, Duration::from_secs(60), "job");
    let err = common::stderr_of(last);
    assert!(status.success(), "{err}");
    assert!(
        done,
        "only {} of {expected} ids arrived",
        output_ids(&s.output).len()
    );
    let ids = output_ids(&s.output);
    let missing: Vec<u64> = (0..expected)
        .filter(|i| !ids.contains_key(i))
        .take(10)
        .collect();
    assert!(missing.is_empty(), "lost ids, e.g. {missing:?}");
    let twice: Vec<(&u64, &usize)> = ids.iter().filter(|(_, n)| **n > 1).take(10).collect();
    assert!(
        twice.is_empty(),
        "ids written more than once, e.g. {twice:?}"
    );
    assert_eq!(ids.len() as u64, expected);
}

const BATCH: u64 = 150;

#[test]
fn nats_into_transactional_files_holds_every_id_once_under_ten_kills() {
    nats_under_kills("local", 10);
}

/// The same on Spark: the source's readers start afresh in every micro-batch's task, from
/// the stream sequence the offset log holds.
#[test]
fn nats_into_transactional_files_on_spark_holds_every_id_once_under_three_kills() {
    nats_under_kills("spark", 3);
}

fn nats_under_kills(engine: &str, kills: usize) {
    let stream = unique("nats");
    let mut nats = Nats::connect();
    let created = nats.request(
        &format!("$JS.API.STREAM.CREATE.{stream}"),
        &format!(r#"{{"name":"{stream}","subjects":["{stream}.>"],"storage":"memory"}}"#),
    );
    assert!(
        created.contains("\"did_create\":true") || !created.contains("error"),
        "{created}"
    );
    let mut s = setup(&format!(
        r#"Nats {{
    servers = "nats://127.0.0.1:4222"
    stream = "{stream}"
    durable_name = "crash"
    schema = {{ fields {{ id = bigint, payload = string }} }}
  }}"#
    ));
    let subject = format!("{stream}.in");
    let mut publish = |s: &mut Setup| {
        for i in s.published..s.published + BATCH {
            let ack = nats.request(&subject, &format!(r#"{{"id":{i},"payload":"row-{i}"}}"#));
            assert!(ack.contains("\"seq\""), "{ack}");
        }
        s.published += BATCH;
    };
    for _ in 0..3 {
        publish(&mut s);
    }
    kill_repeatedly(&mut s, engine, kills, 0x5eed_0a75, &mut publish);
    publish(&mut s);
    finish_and_check(&s, engine);
    Nats::connect().request(&format!("$JS.API.STREAM.DELETE.{stream}"), "");
}

/// Kafka on Spark: the readers start afresh in every micro-batch's task at the partition
/// offsets the offset log holds (the embedded engine's ten-kill test is in tests/kafka.rs).
#[test]
fn kafka_into_transactional_files_on_spark_holds_every_id_once_under_three_kills() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::ClientConfig;

    const SERVERS: &str = "127.0.0.1:9092";
    let topic = unique("kafka");
    common::create_kafka_topic(SERVERS, &topic, 3);
    let mut s = setup(&format!(
        r#"Kafka {{
    bootstrap.servers = "{SERVERS}"
    topic = "{topic}"
    start_mode = earliest
    consumer.group = "{topic}"
    schema = {{ fields {{ id = bigint, payload = string }} }}
  }}"#
    ));
    // One record per batch: Tansu's end offsets are right only then (see tests/kafka.rs).
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", SERVERS)
        .set("batch.num.messages", "1")
        .create()
        .unwrap();
    let mut publish = |s: &mut Setup| {
        for i in s.published..s.published + BATCH {
            let body = format!(r#"{{"id":{i},"payload":"row-{i}"}}"#);
            producer
                .send(
                    BaseRecord::<(), str>::to(&topic)
                        .payload(&body)
                        .partition((i % 3) as i32),
                )
                .unwrap();
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(30)).unwrap();
        s.published += BATCH;
    };
    for _ in 0..3 {
        publish(&mut s);
    }
    kill_repeatedly(&mut s, "spark", 3, 0x5eed_4afb, &mut publish);
    publish(&mut s);
    finish_and_check(&s, "spark");
}

#[test]
fn rabbitmq_with_correlation_ids_into_transactional_files_holds_every_id_once_under_ten_kills() {
    use lapin::options::{
        BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
    };
    use lapin::types::FieldTable;
    use lapin::{BasicProperties, Connection, ConnectionProperties};

    let queue = unique("rabbit");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (conn, channel) = rt.block_on(async {
        let conn = Connection::connect(
            "amqp://guest:guest@127.0.0.1:5672/%2f",
            ConnectionProperties::default(),
        )
        .await
        .expect("RabbitMQ on 127.0.0.1:5672");
        let ch = conn.create_channel().await.unwrap();
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        ch.queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
        (conn, ch)
    });
    let mut s = setup(&format!(
        r#"RabbitMQ {{
    host = "127.0.0.1"
    port = 5672
    username = "guest"
    password = "guest"
    queue_name = "{queue}"
    durable = false
    use_correlation_id = true
    schema = {{ fields {{ id = bigint, payload = string }} }}
  }}"#
    ));
    let mut publish = |s: &mut Setup| {
        rt.block_on(async {
            for i in s.published..s.published + BATCH {
                channel
                    .basic_publish(
                        "".into(),
                        queue.as_str().into(),
                        BasicPublishOptions::default(),
                        format!(r#"{{"id":{i},"payload":"row-{i}"}}"#).as_bytes(),
                        BasicProperties::default().with_correlation_id(format!("m{i}").into()),
                    )
                    .await
                    .unwrap()
                    .await
                    .unwrap();
            }
        });
        s.published += BATCH;
    };
    for _ in 0..3 {
        publish(&mut s);
    }
    kill_repeatedly(&mut s, "local", 10, 0x5eed_4ab1, &mut publish);
    publish(&mut s);
    finish_and_check(&s, "local");
    rt.block_on(async {
        let _ = channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await;
        let _ = conn.close(200, "OK".into()).await;
    });
}
