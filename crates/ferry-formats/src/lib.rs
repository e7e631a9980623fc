//! # ferry-formats
//!
//! What the message-broker connectors (RabbitMQ, Redis, NATS, MQTT, …) share: reading a
//! job file's `schema { fields { … } }` block into a table, turning message bodies into
//! rows and rows into message bodies in SeaTunnel's `json` and `text` formats and its
//! change-data formats (Canal, Debezium, Maxwell, OGG, Kafka Connect; [`ChangeFormat`]), the options
//! that choose them, secrets kept out of `Debug` output, and acknowledgements held until
//! their checkpoint completes, and the enumerator of a source read as one split; and the
//! Debezium events of the CDC sources' `COMPATIBLE_DEBEZIUM_JSON` ([`debezium_envelope`]).
//! It lives here, not in one connector, because no connector may depend on another. The
//! JSON forms of values are `ferry_api::value`'s (the same as LocalFile's JSON files), so a
//! row written by one connector reads back in any other.

use std::sync::Arc;

pub mod avro;
mod change;
pub mod debezium_envelope;
pub mod json_lines;
pub mod json_rows;
pub mod protobuf;

pub use change::ChangeFormat;

use arrow::array::{Array, ArrayRef, RecordBatch, UInt8Array};
use arrow::datatypes::{DataType, SchemaRef};
use ferry_api::catalog::{read_schema_keys, CatalogInfo, TableId};
use ferry_api::options::{OptionKind, OptionSpec, Options};
use ferry_api::types::schema_from_fields;
use ferry_api::value::{array_value_to_json, json_to_array, object_field, RowStyle};
use ferry_api::{FerryError, Result, RowKind, Split, SplitEnumerator, TableSchema};
use serde_json::{Map, Value};

ferry_api::declare_options! {
    /// The options every broker source that declares its rows' schema accepts.
    pub struct SchemaOptions => SCHEMA_OPTIONS {
        /// Columns of the rows in the messages, as `name = type`.
        fields: Map<String, Value> = "schema.fields", optional;
        /// Name of the produced table (`db.table`); defaults to plugin_output / result_table_name, else `default`.
        table: String = "schema.table", optional;
        /// Primary key `{ name, columnNames = [...] }`, carried to sinks.
        _primary_key: Value = "schema.primaryKey", optional;
        /// Unique keys `[{ constraintName, constraintType, constraintColumns }]`, carried to sinks.
        _constraint_keys: Value = "schema.constraintKeys", optional;
        /// Table comment.
        _comment: String = "schema.comment", optional;
    }
}

/// Reads `schema { fields { … } }` (with `table`, `primaryKey`, `constraintKeys`) into the
/// table a source produces, for plugin `plugin` (its catalog name). `None` when the job
/// sets no schema.
pub fn read_schema(o: &mut Options, plugin: &str) -> Result<Option<TableSchema>> {
    let SchemaOptions { fields, table, .. } = SchemaOptions::read(o)?;
    let Some(fields) = fields else {
        return Ok(None);
    };
    let schema = schema_from_fields(&fields).map_err(|e| o.error("schema.fields", e.0))?;
    let table = table.filter(|t| !t.trim().is_empty());
    let default_name = match o.string("plugin_output")? {
        Some(n) => Some(n),
        None => o.string("result_table_name")?,
    };
    let mut catalog = CatalogInfo {
        id: Some(TableId::from_path(
            plugin,
            table
                .as_deref()
                .or(default_name.as_deref())
                .unwrap_or("default.default.default"),
        )),
        ..CatalogInfo::default()
    };
    read_schema_keys(o, "schema", &mut catalog)?;
    let name = table.or(default_name).unwrap_or_else(|| "default".into());
    Ok(Some(
        TableSchema::new(name, Arc::new(schema)).with_catalog(catalog),
    ))
}

