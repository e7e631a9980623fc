//! Database column types to SeaTunnel types on Arrow, as SeaTunnel's `PostgresTypeConverter`
//! and `MySqlTypeConverter` map them, and back to DDL for the sink's save modes.
//!
//! | PostgreSQL | MySQL/MariaDB | SeaTunnel (Arrow) |
//! |---|---|---|
//! | `bool` | `tinyint(1)`, `bit(1)` | `boolean` |
//! | — | `tinyint` | `tinyint` (Int8) |
//! | `int2`, `smallserial` | `smallint`, `tinyint unsigned` | `smallint` |
//! | `int4`, `serial` | `int`, `mediumint`, `smallint unsigned`, `mediumint unsigned`, `year` | `int` |
//! | `int8`, `bigserial` | `bigint`, `int unsigned` | `bigint` |
//! | — | `bigint unsigned` | `decimal(20, 0)` |
//! | `float4` | `float` | `float` |
//! | `float8` | `double` | `double` |
//! | `numeric(p, s)` (no precision: `decimal(38, 18)`), `money` (`decimal(30, 2)`) | `decimal(p, s)` (p > 38: `decimal(38, 18)`), unsigned `decimal(p+1, s)` | `decimal(p, s)` |
//! | `char`, `varchar`, `text`, `name`, `json`, `jsonb`, `xml`, `uuid`, `inet` | `char`, `varchar`, `*text`, `json`, `enum`, `set` | `string` |
//! | `bytea` | `binary`, `varbinary`, `*blob`, `bit(n > 1)`, `geometry` | `bytes` |
//! | `date` | `date` | `date` |
//! | `time`, `timetz` | `time` | `time` |
//! | `timestamp`, `timestamptz` (as UTC wall time) | `datetime`, `timestamp` | `timestamp` |
//! | `_bool`, `_int2`, `_int4`, `_int8`, `_float4`, `_float8`, `_text`, `_varchar`, `_bpchar` | — | `array<…>` |
//!
//! Anything else is an error at planning naming the column and its type.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, TimeUnit};

use crate::conn::Dialect;

/// How a column's values travel from the server, which decides how they are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// PostgreSQL binary `bool`.
    Bool,
    /// Binary `int2`.
    I16,
    /// Binary `int4`.
    I32,
    /// Binary `int8`.
    I64,
    /// Binary `float4`.
    F32,
    /// Binary `float8`.
    F64,
    /// Binary `numeric` (the select casts `money` to it).
    Numeric,
    /// Text bytes (the select writes `inet`, `interval`, … as text).
    Text,
    /// Binary `uuid`: 16 bytes, read as its canonical text (`8-4-4-4-12` lowercase hex).
    Uuid,
    /// Binary `jsonb`: a version byte and the text.
    Jsonb,
    /// Raw bytes.
    Bytes,
    /// Binary `date`: days since 2000-01-01.
    Date,
    /// Binary `time`: microseconds since midnight.
    Time,
    /// Binary `timestamp`/`timestamptz`: microseconds since 2000-01-01.
    Timestamp,
    /// A one-dimensional PostgreSQL array of the given element wire.
    Array(ArrayElem),
}

/// Element types of the arrays SeaTunnel maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayElem {
    /// `bool[]`
    Bool,
    /// `int2[]`
    I16,
    /// `int4[]`
    I32,
    /// `int8[]`
    I64,
    /// `float4[]`
    F32,
    /// `float8[]`
    F64,
    /// `text[]`, `varchar[]`, `bpchar[]`
    Text,
}

/// One column as the source reads it and the sink creates it.
#[derive(Debug, Clone)]
pub struct ColumnDef {
    /// The column's name.
    pub name: String,
    /// Its SeaTunnel type on Arrow.
    pub data_type: DataType,
    /// Whether it may hold NULL.
    pub nullable: bool,
    /// The type as the database names it (`int4`, `varchar(20)`, `bigint unsigned`).
    pub source_type: String,
    /// A declared length (`varchar(20)`), if any.
    pub length: Option<u64>,
    /// How its values are decoded (PostgreSQL binary COPY; MySQL reads text).
    pub wire: Wire,
    /// What the reading `SELECT` lists for it: the quoted column, with a cast when the
    /// binary form of the type is not one Ferry decodes (`"id"::text` for a uuid).
    pub select: String,
}

