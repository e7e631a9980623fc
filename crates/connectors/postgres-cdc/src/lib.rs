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
//!   server without `wal_level = logical`, an added or dropped column, and an update whose
//!   unchanged TOASTed value the server did not send stop the job with the reason.
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
    Boundedness, EnumeratorContext, FerryError, JobContext, JobMode, OptionKind, OptionSpec,
    Options, PrimaryKey, ReadStatus, ReaderContext, ResolveContext, Result, Source, SourceFactory,
    SourceReader, Split, SplitEnumerator, TableSchema,
};
use ferry_connector_jdbc::pg::{connect_pg, describe_table, parse_url, ConnInfo, Dialect, Secret};
use serde_json::{json, Value};

use crate::stream::{CdcTable, Conv, Item, Position, Settings};

/// The component name in messages.
pub(crate) const COMPONENT: &str = "source Postgres-CDC";

/// The one split: the slot's stream (with the snapshot in it).
const SPLIT_ID: &str = "postgres-cdc";

/// Every option of the source, with SeaTunnel's names.
pub const OPTIONS: &[OptionSpec] = &[
    OptionSpec::required("base-url", OptionKind::String, "jdbc:postgresql://host:port/db, with URL properties after '?'."),
    OptionSpec::required("username", OptionKind::String, "User name; it needs the REPLICATION attribute (or superuser) and SELECT on the tables."),
    OptionSpec::optional("password", OptionKind::String, None, "Password; never shown in messages."),
    OptionSpec::optional("database-names", OptionKind::List, None, "The database (one; the base-url's database when absent)."),
    OptionSpec::optional("schema-names", OptionKind::List, None, "Schemas of the tables (informational: table-names name them)."),
    OptionSpec::required("table-names", OptionKind::List, "Tables to capture: database.schema.table."),
    OptionSpec::optional("table-names-config", OptionKind::List, None, "Per table { table = \"db.schema.table\", primaryKeys = [\"id\"] }: the key for tables without a primary key."),
    OptionSpec::optional("startup.mode", OptionKind::Enum(&["initial", "latest", "earliest"]), Some("initial"), "initial: the tables' rows, then their changes; latest/earliest: changes only, from the slot's position (a new slot starts now)."),
    OptionSpec::optional("stop.mode", OptionKind::Enum(&["never"]), Some("never"), "The stream never ends."),
    OptionSpec::optional("snapshot.split.size", OptionKind::Int, Some("8096"), "Rows per snapshot chunk (by key)."),
    OptionSpec::optional("snapshot.fetch.size", OptionKind::Int, Some("1024"), "Rows per batch of changes."),
    OptionSpec::optional("slot.name", OptionKind::String, Some("seatunnel"), "The logical replication slot (created when missing)."),
    OptionSpec::optional("publication.name", OptionKind::String, None, "The publication (created when missing, tables added to it): default <slot.name>_publication, or debezium.publication.name."),
    OptionSpec::optional("decoding.plugin.name", OptionKind::String, Some("pgoutput"), "Accepted: decoderbufs and wal2json job files are read with pgoutput, which every server has."),
    OptionSpec::optional("server-time-zone", OptionKind::String, Some("UTC"), "Accepted: values are read in binary, in UTC."),
    OptionSpec::optional("connect.timeout.ms", OptionKind::Int, Some("30000"), "How long to wait for a connection."),
    OptionSpec::optional("connect.max-retries", OptionKind::Int, Some("3"), "Accepted for compatibility."),
    OptionSpec::optional("connection.pool.size", OptionKind::Int, Some("20"), "Accepted for compatibility."),
    OptionSpec::optional("chunk-key.even-distribution.factor.upper-bound", OptionKind::Float, Some("100"), "Accepted: chunks are cut by key with LIMIT, even or not."),
    OptionSpec::optional("chunk-key.even-distribution.factor.lower-bound", OptionKind::Float, Some("0.05"), "Accepted: see the upper bound."),
    OptionSpec::optional("sample-sharding.threshold", OptionKind::Int, Some("1000"), "Accepted for compatibility."),
    OptionSpec::optional("inverse-sampling.rate", OptionKind::Int, Some("1000"), "Accepted for compatibility."),
    OptionSpec::optional("exactly_once", OptionKind::Bool, Some("false"), "Refuse tables without a key (whose snapshot cannot be reconciled with their changes)."),
    OptionSpec::optional("format", OptionKind::Enum(&["DEFAULT"]), Some("DEFAULT"), "Rows in the tables' schemas (COMPATIBLE_DEBEZIUM_JSON is not supported yet)."),
    OptionSpec::optional("debezium", OptionKind::Object, None, "Debezium properties: publication.name is used, the others are accepted and ignored."),
];

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
    fetch_size: usize,
    exactly_once: bool,
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
        let url = o.required_string("base-url")?;
        let parts = parse_url(&url).map_err(|m| o.error("base-url", m))?;
        if parts.dialect != Dialect::Postgres {
            return Err(o.error("base-url", "is not a jdbc:postgresql:// URL"));
        }
        let user = o.required_string("username")?;
        let password = o.string("password")?.filter(|p| !p.is_empty()).map(Secret);
        let mut database = parts.database.clone();
        if let Some(dbs) = o.string_list("database-names")? {
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
        let _ = o.string_list("schema-names")?;
        let tables = o.string_list("table-names")?.unwrap_or_default();
        if tables.is_empty() {
            return Err(o.error("table-names", "lists no table"));
        }
        for t in &tables {
            if t.split('.').count() != 3 {
                return Err(o.error("table-names", format!("'{t}' is not database.schema.table")));
            }
        }
        let mut keys = BTreeMap::new();
        if let Some(items) = o.list("table-names-config")? {
            for (i, item) in items.into_iter().enumerate() {
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
        }
        let mode = o
            .string("startup.mode")?
            .unwrap_or_else(|| "initial".into());
        let snapshot_on_start = match mode.to_ascii_lowercase().as_str() {
            "initial" => true,
            "latest" | "earliest" => false,
            other => {
                return Err(o.error(
                    "startup.mode",
                    format!("'{other}' is not one of initial, latest, earliest (specific and timestamp need a position the slot cannot seek to)"),
                ))
            }
        };
        if let Some(m) = o.string("stop.mode")? {
            if !m.eq_ignore_ascii_case("never") {
                return Err(o.error(
                    "stop.mode",
                    format!("'{m}' is not supported: the stream runs until the job stops"),
                ));
            }
        }
        let split_size = o.u64("snapshot.split.size")?.unwrap_or(8096).max(1) as usize;
        let fetch_size = o.u64("snapshot.fetch.size")?.unwrap_or(1024).max(1) as usize;
        let slot = o.string("slot.name")?.unwrap_or_else(|| "seatunnel".into());
        let debezium = o.object("debezium")?.unwrap_or_default();
        let publication = match o.string("publication.name")? {
            Some(p) => p,
            None => debezium
                .get("publication.name")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("{slot}_publication")),
        };
        if let Some(p) = o.string("decoding.plugin.name")? {
            if p != "pgoutput" {
                tracing::info!("{COMPONENT}: decoding.plugin.name = {p} is read with pgoutput, which every PostgreSQL server has");
            }
        }
        let _ = o.string("server-time-zone")?;
        let timeout = o.u64("connect.timeout.ms")?.unwrap_or(30_000).max(1000);
        let _ = o.u64("connect.max-retries")?;
        let _ = o.u64("connection.pool.size")?;
        let _ = o.f64("chunk-key.even-distribution.factor.upper-bound")?;
        let _ = o.f64("chunk-key.even-distribution.factor.lower-bound")?;
        let _ = o.u64("sample-sharding.threshold")?;
        let _ = o.u64("inverse-sampling.rate")?;
        let exactly_once = o.bool("exactly_once")?.unwrap_or(false);
        if let Some(f) = o.string("format")? {
            if !f.eq_ignore_ascii_case("default") {
                return Err(o.error(
                    "format",
                    format!("'{f}' is not supported yet: Postgres-CDC writes rows in the tables' schemas (DEFAULT)"),
                ));
            }
        }
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
                fetch_size,
                exactly_once,
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
        "uuid" => Conv::Uuid,
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

async fn check_server(conn: &ConnInfo) -> Result<()> {
    let sql = connect_pg(conn, COMPONENT).await?;
    let rows = sql
        .query("SELECT current_setting('wal_level')", &[])
        .await
        .map_err(|e| {
            FerryError::external(COMPONENT, ferry_connector_jdbc::pg::pg_error_text(&e))
        })?;
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
        check_server(&c.conn).await?;
        let mut out = Vec::with_capacity(c.tables.len());
        for path in &c.tables {
            let d = describe_table(&c.conn, path).await?;
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
            out.push(CdcTable {
                schema,
                columns: d.columns,
                convs,
                key,
                pg_schema,
                pg_table,
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
            fetch_size: c.fetch_size,
            tables,
            snapshot_on_start: c.snapshot_on_start,
        }));
        Ok(())
    }

    fn boundedness(&self) -> Boundedness {
        Boundedness::Unbounded
    }

    fn tables(&self) -> Vec<TableSchema> {
        self.settings
            .as_ref()
            .map(|s| s.tables.iter().map(|t| t.schema.clone()).collect())
            .unwrap_or_default()
    }

    /// Restoring a position replays the change stream exactly; a snapshot chunk in flight
    /// is read again, reconciled with the changes by key, so tables without a key are not
    /// replayed exactly.
    fn is_replayable(&self) -> bool {
        self.settings
            .as_ref()
            .is_some_and(|s| s.tables.iter().all(|t| !t.key.is_empty()))
    }

    /// A replication slot streams to one connection at a time, and its position must be
    /// confirmed through that connection once Spark has committed a batch: the reader has
    /// to outlive its micro-batch, which Spark's read tasks do not promise.
    fn needs_long_lived_reader(&self) -> Option<String> {
        Some(
            "it streams from a replication slot, which one connection holds at a time and \
             confirms through: a Spark read task ends with its micro-batch (not supported \
             on Spark yet)"
                .into(),
        )
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
            .cloned()
            .map(serde_json::from_value::<Vec<Split>>)
            .transpose()
            .map_err(|e| FerryError::internal(format!("Postgres-CDC enumerator state: {e}")))?
            .unwrap_or_default();
        Ok(Box::new(Enumerator { assigned, pending }))
    }

    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        let settings = self
            .settings
            .clone()
            .ok_or_else(|| FerryError::internal("Postgres-CDC reader created before resolve"))?;
        Ok(Box::new(Reader {
            settings,
            readiness: Readiness::new(),
            fetcher: None,
            has_split: false,
            no_more: false,
            position: None,
            ack: Arc::new(AtomicU64::new(0)),
            taken: Vec::new(),
        }))
    }
}

