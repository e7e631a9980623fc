//! Rows into Arrow columns without a value per row: PostgreSQL's binary COPY stream parsed
//! in place and appended to typed builders, and MySQL's text values parsed the same way.
//!
//! The COPY stream arrives in chunks that cut rows anywhere; [`CopyDecoder`] keeps the
//! unconsumed tail, finds each complete row's end first and only then appends it, so a
//! batch never holds half a row.

use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use bytes::{Buf, BytesMut};
use ferry_api::value::{parse_date, parse_decimal, parse_timestamp};
use ferry_api::{FerryError, Result};

use crate::types::{ArrayElem, ColumnDef, Wire};

/// Microseconds from 1970-01-01 to PostgreSQL's epoch 2000-01-01.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Days from 1970-01-01 to 2000-01-01.
const PG_EPOCH_DAYS: i32 = 10_957;

/// Where each byte's two hex digits start in a uuid's canonical text (`8-4-4-4-12`).
pub const UUID_DIGIT_PLACES: [usize; 16] =
    [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/// The canonical text of a binary uuid's first 16 bytes (`8-4-4-4-12` lowercase hex
/// digits), as PostgreSQL's `uuid_out` writes it; shorter input leaves zeros.
pub fn uuid_text(v: &[u8]) -> [u8; 36] {
    /// Each byte's two hex digits.
    const HEX_PAIRS: [[u8; 2]; 256] = {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut t = [[0u8; 2]; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = [HEX[i >> 4], HEX[i & 15]];
            i += 1;
        }
        t
    };
    let mut bytes = [0u8; 16];
    let n = v.len().min(16);
    bytes[..n].copy_from_slice(&v[..n]);
    // Fixed places and a table, unrolled: a loop that tested for the hyphens at every
    // byte was a tenth of decoding a row of the benchmark table.
    let mut out = [b'-'; 36];
    for (&b, &at) in bytes.iter().zip(UUID_DIGIT_PLACES.iter()) {
        let [hi, lo] = HEX_PAIRS[usize::from(b)];
        out[at] = hi;
        out[at + 1] = lo;
    }
    out
}

/// One column's builder (the binlog decoder in `mysql_binlog` appends to it directly).
pub(crate) enum Col {
    Bool(BooleanBuilder),
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Dec(Decimal128Builder, u8, i8),
    /// Text, kept as bytes while the batch is built: its UTF-8 is checked once, for the
    /// whole batch, in [`Builders::finish`] (a check per value was 8 % of a PostgreSQL
    /// read's CPU; a uuid's text needs none).
    Str(BinaryBuilder),
    Bin(BinaryBuilder),
    Date(Date32Builder),
    Time(Time64MicrosecondBuilder),
    Ts(TimestampMicrosecondBuilder),
    List(ListBuilder<Box<dyn ArrayBuilder>>, ArrayElem),
}

/// Typed builders for one batch of a table's columns.
pub struct Builders {
    cols: Vec<Col>,
    wires: Vec<Wire>,
    names: Vec<String>,
    schema: SchemaRef,
    rows: usize,
    /// The rows a batch is sized for.
    cap: usize,
    component: &'static str,
}

fn new_col(c: &ColumnDef, cap: usize) -> Result<Col> {
    Ok(match (&c.data_type, c.wire) {
        (DataType::Boolean, _) => Col::Bool(BooleanBuilder::with_capacity(cap)),
        (DataType::Int8, _) => Col::I8(Int8Builder::with_capacity(cap)),
        (DataType::Int16, _) => Col::I16(Int16Builder::with_capacity(cap)),
        (DataType::Int32, _) => Col::I32(Int32Builder::with_capacity(cap)),
        (DataType::Int64, _) => Col::I64(Int64Builder::with_capacity(cap)),
        (DataType::Float32, _) => Col::F32(Float32Builder::with_capacity(cap)),
        (DataType::Float64, _) => Col::F64(Float64Builder::with_capacity(cap)),
        (DataType::Decimal128(p, s), _) => Col::Dec(
            Decimal128Builder::with_capacity(cap).with_precision_and_scale(*p, *s)?,
            *p,
            *s,
        ),
        (DataType::Utf8, _) => Col::Str(BinaryBuilder::with_capacity(cap, cap * 16)),
        (DataType::Binary, _) => Col::Bin(BinaryBuilder::with_capacity(cap, cap * 16)),
        (DataType::Date32, _) => Col::Date(Date32Builder::with_capacity(cap)),
        (DataType::Time64(_), _) => Col::Time(Time64MicrosecondBuilder::with_capacity(cap)),
        (DataType::Timestamp(_, _), _) => Col::Ts(TimestampMicrosecondBuilder::with_capacity(cap)),
        (DataType::List(item), Wire::Array(e)) => {
            let values = make_builder(item.data_type(), cap);
            Col::List(ListBuilder::new(values).with_field(item.clone()), e)
        }
        (dt, _) => {
            return Err(FerryError::internal(format!(
                "no decoder for column '{}' of type {dt}",
                c.name
            )))
        }
    })
}

impl Builders {
    /// Builders for `columns` (whose Arrow fields make `schema`), sized for `cap` rows.
    pub fn new(
        columns: &[ColumnDef],
        schema: SchemaRef,
        cap: usize,
        component: &'static str,
    ) -> Result<Self> {
        Ok(Builders {
            cols: columns
                .iter()
                .map(|c| new_col(c, cap))
                .collect::<Result<_>>()?,
            wires: columns.iter().map(|c| c.wire).collect(),
            names: columns.iter().map(|c| c.name.clone()).collect(),
            schema,
            rows: 0,
            cap,
            component,
        })
    }

    /// Rows appended since the last [`Builders::finish`].
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The rows appended so far as a batch; the builders start empty again.
    pub fn finish(&mut self) -> Result<RecordBatch> {
        // Arrow's `finish` leaves a builder with no capacity, so every batch after the
        // first grew each buffer again from nothing (a chain of reallocations, each on
        // fresh pages). Each builder is replaced by one sized for a batch instead: `cap`
        // rows, and the bytes of text and binary values the batch just finished held.
        let cap = self.cap;
        fn take<B>(b: &mut B, fresh: B) -> B {
            std::mem::replace(b, fresh)
        }
        let (names, component) = (&self.names, self.component);
        let arrays = self
            .cols
            .iter_mut()
            .enumerate()
            .map(|(i, c)| -> Result<ArrayRef> {
                Ok(match c {
                    Col::Bool(b) => Arc::new(take(b, BooleanBuilder::with_capacity(cap)).finish()),
                    Col::I8(b) => Arc::new(take(b, Int8Builder::with_capacity(cap)).finish()),
                    Col::I16(b) => Arc::new(take(b, Int16Builder::with_capacity(cap)).finish()),
                    Col::I32(b) => Arc::new(take(b, Int32Builder::with_capacity(cap)).finish()),
                    Col::I64(b) => Arc::new(take(b, Int64Builder::with_capacity(cap)).finish()),
                    Col::F32(b) => Arc::new(take(b, Float32Builder::with_capacity(cap)).finish()),
                    Col::F64(b) => Arc::new(take(b, Float64Builder::with_capacity(cap)).finish()),
                    Col::Dec(b, p, s) => {
                        let fresh = Decimal128Builder::with_capacity(cap)
                            .with_data_type(DataType::Decimal128(*p, *s));
                        Arc::new(take(b, fresh).finish())
                    }
                    Col::Str(b) => {
                        let bytes = b.values_slice().len();
                        let raw = take(b, BinaryBuilder::with_capacity(cap, bytes)).finish();
                        match StringArray::try_from_binary(raw) {
                            Ok(text) => Arc::new(text),
                            Err(_) => {
                                return Err(column_error(component, &names[i], "text is not UTF-8"))
                            }
                        }
                    }
                    Col::Bin(b) => {
                        let bytes = b.values_slice().len();
                        Arc::new(take(b, BinaryBuilder::with_capacity(cap, bytes)).finish())
                    }
                    Col::Date(b) => Arc::new(take(b, Date32Builder::with_capacity(cap)).finish()),
                    Col::Time(b) => {
                        Arc::new(take(b, Time64MicrosecondBuilder::with_capacity(cap)).finish())
                    }
                    Col::Ts(b) => {
                        Arc::new(take(b, TimestampMicrosecondBuilder::with_capacity(cap)).finish())
                    }
                    Col::List(b, _) => Arc::new(b.finish()),
                })
            })
            .collect::<Vec<_>>();
        // Every builder was taken, a refused one too: the next batch starts clean.
        self.rows = 0;
        let arrays = arrays.into_iter().collect::<Result<Vec<_>>>()?;
        let opts =
            RecordBatchOptions::new().with_row_count(Some(arrays.first().map_or(0, |a| a.len())));
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            arrays,
            &opts,
        )?)
    }

    pub(crate) fn bad(&self, col: usize, what: impl std::fmt::Display) -> FerryError {
        column_error(self.component, &self.names[col], what)
    }

    /// Appends a value no one reads to column `i`: zero, empty, 1970-01-01. For a row that
    /// leaves a column that cannot be NULL to the target ([`ferry_api::Unchanged`]), whose
    /// value the marks say is not there.
    pub fn append_placeholder(&mut self, i: usize) {
        match &mut self.cols[i] {
            Col::Bool(b) => b.append_value(false),
            Col::I8(b) => b.append_value(0),
            Col::I16(b) => b.append_value(0),
            Col::I32(b) => b.append_value(0),
            Col::I64(b) => b.append_value(0),
            Col::F32(b) => b.append_value(0.0),
            Col::F64(b) => b.append_value(0.0),
            Col::Dec(b, _, _) => b.append_value(0),
            Col::Str(b) => b.append_value(""),
            Col::Bin(b) => b.append_value(b""),
            Col::Date(b) => b.append_value(0),
            Col::Time(b) => b.append_value(0),
            Col::Ts(b) => b.append_value(0),
            Col::List(b, _) => b.append(true),
        }
    }

    /// Whether column `i` may hold NULL (its field in the batch's schema).
    pub fn nullable(&self, i: usize) -> bool {
        self.schema.fields().get(i).is_none_or(|f| f.is_nullable())
    }

    pub(crate) fn append_null(&mut self, i: usize) {
        match &mut self.cols[i] {
            Col::Bool(b) => b.append_null(),
            Col::I8(b) => b.append_null(),
            Col::I16(b) => b.append_null(),
            Col::I32(b) => b.append_null(),
            Col::I64(b) => b.append_null(),
            Col::F32(b) => b.append_null(),
            Col::F64(b) => b.append_null(),
            Col::Dec(b, _, _) => b.append_null(),
            Col::Str(b) => b.append_null(),
            Col::Bin(b) => b.append_null(),
            Col::Date(b) => b.append_null(),
            Col::Time(b) => b.append_null(),
            Col::Ts(b) => b.append_null(),
            Col::List(b, _) => b.append_null(),
        }
    }

    /// Appends one PostgreSQL binary field of column `i` (`None` is NULL): a binary COPY
    /// field, or a column of a `pgoutput` tuple in binary mode (the same send format).
    pub fn append_pg(&mut self, i: usize, v: Option<&[u8]>) -> Result<()> {
        self.append_pg_values(i, [v])
    }

    /// Appends PostgreSQL binary fields of column `i`, one a row (`None` is NULL). The
    /// column's type is matched once for all of them: a binary COPY is decoded column by
    /// column ([`CopyDecoder::drain`]), so the loop for each type runs without a jump per
    /// value (a jump per value through a table of 14 types was the hottest spot of
    /// decoding a 16-column row).
    pub fn append_pg_values<'v>(
        &mut self,
        i: usize,
        values: impl IntoIterator<Item = Option<&'v [u8]>>,
    ) -> Result<()> {
        let wire = self.wires[i];
        let (names, component) = (&self.names, self.component);
        // `Builders::bad`, without borrowing all of `self` while a builder is borrowed.
        let bad = |what: &dyn std::fmt::Display| column_error(component, &names[i], what);
        let sized = |v: &[u8], n: usize| -> Result<()> {
            if v.len() < n {
                Err(bad(&format!("{} bytes do not make a {wire:?}", v.len())))
            } else {
                Ok(())
            }
        };
        // Each value of `values` into builder `$b`: NULL as NULL, else `$body` with the
        // value's bytes as `$v`.
        macro_rules! each {
            ($b:ident, |$v:ident| $body:expr) => {
                for value in values {
                    match value {
                        None => $b.append_null(),
                        Some($v) => $body,
                    }
                }
            };
        }
        match &mut self.cols[i] {
            Col::Bool(b) => each!(b, |v| {
                sized(v, 1)?;
                b.append_value(v[0] != 0)
            }),
            Col::I16(b) => each!(b, |v| {
                sized(v, 2)?;
                b.append_value(i16::from_be_bytes([v[0], v[1]]))
            }),
            Col::I32(b) => each!(b, |v| {
                sized(v, 4)?;
                b.append_value(be_i32(v))
            }),
            Col::I64(b) => each!(b, |v| {
                sized(v, 8)?;
                b.append_value(be_i64(v))
            }),
            Col::F32(b) => each!(b, |v| {
                sized(v, 4)?;
                b.append_value(f32::from_bits(be_i32(v) as u32))
            }),
            Col::F64(b) => each!(b, |v| {
                sized(v, 8)?;
                b.append_value(f64::from_bits(be_i64(v) as u64))
            }),
            Col::Dec(b, p, s) => {
                let (p, s) = (*p, *s);
                each!(b, |v| match pg_numeric(v, s) {
                    Ok(Some(x)) if fits(x, p) => b.append_value(x),
                    Ok(Some(_)) =>
                        return Err(bad(&format!("value does not fit decimal({p},{s})"))),
                    Ok(None) => return Err(bad(&"NaN or infinity has no decimal value")),
                    Err(e) => return Err(bad(&e)),
                })
            }
            // Text is checked for UTF-8 once a batch, in `finish`.
            Col::Str(b) if wire == Wire::Jsonb => each!(b, |v| {
                // The version byte, then the text.
                b.append_value(v.get(1..).unwrap_or_default())
            }),
            Col::Str(b) if wire == Wire::Uuid => each!(b, |v| {
                sized(v, 16)?;
                b.append_value(uuid_text(v))
            }),
            Col::Str(b) => each!(b, |v| b.append_value(v)),
            Col::Bin(b) => each!(b, |v| b.append_value(v)),
            Col::Date(b) => each!(b, |v| {
                sized(v, 4)?;
                b.append_value(be_i32(v).saturating_add(PG_EPOCH_DAYS))
            }),
            Col::Time(b) => each!(b, |v| {
                sized(v, 8)?;
                b.append_value(be_i64(v))
            }),
            Col::Ts(b) => each!(b, |v| {
                sized(v, 8)?;
                b.append_value(be_i64(v).saturating_add(PG_EPOCH_MICROS))
            }),
            Col::List(b, e) => {
                let e = *e;
                each!(b, |v| if let Err(m) = pg_array(b, e, v) {
                    return Err(bad(&m));
                })
            }
            // No PostgreSQL type sends one byte (`"char"` is read as text).
            Col::I8(b) => each!(b, |v| return Err(bad(&format!(
                "{} bytes do not make a {wire:?}",
                v.len()
            )))),
        }
        Ok(())
    }

    /// Appends one MySQL text value of column `i` (`None` is NULL).
    pub fn append_text(&mut self, i: usize, v: Option<&[u8]>) -> Result<()> {
        let Some(v) = v else {
            self.append_null(i);
            return Ok(());
        };
        let text = || std::str::from_utf8(v).ok();
        macro_rules! num {
            ($b:expr, $t:ty) => {
                match text().and_then(|s| s.trim().parse::<$t>().ok()) {
                    Some(x) => $b.append_value(x),
                    None => {
                        return Err(self.bad(
                            i,
                            format!("'{}' is no {}", String::from_utf8_lossy(v), stringify!($t)),
                        ))
                    }
                }
            };
        }
        match &mut self.cols[i] {
            // tinyint(1) arrives as "0"/"1", bit(1) as one raw byte.
            Col::Bool(b) => b.append_value(!(v == b"0" || v == [0u8] || v.is_empty())),
            Col::I8(b) => num!(b, i8),
            Col::I16(b) => num!(b, i16),
            Col::I32(b) => num!(b, i32),
            Col::I64(b) => num!(b, i64),
            Col::F32(b) => num!(b, f32),
            Col::F64(b) => num!(b, f64),
            Col::Dec(b, p, s) => {
                let (p, s) = (*p, *s);
                match text().and_then(|t| parse_decimal(t, s)) {
                    Some(x) if fits(x, p) => b.append_value(x),
                    _ => {
                        return Err(self.bad(
                            i,
                            format!(
                                "'{}' does not fit decimal({p},{s})",
                                String::from_utf8_lossy(v)
                            ),
                        ))
                    }
                }
            }
            // Checked for UTF-8 once a batch, in `finish`.
            Col::Str(b) => b.append_value(v),
            Col::Bin(b) => b.append_value(v),
            Col::Date(b) => match text() {
                // MySQL's zero date has no calendar day; JDBC drivers read it as NULL.
                Some(s) if s.starts_with("0000-00-00") => b.append_null(),
                Some(s) => match parse_date(s) {
                    Some(d) => b.append_value(d),
                    None => return Err(self.bad(i, format!("'{s}' is no date"))),
                },
                None => return Err(self.bad(i, "date is not text")),
            },
            Col::Time(b) => match text().and_then(mysql_time) {
                Some(t) => b.append_value(t),
                None => {
                    return Err(self.bad(
                        i,
                        format!(
                            "'{}' is no time of day (00:00:00 to 23:59:59.999999)",
                            String::from_utf8_lossy(v)
                        ),
                    ))
                }
            },
            Col::Ts(b) => match text() {
                Some(s) if s.starts_with("0000-00-00") => b.append_null(),
                Some(s) => match parse_timestamp(s) {
                    Some(t) => b.append_value(t),
                    None => return Err(self.bad(i, format!("'{s}' is no date-time"))),
                },
                None => return Err(self.bad(i, "date-time is not text")),
            },
            Col::List(_, _) => return Err(self.bad(i, "arrays are not read from MySQL")),
        }
        Ok(())
    }

    /// Column `i`'s builder.
    pub(crate) fn col(&mut self, i: usize) -> &mut Col {
        &mut self.cols[i]
    }

    /// Marks a row complete after all its columns were appended.
    pub fn end_row(&mut self) {
        self.rows += 1;
    }

    /// Marks `n` rows complete after all their columns were appended.
    fn end_rows(&mut self, n: usize) {
        self.rows += n;
    }
}

