//! `Replace`: replaces text in one field (SeaTunnel's `ReplaceTransform`).
//!
//! `pattern` is literal text (every occurrence replaced, as Java's `String.replace`) unless
//! `is_regex = true`; then it is a regular expression, `replace_first` (required then)
//! chooses between the first match and all, and `replacement` uses Java's syntax (`$1`,
//! `${name}`, `\$`). The field keeps its place and type; a non-text field is replaced in
//! its text form and converted back, failing on a result that is not of its type.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray, StringBuilder};
use arrow::compute::{can_cast_types, cast, cast_with_options, CastOptions};
use arrow::datatypes::DataType;
use ferry_api::types::type_name;
use ferry_api::{
    ChangeBatch, FerryError, JobContext, OptionSpec, Options, Result, TableSchema, Transform,
    TransformFactory,
};
use regex::Regex;

use crate::common::{compile_regex, find_field, java_replacement, PerTable, Placement, TablePlan};

ferry_api::declare_options! {
    /// The `Replace` transform's options.
    struct ReplaceOptions => SPECS {
        /// The field whose text is replaced.
        field: String = "replace_field", required;
        /// The text (or, with is_regex, the regular expression) to replace.
        pattern: String = "pattern", required;
        /// What replaces it ($1 refers to a regex group).
        replacement: String = "replacement", required;
        /// Whether pattern is a regular expression.
        is_regex: bool = "is_regex", default false;
        /// With is_regex: replace only the first match (required when is_regex = true).
        first: bool = "replace_first", optional;
    }
}

/// Factory of the `Replace` transform.
pub struct ReplaceTransformFactory;

/// How the text is replaced.
#[derive(Debug)]
enum Op {
    /// Every occurrence of literal text.
    Literal {
        pattern: String,
        replacement: String,
    },
    /// Matches of a regex; the replacement is in the `regex` crate's syntax.
    Regex {
        re: Regex,
        replacement: String,
        first: bool,
    },
}

impl Op {
    fn apply<'a>(&self, s: &'a str) -> Cow<'a, str> {
        match self {
            Op::Literal {
                pattern,
                replacement,
            } => {
                if s.contains(pattern.as_str()) {
                    Cow::Owned(s.replace(pattern.as_str(), replacement))
                } else {
                    Cow::Borrowed(s)
                }
            }
            Op::Regex {
                re,
                replacement,
                first: true,
            } => re.replacen(s, 1, replacement.as_str()),
            Op::Regex {
                re,
                replacement,
                first: false,
            } => re.replace_all(s, replacement.as_str()),
        }
    }

    /// Replaces in every value of a text column; nulls stay null.
    fn apply_column(&self, input: &StringArray) -> StringArray {
        let mut out = StringBuilder::with_capacity(input.len(), input.value_data().len());
        for v in input.iter() {
            match v {
                Some(s) => out.append_value(self.apply(s)),
                None => out.append_null(),
            }
        }
        out.finish()
    }
}

impl TransformFactory for ReplaceTransformFactory {
    fn name(&self) -> &'static str {
        "Replace"
    }

    fn description(&self) -> &'static str {
        "Replaces text (literal or regex matches) in one field."
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
        let ReplaceOptions {
            field,
            pattern,
            replacement,
            is_regex,
            first,
        } = ReplaceOptions::read(options)?;
        options.finish(SPECS)?;
        let op = if is_regex {
            let first = first.ok_or_else(|| {
                options.error("replace_first", "is required when is_regex = true")
            })?;
            let re = compile_regex(options, "pattern", &pattern)?;
            let replacement =
                java_replacement(&replacement, re.captures_len() - 1).map_err(|e| {
                    options.error(
                        "replacement",
                        format!("invalid replacement '{replacement}': {e}"),
                    )
                })?;
            Op::Regex {
                re,
                replacement,
                first,
            }
        } else {
            Op::Literal {
                pattern,
                replacement,
            }
        };
        let op = Arc::new(op);
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            let index = find_field(options, "replace_field", table, &field)?;
            let f = table.schema.field(index);
            let dt = f.data_type().clone();
            if dt != DataType::Utf8
                && !(can_cast_types(&dt, &DataType::Utf8) && can_cast_types(&DataType::Utf8, &dt))
            {
                return Err(options.error(
                    "replace_field",
                    format!("field '{field}' of table '{}' is of type {}, which has no text form to replace in", table.name, type_name(&dt)),
                ));
            }
            let placement = Placement::new(&table.schema, vec![f.clone()]);
            let output = table.derive(table.name.clone(), placement.schema.clone());
            plans.push((
                table.name.clone(),
                Arc::new(ReplacePlan {
                    output,
                    placement,
                    index,
                    field: field.clone(),
                    op: op.clone(),
                }),
            ));
        }
        Ok(Arc::new(PerTable::new("Replace", plans)))
    }
}

#[derive(Debug)]
struct ReplacePlan {
    output: TableSchema,
    placement: Placement,
    index: usize,
    field: String,
    op: Arc<Op>,
}

impl TablePlan for ReplacePlan {
    fn output(&self) -> Option<TableSchema> {
        Some(self.output.clone())
    }

