//! What a catalog knows about a table beyond its columns' names and types: where it lives
//! (catalog, database, schema, table), its primary key and other constraint keys, and
//! per-column defaults and comments. SeaTunnel calls this a `CatalogTable`.
//!
//! Sources fill it in (FakeSource from `schema.primaryKey` and `schema.constraintKeys`, a
//! database source from the database's own catalog); it travels with the table's
//! [`TableSchema`](crate::TableSchema) through the plan, so that upsert sinks, save modes and
//! Assert's `catalog_table_rule` see the keys on both engines. Transforms that keep columns
//! keep the keys over them ([`CatalogInfo::restricted_to`]).

use std::collections::BTreeMap;
use std::fmt;

use arrow::datatypes::Schema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::options::Options;

/// Where a table lives, as SeaTunnel's `TableIdentifier`: a catalog name (the plugin or the
/// database system) and a table path of up to three parts.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TableId {
    /// The catalog, for example `FakeSource` or `Postgres`.
    pub catalog: String,
    /// The database, when the path names one.
    pub database: Option<String>,
    /// The schema (PostgreSQL's namespace), when the path names one.
    pub schema: Option<String>,
    /// The table's own name.
    pub table: String,
}

impl TableId {
    /// A table identifier from a dotted path as job files write it: `table`,
    /// `database.table` or `database.schema.table` (SeaTunnel's `TablePath.of`).
    pub fn from_path(catalog: impl Into<String>, path: &str) -> TableId {
        // One part is a table, two `database.table`, three `database.schema.table`. SeaTunnel
        // rejects more; Ferry's tables can be renamed freely, so the first part is then the
        // database, the last the table and the parts between (joined by `.`) the schema.
        let (database, schema, table) = match (path.find('.'), path.rfind('.')) {
            (None, _) | (_, None) => (None, None, path),
            (Some(first), Some(last)) if first == last => {
                (Some(&path[..first]), None, &path[first + 1..])
            }
            (Some(first), Some(last)) => (
                Some(&path[..first]),
                Some(&path[first + 1..last]),
                &path[last + 1..],
            ),
        };
        TableId {
            catalog: catalog.into(),
            database: database.map(str::to_string),
            schema: schema.map(str::to_string),
            table: table.to_string(),
        }
    }

    /// The same path read schema-first (SeaTunnel's `schema_first = true`): `a.b` names
    /// schema `a` and table `b` rather than database `a`.
    pub fn schema_first(mut self) -> TableId {
        if self.schema.is_none() {
            self.schema = self.database.take();
        }
        self
    }

    /// The dotted path: `database.schema.table` without the parts that are absent.
    pub fn path(&self) -> String {
        let mut out = String::new();
        for part in [self.database.as_deref(), self.schema.as_deref()]
            .into_iter()
            .flatten()
        {
            out.push_str(part);
            out.push('.');
        }
        out.push_str(&self.table);
        out
    }
}

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.catalog, self.path())
    }
}

/// A table's primary key: its name and columns, in key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrimaryKey {
    /// The constraint's name (`pk_orders`; SeaTunnel job files may use any text).
    pub name: String,
    /// The key's columns, in key order.
    pub columns: Vec<String>,
}

/// What kind of constraint key, as SeaTunnel's `ConstraintKey.ConstraintType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConstraintType {
    /// `INDEX_KEY`: an index that allows duplicates.
    Index,
    /// `UNIQUE_KEY`: a unique index or constraint.
    Unique,
    /// `FOREIGN_KEY`: a reference to another table.
    Foreign,
}

impl ConstraintType {
    /// Every kind, for messages.
    pub const ALL: [ConstraintType; 3] = [
        ConstraintType::Index,
        ConstraintType::Unique,
        ConstraintType::Foreign,
    ];

