//! The Kafka sink: one message per row.
//!
//! `semantics` chooses the producer:
//!
//! - `EXACTLY_ONCE`: a transactional producer per writer, `transactional.id` =
//!   `transaction_prefix` (default `ferry-<job id>`) + `-` + the writer's index. Creating the
//!   writer calls `init_transactions`, which fences any earlier producer with the same id
//!   and aborts the transaction it left open, so a crashed run's uncommitted rows are never
//!   committed. Each checkpoint's rows are one transaction, committed **by the writer when
//!   the checkpoint's barrier reaches it** (in `prepare_commit`): librdkafka commits a
//!   transaction only from the producer that opened it, so the committer, which runs after
//!   the checkpoint is stored (and on Spark in another process), cannot do it. Consumers
//!   with `isolation.level = read_committed` therefore never see rows of a checkpoint that
//!   did not reach its barrier, but a crash after the commit and before the checkpoint is
//!   stored writes that checkpoint's rows a second time. The sink reports itself
//!   at-least-once for that reason.
//! - `AT_LEAST_ONCE`: an idempotent producer (no duplicates from librdkafka's own
//!   retries), flushed at every checkpoint: a completed checkpoint's rows are in the topic.
//! - `NON` (default, as in SeaTunnel): a plain producer (its retries may duplicate a
//!   message), also flushed at every checkpoint.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arrow::array::RecordBatch;
use ferry_api::options::{OptionKind, OptionSpec, Options};
use ferry_api::{
    ChangeBatch, FerryError, JobContext, Result, Sink, SinkDelivery, SinkFactory, SinkWriter,
    TableSchema, WriterContext,
};
use ferry_formats::{read_change_format, Encoder, Format, CHANGE_FORMAT_OPTIONS};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use serde_json::Value;

use crate::{client_config, describe_config, external, read_kafka_config, NAME};

/// How long flushing, and each transaction step, may take.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(60);

ferry_api::declare_options! {
    /// The `Kafka` sink's own options.
    struct SinkOptions => OWN_SPECS {
        /// Brokers to contact first, `host:port[,host:port…]`.
        servers: String = "bootstrap.servers", required;
        /// The topic to write to; `${column}` in it is replaced by each row's value of that column (SeaTunnel's topic from a field).
        topic: String = "topic", required;
        /// Messages whose body contains the i-th text go to partition i; the others to the remaining partitions by the body's hash (SeaTunnel's MessageContentPartitioner).
        assign_partitions: Vec<String> = "assign_partitions", optional;
        /// Columns whose values (encoded in `format`) form each message's key, so that librdkafka's partitioner sends equal keys to the same partition.
        key_fields: Vec<String> = "partition_key_fields", optional;
        /// Send every message to this partition.
        partition: i64 = "partition", optional;
        /// EXACTLY_ONCE (transactional producer), AT_LEAST_ONCE (idempotent producer) or NON (plain producer); all flush at every checkpoint.
        semantics: String = "semantics", default "NON";
        /// With EXACTLY_ONCE: the transactional.id prefix; each writer adds `-<index>`. Defaults to `ferry-<job id>`; two jobs writing at once need different prefixes.
        transaction_prefix: String = "transaction_prefix", optional;
    }
}

const EXTRA_SPECS: &[OptionSpec] = &[OptionSpec::optional(
    "kafka.config",
    OptionKind::Object,
    None,
    "librdkafka settings passed to the producer as they are (for example acks, linger.ms, compression.type).",
)];

/// SeaTunnel's `Kafka` sink semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semantics {
    /// Transactional producer, one transaction per checkpoint.
    ExactlyOnce,
    /// Idempotent producer, flushed at every checkpoint.
    AtLeastOnce,
    /// Plain producer, flushed at every checkpoint.
    Non,
}

/// SeaTunnel's `Kafka` sink.
pub struct KafkaSinkFactory;

