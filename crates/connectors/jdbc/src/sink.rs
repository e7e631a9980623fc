//! The `Jdbc` sink: a user's `query` with parameters, or statements generated from the
//! input's schema (`generate_sink_sql`): inserts, upserts and deletes by key for change
//! data, batched and flushed at every checkpoint; save modes applied in [`Sink::setup`];
//! exactly-once with XA (`is_exactly_once`).
//!
//! # XA
//! Each writer runs its rows since the last checkpoint in one transaction and, at the
//! barrier of checkpoint `N`, prepares it under the id `ferry:<job>:<writer>:<N>:<attempt>`
//! (PostgreSQL `PREPARE TRANSACTION`, MySQL/MariaDB `XA PREPARE`). The committer commits the
//! ids the stored checkpoint lists (an id already committed is fine: commits are
//! idempotent). A writer restored from checkpoint `N` first rolls back its own prepared
//! transactions of checkpoints after `N`, which no stored checkpoint can publish; a fresh
//! writer rolls back all of its own.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::ArrayRef;
use ferry_api::placeholder::substitute_options;
use ferry_api::{
    decode_state, encode_state, ChangeBatch, FerryError, JobContext, OptionSpec, Options,
    ResolveContext, Result, RowKind, Sink, SinkCommitter, SinkDelivery, SinkFactory, SinkWriter,
    TableSchema, Unchanged, WriterContext,
};
use mysql_async::prelude::Queryable;
use serde_json::Value;
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};

use crate::copy::CsvColumns;
use crate::copy_binary::{self, ArrayColumns, BinaryColumns};
use crate::render::{bind_query, push_literal};
use ferry_db::catalog::{literal, pg_rows};
use ferry_db::conn::{
    connect_mysql, connect_pg_lendable, pg_error_text, ConnInfo, Dialect, CONN_OPTIONS,
};
use ferry_db::pg_wire::{PgSocket, WireError};
use ferry_db::types::ddl_type;

const COMPONENT: &str = "sink Jdbc";

const SCHEMA_MODES: &[&str] = &[
    "CREATE_SCHEMA_WHEN_NOT_EXIST",
    "RECREATE_SCHEMA",
    "ERROR_WHEN_SCHEMA_NOT_EXIST",
    "IGNORE",
];
const DATA_MODES: &[&str] = &[
    "APPEND_DATA",
    "DROP_DATA",
    "ERROR_WHEN_DATA_EXISTS",
    "CUSTOM_PROCESSING",
];

const FIELD_IDE: &[&str] = &["ORIGINAL", "UPPERCASE", "LOWERCASE"];

ferry_api::declare_options! {
    /// Where and how one input table is written, read once per input table after its
    /// placeholders (`${table_name}`, `${primary_key}`, …) are replaced.
    struct TargetOptions => TARGET_OPTIONS {
        /// The statement per row, with `?` (fields in order) or `:name` parameters.
        query: String = "query", optional;
        /// Target database (placeholders like ${database_name} allowed).
        database: String = "database", optional;
        /// Target table, `schema.table` on PostgreSQL (placeholders like ${table_name} allowed); default: the input table's name, as SeaTunnel's multi-table sinks.
        table: String = "table", optional;
        /// Target schema, in place of the one `table` names (${schema_name} allowed).
        schema: String = "schema", optional;
        /// Text put before the target table's name (`sink_` makes `t` into `sink_t`).
        prefix: String = "tablePrefix", optional;
        /// Text put after the target table's name.
        suffix: String = "tableSuffix", optional;
        /// Key columns for upserts and deletes (`["${primary_key}"]` takes the input's).
        primary_keys: Vec<String> = "primary_keys", optional;
        /// The statement CUSTOM_PROCESSING runs.
        custom_sql: String = "custom_sql", optional;
    }
}

ferry_api::declare_options! {
    /// The sink's options beside the connection's and the targets'.
    struct SinkOptions => SINK_ONLY {
        /// Generate inserts/upserts/deletes for `database`.`table` from the input's schema.
        generate_sink_sql: bool = "generate_sink_sql", default false;
        /// Write INSERT/UPDATE_AFTER as upserts when keys are known.
        enable_upsert: bool = "enable_upsert", default true;
        /// Accepted; upserts use the dialect's native statement.
        _support_upsert_by_query_primary_key_exist: bool = "support_upsert_by_query_primary_key_exist", default false;
        /// Case of generated identifiers.
        field_ide: String = "field_ide", default "ORIGINAL", one_of FIELD_IDE;
        /// Rows buffered before a flush (also flushed at every checkpoint).
        batch_size: u64 = "batch_size", default 1000;
        /// Retries of a flush that failed transiently (connection lost, deadlock, serialization failure),
        /// with a fresh connection and a pause doubling from 400 ms; not with is_exactly_once.
        max_retries: u64 = "max_retries", default 0;
        /// Exactly-once with XA transactions committed with the checkpoint.
        is_exactly_once: bool = "is_exactly_once", default false;
        /// Accepted (the Java XA data source); XA is native here.
        _xa_data_source_class_name: String = "xa_data_source_class_name", optional;
        /// Attempts to commit a prepared transaction.
        max_commit_attempts: u64 = "max_commit_attempts", default 3;
        /// Accepted for compatibility.
        _transaction_timeout_sec: i64 = "transaction_timeout_sec", default -1;
        /// Accepted for compatibility (each flush commits).
        _auto_commit: bool = "auto_commit", default true;
        /// PostgreSQL: append inserted rows with COPY … FROM STDIN (CSV) instead of INSERT statements (no upsert; deletes by key still run as statements).
        use_copy_statement: bool = "use_copy_statement", default false;
        /// What to do with the target table before the job (generate_sink_sql).
        schema_save_mode: String = "schema_save_mode", default "CREATE_SCHEMA_WHEN_NOT_EXIST", one_of SCHEMA_MODES;
        /// What to do with existing rows before the job.
        data_save_mode: String = "data_save_mode", default "APPEND_DATA", one_of DATA_MODES;
        /// Accepted; created tables get their primary key.
        _create_index: bool = "create_index", default true;
        /// Accepted for compatibility.
        _enable_delete: bool = "enable_delete", default true;
        /// Accepted for compatibility.
        _compatible_mode: String = "compatible_mode", optional;
    }
}

/// Every option of the sink.
pub const SINK_OPTIONS: &[OptionSpec] =
    ferry_api::concat_specs!(CONN_OPTIONS, TARGET_OPTIONS, SINK_ONLY);

/// The spelling in `values` of `v`, which `one_of` has checked is one of them.
fn listed(values: &[&'static str], v: &str) -> &'static str {
    values
        .iter()
        .copied()
        .find(|s| *s == v)
        .unwrap_or(values[0])
}

/// How one input table is written.
#[derive(Debug, Clone)]
struct Target {
    /// The input table's routing name.
    input: Arc<str>,
    /// The input table.
    schema: TableSchema,
    /// The user's statement (`query`), if any.
    query: Option<String>,
    /// The quoted target table (generated statements).
    quoted: String,
    /// Database / schema / table parts of the target.
    parts: (Option<String>, Option<String>, String),
    /// The target's column names, as written (field_ide applied).
    columns: Vec<String>,
    /// Key columns (indices into the input's fields).
    keys: Vec<usize>,
    /// Upsert rather than insert.
    upsert: bool,
    /// Append inserted rows with `COPY … FROM STDIN` (`use_copy_statement`).
    copy: bool,
    schema_mode: &'static str,
    data_mode: &'static str,
    custom_sql: Option<String>,
}

/// The factory of SeaTunnel's `Jdbc` sink.
pub struct JdbcSinkFactory;

fn ide(mode: &str, s: &str) -> String {
    match mode {
        "UPPERCASE" => s.to_uppercase(),
        "LOWERCASE" => s.to_lowercase(),
        _ => s.to_string(),
    }
}

impl SinkFactory for JdbcSinkFactory {
    fn name(&self) -> &'static str {
        "Jdbc"
    }

    fn description(&self) -> &'static str {
        "Writes to PostgreSQL and MySQL/MariaDB: inserts, upserts and deletes by key, save modes, exactly-once with XA"
    }

    fn options(&self) -> &'static [OptionSpec] {
        SINK_OPTIONS
    }

    fn create(
        &self,
        o: &mut Options,
        input: &[TableSchema],
        _job: &JobContext,
    ) -> Result<Arc<dyn Sink>> {
        Ok(Arc::new(self.build(o, input)?))
    }
}

