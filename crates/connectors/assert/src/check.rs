//! Field rules checked column by column, reporting the first broken rule as SeaTunnel's
//! `AssertExecutor` does row by row: the first row that breaks any rule, and for that row
//! the first field rule it breaks (its `field_type` first, then its `field_value` entries
//! in order, each entry's `rule_type` before its `equals_to`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Scalar};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Decimal128Type, Float64Type, Schema};
use ferry_api::types::{same_type, type_name};
use ferry_api::value::{array_value_to_json, json_to_array, RowStyle};
use serde_json::Value;

use crate::rules::{describe_columns, FieldRule, TableRules, ValueRuleKind};

/// Why rules could not be bound to a table's schema: a rule's path and the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct BindError {
    /// Where the faulty rule is written (`rules.field_rules[0].field_name`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// How a column's values are checked against `field_type`.
#[derive(Debug, Clone)]
enum TypeCheck {
    /// No `field_type`.
    None,
    /// `field_type = "null"`: every value must be null.
    OnlyNull,
    /// Same type: every value must be non-null (and, for nested types, hold no nulls
    /// except in `null`-typed fields, as SeaTunnel checks each element's class).
    NonNull { nested: bool },
    /// A decimal column of the declared scale but a larger precision: values must fit.
    DecimalFits { limit: i128 },
    /// A different type: every row breaks the rule.
    Mismatch,
}

/// A `field_value` entry bound to a column.
#[derive(Debug, Clone)]
struct BoundValue {
    /// `equals_to` as a one-row array of the column's type.
    expected: Option<ArrayRef>,
}

/// A field rule bound to a column.
#[derive(Debug, Clone)]
struct BoundField {
    rule: usize,
    column: usize,
    type_check: TypeCheck,
    values: Vec<BoundValue>,
}

/// A table's field rules bound to its schema, ready to check batches.
#[derive(Debug, Clone)]
pub struct BoundRules {
    rules: Arc<TableRules>,
    schema: Arc<Schema>,
    fields: Vec<BoundField>,
}

/// Which part of a field rule a row broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `field_type`.
    Type,
    /// The `rule_type` of `field_value[i]`.
    Kind(usize),
    /// The `equals_to` of `field_value[i]`.
    Equals(usize),
}

/// The first broken rule of a batch.
#[derive(Debug, Clone)]
pub struct Violation {
    /// Row index within the batch.
    pub row: usize,
    /// The message, without the row position.
    pub message: String,
}

impl BoundRules {
    /// Binds `rules` to `schema` (the table `table`): finds each field and converts each
    /// `equals_to` to the field's type, so that mistakes surface before data flows.
    pub fn bind(
        rules: Arc<TableRules>,
        table: &str,
        schema: Arc<Schema>,
    ) -> Result<Self, BindError> {
        let mut fields = Vec::with_capacity(rules.field_rules.len());
        for (r, fr) in rules.field_rules.iter().enumerate() {
            let Some(column) = schema.fields().iter().position(|f| f.name() == &fr.name) else {
                let names = schema.fields().iter().map(|f| f.name().as_str());
                let same_but_case = schema
                    .fields()
                    .iter()
                    .find(|f| f.name().eq_ignore_ascii_case(&fr.name));
                let hint = match same_but_case {
                    Some(f) => format!("; did you mean '{}'? (names are case-sensitive)", f.name()),
                    // Short names are all "near" each other: suggest only for longer ones.
                    None if fr.name.chars().count() >= 4 => {
                        ferry_api::error::nearest(&fr.name, names)
                            .map(|n| format!("; did you mean '{n}'?"))
                            .unwrap_or_default()
                    }
                    None => String::new(),
                };
                return Err(BindError {
                    path: format!("{}.field_name", fr.path),
                    message: format!(
                        "field '{}' is not in table {} (its fields: {}){hint}",
                        fr.name,
                        table,
                        describe_columns(
                            schema
                                .fields()
                                .iter()
                                .map(|f| (f.name().as_str(), f.data_type()))
                        )
                    ),
                });
            };
            let dt = schema.field(column).data_type();
            let type_check = match &fr.field_type {
                None => TypeCheck::None,
                Some(DataType::Null) => TypeCheck::OnlyNull,
                Some(DataType::Decimal128(p, s)) => match dt {
                    DataType::Decimal128(cp, cs) if cs == s && cp > p => TypeCheck::DecimalFits {
                        limit: 10i128.pow(*p as u32),
                    },
                    DataType::Decimal128(cp, cs) if cs == s && cp <= p => {
                        TypeCheck::NonNull { nested: false }
                    }
                    _ => TypeCheck::Mismatch,
                },
                Some(t) if same_type(t, dt) => TypeCheck::NonNull {
                    nested: dt.is_nested(),
                },
                Some(_) => TypeCheck::Mismatch,
            };
            let mut values = Vec::with_capacity(fr.values.len());
            for vr in &fr.values {
                let expected = match &vr.equals_to {
                    // A null-typed column only holds nulls, which equals_to never checks.
                    Some(_) if *dt == DataType::Null => None,
                    Some(v) => Some(json_to_array(&[v], dt).map_err(|e| BindError {
                        path: format!("{}.equals_to", vr.path),
                        message: format!(
                            "{v} cannot be compared with field '{}' of type {}: {e}",
                            fr.name,
                            type_name(dt)
                        ),
                    })?),
                    None => None,
                };
                values.push(BoundValue { expected });
            }
            fields.push(BoundField {
                rule: r,
                column,
                type_check,
                values,
            });
        }
        Ok(BoundRules {
            rules,
            schema,
            fields,
        })
    }

