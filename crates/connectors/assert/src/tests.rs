//! End-to-end tests of the sink: options → writers → committer.

use super::*;
use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{Field, Schema};
use ferry_api::types::parse_type;
use ferry_api::value::json_to_array;
use serde_json::json;

fn location() -> PluginLocation {
    let mut lines = std::collections::HashMap::new();
    lines.insert("rules.field_rules[0].field_name".to_string(), 12);
    PluginLocation {
        file: "job.conf".into(),
        section: "sink".into(),
        plugin: "Assert".into(),
        line: Some(10),
        lines: Arc::new(lines),
    }
}

fn table(name: &str, types: &[(&str, &str)]) -> TableSchema {
    let fields: Vec<Field> = types
        .iter()
        .map(|(n, t)| Field::new(*n, parse_type(t).unwrap(), true))
        .collect();
    TableSchema::new(name, Arc::new(Schema::new(fields)))
}

fn batch(t: &TableSchema, rows: &[Value]) -> ChangeBatch {
    let columns: Vec<ArrayRef> = t
        .schema
        .fields()
        .iter()
        .enumerate()
        .map(|(c, f)| {
            let vals: Vec<&Value> = rows.iter().map(|r| &r[c]).collect();
            json_to_array(&vals, f.data_type()).unwrap()
        })
        .collect();
    ChangeBatch::inserts(
        t.name.clone(),
        RecordBatch::try_new(t.schema.clone(), columns).unwrap(),
    )
}

fn create(options: Value, input: &[TableSchema]) -> Result<Arc<dyn Sink>> {
    let mut o = Options::new(options.as_object().unwrap().clone(), location());
    AssertSinkFactory.create(&mut o, input, &JobContext::default())
}

fn writer(sink: &Arc<dyn Sink>, subtask: usize, parallelism: usize) -> Box<dyn SinkWriter> {
    let ctx = WriterContext {
        subtask,
        parallelism,
        job: JobContext::default(),
        attempt: "a".into(),
    };
    sink.create_writer(&ctx, None).unwrap()
}

/// Runs `batches` through one writer, commits once and finishes.
fn run(sink: &Arc<dyn Sink>, batches: &[ChangeBatch]) -> Result<()> {
    let mut w = writer(sink, 0, 1);
    for b in batches {
        w.write(b)?;
    }
    let info = w.prepare_commit(1)?.into_iter().collect();
    let mut c = sink.create_committer()?.unwrap();
    c.commit(1, info)?;
    c.finish()
}

fn field_rule(name: &str, ftype: &str, values: Value) -> Value {
    json!({"field_name": name, "field_type": ftype, "field_value": values})
}

