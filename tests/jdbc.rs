//! SeaTunnel's own Jdbc job files (its `connector-jdbc-e2e` tests), with only host names and
//! credentials rewritten (`tests/jdbc/`), run through the `ferry` binary on both engines
//! against the local PostgreSQL and MariaDB. Each case sets up the tables SeaTunnel's Java
//! IT class creates, runs the job and checks the target as that class does (the sink
//! tables hold what the source tables hold, or the rows it lists).
//!
//! The job files name fixed databases (`seatunnel`, `source`, `sink`, PostgreSQL's
//! `public.sink`), so the cases of one server run one at a time (one engine after the
//! other); PostgreSQL's run beside MariaDB's.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::{ferry, repo_root, Rng};

static PG_ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
static MY_ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn psql(sql: &str) -> String {
    common::psql("test", sql)
}

fn mariadb(sql: &str) -> String {
    let out = Command::new("mariadb")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            "3306",
            "-u",
            "root",
            "-D",
            "test",
            "--batch",
            "--skip-column-names",
            "-e",
            sql,
        ])
        .output()
        .expect("mariadb runs");
    assert!(
        out.status.success(),
        "mariadb: {}\n{sql}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn case(path: &str) -> PathBuf {
    repo_root().join("tests/jdbc").join(path)
}

fn run(job: &Path, engine: &str) {
    run_with(job, engine, &[]);
}

