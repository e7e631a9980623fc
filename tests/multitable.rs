//! End-to-end tests of multi-table jobs through the real `ferry` binary: a FakeSource with
//! `tables_configs` (tables of different schemas), transforms that apply to each table,
//! and sinks that see each table under its own name (Assert `tables_configs`, one LocalFile
//! per table). Also SeaTunnel's JsonPath e2e jobs, and JsonPath on several tables.

mod common;

use std::path::{Path, PathBuf};

use common::{ferry, visible_lines};
use serde_json::Value;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write job file");
    p
}

/// Runs `ferry run` on job text (with `@DIR@` replaced by `dir`): success, stderr.
fn run(dir: &Path, job: &str) -> (bool, String) {
    let text = job.replace("@DIR@", &dir.display().to_string());
    let path = write(dir, "job.conf", &text);
    let out = ferry().arg("run").arg(&path).output().expect("ferry runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn assert_ok(dir: &Path, job: &str) -> String {
    let (ok, err) = run(dir, job);
    assert!(ok, "the job failed:\n{err}");
    err
}

fn assert_fails(dir: &Path, job: &str, message: &str) {
    let (ok, err) = run(dir, job);
    assert!(
        !ok,
        "the job should have failed with {message}, but passed:\n{err}"
    );
    assert!(
        err.lines().any(|l| l == message),
        "expected the line\n{message}\nin:\n{err}"
    );
}

/// The JSON objects written under `dir`, one per line.
fn json_rows(dir: &Path) -> Vec<serde_json::Map<String, Value>> {
    visible_lines(dir)
        .iter()
        .map(|l| match serde_json::from_str(l) {
            Ok(Value::Object(m)) => m,
            other => panic!(
                "not a JSON object line in {}: {l} ({other:?})",
                dir.display()
            ),
        })
        .collect()
}

fn keys(row: &serde_json::Map<String, Value>) -> Vec<&str> {
    row.keys().map(String::as_str).collect()
}

/// SeaTunnel's `fakesource_to_multi_table_assert.conf`, with `@MAX2@` for table2's MAX_ROW.
const TWO_TABLES_TO_ASSERT: &str = r#"
env { parallelism = 1, job.mode = BATCH }
source {
  FakeSource {
    tables_configs = [
      { row.num = 16, schema { table = "test.table1", fields { c_int = int, c_bigint = bigint } } },
      { row.num = 17, schema { table = "test.table2", fields { c_string = string, c_tinyint = tinyint } } }
    ]
  }
}
transform {
}
sink {
  Assert {
    rules {
      tables_configs = [
        {
          table_path = "test.table1"
          row_rules = [{ rule_type = MAX_ROW, rule_value = 16 }, { rule_type = MIN_ROW, rule_value = 16 }]
          field_rules = [
            { field_name = c_int, field_type = int, field_value = [{ rule_type = NOT_NULL }] },
            { field_name = c_bigint, field_type = bigint, field_value = [{ rule_type = NOT_NULL }] }
          ]
        },
        {
          table_path = "test.table2"
          row_rules = [{ rule_type = MAX_ROW, rule_value = @MAX2@ }, { rule_type = MIN_ROW, rule_value = 17 }]
          field_rules = [
            { field_name = c_string, field_type = string, field_value = [{ rule_type = NOT_NULL }] },
            { field_name = c_tinyint, field_type = tinyint, field_value = [{ rule_type = NOT_NULL }] }
          ]
        }
      ]
    }
  }
}
"#;

#[test]
fn each_table_of_a_multi_table_source_meets_its_own_assert_rules() {
    let dir = tempfile::tempdir().unwrap();
    let err = assert_ok(dir.path(), &TWO_TABLES_TO_ASSERT.replace("@MAX2@", "17"));
    assert!(
        err.contains("read 33 [__source_0=33], wrote [Assert=33]"),
        "{err}"
    );
}

#[test]
fn a_per_table_count_rule_is_checked_against_that_table_only() {
    let dir = tempfile::tempdir().unwrap();
    // 16 would hold for table1's 16 rows; table2 has 17.
    assert_fails(
        dir.path(),
        &TWO_TABLES_TO_ASSERT.replace("@MAX2@", "16"),
        "error: Assert: row rule MAX_ROW 16 broken by 17 rows (table test.table2)",
    );
}

/// Three tables; TableFilter drops one, then Filter, FieldRename and TableRename apply to
/// each remaining table. Two readers, so each table has `row.num × 2` rows.
const CHAIN: &str = r#"
env { parallelism = 2, job.mode = BATCH }
source {
  FakeSource {
    plugin_output = "fake"
    tables_configs = [
      { row.num = 10, schema { table = "db.orders", fields { id = int, amount = double, note = string } } },
      { row.num = 7,  schema { table = "db.users",  fields { id = int, name = string, note = string } } },
      { row.num = 5,  schema { table = "db.logs",   fields { msg = string } } }
    ]
  }
}
transform {
  TableFilter { plugin_input = "fake", plugin_output = "kept", table_pattern = "logs", pattern_mode = EXCLUDE }
  Filter { plugin_input = "kept", plugin_output = "slim", exclude_fields = ["note"] }
  FieldRename { plugin_input = "slim", plugin_output = "upper", convert_case = UPPER }
  TableRename { plugin_input = "upper", plugin_output = "renamed", prefix = "ods_" }
}
sink {
  Assert {
    plugin_input = "renamed"
    rules {
      table-names = [@TABLES@]
      tables_configs = [
        {
          table_path = "db.ods_orders"
          row_rules = [{ rule_type = MAX_ROW, rule_value = 20 }, { rule_type = MIN_ROW, rule_value = 20 }]
          field_rules = [{ field_name = AMOUNT, field_type = double, field_value = [{ rule_type = NOT_NULL }] }]
          catalog_table_rule { column_rule = [{ name = ID, type = int }, { name = AMOUNT, type = double }] }
        },
        {
          table_path = "db.ods_users"
          row_rules = [{ rule_type = MAX_ROW, rule_value = 14 }, { rule_type = MIN_ROW, rule_value = 14 }]
          field_rules = [{ field_name = @USERS_FIELD@, field_type = string, field_value = [{ rule_type = NOT_NULL }] }]
          catalog_table_rule { column_rule = [{ name = ID, type = int }, { name = NAME, type = string }] }
        }
      ]
    }
  }
}
"#;

fn chain(tables: &str, users_field: &str) -> String {
    CHAIN
        .replace("@TABLES@", tables)
        .replace("@USERS_FIELD@", users_field)
}

#[test]
fn per_table_transforms_chain_and_the_sink_sees_the_renamed_tables() {
    let dir = tempfile::tempdir().unwrap();
    let err = assert_ok(
        dir.path(),
        &chain(r#""db.ods_orders", "db.ods_users""#, "NAME"),
    );
    // 44 rows read (20 + 14 + 10 of db.logs), 34 reach the sink.
    assert!(
        err.contains("read 44 [fake=44], wrote [Assert=34]"),
        "{err}"
    );

    // The check plan shows every table's schema after each step.
    let job = write(
        dir.path(),
        "chain.conf",
        &chain(r#""db.ods_orders", "db.ods_users""#, "NAME"),
    );
    let out = ferry().arg("check").arg(&job).output().unwrap();
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{plan}");
    assert!(
        plan.contains(
            "transform TableRename upper -> renamed\n    table db.ods_orders: ID int, AMOUNT double\n    table db.ods_users: ID int, NAME string\n"
        ),
        "{plan}"
    );
}

#[test]
fn a_dropped_table_never_reaches_the_sink() {
    let dir = tempfile::tempdir().unwrap();
    assert_fails(
        dir.path(),
        &chain(r#""db.ods_orders", "db.ods_users", "db.logs""#, "NAME"),
        "error: Assert: rule table-names [db.logs, db.ods_orders, db.ods_users] broken by the tables that had rows: [db.ods_orders, db.ods_users]",
    );
}

#[test]
fn a_rule_naming_another_tables_field_fails_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, err) = run(
        dir.path(),
        &chain(r#""db.ods_orders", "db.ods_users""#, "AMOUNT"),
    );
    assert!(!ok, "{err}");
    assert!(
        err.contains("sink Assert: option 'rules.tables_configs[1].field_rules[0].field_name': field 'AMOUNT' is not in table db.ods_users (its fields: ID int, NAME string)"),
        "{err}"
    );
}

/// One source stream split by TableFilter into one stream per table, each written by its
/// own LocalFile sink; two tables of one schema merged by TableMerge; JsonPath on one.
const SPLIT: &str = r#"
env { parallelism = 1, job.mode = BATCH }
source {
  FakeSource {
    plugin_output = "fake"
    tables_configs = [
      { schema { table = "db.orders", fields { order_id = int, amount = double } },
        rows = [{ fields = [1, 10.5] }, { fields = [2, 20.25] }, { fields = [3, 30] }] },
      { schema { table = "db.users", fields { user_id = bigint, name = string, doc = string } },
        rows = [{ fields = [100, "ann", "{\"age\": 30}"] }, { fields = [200, "bob", "{\"age\": 41}"] }] },
      { row.num = 5, schema { table = "db.events_a", fields { id = int, kind = string } } },
      { row.num = 6, schema { table = "db.events_b", fields { id = int, kind = string } } }
    ]
  }
}
transform {
  TableFilter { plugin_input = "fake", plugin_output = "orders", table_pattern = "orders" }
  TableFilter { plugin_input = "fake", plugin_output = "users", table_pattern = "users" }
  TableFilter { plugin_input = "fake", plugin_output = "events", table_pattern = "events_.*" }
  TableMerge { plugin_input = "events", plugin_output = "merged", database = "dw", table = "events" }
  JsonPath {
    plugin_input = "users"
    plugin_output = "users_age"
    columns = [{ src_field = doc, path = "$.age", dest_field = age, dest_type = int }]
  }
}
sink {
  LocalFile { plugin_input = "orders", path = "@DIR@/out/orders", file_format_type = "json" }
  LocalFile { plugin_input = "users_age", path = "@DIR@/out/users", file_format_type = "json" }
  LocalFile { plugin_input = "merged", path = "@DIR@/out/events", file_format_type = "json" }
  Assert {
    plugin_input = "merged"
    rules {
      table-names = ["dw.events"]
      row_rules = [{ rule_type = MIN_ROW, rule_value = 11 }, { rule_type = MAX_ROW, rule_value = 11 }]
    }
  }
}
"#;

#[test]
fn tables_split_by_name_reach_only_their_own_sink() {
    let dir = tempfile::tempdir().unwrap();
    let err = assert_ok(dir.path(), SPLIT);
    assert!(
        err.contains(
            "read 16 [fake=16], wrote [Assert=11 LocalFile#1=3 LocalFile#2=2 LocalFile#3=11]"
        ),
        "{err}"
    );
    let out = dir.path().join("out");

    let mut orders = json_rows(&out.join("orders"));
    orders.sort_by_key(|r| r["order_id"].as_i64());
    let got: Vec<(i64, f64)> = orders
        .iter()
        .map(|r| {
            assert_eq!(keys(r), ["order_id", "amount"], "{r:?}");
            (
                r["order_id"].as_i64().unwrap_or(-1),
                r["amount"].as_f64().unwrap_or(-1.0),
            )
        })
        .collect();
    assert_eq!(got, [(1, 10.5), (2, 20.25), (3, 30.0)]);

    let mut users = json_rows(&out.join("users"));
    users.sort_by_key(|r| r["user_id"].as_i64());
    let got: Vec<(String, i64)> = users
        .iter()
        .map(|r| {
            assert_eq!(keys(r), ["user_id", "name", "doc", "age"], "{r:?}");
            (
                r["name"].as_str().unwrap_or_default().to_string(),
                r["age"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(got, [("ann".to_string(), 30), ("bob".to_string(), 41)]);

    let events = json_rows(&out.join("events"));
    assert_eq!(events.len(), 11);
    for r in &events {
        assert_eq!(keys(r), ["id", "kind"], "{r:?}");
    }
}

/// One LocalFile sink for a stream of two tables of different schemas: `${table_name}` in
/// `path` sends each table to its own directory (SeaTunnel's
/// `fake_to_local_file_with_multiple_table.conf`, reduced).
const ONE_SINK_TWO_TABLES: &str = r#"
env { parallelism = 1, job.mode = BATCH }
source {
  FakeSource {
    tables_configs = [
      { row.num = 4, schema { table = "fake1", fields { id = int, name = string } } },
      { row.num = 3, schema { table = "fake2", fields { code = bigint } } }
    ]
  }
}
sink { LocalFile { path = "@DIR@/out/${table_name}", file_format_type = "json" } }
"#;

/// The names of the entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn one_local_file_sink_writes_each_table_into_its_own_directory() {
    let dir = tempfile::tempdir().unwrap();
    let err = assert_ok(dir.path(), ONE_SINK_TWO_TABLES);
    assert!(err.contains("wrote [LocalFile=7]"), "{err}");
    let out = dir.path().join("out");
    assert_eq!(
        entries(&out),
        ["fake1", "fake2"],
        "no literal ${{table_name}}"
    );
    let one = json_rows(&out.join("fake1"));
    assert_eq!(one.len(), 4);
    for r in &one {
        assert_eq!(keys(r), ["id", "name"], "{r:?}");
    }
    let two = json_rows(&out.join("fake2"));
    assert_eq!(two.len(), 3);
    for r in &two {
        assert_eq!(keys(r), ["code"], "{r:?}");
    }
    for t in ["fake1", "fake2"] {
        assert!(
            !out.join(t).join("_ferry_tmp").exists(),
            "{t}: staging left"
        );
    }
}

/// Two readers; one sink names database, schema (with a default) and table in its path,
/// another writes both tables into one directory, each into its own files.
const PLACEHOLDERS_AND_SHARED_DIR: &str = r#"
env { parallelism = 2, job.mode = BATCH }
source {
  FakeSource {
    plugin_output = "fake"
    tables_configs = [
      { row.num = 5, schema { table = "db.public.orders", fields { id = int, amount = double } } },
      { row.num = 3, schema { table = "db.users", fields { name = string } } }
    ]
  }
}
sink {
  LocalFile {
    plugin_input = "fake"
    path = "@DIR@/split/${database_name}/${schema_name:none}/${table_name}"
    file_format_type = "json"
    file_name_expression = "${table_full_name}_${transactionId}"
  }
  LocalFile { plugin_input = "fake", path = "@DIR@/shared", file_format_type = "csv" }
}
"#;

#[test]
fn table_placeholders_and_tables_sharing_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let err = assert_ok(dir.path(), PLACEHOLDERS_AND_SHARED_DIR);
    assert!(
        err.contains("wrote [LocalFile#1=16 LocalFile#2=16]"),
        "{err}"
    );
    let split = dir.path().join("split/db");
    assert_eq!(entries(&split), ["none", "public"]);
    let orders = json_rows(&split.join("public/orders"));
    assert_eq!(orders.len(), 10, "5 rows from each of 2 readers");
    assert!(orders.iter().all(|r| keys(r) == ["id", "amount"]));
    let users = json_rows(&split.join("none/users"));
    assert_eq!(users.len(), 6);
    assert!(users.iter().all(|r| keys(r) == ["name"]));
    assert!(entries(&split.join("public/orders"))
        .iter()
        .all(|n| n.starts_with("db.public.orders_T_")));

    // The shared directory: each table's rows only in that table's files.
    let shared = dir.path().join("shared");
    let files = entries(&shared);
    let lines_of = |tag: &str| -> Vec<String> {
        files
            .iter()
            .filter(|n| n.contains(tag))
            .flat_map(|n| {
                std::fs::read_to_string(shared.join(n))
                    .unwrap_or_default()
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let orders = lines_of("_0-db-public-orders");
    let users = lines_of("_1-db-users");
    assert_eq!(orders.len(), 10, "{files:?}");
    assert_eq!(users.len(), 6, "{files:?}");
    assert!(
        orders.iter().all(|l| l.split(',').count() == 2),
        "{orders:?}"
    );
    assert_eq!(
        visible_lines(&shared).len(),
        16,
        "no file outside the two tables' own: {files:?}"
    );
}

#[test]
fn a_multi_table_commit_interrupted_by_a_crash_is_published_once_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let text = ONE_SINK_TWO_TABLES.replace("@DIR@", &dir.path().display().to_string());
    let job = write(dir.path(), "job.conf", &text);
    let cp = dir.path().join("cp");
    let run = |crash: Option<&str>| {
        let mut c = ferry();
        c.arg("run")
            .arg(&job)
            .args(["--job-id", "mt", "--checkpoint-dir"])
            .arg(&cp);
        if let Some(p) = crash {
            c.env("FERRY_CRASH_POINT", p);
        }
        c.output().expect("ferry runs")
    };
    // Checkpoint stored, nothing published: both tables' files are still staged.
    let first = run(Some("checkpoint-stored:1"));
    assert!(!first.status.success());
    let out = dir.path().join("out");
    for t in ["fake1", "fake2"] {
        assert!(
            json_rows(&out.join(t)).is_empty(),
            "{t}: published before commit"
        );
    }
    let second = run(None);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(json_rows(&out.join("fake1")).len(), 4);
    assert_eq!(json_rows(&out.join("fake2")).len(), 3);
}

/// JsonPath applies to every input table: both tables have a `payload` field among other,
/// different fields. A row whose payload lacks `$.v` is dropped (SKIP_ROW).
const JSON_PATH_TWO_TABLES: &str = r#"
env { parallelism = 1, job.mode = BATCH }
source {
  FakeSource {
    plugin_output = "fake"
    tables_configs = [
      { schema { table = "db.a", fields { id = int, payload = string } },
        rows = [{ fields = [1, "{\"v\": 10}"] }, { fields = [2, "{\"w\": 0}"] }, { fields = [3, "{\"v\": 30}"] }] },
      { schema { table = "db.b", fields { code = string, flag = boolean, payload = string } },
        rows = [{ fields = ["x", true, "{\"v\": 7}"] }, { fields = ["y", false, "[1, 2]"] }] }
    ]
  }
}
transform {
  JsonPath {
    plugin_input = "fake"
    plugin_output = "extracted"
    columns = [{ src_field = payload, path = "$.v", dest_field = v, dest_type = bigint, column_error_handle_way = SKIP_ROW }]
  }
}
sink {
  Assert {
    plugin_input = "extracted"
    rules {
      tables_configs = [
        {
          table_path = "db.a"
          row_rules = [{ rule_type = MAX_ROW, rule_value = 2 }, { rule_type = MIN_ROW, rule_value = 2 }]
          field_rules = [
            { field_name = v, field_type = bigint, field_value = [{ rule_type = MIN, rule_value = 10 }, { rule_type = MAX, rule_value = 30 }] },
            { field_name = id, field_type = int, field_value = [{ rule_type = NOT_NULL }] }
          ]
        },
        {
          table_path = "db.b"
          row_rules = [{ rule_type = MAX_ROW, rule_value = 1 }, { rule_type = MIN_ROW, rule_value = 1 }]
          field_rules = [
            { field_name = v, field_type = bigint, field_value = [{ equals_to = 7 }] },
            { field_name = code, field_type = string, field_value = [{ equals_to = "x" }] }
          ]
        }
      ]
    }
  }
}
"#;

#[test]
fn json_path_applies_to_each_table_and_skips_rows_per_table() {
    let dir = tempfile::tempdir().unwrap();
    let err = assert_ok(dir.path(), JSON_PATH_TWO_TABLES);
    assert!(err.contains("read 5 [fake=5], wrote [Assert=3]"), "{err}");
}

#[test]
fn json_path_failure_names_the_table_and_the_column() {
    let dir = tempfile::tempdir().unwrap();
    assert_fails(
        dir.path(),
        &JSON_PATH_TWO_TABLES.replace(", column_error_handle_way = SKIP_ROW", ""),
        "error: transform JsonPath: table 'db.a': src_field 'payload', path '$.v', dest_field 'v' (bigint): no value at path $.v in '{\"w\":0}' (set column_error_handle_way or row_error_handle_way to skip such values)",
    );
}

/// SeaTunnel's e2e jobs for JsonPath (seatunnel-transforms-v2-e2e, json_path_transform/),
/// with the same sources, transforms and rules.
#[test]
fn seatunnels_json_path_e2e_jobs_pass() {
    let dir = tempfile::tempdir().unwrap();
    let basic_type = r#"
env { job.mode = "BATCH" }
source {
  FakeSource {
    result_table_name = "fake"
    row.num = 100
    string.fake.mode = "template"
    string.template=["{"data":{"c_string": "this is a string","c_boolean": "true","c_integer": "42","c_float": "3.14","c_double": "3.14","c_decimal": "10.55","c_date":"'2023-10-29'","c_datetime":\"16:12:43.459\"}}"]
    schema = { fields { data = "string" } }
  }
}
transform {
  JsonPath {
    source_table_name = "fake"
    result_table_name = "fake1"
    columns = [
      { "src_field" = "data", "path" = "$.data.c_string", "dest_field" = "c1_string" },
      { "src_field" = "data", "path" = "$.data.c_boolean", "dest_field" = "c1_boolean", "dest_type" = "boolean" },
      { "src_field" = "data", "path" = "$.data.c_integer", "dest_field" = "c1_integer", "dest_type" = "int" },
      { "src_field" = "data", "path" = "$.data.c_float", "dest_field" = "c1_float", "dest_type" = "float" },
      { "src_field" = "data", "path" = "$.data.c_double", "dest_field" = "c1_double", "dest_type" = "double" },
      { "src_field" = "data", "path" = "$.data.c_decimal", "dest_field" = "c1_decimal", "dest_type" = "decimal(4,2)" },
      { "src_field" = "data", "path" = "$.data.c_date", "dest_field" = "c1_date", "dest_type" = "date" },
      { "src_field" = "data", "path" = "$.data.c_datetime", "dest_field" = "c1_datetime", "dest_type" = "time" }
    ]
  }
}
sink {
  Assert {
    source_table_name = "fake1"
    rules {
      row_rules = [{ rule_type = MIN_ROW, rule_value = 100 }]
      field_rules = [
        { field_name = c1_string, field_type = string, field_value = [{ rule_type = NOT_NULL, equals_to = "this is a string" }] },
        { field_name = c1_boolean, field_type = boolean, field_value = [{ rule_type = NOT_NULL, equals_to = "true" }] },
        { field_name = c1_integer, field_type = int, field_value = [{ rule_type = NOT_NULL, equals_to = 42 }] },
        { field_name = c1_float, field_type = float, field_value = [{ rule_type = NOT_NULL, equals_to = 3.14 }] },
        { field_name = c1_double, field_type = double, field_value = [{ rule_type = NOT_NULL, equals_to = 3.14 }] },
        { field_name = c1_decimal, field_type = "decimal(4,2)", field_value = [{ rule_type = NOT_NULL, equals_to = 10.55 }] },
        { field_name = c1_date, field_type = date, field_value = [{ rule_type = NOT_NULL, equals_to = "2023-10-29" }] },
        { field_name = c1_datetime, field_type = time, field_value = [{ rule_type = NOT_NULL, equals_to = "16:12:43.459" }] }
      ]
    }
  }
}
"#;
    let error_handle_way = r#"
env { parallelism = 1, job.mode = "BATCH" }
source {
  FakeSource {
    schema = { fields { id = "bigint", data = "string" } }
    rows = [
      { kind = INSERT, fields = [1, "{\"f1\": \"v1\"}"] },
      { kind = INSERT, fields = [2, "{\"f1\": \"v1\", \"f2\": \"v2\"}"] }
    ]
  }
}
transform {
  JsonPath {
    row_error_handle_way = FAIL
    columns = [
      { src_field = "data", path = "$.f1", dest_field = "data_f1" },
      { src_field = "data", path = "$.f2", dest_field = "data_f2", column_error_handle_way = SKIP }
    ]
  }
}
sink {
  Assert {
    rules {
      row_rules = [{ rule_type = MAX_ROW, rule_value = 2 }, { rule_type = MIN_ROW, rule_value = 2 }]
      field_rules = [
        { field_name = id, field_type = "bigint", field_value = [{ rule_type = MIN, rule_value = 1 }, { rule_type = MAX, rule_value = 2 }] },
        { field_name = data_f1, field_type = "string", field_value = [{ equals_to = "v1" }] }
      ]
    }
  }
}
"#;
    let nested_row = r#"
env { job.mode = "BATCH" }
source {
  FakeSource {
    row.num = 10
    schema = { fields { c_row = { c_map = "map<string, map<string, string>>", c_array = "array<int>", c_string = string } } }
    result_table_name = "fake"
  }
}
transform {
  JsonPath {
    source_table_name = "fake"
    result_table_name = "fake1"
    columns = [{ "src_field" = "c_row", "path" = "$[2]", "dest_field" = "test_str", "dest_type" = "string" }]
  }
}
sink {
  Assert {
    source_table_name = "fake1"
    rules {
      row_rules = [{ rule_type = MIN_ROW, rule_value = 10 }]
      field_rules = [{ field_name = test_str, field_type = string, field_value = [{ rule_type = NOT_NULL }] }]
    }
  }
}
"#;
    let array = r#"
env { job.mode = "BATCH" }
source {
  FakeSource {
    result_table_name = "fake"
    row.num = 100
    schema = { fields { c_array = "array<string>" } }
  }
}
transform {
  JsonPath {
    source_table_name = "fake"
    result_table_name = "fake1"
    columns = [{ "src_field" = "c_array", "path" = "$[0]", "dest_field" = "test_str" }]
  }
}
sink {
  Assert {
    source_table_name = "fake1"
    rules {
      row_rules = [{ rule_type = MIN_ROW, rule_value = 100 }]
      field_rules = [{ field_name = test_str, field_type = string, field_value = [{ rule_type = NOT_NULL }] }]
    }
  }
}
"#;
    for (name, job) in [
        ("json_path_basic_type_test", basic_type),
        ("json_path_with_error_handle_way", error_handle_way),
        ("nested_row_test", nested_row),
        ("array_test", array),
    ] {
        let (ok, err) = run(dir.path(), job);
        assert!(ok, "{name} failed:\n{err}");
    }
}

/// A LocalFile source with `tables_configs` (SeaTunnel's multi-table file source): a JSON
/// table and a CSV table of different schemas, each from its own directory. Downstream
/// the rows go by table name, as a FakeSource's tables do: TableFilter keeps both,
/// FieldRename applies to each, one LocalFile sink writes each table into its directory.
const LOCAL_FILE_TABLES: &str = r#"
env { parallelism = 2, job.mode = BATCH }
source {
  LocalFile {
    plugin_output = "files"
    tables_configs = [
      { path = "@DIR@/in/users", file_format_type = "json",
        schema { table = "db.users", fields { id = int, name = string } } },
      { path = "@DIR@/in/orders", file_format_type = "csv", field_delimiter = ";", skip_header_row_number = 1,
        schema { table = "db.orders", fields { order_id = bigint, amount = double } } }
    ]
  }
}
transform {
  TableFilter { plugin_input = "files", plugin_output = "kept", database_pattern = "db", table_pattern = "users|orders" }
  FieldRename { plugin_input = "kept", plugin_output = "upper", convert_case = UPPER }
}
sink {
  LocalFile { plugin_input = "upper", path = "@DIR@/out/${table_name}", file_format_type = "json" }
  Assert {
    plugin_input = "upper"
    rules {
      table-names = ["db.users", "db.orders"]
      tables_configs = [
        {
          table_path = "db.users"
          row_rules = [{ rule_type = MIN_ROW, rule_value = 3 }, { rule_type = MAX_ROW, rule_value = 3 }]
          catalog_table_rule { column_rule = [{ name = ID, type = int }, { name = NAME, type = string }] }
        },
        {
          table_path = "db.orders"
          row_rules = [{ rule_type = MIN_ROW, rule_value = 4 }, { rule_type = MAX_ROW, rule_value = 4 }]
          field_rules = [{ field_name = AMOUNT, field_type = double, field_value = [{ rule_type = MIN, rule_value = 1 }] }]
          catalog_table_rule { column_rule = [{ name = ORDER_ID, type = bigint }, { name = AMOUNT, type = double }] }
        }
      ]
    }
  }
}
"#;

fn write_local_file_tables_input(dir: &Path) {
    let users = dir.join("in/users");
    let orders = dir.join("in/orders");
    std::fs::create_dir_all(&users).unwrap();
    std::fs::create_dir_all(&orders).unwrap();
    std::fs::write(
        users.join("a.json"),
        "{\"id\": 1, \"name\": \"ann\"}\n{\"id\": 2, \"name\": \"bob\"}\n",
    )
    .unwrap();
    std::fs::write(users.join("b.json"), "{\"id\": 3, \"name\": \"cid\"}\n").unwrap();
    std::fs::write(
        orders.join("o.csv"),
        "order_id;amount\n10;1.5\n11;2.5\n12;3.5\n13;4.5\n",
    )
    .unwrap();
}

#[test]
fn a_local_file_source_with_tables_configs_routes_each_table_by_name() {
    let dir = tempfile::tempdir().unwrap();
    write_local_file_tables_input(dir.path());
    let err = assert_ok(dir.path(), LOCAL_FILE_TABLES);
    assert!(
        err.contains("read 7 [files=7], wrote [Assert=7 LocalFile=7]"),
        "{err}"
    );
    let out = dir.path().join("out");
    // `${table_name}` is the last part of the identifier `db.users`.
    assert_eq!(entries(&out), ["orders", "users"]);
    let mut users: Vec<String> = json_rows(&out.join("users"))
        .iter()
        .map(|r| {
            assert_eq!(keys(r), ["ID", "NAME"], "{r:?}");
            r["NAME"].as_str().unwrap().to_string()
        })
        .collect();
    users.sort();
    assert_eq!(users, ["ann", "bob", "cid"]);
    let orders = json_rows(&out.join("orders"));
    assert_eq!(orders.len(), 4);
    for r in &orders {
        assert_eq!(keys(r), ["ORDER_ID", "AMOUNT"], "{r:?}");
    }
}

#[test]
fn an_error_inside_a_tables_configs_entry_names_the_entry_and_the_option() {
    let dir = tempfile::tempdir().unwrap();
    write_local_file_tables_input(dir.path());
    let job = LOCAL_FILE_TABLES.replace("skip_header_row_number = 1", "skip_header_row_nuber = 1");
    let (ok, err) = run(dir.path(), &job);
    assert!(!ok, "{err}");
    let conf = dir.path().join("job.conf");
    assert!(
        err.contains(&format!(
            "error: {}:9: source LocalFile: option 'tables_configs[1].skip_header_row_nuber': unknown option (did you mean 'skip_header_row_number'?",
            conf.display()
        )),
        "{err}"
    );
}
