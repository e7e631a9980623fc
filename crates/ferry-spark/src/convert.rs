//! Ferry's Arrow types ↔ what Spark accepts.
//!
//! Spark reads and writes Arrow batches whose types must match its own mapping exactly.
//! Most SeaTunnel types have a Spark twin with the same Arrow layout; the exceptions are
//! converted column-wise at the boundary and back again before Ferry code sees the data:
//!
//! | Ferry (Arrow) | Spark | on the wire |
//! |---|---|---|
//! | `time` (`Time64(µs)`) | `string` (Spark has no time type) | `HH:MM:SS[.ffffff]` |
//! | `timestamp` (`Timestamp(µs)`) | `timestamp_ntz` | `timestamp[us]` |
//! | `timestamp_tz` (`Timestamp(µs, UTC)`) | `timestamp` | `timestamp[us, UTC]` |
//! | `Utf8View`, `LargeUtf8` | `string` | `string` |
//!
//! Row kinds (`+I -U +U -D`) travel in an extra `byte` column, [`KIND_COLUMN`], so that
//! change data keeps its kinds through Spark.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int8Array, RecordBatch, RecordBatchOptions, UInt8Array};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use ferry_api::{ChangeBatch, FerryError, Result};
use serde_json::{json, Value};

/// The column that carries each row's kind code (`RowKind as u8`) through Spark.
pub const KIND_COLUMN: &str = "__ferry_row_kind";

/// The Arrow type Spark uses for a column of Ferry type `dt`.
pub fn spark_arrow_type(dt: &DataType) -> DataType {
    match dt {
        DataType::Time32(_) | DataType::Time64(_) => DataType::Utf8,
        DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary | DataType::FixedSizeBinary(_) => {
            DataType::Binary
        }
        DataType::Timestamp(_, None) => DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::Timestamp(_, Some(_)) => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        DataType::Date64 => DataType::Date32,
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 | DataType::UInt64 => DataType::Int64,
        DataType::Float16 => DataType::Float32,
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) => DataType::Decimal128(*p, *s),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => DataType::List(Arc::new(Field::new(
            "element",
            spark_arrow_type(f.data_type()),
            true,
        ))),
        DataType::FixedSizeList(f, _) => DataType::List(Arc::new(Field::new(
            "element",
            spark_arrow_type(f.data_type()),
            true,
        ))),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => ferry_api::types::map_type(
                spark_arrow_type(kv[0].data_type()),
                spark_arrow_type(kv[1].data_type()),
            ),
            other => other.clone(),
        },
        DataType::Struct(fields) => DataType::Struct(spark_fields(fields)),
        other => other.clone(),
    }
}

fn spark_fields(fields: &Fields) -> Fields {
    fields
        .iter()
        .map(|f| Field::new(f.name(), spark_arrow_type(f.data_type()), true))
        .collect()
}

/// The schema of the Spark data frame that carries a Ferry table: every column in its
/// Spark type, then [`KIND_COLUMN`].
pub fn spark_schema(schema: &Schema) -> SchemaRef {
    let mut fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| Field::new(f.name(), spark_arrow_type(f.data_type()), true))
        .collect();
    fields.push(Field::new(KIND_COLUMN, DataType::Int8, true));
    Arc::new(Schema::new(fields))
}

/// Spark's JSON form of a struct type for `schema` (as `StructType.fromJson` reads it),
/// including [`KIND_COLUMN`].
pub fn spark_schema_json(schema: &Schema) -> Result<Value> {
    let spark = spark_schema(schema);
    struct_json(spark.fields())
}

fn struct_json(fields: &Fields) -> Result<Value> {
    let fields: Vec<Value> = fields
        .iter()
        .map(|f| Ok(json!({"name": f.name(), "type": spark_type_json(f.data_type())?, "nullable": true, "metadata": {}})))
        .collect::<Result<_>>()?;
    Ok(json!({"type": "struct", "fields": fields}))
}

