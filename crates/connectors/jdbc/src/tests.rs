//! Tests against the real local servers (PostgreSQL 127.0.0.1:5432 trust auth, MariaDB
//! 127.0.0.1:3306 root): each test works in its own schema or database `ferry_t_<name>`,
//! so tests run in parallel without meeting.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, RecordBatch, StringArray, UInt8Array};
use arrow::datatypes::{DataType, Field, Schema};
use ferry_api::{
    ChangeBatch, JobMode, Options, ResolveContext, Result, Sink, SinkDelivery, SinkFactory, Source,
    SourceFactory, TableSchema,
};
use ferry_connector_testkit::{
    check_sink, check_source_replay, check_source_restore, job, read_all, rows,
};
use mysql_async::prelude::Queryable;
use serde_json::{json, Value};

use crate::{JdbcSinkFactory, JdbcSourceFactory};

const PG_URL: &str = "jdbc:postgresql://127.0.0.1:5432/test";
const MY_URL: &str = "jdbc:mysql://127.0.0.1:3306/test";

fn pg(sql: &str) -> Vec<Vec<Option<String>>> {
    let sql = sql.to_string();
    ferry_api::io::handle()
        .unwrap()
        .block_on(ferry_db::catalog::pg_script(
            "host=127.0.0.1 port=5432 user=postgres dbname=test",
            &sql,
        ))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn my(sql: &str) -> Vec<Vec<Option<String>>> {
    let sql = sql.to_string();
    ferry_api::io::handle().unwrap().block_on(async move {
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(3306)
            .user(Some("root"))
            .db_name(Some("test"));
        let mut c = mysql_async::Conn::new(opts).await.unwrap();
        let mut out = Vec::new();
        for stmt in sql.split(";\n") {
            if stmt.trim().is_empty() {
                continue;
            }
            let rows: Vec<mysql_async::Row> = c
                .query(stmt)
                .await
                .unwrap_or_else(|e| panic!("{e}: {stmt}"));
            for r in rows {
                out.push(
                    (0..r.len())
                        .map(|i| match r.as_ref(i) {
                            Some(mysql_async::Value::Bytes(b)) => {
                                Some(String::from_utf8_lossy(b).into_owned())
                            }
                            Some(mysql_async::Value::NULL) | None => None,
                            Some(v) => Some(v.as_sql(true)),
                        })
                        .collect(),
                );
            }
        }
        c.disconnect().await.unwrap();
        out
    })
}

fn resolve_ctx(plugin: &str) -> ResolveContext {
    ResolveContext::new(plugin, job(JobMode::Batch), Duration::from_secs(20))
}

fn source(options: Value) -> Result<Box<dyn Source>> {
    let mut s = JdbcSourceFactory.create(
        &mut Options::from_json("Jdbc", options),
        &job(JobMode::Batch),
    )?;
    s.resolve(&resolve_ctx("source Jdbc"))?;
    Ok(s)
}

fn count(batches: &[ChangeBatch]) -> usize {
    batches.iter().map(ChangeBatch::num_rows).sum()
}

#[test]
fn pg_every_supported_type_and_nulls_read_as_seatunnel_types() {
    pg("DROP SCHEMA IF EXISTS ferry_t_pg_types CASCADE; CREATE SCHEMA ferry_t_pg_types;
        CREATE TABLE ferry_t_pg_types.t (id int4 PRIMARY KEY, b bool, i2 int2, i8 int8, f4 float4, f8 float8,
          n numeric(10,3), nn numeric, m money, c char(3), v varchar(10), tx text, j json, jb jsonb, u uuid,
          by bytea, d date, t time, tz timetz, ts timestamp, tstz timestamptz, ai int4[], at text[], x xml, ip inet);
        INSERT INTO ferry_t_pg_types.t VALUES (1, true, -2, 9000000000, 1.5, -2.25, 1234567.891, 3.14159, 12.34,
          'ab', 'héllo', 'it''s', '{\"a\": 1}', '{\"b\": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
          '\\x00ff', '2024-02-29', '13:14:15.123456', '01:02:03+02', '2024-02-29 13:14:15.5', '2024-02-29 13:14:15+00',
          '{1,NULL,3}', '{\"x\",\"y\"}', '<a/>', '10.0.0.1');
        INSERT INTO ferry_t_pg_types.t (id) VALUES (2);");
    let s = source(json!({"url": PG_URL, "driver": "org.postgresql.Driver", "user": "postgres", "table_path": "test.ferry_t_pg_types.t"})).unwrap();
    let t = &s.tables()[0];
    let dt = |n: &str| t.schema.field_with_name(n).unwrap().data_type().clone();
    assert_eq!(dt("n"), DataType::Decimal128(10, 3));
    assert_eq!(dt("nn"), DataType::Decimal128(38, 18));
    assert_eq!(dt("m"), DataType::Decimal128(30, 2));
    assert_eq!(dt("u"), DataType::Utf8);
    assert_eq!(dt("ai"), ferry_db::types::list_of(DataType::Int32));
    assert!(!t.schema.field_with_name("id").unwrap().is_nullable());
    assert_eq!(t.primary_key_columns(), ["id"]);
    assert_eq!(
        t.catalog.id.as_ref().unwrap().path(),
        "test.ferry_t_pg_types.t"
    );
    let got = rows(&read_all(&*s, 1, job(JobMode::Batch)).unwrap());
    assert_eq!(got.len(), 2);
    let first = &got[0];
    for want in [
        r#""b":true"#,
        r#""i2":-2"#,
        r#""i8":9000000000"#,
        r#""f4":1.5"#,
        r#""f8":-2.25"#,
        r#""n":1234567.891"#,
        r#""nn":3.141590000000000000"#,
        r#""m":12.34"#,
        r#""c":"ab ""#,
        r#""v":"héllo""#,
        r#""tx":"it's""#,
        r#""j":"{\"a\": 1}""#,
        r#""jb":"{\"b\": [1, 2]}""#,
        r#""u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11""#,
        r#""d":"2024-02-29""#,
        r#""t":"13:14:15.123456""#,
        r#""tz":"01:02:03""#,
        r#""ts":"2024-02-29T13:14:15.500000""#,
        r#""tstz":"2024-02-29T13:14:15""#,
        r#""ai":[1,null,3]"#,
        r#""at":["x","y"]"#,
        r#""x":"<a/>""#,
        r#""ip":"10.0.0.1""#,
    ] {
        assert!(first.contains(want), "{want} not in {first}");
    }
    assert!(
        got[1].contains(r#""b":null"#) && got[1].contains(r#""ai":null"#),
        "{}",
        got[1]
    );
}

#[test]
fn pg_unsupported_type_is_a_planning_error_naming_column_and_type() {
    pg(
        "DROP SCHEMA IF EXISTS ferry_t_pg_unsup CASCADE; CREATE SCHEMA ferry_t_pg_unsup;
        CREATE TABLE ferry_t_pg_unsup.t (id int4, p point);",
    );
    let e = source(json!({"url": PG_URL, "table_path": "test.ferry_t_pg_unsup.t"}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("'p'") && e.contains("'point'"), "{e}");
}

#[test]
fn pg_split_reads_resume_exactly_and_replay() {
    pg("DROP SCHEMA IF EXISTS ferry_t_pg_split CASCADE; CREATE SCHEMA ferry_t_pg_split;
        CREATE TABLE ferry_t_pg_split.t (id int8 PRIMARY KEY, name text, code varchar(8));
        INSERT INTO ferry_t_pg_split.t SELECT g, 'name ' || g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'c' || (g % 13) END FROM generate_series(1, 6000) g;");
    // The fixed splitter on an integer column, a text column (hash), and the dynamic one.
    for opts in [
        json!({"url": PG_URL, "table_path": "test.ferry_t_pg_split.t", "partition_column": "id", "partition_num": 3, "fetch_size": 500}),
        json!({"url": PG_URL, "table_path": "test.ferry_t_pg_split.t", "partition_column": "code", "partition_num": 3, "fetch_size": 500}),
        json!({"url": PG_URL, "table_path": "test.ferry_t_pg_split.t", "split.size": 1000, "fetch_size": 700}),
    ] {
        let s = source(opts.clone()).unwrap();
        assert!(s.is_replayable());
        for at in [0, 1, 2500, 6000] {
            let whole = check_source_restore(&*s, 2, job(JobMode::Batch), at)
                .unwrap_or_else(|e| panic!("{opts} at {at}: {e}"));
            assert_eq!(count(&whole), 6000, "{opts}");
        }
        check_source_replay(&*s, 2, job(JobMode::Batch), 3000).unwrap();
    }
    // A where_condition filters, a query reads what it selects.
    let s = source(json!({"url": PG_URL, "table_path": "test.ferry_t_pg_split.t", "where_condition": "where id <= 100", "split.size": 30})).unwrap();
    assert_eq!(count(&read_all(&*s, 2, job(JobMode::Batch)).unwrap()), 100);
    let s = source(json!({"url": PG_URL, "query": "select id, name from ferry_t_pg_split.t where id > 5990", "partition_column": "id", "partition_num": 2})).unwrap();
    assert_eq!(count(&read_all(&*s, 2, job(JobMode::Batch)).unwrap()), 10);
}

#[test]
fn pg_uneven_keys_past_the_sampling_threshold_split_from_a_sample_and_read_every_row_once() {
    // Keys i³: far too sparse for even ranges (factor > 100), so the dynamic splitter
    // either walks the key (one query per split) or, past the threshold, samples it.
    pg(
        "DROP SCHEMA IF EXISTS ferry_t_pg_sample CASCADE; CREATE SCHEMA ferry_t_pg_sample;
        CREATE TABLE ferry_t_pg_sample.t (id int8 PRIMARY KEY, v int4);
        INSERT INTO ferry_t_pg_sample.t SELECT g::int8 * g * g, g FROM generate_series(1, 5000) g;",
    );
    let s = source(
        json!({"url": PG_URL, "table_path": "test.ferry_t_pg_sample.t", "split.size": 100,
        "split.sample-sharding.threshold": 10, "split.inverse-sampling.rate": 7}),
    )
    .unwrap();
    let mut e = s
        .create_enumerator(
            &ferry_api::EnumeratorContext {
                parallelism: 2,
                job: job(JobMode::Batch),
            },
            None,
        )
        .unwrap();
    let splits = e.discover().unwrap();
    // 5000 rows in splits of 100: about 50 splits, from a sample of 714 keys.
    assert!((40..=60).contains(&splits.len()), "{} splits", splits.len());
    for at in [0, 1234] {
        let whole = check_source_restore(&*s, 2, job(JobMode::Batch), at).unwrap();
        assert_eq!(count(&whole), 5000);
    }
}

#[test]
fn mysql_every_supported_type_and_nulls_read_as_seatunnel_types() {
    my("DROP DATABASE IF EXISTS ferry_t_my_types;\nCREATE DATABASE ferry_t_my_types;\n
        CREATE TABLE ferry_t_my_types.t (id int PRIMARY KEY, b1 bit(1), b8 bit(8), bo tinyint(1), ti tinyint, tu tinyint unsigned,
          si smallint, su smallint unsigned, mi mediumint, iu int unsigned, bi bigint, bu bigint unsigned, de decimal(10,2),
          du decimal(10,2) unsigned, fl float, db double, ch char(3), vc varchar(10), tx text, js json, en enum('a','b'),
          bl blob, vb varbinary(4), dt date, tm time(6), dtm datetime(6), tsp timestamp NULL, yr year);\n
        INSERT INTO ferry_t_my_types.t VALUES (1, b'1', b'10000001', 1, -5, 250, -300, 65000, 8000000, 4000000000, -9000000000,
          18446744073709551615, 12345678.91, 0.5, 1.5, -2.25, 'ab', 'héllo', 'it''s \\\\ ok', '{\"a\": 1}', 'b', x'00ff', x'0102', '2024-02-29',
          '13:14:15.123456', '2024-02-29 13:14:15.5', '2024-02-29 13:14:15', 2024);\n
        INSERT INTO ferry_t_my_types.t (id) VALUES (2);");
    let s = source(json!({"url": MY_URL, "driver": "com.mysql.cj.jdbc.Driver", "user": "root", "table_path": "ferry_t_my_types.t"})).unwrap();
    let t = &s.tables()[0];
    let dt = |n: &str| t.schema.field_with_name(n).unwrap().data_type().clone();
    assert_eq!(dt("bo"), DataType::Boolean);
    assert_eq!(dt("b8"), DataType::Binary);
    assert_eq!(dt("ti"), DataType::Int8);
    assert_eq!(dt("tu"), DataType::Int16);
    assert_eq!(dt("bu"), DataType::Decimal128(20, 0));
    assert_eq!(dt("du"), DataType::Decimal128(11, 2));
    assert_eq!(t.primary_key_columns(), ["id"]);
    let got = rows(&read_all(&*s, 1, job(JobMode::Batch)).unwrap());
    let first = &got[0];
    for want in [
        r#""b1":true"#,
        r#""bo":true"#,
        r#""ti":-5"#,
        r#""tu":250"#,
        r#""su":65000"#,
        r#""iu":4000000000"#,
        r#""bu":18446744073709551615"#,
        r#""de":12345678.91"#,
        r#""du":0.50"#,
        r#""fl":1.5"#,
        r#""db":-2.25"#,
        r#""ch":"ab""#,
        r#""vc":"héllo""#,
        r#""tx":"it's \\ ok""#,
        r#""en":"b""#,
        r#""dt":"2024-02-29""#,
        r#""tm":"13:14:15.123456""#,
        r#""dtm":"2024-02-29T13:14:15.500000""#,
        r#""tsp":"2024-02-29T13:14:15""#,
        r#""yr":2024"#,
    ] {
        assert!(first.contains(want), "{want} not in {first}");
    }
    assert!(
        got[1].contains(r#""b1":null"#) && got[1].contains(r#""dtm":null"#),
        "{}",
        got[1]
    );
}

#[test]
fn mysql_split_reads_resume_exactly_and_replay() {
    my(
        "DROP DATABASE IF EXISTS ferry_t_my_split;\nCREATE DATABASE ferry_t_my_split;\n
        CREATE TABLE ferry_t_my_split.t (id bigint PRIMARY KEY, name varchar(20));\n
        INSERT INTO ferry_t_my_split.t SELECT seq, concat('name ', seq) FROM seq_1_to_5000;",
    );
    for opts in [
        json!({"url": MY_URL, "table_path": "ferry_t_my_split.t", "partition_column": "id", "partition_num": 3, "fetch_size": 500}),
        json!({"url": MY_URL, "table_path": "ferry_t_my_split.t", "partition_column": "name", "partition_num": 2, "fetch_size": 500}),
        json!({"url": MY_URL, "table_path": "ferry_t_my_split.t", "split.size": 1000, "fetch_size": 700}),
    ] {
        let s = source(opts.clone()).unwrap();
        for at in [0, 2500, 5000] {
            let whole = check_source_restore(&*s, 2, job(JobMode::Batch), at)
                .unwrap_or_else(|e| panic!("{opts} at {at}: {e}"));
            assert_eq!(count(&whole), 5000, "{opts}");
        }
        check_source_replay(&*s, 2, job(JobMode::Batch), 2000).unwrap();
    }
}

/// Reads 1000 of a table's 3000 rows (keyed by `(grp, name)`, names with a quote and a
/// backslash), checkpoints, deletes ten rows already read and adds one not yet read, then
/// restores: the restored split goes on after its last key, so the deletions shift
/// nothing (skipping 1000 rows of the new read would pass over ten unread ones) and every
/// id comes once.
fn resumes_after_its_last_key(opts: Value, change: &dyn Fn()) {
    let s = source(opts).unwrap();
    let job = || job(JobMode::Streaming); // no shared snapshot: the restore reads anew
    let mut d = ferry_connector_testkit::SourceDriver::start(&*s, 1, job()).unwrap();
    d.run_until(1000).unwrap();
    let snap = d.snapshot().unwrap();
    let mut got = d.take_output();
    assert_eq!(count(&got), 1000);
    d.close().unwrap();
    change();
    let mut d = ferry_connector_testkit::SourceDriver::restore(&*s, 1, job(), &snap).unwrap();
    d.run_to_end().unwrap();
    got.extend(d.take_output());
    d.close().unwrap();
    let ids = ferry_connector_testkit::ids(&got);
    assert_eq!(ids, (1..=3001).collect::<Vec<i64>>());
}

#[test]
fn pg_a_restored_split_goes_on_after_its_last_key_when_rows_before_it_changed() {
    pg("DROP SCHEMA IF EXISTS ferry_t_pg_keyset CASCADE; CREATE SCHEMA ferry_t_pg_keyset;
        CREATE TABLE ferry_t_pg_keyset.t (id int8 NOT NULL, grp int4, name text, PRIMARY KEY (grp, name));
        INSERT INTO ferry_t_pg_keyset.t SELECT g, g / 1000, 'it''s \\ ' || lpad(g::text, 5, '0') FROM generate_series(1, 3000) g;");
    resumes_after_its_last_key(
        json!({"url": PG_URL, "table_path": "test.ferry_t_pg_keyset.t", "fetch_size": 500}),
        &|| {
            pg("DELETE FROM ferry_t_pg_keyset.t WHERE id <= 10;
                INSERT INTO ferry_t_pg_keyset.t VALUES (3001, 2, 'it''s \\ 03001');");
        },
    );
}

#[test]
fn mysql_a_restored_split_goes_on_after_its_last_key_when_rows_before_it_changed() {
    my("DROP DATABASE IF EXISTS ferry_t_my_keyset;\nCREATE DATABASE ferry_t_my_keyset;\n
        CREATE TABLE ferry_t_my_keyset.t (id bigint NOT NULL, grp int, name varchar(40), PRIMARY KEY (grp, name));\n
        INSERT INTO ferry_t_my_keyset.t SELECT seq, seq DIV 1000, concat('it''s \\\\ ', lpad(seq, 5, '0')) FROM seq_1_to_3000;");
    resumes_after_its_last_key(
        json!({"url": MY_URL, "table_path": "ferry_t_my_keyset.t", "fetch_size": 500}),
        &|| {
            my("DELETE FROM ferry_t_my_keyset.t WHERE id <= 10;\n
                INSERT INTO ferry_t_my_keyset.t VALUES (3001, 2, 'it''s \\\\ 03001');");
        },
    );
}

fn input_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]))
}

fn input_table(keyed: bool) -> TableSchema {
    let mut catalog = ferry_api::CatalogInfo::default();
    if keyed {
        catalog.primary_key = Some(ferry_api::PrimaryKey {
            name: "pk".into(),
            columns: vec!["id".into()],
        });
    }
    TableSchema::new("src", input_schema()).with_catalog(catalog)
}

fn batches() -> Vec<ChangeBatch> {
    (0..6)
        .map(|b| {
            let ids: Vec<i64> = (b * 500..(b + 1) * 500).collect();
            let names: Vec<String> = ids.iter().map(|i| format!("n'{i}")).collect();
            ChangeBatch::inserts(
                "src".into(),
                RecordBatch::try_new(
                    input_schema(),
                    vec![
                        Arc::new(Int64Array::from(ids)),
                        Arc::new(StringArray::from(names)),
                    ],
                )
                .unwrap(),
            )
        })
        .collect()
}

fn sink(options: Value, keyed: bool) -> Result<Arc<dyn Sink>> {
    let s = JdbcSinkFactory.create(
        &mut Options::from_json("Jdbc", options),
        &[input_table(keyed)],
        &job(JobMode::Batch),
    )?;
    s.setup(&resolve_ctx("sink Jdbc"))?;
    Ok(s)
}

fn read_back(url: &'static str, table: &'static str) -> impl Fn() -> Result<Vec<ChangeBatch>> {
    move || {
        let s = source(json!({"url": url, "query": format!("select id, name from {table}")}))?;
        let out = read_all(&*s, 1, job(JobMode::Batch))?;
        // Same table name and schema as the input, for the row comparison.
        Ok(out
            .into_iter()
            .map(|b| {
                ChangeBatch::inserts(
                    "src".into(),
                    RecordBatch::try_new(input_schema(), b.data.columns().to_vec()).unwrap(),
                )
            })
            .collect())
    }
}

#[test]
fn pg_sink_upserts_by_key_converge_and_plain_inserts_are_at_least_once() {
    pg("DROP SCHEMA IF EXISTS ferry_t_pg_sink CASCADE; CREATE SCHEMA ferry_t_pg_sink;");
    let upsert = json!({"url": PG_URL, "generate_sink_sql": true, "database": "test", "table": "ferry_t_pg_sink.up",
        "primary_keys": ["${primary_key}"], "batch_size": 300, "password": "s3cret-pw"});
    let s = sink(upsert.clone(), true).unwrap();
    assert_eq!(s.delivery(), SinkDelivery::ExactlyOnce);
    assert!(s
        .delivery_reason()
        .unwrap()
        .contains("upserts by primary key"));
    // Rows flushed before a crash stay visible (no transaction), so the kit's at-least-once
    // check applies through the crashes; at the end every key is there exactly once.
    check_sink(
        SinkDelivery::AtLeastOnce,
        &|| sink(upsert.clone(), true),
        2,
        job(JobMode::Batch),
        &batches(),
        &read_back(PG_URL, "ferry_t_pg_sink.up"),
    )
    .unwrap();
    assert_eq!(
        rows(&read_back(PG_URL, "ferry_t_pg_sink.up")().unwrap()),
        rows(&batches())
    );
    // The created table has the key and the columns' nullability.
    let pk = pg("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'ferry_t_pg_sink.up'::regclass AND i.indisprimary");
    assert_eq!(pk, vec![vec![Some("id".to_string())]]);

    let plain = json!({"url": PG_URL, "generate_sink_sql": true, "database": "test", "table": "ferry_t_pg_sink.plain", "batch_size": 250});
    let s = sink(plain.clone(), false).unwrap();
    assert_eq!(s.delivery(), SinkDelivery::AtLeastOnce);
    check_sink(
        SinkDelivery::AtLeastOnce,
        &|| sink(plain.clone(), false),
        2,
        job(JobMode::Batch),
        &batches(),
        &read_back(PG_URL, "ferry_t_pg_sink.plain"),
    )
    .unwrap();
}

#[test]
fn pg_copy_statement_appends_at_least_once_and_exactly_once_in_xa_transactions() {
    pg("DROP SCHEMA IF EXISTS ferry_t_pg_copy CASCADE; CREATE SCHEMA ferry_t_pg_copy;");
    let plain = json!({"url": PG_URL, "generate_sink_sql": true, "table": "ferry_t_pg_copy.plain",
        "use_copy_statement": true, "batch_size": 250});
    let s = sink(plain.clone(), false).unwrap();
    assert_eq!(s.delivery(), SinkDelivery::AtLeastOnce);
    assert!(s.delivery_reason().unwrap().contains("COPY"));
    check_sink(
        SinkDelivery::AtLeastOnce,
        &|| sink(plain.clone(), false),
        2,
        job(JobMode::Batch),
        &batches(),
        &read_back(PG_URL, "ferry_t_pg_copy.plain"),
    )
    .unwrap();
    let xa = json!({"url": PG_URL, "generate_sink_sql": true, "table": "ferry_t_pg_copy.xa",
        "use_copy_statement": true, "is_exactly_once": true, "batch_size": 250});
    check_sink(
        SinkDelivery::ExactlyOnce,
        &|| sink(xa.clone(), false),
        2,
        job(JobMode::Batch),
        &batches(),
        &read_back(PG_URL, "ferry_t_pg_copy.xa"),
    )
    .unwrap();
    // COPY is PostgreSQL's; on MySQL the option is an error naming it.
    let e = sink(json!({"url": MY_URL, "generate_sink_sql": true, "database": "test", "table": "t", "use_copy_statement": true}), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("use_copy_statement"), "{e}");
}

#[test]
fn pg_sink_applies_change_data_by_key_and_save_modes() {
    pg("DROP SCHEMA IF EXISTS ferry_t_pg_cdc CASCADE; CREATE SCHEMA ferry_t_pg_cdc;
        CREATE TABLE ferry_t_pg_cdc.t (id int8 PRIMARY KEY, name text); INSERT INTO ferry_t_pg_cdc.t VALUES (99, 'old');");
    let opts = json!({"url": PG_URL, "generate_sink_sql": true, "table": "ferry_t_pg_cdc.t", "primary_keys": ["id"], "data_save_mode": "DROP_DATA"});
    let s = sink(opts.clone(), false).unwrap();
    assert!(
        pg("SELECT * FROM ferry_t_pg_cdc.t").is_empty(),
        "DROP_DATA empties the table"
    );
    let data = RecordBatch::try_new(
        input_schema(),
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 1, 1, 2, 3, 3])),
            Arc::new(StringArray::from(vec!["a", "b", "a", "a2", "b", "c", "c"])),
        ],
    )
    .unwrap();
    // +I 1, +I 2, -U 1, +U 1 (a2), -D 2, +I 3, +U 3
    let kinds = UInt8Array::from(vec![0, 0, 1, 2, 3, 0, 2]);
    write_one(&s, &ChangeBatch::with_kinds("src".into(), data, kinds)).unwrap();
    assert_eq!(
        pg("SELECT id, name FROM ferry_t_pg_cdc.t ORDER BY id"),
        vec![
            vec![Some("1".into()), Some("a2".into())],
            vec![Some("3".into()), Some("c".into())],
        ]
    );
    // Resumed, DROP_DATA is not applied again; ERROR_WHEN_DATA_EXISTS refuses a table with rows.
    let resumed = ResolveContext {
        resumed: true,
        ..resolve_ctx("sink Jdbc")
    };
    JdbcSinkFactory
        .create(
            &mut Options::from_json("Jdbc", opts),
            &[input_table(false)],
            &job(JobMode::Batch),
        )
        .unwrap()
        .setup(&resumed)
        .unwrap();
    assert_eq!(
        pg("SELECT count(*) FROM ferry_t_pg_cdc.t"),
        vec![vec![Some("2".into())]]
    );
    let e = sink(json!({"url": PG_URL, "generate_sink_sql": true, "table": "ferry_t_pg_cdc.t", "data_save_mode": "ERROR_WHEN_DATA_EXISTS"}), false).unwrap_err().to_string();
    assert!(e.contains("has data"), "{e}");
    let e = sink(json!({"url": PG_URL, "generate_sink_sql": true, "table": "ferry_t_pg_cdc.missing", "schema_save_mode": "ERROR_WHEN_SCHEMA_NOT_EXIST"}), false).unwrap_err().to_string();
    assert!(e.contains("does not exist"), "{e}");
    sink(json!({"url": PG_URL, "generate_sink_sql": true, "table": "ferry_t_pg_cdc.t", "schema_save_mode": "RECREATE_SCHEMA"}), false).unwrap();
    assert!(
        pg("SELECT * FROM ferry_t_pg_cdc.t").is_empty(),
        "RECREATE_SCHEMA makes a new table"
    );
}

#[test]
fn mysql_sink_upserts_by_key_converge_and_query_statements_bind_fields() {
    my("DROP DATABASE IF EXISTS ferry_t_my_sink;\nCREATE DATABASE ferry_t_my_sink;\nCREATE TABLE ferry_t_my_sink.q (id bigint, name varchar(40));");
    let upsert = json!({"url": "jdbc:mariadb://127.0.0.1:3306/test", "driver": "org.mariadb.jdbc.Driver", "generate_sink_sql": true,
        "database": "ferry_t_my_sink", "table": "up", "primary_keys": ["id"], "batch_size": 300});
    check_sink(
        SinkDelivery::AtLeastOnce,
        &|| sink(upsert.clone(), true),
        2,
        job(JobMode::Batch),
        &batches(),
        &read_back(MY_URL, "ferry_t_my_sink.up"),
    )
    .unwrap();
    assert_eq!(
        rows(&read_back(MY_URL, "ferry_t_my_sink.up")().unwrap()),
        rows(&batches())
    );
    let query = json!({"url": MY_URL, "query": "insert into ferry_t_my_sink.q (id, name) values (?, ?);", "batch_size": 400});
    check_sink(
        SinkDelivery::AtLeastOnce,
        &|| sink(query.clone(), false),
        2,
        job(JobMode::Batch),
        &batches(),
        &read_back(MY_URL, "ferry_t_my_sink.q"),
    )
    .unwrap();
}

#[test]
fn xa_sinks_are_exactly_once_through_crashes_and_leave_no_prepared_transaction() {
    let max = pg("SHOW max_prepared_transactions");
    assert_ne!(
        max[0][0].as_deref(),
        Some("0"),
        "run scripts/setup-databases first: XA needs max_prepared_transactions > 0"
    );
    // What an earlier, failed run of this test may have left prepared (it holds locks).
    for r in pg("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'ferry:testkit:%'") {
        pg(&format!(
            "ROLLBACK PREPARED '{}'",
            r[0].as_deref().unwrap_or_default()
        ));
    }
    for r in my("XA RECOVER") {
        if let Some(x) = r[3].as_deref().filter(|x| x.starts_with("ferry:testkit:")) {
            my(&format!("XA ROLLBACK '{x}'"));
        }
    }
    pg("DROP SCHEMA IF EXISTS ferry_t_pg_xa CASCADE; CREATE SCHEMA ferry_t_pg_xa; CREATE TABLE ferry_t_pg_xa.t (id int8, name text);");
    let xa = json!({"url": PG_URL, "generate_sink_sql": true, "table": "ferry_t_pg_xa.t", "is_exactly_once": true,
        "xa_data_source_class_name": "org.postgresql.xa.PGXADataSource"});
    let s = sink(xa.clone(), false).unwrap();
    assert!(s.delivery_reason().unwrap().contains("XA"));
    check_sink(
        SinkDelivery::ExactlyOnce,
        &|| sink(xa.clone(), false),
        2,
        job(JobMode::Batch),
        &batches(),
        &read_back(PG_URL, "ferry_t_pg_xa.t"),
    )
    .unwrap();
    assert!(pg("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'ferry:testkit:%'").is_empty());

    my("DROP DATABASE IF EXISTS ferry_t_my_xa;\nCREATE DATABASE ferry_t_my_xa;\nCREATE TABLE ferry_t_my_xa.t (id bigint, name varchar(40));");
    let xa = json!({"url": MY_URL, "generate_sink_sql": true, "database": "ferry_t_my_xa", "table": "t", "is_exactly_once": true});
    check_sink(
        SinkDelivery::ExactlyOnce,
        &|| sink(xa.clone(), false),
        2,
        job(JobMode::Batch),
        &batches(),
        &read_back(MY_URL, "ferry_t_my_xa.t"),
    )
    .unwrap();
    let left = my("XA RECOVER");
    assert!(
        left.iter()
            .all(|r| !r[3].as_deref().unwrap_or("").starts_with("ferry:testkit:")),
        "{left:?}"
    );

    let e = JdbcSinkFactory
        .create(&mut Options::from_json("Jdbc", json!({"url": PG_URL, "query": "insert into x values (?)", "is_exactly_once": true, "max_retries": 3})), &[input_table(false)], &job(JobMode::Batch))
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_retries"), "{e}");
}

#[test]
fn errors_name_the_server_and_never_the_password() {
    let e = source(json!({"url": "jdbc:postgresql://127.0.0.1:1/test", "password": "s3cret-pw", "query": "select 1", "connection_check_timeout_sec": 2}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("127.0.0.1:1") && !e.contains("s3cret-pw"), "{e}");
    let e = source(
        json!({"url": MY_URL, "user": "nobody", "password": "s3cret-pw", "query": "select 1"}),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("127.0.0.1:3306") && !e.contains("s3cret-pw"),
        "{e}"
    );
    let e = source(json!({"url": PG_URL, "table_path": "test.public.ferry_no_such_table"}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("ferry_no_such_table"), "{e}");
}

/// Reads `from`, writes it through a generated-SQL sink into `to` (created by the save mode
/// from the source's catalog), reads `to` back: the same rows, NULLs included.
fn round_trip(url: &str, from: &str, to_db: Option<&str>, to_table: &str, to_path: &str) {
    round_trip_with(url, from, to_db, to_table, to_path, json!({}));
}

/// [`round_trip`] with more sink options.
fn round_trip_with(
    url: &str,
    from: &str,
    to_db: Option<&str>,
    to_table: &str,
    to_path: &str,
    more: Value,
) {
    let s = source(json!({"url": url, "table_path": from})).unwrap();
    let input = s.tables()[0].clone();
    let data = read_all(&*s, 1, job(JobMode::Batch)).unwrap();
    let mut opts = json!({"url": url, "generate_sink_sql": true, "table": to_table, "schema_save_mode": "RECREATE_SCHEMA"});
    for (k, v) in more.as_object().into_iter().flatten() {
        opts[k] = v.clone();
    }
    if let Some(db) = to_db {
        opts["database"] = json!(db);
    }
    let sink = JdbcSinkFactory
        .create(
            &mut Options::from_json("Jdbc", opts),
            std::slice::from_ref(&input),
            &job(JobMode::Batch),
        )
        .unwrap();
    sink.setup(&resolve_ctx("sink Jdbc")).unwrap();
    write_all(&sink, &data).unwrap();
    let back = source(json!({"url": url, "table_path": to_path})).unwrap();
    assert_eq!(
        back.tables()[0].schema,
        input.schema,
        "the created table has the same types"
    );
    let again: Vec<ChangeBatch> = read_all(&*back, 1, job(JobMode::Batch))
        .unwrap()
        .into_iter()
        .map(|b| ChangeBatch::inserts(input.name.clone(), b.data))
        .collect();
    assert_eq!(rows(&again), rows(&data));
}

/// `use_copy_statement` sends binary COPY, and generated INSERTs send one binary array
/// parameter per column, when every column has an exact binary form for its target type;
/// the values arrive as they left (extremes, NULLs, 38-digit numerics), also into a table
/// of more columns than a function takes arguments. A table with an array column is
/// written as CSV, or as INSERTs with literals, also equal.
#[test]
fn pg_binary_copy_and_array_inserts_write_every_value_as_it_was_and_fall_back_for_arrays() {
    pg("DROP SCHEMA IF EXISTS ferry_t_pg_bincopy CASCADE; CREATE SCHEMA ferry_t_pg_bincopy;
        CREATE TABLE ferry_t_pg_bincopy.t (id int4 PRIMARY KEY, b bool, i2 int2, i8 int8, f4 float4, f8 float8,
          n numeric(10,3), nb numeric(38,30), nz numeric(38,0), c char(3), v varchar(10), tx text, j json, jb jsonb,
          u uuid, by bytea, d date, t time, ts timestamp, tstz timestamptz);
        INSERT INTO ferry_t_pg_bincopy.t VALUES
          (1, true, -32768, -9223372036854775808, 1.5, 0.1, -1234567.891, 12345678.123456789012345678901234567891,
           -99999999999999999999999999999999999999, 'ab', 'héllo', 'it''s \\ ok', '{\"a\": 1}', '{\"b\": [1, 2]}',
           'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x00ff', '0001-01-01', '23:59:59.999999',
           '1999-12-31 23:59:59.999999', '2024-02-29 13:14:15.5+05'),
          (2, false, 32767, 9223372036854775807, 'NaN', '-Infinity', 0, 0.000000000000000000000000000001,
           10000, '', '', '', 'null', '[]', '00000000-0000-0000-0000-000000000000', '\\x', '2000-01-01',
           '00:00:00', '2000-01-01 00:00:00', '1970-01-01 00:00:00+00'),
          (3, NULL, 0, 0, 0, 0, 0.001, -0.000100000000000000000000000000, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           '9999-12-31', NULL, '2262-04-11 23:47:16', NULL);
        INSERT INTO ferry_t_pg_bincopy.t (id) VALUES (4);
        CREATE TABLE ferry_t_pg_bincopy.arr (id int4 PRIMARY KEY, ai int4[], tx text);
        INSERT INTO ferry_t_pg_bincopy.arr VALUES (1, '{1,NULL,3}', 'x'), (2, NULL, NULL);");
    let wide: Vec<String> = (1..=120).map(|c| format!("c{c} int4")).collect();
    let values: Vec<String> = (1..=120)
        .map(|c| format!("CASE WHEN g % {c} = 0 THEN NULL ELSE g * {c} END"))
        .collect();
    pg(&format!(
        "CREATE TABLE ferry_t_pg_bincopy.wide (id int4 PRIMARY KEY, {});
         INSERT INTO ferry_t_pg_bincopy.wide SELECT g, {} FROM generate_series(1, 50) g;",
        wide.join(", "),
        values.join(", ")
    ));
    for (from, to) in [("t", "ins"), ("arr", "arr_ins"), ("wide", "wide_ins")] {
        round_trip_with(
            PG_URL,
            &format!("test.ferry_t_pg_bincopy.{from}"),
            Some("test"),
            &format!("ferry_t_pg_bincopy.{to}"),
            &format!("test.ferry_t_pg_bincopy.{to}"),
            json!({}),
        );
    }
    let seen = crate::sink::ARRAY_INSERTS.lock().unwrap().clone();
    for table in ["\"ins\"", "\"wide_ins\""] {
        assert!(
            seen.iter().any(|t| t.contains(table)),
            "no INSERT with array parameters into {table}: {seen:?}"
        );
    }
    assert!(
        !seen.iter().any(|t| t.contains("arr_ins")),
        "an array column went through array parameters: {seen:?}"
    );
    for (from, to) in [("t", "ins"), ("wide", "wide_ins")] {
        assert_eq!(
            pg(&format!(
                "SELECT t::text FROM ferry_t_pg_bincopy.{from} t ORDER BY id"
            )),
            pg(&format!(
                "SELECT t::text FROM ferry_t_pg_bincopy.{to} t ORDER BY id"
            ))
        );
    }
    let copy = json!({"use_copy_statement": true});
    round_trip_with(
        PG_URL,
        "test.ferry_t_pg_bincopy.t",
        Some("test"),
        "ferry_t_pg_bincopy.copy",
        "test.ferry_t_pg_bincopy.copy",
        copy.clone(),
    );
    round_trip_with(
        PG_URL,
        "test.ferry_t_pg_bincopy.arr",
        Some("test"),
        "ferry_t_pg_bincopy.arr_copy",
        "test.ferry_t_pg_bincopy.arr_copy",
        copy,
    );
    let seen = crate::sink::BINARY_COPIES.lock().unwrap().clone();
    assert!(
        seen.iter().any(|t| t.contains("\"copy\"")),
        "no binary COPY into ferry_t_pg_bincopy.copy: {seen:?}"
    );
    assert!(
        !seen.iter().any(|t| t.contains("arr_copy")),
        "an array column went through binary COPY: {seen:?}"
    );
    // The same text on the server, value for value.
    assert_eq!(
        pg("SELECT t::text FROM ferry_t_pg_bincopy.t t ORDER BY id"),
        pg("SELECT t::text FROM ferry_t_pg_bincopy.copy t ORDER BY id")
    );
}

#[test]
fn pg_every_type_round_trips_through_a_created_table() {
    pg("DROP SCHEMA IF EXISTS ferry_t_pg_trip CASCADE; CREATE SCHEMA ferry_t_pg_trip;
        CREATE TABLE ferry_t_pg_trip.t (id int4 PRIMARY KEY, b bool, i2 int2, i8 int8, f4 float4, f8 float8,
          n numeric(10,3), c char(3), v varchar(10), tx text, j json, jb jsonb, u uuid,
          by bytea, d date, t time, ts timestamp, ai int4[], at text[], af float8[]);
        INSERT INTO ferry_t_pg_trip.t VALUES (1, true, -2, 9000000000, 1.5, 0.1, -1234567.891,
          'ab', 'héllo', 'it''s \\ ok', '{\"a\": 1}', '{\"b\": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
          '\\x00ff', '2024-02-29', '13:14:15.123456', '2024-02-29 13:14:15.5', '{1,NULL,3}', '{\"x\",\"y''z\"}', '{}');
        INSERT INTO ferry_t_pg_trip.t (id) VALUES (2);");
    round_trip(
        PG_URL,
        "test.ferry_t_pg_trip.t",
        Some("test"),
        "ferry_t_pg_trip.copy",
        "test.ferry_t_pg_trip.copy",
    );
}

#[test]
fn mysql_every_type_round_trips_through_a_created_table() {
    my("DROP DATABASE IF EXISTS ferry_t_my_trip;\nCREATE DATABASE ferry_t_my_trip;\n
        CREATE TABLE ferry_t_my_trip.t (id int PRIMARY KEY, b1 bit(1), b8 bit(8), bo tinyint(1), ti tinyint, tu tinyint unsigned,
          si smallint, su smallint unsigned, mi mediumint, iu int unsigned, bi bigint, bu bigint unsigned, de decimal(10,2),
          fl float, db double, ch char(3), vc varchar(10), tx text, js json, en enum('a','b'),
          bl blob, vb varbinary(4), dt date, tm time(6), dtm datetime(6), yr year);\n
        INSERT INTO ferry_t_my_trip.t VALUES (1, b'1', b'10000001', 1, -5, 250, -300, 65000, 8000000, 4000000000, -9000000000,
          18446744073709551615, 12345678.91, 1.5, 0.1, 'ab', 'héllo', 'it''s \\\\ ok', '{\"a\": 1}', 'b', x'00ff', x'0102', '2024-02-29',
          '13:14:15.123456', '2024-02-29 13:14:15.5', 2024);\n
        INSERT INTO ferry_t_my_trip.t (id) VALUES (2);");
    round_trip(
        MY_URL,
        "ferry_t_my_trip.t",
        Some("ferry_t_my_trip"),
        "copy",
        "ferry_t_my_trip.copy",
    );
}

/// A connection killed by the server between two flushes (an administrator's
/// `pg_terminate_backend`, a failover): with `max_retries` the writer reconnects and sends
/// the rows again; without, the flush fails with the server's error.
#[test]
fn pg_sink_retries_a_flush_after_its_connection_is_killed() {
    pg(
        "DROP SCHEMA IF EXISTS ferry_t_pg_retry CASCADE; CREATE SCHEMA ferry_t_pg_retry; \
        CREATE TABLE ferry_t_pg_retry.t (id int8 PRIMARY KEY, name text)",
    );
    let url = "jdbc:postgresql://127.0.0.1:5432/test?ApplicationName=ferry_t_pg_retry";
    let b = batches();
    for (retries, succeeds) in [(0, false), (2, true)] {
        pg("TRUNCATE ferry_t_pg_retry.t");
        let s = sink(
            json!({"url": url, "max_retries": retries, "batch_size": 100000,
                "query": "insert into ferry_t_pg_retry.t values (?, ?) on conflict (id) do update set name = excluded.name"}),
            true,
        )
        .unwrap();
        let mut w = writer(&s).unwrap();
        w.write(&b[0]).unwrap();
        w.prepare_commit(1).unwrap();
        let killed = pg(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = 'ferry_t_pg_retry'",
        );
        assert_eq!(killed, vec![vec![Some("1".to_string())]]);
        w.write(&b[1]).unwrap();
        let flushed = w.prepare_commit(2);
        assert_eq!(
            flushed.is_ok(),
            succeeds,
            "max_retries {retries}: {flushed:?}"
        );
        let n = pg("SELECT count(*) FROM ferry_t_pg_retry.t");
        let want = if succeeds { "1000" } else { "500" };
        assert_eq!(
            n,
            vec![vec![Some(want.to_string())]],
            "max_retries {retries}"
        );
    }
}

/// `use_copy_statement` keeps one COPY open across `batch_size` flushes until the
/// checkpoint: its rows are invisible before and all there after. A connection killed in
/// the middle of that COPY takes its rows with it: with `max_retries` the writer sends them
/// again on a new connection (every row once: the target's key refuses a second copy),
/// without it the checkpoint fails and nothing of the COPY is committed, as after `abort`.
#[test]
fn pg_copy_streams_across_flushes_and_resends_its_rows_after_a_lost_connection() {
    pg(
        "DROP SCHEMA IF EXISTS ferry_t_pg_copystream CASCADE; CREATE SCHEMA ferry_t_pg_copystream; \
        CREATE TABLE ferry_t_pg_copystream.t (id int8 PRIMARY KEY, name text)",
    );
    let url = "jdbc:postgresql://127.0.0.1:5432/test?ApplicationName=ferry_t_pg_copystream";
    let count = || pg("SELECT count(*)::text FROM ferry_t_pg_copystream.t")[0][0].clone();
    let b = batches();
    for (retries, ends) in [(2, "commit"), (0, "fail"), (0, "abort")] {
        pg("TRUNCATE ferry_t_pg_copystream.t");
        let s = sink(
            json!({"url": url, "generate_sink_sql": true, "table": "ferry_t_pg_copystream.t",
                "use_copy_statement": true, "batch_size": 100, "max_retries": retries}),
            false,
        )
        .unwrap();
        let mut w = writer(&s).unwrap();
        w.write(&b[0]).unwrap();
        // Five flushes went into one COPY, still open.
        assert_eq!(count().as_deref(), Some("0"), "{ends}");
        let copying = pg(
            "SELECT query FROM pg_stat_activity WHERE application_name = 'ferry_t_pg_copystream'",
        );
        assert!(
            copying
                .iter()
                .any(|r| r[0].as_deref().is_some_and(|q| q.starts_with("COPY"))),
            "{copying:?}"
        );
        if ends == "abort" {
            w.abort().unwrap();
            assert_eq!(count().as_deref(), Some("0"));
            continue;
        }
        let killed = pg(
            "SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity \
             WHERE application_name = 'ferry_t_pg_copystream'",
        );
        assert_eq!(killed, vec![vec![Some("1".to_string())]]);
        let flushed = w.write(&b[1]).and_then(|_| w.prepare_commit(1));
        match ends {
            "commit" => {
                flushed.unwrap();
                assert_eq!(count().as_deref(), Some("1000"));
                assert_eq!(
                    pg("SELECT count(DISTINCT id)::text, min(id)::text, max(id)::text FROM ferry_t_pg_copystream.t"),
                    vec![vec![Some("1000".into()), Some("0".into()), Some("999".into())]]
                );
            }
            _ => {
                assert!(flushed.is_err(), "max_retries 0 after a lost COPY");
                assert_eq!(count().as_deref(), Some("0"));
            }
        }
    }
}

/// A writer of the run before a crash, as a resumed run's setup finds it: its sessions end,
/// while a fresh run's setup leaves them alone. `alive(name)` counts the live sessions
/// named `name`.
fn fences_the_previous_runs_writer(url: &str, table: &str, alive: &dyn Fn(&str) -> usize) {
    let options = json!({"url": url, "generate_sink_sql": true, "database": "test", "table": table,
        "primary_keys": ["id"]});
    let build = || {
        crate::JdbcSinkFactory
            .build(
                &mut Options::from_json("Jdbc", options.clone()),
                &[input_table(true)],
            )
            .unwrap()
    };
    let s = build();
    s.setup(&resolve_ctx("sink Jdbc")).unwrap();
    let name = s.session_name("testkit", 0);
    let ctx = ferry_api::WriterContext {
        subtask: 0,
        parallelism: 1,
        job: job(JobMode::Batch),
        attempt: "fence".into(),
    };
    let w = s.create_writer(&ctx, None).unwrap();
    assert_eq!(alive(&name), 1, "the writer's named session");
    // A fresh run ends nothing: jobs that share a name never stop each other.
    build().setup(&resolve_ctx("sink Jdbc")).unwrap();
    assert_eq!(alive(&name), 1, "a fresh run ended the writer's session");
    let mut resumed = resolve_ctx("sink Jdbc");
    resumed.resumed = true;
    build().setup(&resumed).unwrap();
    let start = std::time::Instant::now();
    while alive(&name) > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the old writer's session lives on"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(w);
}

#[test]
fn pg_a_resumed_run_ends_the_sessions_of_the_run_before() {
    pg("DROP SCHEMA IF EXISTS ferry_t_pg_fence CASCADE; CREATE SCHEMA ferry_t_pg_fence;");
    fences_the_previous_runs_writer(PG_URL, "ferry_t_pg_fence.t", &|name| {
        pg(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}'"
        ))[0][0]
            .as_deref()
            .unwrap()
            .parse()
            .unwrap()
    });
}

#[test]
fn mysql_a_resumed_run_ends_the_sessions_of_the_run_before() {
    my("DROP DATABASE IF EXISTS ferry_t_my_fence;\nCREATE DATABASE ferry_t_my_fence");
    fences_the_previous_runs_writer(MY_URL, "ferry_t_my_fence.t", &|name| {
        my(&format!("SELECT IS_USED_LOCK('{name}')"))
            .iter()
            .filter(|r| r[0].is_some())
            .count()
    });
}

#[test]
fn the_option_lists_name_no_option_twice_and_every_default_fits_its_kind() {
    use ferry_api::{SinkFactory as _, SourceFactory as _};
    ferry_api::declare::check_specs(crate::JdbcSourceFactory.options(), &[]).unwrap();
    ferry_api::declare::check_specs(crate::JdbcSinkFactory.options(), &[]).unwrap();
}

/// A fresh writer (subtask 0 of 1, nothing restored) of `s`.
fn writer(s: &Arc<dyn Sink>) -> Result<Box<dyn ferry_api::SinkWriter>> {
    s.create_writer(
        &ferry_api::WriterContext {
            subtask: 0,
            parallelism: 1,
            job: job(JobMode::Batch),
            attempt: "a".into(),
        },
        None,
    )
}

/// Writes `batch` through a writer of `s` and commits it.
fn write_one(s: &Arc<dyn Sink>, batch: &ChangeBatch) -> Result<()> {
    write_all(s, std::slice::from_ref(batch))
}

/// Writes `batches` through one writer of `s` and commits them as checkpoint 1.
fn write_all(s: &Arc<dyn Sink>, batches: &[ChangeBatch]) -> Result<()> {
    let mut w = writer(s)?;
    assert!(w.keeps_unchanged());
    for b in batches {
        w.write(b)?;
    }
    w.prepare_commit(1)?;
    w.close()
}

/// +U rows of keys 1, 2 and 7, leaving `name` unchanged (without its value) in 1 and 7;
/// 7 is not in the target. Then +I rows leaving `name` to the target (changes written
/// before the source gained the column): key 8, new, and key 2, which the target holds.
fn unchanged_updates() -> ChangeBatch {
    let data = RecordBatch::try_new(
        input_schema(),
        vec![
            Arc::new(Int64Array::from(vec![1, 1, 2, 2, 7, 8, 2])),
            Arc::new(StringArray::from(vec![
                None,
                None,
                Some("b"),
                Some("b2"),
                None,
                None,
                None,
            ])),
        ],
    )
    .unwrap();
    ChangeBatch::with_kinds(
        "src".into(),
        data,
        UInt8Array::from(vec![1, 2, 1, 2, 2, 0, 0]),
    )
    .with_unchanged(ferry_api::Unchanged {
        columns: vec![(
            1,
            arrow::array::BooleanArray::from(vec![false, true, false, false, true, true, true]),
        )],
    })
}

#[test]
fn sinks_keep_the_targets_value_where_an_update_leaves_a_column_unchanged() {
    // A table with a third column the rows change, so that an update has something to set.
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]));
    let table =
        TableSchema::new("src", schema.clone()).with_catalog((*input_table(true).catalog).clone());
    let u = unchanged_updates();
    let batch = ChangeBatch {
        data: RecordBatch::try_new(
            schema,
            vec![
                u.data.column(0).clone(),
                u.data.column(1).clone(),
                Arc::new(Int64Array::from(vec![10, 11, 20, 21, 70, 80, 22])),
            ],
        )
        .unwrap(),
        ..u
    };
    let make = |opts: Value| -> Result<Arc<dyn Sink>> {
        let s = JdbcSinkFactory.create(
            &mut Options::from_json("Jdbc", opts),
            std::slice::from_ref(&table),
            &job(JobMode::Batch),
        )?;
        s.setup(&resolve_ctx("sink Jdbc"))?;
        Ok(s)
    };
    let expect = vec![
        vec![Some("1".into()), Some("kept".into()), Some("11".into())],
        vec![Some("2".into()), Some("b2".into()), Some("22".into())],
        vec![Some("8".into()), Some("dflt".into()), Some("80".into())],
    ];
    // PostgreSQL.
    pg(
        "DROP SCHEMA IF EXISTS ferry_t_pg_unch CASCADE; CREATE SCHEMA ferry_t_pg_unch;
        CREATE TABLE ferry_t_pg_unch.t (id int8 PRIMARY KEY, name text DEFAULT 'dflt', n int8);
        INSERT INTO ferry_t_pg_unch.t VALUES (1, 'kept', 0), (2, 'b', 0);",
    );
    let s = make(json!({"url": PG_URL, "generate_sink_sql": true, "table": "ferry_t_pg_unch.t", "primary_keys": ["id"]})).unwrap();
    write_one(&s, &batch).unwrap();
    assert_eq!(
        pg("SELECT id, name, n FROM ferry_t_pg_unch.t ORDER BY id"),
        expect
    );
    // MariaDB.
    my("DROP DATABASE IF EXISTS ferry_t_my_unch;\nCREATE DATABASE ferry_t_my_unch;\nCREATE TABLE ferry_t_my_unch.t (id bigint PRIMARY KEY, name varchar(20) DEFAULT 'dflt', n bigint);\nINSERT INTO ferry_t_my_unch.t VALUES (1, 'kept', 0), (2, 'b', 0);");
    let s = make(json!({"url": MY_URL, "generate_sink_sql": true, "database": "ferry_t_my_unch", "table": "t", "primary_keys": ["id"]})).unwrap();
    write_one(&s, &batch).unwrap();
    assert_eq!(
        my("SELECT id, name, n FROM ferry_t_my_unch.t ORDER BY id"),
        expect
    );
    // A user's statement cannot leave a column alone: refused, naming the column.
    pg("CREATE TABLE ferry_t_pg_unch.q (id int8, name text, n int8)");
    let s = make(json!({"url": PG_URL, "query": "insert into ferry_t_pg_unch.q values (?, ?, ?)"}))
        .unwrap();
    let e = write_one(&s, &batch).unwrap_err().to_string();
    assert!(
        e.contains("name") && e.contains("REPLICA IDENTITY FULL"),
        "{e}"
    );
    assert!(pg("SELECT * FROM ferry_t_pg_unch.q").is_empty());
}

/// The row estimates splits are planned from instead of `count(*)`: PostgreSQL's none for
/// a table never analyzed (the source counts), the planner's after `ANALYZE`, scaled to
/// the pages of a table that grew since; MariaDB's kept current by InnoDB.
#[test]
fn row_estimates_follow_the_table_and_are_none_before_postgres_analyzes() {
    use ferry_db::relation::{estimated_rows, TablePath};
    use ferry_db::Dialect;
    let estimate = |rows: Vec<Vec<Option<String>>>| {
        estimated_rows(
            rows.into_iter()
                .next()
                .and_then(|r| r.into_iter().next())
                .flatten()
                .as_deref(),
        )
    };
    let within = |n: Option<i128>, want: i128| n.is_some_and(|n| (n - want).abs() * 4 <= want);
    let path = TablePath::parse(Dialect::Postgres, "ferry_t_estimate.t");
    let q = path.estimated_rows_query(Dialect::Postgres);
    pg(
        "DROP SCHEMA IF EXISTS ferry_t_estimate CASCADE; CREATE SCHEMA ferry_t_estimate;
        CREATE TABLE ferry_t_estimate.t (id int8 PRIMARY KEY, v text) WITH (autovacuum_enabled = false);
        INSERT INTO ferry_t_estimate.t SELECT g, repeat('x', 50) FROM generate_series(1, 20000) g;",
    );
    assert_eq!(estimate(pg(&q)), None, "never analyzed");
    pg("ANALYZE ferry_t_estimate.t");
    let n = estimate(pg(&q));
    assert!(within(n, 20_000), "{n:?}");
    pg("INSERT INTO ferry_t_estimate.t SELECT g, repeat('x', 50) FROM generate_series(20001, 60000) g");
    let n = estimate(pg(&q));
    assert!(within(n, 60_000), "grown to 60000 rows: {n:?}");
    let missing = TablePath::parse(Dialect::Postgres, "ferry_t_estimate.nothing");
    assert_eq!(
        estimate(pg(&missing.estimated_rows_query(Dialect::Postgres))),
        None
    );
    pg("DROP SCHEMA ferry_t_estimate CASCADE");

    let path = TablePath::parse(Dialect::MySql, "ferry_t_estimate.t");
    let q = path.estimated_rows_query(Dialect::MySql);
    my(
        "DROP DATABASE IF EXISTS ferry_t_estimate;\nCREATE DATABASE ferry_t_estimate;\n\
        CREATE TABLE ferry_t_estimate.t (id bigint PRIMARY KEY, v text);\n\
        INSERT INTO ferry_t_estimate.t SELECT seq, repeat('x', 50) FROM seq_1_to_30000",
    );
    let n = estimate(my(&q));
    assert!(within(n, 30_000), "{n:?}");
    my("DELETE FROM ferry_t_estimate.t WHERE id > 10000");
    let n = estimate(my(&q));
    assert!(within(n, 10_000), "after deleting 20000 rows: {n:?}");
    // A path without a database names the connection's.
    let bare = TablePath::parse(Dialect::MySql, "t");
    assert!(bare
        .estimated_rows_query(Dialect::MySql)
        .contains("DATABASE()"));
    my("DROP DATABASE ferry_t_estimate");
}
