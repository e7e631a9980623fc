//! Rows as PostgreSQL `COPY … FROM STDIN (FORMAT csv)` input, for `use_copy_statement`.
//!
//! CSV rather than binary COPY: the server parses every value with the target column's own
//! input function, so a string reaches a `uuid`, `json`, `inet` or PostGIS `geometry` column
//! as it would through an INSERT, whatever the input's Arrow type. NULL is an unquoted empty
//! field; every string is quoted, so an empty string stays an empty string.
//!
//! A batch's columns are matched to their Arrow type once ([`CsvColumns::new`]); each value
//! is then written straight into the output buffer, with no allocation per row.

use std::io::Write as _;

use arrow::array::*;
use arrow::datatypes::{DataType, TimeUnit};
use ferry_api::value::{format_date, format_decimal, format_time};

/// One column of a batch, downcast once.
enum Col<'a> {
    Null,
    Bool(&'a BooleanArray),
    I8(&'a Int8Array),
    I16(&'a Int16Array),
    I32(&'a Int32Array),
    I64(&'a Int64Array),
    U8(&'a UInt8Array),
    U16(&'a UInt16Array),
    U32(&'a UInt32Array),
    U64(&'a UInt64Array),
    F32(&'a Float32Array),
    F64(&'a Float64Array),
    Decimal(&'a Decimal128Array, i8),
    Str(&'a StringArray),
    LargeStr(&'a LargeStringArray),
    Bin(&'a BinaryArray),
    Date(&'a Date32Array),
    Time(&'a Time64MicrosecondArray),
    Timestamp(&'a TimestampMicrosecondArray, bool),
    List(&'a ListArray),
}

/// The columns of one batch, ready to be written as CSV rows.
pub struct CsvColumns<'a> {
    cols: Vec<Col<'a>>,
}

fn col(a: &dyn Array) -> Result<Col<'_>, String> {
    macro_rules! down {
        ($v:ident, $t:ty) => {
            Col::$v(a.as_any().downcast_ref::<$t>().ok_or("array type")?)
        };
    }
    Ok(match a.data_type() {
        DataType::Null => Col::Null,
        DataType::Boolean => down!(Bool, BooleanArray),
        DataType::Int8 => down!(I8, Int8Array),
        DataType::Int16 => down!(I16, Int16Array),
        DataType::Int32 => down!(I32, Int32Array),
        DataType::Int64 => down!(I64, Int64Array),
        DataType::UInt8 => down!(U8, UInt8Array),
        DataType::UInt16 => down!(U16, UInt16Array),
        DataType::UInt32 => down!(U32, UInt32Array),
        DataType::UInt64 => down!(U64, UInt64Array),
        DataType::Float32 => down!(F32, Float32Array),
        DataType::Float64 => down!(F64, Float64Array),
        DataType::Decimal128(_, s) => Col::Decimal(
            a.as_any()
                .downcast_ref::<Decimal128Array>()
                .ok_or("array type")?,
            *s,
        ),
        DataType::Utf8 => down!(Str, StringArray),
        DataType::LargeUtf8 => down!(LargeStr, LargeStringArray),
        DataType::Binary => down!(Bin, BinaryArray),
        DataType::Date32 => down!(Date, Date32Array),
        DataType::Time64(TimeUnit::Microsecond) => down!(Time, Time64MicrosecondArray),
        DataType::Timestamp(TimeUnit::Microsecond, tz) => Col::Timestamp(
            a.as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .ok_or("array type")?,
            tz.is_some(),
        ),
        DataType::List(_) => down!(List, ListArray),
        other => {
            return Err(format!(
                "type {} cannot be written with use_copy_statement",
                ferry_api::types::type_name(other)
            ))
        }
    })
}

impl<'a> CsvColumns<'a> {
    /// The columns `idx` of `cols`, in that order; an error names a type COPY cannot take.
    pub fn new(cols: &'a [ArrayRef], idx: &[usize]) -> Result<Self, String> {
        let cols = idx
            .iter()
            .map(|&i| col(cols[i].as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(CsvColumns { cols })
    }

    /// Appends row `i` as one CSV line.
    pub fn push_row(&self, out: &mut Vec<u8>, i: usize) -> Result<(), String> {
        for (n, c) in self.cols.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            push_value(out, c, i)?;
        }
        out.push(b'\n');
        Ok(())
    }
}

fn push_quoted(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for b in s.bytes() {
        if b == b'"' {
            out.push(b'"');
        }
        out.push(b);
    }
    out.push(b'"');
}

fn push_float(out: &mut Vec<u8>, v: f64, single: bool) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"Infinity" } else { b"-Infinity" });
    } else if single {
        let _ = write!(out, "{}", v as f32);
    } else {
        let _ = write!(out, "{v}");
    }
}

fn timestamp_text(micros: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|dt| dt.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f").to_string())
}

fn push_value(out: &mut Vec<u8>, c: &Col<'_>, i: usize) -> Result<(), String> {
    macro_rules! num {
        ($a:expr) => {{
            if $a.is_null(i) {
                return Ok(());
            }
            let _ = write!(out, "{}", $a.value(i));
        }};
    }
    match c {
        Col::Null => {}
        Col::Bool(a) => {
            if a.is_valid(i) {
                out.push(if a.value(i) { b't' } else { b'f' });
            }
        }
        Col::I8(a) => num!(a),
        Col::I16(a) => num!(a),
        Col::I32(a) => num!(a),
        Col::I64(a) => num!(a),
        Col::U8(a) => num!(a),
        Col::U16(a) => num!(a),
        Col::U32(a) => num!(a),
        Col::U64(a) => num!(a),
        Col::F32(a) => {
            if a.is_valid(i) {
                push_float(out, a.value(i) as f64, true);
            }
        }
        Col::F64(a) => {
            if a.is_valid(i) {
                push_float(out, a.value(i), false);
            }
        }
        Col::Decimal(a, s) => {
            if a.is_valid(i) {
                out.extend_from_slice(format_decimal(a.value(i), *s).as_bytes());
            }
        }
        Col::Str(a) => {
            if a.is_valid(i) {
                push_quoted(out, a.value(i));
            }
        }
        Col::LargeStr(a) => {
            if a.is_valid(i) {
                push_quoted(out, a.value(i));
            }
        }
        Col::Bin(a) => {
            if a.is_valid(i) {
                const H: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\x");
                for x in a.value(i) {
                    out.push(H[(x >> 4) as usize]);
                    out.push(H[(x & 15) as usize]);
                }
            }
        }
        Col::Date(a) => {
            if a.is_valid(i) {
                out.extend_from_slice(format_date(a.value(i)).as_bytes());
            }
        }
        Col::Time(a) => {
            if a.is_valid(i) {
                out.extend_from_slice(format_time(a.value(i)).as_bytes());
            }
        }
        Col::Timestamp(a, zoned) => {
            if a.is_valid(i) {
                let v = a.value(i);
                let text = timestamp_text(v)
                    .ok_or_else(|| format!("timestamp {v} µs is out of PostgreSQL's range"))?;
                out.extend_from_slice(text.as_bytes());
                if *zoned {
                    out.extend_from_slice(b"+00");
                }
            }
        }
        Col::List(a) => {
            if a.is_valid(i) {
                let items = a.value(i);
                let mut text = Vec::new();
                push_array_literal(&mut text, items.as_ref())?;
                let text = String::from_utf8(text).map_err(|e| e.to_string())?;
                push_quoted(out, &text);
            }
        }
    }
    Ok(())
}

/// PostgreSQL's array input syntax: `{1,2,NULL}`, elements quoted with backslash escapes.
fn push_array_literal(out: &mut Vec<u8>, items: &dyn Array) -> Result<(), String> {
    let c = col(items)?;
    let mut v = Vec::new();
    out.push(b'{');
    for j in 0..items.len() {
        if j > 0 {
            out.push(b',');
        }
        if items.is_null(j) {
            out.extend_from_slice(b"NULL");
            continue;
        }
        // Strings as they are (their CSV quoting is not wanted: array elements quote
        // their own way); other values as their CSV text.
        let text: &[u8] = match &c {
            Col::Str(a) => a.value(j).as_bytes(),
            Col::LargeStr(a) => a.value(j).as_bytes(),
            _ => {
                v.clear();
                push_value(&mut v, &c, j)?;
                &v
            }
        };
        out.push(b'"');
        for &b in text {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    }
    out.push(b'}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn values_are_written_as_postgres_csv() {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![Some(1), None])),
            Arc::new(StringArray::from(vec![Some("a \"q\", b\nc"), Some("")])),
            Arc::new(BinaryArray::from(vec![Some(&b"\x01\xff"[..]), None])),
            Arc::new(Float64Array::from(vec![f64::NAN, 1.5])),
            Arc::new(BooleanArray::from(vec![Some(true), None])),
        ];
        let c = CsvColumns::new(&cols, &[0, 1, 2, 3, 4]).unwrap();
        let mut out = Vec::new();
        c.push_row(&mut out, 0).unwrap();
        c.push_row(&mut out, 1).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "1,\"a \"\"q\"\", b\nc\",\\x01ff,NaN,t\n,\"\",,1.5,\n"
        );
    }

    #[test]
    fn arrays_use_postgres_array_syntax_inside_one_csv_field() {
        let list =
            ListArray::from_iter_primitive::<arrow::datatypes::Int32Type, _, _>(vec![Some(vec![
                Some(1),
                None,
                Some(3),
            ])]);
        let cols: Vec<ArrayRef> = vec![Arc::new(list)];
        let c = CsvColumns::new(&cols, &[0]).unwrap();
        let mut out = Vec::new();
        c.push_row(&mut out, 0).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"{\"\"1\"\",NULL,\"\"3\"\"}\"\n"
        );
    }
}
