//! The reader's fetch task: the slot's change stream, with the snapshot read chunk by chunk
//! in watermark windows on a second connection (DBLog's algorithm on one slot).
//!
//! # Positions
//! A [`Position`] is the reader's checkpointed state. `lsn` is where the change stream
//! resumes: every transaction whose commit record lies before it has been returned in full
//! (the server skips those when streaming restarts there). `skip` counts the changes of the
//! next transaction already returned (a big transaction is returned in several batches, so
//! a checkpoint may fall inside it; after a restart the server sends it again from its
//! start and the first `skip` changes are dropped). Every item the task hands over carries
//! the position after it, so the reader's snapshot covers exactly the rows it returned.
//!
//! # Snapshot windows
//! For each chunk (`snapshot.split.size` rows of a table in key order, after the last key
//! of the previous chunk) the task writes a low watermark into the WAL
//! (`pg_logical_emit_message`, non-transactional), selects the chunk, and writes a high
//! watermark. Changes keep streaming as they come; between the two watermarks it notes the
//! keys the changes touch. At the high watermark it returns the chunk's rows except those
//! keys, whose newer state the stream has already returned. A crash re-reads at most the
//! chunk in flight: a chunk is returned as one batch, and the position after it records
//! its last key.
//!
//! With several snapshot readers (the source's `parallelism`), a window holds a few chunks
//! per reader: the keys where they end are found first (every `snapshot.split.size`-th
//! key, from the index), then the readers read them at once, each on its own connection,
//! every chunk in its own snapshot, all between the same two watermarks; they are handed
//! over in key order, each with the position after it.
//!
//! The windows are read by a task of their own (the [`Snapshotter`]), on connections of
//! its own, one window ahead of the stream: it registers a window with the stream before
//! writing its low watermark, and sends its rows before writing its high one, so the
//! stream knows every watermark it meets. The keys of transactions the stream returns
//! between a window's registration and its low watermark (and of the last few before) are
//! kept until its rows arrive: those a chunk's snapshot did not see count as touched.
//!
//! # Bounded micro-batches (Spark)
//! Given a [`Bound`] (an LSN the driver wrote into the WAL when it planned the micro-batch),
//! the task streams until it has passed the bound: every transaction whose commit record
//! starts before it is returned, none after (a transaction is recognised by its `Begin`,
//! which carries its commit's LSN, before any of its changes). It then ends the replication
//! connection and waits until the server shows the slot released, so that the next
//! micro-batch's reader, in whatever process, finds it free. Then, while tables still need
//! their snapshot, it reads chunks on its SQL connection (no watermarks: every change up to
//! the bound has been returned before the chunk, and the chunk's snapshot is newer than
//! the bound; keys of returned transactions the snapshot does not see yet are dropped from
//! the chunk, as in a window), for about a second and at most 8 chunks, and hands over
//! the end position. The
//! changes of a replay (same start, same bound) are the same; its chunks cover the same
//! keys (the first read's end bounds them, [`Bound::until`]) with the rows' values at the
//! replay's time, which the changes after the bound bring up to date in a keyed target.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::UInt8Array;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use ferry_api::io::FetchSender;
use ferry_api::{ChangeBatch, FerryError, Result, RowKind, TableSchema, Unchanged};
use ferry_db::keys::{without_keys, EvenKeys};
use ferry_db::relation::{estimated_rows, KeySpan, TablePath};
use ferry_db::{
    connect_pg, literal, pg_error_text, Builders, ColumnDef, ConnInfo, CopyDecoder, Dialect,
};
use futures_util::StreamExt;
use pgwire_replication::{Lsn, ReplicationClient, ReplicationConfig, ReplicationEvent, TlsConfig};
use serde::{Deserialize, Serialize};

use ferry_formats::debezium_envelope::{self, LogPosition, Origin, TableEnvelope};

use crate::pgoutput::{self, Change, Datum, Message, Relation};
use crate::COMPONENT;

/// The prefix of the watermark messages this connector writes into the WAL.
const WATERMARK_PREFIX: &str = "ferry-cdc";

/// The prefix of the micro-batch bounds the enumerator writes into the WAL on Spark.
pub const BOUND_PREFIX: &str = "ferry-bound";
/// The prefix of the logical message marking where a `stop.mode = latest` job ends.
const STOP_PREFIX: &str = "ferry-stop";

/// How often, at most, a position moved by transactions of other tables (or keepalives)
/// is handed to the reader, so that the slot advances while the captured tables are idle.
const MOVED_EVERY: Duration = Duration::from_secs(1);

/// How a column's binary value from `pgoutput` differs from what the Jdbc decoders expect
/// (they read the casts the snapshot's `SELECT` applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conv {
    /// The same binary form.
    Same,
    /// `inet`/`cidr`: written as the type's text (an inet host without `/32`).
    Inet {
        /// `cidr` always shows its mask.
        cidr: bool,
    },
    /// `macaddr`: 6 bytes, written as text.
    Macaddr,
    /// `oid`: 4 bytes, read as `int8`.
    Oid,
    /// `timetz`: the time of day before the zone.
    TimeTz,
}

/// One captured table.
#[derive(Debug, Clone)]
pub struct CdcTable {
    /// Routing name (the `table-names` entry), Arrow schema and catalog.
    pub schema: TableSchema,
    /// Columns in table order, as the Jdbc decoders read them.
    pub columns: Vec<ColumnDef>,
    /// Per column, how the change stream's value is converted first.
    pub convs: Vec<Conv>,
    /// Key columns (primary key, `table-names-config`, or a unique key); empty if none.
    pub key: Vec<String>,
    /// The PostgreSQL schema and table.
    pub pg_schema: String,
    /// The table name.
    pub pg_table: String,
    /// With `format = COMPATIBLE_DEBEZIUM_JSON`: how its changes become Debezium events.
    pub envelope: Option<Arc<TableEnvelope>>,
}

impl CdcTable {
    fn quoted(&self) -> String {
        Dialect::Postgres.quote_path(&[&self.pg_schema, &self.pg_table])
    }

    fn key_indexes(&self) -> Vec<usize> {
        self.key
            .iter()
            .filter_map(|k| self.columns.iter().position(|c| &c.name == k))
            .collect()
    }

    /// Whether chunks can be cut by key: every key column's text is a literal the
    /// server reads back exactly.
    fn chunkable(&self) -> bool {
        !self.key.is_empty()
            && self.key_indexes().iter().all(|i| {
                !matches!(
                    self.columns[*i].data_type,
                    DataType::Binary | DataType::List(_) | DataType::Boolean
                )
            })
    }
}

/// What the fetch task needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The database.
    pub conn: ConnInfo,
    /// Replication slot name.
    pub slot: String,
    /// Publication name.
    pub publication: String,
    /// Rows per snapshot chunk.
    pub split_size: usize,
    /// Keys per row within which an integer key is cut by arithmetic (see [`EvenKeys`]).
    pub even_factor: (f64, f64),
    /// Rows per batch of changes.
    pub fetch_size: usize,
    /// The captured tables.
    pub tables: Vec<CdcTable>,
    /// Read the tables' current rows first (`startup.mode = initial`).
    pub snapshot_on_start: bool,
    /// `stop.mode = latest`: end once every snapshot is complete and the stream has reached
    /// the WAL's end as of the job's first start.
    pub stop_latest: bool,
    /// Snapshot chunks read at once, each on a connection of its own (the source's
    /// `parallelism`): one window's chunks are cut by key up front and read in parallel.
    pub snapshot_readers: usize,
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
    /// Where the change stream resumes.
    pub lsn: u64,
    /// Changes of the transaction after `lsn` already returned.
    pub skip: u64,
    /// Tables whose snapshot is complete.
    pub snapshotted: Vec<String>,
    /// The table whose snapshot is under way.
    pub chunk: Option<ChunkProgress>,
    /// With `stop.mode = latest`: where the stream ends (the LSN of a message written into
    /// the WAL when the job first started), once every snapshot is complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<u64>,
}

/// What the task hands to the reader.
#[derive(Debug)]
pub enum Item {
    /// Rows, and the position after them.
    Rows(ChangeBatch, Position),
    /// The position moved without rows for the reader.
    Moved(Position),
    /// The micro-batch's bound (or the `stop.mode = latest` end) is reached and the slot
    /// released: the end position; nothing follows.
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
    /// The LSN the driver wrote when it planned the micro-batch.
    pub lsn: u64,
    /// In a replay, how far the first read's snapshot chunks got: the replay reads the
    /// same key ranges, no more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<SnapshotProgress>,
}

/// How long a bounded micro-batch goes on reading snapshot chunks after its bound, and how
/// many it reads at most.
const CHUNKS_FOR: Duration = Duration::from_secs(1);
const CHUNKS_MAX: usize = 8;

/// How long the task waits for the server to show the slot released.
const RELEASE_WAIT: Duration = Duration::from_secs(10);

/// Writes an LSN as PostgreSQL does (`16/B374D848`).
pub fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xffff_ffff)
}

fn parse_lsn(s: &str) -> Result<u64> {
    Lsn::parse(s)
        .map(|l| l.0)
        .map_err(|e| FerryError::external(COMPONENT, format!("bad LSN '{s}': {e}")))
}

fn pg(e: tokio_postgres::Error) -> FerryError {
    FerryError::external(COMPONENT, pg_error_text(&e))
}

