//! The `LocalFile` sink: writes text, csv, json or parquet files, optionally in
//! hive-style partition directories, and publishes them exactly once through staged
//! files that the committer renames into place. A stream of several tables is written
//! table by table, each with its own columns, files and (through `${table_name}` and the
//! other table placeholders) directory, as SeaTunnel's multi-table file sink does.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow::datatypes::{DataType, SchemaRef};
use ferry_api::value::{array_value_to_json, RowStyle};
use ferry_api::{
    FerryError, JobContext, OptionKind, OptionSpec, Options, Result, Sink, SinkCommitter,
    SinkDelivery, SinkFactory, SinkWriter, TableSchema, WriterContext,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde_json::{json, Map, Value};

use crate::lzo::LzopWriter;
use crate::read::{Format, COMPONENT};
use crate::source::{list_files, read_encoding, read_format};
use crate::text::Enc;
use crate::util::java_pattern_to_chrono;
use ferry_api::placeholder::substitute;

/// Where staged files live under the output path; the leading `_` hides it from readers.
pub const STAGING_DIR: &str = "_ferry_tmp";
const SINK_FORMATS: &[&str] = &[
    "text", "csv", "json", "parquet", "orc", "excel", "xml", "binary",
];
const CODECS: &[&str] = &[
    "none", "lzo", "snappy", "gzip", "zstd", "lz4", "brotli", "zlib",
];
const SCHEMA_SAVE_MODES: &[&str] = &[
    "RECREATE_SCHEMA",
    "CREATE_SCHEMA_WHEN_NOT_EXIST",
    "ERROR_WHEN_SCHEMA_NOT_EXIST",
    "IGNORE",
];
const DATA_SAVE_MODES: &[&str] = &["DROP_DATA", "APPEND_DATA", "ERROR_WHEN_DATA_EXISTS"];
const LEGACY_SAVE_MODES: &[&str] = &["error", "errorifexists", "overwrite", "append", "ignore"];
const DEFAULT_PARTITION_DIR_EXPRESSION: &str = "${k0}=${v0}/${k1}=${v1}/.../${kn}=${vn}/";

/// The sink's options.
pub const SINK_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required("path", OptionKind::String, "Directory to write into; ${table_name}, ${database_name}, ${schema_name} name each input table's own directory."),
    OptionSpec::optional("file_format_type", OptionKind::Enum(SINK_FORMATS), Some("csv"), "text, csv, json or parquet."),
    OptionSpec::optional("field_delimiter", OptionKind::String, Some("\\u0001 (text), , (csv)"), "Column separator of text and csv."),
    OptionSpec::optional("row_delimiter", OptionKind::String, Some("\\n"), "Row separator of text, csv and json."),
    OptionSpec::optional("custom_filename", OptionKind::Bool, None, "Whether file_name_expression applies (it does when this is unset, as in older SeaTunnel)."),
    OptionSpec::optional("file_name_expression", OptionKind::String, Some("${transactionId}"), "File name: ${transactionId}, ${now}, ${uuid}; the transaction id is prefixed when missing so names stay unique."),
    OptionSpec::optional("filename_time_format", OptionKind::String, Some("yyyy.MM.dd"), "Java date pattern of ${now}."),
    OptionSpec::optional("filename_extension", OptionKind::String, None, "Replaces the format's file name suffix."),
    OptionSpec::optional("is_enable_transaction", OptionKind::Bool, Some("true"), "Stage files and publish them at checkpoint commit (exactly once)."),
    OptionSpec::optional("have_partition", OptionKind::Bool, Some("false"), "Partition output by partition_by."),
    OptionSpec::optional("partition_by", OptionKind::List, None, "Columns whose values name the partition directories."),
    OptionSpec::optional("partition_dir_expression", OptionKind::String, Some(DEFAULT_PARTITION_DIR_EXPRESSION), "Partition directory: ${kN} and ${vN} are the N-th partition column and value."),
    OptionSpec::optional("is_partition_field_write_in_file", OptionKind::Bool, Some("false"), "Also write partition columns inside the files."),
    OptionSpec::optional("sink_columns", OptionKind::List, None, "Columns to write, in order (default: all)."),
    OptionSpec::optional("compress_codec", OptionKind::Enum(CODECS), Some("none"), "text/csv/json: none or lzo (lzop files); parquet: none, snappy, gzip, zstd, lz4, brotli."),
    OptionSpec::optional("batch_size", OptionKind::Int, Some("1000000"), "Rows per file before rolling to a new one."),
    OptionSpec::optional("single_file_mode", OptionKind::Bool, Some("false"), "Never roll files by batch_size."),
    OptionSpec::optional("enable_header_write", OptionKind::Bool, Some("false"), "Write a header line of column names (text, csv)."),
    OptionSpec::optional("encoding", OptionKind::String, Some("UTF-8"), "Character set of text, csv and json output."),
    OptionSpec::optional("schema_save_mode", OptionKind::Enum(SCHEMA_SAVE_MODES), Some("CREATE_SCHEMA_WHEN_NOT_EXIST"), "What to do with the output directory before the job."),
    OptionSpec::optional("data_save_mode", OptionKind::Enum(DATA_SAVE_MODES), Some("APPEND_DATA"), "What to do with files already in the output directory."),
    OptionSpec::optional("save_mode", OptionKind::Enum(LEGACY_SAVE_MODES), None, "Old spelling: error = ERROR_WHEN_DATA_EXISTS, overwrite = DROP_DATA, append/ignore = APPEND_DATA."),
    OptionSpec::optional("tmp_path", OptionKind::String, Some("/tmp/seatunnel"), "Accepted for compatibility; Ferry stages under <path>/_ferry_tmp so publishing is a same-disk rename."),
];

