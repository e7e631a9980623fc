//! Tests of the transform: the conformance queries, SeaTunnel's functions, errors and
//! row kinds.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, UInt8Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use ferry_api::types::{parse_type, type_name};
use ferry_api::value::{array_value_to_json, json_to_array, RowStyle};
use ferry_api::{ChangeBatch, JobContext, Options, RowKind, TableSchema, TransformFactory};
use serde_json::{json, Value};

use crate::SqlTransformFactory;

/// A table `name` with `fields` (SeaTunnel type names) and rows given as JSON lists.
fn table(name: &str, fields: &[(&str, &str)], rows: Value) -> (TableSchema, RecordBatch) {
    let schema: SchemaRef = Arc::new(Schema::new(
        fields
            .iter()
            .map(|(n, t)| Field::new(*n, parse_type(t).unwrap(), true))
            .collect::<Vec<_>>(),
    ));
    let rows = rows.as_array().unwrap().clone();
    let cols: Vec<ArrayRef> = (0..fields.len())
        .map(|k| {
            let vals: Vec<&Value> = rows.iter().map(|r| &r[k]).collect();
            json_to_array(&vals, schema.field(k).data_type()).unwrap()
        })
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    (TableSchema::new(name, schema), batch)
}

fn create(query: &str, input: &TableSchema) -> ferry_api::Result<Arc<dyn ferry_api::Transform>> {
    let mut o = Options::from_json("Sql", json!({ "query": query }));
    SqlTransformFactory.create(&mut o, std::slice::from_ref(input), &JobContext::default())
}

/// Output columns as (name, SeaTunnel type) and rows as JSON.
fn run(
    query: &str,
    input: &TableSchema,
    batch: RecordBatch,
) -> (Vec<(String, String)>, Vec<Vec<Value>>) {
    let t = create(query, input).unwrap_or_else(|e| panic!("{query}: {e}"));
    let out_schema = t.output_tables()[0].schema.clone();
    let mut inst = t.create_instance().unwrap();
    let out = inst
        .transform(ChangeBatch::inserts(input.name.clone(), batch))
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    let cols = out_schema
        .fields()
        .iter()
        .map(|f| (f.name().clone(), type_name(f.data_type())))
        .collect();
    let rows = match out {
        None => vec![],
        Some(b) => {
            assert_eq!(
                b.data.schema(),
                out_schema,
                "batch schema must be the declared output schema"
            );
            (0..b.num_rows())
                .map(|i| {
                    b.data
                        .columns()
                        .iter()
                        .map(|c| array_value_to_json(c.as_ref(), i, RowStyle::Positional))
                        .collect()
                })
                .collect()
        }
    };
    (cols, rows)
}

/// The one-row table the function tests use.
fn sample() -> (TableSchema, RecordBatch) {
    table(
        "t",
        &[
            ("name", "string"),
            ("n", "int"),
            ("big", "bigint"),
            ("d", "double"),
            ("dec", "decimal(10, 2)"),
            ("ts", "timestamp"),
            ("dt", "date"),
            ("tm", "time"),
            ("nul", "string"),
            ("nul_i", "int"),
        ],
        json!([[
            "Joy Ding",
            5,
            10000000000i64,
            -2.5,
            "12.35",
            "2022-12-12T23:34:45",
            "2020-02-29",
            "13:34:45",
            null,
            null
        ]]),
    )
}

/// Evaluates `expr` on the sample row: (SeaTunnel type, value).
fn eval(expr: &str) -> (String, Value) {
    let (t, b) = sample();
    let (cols, rows) = run(&format!("select {expr} as v from t"), &t, b);
    (cols[0].1.clone(), rows[0][0].clone())
}

fn check(expr: &str, ty: &str, v: Value) {
    let (t, got) = eval(expr);
    // Numbers compare by value: a double 5.0 prints as 5.
    let same = match (got.as_f64(), v.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => got == v,
    };
    assert!(t == ty && same, "{expr}: got {t} {got}, expected {ty} {v}");
}

