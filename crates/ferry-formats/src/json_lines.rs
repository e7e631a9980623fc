//! JSON lines decoded straight into Arrow builders, without a JSON value per row.
//!
//! The decoder reads the common shapes (objects of plain keys holding nulls, numbers,
//! strings and booleans) itself and gives up on the rest: the caller then reads the batch
//! with the general path (`serde_json` values and [`json_to_array`]), so results and
//! errors stay exactly those of the general path. It gives up, for instance, on a key that
//! matches a column only ignoring case, a duplicate key, a number where an integer column
//! needs rounding or saturating, a string for a numeric column, anything that is not valid
//! JSON. Nested columns (arrays, maps, rows) take their value as a `serde_json` value each,
//! converted per batch by [`json_to_array`].
//!
//! The file sources read JSON lines with it; the broker sources ([`crate::Decoder`] with
//! `format = json`) read message bodies, one object each, with it.
//!
//! arrow-json's `Decoder` was considered and not used: it converts differently from
//! SeaTunnel's reading that Ferry implements (no case-insensitive field names, no rows
//! written as lists, strings for booleans and numbers for timestamps read its own way,
//! fractional numbers truncated into integers), and those differences would change results.

use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::{DataType, Fields, TimeUnit};
use base64::Engine;
use ferry_api::value::{json_to_array, parse_date, parse_decimal, parse_time, parse_timestamp};
use serde_json::Value;

/// Nesting the decoder follows before giving up (serde_json stops at 128).
const MAX_DEPTH: usize = 64;

/// The decoder cannot read this line exactly as the general path would: use that instead.
#[derive(Debug, PartialEq, Eq)]
pub struct GiveUp;

type Step<T = ()> = Result<T, GiveUp>;

/// A column being decoded.
enum JCol {
    Utf8(StringBuilder),
    Bool(BooleanBuilder),
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Dec(Decimal128Builder, u8, i8),
    Bin(BinaryBuilder),
    Date(Date32Builder),
    Time(Time64MicrosecondBuilder),
    Ts(TimestampMicrosecondBuilder, Option<Arc<str>>),
    Null(usize),
    /// Arrays, maps and rows: one JSON value per row, converted per batch.
    Nested(Vec<Value>, DataType),
}

impl JCol {
    fn new(dt: &DataType, cap: usize) -> JCol {
        match dt {
            DataType::Utf8 => JCol::Utf8(StringBuilder::with_capacity(cap, cap * 16)),
            DataType::Boolean => JCol::Bool(BooleanBuilder::with_capacity(cap)),
            DataType::Int8 => JCol::I8(Int8Builder::with_capacity(cap)),
            DataType::Int16 => JCol::I16(Int16Builder::with_capacity(cap)),
            DataType::Int32 => JCol::I32(Int32Builder::with_capacity(cap)),
            DataType::Int64 => JCol::I64(Int64Builder::with_capacity(cap)),
            DataType::Float32 => JCol::F32(Float32Builder::with_capacity(cap)),
            DataType::Float64 => JCol::F64(Float64Builder::with_capacity(cap)),
            DataType::Decimal128(p, s) => JCol::Dec(Decimal128Builder::with_capacity(cap), *p, *s),
            DataType::Binary => JCol::Bin(BinaryBuilder::with_capacity(cap, cap * 16)),
            DataType::Date32 => JCol::Date(Date32Builder::with_capacity(cap)),
            DataType::Time64(TimeUnit::Microsecond) => {
                JCol::Time(Time64MicrosecondBuilder::with_capacity(cap))
            }
            DataType::Timestamp(TimeUnit::Microsecond, tz) => {
                JCol::Ts(TimestampMicrosecondBuilder::with_capacity(cap), tz.clone())
            }
            DataType::Null => JCol::Null(0),
            other => JCol::Nested(Vec::with_capacity(cap), other.clone()),
        }
    }

