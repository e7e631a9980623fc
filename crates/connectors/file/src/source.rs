//! The `LocalFile` source: lists files under `path` (a split per file, assigned round
//! robin), reads them resumably, and in streaming jobs keeps watching for new files.
//! With `tables_configs` it reads several tables, each with its own path, format, options
//! and schema; every split names its table, so readers and restores keep them apart.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use ferry_api::catalog::read_schema_keys;
use ferry_api::declare::{default_text, first_set};
use ferry_api::options::COMMON_OPTIONS;
use ferry_api::types::schema_from_fields;
use ferry_api::{
    decode_state, encode_state, Boundedness, CatalogInfo, ChangeBatch, EnumeratorContext,
    FerryError, JobContext, JobMode, OptionSpec, Options, ReadStatus, ReaderContext, Result,
    Source, SourceFactory, SourceReader, Split, SplitEnumerator, TableId, TableSchema,
};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::read::{self, FileCursor, Format, ReadSpec, COMPONENT};
use crate::text::{TimeFormat, TimeFormats};
use crate::util::Splitter;

const FORMATS: &[&str] = &[
    "text", "csv", "json", "parquet", "orc", "excel", "xml", "binary", "avro", "markdown",
];

ferry_api::declare_options! {
    /// The options of one table: the plugin block itself, or one `tables_configs` entry.
    pub(crate) struct TableOptions => TABLE_OPTIONS {
        /// File or directory to read (directories are read recursively; names starting with '.' or '_' are skipped). Inside each entry when tables_configs is set.
        path: String = "path", required;
        /// File format: text, csv, json or parquet (orc, excel, xml, binary are not supported). Inside each entry when tables_configs is set.
        format: String = "file_format_type", required, one_of FORMATS;
        /// schema { table = "db.name", fields { name = type } }: fields are required for csv and json (an empty block reads no columns); text without them is one `content` column; parquet reads the file's own. table names the table (default: plugin_output, else `default`).
        schema: Map<String, Value> = "schema", optional;
        /// Columns to read, in output order.
        read_columns: Vec<String> = "read_columns", optional;
        /// Field separator, a Java regex as in SeaTunnel ("\\|" is a literal |).
        // The default depends on the format (see `read_table`), so it is only shown.
        field_delimiter: String = "field_delimiter" | "delimiter", optional, shows "\\u0001 (text), , (csv)";
        /// Row separator; lines end at \n (a trailing \r is dropped).
        _row_delimiter: String = "row_delimiter", default "\n", shows "\\n";
        /// Add hive-style `k=v` directories of the file path as string columns.
        parse_partition: bool = "parse_partition_from_path", default true;
        /// Date format of text and csv.
        date_format: String = "date_format", default "yyyy-MM-dd";
        /// Date-time format of text and csv.
        datetime_format: String = "datetime_format", default "yyyy-MM-dd HH:mm:ss";
        /// Time format of text and csv.
        time_format: String = "time_format", default "HH:mm:ss";
        /// Lines to skip at the start of each text or csv file.
        skip_header: u64 = "skip_header_row_number", default 0;
        /// CSV: the first line names the columns (matched to the schema by name).
        csv_use_header_line: bool = "csv_use_header_line", default false;
        /// Character set of text, csv and json files.
        encoding: String = "encoding", default "UTF-8";
        /// Compression of text, csv and json files (lzop files are also recognised by their magic bytes); parquet is detected.
        _compress_codec: String = "compress_codec", default "none", one_of &["none", "lzo"];
        /// Regex a file's name (or full path) must match to be read.
        file_filter_pattern: String = "file_filter_pattern", optional;
        /// Text that stands for null in text and csv.
        null_format: String = "null_format", optional;
        /// Rows per batch read.
        batch_size: u64 = "batch_size", default 8192;
        /// Excel only (not supported).
        sheet_name: String = "sheet_name", optional;
        /// Split large uncompressed text, csv and json files at line boundaries, so that several readers share a file (csv: only when no quoted value spans lines).
        // Unset means "by format" (`SplitRule::applies`), so the default is only shown.
        enable_file_split: bool = "enable_file_split", optional, shows "text and json: true; csv: false";
        /// Largest part of a split file, in bytes.
        file_split_size: u64 = "file_split_size", default 134217728;
    }
}

ferry_api::declare_options! {
    /// The option only the plugin block takes.
    pub(crate) struct TopOptions => TOP_OPTIONS {
        /// Several tables: a list of entries, each with the options below (path, file_format_type, schema { table, fields }, …) for one table, named by its schema.table. Nothing else may be set beside it.
        tables_configs: Vec<Value> = "tables_configs", optional;
    }
}

/// The source's options: those of one table (the plugin block itself, or one
/// `tables_configs` entry: [`TABLE_OPTIONS`]), then `tables_configs`.
pub const SOURCE_OPTIONS: &[OptionSpec] = ferry_api::concat_specs!(TABLE_OPTIONS, TOP_OPTIONS);

