//! The `rules { … }` block, parsed as SeaTunnel's `AssertRuleParser` reads it: keys it
//! does not know are ignored (with a warning), rule names and values are checked here so
//! that a malformed rule fails before any data flows.

use arrow::datatypes::DataType;
use ferry_api::catalog::SortOrder;
use ferry_api::types::{parse_type_value, type_name};
use ferry_api::{ConstraintKey, ConstraintType, FerryError, KeyColumn, PluginLocation, Result};
use serde_json::{Map, Value};

/// A check on one value of a field (`field_value = [{ rule_type = MIN, rule_value = 1 }]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRuleKind {
    /// The value must be null.
    Null,
    /// The value must not be null.
    NotNull,
    /// The value is a number of at least `rule_value`.
    Min,
    /// The value is a number of at most `rule_value`.
    Max,
    /// The value's text is at least `rule_value` characters long (null counts as empty).
    MinLength,
    /// The value's text is at most `rule_value` characters long (null counts as empty).
    MaxLength,
}

impl ValueRuleKind {
    /// The name used in job files.
    pub fn name(self) -> &'static str {
        match self {
            ValueRuleKind::Null => "NULL",
            ValueRuleKind::NotNull => "NOT_NULL",
            ValueRuleKind::Min => "MIN",
            ValueRuleKind::Max => "MAX",
            ValueRuleKind::MinLength => "MIN_LENGTH",
            ValueRuleKind::MaxLength => "MAX_LENGTH",
        }
    }

    fn needs_value(self) -> bool {
        !matches!(self, ValueRuleKind::Null | ValueRuleKind::NotNull)
    }
}

/// A check on the number of rows of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowRuleKind {
    /// At least `rule_value` rows.
    MinRow,
    /// At most `rule_value` rows.
    MaxRow,
}

impl RowRuleKind {
    /// The name used in job files.
    pub fn name(self) -> &'static str {
        match self {
            RowRuleKind::MinRow => "MIN_ROW",
            RowRuleKind::MaxRow => "MAX_ROW",
        }
    }
}

const VALUE_RULES: &[&str] = &["NULL", "NOT_NULL", "MIN", "MAX", "MIN_LENGTH", "MAX_LENGTH"];
const ROW_RULES: &[&str] = &["MIN_ROW", "MAX_ROW"];

/// One entry of `field_value`: a rule type with its value, an `equals_to`, or both.
#[derive(Debug, Clone)]
pub struct ValueRule {
    /// The rule type, if given.
    pub kind: Option<ValueRuleKind>,
    /// `rule_value`, for the kinds that need one.
    pub value: Option<f64>,
    /// `equals_to`, compared with non-null values; `None` when absent or `null`.
    pub equals_to: Option<Value>,
    /// Where the rule is written, for error messages.
    pub path: String,
}

impl ValueRule {
    /// `MIN 32767`, `NOT_NULL`: the rule type part as shown in messages.
    pub fn describe_kind(&self) -> String {
        match (self.kind, self.value) {
            (Some(k), Some(v)) if k.needs_value() => format!("{} {}", k.name(), show_number(v)),
            (Some(k), _) => k.name().to_string(),
            (None, _) => String::new(),
        }
    }
}

/// One entry of `field_rules`.
#[derive(Debug, Clone)]
pub struct FieldRule {
    /// The top-level field it checks (matched exactly, as SeaTunnel does).
    pub name: String,
    /// `field_type`: every value must be non-null and of this type (or null, for `null`).
    pub field_type: Option<DataType>,
    /// `field_value`.
    pub values: Vec<ValueRule>,
    /// Where the rule is written.
    pub path: String,
}

/// One entry of `row_rules`.
#[derive(Debug, Clone)]
pub struct RowRule {
    /// The rule type.
    pub kind: RowRuleKind,
    /// `rule_value`.
    pub value: f64,
}

impl RowRule {
    /// Whether `count` rows satisfy the rule.
    pub fn passes(&self, count: u64) -> bool {
        match self.kind {
            RowRuleKind::MinRow => count as f64 >= self.value,
            RowRuleKind::MaxRow => count as f64 <= self.value,
        }
    }

    /// `MAX_ROW 5`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.kind.name(), show_number(self.value))
    }
}

/// An expected column of `catalog_table_rule.column_rule`.
#[derive(Debug, Clone)]
pub struct ColumnRule {
    /// Column name.
    pub name: String,
    /// Column type.
    pub data_type: DataType,
    /// Expected nullability, when given.
    pub nullable: Option<bool>,
}