impl SinkFactory for KafkaSinkFactory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Produces one Kafka message per row (json, text, or a change-data format recording the row kind); transactional, idempotent or plain producers"
    }
    fn options(&self) -> &'static [OptionSpec] {
        static OPTIONS: OnceLock<Vec<OptionSpec>> = OnceLock::new();
        OPTIONS.get_or_init(|| {
            let format = CHANGE_FORMAT_OPTIONS.iter().filter(|s| {
                matches!(
                    s.name,
                    "format" | "field_delimiter" | "protobuf_schema" | "protobuf_message_name"
                )
            });
            [OWN_SPECS, EXTRA_SPECS]
                .concat()
                .into_iter()
                .chain(format.cloned())
                .collect()
        })
    }
    fn create(
        &self,
        o: &mut Options,
        input: &[TableSchema],
        job: &JobContext,
    ) -> Result<Arc<dyn Sink>> {
        let opts = SinkOptions::read(o)?;
        let config = read_kafka_config(o)?;
        let (format, _) = read_change_format(o)?;
        if let Format::Change(c) = &format {
            if !c.writable() {
                return Err(o.error(
                    "format",
                    format!("{} is read only: write json, text, canal_json, debezium_json, maxwell_json or ogg_json", c.name()),
                ));
            }
        }
        for t in input {
            let checked = match &format {
                Format::Avro => ferry_formats::avro::check_schema(&t.schema),
                Format::Protobuf(p) => p.check(&t.schema, true),
                _ => Ok(()),
            };
            checked.map_err(|e| o.error("format", format!("input table {}: {e}", t.name)))?;
        }
        let semantics = match opts.semantics.to_ascii_uppercase().as_str() {
            "EXACTLY_ONCE" => Semantics::ExactlyOnce,
            "AT_LEAST_ONCE" => Semantics::AtLeastOnce,
            "NON" => Semantics::Non,
            other => {
                return Err(o.error(
                    "semantics",
                    format!("'{other}' is not one of EXACTLY_ONCE, AT_LEAST_ONCE, NON"),
                ))
            }
        };
        let partition =
            match opts.partition {
                None => None,
                Some(p) => Some(i32::try_from(p).ok().filter(|p| *p >= 0).ok_or_else(|| {
                    o.error("partition", format!("{p} is not a partition number"))
                })?),
            };
        let mut key_columns = Vec::new();
        if let Some(fields) = &opts.key_fields {
            let Some(table) = input.first() else {
                return Err(o.error("partition_key_fields", "the sink has no input table"));
            };
            for f in fields {
                let i = table.schema.index_of(f).map_err(|_| {
                    o.error(
                        "partition_key_fields",
                        format!("'{f}' is not a column of {}", table.name),
                    )
                })?;
                key_columns.push((f.clone(), i));
            }
        }
        let topic = match topic_field(&opts.topic) {
            None => TopicRule::Fixed(opts.topic.clone()),
            Some(field) => {
                let Some(table) = input.first() else {
                    return Err(o.error("topic", "the sink has no input table"));
                };
                let column = table.schema.index_of(&field).map_err(|_| {
                    o.error(
                        "topic",
                        format!(
                            "'${{{field}}}': '{field}' is not a column of {}",
                            table.name
                        ),
                    )
                })?;
                TopicRule::Field {
                    template: opts.topic.clone(),
                    placeholder: format!("${{{field}}}"),
                    column,
                }
            }
        };
        let assign = opts.assign_partitions.clone().unwrap_or_default();
        if assign.iter().any(String::is_empty) {
            return Err(o.error(
                "assign_partitions",
                "holds an empty text, which every message contains",
            ));
        }
        let prefix = opts
            .transaction_prefix
            .clone()
            .unwrap_or_else(|| format!("ferry-{}", job.job_id));
        o.finish(self.options())?;
        Ok(Arc::new(KafkaSink {
            servers: opts.servers,
            topic,
            assign,
            config,
            encoder: Encoder { format },
            key_columns,
            partition,
            semantics,
            prefix,
        }))
    }
}

