//! Values as Java's `toString` writes them, which is how SeaTunnel turns a value into text
//! (CAST AS STRING, CONCAT, `||`, TO_CHAR without a pattern): `Double.toString` (`100.0`,
//! `1.0E10`, `1.0E-5`), `Float.toString`, `BigDecimal.toString`, and `LocalDate`,
//! `LocalTime` and `LocalDateTime` in their ISO forms (`2024-01-02T10:15`, seconds only
//! when not zero).

use std::fmt::Write;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Time64MicrosecondType,
    TimeUnit, TimestampMicrosecondType,
};
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use datafusion::common::Result as DFResult;

use super::fn_error;

/// Whether values of this type get Java's text rather than Arrow's (they differ).
pub(crate) fn differs_from_arrow(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal32(_, _)
            | DataType::Decimal64(_, _)
            | DataType::Decimal128(_, _)
            | DataType::Timestamp(_, _)
            | DataType::Date32
            | DataType::Time32(_)
            | DataType::Time64(_)
    )
}

/// The type a value is brought to before [`java_text`] writes it: one per Java class.
pub(crate) fn text_source_type(t: &DataType) -> Option<DataType> {
    Some(match t {
        DataType::Float16 | DataType::Float32 => DataType::Float32,
        DataType::Float64 => DataType::Float64,
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) => {
            DataType::Decimal128(*p, *s)
        }
        DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
        DataType::Date32 => DataType::Date32,
        DataType::Time32(_) | DataType::Time64(_) => DataType::Time64(TimeUnit::Microsecond),
        _ => return None,
    })
}

/// A column as Java's `toString` of each value (nulls stay null). Types whose text is the
/// same in Java and Arrow (whole numbers, booleans, text) go through Arrow's cast.
pub(crate) fn java_text(arr: &ArrayRef) -> DFResult<ArrayRef> {
    let Some(src) = text_source_type(arr.data_type()) else {
        return Ok(arrow::compute::cast(arr, &DataType::Utf8)?);
    };
    let arr = if &src == arr.data_type() {
        arr.clone()
    } else {
        arrow::compute::cast(arr, &src)?
    };
    let n = arr.len();
    let mut b = StringBuilder::with_capacity(n, n * 12);
    let mut tmp = String::new();
    macro_rules! each {
        ($t:ty, |$v:ident| $write:expr) => {{
            let a = arr.as_primitive::<$t>();
            for i in 0..n {
                if a.is_null(i) {
                    b.append_null();
                } else {
                    let $v = a.value(i);
                    $write;
                    b.append_value("");
                }
            }
        }};
    }
    match &src {
        DataType::Float64 => each!(Float64Type, |v| double_text(v, &mut b, &mut tmp)),
        DataType::Float32 => each!(Float32Type, |v| float_text(v, &mut b, &mut tmp)),
        DataType::Decimal128(_, s) => {
            let s = *s;
            each!(Decimal128Type, |v| decimal_text(v, s as i32, &mut b))
        }
        DataType::Date32 => each!(Date32Type, |v| {
            let d = date_of(v)?;
            date_text(d, &mut b)
        }),
        DataType::Time64(_) => each!(Time64MicrosecondType, |v| time_text(time_of(v)?, &mut b)),
        DataType::Timestamp(_, tz) => {
            let zoned = tz.is_some();
            each!(TimestampMicrosecondType, |v| {
                let dt = datetime_of(v)?;
                datetime_text(dt, &mut b);
                if zoned {
                    // Ferry's zoned timestamps are UTC: an OffsetDateTime at +00:00.
                    let _ = b.write_char('Z');
                }
            })
        }
        other => return Err(fn_error("cast", format!("no Java text for {other}"))),
    }
    Ok(Arc::new(b.finish()))
}

/// The date of a `Date32` value.
pub(crate) fn date_of(days: i32) -> DFResult<NaiveDate> {
    NaiveDate::from_num_days_from_ce_opt(days.saturating_add(719_163))
        .ok_or_else(|| fn_error("cast", format!("date out of range: {days} days")))
}

/// The time of a `Time64(µs)` value.
pub(crate) fn time_of(micros: i64) -> DFResult<NaiveTime> {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    u32::try_from(secs)
        .ok()
        .and_then(|s| NaiveTime::from_num_seconds_from_midnight_opt(s, frac as u32 * 1000))
        .ok_or_else(|| fn_error("cast", format!("time out of range: {micros} µs")))
}

/// The date-time of a `Timestamp(µs)` value.
pub(crate) fn datetime_of(micros: i64) -> DFResult<NaiveDateTime> {
    DateTime::from_timestamp_micros(micros)
        .map(|d| d.naive_utc())
        .ok_or_else(|| fn_error("cast", format!("timestamp out of range: {micros} µs")))
}

/// `Double.toString(d)`: the shortest decimal that reads back as `d`, plain for
/// 10^-3 <= |d| < 10^7 (`100.0`, `0.001`), else `1.0E10`, `1.234E-5`.
pub(crate) fn double_text(d: f64, out: &mut impl Write, tmp: &mut String) {
    if special(
        d.is_nan(),
        d.is_infinite(),
        d == 0.0,
        d.is_sign_negative(),
        out,
    ) {
        return;
    }
    double_sci(d, tmp);
    java_layout(tmp, out);
}

