//! SeaTunnel's text encoding of values, both ways: columns split by a delimiter, and
//! nested values (array items, map entries, row fields) split by level separators
//! `\u0002`, `\u0003`, … as `TextDeserializationSchema`/`TextSerializationSchema` do.
//!
//! Parsing appends straight into typed column builders ([`Col`]) and encoding writes
//! straight from typed arrays ([`Enc`]), so no value is boxed on the way.

use std::sync::Arc;

use arrow::array::*;
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::*;
use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use ferry_api::javatime::JavaPattern;
use ferry_api::value::{
    format_date, format_decimal, parse_date, parse_decimal, parse_time, parse_timestamp,
};

use crate::util::java_pattern_to_chrono;

/// SeaTunnel's separators by nesting level (`TextFormatConstant.SEPARATOR`).
pub const SEPARATORS: [&str; 7] = [
    "\u{1}", "\u{2}", "\u{3}", "\u{4}", "\u{5}", "\u{6}", "\u{7}",
];

const UNIX_EPOCH_DAY: i32 = 719_163;

/// A `date_format`, `datetime_format` or `time_format`.
#[derive(Debug, Clone)]
pub enum TimeFormat {
    /// A Java pattern, read as `DateTimeFormatter.ofPattern` reads it (SMART resolving);
    /// numeric patterns (all those SeaTunnel documents) take the byte-level fast path.
    Java(JavaPattern),
    /// A chrono format, for patterns Java would reject (zone letters…), read as before
    /// they were compiled.
    Chrono(String),
}

impl TimeFormat {
    /// The format for Java pattern `p`.
    pub fn from_java(p: &str) -> TimeFormat {
        match JavaPattern::compile(p) {
            Ok(j) => TimeFormat::Java(j),
            Err(_) => TimeFormat::Chrono(java_pattern_to_chrono(p)),
        }
    }
}

/// How dates and times are written in text: Java patterns, or `None` for the
/// SeaTunnel default (`yyyy-MM-dd`, `yyyy-MM-dd HH:mm:ss`, `HH:mm:ss`), which is read
/// leniently (a `T`, fractions of a second…). A value that does not match its pattern is
/// also tried with the lenient default.
#[derive(Debug, Clone, Default)]
pub struct TimeFormats {
    /// Date format.
    pub date: Option<TimeFormat>,
    /// Date-time format.
    pub datetime: Option<TimeFormat>,
    /// Time format.
    pub time: Option<TimeFormat>,
}

impl TimeFormats {
    /// Days since the epoch of date text.
    pub fn parse_date(&self, s: &str) -> Option<i32> {
        let days = |d: NaiveDate| chrono::Datelike::num_days_from_ce(&d) - UNIX_EPOCH_DAY;
        match &self.date {
            Some(TimeFormat::Java(j)) => {
                if let Ok(d) = j.parse(s.trim()).and_then(|p| p.date()) {
                    return Some(days(d));
                }
            }
            Some(TimeFormat::Chrono(f)) => {
                if let Ok(d) = NaiveDate::parse_from_str(s.trim(), f) {
                    return Some(days(d));
                }
            }
            None => {}
        }
        parse_date(s)
    }

    /// Microseconds since the epoch of date-time text.
    pub fn parse_datetime(&self, s: &str) -> Option<i64> {
        match &self.datetime {
            Some(TimeFormat::Java(j)) => {
                if let Ok(d) = j.parse(s.trim()).and_then(|p| p.datetime()) {
                    return Some(d.and_utc().timestamp_micros());
                }
            }
            Some(TimeFormat::Chrono(f)) => {
                if let Ok(d) = NaiveDateTime::parse_from_str(s.trim(), f) {
                    return Some(d.and_utc().timestamp_micros());
                }
            }
            None => {}
        }
        parse_timestamp(s)
    }

    /// Microseconds since midnight of time text.
    pub fn parse_time(&self, s: &str) -> Option<i64> {
        let micros = |t: NaiveTime| {
            t.num_seconds_from_midnight() as i64 * 1_000_000 + (t.nanosecond() / 1000) as i64
        };
        match &self.time {
            Some(TimeFormat::Java(j)) => {
                if let Ok(t) = j.parse(s.trim()).and_then(|p| p.time()) {
                    return Some(micros(t));
                }
            }
            Some(TimeFormat::Chrono(f)) => {
                if let Ok(t) = NaiveTime::parse_from_str(s.trim(), f) {
                    return Some(micros(t));
                }
            }
            None => {}
        }
        parse_time(s)
    }

