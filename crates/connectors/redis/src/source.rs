//! The Redis source: a `SCAN` of the matching keys, resumable at its cursor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType as ArrowType, Field, Schema};
use ferry_api::options::{OptionSpec, Options};
use ferry_api::{
    Boundedness, ChangeBatch, EnumeratorContext, FerryError, JobContext, ReadStatus, ReaderContext,
    Result, Source, SourceFactory, SourceReader, Split, SplitEnumerator, TableSchema,
};
use ferry_formats::{read_schema, Decoder, Format, OnError, OneSplit, SCHEMA_OPTIONS};
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::FromRedisValue;
use serde_json::Value;

use crate::{cluster_masters, Conn, DataType, Server, CONNECTION_OPTIONS, NAME};

const FORMATS: &[&str] = &["json", "text"];
const HASH_MODES: &[&str] = &["all", "kv"];
const ON_ERROR: &[&str] = &["fail", "skip"];

ferry_api::declare_options! {
    /// The source's own options.
    struct SourceOptions => SOURCE_ONLY {
        /// The pattern of the keys to read (SCAN's MATCH: `user:*`).
        keys: String = "keys", required;
        /// Unset: one `content` column with each value's text. json (with a schema): each value decoded as a JSON object. text: split on field_delimiter.
        format: String = "format", optional, one_of FORMATS;
        /// Delimiter between values with format = text.
        field_delimiter: String = "field_delimiter", default ",";
        /// For hashes with a format: all gives the whole hash as one JSON text column; kv decodes its fields into the schema's columns.
        hash_key_parse_mode: String = "hash_key_parse_mode", default "all", one_of HASH_MODES;
        /// A value that does not decode stops the job (fail) or is left out (skip).
        on_error: String = "format_error_handle_way", default "fail", one_of ON_ERROR;
    }
}

/// SeaTunnel's `Redis` source.
pub struct RedisSourceFactory;

impl SourceFactory for RedisSourceFactory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Reads the values of the Redis keys matching a pattern (string, list, set, hash, zset)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        ferry_api::concat_specs!(CONNECTION_OPTIONS, SOURCE_ONLY, SCHEMA_OPTIONS)
    }
    fn create(&self, o: &mut Options, _job: &JobContext) -> Result<Box<dyn Source>> {
        let server = Server::read(o)?;
        let own = SourceOptions::read(o)?;
        let pattern = own.keys;
        let kv = own.hash_key_parse_mode == "kv";
        let on_error = match own.on_error.as_str() {
            "skip" => OnError::Skip,
            _ => OnError::Fail,
        };
        let format = match own.format.as_deref() {
            None => None,
            Some("text") => Some(Format::Text {
                delimiter: own.field_delimiter,
            }),
            Some(_) => Some(Format::Json),
        };
        let schema = read_schema(o, NAME)?;
        let (table, decoder) = match (format, schema) {
            (None, schema) => {
                if schema.is_some() {
                    return Err(o.error(
                        "schema",
                        "needs format = json (or text): without a format every value is one `content` column",
                    ));
                }
                (content_table(o)?, None)
            }
            (Some(_), None) => {
                return Err(o.error("schema", "is required when format is set"));
            }
            (Some(format), Some(table)) => {
                if server.data_type == DataType::Hash && !kv {
                    // SeaTunnel's `all` mode hands the hash on as one JSON text.
                    if table.schema.fields().len() != 1
                        || table.schema.field(0).data_type() != &ArrowType::Utf8
                    {
                        return Err(o.error(
                            "hash_key_parse_mode",
                            "all gives one text column (the hash as JSON): declare one string field, or use kv to decode the hash's fields",
                        ));
                    }
                    (table, None)
                } else {
                    let decoder = Decoder {
                        schema: table.schema.clone(),
                        format,
                        on_error,
                    };
                    (table, Some(decoder))
                }
            }
        };
        o.finish(self.options())?;
        Ok(Box::new(RedisSource {
            server,
            pattern,
            table,
            decoder,
        }))
    }
}

/// The one-column table values are read into without a format: `content`, as SeaTunnel's
/// simple text table.
fn content_table(o: &mut Options) -> Result<TableSchema> {
    let name = match o.string("plugin_output")? {
        Some(n) => n,
        None => o
            .string("result_table_name")?
            .unwrap_or_else(|| "default".into()),
    };
    Ok(TableSchema::new(
        name,
        Arc::new(Schema::new(vec![Field::new(
            "content",
            ArrowType::Utf8,
            true,
        )])),
    ))
}

#[derive(Debug)]
struct RedisSource {
    server: Server,
    pattern: String,
    table: TableSchema,
    /// How a value becomes a row; `None`: its text is the row's one column.
    decoder: Option<Decoder>,
}

