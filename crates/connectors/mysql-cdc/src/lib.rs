//! # ferry-connector-mysql-cdc
//!
//! SeaTunnel's `MySQL-CDC` source: the tables' current rows, then every change to them,
//! read from the binary log of MySQL or MariaDB in ROW format as a replica does
//! (`COM_BINLOG_DUMP` under the job's `server-id`), as rows with their row kinds
//! (`+I -U +U -D`) in the tables' Arrow schemas.
//!
//! - **One reader follows the binlog** (the split `mysql-cdc`, reader 0); its state is a
//!   [`stream::Position`]: the binlog file and offset where the next transaction starts
//!   (and the GTID state there), how much of that transaction was returned, and how far
//!   the snapshot got. Restoring a checkpoint resumes exactly there.
//! - **The snapshot needs no lock**: chunks by key, each reconciled with the changes the
//!   binlog carries up to the server's position after the chunk was read (see
//!   [`stream`]). A crash re-reads at most one chunk.
//! - **On Spark, micro-batches are bounded** at the server's binlog end, which the
//!   enumerator takes when a micro-batch is planned ([`SplitEnumerator::bound_micro_batch`]);
//!   each micro-batch's reader reads to it, reads snapshot chunks after it, and ends its
//!   binlog dump before the micro-batch ends, so every reader registers under the job's
//!   `server-id` alone (see [`stream`]).
//! - **Refusals, not silent errors**: a server without a ROW binlog with full row images,
//!   a purged binlog position, and a captured table whose columns changed stop the job
//!   with the reason.
//! - **`format = COMPATIBLE_DEBEZIUM_JSON`** (SeaTunnel's): each change becomes one row
//!   `topic, key, value` of Debezium's JSON, as Debezium's MySQL connector writes it
//!   (`ferry_formats::debezium_envelope`); an update's `-U`/`+U` pair is one event.
//!
//! See `docs/connectors/MySQL-CDC.md`.

pub mod stream;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferry_api::io::{Fetched, Fetcher, Readiness};
use ferry_api::{
    decode_state, Boundedness, EnumeratorContext, FerryError, JobContext, JobMode, OptionSpec,
    Options, PrimaryKey, ReadStatus, ReaderContext, ResolveContext, Result, Source, SourceFactory,
    SourceReader, Split, SplitEnumerator, TableSchema,
};
use ferry_db::mysql_binlog::{binlog_kind, charset_encoding, BinlogKind, BinlogPos, GtidState};
use ferry_db::relation::describe_table;
use ferry_db::{connect_mysql, literal, parse_url, ConnInfo, Dialect, Secret};
use ferry_formats::debezium_envelope::{
    self, Connector, EnvelopeOptions, TableEnvelope, TableName,
};
use mysql_async::prelude::Queryable;
use serde_json::{json, Map, Value};

use crate::stream::{CdcTable, Item, Position, Settings, Startup, Stop};

/// The component name in messages.
pub(crate) const COMPONENT: &str = "source MySQL-CDC";

/// The one split: the binlog stream (with the snapshot in it).
const SPLIT_ID: &str = "mysql-cdc";

const STARTUP_MODES: &[&str] = &["initial", "earliest", "latest", "specific", "timestamp"];
const STOP_MODES: &[&str] = &["never", "latest", "specific", "timestamp"];
const FORMATS: &[&str] = &["DEFAULT", "COMPATIBLE_DEBEZIUM_JSON"];

