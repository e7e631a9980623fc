//! SeaTunnel's string functions (`StringFunction.java`): names, argument orders, null
//! handling and result types as SeaTunnel's, over whole Arrow arrays.

use std::fmt::Write;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanBuilder, PrimitiveBuilder, StringArray, StringBuilder};
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{ArrowPrimitiveType, DataType, Int32Type, Int64Type};
use datafusion::common::{Result as DFResult, ScalarValue};
use regex::{Regex, RegexBuilder};

use super::{fn_error, Arg, Args, SeaFn};
use crate::ret;

/// Builds a text column: `f` writes row `i` into the buffer and says whether it is non-null.
pub(crate) fn str_out(
    rows: usize,
    mut f: impl FnMut(usize, &mut String) -> DFResult<bool>,
) -> DFResult<ArrayRef> {
    let mut b = StringBuilder::with_capacity(rows, rows * 8);
    let mut buf = String::new();
    for i in 0..rows {
        buf.clear();
        if f(i, &mut buf)? {
            b.append_value(&buf);
        } else {
            b.append_null();
        }
    }
    Ok(Arc::new(b.finish()))
}

/// Builds a primitive column from `f(i)`.
pub(crate) fn prim_out<T: ArrowPrimitiveType>(
    rows: usize,
    mut f: impl FnMut(usize) -> DFResult<Option<T::Native>>,
) -> DFResult<ArrayRef> {
    let mut b = PrimitiveBuilder::<T>::with_capacity(rows);
    for i in 0..rows {
        b.append_option(f(i)?);
    }
    Ok(Arc::new(b.finish()))
}

/// Builds a boolean column from `f(i)`.
pub(crate) fn bool_out(
    rows: usize,
    mut f: impl FnMut(usize) -> DFResult<Option<bool>>,
) -> DFResult<ArrayRef> {
    let mut b = BooleanBuilder::with_capacity(rows);
    for i in 0..rows {
        b.append_option(f(i)?);
    }
    Ok(Arc::new(b.finish()))
}

/// Applies a text → text function to argument 0, null in null out.
fn unary_str(a: &Args, f: impl Fn(&str, &mut String)) -> DFResult<ArrayRef> {
    let s = a.str(0)?;
    str_out(a.rows, |i, buf| {
        Ok(match s.get(i) {
            Some(v) => {
                f(v, buf);
                true
            }
            None => false,
        })
    })
}

const S: Arg = Arg::Str;
const I: Arg = Arg::Int;

