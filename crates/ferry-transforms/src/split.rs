//! `Split`: splits one field's text into new text fields (SeaTunnel's `SplitTransform`).
//!
//! As SeaTunnel, which calls Java's `String.split(separator, n)`: `separator` is a regular
//! expression, the text is split at most `n - 1` times for `n` output fields (the last
//! part keeps the rest), missing parts are null, and a null field gives all nulls. A
//! non-text field is split in its text form (`age = 41` split on `"1"` gives `"4"`, `""`).
//! The output fields are `string`s, appended (or replacing fields of the same name).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray, StringBuilder};
use arrow::compute::{can_cast_types, cast};
use arrow::datatypes::{DataType, Field};
use ferry_api::types::type_name;
use ferry_api::{
    ChangeBatch, FerryError, JobContext, OptionSpec, Options, Result, TableSchema, Transform,
    TransformFactory,
};
use regex::Regex;

use crate::common::{compile_regex, find_field, java_split, PerTable, Placement, TablePlan};

ferry_api::declare_options! {
    /// The `Split` transform's options.
    struct SplitOptions => SPECS {
        /// Where to split: a regular expression, as in Java's String.split.
        separator: String = "separator", required;
        /// The field to split.
        field: String = "split_field", required;
        /// Names of the string fields that receive the parts, in order.
        outputs: Vec<String> = "output_fields", required;
    }
}

/// Factory of the `Split` transform.
pub struct SplitTransformFactory;

impl TransformFactory for SplitTransformFactory {
    fn name(&self) -> &'static str {
        "Split"
    }

    fn description(&self) -> &'static str {
        "Splits a field's text on a separator into new string fields."
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
        let SplitOptions {
            separator,
            field,
            outputs,
        } = SplitOptions::read(options)?;
        options.finish(SPECS)?;
        if outputs.is_empty() {
            return Err(options.error("output_fields", "must name at least one field"));
        }
        let re = Arc::new(compile_regex(options, "separator", &separator)?);
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            let index = find_field(options, "split_field", table, &field)?;
            let dt = table.schema.field(index).data_type();
            if dt != &DataType::Utf8 && !can_cast_types(dt, &DataType::Utf8) {
                return Err(options.error(
                    "split_field",
                    format!("field '{field}' of table '{}' is of type {}, which has no text form to split", table.name, type_name(dt)),
                ));
            }
            let fields = outputs
                .iter()
                .map(|n| Field::new(n, DataType::Utf8, true))
                .collect();
            let placement = Placement::new(&table.schema, fields);
            let output = table.derive(table.name.clone(), placement.schema.clone());
            plans.push((
                table.name.clone(),
                Arc::new(SplitPlan {
                    output,
                    placement,
                    index,
                    parts: outputs.len(),
                    field: field.clone(),
                    re: re.clone(),
                }),
            ));
        }
        Ok(Arc::new(PerTable::new("Split", plans)))
    }
}

#[derive(Debug)]
struct SplitPlan {
    output: TableSchema,
    placement: Placement,
    index: usize,
    parts: usize,
    field: String,
    re: Arc<Regex>,
}

impl TablePlan for SplitPlan {
    fn output(&self) -> Option<TableSchema> {
        Some(self.output.clone())
    }

