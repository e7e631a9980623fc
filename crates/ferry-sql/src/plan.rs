//! Plans a SeaTunnel Sql query once with DataFusion and compiles it into steps that run
//! on each batch: a column selection, filters and projections as physical expressions.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, BooleanArray};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use datafusion::common::config::Dialect;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{plan_err, DFSchemaRef, Result as DFResult, ScalarValue, TableReference};
use datafusion::datasource::empty::EmptyTable;
use datafusion::error::DataFusionError;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::expr::{Cast, ScalarFunction};
use datafusion::logical_expr::planner::TypePlanner;
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator, ScalarUDF};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{self, Ident, SelectItem, SetExpr};
use ferry_api::ChangeBatch;

use crate::functions;
use crate::functions::cast::{self, CastPlan, SeaCast};

/// A compiled query: what to do to each batch, and the schema that comes out.
#[derive(Debug)]
pub(crate) struct Compiled {
    steps: Vec<Step>,
    /// The output schema, in SeaTunnel types, every column nullable.
    pub output: SchemaRef,
}

enum Step {
    /// Keep these input columns (the optimizer pruned the others).
    Select(Vec<usize>),
    /// Keep the rows where the predicate is true.
    Filter(Arc<dyn PhysicalExpr>),
    /// Compute new columns.
    Project(Vec<Arc<dyn PhysicalExpr>>, SchemaRef),
    /// The predicate is always false (`WHERE 1 = 0`).
    DropAll,
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Select(c) => write!(f, "Select({c:?})"),
            Step::Filter(e) => write!(f, "Filter({e})"),
            Step::Project(e, _) => write!(
                f,
                "Project({})",
                e.iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Step::DropAll => write!(f, "DropAll"),
        }
    }
}

/// Maps SeaTunnel's type names in `CAST(x AS …)` to Ferry's Arrow types.
#[derive(Debug)]
struct SeaTunnelTypes;

impl TypePlanner for SeaTunnelTypes {
    fn plan_type_field(
        &self,
        sql_type: &ast::DataType,
    ) -> DFResult<Option<arrow::datatypes::FieldRef>> {
        let text = sql_type.to_string().to_ascii_lowercase();
        let base = text.split('(').next().unwrap_or("").trim();
        let dt = match base {
            "string" | "varchar" | "text" | "char" | "character varying" | "char varying"
            | "character" | "nvarchar" => DataType::Utf8,
            "int" | "integer" | "int4" => DataType::Int32,
            "bigint" | "long" | "int8" => DataType::Int64,
            "smallint" | "int2" => DataType::Int16,
            "tinyint" | "byte" => DataType::Int8,
            "double" | "double precision" | "float8" => DataType::Float64,
            "float" | "real" | "float4" => DataType::Float32,
            "bytes" | "binary" | "varbinary" | "bytea" | "blob" => DataType::Binary,
            "timestamp" | "datetime" | "timestamp without time zone" => {
                DataType::Timestamp(TimeUnit::Microsecond, None)
            }
            "timestamp with time zone" | "timestamp_tz" | "timestamptz" => {
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
            }
            "date" => DataType::Date32,
            "time" | "time without time zone" => DataType::Time64(TimeUnit::Microsecond),
            "boolean" | "bool" => DataType::Boolean,
            _ => return Ok(None),
        };
        Ok(Some(Arc::new(Field::new("", dt, true))))
    }
}

/// A planning error, without DataFusion's backtrace and with its prefix kept short.
pub(crate) fn df_message(e: &DataFusionError) -> String {
    let s = e.strip_backtrace();
    s.trim().to_string()
}

