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
//!   which are committed when a checkpoint completes. Change-data formats (Canal, Debezium,
//!   Maxwell, OGG; `ferry_formats::ChangeFormat`) give rows with their row kinds. A BATCH job reads up to the end
//!   offsets the partitions have when the job starts; a STREAMING job follows them.
//! - The **sink** produces one message per row (json, text or a change-data format), to a fixed `partition`, by
//!   the hash of `partition_key_fields`, or as librdkafka's partitioner chooses. With
//!   `semantics = EXACTLY_ONCE` it commits in two phases: each writer's rows of a
//!   checkpoint are one transaction, prepared at the barrier and committed by the
//!   committer after the checkpoint is stored ([`end_txn`] ends a transaction another
//!   producer opened); with `AT_LEAST_ONCE` an idempotent producer flushed at every
//!   checkpoint; `NON` sends without waiting. See [`sink`] for the exact guarantee.

mod batch;
pub mod end_txn;
mod fetch;
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
/// HOCON nests unquoted dotted keys (`request.timeout.ms = 1` is `request { timeout { ms
/// = 1 } }`): nested blocks are read back as dotted names. SeaTunnel's older spelling,
/// `kafka.request.timeout.ms = 1` beside the other options, is read the same way.
pub(crate) fn read_kafka_config(o: &mut Options) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if let Some(m) = o.object("kafka.config")? {
        flatten(o, "kafka.config", "", &Value::Object(m), &mut out)?;
    }
    let mut older: Vec<(String, Value)> = Vec::new();
    for (k, v) in o.raw() {
        match (k.as_str(), v) {
            ("kafka", Value::Object(m)) => older.extend(
                m.iter()
                    .filter(|(k, _)| k.as_str() != "config")
                    .map(|(k, v)| (k.clone(), v.clone())),
            ),
            (k, v) if k.starts_with("kafka.") && !k.starts_with("kafka.config") => {
                older.push((k["kafka.".len()..].to_string(), v.clone()))
            }
            _ => {}
        }
    }
    for (k, v) in older {
        let key = format!("kafka.{k}");
        let _ = o.get(&key);
        flatten(o, &key, &k, &v, &mut out)?;
    }
    Ok(java_settings(out))
}

/// SeaTunnel passes Java client settings; librdkafka names a few differently and has no
/// use for others. Those are translated, or left out (logged), so that SeaTunnel's job
/// files work unchanged; every other name goes to librdkafka, which refuses unknown ones.
fn java_settings(settings: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(settings.len());
    for (k, v) in settings {
        match k.as_str() {
            "buffer.memory" => match v.trim().parse::<u64>() {
                Ok(bytes) => out.push((
                    "queue.buffering.max.kbytes".to_string(),
                    (bytes / 1024).max(1).to_string(),
                )),
                Err(_) => out.push((k, v)),
            },
            "max.request.size" => out.push(("message.max.bytes".to_string(), v)),
            "sasl.jaas.config" => {
                // `…LoginModule required username="u" password="p";`
                let field = |name: &str| {
                    let at = v.find(&format!("{name}="))? + name.len() + 1;
                    let rest = v[at..].trim_start_matches(['"', '\'']);
                    let end = rest.find(['"', '\'', ' ', ';']).unwrap_or(rest.len());
                    Some(rest[..end].to_string())
                };
                if let Some(u) = field("username") {
                    out.push(("sasl.username".to_string(), u));
                }
                if let Some(p) = field("password") {
                    out.push(("sasl.password".to_string(), p));
                }
            }
            "key.serializer" | "value.serializer" | "key.deserializer" | "value.deserializer"
            | "max.poll.records" | "max.block.ms" | "partitioner.class" => {
                tracing::debug!(setting = %k, "Kafka: a Java client setting librdkafka has no use for, left out");
            }
            _ => out.push((k, v)),
        }
    }
    out
}

/// The settings in `v` (at option `option`, named `name`), nested blocks as dotted names.
fn flatten(
    o: &Options,
    option: &str,
    name: &str,
    v: &Value,
    out: &mut Vec<(String, String)>,
) -> Result<()> {
    let joined = |k: &str| {
        if name.is_empty() {
            k.to_string()
        } else {
            format!("{name}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                flatten(o, &format!("{option}.{k}"), &joined(k), v, out)?;
            }
        }
        Value::String(s) => out.push((name.to_string(), s.clone())),
        Value::Number(_) | Value::Bool(_) => out.push((name.to_string(), v.to_string())),
        _ => return Err(o.error(option, "expected a text, number or boolean")),
    }
    Ok(())
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

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn nested_and_older_settings_read_as_dotted_names_and_java_ones_translate() {
        let mut o = Options::from_json(
            NAME,
            serde_json::json!({
                "kafka": {"request": {"timeout": {"ms": 60000}},
                          "config": {"acks": "all", "buffer": {"memory": 33554432},
                                     "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"s3\";",
                                     "value.serializer": "x"}},
                "kafka.linger.ms": 5
            }),
        );
        let mut got = read_kafka_config(&mut o).unwrap();
        got.sort();
        let want: Vec<(String, String)> = [
            ("acks", "all"),
            ("linger.ms", "5"),
            ("queue.buffering.max.kbytes", "32768"),
            ("request.timeout.ms", "60000"),
            ("sasl.password", "s3"),
            ("sasl.username", "u"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
        assert!(!describe_config(&got).contains("s3"));
        o.finish(&[]).unwrap();
    }
}