#[test]
fn full_types_case_passes() {
    // assert/fake_full_types_to_assert.conf, less the null-typed row field's siblings.
    let types = [
        ("c_null", "null"),
        ("c_string", "string"),
        ("c_float", "float"),
        ("c_decimal", "decimal(30, 8)"),
        ("c_timestamp", "timestamp"),
        ("c_bytes", "bytes"),
        ("c_map", "map<date, string>"),
        (
            "c_map_nest",
            "map<string, {c_int = int, c_string = string}>",
        ),
        (
            "c_row",
            "{c_null = null, c_string = string, c_array = array<int>, c_map = map<string, string>}",
        ),
    ];
    let t = table("fake", &types);
    let row = json!([null, "AAA", 3.1, 99999.99999999, "2012-12-21T12:34:56", "bWlJWmo=", {"2024-01-26": "v0"}, {"k1": [123, "BBB-BB"]}, [null, "AAA", [0, 1, 2], {"k0": "v0"}]]);
    let rules = json!({"rules": {
        "row_rules": [{"rule_type": "MAX_ROW", "rule_value": 1}, {"rule_type": "MIN_ROW", "rule_value": 1}],
        "field_rules": [
            field_rule("c_null", "null", json!([{"rule_type": "NULL"}])),
            field_rule("c_string", "string", json!([{"rule_type": "NOT_NULL", "equals_to": "AAA"}])),
            field_rule("c_float", "float", json!([{"rule_type": "NOT_NULL", "equals_to": 3.1}])),
            field_rule("c_decimal", "decimal(30, 8)", json!([{"rule_type": "NOT_NULL", "equals_to": 99999.99999999}])),
            field_rule("c_timestamp", "timestamp", json!([{"rule_type": "NOT_NULL", "equals_to": "2012-12-21T12:34:56"}])),
            field_rule("c_bytes", "bytes", json!([{"rule_type": "NOT_NULL", "equals_to": "bWlJWmo="}])),
            field_rule("c_map", "map<date, string>", json!([{"rule_type": "NOT_NULL", "equals_to": {"2024-01-26": "v0"}}])),
            field_rule("c_map_nest", "map<string, {c_int = int, c_string = string}>", json!([{"rule_type": "NOT_NULL", "equals_to": {"k1": [123, "BBB-BB"]}}])),
            {"field_name": "c_row", "field_type": {"c_null": "null", "c_string": "string", "c_array": "array<int>", "c_map": "map<string, string>"},
             "field_value": [{"rule_type": "NOT_NULL", "equals_to": [null, "AAA", [0, 1, 2], {"k0": "v0"}]}]}
        ]
    }});
    let sink = create(rules.clone(), std::slice::from_ref(&t)).unwrap();
    run(&sink, &[batch(&t, std::slice::from_ref(&row))]).unwrap();
    // Two rows break MAX_ROW 1 once all is counted.
    let e = run(
        &sink,
        &[
            batch(&t, std::slice::from_ref(&row)),
            batch(&t, std::slice::from_ref(&row)),
        ],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Assert: row rule MAX_ROW 1 broken by 2 rows (table fake)"
    );
    assert!(matches!(e, FerryError::Data { .. }));
}

#[test]
fn range_case_tolerates_rule_ruls_and_numbers_rows_across_batches() {
    // fake/fake_to_assert_with_range.conf misspells row_rules; SeaTunnel ignores it.
    let t = table("fake", &[("c_string", "string"), ("age", "int")]);
    let rules = json!({"rules": {
        "rule_ruls": [{"rule_type": "MAX_ROW", "rule_value": 5}],
        "field_rules": [
            field_rule("c_string", "string", json!([{"rule_type": "MIN_LENGTH", "rule_value": 4}, {"rule_type": "MAX_LENGTH", "rule_value": 13}])),
            field_rule("age", "int", json!([{"rule_type": "MIN", "rule_value": 32767}, {"rule_type": "MAX", "rule_value": 2147483647}]))
        ]
    }});
    let sink = create(rules, std::slice::from_ref(&t)).unwrap();
    let good = batch(
        &t,
        &[json!(["kris", 40000]), json!(["tyrantlucifer", 32767])],
    );
    // Many rows: MAX_ROW 5 is misspelt, so it does not apply.
    run(&sink, &[good.clone(), good.clone(), good.clone()]).unwrap();
    let bad = batch(&t, &[json!(["gaojun", 40000]), json!(["fanjia", 12])]);
    let e = run(&sink, &[good, bad]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Assert: field 'age' rule MIN 32767 broken by value 12 (row 4 of table fake)"
    );
}

#[test]
fn parallel_writers_name_themselves_in_field_errors() {
    let t = table("fake", &[("name", "string")]);
    let sink = create(json!({"rules": {"field_rules": [field_rule("name", "string", json!([{"rule_type": "NOT_NULL"}]))]}}), std::slice::from_ref(&t)).unwrap();
    let mut w = writer(&sink, 1, 2);
    let e = w
        .write(&batch(&t, &[json!(["a"]), json!([null])]))
        .unwrap_err();
    assert_eq!(e.to_string(), "Assert: field 'name' rule field_type string broken by value null (row 2 of table fake, writer 1 of 2)");
}