/// Parses, plans and compiles `query` over one input table.
pub(crate) fn compile(query: &str, table: &str, input: &SchemaRef) -> Result<Compiled, String> {
    let mut config = SessionConfig::new();
    {
        let o = config.options_mut();
        // SeaTunnel column names are case-sensitive as declared.
        o.sql_parser.enable_ident_normalization = false;
        o.sql_parser.map_string_types_to_utf8view = false;
        o.sql_parser.dialect = Dialect::Generic;
    }
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_type_planner(Arc::new(SeaTunnelTypes))
        .build();
    let ctx = SessionContext::new_with_state(state);
    let udfs = functions::all();
    for u in &udfs {
        ctx.register_udf(u.as_ref().clone());
    }
    let mine = functions::by_name(&udfs);

    let state = ctx.state();
    let mut statement = state
        .sql_to_statement(query, &Dialect::Generic)
        .map_err(|e| df_message(&e))?;
    name_columns_as_seatunnel(&mut statement)?;

    // SeaTunnel only warns when the FROM name differs from the input table's: every table
    // the query names is the input.
    let refs = state
        .resolve_table_references(&statement)
        .map_err(|e| df_message(&e))?;
    let mut seen = std::collections::HashSet::new();
    for r in refs {
        if !seen.insert(r.table().to_string()) {
            continue;
        }
        if r.schema().is_some() {
            return Err(format!("table '{r}': schema-qualified table names are not supported; name the input table ('{table}')"));
        }
        let provider = Arc::new(EmptyTable::new(input.clone()));
        ctx.register_table(TableReference::bare(r.table()), provider)
            .map_err(|e| df_message(&e))?;
    }
    let state = ctx.state();
    let plan = futures::executor::block_on(state.statement_to_plan(statement))
        .map_err(|e| df_message(&e))?;
    check_supported(&plan)?;
    let plan = seatunnel_semantics(plan, &mine).map_err(|e| df_message(&e))?;
    let plan = state.optimize(&plan).map_err(|e| df_message(&e))?;

    let mut steps = Vec::new();
    compile_plan(&plan, &state, &mut steps)?;
    let output = seatunnel_schema(plan.schema().as_arrow())?;
    Ok(Compiled {
        steps,
        output: Arc::new(output),
    })
}

/// Names unaliased select items as SeaTunnel does: a column by its (last) name, any other
/// expression by its SQL text (`upper(name)`).
fn name_columns_as_seatunnel(statement: &mut DFStatement) -> Result<(), String> {
    let DFStatement::Statement(st) = statement else {
        return Err("only SELECT queries are supported".into());
    };
    let ast::Statement::Query(q) = st.as_mut() else {
        return Err("only SELECT queries are supported".into());
    };
    name_query_columns(q);
    Ok(())
}

fn name_query_columns(q: &mut ast::Query) {
    let SetExpr::Select(select) = q.body.as_mut() else {
        return;
    };
    for item in select.projection.iter_mut() {
        if let SelectItem::UnnamedExpr(e) = item {
            let alias = match &*e {
                ast::Expr::Identifier(_) => continue,
                ast::Expr::CompoundIdentifier(parts) => match parts.last() {
                    Some(p) => Ident::with_quote('"', p.value.clone()),
                    None => continue,
                },
                other => Ident::with_quote('"', other.to_string()),
            };
            *item = SelectItem::ExprWithAlias {
                expr: e.clone(),
                alias,
            };
        }
    }
    // Sub-queries in FROM too, so that their column names survive the literal rewrite.
    for t in select.from.iter_mut() {
        if let ast::TableFactor::Derived { subquery, .. } = &mut t.relation {
            name_query_columns(subquery);
        }
    }
}

