//! `Copy`: adds copies of fields under new names (SeaTunnel's `CopyFieldTransform`).
//!
//! Either `src_field` + `dest_field` (the old form) or `fields { dest = src, … }`; when both
//! are set, `fields` wins, as in SeaTunnel. A destination named like an existing field
//! replaces it in place; other destinations are appended in the order written. Arrow
//! arrays are immutable, so a copy shares the source array: nothing is copied.

use std::sync::Arc;

use arrow::datatypes::Field;
use ferry_api::{
    JobContext, OptionSpec, Options, Result, TableSchema, Transform, TransformFactory,
};

use crate::common::{find_field, PerTable, Placement, ProjectPlan, StringMap, TablePlan};

ferry_api::declare_options! {
    /// The `Copy` transform's options.
    struct CopyOptions => SPECS {
        /// Field to copy (deprecated; use fields). Needs dest_field.
        src_field: String = "src_field", optional;
        /// Name of the copy of src_field (deprecated; use fields).
        dest_field: String = "dest_field", optional;
        /// Copies to make: `fields { new_name = source_field, … }`.
        fields: StringMap = "fields", optional;
    }
}

/// Factory of the `Copy` transform.
pub struct CopyTransformFactory;

impl TransformFactory for CopyTransformFactory {
    fn name(&self) -> &'static str {
        "Copy"
    }

    fn description(&self) -> &'static str {
        "Adds copies of fields under new names."
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
        let copies = read_copies(options)?;
        options.finish(SPECS)?;
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            plans.push((table.name.clone(), Arc::new(plan(options, table, &copies)?)));
        }
        Ok(Arc::new(PerTable::new("Copy", plans)))
    }
}

/// A copy: (destination, source, the option that named the source).
type CopySpec = (String, String, String);

fn read_copies(options: &mut Options) -> Result<Vec<CopySpec>> {
    let CopyOptions {
        src_field: src,
        dest_field: dest,
        fields,
    } = CopyOptions::read(options)?;
    if let Some(StringMap(fields)) = fields {
        if fields.is_empty() {
            return Err(options.error(
                "fields",
                "must name at least one copy: fields { new_name = source_field }",
            ));
        }
        return Ok(fields
            .into_iter()
            .map(|(dest, src)| {
                let key = format!("fields.{dest}");
                (dest, src, key)
            })
            .collect());
    }
    match (src, dest) {
        (Some(s), Some(d)) => Ok(vec![(d, s, "src_field".to_string())]),
        (Some(_), None) => Err(options.error("dest_field", "is required when src_field is set")),
        (None, Some(_)) => Err(options.error("src_field", "is required when dest_field is set")),
        (None, None) => Err(options.location().error_with_hint(
            "fields",
            "no copy configured",
            "set fields { new_name = source_field }, or src_field and dest_field",
        )),
    }
}