pub(super) fn functions() -> Vec<SeaFn> {
    vec![
        SeaFn::new("ascii", &[S], 1, ret!(DataType::Int32), ascii),
        SeaFn::new("bit_length", &[S], 1, ret!(DataType::Int64), bit_length),
        SeaFn::new("char_length", &[S], 1, ret!(DataType::Int64), char_length)
            .alias(&["length", "character_length"]),
        SeaFn::new("octet_length", &[S], 1, ret!(DataType::Int64), octet_length),
        SeaFn::new("char", &[I], 1, ret!(DataType::Utf8), chr).alias(&["chr"]),
        SeaFn::new("concat", &[S], 1, ret!(DataType::Utf8), concat).variadic(),
        SeaFn::new("concat_ws", &[S, S], 2, ret!(DataType::Utf8), concat_ws).variadic(),
        SeaFn::new("hextoraw", &[S], 1, ret!(DataType::Utf8), hextoraw),
        SeaFn::new(
            "rawtohex",
            &[Arg::StrOrBytes],
            1,
            ret!(DataType::Utf8),
            rawtohex,
        ),
        SeaFn::new("insert", &[S, I, I, S], 4, ret!(DataType::Utf8), insert),
        SeaFn::new("lower", &[S], 1, ret!(DataType::Utf8), lower).alias(&["lcase"]),
        SeaFn::new("upper", &[S], 1, ret!(DataType::Utf8), upper).alias(&["ucase"]),
        SeaFn::new("left", &[S, I], 2, ret!(DataType::Utf8), left),
        SeaFn::new("right", &[S, I], 2, ret!(DataType::Utf8), right),
        SeaFn::new("locate", &[S, S, I], 2, ret!(DataType::Int32), locate),
        SeaFn::new("position", &[S, S], 2, ret!(DataType::Int32), locate),
        SeaFn::new("instr", &[S, S, I], 2, ret!(DataType::Int32), instr),
        SeaFn::new("lpad", &[S, I, S], 2, ret!(DataType::Utf8), lpad),
        SeaFn::new("rpad", &[S, I, S], 2, ret!(DataType::Utf8), rpad),
        SeaFn::new("ltrim", &[S, S], 1, ret!(DataType::Utf8), ltrim),
        SeaFn::new("rtrim", &[S, S], 1, ret!(DataType::Utf8), rtrim),
        // `TRIM(x, c)` and `TRIM(BOTH c FROM x)` reach the planner as `btrim`.
        SeaFn::new("trim", &[S, S], 1, ret!(DataType::Utf8), trim).alias(&["btrim"]),
        SeaFn::new(
            "regexp_replace",
            &[S, S, S, S],
            3,
            ret!(DataType::Utf8),
            regexp_replace,
        ),
        SeaFn::new(
            "regexp_like",
            &[S, S, S],
            2,
            ret!(DataType::Boolean),
            regexp_like,
        ),
        SeaFn::new(
            "regexp_substr",
            &[S, S, I, I, S, I],
            2,
            ret!(DataType::Utf8),
            regexp_substr,
        ),
        SeaFn::new("repeat", &[S, I], 2, ret!(DataType::Utf8), repeat),
        SeaFn::new("replace", &[S, S, S], 2, ret!(DataType::Utf8), replace),
        SeaFn::new("soundex", &[S], 1, ret!(DataType::Utf8), soundex),
        SeaFn::new("space", &[I], 1, ret!(DataType::Utf8), space),
        SeaFn::new("substring", &[S, I, I], 2, ret!(DataType::Utf8), substring).alias(&["substr"]),
        SeaFn::new("to_char", &[Arg::Any, S], 1, ret!(DataType::Utf8), to_char),
        SeaFn::new("translate", &[S, S, S], 3, ret!(DataType::Utf8), translate),
    ]
}

fn ascii(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let s = a.str(0)?;
    prim_out::<Int32Type>(a.rows, |i| {
        Ok(s.get(i)
            .and_then(|v| v.encode_utf16().next())
            .map(|c| c as i32))
    })
}

fn bit_length(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let s = a.str(0)?;
    prim_out::<Int64Type>(a.rows, |i| Ok(s.get(i).map(|v| v.len() as i64 * 8)))
}

/// Java counts UTF-16 units; for text without astral characters that is the char count.
fn java_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.encode_utf16().count()
    }
}

fn char_length(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let s = a.str(0)?;
    prim_out::<Int64Type>(a.rows, |i| Ok(s.get(i).map(|v| java_len(v) as i64)))
}

fn octet_length(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let s = a.str(0)?;
    prim_out::<Int64Type>(a.rows, |i| Ok(s.get(i).map(|v| v.len() as i64)))
}

fn chr(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let n = a.prim::<Int64Type>(0)?;
    str_out(a.rows, |i, buf| {
        Ok(
            match n.get(i).and_then(|c| char::from_u32((c as u32) & 0xffff)) {
                Some(c) => {
                    buf.push(c);
                    true
                }
                None => false,
            },
        )
    })
}

/// One argument of CONCAT, read without dispatch per row.
enum Piece<'a> {
    /// A constant (a null constant adds nothing): its bytes followed by 16 bytes of
    /// padding, and its length.
    Const(Vec<u8>, usize),
    /// A column: its offsets, its bytes and its nulls.
    Col(&'a [i32], &'a [u8], Option<&'a NullBuffer>),
}