    /// The name job files use: `INDEX_KEY`, `UNIQUE_KEY`, `FOREIGN_KEY`.
    pub fn name(self) -> &'static str {
        match self {
            ConstraintType::Index => "INDEX_KEY",
            ConstraintType::Unique => "UNIQUE_KEY",
            ConstraintType::Foreign => "FOREIGN_KEY",
        }
    }

    /// Parses a job-file name, case-insensitively.
    pub fn parse(s: &str) -> Option<ConstraintType> {
        Self::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// The order of a column in a constraint key's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum SortOrder {
    /// `ASC`.
    #[default]
    Asc,
    /// `DESC`.
    Desc,
}

impl SortOrder {
    /// `ASC` or `DESC`.
    pub fn name(self) -> &'static str {
        match self {
            SortOrder::Asc => "ASC",
            SortOrder::Desc => "DESC",
        }
    }

    /// Parses `ASC` or `DESC`, case-insensitively.
    pub fn parse(s: &str) -> Option<SortOrder> {
        match s.trim().to_ascii_uppercase().as_str() {
            "ASC" => Some(SortOrder::Asc),
            "DESC" => Some(SortOrder::Desc),
            _ => None,
        }
    }
}

/// One column of a constraint key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyColumn {
    /// The column's name.
    pub name: String,
    /// Its order in the index.
    pub order: SortOrder,
}

/// A unique key, index or foreign key of a table (not its primary key).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConstraintKey {
    /// The constraint's or index's name.
    pub name: String,
    /// What kind of key.
    pub kind: ConstraintType,
    /// Its columns, in key order.
    pub columns: Vec<KeyColumn>,
}

impl fmt::Display for ConstraintKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} (", self.kind.name(), self.name)?;
        for (i, c) in self.columns.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", c.name, c.order.name())?;
        }
        f.write_str(")")
    }
}

/// What a catalog says about one column beyond its name, type and nullability (which the
/// Arrow field holds).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ColumnInfo {
    /// The column's default value, as the catalog or job file gives it.
    pub default: Option<Value>,
    /// The column's comment.
    pub comment: Option<String>,
    /// A length the source declares (`varchar(20)`, SeaTunnel's `columnLength`).
    pub length: Option<u64>,
    /// The type as the source system names it (`int4`, `varchar(20)`), for DDL in the same
    /// system; empty when the source has no native type.
    pub source_type: Option<String>,
}

impl ColumnInfo {
    fn is_empty(&self) -> bool {
        *self == ColumnInfo::default()
    }
}

/// Everything about a table that its Arrow schema does not hold. Empty by default: a table
/// that no catalog describes has no id, no keys and no column details.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CatalogInfo {
    /// Where the table lives. `None` when the source names none; the table's routing name
    /// ([`TableSchema::name`](crate::TableSchema::name)) is then all there is.
    pub id: Option<TableId>,
    /// Its primary key.
    pub primary_key: Option<PrimaryKey>,
    /// Its other keys: unique keys, indexes, foreign keys.
    pub constraint_keys: Vec<ConstraintKey>,
    /// Column details by column name, only for columns that have any.
    pub columns: BTreeMap<String, ColumnInfo>,
    /// The table's comment.
    pub comment: Option<String>,
}

impl CatalogInfo {
    /// Whether nothing is known beyond the schema.
    pub fn is_empty(&self) -> bool {
        *self == CatalogInfo::default()
    }

    /// Sets a column's details (dropped again when they are all empty).
    pub fn set_column(&mut self, name: &str, info: ColumnInfo) {
        if info.is_empty() {
            self.columns.remove(name);
        } else {
            self.columns.insert(name.to_string(), info);
        }
    }