    fn apply(&self, batch: ChangeBatch) -> Result<Option<ChangeBatch>> {
        let column = batch.data.column(self.index);
        let dt = column.data_type().clone();
        let text = if dt == DataType::Utf8 {
            column.clone()
        } else {
            cast(column, &DataType::Utf8)?
        };
        let strings = text.as_any().downcast_ref::<StringArray>().ok_or_else(|| {
            FerryError::internal(format!(
                "Replace: field '{}' did not convert to text",
                self.field
            ))
        })?;
        let replaced: ArrayRef = Arc::new(self.op.apply_column(strings));
        let value = if dt == DataType::Utf8 {
            replaced
        } else {
            let strict = CastOptions {
                safe: false,
                ..Default::default()
            };
            cast_with_options(&replaced, &dt, &strict).map_err(|e| {
                FerryError::data(
                    "transform Replace",
                    format!(
                        "field '{}' of type {}: a replaced value is not of that type: {e}",
                        self.field,
                        type_name(&dt)
                    ),
                )
            })?
        };
        let data = self.placement.assemble(&batch.data, vec![value])?;
        Ok(Some(batch.with_data(data)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use arrow::array::Int32Array;
    use serde_json::json;

    fn replace(v: serde_json::Value, names: Vec<Option<&str>>) -> Vec<Option<String>> {
        let t = create(&ReplaceTransformFactory, v, &[people()]).unwrap();
        let n = names.len();
        let r = run(&t, people_batch(vec![Some(1); n], names, vec![0; n])).unwrap();
        strings(&r, "name")
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn conformance_regex_replace_first_of_everything() {
        let v = json!({"replace_field": "name", "pattern": ".+", "replacement": "b", "is_regex": true, "replace_first": true});
        assert_eq!(
            replace(v, vec![Some("hello"), None, Some("")]),
            vec![s("b"), None, s("")]
        );
    }

    #[test]
    fn literal_replaces_every_occurrence_and_ignores_regex_syntax() {
        let v = json!({"replace_field": "name", "pattern": "a.", "replacement": "$x"});
        assert_eq!(
            replace(v, vec![Some("a.ba.a"), Some("ab")]),
            vec![s("$xb$xa"), s("ab")]
        );
    }

    #[test]
    fn regex_all_or_first_with_java_group_references() {
        let all = json!({"replace_field": "name", "pattern": "(\\d)", "replacement": "<$1>", "is_regex": true, "replace_first": false});
        assert_eq!(replace(all, vec![Some("a1b2")]), vec![s("a<1>b<2>")]);
        let first = json!({"replace_field": "name", "pattern": "\\d", "replacement": "\\$", "is_regex": true, "replace_first": true});
        assert_eq!(replace(first, vec![Some("a1b2")]), vec![s("a$b2")]);
    }

    #[test]
    fn keeps_place_type_and_kinds() {
        let v = json!({"replace_field": "name", "pattern": "a", "replacement": "b"});
        let t = create(&ReplaceTransformFactory, v, &[people()]).unwrap();
        assert_eq!(t.output_tables()[0], people());
        let r = run(
            &t,
            people_batch(
                vec![Some(1), Some(2)],
                vec![Some("a"), Some("c")],
                vec![1, 2],
            ),
        )
        .unwrap();
        assert_eq!(names(&r), ["id", "name"]);
        assert_eq!(kinds(&r), ["-U", "+U"]);
    }

    #[test]
    fn non_text_field_round_trips_through_text() {
        let v = json!({"replace_field": "id", "pattern": "1", "replacement": "7"});
        let t = create(&ReplaceTransformFactory, v, &[people()]).unwrap();
        let r = run(
            &t,
            people_batch(
                vec![Some(11), None, Some(2)],
                vec![None, None, None],
                vec![0, 0, 0],
            ),
        )
        .unwrap();
        let ids = r
            .data
            .column(0)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        assert_eq!(
            ids.iter().collect::<Vec<_>>(),
            vec![Some(77), None, Some(2)]
        );

        let bad = json!({"replace_field": "id", "pattern": "1", "replacement": "x"});
        let t = create(&ReplaceTransformFactory, bad, &[people()]).unwrap();
        let e = t
            .create_instance()
            .unwrap()
            .transform(people_batch(vec![Some(1)], vec![None], vec![0]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("field 'id' of type int: a replaced value is not of that type"),
            "{e}"
        );
    }

    #[test]
    fn option_errors() {
        let e = create_err(
            &ReplaceTransformFactory,
            json!({"replace_field": "nam", "pattern": "a", "replacement": "b"}),
            &[people()],
        );
        assert_eq!(e, "job.conf:3: transform Replace: option 'replace_field': field 'nam' not found in table 't' (available fields: id, name)");
        let e = create_err(
            &ReplaceTransformFactory,
            json!({"replace_field": "name", "pattern": "a", "replacement": "b", "is_regex": true}),
            &[people()],
        );
        assert!(
            e.contains("option 'replace_first': is required when is_regex = true"),
            "{e}"
        );
        let e = create_err(
            &ReplaceTransformFactory,
            json!({"replace_field": "name", "pattern": "(", "replacement": "b", "is_regex": true, "replace_first": true}),
            &[people()],
        );
        assert!(
            e.contains("option 'pattern': invalid regular expression '('"),
            "{e}"
        );
        let e = create_err(
            &ReplaceTransformFactory,
            json!({"replace_field": "name", "pattern": "a", "replacement": "$2", "is_regex": true, "replace_first": true}),
            &[people()],
        );
        assert!(
            e.contains("option 'replacement': invalid replacement '$2': no group 2"),
            "{e}"
        );
        let e = create_err(
            &ReplaceTransformFactory,
            json!({"replace_field": "name", "replacement": "b"}),
            &[people()],
        );
        assert!(
            e.contains("option 'pattern': is required but not set"),
            "{e}"
        );
    }
}