    /// Whether `dt` is a date, time or timestamp type with a pattern of its own here.
    pub fn has_format_for(&self, dt: &DataType) -> bool {
        match dt {
            DataType::Date32 => self.date.is_some(),
            DataType::Time64(_) => self.time.is_some(),
            DataType::Timestamp(_, _) => self.datetime.is_some(),
            _ => false,
        }
    }

    /// Parses a column of date, time or timestamp text (blank is null, as in
    /// [`Col::append`]) into type `dt`; on a bad value, its row and the error.
    pub fn parse_column(
        &self,
        text: &StringArray,
        dt: &DataType,
    ) -> Result<ArrayRef, (usize, String)> {
        // The hot path (a pattern on every row of a CSV column): integers straight from
        // the bytes into the values buffer; a value it does not settle takes `Col`'s way.
        match (dt, &self.datetime, &self.date) {
            (DataType::Timestamp(TimeUnit::Microsecond, tz), Some(TimeFormat::Java(j)), _) => {
                let values = self.parse_fast(
                    text,
                    |b| j.fast_datetime_micros(b),
                    |s| self.parse_datetime(s).ok_or_else(|| bad(s, "timestamp")),
                )?;
                let a = TimestampMicrosecondArray::new(values.0.into(), values.1);
                return Ok(Arc::new(a.with_timezone_opt(tz.clone())));
            }
            (DataType::Date32, _, Some(TimeFormat::Java(j))) => {
                let values = self.parse_fast(
                    text,
                    |b| j.fast_date_days(b),
                    |s| self.parse_date(s).ok_or_else(|| bad(s, "date")),
                )?;
                return Ok(Arc::new(Date32Array::new(values.0.into(), values.1)));
            }
            _ => {}
        }
        let mut col = Col::new(dt).map_err(|e| (0, e))?;
        for (i, v) in text.iter().enumerate() {
            match v {
                None => col.append_null(),
                Some(s) => col.append(s, 0, self).map_err(|e| (i, e))?,
            }
        }
        col.finish().map_err(|e| (0, e))
    }
}

impl TimeFormats {
    /// Values and nulls of a temporal column: `fast` first on each value's bytes, `slow`
    /// (with its error) when it declines. Blank text is null, as in [`Col::append`].
    fn parse_fast<T: Copy + Default>(
        &self,
        text: &StringArray,
        fast: impl Fn(&[u8]) -> Option<T>,
        slow: impl Fn(&str) -> Result<T, String>,
    ) -> Result<(Vec<T>, Option<NullBuffer>), (usize, String)> {
        let mut values = Vec::with_capacity(text.len());
        let mut nulls = arrow::array::BooleanBufferBuilder::new(text.len());
        let mut any_null = false;
        for (i, v) in text.iter().enumerate() {
            let Some(s) = v else {
                values.push(T::default());
                nulls.append(false);
                any_null = true;
                continue;
            };
            if let Some(x) = fast(s.as_bytes()) {
                values.push(x);
                nulls.append(true);
            } else if s.trim().is_empty() {
                values.push(T::default());
                nulls.append(false);
                any_null = true;
            } else {
                values.push(slow(s).map_err(|e| (i, e))?);
                nulls.append(true);
            }
        }
        let nulls = any_null.then(|| NullBuffer::new(nulls.finish()));
        Ok((values, nulls))
    }
}

/// A column being built from text values.
#[derive(Debug)]
pub enum Col {
    /// `string`.
    Utf8(StringBuilder),
    /// `boolean`.
    Bool(BooleanBuilder),
    /// `tinyint`.
    I8(Int8Builder),
    /// `smallint`.
    I16(Int16Builder),
    /// `int`.
    I32(Int32Builder),
    /// `bigint`.
    I64(Int64Builder),
    /// `float`.
    F32(Float32Builder),
    /// `double`.
    F64(Float64Builder),
    /// `decimal(p, s)`.
    Dec(Decimal128Builder, u8, i8),
    /// `bytes` (the text's UTF-8 bytes, as SeaTunnel).
    Bin(BinaryBuilder),
    /// `date`.
    Date(Date32Builder),
    /// `time`.
    Time(Time64MicrosecondBuilder),
    /// `timestamp` (and `timestamp_tz`, read as UTC).
    Ts(TimestampMicrosecondBuilder, Option<Arc<str>>),
    /// `null`: only counts rows.
    Null(usize),
    /// `array<T>`.
    List {
        field: FieldRef,
        offsets: Vec<i32>,
        nulls: NullBufferBuilder,
        child: Box<Col>,
    },
    /// `map<K, V>`.
    Map {
        entries: FieldRef,
        sorted: bool,
        offsets: Vec<i32>,
        nulls: NullBufferBuilder,
        keys: Box<Col>,
        values: Box<Col>,
    },
    /// A nested row.
    Struct {
        fields: Fields,
        nulls: NullBufferBuilder,
        children: Vec<Col>,
    },
}