/// The column a `${column}` topic names (the first placeholder, as SeaTunnel reads it).
fn topic_field(topic: &str) -> Option<String> {
    let start = topic.find("${")?;
    let len = topic[start + 2..].find('}')?;
    Some(topic[start + 2..start + 2 + len].to_string())
}

/// Where a row's message goes.
#[derive(Debug, Clone)]
enum TopicRule {
    Fixed(String),
    /// `template` with `placeholder` (`${column}`) replaced by the row's value of `column`
    /// in Java's text form. SeaTunnel takes the value as the whole topic; the same when the
    /// topic is only the placeholder, as SeaTunnel's job files write it.
    Field {
        template: String,
        placeholder: String,
        column: usize,
    },
}

impl TopicRule {
    /// The topic as errors name it.
    fn text(&self) -> &str {
        match self {
            TopicRule::Fixed(t) | TopicRule::Field { template: t, .. } => t,
        }
    }
}

/// Java's `String.hashCode` of `s` (over UTF-16 code units), as SeaTunnel's
/// MessageContentPartitioner hashes a message body.
pub(crate) fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// SeaTunnel's MessageContentPartitioner: the first `assign` text the body contains gives
/// its index; other bodies share the remaining partitions by their hash.
pub(crate) fn content_partition(assign: &[String], body: &[u8], partitions: i32) -> i32 {
    let text = String::from_utf8_lossy(body);
    if let Some(i) = assign.iter().position(|a| text.contains(a.as_str())) {
        return i as i32;
    }
    let n = assign.len() as i32;
    (java_hash(&text) & i32::MAX) % (partitions - n) + n
}

struct KafkaSink {
    servers: String,
    topic: TopicRule,
    assign: Vec<String>,
    config: Vec<(String, String)>,
    encoder: Encoder,
    key_columns: Vec<(String, usize)>,
    partition: Option<i32>,
    semantics: Semantics,
    prefix: String,
}

impl std::fmt::Debug for KafkaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSink")
            .field("servers", &self.servers)
            .field("topic", &self.topic)
            .field("config", &describe_config(&self.config))
            .field("key_columns", &self.key_columns)
            .field("partition", &self.partition)
            .field("semantics", &self.semantics)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Sink for KafkaSink {
    fn delivery(&self) -> SinkDelivery {
        SinkDelivery::AtLeastOnce
    }
    fn delivery_reason(&self) -> Option<String> {
        Some(match self.semantics {
            Semantics::ExactlyOnce => "at-least-once: EXACTLY_ONCE makes each checkpoint's rows one Kafka transaction, so read_committed consumers never see rows of a checkpoint that did not reach its barrier, and a restart fences and aborts the crashed writer's open transaction; but librdkafka can commit a transaction only from the producer that opened it, so the writer commits it at the checkpoint barrier, before the checkpoint is stored, and a crash in between writes that checkpoint's rows again".into(),
            Semantics::AtLeastOnce => "at-least-once: an idempotent producer, flushed at every checkpoint; rows after the last checkpoint are produced again after a restart".into(),
            Semantics::Non => "at-least-once: semantics = NON, a plain producer (its retries may duplicate a message) flushed at every checkpoint; rows after the last checkpoint are produced again after a restart".into(),
        })
    }
    fn create_writer(
        &self,
        ctx: &WriterContext,
        _restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        let mut ours: Vec<(&str, String)> = Vec::new();
        let mut txn_id = None;
        match self.semantics {
            Semantics::ExactlyOnce => {
                let id = format!("{}-{}", self.prefix, ctx.subtask);
                ours.push(("transactional.id", id.clone()));
                ours.push(("enable.idempotence", "true".into()));
                txn_id = Some(id);
            }
            Semantics::AtLeastOnce => ours.push(("enable.idempotence", "true".into())),
            Semantics::Non => {}
        }
        let errors = Arc::new(Mutex::new(None));
        let producer: ThreadedProducer<Reporter> =
            client_config(&self.servers, &ours, &self.config)
                .create_with_context(Reporter {
                    first_error: errors.clone(),
                })
                .map_err(|e| {
                    FerryError::config(format!(
                        "{NAME}: creating a producer for bootstrap.servers {} failed (check kafka.config: {}): {e}",
                        self.servers,
                        describe_config(&self.config)
                    ))
                })?;
        if let Some(id) = &txn_id {
            // Fences every earlier producer with this transactional.id and aborts the
            // transaction a crashed one left open.
            producer.init_transactions(FLUSH_TIMEOUT).map_err(|e| {
                external(
                    &self.servers,
                    &format!("initialising transactions for transactional.id {id}"),
                    e,
                )
            })?;
            producer
                .begin_transaction()
                .map_err(|e| external(&self.servers, "beginning a transaction", e))?;
        }
        Ok(Box::new(Writer {
            servers: self.servers.clone(),
            topic: self.topic.clone(),
            assign: self.assign.clone(),
            partition_counts: std::collections::HashMap::new(),
            topic_buf: String::new(),
            encoder: self.encoder.clone(),
            key_columns: self.key_columns.iter().map(|(_, i)| *i).collect(),
            partition: self.partition,
            transactional: txn_id.is_some(),
            producer,
            errors,
        }))
    }
}

