//! The Redis sink: each row as JSON under a key, `batch_size` rows to a pipeline.

use std::sync::Arc;

use arrow::array::Array;

use ferry_api::options::{OptionSpec, Options};
use ferry_api::{
    ChangeBatch, FerryError, JobContext, Result, Sink, SinkDelivery, SinkFactory, SinkWriter,
    TableSchema, WriterContext,
};
use ferry_formats::{text_value, Encoder, Format};
use serde_json::Value;

use crate::{Conn, DataType, Server, CONNECTION_OPTIONS, NAME};

const FORMATS: &[&str] = &["json", "text"];

ferry_api::declare_options! {
    /// The sink's own options.
    struct SinkOptions => SINK_ONLY {
        /// The key to write to, or the name of a column whose value is each row's key.
        key: String = "key", required;
        /// Seconds until written keys expire; -1: never.
        expire: i64 = "expire", default -1;
        /// How a row becomes the value written (hashes always take the row's fields).
        format: String = "format", default "json", one_of FORMATS;
        /// Delimiter between values with format = text.
        field_delimiter: String = "field_delimiter", default ",";
    }
}

/// SeaTunnel's `Redis` sink.
pub struct RedisSinkFactory;

impl SinkFactory for RedisSinkFactory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Writes rows as JSON to Redis strings, lists, sets, sorted sets or hashes"
    }
    fn options(&self) -> &'static [OptionSpec] {
        ferry_api::concat_specs!(CONNECTION_OPTIONS, SINK_ONLY)
    }
    fn create(
        &self,
        o: &mut Options,
        _input: &[TableSchema],
        _job: &JobContext,
    ) -> Result<Arc<dyn Sink>> {
        let server = Server::read(o)?;
        let SinkOptions {
            key,
            expire,
            format,
            field_delimiter,
        } = SinkOptions::read(o)?;
        let format = match format.as_str() {
            "text" => Format::Text {
                delimiter: field_delimiter,
            },
            _ => Format::Json,
        };
        o.finish(self.options())?;
        Ok(Arc::new(RedisSink {
            server,
            key,
            expire,
            format,
        }))
    }
}

#[derive(Debug)]
struct RedisSink {
    server: Server,
    key: String,
    expire: i64,
    format: Format,
}

impl Sink for RedisSink {
    fn delivery(&self) -> SinkDelivery {
        match self.server.data_type {
            DataType::List => SinkDelivery::AtLeastOnce,
            _ => SinkDelivery::ExactlyOnce,
        }
    }
    fn delivery_reason(&self) -> Option<String> {
        Some(match self.server.data_type {
            DataType::List => "at-least-once: rows after the last checkpoint are pushed to the list again after a restart".into(),
            _ => "exactly-once in effect: SET, SADD, ZADD and HSET are idempotent, so rows written again after a restart change nothing (they are visible before their checkpoint completes)".into(),
        })
    }
    fn create_writer(
        &self,
        _ctx: &WriterContext,
        _restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(Writer {
            server: self.server.clone(),
            conn: self.server.connect()?,
            key: self.key.clone(),
            expire: self.expire,
            encoder: Encoder {
                format: self.format.clone(),
            },
            buffer: Vec::new(),
        }))
    }
}

/// One value to write: its key and what goes under it.
enum Entry {
    Value(String, Vec<u8>),
    Fields(String, Vec<(String, String)>),
}

struct Writer {
    server: Server,
    conn: Conn,
    key: String,
    expire: i64,
    encoder: Encoder,
    buffer: Vec<Entry>,
}

impl Writer {
    fn flush(&mut self) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let mut cmds = Vec::with_capacity(self.buffer.len() * 2);
        for e in self.buffer.drain(..) {
            let key = match e {
                Entry::Value(key, value) => {
                    let mut cmd = match self.server.data_type {
                        DataType::String => redis::cmd("SET"),
                        DataType::List => redis::cmd("LPUSH"),
                        DataType::Set => redis::cmd("SADD"),
                        _ => redis::cmd("ZADD"),
                    };
                    cmd.arg(&key);
                    if self.server.data_type == DataType::Zset {
                        cmd.arg(1);
                    }
                    cmd.arg(value);
                    cmds.push(cmd);
                    key
                }
                Entry::Fields(key, fields) => {
                    if !fields.is_empty() {
                        let mut cmd = redis::cmd("HSET");
                        cmd.arg(&key).arg(fields);
                        cmds.push(cmd);
                    }
                    key
                }
            };
            if self.expire > 0 {
                let mut cmd = redis::cmd("EXPIRE");
                cmd.arg(&key).arg(self.expire);
                cmds.push(cmd);
            }
        }
        if cmds.is_empty() {
            return Ok(());
        }
        self.conn
            .write(cmds)
            .map_err(|e| self.server.error("writing to", e))
    }
}

impl SinkWriter for Writer {
    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        let schema = batch.data.schema();
        // A key that names a column takes each row's value of it (as SeaTunnel's writer).
        let key_column = schema.index_of(&self.key).ok();
        // (A copy: the loop flushes through `self`.)
        let encoder = self.encoder.clone();
        let encoder = encoder.batch(&batch.data);
        for i in 0..batch.num_rows() {
            let key = match key_column {
                Some(c) => text_value(batch.data.column(c).as_ref(), i),
                None => self.key.clone(),
            };
            let entry = if self.server.data_type == DataType::Hash {
                let fields = schema
                    .fields()
                    .iter()
                    .zip(batch.data.columns())
                    .filter(|(_, c)| !c.is_null(i))
                    .map(|(f, c)| (f.name().clone(), text_value(c.as_ref(), i)))
                    .collect();
                Entry::Fields(key, fields)
            } else {
                Entry::Value(
                    key,
                    encoder.encode(i).map_err(|e| FerryError::data(NAME, e))?,
                )
            };
            self.buffer.push(entry);
            if self.buffer.len() >= self.server.batch_size {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn prepare_commit(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        self.flush()?;
        Ok(None)
    }

    fn abort(&mut self) -> Result<()> {
        self.buffer.clear();
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        self.flush()
    }
}
