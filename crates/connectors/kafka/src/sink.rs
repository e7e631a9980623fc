//! The Kafka sink: one message per row.
//!
//! `semantics` chooses the producer:
//!
//! - `EXACTLY_ONCE`: two-phase commit. Each checkpoint's rows of a writer are one Kafka
//!   transaction of a producer of their own, `transactional.id` = `transaction_prefix`
//!   (default `ferry-<job id>`) + `-<writer index>-<sequence>`. At the checkpoint barrier
//!   the writer *prepares* it: flushes it (every record acknowledged, inside the still open
//!   transaction) and records its transactional id, producer id and epoch as the
//!   checkpoint's commit info; the producer is dropped without ending the transaction.
//!   The committer, after the checkpoint is stored, ends it with Kafka's `EndTxn` through
//!   [`crate::end_txn`] (librdkafka commits only from the producer that opened a
//!   transaction; the coordinator needs only the id, producer id and epoch). A restored job
//!   commits the restored checkpoint's prepared transactions again (the coordinator answers
//!   success to a repeated commit), and each restored writer aborts what un-checkpointed
//!   runs left open: it initialises the ids from the sequence its state holds onward
//!   (`init_transactions` fences an id's producer and aborts its open transaction) until one
//!   that was never used (epoch 0). Read with `isolation.level = read_committed`, each
//!   checkpoint's rows appear once.
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
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use serde_json::Value;

use crate::batch::{BatchProducer, Messages};
use crate::end_txn::{end_transaction, PreparedTxn};
use crate::{client_config, describe_config, external, read_kafka_config, NAME};

/// How long flushing, and each transaction step, may take.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(60);

/// `transaction.timeout.ms` unless `kafka.config` sets one: a prepared transaction must
/// outlive a crash until the restarted job commits it (Kafka's default
/// `transaction.max.timeout.ms` is 15 minutes, the most a broker allows by default).
const TRANSACTION_TIMEOUT_MS: &str = "900000";

/// Ids initialised at most when a restored writer aborts what earlier runs left open.
const MAX_LEFTOVERS: u64 = 10_000;

/// Ids a writer without state initialises to abort what earlier runs left open: the
/// transaction a crashed run prepared for its first checkpoint, the one it had open after
/// it, and one more for a checkpoint begun before the first was stored.
const FRESH_WINDOW: u64 = 3;

/// Messages handed to librdkafka in one call at most, and the bytes after which a run ends.
const RUN_MESSAGES: usize = 1024;
const RUN_BYTES: usize = 1 << 20;

