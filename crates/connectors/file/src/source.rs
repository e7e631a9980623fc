//! The `LocalFile` source: lists files under `path` (a split per file, assigned round
//! robin), reads them resumably, and in streaming jobs keeps watching for new files.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use ferry_api::types::schema_from_fields;
use ferry_api::{
    Boundedness, ChangeBatch, EnumeratorContext, FerryError, JobContext, JobMode, OptionKind,
    OptionSpec, Options, ReadStatus, ReaderContext, Result, Source, SourceFactory, SourceReader,
    Split, SplitEnumerator, TableSchema,
};
use regex::Regex;
use serde_json::{json, Value};

use crate::read::{self, FileCursor, Format, ReadSpec, COMPONENT};
use crate::text::{TimeFormat, TimeFormats};
use crate::util::Splitter;

const FORMATS: &[&str] = &[
    "text", "csv", "json", "parquet", "orc", "excel", "xml", "binary", "avro", "markdown",
];

/// The source's options.
pub const SOURCE_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required("path", OptionKind::String, "File or directory to read (directories are read recursively; names starting with '.' or '_' are skipped)."),
    OptionSpec::required("file_format_type", OptionKind::Enum(FORMATS), "File format: text, csv, json or parquet (orc, excel, xml, binary are not supported)."),
    OptionSpec::optional("schema", OptionKind::Object, None, "schema { fields { name = type } }: required for text (else one `content` column), csv and json; parquet reads the file's own."),
    OptionSpec::optional("read_columns", OptionKind::List, None, "Columns to read, in output order."),
    OptionSpec::optional("field_delimiter", OptionKind::String, Some("\\u0001 (text), , (csv)"), "Field separator, a Java regex as in SeaTunnel (\"\\\\|\" is a literal |)."),
    OptionSpec::optional("delimiter", OptionKind::String, None, "Old spelling of field_delimiter."),
    OptionSpec::optional("row_delimiter", OptionKind::String, Some("\\n"), "Row separator; lines end at \\n (a trailing \\r is dropped)."),
    OptionSpec::optional("parse_partition_from_path", OptionKind::Bool, Some("true"), "Add hive-style `k=v` directories of the file path as string columns."),
    OptionSpec::optional("date_format", OptionKind::String, Some("yyyy-MM-dd"), "Date format of text and csv."),
    OptionSpec::optional("datetime_format", OptionKind::String, Some("yyyy-MM-dd HH:mm:ss"), "Date-time format of text and csv."),
    OptionSpec::optional("time_format", OptionKind::String, Some("HH:mm:ss"), "Time format of text and csv."),
    OptionSpec::optional("skip_header_row_number", OptionKind::Int, Some("0"), "Lines to skip at the start of each text or csv file."),
    OptionSpec::optional("csv_use_header_line", OptionKind::Bool, Some("false"), "CSV: the first line names the columns (matched to the schema by name)."),
    OptionSpec::optional("encoding", OptionKind::String, Some("UTF-8"), "Character set of text, csv and json files."),
    OptionSpec::optional("compress_codec", OptionKind::Enum(&["none", "lzo"]), Some("none"), "Compression of text, csv and json files (lzop files are also recognised by their magic bytes); parquet is detected."),
    OptionSpec::optional("file_filter_pattern", OptionKind::String, None, "Regex a file's name (or full path) must match to be read."),
    OptionSpec::optional("null_format", OptionKind::String, None, "Text that stands for null in text and csv."),
    OptionSpec::optional("batch_size", OptionKind::Int, Some("8192"), "Rows per batch read."),
    OptionSpec::optional("sheet_name", OptionKind::String, None, "Excel only (not supported)."),
    OptionSpec::optional("enable_file_split", OptionKind::Bool, Some("text and json: true; csv: false"), "Split large uncompressed text, csv and json files at line boundaries, so that several readers share a file (csv: only when no quoted value spans lines)."),
    OptionSpec::optional("file_split_size", OptionKind::Int, Some("134217728"), "Largest part of a split file, in bytes."),
];

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

fn time_formats(o: &mut Options) -> Result<TimeFormats> {
    let mut get = |key: &str, default: &str| -> Result<Option<TimeFormat>> {
        Ok(match o.string(key)? {
            Some(p) if p != default => Some(TimeFormat::from_java(&p)),
            _ => None,
        })
    };
    Ok(TimeFormats {
        date: get("date_format", "yyyy-MM-dd")?,
        datetime: get("datetime_format", "yyyy-MM-dd HH:mm:ss")?,
        time: get("time_format", "HH:mm:ss")?,
    })
}