impl JdbcSinkFactory {
    /// The sink `o` configures for `input`.
    pub(crate) fn build(&self, o: &mut Options, input: &[TableSchema]) -> Result<JdbcSink> {
        let conn = ConnInfo::from_options(o)?;
        let d = conn.dialect;
        let own = SinkOptions::read(o)?;
        let generate = own.generate_sink_sql;
        let batch_size = own.batch_size.max(1) as usize;
        let max_retries = own.max_retries;
        let exactly_once = own.is_exactly_once;
        let max_commit_attempts = own.max_commit_attempts.max(1);
        let copy = own.use_copy_statement;
        if copy && d != Dialect::Postgres {
            return Err(o.error(
                "use_copy_statement",
                "is PostgreSQL's COPY; MySQL and MariaDB have none (remove it)",
            ));
        }
        if copy && o.contains("query") {
            return Err(o.error(
                "use_copy_statement",
                "writes generated COPY statements and cannot run a query: remove one of them",
            ));
        }
        let enable_upsert = own.enable_upsert;
        let field_ide = own.field_ide.as_str();
        let schema_mode = listed(SCHEMA_MODES, &own.schema_save_mode);
        let data_mode = listed(DATA_MODES, &own.data_save_mode);
        if exactly_once && max_retries > 0 {
            return Err(o.location().error_with_hint(
                "max_retries",
                "must be 0 with is_exactly_once = true: a retried XA transaction could write its rows twice",
                "remove max_retries or set it to 0, as SeaTunnel requires",
            ));
        }
        if !generate && !o.contains("query") {
            return Err(o.error(
                "query",
                "set query, or generate_sink_sql = true with database and table",
            ));
        }
        if data_mode == "CUSTOM_PROCESSING" && !o.contains("custom_sql") {
            return Err(o.error(
                "custom_sql",
                "is required when data_save_mode = CUSTOM_PROCESSING",
            ));
        }
        let raw = o.raw().clone();
        let mut targets = Vec::new();
        for t in input {
            // Placeholders (${table_name}, ${primary_key}, …) per input table.
            let mut per = Options::new(substitute_options(&raw, t), o.location().clone());
            let TargetOptions {
                query,
                database,
                table,
                schema,
                prefix,
                suffix,
                primary_keys: pks,
                custom_sql,
            } = TargetOptions::read(&mut per)?;
            let schema_override = schema.filter(|s| !s.is_empty());
            let prefix = prefix.unwrap_or_default();
            let suffix = suffix.unwrap_or_default();
            // SeaTunnel's JdbcSinkFactory: no `table` means the input table's own name.
            let table = table.or_else(|| {
                let own = t
                    .catalog
                    .id
                    .as_ref()
                    .map(|id| id.table.clone())
                    .unwrap_or_else(|| t.name.rsplit('.').next().unwrap_or(&t.name).to_string());
                Some(own)
            });
            let table = table.map(|tb| {
                let (schema, name) = match tb.rsplit_once('.') {
                    Some((s, n)) => (Some(s.to_string()), n.to_string()),
                    None => (None, tb.clone()),
                };
                let name = format!("{prefix}{name}{suffix}");
                match schema_override.clone().or(schema) {
                    Some(s) => format!("{s}.{name}"),
                    None => name,
                }
            });
            let names: Vec<String> = t.schema.fields().iter().map(|f| f.name().clone()).collect();
            let key_names: Vec<String> = match pks {
                Some(k) => k
                    .into_iter()
                    .filter(|k| !k.is_empty() && !k.contains("${"))
                    .collect(),
                None => Vec::new(),
            };
            let mut keys = Vec::new();
            for k in &key_names {
                match names.iter().position(|n| n == k) {
                    Some(i) => keys.push(i),
                    None => {
                        return Err(o.error(
                            "primary_keys",
                            format!("'{k}' is not a field of input table '{}'", t.name),
                        ))
                    }
                }
            }
            let (quoted, parts) = if generate && query.is_none() {
                let Some(table) = table.filter(|s| !s.is_empty()) else {
                    return Err(o.error("table", "is required with generate_sink_sql = true"));
                };
                // field_ide changes the table's own name, not its schema or database (as
                // SeaTunnel's dialects quote them).
                let table = match table.rsplit_once('.') {
                    Some((schema, name)) => format!("{schema}.{}", ide(field_ide, name)),
                    None => ide(field_ide, &table),
                };
                let database = database.filter(|s| !s.is_empty());
                let (schema, name) = match table.split_once('.') {
                    Some((s, n)) => (Some(s.to_string()), n.to_string()),
                    None => (None, table.clone()),
                };
                match d {
                    Dialect::Postgres => {
                        let schema = schema.unwrap_or_else(|| "public".into());
                        (
                            d.quote_path(&[schema.as_str(), name.as_str()]),
                            (database, Some(schema), name),
                        )
                    }
                    Dialect::MySql => {
                        let db = schema
                            .or(database)
                            .or_else(|| Some(conn.database.clone()).filter(|s| !s.is_empty()));
                        match db {
                            Some(db) => (
                                d.quote_path(&[db.as_str(), name.as_str()]),
                                (Some(db), None, name),
                            ),
                            None => (d.quote(&name), (None, None, name)),
                        }
                    }
                }
            } else {
                (String::new(), (None, None, String::new()))
            };
            targets.push(Target {
                input: t.name.clone(),
                schema: t.clone(),
                query,
                quoted,
                parts,
                columns: names.iter().map(|n| ide(field_ide, n)).collect(),
                // COPY appends: as SeaTunnel's copy writer, it does not upsert.
                upsert: enable_upsert && !keys.is_empty() && !copy,
                copy,
                keys,
                schema_mode,
                data_mode,
                custom_sql,
            });
        }
        for s in TARGET_OPTIONS {
            let _ = o.get(s.name);
        }
        o.finish(SINK_OPTIONS)?;
        Ok(JdbcSink {
            conn: Arc::new(conn),
            targets: Arc::new(targets),
            generate,
            batch_size,
            exactly_once,
            max_retries,
            max_commit_attempts,
        })
    }
}

/// A configured `Jdbc` sink.
#[derive(Debug)]
pub struct JdbcSink {
    conn: Arc<ConnInfo>,
    targets: Arc<Vec<Target>>,
    generate: bool,
    batch_size: usize,
    exactly_once: bool,
    /// Retries of a flush that failed transiently (never with XA).
    max_retries: u64,
    max_commit_attempts: u64,
}

/// How many writer indexes a resumed job's fencing covers (a sink of more writers leaves
/// the sessions of the ones beyond unfenced).
const FENCED_WRITERS: usize = 64;

/// Ends the sessions named `names` other than this connection (earlier runs' writers,
/// whose processes are gone but whose statements may still run on the server and would
/// land after the new run's): on PostgreSQL those whose `application_name` is one of them
/// (`pg_terminate_backend`, waiting up to 10 s each); on MySQL/MariaDB the holders of those
/// named locks (`KILL`). A failure (no right to end them) is logged, and the job goes on
/// as before.
async fn fence_sessions(c: &mut Conn, names: &[String]) {
    let ended = match c {
        Conn::Pg(client, _) => {
            let list: Vec<String> = names
                .iter()
                .map(|n| literal(Dialect::Postgres, n))
                .collect();
            let sql = format!(
                "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity \
                 WHERE application_name IN ({}) AND pid <> pg_backend_pid()",
                list.join(", ")
            );
            pg_rows(client, &sql, COMPONENT).await.map(|rows| {
                rows.first()
                    .and_then(|r| r.first().cloned().flatten())
                    .unwrap_or_default()
                    != "0"
            })
        }
        Conn::My(conn) => {
            let fenced = async {
                let mut killed = false;
                for n in names {
                    let holder: Option<Option<u64>> = conn
                        .query_first(format!(
                            "SELECT IF(IS_USED_LOCK({0}) = CONNECTION_ID(), NULL, IS_USED_LOCK({0}))",
                            literal(Dialect::MySql, n)
                        ))
                        .await?;
                    if let Some(id) = holder.flatten() {
                        killed |= conn.query_drop(format!("KILL {id}")).await.is_ok();
                    }
                }
                Ok::<bool, mysql_async::Error>(killed)
            };
            fenced
                .await
                .map_err(|e| FerryError::external(COMPONENT, e.to_string()))
        }
    };
    match ended {
        Ok(true) => tracing::info!("{COMPONENT}: ended sessions of an earlier run's writers"),
        Ok(false) => {}
        Err(e) => tracing::warn!(
            "{COMPONENT}: cannot end the sessions of an earlier run's writers ({e}); rows they were still writing may land late"
        ),
    }
}

/// On MySQL/MariaDB a writer's connection holds its named lock (without waiting: a lock
/// held elsewhere is left alone), by which a later run finds it.
async fn take_name(c: &mut Conn, name: &str) {
    if let Conn::My(conn) = c {
        let sql = format!("SELECT GET_LOCK({}, 0)", literal(Dialect::MySql, name));
        if let Err(e) = conn.query_drop(sql).await {
            tracing::warn!("{COMPONENT}: cannot take the writer's lock {name}: {e}");
        }
    }
}

/// A connection of either dialect.
enum Conn {
    /// With the lender of its socket for COPY (none on a Unix socket).
    Pg(tokio_postgres::Client, Option<PgSocket>),
    My(mysql_async::Conn),
}

impl Conn {
    async fn open(info: &ConnInfo) -> Result<Conn> {
        Ok(match info.dialect {
            Dialect::Postgres => {
                let (client, socket) = connect_pg_lendable(info, COMPONENT).await?;
                Conn::Pg(client, socket)
            }
            Dialect::MySql => Conn::My(connect_mysql(info, COMPONENT).await?),
        })
    }

    /// Switches a PostgreSQL session to asynchronous commits (see [`AsyncCommits`]) and
    /// returns when the server started.
    async fn lazy_commits(&mut self) -> Result<String> {
        self.exec("SET synchronous_commit = off").await?;
        let started = self
            .column("SELECT pg_postmaster_start_time()::text")
            .await?;
        Ok(started.into_iter().next().flatten().unwrap_or_default())
    }

    /// Waits until every transaction this session (or any other) committed is on disk: a
    /// synchronous commit of a transaction with an id flushes the WAL up to its own commit
    /// record, which follows theirs.
    async fn sync_commits(&mut self) -> Result<()> {
        self.exec("BEGIN; SET LOCAL synchronous_commit = on; SELECT txid_current(); COMMIT")
            .await
    }