    fn append_null(&mut self) {
        match self {
            JCol::Utf8(b) => b.append_null(),
            JCol::Bool(b) => b.append_null(),
            JCol::I8(b) => b.append_null(),
            JCol::I16(b) => b.append_null(),
            JCol::I32(b) => b.append_null(),
            JCol::I64(b) => b.append_null(),
            JCol::F32(b) => b.append_null(),
            JCol::F64(b) => b.append_null(),
            JCol::Dec(b, _, _) => b.append_null(),
            JCol::Bin(b) => b.append_null(),
            JCol::Date(b) => b.append_null(),
            JCol::Time(b) => b.append_null(),
            JCol::Ts(b, _) => b.append_null(),
            JCol::Null(n) => *n += 1,
            JCol::Nested(v, _) => v.push(Value::Null),
        }
    }

    fn finish(&mut self) -> Result<ArrayRef, String> {
        Ok(match self {
            JCol::Utf8(b) => Arc::new(b.finish()),
            JCol::Bool(b) => Arc::new(b.finish()),
            JCol::I8(b) => Arc::new(b.finish()),
            JCol::I16(b) => Arc::new(b.finish()),
            JCol::I32(b) => Arc::new(b.finish()),
            JCol::I64(b) => Arc::new(b.finish()),
            JCol::F32(b) => Arc::new(b.finish()),
            JCol::F64(b) => Arc::new(b.finish()),
            JCol::Dec(b, p, s) => Arc::new(
                b.finish()
                    .with_precision_and_scale(*p, *s)
                    .map_err(|e| e.to_string())?,
            ),
            JCol::Bin(b) => Arc::new(b.finish()),
            JCol::Date(b) => Arc::new(b.finish()),
            JCol::Time(b) => Arc::new(b.finish()),
            JCol::Ts(b, tz) => Arc::new(b.finish().with_timezone_opt(tz.clone())),
            JCol::Null(n) => Arc::new(NullArray::new(std::mem::take(n))),
            JCol::Nested(v, dt) => {
                let values = std::mem::take(v);
                let refs: Vec<&Value> = values.iter().collect();
                json_to_array(&refs, dt)?
            }
        })
    }
}

/// Decodes JSON lines (one object each) into the columns of `fields`.
pub struct JsonDecoder {
    fields: Fields,
    cols: Vec<JCol>,
    /// Which columns the current line gave.
    seen: Vec<bool>,
    rows: usize,
    /// Unescaped string text, reused.
    scratch: String,
}

impl JsonDecoder {
    /// A decoder for the columns `fields`, batches of about `cap` rows.
    pub fn new(fields: Fields, cap: usize) -> JsonDecoder {
        let cols = fields
            .iter()
            .map(|f| JCol::new(f.data_type(), cap))
            .collect();
        JsonDecoder {
            seen: vec![false; fields.len()],
            fields,
            cols,
            rows: 0,
            scratch: String::new(),
        }
    }

    /// Forgets the rows decoded since the last [`finish`](Self::finish).
    pub fn reset(&mut self) {
        if self.rows > 0 {
            for c in &mut self.cols {
                let _ = c.finish();
            }
            self.rows = 0;
        }
    }

    /// The decoded rows as columns; `Err` when the general path must read the batch.
    pub fn finish(&mut self) -> Result<Vec<ArrayRef>, GiveUp> {
        self.rows = 0;
        let mut out = Vec::with_capacity(self.cols.len());
        let mut failed = false;
        for c in &mut self.cols {
            match c.finish() {
                Ok(a) => out.push(a),
                // Keep finishing the others so that every builder is empty again.
                Err(_) => failed = true,
            }
        }
        if failed {
            Err(GiveUp)
        } else {
            Ok(out)
        }
    }

