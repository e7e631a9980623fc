//! The `Jdbc` source: options, [`Source::resolve`] against the database's catalog, splits
//! (SeaTunnel's fixed and dynamic splitters) and readers on the I/O runtime.
//!
//! # Splits and checkpoints
//! A split is a predicate over one table (`"id" >= 0 AND "id" < 1000`, `abs(hashtext(..))
//! % 4 = 1`, `"id" IS NULL`), the number of its rows already returned and the key of the
//! last one. When the table has a primary or unique key the reader orders by it, so that
//! a split restored from a checkpoint goes on after the last key it returned (or, for keys
//! that cannot be compared back, skips the rows it had returned: `OFFSET n`) and a restart
//! re-reads only what is unfinished; finished splits are gone from the state. Without a
//! key the order is the server's and the source says it is not replayable.
//!
//! # PostgreSQL: one snapshot, binary COPY
//! In a batch job the enumerator opens a `REPEATABLE READ` transaction, exports its
//! snapshot (`pg_export_snapshot()`) and keeps that connection for the job's life; every
//! reader imports it (`SET TRANSACTION SNAPSHOT`), so all splits see the table at one point
//! in time, and reads its split with `COPY (SELECT …) TO STDOUT (FORMAT binary)` decoded
//! straight into Arrow builders. After a crash the exporting transaction is gone: a
//! restored reader then reads at a fresh snapshot of its own (logged), so rows changed
//! between the crash and the restart may be seen in their new state.
//!
//! # MySQL/MariaDB
//! Each split is one streaming (unbuffered) text-protocol query, rows decoded as they
//! arrive.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use bytes::{Bytes, BytesMut};
use ferry_api::io::{Fetched, Fetcher, Readiness};
use ferry_api::{
    Boundedness, ChangeBatch, EnumeratorContext, FerryError, JobMode, OptionSpec, Options,
    ReadStatus, ReaderContext, ResolveContext, Result, Source, SourceFactory, SourceReader, Split,
    SplitEnumerator, TableSchema,
};
use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use serde_json::{json, Value};

use ferry_db::catalog::{literal, pg_rows};
use ferry_db::conn::{
    connect_mysql, connect_pg, connect_pg_lendable, pg_error_text, ConnInfo, Dialect, CONN_OPTIONS,
};
use ferry_db::decode::{Builders, CopyDecoder};
use ferry_db::pg_wire::PgSocket;
use ferry_db::relation::{describe, estimated_rows, KeySpan, TablePath};
use ferry_db::types::ColumnDef;

const COMPONENT: &str = "source Jdbc";

ferry_api::declare_options! {
    /// What to read from one table: set at the top, or in each block of `table_list`
    /// (where unset splitter options take the top's).
    struct TableOptions => TABLE_OPTIONS {
        /// The query to read.
        query: String = "query", optional;
        /// The table to read: db.schema.table (PostgreSQL) or db.table (MySQL).
        table_path: String = "table_path", optional;
        /// A filter for table_path reads: `where id > 10`.
        where_condition: String = "where_condition", optional;
        /// Column to split reads on (fixed splitter): numeric ranges, or a hash for text.
        partition_column: String = "partition_column", optional;
        /// Number of splits of the fixed splitter (default: the parallelism).
        partition_num: u64 = "partition_num", optional, min 1;
        /// Lowest partition_column value (default: MIN).
        lower: Value = "partition_lower_bound", optional;
        /// Highest partition_column value (default: MAX).
        upper: Value = "partition_upper_bound", optional;
        /// Rows per split of the dynamic splitter (split key from the primary or a unique key).
        split_size: u64 = "split.size", default 8096;
        /// Keys per row at most for even splitting.
        factor_upper: f64 = "split.even-distribution.factor.upper-bound", default 100.0, shows "100";
        /// Keys per row at least for even splitting.
        factor_lower: f64 = "split.even-distribution.factor.lower-bound", default 0.05;
        /// An unevenly keyed table that would make more splits than this is split from a sample of its keys (one query) instead of walking the key in split.size steps (one query per split).
        sample_threshold: u64 = "split.sample-sharding.threshold", default 1000;
        /// With sampling, one key in this many is read to place the split bounds.
        sampling_rate: u64 = "split.inverse-sampling.rate", default 1000;
        /// Accepted for compatibility.
        _use_select_count: bool = "use_select_count", default false;
        /// Accepted for compatibility.
        _skip_analyze: bool = "skip_analyze", default false;
    }
}

ferry_api::declare_options! {
    /// The source's options beside the connection's and one table's.
    struct SourceOptions => SOURCE_ONLY {
        /// Several tables, each { table_path, query, where_condition, partition_column, … }.
        table_list: Vec<Value> = "table_list", optional;
        /// Rows per batch (0: 8192).
        fetch_size: u64 = "fetch_size", default 0;
        /// Accepted for compatibility.
        _max_retries: u64 = "max_retries", default 0;
        /// Accepted for compatibility.
        _compatible_mode: String = "compatible_mode", optional;
        /// Accepted for compatibility.
        _decimal_type_narrowing: bool = "decimal_type_narrowing", default true;
        /// Accepted for compatibility.
        _int_type_narrowing: bool = "int_type_narrowing", default true;
    }
}

/// Every option of the source.
pub const SOURCE_OPTIONS: &[OptionSpec] =
    ferry_api::concat_specs!(CONN_OPTIONS, TABLE_OPTIONS, SOURCE_ONLY);

/// What to read from one table, as the job file says it.
#[derive(Debug, Clone)]
struct TableSpec {
    table_path: Option<String>,
    query: Option<String>,
    where_condition: Option<String>,
    partition_column: Option<String>,
    partition_num: Option<u64>,
    lower: Option<String>,
    upper: Option<String>,
    split_size: u64,
    factor_upper: f64,
    factor_lower: f64,
    /// Splits above which an uneven table is split from a sample of its keys.
    sample_threshold: u64,
    /// One key in this many goes into the sample.
    sampling_rate: u64,
}

