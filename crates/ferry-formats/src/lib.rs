//! # ferry-formats
//!
//! What the message-broker connectors (RabbitMQ, Redis, NATS, MQTT, …) share: reading a
//! job file's `schema { fields { … } }` block into a table, and turning message bodies into
//! rows and rows into message bodies in SeaTunnel's `json` and `text` formats. It lives
//! here, not in one connector, because no connector may depend on another. The JSON forms
//! of values are `ferry_api::value`'s (the same as LocalFile's JSON files), so a row
//! written by one connector reads back in any other.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use ferry_api::catalog::{read_schema_keys, CatalogInfo, TableId};
use ferry_api::options::{OptionKind, OptionSpec, Options};
use ferry_api::types::schema_from_fields;
use ferry_api::value::{array_value_to_json, json_to_array, object_field, RowStyle};
use ferry_api::{FerryError, Result, TableSchema};
use serde_json::Value;

/// The options every broker source that declares its rows' schema accepts.
pub const SCHEMA_OPTIONS: &[OptionSpec] = &[
    OptionSpec::optional("schema.fields", OptionKind::Object, None, "Columns of the rows in the messages, as `name = type`."),
    OptionSpec::optional("schema.table", OptionKind::String, None, "Name of the produced table (`db.table`); defaults to plugin_output / result_table_name, else `default`."),
    OptionSpec::optional("schema.primaryKey", OptionKind::Any, None, "Primary key `{ name, columnNames = [...] }`, carried to sinks."),
    OptionSpec::optional("schema.constraintKeys", OptionKind::Any, None, "Unique keys `[{ constraintName, constraintType, constraintColumns }]`, carried to sinks."),
    OptionSpec::optional("schema.comment", OptionKind::String, None, "Table comment."),
];

/// Reads `schema { fields { … } }` (with `table`, `primaryKey`, `constraintKeys`) into the
/// table a source produces, for plugin `plugin` (its catalog name). `None` when the job
/// sets no schema.
pub fn read_schema(o: &mut Options, plugin: &str) -> Result<Option<TableSchema>> {
    let Some(fields) = o.object("schema.fields")? else {
        return Ok(None);
    };
    let schema = schema_from_fields(&fields).map_err(|e| o.error("schema.fields", e.0))?;
    let table = o.string("schema.table")?.filter(|t| !t.trim().is_empty());
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
}

/// What to do with a message that does not decode (SeaTunnel's `format_error_handle_way`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Stop the job with an error naming the message.
    Fail,
    /// Leave the message out (it is still acknowledged) and go on.
    Skip,
}

/// The options that choose a format.
pub const FORMAT_OPTIONS: &[OptionSpec] = &[
    OptionSpec::optional(
        "format",
        OptionKind::Enum(&["json", "text"]),
        Some("json"),
        "How message bodies encode rows.",
    ),
    OptionSpec::optional(
        "field_delimiter",
        OptionKind::String,
        Some(","),
        "Delimiter between values in the text format.",
    ),
    OptionSpec::optional(
        "format_error_handle_way",
        OptionKind::Enum(&["fail", "skip"]),
        Some("fail"),
        "A message that does not decode stops the job (fail) or is left out (skip).",
    ),
];

/// Reads `format`, `field_delimiter` and `format_error_handle_way`.
pub fn read_format(o: &mut Options) -> Result<(Format, OnError)> {
    let format = match o.enum_value("format", &["json", "text"])? {
        Some("text") => Format::Text {
            delimiter: o.string("field_delimiter")?.unwrap_or_else(|| ",".into()),
        },
        _ => {
            o.string("field_delimiter")?;
            Format::Json
        }
    };
    let on_error = match o.enum_value("format_error_handle_way", &["fail", "skip"])? {
        Some("skip") => OnError::Skip,
        _ => OnError::Fail,
    };
    Ok((format, on_error))
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
}

impl Decoder {
    /// Decodes `bodies` in order; `component` names the plugin in errors. A body that does
    /// not decode fails the call (naming its position and the reason) or is skipped.
    pub fn decode(&self, component: &str, bodies: &[&[u8]]) -> Result<Decoded> {
        let mut rows: Vec<serde_json::Map<String, Value>> = Vec::with_capacity(bodies.len());
        let mut skipped = 0;
        for (i, body) in bodies.iter().enumerate() {
            let start = rows.len();
            let r = self.parse(body, &mut rows).and_then(|()| {
                // Check every value against its column now, so that a bad message is
                // the one named (or skipped), not the whole run.
                self.columns(&rows[start..]).map(|_| ())
            });
            if let Err(reason) = r {
                rows.truncate(start);
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
        let batch = if columns.is_empty() {
            RecordBatch::try_new_with_options(
                self.schema.clone(),
                vec![],
                &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.len())),
            )?
        } else {
            RecordBatch::try_new(self.schema.clone(), columns)?
        };
        Ok(Decoded { batch, skipped })
    }

    fn format_name(&self) -> &'static str {
        match self.format {
            Format::Json => "json",
            Format::Text { .. } => "text",
        }
    }

    fn parse(
        &self,
        body: &[u8],
        out: &mut Vec<serde_json::Map<String, Value>>,
    ) -> std::result::Result<(), String> {
        let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8: {e}"))?;
        match &self.format {
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
    /// The body of row `i` of `batch`.
    pub fn encode(&self, batch: &RecordBatch, i: usize) -> Vec<u8> {
        match &self.format {
            Format::Json => {
                let schema = batch.schema();
                let m: serde_json::Map<String, Value> = schema
                    .fields()
                    .iter()
                    .zip(batch.columns())
                    .map(|(f, c)| {
                        (
                            f.name().clone(),
                            array_value_to_json(c.as_ref(), i, RowStyle::Named),
                        )
                    })
                    .collect();
                Value::Object(m).to_string().into_bytes()
            }
            Format::Text { delimiter } => batch
                .columns()
                .iter()
                .map(|c| text_value(c.as_ref(), i))
                .collect::<Vec<_>>()
                .join(delimiter)
                .into_bytes(),
        }
    }
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
        let bodies: Vec<Vec<u8>> = (0..2).map(|i| enc.encode(&batch, i)).collect();
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
        assert_eq!(enc.encode(&d.batch, 0), b"7|seven");
        assert_eq!(enc.encode(&d.batch, 1), b"|");
        let err = dec.decode("test", &[b"1|2|3"]).unwrap_err().to_string();
        assert!(err.contains("3 values for 2 columns"), "{err}");
    }
}
