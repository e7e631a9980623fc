//! Reading one file as record batches, resumable at a row count: text and csv (line
//! based, or arrow-csv for flat csv), json (one object per line) and parquet.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, ListArray, MapArray, RecordBatch, RecordBatchOptions,
    StructArray,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use ferry_api::value::json_to_array;
use ferry_api::{FerryError, Result};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use serde_json::Value;

use crate::lzo::LzopReader;
use crate::text::{Col, TimeFormats};
use crate::util::Splitter;
use ferry_formats::json_lines::JsonDecoder;

/// The component name in errors.
pub const COMPONENT: &str = "LocalFile";

/// File formats the connector reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// SeaTunnel text: delimiter-separated, no quoting, nested values by level separators.
    Text,
    /// CSV: like text, with quoting.
    Csv,
    /// One JSON object per line.
    Json,
    /// Apache Parquet.
    Parquet,
}

impl Format {
    /// The file name suffix SeaTunnel gives this format.
    pub fn suffix(self) -> &'static str {
        match self {
            Format::Text => ".txt",
            Format::Csv => ".csv",
            Format::Json => ".json",
            Format::Parquet => ".parquet",
        }
    }
}

/// How to read the files of a source; shared by all readers.
#[derive(Debug, Clone)]
pub struct ReadSpec {
    /// The format.
    pub format: Format,
    /// The declared columns of the files (all of them, in file order), or `None` for
    /// text without a schema (one `content` column) and parquet (the file's own).
    pub file_schema: SchemaRef,
    /// Indices into `file_schema` of the columns to produce, in output order.
    pub projection: Vec<usize>,
    /// Whether text has no schema: each line is one `content` value.
    pub whole_line: bool,
    /// The top-level delimiter (text and csv).
    pub splitter: Splitter,
    /// Lines to skip at the start of every file (text and csv).
    pub skip_header: u64,
    /// CSV: the first line names the columns.
    pub csv_use_header_line: bool,
    /// Date and time formats for text and csv.
    pub formats: TimeFormats,
    /// Text that stands for null (text and csv), besides blank.
    pub null_format: Option<String>,
    /// Non-UTF-8 encoding of text, csv and json files.
    pub encoding: Option<&'static encoding_rs::Encoding>,
    /// Rows per batch.
    pub batch_size: usize,
}

impl ReadSpec {
    /// The schema of the batches a cursor yields (the projected file columns).
    pub fn projected_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.projection
                .iter()
                .map(|i| self.file_schema.field(*i).clone())
                .collect::<Vec<_>>(),
        ))
    }
}

/// Reads one file from a given row on; yields batches of the projected schema.
pub trait FileCursor: Send {
    /// The next batch, or `None` at the end of the file.
    fn next_batch(&mut self) -> Result<Option<RecordBatch>>;
    /// Units of progress consumed so far (lines or records after the header, or parquet
    /// rows): what a restored cursor is given as `skip` to resume here.
    fn position(&self) -> u64;
}

fn ext_err(path: &Path, msg: impl std::fmt::Display) -> FerryError {
    FerryError::external(COMPONENT, format!("{}: {msg}", path.display()))
}

fn data_err(path: &Path, msg: impl std::fmt::Display) -> FerryError {
    FerryError::data(COMPONENT, format!("{}: {msg}", path.display()))
}

/// A part of a file: the lines from byte `start` (a line start) up to byte `end` (a line
/// start, or the end of the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

/// Whether the file starts as an lzop file does.
pub fn is_lzop(head: &[u8]) -> bool {
    head.starts_with(&[0x89, b'L', b'Z', b'O', 0])
}

/// Line numbers for errors: counted from the file's start, or from a range's start, in
/// which case the lines before the range are counted only when an error needs the number.
#[derive(Debug, Clone)]
struct LineBase {
    path: std::path::PathBuf,
    range_start: Option<u64>,
}

impl LineBase {
    /// The file's line number of line `n` as counted by the cursor (1-based).
    fn absolute(&self, n: u64) -> u64 {
        let Some(start) = self.range_start else {
            return n;
        };
        let before = || -> std::io::Result<u64> {
            let mut r = BufReader::new(File::open(&self.path)?).take(start);
            let mut count = 0u64;
            loop {
                let buf = r.fill_buf()?;
                if buf.is_empty() {
                    return Ok(count);
                }
                count += buf.iter().filter(|b| **b == b'\n').count() as u64;
                let len = buf.len();
                r.consume(len);
            }
        };
        before().map(|b| b + n).unwrap_or(n)
    }
}

