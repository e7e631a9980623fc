//! # ferry-connector-postgres-cdc
//!
//! SeaTunnel's `Postgres-CDC` source: the tables' current rows, then every change to them,
//! read from a logical replication slot with the built-in `pgoutput` plugin (binary
//! values), as rows with their row kinds (`+I -U +U -D`) in the tables' Arrow schemas.
//!
//! - **One reader follows the slot** (the split `postgres-cdc`, reader 0); its state is a
//!   [`stream::Position`]: where the stream resumes, how much of the next transaction was
//!   returned, and how far the snapshot got. Restoring a checkpoint resumes exactly there.
//! - **The snapshot needs no lock and no long transaction**: chunks by key, each read
//!   between two watermarks the reader writes into the WAL and reconciled with the changes
//!   that arrive between them (see [`stream`]). A crash re-reads at most one chunk.
//! - **The slot advances only behind committed checkpoints**: the reader confirms a
//!   position to the server when the checkpoint holding it completes (and, on start, the
//!   position it was restored from), never the position it has read. While the captured
//!   tables are idle the position still moves with the server's keepalives, so WAL does
//!   not pile up.
//! - **Refusals, not silent restarts**: a dropped, invalidated or foreign-advanced slot, a
//!   server without `wal_level = logical`, and an added or dropped column stop the job
//!   with the reason.
//! - **Unchanged TOASTed values**: an update that leaves an out-of-line value alone does
//!   not send it. With `REPLICA IDENTITY FULL` it is taken from the old row; otherwise the
//!   row marks the column unchanged ([`ferry_api::Unchanged`]), the Jdbc sink updates the
//!   row's other columns only, and any other sink or transform refuses the row rather than
//!   write NULL.
//! - **`format = COMPATIBLE_DEBEZIUM_JSON`** (SeaTunnel's): each change becomes one row
//!   `topic, key, value` of Debezium's JSON, as Debezium's PostgreSQL connector writes it
//!   (`ferry_formats::debezium_envelope`); an update's `-U`/`+U` pair is one event.
//!
//! See `docs/connectors/Postgres-CDC.md`.

mod pgoutput;
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
use ferry_db::relation::describe_pg_table;
use ferry_db::{connect_pg, parse_url, pg_error_text, ConnInfo, Dialect, Secret};
use ferry_formats::debezium_envelope::{
    self, Connector, EnvelopeOptions, TableEnvelope, TableName,
};
use serde_json::{json, Map, Value};

use crate::stream::{CdcTable, Conv, Item, Position, Settings};

/// The component name in messages.
pub(crate) const COMPONENT: &str = "source Postgres-CDC";

/// The one split: the slot's stream (with the snapshot in it).
const SPLIT_ID: &str = "postgres-cdc";

const STARTUP_MODES: &[&str] = &["initial", "latest", "earliest"];
const STOP_MODES: &[&str] = &["never", "latest"];
const FORMATS: &[&str] = &["DEFAULT", "COMPATIBLE_DEBEZIUM_JSON"];

ferry_api::declare_options! {
    /// The options of the source, with SeaTunnel's names.
    struct CdcOptions => OPTIONS {
        /// jdbc:postgresql://host:port/db, with URL properties after '?'.
        base_url: String = "base-url" | "url", required;
        /// User name; it needs the REPLICATION attribute (or superuser) and SELECT on the tables.
        username: String = "username", required;
        /// Password; never shown in messages.
        password: String = "password", optional;
        /// The database (one; the base-url's database when absent).
        database_names: Vec<String> = "database-names", optional;
        /// Schemas of the tables (informational: table-names name them).
        _schema_names: Vec<String> = "schema-names", optional;
        /// Tables to capture: database.schema.table.
        table_names: Vec<String> = "table-names", required;
        /// Per table { table = "db.schema.table", primaryKeys = ["id"] }: the key for tables without a primary key.
        table_names_config: Vec<Value> = "table-names-config", optional;
        /// initial: the tables' rows, then their changes; latest/earliest: changes only, from the slot's position (a new slot starts now).
        startup_mode: String = "startup.mode", default "initial", values STARTUP_MODES;
        /// never: the stream runs until the job stops; latest: the job ends once the snapshot is complete and the stream has reached the WAL's end as of the job's first start (embedded engine only).
        stop_mode: String = "stop.mode", default "never", values STOP_MODES;
        /// Rows per snapshot chunk (by key).
        split_size: u64 = "snapshot.split.size", default 8096;
        /// Rows per batch of changes.
        fetch_size: u64 = "snapshot.fetch.size", default 1024;
        /// The logical replication slot (created when missing).
        slot: String = "slot.name", default "seatunnel";
        /// The publication (created when missing, tables added to it): default <slot.name>_publication, or debezium.publication.name.
        publication: String = "publication.name", optional;
        /// Accepted: decoderbufs and wal2json job files are read with pgoutput, which every server has.
        decoding_plugin: String = "decoding.plugin.name", default "pgoutput";
        /// Accepted: values are read in binary, in UTC.
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
        /// Debezium properties: publication.name is used; with COMPATIBLE_DEBEZIUM_JSON also database.server.name (the topics' prefix), key/value.converter.schemas.enable and decimal.handling.mode; the others are accepted and ignored.
        debezium: Map<String, Value> = "debezium", optional;
    }
}