/// `catalog_table_rule.primary_key_rule`.
#[derive(Debug, Clone)]
pub struct PrimaryKeyRule {
    /// `primary_key_name`: the key's expected name, when given.
    pub name: Option<String>,
    /// `primary_key_columns`: its columns in any order; empty checks only that a key exists.
    pub columns: Vec<String>,
}

/// `catalog_table_rule.table_identifier_rule`.
#[derive(Debug, Clone)]
pub struct TableIdRule {
    /// `catalog_name`, when given.
    pub catalog: Option<String>,
    /// `table`: the expected path (`database.table`).
    pub table: String,
}

/// `catalog_table_rule { … }`: checks on the table's schema, made when the sink is created.
#[derive(Debug, Clone, Default)]
pub struct CatalogRule {
    /// `column_rule`: the table's columns, in any order.
    pub columns: Option<Vec<ColumnRule>>,
    /// `primary_key_rule`.
    pub primary_key: Option<PrimaryKeyRule>,
    /// `constraint_key_rule`: the keys in any order; empty checks only that there are some.
    pub constraint_keys: Option<Vec<ConstraintKey>>,
    /// `table_identifier_rule`.
    pub table: Option<TableIdRule>,
    /// Where the rule is written.
    pub path: String,
}

/// The rules for one table (or for every table, at the top level).
#[derive(Debug, Clone, Default)]
pub struct TableRules {
    /// `row_rules`, checked when the job ends.
    pub row_rules: Vec<RowRule>,
    /// `field_rules`, checked on every batch.
    pub field_rules: Vec<FieldRule>,
    /// `catalog_table_rule`, checked when the sink is created.
    pub catalog: Option<CatalogRule>,
}

impl TableRules {
    fn is_empty(&self) -> bool {
        self.row_rules.is_empty() && self.field_rules.is_empty() && self.catalog.is_none()
    }
}

/// Which tables the rules apply to.
#[derive(Debug, Clone)]
pub enum Scope {
    /// Rules written directly under `rules` apply to every input table, each on its own.
    EachTable(TableRules),
    /// `tables_configs`: rules per `table_path`; other tables are only counted.
    PerTable(Vec<(String, TableRules)>),
}

/// Everything under `rules`.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The table rules and where they apply.
    pub scope: Scope,
    /// `table-names`: the exact set of tables that must have rows.
    pub table_names: Option<Vec<String>>,
}

impl Rules {
    /// The rules that apply to rows of `table`, if any.
    pub fn for_table(&self, table: &str) -> Option<&TableRules> {
        match &self.scope {
            Scope::EachTable(r) => Some(r),
            Scope::PerTable(list) => find_table(list.iter().map(|(p, r)| (p.as_str(), r)), table),
        }
    }
}

/// The entry for `table`: exact name first, then ignoring case.
pub fn find_table<'a, T>(
    mut entries: impl Iterator<Item = (&'a str, T)> + Clone,
    table: &str,
) -> Option<T> {
    entries
        .clone()
        .find(|(p, _)| *p == table)
        .or_else(|| entries.find(|(p, _)| p.eq_ignore_ascii_case(table)))
        .map(|(_, r)| r)
}

