//! Values as SeaTunnel's Java code prints them (`String.valueOf` of the Java object a
//! SeaTunnel row holds): `3.1` and `1.0E10` for floats, `0E-8` for a zero `decimal(30, 8)`,
//! `12:34` for a `LocalTime` without seconds, `[1, 2]` for arrays and nested rows, signed
//! bytes for `bytes`, and JSON (`{"k":"v"}`) for maps, as the Console sink does.
//!
//! The Console sink formats whole columns at once ([`append_column`]); the Assert sink
//! uses [`write_value`] for the text length rules.

use std::fmt::Write;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, Time64MicrosecondType, TimeUnit, TimestampMicrosecondType, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use base64::Engine;

const MICROS_PER_DAY: i64 = 86_400_000_000;
const UNIX_EPOCH_DAY_CE: i32 = 719_163;

/// Appends the Java text of row `i` of `array` to each line: `lines[r]` gets row `r`.
/// The column's type is matched once, then its rows are written in a tight loop.
/// `lines` must have exactly `array.len()` entries.
pub fn append_column(array: &dyn Array, lines: &mut [String]) {
    debug_assert_eq!(array.len(), lines.len());
    // Null slots print as `null`; the typed loops below only see valid slots.
    let nulls = array.logical_nulls();
    macro_rules! each {
        ($values:expr, |$out:ident, $v:ident| $body:expr) => {{
            let values = $values;
            for (r, $out) in lines.iter_mut().enumerate() {
                if nulls.as_ref().is_some_and(|n| n.is_null(r)) {
                    $out.push_str("null");
                } else {
                    let $v = values.value(r);
                    $body;
                }
            }
        }};
    }
    macro_rules! int {
        ($t:ty) => {
            each!(array.as_primitive::<$t>(), |out, v| {
                let _ = write!(out, "{v}");
            })
        };
    }
    match array.data_type() {
        DataType::Null => lines.iter_mut().for_each(|l| l.push_str("null")),
        DataType::Boolean => each!(array.as_boolean(), |out, v| out.push_str(if v {
            "true"
        } else {
            "false"
        })),
        DataType::Int8 => int!(Int8Type),
        DataType::Int16 => int!(Int16Type),
        DataType::Int32 => int!(Int32Type),
        DataType::Int64 => int!(Int64Type),
        DataType::UInt8 => int!(UInt8Type),
        DataType::UInt16 => int!(UInt16Type),
        DataType::UInt32 => int!(UInt32Type),
        DataType::UInt64 => int!(UInt64Type),
        DataType::Float32 => each!(
            array.as_primitive::<Float32Type>(),
            |out, v| write_java_f32(out, v)
        ),
        DataType::Float64 => each!(
            array.as_primitive::<Float64Type>(),
            |out, v| write_java_f64(out, v)
        ),
        DataType::Utf8 => each!(array.as_string::<i32>(), |out, v| out.push_str(v)),
        DataType::LargeUtf8 => each!(array.as_string::<i64>(), |out, v| out.push_str(v)),
        DataType::Utf8View => each!(array.as_string_view(), |out, v| out.push_str(v)),
        DataType::Decimal128(_, s) => {
            let scale = *s;
            each!(array.as_primitive::<Decimal128Type>(), |out, v| {
                write_big_decimal(out, v, scale)
            })
        }
        DataType::Date32 => each!(array.as_primitive::<Date32Type>(), |out, v| {
            write_local_date(out, v)
        }),
        DataType::Time64(TimeUnit::Microsecond) => {
            each!(array.as_primitive::<Time64MicrosecondType>(), |out, v| {
                write_local_time(out, v)
            })
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let zoned = tz.is_some();
            each!(
                array.as_primitive::<TimestampMicrosecondType>(),
                |out, v| write_local_date_time(out, v, zoned)
            )
        }
        // Nested and rare types: one value at a time.
        _ => {
            for (r, out) in lines.iter_mut().enumerate() {
                write_value(out, array, r);
            }
        }
    }
}