#[test]
fn row_rules_count_all_writers_and_survive_restores() {
    let t = table("fake", &[("a", "int")]);
    let sink = create(json!({"rules": {"row_rules": [{"rule_type": "MIN_ROW", "rule_value": 5}, {"rule_type": "MAX_ROW", "rule_value": 6}]}}), std::slice::from_ref(&t)).unwrap();
    let rows = |n: i32| batch(&t, &(0..n).map(|i| json!([i])).collect::<Vec<_>>());
    let mut w0 = writer(&sink, 0, 2);
    let mut w1 = writer(&sink, 1, 2);
    let mut c = sink.create_committer().unwrap().unwrap();
    w0.write(&rows(2)).unwrap();
    w1.write(&rows(1)).unwrap();
    let infos = vec![
        w0.prepare_commit(1).unwrap().unwrap(),
        w1.prepare_commit(1).unwrap().unwrap(),
    ];
    c.commit(1, infos.clone()).unwrap();
    // Committing the same checkpoint again changes nothing.
    c.commit(1, infos).unwrap();
    let snap = w0.snapshot(1).unwrap();
    // Writer 0 fails and restarts from checkpoint 1, then writes 2 more rows.
    w0.write(&rows(3)).unwrap();
    let ctx = WriterContext {
        subtask: 0,
        parallelism: 2,
        job: JobContext::default(),
        attempt: "b".into(),
    };
    let mut w0 = sink.create_writer(&ctx, snap).unwrap();
    w0.write(&rows(2)).unwrap();
    let infos = vec![
        w0.prepare_commit(2).unwrap().unwrap(),
        w1.prepare_commit(2).unwrap().unwrap(),
    ];
    c.commit(2, infos).unwrap();
    // 2 + 2 from writer 0, 1 from writer 1: the 3 rows lost in the failure are not counted.
    c.finish().unwrap();
    w1.write(&rows(2)).unwrap();
    c.commit(3, vec![w1.prepare_commit(3).unwrap().unwrap()])
        .unwrap();
    assert_eq!(
        c.finish().unwrap_err().to_string(),
        "Assert: row rule MAX_ROW 6 broken by 7 rows (table fake)"
    );

    // No rows at all.
    let mut c = sink.create_committer().unwrap().unwrap();
    assert_eq!(
        c.finish().unwrap_err().to_string(),
        "Assert: row rule MIN_ROW 5 broken by 0 rows (table fake)"
    );
}