/// The number of partitions of `topic`, asked of the cluster once.
fn partition_count(
    producer: &ThreadedProducer<Reporter>,
    counts: &mut std::collections::HashMap<String, i32>,
    servers: &str,
    topic: &str,
) -> Result<i32> {
    if let Some(n) = counts.get(topic) {
        return Ok(*n);
    }
    let md = producer
        .client()
        .fetch_metadata(Some(topic), FLUSH_TIMEOUT)
        .map_err(|e| {
            external(
                servers,
                &format!("reading the partitions of topic '{topic}'"),
                e,
            )
        })?;
    let n = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .map_or(0, |t| t.partitions().len() as i32);
    if n == 0 {
        return Err(external(
            servers,
            &format!("reading the partitions of topic '{topic}'"),
            "the topic has no partitions (does it exist?)",
        ));
    }
    counts.insert(topic.to_string(), n);
    Ok(n)
}

/// Records the first delivery failure librdkafka reports.
struct Reporter {
    first_error: Arc<Mutex<Option<String>>>,
}

impl ClientContext for Reporter {}

impl ProducerContext for Reporter {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            // Messages purged by `abort` were discarded on purpose.
            if let KafkaError::MessageProduction(
                RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight,
            ) = e
            {
                return;
            }
            if let Ok(mut first) = self.first_error.lock() {
                first.get_or_insert_with(|| e.to_string());
            }
        }
    }
}

struct Writer {
    servers: String,
    topic: TopicRule,
    assign: Vec<String>,
    /// Partitions per topic, for `assign_partitions` (asked once per topic).
    partition_counts: std::collections::HashMap<String, i32>,
    /// The row's topic, for `${column}` topics (one buffer, not one text per row).
    topic_buf: String,
    encoder: Encoder,
    key_columns: Vec<usize>,
    partition: Option<i32>,
    transactional: bool,
    producer: ThreadedProducer<Reporter>,
    errors: Arc<Mutex<Option<String>>>,
}

impl Writer {
    fn check_deliveries(&self) -> Result<()> {
        let first = self.errors.lock().ok().and_then(|mut e| e.take());
        match first {
            Some(e) => Err(external(
                &self.servers,
                &format!("producing to topic '{}'", self.topic.text()),
                e,
            )),
            None => Ok(()),
        }
    }

    /// Waits until every message sent so far is acknowledged (or failed).
    fn flush(&self) -> Result<()> {
        self.producer.flush(FLUSH_TIMEOUT).map_err(|e| {
            external(
                &self.servers,
                &format!("flushing to topic '{}'", self.topic.text()),
                e,
            )
        })?;
        self.check_deliveries()
    }
}

