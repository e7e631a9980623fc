//! The composition root: every connector and transform Ferry ships, one line each.
//! Engines receive this registry and know no plugin by name.

use ferry_api::Registry;

/// All built-in plugins.
pub fn builtin() -> Registry {
    let r = Registry::new()
        .source(ferry_connector_fake::FakeSourceFactory)
        .source(ferry_connector_file::LocalFileSourceFactory)
        .sink(ferry_connector_file::LocalFileSinkFactory)
        .sink(ferry_connector_assert::AssertSinkFactory)
        .sink(ferry_connector_console::ConsoleSinkFactory)
        .sink(ferry_connector_console::BlackholeSinkFactory)
        .transform(ferry_transforms::CopyTransformFactory)
        .transform(ferry_transforms::FilterTransformFactory)
        .transform(ferry_transforms::FieldMapperTransformFactory)
        .transform(ferry_transforms::ReplaceTransformFactory)
        .transform(ferry_transforms::SplitTransformFactory)
        .transform(ferry_transforms::FilterRowKindTransformFactory)
        .transform(ferry_transforms::RowKindExtractorTransformFactory)
        .transform(ferry_transforms::FieldRenameTransformFactory)
        .transform(ferry_transforms::TableRenameTransformFactory)
        .transform(ferry_transforms::TableMergeTransformFactory)
        .transform(ferry_transforms::TableFilterTransformFactory);
    #[cfg(feature = "sql")]
    let r = r.transform(ferry_sql::SqlTransformFactory);
    r
}