fn error_of(query: &str, input: &TableSchema) -> String {
    create(query, input).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn sql_transform_conf() {
    let (t, b) = table(
        "fake",
        &[
            ("id", "int"),
            ("name", "string"),
            ("age", "int"),
            ("c_time", "time"),
            ("c_timestamp", "timestamp"),
            ("c_date", "date"),
            ("c_map", "map<string, string>"),
            ("c_array", "array<int>"),
            ("c_decimal", "decimal(30, 8)"),
            ("c_row", "{c_row = {c_int = int}}"),
        ],
        json!([[1, "abc", 20, "01:02:03", "2022-01-01T00:00:00", "2022-01-01", {"k": "v"}, [1, 2], "1.5", [[7]]]]),
    );
    let q = "select id, regexp_replace(name, '.+', 'b') as name, age+1 as age, pi() as pi, c_time, c_timestamp, c_date, c_map, c_array, c_decimal, c_row from fake";
    let (cols, rows) = run(q, &t, b);
    let types: Vec<&str> = cols.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(
        types,
        [
            "int",
            "string",
            "int",
            "double",
            "time",
            "timestamp",
            "date",
            "map<string, string>",
            "array<int>",
            "decimal(30, 8)",
            "{c_row = {c_int = int}}"
        ]
    );
    assert_eq!(rows[0][1], json!("b"));
    assert_eq!(rows[0][2], json!(21));
    assert_eq!(rows[0][3], json!(std::f64::consts::PI));
    assert_eq!(rows[0][10], json!([[7]]));
}

#[test]
fn criteria_filter_conf() {
    let (t, b) = table(
        "fake",
        &[
            ("id", "int"),
            ("name", "string"),
            ("age", "int"),
            ("email", "string"),
        ],
        json!([
            [1, "Joy Ding", 20, null],
            [2, "May Ding", 22, "may_ding@apache.com"],
            [3, "Kin Dom", 21, "kin_dom@apache.com"],
            [4, "LeBron Ding", 38, null],
            [8, "Wang DingCC", 34, null],
            [9, "Zu DingDD", 33, null],
            [10, "Zhang DingEE", 40, null],
            [11, "Lin Qiang", 40, null],
            [12, "Yu Liang", 40, null]
        ]),
    );
    let q = r#"
      select id, name, age, email from fake
              where ( id = 1 or id = 4 or id in (8, 9, 10, 11, 12) )
                  and id != 0 and name <> 'Kin Dom'
                  and ( age >= 20 or age < 22 )
                  and regexp_like(name, '[A-Z ]*')
                  and id > 0 and id >= 1 and id in (1, 2, 3, 4, 8, 9, 10, 11, 12)
                  and id not in (5, 6, 7) and name is not null and email is null
                  and id < 500 and id <= 500
                  and ( name like '%Din_' or name like 'Wan_%' or name like '%Yu%' )
                  and name not like '%LeBron%'
                  and name not like 'Wan_%'
                  and name not like '%Lian_'
    "#;
    let (cols, rows) = run(q, &t, b);
    assert_eq!(cols[0], ("id".to_string(), "int".to_string()));
    assert_eq!(
        rows,
        vec![vec![json!(1), json!("Joy Ding"), json!(20), Value::Null]]
    );
}

#[test]
fn func_string_conf() {
    let (t, b) = table(
        "fake",
        &[
            ("id", "int"),
            ("name", "string"),
            ("c1", "string"),
            ("c2", "string"),
            ("c3", "string"),
            ("c4", "string"),
            ("c5", "int"),
            ("c6", "string"),
            ("c7", "string"),
            ("c8", "string"),
            ("c9", "string"),
            ("c10", "string"),
            ("c11", "timestamp"),
        ],
        json!([[
            1,
            "Joy Ding",
            "A",
            "b",
            "&",
            "&^^$wef9",
            98,
            "0037",
            "7",
            "*Joy_Ding@s.com*",
            "Joy_WWWDing@s.com",
            "2020-10-01",
            "2022-12-12T23:34:45"
        ]]),
    );
    // As the HOCON string reads after unescaping (`\\d` is `\d`).
    let q = r"select ascii(c1) as c1_1, ascii(c2) as c2_1, bit_length(c4) as c4_1, length(c4) as c4_2, octet_length(c4) as c4_3, char(c5) as c5_1, concat(c1,id,'!') as c1_2, hextoraw(c6) as c6_1, rawtohex(c7) as c7_1, insert(name,2,2,'**') as name1, lower(name) as name2, upper(name) as name3, left(name, 3) as name4, right(name, 4) as name5, lpad(name, 10, '*') as name6, rpad(name, 10, '*') as name7, ltrim(c8, '*') as c8_1, rtrim(c8, '*') as c8_2, trim(c8, '*') as c8_3, regexp_replace(c9, 'w+', 'W', 'i') as c9_1, regexp_like(name, '[A-Z ]*', 'i') as name8, regexp_substr(c10, '\d{4}') as c10_1, regexp_substr(c10, '(\d{4})-(\d{2})-(\d{2})', 1, 1, null, 2) as c10_2, repeat(name||' ',3) as name9, replace(name,' ','_') as name10, soundex(name) as name11, name || space(3) as name12, substring(name, 1, 3) as name13, to_char(id) as id1, to_char(c11,'yyyy-MM-dd') as c11_1, translate(name, 'ing', 'ING') as name14, des_decrypt('1234567890', des_encrypt('1234567890', name)) as name15,UUID() as uuid from fake";
    let (cols, rows) = run(q, &t, b);
    let expected: &[(&str, &str, Value)] = &[
        ("c1_1", "int", json!(65)),
        ("c2_1", "int", json!(98)),
        ("c4_1", "bigint", json!(64)),
        ("c4_2", "bigint", json!(8)),
        ("c4_3", "bigint", json!(8)),
        ("c5_1", "string", json!("b")),
        ("c1_2", "string", json!("A1!")),
        ("c6_1", "string", json!("7")),
        ("c7_1", "string", json!("0037")),
        ("name1", "string", json!("J** Ding")),
        ("name2", "string", json!("joy ding")),
        ("name3", "string", json!("JOY DING")),
        ("name4", "string", json!("Joy")),
        ("name5", "string", json!("Ding")),
        ("name6", "string", json!("**Joy Ding")),
        ("name7", "string", json!("Joy Ding**")),
        ("c8_1", "string", json!("Joy_Ding@s.com*")),
        ("c8_2", "string", json!("*Joy_Ding@s.com")),
        ("c8_3", "string", json!("Joy_Ding@s.com")),
        ("c9_1", "string", json!("Joy_WDing@s.com")),
        ("name8", "boolean", json!(true)),
        ("c10_1", "string", json!("2020")),
        ("c10_2", "string", json!("10")),
        ("name9", "string", json!("Joy Ding Joy Ding Joy Ding ")),
        ("name10", "string", json!("Joy_Ding")),
        ("name11", "string", json!("J352")),
        ("name12", "string", json!("Joy Ding   ")),
        ("name13", "string", json!("Joy")),
        ("id1", "string", json!("1")),
        ("c11_1", "string", json!("2022-12-12")),
        ("name14", "string", json!("Joy DING")),
        ("name15", "string", json!("Joy Ding")),
    ];
    for (k, (name, ty, v)) in expected.iter().enumerate() {
        assert_eq!(
            (cols[k].0.as_str(), cols[k].1.as_str(), &rows[0][k]),
            (*name, *ty, v),
            "column {name}"
        );
    }
    assert_eq!(cols[32], ("uuid".to_string(), "string".to_string()));
    assert_eq!(rows[0][32].as_str().map(str::len), Some(36));
}

#[test]
fn sql_all_columns_conf() {
    let (t, b) = table(
        "fake",
        &[("id", "int"), ("name", "string"), ("c_array", "array<int>")],
        json!([[3, "x", [1]]]),
    );
    let (cols, rows) = run("select *, id as id_ from fake", &t, b);
    let names: Vec<&str> = cols.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, ["id", "name", "c_array", "id_"]);
    assert_eq!(cols[3].1, "int");
    assert_eq!(rows[0], vec![json!(3), json!("x"), json!([1]), json!(3)]);
}

