//! SeaTunnel's `format = COMPATIBLE_DEBEZIUM_JSON` for the CDC sources: each change becomes
//! one row `topic STRING, key STRING, value STRING`, where `key` and `value` are what
//! Debezium's `JsonConverter` writes for the change's Kafka Connect record, and `topic` is
//! the record's topic. The Kafka sink with the same format writes `key` and `value` as the
//! message's key and value to the topic `topic` names.
//!
//! SeaTunnel builds these rows from the records of its embedded Debezium (1.9.8.Final)
//! with `JsonConverter` configured with `decimal.format = NUMERIC`
//! (`CompatibleDebeziumJsonDeserializationSchema`, `DebeziumJsonConverter`). Ferry reads
//! the log itself and writes the same JSON:
//!
//! - **topic**: `<database.server.name>.<schema or database>.<table>`; the server name is
//!   SeaTunnel's fixed `postgres_cdc_source` / `mysql_binlog_source` unless the job's
//!   `debezium { database.server.name = … }` sets another.
//! - **key**: `{"schema": …, "payload": {key columns}}` (`<topic>.Key`), null for a table
//!   without a key; just the payload with `key.converter.schemas.enable = false`.
//! - **value**: `{"schema": …, "payload": {"before", "after", "source", "op", "ts_ms",
//!   "transaction"}}` (`<topic>.Envelope`); just the payload with
//!   `value.converter.schemas.enable = false`. `op` is `r` for a snapshot row, `c` an
//!   insert, `u` an update (the row before and after in one event), `d` a delete; an
//!   update that changes the key is a `d` then a `c`, as Debezium emits it.
//! - **column types** as Debezium's connectors name them with their default settings
//!   (`decimal.handling.mode = precise`, `time.precision.mode = adaptive` on PostgreSQL and
//!   `adaptive_time_microseconds` on MySQL): see [`DbzType`].
//!
//! Where the JSON differs from Debezium's, and why, is listed on the two connectors' pages.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use ferry_api::value::{array_value_to_json, format_timestamp, RowStyle};
use ferry_api::{ChangeBatch, RowKind};
use serde_json::{json, Map, Value};

/// The Debezium version SeaTunnel's CDC connectors embed, written as `source.version`.
pub const DEBEZIUM_VERSION: &str = "1.9.8.Final";

/// SeaTunnel's name for the one table such a source produces.
pub const TABLE_NAME: &str = "default.default";

/// The schema of the rows: `topic`, `key`, `value`, all text (SeaTunnel's
/// `DEBEZIUM_DATA_ROW_TYPE`).
pub fn row_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("topic", DataType::Utf8, true),
        Field::new("key", DataType::Utf8, true),
        Field::new("value", DataType::Utf8, true),
    ]))
}

/// Which Debezium connector's conventions the events follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connector {
    /// `io.debezium.connector.postgresql`.
    Postgres,
    /// `io.debezium.connector.mysql`.
    MySql,
}

impl Connector {
    /// SeaTunnel's fixed `database.server.name`, the topics' prefix.
    pub fn default_server_name(self) -> &'static str {
        match self {
            Connector::Postgres => "postgres_cdc_source",
            Connector::MySql => "mysql_binlog_source",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Connector::Postgres => "postgresql",
            Connector::MySql => "mysql",
        }
    }
}

/// The `debezium { … }` settings that shape the JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeOptions {
    /// `database.server.name`: the topics' prefix and `source.name`.
    pub server_name: String,
    /// `key.converter.schemas.enable` (default true): keys are `{schema, payload}`.
    pub key_schema: bool,
    /// `value.converter.schemas.enable` (default true): values are `{schema, payload}`.
    pub value_schema: bool,
    /// `decimal.handling.mode`: how decimal columns are written.
    pub decimals: DecimalMode,
    /// `time.precision.mode`: how dates, times and timestamps are written.
    pub times: TimeMode,
}

/// Debezium's `time.precision.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeMode {
    /// `adaptive` (PostgreSQL's default): each column's own precision picks milliseconds
    /// (`io.debezium.time.Time`, `io.debezium.time.Timestamp`) up to 3 fractional digits
    /// and microseconds (`MicroTime`, `MicroTimestamp`) past them.
    Adaptive,
    /// `adaptive_time_microseconds` (MySQL's default): as `adaptive`, but times of day
    /// always in microseconds (`io.debezium.time.MicroTime`).
    AdaptiveTimeMicroseconds,
    /// `connect`: Kafka Connect's own logical types (`org.apache.kafka.connect.data.Date`,
    /// `Time`, `Timestamp`), in days and milliseconds: finer digits are cut off.
    Connect,
}

/// Debezium's `decimal.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecimalMode {
    /// `precise` (the default): `org.apache.kafka.connect.data.Decimal`, a JSON number with
    /// the column's scale under SeaTunnel's `decimal.format = NUMERIC`.
    Precise,
    /// `double`: a `double`.
    Double,
    /// `string`: the plain text of the number.
    String,
}

/// The value of `key` (`database.server.name`) in a job's `debezium` block, whether the
/// job file quotes the dotted key (`"database.server.name" = …`) or HOCON nested it
/// (`database.server.name = …` is `database { server { name = … } }`); SeaTunnel reads
/// both forms alike.
pub fn debezium_property<'a>(block: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if let Some(v) = block.get(key) {
        return Some(v);
    }
    let mut at = 0;
    while let Some(dot) = key[at..].find('.') {
        let (head, rest) = (&key[..at + dot], &key[at + dot + 1..]);
        if let Some(Value::Object(inner)) = block.get(head) {
            if let Some(v) = debezium_property(inner, rest) {
                return Some(v);
            }
        }
        at += dot + 1;
    }
    None
}

/// The keys of a job's `debezium` block as dotted names, nested blocks flattened
/// (`database { server { name } }` is `database.server.name`).
pub fn debezium_keys(block: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in block {
        match v {
            Value::Object(inner) if !inner.is_empty() => out.extend(
                debezium_keys(inner)
                    .into_iter()
                    .map(|sub| format!("{k}.{sub}")),
            ),
            _ => out.push(k.clone()),
        }
    }
    out
}

impl EnvelopeOptions {
    /// The settings for a CDC source's `format` option: `Some` for
    /// `COMPATIBLE_DEBEZIUM_JSON` (read from the job's `debezium` block), `None` for
    /// `DEFAULT`. `Err` names the option at fault (`format` or `debezium`) and says why.
    pub fn for_format(
        connector: Connector,
        format: &str,
        debezium: &Map<String, Value>,
    ) -> std::result::Result<Option<EnvelopeOptions>, (&'static str, String)> {
        if format.eq_ignore_ascii_case("compatible_debezium_json") {
            EnvelopeOptions::from_debezium(connector, debezium)
                .map(Some)
                .map_err(|e| ("debezium", e))
        } else if format.eq_ignore_ascii_case("default") {
            Ok(None)
        } else {
            Err((
                "format",
                format!("'{format}' is not one of DEFAULT, COMPATIBLE_DEBEZIUM_JSON"),
            ))
        }
    }