/// A partition bound as the text of a number.
fn bound(o: &Options, key: &str, v: Option<Value>) -> Result<Option<String>> {
    Ok(match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(_) => return Err(o.error(key, "expected a number")),
    })
}

fn read_table_spec(o: &mut Options) -> Result<TableSpec> {
    let r = TableOptions::read(o)?;
    let t = TableSpec {
        table_path: r.table_path,
        query: r.query,
        where_condition: r.where_condition,
        partition_column: r.partition_column,
        partition_num: r.partition_num,
        lower: bound(o, "partition_lower_bound", r.lower)?,
        upper: bound(o, "partition_upper_bound", r.upper)?,
        split_size: r.split_size.max(1),
        factor_upper: r.factor_upper,
        factor_lower: r.factor_lower,
        sample_threshold: r.sample_threshold,
        sampling_rate: r.sampling_rate.max(1),
    };
    if t.table_path.is_none() && t.query.is_none() {
        return Err(o.error("query", "set query, table_path or table_list"));
    }
    Ok(t)
}

/// A table after [`Source::resolve`]: its schema and how to read it.
#[derive(Debug, Clone)]
struct Resolved {
    spec: TableSpec,
    schema: TableSchema,
    columns: Vec<ColumnDef>,
    /// `FROM …` text with the filter: `"s"."t" WHERE (id > 10)` or `(query) AS t`.
    from: String,
    filter: Option<String>,
    /// Columns that order rows deterministically (a primary or unique key), quoted.
    order_by: Vec<String>,
    /// The key columns' places in a batch, when every one of them can be written back as
    /// a literal that compares as the column orders ([`keyset_columns`]): a restored split
    /// then goes on after its last key rather than skipping a count of rows.
    keyset: Option<Vec<usize>>,
}

/// The batch positions of `key`'s columns when a split may resume after its last key:
/// every key column NOT NULL (a NULL compares as nothing, and the servers order NULLs at
/// opposite ends), and an integer or text that compares as it orders (PostgreSQL casts the
/// literal to the column's type; MySQL compares text in the column's collation, but an
/// `enum` or `set` orders by its index, not its text). `None` when a column is not so.
fn keyset_columns(dialect: Dialect, key: &[String], columns: &[ColumnDef]) -> Option<Vec<usize>> {
    if key.is_empty() {
        return None;
    }
    key.iter()
        .map(|k| {
            let i = columns.iter().position(|c| &c.name == k)?;
            let c = &columns[i];
            if c.nullable {
                return None;
            }
            let text_ok = || {
                let t = c.source_type.to_ascii_lowercase();
                dialect == Dialect::Postgres || !(t.starts_with("enum") || t.starts_with("set"))
            };
            match c.data_type {
                ref t if t.is_integer() => Some(i),
                DataType::Decimal128(_, 0) => Some(i),
                DataType::Utf8 | DataType::LargeUtf8 if text_ok() => Some(i),
                _ => None,
            }
        })
        .collect()
}

/// The SQL literals of row `row`'s `key` columns (`None` if one is NULL after all).
fn key_literals(
    dialect: Dialect,
    batch: &RecordBatch,
    key: &[usize],
    row: usize,
) -> Option<Vec<String>> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes as t;
    key.iter()
        .map(|&i| {
            let a = batch.columns().get(i)?;
            if a.is_null(row) {
                return None;
            }
            Some(match a.data_type() {
                DataType::Int8 => a.as_primitive::<t::Int8Type>().value(row).to_string(),
                DataType::Int16 => a.as_primitive::<t::Int16Type>().value(row).to_string(),
                DataType::Int32 => a.as_primitive::<t::Int32Type>().value(row).to_string(),
                DataType::Int64 => a.as_primitive::<t::Int64Type>().value(row).to_string(),
                DataType::UInt8 => a.as_primitive::<t::UInt8Type>().value(row).to_string(),
                DataType::UInt16 => a.as_primitive::<t::UInt16Type>().value(row).to_string(),
                DataType::UInt32 => a.as_primitive::<t::UInt32Type>().value(row).to_string(),
                DataType::UInt64 => a.as_primitive::<t::UInt64Type>().value(row).to_string(),
                DataType::Decimal128(_, 0) => {
                    a.as_primitive::<t::Decimal128Type>().value(row).to_string()
                }
                DataType::Utf8 => literal(dialect, a.as_string::<i32>().value(row)),
                DataType::LargeUtf8 => literal(dialect, a.as_string::<i64>().value(row)),
                _ => return None,
            })
        })
        .collect()
}

/// The factory of SeaTunnel's `Jdbc` source.
pub struct JdbcSourceFactory;