/// Opens a text-like file, or a range of it, unwrapping the lzop container when the
/// whole file is one (SeaTunnel `compress_codec = "lzo"`; recognised by its magic bytes
/// whatever the option says; ranges are only made of uncompressed files).
fn open_bytes(path: &Path, range: Option<ByteRange>) -> Result<Box<dyn BufRead + Send>> {
    let mut f = File::open(path).map_err(|e| ext_err(path, e))?;
    if let Some(r) = range {
        f.seek(SeekFrom::Start(r.start))
            .map_err(|e| ext_err(path, e))?;
        return Ok(Box::new(BufReader::with_capacity(
            1 << 20,
            f.take(r.end.saturating_sub(r.start)),
        )));
    }
    let mut r = BufReader::with_capacity(1 << 20, f);
    let head = r.fill_buf().map_err(|e| ext_err(path, e))?;
    if is_lzop(head) {
        let lz = LzopReader::new(r).map_err(|e| ext_err(path, e))?;
        Ok(Box::new(BufReader::with_capacity(1 << 20, lz)))
    } else {
        Ok(Box::new(r))
    }
}

/// Opens a cursor on `path`, or on a range of it (text, csv, json: then the header lines
/// are outside every range), that skips `skip` units first.
pub fn open(
    spec: &Arc<ReadSpec>,
    path: &Path,
    range: Option<ByteRange>,
    skip: u64,
) -> Result<Box<dyn FileCursor>> {
    let line_mode = match spec.format {
        Format::Parquet => return Ok(Box::new(ParquetCursor::open(spec, path, skip)?)),
        Format::Csv if csv_fast_path(spec) => {
            return Ok(Box::new(CsvCursor::open(spec, path, range, skip)?))
        }
        Format::Json => LineMode::Json,
        Format::Csv => LineMode::Csv,
        Format::Text => LineMode::Text,
    };
    Ok(Box::new(LineCursor::open(
        spec, path, range, skip, line_mode,
    )?))
}

/// How many lines at the start of every file are not data: `skip_header_row_number`, and
/// the csv header line with `csv_use_header_line`.
pub fn header_lines(spec: &ReadSpec) -> u64 {
    match spec.format {
        Format::Json | Format::Parquet => 0,
        Format::Csv if spec.csv_use_header_line => spec.skip_header + 1,
        _ => spec.skip_header,
    }
}

/// Whether arrow-csv can read these files: flat columns, a one-byte delimiter, UTF-8, no
/// header mapping. Columns with a date format of their own are read as text and parsed
/// with it (see [`CsvCursor`]).
fn csv_fast_path(spec: &ReadSpec) -> bool {
    let flat = spec.file_schema.fields().iter().all(|f| {
        !matches!(
            f.data_type(),
            DataType::List(_)
                | DataType::Map(_, _)
                | DataType::Struct(_)
                | DataType::Timestamp(_, Some(_))
        )
    });
    let one_byte = spec.splitter.literal().is_some_and(|d| d.len() == 1);
    flat && one_byte
        && spec.encoding.is_none()
        && spec.null_format.is_none()
        && !spec.csv_use_header_line
        && !spec.whole_line
}

/// CSV through arrow-csv (quote-aware, vectorised parsing). Dates, times and timestamps
/// with a `date_format`/`datetime_format`/`time_format` are read as text and parsed with
/// the compiled pattern (arrow's parser knows only its own forms).
struct CsvCursor {
    reader: arrow_csv::reader::BufReader<Box<dyn BufRead + Send>>,
    target: SchemaRef,
    spec: Arc<ReadSpec>,
    path: std::path::PathBuf,
    pos: u64,
    skip: u64,
    first_line: u64,
    lines: LineBase,
}

