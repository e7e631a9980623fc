//! The Kafka source: one split per topic partition, its state the next offset to read.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ferry_api::options::{OptionKind, OptionSpec, Options};
use ferry_api::{
    Boundedness, ChangeBatch, EnumeratorContext, FerryError, JobContext, JobMode, ReadStatus,
    ReaderContext, Result, Source, SourceFactory, SourceReader, Split, SplitEnumerator,
    TableSchema,
};
use ferry_formats::{read_format, read_schema, Decoder, FORMAT_OPTIONS, SCHEMA_OPTIONS};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::{client_config, describe_config, external, read_kafka_config, NAME};

/// How long one metadata, watermark or offset request to the cluster may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one `poll_next` waits for the first record.
const POLL_WAIT: Duration = Duration::from_millis(50);
/// Most records one `poll_next` returns.
const MAX_BATCH: usize = 4096;

ferry_api::declare_options! {
    /// The `Kafka` source's own options.
    struct SourceOptions => OWN_SPECS {
        /// Brokers to contact first, `host:port[,host:port…]`.
        servers: String = "bootstrap.servers", required;
        /// The topic to read; several separated by commas; with `pattern = true` a regular expression topic names must match whole.
        topic: String = "topic", required;
        /// `topic` is a regular expression (matched against the topics that exist when the job starts).
        pattern: bool = "pattern", default false;
        /// The consumer group whose committed offsets `start_mode = group_offsets` starts from and to which offsets are committed.
        group: String = "consumer.group", default "SeaTunnel-Consumer-Group";
        /// Commit the offsets a checkpoint holds to the consumer group when the checkpoint completes; when false, librdkafka's auto commit (kafka.config enable.auto.commit) applies.
        commit_on_checkpoint: bool = "commit_on_checkpoint", default true;
        /// Accepted for SeaTunnel job files: partitions are listed once, when the job starts (not again while it runs).
        _discovery_interval: i64 = "partition-discovery.interval-millis", default -1;
        /// Accepted for SeaTunnel job files: readers poll briefly and are polled again.
        _poll_timeout: i64 = "poll.timeout", default 10000;
    }
}

const EXTRA_SPECS: &[OptionSpec] = &[
    OptionSpec::optional("start_mode", OptionKind::Enum(&["earliest", "latest", "group_offsets", "specific_offsets", "timestamp"]), Some("group_offsets"), "Where reading starts: earliest, latest, group_offsets (the group's committed offsets, earliest where it has none), specific_offsets (start_mode.offsets) or timestamp (start_mode.timestamp)."),
    OptionSpec::optional("start_mode.offsets", OptionKind::Object, None, "With start_mode = specific_offsets: `{ topic-partition = offset }`; partitions not named start at their earliest offset."),
    OptionSpec::optional("start_mode.timestamp", OptionKind::Int, None, "With start_mode = timestamp: each partition starts at its first record with a timestamp at or after this, in milliseconds since 1970."),
    OptionSpec::optional("kafka.config", OptionKind::Object, None, "librdkafka settings passed to the consumer as they are (for example isolation.level, fetch.max.bytes)."),
];

/// Reads `start_mode` with `start_mode.offsets` / `start_mode.timestamp`. HOCON makes
/// `start_mode = timestamp` followed by `start_mode.timestamp = …` (as SeaTunnel's job
/// files write it) one block `start_mode { timestamp = … }`, the text lost: a block means
/// the mode its one key names.
pub(crate) fn read_start_mode(o: &mut Options) -> Result<StartMode> {
    let mode = match o.get("start_mode") {
        None | Some(Value::Null) => "group_offsets".to_string(),
        Some(Value::String(s)) => s.to_ascii_lowercase(),
        Some(Value::Object(m)) => match (m.contains_key("offsets"), m.contains_key("timestamp")) {
            (true, false) => "specific_offsets".into(),
            (false, true) => "timestamp".into(),
            _ => return Err(o.error(
                "start_mode",
                "set start_mode to earliest, latest, group_offsets, specific_offsets or timestamp",
            )),
        },
        Some(other) => return Err(o.error("start_mode", format!("expected text, found {other}"))),
    };
    let offsets = o.object("start_mode.offsets")?;
    let timestamp = o.i64("start_mode.timestamp")?;
    Ok(match mode.as_str() {
        "earliest" => StartMode::Earliest,
        "latest" => StartMode::Latest,
        "group_offsets" => StartMode::GroupOffsets,
        "timestamp" => StartMode::Timestamp(timestamp.ok_or_else(|| {
            o.error("start_mode.timestamp", "is required with start_mode = timestamp")
        })?),
        "specific_offsets" => {
            let m = offsets.ok_or_else(|| {
                o.error("start_mode.offsets", "is required with start_mode = specific_offsets")
            })?;
            let mut offsets = BTreeMap::new();
            for (k, v) in m {
                let key = format!("start_mode.offsets.{k}");
                let (topic, partition) = k
                    .rsplit_once('-')
                    .and_then(|(t, p)| Some((t.to_string(), p.parse::<i32>().ok()?)))
                    .ok_or_else(|| o.error(&key, "expected topic-partition = offset"))?;
                let offset = v
                    .as_i64()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| o.error(&key, format!("expected an offset, found {v}")))?;
                offsets.insert((topic, partition), offset);
            }
            StartMode::Specific(offsets)
        }
        other => {
            return Err(o.error(
                "start_mode",
                format!("'{other}' is not one of earliest, latest, group_offsets, specific_offsets, timestamp"),
            ))
        }
    })
}

