//! SeaTunnel's date and time functions (`DateTimeFunction.java`). Dates, times and
//! timestamps are SeaTunnel's local values: Date32, Time64(µs), Timestamp(µs) with no zone.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Int32Type, Int64Type, Time64MicrosecondType, TimeUnit,
    TimestampMicrosecondType,
};
use chrono::{
    Datelike, Duration, FixedOffset, Local, NaiveDate, NaiveDateTime, NaiveTime, TimeZone,
    Timelike, Utc,
};
use datafusion::common::{exec_err, plan_err, Result as DFResult, ScalarValue};
use ferry_api::javatime::{MONTHS, WEEKDAYS};

use super::javafmt::{parse_kind, JavaPattern, ParseKind};
use super::string::{bool_out, prim_out, str_out};
use super::{fn_error, ret_first, Arg, Args, SeaFn};
use crate::ret;

const T: Arg = Arg::Temporal;
const S: Arg = Arg::Str;
const I: Arg = Arg::Int;
const TS: DataType = DataType::Timestamp(TimeUnit::Microsecond, None);
const TIME: DataType = DataType::Time64(TimeUnit::Microsecond);
const UNIX_EPOCH_DAY: i32 = 719_163;

pub(super) fn functions() -> Vec<SeaFn> {
    vec![
        SeaFn::new("current_date", &[], 0, ret!(DataType::Date32), |a, _| {
            let d = date_days(Local::now().naive_local().date());
            prim_out::<Date32Type>(a.rows, |_| Ok(Some(d)))
        })
        .alias(&["curdate"])
        .volatile(),
        SeaFn::new("current_time", &[], 0, ret!(TIME), |a, _| {
            let t = time_micros(Local::now().naive_local().time());
            prim_out::<Time64MicrosecondType>(a.rows, |_| Ok(Some(t)))
        })
        .alias(&["curtime"])
        .volatile(),
        SeaFn::new("current_timestamp", &[], 0, ret!(TS), |a, _| {
            let t = Local::now().naive_local().and_utc().timestamp_micros();
            prim_out::<TimestampMicrosecondType>(a.rows, |_| Ok(Some(t)))
        })
        .alias(&["now", "localtimestamp"])
        .volatile(),
        SeaFn::new("dateadd", &[T, I, S], 2, ret_first, dateadd)
            .alias(&["timestampadd", "date_add"]),
        SeaFn::new("datediff", &[T, T, S], 2, ret!(DataType::Int64), datediff),
        SeaFn::new("date_trunc", &[T, S], 1, ret!(TS), date_trunc),
        SeaFn::new("dayname", &[T], 1, ret!(DataType::Utf8), |a, _| {
            text_of_date(a, |d| WEEKDAYS[d.weekday().num_days_from_monday() as usize])
        }),
        SeaFn::new("monthname", &[T], 1, ret!(DataType::Utf8), |a, _| {
            text_of_date(a, |d| MONTHS[d.month0() as usize])
        }),
        SeaFn::new("day_of_month", &[T], 1, ret!(DataType::Int32), |a, _| {
            int_of(a, |v| v.date().map(|d| d.day() as i32))
        }),
        SeaFn::new("day_of_week", &[T], 1, ret!(DataType::Int32), |a, _| {
            int_of(a, |v| {
                v.date().map(|d| d.weekday().number_from_monday() as i32)
            })
        }),
        SeaFn::new("day_of_year", &[T], 1, ret!(DataType::Int32), |a, _| {
            int_of(a, |v| v.date().map(|d| d.ordinal() as i32))
        }),
        SeaFn::new("year", &[T], 1, ret!(DataType::Int32), |a, _| {
            int_of(a, |v| v.date().map(|d| d.year()))
        }),
        SeaFn::new("month", &[T], 1, ret!(DataType::Int32), |a, _| {
            int_of(a, |v| v.date().map(|d| d.month() as i32))
        }),
        SeaFn::new("quarter", &[T], 1, ret!(DataType::Int32), |a, _| {
            int_of(a, |v| v.date().map(|d| d.month0() as i32 / 3 + 1))
        }),
        SeaFn::new("week", &[T], 1, ret!(DataType::Int32), |a, _| {
            int_of(a, |v| v.date().map(iso_week_of_year_plus_one))
        }),
        SeaFn::new("hour", &[T], 1, ret!(DataType::Int32), |a, _| {
            int_of(a, |v| v.time().map(|t| t.hour() as i32))
        }),
        SeaFn::new("minute", &[T], 1, ret!(DataType::Int32), |a, _| {
            int_of(a, |v| v.time().map(|t| t.minute() as i32))
        }),
        SeaFn::new("second", &[T], 1, ret!(DataType::Int32), |a, _| {
            int_of(a, |v| v.time().map(|t| t.second() as i32))
        }),
        // EXTRACT(field FROM x) reaches the planner as date_part('field', x).
        SeaFn::new("date_part", &[S, T], 2, ret!(DataType::Int32), extract)
            .alias(&["datepart", "extract"]),
        SeaFn::new(
            "formatdatetime",
            &[T, S],
            2,
            ret!(DataType::Utf8),
            |a, r| format_kernel("formatdatetime", a, r),
        ),
        SeaFn::new("parsedatetime", &[S, S], 2, parse_ret, parsedatetime).alias(&["to_date"]),
        SeaFn::new("is_date", &[S, S], 2, ret!(DataType::Boolean), is_date),
        SeaFn::new(
            "from_unixtime",
            &[I, S, S],
            2,
            ret!(DataType::Utf8),
            from_unixtime,
        ),
    ]
}

