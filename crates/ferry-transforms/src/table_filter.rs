//! `TableFilter`: keeps or drops whole tables by name (SeaTunnel's `TableFilterTransform`).
//! `database_pattern`, `schema_pattern` and `table_pattern` are regular expressions that
//! must match the whole part of `database.schema.table` (a part the name lacks is empty);
//! a table matches when every pattern set matches. `pattern_mode` INCLUDE (the default)
//! keeps matching tables, EXCLUDE drops them. With no pattern, INCLUDE keeps every table
//! and EXCLUDE drops every table, as in SeaTunnel.

use std::sync::Arc;

use ferry_api::{
    ChangeBatch, JobContext, OptionSpec, Options, Result, TableSchema, Transform, TransformFactory,
};
use regex::Regex;

use crate::common::{compile_regex, PerTable, ProjectPlan, TablePlan};
use crate::naming::TablePath;

const MODES: &[&str] = &["INCLUDE", "EXCLUDE"];

ferry_api::declare_options! {
    /// The `TableFilter` transform's options.
    struct TableFilterOptions => SPECS {
        /// Regex the database part of the table name must match.
        database_pattern: String = "database_pattern", optional;
        /// Regex the schema part of the table name must match.
        schema_pattern: String = "schema_pattern", optional;
        /// Regex the table part of the table name must match.
        table_pattern: String = "table_pattern", optional;
        /// INCLUDE keeps matching tables, EXCLUDE drops them.
        pattern_mode: String = "pattern_mode", default "INCLUDE", one_of MODES;
    }
}

/// Factory of the `TableFilter` transform.
pub struct TableFilterTransformFactory;

impl TransformFactory for TableFilterTransformFactory {
    fn name(&self) -> &'static str {
        "TableFilter"
    }

    fn description(&self) -> &'static str {
        "Keeps (or drops) the tables whose names match patterns."
    }

    fn options(&self) -> &'static [OptionSpec] {
        SPECS
    }

    fn create(
        &self,
        options: &mut Options,
        input: &[TableSchema],
        _job: &JobContext,
    ) -> Result<Arc<dyn Transform>> {
        let o = TableFilterOptions::read(options)?;
        let mut patterns: Vec<Option<Regex>> = Vec::with_capacity(3);
        for (key, pattern) in [
            ("database_pattern", o.database_pattern),
            ("schema_pattern", o.schema_pattern),
            ("table_pattern", o.table_pattern),
        ] {
            // Java's String.matches: the whole text must match.
            let re = match pattern {
                Some(p) => Some(compile_regex(options, key, &format!("^(?:{p})$"))?),
                None => None,
            };
            patterns.push(re);
        }
        let include = o.pattern_mode == "INCLUDE";
        options.finish(SPECS)?;
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            let path = TablePath::parse(&table.name);
            let parts = [
                path.database.as_deref().unwrap_or(""),
                path.schema.as_deref().unwrap_or(""),
                path.table.as_str(),
            ];
            let matched = patterns
                .iter()
                .zip(parts)
                .all(|(re, part)| re.as_ref().is_none_or(|re| re.is_match(part)));
            let plan: Arc<dyn TablePlan> = if matched == include {
                Arc::new(ProjectPlan::renamed_table(table, table.name.clone()))
            } else {
                Arc::new(Drop)
            };
            plans.push((table.name.clone(), plan));
        }
        Ok(Arc::new(PerTable::new("TableFilter", plans)))
    }
}

/// A table that is filtered out: no output table, no rows.
#[derive(Debug)]
struct Drop;

impl TablePlan for Drop {
    fn output(&self) -> Option<TableSchema> {
        None
    }

    fn apply(&self, _batch: ChangeBatch) -> Result<Option<ChangeBatch>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use arrow::datatypes::DataType;
    use serde_json::json;

    fn tables() -> Vec<TableSchema> {
        ["db.orders", "db.orders_bak", "other.users", "t"]
            .iter()
            .map(|n| table(n, &[("id", DataType::Int32)]))
            .collect()
    }

    fn kept(v: serde_json::Value) -> Vec<String> {
        let t = create(&TableFilterTransformFactory, v, &tables()).unwrap();
        t.output_tables()
            .iter()
            .map(|o| o.name.to_string())
            .collect()
    }

    #[test]
    fn patterns_match_whole_parts() {
        assert_eq!(kept(json!({"table_pattern": "orders"})), ["db.orders"]);
        assert_eq!(
            kept(json!({"database_pattern": "db", "table_pattern": "orders.*"})),
            ["db.orders", "db.orders_bak"]
        );
        assert_eq!(
            kept(json!({"table_pattern": "orders", "pattern_mode": "EXCLUDE"})),
            ["db.orders_bak", "other.users", "t"]
        );
        assert_eq!(kept(json!({})).len(), 4);
        assert!(kept(json!({"pattern_mode": "exclude"})).is_empty());
    }

    #[test]
    fn batches_of_dropped_tables_vanish_and_kept_ones_pass() {
        let t = create(
            &TableFilterTransformFactory,
            json!({"table_pattern": "t"}),
            &[people(), table("u", &[])],
        )
        .unwrap();
        let b = people_batch(vec![Some(1)], vec![None], vec![3]);
        let r = run(&t, b).unwrap();
        assert_eq!(kinds(&r), ["-D"]);
        let empty = arrow::record_batch::RecordBatch::try_new_with_options(
            Arc::new(arrow::datatypes::Schema::empty()),
            vec![],
            &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(2)),
        )
        .unwrap();
        assert!(run(&t, ChangeBatch::inserts("u".into(), empty)).is_none());
    }

    #[test]
    fn option_errors() {
        let e = create_err(
            &TableFilterTransformFactory,
            json!({"table_pattern": "("}),
            &[people()],
        );
        assert!(
            e.contains("option 'table_pattern': invalid regular expression"),
            "{e}"
        );
        let e = create_err(
            &TableFilterTransformFactory,
            json!({"pattern_mode": "keep"}),
            &[people()],
        );
        assert!(e.contains("valid values: INCLUDE, EXCLUDE"), "{e}");
    }
}