ferry_api::declare_options! {
    /// The options of the source, with SeaTunnel's names.
    struct CdcOptions => OPTIONS {
        /// jdbc:mysql://host:port/db (or jdbc:mariadb://), with URL properties after '?'.
        base_url: String = "base-url", required;
        /// User name; it needs REPLICATION SLAVE, REPLICATION CLIENT (BINLOG MONITOR on MariaDB) and SELECT on the tables.
        username: String = "username", required;
        /// Password; never shown in messages.
        password: String = "password", optional;
        /// Databases of the tables (informational: table-names name them).
        database_names: Vec<String> = "database-names", optional;
        /// Tables to capture: database.table.
        table_names: Vec<String> = "table-names", required;
        /// Per table { table = "db.table", primaryKeys = ["id"], snapshotSplitColumn = "id" }: a key for tables without a primary key, and the column chunks are cut by.
        table_names_config: Vec<Value> = "table-names-config", optional;
        /// initial: the tables' rows, then their changes; latest: changes from now; earliest: from the oldest binlog the server has; specific: from startup.specific-offset.*; timestamp: from the first transaction at or after startup.timestamp.
        startup_mode: String = "startup.mode", default "initial", values STARTUP_MODES;
        /// The binlog file to start from (startup.mode = specific).
        specific_file: String = "startup.specific-offset.file", optional;
        /// The offset in that file to start from (startup.mode = specific).
        specific_pos: u64 = "startup.specific-offset.pos", optional;
        /// A MariaDB GTID state to start after (startup.mode = specific), instead of file and offset.
        specific_gtid: String = "startup.specific-offset.gtid-set", optional;
        /// Milliseconds since 1970 (startup.mode = timestamp).
        startup_timestamp: u64 = "startup.timestamp", optional;
        /// never: the stream runs until the job stops; latest: the job ends once the snapshot is complete and the stream has reached the binlog's end as of the job's first start; specific: before the first transaction that starts at or after stop.specific-offset.*; timestamp: before the first transaction at or after stop.timestamp. All but never run on the embedded engine only.
        stop_mode: String = "stop.mode", default "never", values STOP_MODES;
        /// The binlog file to stop in (stop.mode = specific).
        stop_file: String = "stop.specific-offset.file", optional;
        /// The offset in that file to stop at (stop.mode = specific).
        stop_pos: u64 = "stop.specific-offset.pos", optional;
        /// Milliseconds since 1970 (stop.mode = timestamp).
        stop_timestamp: u64 = "stop.timestamp", optional;
        /// Rows per snapshot chunk (by key).
        split_size: u64 = "snapshot.split.size", default 8096;
        /// Rows per batch of changes (a bigger transaction is handed on in several).
        fetch_size: u64 = "snapshot.fetch.size", default 1024;
        /// The replica id the reader registers with (a number, or a range of which the first is used); unique per job on the server.
        server_id: String = "server-id", optional, shows "random in 5400-6400";
        /// Accepted: values are read in UTC (TIMESTAMP columns as UTC wall time, DATETIME as stored).
        _server_time_zone: String = "server-time-zone", default "UTC";
        /// How long to wait for a connection.
        connect_timeout_ms: u64 = "connect.timeout.ms", default 30000;
        /// Accepted for compatibility.
        _connect_max_retries: u64 = "connect.max-retries", default 3;
        /// Accepted for compatibility.
        _connection_pool_size: u64 = "connection.pool.size", default 20;
        /// With parallel snapshot readers, an integer key with at most this many keys per row is cut into chunks of equal key ranges by arithmetic; others by a query over the keys.
        factor_upper: f64 = "chunk-key.even-distribution.factor.upper-bound", default 100.0, shows "100";
        /// Keys per row at least for chunks of equal key ranges (see the upper bound).
        factor_lower: f64 = "chunk-key.even-distribution.factor.lower-bound", default 0.05;
        /// Accepted for compatibility.
        _sample_sharding_threshold: u64 = "sample-sharding.threshold", default 1000;
        /// Accepted for compatibility.
        _inverse_sampling_rate: u64 = "inverse-sampling.rate", default 1000;
        /// Refuse tables without a key (whose snapshot cannot be reconciled with their changes).
        exactly_once: bool = "exactly_once", default false;
        /// DEFAULT: rows in the tables' schemas; COMPATIBLE_DEBEZIUM_JSON: one row (topic, key, value) per change, key and value as Debezium's JSON.
        format: String = "format", default "DEFAULT", values FORMATS;
        /// Schema evolution: not supported (a changed captured table stops the job).
        schema_changes: bool = "schema-changes.enabled", default false;
        /// Accepted: tinyint(1) is read as boolean, as SeaTunnel does by default.
        _int_type_narrowing: bool = "int_type_narrowing", default true;
        /// Debezium properties: heartbeat.interval.ms is used, include.schema.changes = true is refused; with COMPATIBLE_DEBEZIUM_JSON also database.server.name (the topics' prefix), key/value.converter.schemas.enable and decimal.handling.mode; the others are accepted and ignored.
        debezium: Map<String, Value> = "debezium", optional;
    }
}

/// The factory of SeaTunnel's `MySQL-CDC` source.
pub struct MySqlCdcSourceFactory;

/// What `create` read, before the catalog is asked.
#[derive(Debug)]
struct Config {
    conn: ConnInfo,
    tables: Vec<String>,
    keys: BTreeMap<String, Vec<String>>,
    split_columns: BTreeMap<String, String>,
    start: Startup,
    server_id: u32,
    split_size: usize,
    /// `chunk-key.even-distribution.factor.lower-bound` and `upper-bound`.
    even_factor: (f64, f64),
    fetch_size: usize,
    exactly_once: bool,
    heartbeat: Duration,
    /// `stop.mode` and its position or time.
    stop: Stop,
    /// `format = COMPATIBLE_DEBEZIUM_JSON`: the JSON's settings.
    envelope: Option<EnvelopeOptions>,
}