    /// Runs `sql` (one or more statements).
    async fn exec(&mut self, sql: &str) -> Result<()> {
        self.exec_classified(sql).await.map_err(|(e, _)| e)
    }

    /// Runs `sql`, telling a transient failure (the connection was lost, a deadlock or a
    /// serialization failure: the same statements may succeed when sent again) from one
    /// that would fail again (a syntax error, a constraint, a type that does not fit).
    async fn exec_classified(&mut self, sql: &str) -> std::result::Result<(), (FerryError, bool)> {
        match self {
            Conn::Pg(c, _) => c.batch_execute(sql).await.map_err(|e| pg_failure(&e, sql)),
            Conn::My(c) => c.query_drop(sql).await.map_err(|e| {
                // 1213 deadlock, 1205 lock wait timeout, 2006/2013 server gone; I/O and
                // driver errors are a lost connection.
                let transient = match &e {
                    mysql_async::Error::Server(s) => matches!(s.code, 1205 | 1213 | 2006 | 2013),
                    mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => true,
                    _ => false,
                };
                (
                    FerryError::external(COMPONENT, format!("{e}: {}", shorten(sql))),
                    transient,
                )
            }),
        }
    }

    /// Runs a flush's statements and sends its rows into COPY streams, in order, classified
    /// as [`Conn::exec_classified`] does. A statement, or rows for another COPY, first end
    /// the open stream; so does `end` (a checkpoint or the writer's close), and a stream
    /// past [`COPY_STREAM_BYTES`].
    async fn run_parts(
        &mut self,
        parts: &[Part],
        stream: &mut Option<CopyStream>,
        streams: &mut u64,
        keep: bool,
        end: bool,
    ) -> std::result::Result<(), (FerryError, bool)> {
        for part in parts {
            match (part, &mut *self) {
                (Part::Sql(sql), c) => {
                    end_copy(stream).await?;
                    c.exec_classified(sql).await?
                }
                (Part::Copy { sql, binary, data }, Conn::Pg(c, socket)) => {
                    if stream.as_ref().is_some_and(|s| s.sql != *sql) {
                        end_copy(stream).await?;
                    }
                    let open = match stream {
                        Some(s) => s,
                        None => {
                            *streams += 1;
                            stream.insert(
                                CopyStream::open((c, socket), *streams, sql, *binary, keep).await?,
                            )
                        }
                    };
                    open.send(data.clone()).await?;
                }
                (Part::Insert { sql, params }, Conn::Pg(c, _)) => {
                    end_copy(stream).await?;
                    let typed: Vec<(&(dyn ToSql + Sync), Type)> = params
                        .iter()
                        .map(|p| (p as &(dyn ToSql + Sync), p.ty.clone()))
                        .collect();
                    c.execute_typed(sql, &typed)
                        .await
                        .map_err(|e| pg_failure(&e, sql))?;
                }
                (Part::Copy { .. } | Part::Insert { .. }, Conn::My(_)) => {
                    return Err((
                        FerryError::internal("COPY or array parameters on a MySQL connection"),
                        false,
                    ))
                }
            }
        }
        if end
            || stream
                .as_ref()
                .is_some_and(|s| s.bytes >= COPY_STREAM_BYTES)
        {
            end_copy(stream).await?;
        }
        Ok(())
    }

    /// The first column of every row of `sql`, as text.
    async fn column(&mut self, sql: &str) -> Result<Vec<Option<String>>> {
        match self {
            Conn::Pg(c, _) => Ok(pg_rows(c, sql, COMPONENT)
                .await?
                .into_iter()
                .map(|r| r.into_iter().next().flatten())
                .collect()),
            Conn::My(c) => {
                let rows: Vec<mysql_async::Row> = c
                    .query(sql)
                    .await
                    .map_err(|e| FerryError::external(COMPONENT, format!("{e}: {sql}")))?;
                Ok(rows
                    .iter()
                    .map(|r| match r.as_ref(0) {
                        Some(mysql_async::Value::Bytes(b)) => {
                            Some(String::from_utf8_lossy(b).into_owned())
                        }
                        Some(mysql_async::Value::Int(n)) => Some(n.to_string()),
                        Some(mysql_async::Value::UInt(n)) => Some(n.to_string()),
                        _ => None,
                    })
                    .collect())
            }
        }
    }
}

/// Whether a PostgreSQL error may pass when the same statements are sent again: 40001
/// serialization failure, 40P01 deadlock, class 08 connection exceptions, 57P01-03 the
/// server shutting down or restarting, or a closed connection.
fn pg_transient(e: &tokio_postgres::Error) -> bool {
    e.is_closed() || e.code().is_some_and(|c| transient_sqlstate(c.code()))
}

/// A failed PostgreSQL statement: Ferry's error, naming the statement's start, and
/// whether it is [`pg_transient`].
fn pg_failure(e: &tokio_postgres::Error, sql: &str) -> (FerryError, bool) {
    let err = FerryError::external(COMPONENT, format!("{}: {}", pg_error_text(e), shorten(sql)));
    (err, pg_transient(e))
}

/// The SQLSTATEs [`pg_transient`] takes for passing.
fn transient_sqlstate(c: &str) -> bool {
    c == "40001" || c == "40P01" || c.starts_with("08") || c.starts_with("57P0")
}

/// Targets a binary COPY was started for, so that tests can tell which format ran.
#[cfg(test)]
pub(crate) static BINARY_COPIES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Targets an INSERT with array parameters was started for, so that tests can tell.
#[cfg(test)]
pub(crate) static ARRAY_INSERTS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The type OIDs of a generated target's columns, in the order they are written, for
/// binary COPY and array parameters; `None` (CSV, or INSERTs with literals, are written
/// then) when the table cannot be read now (it may be created later, by another writer's
/// setup) or lacks a column (the statement then fails naming it).
async fn column_types(c: &tokio_postgres::Client, t: &Target) -> Option<Vec<u32>> {
    let rows = c
        .query(
            "SELECT attname::text, atttypid FROM pg_attribute WHERE attrelid = $1::text::regclass AND attnum > 0 AND NOT attisdropped",
            &[&t.quoted],
        )
        .await
        .map_err(|e| tracing::debug!(table = %t.quoted, error = %pg_error_text(&e), "Jdbc: COPY target's column types not read; writing CSV"))
        .ok()?;
    let by_name: HashMap<String, u32> = rows
        .iter()
        .filter_map(|r| {
            Some((
                r.try_get::<_, String>(0).ok()?,
                r.try_get::<_, u32>(1).ok()?,
            ))
        })
        .collect();
    t.columns.iter().map(|c| by_name.get(c).copied()).collect()
}

/// A statement shown in an error: its start, so that a batch of rows does not flood the log.
fn shorten(sql: &str) -> String {
    if sql.len() <= 300 {
        sql.to_string()
    } else {
        let mut end = 300;
        while !sql.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}… ({} bytes)", &sql[..end], sql.len())
    }
}

fn block_on<T>(fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    ferry_api::io::handle()?.block_on(fut)
}

impl JdbcSink {
    /// The name of writer `subtask`'s sessions: the job, the writer and a digest of the
    /// target tables, so that jobs that share an id but write elsewhere never meet.
    pub(crate) fn session_name(&self, job_id: &str, subtask: usize) -> String {
        // FNV-1a: stable across builds, unlike the standard library's hasher.
        let mut h: u32 = 0x811c_9dc5;
        for t in self.targets.iter() {
            for b in t
                .quoted
                .bytes()
                .chain(t.query.as_deref().unwrap_or("").bytes())
            {
                h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
            }
        }
        let job: String = job_id.chars().take(40).collect();
        format!("ferry:{job}:{subtask}:sink:{h:08x}")
    }

    async fn exists(&self, c: &mut Conn, t: &Target) -> Result<bool> {
        let (db, schema, name) = &t.parts;
        let sql = match self.conn.dialect {
            Dialect::Postgres => format!(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = {} AND table_name = {}",
                literal(Dialect::Postgres, schema.as_deref().unwrap_or("public")),
                literal(Dialect::Postgres, name)
            ),
            Dialect::MySql => format!(
                "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {}",
                match db {
                    Some(db) => literal(Dialect::MySql, db),
                    None => "DATABASE()".into(),
                },
                literal(Dialect::MySql, name)
            ),
        };
        Ok(!c.column(&sql).await?.is_empty())
    }

    fn create_sql(&self, t: &Target) -> Result<String> {
        let d = self.conn.dialect;
        let same = t
            .schema
            .catalog
            .id
            .as_ref()
            .is_some_and(|id| id.catalog == d.catalog_name());
        let mut cols = Vec::new();
        for (f, name) in t.schema.schema.fields().iter().zip(&t.columns) {
            let info = t.schema.catalog.columns.get(f.name());
            let ty = ddl_type(
                d,
                f.data_type(),
                info.and_then(|i| i.source_type.as_deref()),
                same,
                info.and_then(|i| i.length),
            )
            .map_err(|m| FerryError::config(format!("{COMPONENT}: column '{}': {m}", f.name())))?;
            let key = t
                .keys
                .iter()
                .any(|k| t.schema.schema.field(*k).name() == f.name())
                || t.schema.primary_key_columns().contains(f.name());
            let null = if f.is_nullable() && !key {
                ""
            } else {
                " NOT NULL"
            };
            cols.push(format!("{} {ty}{null}", d.quote(name)));
        }
        let pk: Vec<String> = if !t.keys.is_empty() {
            t.keys.iter().map(|k| d.quote(&t.columns[*k])).collect()
        } else {
            t.schema
                .primary_key_columns()
                .iter()
                .map(|c| d.quote(&c.to_string()))
                .collect()
        };
        if !pk.is_empty() {
            cols.push(format!("PRIMARY KEY ({})", pk.join(", ")));
        }
        Ok(format!("CREATE TABLE {} ({})", t.quoted, cols.join(", ")))
    }