    /// Reads the settings from a job's `debezium` block (the other keys are left to the
    /// caller); `Err` names the key whose value is not a boolean.
    pub fn from_debezium(
        connector: Connector,
        debezium: &Map<String, Value>,
    ) -> std::result::Result<EnvelopeOptions, String> {
        let flag = |key: &str| -> std::result::Result<bool, String> {
            match debezium_property(debezium, key) {
                None | Some(Value::Null) => Ok(true),
                Some(Value::Bool(b)) => Ok(*b),
                Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(true),
                Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(false),
                Some(other) => Err(format!("{key} = {other} is not true or false")),
            }
        };
        let server_name = match debezium_property(debezium, "database.server.name") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            None | Some(Value::Null) => connector.default_server_name().to_string(),
            Some(other) => return Err(format!("database.server.name = {other} is not a name")),
        };
        let decimals = match debezium_property(debezium, "decimal.handling.mode") {
            None | Some(Value::Null) => DecimalMode::Precise,
            Some(Value::String(m)) if m.eq_ignore_ascii_case("precise") => DecimalMode::Precise,
            Some(Value::String(m)) if m.eq_ignore_ascii_case("double") => DecimalMode::Double,
            Some(Value::String(m)) if m.eq_ignore_ascii_case("string") => DecimalMode::String,
            Some(other) => {
                return Err(format!(
                    "decimal.handling.mode = {other} is not one of precise, double, string"
                ))
            }
        };
        let times = match debezium_property(debezium, "time.precision.mode") {
            None | Some(Value::Null) => match connector {
                Connector::Postgres => TimeMode::Adaptive,
                Connector::MySql => TimeMode::AdaptiveTimeMicroseconds,
            },
            Some(Value::String(m)) if m.eq_ignore_ascii_case("adaptive") => TimeMode::Adaptive,
            Some(Value::String(m)) if m.eq_ignore_ascii_case("adaptive_time_microseconds") => {
                TimeMode::AdaptiveTimeMicroseconds
            }
            Some(Value::String(m)) if m.eq_ignore_ascii_case("connect") => TimeMode::Connect,
            Some(other) => {
                return Err(format!(
                    "time.precision.mode = {other} is not one of adaptive, adaptive_time_microseconds, connect"
                ))
            }
        };
        Ok(EnvelopeOptions {
            server_name,
            key_schema: flag("key.converter.schemas.enable")?,
            value_schema: flag("value.converter.schemas.enable")?,
            decimals,
            times,
        })
    }

    /// The keys of the `debezium` block that [`from_debezium`](Self::from_debezium) reads.
    pub const KEYS: &'static [&'static str] = &[
        "database.server.name",
        "key.converter.schemas.enable",
        "value.converter.schemas.enable",
        "decimal.handling.mode",
        "time.precision.mode",
    ];
}