    /// Decodes one line. After `Err` the builders are inconsistent: [`reset`](Self::reset).
    pub fn decode_line(&mut self, line: &str) -> Step {
        let b = line.as_bytes();
        self.seen.iter_mut().for_each(|s| *s = false);
        let mut p = ws(b, 0);
        if b.get(p) != Some(&b'{') {
            return Err(GiveUp);
        }
        p = ws(b, p + 1);
        if b.get(p) == Some(&b'}') {
            p += 1;
        } else {
            loop {
                if b.get(p) != Some(&b'"') {
                    return Err(GiveUp);
                }
                let (kstart, kend) = plain_string(b, p)?;
                let key = &b[kstart..kend];
                p = ws(b, kend + 1);
                if b.get(p) != Some(&b':') {
                    return Err(GiveUp);
                }
                p = ws(b, p + 1);
                match self.column_of(key)? {
                    Some(k) => {
                        if self.seen[k] {
                            return Err(GiveUp);
                        }
                        self.seen[k] = true;
                        p = self.value_into(k, b, line, p)?;
                    }
                    None => p = skip_value(line, p, 1)?,
                }
                p = ws(b, p);
                match b.get(p) {
                    Some(b',') => p = ws(b, p + 1),
                    Some(b'}') => {
                        p += 1;
                        break;
                    }
                    _ => return Err(GiveUp),
                }
            }
        }
        if ws(b, p) != b.len() {
            return Err(GiveUp);
        }
        for (c, s) in self.cols.iter_mut().zip(&self.seen) {
            if !s {
                c.append_null();
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// The column a key fills; gives up on keys that match a column only ignoring case
    /// (the general path's name matching decides those).
    fn column_of(&self, key: &[u8]) -> Step<Option<usize>> {
        if let Some(k) = self.fields.iter().position(|f| f.name().as_bytes() == key) {
            return Ok(Some(k));
        }
        if self
            .fields
            .iter()
            .any(|f| f.name().as_bytes().eq_ignore_ascii_case(key))
        {
            return Err(GiveUp);
        }
        Ok(None)
    }

    /// Reads the value at `p` into column `k`; returns the position after it.
    fn value_into(&mut self, k: usize, b: &[u8], line: &str, p: usize) -> Step<usize> {
        let first = *b.get(p).ok_or(GiveUp)?;
        if first == b'n' {
            let end = literal(b, p, b"null")?;
            self.cols[k].append_null();
            return Ok(end);
        }
        let col = &mut self.cols[k];
        match col {
            JCol::Utf8(builder) => match first {
                b'"' => {
                    let end = string_into(line, p, Some(&mut self.scratch))?;
                    builder.append_value(&self.scratch);
                    Ok(end)
                }
                b't' => {
                    builder.append_value("true");
                    literal(b, p, b"true")
                }
                b'f' => {
                    builder.append_value("false");
                    literal(b, p, b"false")
                }
                b'{' | b'[' => {
                    // serde_json's text of the value, as the general path writes it.
                    let end = skip_value(line, p, 1)?;
                    let v: Value = serde_json::from_str(&line[p..end]).map_err(|_| GiveUp)?;
                    builder.append_value(v.to_string());
                    Ok(end)
                }
                _ => {
                    let (end, _) = number(b, p)?;
                    builder.append_value(&line[p..end]);
                    Ok(end)
                }
            },
            JCol::Bool(builder) => match first {
                b't' => {
                    builder.append_value(true);
                    literal(b, p, b"true")
                }
                b'f' => {
                    builder.append_value(false);
                    literal(b, p, b"false")
                }
                _ => Err(GiveUp),
            },
            JCol::I8(builder) => int_into(builder, b, line, p),
            JCol::I16(builder) => int_into(builder, b, line, p),
            JCol::I32(builder) => int_into(builder, b, line, p),
            JCol::I64(builder) => int_into(builder, b, line, p),
            JCol::F32(builder) => {
                let (end, _) = number(b, p)?;
                builder.append_value(line[p..end].parse().map_err(|_| GiveUp)?);
                Ok(end)
            }
            JCol::F64(builder) => {
                let (end, _) = number(b, p)?;
                builder.append_value(line[p..end].parse().map_err(|_| GiveUp)?);
                Ok(end)
            }
            JCol::Dec(builder, _, scale) => {
                let (text, end) = if first == b'"' {
                    let end = string_into(line, p, Some(&mut self.scratch))?;
                    (self.scratch.as_str(), end)
                } else {
                    let (end, _) = number(b, p)?;
                    (&line[p..end], end)
                };
                builder.append_value(parse_decimal(text, *scale).ok_or(GiveUp)?);
                Ok(end)
            }
            JCol::Bin(builder) => {
                if first != b'"' {
                    return Err(GiveUp);
                }
                let end = string_into(line, p, Some(&mut self.scratch))?;
                match base64::engine::general_purpose::STANDARD.decode(&self.scratch) {
                    Ok(bytes) => builder.append_value(bytes),
                    Err(_) => builder.append_value(self.scratch.as_bytes()),
                }
                Ok(end)
            }
            JCol::Date(builder) => {
                if first != b'"' {
                    return Err(GiveUp);
                }
                let end = string_into(line, p, Some(&mut self.scratch))?;
                let s = self.scratch.as_str();
                builder.append_value(parse_date(s).ok_or(GiveUp)?);
                Ok(end)
            }
            JCol::Time(builder) => {
                if first != b'"' {
                    return Err(GiveUp);
                }
                let end = string_into(line, p, Some(&mut self.scratch))?;
                builder.append_value(parse_time(&self.scratch).ok_or(GiveUp)?);
                Ok(end)
            }
            JCol::Ts(builder, _) => {
                if first != b'"' {
                    return Err(GiveUp);
                }
                let end = string_into(line, p, Some(&mut self.scratch))?;
                let s = self.scratch.as_str();
                builder.append_value(parse_timestamp(s).ok_or(GiveUp)?);
                Ok(end)
            }
            JCol::Null(n) => {
                *n += 1;
                skip_value(line, p, 1)
            }
            JCol::Nested(values, _) => {
                let end = skip_value(line, p, 1)?;
                values.push(serde_json::from_str(&line[p..end]).map_err(|_| GiveUp)?);
                Ok(end)
            }
        }
    }
}

/// An integer column's value: a JSON integer that fits (anything else, rounding or
/// saturating, is the general path's).
fn int_into<T>(builder: &mut PrimitiveBuilder<T>, b: &[u8], line: &str, p: usize) -> Step<usize>
where
    T: arrow::datatypes::ArrowPrimitiveType,
    T::Native: std::str::FromStr,
{
    let (end, integral) = number(b, p)?;
    if !integral {
        return Err(GiveUp);
    }
    builder.append_value(line[p..end].parse().map_err(|_| GiveUp)?);
    Ok(end)
}

/// The position after JSON whitespace at `p`.
fn ws(b: &[u8], mut p: usize) -> usize {
    while let Some(c) = b.get(p) {
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            p += 1;
        } else {
            break;
        }
    }
    p
}

fn literal(b: &[u8], p: usize, word: &[u8]) -> Step<usize> {
    if b[p..].starts_with(word) {
        Ok(p + word.len())
    } else {
        Err(GiveUp)
    }
}

/// A JSON number at `p` (strict grammar): its end, and whether it is an integer.
fn number(b: &[u8], mut p: usize) -> Step<(usize, bool)> {
    let digits = |b: &[u8], mut p: usize| {
        let s = p;
        while b.get(p).is_some_and(u8::is_ascii_digit) {
            p += 1;
        }
        (p, p - s)
    };
    if b.get(p) == Some(&b'-') {
        p += 1;
    }
    let (e, n) = digits(b, p);
    if n == 0 || (n > 1 && b[p] == b'0') {
        return Err(GiveUp);
    }
    p = e;
    let mut integral = true;
    if b.get(p) == Some(&b'.') {
        let (e, n) = digits(b, p + 1);
        if n == 0 {
            return Err(GiveUp);
        }
        p = e;
        integral = false;
    }
    if matches!(b.get(p), Some(b'e' | b'E')) {
        p += 1;
        if matches!(b.get(p), Some(b'+' | b'-')) {
            p += 1;
        }
        let (e, n) = digits(b, p);
        if n == 0 {
            return Err(GiveUp);
        }
        p = e;
        integral = false;
    }
    Ok((p, integral))
}

/// The content range of a string at `p` (its opening quote) without escapes.
fn plain_string(b: &[u8], p: usize) -> Step<(usize, usize)> {
    let start = p + 1;
    let mut i = start;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => return Ok((start, i)),
            b'\\' => return Err(GiveUp),
            c if c < 0x20 => return Err(GiveUp),
            _ => i += 1,
        }
    }
    Err(GiveUp)
}