impl SourceFactory for JdbcSourceFactory {
    fn name(&self) -> &'static str {
        "Jdbc"
    }

    fn description(&self) -> &'static str {
        "Reads tables or queries from PostgreSQL (binary COPY, one snapshot) and MySQL/MariaDB (streaming), split in parallel"
    }

    fn options(&self) -> &'static [OptionSpec] {
        SOURCE_OPTIONS
    }

    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        let conn = ConnInfo::from_options(o)?;
        let own = SourceOptions::read(o)?;
        let fetch_size = own.fetch_size;
        let specs = match own.table_list {
            Some(items) => {
                if items.is_empty() {
                    return Err(o.error("table_list", "is empty"));
                }
                let mut out = Vec::new();
                for (i, item) in items.into_iter().enumerate() {
                    let prefix = format!("table_list[{i}]");
                    let Value::Object(mut m) = item else {
                        return Err(
                            o.error(&prefix, "expected a block { table_path = …, query = … }")
                        );
                    };
                    // Splitter options set at the top apply to every table that sets none.
                    for k in TABLE_OPTIONS
                        .iter()
                        .map(|s| s.name)
                        .filter(|k| *k != "table_path" && *k != "query")
                    {
                        if !m.contains_key(k) {
                            if let Some(v) = o.raw().get(k) {
                                m.insert(k.to_string(), v.clone());
                            }
                        }
                    }
                    let mut sub = Options::new(m, o.location().nested(&prefix));
                    let spec = read_table_spec(&mut sub).map_err(|e| e.within(&prefix))?;
                    if spec.table_path.is_none() {
                        return Err(
                            o.error(&format!("{prefix}.table_path"), "is required in table_list")
                        );
                    }
                    sub.finish(TABLE_OPTIONS).map_err(|e| e.within(&prefix))?;
                    out.push(spec);
                }
                for s in TABLE_OPTIONS {
                    let _ = o.get(s.name);
                }
                out
            }
            None => vec![read_table_spec(o)?],
        };
        o.finish(SOURCE_OPTIONS)?;
        Ok(Box::new(JdbcSource {
            conn: Arc::new(conn),
            specs,
            tables: Vec::new(),
            fetch_size,
            mode: job.mode,
        }))
    }
}

use ferry_api::JobContext;

/// A configured `Jdbc` source.
#[derive(Debug)]
pub struct JdbcSource {
    conn: Arc<ConnInfo>,
    specs: Vec<TableSpec>,
    tables: Vec<Resolved>,
    fetch_size: u64,
    mode: JobMode,
}

fn strip_where(s: &str) -> &str {
    let t = s.trim();
    if t.len() >= 5 && t[..5].eq_ignore_ascii_case("where") {
        t[5..].trim()
    } else {
        t
    }
}

impl JdbcSource {
    async fn describe(&self, spec: &TableSpec) -> Result<Resolved> {
        let d = self.conn.dialect;
        let path = spec.table_path.as_deref().map(|p| TablePath::parse(d, p));
        let from = match (&spec.query, &path) {
            (Some(q), _) => format!("({}) AS ferry_q", q.trim().trim_end_matches(';')),
            (None, Some(t)) => t.quoted(d),
            (None, None) => {
                return Err(FerryError::internal(
                    "a table has neither query nor table_path",
                ))
            }
        };
        let filter = spec
            .where_condition
            .as_deref()
            .map(|w| strip_where(w).to_string());
        let name = spec.table_path.as_deref().unwrap_or("default");
        let described = describe(&self.conn, COMPONENT, name, &from, path.as_ref()).await?;
        Ok(Resolved {
            spec: spec.clone(),
            order_by: described.key.iter().map(|k| d.quote(k)).collect(),
            keyset: keyset_columns(d, &described.key, &described.columns),
            schema: described.schema,
            columns: described.columns,
            from,
            filter,
        })
    }
}

impl Source for JdbcSource {
    fn resolve(&mut self, ctx: &ResolveContext) -> Result<()> {
        let what = format!("reading the tables' columns from {}", self.conn.address());
        let mut tables = Vec::with_capacity(self.specs.len());
        for spec in &self.specs {
            let r = ctx.block_on(&what, self.describe(spec))?;
            tables.push(r);
        }
        let mut seen = std::collections::HashSet::new();
        for t in &tables {
            if !seen.insert(t.schema.name.clone()) {
                return Err(FerryError::config(format!(
                    "{COMPONENT}: table '{}' is listed twice",
                    t.schema.name
                )));
            }
        }
        self.tables = tables;
        Ok(())
    }

    fn boundedness(&self) -> Boundedness {
        Boundedness::Bounded
    }

    fn tables(&self) -> Vec<TableSchema> {
        self.tables.iter().map(|t| t.schema.clone()).collect()
    }

    fn is_replayable(&self) -> bool {
        self.tables.iter().all(|t| !t.order_by.is_empty())
    }

    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let (planned, pending) = match restored {
            Some(v) => {
                let pending: Vec<Split> = ferry_api::decode_state(
                    v.get("pending").unwrap_or(&json!([])),
                    "the Jdbc enumerator",
                )?;
                (
                    v.get("planned").and_then(Value::as_bool).unwrap_or(false),
                    pending,
                )
            }
            None => (false, Vec::new()),
        };
        Ok(Box::new(JdbcEnumerator {
            conn: self.conn.clone(),
            tables: self.tables.clone(),
            parallelism: ctx.parallelism.max(1),
            planned,
            pending: pending.into_iter().map(|s| (None, s)).collect(),
            snapshot_holder: None,
            share_snapshot: self.mode == JobMode::Batch,
            next_reader: 0,
        }))
    }

    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        let batch_rows = if self.fetch_size == 0 {
            8192
        } else {
            self.fetch_size as usize
        };
        Ok(Box::new(JdbcReader {
            conn: self.conn.clone(),
            tables: Arc::new(self.tables.clone()),
            batch_rows,
            splits: VecDeque::new(),
            current: None,
            ahead: None,
            no_more: false,
            readiness: Readiness::new(),
            idle: IdleConn::default(),
        }))
    }
}

/// What a split holds in its state.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct SplitState {
    /// Index of the table in the source's list.
    table: usize,
    /// The split's predicate, `None` for the whole table.
    #[serde(rename = "where")]
    predicate: Option<String>,
    /// Rows of the split already returned.
    skip: u64,
    /// The key of the last row returned, as SQL literals in key order: a restored split
    /// reads the keys after it (`(k1, k2) > (…)`), so rows deleted or inserted before it
    /// while the job was down shift nothing. Without it (older checkpoints, keys that
    /// cannot be compared so) the split skips `skip` rows of its ordered read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after: Option<Vec<String>>,
    /// PostgreSQL snapshot to read at (batch jobs), if any.
    #[serde(default)]
    snapshot: Option<String>,
}