/// SeaTunnel's `LocalFile` sink.
pub struct LocalFileSinkFactory;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextCodec {
    None,
    Lzo,
}

/// What every input table shares.
#[derive(Debug)]
struct SinkConfig {
    format: Format,
    field_delimiter: String,
    row_delimiter: String,
    time_format: String,
    transactional: bool,
    partition_names: Vec<String>,
    text_codec: TextCodec,
    parquet_codec: Compression,
    batch_size: u64,
    single_file: bool,
    header: bool,
    encoding: Option<&'static encoding_rs::Encoding>,
    job_id: String,
    /// One per input table, in input order.
    tables: Vec<TableConfig>,
    /// Index into `tables` by table name.
    by_name: HashMap<Arc<str>, usize>,
    /// The distinct output directories, in input order.
    roots: Vec<PathBuf>,
}

/// One input table's options after its placeholders were filled in, and its columns.
#[derive(Debug)]
struct TableConfig {
    name: Arc<str>,
    root: PathBuf,
    /// Part of the file names when another table writes into the same directory, so that
    /// the tables' files never collide (SeaTunnel gives each table's writer its own id).
    tag: Option<String>,
    name_expression: String,
    partition_expression: String,
    extension: String,
    /// Indices of partition columns in the input.
    partition_cols: Vec<usize>,
    /// Indices of the input columns written to files, in order.
    write_cols: Vec<usize>,
    write_schema: SchemaRef,
}