    /// The schema these rules were bound to.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The first row of `columns` (a batch of the bound schema) that breaks a rule.
    pub fn check(&self, columns: &[ArrayRef]) -> Option<Violation> {
        // (row, field order, part order, field index, part)
        let mut best: Option<(usize, usize, Part)> = None;
        for (order, bf) in self.fields.iter().enumerate() {
            let col = columns[bf.column].as_ref();
            // Later rules only matter if they break an earlier row.
            let limit = best.map_or(col.len(), |(row, _, _)| row);
            if let Some((row, part)) =
                first_broken(bf, &self.rules.field_rules[bf.rule], col, limit)
            {
                if best.is_none_or(|(r, _, _)| row < r) {
                    best = Some((row, order, part));
                }
            }
        }
        let (row, order, part) = best?;
        let bf = &self.fields[order];
        Some(Violation {
            row,
            message: describe(
                &self.rules.field_rules[bf.rule],
                &bf.type_check,
                part,
                columns[bf.column].as_ref(),
                row,
            ),
        })
    }
}

/// The first row below `limit` that breaks any part of a field rule, with that part.
fn first_broken(
    bf: &BoundField,
    fr: &FieldRule,
    col: &dyn Array,
    limit: usize,
) -> Option<(usize, Part)> {
    fn consider(found: Option<usize>, part: Part, best: &mut Option<(usize, Part)>) {
        if let Some(row) = found {
            if best.is_none_or(|(r, _)| row < r) {
                *best = Some((row, part));
            }
        }
    }
    let mut best: Option<(usize, Part)> = None;
    let nulls = col.logical_nulls();
    consider(
        type_broken(&bf.type_check, col, nulls.as_ref(), limit),
        Part::Type,
        &mut best,
    );
    for (j, (vr, bv)) in fr.values.iter().zip(&bf.values).enumerate() {
        let lim = best.map_or(limit, |(r, _)| r);
        if let Some(kind) = vr.kind {
            consider(
                kind_broken(kind, vr.value.unwrap_or(0.0), col, nulls.as_ref(), lim),
                Part::Kind(j),
                &mut best,
            );
        }
        let lim = best.map_or(limit, |(r, _)| r);
        if let Some(expected) = &bv.expected {
            consider(
                equals_broken(col, nulls.as_ref(), expected, lim),
                Part::Equals(j),
                &mut best,
            );
        }
    }
    best
}

fn is_null(nulls: Option<&NullBuffer>, i: usize) -> bool {
    nulls.is_some_and(|n| n.is_null(i))
}

fn first_null(nulls: Option<&NullBuffer>, limit: usize) -> Option<usize> {
    let n = nulls?;
    (0..limit).find(|&i| n.is_null(i))
}

fn first_valid(nulls: Option<&NullBuffer>, limit: usize) -> Option<usize> {
    match nulls {
        None => (limit > 0).then_some(0),
        Some(n) => (0..limit).find(|&i| n.is_valid(i)),
    }
}