impl CsvCursor {
    fn open(
        spec: &Arc<ReadSpec>,
        path: &Path,
        range: Option<ByteRange>,
        skip: u64,
    ) -> Result<Self> {
        // arrow-csv has no binary parser: read bytes columns as text and cast; read
        // temporal columns with a pattern as text and parse them.
        let read_schema = Arc::new(Schema::new(
            spec.file_schema
                .fields()
                .iter()
                .map(|f| {
                    if f.data_type() == &DataType::Binary
                        || spec.formats.has_format_for(f.data_type())
                    {
                        Field::new(f.name(), DataType::Utf8, true)
                    } else {
                        f.as_ref().clone()
                    }
                })
                .collect::<Vec<_>>(),
        ));
        let delim = spec
            .splitter
            .literal()
            .and_then(|d| d.bytes().next())
            .unwrap_or(b',');
        let start = if range.is_some() {
            skip as usize
        } else {
            (spec.skip_header + skip) as usize
        };
        let reader = arrow_csv::ReaderBuilder::new(read_schema)
            .with_header(false)
            .with_delimiter(delim)
            .with_batch_size(spec.batch_size)
            .with_truncated_rows(true)
            .with_bounds(start, usize::MAX)
            .with_projection(spec.projection.clone())
            .build_buffered(open_bytes(path, range)?)
            .map_err(|e| data_err(path, e))?;
        Ok(CsvCursor {
            reader,
            target: spec.projected_schema(),
            spec: spec.clone(),
            path: path.to_path_buf(),
            pos: skip,
            skip,
            first_line: start as u64 + 1,
            lines: LineBase {
                path: path.to_path_buf(),
                range_start: range.map(|r| r.start),
            },
        })
    }
}

