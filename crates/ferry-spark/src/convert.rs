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
//!
//! A data frame has one schema, a Ferry stream may carry several tables (a multi-table
//! source, the union of a plugin's inputs): [`StreamCodec`] says how a stream's rows
//! look in Spark and stamps each batch with its table again on the way back.

use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, Int32Array, Int8Array, RecordBatch, RecordBatchOptions,
    StructArray, UInt8Array,
};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use ferry_api::{ChangeBatch, FerryError, Result, TableSchema};
use serde_json::{json, Value};

/// The column that carries each row's kind code (`RowKind as u8`) through Spark.
pub const KIND_COLUMN: &str = "__ferry_row_kind";

/// The column of a multi-table stream that says which of the stream's tables a row
/// belongs to: the table's position in the stream's table list (see [`StreamCodec`]).
pub const TABLE_COLUMN: &str = "__ferry_table";

/// The struct column that carries the columns of table `position` in a multi-table stream.
pub fn table_column(position: usize) -> String {
    format!("__ferry_t{position}")
}

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
    // Spark's rows have no place for "this column is unchanged": refuse rather than let a
    // sink write NULL there.
    batch.refuse_unchanged("the Spark engine")?;
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

/// How the rows of one stream look in Spark, where a data frame has one schema.
///
/// A stream of one table is that table's columns in their Spark types, then
/// [`KIND_COLUMN`] (what [`spark_schema`] gives). A stream of several tables is
/// [`TABLE_COLUMN`] (the row's table, by position), one struct column per table
/// ([`table_column`], null in the other tables' rows) and [`KIND_COLUMN`]: Spark moves
/// and unions such rows as it would any others, and [`StreamCodec::from_spark`] splits
/// them into one [`ChangeBatch`] per run of rows of one table, named as the plan names
/// the table, so that sinks and transforms route them as on the embedded engine.
#[derive(Debug, Clone)]
pub struct StreamCodec {
    tables: Vec<TableSchema>,
    /// Each table's own Spark schema (flat, with [`KIND_COLUMN`]).
    flat: Vec<SchemaRef>,
    spark: SchemaRef,
}

impl StreamCodec {
    /// The codec of a stream carrying `tables`, in this order.
    pub fn new(tables: &[TableSchema]) -> Result<Self> {
        let flat: Vec<SchemaRef> = tables.iter().map(|t| spark_schema(&t.schema)).collect();
        let spark = match flat.as_slice() {
            [] => return Err(FerryError::internal("a stream that carries no table")),
            [one] => one.clone(),
            many => {
                let mut fields = vec![Field::new(TABLE_COLUMN, DataType::Int32, true)];
                for (i, s) in many.iter().enumerate() {
                    let data: Fields = s.fields()[..s.fields().len() - 1].iter().cloned().collect();
                    fields.push(Field::new(table_column(i), DataType::Struct(data), true));
                }
                fields.push(Field::new(KIND_COLUMN, DataType::Int8, true));
                Arc::new(Schema::new(fields))
            }
        };
        Ok(StreamCodec {
            tables: tables.to_vec(),
            flat,
            spark,
        })
    }

    /// The tables of the stream, in order.
    pub fn tables(&self) -> &[TableSchema] {
        &self.tables
    }

    /// The schema of the stream's data frame.
    pub fn spark_schema(&self) -> &SchemaRef {
        &self.spark
    }

    /// Spark's JSON form of [`StreamCodec::spark_schema`] (as `StructType.fromJson` reads it).
    pub fn spark_schema_json(&self) -> Result<Value> {
        struct_json(self.spark.fields())
    }