/// The factory of SeaTunnel's `Postgres-CDC` source.
pub struct PostgresCdcSourceFactory;

/// What `create` read, before the catalog is asked.
#[derive(Debug)]
struct Config {
    conn: ConnInfo,
    tables: Vec<String>,
    keys: BTreeMap<String, Vec<String>>,
    slot: String,
    publication: String,
    snapshot_on_start: bool,
    split_size: usize,
    /// `stop.mode = latest`.
    stop_latest: bool,
    /// `chunk-key.even-distribution.factor.lower-bound` and `upper-bound`.
    even_factor: (f64, f64),
    fetch_size: usize,
    exactly_once: bool,
    /// `format = COMPATIBLE_DEBEZIUM_JSON`: the JSON's settings.
    debezium: Option<EnvelopeOptions>,
}

impl SourceFactory for PostgresCdcSourceFactory {
    fn name(&self) -> &'static str {
        "Postgres-CDC"
    }

    fn description(&self) -> &'static str {
        "Captures PostgreSQL tables: a lock-free snapshot, then their changes from a logical replication slot (pgoutput)"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        if job.mode != JobMode::Streaming {
            return Err(o.location().error(
                "job.mode",
                "Postgres-CDC reads a change stream that never ends: run it in a STREAMING job",
            ));
        }
        let c = CdcOptions::read(o)?;
        let parts = parse_url(&c.base_url).map_err(|m| o.error("base-url", m))?;
        if parts.dialect != Dialect::Postgres {
            return Err(o.error("base-url", "is not a jdbc:postgresql:// URL"));
        }
        let user = c.username;
        let password = c.password.filter(|p| !p.is_empty()).map(Secret);
        let mut database = parts.database.clone();
        if let Some(dbs) = c.database_names {
            match dbs.as_slice() {
                [] => {}
                [one] => database = one.clone(),
                _ => {
                    return Err(o.error(
                        "database-names",
                        "lists several databases: a replication slot belongs to one; use one source per database",
                    ))
                }
            }
        }
        let tables = c.table_names;
        if tables.is_empty() {
            return Err(o.error("table-names", "lists no table"));
        }
        for t in &tables {
            if t.split('.').count() != 3 {
                return Err(o.error("table-names", format!("'{t}' is not database.schema.table")));
            }
        }
        let mut keys = BTreeMap::new();
        for (i, item) in c.table_names_config.into_iter().flatten().enumerate() {
            let table = item.get("table").and_then(Value::as_str);
            let pk = item.get("primaryKeys").and_then(Value::as_array);
            let (Some(table), Some(pk)) = (table, pk) else {
                return Err(o.error(
                    &format!("table-names-config[{i}]"),
                    "expected { table = \"db.schema.table\", primaryKeys = [\"id\"] }",
                ));
            };
            let cols: Vec<String> = pk
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
            keys.insert(table.to_string(), cols);
        }
        let snapshot_on_start = match c.startup_mode.to_ascii_lowercase().as_str() {
            "initial" => true,
            "latest" | "earliest" => false,
            other => {
                return Err(o.error(
                    "startup.mode",
                    format!("'{other}' is not one of initial, latest, earliest (specific and timestamp need a position the slot cannot seek to)"),
                ))
            }
        };
        let stop_latest = match c.stop_mode.to_ascii_lowercase().as_str() {
            "never" => false,
            "latest" => true,
            other => {
                return Err(o.error(
                    "stop.mode",
                    format!("'{other}' is not one of never, latest (specific and timestamp need a position the slot cannot tell in advance)"),
                ))
            }
        };
        let split_size = c.split_size.max(1) as usize;
        let even_factor = (c.factor_lower, c.factor_upper);
        let fetch_size = c.fetch_size.max(1) as usize;
        let slot = c.slot;
        let debezium_props = c.debezium.unwrap_or_default();
        let publication = match c.publication {
            Some(p) => p,
            None => debezium_envelope::debezium_property(&debezium_props, "publication.name")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("{slot}_publication")),
        };
        if c.decoding_plugin != "pgoutput" {
            let p = &c.decoding_plugin;
            tracing::info!("{COMPONENT}: decoding.plugin.name = {p} is read with pgoutput, which every PostgreSQL server has");
        }
        let timeout = c.connect_timeout_ms.max(1000);
        let exactly_once = c.exactly_once;
        let debezium = EnvelopeOptions::for_format(Connector::Postgres, &c.format, &debezium_props)
            .map_err(|(option, e)| o.error(option, e))?;
        o.finish(OPTIONS)?;
        let conn = ConnInfo {
            dialect: Dialect::Postgres,
            host: parts.host,
            port: parts.port,
            database,
            user,
            password,
            properties: parts.properties,
            connect_timeout: Duration::from_millis(timeout),
        };
        Ok(Box::new(PostgresCdcSource {
            config: Arc::new(Config {
                conn,
                tables,
                keys,
                slot,
                publication,
                snapshot_on_start,
                split_size,
                stop_latest,
                even_factor,
                fetch_size,
                exactly_once,
                debezium,
            }),
            settings: None,
        }))
    }
}