impl FileCursor for CsvCursor {
    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        match self.reader.next() {
            None => Ok(None),
            Some(Err(e)) => Err(data_err(
                &self.path,
                format!(
                    "{e} (counting from line {} of the file)",
                    self.lines.absolute(self.first_line)
                ),
            )),
            Some(Ok(b)) => {
                // Lines are counted as records: exact unless quoted values span lines.
                let batch_line = self.first_line + (self.pos - self.skip);
                self.pos += b.num_rows() as u64;
                let mut cols = Vec::with_capacity(b.num_columns());
                for (k, (c, f)) in b.columns().iter().zip(self.target.fields()).enumerate() {
                    if c.data_type() == f.data_type() {
                        cols.push(c.clone());
                    } else if self.spec.formats.has_format_for(f.data_type()) {
                        let text = c.as_string::<i32>();
                        let parsed = self
                            .spec
                            .formats
                            .parse_column(text, f.data_type())
                            .map_err(|(row, e)| {
                                data_err(
                                    &self.path,
                                    format!(
                                        "line {}, column {} ('{}'): {e}",
                                        self.lines.absolute(batch_line + row as u64),
                                        self.spec.projection[k] + 1,
                                        f.name()
                                    ),
                                )
                            })?;
                        cols.push(parsed);
                    } else {
                        cols.push(arrow::compute::cast(c, f.data_type())?);
                    }
                }
                Ok(Some(RecordBatch::try_new(self.target.clone(), cols)?))
            }
        }
    }
    fn position(&self) -> u64 {
        self.pos
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LineMode {
    Text,
    Csv,
    Json,
}

/// Line-based reading for text, csv with nested values, and json.
struct LineCursor {
    spec: Arc<ReadSpec>,
    mode: LineMode,
    input: Box<dyn BufRead + Send>,
    path: std::path::PathBuf,
    /// Lines consumed after the header.
    pos: u64,
    /// Physical line number of the next line (1-based), in the file or the range.
    line_no: u64,
    lines: LineBase,
    buf: Vec<u8>,
    decoded: String,
    /// Builder per projected column (text/csv).
    cols: Vec<Col>,
    /// For each file column, the builder it goes to.
    slot: Vec<Option<usize>>,
    /// CSV: unquoted fields of the current line, reused.
    fields: Vec<String>,
    /// JSON: rows of the current batch, on the general path.
    json_rows: Vec<(u64, Value)>,
    /// JSON: the decoder straight into columns (the fast path).
    json: Option<JsonDecoder>,
    /// JSON: the lines of the current batch while the decoder reads it, to read them again
    /// on the general path if it gives up: their text, and (line number, end) of each.
    batch_text: String,
    batch_lines: Vec<(u64, usize)>,
    /// JSON: the current batch is on the general path.
    json_general: bool,
    /// Which builders got a value from the current line.
    filled: Vec<bool>,
    done: bool,
}

impl LineCursor {
    fn open(
        spec: &Arc<ReadSpec>,
        path: &Path,
        range: Option<ByteRange>,
        skip: u64,
        mode: LineMode,
    ) -> Result<Self> {
        let mut input = open_bytes(path, range)?;
        let mut buf = Vec::new();
        let mut line_no = 1;
        let mut header: Option<Vec<String>> = None;
        let header_lines = match mode {
            LineMode::Json => 0,
            // A range holds no header lines; the header itself is read from the file.
            _ if range.is_some() => 0,
            LineMode::Csv if spec.csv_use_header_line => spec.skip_header + 1,
            _ => spec.skip_header,
        };
        if range.is_some() && spec.csv_use_header_line && mode == LineMode::Csv {
            let mut whole = open_bytes(path, None)?;
            for _ in 0..=spec.skip_header {
                buf.clear();
                whole
                    .read_until(b'\n', &mut buf)
                    .map_err(|e| ext_err(path, e))?;
            }
            header = Some(split_csv(
                trim_eol(&String::from_utf8_lossy(&buf)),
                spec.splitter.literal().unwrap_or(","),
            ));
        }
        for i in 0..header_lines + skip {
            buf.clear();
            let n = input
                .read_until(b'\n', &mut buf)
                .map_err(|e| ext_err(path, e))?;
            if n == 0 {
                break;
            }
            if i + 1 == header_lines && spec.csv_use_header_line && mode == LineMode::Csv {
                header = Some(split_csv(
                    trim_eol(&String::from_utf8_lossy(&buf)),
                    spec.splitter.literal().unwrap_or(","),
                ));
            }
            line_no += 1;
        }
        let mut slot = vec![None; spec.file_schema.fields().len()];
        for (out, i) in spec.projection.iter().enumerate() {
            slot[*i] = Some(out);
        }
        if let Some(h) = header {
            // The header decides which position holds which declared column.
            let mut by_pos = vec![None; h.len()];
            for (out, i) in spec.projection.iter().enumerate() {
                let name = spec.file_schema.field(*i).name();
                match h.iter().position(|c| c.trim().eq_ignore_ascii_case(name)) {
                    Some(p) => by_pos[p] = Some(out),
                    None => {
                        return Err(data_err(
                            path,
                            format!(
                            "the header line has no column '{name}' (csv_use_header_line = true)"
                        ),
                        ))
                    }
                }
            }
            slot = by_pos;
        }
        let cols = if mode == LineMode::Json {
            Vec::new()
        } else {
            spec.projection
                .iter()
                .map(|i| Col::new(spec.file_schema.field(*i).data_type()))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| data_err(path, e))?
        };
        Ok(LineCursor {
            spec: spec.clone(),
            mode,
            input,
            path: path.to_path_buf(),
            pos: skip,
            line_no,
            lines: LineBase {
                path: path.to_path_buf(),
                range_start: range.map(|r| r.start),
            },
            buf,
            decoded: String::new(),
            cols,
            slot,
            fields: Vec::new(),
            json_rows: Vec::new(),
            json: (mode == LineMode::Json).then(|| {
                JsonDecoder::new(spec.projected_schema().fields().clone(), spec.batch_size)
            }),
            batch_text: String::new(),
            batch_lines: Vec::new(),
            json_general: false,
            filled: Vec::new(),
            done: false,
        })
    }

    /// Reads the next line into `self.decoded`/`self.buf`; false at the end.
    fn read_line(&mut self) -> Result<bool> {
        self.buf.clear();
        let n = self
            .input
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| ext_err(&self.path, e))?;
        if n == 0 {
            return Ok(false);
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        if let Some(enc) = self.spec.encoding {
            let (text, _) = enc.decode_without_bom_handling(&self.buf);
            self.decoded.clear();
            self.decoded.push_str(&text);
        }
        Ok(true)
    }

    fn parse_text_line(&mut self) -> Result<()> {
        let spec = self.spec.clone();
        let path = &self.path;
        let lines = &self.lines;
        let line_no = self.line_no;
        let text: &str = if spec.encoding.is_some() {
            &self.decoded
        } else {
            std::str::from_utf8(&self.buf)
                .map_err(|_| data_err(path, format!("line {}: not valid UTF-8 (set the `encoding` option to the file's character set)", lines.absolute(line_no))))?
        };
        let mut err: Option<(usize, usize, String)> = None;
        let cols = &mut self.cols;
        let slot = &self.slot;
        let filled = &mut self.filled;
        filled.clear();
        filled.resize(cols.len(), false);
        let mut push = |idx: usize, piece: &str| -> bool {
            if let Some(Some(out)) = slot.get(idx) {
                let col = &mut cols[*out];
                if spec.null_format.as_deref() == Some(piece) {
                    col.append_null();
                } else if let Err(e) = col.append(piece, 0, &spec.formats) {
                    err = Some((idx, *out, e));
                    return false;
                }
                filled[*out] = true;
            }
            true
        };
        if spec.whole_line {
            push(0, text);
        } else if self.mode == LineMode::Csv {
            split_csv_into(
                text,
                spec.splitter.literal().unwrap_or(","),
                &mut self.fields,
            );
            for (i, f) in self.fields.iter().enumerate() {
                if !push(i, f) {
                    break;
                }
            }
        } else {
            let mut i = 0;
            spec.splitter.for_each(text, |piece| {
                let ok = push(i, piece);
                i += 1;
                ok
            });
        }
        if let Some((idx, out, e)) = err {
            let name = spec.file_schema.field(spec.projection[out]).name();
            return Err(data_err(
                path,
                format!(
                    "line {}, column {} ('{name}'): {e}",
                    lines.absolute(line_no),
                    idx + 1
                ),
            ));
        }
        // Columns missing from a short line are null, as SeaTunnel does.
        for (c, f) in cols.iter_mut().zip(filled.iter()) {
            if !f {
                c.append_null();
            }
        }
        Ok(())
    }

    /// Reads the current JSON line: into the decoder while it reads this batch, else as a
    /// JSON value (the general path).
    fn json_line(&mut self) -> Result<()> {
        let text = if self.spec.encoding.is_some() {
            self.decoded.as_str()
        } else {
            std::str::from_utf8(&self.buf).map_err(|_| {
                data_err(&self.path, format!("line {}: not valid UTF-8 (set the `encoding` option to the file's character set)", self.lines.absolute(self.line_no)))
            })?
        };
        if !self.json_general {
            if let Some(d) = self.json.as_mut() {
                let decoded = d.decode_line(text).is_ok();
                self.batch_text.push_str(text);
                self.batch_lines.push((self.line_no, self.batch_text.len()));
                if !decoded {
                    self.move_to_general_path()?;
                }
                return Ok(());
            }
        }
        let v = json_object(text).map_err(|e| {
            data_err(
                &self.path,
                format!("line {}{e}", self.lines.absolute(self.line_no)),
            )
        })?;
        self.json_rows.push((self.line_no, v));
        Ok(())
    }

    /// Moves the current batch to the general path: its lines so far become JSON values.
    fn move_to_general_path(&mut self) -> Result<()> {
        if let Some(d) = self.json.as_mut() {
            d.reset();
        }
        self.json_general = true;
        let mut start = 0;
        for (line_no, end) in std::mem::take(&mut self.batch_lines) {
            let v = json_object(&self.batch_text[start..end]).map_err(|e| {
                data_err(
                    &self.path,
                    format!("line {}{e}", self.lines.absolute(line_no)),
                )
            })?;
            self.json_rows.push((line_no, v));
            start = end;
        }
        self.batch_text.clear();
        Ok(())
    }

    fn finish_json(&mut self, rows: usize) -> Result<RecordBatch> {
        if !self.json_general {
            if let Some(d) = self.json.as_mut() {
                match d.finish() {
                    Ok(cols) => {
                        self.batch_text.clear();
                        self.batch_lines.clear();
                        return Ok(RecordBatch::try_new_with_options(
                            self.spec.projected_schema(),
                            cols,
                            &RecordBatchOptions::new().with_row_count(Some(rows)),
                        )?);
                    }
                    Err(_) => self.move_to_general_path()?,
                }
            }
        }
        self.json_general = false;
        self.finish_json_batch()
    }

    fn finish_text_batch(&mut self, rows: usize) -> Result<RecordBatch> {
        let arrays = self
            .cols
            .iter_mut()
            .map(|c| c.finish())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| data_err(&self.path, e))?;
        Ok(RecordBatch::try_new_with_options(
            self.spec.projected_schema(),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }

    fn finish_json_batch(&mut self) -> Result<RecordBatch> {
        let fields: Fields = self
            .spec
            .projection
            .iter()
            .map(|i| Arc::new(self.spec.file_schema.field(*i).clone()))
            .collect();
        let dt = DataType::Struct(fields.clone());
        let refs: Vec<&Value> = self.json_rows.iter().map(|(_, v)| v).collect();
        let arr = match json_to_array(&refs, &dt) {
            Ok(a) => a,
            Err(_) => {
                // Find the line at fault to report it.
                for (line, v) in &self.json_rows {
                    if let Err(e) = json_to_array(&[v], &dt) {
                        return Err(data_err(
                            &self.path,
                            format!("line {}: {e}", self.lines.absolute(*line)),
                        ));
                    }
                }
                return Err(data_err(&self.path, "json rows do not fit the schema"));
            }
        };
        self.json_rows.clear();
        let st = arr.as_struct();
        Ok(RecordBatch::try_new_with_options(
            self.spec.projected_schema(),
            st.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(st.len())),
        )?)
    }
}

