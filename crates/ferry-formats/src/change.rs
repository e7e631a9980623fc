//! SeaTunnel's change-data message formats: `canal_json`, `debezium_json`, `maxwell_json`,
//! `ogg_json` (read and written) and `compatible_kafka_connect_json` (read).
//!
//! Reading follows SeaTunnel's deserialization schemas (`seatunnel-format-json`): one
//! message becomes zero or more rows, each with its row kind. An update becomes `-U` (the
//! row before) then `+U` (after); Canal and Maxwell send only the changed columns' old
//! values, so the row before is the row after with those columns replaced. Messages that
//! carry no rows (DDL, Debezium's logical-decoding messages, tombstones) give none. Writing
//! follows SeaTunnel's serialization schemas, which record no updates: `+I` and `+U` are
//! written as inserts, `-U` and `-D` as deletes, so that a consumer applying them in order
//! ends with the same table.
//!
//! Where SeaTunnel's reader ignores a message it cannot read (its Kafka source builds these
//! formats with `ignoreParseErrors`), Ferry follows `format_error_handle_way`: `fail` (the
//! default) stops the job naming the message, `skip` leaves it out with a warning. Losing
//! a change silently is never the default.

use arrow::datatypes::{DataType, Schema, TimeUnit};
use base64::Engine;
use ferry_api::value::{format_date, format_decimal, format_time, format_timestamp};
use ferry_api::RowKind;
use serde_json::{Map, Value};

/// A change-data message format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeFormat {
    /// Alibaba Canal's JSON: `{"data": [rows], "old": [changed columns], "type": "INSERT"
    /// | "UPDATE" | "DELETE", "isDdl": …}`.
    Canal,
    /// Debezium's JSON: `{"before": row, "after": row, "op": "c" | "r" | "u" | "d"}`,
    /// inside `{"schema": …, "payload": …}` when `include_schema` (SeaTunnel's
    /// `debezium_record_include_schema`, default true).
    Debezium {
        /// The message is Kafka Connect's envelope with a schema.
        include_schema: bool,
    },
    /// Maxwell's JSON: `{"data": row, "old": changed columns, "type": "insert" | "update" |
    /// "delete"}`.
    Maxwell,
    /// Oracle GoldenGate's JSON: `{"before": row, "after": row, "op_type": "I" | "U" | "D"}`.
    Ogg,
    /// Kafka Connect's JSON converter: `{"schema": …, "payload": row or [rows]}` (just the
    /// payload without `value_schema`); every row an insert. Read only.
    KafkaConnect {
        /// SeaTunnel's `value_converter_schema_enabled` (default true).
        value_schema: bool,
    },
}

/// Rows of one message, appended to the caller's run.
pub(crate) struct Rows<'a> {
    pub rows: &'a mut Vec<Map<String, Value>>,
    pub kinds: &'a mut Vec<u8>,
}

impl Rows<'_> {
    fn push(&mut self, row: Map<String, Value>, kind: RowKind) {
        self.rows.push(row);
        self.kinds.push(kind as u8);
    }
}

impl ChangeFormat {
    /// The format's name in job files.
    pub fn name(&self) -> &'static str {
        match self {
            ChangeFormat::Canal => "canal_json",
            ChangeFormat::Debezium { .. } => "debezium_json",
            ChangeFormat::Maxwell => "maxwell_json",
            ChangeFormat::Ogg => "ogg_json",
            ChangeFormat::KafkaConnect { .. } => "compatible_kafka_connect_json",
        }
    }

    /// Whether rows can be written in this format.
    pub fn writable(&self) -> bool {
        !matches!(self, ChangeFormat::KafkaConnect { .. })
    }

    /// The rows of message `msg` (already parsed as JSON), for a table of `schema`.
    pub(crate) fn read(
        &self,
        msg: Value,
        schema: &Schema,
        out: &mut Rows<'_>,
    ) -> std::result::Result<(), String> {
        match self {
            ChangeFormat::Canal => read_canal(msg, out),
            ChangeFormat::Maxwell => read_maxwell(msg, out),
            ChangeFormat::Ogg => read_ogg(msg, out),
            ChangeFormat::Debezium { include_schema } => {
                read_debezium(msg, *include_schema, schema, out)
            }
            ChangeFormat::KafkaConnect { value_schema } => {
                let payload = if *value_schema {
                    field(msg, "payload")?
                } else {
                    msg
                };
                match payload {
                    Value::Array(items) => {
                        for item in items {
                            out.push(object(item, "payload")?, RowKind::Insert);
                        }
                        Ok(())
                    }
                    Value::Null => Ok(()),
                    other => {
                        out.push(object(other, "payload")?, RowKind::Insert);
                        Ok(())
                    }
                }
            }
        }
    }

    /// The message for `row` (the row's columns as a JSON object) of kind `kind`.
    pub(crate) fn write(&self, row: Map<String, Value>, kind: RowKind) -> Value {
        let insert = matches!(kind, RowKind::Insert | RowKind::UpdateAfter);
        let mut m = Map::new();
        match self {
            ChangeFormat::Debezium { .. } => {
                let (before, after) = if insert {
                    (Value::Null, Value::Object(row))
                } else {
                    (Value::Object(row), Value::Null)
                };
                m.insert("before".into(), before);
                m.insert("after".into(), after);
                m.insert("op".into(), Value::from(if insert { "c" } else { "d" }));
            }
            // SeaTunnel writes Canal, Maxwell and OGG alike: `{"data": row, "type": …}`.
            _ => {
                m.insert("data".into(), Value::Object(row));
                m.insert(
                    "type".into(),
                    Value::from(if insert { "INSERT" } else { "DELETE" }),
                );
            }
        }
        Value::Object(m)
    }
}

