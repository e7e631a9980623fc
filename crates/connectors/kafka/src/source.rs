//! The Kafka source: one split per topic partition, its state the next offset to read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ferry_api::options::{OptionKind, OptionSpec, Options};
use ferry_api::{
    Boundedness, ChangeBatch, EnumeratorContext, FerryError, JobContext, JobMode, ReadStatus,
    ReaderContext, Result, Source, SourceFactory, SourceReader, Split, SplitEnumerator,
    TableSchema,
};
use ferry_formats::{
    read_change_format, read_schema, Decoder, Format, CHANGE_FORMAT_OPTIONS, SCHEMA_OPTIONS,
};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::fetch::FetchQueue;
use crate::{client_config, describe_config, external, read_kafka_config, NAME};

/// How long one metadata, watermark or offset request to the cluster may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one `poll_next` waits for the first record.
const POLL_WAIT: Duration = Duration::from_millis(50);
/// Most records one `poll_next` returns.
const MAX_BATCH: usize = 4096;

ferry_api::declare_options! {
    /// The `Kafka` source's own options (one per source, never in `table_list`).
    struct SourceOptions => OWN_SPECS {
        /// Brokers to contact first, `host:port[,host:port…]`.
        servers: String = "bootstrap.servers", required;
        /// Several tables, each `{ topic, pattern, start_mode, schema, format, … }`; options an entry does not set are taken from the top.
        table_list: Vec<Value> = "table_list", optional;
        /// The consumer group whose committed offsets `start_mode = group_offsets` starts from and to which offsets are committed.
        group: String = "consumer.group", default "SeaTunnel-Consumer-Group";
        /// Commit the offsets a checkpoint holds to the consumer group when the checkpoint completes; when false, librdkafka's auto commit (kafka.config enable.auto.commit) applies.
        commit_on_checkpoint: bool = "commit_on_checkpoint", default true;
        /// STREAMING jobs: list the topics again this often (milliseconds) and read partitions and matching topics created since, from their earliest offset; -1 or 0: list once, when the job starts.
        discovery_interval: i64 = "partition-discovery.interval-millis", default -1;
        /// Accepted for SeaTunnel job files: readers poll briefly and are polled again.
        _poll_timeout: i64 = "poll.timeout", default 10000;
    }
}

ferry_api::declare_options! {
    /// Which topics one table reads: at the top, or in each block of `table_list`.
    struct TopicOptions => TOPIC_SPECS {
        /// The topic to read; several separated by commas; with `pattern = true` a regular expression topic names must match whole. Required at the top unless table_list is set.
        topic: String = "topic", optional;
        /// `topic` is a regular expression (matched against the topics that exist when the job starts).
        pattern: bool = "pattern", default false;
    }
}

const START_SPECS: &[OptionSpec] = &[
    OptionSpec::optional("start_mode", OptionKind::Enum(&["earliest", "latest", "group_offsets", "specific_offsets", "timestamp"]), Some("group_offsets"), "Where reading starts: earliest, latest, group_offsets (the group's committed offsets, earliest where it has none), specific_offsets (start_mode.offsets) or timestamp (start_mode.timestamp)."),
    OptionSpec::optional("start_mode.offsets", OptionKind::Object, None, "With start_mode = specific_offsets: `{ topic-partition = offset }`; partitions not named start at their earliest offset."),
    OptionSpec::optional("start_mode.timestamp", OptionKind::Int, None, "With start_mode = timestamp: each partition starts at its first record with a timestamp at or after this, in milliseconds since 1970."),
];

const CONFIG_SPECS: &[OptionSpec] = &[
    OptionSpec::optional("kafka.config", OptionKind::Object, None, "librdkafka settings passed to the consumer as they are (for example isolation.level, fetch.max.bytes)."),
];

/// The options one table reads with: set at the top, or in each block of `table_list`.
fn entry_specs() -> &'static [OptionSpec] {
    static SPECS: OnceLock<Vec<OptionSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        [
            TOPIC_SPECS,
            START_SPECS,
            SCHEMA_OPTIONS,
            CHANGE_FORMAT_OPTIONS,
        ]
        .concat()
    })
}

/// One table the source reads: its topics, where they start, how their records decode.
#[derive(Debug, Clone)]
struct Entry {
    topics: Topics,
    start: StartMode,
    table: TableSchema,
    decoder: Decoder,
}