/// One date, time or timestamp value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum TV {
    Date(NaiveDate),
    Ts(NaiveDateTime),
    Time(NaiveTime),
}

impl TV {
    fn date(self) -> Option<NaiveDate> {
        match self {
            TV::Date(d) => Some(d),
            TV::Ts(t) => Some(t.date()),
            TV::Time(_) => None,
        }
    }
    fn time(self) -> Option<NaiveTime> {
        match self {
            TV::Date(_) => None,
            TV::Ts(t) => Some(t.time()),
            TV::Time(t) => Some(t),
        }
    }
    /// As a date-time (a date at midnight, a time on 1970-01-01).
    fn datetime(self) -> NaiveDateTime {
        match self {
            TV::Date(d) => d.and_time(NaiveTime::MIN),
            TV::Ts(t) => t,
            TV::Time(t) => NaiveDate::default().and_time(t),
        }
    }
}

pub(crate) fn date_days(d: NaiveDate) -> i32 {
    d.num_days_from_ce() - UNIX_EPOCH_DAY
}

pub(crate) fn time_micros(t: NaiveTime) -> i64 {
    t.num_seconds_from_midnight() as i64 * 1_000_000 + (t.nanosecond() / 1000) as i64
}

fn ts_micros(t: NaiveDateTime) -> i64 {
    t.and_utc().timestamp_micros()
}

/// Reads row values of a temporal argument.
enum TCol<'a> {
    Date(super::Col<'a, arrow::array::PrimitiveArray<Date32Type>>),
    Ts(super::Col<'a, arrow::array::PrimitiveArray<TimestampMicrosecondType>>),
    Time(super::Col<'a, arrow::array::PrimitiveArray<Time64MicrosecondType>>),
}

impl TCol<'_> {
    fn get(&self, i: usize) -> Option<TV> {
        match self {
            TCol::Date(c) => c
                .get(i)
                .and_then(|d| NaiveDate::from_num_days_from_ce_opt(d + UNIX_EPOCH_DAY))
                .map(TV::Date),
            TCol::Ts(c) => c
                .get(i)
                .and_then(chrono::DateTime::<Utc>::from_timestamp_micros)
                .map(|d| TV::Ts(d.naive_utc())),
            TCol::Time(c) => c
                .get(i)
                .and_then(|m| {
                    NaiveTime::from_num_seconds_from_midnight_opt(
                        (m.div_euclid(1_000_000)) as u32,
                        (m.rem_euclid(1_000_000) * 1000) as u32,
                    )
                })
                .map(TV::Time),
        }
    }
}

fn tcol(a: &Args, k: usize) -> DFResult<TCol<'_>> {
    Ok(match a.data_type(k) {
        DataType::Date32 => TCol::Date(a.prim::<Date32Type>(k)?),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            TCol::Ts(a.prim::<TimestampMicrosecondType>(k)?)
        }
        DataType::Time64(TimeUnit::Microsecond) => TCol::Time(a.prim::<Time64MicrosecondType>(k)?),
        other => return exec_err!("expected a date, time or timestamp, found {other}"),
    })
}

