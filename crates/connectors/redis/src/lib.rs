//! # ferry-connector-redis
//!
//! SeaTunnel's `Redis` source and sink on the [redis](https://docs.rs/redis) crate's
//! blocking client. Each call is one short round trip (a `SCAN` step and the values of
//! the keys it returned, or one pipeline of writes), which the connector API allows
//! readers and writers to make on their own thread.
//!
//! - The **source** scans the keys matching `keys` that hold `data_type` (`SCAN … MATCH …
//!   TYPE …`, `batch_size` keys a step) and emits one row per value: a string's value, each
//!   element of a list, set or sorted set, and a hash as one JSON object (with its key as
//!   `hash_key`). Without `format` a row is one `content` column holding the value's text;
//!   with `format = json` (and a `schema`) the text is decoded into the schema's columns.
//!   The split's state is the `SCAN` cursor after the last step returned, so a restored
//!   read resumes at the next step; `SCAN` guarantees this covers every key that exists
//!   for the whole read, once, unless the keyspace changes while it runs.
//! - The **sink** writes one JSON message per row under `key` (or under the value of the
//!   column named `key`): `SET` (key, string), `LPUSH` (list), `SADD` (set), `ZADD` with
//!   score 1 (zset) or `HSET` of the row's fields (hash), with `EXPIRE` when `expire` is
//!   set, `batch_size` rows to a pipeline. Every type but `list` is idempotent, so rows
//!   written again after a restart change nothing: exactly-once in effect. A list gets them
//!   again: at-least-once.

mod sink;
mod source;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use ferry_api::options::Options;
use ferry_api::{FerryError, Result};
use ferry_formats::Secret;
use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo};
use serde_json::Value;

pub use sink::RedisSinkFactory;
pub use source::RedisSourceFactory;

/// The plugin's name in job files and errors.
pub(crate) const NAME: &str = "Redis";

/// How long connecting and each command may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Redis data types the connector reads and writes (`key` is SeaTunnel's name for string).
pub(crate) const DATA_TYPES: &[&str] = &["key", "string", "list", "set", "hash", "zset"];

/// Redis deployments; only `single` is supported.
const MODES: &[&str] = &["single", "cluster"];

ferry_api::declare_options! {
    /// Options both the source and the sink accept.
    pub(crate) struct ConnectionOptions => CONNECTION_OPTIONS {
        /// The server's host.
        host: String = "host", required;
        /// The server's port.
        port: u64 = "port", default 6379;
        /// The password (never shown in logs or errors).
        auth: Secret = "auth", optional;
        /// The ACL user name, with auth.
        user: String = "user", optional;
        /// The database index.
        db_num: i64 = "db_num", default 0;
        /// What the keys hold: key or string, list, set, hash, zset.
        data_type: String = "data_type", required, one_of DATA_TYPES;
        /// Keys per SCAN step (source) or rows per pipeline (sink).
        batch_size: u64 = "batch_size", default 10;
        /// single only: cluster mode is not supported yet.
        mode: String = "mode", default "single", one_of MODES;
        /// Cluster nodes (host:port); cluster mode is not supported yet.
        nodes: Vec<Value> = "nodes", optional;
    }
}

/// What keys hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataType {
    String,
    List,
    Set,
    Hash,
    Zset,
}

impl DataType {
    /// The name `SCAN … TYPE` takes.
    fn scan_type(self) -> &'static str {
        match self {
            DataType::String => "string",
            DataType::List => "list",
            DataType::Set => "set",
            DataType::Hash => "hash",
            DataType::Zset => "zset",
        }
    }
}

/// Where the server is and how to log in.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    pub auth: Option<Secret>,
    pub db: i64,
    pub data_type: DataType,
    pub batch_size: usize,
}

impl Server {
    /// Reads the connection options, `data_type` and `batch_size`.
    pub fn read(o: &mut Options) -> Result<Server> {
        let c = ConnectionOptions::read(o)?;
        if c.mode == "cluster" {
            return Err(o.error(
                "mode",
                "cluster is not supported yet: connect to one node with mode = single",
            ));
        }
        if c.nodes.is_some_and(|n| !n.is_empty()) {
            return Err(o.error("nodes", "is for cluster mode, which is not supported yet"));
        }
        let port = match c.port {
            p @ 1..=65535 => p as u16,
            p => return Err(o.error("port", format!("{p} is not a port"))),
        };
        let data_type = match c.data_type.as_str() {
            "list" => DataType::List,
            "set" => DataType::Set,
            "hash" => DataType::Hash,
            "zset" => DataType::Zset,
            _ => DataType::String,
        };
        let batch_size = match c.batch_size {
            n @ 1..=1_000_000 => n as usize,
            n => return Err(o.error("batch_size", format!("{n} is not between 1 and 1000000"))),
        };
        Ok(Server {
            host: c.host,
            port,
            user: c.user.filter(|u| !u.is_empty()),
            auth: c.auth.filter(|a| !a.0.is_empty()),
            db: c.db_num,
            data_type,
            batch_size,
        })
    }

    /// The server as errors name it (no credentials).
    pub fn address(&self) -> String {
        format!("redis://{}:{}/{}", self.host, self.port, self.db)
    }

    /// An error while `doing` something on the server.
    pub fn error(&self, doing: &str, e: impl fmt::Display) -> FerryError {
        FerryError::external(NAME, format!("{doing} {}: {e}", self.address()))
    }

    /// A connection, logged in and on `db_num`, with timeouts on every command.
    pub fn connect(&self) -> Result<redis::Connection> {
        let mut settings = RedisConnectionInfo::default().set_db(self.db);
        if let Some(u) = &self.user {
            settings = settings.set_username(u);
        }
        if let Some(Secret(p)) = &self.auth {
            settings = settings.set_password(p);
        }
        let info = ConnectionAddr::Tcp(self.host.clone(), self.port)
            .into_connection_info()
            .map_err(|e| self.error("connecting to", e))?
            .set_redis_settings(settings);
        let client = redis::Client::open(info).map_err(|e| self.error("connecting to", e))?;
        let conn = client
            .get_connection_with_timeout(TIMEOUT)
            .map_err(|e| self.error("connecting to", e))?;
        conn.set_read_timeout(Some(TIMEOUT))
            .and_then(|_| conn.set_write_timeout(Some(TIMEOUT)))
            .map_err(|e| self.error("connecting to", e))?;
        Ok(conn)
    }
}