/// What the reader tells the fetch task, besides what it confirmed ([`run`]'s `ack`).
#[derive(Debug, Default)]
pub struct Control {
    /// The reader is closing: end the replication connection and return.
    pub stop: std::sync::atomic::AtomicBool,
}

/// Runs until the reader is gone, asks it to stop, or an error ends it (the error is
/// handed over); with a `bound`, until the bound is reached. The replication connection is
/// ended, and the slot seen released, before it returns.
pub async fn run(
    s: Arc<Settings>,
    start: Option<Position>,
    bound: Option<Bound>,
    ack: Arc<AtomicU64>,
    control: Arc<Control>,
    progress: Arc<Progress>,
    tx: FetchSender<Item>,
) {
    if let Err(e) = run_inner(s, start, bound, ack, control, progress, &tx).await {
        let _ = tx.send(Err(e)).await;
    }
}

/// What the fetch task knows of how far behind the server it is, for the reader's figures
/// (`SourceReader::figures`): written by the task, read by the reader, never waited on.
#[derive(Debug, Default)]
pub struct Progress {
    /// The server's WAL end, from keepalives and data messages.
    pub server_wal_end: AtomicU64,
    /// The server's clock at its last message (µs since 2000-01-01, PostgreSQL's epoch).
    pub server_time_micros: AtomicI64,
    /// Commit time (same epoch) of the newest transaction handed over; 0 before the first.
    pub last_commit_micros: AtomicI64,
    /// Snapshot chunks read by this run.
    pub chunks: AtomicU64,
}

impl Progress {
    fn saw_server(&self, wal_end: u64, server_time_micros: i64) {
        self.server_wal_end.fetch_max(wal_end, Ordering::Relaxed);
        self.server_time_micros
            .fetch_max(server_time_micros, Ordering::Relaxed);
    }
}

/// The replication slot as `pg_replication_slots` shows it.
struct SlotInfo {
    confirmed_flush: u64,
    plugin: String,
    wal_status: Option<String>,
}

async fn slot_info(sql: &tokio_postgres::Client, slot: &str) -> Result<Option<SlotInfo>> {
    let rows = sql
        .query(
            "SELECT confirmed_flush_lsn::text, plugin::text, wal_status::text \
             FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()",
            &[&slot],
        )
        .await
        .map_err(pg)?;
    let Some(r) = rows.first() else {
        return Ok(None);
    };
    let confirmed: Option<String> = r.get(0);
    Ok(Some(SlotInfo {
        confirmed_flush: match confirmed {
            Some(c) => parse_lsn(&c)?,
            None => 0,
        },
        plugin: r.get::<_, Option<String>>(1).unwrap_or_default(),
        wal_status: r.get(2),
    }))
}

/// Creates the publication when missing and adds captured tables it lacks.
async fn ensure_publication(sql: &tokio_postgres::Client, s: &Settings) -> Result<()> {
    let exists = !sql
        .query(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&s.publication],
        )
        .await
        .map_err(pg)?
        .is_empty();
    let tables: Vec<String> = s.tables.iter().map(CdcTable::quoted).collect();
    if !exists {
        let stmt = format!(
            "CREATE PUBLICATION {} FOR TABLE {}",
            Dialect::Postgres.quote(&s.publication),
            tables.join(", ")
        );
        sql.batch_execute(&stmt).await.map_err(|e| {
            FerryError::external(COMPONENT, format!("{}: {stmt}", pg_error_text(&e)))
        })?;
        tracing::info!("{COMPONENT}: created publication {}", s.publication);
        return Ok(());
    }
    let rows = sql
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1",
            &[&s.publication],
        )
        .await
        .map_err(pg)?;
    let have: HashSet<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let missing: Vec<String> = s
        .tables
        .iter()
        .filter(|t| !have.contains(&(t.pg_schema.clone(), t.pg_table.clone())))
        .map(CdcTable::quoted)
        .collect();
    if !missing.is_empty() {
        let stmt = format!(
            "ALTER PUBLICATION {} ADD TABLE {}",
            Dialect::Postgres.quote(&s.publication),
            missing.join(", ")
        );
        sql.batch_execute(&stmt).await.map_err(|e| {
            FerryError::external(COMPONENT, format!("{}: {stmt}", pg_error_text(&e)))
        })?;
        tracing::info!(
            "{COMPONENT}: added {} to publication {}",
            missing.join(", "),
            s.publication
        );
    }
    Ok(())
}

/// Where a relation's tuple columns go.
struct RelMap {
    /// The table's index, `None` for a table this source does not capture.
    table: Option<usize>,
    /// For each of our columns, the tuple position holding it; `None` for a column the
    /// table gained after these changes were written (see [`Stream::describe`]).
    from: Vec<Option<usize>>,
    /// Columns absent from the tuples to which the table now gives a default: the rows
    /// leave them as the target holds them ([`Unchanged`]) rather than write NULL.
    keep: Vec<usize>,
}

/// Maps a relation description onto the captured table's columns. Columns of the table
/// the description lacks are returned by name: the caller decides whether they were added
/// after these changes (restored job) or dropped while the job ran.
fn map_relation(s: &Settings, r: &Relation) -> Result<(RelMap, Vec<String>)> {
    let Some(t) = s
        .tables
        .iter()
        .position(|t| t.pg_schema == r.namespace && t.pg_table == r.name)
    else {
        return Ok((
            RelMap {
                table: None,
                from: Vec::new(),
                keep: Vec::new(),
            },
            Vec::new(),
        ));
    };
    let table = &s.tables[t];
    let names: Vec<&str> = r.columns.iter().map(|c| c.name.as_str()).collect();
    for n in &names {
        if !table.columns.iter().any(|c| c.name == *n) {
            return Err(FerryError::external(
                COMPONENT,
                format!(
                    "table {}.{} has a column '{n}' it did not have when the job started \
                     (ALTER TABLE … ADD COLUMN): Postgres-CDC does not follow schema changes while \
                     it runs, so the job stops rather than drop that column's values. Add the \
                     column to the target too, then restart the job: it resumes from its last \
                     checkpoint with the table's new columns",
                    r.namespace, r.name
                ),
            ));
        }
    }
    let from: Vec<Option<usize>> = table
        .columns
        .iter()
        .map(|c| names.iter().position(|n| *n == c.name))
        .collect();
    let absent = table
        .columns
        .iter()
        .zip(&from)
        .filter(|(_, f)| f.is_none())
        .map(|(c, _)| c.name.clone())
        .collect();
    Ok((
        RelMap {
            table: Some(t),
            from,
            keep: Vec::new(),
        },
        absent,
    ))
}

/// The value as the Jdbc decoders expect it.
fn convert(conv: Conv, v: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>> {
    use std::borrow::Cow;
    let bad = |what: &str| FerryError::data(COMPONENT, format!("{} bytes are no {what}", v.len()));
    Ok(match conv {
        Conv::Same => Cow::Borrowed(v),
        Conv::Inet { cidr } => {
            if v.len() < 4 {
                return Err(bad("inet"));
            }
            let (family, bits, n) = (v[0], v[1], v[3] as usize);
            let addr = v.get(4..4 + n).ok_or_else(|| bad("inet"))?;
            let (text, max) = match (family, addr.len()) {
                (2, 4) => (
                    std::net::Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3]).to_string(),
                    32,
                ),
                (3, 16) => {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(addr);
                    (std::net::Ipv6Addr::from(a).to_string(), 128)
                }
                _ => return Err(bad("inet")),
            };
            let s = if cidr || bits != max {
                format!("{text}/{bits}")
            } else {
                text
            };
            Cow::Owned(s.into_bytes())
        }
        Conv::Macaddr => {
            if v.len() != 6 {
                return Err(bad("macaddr"));
            }
            let s: Vec<String> = v.iter().map(|x| format!("{x:02x}")).collect();
            Cow::Owned(s.join(":").into_bytes())
        }
        Conv::Oid => {
            if v.len() != 4 {
                return Err(bad("oid"));
            }
            let o = u32::from_be_bytes([v[0], v[1], v[2], v[3]]) as i64;
            Cow::Owned(o.to_be_bytes().to_vec())
        }
        Conv::TimeTz => Cow::Borrowed(v.get(..8).ok_or_else(|| bad("timetz"))?),
    })
}

/// Rows of one table being collected, with their kinds.
struct Pending {
    table: usize,
    builders: Builders,
    kinds: Vec<u8>,
    /// Per row, the LSN of its change (kept for Debezium events only).
    lsns: Vec<u64>,
    /// Per column, the rows that leave it unchanged without its value (see
    /// [`append_row`]); empty nearly always.
    unchanged: BTreeMap<usize, Vec<usize>>,
}

/// Microseconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

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

/// Where snapshot rows read at `lsn` come from, for their Debezium events.
fn snapshot_origin(lsn: u64) -> impl Fn(usize) -> Origin {
    let ts_ms = debezium_envelope::now_ms();
    move |_| Origin {
        snapshot: true,
        ts_ms,
        position: LogPosition::Postgres {
            tx_id: None,
            lsn: Some(lsn as i64),
        },
    }
}

/// Which transactions a snapshot does not see: those it lists as running, and every one
/// from its `xmax` on (a transaction whose id is at least `xmax` is not listed, however
/// far its commit got). Ids are compared in their low 32 bits, as the stream gives them.
#[derive(Debug, Clone, Default)]
struct Invisible {
    running: HashSet<u32>,
    xmax: u32,
}