/// Hands the one split to reader 0.
struct Enumerator {
    assigned: bool,
    pending: Vec<Split>,
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
}

/// Reads the slot through a fetch task on the I/O runtime.
struct Reader {
    settings: Arc<Settings>,
    readiness: Readiness,
    fetcher: Option<Fetcher<Item>>,
    has_split: bool,
    no_more: bool,
    /// The position after the last item taken; `None` until the task has set up the slot.
    position: Option<Position>,
    /// The newest position confirmed downstream, which the task reports to the server.
    ack: Arc<AtomicU64>,
    /// Positions snapshotted at checkpoints, confirmed when those complete.
    taken: Vec<(u64, u64)>,
}

impl SourceReader for Reader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for split in splits {
            if self.has_split {
                return Err(FerryError::internal(
                    "Postgres-CDC reader was given its split twice",
                ));
            }
            let start: Option<Position> = match split.state {
                Value::Null => None,
                v => Some(serde_json::from_value(v).map_err(|e| {
                    FerryError::external(
                        COMPONENT,
                        format!("the checkpoint's position cannot be read: {e}"),
                    )
                })?),
            };
            self.position = start.clone();
            self.has_split = true;
            let (s, ack) = (self.settings.clone(), self.ack.clone());
            self.fetcher = Some(Fetcher::spawn(4, &self.readiness, move |tx| {
                stream::run(s, start, ack, tx)
            })?);
        }
        Ok(())
    }

    fn no_more_splits(&mut self) {
        self.no_more = true;
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
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

    fn snapshot(&mut self, checkpoint_id: u64) -> Result<Vec<Split>> {
        if !self.has_split {
            return Ok(Vec::new());
        }
        let state = match &self.position {
            Some(p) => {
                self.taken.push((checkpoint_id, p.lsn));
                serde_json::to_value(p)
                    .map_err(|e| FerryError::internal(format!("Postgres-CDC position: {e}")))?
            }
            None => Value::Null,
        };
        Ok(vec![Split {
            id: SPLIT_ID.into(),
            state,
        }])
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
        }
        Ok(())
    }
}
