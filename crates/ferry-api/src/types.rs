//! SeaTunnel's type system on Arrow.
//!
//! | SeaTunnel | Arrow |
//! |---|---|
//! | `string` | `Utf8` |
//! | `boolean` | `Boolean` |
//! | `tinyint` | `Int8` |
//! | `smallint` | `Int16` |
//! | `int` | `Int32` |
//! | `bigint` | `Int64` |
//! | `float` | `Float32` |
//! | `double` | `Float64` |
//! | `decimal(p, s)` | `Decimal128(p, s)` (p ≤ 38) |
//! | `bytes` | `Binary` |
//! | `date` | `Date32` |
//! | `time` | `Time64(Microsecond)` |
//! | `timestamp` | `Timestamp(Microsecond, None)` (local date-time, no zone) |
//! | `timestamp_tz` | `Timestamp(Microsecond, "UTC")` |
//! | `null` | `Null` |
//! | `array<T>` | `List(T)`, items nullable |
//! | `map<K, V>` | `Map(entries: Struct(key: K not null, value: V))`, unsorted |
//! | row `{a = T, …}` | `Struct(a: T, …)` |
//!
//! The mapping is one-to-one, so an Arrow schema is all an engine needs to carry; the
//! SeaTunnel spelling is recovered with [`type_name`].

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};
use serde_json::Value;

/// The Arrow type for SeaTunnel `time`.
pub const TIME_TYPE: DataType = DataType::Time64(TimeUnit::Microsecond);
/// The Arrow type for SeaTunnel `timestamp`.
pub const TIMESTAMP_TYPE: DataType = DataType::Timestamp(TimeUnit::Microsecond, None);

/// Why a type could not be parsed; the caller adds file, line and option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError(pub String);

impl std::fmt::Display for TypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The names accepted for scalar types, for error hints.
pub const SCALAR_TYPE_NAMES: &[&str] = &[
    "string",
    "boolean",
    "tinyint",
    "smallint",
    "int",
    "bigint",
    "float",
    "double",
    "decimal(p, s)",
    "bytes",
    "date",
    "time",
    "timestamp",
    "timestamp_tz",
    "null",
    "array<T>",
    "map<K, V>",
];

/// Parses a SeaTunnel type as written in a job file: a string such as `"decimal(30, 8)"`
/// or `"map<string, {c_int = int}>"`, or an object of named fields (a nested row).
pub fn parse_type_value(v: &Value) -> Result<DataType, TypeError> {
    match v {
        Value::String(s) => parse_type(s),
        Value::Object(map) => {
            let mut fields = Vec::with_capacity(map.len());
            for (name, t) in map {
                let dt =
                    parse_type_value(t).map_err(|e| TypeError(format!("field '{name}': {e}")))?;
                fields.push(Field::new(name, dt, true));
            }
            Ok(DataType::Struct(Fields::from(fields)))
        }
        Value::Null => Ok(DataType::Null),
        other => Err(TypeError(format!("expected a type name, found {other}"))),
    }
}

/// Parses a SeaTunnel type name (case-insensitive).
pub fn parse_type(s: &str) -> Result<DataType, TypeError> {
    let mut p = TypeParser {
        s: s.as_bytes(),
        pos: 0,
        src: s,
    };
    let t = p.parse()?;
    p.skip_ws();
    if p.pos != p.s.len() {
        return Err(p.err("unexpected text after the type"));
    }
    Ok(t)
}

struct TypeParser<'a> {
    s: &'a [u8],
    pos: usize,
    src: &'a str,
}