    /// The catalog's view of a table whose columns were changed to `schema` by a transform:
    /// the id and comment stay, a key stays only when all its columns remain (a projection
    /// that drops a key column drops the key), column details stay for the columns that remain.
    pub fn restricted_to(&self, schema: &Schema) -> CatalogInfo {
        let has = |c: &str| schema.index_of(c).is_ok();
        CatalogInfo {
            id: self.id.clone(),
            primary_key: self
                .primary_key
                .clone()
                .filter(|k| k.columns.iter().all(|c| has(c))),
            constraint_keys: self
                .constraint_keys
                .iter()
                .filter(|k| k.columns.iter().all(|c| has(&c.name)))
                .cloned()
                .collect(),
            columns: self
                .columns
                .iter()
                .filter(|(c, _)| has(c))
                .map(|(c, i)| (c.clone(), i.clone()))
                .collect(),
            comment: self.comment.clone(),
        }
    }

    /// The same, with columns renamed by `rename` (old name → new name); columns it does not
    /// name keep theirs.
    pub fn renamed(&self, rename: &dyn Fn(&str) -> Option<String>) -> CatalogInfo {
        let map = |c: &str| rename(c).unwrap_or_else(|| c.to_string());
        CatalogInfo {
            id: self.id.clone(),
            primary_key: self.primary_key.as_ref().map(|k| PrimaryKey {
                name: k.name.clone(),
                columns: k.columns.iter().map(|c| map(c)).collect(),
            }),
            constraint_keys: self
                .constraint_keys
                .iter()
                .map(|k| ConstraintKey {
                    name: k.name.clone(),
                    kind: k.kind,
                    columns: k
                        .columns
                        .iter()
                        .map(|c| KeyColumn {
                            name: map(&c.name),
                            order: c.order,
                        })
                        .collect(),
                })
                .collect(),
            columns: self
                .columns
                .iter()
                .map(|(c, i)| (map(c), i.clone()))
                .collect(),
            comment: self.comment.clone(),
        }
    }

    /// Checks that every key column is a column of `schema`; the error names the key and
    /// the missing column.
    pub fn check_against(&self, schema: &Schema) -> Result<(), String> {
        let missing = |c: &str| schema.index_of(c).is_err();
        if let Some(pk) = &self.primary_key {
            if pk.columns.is_empty() {
                return Err(format!("primary key '{}' has no columns", pk.name));
            }
            if let Some(c) = pk.columns.iter().find(|c| missing(c)) {
                return Err(format!(
                    "primary key '{}' names column '{c}', which the table does not have",
                    pk.name
                ));
            }
        }
        for k in &self.constraint_keys {
            if let Some(c) = k.columns.iter().find(|c| missing(&c.name)) {
                return Err(format!(
                    "constraint key '{}' names column '{}', which the table does not have",
                    k.name, c.name
                ));
            }
        }
        Ok(())
    }
}