ferry_api::declare_options! {
    /// The `Kafka` sink's own options.
    struct SinkOptions => OWN_SPECS {
        /// Brokers to contact first, `host:port[,host:port…]`.
        servers: String = "bootstrap.servers", required;
        /// The topic to write to; `${column}` in it is replaced by each row's value of that column (SeaTunnel's topic from a field). Required, except with format = compatible_debezium_json (each row names its topic).
        topic: String = "topic", optional;
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
        let debezium = format == Format::CompatibleDebeziumJson;
        if debezium {
            for t in input {
                for col in ["topic", "key", "value"] {
                    let fits = t
                        .schema
                        .field_with_name(col)
                        .is_ok_and(|f| f.data_type() == &arrow::datatypes::DataType::Utf8);
                    if !fits {
                        return Err(o.error(
                            "format",
                            format!(
                                "compatible_debezium_json writes the rows of a CDC source with format = COMPATIBLE_DEBEZIUM_JSON \
                                 (text columns topic, key, value); input table {} has no text column '{col}'",
                                t.name
                            ),
                        ));
                    }
                }
            }
            if opts.key_fields.is_some() {
                tracing::warn!("{NAME}: with format = compatible_debezium_json each message's key is the row's key column; partition_key_fields is ignored");
            }
            key_columns.clear();
        }
        let topic_text = match &opts.topic {
            Some(t) => t.clone(),
            None if debezium => String::new(),
            None => return Err(o.error("topic", "is required but not set")),
        };
        let topic = match topic_field(&topic_text) {
            _ if debezium => TopicRule::Row,
            None => TopicRule::Fixed(topic_text.clone()),
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
                    template: topic_text.clone(),
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
    /// `format = compatible_debezium_json`: each row's `topic` column (SeaTunnel ignores
    /// the `topic` option then); its `key` column is the message's key.
    Row,
}

impl TopicRule {
    /// The topic as errors name it.
    fn text(&self) -> &str {
        match self {
            TopicRule::Fixed(t) | TopicRule::Field { template: t, .. } => t,
            TopicRule::Row => "${topic}",
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
        match self.semantics {
            Semantics::ExactlyOnce => SinkDelivery::ExactlyOnce,
            _ => SinkDelivery::AtLeastOnce,
        }
    }
    fn delivery_reason(&self) -> Option<String> {
        Some(match self.semantics {
            Semantics::ExactlyOnce => "exactly-once for read_committed consumers: each checkpoint's rows of a writer are one Kafka transaction, prepared (flushed, left open) at the checkpoint barrier and committed by the committer after the checkpoint is stored (Kafka's EndTxn with the producer id and epoch the checkpoint holds); a restart commits the restored checkpoint's transactions and aborts the ones later runs left open. A prepared transaction must be committed within transaction.timeout.ms (15 minutes unless kafka.config sets it), or the broker aborts it".into(),
            Semantics::AtLeastOnce => "at-least-once: an idempotent producer, flushed at every checkpoint; rows after the last checkpoint are produced again after a restart".into(),
            Semantics::Non => "at-least-once: semantics = NON, a plain producer (its retries may duplicate a message) flushed at every checkpoint; rows after the last checkpoint are produced again after a restart".into(),
        })
    }
    fn create_committer(&self) -> Result<Option<Box<dyn ferry_api::SinkCommitter>>> {
        Ok(match self.semantics {
            Semantics::ExactlyOnce => Some(Box::new(Committer {
                servers: self.servers.clone(),
            })),
            _ => None,
        })
    }
    fn create_writer(
        &self,
        ctx: &WriterContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        let errors = Arc::new(Mutex::new(None));
        let mut writer = Writer {
            servers: self.servers.clone(),
            topic: self.topic.clone(),
            assign: self.assign.clone(),
            partition_counts: std::collections::HashMap::new(),
            topic_buf: String::new(),
            encoder: self.encoder.clone(),
            key_columns: self.key_columns.iter().map(|(_, i)| *i).collect(),
            partition: self.partition,
            config: self.config.clone(),
            producer: None,
            messages: Messages::default(),
            run_topic: String::new(),
            errors,
            eos: None,
        };
        match self.semantics {
            Semantics::ExactlyOnce => {
                let restored_state = restored.is_some();
                let state: WriterState = match restored {
                    Some(v) => serde_json::from_value(v)
                        .map_err(|e| FerryError::internal(format!("{NAME} writer state: {e}")))?,
                    None => WriterState { next: 0 },
                };
                writer.eos = Some(Eos {
                    base: format!("{}-{}", self.prefix, ctx.subtask),
                    next: state.next,
                    open: None,
                });
                writer.abort_leftovers(restored_state)?;
            }
            Semantics::AtLeastOnce => {
                writer.producer = Some(
                    writer
                        .new_producer(&[("enable.idempotence", "true".into())], &[])?
                        .0
                        .into(),
                );
            }
            Semantics::Non => writer.producer = Some(writer.new_producer(&[], &[])?.0.into()),
        }
        Ok(Box::new(writer))
    }
}

/// An exactly-once writer's state in a checkpoint: the sequence number of the first
/// transactional id it had not used when the checkpoint was taken. Transactions of later
/// ids belong to no stored checkpoint.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct WriterState {
    next: u64,
}

/// An exactly-once writer's transactions.
struct Eos {
    /// `transaction_prefix-<writer index>`; each transaction's id adds `-<sequence>`.
    base: String,
    /// The sequence number of the next transaction's id.
    next: u64,
    /// The transaction rows go to now.
    open: Option<OpenTxn>,
}

/// A begun transaction.
struct OpenTxn {
    txn: PreparedTxn,
    /// Whether a record was sent in it (an empty one is kept for the next checkpoint).
    sent: bool,
}

/// Ends prepared transactions after their checkpoint is stored.
struct Committer {
    servers: String,
}

impl Committer {
    fn end(&self, infos: Vec<Value>, commit: bool) -> Result<()> {
        for info in infos {
            let txn: PreparedTxn = serde_json::from_value(info)
                .map_err(|e| FerryError::internal(format!("{NAME} commit info: {e}")))?;
            end_transaction(&self.servers, &txn, commit, FLUSH_TIMEOUT).map_err(|e| {
                external(
                    &self.servers,
                    if commit {
                        "committing a prepared transaction"
                    } else {
                        "aborting a prepared transaction"
                    },
                    e,
                )
            })?;
            tracing::debug!(
                transactional_id = %txn.transactional_id,
                producer_id = txn.producer_id,
                epoch = txn.producer_epoch,
                commit,
                "Kafka transaction ended"
            );
        }
        Ok(())
    }
}

impl ferry_api::SinkCommitter for Committer {
    fn commit(&mut self, _checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
        self.end(infos, true)
    }
    fn abort(&mut self, _checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
        self.end(infos, false)
    }
}

/// The number of partitions of `topic`, asked of the cluster once.
fn partition_count(
    producer: &BaseProducer<Reporter>,
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

/// Records the first delivery failure librdkafka reports, and the producer id and epoch
/// it acquires (from its `eos` debug log: librdkafka has no call that returns them).
struct Reporter {
    first_error: Arc<Mutex<Option<String>>>,
    pid: AcquiredPid,
}

/// Where a producer's id and epoch go once librdkafka logs them.
type AcquiredPid = Arc<Mutex<Option<(i64, i16)>>>;

/// Aborts `producer`'s open transaction. librdkafka first waits for the delivery reports
/// of every message it was given, which only a poll serves: so the messages not yet sent
/// are purged, and those in flight awaited, here first. (Not purged in flight: the broker
/// may store them after the abort, and one that does not reject them then, as Tansu does
/// not, keeps them in a transaction left open.)
fn abort_transaction(producer: &BaseProducer<Reporter>) -> rdkafka::error::KafkaResult<()> {
    producer.purge(rdkafka::producer::PurgeConfig::default().queue());
    // A flush that fails leaves the abort to say why.
    let _ = flush(producer, FLUSH_TIMEOUT);
    producer.abort_transaction(FLUSH_TIMEOUT)
}

/// Waits until every message `producer` was given is delivered (or failed) and its report
/// served, for at most `timeout`. Not rdkafka's `flush`: that polls in steps of up to
/// 100 ms, and a poll returns only at the end of its step, so every flush with a message
/// in flight took 100 ms at least.
fn flush(producer: &BaseProducer<Reporter>, timeout: Duration) -> rdkafka::error::KafkaResult<()> {
    let end = std::time::Instant::now() + timeout;
    loop {
        // A flush that does not wait: done, or the messages left.
        match producer.flush(Duration::ZERO) {
            Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut))
                if std::time::Instant::now() < end =>
            {
                producer.poll(Duration::from_millis(1));
            }
            other => return other,
        }
    }
}

/// Hands the gathered `messages` to librdkafka for `topic`.
fn send_run(
    producer: Option<&mut BatchProducer<Reporter>>,
    servers: &str,
    topic: &str,
    messages: &mut Messages,
) -> Result<()> {
    let Some(producer) = producer else {
        return Err(FerryError::internal("Kafka writer without a producer"));
    };
    producer
        .send(topic, messages)
        .map_err(|e| external(servers, &format!("producing to topic '{topic}'"), e))
}

/// Serves the delivery reports, errors and log lines queued for `producer`, without
/// waiting. A `BaseProducer` rather than rdkafka's `ThreadedProducer`: that one's thread
/// polls in 100 ms waits, so a flush (whose own poll the thread beats to the reports) and
/// every drop of a producer (which joins the thread) took up to 100 ms each, at every
/// checkpoint and for every transactional id probed.
fn serve_events(producer: &BaseProducer<Reporter>) {
    // One report event holds many messages' reports; a few polls empty the queue.
    for _ in 0..8 {
        producer.poll(Duration::ZERO);
    }
}

/// The producer id and epoch in librdkafka's `Acquired PID{Id:1000,Epoch:3}` log line.
pub(crate) fn acquired_pid(message: &str) -> Option<(i64, i16)> {
    let rest = &message[message.find("Acquired PID{Id:")? + "Acquired PID{Id:".len()..];
    let (id, rest) = rest.split_once(",Epoch:")?;
    let epoch = &rest[..rest.find('}')?];
    Some((id.parse().ok()?, epoch.parse().ok()?))
}

impl ClientContext for Reporter {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        if let Some(pid) = acquired_pid(message) {
            if let Ok(mut p) = self.pid.lock() {
                *p = Some(pid);
            }
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
            // The `eos` debug context is on for the line above; the rest is noise.
            RDKafkaLogLevel::Debug => {
                tracing::trace!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
        }
    }
}

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
    /// `kafka.config`.
    config: Vec<(String, String)>,
    /// The producer; with EXACTLY_ONCE the open transaction's, `None` between transactions.
    producer: Option<BatchProducer<Reporter>>,
    /// The messages of the run of rows being gathered, and their topic (kept for their room).
    messages: Messages,
    run_topic: String,
    errors: Arc<Mutex<Option<String>>>,
    /// With EXACTLY_ONCE: the transactions.
    eos: Option<Eos>,
}