struct JdbcEnumerator {
    conn: Arc<ConnInfo>,
    tables: Vec<Resolved>,
    parallelism: usize,
    planned: bool,
    pending: VecDeque<(Option<usize>, Split)>,
    /// The connection whose open transaction keeps the exported snapshot alive.
    snapshot_holder: Option<tokio_postgres::Client>,
    share_snapshot: bool,
    next_reader: usize,
}

/// An integer bound of a split key.
fn int_key(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Decimal128(_, 0)
    )
}

/// Ranges `[lo, hi]` cut into `n` chunks: predicates that together cover every value
/// (the first open below, the last open above).
fn range_predicates(col: &str, lo: i128, hi: i128, n: u64) -> Vec<String> {
    if hi <= lo || n <= 1 {
        return vec![format!("{col} IS NOT NULL")];
    }
    let span = (hi - lo + 1) as u128;
    let step = span.div_ceil(n as u128).max(1) as i128;
    let mut out = Vec::new();
    let mut start = lo;
    let mut first = true;
    while start <= hi {
        let end = start.saturating_add(step);
        let last = end > hi;
        out.push(match (first, last) {
            (true, true) => format!("{col} IS NOT NULL"),
            (true, false) => format!("{col} < {end}"),
            (false, true) => format!("{col} >= {start}"),
            (false, false) => format!("{col} >= {start} AND {col} < {end}"),
        });
        first = false;
        start = end;
    }
    out
}

/// Predicates cutting the key `col` into about `n` ranges of equal row counts, with bounds
/// taken from `sample` (sorted keys, one in every so many rows).
fn sampled_predicates(col: &str, sample: &[i128], n: i128) -> Vec<String> {
    let n = n.max(1) as usize;
    let step = sample.len().div_ceil(n).max(1);
    let mut bounds: Vec<i128> = Vec::new();
    for b in sample.iter().skip(step).step_by(step) {
        if bounds.last().is_none_or(|last| b > last) {
            bounds.push(*b);
        }
    }
    if bounds.is_empty() {
        return vec![format!("{col} IS NOT NULL")];
    }
    let mut out = vec![format!("{col} < {}", bounds[0])];
    for w in bounds.windows(2) {
        out.push(format!("{col} >= {} AND {col} < {}", w[0], w[1]));
    }
    out.push(format!("{col} >= {}", bounds[bounds.len() - 1]));
    out
}

impl JdbcEnumerator {
    async fn scalar_row(&mut self, sql: &str) -> Result<Vec<Option<String>>> {
        Ok(self.rows(sql).await?.into_iter().next().unwrap_or_default())
    }

    /// Every row of `sql`, every value as text.
    async fn rows(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
        match self.conn.dialect {
            Dialect::Postgres => {
                if self.snapshot_holder.is_none() {
                    self.snapshot_holder = Some(connect_pg(&self.conn, COMPONENT).await?);
                }
                let client = self
                    .snapshot_holder
                    .as_ref()
                    .ok_or_else(|| FerryError::internal("no client"))?;
                pg_rows(client, sql, COMPONENT).await
            }
            Dialect::MySql => {
                let mut c = connect_mysql(&self.conn, COMPONENT).await?;
                let rows: Vec<mysql_async::Row> = c
                    .query(sql)
                    .await
                    .map_err(|e| FerryError::external(COMPONENT, format!("{e}: {sql}")))?;
                let _ = c.disconnect().await;
                Ok(rows
                    .iter()
                    .map(|r| {
                        (0..r.len())
                            .map(|i| match r.as_ref(i) {
                                Some(mysql_async::Value::Bytes(b)) => {
                                    Some(String::from_utf8_lossy(b).into_owned())
                                }
                                Some(mysql_async::Value::Int(n)) => Some(n.to_string()),
                                Some(mysql_async::Value::UInt(n)) => Some(n.to_string()),
                                _ => None,
                            })
                            .collect()
                    })
                    .collect())
            }
        }
    }

    fn where_all(t: &Resolved) -> String {
        match &t.filter {
            Some(f) => format!(" WHERE ({f})"),
            None => String::new(),
        }
    }

    async fn plan(&mut self) -> Result<Vec<Split>> {
        let d = self.conn.dialect;
        let mut snapshot = None;
        if d == Dialect::Postgres && self.share_snapshot {
            let client = connect_pg(&self.conn, COMPONENT).await?;
            client
                .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await
                .map_err(|e| FerryError::external(COMPONENT, pg_error_text(&e)))?;
            let rows = pg_rows(&client, "SELECT pg_export_snapshot()", COMPONENT).await?;
            snapshot = rows.first().and_then(|r| r[0].clone());
            self.snapshot_holder = Some(client);
        }
        let mut splits = Vec::new();
        let tables = self.tables.clone();
        for (ti, t) in tables.iter().enumerate() {
            let preds = self.split_table(t).await?;
            for (i, p) in preds.into_iter().enumerate() {
                splits.push(Split::typed(
                    format!("{}#{i}", t.schema.name),
                    &SplitState {
                        table: ti,
                        predicate: p,
                        skip: 0,
                        after: None,
                        snapshot: snapshot.clone(),
                    },
                )?);
            }
        }
        Ok(splits)
    }

