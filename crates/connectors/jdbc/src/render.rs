//! Arrow values as SQL literals of each dialect, for the sink's statements.
//!
//! The sink sends its rows as multi-row statements in the simple query protocol: one round
//! trip per batch, no per-row prepare, and the same code for both dialects. Every value is
//! rendered as a literal of its column's type; text is quoted with the dialect's rules
//! (PostgreSQL with `standard_conforming_strings`, MySQL with backslashes escaped too), so
//! no value can end the literal early.

use arrow::array::*;
use arrow::datatypes::{DataType, TimeUnit};
use ferry_api::value::{format_date, format_decimal, format_time};

use ferry_db::catalog::literal;
use ferry_db::conn::Dialect;

fn hex(b: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push(H[(x >> 4) as usize] as char);
        s.push(H[(x & 15) as usize] as char);
    }
    s
}

fn timestamp_text(micros: i64) -> String {
    match chrono::DateTime::from_timestamp_micros(micros) {
        Some(dt) => dt.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f").to_string(),
        None => micros.to_string(),
    }
}

/// Appends the literal of row `i` of `a` to `out`.
pub fn push_literal(out: &mut String, d: Dialect, a: &dyn Array, i: usize) -> Result<(), String> {
    if a.is_null(i) {
        out.push_str("NULL");
        return Ok(());
    }
    use std::fmt::Write;
    macro_rules! prim {
        ($t:ty) => {{
            let v = a
                .as_any()
                .downcast_ref::<$t>()
                .ok_or("array type")?
                .value(i);
            let _ = write!(out, "{v}");
        }};
    }
    match a.data_type() {
        DataType::Boolean => {
            let v = a
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or("array type")?
                .value(i);
            out.push_str(if v { "TRUE" } else { "FALSE" });
        }
        DataType::Int8 => prim!(Int8Array),
        DataType::Int16 => prim!(Int16Array),
        DataType::Int32 => prim!(Int32Array),
        DataType::Int64 => prim!(Int64Array),
        DataType::UInt8 => prim!(UInt8Array),
        DataType::UInt16 => prim!(UInt16Array),
        DataType::UInt32 => prim!(UInt32Array),
        DataType::UInt64 => prim!(UInt64Array),
        DataType::Float32 | DataType::Float64 => {
            let v = match a.data_type() {
                DataType::Float32 => a
                    .as_any()
                    .downcast_ref::<Float32Array>()
                    .ok_or("array type")?
                    .value(i) as f64,
                _ => a
                    .as_any()
                    .downcast_ref::<Float64Array>()
                    .ok_or("array type")?
                    .value(i),
            };
            if v.is_finite() {
                let _ = if a.data_type() == &DataType::Float32 {
                    write!(out, "{}", v as f32)
                } else {
                    write!(out, "{v}")
                };
            } else if d == Dialect::Postgres {
                let t = if v.is_nan() {
                    "NaN"
                } else if v > 0.0 {
                    "Infinity"
                } else {
                    "-Infinity"
                };
                let _ = write!(out, "'{t}'");
            } else {
                return Err(format!("{v} has no MySQL value"));
            }
        }
        DataType::Decimal128(_, s) => {
            let v = a
                .as_any()
                .downcast_ref::<Decimal128Array>()
                .ok_or("array type")?
                .value(i);
            out.push_str(&format_decimal(v, *s));
        }
        DataType::Utf8 => {
            let v = a
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or("array type")?
                .value(i);
            out.push_str(&literal(d, v));
        }
        DataType::LargeUtf8 => {
            let v = a
                .as_any()
                .downcast_ref::<LargeStringArray>()
                .ok_or("array type")?
                .value(i);
            out.push_str(&literal(d, v));
        }
        DataType::Binary => {
            let v = a
                .as_any()
                .downcast_ref::<BinaryArray>()
                .ok_or("array type")?
                .value(i);
            match d {
                Dialect::Postgres => {
                    let _ = write!(out, "'\\x{}'::bytea", hex(v));
                }
                Dialect::MySql => {
                    let _ = write!(out, "X'{}'", hex(v));
                }
            }
        }
        DataType::Date32 => {
            let v = a
                .as_any()
                .downcast_ref::<Date32Array>()
                .ok_or("array type")?
                .value(i);
            let _ = write!(out, "'{}'", format_date(v));
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let v = a
                .as_any()
                .downcast_ref::<Time64MicrosecondArray>()
                .ok_or("array type")?
                .value(i);
            let _ = write!(out, "'{}'", format_time(v));
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let v = a
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .ok_or("array type")?
                .value(i);
            let zone = if tz.is_some() && d == Dialect::Postgres {
                "+00"
            } else {
                ""
            };
            let _ = write!(out, "'{}{zone}'", timestamp_text(v));
        }
        DataType::Null => out.push_str("NULL"),
        DataType::List(_) if d == Dialect::Postgres => {
            let l = a.as_any().downcast_ref::<ListArray>().ok_or("array type")?;
            let items = l.value(i);
            if items.is_empty() {
                out.push_str("'{}'");
            } else {
                out.push_str("ARRAY[");
                for j in 0..items.len() {
                    if j > 0 {
                        out.push(',');
                    }
                    push_literal(out, d, items.as_ref(), j)?;
                }
                out.push(']');
            }
        }
        other => {
            return Err(format!(
                "type {} cannot be written to {}",
                ferry_api::types::type_name(other),
                d.catalog_name()
            ))
        }
    }
    Ok(())
}