/// SeaTunnel's `LocalFile` source.
pub struct LocalFileSourceFactory;

fn table_name(o: &mut Options) -> Result<String> {
    Ok(match o.string("plugin_output")? {
        Some(n) => n,
        None => o
            .string("result_table_name")?
            .unwrap_or_else(|| "default".into()),
    })
}

/// Whether a file or directory name marks something in progress or hidden.
pub fn is_hidden(name: &str) -> bool {
    name.starts_with('.') || name.starts_with('_')
}

/// Every visible file under `root` (or `root` itself), sorted.
pub fn list_files(root: &Path, filter: Option<&Regex>) -> Result<Vec<PathBuf>> {
    let meta = std::fs::metadata(root).map_err(|e| {
        FerryError::external(
            COMPONENT,
            format!("path '{}' cannot be read: {e}", root.display()),
        )
    })?;
    let mut out = Vec::new();
    if meta.is_file() {
        out.push(root.to_path_buf());
        return Ok(out);
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| FerryError::io(COMPONENT, dir.display(), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| FerryError::io(COMPONENT, dir.display(), e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if is_hidden(&name) {
                continue;
            }
            let p = entry.path();
            let ft = entry
                .file_type()
                .map_err(|e| FerryError::io(COMPONENT, p.display(), e))?;
            if ft.is_dir() || (ft.is_symlink() && p.is_dir()) {
                stack.push(p);
            } else if filter.is_none_or(|r| r.is_match(&name) || r.is_match(&p.to_string_lossy())) {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The hive-style `k=v` directories between `root` and `file`.
pub fn partitions_of(root: &Path, file: &Path) -> Vec<(String, String)> {
    let rel = file.strip_prefix(root).unwrap_or(file);
    let mut out = Vec::new();
    if let Some(parent) = rel.parent() {
        for c in parent.components() {
            let s = c.as_os_str().to_string_lossy();
            if let Some((k, v)) = s.split_once('=') {
                out.push((k.to_string(), v.to_string()));
            }
        }
    }
    out
}

fn unescape_option(s: &str) -> String {
    // Some job files write control characters as the text `\u0001` or `\001`.
    match s {
        "\\u0001" | "\\001" => "\u{1}".into(),
        "\\t" => "\t".into(),
        _ => s.to_string(),
    }
}

/// The time formats of a table: `None` (SeaTunnel's lenient default) for a pattern that
/// is the option's default.
fn time_formats(t: &TableOptions) -> TimeFormats {
    let get = |key: &str, p: &str| -> Option<TimeFormat> {
        (Some(p) != default_text(TABLE_OPTIONS, key)).then(|| TimeFormat::from_java(p))
    };
    TimeFormats {
        date: get("date_format", &t.date_format),
        datetime: get("datetime_format", &t.datetime_format),
        time: get("time_format", &t.time_format),
    }
}

/// The character set named by option `encoding`: `None` for UTF-8.
pub fn encoding_of(o: &Options, e: &str) -> Result<Option<&'static encoding_rs::Encoding>> {
    match encoding_rs::Encoding::for_label(e.trim().as_bytes()) {
        Some(enc) if enc == encoding_rs::UTF_8 => Ok(None),
        Some(enc) => Ok(Some(enc)),
        None => Err(o.error("encoding", format!("unknown character set '{e}'"))),
    }
}

/// The format `file_format_type` names (one of the listed spellings), rejecting those
/// SeaTunnel has and Ferry has not.
pub fn format_of(o: &Options, format: &str) -> Result<Format> {
    Ok(match format {
        "text" => Format::Text,
        "csv" => Format::Csv,
        "json" => Format::Json,
        "parquet" => Format::Parquet,
        other => {
            return Err(o.location().error_with_hint(
                "file_format_type",
                format!("the '{other}' format is not supported by Ferry's LocalFile"),
                "supported formats: text, csv, json, parquet",
            ))
        }
    })
}

impl SourceFactory for LocalFileSourceFactory {
    fn name(&self) -> &'static str {
        "LocalFile"
    }

    fn description(&self) -> &'static str {
        "Reads text, csv, json and parquet files from a local path, with hive-style partition columns; several tables with tables_configs"
    }

    fn options(&self) -> &'static [OptionSpec] {
        SOURCE_OPTIONS
    }

    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        let streaming = job.mode == JobMode::Streaming;
        let tables = match TopOptions::read(o)?.tables_configs {
            None => {
                let default_name = table_name(o)?;
                let t = read_table(o, &default_name, streaming)?;
                o.finish(SOURCE_OPTIONS)?;
                vec![t]
            }
            Some(items) => read_tables_configs(o, items, streaming)?,
        };
        Ok(Box::new(LocalFileSource {
            tables: tables.into(),
            streaming,
        }))
    }
}