/// `Float.toString(f)`, as [`double_text`] for a float's own shortest digits.
pub(crate) fn float_text(f: f32, out: &mut impl Write, tmp: &mut String) {
    if special(
        f.is_nan(),
        f.is_infinite(),
        f == 0.0,
        f.is_sign_negative(),
        out,
    ) {
        return;
    }
    float_sci(f, tmp);
    java_layout(tmp, out);
}

/// The digits `Double.toString` picks for a finite, non-zero `d`, in Rust's `{:e}` form.
pub(crate) fn double_sci(d: f64, tmp: &mut String) {
    tmp.clear();
    let _ = write!(tmp, "{d:e}");
    if !tmp.contains('.') {
        // One digit is enough; Java then picks the closest decimal of two digits, which
        // differs from it only for the smallest subnormals (4.9E-324, not 5.0E-324).
        tmp.clear();
        let _ = write!(tmp, "{d:.1e}");
    }
}

/// The digits `Float.toString` picks for a finite, non-zero `f`, in Rust's `{:e}` form.
pub(crate) fn float_sci(f: f32, tmp: &mut String) {
    tmp.clear();
    let _ = write!(tmp, "{f:e}");
    if !tmp.contains('.') {
        tmp.clear();
        let _ = write!(tmp, "{f:.1e}");
    }
}

fn special(nan: bool, inf: bool, zero: bool, neg: bool, out: &mut impl Write) -> bool {
    let s = if nan {
        "NaN"
    } else if inf && neg {
        "-Infinity"
    } else if inf {
        "Infinity"
    } else if zero && neg {
        "-0.0"
    } else if zero {
        "0.0"
    } else {
        return false;
    };
    let _ = out.write_str(s);
    true
}

/// The digits and decimal exponent of Rust's `{:e}` text (`-1.25e-7` → (true, "125", -7)).
pub(crate) fn sci_parts(sci: &str) -> (bool, String, i32) {
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
    let (neg, digits, exp) = sci_parts(sci);
    if neg {
        let _ = out.write_char('-');
    }
    let d = digits.as_str();
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

/// `BigDecimal.toString()` of `unscaled × 10^-scale`: plain unless the scale is negative
/// or the number is below 10^-6 (`1E-7`, `1.5E+3`).
pub(crate) fn decimal_text(unscaled: i128, scale: i32, out: &mut impl Write) {
    let digits = unscaled.unsigned_abs().to_string();
    let len = digits.len() as i64;
    let adjusted = -(scale as i64) + (len - 1);
    if unscaled < 0 {
        let _ = out.write_char('-');
    }
    if scale >= 0 && adjusted >= -6 {
        let s = scale as usize;
        if s == 0 {
            let _ = out.write_str(&digits);
        } else if digits.len() > s {
            let (i, f) = digits.split_at(digits.len() - s);
            let _ = write!(out, "{i}.{f}");
        } else {
            let _ = out.write_str("0.");
            for _ in digits.len()..s {
                let _ = out.write_char('0');
            }
            let _ = out.write_str(&digits);
        }
    } else {
        let _ = out.write_str(&digits[..1]);
        if digits.len() > 1 {
            let _ = write!(out, ".{}", &digits[1..]);
        }
        let _ = write!(out, "E{}{adjusted}", if adjusted >= 0 { "+" } else { "" });
    }
}

/// `LocalDate.toString()`: `2024-01-02`, years outside 0..=9999 signed (`+10000`, `-0001`).
pub(crate) fn date_text(d: NaiveDate, out: &mut impl Write) {
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

/// `LocalTime.toString()`: `10:15`, `10:15:30`, `10:15:30.120`, `10:15:30.123456`.
pub(crate) fn time_text(t: NaiveTime, out: &mut impl Write) {
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

/// `LocalDateTime.toString()`: date `T` time.
pub(crate) fn datetime_text(dt: NaiveDateTime, out: &mut impl Write) {
    date_text(dt.date(), out);
    let _ = out.write_char('T');
    time_text(dt.time(), out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(v: f64) -> String {
        let mut s = String::new();
        double_text(v, &mut s, &mut String::new());
        s
    }

    fn f(v: f32) -> String {
        let mut s = String::new();
        float_text(v, &mut s, &mut String::new());
        s
    }

    fn dec(v: i128, scale: i32) -> String {
        let mut s = String::new();
        decimal_text(v, scale, &mut s);
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
        assert_eq!(dec(1235, 2), "12.35");
        assert_eq!(dec(-5, 2), "-0.05");
        assert_eq!(dec(0, 2), "0.00");
        assert_eq!(dec(7, 0), "7");
        assert_eq!(dec(1, 6), "0.000001");
        assert_eq!(dec(1, 7), "1E-7");
        assert_eq!(dec(-15, 8), "-1.5E-7");
        assert_eq!(dec(15, -2), "1.5E+3");
    }

    #[test]
    fn dates_and_times_as_java_time() {
        let t = |h, m, s, n| {
            let mut o = String::new();
            time_text(
                NaiveTime::from_hms_nano_opt(h, m, s, n).unwrap_or_default(),
                &mut o,
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
            date_text(NaiveDate::from_ymd_opt(y, m, d).unwrap_or_default(), &mut o);
            o
        };
        assert_eq!(day(2024, 1, 2), "2024-01-02");
        assert_eq!(day(5, 1, 2), "0005-01-02");
        assert_eq!(day(-1, 1, 2), "-0001-01-02");
        assert_eq!(day(12345, 1, 2), "+12345-01-02");
    }
}