impl FileCursor for LineCursor {
    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if self.done {
            return Ok(None);
        }
        let mut rows = 0usize;
        while rows < self.spec.batch_size {
            if !self.read_line()? {
                self.done = true;
                break;
            }
            let empty = self.buf.is_empty();
            if !empty {
                if self.mode == LineMode::Json {
                    self.json_line()?;
                } else {
                    self.parse_text_line()?;
                }
                rows += 1;
            }
            self.pos += 1;
            self.line_no += 1;
        }
        if rows == 0 {
            return Ok(None);
        }
        let b = if self.mode == LineMode::Json {
            self.finish_json(rows)?
        } else {
            self.finish_text_batch(rows)?
        };
        Ok(Some(b))
    }
    fn position(&self) -> u64 {
        self.pos
    }
}

/// A JSON line as a value, which must be an object; the error follows "line N".
fn json_object(text: &str) -> std::result::Result<Value, String> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| format!(", column {}: invalid JSON: {e}", e.column()))?;
    if !v.is_object() {
        return Err(format!(": expected a JSON object, found {v}"));
    }
    Ok(v)
}

fn trim_eol(s: &str) -> &str {
    s.trim_end_matches(['\n', '\r'])
}

fn split_csv(line: &str, delim: &str) -> Vec<String> {
    let mut v = Vec::new();
    split_csv_into(line, delim, &mut v);
    v
}