/// Reads the entries of `tables_configs`, each a table of its own (SeaTunnel's
/// `BaseMultipleTableFileSourceConfig`: an entry holds every option of one table).
fn read_tables_configs(
    o: &mut Options,
    items: Vec<Value>,
    streaming: bool,
) -> Result<Vec<FileTable>> {
    if items.is_empty() {
        return Err(o.error("tables_configs", "is empty: give at least one table"));
    }
    // SeaTunnel reads nothing but the entries when tables_configs is set; say so rather
    // than silently ignoring an option the user meant to apply.
    for k in o.raw().keys() {
        let top = k.split('.').next().unwrap_or(k);
        if k != "tables_configs" && !COMMON_OPTIONS.iter().any(|c| c.name == top) {
            return Err(o.error(
                k,
                "has no effect when tables_configs is set (SeaTunnel ignores it too): set it inside each table's entry",
            ));
        }
    }
    let mut tables: Vec<FileTable> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let prefix = format!("tables_configs[{i}]");
        let Value::Object(m) = item else {
            return Err(o.error(
                &prefix,
                "expected a block { path = …, file_format_type = …, schema { table = …, fields { … } } }",
            ));
        };
        let mut sub = Options::new(m, o.location().nested(&prefix));
        let t = (|| {
            let default_name = table_name(&mut sub)?;
            let t = read_table(&mut sub, &default_name, streaming)?;
            sub.finish(TABLE_OPTIONS)?;
            Ok::<_, FerryError>(t)
        })()
        .map_err(|e| e.within(&prefix))?;
        if let Some(j) = tables.iter().position(|other| other.name == t.name) {
            return Err(o.error(
                &format!("{prefix}.schema.table"),
                format!("table name '{}' is also the name of tables_configs[{j}]; give every entry its own schema.table", t.name),
            ));
        }
        tables.push(t);
    }
    o.finish(TOP_OPTIONS)?;
    Ok(tables)
}

/// What a `schema` block declares.
struct DeclaredSchema {
    /// `schema.fields`, when given.
    fields: Option<Schema>,
    /// `schema.table`, when given.
    table: Option<String>,
    /// `schema.primaryKey`, `schema.constraintKeys` and `schema.comment`.
    catalog: CatalogInfo,
}

/// Keys a `schema` block may hold besides `fields` and `table`: read into the table's
/// catalog information, except `schema_first` (accepted, unused).
const SCHEMA_EXTRA_KEYS: &[&str] = &["schema_first", "comment", "primaryKey", "constraintKeys"];

fn read_schema_block(
    o: &mut Options,
    block: Option<Map<String, Value>>,
) -> Result<Option<DeclaredSchema>> {
    let Some(s) = block else {
        return Ok(None);
    };
    let fields = match s.get("fields") {
        None => None,
        Some(Value::Object(f)) => {
            Some(schema_from_fields(f).map_err(|e| o.error("schema.fields", e.0))?)
        }
        Some(v) => {
            return Err(o.error(
                "schema.fields",
                format!("expected a block {{ name = type, … }}, found {v}"),
            ))
        }
    };
    let table = match s.get("table") {
        None => None,
        Some(Value::String(t)) if t.trim().is_empty() => None,
        Some(Value::String(t)) => Some(t.clone()),
        Some(v) => return Err(o.error("schema.table", format!("expected a table name, found {v}"))),
    };
    for k in s.keys() {
        if k != "fields" && k != "table" && !SCHEMA_EXTRA_KEYS.contains(&k.as_str()) {
            return Err(o.location().error_with_hint(
                &format!("schema.{k}"),
                "unknown option",
                "a LocalFile schema block holds `table` and `fields { name = type, … }`",
            ));
        }
    }
    let mut catalog = CatalogInfo::default();
    read_schema_keys(o, "schema", &mut catalog)?;
    Ok(Some(DeclaredSchema {
        fields,
        table,
        catalog,
    }))
}