/// A column's Kafka Connect type as Debezium names it, with its logical name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbzType {
    /// `boolean`.
    Boolean,
    /// `int16` (also MySQL `TINYINT`, `TINYINT(1)` included: Debezium has no int8 column).
    Int16,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `float` (32 bits).
    Float,
    /// `double`.
    Double,
    /// `string`, with an optional logical name (`io.debezium.data.Json`,
    /// `io.debezium.data.Uuid`, `io.debezium.data.Enum` with its `allowed` values).
    String(Option<(&'static str, Option<String>)>),
    /// `bytes`, base64 in JSON.
    Bytes,
    /// `int32` `io.debezium.time.Date`: days since 1970-01-01.
    Date,
    /// `int64` `io.debezium.time.MicroTime`: microseconds of the day.
    MicroTime,
    /// `int32` `io.debezium.time.Time`: milliseconds of the day (`adaptive`, up to 3
    /// fractional digits).
    MilliTime,
    /// `int32` `org.apache.kafka.connect.data.Date`: days since 1970-01-01 (`connect`).
    ConnectDate,
    /// `int32` `org.apache.kafka.connect.data.Time`: milliseconds of the day (`connect`).
    ConnectTime,
    /// `int64` `org.apache.kafka.connect.data.Timestamp`: milliseconds since the epoch, no
    /// zone (`connect`).
    ConnectTimestamp,
    /// `int64` `io.debezium.time.Timestamp`: milliseconds since the epoch (no zone).
    TimestampMillis,
    /// `int64` `io.debezium.time.MicroTimestamp`: microseconds since the epoch (no zone).
    MicroTimestamp,
    /// `string` `io.debezium.time.ZonedTimestamp`: ISO-8601 in UTC (`…Z`).
    ZonedTimestamp,
    /// `int32` `io.debezium.time.Year`.
    Year,
    /// `bytes` `org.apache.kafka.connect.data.Decimal`, written as a JSON number
    /// (`decimal.format = NUMERIC`).
    Decimal {
        /// Digits.
        precision: u8,
        /// Digits after the point.
        scale: i8,
    },
    /// `struct` `io.debezium.data.VariableScaleDecimal` `{scale, value}`: PostgreSQL
    /// `numeric` without a declared precision.
    VariableScaleDecimal,
    /// `array` of items.
    Array(Box<DbzType>),
}

/// `n` of a type's `(n)` or `(n, m)`, if any.
fn type_arg(source_type: &str) -> Option<u32> {
    let open = source_type.find('(')?;
    let rest = &source_type[open + 1..];
    let end = rest.find([',', ')'])?;
    rest[..end].trim().parse().ok()
}

/// The values listed in a MySQL `enum('a','b')` / `set(…)` type, joined by commas.
fn allowed_values(source_type: &str) -> Option<String> {
    let open = source_type.find('(')?;
    let close = source_type.rfind(')')?;
    let inner = source_type.get(open + 1..close)?;
    let values: Vec<String> = inner
        .split(',')
        .map(|v| v.trim().trim_matches('\'').replace("''", "'"))
        .collect();
    Some(values.join(","))
}

impl DbzType {
    /// The type under `time.precision.mode = mode` of a column the database names
    /// `source_type` (whose fractional digits `adaptive` looks at).
    fn with_times(self, connector: Connector, mode: TimeMode, source_type: &str) -> DbzType {
        match (self, mode) {
            (DbzType::Date, TimeMode::Connect) => DbzType::ConnectDate,
            (DbzType::MicroTime, TimeMode::Connect) => DbzType::ConnectTime,
            (DbzType::TimestampMillis | DbzType::MicroTimestamp, TimeMode::Connect) => {
                DbzType::ConnectTimestamp
            }
            (DbzType::MicroTime, TimeMode::Adaptive) => {
                // A time's fractional digits when the type names none: PostgreSQL's 6,
                // MySQL's 0.
                let default = match connector {
                    Connector::Postgres => 6,
                    Connector::MySql => 0,
                };
                if type_arg(&source_type.to_ascii_lowercase()).unwrap_or(default) <= 3 {
                    DbzType::MilliTime
                } else {
                    DbzType::MicroTime
                }
            }
            (DbzType::Array(item), _) => {
                let item_st = source_type.strip_prefix('_').unwrap_or("");
                DbzType::Array(Box::new(item.with_times(connector, mode, item_st)))
            }
            (t, _) => t,
        }
    }

    /// The type under `decimal.handling.mode = mode`: decimals as doubles or text.
    fn with_decimals(self, mode: DecimalMode) -> DbzType {
        match (self, mode) {
            (DbzType::Decimal { .. } | DbzType::VariableScaleDecimal, DecimalMode::Double) => {
                DbzType::Double
            }
            (DbzType::Decimal { .. } | DbzType::VariableScaleDecimal, DecimalMode::String) => {
                DbzType::String(None)
            }
            (DbzType::Array(item), _) => DbzType::Array(Box::new(item.with_decimals(mode))),
            (t, _) => t,
        }
    }

    /// The Debezium type of a column of Arrow type `dt`, which the database names
    /// `source_type` (`timestamptz`, `datetime(3)`, `tinyint(1)`, `enum('a','b')`, …; empty
    /// when unknown), as `connector` writes it.
    pub fn of(connector: Connector, dt: &DataType, source_type: &str) -> DbzType {
        let st = source_type.trim().to_ascii_lowercase();
        let base = st.split(['(', ' ']).next().unwrap_or("");
        match (connector, base) {
            (Connector::Postgres, "json" | "jsonb") | (Connector::MySql, "json") => {
                return DbzType::String(Some(("io.debezium.data.Json", None)))
            }
            (Connector::Postgres, "uuid") => {
                return DbzType::String(Some(("io.debezium.data.Uuid", None)))
            }
            (Connector::Postgres, "timestamptz") | (Connector::MySql, "timestamp") => {
                return DbzType::ZonedTimestamp
            }
            (Connector::Postgres, "numeric") if !st.contains('(') => {
                return DbzType::VariableScaleDecimal
            }
            (Connector::MySql, "tinyint") => return DbzType::Int16,
            (Connector::MySql, "year") => return DbzType::Year,
            (Connector::MySql, "enum") => {
                return DbzType::String(Some(("io.debezium.data.Enum", allowed_values(&st))))
            }
            (Connector::MySql, "set") => {
                return DbzType::String(Some(("io.debezium.data.EnumSet", allowed_values(&st))))
            }
            (Connector::MySql, "datetime") => {
                // adaptive_time_microseconds: up to millisecond precision in milliseconds.
                return if type_arg(&st).unwrap_or(0) <= 3 {
                    DbzType::TimestampMillis
                } else {
                    DbzType::MicroTimestamp
                };
            }
            (Connector::Postgres, "timestamp") => {
                return if type_arg(&st).unwrap_or(6) <= 3 {
                    DbzType::TimestampMillis
                } else {
                    DbzType::MicroTimestamp
                };
            }
            _ => {}
        }
        match dt {
            DataType::Boolean => DbzType::Boolean,
            DataType::Int8 | DataType::Int16 | DataType::UInt8 => DbzType::Int16,
            DataType::Int32 | DataType::UInt16 => DbzType::Int32,
            DataType::Int64 | DataType::UInt32 => DbzType::Int64,
            DataType::UInt64 => DbzType::Decimal {
                precision: 20,
                scale: 0,
            },
            DataType::Float16 | DataType::Float32 => DbzType::Float,
            DataType::Float64 => DbzType::Double,
            DataType::Binary | DataType::LargeBinary | DataType::FixedSizeBinary(_) => {
                DbzType::Bytes
            }
            DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => DbzType::Decimal {
                precision: *p,
                scale: *s,
            },
            DataType::Date32 | DataType::Date64 => DbzType::Date,
            DataType::Time32(_) | DataType::Time64(_) => DbzType::MicroTime,
            DataType::Timestamp(_, Some(_)) => DbzType::ZonedTimestamp,
            DataType::Timestamp(_, None) => DbzType::MicroTimestamp,
            DataType::List(item) | DataType::LargeList(item) => {
                let item_st = st.strip_prefix('_').unwrap_or("");
                DbzType::Array(Box::new(DbzType::of(connector, item.data_type(), item_st)))
            }
            _ => DbzType::String(None),
        }
    }

    /// The Connect schema of the type as `JsonConverter` writes it (`type`, then `items`
    /// or `fields`, `optional`, `name`, `version`, `parameters`), with `field` last when
    /// it is a struct's field.
    fn schema(&self, optional: bool, field: Option<&str>) -> Value {
        let mut m = Map::new();
        let (ty, name, params): (&str, Option<&str>, Option<Value>) = match self {
            DbzType::Boolean => ("boolean", None, None),
            DbzType::Int16 => ("int16", None, None),
            DbzType::Int32 => ("int32", None, None),
            DbzType::Int64 => ("int64", None, None),
            DbzType::Float => ("float", None, None),
            DbzType::Double => ("double", None, None),
            DbzType::String(None) => ("string", None, None),
            DbzType::String(Some((n, allowed))) => (
                "string",
                Some(*n),
                allowed.as_ref().map(|a| json!({ "allowed": a })),
            ),
            DbzType::Bytes => ("bytes", None, None),
            DbzType::Date => ("int32", Some("io.debezium.time.Date"), None),
            DbzType::MicroTime => ("int64", Some("io.debezium.time.MicroTime"), None),
            DbzType::MilliTime => ("int32", Some("io.debezium.time.Time"), None),
            DbzType::ConnectDate => ("int32", Some("org.apache.kafka.connect.data.Date"), None),
            DbzType::ConnectTime => ("int32", Some("org.apache.kafka.connect.data.Time"), None),
            DbzType::ConnectTimestamp => (
                "int64",
                Some("org.apache.kafka.connect.data.Timestamp"),
                None,
            ),
            DbzType::TimestampMillis => ("int64", Some("io.debezium.time.Timestamp"), None),
            DbzType::MicroTimestamp => ("int64", Some("io.debezium.time.MicroTimestamp"), None),
            DbzType::ZonedTimestamp => ("string", Some("io.debezium.time.ZonedTimestamp"), None),
            DbzType::Year => ("int32", Some("io.debezium.time.Year"), None),
            DbzType::Decimal { precision, scale } => (
                "bytes",
                Some("org.apache.kafka.connect.data.Decimal"),
                Some(json!({
                    "scale": scale.to_string(),
                    "connect.decimal.precision": precision.to_string(),
                })),
            ),
            DbzType::VariableScaleDecimal => ("struct", None, None),
            DbzType::Array(_) => ("array", None, None),
        };
        m.insert("type".into(), Value::from(ty));
        match self {
            DbzType::VariableScaleDecimal => {
                m.insert(
                    "fields".into(),
                    json!([
                        {"type": "int32", "optional": false, "field": "scale"},
                        {"type": "bytes", "optional": false, "field": "value"},
                    ]),
                );
            }
            DbzType::Array(item) => {
                m.insert("items".into(), item.schema(true, None));
            }
            _ => {}
        }
        m.insert("optional".into(), Value::Bool(optional));
        let name = match self {
            DbzType::VariableScaleDecimal => Some("io.debezium.data.VariableScaleDecimal"),
            _ => name,
        };
        if let Some(n) = name {
            m.insert("name".into(), Value::from(n));
            m.insert("version".into(), Value::from(1));
        }
        if let Some(p) = params {
            m.insert("parameters".into(), p);
        }
        if let Some(f) = field {
            m.insert("field".into(), Value::from(f));
        }
        Value::Object(m)
    }

    /// Row `i` of `a` (not null) as `JsonConverter` writes a value of this type.
    fn value(&self, a: &dyn Array, i: usize) -> Value {
        match (self, a.data_type()) {
            (DbzType::Boolean, _) => array_value_to_json(a, i, RowStyle::Named),
            // MySQL TINYINT(1), which Ferry reads as a boolean.
            (DbzType::Int16, DataType::Boolean) => Value::from(u8::from(a.as_boolean().value(i))),
            (DbzType::Date | DbzType::ConnectDate, DataType::Date32) => {
                Value::from(a.as_primitive::<arrow::datatypes::Date32Type>().value(i))
            }
            (DbzType::Date | DbzType::ConnectDate, DataType::Date64) => Value::from(
                a.as_primitive::<arrow::datatypes::Date64Type>()
                    .value(i)
                    .div_euclid(86_400_000),
            ),
            (
                DbzType::MicroTime | DbzType::MilliTime | DbzType::ConnectTime,
                DataType::Time32(_) | DataType::Time64(_),
            ) => {
                let micros = time_micros(a, i);
                Value::from(match self {
                    DbzType::MicroTime => micros,
                    _ => micros.div_euclid(1000),
                })
            }
            (
                DbzType::TimestampMillis
                | DbzType::MicroTimestamp
                | DbzType::ZonedTimestamp
                | DbzType::ConnectTimestamp,
                DataType::Timestamp(unit, _),
            ) => {
                let micros = timestamp_micros(a, *unit, i);
                match self {
                    DbzType::TimestampMillis | DbzType::ConnectTimestamp => {
                        Value::from(micros.div_euclid(1000))
                    }
                    DbzType::MicroTimestamp => Value::from(micros),
                    _ => Value::String(zoned_timestamp(micros)),
                }
            }
            (DbzType::VariableScaleDecimal, DataType::Decimal128(_, scale)) => {
                let v = a
                    .as_primitive::<arrow::datatypes::Decimal128Type>()
                    .value(i);
                let (unscaled, scale) = trimmed(v, *scale);
                json!({"scale": scale, "value": base64_bytes(&twos_complement(unscaled))})
            }
            (DbzType::Array(item), DataType::List(_)) => {
                let l = a.as_list::<i32>();
                let child = l.value(i);
                Value::Array(
                    (0..child.len())
                        .map(|j| {
                            if child.is_null(j) {
                                Value::Null
                            } else {
                                item.value(child.as_ref(), j)
                            }
                        })
                        .collect(),
                )
            }
            (DbzType::Double, DataType::Decimal128(_, _) | DataType::UInt64) => {
                match array_value_to_json(a, i, RowStyle::Named) {
                    Value::Number(n) => n
                        .to_string()
                        .parse::<f64>()
                        .ok()
                        .and_then(serde_json::Number::from_f64)
                        .map_or(Value::Null, Value::Number),
                    other => other,
                }
            }
            (DbzType::Decimal { .. }, DataType::UInt64) => Value::Number(
                a.as_primitive::<arrow::datatypes::UInt64Type>()
                    .value(i)
                    .into(),
            ),
            (DbzType::String(_), _) => match array_value_to_json(a, i, RowStyle::Named) {
                s @ Value::String(_) => s,
                other => Value::String(other.to_string()),
            },
            // Numbers, bytes (base64) and decimals (`NUMERIC`) are what Ferry's JSON
            // writes for them.
            _ => array_value_to_json(a, i, RowStyle::Named),
        }
    }
}

/// Row `i` of a time-of-day array (`Time32` or `Time64`, any unit) in microseconds.
fn time_micros(a: &dyn Array, i: usize) -> i64 {
    use arrow::datatypes::*;
    match a.data_type() {
        DataType::Time32(TimeUnit::Second) => {
            i64::from(a.as_primitive::<Time32SecondType>().value(i)) * 1_000_000
        }
        DataType::Time32(_) => i64::from(a.as_primitive::<Time32MillisecondType>().value(i)) * 1000,
        DataType::Time64(TimeUnit::Nanosecond) => a
            .as_primitive::<Time64NanosecondType>()
            .value(i)
            .div_euclid(1000),
        _ => a.as_primitive::<Time64MicrosecondType>().value(i),
    }
}

fn timestamp_micros(a: &dyn Array, unit: TimeUnit, i: usize) -> i64 {
    use arrow::datatypes::*;
    match unit {
        TimeUnit::Second => a.as_primitive::<TimestampSecondType>().value(i) * 1_000_000,
        TimeUnit::Millisecond => a.as_primitive::<TimestampMillisecondType>().value(i) * 1000,
        TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().value(i),
        TimeUnit::Nanosecond => a
            .as_primitive::<TimestampNanosecondType>()
            .value(i)
            .div_euclid(1000),
    }
}

/// An instant as Debezium 1.9's `ZonedTimestamp` writes it (`ISO_OFFSET_DATE_TIME` in
/// UTC): `2022-04-27T14:30:00Z`, a fraction only when there is one, without its trailing
/// zeros.
fn zoned_timestamp(micros: i64) -> String {
    let mut s = format_timestamp(micros);
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    s.push('Z');
    s
}

/// A decimal with the zeros after its point dropped: `(unscaled, scale)`.
fn trimmed(mut v: i128, mut scale: i8) -> (i128, i8) {
    while scale > 0 && v % 10 == 0 {
        v /= 10;
        scale -= 1;
    }
    (v, scale)
}

/// The shortest big-endian two's complement bytes of `v` (Java's `BigInteger.toByteArray`).
fn twos_complement(v: i128) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        let redundant = (b == 0 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    bytes[start..].to_vec()
}

fn base64_bytes(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// One captured table, described once: its topic, and the key and value schemas.
#[derive(Debug, Clone)]
pub struct TableEnvelope {
    connector: Connector,
    options: EnvelopeOptions,
    topic: String,
    /// `source.db`: the database.
    db: String,
    /// `source.schema` (PostgreSQL) — MySQL has none.
    schema: Option<String>,
    /// `source.table`.
    table: String,
    /// Per column: name, type, optional.
    columns: Vec<(String, DbzType, bool)>,
    /// Indexes of the key columns.
    key: Vec<usize>,
    /// The row before an update is the whole row (MySQL with a full row image,
    /// PostgreSQL with `REPLICA IDENTITY FULL`); otherwise an update whose key did not
    /// change has `before: null`, as Debezium writes it.
    full_before: bool,
    /// The key's schema as JSON text (written once, not per event); `None`: no key.
    key_schema: Option<String>,
    /// The value's schema as JSON text.
    value_schema: String,
}

/// A column of a captured table, as [`TableEnvelope::new`] takes it.
#[derive(Debug, Clone)]
pub struct EnvelopeColumn<'a> {
    /// The column's Arrow field (its type and nullability; the rows' field).
    pub field: &'a Field,
    /// The type as the database names it (`timestamptz`, `datetime(3)`; may be empty).
    pub source_type: &'a str,
}

/// Where a change was read, for the event's `source` block and `ts_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    /// A snapshot row (`op = r`, `source.snapshot = "true"`).
    pub snapshot: bool,
    /// `source.ts_ms`: when the change was committed (a snapshot row: when it was read),
    /// milliseconds since the epoch.
    pub ts_ms: i64,
    /// The connector's own fields of the block.
    pub position: LogPosition,
}

