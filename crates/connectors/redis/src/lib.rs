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
mod cluster_tests;
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

/// Redis deployments: one server, or a Redis Cluster.
const MODES: &[&str] = &["single", "cluster"];

ferry_api::declare_options! {
    /// Options both the source and the sink accept.
    pub(crate) struct ConnectionOptions => CONNECTION_OPTIONS {
        /// The server's host (mode = single); in cluster mode one more seed node, with port.
        host: String = "host", optional;
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
        /// single: one server at host and port; cluster: a Redis Cluster found from nodes (and host).
        mode: String = "mode", default "single", one_of MODES;
        /// Cluster mode: seed nodes as "host:port"; the client learns the others from them.
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
    /// Mode single: the server's host (empty in cluster mode).
    pub host: String,
    pub port: u16,
    /// Mode cluster: the seed nodes (empty in single mode).
    pub nodes: Vec<(String, u16)>,
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
        let port = match c.port {
            p @ 1..=65535 => p as u16,
            p => return Err(o.error("port", format!("{p} is not a port"))),
        };
        let host = c.host.filter(|h| !h.is_empty());
        let seeds = c.nodes.unwrap_or_default();
        let (host, nodes) = if c.mode == "cluster" {
            let mut nodes = Vec::new();
            for (i, n) in seeds.iter().enumerate() {
                let parsed = n.as_str().and_then(|n| {
                    let (h, p) = n.trim().rsplit_once(':')?;
                    let p = p.parse::<u16>().ok().filter(|p| *p > 0)?;
                    (!h.is_empty()).then(|| (h.to_string(), p))
                });
                match parsed {
                    Some(hp) => nodes.push(hp),
                    None => {
                        return Err(o.error(
                            "nodes",
                            format!("entry {} ({n}) is not \"host:port\"", i + 1),
                        ))
                    }
                }
            }
            // SeaTunnel's jobs name the cluster by host and port alone, too.
            if let Some(h) = host {
                if !nodes.iter().any(|(nh, np)| *nh == h && *np == port) {
                    nodes.insert(0, (h, port));
                }
            }
            if nodes.is_empty() {
                return Err(o.error(
                    "nodes",
                    "mode = cluster needs at least one node (\"host:port\" in nodes, or host and port)",
                ));
            }
            if c.db_num != 0 {
                return Err(o.error(
                    "db_num",
                    "a Redis Cluster has only database 0: leave db_num out in mode = cluster",
                ));
            }
            (String::new(), nodes)
        } else {
            if !seeds.is_empty() {
                return Err(o.error(
                    "nodes",
                    "is for mode = cluster; mode = single uses host and port",
                ));
            }
            match host {
                Some(h) => (h, Vec::new()),
                None => return Err(o.error("host", "is required (mode = single)")),
            }
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
            host,
            port,
            nodes,
            user: c.user.filter(|u| !u.is_empty()),
            auth: c.auth.filter(|a| !a.0.is_empty()),
            db: c.db_num,
            data_type,
            batch_size,
        })
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// The server as errors name it (no credentials).
    pub fn address(&self) -> String {
        if self.is_cluster() {
            let nodes: Vec<String> = self.nodes.iter().map(|(h, p)| format!("{h}:{p}")).collect();
            format!("the Redis cluster at {}", nodes.join(","))
        } else {
            format!("redis://{}:{}/{}", self.host, self.port, self.db)
        }
    }

    /// An error while `doing` something on the server.
    pub fn error(&self, doing: &str, e: impl fmt::Display) -> FerryError {
        FerryError::external(NAME, format!("{doing} {}: {e}", self.address()))
    }

    /// The login settings (user, password, database).
    fn settings(&self) -> RedisConnectionInfo {
        let mut settings = RedisConnectionInfo::default().set_db(self.db);
        if let Some(u) = &self.user {
            settings = settings.set_username(u);
        }
        if let Some(Secret(p)) = &self.auth {
            settings = settings.set_password(p);
        }
        settings
    }

    /// A connection, logged in and on `db_num`, with timeouts on every command: to the
    /// server, or in cluster mode to the cluster (the client keeps the slot map, sends each
    /// command to the master of its key's slot and follows MOVED and ASK redirections).
    pub fn connect(&self) -> Result<Conn> {
        if self.is_cluster() {
            let mut seeds = Vec::new();
            for (h, p) in &self.nodes {
                let info = ConnectionAddr::Tcp(h.clone(), *p)
                    .into_connection_info()
                    .map_err(|e| self.error("connecting to", e))?
                    .set_redis_settings(self.settings());
                seeds.push(info);
            }
            let client = redis::cluster::ClusterClientBuilder::new(seeds)
                .connection_timeout(TIMEOUT)
                .response_timeout(TIMEOUT)
                .build()
                .map_err(|e| self.error("connecting to", e))?;
            let conn = client
                .get_connection()
                .map_err(|e| self.error("connecting to", e))?;
            return Ok(Conn::Cluster(Box::new(conn)));
        }
        let info = ConnectionAddr::Tcp(self.host.clone(), self.port)
            .into_connection_info()
            .map_err(|e| self.error("connecting to", e))?
            .set_redis_settings(self.settings());
        let client = redis::Client::open(info).map_err(|e| self.error("connecting to", e))?;
        let conn = client
            .get_connection_with_timeout(TIMEOUT)
            .map_err(|e| self.error("connecting to", e))?;
        conn.set_read_timeout(Some(TIMEOUT))
            .and_then(|_| conn.set_write_timeout(Some(TIMEOUT)))
            .map_err(|e| self.error("connecting to", e))?;
        Ok(Conn::Single(conn))
    }
}