/// A password or token from a job file, kept out of `Debug` output (plans and errors print
/// plugins' configs).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Acknowledgements a broker source holds until the checkpoint whose rows they cover has
/// completed: at each snapshot the reader records the newest one it may send, and when a
/// checkpoint completes it sends the greatest recorded up to that checkpoint (brokers'
/// acknowledgements here are cumulative: a delivery tag, a stream sequence).
///
/// ```
/// let mut acks = ferry_formats::PendingAcks::default();
/// acks.push(1, 10);
/// acks.push(2, 25);
/// acks.push(3, 30);
/// assert_eq!(acks.complete(2), Some(25));
/// assert_eq!(acks.complete(2), None);
/// assert_eq!(acks.complete(5), Some(30));
/// ```
#[derive(Debug, Clone)]
pub struct PendingAcks<T> {
    pending: Vec<(u64, T)>,
}

impl<T> Default for PendingAcks<T> {
    fn default() -> Self {
        PendingAcks {
            pending: Vec::new(),
        }
    }
}

impl<T: Ord + Clone> PendingAcks<T> {
    /// Records `ack` as what completing checkpoint `checkpoint_id` may acknowledge.
    pub fn push(&mut self, checkpoint_id: u64, ack: T) {
        self.pending.push((checkpoint_id, ack));
    }

    /// The greatest acknowledgement recorded for checkpoints up to `checkpoint_id`, which
    /// are then forgotten; `None` when there is none.
    pub fn complete(&mut self, checkpoint_id: u64) -> Option<T> {
        let max = self
            .pending
            .iter()
            .filter(|(c, _)| *c <= checkpoint_id)
            .map(|(_, a)| a)
            .max()
            .cloned();
        self.pending.retain(|(c, _)| *c > checkpoint_id);
        max
    }
}

impl ferry_api::declare::OptionValue for Secret {
    const KIND: ferry_api::OptionKind = ferry_api::OptionKind::String;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        Ok(o.string(key)?.map(Secret))
    }
}

impl ferry_api::declare::DefaultValue<Secret> for &str {
    fn into_value(self) -> Secret {
        Secret(self.to_string())
    }
}

/// The enumerator of a source that reader 0 reads as one split (one session, one scan,
/// one consumer): it hands the split out once, and again when it comes back (its reader
/// failed: the engine restores the reader's state from the checkpoint). Its own state is
/// whether the split is out, for then a reader's state holds it.
///
/// ```
/// use ferry_api::{Split, SplitEnumerator};
/// let split = Split { id: "scan".into(), state: serde_json::json!({}) };
/// let mut e = ferry_formats::OneSplit::new(split.clone(), None);
/// assert_eq!(e.discover().unwrap().len(), 1);
/// assert!(e.is_exhausted());
/// let state = e.snapshot(1).unwrap();
/// assert!(ferry_formats::OneSplit::new(split, Some(state)).is_exhausted());
/// ```
#[derive(Debug)]
pub struct OneSplit {
    split: Split,
    pending: bool,
}

impl OneSplit {
    /// Hands `split` to reader 0, unless `restored` (this enumerator's state) says it is out.
    pub fn new(split: Split, restored: Option<Value>) -> OneSplit {
        OneSplit {
            split,
            pending: restored.and_then(|v| v.as_bool()) != Some(true),
        }
    }
}

impl SplitEnumerator for OneSplit {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        if !std::mem::take(&mut self.pending) {
            return Ok(Vec::new());
        }
        Ok(vec![(0, self.split.clone())])
    }
    fn is_exhausted(&self) -> bool {
        !self.pending
    }
    fn add_splits_back(&mut self, _splits: Vec<Split>, _reader: usize) {
        self.pending = true;
    }
    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Value> {
        Ok(Value::Bool(!self.pending))
    }
}

/// How message bodies encode rows (SeaTunnel's `format` option).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per message (or an array of objects: one row each); fields by name.
    Json,
    /// The row's values as text, joined by a delimiter, in schema order.
    Text {
        /// SeaTunnel's `field_delimiter` (default `,`).
        delimiter: String,
    },
    /// A change-data format: rows with their row kinds.
    Change(ChangeFormat),
    /// SeaTunnel's Avro: one binary datum per message ([`avro`]).
    Avro,
    /// SeaTunnel's Protocol Buffers: one message of a `.proto` text's type ([`protobuf`]).
    Protobuf(std::sync::Arc<protobuf::Proto>),
    /// SeaTunnel's `compatible_debezium_json`, written only: the rows of a CDC source with
    /// the same format ([`debezium_envelope`]: text columns `topic`, `key`, `value`) are
    /// written as the message's topic, key and value unchanged.
    CompatibleDebeziumJson,
}

