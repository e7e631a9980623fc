//! `FilterRowKind`: keeps or drops rows by their kind (SeaTunnel's `FilterRowKindTransform`).
//!
//! Exactly one of `include_kinds` and `exclude_kinds` is set, each a non-empty list of
//! `INSERT`, `UPDATE_BEFORE`, `UPDATE_AFTER`, `DELETE`. The schema is unchanged; a batch
//! whose rows are all kept passes through untouched.

use std::sync::Arc;

use arrow::array::BooleanArray;
use arrow::buffer::BooleanBuffer;
use ferry_api::{
    ChangeBatch, JobContext, OptionSpec, Options, Result, RowKind, TableSchema, Transform,
    TransformFactory,
};

use crate::common::{PerTable, TablePlan};

const KIND_NAMES: &[&str] = &["INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE"];

ferry_api::declare_options! {
    /// The `FilterRowKind` transform's options.
    struct FilterRowKindOptions => SPECS {
        /// Row kinds to keep (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE).
        include: Vec<String> = "include_kinds", optional;
        /// Row kinds to drop (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE).
        exclude: Vec<String> = "exclude_kinds", optional;
    }
}

/// Factory of the `FilterRowKind` transform.
pub struct FilterRowKindTransformFactory;

impl TransformFactory for FilterRowKindTransformFactory {
    fn name(&self) -> &'static str {
        "FilterRowKind"
    }

    fn description(&self) -> &'static str {
        "Keeps (include_kinds) or drops (exclude_kinds) rows by row kind."
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
        let o = FilterRowKindOptions::read(options)?;
        options.finish(SPECS)?;
        let include = o.include.filter(|l| !l.is_empty());
        let exclude = o.exclude.filter(|l| !l.is_empty());
        let (key, list, keep_listed) = match (include, exclude) {
            (Some(l), None) => ("include_kinds", l, true),
            (None, Some(l)) => ("exclude_kinds", l, false),
            (Some(_), Some(_)) => {
                return Err(options.location().error_with_hint(
                    "exclude_kinds",
                    "include_kinds and exclude_kinds are mutually exclusive",
                    "set only one of them",
                ))
            }
            (None, None) => {
                return Err(options.location().error_with_hint(
                    "include_kinds",
                    "no row kinds to keep or drop",
                    "set include_kinds or exclude_kinds, e.g. exclude_kinds = [\"DELETE\"]",
                ))
            }
        };
        // keep[code] for each row kind code; a kind not listed gets the opposite answer.
        let mut keep = [!keep_listed; 4];
        for (i, name) in list.iter().enumerate() {
            let kind = RowKind::ALL
                .into_iter()
                .find(|k| k.name().eq_ignore_ascii_case(name.trim()))
                .ok_or_else(|| {
                    options.location().error_with_hint(
                        &format!("{key}[{i}]"),
                        format!("unknown row kind '{name}'"),
                        format!("valid row kinds: {}", KIND_NAMES.join(", ")),
                    )
                })?;
            keep[kind as usize] = keep_listed;
        }
        let mut plans: Vec<(Arc<str>, Arc<dyn TablePlan>)> = Vec::with_capacity(input.len());
        for table in input {
            plans.push((
                table.name.clone(),
                Arc::new(KindFilter {
                    output: table.clone(),
                    keep,
                }),
            ));
        }
        Ok(Arc::new(PerTable::new("FilterRowKind", plans)))
    }
}

#[derive(Debug)]
struct KindFilter {
    output: TableSchema,
    keep: [bool; 4],
}

impl TablePlan for KindFilter {
    fn output(&self) -> Option<TableSchema> {
        Some(self.output.clone())
    }

    fn apply(&self, batch: ChangeBatch) -> Result<Option<ChangeBatch>> {
        let Some(kinds) = &batch.kinds else {
            // No kinds: every row is an insert.
            let keep = self.keep[RowKind::Insert as usize];
            return Ok(if keep && batch.num_rows() > 0 {
                Some(batch)
            } else {
                None
            });
        };
        let keep = self.keep;
        let codes = kinds.values();
        // Codes outside the known range read as inserts, as ChangeBatch::kind does.
        let mask = BooleanBuffer::collect_bool(codes.len(), |i| {
            keep.get(codes[i] as usize).copied().unwrap_or(keep[0])
        });
        let kept = mask.count_set_bits();
        if kept == 0 {
            return Ok(None);
        }
        if kept == batch.num_rows() {
            return Ok(Some(batch));
        }
        Ok(Some(batch.filter(&BooleanArray::new(mask, None))?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::*;
    use serde_json::json;

    fn batch() -> ChangeBatch {
        people_batch(
            vec![Some(1), Some(2), Some(3), Some(4), None],
            vec![Some("i"), Some("ub"), Some("ua"), Some("d"), None],
            vec![0, 1, 2, 3, 0],
        )
    }

    #[test]
    fn exclude_delete_drops_deletes_only() {
        let t = create(
            &FilterRowKindTransformFactory,
            json!({"exclude_kinds": ["DELETE"]}),
            &[people()],
        )
        .unwrap();
        assert_eq!(t.output_tables(), vec![people()]);
        let r = run(&t, batch()).unwrap();
        assert_eq!(kinds(&r), ["+I", "-U", "+U", "+I"]);
        assert_eq!(
            strings(&r, "name"),
            vec![Some("i".into()), Some("ub".into()), Some("ua".into()), None]
        );
    }

    #[test]
    fn include_insert_keeps_inserts_only() {
        let t = create(
            &FilterRowKindTransformFactory,
            json!({"include_kinds": ["insert"]}),
            &[people()],
        )
        .unwrap();
        let r = run(&t, batch()).unwrap();
        assert_eq!(kinds(&r), ["+I", "+I"]);
        assert_eq!(strings(&r, "name"), vec![Some("i".into()), None]);
    }

    #[test]
    fn insert_only_batches_pass_whole_or_not_at_all() {
        let inserts = people_batch(vec![Some(1)], vec![Some("a")], vec![0]);
        assert!(inserts.kinds.is_none());
        let t = create(
            &FilterRowKindTransformFactory,
            json!({"include_kinds": ["INSERT"]}),
            &[people()],
        )
        .unwrap();
        let r = run(&t, inserts.clone()).unwrap();
        assert!(Arc::ptr_eq(r.data.column(0), inserts.data.column(0)));
        let t = create(
            &FilterRowKindTransformFactory,
            json!({"exclude_kinds": ["INSERT"]}),
            &[people()],
        )
        .unwrap();
        assert!(run(&t, inserts).is_none());
    }

    #[test]
    fn option_errors() {
        let e = create_err(
            &FilterRowKindTransformFactory,
            json!({"include_kinds": ["INSERT"], "exclude_kinds": ["DELETE"]}),
            &[people()],
        );
        assert!(
            e.contains("include_kinds and exclude_kinds are mutually exclusive"),
            "{e}"
        );
        let e = create_err(
            &FilterRowKindTransformFactory,
            json!({"include_kinds": []}),
            &[people()],
        );
        assert!(e.contains("no row kinds to keep or drop"), "{e}");
        let e = create_err(
            &FilterRowKindTransformFactory,
            json!({"exclude_kinds": ["DELETED"]}),
            &[people()],
        );
        assert_eq!(
            e,
            "job.conf:3: transform FilterRowKind: option 'exclude_kinds[0]': unknown row kind 'DELETED' (valid row kinds: INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE)"
        );
    }
}