/// Reads one table's options. `in_list`: a `table_list` block, whose table is named by
/// `schema.table` or else by its topic text, as SeaTunnel names it (`TablePath.of(topic)`).
fn read_entry(o: &mut Options, in_list: bool) -> Result<Entry> {
    let t = TopicOptions::read(o)?;
    let Some(topic) = t.topic else {
        return Err(o.error("topic", "is required: the topic(s) to read, or table_list"));
    };
    let named = o
        .raw()
        .get("schema")
        .and_then(|s| s.get("table"))
        .is_some_and(|t| t.as_str().is_some_and(|t| !t.trim().is_empty()));
    let mut table = read_schema(o, NAME)?
        .ok_or_else(|| o.error("schema", "is required: schema { fields { name = type } }"))?;
    if in_list && !named {
        let mut catalog = (*table.catalog).clone();
        catalog.id = Some(ferry_api::TableId::from_path(NAME, &topic));
        table = TableSchema::new(topic.as_str(), table.schema.clone()).with_catalog(catalog);
    }
    let (format, on_error) = read_change_format(o)?;
    if format == Format::CompatibleDebeziumJson {
        return Err(o.error(
            "format",
            "compatible_debezium_json is a sink format (SeaTunnel's Kafka source reads it neither); read Debezium's messages with debezium_json",
        ));
    }
    let checked = match &format {
        Format::Avro => ferry_formats::avro::check_schema(&table.schema),
        Format::Protobuf(p) => p.check(&table.schema, false),
        _ => Ok(()),
    };
    checked.map_err(|e| o.error("format", e))?;
    let start = read_start_mode(o)?;
    let topics = if t.pattern {
        let re = regex::Regex::new(&format!("^(?:{topic})$"))
            .map_err(|e| o.error("topic", format!("is not a regular expression: {e}")))?;
        Topics::Pattern(re)
    } else {
        let names: Vec<String> = topic
            .split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect();
        if names.is_empty() {
            return Err(o.error("topic", "names no topic"));
        }
        Topics::Names(names)
    };
    Ok(Entry {
        topics,
        start,
        decoder: Decoder {
            schema: table.schema.clone(),
            format,
            on_error,
        },
        table,
    })
}

