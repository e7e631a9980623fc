//! SeaTunnel's `avro` format: each message one Avro binary datum (no container, no schema
//! registry header) of the record schema SeaTunnel derives from the table's columns
//! (`SeaTunnelRowTypeToAvroSchemaConverter`), so that messages written by SeaTunnel read
//! here and the other way round:
//!
//! | Column | Avro |
//! |---|---|
//! | `string` | `string` |
//! | `bytes` | `bytes` |
//! | `tinyint`, `smallint`, `int` | `int` |
//! | `bigint` | `long` |
//! | `float`, `double`, `boolean` | `float`, `double`, `boolean` |
//! | `decimal(p, s)` | `bytes` with logical type `decimal(p, s)` (big-endian two's complement) |
//! | `date` | `int` with logical type `date` (days since 1970) |
//! | `timestamp` | `long` with logical type `local-timestamp-millis` |
//! | `map<string, T>`, `array<T>`, `row` | `map`, `array`, a nested `record` |
//!
//! The schema has no unions, so a value cannot be null: writing a null is an error naming
//! the column (SeaTunnel fails on it too). `time` has no type in this mapping and is
//! refused when the job is planned.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, Schema, TimestampMicrosecondType,
};
use base64::Engine;
use ferry_api::value::{format_date, format_decimal, format_timestamp};
use serde_json::{Map, Number, Value};

/// The first column (or nested field) of `schema` that has no Avro type in SeaTunnel's
/// mapping, as an error naming it and its type.
pub fn check_schema(schema: &Schema) -> Result<(), String> {
    for f in schema.fields() {
        check_type(f.name(), f.data_type())?;
    }
    Ok(())
}

fn check_type(name: &str, dt: &DataType) -> Result<(), String> {
    match dt {
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Boolean
        | DataType::Null
        | DataType::Date32
        | DataType::Decimal128(..)
        | DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, _) => Ok(()),
        DataType::List(item) => check_type(name, item.data_type()),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                if !matches!(kv[0].data_type(), DataType::Utf8 | DataType::LargeUtf8) {
                    return Err(format!(
                        "column '{name}': Avro maps have text keys, not {}",
                        kv[0].data_type()
                    ));
                }
                check_type(name, kv[1].data_type())
            }
            other => Err(format!("column '{name}': unexpected map entries {other}")),
        },
        DataType::Struct(fields) => {
            for f in fields {
                check_type(&format!("{name}.{}", f.name()), f.data_type())?;
            }
            Ok(())
        }
        other => Err(format!(
            "column '{name}' of type {other} has no type in SeaTunnel's Avro mapping (string, bytes, integers, float, double, boolean, decimal, date, timestamp, map, array, row)"
        )),
    }
}