/// A value of column `name` that cannot be read: `what` is wrong with it.
fn column_error(component: &str, name: &str, what: impl std::fmt::Display) -> FerryError {
    FerryError::data(component, format!("column '{name}': {what}"))
}

fn be_i32(v: &[u8]) -> i32 {
    i32::from_be_bytes([v[0], v[1], v[2], v[3]])
}

fn be_i64(v: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&v[..8]);
    i64::from_be_bytes(b)
}

/// 10^0 to 10^38: `fits` runs once a decimal value, and `i128::pow` loops.
const POW10: [i128; 39] = {
    let mut t = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

pub(crate) fn fits(x: i128, p: u8) -> bool {
    match POW10.get(p as usize) {
        Some(&max) => x > -max && x < max,
        // More than 38 digits: anything an i128 holds.
        None => true,
    }
}

pub(crate) fn mysql_time(s: &str) -> Option<i64> {
    let (hms, frac) = match s.split_once('.') {
        Some((a, b)) => (a, b),
        None => (s, ""),
    };
    let mut it = hms.split(':');
    let h: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let sec: i64 = it.next()?.parse().ok()?;
    if !(0..24).contains(&h) || !(0..60).contains(&m) || !(0..60).contains(&sec) || frac.len() > 6 {
        return None;
    }
    let mut micros: i64 = 0;
    for i in 0..6 {
        let d = frac.as_bytes().get(i).map_or(0, |b| (b - b'0') as i64);
        micros = micros * 10 + d;
    }
    Some(((h * 60 + m) * 60 + sec) * 1_000_000 + micros)
}

/// The unscaled value at `scale` of a binary `numeric`, `None` for NaN and infinities.
fn pg_numeric(v: &[u8], scale: i8) -> std::result::Result<Option<i128>, String> {
    if v.len() < 8 {
        return Err("short numeric".into());
    }
    let ndigits = i16::from_be_bytes([v[0], v[1]]) as usize;
    let weight = i16::from_be_bytes([v[2], v[3]]) as i32;
    let sign = u16::from_be_bytes([v[4], v[5]]);
    if sign == 0xC000 || sign == 0xD000 || sign == 0xF000 {
        return Ok(None);
    }
    if v.len() < 8 + 2 * ndigits {
        return Err("short numeric".into());
    }
    let s = scale as i32;
    // Up to 16 significant decimals, none below the scale, and a result under 10^19 (a
    // numeric(12,2), say): in 64 bits, without the checks of 128-bit arithmetic.
    if ndigits <= 4 {
        let last_exp = 4 * (weight - ndigits as i32 + 1) + s;
        if (0..=18).contains(&last_exp) {
            let acc = (0..ndigits).fold(0u64, |acc, i| {
                acc * 10_000 + u64::from(u16::from_be_bytes([v[8 + 2 * i], v[9 + 2 * i]]))
            });
            if let Some(x) = acc.checked_mul(10u64.pow(last_exp as u32)) {
                let x = i128::from(x);
                return Ok(Some(if sign == 0x4000 { -x } else { x }));
            }
        }
    }
    let mut acc: i128 = 0;
    let mut last_exp = 0i32;
    let mut any = false;
    let mut round_up = false;
    for i in 0..ndigits {
        // Digit i is worth 10000^(weight - i); at the column's scale that is 10^(4(weight-i)+s).
        let exp = 4 * (weight - i as i32) + s;
        if exp <= -4 {
            break; // below the scale: SeaTunnel's BigDecimal would be rounded there too
        }
        let d = u16::from_be_bytes([v[8 + 2 * i], v[9 + 2 * i]]) as i128;
        if exp < 0 {
            // The scale ends inside this digit: take its leading decimal digits only, so
            // that a value of 38 digits (numeric(38,30), say) never passes through 40.
            let div = 10i128.pow((-exp) as u32);
            acc = acc
                .checked_mul(10i128.pow((4 + exp) as u32))
                .and_then(|a| a.checked_add(d / div))
                .ok_or("numeric overflows 38 digits")?;
            round_up = (d % div) * 2 >= div;
            last_exp = 0;
            any = true;
            break;
        }
        acc = acc
            .checked_mul(10_000)
            .and_then(|a| a.checked_add(d))
            .ok_or("numeric overflows 38 digits")?;
        last_exp = exp;
        any = true;
    }
    if !any {
        return Ok(Some(0));
    }
    let value = acc
        .checked_mul(
            10i128
                .checked_pow(last_exp as u32)
                .ok_or("numeric overflows")?,
        )
        .and_then(|a| a.checked_add(round_up as i128))
        .ok_or("numeric overflows 38 digits")?;
    Ok(Some(if sign == 0x4000 { -value } else { value }))
}

fn pg_array(
    b: &mut ListBuilder<Box<dyn ArrayBuilder>>,
    e: ArrayElem,
    v: &[u8],
) -> std::result::Result<(), String> {
    if v.len() < 12 {
        return Err("short array".into());
    }
    let ndim = be_i32(v) as usize;
    let mut pos = 12;
    let mut count: usize = if ndim == 0 { 0 } else { 1 };
    for _ in 0..ndim {
        if v.len() < pos + 8 {
            return Err("short array".into());
        }
        count *= be_i32(&v[pos..]).max(0) as usize;
        pos += 8;
    }
    let values = b.values();
    for _ in 0..count {
        if v.len() < pos + 4 {
            return Err("short array".into());
        }
        let len = be_i32(&v[pos..]);
        pos += 4;
        let item = if len < 0 {
            None
        } else {
            let end = pos + len as usize;
            let s = v.get(pos..end).ok_or("short array")?;
            pos = end;
            Some(s)
        };
        let any = values.as_mut().as_any_mut();
        macro_rules! put {
            ($t:ty, $f:expr) => {{
                let bb = any.downcast_mut::<$t>().ok_or("array builder")?;
                match item {
                    None => bb.append_null(),
                    Some(x) => bb.append_value($f(x)),
                }
            }};
        }
        match e {
            ArrayElem::Bool => put!(BooleanBuilder, |x: &[u8]| x.first() == Some(&1)),
            ArrayElem::I16 => put!(Int16Builder, |x: &[u8]| i16::from_be_bytes([x[0], x[1]])),
            ArrayElem::I32 => put!(Int32Builder, be_i32),
            ArrayElem::I64 => put!(Int64Builder, be_i64),
            ArrayElem::F32 => put!(Float32Builder, |x: &[u8]| f32::from_bits(be_i32(x) as u32)),
            ArrayElem::F64 => put!(Float64Builder, |x: &[u8]| f64::from_bits(be_i64(x) as u64)),
            ArrayElem::Text => {
                let bb = any.downcast_mut::<StringBuilder>().ok_or("array builder")?;
                match item {
                    None => bb.append_null(),
                    Some(x) => {
                        bb.append_value(std::str::from_utf8(x).map_err(|_| "text is not UTF-8")?)
                    }
                }
            }
        }
    }
    b.append(true);
    Ok(())
}

/// Parses PostgreSQL's binary COPY stream (`COPY … TO STDOUT (FORMAT binary)`) into
/// [`Builders`], chunk by chunk.
pub struct CopyDecoder {
    buf: BytesMut,
    header_done: bool,
    /// The trailer (field count -1) was seen.
    pub done: bool,
    ncols: usize,
    /// Where each field of the rows being decoded starts in `buf`, and its length (-1:
    /// NULL), row after row.
    fields: Vec<(usize, i32)>,
}

const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

/// Rows decoded at a time by [`CopyDecoder::drain`]: their field positions (16 bytes a
/// field) and bytes stay in the first two cache levels for each column's pass.
const DRAIN_TILE_ROWS: usize = 256;

impl CopyDecoder {
    /// A decoder for rows of `ncols` fields.
    pub fn new(ncols: usize) -> Self {
        CopyDecoder {
            buf: BytesMut::with_capacity(1 << 16),
            header_done: false,
            done: false,
            ncols,
            fields: Vec::new(),
        }
    }

    /// Takes a chunk and appends every complete row in what is buffered to `out`, stopping
    /// once `out` holds `max_rows`; call [`CopyDecoder::drain`] to continue.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// As [`CopyDecoder::push`], without copying `chunk` when nothing is buffered and no
    /// one else holds it (the usual case: chunks end at row boundaries).
    pub fn push_bytes(&mut self, chunk: bytes::Bytes) {
        if !self.buf.is_empty() {
            self.buf.extend_from_slice(&chunk);
            return;
        }
        match chunk.try_into_mut() {
            Ok(owned) => self.buf = owned,
            Err(shared) => self.buf.extend_from_slice(&shared),
        }
    }

    /// Appends complete buffered rows to `out` until it holds `max_rows` or no complete row
    /// is left.
    pub fn drain(&mut self, out: &mut Builders, max_rows: usize) -> Result<()> {
        if !self.header_done {
            if self.buf.len() < SIGNATURE.len() + 8 {
                return Ok(());
            }
            if &self.buf[..SIGNATURE.len()] != SIGNATURE {
                return Err(FerryError::external(
                    out.component,
                    "COPY stream has no binary signature",
                ));
            }
            let ext = be_i32(&self.buf[SIGNATURE.len() + 4..]) as usize;
            if self.buf.len() < SIGNATURE.len() + 8 + ext {
                return Ok(());
            }
            self.buf.advance(SIGNATURE.len() + 8 + ext);
            self.header_done = true;
        }
        let ncols = self.ncols;
        while out.rows() < max_rows && !self.done {
            // The complete rows buffered (up to what `out` may take, and at most a tile):
            // where their fields are, before any builder is touched. Tiles keep the field
            // positions and the rows' bytes in cache while they are read column by column:
            // a whole 1 MiB chunk's positions (~1.5 MB) went through the cache once per
            // column.
            let want = (max_rows - out.rows()).min(DRAIN_TILE_ROWS);
            let b = &self.buf[..];
            self.fields.clear();
            let (mut at, mut rows, mut trailer) = (0usize, 0usize, false);
            while rows < want && b.len() >= at + 2 {
                let n = i16::from_be_bytes([b[at], b[at + 1]]);
                if n == -1 {
                    trailer = true;
                    break;
                }
                if n as usize != ncols {
                    return Err(FerryError::external(
                        out.component,
                        format!("COPY row has {n} fields, expected {ncols}"),
                    ));
                }
                let row_start = self.fields.len();
                let mut pos = at + 2;
                let mut complete = true;
                for _ in 0..ncols {
                    if b.len() < pos + 4 {
                        complete = false;
                        break;
                    }
                    let len = be_i32(&b[pos..]);
                    pos += 4;
                    self.fields.push((pos, len));
                    if len > 0 {
                        pos += len as usize;
                    }
                    if pos > b.len() {
                        complete = false;
                        break;
                    }
                }
                if !complete {
                    self.fields.truncate(row_start);
                    break;
                }
                at = pos;
                rows += 1;
            }
            // Then column by column (see `Builders::append_pg_values`).
            let fields = &self.fields;
            if rows > 0 {
                for i in 0..ncols {
                    let values = fields[i..]
                        .iter()
                        .step_by(ncols)
                        .map(|&(p, len)| (len >= 0).then(|| &b[p..p + len as usize]));
                    out.append_pg_values(i, values)?;
                }
            }
            out.end_rows(rows);
            self.buf.advance(at);
            if trailer {
                self.done = true;
                self.buf.advance(2);
                return Ok(());
            }
            if rows < want {
                // What is left is part of a row.
                return Ok(());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(weight: i16, sign: u16, digits: &[u16]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(digits.len() as i16).to_be_bytes());
        v.extend_from_slice(&weight.to_be_bytes());
        v.extend_from_slice(&sign.to_be_bytes());
        v.extend_from_slice(&0u16.to_be_bytes());
        for d in digits {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v
    }

    /// `x·10^-s` in `numeric`'s binary form, digits as they fall (fraction padded).
    fn numeric_of(x: i128, s: u32) -> Vec<u8> {
        let (int, frac) = (
            x.unsigned_abs() / 10u128.pow(s),
            x.unsigned_abs() % 10u128.pow(s),
        );
        let mut groups = Vec::new();
        let mut i = int;
        while i > 0 {
            groups.insert(0, (i % 10_000) as u16);
            i /= 10_000;
        }
        let weight = groups.len() as i16 - 1;
        let mut f = format!("{frac:0width$}", width = s as usize);
        while f.len() % 4 != 0 {
            f.push('0');
        }
        for k in (0..f.len()).step_by(4) {
            groups.push(f[k..k + 4].parse().unwrap());
        }
        numeric(weight, if x < 0 { 0x4000 } else { 0 }, &groups)
    }

    #[test]
    fn numerics_read_alike_in_64_and_128_bits() {
        let values = [
            0i128,
            1,
            -1,
            9_999,
            10_000,
            123_456_789_012,
            -5,
            10i128.pow(17) + 3,
            9 * 10i128.pow(18),
            -(10i128.pow(19) + 7),
            10i128.pow(30) + 10i128.pow(10),
            -(10i128.pow(38) - 1),
        ];
        for s in 0..=8u32 {
            for &x in &values {
                if x.unsigned_abs() >= 10u128.pow(38) {
                    continue;
                }
                assert_eq!(
                    pg_numeric(&numeric_of(x, s), s as i8).unwrap(),
                    Some(x),
                    "{x} at scale {s}"
                );
            }
        }
    }

    #[test]
    fn binary_numerics_become_unscaled_decimals() {
        // 12345.678 = 1 2345 . 6780
        assert_eq!(
            pg_numeric(&numeric(1, 0, &[1, 2345, 6780]), 3).unwrap(),
            Some(12_345_678)
        );
        assert_eq!(
            pg_numeric(&numeric(1, 0x4000, &[1, 2345, 6780]), 4).unwrap(),
            Some(-123_456_780)
        );
        // 0.0001 at scale 2 rounds to 0.00
        assert_eq!(pg_numeric(&numeric(-1, 0, &[1]), 2).unwrap(), Some(0));
        assert_eq!(pg_numeric(&numeric(0, 0xC000, &[]), 2).unwrap(), None);
        assert_eq!(pg_numeric(&numeric(0, 0, &[]), 2).unwrap(), Some(0));
        // 0.125 at scale 2 rounds half up; -0.125 away from zero.
        assert_eq!(pg_numeric(&numeric(-1, 0, &[1250]), 2).unwrap(), Some(13));
        assert_eq!(
            pg_numeric(&numeric(-1, 0x4000, &[1250]), 2).unwrap(),
            Some(-13)
        );
        assert_eq!(
            pg_numeric(&numeric(-1, 0, &[1249, 9999]), 2).unwrap(),
            Some(12)
        );
    }

    /// A binary uuid reads as `uuid_out`'s text; a value of another length is an error
    /// naming the column.
    #[test]
    fn binary_uuids_read_as_their_canonical_text() {
        use arrow::array::{Array, AsArray};
        let column = ColumnDef {
            name: "u".into(),
            data_type: DataType::Utf8,
            nullable: true,
            source_type: "uuid".into(),
            length: None,
            wire: Wire::Uuid,
            select: "\"u\"".into(),
        };
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("u", DataType::Utf8, true),
        ]));
        let mut b =
            Builders::new(std::slice::from_ref(&column), schema.clone(), 4, "test").unwrap();
        let u: [u8; 16] = [
            0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38,
            0x0a, 0x11,
        ];
        b.append_pg_values(0, [Some(&u[..]), None, Some(&[0xff; 16][..])])
            .unwrap();
        for _ in 0..3 {
            b.end_row();
        }
        let batch = b.finish().unwrap();
        let col = batch.column(0).as_string::<i32>();
        assert_eq!(col.value(0), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
        assert!(col.is_null(1));
        assert_eq!(col.value(2), "ffffffff-ffff-ffff-ffff-ffffffffffff");
        let mut b = Builders::new(&[column], schema, 4, "test").unwrap();
        let e = b.append_pg_values(0, [Some(&u[..15])]).unwrap_err();
        assert!(e.to_string().contains("'u'"), "{e}");
    }

    /// Chunks taken whole (`push_bytes`) or copied (`push`), cut at row boundaries or inside
    /// a row, decode to the same rows.
    #[test]
    fn copy_chunks_decode_alike_taken_whole_or_copied_and_cut_anywhere() {
        use arrow::array::{Array, Int64Array, StringArray};
        let col = |name: &str, data_type: DataType, wire: Wire| ColumnDef {
            name: name.into(),
            data_type,
            nullable: true,
            source_type: String::new(),
            length: None,
            wire,
            select: name.into(),
        };
        let columns = [
            col("id", DataType::Int64, Wire::I64),
            col("name", DataType::Utf8, Wire::Text),
        ];
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", DataType::Int64, true),
            arrow::datatypes::Field::new("name", DataType::Utf8, true),
        ]));
        let mut stream = SIGNATURE.to_vec();
        stream.extend_from_slice(&[0; 8]);
        let mut row_ends = Vec::new();
        // More rows than a tile of `CopyDecoder::drain`.
        let n = 2 * DRAIN_TILE_ROWS as i64 + 88;
        for id in 0..n {
            stream.extend_from_slice(&2i16.to_be_bytes());
            stream.extend_from_slice(&8i32.to_be_bytes());
            stream.extend_from_slice(&id.to_be_bytes());
            if id % 7 == 0 {
                stream.extend_from_slice(&(-1i32).to_be_bytes());
            } else {
                let name = format!("row {id}");
                stream.extend_from_slice(&(name.len() as i32).to_be_bytes());
                stream.extend_from_slice(name.as_bytes());
            }
            row_ends.push(stream.len());
        }
        stream.extend_from_slice(&(-1i16).to_be_bytes());
        // Decoded in batches of at most `max` rows, as the Jdbc reader does.
        let decode_in = |cuts: &[usize], whole: bool, max: usize| {
            let mut out = Builders::new(&columns, schema.clone(), 8, "test").unwrap();
            let mut dec = CopyDecoder::new(2);
            let mut at = 0;
            let mut batches = Vec::new();
            for &cut in cuts.iter().chain([&stream.len()]) {
                let chunk = &stream[at..cut];
                if whole {
                    dec.push_bytes(bytes::Bytes::copy_from_slice(chunk));
                } else {
                    dec.push(chunk);
                }
                loop {
                    dec.drain(&mut out, max).unwrap();
                    if out.rows() < max {
                        break;
                    }
                    batches.push(out.finish().unwrap());
                }
                at = cut;
            }
            assert!(dec.done);
            batches.push(out.finish().unwrap());
            let (mut ids, mut names) = (Vec::new(), Vec::new());
            for b in batches {
                assert!(b.num_rows() <= max);
                let i = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                ids.extend(i.values().iter().copied());
                let n = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
                names.extend(n.iter().map(|n| n.map(String::from)));
            }
            (ids, names)
        };
        let decode = |cuts: &[usize], whole: bool| decode_in(cuts, whole, usize::MAX);
        let want = decode(&[], false);
        assert_eq!(want.0, (0..n).collect::<Vec<i64>>());
        assert_eq!(want.1[3].as_deref(), Some("row 3"));
        assert_eq!(want.1[7], None);
        let at_rows: Vec<usize> = row_ends.iter().step_by(6).copied().collect();
        let inside: Vec<usize> = row_ends.iter().step_by(5).map(|e| e - 3).collect();
        for cuts in [&at_rows, &inside] {
            assert_eq!(decode(cuts, true), want);
            assert_eq!(decode(cuts, false), want);
            for max in [1, 7, 50, DRAIN_TILE_ROWS + 1, 1000] {
                assert_eq!(decode_in(cuts, false, max), want, "batches of {max}");
            }
        }
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_for_the_batch_naming_the_column() {
        let columns = [ColumnDef {
            name: "note".into(),
            data_type: DataType::Utf8,
            nullable: true,
            source_type: String::new(),
            length: None,
            wire: Wire::Text,
            select: "note".into(),
        }];
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("note", DataType::Utf8, true),
        ]));
        let mut out = Builders::new(&columns, schema, 4, "test").unwrap();
        let e = "é".as_bytes();
        out.append_pg_values(0, [Some("fine".as_bytes()), None, Some(e)])
            .unwrap();
        out.end_rows(3);
        let batch = out.finish().unwrap();
        let text = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(
            text.iter().collect::<Vec<_>>(),
            [Some("fine"), None, Some("é")]
        );
        // A byte that is not UTF-8, and a character cut in two between rows (whose
        // bytes, side by side, are valid UTF-8): both refused, and the builders start
        // the next batch clean.
        for values in [[&b"ok"[..], b"\xff"], [&e[..1], &e[1..]]] {
            out.append_pg_values(0, values.map(Some)).unwrap();
            out.append_text(0, Some(b"more")).unwrap();
            let err = out.finish().unwrap_err().to_string();
            assert!(err.contains("column 'note': text is not UTF-8"), "{err}");
        }
        out.append_text(0, Some("ü".as_bytes())).unwrap();
        out.end_row();
        assert_eq!(out.finish().unwrap().num_rows(), 1);
    }

    #[test]
    fn decimal_bounds_are_the_precisions_powers_of_ten() {
        assert!(fits(99_999, 5) && fits(-99_999, 5));
        assert!(!fits(100_000, 5) && !fits(-100_000, 5));
        let max38 = 10i128.pow(38) - 1;
        assert!(fits(max38, 38) && !fits(max38 + 1, 38));
        assert!(fits(0, 0) && !fits(1, 0));
    }

    #[test]
    fn a_numeric_of_38_digits_whose_scale_ends_inside_a_base_10000_digit_fits() {
        // 12345678.123456789012345678901234567890 as numeric(38,30): ten base-10000 digits
        // (40 decimal digits) of which the last holds two beyond the scale.
        let digits = [1234, 5678, 1234, 5678, 9012, 3456, 7890, 1234, 5678, 9000];
        assert_eq!(
            pg_numeric(&numeric(1, 0, &digits), 30).unwrap(),
            Some(12_345_678_123_456_789_012_345_678_901_234_567_890)
        );
        let max = [9999, 9999, 9999, 9999, 9999, 9999, 9999, 9999, 9999, 9900];
        assert_eq!(
            pg_numeric(&numeric(1, 0x4000, &max), 30).unwrap(),
            Some(-99_999_999_999_999_999_999_999_999_999_999_999_999)
        );
        // 39 digits before the point do not fit.
        assert!(pg_numeric(&numeric(9, 0, &[999; 10]), 0).is_err());
    }

    #[test]
    fn mysql_times_within_a_day_parse_and_others_are_refused() {
        assert_eq!(mysql_time("01:02:03.5"), Some(3_723_500_000));
        assert_eq!(mysql_time("25:00:00"), None);
    }
}