    /// The predicates of one table's splits (one `None` for an unsplit read).
    async fn split_table(&mut self, t: &Resolved) -> Result<Vec<Option<String>>> {
        let d = self.conn.dialect;
        let spec = &t.spec;
        let from = format!("{}{}", t.from, Self::where_all(t));
        // The fixed splitter: an explicit partition column.
        if let Some(pc) = &spec.partition_column {
            let col = t.columns.iter().find(|c| c.name == *pc).ok_or_else(|| {
                FerryError::config(format!(
                    "{COMPONENT}: partition_column '{pc}' is not a column of {}",
                    t.schema.name
                ))
            })?;
            let q = d.quote(&col.name);
            let n = spec.partition_num.unwrap_or(self.parallelism as u64).max(1);
            let mut preds: Vec<Option<String>> = if int_key(&col.data_type) {
                let (lo, hi) = match (&spec.lower, &spec.upper) {
                    (Some(l), Some(u)) => (l.clone(), u.clone()),
                    _ => {
                        let r = self
                            .scalar_row(&format!("SELECT MIN({q}), MAX({q}) FROM {from}"))
                            .await?;
                        let l = spec.lower.clone().or_else(|| r.first().cloned().flatten());
                        let u = spec.upper.clone().or_else(|| r.get(1).cloned().flatten());
                        match (l, u) {
                            (Some(l), Some(u)) => (l, u),
                            _ => return Ok(vec![None]),
                        }
                    }
                };
                let parse = |s: &str, which: &str| {
                    s.trim()
                        .split('.')
                        .next()
                        .unwrap_or("")
                        .parse::<i128>()
                        .map_err(|_| {
                            FerryError::config(format!(
                                "{COMPONENT}: partition_{which}_bound '{s}' is not an integer"
                            ))
                        })
                };
                range_predicates(&q, parse(&lo, "lower")?, parse(&hi, "upper")?, n)
                    .into_iter()
                    .map(Some)
                    .collect()
            } else if col.data_type == DataType::Utf8 {
                (0..n)
                    .map(|i| {
                        Some(match d {
                            Dialect::Postgres => format!("abs(hashtext({q})::int8) % {n} = {i}"),
                            Dialect::MySql => format!("MOD(CRC32({q}), {n}) = {i}"),
                        })
                    })
                    .collect()
            } else {
                return Err(FerryError::config(format!(
                    "{COMPONENT}: partition_column '{pc}' has type {}; split on an integer or text column",
                    ferry_api::types::type_name(&col.data_type)
                )));
            };
            if col.nullable {
                preds.push(Some(format!("{q} IS NULL")));
            }
            return Ok(preds);
        }
        // The dynamic splitter: a table with an integer primary or unique key.
        if spec.query.is_some() || t.order_by.is_empty() {
            return Ok(vec![None]);
        }
        let key_name = t.schema.primary_key_columns().first().cloned().or_else(|| {
            t.schema
                .catalog
                .constraint_keys
                .iter()
                .find(|k| k.kind == ferry_api::ConstraintType::Unique)
                .and_then(|k| k.columns.first().map(|c| c.name.clone()))
        });
        let Some(key) = key_name.and_then(|k| t.columns.iter().find(|c| c.name == k).cloned())
        else {
            return Ok(vec![None]);
        };
        if !int_key(&key.data_type) {
            return Ok(vec![None]);
        }
        let q = d.quote(&key.name);
        // A whole table's row count from the server's estimate (the splits' sizes need no
        // exact one, and counting reads the table once more); a filtered one is counted.
        let estimate = match (&t.filter, spec.table_path.as_deref()) {
            (None, Some(path)) => {
                let r = self
                    .scalar_row(&TablePath::parse(d, path).estimated_rows_query(d))
                    .await?;
                estimated_rows(r.first().cloned().flatten().as_deref())
            }
            _ => None,
        };
        let r = self
            .scalar_row(&KeySpan::query(d, &from, &q, estimate.is_none()))
            .await?;
        let Some(KeySpan {
            rows: count,
            lo,
            hi,
        }) = KeySpan::read(estimate, &r)
        else {
            return Ok(vec![None]);
        };
        let size = spec.split_size as i128;
        if count <= size {
            return Ok(vec![None]);
        }
        let factor = (hi - lo + 1) as f64 / count as f64;
        let mut preds = Vec::new();
        if factor >= spec.factor_lower && factor <= spec.factor_upper {
            let chunks = (count + size - 1) / size;
            preds = range_predicates(&q, lo, hi, chunks as u64)
                .into_iter()
                .map(Some)
                .collect();
        } else if (count + size - 1) / size > spec.sample_threshold as i128 {
            // Uneven keys and many splits: bounds from every rate-th key, in one query
            // (SeaTunnel samples the same way, reading the key column on the client).
            let rate = spec.sampling_rate;
            let sample: Vec<i128> = self
                .rows(&format!(
                    "SELECT {q} FROM (SELECT {q}, ROW_NUMBER() OVER (ORDER BY {q}) AS ferry_rn FROM {from}) AS ferry_s WHERE ferry_s.ferry_rn % {rate} = 0 ORDER BY {q}"
                ))
                .await?
                .into_iter()
                .filter_map(|r| r.into_iter().next().flatten()?.parse().ok())
                .collect();
            preds = sampled_predicates(&q, &sample, (count + size - 1) / size)
                .into_iter()
                .map(Some)
                .collect();
        } else {
            // Uneven keys: walk them in steps of split.size rows.
            let mut start = lo;
            let mut first = true;
            loop {
                let cond = if from.contains(" WHERE ") {
                    " AND "
                } else {
                    " WHERE "
                };
                let sql = format!(
                    "SELECT MAX({q}) FROM (SELECT {q} FROM {from}{cond}{q} >= {start} ORDER BY {q} LIMIT {size}) AS ferry_chunk"
                );
                let end = self
                    .scalar_row(&sql)
                    .await?
                    .first()
                    .cloned()
                    .flatten()
                    .and_then(|s| s.parse::<i128>().ok());
                match end {
                    Some(e) if e < hi => {
                        preds.push(Some(if first {
                            format!("{q} <= {e}")
                        } else {
                            format!("{q} >= {start} AND {q} <= {e}")
                        }));
                        first = false;
                        start = e + 1;
                    }
                    _ => {
                        preds.push(Some(if first {
                            format!("{q} IS NOT NULL")
                        } else {
                            format!("{q} >= {start}")
                        }));
                        break;
                    }
                }
            }
        }
        if key.nullable {
            preds.push(Some(format!("{q} IS NULL")));
        }
        Ok(preds)
    }
}