/// The Arrow type of a list of `item`.
pub fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", item, true)))
}

/// An unsupported type: the message the planner shows.
pub fn unsupported(dialect: Dialect, column: &str, ty: &str) -> String {
    format!(
        "column '{column}' has type '{ty}', which the Jdbc {} source does not support (docs/connectors/Jdbc.md lists the supported types)",
        dialect.catalog_name()
    )
}

/// A PostgreSQL column of type `ty` (the `pg_type` name: `int4`, `_text`) with the
/// type modifier `typmod` (-1 when none).
pub fn pg_column(name: &str, ty: &str, typmod: i32, nullable: bool) -> Result<ColumnDef, String> {
    let q = Dialect::Postgres.quote(name);
    let mut length = None;
    let (dt, wire, select, source_type) = match ty {
        "bool" => (DataType::Boolean, Wire::Bool, q.clone(), ty.to_string()),
        "int2" | "smallserial" => (DataType::Int16, Wire::I16, q.clone(), ty.to_string()),
        "int4" | "serial" => (DataType::Int32, Wire::I32, q.clone(), ty.to_string()),
        "int8" | "bigserial" => (DataType::Int64, Wire::I64, q.clone(), ty.to_string()),
        "oid" => (
            DataType::Int64,
            Wire::I64,
            format!("{q}::int8"),
            ty.to_string(),
        ),
        "float4" => (DataType::Float32, Wire::F32, q.clone(), ty.to_string()),
        "float8" => (DataType::Float64, Wire::F64, q.clone(), ty.to_string()),
        "numeric" => {
            let (p, s) = if typmod >= 4 {
                let m = typmod - 4;
                (((m >> 16) & 0xffff) as u8, (m & 0xffff) as i8)
            } else {
                (38, 18)
            };
            if p > 38 {
                return Err(format!(
                    "column '{name}' has type 'numeric({p},{s})': SeaTunnel decimals hold at most 38 digits"
                ));
            }
            let st = if typmod >= 4 {
                format!("numeric({p},{s})")
            } else {
                "numeric".into()
            };
            (DataType::Decimal128(p, s), Wire::Numeric, q.clone(), st)
        }
        "money" => (
            DataType::Decimal128(30, 2),
            Wire::Numeric,
            format!("{q}::numeric"),
            ty.to_string(),
        ),
        "bpchar" | "varchar" => {
            let st = if typmod > 4 {
                length = Some((typmod - 4) as u64);
                format!("{ty}({})", typmod - 4)
            } else {
                ty.to_string()
            };
            (DataType::Utf8, Wire::Text, q.clone(), st)
        }
        "text" | "name" | "xml" | "json" | "citext" => {
            (DataType::Utf8, Wire::Text, q.clone(), ty.to_string())
        }
        "jsonb" => (DataType::Utf8, Wire::Jsonb, q.clone(), ty.to_string()),
        // Their text as JDBC's getString shows it: the type's output function (`format`),
        // which, unlike `::text`, writes an inet host without its /32; `format` turns NULL
        // into '', hence the CASE.
        // 16 bytes on the wire and formatted by the reader: asking the server for its text
        // (`format`, below) cost it 0.25 µs a value, a fifth of its CPU for a table of 16
        // columns with one uuid.
        "uuid" => (DataType::Utf8, Wire::Uuid, q.clone(), ty.to_string()),
        "inet" | "cidr" | "macaddr" | "interval" | "geometry" | "geography" => (
            DataType::Utf8,
            Wire::Text,
            format!("CASE WHEN {q} IS NULL THEN NULL ELSE format('%s', {q}) END"),
            ty.to_string(),
        ),
        "bytea" => (DataType::Binary, Wire::Bytes, q.clone(), ty.to_string()),
        "date" => (DataType::Date32, Wire::Date, q.clone(), ty.to_string()),
        "time" => (
            DataType::Time64(TimeUnit::Microsecond),
            Wire::Time,
            q.clone(),
            ty.to_string(),
        ),
        "timetz" => (
            DataType::Time64(TimeUnit::Microsecond),
            Wire::Time,
            format!("{q}::time"),
            ty.to_string(),
        ),
        "timestamp" | "timestamptz" => (
            DataType::Timestamp(TimeUnit::Microsecond, None),
            Wire::Timestamp,
            q.clone(),
            ty.to_string(),
        ),
        _ => {
            let elem = match ty {
                "_bool" => Some((ArrayElem::Bool, DataType::Boolean)),
                "_int2" => Some((ArrayElem::I16, DataType::Int16)),
                "_int4" => Some((ArrayElem::I32, DataType::Int32)),
                "_int8" => Some((ArrayElem::I64, DataType::Int64)),
                "_float4" => Some((ArrayElem::F32, DataType::Float32)),
                "_float8" => Some((ArrayElem::F64, DataType::Float64)),
                "_text" | "_varchar" | "_bpchar" => Some((ArrayElem::Text, DataType::Utf8)),
                _ => None,
            };
            match elem {
                Some((e, item)) => (list_of(item), Wire::Array(e), q.clone(), ty.to_string()),
                None => return Err(unsupported(Dialect::Postgres, name, ty)),
            }
        }
    };
    Ok(ColumnDef {
        name: name.to_string(),
        data_type: dt,
        nullable,
        source_type,
        length,
        wire,
        select,
    })
}