/// Replaces the parameters of a user's statement (`?` in order, or `:name` by field name)
/// with literals of row `i`; `names` are the input's fields. Quoted text, quoted
/// identifiers and PostgreSQL's `::` casts are left alone.
pub fn bind_query(
    sql: &str,
    d: Dialect,
    names: &[String],
    cols: &[ArrayRef],
    i: usize,
) -> Result<String, String> {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 16 * cols.len());
    let mut pos = 0;
    let mut next_param = 0;
    let mut last = 0;
    while pos < b.len() {
        let c = b[pos];
        match c {
            b'\'' | b'"' | b'`' => {
                let q = c;
                pos += 1;
                while pos < b.len() {
                    if b[pos] == q {
                        if pos + 1 < b.len() && b[pos + 1] == q {
                            pos += 2;
                            continue;
                        }
                        break;
                    }
                    if b[pos] == b'\\' && d == Dialect::MySql {
                        pos += 1;
                    }
                    pos += 1;
                }
                pos += 1;
            }
            b'?' => {
                out.push_str(&sql[last..pos]);
                let col = cols.get(next_param).ok_or_else(|| {
                    format!(
                        "the query has more '?' than the input has fields ({})",
                        cols.len()
                    )
                })?;
                push_literal(&mut out, d, col.as_ref(), i)?;
                next_param += 1;
                pos += 1;
                last = pos;
            }
            b':' if pos + 1 < b.len() && b[pos + 1] == b':' => pos += 2,
            b':' if pos + 1 < b.len()
                && (b[pos + 1].is_ascii_alphabetic() || b[pos + 1] == b'_')
                && (pos == 0 || !b[pos - 1].is_ascii_alphanumeric()) =>
            {
                let start = pos + 1;
                let mut end = start;
                while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
                    end += 1;
                }
                let name = &sql[start..end];
                match names.iter().position(|n| n == name) {
                    Some(k) => {
                        out.push_str(&sql[last..pos]);
                        push_literal(&mut out, d, cols[k].as_ref(), i)?;
                        last = end;
                    }
                    None => {
                        return Err(format!(
                            "the query's parameter ':{name}' names no input field"
                        ))
                    }
                }
                pos = end;
            }
            _ => pos += 1,
        }
    }
    out.push_str(&sql[last..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn parameters_outside_quotes_become_literals() {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![7])),
            Arc::new(StringArray::from(vec!["it's ?"])),
        ];
        let names = vec!["id".to_string(), "name".to_string()];
        let s = bind_query(
            "insert into t values (?, ?) -- '?'",
            Dialect::Postgres,
            &names,
            &cols,
            0,
        )
        .unwrap();
        assert_eq!(s, "insert into t values (7, 'it''s ?') -- '?'");
        let s = bind_query(
            "update t set name = :name where id = :id::int",
            Dialect::Postgres,
            &names,
            &cols,
            0,
        )
        .unwrap();
        assert_eq!(s, "update t set name = 'it''s ?' where id = 7::int");
        let mut out = String::new();
        push_literal(
            &mut out,
            Dialect::MySql,
            &BinaryArray::from(vec![&b"\x01\xff"[..]]),
            0,
        )
        .unwrap();
        assert_eq!(out, "X'01ff'");
    }
}
