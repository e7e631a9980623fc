//! The NATS JetStream sink: one message per row with a deterministic `Nats-Msg-Id`,
//! each acknowledged by the stream.

use std::sync::Arc;
use std::time::Duration;

use ferry_api::options::{OptionSpec, Options};
use ferry_api::{
    ChangeBatch, FerryError, JobContext, Result, Sink, SinkDelivery, SinkFactory, SinkWriter,
    TableSchema, WriterContext,
};
use ferry_formats::{read_sink_format, Encoder, Format, SINK_FORMAT_OPTIONS};
use serde_json::Value;

use crate::client::{api_result, Client};
use crate::{Server, CONNECTION_OPTIONS, NAME};

ferry_api::declare_options! {
    /// The sink's own options (with [`SINK_FORMAT_OPTIONS`]).
    struct SinkOptions => SINK_ONLY {
        /// The subject to publish to; a JetStream stream must capture it.
        subject: String = "subject", required;
        /// Start of every Nats-Msg-Id (default: the job id): jobs writing to one stream need different ones.
        msg_id_prefix: String = "msg_id_prefix", optional;
    }
}

/// How long the stream may take to acknowledge a batch of messages.
const ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// The `Nats` sink.
pub struct NatsSinkFactory;

impl SinkFactory for NatsSinkFactory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Publishes rows to a NATS JetStream subject, deduplicated by message id"
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
        let server = Server::read(o)?;
        let own = SinkOptions::read(o)?;
        let subject = own.subject;
        if subject.is_empty() || subject.contains(['*', '>', ' ']) {
            return Err(o.error("subject", "must be a subject without wildcards or spaces"));
        }
        let format = read_sink_format(o)?;
        let prefix = own.msg_id_prefix.unwrap_or_else(|| job.job_id.clone());
        o.finish(self.options())?;
        Ok(Arc::new(NatsSink {
            server,
            subject,
            format,
            prefix,
        }))
    }
}

#[derive(Debug)]
struct NatsSink {
    server: Server,
    subject: String,
    format: Format,
    prefix: String,
}

impl Sink for NatsSink {
    fn delivery(&self) -> SinkDelivery {
        SinkDelivery::ExactlyOnce
    }
    fn delivery_reason(&self) -> Option<String> {
        Some("exactly-once in effect: every message carries a Nats-Msg-Id from (job, writer, checkpoint, position), so rows replayed after a restart within the stream's duplicate window are dropped by JetStream; it needs a replayable source and rows reaching the same writer in the same order".into())
    }
    fn create_writer(
        &self,
        ctx: &WriterContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        let epoch = match &restored {
            Some(v) => ferry_api::decode_state::<WriterState>(v, "a Nats writer")?.epoch,
            None => 0,
        };
        let server = self.server.clone();
        let client =
            ferry_api::io::handle()?.block_on(async move { Client::connect(&server).await })?;
        Ok(Box::new(Writer {
            server: self.server.clone(),
            client: Some(client),
            subject: self.subject.clone(),
            encoder: Encoder {
                format: self.format.clone(),
            },
            id_base: format!("{}-{}", self.prefix, ctx.subtask),
            epoch,
            position: 0,
        }))
    }
}

struct Writer {
    server: Server,
    client: Option<Client>,
    subject: String,
    encoder: Encoder,
    /// `<prefix>-<writer>`.
    id_base: String,
    /// The checkpoint the rows being written follow (0 before the first).
    epoch: u64,
    /// Rows written since that checkpoint.
    position: u64,
}

impl SinkWriter for Writer {
    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        let Some(mut client) = self.client.take() else {
            return Err(FerryError::internal("Nats writer used after a failure"));
        };
        let mut out = Vec::new();
        let mut replies = std::collections::HashSet::new();
        let encoder = self.encoder.batch(&batch.data);
        for i in 0..batch.num_rows() {
            let id = format!("{}-{}-{}", self.id_base, self.epoch, self.position);
            self.position += 1;
            let reply = client.new_reply();
            Client::encode_publish(
                &mut out,
                &self.subject,
                Some(&reply),
                &[("Nats-Msg-Id", id.as_str())],
                &encoder.encode(i).map_err(|e| FerryError::data(NAME, e))?,
            );
            replies.insert(reply);
        }
        let server = self.server.clone();
        let subject = self.subject.clone();
        let client = ferry_api::io::handle()?.block_on(async move {
            client.flush(&out).await?;
            let wait = async {
                while !replies.is_empty() {
                    let m = client.next_msg().await?;
                    if !replies.remove(&m.subject) {
                        continue;
                    }
                    if m.status.starts_with("503") {
                        return Err(server.error(
                            &format!("publishing to '{subject}' on"),
                            "no stream captures this subject",
                        ));
                    }
                    let v: Value = serde_json::from_slice(&m.payload).map_err(|e| {
                        server.error(
                            &format!("reading the acknowledgement of '{subject}' from"),
                            e,
                        )
                    })?;
                    api_result(&server, &format!("publishing to '{subject}'"), v)?;
                }
                Ok::<_, FerryError>(())
            };
            tokio::time::timeout(ACK_TIMEOUT, wait)
                .await
                .map_err(|_| {
                    server.error(
                        &format!("publishing to '{subject}' on"),
                        "no acknowledgement",
                    )
                })??;
            Ok::<_, FerryError>(client)
        })?;
        self.client = Some(client);
        Ok(())
    }

    fn prepare_commit(&mut self, checkpoint_id: u64) -> Result<Option<Value>> {
        // Every message is acknowledged by the stream when `write` returns.
        self.epoch = checkpoint_id;
        self.position = 0;
        Ok(None)
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        Ok(Some(ferry_api::encode_state(
            &WriterState { epoch: self.epoch },
            "a Nats writer",
        )?))
    }

    fn abort(&mut self) -> Result<()> {
        // What follows replays the rows since the checkpoint: the same ids again.
        self.position = 0;
        Ok(())
    }
}

/// A writer's snapshot: the checkpoint its message ids continue from after a restore, so
/// that a replayed message gets the id it had before and the stream drops the copy.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct WriterState {
    epoch: u64,
}