/// Builds a column of the same temporal type as `ret` from row values.
fn temporal_out(
    rows: usize,
    ret: &DataType,
    mut f: impl FnMut(usize) -> DFResult<Option<TV>>,
) -> DFResult<ArrayRef> {
    Ok(match ret {
        DataType::Date32 => {
            prim_out::<Date32Type>(rows, |i| Ok(f(i)?.and_then(TV::date).map(date_days)))?
        }
        DataType::Time64(_) => prim_out::<Time64MicrosecondType>(rows, |i| {
            Ok(f(i)?.and_then(TV::time).map(time_micros))
        })?,
        DataType::Timestamp(_, _) => {
            let out = prim_out::<TimestampMicrosecondType>(rows, |i| {
                Ok(f(i)?.map(|v| ts_micros(v.datetime())))
            })?;
            Arc::new(
                out.as_primitive::<TimestampMicrosecondType>()
                    .clone()
                    .with_data_type(ret.clone()),
            )
        }
        other => return exec_err!("unexpected result type {other}"),
    })
}

fn int_of(a: &Args, f: impl Fn(TV) -> Option<i32>) -> DFResult<ArrayRef> {
    let c = tcol(a, 0)?;
    prim_out::<Int32Type>(a.rows, |i| Ok(c.get(i).and_then(&f)))
}

fn text_of_date(a: &Args, f: impl Fn(NaiveDate) -> &'static str) -> DFResult<ArrayRef> {
    let c = tcol(a, 0)?;
    str_out(a.rows, |i, buf| {
        Ok(match c.get(i).and_then(TV::date) {
            Some(d) => {
                buf.push_str(f(d));
                true
            }
            None => false,
        })
    })
}

/// `WeekFields.ISO.weekOfYear()` + 1, as SeaTunnel's WEEK.
fn iso_week_of_year_plus_one(d: NaiveDate) -> i32 {
    let dow = d.weekday().number_from_monday() as i32;
    let doy = d.ordinal() as i32;
    let week_start = (doy - dow).rem_euclid(7);
    let offset = if week_start + 1 > 4 {
        7 - week_start
    } else {
        -week_start
    };
    (7 + offset + (doy - 1)) / 7 + 1
}

fn field_arg(a: &Args, k: usize, i: usize, default: &str) -> DFResult<String> {
    if k >= a.len() {
        return Ok(default.to_string());
    }
    Ok(a.str(k)?
        .get(i)
        .map(|s| s.trim().to_ascii_uppercase())
        .unwrap_or_else(|| default.to_string()))
}

fn add_months(d: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let total = d.year() as i64 * 12 + d.month0() as i64 + months;
    let (y, m0) = (total.div_euclid(12) as i32, total.rem_euclid(12) as u32);
    // Java clamps the day to the month's length (Jan 31 + 1 month = Feb 28/29).
    let mut day = d.day();
    loop {
        if let Some(nd) = NaiveDate::from_ymd_opt(y, m0 + 1, day) {
            return Some(nd.and_time(d.time()));
        }
        if day <= 28 {
            return None;
        }
        day -= 1;
    }
}

fn dateadd(a: &Args, ret: &DataType) -> DFResult<ArrayRef> {
    let c = tcol(a, 0)?;
    let n = a.prim::<Int64Type>(1)?;
    temporal_out(a.rows, ret, |i| {
        let Some(v) = c.get(i) else { return Ok(None) };
        let Some(n) = n.get(i) else { return Ok(None) };
        let field = field_arg(a, 2, i, "DAY")?;
        let dt = v.datetime();
        let has_date = !matches!(v, TV::Time(_));
        let has_time = !matches!(v, TV::Date(_));
        let by = |d: Option<Duration>| d.and_then(|d| dt.checked_add_signed(d));
        let r = match field.as_str() {
            "YEAR" if has_date => add_months(dt, n.saturating_mul(12)),
            "MONTH" if has_date => add_months(dt, n),
            "WEEK" if has_date => by(Duration::try_weeks(n)),
            "DAY" if has_date => by(Duration::try_days(n)),
            "HOUR" if has_time => by(Duration::try_hours(n)),
            "MINUTE" if has_time => by(Duration::try_minutes(n)),
            "SECOND" if has_time => by(Duration::try_seconds(n)),
            "MILLISECOND" if has_time => by(Duration::try_milliseconds(n)),
            // SeaTunnel returns the value unchanged for a field the type lacks.
            "YEAR" | "MONTH" | "WEEK" | "DAY" | "HOUR" | "MINUTE" | "SECOND" | "MILLISECOND" => {
                Some(dt)
            }
            other => {
                return Err(fn_error(
                    "dateadd",
                    format!("unsupported date-time field '{other}'"),
                ))
            }
        };
        let Some(r) = r else {
            return Err(fn_error("dateadd", "result out of range"));
        };
        Ok(Some(match v {
            TV::Date(_) => TV::Date(r.date()),
            TV::Ts(_) => TV::Ts(r),
            TV::Time(_) => TV::Time(r.time()),
        }))
    })
}

