//! The reader's fetch task: the server's binlog as a replica reads it, with the snapshot
//! read chunk by chunk on a second connection and reconciled with the binlog.
//!
//! # Positions
//! A [`Position`] is the reader's checkpointed state. `file`/`pos` is where the next
//! transaction starts in the binlog: every transaction before it has been returned in
//! full. `skip` counts the changes of that transaction already returned (a big
//! transaction is returned in several batches, so a checkpoint may fall inside it; after a
//! restart the server sends it again from its start and the first `skip` changes are
//! dropped). `gtid` is the MariaDB GTID state there, kept for operators and for a start by
//! GTID (`file` is empty until the server has said where such a start lies). Every item
//! the task hands over carries the position after it, so the reader's snapshot covers
//! exactly the rows it returned.
//!
//! # Snapshot chunks
//! For each chunk (`snapshot.split.size` rows of a table in key order, after the last key
//! of the previous chunk) the task selects the chunk, then asks the server for the end of
//! its binlog (`SHOW MASTER STATUS`: the high mark). Every transaction the chunk's select
//! could have seen lies before that mark. The binlog keeps streaming; until it reaches the
//! high mark the task notes the keys the changes of the chunk's table touch (from where the
//! stream stood when the chunk was read, which is before any change the select could not
//! see, and the keys of the last transactions returned before that, in case one of them
//! was written to the binlog but not yet visible to the select). At the high mark it
//! returns the chunk's rows except those keys, whose newer state (full row images) the
//! stream has already returned. No lock, no long transaction; a crash re-reads at most the
//! chunks in flight: a chunk is returned as one batch, and the position after it records
//! its last key.
//!
//! With several snapshot readers a window holds a few chunks per reader, read at once on
//! connections of their own. Once a window is read, the next one is read ahead ([`Ahead`])
//! while the stream reaches the current window's high mark and hands its rows over: its
//! touched keys are those the stream returns from the start of its read on (and of the
//! last transactions before), so the readers do not wait for the stream.
//!
//! # Bounded micro-batches (Spark)
//! Given a [`Bound`] (the server's binlog end, `SHOW MASTER STATUS`, which the driver took
//! when it planned the micro-batch), the task streams until its position reaches the bound
//! outside a transaction: every transaction that ends at or before the bound is returned,
//! none after (the server writes whole transactions, so its end lies between two). A
//! reader that starts at the bound (nothing happened since the last micro-batch) opens no
//! binlog dump at all. Otherwise it then ends its dump connection and waits until the
//! server no longer lists it (ending it if need be), so that the next micro-batch's reader,
//! registering under the same `server-id` in whatever process, is the only one. Then, while
//! tables still need their snapshot, it reads chunks on its SQL connection (no windows:
//! every change up to the bound has been returned before the chunk, and the chunk is newer
//! than the bound; keys of the transactions just returned are dropped from the chunk, in
//! case the storage engine did not show them yet), for about a second and at most 8 chunks,
//! and hands over the end position. A replay (same start, same bound) returns the same
//! changes; its chunks cover the same keys (the first read's end bounds them,
//! [`Bound::until`]) with the rows' values at the replay's time, which the changes after
//! the bound bring up to date in a keyed target.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, UInt8Array};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use ferry_api::io::FetchSender;
use ferry_api::{ChangeBatch, FerryError, Result, RowKind, TableSchema, Unchanged};
use ferry_db::keys::{without_keys, EvenKeys};
use ferry_db::mysql_binlog::{
    binary_logs, binlog_end, binlog_type_fits, mariadb_gtid, server_log, BinlogKind, BinlogPos,
    GtidState, MARIADB_GTID_EVENT,
};
use ferry_db::relation::{estimated_rows, KeySpan, TablePath};
use ferry_db::{connect_mysql, literal, Builders, ColumnDef, ConnInfo, Dialect};
use futures_util::StreamExt;
use mysql_async::binlog::events::{
    EventData, OptionalMetadataField, QueryEvent, RotateEvent, RowsEventData, TableMapEvent,
};
use mysql_async::binlog::EventType;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStream, BinlogStreamRequest};
use serde::{Deserialize, Serialize};

use ferry_formats::debezium_envelope::{self, LogPosition, Origin, TableEnvelope};

use crate::COMPONENT;

/// How often, at most, a position moved by transactions of other tables is handed to the
/// reader.
const MOVED_EVERY: Duration = Duration::from_secs(1);

/// How often the server's binlog end is asked for the lag figures.
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// How many recently returned transactions keep their keys while a snapshot is under way.
const RECENT_TXNS: usize = 256;

/// How the job starts when no checkpoint says where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Startup {
    /// The tables' rows, then the binlog from the server's end at the start.
    Initial,
    /// The binlog from the server's end.
    Latest,
    /// The binlog from the oldest file the server has.
    Earliest,
    /// The binlog from a file and offset.
    Specific(BinlogPos),
    /// The binlog after a MariaDB GTID state.
    Gtid(String),
    /// The binlog from the first transaction at or after this time (ms since 1970),
    /// searched from the oldest file.
    Timestamp(i64),
}

/// Where the stream ends (`stop.mode`). Every variant but `Never` ends it only once every
/// snapshot is complete; until then the stream goes on past the stop, as the snapshot's rows
/// are newer than the stop anyway. The stream ends between transactions: one that starts
/// before the stop is read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The stream runs until the job stops.
    Never,
    /// At the binlog's end as of the job's first start.
    Latest,
    /// Before the first transaction that starts at or after this position.
    Specific(BinlogPos),
    /// Before the first transaction at or after this time (ms since 1970; binlog events
    /// carry seconds, so a transaction in the second of the time counts as at it: the
    /// rule `startup.timestamp` starts by, so a start and a stop at one time neither lose
    /// nor repeat a transaction), or at the binlog's end once the server's clock has
    /// passed it with no such transaction.
    Timestamp(i64),
}

/// One captured table.
#[derive(Debug, Clone)]
pub struct CdcTable {
    /// Routing name (the `table-names` entry), Arrow schema and catalog.
    pub schema: TableSchema,
    /// Columns in table order, as the decoders read them.
    pub columns: Vec<ColumnDef>,
    /// Per column, what the catalog adds to its binlog values.
    pub kinds: Vec<BinlogKind>,
    /// Key columns (primary key, `table-names-config`, or a unique key); empty if none.
    pub key: Vec<String>,
    /// The database.
    pub db: String,
    /// The table name.
    pub table: String,
    /// With `format = COMPATIBLE_DEBEZIUM_JSON`: how its changes become Debezium events.
    pub envelope: Option<Arc<TableEnvelope>>,
}

impl CdcTable {
    fn quoted(&self) -> String {
        Dialect::MySql.quote_path(&[&self.db, &self.table])
    }

    fn path(&self) -> TablePath {
        TablePath {
            database: Some(self.db.clone()),
            schema: None,
            table: self.table.clone(),
        }
    }

    fn key_indexes(&self) -> Vec<usize> {
        self.key
            .iter()
            .filter_map(|k| self.columns.iter().position(|c| &c.name == k))
            .collect()
    }

    /// Whether chunks can be cut by key: every key column's text is a literal the server
    /// reads back exactly.
    fn chunkable(&self) -> bool {
        !self.key.is_empty()
            && self.key_indexes().iter().all(|i| {
                !matches!(
                    self.columns[*i].data_type,
                    DataType::Binary | DataType::Boolean | DataType::Float32 | DataType::Float64
                )
            })
    }
}

/// What the fetch task needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The server.
    pub conn: ConnInfo,
    /// The replica id the binlog dump registers with.
    pub server_id: u32,
    /// Rows per snapshot chunk.
    pub split_size: usize,
    /// Rows per batch of changes.
    pub fetch_size: usize,
    /// The captured tables.
    pub tables: Vec<CdcTable>,
    /// Where a job without a checkpoint starts.
    pub start: Startup,
    /// How often the server sends a heartbeat while the binlog is idle.
    pub heartbeat: Duration,
    /// Connections that read snapshot chunks at once (the source's `parallelism`).
    pub snapshot_readers: usize,
    /// Where the stream ends (`stop.mode`), once every snapshot is complete.
    pub stop: Stop,
    /// Keys per row within which an integer key is cut by arithmetic (see [`EvenKeys`]).
    pub even_factor: (f64, f64),
}

/// The snapshot of one table under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkProgress {
    /// The table (routing name).
    pub table: String,
    /// The last key of the last chunk returned, as text (one per key column).
    pub after: Vec<String>,
}

/// The reader's position (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The binlog file where the next transaction starts (empty: start after `gtid`).
    pub file: String,
    /// The offset in it.
    pub pos: u64,
    /// Changes of the transaction at `file`/`pos` already returned.
    pub skip: u64,
    /// The MariaDB GTID state at `file`/`pos` (empty when unknown).
    #[serde(default)]
    pub gtid: String,
    /// Tables whose snapshot is complete.
    pub snapshotted: Vec<String>,
    /// The table whose snapshot is under way.
    pub chunk: Option<ChunkProgress>,
    /// `startup.mode = timestamp`: transactions before this time (ms) are passed over until
    /// the first one at or after it.
    #[serde(default)]
    pub since_ms: Option<i64>,
    /// With a `stop.mode`: where the stream ends once every snapshot is complete (for
    /// `latest`, the binlog's end when the job first ran with it; for `timestamp`, known
    /// once the stream or the server's clock reaches the time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopAt>,
}

/// Where a job with a `stop.mode` ends: a binlog file and offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopAt {
    /// The binlog file.
    pub file: String,
    /// The offset in it.
    pub pos: u64,
    /// The `stop.mode` it was found for: a restore with another one finds its own.
    #[serde(default)]
    pub by: StopBy,
}

/// The `stop.mode` a [`StopAt`] was found for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopBy {
    /// `latest` (also every stop recorded before the other modes existed).
    #[default]
    Latest,
    /// `specific`.
    Specific,
    /// `timestamp`, with its time.
    Timestamp(i64),
}

impl StopAt {
    pub(crate) fn binlog(&self) -> BinlogPos {
        BinlogPos {
            file: self.file.clone(),
            pos: self.pos,
        }
    }
}

impl Position {
    pub(crate) fn binlog(&self) -> BinlogPos {
        BinlogPos {
            file: self.file.clone(),
            pos: self.pos,
        }
    }

    fn text(&self) -> String {
        if self.file.is_empty() {
            format!("GTID {}", self.gtid)
        } else {
            format!("{}:{}", self.file, self.pos)
        }
    }
}

/// What the task hands to the reader.
#[derive(Debug)]
pub enum Item {
    /// Rows, and the position after them.
    Rows(ChangeBatch, Position),
    /// The position moved without rows for the reader.
    Moved(Position),
    /// The micro-batch's bound is reached and the binlog dump ended: the end position;
    /// nothing follows.
    Reached(Position),
}

/// How far the snapshot got: the tables done and the chunk under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotProgress {
    /// Tables whose snapshot is complete.
    pub snapshotted: Vec<String>,
    /// The table whose snapshot is under way.
    pub chunk: Option<ChunkProgress>,
}