/// What to do with a message that does not decode (SeaTunnel's `format_error_handle_way`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Stop the job with an error naming the message.
    Fail,
    /// Leave the message out (it is still acknowledged) and go on.
    Skip,
}

const FORMATS: &[&str] = &["json", "text"];
const ON_ERROR: &[&str] = &["fail", "skip"];

ferry_api::declare_options! {
    /// The options that choose a format.
    pub struct FormatOptions => FORMAT_OPTIONS {
        /// How message bodies encode rows.
        format: String = "format", default "json", one_of FORMATS;
        /// Delimiter between values in the text format.
        field_delimiter: String = "field_delimiter", default ",";
        /// A message that does not decode stops the job (fail) or is left out (skip).
        on_error: String = "format_error_handle_way", default "fail", one_of ON_ERROR;
    }
}

/// Every format a source or sink that carries change data (Kafka) reads or writes.
const CHANGE_FORMATS: &[&str] = &[
    "json",
    "text",
    "canal_json",
    "debezium_json",
    "maxwell_json",
    "ogg_json",
    "compatible_kafka_connect_json",
    "avro",
    "protobuf",
    "compatible_debezium_json",
];

ferry_api::declare_options! {
    /// The options that choose a format where change-data formats are accepted too.
    pub struct ChangeFormatOptions => CHANGE_FORMAT_OPTIONS {
        /// How message bodies encode rows: json, text, avro, or the change-data formats canal_json, debezium_json, maxwell_json, ogg_json (rows with row kinds), compatible_kafka_connect_json (read only) and compatible_debezium_json (written only: a CDC source's topic, key and value rows).
        format: String = "format", default "json", one_of CHANGE_FORMATS;
        /// Delimiter between values in the text format.
        field_delimiter: String = "field_delimiter", default ",";
        /// A message that does not decode stops the job (fail) or is left out (skip).
        on_error: String = "format_error_handle_way", default "fail", one_of ON_ERROR;
        /// With debezium_json: the messages are Kafka Connect envelopes `{schema, payload}`.
        include_schema: bool = "debezium_record_include_schema", default true;
        /// With compatible_kafka_connect_json: the values are `{schema, payload}` envelopes.
        value_schema: bool = "value_converter_schema_enabled", default true;
        /// With compatible_kafka_connect_json: the keys are envelopes (keys are not read).
        _key_schema: bool = "key_converter_schema_enabled", default true;
        /// With protobuf: the `.proto` text describing the messages.
        protobuf_schema: String = "protobuf_schema", optional;
        /// With protobuf: the message (its name or full name) each Kafka message is.
        protobuf_message_name: String = "protobuf_message_name", optional;
    }
}

/// Reads [`CHANGE_FORMAT_OPTIONS`]: `format` (change-data formats included),
/// `field_delimiter`, `format_error_handle_way` and the formats' own options.
pub fn read_change_format(o: &mut Options) -> Result<(Format, OnError)> {
    let f = ChangeFormatOptions::read(o)?;
    let format = match f.format.as_str() {
        "text" => Format::Text {
            delimiter: f.field_delimiter,
        },
        "canal_json" => Format::Change(ChangeFormat::Canal),
        "debezium_json" => Format::Change(ChangeFormat::Debezium {
            include_schema: f.include_schema,
        }),
        "maxwell_json" => Format::Change(ChangeFormat::Maxwell),
        "ogg_json" => Format::Change(ChangeFormat::Ogg),
        "compatible_kafka_connect_json" => Format::Change(ChangeFormat::KafkaConnect {
            value_schema: f.value_schema,
        }),
        "avro" => Format::Avro,
        "compatible_debezium_json" => Format::CompatibleDebeziumJson,
        "protobuf" => {
            let (Some(text), Some(name)) = (&f.protobuf_schema, &f.protobuf_message_name) else {
                return Err(o.error(
                    "format",
                    "protobuf needs protobuf_schema (the .proto text) and protobuf_message_name",
                ));
            };
            let proto =
                protobuf::Proto::parse(text, name).map_err(|e| o.error("protobuf_schema", e))?;
            Format::Protobuf(std::sync::Arc::new(proto))
        }
        _ => Format::Json,
    };
    Ok((format, on_error(&f.on_error)))
}

