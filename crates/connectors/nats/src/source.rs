//! The NATS JetStream source: a durable pull consumer per stream, positioned by stream
//! sequence, acknowledged after checkpoints.

use std::time::Duration;

use ferry_api::io::{FetchSender, Fetched, Fetcher, Readiness};
use ferry_api::options::{OptionSpec, Options};
use ferry_api::{
    Boundedness, ChangeBatch, EnumeratorContext, FerryError, JobContext, JobMode, ReadStatus,
    ReaderContext, Result, Source, SourceFactory, SourceReader, Split, SplitEnumerator,
    TableSchema,
};
use ferry_formats::{
    read_format, require_schema, Decoder, OneSplit, PendingAcks, FORMAT_OPTIONS, MESSAGE_SCHEMA,
    SCHEMA_OPTIONS,
};
use serde_json::{json, Value};

use crate::client::{stream_sequence, Client, Sender};
use crate::{Server, CONNECTION_OPTIONS, NAME};

ferry_api::declare_options! {
    /// The source's own options.
    struct SourceOptions => SOURCE_ONLY {
        /// The JetStream stream to read.
        stream: String = "stream", required;
        /// Only messages on this subject (wildcards allowed); all of the stream's by default.
        subject: String = "subject", optional;
        /// The durable consumer's name: its ack floor shows what completed checkpoints hold.
        durable_name: String = "durable_name", required;
        /// Messages asked for per pull request.
        batch_size: u64 = "batch_size", default 256;
        /// Milliseconds before the server delivers an unacknowledged message again (redeliveries are left out).
        ack_wait: u64 = "ack_wait", default 600000;
    }
}

/// The `Nats` source.
pub struct NatsSourceFactory;

impl SourceFactory for NatsSourceFactory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Reads rows from a NATS JetStream stream, replayable by stream sequence"
    }
    fn options(&self) -> &'static [OptionSpec] {
        ferry_api::concat_specs!(
            CONNECTION_OPTIONS,
            SOURCE_ONLY,
            MESSAGE_SCHEMA,
            SCHEMA_OPTIONS,
            FORMAT_OPTIONS,
        )
    }
    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        let server = Server::read(o)?;
        let SourceOptions {
            stream,
            subject,
            durable_name: durable,
            batch_size,
            ack_wait,
        } = SourceOptions::read(o)?;
        let subject = subject.filter(|s| !s.is_empty());
        for (what, name) in [("stream", &stream), ("durable_name", &durable)] {
            if name.is_empty() || name.contains(['.', '*', '>', ' ']) {
                return Err(o.error(what, "must be a name without '.', '*', '>' or spaces"));
            }
        }
        let batch = match batch_size {
            n @ 1..=100_000 => n,
            n => return Err(o.error("batch_size", format!("{n} is not between 1 and 100000"))),
        };
        let ack_wait = Duration::from_millis(ack_wait.max(1000));
        let table = require_schema(o, NAME)?;
        let (format, on_error) = read_format(o)?;
        o.finish(self.options())?;
        Ok(Box::new(NatsSource {
            config: Config {
                server,
                stream,
                subject,
                durable,
                batch,
                ack_wait,
                bounded: job.mode == JobMode::Batch,
            },
            decoder: Decoder {
                schema: table.schema.clone(),
                format,
                on_error,
            },
            table,
        }))
    }
}

/// What a reader's consumer task needs.
#[derive(Debug, Clone)]
struct Config {
    server: Server,
    stream: String,
    subject: Option<String>,
    durable: String,
    batch: u64,
    ack_wait: Duration,
    bounded: bool,
}

#[derive(Debug)]
struct NatsSource {
    config: Config,
    table: TableSchema,
    decoder: Decoder,
}

impl Source for NatsSource {
    fn boundedness(&self) -> Boundedness {
        if self.config.bounded {
            Boundedness::Bounded
        } else {
            Boundedness::Unbounded
        }
    }
    fn tables(&self) -> Vec<TableSchema> {
        vec![self.table.clone()]
    }
    fn create_enumerator(
        &self,
        _ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        // One consumer per stream, read by reader 0: sequence order is what makes a replay
        // exact. Restored, the split is in that reader's state.
        let split = Split::typed(self.config.stream.clone(), &SplitState::default())?;
        Ok(Box::new(OneSplit::new(split, restored)))
    }
    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(Reader {
            config: self.config.clone(),
            decoder: self.decoder.clone(),
            table: self.table.name.clone(),
            readiness: Readiness::new(),
            split: None,
            no_more: false,
            fetcher: None,
            sender: None,
            seq: None,
            end: None,
            ended: false,
            last_emitted: None,
            pending_acks: PendingAcks::default(),
            acked: 0,
        }))
    }
}