/// Reads SeaTunnel's key options of a schema block, `<prefix>.primaryKey { name, columnNames }`
/// and `<prefix>.constraintKeys = [{ constraintName, constraintType, constraintColumns =
/// [{ columnName, sortType }] }]`, and `<prefix>.comment`, into `info`. Used by every source
/// whose job files declare a schema (FakeSource, LocalFile); whether the columns exist is
/// checked by the planner against the final schema.
pub fn read_schema_keys(o: &mut Options, prefix: &str, info: &mut CatalogInfo) -> Result<()> {
    let pk_key = format!("{prefix}.primaryKey");
    if let Some(m) = o.object(&pk_key)? {
        let err = |k: &str, msg: &str| o.error(&format!("{pk_key}.{k}"), msg);
        if let Some(k) = m.keys().find(|k| *k != "name" && *k != "columnNames") {
            return Err(err(k, "unknown key (valid: name, columnNames)"));
        }
        let name = match m.get("name") {
            Some(Value::String(s)) => s.clone(),
            None => String::new(),
            Some(_) => return Err(err("name", "expected text")),
        };
        let columns = text_list(m.get("columnNames"))
            .ok_or_else(|| err("columnNames", "is required: a list of column names"))?;
        if columns.is_empty() {
            return Err(err("columnNames", "is empty: a primary key needs a column"));
        }
        info.primary_key = Some(PrimaryKey { name, columns });
    }
    let ck_key = format!("{prefix}.constraintKeys");
    if let Some(items) = o.list(&ck_key)? {
        for (i, item) in items.iter().enumerate() {
            let at = format!("{ck_key}[{i}]");
            let err = |k: &str, msg: String| o.error(&format!("{at}{k}"), msg);
            let Value::Object(m) = item else {
                return Err(err(
                    "",
                    "expected a block { constraintName, constraintType, constraintColumns }".into(),
                ));
            };
            let known = ["constraintName", "constraintType", "constraintColumns"];
            if let Some(k) = m.keys().find(|k| !known.contains(&k.as_str())) {
                return Err(err(
                    &format!(".{k}"),
                    format!("unknown key (valid: {})", known.join(", ")),
                ));
            }
            let name = match m.get("constraintName") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    return Err(err(
                        ".constraintName",
                        "is required and must be text".into(),
                    ))
                }
            };
            let kind = match m.get("constraintType") {
                Some(Value::String(s)) => ConstraintType::parse(s).ok_or_else(|| {
                    let valid: Vec<&str> = ConstraintType::ALL.iter().map(|t| t.name()).collect();
                    err(
                        ".constraintType",
                        format!(
                            "'{s}' is not a constraint type (valid: {})",
                            valid.join(", ")
                        ),
                    )
                })?,
                _ => {
                    return Err(err(
                        ".constraintType",
                        "is required: INDEX_KEY, UNIQUE_KEY or FOREIGN_KEY".into(),
                    ))
                }
            };
            let Some(Value::Array(cols)) = m.get("constraintColumns") else {
                return Err(err(
                    ".constraintColumns",
                    "is required: a list of { columnName, sortType }".into(),
                ));
            };
            let mut columns = Vec::with_capacity(cols.len());
            for (j, c) in cols.iter().enumerate() {
                let cat = format!(".constraintColumns[{j}]");
                let Value::Object(cm) = c else {
                    return Err(err(
                        &cat,
                        "expected a block { columnName, sortType }".into(),
                    ));
                };
                let name = match cm.get("columnName") {
                    Some(Value::String(s)) => s.clone(),
                    _ => {
                        return Err(err(
                            &format!("{cat}.columnName"),
                            "is required and must be text".into(),
                        ))
                    }
                };
                let order = match cm.get("sortType") {
                    None | Some(Value::Null) => SortOrder::Asc,
                    Some(Value::String(s)) => SortOrder::parse(s).ok_or_else(|| {
                        err(
                            &format!("{cat}.sortType"),
                            format!("'{s}' is not a sort type (valid: ASC, DESC)"),
                        )
                    })?,
                    Some(v) => {
                        return Err(err(
                            &format!("{cat}.sortType"),
                            format!("expected ASC or DESC, found {v}"),
                        ))
                    }
                };
                columns.push(KeyColumn { name, order });
            }
            info.constraint_keys.push(ConstraintKey {
                name,
                kind,
                columns,
            });
        }
    }
    if let Some(c) = o.string(&format!("{prefix}.comment"))? {
        info.comment = Some(c);
    }
    Ok(())
}

