//! The RabbitMQ source: a consumer per reader on the I/O runtime, acknowledgements after
//! the checkpoint completes.

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_api::io::{Fetched, Fetcher, Readiness};
use ferry_api::options::{OptionKind, OptionSpec, Options};
use ferry_api::{
    decode_state, encode_state, Boundedness, ChangeBatch, EnumeratorContext, FerryError,
    JobContext, JobMode, ReadStatus, ReaderContext, Result, Source, SourceFactory, SourceReader,
    Split, SplitEnumerator, TableSchema,
};
use ferry_formats::{
    read_format, require_schema, Decoder, PendingAcks, FORMAT_OPTIONS, SCHEMA_OPTIONS,
};
use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection};
use serde_json::Value;

use crate::{Broker, CONNECTION_OPTIONS, NAME};

ferry_api::declare_options! {
    /// The source's own options.
    struct SourceOptions => SOURCE_ONLY {
        /// Most deliveries the broker sends ahead of acknowledgements; at least the rows of one checkpoint interval, or reading stalls until the next checkpoint.
        prefetch_count: u64 = "prefetch_count", default 1000, min 1;
        /// Accepted for SeaTunnel job files: readers wait on the broker's deliveries without polling.
        _delivery_timeout: u64 = "delivery_timeout", optional;
        /// End after reading the messages the queue holds when the job starts (as a BATCH job does).
        for_e2e_testing: bool = "for_e2e_testing", default false;
        /// Every message carries a unique correlation id: deliveries read before are recognised after a restart, which makes the source exactly-once.
        use_correlation_id: bool = "use_correlation_id", default false;
    }
}

/// `schema`, which the source requires (read by [`require_schema`]).
const SCHEMA: &[OptionSpec] = &[OptionSpec::required(
    "schema",
    OptionKind::Object,
    "schema { fields { name = type } }: the columns of the JSON messages.",
)];

/// Every option of the source.
pub const SOURCE_OPTIONS: &[OptionSpec] = ferry_api::concat_specs!(
    CONNECTION_OPTIONS,
    SCHEMA,
    SOURCE_ONLY,
    SCHEMA_OPTIONS,
    FORMAT_OPTIONS,
);

/// SeaTunnel's `RabbitMQ` source.
pub struct RabbitmqSourceFactory;

impl SourceFactory for RabbitmqSourceFactory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Reads JSON rows from a RabbitMQ queue, acknowledging them after each checkpoint"
    }
    fn options(&self) -> &'static [OptionSpec] {
        SOURCE_OPTIONS
    }
    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        let broker = Broker::read(o)?;
        let table = require_schema(o, NAME)?;
        let (format, on_error) = read_format(o)?;
        let own = SourceOptions::read(o)?;
        let prefetch = u16::try_from(own.prefetch_count)
            .map_err(|_| o.error("prefetch_count", "at most 65535"))?;
        let bounded = job.mode == JobMode::Batch || own.for_e2e_testing;
        let correlation = own.use_correlation_id;
        o.finish(self.options())?;
        Ok(Box::new(RabbitmqSource {
            broker,
            decoder: Decoder {
                schema: table.schema.clone(),
                format,
                on_error,
            },
            table,
            prefetch,
            bounded,
            correlation,
        }))
    }
}

#[derive(Debug)]
struct RabbitmqSource {
    broker: Broker,
    table: TableSchema,
    decoder: Decoder,
    prefetch: u16,
    bounded: bool,
    correlation: bool,
}

impl Source for RabbitmqSource {
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
        // Without correlation ids, deliveries read before a checkpoint whose
        // acknowledgements were lost in a crash come again and cannot be told apart.
        self.correlation
    }
    fn needs_long_lived_reader(&self) -> Option<String> {
        Some(
            "RabbitMQ takes acknowledgements only on the channel that received the deliveries, \
             and they are sent when the checkpoint holding their rows completes; a reader that \
             ends with its micro-batch would leave them unacknowledged, to be delivered again"
                .into(),
        )
    }
    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let pending = match restored {
            Some(v) => decode_state::<Vec<(usize, Split)>>(&v, "the RabbitMQ enumerator")?,
            // A bounded read counts the queue's messages once, so one reader takes them
            // all; an unbounded one has every reader consume (competing consumers).
            None if self.bounded => vec![(0, fresh_split(0))],
            None => (0..ctx.parallelism.max(1))
                .map(|i| (i, fresh_split(i)))
                .collect(),
        };
        Ok(Box::new(Enumerator { pending }))
    }
    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(Reader {
            broker: self.broker.clone(),
            decoder: self.decoder.clone(),
            table: self.table.name.clone(),
            prefetch: self.prefetch,
            bounded: self.bounded,
            correlation: self.correlation,
            readiness: Readiness::new(),
            split: None,
            no_more: false,
            fetcher: None,
            channel: None,
            remaining: None,
            last_tag: 0,
            acked_tag: 0,
            pending_acks: PendingAcks::default(),
            unacked_ids: Vec::new(),
            restored_ids: BTreeSet::new(),
        }))
    }
}

