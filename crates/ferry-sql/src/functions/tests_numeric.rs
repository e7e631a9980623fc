//! SeaTunnel's numeric functions (docs/en/transform-v2/sql-functions.md, "Numeric
//! Functions"): documented examples, nulls, edge values and result types; where the page
//! is silent, what `NumericFunction.java` returns (values checked on a JVM). Sample row:
//! n = 5, neg = -7, zero = 0, ni = NULL, big = 10000000000, tiny = -3, small = 300,
//! d = -2.5, nd = NULL, f = 1.5 (float), dec = 12.35 (decimal(10, 2)), ndec = NULL.

use serde_json::{json, Value};

use super::testkit::{check, check_col, check_error, eval, f64_of};

const NULL: Value = Value::Null;

#[test]
fn abs() {
    check("abs(n)", "int", json!(5));
    check("abs(neg)", "int", json!(7));
    check("abs(big)", "bigint", json!(10000000000i64));
    check("abs(d)", "double", json!(2.5));
    check("abs(f)", "float", json!(1.5));
    check("abs(-dec)", "decimal(10, 2)", json!(12.35));
    check("abs(tiny)", "tinyint", json!(3));
    check("abs(small)", "smallint", json!(300));
    check("abs(ni)", "int", NULL);
    check("abs(ndec)", "decimal(10, 2)", NULL);
    // Java's Math.abs(Integer.MIN_VALUE) is itself.
    check_col(
        "abs(x)",
        "int",
        json!([-2147483648i64, null, 0]),
        "int",
        json!([-2147483648i64, null, 0]),
    );
}

// Java's printed values, kept as printed.
#[allow(clippy::approx_constant)]
#[test]
fn trigonometry() {
    // Java Math values for 0.5 and 1.
    check("acos(0.5)", "double", json!(1.0471975511965979));
    check("asin(0.5)", "double", json!(0.5235987755982989));
    check("atan(1)", "double", json!(0.7853981633974483));
    check("cos(1)", "double", json!(0.5403023058681398));
    check("cosh(1)", "double", json!(1.543080634815244));
    check("cot(1)", "double", json!(0.6420926159343306));
    check("sin(1)", "double", json!(0.8414709848078965));
    check("sinh(1)", "double", json!(1.1752011936438014));
    check("tan(1)", "double", json!(1.5574077246549023));
    check("tanh(1)", "double", json!(0.7615941559557649));
    check("atan2(1, -1)", "double", json!(2.356194490192345));
    check("acos(1)", "double", json!(0.0));
    check("cos(zero)", "double", json!(1.0));
    check("sin(n)", "double", json!(5f64.sin()));
    check("tan(dec)", "double", json!(12.35f64.tan()));
    // Out of the domain: NaN, as Java.
    assert!(f64_of("acos(2)").is_nan());
    assert!(f64_of("asin(-2)").is_nan());
    // COT(0) divides by zero: SeaTunnel raises an error.
    check_error("cot(zero)", "COT");
    for f in [
        "acos", "asin", "atan", "cos", "cosh", "cot", "sin", "sinh", "tan", "tanh",
    ] {
        check(&format!("{f}(nd)"), "double", NULL);
        check(&format!("{f}(ni)"), "double", NULL);
    }
    check("atan2(nd, 1)", "double", NULL);
    check("atan2(1, nd)", "double", NULL);
}

#[test]
fn modulo() {
    check("mod(n, 3)", "int", json!(2));
    // Same sign as the dividend.
    check("mod(neg, 3)", "int", json!(-1));
    check("mod(7, -3)", "int", json!(1));
    // The result has the divisor's type.
    check("mod(big, 7)", "int", json!(10000000000i64 % 7));
    check("mod(n, big)", "bigint", json!(5));
    check("mod(7.5, -2.0)", "double", json!(1.5));
    check("mod(5.5, 2)", "int", json!(1));
    check("mod(dec, 5)", "int", json!(2));
    check("mod(ni, 3)", "int", NULL);
    check("mod(n, ni)", "int", NULL);
    // A zero divisor is an error, for doubles too.
    check_error("mod(n, zero)", "MOD");
    check_error("mod(d, 0.0)", "MOD");
    check_col(
        "mod(x, 4)",
        "bigint",
        json!([10, null, -10]),
        "int",
        json!([2, null, -2]),
    );
}