/// A MySQL/MariaDB column from `information_schema.COLUMNS`: `data_type` (`int`),
/// `column_type` (`int(10) unsigned`), precision, scale and character length.
pub fn mysql_column(
    name: &str,
    data_type: &str,
    column_type: &str,
    precision: Option<u64>,
    scale: Option<u64>,
    char_len: Option<u64>,
    nullable: bool,
) -> Result<ColumnDef, String> {
    let ct = column_type.to_ascii_lowercase();
    let unsigned = ct.contains("unsigned");
    let dt = match data_type.to_ascii_lowercase().as_str() {
        "bit" => {
            if precision.unwrap_or(1) <= 1 {
                DataType::Boolean
            } else {
                DataType::Binary
            }
        }
        "tinyint" if ct.starts_with("tinyint(1)") && !unsigned => DataType::Boolean,
        "tinyint" if unsigned => DataType::Int16,
        "tinyint" => DataType::Int8,
        "smallint" if unsigned => DataType::Int32,
        "smallint" => DataType::Int16,
        "mediumint" | "year" => DataType::Int32,
        "int" | "integer" if unsigned => DataType::Int64,
        "int" | "integer" => DataType::Int32,
        "bigint" if unsigned => DataType::Decimal128(20, 0),
        "bigint" => DataType::Int64,
        "float" => DataType::Float32,
        "double" | "real" => DataType::Float64,
        "decimal" | "numeric" => {
            let p = precision.unwrap_or(10) as u8;
            let s = scale.unwrap_or(0) as i8;
            let p = if unsigned { p + 1 } else { p };
            if p > 38 {
                DataType::Decimal128(38, 18)
            } else {
                DataType::Decimal128(p, s)
            }
        }
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" | "json" | "enum"
        | "set" => DataType::Utf8,
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" | "geometry" => {
            DataType::Binary
        }
        "date" => DataType::Date32,
        "time" => DataType::Time64(TimeUnit::Microsecond),
        "datetime" | "timestamp" => DataType::Timestamp(TimeUnit::Microsecond, None),
        _ => return Err(unsupported(Dialect::MySql, name, column_type)),
    };
    let length = match data_type.to_ascii_lowercase().as_str() {
        "char" | "varchar" | "binary" | "varbinary" => char_len,
        _ => None,
    };
    Ok(ColumnDef {
        name: name.to_string(),
        data_type: dt,
        nullable,
        source_type: column_type.to_string(),
        length,
        wire: Wire::Text,
        select: Dialect::MySql.quote(name),
    })
}