fn sanitize(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if t.is_empty() {
        "0".into()
    } else {
        t
    }
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> FerryError {
    FerryError::external(COMPONENT, format!("{}: {e}", path.display()))
}

/// The index of column `name` of `table`; `multi` says whether to name the table.
fn column_index(
    o: &Options,
    table: &TableSchema,
    multi: bool,
    key: &str,
    name: &str,
) -> Result<usize> {
    let schema = &table.schema;
    schema
        .fields()
        .iter()
        .position(|f| f.name() == name)
        .ok_or_else(|| {
            let whose = if multi {
                format!("input table '{}'", table.name)
            } else {
                "the input".to_string()
            };
            o.location().error_with_hint(
                key,
                format!("column '{name}' is not in {whose}"),
                format!(
                    "columns: {}",
                    schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })
}

/// The options each input table gets its own copy of, placeholders filled in.
struct PerTableOptions<'a> {
    path: &'a str,
    name_expression: &'a str,
    partition_expression: &'a str,
    extension: Option<&'a str>,
    partition_by: &'a [String],
    sink_columns: Option<&'a [String]>,
    partition_in_file: bool,
    default_extension: String,
}

/// Each input table's configuration: SeaTunnel creates one sink per table from the same
/// options with that table's placeholders filled in; so does this.
fn table_configs(
    o: &Options,
    input: &[TableSchema],
    opts: &PerTableOptions<'_>,
) -> Result<Vec<TableConfig>> {
    let multi = input.len() > 1;
    let mut tables = Vec::with_capacity(input.len());
    for table in input {
        let fields: Vec<&str> = table
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let sub = |t: &str| substitute(t, table);
        let mut partition_cols = Vec::new();
        for p in opts.partition_by {
            partition_cols.push(column_index(o, table, multi, "partition_by", p)?);
        }
        let mut write_cols = match opts.sink_columns {
            None => (0..fields.len()).collect::<Vec<_>>(),
            Some(cols) => cols
                .iter()
                .map(|c| column_index(o, table, multi, "sink_columns", c))
                .collect::<Result<Vec<_>>>()?,
        };
        if !opts.partition_in_file {
            write_cols.retain(|c| !partition_cols.contains(c));
        }
        let write_schema = Arc::new(table.schema.project(&write_cols)?);
        let extension = match opts.extension.map(sub) {
            Some(e) if e.starts_with('.') => e,
            Some(e) => format!(".{e}"),
            None => opts.default_extension.clone(),
        };
        tables.push(TableConfig {
            name: table.name.clone(),
            root: PathBuf::from(sub(opts.path)),
            tag: None,
            name_expression: sub(opts.name_expression),
            partition_expression: sub(opts.partition_expression),
            extension,
            partition_cols,
            write_cols,
            write_schema,
        });
    }
    // Tables that share a directory get their index and name in their file names.
    for i in 0..tables.len() {
        if tables
            .iter()
            .enumerate()
            .any(|(j, t)| j != i && t.root == tables[i].root)
        {
            tables[i].tag = Some(format!("{i}-{}", sanitize(&tables[i].name)));
        }
    }
    Ok(tables)
}

impl SinkFactory for LocalFileSinkFactory {
    fn name(&self) -> &'static str {
        "LocalFile"
    }

    fn description(&self) -> &'static str {
        "Writes text, csv, json or parquet files to a local directory, partitioned, published exactly once"
    }

    fn options(&self) -> &'static [OptionSpec] {
        SINK_OPTIONS
    }

    fn create(
        &self,
        o: &mut Options,
        input: &[TableSchema],
        job: &JobContext,
    ) -> Result<Arc<dyn Sink>> {
        let path = o.required_string("path")?;
        let format = read_format(o, SINK_FORMATS)?.unwrap_or(Format::Csv);
        let field_delimiter = o.string("field_delimiter")?.unwrap_or_else(|| {
            if format == Format::Csv {
                ",".into()
            } else {
                "\u{1}".into()
            }
        });
        let row_delimiter = o.string("row_delimiter")?.unwrap_or_else(|| "\n".into());
        let custom = o.bool("custom_filename")?;
        let expr = o.string("file_name_expression")?;
        let name_expression = match (custom, expr) {
            (Some(false), _) | (_, None) => "${transactionId}".to_string(),
            (_, Some(e)) => e,
        };
        let time_format = java_pattern_to_chrono(
            &o.string("filename_time_format")?
                .unwrap_or_else(|| "yyyy.MM.dd".into()),
        );
        let extension_opt = o.string("filename_extension")?;
        let transactional = o.bool("is_enable_transaction")?.unwrap_or(true);
        let have_partition = o.bool("have_partition")?.unwrap_or(false);
        let partition_by = o.string_list("partition_by")?.unwrap_or_default();
        if have_partition && partition_by.is_empty() {
            return Err(o.error(
                "partition_by",
                "must name the partition columns when have_partition = true",
            ));
        }
        let partition_expression = o
            .string("partition_dir_expression")?
            .unwrap_or_else(|| DEFAULT_PARTITION_DIR_EXPRESSION.into());
        let partition_in_file = o.bool("is_partition_field_write_in_file")?.unwrap_or(false);
        let sink_columns = o.string_list("sink_columns")?;
        let codec = o.enum_value("compress_codec", CODECS)?.unwrap_or("none");
        let batch_size = o.u64("batch_size")?.unwrap_or(1_000_000).max(1);
        let single_file = o.bool("single_file_mode")?.unwrap_or(false);
        let header = o.bool("enable_header_write")?.unwrap_or(false);
        let encoding = read_encoding(o)?;
        let schema_mode = o
            .enum_value("schema_save_mode", SCHEMA_SAVE_MODES)?
            .unwrap_or("CREATE_SCHEMA_WHEN_NOT_EXIST");
        let legacy = o.enum_value("save_mode", LEGACY_SAVE_MODES)?;
        let data_mode = match (o.enum_value("data_save_mode", DATA_SAVE_MODES)?, legacy) {
            (Some(m), _) => m,
            (None, Some("error" | "errorifexists")) => "ERROR_WHEN_DATA_EXISTS",
            (None, Some("overwrite")) => "DROP_DATA",
            _ => "APPEND_DATA",
        };
        let _ = o.string("tmp_path")?;
        o.finish(SINK_OPTIONS)?;

        let (text_codec, parquet_codec) = match (format, codec) {
            (_, "none") => (TextCodec::None, Compression::UNCOMPRESSED),
            (Format::Parquet, "snappy") => (TextCodec::None, Compression::SNAPPY),
            (Format::Parquet, "gzip") => (TextCodec::None, Compression::GZIP(GzipLevel::default())),
            (Format::Parquet, "zstd") => (TextCodec::None, Compression::ZSTD(ZstdLevel::default())),
            (Format::Parquet, "lz4") => (TextCodec::None, Compression::LZ4_RAW),
            (Format::Parquet, "brotli") => {
                (TextCodec::None, Compression::BROTLI(BrotliLevel::default()))
            }
            (Format::Text | Format::Csv | Format::Json, "lzo") => {
                (TextCodec::Lzo, Compression::UNCOMPRESSED)
            }
            (f, c) => {
                return Err(o.location().error_with_hint(
                    "compress_codec",
                    format!("'{c}' is not supported for the {f:?} format"),
                    "text, csv, json: none, lzo; parquet: none, snappy, gzip, zstd, lz4, brotli",
                ))
            }
        };
        if input.is_empty() {
            return Err(o.error("", "has no input table"));
        }
        let default_extension = if text_codec == TextCodec::Lzo {
            format!(".lzo{}", format.suffix())
        } else {
            format.suffix().to_string()
        };
        let tables = table_configs(
            o,
            input,
            &PerTableOptions {
                path: &path,
                name_expression: &name_expression,
                partition_expression: &partition_expression,
                extension: extension_opt.as_deref(),
                partition_by: &partition_by,
                sink_columns: sink_columns.as_deref(),
                partition_in_file,
                default_extension,
            },
        )?;
        let by_name = tables
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let mut roots: Vec<PathBuf> = Vec::new();
        for t in &tables {
            if !roots.contains(&t.root) {
                roots.push(t.root.clone());
            }
        }
        let cfg = SinkConfig {
            format,
            field_delimiter,
            row_delimiter,
            time_format,
            transactional,
            partition_names: partition_by,
            text_codec,
            parquet_codec,
            batch_size,
            single_file,
            header,
            encoding,
            job_id: sanitize(&job.job_id),
            tables,
            by_name,
            roots,
        };
        for root in &cfg.roots {
            apply_save_modes(root, &cfg.job_id, schema_mode, data_mode)?;
        }
        Ok(Arc::new(LocalFileSink { cfg: Arc::new(cfg) }))
    }
}