#[test]
fn select_star_and_variables_conf() {
    let (t, b) = table(
        "a20261129",
        &[("name", "string"), ("age", "int")],
        json!([["abc", 1], ["def", 2], [null, 3]]),
    );
    let (cols, rows) = run("select * from a20261129 where name = 'abc' ", &t, b.clone());
    assert_eq!(cols.len(), 2);
    assert_eq!(rows, vec![vec![json!("abc"), json!(1)]]);
    let (_, rows) = run("select * from a20261129", &t, b);
    assert_eq!(rows.len(), 3);
}

#[test]
fn row_kinds_follow_their_rows() {
    let (t, b) = table("t", &[("id", "int")], json!([[1], [2], [3], [4]]));
    let tr = create("select id * 10 as x from t where id <> 2", &t).unwrap();
    let mut inst = tr.create_instance().unwrap();
    let kinds = UInt8Array::from(vec![
        RowKind::Insert as u8,
        RowKind::Delete as u8,
        RowKind::UpdateBefore as u8,
        RowKind::UpdateAfter as u8,
    ]);
    let out = inst
        .transform(ChangeBatch::with_kinds("t".into(), b, kinds))
        .unwrap()
        .unwrap();
    assert_eq!(out.num_rows(), 3);
    assert_eq!(
        [out.kind(0), out.kind(1), out.kind(2)],
        [RowKind::Insert, RowKind::UpdateBefore, RowKind::UpdateAfter]
    );
    let x = out.data.column(0);
    assert_eq!(
        array_value_to_json(x.as_ref(), 2, RowStyle::Positional),
        json!(40)
    );
}