fn on_error(text: &str) -> OnError {
    match text {
        "skip" => OnError::Skip,
        _ => OnError::Fail,
    }
}

/// Reads `format`, `field_delimiter` and `format_error_handle_way`.
pub fn read_format(o: &mut Options) -> Result<(Format, OnError)> {
    let f = FormatOptions::read(o)?;
    let format = match f.format.as_str() {
        "text" => Format::Text {
            delimiter: f.field_delimiter,
        },
        _ => Format::Json,
    };
    Ok((format, on_error(&f.on_error)))
}

/// `schema`, as the options of a source whose messages' schema must be declared list it;
/// read with [`require_schema`].
pub const MESSAGE_SCHEMA: &[OptionSpec] = &[OptionSpec::required(
    "schema",
    OptionKind::Object,
    "schema { fields { name = type } }: the columns of the messages.",
)];

/// [`read_schema`] for a source that cannot do without one: unset is an error.
pub fn require_schema(o: &mut Options, plugin: &str) -> Result<TableSchema> {
    read_schema(o, plugin)?
        .ok_or_else(|| o.error("schema", "is required: schema { fields { name = type } }"))
}

ferry_api::declare_options! {
    /// The options with which a broker sink chooses how rows become messages.
    pub struct SinkFormatOptions => SINK_FORMAT_OPTIONS {
        /// How a row becomes a message.
        format: String = "format", default "json", one_of FORMATS;
        /// Delimiter between values with format = text.
        field_delimiter: String = "field_delimiter", default ",";
    }
}

/// Reads a sink's `format` and `field_delimiter` ([`SINK_FORMAT_OPTIONS`]).
pub fn read_sink_format(o: &mut Options) -> Result<Format> {
    let f = SinkFormatOptions::read(o)?;
    Ok(match f.format.as_str() {
        "text" => Format::Text {
            delimiter: f.field_delimiter,
        },
        _ => Format::Json,
    })
}

/// Turns message bodies into rows of one schema.
#[derive(Debug, Clone)]
pub struct Decoder {
    /// The rows' schema.
    pub schema: SchemaRef,
    /// How bodies encode them.
    pub format: Format,
    /// What a body that does not decode does.
    pub on_error: OnError,
}

/// Rows decoded from a run of messages.
#[derive(Debug)]
pub struct Decoded {
    /// The rows, in message order.
    pub batch: RecordBatch,
    /// Messages left out because they did not decode (with `OnError::Skip`).
    pub skipped: usize,
    /// Each row's [`RowKind`] code, when a change-data format gave other rows than inserts.
    pub kinds: Option<UInt8Array>,
}

impl Decoder {
    /// Decodes `bodies` in order; `component` names the plugin in errors. A body that does
    /// not decode fails the call (naming its position and the reason) or is skipped.
    pub fn decode(&self, component: &str, bodies: &[&[u8]]) -> Result<Decoded> {
        if matches!(self.format, Format::Json) {
            if let Some(d) = self.decode_json_objects(bodies)? {
                return Ok(d);
            }
        }
        self.decode_each(component, bodies)
    }

