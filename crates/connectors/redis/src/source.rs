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
use serde_json::Value;

use crate::{DataType, Server, CONNECTION_OPTIONS, NAME};

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
        }))
    }
}

/// Where a scan has got to: the cursor of the next `SCAN` step. The split's state.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Scan {
    cursor: u64,
    done: bool,
}

struct Reader {
    server: Server,
    pattern: String,
    table: TableSchema,
    decoder: Option<Decoder>,
    conn: Option<redis::Connection>,
    scan: Option<Scan>,
    no_more: bool,
}

impl Reader {
    /// One `SCAN` step from `cursor`: the next cursor and the values of the keys found.
    fn step(&mut self, cursor: u64) -> Result<(u64, Vec<String>)> {
        if self.conn.is_none() {
            self.conn = Some(self.server.connect()?);
        }
        let server = &self.server;
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| FerryError::internal("no connection"))?;
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&self.pattern)
            .arg("COUNT")
            .arg(server.batch_size)
            .arg("TYPE")
            .arg(server.data_type.scan_type())
            .query(conn)
            .map_err(|e| server.error("scanning keys on", e))?;
        if keys.is_empty() {
            return Ok((next, Vec::new()));
        }
        let fail = |e: redis::RedisError| server.error("reading values from", e);
        let values: Vec<String> = match server.data_type {
            DataType::String => {
                let v: Vec<Option<String>> =
                    redis::cmd("MGET").arg(&keys).query(conn).map_err(fail)?;
                v.into_iter().flatten().collect()
            }
            DataType::List | DataType::Set | DataType::Zset => {
                let mut pipe = redis::pipe();
                for k in &keys {
                    match server.data_type {
                        DataType::List => pipe.cmd("LRANGE").arg(k).arg(0).arg(-1),
                        DataType::Set => pipe.cmd("SMEMBERS").arg(k),
                        _ => pipe.cmd("ZRANGE").arg(k).arg(0).arg(-1),
                    };
                }
                let v: Vec<Vec<String>> = pipe.query(conn).map_err(fail)?;
                v.into_iter().flatten().collect()
            }
            DataType::Hash => {
                let mut pipe = redis::pipe();
                for k in &keys {
                    pipe.cmd("HGETALL").arg(k);
                }
                // Field, value, field, value, … for each key.
                let v: Vec<Vec<String>> = pipe.query(conn).map_err(fail)?;
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
        Ok((next, values))
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
        let Some((cursor, done)) = self.scan.as_ref().map(|s| (s.cursor, s.done)) else {
            return Ok(if self.no_more {
                ReadStatus::Finished
            } else {
                ReadStatus::Idle(Duration::from_millis(50))
            });
        };
        if done {
            return Ok(ReadStatus::Finished);
        }
        // Steps that match nothing are taken in the same poll, for a while.
        let started = Instant::now();
        let mut cursor = cursor;
        loop {
            let (next, values) = self.step(cursor)?;
            cursor = next;
            if !values.is_empty() || next == 0 || started.elapsed() > Duration::from_millis(50) {
                let batch = self.rows(values)?;
                // The state moves on with the rows it covers, in the same call.
                self.scan = Some(Scan {
                    cursor,
                    done: cursor == 0,
                });
                return Ok(if batch.num_rows() > 0 {
                    ReadStatus::Batch(ChangeBatch::inserts(self.table.name.clone(), batch))
                } else if cursor == 0 {
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