/// Splits a CSV line honouring double quotes (`""` is a quote inside quotes), reusing
/// the strings in `out`.
fn split_csv_into(line: &str, delim: &str, out: &mut Vec<String>) {
    let mut n = 0usize;
    let cur = |n: &mut usize, out: &mut Vec<String>| {
        if *n == out.len() {
            out.push(String::new());
        }
        out[*n].clear();
    };
    cur(&mut n, out);
    let mut in_quotes = false;
    let mut rest = line;
    while !rest.is_empty() {
        if in_quotes {
            if let Some(r) = rest.strip_prefix("\"\"") {
                out[n].push('"');
                rest = r;
            } else if let Some(r) = rest.strip_prefix('"') {
                in_quotes = false;
                rest = r;
            } else {
                let c = rest.chars().next().unwrap_or('"');
                out[n].push(c);
                rest = &rest[c.len_utf8()..];
            }
        } else if let Some(r) = rest.strip_prefix(delim) {
            n += 1;
            cur(&mut n, out);
            rest = r;
        } else if out[n].is_empty() && rest.starts_with('"') {
            in_quotes = true;
            rest = &rest[1..];
        } else {
            let c = rest.chars().next().unwrap_or(',');
            out[n].push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out.truncate(n + 1);
}

/// Parquet through the arrow reader, conformed to the source's schema.
struct ParquetCursor {
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    target: SchemaRef,
    /// For each target column, its index in the read batches.
    source_index: Vec<Option<usize>>,
    path: std::path::PathBuf,
    pos: u64,
}

impl ParquetCursor {
    fn open(spec: &Arc<ReadSpec>, path: &Path, skip: u64) -> Result<Self> {
        let f = File::open(path).map_err(|e| ext_err(path, e))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(f)
            .map_err(|e| data_err(path, format!("not a readable parquet file: {e}")))?;
        let file_schema = builder.schema().clone();
        let target = spec.projected_schema();
        let mut roots = Vec::new();
        let mut wanted = Vec::new();
        for field in target.fields() {
            let idx = file_schema
                .fields()
                .iter()
                .position(|f| f.name() == field.name())
                .or_else(|| {
                    file_schema
                        .fields()
                        .iter()
                        .position(|f| f.name().eq_ignore_ascii_case(field.name()))
                });
            match idx {
                Some(i) => {
                    roots.push(i);
                    wanted.push(Some(i));
                }
                None => {
                    return Err(data_err(
                        path,
                        format!("the file has no column '{}'", field.name()),
                    ))
                }
            }
        }
        roots.sort_unstable();
        roots.dedup();
        // Read batches hold the selected roots in file order.
        let source_index = wanted
            .iter()
            .map(|w| w.and_then(|i| roots.iter().position(|r| *r == i)))
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        let reader = builder
            .with_projection(mask)
            .with_batch_size(spec.batch_size)
            .with_offset(skip as usize)
            .build()
            .map_err(|e| data_err(path, e))?;
        Ok(ParquetCursor {
            reader,
            target,
            source_index,
            path: path.to_path_buf(),
            pos: skip,
        })
    }
}

impl FileCursor for ParquetCursor {
    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        match self.reader.next() {
            None => Ok(None),
            Some(Err(e)) => Err(data_err(&self.path, e)),
            Some(Ok(b)) => {
                self.pos += b.num_rows() as u64;
                let mut cols = Vec::with_capacity(self.target.fields().len());
                for (f, src) in self.target.fields().iter().zip(&self.source_index) {
                    let c = match src {
                        Some(i) => conform(b.column(*i), f.data_type()).map_err(|e| {
                            data_err(&self.path, format!("column '{}': {e}", f.name()))
                        })?,
                        None => new_null_array(f.data_type(), b.num_rows()),
                    };
                    cols.push(c);
                }
                Ok(Some(RecordBatch::try_new_with_options(
                    self.target.clone(),
                    cols,
                    &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
                )?))
            }
        }
    }
    fn position(&self) -> u64 {
        self.pos
    }
}

/// The parquet file's schema in Ferry's types (see [`normalize_type`]).
pub fn parquet_schema(path: &Path) -> Result<Schema> {
    let f = File::open(path).map_err(|e| ext_err(path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(f)
        .map_err(|e| data_err(path, format!("not a readable parquet file: {e}")))?;
    // Files Ferry wrote carry their Arrow schema; in others (SeaTunnel's, through Avro) a
    // UTC-adjusted timestamp holds a SeaTunnel local `timestamp`.
    let native = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .is_some_and(|kv| kv.iter().any(|k| k.key == "ARROW:schema"));
    Ok(Schema::new(
        builder
            .schema()
            .fields()
            .iter()
            .map(|f| {
                let dt = normalize_type(f.data_type());
                Field::new(
                    f.name(),
                    if native { dt } else { drop_timezones(&dt) },
                    true,
                )
            })
            .collect::<Vec<_>>(),
    ))
}

fn drop_timezones(dt: &DataType) -> DataType {
    match dt {
        DataType::Timestamp(u, Some(_)) => DataType::Timestamp(*u, None),
        DataType::List(f) => DataType::List(Arc::new(Field::new(
            f.name(),
            drop_timezones(f.data_type()),
            true,
        ))),
        DataType::Map(entries, sorted) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                let _ = sorted;
                ferry_api::types::map_type(
                    drop_timezones(kv[0].data_type()),
                    drop_timezones(kv[1].data_type()),
                )
            }
            other => other.clone(),
        },
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| Field::new(f.name(), drop_timezones(f.data_type()), true))
                .collect::<Vec<_>>()
                .into(),
        ),
        other => other.clone(),
    }
}

