//! The MQTT source: a persistent session, messages acknowledged after checkpoints.

use std::time::Duration;

use ferry_api::io::{Fetched, Fetcher, Readiness};
use ferry_api::options::{OptionSpec, Options};
use ferry_api::{
    Boundedness, ChangeBatch, EnumeratorContext, FerryError, JobContext, JobMode, ReadStatus,
    ReaderContext, Result, Source, SourceFactory, SourceReader, Split, SplitEnumerator,
    TableSchema,
};
use ferry_formats::{
    read_format, require_schema, Decoder, OneSplit, FORMAT_OPTIONS, MESSAGE_SCHEMA, SCHEMA_OPTIONS,
};
use rumqttc::v5::mqttbytes::v5::{Packet, Publish};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event};
use serde_json::{json, Value};

use crate::{Broker, CONNECTION_OPTIONS, NAME};

ferry_api::declare_options! {
    /// The source's own options.
    struct SourceOptions => SOURCE_ONLY {
        /// The client id of the persistent session: the broker keeps the subscription and the unacknowledged and queued messages under it.
        client_id: String = "client_id", required;
        /// Seconds the broker keeps the session while the job is down.
        session_expiry_interval: u64 = "session_expiry_interval", default 86400;
    }
}

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
        ferry_api::concat_specs!(
            CONNECTION_OPTIONS,
            SOURCE_ONLY,
            MESSAGE_SCHEMA,
            SCHEMA_OPTIONS,
            FORMAT_OPTIONS,
        )
    }
    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        if job.mode == JobMode::Batch {
            return Err(FerryError::config(format!(
                "{}: an MQTT topic has no end: run the job with job.mode = STREAMING",
                o.location().describe()
            )));
        }
        let broker = Broker::read(o)?;
        let SourceOptions {
            client_id,
            session_expiry_interval: expiry,
        } = SourceOptions::read(o)?;
        let expiry = u32::try_from(expiry)
            .map_err(|_| o.error("session_expiry_interval", "is too large"))?;
        let table = require_schema(o, NAME)?;
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
        let split = Split {
            id: "session".into(),
            state: json!({}),
        };
        Ok(Box::new(OneSplit::new(split, restored)))
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
        let batch = self
            .decoder
            .decode_logged(NAME, &self.broker.topic, &bodies)?;
        self.unacked.extend(got);
        Ok(ReadStatus::Batch(ChangeBatch::inserts(
            self.table.clone(),
            batch,
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