#[test]
fn ceil_and_floor() {
    check("ceil(d)", "int", json!(-2));
    check("ceiling(1.2)", "int", json!(2));
    check("ceil(dec)", "int", json!(13));
    check("ceil(n)", "int", json!(5));
    check("ceil(f)", "int", json!(2));
    check("floor(d)", "int", json!(-3));
    check("floor(dec)", "int", json!(12));
    check("floor(-0.5)", "int", json!(-1));
    check("floor(f)", "int", json!(1));
    check("ceil(nd)", "int", NULL);
    check("floor(ni)", "int", NULL);
    // SeaTunnel returns intValue(): a bigint keeps its low 32 bits, a double saturates.
    check("ceil(big)", "int", json!(1410065408));
    check("ceil(1e10)", "int", json!(2147483647));
    check_col(
        "floor(x)",
        "double",
        json!([1.9, null, -1.1]),
        "int",
        json!([1, null, -2]),
    );
}

#[allow(clippy::approx_constant)]
#[test]
fn exp_ln_log() {
    check("exp(0)", "double", json!(1.0));
    check("exp(1)", "double", json!(2.718281828459045));
    check("exp(nd)", "double", NULL);
    check("ln(1)", "double", json!(0.0));
    check("ln(nd)", "double", NULL);
    check_error("ln(zero)", "LN");
    check_error("ln(d)", "LN");
    check("log(2, 8)", "double", json!(3.0));
    check("log(10, 1000)", "double", json!(3.0));
    check("log(3, 9)", "double", json!(2.0));
    check("log(nd, 8)", "double", NULL);
    check("log(2, nd)", "double", NULL);
    check_error("log(zero, 8)", "LOG");
    check_error("log(2, neg)", "LOG");
    check("log10(100)", "double", json!(2.0));
    check("log10(1)", "double", json!(0.0));
    check("log10(nd)", "double", NULL);
    check_error("log10(zero)", "LOG10");
    // Base 1 divides by ln(1) = 0, as Java.
    assert!(f64_of("log(1, 8)").is_infinite());
}

#[test]
fn radians_sqrt_pi_power() {
    check("radians(180)", "double", json!(std::f64::consts::PI));
    check("radians(zero)", "double", json!(0.0));
    check("radians(nd)", "double", NULL);
    check("sqrt(16)", "double", json!(4.0));
    check("sqrt(2)", "double", json!(std::f64::consts::SQRT_2));
    check("sqrt(nd)", "double", NULL);
    assert!(f64_of("sqrt(-1)").is_nan());
    check("pi()", "double", json!(std::f64::consts::PI));
    check("power(2, 10)", "double", json!(1024.0));
    check("power(2, -1)", "double", json!(0.5));
    check("power(n, 0)", "double", json!(1.0));
    check("power(nd, 2)", "double", NULL);
    check("power(2, nd)", "double", NULL);
    assert!(f64_of("power(-8, 1.0 / 3)").is_nan());
}

#[test]
fn rand_and_random() {
    // Seeded: java.util.Random(seed).nextDouble().
    check("rand(42)", "double", json!(0.7275636800328681));
    check("random(0)", "double", json!(0.730967787376657));
    check("rand(-1)", "double", json!(0.26894263088050496));
    for f in ["rand()", "random()", "rand(ni)"] {
        let (t, v) = eval(f);
        assert_eq!(t, "double", "{f}");
        let v = v.as_f64().unwrap_or(-1.0);
        assert!((0.0..1.0).contains(&v), "{f}: {v}");
    }
}

