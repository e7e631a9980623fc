//! # ferry-plugins
//!
//! The composition root: every connector and transform Ferry ships, one line each. The
//! `ferry` binary and the Spark module (`ferry-spark`) both build their registry here, so
//! that the two engines always offer the same plugins. Engines receive this registry and
//! know no plugin by name.

use ferry_api::Registry;

/// All built-in plugins.
pub fn builtin() -> Registry {
    let r = Registry::new()
        .source(ferry_connector_fake::FakeSourceFactory)
        .source(ferry_connector_file::LocalFileSourceFactory)
        .sink(ferry_connector_file::LocalFileSinkFactory)
        .source(ferry_connector_jdbc::JdbcSourceFactory)
        .sink(ferry_connector_jdbc::JdbcSinkFactory)
        .sink(ferry_connector_assert::AssertSinkFactory)
        .sink(ferry_connector_console::ConsoleSinkFactory)
        .sink(ferry_connector_console::BlackholeSinkFactory)
        .source(ferry_connector_rabbitmq::RabbitmqSourceFactory)
        .sink(ferry_connector_rabbitmq::RabbitmqSinkFactory)
        .source(ferry_connector_redis::RedisSourceFactory)
        .sink(ferry_connector_redis::RedisSinkFactory)
        .source(ferry_connector_nats::NatsSourceFactory)
        .sink(ferry_connector_nats::NatsSinkFactory)
        .source(ferry_connector_mqtt::MqttSourceFactory)
        .sink(ferry_connector_mqtt::MqttSinkFactory)
        .source(ferry_connector_kafka::KafkaSourceFactory)
        .sink(ferry_connector_kafka::KafkaSinkFactory)
        .source(ferry_connector_postgres_cdc::PostgresCdcSourceFactory)
        .source(ferry_connector_mysql_cdc::MySqlCdcSourceFactory)
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
        .transform(ferry_transforms::TableFilterTransformFactory)
        .transform(ferry_transforms::JsonPathTransformFactory);
    #[cfg(feature = "sql")]
    let r = r.transform(ferry_sql::SqlTransformFactory);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plugin_is_found_by_its_job_file_name_in_any_case() {
        let r = builtin();
        assert!(r.find_source("fakesource").is_some());
        assert!(r.find_source("LocalFile").is_some());
        assert!(r.find_sink("ASSERT").is_some());
        assert!(r.find_sink("LocalFile").is_some());
        assert!(r.find_transform("filter").is_some());
        #[cfg(feature = "sql")]
        assert!(r.find_transform("sql").is_some());
    }
}