/// Where a partition starts when the job starts fresh.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StartMode {
    Earliest,
    Latest,
    GroupOffsets,
    Specific(BTreeMap<(String, i32), i64>),
    Timestamp(i64),
}

/// SeaTunnel's `Kafka` source.
pub struct KafkaSourceFactory;

impl SourceFactory for KafkaSourceFactory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Reads rows (json or text) from Kafka topic partitions, resuming at checkpointed offsets"
    }
    fn options(&self) -> &'static [OptionSpec] {
        static OPTIONS: OnceLock<Vec<OptionSpec>> = OnceLock::new();
        OPTIONS.get_or_init(|| [OWN_SPECS, EXTRA_SPECS, SCHEMA_OPTIONS, FORMAT_OPTIONS].concat())
    }
    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        let opts = SourceOptions::read(o)?;
        let config = read_kafka_config(o)?;
        let table = read_schema(o, NAME)?
            .ok_or_else(|| o.error("schema", "is required: schema { fields { name = type } }"))?;
        let (format, on_error) = read_format(o)?;
        let start = read_start_mode(o)?;
        let topics = if opts.pattern {
            let re = regex::Regex::new(&format!("^(?:{})$", opts.topic))
                .map_err(|e| o.error("topic", format!("is not a regular expression: {e}")))?;
            Topics::Pattern(re)
        } else {
            let names: Vec<String> = opts
                .topic
                .split(',')
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect();
            if names.is_empty() {
                return Err(o.error("topic", "names no topic"));
            }
            Topics::Names(names)
        };
        o.finish(self.options())?;
        Ok(Box::new(KafkaSource {
            settings: Arc::new(Settings {
                servers: opts.servers,
                group: opts.group,
                commit_on_checkpoint: opts.commit_on_checkpoint,
                config,
            }),
            topics,
            start,
            decoder: Decoder {
                schema: table.schema.clone(),
                format,
                on_error,
            },
            table,
            bounded: job.mode == JobMode::Batch,
        }))
    }
}

#[derive(Debug, Clone)]
enum Topics {
    Names(Vec<String>),
    Pattern(regex::Regex),
}

/// How to reach the cluster, shared by the enumerator and the readers.
struct Settings {
    servers: String,
    group: String,
    commit_on_checkpoint: bool,
    config: Vec<(String, String)>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("servers", &self.servers)
            .field("group", &self.group)
            .field("commit_on_checkpoint", &self.commit_on_checkpoint)
            .field("config", &describe_config(&self.config))
            .finish()
    }
}

impl Settings {
    fn consumer(&self) -> Result<BaseConsumer> {
        let mut ours = vec![
            ("group.id", self.group.clone()),
            // Offsets are given by the splits; this applies only when one is out of range.
            ("auto.offset.reset", "earliest".to_string()),
        ];
        if self.commit_on_checkpoint {
            ours.push(("enable.auto.commit", "false".into()));
        }
        client_config(&self.servers, &ours, &self.config)
            .create()
            .map_err(|e| {
                FerryError::config(format!(
                    "{NAME}: creating a consumer for bootstrap.servers {} failed (check kafka.config: {}): {e}",
                    self.servers,
                    describe_config(&self.config)
                ))
            })
    }
}

#[derive(Debug)]
struct KafkaSource {
    settings: Arc<Settings>,
    topics: Topics,
    start: StartMode,
    table: TableSchema,
    decoder: Decoder,
    bounded: bool,
}

