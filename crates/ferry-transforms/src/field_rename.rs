//! `FieldRename`: renames every field by rules (SeaTunnel's `FieldRenameTransform`):
//! `specific` renames named fields outright; other names get `replacements_with_regex`,
//! `convert_case`, `prefix` and `suffix`. Only names change: the columns are shared.

use std::sync::Arc;

use ferry_api::{
    JobContext, OptionSpec, Options, Result, TableSchema, Transform, TransformFactory,
};

use crate::common::{block_string, check_block_keys, Blocks, PerTable, ProjectPlan, TablePlan};
use crate::naming::{RenameRules, RULE_OPTIONS};

ferry_api::declare_options! {
    /// The option FieldRename takes besides the rename rules.
    struct SpecificOptions => SPECIFIC_SPECS {
        /// Exact renames [{ field_name = old, target_name = new }]; a field renamed here gets no other rule.
        specific: Blocks = "specific", optional;
    }
}

const SPECS: &[OptionSpec] = ferry_api::concat_specs!(RULE_OPTIONS, SPECIFIC_SPECS);

/// Factory of the `FieldRename` transform.
pub struct FieldRenameTransformFactory;

impl TransformFactory for FieldRenameTransformFactory {
    fn name(&self) -> &'static str {
        "FieldRename"
    }

    fn description(&self) -> &'static str {
        "Renames fields: case conversion, prefix, suffix, regex replacements, exact renames."
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
        let mut specific: Vec<(String, String)> = Vec::new();
        for (i, block) in SpecificOptions::read(options)?
            .specific
            .map(|b| b.0)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            check_block_keys(
                options,
                "specific",
                i,
                block,
                &["field_name", "target_name"],
            )?;
            let from =
                block_string(options, "specific", i, block, "field_name")?.ok_or_else(|| {
                    options.error(
                        &format!("specific[{i}].field_name"),
                        "is required but not set",
                    )
                })?;
            let to =
                block_string(options, "specific", i, block, "target_name")?.ok_or_else(|| {
                    options.error(
                        &format!("specific[{i}].target_name"),
                        "is required but not set",
                    )
                })?;
            specific.push((from, to));
        }
        options.finish(SPECS)?;
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            let columns: Vec<(usize, String)> = table
                .schema
                .fields()
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let name = match specific.iter().find(|(from, _)| from == f.name()) {
                        Some((_, to)) => to.clone(),
                        None => rules.rename(f.name()),
                    };
                    (i, name)
                })
                .collect();
            plans.push((
                table.name.clone(),
                Arc::new(ProjectPlan::select_renamed(table, &columns)),
            ));
        }
        Ok(Arc::new(PerTable::new("FieldRename", plans)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use arrow::datatypes::DataType;
    use serde_json::json;

    #[test]
    fn renames_every_field_and_shares_columns() {
        let v = json!({"convert_case": "UPPER", "prefix": "F_", "specific": [{"field_name": "id", "target_name": "Key"}]});
        let t = create(&FieldRenameTransformFactory, v, &[people()]).unwrap();
        let out = &t.output_tables()[0];
        assert_eq!(out.name.as_ref(), "t");
        let names: Vec<&str> = out
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["Key", "F_NAME"]);
        assert_eq!(out.schema.field(0).data_type(), &DataType::Int32);
        let b = people_batch(vec![Some(1), None], vec![None, Some("x")], vec![0, 3]);
        let r = run(&t, b.clone()).unwrap();
        assert_eq!(strings(&r, "F_NAME"), vec![None, Some("x".to_string())]);
        assert_eq!(kinds(&r), ["+I", "-D"]);
        assert!(Arc::ptr_eq(r.data.column(1), b.data.column(1)));
    }

    #[test]
    fn no_rules_is_the_identity() {
        let t = create(&FieldRenameTransformFactory, json!({}), &[people()]).unwrap();
        assert_eq!(t.output_tables(), vec![people()]);
    }

    #[test]
    fn option_errors() {
        let e = create_err(
            &FieldRenameTransformFactory,
            json!({"specific": [{"field_name": "id"}]}),
            &[people()],
        );
        assert!(
            e.contains("option 'specific[0].target_name': is required but not set"),
            "{e}"
        );
        let e = create_err(
            &FieldRenameTransformFactory,
            json!({"sufix": "_x"}),
            &[people()],
        );
        assert!(
            e.contains("'sufix': unknown option (did you mean 'suffix'?"),
            "{e}"
        );
    }
}