impl Writer {
    /// A producer with `ours` settings, then `kafka.config`, then `last`; and where its
    /// producer id and epoch will be.
    fn new_producer(
        &self,
        ours: &[(&str, String)],
        last: &[(&str, String)],
    ) -> Result<(BaseProducer<Reporter>, AcquiredPid)> {
        let pid = Arc::new(Mutex::new(None));
        let mut config = client_config(&self.servers, ours, &self.config);
        for (k, v) in last {
            config.set(*k, v);
        }
        if last.iter().any(|(k, _)| *k == "debug") {
            // rdkafka takes the log level from the `log` crate's, which may hide debug lines.
            config.set_log_level(RDKafkaLogLevel::Debug);
        }
        let producer = config
            .create_with_context(Reporter {
                first_error: self.errors.clone(),
                pid: pid.clone(),
            })
            .map_err(|e| {
                FerryError::config(format!(
                    "{NAME}: creating a producer for bootstrap.servers {} failed (check kafka.config: {}): {e}",
                    self.servers,
                    describe_config(&self.config)
                ))
            })?;
        Ok((producer, pid))
    }

    /// A transactional producer for `transactional.id` `id`, initialised (which fences an
    /// earlier producer of the id and aborts the transaction it left open), and its
    /// producer id and epoch.
    fn init_transactional(&self, id: &str) -> Result<(BaseProducer<Reporter>, (i64, i16))> {
        // `debug = eos` makes librdkafka log the producer id and epoch it acquires.
        let debug = match self.config.iter().rev().find(|(k, _)| k == "debug") {
            Some((_, v)) if !v.trim().is_empty() => format!("{v},eos"),
            _ => "eos".to_string(),
        };
        let mut ours = vec![
            ("transactional.id", id.to_string()),
            ("enable.idempotence", "true".to_string()),
        ];
        if !self
            .config
            .iter()
            .any(|(k, _)| k == "transaction.timeout.ms")
        {
            ours.push(("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS.to_string()));
        }
        let (producer, pid) = self.new_producer(&ours, &[("debug", debug)])?;
        producer.init_transactions(FLUSH_TIMEOUT).map_err(|e| {
            external(
                &self.servers,
                &format!("initialising transactions for transactional.id {id}"),
                e,
            )
        })?;
        // librdkafka logs the acquired id from its own thread, around when the call returns.
        let waited = std::time::Instant::now();
        let mut got = None;
        while got.is_none() && waited.elapsed() < Duration::from_secs(5) {
            got = pid.lock().ok().and_then(|p| *p);
            if got.is_none() {
                // Log lines reach the context through the producer's queue.
                producer.poll(Duration::from_millis(2));
            }
        }
        let got = got.ok_or_else(|| {
            external(
                &self.servers,
                &format!("initialising transactions for transactional.id {id}"),
                "librdkafka did not report the producer id and epoch it acquired",
            )
        })?;
        Ok((producer, got))
    }

    /// Aborts the transactions runs after the restored checkpoint left open: initialises
    /// the ids from the state's sequence onward until one that was never used (epoch 0).
    /// A writer without state (a first start, a restart before any checkpoint, every Spark
    /// micro-batch) starts at sequence 0 and looks at the first [`FRESH_WINDOW`] ids only:
    /// probing makes an id used, so an unbounded search would grow by one id with every
    /// such start. Before the first checkpoint a crashed run left at most that many open.
    fn abort_leftovers(&mut self, restored: bool) -> Result<()> {
        let Some(eos) = &self.eos else {
            return Ok(());
        };
        let (base, from) = (eos.base.clone(), eos.next);
        let limit = if restored {
            MAX_LEFTOVERS
        } else {
            FRESH_WINDOW
        };
        for seq in from..from + limit {
            let id = format!("{base}-{seq}");
            let (_producer, (_, epoch)) = self.init_transactional(&id)?;
            if epoch == 0 {
                return Ok(());
            }
            tracing::debug!(transactional_id = %id, epoch, "Kafka: fenced an earlier run's producer and aborted its open transaction");
        }
        if !restored {
            return Ok(());
        }
        Err(external(
            &self.servers,
            &format!("aborting the transactions earlier runs left open under {base}-<n>"),
            format!(
                "ids {from} to {} were all used before",
                from + MAX_LEFTOVERS - 1
            ),
        ))
    }

    /// With EXACTLY_ONCE, begins a transaction (of a producer of its own) when none is open.
    fn ensure_open(&mut self) -> Result<()> {
        let Some(eos) = &self.eos else {
            return Ok(());
        };
        if eos.open.is_some() {
            return Ok(());
        }
        let id = format!("{}-{}", eos.base, eos.next);
        let (producer, (producer_id, producer_epoch)) = self.init_transactional(&id)?;
        producer
            .begin_transaction()
            .map_err(|e| external(&self.servers, "beginning a transaction", e))?;
        self.producer = Some(producer.into());
        if let Some(eos) = &mut self.eos {
            eos.next += 1;
            eos.open = Some(OpenTxn {
                txn: PreparedTxn {
                    transactional_id: id,
                    producer_id,
                    producer_epoch,
                },
                sent: false,
            });
        }
        Ok(())
    }

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
        if let Some(p) = &self.producer {
            flush(p, FLUSH_TIMEOUT).map_err(|e| {
                external(
                    &self.servers,
                    &format!("flushing to topic '{}'", self.topic.text()),
                    e,
                )
            })?;
        }
        self.check_deliveries()
    }
}

impl SinkWriter for Writer {
    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.ensure_open()?;
        if self.producer.is_none() {
            return Err(FerryError::internal("Kafka writer without a producer"));
        }
        if let Some(OpenTxn { sent, .. }) = self.eos.as_mut().and_then(|e| e.open.as_mut()) {
            *sent = true;
        }
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
        // compatible_debezium_json: the rows' topic and key columns.
        let row_columns = match self.topic {
            TopicRule::Row => {
                let schema = batch.data.schema();
                let col = |n: &str| {
                    schema.index_of(n).map_err(|_| {
                        FerryError::data(
                            NAME,
                            format!("compatible_debezium_json: the rows have no column '{n}'"),
                        )
                    })
                };
                Some((col("topic")?, col("key")?))
            }
            _ => None,
        };
        let encoder = self.encoder.batch(&batch.data);
        let key_encoder = keys.as_ref().map(|k| self.encoder.batch(k));
        // Rows are gathered into runs of messages to one topic, each handed to librdkafka
        // in one call (`crate::batch`); it copies their bytes, so the buffers serve again.
        let mut messages = std::mem::take(&mut self.messages);
        let mut run_topic = std::mem::take(&mut self.run_topic);
        run_topic.clear();
        for i in 0..batch.num_rows() {
            let key = match &key_encoder {
                _ if row_columns.is_some() => row_columns.and_then(|(_, k)| {
                    let c = batch.data.column(k);
                    (!c.is_null(i)).then(|| ferry_formats::text_value(c.as_ref(), i).into_bytes())
                }),
                Some(k) => Some(
                    k.encode(i)
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
                TopicRule::Row => {
                    let column = row_columns.map(|(t, _)| t).unwrap_or_default();
                    let col = batch.data.column(column);
                    if col.is_null(i) {
                        return Err(FerryError::data(
                            NAME,
                            format!("compatible_debezium_json: the topic of row {i} is null"),
                        ));
                    }
                    self.topic_buf.clear();
                    self.topic_buf
                        .push_str(&ferry_formats::text_value(col.as_ref(), i));
                    &self.topic_buf
                }
            };
            if messages.len() > 0
                && (run_topic != topic
                    || messages.len() >= RUN_MESSAGES
                    || messages.byte_len() >= RUN_BYTES)
            {
                send_run(
                    self.producer.as_mut(),
                    &self.servers,
                    &run_topic,
                    &mut messages,
                )?;
            }
            if run_topic != topic {
                run_topic.clear();
                run_topic.push_str(topic);
            }
            encoder
                .encode_change_into(batch.kind(i), i, messages.bytes())
                .map_err(|e| FerryError::data(NAME, format!("row {i}: {e}")))?;
            let partition = match self.partition {
                Some(p) => Some(p),
                None if !self.assign.is_empty() => {
                    let Some(producer) = self.producer.as_deref() else {
                        return Err(FerryError::internal("Kafka writer without a producer"));
                    };
                    let n = partition_count(
                        producer,
                        &mut self.partition_counts,
                        &self.servers,
                        &run_topic,
                    )?;
                    if n <= self.assign.len() as i32 {
                        return Err(FerryError::config(format!(
                            "{NAME}: assign_partitions names {} partitions and topic '{run_topic}' has {n}; it needs at least one more for the other messages",
                            self.assign.len()
                        )));
                    }
                    Some(content_partition(&self.assign, messages.pending_body(), n))
                }
                None => None,
            };
            messages.end_body(key.as_deref(), partition);
        }
        send_run(
            self.producer.as_mut(),
            &self.servers,
            &run_topic,
            &mut messages,
        )?;
        self.messages = messages;
        self.run_topic = run_topic;
        if let Some(p) = &self.producer {
            serve_events(p);
        }
        self.check_deliveries()
    }