fn fresh_split(i: usize) -> Split {
    Split {
        id: format!("consumer-{i}"),
        state: serde_json::json!({}),
    }
}

struct Enumerator {
    pending: Vec<(usize, Split)>,
}

impl SplitEnumerator for Enumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        Ok(std::mem::take(&mut self.pending))
    }
    fn is_exhausted(&self) -> bool {
        self.pending.is_empty()
    }
    fn add_splits_back(&mut self, splits: Vec<Split>, reader: usize) {
        self.pending.extend(splits.into_iter().map(|s| (reader, s)));
    }
    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Value> {
        encode_state(&self.pending, "the RabbitMQ enumerator")
    }
}

/// What the consumer task hands to the reader.
enum Item {
    /// The queue is declared; it held this many messages.
    Opened {
        /// The channel to acknowledge on, and its connection, kept alive with the reader:
        /// dropping it closes the connection, and the broker then delivers every
        /// unacknowledged message again. Boxed: it is far larger than a delivery.
        link: Box<(Channel, Connection)>,
        count: u32,
    },
    Delivery {
        tag: u64,
        body: Vec<u8>,
        correlation_id: Option<String>,
    },
}

struct Reader {
    broker: Broker,
    decoder: Decoder,
    table: std::sync::Arc<str>,
    prefetch: u16,
    bounded: bool,
    correlation: bool,
    readiness: Readiness,
    /// The split this reader consumes for (one consumer per reader).
    split: Option<String>,
    /// Whether the enumerator will assign nothing more.
    no_more: bool,
    fetcher: Option<Fetcher<Item>>,
    channel: Option<(Channel, Connection)>,
    /// Bounded reads: messages still to take (None until the queue is declared).
    remaining: Option<u64>,
    /// The delivery tag of the last delivery taken (emitted or recognised as a repeat).
    last_tag: u64,
    /// Everything up to this tag is acknowledged.
    acked_tag: u64,
    /// The last tag each checkpoint covers, acknowledged when the checkpoint completes.
    pending_acks: PendingAcks<u64>,
    /// Correlation ids of rows emitted and not acknowledged, with their tags.
    unacked_ids: Vec<(u64, String)>,
    /// Correlation ids a restored checkpoint held: rows read before the restart whose
    /// acknowledgement may not have reached the broker.
    restored_ids: BTreeSet<String>,
}

impl Reader {
    fn start(&mut self) -> Result<()> {
        let broker = self.broker.clone();
        let (prefetch, bounded) = (self.prefetch, self.bounded);
        self.fetcher = Some(Fetcher::spawn(
            prefetch as usize,
            &self.readiness,
            move |tx| async move {
                let (connection, channel, count) = match broker.open(None).await {
                    Ok(c) => c,
                    Err(e) => {
                        tx.send(Err(e)).await;
                        return;
                    }
                };
                // A bounded read may run without any checkpoint to acknowledge at: its
                // window holds the whole read (up to the protocol's limit), or it would
                // stall after `prefetch_count` deliveries.
                let window = if bounded {
                    prefetch.max(u16::try_from(count).unwrap_or(u16::MAX))
                } else {
                    prefetch
                };
                if let Err(e) = channel.basic_qos(window, BasicQosOptions::default()).await {
                    tx.send(Err(broker.error("setting prefetch_count on", e)))
                        .await;
                    return;
                }
                let consumer = channel
                    .basic_consume(
                        broker.queue.as_str().into(),
                        "".into(),
                        BasicConsumeOptions::default(),
                        FieldTable::default(),
                    )
                    .await;
                let opened = Item::Opened {
                    link: Box::new((channel, connection)),
                    count,
                };
                if !tx.send(Ok(opened)).await {
                    return;
                }
                let mut consumer = match consumer {
                    Ok(c) => c,
                    Err(e) => {
                        tx.send(Err(broker.error("consuming from", e))).await;
                        return;
                    }
                };
                while let Some(d) = consumer.next().await {
                    let item = d
                        .map(|d| Item::Delivery {
                            tag: d.delivery_tag,
                            correlation_id: d
                                .properties
                                .correlation_id()
                                .as_ref()
                                .map(|c| c.as_str().to_string()),
                            body: d.data,
                        })
                        .map_err(|e| broker.error("consuming from", e));
                    if !tx.send(item).await {
                        return;
                    }
                }
                tx.send(Err(
                    broker.error("consuming from", "the broker cancelled the consumer")
                ))
                .await;
            },
        )?);
        Ok(())
    }