/// `5400` or `5400-5408` (the first id of the range: one reader follows the binlog).
fn parse_server_id(s: &str) -> std::result::Result<u32, String> {
    let first = match s.split_once('-') {
        Some((a, b)) => {
            let (a, b): (u32, u32) = match (a.trim().parse(), b.trim().parse()) {
                (Ok(a), Ok(b)) => (a, b),
                _ => return Err(format!("'{s}' is not a number or a range like 5400-5408")),
            };
            if a > b {
                return Err(format!("'{s}': the range is empty"));
            }
            a
        }
        None => s
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not a number or a range like 5400-5408"))?,
    };
    if first == 0 {
        return Err("0 is not a valid replica id".into());
    }
    Ok(first)
}

impl SourceFactory for MySqlCdcSourceFactory {
    fn name(&self) -> &'static str {
        "MySQL-CDC"
    }

    fn description(&self) -> &'static str {
        "Captures MySQL/MariaDB tables: a lock-free snapshot, then their changes from the binlog (ROW format)"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        if job.mode != JobMode::Streaming {
            return Err(o.location().error(
                "job.mode",
                "MySQL-CDC reads a change stream that never ends: run it in a STREAMING job",
            ));
        }
        let c = CdcOptions::read(o)?;
        let parts = parse_url(&c.base_url).map_err(|m| o.error("base-url", m))?;
        if parts.dialect != Dialect::MySql {
            return Err(o.error("base-url", "is not a jdbc:mysql:// or jdbc:mariadb:// URL"));
        }
        let password = c.password.filter(|p| !p.is_empty()).map(Secret);
        let tables = c.table_names;
        if tables.is_empty() {
            return Err(o.error("table-names", "lists no table"));
        }
        for t in &tables {
            if t.split('.').count() != 2 {
                return Err(o.error("table-names", format!("'{t}' is not database.table")));
            }
        }
        if let Some(dbs) = &c.database_names {
            for t in &tables {
                let db = t.split('.').next().unwrap_or("");
                if !dbs.is_empty() && !dbs.iter().any(|d| d == db) {
                    return Err(o.error(
                        "table-names",
                        format!("'{t}' is in database '{db}', which database-names does not list"),
                    ));
                }
            }
        }
        let mut keys = BTreeMap::new();
        let mut split_columns = BTreeMap::new();
        for (i, item) in c.table_names_config.into_iter().flatten().enumerate() {
            let at = format!("table-names-config[{i}]");
            let Some(table) = item.get("table").and_then(Value::as_str) else {
                return Err(o.error(
                    &at,
                    "expected { table = \"db.table\", primaryKeys = [\"id\"] }",
                ));
            };
            if !tables.iter().any(|t| t == table) {
                return Err(o.error(
                    &at,
                    format!("names table '{table}', which table-names does not list"),
                ));
            }
            if let Some(pk) = item.get("primaryKeys") {
                let Some(pk) = pk.as_array() else {
                    return Err(o.error(&at, "primaryKeys is not a list of column names"));
                };
                let cols: Vec<String> = pk
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect();
                if cols.len() != pk.len() || cols.is_empty() {
                    return Err(o.error(&at, "primaryKeys is not a list of column names"));
                }
                keys.insert(table.to_string(), cols);
            }
            if let Some(col) = item.get("snapshotSplitColumn") {
                let Some(col) = col.as_str() else {
                    return Err(o.error(&at, "snapshotSplitColumn is not a column name"));
                };
                split_columns.insert(table.to_string(), col.to_string());
            }
            if let Some(Value::Object(m)) = Some(&item) {
                for k in m.keys() {
                    if !["table", "primaryKeys", "snapshotSplitColumn"].contains(&k.as_str()) {
                        return Err(o.error(
                            &at,
                            format!("unknown key '{k}' (table, primaryKeys, snapshotSplitColumn)"),
                        ));
                    }
                }
            }
        }
        let start = match c.startup_mode.to_ascii_lowercase().as_str() {
            "initial" => Startup::Initial,
            "latest" => Startup::Latest,
            "earliest" => Startup::Earliest,
            "specific" => match (c.specific_file, c.specific_pos, c.specific_gtid) {
                (_, _, Some(g)) => {
                    if GtidState::parse(&g).is_none() {
                        return Err(o.error(
                            "startup.specific-offset.gtid-set",
                            format!("'{g}' is not a MariaDB GTID state (domain-server-seq, comma separated)"),
                        ));
                    }
                    Startup::Gtid(g)
                }
                (Some(file), Some(pos), None) => Startup::Specific(BinlogPos { file, pos }),
                _ => return Err(o.error(
                    "startup.mode",
                    "specific needs startup.specific-offset.file and startup.specific-offset.pos \
                         (or startup.specific-offset.gtid-set)",
                )),
            },
            "timestamp" => match c.startup_timestamp {
                Some(ms) => Startup::Timestamp(ms as i64),
                None => {
                    return Err(o.error(
                        "startup.mode",
                        "timestamp needs startup.timestamp (milliseconds since 1970)",
                    ))
                }
            },
            other => {
                return Err(o.error(
                    "startup.mode",
                    format!(
                        "'{other}' is not one of initial, earliest, latest, specific, timestamp"
                    ),
                ))
            }
        };
        let stop = match c.stop_mode.to_ascii_lowercase().as_str() {
            "never" => Stop::Never,
            "latest" => Stop::Latest,
            "specific" => match (c.stop_file, c.stop_pos) {
                (Some(file), Some(pos)) => Stop::Specific(BinlogPos { file, pos }),
                _ => {
                    return Err(o.error(
                        "stop.mode",
                        "specific needs stop.specific-offset.file and stop.specific-offset.pos",
                    ))
                }
            },
            "timestamp" => match c.stop_timestamp {
                Some(ms) => Stop::Timestamp(ms as i64),
                None => {
                    return Err(o.error(
                        "stop.mode",
                        "timestamp needs stop.timestamp (milliseconds since 1970)",
                    ))
                }
            },
            other => {
                return Err(o.error(
                    "stop.mode",
                    format!("'{other}' is not one of never, latest, specific, timestamp"),
                ))
            }
        };
        // A stop before the start would end the job before it read anything it was asked for.
        match (&start, &stop) {
            (Startup::Specific(from), Stop::Specific(to)) if !to.reached(from) => {
                return Err(o.error(
                    "stop.specific-offset.pos",
                    format!("the stop {to} is before the start {from} (startup.specific-offset.*)"),
                ))
            }
            (Startup::Timestamp(from), Stop::Timestamp(to)) if to < from => {
                return Err(o.error(
                    "stop.timestamp",
                    format!("{to} is before startup.timestamp {from}"),
                ))
            }
            _ => {}
        }
        let server_id = match c.server_id {
            Some(s) => parse_server_id(&s).map_err(|m| o.error("server-id", m))?,
            // SeaTunnel picks a random id; one from the job's tables keeps reruns of the
            // same job on the same id (a rerun then ends its predecessor's connection).
            None => {
                let mut h: u32 = 2166136261;
                for b in tables.join(",").bytes() {
                    h = (h ^ b as u32).wrapping_mul(16777619);
                }
                5400 + h % 1001
            }
        };
        if c.schema_changes {
            return Err(o.error(
                "schema-changes.enabled",
                "schema evolution is not supported yet: a captured table whose columns change stops the job with the change named",
            ));
        }
        let debezium = c.debezium.unwrap_or_default();
        if debezium_envelope::debezium_property(&debezium, "include.schema.changes")
            .is_some_and(|v| v.as_bool() == Some(true) || v.as_str() == Some("true"))
        {
            return Err(o.error(
                "debezium",
                "include.schema.changes = true asks for schema evolution, which is not supported yet",
            ));
        }
        let heartbeat =
            match debezium_envelope::debezium_property(&debezium, "heartbeat.interval.ms") {
                None => Duration::from_secs(1),
                Some(v) => match v
                    .as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                {
                    Some(ms) if ms > 0 => Duration::from_millis(ms),
                    _ => {
                        return Err(o.error(
                            "debezium",
                            format!(
                            "heartbeat.interval.ms = {v} is not a positive number of milliseconds"
                        ),
                        ))
                    }
                },
            };
        let envelope = EnvelopeOptions::for_format(Connector::MySql, &c.format, &debezium)
            .map_err(|(option, e)| o.error(option, e))?;
        for k in debezium_envelope::debezium_keys(&debezium) {
            let used = envelope.is_some() && EnvelopeOptions::KEYS.contains(&k.as_str());
            if k != "heartbeat.interval.ms" && k != "include.schema.changes" && !used {
                tracing::info!(
                    "{COMPONENT}: debezium.{k} does not apply to Ferry's reader and is ignored"
                );
            }
        }
        let timeout = c.connect_timeout_ms.max(1000);
        o.finish(OPTIONS)?;
        let conn = ConnInfo {
            dialect: Dialect::MySql,
            host: parts.host,
            port: parts.port,
            database: parts.database,
            user: c.username,
            password,
            properties: parts.properties,
            connect_timeout: Duration::from_millis(timeout),
        };
        Ok(Box::new(MySqlCdcSource {
            config: Arc::new(Config {
                conn,
                tables,
                keys,
                split_columns,
                start,
                server_id,
                split_size: c.split_size.max(1) as usize,
                even_factor: (c.factor_lower, c.factor_upper),
                fetch_size: c.fetch_size.max(1) as usize,
                exactly_once: c.exactly_once,
                heartbeat,
                stop,
                envelope,
            }),
            settings: None,
        }))
    }
}