impl Source for KafkaSource {
    fn boundedness(&self) -> Boundedness {
        if self.bounded {
            Boundedness::Bounded
        } else {
            Boundedness::Unbounded
        }
    }
    fn tables(&self) -> Vec<TableSchema> {
        vec![self.table.clone()]
    }
    fn is_replayable(&self) -> bool {
        // A split's state is an offset: restoring it reads the same records again.
        true
    }
    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let (listed, pending) = match restored {
            Some(v) => {
                let pending = serde_json::from_value::<Vec<(usize, Split)>>(
                    v.get("pending").cloned().unwrap_or(json!([])),
                )
                .map_err(|e| FerryError::internal(format!("Kafka enumerator state: {e}")))?;
                (true, pending)
            }
            None => (false, Vec::new()),
        };
        Ok(Box::new(Enumerator {
            settings: self.settings.clone(),
            topics: self.topics.clone(),
            start: self.start.clone(),
            bounded: self.bounded,
            parallelism: ctx.parallelism.max(1),
            listed,
            pending,
        }))
    }
    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(Reader {
            settings: self.settings.clone(),
            decoder: self.decoder.clone(),
            table: self.table.name.clone(),
            consumer: None,
            parts: BTreeMap::new(),
            no_more: false,
            pending_commits: Vec::new(),
        }))
    }
}

/// A partition's progress: the split state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PartState {
    topic: String,
    partition: i32,
    /// The offset of the next record to emit.
    next: i64,
    /// Bounded reads: the end offset (exclusive) the partition had when the job started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<i64>,
    /// `start_mode = timestamp`: records before the first one with a timestamp at or after
    /// this are left out (also where the broker's offset lookup by time is coarse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_timestamp: Option<i64>,
}

impl PartState {
    fn done(&self) -> bool {
        self.end.is_some_and(|e| self.next >= e)
    }
    fn split(&self) -> Result<Split> {
        Ok(Split {
            id: format!("{}-{}", self.topic, self.partition),
            state: serde_json::to_value(self)
                .map_err(|e| FerryError::internal(format!("Kafka split state: {e}")))?,
        })
    }
}

struct Enumerator {
    settings: Arc<Settings>,
    topics: Topics,
    start: StartMode,
    bounded: bool,
    parallelism: usize,
    /// Whether the partitions were listed (a restored enumerator never lists again).
    listed: bool,
    pending: Vec<(usize, Split)>,
}

impl Enumerator {
    fn list(&self) -> Result<Vec<PartState>> {
        let s = &self.settings;
        let consumer = s.consumer()?;
        let metadata = consumer
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .map_err(|e| external(&s.servers, "listing topics", e))?;
        let mut parts: Vec<(String, i32)> = Vec::new();
        let wanted = |name: &str| match &self.topics {
            Topics::Names(n) => n.iter().any(|t| t == name),
            Topics::Pattern(re) => re.is_match(name),
        };
        for t in metadata.topics() {
            if wanted(t.name()) {
                parts.extend(
                    t.partitions()
                        .iter()
                        .map(|p| (t.name().to_string(), p.id())),
                );
            }
        }
        if let Topics::Names(names) = &self.topics {
            for n in names {
                if !parts.iter().any(|(t, _)| t == n) {
                    return Err(FerryError::external(
                        NAME,
                        format!(
                            "topic '{n}' does not exist (bootstrap.servers {})",
                            s.servers
                        ),
                    ));
                }
            }
        }
        parts.sort();
        let mut committed = BTreeMap::new();
        if self.start == StartMode::GroupOffsets && !parts.is_empty() {
            let mut tpl = TopicPartitionList::new();
            for (t, p) in &parts {
                tpl.add_partition(t, *p);
            }
            let c = consumer
                .committed_offsets(tpl, REQUEST_TIMEOUT)
                .map_err(|e| external(&s.servers, "reading the group's committed offsets", e))?;
            for e in c.elements() {
                if let Offset::Offset(o) = e.offset() {
                    committed.insert((e.topic().to_string(), e.partition()), o);
                }
            }
        }
        let mut by_time = BTreeMap::new();
        if let StartMode::Timestamp(ts) = self.start {
            let mut tpl = TopicPartitionList::new();
            for (t, p) in &parts {
                tpl.add_partition_offset(t, *p, Offset::Offset(ts))
                    .map_err(|e| FerryError::internal(format!("Kafka offsets: {e}")))?;
            }
            let found = consumer
                .offsets_for_times(tpl, REQUEST_TIMEOUT)
                .map_err(|e| external(&s.servers, "looking up offsets by timestamp", e))?;
            for e in found.elements() {
                if let Offset::Offset(o) = e.offset() {
                    by_time.insert((e.topic().to_string(), e.partition()), o);
                }
            }
        }
        let mut out = Vec::with_capacity(parts.len());
        for (topic, partition) in parts {
            let (low, high) = consumer
                .fetch_watermarks(&topic, partition, REQUEST_TIMEOUT)
                .map_err(|e| {
                    external(
                        &s.servers,
                        &format!("reading the offsets of {topic}-{partition}"),
                        e,
                    )
                })?;
            let key = (topic.clone(), partition);
            let next = match &self.start {
                StartMode::Earliest => low,
                StartMode::Latest => high,
                StartMode::GroupOffsets => committed.get(&key).copied().unwrap_or(low),
                StartMode::Specific(m) => m.get(&key).copied().unwrap_or(low),
                // No record at or after the timestamp: start at the end.
                StartMode::Timestamp(_) => by_time.get(&key).copied().unwrap_or(high),
            };
            out.push(PartState {
                topic,
                partition,
                next: next.clamp(low, high.max(low)),
                end: self.bounded.then_some(high),
                from_timestamp: match self.start {
                    StartMode::Timestamp(ts) => Some(ts),
                    _ => None,
                },
            });
        }
        Ok(out)
    }
}

