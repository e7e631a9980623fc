//! `FieldMapper`: keeps only the listed fields, in the listed order, renamed
//! (SeaTunnel's `FieldMapperTransform`): `field_mapper { old_name = new_name, … }`.
//! Columns are shared, not copied.

use std::sync::Arc;

use ferry_api::{
    JobContext, OptionSpec, Options, Result, TableSchema, Transform, TransformFactory,
};

use crate::common::{missing_fields, PerTable, ProjectPlan, StringMap, TablePlan};

ferry_api::declare_options! {
    /// The `FieldMapper` transform's options.
    struct FieldMapperOptions => SPECS {
        /// Fields to keep, in output order, with their new names: `field_mapper { old_name = new_name, … }`.
        mapping: StringMap = "field_mapper", required;
    }
}

/// Factory of the `FieldMapper` transform.
pub struct FieldMapperTransformFactory;

impl TransformFactory for FieldMapperTransformFactory {
    fn name(&self) -> &'static str {
        "FieldMapper"
    }

    fn description(&self) -> &'static str {
        "Keeps only the listed fields, in the listed order, under new names."
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
        let StringMap(mapping) = FieldMapperOptions::read(options)?.mapping;
        options.finish(SPECS)?;
        if mapping.is_empty() {
            return Err(options.error(
                "field_mapper",
                "must map at least one field: field_mapper { old_name = new_name }",
            ));
        }
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            let missing: Vec<&str> = mapping
                .iter()
                .map(|(old, _)| old.as_str())
                .filter(|f| table.schema.index_of(f).is_err())
                .collect();
            if !missing.is_empty() {
                return Err(missing_fields(options, "field_mapper", table, &missing));
            }
            let columns: Vec<(usize, String)> = mapping
                .iter()
                .filter_map(|(old, new)| table.schema.index_of(old).ok().map(|i| (i, new.clone())))
                .collect();
            plans.push((
                table.name.clone(),
                Arc::new(ProjectPlan::select_renamed(table, &columns)),
            ));
        }
        Ok(Arc::new(PerTable::new("FieldMapper", plans)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use arrow::datatypes::DataType;
    use serde_json::json;

    #[test]
    fn keeps_listed_fields_in_listed_order_renamed() {
        let input = table(
            "fake",
            &[
                ("id", DataType::Int32),
                ("name", DataType::Utf8),
                ("age", DataType::Int32),
                ("x", DataType::Utf8),
            ],
        );
        let t = create(
            &FieldMapperTransformFactory,
            json!({"field_mapper": {"id": "id", "age": "age_as", "name": "name"}}),
            &[input],
        )
        .unwrap();
        let out = &t.output_tables()[0];
        let names: Vec<&str> = out
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["id", "age_as", "name"]);
        assert_eq!(out.schema.field(1).data_type(), &DataType::Int32);
    }

    #[test]
    fn data_is_shared_and_kinds_kept() {
        let t = create(
            &FieldMapperTransformFactory,
            json!({"field_mapper": {"name": "n", "id": "i"}}),
            &[people()],
        )
        .unwrap();
        let b = people_batch(vec![Some(1), None], vec![None, Some("z")], vec![3, 0]);
        let r = run(&t, b.clone()).unwrap();
        assert_eq!(names(&r), ["n", "i"]);
        assert_eq!(strings(&r, "n"), vec![None, Some("z".to_string())]);
        assert_eq!(kinds(&r), ["-D", "+I"]);
        assert!(Arc::ptr_eq(r.data.column(1), b.data.column(0)));
    }

    #[test]
    fn unknown_fields_and_missing_option_are_reported() {
        let e = create_err(
            &FieldMapperTransformFactory,
            json!({"field_mapper": {"idd": "a"}}),
            &[people()],
        );
        assert_eq!(
            e,
            "job.conf:3: transform FieldMapper: option 'field_mapper': field 'idd' not found in table 't' (available fields: id, name)"
        );
        let e = create_err(&FieldMapperTransformFactory, json!({}), &[people()]);
        assert!(
            e.contains("option 'field_mapper': is required but not set"),
            "{e}"
        );
        let e = create_err(
            &FieldMapperTransformFactory,
            json!({"field_mapper": ["id"]}),
            &[people()],
        );
        assert!(e.contains("expected a block"), "{e}");
    }
}