/// `msg[name]`, taken out (`null` when absent).
fn field(msg: Value, name: &str) -> std::result::Result<Value, String> {
    match msg {
        Value::Object(mut m) => Ok(m.remove(name).unwrap_or(Value::Null)),
        other => Err(format!("expected an object, found {}", short(&other))),
    }
}

fn object(v: Value, what: &str) -> std::result::Result<Map<String, Value>, String> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(format!("\"{what}\" is not an object but {}", short(&other))),
    }
}

fn text<'a>(m: &'a Map<String, Value>, name: &str) -> std::result::Result<&'a str, String> {
    match m.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("\"{name}\" is {}, not text", short(other))),
        None => Err(format!("no \"{name}\" field")),
    }
}

/// A value in an error message, cut short.
fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// `after` with the columns of `old` replaced: the row before an update, from the changed
/// columns' old values that Canal and Maxwell send.
fn before_from_old(after: &Map<String, Value>, old: Map<String, Value>) -> Map<String, Value> {
    let mut before = after.clone();
    for (k, v) in old {
        before.insert(k, v);
    }
    before
}

fn read_canal(msg: Value, out: &mut Rows<'_>) -> std::result::Result<(), String> {
    let mut m = object(msg, "message")?;
    if m.get("isDdl").and_then(Value::as_bool) == Some(true) {
        return Ok(());
    }
    let op = text(&m, "type")?.to_string();
    let data = match m.remove("data") {
        Some(Value::Array(rows)) => rows,
        // SeaTunnel's Canal writer (and Ferry's, which follows it) writes one row as an
        // object; read it as the one-row list it stands for.
        Some(Value::Object(row)) => vec![Value::Object(row)],
        None | Some(Value::Null) => {
            // Statements without rows: DDL and queries.
            return match op.as_str() {
                "QUERY" | "CREATE" | "ALTER" | "ERASE" | "RENAME" | "CINDEX" | "DINDEX"
                | "TRUNCATE" => Ok(()),
                _ => Err(format!("a {op} message without \"data\"")),
            };
        }
        Some(other) => return Err(format!("\"data\" is {}, not a list", short(&other))),
    };
    match op.as_str() {
        "INSERT" => {
            for row in data {
                out.push(object(row, "data")?, RowKind::Insert);
            }
        }
        "DELETE" => {
            for row in data {
                out.push(object(row, "data")?, RowKind::Delete);
            }
        }
        "UPDATE" => {
            let old = match m.remove("old") {
                Some(Value::Array(old)) if old.len() == data.len() => old,
                Some(Value::Object(old)) if data.len() == 1 => vec![Value::Object(old)],
                Some(Value::Array(old)) => {
                    return Err(format!(
                        "an UPDATE with {} rows in \"data\" and {} in \"old\"",
                        data.len(),
                        old.len()
                    ))
                }
                _ => return Err("an UPDATE without \"old\" values".into()),
            };
            for (row, old) in data.into_iter().zip(old) {
                let after = object(row, "data")?;
                let before = before_from_old(&after, object(old, "old")?);
                out.push(before, RowKind::UpdateBefore);
                out.push(after, RowKind::UpdateAfter);
            }
        }
        other => return Err(format!("unknown type '{other}'")),
    }
    Ok(())
}