impl Col {
    /// A builder for `dt`.
    pub fn new(dt: &DataType) -> Result<Col, String> {
        Ok(match dt {
            DataType::Utf8 => Col::Utf8(StringBuilder::new()),
            DataType::Boolean => Col::Bool(BooleanBuilder::new()),
            DataType::Int8 => Col::I8(Int8Builder::new()),
            DataType::Int16 => Col::I16(Int16Builder::new()),
            DataType::Int32 => Col::I32(Int32Builder::new()),
            DataType::Int64 => Col::I64(Int64Builder::new()),
            DataType::Float32 => Col::F32(Float32Builder::new()),
            DataType::Float64 => Col::F64(Float64Builder::new()),
            DataType::Decimal128(p, s) => Col::Dec(Decimal128Builder::new(), *p, *s),
            DataType::Binary => Col::Bin(BinaryBuilder::new()),
            DataType::Date32 => Col::Date(Date32Builder::new()),
            DataType::Time64(TimeUnit::Microsecond) => Col::Time(Time64MicrosecondBuilder::new()),
            DataType::Timestamp(TimeUnit::Microsecond, tz) => {
                Col::Ts(TimestampMicrosecondBuilder::new(), tz.clone())
            }
            DataType::Null => Col::Null(0),
            DataType::List(f) => Col::List {
                field: f.clone(),
                offsets: vec![0],
                nulls: NullBufferBuilder::new(0),
                child: Box::new(Col::new(f.data_type())?),
            },
            DataType::Map(entries, sorted) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err(format!("unsupported map type {dt}"));
                };
                if kv.len() != 2 {
                    return Err(format!("unsupported map type {dt}"));
                }
                Col::Map {
                    entries: entries.clone(),
                    sorted: *sorted,
                    offsets: vec![0],
                    nulls: NullBufferBuilder::new(0),
                    keys: Box::new(Col::new(kv[0].data_type())?),
                    values: Box::new(Col::new(kv[1].data_type())?),
                }
            }
            DataType::Struct(fields) => Col::Struct {
                fields: fields.clone(),
                nulls: NullBufferBuilder::new(0),
                children: fields
                    .iter()
                    .map(|f| Col::new(f.data_type()))
                    .collect::<Result<_, _>>()?,
            },
            other => return Err(format!("type {other} is not supported by the text format")),
        })
    }

    /// Appends a null.
    pub fn append_null(&mut self) {
        match self {
            Col::Utf8(b) => b.append_null(),
            Col::Bool(b) => b.append_null(),
            Col::I8(b) => b.append_null(),
            Col::I16(b) => b.append_null(),
            Col::I32(b) => b.append_null(),
            Col::I64(b) => b.append_null(),
            Col::F32(b) => b.append_null(),
            Col::F64(b) => b.append_null(),
            Col::Dec(b, _, _) => b.append_null(),
            Col::Bin(b) => b.append_null(),
            Col::Date(b) => b.append_null(),
            Col::Time(b) => b.append_null(),
            Col::Ts(b, _) => b.append_null(),
            Col::Null(n) => *n += 1,
            Col::List { offsets, nulls, .. } => {
                offsets.push(*offsets.last().unwrap_or(&0));
                nulls.append_null();
            }
            Col::Map { offsets, nulls, .. } => {
                offsets.push(*offsets.last().unwrap_or(&0));
                nulls.append_null();
            }
            Col::Struct {
                nulls, children, ..
            } => {
                nulls.append_null();
                for c in children {
                    c.append_null();
                }
            }
        }
    }

    /// Appends the value written as `s` at nesting `level` (0 for a top-level column).
    /// Blank text is null, as in SeaTunnel.
    pub fn append(&mut self, s: &str, level: usize, tf: &TimeFormats) -> Result<(), String> {
        if s.trim().is_empty() {
            self.append_null();
            return Ok(());
        }
        macro_rules! num {
            ($b:expr, $t:ty, $name:expr) => {{
                let v = s.trim().parse::<$t>().map_err(|_| bad(s, $name))?;
                $b.append_value(v);
            }};
        }
        match self {
            Col::Utf8(b) => b.append_value(s),
            Col::Bool(b) => {
                let t = s.trim();
                let v = if t.eq_ignore_ascii_case("true") || t == "1" {
                    true
                } else if t.eq_ignore_ascii_case("false") || t == "0" {
                    false
                } else {
                    return Err(bad(s, "boolean"));
                };
                b.append_value(v);
            }
            Col::I8(b) => num!(b, i8, "tinyint"),
            Col::I16(b) => num!(b, i16, "smallint"),
            Col::I32(b) => num!(b, i32, "int"),
            Col::I64(b) => num!(b, i64, "bigint"),
            Col::F32(b) => num!(b, f32, "float"),
            Col::F64(b) => num!(b, f64, "double"),
            Col::Dec(b, p, sc) => {
                let v = parse_decimal(s, *sc).ok_or_else(|| bad(s, "decimal"))?;
                if v.unsigned_abs() >= 10u128.pow(*p as u32) {
                    return Err(format!("value '{s}' does not fit decimal({p}, {sc})"));
                }
                b.append_value(v);
            }
            Col::Bin(b) => b.append_value(s.as_bytes()),
            Col::Date(b) => b.append_value(tf.parse_date(s).ok_or_else(|| bad(s, "date"))?),
            Col::Time(b) => b.append_value(tf.parse_time(s).ok_or_else(|| bad(s, "time"))?),
            Col::Ts(b, _) => {
                b.append_value(tf.parse_datetime(s).ok_or_else(|| bad(s, "timestamp"))?)
            }
            Col::Null(n) => *n += 1,
            Col::List {
                offsets,
                nulls,
                child,
                ..
            } => {
                let sep = separator(level + 1)?;
                let mut n = 0i32;
                for item in split_dropping_trailing_empty(s, sep) {
                    child.append(item, level + 1, tf)?;
                    n += 1;
                }
                offsets.push(offsets.last().copied().unwrap_or(0) + n);
                nulls.append_non_null();
            }
            Col::Map {
                offsets,
                nulls,
                keys,
                values,
                ..
            } => {
                let entry_sep = separator(level + 1)?;
                let kv_sep = separator(level + 2)?;
                let mut n = 0i32;
                for entry in split_dropping_trailing_empty(s, entry_sep) {
                    let mut parts = entry.split(kv_sep);
                    let k = parts.next().unwrap_or("");
                    if k.trim().is_empty() {
                        return Err(format!("map entry '{entry}' has an empty key"));
                    }
                    keys.append(k, level + 1, tf)?;
                    match parts.next() {
                        Some(v) => values.append(v, level + 1, tf)?,
                        None => values.append_null(),
                    }
                    n += 1;
                }
                offsets.push(offsets.last().copied().unwrap_or(0) + n);
                nulls.append_non_null();
            }
            Col::Struct {
                fields,
                nulls,
                children,
            } => {
                let sep = separator(level + 1)?;
                let mut i = 0;
                for part in s.split(sep) {
                    if i == children.len() {
                        break; // Extra fields are ignored, as SeaTunnel does.
                    }
                    children[i]
                        .append(part, level + 1, tf)
                        .map_err(|e| format!("field '{}': {e}", fields[i].name()))?;
                    i += 1;
                }
                for c in &mut children[i..] {
                    c.append_null();
                }
                nulls.append_non_null();
            }
        }
        Ok(())
    }

    /// The built array; the builder is left empty for the next batch.
    pub fn finish(&mut self) -> Result<ArrayRef, String> {
        Ok(match self {
            Col::Utf8(b) => Arc::new(b.finish()),
            Col::Bool(b) => Arc::new(b.finish()),
            Col::I8(b) => Arc::new(b.finish()),
            Col::I16(b) => Arc::new(b.finish()),
            Col::I32(b) => Arc::new(b.finish()),
            Col::I64(b) => Arc::new(b.finish()),
            Col::F32(b) => Arc::new(b.finish()),
            Col::F64(b) => Arc::new(b.finish()),
            Col::Dec(b, p, s) => Arc::new(
                b.finish()
                    .with_precision_and_scale(*p, *s)
                    .map_err(|e| e.to_string())?,
            ),
            Col::Bin(b) => Arc::new(b.finish()),
            Col::Date(b) => Arc::new(b.finish()),
            Col::Time(b) => Arc::new(b.finish()),
            Col::Ts(b, tz) => Arc::new(b.finish().with_timezone_opt(tz.clone())),
            Col::Null(n) => {
                let a = NullArray::new(*n);
                *n = 0;
                Arc::new(a)
            }
            Col::List {
                field,
                offsets,
                nulls,
                child,
            } => {
                let off = std::mem::replace(offsets, vec![0]);
                let values = child.finish()?;
                Arc::new(
                    ListArray::try_new(
                        field.clone(),
                        OffsetBuffer::new(off.into()),
                        values,
                        nulls.finish(),
                    )
                    .map_err(|e| e.to_string())?,
                )
            }
            Col::Map {
                entries,
                sorted,
                offsets,
                nulls,
                keys,
                values,
            } => {
                let off = std::mem::replace(offsets, vec![0]);
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err("map entries must be a struct".into());
                };
                let st =
                    StructArray::try_new(kv.clone(), vec![keys.finish()?, values.finish()?], None)
                        .map_err(|e| e.to_string())?;
                Arc::new(
                    MapArray::try_new(
                        entries.clone(),
                        OffsetBuffer::new(off.into()),
                        st,
                        nulls.finish(),
                        *sorted,
                    )
                    .map_err(|e| e.to_string())?,
                )
            }
            Col::Struct {
                fields,
                nulls,
                children,
            } => {
                let cols = children
                    .iter_mut()
                    .map(|c| c.finish())
                    .collect::<Result<Vec<_>, _>>()?;
                let n: Option<NullBuffer> = nulls.finish();
                Arc::new(StructArray::try_new(fields.clone(), cols, n).map_err(|e| e.to_string())?)
            }
        })
    }
}