/// The `table_list` blocks, each with the top's options it does not set itself.
fn read_table_list(o: &mut Options, items: Vec<Value>) -> Result<Vec<Entry>> {
    if items.is_empty() {
        return Err(o.error("table_list", "is empty"));
    }
    let mut entries: Vec<Entry> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let prefix = format!("table_list[{i}]");
        let Value::Object(mut m) = item else {
            return Err(o.error(
                &prefix,
                "expected a block { topic = …, schema = …, format = … }",
            ));
        };
        for k in entry_specs()
            .iter()
            .map(|s| s.name)
            .filter(|k| !["topic", "pattern", "schema"].contains(k))
        {
            if !m.contains_key(k) {
                if let Some(v) = o.raw().get(k) {
                    m.insert(k.to_string(), v.clone());
                }
            }
        }
        let mut sub = Options::new(m, o.location().nested(&prefix));
        let entry = read_entry(&mut sub, true).map_err(|e| e.within(&prefix))?;
        sub.finish(entry_specs()).map_err(|e| e.within(&prefix))?;
        if let Some(j) = entries
            .iter()
            .position(|e| e.table.name == entry.table.name)
        {
            return Err(o.error(
                &prefix,
                format!(
                    "names table '{}' as table_list[{j}] does: give one of them schema {{ table = … }}",
                    entry.table.name
                ),
            ));
        }
        entries.push(entry);
    }
    // The top's entry options serve as defaults only: mark them read.
    for s in entry_specs() {
        let _ = o.get(s.name);
    }
    Ok(entries)
}

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
        "Reads rows (json, text, or change data in canal_json, debezium_json, maxwell_json, ogg_json) from Kafka topic partitions, resuming at checkpointed offsets"
    }
    fn options(&self) -> &'static [OptionSpec] {
        static OPTIONS: OnceLock<Vec<OptionSpec>> = OnceLock::new();
        OPTIONS.get_or_init(|| [OWN_SPECS, CONFIG_SPECS, entry_specs()].concat())
    }
    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        let opts = SourceOptions::read(o)?;
        let config = read_kafka_config(o)?;
        let entries = match opts.table_list {
            Some(items) => read_table_list(o, items)?,
            None => vec![read_entry(o, false)?],
        };
        o.finish(self.options())?;
        Ok(Box::new(KafkaSource {
            settings: Arc::new(Settings {
                servers: opts.servers,
                group: opts.group,
                commit_on_checkpoint: opts.commit_on_checkpoint,
                config,
            }),
            entries: Arc::new(entries),
            bounded: job.mode == JobMode::Batch,
            discovery: (job.mode == JobMode::Streaming && opts.discovery_interval > 0)
                .then(|| Duration::from_millis(opts.discovery_interval.unsigned_abs())),
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
    /// Whether `kafka.config` asks for `isolation.level = read_committed`.
    fn read_committed(&self) -> bool {
        self.config.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("isolation.level")
                && v.trim().eq_ignore_ascii_case("read_committed")
        })
    }

    fn consumer(&self) -> Result<BaseConsumer> {
        let mut ours = vec![
            ("group.id", self.group.clone()),
            // Offsets are given by the splits; this applies only when one is out of range.
            ("auto.offset.reset", "earliest".to_string()),
        ];
        if self.commit_on_checkpoint {
            ours.push(("enable.auto.commit", "false".into()));
        }
        if !self.read_committed() {
            // librdkafka's default (1 s) idles the fetcher each time its local queue is
            // full, which held a reader to about a sixth of the broker's rate
            // (bench/results/kafka.md); 10 ms keeps it fetching. Not for read_committed
            // consumers: with it, the exactly-once crash test against Tansu (whose end
            // offsets are short, see docs/connectors/Kafka.md) once missed committed
            // records, and until that is understood they keep librdkafka's default.
            ours.push(("fetch.queue.backoff.ms", "10".into()));
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
    /// The tables read: one, or one per `table_list` block.
    entries: Arc<Vec<Entry>>,
    bounded: bool,
    /// `partition-discovery.interval-millis` in a STREAMING job.
    discovery: Option<Duration>,
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
        self.entries.iter().map(|e| e.table.clone()).collect()
    }
    fn is_replayable(&self) -> bool {
        // A split's state is an offset: restoring it reads the same records again.
        true
    }
    fn bound_splits(&self, start: Vec<Split>, end: &[Split]) -> Result<Vec<Split>> {
        // One reader interleaves its partitions as the broker delivers them: a replay of the
        // same number of records could take more of one partition and fewer of another, so
        // each partition stops where the earlier read's snapshot left it.
        let ends: BTreeMap<&str, &Split> = end.iter().map(|s| (s.id.as_str(), s)).collect();
        start
            .into_iter()
            .map(|s| {
                let mut p: PartState = s.read_state()?;
                let e: PartState = ends
                    .get(s.id.as_str())
                    .ok_or_else(|| {
                        FerryError::internal(format!(
                            "{NAME}: replaying a read: partition {} has no recorded end",
                            s.id
                        ))
                    })?
                    .read_state()?;
                p.end = Some(p.end.map_or(e.next, |old| old.min(e.next)));
                p.split()
            })
            .collect()
    }
    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let (listed, pending, known) = match restored {
            Some(v) => {
                let pending = ferry_api::decode_state::<Vec<(usize, Split)>>(
                    v.get("pending").unwrap_or(&json!([])),
                    "the Kafka enumerator",
                )?;
                // Checkpoints written before discovery existed do not list the partitions.
                let known = match v.get("known") {
                    Some(k) => Some(ferry_api::decode_state::<BTreeSet<(String, i32)>>(
                        k,
                        "the Kafka enumerator",
                    )?),
                    None => None,
                };
                (true, pending, known)
            }
            None => (false, Vec::new(), Some(BTreeSet::new())),
        };
        if self.discovery.is_some() && known.is_none() {
            tracing::warn!(
                "Kafka: the checkpoint does not list the partitions it reads (written by an earlier Ferry); partition discovery is off for this run"
            );
        }
        Ok(Box::new(Enumerator {
            settings: self.settings.clone(),
            entries: self.entries.clone(),
            bounded: self.bounded,
            parallelism: ctx.parallelism.max(1),
            listed,
            pending,
            discovery: self.discovery.filter(|_| known.is_some()),
            known: known.unwrap_or_default(),
            listed_at: Instant::now(),
            consumer: None,
        }))
    }
    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(Reader {
            settings: self.settings.clone(),
            entries: self.entries.clone(),
            fetch: None,
            consumer: None,
            parts: BTreeMap::new(),
            no_more: false,
            pending_commits: Vec::new(),
            high: BTreeMap::new(),
            scratch: (Vec::new(), Vec::new()),
            assigned: BTreeSet::new(),
        }))
    }
}