/// Rejects what SeaTunnel's Sql transform does not do, before anything is rewritten.
fn check_supported(plan: &LogicalPlan) -> Result<(), String> {
    let mut err = None;
    let _ = plan.apply(|p| {
        let what = match p {
            LogicalPlan::Projection(_)
            | LogicalPlan::Filter(_)
            | LogicalPlan::TableScan(_)
            | LogicalPlan::SubqueryAlias(_)
            | LogicalPlan::EmptyRelation(_) => None,
            LogicalPlan::Aggregate(_) => {
                Some("aggregations (GROUP BY, COUNT, SUM, …) are".to_string())
            }
            LogicalPlan::Join(_) => Some("joins are".to_string()),
            LogicalPlan::Sort(_) => Some("ORDER BY is".to_string()),
            LogicalPlan::Limit(_) => Some("LIMIT and OFFSET are".to_string()),
            LogicalPlan::Distinct(_) => Some("DISTINCT is".to_string()),
            LogicalPlan::Window(_) => Some("window functions are".to_string()),
            LogicalPlan::Union(_) => Some("UNION is".to_string()),
            other => Some(format!("'{}' is", other.display())),
        };
        Ok(match what {
            Some(w) => {
                err = Some(unsupported(&w));
                datafusion::common::tree_node::TreeNodeRecursion::Stop
            }
            None => datafusion::common::tree_node::TreeNodeRecursion::Continue,
        })
    });
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Rewrites the plan to SeaTunnel's semantics before types are coerced: whole-number
/// literals that fit are `int` (so `age + 1` stays int), `||` skips nulls like CONCAT,
/// DataFusion functions the planner inserts itself (EXTRACT, SUBSTRING … FROM, TRIM …
/// FROM) become SeaTunnel's, CASTs whose SeaTunnel semantics differ from DataFusion's
/// become [`SeaCast`] (or are refused when SeaTunnel refuses them), and arithmetic with a
/// DECIMAL operand is exact as SeaTunnel's ([`decimal_arithmetic`]).
fn seatunnel_semantics(
    plan: LogicalPlan,
    mine: &HashMap<String, Arc<ScalarUDF>>,
) -> DFResult<LogicalPlan> {
    let concat = mine.get("concat").cloned();
    // `schema` is the input of the plan node whose expressions are rewritten.
    let rewrite = |e: Expr, schema: Option<&DFSchemaRef>| -> DFResult<Transformed<Expr>> {
        Ok(match e {
            Expr::Literal(ScalarValue::Int64(Some(v)), meta) if i32::try_from(v).is_ok() => {
                Transformed::yes(Expr::Literal(ScalarValue::Int32(Some(v as i32)), meta))
            }
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::StringConcat,
                right,
            }) if concat.is_some() => {
                let f = concat
                    .clone()
                    .ok_or_else(|| DataFusionError::Internal("concat is not registered".into()))?;
                Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
                    f,
                    vec![*left, *right],
                )))
            }
            Expr::BinaryExpr(b) if is_arithmetic(b.op) => match schema {
                Some(schema) => decimal_arithmetic(*b.left, b.op, *b.right, schema)?,
                None => Transformed::no(Expr::BinaryExpr(b)),
            },
            Expr::Cast(Cast { expr, field }) => {
                let Some(schema) = schema else {
                    return Ok(Transformed::no(Expr::Cast(Cast { expr, field })));
                };
                let from = expr.get_type(schema.as_ref())?;
                let to = field.data_type();
                match cast::plan_cast(&from, to) {
                    CastPlan::Keep => Transformed::no(Expr::Cast(Cast { expr, field })),
                    CastPlan::Sea => Transformed::yes(Expr::ScalarFunction(
                        ScalarFunction::new_udf(SeaCast::udf(&from, to), vec![*expr]),
                    )),
                    CastPlan::Reject(why) => return plan_err!("{why}"),
                }
            }
            Expr::ScalarFunction(f) => match mine.get(f.func.name()) {
                Some(m) if !same_udf(m, &f.func) => Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(m.clone(), f.args),
                )),
                _ => Transformed::no(Expr::ScalarFunction(f)),
            },
            other => Transformed::no(other),
        })
    };
    let out = plan.transform_up_with_subqueries(|p| {
        let schema = match p.inputs().as_slice() {
            [one] => Some(one.schema().clone()),
            _ => None,
        };
        let p = p.map_expressions(|e| e.transform_up(|e| rewrite(e, schema.as_ref())))?;
        if p.transformed {
            Ok(Transformed::yes(p.data.recompute_schema()?))
        } else {
            Ok(p)
        }
    })?;
    Ok(out.data)
}

/// SeaTunnel's arithmetic when a DECIMAL takes part: a double literal on the other side
/// is the DECIMAL of its text (`dec * 1.1` is exact, as SeaTunnel's
/// `BigDecimal.valueOf(double)`), and a division keeps the largest scale of the DECIMAL
/// operands, rounding away from zero. Anything else is DataFusion's arithmetic, which
/// matches SeaTunnel's (int with int is int, with bigint bigint, with a double double).
fn decimal_arithmetic(
    left: Expr,
    op: Operator,
    right: Expr,
    schema: &DFSchemaRef,
) -> DFResult<Transformed<Expr>> {
    let (lt, rt) = (
        left.get_type(schema.as_ref())?,
        right.get_type(schema.as_ref())?,
    );
    let scale = match (&lt, &rt) {
        (DataType::Decimal128(_, a), DataType::Decimal128(_, b)) => (*a).max(*b),
        (DataType::Decimal128(_, s), _) | (_, DataType::Decimal128(_, s)) => *s,
        _ => {
            return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(left),
                op,
                Box::new(right),
            ))))
        }
    };
    let exact = |e: Expr| match float_literal(&e).and_then(functions::arith::decimal_literal) {
        Some(d) => Expr::Literal(d, None),
        None => e,
    };
    let (left, right) = (exact(left), exact(right));
    let (lt, rt) = (
        left.get_type(schema.as_ref())?,
        right.get_type(schema.as_ref())?,
    );
    let exact_operand = |t: &DataType| matches!(t, DataType::Decimal128(_, _)) || t.is_integer();
    Ok(Transformed::yes(
        if op == Operator::Divide && exact_operand(&lt) && exact_operand(&rt) {
            Expr::ScalarFunction(ScalarFunction::new_udf(
                functions::arith::DecimalDivide::udf(scale),
                vec![left, right],
            ))
        } else {
            Expr::BinaryExpr(BinaryExpr::new(Box::new(left), op, Box::new(right)))
        },
    ))
}

