//! `Filter`: keeps or drops fields (SeaTunnel's `FilterFieldTransform`).
//!
//! Exactly one of `include_fields` (legacy spelling `fields`) or `exclude_fields` is set.
//! `include_fields` keeps the listed fields in the listed order; `exclude_fields` keeps
//! every other field in input order. Columns are shared, not copied.

use std::sync::Arc;

use ferry_api::{
    JobContext, OptionSpec, Options, Result, TableSchema, Transform, TransformFactory,
};

use crate::common::{missing_fields, PerTable, ProjectPlan, TablePlan};

ferry_api::declare_options! {
    /// The `Filter` transform's options.
    struct FilterOptions => SPECS {
        /// Fields to keep, in output order (legacy spelling: fields).
        include: Vec<String> = "include_fields", optional;
        /// Legacy spelling of include_fields.
        legacy_include: Vec<String> = "fields", optional;
        /// Fields to drop; the others are kept in input order.
        exclude: Vec<String> = "exclude_fields", optional;
    }
}

/// Factory of the `Filter` transform.
pub struct FilterTransformFactory;

#[derive(Debug)]
enum Mode {
    Include(String, Vec<String>),
    Exclude(Vec<String>),
}

impl TransformFactory for FilterTransformFactory {
    fn name(&self) -> &'static str {
        "Filter"
    }

    fn description(&self) -> &'static str {
        "Keeps the listed fields (include_fields) or drops them (exclude_fields)."
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
        // `include_fields` takes precedence over its fallback key `fields`, as in SeaTunnel.
        let o = FilterOptions::read(options)?;
        let include = match (o.include, o.legacy_include) {
            (Some(list), _) => Some(("include_fields", list)),
            (None, legacy) => legacy.map(|l| ("fields", l)),
        };
        let exclude = o.exclude;
        options.finish(SPECS)?;
        let mode = match (include, exclude) {
            (Some((key, list)), None) => Mode::Include(key.to_string(), list),
            (None, Some(list)) => Mode::Exclude(list),
            (Some((key, _)), Some(_)) => {
                return Err(options.location().error_with_hint(
                    "exclude_fields",
                    format!("cannot be set together with {key}"),
                    "set only one of include_fields and exclude_fields",
                ))
            }
            (None, None) => return Err(options.location().error_with_hint(
                "include_fields",
                "no fields to keep or drop",
                "set include_fields (the fields to keep) or exclude_fields (the fields to drop)",
            )),
        };
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            plans.push((table.name.clone(), Arc::new(plan(options, table, &mode)?)));
        }
        Ok(Arc::new(PerTable::new("Filter", plans)))
    }
}

fn plan(options: &Options, table: &TableSchema, mode: &Mode) -> Result<ProjectPlan> {
    let (key, listed) = match mode {
        Mode::Include(key, l) => (key.as_str(), l),
        Mode::Exclude(l) => ("exclude_fields", l),
    };
    let missing: Vec<&str> = listed
        .iter()
        .map(String::as_str)
        .filter(|f| table.schema.index_of(f).is_err())
        .collect();
    if !missing.is_empty() {
        return Err(missing_fields(options, key, table, &missing));
    }
    let indices: Vec<usize> = match mode {
        Mode::Include(_, list) => list
            .iter()
            .filter_map(|f| table.schema.index_of(f).ok())
            .collect(),
        Mode::Exclude(list) => table
            .schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| !list.iter().any(|x| x == f.name()))
            .map(|(i, _)| i)
            .collect(),
    };
    Ok(ProjectPlan::select(table, indices))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use arrow::datatypes::DataType;
    use serde_json::json;

    fn wide() -> TableSchema {
        table(
            "fake",
            &[
                ("id", DataType::Int32),
                ("name", DataType::Utf8),
                ("age", DataType::Int32),
            ],
        )
    }

    #[test]
    fn legacy_fields_keeps_listed_fields_in_listed_order() {
        let t = create(
            &FilterTransformFactory,
            json!({"fields": ["age", "name"]}),
            &[wide()],
        )
        .unwrap();
        let out = &t.output_tables()[0];
        let names: Vec<&str> = out
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["age", "name"]);
        assert_eq!(out.schema.field(0).data_type(), &DataType::Int32);
    }

    #[test]
    fn include_keeps_columns_zero_copy_with_kinds() {
        let t = create(
            &FilterTransformFactory,
            json!({"include_fields": ["name"]}),
            &[people()],
        )
        .unwrap();
        let b = people_batch(vec![Some(1), Some(2)], vec![None, Some("b")], vec![1, 2]);
        let r = run(&t, b.clone()).unwrap();
        assert_eq!(names(&r), ["name"]);
        assert_eq!(strings(&r, "name"), vec![None, Some("b".to_string())]);
        assert_eq!(kinds(&r), ["-U", "+U"]);
        assert!(Arc::ptr_eq(r.data.column(0), b.data.column(1)));
    }

    #[test]
    fn exclude_keeps_the_rest_in_input_order() {
        let t = create(
            &FilterTransformFactory,
            json!({"exclude_fields": ["name"]}),
            &[wide()],
        )
        .unwrap();
        let names: Vec<String> = t.output_tables()[0]
            .schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["id", "age"]);
    }

    #[test]
    fn excluding_everything_leaves_rows_without_columns() {
        let t = create(
            &FilterTransformFactory,
            json!({"exclude_fields": ["id", "name"]}),
            &[people()],
        )
        .unwrap();
        let r = run(&t, people_batch(vec![Some(1)], vec![Some("a")], vec![0])).unwrap();
        assert_eq!(r.num_rows(), 1);
        assert_eq!(r.data.num_columns(), 0);
    }

    #[test]
    fn unknown_fields_are_all_listed() {
        let e = create_err(
            &FilterTransformFactory,
            json!({"include_fields": ["nmae", "id", "agee"]}),
            &[people()],
        );
        assert_eq!(
            e,
            "job.conf:3: transform Filter: option 'include_fields': fields 'nmae', 'agee' not found in table 't' (available fields: id, name)"
        );
    }

    #[test]
    fn include_and_exclude_are_mutually_exclusive_and_one_is_required() {
        let e = create_err(
            &FilterTransformFactory,
            json!({"include_fields": ["id"], "exclude_fields": ["name"]}),
            &[people()],
        );
        assert!(
            e.contains("option 'exclude_fields': cannot be set together with include_fields"),
            "{e}"
        );
        let e = create_err(&FilterTransformFactory, json!({}), &[people()]);
        assert!(e.contains("no fields to keep or drop"), "{e}");
    }
}