impl SplitEnumerator for JdbcEnumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        if !self.planned {
            let handle = ferry_api::io::handle()?;
            let splits = handle.block_on(self.plan())?;
            self.pending.extend(splits.into_iter().map(|s| (None, s)));
            self.planned = true;
        }
        let mut out = Vec::new();
        while let Some((reader, split)) = self.pending.pop_front() {
            let r = reader.unwrap_or_else(|| {
                let r = self.next_reader % self.parallelism;
                self.next_reader += 1;
                r
            });
            out.push((r, split));
        }
        Ok(out)
    }

    fn is_exhausted(&self) -> bool {
        self.planned && self.pending.is_empty()
    }

    fn add_splits_back(&mut self, splits: Vec<Split>, reader: usize) {
        self.pending
            .extend(splits.into_iter().map(|s| (Some(reader), s)));
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Value> {
        let pending: Vec<&Split> = self.pending.iter().map(|(_, s)| s).collect();
        Ok(json!({"planned": self.planned, "pending": pending}))
    }
}

struct Current {
    split: Split,
    state: SplitState,
    returned: u64,
    /// The key of the last row returned (see [`SplitState::after`]); `None` until a row
    /// is returned, and for keys that cannot be compared back.
    last_key: Option<Vec<String>>,
    fetcher: Fetcher<Fetch>,
    /// PostgreSQL splits: the COPY decoder and the batch it is filling.
    copy: Option<CopyBatches>,
}

struct JdbcReader {
    conn: Arc<ConnInfo>,
    tables: Arc<Vec<Resolved>>,
    batch_rows: usize,
    splits: VecDeque<Split>,
    current: Option<Current>,
    /// The split after the current one, its query already started.
    ahead: Option<Current>,
    no_more: bool,
    readiness: Readiness,
    idle: IdleConn,
}

/// A reader's connections between its splits (two: the current split's and the one read
/// ahead's). Each split had a connection of its own, and
/// the server's start of a backend for each (248 for a 2M-row table at the default
/// `split.size`) cost more than a third of the bulk read's time. A connection is put back
/// only after its split ended cleanly (committed, result read to its end).
#[derive(Default)]
struct Idle {
    /// PostgreSQL connections, with their sockets' lenders for COPY (none on a Unix socket).
    pg: Vec<(tokio_postgres::Client, Option<PgSocket>)>,
    mysql: Vec<mysql_async::Conn>,
}

type IdleConn = Arc<std::sync::Mutex<Idle>>;

fn select_sql(t: &Resolved, st: &SplitState, dialect: Dialect) -> String {
    let cols: Vec<&str> = t.columns.iter().map(|c| c.select.as_str()).collect();
    let mut conds: Vec<String> = Vec::new();
    if let Some(f) = &t.filter {
        conds.push(format!("({f})"));
    }
    if let Some(p) = &st.predicate {
        conds.push(format!("({p})"));
    }
    let after = st
        .after
        .as_ref()
        .filter(|a| !a.is_empty() && a.len() == t.order_by.len());
    if let Some(a) = after {
        // A row comparison orders as ORDER BY does, column after column.
        conds.push(if a.len() == 1 {
            format!("{} > {}", t.order_by[0], a[0])
        } else {
            format!("({}) > ({})", t.order_by.join(", "), a.join(", "))
        });
    }
    let mut sql = format!("SELECT {} FROM {}", cols.join(", "), t.from);
    if !conds.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conds.join(" AND "));
    }
    if !t.order_by.is_empty() {
        sql.push_str(" ORDER BY ");
        sql.push_str(&t.order_by.join(", "));
    }
    if st.skip > 0 && after.is_none() {
        match dialect {
            Dialect::Postgres => sql.push_str(&format!(" OFFSET {}", st.skip)),
            Dialect::MySql => {
                sql.push_str(&format!(" LIMIT 18446744073709551615 OFFSET {}", st.skip))
            }
        }
    }
    sql
}