#[test]
fn tables_configs_route_rules_by_table() {
    let t1 = table("test.table1", &[("c_int", "int")]);
    let t2 = table("test.table2", &[("c_string", "string")]);
    let rules = json!({"rules": {"tables_configs": [
        {"table_path": "test.table1", "row_rules": [{"rule_type": "MAX_ROW", "rule_value": 2}, {"rule_type": "MIN_ROW", "rule_value": 2}],
         "field_rules": [field_rule("c_int", "int", json!([{"rule_type": "MIN", "rule_value": 0}]))]},
        {"table_path": "test.table2", "row_rules": [{"rule_type": "MIN_ROW", "rule_value": 1}],
         "field_rules": [field_rule("c_string", "string", json!([{"equals_to": "x"}]))]}
    ], "table-names": ["test.table1", "test.table2"]}});
    let input = [t1.clone(), t2.clone()];
    let sink = create(rules.clone(), &input).unwrap();
    run(
        &sink,
        &[
            batch(&t1, &[json!([1]), json!([2])]),
            batch(&t2, &[json!(["x"])]),
        ],
    )
    .unwrap();
    // Each table's field rules see only that table.
    let e = run(
        &sink,
        &[
            batch(&t1, &[json!([1])]),
            batch(&t2, &[json!(["x"]), json!(["y"])]),
        ],
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "Assert: field 'c_string' rule equals_to \"x\" broken by value \"y\" (row 2 of table test.table2)");
    let e = run(
        &sink,
        &[batch(&t1, &[json!([1])]), batch(&t2, &[json!(["x"])])],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Assert: row rule MIN_ROW 2 broken by 1 row (table test.table1)"
    );
    let e = run(&sink, &[batch(&t1, &[json!([1]), json!([2])])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Assert: row rule MIN_ROW 1 broken by 0 rows (table test.table2)"
    );

    // table-names alone.
    let sink = create(
        json!({"rules": {"table-names": ["test.table1", "test.table2"]}}),
        &input,
    )
    .unwrap();
    let e = run(&sink, &[batch(&t1, &[json!([1])])]).unwrap_err();
    assert_eq!(e.to_string(), "Assert: rule table-names [test.table1, test.table2] broken by the tables that had rows: [test.table1]");
}

#[test]
fn top_level_rules_apply_to_each_table() {
    let t1 = table("a", &[("id", "int")]);
    let t2 = table("b", &[("id", "int")]);
    let sink = create(json!({"rules": {"row_rules": [{"rule_type": "MIN_ROW", "rule_value": 2}], "field_rules": [field_rule("id", "int", json!([{"rule_type": "MAX", "rule_value": 5}]))]}}), &[t1.clone(), t2.clone()]).unwrap();
    run(
        &sink,
        &[
            batch(&t1, &[json!([1]), json!([2])]),
            batch(&t2, &[json!([1]), json!([2])]),
        ],
    )
    .unwrap();
    let e = run(
        &sink,
        &[
            batch(&t1, &[json!([1]), json!([2])]),
            batch(&t2, &[json!([1])]),
        ],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Assert: row rule MIN_ROW 2 broken by 1 row (table b)"
    );
    let e = run(&sink, &[batch(&t2, &[json!([9])])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Assert: field 'id' rule MAX 5 broken by value 9 (row 1 of table b)"
    );
}

#[test]
fn options_and_rule_errors_are_reported_at_creation() {
    let t = table("fake", &[("c_string", "string"), ("c_boolean", "boolean")]);
    let e = create(
        json!({"rules": {"row_rules": []}, "rule": 1}),
        std::slice::from_ref(&t),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with(
            "job.conf:10: sink Assert: option 'rule': unknown option (did you mean 'rules'?"
        ),
        "{e}"
    );
    let e = create(json!({}), std::slice::from_ref(&t))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "job.conf:10: sink Assert: option 'rules': is required but not set"
    );
    // A field the table lacks is reported at the rule's line.
    let e = create(json!({"rules": {"field_rules": [field_rule("name", "string", json!([{"rule_type": "NOT_NULL"}]))]}}), std::slice::from_ref(&t))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "job.conf:12: sink Assert: option 'rules.field_rules[0].field_name': field 'name' is not in table fake (its fields: c_string string, c_boolean boolean)"
    );
    let e = create(json!({"rules": {"field_rules": [field_rule("c_boolean", "boolean", json!([{"equals_to": "maybe"}]))]}}), std::slice::from_ref(&t))
        .unwrap_err()
        .to_string();
    assert!(e.contains("option 'rules.field_rules[0].field_value[0].equals_to': \"maybe\" cannot be compared with field 'c_boolean' of type boolean"), "{e}");
    create(json!({"rules": {"field_rules": []}, "multi_table_sink_replica": 2, "plugin_input": "fake"}), std::slice::from_ref(&t)).unwrap();
}

#[test]
fn tables_unknown_at_creation_are_bound_at_the_first_batch() {
    let t = table("late", &[("x", "int")]);
    let sink = create(
        json!({"rules": {"field_rules": [field_rule("y", "int", json!([]))]}}),
        &[],
    )
    .unwrap();
    let e = run(&sink, &[batch(&t, &[json!([1])])])
        .unwrap_err()
        .to_string();
    assert_eq!(e, "job.conf:12: sink Assert: option 'rules.field_rules[0].field_name': field 'y' is not in table late (its fields: x int)");
    let sink = create(
        json!({"rules": {"field_rules": [field_rule("x", "int", json!([{"equals_to": 1}]))]}}),
        &[],
    )
    .unwrap();
    run(&sink, &[batch(&t, &[json!([1])])]).unwrap();
    assert_eq!(
        run(&sink, &[batch(&t, &[json!([2])])])
            .unwrap_err()
            .to_string(),
        "Assert: field 'x' rule equals_to 1 broken by value 2 (row 1 of table late)"
    );
}

