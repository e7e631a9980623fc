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

use ferry_api::options::Options;
use ferry_api::{FerryError, Result};
use ferry_formats::Secret;
use lapin::options::{BasicQosOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::uri::{AMQPAuthority, AMQPUri, AMQPUserInfo};
use lapin::{Channel, Connection, ConnectionProperties};

pub use sink::RabbitmqSinkFactory;
pub use source::RabbitmqSourceFactory;

/// The plugin's name in job files and errors.
pub(crate) const NAME: &str = "RabbitMQ";

ferry_api::declare_options! {
    /// Options both the source and the sink accept: where the broker is and which queue.
    pub(crate) struct ConnectionOptions => CONNECTION_OPTIONS {
        /// The broker's host (required unless url is set).
        host: String = "host", optional;
        /// The broker's AMQP port, 5672 (required unless url is set).
        port: u64 = "port", optional;
        /// The virtual host.
        virtual_host: String = "virtual_host", default "/";
        /// The user name.
        username: String = "username", default "guest";
        /// The password (never shown in logs or errors).
        password: Secret = "password", default "guest";
        /// The queue to read from or write to; declared with durable, exclusive and auto_delete.
        queue_name: String = "queue_name", required;
        /// An AMQP URI (amqp://user:password@host:port/vhost) used instead of host, port, virtual_host, username and password.
        url: String = "url", optional;
        /// The queue survives a broker restart.
        durable: bool = "durable", default true;
        /// The queue is used by this connection only and deleted when it closes.
        exclusive: bool = "exclusive", default false;
        /// The queue is deleted when its last consumer goes.
        auto_delete: bool = "auto_delete", default false;
        /// How long connecting may take, in milliseconds.
        connection_timeout: u64 = "connection_timeout", default 60000;
        /// The heartbeat timeout to ask for, in seconds.
        requested_heartbeat: u64 = "requested_heartbeat", optional;
        /// The largest channel number to ask for.
        requested_channel_max: u64 = "requested_channel_max", optional;
        /// The largest frame size to ask for.
        requested_frame_max: u64 = "requested_frame_max", optional;
        // Accepted so that SeaTunnel's job files run: Ferry does not reconnect within a
        // run; a lost connection fails the job, which restarts from its last checkpoint.
        /// Accepted for SeaTunnel job files; a lost connection fails the job, which resumes from its last checkpoint.
        _network_recovery_interval: u64 = "network_recovery_interval", optional;
        /// Accepted for SeaTunnel job files; see network_recovery_interval.
        _automatic_recovery_enabled: bool = "AUTOMATIC_RECOVERY_ENABLED", optional;
        /// Accepted for SeaTunnel job files; see network_recovery_interval.
        _topology_recovery_enabled: bool = "topology_recovery_enabled", optional;
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

/// `v`, the value of `key`, as a smaller integer.
fn small<T: TryFrom<u64>>(o: &Options, key: &str, v: Option<u64>) -> Result<Option<T>> {
    match v {
        None => Ok(None),
        Some(v) => T::try_from(v)
            .map(Some)
            .map_err(|_| o.error(key, format!("{v} is out of range"))),
    }
}

impl Broker {
    /// Reads the connection options.
    pub fn read(o: &mut Options) -> Result<Broker> {
        let c = ConnectionOptions::read(o)?;
        let mut b = Broker {
            host: String::new(),
            port: 5672,
            vhost: c.virtual_host,
            username: c.username,
            password: c.password,
            queue: c.queue_name,
            durable: c.durable,
            exclusive: c.exclusive,
            auto_delete: c.auto_delete,
            connect_timeout: Duration::from_millis(c.connection_timeout),
            heartbeat: small(o, "requested_heartbeat", c.requested_heartbeat)?,
            channel_max: small(o, "requested_channel_max", c.requested_channel_max)?,
            frame_max: small(o, "requested_frame_max", c.requested_frame_max)?,
        };
        if let Some(url) = c.url {
            let uri: AMQPUri = url
                .parse()
                .map_err(|e: String| o.error("url", format!("is not an AMQP URI: {e}")))?;
            b.host = uri.authority.host;
            b.port = uri.authority.port;
            b.vhost = uri.vhost;
            b.username = uri.authority.userinfo.username;
            b.password = Secret(uri.authority.userinfo.password);
        } else {
            b.host = c
                .host
                .ok_or_else(|| o.error("host", "is required but not set"))?;
            b.port = small(o, "port", c.port)?
                .ok_or_else(|| o.error("port", "is required but not set"))?;
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