    async fn setup_target(&self, c: &mut Conn, t: &Target, resumed: bool) -> Result<()> {
        let d = self.conn.dialect;
        let mut exists = self.exists(c, t).await?;
        if !resumed && t.schema_mode == "RECREATE_SCHEMA" && exists {
            c.exec(&format!("DROP TABLE {}", t.quoted)).await?;
            exists = false;
        }
        if !exists {
            match t.schema_mode {
                "ERROR_WHEN_SCHEMA_NOT_EXIST" => {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!(
                        "table {} does not exist (schema_save_mode = ERROR_WHEN_SCHEMA_NOT_EXIST)",
                        t.quoted
                    ),
                    ))
                }
                "IGNORE" => return Ok(()),
                _ => {
                    match (d, &t.parts) {
                        (Dialect::Postgres, (_, Some(s), _)) => {
                            c.exec(&format!("CREATE SCHEMA IF NOT EXISTS {}", d.quote(s)))
                                .await?
                        }
                        (Dialect::MySql, (Some(db), _, _)) => {
                            c.exec(&format!("CREATE DATABASE IF NOT EXISTS {}", d.quote(db)))
                                .await?
                        }
                        _ => {}
                    }
                    c.exec(&self.create_sql(t)?).await?;
                    return Ok(());
                }
            }
        }
        if resumed {
            return Ok(());
        }
        match t.data_mode {
            "DROP_DATA" => c.exec(&format!("DELETE FROM {}", t.quoted)).await?,
            "ERROR_WHEN_DATA_EXISTS" => {
                let rows = c
                    .column(&format!("SELECT 1 FROM {} LIMIT 1", t.quoted))
                    .await?;
                if !rows.is_empty() {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!(
                            "table {} has data (data_save_mode = ERROR_WHEN_DATA_EXISTS)",
                            t.quoted
                        ),
                    ));
                }
            }
            "CUSTOM_PROCESSING" => {
                if let Some(sql) = &t.custom_sql {
                    c.exec(sql).await?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl Sink for JdbcSink {
    fn delivery(&self) -> SinkDelivery {
        if self.exactly_once || (self.generate && self.targets.iter().all(|t| t.upsert)) {
            SinkDelivery::ExactlyOnce
        } else {
            SinkDelivery::AtLeastOnce
        }
    }

    fn delivery_reason(&self) -> Option<String> {
        Some(if self.exactly_once {
            "exactly-once: XA transactions prepared at each checkpoint barrier and committed with the checkpoint".into()
        } else if self.targets.iter().any(|t| t.copy) {
            "at-least-once: use_copy_statement appends with COPY, so rows written again after a restart are appended again (or fail on the table's primary key); set is_exactly_once for transactions".into()
        } else if self.delivery() == SinkDelivery::ExactlyOnce {
            "exactly-once in effect: upserts by primary key, so rows written again after a restart converge".into()
        } else {
            "at-least-once: plain inserts are written again after a restart (set primary_keys for upserts, or is_exactly_once for XA)".into()
        })
    }

    fn setup(&self, ctx: &ResolveContext) -> Result<()> {
        if !self.generate && !ctx.resumed {
            return Ok(());
        }
        let what = format!("preparing the target tables on {}", self.conn.address());
        ctx.block_on(&what, async {
            let mut c = Conn::open(&self.conn).await?;
            let named = self.conn.dialect == Dialect::MySql
                || !self.conn.properties.contains_key("ApplicationName");
            if ctx.resumed && named {
                let names: Vec<String> = (0..FENCED_WRITERS)
                    .map(|i| self.session_name(&ctx.job.job_id, i))
                    .collect();
                fence_sessions(&mut c, &names).await;
            }
            if self.generate {
                for t in self.targets.iter().filter(|t| t.query.is_none()) {
                    self.setup_target(&mut c, t, ctx.resumed).await?;
                }
            }
            Ok(())
        })
    }

    fn create_writer(
        &self,
        ctx: &WriterContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        // Each writer's PostgreSQL sessions carry a name of their own (unless the job sets
        // ApplicationName), so that a new writer can end the sessions of the one it
        // replaces: a process killed in the middle of a flush leaves its statement running
        // on the server, which would otherwise apply old rows after the new run's.
        // Each writer's sessions carry a name (PostgreSQL's application_name, unless the
        // job sets ApplicationName; a MySQL named lock), by which the setup of a resumed
        // run ends an earlier run's sessions (see `fence_sessions`).
        let mut info = (*self.conn).clone();
        let own_name = info.properties.contains_key("ApplicationName");
        let session = self.session_name(&ctx.job.job_id, ctx.subtask);
        let fence = (info.dialect == Dialect::MySql || !own_name).then_some(session);
        if let (Some(name), Dialect::Postgres) = (&fence, info.dialect) {
            info.properties
                .insert("ApplicationName".into(), name.clone());
        }
        let info = Arc::new(info);
        let conn = info.clone();
        let name = fence.clone();
        let lazy = info.dialect == Dialect::Postgres && !self.exactly_once;
        let targets = self.targets.clone();
        let (mut c, async_commits, copy_types) = block_on(async move {
            let mut c = Conn::open(&conn).await?;
            if let Some(name) = &name {
                take_name(&mut c, name).await;
            }
            let mut copy_types = Vec::with_capacity(targets.len());
            for t in targets.iter() {
                copy_types.push(match &c {
                    Conn::Pg(client, _) if t.query.is_none() => column_types(client, t).await,
                    _ => None,
                });
            }
            let async_commits = if lazy {
                Some(AsyncCommits {
                    server_started: c.lazy_commits().await?,
                    unsynced: 0,
                })
            } else {
                None
            };
            Ok((c, async_commits, copy_types))
        })?;
        let prefix = format!("ferry:{}:{}:", ctx.job.job_id, ctx.subtask);
        let restored: Option<WriterState> = restored
            .map(|v| decode_state(&v, "a Jdbc writer"))
            .transpose()?;
        let last_checkpoint = restored.map(|w| w.checkpoint);
        if self.exactly_once {
            let after = last_checkpoint;
            block_on(rollback_own(&mut c, self.conn.dialect, &prefix, after))?;
        }
        Ok(Box::new(JdbcWriter {
            dialect: self.conn.dialect,
            conn_info: info,
            fence,
            conn: c,
            targets: self.targets.clone(),
            by_name: self
                .targets
                .iter()
                .enumerate()
                .map(|(i, t)| (t.input.clone(), i))
                .collect(),
            batch_size: self.batch_size,
            exactly_once: self.exactly_once,
            max_retries: self.max_retries,
            xid_prefix: prefix,
            attempt: ctx
                .attempt
                .chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .take(16)
                .collect(),
            pending: Vec::new(),
            pending_rows: 0,
            in_tx: false,
            last_checkpoint,
            mysql_xid: None,
            async_commits,
            array_types: copy_types
                .iter()
                .zip(self.targets.iter())
                .map(|(types, t)| {
                    // (`copy_types` holds only targets without `query`.)
                    let types = types.as_ref().filter(|_| !t.copy)?;
                    types
                        .iter()
                        .map(|&o| Type::from_oid(copy_binary::oid::array_of(o)?))
                        .collect()
                })
                .collect(),
            copy_types,
            copy: None,
            copy_streams: 0,
        }))
    }

    fn create_committer(&self) -> Result<Option<Box<dyn SinkCommitter>>> {
        if !self.exactly_once {
            return Ok(None);
        }
        Ok(Some(Box::new(XaCommitter {
            conn: self.conn.clone(),
            c: None,
            attempts: self.max_commit_attempts,
        })))
    }
}

/// Prepared transactions of this writer (ids starting `prefix`) of checkpoints after
/// `after` (all when `None`), rolled back.
async fn rollback_own(c: &mut Conn, d: Dialect, prefix: &str, after: Option<u64>) -> Result<()> {
    let ids: Vec<String> = match d {
        Dialect::Postgres => c
            .column(&format!("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE {} AND database = current_database()", literal(d, &format!("{}%", like_escape(prefix)))))
            .await?
            .into_iter()
            .flatten()
            .collect(),
        Dialect::MySql => {
            let Conn::My(my) = c else { return Ok(()) };
            let rows: Vec<mysql_async::Row> = my.query("XA RECOVER").await.map_err(|e| FerryError::external(COMPONENT, format!("XA RECOVER: {e}")))?;
            rows.iter()
                .filter_map(|r| match r.as_ref(3) {
                    Some(mysql_async::Value::Bytes(b)) => Some(String::from_utf8_lossy(b).into_owned()),
                    _ => None,
                })
                .filter(|g| g.starts_with(prefix))
                .collect()
        }
    };
    for id in ids {
        let cp = id[prefix.len()..]
            .split(':')
            .next()
            .and_then(|s| s.parse::<u64>().ok());
        if after.is_some_and(|a| cp.is_some_and(|cp| cp <= a)) {
            continue; // a stored checkpoint's: the committer publishes it
        }
        tracing::info!("Jdbc: rolling back prepared transaction {id} left by an earlier run");
        let sql = match d {
            Dialect::Postgres => format!("ROLLBACK PREPARED {}", literal(d, &id)),
            Dialect::MySql => format!("XA ROLLBACK {}", literal(d, &id)),
        };
        c.exec(&sql).await?;
    }
    Ok(())
}

fn like_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// One statement's worth of rows waiting to be written.
enum Op {
    /// Rows inserted or upserted (by key, the last row of a key wins).
    Write {
        target: usize,
        rows: Vec<String>,
        keys: HashMap<String, usize>,
    },
    /// Rows inserted or upserted on PostgreSQL as one binary array per column, which one
    /// `INSERT … SELECT * FROM ROWS FROM (unnest($1), …)` sends as parameters: the server
    /// parses no SQL text per row, and Ferry renders none. `keys`: the binary keys of the
    /// rows (upserts), since one statement may not touch a key twice.
    Insert {
        target: usize,
        arrays: ArrayColumns,
        keys: HashSet<Vec<u8>>,
    },
    /// Keys deleted.
    Delete { target: usize, keys: Vec<String> },
    /// Statements of the user's query.
    Query { statements: Vec<String> },
    /// Rows appended with COPY: CSV lines, or binary rows after the binary header.
    Copy {
        target: usize,
        data: Vec<u8>,
        binary: bool,
    },
}

/// What one flush sends, in order: statements (several joined in one round trip), and
/// rows for a COPY stream (see [`CopyStream`]).
#[derive(Clone)]
enum Part {
    Sql(String),
    /// A statement with array parameters ([`Op::Insert`]).
    Insert {
        sql: String,
        params: Arc<Vec<ArrayParam>>,
    },
    Copy {
        sql: String,
        binary: bool,
        data: bytes::Bytes,
    },
}

/// One column's values as a binary array parameter of type `ty`, sent as they are.
#[derive(Debug)]
struct ArrayParam {
    ty: Type,
    bytes: Vec<u8>,
}

impl ToSql for ArrayParam {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&self.bytes);
        Ok(IsNull::No)
    }

    // The statement is sent with `ty` as the parameter's type (`execute_typed`).
    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Bytes of array parameters past which a statement is sent and the next rows start
/// another: arrays stay far below PostgreSQL's 1 GB limit for one value.
const INSERT_ARRAY_BYTES: usize = 64 << 20;

/// A stream of rows left open past a flush: each flush sends its rows into one `COPY …
/// FROM STDIN`, which ends (committing its rows, or adding them to the checkpoint's
/// transaction) at the checkpoint, when the writer closes, before any statement on the
/// same connection, and after [`COPY_STREAM_BYTES`]. One COPY per checkpoint instead of
/// one per `batch_size` rows: the server parses rows while the writer encodes the next
/// ones, and a statement's start, end and commit are paid once.
struct CopyStream {
    /// Which stream this is, so that a retry resends only the one its flush began with.
    serial: u64,
    sql: String,
    binary: bool,
    to: CopyTo,
    /// Everything sent (the binary header first), kept to send again on a fresh connection
    /// when a transient failure ends the stream; only with `max_retries`.
    sent: Option<Vec<bytes::Bytes>>,
    bytes: usize,
}

/// Where a COPY's rows go: straight onto the connection's socket, lent out of the driver
/// for the COPY's length (see `ferry_db::pg_wire`: the sink's thread writes them, with no
/// hop through the driver's task), or through the driver on a Unix socket.
enum CopyTo {
    /// `None` once the COPY has ended.
    Wire(Option<ferry_db::pg_wire::LentSocket>),
    Driver(std::pin::Pin<Box<tokio_postgres::CopyInSink<bytes::Bytes>>>),
}

/// Bytes after which an open COPY ends even before the checkpoint, so that rows of a long
/// batch job become visible and a retry's copy of the stream stays bounded.
const COPY_STREAM_BYTES: usize = 64 << 20;

impl CopyStream {
    async fn open(
        (c, socket): (&tokio_postgres::Client, &Option<PgSocket>),
        serial: u64,
        sql: &str,
        binary: bool,
        keep: bool,
    ) -> std::result::Result<CopyStream, (FerryError, bool)> {
        let lent = match socket {
            Some(s) => s.lend(c).await,
            None => None,
        };
        let to = match lent {
            Some(mut lent) => {
                lent.copy_in(sql).await.map_err(|e| wire_error(e, sql))?;
                CopyTo::Wire(Some(lent))
            }
            None => CopyTo::Driver(Box::pin(
                c.copy_in::<_, bytes::Bytes>(sql)
                    .await
                    .map_err(|e| copy_error(&e, sql))?,
            )),
        };
        let mut s = CopyStream {
            serial,
            sql: sql.to_string(),
            binary,
            to,
            sent: keep.then(Vec::new),
            bytes: 0,
        };
        if binary {
            s.send(bytes::Bytes::from_static(copy_binary::HEADER))
                .await?;
        }
        Ok(s)
    }

    /// A stream opened on a fresh connection with everything a lost one had sent (`sent`,
    /// the binary header included), for a retry.
    async fn reopen(
        c: (&tokio_postgres::Client, &Option<PgSocket>),
        serial: u64,
        sql: &str,
        binary: bool,
        sent: &[bytes::Bytes],
    ) -> std::result::Result<CopyStream, (FerryError, bool)> {
        // Opened as CSV so that no second header goes out: the first of `sent` is it.
        let mut s = CopyStream::open(c, serial, sql, false, true).await?;
        s.binary = binary;
        for data in sent {
            s.send(data.clone()).await?;
        }
        Ok(s)
    }

    async fn send(&mut self, data: bytes::Bytes) -> std::result::Result<(), (FerryError, bool)> {
        use futures_util::SinkExt;
        self.bytes += data.len();
        if let Some(sent) = &mut self.sent {
            sent.push(data.clone());
        }
        let sql = &self.sql;
        match &mut self.to {
            CopyTo::Wire(Some(lent)) => lent
                .copy_in_data(&data)
                .await
                .map_err(|e| wire_error(e, sql)),
            CopyTo::Wire(None) => Err((
                FerryError::internal(format!("rows sent after the COPY ended: {sql}")),
                false,
            )),
            CopyTo::Driver(sink) => sink.send(data).await.map_err(|e| copy_error(&e, sql)),
        }
    }

    /// Abandons the COPY: the server drops its rows, and the connection goes on.
    async fn abandon(self) {
        match self.to {
            CopyTo::Wire(Some(socket)) => socket.copy_in_fail("the writer aborted").await,
            // Dropped unfinished, the driver's COPY sends the server `CopyFail`.
            CopyTo::Wire(None) | CopyTo::Driver(_) => {}
        }
    }

    /// Ends the COPY; the server then reports any row it refused.
    async fn finish(&mut self) -> std::result::Result<u64, (FerryError, bool)> {
        use futures_util::SinkExt;
        let sql = &self.sql;
        match &mut self.to {
            CopyTo::Wire(lent) => {
                let Some(mut socket) = lent.take() else {
                    return Err((
                        FerryError::internal(format!("a COPY ended twice: {sql}")),
                        false,
                    ));
                };
                if self.binary {
                    socket
                        .copy_in_data(copy_binary::TRAILER)
                        .await
                        .map_err(|e| wire_error(e, sql))?;
                }
                match socket.copy_in_done().await {
                    Ok(rows) => {
                        socket.give_back();
                        Ok(rows)
                    }
                    // The server is idle again after refusing the rows: the connection
                    // goes on. After a lost connection `socket` is dropped, closing it.
                    Err(e @ WireError::Server { .. }) => {
                        socket.give_back();
                        Err(wire_error(e, sql))
                    }
                    Err(e) => Err(wire_error(e, sql)),
                }
            }
            CopyTo::Driver(sink) => {
                if self.binary {
                    sink.feed(bytes::Bytes::from_static(copy_binary::TRAILER))
                        .await
                        .map_err(|e| copy_error(&e, sql))?;
                }
                sink.as_mut()
                    .finish()
                    .await
                    .map_err(|e| copy_error(&e, sql))
            }
        }
    }
}

fn copy_error(e: &tokio_postgres::Error, sql: &str) -> (FerryError, bool) {
    (
        FerryError::external(COMPONENT, format!("{}: {sql}", pg_error_text(e))),
        pg_transient(e),
    )
}

/// A failed COPY on a lent socket, classified as [`pg_transient`] does.
fn wire_error(e: WireError, sql: &str) -> (FerryError, bool) {
    let transient = match &e {
        WireError::Server { code, .. } => transient_sqlstate(code),
        WireError::Io(_) => true,
    };
    (
        FerryError::external(COMPONENT, format!("{e}: {sql}")),
        transient,
    )
}

/// Ends `stream`'s COPY, if one is open. One that fails stays, for a retry to send its
/// rows again (see [`JdbcWriter::send_pending`]).
async fn end_copy(stream: &mut Option<CopyStream>) -> std::result::Result<(), (FerryError, bool)> {
    if let Some(s) = stream {
        s.finish().await?;
        *stream = None;
    }
    Ok(())
}

struct JdbcWriter {
    dialect: Dialect,
    conn_info: Arc<ConnInfo>,
    /// The name fencing this writer's earlier sessions (see `fence_sessions`), if any.
    fence: Option<String>,
    conn: Conn,
    targets: Arc<Vec<Target>>,
    by_name: HashMap<Arc<str>, usize>,
    batch_size: usize,
    exactly_once: bool,
    /// Retries of a flush that failed transiently (never with XA).
    max_retries: u64,
    xid_prefix: String,
    attempt: String,
    pending: Vec<Op>,
    pending_rows: usize,
    in_tx: bool,
    last_checkpoint: Option<u64>,
    /// The id the open MySQL XA transaction was started with.
    mysql_xid: Option<String>,
    /// PostgreSQL without XA: flushes commit without waiting for the disk (see
    /// [`AsyncCommits`]).
    async_commits: Option<AsyncCommits>,
    /// Per generated target on PostgreSQL: its columns' type OIDs, for binary COPY and
    /// array parameters ([`crate::copy_binary`]); `None` when they could not be read (CSV,
    /// or INSERTs with literals, are written then).
    copy_types: Vec<Option<Vec<u32>>>,
    /// Per target: the array types of its columns, when every one has one
    /// ([`copy_binary::oid::array_of`]) and INSERTs may send them ([`Op::Insert`]).
    array_types: Vec<Option<Vec<Type>>>,
    /// The COPY left open by the last flush, if any.
    copy: Option<CopyStream>,
    /// COPY streams opened so far (their serial numbers).
    copy_streams: u64,
}

/// A PostgreSQL writer's flushes between checkpoints commit with `synchronous_commit =
/// off`: the server's WAL writer puts them on disk within a fraction of a second, and the
/// flush does not wait for that (about 5 ms a commit here: with `batch_size` 1000 that was
/// most of a 2M-row copy's time). At each checkpoint barrier one synchronous commit waits
/// until every earlier commit is on disk, so a completed checkpoint still covers only rows
/// that are durable. What async commits can lose is what a server crash loses of the last
/// moments: a writer that meets a restarted server (a new `pg_postmaster_start_time()`)
/// with commits not yet known to be durable fails, and the job restores its last
/// checkpoint, which writes them again.
struct AsyncCommits {
    /// `pg_postmaster_start_time()` when the session was opened.
    server_started: String,
    /// Flushes committed since the last synchronous commit.
    unsynced: u64,
}

/// The clause that makes an INSERT an upsert on the quoted key columns `keys`, setting the
/// quoted non-key columns `others` (a key-only row: nothing to set).
fn upsert_clause(d: Dialect, keys: &[String], others: &[&String]) -> String {
    match d {
        Dialect::Postgres if others.is_empty() => {
            format!(" ON CONFLICT ({}) DO NOTHING", keys.join(", "))
        }
        Dialect::Postgres => {
            let sets: Vec<String> = others
                .iter()
                .map(|c| format!("{c} = EXCLUDED.{c}"))
                .collect();
            format!(
                " ON CONFLICT ({}) DO UPDATE SET {}",
                keys.join(", "),
                sets.join(", ")
            )
        }
        Dialect::MySql => {
            // MySQL has no DO NOTHING: a key-only row sets its key to itself.
            let set_cols: Vec<&String> = if others.is_empty() {
                keys.iter().collect()
            } else {
                others.to_vec()
            };
            let sets: Vec<String> = set_cols
                .iter()
                .map(|c| format!("{c} = VALUES({c})"))
                .collect();
            format!(" ON DUPLICATE KEY UPDATE {}", sets.join(", "))
        }
    }
}

impl JdbcWriter {
    fn row_tuple(&self, cols: &[ArrayRef], idx: &[usize], i: usize) -> Result<String> {
        let mut s = String::from("(");
        for (n, c) in idx.iter().enumerate() {
            if n > 0 {
                s.push_str(", ");
            }
            push_literal(&mut s, self.dialect, cols[*c].as_ref(), i)
                .map_err(|m| FerryError::data(COMPONENT, m))?;
        }
        s.push(')');
        Ok(s)
    }

    /// The statement for row `i`, which leaves columns unchanged without their values
    /// ([`Unchanged`]): an `UPDATE` of the row's other columns by key (`t` has keys and no
    /// `query`: see [`SinkWriter::write`]), so that the target keeps what it holds in those.
    /// `None` when the row changes no column but its key.
    /// (No upsert: a key the target does not hold yet gets its whole row later, from the
    /// snapshot, and inserting it here would write NULL for the unchanged columns.)
    fn unchanged_update(
        &self,
        t: &Target,
        cols: &[ArrayRef],
        marks: &Unchanged,
        i: usize,
    ) -> Result<Option<String>> {
        let d = self.dialect;
        let mut sets = Vec::new();
        for (c, name) in t.columns.iter().enumerate() {
            if t.keys.contains(&c) || marks.is_unchanged(c, i) {
                continue;
            }
            let mut s = format!("{} = ", d.quote(name));
            push_literal(&mut s, d, cols[c].as_ref(), i)
                .map_err(|m| FerryError::data(COMPONENT, m))?;
            sets.push(s);
        }
        if sets.is_empty() {
            return Ok(None);
        }
        let kc: Vec<String> = t.keys.iter().map(|k| d.quote(&t.columns[*k])).collect();
        Ok(Some(format!(
            "UPDATE {} SET {} WHERE ({}) = {}",
            t.quoted,
            sets.join(", "),
            kc.join(", "),
            self.row_tuple(cols, &t.keys, i)?
        )))
    }

    /// The statement for an inserted row `i` that leaves columns to the target
    /// ([`Unchanged`]: a change written before the source table gained them, see
    /// Postgres-CDC): an upsert of its other columns, so that a new row takes the target's
    /// defaults for them and an existing one keeps its values.
    fn unchanged_upsert(
        &self,
        t: &Target,
        cols: &[ArrayRef],
        marks: &Unchanged,
        i: usize,
    ) -> Result<String> {
        let d = self.dialect;
        let written: Vec<usize> = (0..t.columns.len())
            .filter(|c| t.keys.contains(c) || !marks.is_unchanged(*c, i))
            .collect();
        let names: Vec<String> = written.iter().map(|c| d.quote(&t.columns[*c])).collect();
        let others: Vec<&String> = written
            .iter()
            .zip(&names)
            .filter(|(c, _)| !t.keys.contains(c))
            .map(|(_, n)| n)
            .collect();
        let mut sql = format!(
            "INSERT INTO {} ({}) VALUES {}",
            t.quoted,
            names.join(", "),
            self.row_tuple(cols, &written, i)?
        );
        let keys: Vec<String> = t.keys.iter().map(|k| d.quote(&t.columns[*k])).collect();
        sql.push_str(&upsert_clause(d, &keys, &others));
        Ok(sql)
    }

    fn statement(&self, op: &Op) -> String {
        let d = self.dialect;
        match op {
            Op::Query { statements } => statements.join(";\n"),
            Op::Copy { target, binary, .. } => {
                let t = &self.targets[*target];
                let cols: Vec<String> = t.columns.iter().map(|c| d.quote(c)).collect();
                format!(
                    "COPY {} ({}) FROM STDIN (FORMAT {})",
                    t.quoted,
                    cols.join(", "),
                    if *binary { "binary" } else { "csv" }
                )
            }
            Op::Write { target, .. } | Op::Insert { target, .. } => {
                let t = &self.targets[*target];
                let cols: Vec<String> = t.columns.iter().map(|c| d.quote(c)).collect();
                let rows = match op {
                    Op::Write { rows, .. } => format!("VALUES {}", rows.join(", ")),
                    // ROWS FROM, not unnest($1, $2, …): a function takes at most 100
                    // arguments, a table may have more columns.
                    _ => format!(
                        "SELECT * FROM ROWS FROM ({})",
                        (1..=cols.len())
                            .map(|n| format!("unnest(${n})"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                let mut sql = format!("INSERT INTO {} ({}) {rows}", t.quoted, cols.join(", "));
                if t.upsert {
                    let keys: Vec<String> =
                        t.keys.iter().map(|k| d.quote(&t.columns[*k])).collect();
                    let others: Vec<&String> = cols
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !t.keys.contains(i))
                        .map(|(_, c)| c)
                        .collect();
                    sql.push_str(&upsert_clause(d, &keys, &others));
                }
                sql
            }
            Op::Delete { target, keys } => {
                let t = &self.targets[*target];
                let kc: Vec<String> = t.keys.iter().map(|k| d.quote(&t.columns[*k])).collect();
                format!(
                    "DELETE FROM {} WHERE ({}) IN ({})",
                    t.quoted,
                    kc.join(", "),
                    keys.join(", ")
                )
            }
        }
    }

    /// Sends the pending rows and statements (see [`Conn::run_parts`]).
    fn flush(&mut self) -> Result<()> {
        self.send_pending(false)
    }

    /// Sends the pending rows and statements and ends the open COPY: at a checkpoint or
    /// when the writer closes.
    fn flush_all(&mut self) -> Result<()> {
        self.send_pending(true)
    }

    fn send_pending(&mut self, end: bool) -> Result<()> {
        if self.pending.is_empty() && (!end || self.copy.is_none()) {
            return Ok(());
        }
        let ops = std::mem::take(&mut self.pending);
        self.pending_rows = 0;
        let mut sql = String::new();
        if self.exactly_once && !self.in_tx {
            sql.push_str(match self.dialect {
                Dialect::Postgres => "BEGIN;\n",
                Dialect::MySql => "",
            });
        }
        if self.exactly_once && !self.in_tx && self.dialect == Dialect::MySql {
            let xid = self.xid(self.last_checkpoint.map_or(1, |c| c + 1));
            block_on(
                self.conn
                    .exec(&format!("XA START {}", literal(self.dialect, &xid))),
            )?;
            self.mysql_xid = Some(xid);
        }
        self.in_tx = self.exactly_once;
        let mut parts: Vec<Part> = Vec::new();
        for op in ops {
            let stmt = self.statement(&op);
            if let Op::Copy { data, binary, .. } = op {
                parts.push(Part::Copy {
                    sql: stmt,
                    binary,
                    data: data.into(),
                });
            } else if let Op::Insert { target, arrays, .. } = op {
                let types = self.array_types.get(target).and_then(Option::as_ref);
                let params = arrays
                    .finish()
                    .into_iter()
                    .zip(types.into_iter().flatten())
                    .map(|(bytes, ty)| ArrayParam {
                        ty: ty.clone(),
                        bytes,
                    })
                    .collect();
                parts.push(Part::Insert {
                    sql: stmt,
                    params: Arc::new(params),
                });
            } else if let Some(Part::Sql(last)) = parts.last_mut() {
                last.push_str(";\n");
                last.push_str(&stmt);
            } else {
                parts.push(Part::Sql(stmt));
            }
        }
        if !sql.is_empty() {
            // BEGIN goes before everything else.
            match parts.first_mut() {
                Some(Part::Sql(first)) => first.insert_str(0, &sql),
                _ => parts.insert(0, Part::Sql(sql.trim_end_matches([';', '\n']).to_string())),
            }
        }
        let (conn, info, retries) = (&mut self.conn, &self.conn_info, self.max_retries);
        let fence = self.fence.as_deref();
        let async_commits = &mut self.async_commits;
        let (stream, streams) = (&mut self.copy, &mut self.copy_streams);
        // The open stream as this flush found it: what a retry sends again first.
        let began = stream
            .as_ref()
            .and_then(|s| Some((s.serial, s.sent.as_ref()?.len())));
        let mut resend: Option<(String, bool, Vec<bytes::Bytes>)> = None;
        block_on(async {
            let mut attempt = 0;
            loop {
                let run = async {
                    if let (Some((sql, binary, sent)), Conn::Pg(c, socket)) = (&resend, &*conn) {
                        *streams += 1;
                        let s =
                            CopyStream::reopen((c, socket), *streams, sql, *binary, sent).await?;
                        *stream = Some(s);
                    }
                    conn.run_parts(&parts, stream, streams, retries > 0, end)
                        .await
                };
                match run.await {
                    Ok(()) => {
                        if let Some(a) = async_commits.as_mut() {
                            a.unsynced += 1;
                        }
                        return Ok(());
                    }
                    // Never with XA (refused at planning): a retried transaction could
                    // hold its rows twice. Without XA the statements run one by one, so
                    // sending them again may repeat some: at-least-once, as stated.
                    Err((e, true)) if attempt < retries => {
                        attempt += 1;
                        // The lost connection took the open COPY's rows with it: the
                        // retry sends again what it held when this flush began.
                        if let Some(lost) = stream.take() {
                            if let (Some((serial, n)), Some(mut sent)) = (began, lost.sent) {
                                if lost.serial == serial {
                                    sent.truncate(n);
                                    resend = Some((lost.sql, lost.binary, sent));
                                }
                            }
                        }
                        let pause = Duration::from_millis(200u64 << attempt.min(6));
                        tracing::warn!(
                            "{COMPONENT}: writing to {} failed ({e}); retry {attempt} of {retries} in {pause:?}",
                            info.address()
                        );
                        tokio::time::sleep(pause).await;
                        // The connection may be gone: a fresh one for the retry.
                        if let Ok(mut fresh) = Conn::open(info).await {
                            // The lost connection's statement may still run: end it first.
                            if let Some(name) = fence {
                                fence_sessions(&mut fresh, &[name.to_string()]).await;
                                take_name(&mut fresh, name).await;
                            }
                            if let Some(a) = async_commits.as_mut() {
                                let started = fresh.lazy_commits().await?;
                                if started != a.server_started && a.unsynced > 0 {
                                    return Err(FerryError::external(
                                        COMPONENT,
                                        format!(
                                            "{} restarted while {} flushes since the last checkpoint were committed without waiting for the disk; failing so that the job restores its last checkpoint and writes them again",
                                            info.address(),
                                            a.unsynced
                                        ),
                                    ));
                                }
                                a.server_started = started;
                            }
                            *conn = fresh;
                        }
                    }
                    Err((e, _)) => return Err(e),
                }
            }
        })
    }

    /// Waits until this writer's asynchronous commits are on disk (see [`AsyncCommits`]).
    fn sync(&mut self) -> Result<()> {
        let Some(a) = self.async_commits.as_mut() else {
            return Ok(());
        };
        if a.unsynced == 0 {
            return Ok(());
        }
        block_on(self.conn.sync_commits())?;
        a.unsynced = 0;
        Ok(())
    }

    fn xid(&self, checkpoint: u64) -> String {
        format!("{}{checkpoint}:{}", self.xid_prefix, self.attempt)
    }
}

impl JdbcWriter {
    /// The COPY data pending for target `ti` (named `quoted`), in CSV or binary: the last
    /// pending operation's when it is that, a new one's otherwise.
    fn copy_data(&mut self, ti: usize, quoted: &str, binary: bool) -> Result<&mut Vec<u8>> {
        let reuse = matches!(self.pending.last(), Some(Op::Copy { target, binary: b, .. }) if *target == ti && *b == binary);
        if !reuse {
            #[cfg(test)]
            if binary {
                if let Ok(mut seen) = BINARY_COPIES.lock() {
                    seen.push(quoted.to_string());
                }
            }
            self.pending.push(Op::Copy {
                target: ti,
                data: Vec::new(),
                binary,
            });
        }
        match self.pending.last_mut() {
            Some(Op::Copy { data, .. }) => Ok(data),
            _ => Err(FerryError::internal(format!(
                "{COMPONENT}: no pending COPY into {quoted}"
            ))),
        }
    }
}

impl SinkWriter for JdbcWriter {
    fn keeps_unchanged(&self) -> bool {
        true
    }

    fn write(&mut self, batch: &ChangeBatch) -> Result<()> {
        let Some(&ti) = self.by_name.get(&batch.table) else {
            return Err(FerryError::internal(format!(
                "Jdbc sink got rows of unknown table {}",
                batch.table
            )));
        };
        let t = self.targets[ti].clone();
        let cols = batch.data.columns();
        let all: Vec<usize> = (0..cols.len()).collect();
        // COPY: binary when every column has an exact binary form for its target column's
        // type, CSV otherwise.
        let types: Option<Vec<u32>> = self.copy_types.get(ti).cloned().flatten();
        // INSERTs with array parameters when the target's columns all have array types.
        let insert_arrays = self.array_types.get(ti).is_some_and(Option::is_some);
        let bin = match &types {
            Some(types) if t.copy || insert_arrays => BinaryColumns::new(cols, &all, types),
            _ => None,
        };
        // The columns and the element types of the array parameters, when those are sent.
        let array_rows = bin.as_ref().zip(types.as_deref()).filter(|_| insert_arrays);
        let csv = if t.copy && bin.is_none() {
            Some(CsvColumns::new(cols, &all).map_err(|m| FerryError::data(COMPONENT, m))?)
        } else {
            None
        };
        let binary = bin.is_some();
        // Only an UPDATE by key can leave a column alone.
        if t.query.is_some() {
            batch.refuse_unchanged(&format!("sink `{COMPONENT}` with `query`"))?;
        } else if t.keys.is_empty() {
            batch.refuse_unchanged(&format!(
                "sink `{COMPONENT}` into {}, which has no primary_keys,",
                t.quoted
            ))?;
        }
        if let Some(b) = bin.as_ref().filter(|_| {
            t.copy && t.query.is_none() && batch.kinds.is_none() && batch.unchanged.is_none()
        }) {
            // Only inserts, into a binary COPY: as the loop below would, but column by
            // column over each run of rows up to the next flush.
            let mut i = 0;
            while i < batch.num_rows() {
                let run = self
                    .batch_size
                    .saturating_sub(self.pending_rows)
                    .clamp(1, batch.num_rows() - i);
                let data = self.copy_data(ti, &t.quoted, true)?;
                b.push_rows(data, i..i + run)
                    .map_err(|m| FerryError::data(COMPONENT, format!("table {}: {m}", t.quoted)))?;
                i += run;
                self.pending_rows += run;
                if self.pending_rows >= self.batch_size {
                    self.flush()?;
                }
            }
            return Ok(());
        }
        for i in 0..batch.num_rows() {
            let kind = batch.kind(i);
            if let Some(marks) = batch.unchanged.as_deref().filter(|u| u.any_in_row(i)) {
                if !matches!(kind, RowKind::UpdateBefore | RowKind::Delete) {
                    let stmt = if kind == RowKind::Insert {
                        Some(self.unchanged_upsert(&t, cols, marks, i)?)
                    } else {
                        self.unchanged_update(&t, cols, marks, i)?
                    };
                    if let Some(stmt) = stmt {
                        match self.pending.last_mut() {
                            Some(Op::Query { statements }) => statements.push(stmt),
                            _ => self.pending.push(Op::Query {
                                statements: vec![stmt],
                            }),
                        }
                    }
                    self.pending_rows += 1;
                    if self.pending_rows >= self.batch_size {
                        self.flush()?;
                    }
                    continue;
                }
            }
            if let Some(q) = &t.query {
                if kind == RowKind::UpdateBefore {
                    continue;
                }
                let names: Vec<String> = t
                    .schema
                    .schema
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect();
                let stmt = bind_query(
                    q.trim().trim_end_matches(';'),
                    self.dialect,
                    &names,
                    cols,
                    i,
                )
                .map_err(|m| FerryError::data(COMPONENT, m))?;
                match self.pending.last_mut() {
                    Some(Op::Query { statements }) => statements.push(stmt),
                    _ => self.pending.push(Op::Query {
                        statements: vec![stmt],
                    }),
                }
            } else {
                match (kind, array_rows) {
                    (RowKind::UpdateBefore, _) => continue,
                    (RowKind::Delete, _) if !t.keys.is_empty() => {
                        let key = self.row_tuple(cols, &t.keys, i)?;
                        match self.pending.last_mut() {
                            Some(Op::Delete { target, keys }) if *target == ti => keys.push(key),
                            _ => self.pending.push(Op::Delete { target: ti, keys: vec![key] }),
                        }
                    }
                    (RowKind::Delete, _) => {
                        return Err(FerryError::config(format!(
                            "{COMPONENT}: a DELETE row reached table {} which has no primary_keys: set primary_keys to delete by key",
                            t.quoted
                        )))
                    }
                    _ if t.copy && (csv.is_some() || bin.is_some()) => {
                        let data = self.copy_data(ti, &t.quoted, binary)?;
                        let pushed = match (&bin, &csv) {
                            (Some(b), _) => b.push_row(data, i),
                            (None, Some(c)) => c.push_row(data, i),
                            (None, None) => Ok(()),
                        };
                        pushed.map_err(|m| FerryError::data(COMPONENT, format!("table {}: {m}", t.quoted)))?;
                    }
                    (_, Some((bin, elems))) => {
                        let fits = |m: String| FerryError::data(COMPONENT, format!("table {}: {m}", t.quoted));
                        let key = if t.upsert {
                            let mut k = Vec::new();
                            for &c in &t.keys {
                                bin.push_field(&mut k, c, i).map_err(fits)?;
                            }
                            Some(k)
                        } else {
                            None
                        };
                        // A key the statement already holds starts the next one: the last
                        // row of a key wins, as the statements run in order.
                        let reuse = matches!(self.pending.last(), Some(Op::Insert { target, arrays, keys })
                            if *target == ti && arrays.bytes() < INSERT_ARRAY_BYTES
                                && key.as_ref().is_none_or(|k| !keys.contains(k)));
                        if !reuse {
                            #[cfg(test)]
                            if let Ok(mut seen) = ARRAY_INSERTS.lock() {
                                seen.push(t.quoted.clone());
                            }
                            self.pending.push(Op::Insert { target: ti, arrays: ArrayColumns::new(elems), keys: HashSet::new() });
                        }
                        if let Some(Op::Insert { arrays, keys, .. }) = self.pending.last_mut() {
                            arrays.push_row(bin, i).map_err(fits)?;
                            keys.extend(key);
                        }
                    }
                    _ => {
                        let row = self.row_tuple(cols, &all, i)?;
                        let key = if t.upsert { Some(self.row_tuple(cols, &t.keys, i)?) } else { None };
                        let reuse = matches!(self.pending.last(), Some(Op::Write { target, .. }) if *target == ti);
                        if !reuse {
                            self.pending.push(Op::Write { target: ti, rows: Vec::new(), keys: HashMap::new() });
                        }
                        if let Some(Op::Write { rows, keys, .. }) = self.pending.last_mut() {
                            match key.and_then(|k| match keys.get(&k) {
                                Some(&at) => Some(at),
                                None => {
                                    keys.insert(k, rows.len());
                                    None
                                }
                            }) {
                                // One statement may not touch a key twice: the last row wins.
                                Some(at) => rows[at] = row,
                                None => rows.push(row),
                            }
                        }
                    }
                }
            }
            self.pending_rows += 1;
            if self.pending_rows >= self.batch_size {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn prepare_commit(&mut self, checkpoint_id: u64) -> Result<Option<Value>> {
        self.flush_all()?;
        if !self.exactly_once {
            self.sync()?;
            return Ok(None);
        }
        self.last_checkpoint = Some(checkpoint_id);
        if !self.in_tx {
            return Ok(None);
        }
        let d = self.dialect;
        let xid = match d {
            Dialect::Postgres => {
                let xid = self.xid(checkpoint_id);
                block_on(
                    self.conn
                        .exec(&format!("PREPARE TRANSACTION {}", literal(d, &xid))),
                )?;
                xid
            }
            Dialect::MySql => {
                // MySQL names the transaction at XA START (the checkpoint expected then).
                let xid = self
                    .mysql_xid
                    .take()
                    .unwrap_or_else(|| self.xid(checkpoint_id));
                block_on(
                    self.conn
                        .exec(&format!("XA END {0}; XA PREPARE {0}", literal(d, &xid))),
                )?;
                // MariaDB keeps a prepared XA transaction bound to its connection until that
                // disconnects, and only then can the committer's connection commit it.
                let info = self.conn_info.clone();
                let old = std::mem::replace(
                    &mut self.conn,
                    block_on(async move { Conn::open(&info).await })?,
                );
                if let Conn::My(c) = old {
                    block_on(async move {
                        c.disconnect()
                            .await
                            .map_err(|e| FerryError::external(COMPONENT, e.to_string()))
                    })?;
                }
                xid
            }
        };
        self.in_tx = false;
        Ok(Some(encode_state(&XaCommit { xid }, "an XA commit")?))
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Option<Value>> {
        self.last_checkpoint
            .map(|checkpoint| encode_state(&WriterState { checkpoint }, "a Jdbc writer"))
            .transpose()
    }

    fn abort(&mut self) -> Result<()> {
        self.pending.clear();
        self.pending_rows = 0;
        // Abandoned, the COPY fails on the server and its rows are gone.
        if let Some(copy) = self.copy.take() {
            let _ = block_on(async {
                copy.abandon().await;
                Ok(())
            });
        }
        if self.in_tx {
            let sql = match self.dialect {
                Dialect::Postgres => "ROLLBACK".to_string(),
                Dialect::MySql => {
                    let x = literal(self.dialect, &self.mysql_xid.take().unwrap_or_default());
                    format!("XA END {x}; XA ROLLBACK {x}")
                }
            };
            let _ = block_on(self.conn.exec(&sql));
            self.in_tx = false;
        }
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        self.flush_all()?;
        self.sync()
    }
}

struct XaCommitter {
    conn: Arc<ConnInfo>,
    c: Option<Conn>,
    attempts: u64,
}

impl XaCommitter {
    fn run(&mut self, xid: &str, commit: bool) -> Result<()> {
        let d = self.conn.dialect;
        let mut last = None;
        for _ in 0..self.attempts {
            if self.c.is_none() {
                let info = self.conn.clone();
                self.c = Some(block_on(async move { Conn::open(&info).await })?);
            }
            let Some(c) = self.c.as_mut() else { continue };
            let r = block_on(async {
                // Idempotent: only ids still prepared are committed.
                let still = match d {
                    Dialect::Postgres => !c
                        .column(&format!(
                            "SELECT 1 FROM pg_prepared_xacts WHERE gid = {}",
                            literal(d, xid)
                        ))
                        .await?
                        .is_empty(),
                    Dialect::MySql => {
                        let Conn::My(my) = c else { return Ok(()) };
                        let rows: Vec<mysql_async::Row> = my
                            .query("XA RECOVER")
                            .await
                            .map_err(|e| FerryError::external(COMPONENT, e.to_string()))?;
                        rows.iter().any(|r| matches!(r.as_ref(3), Some(mysql_async::Value::Bytes(b)) if b.as_slice() == xid.as_bytes()))
                    }
                };
                if !still {
                    return Ok(());
                }
                let sql = match (d, commit) {
                    (Dialect::Postgres, true) => format!("COMMIT PREPARED {}", literal(d, xid)),
                    (Dialect::Postgres, false) => format!("ROLLBACK PREPARED {}", literal(d, xid)),
                    (Dialect::MySql, true) => format!("XA COMMIT {}", literal(d, xid)),
                    (Dialect::MySql, false) => format!("XA ROLLBACK {}", literal(d, xid)),
                };
                c.exec(&sql).await
            });
            match r {
                Ok(()) => return Ok(()),
                Err(e) => {
                    self.c = None;
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| FerryError::external(COMPONENT, format!("cannot commit {xid}"))))
    }
}

/// A writer's state in a checkpoint: the last checkpoint it prepared, from which its XA
/// transaction ids continue after a restore.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct WriterState {
    checkpoint: u64,
}

/// What a writer's prepared XA transaction leaves for the committer: its global id.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct XaCommit {
    xid: String,
}

impl SinkCommitter for XaCommitter {
    fn commit(&mut self, _checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
        for info in infos {
            let c: XaCommit = decode_state(&info, "an XA commit")?;
            self.run(&c.xid, true)?;
        }
        Ok(())
    }

    fn abort(&mut self, _checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
        for info in infos {
            let c: XaCommit = decode_state(&info, "an XA commit")?;
            self.run(&c.xid, false)?;
        }
        Ok(())
    }
}