/// A configured `Postgres-CDC` source.
#[derive(Debug)]
pub struct PostgresCdcSource {
    config: Arc<Config>,
    settings: Option<Arc<Settings>>,
}

/// How the change stream's binary value of a column of `source_type` is read, or why it
/// cannot be.
fn conv_for(source_type: &str) -> std::result::Result<Conv, &'static str> {
    Ok(match source_type {
        "inet" => Conv::Inet { cidr: false },
        "cidr" => Conv::Inet { cidr: true },
        "macaddr" => Conv::Macaddr,
        "oid" => Conv::Oid,
        "timetz" => Conv::TimeTz,
        "money" | "interval" | "geometry" | "geography" => {
            return Err("its binary form in the change stream is not decoded yet")
        }
        _ => Conv::Same,
    })
}

/// Whether the table's replica identity is FULL (the row before an update is whole).
async fn replica_identity_full(
    sql: &tokio_postgres::Client,
    schema: &str,
    table: &str,
) -> Result<bool> {
    let rows = sql
        .query(
            "SELECT c.relreplident::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2",
            &[&schema, &table],
        )
        .await
        .map_err(|e| FerryError::external(COMPONENT, pg_error_text(&e)))?;
    Ok(rows.first().map(|r| r.get::<_, String>(0)).as_deref() == Some("f"))
}

/// The Debezium description of a captured table (`format = COMPATIBLE_DEBEZIUM_JSON`).
#[allow(clippy::too_many_arguments)]
fn envelope_of(
    opts: &EnvelopeOptions,
    database: &str,
    pg_schema: &str,
    pg_table: &str,
    schema: &TableSchema,
    columns: &[ferry_db::ColumnDef],
    key: &[String],
    full_before: bool,
) -> TableEnvelope {
    let described: Vec<(&str, &str)> = columns
        .iter()
        .map(|c| (c.name.as_str(), c.source_type.as_str()))
        .collect();
    TableEnvelope::of_table(
        Connector::Postgres,
        opts,
        TableName {
            db: database,
            schema: Some(pg_schema),
            table: pg_table,
        },
        schema.schema.fields(),
        &described,
        key,
        full_before,
    )
}

async fn check_server(sql: &tokio_postgres::Client, conn: &ConnInfo) -> Result<()> {
    let rows = sql
        .query("SELECT current_setting('wal_level')", &[])
        .await
        .map_err(|e| FerryError::external(COMPONENT, pg_error_text(&e)))?;
    let level: String = rows.first().map(|r| r.get(0)).unwrap_or_default();
    if level != "logical" {
        return Err(FerryError::external(
            COMPONENT,
            format!(
                "PostgreSQL at {} has wal_level = {level}; logical decoding needs wal_level = logical \
                 (ALTER SYSTEM SET wal_level = logical, then restart the server)",
                conn.address()
            ),
        ));
    }
    Ok(())
}

