//! SeaTunnel's system functions (docs/en/transform-v2/sql-functions.md, "System
//! Functions"): CAST, COALESCE, IFNULL, NULLIF, CASE WHEN and UUID, with nulls and result
//! types.

use serde_json::{json, Value};

use super::testkit::{check, check_col, check_error, eval};

const NULL: Value = Value::Null;

#[test]
fn cast() {
    check("cast(n as string)", "string", json!("5"));
    check("cast(n as varchar)", "string", json!("5"));
    check("cast('42' as int)", "int", json!(42));
    check("cast('42' as integer)", "int", json!(42));
    check("cast(n as bigint)", "bigint", json!(5));
    check("cast(n as long)", "bigint", json!(5));
    check("cast(n as byte)", "tinyint", json!(5));
    check("cast(n as double)", "double", json!(5.0));
    check("cast('1.5' as float)", "float", json!(1.5));
    check(
        "cast('12.345' as decimal(10, 3))",
        "decimal(10, 3)",
        json!(12.345),
    );
    check(
        "cast(dt as timestamp)",
        "timestamp",
        json!("2020-02-29T00:00:00"),
    );
    check("cast(ts as date)", "date", json!("2022-12-12"));
    check("cast(ts as time)", "time", json!("23:34:45"));
    check("cast(s as bytes)", "bytes", json!("Sm95IERpbmc="));
    check("cast(nul as int)", "int", NULL);
    check("cast(ni as string)", "string", NULL);
    // Text that is not a number fails, as Java's Integer.parseInt.
    check_error("cast(s as int)", "Joy Ding");
    check_col(
        "cast(x as int)",
        "string",
        json!(["1", null, "-3"]),
        "int",
        json!([1, null, -3]),
    );
}

#[test]
fn coalesce() {
    check("coalesce(nul, s)", "string", json!("Joy Ding"));
    check("coalesce(s, nul)", "string", json!("Joy Ding"));
    check("coalesce(nul, nul)", "string", NULL);
    check("coalesce(ni, n, 1)", "int", json!(5));
    check("coalesce(ni, 7)", "int", json!(7));
    check_col(
        "coalesce(x, 'none')",
        "string",
        json!(["a", null]),
        "string",
        json!(["a", "none"]),
    );
}

#[test]
fn ifnull() {
    check("ifnull(nul, 'x')", "string", json!("x"));
    check("ifnull(s, 'x')", "string", json!("Joy Ding"));
    check("ifnull(ni, 0)", "int", json!(0));
    check("ifnull(nul, nul)", "string", NULL);
}

#[test]
fn nullif() {
    check("nullif(n, 5)", "int", NULL);
    check("nullif(n, 6)", "int", json!(5));
    check("nullif(ni, 1)", "int", NULL);
    check("nullif(n, ni)", "int", json!(5));
    check("nullif(s, 'Joy Ding')", "string", NULL);
    check("nullif(s, e)", "string", json!("Joy Ding"));
}

#[test]
fn case_when() {
    // The example on SeaTunnel's page, on the sample row.
    check(
        "case when s in ('Joy Ding') then 1 else 0 end",
        "int",
        json!(1),
    );
    check(
        "case when s not in ('Joy Ding') then 1 else 0 end",
        "int",
        json!(0),
    );
    check(
        "case when tiny = -3 and to_char(flag) = 'true' then 1 else 0 end",
        "int",
        json!(1),
    );
    check(
        "case when tiny != -3 or to_char(flag) = 'true' then 1 else 0 end",
        "int",
        json!(1),
    );
    check(
        "case when n > 1 and big > 1 and f > 1 and dec > 1 then 1 else 0 end",
        "int",
        json!(1),
    );
    check("case when tiny <> -3 then 1 else 0 end", "int", json!(0));
    check("case when nul is null then 'x' end", "string", json!("x"));
    check("case when ni > 0 then 'x' end", "string", NULL);
}

#[test]
fn uuid() {
    let (t, v) = eval("uuid()");
    assert_eq!(t, "string");
    let s = v.as_str().unwrap_or_default().to_string();
    // A random (version 4) UUID, as Java's UUID.randomUUID().
    assert_eq!(s.len(), 36, "{s}");
    assert_eq!(s.as_bytes()[14], b'4', "{s}");
    assert_eq!(s.matches('-').count(), 4, "{s}");
    // Every row gets its own.
    let (tt, b) = super::testkit::table(&[("x", "int")], json!([[1], [2], [3], [4]]));
    let mut o =
        ferry_api::Options::from_json("Sql", json!({ "query": "select uuid() as u from t" }));
    let tr = ferry_api::TransformFactory::create(
        &crate::SqlTransformFactory,
        &mut o,
        std::slice::from_ref(&tt),
        &ferry_api::JobContext::default(),
    )
    .expect("plan");
    let out = tr
        .create_instance()
        .expect("instance")
        .transform(ferry_api::ChangeBatch::inserts("t".into(), b))
        .expect("run")
        .expect("rows");
    let col = out.data.column(0);
    let vals: std::collections::HashSet<String> = (0..4)
        .map(|i| {
            ferry_api::value::array_value_to_json(
                col.as_ref(),
                i,
                ferry_api::value::RowStyle::Positional,
            )
            .to_string()
        })
        .collect();
    assert_eq!(vals.len(), 4);
}