/// A number as written in rules: `5`, not `5.0`.
pub fn show_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Reads `rules`, reporting errors at their place in the job file.
pub fn parse_rules(rules: &Map<String, Value>, loc: &PluginLocation) -> Result<Rules> {
    let p = Parser { loc };
    p.warn_unknown(
        rules,
        "rules",
        &[
            "row_rules",
            "field_rules",
            "catalog_table_rule",
            "tables_configs",
            "table-names",
        ],
    );
    let scope = match rules.get("tables_configs") {
        Some(Value::Null) | None => Scope::EachTable(p.table_rules(rules, "rules")?),
        Some(Value::Array(tables)) => {
            let mut out = Vec::with_capacity(tables.len());
            for (i, t) in tables.iter().enumerate() {
                let path = format!("rules.tables_configs[{i}]");
                let Value::Object(m) = t else {
                    return Err(loc.error(
                        &path,
                        format!("expected a block {{ table_path = …, row_rules = … }}, found {t}"),
                    ));
                };
                p.warn_unknown(
                    m,
                    &path,
                    &[
                        "table_path",
                        "row_rules",
                        "field_rules",
                        "catalog_table_rule",
                    ],
                );
                let table = match m.get("table_path") {
                    Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
                    _ => {
                        return Err(loc.error(
                            &format!("{path}.table_path"),
                            "is required: the table these rules check",
                        ))
                    }
                };
                out.push((table, p.table_rules(m, &path)?));
            }
            Scope::PerTable(out)
        }
        Some(other) => {
            return Err(loc.error(
                "rules.tables_configs",
                format!("expected a list of blocks, found {other}"),
            ))
        }
    };
    let table_names = match rules.get("table-names") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(loc.error(
                        "rules.table-names",
                        format!("expected table names, found {other}"),
                    )),
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        Some(other) => {
            return Err(loc.error(
                "rules.table-names",
                format!("expected a list of table names, found {other}"),
            ))
        }
    };
    let empty = match &scope {
        Scope::EachTable(r) => {
            r.is_empty() && !rules.contains_key("row_rules") && !rules.contains_key("field_rules")
        }
        Scope::PerTable(list) => list.is_empty(),
    };
    if empty && table_names.is_none() {
        return Err(loc.error(
            "rules",
            "Assert rule config is empty, please add rule config (row_rules, field_rules, catalog_table_rule, tables_configs or table-names)",
        ));
    }
    Ok(Rules { scope, table_names })
}

struct Parser<'a> {
    loc: &'a PluginLocation,
}