/// A configured `MySQL-CDC` source.
#[derive(Debug)]
pub struct MySqlCdcSource {
    config: Arc<Config>,
    settings: Option<Arc<Settings>>,
}

/// The Debezium description of a captured table (`format = COMPATIBLE_DEBEZIUM_JSON`):
/// MySQL logs whole rows (`binlog_row_image = FULL`), so an update's row before is whole.
fn envelope_of(
    opts: &EnvelopeOptions,
    db: &str,
    table: &str,
    schema: &TableSchema,
    columns: &[ferry_db::ColumnDef],
    key: &[String],
) -> TableEnvelope {
    let described: Vec<(&str, &str)> = columns
        .iter()
        .map(|c| (c.name.as_str(), c.source_type.as_str()))
        .collect();
    let name = TableName {
        db,
        schema: None,
        table,
    };
    let fields = schema.schema.fields();
    TableEnvelope::of_table(Connector::MySql, opts, name, fields, &described, key, true)
}

impl MySqlCdcSource {
    async fn describe(&self) -> Result<Vec<CdcTable>> {
        let c = &self.config;
        let mut out = Vec::with_capacity(c.tables.len());
        let mut sql = connect_mysql(&c.conn, COMPONENT).await?;
        for path in &c.tables {
            let d = describe_table(&c.conn, COMPONENT, path).await?;
            let (db, table) = path.split_once('.').unwrap_or(("", path));
            // The binlog carries text in each column's own character set.
            let q = format!(
                "SELECT COLUMN_NAME, CHARACTER_SET_NAME FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {}",
                literal(Dialect::MySql, db),
                literal(Dialect::MySql, table)
            );
            let charsets: BTreeMap<String, String> = sql
                .query::<(String, Option<String>), _>(&q)
                .await
                .map_err(|e| FerryError::external(COMPONENT, format!("{e}: {q}")))?
                .into_iter()
                .map(|(n, cs)| (n, cs.unwrap_or_default()))
                .collect();
            let mut kinds = Vec::with_capacity(d.columns.len());
            for col in &d.columns {
                let kind = binlog_kind(col);
                let cs = charsets.get(&col.name).map(String::as_str).unwrap_or("");
                let enc = charset_encoding(cs).map_err(|why| {
                    FerryError::config(format!(
                        "{COMPONENT}: column '{}' of {path}: {why}",
                        col.name
                    ))
                })?;
                kinds.push(match (kind, enc) {
                    (BinlogKind::Plain, Some(enc))
                        if col.data_type == arrow::datatypes::DataType::Utf8 =>
                    {
                        BinlogKind::Text(enc)
                    }
                    (k, _) => k,
                });
            }
            let mut schema: TableSchema = d.schema;
            let mut key = d.key;
            if let Some(k) = c.keys.get(path) {
                for col in k {
                    if !d.columns.iter().any(|x| &x.name == col) {
                        return Err(FerryError::config(format!(
                            "{COMPONENT}: table-names-config gives key column '{col}', which {path} does not have"
                        )));
                    }
                }
                key = k.clone();
                let mut catalog = (*schema.catalog).clone();
                catalog.primary_key = Some(PrimaryKey {
                    name: format!("pk_{table}"),
                    columns: k.clone(),
                });
                schema = schema.with_catalog(catalog);
            }
            if let Some(col) = c.split_columns.get(path) {
                if key.len() != 1 || &key[0] != col {
                    return Err(FerryError::config(format!(
                        "{COMPONENT}: table-names-config gives snapshotSplitColumn '{col}' for {path}, \
                         whose key is [{}]: chunks are cut by the table's key, so that a chunk ends \
                         where the next begins",
                        key.join(", ")
                    )));
                }
            }
            if key.is_empty() && c.exactly_once {
                return Err(FerryError::config(format!(
                    "{COMPONENT}: {path} has no primary or unique key, so its snapshot cannot be \
                     reconciled with its changes and exactly_once = true cannot hold; give it a key \
                     in table-names-config, or set exactly_once = false (at-least-once)"
                )));
            }
            let envelope = c
                .envelope
                .as_ref()
                .map(|opts| Arc::new(envelope_of(opts, db, table, &schema, &d.columns, &key)));
            out.push(CdcTable {
                schema,
                columns: d.columns,
                kinds,
                key,
                db: db.to_string(),
                table: table.to_string(),
                envelope,
            });
        }
        let _ = sql.disconnect().await;
        Ok(out)
    }
}