impl SinkWriter for Writer {
    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        let keys: Option<RecordBatch> = if self.key_columns.is_empty() {
            None
        } else {
            Some(
                batch
                    .data
                    .project(&self.key_columns)
                    .map_err(|e| FerryError::internal(format!("Kafka key columns: {e}")))?,
            )
        };
        for i in 0..batch.num_rows() {
            let body = self
                .encoder
                .encode_change(&batch.data, batch.kind(i), i)
                .map_err(|e| FerryError::data(NAME, format!("row {i}: {e}")))?;
            let key = match &keys {
                Some(k) => Some(
                    self.encoder
                        .encode(k, i)
                        .map_err(|e| FerryError::data(NAME, format!("row {i}'s key: {e}")))?,
                ),
                None => None,
            };
            let topic: &str = match &self.topic {
                TopicRule::Fixed(t) => t,
                TopicRule::Field {
                    template,
                    placeholder,
                    column,
                } => {
                    let col = batch.data.column(*column);
                    if col.is_null(i) {
                        return Err(FerryError::data(
                            NAME,
                            format!(
                                "topic '{template}': column '{}' is null in row {i}; every row needs a topic",
                                batch.data.schema().field(*column).name()
                            ),
                        ));
                    }
                    let (before, after) = template
                        .split_once(placeholder.as_str())
                        .unwrap_or((template.as_str(), ""));
                    self.topic_buf.clear();
                    self.topic_buf.push_str(before);
                    ferry_api::javatext::write_value(&mut self.topic_buf, col.as_ref(), i);
                    self.topic_buf.push_str(after);
                    &self.topic_buf
                }
            };
            let partition = match self.partition {
                Some(p) => Some(p),
                None if !self.assign.is_empty() => {
                    let n = partition_count(
                        &self.producer,
                        &mut self.partition_counts,
                        &self.servers,
                        topic,
                    )?;
                    if n <= self.assign.len() as i32 {
                        return Err(FerryError::config(format!(
                            "{NAME}: assign_partitions names {} partitions and topic '{topic}' has {n}; it needs at least one more for the other messages",
                            self.assign.len()
                        )));
                    }
                    Some(content_partition(&self.assign, &body, n))
                }
                None => None,
            };
            let mut record = BaseRecord::<[u8], [u8]>::to(topic).payload(&body);
            if let Some(k) = &key {
                record = record.key(k.as_slice());
            }
            if let Some(p) = partition {
                record = record.partition(p);
            }
            loop {
                match self.producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        // librdkafka's queue is full: its thread is sending; wait a little.
                        record = r;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err((e, _)) => {
                        return Err(external(
                            &self.servers,
                            &format!("producing to topic '{}'", self.topic.text()),
                            e,
                        ))
                    }
                }
            }
        }
        self.check_deliveries()
    }

    fn prepare_commit(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        self.flush()?;
        if self.transactional {
            self.producer
                .commit_transaction(FLUSH_TIMEOUT)
                .map_err(|e| external(&self.servers, "committing a transaction", e))?;
            self.producer
                .begin_transaction()
                .map_err(|e| external(&self.servers, "beginning a transaction", e))?;
        }
        Ok(None)
    }

    fn abort(&mut self) -> Result<()> {
        if self.transactional {
            self.producer
                .abort_transaction(FLUSH_TIMEOUT)
                .map_err(|e| external(&self.servers, "aborting a transaction", e))?;
            self.producer
                .begin_transaction()
                .map_err(|e| external(&self.servers, "beginning a transaction", e))?;
        } else {
            self.producer
                .purge(rdkafka::producer::PurgeConfig::default().queue());
        }
        if let Ok(mut e) = self.errors.lock() {
            e.take();
        }
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        if self.transactional {
            // The transaction begun after the last prepared commit holds nothing.
            self.producer
                .abort_transaction(FLUSH_TIMEOUT)
                .map_err(|e| external(&self.servers, "ending the last transaction", e))?;
            Ok(())
        } else {
            self.flush()
        }
    }
}