/// Marker that the save modes ran for this job, so that a restored job (same id) does
/// not drop the data its first run already committed.
fn save_mode_marker(root: &Path, job_id: &str) -> PathBuf {
    root.join(STAGING_DIR).join(job_id).join(".save_mode_done")
}

/// Runs the save modes on one output directory, once per job id.
fn apply_save_modes(root: &Path, job_id: &str, schema_mode: &str, data_mode: &str) -> Result<()> {
    let marker = save_mode_marker(root, job_id);
    if marker.exists() {
        return Ok(());
    }
    match schema_mode {
        "RECREATE_SCHEMA" if root.exists() => {
            std::fs::remove_dir_all(root).map_err(|e| io_err(root, e))?;
        }
        "ERROR_WHEN_SCHEMA_NOT_EXIST" if !root.exists() => {
            return Err(FerryError::external(COMPONENT, format!("output directory '{}' does not exist (schema_save_mode = ERROR_WHEN_SCHEMA_NOT_EXIST)", root.display())))
        }
        _ => {}
    }
    if root.exists() {
        match data_mode {
            "DROP_DATA" => {
                for entry in std::fs::read_dir(root).map_err(|e| io_err(root, e))? {
                    let entry = entry.map_err(|e| io_err(root, e))?;
                    if entry.file_name() == STAGING_DIR {
                        continue;
                    }
                    let p = entry.path();
                    let r = if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        std::fs::remove_dir_all(&p)
                    } else {
                        std::fs::remove_file(&p)
                    };
                    r.map_err(|e| io_err(&p, e))?;
                }
            }
            "ERROR_WHEN_DATA_EXISTS" => {
                if let Some(f) = list_files(root, None)?.first() {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!("output directory '{}' already holds data (e.g. '{}') and the save mode is ERROR_WHEN_DATA_EXISTS", root.display(), f.display()),
                    ));
                }
            }
            _ => {}
        }
    }
    if let Some(parent) = marker.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
    }
    File::create(&marker).map_err(|e| io_err(&marker, e))?;
    Ok(())
}

/// A configured `LocalFile` sink.
#[derive(Debug)]
pub struct LocalFileSink {
    cfg: Arc<SinkConfig>,
}

impl Sink for LocalFileSink {
    fn delivery(&self) -> SinkDelivery {
        if self.cfg.transactional {
            SinkDelivery::ExactlyOnce
        } else {
            SinkDelivery::AtLeastOnce
        }
    }

    fn create_writer(
        &self,
        ctx: &WriterContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SinkWriter>> {
        let restored_cp = restored
            .as_ref()
            .and_then(|v| v.get("checkpoint"))
            .and_then(Value::as_u64);
        let n = self.cfg.tables.len();
        let w = FileWriter {
            cfg: self.cfg.clone(),
            subtask: ctx.subtask,
            attempt: sanitize(&ctx.attempt),
            seq: restored_cp.map_or(1, |c| c + 1),
            last_checkpoint: restored_cp,
            open: (0..n).map(|_| HashMap::new()).collect(),
            rolls: (0..n).map(|_| HashMap::new()).collect(),
            staged_roots: vec![false; self.cfg.roots.len()],
            done: Vec::new(),
            line: String::new(),
        };
        if self.cfg.transactional {
            w.clean_stale_staging(restored_cp)?;
        }
        Ok(Box::new(w))
    }

    fn create_committer(&self) -> Result<Option<Box<dyn SinkCommitter>>> {
        Ok(Some(Box::new(FileCommitter {
            cfg: self.cfg.clone(),
        })))
    }
}

enum TextOut {
    Plain(BufWriter<File>),
    Lzo(LzopWriter<BufWriter<File>>),
}

impl TextOut {
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            TextOut::Plain(w) => w.write_all(b),
            TextOut::Lzo(w) => w.write_all(b),
        }
    }
    fn finish(self) -> std::io::Result<()> {
        match self {
            TextOut::Plain(mut w) => w.flush(),
            TextOut::Lzo(w) => w.finish()?.flush(),
        }
    }
}