#[test]
fn filtering_everything_gives_none() {
    let (t, b) = table("t", &[("id", "int")], json!([[1], [2]]));
    let tr = create("select id from t where id > 5", &t).unwrap();
    assert!(tr
        .create_instance()
        .unwrap()
        .transform(ChangeBatch::inserts("t".into(), b.clone()))
        .unwrap()
        .is_none());
    let tr = create("select id from t where 1 = 0", &t).unwrap();
    assert!(tr
        .create_instance()
        .unwrap()
        .transform(ChangeBatch::inserts("t".into(), b))
        .unwrap()
        .is_none());
}

#[test]
fn subquery_in_from_is_flattened() {
    let (t, b) = table(
        "t",
        &[("id", "int"), ("name", "string")],
        json!([[1, "a"], [2, "b"], [3, "c"]]),
    );
    let (cols, rows) = run(
        "select up from (select id, upper(name) as up from t) where id >= 2",
        &t,
        b,
    );
    assert_eq!(cols, vec![("up".to_string(), "string".to_string())]);
    assert_eq!(rows, vec![vec![json!("B")], vec![json!("C")]]);
}

#[test]
fn columns_are_case_sensitive_and_named_as_seatunnel() {
    let (t, b) = table(
        "t",
        &[("Name", "string"), ("c_row", "{c_inner_row = {x = int}}")],
        json!([["Ab", [[9]]]]),
    );
    let (cols, rows) = run(
        "select Name, upper(Name), c_row.c_inner_row.x from t",
        &t,
        b,
    );
    let names: Vec<&str> = cols.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, ["Name", "upper(Name)", "x"]);
    assert_eq!(rows[0], vec![json!("Ab"), json!("AB"), json!(9)]);
    let e = error_of("select name from t", &t);
    assert!(
        e.contains("name") && e.contains("select name from t"),
        "{e}"
    );
}