impl Source for MySqlCdcSource {
    fn resolve(&mut self, ctx: &ResolveContext) -> Result<()> {
        let what = format!(
            "reading the tables' columns from {}",
            self.config.conn.address()
        );
        let tables = ctx.block_on(&what, self.describe())?;
        let c = &self.config;
        self.settings = Some(Arc::new(Settings {
            conn: c.conn.clone(),
            server_id: c.server_id,
            split_size: c.split_size,
            even_factor: c.even_factor,
            fetch_size: c.fetch_size,
            tables,
            start: c.start.clone(),
            heartbeat: c.heartbeat,
            stop: c.stop.clone(),
            snapshot_readers: 1,
        }));
        Ok(())
    }

    fn boundedness(&self) -> Boundedness {
        Boundedness::Unbounded
    }

    /// The captured tables; with `format = COMPATIBLE_DEBEZIUM_JSON` one table
    /// `default.default` of `topic`, `key`, `value`, as SeaTunnel produces.
    fn tables(&self) -> Vec<TableSchema> {
        if self.config.envelope.is_some() {
            return vec![TableSchema::new(
                debezium_envelope::TABLE_NAME,
                debezium_envelope::row_schema(),
            )];
        }
        self.settings
            .as_ref()
            .map(|s| s.tables.iter().map(|t| t.schema.clone()).collect())
            .unwrap_or_default()
    }

