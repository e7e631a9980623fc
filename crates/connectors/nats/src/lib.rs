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

use ferry_api::options::{OptionKind, OptionSpec, Options};
use ferry_api::{FerryError, Result};

pub use sink::NatsSinkFactory;
pub use source::NatsSourceFactory;

/// The plugin's name in job files and errors.
pub(crate) const NAME: &str = "Nats";

/// Options both the source and the sink accept.
pub(crate) const CONNECTION_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required(
        "servers",
        OptionKind::String,
        "The server, nats://host:port (the first of a comma-separated list is used).",
    ),
    OptionSpec::optional(
        "username",
        OptionKind::String,
        None,
        "The user name, with password.",
    ),
    OptionSpec::optional(
        "password",
        OptionKind::String,
        None,
        "The password (never shown in logs or errors).",
    ),
    OptionSpec::optional(
        "token",
        OptionKind::String,
        None,
        "An authentication token (never shown in logs or errors).",
    ),
];

/// A secret, kept out of `Debug` output (plans and errors print plugins' configs).
#[derive(Clone, Default)]
pub(crate) struct Secret(pub Option<String>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "<redacted>"
        } else {
            "None"
        })
    }
}

/// Where the server is and how to log in.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// `host:port`.
    pub addr: String,
    pub username: Option<String>,
    pub password: Secret,
    pub token: Secret,
}

impl Server {
    /// Reads the connection options.
    pub fn read(o: &mut Options) -> Result<Server> {
        let servers = o.required_string("servers")?;
        let first = servers.split(',').next().unwrap_or("").trim();
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
            username: o.string("username")?,
            password: Secret(o.string("password")?),
            token: Secret(o.string("token")?),
        };
        if let Some(a) = auth {
            match a.split_once(':') {
                Some((u, p)) => {
                    s.username = Some(u.to_string());
                    s.password = Secret(Some(p.to_string()));
                }
                None => s.token = Secret(Some(a.to_string())),
            }
        }
        Ok(s)
    }

    /// An error while `doing` something on the server (no credentials).
    pub fn error(&self, doing: &str, e: impl fmt::Display) -> FerryError {
        FerryError::external(NAME, format!("{doing} nats://{}: {e}", self.addr))
    }
}