#[test]
fn bad_queries_fail_at_create_quoting_the_query() {
    let (t, _) = sample();
    for (q, needle) in [
        ("select nme from t", "nme"),
        ("select no_such_fn(name) from t", "no_such_fn"),
        ("selec name from t", "selec"),
        ("select name from t where", "where"),
        ("select count(*) from t", "aggregations"),
        ("select name, count(*) from t group by name", "aggregations"),
        ("select a.name from t a join t b on a.n = b.n", "joins"),
        ("select name from t order by n", "ORDER BY"),
        ("select name from t limit 1", "LIMIT"),
        ("select ascii(n, n) from t", "ASCII() takes 1 argument"),
        ("select sqrt(name) from t", "must be a number"),
        ("select parsedatetime(name, name) from t", "constant"),
        ("insert into t values (1)", "SELECT"),
    ] {
        let e = error_of(q, &t);
        assert!(
            e.contains(needle) && e.contains("option 'query'") && e.contains(q.trim()),
            "{q}: {e}"
        );
    }
}

#[test]
fn options_are_checked() {
    let (t, _) = sample();
    let mut o = Options::from_json("Sql", json!({ "query": "select * from t", "qurey": 1 }));
    let e = SqlTransformFactory
        .create(&mut o, std::slice::from_ref(&t), &JobContext::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("qurey"), "{e}");
    let mut o = Options::from_json("Sql", json!({}));
    let e = SqlTransformFactory
        .create(&mut o, std::slice::from_ref(&t), &JobContext::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("query") && e.contains("required"), "{e}");
}

#[test]
fn operators_and_casts() {
    check("n + 1", "int", json!(6));
    check("n / 2", "int", json!(2));
    check("n * big", "bigint", json!(50000000000i64));
    check("n + d", "double", json!(2.5));
    check("n % 3", "int", json!(2));
    check("name || nul || '!'", "string", json!("Joy Ding!"));
    check("cast(n as string)", "string", json!("5"));
    check("cast('42' as int)", "int", json!(42));
    check("cast(n as bigint)", "bigint", json!(5));
    check("cast(n as long)", "bigint", json!(5));
    check("cast(n as double)", "double", json!(5.0));
    check("cast(n as float)", "float", json!(5.0));
    check("cast(d as decimal(10,2))", "decimal(10, 2)", json!(-2.5));
    check(
        "cast('2020-01-02 03:04:05' as timestamp)",
        "timestamp",
        json!("2020-01-02T03:04:05"),
    );
    check("cast(ts as date)", "date", json!("2022-12-12"));
    check("cast(ts as time)", "time", json!("23:34:45"));
    check("cast(name as bytes)", "bytes", json!("Sm95IERpbmc="));
    check(
        "case when n > 3 then 'big' else 'small' end",
        "string",
        json!("big"),
    );
    check("case n when 5 then 1 else 0 end", "int", json!(1));
    check("n between 1 and 5", "boolean", json!(true));
    check("name like 'Joy%'", "boolean", json!(true));
    check("nul is null", "boolean", json!(true));
    check("n in (1, 5)", "boolean", json!(true));
}