#[test]
fn round() {
    check("round(2.675, 2)", "double", json!(2.68));
    check("round(1.005, 2)", "double", json!(1.01));
    check("round(d)", "double", json!(-3.0));
    check("round(1234.5, -2)", "double", json!(1200.0));
    check("round(n)", "int", json!(5));
    check("round(155, -1)", "int", json!(160));
    check("round(-155, -1)", "int", json!(-160));
    check("round(big, -10)", "bigint", json!(10000000000i64));
    check("round(dec, 1)", "decimal(10, 2)", json!(12.4));
    check("round(dec)", "decimal(10, 2)", json!(12.0));
    check("round(f, 0)", "float", json!(2.0));
    check("round(nd, 2)", "double", NULL);
    check("round(ndec, 1)", "decimal(10, 2)", NULL);
    check("round(d, ni)", "double", json!(-3.0));
    check_col(
        "round(x, 1)",
        "double",
        json!([0.05, null, -0.05]),
        "double",
        json!([0.1, null, -0.1]),
    );
    // A constant scale is prepared once per batch; near-ties are decided on the decimal
    // text (Java's BigDecimal.valueOf), away from them on the binary product.
    check_col(
        "round(x, 2)",
        "double",
        json!([2.675, 1.005, -1.005, 0.125, 123.454999, 1e300, null, 0.0]),
        "double",
        json!([2.68, 1.01, -1.01, 0.13, 123.45, 1e300, null, 0.0]),
    );
    check_col(
        "round(x, -2)",
        "int",
        json!([1250, -1250, 1249, null]),
        "int",
        json!([1300, -1300, 1200, null]),
    );
    // A scale that differs per row (a null scale is 0).
    check_col(
        "round(1234.5678, x)",
        "int",
        json!([0, 1, -2, null]),
        "double",
        json!([1235.0, 1234.6, 1200.0, 1235.0]),
    );
}

#[test]
fn sign() {
    check("sign(d)", "int", json!(-1));
    check("sign(n)", "int", json!(1));
    check("sign(zero)", "int", json!(0));
    check("sign(big)", "int", json!(1));
    check("sign(dec)", "int", json!(1));
    check("sign(-dec)", "int", json!(-1));
    // SeaTunnel's SIGN(NULL) is 0.
    check("sign(ni)", "int", json!(0));
    check("sign(nd)", "int", json!(0));
    check("sign(sqrt(-1))", "int", json!(0));
}

#[test]
fn trunc_and_truncate() {
    check("trunc(2.679, 2)", "double", json!(2.67));
    check("trunc(-2.679, 2)", "double", json!(-2.67));
    check("truncate(d)", "double", json!(-2.0));
    check("trunc(1999, -2)", "double", json!(1900.0));
    check("trunc(dec, 1)", "double", json!(12.3));
    check("trunc(n)", "double", json!(5.0));
    check("trunc(nd)", "double", NULL);
    check("trunc(nd, 1)", "double", NULL);
}

// SeaTunnel's NumericFunction.mod takes both arguments as `BigDecimal.valueOf(double)`,
// the decimal text of the double, so the remainder is that of the written numbers.
#[test]
fn modulo_of_doubles_is_exact_on_their_decimal_text() {
    check("mod(13, 5.4)", "double", json!(2.2));
    check("mod(-13, 5.4)", "double", json!(-2.2));
    check("mod(10.1, 3.3)", "double", json!(0.2));
    check("mod(5.4, 2)", "int", json!(1));
    check("mod(dec, 0.5)", "double", json!(0.35));
    check("mod(d, 0.3)", "double", json!(-0.1));
    check("mod(big, 0.7)", "double", json!(0.5));
    check("mod(f, 0.4)", "double", json!(0.3));
    check("mod(nd, 0.4)", "double", NULL);
    check_col(
        "mod(x, 0.1)",
        "double",
        json!([1.0, 0.7, null, -0.35, 1e300]),
        "double",
        json!([0.0, 0.0, null, -0.05, 1e300 % 0.1]),
    );
    // BigDecimal.valueOf refuses NaN and infinities.
    check_error("mod(sqrt(-1), 0.5)", "MOD");
    // The `%` operator on doubles is Java's `%` on the binary values, in SeaTunnel too.
    check("13 % 5.4", "double", json!(13.0f64 % 5.4));
}