    /// `rows` rows of the schema from `columns` (none for a schema without columns).
    fn batch(&self, columns: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch> {
        Ok(if columns.is_empty() {
            RecordBatch::try_new_with_options(
                self.schema.clone(),
                vec![],
                &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
            )?
        } else {
            RecordBatch::try_new(self.schema.clone(), columns)?
        })
    }

    /// [`decode`](Self::decode) through a `serde_json` value a message, each message
    /// checked against the columns on its own (so that a bad one is named or skipped).
    fn decode_each(&self, component: &str, bodies: &[&[u8]]) -> Result<Decoded> {
        let mut rows: Vec<serde_json::Map<String, Value>> = Vec::with_capacity(bodies.len());
        let mut kinds: Vec<u8> = Vec::with_capacity(bodies.len());
        let mut skipped = 0;
        for (i, body) in bodies.iter().enumerate() {
            let start = rows.len();
            let r = self.parse(body, &mut rows, &mut kinds).and_then(|()| {
                // Check every value against its column now, so that a bad message is
                // the one named (or skipped), not the whole run.
                self.columns(&rows[start..]).map(|_| ())
            });
            if let Err(reason) = r {
                rows.truncate(start);
                kinds.truncate(start);
                match self.on_error {
                    OnError::Skip => skipped += 1,
                    OnError::Fail => {
                        return Err(FerryError::data(
                            component,
                            format!(
                                "message {} of this run does not decode as {}: {reason} (set format_error_handle_way = skip to leave such messages out)",
                                i + 1,
                                self.format_name()
                            ),
                        ))
                    }
                }
            }
        }
        let columns = self
            .columns(&rows)
            .map_err(|e| FerryError::data(component, e))?;
        let batch = self.batch(columns, rows.len())?;
        let kinds = kinds
            .iter()
            .any(|k| *k != RowKind::Insert as u8)
            .then(|| UInt8Array::from(kinds));
        Ok(Decoded {
            batch,
            skipped,
            kinds,
        })
    }

    /// `format = json` bodies of one object each, decoded straight into Arrow builders
    /// ([`json_lines::JsonDecoder`]) rather than into a `serde_json` value a message.
    /// `None` when a body is anything else, or anything the general path decides (a
    /// list of objects, a name that matches only ignoring case, a value that does not
    /// fit, …): the general path then reads the whole run, so that rows, skips and errors
    /// stay exactly its own.
    fn decode_json_objects(&self, bodies: &[&[u8]]) -> Result<Option<Decoded>> {
        let mut d = json_lines::JsonDecoder::new(self.schema.fields().clone(), bodies.len());
        for body in bodies {
            let Ok(text) = std::str::from_utf8(body) else {
                return Ok(None);
            };
            if d.decode_line(text).is_err() {
                return Ok(None);
            }
        }
        let Ok(columns) = d.finish() else {
            return Ok(None);
        };
        let batch = self.batch(columns, bodies.len())?;
        Ok(Some(Decoded {
            batch,
            skipped: 0,
            kinds: None,
        }))
    }

    /// [`decode`](Self::decode)'s rows, logging how many messages were left out;
    /// `source` names where they came from (a queue, a topic, a key pattern).
    pub fn decode_logged(
        &self,
        component: &str,
        source: &str,
        bodies: &[&[u8]],
    ) -> Result<RecordBatch> {
        let decoded = self.decode(component, bodies)?;
        if decoded.skipped > 0 {
            tracing::warn!(
                skipped = decoded.skipped,
                source,
                "{component}: messages that do not decode were left out"
            );
        }
        Ok(decoded.batch)
    }

    fn format_name(&self) -> &'static str {
        match &self.format {
            Format::Json => "json",
            Format::Text { .. } => "text",
            Format::Change(c) => c.name(),
            Format::Avro => "avro",
            Format::Protobuf(_) => "protobuf",
            Format::CompatibleDebeziumJson => "compatible_debezium_json",
        }
    }

    /// Appends the rows of `body` to `out` and their kinds to `kinds`.
    fn parse(
        &self,
        body: &[u8],
        out: &mut Vec<serde_json::Map<String, Value>>,
        kinds: &mut Vec<u8>,
    ) -> std::result::Result<(), String> {
        self.parse_rows(body, out, kinds)?;
        // Json and text rows are inserts.
        kinds.resize(out.len(), RowKind::Insert as u8);
        Ok(())
    }