/// A partition's progress: the split state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PartState {
    topic: String,
    partition: i32,
    /// The `table_list` table the partition belongs to (absent without table_list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    table: Option<String>,
    /// Its index in the job's entries, found from `table` when the split is added.
    #[serde(skip)]
    entry: usize,
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
        Split::typed(format!("{}-{}", self.topic, self.partition), self)
    }
}

struct Enumerator {
    settings: Arc<Settings>,
    entries: Arc<Vec<Entry>>,
    bounded: bool,
    parallelism: usize,
    /// Whether the partitions were listed once (at the first start; a restored enumerator
    /// has them in its readers' splits).
    listed: bool,
    pending: Vec<(usize, Split)>,
    /// How often to list again for new partitions (STREAMING with discovery on).
    discovery: Option<Duration>,
    /// Every partition assigned so far (checkpointed, so discovery after a restore adds
    /// only partitions that are new).
    known: BTreeSet<(String, i32)>,
    listed_at: Instant,
    /// The consumer discovery lists with, kept between listings.
    consumer: Option<BaseConsumer>,
}

impl Enumerator {
    /// Every partition of every table's topics not in `known`, at the offset its start
    /// mode gives (`first`: the first listing) or at its earliest (found by discovery: the
    /// partition or topic was created after the job started).
    fn list(&mut self, first: bool) -> Result<Vec<PartState>> {
        if self.consumer.is_none() {
            self.consumer = Some(self.settings.consumer()?);
        }
        let Some(consumer) = &self.consumer else {
            return Ok(Vec::new());
        };
        let s = &self.settings;
        let metadata = consumer
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .map_err(|e| external(&s.servers, "listing topics", e))?;
        // A topic read by two tables would be assigned twice to one consumer and its
        // records decoded for one of them only: refused.
        let mut owner: BTreeMap<&str, usize> = BTreeMap::new();
        let mut out = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            let mut parts: Vec<(String, i32)> = Vec::new();
            for t in metadata.topics() {
                let wanted = match &entry.topics {
                    Topics::Names(n) => n.iter().any(|n| n == t.name()),
                    Topics::Pattern(re) => re.is_match(t.name()),
                };
                if !wanted {
                    continue;
                }
                if let Some(j) = owner.insert(t.name(), i) {
                    return Err(FerryError::config(format!(
                        "{NAME}: topic '{}' is read by table_list[{j}] and table_list[{i}]; a topic may be read by one table only",
                        t.name()
                    )));
                }
                parts.extend(
                    t.partitions()
                        .iter()
                        .map(|p| (t.name().to_string(), p.id())),
                );
            }
            // (Checked at the first listing: a named topic that went away later is the
            // readers' error, not discovery's.)
            if let (true, Topics::Names(names)) = (first, &entry.topics) {
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
            parts.retain(|k| !self.known.contains(k));
            parts.sort();
            let table = (self.entries.len() > 1).then(|| entry.table.name.to_string());
            let start = if first {
                &entry.start
            } else {
                &StartMode::Earliest
            };
            for mut p in starts(s, self.bounded, consumer, start, parts)? {
                p.table.clone_from(&table);
                p.entry = i;
                out.push(p);
            }
        }
        Ok(out)
    }
}

