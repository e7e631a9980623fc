//! Rows as PostgreSQL binary `COPY … FROM STDIN (FORMAT binary)` input, for
//! `use_copy_statement` when every column's Arrow type has an exact binary form for its
//! target column's type.
//!
//! Binary input skips the server's text parsing of every value (a large part of a COPY's
//! server time for numbers, timestamps and uuids), but the server then takes each value's
//! bytes as the target type's own wire form: a pair this module does not know (a string
//! into an `inet` or PostGIS column, a list into an array) is never guessed at, and the
//! sink writes that table as CSV instead ([`crate::copy`]), where the server's input
//! functions parse the text as an INSERT would.
//!
//! Columns are matched to their encoder once a batch ([`BinaryColumns::new`]); each value
//! is then written straight into the output buffer, with no allocation per row.
//!
//! The same values, one binary array per column ([`ArrayColumns`]), are the parameters of
//! the generated INSERTs on PostgreSQL (`INSERT … SELECT * FROM ROWS FROM (unnest($1), …)`): a
//! value's bytes in an array element are its bytes in a COPY field.

use arrow::array::*;
use arrow::datatypes::{DataType, TimeUnit};

/// The binary COPY header: signature, flags, header extension length.
pub const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// The binary COPY trailer: a field count of -1.
pub const TRAILER: &[u8] = &[0xff, 0xff];

/// PostgreSQL type OIDs this module writes (`pg_type.oid`, fixed for built-in types).
pub mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const JSON: u32 = 114;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const BPCHAR: u32 = 1042;
    pub const VARCHAR: u32 = 1043;
    pub const DATE: u32 = 1082;
    pub const TIME: u32 = 1083;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const NUMERIC: u32 = 1700;
    pub const UUID: u32 = 2950;
    pub const JSONB: u32 = 3802;

    /// The array type of element type `elem`, for the types [`super::BinaryColumns`]
    /// writes.
    pub fn array_of(elem: u32) -> Option<u32> {
        Some(match elem {
            BOOL => 1000,
            BYTEA => 1001,
            INT8 => 1016,
            INT2 => 1005,
            INT4 => 1007,
            TEXT => 1009,
            JSON => 199,
            FLOAT4 => 1021,
            FLOAT8 => 1022,
            BPCHAR => 1014,
            VARCHAR => 1015,
            DATE => 1182,
            TIME => 1183,
            TIMESTAMP => 1115,
            TIMESTAMPTZ => 1185,
            NUMERIC => 1231,
            UUID => 2951,
            JSONB => 3807,
            _ => return None,
        })
    }
}

/// Microseconds and days from the Unix epoch to PostgreSQL's (2000-01-01).
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
const PG_EPOCH_DAYS: i32 = 10_957;