fn concat(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let mut pieces = Vec::with_capacity(a.len());
    let mut bytes = 0;
    for k in 0..a.len() {
        let c = a.str(k)?;
        if c.scalar {
            let v = c.get(0).unwrap_or("").as_bytes();
            bytes += v.len() * a.rows;
            let mut padded = v.to_vec();
            padded.resize(v.len() + 16, 0);
            pieces.push(Piece::Const(padded, v.len()));
        } else {
            let o = c.arr.value_offsets();
            bytes += (o.last().copied().unwrap_or(0) - o.first().copied().unwrap_or(0)) as usize;
            pieces.push(Piece::Col(o, c.arr.value_data(), c.arr.nulls()));
        }
    }
    // Values and offsets are written straight into buffers sized for the whole result
    // (plus slack, so that short pieces are copied as one fixed 16-byte move instead of a
    // memcpy call each). Nulls are skipped, so the result is never null (SeaTunnel's
    // CONCAT and `||`).
    let mut values = vec![0u8; bytes + 16];
    let mut pos = 0;
    let mut offsets: Vec<i32> = Vec::with_capacity(a.rows + 1);
    offsets.push(0);
    let too_long = || fn_error("concat", "the result is longer than 2 GiB");
    for i in 0..a.rows {
        for p in &pieces {
            let (src, start, end) = match p {
                Piece::Const(v, len) => (v.as_slice(), 0, *len),
                Piece::Col(o, d, nulls) => {
                    if nulls.is_some_and(|n| n.is_null(i)) {
                        continue;
                    }
                    (*d, o[i] as usize, o[i + 1] as usize)
                }
            };
            let len = end - start;
            if len <= 16 && start + 16 <= src.len() {
                values[pos..pos + 16].copy_from_slice(&src[start..start + 16]);
            } else {
                values[pos..pos + len].copy_from_slice(&src[start..end]);
            }
            pos += len;
        }
        offsets.push(i32::try_from(pos).map_err(|_| too_long())?);
    }
    values.truncate(pos);
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    // SAFETY: every value is whole values of string arrays (valid UTF-8) one after the
    // other, so it is valid UTF-8; the offsets grow from 0 to `values.len()`. Checking
    // that again (`try_new`) cost as much as a third of the copying.
    Ok(Arc::new(unsafe {
        StringArray::new_unchecked(offsets, Buffer::from_vec(values), None)
    }))
}

fn concat_ws(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let sep = a.str(0)?;
    let cols = (1..a.len())
        .map(|k| a.str(k))
        .collect::<DFResult<Vec<_>>>()?;
    str_out(a.rows, |i, buf| {
        let sep = sep.get(i);
        let mut first = true;
        for c in &cols {
            if let Some(v) = c.get(i) {
                if let Some(s) = sep {
                    if !first {
                        buf.push_str(s);
                    }
                    first = false;
                }
                buf.push_str(v);
            }
        }
        Ok(true)
    })
}

fn hextoraw(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let s = a.str(0)?;
    let mut units = Vec::new();
    str_out(a.rows, |i, buf| {
        let Some(v) = s.get(i) else { return Ok(false) };
        if v.len() % 4 != 0 || !v.is_ascii() {
            return Err(fn_error(
                "hextoraw",
                format!("'{v}' is not a sequence of 4-digit hex numbers"),
            ));
        }
        units.clear();
        for k in (0..v.len()).step_by(4) {
            let u = u16::from_str_radix(&v[k..k + 4], 16)
                .map_err(|_| fn_error("hextoraw", format!("'{v}' is not hexadecimal")))?;
            units.push(u);
        }
        buf.push_str(&String::from_utf16_lossy(&units));
        Ok(true)
    })
}

