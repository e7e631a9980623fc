//! The sink's options, each input table's configuration, the save modes, and the
//! configured `Sink` that creates writers and the committer.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use ferry_api::{
    decode_state, FerryError, JobContext, OptionSpec, Options, Result, Sink, SinkCommitter,
    SinkDelivery, SinkFactory, SinkWriter, TableSchema, WriterContext,
};
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use serde_json::Value;

use crate::read::{Format, COMPONENT};
use crate::source::{encoding_of, format_of, list_files};
use crate::util::java_pattern_to_chrono;
use ferry_api::placeholder::substitute;

use super::commit::*;
use super::writer::*;
use super::STAGING_DIR;

pub(super) const SINK_FORMATS: &[&str] = &[
    "text", "csv", "json", "parquet", "orc", "excel", "xml", "binary",
];
pub(super) const CODECS: &[&str] = &[
    "none", "lzo", "snappy", "gzip", "zstd", "lz4", "brotli", "zlib",
];
pub(super) const SCHEMA_SAVE_MODES: &[&str] = &[
    "RECREATE_SCHEMA",
    "CREATE_SCHEMA_WHEN_NOT_EXIST",
    "ERROR_WHEN_SCHEMA_NOT_EXIST",
    "IGNORE",
];
pub(super) const DATA_SAVE_MODES: &[&str] = &["DROP_DATA", "APPEND_DATA", "ERROR_WHEN_DATA_EXISTS"];
pub(super) const LEGACY_SAVE_MODES: &[&str] =
    &["error", "errorifexists", "overwrite", "append", "ignore"];
pub(super) const DEFAULT_PARTITION_DIR_EXPRESSION: &str =
    "${k0}=${v0}/${k1}=${v1}/.../${kn}=${vn}/";

/// The file name when `file_name_expression` is unset or `custom_filename = false`.
pub(super) const DEFAULT_FILE_NAME: &str = "${transactionId}";

ferry_api::declare_options! {
    /// The sink's options.
    pub struct SinkOptions => SINK_OPTIONS {
        /// Directory to write into; ${table_name}, ${database_name}, ${schema_name} name each input table's own directory.
        path: String = "path", required;
        /// text, csv, json or parquet.
        format: String = "file_format_type", default "csv", one_of SINK_FORMATS;
        /// Column separator of text and csv.
        // The default depends on the format (see `create`), so it is only shown.
        field_delimiter: String = "field_delimiter", optional, shows "\\u0001 (text), , (csv)";
        /// Row separator of text, csv and json.
        row_delimiter: String = "row_delimiter", default "\n", shows "\\n";
        /// Whether file_name_expression applies (it does when this is unset, as in older SeaTunnel).
        custom_filename: bool = "custom_filename", optional;
        /// File name: ${transactionId}, ${now}, ${uuid}; the transaction id is prefixed when missing so names stay unique.
        file_name_expression: String = "file_name_expression", default DEFAULT_FILE_NAME, shows DEFAULT_FILE_NAME;
        /// Java date pattern of ${now}.
        filename_time_format: String = "filename_time_format", default "yyyy.MM.dd";
        /// Replaces the format's file name suffix.
        filename_extension: String = "filename_extension", optional;
        /// Stage files and publish them at checkpoint commit (exactly once).
        transactional: bool = "is_enable_transaction", default true;
        /// Partition output by partition_by.
        have_partition: bool = "have_partition", default false;
        /// Columns whose values name the partition directories.
        partition_by: Vec<String> = "partition_by", optional;
        /// Partition directory: ${kN} and ${vN} are the N-th partition column and value.
        partition_dir_expression: String = "partition_dir_expression", default DEFAULT_PARTITION_DIR_EXPRESSION, shows DEFAULT_PARTITION_DIR_EXPRESSION;
        /// Also write partition columns inside the files.
        partition_in_file: bool = "is_partition_field_write_in_file", default false;
        /// Columns to write, in order (default: all).
        sink_columns: Vec<String> = "sink_columns", optional;
        /// text/csv/json: none or lzo (lzop files); parquet: none, snappy, gzip, zstd, lz4, brotli.
        codec: String = "compress_codec", default "none", one_of CODECS;
        /// Rows per file before rolling to a new one.
        batch_size: u64 = "batch_size", default 1000000;
        /// Never roll files by batch_size.
        single_file: bool = "single_file_mode", default false;
        /// Write a header line of column names (text, csv).
        header: bool = "enable_header_write", default false;
        /// Character set of text, csv and json output.
        encoding: String = "encoding", default "UTF-8";
        /// What to do with the output directory before the job.
        schema_save_mode: String = "schema_save_mode", default "CREATE_SCHEMA_WHEN_NOT_EXIST", one_of SCHEMA_SAVE_MODES;
        /// What to do with files already in the output directory.
        data_save_mode: String = "data_save_mode", default "APPEND_DATA", one_of DATA_SAVE_MODES;
        /// Old spelling: error = ERROR_WHEN_DATA_EXISTS, overwrite = DROP_DATA, append/ignore = APPEND_DATA.
        save_mode: String = "save_mode", optional, one_of LEGACY_SAVE_MODES;
        /// Accepted for compatibility; Ferry stages under <path>/_ferry_tmp so publishing is a same-disk rename.
        _tmp_path: String = "tmp_path", default "/tmp/seatunnel";
    }
}

