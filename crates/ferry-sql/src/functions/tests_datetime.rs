//! SeaTunnel's date and time functions (docs/en/transform-v2/sql-functions.md, "Time and
//! Date Functions"): documented examples, nulls, leap days, month ends, Java patterns and
//! result types; where the page is silent, what `DateTimeFunction.java` returns (values
//! checked on a JVM). Sample row: ts = 2022-12-12T23:34:45 (a Monday),
//! ts_us = 2024-02-29T08:05:09.123456, dt = 2020-02-29 (a Saturday, leap day),
//! tm = 13:34:45, nts / ndt / ntm = NULL.

use chrono::{Datelike, Local};
use serde_json::{json, Value};

use super::testkit::{check, check_col, check_error, eval};

const NULL: Value = Value::Null;

#[test]
fn current_date_time_timestamp_now() {
    let (t, v) = eval("current_date");
    assert_eq!(t, "date");
    let today = Local::now().date_naive();
    let got = v.as_str().unwrap_or_default().to_string();
    // Around midnight the date may move on between the two readings.
    let tomorrow = today.succ_opt().unwrap_or(today);
    assert!(
        got == today.to_string() || got == tomorrow.to_string(),
        "{got}"
    );
    assert_eq!(eval("current_date()").0, "date");
    assert_eq!(eval("current_time").0, "time");
    assert_eq!(eval("current_timestamp").0, "timestamp");
    assert_eq!(eval("current_timestamp()").0, "timestamp");
    let (t, v) = eval("now()");
    assert_eq!(t, "timestamp");
    assert!(
        v.as_str()
            .is_some_and(|s| s.starts_with(&today.year().to_string())
                || s.starts_with(&tomorrow.year().to_string())),
        "{v}"
    );
    check("year(now()) >= 2024", "boolean", json!(true));
}

#[test]
fn dateadd_and_timestampadd() {
    check("dateadd(dt, 1, 'MONTH')", "date", json!("2020-03-29"));
    // Leap day + 1 year is the end of February; + 4 years is a leap day again.
    check("dateadd(dt, 1, 'YEAR')", "date", json!("2021-02-28"));
    check("dateadd(dt, 4, 'YEAR')", "date", json!("2024-02-29"));
    check("dateadd(dt, -1, 'DAY')", "date", json!("2020-02-28"));
    check("dateadd(dt, 1, 'WEEK')", "date", json!("2020-03-07"));
    // Month ends clamp, as LocalDate.plusMonths.
    check_col(
        "dateadd(x, 1, 'MONTH')",
        "date",
        json!(["2020-01-31", "2021-01-31", "2021-03-31", null]),
        "date",
        json!(["2020-02-29", "2021-02-28", "2021-04-30", null]),
    );
    check_col(
        "dateadd(x, -1, 'MONTH')",
        "date",
        json!(["2021-03-31"]),
        "date",
        json!(["2021-02-28"]),
    );
    // DAY is the default field; the field is case-insensitive.
    check("dateadd(ts, 2)", "timestamp", json!("2022-12-14T23:34:45"));
    check(
        "timestampadd(ts, 30, 'minute')",
        "timestamp",
        json!("2022-12-13T00:04:45"),
    );
    check(
        "dateadd(ts, -1, 'WEEK')",
        "timestamp",
        json!("2022-12-05T23:34:45"),
    );
    check(
        "dateadd(ts, 1, 'SECOND')",
        "timestamp",
        json!("2022-12-12T23:34:46"),
    );
    check(
        "dateadd(ts, 1500, 'MILLISECOND')",
        "timestamp",
        json!("2022-12-12T23:34:46.500000"),
    );
    check(
        "dateadd(ts, 1, 'HOUR')",
        "timestamp",
        json!("2022-12-13T00:34:45"),
    );
    check("dateadd(tm, 1, 'HOUR')", "time", json!("14:34:45"));
    // A time wraps around midnight.
    check("dateadd(tm, 11, 'HOUR')", "time", json!("00:34:45"));
    check("dateadd(tm, -14, 'HOUR')", "time", json!("23:34:45"));
    // A field the type lacks leaves the value unchanged (SeaTunnel's code).
    check("dateadd(dt, 1, 'HOUR')", "date", json!("2020-02-29"));
    check("dateadd(tm, 1, 'DAY')", "time", json!("13:34:45"));
    check("dateadd(nts, 1, 'DAY')", "timestamp", NULL);
    check("dateadd(ndt, 1)", "date", NULL);
    check("dateadd(ts, ni, 'DAY')", "timestamp", NULL);
    check_error("dateadd(ts, 1, 'DECADE')", "DECADE");
}