fn bad(s: &str, ty: &str) -> String {
    format!("value '{s}' is not a valid {ty}")
}

fn separator(level: usize) -> Result<&'static str, String> {
    SEPARATORS.get(level).copied().ok_or_else(|| {
        format!(
            "values nested deeper than {} levels cannot be written as text",
            SEPARATORS.len() - 1
        )
    })
}

/// Java's `String.split(sep)` (limit 0): trailing empty pieces are dropped.
fn split_dropping_trailing_empty<'a>(s: &'a str, sep: &'a str) -> impl Iterator<Item = &'a str> {
    let trimmed = {
        let mut t = s;
        while let Some(r) = t.strip_suffix(sep) {
            t = r;
        }
        t
    };
    let empty = trimmed.is_empty();
    trimmed.split(sep).filter(move |_| !empty)
}

/// Writes the values of one column as text, appending to a line buffer.
pub enum Enc<'a> {
    /// Any primitive or string column, written through a closure-free match.
    Leaf(&'a dyn Array, LeafKind),
    /// `array<T>`.
    List(&'a ListArray, Box<Enc<'a>>),
    /// `map<K, V>`.
    Map(&'a MapArray, Box<Enc<'a>>, Box<Enc<'a>>),
    /// A nested row.
    Struct(&'a StructArray, Vec<Enc<'a>>),
}

/// The kind of a leaf column, decided once per batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafKind {
    /// `string`.
    Utf8,
    /// `boolean`.
    Bool,
    /// Integers of any width.
    Int,
    /// `float`.
    F32,
    /// `double`.
    F64,
    /// `decimal(p, s)`.
    Dec(i8),
    /// `bytes`.
    Bin,
    /// `date`.
    Date,
    /// `time`.
    Time,
    /// `timestamp`.
    Ts,
    /// `null`.
    Null,
}