/// What the consumer task hands to the reader.
enum Item {
    /// The consumer is in place. `start`: the first sequence it delivers; `last`: the
    /// stream's last sequence now.
    Opened {
        sender: Sender,
        start: u64,
        last: u64,
    },
    /// A message: its stream sequence, payload and acknowledgement subject.
    Message {
        seq: u64,
        payload: Vec<u8>,
        ack: String,
    },
    /// A bounded read has had every message up to its end.
    End,
}

/// Creates the durable consumer afresh, delivering from `start` (or, when `start` is
/// `None`, from after the existing consumer's ack floor, else from the stream's start).
async fn open(c: &Config, client: &mut Client, start: Option<u64>) -> Result<(u64, u64)> {
    let info = client
        .request(&format!("$JS.API.STREAM.INFO.{}", c.stream), &Value::Null)
        .await?;
    let last = info["state"]["last_seq"].as_u64().unwrap_or(0);
    let existing = client
        .request(
            &format!("$JS.API.CONSUMER.INFO.{}.{}", c.stream, c.durable),
            &Value::Null,
        )
        .await
        .ok();
    let start = match start {
        Some(s) => s,
        None => existing
            .as_ref()
            .and_then(|e| e["ack_floor"]["stream_seq"].as_u64())
            .map_or(1, |f| f + 1),
    };
    if existing.is_some() {
        // A consumer's start cannot be moved: it is recreated where the checkpoint says.
        client
            .request(
                &format!("$JS.API.CONSUMER.DELETE.{}.{}", c.stream, c.durable),
                &Value::Null,
            )
            .await?;
    }
    let mut config = json!({
        "durable_name": c.durable,
        "ack_policy": "all",
        "deliver_policy": "by_start_sequence",
        "opt_start_seq": start.max(1),
        "ack_wait": c.ack_wait.as_nanos() as u64,
        // Acknowledgements wait for checkpoints: the server must not stop delivering
        // while a checkpoint interval's messages are pending.
        "max_ack_pending": -1,
    });
    if let Some(s) = &c.subject {
        config["filter_subject"] = json!(s);
    }
    client
        .request(
            &format!("$JS.API.CONSUMER.DURABLE.CREATE.{}.{}", c.stream, c.durable),
            &json!({"stream_name": c.stream, "config": config}),
        )
        .await?;
    Ok((start.max(1), last))
}

/// The consumer task: opens the consumer, then pulls batches and hands them over.
async fn consume(c: Config, start: Option<u64>, end: Option<u64>, tx: FetchSender<Item>) {
    if let Err(e) = pull(&c, start, end, &tx).await {
        tx.send(Err(e)).await;
    }
}

async fn pull(
    c: &Config,
    start: Option<u64>,
    end: Option<u64>,
    tx: &FetchSender<Item>,
) -> Result<()> {
    {
        let mut client = Client::connect(&c.server).await?;
        let (start, last) = open(c, &mut client, start).await?;
        let end = if c.bounded {
            Some(end.unwrap_or(last))
        } else {
            None
        };
        if !tx
            .send(Ok(Item::Opened {
                sender: client.sender(),
                start,
                last,
            }))
            .await
        {
            return Ok(());
        }
        if end.is_some_and(|e| e < start) {
            tx.send(Ok(Item::End)).await;
            return Ok(());
        }
        let next = format!("$JS.API.CONSUMER.MSG.NEXT.{}.{}", c.stream, c.durable);
        loop {
            let reply = client.new_reply();
            let request = if c.bounded {
                json!({"batch": c.batch, "no_wait": true})
            } else {
                json!({"batch": c.batch, "expires": Duration::from_secs(5).as_nanos() as u64})
            };
            let mut out = Vec::new();
            Client::encode_publish(
                &mut out,
                &next,
                Some(&reply),
                &[],
                request.to_string().as_bytes(),
            );
            client.flush(&out).await?;
            let mut got = 0;
            while got < c.batch {
                let m = client.next_msg().await?;
                if m.subject == reply && m.reply.is_none() {
                    // A status: 404 no messages, 408 the request expired, 409 ….
                    if c.bounded && m.status.starts_with("404") {
                        tx.send(Ok(Item::End)).await;
                        return Ok(());
                    }
                    if !m.status.starts_with("40") {
                        return Err(c
                            .server
                            .error(&format!("pulling from stream '{}' on", c.stream), &m.status));
                    }
                    break;
                }
                let Some(ack) = m.reply else { continue };
                let Some(seq) = stream_sequence(&ack) else {
                    continue;
                };
                got += 1;
                if end.is_some_and(|e| seq > e) {
                    tx.send(Ok(Item::End)).await;
                    return Ok(());
                }
                if !tx
                    .send(Ok(Item::Message {
                        seq,
                        payload: m.payload,
                        ack,
                    }))
                    .await
                {
                    return Ok(());
                }
                if end == Some(seq) {
                    tx.send(Ok(Item::End)).await;
                    return Ok(());
                }
            }
        }
    }
}