    /// `batch` as a batch of the stream's data frame.
    pub fn to_spark(&self, batch: &ChangeBatch) -> Result<RecordBatch> {
        if self.tables.len() == 1 {
            return to_spark(batch, &self.spark);
        }
        let position = self
            .tables
            .iter()
            .position(|t| t.name == batch.table)
            .ok_or_else(|| {
                let names: Vec<&str> = self.tables.iter().map(|t| &*t.name).collect();
                FerryError::internal(format!(
                    "a batch of table '{}' in a stream of the tables {}",
                    batch.table,
                    names.join(", ")
                ))
            })?;
        let flat = to_spark(batch, &self.flat[position])?;
        let n = flat.num_rows();
        let data = flat.num_columns() - 1;
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.tables.len() + 2);
        columns.push(Arc::new(Int32Array::from_value(position as i32, n)));
        for (i, f) in self.spark.fields()[1..=self.tables.len()]
            .iter()
            .enumerate()
        {
            if i != position {
                columns.push(new_null_array(f.data_type(), n));
                continue;
            }
            let DataType::Struct(fields) = f.data_type() else {
                return Err(FerryError::internal("a table column that is no struct"));
            };
            let rows = StructArray::try_new_with_length(
                fields.clone(),
                flat.columns()[..data].to_vec(),
                None,
                n,
            )?;
            columns.push(Arc::new(rows));
        }
        columns.push(flat.column(data).clone());
        let opts = RecordBatchOptions::new().with_row_count(Some(n));
        Ok(RecordBatch::try_new_with_options(
            self.spark.clone(),
            columns,
            &opts,
        )?)
    }

    /// A batch of the stream's data frame, back in Ferry's types: one [`ChangeBatch`]
    /// per run of consecutive rows of one table (none for an empty batch), in order.
    pub fn from_spark(&self, batch: &RecordBatch) -> Result<Vec<ChangeBatch>> {
        if batch.num_rows() == 0 {
            return Ok(Vec::new());
        }
        if let [one] = self.tables.as_slice() {
            return Ok(vec![from_spark(batch, one.name.clone(), &one.schema)?]);
        }
        let schema = batch.schema();
        let missing = |name: &str| {
            FerryError::internal(format!(
                "a batch of a multi-table stream from Spark has no column {name}"
            ))
        };
        let at = schema
            .index_of(TABLE_COLUMN)
            .map_err(|_| missing(TABLE_COLUMN))?;
        let positions = cast_to(batch.column(at), &DataType::Int32, TABLE_COLUMN)?;
        let positions = positions
            .as_any()
            .downcast_ref::<Int32Array>()
            .ok_or_else(|| FerryError::internal("table positions are not integers"))?;
        let kinds = schema
            .index_of(KIND_COLUMN)
            .ok()
            .map(|k| batch.column(k).clone());
        let position_of = |row: usize| -> Result<usize> {
            let p = positions.is_valid(row).then(|| positions.value(row));
            p.and_then(|p| usize::try_from(p).ok())
                .filter(|p| *p < self.tables.len())
                .ok_or_else(|| {
                    FerryError::internal(format!(
                        "a row from Spark names no table of the stream ({} tables): {p:?}",
                        self.tables.len()
                    ))
                })
        };
        let mut out = Vec::new();
        let mut start = 0;
        while start < batch.num_rows() {
            let p = position_of(start)?;
            let mut end = start + 1;
            while end < batch.num_rows() && position_of(end)? == p {
                end += 1;
            }
            let name = table_column(p);
            let column = schema.index_of(&name).map_err(|_| missing(&name))?;
            let rows = batch.column(column).slice(start, end - start);
            let rows = rows
                .as_any()
                .downcast_ref::<StructArray>()
                .ok_or_else(|| FerryError::internal(format!("column {name} is no struct")))?;
            let mut fields: Vec<Field> = rows.fields().iter().map(|f| (**f).clone()).collect();
            let mut columns = rows.columns().to_vec();
            if let Some(k) = &kinds {
                fields.push(Field::new(KIND_COLUMN, k.data_type().clone(), true));
                columns.push(k.slice(start, end - start));
            }
            let opts = RecordBatchOptions::new().with_row_count(Some(end - start));
            let flat =
                RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &opts)?;
            let table = &self.tables[p];
            out.push(from_spark(&flat, table.name.clone(), &table.schema)?);
            start = end;
        }
        Ok(out)
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

    #[test]
    fn a_stream_of_several_tables_crosses_spark_and_comes_back_table_by_table() {
        let a = TableSchema::new("db.a", schema(&[("id", "int"), ("t", "time")]));
        let b = TableSchema::new("db.b", schema(&[("name", "string")]));
        let codec = StreamCodec::new(&[a.clone(), b.clone()]).unwrap();
        let names: Vec<&str> = codec
            .spark_schema()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(
            names,
            [TABLE_COLUMN, "__ferry_t0", "__ferry_t1", KIND_COLUMN]
        );
        let rows_a = RecordBatch::try_new(
            a.schema.clone(),
            vec![
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(Time64MicrosecondArray::from(vec![Some(1_000_000), None])),
            ],
        )
        .unwrap();
        let rows_b = RecordBatch::try_new(
            b.schema.clone(),
            vec![Arc::new(StringArray::from(vec!["x"]))],
        )
        .unwrap();
        let from_a = codec
            .to_spark(&ChangeBatch::with_kinds(
                "db.a".into(),
                rows_a.clone(),
                UInt8Array::from(vec![0, 3]),
            ))
            .unwrap();
        let from_b = codec
            .to_spark(&ChangeBatch::inserts("db.b".into(), rows_b.clone()))
            .unwrap();
        assert!(
            from_a.column(2).is_null(0),
            "table b's column is null in a's rows"
        );
        // What a union in Spark makes of them: one batch with both tables' rows.
        let mixed =
            arrow::compute::concat_batches(codec.spark_schema(), [&from_b, &from_a, &from_b])
                .unwrap();
        let back = codec.from_spark(&mixed).unwrap();
        let tables: Vec<&str> = back.iter().map(|c| &*c.table).collect();
        assert_eq!(tables, ["db.b", "db.a", "db.b"]);
        assert_eq!(back[1].data, rows_a);
        assert_eq!(back[1].kind(1), ferry_api::RowKind::Delete);
        assert_eq!(back[2].data, rows_b);
        let e = codec
            .to_spark(&ChangeBatch::inserts("db.c".into(), rows_b))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'db.c' in a stream of the tables db.a, db.b"),
            "{e}"
        );
    }

    #[test]
    fn a_stream_of_one_table_keeps_the_tables_own_columns() {
        let a = TableSchema::new("a", schema(&[("id", "int")]));
        let codec = StreamCodec::new(std::slice::from_ref(&a)).unwrap();
        assert_eq!(codec.spark_schema(), &spark_schema(&a.schema));
    }
}
