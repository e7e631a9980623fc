//! # ferry-connector-mqtt
//!
//! `Mqtt` source and sink (MQTT 5, QoS 1) on [rumqttc](https://docs.rs/rumqttc) and the
//! process's I/O runtime, with options named in the style of SeaTunnel's broker
//! connectors (SeaTunnel has no MQTT connector).
//!
//! - The **source** subscribes with a persistent session (`client_id`, no clean start)
//!   and acknowledges each message (PUBACK) only when the checkpoint that holds its row has
//!   completed. After a crash the broker delivers the unacknowledged messages again, and
//!   queues what arrives while the job is down for the session: nothing is lost. Messages
//!   whose acknowledgement a crash prevented come again too, and MQTT gives them no
//!   identity to recognise them by: at-least-once. It asks the broker for a receive
//!   maximum of 65535 so that a checkpoint interval's unacknowledged messages do not stop
//!   delivery (MQTT 3's brokers cap them at about 20).
//! - The **sink** publishes one message per row with QoS 1 and waits, at every checkpoint,
//!   until the broker has acknowledged every message: at-least-once.

mod sink;
mod source;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use ferry_api::options::Options;
use ferry_api::{FerryError, Result};
use ferry_formats::Secret;
use rumqttc::v5::MqttOptions;

pub use sink::MqttSinkFactory;
pub use source::MqttSourceFactory;

/// The plugin's name in job files and errors.
pub(crate) const NAME: &str = "Mqtt";

ferry_api::declare_options! {
    /// Options both the source and the sink accept.
    pub(crate) struct ConnectionOptions => CONNECTION_OPTIONS {
        /// The broker's host.
        host: String = "host", required;
        /// The broker's port.
        port: u64 = "port", default 1883;
        /// The topic to subscribe to (wildcards allowed) or publish to.
        topic: String = "topic", required;
        /// The user name.
        username: String = "username", optional;
        /// The password (never shown in logs or errors).
        password: Secret = "password", optional;
        /// Seconds between keep-alive pings.
        keep_alive: u64 = "keep_alive", default 30;
    }
}

/// Where the broker is and how to log in.
#[derive(Debug, Clone)]
pub(crate) struct Broker {
    pub host: String,
    pub port: u16,
    pub topic: String,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub keep_alive: Duration,
}

impl Broker {
    /// Reads the connection options.
    pub fn read(o: &mut Options) -> Result<Broker> {
        let c = ConnectionOptions::read(o)?;
        let port = match c.port {
            p @ 1..=65535 => p as u16,
            p => return Err(o.error("port", format!("{p} is not a port"))),
        };
        if c.topic.is_empty() {
            return Err(o.error("topic", "must not be empty"));
        }
        Ok(Broker {
            host: c.host,
            port,
            topic: c.topic,
            username: c.username,
            password: c.password,
            keep_alive: Duration::from_secs(c.keep_alive.max(5)),
        })
    }

    /// The broker and topic as errors name them (no credentials).
    pub fn address(&self) -> String {
        format!("mqtt://{}:{} topic '{}'", self.host, self.port, self.topic)
    }

    /// An error while `doing` something with the broker.
    pub fn error(&self, doing: &str, e: impl fmt::Display) -> FerryError {
        FerryError::external(NAME, format!("{doing} {}: {e}", self.address()))
    }

    /// The client options for `client_id`.
    pub fn options(&self, client_id: &str) -> MqttOptions {
        let mut o = MqttOptions::new(client_id, self.host.clone(), self.port);
        o.set_keep_alive(self.keep_alive);
        if let Some(u) = &self.username {
            o.set_credentials(u.clone(), self.password.clone().unwrap_or_default().0);
        }
        o
    }
}