#[test]
fn catalog_table_rules() {
    let t = table("fake", &[("id", "bigint"), ("name", "string")]);
    let columns = json!([{"name": "name", "type": "string"}, {"name": "id", "type": "bigint", "nullable": true}]);
    create(json!({"rules": {"catalog_table_rule": {"column_rule": columns, "table_identifier_rule": {"catalog_name": "c", "table": "fake"}}}}), std::slice::from_ref(&t)).unwrap();
    let e = create(json!({"rules": {"catalog_table_rule": {"column_rule": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}}}), std::slice::from_ref(&t))
        .unwrap_err()
        .to_string();
    assert_eq!(e, "Assert: rules.catalog_table_rule.column_rule: table fake has columns (id bigint, name string), the rule expects (id int, name string)");
    let e = create(json!({"rules": {"catalog_table_rule": {"primary_key_rule": {"primary_key_name": "pk", "primary_key_columns": ["id"]}}}}), std::slice::from_ref(&t))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "Assert: rules.catalog_table_rule.primary_key_rule: table fake has no primary key"
    );
    let e = create(
        json!({"rules": {"catalog_table_rule": {"table_identifier_rule": {"table": "other"}}}}),
        std::slice::from_ref(&t),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e, "Assert: rules.catalog_table_rule.table_identifier_rule: the table is fake, the rule expects other");
    let e = create(json!({"rules": {"tables_configs": [{"table_path": "nope", "catalog_table_rule": {"column_rule": []}}]}}), std::slice::from_ref(&t)).unwrap_err().to_string();
    assert!(e.contains("option 'rules.tables_configs[0].table_path': catalog_table_rule needs table nope, which is not an input of this sink (inputs: fake)"), "{e}");
}

/// A table with a catalog id, a primary key and a unique key, as FakeSource's
/// `schema { table, primaryKey, constraintKeys }` makes it.
fn keyed_table() -> TableSchema {
    use ferry_api::catalog::SortOrder;
    use ferry_api::{CatalogInfo, ConstraintKey, ConstraintType, KeyColumn, PrimaryKey, TableId};
    table("fake", &[("id", "bigint"), ("name", "string")]).with_catalog(CatalogInfo {
        id: Some(TableId::from_path("FakeSource", "test.fakeTable")),
        primary_key: Some(PrimaryKey {
            name: "primary key".into(),
            columns: vec!["id".into()],
        }),
        constraint_keys: vec![ConstraintKey {
            name: "unique_name".into(),
            kind: ConstraintType::Unique,
            columns: vec![KeyColumn {
                name: "id".into(),
                order: SortOrder::Asc,
            }],
        }],
        ..Default::default()
    })
}

#[test]
fn key_and_identifier_rules_compare_the_catalog_information() {
    let t = keyed_table();
    let unique = json!([{"constraint_key_name": "unique_name", "constraint_key_type": "UNIQUE_KEY",
        "constraint_key_columns": [{"constraint_key_column_name": "id", "constraint_key_sort_type": "ASC"}]}]);
    create(
        json!({"rules": {"catalog_table_rule": {
            "primary_key_rule": {"primary_key_name": "primary key", "primary_key_columns": ["id"]},
            "constraint_key_rule": unique,
            "table_identifier_rule": {"catalog_name": "FakeSource", "table": "test.fakeTable"}}}}),
        std::slice::from_ref(&t),
    )
    .unwrap();
    let fails = |rule: Value| {
        create(
            json!({"rules": {"catalog_table_rule": rule}}),
            std::slice::from_ref(&t),
        )
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        fails(json!({"primary_key_rule": {"primary_key_name": "pk", "primary_key_columns": ["id"]}})),
        "Assert: rules.catalog_table_rule.primary_key_rule: table fake has primary key 'primary key', the rule expects 'pk'"
    );
    assert_eq!(
        fails(json!({"primary_key_rule": {"primary_key_name": "primary key", "primary_key_columns": ["id", "name"]}})),
        "Assert: rules.catalog_table_rule.primary_key_rule: table fake's primary key has columns (id), the rule expects (id, name)"
    );
    assert_eq!(
        fails(json!({"constraint_key_rule": [{"constraint_key_name": "unique_name", "constraint_key_type": "UNIQUE_KEY",
            "constraint_key_columns": [{"constraint_key_column_name": "id", "constraint_key_sort_type": "DESC"}]}]})),
        "Assert: rules.catalog_table_rule.constraint_key_rule: table fake has constraint keys [UNIQUE_KEY unique_name (id ASC)], the rule expects [UNIQUE_KEY unique_name (id DESC)]"
    );
    assert_eq!(
        fails(json!({"table_identifier_rule": {"catalog_name": "Jdbc", "table": "test.fakeTable"}})),
        "Assert: rules.catalog_table_rule.table_identifier_rule: the table is test.fakeTable in catalog FakeSource, the rule expects test.fakeTable in catalog Jdbc"
    );
    assert_eq!(
        fails(json!({"table_identifier_rule": {"catalog_name": "FakeSource", "table": "fakeTable"}})),
        "Assert: rules.catalog_table_rule.table_identifier_rule: the table is test.fakeTable in catalog FakeSource, the rule expects fakeTable in catalog FakeSource"
    );
    // A table without keys fails key rules, as SeaTunnel's do.
    let plain = table("fake", &[("id", "bigint")]);
    let e = create(
        json!({"rules": {"catalog_table_rule": {"constraint_key_rule": []}}}),
        std::slice::from_ref(&plain),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "Assert: rules.catalog_table_rule.constraint_key_rule: table fake has no constraint keys"
    );
}

