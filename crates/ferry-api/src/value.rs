//! Conversions between JSON values (as written in job files: FakeSource `rows`,
//! Assert `equals_to`, JSON files) and Arrow arrays, following SeaTunnel's textual forms:
//! dates `2012-12-21`, times `12:34:56`, timestamps `2012-12-21T12:34:56` (a space works
//! too), bytes as base64, decimals as numbers or text, rows as positional lists or objects,
//! maps as objects.

use std::sync::Arc;

use arrow::array::*;
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use base64::Engine;
use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use serde_json::{Map, Number, Value};

const UNIX_EPOCH_DAY: i32 = 719_163; // days from 0001-01-01 (CE day 1) to 1970-01-01

/// Days since 1970-01-01 of a `yyyy-MM-dd` date (also `yyyy/MM/dd`, `yyyyMMdd`).
pub fn parse_date(s: &str) -> Option<i32> {
    let s = s.trim();
    if let Some(d) = iso_date(s.as_bytes()) {
        return Some(d);
    }
    let d = NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .or_else(|_| NaiveDate::parse_from_str(s, "%Y/%m/%d"))
        .or_else(|_| NaiveDate::parse_from_str(s, "%Y%m%d"))
        .ok()?;
    Some(chrono::Datelike::num_days_from_ce(&d) - UNIX_EPOCH_DAY)
}

/// Microseconds since midnight of a `HH:mm[:ss[.SSS…]]` time.
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(t) = iso_time(s.as_bytes()) {
        return Some(t);
    }
    let t = NaiveTime::parse_from_str(s, "%H:%M:%S%.f")
        .or_else(|_| NaiveTime::parse_from_str(s, "%H:%M"))
        .ok()?;
    Some(t.num_seconds_from_midnight() as i64 * 1_000_000 + (t.nanosecond() / 1000) as i64)
}

/// Microseconds since 1970-01-01T00:00 of a local date-time (`T` or space between date
/// and time; a date alone is midnight).
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(ts) = iso_timestamp(s.as_bytes()) {
        return Some(ts);
    }
    let dt = NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f"))
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M"))
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M"))
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y/%m/%d %H:%M:%S"))
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y%m%d%H%M%S"))
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })?;
    Some(dt.and_utc().timestamp_micros())
}

// The common forms, read by hand: chrono's `parse_from_str` reads its format string again
// at every call, which was a third of a MariaDB table read's time (text protocol, where
// every date and timestamp is text). Anything else goes to chrono.

fn two(b: &[u8], p: usize) -> Option<u32> {
    let (x, y) = (b[p].wrapping_sub(b'0'), b[p + 1].wrapping_sub(b'0'));
    (x < 10 && y < 10).then(|| u32::from(x) * 10 + u32::from(y))
}

fn ymd(b: &[u8]) -> Option<NaiveDate> {
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let year = two(b, 0)? * 100 + two(b, 2)?;
    NaiveDate::from_ymd_opt(year as i32, two(b, 5)?, two(b, 8)?)
}

/// The nanoseconds of `.f…` (1 to 9 digits) at the start of `b`; 0 when `b` is empty.
fn fraction(b: &[u8]) -> Option<u32> {
    if b.is_empty() {
        return Some(0);
    }
    let frac = &b[1..];
    if b[0] != b'.' || frac.is_empty() || frac.len() > 9 {
        return None;
    }
    let mut nanos = 0u32;
    for c in frac {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        nanos = nanos * 10 + u32::from(d);
    }
    Some(nanos * 10u32.pow(9 - frac.len() as u32))
}

/// `HH:mm:ss` at the start of `b`: seconds since midnight (no leap second).
fn hms(b: &[u8]) -> Option<u32> {
    if b.len() < 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let (h, m, s) = (two(b, 0)?, two(b, 3)?, two(b, 6)?);
    (h <= 23 && m <= 59 && s <= 59).then_some(h * 3600 + m * 60 + s)
}

/// `yyyy-MM-dd` exactly, as [`parse_date`] reads it; `None` for anything else.
pub fn iso_date(b: &[u8]) -> Option<i32> {
    if b.len() != 10 {
        return None;
    }
    Some(chrono::Datelike::num_days_from_ce(&ymd(b)?) - UNIX_EPOCH_DAY)
}

