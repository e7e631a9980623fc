//! The MQTT sink: QoS 1 publishes, every acknowledgement awaited at each checkpoint.

use std::sync::Arc;
use std::time::Duration;

use ferry_api::options::{OptionSpec, Options};
use ferry_api::{
    ChangeBatch, FerryError, JobContext, Result, Sink, SinkDelivery, SinkFactory, SinkWriter,
    TableSchema, WriterContext,
};
use ferry_formats::{read_sink_format, Encoder, Format, SINK_FORMAT_OPTIONS};
use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event};
use serde_json::Value;
use tokio::sync::watch;

use crate::{Broker, CONNECTION_OPTIONS, NAME};

ferry_api::declare_options! {
    /// The sink's own options (with [`SINK_FORMAT_OPTIONS`]).
    struct SinkOptions => SINK_ONLY {
        /// Client id prefix; each writer adds its index (default: ferry-<job id>).
        client_id: String = "client_id", optional;
        /// Publish with the retain flag.
        retain: bool = "retain", default false;
    }
}

/// How long the broker may take to acknowledge what a checkpoint holds.
const ACK_TIMEOUT: Duration = Duration::from_secs(60);

/// The `Mqtt` sink.
pub struct MqttSinkFactory;

impl SinkFactory for MqttSinkFactory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Publishes rows to an MQTT topic with QoS 1 (at-least-once)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        ferry_api::concat_specs!(CONNECTION_OPTIONS, SINK_ONLY, SINK_FORMAT_OPTIONS)
    }
    fn create(
        &self,
        o: &mut Options,
        _input: &[TableSchema],
        job: &JobContext,
    ) -> Result<Arc<dyn Sink>> {
        let broker = Broker::read(o)?;
        if broker.topic.contains(['+', '#']) {
            return Err(o.error("topic", "a sink publishes to one topic: no wildcards"));
        }
        let own = SinkOptions::read(o)?;
        let client_id = own
            .client_id
            .unwrap_or_else(|| format!("ferry-{}", job.job_id));
        let retain = own.retain;
        let format = read_sink_format(o)?;
        o.finish(self.options())?;
        Ok(Arc::new(MqttSink {
            broker,
            client_id,
            retain,
            format,
        }))
    }
}

#[derive(Debug)]
struct MqttSink {
    broker: Broker,
    client_id: String,
    retain: bool,
    format: Format,
}

impl Sink for MqttSink {
    fn delivery(&self) -> SinkDelivery {
        SinkDelivery::AtLeastOnce
    }
    fn delivery_reason(&self) -> Option<String> {
        Some("at-least-once: QoS 1 publishes, each checkpoint waits for the broker's acknowledgements; rows after the last checkpoint are published again after a restart".into())
    }
    fn create_writer(
        &self,
        ctx: &WriterContext,
        _restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        let mut options = self
            .broker
            .options(&format!("{}-{}", self.client_id, ctx.subtask));
        options.set_clean_start(true);
        let (client, mut eventloop) = AsyncClient::new(options, 1024);
        let (acked_tx, acked) = watch::channel(Ok::<u64, String>(0));
        let broker = self.broker.clone();
        let task = ferry_api::io::runtime()?.spawn(async move {
            let mut n = 0u64;
            loop {
                match eventloop.poll().await {
                    Ok(Event::Incoming(Packet::PubAck(_))) => {
                        n += 1;
                        if acked_tx.send(Ok(n)).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = acked_tx.send(Err(broker.error("publishing to", e).to_string()));
                        return;
                    }
                }
            }
        });
        Ok(Box::new(Writer {
            broker: self.broker.clone(),
            client,
            task,
            acked,
            published: 0,
            retain: self.retain,
            encoder: Encoder {
                format: self.format.clone(),
            },
        }))
    }
}

struct Writer {
    broker: Broker,
    client: AsyncClient,
    /// Drives the connection; counts the broker's acknowledgements into `acked`.
    task: tokio::task::JoinHandle<()>,
    acked: watch::Receiver<std::result::Result<u64, String>>,
    published: u64,
    retain: bool,
    encoder: Encoder,
}

impl Writer {
    /// Waits until every message published so far is acknowledged.
    fn confirm(&mut self) -> Result<()> {
        let want = self.published;
        let mut acked = self.acked.clone();
        let broker = self.broker.clone();
        ferry_api::io::handle()?.block_on(async move {
            let wait = acked.wait_for(|r| r.as_ref().map_or(true, |n| *n >= want));
            match tokio::time::timeout(ACK_TIMEOUT, wait).await {
                Err(_) => Err(broker.error("waiting for acknowledgements from", "timed out")),
                Ok(Err(_)) => Err(broker.error("publishing to", "the connection ended")),
                Ok(Ok(r)) => match &*r {
                    Ok(_) => Ok(()),
                    Err(e) => Err(FerryError::external(NAME, e.clone())),
                },
            }
        })
    }
}

impl SinkWriter for Writer {
    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        let encoder = self.encoder.batch(&batch.data);
        let bodies: Vec<Vec<u8>> = (0..batch.num_rows())
            .map(|i| encoder.encode(i))
            .collect::<std::result::Result<_, String>>()
            .map_err(|e| FerryError::data(NAME, e))?;
        let n = bodies.len() as u64;
        let client = self.client.clone();
        let (topic, retain, broker) = (self.broker.topic.clone(), self.retain, self.broker.clone());
        ferry_api::io::handle()?.block_on(async move {
            for body in bodies {
                client
                    .publish(topic.clone(), QoS::AtLeastOnce, retain, body)
                    .await
                    .map_err(|e| broker.error("publishing to", e))?;
            }
            Ok::<_, FerryError>(())
        })?;
        self.published += n;
        Ok(())
    }

    fn prepare_commit(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        self.confirm()?;
        Ok(None)
    }

    fn close(&mut self) -> Result<()> {
        self.confirm()?;
        let _ = self.client.try_disconnect();
        Ok(())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