    /// A `stop.mode` other than `never` ends the reader, which Spark's micro-batches cannot
    /// follow: on Spark a streaming query's source does not end.
    fn needs_long_lived_reader(&self) -> Option<String> {
        let ends = match &self.config.stop {
            Stop::Never => return None,
            Stop::Latest => {
                "stop.mode = latest ends the stream when it reaches the binlog's end as of the job's start".to_string()
            }
            Stop::Specific(at) => format!("stop.mode = specific ends the stream at {at}"),
            Stop::Timestamp(ms) => {
                format!("stop.mode = timestamp ends the stream at stop.timestamp {ms}")
            }
        };
        Some(format!(
            "{ends}; a Spark streaming query cannot end with its source (use stop.mode = never there)"
        ))
    }

    /// Restoring a position replays the binlog exactly; a snapshot chunk in flight is read
    /// again, reconciled with the changes by key, so tables without a key are not replayed
    /// exactly.
    fn is_replayable(&self) -> bool {
        self.settings
            .as_ref()
            .is_some_and(|s| s.tables.iter().all(|t| !t.key.is_empty()))
    }

    /// On Spark each micro-batch ends at a bound the enumerator takes (the server's binlog
    /// end, [`SplitEnumerator::bound_micro_batch`]); its reader starts at the previous
    /// batch's end, reads to the bound and ends its binlog dump before the micro-batch
    /// ends, so the next one registers under the same `server-id` alone. `end`, on a
    /// replay, bounds the snapshot chunks to the key ranges the first read covered.
    fn bound_splits_at(
        &self,
        start: Vec<Split>,
        bound: &Value,
        end: Option<&[Split]>,
    ) -> Result<Vec<Split>> {
        let mut bound: stream::Bound = serde_json::from_value(bound.clone()).map_err(|e| {
            FerryError::internal(format!("a MySQL-CDC bound that is not one ({e}): {bound}"))
        })?;
        bound.until = match end.and_then(|e| e.iter().find(|s| s.id == SPLIT_ID)) {
            Some(e) => {
                let p: Option<Position> = e.read_state()?;
                p.map(|p| stream::SnapshotProgress {
                    snapshotted: p.snapshotted,
                    chunk: p.chunk,
                })
            }
            None => None,
        };
        start
            .into_iter()
            .map(|split| {
                let from: Option<Position> = split.read_state()?;
                Split::typed(
                    split.id,
                    &BoundedStart {
                        from,
                        bound: bound.clone(),
                    },
                )
            })
            .collect()
    }