/// Java's `Period.between(start, end)` as (years, months).
fn period_between(start: NaiveDate, end: NaiveDate) -> (i64, i64) {
    let pm = |d: NaiveDate| d.year() as i64 * 12 + d.month0() as i64;
    let mut total = pm(end) - pm(start);
    let days = end.day() as i64 - start.day() as i64;
    if total > 0 && days < 0 {
        total -= 1;
    } else if total < 0 && days > 0 {
        total += 1;
    }
    (total / 12, total % 12)
}

fn datediff(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (c1, c2) = (tcol(a, 0)?, tcol(a, 1)?);
    prim_out::<Int64Type>(a.rows, |i| {
        let (Some(v1), Some(v2)) = (c1.get(i), c2.get(i)) else {
            return Ok(None);
        };
        let field = field_arg(a, 2, i, "DAY")?;
        let dur = v2.datetime() - v1.datetime();
        Ok(match field.as_str() {
            "YEAR" => v1
                .date()
                .zip(v2.date())
                .map(|(x, y)| period_between(x, y).0),
            "MONTH" => v1
                .date()
                .zip(v2.date())
                .map(|(x, y)| period_between(x, y).1),
            "DAY" => v1.date().zip(v2.date()).map(|(x, y)| (y - x).num_days()),
            "WEEK" => Some(dur.num_days() / 7),
            "DAYTIME" => Some(dur.num_days()),
            "HOUR" => Some(dur.num_hours()),
            "MINUTE" => Some(dur.num_minutes()),
            "SECOND" => Some(dur.num_milliseconds() / 1000),
            "MILLISECOND" => Some(dur.num_milliseconds()),
            other => {
                return Err(fn_error(
                    "datediff",
                    format!("unsupported date-time field '{other}'"),
                ))
            }
        })
    })
}

fn date_trunc(a: &Args, ret: &DataType) -> DFResult<ArrayRef> {
    let c = tcol(a, 0)?;
    temporal_out(a.rows, ret, |i| {
        let Some(v) = c.get(i) else { return Ok(None) };
        let field = field_arg(a, 1, i, "DAY")?;
        let t = v.datetime();
        let (y, mut mo, mut d, mut h, mut mi, s) = (
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
        );
        let s = match field.as_str() {
            "YEAR" => {
                (mo, d, h, mi) = (1, 1, 0, 0);
                0
            }
            "MONTH" => {
                (d, h, mi) = (1, 0, 0);
                0
            }
            "DAY" => {
                (h, mi) = (0, 0);
                0
            }
            "HOUR" => {
                mi = 0;
                0
            }
            "MINUTE" => 0,
            "SECOND" => s,
            other => {
                return Err(fn_error(
                    "date_trunc",
                    format!("unsupported date-time field '{other}'"),
                ))
            }
        };
        Ok(NaiveDate::from_ymd_opt(y, mo, d)
            .and_then(|d| d.and_hms_opt(h, mi, s))
            .map(TV::Ts))
    })
}

fn extract(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let c = tcol(a, 1)?;
    let f = a.str(0)?;
    prim_out::<Int32Type>(a.rows, |i| {
        let Some(v) = c.get(i) else { return Ok(None) };
        let Some(field) = f.get(i) else {
            return Ok(None);
        };
        let field = field.trim().trim_matches('\'').to_ascii_uppercase();
        let (d, t) = (v.date(), v.time());
        Ok(match field.as_str() {
            "YEAR" => d.map(|d| d.year()),
            "MONTH" => d.map(|d| d.month() as i32),
            "DAY" => d.map(|d| d.day() as i32),
            "HOUR" => t.map(|t| t.hour() as i32),
            "MINUTE" => t.map(|t| t.minute() as i32),
            "SECOND" => t.map(|t| t.second() as i32),
            "MILLISECOND" => t.map(|t| (t.nanosecond() / 1_000_000) as i32),
            "DAYOFWEEK" | "DOW" => d.map(|d| d.weekday().number_from_monday() as i32),
            "DAYOFYEAR" | "DOY" => d.map(|d| d.ordinal() as i32),
            "QUARTER" => d.map(|d| d.month0() as i32 / 3 + 1),
            "WEEK" => d.map(iso_week_of_year_plus_one),
            other => {
                return Err(fn_error(
                    "extract",
                    format!("unsupported date-time field '{other}'"),
                ))
            }
        })
    })
}