    fn parse_rows(
        &self,
        body: &[u8],
        out: &mut Vec<serde_json::Map<String, Value>>,
        kinds: &mut Vec<u8>,
    ) -> std::result::Result<(), String> {
        match &self.format {
            Format::Avro => {
                out.push(avro::decode_row(body, &self.schema)?);
                return Ok(());
            }
            Format::Protobuf(p) => {
                out.push(protobuf::decode_row(p, body, &self.schema)?);
                return Ok(());
            }
            Format::CompatibleDebeziumJson => {
                return Err("compatible_debezium_json is written only (SeaTunnel reads it neither); read Debezium's messages with debezium_json".into())
            }
            _ => {}
        }
        let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8: {e}"))?;
        match &self.format {
            Format::Avro | Format::Protobuf(_) | Format::CompatibleDebeziumJson => {}
            Format::Change(c) => {
                if text.trim().is_empty() {
                    // A tombstone: no change.
                    return Ok(());
                }
                let msg: Value =
                    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
                c.read(msg, &self.schema, &mut change::Rows { rows: out, kinds })?;
            }
            Format::Json => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(m)) => out.push(m),
                Ok(Value::Array(items)) => {
                    for item in items {
                        match item {
                            Value::Object(m) => out.push(m),
                            other => return Err(format!("expected an object, found {other}")),
                        }
                    }
                }
                Ok(other) => return Err(format!("expected an object, found {other}")),
                Err(e) => return Err(format!("not JSON: {e}")),
            },
            Format::Text { delimiter } => {
                let parts: Vec<&str> = if delimiter.is_empty() {
                    vec![text]
                } else {
                    text.split(delimiter.as_str()).collect()
                };
                let fields = self.schema.fields();
                if parts.len() != fields.len() {
                    return Err(format!(
                        "{} values for {} columns",
                        parts.len(),
                        fields.len()
                    ));
                }
                out.push(
                    fields
                        .iter()
                        .zip(parts)
                        .map(|(f, p)| {
                            let v = match f.data_type() {
                                DataType::Utf8 | DataType::LargeUtf8 => {
                                    Value::String(p.to_string())
                                }
                                _ if p.is_empty() => Value::Null,
                                _ => serde_json::from_str(p)
                                    .unwrap_or_else(|_| Value::String(p.to_string())),
                            };
                            (f.name().clone(), v)
                        })
                        .collect(),
                );
            }
        }
        Ok(())
    }

    fn columns(
        &self,
        rows: &[serde_json::Map<String, Value>],
    ) -> std::result::Result<Vec<ArrayRef>, String> {
        let null = Value::Null;
        self.schema
            .fields()
            .iter()
            .map(|f| {
                let values: Vec<&Value> = rows
                    .iter()
                    .map(|r| object_field(r, f.name()).unwrap_or(&null))
                    .collect();
                json_to_array(&values, f.data_type())
                    .map_err(|e| format!("field {}: {e}", f.name()))
            })
            .collect()
    }
}

/// Turns rows into message bodies.
#[derive(Debug, Clone)]
pub struct Encoder {
    /// How bodies encode rows.
    pub format: Format,
}

impl Encoder {
    /// The body of row `i` of `batch`, an insert.
    pub fn encode(&self, batch: &RecordBatch, i: usize) -> std::result::Result<Vec<u8>, String> {
        self.encode_change(batch, RowKind::Insert, i)
    }

    /// The body of row `i` of `batch`, of kind `kind`: change-data formats record it (as
    /// an insert or a delete), json, text and avro write the row alone. Only avro can fail
    /// (on a null: its schema has none).
    pub fn encode_change(
        &self,
        batch: &RecordBatch,
        kind: RowKind,
        i: usize,
    ) -> std::result::Result<Vec<u8>, String> {
        Ok(match &self.format {
            Format::Json => Value::Object(row_object(batch, i)).to_string().into_bytes(),
            Format::Change(c) => c.write(row_object(batch, i), kind).to_string().into_bytes(),
            Format::Text { delimiter } => batch
                .columns()
                .iter()
                .map(|c| text_value(c.as_ref(), i))
                .collect::<Vec<_>>()
                .join(delimiter)
                .into_bytes(),
            Format::Avro => return avro::encode_row(batch, i),
            Format::Protobuf(p) => return protobuf::encode_row(p, batch, i),
            Format::CompatibleDebeziumJson => {
                let Some(c) = batch.column_by_name("value") else {
                    return Err("compatible_debezium_json needs the column 'value' of a CDC source with format = COMPATIBLE_DEBEZIUM_JSON".into());
                };
                text_value(c.as_ref(), i).into_bytes()
            }
        })
    }
}

/// An [`Encoder`] on one batch: what it needs of the batch is looked up once, not once a
/// row (`format = json` rows are written straight from their columns, [`json_rows`]).
pub struct BatchEncoder<'a> {
    encoder: &'a Encoder,
    batch: &'a RecordBatch,
    json: Option<json_rows::JsonRowWriter<'a>>,
}