/// Appends the Java text of row `i` of `array` (`null` for a null).
pub fn write_value(out: &mut String, array: &dyn Array, i: usize) {
    if !array.is_valid(i) || matches!(array.data_type(), DataType::Null) {
        out.push_str("null");
        return;
    }
    match array.data_type() {
        DataType::Boolean => out.push_str(if array.as_boolean().value(i) {
            "true"
        } else {
            "false"
        }),
        DataType::Int8 => push_display(out, array.as_primitive::<Int8Type>().value(i)),
        DataType::Int16 => push_display(out, array.as_primitive::<Int16Type>().value(i)),
        DataType::Int32 => push_display(out, array.as_primitive::<Int32Type>().value(i)),
        DataType::Int64 => push_display(out, array.as_primitive::<Int64Type>().value(i)),
        DataType::UInt8 => push_display(out, array.as_primitive::<UInt8Type>().value(i)),
        DataType::UInt16 => push_display(out, array.as_primitive::<UInt16Type>().value(i)),
        DataType::UInt32 => push_display(out, array.as_primitive::<UInt32Type>().value(i)),
        DataType::UInt64 => push_display(out, array.as_primitive::<UInt64Type>().value(i)),
        DataType::Float32 => write_java_f32(out, array.as_primitive::<Float32Type>().value(i)),
        DataType::Float64 => write_java_f64(out, array.as_primitive::<Float64Type>().value(i)),
        DataType::Utf8 => out.push_str(array.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => out.push_str(array.as_string::<i64>().value(i)),
        DataType::Utf8View => out.push_str(array.as_string_view().value(i)),
        DataType::Decimal128(_, s) => {
            write_big_decimal(out, array.as_primitive::<Decimal128Type>().value(i), *s)
        }
        DataType::Date32 => write_local_date(out, array.as_primitive::<Date32Type>().value(i)),
        DataType::Time64(TimeUnit::Microsecond) => {
            write_local_time(out, array.as_primitive::<Time64MicrosecondType>().value(i))
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => write_local_date_time(
            out,
            array.as_primitive::<TimestampMicrosecondType>().value(i),
            tz.is_some(),
        ),
        // Java prints a byte[] element by element, as signed bytes.
        DataType::Binary => write_signed_bytes(out, array.as_binary::<i32>().value(i)),
        DataType::LargeBinary => write_signed_bytes(out, array.as_binary::<i64>().value(i)),
        DataType::List(_) => {
            let items = array.as_list::<i32>().value(i);
            write_list(out, items.as_ref(), 0..items.len());
        }
        DataType::LargeList(_) => {
            let items = array.as_list::<i64>().value(i);
            write_list(out, items.as_ref(), 0..items.len());
        }
        // SeaTunnel's Console sink prints maps as JSON.
        DataType::Map(_, _) => write_json(out, array, i),
        DataType::Struct(_) => {
            let s = array.as_struct();
            out.push('[');
            for (j, c) in s.columns().iter().enumerate() {
                if j > 0 {
                    out.push_str(", ");
                }
                write_value(out, c.as_ref(), i);
            }
            out.push(']');
        }
        _ => match arrow::util::display::array_value_to_string(array, i) {
            Ok(s) => out.push_str(&s),
            Err(_) => out.push_str("null"),
        },
    }
}

fn push_display(out: &mut String, v: impl std::fmt::Display) {
    let _ = write!(out, "{v}");
}

fn write_list(out: &mut String, items: &dyn Array, range: std::ops::Range<usize>) {
    out.push('[');
    for (n, j) in range.enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        write_value(out, items, j);
    }
    out.push(']');
}

fn write_signed_bytes(out: &mut String, bytes: &[u8]) {
    out.push('[');
    for (n, b) in bytes.iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        push_display(out, *b as i8);
    }
    out.push(']');
}

/// Appends row `i` of `array` as JSON, the way SeaTunnel's Jackson mapper writes map
/// contents: numbers and booleans bare, text quoted, bytes as base64, arrays as lists;
/// dates and times as their text, nested rows as lists of their fields.
pub fn write_json(out: &mut String, array: &dyn Array, i: usize) {
    if !array.is_valid(i) || matches!(array.data_type(), DataType::Null) {
        out.push_str("null");
        return;
    }
    match array.data_type() {
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Decimal128(_, _) => write_value(out, array, i),
        DataType::Float32 | DataType::Float64 => {
            let finite = match array.data_type() {
                DataType::Float32 => array.as_primitive::<Float32Type>().value(i).is_finite(),
                _ => array.as_primitive::<Float64Type>().value(i).is_finite(),
            };
            // NaN and infinities are not JSON numbers: write them as text.
            if !finite {
                out.push('"');
            }
            write_value(out, array, i);
            if !finite {
                out.push('"');
            }
        }
        DataType::Binary => write_json_str(
            out,
            &base64::engine::general_purpose::STANDARD.encode(array.as_binary::<i32>().value(i)),
        ),
        DataType::LargeBinary => write_json_str(
            out,
            &base64::engine::general_purpose::STANDARD.encode(array.as_binary::<i64>().value(i)),
        ),
        DataType::List(_) | DataType::LargeList(_) => {
            let items = match array.data_type() {
                DataType::List(_) => array.as_list::<i32>().value(i),
                _ => array.as_list::<i64>().value(i),
            };
            out.push('[');
            for j in 0..items.len() {
                if j > 0 {
                    out.push(',');
                }
                write_json(out, items.as_ref(), j);
            }
            out.push(']');
        }
        DataType::Map(_, _) => {
            let entries = array.as_map().value(i);
            let (keys, values) = (entries.column(0), entries.column(1));
            out.push('{');
            let mut key = String::new();
            for j in 0..entries.len() {
                if j > 0 {
                    out.push(',');
                }
                key.clear();
                write_value(&mut key, keys.as_ref(), j);
                write_json_str(out, &key);
                out.push(':');
                write_json(out, values.as_ref(), j);
            }
            out.push('}');
        }
        DataType::Struct(_) => {
            out.push('[');
            for (j, c) in array.as_struct().columns().iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                write_json(out, c.as_ref(), i);
            }
            out.push(']');
        }
        _ => {
            let mut text = String::new();
            write_value(&mut text, array, i);
            write_json_str(out, &text);
        }
    }
}

