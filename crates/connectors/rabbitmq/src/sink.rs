//! The RabbitMQ sink: one JSON message per row, publisher confirms awaited at every
//! checkpoint.

use std::sync::Arc;
use std::time::Duration;

use ferry_api::options::{OptionSpec, Options};
use ferry_api::{
    ChangeBatch, FerryError, JobContext, Result, Sink, SinkDelivery, SinkFactory, SinkWriter,
    TableSchema, WriterContext,
};
use ferry_formats::{Encoder, Format};
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{BasicProperties, Channel, Confirmation, Connection, PublisherConfirm};
use serde_json::{Map, Value};

use crate::{Broker, CONNECTION_OPTIONS, NAME};

ferry_api::declare_options! {
    /// The sink's own options.
    struct SinkOptions => SINK_ONLY {
        /// The exchange to publish to (with routing_key); the default exchange routes to queue_name.
        exchange: String = "exchange", default "";
        /// The routing key; when set, messages go to `exchange` with it instead of to queue_name.
        routing_key: String = "routing_key", optional;
        /// Client settings as SeaTunnel's Java client takes them; only the ones Ferry's options name are used, the job fails on others.
        config: Map<String, Value> = "rabbitmq.config", optional;
    }
}

/// Messages published and not yet confirmed before a writer waits for the broker.
const MAX_UNCONFIRMED: usize = 16_384;

/// SeaTunnel's `RabbitMQ` sink.
pub struct RabbitmqSinkFactory;

impl SinkFactory for RabbitmqSinkFactory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Publishes rows as JSON messages to a RabbitMQ queue or exchange, confirmed at each checkpoint"
    }
    fn options(&self) -> &'static [OptionSpec] {
        ferry_api::concat_specs!(CONNECTION_OPTIONS, SINK_ONLY)
    }
    fn create(
        &self,
        o: &mut Options,
        _input: &[TableSchema],
        _job: &JobContext,
    ) -> Result<Arc<dyn Sink>> {
        let broker = Broker::read(o)?;
        let own = SinkOptions::read(o)?;
        let exchange = own.exchange;
        let routing_key = own.routing_key.filter(|k| !k.is_empty());
        if let Some(m) = own.config {
            if let Some(k) = m.keys().next() {
                return Err(o.error(
                    &format!("rabbitmq.config.{k}"),
                    "is not supported: set the connection through this connector's own options",
                ));
            }
        }
        o.finish(self.options())?;
        Ok(Arc::new(RabbitmqSink {
            broker,
            exchange,
            routing_key,
        }))
    }
}

#[derive(Debug)]
struct RabbitmqSink {
    broker: Broker,
    exchange: String,
    routing_key: Option<String>,
}

impl Sink for RabbitmqSink {
    fn delivery(&self) -> SinkDelivery {
        SinkDelivery::AtLeastOnce
    }
    fn delivery_reason(&self) -> Option<String> {
        Some(
            "at-least-once: every checkpoint waits for the broker's publisher confirms; rows after the last checkpoint are published again after a restart"
                .into(),
        )
    }
    fn create_writer(
        &self,
        _ctx: &WriterContext,
        _restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        let broker = self.broker.clone();
        let (connection, channel) = ferry_api::io::handle()?.block_on(async move {
            let (conn, channel, _) = broker.open(None).await?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(|e| broker.error("enabling publisher confirms on", e))?;
            Ok::<_, FerryError>((conn, channel))
        })?;
        let (exchange, routing_key) = match &self.routing_key {
            Some(k) => (self.exchange.clone(), k.clone()),
            None => (String::new(), self.broker.queue.clone()),
        };
        Ok(Box::new(Writer {
            broker: self.broker.clone(),
            connection: Some(connection),
            channel,
            exchange,
            routing_key,
            encoder: Encoder {
                format: Format::Json,
            },
            unconfirmed: Vec::new(),
        }))
    }
}

struct Writer {
    broker: Broker,
    connection: Option<Connection>,
    channel: Channel,
    exchange: String,
    routing_key: String,
    encoder: Encoder,
    unconfirmed: Vec<PublisherConfirm>,
}

impl Writer {
    /// Waits until the broker has confirmed every message published so far.
    fn confirm(&mut self) -> Result<()> {
        let pending = std::mem::take(&mut self.unconfirmed);
        if pending.is_empty() {
            return Ok(());
        }
        let broker = self.broker.clone();
        ferry_api::io::handle()?.block_on(async move {
            for p in pending {
                match p.await {
                    Ok(Confirmation::Ack(_)) | Ok(Confirmation::NotRequested) => {}
                    Ok(Confirmation::Nack(_)) => {
                        return Err(broker.error("publishing to", "the broker refused a message"))
                    }
                    Err(e) => return Err(broker.error("publishing to", e)),
                }
            }
            Ok(())
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
        let channel = self.channel.clone();
        let (exchange, key) = (self.exchange.clone(), self.routing_key.clone());
        let broker = self.broker.clone();
        let confirms = ferry_api::io::handle()?.block_on(async move {
            let mut confirms = Vec::with_capacity(bodies.len());
            for body in bodies {
                let c = channel
                    .basic_publish(
                        exchange.as_str().into(),
                        key.as_str().into(),
                        BasicPublishOptions::default(),
                        &body,
                        // Persistent, so that a durable queue keeps it over a broker restart.
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await
                    .map_err(|e| broker.error("publishing to", e))?;
                confirms.push(c);
            }
            Ok::<_, FerryError>(confirms)
        })?;
        self.unconfirmed.extend(confirms);
        if self.unconfirmed.len() >= MAX_UNCONFIRMED {
            self.confirm()?;
        }
        Ok(())
    }

    fn prepare_commit(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        self.confirm()?;
        Ok(None)
    }

    fn close(&mut self) -> Result<()> {
        self.confirm()?;
        if let Some(conn) = self.connection.take() {
            let channel = self.channel.clone();
            let _ = ferry_api::io::handle()?.block_on(async move {
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