/// Reads an `encoding` option: `None` for UTF-8.
pub fn read_encoding(o: &mut Options) -> Result<Option<&'static encoding_rs::Encoding>> {
    match o.string("encoding")? {
        None => Ok(None),
        Some(e) => match encoding_rs::Encoding::for_label(e.trim().as_bytes()) {
            Some(enc) if enc == encoding_rs::UTF_8 => Ok(None),
            Some(enc) => Ok(Some(enc)),
            None => Err(o.error("encoding", format!("unknown character set '{e}'"))),
        },
    }
}

/// Reads `file_format_type`, rejecting the formats SeaTunnel has and Ferry has not.
pub fn read_format(o: &mut Options, allowed: &[&'static str]) -> Result<Option<Format>> {
    Ok(match o.enum_value("file_format_type", allowed)? {
        None => None,
        Some("text") => Some(Format::Text),
        Some("csv") => Some(Format::Csv),
        Some("json") => Some(Format::Json),
        Some("parquet") => Some(Format::Parquet),
        Some(other) => {
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
        "Reads text, csv, json and parquet files from a local path, with hive-style partition columns"
    }

    fn options(&self) -> &'static [OptionSpec] {
        SOURCE_OPTIONS
    }

    fn create(&self, o: &mut Options, job: &JobContext) -> Result<Arc<dyn Source>> {
        let name = table_name(o)?;
        let path = PathBuf::from(o.required_string("path")?);
        let format = read_format(o, FORMATS)?
            .ok_or_else(|| o.error("file_format_type", "is required but not set"))?;
        let declared = match o.object("schema")? {
            None => None,
            Some(s) => {
                let fields = match s.get("fields") {
                    Some(Value::Object(f)) => f.clone(),
                    _ => {
                        return Err(
                            o.error("schema", "must contain a `fields { name = type, … }` block")
                        )
                    }
                };
                Some(schema_from_fields(&fields).map_err(|e| o.error("schema.fields", e.0))?)
            }
        };
        let read_columns = o.string_list("read_columns")?;
        let delim = match o.get_any(&["field_delimiter", "delimiter"]) {
            Some((k, Value::String(s))) => Some((k, unescape_option(&s))),
            Some((k, v)) => return Err(o.error(&k, format!("expected text, found {v}"))),
            None => None,
        };
        let splitter = match &delim {
            Some((k, d)) => Splitter::from_java_regex(d).map_err(|e| o.error(k, e))?,
            None if format == Format::Csv => Splitter::Literal(",".into()),
            None => Splitter::Literal("\u{1}".into()),
        };
        let _ = o.string("row_delimiter")?;
        let parse_partition = o.bool("parse_partition_from_path")?.unwrap_or(true);
        let formats = time_formats(o)?;
        let skip_header = o.u64("skip_header_row_number")?.unwrap_or(0);
        let csv_use_header_line = o.bool("csv_use_header_line")?.unwrap_or(false);
        let encoding = read_encoding(o)?;
        let _ = o.enum_value("compress_codec", &["none", "lzo"])?;
        let filter = match o.string("file_filter_pattern")? {
            None => None,
            Some(p) => Some(Regex::new(&format!("^(?:{p})$")).map_err(|e| {
                o.error(
                    "file_filter_pattern",
                    format!("invalid regular expression: {e}"),
                )
            })?),
        };
        let null_format = o.string("null_format")?;
        let batch_size = o.u64("batch_size")?.unwrap_or(8192).max(1) as usize;
        let split = SplitRule {
            enabled: o.bool("enable_file_split")?,
            size: match o.u64("file_split_size")? {
                Some(0) => return Err(o.error("file_split_size", "must be greater than 0")),
                Some(n) => n,
                None => DEFAULT_SPLIT_SIZE,
            },
        };
        if o.string("sheet_name")?.is_some() {
            return Err(o.error(
                "sheet_name",
                "excel files are not supported by Ferry's LocalFile",
            ));
        }
        o.finish(SOURCE_OPTIONS)?;

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
        let (file_schema, whole_line) = match (declared, format) {
            (Some(s), _) => (s, false),
            (None, Format::Text) => (
                Schema::new(vec![Field::new("content", DataType::Utf8, true)]),
                true,
            ),
            (None, Format::Parquet) => match files.first() {
                Some(f) => (read::parquet_schema(f)?, false),
                None => {
                    return Err(FerryError::external(
                        COMPONENT,
                        format!(
                        "no parquet file under '{}' to take the schema from: add a `schema` block",
                        path.display()
                    ),
                    ))
                }
            },
            (None, _) => return Err(o.error("schema", "is required for the csv and json formats")),
        };
        let projection: Vec<usize> = match &read_columns {
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
        Ok(Arc::new(LocalFileSource {
            table: name.into(),
            output: Arc::new(Schema::new(out_fields)),
            root,
            path,
            filter,
            partition_keys,
            spec,
            split,
            streaming: job.mode == JobMode::Streaming,
        }))
    }
}

/// SeaTunnel's `file_split_size` default: 128 MiB.
const DEFAULT_SPLIT_SIZE: u64 = 128 << 20;
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

/// A configured `LocalFile` source.
#[derive(Debug)]
pub struct LocalFileSource {
    table: Arc<str>,
    output: SchemaRef,
    root: PathBuf,
    path: PathBuf,
    filter: Option<Regex>,
    partition_keys: Vec<String>,
    spec: Arc<ReadSpec>,
    split: SplitRule,
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
        vec![TableSchema::new(self.table.clone(), self.output.clone())]
    }

    fn create_enumerator(
        &self,
        ctx: &EnumeratorContext,
        restored: Option<Value>,
    ) -> Result<Box<dyn SplitEnumerator>> {
        let mut e = FileEnumerator {
            path: self.path.clone(),
            filter: self.filter.clone(),
            parallelism: ctx.parallelism.max(1),
            streaming: self.streaming,
            seen: BTreeSet::new(),
            next_reader: 0,
            pending: VecDeque::new(),
            listed_once: false,
            spec: self.spec.clone(),
            split: self.split,
        };
        if let Some(state) = restored {
            e.restore(&state)?;
        }
        Ok(Box::new(e))
    }

    fn create_reader(&self, _ctx: &ReaderContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(FileReader {
            table: self.table.clone(),
            output: self.output.clone(),
            root: self.root.clone(),
            partition_keys: self.partition_keys.clone(),
            spec: self.spec.clone(),
            queue: VecDeque::new(),
            current: None,
            no_more: false,
        }))
    }
}

/// Lists files and hands each out once; remembers what it handed out.
struct FileEnumerator {
    path: PathBuf,
    filter: Option<Regex>,
    parallelism: usize,
    streaming: bool,
    seen: BTreeSet<String>,
    next_reader: usize,
    /// Splits given back by failed readers, to assign again.
    pending: VecDeque<(usize, Split)>,
    listed_once: bool,
    spec: Arc<ReadSpec>,
    split: SplitRule,
}

fn new_split(path: &str) -> Split {
    Split {
        id: path.to_string(),
        state: json!({"path": path, "rows": 0}),
    }
}

/// A split of the lines of `path` in `range`; its state counts the rows read in it.
fn range_split(path: &str, range: read::ByteRange) -> Split {
    Split {
        id: format!("{path}@{}-{}", range.start, range.end),
        state: json!({"path": path, "start": range.start, "end": range.end, "rows": 0}),
    }
}

impl FileEnumerator {
    fn restore(&mut self, state: &Value) -> Result<()> {
        let bad = || FerryError::internal("LocalFile enumerator state is not the shape it wrote");
        for p in state
            .get("seen")
            .and_then(Value::as_array)
            .ok_or_else(bad)?
        {
            self.seen.insert(p.as_str().ok_or_else(bad)?.to_string());
        }
        self.next_reader = state
            .get("next_reader")
            .and_then(Value::as_u64)
            .unwrap_or(0) as usize;
        for s in state
            .get("pending")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let reader = s.get("reader").and_then(Value::as_u64).ok_or_else(bad)? as usize;
            let split: Split = serde_json::from_value(s.get("split").cloned().ok_or_else(bad)?)
                .map_err(|_| bad())?;
            self.pending.push_back((reader % self.parallelism, split));
        }
        self.listed_once = state
            .get("listed")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(())
    }
}