/// Appends `s` as a quoted JSON string.
pub fn write_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends a `float` as Java's `Float.toString` does (`3.1`, `1.0`, `1.0E10`).
pub fn write_java_f32(out: &mut String, v: f32) {
    if v.is_nan() || v.is_infinite() || v == 0.0 {
        write_java_special(out, v.is_nan(), v.is_sign_negative(), v.is_infinite());
    } else {
        // `{:e}` gives the shortest digits that read back as the same f32, as Java does.
        let mut buf = StackBuf::new();
        let _ = write!(buf, "{v:e}");
        write_java_sci(out, buf.as_str());
    }
}

/// Appends a `double` as Java's `Double.toString` does (`9.33333`, `1.0E-5`).
pub fn write_java_f64(out: &mut String, v: f64) {
    if v.is_nan() || v.is_infinite() || v == 0.0 {
        write_java_special(out, v.is_nan(), v.is_sign_negative(), v.is_infinite());
    } else {
        let mut buf = StackBuf::new();
        let _ = write!(buf, "{v:e}");
        write_java_sci(out, buf.as_str());
    }
}

fn write_java_special(out: &mut String, nan: bool, negative: bool, infinite: bool) {
    out.push_str(match (nan, negative, infinite) {
        (true, _, _) => "NaN",
        (false, true, true) => "-Infinity",
        (false, false, true) => "Infinity",
        (false, true, false) => "-0.0",
        (false, false, false) => "0.0",
    });
}

/// Rewrites Rust's shortest scientific form (`-1.234e-5`) in Java's layout: plain
/// decimals for 10^-3 ≤ |v| < 10^7, `d.dddEn` otherwise, always a digit after the point.
fn write_java_sci(out: &mut String, sci: &str) {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let (first, rest) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if negative {
        out.push('-');
    }
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            // Digits before the point: the first, then `exp` more (padded with zeros).
            let e = exp as usize;
            out.push_str(first);
            let take = rest.len().min(e);
            out.push_str(&rest[..take]);
            for _ in take..e {
                out.push('0');
            }
            out.push('.');
            if rest.len() > e {
                out.push_str(&rest[e..]);
            } else {
                out.push('0');
            }
        } else {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(first);
            out.push_str(rest);
        }
    } else {
        out.push_str(first);
        out.push('.');
        out.push_str(if rest.is_empty() { "0" } else { rest });
        let _ = write!(out, "E{exp}");
    }
}

/// Appends an unscaled decimal as Java's `BigDecimal.toString` does: plain when the
/// exponent is small (`99999.99999999`), scientific otherwise (`0E-8`, `1.5E-7`).
pub fn write_big_decimal(out: &mut String, unscaled: i128, scale: i8) {
    let mut digits = StackBuf::new();
    let _ = write!(digits, "{}", unscaled.unsigned_abs());
    let coeff = digits.as_str();
    let scale = scale as i64;
    let adjusted = -scale + (coeff.len() as i64 - 1);
    if unscaled < 0 {
        out.push('-');
    }
    if scale >= 0 && adjusted >= -6 {
        let s = scale as usize;
        if s == 0 {
            out.push_str(coeff);
        } else if coeff.len() > s {
            out.push_str(&coeff[..coeff.len() - s]);
            out.push('.');
            out.push_str(&coeff[coeff.len() - s..]);
        } else {
            out.push_str("0.");
            for _ in coeff.len()..s {
                out.push('0');
            }
            out.push_str(coeff);
        }
    } else {
        out.push_str(&coeff[..1]);
        if coeff.len() > 1 {
            out.push('.');
            out.push_str(&coeff[1..]);
        }
        out.push('E');
        if adjusted >= 0 {
            out.push('+');
        }
        push_display(out, adjusted);
    }
}

