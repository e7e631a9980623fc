//! `RowKindExtractor`: turns each row's kind into a field and makes every row an insert
//! (SeaTunnel's `RowKindExtractorTransform`), so that change data can land in append-only
//! sinks. The field, `custom_field_name` (default `row_kind`), is appended as a non-null
//! string: `+I`, `-U`, `+U`, `-D` with `transform_type = SHORT` (the default), or
//! `INSERT`, `UPDATE_BEFORE`, `UPDATE_AFTER`, `DELETE` with `FULL`.

use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray};
use arrow::datatypes::{DataType, Field};
use ferry_api::{
    ChangeBatch, JobContext, OptionSpec, Options, Result, RowKind, TableSchema, Transform,
    TransformFactory,
};

use crate::common::{PerTable, Placement, TablePlan};

const TYPES: &[&str] = &["SHORT", "FULL"];

ferry_api::declare_options! {
    /// The `RowKindExtractor` transform's options.
    struct RowKindExtractorOptions => SPECS {
        /// Name of the field that receives the row kind.
        field: String = "custom_field_name", default "row_kind";
        /// SHORT (+I, -U, +U, -D) or FULL (INSERT, UPDATE_BEFORE, …).
        transform_type: String = "transform_type", default "SHORT", one_of TYPES;
    }
}

/// Factory of the `RowKindExtractor` transform.
pub struct RowKindExtractorTransformFactory;

impl TransformFactory for RowKindExtractorTransformFactory {
    fn name(&self) -> &'static str {
        "RowKindExtractor"
    }

    fn description(&self) -> &'static str {
        "Adds the row kind as a string field and turns every row into an insert."
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
        let o = RowKindExtractorOptions::read(options)?;
        let field = o.field;
        let full = o.transform_type == "FULL";
        options.finish(SPECS)?;
        if field.is_empty() {
            return Err(options.error("custom_field_name", "must not be empty"));
        }
        let labels: [&'static str; 4] =
            RowKind::ALL.map(|k| if full { k.name() } else { k.short() });
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            if table.schema.index_of(&field).is_ok() {
                return Err(options.location().error_with_hint(
                    "custom_field_name",
                    format!("field '{field}' already exists in table '{}'", table.name),
                    "choose another custom_field_name",
                ));
            }
            let placement = Placement::new(
                &table.schema,
                vec![Field::new(&field, DataType::Utf8, false)],
            );
            let output = table.derive(table.name.clone(), placement.schema.clone());
            plans.push((
                table.name.clone(),
                Arc::new(Extract {
                    output,
                    placement,
                    labels,
                }),
            ));
        }
        Ok(Arc::new(PerTable::new("RowKindExtractor", plans)))
    }
}

#[derive(Debug)]
struct Extract {
    output: TableSchema,
    placement: Placement,
    labels: [&'static str; 4],
}

impl TablePlan for Extract {
    fn output(&self) -> Option<TableSchema> {
        Some(self.output.clone())
    }

    fn apply(&self, batch: ChangeBatch) -> Result<Option<ChangeBatch>> {
        let labels = self.labels;
        let column: StringArray = match &batch.kinds {
            None => StringArray::from_iter_values(std::iter::repeat_n(labels[0], batch.num_rows())),
            // Unknown codes read as inserts, as ChangeBatch::kind does.
            Some(k) => StringArray::from_iter_values(
                k.values()
                    .iter()
                    .map(|&c| labels.get(c as usize).copied().unwrap_or(labels[0])),
            ),
        };
        let data = self
            .placement
            .assemble(&batch.data, vec![Arc::new(column) as ArrayRef])?;
        Ok(Some(ChangeBatch::inserts(batch.table, data)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use serde_json::json;

    fn b() -> ChangeBatch {
        people_batch(
            vec![Some(1), Some(2), Some(3), None],
            vec![None, Some("b"), Some("c"), Some("d")],
            vec![0, 1, 2, 3],
        )
    }

    #[test]
    fn short_kinds_by_default_and_all_rows_become_inserts() {
        let t = create(&RowKindExtractorTransformFactory, json!({}), &[people()]).unwrap();
        let out = &t.output_tables()[0];
        assert_eq!(out.schema.field(2).name(), "row_kind");
        assert!(!out.schema.field(2).is_nullable());
        let r = run(&t, b()).unwrap();
        assert_eq!(
            strings(&r, "row_kind"),
            ["+I", "-U", "+U", "-D"].map(|s| Some(s.to_string()))
        );
        assert!(r.kinds.is_none());
        assert_eq!(strings(&r, "name")[0], None);
    }

    #[test]
    fn full_names_and_custom_field() {
        let t = create(
            &RowKindExtractorTransformFactory,
            json!({"custom_field_name": "op", "transform_type": "full"}),
            &[people()],
        )
        .unwrap();
        let r = run(&t, b()).unwrap();
        assert_eq!(
            strings(&r, "op"),
            ["INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE"].map(|s| Some(s.to_string()))
        );
        let inserts = people_batch(vec![Some(1)], vec![None], vec![0]);
        assert_eq!(
            strings(&run(&t, inserts).unwrap(), "op"),
            vec![Some("INSERT".to_string())]
        );
    }

    #[test]
    fn option_errors() {
        let e = create_err(
            &RowKindExtractorTransformFactory,
            json!({"custom_field_name": "name"}),
            &[people()],
        );
        assert!(
            e.contains("option 'custom_field_name': field 'name' already exists in table 't'"),
            "{e}"
        );
        let e = create_err(
            &RowKindExtractorTransformFactory,
            json!({"transform_type": "LONG"}),
            &[people()],
        );
        assert!(
            e.contains("invalid value 'LONG' (valid values: SHORT, FULL)"),
            "{e}"
        );
    }
}