async fn fetch_pg(
    conn: Arc<ConnInfo>,
    table: Resolved,
    st: SplitState,
    idle: IdleConn,
    tx: &ferry_api::io::FetchSender<Fetch>,
) -> Result<()> {
    let kept = idle.lock().ok().and_then(|mut i| i.pg.pop());
    let (client, socket) = match kept.filter(|(c, _)| !c.is_closed()) {
        Some(c) => c,
        None => connect_pg_lendable(&conn, COMPONENT).await?,
    };
    let pg = |e: tokio_postgres::Error| FerryError::external(COMPONENT, pg_error_text(&e));
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(pg)?;
    if let Some(snap) = &st.snapshot {
        if let Err(e) = client
            .batch_execute(&format!(
                "SET TRANSACTION SNAPSHOT {}",
                literal(Dialect::Postgres, snap)
            ))
            .await
        {
            // The exporting transaction ended (a restart after a crash): read at a fresh one.
            tracing::warn!(
                "Jdbc: snapshot {snap} is gone ({}); reading {} at a new snapshot",
                pg_error_text(&e),
                table.schema.name
            );
            client
                .batch_execute("ROLLBACK; BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await
                .map_err(pg)?;
        }
    }
    let sql = select_sql(&table, &st, Dialect::Postgres);
    let copy = format!("COPY ({sql}) TO STDOUT (FORMAT binary)");
    let mut chunk = BytesMut::with_capacity(COPY_CHUNK);
    let lent = match &socket {
        Some(s) => s.lend(&client).await,
        None => None,
    };
    match lent {
        Some(mut lent) => {
            // Straight off the socket: see ferry_db::pg_wire.
            let wire = |e: ferry_db::pg_wire::WireError| {
                FerryError::external(COMPONENT, format!("{e}: {sql}"))
            };
            lent.copy_out(&copy).await.map_err(wire)?;
            loop {
                let more = lent
                    .copy_out_data(&mut chunk, COPY_CHUNK - COPY_SLACK)
                    .await
                    .map_err(wire)?;
                if !chunk.is_empty() && !tx.send(Ok(Fetch::Copy(chunk.split().freeze()))).await {
                    // The reader is gone; dropping `lent` closes the connection.
                    return Ok(());
                }
                if !more {
                    break;
                }
                chunk.reserve(COPY_CHUNK);
            }
            lent.give_back();
        }
        None => {
            let stream = client.copy_out(&copy).await.map_err(|e| {
                FerryError::external(COMPONENT, format!("{}: {sql}", pg_error_text(&e)))
            })?;
            futures_util::pin_mut!(stream);
            // The server sends a row a message: gather them into large chunks, so that the
            // reader thread (which decodes) is woken once per chunk rather than once per row.
            while let Some(msg) = stream.next().await {
                chunk.extend_from_slice(&msg.map_err(pg)?);
                if chunk.len() >= COPY_CHUNK - COPY_SLACK {
                    if !tx.send(Ok(Fetch::Copy(chunk.split().freeze()))).await {
                        return Ok(());
                    }
                    chunk.reserve(COPY_CHUNK);
                }
            }
            if !chunk.is_empty() && !tx.send(Ok(Fetch::Copy(chunk.freeze()))).await {
                return Ok(());
            }
        }
    }
    if client.batch_execute("COMMIT").await.is_ok() {
        if let Ok(mut i) = idle.lock() {
            i.pg.push((client, socket));
        }
    }
    Ok(())
}

/// Bytes of binary COPY data handed to the reader thread at a time.
const COPY_CHUNK: usize = 1 << 20;

/// Room left in a chunk for the row that fills it: a chunk is handed over once it holds
/// `COPY_CHUNK - COPY_SLACK` bytes, so that the last row appended (the server's messages
/// are whole rows) fits the capacity reserved. Filling it to the brim made the row that
/// crossed the line grow the buffer to 2 MiB, copying the MiB before it: 8 % of the
/// reader's CPU, with the page faults of the new buffer.
const COPY_SLACK: usize = 64 << 10;

/// What a split's fetch task hands its reader.
enum Fetch {
    /// PostgreSQL binary COPY data, decoded on the reader's own thread (the I/O runtime's
    /// threads are shared by every reader: decoding there held all of them to one core).
    Copy(Bytes),
    /// Rows already decoded (MySQL: the client library parses each row as it reads it).
    Batch(RecordBatch),
}

/// Decodes a split's COPY stream into batches on the reader's thread.
struct CopyBatches {
    decoder: CopyDecoder,
    builders: Builders,
}

async fn fetch_mysql(
    conn: Arc<ConnInfo>,
    table: Resolved,
    st: SplitState,
    batch_rows: usize,
    idle: IdleConn,
    tx: &ferry_api::io::FetchSender<Fetch>,
) -> Result<()> {
    let kept = idle.lock().ok().and_then(|mut i| i.mysql.pop());
    let mut c = match kept {
        Some(c) => c,
        None => connect_mysql(&conn, COMPONENT).await?,
    };
    let sql = select_sql(&table, &st, Dialect::MySql);
    let schema = table.schema.schema.clone();
    let mut builders = Builders::new(&table.columns, schema, batch_rows, COMPONENT)?;
    let ncols = table.columns.len();
    {
        let mut result = c
            .query_iter(sql.as_str())
            .await
            .map_err(|e| FerryError::external(COMPONENT, format!("{e}: {sql}")))?;
        loop {
            let row = result
                .next()
                .await
                .map_err(|e| FerryError::external(COMPONENT, e.to_string()))?;
            let Some(row) = row else { break };
            for i in 0..ncols {
                match row.as_ref(i) {
                    None | Some(mysql_async::Value::NULL) => builders.append_text(i, None)?,
                    Some(mysql_async::Value::Bytes(b)) => builders.append_text(i, Some(b))?,
                    Some(other) => {
                        let s = other.as_sql(true);
                        builders.append_text(i, Some(s.trim_matches('\'').as_bytes()))?
                    }
                }
            }
            builders.end_row();
            if builders.rows() >= batch_rows && !tx.send(Ok(Fetch::Batch(builders.finish()?))).await
            {
                return Ok(());
            }
        }
    }
    if builders.rows() > 0 && !tx.send(Ok(Fetch::Batch(builders.finish()?))).await {
        let _ = c.disconnect().await;
        return Ok(());
    }
    let unkept = match idle.lock() {
        Ok(mut i) => {
            i.mysql.push(c);
            None
        }
        Err(_) => Some(c),
    };
    if let Some(c) = unkept {
        let _ = c.disconnect().await;
    }
    Ok(())
}

impl JdbcReader {
    /// Makes the next split current (the one read ahead, if any) and starts reading the one
    /// after it: while a split's rows are decoded, the next one's query is already under
    /// way on a second connection, so the reader does not wait for a query's start at every
    /// split. Returns false when no split is left.
    fn start_next(&mut self) -> Result<bool> {
        self.current = match self.ahead.take() {
            Some(c) => Some(c),
            None => match self.splits.pop_front() {
                Some(split) => Some(self.open(split)?),
                None => None,
            },
        };
        if self.current.is_none() {
            return Ok(false);
        }
        if let Some(split) = self.splits.pop_front() {
            self.ahead = Some(self.open(split)?);
        }
        Ok(true)
    }

    /// Starts a split's fetch task.
    fn open(&self, split: Split) -> Result<Current> {
        let state: SplitState = split.read_state()?;
        let table = self.tables.get(state.table).cloned().ok_or_else(|| {
            FerryError::internal(format!("Jdbc split {} names no table", split.id))
        })?;
        let copy = match self.conn.dialect {
            Dialect::Postgres => Some(CopyBatches {
                decoder: CopyDecoder::new(table.columns.len()),
                builders: Builders::new(
                    &table.columns,
                    table.schema.schema.clone(),
                    self.batch_rows,
                    COMPONENT,
                )?,
            }),
            Dialect::MySql => None,
        };
        let (conn, st, rows) = (self.conn.clone(), state.clone(), self.batch_rows);
        let idle = self.idle.clone();
        let fetcher = Fetcher::spawn(4, &self.readiness, move |tx| async move {
            let r = match conn.dialect {
                Dialect::Postgres => fetch_pg(conn, table, st, idle, &tx).await,
                Dialect::MySql => fetch_mysql(conn, table, st, rows, idle, &tx).await,
            };
            if let Err(e) = r {
                tx.send(Err(e)).await;
            }
        })?;
        Ok(Current {
            split,
            state,
            returned: 0,
            last_key: None,
            fetcher,
            copy,
        })
    }
}

impl SourceReader for JdbcReader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        self.splits.extend(splits);
        self.readiness.notify();
        Ok(())
    }

    fn no_more_splits(&mut self) {
        self.no_more = true;
        self.readiness.notify();
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
        loop {
            if self.current.is_none() && !self.start_next()? {
                return Ok(if self.no_more {
                    ReadStatus::Finished
                } else {
                    ReadStatus::Idle(Duration::from_secs(1))
                });
            }
            let Some(cur) = self.current.as_mut() else {
                continue;
            };
            // COPY rows already received make a batch before more are taken (a chunk may
            // hold several batches' rows).
            if let Some(c) = cur.copy.as_mut() {
                c.decoder.drain(&mut c.builders, self.batch_rows)?;
            }
            let full = cur
                .copy
                .as_ref()
                .is_some_and(|c| c.builders.rows() >= self.batch_rows);
            let next = if full {
                None
            } else {
                Some(cur.fetcher.try_next()?)
            };
            let batch = match next {
                None => match cur.copy.as_mut() {
                    Some(c) => Some(c.builders.finish()?),
                    None => None,
                },
                Some(Fetched::Item(Fetch::Batch(batch))) => Some(batch),
                Some(Fetched::Item(Fetch::Copy(chunk))) => {
                    let Some(c) = cur.copy.as_mut() else {
                        return Err(FerryError::internal("Jdbc: COPY data for a MySQL split"));
                    };
                    c.decoder.push_bytes(chunk);
                    // Decoded at the top of the loop.
                    continue;
                }
                Some(Fetched::Empty) => return Ok(ReadStatus::Idle(Duration::from_secs(1))),
                Some(Fetched::Closed) => {
                    // The stream's last rows (every complete one was drained above), then
                    // the next split.
                    let rest = match cur.copy.as_mut() {
                        Some(c) if c.builders.rows() > 0 => Some(c.builders.finish()?),
                        _ => None,
                    };
                    if rest.is_none() {
                        self.current = None;
                        continue;
                    }
                    rest
                }
            };
            if let Some(batch) = batch {
                cur.returned += batch.num_rows() as u64;
                let t = &self.tables[cur.state.table];
                if let (Some(key), Some(last)) = (&t.keyset, batch.num_rows().checked_sub(1)) {
                    cur.last_key = key_literals(self.conn.dialect, &batch, key, last);
                }
                return Ok(ReadStatus::Batch(ChangeBatch::inserts(
                    t.schema.name.clone(),
                    batch,
                )));
            }
        }
    }

    fn readiness(&self) -> Option<Readiness> {
        Some(self.readiness.clone())
    }

    /// Ends the connection kept between splits (MySQL's wants a goodbye; PostgreSQL's
    /// ends when dropped).
    fn close(&mut self) -> Result<()> {
        self.current = None;
        self.ahead = None;
        let mysql = match self.idle.lock() {
            Ok(mut i) => {
                i.pg.clear();
                std::mem::take(&mut i.mysql)
            }
            Err(_) => Vec::new(),
        };
        if !mysql.is_empty() {
            ferry_api::io::handle()?.block_on(async {
                for c in mysql {
                    let _ = c.disconnect().await;
                }
            });
        }
        Ok(())
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Vec<Split>> {
        let mut out = Vec::new();
        if let Some(cur) = &self.current {
            let mut st = cur.state.clone();
            st.skip += cur.returned;
            if cur.returned > 0 {
                // Skipping a count stays right only at the snapshot it was counted in.
                st.after = cur.last_key.clone();
            }
            out.push(Split::typed(cur.split.id.clone(), &st)?);
        }
        // Read ahead, nothing of it returned yet.
        out.extend(self.ahead.iter().map(|a| a.split.clone()));
        out.extend(self.splits.iter().cloned());
        Ok(out)
    }
}

#[cfg(test)]
mod split_tests {
    use super::sampled_predicates;

    #[test]
    fn sampled_bounds_cut_the_key_into_ranges_that_cover_it_once() {
        let sample: Vec<i128> = (1..=100).map(|i| i * i).collect();
        let p = sampled_predicates("k", &sample, 4);
        assert_eq!(
            p,
            [
                "k < 676",
                "k >= 676 AND k < 2601",
                "k >= 2601 AND k < 5776",
                "k >= 5776"
            ]
        );
        // A repeated key bounds one range only; no sample gives one split.
        assert_eq!(
            sampled_predicates("k", &[5, 5, 5, 5, 5, 5], 3),
            ["k < 5", "k >= 5"]
        );
        assert_eq!(sampled_predicates("k", &[], 3), ["k IS NOT NULL"]);
    }
}