fn type_broken(
    check: &TypeCheck,
    col: &dyn Array,
    nulls: Option<&NullBuffer>,
    limit: usize,
) -> Option<usize> {
    match check {
        TypeCheck::None => None,
        TypeCheck::OnlyNull => first_valid(nulls, limit),
        TypeCheck::Mismatch => (limit > 0).then_some(0),
        TypeCheck::NonNull { nested: false } => first_null(nulls, limit),
        TypeCheck::NonNull { nested: true } => {
            (0..limit).find(|&i| is_null(nulls, i) || holds_null(col, i))
        }
        TypeCheck::DecimalFits { limit: max } => {
            let a = col.as_primitive::<Decimal128Type>();
            (0..limit)
                .find(|&i| is_null(nulls, i) || a.value(i).unsigned_abs() >= max.unsigned_abs())
        }
    }
}

/// Whether the non-null value `i` of a nested column holds a null anywhere inside,
/// other than in a field of type `null`.
fn holds_null(array: &dyn Array, i: usize) -> bool {
    fn any_null(a: &dyn Array) -> bool {
        if matches!(a.data_type(), DataType::Null) {
            return false;
        }
        a.logical_null_count() > 0 || (0..a.len()).any(|j| holds_null(a, j))
    }
    match array.data_type() {
        DataType::List(_) => any_null(array.as_list::<i32>().value(i).as_ref()),
        DataType::LargeList(_) => any_null(array.as_list::<i64>().value(i).as_ref()),
        DataType::Map(_, _) => {
            let entries = array.as_map().value(i);
            entries.columns().iter().any(|c| any_null(c.as_ref()))
        }
        DataType::Struct(_) => array.as_struct().columns().iter().any(|c| {
            let c = c.slice(i, 1);
            !matches!(c.data_type(), DataType::Null) && (c.is_null(0) || holds_null(c.as_ref(), 0))
        }),
        _ => false,
    }
}

fn is_numeric(dt: &DataType) -> bool {
    dt.is_numeric()
}

fn kind_broken(
    kind: ValueRuleKind,
    bound: f64,
    col: &dyn Array,
    nulls: Option<&NullBuffer>,
    limit: usize,
) -> Option<usize> {
    match kind {
        ValueRuleKind::Null => first_valid(nulls, limit),
        ValueRuleKind::NotNull => first_null(nulls, limit),
        ValueRuleKind::Min | ValueRuleKind::Max => {
            // SeaTunnel: a null or a value that is not a Java Number breaks MIN and MAX.
            if !is_numeric(col.data_type()) {
                return (limit > 0).then_some(0);
            }
            // Every numeric type casts to f64; should one not, treat its values as non-numbers.
            let Ok(cast) = arrow::compute::cast(&col.slice(0, limit), &DataType::Float64) else {
                return (limit > 0).then_some(0);
            };
            let f = cast.as_primitive::<Float64Type>();
            let ok = |v: f64| {
                if kind == ValueRuleKind::Min {
                    v >= bound
                } else {
                    v <= bound
                }
            };
            (0..limit).find(|&i| is_null(nulls, i) || !ok(f.value(i)))
        }
        ValueRuleKind::MinLength | ValueRuleKind::MaxLength => {
            // Java's String.length(): UTF-16 units; a null counts as "".
            let ok = |len: usize| {
                if kind == ValueRuleKind::MinLength {
                    len as f64 >= bound
                } else {
                    len as f64 <= bound
                }
            };
            let utf16 = |s: &str| {
                if s.is_ascii() {
                    s.len()
                } else {
                    s.encode_utf16().count()
                }
            };
            match col.data_type() {
                DataType::Utf8 => {
                    let a = col.as_string::<i32>();
                    (0..limit).find(|&i| {
                        !ok(if is_null(nulls, i) {
                            0
                        } else {
                            utf16(a.value(i))
                        })
                    })
                }
                DataType::LargeUtf8 => {
                    let a = col.as_string::<i64>();
                    (0..limit).find(|&i| {
                        !ok(if is_null(nulls, i) {
                            0
                        } else {
                            utf16(a.value(i))
                        })
                    })
                }
                _ => {
                    let mut text = String::new();
                    (0..limit).find(|&i| {
                        text.clear();
                        if !is_null(nulls, i) {
                            ferry_api::javatext::write_value(&mut text, col, i);
                        }
                        !ok(utf16(&text))
                    })
                }
            }
        }
    }
}