/// The partitions' states at the offsets `start` gives them.
fn starts(
    s: &Settings,
    bounded: bool,
    consumer: &BaseConsumer,
    start: &StartMode,
    parts: Vec<(String, i32)>,
) -> Result<Vec<PartState>> {
    let mut committed = BTreeMap::new();
    if *start == StartMode::GroupOffsets && !parts.is_empty() {
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
    if let StartMode::Timestamp(ts) = start {
        let mut tpl = TopicPartitionList::new();
        for (t, p) in &parts {
            tpl.add_partition_offset(t, *p, Offset::Offset(*ts))
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
        let next = match start {
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
            table: None,
            entry: 0,
            next: next.clamp(low, high.max(low)),
            end: bounded.then_some(high),
            from_timestamp: match start {
                StartMode::Timestamp(ts) => Some(*ts),
                _ => None,
            },
        });
    }
    Ok(out)
}

impl SplitEnumerator for Enumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        let due = self
            .discovery
            .is_some_and(|every| self.listed_at.elapsed() >= every);
        if !self.listed || due {
            let first = !self.listed;
            let parts = self.list(first)?;
            self.listed = true;
            self.listed_at = Instant::now();
            if !first && !parts.is_empty() {
                tracing::info!(
                    partitions = parts.len(),
                    "Kafka: new partitions found; read from their earliest offset"
                );
            }
            for p in parts {
                let reader = self.known.len() % self.parallelism;
                self.known.insert((p.topic.clone(), p.partition));
                self.pending.push((reader, p.split()?));
            }
        }
        if self.discovery.is_none() {
            // Not needed again: close the connection.
            self.consumer = None;
        }
        Ok(std::mem::take(&mut self.pending))
    }
    fn is_exhausted(&self) -> bool {
        self.listed && self.pending.is_empty() && self.discovery.is_none()
    }
    fn add_splits_back(&mut self, splits: Vec<Split>, reader: usize) {
        self.pending.extend(splits.into_iter().map(|s| (reader, s)));
    }
    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Value> {
        Ok(json!({ "pending": self.pending, "known": self.known }))
    }
}

struct Reader {
    settings: Arc<Settings>,
    entries: Arc<Vec<Entry>>,
    /// Where the assigned partitions' records arrive. Declared before `consumer`: it
    /// must be released before its client.
    fetch: Option<FetchQueue>,
    /// The consumer; its own queue brings errors and commit results, not records.
    consumer: Option<BaseConsumer>,
    parts: BTreeMap<(String, i32), PartState>,
    no_more: bool,
    /// (checkpoint, offsets it holds), committed to the group when it completes.
    pending_commits: Vec<(u64, Vec<PartState>)>,
    /// Each partition's high watermark as last asked, and when: the consumer lag figure.
    high: BTreeMap<(String, i32), (i64, Instant)>,
    /// The buffers a batch's record values are gathered in, kept between polls.
    scratch: (Vec<u8>, Vec<usize>),
    /// The partitions the consumer is assigned now (see [`Reader::assign`]).
    assigned: BTreeSet<(String, i32)>,
}

/// How old a partition's high watermark may get before it is asked again (one partition
/// per poll, with a short timeout, so that a poll is never held up for long).
const WATERMARK_EVERY: Duration = Duration::from_secs(5);
const WATERMARK_TIMEOUT: Duration = Duration::from_millis(100);

impl Reader {
    /// Makes the consumer's assignment every partition not read to its end: partitions
    /// that finished are taken away, new ones added at their next offset, and the rest
    /// left alone. Never a whole new assignment: that makes librdkafka stop and restart
    /// every partition, and a stop reply arriving for a partition restarted meanwhile
    /// aborts the process (`rd_kafka_assignment_partition_stopped: rktp_started`).
    fn assign(&mut self) -> Result<()> {
        if self.consumer.is_none() {
            self.consumer = Some(self.settings.consumer()?);
        }
        let Some(c) = &self.consumer else {
            return Ok(());
        };
        if self.fetch.is_none() {
            self.fetch = Some(FetchQueue::new(c).ok_or_else(|| {
                FerryError::internal("Kafka: librdkafka gave no queue for fetched records")
            })?);
        }
        let Some(fetch) = &self.fetch else {
            return Ok(());
        };
        let wanted: BTreeSet<(String, i32)> = self
            .parts
            .iter()
            .filter(|(_, p)| !p.done())
            .map(|(k, _)| k.clone())
            .collect();
        let mut gone = TopicPartitionList::new();
        for (t, p) in self.assigned.difference(&wanted) {
            gone.add_partition(t, *p);
        }
        if gone.count() > 0 {
            c.incremental_unassign(&gone)
                .map_err(|e| external(&self.settings.servers, "unassigning partitions", e))?;
        }
        let mut new = TopicPartitionList::new();
        for (t, p) in wanted.difference(&self.assigned) {
            // Before assigning it: from the start, its records go to the fetch queue.
            if !fetch.route(c, t, *p) {
                return Err(FerryError::internal(format!(
                    "Kafka: librdkafka gave no queue for partition {t}-{p}"
                )));
            }
            if let Some(state) = self.parts.get(&(t.clone(), *p)) {
                new.add_partition_offset(t, *p, Offset::Offset(state.next))
                    .map_err(|e| FerryError::internal(format!("Kafka offsets: {e}")))?;
            }
        }
        if new.count() > 0 {
            c.incremental_assign(&new)
                .map_err(|e| external(&self.settings.servers, "assigning partitions", e))?;
        }
        self.assigned = wanted;
        Ok(())
    }

