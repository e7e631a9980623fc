//! SeaTunnel's `CAST(x AS type)` where it differs from DataFusion's cast
//! (`SystemFunction.castAs`): text is Java's `toString` of the value, a decimal is
//! `new BigDecimal(x.toString()).setScale(s, RoundingMode.CEILING)`, an int becomes a
//! DATE as `yyyyMMdd` and a TIME as `HHmmss`, a bigint becomes a TIMESTAMP as epoch
//! milliseconds in the system time zone, a TIME becomes today at that time. The casts
//! SeaTunnel rejects (`CAST(bigint AS DATE)`, `CAST(int AS TIMESTAMP)`, …) are rejected
//! when the query is planned. Every other cast stays DataFusion's.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Date32Builder, Decimal128Builder, Time64MicrosecondBuilder,
    TimestampMicrosecondBuilder,
};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
    Time64MicrosecondType, TimeUnit, TimestampMicrosecondType,
};
use chrono::{DateTime, Local, NaiveDate, NaiveTime};
use datafusion::common::{Result as DFResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::fn_error;
use super::javatext::{decimal_text, differs_from_arrow, java_text, sci_into, sci_parts};

/// What to do with one `CAST(x AS to)` where x has type `from`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CastPlan {
    /// DataFusion's cast is SeaTunnel's (or a documented extension): keep it.
    Keep,
    /// SeaTunnel's semantics differ: use [`SeaCast`].
    Sea,
    /// SeaTunnel fails on every value: refuse the query, saying why.
    Reject(String),
}

fn is_number(t: &DataType) -> bool {
    t.is_numeric()
}

/// Decides how `CAST(x AS to)` runs for x of type `from`.
pub(crate) fn plan_cast(from: &DataType, to: &DataType) -> CastPlan {
    let reject = |only: &str| {
        let target = match to {
            DataType::Decimal128(_, _) => "DECIMAL".to_string(),
            t => ferry_api::types::type_name(t).to_uppercase(),
        };
        CastPlan::Reject(format!(
            "CAST({} AS {target}) is not supported: SeaTunnel casts {only}",
            ferry_api::types::type_name(from),
        ))
    };
    let text =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8);
    match (from, to) {
        (DataType::Null, _) => CastPlan::Keep,
        (f, DataType::Utf8 | DataType::Binary) if differs_from_arrow(f) => CastPlan::Sea,
        (f, DataType::Decimal128(_, _)) => {
            if is_number(f) || text(f) {
                CastPlan::Sea
            } else {
                reject("numbers and numeric text to DECIMAL")
            }
        }
        (DataType::Int32, DataType::Date32) => CastPlan::Sea,
        (f, DataType::Date32)
            if is_number(f)
                || matches!(
                    f,
                    DataType::Boolean | DataType::Time32(_) | DataType::Time64(_)
                ) =>
        {
            reject("to DATE only timestamps, dates and int values written yyyyMMdd")
        }
        (
            DataType::Int32 | DataType::Date32 | DataType::Timestamp(_, None),
            DataType::Time64(_),
        ) => CastPlan::Sea,
        (f, DataType::Time64(_)) if is_number(f) || f == &DataType::Boolean => {
            reject("to TIME only timestamps, dates, times and int values written HHmmss")
        }
        (
            DataType::Int64 | DataType::Time32(_) | DataType::Time64(_),
            DataType::Timestamp(_, None),
        ) => CastPlan::Sea,
        (f, DataType::Timestamp(_, None)) if is_number(f) || f == &DataType::Boolean => {
            reject("to TIMESTAMP only dates, times and bigint values (epoch milliseconds)")
        }
        _ => CastPlan::Keep,
    }
}

/// SeaTunnel's CAST to one type, as a UDF the planner calls in place of DataFusion's cast.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct SeaCast {
    to: DataType,
    signature: Signature,
}