/// Spark's JSON form of the Spark type for Arrow type `dt` (already a Spark Arrow type).
fn spark_type_json(dt: &DataType) -> Result<Value> {
    let simple = |s: &str| Ok(Value::String(s.to_string()));
    match dt {
        DataType::Null => simple("void"),
        DataType::Boolean => simple("boolean"),
        DataType::Int8 => simple("byte"),
        DataType::Int16 => simple("short"),
        DataType::Int32 => simple("integer"),
        DataType::Int64 => simple("long"),
        DataType::Float32 => simple("float"),
        DataType::Float64 => simple("double"),
        DataType::Utf8 => simple("string"),
        DataType::Binary => simple("binary"),
        DataType::Date32 => simple("date"),
        DataType::Timestamp(_, None) => simple("timestamp_ntz"),
        DataType::Timestamp(_, Some(_)) => simple("timestamp"),
        DataType::Decimal128(p, s) if *s >= 0 => Ok(Value::String(format!("decimal({p},{s})"))),
        DataType::List(f) => Ok(
            json!({"type": "array", "elementType": spark_type_json(f.data_type())?, "containsNull": true}),
        ),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => Ok(json!({
                "type": "map",
                "keyType": spark_type_json(kv[0].data_type())?,
                "valueType": spark_type_json(kv[1].data_type())?,
                "valueContainsNull": true
            })),
            other => Err(unsupported(other)),
        },
        DataType::Struct(fields) => struct_json(fields),
        other => Err(unsupported(other)),
    }
}

fn unsupported(dt: &DataType) -> FerryError {
    FerryError::config(format!(
        "the Spark engine cannot carry a column of type {} ({dt}); run this job with --engine local",
        ferry_api::types::type_name(dt)
    ))
}

const CAST: CastOptions<'static> = CastOptions {
    safe: false,
    format_options: arrow::util::display::FormatOptions::new(),
};

fn cast_to(a: &ArrayRef, to: &DataType, column: &str) -> Result<ArrayRef> {
    if a.data_type() == to {
        return Ok(a.clone());
    }
    cast_with_options(a, to, &CAST).map_err(|e| {
        FerryError::data(
            "spark",
            format!(
                "column '{column}': cannot convert {} to {to}: {e}",
                a.data_type()
            ),
        )
    })
}

/// A Ferry batch as Spark wants it: every column cast to `target`'s type (from
/// [`spark_schema`]), with the row kinds appended.
pub fn to_spark(batch: &ChangeBatch, target: &SchemaRef) -> Result<RecordBatch> {
    let data = &batch.data;
    let n = target.fields().len().saturating_sub(1);
    if data.num_columns() != n {
        return Err(FerryError::internal(format!(
            "a batch of table '{}' has {} columns where the plan has {n}",
            batch.table,
            data.num_columns()
        )));
    }
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(n + 1);
    for (a, f) in data.columns().iter().zip(target.fields().iter()) {
        columns.push(cast_to(a, f.data_type(), f.name())?);
    }
    let kinds: Int8Array = match &batch.kinds {
        // The codes are 0..=3, so the reinterpretation is exact.
        Some(k) => k.unary(|c| c as i8),
        None => Int8Array::from_value(0, data.num_rows()),
    };
    columns.push(Arc::new(kinds));
    let opts = RecordBatchOptions::new().with_row_count(Some(data.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        target.clone(),
        columns,
        &opts,
    )?)
}