impl Source for RedisSource {
    fn boundedness(&self) -> Boundedness {
        Boundedness::Bounded
    }
    fn tables(&self) -> Vec<TableSchema> {
        vec![self.table.clone()]
    }
    fn create_enumerator(
        &self,
        _ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        // One scan of the keyspace, by reader 0; restored, it is in that reader's state.
        let split = Split::typed(
            "scan",
            &Scan {
                cursor: 0,
                done: false,
                masters: Vec::new(),
                node: 0,
            },
        )?;
        Ok(Box::new(OneSplit::new(split, restored)))
    }
    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(Reader {
            server: self.server.clone(),
            pattern: self.pattern.clone(),
            table: self.table.clone(),
            decoder: self.decoder.clone(),
            conn: None,
            scan: None,
            no_more: false,
            seen: SeenKeys::default(),
        }))
    }
}

/// Where a scan has got to: the cursor of the next `SCAN` step. The split's state.
///
/// A cluster is scanned one master after the other (each holds its own slots' keys, and
/// `SCAN` sees only the node it runs on): `masters` lists them as the first step found them,
/// `node` is the one `cursor` belongs to.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Scan {
    cursor: u64,
    done: bool,
    /// Cluster mode: the masters (`host:port`, sorted), found at the first step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    masters: Vec<String>,
    /// Cluster mode: the index in `masters` of the master being scanned.
    #[serde(default)]
    node: usize,
}

struct Reader {
    server: Server,
    pattern: String,
    table: TableSchema,
    decoder: Option<Decoder>,
    conn: Option<Conn>,
    scan: Option<Scan>,
    no_more: bool,
    /// The keys this run's scan returned, as 128-bit hashes: `SCAN` returns a key more
    /// than once when Redis resizes its table during the scan, and such a key is read once.
    seen: SeenKeys,
}

/// A set of keys by two independent 64-bit hashes of each (16 bytes a key, where the keys
/// themselves would take their length and more; two distinct keys share both hashes with a
/// chance of 2^-128).
#[derive(Default)]
struct SeenKeys {
    hashers: (std::hash::RandomState, std::hash::RandomState),
    keys: std::collections::HashSet<u128>,
}

impl SeenKeys {
    /// Whether `key` is new; it is not afterwards.
    fn insert(&mut self, key: &str) -> bool {
        use std::hash::BuildHasher;
        let h = (u128::from(self.hashers.0.hash_one(key)) << 64)
            | u128::from(self.hashers.1.hash_one(key));
        self.keys.insert(h)
    }
}

