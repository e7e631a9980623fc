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
fn cast_to_decimal_rounds_towards_positive_infinity() {
    // SeaTunnel: new BigDecimal(x.toString()).setScale(s, RoundingMode.CEILING).
    check(
        "cast('12.341' as decimal(10, 2))",
        "decimal(10, 2)",
        json!(12.35),
    );
    check(
        "cast('12.345' as decimal(10, 2))",
        "decimal(10, 2)",
        json!(12.35),
    );
    check(
        "cast('-12.349' as decimal(10, 2))",
        "decimal(10, 2)",
        json!(-12.34),
    );
    check(
        "cast('1.5e2' as decimal(10, 1))",
        "decimal(10, 1)",
        json!(150.0),
    );
    check("cast('+.5' as decimal(10, 0))", "decimal(10, 0)", json!(1));
    check(
        "cast('0.000000000000000000000000000000000000000001' as decimal(10, 2))",
        "decimal(10, 2)",
        json!(0.01),
    );
    check(
        "cast('-0.000000000000000000000000000000000000000001' as decimal(10, 2))",
        "decimal(10, 2)",
        json!(0.0),
    );
    // Doubles and floats through their Java text: 0.1 + 0.2 is 0.30000000000000004.
    check(
        "cast(0.1 + 0.2 as decimal(10, 2))",
        "decimal(10, 2)",
        json!(0.31),
    );
    check("cast(d as decimal(10, 0))", "decimal(10, 0)", json!(-2));
    check("cast(f as decimal(10, 0))", "decimal(10, 0)", json!(2));
    check(
        "cast(1e10 as decimal(20, 1))",
        "decimal(20, 1)",
        json!(10000000000.0),
    );
    check("cast(n as decimal(10, 2))", "decimal(10, 2)", json!(5.0));
    check("cast(neg as decimal(10, 2))", "decimal(10, 2)", json!(-7.0));
    check("cast(dec as decimal(10, 1))", "decimal(10, 1)", json!(12.4));
    check(
        "cast(-dec as decimal(10, 1))",
        "decimal(10, 1)",
        json!(-12.3),
    );
    check("cast(ndec as decimal(10, 1))", "decimal(10, 1)", NULL);
    check("cast(nul as decimal(10, 1))", "decimal(10, 1)", NULL);
    check_col(
        "cast(x as decimal(10, 1))",
        "double",
        json!([1.01, null, -1.09, 2.0]),
        "decimal(10, 1)",
        json!([1.1, null, -1.0, 2.0]),
    );
    check_error("cast(big as decimal(5, 0))", "does not fit DECIMAL(5, 0)");
    check_error("cast(s as decimal(10, 2))", "'Joy Ding' is not a number");
    check_error("cast(' 1' as decimal(10, 2))", "is not a number");
    check_error(
        "cast(flag as decimal(10, 2))",
        "CAST(boolean AS DECIMAL) is not supported",
    );
}

#[test]
fn cast_int_to_date_and_time() {
    // An int is read as yyyyMMdd / HHmmss (LocalDate.of / LocalTime.of, no lenience).
    check("cast(20240131 as date)", "date", json!("2024-01-31"));
    check("cast(20200229 as date)", "date", json!("2020-02-29"));
    check("cast(ni as date)", "date", NULL);
    check_col(
        "cast(x as date)",
        "int",
        json!([19991231, null, 101]),
        "date",
        json!(["1999-12-31", null, "0000-01-01"]),
    );
    check_error(
        "cast(20230229 as date)",
        "20230229 is not a date written yyyyMMdd",
    );
    check_error("cast(n as date)", "5 is not a date written yyyyMMdd");
    check("cast(133445 as time)", "time", json!("13:34:45"));
    check("cast(0 as time)", "time", json!("00:00:00"));
    check("cast(ni as time)", "time", NULL);
    check("cast(dt as time)", "time", json!("00:00:00"));
    check_col(
        "cast(x as time)",
        "int",
        json!([235959, null, 5]),
        "time",
        json!(["23:59:59", null, "00:00:05"]),
    );
    check_error(
        "cast(240000 as time)",
        "240000 is not a time written HHmmss",
    );
    check_error("cast(neg as time)", "-7 is not a time written HHmmss");
    // SeaTunnel has no such casts (only an Integer becomes a DATE or TIME).
    check_error("cast(big as date)", "CAST(bigint AS DATE) is not supported");
    check_error(
        "cast(small as date)",
        "CAST(smallint AS DATE) is not supported",
    );
    check_error("cast(d as date)", "CAST(double AS DATE) is not supported");
    check_error("cast(tm as date)", "CAST(time AS DATE) is not supported");
    check_error("cast(big as time)", "CAST(bigint AS TIME) is not supported");
}