/// Reads Avro's binary encoding from a message body.
struct Reader<'a> {
    body: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self
            .body
            .get(self.at)
            .ok_or_else(|| format!("the datum ends early (at byte {})", self.at))?;
        self.at += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.body.len())
            .ok_or_else(|| format!("the datum ends early (at byte {})", self.at))?;
        let s = &self.body[self.at..end];
        self.at = end;
        Ok(s)
    }

    /// A zig-zag varint (`int` and `long` are encoded alike).
    fn long(&mut self) -> Result<i64, String> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(((v >> 1) as i64) ^ -((v & 1) as i64));
            }
        }
        Err(format!("a varint longer than 10 bytes at byte {}", self.at))
    }

    fn int(&mut self) -> Result<i32, String> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| format!("{v} does not fit an Avro int"))
    }

    fn len(&mut self) -> Result<usize, String> {
        let n = self.long()?;
        usize::try_from(n).map_err(|_| format!("a negative length {n} at byte {}", self.at))
    }

    fn bytes(&mut self) -> Result<&[u8], String> {
        let n = self.len()?;
        self.take(n)
    }

    /// The item count of the next block of an array or a map (0 ends it); a negative count
    /// is followed by the block's size in bytes, which is not needed.
    fn block(&mut self) -> Result<usize, String> {
        let n = self.long()?;
        if n < 0 {
            self.long()?;
        }
        usize::try_from(n.unsigned_abs()).map_err(|_| format!("a block of {n} items"))
    }

    fn value(&mut self, dt: &DataType) -> Result<Value, String> {
        Ok(match dt {
            DataType::Null => Value::Null,
            DataType::Boolean => Value::Bool(match self.byte()? {
                0 => false,
                1 => true,
                b => return Err(format!("{b} is not an Avro boolean")),
            }),
            DataType::Int8 | DataType::Int16 | DataType::Int32 => Value::from(self.int()?),
            DataType::Int64 => Value::from(self.long()?),
            DataType::Float32 => {
                let b = self.take(4)?;
                float(f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            }
            DataType::Float64 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                float(f64::from_le_bytes(a))
            }
            DataType::Utf8 | DataType::LargeUtf8 => {
                let b = self.bytes()?;
                Value::String(
                    std::str::from_utf8(b)
                        .map_err(|e| format!("a string that is not UTF-8: {e}"))?
                        .to_string(),
                )
            }
            DataType::Binary | DataType::LargeBinary => {
                Value::String(base64::engine::general_purpose::STANDARD.encode(self.bytes()?))
            }
            DataType::Decimal128(_, s) => {
                let b = self.bytes()?;
                Value::String(format_decimal(unscaled(b)?, *s))
            }
            DataType::Date32 => Value::String(format_date(self.int()?)),
            DataType::Timestamp(_, _) => {
                let millis = self.long()?;
                let micros = millis
                    .checked_mul(1000)
                    .ok_or_else(|| format!("timestamp {millis} ms is out of range"))?;
                Value::String(format_timestamp(micros))
            }
            DataType::List(item) => {
                let mut items = Vec::new();
                loop {
                    let n = self.block()?;
                    if n == 0 {
                        break;
                    }
                    for _ in 0..n {
                        items.push(self.value(item.data_type())?);
                    }
                }
                Value::Array(items)
            }
            DataType::Map(entries, _) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err(format!("unexpected map entries {}", entries.data_type()));
                };
                let mut m = Map::new();
                loop {
                    let n = self.block()?;
                    if n == 0 {
                        break;
                    }
                    for _ in 0..n {
                        let k = self.value(&DataType::Utf8)?;
                        let v = self.value(kv[1].data_type())?;
                        if let Value::String(k) = k {
                            m.insert(k, v);
                        }
                    }
                }
                Value::Object(m)
            }
            DataType::Struct(fields) => {
                let mut m = Map::new();
                for f in fields {
                    let v = self
                        .value(f.data_type())
                        .map_err(|e| format!("field {}: {e}", f.name()))?;
                    m.insert(f.name().clone(), v);
                }
                Value::Object(m)
            }
            other => return Err(format!("no Avro type for {other}")),
        })
    }
}

/// A float as JSON holds it (NaN and the infinities as the text Rust parses back).
fn float(v: f64) -> Value {
    Number::from_f64(v).map_or_else(|| Value::String(v.to_string()), Value::Number)
}