/// Where a bounded micro-batch ends (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bound {
    /// The binlog file of the server's end when the driver planned the micro-batch.
    pub file: String,
    /// The offset in it.
    pub pos: u64,
    /// The GTID state there, for a job that starts at the bound (see [`server_end`]; a
    /// reader that streams to the bound keeps the state of the transactions it read).
    #[serde(default)]
    pub gtid: String,
    /// In a replay, how far the first read's snapshot chunks got: the replay reads the
    /// same key ranges, no more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<SnapshotProgress>,
}

impl Bound {
    fn binlog(&self) -> BinlogPos {
        BinlogPos {
            file: self.file.clone(),
            pos: self.pos,
        }
    }
}

/// How long a bounded micro-batch goes on reading snapshot chunks after its bound, and how
/// many it reads at most.
const CHUNKS_FOR: Duration = Duration::from_secs(1);
const CHUNKS_MAX: usize = 8;

/// How long the task waits for the server to stop listing its binlog dump connection.
pub(crate) const RELEASE_WAIT: Duration = Duration::from_secs(10);

/// What the reader tells the fetch task.
#[derive(Debug, Default)]
pub struct Control {
    /// The reader is closing: end the binlog dump and return.
    pub stop: AtomicBool,
}

/// What the fetch task knows of how far behind the server it is, for the reader's figures:
/// written by the task, read by the reader, never waited on.
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes of binlog between the position handed over and the server's end.
    pub lag_bytes: AtomicU64,
    /// The time (s since 1970) of the newest transaction handed over; 0 before the first.
    pub last_event_secs: AtomicU64,
    /// Snapshot chunks read by this run.
    pub chunks: AtomicU64,
}

fn my(e: mysql_async::Error, what: &str) -> FerryError {
    FerryError::external(COMPONENT, format!("{e}: {what}"))
}

/// Runs until the reader is gone, asks it to stop, or an error ends it (the error is
/// handed over); with a `bound`, until the bound is reached. The binlog dump connection is
/// ended, and seen gone from the server, before it returns.
pub async fn run(
    s: Arc<Settings>,
    start: Option<Position>,
    bound: Option<Bound>,
    control: Arc<Control>,
    progress: Arc<Progress>,
    tx: FetchSender<Item>,
) {
    if let Err(e) = run_inner(s, start, bound, control, progress, &tx).await {
        let _ = tx.send(Err(e)).await;
    }
}

