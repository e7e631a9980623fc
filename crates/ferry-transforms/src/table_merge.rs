//! `TableMerge`: merges every input table into one (SeaTunnel's `TableMergeTransform`),
//! named `database.schema.table` from the options that are set. The input tables must
//! have the same fields (names and types, in order). Rows pass through unchanged.

use std::sync::Arc;

use ferry_api::types::{same_type, type_name};
use ferry_api::{
    JobContext, OptionSpec, Options, Result, TableSchema, Transform, TransformFactory,
};

use crate::common::{PerTable, ProjectPlan, TablePlan};
use crate::naming::TablePath;

ferry_api::declare_options! {
    /// The `TableMerge` transform's options.
    struct TableMergeOptions => SPECS {
        /// Database part of the merged table's name.
        database: String = "database", optional;
        /// Schema part of the merged table's name.
        schema: String = "schema", optional;
        /// Table part of the merged table's name.
        table: String = "table", required;
    }
}

/// Factory of the `TableMerge` transform.
pub struct TableMergeTransformFactory;

impl TransformFactory for TableMergeTransformFactory {
    fn name(&self) -> &'static str {
        "TableMerge"
    }

    fn description(&self) -> &'static str {
        "Merges all input tables (of the same fields) into one table."
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
        let TableMergeOptions {
            database,
            schema,
            table,
        } = TableMergeOptions::read(options)?;
        options.finish(SPECS)?;
        if table.is_empty() {
            return Err(options.error("table", "must not be empty"));
        }
        let name: Arc<str> = TablePath {
            database,
            schema,
            table,
        }
        .full_name()
        .into();
        if let Some(first) = input.first() {
            for other in &input[1..] {
                if !same_fields(first, other) {
                    return Err(options.location().error_with_hint(
                        "",
                        format!(
                            "cannot merge table '{}' ({}) with table '{}' ({}): their fields differ",
                            other.name,
                            describe(other),
                            first.name,
                            describe(first)
                        ),
                        "merged tables must have the same field names and types, in the same order",
                    ));
                }
            }
        }
        let plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = input
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    Arc::new(ProjectPlan::renamed_table(t, name.clone())) as Arc<dyn TablePlan>,
                )
            })
            .collect();
        Ok(Arc::new(PerTable::new("TableMerge", plans)))
    }
}

fn same_fields(a: &TableSchema, b: &TableSchema) -> bool {
    let (fa, fb) = (a.schema.fields(), b.schema.fields());
    fa.len() == fb.len()
        && fa
            .iter()
            .zip(fb.iter())
            .all(|(x, y)| x.name() == y.name() && same_type(x.data_type(), y.data_type()))
}

fn describe(t: &TableSchema) -> String {
    let fields: Vec<String> = t
        .schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), type_name(f.data_type())))
        .collect();
    fields.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use arrow::datatypes::DataType;
    use serde_json::json;

    #[test]
    fn merges_tables_into_one_name() {
        let a = table("db.a", &[("id", DataType::Int32), ("name", DataType::Utf8)]);
        let b = people();
        let t = create(
            &TableMergeTransformFactory,
            json!({"database": "d", "table": "all"}),
            &[a, b],
        )
        .unwrap();
        let outs = t.output_tables();
        assert_eq!(outs.len(), 1);
        assert_eq!(outs[0].name.as_ref(), "d.all");
        let r = run(&t, people_batch(vec![Some(1)], vec![None], vec![2])).unwrap();
        assert_eq!(r.table.as_ref(), "d.all");
        assert_eq!(kinds(&r), ["+U"]);
    }

    #[test]
    fn option_and_schema_errors() {
        let e = create_err(
            &TableMergeTransformFactory,
            json!({"database": "d"}),
            &[people()],
        );
        assert!(e.contains("option 'table': is required but not set"), "{e}");
        let other = table("u", &[("id", DataType::Int64), ("name", DataType::Utf8)]);
        let e = create_err(
            &TableMergeTransformFactory,
            json!({"table": "x"}),
            &[people(), other],
        );
        assert!(e.contains("cannot merge table 'u' (id bigint, name string) with table 't' (id int, name string)"), "{e}");
    }
}