/// The Ferry type for a type read from parquet: nanosecond (INT96) and millisecond
/// timestamps become microseconds, large/view strings plain ones, lists and maps take
/// Ferry's field names.
pub fn normalize_type(dt: &DataType) -> DataType {
    match dt {
        DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
        DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => {
            DataType::Binary
        }
        DataType::Time32(_) | DataType::Time64(_) => DataType::Time64(TimeUnit::Microsecond),
        DataType::Date64 => DataType::Date32,
        DataType::Float16 => DataType::Float32,
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 | DataType::UInt64 => DataType::Int64,
        DataType::Dictionary(_, v) => normalize_type(v),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => DataType::List(Arc::new(Field::new(
            "item",
            normalize_type(f.data_type()),
            true,
        ))),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => ferry_api::types::map_type(
                normalize_type(kv[0].data_type()),
                normalize_type(kv[1].data_type()),
            ),
            other => other.clone(),
        },
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| Field::new(f.name(), normalize_type(f.data_type()), true))
                .collect::<Vec<_>>()
                .into(),
        ),
        other => other.clone(),
    }
}

/// `array` as type `target`: nested values are rebuilt with the target's field names
/// (rows matched by name, then ignoring case, then by position), leaves are cast.
pub fn conform(array: &ArrayRef, target: &DataType) -> std::result::Result<ArrayRef, String> {
    if array.data_type() == target {
        return Ok(array.clone());
    }
    match target {
        DataType::List(f) => {
            let list: ListArray = match array.data_type() {
                DataType::List(_) => array.as_list::<i32>().clone(),
                DataType::LargeList(src) | DataType::FixedSizeList(src, _) => {
                    let as_list = DataType::List(src.clone());
                    arrow::compute::cast(array, &as_list)
                        .map_err(|e| e.to_string())?
                        .as_list::<i32>()
                        .clone()
                }
                other => return Err(format!("cannot read {other} as a list")),
            };
            let (_, offsets, values, nulls) = list.into_parts();
            let values = conform(&values, f.data_type())?;
            Ok(Arc::new(
                ListArray::try_new(f.clone(), offsets, values, nulls).map_err(|e| e.to_string())?,
            ))
        }
        DataType::Map(entries, sorted) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err("bad map type".into());
            };
            let m = match array.data_type() {
                DataType::Map(_, _) => array.as_map().clone(),
                other => return Err(format!("cannot read {other} as a map")),
            };
            let (_, offsets, entries_arr, nulls, _) = m.into_parts();
            let k = conform(entries_arr.column(0), kv[0].data_type())?;
            let v = conform(entries_arr.column(1), kv[1].data_type())?;
            let st =
                StructArray::try_new(kv.clone(), vec![k, v], None).map_err(|e| e.to_string())?;
            Ok(Arc::new(
                MapArray::try_new(entries.clone(), offsets, st, nulls, *sorted)
                    .map_err(|e| e.to_string())?,
            ))
        }
        DataType::Struct(fields) => {
            let s = match array.data_type() {
                DataType::Struct(_) => array.as_struct(),
                other => return Err(format!("cannot read {other} as a row")),
            };
            let DataType::Struct(src_fields) = s.data_type() else {
                return Err("bad row".into());
            };
            let mut cols = Vec::with_capacity(fields.len());
            for (pos, f) in fields.iter().enumerate() {
                let idx = src_fields
                    .iter()
                    .position(|g| g.name() == f.name())
                    .or_else(|| {
                        src_fields
                            .iter()
                            .position(|g| g.name().eq_ignore_ascii_case(f.name()))
                    })
                    .or(if src_fields.len() == fields.len() {
                        Some(pos)
                    } else {
                        None
                    });
                cols.push(match idx {
                    Some(i) => conform(s.column(i), f.data_type())
                        .map_err(|e| format!("field '{}': {e}", f.name()))?,
                    None => new_null_array(f.data_type(), s.len()),
                });
            }
            Ok(Arc::new(
                StructArray::try_new(fields.clone(), cols, s.nulls().cloned())
                    .map_err(|e| e.to_string())?,
            ))
        }
        _ => arrow::compute::cast(array, target).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_lines_split_with_quotes() {
        assert_eq!(
            split_csv("a,\"b,c\",\"d\"\"e\",", ","),
            vec!["a", "b,c", "d\"e", ""]
        );
        assert_eq!(split_csv("", ","), vec![""]);
    }

    #[test]
    fn csv_with_date_patterns_stays_on_arrow_csv() {
        use crate::text::TimeFormat;
        let schema = Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            Field::new("d", DataType::Date32, true),
        ]);
        let mut spec = ReadSpec {
            format: Format::Csv,
            file_schema: Arc::new(schema),
            projection: vec![0, 1],
            whole_line: false,
            splitter: Splitter::Literal(",".into()),
            skip_header: 0,
            csv_use_header_line: false,
            formats: TimeFormats {
                date: Some(TimeFormat::from_java("yyyy.MM.dd")),
                datetime: Some(TimeFormat::from_java("yyyy-MM-dd'T'HH:mm:ss")),
                time: Some(TimeFormat::from_java("HH:mm:ss.SSS")),
            },
            null_format: None,
            encoding: None,
            batch_size: 10,
        };
        assert!(csv_fast_path(&spec));
        spec.csv_use_header_line = true;
        assert!(!csv_fast_path(&spec));
    }

    #[test]
    fn normalized_types_follow_ferry() {
        let dt = DataType::Map(
            Arc::new(Field::new(
                "key_value",
                DataType::Struct(
                    vec![
                        Field::new("key", DataType::Utf8, false),
                        Field::new("value", DataType::LargeUtf8, true),
                    ]
                    .into(),
                ),
                false,
            )),
            false,
        );
        assert_eq!(
            normalize_type(&dt),
            ferry_api::types::map_type(DataType::Utf8, DataType::Utf8)
        );
        assert_eq!(
            normalize_type(&DataType::Timestamp(TimeUnit::Nanosecond, None)),
            ferry_api::types::TIMESTAMP_TYPE
        );
    }
}
