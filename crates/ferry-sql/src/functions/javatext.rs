//! Columns as Java's `toString` writes their values, which is how SeaTunnel turns a value
//! into text (CAST AS STRING, CONCAT, `||`, TO_CHAR without a pattern). The rules for one
//! value (`Double.toString`, `BigDecimal.toString`, `LocalDateTime.toString`, …) live in
//! `ferry_api::javatext`, shared with Console, Assert and LocalFile.

use std::fmt::Write;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Time64MicrosecondType,
    TimeUnit, TimestampMicrosecondType,
};
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime};
use datafusion::common::Result as DFResult;
use ferry_api::javatext;

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
        DataType::Float64 => each!(Float64Type, |v| javatext::write_java_f64(&mut b, v)),
        DataType::Float32 => each!(Float32Type, |v| javatext::write_java_f32(&mut b, v)),
        DataType::Decimal128(_, s) => {
            let s = *s;
            each!(Decimal128Type, |v| decimal_text(v, s as i32, &mut b))
        }
        DataType::Date32 => each!(Date32Type, |v| {
            let d = date_of(v)?;
            javatext::write_date(&mut b, d)
        }),
        DataType::Time64(_) => each!(Time64MicrosecondType, |v| javatext::write_time(
            &mut b,
            time_of(v)?
        )),
        DataType::Timestamp(_, tz) => {
            let zoned = tz.is_some();
            each!(TimestampMicrosecondType, |v| {
                let dt = datetime_of(v)?;
                javatext::write_datetime(&mut b, dt);
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

pub(crate) use ferry_api::javatext::sci_parts;

/// The digits Java's `toString` picks for a finite, non-zero float (`Double.toString` for
/// an `f64`, `Float.toString` for an `f32`), in Rust's `{:e}` form, in `tmp` (replacing
/// what it held).
pub(crate) fn sci_into<F: javatext::JavaFloat>(v: F, tmp: &mut String) {
    tmp.clear();
    javatext::java_sci(v, tmp);
}

/// `BigDecimal.toString()` of `unscaled × 10^-scale`.
pub(crate) fn decimal_text(unscaled: i128, scale: i32, out: &mut impl Write) {
    javatext::write_big_decimal(out, unscaled, scale);
}