/// SeaTunnel's `LocalFile` sink.
pub struct LocalFileSinkFactory;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TextCodec {
    None,
    Lzo,
}

/// What every input table shares.
#[derive(Debug)]
pub(super) struct SinkConfig {
    pub(super) format: Format,
    pub(super) field_delimiter: String,
    pub(super) row_delimiter: String,
    pub(super) time_format: String,
    pub(super) transactional: bool,
    pub(super) partition_names: Vec<String>,
    pub(super) text_codec: TextCodec,
    pub(super) parquet_codec: Compression,
    pub(super) batch_size: u64,
    pub(super) single_file: bool,
    pub(super) header: bool,
    pub(super) encoding: Option<&'static encoding_rs::Encoding>,
    pub(super) job_id: String,
    /// One per input table, in input order.
    pub(super) tables: Vec<TableConfig>,
    /// Index into `tables` by table name.
    pub(super) by_name: HashMap<Arc<str>, usize>,
    /// The distinct output directories, in input order.
    pub(super) roots: Vec<PathBuf>,
}

/// One input table's options after its placeholders were filled in, and its columns.
#[derive(Debug)]
pub(super) struct TableConfig {
    pub(super) name: Arc<str>,
    pub(super) root: PathBuf,
    /// Part of the file names when another table writes into the same directory, so that
    /// the tables' files never collide (SeaTunnel gives each table's writer its own id).
    pub(super) tag: Option<String>,
    pub(super) name_expression: String,
    pub(super) partition_expression: String,
    pub(super) extension: String,
    /// Indices of partition columns in the input.
    pub(super) partition_cols: Vec<usize>,
    /// Indices of the input columns written to files, in order.
    pub(super) write_cols: Vec<usize>,
    pub(super) write_schema: SchemaRef,
}

pub(super) fn sanitize(s: &str) -> String {
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

pub(super) fn io_err(path: &Path, e: impl std::fmt::Display) -> FerryError {
    FerryError::external(COMPONENT, format!("{}: {e}", path.display()))
}

/// The index of column `name` of `table`; `multi` says whether to name the table.
pub(super) fn column_index(
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
pub(super) struct PerTableOptions<'a> {
    pub(super) path: &'a str,
    pub(super) name_expression: &'a str,
    pub(super) partition_expression: &'a str,
    pub(super) extension: Option<&'a str>,
    pub(super) partition_by: &'a [String],
    pub(super) sink_columns: Option<&'a [String]>,
    pub(super) partition_in_file: bool,
    pub(super) default_extension: String,
}

/// Each input table's configuration: SeaTunnel creates one sink per table from the same
/// options with that table's placeholders filled in; so does this.
pub(super) fn table_configs(
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
        let data_mode_set = o.contains("data_save_mode");
        let opts = SinkOptions::read(o)?;
        o.finish(SINK_OPTIONS)?;
        let format = format_of(o, &opts.format)?;
        let field_delimiter = opts.field_delimiter.unwrap_or_else(|| {
            if format == Format::Csv {
                ",".into()
            } else {
                "\u{1}".into()
            }
        });
        let row_delimiter = opts.row_delimiter;
        let name_expression = match opts.custom_filename {
            Some(false) => DEFAULT_FILE_NAME.to_string(),
            _ => opts.file_name_expression,
        };
        let time_format = java_pattern_to_chrono(&opts.filename_time_format);
        let extension_opt = opts.filename_extension;
        let transactional = opts.transactional;
        let partition_by = opts.partition_by.unwrap_or_default();
        if opts.have_partition && partition_by.is_empty() {
            return Err(o.error(
                "partition_by",
                "must name the partition columns when have_partition = true",
            ));
        }
        let partition_expression = opts.partition_dir_expression;
        let partition_in_file = opts.partition_in_file;
        let sink_columns = opts.sink_columns;
        let codec = opts.codec.as_str();
        let batch_size = opts.batch_size.max(1);
        let single_file = opts.single_file;
        let header = opts.header;
        let encoding = encoding_of(o, &opts.encoding)?;
        let schema_mode = opts.schema_save_mode.as_str();
        // `save_mode` is the old spelling: it applies when `data_save_mode` is not set.
        let data_mode = match (data_mode_set, opts.save_mode.as_deref()) {
            (true, _) | (false, None) => opts.data_save_mode.as_str(),
            (false, Some("error" | "errorifexists")) => "ERROR_WHEN_DATA_EXISTS",
            (false, Some("overwrite")) => "DROP_DATA",
            (false, Some(_)) => "APPEND_DATA",
        };

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
                path: &opts.path,
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
pub(super) fn save_mode_marker(root: &Path, job_id: &str) -> PathBuf {
    root.join(STAGING_DIR).join(job_id).join(".save_mode_done")
}

/// Runs the save modes on one output directory, once per job id.
pub(super) fn apply_save_modes(
    root: &Path,
    job_id: &str,
    schema_mode: &str,
    data_mode: &str,
) -> Result<()> {
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
    pub(super) cfg: Arc<SinkConfig>,
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
        let restored_cp = match &restored {
            None | Some(Value::Null) => None,
            Some(v) => Some(decode_state::<WriterState>(v, "a LocalFile writer")?.checkpoint),
        };
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