fn rawtohex(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    if a.data_type(0) == &DataType::Binary {
        let b = a.bytes(0)?;
        return str_out(a.rows, |i, buf| {
            let Some(v) = b.get(i) else { return Ok(false) };
            for byte in v {
                buf.push(HEX[(byte >> 4) as usize] as char);
                buf.push(HEX[(byte & 0xf) as usize] as char);
            }
            Ok(true)
        });
    }
    let s = a.str(0)?;
    str_out(a.rows, |i, buf| {
        let Some(v) = s.get(i) else { return Ok(false) };
        for u in v.encode_utf16() {
            let _ = write!(buf, "{u:04x}");
        }
        Ok(true)
    })
}

/// Java's `substring` on char indexes (`from..to`, both clamped).
fn char_slice(s: &str, from: usize, to: usize) -> &str {
    if s.is_ascii() {
        let to = to.min(s.len());
        return &s[from.min(to)..to];
    }
    let start = s
        .char_indices()
        .nth(from)
        .map(|(b, _)| b)
        .unwrap_or(s.len());
    let end = s.char_indices().nth(to).map(|(b, _)| b).unwrap_or(s.len());
    &s[start..end.max(start)]
}

fn char_count(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

fn insert(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s1, st, ln, s2) = (
        a.str(0)?,
        a.prim::<Int64Type>(1)?,
        a.prim::<Int64Type>(2)?,
        a.str(3)?,
    );
    str_out(a.rows, |i, buf| {
        let (v1, v2) = (s1.get(i), s2.get(i));
        let (v1, v2) = match (v1, v2) {
            (None, None) => return Ok(false),
            (None, Some(v)) | (Some(v), None) => {
                buf.push_str(v);
                return Ok(true);
            }
            (Some(x), Some(y)) => (x, y),
        };
        let (Some(start), Some(length)) = (st.get(i), ln.get(i)) else {
            return Ok(false);
        };
        let len1 = char_count(v1) as i64;
        let start = start - 1;
        if start < 0 || length <= 0 || v2.is_empty() || start > len1 {
            buf.push_str(v1);
            return Ok(true);
        }
        let length = length.min(len1 - start);
        buf.push_str(char_slice(v1, 0, start as usize));
        buf.push_str(v2);
        buf.push_str(char_slice(v1, (start + length) as usize, len1 as usize));
        Ok(true)
    })
}

fn lower(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    change_case(a, false)
}

fn upper(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    change_case(a, true)
}

/// UPPER / LOWER as Java's `toUpperCase` / `toLowerCase`. ASCII text (the common case) is
/// converted byte by byte over the whole values buffer at once, keeping the offsets and
/// nulls; other text goes value by value through Unicode's case mapping.
fn change_case(a: &Args, up: bool) -> DFResult<ArrayRef> {
    let s = a.str(0)?;
    if !s.scalar && s.arr.is_ascii() {
        let arr = s.arr;
        let offsets = arr.offsets();
        let (start, end) = (
            offsets.first().copied().unwrap_or(0),
            offsets.last().copied().unwrap_or(0),
        );
        let bytes = &arr.value_data()[start as usize..end as usize];
        let converted: Vec<u8> = if up {
            bytes.iter().map(u8::to_ascii_uppercase).collect()
        } else {
            bytes.iter().map(u8::to_ascii_lowercase).collect()
        };
        let offsets = if start == 0 {
            offsets.clone()
        } else {
            OffsetBuffer::new(offsets.iter().map(|o| o - start).collect())
        };
        // SAFETY: ASCII bytes mapped to ASCII bytes, one for one, under the input's own
        // (valid) offsets and nulls: the result is valid for the same reasons it was.
        return Ok(Arc::new(unsafe {
            StringArray::new_unchecked(offsets, Buffer::from_vec(converted), arr.nulls().cloned())
        }));
    }
    unary_str(a, |v, buf| match (v.is_ascii(), up) {
        (true, true) => buf.extend(v.bytes().map(|b| b.to_ascii_uppercase() as char)),
        (true, false) => buf.extend(v.bytes().map(|b| b.to_ascii_lowercase() as char)),
        (false, true) => buf.push_str(&v.to_uppercase()),
        (false, false) => buf.push_str(&v.to_lowercase()),
    })
}