fn plan(options: &Options, table: &TableSchema, copies: &[CopySpec]) -> Result<ProjectPlan> {
    let mut sources = Vec::with_capacity(copies.len());
    let mut outputs = Vec::with_capacity(copies.len());
    for (dest, src, key) in copies {
        let i = find_field(options, key, table, src)?;
        sources.push(i);
        outputs.push(Field::clone(table.schema.field(i)).with_name(dest.as_str()));
    }
    let placement = Placement::new(&table.schema, outputs);
    let indices = placement.as_projection(table.schema.fields().len(), &sources);
    Ok(ProjectPlan::new(
        table.derive(table.name.clone(), placement.schema),
        indices,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use arrow::array::{Array, Int32Array, StructArray};
    use arrow::datatypes::{DataType, Fields};
    use arrow::record_batch::RecordBatch;
    use ferry_api::ChangeBatch;
    use serde_json::json;

    #[test]
    fn src_dest_form_appends_a_copy() {
        let t = create(
            &CopyTransformFactory,
            json!({"src_field": "name", "dest_field": "name1"}),
            &[people()],
        )
        .unwrap();
        let out = &t.output_tables()[0];
        assert_eq!(out.name.as_ref(), "t");
        let names: Vec<&str> = out
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["id", "name", "name1"]);
        assert_eq!(out.schema.field(2).data_type(), &DataType::Utf8);

        let b = people_batch(vec![Some(1), None], vec![Some("a"), None], vec![0, 3]);
        let r = run(&t, b.clone()).unwrap();
        assert_eq!(strings(&r, "name1"), vec![Some("a".to_string()), None]);
        assert_eq!(kinds(&r), ["+I", "-D"]);
        // Zero-copy: the copy is the very same array.
        assert!(Arc::ptr_eq(r.data.column(2), b.data.column(1)));
    }

    #[test]
    fn fields_form_copies_in_order_and_replaces_same_names() {
        let v = json!({"fields": {"id_1": "id", "name2": "name", "id": "name"}});
        let t = create(&CopyTransformFactory, v, &[people()]).unwrap();
        let out = &t.output_tables()[0];
        let names: Vec<&str> = out
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["id", "name", "id_1", "name2"]);
        // `id = name` replaces id, taking name's type.
        assert_eq!(out.schema.field(0).data_type(), &DataType::Utf8);
        let r = run(&t, people_batch(vec![Some(7)], vec![Some("x")], vec![0])).unwrap();
        assert_eq!(strings(&r, "id"), vec![Some("x".to_string())]);
        let id1 = r
            .data
            .column(2)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        assert_eq!(id1.value(0), 7);
    }

    #[test]
    fn nested_rows_are_copied_whole() {
        let inner = Fields::from(vec![Field::new("c_int", DataType::Int32, true)]);
        let t = table("fake", &[("c_row", DataType::Struct(inner.clone()))]);
        let tr = create(
            &CopyTransformFactory,
            json!({"fields": {"c_row_1": "c_row"}}),
            std::slice::from_ref(&t),
        )
        .unwrap();
        let s = StructArray::new(
            inner,
            vec![Arc::new(Int32Array::from(vec![Some(5), None]))],
            None,
        );
        let data = RecordBatch::try_new(t.schema.clone(), vec![Arc::new(s)]).unwrap();
        let r = run(&tr, ChangeBatch::inserts(t.name.clone(), data)).unwrap();
        let copy = r
            .data
            .column_by_name("c_row_1")
            .unwrap()
            .as_any()
            .downcast_ref::<StructArray>()
            .unwrap();
        let c = copy
            .column(0)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        assert_eq!(c.value(0), 5);
        assert!(c.is_null(1));
    }

    #[test]
    fn unknown_source_field_lists_available_fields() {
        let e = create_err(
            &CopyTransformFactory,
            json!({"fields": {"x": "nmae"}}),
            &[people()],
        );
        assert_eq!(
            e,
            "job.conf:3: transform Copy: option 'fields.x': field 'nmae' not found in table 't' (available fields: id, name)"
        );
        let e = create_err(
            &CopyTransformFactory,
            json!({"src_field": "nope", "dest_field": "x"}),
            &[people()],
        );
        assert!(
            e.contains("option 'src_field': field 'nope' not found"),
            "{e}"
        );
    }

    #[test]
    fn incomplete_or_missing_options_are_reported() {
        let e = create_err(
            &CopyTransformFactory,
            json!({"src_field": "name"}),
            &[people()],
        );
        assert!(
            e.contains("option 'dest_field': is required when src_field is set"),
            "{e}"
        );
        let e = create_err(&CopyTransformFactory, json!({}), &[people()]);
        assert!(e.contains("no copy configured"), "{e}");
        let e = create_err(
            &CopyTransformFactory,
            json!({"fields": {"a": "id"}, "src_feild": "x"}),
            &[people()],
        );
        assert!(
            e.contains("unknown option") && e.contains("src_field"),
            "{e}"
        );
    }

    #[test]
    fn applies_to_each_input_table() {
        let a = people();
        let b = table("u", &[("name", DataType::Utf8)]);
        let t = create(
            &CopyTransformFactory,
            json!({"src_field": "name", "dest_field": "n2"}),
            &[a, b],
        )
        .unwrap();
        let outs = t.output_tables();
        assert_eq!(outs.len(), 2);
        assert_eq!(outs[1].name.as_ref(), "u");
        assert_eq!(outs[1].schema.fields().len(), 2);
    }
}