/// Reads one table's options: the plugin block itself, or one `tables_configs` entry.
/// `default_name` names the table when `schema.table` does not.
fn read_table(o: &mut Options, default_name: &str, streaming: bool) -> Result<FileTable> {
    let t = TableOptions::read(o)?;
    let formats = time_formats(&t);
    let path = PathBuf::from(&t.path);
    let format = format_of(o, &t.format)?;
    let schema_block = read_schema_block(o, t.schema)?;
    let name = schema_block
        .as_ref()
        .and_then(|s| s.table.clone())
        .unwrap_or_else(|| default_name.to_string());
    let has_schema_block = schema_block.is_some();
    let mut catalog = CatalogInfo::default();
    let declared = schema_block.and_then(|s| {
        catalog = s.catalog;
        s.fields
    });
    catalog.id = Some(TableId::from_path("LocalFile", &name));
    let read_columns = t.read_columns;
    let delim_key = first_set(o, &["field_delimiter", "delimiter"]);
    let splitter = match &t.field_delimiter {
        Some(d) => {
            Splitter::from_java_regex(&unescape_option(d)).map_err(|e| o.error(delim_key, e))?
        }
        None if format == Format::Csv => Splitter::Literal(",".into()),
        None => Splitter::Literal("\u{1}".into()),
    };
    let parse_partition = t.parse_partition;
    let skip_header = t.skip_header;
    let csv_use_header_line = t.csv_use_header_line;
    let encoding = encoding_of(o, &t.encoding)?;
    let filter = match &t.file_filter_pattern {
        None => None,
        Some(p) => Some(Regex::new(&format!("^(?:{p})$")).map_err(|e| {
            o.error(
                "file_filter_pattern",
                format!("invalid regular expression: {e}"),
            )
        })?),
    };
    let null_format = t.null_format;
    let batch_size = t.batch_size.max(1) as usize;
    if t.file_split_size == 0 {
        return Err(o.error("file_split_size", "must be greater than 0"));
    }
    let split = SplitRule {
        enabled: t.enable_file_split,
        size: t.file_split_size,
    };
    if t.sheet_name.is_some() {
        return Err(o.error(
            "sheet_name",
            "excel files are not supported by Ferry's LocalFile",
        ));
    }

    // Listing now tells the partition columns (and parquet's schema) up front, as
    // SeaTunnel does when it builds the source's catalog table.
    let files = list_files(&path, filter.as_ref())?;
    let root = if path.is_file() {
        path.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        path.clone()
    };
    let partition_keys: Vec<String> = if parse_partition {
        files
            .first()
            .map(|f| {
                partitions_of(&root, f)
                    .into_iter()
                    .map(|(k, _)| k)
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    // Without declared columns and without a file to read them from, SeaTunnel's
    // `BaseFileSourceConfig` keeps the table it built from the options: no columns for a
    // `schema` block without `fields`, else its one-column text table (`content`).
    let content = || Schema::new(vec![Field::new("content", DataType::Utf8, true)]);
    let mut schema_from_nothing = false;
    let (file_schema, whole_line) = match (declared, format) {
        (Some(s), _) => (s, false),
        (None, Format::Text) => (content(), true),
        (None, Format::Parquet) => match files.first() {
            Some(f) => (read::parquet_schema(f)?, false),
            None if streaming => {
                return Err(FerryError::external(
                    COMPONENT,
                    format!(
                        "no parquet file under '{}' to take the schema from: a STREAMING job must declare its columns in `schema {{ fields {{ … }} }}`",
                        path.display()
                    ),
                ))
            }
            None => {
                schema_from_nothing = true;
                (if has_schema_block { Schema::empty() } else { content() }, false)
            }
        },
        (None, _) if has_schema_block => match files.first() {
            // SeaTunnel would make rows of no columns out of them: useless, and surely
            // not what was meant.
            Some(f) => {
                return Err(o.error(
                    "schema",
                    format!("declares no columns, but '{}' has a file to read ({}): declare them in `schema {{ fields {{ name = type, … }} }}`", path.display(), f.display()),
                ))
            }
            None => (Schema::empty(), false),
        },
        (None, _) => return Err(o.error("schema", "is required for the csv and json formats")),
    };
    let projection: Vec<usize> = match &read_columns {
        // Columns to project are unknown until a parquet file exists.
        Some(_) if schema_from_nothing => (0..file_schema.fields().len()).collect(),
        None => (0..file_schema.fields().len()).collect(),
        Some(cols) => {
            let mut p = Vec::new();
            for c in cols {
                match file_schema.fields().iter().position(|f| f.name() == c) {
                    Some(i) => p.push(i),
                    None if partition_keys.contains(c) => {}
                    None => {
                        return Err(o.location().error_with_hint(
                            "read_columns",
                            format!("column '{c}' is not in the schema"),
                            format!(
                                "columns: {}",
                                file_schema
                                    .fields()
                                    .iter()
                                    .map(|f| f.name().as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        ))
                    }
                }
            }
            p
        }
    };
    let spec = Arc::new(ReadSpec {
        format,
        file_schema: Arc::new(file_schema),
        projection,
        whole_line,
        splitter,
        skip_header,
        csv_use_header_line,
        formats,
        null_format,
        encoding,
        batch_size,
    });
    let mut out_fields: Vec<Field> = spec
        .projected_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    for k in &partition_keys {
        if out_fields.iter().any(|f| f.name() == k) {
            return Err(o.error("schema", format!("column '{k}' is also a partition directory of the path: remove it from the schema (SeaTunnel adds it)")));
        }
        out_fields.push(Field::new(k, DataType::Utf8, true));
    }
    Ok(FileTable {
        name: name.into(),
        output: Arc::new(Schema::new(out_fields)),
        root,
        path,
        filter,
        partition_keys,
        spec,
        split,
        catalog,
    })
}

/// Files from this size on are shared by all readers when splitting is on by default.
pub(crate) const AUTO_SPLIT_MIN: u64 = 64 << 20;

/// When a file is read in parts (`enable_file_split`, `file_split_size`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SplitRule {
    /// The option as written: `None` splits text and json, not csv.
    pub(crate) enabled: Option<bool>,
    /// `file_split_size`.
    pub(crate) size: u64,
}

impl SplitRule {
    /// Whether files of `spec` may be split. Every line of text and json is one record;
    /// a csv record may span lines inside quotes, so csv is split only when the job says
    /// it may (as SeaTunnel, which splits only with `enable_file_split = true`). Files in
    /// a non-ASCII-compatible encoding (UTF-16) are never split: their line breaks are not
    /// the byte `\n`.
    fn applies(&self, spec: &ReadSpec) -> bool {
        let by_format = match spec.format {
            Format::Text | Format::Json => self.enabled.unwrap_or(true),
            Format::Csv => self.enabled.unwrap_or(false),
            Format::Parquet => false,
        };
        by_format && spec.encoding.is_none_or(|e| e.is_ascii_compatible())
    }

    /// How many parts a file of `len` bytes is cut into, for `parallelism` readers: parts
    /// of at most `size` bytes, and at least one per reader for a file of 64 MiB or more
    /// when splitting is on by default (with more than one reader); a multiple of the
    /// readers, so that each gets an equal share.
    pub(crate) fn parts(&self, len: u64, parallelism: usize) -> u64 {
        let p = parallelism.max(1) as u64;
        if self.enabled.is_none() && p == 1 {
            return 1;
        }
        let mut n = len.div_ceil(self.size);
        if self.enabled.is_none() && len >= AUTO_SPLIT_MIN {
            n = n.max(p);
        }
        if n > 1 {
            n.div_ceil(p) * p
        } else {
            1
        }
    }
}

/// The byte ranges of `path` for `parts` parts: line-aligned, after the header lines, or
/// `None` when the file is read whole (one part, compressed, or too few lines).
fn plan_ranges(path: &Path, spec: &ReadSpec, parts: u64) -> Result<Option<Vec<read::ByteRange>>> {
    use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
    if parts <= 1 {
        return Ok(None);
    }
    let io = |e: std::io::Error| FerryError::io(COMPONENT, path.display(), e);
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    let mut head = [0u8; 5];
    let n = f.read(&mut head).map_err(io)?;
    if read::is_lzop(&head[..n]) {
        return Ok(None);
    }
    // The header lines belong to no range.
    f.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut r = BufReader::new(f);
    let mut start = 0u64;
    let mut line = Vec::new();
    for _ in 0..read::header_lines(spec) {
        line.clear();
        let n = r.read_until(b'\n', &mut line).map_err(io)?;
        if n == 0 {
            break;
        }
        start += n as u64;
    }
    let mut f = r.into_inner();
    // Each cut moves to just past the first line break at or after it.
    let step = (len - start.min(len)).div_ceil(parts);
    let mut cuts = vec![start];
    for k in 1..parts {
        let target = start + k * step;
        let prev = *cuts.last().unwrap_or(&start);
        if target >= len || target <= prev {
            continue;
        }
        f.seek(SeekFrom::Start(target - 1)).map_err(io)?;
        let mut r = BufReader::with_capacity(64 << 10, &mut f);
        let mut skipped = Vec::new();
        let n = r.read_until(b'\n', &mut skipped).map_err(io)?;
        let cut = target - 1 + n as u64;
        if skipped.last() == Some(&b'\n') && cut < len && cut > prev {
            cuts.push(cut);
        }
    }
    if cuts.len() < 2 {
        return Ok(None);
    }
    cuts.push(len);
    Ok(Some(
        cuts.windows(2)
            .map(|w| read::ByteRange {
                start: w[0],
                end: w[1],
            })
            .collect(),
    ))
}

/// One table of the source: where its files are and how to read them.
#[derive(Debug)]
struct FileTable {
    name: Arc<str>,
    output: SchemaRef,
    root: PathBuf,
    path: PathBuf,
    filter: Option<Regex>,
    partition_keys: Vec<String>,
    spec: Arc<ReadSpec>,
    /// Whether and how its large files are read in parts.
    split: SplitRule,
    /// Its id and the keys its schema block declares.
    catalog: CatalogInfo,
}

/// A configured `LocalFile` source: one table, or one per `tables_configs` entry.
#[derive(Debug)]
pub struct LocalFileSource {
    tables: Arc<[FileTable]>,
    streaming: bool,
}

impl Source for LocalFileSource {
    fn boundedness(&self) -> Boundedness {
        if self.streaming {
            Boundedness::Unbounded
        } else {
            Boundedness::Bounded
        }
    }

    fn tables(&self) -> Vec<TableSchema> {
        self.tables
            .iter()
            .map(|t| {
                TableSchema::new(t.name.clone(), t.output.clone()).with_catalog(t.catalog.clone())
            })
            .collect()
    }

    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let mut e = FileEnumerator {
            tables: self.tables.clone(),
            parallelism: ctx.parallelism.max(1),
            streaming: self.streaming,
            seen: vec![BTreeSet::new(); self.tables.len()],
            next_reader: 0,
            pending: VecDeque::new(),
            listed_once: false,
        };
        if let Some(state) = restored {
            e.restore(&state)?;
        }
        Ok(Box::new(e))
    }

    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(FileReader {
            tables: self.tables.clone(),
            queue: VecDeque::new(),
            current: None,
            no_more: false,
        }))
    }
}

/// Lists every table's files and hands each out once; remembers what it handed out.
struct FileEnumerator {
    tables: Arc<[FileTable]>,
    parallelism: usize,
    streaming: bool,
    /// Files handed out, per table (same order as `tables`).
    seen: Vec<BTreeSet<String>>,
    next_reader: usize,
    /// Splits given back by failed readers, to assign again.
    pending: VecDeque<(usize, Split)>,
    listed_once: bool,
}

/// A split's state: the file (and its table in a multi-table source), the rows read in
/// it, and for a part of a split file its byte range. The JSON is what earlier versions
/// wrote (`{"path", "rows"}`, with `table`, `start`, `end` when they apply), so that their
/// checkpoints restore.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileSplitState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    table: Option<String>,
    path: String,
    rows: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<u64>,
}