fn equals_broken(
    col: &dyn Array,
    nulls: Option<&NullBuffer>,
    expected: &ArrayRef,
    limit: usize,
) -> Option<usize> {
    if !col.data_type().is_nested() {
        let head = col.slice(0, limit);
        if let Ok(eq) = arrow::compute::kernels::cmp::eq(&head, &Scalar::new(expected.clone())) {
            return first_false(&eq, nulls, limit);
        }
    }
    // Nested values (and any type the kernel lacks): compare their JSON forms.
    let want = array_value_to_json(expected.as_ref(), 0, RowStyle::Positional);
    (0..limit).find(|&i| {
        !is_null(nulls, i) && !json_eq(&array_value_to_json(col, i, RowStyle::Positional), &want)
    })
}

/// The first non-null row where `eq` is not true.
fn first_false(eq: &BooleanArray, nulls: Option<&NullBuffer>, limit: usize) -> Option<usize> {
    (0..limit).find(|&i| {
        let equal = eq.is_valid(i) && eq.value(i);
        !equal && !is_null(nulls, i)
    })
}

/// JSON equality where numbers compare by value (`1` = `1.0`, `3.10` = `3.1`) and maps
/// ignore key order, as SeaTunnel compares maps by lookup.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y
                || x.to_string() == y.to_string()
                || matches!((x.as_f64(), y.as_f64()), (Some(p), Some(q)) if p == q)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && y.iter()
                    .all(|(k, q)| x.get(k).is_some_and(|p| json_eq(p, q)))
        }
        _ => a == b,
    }
}