fn left(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, n) = (a.str(0)?, a.prim::<Int64Type>(1)?);
    str_out(a.rows, |i, buf| {
        let (Some(v), Some(n)) = (s.get(i), n.get(i)) else {
            return Ok(false);
        };
        buf.push_str(char_slice(v, 0, n.max(0) as usize));
        Ok(true)
    })
}

fn right(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, n) = (a.str(0)?, a.prim::<Int64Type>(1)?);
    str_out(a.rows, |i, buf| {
        let (Some(v), Some(n)) = (s.get(i), n.get(i)) else {
            return Ok(false);
        };
        let len = char_count(v);
        let n = (n.max(0) as usize).min(len);
        buf.push_str(char_slice(v, len - n, len));
        Ok(true)
    })
}

/// 1-based char position of `search` in `s` from char `start` (1-based; negative counts
/// from the end and searches backwards), 0 when absent — Java's indexOf/lastIndexOf + 1.
fn find_pos(s: &str, search: &str, start: i64) -> i32 {
    if s.is_ascii() && search.is_ascii() {
        return find_in(s.as_bytes(), search.as_bytes(), start);
    }
    let chars: Vec<char> = s.chars().collect();
    let pat: Vec<char> = search.chars().collect();
    find_in(&chars, &pat, start)
}

fn find_in<T: PartialEq>(chars: &[T], pat: &[T], start: i64) -> i32 {
    let matches_at = |k: usize| k + pat.len() <= chars.len() && chars[k..k + pat.len()] == pat[..];
    if start < 0 {
        let from = chars.len() as i64 + start;
        if from < 0 {
            return 0;
        }
        let from = (from as usize).min(chars.len());
        (0..=from)
            .rev()
            .find(|k| matches_at(*k))
            .map(|k| k as i32 + 1)
            .unwrap_or(0)
    } else {
        let from = if start == 0 { 0 } else { start as usize - 1 };
        if pat.is_empty() {
            // Java's indexOf("", from) is `from`, at most the length.
            return from.min(chars.len()) as i32 + 1;
        }
        (from..=chars.len())
            .find(|k| matches_at(*k))
            .map(|k| k as i32 + 1)
            .unwrap_or(0)
    }
}

fn locate(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (search, s) = (a.str(0)?, a.str(1)?);
    prim_out::<Int32Type>(a.rows, |i| {
        let Some(v) = s.get(i) else {
            return Ok(Some(0));
        };
        let Some(p) = search.get(i) else {
            return Ok(None);
        };
        let start = a.opt_i64(2, i)?.unwrap_or(1);
        Ok(Some(find_pos(v, p, start)))
    })
}

fn instr(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, search) = (a.str(0)?, a.str(1)?);
    prim_out::<Int32Type>(a.rows, |i| {
        let Some(v) = s.get(i) else {
            return Ok(Some(0));
        };
        let Some(p) = search.get(i) else {
            return Ok(None);
        };
        let start = a.opt_i64(2, i)?.unwrap_or(1);
        Ok(Some(find_pos(v, p, start)))
    })
}

fn pad(a: &Args, right: bool) -> DFResult<ArrayRef> {
    let (s, n) = (a.str(0)?, a.prim::<Int64Type>(1)?);
    let padding = if a.len() > 2 { Some(a.str(2)?) } else { None };
    str_out(a.rows, |i, buf| {
        let (Some(v), Some(n)) = (s.get(i), n.get(i)) else {
            return Ok(false);
        };
        let n = n.max(0) as usize;
        let len = char_count(v);
        if n <= len {
            buf.push_str(char_slice(v, 0, n));
            return Ok(true);
        }
        let c = padding
            .as_ref()
            .and_then(|p| p.get(i))
            .and_then(|p| p.chars().next())
            .unwrap_or(' ');
        if right {
            buf.push_str(v);
        }
        buf.extend(std::iter::repeat_n(c, n - len));
        if !right {
            buf.push_str(v);
        }
        Ok(true)
    })
}