enum Out {
    Text(TextOut),
    Parquet(Box<ArrowWriter<BufWriter<File>>>),
}

struct OpenOut {
    out: Out,
    rows: u64,
    staged: PathBuf,
    target: PathBuf,
}

/// One subtask's writer. Keeps, per input table, its open files by partition directory.
struct FileWriter {
    cfg: Arc<SinkConfig>,
    subtask: usize,
    attempt: String,
    /// Names this writer's files until the next prepared commit; above every
    /// checkpoint id already prepared.
    seq: u64,
    last_checkpoint: Option<u64>,
    /// Per table: open files by partition directory.
    open: Vec<HashMap<String, OpenOut>>,
    /// Per table: files opened so far per partition directory in this checkpoint.
    rolls: Vec<HashMap<String, u32>>,
    /// Per output directory (`cfg.roots`): whether this checkpoint staged a file there.
    staged_roots: Vec<bool>,
    /// Files closed since the last prepared commit: (staged, final).
    done: Vec<(PathBuf, PathBuf)>,
    line: String,
}

impl FileWriter {
    fn subtask_dir(&self, root: &Path) -> PathBuf {
        root.join(STAGING_DIR)
            .join(&self.cfg.job_id)
            .join(self.subtask.to_string())
    }

    fn stage_dir(&self, root: &Path) -> PathBuf {
        self.subtask_dir(root)
            .join(&self.attempt)
            .join(self.seq.to_string())
    }

    /// Removes what earlier attempts of this subtask staged after the checkpoint this
    /// writer restarts from: those rows were never committed and will be written again.
    /// Staged files of checkpoints up to it may still await their (repeated) commit.
    fn clean_stale_staging(&self, restored_cp: Option<u64>) -> Result<()> {
        for root in &self.cfg.roots {
            let dir = self.subtask_dir(root);
            let Ok(attempts) = std::fs::read_dir(&dir) else {
                continue;
            };
            for a in attempts.flatten() {
                let Ok(seqs) = std::fs::read_dir(a.path()) else {
                    continue;
                };
                for s in seqs.flatten() {
                    let seq = s.file_name().to_string_lossy().parse::<u64>().ok();
                    if restored_cp.is_none() || seq.is_none_or(|n| Some(n) > restored_cp) {
                        let p = s.path();
                        std::fs::remove_dir_all(&p).map_err(|e| io_err(&p, e))?;
                    }
                }
                let _ = std::fs::remove_dir(a.path()); // only when empty
            }
        }
        Ok(())
    }

    fn file_name(&self, table: &TableConfig, roll: u32) -> String {
        let mut tid = format!(
            "T_{}_{}_{}_{}",
            self.cfg.job_id, self.attempt, self.subtask, self.seq
        );
        if let Some(tag) = &table.tag {
            tid.push('_');
            tid.push_str(tag);
        }
        let mut name = table.name_expression.clone();
        if !name.contains("${transactionId}") {
            name = format!("${{transactionId}}_{name}");
        }
        if name.contains("${now}") {
            let now = chrono::Local::now()
                .format(&self.cfg.time_format)
                .to_string();
            name = name.replace("${now}", &now);
        }
        if name.contains("${uuid}") {
            name = name.replace("${uuid}", &uuid::Uuid::new_v4().to_string());
        }
        name = name.replace("${transactionId}", &tid);
        if roll > 0 {
            name.push_str(&format!("_{roll}"));
        }
        name.push_str(&table.extension);
        name
    }

