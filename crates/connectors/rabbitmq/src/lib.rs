//! # ferry-connector-rabbitmq
//!
//! SeaTunnel's `RabbitMQ` source and sink, on [lapin](https://docs.rs/lapin) and the
//! process's I/O runtime ([`ferry_api::io`]).
//!
//! - The **source** consumes a queue with manual acknowledgements. A delivery is
//!   acknowledged only when the checkpoint that holds its row has completed
//!   ([`SourceReader::notify_checkpoint_complete`]), so a crash leaves every row after the
//!   last checkpoint unacknowledged and the broker delivers it again: nothing is lost. A
//!   crash between storing a checkpoint and sending its acknowledgements delivers the rows
//!   before it again too, so the source is at-least-once, unless the producer sets a
//!   correlation id on every message and the job says `use_correlation_id = true`: then
//!   the ids of rows not yet acknowledged are part of the checkpoint, and a delivery
//!   whose id was already read is acknowledged and left out (Flink's RMQSource does the
//!   same), which makes the source replayable.
//! - Bounded reads: SeaTunnel's source runs only in STREAMING jobs, and
//!   `for_e2e_testing = true` makes it end. Here a BATCH job, or `for_e2e_testing`, reads
//!   the messages the queue holds when the reader starts (the count the broker reports when
//!   the queue is declared) and ends; that count is part of the checkpoint.
//! - The **sink** publishes one JSON message per row to the queue (or to `exchange` with
//!   `routing_key`), with publisher confirms: at every checkpoint it waits until the
//!   broker has confirmed every message, so a completed checkpoint means its rows are in
//!   the queue. Rows after the last checkpoint are published again after a restart:
//!   at-least-once.