/// A Java pattern compiled once per distinct pattern text (a constant pattern compiles
/// once per batch).
struct Formatter {
    fname: &'static str,
    key: Option<String>,
    pattern: Option<JavaPattern>,
}

impl Formatter {
    fn new(fname: &'static str) -> Self {
        Formatter {
            fname,
            key: None,
            pattern: None,
        }
    }
    fn set(&mut self, pattern: &str) -> DFResult<&JavaPattern> {
        if self.key.as_deref() != Some(pattern) || self.pattern.is_none() {
            self.pattern =
                Some(JavaPattern::compile(pattern).map_err(|e| fn_error(self.fname, e))?);
            self.key = Some(pattern.to_string());
        }
        self.pattern
            .as_ref()
            .ok_or_else(|| fn_error(self.fname, "no pattern"))
    }
}

/// FORMATDATETIME(x, pattern) and TO_CHAR(x, pattern).
pub(crate) fn format_kernel(fname: &'static str, a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let c = tcol(a, 0)?;
    let p = a.str(1)?;
    let mut fmt = Formatter::new(fname);
    str_out(a.rows, |i, buf| {
        let Some(v) = c.get(i) else { return Ok(false) };
        let Some(pat) = p.get(i) else {
            return Ok(false);
        };
        fmt.set(pat)?
            .format(v.date(), v.time(), buf)
            .map_err(|e| fn_error(fname, format!("{e} (pattern '{pat}')")))?;
        Ok(true)
    })
}

fn parse_ret(types: &[DataType], scalars: &[Option<&ScalarValue>]) -> DFResult<DataType> {
    let pattern = match scalars.get(1) {
        Some(Some(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
        )) => s.clone(),
        // Without a constant pattern (only while DataFusion checks types) assume a timestamp.
        _ if scalars.is_empty() || types.len() < 2 => return Ok(TS),
        _ => {
            return plan_err!(
                "function PARSEDATETIME()/TO_DATE(): the pattern must be a constant text"
            )
        }
    };
    match parse_kind(&pattern) {
        Some(ParseKind::Timestamp) => Ok(TS),
        Some(ParseKind::Date) => Ok(DataType::Date32),
        Some(ParseKind::Time) => Ok(TIME),
        None => plan_err!(
            "function PARSEDATETIME()/TO_DATE(): pattern '{pattern}' has neither 'yy' nor 'mm'"
        ),
    }
}

fn parse_one(text: &str, pattern: &str, p: &JavaPattern) -> Result<TV, String> {
    let bad = |e: String| format!("'{text}' does not match pattern '{pattern}': {e}");
    let parsed = p.parse(text).map_err(bad)?;
    match parse_kind(pattern) {
        Some(ParseKind::Timestamp) => parsed.datetime().map(TV::Ts).map_err(bad),
        Some(ParseKind::Date) => parsed.date().map(TV::Date).map_err(bad),
        Some(ParseKind::Time) => parsed.time().map(TV::Time).map_err(bad),
        None => Err(format!("pattern '{pattern}' has neither 'yy' nor 'mm'")),
    }
}

fn parsedatetime(a: &Args, ret: &DataType) -> DFResult<ArrayRef> {
    let (s, p) = (a.str(0)?, a.str(1)?);
    let mut fmt = Formatter::new("parsedatetime");
    temporal_out(a.rows, ret, |i| {
        let (Some(text), Some(pat)) = (s.get(i), p.get(i)) else {
            return Ok(None);
        };
        parse_one(text, pat, fmt.set(pat)?)
            .map(Some)
            .map_err(|e| fn_error("parsedatetime", e))
    })
}