#[test]
fn string_functions() {
    check("ascii('Hi')", "int", json!(72));
    check("ascii(nul)", "int", Value::Null);
    check("bit_length(name)", "bigint", json!(64));
    check("char_length(name)", "bigint", json!(8));
    check("length('héllo')", "bigint", json!(5));
    check("octet_length('héllo')", "bigint", json!(6));
    check("octet_length(nul)", "bigint", Value::Null);
    check("char(65)", "string", json!("A"));
    check("chr(98)", "string", json!("b"));
    check("concat(name, '_', nul, n)", "string", json!("Joy Ding_5"));
    check(
        "concat_ws(',', name, nul, '_')",
        "string",
        json!("Joy Ding,_"),
    );
    check("concat_ws(nul, 'a', 'b')", "string", json!("ab"));
    check("hextoraw('00480069')", "string", json!("Hi"));
    check("rawtohex('Hi')", "string", json!("00480069"));
    check("rawtohex(cast('Hi' as bytes))", "string", json!("4869"));
    check("insert(name, 1, 1, ' ')", "string", json!(" oy Ding"));
    check("insert(nul, 1, 1, 'x')", "string", json!("x"));
    check("insert(name, 20, 1, 'x')", "string", json!("Joy Ding"));
    check("lcase(name)", "string", json!("joy ding"));
    check("ucase(name)", "string", json!("JOY DING"));
    check("left(name, 100)", "string", json!("Joy Ding"));
    check("right(name, 3)", "string", json!("ing"));
    check("locate('D', name)", "int", json!(5));
    check("locate('x', name)", "int", json!(0));
    check("locate('i', 'Ding Ding', 4)", "int", json!(7));
    check("locate('i', 'Ding Ding', -1)", "int", json!(7));
    check("locate('a', nul)", "int", json!(0));
    check("position('D', name)", "int", json!(5));
    check("instr(name, 'D')", "int", json!(5));
    check("lpad('12', 5, '*')", "string", json!("***12"));
    check("lpad(name, 3)", "string", json!("Joy"));
    check("rpad('ab', 4)", "string", json!("ab  "));
    check("ltrim('  x  ')", "string", json!("x  "));
    check("rtrim('  x  ')", "string", json!("  x"));
    check("trim('  x  ')", "string", json!("x"));
    check("trim(both '*' from '**x**')", "string", json!("x"));
    check(
        "regexp_replace('Hello    World', ' +', ' ')",
        "string",
        json!("Hello World"),
    );
    check(
        "regexp_replace('Hello WWWWorld', 'w+', 'W', 'i')",
        "string",
        json!("Hello World"),
    );
    check(
        "regexp_replace('ab12', '([a-z]+)(\\d+)', '$2$1')",
        "string",
        json!("12ab"),
    );
    check(
        "regexp_like('Hello    World', '[A-Z ]*', 'i')",
        "boolean",
        json!(true),
    );
    check("regexp_like('abc', '^x')", "boolean", json!(false));
    check("regexp_like(nul, 'x')", "boolean", Value::Null);
    check(
        "regexp_substr('2020-10-01', '\\d{4}')",
        "string",
        json!("2020"),
    );
    check(
        "regexp_substr('2020-10-01', '(\\d{4})-(\\d{2})-(\\d{2})', 1, 1, NULL, 3)",
        "string",
        json!("01"),
    );
    check("regexp_substr('abc', 'x')", "string", Value::Null);
    check("repeat('ab', 3)", "string", json!("ababab"));
    check("repeat('ab', -1)", "string", json!(""));
    check("replace(name, ' ')", "string", json!("JoyDing"));
    check("replace(name, 'Ding', 'D')", "string", json!("Joy D"));
    check("soundex('Robert')", "string", json!("R163"));
    check("soundex('Tymczak')", "string", json!("T522"));
    check("space(2) || 'x'", "string", json!("  x"));
    check("substring('[Hello]', 2)", "string", json!("Hello]"));
    check("substring('hour', 3, 2)", "string", json!("ur"));
    check("substr(name, -4)", "string", json!("Ding"));
    check("substring(name, 10)", "string", Value::Null);
    check("substring(name from 5 for 2)", "string", json!("Di"));
    check("to_char(d)", "string", json!("-2.5"));
    check(
        "to_char(ts, 'yyyy-MM-dd HH:mm:ss')",
        "string",
        json!("2022-12-12 23:34:45"),
    );
    check("to_char(nul)", "string", Value::Null);
    check(
        "translate('Hello world', 'eo', 'EO')",
        "string",
        json!("HEllO wOrld"),
    );
    check("translate('abc', 'abc', 'x')", "string", json!("xbc"));
    check("des_encrypt('1234567890', nul)", "string", Value::Null);
}