/// How one column's values are written.
enum Enc<'a> {
    /// Every value NULL (an Arrow `Null` column).
    Null,
    Bool(&'a BooleanArray),
    /// Integers widened to the target's 2, 4 or 8 bytes.
    I8(&'a Int8Array, u8),
    I16(&'a Int16Array, u8),
    I32(&'a Int32Array, u8),
    I64(&'a Int64Array),
    F32(&'a Float32Array, bool),
    F64(&'a Float64Array),
    /// Text as is; `jsonb` prefixed with its version byte.
    Str(&'a StringArray, bool),
    LargeStr(&'a LargeStringArray, bool),
    Uuid(&'a StringArray),
    Bin(&'a BinaryArray),
    LargeBin(&'a LargeBinaryArray),
    Date(&'a Date32Array),
    Time(&'a Time64MicrosecondArray),
    Timestamp(&'a TimestampMicrosecondArray),
    Numeric(&'a Decimal128Array, u8),
}

/// The columns of one batch, ready to be written as binary COPY rows.
pub struct BinaryColumns<'a> {
    encs: Vec<Enc<'a>>,
}

/// The encoder for an array into a column of type `oid`, or `None` when the pair has no
/// exact binary form here.
fn enc(a: &dyn Array, oid: u32) -> Option<Enc<'_>> {
    use oid::*;
    let any = a.as_any();
    let width = |o: u32| match o {
        INT2 => Some(2u8),
        INT4 => Some(4),
        INT8 => Some(8),
        _ => None,
    };
    Some(match (a.data_type(), oid) {
        (DataType::Null, _) => Enc::Null,
        (DataType::Boolean, BOOL) => Enc::Bool(any.downcast_ref()?),
        (DataType::Int8, o) => Enc::I8(any.downcast_ref()?, width(o)?),
        (DataType::Int16, o) => Enc::I16(any.downcast_ref()?, width(o)?),
        (DataType::Int32, INT4 | INT8) => Enc::I32(any.downcast_ref()?, width(oid)?),
        (DataType::Int64, INT8) => Enc::I64(any.downcast_ref()?),
        (DataType::Float32, FLOAT4) => Enc::F32(any.downcast_ref()?, false),
        (DataType::Float32, FLOAT8) => Enc::F32(any.downcast_ref()?, true),
        (DataType::Float64, FLOAT8) => Enc::F64(any.downcast_ref()?),
        (DataType::Utf8, TEXT | VARCHAR | BPCHAR | JSON) => Enc::Str(any.downcast_ref()?, false),
        (DataType::Utf8, JSONB) => Enc::Str(any.downcast_ref()?, true),
        (DataType::Utf8, UUID) => Enc::Uuid(any.downcast_ref()?),
        (DataType::LargeUtf8, TEXT | VARCHAR | BPCHAR | JSON) => {
            Enc::LargeStr(any.downcast_ref()?, false)
        }
        (DataType::LargeUtf8, JSONB) => Enc::LargeStr(any.downcast_ref()?, true),
        (DataType::Binary, BYTEA) => Enc::Bin(any.downcast_ref()?),
        (DataType::LargeBinary, BYTEA) => Enc::LargeBin(any.downcast_ref()?),
        (DataType::Date32, DATE) => Enc::Date(any.downcast_ref()?),
        (DataType::Time64(TimeUnit::Microsecond), TIME) => Enc::Time(any.downcast_ref()?),
        // Microseconds from the epoch, UTC, into either column type: Ferry reads
        // `timestamptz` as UTC wall-clock time, zone-less, and the CSV path writes an
        // instant with its `+00` zone, so both paths write the same instants.
        (DataType::Timestamp(TimeUnit::Microsecond, _), TIMESTAMP | TIMESTAMPTZ) => {
            Enc::Timestamp(any.downcast_ref()?)
        }
        (DataType::Decimal128(_, s), NUMERIC) if (0..=38).contains(s) => {
            Enc::Numeric(any.downcast_ref()?, *s as u8)
        }
        _ => return None,
    })
}

/// Rows written at a time by [`BinaryColumns::push_rows`].
const PUSH_TILE_ROWS: usize = 256;

impl<'a> BinaryColumns<'a> {
    /// The columns `idx` of `cols` written into target columns of types `oids` (in the
    /// same order), or `None` when one of them has no exact binary form here.
    pub fn new(cols: &'a [ArrayRef], idx: &[usize], oids: &[u32]) -> Option<Self> {
        if idx.len() != oids.len() || idx.len() > i16::MAX as usize {
            return None;
        }
        let encs = idx
            .iter()
            .zip(oids)
            .map(|(&i, &o)| enc(cols.get(i)?.as_ref(), o))
            .collect::<Option<_>>()?;
        Some(BinaryColumns { encs })
    }

    /// Appends row `i`; an error names a value the target type cannot hold.
    pub fn push_row(&self, out: &mut Vec<u8>, i: usize) -> Result<(), String> {
        out.extend_from_slice(&(self.encs.len() as i16).to_be_bytes());
        for e in &self.encs {
            push_value(out, e, i)?;
        }
        Ok(())
    }

    /// Appends the rows `rows`, as [`Self::push_row`] would one after another, but column
    /// by column: each row's length is summed first, the output grows once, and each
    /// column's values are then written into their rows' places by a loop of that column's
    /// type alone (row by row, the type of every value was matched again, 16 times a row
    /// for the benchmark table: a fifth of a PostgreSQL-to-PostgreSQL copy's CPU). On an
    /// error (a value the target cannot hold) nothing of the rows is left in `out`.
    pub fn push_rows(&self, out: &mut Vec<u8>, rows: std::ops::Range<usize>) -> Result<(), String> {
        let base = out.len();
        // A tile of rows at a time, so that the rows being written (and their places in
        // `pos`) stay in cache through every column's pass.
        let mut pushed = Ok(());
        let mut start = rows.start;
        while start < rows.end && pushed.is_ok() {
            let end = rows.end.min(start + PUSH_TILE_ROWS);
            pushed = self.push_rows_at(out, start..end);
            start = end;
        }
        if pushed.is_err() {
            out.truncate(base);
        }
        pushed
    }

    fn push_rows_at(&self, out: &mut Vec<u8>, rows: std::ops::Range<usize>) -> Result<(), String> {
        // Each row's length: its field count, a length per field, then the values' bytes;
        // numerics, whose length depends on the value, are encoded here into `numerics`.
        let mut pos = vec![2 + 4 * self.encs.len(); rows.len()];
        let mut numerics: Vec<Vec<u8>> = Vec::new();
        for e in &self.encs {
            value_lengths(e, rows.clone(), &mut pos, &mut numerics)?;
        }
        // Then where each row starts.
        let mut at = out.len();
        for p in pos.iter_mut() {
            let len = *p;
            *p = at;
            at += len;
        }
        out.resize(at, 0);
        let count = (self.encs.len() as i16).to_be_bytes();
        for p in pos.iter_mut() {
            out[*p..*p + 2].copy_from_slice(&count);
            *p += 2;
        }
        let mut numerics = numerics.iter();
        for e in &self.encs {
            let encoded = match e {
                Enc::Numeric(..) => numerics.next().map(Vec::as_slice),
                _ => None,
            };
            write_values(e, rows.clone(), out, &mut pos, encoded)?;
        }
        Ok(())
    }

    /// Appends the value of row `i` in column `col` (of those given to [`Self::new`]) as
    /// one field: its length, then its bytes.
    pub fn push_field(&self, out: &mut Vec<u8>, col: usize, i: usize) -> Result<(), String> {
        match self.encs.get(col) {
            Some(e) => push_value(out, e, i),
            None => Err(format!("no column {col}")),
        }
    }
}

/// Bytes before an array's elements: dimensions, flags, element type, length, lower bound.
const ARRAY_HEADER: usize = 20;

/// Rows gathered as one binary one-dimensional array per column (PostgreSQL's `array_recv`
/// form), for parameters of `unnest`. Each column's buffer starts with room for its header,
/// written by [`Self::finish`], so that no element is moved.
pub struct ArrayColumns {
    arrays: Vec<Vec<u8>>,
    /// Whether each column holds a NULL (the header's flag).
    nulls: Vec<bool>,
    elems: Vec<u32>,
    rows: usize,
    bytes: usize,
    /// Where the row being appended starts in each column (kept to spare an allocation
    /// per row).
    starts: Vec<usize>,
}

impl ArrayColumns {
    /// Empty arrays of the element types `elems`, one per column.
    pub fn new(elems: &[u32]) -> Self {
        ArrayColumns {
            arrays: elems.iter().map(|_| vec![0; ARRAY_HEADER]).collect(),
            nulls: vec![false; elems.len()],
            elems: elems.to_vec(),
            rows: 0,
            bytes: 0,
            starts: Vec::with_capacity(elems.len()),
        }
    }

    /// Bytes gathered so far, over all columns.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Appends row `i` of `cols` (which writes the same columns, in order). On an error,
    /// naming a value the target type cannot hold, nothing of the row is kept.
    pub fn push_row(&mut self, cols: &BinaryColumns, i: usize) -> Result<(), String> {
        if self.rows >= i32::MAX as usize || cols.encs.len() != self.arrays.len() {
            return Err("too many rows for one statement".into());
        }
        self.starts.clear();
        for (out, e) in self.arrays.iter_mut().zip(&cols.encs) {
            self.starts.push(out.len());
            if let Err(m) = push_value(out, e, i) {
                for (a, &start) in self.arrays.iter_mut().zip(&self.starts) {
                    a.truncate(start);
                }
                return Err(m);
            }
        }
        for ((out, &start), null) in self.arrays.iter().zip(&self.starts).zip(&mut self.nulls) {
            // A NULL is its length alone, -1.
            *null |= out.len() - start == 4 && out[start..] == [0xff; 4];
            self.bytes += out.len() - start;
        }
        self.rows += 1;
        Ok(())
    }

    /// The arrays, each with its header.
    pub fn finish(mut self) -> Vec<Vec<u8>> {
        for ((a, null), elem) in self.arrays.iter_mut().zip(&self.nulls).zip(&self.elems) {
            let mut h = [0u8; ARRAY_HEADER];
            h[0..4].copy_from_slice(&1i32.to_be_bytes());
            h[4..8].copy_from_slice(&i32::from(*null).to_be_bytes());
            h[8..12].copy_from_slice(&elem.to_be_bytes());
            h[12..16].copy_from_slice(&(self.rows as i32).to_be_bytes());
            h[16..20].copy_from_slice(&1i32.to_be_bytes());
            a[..ARRAY_HEADER].copy_from_slice(&h);
        }
        self.arrays
    }
}

/// Adds to `len[k]` the bytes of row `rows.start + k`'s value in `e` (without its 4-byte
/// length). Numerics are encoded into a new buffer pushed onto `numerics` (length prefixes
/// included), as [`write_values`] will copy them.
fn value_lengths(
    e: &Enc,
    rows: std::ops::Range<usize>,
    len: &mut [usize],
    numerics: &mut Vec<Vec<u8>>,
) -> Result<(), String> {
    // Fixed-width values: `w` bytes unless NULL.
    fn fixed(a: &dyn Array, rows: std::ops::Range<usize>, len: &mut [usize], w: usize) {
        match a.logical_nulls() {
            None => len.iter_mut().for_each(|l| *l += w),
            Some(n) => {
                for (l, i) in len.iter_mut().zip(rows) {
                    if n.is_valid(i) {
                        *l += w;
                    }
                }
            }
        }
    }
    fn var<O: OffsetSizeTrait>(
        offsets: &[O],
        nulls: Option<&arrow::buffer::NullBuffer>,
        rows: std::ops::Range<usize>,
        len: &mut [usize],
        extra: usize,
    ) -> Result<(), String> {
        for (l, i) in len.iter_mut().zip(rows) {
            if nulls.is_some_and(|n| n.is_null(i)) {
                continue;
            }
            let n = (offsets[i + 1] - offsets[i]).as_usize() + extra;
            if n > i32::MAX as usize {
                return Err("a value over 2 GiB".into());
            }
            *l += n;
        }
        Ok(())
    }
    let w = |w: u8| usize::from(w);
    match e {
        Enc::Null => {}
        Enc::Bool(a) => fixed(*a, rows, len, 1),
        Enc::I8(a, wd) => fixed(*a, rows, len, w(*wd)),
        Enc::I16(a, wd) => fixed(*a, rows, len, w(*wd)),
        Enc::I32(a, wd) => fixed(*a, rows, len, w(*wd)),
        Enc::I64(a) => fixed(*a, rows, len, 8),
        Enc::F32(a, wide) => fixed(*a, rows, len, if *wide { 8 } else { 4 }),
        Enc::F64(a) => fixed(*a, rows, len, 8),
        Enc::Str(a, jsonb) => var(a.value_offsets(), a.nulls(), rows, len, usize::from(*jsonb))?,
        Enc::LargeStr(a, jsonb) => {
            var(a.value_offsets(), a.nulls(), rows, len, usize::from(*jsonb))?
        }
        Enc::Uuid(a) => fixed(*a, rows, len, 16),
        Enc::Bin(a) => var(a.value_offsets(), a.nulls(), rows, len, 0)?,
        Enc::LargeBin(a) => var(a.value_offsets(), a.nulls(), rows, len, 0)?,
        Enc::Date(a) => fixed(*a, rows, len, 4),
        Enc::Time(a) => fixed(*a, rows, len, 8),
        Enc::Timestamp(a) => fixed(*a, rows, len, 8),
        Enc::Numeric(..) => {
            let mut buf = Vec::new();
            for (l, i) in len.iter_mut().zip(rows) {
                let before = buf.len();
                push_value(&mut buf, e, i)?;
                // The field's bytes without the length `push_value` wrote first.
                *l += buf.len() - before - 4;
            }
            numerics.push(buf);
        }
    }
    Ok(())
}

/// Writes each row's value in `e` at `pos[k]` (its 4-byte length, then its bytes) and
/// moves `pos[k]` past it. `encoded`: a numeric column's fields from [`value_lengths`].
fn write_values(
    e: &Enc,
    rows: std::ops::Range<usize>,
    out: &mut [u8],
    pos: &mut [usize],
    encoded: Option<&[u8]>,
) -> Result<(), String> {
    const NULL: [u8; 4] = (-1i32).to_be_bytes();
    /// Each row's value as `$f(value) -> [u8; N]`, or NULL.
    macro_rules! fixed {
        ($a:expr, |$v:ident| $f:expr) => {{
            let a = $a;
            for (p, i) in pos.iter_mut().zip(rows) {
                if a.is_null(i) {
                    out[*p..*p + 4].copy_from_slice(&NULL);
                    *p += 4;
                    continue;
                }
                let $v = a.value(i);
                let bytes = $f;
                out[*p..*p + 4].copy_from_slice(&(bytes.len() as i32).to_be_bytes());
                out[*p + 4..*p + 4 + bytes.len()].copy_from_slice(&bytes);
                *p += 4 + bytes.len();
            }
        }};
    }
    /// Each row's bytes (`$b(value) -> &[u8]`), prefixed with `$prefix`, or NULL.
    macro_rules! var {
        ($a:expr, $prefix:expr, |$v:ident| $b:expr) => {{
            let a = $a;
            let prefix: &[u8] = $prefix;
            for (p, i) in pos.iter_mut().zip(rows) {
                if a.is_null(i) {
                    out[*p..*p + 4].copy_from_slice(&NULL);
                    *p += 4;
                    continue;
                }
                let $v = a.value(i);
                let bytes: &[u8] = $b;
                let n = prefix.len() + bytes.len();
                out[*p..*p + 4].copy_from_slice(&(n as i32).to_be_bytes());
                out[*p + 4..*p + 4 + prefix.len()].copy_from_slice(prefix);
                out[*p + 4 + prefix.len()..*p + 4 + n].copy_from_slice(bytes);
                *p += 4 + n;
            }
        }};
    }
    let version: &[u8] = &[1];
    let jsonb = |j: bool| if j { version } else { &[] };
    match e {
        Enc::Null => {
            for p in pos.iter_mut() {
                out[*p..*p + 4].copy_from_slice(&NULL);
                *p += 4;
            }
        }
        Enc::Bool(a) => fixed!(*a, |v| [v as u8]),
        Enc::I8(a, 2) => fixed!(*a, |v| (v as i16).to_be_bytes()),
        Enc::I8(a, 4) => fixed!(*a, |v| (v as i32).to_be_bytes()),
        Enc::I8(a, _) => fixed!(*a, |v| (v as i64).to_be_bytes()),
        Enc::I16(a, 2) => fixed!(*a, |v| v.to_be_bytes()),
        Enc::I16(a, 4) => fixed!(*a, |v| (v as i32).to_be_bytes()),
        Enc::I16(a, _) => fixed!(*a, |v| (v as i64).to_be_bytes()),
        // `enc` pairs an Int32 only with 4 or 8 bytes.
        Enc::I32(a, 4) => fixed!(*a, |v| v.to_be_bytes()),
        Enc::I32(a, _) => fixed!(*a, |v| (v as i64).to_be_bytes()),
        Enc::I64(a) => fixed!(*a, |v| v.to_be_bytes()),
        Enc::F32(a, true) => fixed!(*a, |v| (v as f64).to_be_bytes()),
        Enc::F32(a, false) => fixed!(*a, |v| v.to_be_bytes()),
        Enc::F64(a) => fixed!(*a, |v| v.to_be_bytes()),
        Enc::Str(a, j) => var!(*a, jsonb(*j), |v| v.as_bytes()),
        Enc::LargeStr(a, j) => var!(*a, jsonb(*j), |v| v.as_bytes()),
        Enc::Uuid(a) => fixed!(*a, |v| uuid_field(v)?),
        Enc::Bin(a) => var!(*a, &[], |v| v),
        Enc::LargeBin(a) => var!(*a, &[], |v| v),
        Enc::Date(a) => fixed!(*a, |v| date_field(v)?),
        Enc::Time(a) => fixed!(*a, |v| v.to_be_bytes()),
        Enc::Timestamp(a) => fixed!(*a, |v| timestamp_field(v)?),
        Enc::Numeric(..) => {
            // Fields as `value_lengths` encoded them, one after another.
            let mut from = encoded.ok_or("numeric column not encoded")?;
            for p in pos.iter_mut() {
                let head: [u8; 4] = from
                    .get(..4)
                    .and_then(|h| h.try_into().ok())
                    .ok_or("numeric column short")?;
                let n = 4 + usize::try_from(i32::from_be_bytes(head).max(0)).unwrap_or(0);
                let field = from.get(..n).ok_or("numeric column short")?;
                out[*p..*p + n].copy_from_slice(field);
                *p += n;
                from = &from[n..];
            }
        }
    }
    Ok(())
}

/// A date (days from 1970) as `date`'s binary form (days from 2000).
fn date_field(days: i32) -> Result<[u8; 4], String> {
    let d = days
        .checked_sub(PG_EPOCH_DAYS)
        .ok_or("a date out of range")?;
    Ok(d.to_be_bytes())
}

/// A timestamp (microseconds from 1970) as `timestamp`'s binary form (from 2000).
fn timestamp_field(micros: i64) -> Result<[u8; 8], String> {
    let t = micros
        .checked_sub(PG_EPOCH_MICROS)
        .ok_or("a timestamp out of range")?;
    Ok(t.to_be_bytes())
}

/// A uuid's text as its 16 bytes.
fn uuid_field(s: &str) -> Result<[u8; 16], String> {
    parse_uuid(s).ok_or_else(|| format!("'{s}' is not a uuid"))
}

fn null(out: &mut Vec<u8>) {
    out.extend_from_slice(&(-1i32).to_be_bytes());
}

fn field(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), String> {
    let len = i32::try_from(bytes.len()).map_err(|_| "a value over 2 GiB".to_string())?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

fn int(out: &mut Vec<u8>, v: i64, width: u8) {
    match width {
        2 => field_fixed(out, &(v as i16).to_be_bytes()),
        4 => field_fixed(out, &(v as i32).to_be_bytes()),
        _ => field_fixed(out, &v.to_be_bytes()),
    }
}

fn field_fixed(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn push_value(out: &mut Vec<u8>, e: &Enc, i: usize) -> Result<(), String> {
    macro_rules! nullable {
        ($a:expr) => {
            if $a.is_null(i) {
                null(out);
                return Ok(());
            }
        };
    }
    match e {
        Enc::Null => null(out),
        Enc::Bool(a) => {
            nullable!(a);
            field_fixed(out, &[a.value(i) as u8]);
        }
        // Widening only (an i8 fits every width): no value can be cut.
        Enc::I8(a, w) => {
            nullable!(a);
            int(out, a.value(i) as i64, *w);
        }
        Enc::I16(a, w) => {
            nullable!(a);
            int(out, a.value(i) as i64, *w);
        }
        Enc::I32(a, w) => {
            nullable!(a);
            int(out, a.value(i) as i64, *w);
        }
        Enc::I64(a) => {
            nullable!(a);
            field_fixed(out, &a.value(i).to_be_bytes());
        }
        Enc::F32(a, wide) => {
            nullable!(a);
            if *wide {
                field_fixed(out, &(a.value(i) as f64).to_be_bytes());
            } else {
                field_fixed(out, &a.value(i).to_be_bytes());
            }
        }
        Enc::F64(a) => {
            nullable!(a);
            field_fixed(out, &a.value(i).to_be_bytes());
        }
        Enc::Str(a, jsonb) => {
            nullable!(a);
            text(out, a.value(i), *jsonb)?;
        }
        Enc::LargeStr(a, jsonb) => {
            nullable!(a);
            text(out, a.value(i), *jsonb)?;
        }
        Enc::Uuid(a) => {
            nullable!(a);
            field_fixed(out, &uuid_field(a.value(i))?);
        }
        Enc::Bin(a) => {
            nullable!(a);
            field(out, a.value(i))?;
        }
        Enc::LargeBin(a) => {
            nullable!(a);
            field(out, a.value(i))?;
        }
        Enc::Date(a) => {
            nullable!(a);
            field_fixed(out, &date_field(a.value(i))?);
        }
        Enc::Time(a) => {
            nullable!(a);
            field_fixed(out, &a.value(i).to_be_bytes());
        }
        Enc::Timestamp(a) => {
            nullable!(a);
            field_fixed(out, &timestamp_field(a.value(i))?);
        }
        Enc::Numeric(a, scale) => {
            nullable!(a);
            numeric(out, a.value(i), *scale);
        }
    }
    Ok(())
}

fn text(out: &mut Vec<u8>, s: &str, jsonb: bool) -> Result<(), String> {
    if jsonb {
        let len = i32::try_from(s.len() + 1).map_err(|_| "a value over 2 GiB".to_string())?;
        out.extend_from_slice(&len.to_be_bytes());
        out.push(1);
        out.extend_from_slice(s.as_bytes());
        Ok(())
    } else {
        field(out, s.as_bytes())
    }
}

/// Each byte's value as a hex digit, 0xff for a byte that is none.
const HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// 32 hex digits, with or without the hyphens (as `uuid_in` accepts them: no braces).
fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    // The canonical form, as PostgreSQL and most tools print a uuid: digit pairs at fixed
    // places, looked up in a table (a character loop was 60 % of encoding a row of the
    // 16-column benchmark table).
    if b.len() == 36 && b[8] == b'-' && b[13] == b'-' && b[18] == b'-' && b[23] == b'-' {
        let mut out = [0u8; 16];
        let mut bad = 0u8;
        for (o, &at) in out
            .iter_mut()
            .zip(ferry_db::decode::UUID_DIGIT_PLACES.iter())
        {
            let (hi, lo) = (HEX[b[at] as usize], HEX[b[at + 1] as usize]);
            bad |= hi | lo;
            *o = (hi << 4) | (lo & 0x0f);
        }
        return (bad & 0xf0 == 0).then_some(out);
    }
    let mut out = [0u8; 16];
    let mut n = 0;
    for c in s.bytes() {
        if c == b'-' {
            continue;
        }
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        let byte = out.get_mut(n / 2)?;
        *byte = if n % 2 == 0 { v << 4 } else { *byte | v };
        n += 1;
    }
    (n == 32).then_some(out)
}

/// `numeric`'s binary form: digit count, weight (of the first base-10000 digit), sign and
/// display scale, then the base-10000 digits, most significant first, without leading or
/// trailing zero digits.
fn numeric(out: &mut Vec<u8>, v: i128, scale: u8) {
    let neg = v < 0;
    let mut a = v.unsigned_abs();
    // Base-10000 digits line up with the decimal point: the lowest holds the last
    // `4 - pad` decimals of `a`, followed by `pad` zeros. Then four decimals a digit,
    // least significant first (an i128 makes at most 10); a division by 10000 where a
    // decimal digit at a time took four.
    let pad = (4 - u32::from(scale) % 4) % 4;
    let first = 10u64.pow(4 - pad);
    let mut groups = [0u16; 12];
    groups[0] = ((a % u128::from(first)) as u64 * 10u64.pow(pad)) as u16;
    a /= u128::from(first);
    let mut n = 1usize;
    // Most values fit 64 bits, whose division is a few times faster than 128-bit division.
    while a > u128::from(u64::MAX) {
        groups[n] = (a % 10_000) as u16;
        a /= 10_000;
        n += 1;
    }
    let mut a = a as u64;
    while a > 0 {
        groups[n] = (a % 10_000) as u16;
        a /= 10_000;
        n += 1;
    }
    // The top digit is not zero (unless the value is); trailing zero digits go.
    let low = groups[..n].iter().take_while(|&&g| g == 0).count();
    let count = n - low;
    let weight = if count == 0 {
        0
    } else {
        n as i32 - 1 - (i32::from(scale) + pad as i32) / 4
    };
    let len = 8 + 2 * count;
    out.reserve(4 + len);
    out.extend_from_slice(&(len as i32).to_be_bytes());
    out.extend_from_slice(&(count as i16).to_be_bytes());
    out.extend_from_slice(&(weight as i16).to_be_bytes());
    out.extend_from_slice(&(if neg && count > 0 { 0x4000u16 } else { 0 }).to_be_bytes());
    out.extend_from_slice(&i16::from(scale).to_be_bytes());
    for g in groups[low..n].iter().rev() {
        out.extend_from_slice(&g.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn be32(b: &[u8], at: usize) -> i32 {
        i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    #[test]
    fn rows_written_column_by_column_are_the_rows_written_one_by_one() {
        // Every encoder, NULLs in each column but the first and the all-NULL one, several
        // numeric magnitudes; an offset batch (sliced) so that offsets and nulls start
        // mid-buffer; more rows than a tile of `push_rows`.
        let n = 2 * PUSH_TILE_ROWS + 45;
        let some = |i: usize| i % 3 != 1;
        let text: Vec<Option<String>> = (0..n)
            .map(|i| some(i).then(|| "é".repeat(i % 5) + &i.to_string()))
            .collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
            Arc::new(NullArray::new(n)),
            Arc::new(BooleanArray::from_iter(
                (0..n).map(|i| some(i).then_some(i % 2 == 0)),
            )),
            Arc::new(Int8Array::from_iter(
                (0..n).map(|i| some(i).then_some((i as i8).wrapping_sub(20))),
            )),
            Arc::new(Int8Array::from_iter(
                (0..n).map(|i| some(i).then_some(i as i8)),
            )),
            Arc::new(Int16Array::from_iter(
                (0..n).map(|i| some(i).then_some(-(i as i16))),
            )),
            Arc::new(Int16Array::from_iter(
                (0..n).map(|i| some(i).then_some(i as i16)),
            )),
            Arc::new(Int32Array::from_iter(
                (0..n).map(|i| some(i).then_some(i as i32 * 1000)),
            )),
            Arc::new(Int32Array::from_iter(
                (0..n).map(|i| some(i).then_some(-(i as i32))),
            )),
            Arc::new(Float32Array::from_iter(
                (0..n).map(|i| some(i).then_some(i as f32 / 3.0)),
            )),
            Arc::new(Float32Array::from_iter(
                (0..n).map(|i| some(i).then_some(i as f32 / 7.0)),
            )),
            Arc::new(Float64Array::from_iter(
                (0..n).map(|i| some(i).then_some(i as f64 / 9.0)),
            )),
            Arc::new(StringArray::from(text.clone())),
            Arc::new(StringArray::from(
                (0..n)
                    .map(|i| some(i).then(|| format!("{{\"k\": {i}}}")))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(LargeStringArray::from(text.clone())),
            Arc::new(StringArray::from(
                (0..n)
                    .map(|i| some(i).then(|| format!("00000000-0000-0000-0000-{i:012x}")))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(BinaryArray::from_iter(
                (0..n).map(|i| some(i).then(|| vec![i as u8; i % 4])),
            )),
            Arc::new(LargeBinaryArray::from_iter(
                (0..n).map(|i| some(i).then(|| vec![i as u8; i % 3])),
            )),
            Arc::new(Date32Array::from_iter(
                (0..n).map(|i| some(i).then_some(i as i32 * 400)),
            )),
            Arc::new(Time64MicrosecondArray::from_iter(
                (0..n).map(|i| some(i).then_some(i as i64 * 1_000_003)),
            )),
            Arc::new(TimestampMicrosecondArray::from_iter(
                (0..n).map(|i| some(i).then_some(i as i64 * 86_400_000_001 - 10)),
            )),
            Arc::new(
                Decimal128Array::from_iter((0..n).map(|i| {
                    some(i).then(|| (i as i128 % 40 - 20) * 10i128.pow(i as u32 % 37) + i as i128)
                }))
                .with_precision_and_scale(38, 4)
                .unwrap(),
            ),
            Arc::new(
                Decimal128Array::from_iter((0..n).map(|i| some(i).then_some(i as i128 * 125)))
                    .with_precision_and_scale(12, 0)
                    .unwrap(),
            ),
        ];
        use oid::*;
        let oids = [
            INT8,
            INT4,
            BOOL,
            INT2,
            INT8,
            INT4,
            INT8,
            INT4,
            INT8,
            FLOAT4,
            FLOAT8,
            FLOAT8,
            TEXT,
            JSONB,
            VARCHAR,
            UUID,
            BYTEA,
            BYTEA,
            DATE,
            TIME,
            TIMESTAMPTZ,
            NUMERIC,
            NUMERIC,
        ];
        assert_eq!(cols.len(), oids.len());
        let idx: Vec<usize> = (0..cols.len()).collect();
        for (offset, len) in [(0, n), (7, 20), (39, 1), (5, 0), (100, n - 100)] {
            let sliced: Vec<ArrayRef> = cols.iter().map(|c| c.slice(offset, len)).collect();
            let b = BinaryColumns::new(&sliced, &idx, &oids).unwrap();
            for rows in [0..len, len / 3..len] {
                let mut one_by_one = b"before".to_vec();
                for i in rows.clone() {
                    b.push_row(&mut one_by_one, i).unwrap();
                }
                let mut by_column = b"before".to_vec();
                b.push_rows(&mut by_column, rows.clone()).unwrap();
                assert_eq!(by_column, one_by_one, "rows {rows:?} of {offset}+{len}");
            }
        }

        // A value refused (a date out of range, a bad uuid) leaves nothing of the rows.
        let days = Date32Array::from(vec![Some(1), None, Some(i32::MIN)]);
        let uuids = StringArray::from(vec!["0000000000000000000000000000000f", "x", "y"]);
        let cols: Vec<ArrayRef> = vec![Arc::new(days), Arc::new(uuids)];
        let b = BinaryColumns::new(&cols, &[0, 1], &[DATE, UUID]).unwrap();
        let mut out = b"kept".to_vec();
        assert_eq!(
            b.push_rows(&mut out, 0..3).unwrap_err(),
            "a date out of range"
        );
        assert_eq!(out, b"kept");
        assert!(b
            .push_rows(&mut out, 0..2)
            .unwrap_err()
            .contains("'x' is not a uuid"));
        assert_eq!(out, b"kept");
        b.push_rows(&mut out, 0..1).unwrap();
        assert_eq!(out.len(), 4 + 2 + (4 + 4) + (4 + 16));
        // Refused in a later tile: the tiles before it are taken back too.
        let days = Date32Array::from_iter_values((0..3 * PUSH_TILE_ROWS as i32).map(|d| {
            if d == 2 * PUSH_TILE_ROWS as i32 + 3 {
                i32::MIN
            } else {
                d
            }
        }));
        let cols: Vec<ArrayRef> = vec![Arc::new(days)];
        let b = BinaryColumns::new(&cols, &[0], &[DATE]).unwrap();
        let mut out = b"kept".to_vec();
        assert!(b.push_rows(&mut out, 0..3 * PUSH_TILE_ROWS).is_err());
        assert_eq!(out, b"kept");
    }

    #[test]
    fn array_columns_write_array_recv_form_and_keep_nothing_of_a_refused_row() {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![Some(7), None, Some(9)])),
            Arc::new(StringArray::from(vec![
                "00000000-0000-0000-0000-000000000001",
                "x",
                "0000000000000000000000000000000f",
            ])),
        ];
        let b = BinaryColumns::new(&cols, &[0, 1], &[oid::INT4, oid::UUID]).unwrap();
        let mut a = ArrayColumns::new(&[oid::INT4, oid::UUID]);
        a.push_row(&b, 0).unwrap();
        // Row 1's uuid is refused after its int was written: the int goes too.
        assert!(a.push_row(&b, 1).unwrap_err().contains("'x' is not a uuid"));
        a.push_row(&b, 2).unwrap();
        assert_eq!(a.bytes(), 2 * (4 + 4) + 2 * (4 + 16));
        let out = a.finish();
        let ints = &out[0];
        // ndim 1, no NULL, int4 elements, 2 of them from index 1.
        let header: Vec<i32> = (0..5).map(|k| be32(ints, 4 * k)).collect();
        assert_eq!(header, vec![1, 0, oid::INT4 as i32, 2, 1]);
        assert_eq!((be32(ints, 20), be32(ints, 24)), (4, 7));
        assert_eq!((be32(ints, 28), be32(ints, 32)), (4, 9));
        assert_eq!(ints.len(), 36);
        assert_eq!(be32(&out[1], 8), oid::UUID as i32);
        assert_eq!(out[1][20 + 4 + 15], 1);
        assert_eq!(out[1][20 + 2 * 4 + 16 + 15], 0x0f);

        // A NULL sets the header's flag.
        let mut a = ArrayColumns::new(&[oid::INT4]);
        let b = BinaryColumns::new(&cols, &[0], &[oid::INT4]).unwrap();
        a.push_row(&b, 1).unwrap();
        let out = a.finish();
        assert_eq!((be32(&out[0], 4), be32(&out[0], 20)), (1, -1));
        for elem in [
            oid::BOOL,
            oid::TEXT,
            oid::NUMERIC,
            oid::JSONB,
            oid::TIMESTAMPTZ,
        ] {
            assert!(oid::array_of(elem).is_some(), "{elem}");
        }
        assert_eq!(oid::array_of(869), None, "inet: not written in binary");
    }

    fn numeric_text(v: i128, scale: u8) -> String {
        let mut out = Vec::new();
        numeric(&mut out, v, scale);
        let b = &out[4..];
        let be = |i: usize| i16::from_be_bytes([b[i], b[i + 1]]);
        let (count, weight, sign, dscale) = (be(0), be(2), be(4) as u16, be(6));
        assert_eq!(dscale as u8, scale);
        // PostgreSQL's own form: no leading or trailing zero digit, zero with weight 0
        // and no sign.
        if count == 0 {
            assert_eq!((weight, sign), (0, 0), "zero of {v} at scale {scale}");
        } else {
            assert_ne!(be(8), 0, "leading zero digit: {v} at scale {scale}");
            assert_ne!(
                be(8 + 2 * (count as usize - 1)),
                0,
                "trailing zero digit: {v}"
            );
        }
        // Rebuild the value from the digits, in decimal text, to compare.
        let mut int = String::new();
        let mut frac = String::new();
        for k in 0..count as i32 {
            let d = be(8 + 2 * k as usize);
            assert!((0..10000).contains(&d), "digit {d}");
            let w = weight - k as i16;
            if w >= 0 {
                int.push_str(&format!("{d:04}"));
            } else {
                while frac.len() < ((-w - 1) * 4) as usize {
                    frac.push('0');
                }
                frac.push_str(&format!("{d:04}"));
            }
        }
        // Integer groups the digits skipped (trailing zero groups before the point).
        let last_w = weight as i32 - count as i32 + 1;
        for _ in 0..last_w.max(0) {
            int.push_str("0000");
        }
        let int = int.trim_start_matches('0');
        let int = if int.is_empty() { "0" } else { int };
        while frac.len() < scale as usize {
            frac.push('0');
        }
        let frac = &frac[..scale as usize];
        let sign = if sign == 0x4000 { "-" } else { "" };
        if scale == 0 {
            format!("{sign}{int}")
        } else {
            format!("{sign}{int}.{frac}")
        }
    }

    fn expected(v: i128, scale: u8) -> String {
        arrow::array::Decimal128Array::from(vec![v])
            .with_precision_and_scale(38, scale as i8)
            .unwrap()
            .value_as_string(0)
    }

    #[test]
    fn numerics_encode_every_scale_and_magnitude() {
        let values: Vec<i128> = vec![
            0,
            1,
            -1,
            9999,
            10000,
            123456789,
            -100000000,
            10i128.pow(37),
            -(10i128.pow(38) - 1),
            10i128.pow(38) - 1,
            4200,
            1_0000_0000_0001,
            120_000,
            -7,
            5 * 10i128.pow(21),
            -(123 * 10i128.pow(30) + 45),
        ];
        for scale in 0..=38u8 {
            for &v in &values {
                let got = numeric_text(v, scale);
                let want = expected(v, scale);
                let want = if v == 0 && want.starts_with('-') {
                    want[1..].to_string()
                } else {
                    want
                };
                assert_eq!(got, want, "{v} scale {scale}");
            }
        }
    }

    #[test]
    fn uuids_parse_with_and_without_hyphens_and_refuse_others() {
        let u = parse_uuid("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11").unwrap();
        assert_eq!(u[0], 0xa0);
        assert_eq!(u[15], 0x11);
        assert_eq!(parse_uuid("a0eebc999c0b4ef8bb6d6bb9bd380a11"), Some(u));
        assert_eq!(parse_uuid("a0eebc99"), None);
        assert_eq!(parse_uuid("g0eebc999c0b4ef8bb6d6bb9bd380a11"), None);
        assert_eq!(parse_uuid("a0eebc999c0b4ef8bb6d6bb9bd380a1100"), None);
        // The canonical form's table lookup: upper case, and every place of a bad digit.
        assert_eq!(parse_uuid("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"), Some(u));
        let good = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        for (i, c) in good.char_indices().filter(|(_, c)| *c != '-') {
            for bad in ['g', 'G', '-', ' ', '/', ':', '@', '`', '\u{e9}'] {
                let mut t: String = good[..i].to_string();
                t.push(bad);
                t.push_str(&good[i + c.len_utf8()..]);
                assert_eq!(parse_uuid(&t), None, "{t}");
            }
        }
        // Hyphens elsewhere are as uuid_in takes them.
        assert_eq!(parse_uuid("a0eebc999c0b-4ef8-bb6d-6bb9-bd380a11"), Some(u));
    }

    #[test]
    fn unknown_pairs_fall_back() {
        let a: ArrayRef = std::sync::Arc::new(Int64Array::from(vec![1]));
        let s: ArrayRef = std::sync::Arc::new(StringArray::from(vec!["10.0.0.1"]));
        let cols = vec![a, s];
        // int8 into int4 could cut; text into inet (869) needs the server's parser.
        assert!(BinaryColumns::new(&cols, &[0], &[oid::INT4]).is_none());
        assert!(BinaryColumns::new(&cols, &[1], &[869]).is_none());
        assert!(BinaryColumns::new(&cols, &[0, 1], &[oid::INT8, oid::TEXT]).is_some());
    }
}