#[test]
fn cast_to_timestamp() {
    use chrono::{Local, TimeZone};
    // A bigint is epoch milliseconds, shown in the system time zone
    // (LocalDateTime.ofInstant(Instant.ofEpochMilli(v), ZoneId.systemDefault())).
    let local = |ms: i64| {
        Local
            .timestamp_millis_opt(ms)
            .single()
            .map(|t| t.naive_local().format("%Y-%m-%dT%H:%M:%S").to_string())
            .unwrap_or_default()
    };
    check(
        "cast(big as timestamp)",
        "timestamp",
        json!(local(10_000_000_000)),
    );
    check(
        "cast(1700000000000 as timestamp)",
        "timestamp",
        json!(local(1_700_000_000_000)),
    );
    check("cast(nbig as timestamp)", "timestamp", NULL);
    // A time is today at that time.
    let (_, v) = eval("cast(tm as timestamp)");
    let today = Local::now().date_naive().format("%Y-%m-%d").to_string();
    assert_eq!(v, json!(format!("{today}T13:34:45")));
    check(
        "cast(dt as timestamp)",
        "timestamp",
        json!("2020-02-29T00:00:00"),
    );
    check_error(
        "cast(n as timestamp)",
        "CAST(int AS TIMESTAMP) is not supported",
    );
    check_error(
        "cast(d as timestamp)",
        "CAST(double AS TIMESTAMP) is not supported",
    );
}

#[test]
fn values_as_text_as_java_writes_them() {
    // Double.toString / Float.toString / BigDecimal.toString / java.time's toString.
    check("cast(d as string)", "string", json!("-2.5"));
    check("cast(cast(n as double) as string)", "string", json!("5.0"));
    check("cast(100.0 as varchar)", "string", json!("100.0"));
    check("cast(1e10 as string)", "string", json!("1.0E10"));
    check("cast(0.00001 as string)", "string", json!("1.0E-5"));
    check(
        "cast(12345678.5 as string)",
        "string",
        json!("1.23456785E7"),
    );
    check("cast(f as string)", "string", json!("1.5"));
    check("cast(dec as string)", "string", json!("12.35"));
    check("cast(nd as string)", "string", NULL);
    check("cast(ts as string)", "string", json!("2022-12-12T23:34:45"));
    check(
        "cast(ts_us as string)",
        "string",
        json!("2024-02-29T08:05:09.123456"),
    );
    check(
        "cast(cast(dt as timestamp) as string)",
        "string",
        json!("2020-02-29T00:00"),
    );
    check("cast(dt as string)", "string", json!("2020-02-29"));
    check("cast(tm as string)", "string", json!("13:34:45"));
    check("cast(d as bytes)", "bytes", json!("LTIuNQ=="));
    // CONCAT, ||, CONCAT_WS and TO_CHAR write values the same way.
    check("concat('x', 1e7)", "string", json!("x1.0E7"));
    check("'x' || cast(n as double)", "string", json!("x5.0"));
    check(
        "concat_ws(',', d, 0.001, 0.0001)",
        "string",
        json!("-2.5,0.001,1.0E-4"),
    );
    check("to_char(cast(n as double))", "string", json!("5.0"));
    check("to_char(1e21)", "string", json!("1.0E21"));
    check("concat(ts, '')", "string", json!("2022-12-12T23:34:45"));
    check_col(
        "concat(x, '')",
        "double",
        json!([1e10, 0.5, null, -0.0, 123456789.0]),
        "string",
        json!(["1.0E10", "0.5", "", "-0.0", "1.23456789E8"]),
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