/// Reads the string at `p` (its opening quote) of `line`, unescaped into `out` when given;
/// the position after it.
fn string_into(line: &str, p: usize, mut out: Option<&mut String>) -> Step<usize> {
    let b = line.as_bytes();
    if let Some(o) = out.as_deref_mut() {
        o.clear();
    }
    let mut i = p + 1;
    let mut run = i;
    loop {
        let c = *b.get(i).ok_or(GiveUp)?;
        match c {
            b'"' => {
                if let Some(o) = out.as_deref_mut() {
                    o.push_str(&line[run..i]);
                }
                return Ok(i + 1);
            }
            b'\\' => {
                if let Some(o) = out.as_deref_mut() {
                    o.push_str(&line[run..i]);
                }
                let e = *b.get(i + 1).ok_or(GiveUp)?;
                i += 2;
                let ch = match e {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        let hi = hex4(b, i)?;
                        i += 4;
                        let code = if (0xD800..0xDC00).contains(&hi) {
                            if b.get(i) != Some(&b'\\') || b.get(i + 1) != Some(&b'u') {
                                return Err(GiveUp);
                            }
                            let lo = hex4(b, i + 2)?;
                            if !(0xDC00..0xE000).contains(&lo) {
                                return Err(GiveUp);
                            }
                            i += 6;
                            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                        } else {
                            hi
                        };
                        char::from_u32(code).ok_or(GiveUp)?
                    }
                    _ => return Err(GiveUp),
                };
                if let Some(o) = out.as_deref_mut() {
                    o.push(ch);
                }
                run = i;
            }
            c if c < 0x20 => return Err(GiveUp),
            _ => i += 1,
        }
    }
}