#[test]
fn option_list_is_what_ferry_connectors_prints() {
    ferry_api::declare::check_specs(SPECS, &[]).unwrap();
    assert_eq!(
        SPECS.iter().map(|s| s.name).collect::<Vec<_>>(),
        ["rules", "multi_table_sink_replica"]
    );
}

#[test]
fn states_keep_their_json_and_a_bad_one_is_an_error() {
    let w: WriterState = ferry_api::decode_state(&json!({"rows": {"t": 3}}), "w").unwrap();
    assert_eq!(w.rows["t"], 3);
    let c: CommitInfo =
        ferry_api::decode_state(&json!({"subtask": 1, "rows": {"t": 3}}), "c").unwrap();
    assert_eq!(
        ferry_api::encode_state(&c, "c").unwrap(),
        json!({"subtask": 1, "rows": {"t": 3}})
    );
    assert!(ferry_api::decode_state::<WriterState>(&json!({"rows": {"t": -1}}), "w").is_err());
    assert!(ferry_api::decode_state::<CommitInfo>(&json!({"rows": {}}), "c").is_err());
}

/// Assert through the test kit's driver: writers checkpointed, crashed before and after
/// the commit, restored from their states, the lost rows written again. The row count
/// rules then see every row the checkpoints hold plus the replayed ones: exactly the input,
/// never a row of a restored writer twice.
#[test]
fn row_counts_through_the_kits_crashes_and_restores_are_exact() {
    use ferry_connector_testkit::{job, SinkDriver};
    let t = table("t", &[("id", "bigint"), ("name", "string")]);
    let (_, input) = ferry_connector_testkit::id_name_batches(8, 10, "n");
    let run = |want: usize| -> Result<()> {
        let rules = json!({"rules": {"row_rules": [
            {"rule_type": "MIN_ROW", "rule_value": want},
            {"rule_type": "MAX_ROW", "rule_value": want}]}});
        let make = || create(rules.clone(), std::slice::from_ref(&t));
        let mut d = SinkDriver::start(make()?, 2, job(ferry_api::JobMode::Batch))?;
        d.write_all(&input[0..2])?;
        let cp1 = d.checkpoint()?;
        d.crash();
        let mut d = SinkDriver::restore(make()?, 2, job(ferry_api::JobMode::Batch), &cp1, false)?;
        d.write_all(&input[2..4])?;
        let cp2 = d.prepare()?;
        d.crash();
        let mut d = SinkDriver::restore(make()?, 2, job(ferry_api::JobMode::Batch), &cp2, false)?;
        // Rows no checkpoint held are lost with the crash and replayed by the source.
        d.write_all(&input[4..6])?;
        d.crash();
        let mut d = SinkDriver::restore(make()?, 2, job(ferry_api::JobMode::Batch), &cp2, true)?;
        d.write_all(&input[4..8])?;
        d.finish().map(|_| ())
    };
    run(80).unwrap();
    // The same run with a wrong expectation fails: the count is checked, not assumed.
    let e = run(81).unwrap_err().to_string();
    assert!(e.contains("80"), "{e}");
}
