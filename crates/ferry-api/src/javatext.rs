//! Values as SeaTunnel's Java code prints them (`String.valueOf` of the Java object a
//! SeaTunnel row holds): `3.1` and `1.0E10` for floats, `0E-8` for a zero `decimal(30, 8)`,
//! `12:34` for a `LocalTime` without seconds, `[1, 2]` for arrays and nested rows, signed
//! bytes for `bytes`, and JSON (`{"k":"v"}`) for maps, as the Console sink does.
//!
//! The one home of these rules: the Console sink formats whole columns at once
//! ([`append_column`]), the Assert sink uses [`write_value`] for its text length rules,
//! LocalFile writes floats and dates with them, and the Sql transform casts to text with them.

use std::fmt::Write;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, Time64MicrosecondType, TimeUnit, TimestampMicrosecondType, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use base64::Engine;
use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

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
                write_big_decimal(out, v, scale as i32)
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
        DataType::Decimal128(_, s) => write_big_decimal(
            out,
            array.as_primitive::<Decimal128Type>().value(i),
            *s as i32,
        ),
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

/// A float type Java prints: `f32` (`Float.toString`) or `f64` (`Double.toString`).
pub trait JavaFloat: Copy + std::fmt::LowerExp + PartialEq {
    /// Zero of the type.
    const ZERO: Self;
    /// Whether it is NaN.
    fn nan(self) -> bool;
    /// Whether it is infinite.
    fn infinite(self) -> bool;
    /// Whether the sign bit is set.
    fn negative(self) -> bool;
}

impl JavaFloat for f32 {
    const ZERO: Self = 0.0;
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn infinite(self) -> bool {
        self.is_infinite()
    }
    fn negative(self) -> bool {
        self.is_sign_negative()
    }
}

impl JavaFloat for f64 {
    const ZERO: Self = 0.0;
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn infinite(self) -> bool {
        self.is_infinite()
    }
    fn negative(self) -> bool {
        self.is_sign_negative()
    }
}

/// Appends a float as Java's `Float.toString` / `Double.toString` does: the shortest
/// decimal that reads back as the value in its own type, plain for 10^-3 <= |v| < 10^7
/// (`3.1`, `9.33333`, `100.0`), else `1.0E10`, `1.0E-5`.
pub fn write_java_float<F: JavaFloat>(out: &mut impl Write, v: F) {
    if special(v.nan(), v.infinite(), v == F::ZERO, v.negative(), out) {
        return;
    }
    let mut buf = StackBuf::new();
    java_sci(v, &mut buf);
    java_layout(buf.as_str(), out);
}

/// Appends a `float` as Java's `Float.toString` does (`3.1`, `1.0`, `1.0E10`).
pub fn write_java_f32(out: &mut impl Write, v: f32) {
    write_java_float(out, v)
}

/// Appends a `double` as Java's `Double.toString` does (`9.33333`, `1.0E-5`).
pub fn write_java_f64(out: &mut impl Write, v: f64) {
    write_java_float(out, v)
}

/// The digits Java's `toString` picks for a finite, non-zero float, in Rust's `{:e}` form
/// (`1.25e-7`), appended to `out`.
pub fn java_sci<F: JavaFloat>(v: F, out: &mut impl Write) {
    let mut buf = StackBuf::new();
    let _ = write!(buf, "{v:e}");
    if !buf.as_str().contains('.') {
        // One digit is enough; Java then picks the closest decimal of two digits, which
        // differs from it only for the smallest subnormals (4.9E-324, not 5.0E-324).
        buf.len = 0;
        let _ = write!(buf, "{v:.1e}");
    }
    let _ = out.write_str(buf.as_str());
}

fn special(nan: bool, inf: bool, zero: bool, neg: bool, out: &mut impl Write) -> bool {
    let s = match (nan, inf, zero, neg) {
        (true, ..) => "NaN",
        (false, true, _, true) => "-Infinity",
        (false, true, _, false) => "Infinity",
        (false, false, true, true) => "-0.0",
        (false, false, true, false) => "0.0",
        _ => return false,
    };
    let _ = out.write_str(s);
    true
}