/// The server variables the binlog must have, checked before anything is read.
async fn check_server(sql: &mut mysql_async::Conn, conn: &ConnInfo) -> Result<()> {
    let q = "SELECT @@log_bin, @@binlog_format, @@binlog_row_image";
    let row: Option<(Option<String>, Option<String>, Option<String>)> =
        sql.query_first(q).await.map_err(|e| my(e, q))?;
    let (log_bin, format, image) = row.unwrap_or_default();
    let fix = "set it in the server's [mysqld] options (log_bin, binlog_format = ROW, \
               binlog_row_image = FULL, server_id) and restart it";
    if !matches!(log_bin.as_deref(), Some("1") | Some("ON")) {
        return Err(FerryError::external(
            COMPONENT,
            format!(
                "the server at {} writes no binary log (log_bin is off); {fix}",
                conn.address()
            ),
        ));
    }
    if !format.as_deref().unwrap_or("").eq_ignore_ascii_case("ROW") {
        return Err(FerryError::external(
            COMPONENT,
            format!(
                "the server at {} has binlog_format = {}; change data capture reads ROW events: {fix}",
                conn.address(),
                format.unwrap_or_default()
            ),
        ));
    }
    if !image.as_deref().unwrap_or("").eq_ignore_ascii_case("FULL") {
        return Err(FerryError::external(
            COMPONENT,
            format!(
                "the server at {} has binlog_row_image = {}; an update must carry whole rows \
                 (FULL), or unchanged columns would be written as NULL: {fix}",
                conn.address(),
                image.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

fn purged(s: &Settings, p: &Position) -> FerryError {
    FerryError::external(
        COMPONENT,
        format!(
            "the server at {} no longer has the binlog at {} (purged: expire_logs_days / \
             binlog_expire_logs_seconds, or PURGE BINARY LOGS), so the changes after the \
             checkpoint are gone: nothing can be resumed without losing them. Start the job \
             anew (--from-scratch, or a new job id) to read the tables from a fresh snapshot, \
             and keep binlogs longer than the job may be stopped",
            s.conn.address(),
            p.text()
        ),
    )
}

/// The server's binlog end and the GTID state there (a micro-batch's [`Bound`]), and
/// whether the server is MariaDB. The GTID state is `@@gtid_binlog_pos` (MariaDB) or
/// `@@gtid_executed` (MySQL) read just after, unless `exact` (for a position a reader
/// starts at): then, on MariaDB, the state at the offset itself (`BINLOG_GTID_POS`, which
/// reads the binlog file up to the offset, so not for every micro-batch).
pub async fn server_end(
    sql: &mut mysql_async::Conn,
    conn: &ConnInfo,
    exact: bool,
) -> Result<(Bound, bool)> {
    let log = server_log(sql, COMPONENT).await?;
    let end = log.end.clone().ok_or_else(|| {
        FerryError::external(
            COMPONENT,
            format!(
                "the server at {} shows no binlog position (SHOW MASTER STATUS is empty)",
                conn.address()
            ),
        )
    })?;
    let mut gtid = log.gtid;
    if log.mariadb && exact {
        // @@gtid_binlog_pos is read after SHOW MASTER STATUS, and a transaction may have
        // committed between the two. If the end has not moved when asked again, none did
        // (the server moves its GTID state and its end in one step, under its binlog
        // lock); otherwise the state at the offset itself is exact. That is
        // BINLOG_GTID_POS, which reads the binlog file from its start: 0.25 s for a file
        // of 1 GB, the default `max_binlog_size`, at every fresh start.
        let again = binlog_end(sql, COMPONENT).await?;
        if again.as_ref() != Some(&end) {
            let q = format!(
                "SELECT BINLOG_GTID_POS({}, {})",
                literal(Dialect::MySql, &end.file),
                end.pos
            );
            if let Ok(Some(Some(g))) = sql.query_first::<Option<String>, _>(&q).await {
                gtid = g;
            }
        }
    }
    let bound = Bound {
        file: end.file,
        pos: end.pos,
        gtid,
        until: None,
    };
    Ok((bound, log.mariadb))
}

/// Where a job without a checkpoint starts. With a micro-batch `bound`, a job that starts
/// at the server's end (`initial`, `latest`) starts at the bound, so that a replay of its
/// first micro-batch starts where the first read did.
async fn first_position(
    s: &Settings,
    sql: &mut mysql_async::Conn,
    bound: Option<&Bound>,
) -> Result<Position> {
    let (end, mariadb) = match bound {
        Some(b) if matches!(s.start, Startup::Initial | Startup::Latest) => (b.clone(), false),
        _ => server_end(sql, &s.conn, true).await?,
    };
    let gtid = end.gtid.clone();
    let end = end.binlog();
    let all: Vec<String> = s.tables.iter().map(|t| t.schema.name.to_string()).collect();
    let mut p = Position {
        file: end.file.clone(),
        pos: end.pos,
        skip: 0,
        gtid,
        snapshotted: all,
        chunk: None,
        since_ms: None,
        stop: None,
    };
    match &s.start {
        Startup::Initial => p.snapshotted.clear(),
        Startup::Latest => {}
        Startup::Earliest | Startup::Timestamp(_) => {
            let logs = binary_logs(sql, COMPONENT).await?;
            let first = logs.first().map(|(f, _)| f.clone()).unwrap_or(end.file);
            p.file = first;
            p.pos = 4;
            p.gtid = String::new();
            if let Startup::Timestamp(ms) = s.start {
                p.since_ms = Some(ms);
            }
        }
        Startup::Specific(b) => {
            p.file = b.file.clone();
            p.pos = b.pos;
            p.gtid = String::new();
        }
        Startup::Gtid(g) => {
            if !mariadb {
                return Err(FerryError::config(format!(
                    "{COMPONENT}: startup.specific-offset.gtid-set is read as a MariaDB GTID state, \
                     and the server at {} is MySQL: give startup.specific-offset.file and .pos",
                    s.conn.address()
                )));
            }
            p.file = String::new();
            p.pos = 0;
            p.gtid = g.clone();
        }
    }
    Ok(p)
}

/// Opens the binlog dump at `p` under the job's replica id; also says whether the server
/// checksums its events, and the dump connection's id on the server.
async fn open_binlog(s: &Settings, p: &Position) -> Result<(BinlogStream, bool, u32)> {
    let mut c = connect_mysql(&s.conn, COMPONENT).await?;
    let id = c.id();
    let q = "SELECT @@global.binlog_checksum";
    let checksum: Option<String> = c.query_first(q).await.map_err(|e| my(e, q))?;
    let checksum = checksum.is_some_and(|c| !c.eq_ignore_ascii_case("NONE"));
    let heartbeat_ns = s.heartbeat.as_nanos().min(u32::MAX as u128 * 1_000_000) as u64;
    for q in [
        // MariaDB sends its GTID events (instead of BEGIN) to a replica that says it knows them.
        "SET @mariadb_slave_capability = 4".to_string(),
        // Heartbeats while the binlog is idle, so that a dead connection shows.
        format!("SET @master_heartbeat_period = {heartbeat_ns}"),
    ] {
        c.query_drop(&q).await.map_err(|e| my(e, &q))?;
    }
    if p.file.is_empty() {
        let q = format!(
            "SET @slave_connect_state = {}",
            literal(Dialect::MySql, &p.gtid)
        );
        c.query_drop(&q).await.map_err(|e| my(e, &q))?;
    }
    let file = p.file.clone();
    let req = BinlogStreamRequest::new(s.server_id)
        .with_filename(file.as_bytes())
        .with_pos(if p.file.is_empty() { 4 } else { p.pos });
    let stream = c.get_binlog_stream(req).await.map_err(|e| {
        FerryError::external(
            COMPONENT,
            format!(
                "starting the binlog dump at {} on {} (server-id {}): {e}",
                p.text(),
                s.conn.address(),
                s.server_id
            ),
        )
    })?;
    Ok((stream, checksum, id))
}

/// Rows of one table being collected, with their kinds.
struct Pending {
    table: usize,
    builders: Builders,
    kinds: Vec<u8>,
    /// Per row, where its rows event is (kept for Debezium events only).
    at: Vec<RowAt>,
    /// The MariaDB GTID of the rows' transaction (the commit takes the transaction before
    /// the rows are handed over).
    gtid: Option<String>,
    /// Per column, the rows that leave it as the target holds it (see [`ColumnMap::keep`]).
    unchanged: BTreeMap<usize, Vec<usize>>,
}

/// Where the columns of a table map's rows go in a captured table.
#[derive(Debug)]
struct ColumnMap {
    /// The captured table.
    table: usize,
    /// For each of the table's columns (as the job read them), the rows' column holding
    /// it; `None` for a column the table gained after these rows were written.
    from: Vec<Option<usize>>,
    /// Columns absent from the rows to which the table now gives a value of its own
    /// (a default, generated, auto-increment, or NOT NULL's implicit one): inserts and
    /// updates leave them as the target holds them ([`Unchanged`]) rather than write NULL.
    keep: Vec<usize>,
}

/// Maps the `n` columns of a table map's rows onto `table`'s columns: by `names` when the
/// server writes them (`binlog_row_metadata = FULL`), by position otherwise. Returns, per
/// column of the table, the rows' column holding it, and the names of the columns the rows
/// lack; or, when the rows cannot be placed, what changed.
fn map_columns(
    columns: &[ColumnDef],
    n: usize,
    names: Option<&[String]>,
) -> std::result::Result<(Vec<Option<usize>>, Vec<String>), String> {
    let had = columns.len();
    let Some(names) = names.filter(|names| names.len() == n) else {
        return if n == had {
            Ok(((0..n).map(Some).collect(), Vec::new()))
        } else if n > had {
            Err(format!(
                "its rows now have {n} columns where the job started with {had} (a column was added)"
            ))
        } else {
            Err(format!(
                "its rows have {n} columns where the job read {had}: they were written before a \
                 column was added (a restored job), or after one was dropped. The server does not \
                 write column names into the binlog, so MySQL-CDC cannot tell which columns these \
                 rows hold; let it: SET GLOBAL binlog_row_metadata = FULL (MySQL 8.0.1+, MariaDB \
                 10.5+; also in the server's configuration). Rows already written without names \
                 cannot be placed: start the job anew (--from-scratch)"
            ))
        };
    };
    if let Some(name) = names
        .iter()
        .find(|name| !columns.iter().any(|c| c.name.eq_ignore_ascii_case(name)))
    {
        return Err(format!(
            "its rows have a column '{name}' the job did not read when it started (a column was \
             added or renamed)"
        ));
    }
    let from: Vec<Option<usize>> = columns
        .iter()
        .map(|c| {
            names
                .iter()
                .position(|name| c.name.eq_ignore_ascii_case(name))
        })
        .collect();
    let absent = columns
        .iter()
        .zip(&from)
        .filter(|(_, f)| f.is_none())
        .map(|(c, _)| c.name.clone())
        .collect();
    Ok((from, absent))
}

/// The column names a table map carries (`binlog_row_metadata = FULL`), if any.
fn column_names(tme: &TableMapEvent<'_>) -> Result<Option<Vec<String>>> {
    for field in tme.iter_optional_meta() {
        let field = field.map_err(|e| {
            FerryError::external(COMPONENT, format!("table map event metadata: {e}"))
        })?;
        if let OptionalMetadataField::ColumnName(names) = field {
            let names = names
                .iter_names()
                .map(|name| name.map(|name| name.name().into_owned()))
                .collect::<std::io::Result<Vec<String>>>()
                .map_err(|e| {
                    FerryError::external(COMPONENT, format!("table map column names: {e}"))
                })?;
            return Ok(Some(names));
        }
    }
    Ok(None)
}

/// Where a row was read in the binlog: its rows event's start, server and time, and its
/// index in the event.
#[derive(Debug, Clone, Copy, Default)]
struct RowAt {
    pos: u64,
    row: u32,
    server_id: u32,
    secs: u64,
}

/// With `format = COMPATIBLE_DEBEZIUM_JSON`, `batch`'s changes as Debezium events, one
/// row each (`origin(i)` says where row `i` was read); otherwise `batch` as it is.
fn as_events(
    table: &CdcTable,
    batch: ChangeBatch,
    origin: &dyn Fn(usize) -> Origin,
) -> Result<ChangeBatch> {
    TableEnvelope::events_or_rows(
        table.envelope.as_deref(),
        batch,
        origin,
        COMPONENT,
        &table.schema.name,
    )
}

/// Where snapshot rows read at `file`/`pos` come from, for their Debezium events.
fn snapshot_origin(file: String, pos: u64) -> impl Fn(usize) -> Origin {
    let ts_ms = debezium_envelope::now_ms();
    move |_| Origin {
        snapshot: true,
        ts_ms,
        position: LogPosition::MySql {
            server_id: 0,
            gtid: None,
            file: file.clone(),
            pos: pos as i64,
            row: 0,
            thread: None,
        },
    }
}

/// With several snapshot readers, how many chunks each reads in one window, one after
/// the other: fewer windows, each paying the key cuts, the high mark and the wait for the
/// stream to reach it.
const CHUNKS_PER_READER: usize = 4;

/// Connections each snapshot reader reads its window's chunks on, each its share of them
/// one after the other: while one connection's rows are decoded, the server already
/// sends another's (the Jdbc source's readers keep a second connection for the same),
/// rather than waiting on every chunk's query between them. Measured on a million rows of
/// MariaDB on 2 cores: with one connection a reader, the server's threads and Ferry's
/// together kept the cores 80 % busy.
const CONNECTIONS_PER_READER: usize = 2;

/// A chunk's key range: after this key, up to that one (the table's end when none).
type ChunkRange = (Vec<String>, Option<Vec<String>>);

/// Snapshot chunks of consecutive key ranges of one table, waiting for the stream to reach
/// their high mark.
struct Window {
    table: usize,
    /// The chunks in key order, each with the key the next chunk starts after.
    chunks: Vec<(RecordBatch, Vec<String>)>,
    /// The server's binlog end after the chunks were read.
    high: BinlogPos,
    /// Keys (row-encoded) changed in the stream since before the chunks were read.
    touched: HashSet<Vec<u8>>,
    /// The table has no rows after the last chunk.
    last: bool,
}

/// A window's chunks as read, with the binlog's end after them (its high mark).
struct WindowRead {
    chunks: Vec<(RecordBatch, Vec<String>)>,
    last: bool,
    high: BinlogPos,
}

/// A window being read on the snapshot readers' connections: the one after the current
/// window, read while the stream reaches the current one's high mark and hands its rows
/// over, so that the readers do not wait for that (or the first one, awaited at once).
struct Ahead {
    table: usize,
    /// Keys changed in the stream since its read began, and of the last transactions
    /// returned before (see [`Window::touched`]).
    touched: HashSet<Vec<u8>>,
    /// The read; it gives the connections back.
    read: tokio::task::JoinHandle<(Vec<mysql_async::Conn>, Result<WindowRead>)>,
}

/// The transaction being read.
#[derive(Default)]
struct Txn {
    /// Where it starts.
    start: BinlogPos,
    /// Its GTID, if the server sent one.
    gtid: Option<ferry_db::mysql_binlog::MariaGtid>,
    /// A standalone statement (DDL): it ends with its one query event.
    standalone: bool,
    /// Changes of captured tables seen so far (skipped ones included).
    changes: u64,
    /// The time of its first event (s since 1970).
    secs: u64,
    /// Passed over: before `startup.timestamp`.
    passed_over: bool,
}

struct Task<'a> {
    s: Arc<Settings>,
    /// The server checksums its events.
    checksum: bool,
    /// A format description event came: events after it are read with its checksum.
    fde_seen: bool,
    /// The binlog file the stream is in (`pos.file` stays empty after a start by GTID
    /// until the first transaction is complete).
    file: String,
    sql: mysql_async::Conn,
    binlog: BinlogStream,
    pos: Position,
    gtids: GtidState,
    /// Table id (from TABLE_MAP) → where its rows go in a captured table, if captured.
    table_ids: HashMap<u64, Option<Arc<ColumnMap>>>,
    /// Per captured table and the names of columns its rows lacked: the columns whose
    /// values the rows leave to the target (asked of the server once, and again after
    /// DDL on the table).
    added: HashMap<(usize, Vec<String>), Vec<usize>>,
    txn: Option<Txn>,
    /// Changes of the first transaction still to drop (a restore inside it).
    to_skip: u64,
    pending: Option<Pending>,
    window: Option<Window>,
    /// The next window, being read.
    ahead: Option<Ahead>,
    /// The snapshot readers' connections, opened at the first window that needs them.
    readers: Vec<mysql_async::Conn>,
    /// Per table, whether its key is cut by arithmetic (found at its first window).
    plans: HashMap<usize, Option<EvenKeys>>,
    /// Keys of the last transactions returned while a snapshot is under way: (table, keys).
    recent: VecDeque<(usize, Vec<Vec<u8>>)>,
    /// The last DDL statement seen per captured table, for the message when its rows
    /// change shape.
    ddl: HashMap<usize, String>,
    last_moved: Instant,
    last_status: Instant,
    progress: Arc<Progress>,
    tx: &'a FetchSender<Item>,
    /// Where a bounded micro-batch ends.
    bound: Option<Bound>,
    control: Arc<Control>,
}

/// Why the stream loop returned.
enum Ended {
    /// The reader is gone or asked to stop.
    Gone,
    /// The bound is reached.
    Reached,
    /// The `stop.mode` end is reached.
    Stopped,
}

/// Connects, checks the server, finds the start, then streams. Returns `Ok` only when the
/// reader has gone away or asked the task to stop, or a bound was reached.
async fn run_inner(
    s: Arc<Settings>,
    start: Option<Position>,
    bound: Option<Bound>,
    control: Arc<Control>,
    progress: Arc<Progress>,
    tx: &FetchSender<Item>,
) -> Result<()> {
    let mut sql = connect_mysql(&s.conn, COMPONENT).await?;
    check_server(&mut sql, &s.conn).await?;
    let mut pos = match start {
        Some(p) => p,
        None => first_position(&s, &mut sql, bound.as_ref()).await?,
    };
    pos.stop = match &s.stop {
        Stop::Never => None,
        Stop::Latest => match pos.stop.take() {
            Some(at) if at.by == StopBy::Latest => Some(at),
            _ => {
                let end = binlog_end(&mut sql, COMPONENT).await?.ok_or_else(|| {
                    FerryError::external(COMPONENT, "SHOW MASTER STATUS returned no position")
                })?;
                tracing::info!(
                    "{COMPONENT}: stop.mode = latest: the stream ends at {end} once the snapshot is complete"
                );
                Some(StopAt {
                    file: end.file,
                    pos: end.pos,
                    by: StopBy::Latest,
                })
            }
        },
        Stop::Specific(at) => Some(StopAt {
            file: at.file.clone(),
            pos: at.pos,
            by: StopBy::Specific,
        }),
        Stop::Timestamp(ms) => pos.stop.take().filter(|at| at.by == StopBy::Timestamp(*ms)),
    };
    if !pos.file.is_empty() {
        let logs = binary_logs(&mut sql, COMPONENT).await?;
        if !logs.iter().any(|(f, _)| *f == pos.file) {
            return Err(purged(&s, &pos));
        }
    }
    if let Some(b) = &bound {
        if !pos.file.is_empty() && pos.skip == 0 && pos.binlog().reached(&b.binlog()) {
            // Nothing between the start and the bound (no change since the last
            // micro-batch): no binlog dump to open and wait on.
            let mut pos = pos;
            read_bounded_chunks(&s, &mut sql, &mut pos, b, &VecDeque::new(), tx).await?;
            tx.send(Ok(Item::Reached(pos))).await;
            let _ = sql.disconnect().await;
            return Ok(());
        }
    }
    tracing::info!(
        "{COMPONENT}: reading the binlog of {} from {} as replica {}{}",
        s.conn.address(),
        pos.text(),
        s.server_id,
        bound
            .as_ref()
            .map(|b| format!(" up to {}", b.binlog()))
            .unwrap_or_default()
    );
    let (binlog, checksum, dump_id) = open_binlog(&s, &pos).await?;
    let gtids = GtidState::parse(&pos.gtid).unwrap_or_default();
    let mut task = Task {
        checksum,
        fde_seen: false,
        file: pos.file.clone(),
        to_skip: pos.skip,
        s,
        sql,
        binlog,
        pos,
        gtids,
        table_ids: HashMap::new(),
        added: HashMap::new(),
        txn: None,
        pending: None,
        window: None,
        ahead: None,
        readers: Vec::new(),
        plans: HashMap::new(),
        recent: VecDeque::new(),
        ddl: HashMap::new(),
        last_moved: Instant::now(),
        last_status: Instant::now() - STATUS_EVERY,
        progress,
        tx,
        bound,
        control,
    };
    let first = task.pos.clone();
    let ended = if task.send(Item::Moved(first)).await {
        task.stream().await
    } else {
        Ok(Ended::Gone)
    };
    // End the dump connection whatever happened, and wait until the server has let go of
    // it: the next reader registers under the same server-id.
    let released = release(task.binlog, &mut task.sql, dump_id, &task.s).await;
    let result = match ended? {
        Ended::Gone => released,
        Ended::Stopped => {
            released?;
            tx.send(Ok(Item::Reached(task.pos.clone()))).await;
            Ok(())
        }
        Ended::Reached => {
            released?;
            let b = task
                .bound
                .clone()
                .ok_or_else(|| FerryError::internal("reached a bound that is not there"))?;
            let mut pos = task.pos.clone();
            read_bounded_chunks(&task.s, &mut task.sql, &mut pos, &b, &task.recent, tx).await?;
            tx.send(Ok(Item::Reached(pos))).await;
            Ok(())
        }
    };
    if let Some(a) = task.ahead.take() {
        a.read.abort();
    }
    let _ = task.sql.disconnect().await;
    for r in task.readers {
        let _ = r.disconnect().await;
    }
    result
}

/// Ends the binlog dump connection (connection `dump_id` on the server) and waits until the
/// server no longer lists it, ending it with `KILL` if it is still there: a dump thread
/// waiting for events notices a closed connection only when it next writes (the next event
/// or heartbeat), and the next micro-batch should not wait for that.
async fn release(
    binlog: BinlogStream,
    sql: &mut mysql_async::Conn,
    dump_id: u32,
    s: &Settings,
) -> Result<()> {
    let _ = tokio::time::timeout(Duration::from_secs(5), binlog.close()).await;
    let q = format!("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {dump_id}");
    let started = Instant::now();
    let mut killed = false;
    loop {
        let n: Option<u64> = sql.query_first(&q).await.map_err(|e| my(e, &q))?;
        if n.unwrap_or(0) == 0 {
            return Ok(());
        }
        if !killed {
            // Its own connection: every user may end those.
            let k = format!("KILL CONNECTION {dump_id}");
            if let Err(e) = sql.query_drop(&k).await {
                tracing::debug!("{COMPONENT}: {k}: {e}");
            }
            killed = true;
        }
        if started.elapsed() > RELEASE_WAIT {
            return Err(FerryError::external(
                COMPONENT,
                format!(
                    "the server at {} still lists this reader's binlog dump (connection {dump_id}, \
                     server-id {}) {} s after it was ended",
                    s.conn.address(),
                    s.server_id,
                    RELEASE_WAIT.as_secs()
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// After reaching a micro-batch's bound at `pos`: snapshot chunks for about
/// [`CHUNKS_FOR`] (a replay: the key ranges its first read covered), each handed over with
/// the position after it. `recent` holds the keys of the transactions returned before, for
/// those the storage engine may not show the chunk's select yet.
async fn read_bounded_chunks(
    s: &Settings,
    sql: &mut mysql_async::Conn,
    pos: &mut Position,
    bound: &Bound,
    recent: &VecDeque<(usize, Vec<Vec<u8>>)>,
    tx: &FetchSender<Item>,
) -> Result<()> {
    let started = Instant::now();
    let mut chunks = 0;
    loop {
        let done = match &bound.until {
            Some(u) => u.snapshotted == pos.snapshotted && u.chunk == pos.chunk,
            None => started.elapsed() >= CHUNKS_FOR || chunks >= CHUNKS_MAX,
        };
        chunks += 1;
        if done {
            return Ok(());
        }
        let Some((t, after)) = next_chunk(s, pos) else {
            if bound.until.is_some() {
                return Err(FerryError::internal(format!(
                    "replaying a micro-batch: the snapshot is complete but the first read ended at {:?}",
                    bound.until
                )));
            }
            return Ok(());
        };
        let table = &s.tables[t];
        let name = table.schema.name.to_string();
        // A replay reads no key past the first read's last one for the table under way then.
        let upto = bound
            .until
            .as_ref()
            .filter(|u| !u.snapshotted.contains(&name))
            .and_then(|u| u.chunk.as_ref())
            .filter(|c| c.table == name)
            .map(|c| c.after.clone());
        let (chunk, last_key, last) =
            read_chunk(sql, table, &after, Some(s.split_size), upto.as_deref()).await?;
        let mut touched = HashSet::new();
        for (t2, keys) in recent {
            if *t2 == t {
                touched.extend(keys.iter().cloned());
            }
        }
        let rows = without_keys(chunk, &table.key_indexes(), &touched)?;
        pos.skip = 0;
        match (&upto, last) {
            // The replay's range ends at the first read's last key, wherever its rows end.
            (Some(upto), true) => {
                pos.chunk = Some(ChunkProgress {
                    table: name.clone(),
                    after: upto.clone(),
                })
            }
            (None, true) => {
                pos.chunk = None;
                pos.snapshotted.push(name.clone());
                tracing::info!("{COMPONENT}: snapshot of {name} complete");
            }
            (_, false) => {
                pos.chunk = Some(ChunkProgress {
                    table: name.clone(),
                    after: last_key,
                })
            }
        }
        tracing::debug!(
            "{COMPONENT}: chunk of {name} after the micro-batch bound {}: {} rows",
            bound.binlog(),
            rows.num_rows()
        );
        let item = if rows.num_rows() == 0 {
            Item::Moved(pos.clone())
        } else {
            let batch = ChangeBatch::inserts(table.schema.name.clone(), rows);
            Item::Rows(
                as_events(table, batch, &snapshot_origin(pos.file.clone(), pos.pos))?,
                pos.clone(),
            )
        };
        if !tx.send(Ok(item)).await {
            return Ok(());
        }
    }
}

/// Which table's snapshot comes next after `pos`, and after which key.
fn next_chunk(s: &Settings, pos: &Position) -> Option<(usize, Vec<String>)> {
    if let Some(c) = &pos.chunk {
        if let Some(t) = s.tables.iter().position(|t| *t.schema.name == *c.table) {
            return Some((t, c.after.clone()));
        }
    }
    s.tables
        .iter()
        .position(|t| !pos.snapshotted.iter().any(|n| *n == *t.schema.name))
        .map(|t| (t, Vec::new()))
}

impl Task<'_> {
    /// Hands `item` to the reader; `false` when the reader is gone.
    async fn send(&mut self, item: Item) -> bool {
        if matches!(item, Item::Moved(_)) {
            self.last_moved = Instant::now();
        }
        self.tx.send(Ok(item)).await
    }

    /// The stream loop.
    async fn stream(&mut self) -> Result<Ended> {
        loop {
            if self.control.stop.load(Ordering::SeqCst) {
                return Ok(Ended::Gone);
            }
            if self.txn.is_none() {
                if self.bound.as_ref().is_some_and(|b| {
                    !self.pos.file.is_empty() && self.pos.binlog().reached(&b.binlog())
                }) {
                    return Ok(Ended::Reached);
                }
                if let Some(stop) = &self.pos.stop {
                    let done = !self.pos.file.is_empty()
                        && self.pos.binlog().reached(&stop.binlog())
                        && self.snapshot_done();
                    if done {
                        return Ok(Ended::Stopped);
                    }
                }
                if self.last_status.elapsed() >= STATUS_EVERY {
                    self.status().await?;
                }
                // Bounded micro-batches read chunks after their bound, not in windows.
                if self.window.is_none() && self.bound.is_none() {
                    self.open_window().await?;
                }
                if self.window.as_ref().is_some_and(|w| {
                    !self.pos.file.is_empty() && self.pos.binlog().reached(&w.high)
                }) {
                    if !self.close_window().await? {
                        return Ok(Ended::Gone);
                    }
                    // The next chunk at once, not after the next event.
                    continue;
                }
            }
            let ev =
                match tokio::time::timeout(Duration::from_millis(500), self.binlog.next()).await {
                    Err(_) => continue,
                    Ok(Some(Ok(ev))) => ev,
                    Ok(None) => {
                        return Err(FerryError::external(
                            COMPONENT,
                            format!(
                                "the server at {} ended the binlog stream",
                                self.s.conn.address()
                            ),
                        ))
                    }
                    Ok(Some(Err(e))) => return Err(self.stream_error(e)),
                };
            if !self.on_event(ev).await? {
                return Ok(Ended::Gone);
            }
            // A transaction that starts at or after the stop, once the snapshot is complete,
            // ends the stream unread; the position stays at its start (its GTID is applied
            // only at its commit), so a restore without the stop reads it.
            if let (Some(t), Some(stop)) = (&self.txn, &self.pos.stop) {
                if t.start.reached(&stop.binlog()) && self.snapshot_done() {
                    let start = t.start.clone();
                    self.txn = None;
                    self.pos.file = start.file;
                    self.pos.pos = start.pos;
                    self.pos.skip = 0;
                    return Ok(Ended::Stopped);
                }
            }
        }
    }

    /// No chunk is read, waiting or left.
    fn snapshot_done(&self) -> bool {
        self.window.is_none()
            && self.ahead.is_none()
            && self.pending.is_none()
            && self.next_chunk().is_none()
    }

    fn stream_error(&self, e: mysql_async::Error) -> FerryError {
        if let mysql_async::Error::Server(se) = &e {
            // ER_MASTER_FATAL_ERROR_READING_BINLOG: the file or position is gone.
            if se.code == 1236
                && (se.message.contains("find first log")
                    || se.message.contains("purged")
                    || se.message.contains("not find")
                    || se.message.contains("GTID"))
            {
                let mut p = purged(&self.s, &self.pos).to_string();
                p.push_str(&format!(" (the server said: {})", se.message));
                return FerryError::external(COMPONENT, p);
            }
        }
        FerryError::external(
            COMPONENT,
            format!(
                "binlog stream from {} (server-id {}) at {}: {e}",
                self.s.conn.address(),
                self.s.server_id,
                self.pos.text()
            ),
        )
    }

    /// Asks the server for its binlog end, for the lag figures.
    async fn status(&mut self) -> Result<()> {
        self.last_status = Instant::now();
        // `stop.mode = timestamp` with no transaction at or after the time yet: once the
        // server's clock has passed it, the binlog's end (read after the clock) is the stop.
        let clock_passed = match self.s.stop {
            Stop::Timestamp(ms) if self.pos.stop.is_none() => {
                let q = "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
                let now: Option<i64> = self.sql.query_first(q).await.map_err(|e| my(e, q))?;
                now.is_some_and(|now| now >= ms).then_some(ms)
            }
            _ => None,
        };
        let log = server_log(&mut self.sql, COMPONENT).await?;
        let Some(end) = log.end else { return Ok(()) };
        if let Some(ms) = clock_passed {
            tracing::info!(
                "{COMPONENT}: the server's clock passed stop.timestamp {ms} with no transaction after it; the stream ends at {end} once the snapshot is complete"
            );
            self.pos.stop = Some(StopAt {
                file: end.file.clone(),
                pos: end.pos,
                by: StopBy::Timestamp(ms),
            });
        }
        let lag = if end.file == self.pos.file {
            end.pos.saturating_sub(self.pos.pos)
        } else if self.pos.file.is_empty() {
            0
        } else {
            // Across files: the rest of ours, the files between, and the server's part of its own.
            let logs = binary_logs(&mut self.sql, COMPONENT).await?;
            let mut lag = 0u64;
            let mut counting = false;
            for (f, size) in &logs {
                if *f == self.pos.file {
                    counting = true;
                    lag += size.saturating_sub(self.pos.pos);
                } else if *f == end.file {
                    lag += end.pos;
                    break;
                } else if counting {
                    lag += size;
                }
            }
            lag
        };
        self.progress.lag_bytes.store(lag, Ordering::Relaxed);
        Ok(())
    }

    /// The position is past every event up to `log_pos` (outside transactions).
    async fn advance(&mut self, log_pos: u64) -> bool {
        if log_pos > self.pos.pos && !self.pos.file.is_empty() && self.pos.file == self.file {
            self.pos.pos = log_pos;
            self.pos.skip = 0;
            if self.last_moved.elapsed() >= MOVED_EVERY {
                let p = self.pos.clone();
                return self.send(Item::Moved(p)).await;
            }
        }
        true
    }

    fn begin(&mut self, header_pos: u64, size: u64, secs: u64) -> &mut Txn {
        let start = BinlogPos {
            file: self.file.clone(),
            pos: header_pos.saturating_sub(size),
        };
        if let Stop::Timestamp(ms) = self.s.stop {
            let earlier = self
                .pos
                .stop
                .as_ref()
                .is_none_or(|at| !start.reached(&at.binlog()));
            if (secs as i64) * 1000 >= ms && earlier {
                tracing::info!(
                    "{COMPONENT}: the first transaction at or after stop.timestamp {ms} is at {start}; the stream ends there once the snapshot is complete"
                );
                self.pos.stop = Some(StopAt {
                    file: start.file.clone(),
                    pos: start.pos,
                    by: StopBy::Timestamp(ms),
                });
            }
        }
        let passed_over = match self.pos.since_ms {
            Some(ms) if (secs as i64) * 1000 < ms => true,
            Some(_) => {
                tracing::info!(
                    "{COMPONENT}: the first transaction at or after startup.timestamp is at {start}"
                );
                self.pos.since_ms = None;
                false
            }
            None => false,
        };
        self.txn.insert(Txn {
            start,
            secs,
            passed_over,
            ..Default::default()
        })
    }

    async fn on_event(&mut self, ev: mysql_async::binlog::events::Event) -> Result<bool> {
        let h = ev.header();
        let (kind, log_pos, size, secs) = (
            h.event_type_raw(),
            h.log_pos() as u64,
            h.event_size() as u64,
            h.timestamp() as u64,
        );
        if kind == MARIADB_GTID_EVENT {
            let Some(g) = mariadb_gtid(ev.data(), h.server_id()) else {
                return Err(FerryError::external(
                    COMPONENT,
                    format!(
                        "a GTID event of {} bytes could not be read",
                        ev.data().len()
                    ),
                ));
            };
            let t = self.begin(log_pos, size, secs);
            t.gtid = Some(g);
            t.standalone = g.standalone;
            return Ok(true);
        }
        if (165..=171).contains(&kind) {
            return Err(FerryError::external(
                COMPONENT,
                format!(
                    "the server at {} writes compressed binlog events (log_bin_compress = ON), \
                     which MySQL-CDC does not decode; turn log_bin_compress off",
                    self.s.conn.address()
                ),
            ));
        }
        let Ok(et) = h.event_type() else {
            // Another MariaDB event (annotate rows, binlog checkpoint, GTID list, …).
            return Ok(if self.txn.is_none() {
                self.advance(log_pos).await
            } else {
                true
            });
        };
        match et {
            EventType::ROTATE_EVENT => {
                let r: RotateEvent<'_> = ev
                    .read_event()
                    .map_err(|e| FerryError::external(COMPONENT, format!("rotate event: {e}")))?;
                let mut name = r.name().into_owned();
                if self.checksum && !self.fde_seen {
                    // The server's first (artificial) rotate event comes before its format
                    // description, so the parser does not know yet to cut its checksum off.
                    let keep = r.name_raw().len().saturating_sub(4);
                    name = String::from_utf8_lossy(&r.name_raw()[..keep]).into_owned();
                }
                self.file = name;
                if !self.pos.file.is_empty() {
                    self.pos.file = self.file.clone();
                    self.pos.pos = r.position();
                }
                self.table_ids.clear();
                Ok(true)
            }
            // The description of the file the server reads from; its offset is the file's
            // start, not ours.
            EventType::FORMAT_DESCRIPTION_EVENT => {
                self.fde_seen = true;
                Ok(true)
            }
            EventType::HEARTBEAT_EVENT => {
                // The server sends one when it has sent everything up to `log_pos` of the
                // file the stream is in and waits for more: outside a transaction, every
                // transaction before a bound at or behind that point has been returned
                // (whatever events there were that do not move the position).
                // The same for a `stop.mode` end, where the position moves to the
                // heartbeat's: a `specific` stop may lie inside a transaction, and no
                // transaction starts between the stop and the heartbeat (it would have ended
                // the stream, or moved the position past it).
                if let Some(stop) = self.pos.stop.clone() {
                    let at = BinlogPos {
                        file: self.file.clone(),
                        pos: log_pos,
                    };
                    let stop = stop.binlog();
                    if self.txn.is_none()
                        && !self.file.is_empty()
                        && at.reached(&stop)
                        && !self.pos.binlog().reached(&stop)
                    {
                        self.pos.file = at.file;
                        self.pos.pos = at.pos;
                        self.pos.skip = 0;
                    }
                }
                if let Some(b) = &self.bound {
                    let at = BinlogPos {
                        file: self.file.clone(),
                        pos: log_pos,
                    };
                    // (The stream loop has returned before this event if the position
                    // had reached the bound.)
                    if self.txn.is_none() && !self.file.is_empty() && at.reached(&b.binlog()) {
                        self.pos.file = b.file.clone();
                        self.pos.pos = b.pos;
                        self.pos.skip = 0;
                    }
                }
                Ok(true)
            }
            EventType::QUERY_EVENT => {
                let q: QueryEvent<'_> = ev
                    .read_event()
                    .map_err(|e| FerryError::external(COMPONENT, format!("query event: {e}")))?;
                let text = q.query().trim().to_string();
                let upper = text.to_ascii_uppercase();
                if upper == "BEGIN" || upper.starts_with("XA START") {
                    if self.txn.is_none() {
                        self.begin(log_pos, size, secs);
                    }
                    return Ok(true);
                }
                if upper.starts_with("XA END") {
                    return Ok(true);
                }
                // An XA transaction's rows are written to the binlog with its XA PREPARE,
                // which ends that event group; XA COMMIT / XA ROLLBACK come later as groups
                // of their own. The rows are passed on at XA PREPARE (as a replica applies
                // them); a later XA ROLLBACK of it is not undone downstream.
                if upper == "COMMIT" || upper.starts_with("XA PREPARE") {
                    return self.commit(log_pos).await;
                }
                if upper.starts_with("XA ROLLBACK") {
                    tracing::warn!(
                        "{COMPONENT}: {text}: rows this prepared XA transaction wrote to captured \
                         tables were passed on at its XA PREPARE and are not taken back"
                    );
                }
                if upper.starts_with("XA COMMIT") || upper.starts_with("XA ROLLBACK") {
                    if self.txn.is_none() {
                        self.begin(log_pos, size, secs);
                    }
                    return self.commit(log_pos).await;
                }
                self.on_statement(&q.schema(), &text);
                if self.txn.as_ref().is_none_or(|t| t.standalone) {
                    if self.txn.is_none() {
                        self.begin(log_pos, size, secs);
                    }
                    return self.commit(log_pos).await;
                }
                Ok(true)
            }
            EventType::XID_EVENT => self.commit(log_pos).await,
            EventType::TABLE_MAP_EVENT => {
                let Some(EventData::TableMapEvent(tme)) = ev.read_data().map_err(|e| {
                    FerryError::external(COMPONENT, format!("table map event: {e}"))
                })?
                else {
                    return Ok(true);
                };
                let (db, name) = (tme.database_name(), tme.table_name());
                let t = self
                    .s
                    .tables
                    .iter()
                    .position(|t| t.db == db && t.table == name);
                let map = match t {
                    Some(t) => Some(Arc::new(self.map_table(t, &tme).await?)),
                    None => None,
                };
                self.table_ids.insert(tme.table_id(), map);
                Ok(true)
            }
            EventType::WRITE_ROWS_EVENT
            | EventType::UPDATE_ROWS_EVENT
            | EventType::DELETE_ROWS_EVENT
            | EventType::WRITE_ROWS_EVENT_V1
            | EventType::UPDATE_ROWS_EVENT_V1
            | EventType::DELETE_ROWS_EVENT_V1
            | EventType::PARTIAL_UPDATE_ROWS_EVENT => {
                let Some(EventData::RowsEvent(rows)) = ev
                    .read_data()
                    .map_err(|e| FerryError::external(COMPONENT, format!("rows event: {e}")))?
                else {
                    return Ok(true);
                };
                let at = RowAt {
                    pos: log_pos.saturating_sub(size),
                    row: 0,
                    server_id: h.server_id(),
                    secs,
                };
                self.on_rows(&rows, at).await
            }
            _ => Ok(if self.txn.is_none() {
                self.advance(log_pos).await
            } else {
                true
            }),
        }
    }

    /// Notes DDL on a captured table (named when its rows change shape) and passes on a
    /// TRUNCATE with a warning.
    fn on_statement(&mut self, schema: &str, text: &str) {
        let lower = text.to_ascii_lowercase();
        let words: Vec<&str> = lower.split_whitespace().collect();
        let ddl = matches!(
            words.first().copied(),
            Some("alter") | Some("truncate") | Some("drop") | Some("rename") | Some("create")
        );
        if !ddl {
            return;
        }
        for (i, t) in self.s.tables.iter().enumerate() {
            let name = t.table.to_ascii_lowercase();
            let mentioned = lower.contains(&format!("`{name}`"))
                || words.iter().any(|w| {
                    w.trim_matches(|c| c == ';' || c == '(') == name
                        || w.ends_with(&format!(".{name}"))
                });
            let same_db =
                schema.eq_ignore_ascii_case(&t.db) || lower.contains(&t.db.to_ascii_lowercase());
            if mentioned && same_db {
                if words.first() == Some(&"truncate") {
                    tracing::warn!(
                        "{COMPONENT}: TRUNCATE of {} is not passed on (SeaTunnel passes none either)",
                        t.schema.name
                    );
                }
                self.ddl.insert(i, text.chars().take(300).collect());
                // What the catalog said of columns the rows lacked may no longer hold (a
                // column dropped while the job runs must stop it): ask again.
                self.added.retain(|(t, _), _| *t != i);
            }
        }
    }

    /// Where the rows of table map `tme` of captured table `t` go: by name when the server
    /// writes column names, else by position. Columns the rows lack are asked of the
    /// server's catalog now: a column it still has was added after these rows were written
    /// (the job restarted with the table's new columns), so the rows carry NULL for it, or
    /// leave it to the target where the table gives it a value of its own; a column it no
    /// longer has was dropped while the job ran, which stops the job, as do rows with a
    /// column the job did not read, or a column whose type changed.
    async fn map_table(&mut self, t: usize, tme: &TableMapEvent<'_>) -> Result<ColumnMap> {
        let n = tme.columns_count() as usize;
        let names = column_names(tme)?;
        let table = &self.s.tables[t];
        let (from, absent) =
            map_columns(&table.columns, n, names.as_deref()).map_err(|what| self.stop(t, what))?;
        for (i, (c, f)) in table.columns.iter().zip(&from).enumerate() {
            let Some(f) = f else { continue };
            let ty = tme
                .get_raw_column_type(*f)
                .ok()
                .flatten()
                .map_or(0, |t| t as u8);
            if !binlog_type_fits(&c.source_type, ty) {
                return Err(self.stop(
                    t,
                    format!(
                        "column {} '{}' ({}) now holds binlog type {ty}",
                        i + 1,
                        c.name,
                        c.source_type
                    ),
                ));
            }
        }
        let keep = if absent.is_empty() {
            Vec::new()
        } else if let Some(keep) = self.added.get(&(t, absent.clone())) {
            keep.clone()
        } else {
            let keep = self.describe_added(t, &absent).await?;
            self.added.insert((t, absent), keep.clone());
            keep
        };
        Ok(ColumnMap {
            table: t,
            from,
            keep,
        })
    }

    /// The error that stops the job when captured table `t` changed in a way its rows
    /// cannot follow (`what`).
    fn stop(&self, t: usize, what: String) -> FerryError {
        let ddl = self
            .ddl
            .get(&t)
            .map(|d| format!(" (after `{d}`)"))
            .unwrap_or_default();
        FerryError::external(
            COMPONENT,
            format!(
                "table {} changed while the job ran{ddl}: {what}. MySQL-CDC does not follow \
                 schema changes yet, so the job stops rather than write rows in the wrong \
                 shape; recreate the target and start anew (--from-scratch)",
                self.s.tables[t].schema.name
            ),
        )
    }

    /// What the columns of captured table `t` that its rows lack (`absent`) mean, from the
    /// server's catalog now (see [`Task::map_table`]): the columns the rows leave to the
    /// target.
    async fn describe_added(&mut self, t: usize, absent: &[String]) -> Result<Vec<usize>> {
        let table = &self.s.tables[t];
        // MariaDB quotes literal defaults and writes a NULL default as the text NULL.
        let now: Vec<(String, i64)> = self
            .sql
            .exec(
                "SELECT COLUMN_NAME, IS_NULLABLE = 'NO' OR EXTRA <> '' \
                 OR (COLUMN_DEFAULT IS NOT NULL AND COLUMN_DEFAULT <> 'NULL') \
                 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (table.db.as_str(), table.table.as_str()),
            )
            .await
            .map_err(|e| my(e, "reading the table's columns"))?;
        let mut keep = Vec::new();
        for name in absent {
            let Some((_, own_value)) = now.iter().find(|(c, _)| c.eq_ignore_ascii_case(name))
            else {
                return Err(self.stop(
                    t,
                    format!(
                        "it no longer has column '{name}' (dropped or renamed after the job \
                         started)"
                    ),
                ));
            };
            let own_value = *own_value != 0;
            if own_value {
                if let Some(i) = table.columns.iter().position(|c| c.name == *name) {
                    keep.push(i);
                }
            }
            tracing::info!(
                "{COMPONENT}: changes of {} written before column '{name}' was added {}",
                table.schema.name,
                if own_value {
                    "leave it as the target holds it (the table gives it a value)"
                } else {
                    "carry NULL for it"
                }
            );
        }
        Ok(keep)
    }

    async fn on_rows(&mut self, rows: &RowsEventData<'_>, at: RowAt) -> Result<bool> {
        let Some(map) = self.table_ids.get(&rows.table_id()).cloned() else {
            return Err(FerryError::external(
                COMPONENT,
                format!(
                    "a rows event refers to table id {}, which no table map described",
                    rows.table_id()
                ),
            ));
        };
        let Some(map) = map else { return Ok(true) };
        let t = map.table;
        if self.txn.is_none() {
            // Rows outside BEGIN … COMMIT: a server that wrote none; treat it as its own.
            return Err(FerryError::external(
                COMPONENT,
                "a rows event came outside a transaction",
            ));
        }
        if self.txn.as_ref().is_some_and(|x| x.passed_over) {
            return Ok(true);
        }
        let Some(tme) = self.binlog.get_tme(rows.table_id()) else {
            return Err(FerryError::internal("a table map went missing"));
        };
        let tme = tme.clone();
        let kind_of = match rows {
            RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_) => 0u8,
            RowsEventData::UpdateRowsEvent(_)
            | RowsEventData::UpdateRowsEventV1(_)
            | RowsEventData::PartialUpdateRowsEvent(_) => 1,
            _ => 2,
        };
        let mut alive = true;
        for (index, row) in rows.rows(&tme).enumerate() {
            let (before, after) = row.map_err(|e| {
                FerryError::external(
                    COMPONENT,
                    format!("a row of {}: {e}", self.s.tables[t].schema.name),
                )
            })?;
            let txn = self
                .txn
                .as_mut()
                .ok_or_else(|| FerryError::internal("no txn"))?;
            if self.to_skip > 0 {
                // Returned before the restore: the first transaction comes again in full.
                self.to_skip -= 1;
                txn.changes += 1;
                continue;
            }
            if self.pending.as_ref().is_some_and(|p| p.table != t) {
                alive = self.flush_partial().await? && alive;
            }
            if self.pending.is_none() {
                let table = &self.s.tables[t];
                self.pending = Some(Pending {
                    table: t,
                    builders: Builders::new(
                        &table.columns,
                        table.schema.schema.clone(),
                        self.s.fetch_size.min(1024),
                        COMPONENT,
                    )?,
                    kinds: Vec::new(),
                    at: Vec::new(),
                    gtid: self
                        .txn
                        .as_ref()
                        .and_then(|t| t.gtid)
                        .map(|g| format!("{}-{}-{}", g.domain, g.server, g.seq)),
                    unchanged: BTreeMap::new(),
                });
            }
            let table = &self.s.tables[t];
            let p = self
                .pending
                .as_mut()
                .ok_or_else(|| FerryError::internal("no pending rows"))?;
            let missing = |what: &str| {
                FerryError::external(
                    COMPONENT,
                    format!(
                        "an {what} event of {} lacks its row image",
                        table.schema.name
                    ),
                )
            };
            // Rows leave the columns they lack to the target where it gives them a value
            // (Debezium's events have no way to say so: they carry NULL).
            let mut marks =
                (!map.keep.is_empty() && table.envelope.is_none()).then_some(&mut p.unchanged);
            let mut append =
                |row: Option<&mysql_async::binlog::row::BinlogRow>, kind: RowKind, what: &str| {
                    let row = row.ok_or_else(|| missing(what))?;
                    let at = p.kinds.len();
                    let marks = marks.as_deref_mut().map(|m| (m, at));
                    append_row(table, &map, &mut p.builders, row, marks)?;
                    p.kinds.push(kind as u8);
                    Ok::<(), FerryError>(())
                };
            match kind_of {
                0 => append(after.as_ref(), RowKind::Insert, "insert")?,
                1 => {
                    append(before.as_ref(), RowKind::UpdateBefore, "update")?;
                    append(after.as_ref(), RowKind::UpdateAfter, "update")?;
                }
                _ => append(before.as_ref(), RowKind::Delete, "delete")?,
            }
            if table.envelope.is_some() {
                let row = index as u32;
                p.at.resize(p.kinds.len(), RowAt { row, ..at });
            }
            if let Some(txn) = self.txn.as_mut() {
                txn.changes += 1;
            }
            if p.kinds.len() >= self.s.fetch_size {
                alive = self.flush_partial().await? && alive;
            }
        }
        Ok(alive)
    }

    /// The end of a transaction (or of a standalone statement).
    async fn commit(&mut self, log_pos: u64) -> Result<bool> {
        let txn = self.txn.take();
        self.to_skip = 0;
        if let Some(g) = txn.as_ref().and_then(|t| t.gtid) {
            self.gtids.apply(&g);
            self.pos.gtid = self.gtids.to_string();
        }
        if log_pos > 0 && !self.file.is_empty() {
            self.pos.file = self.file.clone();
            self.pos.pos = log_pos;
        }
        self.pos.skip = 0;
        if self.pending.is_some() {
            let pos = self.pos.clone();
            let alive = self.hand_over(pos).await?;
            if let Some(t) = &txn {
                self.progress
                    .last_event_secs
                    .store(t.secs, Ordering::Relaxed);
            }
            Ok(alive)
        } else if self.last_moved.elapsed() >= MOVED_EVERY {
            let p = self.pos.clone();
            Ok(self.send(Item::Moved(p)).await)
        } else {
            Ok(true)
        }
    }

    /// Hands over the pending rows in the middle of a transaction.
    async fn flush_partial(&mut self) -> Result<bool> {
        let Some(txn) = &self.txn else {
            return Err(FerryError::internal(
                "a partial flush outside a transaction",
            ));
        };
        let pos = Position {
            file: txn.start.file.clone(),
            pos: txn.start.pos,
            skip: txn.changes,
            ..self.pos.clone()
        };
        self.hand_over(pos).await
    }

    async fn hand_over(&mut self, pos: Position) -> Result<bool> {
        let Some(mut p) = self.pending.take() else {
            return Ok(true);
        };
        let data = p.builders.finish()?;
        // Keys matter only while a snapshot is under way.
        if self.window.is_some() || self.next_chunk().is_some() {
            let table = &self.s.tables[p.table];
            let keys = row_keys(table, &data)?;
            if let Some(w) = self.window.as_mut().filter(|w| w.table == p.table) {
                w.touched.extend(keys.iter().cloned());
            }
            if let Some(a) = self.ahead.as_mut().filter(|a| a.table == p.table) {
                a.touched.extend(keys.iter().cloned());
            }
            self.recent.push_back((p.table, keys));
            while self.recent.len() > RECENT_TXNS {
                self.recent.pop_front();
            }
        }
        tracing::trace!(
            "{COMPONENT}: {} changes, position {} + {}",
            p.kinds.len(),
            pos.text(),
            pos.skip
        );
        let table = &self.s.tables[p.table];
        let rows = p.kinds.len();
        let mut batch =
            ChangeBatch::with_kinds(table.schema.name.clone(), data, UInt8Array::from(p.kinds));
        if let Some(marks) = Unchanged::from_rows(rows, p.unchanged) {
            batch = batch.with_unchanged(marks);
        }
        let (file, at, gtid) = (self.file.clone(), p.at, p.gtid);
        let batch = as_events(table, batch, &|i| {
            let a = at.get(i).copied().unwrap_or_default();
            Origin {
                snapshot: false,
                ts_ms: a.secs as i64 * 1000,
                position: LogPosition::MySql {
                    server_id: i64::from(a.server_id),
                    gtid: gtid.clone(),
                    file: file.clone(),
                    pos: a.pos as i64,
                    row: a.row as i32,
                    thread: None,
                },
            }
        })?;
        Ok(self.send(Item::Rows(batch, pos)).await)
    }

    /// Which table's snapshot comes next, and after which key.
    fn next_chunk(&self) -> Option<(usize, Vec<String>)> {
        next_chunk(&self.s, &self.pos)
    }

    /// Makes the next chunks the current window, then starts reading the window after it.
    /// The next chunks are the window read ahead; when none is under way (the first
    /// window) they are read now, the stream standing still meanwhile, so that every change
    /// it returns after them counts against them.
    async fn open_window(&mut self) -> Result<()> {
        if self.ahead.is_none() {
            let Some((t, after)) = self.next_chunk() else {
                return Ok(());
            };
            if self.pos.file.is_empty() {
                // A start by GTID: wait until the server has said where it is.
                return Ok(());
            }
            self.start_read(t, after).await?;
        }
        let Some(a) = self.ahead.take() else {
            return Ok(());
        };
        let (conns, read) = a
            .read
            .await
            .map_err(|e| FerryError::internal(format!("a snapshot reader's task failed: {e}")))?;
        self.readers = conns;
        let read = read?;
        self.window = Some(Window {
            table: a.table,
            chunks: read.chunks,
            high: read.high,
            touched: a.touched,
            last: read.last,
        });
        self.read_ahead().await
    }

    /// Keys of the last transactions returned for table `t`: their rows may not be visible
    /// to a select yet (in the binlog, not yet committed in the storage engine).
    fn recent_keys(&self, t: usize) -> HashSet<Vec<u8>> {
        let mut touched = HashSet::new();
        for (t2, keys) in &self.recent {
            if *t2 == t {
                touched.extend(keys.iter().cloned());
            }
        }
        touched
    }

    /// With several snapshot readers and table `t`'s key cut by arithmetic, the cuts of
    /// the window after key `after`.
    async fn even_cuts(&mut self, t: usize, after: &[String]) -> Result<Option<Vec<Vec<String>>>> {
        if !self.plans.contains_key(&t) {
            let plan = even_keys(&self.s, &mut self.sql, t).await?;
            self.plans.insert(t, plan);
        }
        Ok(self.plans.get(&t).copied().flatten().and_then(|p| {
            let from = match after.first() {
                None => None,
                Some(a) => Some(a.parse::<i128>().ok()?),
            };
            let n = self.s.snapshot_readers * CHUNKS_PER_READER;
            Some(
                p.cuts(from, n)
                    .iter()
                    .map(|c| vec![c.to_string()])
                    .collect(),
            )
        }))
    }

    /// Starts reading the window after the current one, if chunks are left.
    async fn read_ahead(&mut self) -> Result<()> {
        let Some(w) = &self.window else {
            return Ok(());
        };
        let mut end = self.pos.clone();
        let name = self.s.tables[w.table].schema.name.to_string();
        match w.chunks.last() {
            Some((_, next)) if !w.last => {
                end.chunk = Some(ChunkProgress {
                    table: name,
                    after: next.clone(),
                })
            }
            _ => {
                end.chunk = None;
                end.snapshotted.push(name);
            }
        }
        let Some((t, after)) = next_chunk(&self.s, &end) else {
            return Ok(());
        };
        self.start_read(t, after).await
    }

    /// Starts reading the window of table `t` after key `after` on the snapshot readers'
    /// connections ([`Ahead`]): every change the stream returns from now on counts against
    /// it, and so do the last ones returned before.
    async fn start_read(&mut self, t: usize, after: Vec<String>) -> Result<()> {
        let cuts = self.even_cuts(t, &after).await?;
        let (s, conns) = (self.s.clone(), std::mem::take(&mut self.readers));
        let read = tokio::spawn(read_window_with_high(s, conns, t, after, cuts));
        self.ahead = Some(Ahead {
            table: t,
            touched: self.recent_keys(t),
            read,
        });
        Ok(())
    }

    /// Returns the chunks' rows whose keys the stream did not change since they were read,
    /// in key order, each with the position after it.
    async fn close_window(&mut self) -> Result<bool> {
        let Some(w) = self.window.take() else {
            return Ok(true);
        };
        let s = self.s.clone();
        let table = &s.tables[w.table];
        let name = table.schema.name.to_string();
        self.pos.skip = 0;
        let count = w.chunks.len();
        for (i, (chunk, next)) in w.chunks.into_iter().enumerate() {
            let chunk_rows = chunk.num_rows();
            let rows = without_keys(chunk, &table.key_indexes(), &w.touched)?;
            self.progress.chunks.fetch_add(1, Ordering::Relaxed);
            if i + 1 == count && w.last {
                self.pos.chunk = None;
                self.pos.snapshotted.push(name.clone());
                self.recent.clear();
                tracing::info!("{COMPONENT}: snapshot of {name} complete");
            } else {
                self.pos.chunk = Some(ChunkProgress {
                    table: name.clone(),
                    after: next,
                });
            }
            tracing::debug!(
                "{COMPONENT}: chunk of {} at {}: {} of {} rows ({} keys touched)",
                table.schema.name,
                w.high,
                rows.num_rows(),
                chunk_rows,
                w.touched.len(),
            );
            let pos = self.pos.clone();
            let sent = if rows.num_rows() == 0 {
                self.send(Item::Moved(pos)).await
            } else {
                let batch = ChangeBatch::inserts(table.schema.name.clone(), rows);
                let batch = as_events(table, batch, &snapshot_origin(pos.file.clone(), pos.pos))?;
                self.send(Item::Rows(batch, pos)).await
            };
            if !sent {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// With several snapshot readers, whether table `t`'s key is cut by arithmetic: a single
/// integer column whose keys per row (from the row count, lowest and highest key) fall
/// within `chunk-key.even-distribution.factor.*`.
async fn even_keys(
    s: &Settings,
    sql: &mut mysql_async::Conn,
    t: usize,
) -> Result<Option<EvenKeys>> {
    let table = &s.tables[t];
    let types: Vec<&DataType> = table
        .key_indexes()
        .iter()
        .map(|i| &table.columns[*i].data_type)
        .collect();
    // Every key column found (`key_indexes` leaves out a missing one).
    if types.len() != table.key.len() || !EvenKeys::applies(s.snapshot_readers, &types) {
        return Ok(None);
    }
    let k = Dialect::MySql.quote(&table.key[0]);
    // The server's estimate of the rows serves as well as a count, which reads the whole
    // table on InnoDB (see `TablePath::estimated_rows_query`).
    let q = table.path().estimated_rows_query(Dialect::MySql);
    let estimate: Option<Option<String>> =
        sql.query_first(q.as_str()).await.map_err(|e| my(e, &q))?;
    let estimate = estimated_rows(estimate.flatten().as_deref());
    let q = KeySpan::query(Dialect::MySql, &table.quoted(), &k, estimate.is_none());
    let row: Option<(Option<String>, Option<String>, Option<String>)> =
        sql.query_first(q.as_str()).await.map_err(|e| my(e, &q))?;
    let row = row.map(|(c, lo, hi)| vec![c, lo, hi]).unwrap_or_default();
    Ok(EvenKeys::plan_span(
        KeySpan::read(estimate, &row),
        s.split_size,
        s.even_factor,
    ))
}

/// With several snapshot readers, where the next window's chunks end: up to
/// [`CHUNKS_PER_READER`] keys per reader, every `snapshot.split.size`-th key after `after`
/// (read from the key's index, not the rows). None when fewer rows than one chunk remain,
/// or with one reader.
async fn window_cuts(
    s: &Settings,
    sql: &mut mysql_async::Conn,
    t: usize,
    after: &[String],
) -> Result<Vec<Vec<String>>> {
    let table = &s.tables[t];
    let readers = s.snapshot_readers;
    if readers <= 1 || !table.chunkable() {
        return Ok(Vec::new());
    }
    let d = Dialect::MySql;
    let keys: Vec<String> = table.key.iter().map(|k| d.quote(k)).collect();
    let cond = if after.is_empty() {
        String::new()
    } else {
        let lits: Vec<String> = after.iter().map(|v| literal(d, v)).collect();
        format!(" WHERE {}", after_key(&keys, &lits))
    };
    let split = s.split_size.max(1);
    let list = keys.join(", ");
    let q = format!(
        "SELECT {list} FROM (SELECT {list}, row_number() OVER (ORDER BY {list}) AS ferry_chunk_row \
         FROM (SELECT {list} FROM {}{cond} ORDER BY {list} LIMIT {}) ferry_keys) ferry_numbered \
         WHERE ferry_chunk_row % {split} = 0 ORDER BY ferry_chunk_row",
        table.quoted(),
        split.saturating_mul(readers * CHUNKS_PER_READER)
    );
    let rows: Vec<mysql_async::Row> = sql.query(q.as_str()).await.map_err(|e| my(e, &q))?;
    let mut cuts = Vec::with_capacity(rows.len());
    for row in rows {
        let mut key = Vec::with_capacity(keys.len());
        for i in 0..keys.len() {
            key.push(match row.as_ref(i) {
                Some(mysql_async::Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(mysql_async::Value::NULL) | None => {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!("a NULL in the key of {}: {q}", table.quoted()),
                    ))
                }
                Some(other) => other.as_sql(true).trim_matches('\'').to_string(),
            });
        }
        cuts.push(key);
    }
    Ok(cuts)
}

/// Reads the window of table `t` after key `after` on the snapshot readers' connections
/// `conns` (cut at `cuts`, or where the key's index says when not given), then takes the
/// server's binlog end as its high mark; gives the connections back.
async fn read_window_with_high(
    s: Arc<Settings>,
    mut conns: Vec<mysql_async::Conn>,
    t: usize,
    after: Vec<String>,
    cuts: Option<Vec<Vec<String>>>,
) -> (Vec<mysql_async::Conn>, Result<WindowRead>) {
    let read = async {
        if conns.is_empty() {
            conns.push(connect_mysql(&s.conn, COMPONENT).await?);
        }
        let cuts = match cuts {
            Some(cuts) => cuts,
            None => window_cuts(&s, &mut conns[0], t, &after).await?,
        };
        let (chunks, last) = if cuts.is_empty() {
            let (chunk, last_key, last) = read_chunk(
                &mut conns[0],
                &s.tables[t],
                &after,
                Some(s.split_size),
                None,
            )
            .await?;
            (vec![(chunk, last_key)], last)
        } else {
            read_window(&s, &mut conns, t, after, cuts).await?
        };
        let conn = conns
            .first_mut()
            .ok_or_else(|| FerryError::internal("no snapshot reader's connection left"))?;
        let high = binlog_end(conn, COMPONENT).await?.ok_or_else(|| {
            FerryError::external(COMPONENT, "SHOW MASTER STATUS returned no position")
        })?;
        Ok(WindowRead { chunks, last, high })
    }
    .await;
    (conns, read)
}

/// Reads a window's chunks: the ranges up to each cut and, when there are fewer cuts than
/// the window holds, the rest of the table (at most one chunk's rows) after the last, on
/// [`CONNECTIONS_PER_READER`] connections a reader at once (opened into `conns` as
/// needed), each reading its share one after the other. Returns them in key order, each
/// with the key the next one starts after, and whether the table has no rows after them.
async fn read_window(
    s: &Arc<Settings>,
    conns: &mut Vec<mysql_async::Conn>,
    t: usize,
    after: Vec<String>,
    cuts: Vec<Vec<String>>,
) -> Result<(Vec<(RecordBatch, Vec<String>)>, bool)> {
    let mut ranges: Vec<ChunkRange> = Vec::new();
    let mut from = after;
    for cut in &cuts {
        ranges.push((from, Some(cut.clone())));
        from = cut.clone();
    }
    let tail = cuts.len() < s.snapshot_readers * CHUNKS_PER_READER;
    if tail {
        ranges.push((from, None));
    }
    let readers = (s.snapshot_readers * CONNECTIONS_PER_READER).min(ranges.len());
    while conns.len() < readers {
        conns.push(connect_mysql(&s.conn, COMPONENT).await?);
    }
    // Connection i reads chunks i, i + n, i + 2n … one after the other.
    let count = ranges.len();
    let mut queues: Vec<Vec<(usize, ChunkRange)>> = vec![Vec::new(); readers];
    for (i, range) in ranges.into_iter().enumerate() {
        queues[i % readers].push((i, range));
    }
    let mut running = Vec::with_capacity(readers);
    for queue in queues {
        let (s, mut conn) = (s.clone(), conns.remove(0));
        running.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for (i, (after, upto)) in queue {
                let table = &s.tables[t];
                // A cut range holds about one chunk's rows, more if rows came since the
                // cuts: all of them are read. The tail holds at most one chunk.
                let limit = if upto.is_some() {
                    None
                } else {
                    Some(s.split_size)
                };
                let read = read_chunk(&mut conn, table, &after, limit, upto.as_deref()).await;
                let (rows, last_key, last) = match read {
                    Ok(r) => r,
                    Err(e) => return (conn, Err(e)),
                };
                // A range's next chunk starts after its cut, whatever its last row.
                let next = upto.unwrap_or(if last_key.is_empty() { after } else { last_key });
                out.push((i, rows, next, last));
            }
            (conn, Ok(out))
        }));
    }
    let mut read = Vec::with_capacity(count);
    let mut failed = None;
    for r in running {
        let (conn, out) = r
            .await
            .map_err(|e| FerryError::internal(format!("a snapshot reader's task failed: {e}")))?;
        conns.push(conn);
        match out {
            Ok(out) => read.extend(out),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    read.sort_by_key(|c| c.0);
    let last = tail && read.last().is_some_and(|c| c.3);
    Ok((
        read.into_iter()
            .map(|(_, rows, next, _)| (rows, next))
            .collect(),
        last,
    ))
}

/// Appends one binlog row image, its columns placed by `map`. A column the rows lack is
/// NULL; with `marks` (the batch's marks and the row's index; any row but those of Debezium
/// events, which cannot say so), those of them the table gives a value of its own are
/// marked as left to the target ([`ColumnMap::keep`]), holding a placeholder where the
/// column cannot be NULL.
fn append_row(
    table: &CdcTable,
    map: &ColumnMap,
    b: &mut Builders,
    row: &mysql_async::binlog::row::BinlogRow,
    mut marks: Option<(&mut BTreeMap<usize, Vec<usize>>, usize)>,
) -> Result<()> {
    for (i, from) in map.from.iter().enumerate() {
        if let Some(f) = from {
            b.append_binlog(i, row.as_ref(*f), &table.kinds[i])?;
            continue;
        }
        match marks.as_mut() {
            Some((marks, at)) if map.keep.contains(&i) => {
                marks.entry(i).or_default().push(*at);
                if b.nullable(i) {
                    b.append_binlog(i, None, &table.kinds[i])?;
                } else {
                    b.append_placeholder(i);
                }
            }
            _ if b.nullable(i) => b.append_binlog(i, None, &table.kinds[i])?,
            _ => {
                return Err(FerryError::external(
                    COMPONENT,
                    format!(
                        "a change of {} was written before column '{}' was added, which cannot \
                         be NULL, and the Debezium events of `format = COMPATIBLE_DEBEZIUM_JSON` \
                         cannot leave it to the target; start the job anew (--from-scratch)",
                        table.schema.name, table.columns[i].name
                    ),
                ))
            }
        }
    }
    b.end_row();
    Ok(())
}

/// The key of every row of `batch`, row-encoded (equal keys, equal bytes).
fn row_keys(table: &CdcTable, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
    ferry_db::keys::row_keys(batch, &table.key_indexes())
}

/// `(a, b) > (x, y)` written out as `a > x OR (a = x AND b > y)`, which MySQL and MariaDB
/// both read as a range on the key's index.
fn after_key(keys: &[String], lits: &[String]) -> String {
    let mut ors = Vec::with_capacity(keys.len());
    for i in 0..keys.len() {
        let mut ands: Vec<String> = (0..i)
            .map(|j| format!("{} = {}", keys[j], lits[j]))
            .collect();
        ands.push(format!("{} > {}", keys[i], lits[i]));
        ors.push(format!("({})", ands.join(" AND ")));
    }
    ors.join(" OR ")
}

/// Reads the chunk after key `after` (the table's first chunk when empty), up to key
/// `upto` when given, at most `limit` rows when given: its rows, its last key as text, and
/// whether it is the table's last chunk (fewer rows than the limit; with `upto`: the last
/// one up to that key; without a limit: always).
async fn read_chunk(
    sql: &mut mysql_async::Conn,
    table: &CdcTable,
    after: &[String],
    limit: Option<usize>,
    upto: Option<&[String]>,
) -> Result<(RecordBatch, Vec<String>, bool)> {
    let d = Dialect::MySql;
    let select: Vec<&str> = table.columns.iter().map(|c| c.select.as_str()).collect();
    let mut q = format!("SELECT {} FROM {}", select.join(", "), table.quoted());
    let chunked = table.chunkable();
    if chunked {
        let keys: Vec<String> = table.key.iter().map(|k| d.quote(k)).collect();
        let lits = |key: &[String]| -> Vec<String> { key.iter().map(|v| literal(d, v)).collect() };
        let mut conds = Vec::new();
        if !after.is_empty() {
            conds.push(format!("({})", after_key(&keys, &lits(after))));
        }
        if let Some(upto) = upto.filter(|u| !u.is_empty()) {
            conds.push(format!("NOT ({})", after_key(&keys, &lits(upto))));
        }
        if !conds.is_empty() {
            q.push_str(&format!(" WHERE {}", conds.join(" AND ")));
        }
        q.push_str(&format!(" ORDER BY {}", keys.join(", ")));
        if let Some(limit) = limit {
            q.push_str(&format!(" LIMIT {limit}"));
        }
    }
    let mut builders = Builders::new(
        &table.columns,
        table.schema.schema.clone(),
        limit.unwrap_or(8192).min(65_536),
        COMPONENT,
    )?;
    let ncols = table.columns.len();
    {
        let mut result = sql.query_iter(q.as_str()).await.map_err(|e| my(e, &q))?;
        while let Some(row) = result.next().await.map_err(|e| my(e, &q))? {
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
        }
    }
    let batch = builders.finish()?;
    let n = batch.num_rows();
    let last = !chunked || limit.is_none_or(|l| n < l);
    let mut last_key = Vec::new();
    if chunked && n > 0 {
        let opts = arrow::util::display::FormatOptions::default();
        for i in table.key_indexes() {
            let col = batch.column(i);
            let text = match col.data_type() {
                // The server reads 'YYYY-MM-DD HH:MM:SS.ffffff' back exactly.
                DataType::Timestamp(_, _) => {
                    let f = arrow::util::display::ArrayFormatter::try_new(
                        col.as_ref(),
                        &opts
                            .clone()
                            .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.6f")),
                    )?;
                    f.value(n - 1).to_string()
                }
                _ => {
                    let f = arrow::util::display::ArrayFormatter::try_new(col.as_ref(), &opts)?;
                    f.value(n - 1).to_string()
                }
            };
            last_key.push(text);
        }
    }
    Ok((batch, last_key, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_composite_key_is_compared_column_by_column() {
        let k = vec!["`a`".to_string(), "`b`".to_string()];
        let v = vec!["1".to_string(), "'x'".to_string()];
        assert_eq!(after_key(&k, &v), "(`a` > 1) OR (`a` = 1 AND `b` > 'x')");
        assert_eq!(after_key(&k[..1], &v[..1]), "(`a` > 1)");
    }

    fn columns(names: &[&str]) -> Vec<ColumnDef> {
        names
            .iter()
            .map(|n| ColumnDef {
                name: n.to_string(),
                data_type: DataType::Int32,
                nullable: true,
                source_type: "int".into(),
                length: None,
                wire: ferry_db::types::Wire::I32,
                select: format!("`{n}`"),
            })
            .collect()
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn rows_are_placed_by_the_column_names_the_binlog_carries() {
        let table = columns(&["id", "a", "b", "c"]);
        // Written before `b` was added after `a`, and `c` at the end.
        let (from, absent) = map_columns(&table, 2, Some(&names(&["ID", "a"]))).unwrap();
        assert_eq!(from, vec![Some(0), Some(1), None, None]);
        assert_eq!(absent, names(&["b", "c"]));
        // The same columns in another order.
        let (from, absent) = map_columns(&table, 4, Some(&names(&["c", "b", "a", "id"]))).unwrap();
        assert_eq!(from, vec![Some(3), Some(2), Some(1), Some(0)]);
        assert!(absent.is_empty());
        // A column the job did not read (added while it runs, or renamed).
        let err = map_columns(&table, 4, Some(&names(&["id", "a", "bb", "c"]))).unwrap_err();
        assert!(
            err.contains("'bb'") && err.contains("added or renamed"),
            "{err}"
        );
    }

    #[test]
    fn rows_without_column_names_are_placed_by_position_only_when_as_wide() {
        let table = columns(&["id", "a", "b"]);
        let (from, absent) = map_columns(&table, 3, None).unwrap();
        assert_eq!(from, vec![Some(0), Some(1), Some(2)]);
        assert!(absent.is_empty());
        let err = map_columns(&table, 4, None).unwrap_err();
        assert!(err.contains("a column was added"), "{err}");
        // Narrower rows could lack any column: refused, naming the setting that helps.
        let err = map_columns(&table, 2, None).unwrap_err();
        assert!(err.contains("binlog_row_metadata = FULL"), "{err}");
        // Names that do not match the rows' width are not trusted.
        let err = map_columns(&table, 2, Some(&names(&["id"]))).unwrap_err();
        assert!(err.contains("binlog_row_metadata = FULL"), "{err}");
    }
}