/// A list of texts (a lone text counts as a list of one).
fn text_list(v: Option<&Value>) -> Option<Vec<String>> {
    match v? {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(a) => a.iter().map(|x| x.as_str().map(str::to_string)).collect(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field};

    fn schema(cols: &[&str]) -> Schema {
        Schema::new(
            cols.iter()
                .map(|c| Field::new(*c, DataType::Int64, true))
                .collect::<Vec<_>>(),
        )
    }

    fn keyed() -> CatalogInfo {
        CatalogInfo {
            id: Some(TableId::from_path("FakeSource", "test.fakeTable")),
            primary_key: Some(PrimaryKey {
                name: "pk".into(),
                columns: vec!["id".into()],
            }),
            constraint_keys: vec![ConstraintKey {
                name: "u".into(),
                kind: ConstraintType::Unique,
                columns: vec![KeyColumn {
                    name: "name".into(),
                    order: SortOrder::Desc,
                }],
            }],
            ..Default::default()
        }
    }

    #[test]
    fn table_paths_split_into_database_schema_and_table() {
        let t = TableId::from_path("c", "t");
        assert_eq!((t.database, t.schema, t.table.as_str()), (None, None, "t"));
        let t = TableId::from_path("c", "db.t");
        assert_eq!(t.database.as_deref(), Some("db"));
        assert_eq!(t.path(), "db.t");
        let t = TableId::from_path("Postgres", "db.public.t");
        assert_eq!(
            (t.database.as_deref(), t.schema.as_deref(), t.table.as_str()),
            (Some("db"), Some("public"), "t")
        );
        assert_eq!(t.to_string(), "Postgres.db.public.t");
        // More parts than three: the first is the database, the last the table.
        let t = TableId::from_path("c", "a.b.c.d");
        assert_eq!(
            (t.database.as_deref(), t.schema.as_deref(), t.table.as_str()),
            (Some("a"), Some("b.c"), "d")
        );
    }

    #[test]
    fn a_projection_keeps_only_the_keys_whose_columns_remain() {
        let k = keyed();
        let both = k.restricted_to(&schema(&["id", "name", "x"]));
        assert_eq!(both.primary_key, k.primary_key);
        assert_eq!(both.constraint_keys.len(), 1);
        let no_id = k.restricted_to(&schema(&["name"]));
        assert!(no_id.primary_key.is_none());
        assert_eq!(no_id.constraint_keys.len(), 1);
        assert_eq!(no_id.id, k.id);
        let renamed = k.renamed(&|c| (c == "id").then(|| "key".to_string()));
        assert_eq!(renamed.primary_key.unwrap().columns, vec!["key"]);
    }

    #[test]
    fn keys_over_missing_columns_are_named_in_the_error() {
        let k = keyed();
        assert!(k.check_against(&schema(&["id", "name"])).is_ok());
        let e = k.check_against(&schema(&["id"])).unwrap_err();
        assert_eq!(
            e,
            "constraint key 'u' names column 'name', which the table does not have"
        );
        let e = k.check_against(&schema(&["name"])).unwrap_err();
        assert!(e.contains("primary key 'pk' names column 'id'"), "{e}");
        assert_eq!(
            ConstraintType::parse("unique_key"),
            Some(ConstraintType::Unique)
        );
        assert_eq!(SortOrder::parse("desc"), Some(SortOrder::Desc));
    }

    #[test]
    fn schema_key_options_are_read_as_seatunnel_writes_them() {
        let mut o = Options::from_json(
            "FakeSource",
            serde_json::json!({"schema": {
                "primaryKey": {"name": "primary key", "columnNames": ["id"]},
                "constraintKeys": [{"constraintName": "unique_name", "constraintType": "UNIQUE_KEY",
                    "constraintColumns": [{"columnName": "id", "sortType": "DESC"}]}],
                "comment": "people"
            }}),
        );
        let mut info = CatalogInfo::default();
        read_schema_keys(&mut o, "schema", &mut info).unwrap();
        assert_eq!(info.primary_key.as_ref().unwrap().name, "primary key");
        assert_eq!(
            info.constraint_keys[0].to_string(),
            "UNIQUE_KEY unique_name (id DESC)"
        );
        assert_eq!(info.comment.as_deref(), Some("people"));

        let mut o = Options::from_json(
            "FakeSource",
            serde_json::json!({"schema": {"constraintKeys": [{"constraintName": "u",
                "constraintType": "UNIQUE", "constraintColumns": []}]}}),
        );
        let e = read_schema_keys(&mut o, "schema", &mut CatalogInfo::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("schema.constraintKeys[0].constraintType")
                && e.contains(
                    "'UNIQUE' is not a constraint type (valid: INDEX_KEY, UNIQUE_KEY, FOREIGN_KEY)"
                ),
            "{e}"
        );
    }
}