impl Invisible {
    /// Reads `pg_current_snapshot()`'s text, `xmin:xmax:xip,…`.
    fn parse(snapshot: &str) -> Result<Invisible> {
        let mut parts = snapshot.split(':');
        let bad = || FerryError::internal(format!("unexpected snapshot text '{snapshot}'"));
        let _xmin = parts.next().ok_or_else(bad)?;
        let xmax: u64 = parts.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
        let running = parts
            .next()
            .unwrap_or("")
            .split(',')
            .filter_map(|x| x.trim().parse::<u64>().ok())
            .map(|x| x as u32)
            .collect();
        Ok(Invisible {
            running,
            xmax: xmax as u32,
        })
    }

    fn contains(&self, xid: u32) -> bool {
        self.running.contains(&xid) || (xid.wrapping_sub(self.xmax) as i32) >= 0
    }
}

/// Chunks a snapshot reader reads one after the other in a window: fewer windows, each
/// costing two watermark commits, the cuts and a round trip through the stream.
const CHUNKS_PER_READER: usize = 4;

/// Connections each snapshot reader reads its window's chunks on, each its share one after
/// the other: while one connection's rows are decoded, the server already sends another's
/// (the Jdbc source's readers start their next query early for the same), rather than
/// waiting on every chunk's query between them.
const CONNECTIONS_PER_READER: usize = 2;

/// How many windows exist at once: the one the stream is in, and the next being read.
const WINDOWS_AHEAD: usize = 2;

/// A chunk's key range: after this key, up to that one, at most so many rows.
type ChunkRange = (Vec<String>, Option<Vec<String>>, Option<usize>);

/// The keys (row-encoded) of one returned transaction's changes to one table.
type ReturnedKeys = Arc<Vec<Vec<u8>>>;

/// A window's chunks, read between its watermarks.
struct WindowRead {
    /// The chunks in key order, each with the key the next chunk starts after.
    chunks: Vec<(RecordBatch, Vec<String>)>,
    /// The transactions the chunks' snapshots do not see: one of them that commits before
    /// the low watermark anyway (its commit record written, not yet visible when the
    /// snapshot was taken) is not in the chunk, so its keys count as touched wherever it
    /// comes. Counting a key touched for every chunk when only one snapshot missed it is
    /// safe: the stream returns that key's newer state.
    invisible: Vec<Invisible>,
    /// The table has no rows after the last chunk.
    last: bool,
}

impl WindowRead {
    fn misses(&self, xid: u32) -> bool {
        self.invisible.iter().any(|i| i.contains(xid))
    }
}

/// Snapshot chunks between their watermarks, as the stream sees them: one, or with several
/// snapshot readers up to [`CHUNKS_PER_READER`] per reader, of consecutive key ranges of
/// one table. The [`Snapshotter`] registers a window before it writes its low watermark,
/// and sends its rows before it writes its high one.
struct Window {
    id: String,
    table: usize,
    /// The low watermark has come through the stream.
    open: bool,
    /// Keys whose change the chunks may not reflect: changed in the stream since the low
    /// watermark, or by a transaction a chunk's snapshot did not see.
    touched: HashSet<Vec<u8>>,
    /// The transactions of the window's table returned before the low watermark, since
    /// the window was registered and the last few before: those a chunk's snapshot did
    /// not see count as touched.
    before_low: Vec<(u32, ReturnedKeys)>,
    /// The chunks, sent when read.
    read: tokio::sync::oneshot::Receiver<WindowRead>,
    /// Held until the window is handed over: the snapshotter reads at most
    /// [`WINDOWS_AHEAD`] windows ahead of the stream.
    _turn: tokio::sync::OwnedSemaphorePermit,
}

/// Reads the snapshot windows one after another, on connections of its own, while the
/// stream goes on: the next window's chunks are read while the stream catches up with the
/// current one's watermarks and hands its rows over.
struct Snapshotter {
    windows: tokio::sync::mpsc::UnboundedReceiver<Window>,
    task: Option<tokio::task::JoinHandle<Result<()>>>,
}

impl Snapshotter {
    fn start(s: Arc<Settings>, pos: Position, nonce: String) -> Snapshotter {
        let (tx, windows) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(read_windows(s, pos, nonce, tx));
        Snapshotter {
            windows,
            task: Some(task),
        }
    }

    /// The task's error, once it has ended with one; with `wait`, waits for it to end.
    async fn failure(&mut self, wait: bool) -> Option<FerryError> {
        if !wait && !self.task.as_ref().is_some_and(|t| t.is_finished()) {
            return None;
        }
        let task = self.task.take()?;
        match task.await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(e) => Some(FerryError::internal(format!(
                "the snapshot reader's task failed: {e}"
            ))),
        }
    }
}