#[test]
fn numeric_functions() {
    check("abs(-3)", "int", json!(3));
    check("abs(d)", "double", json!(2.5));
    check("abs(big)", "bigint", json!(10000000000i64));
    check("abs(-dec)", "decimal(10, 2)", json!(12.35));
    check("acos(1)", "double", json!(0.0));
    check("asin(0)", "double", json!(0.0));
    check("atan(0)", "double", json!(0.0));
    check("cos(0)", "double", json!(1.0));
    check("cosh(0)", "double", json!(1.0));
    check("cot(1)", "double", json!(1.0 / 1f64.tan()));
    check("sin(0)", "double", json!(0.0));
    check("sinh(0)", "double", json!(0.0));
    check("tan(0)", "double", json!(0.0));
    check("tanh(0)", "double", json!(0.0));
    check("atan2(1, 1)", "double", json!(std::f64::consts::FRAC_PI_4));
    check("mod(n, 3)", "int", json!(2));
    check("mod(-7, 3)", "int", json!(-1));
    check("mod(big, 7)", "int", json!(10000000000i64 % 7));
    check("ceil(d)", "int", json!(-2));
    check("ceiling(1.2)", "int", json!(2));
    check("floor(d)", "int", json!(-3));
    check("floor(nul_i)", "int", Value::Null);
    check("exp(0)", "double", json!(1.0));
    check("ln(1)", "double", json!(0.0));
    check("log(2, 8)", "double", json!(3.0));
    check("log(10, 1000)", "double", json!(3.0));
    check("log10(100)", "double", json!(2.0));
    check("radians(180)", "double", json!(std::f64::consts::PI));
    check("sqrt(16)", "double", json!(4.0));
    check("pi()", "double", json!(std::f64::consts::PI));
    check("power(2, 10)", "double", json!(1024.0));
    check("round(2.675, 2)", "double", json!(2.68));
    check("round(d)", "double", json!(-3.0));
    check("round(155, -1)", "int", json!(160));
    check("round(dec, 1)", "decimal(10, 2)", json!(12.4));
    check("sign(d)", "int", json!(-1));
    check("sign(nul_i)", "int", json!(0));
    check("trunc(2.679, 2)", "double", json!(2.67));
    check("truncate(d)", "double", json!(-2.0));
    check("rand(42)", "double", json!(0.7275636800328681));
    let (t, v) = eval("random()");
    assert_eq!(t, "double");
    assert!((0.0..1.0).contains(&v.as_f64().unwrap()));
}

#[test]
fn numeric_errors_are_data_errors() {
    let (t, b) = sample();
    let tr = create("select ln(d) as x from t", &t).unwrap();
    let e = tr
        .create_instance()
        .unwrap()
        .transform(ChangeBatch::inserts("t".into(), b))
        .unwrap_err();
    assert!(e.to_string().contains("LN()"), "{e}");
}