fn lpad(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    pad(a, false)
}

fn rpad(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    pad(a, true)
}

fn trim_impl(a: &Args, leading: bool, trailing: bool) -> DFResult<ArrayRef> {
    let s = a.str(0)?;
    let sp = if a.len() > 1 { Some(a.str(1)?) } else { None };
    str_out(a.rows, |i, buf| {
        let Some(v) = s.get(i) else { return Ok(false) };
        // Only the first character of the trim text counts, as in SeaTunnel.
        let c = sp
            .as_ref()
            .and_then(|p| p.get(i))
            .and_then(|p| p.chars().next())
            .unwrap_or(' ');
        let mut r = v;
        if leading {
            r = r.trim_start_matches(c);
        }
        if trailing {
            r = r.trim_end_matches(c);
        }
        buf.push_str(r);
        Ok(true)
    })
}

fn ltrim(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    trim_impl(a, true, false)
}

fn rtrim(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    trim_impl(a, false, true)
}

fn trim(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    trim_impl(a, true, true)
}

/// Compiles a Java regex with SeaTunnel's mode letters (`i`, `c`, `n`, `m`).
pub(crate) fn java_regex(fname: &str, pattern: &str, mode: Option<&str>) -> DFResult<Regex> {
    let mut b = RegexBuilder::new(pattern);
    for c in mode.unwrap_or("").chars() {
        match c {
            'i' => b.case_insensitive(true),
            'c' => b.case_insensitive(false),
            'n' => b.dot_matches_new_line(true),
            'm' => b.multi_line(true),
            other => {
                return Err(fn_error(
                    fname,
                    format!("unsupported regexp mode '{other}' (valid: i, c, n, m)"),
                ))
            }
        };
    }
    b.build().map_err(|e| {
        fn_error(
            fname,
            format!("invalid regular expression '{pattern}': {e}"),
        )
    })
}

/// Compiles regexes once per distinct (pattern, mode), so constant patterns compile once
/// per batch.
struct RegexCache {
    fname: &'static str,
    key: Option<(String, Option<String>)>,
    re: Option<Regex>,
}

impl RegexCache {
    fn new(fname: &'static str) -> Self {
        RegexCache {
            fname,
            key: None,
            re: None,
        }
    }
    fn get(&mut self, pattern: &str, mode: Option<&str>) -> DFResult<&Regex> {
        let same = matches!(&self.key, Some((p, m)) if p == pattern && m.as_deref() == mode);
        if !same || self.re.is_none() {
            self.re = Some(java_regex(self.fname, pattern, mode)?);
            self.key = Some((pattern.to_string(), mode.map(str::to_string)));
        }
        self.re
            .as_ref()
            .ok_or_else(|| fn_error(self.fname, "regex cache is empty"))
    }
}

fn regexp_replace(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, p, r) = (a.str(0)?, a.str(1)?, a.str(2)?);
    let mode = if a.len() > 3 { Some(a.str(3)?) } else { None };
    let mut cache = RegexCache::new("regexp_replace");
    // The translated replacement, for the replacement text and group count it was made for.
    let mut repl_key: Option<(String, usize)> = None;
    let mut repl = String::new();
    str_out(a.rows, |i, buf| {
        let Some(v) = s.get(i) else { return Ok(false) };
        let (Some(pat), Some(rep)) = (p.get(i), r.get(i)) else {
            return Ok(false);
        };
        let re = cache.get(pat, mode.as_ref().and_then(|m| m.get(i)))?;
        let groups = re.captures_len() - 1;
        if !matches!(&repl_key, Some((r, g)) if r == rep && *g == groups) {
            // Java's Matcher.replaceAll syntax; a bad reference fails as Java's does.
            repl = ferry_api::javatext::regex_replacement(rep, groups)
                .map_err(|e| fn_error("regexp_replace", format!("{e}, in replacement '{rep}'")))?;
            repl_key = Some((rep.to_string(), groups));
        }
        buf.push_str(&re.replace_all(v, repl.as_str()));
        Ok(true)
    })
}