/// The column type to create for a SeaTunnel type in `dialect` (save modes), preferring
/// the source's own type when the source was the same kind of database.
pub fn ddl_type(
    dialect: Dialect,
    dt: &DataType,
    source_type: Option<&str>,
    same_dialect: bool,
    length: Option<u64>,
) -> Result<String, String> {
    if same_dialect {
        if let Some(st) = source_type.filter(|s| !s.is_empty()) {
            return Ok(match (dialect, st) {
                (Dialect::Postgres, "serial") => "int4".into(),
                (Dialect::Postgres, "bigserial") => "int8".into(),
                (Dialect::Postgres, "smallserial") => "int2".into(),
                (Dialect::Postgres, t) if t.starts_with('_') => format!("{}[]", &t[1..]),
                (_, t) => t.to_string(),
            });
        }
    }
    let pg = dialect == Dialect::Postgres;
    Ok(match dt {
        DataType::Boolean => if pg { "boolean" } else { "tinyint(1)" }.into(),
        DataType::Int8 => if pg { "smallint" } else { "tinyint" }.into(),
        DataType::Int16 => "smallint".into(),
        DataType::Int32 => if pg { "integer" } else { "int" }.into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => if pg { "real" } else { "float" }.into(),
        DataType::Float64 => if pg { "double precision" } else { "double" }.into(),
        DataType::Decimal128(p, s) => format!("decimal({p},{s})"),
        DataType::Utf8 | DataType::LargeUtf8 => match (pg, length) {
            (true, _) => "text".into(),
            (false, Some(n)) if n <= 16383 => format!("varchar({n})"),
            (false, _) => "longtext".into(),
        },
        DataType::Binary | DataType::LargeBinary => if pg { "bytea" } else { "longblob" }.into(),
        DataType::Date32 => "date".into(),
        DataType::Time64(_) => if pg { "time" } else { "time(6)" }.into(),
        DataType::Timestamp(_, None) => if pg { "timestamp" } else { "datetime(6)" }.into(),
        DataType::Timestamp(_, Some(_)) => if pg { "timestamptz" } else { "datetime(6)" }.into(),
        DataType::Null => if pg { "text" } else { "longtext" }.into(),
        DataType::List(item) if pg => {
            format!(
                "{}[]",
                ddl_type(dialect, item.data_type(), None, false, None)?
            )
        }
        other => {
            return Err(format!(
                "type {} has no {} column type",
                ferry_api::types::type_name(other),
                dialect.catalog_name()
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_types_map_as_seatunnel_maps_them() {
        let c = pg_column("n", "numeric", ((10 << 16) | 2) + 4, true).unwrap();
        assert_eq!(c.data_type, DataType::Decimal128(10, 2));
        assert_eq!(
            pg_column("n", "numeric", -1, true).unwrap().data_type,
            DataType::Decimal128(38, 18)
        );
        // A uuid comes as its 16 bytes (formatted by the reader), an inet as its text.
        let c = pg_column("u", "uuid", -1, true).unwrap();
        assert_eq!(
            (c.data_type, c.wire, c.select.as_str()),
            (DataType::Utf8, Wire::Uuid, "\"u\"")
        );
        let c = pg_column("i", "inet", -1, true).unwrap();
        assert_eq!(
            (c.data_type, c.wire, c.select.as_str()),
            (
                DataType::Utf8,
                Wire::Text,
                "CASE WHEN \"i\" IS NULL THEN NULL ELSE format('%s', \"i\") END"
            )
        );
        let e = pg_column("p", "point", -1, true).unwrap_err();
        assert!(e.contains("'p'") && e.contains("'point'"), "{e}");
        assert_eq!(
            pg_column("a", "_int4", -1, true).unwrap().data_type,
            list_of(DataType::Int32)
        );
    }

    #[test]
    fn mysql_types_map_as_seatunnel_maps_them() {
        let m = |dt: &str, ct: &str| {
            mysql_column("c", dt, ct, Some(20), Some(0), None, true)
                .unwrap()
                .data_type
        };
        assert_eq!(m("tinyint", "tinyint(1)"), DataType::Boolean);
        assert_eq!(m("tinyint", "tinyint(4)"), DataType::Int8);
        assert_eq!(m("int", "int(10) unsigned"), DataType::Int64);
        assert_eq!(
            m("bigint", "bigint(20) unsigned"),
            DataType::Decimal128(20, 0)
        );
        assert_eq!(m("year", "year(4)"), DataType::Int32);
        assert!(mysql_column("c", "point", "point", None, None, None, true)
            .unwrap_err()
            .contains("'point'"));
    }
}