impl FileSplitState {
    /// The byte range of a part of a split file, `None` for a whole file.
    fn range(&self, id: &str) -> Result<Option<read::ByteRange>> {
        match (self.start, self.end) {
            (Some(start), Some(end)) => Ok(Some(read::ByteRange { start, end })),
            (None, None) => Ok(None),
            _ => Err(FerryError::external(
                "checkpoint",
                format!("the state of LocalFile split '{id}' has only one end of its byte range"),
            )),
        }
    }
}

/// A split reading `path` of `table` from its start. The split of a single-table source
/// keeps the shape it had before `tables_configs` existed (no table in it), so that
/// checkpoints taken by earlier versions restore; a split of a multi-table source names
/// its table, which is how a restored reader finds the schema and options to read it with.
fn new_split(
    tables: &[FileTable],
    table: usize,
    path: &str,
    range: Option<read::ByteRange>,
) -> Result<Split> {
    let (id, table) = if tables.len() == 1 {
        (path.to_string(), None)
    } else {
        let name = &tables[table].name;
        (format!("{name}:{path}"), Some(name.to_string()))
    };
    let id = match &range {
        Some(r) => format!("{id}@{}-{}", r.start, r.end),
        None => id,
    };
    let state = FileSplitState {
        table,
        path: path.to_string(),
        rows: 0,
        start: range.as_ref().map(|r| r.start),
        end: range.as_ref().map(|r| r.end),
    };
    Split::typed(id, &state)
}