fn regexp_like(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, p) = (a.str(0)?, a.str(1)?);
    let mode = if a.len() > 2 { Some(a.str(2)?) } else { None };
    let mut cache = RegexCache::new("regexp_like");
    bool_out(a.rows, |i| {
        let Some(v) = s.get(i) else { return Ok(None) };
        let Some(pat) = p.get(i) else { return Ok(None) };
        // Java's Matcher.find(): a match anywhere.
        Ok(Some(
            cache
                .get(pat, mode.as_ref().and_then(|m| m.get(i)))?
                .is_match(v),
        ))
    })
}

fn regexp_substr(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, p) = (a.str(0)?, a.str(1)?);
    // SeaTunnel reads either 2 arguments or all 6; with 3 to 5 it returns null.
    if a.len() > 2 && a.len() < 6 {
        return str_out(a.rows, |_, _| Ok(false));
    }
    let mode = if a.len() > 4 { Some(a.str(4)?) } else { None };
    let mut cache = RegexCache::new("regexp_substr");
    str_out(a.rows, |i, buf| {
        let Some(v) = s.get(i) else { return Ok(false) };
        let Some(pat) = p.get(i) else {
            return Ok(false);
        };
        let position = (a.opt_i64(2, i)?.unwrap_or(1) - 1).max(0) as usize;
        let occurrence = a.opt_i64(3, i)?.unwrap_or(1);
        let group = a.opt_i64(5, i)?.unwrap_or(0).max(0) as usize;
        let re = cache.get(pat, mode.as_ref().and_then(|m| m.get(i)))?;
        // Java's Matcher.find(position): the search starts there but `^` and look-behind
        // still see the whole text; a position past the end finds nothing.
        let Some(mut at) = v
            .char_indices()
            .map(|(b, _)| b)
            .chain(std::iter::once(v.len()))
            .nth(position)
        else {
            return Ok(false);
        };
        let mut found = None;
        let mut n = 0;
        while at <= v.len() {
            let Some(caps) = re.captures_at(v, at) else {
                break;
            };
            n += 1;
            let (start, end) = caps
                .get(0)
                .map(|m| (m.start(), m.end()))
                .unwrap_or((at, at));
            if n >= occurrence {
                found = Some(caps);
                break;
            }
            at = if end > start {
                end
            } else {
                // After an empty match the next search starts one character later.
                end + v[end..].chars().next().map_or(1, char::len_utf8)
            };
        }
        match found.and_then(|c| c.get(group).map(|m| m.as_str().to_string())) {
            Some(m) => {
                buf.push_str(&m);
                Ok(true)
            }
            None => Ok(false),
        }
    })
}

fn repeat(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, n) = (a.str(0)?, a.prim::<Int64Type>(1)?);
    str_out(a.rows, |i, buf| {
        let (Some(v), Some(n)) = (s.get(i), n.get(i)) else {
            return Ok(false);
        };
        for _ in 0..n.max(0) {
            buf.push_str(v);
        }
        Ok(true)
    })
}

fn replace(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, before) = (a.str(0)?, a.str(1)?);
    let after = if a.len() > 2 { Some(a.str(2)?) } else { None };
    str_out(a.rows, |i, buf| {
        let Some(v) = s.get(i) else { return Ok(false) };
        let Some(b) = before.get(i) else {
            return Ok(false);
        };
        let af = after.as_ref().and_then(|x| x.get(i)).unwrap_or("");
        if b.is_empty() {
            buf.push_str(v);
        } else {
            buf.push_str(&v.replace(b, af));
        }
        Ok(true)
    })
}

