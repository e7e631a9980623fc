//! `TableRename`: renames every input table by rules (SeaTunnel's `TableRenameTransform`).
//! The table part of `database.schema.table` gets `replacements_with_regex`,
//! `convert_case`, `prefix` and `suffix`; the database and schema parts get only
//! `convert_case`. Rows and columns pass through unchanged.

use std::sync::Arc;

use ferry_api::{
    JobContext, OptionSpec, Options, Result, TableSchema, Transform, TransformFactory,
};

use crate::common::{PerTable, ProjectPlan, TablePlan};
use crate::naming::{RenameRules, TablePath, RULE_OPTIONS};

const SPECS: &[OptionSpec] = RULE_OPTIONS;

/// Factory of the `TableRename` transform.
pub struct TableRenameTransformFactory;

impl TransformFactory for TableRenameTransformFactory {
    fn name(&self) -> &'static str {
        "TableRename"
    }

    fn description(&self) -> &'static str {
        "Renames tables: case conversion, prefix, suffix, regex replacements."
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
        let rules = RenameRules::read(options)?;
        options.finish(SPECS)?;
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            let path = TablePath::parse(&table.name);
            let renamed = TablePath {
                database: path.database.as_deref().map(|d| rules.convert_case(d)),
                schema: path.schema.as_deref().map(|s| rules.convert_case(s)),
                table: rules.rename(&path.table),
            };
            let name: Arc<str> = renamed.full_name().into();
            if let Some(other) = input
                .iter()
                .find(|t| t.name != table.name && t.name == name)
            {
                return Err(options.error(
                    "",
                    format!(
                        "renaming table '{}' to '{name}' clashes with the input table '{}'",
                        table.name, other.name
                    ),
                ));
            }
            plans.push((
                table.name.clone(),
                Arc::new(ProjectPlan::renamed_table(table, name)),
            ));
        }
        let transform = PerTable::new("TableRename", plans);
        if transform.output_tables().len() != input.len() {
            return Err(options.error(
                "",
                "the rules give two input tables the same name; use TableMerge to merge tables",
            ));
        }
        Ok(Arc::new(transform))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use arrow::datatypes::DataType;
    use serde_json::json;

    #[test]
    fn renames_table_part_and_cases_the_rest() {
        let a = table("db.user_shop", &[("id", DataType::Int32)]);
        let b = table("db.s.user_order", &[("id", DataType::Int32)]);
        let v = json!({"convert_case": "UPPER", "prefix": "p_", "replacements_with_regex": [{"replace_from": "user", "replace_to": "u"}]});
        let t = create(&TableRenameTransformFactory, v, &[a.clone(), b]).unwrap();
        let names: Vec<String> = t
            .output_tables()
            .iter()
            .map(|o| o.name.to_string())
            .collect();
        assert_eq!(names, ["DB.p_u_SHOP", "DB.S.p_u_ORDER"]);
        assert_eq!(t.output_tables()[0].schema, a.schema);
    }

    #[test]
    fn batches_get_the_new_name_and_keep_rows_and_kinds() {
        let t = create(
            &TableRenameTransformFactory,
            json!({"suffix": "_bak"}),
            &[people()],
        )
        .unwrap();
        let b = people_batch(vec![Some(1), Some(2)], vec![Some("a"), None], vec![0, 3]);
        let r = run(&t, b.clone()).unwrap();
        assert_eq!(r.table.as_ref(), "t_bak");
        assert_eq!(kinds(&r), ["+I", "-D"]);
        assert!(Arc::ptr_eq(r.data.column(0), b.data.column(0)));
    }

    #[test]
    fn names_that_collide_are_reported() {
        let a = table("a1", &[("id", DataType::Int32)]);
        let b = table("a2", &[("id", DataType::Int32)]);
        let v = json!({"replacements_with_regex": [{"replace_from": "\\d", "replace_to": ""}]});
        let e = create_err(&TableRenameTransformFactory, v, &[a, b]);
        assert!(e.contains("the same name; use TableMerge"), "{e}");
    }
}