/// Reads the messages SeaTunnel's (and Ferry's) Canal, Maxwell and OGG writers make,
/// `{"data": row, "type": "INSERT" | "DELETE"}`, which none of those tools' own readers
/// take: so that what Ferry writes in a format it also reads in it.
fn read_written(
    m: &mut Map<String, Value>,
    out: &mut Rows<'_>,
) -> Option<std::result::Result<(), String>> {
    let kind = match m.get("type").and_then(Value::as_str)? {
        "INSERT" => RowKind::Insert,
        "DELETE" => RowKind::Delete,
        _ => return None,
    };
    let Some(Value::Object(row)) = m.remove("data") else {
        return None;
    };
    out.push(row, kind);
    Some(Ok(()))
}

fn read_maxwell(msg: Value, out: &mut Rows<'_>) -> std::result::Result<(), String> {
    let mut m = object(msg, "message")?;
    if let Some(r) = read_written(&mut m, out) {
        return r;
    }
    let op = text(&m, "type")?.to_string();
    let data = || -> std::result::Result<Map<String, Value>, String> {
        Err(format!("a {op} message without \"data\""))
    };
    match op.as_str() {
        "insert" | "bootstrap-insert" | "update" | "delete" => {}
        // Schema changes and bootstrap markers carry no rows.
        t if t.starts_with("table-")
            || t.starts_with("database-")
            || t == "bootstrap-start"
            || t == "bootstrap-complete" =>
        {
            return Ok(())
        }
        other => return Err(format!("unknown type '{other}'")),
    }
    let row = match m.remove("data") {
        Some(v @ Value::Object(_)) => object(v, "data")?,
        _ => data()?,
    };
    match op.as_str() {
        "delete" => out.push(row, RowKind::Delete),
        "update" => {
            let old = match m.remove("old") {
                Some(Value::Object(old)) => old,
                _ => Map::new(),
            };
            out.push(before_from_old(&row, old), RowKind::UpdateBefore);
            out.push(row, RowKind::UpdateAfter);
        }
        _ => out.push(row, RowKind::Insert),
    }
    Ok(())
}

/// The row of `before`/`after`, or an error saying why an update or delete needs it.
fn image(
    m: &mut Map<String, Value>,
    name: &str,
    op: &str,
) -> std::result::Result<Map<String, Value>, String> {
    match m.remove(name) {
        Some(Value::Object(row)) => Ok(row),
        _ => Err(format!(
            "a {op} message without \"{name}\" (the source table must log the whole row: REPLICA IDENTITY FULL, or Oracle's supplemental logging)"
        )),
    }
}

fn read_ogg(msg: Value, out: &mut Rows<'_>) -> std::result::Result<(), String> {
    let mut m = object(msg, "message")?;
    if !m.contains_key("op_type") {
        if let Some(r) = read_written(&mut m, out) {
            return r;
        }
    }
    let op = text(&m, "op_type")?.trim().to_string();
    match op.as_str() {
        "I" => {
            let after = image(&mut m, "after", "insert")?;
            out.push(after, RowKind::Insert);
        }
        "U" => {
            let before = image(&mut m, "before", "update")?;
            let after = image(&mut m, "after", "update")?;
            out.push(before, RowKind::UpdateBefore);
            out.push(after, RowKind::UpdateAfter);
        }
        "D" => {
            let before = image(&mut m, "before", "delete")?;
            out.push(before, RowKind::Delete);
        }
        "T" => return Err("a truncate (op_type T) cannot be written as rows".into()),
        other => return Err(format!("unknown op_type '{other}'")),
    }
    Ok(())
}

fn read_debezium(
    msg: Value,
    include_schema: bool,
    schema: &Schema,
    out: &mut Rows<'_>,
) -> std::result::Result<(), String> {
    let m = object(msg, "message")?;
    // With the schema the change is in "payload"; a message without one is read as it is.
    let payload = if include_schema && m.contains_key("payload") {
        field(Value::Object(m), "payload")?
    } else {
        Value::Object(m)
    };
    let mut p = match payload {
        // A tombstone with a schema.
        Value::Null => return Ok(()),
        other => object(other, "payload")?,
    };
    let op = text(&p, "op")?.to_string();
    let row = |p: &mut Map<String, Value>, name: &str, what: &str| {
        image(p, name, what).map(|r| debezium_row(r, schema))
    };
    match op.as_str() {
        "c" | "r" => {
            let after = row(&mut p, "after", "create")?;
            out.push(after, RowKind::Insert);
        }
        "u" => {
            let before = row(&mut p, "before", "update")?;
            let after = row(&mut p, "after", "update")?;
            out.push(before, RowKind::UpdateBefore);
            out.push(after, RowKind::UpdateAfter);
        }
        "d" => {
            let before = row(&mut p, "before", "delete")?;
            out.push(before, RowKind::Delete);
        }
        // A logical-decoding message, not a row.
        "m" => {}
        "t" => return Err("a truncate (op t) cannot be written as rows".into()),
        other => return Err(format!("unknown op '{other}'")),
    }
    Ok(())
}