impl Drop for Snapshotter {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// The snapshotter's task: from `pos`, for every window, registers it, writes its low
/// watermark, reads its chunks, sends them and writes its high watermark, until every
/// table is read or the stream is gone.
async fn read_windows(
    s: Arc<Settings>,
    mut pos: Position,
    nonce: String,
    out: tokio::sync::mpsc::UnboundedSender<Window>,
) -> Result<()> {
    let turns = Arc::new(tokio::sync::Semaphore::new(WINDOWS_AHEAD));
    let mut conns: Vec<Arc<tokio_postgres::Client>> = Vec::new();
    // The next window's cuts, found on a connection of their own while this window's
    // chunks are read: (table, after, the query).
    let mut cutter: Option<Arc<tokio_postgres::Client>> = None;
    let mut next_cuts: Option<(usize, Vec<String>, CutsQuery)> = None;
    // Per table, whether its key is cut by arithmetic (found at its first window).
    let mut plans: HashMap<usize, Option<EvenKeys>> = HashMap::new();
    let mut n = 0u64;
    while let Some((t, after)) = next_chunk(&s, &pos) {
        let Ok(turn) = turns.clone().acquire_owned().await else {
            return Ok(());
        };
        if conns.is_empty() {
            conns.push(Arc::new(snapshot_connection(&s).await?));
        }
        let id = format!("{}:{nonce}:{n}", s.slot);
        n += 1;
        // Where the chunks are cut does not depend on when: every row of their ranges is
        // read in the chunks' snapshots, taken between the watermarks.
        if let std::collections::hash_map::Entry::Vacant(e) = plans.entry(t) {
            e.insert(even_keys(&s, &conns[0], t).await?);
        }
        let even = plans.get(&t).copied().flatten().and_then(|p| {
            let from = match after.first() {
                None => None,
                Some(a) => Some(a.parse::<i128>().ok()?),
            };
            let n = s.snapshot_readers * CHUNKS_PER_READER;
            Some(
                p.cuts(from, n)
                    .iter()
                    .map(|c| vec![c.to_string()])
                    .collect(),
            )
        });
        let cuts = match (even, next_cuts.take()) {
            (Some(cuts), _) => cuts,
            (None, Some((t2, after2, query))) if t2 == t && after2 == after => {
                query.await.map_err(|e| {
                    FerryError::internal(format!("the snapshot's key cuts failed: {e}"))
                })??
            }
            _ => window_cuts(&s, &conns[0], t, &after).await?,
        };
        // A full window: the next one starts after its last cut, in the same table.
        let arithmetic = plans.get(&t).is_some_and(Option::is_some);
        if cuts.len() == s.snapshot_readers * CHUNKS_PER_READER && !arithmetic {
            if let Some(last) = cuts.last() {
                let c = match &cutter {
                    Some(c) => c.clone(),
                    None => cutter
                        .insert(Arc::new(snapshot_connection(&s).await?))
                        .clone(),
                };
                let (s2, from) = (s.clone(), last.clone());
                let query = tokio::spawn(async move { window_cuts(&s2, &c, t, &from).await });
                next_cuts = Some((t, last.clone(), query));
            }
        }
        let (sent, read) = tokio::sync::oneshot::channel();
        let window = Window {
            id: id.clone(),
            table: t,
            open: false,
            touched: HashSet::new(),
            before_low: Vec::new(),
            read,
            _turn: turn,
        };
        if out.send(window).is_err() {
            return Ok(());
        }
        emit_watermark(&conns[0], &id, "L").await?;
        let read = read_window(&s, &mut conns, t, after, cuts).await?;
        let name = s.tables[t].schema.name.to_string();
        if read.last {
            pos.chunk = None;
            pos.snapshotted.push(name);
        } else if let Some((_, next)) = read.chunks.last() {
            pos.chunk = Some(ChunkProgress {
                table: name,
                after: next.clone(),
            });
        }
        if sent.send(read).is_err() {
            return Ok(());
        }
        emit_watermark(&conns[0], &id, "H").await?;
    }
    Ok(())
}

/// The next window's key cuts, being found.
type CutsQuery = tokio::task::JoinHandle<Result<Vec<Vec<String>>>>;

/// A connection for snapshot reads, in the session time zone of the stream's.
async fn snapshot_connection(s: &Settings) -> Result<tokio_postgres::Client> {
    let c = connect_pg(&s.conn, COMPONENT).await?;
    c.batch_execute("SET TIME ZONE 'UTC'").await.map_err(pg)?;
    Ok(c)
}

/// With several snapshot readers, whether table `t`'s key is cut by arithmetic: a single
/// integer column whose keys per row (from the row count, lowest and highest key) fall
/// within `chunk-key.even-distribution.factor.*`.
async fn even_keys(
    s: &Settings,
    sql: &tokio_postgres::Client,
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
    let k = Dialect::Postgres.quote(&table.key[0]);
    // The planner's estimate of the rows serves as well as a count, which would read the
    // table once more (see `TablePath::estimated_rows_query`).
    let path = TablePath {
        database: None,
        schema: Some(table.pg_schema.clone()),
        table: table.pg_table.clone(),
    };
    let q = path.estimated_rows_query(Dialect::Postgres);
    let rows = sql
        .query(q.as_str(), &[])
        .await
        .map_err(|e| FerryError::external(COMPONENT, format!("{}: {q}", pg_error_text(&e))))?;
    let estimate = estimated_rows(
        rows.first()
            .and_then(|r| r.get::<_, Option<String>>(0))
            .as_deref(),
    );
    let q = KeySpan::query(Dialect::Postgres, &table.quoted(), &k, estimate.is_none());
    let rows = sql
        .query(q.as_str(), &[])
        .await
        .map_err(|e| FerryError::external(COMPONENT, format!("{}: {q}", pg_error_text(&e))))?;
    let row: Vec<Option<String>> = rows
        .first()
        .map(|r| (0..3).map(|i| r.get::<_, Option<String>>(i)).collect())
        .unwrap_or_default();
    Ok(EvenKeys::plan_span(
        KeySpan::read(estimate, &row),
        s.split_size,
        s.even_factor,
    ))
}

/// With several snapshot readers, where the next window's chunks end: up to
/// [`CHUNKS_PER_READER`] keys per reader, every `snapshot.split.size`-th key after `after`
/// (an index-only scan of the keys, not the rows). None when fewer rows than one chunk
/// remain, or with one reader.
async fn window_cuts(
    s: &Settings,
    sql: &tokio_postgres::Client,
    t: usize,
    after: &[String],
) -> Result<Vec<Vec<String>>> {
    let table = &s.tables[t];
    let readers = s.snapshot_readers;
    if readers <= 1 || !table.chunkable() {
        return Ok(Vec::new());
    }
    let d = Dialect::Postgres;
    let keys = table
        .key
        .iter()
        .map(|k| d.quote(k))
        .collect::<Vec<_>>()
        .join(", ");
    let texts = table
        .key
        .iter()
        .map(|k| format!("{}::text", d.quote(k)))
        .collect::<Vec<_>>()
        .join(", ");
    let cond = if after.is_empty() {
        String::new()
    } else {
        format!(
            " WHERE ({keys}) > ({})",
            key_literals(table, after).join(", ")
        )
    };
    let split = s.split_size;
    let q = format!(
        "SELECT {texts} FROM (SELECT {keys}, row_number() OVER (ORDER BY {keys}) AS ferry_chunk_row \
         FROM (SELECT {keys} FROM {}{cond} ORDER BY {keys} LIMIT {}) ferry_keys) ferry_numbered \
         WHERE ferry_chunk_row % {split} = 0 ORDER BY ferry_chunk_row",
        table.quoted(),
        split.saturating_mul(readers * CHUNKS_PER_READER)
    );
    let rows = sql
        .query(q.as_str(), &[])
        .await
        .map_err(|e| FerryError::external(COMPONENT, format!("{}: {q}", pg_error_text(&e))))?;
    Ok(rows
        .iter()
        .map(|r| {
            (0..table.key.len())
                .map(|i| r.get::<_, String>(i))
                .collect()
        })
        .collect())
}

/// Reads a window's chunks: without cuts, one of `snapshot.split.size` rows after `after`
/// on the first connection; with cuts, the ranges up to each cut, and when there are fewer
/// cuts than the window holds the rest of the table (at most one chunk's rows) after the
/// last, on [`CONNECTIONS_PER_READER`] connections a reader in parallel (opened into
/// `conns` as needed).
async fn read_window(
    s: &Arc<Settings>,
    conns: &mut Vec<Arc<tokio_postgres::Client>>,
    t: usize,
    after: Vec<String>,
    cuts: Vec<Vec<String>>,
) -> Result<WindowRead> {
    let split = s.split_size;
    if cuts.is_empty() {
        let c = read_chunk(&conns[0], &s.tables[t], &after, None, Some(split)).await?;
        return Ok(WindowRead {
            chunks: vec![(c.rows, c.last_key)],
            invisible: vec![c.invisible],
            last: c.complete,
        });
    }
    // (after, upto, limit) of each chunk.
    let mut ranges = Vec::new();
    let mut from = after;
    for cut in &cuts {
        ranges.push((from, Some(cut.clone()), None));
        from = cut.clone();
    }
    let tail = cuts.len() < s.snapshot_readers * CHUNKS_PER_READER;
    if tail {
        ranges.push((from, None, Some(split)));
    }
    let readers = (s.snapshot_readers * CONNECTIONS_PER_READER).min(ranges.len());
    while conns.len() < readers {
        conns.push(Arc::new(snapshot_connection(s).await?));
    }
    // Connection i reads chunks i, i + n, i + 2n … one after the other.
    let count = ranges.len();
    let mut queues: Vec<Vec<(usize, ChunkRange)>> = vec![Vec::new(); readers];
    for (i, r) in ranges.into_iter().enumerate() {
        queues[i % readers].push((i, r));
    }
    let mut running = Vec::new();
    for (queue, conn) in queues.into_iter().zip(conns.iter()) {
        let (s, conn) = (s.clone(), conn.clone());
        running.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for (i, (after, upto, limit)) in queue {
                let c = read_chunk(&conn, &s.tables[t], &after, upto.as_deref(), limit).await?;
                // A range's next chunk starts after its cut, whatever its last row.
                let next = upto.unwrap_or(if c.last_key.is_empty() {
                    after
                } else {
                    c.last_key
                });
                out.push((i, c.rows, next, c.invisible, c.complete));
            }
            Ok::<_, FerryError>(out)
        }));
    }
    let mut read = Vec::with_capacity(count);
    for r in running {
        read.extend(r.await.map_err(|e| {
            FerryError::internal(format!("a snapshot reader's task failed: {e}"))
        })??);
    }
    read.sort_by_key(|c| c.0);
    let last = tail && read.last().is_some_and(|c| c.4);
    let (mut chunks, mut invisible) = (Vec::new(), Vec::new());
    for (_, rows, next, inv, _) in read {
        chunks.push((rows, next));
        invisible.push(inv);
    }
    Ok(WindowRead {
        chunks,
        invisible,
        last,
    })
}

async fn emit_watermark(sql: &tokio_postgres::Client, id: &str, mark: &str) -> Result<()> {
    let content = format!("{id}:{mark}");
    emit_message(sql, WATERMARK_PREFIX, &content)
        .await
        .map_err(pg)?;
    Ok(())
}

/// How many recently returned transactions keep their keys, for a window whose snapshot
/// turns out not to have seen them.
const RECENT_TXNS: usize = 64;

struct Task<'a> {
    s: Arc<Settings>,
    /// The current transaction's id (low 32 bits).
    xid: u32,
    /// Keys of the last transactions returned: (xid, table, keys).
    recent: std::collections::VecDeque<(u32, usize, ReturnedKeys)>,
    sql: tokio_postgres::Client,
    repl: ReplicationClient,
    tx_ack: Arc<AtomicU64>,
    acked: u64,
    pos: Position,
    relations: HashMap<u32, RelMap>,
    in_txn: bool,
    /// The position before the current transaction.
    txn_start: u64,
    /// Changes of the current transaction seen so far (skipped ones included).
    txn_changes: u64,
    /// Changes of the first transaction still to drop (a restore inside it).
    to_skip: u64,
    pending: Option<Pending>,
    /// The snapshot's windows registered and not yet handed over, in WAL order.
    windows: std::collections::VecDeque<Window>,
    /// Reads the snapshot's windows while tables need it (not in bounded micro-batches).
    snapshotter: Option<Snapshotter>,
    nonce: String,
    last_moved: Instant,
    progress: Arc<Progress>,
    /// Commit time of the current transaction (from its Begin).
    txn_commit_micros: i64,
    /// Where the change being read starts in the WAL.
    change_lsn: u64,
    tx: &'a FetchSender<Item>,
    /// Where a bounded micro-batch ends.
    bound: Option<Bound>,
    control: Arc<Control>,
    /// The stream has passed the `stop.mode = latest` position (see [`Position::stop`]).
    stop_passed: bool,
}

/// Why the stream loop returned.
enum Ended {
    /// The reader is gone or asked to stop.
    Gone,
    /// The bound is reached.
    Reached,
    /// The `stop.mode = latest` end is reached.
    Stopped,
}

