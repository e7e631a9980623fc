//! SeaTunnel's sink option placeholders (`${table_name}`, `${database_name}`,
//! `${primary_key}`, …): each input table of a multi-table sink gets its own copy of the
//! options with the table's identifier, keys and columns filled in, as SeaTunnel's
//! `TablePlaceholderProcessor` does. Shared by every sink (LocalFile paths, Jdbc tables and
//! keys).

use serde_json::{Map, Value};

use crate::catalog::{ConstraintType, TableId};
use crate::data::TableSchema;

/// The identifier placeholders see: the table's catalog id, or its name split as a path
/// when no catalog describes it.
fn table_id(table: &TableSchema) -> TableId {
    match &table.catalog.id {
        Some(id) => id.clone(),
        None => TableId::from_path("", &table.name),
    }
}

/// `text` with `table`'s placeholders filled in.
///
/// As SeaTunnel: `${database_name}`, `${schema_name}`, `${table_name}` become the part of
/// the identifier, or the default after a colon (`${database_name:db}`) when the part is
/// absent, or nothing; `${schema_full_name}` is `database.schema` (left as written when the
/// table has neither); `${table_full_name}` the whole identifier; `${field_names}` the
/// columns joined by `,`; `${primary_key}` the primary key's columns and `${unique_key}` the
/// first unique key's, joined by `,` (left as written when the table has none). Other `${…}`
/// (`${now}`, `${k0}`) are left as written.
pub fn substitute(text: &str, table: &TableSchema) -> String {
    if !text.contains("${") {
        return text.to_string();
    }
    let id = table_id(table);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (key, default) = match inner.split_once(':') {
            Some((k, d)) => (k, Some(d.trim())),
            None => (inner, None),
        };
        // Identifier parts fall back to the default, then to nothing (SeaTunnel's "").
        let part = |v: Option<&str>| -> Option<String> {
            match v.filter(|s| !s.is_empty()) {
                Some(s) => Some(s.to_string()),
                None => Some(default.unwrap_or("").to_string()),
            }
        };
        let value = match key {
            "database_name" => part(id.database.as_deref()),
            "schema_name" => part(id.schema.as_deref()),
            "table_name" => part(Some(&id.table)),
            "schema_full_name" => {
                let parts: Vec<&str> = [id.database.as_deref(), id.schema.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect();
                (!parts.is_empty()).then(|| parts.join("."))
            }
            "table_full_name" => Some(id.path()),
            "field_names" => Some(field_names(table)),
            "primary_key" => primary_key(table),
            "unique_key" => unique_key(table),
            _ => None,
        };
        match value {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

fn field_names(table: &TableSchema) -> String {
    table
        .schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(",")
}

fn primary_key(table: &TableSchema) -> Option<String> {
    let cols = table.primary_key_columns();
    (!cols.is_empty()).then(|| cols.join(","))
}

fn unique_key(table: &TableSchema) -> Option<String> {
    table
        .catalog
        .constraint_keys
        .iter()
        .find(|k| k.kind == ConstraintType::Unique)
        .map(|k| {
            k.columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        })
}

/// A sink's options with `table`'s placeholders filled in: every text value, and a list
/// that is exactly `["${primary_key}"]`, `["${unique_key}"]` or `["${field_names}"]`
/// becomes the list of those columns (SeaTunnel's `primary_keys = ["${primary_key}"]`).
/// Nested blocks are left alone, as SeaTunnel leaves them.
pub fn substitute_options(options: &Map<String, Value>, table: &TableSchema) -> Map<String, Value> {
    options
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => Value::String(substitute(s, table)),
                Value::Array(items) if items.len() == 1 => match items[0].as_str() {
                    Some(s @ ("${primary_key}" | "${unique_key}" | "${field_names}")) => {
                        let filled = substitute(s, table);
                        if filled == s {
                            v.clone()
                        } else {
                            Value::Array(
                                filled
                                    .split(',')
                                    .map(|c| Value::String(c.to_string()))
                                    .collect(),
                            )
                        }
                    }
                    _ => v.clone(),
                },
                other => other.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CatalogInfo, ConstraintKey, KeyColumn, PrimaryKey, SortOrder};
    use arrow::datatypes::{DataType, Field, Schema};
    use serde_json::json;
    use std::sync::Arc;

    fn table(name: &str, cols: &[&str]) -> TableSchema {
        let fields: Vec<Field> = cols
            .iter()
            .map(|c| Field::new(*c, DataType::Int32, true))
            .collect();
        TableSchema::new(name, Arc::new(Schema::new(fields)))
    }

    #[test]
    fn placeholders_take_the_parts_defaults_or_nothing() {
        let t = table("db.public.orders", &["id", "name"]);
        let s = |x: &str| substitute(x, &t);
        assert_eq!(
            s("/out/${database_name}/${schema_name}/${table_name}"),
            "/out/db/public/orders"
        );
        assert_eq!(
            s("${schema_full_name}|${table_full_name}"),
            "db.public|db.public.orders"
        );
        assert_eq!(s("${field_names}"), "id,name");
        assert_eq!(
            s("${table_name:x}_${now}_${k0}=${v0}"),
            "orders_${now}_${k0}=${v0}"
        );

        let bare = table("fake2", &[]);
        let b = |x: &str| substitute(x, &bare);
        assert_eq!(b("/o/${database_name}/${table_name}"), "/o//fake2");
        assert_eq!(
            b("/o/${database_name:dflt}/${schema_name: s }"),
            "/o/dflt/s"
        );
        assert_eq!(
            b("${schema_full_name}/${table_full_name}"),
            "${schema_full_name}/fake2"
        );
        assert_eq!(b("no placeholder"), "no placeholder");
        assert_eq!(b("unclosed ${table_name"), "unclosed ${table_name");
        assert_eq!(b("${primary_key}"), "${primary_key}");
    }

    #[test]
    fn the_catalog_id_and_keys_fill_their_placeholders() {
        let t = table("fake", &["id", "code", "name"]).with_catalog(CatalogInfo {
            id: Some(TableId::from_path("FakeSource", "test.fakeTable")),
            primary_key: Some(PrimaryKey {
                name: "pk".into(),
                columns: vec!["id".into(), "code".into()],
            }),
            constraint_keys: vec![ConstraintKey {
                name: "u".into(),
                kind: ConstraintType::Unique,
                columns: vec![KeyColumn {
                    name: "name".into(),
                    order: SortOrder::Asc,
                }],
            }],
            ..Default::default()
        });
        assert_eq!(
            substitute("${database_name}.${table_name}", &t),
            "test.fakeTable"
        );
        assert_eq!(
            substitute("${primary_key}|${unique_key}", &t),
            "id,code|name"
        );
        let opts = json!({"table": "${table_name}_copy", "primary_keys": ["${primary_key}"],
            "other": ["${primary_key}", "x"], "block": {"t": "${table_name}"}, "n": 3});
        let filled = substitute_options(opts.as_object().unwrap(), &t);
        assert_eq!(
            Value::Object(filled),
            json!({"table": "fakeTable_copy", "primary_keys": ["id", "code"],
                "other": ["${primary_key}", "x"], "block": {"t": "${table_name}"}, "n": 3})
        );
    }
}
