//! SeaTunnel's row transforms on Arrow batches, as [`ferry_api::TransformFactory`]s, with
//! SeaTunnel's option names and semantics.
//!
//! Each transform applies to every one of its input tables and knows its output schemas
//! when it is created; its work is column-wise on Arrow arrays, and transforms that only
//! reorder or rename columns share the input arrays instead of copying them. Row kinds are
//! carried through (FilterRowKind filters on them, RowKindExtractor turns them into a field).

mod common;
pub mod copy;
pub mod field_mapper;
pub mod field_rename;
pub mod filter;
pub mod filter_row_kind;
pub mod json_path;
mod naming;
pub mod replace;
pub mod row_kind_extractor;
pub mod split;
pub mod table_filter;
pub mod table_merge;
pub mod table_rename;

pub use copy::CopyTransformFactory;
pub use field_mapper::FieldMapperTransformFactory;
pub use field_rename::FieldRenameTransformFactory;
pub use filter::FilterTransformFactory;
pub use filter_row_kind::FilterRowKindTransformFactory;
pub use json_path::JsonPathTransformFactory;
pub use replace::ReplaceTransformFactory;
pub use row_kind_extractor::RowKindExtractorTransformFactory;
pub use split::SplitTransformFactory;
pub use table_filter::TableFilterTransformFactory;
pub use table_merge::TableMergeTransformFactory;
pub use table_rename::TableRenameTransformFactory;

#[cfg(test)]
mod option_tests {
    use ferry_api::TransformFactory;

    /// Every transform's option list as `ferry connectors` prints it: no name twice,
    /// every default a value of its kind.
    #[test]
    fn option_lists_are_what_ferry_connectors_prints() {
        let all: [&dyn TransformFactory; 12] = [
            &super::CopyTransformFactory,
            &super::FieldMapperTransformFactory,
            &super::FieldRenameTransformFactory,
            &super::FilterTransformFactory,
            &super::FilterRowKindTransformFactory,
            &super::JsonPathTransformFactory,
            &super::ReplaceTransformFactory,
            &super::RowKindExtractorTransformFactory,
            &super::SplitTransformFactory,
            &super::TableFilterTransformFactory,
            &super::TableMergeTransformFactory,
            &super::TableRenameTransformFactory,
        ];
        for f in all {
            if let Err(e) = ferry_api::declare::check_specs(f.options(), &[]) {
                panic!("{}: {e}", f.name());
            }
        }
    }
}