/// A Debezium row's values in the forms the column types read, as SeaTunnel's
/// `DebeziumRowConverter` reads them: dates as days since the epoch, times as
/// microseconds of the day, timestamps as epoch milliseconds or `yyyy-MM-ddTHH:mm:ssZ`,
/// decimals as Kafka Connect's base64 big-endian unscaled bytes (or plain numbers), and
/// text in an integer column (Debezium's `Bits`) as 0, which is what Jackson's
/// `intValue()` gives SeaTunnel.
fn debezium_row(mut row: Map<String, Value>, schema: &Schema) -> Map<String, Value> {
    for f in schema.fields() {
        let Some(v) = row.get_mut(f.name()) else {
            continue;
        };
        if let Some(new) = debezium_value(v, f.data_type()) {
            *v = new;
        }
    }
    row
}

fn debezium_value(v: &Value, dt: &DataType) -> Option<Value> {
    let n = v.as_i64();
    match (dt, v) {
        (DataType::Date32, _) => n.map(|d| Value::from(format_date(d as i32))),
        (DataType::Time64(_), _) => n.map(|us| Value::from(format_time(us))),
        (DataType::Timestamp(TimeUnit::Microsecond, _), Value::String(s)) => {
            s.strip_suffix('Z').map(|t| Value::String(t.to_string()))
        }
        (DataType::Timestamp(TimeUnit::Microsecond, _), _) => n
            .and_then(|ms| ms.checked_mul(1000))
            .map(|us| Value::from(format_timestamp(us))),
        (DataType::Decimal128(_, scale), Value::String(s)) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
            if bytes.is_empty() || bytes.len() > 16 {
                return None;
            }
            // Big-endian two's complement, sign-extended to 128 bits.
            let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
            let mut buf = [fill; 16];
            buf[16 - bytes.len()..].copy_from_slice(&bytes);
            let unscaled = i128::from_be_bytes(buf);
            Some(Value::String(format_decimal(unscaled, *scale)))
        }
        (
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64,
            Value::String(s),
        ) if s.trim().parse::<f64>().is_err() => Some(Value::from(0)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(
        format: ChangeFormat,
        schema: &Schema,
        msg: Value,
    ) -> std::result::Result<Vec<(u8, Value)>, String> {
        let (mut rows, mut kinds) = (Vec::new(), Vec::new());
        format.read(
            msg,
            schema,
            &mut Rows {
                rows: &mut rows,
                kinds: &mut kinds,
            },
        )?;
        Ok(kinds
            .into_iter()
            .zip(rows.into_iter().map(Value::Object))
            .collect())
    }

    fn none() -> Schema {
        Schema::empty()
    }

    #[test]
    fn canal_updates_take_the_old_values_of_the_changed_columns_only() {
        let got = read(
            ChangeFormat::Canal,
            &none(),
            json!({"data": [{"id": "1", "w": "4.56", "n": "a"}], "old": [{"w": "3.14"}],
                   "type": "UPDATE", "isDdl": false}),
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                (1, json!({"id": "1", "w": "3.14", "n": "a"})),
                (2, json!({"id": "1", "w": "4.56", "n": "a"})),
            ]
        );
        let ddl = json!({"data": null, "type": "CREATE", "isDdl": true});
        assert!(read(ChangeFormat::Canal, &none(), ddl).unwrap().is_empty());
        let query = json!({"data": null, "type": "QUERY"});
        assert!(read(ChangeFormat::Canal, &none(), query)
            .unwrap()
            .is_empty());
        let err = read(
            ChangeFormat::Canal,
            &none(),
            json!({"data": [{"id": 1}], "type": "UPDATE"}),
        )
        .unwrap_err();
        assert!(err.contains("without \"old\""), "{err}");
        let err = read(
            ChangeFormat::Canal,
            &none(),
            json!({"data": [], "type": "X"}),
        );
        assert!(err.unwrap_err().contains("unknown type 'X'"));
    }

    #[test]
    fn maxwell_and_ogg_rows_carry_their_kinds() {
        let got = read(
            ChangeFormat::Maxwell,
            &none(),
            json!({"type": "update", "data": {"id": 1, "w": "b"}, "old": {"w": "a"}}),
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                (1, json!({"id": 1, "w": "a"})),
                (2, json!({"id": 1, "w": "b"}))
            ]
        );
        let got = read(
            ChangeFormat::Maxwell,
            &none(),
            json!({"type": "table-create", "def": {}}),
        );
        assert!(got.unwrap().is_empty());
        let got = read(
            ChangeFormat::Ogg,
            &none(),
            json!({"op_type": "D", "before": {"id": 1}, "after": null}),
        )
        .unwrap();
        assert_eq!(got, vec![(3, json!({"id": 1}))]);
        let err = read(
            ChangeFormat::Ogg,
            &none(),
            json!({"op_type": "U", "after": {"id": 1}}),
        )
        .unwrap_err();
        assert!(err.contains("REPLICA IDENTITY FULL"), "{err}");
    }

    #[test]
    fn debezium_values_read_as_seatunnel_reads_them() {
        let schema = Schema::new(vec![
            arrow::datatypes::Field::new("d", DataType::Date32, true),
            arrow::datatypes::Field::new("t", DataType::Time64(TimeUnit::Microsecond), true),
            arrow::datatypes::Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true,
            ),
            arrow::datatypes::Field::new(
                "zts",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true,
            ),
            arrow::datatypes::Field::new("dec", DataType::Decimal128(10, 2), true),
            arrow::datatypes::Field::new("bits", DataType::Int8, true),
        ]);
        let msg = json!({"schema": {}, "payload": {"op": "c", "before": null, "after": {
            "d": 19109, "t": 52200000000i64, "ts": 1651069800000i64,
            "zts": "2023-04-27T03:08:40Z", "dec": "/4A=", "bits": "VVVVVVVVVVU="}}});
        let got = read(
            ChangeFormat::Debezium {
                include_schema: true,
            },
            &schema,
            msg,
        )
        .unwrap();
        assert_eq!(
            got,
            vec![(
                0,
                json!({"d": "2022-04-27", "t": "14:30:00", "ts": "2022-04-27T14:30:00",
                       "zts": "2023-04-27T03:08:40", "dec": "-1.28", "bits": 0})
            )]
        );
        let delete = json!({"op": "d", "before": {"d": 1}, "after": null});
        let got = read(
            ChangeFormat::Debezium {
                include_schema: false,
            },
            &schema,
            delete,
        );
        assert_eq!(got.unwrap(), vec![(3, json!({"d": "1970-01-02"}))]);
        let tombstone = json!({"schema": null, "payload": null});
        let got = read(
            ChangeFormat::Debezium {
                include_schema: true,
            },
            &schema,
            tombstone,
        );
        assert!(got.unwrap().is_empty());
    }

    #[test]
    fn writes_record_inserts_and_deletes_as_seatunnel_does() {
        let row = || json!({"id": 1}).as_object().cloned().unwrap_or_default();
        assert_eq!(
            ChangeFormat::Canal
                .write(row(), RowKind::UpdateAfter)
                .to_string(),
            r#"{"data":{"id":1},"type":"INSERT"}"#
        );
        assert_eq!(
            ChangeFormat::Ogg
                .write(row(), RowKind::UpdateBefore)
                .to_string(),
            r#"{"data":{"id":1},"type":"DELETE"}"#
        );
        assert_eq!(
            ChangeFormat::Debezium {
                include_schema: true
            }
            .write(row(), RowKind::Delete)
            .to_string(),
            r#"{"before":{"id":1},"after":null,"op":"d"}"#
        );
        assert!(!ChangeFormat::KafkaConnect { value_schema: true }.writable());
    }

    /// What each writable format writes, it reads: +I and +U as inserts, -U and -D as
    /// deletes (the writers record no updates as such), the row unchanged.
    #[test]
    fn every_writable_format_reads_what_it_writes() {
        for f in [
            ChangeFormat::Canal,
            ChangeFormat::Maxwell,
            ChangeFormat::Ogg,
            ChangeFormat::Debezium {
                include_schema: true,
            },
        ] {
            for (kind, read_as) in [
                (RowKind::Insert, RowKind::Insert),
                (RowKind::UpdateAfter, RowKind::Insert),
                (RowKind::UpdateBefore, RowKind::Delete),
                (RowKind::Delete, RowKind::Delete),
            ] {
                let row = json!({"id": 7, "v": "x"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                let written = f.write(row.clone(), kind);
                let got = read(f, &none(), written.clone()).unwrap();
                assert_eq!(
                    got,
                    vec![(read_as as u8, Value::Object(row))],
                    "{} {kind:?}: {written}",
                    f.name()
                );
            }
        }
    }
}