impl FileEnumerator {
    /// The splits of a newly found file: byte ranges when it is split, else the file.
    fn splits_of(&self, f: &Path, key: &str) -> Result<Vec<Split>> {
        if self.split.applies(&self.spec) {
            let len = std::fs::metadata(f)
                .map_err(|e| FerryError::io(COMPONENT, f.display(), e))?
                .len();
            let parts = self.split.parts(len, self.parallelism);
            if let Some(ranges) = plan_ranges(f, &self.spec, parts)? {
                return Ok(ranges.into_iter().map(|r| range_split(key, r)).collect());
            }
        }
        Ok(vec![new_split(key)])
    }
}

impl SplitEnumerator for FileEnumerator {
    fn discover(&mut self) -> Result<Vec<(usize, Split)>> {
        let mut out: Vec<(usize, Split)> = self.pending.drain(..).collect();
        if self.listed_once && !self.streaming {
            return Ok(out);
        }
        let files = match list_files(&self.path, self.filter.as_ref()) {
            Ok(f) => f,
            // A streaming source may watch a directory that comes and goes.
            Err(_) if self.streaming && self.listed_once => Vec::new(),
            Err(e) => return Err(e),
        };
        self.listed_once = true;
        for f in files {
            let key = f.to_string_lossy().into_owned();
            if self.seen.insert(key.clone()) {
                for split in self.splits_of(&f, &key)? {
                    out.push((self.next_reader % self.parallelism, split));
                    self.next_reader += 1;
                }
            }
        }
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
        let pending: Vec<Value> = self
            .pending
            .iter()
            .map(|(r, s)| json!({"reader": r, "split": s}))
            .collect();
        Ok(
            json!({"seen": self.seen, "next_reader": self.next_reader, "pending": pending, "listed": self.listed_once}),
        )
    }
}