impl Reader {
    /// One `SCAN` step from `scan`: where the scan is then, and the values of the keys found.
    fn step(&mut self, scan: &Scan) -> Result<(Scan, Vec<String>)> {
        if self.conn.is_none() {
            self.conn = Some(self.server.connect()?);
        }
        let server = &self.server;
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| FerryError::internal("no connection"))?;
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(scan.cursor)
            .arg("MATCH")
            .arg(&self.pattern)
            .arg("COUNT")
            .arg(server.batch_size)
            .arg("TYPE")
            .arg(server.data_type.scan_type());
        let (keys, state): (Vec<String>, Scan) = match conn {
            Conn::Single(c) => {
                let (next, keys): (u64, Vec<String>) = cmd
                    .query(c)
                    .map_err(|e| server.error("scanning keys on", e))?;
                let state = Scan {
                    cursor: next,
                    done: next == 0,
                    masters: Vec::new(),
                    node: 0,
                };
                (keys, state)
            }
            Conn::Cluster(c) => {
                let mut masters = scan.masters.clone();
                if masters.is_empty() {
                    let nodes: String = redis::cmd("CLUSTER")
                        .arg("NODES")
                        .query(c.as_mut())
                        .map_err(|e| server.error("listing the nodes of", e))?;
                    masters = cluster_masters(&nodes);
                    if masters.is_empty() {
                        return Err(server.error(
                            "scanning keys on",
                            "CLUSTER NODES lists no master serving slots",
                        ));
                    }
                }
                let Some(master) = masters.get(scan.node).cloned() else {
                    return Err(FerryError::internal(format!(
                        "Redis scan state names master {} of {}",
                        scan.node,
                        masters.len()
                    )));
                };
                let (host, port) = master
                    .rsplit_once(':')
                    .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
                    .ok_or_else(|| {
                        FerryError::internal(format!("Redis master {master} is not host:port"))
                    })?;
                let reply = c
                    .route_command(
                        &cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port }),
                    )
                    .map_err(|e| {
                        server.error(&format!("scanning keys on master {master} of"), e)
                    })?;
                let (next, keys) = <(u64, Vec<String>)>::from_redis_value(reply).map_err(|e| {
                    server.error(&format!("scanning keys on master {master} of"), e)
                })?;
                // A master's scan ends at cursor 0; the next master's starts there.
                let node = if next == 0 { scan.node + 1 } else { scan.node };
                let done = node >= masters.len();
                let state = Scan {
                    cursor: next,
                    done,
                    masters,
                    node,
                };
                (keys, state)
            }
        };
        let keys: Vec<String> = keys.into_iter().filter(|k| self.seen.insert(k)).collect();
        if keys.is_empty() {
            return Ok((state, Vec::new()));
        }
        let fail = |e: redis::RedisError| server.error("reading values from", e);
        let values: Vec<String> = match server.data_type {
            DataType::String => {
                let v: Vec<Option<String>> =
                    conn.query(redis::cmd("MGET").arg(&keys)).map_err(fail)?;
                v.into_iter().flatten().collect()
            }
            DataType::List | DataType::Set | DataType::Zset => {
                let cmds = keys
                    .iter()
                    .map(|k| {
                        let mut c = match server.data_type {
                            DataType::List => redis::cmd("LRANGE"),
                            DataType::Set => redis::cmd("SMEMBERS"),
                            _ => redis::cmd("ZRANGE"),
                        };
                        c.arg(k);
                        if server.data_type != DataType::Set {
                            c.arg(0).arg(-1);
                        }
                        c
                    })
                    .collect();
                let v: Vec<Vec<String>> = conn.read(cmds).map_err(fail)?;
                v.into_iter().flatten().collect()
            }
            DataType::Hash => {
                let cmds = keys
                    .iter()
                    .map(|k| {
                        let mut c = redis::cmd("HGETALL");
                        c.arg(k);
                        c
                    })
                    .collect();
                // Field, value, field, value, … for each key.
                let v: Vec<Vec<String>> = conn.read(cmds).map_err(fail)?;
                v.into_iter()
                    .zip(&keys)
                    // A key deleted between SCAN and HGETALL reads as an empty hash.
                    .filter(|(fields, _)| !fields.is_empty())
                    .map(|(fields, key)| {
                        let mut m: serde_json::Map<String, Value> = fields
                            .chunks(2)
                            .filter(|p| p.len() == 2)
                            .map(|p| (p[0].clone(), Value::String(p[1].clone())))
                            .collect();
                        // As SeaTunnel's client: the hash's own key goes along.
                        m.insert("hash_key".into(), Value::String(key.clone()));
                        Value::Object(m).to_string()
                    })
                    .collect()
            }
        };
        Ok((state, values))
    }

    fn rows(&self, values: Vec<String>) -> Result<RecordBatch> {
        match &self.decoder {
            Some(d) => {
                let refs: Vec<&[u8]> = values.iter().map(String::as_bytes).collect();
                d.decode_logged(NAME, &self.pattern, &refs)
            }
            None => Ok(RecordBatch::try_new(
                self.table.schema.clone(),
                vec![Arc::new(StringArray::from(values))],
            )?),
        }
    }
}

impl SourceReader for Reader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in splits {
            self.scan = Some(s.read_state::<Scan>()?);
        }
        Ok(())
    }

    fn no_more_splits(&mut self) {
        self.no_more = true;
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
        let Some(scan) = self.scan.clone() else {
            return Ok(if self.no_more {
                ReadStatus::Finished
            } else {
                ReadStatus::Idle(Duration::from_millis(50))
            });
        };
        if scan.done {
            return Ok(ReadStatus::Finished);
        }
        // Steps that match nothing are taken in the same poll, for a while.
        let started = Instant::now();
        let mut scan = scan;
        loop {
            let (next, values) = self.step(&scan)?;
            scan = next;
            if !values.is_empty() || scan.done || started.elapsed() > Duration::from_millis(50) {
                let batch = self.rows(values)?;
                let done = scan.done;
                // The state moves on with the rows it covers, in the same call.
                self.scan = Some(scan);
                return Ok(if batch.num_rows() > 0 {
                    ReadStatus::Batch(ChangeBatch::inserts(self.table.name.clone(), batch))
                } else if done {
                    ReadStatus::Finished
                } else {
                    ReadStatus::Idle(Duration::ZERO)
                });
            }
        }
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Vec<Split>> {
        self.scan.iter().map(|s| Split::typed("scan", s)).collect()
    }
}

#[cfg(test)]
mod seen_tests {
    use super::SeenKeys;

    #[test]
    fn a_key_is_new_once_and_distinct_keys_stay_distinct() {
        let mut seen = SeenKeys::default();
        let keys: Vec<String> = (0..10_000).map(|i| format!("key_test{i}")).collect();
        assert!(keys.iter().all(|k| seen.insert(k)));
        assert!(keys.iter().all(|k| !seen.insert(k)));
        assert!(seen.insert("key_test10000"));
    }
}