impl PostgresCdcSource {
    async fn describe(&self) -> Result<Vec<CdcTable>> {
        let c = &self.config;
        // One connection checks the server and describes every table.
        let client = connect_pg(&c.conn, COMPONENT).await?;
        check_server(&client, &c.conn).await?;
        let mut out = Vec::with_capacity(c.tables.len());
        for path in &c.tables {
            let d = describe_pg_table(&client, &c.conn, COMPONENT, path).await?;
            let parts: Vec<&str> = path.split('.').collect();
            let (pg_schema, pg_table) = (parts[1].to_string(), parts[2].to_string());
            let mut convs = Vec::with_capacity(d.columns.len());
            for col in &d.columns {
                convs.push(conv_for(&col.source_type).map_err(|why| {
                    FerryError::config(format!(
                        "{COMPONENT}: column '{}' of {path} has type {}: {why}",
                        col.name, col.source_type
                    ))
                })?);
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
                    name: format!("pk_{pg_table}"),
                    columns: k.clone(),
                });
                schema = schema.with_catalog(catalog);
            }
            // A delete (and an update's row before) carries only the key when the table's
            // replica identity is the default: every other column may be NULL in those rows.
            let fields: Vec<arrow::datatypes::Field> = schema
                .schema
                .fields()
                .iter()
                .map(|f| {
                    let keyed = key.iter().any(|k| k == f.name());
                    f.as_ref().clone().with_nullable(!keyed || f.is_nullable())
                })
                .collect();
            let schema = schema.derive(
                schema.name.clone(),
                Arc::new(arrow::datatypes::Schema::new(fields)),
            );
            if key.is_empty() && c.exactly_once {
                return Err(FerryError::config(format!(
                    "{COMPONENT}: {path} has no primary or unique key, so its snapshot cannot be \
                     reconciled with its changes and exactly_once = true cannot hold; give it a key \
                     in table-names-config, or set exactly_once = false (at-least-once)"
                )));
            }
            let envelope = match &c.debezium {
                Some(opts) => {
                    let full = replica_identity_full(&client, &pg_schema, &pg_table).await?;
                    Some(Arc::new(envelope_of(
                        opts,
                        &c.conn.database,
                        &pg_schema,
                        &pg_table,
                        &schema,
                        &d.columns,
                        &key,
                        full,
                    )))
                }
                None => None,
            };
            out.push(CdcTable {
                schema,
                columns: d.columns,
                convs,
                key,
                pg_schema,
                pg_table,
                envelope,
            });
        }
        Ok(out)
    }
}

impl Source for PostgresCdcSource {
    fn resolve(&mut self, ctx: &ResolveContext) -> Result<()> {
        let what = format!(
            "reading the tables' columns from {}",
            self.config.conn.address()
        );
        let tables = ctx.block_on(&what, self.describe())?;
        let c = &self.config;
        self.settings = Some(Arc::new(Settings {
            conn: c.conn.clone(),
            slot: c.slot.clone(),
            publication: c.publication.clone(),
            split_size: c.split_size,
            even_factor: c.even_factor,
            fetch_size: c.fetch_size,
            tables,
            snapshot_on_start: c.snapshot_on_start,
            stop_latest: c.stop_latest,
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
        if self.config.debezium.is_some() {
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

    /// `stop.mode = latest` ends the reader, which Spark's micro-batches cannot follow: on
    /// Spark a streaming query's source does not end.
    fn needs_long_lived_reader(&self) -> Option<String> {
        self.config.stop_latest.then(|| {
            "stop.mode = latest ends the stream when it reaches the WAL's end as of the job's start; a Spark streaming query cannot end with its source (use stop.mode = never there)".to_string()
        })
    }

    /// Restoring a position replays the change stream exactly; a snapshot chunk in flight
    /// is read again, reconciled with the changes by key, so tables without a key are not
    /// replayed exactly.
    fn is_replayable(&self) -> bool {
        self.settings
            .as_ref()
            .is_some_and(|s| s.tables.iter().all(|t| !t.key.is_empty()))
    }

    /// On Spark each micro-batch ends at a bound the enumerator writes into the WAL
    /// ([`SplitEnumerator::bound_micro_batch`]); its reader starts at the previous batch's
    /// end, which Spark has committed, confirms that position, reads to the bound and ends
    /// its replication connection before the micro-batch ends. `end`, on a replay, bounds
    /// the snapshot chunks to the key ranges the first read covered.
    fn bound_splits_at(
        &self,
        start: Vec<Split>,
        bound: &Value,
        end: Option<&[Split]>,
    ) -> Result<Vec<Split>> {
        let lsn = bound.get("lsn").and_then(Value::as_u64).ok_or_else(|| {
            FerryError::internal(format!("a Postgres-CDC bound without an LSN: {bound}"))
        })?;
        let until = match end.and_then(|e| e.iter().find(|s| s.id == SPLIT_ID)) {
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
                        bound: stream::Bound {
                            lsn,
                            until: until.clone(),
                        },
                    },
                )
            })
            .collect()
    }

    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
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
            .map(|v| decode_state::<Vec<Split>>(v, "the Postgres-CDC enumerator"))
            .transpose()?
            .unwrap_or_default();
        Ok(Box::new(Enumerator {
            assigned,
            pending,
            settings: self.settings.clone(),
            job_id: ctx.job.job_id.clone(),
            sql: None,
        }))
    }

    /// The reader that gets the slot's split reads the snapshot with as many connections
    /// as the source has readers (`parallelism`): the others have nothing to read.
    fn create_reader(&self, ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        let mut settings = self
            .settings
            .clone()
            .ok_or_else(|| FerryError::internal("Postgres-CDC reader created before resolve"))?;
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
            ack: Arc::new(AtomicU64::new(0)),
            progress: Arc::default(),
            taken: Vec::new(),
        }))
    }
}