mod sink;
mod source;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use ferry_api::options::{OptionKind, OptionSpec, Options};
use ferry_api::{FerryError, Result};
use lapin::options::{BasicQosOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::uri::{AMQPAuthority, AMQPUri, AMQPUserInfo};
use lapin::{Channel, Connection, ConnectionProperties};

pub use sink::RabbitmqSinkFactory;
pub use source::RabbitmqSourceFactory;

/// The plugin's name in job files and errors.
pub(crate) const NAME: &str = "RabbitMQ";

/// Options both the source and the sink accept: where the broker is and which queue.
pub(crate) const CONNECTION_OPTIONS: &[OptionSpec] = &[
    OptionSpec::optional("host", OptionKind::String, None, "The broker's host (required unless url is set)."),
    OptionSpec::optional("port", OptionKind::Int, None, "The broker's AMQP port, 5672 (required unless url is set)."),
    OptionSpec::optional("virtual_host", OptionKind::String, Some("/"), "The virtual host."),
    OptionSpec::optional("username", OptionKind::String, Some("guest"), "The user name."),
    OptionSpec::optional("password", OptionKind::String, Some("guest"), "The password (never shown in logs or errors)."),
    OptionSpec::required("queue_name", OptionKind::String, "The queue to read from or write to; declared with durable, exclusive and auto_delete."),
    OptionSpec::optional("url", OptionKind::String, None, "An AMQP URI (amqp://user:password@host:port/vhost) used instead of host, port, virtual_host, username and password."),
    OptionSpec::optional("durable", OptionKind::Bool, Some("true"), "The queue survives a broker restart."),
    OptionSpec::optional("exclusive", OptionKind::Bool, Some("false"), "The queue is used by this connection only and deleted when it closes."),
    OptionSpec::optional("auto_delete", OptionKind::Bool, Some("false"), "The queue is deleted when its last consumer goes."),
    OptionSpec::optional("connection_timeout", OptionKind::Int, Some("60000"), "How long connecting may take, in milliseconds."),
    OptionSpec::optional("requested_heartbeat", OptionKind::Int, None, "The heartbeat timeout to ask for, in seconds."),
    OptionSpec::optional("requested_channel_max", OptionKind::Int, None, "The largest channel number to ask for."),
    OptionSpec::optional("requested_frame_max", OptionKind::Int, None, "The largest frame size to ask for."),
    // Accepted so that SeaTunnel's job files run: Ferry does not reconnect within a run;
    // a lost connection fails the job, which restarts from its last checkpoint.
    OptionSpec::optional("network_recovery_interval", OptionKind::Int, None, "Accepted for SeaTunnel job files; a lost connection fails the job, which resumes from its last checkpoint."),
    OptionSpec::optional("AUTOMATIC_RECOVERY_ENABLED", OptionKind::Bool, None, "Accepted for SeaTunnel job files; see network_recovery_interval."),
    OptionSpec::optional("topology_recovery_enabled", OptionKind::Bool, None, "Accepted for SeaTunnel job files; see network_recovery_interval."),
];

/// A password, kept out of `Debug` output (plans and errors print plugins' configs).
#[derive(Clone, Default)]
pub(crate) struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Where the broker is and how the queue is declared.
#[derive(Debug, Clone)]
pub(crate) struct Broker {
    pub host: String,
    pub port: u16,
    pub vhost: String,
    pub username: String,
    pub password: Secret,
    pub queue: String,
    pub durable: bool,
    pub exclusive: bool,
    pub auto_delete: bool,
    pub connect_timeout: Duration,
    pub heartbeat: Option<u16>,
    pub channel_max: Option<u16>,
    pub frame_max: Option<u32>,
}

fn small<T: TryFrom<u64>>(o: &mut Options, key: &str) -> Result<Option<T>> {
    match o.u64(key)? {
        None => Ok(None),
        Some(v) => T::try_from(v)
            .map(Some)
            .map_err(|_| o.error(key, format!("{v} is out of range"))),
    }
}

impl Broker {
    /// Reads the connection options.
    pub fn read(o: &mut Options) -> Result<Broker> {
        let mut b = Broker {
            host: String::new(),
            port: 5672,
            vhost: "/".into(),
            username: "guest".into(),
            password: Secret("guest".into()),
            queue: o.required_string("queue_name")?,
            durable: o.bool("durable")?.unwrap_or(true),
            exclusive: o.bool("exclusive")?.unwrap_or(false),
            auto_delete: o.bool("auto_delete")?.unwrap_or(false),
            connect_timeout: Duration::from_millis(o.u64("connection_timeout")?.unwrap_or(60_000)),
            heartbeat: small(o, "requested_heartbeat")?,
            channel_max: small(o, "requested_channel_max")?,
            frame_max: small(o, "requested_frame_max")?,
        };
        o.u64("network_recovery_interval")?;
        o.bool("AUTOMATIC_RECOVERY_ENABLED")?;
        o.bool("topology_recovery_enabled")?;
        if let Some(url) = o.string("url")? {
            let uri: AMQPUri = url
                .parse()
                .map_err(|e: String| o.error("url", format!("is not an AMQP URI: {e}")))?;
            b.host = uri.authority.host;
            b.port = uri.authority.port;
            b.vhost = uri.vhost;
            b.username = uri.authority.userinfo.username;
            b.password = Secret(uri.authority.userinfo.password);
            for k in ["host", "port", "virtual_host", "username", "password"] {
                o.get(k);
            }
        } else {
            b.host = o.required_string("host")?;
            b.port = small(o, "port")?.ok_or_else(|| o.error("port", "is required but not set"))?;
            if let Some(v) = o.string("virtual_host")? {
                b.vhost = v;
            }
            if let Some(u) = o.string("username")? {
                b.username = u;
            }
            if let Some(p) = o.string("password")? {
                b.password = Secret(p);
            }
        }
        Ok(b)
    }

    /// The broker and queue as errors name them (no credentials).
    pub fn address(&self) -> String {
        format!(
            "amqp://{}:{}{}{} queue '{}'",
            self.host,
            self.port,
            if self.vhost.starts_with('/') { "" } else { "/" },
            self.vhost,
            self.queue
        )
    }

    fn error(&self, doing: &str, e: impl fmt::Display) -> FerryError {
        FerryError::external(NAME, format!("{doing} {}: {e}", self.address()))
    }

    /// Connects, opens a channel, applies `prefetch` and declares the queue (as SeaTunnel's
    /// client does). Returns the connection, the channel and the queue's message count.
    pub async fn open(&self, prefetch: Option<u16>) -> Result<(Connection, Channel, u32)> {
        let uri = AMQPUri {
            authority: AMQPAuthority {
                userinfo: AMQPUserInfo {
                    username: self.username.clone(),
                    password: self.password.0.clone(),
                },
                host: self.host.clone(),
                port: self.port,
            },
            vhost: self.vhost.clone(),
            query: lapin::uri::AMQPQueryString {
                heartbeat: self.heartbeat,
                channel_max: self.channel_max,
                frame_max: self.frame_max,
                connection_timeout: Some(self.connect_timeout.as_millis() as u64),
                ..Default::default()
            },
            ..Default::default()
        };
        let conn = tokio::time::timeout(
            self.connect_timeout,
            Connection::connect_uri(uri, ConnectionProperties::default()),
        )
        .await
        .map_err(|_| self.error("connecting to", "timed out"))?
        .map_err(|e| self.error("connecting to", e))?;
        let channel = conn
            .create_channel()
            .await
            .map_err(|e| self.error("opening a channel on", e))?;
        if let Some(n) = prefetch {
            channel
                .basic_qos(n, BasicQosOptions::default())
                .await
                .map_err(|e| self.error("setting prefetch_count on", e))?;
        }
        let queue = channel
            .queue_declare(
                self.queue.as_str().into(),
                QueueDeclareOptions {
                    durable: self.durable,
                    exclusive: self.exclusive,
                    auto_delete: self.auto_delete,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| self.error("declaring", e))?;
        Ok((conn, channel, queue.message_count()))
    }
}