/// A batch that came from Spark, back in Ferry's types: the columns of `expected` by
/// position (Spark keeps column order), cast back to their Ferry types, with the kinds
/// from [`KIND_COLUMN`] when present.
pub fn from_spark(
    batch: &RecordBatch,
    table: Arc<str>,
    expected: &SchemaRef,
) -> Result<ChangeBatch> {
    let n = expected.fields().len();
    let kind_index = batch.schema().index_of(KIND_COLUMN).ok();
    let data_columns: Vec<usize> = (0..batch.num_columns())
        .filter(|i| Some(*i) != kind_index)
        .collect();
    if data_columns.len() != n {
        return Err(FerryError::internal(format!(
            "a batch for table '{table}' from Spark has {} columns where the plan has {n}",
            data_columns.len()
        )));
    }
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(n);
    for (i, f) in data_columns.iter().zip(expected.fields().iter()) {
        columns.push(cast_to(batch.column(*i), f.data_type(), f.name())?);
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    let data = RecordBatch::try_new_with_options(expected.clone(), columns, &opts)?;
    match kind_index {
        Some(k) => {
            let codes = cast_to(batch.column(k), &DataType::UInt8, KIND_COLUMN)?;
            let codes = codes
                .as_any()
                .downcast_ref::<UInt8Array>()
                .cloned()
                .ok_or_else(|| FerryError::internal("row kinds are not bytes"))?;
            // Nulls (rows made by Spark itself) count as inserts.
            let codes = if codes.null_count() > 0 {
                UInt8Array::from_iter_values(codes.iter().map(|c| c.unwrap_or(0)))
            } else {
                codes
            };
            Ok(ChangeBatch::with_kinds(table, data, codes))
        }
        None => Ok(ChangeBatch::inserts(table, data)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        Int32Array, StringArray, Time64MicrosecondArray, TimestampMicrosecondArray,
    };
    use ferry_api::types::parse_type;

    fn schema(types: &[(&str, &str)]) -> SchemaRef {
        Arc::new(Schema::new(
            types
                .iter()
                .map(|(n, t)| Field::new(*n, parse_type(t).unwrap(), true))
                .collect::<Vec<_>>(),
        ))
    }

    #[test]
    fn spark_json_names_spark_types() {
        let s = schema(&[
            ("a", "int"),
            ("b", "bigint"),
            ("c", "time"),
            ("d", "timestamp"),
            ("e", "decimal(30, 8)"),
            ("f", "map<string, array<int>>"),
            ("g", "{x = tinyint}"),
        ]);
        let j = spark_schema_json(&s).unwrap();
        let types: Vec<String> = j["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["type"].to_string())
            .collect();
        assert_eq!(types[0], "\"integer\"");
        assert_eq!(types[1], "\"long\"");
        assert_eq!(types[2], "\"string\"");
        assert_eq!(types[3], "\"timestamp_ntz\"");
        assert_eq!(types[4], "\"decimal(30,8)\"");
        assert!(
            types[5].contains("\"keyType\":\"string\"")
                && types[5].contains("\"elementType\":\"integer\""),
            "{}",
            types[5]
        );
        assert!(types[6].contains("\"byte\""), "{}", types[6]);
        assert_eq!(j["fields"][7]["name"], KIND_COLUMN);
    }

    #[test]
    fn time_goes_to_spark_as_text_and_comes_back_unchanged() {
        let s = schema(&[("id", "int"), ("t", "time"), ("ts", "timestamp")]);
        let micros = 10 * 3_600_000_000i64 + 20 * 60_000_000 + 30_000_001;
        let data = RecordBatch::try_new(
            s.clone(),
            vec![
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(Time64MicrosecondArray::from(vec![Some(micros), None])),
                Arc::new(TimestampMicrosecondArray::from(vec![Some(5), Some(6)])),
            ],
        )
        .unwrap();
        let b = ChangeBatch::with_kinds("t".into(), data.clone(), UInt8Array::from(vec![0, 3]));
        let target = spark_schema(&s);
        let out = to_spark(&b, &target).unwrap();
        let text = out
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(text.value(0), "10:20:30.000001");
        assert!(text.is_null(1));
        assert_eq!(
            out.column(3)
                .as_any()
                .downcast_ref::<Int8Array>()
                .unwrap()
                .values()
                .to_vec(),
            vec![0, 3]
        );
        let back = from_spark(&out, "t".into(), &s).unwrap();
        assert_eq!(back.data, data);
        assert_eq!(back.kind(1), ferry_api::RowKind::Delete);
    }

    #[test]
    fn a_batch_without_kinds_is_all_inserts() {
        let s = schema(&[("id", "int")]);
        let data =
            RecordBatch::try_new(s.clone(), vec![Arc::new(Int32Array::from(vec![1]))]).unwrap();
        let back = from_spark(&data, "t".into(), &s).unwrap();
        assert!(back.kinds.is_none());
    }

    #[test]
    fn a_batch_with_the_wrong_column_count_is_refused() {
        let s = schema(&[("id", "int"), ("x", "int")]);
        let one = schema(&[("id", "int")]);
        let data = RecordBatch::try_new(one, vec![Arc::new(Int32Array::from(vec![1]))]).unwrap();
        let e = from_spark(&data, "t".into(), &s).unwrap_err().to_string();
        assert!(e.contains("has 1 columns where the plan has 2"), "{e}");
    }
}