/// `+ - * / %`.
fn is_arithmetic(op: Operator) -> bool {
    matches!(
        op,
        Operator::Plus | Operator::Minus | Operator::Multiply | Operator::Divide | Operator::Modulo
    )
}

/// The value of a double literal, also a negated one (`-1.5`).
fn float_literal(e: &Expr) -> Option<f64> {
    match e {
        Expr::Literal(ScalarValue::Float64(Some(v)), _) => Some(*v),
        Expr::Negative(inner) => float_literal(inner).map(|v| -v),
        _ => None,
    }
}

/// Whether two UDFs are the same implementation (ours replaced DataFusion's of that name).
fn same_udf(a: &Arc<ScalarUDF>, b: &Arc<ScalarUDF>) -> bool {
    a.as_ref() == b.as_ref()
}

fn unsupported(what: &str) -> String {
    format!("{what} not supported: the Sql transform maps each row of one table on its own (projection and WHERE only, as in SeaTunnel)")
}

fn compile_plan(
    plan: &LogicalPlan,
    state: &datafusion::execution::session_state::SessionState,
    steps: &mut Vec<Step>,
) -> Result<(), String> {
    let phys = |e: &Expr, p: &LogicalPlan| {
        state
            .create_physical_expr(e.clone(), p.schema())
            .map_err(|e| df_message(&e))
    };
    match plan {
        LogicalPlan::TableScan(scan) => {
            if scan.fetch.is_some() {
                return Err(unsupported("LIMIT is"));
            }
            if let Some(p) = &scan.projection {
                steps.push(Step::Select(p.clone()));
            }
            for f in &scan.filters {
                // Filters are only pushed into scans that accept them; ours does not, but
                // honour any that arrive.
                let e = state
                    .create_physical_expr(f.clone(), &scan.projected_schema)
                    .map_err(|e| df_message(&e))?;
                steps.push(Step::Filter(e));
            }
            Ok(())
        }
        LogicalPlan::Filter(f) => {
            compile_plan(&f.input, state, steps)?;
            steps.push(Step::Filter(phys(&f.predicate, &f.input)?));
            Ok(())
        }
        LogicalPlan::Projection(p) => {
            compile_plan(&p.input, state, steps)?;
            let exprs = p
                .expr
                .iter()
                .map(|e| phys(e, &p.input))
                .collect::<Result<Vec<_>, _>>()?;
            // Nullable throughout: a batch never fails on a nullability DataFusion inferred.
            let fields: Vec<Field> = p
                .schema
                .as_arrow()
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect();
            steps.push(Step::Project(exprs, Arc::new(Schema::new(fields))));
            Ok(())
        }
        LogicalPlan::SubqueryAlias(s) => compile_plan(&s.input, state, steps),
        LogicalPlan::EmptyRelation(e) if !e.produce_one_row => {
            steps.push(Step::DropAll);
            Ok(())
        }
        LogicalPlan::EmptyRelation(_) => {
            Err("a query must read the input table (FROM is missing)".into())
        }
        LogicalPlan::Aggregate(_) => Err(unsupported("aggregations (GROUP BY, COUNT, SUM, …) are")),
        LogicalPlan::Join(_) => Err(unsupported("joins are")),
        LogicalPlan::Sort(_) => Err(unsupported("ORDER BY is")),
        LogicalPlan::Limit(_) => Err(unsupported("LIMIT and OFFSET are")),
        LogicalPlan::Distinct(_) => Err(unsupported("DISTINCT is")),
        LogicalPlan::Window(_) => Err(unsupported("window functions are")),
        LogicalPlan::Union(_) => Err(unsupported("UNION is")),
        other => Err(unsupported(&format!("'{}' is", other.display()))),
    }
}