/// The index of the table a split (fresh or restored) belongs to.
fn table_of(tables: &[FileTable], s: &Split) -> Result<usize> {
    table_named(
        tables,
        s,
        s.read_state::<FileSplitState>()?.table.as_deref(),
    )
}

/// The index of table `name` (`None`: the only table) of split `s`.
fn table_named(tables: &[FileTable], s: &Split, name: Option<&str>) -> Result<usize> {
    match name {
        None if tables.len() == 1 => Ok(0),
        None => Err(FerryError::config(format!(
            "LocalFile: the checkpoint holds split '{}' of a single-table source, but this source has {} tables (tables_configs): restore it with the job it was taken from, or start a new job id",
            s.id,
            tables.len()
        ))),
        Some(name) => tables.iter().position(|t| t.name.as_ref() == name).ok_or_else(|| {
            FerryError::config(format!(
                "LocalFile: the checkpoint holds split '{}' of table '{name}', which this source no longer has (tables: {}): restore it with the job it was taken from, or start a new job id",
                s.id,
                tables.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>().join(", ")
            ))
        }),
    }
}

impl FileEnumerator {
    fn restore(&mut self, state: &Value) -> Result<()> {
        let state: EnumeratorState = decode_state(state, "the LocalFile enumerator")?;
        match (state.seen, state.seen_by_table) {
            // A single-table source's state (also what earlier versions wrote).
            (Some(paths), None) => {
                if self.tables.len() != 1 {
                    return Err(FerryError::config(format!(
                        "LocalFile: the checkpoint was taken by a single-table source, but this source has {} tables (tables_configs): restore it with the job it was taken from, or start a new job id",
                        self.tables.len()
                    )));
                }
                self.seen[0].extend(paths);
            }
            (None, Some(by_table)) => {
                for (name, paths) in by_table {
                    let Some(i) = self.tables.iter().position(|t| t.name.as_ref() == name) else {
                        // An entry removed from tables_configs: its files are not read any
                        // more, so what was seen of them no longer matters.
                        continue;
                    };
                    self.seen[i].extend(paths);
                }
            }
            _ => {
                return Err(FerryError::external(
                    "checkpoint",
                    "the state of the LocalFile enumerator has neither or both of seen and seen_by_table",
                ))
            }
        }
        self.next_reader = state.next_reader;
        for p in state.pending {
            table_of(&self.tables, &p.split)?;
            self.pending
                .push_back((p.reader % self.parallelism, p.split));
        }
        self.listed_once = state.listed;
        Ok(())
    }
}