/// The connector's fields of an event's `source` block.
#[derive(Debug, Clone, PartialEq)]
pub enum LogPosition {
    /// Debezium's PostgreSQL `source`.
    Postgres {
        /// `txId`: the transaction id (none for snapshot rows).
        tx_id: Option<i64>,
        /// `lsn`: where the change is in the WAL (a snapshot row: where the stream was).
        lsn: Option<i64>,
    },
    /// Debezium's MySQL `source`.
    MySql {
        /// `server_id` of the event (0 for snapshot rows).
        server_id: i64,
        /// `gtid` of the transaction, if the server has GTIDs.
        gtid: Option<String>,
        /// `file`: the binlog file.
        file: String,
        /// `pos`: where the rows event starts in it (a snapshot row: the position read).
        pos: i64,
        /// `row`: the row's index in its rows event.
        row: i32,
        /// `thread`: the session that made the change, when known.
        thread: Option<i64>,
    },
}

/// A captured table's name, as the events' `source` block and topic give it.
#[derive(Debug, Clone, Copy)]
pub struct TableName<'a> {
    /// The database.
    pub db: &'a str,
    /// The schema (PostgreSQL); MySQL has none.
    pub schema: Option<&'a str>,
    /// The table.
    pub table: &'a str,
}

impl TableEnvelope {
    /// Describes table `name` with `columns` in table order and key columns `key`
    /// (indexes into `columns`; empty for a table without a key). `full_before`: the row
    /// before an update is the whole row.
    pub fn new(
        connector: Connector,
        options: &EnvelopeOptions,
        name: TableName<'_>,
        columns: &[EnvelopeColumn<'_>],
        key: &[usize],
        full_before: bool,
    ) -> TableEnvelope {
        let TableName { db, schema, table } = name;
        let topic = match schema {
            Some(s) => format!("{}.{s}.{table}", options.server_name),
            None => format!("{}.{db}.{table}", options.server_name),
        };
        let cols: Vec<(String, DbzType, bool)> = columns
            .iter()
            .map(|c| {
                let ty = DbzType::of(connector, c.field.data_type(), c.source_type);
                // MySQL's BIGINT UNSIGNED follows bigint.unsigned.handling.mode (SeaTunnel
                // sets precise), not decimal.handling.mode.
                let st = c.source_type.to_ascii_lowercase();
                let unsigned_bigint = st.starts_with("bigint") && st.contains("unsigned");
                let ty = if unsigned_bigint {
                    ty
                } else {
                    ty.with_decimals(options.decimals)
                };
                let ty = ty.with_times(connector, options.times, c.source_type);
                (c.field.name().clone(), ty, c.field.is_nullable())
            })
            .collect();
        let row_fields = |idx: &mut dyn Iterator<Item = usize>| -> Value {
            Value::Array(
                idx.map(|i| {
                    let (n, t, opt) = &cols[i];
                    t.schema(*opt, Some(n))
                })
                .collect(),
            )
        };
        let key_schema = (!key.is_empty()).then(|| {
            json!({
                "type": "struct",
                "fields": row_fields(&mut key.iter().copied()),
                "optional": false,
                "name": format!("{topic}.Key"),
            })
        });
        // Key fields are required even where the Arrow field allows nulls.
        let key_schema = key_schema.map(|mut k| {
            if let Some(Value::Array(fields)) = k.get_mut("fields") {
                for f in fields {
                    if let Some(o) = f.get_mut("optional") {
                        *o = Value::Bool(false);
                    }
                }
            }
            k
        });
        let row = json!({
            "type": "struct",
            "fields": row_fields(&mut (0..cols.len())),
            "optional": true,
            "name": format!("{topic}.Value"),
        });
        let field = |mut v: Value, name: &str| {
            if let Value::Object(m) = &mut v {
                m.insert("field".into(), Value::from(name));
            }
            v
        };
        let value_schema = json!({
            "type": "struct",
            "fields": [
                field(row.clone(), "before"),
                field(row, "after"),
                source_schema(connector),
                {"type": "string", "optional": false, "field": "op"},
                {"type": "int64", "optional": true, "field": "ts_ms"},
                {
                    "type": "struct",
                    "fields": [
                        {"type": "string", "optional": false, "field": "id"},
                        {"type": "int64", "optional": false, "field": "total_order"},
                        {"type": "int64", "optional": false, "field": "data_collection_order"},
                    ],
                    "optional": true,
                    "field": "transaction",
                },
            ],
            "optional": false,
            "name": format!("{topic}.Envelope"),
        });
        TableEnvelope {
            connector,
            options: options.clone(),
            topic,
            db: db.to_string(),
            schema: schema.map(str::to_string),
            table: table.to_string(),
            columns: cols,
            key: key.to_vec(),
            full_before,
            key_schema: key_schema.map(|k| k.to_string()),
            value_schema: value_schema.to_string(),
        }
    }

    /// [`TableEnvelope::new`] for a table whose rows have `fields`, described by the
    /// database as `described` (each column's name and type name, in table order), keyed by
    /// the columns named in `key` (a name not among them is left out).
    pub fn of_table(
        connector: Connector,
        options: &EnvelopeOptions,
        name: TableName<'_>,
        fields: &arrow::datatypes::Fields,
        described: &[(&str, &str)],
        key: &[String],
        full_before: bool,
    ) -> TableEnvelope {
        let columns: Vec<EnvelopeColumn<'_>> = fields
            .iter()
            .zip(described)
            .map(|(f, (_, source_type))| EnvelopeColumn {
                field: f.as_ref(),
                source_type,
            })
            .collect();
        let key: Vec<usize> = key
            .iter()
            .filter_map(|k| described.iter().position(|(n, _)| n == k))
            .collect();
        TableEnvelope::new(connector, options, name, &columns, &key, full_before)
    }

    /// `batch` as Debezium events (rows of [`TABLE_NAME`]) when the table has an envelope
    /// (`format = COMPATIBLE_DEBEZIUM_JSON`), otherwise `batch` as it is; `origin(i)` says
    /// where row `i` was read. Errors name `component` and `table`.
    pub fn events_or_rows(
        envelope: Option<&TableEnvelope>,
        batch: ChangeBatch,
        origin: &dyn Fn(usize) -> Origin,
        component: &str,
        table: &dyn std::fmt::Display,
    ) -> ferry_api::Result<ChangeBatch> {
        let Some(env) = envelope else {
            return Ok(batch);
        };
        let data = env.encode(&batch, origin).map_err(|e| {
            ferry_api::FerryError::internal(format!(
                "{component}: writing the changes of {table} as Debezium JSON: {e}"
            ))
        })?;
        Ok(ChangeBatch::inserts(TABLE_NAME.into(), data))
    }

    /// The events' topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The rows (`topic`, `key`, `value`; all inserts) for the changes in `batch`, in
    /// order; `origin(i)` says where row `i` of `batch` was read. An update's row before
    /// and row after (`-U` then `+U`) become one event.
    pub fn encode(
        &self,
        batch: &ChangeBatch,
        origin: &dyn Fn(usize) -> Origin,
    ) -> std::result::Result<RecordBatch, String> {
        let data = &batch.data;
        if data.num_columns() != self.columns.len() {
            return Err(format!(
                "{} has {} columns, its rows {}",
                self.topic,
                self.columns.len(),
                data.num_columns()
            ));
        }
        let n = data.num_rows();
        let kind = |i: usize| -> RowKind {
            batch
                .kinds
                .as_ref()
                .and_then(|k| RowKind::from_code(k.value(i)))
                .unwrap_or(RowKind::Insert)
        };
        let now = now_ms();
        let mut topics = StringBuilder::with_capacity(n, n * self.topic.len());
        let mut keys = StringBuilder::with_capacity(n, n * 64);
        let mut values = StringBuilder::with_capacity(n, n * 512);
        let mut push = |op: &str, before: Option<usize>, after: Option<usize>, at: usize| {
            let key_row = match op {
                "d" => before,
                _ => after,
            };
            topics.append_value(&self.topic);
            match key_row.and_then(|r| self.key_json(data.columns(), r)) {
                Some(k) => keys.append_value(k),
                None => keys.append_null(),
            }
            let v = self.value_json(data.columns(), op, before, after, &origin(at), now);
            values.append_value(v);
        };
        let mut i = 0;
        while i < n {
            match kind(i) {
                RowKind::Insert => {
                    let op = if origin(i).snapshot { "r" } else { "c" };
                    push(op, None, Some(i), i);
                    i += 1;
                }
                RowKind::UpdateBefore if i + 1 < n && kind(i + 1) == RowKind::UpdateAfter => {
                    if self.same_key(data.columns(), i, i + 1) {
                        let before = self.full_before.then_some(i);
                        push("u", before, Some(i + 1), i + 1);
                    } else {
                        push("d", Some(i), None, i);
                        push("c", None, Some(i + 1), i + 1);
                    }
                    i += 2;
                }
                RowKind::UpdateAfter => {
                    push("u", None, Some(i), i);
                    i += 1;
                }
                RowKind::UpdateBefore | RowKind::Delete => {
                    push("d", Some(i), None, i);
                    i += 1;
                }
            }
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(topics.finish()),
            Arc::new(keys.finish()),
            Arc::new(values.finish()),
        ];
        RecordBatch::try_new(row_schema(), columns).map_err(|e| e.to_string())
    }

    fn same_key(&self, cols: &[ArrayRef], a: usize, b: usize) -> bool {
        self.key.iter().all(|k| {
            let c = cols[*k].as_ref();
            array_value_to_json(c, a, RowStyle::Named) == array_value_to_json(c, b, RowStyle::Named)
        })
    }

    fn row_json(
        &self,
        cols: &[ArrayRef],
        r: usize,
        which: &mut dyn Iterator<Item = usize>,
    ) -> Value {
        let mut m = Map::new();
        for i in which {
            let (name, ty, _) = &self.columns[i];
            let c = cols[i].as_ref();
            let v = if c.is_null(r) {
                Value::Null
            } else {
                ty.value(c, r)
            };
            m.insert(name.clone(), v);
        }
        Value::Object(m)
    }

    /// `{"schema": …, "payload": …}` as `JsonConverter` writes it, the schema's text
    /// written once per table; or the payload alone.
    fn envelope(schema: Option<&str>, payload: &Value) -> String {
        match schema {
            Some(schema) => format!(r#"{{"schema":{schema},"payload":{payload}}}"#),
            None => payload.to_string(),
        }
    }

    fn key_json(&self, cols: &[ArrayRef], r: usize) -> Option<String> {
        let schema = self.key_schema.as_deref()?;
        let payload = self.row_json(cols, r, &mut self.key.iter().copied());
        let schema = self.options.key_schema.then_some(schema);
        Some(Self::envelope(schema, &payload))
    }

    fn value_json(
        &self,
        cols: &[ArrayRef],
        op: &str,
        before: Option<usize>,
        after: Option<usize>,
        origin: &Origin,
        now: i64,
    ) -> String {
        let row = |r: Option<usize>| match r {
            Some(r) => self.row_json(cols, r, &mut (0..self.columns.len())),
            None => Value::Null,
        };
        let payload = json!({
            "before": row(before),
            "after": row(after),
            "source": self.source_json(origin),
            "op": op,
            "ts_ms": now,
            "transaction": null,
        });
        let schema = self
            .options
            .value_schema
            .then_some(self.value_schema.as_str());
        Self::envelope(schema, &payload)
    }

    fn source_json(&self, o: &Origin) -> Value {
        let mut m = Map::new();
        m.insert("version".into(), Value::from(DEBEZIUM_VERSION));
        m.insert("connector".into(), Value::from(self.connector.name()));
        m.insert(
            "name".into(),
            Value::from(self.options.server_name.as_str()),
        );
        m.insert("ts_ms".into(), Value::from(o.ts_ms));
        m.insert(
            "snapshot".into(),
            Value::from(if o.snapshot { "true" } else { "false" }),
        );
        m.insert("db".into(), Value::from(self.db.as_str()));
        m.insert("sequence".into(), Value::Null);
        match &o.position {
            LogPosition::Postgres { tx_id, lsn } => {
                m.insert(
                    "schema".into(),
                    Value::from(self.schema.clone().unwrap_or_default()),
                );
                m.insert("table".into(), Value::from(self.table.as_str()));
                m.insert("txId".into(), Value::from(*tx_id));
                m.insert("lsn".into(), Value::from(*lsn));
                m.insert("xmin".into(), Value::Null);
            }
            LogPosition::MySql {
                server_id,
                gtid,
                file,
                pos,
                row,
                thread,
            } => {
                m.insert("table".into(), Value::from(self.table.as_str()));
                m.insert("server_id".into(), Value::from(*server_id));
                m.insert("gtid".into(), Value::from(gtid.clone()));
                m.insert("file".into(), Value::from(file.as_str()));
                m.insert("pos".into(), Value::from(*pos));
                m.insert("row".into(), Value::from(*row));
                m.insert("thread".into(), Value::from(*thread));
                m.insert("query".into(), Value::Null);
            }
        }
        Value::Object(m)
    }
}

/// The `source` block's schema of Debezium 1.9's connector.
fn source_schema(connector: Connector) -> Value {
    let f = |ty: &str, optional: bool, name: &str| json!({"type": ty, "optional": optional, "field": name});
    let mut fields = vec![
        f("string", false, "version"),
        f("string", false, "connector"),
        f("string", false, "name"),
        f("int64", false, "ts_ms"),
        json!({
            "type": "string",
            "optional": true,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": "true,last,false,incremental"},
            "default": "false",
            "field": "snapshot",
        }),
        f("string", false, "db"),
        f("string", true, "sequence"),
    ];
    let name = match connector {
        Connector::Postgres => {
            fields.extend([
                f("string", false, "schema"),
                f("string", false, "table"),
                f("int64", true, "txId"),
                f("int64", true, "lsn"),
                f("int64", true, "xmin"),
            ]);
            "io.debezium.connector.postgresql.Source"
        }
        Connector::MySql => {
            fields.extend([
                f("string", true, "table"),
                f("int64", false, "server_id"),
                f("string", true, "gtid"),
                f("string", false, "file"),
                f("int64", false, "pos"),
                f("int32", false, "row"),
                f("int64", true, "thread"),
                f("string", true, "query"),
            ]);
            "io.debezium.connector.mysql.Source"
        }
    };
    json!({
        "type": "struct",
        "fields": fields,
        "optional": false,
        "name": name,
        "field": "source",
    })
}

/// Milliseconds since the epoch now: events' `ts_ms`, snapshot rows' `source.ts_ms`.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{ChangeFormat, Rows};
    use arrow::array::{
        BooleanArray, Date32Array, Decimal128Array, Int32Array, StringArray,
        Time64MicrosecondArray, TimestampMicrosecondArray, UInt8Array,
    };

    fn table(full_before: bool) -> (TableEnvelope, SchemaRef) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("price", DataType::Decimal128(10, 2), true),
            Field::new("d", DataType::Date32, true),
            Field::new("t", DataType::Time64(TimeUnit::Microsecond), true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            Field::new("tz", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            Field::new("flag", DataType::Boolean, true),
        ]));
        let types = [
            "int4",
            "varchar(20)",
            "numeric(10,2)",
            "date",
            "time",
            "timestamp",
            "timestamptz",
            "bool",
        ];
        let cols: Vec<EnvelopeColumn<'_>> = schema
            .fields()
            .iter()
            .zip(types)
            .map(|(f, t)| EnvelopeColumn {
                field: f.as_ref(),
                source_type: t,
            })
            .collect();
        let opts = EnvelopeOptions::from_debezium(Connector::Postgres, &Map::new()).unwrap();
        let t = TableEnvelope::new(
            Connector::Postgres,
            &opts,
            TableName {
                db: "shop",
                schema: Some("public"),
                table: "products",
            },
            &cols,
            &[0],
            full_before,
        );
        (t, schema)
    }

    fn batch(schema: &SchemaRef, ids: &[i32], names: &[&str], kinds: &[RowKind]) -> ChangeBatch {
        let n = ids.len();
        let data = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int32Array::from(ids.to_vec())),
                Arc::new(StringArray::from(names.to_vec())),
                Arc::new(
                    Decimal128Array::from(vec![Some(-128); n])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
                Arc::new(Date32Array::from(vec![Some(19109); n])),
                Arc::new(Time64MicrosecondArray::from(vec![Some(52_200_000_000); n])),
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(
                        1_651_069_800_000_001
                    );
                    n
                ])),
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(
                        1_651_069_800_500_000
                    );
                    n
                ])),
                Arc::new(BooleanArray::from(vec![None; n])),
            ],
        )
        .unwrap();
        let kinds = UInt8Array::from(kinds.iter().map(|k| *k as u8).collect::<Vec<_>>());
        ChangeBatch::with_kinds("shop.public.products".into(), data, kinds)
    }

    fn origin(snapshot: bool) -> impl Fn(usize) -> Origin {
        move |i| Origin {
            snapshot,
            ts_ms: 1000 + i as i64,
            position: LogPosition::Postgres {
                tx_id: (!snapshot).then_some(77),
                lsn: Some(500 + i as i64),
            },
        }
    }

    fn events(t: &TableEnvelope, b: &ChangeBatch, snapshot: bool) -> Vec<(String, Value, Value)> {
        let out = t.encode(b, &origin(snapshot)).unwrap();
        let s = |c: usize, i: usize| {
            let a = out.column(c).as_string::<i32>();
            (!a.is_null(i)).then(|| a.value(i).to_string())
        };
        (0..out.num_rows())
            .map(|i| {
                let parse = |v: Option<String>| {
                    v.map(|v| serde_json::from_str(&v).unwrap())
                        .unwrap_or(Value::Null)
                };
                (s(0, i).unwrap(), parse(s(1, i)), parse(s(2, i)))
            })
            .collect()
    }

    #[test]
    fn rows_become_debezium_events_with_their_schemas() {
        let (t, schema) = table(false);
        let b = batch(&schema, &[1], &["a"], &[RowKind::Insert]);
        let ev = events(&t, &b, true);
        assert_eq!(ev.len(), 1);
        let (topic, key, value) = &ev[0];
        assert_eq!(topic, "postgres_cdc_source.public.products");
        assert_eq!(
            key,
            &json!({"schema": {"type": "struct", "fields": [{"type": "int32", "optional": false, "field": "id"}],
                               "optional": false, "name": "postgres_cdc_source.public.products.Key"},
                    "payload": {"id": 1}})
        );
        let p = &value["payload"];
        assert_eq!(p["op"], "r");
        assert_eq!(p["before"], Value::Null);
        assert_eq!(
            p["after"],
            json!({"id": 1, "name": "a", "price": -1.28, "d": 19109, "t": 52_200_000_000i64,
                   "ts": 1_651_069_800_000_001i64, "tz": "2022-04-27T14:30:00.5Z", "flag": null})
        );
        // The decimal is a JSON number with its scale, as JsonConverter NUMERIC writes it.
        assert!(value.to_string().contains("\"price\":-1.28"), "{value}");
        assert_eq!(
            p["source"],
            json!({"version": DEBEZIUM_VERSION, "connector": "postgresql",
                   "name": "postgres_cdc_source", "ts_ms": 1000, "snapshot": "true", "db": "shop",
                   "sequence": null, "schema": "public", "table": "products", "txId": null,
                   "lsn": 500, "xmin": null})
        );
        assert!(p["ts_ms"].as_i64().unwrap() > 1_600_000_000_000);
        let s = &value["schema"];
        assert_eq!(s["name"], "postgres_cdc_source.public.products.Envelope");
        let after = &s["fields"][1];
        assert_eq!(after["field"], "after");
        assert_eq!(after["name"], "postgres_cdc_source.public.products.Value");
        let f = |name: &str| {
            after["fields"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["field"] == name)
                .cloned()
                .unwrap()
        };
        assert_eq!(
            f("price"),
            json!({"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
                   "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "10"},
                   "field": "price"})
        );
        assert_eq!(f("d")["name"], "io.debezium.time.Date");
        assert_eq!(f("t")["name"], "io.debezium.time.MicroTime");
        assert_eq!(f("ts")["name"], "io.debezium.time.MicroTimestamp");
        assert_eq!(f("tz")["name"], "io.debezium.time.ZonedTimestamp");
        assert_eq!(f("tz")["type"], "string");
        assert_eq!(
            f("id"),
            json!({"type": "int32", "optional": false, "field": "id"})
        );
        assert_eq!(
            s["fields"][2]["name"],
            "io.debezium.connector.postgresql.Source"
        );
    }

    #[test]
    fn updates_are_one_event_and_a_changed_key_is_a_delete_then_a_create() {
        let (t, schema) = table(false);
        let b = batch(
            &schema,
            &[1, 1, 2, 3, 4],
            &["a", "b", "c", "c", "d"],
            &[
                RowKind::UpdateBefore,
                RowKind::UpdateAfter,
                RowKind::UpdateBefore,
                RowKind::UpdateAfter,
                RowKind::Delete,
            ],
        );
        let ev = events(&t, &b, false);
        let ops: Vec<&str> = ev
            .iter()
            .map(|e| e.2["payload"]["op"].as_str().unwrap())
            .collect();
        assert_eq!(ops, vec!["u", "d", "c", "d"]);
        // Replica identity DEFAULT: an update whose key stayed has no row before.
        assert_eq!(ev[0].2["payload"]["before"], Value::Null);
        assert_eq!(ev[0].2["payload"]["after"]["name"], "b");
        assert_eq!(ev[0].2["payload"]["source"]["txId"], 77);
        assert_eq!(ev[0].2["payload"]["source"]["lsn"], 501);
        assert_eq!(ev[0].2["payload"]["source"]["snapshot"], "false");
        // The key change: the delete is keyed by the old key, the create by the new.
        assert_eq!(ev[1].1["payload"], json!({"id": 2}));
        assert_eq!(ev[1].2["payload"]["before"]["id"], 2);
        assert_eq!(ev[2].1["payload"], json!({"id": 3}));
        assert_eq!(ev[3].2["payload"]["before"]["name"], "d");
        assert_eq!(ev[3].2["payload"]["after"], Value::Null);
        let (full, _) = table(true);
        let ev = events(&full, &b, false);
        assert_eq!(ev[0].2["payload"]["before"]["name"], "a");
    }

    #[test]
    fn without_schemas_key_and_value_are_the_payloads() {
        let (_, schema) = table(false);
        let mut dbz = Map::new();
        dbz.insert("key.converter.schemas.enable".into(), json!("false"));
        dbz.insert("value.converter.schemas.enable".into(), json!(false));
        dbz.insert("database.server.name".into(), json!("shop_1"));
        let opts = EnvelopeOptions::from_debezium(Connector::Postgres, &dbz).unwrap();
        let cols: Vec<EnvelopeColumn<'_>> = schema
            .fields()
            .iter()
            .map(|f| EnvelopeColumn {
                field: f.as_ref(),
                source_type: "",
            })
            .collect();
        let t = TableEnvelope::new(
            Connector::Postgres,
            &opts,
            TableName {
                db: "shop",
                schema: Some("public"),
                table: "products",
            },
            &cols,
            &[],
            false,
        );
        let b = batch(&schema, &[1], &["a"], &[RowKind::Insert]);
        let ev = events(&t, &b, false);
        assert_eq!(ev[0].0, "shop_1.public.products");
        // No key columns: no key.
        assert_eq!(ev[0].1, Value::Null);
        assert_eq!(ev[0].2["op"], "c");
        assert_eq!(ev[0].2["after"]["id"], 1);
        // HOCON nests an unquoted dotted key; it reads the same.
        let nested = json!({"database": {"server": {"name": "shop_2"}},
                            "value": {"converter.schemas": {"enable": false}}});
        let opts = EnvelopeOptions::from_debezium(Connector::Postgres, nested.as_object().unwrap())
            .unwrap();
        assert_eq!(opts.server_name, "shop_2");
        assert_eq!(
            debezium_keys(nested.as_object().unwrap()),
            vec!["database.server.name", "value.converter.schemas.enable"]
        );
        assert!(!opts.value_schema && opts.key_schema);
        // decimal.handling.mode: doubles or text instead of Connect decimals.
        for (mode, ty, v) in [
            ("double", "double", json!(-1.28)),
            ("string", "string", json!("-1.28")),
        ] {
            let mut m = Map::new();
            m.insert("decimal.handling.mode".into(), json!(mode));
            let opts = EnvelopeOptions::from_debezium(Connector::Postgres, &m).unwrap();
            let t = TableEnvelope::new(
                Connector::Postgres,
                &opts,
                TableName {
                    db: "shop",
                    schema: Some("public"),
                    table: "products",
                },
                &cols,
                &[0],
                false,
            );
            let ev = events(&t, &b, false);
            assert_eq!(ev[0].2["payload"]["after"]["price"], v, "{mode}");
            let price = &ev[0].2["schema"]["fields"][1]["fields"][2];
            assert_eq!(price["type"], ty, "{mode}");
            assert!(price.get("name").is_none(), "{mode}: {price}");
        }
        let mut m = Map::new();
        m.insert("decimal.handling.mode".into(), json!("exact"));
        let err = EnvelopeOptions::from_debezium(Connector::Postgres, &m).unwrap_err();
        assert!(err.contains("decimal.handling.mode"), "{err}");
        dbz.insert("key.converter.schemas.enable".into(), json!(3));
        let err = EnvelopeOptions::from_debezium(Connector::Postgres, &dbz).unwrap_err();
        assert!(err.contains("key.converter.schemas.enable"), "{err}");
    }

    /// What the envelope writes, Ferry's `debezium_json` reader (SeaTunnel's
    /// `DebeziumJsonDeserializationSchema` semantics) reads back as the same rows.
    #[test]
    fn debezium_json_reads_the_events_back_as_the_rows() {
        let (t, schema) = table(true);
        let b = batch(
            &schema,
            &[5, 5, 5, 6],
            &["x", "y", "y", "z"],
            &[
                RowKind::UpdateBefore,
                RowKind::UpdateAfter,
                RowKind::Delete,
                RowKind::Insert,
            ],
        );
        let reader_schema = Schema::new(
            schema
                .fields()
                .iter()
                .filter(|f| f.name() != "tz")
                .map(|f| f.as_ref().clone())
                .collect::<Vec<_>>(),
        );
        let (mut rows, mut kinds) = (Vec::new(), Vec::new());
        for (_, _, value) in events(&t, &b, false) {
            ChangeFormat::Debezium {
                include_schema: true,
            }
            .read(
                value,
                &reader_schema,
                &mut Rows {
                    rows: &mut rows,
                    kinds: &mut kinds,
                },
            )
            .unwrap();
        }
        assert_eq!(kinds, vec![1, 2, 3, 0]);
        assert_eq!(rows[1]["name"], "y");
        assert_eq!(rows[1]["d"], "2022-04-27");
        assert_eq!(rows[1]["t"], "14:30:00");
        assert_eq!(rows[1]["price"], json!(-1.28));
        assert_eq!(rows[3]["id"], 6);
    }

    #[test]
    fn time_precision_mode_picks_debeziums_time_types_and_units() {
        use TimeMode::*;
        let of = |c: Connector, st: &str, dt: DataType, m: TimeMode| {
            DbzType::of(c, &dt, st).with_times(c, m, st)
        };
        let micros = DataType::Time64(TimeUnit::Microsecond);
        let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
        // adaptive: milliseconds up to 3 fractional digits (PostgreSQL's time has 6,
        // MySQL's 0); adaptive_time_microseconds: times always in microseconds.
        let pg = Connector::Postgres;
        let my = Connector::MySql;
        assert_eq!(
            of(pg, "time(3)", micros.clone(), Adaptive),
            DbzType::MilliTime
        );
        assert_eq!(of(pg, "time", micros.clone(), Adaptive), DbzType::MicroTime);
        assert_eq!(of(my, "time", micros.clone(), Adaptive), DbzType::MilliTime);
        assert_eq!(
            of(my, "time(6)", micros.clone(), Adaptive),
            DbzType::MicroTime
        );
        assert_eq!(
            of(my, "time", micros.clone(), AdaptiveTimeMicroseconds),
            DbzType::MicroTime
        );
        // connect: Kafka Connect's types; zoned timestamps stay strings.
        assert_eq!(
            of(my, "date", DataType::Date32, Connect),
            DbzType::ConnectDate
        );
        assert_eq!(of(my, "time(6)", micros, Connect), DbzType::ConnectTime);
        assert_eq!(
            of(my, "datetime(6)", ts.clone(), Connect),
            DbzType::ConnectTimestamp
        );
        assert_eq!(
            of(pg, "timestamp(3)", ts, Connect),
            DbzType::ConnectTimestamp
        );
        assert_eq!(
            of(
                pg,
                "timestamptz",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                Connect
            ),
            DbzType::ZonedTimestamp
        );
        assert_eq!(
            of(
                pg,
                "_date",
                DataType::List(Arc::new(Field::new("item", DataType::Date32, true))),
                Connect
            ),
            DbzType::Array(Box::new(DbzType::ConnectDate))
        );
        // Values: 01:02:03.456789 and an instant with microseconds, cut to milliseconds
        // where the type holds them.
        let t = arrow::array::Time64MicrosecondArray::from(vec![3_723_456_789]);
        assert_eq!(DbzType::MicroTime.value(&t, 0), json!(3_723_456_789i64));
        assert_eq!(DbzType::MilliTime.value(&t, 0), json!(3_723_456));
        assert_eq!(DbzType::ConnectTime.value(&t, 0), json!(3_723_456));
        let t = arrow::array::Time32SecondArray::from(vec![61]);
        assert_eq!(DbzType::ConnectTime.value(&t, 0), json!(61_000));
        let at = arrow::array::TimestampMicrosecondArray::from(vec![1_500_000_123_456]);
        assert_eq!(
            DbzType::ConnectTimestamp.value(&at, 0),
            json!(1_500_000_123)
        );
        let d = arrow::array::Date32Array::from(vec![19_000]);
        assert_eq!(DbzType::ConnectDate.value(&d, 0), json!(19_000));
        let field = DbzType::ConnectTimestamp.schema(true, Some("ts"));
        assert_eq!(
            (&field["type"], &field["name"], &field["version"]),
            (
                &json!("int64"),
                &json!("org.apache.kafka.connect.data.Timestamp"),
                &json!(1)
            )
        );
        assert_eq!(
            DbzType::MilliTime.schema(false, None)["name"],
            "io.debezium.time.Time"
        );
        // The option: each connector's default, the three values, and an error naming it.
        let opts = |c: Connector, v: Option<&str>| {
            let mut m = Map::new();
            if let Some(v) = v {
                m.insert("time.precision.mode".into(), json!(v));
            }
            EnvelopeOptions::from_debezium(c, &m).map(|o| o.times)
        };
        assert_eq!(opts(pg, None), Ok(Adaptive));
        assert_eq!(opts(my, None), Ok(AdaptiveTimeMicroseconds));
        assert_eq!(opts(pg, Some("CONNECT")), Ok(Connect));
        let err = opts(my, Some("nanos")).unwrap_err();
        assert!(err.contains("time.precision.mode"), "{err}");
    }

    #[test]
    fn mysql_types_follow_debeziums_mysql_connector() {
        let b = |s: &str, dt: DataType| DbzType::of(Connector::MySql, &dt, s);
        assert_eq!(b("tinyint(1)", DataType::Boolean), DbzType::Int16);
        assert_eq!(
            b("datetime", DataType::Timestamp(TimeUnit::Microsecond, None)),
            DbzType::TimestampMillis
        );
        assert_eq!(
            b(
                "datetime(6)",
                DataType::Timestamp(TimeUnit::Microsecond, None)
            ),
            DbzType::MicroTimestamp
        );
        assert_eq!(
            b(
                "timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, None)
            ),
            DbzType::ZonedTimestamp
        );
        assert_eq!(b("year(4)", DataType::Int32), DbzType::Year);
        assert_eq!(
            b("enum('a','b''c')", DataType::Utf8),
            DbzType::String(Some(("io.debezium.data.Enum", Some("a,b'c".into()))))
        );
        assert_eq!(
            b("bigint(20) unsigned", DataType::Decimal128(20, 0)),
            DbzType::Decimal {
                precision: 20,
                scale: 0
            }
        );
        let p = |s: &str, dt: DataType| DbzType::of(Connector::Postgres, &dt, s);
        assert_eq!(
            p("numeric", DataType::Decimal128(38, 18)),
            DbzType::VariableScaleDecimal
        );
        assert_eq!(
            p("jsonb", DataType::Utf8),
            DbzType::String(Some(("io.debezium.data.Json", None)))
        );
        assert_eq!(
            p(
                "_int4",
                DataType::List(Arc::new(Field::new("item", DataType::Int32, true)))
            ),
            DbzType::Array(Box::new(DbzType::Int32))
        );
        assert_eq!(twos_complement(-128), vec![0x80]);
        assert_eq!(twos_complement(128), vec![0x00, 0x80]);
        assert_eq!(twos_complement(0), vec![0]);
        assert_eq!(trimmed(1_500_000, 6), (15, 1));
        assert_eq!(zoned_timestamp(0), "1970-01-01T00:00:00Z");
    }
}