impl SeaCast {
    /// The UDF for `CAST(x AS to)` where x has type `from` ([`plan_cast`] said `Sea`).
    pub(crate) fn udf(from: &DataType, to: &DataType) -> Arc<ScalarUDF> {
        // TIME → TIMESTAMP takes today's date, so it is not constant-folded at planning.
        let volatility = if matches!(from, DataType::Time32(_) | DataType::Time64(_)) {
            Volatility::Volatile
        } else {
            Volatility::Immutable
        };
        let to = match to {
            DataType::Time64(_) => DataType::Time64(TimeUnit::Microsecond),
            DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
            other => other.clone(),
        };
        Arc::new(ScalarUDF::new_from_impl(SeaCast {
            to,
            signature: Signature::any(1, volatility),
        }))
    }
}

impl ScalarUDFImpl for SeaCast {
    fn name(&self) -> &str {
        "cast"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> DFResult<DataType> {
        Ok(self.to.clone())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let Some(arg) = args.args.into_iter().next() else {
            return Err(fn_error("cast", "takes one argument"));
        };
        let (arr, scalar) = match arg {
            ColumnarValue::Array(a) => (a, false),
            ColumnarValue::Scalar(s) => (s.to_array_of_size(1)?, true),
        };
        let out = cast_array(&arr, &self.to)?;
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

fn cast_array(arr: &ArrayRef, to: &DataType) -> DFResult<ArrayRef> {
    let from = arr.data_type();
    Ok(match (from, to) {
        (_, DataType::Utf8) => java_text(arr)?,
        (_, DataType::Binary) => arrow::compute::cast(&java_text(arr)?, &DataType::Binary)?,
        (_, DataType::Decimal128(p, s)) => to_decimal(arr, *p, *s)?,
        (DataType::Int32, DataType::Date32) => {
            let a = arr.as_primitive::<Int32Type>();
            let mut b = Date32Builder::with_capacity(a.len());
            for v in a.iter() {
                b.append_option(v.map(yyyymmdd).transpose()?);
            }
            Arc::new(b.finish())
        }
        (DataType::Int32, DataType::Time64(_)) => {
            let a = arr.as_primitive::<Int32Type>();
            let mut b = Time64MicrosecondBuilder::with_capacity(a.len());
            for v in a.iter() {
                b.append_option(v.map(hhmmss).transpose()?);
            }
            Arc::new(b.finish())
        }
        (DataType::Date32, DataType::Time64(_)) => {
            // A date is at midnight.
            let a = arr.as_primitive::<Date32Type>();
            Arc::new(a.unary::<_, Time64MicrosecondType>(|_| 0))
        }
        (DataType::Timestamp(_, None), DataType::Time64(_)) => {
            let a = arrow::compute::cast(arr, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
            let a = a.as_primitive::<TimestampMicrosecondType>();
            Arc::new(a.unary::<_, Time64MicrosecondType>(|v| v.rem_euclid(86_400_000_000)))
        }
        (DataType::Int64, DataType::Timestamp(_, None)) => {
            let a = arr.as_primitive::<Int64Type>();
            let mut b = TimestampMicrosecondBuilder::with_capacity(a.len());
            for v in a.iter() {
                b.append_option(v.map(epoch_millis_local).transpose()?);
            }
            Arc::new(b.finish())
        }
        (DataType::Time32(_) | DataType::Time64(_), DataType::Timestamp(_, None)) => {
            let a = arrow::compute::cast(arr, &DataType::Time64(TimeUnit::Microsecond))?;
            let a = a.as_primitive::<Time64MicrosecondType>();
            let today = Local::now().date_naive();
            let base = today.and_time(NaiveTime::MIN).and_utc().timestamp_micros();
            Arc::new(a.unary::<_, TimestampMicrosecondType>(|v| base + v))
        }
        (f, t) => {
            return Err(fn_error(
                "cast",
                format!("no SeaTunnel cast from {f} to {t}"),
            ))
        }
    })
}

/// Java's `LocalDate.of(v / 10000, v / 100 % 100, v % 100)` as days since the epoch.
fn yyyymmdd(v: i32) -> DFResult<i32> {
    let (y, m, d) = (v / 10000, (v / 100) % 100, v % 100);
    let date = u32::try_from(m)
        .ok()
        .zip(u32::try_from(d).ok())
        .and_then(|(m, d)| NaiveDate::from_ymd_opt(y, m, d))
        .ok_or_else(|| fn_error("cast", format!("{v} is not a date written yyyyMMdd")))?;
    Ok((date - NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default()).num_days() as i32)
}

/// Java's `LocalTime.of(v / 10000, v / 100 % 100, v % 100)` as microseconds of the day.
fn hhmmss(v: i32) -> DFResult<i64> {
    let (h, m, s) = (v / 10000, (v / 100) % 100, v % 100);
    let ok = (0..24).contains(&h) && (0..60).contains(&m) && (0..60).contains(&s);
    if !ok {
        return Err(fn_error(
            "cast",
            format!("{v} is not a time written HHmmss"),
        ));
    }
    Ok(((h as i64 * 60 + m as i64) * 60 + s as i64) * 1_000_000)
}

/// Java's `LocalDateTime.ofInstant(Instant.ofEpochMilli(v), ZoneId.systemDefault())`.
fn epoch_millis_local(v: i64) -> DFResult<i64> {
    let local = DateTime::from_timestamp_millis(v)
        .map(|t| t.with_timezone(&Local).naive_local())
        .ok_or_else(|| fn_error("cast", format!("{v} ms since the epoch is out of range")))?;
    Ok(local.and_utc().timestamp_micros())
}

/// A decimal number as `BigDecimal` holds it: `±mag × 10^-scale`, plus `sticky` when
/// digits beyond 38 significant ones were dropped (they only matter as "not zero").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BigDec {
    neg: bool,
    mag: u128,
    scale: i64,
    sticky: bool,
}

const MAX_DIGITS: usize = 38;

impl BigDec {
    fn int(v: i128) -> Self {
        BigDec {
            neg: v < 0,
            mag: v.unsigned_abs(),
            scale: 0,
            sticky: false,
        }
    }

    /// `new BigDecimal(text)`: sign, digits with an optional point, optional exponent.
    fn parse(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        let mut i = 0;
        let mut neg = false;
        if let Some(&c) = b.first() {
            if c == b'-' || c == b'+' {
                neg = c == b'-';
                i = 1;
            }
        }
        let (mut mag, mut scale, mut sticky) = (0u128, 0i64, false);
        let (mut digits, mut significant, mut seen_point) = (0usize, 0usize, false);
        while i < b.len() {
            let c = b[i];
            if c == b'.' {
                if seen_point {
                    return None;
                }
                seen_point = true;
            } else if c.is_ascii_digit() {
                digits += 1;
                let d = (c - b'0') as u128;
                if significant == 0 && d == 0 {
                    // Leading zeros carry no digit, only the scale.
                    if seen_point {
                        scale += 1;
                    }
                } else if significant < MAX_DIGITS {
                    mag = mag * 10 + d;
                    significant += 1;
                    if seen_point {
                        scale += 1;
                    }
                } else {
                    sticky |= d != 0;
                    if !seen_point {
                        scale -= 1;
                    }
                }
            } else {
                break;
            }
            i += 1;
        }
        if digits == 0 {
            return None;
        }
        if i < b.len() {
            if b[i] != b'e' && b[i] != b'E' {
                return None;
            }
            let exp: i64 = text.get(i + 1..)?.parse().ok()?;
            // Java also refuses a '+' sign, spaces … after 'e' except one sign.
            scale = scale.checked_sub(exp)?;
        }
        Some(BigDec {
            neg,
            mag,
            scale,
            sticky,
        })
    }

    /// From a double or float's shortest digits (`Double.toString` / `Float.toString`).
    fn from_sci(sci: &str) -> Self {
        let (neg, digits, exp) = sci_parts(sci);
        let mag = digits.parse::<u128>().unwrap_or(0);
        BigDec {
            neg,
            mag,
            scale: digits.len() as i64 - 1 - exp as i64,
            sticky: false,
        }
    }

    /// `setScale(s, RoundingMode.CEILING)` as an unscaled i128, `None` when it overflows.
    fn ceiling(self, s: i64) -> Option<i128> {
        let q: u128 = if self.scale <= s {
            if self.sticky && self.scale < s {
                return None;
            }
            let f = 10u128.checked_pow(u32::try_from(s - self.scale).ok()?)?;
            let v = self.mag.checked_mul(f)?;
            if self.sticky && !self.neg {
                v.checked_add(1)?
            } else {
                v
            }
        } else {
            let shift = self.scale - s;
            let (q, rem) = if shift > MAX_DIGITS as i64 {
                (0, self.mag != 0)
            } else {
                let f = 10u128.pow(shift as u32);
                (self.mag / f, !self.mag.is_multiple_of(f))
            };
            if (rem || self.sticky) && !self.neg {
                q + 1
            } else {
                q
            }
        };
        let q = i128::try_from(q).ok()?;
        Some(if self.neg { -q } else { q })
    }
}

/// `new BigDecimal(x.toString()).setScale(s, RoundingMode.CEILING)` for every value, which
/// must then fit DECIMAL(p, s).
fn to_decimal(arr: &ArrayRef, p: u8, s: i8) -> DFResult<ArrayRef> {
    let n = arr.len();
    let limit = 10i128.pow(p.min(38) as u32);
    let mut b = Decimal128Builder::with_capacity(n);
    let mut tmp = String::new();
    let put = |b: &mut Decimal128Builder, v: Option<BigDec>, shown: &dyn Fn() -> String| match v {
        None => {
            b.append_null();
            Ok(())
        }
        Some(d) => match d.ceiling(s as i64) {
            Some(u) if u.abs() < limit => {
                b.append_value(u);
                Ok(())
            }
            _ => Err(fn_error(
                "cast",
                format!("{} does not fit DECIMAL({p}, {s})", shown()),
            )),
        },
    };
    match arr.data_type() {
        DataType::Float64 | DataType::Float32 | DataType::Float16 => {
            let double = arr.data_type() == &DataType::Float64;
            let a = arrow::compute::cast(arr, &DataType::Float64)?;
            let f32s = if double {
                None
            } else {
                Some(arrow::compute::cast(arr, &DataType::Float32)?)
            };
            let a = a.as_primitive::<Float64Type>();
            for i in 0..n {
                if a.is_null(i) {
                    put(&mut b, None, &String::new)?;
                    continue;
                }
                let v = a.value(i);
                if !v.is_finite() {
                    return Err(fn_error("cast", format!("{v} is not a number for DECIMAL")));
                }
                // The digits Java's toString gives: the shortest that read back as the
                // double (or the float, for a float column).
                match &f32s {
                    Some(f) => sci_into(f.as_primitive::<Float32Type>().value(i), &mut tmp),
                    None => sci_into(v, &mut tmp),
                }
                let d = if v == 0.0 {
                    BigDec::int(0)
                } else {
                    BigDec::from_sci(&tmp)
                };
                put(&mut b, Some(d), &|| v.to_string())?;
            }
        }
        DataType::Decimal128(_, si) => {
            let a = arr.as_primitive::<Decimal128Type>();
            let si = *si as i64;
            for v in a.iter() {
                let d = v.map(|v| BigDec {
                    scale: si,
                    ..BigDec::int(v)
                });
                put(&mut b, d, &|| {
                    let mut t = String::new();
                    decimal_text(v.unwrap_or(0), si as i32, &mut t);
                    t
                })?;
            }
        }
        t if t.is_integer() => {
            let a = arrow::compute::cast(arr, &DataType::Decimal128(38, 0))?;
            let a = a.as_primitive::<Decimal128Type>();
            for v in a.iter() {
                put(&mut b, v.map(BigDec::int), &|| v.unwrap_or(0).to_string())?;
            }
        }
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => {
            let a = arrow::compute::cast(arr, &DataType::Utf8)?;
            let a = a.as_string::<i32>();
            for v in a.iter() {
                let d = match v {
                    None => None,
                    Some(t) => Some(BigDec::parse(t).ok_or_else(|| {
                        fn_error("cast", format!("'{t}' is not a number for DECIMAL"))
                    })?),
                };
                put(&mut b, d, &|| format!("'{}'", v.unwrap_or("")))?;
            }
        }
        other => {
            return Err(fn_error(
                "cast",
                format!("{other} cannot be cast to DECIMAL"),
            ))
        }
    }
    Ok(Arc::new(b.finish().with_precision_and_scale(p, s)?))
}
