//! # ferry-connector-kafka
//!
//! SeaTunnel's `Kafka` source and sink, on [rdkafka](https://docs.rs/rdkafka) (librdkafka,
//! built from its vendored sources). Both use librdkafka's own threads; the source's reader
//! polls a `BaseConsumer` with a short timeout inside `poll_next`.
//!
//! - The **source** reads topic partitions; each partition is a split whose state is the
//!   next offset to read, so restoring a checkpoint resumes exactly where it was taken and
//!   restoring it twice reads the same records (the source is replayable). Partitions are
//!   assigned to readers directly (no group rebalancing); the consumer group is used only
//!   to read (`start_mode = group_offsets`) and commit (`commit_on_checkpoint`) offsets,
//!   which are committed when a checkpoint completes. A BATCH job reads up to the end
//!   offsets the partitions have when the job starts; a STREAMING job follows them.
//! - The **sink** produces one message per row (json or text), to a fixed `partition`, by
//!   the hash of `partition_key_fields`, or as librdkafka's partitioner chooses. With
//!   `semantics = EXACTLY_ONCE` each writer is a transactional producer whose transaction
//!   holds one checkpoint's rows; with `AT_LEAST_ONCE` an idempotent producer flushed at
//!   every checkpoint; `NON` sends without waiting. See [`sink`] for the exact guarantee.

pub mod sink;
mod source;

#[cfg(test)]
mod tests;

use std::fmt;

use ferry_api::options::Options;
use ferry_api::{FerryError, Result};
use rdkafka::ClientConfig;
use serde_json::Value;

pub use sink::KafkaSinkFactory;
pub use source::KafkaSourceFactory;

/// The plugin's name in job files and errors.
pub(crate) const NAME: &str = "Kafka";

/// Settings of `kafka.config` whose values are secrets: never in logs or errors.
fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password") || k.contains("secret") || k.contains("jaas") || k.contains("key")
}

/// `kafka.config { … }`: librdkafka settings passed through as they are (Java client names
/// that librdkafka spells the same way work; others fail when the client is created).
pub(crate) fn read_kafka_config(o: &mut Options) -> Result<Vec<(String, String)>> {
    let Some(m) = o.object("kafka.config")? else {
        return Ok(Vec::new());
    };
    m.into_iter()
        .map(|(k, v)| {
            let s = match v {
                Value::String(s) => s,
                Value::Number(_) | Value::Bool(_) => v.to_string(),
                _ => {
                    return Err(o.error(
                        &format!("kafka.config.{k}"),
                        "expected a text, number or boolean",
                    ))
                }
            };
            Ok((k, s))
        })
        .collect()
}

/// A librdkafka configuration: `bootstrap.servers`, our settings, then the job's
/// `kafka.config`, which may override them.
pub(crate) fn client_config(
    servers: &str,
    ours: &[(&str, String)],
    passthrough: &[(String, String)],
) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", servers);
    for (k, v) in ours {
        c.set(*k, v);
    }
    for (k, v) in passthrough {
        c.set(k, v);
    }
    c
}

/// The settings as errors may show them (secrets redacted).
pub(crate) fn describe_config(passthrough: &[(String, String)]) -> String {
    passthrough
        .iter()
        .map(|(k, v)| {
            if is_secret(k) {
                format!("{k}=<redacted>")
            } else {
                format!("{k}={v}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// An error from the cluster at `servers` while `doing`.
pub(crate) fn external(servers: &str, doing: &str, e: impl fmt::Display) -> FerryError {
    FerryError::external(NAME, format!("{doing} (bootstrap.servers {servers}): {e}"))
}