    fn all_done(&self) -> bool {
        self.parts.values().all(PartState::done)
    }

    /// Asks the broker for the high watermark of the partition whose figure is oldest,
    /// when it is older than [`WATERMARK_EVERY`]. A failure only leaves the figure as it was.
    fn refresh_one_watermark(&mut self) {
        let Some(c) = &self.consumer else {
            return;
        };
        let stale = self
            .parts
            .keys()
            .filter(|k| {
                self.high
                    .get(*k)
                    .is_none_or(|(_, at)| at.elapsed() >= WATERMARK_EVERY)
            })
            .min_by_key(|k| self.high.get(*k).map(|(_, at)| *at))
            .cloned();
        if let Some((topic, partition)) = stale {
            match c.fetch_watermarks(&topic, partition, WATERMARK_TIMEOUT) {
                Ok((_, high)) => {
                    self.high.insert((topic, partition), (high, Instant::now()));
                }
                Err(e) => {
                    tracing::debug!(error = %e, topic, partition, "Kafka: watermark not read");
                    // Try the others first next time.
                    let old = self
                        .high
                        .get(&(topic.clone(), partition))
                        .map_or(-1, |h| h.0);
                    self.high.insert((topic, partition), (old, Instant::now()));
                }
            }
        }
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
    /// `lag_messages`: records between each partition's next offset and its high watermark
    /// (asked at most every 5 s), summed over the reader's partitions.
    fn figures(&self) -> Vec<(&'static str, f64)> {
        let lag: i64 = self
            .parts
            .iter()
            .filter_map(|(k, p)| {
                let (high, _) = self.high.get(k)?;
                (*high >= 0).then(|| (high - p.next).max(0))
            })
            .sum();
        if self.high.is_empty() {
            return Vec::new();
        }
        vec![("lag_messages", lag as f64)]
    }

    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in splits {
            let mut p: PartState = s.read_state()?;
            p.entry = match &p.table {
                None if self.entries.len() == 1 => 0,
                None => {
                    return Err(FerryError::config(format!(
                        "{NAME}: the checkpoint's split {}-{} was taken without table_list; it cannot be restored into a job with several tables",
                        p.topic, p.partition
                    )))
                }
                Some(t) => self
                    .entries
                    .iter()
                    .position(|e| &*e.table.name == t)
                    .ok_or_else(|| {
                        FerryError::config(format!(
                            "{NAME}: the checkpoint's split {}-{} belongs to table '{t}', which the job's table_list no longer has",
                            p.topic, p.partition
                        ))
                    })?,
            };
            self.parts.insert((p.topic.clone(), p.partition), p);
        }
        self.assign()
    }