// ZetaSQLType: int with int is int, with bigint bigint, with a double double.
#[test]
fn arithmetic_result_types_follow_seatunnel() {
    check("n + 1", "int", json!(6));
    check("n / 2", "int", json!(2));
    check("neg / 2", "int", json!(-3));
    check("n % 3", "int", json!(2));
    check("n * big", "bigint", json!(50000000000i64));
    check("big / 3", "bigint", json!(3333333333i64));
    check("n + 1.5", "double", json!(6.5));
    check("n / 2.0", "double", json!(2.5));
    check("d * 2", "double", json!(-5.0));
    // Java's int arithmetic wraps.
    check("2147483647 + n", "int", json!(-2147483644));
    // Literals with a fraction are doubles, as SeaTunnel's page says.
    check("0.1 + 0.2", "double", json!(0.1f64 + 0.2));
}

// A DECIMAL operand makes SeaTunnel compute on BigDecimal: a double literal counts with
// its written digits.
#[test]
fn decimal_arithmetic_with_double_literals_is_exact() {
    check("dec + 1.1", "decimal(11, 2)", json!(13.45));
    check("dec * 1.1", "decimal(13, 3)", json!(13.585));
    check("1.1 * dec", "decimal(13, 3)", json!(13.585));
    check("dec * -1.5", "decimal(13, 3)", json!(-18.525));
    check("dec - 0.35", "decimal(11, 2)", json!(12.0));
    // Only a literal is taken at its text: a double expression stays a double.
    check("dec * (0.1 + 0.2)", "double", json!(12.35 * (0.1f64 + 0.2)));
    check("dec + n", "decimal(13, 2)", json!(17.35));
    check("dec + big", "decimal(23, 2)", json!(10000000012.35));
    check("dec % 0.5", "decimal(2, 2)", json!(0.35));
    check("ndec * 1.1", "decimal(13, 3)", NULL);
    check("round(dec * 1.15, 3)", "decimal(14, 4)", json!(14.203));
    check_col(
        "x * 1.1",
        "decimal(10, 2)",
        json!(["12.35", null, "-0.01"]),
        "decimal(13, 3)",
        json!([13.585, null, -0.011]),
    );
}

// SeaTunnel divides a DECIMAL at the largest scale of its DECIMAL operands, rounding away
// from zero (RoundingMode.UP).
#[test]
fn decimal_division_keeps_the_scale_and_rounds_up() {
    check("dec / 3", "decimal(38, 2)", json!(4.12));
    check("-dec / 3", "decimal(38, 2)", json!(-4.12));
    check("dec / neg", "decimal(38, 2)", json!(-1.77));
    check("dec / 4", "decimal(38, 2)", json!(3.09));
    check("dec / 0.3", "decimal(38, 2)", json!(41.17));
    check("dec / dec", "decimal(38, 2)", json!(1.0));
    check("n / dec", "decimal(38, 2)", json!(0.41));
    check("dec / 5", "decimal(38, 2)", json!(2.47));
    check("dec / ni", "decimal(38, 2)", NULL);
    check("ndec / 2", "decimal(38, 2)", NULL);
    check_error("dec / zero", "division by zero");
    check_col(
        "x / 7",
        "decimal(10, 3)",
        json!(["1.000", null, "-1.000", "0.007"]),
        "decimal(38, 3)",
        json!([0.143, null, -0.143, 0.001]),
    );
}