#[test]
fn datediff() {
    check("datediff(dt, ts, 'DAY')", "bigint", json!(1017));
    check("datediff(dt, ts)", "bigint", json!(1017));
    // Period.between: months and years are the components, not totals.
    check("datediff(dt, ts, 'MONTH')", "bigint", json!(9));
    check("datediff(dt, ts, 'YEAR')", "bigint", json!(2));
    check("datediff(ts, dt, 'MONTH')", "bigint", json!(-9));
    check("datediff(ts, dt, 'YEAR')", "bigint", json!(-2));
    check(
        "datediff(cast('2020-01-31' as date), dt, 'MONTH')",
        "bigint",
        json!(0),
    );
    check(
        "datediff(dt, cast('2021-02-28' as date), 'MONTH')",
        "bigint",
        json!(11),
    );
    check(
        "datediff(dt, cast('2021-02-28' as date), 'YEAR')",
        "bigint",
        json!(0),
    );
    check(
        "datediff(ts, dateadd(ts, 90, 'MINUTE'), 'HOUR')",
        "bigint",
        json!(1),
    );
    check(
        "datediff(ts, dateadd(ts, -90, 'MINUTE'), 'HOUR')",
        "bigint",
        json!(-1),
    );
    check(
        "datediff(ts, dateadd(ts, 90, 'MINUTE'), 'MINUTE')",
        "bigint",
        json!(90),
    );
    check(
        "datediff(ts, dateadd(ts, 1999, 'MILLISECOND'), 'SECOND')",
        "bigint",
        json!(1),
    );
    check(
        "datediff(ts, dateadd(ts, 1999, 'MILLISECOND'), 'MILLISECOND')",
        "bigint",
        json!(1999),
    );
    check(
        "datediff(ts, dateadd(ts, 15, 'DAY'), 'WEEK')",
        "bigint",
        json!(2),
    );
    check(
        "datediff(ts, dateadd(ts, 36, 'HOUR'), 'DAYTIME')",
        "bigint",
        json!(1),
    );
    // DAY compares calendar dates: 23:34 to 00:04 the next day is one day.
    check(
        "datediff(ts, dateadd(ts, 30, 'MINUTE'), 'DAY')",
        "bigint",
        json!(1),
    );
    // A time has no date: DAY/MONTH/YEAR give null.
    check("datediff(tm, tm, 'DAY')", "bigint", NULL);
    check("datediff(nts, ts)", "bigint", NULL);
    check("datediff(ts, ndt, 'YEAR')", "bigint", NULL);
    check_error("datediff(ts, ts, 'CENTURY')", "CENTURY");
}