/// `HH:mm:ss[.f…]` (1 to 9 fraction digits) exactly, as [`parse_time`] reads it; `None`
/// for anything else (leap seconds included).
pub fn iso_time(b: &[u8]) -> Option<i64> {
    let secs = hms(b)?;
    let nanos = fraction(&b[8..])?;
    Some(i64::from(secs) * 1_000_000 + i64::from(nanos / 1000))
}

/// `yyyy-MM-dd[T ]HH:mm:ss[.f…]` (1 to 9 fraction digits) exactly, as
/// [`parse_timestamp`] reads it; `None` for anything else (leap seconds included).
pub fn iso_timestamp(b: &[u8]) -> Option<i64> {
    if b.len() < 19 || !matches!(b[10], b'T' | b' ') {
        return None;
    }
    let date = ymd(b)?;
    let secs = hms(&b[11..])?;
    let nanos = fraction(&b[19..])?;
    let days = i64::from(chrono::Datelike::num_days_from_ce(&date) - UNIX_EPOCH_DAY);
    Some((days * 86_400 + i64::from(secs)) * 1_000_000 + i64::from(nanos / 1000))
}

/// The unscaled value of decimal text at `scale` (rounding half up past the scale).
pub fn parse_decimal(s: &str, scale: i8) -> Option<i128> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    // Scientific notation: go through f64 (rare in practice).
    if digits.contains(['e', 'E']) {
        let f: f64 = s.parse().ok()?;
        return Some((f * 10f64.powi(scale as i32)).round() as i128);
    }
    let (int_part, frac_part) = match digits.split_once('.') {
        Some((i, f)) => (i, f),
        None => (digits, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let scale = scale.max(0) as usize;
    let mut v: i128 = 0;
    for b in int_part.bytes() {
        v = v.checked_mul(10)?.checked_add((b - b'0') as i128)?;
    }
    let fb = frac_part.as_bytes();
    for i in 0..scale {
        let d = fb.get(i).map(|b| (b - b'0') as i128).unwrap_or(0);
        v = v.checked_mul(10)?.checked_add(d)?;
    }
    if fb.get(scale).is_some_and(|b| *b >= b'5') {
        v += 1;
    }
    Some(if neg { -v } else { v })
}

/// Text of an unscaled decimal.
pub fn format_decimal(v: i128, scale: i8) -> String {
    if scale <= 0 {
        return v.to_string();
    }
    let neg = v < 0;
    let digits = v.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = if digits.len() <= scale {
        format!("{}{}", "0".repeat(scale - digits.len() + 1), digits)
    } else {
        digits
    };
    let (i, f) = padded.split_at(padded.len() - scale);
    format!("{}{}.{}", if neg { "-" } else { "" }, i, f)
}

/// `yyyy-MM-dd` text of days since the epoch.
pub fn format_date(days: i32) -> String {
    NaiveDate::from_num_days_from_ce_opt(days + UNIX_EPOCH_DAY)
        .map(|d| d.to_string())
        .unwrap_or_else(|| days.to_string())
}

/// `HH:mm:ss[.ffffff]` text of microseconds since midnight.
pub fn format_time(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let t = NaiveTime::from_num_seconds_from_midnight_opt(secs as u32, (frac * 1000) as u32);
    match t {
        Some(t) if frac == 0 => t.format("%H:%M:%S").to_string(),
        Some(t) => t.format("%H:%M:%S%.6f").to_string(),
        None => micros.to_string(),
    }
}

/// `yyyy-MM-ddTHH:mm:ss[.ffffff]` text of microseconds since the epoch.
pub fn format_timestamp(micros: i64) -> String {
    match chrono::DateTime::from_timestamp_micros(micros) {
        Some(dt) if micros.rem_euclid(1_000_000) == 0 => {
            dt.naive_utc().format("%Y-%m-%dT%H:%M:%S").to_string()
        }
        Some(dt) => dt.naive_utc().format("%Y-%m-%dT%H:%M:%S%.6f").to_string(),
        None => micros.to_string(),
    }
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn mismatch(v: &Value, dt: &DataType) -> String {
    format!(
        "value {v} does not fit type {}",
        crate::types::type_name(dt)
    )
}

/// Builds an Arrow array of type `dt` from JSON values; `null` gives a null.
pub fn json_to_array(values: &[&Value], dt: &DataType) -> Result<ArrayRef, String> {
    macro_rules! ints {
        ($arr:ty, $t:ty) => {{
            let mut out: Vec<Option<$t>> = Vec::with_capacity(values.len());
            for v in values {
                out.push(match v {
                    Value::Null => None,
                    other => Some(
                        text_of(other)
                            .and_then(|s| {
                                s.trim().parse::<$t>().ok().or_else(|| {
                                    s.trim()
                                        .parse::<f64>()
                                        .ok()
                                        .filter(|f| f.fract() == 0.0)
                                        .map(|f| f as $t)
                                })
                            })
                            .ok_or_else(|| mismatch(other, dt))?,
                    ),
                });
            }
            Arc::new(<$arr>::from(out)) as ArrayRef
        }};
    }
    macro_rules! floats {
        ($arr:ty, $t:ty) => {{
            let mut out: Vec<Option<$t>> = Vec::with_capacity(values.len());
            for v in values {
                out.push(match v {
                    Value::Null => None,
                    other => Some(
                        text_of(other)
                            .and_then(|s| s.trim().parse::<$t>().ok())
                            .ok_or_else(|| mismatch(other, dt))?,
                    ),
                });
            }
            Arc::new(<$arr>::from(out)) as ArrayRef
        }};
    }
    macro_rules! parsed {
        ($arr:ty, $f:expr) => {{
            let mut out = Vec::with_capacity(values.len());
            for v in values {
                out.push(match v {
                    Value::Null => None,
                    other => Some(
                        text_of(other)
                            .and_then(|s| $f(&s))
                            .ok_or_else(|| mismatch(other, dt))?,
                    ),
                });
            }
            out
        }};
    }
    Ok(match dt {
        DataType::Null => Arc::new(NullArray::new(values.len())),
        DataType::Boolean => {
            let mut out = Vec::with_capacity(values.len());
            for v in values {
                out.push(match v {
                    Value::Null => None,
                    Value::Bool(b) => Some(*b),
                    Value::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
                    Value::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
                    other => return Err(mismatch(other, dt)),
                });
            }
            Arc::new(BooleanArray::from(out))
        }
        DataType::Int8 => ints!(Int8Array, i8),
        DataType::Int16 => ints!(Int16Array, i16),
        DataType::Int32 => ints!(Int32Array, i32),
        DataType::Int64 => ints!(Int64Array, i64),
        DataType::Float32 => floats!(Float32Array, f32),
        DataType::Float64 => floats!(Float64Array, f64),
        DataType::Utf8 => {
            let out: Vec<Option<String>> = values
                .iter()
                .map(|v| match v {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                })
                .collect();
            Arc::new(StringArray::from(out))
        }
        DataType::Binary => {
            let out = parsed!(BinaryArray, |s: &str| {
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .ok()
                    .or_else(|| Some(s.as_bytes().to_vec()))
            });
            Arc::new(BinaryArray::from_iter(out))
        }
        DataType::Date32 => Arc::new(Date32Array::from(parsed!(Date32Array, parse_date))),
        DataType::Time64(TimeUnit::Microsecond) => Arc::new(Time64MicrosecondArray::from(parsed!(
            Time64MicrosecondArray,
            parse_time
        ))),
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let a = TimestampMicrosecondArray::from(parsed!(
                TimestampMicrosecondArray,
                parse_timestamp
            ));
            Arc::new(a.with_timezone_opt(tz.clone()))
        }
        DataType::Decimal128(p, s) => {
            let scale = *s;
            let out = parsed!(Decimal128Array, |t: &str| parse_decimal(t, scale));
            Arc::new(
                Decimal128Array::from(out)
                    .with_precision_and_scale(*p, *s)
                    .map_err(|e| e.to_string())?,
            )
        }
        DataType::List(item) => {
            let mut offsets = Vec::with_capacity(values.len() + 1);
            offsets.push(0i32);
            let mut children: Vec<&Value> = Vec::new();
            let mut valid = Vec::with_capacity(values.len());
            for v in values {
                match v {
                    Value::Null => valid.push(false),
                    Value::Array(items) => {
                        children.extend(items.iter());
                        valid.push(true);
                    }
                    other => return Err(mismatch(other, dt)),
                }
                offsets.push(children.len() as i32);
            }
            let child = json_to_array(&children, item.data_type())?;
            Arc::new(
                ListArray::try_new(
                    item.clone(),
                    OffsetBuffer::new(offsets.into()),
                    child,
                    Some(NullBuffer::from(valid)),
                )
                .map_err(|e| e.to_string())?,
            )
        }
        DataType::Map(entries, sorted) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(format!("unsupported map type {dt}"));
            };
            let mut offsets = Vec::with_capacity(values.len() + 1);
            offsets.push(0i32);
            let mut keys: Vec<Value> = Vec::new();
            let mut vals: Vec<&Value> = Vec::new();
            let mut valid = Vec::with_capacity(values.len());
            for v in values {
                match v {
                    Value::Null => valid.push(false),
                    Value::Object(m) => {
                        for (k, val) in m {
                            keys.push(Value::String(k.clone()));
                            vals.push(val);
                        }
                        valid.push(true);
                    }
                    other => return Err(mismatch(other, dt)),
                }
                offsets.push(keys.len() as i32);
            }
            let key_refs: Vec<&Value> = keys.iter().collect();
            let k = json_to_array(&key_refs, kv[0].data_type())?;
            let val = json_to_array(&vals, kv[1].data_type())?;
            let st =
                StructArray::try_new(kv.clone(), vec![k, val], None).map_err(|e| e.to_string())?;
            Arc::new(
                MapArray::try_new(
                    entries.clone(),
                    OffsetBuffer::new(offsets.into()),
                    st,
                    Some(NullBuffer::from(valid)),
                    *sorted,
                )
                .map_err(|e| e.to_string())?,
            )
        }
        DataType::Struct(fields) => struct_from_json(values, fields)?,
        other => return Err(format!("unsupported type {other}")),
    })
}