fn describe(fr: &FieldRule, check: &TypeCheck, part: Part, col: &dyn Array, row: usize) -> String {
    let value = array_value_to_json(col, row, RowStyle::Positional);
    match part {
        Part::Type => {
            let ft = fr.field_type.as_ref().map(type_name).unwrap_or_default();
            let why = match check {
                _ if value.is_null() => String::new(),
                TypeCheck::NonNull { nested: true } => " (it holds a null)".to_string(),
                TypeCheck::DecimalFits { .. } => format!(" (too many digits for {ft})"),
                _ => format!(" of type {}", type_name(col.data_type())),
            };
            format!(
                "field '{}' rule field_type {ft} broken by value {value}{why}",
                fr.name
            )
        }
        Part::Kind(j) => {
            let vr = &fr.values[j];
            let extra = match vr.kind {
                Some(ValueRuleKind::MinLength | ValueRuleKind::MaxLength) => {
                    let mut text = String::new();
                    if !col.is_null(row) {
                        ferry_api::javatext::write_value(&mut text, col, row);
                    }
                    format!(" (length {})", text.encode_utf16().count())
                }
                Some(ValueRuleKind::Min | ValueRuleKind::Max)
                    if !col.data_type().is_numeric() && !value.is_null() =>
                {
                    format!(" (a {}, not a number)", type_name(col.data_type()))
                }
                _ => String::new(),
            };
            format!(
                "field '{}' rule {} broken by value {value}{extra}",
                fr.name,
                vr.describe_kind()
            )
        }
        Part::Equals(j) => {
            let want = fr.values[j]
                .equals_to
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default();
            format!(
                "field '{}' rule equals_to {want} broken by value {value}",
                fr.name
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::parse_rules;
    use arrow::datatypes::Field;
    use ferry_api::types::parse_type;
    use ferry_api::PluginLocation;
    use serde_json::json;

    /// Rules for a table with the given columns and rows (rows as JSON lists).
    fn setup(
        rules: Value,
        types: &[(&str, &str)],
        rows: &[Value],
    ) -> (Result<BoundRules, BindError>, Vec<ArrayRef>) {
        let parsed = parse_rules(rules.as_object().unwrap(), &PluginLocation::default()).unwrap();
        let table = Arc::new(parsed.for_table("t").unwrap().clone());
        let schema = Arc::new(Schema::new(
            types
                .iter()
                .map(|(n, t)| Field::new(*n, parse_type(t).unwrap(), true))
                .collect::<Vec<_>>(),
        ));
        let columns = types
            .iter()
            .enumerate()
            .map(|(c, (_, t))| {
                let vals: Vec<&Value> = rows.iter().map(|r| &r[c]).collect();
                json_to_array(&vals, &parse_type(t).unwrap()).unwrap()
            })
            .collect();
        (BoundRules::bind(table, "t", schema), columns)
    }

    /// `(row, message)` of the first violation, or `None`.
    fn run(rules: Value, types: &[(&str, &str)], rows: &[Value]) -> Option<(usize, String)> {
        let (bound, columns) = setup(rules, types, rows);
        bound.unwrap().check(&columns).map(|v| (v.row, v.message))
    }

    fn one(field: &str, ftype: Value, values: Value) -> Value {
        json!({"field_rules": [{"field_name": field, "field_type": ftype, "field_value": values}]})
    }

    #[test]
    fn null_and_not_null() {
        let t = [("a", "int")];
        let rows = [json!([1]), json!([null]), json!([3])];
        assert_eq!(
            run(
                json!({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "NOT_NULL"}]}]}),
                &t,
                &rows
            ),
            Some((1, "field 'a' rule NOT_NULL broken by value null".into()))
        );
        assert_eq!(
            run(
                json!({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "NULL"}]}]}),
                &t,
                &rows
            ),
            Some((0, "field 'a' rule NULL broken by value 1".into()))
        );
        assert_eq!(
            run(
                json!({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "NULL"}]}]}),
                &t,
                &[json!([null])]
            ),
            None
        );
        // A null-typed column: NULL passes, field_type null passes.
        assert_eq!(
            run(
                one("n", json!("null"), json!([{"rule_type": "NULL"}])),
                &[("n", "null")],
                &[json!([null]), json!([null])]
            ),
            None
        );
        assert_eq!(
            run(
                one("n", json!("null"), json!([{"rule_type": "NOT_NULL"}])),
                &[("n", "null")],
                &[json!([null])]
            ),
            Some((0, "field 'n' rule NOT_NULL broken by value null".into()))
        );
    }

    #[test]
    fn min_and_max_on_every_numeric_type() {
        for t in [
            "tinyint",
            "smallint",
            "int",
            "bigint",
            "float",
            "double",
            "decimal(10, 2)",
        ] {
            let rows = [json!([5]), json!([9]), json!([12])];
            let rules = one(
                "a",
                json!(t),
                json!([{"rule_type": "MIN", "rule_value": 5}, {"rule_type": "MAX", "rule_value": 10}]),
            );
            let (row, msg) = run(rules, &[("a", t)], &rows).unwrap();
            assert_eq!(row, 2, "{t}");
            assert!(
                msg.starts_with("field 'a' rule MAX 10 broken by value 12"),
                "{t}: {msg}"
            );
            let rules = one(
                "a",
                json!(t),
                json!([{"rule_type": "MIN", "rule_value": 5.5}]),
            );
            assert_eq!(
                run(rules, &[("a", t)], &rows)
                    .unwrap()
                    .1
                    .split(" broken")
                    .next(),
                Some("field 'a' rule MIN 5.5"),
                "{t}"
            );
            let pass = one(
                "a",
                json!(t),
                json!([{"rule_type": "MIN", "rule_value": 5}, {"rule_type": "MAX", "rule_value": 12}]),
            );
            assert_eq!(run(pass, &[("a", t)], &rows), None, "{t}");
        }
        // Nulls and non-numbers break MIN and MAX, as in SeaTunnel.
        assert_eq!(
            run(
                json!({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "MIN", "rule_value": 0}]}]}),
                &[("a", "int")],
                &[json!([1]), json!([null])]
            ),
            Some((1, "field 'a' rule MIN 0 broken by value null".into()))
        );
        assert_eq!(
            run(
                json!({"field_rules": [{"field_name": "s", "field_value": [{"rule_type": "MAX", "rule_value": 100}]}]}),
                &[("s", "string")],
                &[json!(["5"])]
            ),
            Some((
                0,
                "field 's' rule MAX 100 broken by value \"5\" (a string, not a number)".into()
            ))
        );
        // The conformance case fake_to_assert_with_range: MIN 32767 over ints.
        assert_eq!(
            run(
                one(
                    "age",
                    json!("int"),
                    json!([{"rule_type": "MIN", "rule_value": 32767}])
                ),
                &[("age", "int")],
                &[json!([40000]), json!([32767]), json!([12])]
            ),
            Some((2, "field 'age' rule MIN 32767 broken by value 12".into()))
        );
    }

    #[test]
    fn text_lengths_count_utf16_units_and_null_as_empty() {
        let rules = one(
            "s",
            json!("string"),
            json!([{"rule_type": "MIN_LENGTH", "rule_value": 2}, {"rule_type": "MAX_LENGTH", "rule_value": 3}]),
        );
        assert_eq!(
            run(
                rules.clone(),
                &[("s", "string")],
                &[json!(["ab"]), json!(["été"]), json!(["😀"])]
            ),
            None
        );
        assert_eq!(
            run(
                rules.clone(),
                &[("s", "string")],
                &[json!(["ab"]), json!(["abcd"])]
            ),
            Some((
                1,
                "field 's' rule MAX_LENGTH 3 broken by value \"abcd\" (length 4)".into()
            ))
        );
        let rules = json!({"field_rules": [{"field_name": "s", "field_value": [{"rule_type": "MIN_LENGTH", "rule_value": 1}]}]});
        assert_eq!(
            run(rules, &[("s", "string")], &[json!([null])]),
            Some((
                0,
                "field 's' rule MIN_LENGTH 1 broken by value null (length 0)".into()
            ))
        );
        // Other types are measured by their Java text: 12345 has 5 characters, 3.1f "3.1" 3.
        let rules = json!({"field_rules": [{"field_name": "n", "field_value": [{"rule_type": "MAX_LENGTH", "rule_value": 4}]}]});
        assert_eq!(
            run(rules, &[("n", "int")], &[json!([1234]), json!([12345])]),
            Some((
                1,
                "field 'n' rule MAX_LENGTH 4 broken by value 12345 (length 5)".into()
            ))
        );
        let rules = json!({"field_rules": [{"field_name": "f", "field_value": [{"rule_type": "MAX_LENGTH", "rule_value": 3}]}]});
        assert_eq!(
            run(rules, &[("f", "float")], &[json!([3.1]), json!([1.0])]),
            None
        );
    }

    #[test]
    fn field_type_checks_type_and_nulls() {
        assert_eq!(
            run(
                one("a", json!("bigint"), json!([])),
                &[("a", "int")],
                &[json!([1])]
            ),
            Some((
                0,
                "field 'a' rule field_type bigint broken by value 1 of type int".into()
            ))
        );
        assert_eq!(
            run(one("a", json!("bigint"), json!([])), &[("a", "int")], &[]),
            None
        );
        assert_eq!(
            run(
                one("a", json!("INT"), json!([])),
                &[("a", "int")],
                &[json!([1]), json!([null])]
            ),
            Some((
                1,
                "field 'a' rule field_type int broken by value null".into()
            ))
        );
        assert_eq!(
            run(
                one("a", json!("null"), json!([])),
                &[("a", "int")],
                &[json!([null]), json!([2])]
            ),
            Some((
                1,
                "field 'a' rule field_type null broken by value 2 of type int".into()
            ))
        );
        // Rows: the declared row type; nested nulls break it except in null-typed fields.
        let t = [("r", "{x = int, n = null, l = array<string>}")];
        let ft = json!({"x": "int", "n": "null", "l": "array<string>"});
        assert_eq!(
            run(
                one("r", ft.clone(), json!([])),
                &t,
                &[json!([[1, null, ["a"]]])]
            ),
            None
        );
        assert_eq!(run(one("r", ft.clone(), json!([])), &t, &[json!([[1, null, ["a"]]]), json!([[1, null, ["a", null]]])]), Some((1, "field 'r' rule field_type {x = int, n = null, l = array<string>} broken by value [1,null,[\"a\",null]] (it holds a null)".into())));
        assert!(run(
            one(
                "r",
                json!({"x": "int", "n": "null", "l": "array<int>"}),
                json!([])
            ),
            &t,
            &[json!([[1, null, ["a"]]])]
        )
        .unwrap()
        .1
        .ends_with("of type {x = int, n = null, l = array<string>}"));
        // Decimals: the scale must match; a value must fit the declared precision.
        assert_eq!(
            run(
                one("d", json!("decimal(30, 8)"), json!([])),
                &[("d", "decimal(30, 8)")],
                &[json!([1.5])]
            ),
            None
        );
        assert_eq!(
            run(
                one("d", json!("decimal(38, 8)"), json!([])),
                &[("d", "decimal(30, 8)")],
                &[json!([1.5])]
            ),
            None
        );
        assert_eq!(run(one("d", json!("decimal(4, 2)"), json!([])), &[("d", "decimal(10, 2)")], &[json!([12.34]), json!([123.45])]), Some((1, "field 'd' rule field_type decimal(4, 2) broken by value 123.45 (too many digits for decimal(4, 2))".into())));
        assert!(run(
            one("d", json!("decimal(30, 2)"), json!([])),
            &[("d", "decimal(30, 8)")],
            &[json!([1])]
        )
        .is_some());
    }

    #[test]
    fn equals_to_on_every_type() {
        let types = [
            ("c_string", "string", json!("AAA")),
            ("c_boolean", "boolean", json!(false)),
            ("c_tinyint", "tinyint", json!(1)),
            ("c_smallint", "smallint", json!(1)),
            ("c_int", "int", json!(333)),
            ("c_bigint", "bigint", json!(323232)),
            ("c_float", "float", json!(3.1)),
            ("c_double", "double", json!(9.33333)),
            ("c_decimal", "decimal(30, 8)", json!(99999.99999999)),
            ("c_date", "date", json!("2012-12-21")),
            ("c_timestamp", "timestamp", json!("2012-12-21T12:34:56")),
            ("c_timestamp_tz", "timestamp_tz", json!("2012-12-21T12:34:56")),
            ("c_time", "time", json!("12:34:56")),
            ("c_bytes", "bytes", json!("bWlJWmo=")),
            ("c_array", "array<int>", json!([0, 1, 2])),
            ("c_map", "map<date, string>", json!({"2024-01-26": "v0"})),
            ("c_map_nest", "map<string, {c_int = int, c_string = string}>", json!({"k1": [123, "BBB-BB"]})),
            ("c_row", "{c_null = null, c_string = string, c_decimal = decimal(30, 8), c_array = array<int>, c_map = map<string, string>}", json!([null, "AAA", 99999.99999999, [0, 1, 2], {"k0": "v0"}])),
        ];
        let schema: Vec<(&str, &str)> = types.iter().map(|(n, t, _)| (*n, *t)).collect();
        let row = Value::Array(types.iter().map(|(_, _, v)| v.clone()).collect());
        let all = json!({"field_rules": types.iter().map(|(n, t, v)| json!({"field_name": n, "field_type": t, "field_value": [{"rule_type": "NOT_NULL", "equals_to": v}]})).collect::<Vec<_>>()});
        assert_eq!(run(all, &schema, std::slice::from_ref(&row)), None);

        // Equal by value, not by spelling.
        let same = [
            ("c_int", json!(333.0)),
            ("c_int", json!("333")),
            ("c_double", json!(9.333330)),
            ("c_decimal", json!("99999.999999990")),
            ("c_timestamp", json!("2012-12-21 12:34:56")),
            ("c_map", json!({"2024-01-26": "v0"})),
            (
                "c_row",
                json!({"c_null": null, "c_string": "AAA", "c_decimal": "99999.99999999", "c_array": [0, 1, 2], "c_map": {"k0": "v0"}}),
            ),
        ];
        for (n, v) in same {
            let rules =
                json!({"field_rules": [{"field_name": n, "field_value": [{"equals_to": v}]}]});
            assert_eq!(
                run(rules, &schema, std::slice::from_ref(&row)),
                None,
                "{n} = {v}"
            );
        }
        // Different values break the rule, with both values shown.
        let different = [
            ("c_string", json!("AAB"), "\"AAA\""),
            ("c_boolean", json!(true), "false"),
            ("c_int", json!(334), "333"),
            ("c_float", json!(3.2), "3.1"),
            ("c_double", json!(9.33334), "9.33333"),
            ("c_decimal", json!(99999.99999998), "99999.99999999"),
            ("c_date", json!("2012-12-22"), "\"2012-12-21\""),
            (
                "c_timestamp",
                json!("2012-12-21T12:34:57"),
                "\"2012-12-21T12:34:56\"",
            ),
            ("c_time", json!("12:34:55"), "\"12:34:56\""),
            ("c_bytes", json!("bWlJWmk="), "\"bWlJWmo=\""),
            ("c_array", json!([0, 1]), "[0,1,2]"),
            (
                "c_map",
                json!({"2024-01-27": "v0"}),
                "{\"2024-01-26\":\"v0\"}",
            ),
            (
                "c_map_nest",
                json!({"k1": [124, "BBB-BB"]}),
                "{\"k1\":[123,\"BBB-BB\"]}",
            ),
            (
                "c_row",
                json!([null, "AAA", 99999.99999999, [0, 1, 2], {"k0": "v1"}]),
                "[null,\"AAA\",99999.99999999,[0,1,2],{\"k0\":\"v0\"}]",
            ),
        ];
        for (n, v, shown) in different {
            let rules = json!({"field_rules": [{"field_name": n, "field_value": [{"equals_to": v.clone()}]}]});
            let got = run(rules, &schema, std::slice::from_ref(&row));
            assert_eq!(
                got,
                Some((
                    0,
                    format!("field '{n}' rule equals_to {v} broken by value {shown}")
                )),
                "{n}"
            );
        }
    }

    #[test]
    fn equals_to_skips_nulls_and_reports_the_first_broken_row() {
        let rules = one("a", json!("int"), json!([{"equals_to": 7}]));
        // The null row breaks field_type (SeaTunnel checks the type first), not equals_to.
        assert_eq!(
            run(
                rules.clone(),
                &[("a", "int")],
                &[json!([7]), json!([null]), json!([8])]
            ),
            Some((
                1,
                "field 'a' rule field_type int broken by value null".into()
            ))
        );
        let rules =
            json!({"field_rules": [{"field_name": "a", "field_value": [{"equals_to": 7}]}]});
        assert_eq!(
            run(
                rules,
                &[("a", "int")],
                &[json!([7]), json!([null]), json!([8])]
            ),
            Some((2, "field 'a' rule equals_to 7 broken by value 8".into()))
        );
    }

    #[test]
    fn first_row_wins_then_first_rule() {
        let rules = json!({"field_rules": [
            {"field_name": "a", "field_value": [{"rule_type": "MAX", "rule_value": 10}]},
            {"field_name": "b", "field_value": [{"rule_type": "NOT_NULL"}, {"rule_type": "MIN_LENGTH", "rule_value": 2}]}
        ]});
        let t = [("a", "int"), ("b", "string")];
        // Row 1 breaks b's MIN_LENGTH, row 2 breaks a: row 1 is reported.
        assert_eq!(
            run(
                rules.clone(),
                &t,
                &[json!([1, "xx"]), json!([2, "x"]), json!([20, "xx"])]
            ),
            Some((
                1,
                "field 'b' rule MIN_LENGTH 2 broken by value \"x\" (length 1)".into()
            ))
        );
        // Row 0 breaks both a and b: a's rule comes first.
        assert_eq!(
            run(rules.clone(), &t, &[json!([11, null])]),
            Some((0, "field 'a' rule MAX 10 broken by value 11".into()))
        );
        // Within a rule list, the earlier entry wins on the same row.
        assert_eq!(
            run(rules, &t, &[json!([1, null])]),
            Some((0, "field 'b' rule NOT_NULL broken by value null".into()))
        );
    }

    #[test]
    fn binding_reports_missing_fields_and_unfit_equals_to() {
        let (b, _) = setup(
            one("Name", json!("string"), json!([])),
            &[("name", "string"), ("age", "int")],
            &[],
        );
        assert_eq!(
            b.unwrap_err(),
            BindError {
                path: "rules.field_rules[0].field_name".into(),
                message: "field 'Name' is not in table t (its fields: name string, age int); did you mean 'name'? (names are case-sensitive)".into()
            }
        );
        let (b, _) = setup(
            one("c_strnig", json!("string"), json!([])),
            &[("c_string", "string")],
            &[],
        );
        assert!(b
            .unwrap_err()
            .message
            .ends_with("(its fields: c_string string); did you mean 'c_string'?"));
        let (b, _) = setup(
            one("age", json!("int"), json!([{"equals_to": "old"}])),
            &[("age", "int")],
            &[],
        );
        let e = b.unwrap_err();
        assert_eq!(e.path, "rules.field_rules[0].field_value[0].equals_to");
        assert_eq!(e.message, "\"old\" cannot be compared with field 'age' of type int: value \"old\" does not fit type int");
    }

    #[test]
    fn json_equality_is_number_aware() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(json_eq(
            &json!({"a": 1, "b": [2.50]}),
            &json!({"b": [2.5], "a": 1.0})
        ));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!json_eq(&json!([1, 2]), &json!([2, 1])));
        assert!(!json_eq(&json!("1"), &json!(1)));
    }
}