#[test]
fn date_trunc() {
    check(
        "date_trunc(ts, 'YEAR')",
        "timestamp",
        json!("2022-01-01T00:00:00"),
    );
    check(
        "date_trunc(ts, 'MONTH')",
        "timestamp",
        json!("2022-12-01T00:00:00"),
    );
    check(
        "date_trunc(ts, 'DAY')",
        "timestamp",
        json!("2022-12-12T00:00:00"),
    );
    check(
        "date_trunc(ts, 'HOUR')",
        "timestamp",
        json!("2022-12-12T23:00:00"),
    );
    check(
        "date_trunc(ts, 'minute')",
        "timestamp",
        json!("2022-12-12T23:34:00"),
    );
    // SECOND drops the fraction.
    check(
        "date_trunc(ts_us, 'SECOND')",
        "timestamp",
        json!("2024-02-29T08:05:09"),
    );
    check(
        "date_trunc(dt, 'MONTH')",
        "timestamp",
        json!("2020-02-01T00:00:00"),
    );
    check("date_trunc(nts, 'DAY')", "timestamp", NULL);
    check_error("date_trunc(ts, 'WEEK')", "WEEK");
}

#[test]
fn dayname_and_monthname() {
    check("dayname(dt)", "string", json!("Saturday"));
    check("dayname(ts)", "string", json!("Monday"));
    check("dayname(ts_us)", "string", json!("Thursday"));
    check("dayname(ndt)", "string", NULL);
    check("monthname(dt)", "string", json!("February"));
    check("monthname(ts)", "string", json!("December"));
    check("monthname(nts)", "string", NULL);
    check_col(
        "dayname(x)",
        "date",
        json!(["2022-12-11", null, "2024-01-01"]),
        "string",
        json!(["Sunday", null, "Monday"]),
    );
}

#[test]
fn day_of_month_week_year() {
    check("day_of_month(ts)", "int", json!(12));
    check("day_of_month(dt)", "int", json!(29));
    check("day_of_month(ndt)", "int", NULL);
    // Monday = 1 … Sunday = 7.
    check("day_of_week(dt)", "int", json!(6));
    check("day_of_week(ts)", "int", json!(1));
    check("day_of_week(nts)", "int", NULL);
    check("day_of_year(dt)", "int", json!(60));
    check("day_of_year(ts)", "int", json!(346));
    check("day_of_year(ndt)", "int", NULL);
    check_col(
        "day_of_year(x)",
        "date",
        json!(["2020-12-31", "2021-12-31", "2021-01-01"]),
        "int",
        json!([366, 365, 1]),
    );
    check_col(
        "day_of_week(x)",
        "date",
        json!(["2022-12-11", null]),
        "int",
        json!([7, null]),
    );
}

#[test]
fn extract() {
    check("extract(year from ts)", "int", json!(2022));
    check("extract(month from ts)", "int", json!(12));
    check("extract(day from dt)", "int", json!(29));
    check("extract(hour from ts)", "int", json!(23));
    check("extract(minute from tm)", "int", json!(34));
    check("extract(second from ts)", "int", json!(45));
    check("extract(millisecond from ts_us)", "int", json!(123));
    check("extract(dayofweek from dt)", "int", json!(6));
    check("extract(dayofyear from dt)", "int", json!(60));
    // A field the value lacks is null (SeaTunnel's code).
    check("extract(hour from dt)", "int", NULL);
    check("extract(year from tm)", "int", NULL);
    check("extract(year from nts)", "int", NULL);
}

#[test]
fn formatdatetime() {
    check(
        "formatdatetime(ts, 'yyyy-MM-dd HH:mm:ss')",
        "string",
        json!("2022-12-12 23:34:45"),
    );
    // Java DateTimeFormatter letters (expected texts printed by a JVM).
    for (pattern, want) in [
        ("yy/M/d H:m:s", "24/2/29 8:5:9"),
        ("S", "1"),
        ("SS", "12"),
        ("SSS", "123"),
        ("SSSSSS", "123456"),
        ("EEE EEEE", "Thu Thursday"),
        ("MMM MMMM", "Feb February"),
        ("D DDD", "60 060"),
        ("hh:mm a", "08:05 AM"),
        ("yyyy-MM-dd''T''HH:mm:ss", "2024-02-29T08:05:09"),
        ("E, MMM d, ''''yy", "Thu, Feb 29, '24"),
        ("Q", "1"),
        ("w", "9"),
    ] {
        check(
            &format!("formatdatetime(ts_us, '{pattern}')"),
            "string",
            json!(want),
        );
    }
    check(
        "formatdatetime(dt, 'dd.MM.yyyy')",
        "string",
        json!("29.02.2020"),
    );
    check(
        "formatdatetime(tm, 'HH:mm:ss.SSS')",
        "string",
        json!("13:34:45.000"),
    );
    check("formatdatetime(nts, 'yyyy')", "string", NULL);
    check("formatdatetime(ts, nul)", "string", NULL);
    // Java fails on a field the value lacks and on unknown letters.
    check_error("formatdatetime(dt, 'yyyy HH')", "time");
    check_error("formatdatetime(tm, 'yyyy')", "date");
    check_error("formatdatetime(ts, 'yyyy bb')", "'b'");
    check_col(
        "formatdatetime(x, 'MM/dd')",
        "timestamp",
        json!(["2020-02-29T00:00:00", null]),
        "string",
        json!(["02/29", null]),
    );
}