/// A big-endian two's complement integer of 1 to 16 bytes.
fn unscaled(b: &[u8]) -> Result<i128, String> {
    if b.is_empty() || b.len() > 16 {
        return Err(format!(
            "a decimal of {} bytes (1 to 16 fit 38 digits)",
            b.len()
        ));
    }
    let fill = if b[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut a = [fill; 16];
    a[16 - b.len()..].copy_from_slice(b);
    Ok(i128::from_be_bytes(a))
}

/// One message body: a record of the table's columns.
pub(crate) fn decode_row(body: &[u8], schema: &Schema) -> Result<Map<String, Value>, String> {
    let mut r = Reader { body, at: 0 };
    let mut row = Map::new();
    for f in schema.fields() {
        let v = r
            .value(f.data_type())
            .map_err(|e| format!("column {}: {e}", f.name()))?;
        row.insert(f.name().clone(), v);
    }
    if r.at != body.len() {
        return Err(format!(
            "{} bytes left after the record's last column",
            body.len() - r.at
        ));
    }
    Ok(row)
}

fn write_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// `v` as Java's `BigInteger.toByteArray` writes it: the fewest big-endian bytes that keep
/// the sign.
fn write_unscaled(out: &mut Vec<u8>, v: i128) {
    let b = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (this, next) = (b[start], b[start + 1]);
        if (this == 0 && next & 0x80 == 0) || (this == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    write_bytes(out, &b[start..]);
}

/// Appends value `i` of `array` (of type `dt`) in Avro's binary encoding; `name` names
/// the column in errors.
fn write_value(out: &mut Vec<u8>, array: &dyn Array, i: usize, name: &str) -> Result<(), String> {
    if array.is_null(i) {
        if *array.data_type() == DataType::Null {
            return Ok(());
        }
        return Err(format!(
            "column '{name}' is null: SeaTunnel's Avro schema has no nulls (filter or fill the column)"
        ));
    }
    match array.data_type() {
        DataType::Null => {}
        DataType::Boolean => out.push(u8::from(array.as_boolean().value(i))),
        DataType::Int8 => write_long(out, i64::from(array.as_primitive::<Int8Type>().value(i))),
        DataType::Int16 => write_long(out, i64::from(array.as_primitive::<Int16Type>().value(i))),
        DataType::Int32 => write_long(out, i64::from(array.as_primitive::<Int32Type>().value(i))),
        DataType::Int64 => write_long(out, array.as_primitive::<Int64Type>().value(i)),
        DataType::Float32 => {
            out.extend_from_slice(&array.as_primitive::<Float32Type>().value(i).to_le_bytes())
        }
        DataType::Float64 => {
            out.extend_from_slice(&array.as_primitive::<Float64Type>().value(i).to_le_bytes())
        }
        DataType::Utf8 => write_bytes(out, array.as_string::<i32>().value(i).as_bytes()),
        DataType::LargeUtf8 => write_bytes(out, array.as_string::<i64>().value(i).as_bytes()),
        DataType::Binary => write_bytes(out, array.as_binary::<i32>().value(i)),
        DataType::LargeBinary => write_bytes(out, array.as_binary::<i64>().value(i)),
        DataType::Decimal128(..) => {
            write_unscaled(out, array.as_primitive::<Decimal128Type>().value(i))
        }
        DataType::Date32 => write_long(out, i64::from(array.as_primitive::<Date32Type>().value(i))),
        DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, _) => write_long(
            out,
            array
                .as_primitive::<TimestampMicrosecondType>()
                .value(i)
                .div_euclid(1000),
        ),
        DataType::List(_) => {
            let items = array.as_list::<i32>().value(i);
            if !items.is_empty() {
                write_long(out, items.len() as i64);
                for j in 0..items.len() {
                    write_value(out, items.as_ref(), j, name)?;
                }
            }
            write_long(out, 0);
        }
        DataType::Map(..) => {
            let entries = array.as_map().value(i);
            if entries.len() > 0 {
                write_long(out, entries.len() as i64);
                for j in 0..entries.len() {
                    write_value(out, entries.column(0).as_ref(), j, name)?;
                    write_value(out, entries.column(1).as_ref(), j, name)?;
                }
            }
            write_long(out, 0);
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            for (f, c) in fields.iter().zip(s.columns()) {
                write_value(out, c.as_ref(), i, &format!("{name}.{}", f.name()))?;
            }
        }
        other => return Err(format!("column '{name}' of type {other} has no Avro type")),
    }
    Ok(())
}

/// Row `i` of `batch` as one Avro datum.
pub(crate) fn encode_row(batch: &RecordBatch, i: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(64);
    for (f, c) in batch.schema_ref().fields().iter().zip(batch.columns()) {
        write_value(&mut out, c.as_ref(), i, f.name())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{Decoder, Encoder, Format, OnError};

    /// Columns of every type SeaTunnel's mapping has, nested row included.
    use crate::tests::schema_of as schema;

    fn decoder(schema: Arc<Schema>, on_error: OnError) -> Decoder {
        Decoder {
            schema,
            format: Format::Avro,
            on_error,
        }
    }

    /// SeaTunnel's KafkaIT row (id 7) as its AvroSerializationSchema writes it, byte by
    /// byte from the Avro specification; decoded, then written again to the same bytes.
    #[test]
    fn seatunnels_datum_reads_and_writes_back_byte_for_byte() {
        let s = schema(serde_json::json!({
            "id": "bigint", "c_map": "map<string, smallint>", "c_array": "array<tinyint>",
            "c_string": "string", "c_boolean": "boolean", "c_tinyint": "tinyint",
            "c_smallint": "smallint", "c_int": "int", "c_bigint": "bigint", "c_float": "float",
            "c_double": "double", "c_decimal": "decimal(2, 1)", "c_bytes": "bytes",
            "c_date": "date", "c_timestamp": "timestamp"
        }));
        let mut body = vec![14, 2, 6];
        body.extend(b"key");
        body.extend([2, 0, 2, 2, 0, 12]);
        body.extend(b"string");
        body.extend([0, 2, 2, 2, 2]);
        body.extend(1.1f32.to_le_bytes());
        body.extend(1.1f64.to_le_bytes());
        body.extend([2, 11, 8]);
        body.extend(b"test");
        // 19723 days (2024-01-01) and 1704113963000 ms (12:59:23 that day), zig-zag.
        body.extend([0x96, 0xb4, 0x02, 0xf0, 0xff, 0xdb, 0xd1, 0x98, 0x63]);
        let d = decoder(s.clone(), OnError::Fail)
            .decode("Kafka", &[&body])
            .unwrap();
        let row = ferry_api::value::array_value_to_json(
            &arrow::array::StructArray::from(d.batch.clone()),
            0,
            ferry_api::value::RowStyle::Named,
        );
        assert_eq!(
            row,
            serde_json::json!({
                "id": 7, "c_map": {"key": 1}, "c_array": [1], "c_string": "string",
                "c_boolean": false, "c_tinyint": 1, "c_smallint": 1, "c_int": 1, "c_bigint": 1,
                "c_float": 1.1f32, "c_double": 1.1, "c_decimal": 1.1, "c_bytes": "dGVzdA==",
                "c_date": "2024-01-01", "c_timestamp": "2024-01-01T12:59:23"
            })
        );
        let enc = Encoder {
            format: Format::Avro,
        };
        assert_eq!(enc.encode(&d.batch, 0).unwrap(), body);
    }

    #[test]
    fn nested_rows_round_trip_and_bad_input_fails_or_is_skipped() {
        let s = schema(serde_json::json!({
            "m": "map<string, string>", "a": "array<int>", "d": "decimal(38, 18)",
            "t": "timestamp", "r": {"x": "bigint", "y": "array<string>", "z": "map<string, double>"}
        }));
        let rows = serde_json::json!([
            {"m": {"k": "v", "k2": ""}, "a": [1, -2, 300], "d": "-12345678901234567890.123456789012345678",
             "t": "1969-12-31T23:59:59.999", "r": {"x": -9, "y": ["", "é"], "z": {"n": -0.5}}},
            {"m": {}, "a": [], "d": "0", "t": "2262-04-11T23:47:16", "r": {"x": 0, "y": [], "z": {}}}
        ]);
        let json = Decoder {
            schema: s.clone(),
            format: Format::Json,
            on_error: OnError::Fail,
        };
        let bodies: Vec<String> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.to_string())
            .collect();
        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_bytes()).collect();
        let batch = json.decode("Kafka", &refs).unwrap().batch;
        let enc = Encoder {
            format: Format::Avro,
        };
        let avro: Vec<Vec<u8>> = (0..2).map(|i| enc.encode(&batch, i).unwrap()).collect();
        let mut refs: Vec<&[u8]> = avro.iter().map(Vec::as_slice).collect();
        let back = decoder(s.clone(), OnError::Fail)
            .decode("Kafka", &refs)
            .unwrap()
            .batch;
        assert_eq!(back, batch);
        // Cut short, one byte too many, a bad boolean: errors naming the message, or
        // left out with skip; never a panic.
        let short = &avro[0][..avro[0].len() - 1];
        let mut long = avro[1].clone();
        long.push(0);
        for bad in [short, long.as_slice(), &[]] {
            refs.push(bad);
            let e = decoder(s.clone(), OnError::Fail)
                .decode("Kafka", &refs)
                .unwrap_err();
            assert!(e.to_string().contains("message 3"), "{e}");
            let d = decoder(s.clone(), OnError::Skip)
                .decode("Kafka", &refs)
                .unwrap();
            assert_eq!((d.batch.num_rows(), d.skipped), (2, 1));
            refs.pop();
        }
        // Every prefix of a datum is an error, not a panic.
        for n in 0..avro[0].len() {
            assert!(decode_row(&avro[0][..n], &s).is_err(), "{n}");
        }
        // A null cannot be written (the schema has no unions); time has no Avro type.
        let nulls = json.decode("Kafka", &[br#"{"a": [1]}"#]).unwrap().batch;
        let e = enc.encode(&nulls, 0).unwrap_err();
        assert!(e.contains("column 'm' is null"), "{e}");
        let e = check_schema(&schema(serde_json::json!({"t": "time"}))).unwrap_err();
        assert!(e.contains("column 't'"), "{e}");
        assert!(check_schema(&s).is_ok());
    }

    #[test]
    fn varints_and_decimals_are_avros_and_javas() {
        // Avro's specification: 0 → 00, -1 → 01, 1 → 02, -64 → 7f, 64 → 80 01.
        for (v, bytes) in [
            (0i64, vec![0u8]),
            (-1, vec![1]),
            (1, vec![2]),
            (-64, vec![0x7f]),
            (64, vec![0x80, 1]),
            (i64::MIN, vec![0xff; 9].into_iter().chain([1]).collect()),
        ] {
            let mut out = Vec::new();
            write_long(&mut out, v);
            assert_eq!(out, bytes, "{v}");
            assert_eq!(Reader { body: &out, at: 0 }.long().unwrap(), v);
        }
        // BigInteger.valueOf(n).toByteArray().
        for (v, bytes) in [
            (0i128, vec![0u8]),
            (11, vec![11]),
            (127, vec![0x7f]),
            (128, vec![0, 0x80]),
            (-1, vec![0xff]),
            (-128, vec![0x80]),
            (-129, vec![0xff, 0x7f]),
            (256, vec![1, 0]),
        ] {
            let mut out = Vec::new();
            write_unscaled(&mut out, v);
            assert_eq!(out[1..], bytes, "{v}");
            assert_eq!(unscaled(&bytes).unwrap(), v);
        }
        assert!(unscaled(&[]).is_err() && unscaled(&[0; 17]).is_err());
        // Truncated input is an error, never a panic.
        let mut r = Reader {
            body: &[0x80],
            at: 0,
        };
        assert!(r.long().is_err());
    }
}