fn run_with(job: &Path, engine: &str, args: &[&str]) {
    let out = ferry()
        .arg("run")
        .arg(job)
        .args(["--engine", engine])
        .args(args)
        .output()
        .expect("ferry runs");
    assert!(
        out.status.success(),
        "{} on {engine} failed:\n{}\n{}",
        job.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The columns of SeaTunnel's MySQL all-types tables (`JdbcMysqlIT`,
/// `JdbcMysqlMultipleTablesIT`), in the order its insert statements list them.
const MYSQL_COLUMNS: &str = "
    `c_bit_1` bit(1) DEFAULT NULL, `c_bit_8` bit(8) DEFAULT NULL, `c_bit_16` bit(16) DEFAULT NULL,
    `c_bit_32` bit(32) DEFAULT NULL, `c_bit_64` bit(64) DEFAULT NULL, `c_boolean` tinyint(1) DEFAULT NULL,
    `c_tinyint` tinyint(4) DEFAULT NULL, `c_tinyint_unsigned` tinyint(3) unsigned DEFAULT NULL,
    `c_smallint` smallint(6) DEFAULT NULL, `c_smallint_unsigned` smallint(5) unsigned DEFAULT NULL,
    `c_mediumint` mediumint(9) DEFAULT NULL, `c_mediumint_unsigned` mediumint(8) unsigned DEFAULT NULL,
    `c_int` int(11) DEFAULT NULL, `c_integer` int(11) DEFAULT NULL, `c_bigint` bigint(20) DEFAULT NULL,
    `c_bigint_unsigned` bigint(20) unsigned DEFAULT NULL, `c_decimal` decimal(20, 0) DEFAULT NULL,
    `c_decimal_unsigned` decimal(38, 18) DEFAULT NULL, `c_float` float DEFAULT NULL,
    `c_float_unsigned` float unsigned DEFAULT NULL, `c_double` double DEFAULT NULL,
    `c_double_unsigned` double unsigned DEFAULT NULL, `c_char` char(1) DEFAULT NULL, `c_tinytext` tinytext,
    `c_mediumtext` mediumtext, `c_text` text, `c_varchar` varchar(255) DEFAULT NULL, `c_json` json DEFAULT NULL,
    `c_longtext` longtext, `c_date` date DEFAULT NULL, `c_datetime` datetime DEFAULT NULL,
    `c_time` time DEFAULT NULL, `c_timestamp` timestamp NULL DEFAULT NULL, `c_tinyblob` tinyblob,
    `c_mediumblob` mediumblob, `c_blob` blob, `c_longblob` longblob, `c_varbinary` varbinary(255) DEFAULT NULL,
    `c_binary` binary(1) DEFAULT NULL, `c_year` year(4) DEFAULT NULL, `c_int_unsigned` int(10) unsigned DEFAULT NULL,
    `c_integer_unsigned` int(10) unsigned DEFAULT NULL, `c_bigint_30` BIGINT(40) unsigned DEFAULT NULL,
    `c_decimal_unsigned_30` DECIMAL(30) unsigned DEFAULT NULL, `c_decimal_30` DECIMAL(30) DEFAULT NULL";

/// Rows of every type (and one of NULLs but `c_int`), as SeaTunnel's ITs generate them.
fn mysql_rows(table: &str, n: u32) -> String {
    format!(
        "INSERT INTO {table} SELECT seq % 2, seq % 256, seq * 3, seq * 1000, seq * 100000, seq % 2, seq % 100 - 50, seq % 250,
            -seq, seq * 10, seq * 100, seq * 200, seq * 1000, -seq, seq * 1000000000, 18446744073709551615 - seq, seq * 12345,
            seq + 0.123456789012345678, seq / 4, seq / 8, seq / 3, seq * 1.5, 'a', concat('tt', seq), concat('mt', seq),
            concat('it''s \\\\ ', seq), concat('v', seq), concat('{{\"k\": ', seq, '}}'), repeat('l', seq),
            '2024-01-01' + INTERVAL seq DAY, '2024-01-01 10:00:00' + INTERVAL seq MINUTE, sec_to_time(seq * 37),
            '2024-02-01 00:00:00' + INTERVAL seq SECOND, unhex('00ff'), unhex(hex(seq)), concat('b', seq), repeat('x', seq),
            unhex(lpad(hex(seq), 4, '0')), char(65 + seq % 26), 2000 + seq % 100, 4000000000 + seq, seq, seq,
            seq * 100000000000000000000, -seq * 100000000000000000000
         FROM (SELECT CAST(seq AS SIGNED) AS seq FROM seq_1_to_{n}) AS s;
         INSERT INTO {table} (c_int) VALUES (0);"
    )
}

fn mysql_all_types(db: &str, tables: &[&str], rows: bool) {
    let mut sql = format!("DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db};");
    for t in tables {
        sql.push_str(&format!("CREATE TABLE {db}.{t} ({MYSQL_COLUMNS});"));
        if rows {
            sql.push_str(&mysql_rows(&format!("{db}.{t}"), 100));
        }
    }
    mariadb(&sql);
}

/// Every row of a MySQL table as text, in a fixed order.
fn mysql_table(table: &str, columns: &str) -> String {
    mariadb(&format!(
        "SELECT {columns} FROM {table} ORDER BY c_int, c_integer"
    ))
}

fn pg_changelog(engine: &str) {
    // JdbcSinkCDCChangelogIT: the table the job upserts into.
    psql("DROP TABLE IF EXISTS public.sink; CREATE TABLE sink (pk_id BIGINT NOT NULL PRIMARY KEY, name varchar(255), score INT)");
    run(&case("pg/jdbc_sink_cdc_changelog.conf"), engine);
    assert_eq!(
        psql("SELECT pk_id, name, score FROM sink ORDER BY pk_id"),
        "1|A_1|100\n3|C|100\n"
    );
}

fn mysql_source_and_sink(engine: &str) {
    // JdbcMysqlIT: `seatunnel.source` → `seatunnel.sink` through the insert with `?`, and
    // the same with XA (its 42 columns: all but the three 30-digit ones).
    for (job, columns) in [
        ("mysql/jdbc_mysql_source_and_sink.conf", "*"),
        // Three readers over a DECIMAL(30) key; five over BIGINT UNSIGNED with bounds that
        // hold none of the rows (the open first and last ranges still read them all).
        ("mysql/jdbc_mysql_source_and_sink_parallel.conf", "*"),
        ("mysql/jdbc_mysql_source_and_sink_parallel_upper_lower.conf", "*"),
        (
            "mysql/jdbc_mysql_source_and_sink_xa.conf",
            "c_bit_1, c_bit_8, c_bit_16, c_bit_32, c_bit_64, c_boolean, c_tinyint, c_tinyint_unsigned, c_smallint, c_smallint_unsigned, c_mediumint, c_mediumint_unsigned, c_int, c_integer, c_bigint, c_bigint_unsigned, c_decimal, c_decimal_unsigned, c_float, c_float_unsigned, c_double, c_double_unsigned, c_char, c_tinytext, c_mediumtext, c_text, c_varchar, c_json, c_longtext, c_date, c_datetime, c_time, c_timestamp, c_tinyblob, c_mediumblob, c_blob, c_longblob, c_varbinary, c_binary, c_year, c_int_unsigned, c_integer_unsigned",
        ),
    ] {
        mysql_all_types("seatunnel", &["source", "sink"], false);
        mariadb(&mysql_rows("seatunnel.source", 100));
        run(&case(job), engine);
        let want = mysql_table("seatunnel.source", columns);
        assert_eq!(want.lines().count(), 101, "{job}");
        assert_eq!(mysql_table("seatunnel.sink", columns), want, "{job} on {engine}");
        // XA RECOVER lists the whole server's prepared transactions: those of the XA crash
        // tests (job id `xa`), which run beside this one, are theirs to resolve.
        let left: Vec<String> = mariadb("XA RECOVER")
            .lines()
            .filter(|l| l.contains("ferry:") && !l.contains("ferry:xa:"))
            .map(str::to_string)
            .collect();
        assert!(left.is_empty(), "prepared transactions are left: {left:?}");
    }
}

fn mysql_table_path_and_table_list(engine: &str) {
    // JdbcMysqlMultipleTablesIT: `source.table1/2` → `sink.table1/2` (generated inserts).
    for job in [
        "mysql/jdbc_mysql_source_using_table_path.conf",
        "mysql/jdbc_mysql_source_and_sink_with_multiple_tables.conf",
    ] {
        mysql_all_types("source", &["table1", "table2"], true);
        mysql_all_types("sink", &["table1", "table2"], false);
        run(&case(job), engine);
        let tables: &[&str] = if job.contains("multiple") {
            &["table1", "table2"]
        } else {
            &["table1"]
        };
        for t in tables {
            let want = mysql_table(&format!("source.{t}"), "*");
            assert_eq!(
                mysql_table(&format!("sink.{t}"), "*"),
                want,
                "{job} {t} on {engine}"
            );
        }
    }
}

/// The values of one row of SeaTunnel's PostgreSQL all-types tables (`JdbcPostgresIT`,
/// `JdbcPostgresIdentifierIT`), after `gid` (and `uuid_col`), up to the geography column.
const PG_ROW_VALUES: &str = "'Hello World', 'Test', 'Testing', true, 10, 100, 1000, 10.55, 8.8888, 3.14, 3.14159265, 1, 100, 10000,
    '2023-05-07', '2023-05-07 14:30:00', 'Testing', 21, 'Leblanc',
    ST_GeomFromText('POINT(-122.3452 47.5925)', 4326),
    ST_GeomFromText('LINESTRING(-122.3451 47.5924, -122.3449 47.5923)', 4326),
    ST_GeomFromText('POLYGON((-122.3453 47.5922, -122.3453 47.5926, -122.3448 47.5926, -122.3448 47.5922, -122.3453 47.5922))', 4326),
    ST_GeomFromText('MULTIPOINT(-122.3459 47.5927, -122.3445 47.5918)', 4326),
    ST_GeomFromText('MULTILINESTRING((-122.3463 47.5920, -122.3461 47.5919),(-122.3459 47.5924, -122.3457 47.5923))', 4326),
    ST_GeomFromText('MULTIPOLYGON(((-122.3458 47.5925, -122.3458 47.5928, -122.3454 47.5928, -122.3454 47.5925, -122.3458 47.5925)),((-122.3453 47.5921, -122.3453 47.5924, -122.3448 47.5924, -122.3448 47.5921, -122.3453 47.5921)))', 4326),
    ST_GeomFromText('GEOMETRYCOLLECTION(POINT(-122.3462 47.5921), LINESTRING(-122.3460 47.5924, -122.3457 47.5924))', 4326),
    ST_GeographyFromText('POINT(-122.3452 47.5925)')";

const PG_COMMON_COLUMNS: &str = "text_col, varchar_col, char_col, boolean_col, smallint_col, integer_col, bigint_col, decimal_col, numeric_col, real_col, double_precision_col, smallserial_col, serial_col, bigserial_col, date_col, timestamp_col, bpchar_col, age, name";

const PG_GEOMETRY_COLUMNS: [&str; 8] = [
    "point",
    "linestring",
    "polygon_colums",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
    "geog",
];

/// The column definitions SeaTunnel's ITs share: the scalar ones, then the geometry
/// columns as `geometry` (source) or `varchar(2000)` (sink), each with `ident` applied.
fn pg_columns(ident: fn(&str) -> String, geometry: bool) -> String {
    let scalar = [
        "text_col TEXT",
        "varchar_col VARCHAR(255)",
        "char_col CHAR(10)",
        "boolean_col bool",
        "smallint_col int2",
        "integer_col int4",
        "bigint_col BIGINT",
        "decimal_col DECIMAL(10, 2)",
        "numeric_col NUMERIC(8, 4)",
        "real_col float4",
        "double_precision_col float8",
        "smallserial_col SMALLSERIAL",
        "serial_col SERIAL",
        "bigserial_col BIGSERIAL",
        "date_col DATE",
        "timestamp_col TIMESTAMP",
        "bpchar_col BPCHAR(10)",
        "age INT NOT NULL",
        "name VARCHAR(255) NOT NULL",
    ];
    let mut cols: Vec<String> = scalar
        .iter()
        .map(|c| {
            let (name, ty) = c.split_once(' ').unwrap();
            format!("{} {ty}", ident(name))
        })
        .collect();
    let geo_types = [
        "geometry(POINT, 4326)",
        "geometry(LINESTRING, 4326)",
        "geometry(POLYGON, 4326)",
        "geometry(MULTIPOINT, 4326)",
        "geometry(MULTILINESTRING, 4326)",
        "geometry(MULTIPOLYGON, 4326)",
        "geometry(GEOMETRYCOLLECTION, 4326)",
        "geography(POINT, 4326)",
    ];
    for (c, t) in PG_GEOMETRY_COLUMNS.iter().zip(geo_types) {
        let ty = if geometry { t } else { "varchar(2000) NULL" };
        cols.push(format!("{} {ty}", ident(c)));
    }
    cols.join(", ")
}

/// The sink's geometry columns read back as SeaTunnel's ITs do (cast to geometry).
fn pg_geometry_select(ident: fn(&str) -> String, cast: bool) -> String {
    PG_GEOMETRY_COLUMNS
        .iter()
        .map(|c| {
            let ty = if *c == "geog" {
                "geography"
            } else {
                "geometry"
            };
            if cast {
                format!("CAST({} AS {ty})", ident(c))
            } else {
                c.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn pg_source_and_sink(engine: &str) {
    // JdbcPostgresIT: `pg_e2e_source_table` (1000 rows of every type, PostGIS columns
    // included) → `pg_e2e_sink_table`, by generated upserts, COPY, `?` inserts with two
    // kinds of parallel reads, and XA.
    let plain = |s: &str| s.to_string();
    psql(&format!(
        "DROP TABLE IF EXISTS pg_e2e_source_table, pg_e2e_sink_table;
         CREATE TABLE pg_e2e_source_table (gid SERIAL PRIMARY KEY, uuid_col UUID, {}, json_col json NOT NULL, jsonb_col jsonb NOT NULL, xml_col xml NOT NULL);
         CREATE TABLE pg_e2e_sink_table (gid SERIAL PRIMARY KEY, uuid_col UUID, {}, json_col json NOT NULL, jsonb_col jsonb NOT NULL, xml_col xml NOT NULL);
         INSERT INTO pg_e2e_source_table (gid, uuid_col, {PG_COMMON_COLUMNS}, {}, json_col, jsonb_col, xml_col)
           SELECT i, gen_random_uuid(), {PG_ROW_VALUES}, '{{\"key\":\"test\"}}', '{{\"key\":\"test\"}}', '<XX:NewSize>test</XX:NewSize>'
           FROM generate_series(1, 1000) AS i",
        pg_columns(plain, true),
        pg_columns(plain, false),
        pg_geometry_select(plain, false),
    ));
    let source = format!(
        "SELECT gid, uuid_col, {PG_COMMON_COLUMNS}, {}, json_col, jsonb_col, cast(xml_col as varchar) FROM pg_e2e_source_table ORDER BY gid",
        pg_geometry_select(plain, false)
    );
    let sink = format!(
        "SELECT gid, uuid_col, {PG_COMMON_COLUMNS}, {}, json_col, jsonb_col, cast(xml_col as varchar) FROM pg_e2e_sink_table ORDER BY gid",
        pg_geometry_select(plain, true)
    );
    let want = psql(&source);
    assert_eq!(want.lines().count(), 1000);
    for job in [
        "pg/jdbc_postgres_source_and_sink.conf",
        "pg/jdbc_postgres_source_and_sink_copy_stmt.conf",
        "pg/jdbc_postgres_source_and_sink_parallel.conf",
        "pg/jdbc_postgres_source_and_sink_parallel_upper_lower.conf",
        "pg/jdbc_postgres_source_and_sink_xa.conf",
    ] {
        psql("TRUNCATE pg_e2e_sink_table");
        run(&case(job), engine);
        assert_eq!(psql(&sink), want, "{job} on {engine}");
    }
    // Ferry's own round trip: the same table → Parquet → a table created from the files.
    let dir = tempfile::tempdir().unwrap();
    let vars = format!("dir={}", dir.path().join("parquet").display());
    run_with(&case("ferry/pg_to_parquet.conf"), engine, &["-i", &vars]);
    run_with(&case("ferry/parquet_to_pg.conf"), engine, &["-i", &vars]);
    let round_trip = format!(
        "SELECT gid, uuid_col, {PG_COMMON_COLUMNS}, {}, json_col, jsonb_col, xml_col FROM pg_parquet_round_trip ORDER BY gid",
        pg_geometry_select(plain, false)
    );
    assert_eq!(
        psql(&round_trip),
        want,
        "PostgreSQL → Parquet → PostgreSQL on {engine}"
    );

    let left = psql(
        "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'ferry:%' AND gid NOT LIKE 'ferry:xa:%'",
    );
    assert!(left.is_empty(), "prepared transactions are left: {left}");

    // JdbcPostgresIdentifierIT: `field_ide = UPPERCASE` into a table of upper-case names.
    let upper = |s: &str| format!("\"{}\"", s.to_uppercase());
    psql(&format!(
        "DROP TABLE IF EXISTS pg_ide_source_table, \"PG_IDE_SINK_TABLE\";
         CREATE TABLE pg_ide_source_table (gid SERIAL PRIMARY KEY, {}, inet_col INET);
         CREATE TABLE \"PG_IDE_SINK_TABLE\" (\"GID\" SERIAL PRIMARY KEY, {}, \"INET_COL\" INET NULL);
         INSERT INTO pg_ide_source_table (gid, {PG_COMMON_COLUMNS}, {}, inet_col)
           SELECT i, {PG_ROW_VALUES}, '192.168.1.1' FROM generate_series(1, 10) AS i",
        pg_columns(plain, true),
        pg_columns(upper, false),
        pg_geometry_select(plain, false),
    ));
    let upper_common: Vec<String> = PG_COMMON_COLUMNS.split(", ").map(upper).collect();
    let want = psql(&format!(
        "SELECT gid, {PG_COMMON_COLUMNS}, {}, inet_col FROM pg_ide_source_table ORDER BY gid",
        pg_geometry_select(plain, false)
    ));
    run(&case("pg/jdbc_postgres_ide_source_and_sink.conf"), engine);
    let got = psql(&format!(
        "SELECT \"GID\", {}, {}, \"INET_COL\" FROM \"PG_IDE_SINK_TABLE\" ORDER BY \"GID\"",
        upper_common.join(", "),
        pg_geometry_select(upper, true)
    ));
    assert_eq!(want.lines().count(), 10);
    assert_eq!(
        got, want,
        "jdbc_postgres_ide_source_and_sink.conf on {engine}"
    );
}

fn pg_named_parameters(engine: &str) {
    // JdbcSinkNameParameterSQLIT: FakeSource → `insert … values (:user_id, :name)`.
    psql("DROP TABLE IF EXISTS public.sink; CREATE TABLE sink (user_id BIGINT NOT NULL PRIMARY KEY, name varchar(255), age INT)");
    run(&case("pg/jdbc_sink_name_parameter_sql.conf"), engine);
    assert_eq!(
        psql("SELECT count(*), count(DISTINCT user_id), count(name), count(age) FROM sink"),
        "100|100|100|0\n"
    );
}

fn mysql_save_mode(engine: &str) {
    // JdbcMysqlSaveModeHandlerIT: a query source into `test_laowang`, which the sink
    // creates (CREATE_SCHEMA_WHEN_NOT_EXIST) with the source's columns and key `id`.
    let columns = MYSQL_COLUMNS.replace("`c_time` time DEFAULT NULL,", "");
    mariadb(&format!(
        "DROP DATABASE IF EXISTS seatunnel; CREATE DATABASE seatunnel;
         CREATE TABLE seatunnel.source (`id` bigint(20) NOT NULL, {columns}, UNIQUE (c_int));"
    ));
    let rows = mysql_rows("seatunnel.source", 50)
        .replace(
            "INSERT INTO seatunnel.source SELECT ",
            "INSERT INTO seatunnel.source SELECT seq, ",
        )
        .replace(" sec_to_time(seq * 37),", "")
        .replace("INSERT INTO seatunnel.source (c_int) VALUES (0);", "");
    mariadb(&rows);
    run(
        &case("mysql/save_mode/jdbc_mysql_source_and_sink.conf"),
        engine,
    );
    let count = |t: &str| {
        mariadb(&format!(
            "SELECT count(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'seatunnel' AND TABLE_NAME = '{t}'"
        ))
    };
    assert_eq!(count("test_laowang"), count("source"));
    assert_eq!(
        mariadb("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = 'seatunnel' AND TABLE_NAME = 'test_laowang' AND CONSTRAINT_NAME = 'PRIMARY'"),
        "id\n"
    );
    // The IT checks the created table; its rows are the source's too (the created column
    // types are SeaTunnel's mapping, bit(1) a boolean and datetime at microseconds, so the
    // rows compare by their text columns and numbers).
    let digest = "SELECT count(*), sum(id), sum(c_int), sum(c_bigint_unsigned), group_concat(c_varchar ORDER BY id), group_concat(c_json ORDER BY id)";
    assert_eq!(
        mariadb(&format!("{digest} FROM seatunnel.test_laowang")),
        mariadb(&format!("{digest} FROM seatunnel.source")),
        "save mode job on {engine}"
    );
}

/// The PostgreSQL cases; they share tables (`public.sink`, the all-types tables), so one
/// engine's run at a time.
fn pg_cases(engine: &str) {
    let _one = PG_ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    pg_changelog(engine);
    pg_source_and_sink(engine);
    pg_named_parameters(engine);
}

/// The MySQL/MariaDB cases (databases `seatunnel`, `source`, `sink`): one engine at a time,
/// beside the PostgreSQL ones.
fn mysql_cases(engine: &str) {
    let _one = MY_ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    mysql_save_mode(engine);
    mysql_source_and_sink(engine);
    mysql_table_path_and_table_list(engine);
}

#[test]
fn seatunnels_postgresql_jdbc_jobs_hold_what_its_tests_expect_on_the_embedded_engine() {
    pg_cases("local");
}

#[test]
fn seatunnels_postgresql_jdbc_jobs_hold_what_its_tests_expect_on_spark() {
    pg_cases("spark");
}

#[test]
fn seatunnels_mysql_jdbc_jobs_hold_what_its_tests_expect_on_the_embedded_engine() {
    mysql_cases("local");
}

#[test]
fn seatunnels_mysql_jdbc_jobs_hold_what_its_tests_expect_on_spark() {
    mysql_cases("spark");
}

#[test]
fn check_states_the_guarantee_and_never_shows_the_password() {
    let _one = PG_ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    psql("DROP SCHEMA IF EXISTS ferry_t_check CASCADE; CREATE SCHEMA ferry_t_check; CREATE TABLE ferry_t_check.src (id int8 PRIMARY KEY, name text)");
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("check.conf");
    for (sink, says) in [
        ("generate_sink_sql = true\n    table = \"ferry_t_check.dst\"\n    primary_keys = [\"${primary_key}\"]", "delivery: exactly-once"),
        ("generate_sink_sql = true\n    table = \"ferry_t_check.dst\"", "delivery: at-least-once (sink Jdbc: plain inserts are written again after a restart"),
        ("query = \"insert into ferry_t_check.dst values (?, ?)\"\n    is_exactly_once = true", "[exactly-once: XA transactions prepared at each checkpoint barrier"),
    ] {
        std::fs::write(
            &job,
            format!(
                "env {{ job.mode = BATCH }}\nsource {{\n  Jdbc {{\n    url = \"jdbc:postgresql://127.0.0.1:5432/test\"\n    user = postgres\n    password = \"s3cret-pw\"\n    table_path = \"test.ferry_t_check.src\"\n  }}\n}}\nsink {{\n  Jdbc {{\n    url = \"jdbc:postgresql://127.0.0.1:5432/test?password=s3cret-pw\"\n    password = \"s3cret-pw\"\n    {sink}\n  }}\n}}\n"
            ),
        )
        .unwrap();
        let out = ferry().arg("check").arg(&job).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{text}");
        assert!(text.contains(says), "{says}: {text}");
        assert!(!text.contains("s3cret-pw"), "{text}");
    }
    // An unreachable server: the error names host and port, not the password.
    std::fs::write(
        &job,
        "source {\n  Jdbc {\n    url = \"jdbc:postgresql://127.0.0.1:1/test\"\n    password = \"s3cret-pw\"\n    query = \"select 1\"\n    connection_check_timeout_sec = 2\n  }\n}\nsink { Console {} }\n",
    )
    .unwrap();
    let out = ferry().arg("check").arg(&job).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success() && text.contains("127.0.0.1:1") && !text.contains("s3cret-pw"),
        "{text}"
    );
}

const XA_ROWS_PER_FILE: u64 = 50;

/// The server side of the XA crash test: where the table is and how to ask it.
struct XaTarget {
    url: &'static str,
    table: &'static str,
    query: fn(&str) -> String,
    create: &'static str,
    /// How many prepared transactions of the job are left on the server.
    prepared: fn() -> usize,
}

/// A streaming LocalFile source → Jdbc sink with `is_exactly_once = true` into a table
/// without a key, killed with SIGKILL at random moments and at each step of the XA
/// protocol (after the writers prepared, after the checkpoint was stored, after the
/// committer committed), restarted under the same job id each time: in the end the table
/// holds every id exactly once and no prepared transaction is left on the server.
fn xa_under_kills(t: &XaTarget, seed: u64) {
    use std::process::{Child, Stdio};
    use std::time::Duration;

    (t.query)(t.create);
    let root = tempfile::tempdir().unwrap();
    let input = root.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let job = root.path().join("job.conf");
    let pg = t.url.contains("postgresql");
    std::fs::write(
        &job,
        format!(
            r#"
env {{ job.name = "xa-crash", job.mode = "STREAMING", checkpoint.interval = 400, parallelism = 2 }}
source {{ LocalFile {{ path = "{}", file_format_type = csv, schema = {{ fields {{ id = bigint, payload = string }} }} }} }}
sink {{
  Jdbc {{
    url = "{}"
    driver = "{}"
    user = "{}"
    password = ""
    query = "insert into {} (id, payload) values (?, ?)"
    is_exactly_once = true
    xa_data_source_class_name = "x"
  }}
}}
"#,
            input.display(),
            t.url,
            if pg { "org.postgresql.Driver" } else { "org.mariadb.jdbc.Driver" },
            if pg { "postgres" } else { "root" },
            t.table
        ),
    )
    .unwrap();
    let ckpt = root.path().join("ckpt");
    let mut files = 0u64;
    let mut add_file = || {
        let mut text = String::new();
        for i in 0..XA_ROWS_PER_FILE {
            text.push_str(&format!(
                "{},row-{files}-{i}\n",
                files * XA_ROWS_PER_FILE + i
            ));
        }
        let tmp = input.join(format!(".part-{files:05}.csv"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, input.join(format!("part-{files:05}.csv"))).unwrap();
        files += 1;
        files
    };
    let start = |crash_point: Option<&str>| -> Child {
        let mut c = ferry();
        c.arg("run")
            .arg(&job)
            .args(["--job-id", "xa", "--checkpoint-dir"])
            .arg(&ckpt)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(p) = crash_point {
            c.env("FERRY_CRASH_POINT", p);
        }
        c.spawn().expect("ferry starts")
    };
    let mut total = 0;
    for _ in 0..2 {
        total = add_file();
    }
    // Each step of the protocol: the process aborts there, as abruptly as SIGKILL.
    for point in [
        "checkpoint-acknowledged:2",
        "checkpoint-stored:2",
        "sink-committed:2",
    ] {
        total = add_file();
        let mut child = start(Some(point));
        let status = common::wait_for(&mut child, Duration::from_secs(120), point);
        assert!(!status.success(), "{point}: the job did not abort there");
    }
    // Random moments.
    let mut rng = Rng(seed);
    for _ in 0..6 {
        let mut child = start(None);
        let life = Duration::from_millis(rng.between(300, 2500));
        std::thread::sleep(life / 2);
        total = add_file();
        std::thread::sleep(life / 2);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
    }
    let expected = total * XA_ROWS_PER_FILE;
    let mut last = start(None);
    let count = || -> u64 {
        (t.query)(&format!("SELECT count(DISTINCT id) FROM {}", t.table))
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let arrived = common::eventually(Duration::from_secs(120), || count() >= expected);
    common::wait_running("xa", &ckpt, "local", Duration::from_secs(60));
    common::request_savepoint("xa", &ckpt);
    let status = common::wait_for(&mut last, Duration::from_secs(60), "the last run");
    let err = common::stderr_of(last);
    assert!(status.success(), "{err}");
    assert!(arrived, "{} of {expected} ids arrived", count());
    let rows: u64 = (t.query)(&format!("SELECT count(*) FROM {}", t.table))
        .trim()
        .parse()
        .unwrap();
    let twice = (t.query)(&format!(
        "SELECT id FROM {} GROUP BY id HAVING count(*) > 1 LIMIT 5",
        t.table
    ));
    assert_eq!(twice.trim(), "", "ids written more than once");
    assert_eq!(rows, expected);
    assert_eq!(count(), expected);
    let max = (t.query)(&format!("SELECT max(id) FROM {}", t.table));
    assert_eq!(max.trim(), (expected - 1).to_string());
    assert_eq!((t.prepared)(), 0, "prepared transactions left");
}

#[test]
fn xa_sink_into_postgresql_holds_every_id_once_under_kills() {
    xa_under_kills(
        &XaTarget {
            url: "jdbc:postgresql://127.0.0.1:5432/test",
            table: "ferry_t_xa_crash.events",
            query: psql,
            create: "DROP SCHEMA IF EXISTS ferry_t_xa_crash CASCADE; CREATE SCHEMA ferry_t_xa_crash; CREATE TABLE ferry_t_xa_crash.events (id int8, payload text)",
            prepared: || {
                psql("SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'ferry:xa:%'")
                    .trim()
                    .parse()
                    .unwrap()
            },
        },
        0x5eed_9a01,
    );
}

#[test]
fn xa_sink_into_mariadb_holds_every_id_once_under_kills() {
    xa_under_kills(
        &XaTarget {
            url: "jdbc:mariadb://127.0.0.1:3306/test",
            table: "ferry_t_xa_crash.events",
            query: mariadb,
            create: "DROP DATABASE IF EXISTS ferry_t_xa_crash; CREATE DATABASE ferry_t_xa_crash; CREATE TABLE ferry_t_xa_crash.events (id bigint, payload text)",
            prepared: || {
                mariadb("XA RECOVER")
                    .lines()
                    .filter(|l| l.contains("ferry:xa:"))
                    .count()
            },
        },
        0x5eed_9a02,
    );
}