fn struct_from_json(values: &[&Value], fields: &Fields) -> Result<ArrayRef, String> {
    let mut columns: Vec<Vec<&Value>> = vec![Vec::with_capacity(values.len()); fields.len()];
    let mut valid = Vec::with_capacity(values.len());
    for v in values {
        match v {
            Value::Null => {
                valid.push(false);
                for c in columns.iter_mut() {
                    c.push(&Value::Null);
                }
            }
            Value::Array(items) => {
                if items.len() != fields.len() {
                    return Err(format!(
                        "a row of {} fields was given {} values: {v}",
                        fields.len(),
                        items.len()
                    ));
                }
                valid.push(true);
                for (c, item) in columns.iter_mut().zip(items) {
                    c.push(item);
                }
            }
            Value::Object(m) => {
                valid.push(true);
                for (c, f) in columns.iter_mut().zip(fields.iter()) {
                    c.push(object_field(m, f.name()).unwrap_or(&Value::Null));
                }
            }
            other => return Err(format!("value {other} does not fit a row")),
        }
    }
    let arrays = columns
        .iter()
        .zip(fields.iter())
        .map(|(c, f)| {
            json_to_array(c, f.data_type()).map_err(|e| format!("field '{}': {e}", f.name()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(
        StructArray::try_new(fields.clone(), arrays, Some(NullBuffer::from(valid)))
            .map_err(|e| e.to_string())?,
    ))
}

/// A field of a JSON object by name, exact first, then ignoring case.
pub fn object_field<'a>(m: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    m.get(name).or_else(|| {
        m.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

/// How [`array_value_to_json`] writes a nested row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowStyle {
    /// As a list of values in field order (SeaTunnel's `equals_to` and `rows` forms).
    Positional,
    /// As an object keyed by field name (JSON files).
    Named,
}

fn number_from_text(s: String) -> Value {
    s.parse::<Number>()
        .map(Value::Number)
        .unwrap_or(Value::String(s))
}

/// The JSON form of row `i` of `array` (the inverse of [`json_to_array`]).
pub fn array_value_to_json(array: &dyn Array, i: usize, style: RowStyle) -> Value {
    if array.is_null(i) {
        return Value::Null;
    }
    macro_rules! prim {
        ($t:ty) => {
            Value::from(array.as_any().downcast_ref::<$t>().map(|a| a.value(i)))
        };
    }
    match array.data_type() {
        DataType::Null => Value::Null,
        DataType::Boolean => prim!(BooleanArray),
        DataType::Int8 => prim!(Int8Array),
        DataType::Int16 => prim!(Int16Array),
        DataType::Int32 => prim!(Int32Array),
        DataType::Int64 => prim!(Int64Array),
        DataType::UInt8 => prim!(UInt8Array),
        DataType::UInt16 => prim!(UInt16Array),
        DataType::UInt32 => prim!(UInt32Array),
        DataType::UInt64 => prim!(UInt64Array),
        // Shortest text that reads back as the same float, as Java prints it.
        DataType::Float32 => number_from_text(
            array
                .as_primitive::<arrow::datatypes::Float32Type>()
                .value(i)
                .to_string(),
        ),
        DataType::Float64 => number_from_text(
            array
                .as_primitive::<arrow::datatypes::Float64Type>()
                .value(i)
                .to_string(),
        ),
        DataType::Utf8 => Value::String(array.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Value::String(array.as_string::<i64>().value(i).to_string()),
        DataType::Utf8View => Value::String(array.as_string_view().value(i).to_string()),
        DataType::Binary => Value::String(
            base64::engine::general_purpose::STANDARD.encode(array.as_binary::<i32>().value(i)),
        ),
        DataType::LargeBinary => Value::String(
            base64::engine::general_purpose::STANDARD.encode(array.as_binary::<i64>().value(i)),
        ),
        DataType::Decimal128(_, s) => number_from_text(format_decimal(
            array
                .as_primitive::<arrow::datatypes::Decimal128Type>()
                .value(i),
            *s,
        )),
        DataType::Date32 => Value::String(format_date(
            array
                .as_primitive::<arrow::datatypes::Date32Type>()
                .value(i),
        )),
        DataType::Time64(TimeUnit::Microsecond) => Value::String(format_time(
            array
                .as_primitive::<arrow::datatypes::Time64MicrosecondType>()
                .value(i),
        )),
        DataType::Timestamp(TimeUnit::Microsecond, _) => Value::String(format_timestamp(
            array
                .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(i),
        )),
        DataType::List(_) => {
            let l = array.as_list::<i32>();
            let child = l.value(i);
            Value::Array(
                (0..child.len())
                    .map(|j| array_value_to_json(child.as_ref(), j, style))
                    .collect(),
            )
        }
        DataType::Map(_, _) => {
            let m = array.as_map();
            let entries = m.value(i);
            let keys = entries.column(0);
            let vals = entries.column(1);
            let mut out = Map::new();
            for j in 0..entries.len() {
                let k = match array_value_to_json(keys.as_ref(), j, style) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(k, array_value_to_json(vals.as_ref(), j, style));
            }
            Value::Object(out)
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            match style {
                RowStyle::Positional => Value::Array(
                    s.columns()
                        .iter()
                        .map(|c| array_value_to_json(c.as_ref(), i, style))
                        .collect(),
                ),
                RowStyle::Named => Value::Object(
                    fields
                        .iter()
                        .zip(s.columns())
                        .map(|(f, c)| (f.name().clone(), array_value_to_json(c.as_ref(), i, style)))
                        .collect(),
                ),
            }
        }
        _ => match arrow::util::display::array_value_to_string(array, i) {
            Ok(s) => Value::String(s),
            Err(_) => Value::Null,
        },
    }
}

/// A field with Ferry's defaults (nullable).
pub fn field(name: &str, dt: DataType) -> Field {
    Field::new(name, dt, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::parse_type;
    use serde_json::json;

    /// What chrono alone makes of a date-time, date or time.
    fn chrono_timestamp(s: &str) -> Option<i64> {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
            .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f"))
            .ok()
            .map(|dt| dt.and_utc().timestamp_micros())
    }

    #[test]
    fn the_forms_read_by_hand_match_chrono() {
        for s in [
            "2024-02-24T14:11:08",
            "2024-02-24 14:11:08.1",
            "0001-01-01 00:00:00.000000001",
            "1960-06-30T23:59:59.999999",
            "1969-12-31 23:59:59.5",
            "9999-12-31 23:59:59",
            "2024-02-29 00:00:00.123456789",
        ] {
            assert_eq!(iso_timestamp(s.as_bytes()), chrono_timestamp(s), "{s}");
            assert!(iso_timestamp(s.as_bytes()).is_some(), "{s}");
        }
        for s in [
            "2024-02-24 14:11:60",
            "2024-02-24 14:11",
            "2024-02-24x14:11:08",
            "2024-02-24 14:11:08.",
            "2024-02-24 14:11:08.1234567890",
            "2024-02-24 24:00:00",
            "2023-02-29 00:00:00",
            "2024-02-24 14:11:08Z",
        ] {
            assert_eq!(iso_timestamp(s.as_bytes()), None, "{s}");
        }
        // What the fast path leaves to chrono still reads.
        assert_eq!(
            parse_timestamp("2024-02-24 14:11"),
            parse_timestamp("2024-02-24 14:11:00")
        );
        assert!(parse_timestamp("2024-02-24 14:11:08.").is_none());
        for s in ["2024-02-29", "1900-01-01", "0000-01-01"] {
            let chrono = NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .map(|d| chrono::Datelike::num_days_from_ce(&d) - UNIX_EPOCH_DAY);
            assert_eq!(iso_date(s.as_bytes()), chrono, "{s}");
        }
        assert_eq!(iso_date(b"2023-02-29"), None);
        assert_eq!(parse_date("20240229"), parse_date("2024-02-29"));
        for s in [
            "00:00:00",
            "12:34:56.5",
            "23:59:59.999999999",
            "07:08:09.000001",
        ] {
            let chrono = NaiveTime::parse_from_str(s, "%H:%M:%S%.f").ok().map(|t| {
                t.num_seconds_from_midnight() as i64 * 1_000_000 + (t.nanosecond() / 1000) as i64
            });
            assert_eq!(iso_time(s.as_bytes()), chrono, "{s}");
            assert!(chrono.is_some());
        }
        for s in ["24:00:00", "12:34", "12:34:56.", "838:59:59", "-01:00:00"] {
            assert_eq!(iso_time(s.as_bytes()), None, "{s}");
        }
        assert_eq!(parse_time("12:34"), parse_time("12:34:00"));
    }

    fn round_trip(t: &str, v: Value) {
        let dt = parse_type(t).unwrap();
        let a = json_to_array(&[&v, &Value::Null], &dt).unwrap();
        assert_eq!(a.data_type(), &dt);
        assert_eq!(
            array_value_to_json(a.as_ref(), 0, RowStyle::Positional),
            v,
            "{t}"
        );
        assert!(a.is_null(1));
    }

    #[test]
    fn every_type_round_trips_through_json() {
        round_trip("string", json!("AAA"));
        round_trip("boolean", json!(false));
        round_trip("tinyint", json!(1));
        round_trip("smallint", json!(-3));
        round_trip("int", json!(333));
        round_trip("bigint", json!(323232));
        round_trip("float", json!(3.1));
        round_trip("double", json!(9.33333));
        round_trip("decimal(30, 8)", json!(99999.99999999));
        round_trip("date", json!("2012-12-21"));
        round_trip("timestamp", json!("2012-12-21T12:34:56"));
        round_trip("time", json!("12:34:56"));
        round_trip("bytes", json!("bWlJWmo="));
        round_trip("array<int>", json!([0, 1, 2]));
        round_trip("map<date, string>", json!({"2024-01-26": "v0"}));
        round_trip(
            "map<string, {c_int = int, c_string = string}>",
            json!({"k1": [123, "BBB-BB"]}),
        );
        round_trip("{a = int, b = array<string>}", json!([1, ["x", null]]));
    }

    #[test]
    fn mismatches_name_the_value_and_type() {
        let e = json_to_array(&[&json!("abc")], &DataType::Int32).unwrap_err();
        assert_eq!(e, "value \"abc\" does not fit type int");
    }

    #[test]
    fn decimals_parse_exactly() {
        assert_eq!(parse_decimal("99999.99999999", 8), Some(9_999_999_999_999));
        assert_eq!(parse_decimal("-1.5", 0), Some(-2));
        assert_eq!(format_decimal(-5, 3), "-0.005");
        assert_eq!(parse_decimal("1x", 2), None);
    }

    #[test]
    fn timestamps_accept_t_or_space() {
        assert_eq!(
            parse_timestamp("2023-05-08 16:08:51"),
            parse_timestamp("2023-05-08T16:08:51")
        );
        assert_eq!(
            format_timestamp(parse_timestamp("2022-01-26T17:39:00.5").unwrap()),
            "2022-01-26T17:39:00.500000"
        );
    }
}