    fn create_enumerator(
        &self,
        _ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let assigned = restored
            .as_ref()
            .and_then(|v| v.get("assigned"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let pending = restored
            .as_ref()
            .and_then(|v| v.get("pending"))
            .map(|v| decode_state::<Vec<Split>>(v, "the MySQL-CDC enumerator"))
            .transpose()?
            .unwrap_or_default();
        Ok(Box::new(Enumerator {
            assigned,
            pending,
            settings: self.settings.clone(),
            sql: None,
            fresh: false,
        }))
    }

    /// The reader that gets the binlog's split reads the snapshot with as many connections
    /// as the source has readers (`parallelism`): the others have nothing to read.
    fn create_reader(&self, ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        let mut settings = self
            .settings
            .clone()
            .ok_or_else(|| FerryError::internal("MySQL-CDC reader created before resolve"))?;
        if ctx.parallelism > 1 {
            settings = Arc::new(Settings {
                snapshot_readers: ctx.parallelism,
                ..(*settings).clone()
            });
        }
        Ok(Box::new(Reader {
            settings,
            readiness: Readiness::new(),
            fetcher: None,
            has_split: false,
            no_more: false,
            reached: false,
            control: Arc::default(),
            position: None,
            progress: Arc::default(),
        }))
    }
}

/// A split's state on Spark: where the micro-batch starts and where it ends.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct BoundedStart {
    /// The previous micro-batch's end (`None`: the job's first, from `startup.mode`).
    from: Option<Position>,
    bound: stream::Bound,
}

/// What a split's state holds: a position, or on Spark a bounded start.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum SplitState {
    Bounded(BoundedStart),
    Plain(Option<Position>),
}

/// Hands the one split to reader 0; on Spark, bounds each micro-batch.
struct Enumerator {
    assigned: bool,
    pending: Vec<Split>,
    settings: Option<Arc<Settings>>,
    /// The connection the bounds are asked on (opened at the first bound).
    sql: Option<mysql_async::Conn>,
    /// The split was handed out fresh since the last bound (see `bound_micro_batch`).
    fresh: bool,
}

impl SplitEnumerator for Enumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        let mut out: Vec<(usize, Split)> = self.pending.drain(..).map(|s| (0, s)).collect();
        if !self.assigned {
            self.assigned = true;
            self.fresh = true;
            out.push((
                0,
                Split {
                    id: SPLIT_ID.into(),
                    state: Value::Null,
                },
            ));
        }
        Ok(out)
    }
    fn is_exhausted(&self) -> bool {
        self.assigned && self.pending.is_empty()
    }
    fn add_splits_back(&mut self, splits: Vec<Split>, _reader: usize) {
        self.pending.extend(splits);
    }
    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Value> {
        Ok(json!({ "assigned": self.assigned, "pending": self.pending }))
    }

    /// The server's binlog end (`SHOW MASTER STATUS`, with the GTID state there): the
    /// micro-batch's readers stop there.
    fn bound_micro_batch(&mut self, _batch: u64) -> Result<Option<Value>> {
        let s = self
            .settings
            .clone()
            .ok_or_else(|| FerryError::internal("MySQL-CDC enumerator created before resolve"))?;
        let handle = ferry_api::io::handle()?;
        let mut sql = self.sql.take();
        let timeout = s.conn.connect_timeout;
        // The job's first micro-batch may start at its bound (startup.mode initial or
        // latest): its GTID state is then the reader's; later bounds are only stopped at.
        let exact = std::mem::take(&mut self.fresh);
        let (bound, sql) = handle.block_on(async {
            tokio::time::timeout(timeout, async {
                // A connection that failed since the last bound is opened again once.
                if let Some(c) = sql.as_mut() {
                    if let Ok((b, _)) = stream::server_end(c, &s.conn, exact).await {
                        return Ok((b, sql));
                    }
                }
                let mut c = connect_mysql(&s.conn, COMPONENT).await?;
                let (b, _) = stream::server_end(&mut c, &s.conn, exact).await?;
                Ok::<_, FerryError>((b, Some(c)))
            })
            .await
            .map_err(|_| {
                FerryError::external(
                    COMPONENT,
                    format!(
                        "asking {} for its binlog position did not finish within {} s",
                        s.conn.address(),
                        timeout.as_secs()
                    ),
                )
            })?
        })?;
        self.sql = sql;
        Ok(Some(
            serde_json::to_value(&bound).map_err(FerryError::internal)?,
        ))
    }
}

/// Reads the binlog through a fetch task on the I/O runtime.
struct Reader {
    settings: Arc<Settings>,
    readiness: Readiness,
    fetcher: Option<Fetcher<Item>>,
    has_split: bool,
    no_more: bool,
    /// A bounded micro-batch's bound was reached: the reader is finished.
    reached: bool,
    /// Asks the fetch task to stop (see [`Reader::close`]).
    control: Arc<stream::Control>,
    /// The position after the last item taken; `None` until the task has found its start.
    position: Option<Position>,
    /// How far behind the server the task is.
    progress: Arc<stream::Progress>,
}

