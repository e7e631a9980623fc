//! # ferry-connector-nats
//!
//! `Nats` source and sink for NATS JetStream, in the style of SeaTunnel's broker
//! connectors (SeaTunnel has none for NATS), on a small client of its own ([`client`]) and
//! the process's I/O runtime.
//!
//! - The **source** reads a stream through a durable pull consumer with `AckAll`
//!   acknowledgements. Its split state is the stream sequence of the last row it emitted;
//!   a reader (re)creates the consumer to deliver from the next sequence, so a restore
//!   replays exactly what followed the checkpoint, and a delivery with a sequence already
//!   emitted (a redelivery) is left out. It acknowledges the last sequence a checkpoint
//!   covers only when that checkpoint has completed, so the stream's retention (work-queue
//!   or interest streams delete acknowledged messages) and the consumer's ack floor never
//!   get ahead of what is durably processed. A fresh job with an existing durable consumer
//!   starts after the consumer's ack floor. In a BATCH job the source reads to the stream's
//!   last sequence at the time it starts, and ends.
//! - The **sink** publishes one message per row with a `Nats-Msg-Id` made of the job, the
//!   writer, the checkpoint the row follows and its position after it, and waits for
//!   JetStream's acknowledgement of each. Rows replayed after a restart get the same ids,
//!   so the stream's duplicate window (two minutes unless the stream says otherwise) drops
//!   them: exactly-once in effect when the restart comes within the window and the rows
//!   reach the same writer in the same order (a replayable source, no shuffle).

pub(crate) mod client;
mod sink;
mod source;

#[cfg(test)]
mod tests;

use std::fmt;

use ferry_api::options::Options;
use ferry_api::{FerryError, Result};
use ferry_formats::Secret;

pub use sink::NatsSinkFactory;
pub use source::NatsSourceFactory;

/// The plugin's name in job files and errors.
pub(crate) const NAME: &str = "Nats";

ferry_api::declare_options! {
    /// Options both the source and the sink accept.
    pub(crate) struct ConnectionOptions => CONNECTION_OPTIONS {
        /// The server, nats://host:port (the first of a comma-separated list is used).
        servers: String = "servers", required;
        /// The user name, with password.
        username: String = "username", optional;
        /// The password (never shown in logs or errors).
        password: Secret = "password", optional;
        /// An authentication token (never shown in logs or errors).
        token: Secret = "token", optional;
    }
}

/// Where the server is and how to log in.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// `host:port`.
    pub addr: String,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub token: Option<Secret>,
}

impl Server {
    /// Reads the connection options.
    pub fn read(o: &mut Options) -> Result<Server> {
        let c = ConnectionOptions::read(o)?;
        let first = c.servers.split(',').next().unwrap_or("").trim();
        let rest = first
            .strip_prefix("nats://")
            .or_else(|| first.strip_prefix("tls://").map(|_| ""))
            .unwrap_or(first);
        if rest.is_empty() {
            return Err(o.error(
                "servers",
                "expected nats://host:port (TLS is not supported)",
            ));
        }
        // Credentials in the URL (nats://user:pass@host) are read, never echoed.
        let (auth, hostport) = match rest.rsplit_once('@') {
            Some((a, h)) => (Some(a), h),
            None => (None, rest),
        };
        let addr = if hostport.contains(':') {
            hostport.to_string()
        } else {
            format!("{hostport}:4222")
        };
        let mut s = Server {
            addr,
            username: c.username,
            password: c.password,
            token: c.token,
        };
        if let Some(a) = auth {
            match a.split_once(':') {
                Some((u, p)) => {
                    s.username = Some(u.to_string());
                    s.password = Some(Secret(p.to_string()));
                }
                None => s.token = Some(Secret(a.to_string())),
            }
        }
        Ok(s)
    }

    /// An error while `doing` something on the server (no credentials).
    pub fn error(&self, doing: &str, e: impl fmt::Display) -> FerryError {
        FerryError::external(NAME, format!("{doing} nats://{}: {e}", self.addr))
    }
}