#[test]
fn hour_minute_second() {
    check("hour(ts)", "int", json!(23));
    check("hour(tm)", "int", json!(13));
    check("minute(ts)", "int", json!(34));
    check("minute(tm)", "int", json!(34));
    check("second(ts)", "int", json!(45));
    check("second(ts_us)", "int", json!(9));
    check("hour(nts)", "int", NULL);
    check("minute(ntm)", "int", NULL);
    check("second(ntm)", "int", NULL);
    // A date has no time of day.
    check("hour(dt)", "int", NULL);
}

#[test]
fn month_quarter_year_week() {
    check("month(dt)", "int", json!(2));
    check("month(ts)", "int", json!(12));
    check("month(ndt)", "int", NULL);
    check("quarter(dt)", "int", json!(1));
    check("quarter(ts)", "int", json!(4));
    check("quarter(nts)", "int", NULL);
    check_col(
        "quarter(x)",
        "date",
        json!(["2020-03-31", "2020-04-01", "2020-09-30", "2020-10-01"]),
        "int",
        json!([1, 2, 3, 4]),
    );
    check("year(dt)", "int", json!(2020));
    check("year(ts)", "int", json!(2022));
    check("year(ndt)", "int", NULL);
    // WeekFields.ISO.weekOfYear() + 1, as SeaTunnel (values from a JVM).
    check("week(dt)", "int", json!(10));
    check("week(ndt)", "int", NULL);
    check_col(
        "week(x)",
        "date",
        json!([
            "2022-01-01",
            "2022-01-02",
            "2022-01-03",
            "2020-12-31",
            "2021-01-01",
            "2021-01-04",
            "2019-12-30",
            "2024-12-30"
        ]),
        "int",
        json!([1, 1, 2, 54, 1, 2, 54, 54]),
    );
}

#[test]
fn is_date() {
    check(
        "is_date('2021-04-08 13:34:45', 'yyyy-MM-dd HH:mm:ss')",
        "boolean",
        json!(true),
    );
    check(
        "is_date('2021-04-08', 'yyyy-MM-dd')",
        "boolean",
        json!(true),
    );
    // SMART resolving: 30 February is the month's last day, so it "is a date".
    check(
        "is_date('2021-02-30', 'yyyy-MM-dd')",
        "boolean",
        json!(true),
    );
    check(
        "is_date('2021-02-32', 'yyyy-MM-dd')",
        "boolean",
        json!(false),
    );
    check(
        "is_date('2021-13-01', 'yyyy-MM-dd')",
        "boolean",
        json!(false),
    );
    // MM and dd are exactly two digits.
    check("is_date('2021-4-8', 'yyyy-MM-dd')", "boolean", json!(false));
    check("is_date('2021-4-8', 'yyyy-M-d')", "boolean", json!(true));
    check(
        "is_date('2021-04-0x', 'yyyy-MM-dd')",
        "boolean",
        json!(false),
    );
    check("is_date(s, 'yyyy-MM-dd')", "boolean", json!(false));
    check("is_date('2021', 'dd')", "boolean", json!(false));
    // A null text parses to null without failing.
    check("is_date(nul, 'yyyy-MM-dd')", "boolean", json!(true));
    check_col(
        "is_date(x, 'yyyyMMdd')",
        "string",
        json!(["20200229", "20210229", "2020022", null]),
        "boolean",
        json!([true, true, false, true]),
    );
}