    fn state(&self) -> SplitState {
        SplitState {
            remaining: self.remaining,
            correlation_ids: self.correlation.then(|| {
                self.unacked_ids
                    .iter()
                    .map(|(_, id)| id)
                    .chain(self.restored_ids.iter())
                    .cloned()
                    .collect()
            }),
        }
    }
}

/// A consumer split's state: how many messages a bounded read still takes, and the
/// correlation ids delivered but not yet acknowledged (with `for_e2e_testing`-style
/// deduplication by correlation id).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct SplitState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    remaining: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    correlation_ids: Option<BTreeSet<String>>,
}

impl SourceReader for Reader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in splits {
            if self.split.is_some() {
                // Another reader's consumer, given back after a failure: this reader's
                // consumer already takes from the same queue.
                continue;
            }
            let state: SplitState = s.read_state()?;
            self.remaining = state.remaining;
            if let Some(ids) = state.correlation_ids {
                self.restored_ids = ids;
            }
            self.split = Some(s.id);
            self.start()?;
        }
        Ok(())
    }

    fn no_more_splits(&mut self) {
        self.no_more = true;
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
        let Some(fetcher) = self.fetcher.as_mut() else {
            return Ok(if self.split.is_none() && self.bounded && self.no_more {
                // A bounded read gives its one split to reader 0; the others have nothing.
                ReadStatus::Finished
            } else {
                ReadStatus::Idle(Duration::from_secs(1))
            });
        };
        let mut bodies: Vec<Vec<u8>> = Vec::new();
        let mut ids = Vec::new();
        while bodies.len() < 4096 && self.remaining != Some(0) {
            match fetcher.try_next()? {
                Fetched::Item(Item::Opened { link, count }) => {
                    self.channel = Some(*link);
                    if self.bounded && self.remaining.is_none() {
                        self.remaining = Some(u64::from(count));
                    }
                }
                Fetched::Item(Item::Delivery {
                    tag,
                    body,
                    correlation_id,
                }) => {
                    self.last_tag = tag;
                    if self.correlation {
                        let id = correlation_id.ok_or_else(|| {
                            FerryError::data(
                                NAME,
                                format!(
                                    "a message in {} has no correlation id, but use_correlation_id = true",
                                    self.broker.address()
                                ),
                            )
                        })?;
                        // Read before the restart: acknowledged with this checkpoint,
                        // not emitted again.
                        if self.restored_ids.remove(&id) {
                            continue;
                        }
                        ids.push((tag, id));
                    }
                    if let Some(r) = self.remaining.as_mut() {
                        *r -= 1;
                    }
                    bodies.push(body);
                }
                Fetched::Empty => break,
                Fetched::Closed => {
                    return Err(FerryError::external(
                        NAME,
                        format!("the consumer of {} ended", self.broker.address()),
                    ))
                }
            }
        }
        if bodies.is_empty() {
            if self.bounded && self.remaining == Some(0) {
                return Ok(ReadStatus::Finished);
            }
            return Ok(ReadStatus::Idle(Duration::from_secs(5)));
        }
        self.unacked_ids.extend(ids);
        let refs: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
        let batch = self
            .decoder
            .decode_logged(NAME, &self.broker.queue, &refs)?;
        Ok(ReadStatus::Batch(ChangeBatch::inserts(
            self.table.clone(),
            batch,
        )))
    }

    fn readiness(&self) -> Option<Readiness> {
        Some(self.readiness.clone())
    }

    fn snapshot(&mut self, checkpoint_id: u64) -> Result<Vec<Split>> {
        if self.last_tag > self.acked_tag {
            self.pending_acks.push(checkpoint_id, self.last_tag);
        }
        self.split
            .iter()
            .map(|id| Split::typed(id.clone(), &self.state()))
            .collect()
    }

    fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        let Some(tag) = self.pending_acks.complete(checkpoint_id) else {
            return Ok(());
        };
        let Some((channel, _)) = &self.channel else {
            return Ok(());
        };
        // Delivery tags grow along the channel and rows are emitted in delivery order,
        // so one cumulative acknowledgement covers exactly the rows of the checkpoint.
        let ack = channel.basic_ack(tag, BasicAckOptions { multiple: true });
        ferry_api::io::handle()?
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), ack).await })
            .map_err(|_| {
                self.broker
                    .error("acknowledging deliveries on", "timed out")
            })?
            .map_err(|e| self.broker.error("acknowledging deliveries on", e))?;
        self.acked_tag = tag;
        self.unacked_ids.retain(|(t, _)| *t > tag);
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        self.fetcher = None;
        if let Some((channel, conn)) = self.channel.take() {
            let handle = ferry_api::io::handle()?;
            let _ = handle.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), async {
                    let _ = channel.close(200, "OK".into()).await;
                    let _ = conn.close(200, "OK".into()).await;
                })
                .await
            });
        }
        Ok(())
    }
}