/// Appends days since 1970-01-01 as `LocalDate.toString` (`2012-12-21`).
pub fn write_local_date(out: &mut String, days: i32) {
    match days
        .checked_add(UNIX_EPOCH_DAY_CE)
        .and_then(chrono::NaiveDate::from_num_days_from_ce_opt)
    {
        Some(d) => push_display(out, d),
        None => push_display(out, days),
    }
}

/// Appends microseconds since midnight as `LocalTime.toString` (`12:34`, `12:34:56`,
/// `12:34:56.500`, `12:34:56.000001`).
pub fn write_local_time(out: &mut String, micros: i64) {
    let micros = micros.rem_euclid(MICROS_PER_DAY);
    let secs = micros / 1_000_000;
    let frac = micros % 1_000_000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let _ = write!(out, "{h:02}:{m:02}");
    if s > 0 || frac > 0 {
        let _ = write!(out, ":{s:02}");
        if frac > 0 {
            if frac % 1000 == 0 {
                let _ = write!(out, ".{:03}", frac / 1000);
            } else {
                let _ = write!(out, ".{frac:06}");
            }
        }
    }
}

/// Appends microseconds since the epoch as `LocalDateTime.toString`
/// (`2012-12-21T12:34:56`), with `Z` for a zoned timestamp (`OffsetDateTime` in UTC).
pub fn write_local_date_time(out: &mut String, micros: i64, zoned: bool) {
    let days = micros.div_euclid(MICROS_PER_DAY);
    match i32::try_from(days) {
        Ok(d) => write_local_date(out, d),
        Err(_) => push_display(out, days),
    }
    out.push('T');
    write_local_time(out, micros.rem_euclid(MICROS_PER_DAY));
    if zoned {
        out.push('Z');
    }
}

/// A small fixed buffer for number text, so that formatting allocates nothing.
struct StackBuf {
    buf: [u8; 64],
    len: usize,
}

impl StackBuf {
    fn new() -> Self {
        StackBuf {
            buf: [0; 64],
            len: 0,
        }
    }
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::ArrayRef;
    use ferry_api::types::parse_type;
    use ferry_api::value::json_to_array;
    use serde_json::{json, Value};

    fn f32s(v: f32) -> String {
        let mut s = String::new();
        write_java_f32(&mut s, v);
        s
    }
    fn f64s(v: f64) -> String {
        let mut s = String::new();
        write_java_f64(&mut s, v);
        s
    }
    fn dec(v: i128, scale: i8) -> String {
        let mut s = String::new();
        write_big_decimal(&mut s, v, scale);
        s
    }
    fn column(t: &str, values: &[Value]) -> ArrayRef {
        let refs: Vec<&Value> = values.iter().collect();
        json_to_array(&refs, &parse_type(t).unwrap()).unwrap()
    }
    fn texts(t: &str, values: &[Value]) -> Vec<String> {
        let a = column(t, values);
        let mut lines = vec![String::new(); a.len()];
        append_column(a.as_ref(), &mut lines);
        // The per-value path must agree with the column path.
        for (i, l) in lines.iter().enumerate() {
            let mut one = String::new();
            write_value(&mut one, a.as_ref(), i);
            assert_eq!(&one, l, "{t} row {i}");
        }
        lines
    }