/// Connects, checks or creates the publication and slot, then streams. Returns `Ok` only
/// when the reader has gone away.
async fn run_inner(
    s: Arc<Settings>,
    start: Option<Position>,
    bound: Option<Bound>,
    ack: Arc<AtomicU64>,
    control: Arc<Control>,
    progress: Arc<Progress>,
    tx: &FetchSender<Item>,
) -> Result<()> {
    {
        let sql = connect_pg(&s.conn, COMPONENT).await?;
        sql.batch_execute("SET TIME ZONE 'UTC'").await.map_err(pg)?;
        ensure_publication(&sql, &s).await?;
        let slot = slot_info(&sql, &s.slot).await?;
        let pos = match (start, slot) {
            (Some(p), None) => {
                return Err(FerryError::external(
                    COMPONENT,
                    format!(
                        "replication slot '{}' does not exist any more, so the changes after the \
                         checkpoint's position {} are gone: nothing can be resumed without losing \
                         them. Start the job anew (--from-scratch, or a new job id) to read the \
                         tables from a fresh snapshot",
                        s.slot,
                        lsn_text(p.lsn)
                    ),
                ))
            }
            (Some(p), Some(sl)) => {
                if sl.wal_status.as_deref() == Some("lost") {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!(
                            "replication slot '{}' is invalidated (wal_status = lost: the server \
                             removed WAL it still needed, max_slot_wal_keep_size); the changes \
                             after {} are gone. Drop the slot and start the job anew (--from-scratch)",
                            s.slot,
                            lsn_text(p.lsn)
                        ),
                    ));
                }
                if sl.confirmed_flush > p.lsn {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!(
                            "replication slot '{}' has confirmed position {}, past this checkpoint's \
                             {}: another consumer used the slot, or an older checkpoint is being \
                             restored; resuming would skip the changes in between. Give each job \
                             its own slot.name, or start anew (--from-scratch)",
                            s.slot,
                            lsn_text(sl.confirmed_flush),
                            lsn_text(p.lsn)
                        ),
                    ));
                }
                p
            }
            (None, slot) => {
                let lsn = match slot {
                    Some(sl) => {
                        if sl.plugin != "pgoutput" {
                            return Err(FerryError::external(
                                COMPONENT,
                                format!(
                                    "replication slot '{}' uses the '{}' plugin; Postgres-CDC reads \
                                     pgoutput: drop the slot or choose another slot.name",
                                    s.slot, sl.plugin
                                ),
                            ));
                        }
                        sl.confirmed_flush
                    }
                    None => {
                        let rows = sql
                            .query(
                                "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')",
                                &[&s.slot],
                            )
                            .await
                            .map_err(pg)?;
                        let lsn: String = rows
                            .first()
                            .map(|r| r.get(0))
                            .ok_or_else(|| FerryError::internal("slot creation returned no row"))?;
                        tracing::info!("{COMPONENT}: created replication slot {} at {lsn}", s.slot);
                        parse_lsn(&lsn)?
                    }
                };
                Position {
                    lsn,
                    skip: 0,
                    snapshotted: if s.snapshot_on_start {
                        Vec::new()
                    } else {
                        s.tables.iter().map(|t| t.schema.name.to_string()).collect()
                    },
                    chunk: None,
                    stop: None,
                }
            }
        };
        let mut pos = pos;
        if !s.stop_latest {
            pos.stop = None;
        } else if pos.stop.is_none() {
            // Where this job ends: a message written now, which the stream meets at once
            // (an idle server's keepalives may come only every wal_sender_timeout / 2).
            let content = format!("{}:{}", s.slot, lsn_text(pos.lsn));
            let lsn = emit_message(&sql, STOP_PREFIX, &content)
                .await
                .map_err(pg)?;
            tracing::info!(
                "{COMPONENT}: stop.mode = latest: the stream ends at {} once the snapshot is complete",
                lsn_text(lsn)
            );
            pos.stop = Some(lsn);
        }
        ack.fetch_max(pos.lsn, Ordering::SeqCst);
        if let Some(b) = &bound {
            if pos.lsn >= b.lsn {
                // Already past the bound (a slot created after it): no stream to read.
                let mut pos = pos;
                read_bounded_chunks(&s, &sql, &mut pos, b, &[], tx).await?;
                tx.send(Ok(Item::Reached(pos))).await;
                return Ok(());
            }
        }
        let repl = connect_replication(&s, pos.lsn).await?;
        // The walsender now holding the slot: ours, until it is seen gone.
        let walsender: Option<i32> = sql
            .query_opt(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1",
                &[&s.slot],
            )
            .await
            .map_err(pg)?
            .and_then(|r| r.get(0));
        let nonce = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let mut task = Task {
            xid: 0,
            recent: std::collections::VecDeque::new(),
            acked: pos.lsn,
            to_skip: pos.skip,
            txn_start: pos.lsn,
            s,
            sql,
            repl,
            tx_ack: ack,
            pos,
            relations: HashMap::new(),
            in_txn: false,
            txn_changes: 0,
            pending: None,
            windows: std::collections::VecDeque::new(),
            snapshotter: None,
            nonce,
            last_moved: Instant::now(),
            progress: progress.clone(),
            txn_commit_micros: 0,
            change_lsn: 0,
            tx,
            bound,
            control,
            stop_passed: false,
        };
        // Resumed at or past the stop: everything before it has come through.
        task.stop_passed = task.pos.stop.is_some_and(|stop| task.pos.lsn >= stop);
        let first = task.pos.clone();
        let ended = if task.send(Item::Moved(first)).await {
            task.stream().await
        } else {
            Ok(Ended::Gone)
        };
        // End the replication connection whatever happened, and wait until the server has
        // let go of the slot: the next reader must find it free.
        let released = task.release(walsender).await;
        match ended? {
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
                let recent: Vec<(u32, usize, ReturnedKeys)> = task.recent.drain(..).collect();
                let mut pos = task.pos.clone();
                read_bounded_chunks(&task.s, &task.sql, &mut pos, &b, &recent, tx).await?;
                tx.send(Ok(Item::Reached(pos))).await;
                Ok(())
            }
        }
    }
}

/// Writes a non-transactional logical message into the WAL and returns its LSN, flushed.
///
/// A walsender decodes only flushed WAL, and PostgreSQL (before 17) does not flush a
/// non-transactional message: it waits for the WAL writer (`wal_writer_delay`, 200 ms by
/// default), which made every snapshot chunk wait that long for its high watermark. A
/// synchronous commit of a transaction with an id flushes the WAL up to its own commit
/// record, and so the message before it; such an empty transaction is not decoded.
pub async fn emit_message(
    sql: &tokio_postgres::Client,
    prefix: &str,
    content: &str,
) -> std::result::Result<u64, tokio_postgres::Error> {
    let row = sql
        .query_one(
            "SELECT pg_logical_emit_message(false, $1, $2)::text, \
             set_config('synchronous_commit', 'on', true), txid_current()",
            &[&prefix, &content],
        )
        .await?;
    let lsn: String = row.get(0);
    Ok(Lsn::parse(&lsn).map(|l| l.0).unwrap_or(0))
}

/// After reaching a micro-batch's bound at `pos`: snapshot chunks for about
/// [`CHUNKS_FOR`] (a replay: the key ranges its first read covered), each handed over with
/// the position after it. `recent` holds the keys of the transactions returned before, for
/// those a chunk's snapshot does not see yet.
async fn read_bounded_chunks(
    s: &Settings,
    sql: &tokio_postgres::Client,
    pos: &mut Position,
    bound: &Bound,
    recent: &[(u32, usize, ReturnedKeys)],
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
            .and_then(|u| u.chunk.as_ref())
            .filter(|c| c.table == name && !u_done(bound, &name))
            .map(|c| c.after.clone());
        let ChunkRead {
            rows: chunk,
            last_key,
            complete: last,
            invisible,
        } = read_chunk(sql, table, &after, upto.as_deref(), Some(s.split_size)).await?;
        let mut touched = HashSet::new();
        for (xid, t2, keys) in recent {
            if *t2 == t && invisible.contains(*xid) {
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
            lsn_text(bound.lsn),
            rows.num_rows()
        );
        let item = if rows.num_rows() == 0 {
            Item::Moved(pos.clone())
        } else {
            let batch = ChangeBatch::inserts(table.schema.name.clone(), rows);
            Item::Rows(
                as_events(table, batch, &snapshot_origin(bound.lsn))?,
                pos.clone(),
            )
        };
        if !tx.send(Ok(item)).await {
            return Ok(());
        }
    }
}

