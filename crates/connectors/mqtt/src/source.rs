//! The MQTT source: a persistent session, messages acknowledged after checkpoints.

use std::time::Duration;

use ferry_api::io::{Fetched, Fetcher, Readiness};
use ferry_api::options::{OptionKind, OptionSpec, Options};
use ferry_api::{
    Boundedness, ChangeBatch, EnumeratorContext, FerryError, JobContext, JobMode, ReadStatus,
    ReaderContext, Result, Source, SourceFactory, SourceReader, Split, SplitEnumerator,
    TableSchema,
};
use ferry_formats::{read_format, read_schema, Decoder, FORMAT_OPTIONS, SCHEMA_OPTIONS};
use rumqttc::v5::mqttbytes::v5::{Packet, Publish};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event};
use serde_json::{json, Value};

use crate::{Broker, CONNECTION_OPTIONS, NAME};

const SOURCE_ONLY: &[OptionSpec] = &[
    OptionSpec::required("client_id", OptionKind::String, "The client id of the persistent session: the broker keeps the subscription and the unacknowledged and queued messages under it."),
    OptionSpec::optional("session_expiry_interval", OptionKind::Int, Some("86400"), "Seconds the broker keeps the session while the job is down."),
    OptionSpec::required("schema", OptionKind::Object, "schema { fields { name = type } }: the columns of the messages."),
];

/// The `Mqtt` source.
pub struct MqttSourceFactory;

impl SourceFactory for MqttSourceFactory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Reads rows from an MQTT topic (QoS 1, persistent session, at-least-once)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        static OPTIONS: std::sync::OnceLock<Vec<OptionSpec>> = std::sync::OnceLock::new();
        OPTIONS.get_or_init(|| {
            [
                CONNECTION_OPTIONS,
                SOURCE_ONLY,
                SCHEMA_OPTIONS,
                FORMAT_OPTIONS,
            ]
            .concat()
        })
    }
    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        if job.mode == JobMode::Batch {
            return Err(FerryError::config(format!(
                "{}: an MQTT topic has no end: run the job with job.mode = STREAMING",
                o.location().describe()
            )));
        }
        let broker = Broker::read(o)?;
        let client_id = o.required_string("client_id")?;
        let expiry = o.u64("session_expiry_interval")?.unwrap_or(86_400);
        let expiry = u32::try_from(expiry)
            .map_err(|_| o.error("session_expiry_interval", "is too large"))?;
        let table = read_schema(o, NAME)?
            .ok_or_else(|| o.error("schema", "is required: schema { fields { name = type } }"))?;
        let (format, on_error) = read_format(o)?;
        o.finish(self.options())?;
        Ok(Box::new(MqttSource {
            broker,
            client_id,
            expiry,
            decoder: Decoder {
                schema: table.schema.clone(),
                format,
                on_error,
            },
            table,
        }))
    }
}

#[derive(Debug)]
struct MqttSource {
    broker: Broker,
    client_id: String,
    expiry: u32,
    table: TableSchema,
    decoder: Decoder,
}

impl Source for MqttSource {
    fn boundedness(&self) -> Boundedness {
        Boundedness::Unbounded
    }
    fn tables(&self) -> Vec<TableSchema> {
        vec![self.table.clone()]
    }
    fn is_replayable(&self) -> bool {
        // Messages read before a checkpoint whose acknowledgements a crash lost come
        // again, with nothing to tell them apart.
        false
    }
    fn needs_long_lived_reader(&self) -> Option<String> {
        Some(
            "MQTT acknowledges QoS 1 messages (PUBACK) on the session that received them, when \
             the checkpoint holding their rows completes; a reader that ends with its \
             micro-batch would leave them unacknowledged, to be delivered again"
                .into(),
        )
    }
    fn create_enumerator(
        &self,
        _ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        // One session (one client id) can have one connection: reader 0 holds it.
        let pending = restored.and_then(|v| v.as_bool()) != Some(true);
        Ok(Box::new(Enumerator { pending }))
    }
    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(Reader {
            broker: self.broker.clone(),
            client_id: self.client_id.clone(),
            expiry: self.expiry,
            decoder: self.decoder.clone(),
            table: self.table.name.clone(),
            readiness: Readiness::new(),
            split: false,
            no_more: false,
            client: None,
            fetcher: None,
            unacked: Vec::new(),
            pending: Vec::new(),
        }))
    }
}

struct Enumerator {
    pending: bool,
}

impl SplitEnumerator for Enumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        if !std::mem::take(&mut self.pending) {
            return Ok(Vec::new());
        }
        Ok(vec![(
            0,
            Split {
                id: "session".into(),
                state: json!({}),
            },
        )])
    }
    fn is_exhausted(&self) -> bool {
        !self.pending
    }
    fn add_splits_back(&mut self, _splits: Vec<Split>, _reader: usize) {
        self.pending = true;
    }
    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Value> {
        Ok(json!(!self.pending))
    }
}