impl Encoder {
    /// The encoder of `batch`'s rows.
    pub fn batch<'a>(&'a self, batch: &'a RecordBatch) -> BatchEncoder<'a> {
        let json = match self.format {
            Format::Json => json_rows::JsonRowWriter::new(batch),
            _ => None,
        };
        BatchEncoder {
            encoder: self,
            batch,
            json,
        }
    }
}

impl BatchEncoder<'_> {
    /// The body of row `i`, an insert ([`Encoder::encode`]).
    pub fn encode(&self, i: usize) -> std::result::Result<Vec<u8>, String> {
        let mut out = Vec::new();
        self.encode_change_into(RowKind::Insert, i, &mut out)?;
        Ok(out)
    }

    /// Appends the body of row `i`, of kind `kind`, to `out` ([`Encoder::encode_change`]).
    pub fn encode_change_into(
        &self,
        kind: RowKind,
        i: usize,
        out: &mut Vec<u8>,
    ) -> std::result::Result<(), String> {
        match &self.json {
            Some(w) => w.write(i, out),
            None => out.extend_from_slice(&self.encoder.encode_change(self.batch, kind, i)?),
        }
        Ok(())
    }
}

/// Row `i` of `batch` as a JSON object, columns in schema order.
fn row_object(batch: &RecordBatch, i: usize) -> Map<String, Value> {
    batch
        .schema_ref()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| {
            (
                f.name().clone(),
                array_value_to_json(c.as_ref(), i, RowStyle::Named),
            )
        })
        .collect()
}