impl SourceReader for Reader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for split in splits {
            if self.has_split {
                return Err(FerryError::internal(
                    "MySQL-CDC reader was given its split twice",
                ));
            }
            // Null: the job's first run, which takes its start from startup.mode.
            let (start, bound) = match split.read_state::<SplitState>()? {
                SplitState::Bounded(b) => (b.from, Some(b.bound)),
                SplitState::Plain(p) => (p, None),
            };
            self.position = start.clone();
            self.has_split = true;
            let (s, control, progress) = (
                self.settings.clone(),
                self.control.clone(),
                self.progress.clone(),
            );
            self.fetcher = Some(Fetcher::spawn(4, &self.readiness, move |tx| {
                stream::run(s, start, bound, control, progress, tx)
            })?);
        }
        Ok(())
    }

    fn no_more_splits(&mut self) {
        self.no_more = true;
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
        if self.reached {
            return Ok(ReadStatus::Finished);
        }
        let Some(f) = self.fetcher.as_mut() else {
            return Ok(if self.no_more {
                ReadStatus::Finished
            } else {
                ReadStatus::Idle(Duration::from_secs(1))
            });
        };
        loop {
            match f.try_next()? {
                Fetched::Item(Item::Rows(batch, pos)) => {
                    self.position = Some(pos);
                    return Ok(ReadStatus::Batch(batch));
                }
                Fetched::Item(Item::Moved(pos)) => self.position = Some(pos),
                Fetched::Item(Item::Reached(pos)) => {
                    // The task has ended its binlog dump: the server-id is free.
                    self.position = Some(pos);
                    self.reached = true;
                    return Ok(ReadStatus::Finished);
                }
                Fetched::Empty => return Ok(ReadStatus::Idle(Duration::from_secs(1))),
                Fetched::Closed => {
                    return Err(FerryError::external(
                        COMPONENT,
                        "the binlog task ended without an error",
                    ))
                }
            }
        }
    }

    fn readiness(&self) -> Option<Readiness> {
        Some(self.readiness.clone())
    }

    /// Replication lag (bytes of binlog between the server's end and the position
    /// returned, and the server's clock minus the time of the newest change returned, while
    /// behind) and the snapshot's progress (tables done of all, chunks read by this run;
    /// `streaming` 1 once every table's snapshot is done).
    fn figures(&self) -> Vec<(&'static str, f64)> {
        let Some(p) = &self.position else {
            return Vec::new();
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let lag_bytes = load(&self.progress.lag_bytes);
        let last = load(&self.progress.last_event_secs);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let lag_seconds = if lag_bytes > 0 && last > 0 {
            now.saturating_sub(last) as f64
        } else {
            0.0
        };
        let tables = self.settings.tables.len();
        let done = p.snapshotted.len().min(tables);
        vec![
            ("lag_bytes", lag_bytes as f64),
            ("lag_seconds", lag_seconds),
            ("snapshot_tables_done", done as f64),
            ("snapshot_tables_total", tables as f64),
            ("snapshot_chunks_read", load(&self.progress.chunks) as f64),
            ("streaming", if done >= tables { 1.0 } else { 0.0 }),
        ]
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Vec<Split>> {
        if !self.has_split {
            return Ok(Vec::new());
        }
        Ok(vec![Split::typed(SPLIT_ID, &self.position)?])
    }

    /// Ends the fetch task and its binlog dump, and returns once the task has seen the
    /// server drop the dump connection: a reader started next (the next micro-batch's, in
    /// any process) registers under the same `server-id` alone.
    fn close(&mut self) -> Result<()> {
        self.stop_task()
    }
}

impl Reader {
    fn stop_task(&mut self) -> Result<()> {
        let Some(mut f) = self.fetcher.take() else {
            return Ok(());
        };
        self.control.stop.store(true, Ordering::SeqCst);
        // Take what the task still queues (it may wait on a full queue) until it ends.
        let wait = stream::RELEASE_WAIT + Duration::from_secs(20);
        let deadline = std::time::Instant::now() + wait;
        loop {
            match f.try_next() {
                Ok(Fetched::Closed) => return Ok(()),
                Ok(Fetched::Item(_)) | Err(_) => continue,
                Ok(Fetched::Empty) => {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return Err(FerryError::external(
                            COMPONENT,
                            format!(
                                "the binlog task (server-id {}) did not end within {} s of closing the reader",
                                self.settings.server_id,
                                wait.as_secs()
                            ),
                        ));
                    }
                    let _ = self
                        .readiness
                        .receiver()
                        .recv_timeout(left.min(Duration::from_millis(100)));
                }
            }
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Err(e) = self.stop_task() {
            tracing::warn!("{e}");
        }
    }
}