/// The enumerator's state: files seen (per table when there are several), splits given
/// back and not yet assigned again, and where round-robin assignment goes on.
#[derive(Debug, Serialize, Deserialize)]
struct EnumeratorState {
    next_reader: usize,
    pending: Vec<PendingSplit>,
    listed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seen: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seen_by_table: Option<BTreeMap<String, BTreeSet<String>>>,
}

/// A split given back by a reader.
#[derive(Debug, Serialize, Deserialize)]
struct PendingSplit {
    reader: usize,
    split: Split,
}

impl FileEnumerator {
    /// The splits of a newly found file of table `i`: byte ranges when it is split, else
    /// the whole file.
    fn splits_of(&self, i: usize, f: &Path, key: &str) -> Result<Vec<Split>> {
        let table = &self.tables[i];
        if table.split.applies(&table.spec) {
            let len = std::fs::metadata(f)
                .map_err(|e| FerryError::io(COMPONENT, f.display(), e))?
                .len();
            let parts = table.split.parts(len, self.parallelism);
            if let Some(ranges) = plan_ranges(f, &table.spec, parts)? {
                return ranges
                    .into_iter()
                    .map(|r| new_split(&self.tables, i, key, Some(r)))
                    .collect();
            }
        }
        Ok(vec![new_split(&self.tables, i, key, None)?])
    }
}

impl SplitEnumerator for FileEnumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        let mut out: Vec<(usize, Split)> = self.pending.drain(..).collect();
        if self.listed_once && !self.streaming {
            return Ok(out);
        }
        for (i, table) in self.tables.iter().enumerate() {
            let files = match list_files(&table.path, table.filter.as_ref()) {
                Ok(f) => f,
                // A streaming source may watch a directory that comes and goes.
                Err(_) if self.streaming && self.listed_once => Vec::new(),
                Err(e) if self.tables.len() > 1 => {
                    return Err(e.within(&format!("table '{}'", table.name)))
                }
                Err(e) => return Err(e),
            };
            for f in files {
                let key = f.to_string_lossy().into_owned();
                if self.seen[i].insert(key.clone()) {
                    for split in self.splits_of(i, &f, &key)? {
                        out.push((self.next_reader % self.parallelism, split));
                        self.next_reader += 1;
                    }
                }
            }
        }
        self.listed_once = true;
        Ok(out)
    }

    fn is_exhausted(&self) -> bool {
        !self.streaming && self.listed_once && self.pending.is_empty()
    }

    fn add_splits_back(&mut self, splits: Vec<Split>, reader: usize) {
        for s in splits {
            self.pending.push_back((reader % self.parallelism, s));
        }
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Value> {
        let single = self.tables.len() == 1;
        let state = EnumeratorState {
            next_reader: self.next_reader,
            pending: self
                .pending
                .iter()
                .map(|(r, s)| PendingSplit {
                    reader: *r,
                    split: s.clone(),
                })
                .collect(),
            listed: self.listed_once,
            seen: single.then(|| self.seen[0].clone()),
            seen_by_table: (!single).then(|| {
                self.tables
                    .iter()
                    .zip(&self.seen)
                    .map(|(t, seen)| (t.name.to_string(), seen.clone()))
                    .collect()
            }),
        };
        encode_state(&state, "the LocalFile enumerator")
    }
}

struct OpenFile {
    /// The split's id and state (`rows` kept up to date).
    id: String,
    state: FileSplitState,
    /// Index into the source's tables.
    table: usize,
    path: PathBuf,
    cursor: Box<dyn FileCursor>,
    partitions: Vec<ArrayRef>,
    partition_values: Vec<Option<String>>,
}

/// Reads its files one after the other, each with the options of its table.
struct FileReader {
    tables: Arc<[FileTable]>,
    queue: VecDeque<Split>,
    current: Option<OpenFile>,
    no_more: bool,
}