fn hex4(b: &[u8], p: usize) -> Step<u32> {
    let h = b.get(p..p + 4).ok_or(GiveUp)?;
    let mut v = 0u32;
    for c in h {
        v = v * 16 + (*c as char).to_digit(16).ok_or(GiveUp)?;
    }
    Ok(v)
}

/// The position after the (valid) JSON value at `p`.
fn skip_value(line: &str, p: usize, depth: usize) -> Step<usize> {
    let b = line.as_bytes();
    if depth > MAX_DEPTH {
        return Err(GiveUp);
    }
    match *b.get(p).ok_or(GiveUp)? {
        b'"' => string_into(line, p, None),
        b't' => literal(b, p, b"true"),
        b'f' => literal(b, p, b"false"),
        b'n' => literal(b, p, b"null"),
        b'[' => {
            let mut q = ws(b, p + 1);
            if b.get(q) == Some(&b']') {
                return Ok(q + 1);
            }
            loop {
                q = ws(b, skip_value(line, q, depth + 1)?);
                match b.get(q) {
                    Some(b',') => q = ws(b, q + 1),
                    Some(b']') => return Ok(q + 1),
                    _ => return Err(GiveUp),
                }
            }
        }
        b'{' => {
            let mut q = ws(b, p + 1);
            if b.get(q) == Some(&b'}') {
                return Ok(q + 1);
            }
            loop {
                if b.get(q) != Some(&b'"') {
                    return Err(GiveUp);
                }
                q = ws(b, skip_value(line, q, depth + 1)?);
                if b.get(q) != Some(&b':') {
                    return Err(GiveUp);
                }
                q = ws(b, skip_value(line, ws(b, q + 1), depth + 1)?);
                match b.get(q) {
                    Some(b',') => q = ws(b, q + 1),
                    Some(b'}') => return Ok(q + 1),
                    _ => return Err(GiveUp),
                }
            }
        }
        _ => number(b, p).map(|(e, _)| e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Field;
    use ferry_api::types::parse_type;

    fn fields(spec: &[(&str, &str)]) -> Fields {
        spec.iter()
            .map(|(n, t)| Field::new(*n, parse_type(t).unwrap(), true))
            .collect()
    }

    /// What the general path makes of `lines`: serde_json values and json_to_array.
    fn general(f: &Fields, lines: &[&str]) -> Result<Vec<ArrayRef>, String> {
        let values: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&Value> = values.iter().collect();
        let a = json_to_array(&refs, &DataType::Struct(f.clone()))?;
        Ok(a.as_struct().columns().to_vec())
    }

    fn fast(f: &Fields, lines: &[&str]) -> Result<Vec<ArrayRef>, GiveUp> {
        let mut d = JsonDecoder::new(f.clone(), 4);
        for l in lines {
            if let Err(e) = d.decode_line(l) {
                d.reset();
                return Err(e);
            }
        }
        d.finish()
    }

    fn all_types() -> Fields {
        fields(&[
            ("s", "string"),
            ("b", "boolean"),
            ("i8", "tinyint"),
            ("i16", "smallint"),
            ("i", "int"),
            ("l", "bigint"),
            ("f", "float"),
            ("d", "double"),
            ("dec", "decimal(10, 2)"),
            ("bin", "bytes"),
            ("day", "date"),
            ("t", "time"),
            ("ts", "timestamp"),
            ("n", "null"),
            ("arr", "array<int>"),
            ("m", "map<string, int>"),
            ("r", "{a = int, b = string}"),
        ])
    }

    /// Lines the decoder reads itself: the same columns as the general path.
    #[test]
    fn decoded_columns_equal_the_general_path() {
        let f = all_types();
        let lines = [
            r#"{"s":"a\"b\\c\u00e9\ud83d\ude00/\n","b":true,"i8":-128,"i16":300,"i":7,"l":-9007199254740993,"f":1.5,"d":-2.5e-3,"dec":12.345,"bin":"aGk=","day":"2024-02-29","t":"12:34:56.5","ts":"2024-02-24T14:11:08.123456789","n":5,"arr":[1,2],"m":{"k":1},"r":{"a":1,"b":"x"}}"#,
            r#"  { "s" : 12.50 , "b" : false, "extra": {"deep": [1, {"x": null}]}, "dec": "7.005", "bin": "not base64!", "day": "2024-01-01", "ts": "1969-12-31 23:59:59.5", "r": [2, "y"] }  "#,
            r#"{"s":{"z":1,"a":[true,null]},"i":null,"ts":"2024-02-24T14:11","day":"2024/01/02"}"#,
            r#"{"s":true}"#,
            r#"{}"#,
        ];
        let got = fast(&f, &lines).expect("decoded");
        let want = general(&f, &lines).unwrap();
        assert_eq!(got.len(), want.len());
        for ((g, w), field) in got.iter().zip(&want).zip(f.iter()) {
            assert_eq!(g.as_ref(), w.as_ref(), "column {}", field.name());
        }
    }

    /// Lines the decoder gives up on: the general path reads or rejects them.
    #[test]
    fn gives_up_where_the_general_path_decides() {
        let f = fields(&[("id", "int"), ("b", "boolean"), ("ts", "timestamp")]);
        for line in [
            r#"{"ID":1}"#,              // matched ignoring case
            r#"{"id":1,"id":2}"#,       // duplicate key
            r#"{"id":1.0}"#,            // integral float
            r#"{"id":300000000000}"#,   // saturates
            r#"{"id":"1"}"#,            // string for a number
            r#"{"b":"TRUE"}"#,          // string for a boolean
            r#"{"ts":20240224141108}"#, // number for a timestamp
            r#"{"i\u0064":1}"#,         // escaped key
            r#"{"id":01}"#,             // invalid number
            r#"{"id":1,}"#,             // trailing comma
            r#"{"id":1} x"#,            // trailing text
            r#"[1]"#,                   // not an object
            r#"{"x":"a\u0001"}"#,       // escaped control is fine, but…
        ] {
            let r = fast(&f, &[line]);
            if line == r#"{"x":"a\u0001"}"# {
                assert!(r.is_ok(), "{line}");
                continue;
            }
            assert_eq!(r.err(), Some(GiveUp), "{line}");
        }
        assert_eq!(fast(&f, &["{\"x\":\"a\u{1}\"}"]).err(), Some(GiveUp));
        assert_eq!(
            fast(&f, &[r#"{"ts":"2024-02-30 00:00:00"}"#]).err(),
            Some(GiveUp)
        );
    }
}