    fn open_file(&mut self, t: usize, part: &str) -> Result<OpenOut> {
        let cfg = self.cfg.clone();
        let table = &cfg.tables[t];
        let roll = *self.rolls[t].get(part).unwrap_or(&0);
        let name = self.file_name(table, roll);
        self.rolls[t].insert(part.to_string(), roll + 1);
        let target = table.root.join(part).join(&name);
        let staged = if cfg.transactional {
            if let Some(r) = cfg.roots.iter().position(|r| *r == table.root) {
                self.staged_roots[r] = true;
            }
            self.stage_dir(&table.root).join(part).join(&name)
        } else {
            target.clone()
        };
        if let Some(parent) = staged.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
        }
        let file = BufWriter::with_capacity(
            1 << 20,
            File::create(&staged).map_err(|e| io_err(&staged, e))?,
        );
        let out = match cfg.format {
            Format::Parquet => {
                let props = WriterProperties::builder()
                    .set_compression(cfg.parquet_codec)
                    .build();
                Out::Parquet(Box::new(
                    ArrowWriter::try_new(file, table.write_schema.clone(), Some(props))
                        .map_err(|e| io_err(&staged, e))?,
                ))
            }
            _ => {
                let mut t = match cfg.text_codec {
                    TextCodec::None => TextOut::Plain(file),
                    TextCodec::Lzo => {
                        TextOut::Lzo(LzopWriter::new(file).map_err(|e| io_err(&staged, e))?)
                    }
                };
                if cfg.header && cfg.format != Format::Json {
                    let names: Vec<&str> = table
                        .write_schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect();
                    let line = format!("{}{}", names.join(&cfg.field_delimiter), cfg.row_delimiter);
                    t.write_all(&self.encode(&line))
                        .map_err(|e| io_err(&staged, e))?;
                }
                Out::Text(t)
            }
        };
        Ok(OpenOut {
            out,
            rows: 0,
            staged,
            target,
        })
    }

    fn encode<'a>(&self, s: &'a str) -> std::borrow::Cow<'a, [u8]> {
        match self.cfg.encoding {
            None => std::borrow::Cow::Borrowed(s.as_bytes()),
            Some(enc) => match enc.encode(s).0 {
                std::borrow::Cow::Borrowed(b) => std::borrow::Cow::Borrowed(b),
                std::borrow::Cow::Owned(b) => std::borrow::Cow::Owned(b),
            },
        }
    }

    /// Renders `batch` as text, csv or json lines into `self.line`.
    fn render(&mut self, batch: &RecordBatch) -> Result<()> {
        let cfg = self.cfg.clone();
        let line = &mut self.line;
        line.clear();
        if cfg.format == Format::Json {
            for i in 0..batch.num_rows() {
                let mut m = Map::new();
                for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
                    m.insert(
                        f.name().clone(),
                        array_value_to_json(c.as_ref(), i, RowStyle::Named),
                    );
                }
                line.push_str(&Value::Object(m).to_string());
                line.push_str(&cfg.row_delimiter);
            }
            return Ok(());
        }
        let encs = batch
            .columns()
            .iter()
            .map(|c| Enc::new(c.as_ref()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| FerryError::data(COMPONENT, e))?;
        let csv = cfg.format == Format::Csv;
        for i in 0..batch.num_rows() {
            for (n, e) in encs.iter().enumerate() {
                if n > 0 {
                    line.push_str(&cfg.field_delimiter);
                }
                let start = line.len();
                e.write(i, 0, line)
                    .map_err(|e| FerryError::data(COMPONENT, e))?;
                if csv {
                    let v = &line[start..];
                    if v.contains(cfg.field_delimiter.as_str()) || v.contains(['"', '\n', '\r']) {
                        let quoted = format!("\"{}\"", v.replace('"', "\"\""));
                        line.truncate(start);
                        line.push_str(&quoted);
                    }
                }
            }
            line.push_str(&cfg.row_delimiter);
        }
        Ok(())
    }

    fn write_part(&mut self, t: usize, part: &str, batch: &RecordBatch) -> Result<()> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let room = match self.open[t].get(part) {
                _ if self.cfg.single_file => usize::MAX,
                Some(o) => (self.cfg.batch_size.saturating_sub(o.rows)).max(1) as usize,
                None => self.cfg.batch_size as usize,
            };
            let n = room.min(batch.num_rows() - offset);
            self.write_slice(t, part, &batch.slice(offset, n))?;
            offset += n;
        }
        Ok(())
    }

    fn write_slice(&mut self, t: usize, part: &str, batch: &RecordBatch) -> Result<()> {
        let mut out = match self.open[t].remove(part) {
            Some(o) => o,
            None => self.open_file(t, part)?,
        };
        let res = match &mut out.out {
            Out::Parquet(w) => w.write(batch).map_err(|e| io_err(&out.staged, e)),
            Out::Text(t) => {
                self.render(batch)?;
                let bytes = self.encode(&self.line).into_owned();
                t.write_all(&bytes).map_err(|e| io_err(&out.staged, e))
            }
        };
        out.rows += batch.num_rows() as u64;
        res?;
        if !self.cfg.single_file && out.rows >= self.cfg.batch_size {
            self.close_out(out)?;
        } else {
            self.open[t].insert(part.to_string(), out);
        }
        Ok(())
    }

    fn close_out(&mut self, o: OpenOut) -> Result<()> {
        match o.out {
            Out::Parquet(w) => {
                w.close().map_err(|e| io_err(&o.staged, e))?;
            }
            Out::Text(t) => t.finish().map_err(|e| io_err(&o.staged, e))?,
        }
        self.done.push((o.staged, o.target));
        Ok(())
    }

    /// Closes every open file of every table.
    fn close_all(&mut self) -> Result<()> {
        for t in 0..self.open.len() {
            let open: Vec<OpenOut> = self.open[t].drain().map(|(_, o)| o).collect();
            for o in open {
                self.close_out(o)?;
            }
        }
        Ok(())
    }

    /// The partition directory of each group of rows of table `t`, with the rows' indices.
    fn partition_groups(
        &self,
        t: usize,
        batch: &RecordBatch,
    ) -> Result<Vec<(String, UInt32Array)>> {
        let cols: Vec<ArrayRef> = self.cfg.tables[t]
            .partition_cols
            .iter()
            .map(|i| {
                let c = batch.column(*i);
                if c.data_type() == &DataType::Utf8 {
                    Ok(c.clone())
                } else {
                    arrow::compute::cast(c, &DataType::Utf8)
                }
            })
            .collect::<std::result::Result<_, _>>()?;
        let strs: Vec<&StringArray> = cols
            .iter()
            .filter_map(|c| c.as_any().downcast_ref::<StringArray>())
            .collect();
        let mut groups: HashMap<String, Vec<u32>> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut key = String::new();
        for r in 0..batch.num_rows() {
            key.clear();
            for (n, s) in strs.iter().enumerate() {
                if n > 0 {
                    key.push('\u{0}');
                }
                key.push_str(if s.is_null(r) { "null" } else { s.value(r) });
            }
            match groups.get_mut(&key) {
                Some(v) => v.push(r as u32),
                None => {
                    groups.insert(key.clone(), vec![r as u32]);
                    order.push(key.clone());
                }
            }
        }
        let mut out = Vec::with_capacity(order.len());
        for k in order {
            let values: Vec<&str> = k.split('\u{0}').collect();
            let dir = self.partition_dir(t, &values);
            if let Some(rows) = groups.remove(&k) {
                out.push((dir, UInt32Array::from(rows)));
            }
        }
        Ok(out)
    }

    fn partition_dir(&self, t: usize, values: &[&str]) -> String {
        let names = &self.cfg.partition_names;
        let expression = &self.cfg.tables[t].partition_expression;
        if expression == DEFAULT_PARTITION_DIR_EXPRESSION {
            return names
                .iter()
                .zip(values)
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("/");
        }
        let mut dir = expression.clone();
        // Highest index first so that ${k1} does not eat the start of ${k10}.
        for (i, (k, v)) in names.iter().zip(values).enumerate().rev() {
            dir = dir
                .replace(&format!("${{k{i}}}"), k)
                .replace(&format!("${{v{i}}}"), v);
        }
        dir.trim_matches('/').to_string()
    }

    /// The index of the table `batch` belongs to.
    fn table_of(&self, batch: &ferry_api::ChangeBatch) -> Result<usize> {
        // A single input table takes every batch, whatever the stream calls it.
        if self.cfg.tables.len() == 1 {
            return Ok(0);
        }
        self.cfg.by_name.get(&batch.table).copied().ok_or_else(|| {
            FerryError::internal(format!(
                "LocalFile sink got rows of table '{}', which is not among its input tables ({})",
                batch.table,
                self.cfg
                    .tables
                    .iter()
                    .map(|t| t.name.as_ref())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }
}

impl SinkWriter for FileWriter {
    fn write(&mut self, batch: &ferry_api::ChangeBatch) -> Result<()> {
        let t = self.table_of(batch)?;
        let cfg = self.cfg.clone();
        let table = &cfg.tables[t];
        let data = batch.data.project(&table.write_cols)?;
        let data = if data.schema().fields() != table.write_schema.fields() {
            data.with_schema(table.write_schema.clone())?
        } else {
            data
        };
        if table.partition_cols.is_empty() {
            return self.write_part(t, "", &data);
        }
        for (dir, rows) in self.partition_groups(t, &batch.data)? {
            let part = arrow::compute::take_record_batch(&data, &rows)?;
            self.write_part(t, &dir, &part)?;
        }
        Ok(())
    }

    fn prepare_commit(&mut self, checkpoint_id: u64) -> Result<Option<Value>> {
        self.close_all()?;
        let files = std::mem::take(&mut self.done);
        let stage_dirs: Vec<Value> = self
            .cfg
            .roots
            .iter()
            .zip(&self.staged_roots)
            .filter(|(_, staged)| **staged)
            .map(|(root, _)| json!(self.stage_dir(root).to_string_lossy()))
            .collect();
        self.staged_roots.iter_mut().for_each(|s| *s = false);
        self.rolls.iter_mut().for_each(HashMap::clear);
        self.seq = (self.seq + 1).max(checkpoint_id + 1);
        self.last_checkpoint = Some(checkpoint_id);
        if !self.cfg.transactional || files.is_empty() {
            return Ok(None);
        }
        let pairs: Vec<Value> = files
            .iter()
            .map(|(s, t)| json!([s.to_string_lossy(), t.to_string_lossy()]))
            .collect();
        Ok(Some(json!({"stage_dirs": stage_dirs, "files": pairs})))
    }

    fn snapshot(&mut self, checkpoint_id: u64) -> Result<Option<Value>> {
        Ok(Some(
            json!({"checkpoint": self.last_checkpoint.unwrap_or(checkpoint_id)}),
        ))
    }

    fn abort(&mut self) -> Result<()> {
        for open in &mut self.open {
            for (_, o) in open.drain() {
                drop(o.out);
                let _ = std::fs::remove_file(&o.staged);
            }
        }
        for (staged, _) in self.done.drain(..) {
            let _ = std::fs::remove_file(&staged);
        }
        if self.cfg.transactional {
            for root in &self.cfg.roots {
                let _ = std::fs::remove_dir_all(self.stage_dir(root));
            }
        }
        self.staged_roots.iter_mut().for_each(|s| *s = false);
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        // Anything not prepared is not committed: close the files so none stays open.
        self.close_all()
    }
}

/// A staged file and the name it is published under.
type FilePair = (PathBuf, PathBuf);

/// Publishes staged files by renaming them into place.
struct FileCommitter {
    cfg: Arc<SinkConfig>,
}

/// A commit info's staging directories and (staged, final) file pairs. Reads the
/// single-table shape of earlier versions (`stage_dir`) too, so that a checkpoint they
/// wrote is still published after an upgrade.
fn parse_info(info: &Value) -> Result<(Vec<PathBuf>, Vec<FilePair>)> {
    let bad = || {
        FerryError::internal(format!(
            "LocalFile commit info is not the shape it wrote: {info}"
        ))
    };
    let stages = match (info.get("stage_dirs"), info.get("stage_dir")) {
        (Some(Value::Array(dirs)), _) => dirs
            .iter()
            .map(|d| d.as_str().map(PathBuf::from).ok_or_else(bad))
            .collect::<Result<Vec<_>>>()?,
        (None, Some(Value::String(d))) => vec![PathBuf::from(d)],
        _ => return Err(bad()),
    };
    let mut files = Vec::new();
    for p in info
        .get("files")
        .and_then(Value::as_array)
        .ok_or_else(bad)?
    {
        let s = p.get(0).and_then(Value::as_str).ok_or_else(bad)?;
        let t = p.get(1).and_then(Value::as_str).ok_or_else(bad)?;
        files.push((PathBuf::from(s), PathBuf::from(t)));
    }
    Ok((stages, files))
}

/// Removes the staging directory `dir`, then each parent it leaves empty, up to (not
/// including) the `_ferry_tmp` directory it lies in.
fn remove_stage(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    let in_staging = dir
        .ancestors()
        .skip(1)
        .any(|a| a.file_name().is_some_and(|n| n == STAGING_DIR));
    if !in_staging {
        return;
    }
    let mut p = dir.parent();
    while let Some(d) = p {
        if d.file_name().is_some_and(|n| n == STAGING_DIR) || std::fs::remove_dir(d).is_err() {
            break;
        }
        p = d.parent();
    }
}

impl SinkCommitter for FileCommitter {
    fn commit(&mut self, checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
        for info in &infos {
            let (stages, files) = parse_info(info)?;
            for (staged, target) in &files {
                if staged.exists() {
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
                    }
                    std::fs::rename(staged, target).map_err(|e| {
                        io_err(
                            staged,
                            format!("cannot publish as {}: {e}", target.display()),
                        )
                    })?;
                } else if !target.exists() {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!("checkpoint {checkpoint_id}: staged file '{}' is missing and '{}' was never published", staged.display(), target.display()),
                    ));
                }
                // Staged file gone and target present: published by an earlier attempt.
            }
            // Only once every file of every table is in place: tables may share a directory.
            for stage in &stages {
                remove_stage(stage);
            }
        }
        Ok(())
    }

    fn abort(&mut self, _checkpoint_id: u64, infos: Vec<Value>) -> Result<()> {
        for info in &infos {
            let (stages, files) = parse_info(info)?;
            for (staged, _) in files {
                let _ = std::fs::remove_file(staged);
            }
            for stage in &stages {
                remove_stage(stage);
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        // A finished batch job is not restored: a later run with the same id starts anew.
        for root in &self.cfg.roots {
            let staging = root.join(STAGING_DIR);
            let _ = std::fs::remove_file(save_mode_marker(root, &self.cfg.job_id));
            let _ = std::fs::remove_dir(staging.join(&self.cfg.job_id));
            let _ = std::fs::remove_dir(staging);
        }
        Ok(())
    }
}

/// Whether a path component is hidden from readers (used by tests).
#[cfg(test)]
pub(crate) fn hidden(p: &Path) -> bool {
    p.components()
        .any(|c| crate::source::is_hidden(&c.as_os_str().to_string_lossy()))
}