impl Parser<'_> {
    fn err(&self, path: &str, message: impl Into<String>) -> FerryError {
        self.loc.error(path, message)
    }

    /// SeaTunnel reads the keys it knows and ignores the rest (a case misspells
    /// `rule_ruls` and passes); say so rather than fail.
    fn warn_unknown(&self, m: &Map<String, Value>, path: &str, known: &[&str]) {
        for k in m.keys().filter(|k| !known.contains(&k.as_str())) {
            let near = ferry_api::error::nearest(k, known.iter().copied());
            let hint = near
                .map(|n| format!(" (did you mean '{n}'?)"))
                .unwrap_or_default();
            tracing::warn!(
                "{}: {} ignores unknown key '{path}.{k}'{hint}",
                self.loc.describe(),
                self.loc.file
            );
        }
    }

    fn list<'v>(&self, m: &'v Map<String, Value>, key: &str, path: &str) -> Result<&'v [Value]> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(other) => Err(self.err(
                &format!("{path}.{key}"),
                format!("expected a list of blocks, found {other}"),
            )),
        }
    }

    fn block<'v>(&self, v: &'v Value, path: &str) -> Result<&'v Map<String, Value>> {
        match v {
            Value::Object(m) => Ok(m),
            other => Err(self.err(path, format!("expected a block {{ … }}, found {other}"))),
        }
    }

    fn table_rules(&self, m: &Map<String, Value>, path: &str) -> Result<TableRules> {
        let mut out = TableRules::default();
        for (i, r) in self.list(m, "row_rules", path)?.iter().enumerate() {
            out.row_rules
                .push(self.row_rule(r, &format!("{path}.row_rules[{i}]"))?);
        }
        for (i, r) in self.list(m, "field_rules", path)?.iter().enumerate() {
            out.field_rules
                .push(self.field_rule(r, &format!("{path}.field_rules[{i}]"))?);
        }
        if let Some(c) = m.get("catalog_table_rule").filter(|v| !v.is_null()) {
            out.catalog = Some(self.catalog_rule(c, &format!("{path}.catalog_table_rule"))?);
        }
        Ok(out)
    }

    fn rule_value(&self, m: &Map<String, Value>, path: &str) -> Result<Option<f64>> {
        let p = format!("{path}.rule_value");
        match m.get("rule_value") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.err(&p, format!("expected a number, found {n}"))),
            Some(Value::String(s)) => s
                .trim()
                .parse::<f64>()
                .map(Some)
                .map_err(|_| self.err(&p, format!("expected a number, found '{s}'"))),
            Some(other) => Err(self.err(&p, format!("expected a number, found {other}"))),
        }
    }

    fn rule_type(&self, m: &Map<String, Value>, path: &str) -> Result<Option<String>> {
        match m.get("rule_type") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_ascii_uppercase())),
            Some(other) => Err(self.err(
                &format!("{path}.rule_type"),
                format!("expected a rule name, found {other}"),
            )),
        }
    }

    fn row_rule(&self, v: &Value, path: &str) -> Result<RowRule> {
        let m = self.block(v, path)?;
        self.warn_unknown(m, path, &["rule_type", "rule_value"]);
        let kind = match self.rule_type(m, path)?.as_deref() {
            Some("MIN_ROW") => RowRuleKind::MinRow,
            Some("MAX_ROW") => RowRuleKind::MaxRow,
            Some(other) if VALUE_RULES.contains(&other) => {
                return Err(self.loc.error_with_hint(
                    &format!("{path}.rule_type"),
                    format!("{other} checks field values, not the number of rows"),
                    "put it under field_rules[].field_value; row_rules take MIN_ROW or MAX_ROW",
                ))
            }
            Some(other) => {
                return Err(self.loc.error_with_hint(
                    &format!("{path}.rule_type"),
                    format!("unknown rule type '{other}'"),
                    "valid values: MIN_ROW, MAX_ROW",
                ))
            }
            None => {
                return Err(self.err(
                    &format!("{path}.rule_type"),
                    "is required: MIN_ROW or MAX_ROW",
                ))
            }
        };
        let value = self.rule_value(m, path)?.ok_or_else(|| {
            self.err(
                &format!("{path}.rule_value"),
                format!("is required by {}", kind.name()),
            )
        })?;
        Ok(RowRule { kind, value })
    }

    fn field_rule(&self, v: &Value, path: &str) -> Result<FieldRule> {
        let m = self.block(v, path)?;
        self.warn_unknown(m, path, &["field_name", "field_type", "field_value"]);
        let name = match m.get("field_name") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            None | Some(Value::Null) => {
                return Err(self.err(
                    &format!("{path}.field_name"),
                    "is required: the field to check",
                ))
            }
            Some(other) => {
                return Err(self.err(
                    &format!("{path}.field_name"),
                    format!("expected a field name, found {other}"),
                ))
            }
        };
        let field_type = match m.get("field_type") {
            None => None,
            Some(t @ (Value::String(_) | Value::Object(_))) => Some(
                parse_type_value(t).map_err(|e| self.err(&format!("{path}.field_type"), e.0))?,
            ),
            Some(other) => {
                return Err(self.err(
                    &format!("{path}.field_type"),
                    format!("expected a type name or a block of fields, found {other}"),
                ))
            }
        };
        let mut values = Vec::new();
        for (i, r) in self.list(m, "field_value", path)?.iter().enumerate() {
            values.push(self.value_rule(r, &format!("{path}.field_value[{i}]"))?);
        }
        Ok(FieldRule {
            name,
            field_type,
            values,
            path: path.to_string(),
        })
    }

    fn value_rule(&self, v: &Value, path: &str) -> Result<ValueRule> {
        let m = self.block(v, path)?;
        self.warn_unknown(m, path, &["rule_type", "rule_value", "equals_to"]);
        let kind = match self.rule_type(m, path)?.as_deref() {
            None => None,
            Some("NULL") => Some(ValueRuleKind::Null),
            Some("NOT_NULL") => Some(ValueRuleKind::NotNull),
            Some("MIN") => Some(ValueRuleKind::Min),
            Some("MAX") => Some(ValueRuleKind::Max),
            Some("MIN_LENGTH") => Some(ValueRuleKind::MinLength),
            Some("MAX_LENGTH") => Some(ValueRuleKind::MaxLength),
            Some(other) if ROW_RULES.contains(&other) => {
                return Err(self.loc.error_with_hint(
                    &format!("{path}.rule_type"),
                    format!("{other} counts rows; it cannot check a field's values"),
                    "put it under row_rules",
                ))
            }
            Some(other) => {
                return Err(self.loc.error_with_hint(
                    &format!("{path}.rule_type"),
                    format!("unknown rule type '{other}'"),
                    format!("valid values: {}", VALUE_RULES.join(", ")),
                ))
            }
        };
        let value = self.rule_value(m, path)?;
        if let Some(k) = kind.filter(|k| k.needs_value() && value.is_none()) {
            return Err(self.err(
                &format!("{path}.rule_value"),
                format!("is required by {}", k.name()),
            ));
        }
        let equals_to = m.get("equals_to").filter(|v| !v.is_null()).cloned();
        if kind.is_none() && equals_to.is_none() {
            return Err(self.err(
                path,
                "a field_value entry needs a rule_type, an equals_to, or both",
            ));
        }
        Ok(ValueRule {
            kind,
            value,
            equals_to,
            path: path.to_string(),
        })
    }

    fn catalog_rule(&self, v: &Value, path: &str) -> Result<CatalogRule> {
        let m = self.block(v, path)?;
        self.warn_unknown(
            m,
            path,
            &[
                "primary_key_rule",
                "constraint_key_rule",
                "column_rule",
                "table_identifier_rule",
            ],
        );
        let mut out = CatalogRule {
            path: path.to_string(),
            ..Default::default()
        };
        if let Some(v) = m.get("primary_key_rule").filter(|v| !v.is_null()) {
            let kpath = format!("{path}.primary_key_rule");
            let km = self.block(v, &kpath)?;
            self.warn_unknown(km, &kpath, &["primary_key_name", "primary_key_columns"]);
            let name = match km.get("primary_key_name") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => {
                    return Err(self.err(
                        &format!("{kpath}.primary_key_name"),
                        format!("expected text, found {other}"),
                    ))
                }
            };
            let columns = match km.get("primary_key_columns") {
                None | Some(Value::Null) => Vec::new(),
                Some(_) => self
                    .list(km, "primary_key_columns", &kpath)?
                    .iter()
                    .map(|c| c.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        self.err(
                            &format!("{kpath}.primary_key_columns"),
                            "expected a list of column names",
                        )
                    })?,
            };
            out.primary_key = Some(PrimaryKeyRule { name, columns });
        }
        if let Some(v) = m.get("constraint_key_rule").filter(|v| !v.is_null()) {
            let kpath = format!("{path}.constraint_key_rule");
            let Value::Array(items) = v else {
                return Err(self.err(&kpath, "expected a list of constraint keys"));
            };
            let mut keys = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                keys.push(self.constraint_key(item, &format!("{kpath}[{i}]"))?);
            }
            out.constraint_keys = Some(keys);
        }
        if m.contains_key("column_rule") {
            let mut cols = Vec::new();
            for (i, c) in self.list(m, "column_rule", path)?.iter().enumerate() {
                let cpath = format!("{path}.column_rule[{i}]");
                let cm = self.block(c, &cpath)?;
                self.warn_unknown(
                    cm,
                    &cpath,
                    &[
                        "name",
                        "type",
                        "column_length",
                        "nullable",
                        "default_value",
                        "comment",
                    ],
                );
                let name = match cm.get("name") {
                    Some(Value::String(s)) => s.clone(),
                    _ => {
                        return Err(
                            self.err(&format!("{cpath}.name"), "is required: the column's name")
                        )
                    }
                };
                let data_type =
                    match cm.get("type") {
                        Some(t @ (Value::String(_) | Value::Object(_))) => parse_type_value(t)
                            .map_err(|e| self.err(&format!("{cpath}.type"), e.0))?,
                        _ => {
                            return Err(self
                                .err(&format!("{cpath}.type"), "is required: the column's type"))
                        }
                    };
                let nullable = match cm.get("nullable") {
                    None | Some(Value::Null) => None,
                    Some(Value::Bool(b)) => Some(*b),
                    Some(other) => {
                        return Err(self.err(
                            &format!("{cpath}.nullable"),
                            format!("expected true or false, found {other}"),
                        ))
                    }
                };
                cols.push(ColumnRule {
                    name,
                    data_type,
                    nullable,
                });
            }
            out.columns = Some(cols);
        }
        if let Some(t) = m.get("table_identifier_rule").filter(|v| !v.is_null()) {
            let tpath = format!("{path}.table_identifier_rule");
            let tm = self.block(t, &tpath)?;
            self.warn_unknown(tm, &tpath, &["catalog_name", "table"]);
            let table = match tm.get("table") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    return Err(self.err(
                        &format!("{tpath}.table"),
                        "is required: the expected table name",
                    ))
                }
            };
            let catalog = tm
                .get("catalog_name")
                .and_then(|c| c.as_str())
                .map(str::to_string);
            out.table = Some(TableIdRule { catalog, table });
        }
        Ok(out)
    }

    /// One `constraint_key_rule` item: `{ constraint_key_name, constraint_key_type,
    /// constraint_key_columns = [{ constraint_key_column_name, constraint_key_sort_type }] }`.
    fn constraint_key(&self, v: &Value, path: &str) -> Result<ConstraintKey> {
        let m = self.block(v, path)?;
        self.warn_unknown(
            m,
            path,
            &[
                "constraint_key_name",
                "constraint_key_type",
                "constraint_key_columns",
            ],
        );
        let text = |k: &str| match m.get(k) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(self.err(&format!("{path}.{k}"), "is required and must be text")),
        };
        let name = text("constraint_key_name")?;
        let kind_text = text("constraint_key_type")?;
        let kind = ConstraintType::parse(&kind_text).ok_or_else(|| {
            self.err(
                &format!("{path}.constraint_key_type"),
                format!("'{kind_text}' is not a constraint type (valid: INDEX_KEY, UNIQUE_KEY, FOREIGN_KEY)"),
            )
        })?;
        let mut columns = Vec::new();
        for (j, c) in self
            .list(m, "constraint_key_columns", path)?
            .iter()
            .enumerate()
        {
            let cpath = format!("{path}.constraint_key_columns[{j}]");
            let cm = self.block(c, &cpath)?;
            self.warn_unknown(
                cm,
                &cpath,
                &["constraint_key_column_name", "constraint_key_sort_type"],
            );
            let name = match cm.get("constraint_key_column_name") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    return Err(self.err(
                        &format!("{cpath}.constraint_key_column_name"),
                        "is required and must be text",
                    ))
                }
            };
            let order = match cm.get("constraint_key_sort_type") {
                None | Some(Value::Null) => SortOrder::Asc,
                Some(Value::String(s)) => SortOrder::parse(s).ok_or_else(|| {
                    self.err(
                        &format!("{cpath}.constraint_key_sort_type"),
                        format!("'{s}' is not a sort type (valid: ASC, DESC)"),
                    )
                })?,
                Some(other) => {
                    return Err(self.err(
                        &format!("{cpath}.constraint_key_sort_type"),
                        format!("expected ASC or DESC, found {other}"),
                    ))
                }
            };
            columns.push(KeyColumn { name, order });
        }
        Ok(ConstraintKey {
            name,
            kind,
            columns,
        })
    }
}