#[test]
fn parsedatetime_and_to_date() {
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
        "to_date('2021-02-29', 'yyyy-MM-dd')",
        "date",
        json!("2021-02-28"),
    );
    check(
        "to_date('29/02/2020', 'dd/MM/yyyy')",
        "date",
        json!("2020-02-29"),
    );
    check(
        "to_date('20210408', 'yyyyMMdd')",
        "date",
        json!("2021-04-08"),
    );
    check(
        "to_date('08 Apr 2021', 'dd MMM yyyy')",
        "date",
        json!("2021-04-08"),
    );
    check(
        "parsedatetime('2021-04-08 13:34:45.123', 'yyyy-MM-dd HH:mm:ss.SSS')",
        "timestamp",
        json!("2021-04-08T13:34:45.123000"),
    );
    check(
        "parsedatetime('2021-04-08 24:00:00', 'yyyy-MM-dd HH:mm:ss')",
        "timestamp",
        json!("2021-04-09T00:00:00"),
    );
    check(
        "parsedatetime('2021-04-08 01:30 PM', 'yyyy-MM-dd hh:mm a')",
        "timestamp",
        json!("2021-04-08T13:30:00"),
    );
    check("to_date(nul, 'yyyy-MM-dd')", "date", NULL);
    check_error("to_date('2021-02-32', 'yyyy-MM-dd')", "DayOfMonth");
    check_error("parsedatetime(s, 'yyyy-MM-dd HH:mm:ss')", "does not match");
    // The pattern decides the type when the job is built, so it must be constant and
    // contain 'yy' or 'mm'.
    check_error("to_date('12', 'dd')", "neither");
    check_error("to_date(s, s)", "constant");
}

#[test]
fn from_unixtime() {
    check(
        "from_unixtime(1672502400, 'yyyy-MM-dd HH:mm:ss', 'UTC+6')",
        "string",
        json!("2022-12-31 22:00:00"),
    );
    check(
        "from_unixtime(1672502400, 'yyyy-MM-dd HH:mm:ss', 'UTC')",
        "string",
        json!("2022-12-31 16:00:00"),
    );
    check(
        "from_unixtime(1672502400, 'yyyy-MM-dd HH:mm:ss', 'UTC+8')",
        "string",
        json!("2023-01-01 00:00:00"),
    );
    check(
        "from_unixtime(1672502400, 'yyyy-MM-dd HH:mm:ss', 'Asia/Shanghai')",
        "string",
        json!("2023-01-01 00:00:00"),
    );
    check(
        "from_unixtime(1672502400, 'HH:mm', '+05:30')",
        "string",
        json!("21:30"),
    );
    check(
        "from_unixtime(1672502400, 'HH:mm', 'GMT-3')",
        "string",
        json!("13:00"),
    );
    check(
        "from_unixtime(-1, 'yyyy-MM-dd HH:mm:ss', 'UTC')",
        "string",
        json!("1969-12-31 23:59:59"),
    );
    check("from_unixtime(big, 'yyyy', 'UTC')", "string", json!("2286"));
    check("from_unixtime(nbig, 'yyyy', 'UTC')", "string", NULL);
    check_error("from_unixtime(0, 'yyyy', 'Mars/Base')", "Mars/Base");
    // Without a zone: the system's zone (1970 or 1969 around the epoch).
    let (t, v) = eval("from_unixtime(86400, 'yyyy')");
    assert_eq!((t.as_str(), v), ("string", json!("1970")));
}