/// A split's state on Spark: where the micro-batch starts and where it ends.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct BoundedStart {
    /// The previous micro-batch's end (`None`: the job's first, from the slot).
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
    job_id: String,
    /// The connection the bounds are written through (opened at the first bound).
    sql: Option<tokio_postgres::Client>,
}

impl SplitEnumerator for Enumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        let mut out: Vec<(usize, Split)> = self.pending.drain(..).map(|s| (0, s)).collect();
        if !self.assigned {
            self.assigned = true;
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

    /// Writes a message into the WAL (`pg_logical_emit_message`, prefix `ferry-bound`,
    /// `<job id>:<batch>`) and returns its LSN: the micro-batch's readers stop there.
    fn bound_micro_batch(&mut self, batch: u64) -> Result<Option<Value>> {
        let s = self.settings.clone().ok_or_else(|| {
            FerryError::internal("Postgres-CDC enumerator created before resolve")
        })?;
        let content = format!("{}:{batch}", self.job_id);
        let handle = ferry_api::io::handle()?;
        let mut sql = self.sql.take();
        let timeout = s.conn.connect_timeout;
        let (lsn, sql) = handle.block_on(async {
            tokio::time::timeout(timeout, async {
                // A connection that failed since the last bound is opened again once.
                if let Some(c) = &sql {
                    if let Ok(lsn) = stream::emit_message(c, stream::BOUND_PREFIX, &content).await {
                        return Ok((lsn, sql));
                    }
                }
                let c = connect_pg(&s.conn, COMPONENT).await?;
                let lsn = stream::emit_message(&c, stream::BOUND_PREFIX, &content)
                    .await
                    .map_err(|e| FerryError::external(COMPONENT, pg_error_text(&e)))?;
                sql = Some(c);
                Ok::<_, FerryError>((lsn, sql))
            })
            .await
            .map_err(|_| {
                FerryError::external(
                    COMPONENT,
                    format!(
                        "writing the micro-batch bound on {} did not finish within {} s",
                        s.conn.address(),
                        timeout.as_secs()
                    ),
                )
            })?
        })?;
        self.sql = sql;
        if lsn == 0 {
            return Err(FerryError::external(
                COMPONENT,
                "pg_logical_emit_message returned no LSN",
            ));
        }
        Ok(Some(json!({ "lsn": lsn })))
    }
}

/// Reads the slot through a fetch task on the I/O runtime.
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
    /// The position after the last item taken; `None` until the task has set up the slot.
    position: Option<Position>,
    /// The newest position confirmed downstream, which the task reports to the server.
    ack: Arc<AtomicU64>,
    /// Positions snapshotted at checkpoints, confirmed when those complete.
    taken: Vec<(u64, u64)>,
    /// How far behind the server the task is.
    progress: Arc<stream::Progress>,
}

