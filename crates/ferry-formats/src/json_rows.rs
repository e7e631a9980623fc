//! Rows of a batch written as JSON objects straight from their columns.
//!
//! The text is byte for byte what the general path writes (each value through
//! [`array_value_to_json`] into a `serde_json` object, printed compactly), without a map and
//! a value a row: the broker sinks write one message a row, and building a `serde_json`
//! object for each one was most of their time. Plain columns (booleans, integers, floats,
//! strings) are written here; any other column takes the general path value by value.

use std::io::Write;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{self as t, DataType};
use ferry_api::value::{array_value_to_json, RowStyle};

/// One column, as the writer reads it.
enum Col<'a> {
    Bool(&'a arrow::array::BooleanArray),
    I8(&'a arrow::array::Int8Array),
    I16(&'a arrow::array::Int16Array),
    I32(&'a arrow::array::Int32Array),
    I64(&'a arrow::array::Int64Array),
    U8(&'a arrow::array::UInt8Array),
    U16(&'a arrow::array::UInt16Array),
    U32(&'a arrow::array::UInt32Array),
    U64(&'a arrow::array::UInt64Array),
    F32(&'a arrow::array::Float32Array),
    F64(&'a arrow::array::Float64Array),
    Str(&'a arrow::array::StringArray),
    LargeStr(&'a arrow::array::LargeStringArray),
    /// Anything else: [`array_value_to_json`], then serde_json.
    Other(&'a dyn Array),
}

/// Writes rows of one batch as JSON objects, columns in schema order.
pub struct JsonRowWriter<'a> {
    /// Each column's `"name":` (with the `,` before it from the second on), and the column.
    cols: Vec<(Vec<u8>, Col<'a>)>,
}

impl<'a> JsonRowWriter<'a> {
    /// A writer for `batch`'s rows; `None` when two columns share a name (a JSON object
    /// keeps one of them: the general path decides which).
    pub fn new(batch: &'a RecordBatch) -> Option<Self> {
        let schema = batch.schema_ref();
        let mut cols = Vec::with_capacity(batch.num_columns());
        for (n, (f, a)) in schema.fields().iter().zip(batch.columns()).enumerate() {
            if schema.fields()[..n].iter().any(|g| g.name() == f.name()) {
                return None;
            }
            let mut key = Vec::with_capacity(f.name().len() + 4);
            if n > 0 {
                key.push(b',');
            }
            serde_json::to_writer(&mut key, f.name().as_str()).ok()?;
            key.push(b':');
            let a = a.as_ref();
            let col = match a.data_type() {
                DataType::Boolean => Col::Bool(a.as_boolean()),
                DataType::Int8 => Col::I8(a.as_primitive::<t::Int8Type>()),
                DataType::Int16 => Col::I16(a.as_primitive::<t::Int16Type>()),
                DataType::Int32 => Col::I32(a.as_primitive::<t::Int32Type>()),
                DataType::Int64 => Col::I64(a.as_primitive::<t::Int64Type>()),
                DataType::UInt8 => Col::U8(a.as_primitive::<t::UInt8Type>()),
                DataType::UInt16 => Col::U16(a.as_primitive::<t::UInt16Type>()),
                DataType::UInt32 => Col::U32(a.as_primitive::<t::UInt32Type>()),
                DataType::UInt64 => Col::U64(a.as_primitive::<t::UInt64Type>()),
                DataType::Float32 => Col::F32(a.as_primitive::<t::Float32Type>()),
                DataType::Float64 => Col::F64(a.as_primitive::<t::Float64Type>()),
                DataType::Utf8 => Col::Str(a.as_string::<i32>()),
                DataType::LargeUtf8 => Col::LargeStr(a.as_string::<i64>()),
                _ => Col::Other(a),
            };
            cols.push((key, col));
        }
        Some(JsonRowWriter { cols })
    }

    /// Appends row `i` as a JSON object to `out`.
    pub fn write(&self, i: usize, out: &mut Vec<u8>) {
        out.push(b'{');
        for (key, col) in &self.cols {
            out.extend_from_slice(key);
            write_value(col, i, out);
        }
        out.push(b'}');
    }
}

fn write_value(col: &Col, i: usize, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail: the results below are Ok.
    macro_rules! int {
        ($a:expr) => {{
            if $a.is_null(i) {
                out.extend_from_slice(b"null");
            } else {
                let _ = serde_json::to_writer(&mut *out, &$a.value(i));
            }
        }};
    }
    // Floats as Rust prints them (the shortest text that reads back the same), and the
    // values JSON has no number for (NaN, infinities) as strings, as the general path does.
    macro_rules! float {
        ($a:expr) => {{
            if $a.is_null(i) {
                out.extend_from_slice(b"null");
            } else {
                let v = $a.value(i);
                if v.is_finite() {
                    let _ = write!(out, "{v}");
                } else {
                    let _ = write!(out, "\"{v}\"");
                }
            }
        }};
    }
    macro_rules! string {
        ($a:expr) => {{
            if $a.is_null(i) {
                out.extend_from_slice(b"null");
            } else {
                let _ = serde_json::to_writer(&mut *out, $a.value(i));
            }
        }};
    }
    match col {
        Col::Bool(a) => {
            if a.is_null(i) {
                out.extend_from_slice(b"null");
            } else if a.value(i) {
                out.extend_from_slice(b"true");
            } else {
                out.extend_from_slice(b"false");
            }
        }
        Col::I8(a) => int!(a),
        Col::I16(a) => int!(a),
        Col::I32(a) => int!(a),
        Col::I64(a) => int!(a),
        Col::U8(a) => int!(a),
        Col::U16(a) => int!(a),
        Col::U32(a) => int!(a),
        Col::U64(a) => int!(a),
        Col::F32(a) => float!(a),
        Col::F64(a) => float!(a),
        Col::Str(a) => string!(a),
        Col::LargeStr(a) => string!(a),
        Col::Other(a) => {
            let _ = serde_json::to_writer(&mut *out, &array_value_to_json(*a, i, RowStyle::Named));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::*;
    use arrow::datatypes::{Field, Schema};
    use serde_json::Value;

    use super::*;

    /// The general path: a `serde_json` object a row.
    fn general(batch: &RecordBatch, i: usize) -> String {
        Value::Object(crate::row_object(batch, i)).to_string()
    }

    #[test]
    fn rows_are_written_as_the_general_path_writes_them() {
        let cols: Vec<(&str, ArrayRef)> = vec![
            (
                "b",
                Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
            ),
            (
                "i8",
                Arc::new(Int8Array::from(vec![Some(-128), None, Some(7)])),
            ),
            (
                "i16",
                Arc::new(Int16Array::from(vec![Some(300), Some(-1), None])),
            ),
            ("i32", Arc::new(Int32Array::from(vec![i32::MIN, 0, 42]))),
            (
                "i64",
                Arc::new(Int64Array::from(vec![i64::MAX, -9007199254740993, 1])),
            ),
            ("u8", Arc::new(UInt8Array::from(vec![255, 0, 1]))),
            ("u16", Arc::new(UInt16Array::from(vec![65535, 0, 1]))),
            ("u32", Arc::new(UInt32Array::from(vec![u32::MAX, 0, 1]))),
            ("u64", Arc::new(UInt64Array::from(vec![u64::MAX, 0, 1]))),
            (
                "f32",
                Arc::new(Float32Array::from(vec![Some(1.1), Some(f32::NAN), None])),
            ),
            (
                "f64",
                Arc::new(Float64Array::from(vec![
                    1e-7,
                    f64::NEG_INFINITY,
                    123456789012345680000.0,
                ])),
            ),
            (
                "s",
                Arc::new(StringArray::from(vec![
                    Some("a\"b\\c\u{1}\n é 😀 </script>"),
                    None,
                    Some(""),
                ])),
            ),
            (
                "ls",
                Arc::new(LargeStringArray::from(vec!["x", "y\t", "z"])),
            ),
            (
                "d",
                Arc::new(
                    Decimal128Array::from(vec![Some(12345), None, Some(-5)])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ),
            (
                "day",
                Arc::new(Date32Array::from(vec![Some(19782), None, Some(0)])),
            ),
            (
                "bin",
                Arc::new(BinaryArray::from(vec![Some(&b"hi"[..]), None, Some(b"")])),
            ),
            (
                "name with \"quote\"",
                Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])),
            ),
        ];
        let schema = Schema::new(
            cols.iter()
                .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
                .collect::<Vec<_>>(),
        );
        let batch =
            RecordBatch::try_new(Arc::new(schema), cols.into_iter().map(|(_, a)| a).collect())
                .unwrap();
        let w = JsonRowWriter::new(&batch).unwrap();
        for i in 0..batch.num_rows() {
            let mut out = Vec::new();
            w.write(i, &mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                general(&batch, i),
                "row {i}"
            );
        }
    }

    #[test]
    fn columns_of_one_name_are_left_to_the_general_path() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("a", DataType::Int32, true),
        ]);
        let a: ArrayRef = Arc::new(Int32Array::from(vec![1]));
        let batch = RecordBatch::try_new(Arc::new(schema), vec![a.clone(), a]).unwrap();
        assert!(JsonRowWriter::new(&batch).is_none());
    }
}