const SOUNDEX_INDEX: &[u8] =
    b"71237128722455712623718272\x00\x00\x00\x00\x00\x0071237128722455712623718272";

fn soundex(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    unary_str(a, |v, buf| {
        let mut chars = [b'0'; 4];
        let mut last = b'0';
        let mut j = 0;
        for c in v.encode_utf16() {
            if j >= 4 {
                break;
            }
            if (u16::from(b'A')..=u16::from(b'z')).contains(&c) {
                let d = SOUNDEX_INDEX[(c - u16::from(b'A')) as usize];
                if d != 0 {
                    if j == 0 {
                        chars[0] = (c as u8) & 0xdf;
                        j = 1;
                        last = d;
                    } else if d <= b'6' {
                        if d != last {
                            chars[j] = d;
                            j += 1;
                            last = d;
                        }
                    } else if d == b'7' {
                        last = d;
                    }
                }
            }
        }
        buf.extend(chars.iter().map(|b| *b as char));
    })
}

fn space(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let n = a.prim::<Int64Type>(0)?;
    str_out(a.rows, |i, buf| {
        let Some(n) = n.get(i) else { return Ok(false) };
        buf.extend(std::iter::repeat_n(' ', n.max(0) as usize));
        Ok(true)
    })
}

fn substring(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, st) = (a.str(0)?, a.prim::<Int64Type>(1)?);
    let ln = if a.len() > 2 {
        Some(a.prim::<Int64Type>(2)?)
    } else {
        None
    };
    str_out(a.rows, |i, buf| {
        let (Some(v), Some(mut start)) = (s.get(i), st.get(i)) else {
            return Ok(false);
        };
        let sl = char_count(v) as i64;
        if start == 0 {
            start = 1;
        } else if start < 0 {
            start += sl + 1;
        }
        let end = match ln.as_ref().and_then(|l| l.get(i)) {
            None => (sl + 1).max(start),
            Some(l) => start + l,
        };
        let start = start.max(1);
        let end = end.min(sl + 1);
        // H2/SeaTunnel give null, not an empty string, for an empty range.
        if start > sl || end <= start {
            return Ok(false);
        }
        buf.push_str(char_slice(v, (start - 1) as usize, (end - 1) as usize));
        Ok(true)
    })
}

fn to_char(a: &Args, ret: &DataType) -> DFResult<ArrayRef> {
    let t = a.data_type(0);
    if matches!(
        t,
        DataType::Date32 | DataType::Timestamp(_, _) | DataType::Time64(_)
    ) && a.len() > 1
    {
        return super::datetime::format_kernel("to_char", a, ret);
    }
    // Text of the value, as Java's toString.
    let text = super::javatext::java_text(a.array(0))?;
    let rows = a.rows;
    if a.is_scalar(0) && rows != 1 {
        return ScalarValue::try_from_array(&text, 0)?.to_array_of_size(rows);
    }
    Ok(text)
}

fn translate(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let (s, find, repl) = (a.str(0)?, a.str(1)?, a.str(2)?);
    str_out(a.rows, |i, buf| {
        let Some(v) = s.get(i) else { return Ok(false) };
        let Some(f) = find.get(i) else {
            buf.push_str(v);
            return Ok(true);
        };
        let r: Vec<char> = repl.get(i).map(|r| r.chars().collect()).unwrap_or_default();
        for c in v.chars() {
            match f.chars().position(|x| x == c) {
                Some(k) if k < r.len() => buf.push(r[k]),
                // SeaTunnel keeps a character that has no replacement.
                _ => buf.push(c),
            }
        }
        Ok(true)
    })
}