struct OpenFile {
    split: Split,
    path: PathBuf,
    cursor: Box<dyn FileCursor>,
    partitions: Vec<ArrayRef>,
    partition_values: Vec<Option<String>>,
}

/// Reads its files one after the other.
struct FileReader {
    table: Arc<str>,
    output: SchemaRef,
    root: PathBuf,
    partition_keys: Vec<String>,
    spec: Arc<ReadSpec>,
    queue: VecDeque<Split>,
    current: Option<OpenFile>,
    no_more: bool,
}

fn split_rows(s: &Split) -> u64 {
    s.state.get("rows").and_then(Value::as_u64).unwrap_or(0)
}

fn split_range(s: &Split) -> Option<read::ByteRange> {
    Some(read::ByteRange {
        start: s.state.get("start")?.as_u64()?,
        end: s.state.get("end")?.as_u64()?,
    })
}

fn split_path(s: &Split) -> String {
    s.state
        .get("path")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| s.id.clone())
}

impl FileReader {
    fn open_next(&mut self) -> Result<bool> {
        let Some(split) = self.queue.pop_front() else {
            return Ok(false);
        };
        let path = PathBuf::from(split_path(&split));
        let cursor = read::open(&self.spec, &path, split_range(&split), split_rows(&split))?;
        let found = partitions_of(&self.root, &path);
        let partition_values = self
            .partition_keys
            .iter()
            .map(|k| found.iter().find(|(fk, _)| fk == k).map(|(_, v)| v.clone()))
            .collect();
        self.current = Some(OpenFile {
            split,
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
                    let mut cols = b.columns().to_vec();
                    cols.extend(cur.partitions.iter().cloned());
                    let data = RecordBatch::try_new_with_options(
                        self.output.clone(),
                        cols,
                        &RecordBatchOptions::new().with_row_count(Some(n)),
                    )
                    .map_err(|e| {
                        FerryError::data(COMPONENT, format!("{}: {e}", cur.path.display()))
                    })?;
                    let rows = cur.cursor.position();
                    if let Some(state) = cur.split.state.as_object_mut() {
                        state.insert("rows".into(), json!(rows));
                    }
                    return Ok(ReadStatus::Batch(ChangeBatch::inserts(
                        self.table.clone(),
                        data,
                    )));
                }
            }
        }
    }

    fn snapshot(&mut self, _checkpoint_id: u64) -> Result<Vec<Split>> {
        let mut out: Vec<Split> = self.current.iter().map(|c| c.split.clone()).collect();
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