#[test]
fn datetime_functions() {
    check("dateadd(dt, 1, 'MONTH')", "date", json!("2020-03-29"));
    check("dateadd(dt, 1, 'YEAR')", "date", json!("2021-02-28"));
    check("dateadd(ts, 2)", "timestamp", json!("2022-12-14T23:34:45"));
    check(
        "timestampadd(ts, 30, 'MINUTE')",
        "timestamp",
        json!("2022-12-13T00:04:45"),
    );
    check("dateadd(tm, 1, 'HOUR')", "time", json!("14:34:45"));
    check("dateadd(dt, 1, 'HOUR')", "date", json!("2020-02-29"));
    check("datediff(dt, ts, 'DAY')", "bigint", json!(1017));
    check("datediff(dt, ts, 'MONTH')", "bigint", json!(9));
    check("datediff(dt, ts, 'YEAR')", "bigint", json!(2));
    check(
        "datediff(ts, dateadd(ts, 90, 'MINUTE'), 'HOUR')",
        "bigint",
        json!(1),
    );
    check(
        "date_trunc(ts, 'MONTH')",
        "timestamp",
        json!("2022-12-01T00:00:00"),
    );
    check(
        "date_trunc(ts, 'HOUR')",
        "timestamp",
        json!("2022-12-12T23:00:00"),
    );
    check("dayname(dt)", "string", json!("Saturday"));
    check("monthname(ts)", "string", json!("December"));
    check("day_of_month(ts)", "int", json!(12));
    check("day_of_week(dt)", "int", json!(6));
    check("day_of_year(dt)", "int", json!(60));
    check("extract(year from ts)", "int", json!(2022));
    check("extract(second from ts)", "int", json!(45));
    check("extract(dayofweek from dt)", "int", json!(6));
    check(
        "formatdatetime(ts, 'yyyy/MM/dd HH:mm')",
        "string",
        json!("2022/12/12 23:34"),
    );
    check(
        "formatdatetime(dt, 'dd.MM.yy')",
        "string",
        json!("29.02.20"),
    );
    check("hour(ts)", "int", json!(23));
    check("hour(tm)", "int", json!(13));
    check("minute(ts)", "int", json!(34));
    check("second(tm)", "int", json!(45));
    check("month(dt)", "int", json!(2));
    check("quarter(ts)", "int", json!(4));
    check("week(dt)", "int", json!(10));
    check("year(dt)", "int", json!(2020));
    check("year(nul)", "int", Value::Null);
    check(
        "is_date('2021-04-08 13:34:45', 'yyyy-MM-dd HH:mm:ss')",
        "boolean",
        json!(true),
    );
    check(
        "is_date('2021-04-0x', 'yyyy-MM-dd')",
        "boolean",
        json!(false),
    );
    check(
        "parsedatetime('2021-04-08 13:34:45', 'yyyy-MM-dd HH:mm:ss')",
        "timestamp",
        json!("2021-04-08T13:34:45"),
    );
    check(
        "to_date('2021-04-08', 'yyyy-MM-dd')",
        "date",
        json!("2021-04-08"),
    );
    check("parsedatetime('13:34', 'HH:mm')", "time", json!("13:34:00"));
    check(
        "from_unixtime(1672502400, 'yyyy-MM-dd HH:mm:ss', 'UTC+6')",
        "string",
        json!("2022-12-31 22:00:00"),
    );
    check("from_unixtime(0, 'yyyy', 'UTC')", "string", json!("1970"));
    let (t, v) = eval("current_timestamp");
    assert_eq!(t, "timestamp");
    assert!(v.as_str().is_some_and(|s| s.starts_with("20")));
    assert_eq!(eval("current_date").0, "date");
    assert_eq!(eval("current_time").0, "time");
    assert_eq!(eval("now()").0, "timestamp");
}

#[test]
fn system_functions() {
    check("coalesce(nul, name)", "string", json!("Joy Ding"));
    check("ifnull(nul, 'x')", "string", json!("x"));
    check("nullif(n, 5)", "int", Value::Null);
    check("nullif(n, 6)", "int", json!(5));
    let (t, v) = eval("uuid()");
    assert_eq!(t, "string");
    assert_eq!(v.as_str().map(str::len), Some(36));
}

#[test]
fn many_batches_reuse_the_plan() {
    let (t, _) = table("t", &[("id", "int")], json!([]));
    let tr = create(
        "select id + 1 as x, upper(to_char(id)) as s from t where mod(id, 2) = 0",
        &t,
    )
    .unwrap();
    let mut inst = tr.create_instance().unwrap();
    for k in 0..5 {
        let ids: Vec<i32> = (k * 100..k * 100 + 100).collect();
        let b = RecordBatch::try_new(
            t.schema.clone(),
            vec![Arc::new(arrow::array::Int32Array::from(ids))],
        )
        .unwrap();
        let out = inst
            .transform(ChangeBatch::inserts("t".into(), b))
            .unwrap()
            .unwrap();
        assert_eq!(out.num_rows(), 50);
        assert_eq!(out.data.column(1).data_type(), &DataType::Utf8);
        assert!(!out.data.column(0).is_null(0));
    }
}

#[test]
fn option_list_is_what_ferry_connectors_prints() {
    ferry_api::declare::check_specs(crate::SPECS, &[]).unwrap();
    assert!(crate::SPECS[0].required && crate::SPECS[0].name == "query");
}