impl SourceReader for Reader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for split in splits {
            if self.has_split {
                return Err(FerryError::internal(
                    "Postgres-CDC reader was given its split twice",
                ));
            }
            // Null: the job's first run, which takes its start from the slot.
            let (start, bound) = match split.read_state::<SplitState>()? {
                SplitState::Bounded(b) => (b.from, Some(b.bound)),
                SplitState::Plain(p) => (p, None),
            };
            self.position = start.clone();
            self.has_split = true;
            let (s, ack, control, progress) = (
                self.settings.clone(),
                self.ack.clone(),
                self.control.clone(),
                self.progress.clone(),
            );
            self.fetcher = Some(Fetcher::spawn(4, &self.readiness, move |tx| {
                stream::run(s, start, bound, ack, control, progress, tx)
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
                    // The task has ended its replication connection; the slot is free.
                    self.position = Some(pos);
                    self.reached = true;
                    return Ok(ReadStatus::Finished);
                }
                Fetched::Empty => return Ok(ReadStatus::Idle(Duration::from_secs(1))),
                Fetched::Closed => {
                    return Err(FerryError::external(
                        COMPONENT,
                        "the replication task ended without an error",
                    ))
                }
            }
        }
    }

    fn readiness(&self) -> Option<Readiness> {
        Some(self.readiness.clone())
    }

    /// Replication lag (bytes of WAL behind the server's end, and the server's clock minus
    /// the commit time of the newest change returned, while behind) and the snapshot's
    /// progress (tables done of all, chunks read by this run; `streaming` 1 once every
    /// table's snapshot is done).
    fn figures(&self) -> Vec<(&'static str, f64)> {
        let Some(p) = &self.position else {
            return Vec::new();
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let lag_bytes = load(&self.progress.server_wal_end).saturating_sub(p.lsn);
        let last_commit = self.progress.last_commit_micros.load(Ordering::Relaxed);
        let server_time = self.progress.server_time_micros.load(Ordering::Relaxed);
        let lag_seconds = if lag_bytes > 0 && last_commit > 0 {
            (server_time - last_commit).max(0) as f64 / 1e6
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

    fn snapshot(&mut self, checkpoint_id: u64) -> Result<Vec<Split>> {
        if !self.has_split {
            return Ok(Vec::new());
        }
        if let Some(p) = &self.position {
            self.taken.push((checkpoint_id, p.lsn));
        }
        Ok(vec![Split::typed(SPLIT_ID, &self.position)?])
    }

    fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        let done: Vec<u64> = self
            .taken
            .iter()
            .filter(|(c, _)| *c <= checkpoint_id)
            .map(|(_, l)| *l)
            .collect();
        self.taken.retain(|(c, _)| *c > checkpoint_id);
        if let Some(lsn) = done.into_iter().max() {
            self.ack.fetch_max(lsn, Ordering::SeqCst);
            if self.reached && self.settings.stop_latest {
                self.confirm_stopped(lsn);
            }
        }
        Ok(())
    }

    /// Ends the fetch task and its replication connection, and returns once the task has
    /// seen the server release the slot: a reader started next (the next micro-batch's, in
    /// any process) finds it free.
    fn close(&mut self) -> Result<()> {
        self.stop_task()
    }
}

impl Reader {
    /// A `stop.mode = latest` job has ended its stream, and a checkpoint up to `lsn` is
    /// complete: the slot is advanced there (the replication connection that confirms
    /// positions is gone), so that it holds no WAL the job has delivered. A failure leaves
    /// the slot where the last confirmation put it (a later run reads from there again)
    /// and is logged.
    fn confirm_stopped(&self, lsn: u64) {
        let s = self.settings.clone();
        let advanced = ferry_api::io::handle().and_then(|h| {
            h.block_on(async {
                let c = connect_pg(&s.conn, COMPONENT).await?;
                c.query(
                    "SELECT pg_replication_slot_advance($1, $2::text::pg_lsn) \
                     FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn < $2::text::pg_lsn",
                    &[&s.slot, &stream::lsn_text(lsn)],
                )
                .await
                .map_err(|e| FerryError::external(COMPONENT, pg_error_text(&e)))?;
                Ok::<_, FerryError>(())
            })
        });
        if let Err(e) = advanced {
            tracing::warn!(
                "{COMPONENT}: could not advance slot '{}' to {} after the stream ended: {e}",
                s.slot,
                stream::lsn_text(lsn)
            );
        }
    }

    fn stop_task(&mut self) -> Result<()> {
        let Some(mut f) = self.fetcher.take() else {
            return Ok(());
        };
        self.control.stop.store(true, Ordering::SeqCst);
        // Take what the task still queues (it may wait on a full queue) until it ends.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
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
                                "the replication task of slot '{}' did not end within 30 s of closing the reader",
                                self.settings.slot
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