/// A value as the text format writes it: strings as they are, nulls empty, others as JSON.
pub fn text_value(c: &dyn Array, i: usize) -> String {
    match array_value_to_json(c, i, RowStyle::Named) {
        Value::Null => String::new(),
        Value::String(s) => s,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    /// The schema of SeaTunnel's `schema { fields { … } }` block, given as JSON.
    pub(crate) fn schema_of(json: serde_json::Value) -> std::sync::Arc<arrow::datatypes::Schema> {
        let serde_json::Value::Object(m) = json else {
            panic!("fields must be an object: {json}")
        };
        std::sync::Arc::new(ferry_api::types::schema_from_fields(&m).unwrap())
    }

    #[test]
    fn option_lists_are_what_ferry_connectors_print() {
        ferry_api::declare::check_specs(super::SCHEMA_OPTIONS, &[]).unwrap();
        ferry_api::declare::check_specs(super::FORMAT_OPTIONS, &[]).unwrap();
        ferry_api::declare::check_specs(super::CHANGE_FORMAT_OPTIONS, &[]).unwrap();
        let mut o = ferry_api::Options::from_json("Kafka", serde_json::json!({}));
        let (format, on_error) = super::read_format(&mut o).unwrap();
        assert_eq!(
            (format, on_error),
            (super::Format::Json, super::OnError::Fail)
        );
    }

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    #[test]
    fn json_rows_round_trip_and_a_bad_message_fails_or_is_skipped() {
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None])),
                Arc::new(StringArray::from(vec![Some("a,b"), Some("c")])),
            ],
        )
        .unwrap();
        let enc = Encoder {
            format: Format::Json,
        };
        let bodies: Vec<Vec<u8>> = (0..2).map(|i| enc.encode(&batch, i).unwrap()).collect();
        assert_eq!(bodies[0], br#"{"id":1,"name":"a,b"}"#);
        let mut dec = Decoder {
            schema: schema(),
            format: Format::Json,
            on_error: OnError::Fail,
        };
        let mut refs: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
        assert_eq!(dec.decode("test", &refs).unwrap().batch, batch);
        refs.insert(1, b"{\"id\": \"x\"}");
        let err = dec.decode("test", &refs).unwrap_err().to_string();
        assert!(err.contains("message 2 of this run"), "{err}");
        dec.on_error = OnError::Skip;
        let d = dec.decode("test", &refs).unwrap();
        assert_eq!((d.batch, d.skipped), (batch, 1));
    }

    #[test]
    fn json_objects_decode_straight_into_columns_as_the_general_path_reads_them() {
        let dec = Decoder {
            schema: schema_of(serde_json::json!({
                "id": "bigint", "name": "string", "ok": "boolean", "price": "decimal(10, 2)",
                "day": "date", "ts": "timestamp", "tags": "array<string>", "score": "double"
            })),
            format: Format::Json,
            on_error: OnError::Fail,
        };
        let bodies: [&[u8]; 4] = [
            br#"{"id":1,"name":"a\"b\u00e9","ok":true,"price":12.5,"day":"2024-02-29","ts":"2024-02-24T14:11:08.5","tags":["x","y"],"score":-2.5e-3}"#,
            br#" {"name": null, "extra": {"deep": [1, {"x": null}]}, "ts": "2024-02-24 14:11"} "#,
            br#"{}"#,
            b"{\"id\":9007199254740993,\"score\":7}\n",
        ];
        let fast = dec
            .decode_json_objects(&bodies)
            .unwrap()
            .expect("decoded directly");
        let general = dec.decode_each("test", &bodies).unwrap();
        assert_eq!(fast.batch, general.batch);
        assert_eq!(dec.decode("test", &bodies).unwrap().batch, general.batch);
        // What the direct decoder leaves to the general path, which still reads it.
        for body in [
            &br#"[{"id":1},{"id":2}]"#[..], // a list of rows in one message
            br#"{"ID":1}"#,                 // a name matched ignoring case
            br#"{"id":"1"}"#,               // a number as text
        ] {
            assert!(dec.decode_json_objects(&[body]).unwrap().is_none());
            let d = dec.decode("test", &[body]).unwrap();
            assert_eq!(d.batch, dec.decode_each("test", &[body]).unwrap().batch);
            assert!(d.batch.num_rows() >= 1);
        }
        assert!(dec.decode_json_objects(&[b"\xff"]).unwrap().is_none());
    }

    #[test]
    fn text_rows_split_on_the_delimiter_and_count_their_values() {
        let dec = Decoder {
            schema: schema(),
            format: Format::Text {
                delimiter: "|".into(),
            },
            on_error: OnError::Fail,
        };
        let d = dec.decode("test", &[b"7|seven", b"|"]).unwrap();
        let enc = Encoder {
            format: dec.format.clone(),
        };
        assert_eq!(enc.encode(&d.batch, 0).unwrap(), b"7|seven");
        assert_eq!(enc.encode(&d.batch, 1).unwrap(), b"|");
        let err = dec.decode("test", &[b"1|2|3"]).unwrap_err().to_string();
        assert!(err.contains("3 values for 2 columns"), "{err}");
    }

    #[test]
    fn change_formats_give_row_kinds_and_write_them_back() {
        let mut o = ferry_api::Options::from_json(
            "Kafka",
            serde_json::json!({"format": "CANAL_JSON", "format_error_handle_way": "skip"}),
        );
        let (format, on_error) = read_change_format(&mut o).unwrap();
        assert_eq!(format, Format::Change(ChangeFormat::Canal));
        let dec = Decoder {
            schema: schema(),
            format,
            on_error,
        };
        let d = dec
            .decode(
                "test",
                &[
                    br#"{"data":[{"id":"1","name":"a"}],"type":"INSERT"}"#,
                    br#"{"data":null,"type":"ALTER","isDdl":true}"#,
                    br#"{"data":[{"id":"x"}],"type":"DELETE"}"#,
                    br#"{"data":[{"id":"1","name":"b"}],"old":[{"name":"a"}],"type":"UPDATE"}"#,
                ],
            )
            .unwrap();
        // The DDL gives no row; the message whose id is not a number is skipped.
        assert_eq!(d.skipped, 1);
        assert_eq!(d.kinds.as_ref().unwrap().values().to_vec(), vec![0, 1, 2]);
        let names = d
            .batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(
            names.iter().flatten().collect::<Vec<_>>(),
            vec!["a", "a", "b"]
        );
        let enc = Encoder {
            format: dec.format.clone(),
        };
        assert_eq!(
            enc.encode_change(&d.batch, RowKind::UpdateBefore, 1)
                .unwrap(),
            br#"{"data":{"id":1,"name":"a"},"type":"DELETE"}"#
        );
        let mut o = ferry_api::Options::from_json("Kafka", serde_json::json!({}));
        assert_eq!(read_change_format(&mut o).unwrap().0, Format::Json);
    }
}