struct Reader {
    config: Config,
    decoder: Decoder,
    table: std::sync::Arc<str>,
    readiness: Readiness,
    split: Option<String>,
    no_more: bool,
    fetcher: Option<Fetcher<Item>>,
    sender: Option<Sender>,
    /// The stream sequence of the last row emitted (the split's state).
    seq: Option<u64>,
    /// Bounded reads: the last sequence to read.
    end: Option<u64>,
    /// A bounded read is complete.
    ended: bool,
    /// The sequence and acknowledgement subject of the newest message emitted since the
    /// last snapshot.
    last_emitted: Option<(u64, String)>,
    /// The sequence and acknowledgement subject of the last message each checkpoint covers.
    pending_acks: PendingAcks<(u64, String)>,
    /// The last sequence acknowledged.
    acked: u64,
}

/// A split's state: the last stream sequence emitted, a bounded read's end, and whether
/// that end was reached. Absent fields are written as nothing, as the first split has none.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct SplitState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    ended: bool,
}

impl Reader {
    fn state(&self) -> SplitState {
        SplitState {
            seq: self.seq,
            end: self.end,
            ended: self.ended,
        }
    }
}

impl SourceReader for Reader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in splits {
            if self.split.is_some() {
                continue;
            }
            let state: SplitState = s.read_state()?;
            (self.seq, self.end, self.ended) = (state.seq, state.end, state.ended);
            self.split = Some(s.id);
            if self.ended {
                continue;
            }
            let (c, start, end) = (self.config.clone(), self.seq.map(|q| q + 1), self.end);
            self.fetcher = Some(Fetcher::spawn(
                (self.config.batch as usize).max(16),
                &self.readiness,
                move |tx| consume(c, start, end, tx),
            )?);
        }
        Ok(())
    }

    fn no_more_splits(&mut self) {
        self.no_more = true;
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
        if self.ended {
            return Ok(ReadStatus::Finished);
        }
        let Some(fetcher) = self.fetcher.as_mut() else {
            return Ok(if self.split.is_none() && self.no_more {
                ReadStatus::Finished
            } else {
                ReadStatus::Idle(Duration::from_secs(1))
            });
        };
        let mut bodies = Vec::new();
        let mut last = None;
        while bodies.len() < 4096 {
            match fetcher.try_next()? {
                Fetched::Item(Item::Opened {
                    sender,
                    start,
                    last: stream_last,
                }) => {
                    self.sender = Some(sender);
                    if self.config.bounded && self.end.is_none() {
                        self.end = Some(stream_last);
                    }
                    if self.seq.is_none() {
                        self.seq = Some(start - 1);
                    }
                }
                Fetched::Item(Item::Message { seq, payload, ack }) => {
                    // A redelivery of what was emitted already.
                    if self.seq.is_some_and(|s| seq <= s) {
                        continue;
                    }
                    self.seq = Some(seq);
                    last = Some((seq, ack));
                    bodies.push(payload);
                }
                Fetched::Item(Item::End) => {
                    self.ended = true;
                    break;
                }
                Fetched::Empty => break,
                Fetched::Closed => {
                    return Err(FerryError::external(
                        NAME,
                        format!("the consumer of stream '{}' ended", self.config.stream),
                    ))
                }
            }
        }
        if last.is_some() {
            // The newest message emitted: the next snapshot acknowledges up to it.
            self.last_emitted = last;
        }
        if bodies.is_empty() {
            return Ok(if self.ended {
                ReadStatus::Finished
            } else {
                ReadStatus::Idle(Duration::from_secs(5))
            });
        }
        let refs: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
        let batch = self
            .decoder
            .decode_logged(NAME, &self.config.stream, &refs)?;
        Ok(ReadStatus::Batch(ChangeBatch::inserts(
            self.table.clone(),
            batch,
        )))
    }

    fn readiness(&self) -> Option<Readiness> {
        Some(self.readiness.clone())
    }

    fn snapshot(&mut self, checkpoint_id: u64) -> Result<Vec<Split>> {
        // Only the newest message emitted so far needs acknowledging (AckAll).
        if let Some((seq, ack)) = self.last_emitted.take() {
            self.pending_acks.push(checkpoint_id, (seq, ack));
        }
        self.split
            .iter()
            .map(|id| Split::typed(id.clone(), &self.state()))
            .collect()
    }

    fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        let Some((seq, ack)) = self.pending_acks.complete(checkpoint_id) else {
            return Ok(());
        };
        let Some(sender) = &self.sender else {
            return Ok(());
        };
        if seq <= self.acked {
            return Ok(());
        }
        let mut out = Vec::new();
        Client::encode_publish(&mut out, &ack, None, &[], b"+ACK");
        let sender = sender.clone();
        ferry_api::io::handle()?.block_on(async move {
            tokio::time::timeout(Duration::from_secs(30), sender.send(&out))
                .await
                .unwrap_or_else(|_| Err(FerryError::external(NAME, "acknowledging timed out")))
        })?;
        self.acked = seq;
        Ok(())
    }
}