    fn no_more_splits(&mut self) {
        self.no_more = true;
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
        self.refresh_one_watermark();
        if self.all_done() {
            return Ok(if self.no_more {
                ReadStatus::Finished
            } else {
                ReadStatus::Idle(Duration::from_millis(100))
            });
        }
        let (Some(consumer), Some(fetch)) = (&self.consumer, &mut self.fetch) else {
            return Ok(ReadStatus::Idle(Duration::from_millis(100)));
        };
        // The consumer's own queue: errors and commit results only (records go to
        // `fetch`). A record there would mean a partition not routed: refuse rather than
        // read around it.
        match consumer.poll(Duration::ZERO) {
            None | Some(Err(KafkaError::PartitionEOF(_))) => {}
            Some(Ok(m)) => {
                return Err(FerryError::internal(format!(
                    "Kafka: a record of {}-{} arrived outside the reader's fetch queue",
                    m.topic(),
                    m.partition()
                )))
            }
            Some(Err(e @ KafkaError::MessageConsumptionFatal(_))) => {
                return Err(external(&self.settings.servers, "consuming", e));
            }
            Some(Err(e)) => {
                // librdkafka retries transport errors by itself; they are reported here
                // only for information.
                tracing::warn!(error = %e, "Kafka: consumer error");
            }
        }
        let started = Instant::now();
        // Every record value of the batch in one buffer (`ends[i]` is where value i ends),
        // not a vector a record.
        // Kept from the batch before, so that a batch's buffer is not grown anew.
        let (mut buf, mut ends) = std::mem::take(&mut self.scratch);
        buf.clear();
        ends.clear();
        let mut reassign = false;
        let mut tombstones = 0usize;
        // The table of the batch being built (records of one table per batch).
        let mut entry: Option<usize> = None;
        // The partition of the record before: records come in runs of one partition, so
        // its key is made (a String) once a run, not once a record.
        let mut at: Option<(u64, *const rdkafka::bindings::rd_kafka_topic_t, i32)> = None;
        let mut key: (String, i32) = (String::new(), -1);
        while ends.len() < MAX_BATCH {
            // (The clock is read only while nothing is gathered: a batch under way
            // takes what is already fetched and does not wait.)
            let wait = if ends.is_empty() {
                POLL_WAIT.saturating_sub(started.elapsed())
            } else {
                Duration::ZERO
            };
            let Some(m) = fetch.next(wait) else {
                break;
            };
            match m.error() {
                None => {}
                Some(RDKafkaErrorCode::PartitionEOF) => continue,
                Some(code) => {
                    // librdkafka retries transport errors by itself; they are reported
                    // here only for information.
                    tracing::warn!(error = %code, topic = m.topic(), partition = m.partition(), "Kafka: consumer error");
                    break;
                }
            }
            if at != Some(m.run()) {
                at = Some(m.run());
                key = (m.topic().to_string(), m.partition());
            }
            let Some(p) = self.parts.get_mut(&key) else {
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
            if let Some(from) = p.from_timestamp {
                if m.timestamp_ms().is_some_and(|t| t < from) {
                    p.next = m.offset() + 1;
                    if p.done() {
                        reassign = true;
                    }
                    continue;
                }
                p.from_timestamp = None;
            }
            if entry.is_some_and(|e| e != p.entry) {
                // A record of another table: it starts the next batch. Its partition's
                // `next` still points at it, so a snapshot taken first reads it again.
                fetch.put_back();
                break;
            }
            entry = Some(p.entry);
            p.next = m.offset() + 1;
            match m.payload() {
                Some(b) => {
                    buf.extend_from_slice(b);
                    ends.push(buf.len());
                }
                None => tombstones += 1,
            }
            if p.done() {
                reassign = true;
            }
        }
        let held = fetch.holds_records();
        if tombstones > 0 {
            tracing::debug!(tombstones, "Kafka: records without a value were left out");
        }
        // (Not while records are held: their partitions' positions are past them.)
        if ends.is_empty() && !held && self.parts.values().any(|p| p.end.is_some()) {
            reassign |= self.advance_to_positions()?;
        }
        if reassign {
            self.assign()?;
        }
        let Some(entry) = entry.filter(|_| !ends.is_empty()) else {
            if held {
                return Ok(ReadStatus::Idle(Duration::ZERO));
            }
            if self.all_done() && self.no_more {
                return Ok(ReadStatus::Finished);
            }
            return Ok(ReadStatus::Idle(Duration::from_millis(20)));
        };
        let Entry { decoder, table, .. } = &self.entries[entry];
        let mut start = 0;
        let refs: Vec<&[u8]> = ends
            .iter()
            .map(|&end| {
                let r = &buf[start..end];
                start = end;
                r
            })
            .collect();
        let decoded = decoder.decode(NAME, &refs)?;
        drop(refs);
        self.scratch = (buf, ends);
        if decoded.skipped > 0 {
            tracing::warn!(
                skipped = decoded.skipped,
                "Kafka: records that do not decode were left out"
            );
        }
        let table = table.name.clone();
        Ok(ReadStatus::Batch(match decoded.kinds {
            Some(kinds) => ChangeBatch::with_kinds(table, decoded.batch, kinds),
            None => ChangeBatch::inserts(table, decoded.batch),
        }))
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
        self.fetch = None;
        self.consumer = None;
        Ok(())
    }
}