/// The sign, significant digits (no trailing zeros) and decimal exponent of Rust's `{:e}`
/// text: `-1.25e-7` → (true, "125", -7).
pub fn sci_parts(sci: &str) -> (bool, String, i32) {
    let (neg, rest) = match sci.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, sci),
    };
    let (mant, exp) = rest.split_once('e').unwrap_or((rest, "0"));
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    // Rust's `{:.1e}` may leave a trailing zero (`5.0e0`): Java keeps it only as the one
    // required fraction digit, which the layout adds back.
    let trimmed = digits.trim_end_matches('0');
    let digits = if trimmed.is_empty() { "0" } else { trimmed }.to_string();
    (neg, digits, exp.parse().unwrap_or(0))
}

/// Java's layout of a double's digits: plain within [10^-3, 10^7), else scientific.
fn java_layout(sci: &str, out: &mut impl Write) {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    // The significant digits without the point and without trailing zeros, on the stack.
    let mut digits = StackBuf::new();
    for c in mantissa.chars().filter(|c| *c != '.') {
        let _ = digits.write_char(c);
    }
    let d = {
        let t = digits.as_str().trim_end_matches('0');
        if t.is_empty() {
            "0"
        } else {
            t
        }
    };
    if neg {
        let _ = out.write_char('-');
    }
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if d.len() <= int_len {
                let _ = out.write_str(d);
                for _ in d.len()..int_len {
                    let _ = out.write_char('0');
                }
                let _ = out.write_str(".0");
            } else {
                let _ = out.write_str(&d[..int_len]);
                let _ = out.write_char('.');
                let _ = out.write_str(&d[int_len..]);
            }
        } else {
            let _ = out.write_str("0.");
            for _ in 0..(-exp - 1) {
                let _ = out.write_char('0');
            }
            let _ = out.write_str(d);
        }
    } else {
        let _ = out.write_str(&d[..1]);
        let _ = out.write_char('.');
        let _ = out.write_str(if d.len() > 1 { &d[1..] } else { "0" });
        let _ = write!(out, "E{exp}");
    }
}

/// Appends `unscaled × 10^-scale` as Java's `BigDecimal.toString` does: plain unless the
/// scale is negative or the number is below 10^-6 (`99999.99999999`, `0E-8`, `1.5E+3`).
pub fn write_big_decimal(out: &mut impl Write, unscaled: i128, scale: i32) {
    let mut buf = StackBuf::new();
    let _ = write!(buf, "{}", unscaled.unsigned_abs());
    let digits = buf.as_str();
    let len = digits.len() as i64;
    let adjusted = -(scale as i64) + (len - 1);
    if unscaled < 0 {
        let _ = out.write_char('-');
    }
    if scale >= 0 && adjusted >= -6 {
        let s = scale as usize;
        if s == 0 {
            let _ = out.write_str(digits);
        } else if digits.len() > s {
            let (i, f) = digits.split_at(digits.len() - s);
            let _ = write!(out, "{i}.{f}");
        } else {
            let _ = out.write_str("0.");
            for _ in digits.len()..s {
                let _ = out.write_char('0');
            }
            let _ = out.write_str(digits);
        }
    } else {
        let _ = out.write_str(&digits[..1]);
        if digits.len() > 1 {
            let _ = write!(out, ".{}", &digits[1..]);
        }
        let _ = write!(out, "E{}{adjusted}", if adjusted >= 0 { "+" } else { "" });
    }
}

/// Appends a date as `LocalDate.toString()`: `2024-01-02`, years outside 0..=9999 signed
/// (`+10000`, `-0001`).
pub fn write_date(out: &mut impl Write, d: NaiveDate) {
    let y = d.year();
    if y.unsigned_abs() < 1000 {
        let _ = write!(
            out,
            "{}{:04}",
            if y < 0 { "-" } else { "" },
            y.unsigned_abs()
        );
    } else if y > 9999 {
        let _ = write!(out, "+{y}");
    } else {
        let _ = write!(out, "{y}");
    }
    let _ = write!(out, "-{:02}-{:02}", d.month(), d.day());
}

/// Appends a time as `LocalTime.toString()`: `10:15`, `10:15:30`, `10:15:30.120`,
/// `10:15:30.123456`.
pub fn write_time(out: &mut impl Write, t: NaiveTime) {
    let _ = write!(out, "{:02}:{:02}", t.hour(), t.minute());
    let (s, nanos) = (t.second(), t.nanosecond());
    if s > 0 || nanos > 0 {
        let _ = write!(out, ":{s:02}");
        if nanos > 0 {
            if nanos % 1_000_000 == 0 {
                let _ = write!(out, ".{:03}", nanos / 1_000_000);
            } else if nanos % 1000 == 0 {
                let _ = write!(out, ".{:06}", nanos / 1000);
            } else {
                let _ = write!(out, ".{nanos:09}");
            }
        }
    }
}