fn is_date(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, p) = (a.str(0)?, a.str(1)?);
    let mut fmt = Formatter::new("is_date");
    bool_out(a.rows, |i| {
        // SeaTunnel: a null text parses to null without failing, so it "is a date".
        let Some(text) = s.get(i) else {
            return Ok(Some(true));
        };
        let Some(pat) = p.get(i) else {
            return Ok(Some(false));
        };
        Ok(Some(match fmt.set(pat) {
            Ok(jp) => parse_one(text, pat, jp).is_ok(),
            Err(_) => false,
        }))
    })
}

/// A zone as `UTC`, `Z`, `GMT`, `+08:00`, `UTC+8`, `GMT-05:30`.
fn parse_offset(zone: &str) -> Option<FixedOffset> {
    let z = zone.trim();
    let rest = z
        .strip_prefix("UTC")
        .or_else(|| z.strip_prefix("GMT"))
        .unwrap_or(z);
    if rest.is_empty() || rest == "Z" {
        return FixedOffset::east_opt(0);
    }
    let (sign, body) = match rest.as_bytes().first()? {
        b'+' => (1, &rest[1..]),
        b'-' => (-1, &rest[1..]),
        _ => return None,
    };
    let (h, m) = match body.split_once(':') {
        Some((h, m)) => (h.parse::<i32>().ok()?, m.parse::<i32>().ok()?),
        None if body.len() == 4 => (body[..2].parse().ok()?, body[2..].parse().ok()?),
        None => (body.parse().ok()?, 0),
    };
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
}

fn from_unixtime(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let secs = a.prim::<Int64Type>(0)?;
    let p = a.str(1)?;
    let zone = if a.len() > 2 { Some(a.str(2)?) } else { None };
    let mut fmt = Formatter::new("from_unixtime");
    str_out(a.rows, |i, buf| {
        let Some(s) = secs.get(i) else {
            return Ok(false);
        };
        let Some(pat) = p.get(i) else {
            return Ok(false);
        };
        let jp = fmt.set(pat)?;
        let instant = Utc
            .timestamp_opt(s, 0)
            .single()
            .ok_or_else(|| fn_error("from_unixtime", format!("{s} is out of range")))?;
        let local = match zone.as_ref().and_then(|z| z.get(i)) {
            Some(z) => {
                if let Some(off) = parse_offset(z) {
                    instant.with_timezone(&off).naive_local()
                } else {
                    // A region id, as Java's ZoneId.of("Asia/Shanghai").
                    let tz: chrono_tz::Tz = z.trim().parse().map_err(|_| {
                        fn_error(
                            "from_unixtime",
                            format!("unknown time zone '{z}' (use a region such as Asia/Shanghai, UTC, or an offset such as UTC+8)"),
                        )
                    })?;
                    instant.with_timezone(&tz).naive_local()
                }
            }
            None => instant.with_timezone(&Local).naive_local(),
        };
        jp.format(Some(local.date()), Some(local.time()), buf)
            .map_err(|e| fn_error("from_unixtime", e))?;
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn week_matches_java_iso_week_of_year_plus_one() {
        // 2022-01-01 is a Saturday: ISO weekOfYear 0 → WEEK 1.
        assert_eq!(
            iso_week_of_year_plus_one(NaiveDate::from_ymd_opt(2022, 1, 1).unwrap()),
            1
        );
        // 2022-01-03 is Monday of week 1 → 2.
        assert_eq!(
            iso_week_of_year_plus_one(NaiveDate::from_ymd_opt(2022, 1, 3).unwrap()),
            2
        );
        // 2020-01-01 is a Wednesday: week 1 → 2.
        assert_eq!(
            iso_week_of_year_plus_one(NaiveDate::from_ymd_opt(2020, 1, 1).unwrap()),
            2
        );
    }

    #[test]
    fn period_between_is_javas() {
        let d = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
        assert_eq!(period_between(d(2020, 1, 15), d(2021, 3, 14)), (1, 1));
        assert_eq!(period_between(d(2021, 3, 14), d(2020, 1, 15)), (-1, -1));
    }

    #[test]
    fn offsets() {
        assert_eq!(parse_offset("UTC+8"), FixedOffset::east_opt(8 * 3600));
        assert_eq!(
            parse_offset("-05:30"),
            FixedOffset::east_opt(-(5 * 3600 + 1800))
        );
        assert_eq!(parse_offset("Asia/Shanghai"), None);
    }
}