/// Whether the first read of a replayed micro-batch finished table `name`'s snapshot.
fn u_done(bound: &Bound, name: &str) -> bool {
    bound
        .until
        .as_ref()
        .is_some_and(|u| u.snapshotted.iter().any(|n| n == name))
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

async fn connect_replication(s: &Settings, lsn: u64) -> Result<ReplicationClient> {
    let c = &s.conn;
    let mut cfg = ReplicationConfig::new(
        c.host.clone(),
        c.user.clone(),
        c.password.as_ref().map(|p| p.0.clone()).unwrap_or_default(),
        c.database.clone(),
        s.slot.clone(),
        s.publication.clone(),
    )
    .with_port(c.port)
    .with_tls(TlsConfig::disabled())
    .with_start_lsn(Lsn(lsn))
    .with_ack_lsn(Lsn(lsn))
    .with_binary(true)
    .with_status_interval(Duration::from_secs(1))
    .with_wakeup_interval(Duration::from_secs(10))
    .with_buffer_size(4096);
    cfg = cfg.with_application_name(
        c.properties
            .get("ApplicationName")
            .cloned()
            .unwrap_or_else(|| "ferry-postgres-cdc".into()),
    );
    // A slot streams to one connection at a time. The one holding it is this job's own
    // earlier reader (the job's lock admits one run): a killed process's walsender the
    // server has not noticed dead yet, or, on Spark, a reader a worker kept for a batch it
    // did not get. After a short wait it is ended, so that the job goes on from its
    // checkpoint rather than wait for it.
    let start = Instant::now();
    let deadline = start + c.connect_timeout;
    loop {
        // `connect` returns before START_REPLICATION runs: wait until the server took it.
        let started = match ReplicationClient::connect(cfg.clone()).await {
            Ok(mut r) => r.wait_started().await.map(|()| r),
            Err(e) => Err(e),
        };
        match started {
            Ok(r) => return Ok(r),
            Err(e) => {
                let text = e.to_string();
                if text.contains("is active for PID") && Instant::now() < deadline {
                    if start.elapsed() > Duration::from_secs(2) {
                        if let Ok(sql) = connect_pg(c, COMPONENT).await {
                            let _ = sql
                                .execute(
                                    "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                                     WHERE slot_name = $1 AND active_pid IS NOT NULL",
                                    &[&s.slot],
                                )
                                .await;
                            tracing::info!(
                                "{COMPONENT}: ended the earlier reader that still held slot '{}'",
                                s.slot
                            );
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
                return Err(FerryError::external(
                    COMPONENT,
                    format!(
                        "starting replication from slot '{}' at {} on {}: {text}",
                        s.slot,
                        lsn_text(lsn),
                        c.address()
                    ),
                ));
            }
        }
    }
}

impl Task<'_> {
    /// Hands `item` to the reader; `false` when the reader is gone.
    async fn send(&mut self, item: Item) -> bool {
        if matches!(item, Item::Moved(_)) {
            self.last_moved = Instant::now();
        }
        self.tx.send(Ok(item)).await
    }

    /// Ends the replication connection and waits until the server no longer shows
    /// `walsender` (ours) holding the slot; after [`RELEASE_WAIT`] it is ended.
    async fn release(&mut self, walsender: Option<i32>) -> Result<()> {
        if tokio::time::timeout(RELEASE_WAIT, self.repl.shutdown())
            .await
            .is_err()
        {
            self.repl.abort();
        }
        let Some(pid) = walsender else {
            return Ok(());
        };
        let mut started = Instant::now();
        let mut ended = false;
        loop {
            let held = self
                .sql
                .query_opt(
                    "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND active_pid = $2",
                    &[&self.s.slot, &pid],
                )
                .await
                .map_err(pg)?
                .is_some();
            if !held {
                return Ok(());
            }
            if started.elapsed() > RELEASE_WAIT {
                if ended {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!(
                            "the server still shows this reader's connection (pid {pid}) holding slot '{}' after it was ended",
                            self.s.slot
                        ),
                    ));
                }
                let _ = self
                    .sql
                    .execute("SELECT pg_terminate_backend($1)", &[&pid])
                    .await;
                ended = true;
                // As long again for the ended connection to go.
                started = Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether an event at `lsn` (the commit LSN of a transaction about to begin, a
    /// non-transactional message, a keepalive's sent position outside a transaction) is
    /// at or past the micro-batch's bound; if so the position becomes the bound: every
    /// transaction whose commit starts before it has been returned.
    /// Every table's snapshot is complete and handed on: no chunk left, no window open.
    fn snapshot_done(&self) -> bool {
        self.next_chunk().is_none() && self.windows.is_empty() && self.pending.is_none()
    }

    fn passes_bound(&mut self, lsn: u64) -> bool {
        let Some(b) = &self.bound else {
            return false;
        };
        if self.in_txn || lsn < b.lsn {
            return false;
        }
        self.pos.lsn = self.pos.lsn.max(b.lsn);
        self.pos.skip = 0;
        true
    }

    /// The stream loop.
    async fn stream(&mut self) -> Result<Ended> {
        loop {
            if self.control.stop.load(Ordering::SeqCst) {
                return Ok(Ended::Gone);
            }
            if self.bound.as_ref().is_some_and(|b| self.pos.lsn >= b.lsn) && !self.in_txn {
                return Ok(Ended::Reached);
            }
            if self.stop_passed && self.snapshot_done() {
                return Ok(Ended::Stopped);
            }
            // Confirm to the server what the reader says is committed downstream.
            let a = self.tx_ack.load(Ordering::SeqCst);
            if a > self.acked {
                self.repl.update_applied_lsn(Lsn(a));
                self.acked = a;
            }
            // Bounded micro-batches read chunks after their bound, not in windows.
            if self.snapshotter.is_none() && self.bound.is_none() && self.next_chunk().is_some() {
                self.snapshotter = Some(Snapshotter::start(
                    self.s.clone(),
                    self.pos.clone(),
                    self.nonce.clone(),
                ));
            }
            if let Some(e) = self.snapshot_failure().await {
                return Err(e);
            }
            let ev = match tokio::time::timeout(Duration::from_millis(500), self.repl.recv()).await
            {
                Err(_) => continue,
                Ok(Ok(Some(ev))) => ev,
                Ok(Ok(None)) => {
                    return Err(FerryError::external(
                        COMPONENT,
                        "the server ended the replication stream",
                    ))
                }
                Ok(Err(e)) => {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!(
                            "replication stream from slot '{}' on {}: {e}",
                            self.s.slot,
                            self.s.conn.address()
                        ),
                    ))
                }
            };
            // Everything before the stop position has come through once the stream meets
            // something at or after it outside a transaction.
            if let Some(stop) = self.pos.stop {
                let at = match &ev {
                    ReplicationEvent::Begin { final_lsn, .. } => Some(final_lsn.0),
                    ReplicationEvent::Message {
                        transactional: false,
                        lsn,
                        ..
                    } => Some(lsn.0),
                    ReplicationEvent::KeepAlive { wal_end, .. } => Some(wal_end.0),
                    _ => None,
                };
                if !self.in_txn && at.is_some_and(|l| l >= stop) {
                    // Every transaction committed before the stop has come through, so a
                    // resume there skips nothing (as at a micro-batch's bound).
                    self.stop_passed = true;
                    if self.pos.lsn < stop {
                        self.pos.lsn = stop;
                        self.pos.skip = 0;
                    }
                }
            }
            let alive = match ev {
                ReplicationEvent::Begin { final_lsn, .. } if self.passes_bound(final_lsn.0) => {
                    return Ok(Ended::Reached)
                }
                ReplicationEvent::Message {
                    transactional: false,
                    lsn,
                    ..
                } if self.passes_bound(lsn.0) => return Ok(Ended::Reached),
                ReplicationEvent::KeepAlive { wal_end, .. } if self.passes_bound(wal_end.0) => {
                    return Ok(Ended::Reached)
                }
                ReplicationEvent::Begin {
                    xid,
                    commit_time_micros,
                    ..
                } => {
                    self.txn_commit_micros = commit_time_micros;
                    self.xid = xid;
                    self.in_txn = true;
                    self.txn_start = self.pos.lsn;
                    self.txn_changes = 0;
                    true
                }
                ReplicationEvent::XLogData {
                    data,
                    wal_start,
                    wal_end,
                    server_time_micros,
                } => {
                    self.change_lsn = wal_start.0;
                    self.progress.saw_server(wal_end.0, server_time_micros);
                    self.on_data(&data).await?
                }
                ReplicationEvent::Commit { end_lsn, .. } => {
                    self.in_txn = false;
                    self.to_skip = 0;
                    self.pos.lsn = self.pos.lsn.max(end_lsn.0);
                    self.pos.skip = 0;
                    if self.pending.is_some() {
                        let alive = self.flush().await?;
                        self.progress
                            .last_commit_micros
                            .store(self.txn_commit_micros, Ordering::Relaxed);
                        alive
                    } else if self.last_moved.elapsed() >= MOVED_EVERY {
                        let p = self.pos.clone();
                        self.send(Item::Moved(p)).await
                    } else {
                        true
                    }
                }
                ReplicationEvent::Message {
                    transactional,
                    lsn,
                    prefix,
                    content,
                } => {
                    if !transactional && prefix == WATERMARK_PREFIX {
                        self.on_watermark(lsn.0, &String::from_utf8_lossy(&content))
                            .await?
                    } else {
                        true
                    }
                }
                ReplicationEvent::KeepAlive {
                    wal_end,
                    server_time_micros,
                    ..
                } => {
                    self.progress.saw_server(wal_end.0, server_time_micros);
                    tracing::trace!(
                        "{COMPONENT}: keepalive at {} (in a transaction: {})",
                        lsn_text(wal_end.0),
                        self.in_txn
                    );
                    // Everything before the server's sent position has come through: when no
                    // transaction is open here, resuming there skips nothing, so the slot
                    // can advance while the captured tables are idle.
                    if !self.in_txn && wal_end.0 > self.pos.lsn {
                        self.pos.lsn = wal_end.0;
                        self.pos.skip = 0;
                        if self.last_moved.elapsed() >= MOVED_EVERY {
                            let p = self.pos.clone();
                            self.send(Item::Moved(p)).await
                        } else {
                            true
                        }
                    } else {
                        true
                    }
                }
                ReplicationEvent::StoppedAt { .. } => true,
            };
            if !alive {
                return Ok(Ended::Gone);
            }
        }
    }

    async fn on_data(&mut self, data: &[u8]) -> Result<bool> {
        match pgoutput::decode(data)? {
            Message::Relation(r) => {
                let (mut m, absent) = map_relation(&self.s, &r)?;
                if !absent.is_empty() {
                    m.keep = self.describe(&r, &m, &absent).await?;
                }
                self.relations.insert(r.id, m);
                Ok(true)
            }
            Message::Change(c) => self.on_change(c).await,
            Message::Other(_) => Ok(true),
        }
    }

    /// Decides what the columns of a captured table that a relation description lacks
    /// (`absent`) mean, from the server's catalog now: columns it still has were added
    /// after these changes were written (the job restarted with the table's new columns),
    /// so the changes carry NULL for them, or, where the column has a default, leave them
    /// as the target holds them (returned); a column it no longer has was dropped while
    /// the job ran, which stops the job.
    async fn describe(&self, r: &Relation, m: &RelMap, absent: &[String]) -> Result<Vec<usize>> {
        let Some(t) = m.table else {
            return Ok(Vec::new());
        };
        let table = &self.s.tables[t];
        let now = self
            .sql
            .query(
                "SELECT attname::text, atthasdef OR attidentity <> '' OR attgenerated <> '' \
                 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 \
                 AND NOT attisdropped",
                &[&table.quoted()],
            )
            .await
            .map_err(pg)?;
        let mut keep = Vec::new();
        for name in absent {
            let Some(row) = now.iter().find(|row| row.get::<_, String>(0) == *name) else {
                return Err(FerryError::external(
                    COMPONENT,
                    format!(
                        "table {}.{} no longer has column '{name}' (dropped or renamed after the \
                         job started): Postgres-CDC does not follow schema changes while it runs, \
                         so the job stops; restart it to go on with the table's columns as they \
                         are now",
                        r.namespace, r.name
                    ),
                ));
            };
            let defaulted: bool = row.get(1);
            if defaulted {
                if let Some(i) = table.columns.iter().position(|c| c.name == *name) {
                    keep.push(i);
                }
            }
            tracing::info!(
                "{COMPONENT}: changes of {} written before column '{name}' was added {}",
                table.schema.name,
                if defaulted {
                    "leave it as the target holds it (it has a default)"
                } else {
                    "carry NULL for it"
                }
            );
        }
        Ok(keep)
    }

    async fn on_change(&mut self, c: Change<'_>) -> Result<bool> {
        // `txn_changes` counts the changes before this one until it is appended, so that a
        // hand-over before it says exactly how many were returned.
        if self.to_skip > 0 {
            // Returned before the restore: the first transaction comes again in full.
            self.to_skip -= 1;
            self.txn_changes += 1;
            return Ok(true);
        }
        let rel = match &c {
            Change::Insert { rel, .. }
            | Change::Update { rel, .. }
            | Change::Delete { rel, .. } => *rel,
            Change::Truncate { rels } => {
                let names: Vec<String> = rels
                    .iter()
                    .filter_map(|r| self.relations.get(r).and_then(|m| m.table))
                    .map(|t| self.s.tables[t].schema.name.to_string())
                    .collect();
                if !names.is_empty() {
                    tracing::warn!(
                        "{COMPONENT}: TRUNCATE of {} is not passed on (SeaTunnel passes none either)",
                        names.join(", ")
                    );
                }
                self.txn_changes += 1;
                return Ok(true);
            }
        };
        let Some(map) = self.relations.get(&rel) else {
            return Err(FerryError::external(
                COMPONENT,
                format!("a change refers to relation {rel}, which the stream never described"),
            ));
        };
        let Some(t) = map.table else {
            self.txn_changes += 1;
            return Ok(true);
        };
        let mut alive = true;
        if self.pending.as_ref().is_some_and(|p| p.table != t) {
            alive = self.flush_partial().await?;
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
                lsns: Vec::new(),
                unchanged: BTreeMap::new(),
            });
        }
        let table = &self.s.tables[t];
        let map = &self.relations[&rel];
        let p = self
            .pending
            .as_mut()
            .ok_or_else(|| FerryError::internal("no pending rows"))?;
        match c {
            Change::Insert { new, .. } => {
                let row = p.kinds.len();
                let marks = append_row(table, map, &mut p.builders, &new, None, false, true)?;
                for column in marks {
                    p.unchanged.entry(column).or_default().push(row);
                }
                p.kinds.push(RowKind::Insert as u8);
            }
            Change::Update { old, new, .. } => {
                let old_full = old
                    .as_ref()
                    .filter(|(k, _)| *k == b'O')
                    .map(|(_, t)| t.as_slice());
                match &old {
                    Some((_, before)) => {
                        append_row(table, map, &mut p.builders, before, None, false, false)?;
                    }
                    // No old tuple: the key did not change; the row before is the key alone.
                    None => append_key_only(table, map, &mut p.builders, &new)?,
                }
                p.kinds.push(RowKind::UpdateBefore as u8);
                let row = p.kinds.len();
                let marks = append_row(table, map, &mut p.builders, &new, old_full, true, true)?;
                for column in marks {
                    p.unchanged.entry(column).or_default().push(row);
                }
                p.kinds.push(RowKind::UpdateAfter as u8);
            }
            Change::Delete { old, .. } => {
                append_row(table, map, &mut p.builders, &old.1, None, false, false)?;
                p.kinds.push(RowKind::Delete as u8);
            }
            Change::Truncate { .. } => {}
        }
        if table.envelope.is_some() {
            p.lsns.resize(p.kinds.len(), self.change_lsn);
        }
        self.txn_changes += 1;
        if p.kinds.len() >= self.s.fetch_size {
            alive = alive && self.flush_partial().await?;
        }
        Ok(alive)
    }

    /// Hands over the pending rows in the middle of a transaction.
    async fn flush_partial(&mut self) -> Result<bool> {
        let pos = Position {
            lsn: self.txn_start,
            skip: self.txn_changes,
            ..self.pos.clone()
        };
        self.hand_over(pos).await
    }

    /// Hands over the pending rows at a commit.
    async fn flush(&mut self) -> Result<bool> {
        let pos = self.pos.clone();
        self.hand_over(pos).await
    }

    async fn hand_over(&mut self, pos: Position) -> Result<bool> {
        let Some(mut p) = self.pending.take() else {
            return Ok(true);
        };
        let data = p.builders.finish()?;
        // Keys matter only while a snapshot is under way (a window, or tables still to
        // read): once it is done, a change's keys are not looked at again.
        self.take_windows();
        if !self.windows.is_empty() || self.next_chunk().is_some() {
            let table = &self.s.tables[p.table];
            let keys: ReturnedKeys = Arc::new(row_keys(table, &data)?);
            for w in self.windows.iter_mut().filter(|w| w.table == p.table) {
                if w.open {
                    w.touched.extend(keys.iter().cloned());
                } else {
                    // Before the low watermark: touched only if the snapshot misses it.
                    w.before_low.push((self.xid, keys.clone()));
                }
            }
            self.recent.push_back((self.xid, p.table, keys));
            while self.recent.len() > RECENT_TXNS {
                self.recent.pop_front();
            }
        }
        let xid = self.xid;
        tracing::trace!(
            "{COMPONENT}: {} changes of transaction {xid}, position {} + {}",
            p.kinds.len(),
            lsn_text(pos.lsn),
            pos.skip
        );
        let table = &self.s.tables[p.table];
        let rows = p.kinds.len();
        let mut batch =
            ChangeBatch::with_kinds(table.schema.name.clone(), data, UInt8Array::from(p.kinds));
        if let Some(marks) = Unchanged::from_rows(rows, p.unchanged) {
            batch = batch.with_unchanged(marks);
        }
        let (xid, ts_ms, lsns) = (
            i64::from(xid),
            (self.txn_commit_micros + PG_EPOCH_MICROS).div_euclid(1000),
            p.lsns,
        );
        let batch = as_events(table, batch, &|i| Origin {
            snapshot: false,
            ts_ms,
            position: LogPosition::Postgres {
                tx_id: Some(xid),
                lsn: lsns.get(i).map(|l| *l as i64),
            },
        })?;
        Ok(self.send(Item::Rows(batch, pos)).await)
    }

    /// Which table's snapshot comes next, and after which key.
    fn next_chunk(&self) -> Option<(usize, Vec<String>)> {
        next_chunk(&self.s, &self.pos)
    }

    /// The snapshotter's error, once it has failed.
    async fn snapshot_failure(&mut self) -> Option<FerryError> {
        self.snapshotter.as_mut()?.failure(false).await
    }

    /// Takes the windows the snapshotter has registered.
    fn take_windows(&mut self) {
        if let Some(sn) = self.snapshotter.as_mut() {
            while let Ok(w) = sn.windows.try_recv() {
                self.windows.push_back(w);
            }
        }
    }

    async fn on_watermark(&mut self, lsn: u64, content: &str) -> Result<bool> {
        // A window is registered before its low watermark is written.
        self.take_windows();
        let Some(w) = self.windows.front_mut() else {
            return Ok(true);
        };
        let Some((id, mark)) = content.rsplit_once(':') else {
            return Ok(true);
        };
        if id != w.id {
            // A window of an earlier run, sent again after a restore.
            return Ok(true);
        }
        if mark == "L" {
            w.open = true;
            // Transactions returned before the window was registered (a few may commit
            // just before the low watermark and still be invisible to the snapshot).
            let t = w.table;
            w.before_low.extend(
                self.recent
                    .iter()
                    .filter(|r| r.1 == t)
                    .map(|(xid, _, keys)| (*xid, keys.clone())),
            );
            return Ok(true);
        }
        if mark != "H" || !w.open {
            return Ok(true);
        }
        let Some(mut w) = self.windows.pop_front() else {
            return Ok(true);
        };
        // The rows are sent before the high watermark is written.
        let read = match (&mut w.read).await {
            Ok(read) => read,
            Err(_) => {
                let failure = match self.snapshotter.as_mut() {
                    Some(sn) => sn.failure(true).await,
                    None => None,
                };
                return Err(failure.unwrap_or_else(|| {
                    FerryError::internal("the snapshot reader ended before sending a window's rows")
                }));
            }
        };
        // Transactions returned before the low watermark that a snapshot did not see
        // (committed in the WAL just before it, visible only after the snapshot was taken).
        for (xid, keys) in std::mem::take(&mut w.before_low) {
            if read.misses(xid) {
                w.touched.extend(keys.iter().cloned());
            }
        }
        let s = self.s.clone();
        let table = &s.tables[w.table];
        let name = table.schema.name.to_string();
        self.pos.lsn = self.pos.lsn.max(lsn + 1);
        self.pos.skip = 0;
        let WindowRead {
            chunks,
            invisible,
            last,
        } = read;
        let count = chunks.len();
        for (i, (chunk, next)) in chunks.into_iter().enumerate() {
            let read = chunk.num_rows();
            let rows = without_keys(chunk, &table.key_indexes(), &w.touched)?;
            self.progress.chunks.fetch_add(1, Ordering::Relaxed);
            let end = i + 1 == count;
            if end && last {
                self.pos.chunk = None;
                self.pos.snapshotted.push(name.clone());
                tracing::info!("{COMPONENT}: snapshot of {name} complete");
            } else {
                // Each chunk is handed over with the position after it: a checkpoint
                // between two of them resumes with the next.
                self.pos.chunk = Some(ChunkProgress {
                    table: name.clone(),
                    after: next,
                });
            }
            tracing::debug!(
                "{COMPONENT}: chunk of {name} at {}: {} of {read} rows ({} keys touched, {} transactions running at its snapshot)",
                lsn_text(lsn),
                rows.num_rows(),
                w.touched.len(),
                invisible.get(i).map_or(0, |v| v.running.len()),
            );
            let pos = self.pos.clone();
            let alive = if rows.num_rows() == 0 {
                !end || self.send(Item::Moved(pos)).await
            } else {
                let batch = ChangeBatch::inserts(table.schema.name.clone(), rows);
                let batch = as_events(table, batch, &snapshot_origin(lsn))?;
                self.send(Item::Rows(batch, pos)).await
            };
            if !alive {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Appends one tuple as a row. An unchanged TOASTed value (which the server leaves out)
/// is taken from `old_full`, the old row, when the replica identity sends it; otherwise,
/// in an update's new row (`update_after`), the column is
/// left NULL and returned among the columns the row leaves unchanged, which the sink keeps
/// as the target holds them ([`Unchanged`]). A column the table gained after the change
/// is NULL, and with `keep_absent` (rows that write the target) returned among them too
/// where the table gives it a default ([`RelMap::keep`]).
fn append_row(
    table: &CdcTable,
    map: &RelMap,
    b: &mut Builders,
    tuple: &[Datum<'_>],
    old_full: Option<&[Datum<'_>]>,
    update_after: bool,
    keep_absent: bool,
) -> Result<Vec<usize>> {
    let mut unchanged = Vec::new();
    for (i, from) in map.from.iter().enumerate() {
        let Some(from) = from else {
            // A column added after this change: see `Stream::describe`.
            if keep_absent && map.keep.contains(&i) && table.envelope.is_none() {
                unchanged.push(i);
            }
            b.append_pg(i, None)?;
            continue;
        };
        let mut d = tuple.get(*from).copied().unwrap_or(Datum::Null);
        if d == Datum::Unchanged {
            d = match old_full.and_then(|o| o.get(*from).copied()) {
                Some(v @ Datum::Value(_)) | Some(v @ Datum::Null) => v,
                // Debezium's events have no way to say "unchanged" that its readers share.
                _ if update_after && table.envelope.is_none() => {
                    unchanged.push(i);
                    Datum::Null
                }
                _ => {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!(
                            "an update of {} left column '{}' out (an unchanged TOASTed value the \
                             server does not send), and the Debezium events of `format = \
                             COMPATIBLE_DEBEZIUM_JSON` cannot say it is unchanged; writing it as \
                             NULL would be wrong. Let the server send old rows: ALTER TABLE {} \
                             REPLICA IDENTITY FULL",
                            table.schema.name,
                            table.columns[i].name,
                            table.quoted()
                        ),
                    ))
                }
            };
        }
        match d {
            Datum::Value(v) => {
                let v = convert(table.convs[i], v)?;
                b.append_pg(i, Some(&v))?
            }
            _ => b.append_pg(i, None)?,
        }
    }
    b.end_row();
    Ok(unchanged)
}

/// Appends the key columns of `tuple` with every other column NULL.
fn append_key_only(
    table: &CdcTable,
    map: &RelMap,
    b: &mut Builders,
    tuple: &[Datum<'_>],
) -> Result<()> {
    let keys = table.key_indexes();
    for (i, from) in map.from.iter().enumerate() {
        match from.and_then(|f| tuple.get(f)) {
            Some(Datum::Value(v)) if keys.contains(&i) => {
                let v = convert(table.convs[i], v)?;
                b.append_pg(i, Some(&v))?
            }
            _ => b.append_pg(i, None)?,
        }
    }
    b.end_row();
    Ok(())
}

/// The key of every row of `batch`, row-encoded (equal keys, equal bytes).
fn row_keys(table: &CdcTable, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
    ferry_db::keys::row_keys(batch, &table.key_indexes())
}

/// A key's text values as SQL literals of the key columns' types.
fn key_literals(table: &CdcTable, key: &[String]) -> Vec<String> {
    key.iter()
        .zip(table.key_indexes())
        .map(|(v, i)| {
            format!(
                "{}::{}",
                literal(Dialect::Postgres, v),
                table.columns[i].source_type
            )
        })
        .collect()
}

/// A chunk read from the table: its rows, its last key as text (empty when it has no
/// rows), whether it holds every row of its range (fewer than its limit came), and the
/// transactions its snapshot does not see.
struct ChunkRead {
    rows: RecordBatch,
    last_key: Vec<String>,
    complete: bool,
    invisible: Invisible,
}

/// Reads the rows after key `after` (from the table's first when empty) up to key `upto`
/// when given, at most `limit` of them when given, in key order, in a snapshot of its own.
/// A table that cannot be cut by key is read whole.
async fn read_chunk(
    sql: &tokio_postgres::Client,
    table: &CdcTable,
    after: &[String],
    upto: Option<&[String]>,
    limit: Option<usize>,
) -> Result<ChunkRead> {
    let d = Dialect::Postgres;
    // One snapshot for the chunk, whose running transactions are noted (see `Window`).
    sql.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(pg)?;
    let snap: String = sql
        .query_one("SELECT pg_current_snapshot()::text", &[])
        .await
        .map_err(pg)?
        .get(0);
    let invisible = Invisible::parse(&snap)?;
    let select: Vec<&str> = table.columns.iter().map(|c| c.select.as_str()).collect();
    let mut q = format!("SELECT {} FROM {}", select.join(", "), table.quoted());
    let chunked = table.chunkable();
    if chunked {
        let keys: Vec<String> = table.key.iter().map(|k| d.quote(k)).collect();
        let lits = |key: &[String]| key_literals(table, key);
        let mut conds = Vec::new();
        if !after.is_empty() {
            conds.push(format!(
                "({}) > ({})",
                keys.join(", "),
                lits(after).join(", ")
            ));
        }
        if let Some(upto) = upto.filter(|u| !u.is_empty()) {
            conds.push(format!(
                "({}) <= ({})",
                keys.join(", "),
                lits(upto).join(", ")
            ));
        }
        if !conds.is_empty() {
            q.push_str(&format!(" WHERE {}", conds.join(" AND ")));
        }
        q.push_str(&format!(" ORDER BY {}", keys.join(", ")));
        if let Some(limit) = limit {
            q.push_str(&format!(" LIMIT {limit}"));
        }
    }
    let copy = format!("COPY ({q}) TO STDOUT (FORMAT binary)");
    let stream = sql
        .copy_out(&copy)
        .await
        .map_err(|e| FerryError::external(COMPONENT, format!("{}: {q}", pg_error_text(&e))))?;
    futures_util::pin_mut!(stream);
    let mut builders = Builders::new(
        &table.columns,
        table.schema.schema.clone(),
        limit.unwrap_or(8192).min(65_536),
        COMPONENT,
    )?;
    let mut dec = CopyDecoder::new(table.columns.len());
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(pg)?;
        dec.push(&chunk);
        dec.drain(&mut builders, usize::MAX)?;
    }
    dec.drain(&mut builders, usize::MAX)?;
    sql.batch_execute("COMMIT").await.map_err(pg)?;
    let batch = builders.finish()?;
    let n = batch.num_rows();
    let complete = !chunked || limit.is_none_or(|l| n < l);
    let mut last_key = Vec::new();
    if chunked && n > 0 {
        let opts = arrow::util::display::FormatOptions::default();
        for i in table.key_indexes() {
            let f = arrow::util::display::ArrayFormatter::try_new(batch.column(i).as_ref(), &opts)?;
            last_key.push(f.value(n - 1).to_string());
        }
    }
    Ok(ChunkRead {
        rows: batch,
        last_key,
        complete,
        invisible,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_does_not_see_its_running_transactions_nor_any_from_its_xmax_on() {
        let inv = Invisible::parse("100:105:101,103").unwrap();
        for (xid, hidden) in [
            (99, false),
            (100, false),
            (101, true),
            (102, false),
            (103, true),
            (104, false),
            (105, true),
            (9000, true),
        ] {
            assert_eq!(inv.contains(xid), hidden, "xid {xid}");
        }
        // Ids wrap around at 2^32: the stream gives the low 32 bits.
        let inv = Invisible::parse(&format!("{}:{}:", (1u64 << 32) + 5, (1u64 << 32) + 7)).unwrap();
        assert!(inv.contains(7) && inv.contains(8) && !inv.contains(6));
        assert!(Invisible::parse("garbage").is_err());
    }
}