    fn prepare_commit(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        self.flush()?;
        let Some(eos) = &mut self.eos else {
            return Ok(None);
        };
        match eos.open.take() {
            // Nothing sent: the begun transaction serves the next checkpoint.
            Some(open) if !open.sent => {
                eos.open = Some(open);
                Ok(None)
            }
            // Every record is acknowledged inside the open transaction: it is prepared.
            // The producer goes without ending it; the committer does that.
            Some(open) => {
                self.producer = None;
                Ok(Some(serde_json::to_value(&open.txn).map_err(|e| {
                    FerryError::internal(format!("{NAME} commit info: {e}"))
                })?))
            }
            None => Ok(None),
        }
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        let Some(eos) = &self.eos else {
            return Ok(None);
        };
        // Transactions from the open one (or the next) on belong to no stored checkpoint.
        let next = match &eos.open {
            Some(_) => eos.next - 1,
            None => eos.next,
        };
        Ok(Some(serde_json::json!(WriterState { next })))
    }

    fn abort(&mut self) -> Result<()> {
        if self.eos.is_some() {
            if let Some(p) = self.producer.take() {
                abort_transaction(&p)
                    .map_err(|e| external(&self.servers, "aborting a transaction", e))?;
            }
            if let Some(eos) = &mut self.eos {
                eos.open = None;
            }
        } else if let Some(p) = &self.producer {
            p.purge(rdkafka::producer::PurgeConfig::default().queue());
        }
        if let Ok(mut e) = self.errors.lock() {
            e.take();
        }
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        if self.eos.is_some() {
            // After the last prepared commit: a transaction still open holds nothing.
            if let Some(p) = self.producer.take() {
                abort_transaction(&p)
                    .map_err(|e| external(&self.servers, "ending the last transaction", e))?;
            }
            Ok(())
        } else {
            self.flush()
        }
    }
}

/// A writer dropped with its producer (a failed job, an abandoned transaction) lets the
/// messages already handed to librdkafka finish for a moment before the producer is
/// destroyed, which purges what is left: records of a fenced or abandoned transaction
/// then reach the broker before the next run's producer aborts that transaction, not after
/// (a broker that does not reject an old epoch's records, as Tansu does not, would keep
/// late ones in a transaction left open).
impl Drop for Writer {
    fn drop(&mut self) {
        if let Some(p) = &self.producer {
            let _ = flush(p, Duration::from_millis(500));
        }
    }
}

#[cfg(test)]
mod pid_tests {
    #[test]
    fn the_producer_id_and_epoch_read_from_librdkafkas_log_line() {
        assert_eq!(
            super::acquired_pid("Acquired PID{Id:1000,Epoch:3} (previous PID{Invalid})"),
            Some((1000, 3))
        );
        assert_eq!(super::acquired_pid("Acquired PID{Invalid}"), None);
        assert_eq!(super::acquired_pid("something else"), None);
    }
}