impl SplitEnumerator for Enumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        if !self.listed {
            let parts = self.list()?;
            self.listed = true;
            for (i, p) in parts.iter().enumerate() {
                self.pending.push((i % self.parallelism, p.split()?));
            }
        }
        Ok(std::mem::take(&mut self.pending))
    }
    fn is_exhausted(&self) -> bool {
        self.listed && self.pending.is_empty()
    }
    fn add_splits_back(&mut self, splits: Vec<Split>, reader: usize) {
        self.pending.extend(splits.into_iter().map(|s| (reader, s)));
    }
    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Value> {
        Ok(json!({ "pending": self.pending }))
    }
}

struct Reader {
    settings: Arc<Settings>,
    decoder: Decoder,
    table: Arc<str>,
    consumer: Option<BaseConsumer>,
    parts: BTreeMap<(String, i32), PartState>,
    no_more: bool,
    /// (checkpoint, offsets it holds), committed to the group when it completes.
    pending_commits: Vec<(u64, Vec<PartState>)>,
}

impl Reader {
    /// Assigns the consumer every partition not read to its end, at its next offset.
    fn assign(&mut self) -> Result<()> {
        if self.consumer.is_none() {
            self.consumer = Some(self.settings.consumer()?);
        }
        let mut tpl = TopicPartitionList::new();
        for p in self.parts.values().filter(|p| !p.done()) {
            tpl.add_partition_offset(&p.topic, p.partition, Offset::Offset(p.next))
                .map_err(|e| FerryError::internal(format!("Kafka offsets: {e}")))?;
        }
        if let Some(c) = &self.consumer {
            c.assign(&tpl)
                .map_err(|e| external(&self.settings.servers, "assigning partitions", e))?;
        }
        Ok(())
    }

    fn all_done(&self) -> bool {
        self.parts.values().all(PartState::done)
    }

    /// Bounded reads: a partition whose position passed its end offset (transaction
    /// markers and aborted records are not returned, so the last offset may never come).
    fn advance_to_positions(&mut self) -> Result<bool> {
        let Some(c) = &self.consumer else {
            return Ok(false);
        };
        let positions = c
            .position()
            .map_err(|e| external(&self.settings.servers, "reading consumer positions", e))?;
        let mut finished_one = false;
        for e in positions.elements() {
            if let (Offset::Offset(pos), Some(p)) = (
                e.offset(),
                self.parts.get_mut(&(e.topic().to_string(), e.partition())),
            ) {
                if let Some(end) = p.end {
                    if pos >= end && p.next < end {
                        p.next = end;
                        finished_one = true;
                    }
                }
            }
        }
        Ok(finished_one)
    }
}