impl TypeParser<'_> {
    fn err(&self, what: &str) -> TypeError {
        TypeError(format!(
            "invalid type '{}': {what} at character {}",
            self.src,
            self.pos + 1
        ))
    }
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.pos < self.s.len() && self.s[self.pos] == c {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> Result<(), TypeError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.err(&format!("expected '{}'", c as char)))
        }
    }
    fn word(&mut self) -> String {
        self.skip_ws();
        let start = self.pos;
        while self.pos < self.s.len()
            && (self.s[self.pos].is_ascii_alphanumeric() || self.s[self.pos] == b'_')
        {
            self.pos += 1;
        }
        self.src[start..self.pos].to_string()
    }
    fn quoted_or_word(&mut self) -> String {
        self.skip_ws();
        if self.pos < self.s.len() && self.s[self.pos] == b'"' {
            self.pos += 1;
            let start = self.pos;
            while self.pos < self.s.len() && self.s[self.pos] != b'"' {
                self.pos += 1;
            }
            let w = self.src[start..self.pos].to_string();
            self.pos = (self.pos + 1).min(self.s.len());
            w
        } else {
            self.word()
        }
    }
    fn number(&mut self) -> Result<u32, TypeError> {
        let w = self.word();
        w.parse().map_err(|_| self.err("expected a number"))
    }
    fn parse(&mut self) -> Result<DataType, TypeError> {
        self.skip_ws();
        if self.eat(b'{') {
            let mut fields = Vec::new();
            loop {
                if self.eat(b'}') {
                    break;
                }
                let name = self.quoted_or_word();
                if name.is_empty() {
                    return Err(self.err("expected a field name"));
                }
                if !(self.eat(b'=') || self.eat(b':')) {
                    return Err(self.err("expected '=' after the field name"));
                }
                let dt = if self.peek_quote() {
                    self.quoted_type()?
                } else {
                    self.parse()?
                };
                fields.push(Field::new(name, dt, true));
                self.eat(b',');
            }
            return Ok(DataType::Struct(Fields::from(fields)));
        }
        let w = self.word().to_ascii_lowercase();
        let dt = match w.as_str() {
            "string" | "varchar" | "text" => DataType::Utf8,
            "boolean" | "bool" => DataType::Boolean,
            "tinyint" => DataType::Int8,
            "smallint" => DataType::Int16,
            "int" | "integer" => DataType::Int32,
            "bigint" | "long" => DataType::Int64,
            "float" => DataType::Float32,
            "double" => DataType::Float64,
            "bytes" | "binary" => DataType::Binary,
            "date" => DataType::Date32,
            "time" => TIME_TYPE,
            "timestamp" => TIMESTAMP_TYPE,
            "timestamp_tz" => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            "null" => DataType::Null,
            "decimal" => {
                let (p, s) = if self.eat(b'(') {
                    let p = self.number()?;
                    self.expect(b',')?;
                    let s = self.number()?;
                    self.expect(b')')?;
                    (p, s)
                } else {
                    (38, 18)
                };
                if p == 0 || p > 38 || s > p {
                    return Err(self
                        .err("decimal precision must be 1..=38 and scale at most the precision"));
                }
                DataType::Decimal128(p as u8, s as i8)
            }
            "array" => {
                self.expect(b'<')?;
                let item = self.parse()?;
                self.expect(b'>')?;
                DataType::List(Arc::new(Field::new("item", item, true)))
            }
            "map" => {
                self.expect(b'<')?;
                let k = self.parse()?;
                self.expect(b',')?;
                let v = self.parse()?;
                self.expect(b'>')?;
                map_type(k, v)
            }
            "" => return Err(self.err("expected a type name")),
            other => {
                return Err(TypeError(format!(
                    "unknown type '{other}' in '{}' (valid: {})",
                    self.src,
                    SCALAR_TYPE_NAMES.join(", ")
                )))
            }
        };
        Ok(dt)
    }
    fn peek_quote(&mut self) -> bool {
        self.skip_ws();
        self.pos < self.s.len() && self.s[self.pos] == b'"'
    }
    fn quoted_type(&mut self) -> Result<DataType, TypeError> {
        let inner = self.quoted_or_word();
        parse_type(&inner)
    }
}

/// The Arrow map type Ferry uses for `map<K, V>`.
pub fn map_type(key: DataType, value: DataType) -> DataType {
    DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("key", key, false),
                Field::new("value", value, true),
            ])),
            false,
        )),
        false,
    )
}