/// A connection to one server or to a cluster.
pub(crate) enum Conn {
    Single(redis::Connection),
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl Conn {
    /// The replies of `cmds`, sent in one pipeline (in cluster mode: grouped by the node
    /// each key's slot is on). For reads: in cluster mode, a pipeline that meets a slot
    /// being migrated or moved is read again one command at a time.
    pub fn read<T: redis::FromRedisValue>(
        &mut self,
        cmds: Vec<redis::Cmd>,
    ) -> redis::RedisResult<T> {
        match self {
            Conn::Single(c) => {
                let mut pipe = redis::pipe();
                for cmd in cmds {
                    pipe.add_command(cmd);
                }
                pipe.query(c)
            }
            Conn::Cluster(c) => {
                let mut pipe = redis::cluster::cluster_pipe();
                for cmd in &cmds {
                    pipe.add_command(cmd.clone());
                }
                match pipe.query::<redis::Value>(c) {
                    Ok(v) => Ok(T::from_redis_value(v)?),
                    Err(e) if redirected(&e).is_some() => {
                        let mut replies = Vec::with_capacity(cmds.len());
                        for cmd in &cmds {
                            replies.push(cmd.query::<redis::Value>(c.as_mut())?);
                        }
                        Ok(T::from_redis_value(redis::Value::Array(replies))?)
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Sends `cmds` in one pipeline (in cluster mode: grouped by the node each key's slot
    /// is on). In cluster mode, the commands a pipeline could not run because their slot is
    /// being migrated (`ASK`) or has moved (`MOVED`) are sent again one at a time, which
    /// follows the redirection; the others are not sent twice.
    pub fn write(&mut self, cmds: Vec<redis::Cmd>) -> redis::RedisResult<()> {
        match self {
            Conn::Single(c) => {
                let mut pipe = redis::pipe();
                for cmd in cmds {
                    pipe.add_command(cmd).ignore();
                }
                pipe.query(c)
            }
            Conn::Cluster(c) => {
                let mut pipe = redis::cluster::cluster_pipe();
                for cmd in &cmds {
                    pipe.add_command(cmd.clone()).ignore();
                }
                match pipe.query::<()>(c) {
                    Ok(()) => Ok(()),
                    Err(e) => match redirected(&e) {
                        Some(failed) => {
                            for i in failed {
                                if let Some(cmd) = cmds.get(i) {
                                    cmd.query::<redis::Value>(c.as_mut())?;
                                }
                            }
                            Ok(())
                        }
                        None => Err(e),
                    },
                }
            }
        }
    }

    /// One command (in cluster mode sent where its keys are; `MGET` of keys in several slots
    /// is split by slot and its replies put together again).
    pub fn query<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        match self {
            Conn::Single(c) => cmd.query(c),
            Conn::Cluster(c) => cmd.query(c.as_mut()),
        }
    }
}

/// The pipeline positions that failed only because their slot is being migrated or has
/// moved (`ASK`, `MOVED`, `TRYAGAIN`), when that is all that failed. The `redis` crate's
/// cluster pipeline does not follow these redirections itself; a single command does.
fn redirected(e: &redis::RedisError) -> Option<Vec<usize>> {
    use redis::ServerErrorKind as K;
    let items = e.clone().into_server_errors()?;
    let all = items
        .iter()
        .all(|(_, err)| matches!(err.kind(), Some(K::Ask | K::Moved | K::TryAgain)));
    (all && !items.is_empty()).then(|| items.iter().map(|(i, _)| *i).collect())
}

/// The masters of a cluster that serve slots, as `host:port`, sorted, from `CLUSTER NODES`
/// (`<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>…`).
pub(crate) fn cluster_masters(nodes: &str) -> Vec<String> {
    let mut out: Vec<String> = nodes
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let flags: Vec<&str> = f.get(2)?.split(',').collect();
            if !flags.contains(&"master") || flags.contains(&"fail") || f.len() < 9 {
                return None;
            }
            let addr = f[1].split(['@', ',']).next()?;
            let (h, p) = addr.rsplit_once(':')?;
            (!h.is_empty() && p != "0").then(|| addr.to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}