/// Appends a date-time as `LocalDateTime.toString()`: date `T` time.
pub fn write_datetime(out: &mut impl Write, dt: NaiveDateTime) {
    write_date(out, dt.date());
    let _ = out.write_char('T');
    write_time(out, dt.time());
}

/// Appends days since 1970-01-01 as `LocalDate.toString` (`2012-12-21`); a day outside
/// chrono's range as its number.
pub fn write_local_date(out: &mut impl Write, days: i32) {
    match days
        .checked_add(UNIX_EPOCH_DAY_CE)
        .and_then(NaiveDate::from_num_days_from_ce_opt)
    {
        Some(d) => write_date(out, d),
        None => {
            let _ = write!(out, "{days}");
        }
    }
}

/// Appends microseconds since midnight as `LocalTime.toString`.
pub fn write_local_time(out: &mut impl Write, micros: i64) {
    let micros = micros.rem_euclid(MICROS_PER_DAY);
    let secs = (micros / 1_000_000) as u32;
    let nanos = (micros % 1_000_000) as u32 * 1000;
    match NaiveTime::from_num_seconds_from_midnight_opt(secs, nanos) {
        Some(t) => write_time(out, t),
        None => {
            let _ = write!(out, "{micros}");
        }
    }
}

/// Appends microseconds since the epoch as `LocalDateTime.toString`
/// (`2012-12-21T12:34:56`), with `Z` for a zoned timestamp (`OffsetDateTime` in UTC).
pub fn write_local_date_time(out: &mut impl Write, micros: i64, zoned: bool) {
    let days = micros.div_euclid(MICROS_PER_DAY);
    match i32::try_from(days) {
        Ok(d) => write_local_date(out, d),
        Err(_) => {
            let _ = write!(out, "{days}");
        }
    }
    let _ = out.write_char('T');
    write_local_time(out, micros.rem_euclid(MICROS_PER_DAY));
    if zoned {
        let _ = out.write_char('Z');
    }
}