    #[test]
    fn floats_print_as_java_does() {
        assert_eq!(f32s(3.1), "3.1");
        assert_eq!(f32s(1.0), "1.0");
        assert_eq!(f32s(-42.5), "-42.5");
        assert_eq!(f32s(1e10), "1.0E10");
        assert_eq!(f32s(0.0), "0.0");
        assert_eq!(f64s(9.33333), "9.33333");
        assert_eq!(f64s(1234567.0), "1234567.0");
        assert_eq!(f64s(12345678.9), "1.23456789E7");
        assert_eq!(f64s(0.001), "0.001");
        assert_eq!(f64s(0.0001), "1.0E-4");
        assert_eq!(f64s(-1.5e-5), "-1.5E-5");
        assert_eq!(f64s(100.0), "100.0");
        assert_eq!(f64s(f64::NAN), "NaN");
        assert_eq!(f64s(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(f64s(-0.0), "-0.0");
    }

    #[test]
    fn decimals_print_as_big_decimal_does() {
        assert_eq!(dec(9_999_999_999_999, 8), "99999.99999999");
        assert_eq!(dec(0, 8), "0E-8");
        assert_eq!(dec(1, 8), "1E-8");
        assert_eq!(dec(15, 8), "1.5E-7");
        assert_eq!(dec(-5, 3), "-0.005");
        assert_eq!(dec(1234, 0), "1234");
        assert_eq!(dec(12, 2), "0.12");
        assert_eq!(dec(-12345, 2), "-123.45");
    }

    #[test]
    fn temporal_values_print_as_java_time_does() {
        assert_eq!(texts("date", &[json!("2012-12-21")]), ["2012-12-21"]);
        assert_eq!(
            texts(
                "time",
                &[
                    json!("12:34:56"),
                    json!("12:34:00"),
                    json!("12:34:56.5"),
                    json!("00:00:00.000001")
                ]
            ),
            ["12:34:56", "12:34", "12:34:56.500", "00:00:00.000001"]
        );
        assert_eq!(
            texts(
                "timestamp",
                &[json!("2012-12-21T12:34:56"), json!("2012-12-21 00:00:00")]
            ),
            ["2012-12-21T12:34:56", "2012-12-21T00:00"]
        );
        assert_eq!(
            texts("timestamp_tz", &[json!("2012-12-21T12:34:56.25")]),
            ["2012-12-21T12:34:56.250Z"]
        );
        assert_eq!(
            texts("timestamp", &[json!("1969-12-31T23:59:59")]),
            ["1969-12-31T23:59:59"]
        );
    }

    #[test]
    fn scalars_and_nulls() {
        assert_eq!(
            texts("string", &[json!("AAA"), Value::Null]),
            ["AAA", "null"]
        );
        assert_eq!(
            texts("boolean", &[json!(false), json!(true)]),
            ["false", "true"]
        );
        assert_eq!(texts("tinyint", &[json!(-1)]), ["-1"]);
        assert_eq!(texts("smallint", &[json!(1)]), ["1"]);
        assert_eq!(texts("int", &[json!(333), Value::Null]), ["333", "null"]);
        assert_eq!(texts("bigint", &[json!(323232)]), ["323232"]);
        assert_eq!(texts("float", &[json!(3.1)]), ["3.1"]);
        assert_eq!(texts("double", &[json!(9.33333)]), ["9.33333"]);
        assert_eq!(
            texts("decimal(30, 8)", &[json!(99999.99999999)]),
            ["99999.99999999"]
        );
        assert_eq!(texts("null", &[Value::Null]), ["null"]);
        // "bWlJWmo=" is "miIZj"; bytes above 127 print negative as Java's byte does.
        assert_eq!(
            texts("bytes", &[json!("bWlJWmo="), json!("/w==")]),
            ["[109, 105, 73, 90, 106]", "[-1]"]
        );
    }

    #[test]
    fn nested_values() {
        assert_eq!(
            texts(
                "array<int>",
                &[json!([0, 1, 2]), json!([]), json!([1, null])]
            ),
            ["[0, 1, 2]", "[]", "[1, null]"]
        );
        assert_eq!(texts("array<string>", &[json!(["a", "b"])]), ["[a, b]"]);
        assert_eq!(
            texts("map<string, string>", &[json!({"k0": "v0", "k1": null})]),
            [r#"{"k0":"v0","k1":null}"#]
        );
        assert_eq!(
            texts("map<date, string>", &[json!({"2024-01-26": "v0"})]),
            [r#"{"2024-01-26":"v0"}"#]
        );
        assert_eq!(
            texts(
                "map<string, {c_int = int, c_string = string}>",
                &[json!({"k1": [123, "BBB-BB"]})]
            ),
            [r#"{"k1":[123,"BBB-BB"]}"#]
        );
        assert_eq!(
            texts("map<string, double>", &[json!({"a": 1.5, "b\"q": 1e20})]),
            [r#"{"a":1.5,"b\"q":1.0E20}"#]
        );
        assert_eq!(
            texts(
                "{a = int, b = array<string>, c = {d = date}}",
                &[json!([1, ["x", null], ["2012-12-21"]]), Value::Null]
            ),
            ["[1, [x, null], [2012-12-21]]", "null"]
        );
    }

    #[test]
    fn json_strings_are_escaped() {
        let mut s = String::new();
        write_json_str(&mut s, "a\"b\\c\nd\u{1}");
        assert_eq!(s, r#""a\"b\\c\nd\u0001""#);
    }
}