impl<'a> Enc<'a> {
    /// An encoder for `a`.
    pub fn new(a: &'a dyn Array) -> Result<Enc<'a>, String> {
        Ok(match a.data_type() {
            DataType::Utf8 => Enc::Leaf(a, LeafKind::Utf8),
            DataType::Boolean => Enc::Leaf(a, LeafKind::Bool),
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                Enc::Leaf(a, LeafKind::Int)
            }
            DataType::Float32 => Enc::Leaf(a, LeafKind::F32),
            DataType::Float64 => Enc::Leaf(a, LeafKind::F64),
            DataType::Decimal128(_, s) => Enc::Leaf(a, LeafKind::Dec(*s)),
            DataType::Binary => Enc::Leaf(a, LeafKind::Bin),
            DataType::Date32 => Enc::Leaf(a, LeafKind::Date),
            DataType::Time64(TimeUnit::Microsecond) => Enc::Leaf(a, LeafKind::Time),
            DataType::Timestamp(TimeUnit::Microsecond, _) => Enc::Leaf(a, LeafKind::Ts),
            DataType::Null => Enc::Leaf(a, LeafKind::Null),
            DataType::List(_) => {
                let l = a.as_list::<i32>();
                Enc::List(l, Box::new(Enc::new(l.values().as_ref())?))
            }
            DataType::Map(_, _) => {
                let m = a.as_map();
                Enc::Map(
                    m,
                    Box::new(Enc::new(m.keys().as_ref())?),
                    Box::new(Enc::new(m.values().as_ref())?),
                )
            }
            DataType::Struct(_) => {
                let s = a.as_struct();
                Enc::Struct(
                    s,
                    s.columns()
                        .iter()
                        .map(|c| Enc::new(c.as_ref()))
                        .collect::<Result<_, _>>()?,
                )
            }
            other => return Err(format!("type {other} cannot be written as text")),
        })
    }