struct Reader {
    broker: Broker,
    client_id: String,
    expiry: u32,
    decoder: Decoder,
    table: std::sync::Arc<str>,
    readiness: Readiness,
    split: bool,
    no_more: bool,
    client: Option<AsyncClient>,
    fetcher: Option<Fetcher<Publish>>,
    /// Messages emitted since the last snapshot, to acknowledge with the next checkpoint.
    unacked: Vec<Publish>,
    /// (checkpoint, its messages), acknowledged when the checkpoint completes.
    pending: Vec<(u64, Vec<Publish>)>,
}

impl Reader {
    fn start(&mut self) -> Result<()> {
        let mut options = self.broker.options(&self.client_id);
        options
            .set_clean_start(false)
            .set_session_expiry_interval(Some(self.expiry))
            .set_manual_acks(true)
            .set_receive_maximum(Some(u16::MAX));
        let (client, mut eventloop) = AsyncClient::new(options, 1024);
        let broker = self.broker.clone();
        let subscriber = client.clone();
        self.fetcher = Some(Fetcher::spawn(
            1024,
            &self.readiness,
            move |tx| async move {
                if let Err(e) = subscriber
                    .subscribe(broker.topic.clone(), QoS::AtLeastOnce)
                    .await
                {
                    tx.send(Err(broker.error("subscribing to", e))).await;
                    return;
                }
                loop {
                    match eventloop.poll().await {
                        Ok(Event::Incoming(Packet::Publish(p))) => {
                            if !tx.send(Ok(p)).await {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tx.send(Err(broker.error("reading from", e))).await;
                            return;
                        }
                    }
                }
            },
        )?);
        self.client = Some(client);
        Ok(())
    }
}

impl SourceReader for Reader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        if !splits.is_empty() && !self.split {
            self.split = true;
            self.start()?;
        }
        Ok(())
    }

    fn no_more_splits(&mut self) {
        self.no_more = true;
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
        let Some(fetcher) = self.fetcher.as_mut() else {
            return Ok(ReadStatus::Idle(Duration::from_secs(1)));
        };
        let mut got = Vec::new();
        while got.len() < 4096 {
            match fetcher.try_next()? {
                Fetched::Item(p) => got.push(p),
                Fetched::Empty => break,
                Fetched::Closed => {
                    return Err(FerryError::external(
                        NAME,
                        format!("the connection to {} ended", self.broker.address()),
                    ))
                }
            }
        }
        if got.is_empty() {
            return Ok(ReadStatus::Idle(Duration::from_secs(5)));
        }
        let bodies: Vec<&[u8]> = got.iter().map(|p| p.payload.as_ref()).collect();
        let decoded = self.decoder.decode(NAME, &bodies)?;
        if decoded.skipped > 0 {
            tracing::warn!(
                skipped = decoded.skipped,
                topic = %self.broker.topic,
                "Mqtt: messages that do not decode were left out"
            );
        }
        self.unacked.extend(got);
        Ok(ReadStatus::Batch(ChangeBatch::inserts(
            self.table.clone(),
            decoded.batch,
        )))
    }

    fn readiness(&self) -> Option<Readiness> {
        Some(self.readiness.clone())
    }

    fn snapshot(&mut self, checkpoint_id: u64) -> Result<Vec<Split>> {
        if !self.unacked.is_empty() {
            self.pending
                .push((checkpoint_id, std::mem::take(&mut self.unacked)));
        }
        Ok(if self.split {
            vec![Split {
                id: "session".into(),
                state: json!({}),
            }]
        } else {
            Vec::new()
        })
    }

    fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        let Some(client) = self.client.clone() else {
            return Ok(());
        };
        let (done, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(c, _)| *c <= checkpoint_id);
        self.pending = later;
        let publishes: Vec<Publish> = done.into_iter().flat_map(|(_, p)| p).collect();
        if publishes.is_empty() {
            return Ok(());
        }
        let broker = self.broker.clone();
        // In delivery order, as MQTT wants acknowledgements.
        ferry_api::io::handle()?.block_on(async move {
            for p in &publishes {
                client
                    .ack(p)
                    .await
                    .map_err(|e| broker.error("acknowledging messages of", e))?;
            }
            Ok::<_, FerryError>(())
        })
    }

    fn close(&mut self) -> Result<()> {
        self.fetcher = None;
        if let Some(client) = self.client.take() {
            let _ = client.try_disconnect();
        }
        Ok(())
    }
}