/// `c_int int, c_string string`: columns as shown in messages.
pub fn describe_columns<'a>(cols: impl Iterator<Item = (&'a str, &'a DataType)>) -> String {
    cols.map(|(n, t)| format!("{n} {}", type_name(t)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn loc() -> PluginLocation {
        PluginLocation {
            file: "job.conf".into(),
            section: "sink".into(),
            plugin: "Assert".into(),
            line: Some(3),
            ..Default::default()
        }
    }

    fn parse(v: Value) -> Result<Rules> {
        parse_rules(v.as_object().unwrap(), &loc())
    }

    fn err(v: Value) -> String {
        parse(v).unwrap_err().to_string()
    }

    #[test]
    fn parses_every_rule_kind() {
        let r = parse(json!({
            "row_rules": [{"rule_type": "MAX_ROW", "rule_value": 10}, {"rule_type": "min_row", "rule_value": "5"}],
            "field_rules": [{
                "field_name": "name", "field_type": "string",
                "field_value": [{"rule_type": "NOT_NULL"}, {"rule_type": "MIN_LENGTH", "rule_value": 5}, {"equals_to": "x"}, {"rule_type": "NULL", "equals_to": null}]
            }, {"field_name": "r", "field_type": {"a": "int"}}]
        }))
        .unwrap();
        let Scope::EachTable(t) = &r.scope else {
            panic!("expected rules for each table")
        };
        assert_eq!(t.row_rules.len(), 2);
        assert_eq!(t.row_rules[1].kind, RowRuleKind::MinRow);
        assert_eq!(t.row_rules[1].describe(), "MIN_ROW 5");
        assert!(t.row_rules[0].passes(10) && !t.row_rules[0].passes(11));
        assert!(t.row_rules[1].passes(5) && !t.row_rules[1].passes(4));
        let f = &t.field_rules[0];
        assert_eq!(f.values[1].describe_kind(), "MIN_LENGTH 5");
        assert_eq!(f.values[2].equals_to, Some(json!("x")));
        assert_eq!(f.values[3].equals_to, None);
        assert_eq!(f.values[1].path, "rules.field_rules[0].field_value[1]");
        assert_eq!(
            type_name(t.field_rules[1].field_type.as_ref().unwrap()),
            "{a = int}"
        );
    }

    #[test]
    fn unknown_keys_are_ignored_as_seatunnel_does() {
        // fake/fake_to_assert_with_range.conf misspells row_rules as rule_ruls.
        let r = parse(json!({"rule_ruls": [{"rule_type": "MAX_ROW", "rule_value": 5}], "field_rules": [{"field_name": "a", "field_type": "int"}]})).unwrap();
        let Scope::EachTable(t) = &r.scope else {
            panic!("expected rules for each table")
        };
        assert!(t.row_rules.is_empty());
        assert_eq!(t.field_rules.len(), 1);
    }

    #[test]
    fn tables_configs_route_by_table_path() {
        let r = parse(json!({"tables_configs": [
            {"table_path": "test.table1", "row_rules": [{"rule_type": "MAX_ROW", "rule_value": 16}]},
            {"table_path": "test.table2", "field_rules": [{"field_name": "c", "field_type": "string"}]}
        ]}))
        .unwrap();
        assert_eq!(r.for_table("test.table1").unwrap().row_rules.len(), 1);
        assert_eq!(r.for_table("TEST.table2").unwrap().field_rules.len(), 1);
        assert!(r.for_table("test.table3").is_none());
    }

    #[test]
    fn malformed_rules_name_the_place() {
        assert_eq!(
            err(json!({"row_rules": [{"rule_type": "MAX_ROWS", "rule_value": 1}]})),
            "job.conf:3: sink Assert: option 'rules.row_rules[0].rule_type': unknown rule type 'MAX_ROWS' (valid values: MIN_ROW, MAX_ROW)"
        );
        assert_eq!(
            err(json!({"row_rules": [{"rule_type": "MAX_ROW"}]})),
            "job.conf:3: sink Assert: option 'rules.row_rules[0].rule_value': is required by MAX_ROW"
        );
        assert_eq!(
            err(json!({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "MIN"}]}]})),
            "job.conf:3: sink Assert: option 'rules.field_rules[0].field_value[0].rule_value': is required by MIN"
        );
        assert!(err(json!({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "MIN_ROW", "rule_value": 1}]}]}))
            .contains("MIN_ROW counts rows; it cannot check a field's values (put it under row_rules)"));
        assert!(err(json!({"row_rules": [{"rule_type": "NOT_NULL"}]}))
            .contains("NOT_NULL checks field values, not the number of rows"));
        assert!(
            err(json!({"field_rules": [{"field_name": "a", "field_type": "strnig"}]}))
                .contains("option 'rules.field_rules[0].field_type': unknown type 'strnig'")
        );
        assert!(err(json!({"field_rules": [{"field_type": "int"}]}))
            .contains("option 'rules.field_rules[0].field_name': is required"));
        assert!(err(
            json!({"field_rules": [{"field_name": "a", "field_value": [{"rule_value": 3}]}]})
        )
        .contains("needs a rule_type, an equals_to, or both"));
        assert!(err(json!({"tables_configs": [{"row_rules": []}]}))
            .contains("option 'rules.tables_configs[0].table_path': is required"));
        assert!(
            err(json!({"rule_ruls": []})).contains("option 'rules': Assert rule config is empty")
        );
    }

    #[test]
    fn catalog_and_table_name_rules() {
        let r = parse(json!({
            "catalog_table_rule": {
                "primary_key_rule": {"primary_key_name": "pk", "primary_key_columns": ["id"]},
                "column_rule": [{"name": "id", "type": "bigint"}, {"name": "name", "type": "string", "nullable": false}],
                "table_identifier_rule": {"catalog_name": "c", "table": "db.t"}
            },
            "table-names": ["a", "b"]
        }))
        .unwrap();
        let Scope::EachTable(t) = &r.scope else {
            panic!("expected rules for each table")
        };
        let c = t.catalog.as_ref().unwrap();
        let pk = c.primary_key.as_ref().unwrap();
        assert_eq!(
            (pk.name.as_deref(), pk.columns.as_slice()),
            (Some("pk"), &["id".to_string()][..])
        );
        assert!(c.constraint_keys.is_none());
        assert_eq!(c.columns.as_ref().unwrap()[1].nullable, Some(false));
        let t = c.table.as_ref().unwrap();
        assert_eq!(
            (t.catalog.as_deref(), t.table.as_str()),
            (Some("c"), "db.t")
        );
        assert_eq!(r.table_names, Some(vec!["a".to_string(), "b".to_string()]));
    }
}