    /// Appends value `i` at nesting `level`; a null writes nothing (SeaTunnel's empty
    /// null text).
    pub fn write(&self, i: usize, level: usize, out: &mut String) -> Result<(), String> {
        use std::fmt::Write;
        match self {
            Enc::Leaf(a, kind) => {
                if a.is_null(i) {
                    return Ok(());
                }
                match kind {
                    LeafKind::Utf8 => out.push_str(a.as_string::<i32>().value(i)),
                    LeafKind::Bool => out.push_str(if a.as_boolean().value(i) {
                        "true"
                    } else {
                        "false"
                    }),
                    LeafKind::Int => {
                        let v = match a.data_type() {
                            DataType::Int8 => a.as_primitive::<Int8Type>().value(i) as i64,
                            DataType::Int16 => a.as_primitive::<Int16Type>().value(i) as i64,
                            DataType::Int32 => a.as_primitive::<Int32Type>().value(i) as i64,
                            _ => a.as_primitive::<Int64Type>().value(i),
                        };
                        let _ = write!(out, "{v}");
                    }
                    LeafKind::F32 => {
                        let v = a.as_primitive::<Float32Type>().value(i);
                        ferry_api::javatext::write_java_f32(out, v);
                    }
                    LeafKind::F64 => {
                        let v = a.as_primitive::<Float64Type>().value(i);
                        ferry_api::javatext::write_java_f64(out, v);
                    }
                    LeafKind::Dec(s) => {
                        // BigDecimal.stripTrailingZeros().toPlainString()
                        let t = format_decimal(a.as_primitive::<Decimal128Type>().value(i), *s);
                        let t = if t.contains('.') {
                            t.trim_end_matches('0').trim_end_matches('.')
                        } else {
                            t.as_str()
                        };
                        out.push_str(t);
                    }
                    LeafKind::Bin => {
                        out.push_str(&String::from_utf8_lossy(a.as_binary::<i32>().value(i)))
                    }
                    LeafKind::Date => {
                        out.push_str(&format_date(a.as_primitive::<Date32Type>().value(i)))
                    }
                    LeafKind::Time => {
                        let us = a.as_primitive::<Time64MicrosecondType>().value(i);
                        let (secs, frac) = (us.div_euclid(1_000_000), us.rem_euclid(1_000_000));
                        let _ = write!(
                            out,
                            "{:02}:{:02}:{:02}",
                            secs / 3600,
                            (secs / 60) % 60,
                            secs % 60
                        );
                        if frac != 0 {
                            let _ = write!(out, ".{frac:06}");
                        }
                    }
                    LeafKind::Ts => {
                        let us = a.as_primitive::<TimestampMicrosecondType>().value(i);
                        match chrono::DateTime::from_timestamp_micros(us) {
                            Some(dt) => {
                                let _ =
                                    write!(out, "{}", dt.naive_utc().format("%Y-%m-%d %H:%M:%S"));
                                // SeaTunnel's default pattern drops fractions; keeping them
                                // (only when present) loses nothing and still reads back.
                                let frac = us.rem_euclid(1_000_000);
                                if frac != 0 {
                                    let _ = write!(out, ".{frac:06}");
                                }
                            }
                            None => return Err(format!("timestamp {us} µs is out of range")),
                        }
                    }
                    LeafKind::Null => {}
                }
            }
            Enc::List(l, child) => {
                if l.is_null(i) {
                    return Ok(());
                }
                let sep = separator(level + 1)?;
                let (start, end) = (
                    l.value_offsets()[i] as usize,
                    l.value_offsets()[i + 1] as usize,
                );
                for j in start..end {
                    if j > start {
                        out.push_str(sep);
                    }
                    child.write(j, level + 1, out)?;
                }
            }
            Enc::Map(m, k, v) => {
                if m.is_null(i) {
                    return Ok(());
                }
                let entry_sep = separator(level + 1)?;
                let kv_sep = separator(level + 2)?;
                let (start, end) = (
                    m.value_offsets()[i] as usize,
                    m.value_offsets()[i + 1] as usize,
                );
                for j in start..end {
                    if j > start {
                        out.push_str(entry_sep);
                    }
                    k.write(j, level + 1, out)?;
                    out.push_str(kv_sep);
                    v.write(j, level + 1, out)?;
                }
            }
            Enc::Struct(s, children) => {
                if s.is_null(i) {
                    return Ok(());
                }
                let sep = separator(level + 1)?;
                for (n, c) in children.iter().enumerate() {
                    if n > 0 {
                        out.push_str(sep);
                    }
                    c.write(i, level + 1, out)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::types::parse_type;

    fn parse_one(t: &str, s: &str) -> Result<ArrayRef, String> {
        let mut c = Col::new(&parse_type(t).unwrap())?;
        c.append(s, 0, &TimeFormats::default())?;
        c.finish()
    }

    fn encode(a: &ArrayRef) -> String {
        let mut out = String::new();
        Enc::new(a.as_ref()).unwrap().write(0, 0, &mut out).unwrap();
        out
    }

    #[test]
    fn nested_values_use_level_separators_both_ways() {
        for (t, s) in [
            ("array<int>", "1\u{2}2\u{2}3"),
            ("map<string, string>", "a\u{3}x\u{2}b\u{3}y"),
            (
                "{m = map<string, string>, a = array<int>, s = string}",
                "k\u{4}v\u{3}k2\u{4}v2\u{2}7\u{3}8\u{2}text",
            ),
            ("decimal(38, 18)", "76258155390368615610.764625237318660291"),
            ("timestamp", "2023-05-08 16:08:51"),
            ("float", "2.4798444E38"),
            ("double", "9.52375328387482E307"),
            ("date", "2023-06-07"),
            ("time", "12:34:56"),
            ("bytes", "vcIGF"),
        ] {
            let a = parse_one(t, s).unwrap();
            assert_eq!(encode(&a), s, "{t}");
        }
    }

    #[test]
    fn blank_is_null_and_missing_row_fields_are_null() {
        let a = parse_one("int", "  ").unwrap();
        assert!(a.is_null(0));
        let a = parse_one("{a = int, b = string}", "5").unwrap();
        let s = a.as_struct();
        assert_eq!(s.column(0).as_primitive::<Int32Type>().value(0), 5);
        assert!(s.column(1).is_null(0));
    }

    #[test]
    fn bad_values_name_the_value_and_type() {
        assert_eq!(
            parse_one("int", "12x").unwrap_err(),
            "value '12x' is not a valid int"
        );
        assert!(parse_one("{a = int}", "zz")
            .unwrap_err()
            .contains("field 'a'"));
        assert!(parse_one("decimal(3, 0)", "12345")
            .unwrap_err()
            .contains("does not fit"));
    }

    #[test]
    fn custom_formats_are_tried_first() {
        let tf = TimeFormats {
            date: Some(TimeFormat::from_java("yyyy.MM.dd")),
            datetime: Some(TimeFormat::from_java("yyyyMMddHHmmss")),
            time: None,
        };
        let mut c = Col::new(&DataType::Date32).unwrap();
        c.append("2024.01.26", 0, &tf).unwrap();
        let a = c.finish().unwrap();
        assert_eq!(
            format_date(a.as_primitive::<Date32Type>().value(0)),
            "2024-01-26"
        );
    }
}