/// The SeaTunnel spelling of an Arrow type (the inverse of [`parse_type`]).
pub fn type_name(dt: &DataType) -> String {
    match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Int8 => "tinyint".into(),
        DataType::Int16 => "smallint".into(),
        DataType::Int32 => "int".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Decimal128(p, s) => format!("decimal({p}, {s})"),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "bytes".into(),
        DataType::Date32 => "date".into(),
        DataType::Time64(_) | DataType::Time32(_) => "time".into(),
        DataType::Timestamp(_, None) => "timestamp".into(),
        DataType::Timestamp(_, Some(_)) => "timestamp_tz".into(),
        DataType::Null => "null".into(),
        DataType::List(f) | DataType::LargeList(f) => {
            format!("array<{}>", type_name(f.data_type()))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                format!(
                    "map<{}, {}>",
                    type_name(kv[0].data_type()),
                    type_name(kv[1].data_type())
                )
            }
            other => format!("{other}"),
        },
        DataType::Struct(fields) => {
            let inner: Vec<String> = fields
                .iter()
                .map(|f| format!("{} = {}", f.name(), type_name(f.data_type())))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        other => format!("{other}"),
    }
}

/// Whether two types are the same SeaTunnel type, ignoring nullability and field-name
/// case inside rows (SeaTunnel compares row fields by position).
pub fn same_type(a: &DataType, b: &DataType) -> bool {
    match (a, b) {
        (DataType::List(x), DataType::List(y)) => same_type(x.data_type(), y.data_type()),
        (DataType::Map(x, _), DataType::Map(y, _)) => same_type(x.data_type(), y.data_type()),
        (DataType::Struct(x), DataType::Struct(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|(f, g)| same_type(f.data_type(), g.data_type()))
        }
        _ => type_name(a) == type_name(b),
    }
}

/// Parses a `schema { fields { name = type, … } }` block into an Arrow schema.
/// `fields` is the object under `fields`; the error names the failing field.
pub fn schema_from_fields(fields: &serde_json::Map<String, Value>) -> Result<Schema, TypeError> {
    let mut out = Vec::with_capacity(fields.len());
    for (name, t) in fields {
        let dt = parse_type_value(t).map_err(|e| TypeError(format!("field '{name}': {e}")))?;
        out.push(Field::new(name, dt, true));
    }
    Ok(Schema::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_seatunnel_type_and_round_trips_its_name() {
        for name in [
            "string",
            "boolean",
            "tinyint",
            "smallint",
            "int",
            "bigint",
            "float",
            "double",
            "decimal(30, 8)",
            "bytes",
            "date",
            "time",
            "timestamp",
            "null",
            "array<int>",
            "map<string, array<int>>",
            "map<date, string>",
            "map<string, {c_int = int, c_string = string}>",
        ] {
            let dt = parse_type(name).unwrap();
            assert_eq!(type_name(&dt), name, "{name}");
        }
    }

    #[test]
    fn type_names_are_case_insensitive() {
        assert_eq!(parse_type("STRING").unwrap(), DataType::Utf8);
        assert_eq!(
            parse_type("Decimal(10,2)").unwrap(),
            DataType::Decimal128(10, 2)
        );
    }

    #[test]
    fn rejects_unknown_and_malformed_types_with_the_reason() {
        let e = parse_type("strnig").unwrap_err();
        assert!(e.0.contains("unknown type 'strnig'"), "{e}");
        let e = parse_type("decimal(40, 2)").unwrap_err();
        assert!(e.0.contains("precision"), "{e}");
        let e = parse_type("array<int").unwrap_err();
        assert!(e.0.contains("expected '>'"), "{e}");
    }

    #[test]
    fn nested_rows_from_objects() {
        let v: Value = serde_json::json!({"c_row": {"c_int": "int", "inner": {"x": "string"}}});
        let s = schema_from_fields(v.as_object().unwrap()).unwrap();
        assert_eq!(
            type_name(s.field(0).data_type()),
            "{c_int = int, inner = {x = string}}"
        );
    }
}