/// The SeaTunnel type for an Arrow type DataFusion produced (`Utf8View` → string, …).
fn seatunnel_type(name: &str, dt: &DataType) -> Result<DataType, String> {
    Ok(match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => DataType::Binary,
        DataType::Null
        | DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Date32 => dt.clone(),
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 => DataType::Int64,
        DataType::UInt64 => DataType::Decimal128(20, 0),
        DataType::Float16 => DataType::Float32,
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) => DataType::Decimal128(*p, *s),
        DataType::Decimal256(p, s) => DataType::Decimal128((*p).min(38), (*s).min(38)),
        DataType::Date64 => DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::Time32(_) | DataType::Time64(_) => DataType::Time64(TimeUnit::Microsecond),
        DataType::Timestamp(_, None) => DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::Timestamp(_, Some(_)) => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        DataType::Dictionary(_, v) => seatunnel_type(name, v)?,
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) | DataType::ListView(f) | DataType::LargeListView(f) => {
            let item = seatunnel_type(name, f.data_type())?;
            if matches!(dt, DataType::List(_)) && &item == f.data_type() {
                dt.clone()
            } else {
                DataType::List(Arc::new(Field::new("item", item, true)))
            }
        }
        DataType::Struct(fields) => {
            let out: Vec<Field> = fields
                .iter()
                .map(|f| Ok(f.as_ref().clone().with_data_type(seatunnel_type(name, f.data_type())?)))
                .collect::<Result<_, String>>()?;
            DataType::Struct(Fields::from(out))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                let k = seatunnel_type(name, kv[0].data_type())?;
                let v = seatunnel_type(name, kv[1].data_type())?;
                if &k == kv[0].data_type() && &v == kv[1].data_type() {
                    dt.clone()
                } else {
                    ferry_api::types::map_type(k, v)
                }
            }
            _ => return Err(format!("column '{name}' has type {dt}, which SeaTunnel cannot carry")),
        },
        other => {
            return Err(format!(
                "column '{name}' has type {other}, which SeaTunnel cannot carry; CAST it to a SeaTunnel type (string, bigint, …)"
            ))
        }
    })
}

fn seatunnel_schema(s: &Schema) -> Result<Schema, String> {
    let fields = s
        .fields()
        .iter()
        .map(|f| {
            Ok(Field::new(
                f.name(),
                seatunnel_type(f.name(), f.data_type())?,
                true,
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Schema::new(fields))
}

impl Compiled {
    /// Runs the steps on one batch; `None` when no row remains.
    pub(crate) fn run(&self, batch: ChangeBatch) -> DFResult<Option<ChangeBatch>> {
        let mut cur = batch;
        for step in &self.steps {
            match step {
                Step::Select(cols) => {
                    let data = cur.data.project(cols)?;
                    cur = cur.with_data(data);
                }
                Step::Filter(pred) => {
                    let rows = cur.num_rows();
                    let v = pred.evaluate(&cur.data)?.into_array(rows)?;
                    let mask = v.as_any().downcast_ref::<BooleanArray>().ok_or_else(|| {
                        DataFusionError::Execution(format!(
                            "WHERE must be a condition, found {}",
                            v.data_type()
                        ))
                    })?;
                    let keep = mask.true_count();
                    if keep == 0 {
                        return Ok(None);
                    }
                    if keep < rows {
                        cur = cur
                            .filter(mask)
                            .map_err(|e| DataFusionError::Execution(e.to_string()))?;
                    }
                }
                Step::Project(exprs, schema) => {
                    let rows = cur.num_rows();
                    let mut cols = Vec::with_capacity(exprs.len());
                    for (e, f) in exprs.iter().zip(schema.fields()) {
                        let c = e.evaluate(&cur.data)?.into_array(rows)?;
                        cols.push(if c.data_type() == f.data_type() {
                            c
                        } else {
                            arrow::compute::cast(&c, f.data_type())?
                        });
                    }
                    let data = RecordBatch::try_new_with_options(
                        schema.clone(),
                        cols,
                        &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows)),
                    )?;
                    cur = cur.with_data(data);
                }
                Step::DropAll => return Ok(None),
            }
        }
        if cur.num_rows() == 0 {
            return Ok(None);
        }
        // Into SeaTunnel types, every column nullable.
        let rows = cur.num_rows();
        let mut cols = Vec::with_capacity(self.output.fields().len());
        for (c, f) in cur.data.columns().iter().zip(self.output.fields()) {
            cols.push(if c.data_type() == f.data_type() {
                c.clone()
            } else {
                arrow::compute::cast(c, f.data_type())?
            });
        }
        let data = RecordBatch::try_new_with_options(
            self.output.clone(),
            cols,
            &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows)),
        )?;
        Ok(Some(cur.with_data(data)))
    }
}