impl FileReader {
    fn open_next(&mut self) -> Result<bool> {
        let Some(split) = self.queue.pop_front() else {
            return Ok(false);
        };
        let state: FileSplitState = split.read_state()?;
        let table = table_named(&self.tables, &split, state.table.as_deref())?;
        let t = &self.tables[table];
        let path = PathBuf::from(&state.path);
        if t.spec.file_schema.fields().is_empty() {
            // An empty `schema {}` suits an empty directory only (see `read_table`).
            return Err(FerryError::data(
                COMPONENT,
                format!(
                    "{}: table '{}' declares no columns (an empty schema block): declare them in `schema {{ fields {{ name = type, … }} }}` to read its files",
                    path.display(),
                    t.name
                ),
            ));
        }
        let range = state.range(&split.id)?;
        let cursor = read::open(&t.spec, &path, range, state.rows)?;
        let found = partitions_of(&t.root, &path);
        let partition_values = t
            .partition_keys
            .iter()
            .map(|k| found.iter().find(|(fk, _)| fk == k).map(|(_, v)| v.clone()))
            .collect();
        self.current = Some(OpenFile {
            id: split.id,
            state,
            table,
            path,
            cursor,
            partitions: Vec::new(),
            partition_values,
        });
        Ok(true)
    }
}

impl SourceReader for FileReader {
    fn add_splits(&mut self, splits: Vec<Split>) -> Result<()> {
        for s in &splits {
            table_of(&self.tables, s)?;
        }
        self.queue.extend(splits);
        Ok(())
    }

    fn no_more_splits(&mut self) {
        self.no_more = true;
    }

    fn poll_next(&mut self) -> Result<ReadStatus> {
        loop {
            if self.current.is_none() && !self.open_next()? {
                return Ok(if self.no_more {
                    ReadStatus::Finished
                } else {
                    ReadStatus::Idle(Duration::from_millis(200))
                });
            }
            let Some(cur) = self.current.as_mut() else {
                continue;
            };
            match cur.cursor.next_batch()? {
                None => {
                    self.current = None;
                }
                Some(b) => {
                    let n = b.num_rows();
                    if cur.partitions.first().is_none_or(|a| a.len() != n) {
                        // Constant partition columns, rebuilt only when the batch length changes.
                        cur.partitions = cur
                            .partition_values
                            .iter()
                            .map(|v| Arc::new(StringArray::from(vec![v.as_deref(); n])) as ArrayRef)
                            .collect();
                    }
                    let table = &self.tables[cur.table];
                    let mut cols = b.columns().to_vec();
                    cols.extend(cur.partitions.iter().cloned());
                    let data = RecordBatch::try_new_with_options(
                        table.output.clone(),
                        cols,
                        &RecordBatchOptions::new().with_row_count(Some(n)),
                    )
                    .map_err(|e| {
                        FerryError::data(COMPONENT, format!("{}: {e}", cur.path.display()))
                    })?;
                    cur.state.rows = cur.cursor.position();
                    return Ok(ReadStatus::Batch(ChangeBatch::inserts(
                        table.name.clone(),
                        data,
                    )));
                }
            }
        }
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Vec<Split>> {
        let mut out: Vec<Split> = self
            .current
            .iter()
            .map(|c| Split::typed(c.id.clone(), &c.state))
            .collect::<Result<_>>()?;
        out.extend(self.queue.iter().cloned());
        Ok(out)
    }
}

/// Files already handed out, for tests.
#[cfg(test)]
pub(crate) fn seen_of(state: &Value) -> std::collections::HashSet<String> {
    state["seen"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod state_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_and_enumerator_states_keep_their_json_and_reject_what_does_not_parse() {
        // What earlier versions wrote restores, and is written back the same.
        for state in [
            json!({"path": "/d/a.txt", "rows": 7}),
            json!({"table": "t", "path": "/d/a.txt", "rows": 7, "start": 0, "end": 10}),
        ] {
            let s = Split {
                id: "a".into(),
                state: state.clone(),
            };
            let typed: FileSplitState = s.read_state().unwrap();
            assert_eq!(Split::typed("a", &typed).unwrap().state, state);
        }
        let bad = Split {
            id: "a".into(),
            state: json!({"path": "/d/a.txt", "rows": "many"}),
        };
        let e = bad.read_state::<FileSplitState>().unwrap_err().to_string();
        assert!(e.contains("split 'a'"), "{e}");
        let half = FileSplitState {
            table: None,
            path: "/d".into(),
            rows: 0,
            start: Some(1),
            end: None,
        };
        assert!(half.range("a").is_err());

        let enumerator = json!({"next_reader": 3, "pending": [{"reader": 1, "split": {"id": "a", "state": {"path": "/d/a.txt", "rows": 0}}}], "listed": true, "seen": ["/d/a.txt"]});
        let st: EnumeratorState = decode_state(&enumerator, "e").unwrap();
        assert_eq!(encode_state(&st, "e").unwrap(), enumerator);
        assert!(decode_state::<EnumeratorState>(&json!({"seen": []}), "e").is_err());
    }
}