impl SourceReader for Reader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in splits {
            let p: PartState = serde_json::from_value(s.state.clone())
                .map_err(|e| FerryError::internal(format!("Kafka split {} state: {e}", s.id)))?;
            self.parts.insert((p.topic.clone(), p.partition), p);
        }
        self.assign()
    }

    fn no_more_splits(&mut self) {
        self.no_more = true;
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
        if self.all_done() {
            return Ok(if self.no_more {
                ReadStatus::Finished
            } else {
                ReadStatus::Idle(Duration::from_millis(100))
            });
        }
        let Some(consumer) = &self.consumer else {
            return Ok(ReadStatus::Idle(Duration::from_millis(100)));
        };
        let started = Instant::now();
        let mut bodies: Vec<Vec<u8>> = Vec::new();
        let mut reassign = false;
        let mut tombstones = 0usize;
        while bodies.len() < MAX_BATCH {
            let wait = POLL_WAIT.saturating_sub(started.elapsed());
            let wait = if bodies.is_empty() {
                wait
            } else {
                Duration::ZERO
            };
            match consumer.poll(wait) {
                None => break,
                Some(Ok(m)) => {
                    let Some(p) = self.parts.get_mut(&(m.topic().to_string(), m.partition()))
                    else {
                        continue;
                    };
                    if m.offset() < p.next {
                        continue;
                    }
                    if p.end.is_some_and(|e| m.offset() >= e) {
                        // Past the bounded read's end: stop fetching this partition.
                        p.next = p.end.unwrap_or(p.next);
                        reassign = true;
                        continue;
                    }
                    p.next = m.offset() + 1;
                    if let Some(from) = p.from_timestamp {
                        if m.timestamp().to_millis().is_some_and(|t| t < from) {
                            if p.done() {
                                reassign = true;
                            }
                            continue;
                        }
                        p.from_timestamp = None;
                    }
                    match m.payload() {
                        Some(b) => bodies.push(b.to_vec()),
                        None => tombstones += 1,
                    }
                    if p.done() {
                        reassign = true;
                    }
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(e @ KafkaError::MessageConsumptionFatal(_))) => {
                    return Err(external(&self.settings.servers, "consuming", e));
                }
                Some(Err(e)) => {
                    // librdkafka retries transport errors by itself; they are reported
                    // here only for information.
                    tracing::warn!(error = %e, "Kafka: consumer error");
                    break;
                }
            }
        }
        if tombstones > 0 {
            tracing::debug!(tombstones, "Kafka: records without a value were left out");
        }
        if bodies.is_empty() && self.parts.values().any(|p| p.end.is_some()) {
            reassign |= self.advance_to_positions()?;
        }
        if reassign {
            self.assign()?;
        }
        if bodies.is_empty() {
            if self.all_done() && self.no_more {
                return Ok(ReadStatus::Finished);
            }
            return Ok(ReadStatus::Idle(Duration::from_millis(20)));
        }
        let refs: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
        let decoded = self.decoder.decode(NAME, &refs)?;
        if decoded.skipped > 0 {
            tracing::warn!(
                skipped = decoded.skipped,
                "Kafka: records that do not decode were left out"
            );
        }
        Ok(ReadStatus::Batch(ChangeBatch::inserts(
            self.table.clone(),
            decoded.batch,
        )))
    }

    fn snapshot(&mut self, checkpoint_id: u64) -> Result<Vec<Split>> {
        let parts: Vec<PartState> = self.parts.values().cloned().collect();
        if self.settings.commit_on_checkpoint && !parts.is_empty() {
            self.pending_commits.push((checkpoint_id, parts.clone()));
        }
        parts.iter().map(PartState::split).collect()
    }

    fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        let Some(pos) = self
            .pending_commits
            .iter()
            .rposition(|(c, _)| *c <= checkpoint_id)
        else {
            return Ok(());
        };
        let parts = self.pending_commits[pos].1.clone();
        self.pending_commits.drain(..=pos);
        let Some(consumer) = &self.consumer else {
            return Ok(());
        };
        let mut tpl = TopicPartitionList::new();
        for p in &parts {
            tpl.add_partition_offset(&p.topic, p.partition, Offset::Offset(p.next))
                .map_err(|e| FerryError::internal(format!("Kafka offsets: {e}")))?;
        }
        // The group's offsets are informational (restores use the checkpoint): a failed
        // commit is logged, not fatal, as in SeaTunnel and Flink.
        if let Err(e) = consumer.commit(&tpl, CommitMode::Sync) {
            tracing::warn!(error = %e, group = %self.settings.group, "Kafka: committing offsets failed");
        }
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        self.consumer = None;
        Ok(())
    }
}