    fn apply(&self, batch: ChangeBatch) -> Result<Option<ChangeBatch>> {
        let column = batch.data.column(self.index);
        let text = if column.data_type() == &DataType::Utf8 {
            column.clone()
        } else {
            cast(column, &DataType::Utf8)?
        };
        let strings = text.as_any().downcast_ref::<StringArray>().ok_or_else(|| {
            FerryError::internal(format!(
                "Split: field '{}' did not convert to text",
                self.field
            ))
        })?;
        let rows = strings.len();
        let mut builders: Vec<StringBuilder> = (0..self.parts)
            .map(|_| {
                StringBuilder::with_capacity(rows, strings.value_data().len() / self.parts.max(1))
            })
            .collect();
        // Reused for every row: the byte ranges of its parts.
        let mut ranges = Vec::with_capacity(self.parts);
        for v in strings.iter() {
            match v {
                None => builders.iter_mut().for_each(|b| b.append_null()),
                Some(s) => {
                    java_split(&self.re, s, self.parts, &mut ranges);
                    for (k, b) in builders.iter_mut().enumerate() {
                        match ranges.get(k) {
                            Some(&(a, e)) => b.append_value(&s[a..e]),
                            None => b.append_null(),
                        }
                    }
                }
            }
        }
        let values: Vec<ArrayRef> = builders
            .into_iter()
            .map(|mut b| Arc::new(b.finish()) as ArrayRef)
            .collect();
        let data = self.placement.assemble(&batch.data, values)?;
        Ok(Some(batch.with_data(data)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use serde_json::json;

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn conformance_split_of_an_int_field_on_1() {
        let input = table("fake", &[("id", DataType::Int32), ("age", DataType::Int32)]);
        let t = create(
            &SplitTransformFactory,
            json!({"separator": "1", "split_field": "age", "output_fields": ["f1", "f2"]}),
            std::slice::from_ref(&input),
        )
        .unwrap();
        let out = &t.output_tables()[0];
        let names: Vec<&str> = out
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["id", "age", "f1", "f2"]);
        assert_eq!(out.schema.field(3).data_type(), &DataType::Utf8);
        let data = arrow::record_batch::RecordBatch::try_new(
            input.schema.clone(),
            vec![
                Arc::new(arrow::array::Int32Array::from(vec![1, 2, 3, 4])),
                Arc::new(arrow::array::Int32Array::from(vec![
                    Some(41),
                    Some(11),
                    Some(5),
                    None,
                ])),
            ],
        )
        .unwrap();
        let r = run(
            &t,
            ChangeBatch::with_kinds(
                input.name.clone(),
                data,
                arrow::array::UInt8Array::from(vec![0, 3, 0, 2]),
            ),
        )
        .unwrap();
        assert_eq!(strings(&r, "f1"), vec![s("4"), s(""), s("5"), None]);
        assert_eq!(strings(&r, "f2"), vec![s(""), s("1"), None, None]);
        assert_eq!(kinds(&r), ["+I", "-D", "+I", "+U"]);
    }

    #[test]
    fn last_part_keeps_the_rest_and_separator_is_a_regex() {
        let t = create(
            &SplitTransformFactory,
            json!({"separator": "[,;]", "split_field": "name", "output_fields": ["a", "b"]}),
            &[people()],
        )
        .unwrap();
        let r = run(
            &t,
            people_batch(
                vec![Some(1), Some(2)],
                vec![Some("x;y,z"), Some("")],
                vec![0, 0],
            ),
        )
        .unwrap();
        assert_eq!(strings(&r, "a"), vec![s("x"), s("")]);
        assert_eq!(strings(&r, "b"), vec![s("y,z"), None]);
        // The split field itself is kept.
        assert_eq!(strings(&r, "name"), vec![s("x;y,z"), s("")]);
    }

    #[test]
    fn an_output_named_like_an_input_replaces_it_as_text() {
        let t = create(
            &SplitTransformFactory,
            json!({"separator": " ", "split_field": "name", "output_fields": ["id"]}),
            &[people()],
        )
        .unwrap();
        let out = &t.output_tables()[0];
        assert_eq!(out.schema.fields().len(), 2);
        assert_eq!(out.schema.field(0).data_type(), &DataType::Utf8);
        let r = run(&t, people_batch(vec![Some(1)], vec![Some("a b")], vec![0])).unwrap();
        assert_eq!(strings(&r, "id"), vec![s("a b")]);
    }

    #[test]
    fn option_errors() {
        let e = create_err(
            &SplitTransformFactory,
            json!({"separator": ",", "split_field": "nme", "output_fields": ["a"]}),
            &[people()],
        );
        assert_eq!(e, "job.conf:3: transform Split: option 'split_field': field 'nme' not found in table 't' (available fields: id, name)");
        let e = create_err(
            &SplitTransformFactory,
            json!({"separator": "(", "split_field": "name", "output_fields": ["a"]}),
            &[people()],
        );
        assert!(
            e.contains("option 'separator': invalid regular expression"),
            "{e}"
        );
        let e = create_err(
            &SplitTransformFactory,
            json!({"separator": ",", "split_field": "name"}),
            &[people()],
        );
        assert!(
            e.contains("option 'output_fields': is required but not set"),
            "{e}"
        );
        let e = create_err(
            &SplitTransformFactory,
            json!({"separator": ",", "split_field": "name", "output_fields": []}),
            &[people()],
        );
        assert!(e.contains("must name at least one field"), "{e}");
    }
}