/// Converts a Java `Matcher.replaceAll` replacement (used by the Replace transform and
/// Sql's REGEXP_REPLACE) (`$1`, `${name}`, `\$` for a literal)
/// into the `regex` crate's syntax (`${1}`, `${name}`, `$$`). `groups` is the number of
/// capture groups, which decides how many digits a Java group reference takes.
pub fn regex_replacement(replacement: &str, groups: usize) -> std::result::Result<String, String> {
    let chars: Vec<char> = replacement.chars().collect();
    let mut out = String::with_capacity(replacement.len() + 4);
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                let Some(&c) = chars.get(i + 1) else {
                    return Err(
                        "character to be escaped is missing at the end of the replacement".into(),
                    );
                };
                if c == '$' {
                    out.push_str("$$");
                } else {
                    out.push(c);
                }
                i += 2;
            }
            '$' => {
                i += 1;
                match chars.get(i) {
                    Some('{') => {
                        let end = chars[i..].iter().position(|&c| c == '}').ok_or("named group reference is missing '}'")?;
                        let name: String = chars[i + 1..i + end].iter().collect();
                        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
                            return Err(format!("invalid named group reference '${{{name}}}'"));
                        }
                        out.push_str(&format!("${{{name}}}"));
                        i += end + 1;
                    }
                    Some(c) if c.is_ascii_digit() => {
                        // Java takes further digits only while the number stays a valid group.
                        let mut n = c.to_digit(10).unwrap_or(0) as usize;
                        i += 1;
                        while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
                            let next = n * 10 + d as usize;
                            if next > groups {
                                break;
                            }
                            n = next;
                            i += 1;
                        }
                        if n > groups {
                            return Err(format!("no group {n} in the pattern"));
                        }
                        out.push_str(&format!("${{{n}}}"));
                    }
                    _ => return Err("illegal group reference: '$' must be followed by a group number or {name} (write \\$ for a literal $)".into()),
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
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
    use crate::types::parse_type;
    use crate::value::json_to_array;
    use arrow::array::ArrayRef;
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
        write_big_decimal(&mut s, v, scale as i32);
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
        assert_eq!(f32s(2.4798444E38), "2.4798444E38");
        assert_eq!(f32s(1e7), "1.0E7");
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

    fn d(v: f64) -> String {
        f64s(v)
    }

    fn f(v: f32) -> String {
        f32s(v)
    }

    fn sdec(v: i128, scale: i32) -> String {
        let mut s = String::new();
        write_big_decimal(&mut s, v, scale);
        s
    }

    #[test]
    fn doubles_as_java_double_to_string() {
        // Expected values as Java 17+ prints them (Double.toString).
        let cases = [
            (100.0, "100.0"),
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1.0e-5, "1.0E-5"),
            (1.25e-5, "1.25E-5"),
            (9_999_999.0, "9999999.0"),
            (1.0e7, "1.0E7"),
            (12_345_678.9, "1.23456789E7"),
            (1.0e10, "1.0E10"),
            (-1.0e10, "-1.0E10"),
            (1.0e21, "1.0E21"),
            (1.0e-300, "1.0E-300"),
            (123.456, "123.456"),
            (0.30000000000000004, "0.30000000000000004"),
            (1.7976931348623157e308, "1.7976931348623157E308"),
            (4.9e-324, "4.9E-324"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (2.0 / 3.0, "0.6666666666666666"),
            (1234567.0, "1234567.0"),
            (0.00123, "0.00123"),
        ];
        for (v, want) in cases {
            assert_eq!(d(v), want, "{v:e}");
        }
    }

    #[test]
    fn floats_as_java_float_to_string() {
        let cases = [
            (1.5f32, "1.5"),
            (0.1f32, "0.1"),
            (100.0f32, "100.0"),
            (1.0e10f32, "1.0E10"),
            (3.4028235e38f32, "3.4028235E38"),
            (1.0e-5f32, "1.0E-5"),
            (1.4e-45f32, "1.4E-45"),
            (16_777_216.0f32, "1.6777216E7"),
        ];
        for (v, want) in cases {
            assert_eq!(f(v), want, "{v:e}");
        }
    }

    #[test]
    fn decimals_as_big_decimal_to_string() {
        assert_eq!(sdec(1235, 2), "12.35");
        assert_eq!(sdec(-5, 2), "-0.05");
        assert_eq!(sdec(0, 2), "0.00");
        assert_eq!(sdec(7, 0), "7");
        assert_eq!(sdec(1, 6), "0.000001");
        assert_eq!(sdec(1, 7), "1E-7");
        assert_eq!(sdec(-15, 8), "-1.5E-7");
        assert_eq!(sdec(15, -2), "1.5E+3");
    }

    #[test]
    fn dates_and_times_as_java_time() {
        let t = |h, m, s, n| {
            let mut o = String::new();
            write_time(
                &mut o,
                NaiveTime::from_hms_nano_opt(h, m, s, n).unwrap_or_default(),
            );
            o
        };
        assert_eq!(t(10, 15, 0, 0), "10:15");
        assert_eq!(t(10, 15, 30, 0), "10:15:30");
        assert_eq!(t(10, 15, 0, 120_000_000), "10:15:00.120");
        assert_eq!(t(0, 0, 1, 123_456_000), "00:00:01.123456");
        assert_eq!(t(0, 0, 1, 123_456_789), "00:00:01.123456789");
        let day = |y, m, d| {
            let mut o = String::new();
            write_date(&mut o, NaiveDate::from_ymd_opt(y, m, d).unwrap_or_default());
            o
        };
        assert_eq!(day(2024, 1, 2), "2024-01-02");
        assert_eq!(day(5, 1, 2), "0005-01-02");
        assert_eq!(day(-1, 1, 2), "-0001-01-02");
        assert_eq!(day(12345, 1, 2), "+12345-01-02");
    }

    #[test]
    fn java_regex_replacement_syntax_is_translated() {
        assert_eq!(regex_replacement("b", 0).unwrap(), "b");
        assert_eq!(regex_replacement("<$1>", 1).unwrap(), "<${1}>");
        // `$12` with one group is group 1 followed by a literal 2, as in Java.
        assert_eq!(regex_replacement("$12", 1).unwrap(), "${1}2");
        assert_eq!(regex_replacement("$12", 12).unwrap(), "${12}");
        assert_eq!(regex_replacement("${word}", 1).unwrap(), "${word}");
        assert_eq!(regex_replacement(r"\$5 \\", 0).unwrap(), r"$$5 \");
        assert!(regex_replacement("$", 0)
            .unwrap_err()
            .contains("illegal group reference"));
        assert!(regex_replacement("$2", 1)
            .unwrap_err()
            .contains("no group 2"));
        assert!(regex_replacement("a\\", 0).unwrap_err().contains("escaped"));
    }
}
